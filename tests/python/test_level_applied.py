"""test_level_applied - the history keeps the level bellows.torch applied.

Two gloo ranks train a small CNN in DistributedDataParallel through
bellows.torch.attach with 2-bit quantisation, against a real bellowsd
whose `fixed` policy gives level 1 to every tensor, the 1-D biases too
(a layer selector of min_ndim 0).
bellows.torch sends 1-D tensors raw whatever their level, and tells the
agent so (Agent.applied_levels): the history must record, per window,
the decided level 1 for every tensor beside the applied level, 1 for the
matrices and 0 for the biases, and each rank's window statistics must
say the same. `bellows history layers` shows both, labelled.
"""

from __future__ import annotations

import json
import pathlib
import sqlite3
import subprocess
import tempfile
import unittest

import torch
import torch.distributed as dist

import support

WORLD = 2
WINDOW = 4
STEPS = 12

FIXED_ALL = """\
daemon:
  apply_lag: 1
  window_timeout_ms: 20000
  rank_timeout_ms: 20000
  heartbeat_ms: 200
jobs:
  - match: "*"
    policies:
      - type: fixed
        layers: {min_ndim: 0}
        params: {level: 1}
"""


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(2, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Linear(64, 16), torch.nn.ReLU(), torch.nn.Linear(16, 5))


def rank_main(rank, port, control, publish, out_dir):
    import bellows.torch

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=WORLD)
    model = make_model()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    agent = bellows.torch.attach(ddp, "py-applied", compressor="2bit",
                                 control=control, publish=publish,
                                 window_steps=WINDOW,
                                 decision_timeout_ms=10000)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    n = len(list(model.parameters()))
    windows = []
    for _ in range(STEPS):
        step = agent.step_begin()
        g = torch.Generator().manual_seed(100 * step + rank)
        x = torch.randn(8, 2, 6, 6, generator=g)
        y = torch.randint(0, 5, (8,), generator=g)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
        agent.step_end(lr=0.1)
        if (step + 1) % WINDOW == 0:
            st = [agent.agent.window_stats(i) for i in range(n)]
            windows.append({"levels": list(agent.decision.levels),
                            "applied": [s.level_applied for s in st],
                            "applied_n": [s.level_applied_n for s in st]})
    shapes = [list(p.shape) for p in model.parameters()]
    agent.close()
    del ddp, opt, agent
    support.end_group()
    pathlib.Path(out_dir, f"{rank}.json").write_text(
        json.dumps({"shapes": shapes, "windows": windows}))


class LevelAppliedTest(unittest.TestCase):
    def test_biases_sent_raw_are_recorded_at_level_0_beside_level_1(self):
        with support.Daemon(FIXED_ALL, db=True) as daemon, \
                tempfile.TemporaryDirectory() as out:
            if daemon.db is None:
                self.skipTest("this bellowsd keeps no history")
            try:
                support.spawn(rank_main,
                              (support.free_port(), daemon.control,
                               daemon.publish, out),
                              WORLD, timeout=100)
            except BaseException:
                print(daemon.tail())
                raise
            log = daemon.tail(100)
            self.assertEqual(daemon.stop(), 0, log)
            reps = [json.loads(pathlib.Path(out, f"{r}.json").read_text())
                    for r in range(WORLD)]
            with sqlite3.connect(daemon.db) as db:
                rows = db.execute(
                    "SELECT window, layer, level, level_applied"
                    " FROM windows ORDER BY window, layer").fetchall()
            shown = subprocess.run(
                [str(support.BELLOWS), "history", "layers", "--db",
                 str(daemon.db), "--format", "csv"],
                capture_output=True, text=True, timeout=30)
        shapes = reps[0]["shapes"]
        flat = [i for i, s in enumerate(shapes) if len(s) < 2]
        self.assertEqual(len(flat), 3, shapes)
        want = [0.0 if i in flat else 1.0 for i in range(len(shapes))]
        # Each rank's own reports.
        for rank, rep in enumerate(reps):
            self.assertEqual(len(rep["windows"]), STEPS // WINDOW)
            for w, win in enumerate(rep["windows"]):
                self.assertEqual(win["levels"], [1.0] * len(shapes))
                self.assertEqual(win["applied"], want,
                                 f"rank {rank} window {w}")
                self.assertEqual(win["applied_n"], [1] * len(shapes))
        # The history: decided 1 everywhere, applied 0 for the biases.
        self.assertEqual(len(rows), len(shapes) * STEPS // WINDOW, log)
        for window, layer, level, applied in rows:
            self.assertEqual((level, applied), (1.0, want[layer]),
                             f"window {window} layer {layer}")
        print(f"\n  history rows (window, layer, decided, applied): "
              f"{rows[:len(shapes)]}")
        # The command line labels both.
        self.assertEqual(shown.returncode, 0, shown.stderr)
        header = shown.stdout.splitlines()[0].split(",")
        self.assertIn("applied_last", header)
        self.assertIn("decided_last", header)
        for line in shown.stdout.splitlines()[1:]:
            row = dict(zip(header, line.split(",")))
            layer = int(row["layer"])
            self.assertEqual(float(row["applied_last"]), want[layer], line)
            self.assertEqual(float(row["decided_last"]), 1.0, line)


if __name__ == "__main__":
    unittest.main()
