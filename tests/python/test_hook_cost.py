"""test_hook_cost - the hook's per-step work grows with the parameters,
not faster.

One gloo rank (a world of one) trains an MLP of N and of 4N Linear(8, 8)
layers under bellows.torch.attach against a real bellowsd, at level 0
(every bucket handed to gloo directly) and with every matrix 2-bit
quantised (the overlapped path), with no timed step (time_every=0). The
Python and C function calls made in each step, from step_begin through
the forward and backward passes to step_end, are counted with
sys.setprofile (counts, not time: the same on any machine). Everything
per step is O(parameters): 4x the layers may cost at most 4x the calls
(plus a margin for the per-step constant being smaller than the
per-layer part's share). The cost that doubled a 200-layer step (a plan
rebuilt per call, n entries each) grew quadratically and fails this.
"""

from __future__ import annotations

import sys
import unittest

import torch
import torch.distributed as dist

import support

POLICY = """\
jobs:
  - match: "cost-2bit-*"
    policies:
      - type: fixed
        layers: {min_ndim: 2}
        params: {level: 1}
  - match: "cost-resid-read*"     # resireduce reads residual statistics
    policies:
      - type: fixed
        layers: {min_ndim: 2}
        params: {level: 0.1}
      - type: resireduce
        layers: {min_ndim: 2}
  - match: "cost-resid-*"          # fixed reads none
    policies:
      - type: fixed
        layers: {min_ndim: 2}
        params: {level: 0.1}
  - match: "cost-sampled*"        # perfmodel reads per-layer raw times
    policies:
      - type: fixed
        params: {level: 0}
      - type: perfmodel
  - match: "*"
    policies:
      - type: fixed
        params: {level: 0}
"""


def count_calls(control, publish, job, layers, steps=6):
    """Median calls per step of an MLP of ``layers`` Linear(8, 8)."""
    import bellows.torch as bt

    torch.manual_seed(0)
    mods = []
    for _ in range(layers):
        mods += [torch.nn.Linear(8, 8), torch.nn.ReLU()]
    ddp = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(*mods))
    agent = bt.attach(ddp, job, control=control, publish=publish,
                      compressor="2bit", quant_threshold=0.01,
                      time_every=0, window_steps=4, run_id=job)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x = torch.randn(4, 8)
    counts = []
    calls = [0]

    def profile(frame, event, arg):
        if event in ("call", "c_call"):
            calls[0] += 1

    try:
        # Steps under the job's decision (before it, every level is 0)
        # and after DDP's bucket rebuild: the steady state.
        for s in range(steps + 40):
            calls[0] = 0
            sys.setprofile(profile)
            agent.step_begin()
            opt.zero_grad()
            ddp(x).sum().backward()
            opt.step()
            agent.step_end(lr=0.01)
            sys.setprofile(None)
            if s >= 2 and agent.decision.seq > 0:
                counts.append(calls[0])
            if len(counts) == steps:
                break
        overlapped = agent.hook.overlapped
    finally:
        sys.setprofile(None)
        agent.close()
    del ddp, agent, opt
    counts.sort()
    return counts[len(counts) // 2], overlapped


class HookCostTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = support.Daemon(POLICY).__enter__()
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{support.free_port()}",
            rank=0, world_size=1)

    @classmethod
    def tearDownClass(cls):
        dist.destroy_process_group()
        cls.daemon.__exit__(None, None, None)

    def scaling(self, prefix):
        d = self.daemon
        small, ov_small = count_calls(d.control, d.publish,
                                      f"{prefix}-small", 25)
        large, ov_large = count_calls(d.control, d.publish,
                                      f"{prefix}-large", 100)
        print(f"\n  {prefix}: {small} calls per step with 50 parameters, "
              f"{large} with 200 (x{large / small:.2f})", end="")
        # 4x the parameters. A compressed bucket's decode runs on gloo's
        # thread when its collective is still running as the hook
        # returns, and the profile counts the calling thread only, so a
        # count varies by about 20 % from run to run (2,400-3,000 calls
        # at 50 parameters): 5x allows that; work quadratic in the
        # parameters would be 16x.
        self.assertLessEqual(large, 5.0 * small,
                             "per-step work grows faster than the "
                             "parameters")
        return ov_small, ov_large

    def test_level_zero_work_per_step_is_linear_in_the_parameters(self):
        ov = self.scaling("cost-raw")
        self.assertEqual(ov, (0, 0))  # every bucket went to gloo directly

    def test_a_sampled_step_times_32_layers_alone_then_the_next_32(self):
        import bellows.torch as bt

        torch.manual_seed(0)
        mods = []
        for _ in range(50):
            mods += [torch.nn.Linear(8, 8), torch.nn.ReLU()]
        ddp = torch.nn.parallel.DistributedDataParallel(
            torch.nn.Sequential(*mods))
        d = self.daemon
        agent = bt.attach(ddp, "cost-sampled", control=d.control,
                          publish=d.publish, time_every=2, window_steps=4,
                          run_id="cost-sampled")
        sends = []
        inner = agent.hook.on_send
        agent.hook.on_send = lambda *a: (sends.append(a[0]), inner(*a))
        x = torch.randn(4, 8)
        per_step = []
        try:
            for _ in range(6):
                del sends[:]
                step = agent.step_begin()
                ddp(x).sum().backward()
                agent.step_end(lr=0.01)
                per_step.append((step, agent.timed, sorted(sends)))
        finally:
            agent.close()
        del ddp, agent
        sampled = [(s, layers) for s, timed, layers in per_step if timed]
        self.assertEqual([s for s, _ in sampled], [0, 2, 4])
        # 100 parameters, 32 at a time, in turn: 0-31, 32-63, 64-95 (the
        # rest of a bucket goes together, unreported unless alone).
        for k, (s, layers) in enumerate(sampled):
            want = list(range(32 * k, 32 * k + 32))
            self.assertEqual([i for i in layers if i in want], want,
                             f"step {s}")
            self.assertLessEqual(len(layers), 34, f"step {s}")
        for s, timed, layers in per_step:
            if not timed:
                self.assertEqual(layers, [], f"step {s}")

    def test_no_step_is_sampled_while_no_policy_reads_layer_times(self):
        import bellows.torch as bt

        d = self.daemon
        x = torch.randn(4, 8)
        seen = {}
        for job in ("cost-fixed", "cost-sampled-times"):
            torch.manual_seed(0)
            ddp = torch.nn.parallel.DistributedDataParallel(
                torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(),
                                    torch.nn.Linear(8, 8)))
            agent = bt.attach(ddp, job, control=d.control,
                              publish=d.publish, time_every=2,
                              window_steps=4, run_id=job)
            per_step = []
            try:
                for _ in range(12):
                    step = agent.step_begin()
                    ddp(x).sum().backward()
                    seq = agent.decision.seq
                    skip = agent.decision.skips("comm_raw_ms")
                    agent.step_end(lr=0.01)
                    per_step.append((step, seq, skip, agent.timed))
            finally:
                agent.close()
                del agent, ddp
            # Only the steps under a decision: before one, every
            # statistic counts as read.
            seen[job] = [(s, skip, timed) for s, seq, skip, timed
                         in per_step if seq > 0]
        fixed, times = seen["cost-fixed"], seen["cost-sampled-times"]
        self.assertTrue(fixed and times, seen)
        # fixed reads no time: no step sampled.
        self.assertEqual([(s, True, False) for s, _, _ in fixed], fixed)
        # perfmodel reads comm_raw_ms: one step in 2 sampled.
        self.assertEqual([(s, False, s % 2 == 0) for s, _, _ in times],
                         times)

    def test_residual_statistics_are_measured_only_while_a_policy_reads_them(
            self):
        import bellows.torch as bt

        d = self.daemon
        x = torch.randn(4, 8)
        seen = {}
        for job in ("cost-resid-fixed", "cost-resid-read"):
            torch.manual_seed(0)
            ddp = torch.nn.parallel.DistributedDataParallel(
                torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.ReLU(),
                                    torch.nn.Linear(64, 8)))
            agent = bt.attach(ddp, job, control=d.control,
                              publish=d.publish, compressor="topk",
                              time_every=0, window_steps=4, run_id=job)
            res = agent.hook.compressor.residuals
            measured = []
            try:
                for _ in range(12):
                    agent.step_begin()
                    ddp(x).sum().backward()
                    seq = agent.decision.seq
                    if seq > 0:
                        measured.append((res.observing, len(res.stats)))
                    agent.step_end(lr=0.01)
            finally:
                agent.close()
                del agent, ddp
            seen[job] = measured
        fixed, read = seen["cost-resid-fixed"], seen["cost-resid-read"]
        print(f"\n  (observing, layers measured) per step: {seen}", end="")
        self.assertTrue(fixed and read, seen)
        # Both matrices top-k with error feedback in every step; their
        # residuals measured only where resireduce is in force.
        self.assertEqual(fixed, [(False, 0)] * len(fixed))
        self.assertEqual(read, [(True, 2)] * len(read))

    def test_overlapped_work_per_step_is_linear_in_the_parameters(self):
        ov = self.scaling("cost-2bit")
        self.assertGreater(min(ov), 0)  # the buckets took the compressor


if __name__ == "__main__":
    unittest.main()
