"""test_torch_lr - bellows.torch reads the LR from the optimizer.

One gloo rank trains a small model in DistributedDataParallel through
bellows.torch.attach(..., optimizer=opt) against a real bellowsd that
records its history, with windows of one step. A StepLR scheduler (x0.1
every 3 steps) is stepped after every optimizer step and before a bare
``step_end()``: each window's lr in the history must be the LR that step
used and its lr_next the one the scheduler set for the next step, so the
decays are announced at the step before them. An explicit ``lr=`` wins
over the optimizer's; without an optimizer a bare step_end() is a
TypeError and leaves the step open.
"""

from __future__ import annotations

import sqlite3
import unittest

import torch
import torch.distributed as dist

import support

FIXED = """\
daemon:
  apply_lag: 1
  window_timeout_ms: 20000
  rank_timeout_ms: 20000
jobs:
  - match: "*"
    policies:
      - type: fixed
        params: {level: 0}
"""

LR0 = 0.4
STEPS = 8
EXPLICIT_STEP = 6  # this step says lr=7.0 (and no lr_next) itself


def make_ddp():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.ReLU(),
                                torch.nn.Linear(4, 3))
    return torch.nn.parallel.DistributedDataParallel(model)


def train_step(agent, ddp, opt, step):
    g = torch.Generator().manual_seed(step)
    x = torch.randn(5, 6, generator=g)
    y = torch.randint(0, 3, (5,), generator=g)
    opt.zero_grad()
    torch.nn.functional.cross_entropy(ddp(x), y).backward()
    opt.step()


class TorchLR(unittest.TestCase):
    def setUp(self):
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{support.free_port()}",
            rank=0, world_size=1)

    def tearDown(self):
        dist.destroy_process_group()

    def test_bare_step_end_records_the_optimizer_lr_and_the_next(self):
        import bellows.torch

        with support.Daemon(FIXED, db=True) as daemon:
            ddp = make_ddp()
            opt = torch.optim.SGD(ddp.parameters(), lr=LR0)
            sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3,
                                                    gamma=0.1)
            agent = bellows.torch.attach(
                ddp, "py-lr", compressor="topk", window_steps=1,
                control=daemon.control, publish=daemon.publish,
                optimizer=opt, run_id="lr-run")
            try:
                for step in range(STEPS):
                    self.assertEqual(agent.step_begin(), step)
                    train_step(agent, ddp, opt, step)
                    sched.step()
                    if step == EXPLICIT_STEP:
                        agent.step_end(lr=7.0)
                    else:
                        agent.step_end()
            finally:
                agent.close()
            log = daemon.tail(100)
            rc = daemon.stop()
            with sqlite3.connect(daemon.db) as db:
                rows = db.execute("SELECT window, lr, lr_next FROM "
                                  "window_info ORDER BY window").fetchall()
        print(f"\n  (window, lr, lr_next): {rows}")
        self.assertEqual(rc, 0, log)
        self.assertEqual(len(rows), STEPS, log)
        for window, lr, lr_next in rows:
            if window == EXPLICIT_STEP:
                self.assertEqual((lr, lr_next), (7.0, 7.0))
                continue
            self.assertAlmostEqual(lr, LR0 * 0.1 ** (window // 3),
                                   delta=1e-12, msg=f"window {window}")
            self.assertAlmostEqual(lr_next,
                                   LR0 * 0.1 ** ((window + 1) // 3),
                                   delta=1e-12, msg=f"window {window}")
        # The decays show as lr_next < lr at steps 2 and 5.
        drops = [w for w, lr, nxt in rows if nxt < lr - 1e-15]
        self.assertEqual(drops, [2, 5])

    def test_bare_step_end_without_an_optimizer_is_refused(self):
        import bellows.torch

        with support.Daemon(FIXED) as daemon:
            ddp = make_ddp()
            opt = torch.optim.SGD(ddp.parameters(), lr=LR0)
            agent = bellows.torch.attach(
                ddp, "py-lr-none", compressor="topk", window_steps=1,
                control=daemon.control, publish=daemon.publish,
                run_id="lr-none")
            try:
                agent.step_begin()
                train_step(agent, ddp, opt, 0)
                with self.assertRaises(TypeError):
                    agent.step_end()
                # The step is still open: an explicit LR ends it.
                agent.step_end(lr=LR0)
                self.assertEqual(agent.step_begin(), 1)
                train_step(agent, ddp, opt, 1)
                agent.step_end(lr=LR0)
            finally:
                agent.close()
            self.assertEqual(daemon.stop(), 0, daemon.tail())


if __name__ == "__main__":
    unittest.main()
