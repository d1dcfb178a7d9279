"""gpu_check - the CUDA twins beside a device copy and torch's code, and a
DDP step of bellows.torch on CUDA tensors (what scripts/gpu-check.sh runs).

    python3 bench/gpu_check.py bench OUT.tsv
    python3 bench/gpu_check.py step OUT.tsv

``bench``: for float32 gradients of 1, 16 and 64 MiB on the current
device, each twin that bellows.compress and bellows.activations call
(1-bit and 2-bit encode and decode, top-k 1 % select, the error-bounded
quantiser's pack) is timed against ``dst.copy_(src)`` of the same bytes
(a device-to-device copy) and against the same object with
``native=False`` (torch's operations), medians of CUDA-event timings.
A row whose twin did not run (the object fell back to torch) is FAIL.

``step``: one DistributedDataParallel model on CUDA tensors under
bellows.torch's CompressionHook, three steps per compressor (top-k 1 %,
2-bit, 1-bit, PowerSGD rank 2), one rank per GPU (NCCL; one rank on one
GPU, two on two or more); a step passes when the loss stays finite and
the compressor's CUDA twin ran.

Each writes rows ``kind<TAB>name<TAB>PASS|FAIL<TAB>detail`` to OUT.tsv and
exits 1 if a row is FAIL. Needs BELLOWS_LIB pointing at a CUDA-built
libbellows and agent/python on sys.path (the script sets both).
"""

from __future__ import annotations

import os
import sys
import tempfile

import torch

SIZES_MIB = (1, 16, 64)
REPS = 25


def _ms(fn, reps: int = REPS) -> float:
    """Median milliseconds of fn() over reps calls, CUDA events."""
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def _row(out, kind: str, name: str, ok: bool, detail: str) -> bool:
    out.write(f"{kind}\t{name}\t{'PASS' if ok else 'FAIL'}\t{detail}\n")
    out.flush()
    print(f"{kind:6} {name:28} {'PASS' if ok else 'FAIL'}  {detail}",
          flush=True)
    return ok


def _cases(n: int, dev: torch.device):
    """(name, twin call, torch call, ran-the-twin check) per twin."""
    from bellows import activations, compress

    g = torch.randn(n, device=dev) * 0.3
    cases = []
    for cls, label in ((compress.OneBit, "1bit"), (compress.TwoBit, "2bit")):
        twin, ref = cls(0.5), cls(0.5, native=False)
        words = twin.encode(0, g)
        before = twin.paths["cuda"]
        cases.append((f"{label} encode", lambda t=twin: t.encode(0, g),
                      lambda r=ref: r.encode(0, g),
                      lambda t=twin, b=before: t.paths["cuda"] > b))
        cases.append((f"{label} decode",
                      lambda t=twin, w=words: t.decode(w, n),
                      lambda r=ref, w=words: r.decode(w, n),
                      lambda t=twin, b=before: t.paths["cuda"] > b))
    tk, tk_ref, k = compress.TopK(), compress.TopK(native=False), n // 100
    err, err_ref = torch.zeros(n, device=dev), torch.zeros(n, device=dev)
    before_tk = tk.paths["cuda"]
    cases.append(("topk 1% select", lambda: tk.select(err, g, k),
                  lambda: tk_ref.select(err_ref, g, k),
                  lambda: tk.paths["cuda"] > before_tk))
    ran = {"twin": True}

    def pack_twin():
        # The twin's own entry: None where it is missing or failed.
        ran["twin"] &= activations._pack_cuda(g, 1e-3, True) is not None

    cases.append(("ebq pack 1e-3", pack_twin,
                  lambda: activations.pack(g, 1e-3, native=False),
                  lambda: ran["twin"]))
    return cases


def bench(path: str) -> int:
    dev = torch.device("cuda", 0)
    ok = True
    with open(path, "w") as out:
        _row(out, "device", torch.cuda.get_device_name(dev), True,
             f"torch {torch.__version__}, CUDA {torch.version.cuda}")
        for mib in SIZES_MIB:
            n = mib << 18
            src = torch.randn(n, device=dev)
            dst = torch.empty_like(src)
            copy = _ms(lambda: dst.copy_(src))
            _row(out, "bench", f"copy {mib} MiB", True,
                 f"{copy:.3f} ms, {n * 4 / copy / 1e6:.1f} GB/s")
            for name, twin, ref, ran in _cases(n, dev):
                try:
                    t = _ms(twin)
                    r = _ms(ref, reps=5)
                    good = ran()
                    detail = (f"{t:.3f} ms, {n * 4 / t / 1e6:.1f} GB/s, "
                              f"{copy / t:.2f} of copy, torch {r:.3f} ms "
                              f"({r / t:.1f}x)")
                    if not good:
                        detail += "; the twin did not run (torch did)"
                except Exception as e:  # noqa: BLE001 - reported as FAIL
                    good, detail = False, f"{type(e).__name__}: {e}"
                ok &= _row(out, "bench", f"{name} {mib} MiB", good, detail)
            del src, dst
            torch.cuda.empty_cache()
    return 0 if ok else 1


def _step_rank(rank: int, world: int, init: str, path: str) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from bellows import compress
    from bellows.torch import CompressionHook

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=init, rank=rank,
                            world_size=world)
    dev = torch.device("cuda", rank)
    rows = []
    for kind, level in (("topk", 0.01), ("2bit", 1.0), ("1bit", 1.0),
                        ("powersgd", 2)):
        torch.manual_seed(1)
        model = torch.nn.Sequential(torch.nn.Linear(256, 512),
                                    torch.nn.ReLU(),
                                    torch.nn.Linear(512, 10)).to(dev)
        ddp = DDP(model, device_ids=[rank])
        params = list(model.parameters())
        comp = compress.make_compressor(kind, seed=5)
        hook = CompressionHook(params, comp, compress.ProcessGroupComm())
        hook.register(ddp)
        hook.levels = [level] * len(params)
        opt = torch.optim.SGD(params, lr=0.05)
        losses = []
        try:
            for step in range(3):
                hook.reset()
                opt.zero_grad()
                gen = torch.Generator(device=dev).manual_seed(step * 7 + rank)
                x = torch.randn(64, 256, device=dev, generator=gen)
                y = torch.randint(0, 10, (64,), device=dev, generator=gen)
                loss = torch.nn.functional.cross_entropy(ddp(x), y)
                loss.backward()
                opt.step()
                losses.append(loss.item())
            twin = getattr(comp, "cuda_layers", 0) if kind == "powersgd" \
                else comp.paths["cuda"]
            good = all(map(lambda v: v == v and abs(v) < 1e6, losses)) \
                and twin > 0
            detail = (f"{world} rank(s), losses " +
                      " ".join(f"{v:.3f}" for v in losses) +
                      f", twin calls {twin}")
        except Exception as e:  # noqa: BLE001 - reported as FAIL
            good, detail = False, f"{type(e).__name__}: {e}"
        rows.append((kind, good, detail))
    dist.destroy_process_group()
    if rank == 0:
        with open(path, "w") as out:
            for kind, good, detail in rows:
                _row(out, "step", f"bellows.torch {kind}", good, detail)


def step(path: str) -> int:
    import torch.multiprocessing as mp

    world = 2 if torch.cuda.device_count() >= 2 else 1
    with tempfile.TemporaryDirectory() as tmp:
        init = "file://" + os.path.join(tmp, "rendezvous")
        mp.spawn(_step_rank, args=(world, init, path), nprocs=world)
    with open(path) as f:
        return 1 if any("\tFAIL\t" in line for line in f) else 0


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("bench", "step"):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("gpu_check: torch sees no CUDA device", file=sys.stderr)
        return 1
    return bench(argv[1]) if argv[0] == "bench" else step(argv[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
