"""test_hook_ddp - the DDP communication hook on gloo against the reference.

Two processes train the same small CNN with DistributedDataParallel, with
one bucket per tensor (several buckets is where torch 1.13's own PowerSGD
hook deadlocks on gloo), through bellows.torch.CompressionHook at fixed
levels that change between steps. Each process also recomputes every
rank's local gradient on a plain copy of the model and runs the reference
compressor (reference.py; for 1-bit and 2-bit the value-by-value reference
of test_compress) over them: after every backward pass the DDP gradients
must equal the reference's, and the parameters after the optimizer step
the reference model's. The hook's timing callbacks must have seen one send
per tensor per step, compressed exactly where the level says so, and
every collective. Untimed (``hook.timed`` False), the buckets whose
tensors are raw and hold no residual must go to gloo directly (no send
timed) with the same results, the others through the timed path. No
bellowsd is involved: the levels come from the schedule.
"""

from __future__ import annotations

import json
import pathlib
import tempfile
import time
import unittest

import torch
import torch.distributed as dist

import support
from reference import RefPowerSGD, RefTopK
from test_compress import ref_quantise

WORLD = 2


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(2, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Linear(64, 16), torch.nn.ReLU(), torch.nn.Linear(16, 5))


def batch(step, rank):
    g = torch.Generator().manual_seed(100 * step + rank)
    return (torch.randn(8, 2, 6, 6, generator=g),
            torch.randint(0, 5, (8,), generator=g))


# Levels per layer (conv.w, conv.b, fc1.w, fc1.b, fc2.w, fc2.b); 1-D
# tensors stay 0 as TorchAgent makes them.
SCHEDULES = {
    "powersgd": [[2, 0, 2, 0, 2, 0], [2, 0, 2, 0, 2, 0], [1, 0, 2, 0, 4, 0],
                 [1, 0, 0, 0, 1, 0], [2, 0, 1, 0, 1, 0]],
    "topk": [[0.5, 0, 0.1, 0, 0.25, 0], [0.5, 0, 0.1, 0, 0.25, 0],
             [0.2, 0, 0.3, 0, 0, 0], [0.2, 0, 0.3, 0, 1.0, 0]],
    # Any level > 0 quantises; a layer going raw flushes its residual.
    "2bit": [[1, 0, 1, 0, 1, 0], [1, 0, 1, 0, 1, 0], [1, 0, 0, 0, 1, 0],
             [1, 1, 1, 0, 0, 1]],
    "1bit": [[1, 0, 1, 0, 1, 0], [0, 0, 1, 0, 1, 0], [1, 0, 1, 0, 1, 0]],
    # Untimed 2-bit: all raw (direct), compressed, raw again (conv.w and
    # fc2.w flush their residuals through the overlapped path), all raw.
    "2bit-untimed": [[0] * 6, [0] * 6, [1, 0, 0, 0, 1, 0], [0] * 6,
                     [0] * 6],
}
# Untimed, every compressor on the overlapped path, with the schedules
# of the timed runs.
for _kind in ("powersgd", "topk", "1bit"):
    SCHEDULES[f"{_kind}-untimed"] = SCHEDULES[_kind]

# 1bit / 2bit value threshold of these runs (gradients here are ~0.01-0.3).
QUANT_THRESHOLD = 0.05


class RefQuant:
    """1-bit / 2-bit with error feedback for ``world`` workers, from
    test_compress.ref_quantise: the mean of every worker's decoded codes;
    a raw layer sends grad + residual."""

    def __init__(self, kind: str, world: int):
        self.kind = kind
        self.world = world
        self.errors = [dict() for _ in range(world)]

    def floats(self, shape, level) -> int:
        n = 1
        for d in shape:
            n *= d
        if level <= 0:
            return n
        per = 32 if self.kind == "1bit" else 16
        return -(-n // per)

    def step(self, grads, levels):
        out = {}
        for layer, level in levels.items():
            shape = grads[0][layer].shape
            n = grads[0][layer].numel()
            total = torch.zeros(n)
            for w in range(self.world):
                g = grads[w][layer].reshape(-1)
                r = self.errors[w].pop(layer, torch.zeros(n))
                if level <= 0:
                    total += g + r
                    continue
                _, dec, self.errors[w][layer] = ref_quantise(
                    self.kind, QUANT_THRESHOLD, r, g)
                total += dec
            out[layer] = (total / self.world).reshape(shape)
        return out


def rank_main(rank, port, kind, out_dir):
    import bellows.compress as compress
    from bellows.torch import CompressionHook

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=WORLD)
    # One bucket per tensor, the first one included.
    dist._DEFAULT_FIRST_BUCKET_BYTES = 1
    model = make_model()
    ref_model = make_model()
    ddp = torch.nn.parallel.DistributedDataParallel(model,
                                                    bucket_cap_mb=1e-6)
    params = list(model.parameters())
    untimed = kind.endswith("-untimed")
    base = kind.split("-")[0]
    comp = compress.make_compressor(base, seed=5,
                                    threshold=QUANT_THRESHOLD)
    sends, collectives = [], []
    hook = CompressionHook(
        params, comp, compress.ProcessGroupComm(),
        on_send=lambda *a: sends.append(a),
        on_collective=lambda *a: collectives.append(a))
    hook.register(ddp)
    hook.timed = not untimed
    if base == "powersgd":
        ref = RefPowerSGD(WORLD, seed=5)
    elif base == "topk":
        ref = RefTopK(WORLD)
    else:
        ref = RefQuant(base, WORLD)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref_model.parameters(), lr=0.1)
    report = {"steps": [], "buckets": 0}
    for step, levels in enumerate(SCHEDULES[kind]):
        hook.levels = list(levels)
        hook.reset()
        calls = hook.calls
        del sends[:], collectives[:]
        opt.zero_grad()
        x, y = batch(step, rank)
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        # Every rank's local gradient, from the reference model.
        local = []
        for w in range(WORLD):
            ref_opt.zero_grad()
            xw, yw = batch(step, w)
            torch.nn.functional.cross_entropy(ref_model(xw), yw).backward()
            local.append({i: p.grad.clone()
                          for i, p in enumerate(ref_model.parameters())})
        expect = ref.step(local, dict(enumerate(levels)))
        diff = max((p.grad - expect[i]).abs().max().item()
                   for i, p in enumerate(params))
        for i, p in enumerate(ref_model.parameters()):
            p.grad = expect[i].clone()
        opt.step()
        ref_opt.step()
        pdiff = max((p - q).abs().max().item() for p, q in
                    zip(params, ref_model.parameters()))
        floats = sum(ref.floats(tuple(p.shape), lv)
                     for p, lv in zip(params, levels))
        report["steps"].append({"grad_diff": diff, "param_diff": pdiff,
                                "floats": hook.counts.floats_sent,
                                "floats_expected": floats,
                                "buckets": hook.calls - calls,
                                "sends": sorted(sends),
                                "collectives": list(collectives),
                                "codec_ms": hook.codec_ms,
                                "direct": hook.direct,
                                "overlapped": hook.overlapped,
                                "hook_ms": hook.hook_ms})
    hook.finish()  # the last step's callbacks, before the group goes
    del ddp, hook, opt
    support.end_group()
    pathlib.Path(out_dir, f"{kind}.{rank}.json").write_text(
        json.dumps(report))


# Collectives a compressed bucket starts on the overlapped path: raw
# layers (the biases) in one all-reduce, the compressed ones packed:
# PowerSGD's P rides with the raw values, then one Q.
PER_BUCKET = {"powersgd": {"all_reduce": 2, "all_gather": 0},
              "topk": {"all_reduce": 1, "all_gather": 1},
              "2bit": {"all_reduce": 1, "all_gather": 1}}
PACKED_LEVELS = {"powersgd": 2, "topk": 0.25, "2bit": 1}


def packed_main(rank, port, kind, out_dir):
    """Three Linear layers in one DDP bucket, untimed: counts the
    collectives each step starts and whether the hook's future was
    already complete when the hook returned. Rank 1 starts its backward
    0.3 s late, so rank 0's collectives cannot have finished by then."""
    import bellows.compress as compress
    from bellows.torch import CompressionHook

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=WORLD)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    params = list(model.parameters())
    comp = compress.make_compressor(kind, seed=5,
                                    threshold=QUANT_THRESHOLD)
    hook = CompressionHook(params, comp, compress.ProcessGroupComm())
    counted = {"all_reduce": 0, "all_gather": 0}
    originals = {}
    for name in counted:
        originals[name] = getattr(dist, name)

        def wrap(*a, _name=name, **k):
            counted[_name] += 1
            return originals[_name](*a, **k)

        setattr(dist, name, wrap)
    done_at_return = []

    def bellows_comm_hook(state, bucket):
        fut = hook(state, bucket)
        done_at_return.append(fut.done())
        return fut

    ddp.register_comm_hook(None, bellows_comm_hook)
    hook.timed = False
    hook.set_levels([PACKED_LEVELS[kind] if p.dim() >= 2 else 0
                     for p in params])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    report = []
    for step in range(4):
        hook.reset()
        calls = hook.calls
        for name in counted:
            counted[name] = 0
        del done_at_return[:]
        opt.zero_grad()
        g = torch.Generator().manual_seed(10 * step + rank)
        x = torch.randn(8, 16, generator=g)
        loss = ddp(x).square().mean()
        if rank == 1:
            time.sleep(0.3)
        loss.backward()
        opt.step()
        report.append({"buckets": hook.calls - calls,
                       "overlapped": hook.overlapped,
                       "counted": dict(counted),
                       "done_at_return": list(done_at_return)})
    hook.finish()  # the last step's callbacks, before the group goes
    for name, fn in originals.items():
        setattr(dist, name, fn)
    del ddp, hook, opt
    support.end_group()
    pathlib.Path(out_dir, f"packed-{kind}.{rank}.json").write_text(
        json.dumps(report))


class HookTest(unittest.TestCase):
    def run_kind(self, kind):
        with tempfile.TemporaryDirectory() as out:
            support.spawn(rank_main, (support.free_port(), kind, out),
                          WORLD, timeout=120)
            reports = [json.loads(pathlib.Path(out, f"{kind}.{r}.json")
                                  .read_text()) for r in range(WORLD)]
        for rank, rep in enumerate(reports):
            for s, st in enumerate(rep["steps"]):
                print(f"\n  {kind} rank {rank} step {s}: "
                      f"{st['buckets']} buckets, {st['floats']} floats "
                      f"(expected {st['floats_expected']}), "
                      f"grad diff {st['grad_diff']:.2g}, "
                      f"param diff {st['param_diff']:.2g}", end="")
                self.assertLess(st["grad_diff"], 1e-4)
                self.assertLess(st["param_diff"], 1e-5)
                self.assertEqual(st["floats"], st["floats_expected"])
            # DDP rebuilds its buckets after the first step: one per tensor.
            self.assertEqual(rep["steps"][-1]["buckets"], 6)
            self.check_timings(kind, rep)
        print()

    def check_timings(self, kind, rep):
        """One timed send per tensor and step, compressed where the level
        compresses; the collectives of the compressor, all timed.
        Untimed, the raw tensors without a residual are not timed (their
        buckets went directly), the others are."""
        held = set()
        base = kind.split("-")[0]
        for s, (st, levels) in enumerate(zip(rep["steps"],
                                             SCHEDULES[kind])):
            layers = [x[0] for x in st["sends"]]
            if kind.endswith("-untimed"):
                # Nothing timed: a raw tensor without a residual went to
                # gloo directly, the others on the overlapped path.
                comp = {i for i, lv in enumerate(levels)
                        if lv > 0 and (base != "powersgd" or i % 2 == 0)}
                self.assertEqual(layers, [], f"step {s}")
                self.assertEqual(st["collectives"], [], f"step {s}")
                if s > 0:  # one bucket per tensor from the second step
                    self.assertEqual(st["overlapped"], len(comp | held),
                                     f"step {s}")
                    self.assertEqual(st["direct"], 6 - len(comp | held))
                held = comp
                continue
            self.assertEqual(layers, list(range(6)), f"step {s}")
            self.assertEqual(st["direct"], 0)
            self.assertEqual(st["overlapped"], 0)
            for layer, compressed, comm_ms, codec_ms in st["sends"]:
                want = levels[layer] > 0 and (kind != "powersgd"
                                              or layer % 2 == 0)
                self.assertEqual(bool(compressed), want,
                                 f"step {s} layer {layer}")
                self.assertGreaterEqual(comm_ms, 0.0)
                self.assertGreaterEqual(codec_ms, 0.0)
                if not compressed:
                    self.assertEqual(codec_ms, 0.0)
            # PowerSGD: P and Q per compressed tensor; others: one each.
            per = {True: 2 if kind == "powersgd" else 1, False: 1}
            self.assertEqual(len(st["collectives"]),
                             sum(per[bool(x[1])] for x in st["sends"]))
            self.assertEqual(sum(1 for c in st["collectives"] if c[1]),
                             sum(per[True] for x in st["sends"] if x[1]))
            self.assertGreaterEqual(st["hook_ms"], st["codec_ms"])

    def test_powersgd_hook_on_gloo_matches_the_reference(self):
        self.run_kind("powersgd")

    def test_topk_hook_on_gloo_matches_the_reference(self):
        self.run_kind("topk")

    def test_two_bit_hook_on_gloo_matches_the_reference(self):
        self.run_kind("2bit")

    def test_one_bit_hook_on_gloo_matches_the_reference(self):
        self.run_kind("1bit")

    def test_untimed_raw_buckets_go_to_gloo_directly_and_match(self):
        self.run_kind("2bit-untimed")

    def test_overlapped_powersgd_matches_the_reference(self):
        self.run_kind("powersgd-untimed")

    def test_overlapped_topk_matches_the_reference(self):
        self.run_kind("topk-untimed")

    def test_overlapped_one_bit_matches_the_reference(self):
        self.run_kind("1bit-untimed")

    def run_packed(self, kind):
        with tempfile.TemporaryDirectory() as out:
            support.spawn(packed_main, (support.free_port(), kind, out),
                          WORLD, timeout=120)
            reports = [json.loads(pathlib.Path(
                out, f"packed-{kind}.{r}.json").read_text())
                for r in range(WORLD)]
        for rank, rep in enumerate(reports):
            for s, st in enumerate(rep):
                print(f"\n  {kind} rank {rank} step {s}: {st['buckets']} "
                      f"bucket(s), collectives {st['counted']}, future "
                      f"done at return {st['done_at_return']}", end="")
                self.assertEqual(st["buckets"], 1)
                self.assertEqual(st["overlapped"], 1)
                self.assertEqual(st["counted"], PER_BUCKET[kind],
                                 f"rank {rank} step {s}")
                if rank == 0:
                    self.assertEqual(st["done_at_return"], [False],
                                     f"step {s}: the hook waited")
        print()

    def test_an_overlapped_powersgd_bucket_makes_two_collectives(self):
        self.run_packed("powersgd")

    def test_an_overlapped_topk_bucket_makes_one_collective_per_codec(self):
        self.run_packed("topk")

    def test_an_overlapped_two_bit_bucket_makes_one_per_codec(self):
        self.run_packed("2bit")


if __name__ == "__main__":
    unittest.main()
