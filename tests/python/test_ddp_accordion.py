"""test_ddp_accordion - two DDP ranks under bellowsd's Accordion policy.

A real bellowsd runs an aggressive Accordion configuration (a check every
2 windows with an eta no change reaches, so every check outside the
critical rules goes stable), and two gloo ranks train a small MLP for 100
steps in windows of 10 through bellows.torch.attach with PowerSGD, the LR
dropping tenfold at step 50. Checked:

- decisions arrive, and both ranks apply the same decision at every step;
- the levels follow the rule: rank 2 while critical (windows 0-2, and
  after the LR drop), rank 1 once a check declares the layers stable,
  1-D tensors always raw;
- the floats each rank counted at every step are those the levels imply
  (r(m+n) per PowerSGD layer, numel per raw one);
- the loss decreases;
- the history (when this build has `bellows history`) records the
  windows, the floats and the decisions.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import sqlite3
import subprocess
import tempfile
import unittest

import torch
import torch.distributed as dist

import support

WORLD = 2
STEPS = 100
WINDOW = 10
LR_DROP_STEP = 50
JOB = "py-ddp-accordion"
POLICY = """\
daemon:
  apply_lag: 1
  window_timeout_ms: 20000
  rank_timeout_ms: 20000
  heartbeat_ms: 200
jobs:
  - match: "*"
    policies:
      - type: accordion
        layers: {min_ndim: 2}
        params: {critical_level: 2, stable_level: 1, eta: 1000000,
                 interval: 2}
"""


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 10))


def data(rank):
    """A fixed teacher's labels on this rank's random inputs."""
    g = torch.Generator().manual_seed(42)
    teacher = torch.randn(32, 10, generator=g)
    g.manual_seed(1000 + rank)
    x = torch.randn(STEPS * 16, 32, generator=g)
    return x, (x @ teacher).argmax(1)


def lr_at(step):
    return 0.1 if step < LR_DROP_STEP else 0.01


def rank_main(rank, port, control, publish, out_dir):
    import bellows.torch

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=WORLD)
    model = make_model()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    agent = bellows.torch.attach(ddp, JOB, compressor="powersgd", seed=1,
                                 control=control, publish=publish,
                                 window_steps=WINDOW,
                                 decision_timeout_ms=10000)
    opt = torch.optim.SGD(ddp.parameters(), lr=lr_at(0), momentum=0.9)
    x, y = data(rank)
    steps = []
    for s in range(STEPS):
        step = agent.step_begin()
        for group in opt.param_groups:
            group["lr"] = lr_at(s) * agent.lr_scale()
        bs = agent.batch_size(16)
        xb, yb = x[s * 16:s * 16 + bs], y[s * 16:s * 16 + bs]
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(xb), yb)
        loss.backward()
        opt.step()
        agent.step_end(lr=lr_at(s), lr_next=lr_at(s + 1), batch_size=bs)
        steps.append({"step": step, "seq": agent.seq,
                      "levels": list(agent.hook.levels),
                      "floats_sent": agent.last.floats_sent,
                      "floats_raw": agent.last.floats_raw,
                      "loss": loss.item()})
    stats = agent.agent.stats()
    shapes = [list(layer.shape) for layer in agent.layers]
    names = [layer.name for layer in agent.layers]
    agent.close()
    pathlib.Path(out_dir, f"rank{rank}.json").write_text(json.dumps({
        "steps": steps, "shapes": shapes, "names": names,
        "decisions": stats.decisions, "misses": stats.decision_misses,
        "totals": [agent.floats_sent, agent.floats_raw]}))
    # Every holder of the DDP model goes before the process group: a
    # model freed only at interpreter exit, after the group, can hang
    # gloo's teardown.
    del ddp, opt, agent
    support.end_group()


def expected_floats(shapes, levels):
    total = 0
    for shape, level in zip(shapes, levels):
        r = min(int(level), shape[0], math.prod(shape[1:])) \
            if len(shape) >= 2 else 0
        total += r * (shape[0] + math.prod(shape[1:])) if r else \
            math.prod(shape)
    return total


class AccordionDDPTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.history = support.bellows_has("history")
        out = tempfile.mkdtemp(prefix="bellows-ddp.")
        with support.Daemon(POLICY, db=cls.history) as daemon:
            try:
                support.spawn(rank_main, (support.free_port(),
                                          daemon.control, daemon.publish,
                                          out), WORLD, timeout=100)
            except BaseException:
                print("---- bellowsd log ----\n" + daemon.tail())
                raise
            cls.daemon_rc = daemon.stop()
            cls.rows = None
            if cls.history:
                cls.rows = cls.read_history(daemon)
        cls.ranks = [json.loads(pathlib.Path(out, f"rank{r}.json")
                                .read_text()) for r in range(WORLD)]
        for r in range(WORLD):
            os.unlink(pathlib.Path(out, f"rank{r}.json"))
        os.rmdir(out)

    @classmethod
    def read_history(cls, daemon):
        """The run's rows, from `bellows history` and the file itself."""
        r = subprocess.run([str(support.BELLOWS), "history", "windows",
                            "--db", str(daemon.db), "--job", JOB],
                           capture_output=True, text=True, timeout=30)
        print("\n---- bellows history windows ----\n" + r.stdout + r.stderr)
        con = sqlite3.connect(f"file:{daemon.db}?mode=ro", uri=True)
        try:
            run_id = con.execute("SELECT max(id) FROM runs WHERE job = ?",
                                 (JOB,)).fetchone()[0]
            return {
                "tool_rc": r.returncode,
                "run_id": run_id,
                "windows": con.execute(
                    "SELECT window, floats_sent, floats_raw FROM "
                    "window_info WHERE run_id = ? ORDER BY window",
                    (run_id,)).fetchall(),
                "timings": con.execute(
                    "SELECT window, rank, floats_sent FROM timings "
                    "WHERE run_id = ? ORDER BY window, rank",
                    (run_id,)).fetchall(),
                "decisions": con.execute(
                    "SELECT seq, apply_step FROM decisions WHERE run_id = ?"
                    " ORDER BY seq", (run_id,)).fetchall(),
                "level_changes": con.execute(
                    "SELECT count(*) FROM decision_changes WHERE run_id = ?"
                    " AND knob = 'level'", (run_id,)).fetchone()[0],
            }
        finally:
            con.close()

    def test_decisions_arrive_and_both_ranks_apply_each_at_the_same_step(self):
        a, b = (r["steps"] for r in self.ranks)
        self.assertEqual(len(a), STEPS)
        self.assertEqual([(s["step"], s["seq"]) for s in a],
                         [(s["step"], s["seq"]) for s in b])
        self.assertEqual([s["levels"] for s in a], [s["levels"] for s in b])
        seqs = sorted({s["seq"] for s in a})
        print(f"\n  seqs applied: {seqs}; decisions received per rank: "
              f"{[r['decisions'] for r in self.ranks]}, misses "
              f"{[r['misses'] for r in self.ranks]}")
        self.assertGreater(seqs[0], 0, "step 0 ran without the Welcome's "
                           "decision")
        # One decision per closed window (9 close before the last step).
        self.assertGreaterEqual(len(seqs), STEPS // WINDOW - 1)
        for r in self.ranks:
            self.assertEqual(r["misses"], 0)
        self.assertEqual(self.daemon_rc, 0)

    def test_levels_follow_the_accordion_rule(self):
        steps = self.ranks[0]["steps"]
        shapes = self.ranks[0]["shapes"]
        matrix = [i for i, s in enumerate(shapes) if len(s) >= 2]
        timeline = []
        for s in steps:
            lv = [s["levels"][i] for i in matrix]
            if not timeline or timeline[-1][1] != lv[0]:
                timeline.append((s["step"], lv[0]))
            self.assertEqual(len(set(lv)), 1, f"step {s['step']}: layers "
                             "disagree although the rule is global here")
            for i, shape in enumerate(shapes):
                if len(shape) < 2:
                    self.assertEqual(s["levels"][i], 0.0)
        print(f"\n  (first step, PowerSGD rank): {timeline}")
        level = {s["step"]: s["levels"][matrix[0]] for s in steps}
        # Windows 0-2 critical (window 0 and the check at window 0); the
        # check at window 2 goes stable from window 3 (+ apply lag 1).
        self.assertEqual(level[0], 2.0)
        self.assertEqual(level[25], 2.0)
        self.assertEqual(level[35], 1.0)
        # The report of window 4 announces the LR drop: critical from
        # window 5 until the check at window 6 sends it back to stable.
        self.assertEqual(level[55], 2.0)
        self.assertEqual(level[75], 1.0)

    def test_floats_counted_match_the_levels(self):
        for rank, r in enumerate(self.ranks):
            raw = sum(math.prod(s) for s in r["shapes"])
            for s in r["steps"]:
                self.assertEqual(s["floats_sent"],
                                 expected_floats(r["shapes"], s["levels"]),
                                 f"rank {rank} step {s['step']}")
                self.assertEqual(s["floats_raw"], raw)
            sent, total = r["totals"]
            self.assertEqual(sent, sum(s["floats_sent"] for s in r["steps"]))
            print(f"\n  rank {rank}: {sent} floats sent of {total} raw "
                  f"({total / sent:.1f}x less)", end="")
        print()

    def test_the_loss_decreases(self):
        for r in self.ranks:
            losses = [s["loss"] for s in r["steps"]]
            first = sum(losses[:10]) / 10
            last = sum(losses[-10:]) / 10
            print(f"\n  mean loss, first 10 steps {first:.3f}, last 10 "
                  f"{last:.3f}", end="")
            self.assertLess(last, 0.6 * first)
        print()

    def test_the_history_records_windows_floats_and_decisions(self):
        if not self.history:
            self.skipTest("this build has no `bellows history` (bellows "
                          "help does not list it): history not checked")
        h = self.rows
        self.assertEqual(h["tool_rc"], 0)
        self.assertIsNotNone(h["run_id"])
        windows = {w: (sent, raw) for w, sent, raw in h["windows"]}
        self.assertGreaterEqual(len(windows), STEPS // WINDOW - 1)
        for w, (sent, raw) in windows.items():
            first, last = w * WINDOW, (w + 1) * WINDOW
            want = sum(s["floats_sent"] for r in self.ranks
                       for s in r["steps"] if first <= s["step"] < last)
            self.assertEqual(sent, want, f"window {w}")
        timings = {(w, rank): sent for w, rank, sent in h["timings"]}
        for (w, rank), sent in timings.items():
            want = sum(s["floats_sent"] for s in self.ranks[rank]["steps"]
                       if w * WINDOW <= s["step"] < (w + 1) * WINDOW)
            self.assertEqual(sent, want, f"window {w} rank {rank}")
        applied = {s["seq"] for s in self.ranks[0]["steps"]}
        recorded = {seq for seq, _ in h["decisions"]}
        self.assertTrue(applied <= recorded,
                        f"seqs applied but not recorded: "
                        f"{applied - recorded}")
        self.assertGreater(h["level_changes"], 0)
        print(f"\n  history: {len(windows)} windows, "
              f"{len(h['decisions'])} decisions, {h['level_changes']} "
              "level changes")


if __name__ == "__main__":
    unittest.main()
