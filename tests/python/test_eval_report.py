"""test_eval_report - the trainer's evaluations reach the history and
``bellows report``.

A bellows.Agent against a real bellowsd that records its history: six
windows of two steps; the trainer reports an evaluation in windows 1, 3
and 5, through Agent.evaluation between steps (before window_end) or
through step_end's eval_accuracy/eval_loss fields. window_info must hold
each window's accuracy and loss (0 where none was given), and
``bellows report`` must show them: the text (the last and the best, one
row per evaluation), --json (accuracy, accuracy_best, eval_loss,
evaluations) and --html (a plot of them). A value outside 0..1 is
refused with EINVAL and records nothing.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import unittest

import bellows
import support
from bellows import _lib

LAYERS = [bellows.Layer("w", (4, 8)), bellows.Layer("b", (4,))]
FIXED = """\
daemon: {apply_lag: 1, heartbeat_ms: 200}
jobs:
  - match: "*"
    policies:
      - type: fixed
        params: {level: 0}
"""

# window -> (accuracy, loss, given through step_end rather than evaluation)
EVALS = {1: (0.5, 1.25, False), 3: (0.75, 0.5, True), 5: (0.625, 0.875, False)}
WINDOWS = 6


class EvalReport(unittest.TestCase):
    def test_evaluations_reach_the_history_and_the_report(self):
        with support.Daemon(FIXED, db=True) as daemon:
            with bellows.Agent("py-eval", 0, 1, LAYERS,
                               control=daemon.control,
                               publish=daemon.publish,
                               run_id="eval-run") as a:
                for w in range(WINDOWS):
                    acc, loss, in_step = EVALS.get(w, (0.0, 0.0, False))
                    for step in range(2):
                        a.step_begin()
                        fields = {}
                        if in_step and step == 1:
                            fields = {"eval_accuracy": acc,
                                      "eval_loss": loss}
                        a.step_end(lr=0.1, **fields)
                    with self.assertRaises(_lib.BellowsError) as cm:
                        a.evaluation(1.5, 0.1)
                    self.assertEqual(cm.exception.code, _lib.EINVAL)
                    if w in EVALS and not in_step:
                        a.evaluation(acc, loss)
                    a.window_end()
            log = daemon.tail(100)
            rc = daemon.stop()
            with sqlite3.connect(daemon.db) as db:
                rows = db.execute(
                    "SELECT window, eval_accuracy, eval_loss FROM "
                    "window_info ORDER BY window").fetchall()
            report = subprocess.run(
                [str(support.BELLOWS), "report", "--db", str(daemon.db)],
                capture_output=True, text=True, timeout=30)
            as_json = subprocess.run(
                [str(support.BELLOWS), "report", "--db", str(daemon.db),
                 "--json"], capture_output=True, text=True, timeout=30)
            html = daemon.tmp / "report.html"
            as_html = subprocess.run(
                [str(support.BELLOWS), "report", "--db", str(daemon.db),
                 "--html", str(html)], capture_output=True, text=True,
                timeout=30)
            page = html.read_text() if html.exists() else ""
        print(f"\n  (window, accuracy, loss): {rows}")
        self.assertEqual(rc, 0, log)
        self.assertEqual(rows, [(w, *EVALS.get(w, (0.0, 0.0))[:2])
                                for w in range(WINDOWS)], log)

        self.assertEqual(report.returncode, 0, report.stderr)
        text = report.stdout
        section = text[text.index("Accuracy (the trainer's evaluations)"):]
        print(section)
        self.assertIn("  3 evaluations; last 62.50% (loss 0.875) after "
                      "window 5 (epoch 0, step 11)\n", section)
        self.assertIn("  best 75.00% after window 3 (epoch 0)\n", section)
        for w, (acc, _, _) in EVALS.items():
            self.assertRegex(section,
                             rf"\n +{w} +0 +{2 * w + 1} +{100 * acc:.2f}% ")
        self.assertNotIn("not recorded", section)

        self.assertEqual(as_json.returncode, 0, as_json.stderr)
        d = json.loads(as_json.stdout)
        self.assertEqual(d["accuracy"], 0.625)
        self.assertEqual(d["accuracy_best"], 0.75)
        self.assertEqual(d["eval_loss"], 0.875)
        self.assertEqual(
            [(e["window"], e["accuracy"], e["loss"], e["last_step"])
             for e in d["evaluations"]],
            [(w, acc, loss, 2 * w + 1)
             for w, (acc, loss, _) in EVALS.items()])

        self.assertEqual(as_html.returncode, 0, as_html.stderr)
        self.assertIn("Test accuracy the trainer evaluated", page)


if __name__ == "__main__":
    unittest.main()
