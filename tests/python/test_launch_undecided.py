"""test_launch_undecided - a launch bellowsd does not steer says so.

Two launches of one job under the same run identity, against a real
bellowsd: the second joins the first, ended, run at step 0, and bellowsd
drops its reports as stale. The Python agent of the second launch warns
on the "bellows" logger at its first window without a decision, and
close() logs the summary with the count; the first launch's summary is
an info line with none.
"""

from __future__ import annotations

import logging
import unittest

import torch

import bellows
import support

LAYERS = [bellows.Layer("w", (4, 8)), bellows.Layer("b", (4,))]
POLICY = """\
daemon: {apply_lag: 1, heartbeat_ms: 200}
jobs:
  - policies:
      - type: fixed
        params: {level: 2}
"""
WINDOWS = 5
STEPS = 4


def launch(daemon) -> list[str]:
    """One launch of job py-merged, run identity "same": its log lines."""
    logger = logging.getLogger("bellows")
    with unittest.TestCase().assertLogs(logger, logging.INFO) as logs:
        with bellows.Agent("py-merged", 0, 1, LAYERS,
                           control=daemon.control, publish=daemon.publish,
                           window_steps=STEPS, decision_timeout_ms=2000,
                           log_level=bellows._lib.LOG_INFO,
                           run_id="same") as a:
            for _ in range(WINDOWS * STEPS):
                a.step_begin()
                for i, layer in enumerate(LAYERS):
                    a.observe(i, torch.ones(layer.shape))
                a.step_end()
    return logs.output


class LaunchUndecidedTest(unittest.TestCase):
    def test_a_launch_merged_into_an_ended_run_warns_and_counts(self):
        with support.Daemon(POLICY) as daemon:
            try:
                first = launch(daemon)
                second = launch(daemon)
            except BaseException:
                print(daemon.tail())
                raise
            log = daemon.tail(200)
        self.assertIn("stale report of window 0", log)
        self.assertFalse([l for l in first if "decided before" in l], first)
        self.assertTrue(
            [l for l in first if l.startswith("INFO:bellows:") and
             f"{WINDOWS} windows," in l and
             "0 windows without a decision" in l], first)
        warned = [l for l in second if "was decided before this rank "
                  "reported it" in l]
        self.assertEqual(len(warned), 1, second)
        self.assertTrue(warned[0].startswith("WARNING:bellows:"))
        summary = [l for l in second if "closing job 'py-merged'" in l]
        self.assertEqual(len(summary), 1, second)
        self.assertTrue(summary[0].startswith("WARNING:bellows:"), summary)
        self.assertIn(f"{WINDOWS} windows without a decision", summary[0])
        print(f"\n  {warned[0]}\n  {summary[0]}")


if __name__ == "__main__":
    unittest.main()
