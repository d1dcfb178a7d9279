"""test_ddp_resireduce - two DDP ranks under bellowsd's resireduce policy.

A real bellowsd runs `fixed` (top-k keep fraction 0.25 on every matrix)
and `resireduce` with a join distance nothing exceeds, and two gloo ranks
train an MLP with three 32x32 hidden layers (a group) and a 32x64 input
layer (reduced 0.5 x 0.5) for 60 steps in windows of 10, the LR dropping
tenfold at step 40. Checked:

- both ranks change the residual plan at the same steps, with the same
  plans, and hold the same residual memory;
- the first window's statistics form the group and the reduction; the
  LR drop splits the group and ends the reduction for one window (the
  pause), after which they return;
- the history holds the residual statistics and the plans, and
  `bellows replay --db` reproduces every plan.
"""

from __future__ import annotations

import json
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
STEPS = 60
WINDOW = 10
LR_DROP_STEP = 40
JOB = "py-ddp-resireduce"
POLICY = """\
daemon:
  apply_lag: 1
  window_timeout_ms: 20000
  rank_timeout_ms: 20000
  heartbeat_ms: 200
jobs:
  - match: "*"
    policies:
      - type: fixed
        layers: {min_ndim: 2}
        params: {level: 0.25}
      - type: resireduce
        layers: {min_ndim: 2}
        params: {join_distance: 100, split_distance: 100,
                 reduce_min_numel: 2048, pause_windows: 1,
                 cooldown_windows: 0}
"""


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(64, 32), torch.nn.ReLU(),
        torch.nn.Linear(32, 32), torch.nn.ReLU(),
        torch.nn.Linear(32, 32), torch.nn.ReLU(),
        torch.nn.Linear(32, 32), torch.nn.ReLU(),
        torch.nn.Linear(32, 10))


def lr_at(step):
    return 0.1 if step < LR_DROP_STEP else 0.01


def rank_main(rank, port, control, publish, out_dir):
    import bellows.torch

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=WORLD)
    model = make_model()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    agent = bellows.torch.attach(ddp, JOB, compressor="topk",
                                 control=control, publish=publish,
                                 window_steps=WINDOW,
                                 decision_timeout_ms=10000)
    opt = torch.optim.SGD(ddp.parameters(), lr=lr_at(0), momentum=0.9)
    g = torch.Generator().manual_seed(1000 + rank)
    x = torch.randn(STEPS * 16, 64, generator=g)
    y = (x[:, :10] * 3).argmax(1)
    memory = []
    for s in range(STEPS):
        agent.step_begin()
        for group in opt.param_groups:
            group["lr"] = lr_at(s)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(
            ddp(x[s * 16:(s + 1) * 16]), y[s * 16:(s + 1) * 16])
        loss.backward()
        opt.step()
        agent.step_end(lr=lr_at(s), lr_next=lr_at(s + 1), batch_size=16)
        memory.append(list(agent.residual_memory()))
    names = [layer.name for layer in agent.layers]
    changes = [{"step": c.step, "seq": c.seq, "group": list(c.plan.group),
                "rows": list(c.plan.rows), "cols": list(c.plan.cols),
                "migrated": list(c.migrated), "reason": c.reason}
               for c in agent.plan_changes]
    agent.close()
    pathlib.Path(out_dir, f"rank{rank}.json").write_text(json.dumps({
        "changes": changes, "memory": memory, "names": names}))
    del ddp, opt, agent
    support.end_group()


class ResiReduceDDPTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        out = tempfile.mkdtemp(prefix="bellows-ddp-resi.")
        with support.Daemon(POLICY, db=True) as daemon:
            try:
                support.spawn(rank_main, (support.free_port(),
                                          daemon.control, daemon.publish,
                                          out), WORLD, timeout=100)
            except BaseException:
                print("---- bellowsd log ----\n" + daemon.tail())
                raise
            cls.daemon_rc = daemon.stop()
            cls.read_history(daemon)
        cls.ranks = [json.loads(pathlib.Path(out, f"rank{r}.json")
                                .read_text()) for r in range(WORLD)]
        for r in range(WORLD):
            os.unlink(pathlib.Path(out, f"rank{r}.json"))
        os.rmdir(out)

    @classmethod
    def read_history(cls, daemon):
        policy = daemon.tmp / "policy.yaml"
        r = subprocess.run([str(support.BELLOWS), "replay", "--db",
                            str(daemon.db), "--policy", str(policy)],
                           capture_output=True, text=True, timeout=60)
        print("\n---- bellows replay --db ----\n" + r.stderr)
        cls.replay = (r.returncode, r.stderr)
        con = sqlite3.connect(f"file:{daemon.db}?mode=ro", uri=True)
        try:
            cls.resid_rows = con.execute(
                "SELECT count(*) FROM windows WHERE resid_steps > 0 AND "
                "resid_l2 > 0 AND resid_q99 >= resid_q50").fetchone()[0]
            cls.plans = con.execute(
                "SELECT count(*) FROM decisions WHERE resid_group IS NOT "
                "NULL").fetchone()[0]
        finally:
            con.close()

    def test_both_ranks_change_the_plan_at_the_same_steps(self):
        a, b = self.ranks
        print(f"\n  plan changes: "
              f"{[(c['step'], c['seq'], c['reason']) for c in a['changes']]}")
        self.assertGreaterEqual(len(a["changes"]), 2)
        self.assertEqual(a["changes"], b["changes"])
        self.assertEqual(a["memory"], b["memory"])
        self.assertEqual(self.daemon_rc, 0)

    def test_the_group_forms_then_splits_at_the_lr_drop(self):
        changes = self.ranks[0]["changes"]
        names = self.ranks[0]["names"]
        hidden = [names.index(f"{i}.weight") for i in (2, 4, 6)]
        first = changes[0]
        self.assertGreater(first["step"], 0)
        self.assertEqual([first["group"][i] for i in hidden], [hidden[0]] * 3)
        inp = names.index("0.weight")
        self.assertEqual((first["rows"][inp], first["cols"][inp]),
                         (0.5, 0.5))
        self.assertEqual(sorted(first["migrated"]), sorted(hidden + [inp]))
        split = [c for c in changes if c["step"] > LR_DROP_STEP]
        self.assertTrue(split, "no plan change after the LR drop")
        self.assertEqual([split[0]["group"][i] for i in hidden], hidden)
        self.assertEqual(split[0]["rows"][inp], 1.0)
        # One window of pause (the drop counted once, though announced
        # by lr_next and by the LR_CHANGE event), then it shares again.
        again = [c for c in changes if c["step"] > split[0]["step"]]
        self.assertTrue(again, "the group never formed again")
        self.assertEqual([again[0]["group"][i] for i in hidden],
                         [hidden[0]] * 3)
        # While shared and reduced the residuals take less memory.
        memory = self.ranks[0]["memory"]
        kept, full = memory[first["step"]]
        self.assertLess(kept, full)
        self.assertEqual(full, 64 * 32 + 3 * 32 * 32 + 32 * 10)

    def test_the_history_holds_statistics_and_replay_reproduces_plans(self):
        self.assertGreater(self.resid_rows, 0)
        self.assertGreaterEqual(self.plans, 1)
        rc, text = self.replay
        self.assertEqual(rc, 0, text)
        self.assertRegex(text, r"residual plans: 0 of [1-9][0-9]* rows "
                         r"differ")


if __name__ == "__main__":
    unittest.main()
