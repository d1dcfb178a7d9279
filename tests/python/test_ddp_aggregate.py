"""test_ddp_aggregate - two DDP ranks reduce their statistics in the job.

A real bellowsd runs Accordion; two gloo ranks train a small MLP through
bellows.torch.attach(..., aggregate="job"), and then the same job again
with aggregate="rank" and with aggregate="node" on nodes of one rank
(each rank its own torch.distributed subgroup). With "job" the ranks reduce each window's
statistics over their process group with torch.distributed and only rank
0 reports. Checked:

- with "job" the history holds one report per window, rank 0's, and every
  window closed complete with both ranks counted;
- both ranks apply the same decision at every step and miss none, though
  rank 1 never reports;
- the levels each rank applied at every step, and the decisions, are the
  same as with aggregate="rank" (where both ranks report) and "node";
- the time one window's reduction costs (three all-reduces of float64
  over gloo) is printed, per window and per step.
"""

from __future__ import annotations

import json
import os
import pathlib
import sqlite3
import tempfile
import time
import unittest

import torch
import torch.distributed as dist

import support

WORLD = 2
MODES = ("job", "rank", "node")
STEPS = 80
WINDOW = 10
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
        params: {critical_level: 2, stable_level: 1, eta: 0.3,
                 interval: 2}
"""


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 10))


def rank_main(rank, port, control, publish, out_dir, job, aggregate):
    import bellows.torch

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=WORLD)
    model = make_model()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    reduce_s = []
    real = bellows.torch.group_allreduce

    def timed_group_allreduce(group=None):
        fn = real(group)

        def timed(values, op):
            t0 = time.perf_counter()
            fn(values, op)
            reduce_s.append(time.perf_counter() - t0)
        return timed

    bellows.torch.group_allreduce = timed_group_allreduce
    agent = bellows.torch.attach(ddp, job, compressor="powersgd", seed=1,
                                 control=control, publish=publish,
                                 window_steps=WINDOW, aggregate=aggregate,
                                 node_ranks=1 if aggregate == "node"
                                 else None,
                                 decision_timeout_ms=10000)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(1000 + rank)
    x = torch.randn(STEPS * 16, 32, generator=g)
    y = x[:, :10].argmax(1)
    steps = []
    for s in range(STEPS):
        step = agent.step_begin()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(
            ddp(x[s * 16:(s + 1) * 16]), y[s * 16:(s + 1) * 16])
        loss.backward()
        opt.step()
        agent.step_end(lr=0.1, lr_next=0.1, batch_size=16)
        steps.append({"step": step, "seq": agent.seq,
                      "levels": list(agent.hook.levels)})
    stats = agent.agent.stats()
    agent.close()
    pathlib.Path(out_dir, f"{aggregate}{rank}.json").write_text(json.dumps({
        "steps": steps, "decisions": stats.decisions,
        "misses": stats.decision_misses, "reports_sent": stats.reports_sent,
        "reduce_s": reduce_s}))
    del ddp, opt, agent
    support.end_group()


class AggregateDDPTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        out = tempfile.mkdtemp(prefix="bellows-agg.")
        cls.ranks, cls.rows = {}, {}
        with support.Daemon(POLICY, db=True) as daemon:
            for aggregate in MODES:
                try:
                    support.spawn(rank_main, (support.free_port(),
                                              daemon.control,
                                              daemon.publish, out,
                                              f"py-agg-{aggregate}",
                                              aggregate), WORLD, timeout=100)
                except BaseException:
                    print("---- bellowsd log ----\n" + daemon.tail())
                    raise
            cls.daemon_rc = daemon.stop()
            con = sqlite3.connect(f"file:{daemon.db}?mode=ro", uri=True)
            try:
                for aggregate in MODES:
                    run = con.execute("SELECT max(id) FROM runs WHERE "
                                      "job = ?", (f"py-agg-{aggregate}",)
                                      ).fetchone()[0]
                    cls.rows[aggregate] = {
                        "timings": con.execute(
                            "SELECT window, rank FROM timings WHERE "
                            "run_id = ? ORDER BY window, rank",
                            (run,)).fetchall(),
                        "windows": con.execute(
                            "SELECT window, ranks_reported, complete FROM "
                            "window_info WHERE run_id = ? ORDER BY window",
                            (run,)).fetchall(),
                        "decisions": con.execute(
                            "SELECT seq, apply_step, policy, reason, "
                            "hex(levels) FROM decisions WHERE run_id = ? "
                            "ORDER BY seq", (run,)).fetchall(),
                    }
            finally:
                con.close()
        for aggregate in MODES:
            cls.ranks[aggregate] = []
            for r in range(WORLD):
                p = pathlib.Path(out, f"{aggregate}{r}.json")
                cls.ranks[aggregate].append(json.loads(p.read_text()))
                os.unlink(p)
        os.rmdir(out)

    def test_only_rank_0_reports_and_every_window_counts_both_ranks(self):
        h = self.rows["job"]
        windows = sorted({w for w, _ in h["timings"]})
        self.assertGreaterEqual(len(windows), STEPS // WINDOW - 1)
        self.assertEqual(h["timings"], [(w, 0) for w in windows])
        self.assertTrue(h["windows"])
        for w, reported, complete in h["windows"]:
            self.assertEqual((reported, complete), (WORLD, 1), f"window {w}")
        self.assertEqual(self.ranks["job"][1]["reports_sent"], 0)
        self.assertGreater(self.ranks["job"][0]["reports_sent"], 0)
        both = len(self.rows["rank"]["timings"])
        print(f"\n  reports reaching bellowsd: {len(h['timings'])} with "
              f"aggregate='job', {both} with 'rank'")
        self.assertEqual(self.daemon_rc, 0)

    def test_both_ranks_apply_every_decision_at_the_same_step(self):
        a, b = (r["steps"] for r in self.ranks["job"])
        self.assertEqual(len(a), STEPS)
        self.assertEqual([(s["step"], s["seq"], s["levels"]) for s in a],
                         [(s["step"], s["seq"], s["levels"]) for s in b])
        self.assertGreaterEqual(len({s["seq"] for s in a}),
                                STEPS // WINDOW - 1)
        for r in self.ranks["job"]:
            self.assertEqual(r["misses"], 0)

    def test_decisions_are_those_of_every_rank_reporting(self):
        job, rank = self.rows["job"], self.rows["rank"]
        self.assertEqual(job["decisions"], rank["decisions"])
        self.assertEqual(self.rows["node"]["decisions"], rank["decisions"])
        # Nodes of one rank: each rank reports for itself.
        self.assertEqual(self.rows["node"]["timings"], rank["timings"])
        self.assertTrue(any(p == "accordion" for _, _, p, _, _ in
                            job["decisions"]),
                        "accordion never changed a level")
        self.assertEqual(
            [(s["step"], s["levels"]) for s in self.ranks["job"][0]["steps"]],
            [(s["step"], s["levels"])
             for s in self.ranks["rank"][0]["steps"]])

    def test_the_reduction_cost_per_window_is_measured(self):
        for r, rk in enumerate(self.ranks["job"]):
            calls = rk["reduce_s"]
            self.assertEqual(len(calls) % 3, 0)
            windows = len(calls) // 3
            self.assertGreater(windows, 0)
            per_window = sorted(sum(calls[i:i + 3])
                                for i in range(0, len(calls), 3))
            median = per_window[len(per_window) // 2]
            print(f"\n  rank {r}: all-reduce of a window's statistics "
                  f"median {median * 1e3:.3f} ms over {windows} windows "
                  f"({median * 1e3 / WINDOW:.4f} ms per step at "
                  f"{WINDOW} steps per window)", end="")
        print()


if __name__ == "__main__":
    unittest.main()
