"""test_env - BELLOWS_CONTROL, BELLOWS_PUBLISH and BELLOWS_JOB.

bellows.Agent with no job, control or publish joins the job
$BELLOWS_JOB names on the bellowsd $BELLOWS_CONTROL and $BELLOWS_PUBLISH
name; an explicit job wins over the environment; with neither a job
argument nor $BELLOWS_JOB it raises ValueError saying so.
"""

from __future__ import annotations

import os
import subprocess
import time
import unittest

import bellows
import support

LAYERS = [bellows.Layer("w", (4, 8))]
FIXED = """\
daemon: {apply_lag: 1, heartbeat_ms: 200}
jobs:
  - match: "*"
    policies:
      - type: fixed
        params: {level: 2}
"""
VARS = ("BELLOWS_CONTROL", "BELLOWS_PUBLISH", "BELLOWS_JOB")


def jobs_of(control: str) -> str:
    # bellows status takes $BELLOWS_JOB as its --job too: every job here.
    env = {k: v for k, v in os.environ.items() if k not in VARS}
    r = subprocess.run([str(support.BELLOWS), "status", "--control", control,
                        "--timeout-ms", "500"], capture_output=True,
                       text=True, timeout=30, env=env)
    return r.stdout


class EnvTest(unittest.TestCase):
    def setUp(self):
        self.saved = {v: os.environ.get(v) for v in VARS}

    def tearDown(self):
        for v, val in self.saved.items():
            if val is None:
                os.environ.pop(v, None)
            else:
                os.environ[v] = val

    def wait_for_job(self, control: str, job: str) -> str:
        deadline = time.monotonic() + 10
        out = ""
        while time.monotonic() < deadline:
            out = jobs_of(control)
            if f"job '{job}'" in out:
                return out
            time.sleep(0.05)
        self.fail(f"job '{job}' never joined; STATUS said:\n{out}")

    def test_the_environment_names_the_daemon_and_the_job(self):
        with support.Daemon(FIXED) as d:
            os.environ["BELLOWS_CONTROL"] = d.control
            os.environ["BELLOWS_PUBLISH"] = d.publish
            os.environ["BELLOWS_JOB"] = "py-env-job"
            with bellows.Agent(None, 0, 1, LAYERS,
                               decision_timeout_ms=200) as a:
                a.step_begin()
                a.step_end()
                out = self.wait_for_job(d.control, "py-env-job")
            print("\n  " + out.splitlines()[0] if out else "")

    def test_an_explicit_job_wins_over_the_environment(self):
        with support.Daemon(FIXED) as d:
            os.environ["BELLOWS_CONTROL"] = d.control
            os.environ["BELLOWS_PUBLISH"] = d.publish
            os.environ["BELLOWS_JOB"] = "py-env-loses"
            with bellows.Agent("py-explicit", 0, 1, LAYERS,
                               decision_timeout_ms=200):
                out = self.wait_for_job(d.control, "py-explicit")
            self.assertNotIn("py-env-loses", out)

    def test_an_explicit_endpoint_wins_over_the_environment(self):
        with support.Daemon(FIXED) as d:
            os.environ["BELLOWS_CONTROL"] = "ipc:///nonexistent/control"
            os.environ["BELLOWS_PUBLISH"] = "ipc:///nonexistent/publish"
            with bellows.Agent("py-explicit-ep", 0, 1, LAYERS,
                               control=d.control, publish=d.publish,
                               decision_timeout_ms=200):
                self.wait_for_job(d.control, "py-explicit-ep")

    def test_no_job_anywhere_is_a_value_error(self):
        os.environ.pop("BELLOWS_JOB", None)
        with self.assertRaisesRegex(ValueError, "BELLOWS_JOB"):
            bellows.Agent(None, 0, 1, LAYERS)


if __name__ == "__main__":
    unittest.main()
