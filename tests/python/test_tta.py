"""test_tta - bench/tta's report from synthetic trainer summaries.

The time to a target accuracy is the training time (wall time less the
evaluations so far) at the first evaluated window that reaches it; the
target is plain DDP's final accuracy on the same model, link and seed
less 0.5 point; ratios are per seed against plain; a run that never
reaches the target is marked; CPU per step is weighted by each window's
steps. No training runs here: the report builder
is fed the records the trainer's --json writes.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import unittest

SRC = pathlib.Path(os.environ.get(
    "BELLOWS_SOURCE_ROOT", pathlib.Path(__file__).resolve().parents[2]))
spec = importlib.util.spec_from_file_location(
    "tta_run", SRC / "bench" / "tta" / "run.py")
tta = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tta)


def window(acc: float, wall: float, evals: float) -> dict:
    return {"test_acc": acc, "wall_s": wall, "eval_s": evals}


def summary(config: str, seed: int, accs: list[float],
            step_ms: float, link: str = "loopback",
            cpu_ms: list[float] | None = None) -> dict:
    """A trainer summary: evaluations every 10 s of training, each
    taking 2 s; the final accuracy is the last evaluation's; cpu_ms,
    the CPU per step of each window (of 10 steps, then 30, 10, ...)."""
    ws = [window(a, 12.0 * (i + 1), 2.0 * (i + 1))
          for i, a in enumerate(accs)]
    for i, (w, c) in enumerate(zip(ws, cpu_ms or [])):
        w["times"] = {"steps": 30 if i % 2 else 10, "cpu_ms": c}
    return {"args": {"job": f"bench-tta-net-{link}-{config}-s{seed}",
                     "model": "net", "seed": seed},
            "windows": ws, "final_acc": accs[-1],
            "wall_s": ws[-1]["wall_s"], "eval_s": ws[-1]["eval_s"],
            "step_times_ms": [step_ms] * 5, "layers": []}


class TimeToTarget(unittest.TestCase):
    def test_first_evaluation_reaching_the_target_less_evaluations(self):
        ws = [window(0.70, 12, 2), window(0.85, 24, 4),
              window(0.90, 36, 6), window(0.84, 48, 8)]
        # 0.85 is reached at the second evaluation: 24 s less 4 s.
        self.assertEqual(tta.time_to_target(ws, 0.85), 20.0)
        # A later, higher evaluation does not move it.
        self.assertEqual(tta.time_to_target(ws, 0.80), 20.0)
        self.assertEqual(tta.time_to_target(ws, 0.70), 10.0)

    def test_a_run_that_never_reaches_it_has_no_time(self):
        ws = [window(0.70, 12, 2), window(0.80, 24, 4)]
        self.assertIsNone(tta.time_to_target(ws, 0.805))

    def test_the_target_is_plains_final_accuracy_less_half_a_point(self):
        runs = {("net", "100mbit", "plain", 0):
                summary("plain", 0, [0.80, 0.90], 50, "100mbit"),
                ("net", "100mbit", "2bit", 0):
                summary("2bit", 0, [0.80, 0.89], 20, "100mbit"),
                ("net", "loopback", "2bit", 0):
                summary("2bit", 0, [0.80, 0.89], 20)}
        t = tta.targets(runs)
        self.assertAlmostEqual(t[("net", "100mbit", 0)][0], 0.895)
        self.assertEqual(t[("net", "100mbit", 0)][1], "100mbit")
        # Without plain on loopback, the same seed's plain elsewhere.
        self.assertEqual(t[("net", "loopback", 0)][1], "100mbit")


class Table(unittest.TestCase):
    def setUp(self):
        # plain reaches 0.895 at its 3rd evaluation (30 s), 2bit at its
        # 2nd (20 s) in seed 0 and never in seed 1; adaptive in both.
        self.runs = {}
        for seed in (0, 1):
            # CPU per step: plain 20 ms; adaptive 22 ms in seed 0
            # (windows of 10 and 30 steps: (10*34 + 30*18)/40) and
            # 20 ms in seed 1.
            self.runs[("net", "loopback", "plain", seed)] = summary(
                "plain", seed, [0.80, 0.85, 0.90], 50,
                cpu_ms=[20.0, 20.0, 20.0])
            self.runs[("net", "loopback", "adaptive", seed)] = summary(
                "adaptive", seed, [0.80, 0.90, 0.90], 25,
                cpu_ms=[34.0, 18.0] if seed == 0 else [20.0, 20.0])
        self.runs[("net", "loopback", "2bit", 0)] = summary(
            "2bit", 0, [0.80, 0.896, 0.89], 20)
        self.runs[("net", "loopback", "2bit", 1)] = summary(
            "2bit", 1, [0.80, 0.85, 0.89], 20)

    def rows(self) -> dict[str, list[str]]:
        lines = tta.table("net", "loopback", list(tta.CONFIGS), self.runs,
                          tta.targets(self.runs))
        return {cells[0]: cells for cells in
                ([c.strip() for c in line.strip("|").split("|")]
                 for line in lines[2:])}

    def test_ratios_are_against_plain_on_the_same_seed(self):
        rows = self.rows()
        self.assertEqual(rows["plain"][2:7], ["50.0", "×1.00", "×1.00",
                                              "30.0", "×1.00"])
        self.assertEqual(rows["adaptive"][2:7], ["25.0", "×0.50",
                                                 "×1.05 (1.00..1.10)",
                                                 "20.0", "×0.67"])

    def test_cpu_per_step_is_weighted_by_steps_and_absent_if_unrecorded(
            self):
        rows = self.rows()
        # 2bit's summaries record no CPU time: no ratio, not a zero.
        self.assertEqual(rows["2bit"][4], "-")
        self.assertAlmostEqual(tta.cpu_per_step(
            self.runs[("net", "loopback", "adaptive", 0)]["windows"]), 22.0)

    def test_a_run_that_never_reaches_the_target_is_marked(self):
        rows = self.rows()
        # Seed 0 reached it in 20 s; seed 1 never did.
        self.assertEqual(rows["2bit"][5], "20.0 (**never: s1**)")
        self.assertEqual(rows["2bit"][7], "89.00 (89.00..89.00)")
        self.assertEqual(rows["2bit"][8], "-1.00")

    def test_no_row_for_a_configuration_without_runs(self):
        self.assertNotIn("torch-psgd", self.rows())


if __name__ == "__main__":
    unittest.main()
