"""test_gcomp_attach - bellows.torch.attach with compressor "gcomp".

Two gloo ranks train a small MLP in DistributedDataParallel through
attach(..., compressor="gcomp", optimizer=opt) against a real bellowsd
whose `fixed` policy puts every matrix at level 1. No policy owns
codec_table here, so GComp builds its table from the ranks' summed
histograms at the first compressed step (version 0). Checked: the
matrices go through GComp (fewer bytes than raw), the optimizer's delta
levels truncate some values, and both ranks end with the same parameters
bit for bit, close to the uncompressed run.
"""

from __future__ import annotations

import json
import pathlib
import tempfile
import unittest

import torch
import torch.distributed as dist

import support
from bellows import compress

WORLD = 2
STEPS = 8

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
        params: {level: 1}
"""


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 10))


def batch(step, rank):
    g = torch.Generator().manual_seed(100 * step + rank)
    return (torch.randn(16, 32, generator=g),
            torch.randint(0, 10, (16,), generator=g))


def rank_main(rank, port, control, publish, out_dir):
    import bellows.torch

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=WORLD)
    model, ref = make_model(), make_model()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9)
    agent = bellows.torch.attach(ddp, "py-gcomp", compressor="gcomp",
                                 optimizer=opt, control=control,
                                 publish=publish, window_steps=4,
                                 decision_timeout_ms=10000)
    comp = agent.hook.compressor
    sent = raw = 0
    for _ in range(STEPS):
        step = agent.step_begin()
        agent.hook.reset()
        opt.zero_grad()
        x, y = batch(step, rank)
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        ref_opt.zero_grad()
        for w in range(WORLD):
            xw, yw = batch(step, w)
            (torch.nn.functional.cross_entropy(ref(xw), yw) / WORLD) \
                .backward()
        opt.step()
        ref_opt.step()
        sent += agent.hook.counts.bytes_sent
        raw += 4 * agent.hook.counts.floats_raw
        agent.step_end(lr=0.05)
    params = list(model.parameters())
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    diff = max((p - q).abs().max().item()
               for p, q in zip(params, ref.parameters()))
    report = {"bits": flat.view(torch.int32).tolist(), "diff": diff,
              "sent": sent, "raw": raw, "version": comp.table_version,
              "values": comp.values, "bytes": comp.bytes,
              "name": type(comp).__name__}
    agent.close()
    del ddp, opt, agent, comp
    support.end_group()
    pathlib.Path(out_dir, f"{rank}.json").write_text(json.dumps(report))


class GCompAttachTest(unittest.TestCase):
    def test_attach_gcomp_trains_two_ranks_alike(self):
        lib = compress._codec_lib()
        if lib is None or lib.gcomp_encode is None:
            self.skipTest("libbellows has no GComp")
        with support.Daemon(POLICY) as daemon, \
                tempfile.TemporaryDirectory() as out:
            try:
                support.spawn(rank_main,
                              (support.free_port(), daemon.control,
                               daemon.publish, out), WORLD, timeout=100)
            except BaseException:
                print(daemon.tail())
                raise
            reps = [json.loads(pathlib.Path(out, f"{r}.json").read_text())
                    for r in range(WORLD)]
        self.assertEqual(reps[0]["bits"], reps[1]["bits"])
        for rep in reps:
            self.assertEqual(rep["name"], "GComp")
            self.assertEqual(rep["version"], 0)
            self.assertGreater(rep["values"], 0)
            self.assertLess(rep["sent"], rep["raw"])
            self.assertLess(rep["diff"], 1e-4)
        print(f"\n  attach(compressor='gcomp', optimizer=SGD): {STEPS} "
              f"steps, {reps[0]['sent']} of {reps[0]['raw']} bytes sent, "
              f"{reps[0]['diff']:.2g} from the uncompressed run, same "
              "parameters on both ranks")


if __name__ == "__main__":
    unittest.main()
