"""bench/powersgd - a DDP step under PowerSGD: bellows' C path, its torch
path, and PyTorch's own powerSGD_hook.

Two gloo ranks on this machine train a 4 x 1024^2 MLP (four
Linear(1024, 1024), ReLU between them; batch 64 per rank, one thread per
rank) in one DDP bucket (the first-bucket and bucket caps raised above
the model's size: PyTorch's hook waits inside a future's callback, which
deadlocks gloo with several buckets), every weight at rank --rank, the
biases raw, under these configurations, each its own
DistributedDataParallel copy of the same model:

    plain     DDP's default all-reduce, no compression
    c         bellows.torch.CompressionHook with bellows.compress.PowerSGD:
              the C stages (bellows/codec.h, products through libbellows'
              BLAS), the bucket in one reduce call
    torch     the same with PowerSGD(native=False): the torch code
    pytorch   torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook,
              same rank, error feedback and warm start, epsilon 1e-8,
              compressing from the 3rd step
    pytorch-b the same with batch_tensors_with_same_shape=True

Rounds are interleaved (each configuration first in as many rounds as the
others), --steps steps per round after --warmup untimed ones; a step is
timed on rank 0 from before the forward pass to after the optimizer step.
The report gives per configuration the median step, the median of the
per-round medians, and the ratios to c.

With --codec, no DDP: one process times PowerSGD.reduce alone (the
three stages, buffers and ctypes calls; the all-reduces a no-op of one
rank) on 4 layers of 1024 x 1024 and 64 of 256 x 256 at ranks 1, 4 and
16, C path against torch path, interleaved, --rounds rounds of --steps
calls each, medians.

Set OPENBLAS_NUM_THREADS=1 (the runner does) so libbellows' BLAS runs one
thread as torch does. torch's own products use the libblas.so.3 the
system gives it (Debian's alternatives); --torch-blas DIR puts DIR's
libblas.so.3 first for the ranks (e.g.
/usr/lib/x86_64-linux-gnu/openblas-serial), so that both sides use the
same BLAS.

    /usr/bin/python3 bench/powersgd.py [--rounds 7] [--steps 5]
        [--rank 4] [--build build] [--torch-blas DIR] [--out DIR]
        [--codec]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import benchkit  # noqa: E402

CONFIGS = ("plain", "c", "torch", "pytorch", "pytorch-b")


def make_model(torch):
    torch.manual_seed(0)
    layers = []
    for i in range(4):
        layers.append(torch.nn.Linear(1024, 1024))
        if i < 3:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def rank_main(rank, port, args, out):
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import \
        powerSGD_hook as psh

    sys.path.insert(0, args.python)
    from bellows import compress
    from bellows.torch import CompressionHook

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=2)
    dist._DEFAULT_FIRST_BUCKET_BYTES = 1 << 30  # one bucket
    models, hooks, buckets = {}, {}, {c: 0 for c in CONFIGS}

    def counted(fn, c):
        def hook(state, bucket):
            buckets[c] += 1
            return fn(state, bucket)
        return hook

    for c in CONFIGS:
        ddp = torch.nn.parallel.DistributedDataParallel(
            make_model(torch), bucket_cap_mb=1024)
        models[c] = ddp
        if c in ("c", "torch"):
            params = [p for p in ddp.module.parameters()]
            comp = compress.PowerSGD(seed=0, native=(c == "c"))
            h = CompressionHook(params, comp,
                                compress.ProcessGroupComm(None),
                                per_layer=False)
            h.levels = [float(args.rank) if p.dim() == 2 else 0.0
                        for p in params]
            hooks[c] = h
            ddp.register_comm_hook(None, counted(
                lambda s, b, h=h: h(s, b), c))
        elif c.startswith("pytorch"):
            state = psh.PowerSGDState(
                process_group=None, matrix_approximation_rank=args.rank,
                start_powerSGD_iter=2, min_compression_rate=1,
                use_error_feedback=True, warm_start=True,
                orthogonalization_epsilon=1e-8, random_seed=0,
                batch_tensors_with_same_shape=(c == "pytorch-b"))
            ddp.register_comm_hook(state, counted(psh.powerSGD_hook, c))
        else:
            ddp.register_comm_hook(None, counted(
                lambda s, b: dist.all_reduce(
                    b.buffer(), async_op=True).get_future().then(
                        lambda f: f.value()[0].div_(2)), c))
    opts = {c: torch.optim.SGD(m.parameters(), lr=0.01)
            for c, m in models.items()}
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(64, 1024, generator=g)
    y = torch.randn(64, 1024, generator=g)

    parts = {c: [] for c in hooks}

    def step(c):
        h = hooks.get(c)
        if h is not None:
            h.reset()
            comm0 = h.comm.elapsed_ms
        t0 = time.perf_counter()
        opts[c].zero_grad()
        loss = torch.nn.functional.mse_loss(models[c](x), y)
        loss.backward()
        opts[c].step()
        if h is not None:
            parts[c].append([h.hook_ms, h.codec_ms,
                             h.comm.elapsed_ms - comm0])
        return (time.perf_counter() - t0) * 1e3

    times = {c: [] for c in CONFIGS}
    for c in CONFIGS:
        for _ in range(args.warmup):
            step(c)
    for c in parts:
        parts[c].clear()
    b0 = dict(buckets)
    for r in range(args.rounds):
        k = r % len(CONFIGS)
        for c in CONFIGS[k:] + CONFIGS[:k]:
            times[c].append([step(c) for _ in range(args.steps)])
    per_step = {c: (buckets[c] - b0[c]) / (args.rounds * args.steps)
                for c in CONFIGS}
    native = hooks["c"].compressor.native_layers
    lib = compress._codec_lib()
    blas = lib.psgd_blas().decode() if lib is not None and \
        lib.psgd_blas is not None else "none"
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        pathlib.Path(out, "times.json").write_text(json.dumps(
            {"times": times, "parts": parts, "buckets_per_step": per_step,
             "native_layers": native, "blas": blas,
             "torch_blas": os.environ.get("BELLOWS_BENCH_TORCH_BLAS",
                                          "system libblas.so.3")}))


def codec_main(args):
    import torch

    sys.path.insert(0, args.python)
    from bellows import compress

    class Alone(compress.Communicator):
        world = 1

        def all_reduce(self, tensor):
            pass

    torch.set_num_threads(1)
    alone = Alone()
    rows = []
    for shapes, name in (([(1024, 1024)] * 4, "4 x 1024x1024"),
                         ([(256, 256)] * 64, "64 x 256x256")):
        g = torch.Generator().manual_seed(0)
        grads = [torch.randn(*s, generator=g) for s in shapes]
        for rank in (1, 4, 16):
            comps = {n: compress.PowerSGD(seed=0, native=n)
                     for n in (True, False)}
            times = {True: [], False: []}

            def once(native):
                items = [compress.Item(k, x.clone(), rank)
                         for k, x in enumerate(grads)]
                t = time.perf_counter()
                comps[native].reduce(items, alone)
                return (time.perf_counter() - t) * 1e3

            for native in (True, False):
                once(native)
            for r in range(args.rounds):
                order = (True, False) if r % 2 == 0 else (False, True)
                for native in order:
                    times[native] += [once(native)
                                      for _ in range(args.steps)]
            assert comps[True].native_layers > 0
            mc = statistics.median(times[True])
            mt = statistics.median(times[False])
            rows.append([name, rank, f"{mc:.2f}", f"{mt:.2f}",
                         f"{mt / mc:.2f}"])
    return rows


def report(res, command, rank):
    times = res["times"]
    lines = [benchkit.machine_line(), "", f"    {command}", ""]
    lines.append(f"Rank {rank}; libbellows' BLAS: {res['blas']} (one "
                 f"thread); torch's BLAS: {res['torch_blas']}; DDP buckets "
                 f"per step: " + ", ".join(
                     f"{c} {res['buckets_per_step'][c]:g}" for c in CONFIGS)
                 + f"; layer steps in C: {res['native_layers']}.")
    lines.append("")
    med = {c: statistics.median(t for r in times[c] for t in r)
           for c in CONFIGS}
    rmed = {c: [statistics.median(r) for r in times[c]] for c in CONFIGS}
    lines += benchkit.table(
        ["config", "median step ms", "median of round medians ms",
         "round medians ms", "ratio to c"])
    for c in CONFIGS:
        lines.append(benchkit.row([
            c, f"{med[c]:.1f}", f"{statistics.median(rmed[c]):.1f}",
            " ".join(f"{m:.0f}" for m in rmed[c]),
            f"{med[c] / med['c']:.3f}"]))
    lines.append("")
    for c in CONFIGS:
        if c == "c":
            continue
        ratios = [o / b for o, b in zip(rmed[c], rmed["c"])]
        lines.append(f"{c}/c per round: "
                     + " ".join(f"{r:.3f}" for r in ratios)
                     + f" (median {statistics.median(ratios):.3f})")
    lines.append("")
    lines.append("Per step on rank 0 (medians) for bellows' hook: time in "
                 "the hook, its codec time (the hook's wall time minus its "
                 "collectives: the three stages, the buffers, the ctypes "
                 "calls), its collectives.")
    lines.append("")
    lines += benchkit.table(["config", "hook ms", "codec ms", "comm ms"])
    for c in ("c", "torch"):
        ps = res["parts"][c]
        col = [statistics.median(x[i] for x in ps) for i in range(3)]
        lines.append(benchkit.row([c, f"{col[0]:.2f}", f"{col[1]:.2f}",
                                   f"{col[2]:.2f}"]))
    cc = [x[1] for x in res["parts"]["c"]]
    ct = [x[1] for x in res["parts"]["torch"]]
    lines.append("")
    lines.append(f"powersgd: codec ms per step, torch/C (median): "
                 f"{statistics.median(ct) / statistics.median(cc):.2f}")
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--rank", type=int, default=4)
    p.add_argument("--build", default=str(benchkit.SRC / "build"))
    p.add_argument("--python", default=str(benchkit.SRC / "agent" /
                                           "python"))
    p.add_argument("--torch-blas", default=None,
                   help="directory whose libblas.so.3 torch loads first")
    p.add_argument("--out", default=None,
                   help="directory for report.md (default: print only)")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--codec", action="store_true",
                   help="time PowerSGD.reduce alone, C against torch")
    args = p.parse_args()
    if args.rounds < 5:
        p.error("--rounds must be at least 5")
    env = dict(os.environ)
    env.update(benchkit.lib_env(pathlib.Path(args.build)))
    env.setdefault("OMP_NUM_THREADS", "1")
    env["OPENBLAS_NUM_THREADS"] = "1"
    if args.torch_blas and args.child is None:
        env["LD_LIBRARY_PATH"] = args.torch_blas + (
            ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH")
            else "")
        env["BELLOWS_BENCH_TORCH_BLAS"] = \
            str(pathlib.Path(args.torch_blas, "libblas.so.3"))
    if args.codec and args.child is not None:
        rows = codec_main(args)
        pathlib.Path(args.child, "codec.json").write_text(json.dumps(rows))
        return
    if args.codec:
        command = "/usr/bin/python3 bench/powersgd.py " + " ".join(
            sys.argv[1:])
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, __file__, *sys.argv[1:],
                            "--child", tmp], env=env, check=True)
            rows = json.loads(pathlib.Path(tmp, "codec.json").read_text())
        lines = [benchkit.machine_line(), "", f"    {command.strip()}", "",
                 "torch's BLAS: " + env.get("BELLOWS_BENCH_TORCH_BLAS",
                                            "system libblas.so.3"), ""]
        lines += benchkit.table(["layers", "rank", "C ms", "torch ms",
                                 "torch/C"])
        lines += [benchkit.row(r) for r in rows]
        print("\n".join(lines))
        return
    if args.child is None:
        # The loader reads LD_LIBRARY_PATH at start: run the ranks from
        # a fresh interpreter with the environment set.
        command = "/usr/bin/python3 bench/powersgd.py " + " ".join(
            sys.argv[1:])
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, __file__, *sys.argv[1:],
                            "--child", tmp], env=env, check=True)
            res = json.loads(pathlib.Path(tmp, "times.json").read_text())
        text = report(res, command.strip(), args.rank)
        print(text, end="")
        if args.out:
            out = pathlib.Path(args.out)
            out.mkdir(parents=True, exist_ok=True)
            (out / "report.md").write_text(text)
            (out / "times.json").write_text(json.dumps(res))
        return
    import torch.multiprocessing as mp

    sys.path.insert(0, str(benchkit.SRC / "tests" / "python"))
    import support

    mp.spawn(rank_main, (support.free_port(), args, args.child), nprocs=2)


if __name__ == "__main__":
    main()
