"""bench/hook - what bellows.torch's hook costs a DDP step at level 0.

Two gloo ranks on this machine train a 4 x 1024^2 MLP (four
Linear(1024, 1024), ReLU between them; batch 64 per rank, one thread per
rank, DDP's default bucket sizes) under three configurations, each its
own DistributedDataParallel copy of the same model:

    plain    DDP with its default all-reduce hook
    bellows  bellows.torch.attach to a private bellowsd whose `fixed`
             policy keeps every layer at level 0, a window every 10
             steps, statistics on (Agent.observe of every gradient);
             attach's default time_every (one step in 16 timed)
    timed    as bellows with time_every=1: every step timed, each layer
             reduced and timed on its own, synchronously (what every
             step cost before untimed steps went to gloo directly)
    nostats  as bellows, with the statistics pass left out of the hook
    acc      as bellows under an `accordion` policy held at level 0: a
             policy reads acc_norm, so the agents keep their window
             accumulators (under `fixed` no policy reads it and they
             skip them)

Rounds are interleaved (plain, bellows, timed, nostats; the next round
starts one config later, so each is first equally often), each
config running --steps steps per round after --warmup untimed ones; a
step is timed on rank 0 from before the forward pass to after the
optimizer step (step_begin and step_end included for bellows). The
report gives per config the median step over all rounds, the median of
the per-round medians, and the ratios to plain. Ratios in one run, on a
shared 2-core machine: read them side by side, not as absolutes.

    /usr/bin/python3 bench/hook/run.py [--rounds 12] [--steps 6]
        [--build build] [--python agent/python] [--out DIR]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import benchkit  # noqa: E402

CONFIGS = ("plain", "bellows", "timed", "nostats")
# Compressing configurations, chosen with --compressed.
COMPRESSED = {
    # bellows, every matrix 2-bit (fixed level 1), overlapped.
    "2bit": ("2bit", 1),
    # bellows PowerSGD at rank 4, overlapped.
    "psgd": ("powersgd", 4),
    # bellows top-k, 1 % of every matrix, overlapped (issue 28's step).
    "topk": ("topk", 0.01),
}
POLICY = """\
jobs:
  - match: "hookbench-2bit"
    policies:
      - type: fixed
        layers: {min_ndim: 2}
        params: {level: 1}
  - match: "hookbench-psgd"
    policies:
      - type: fixed
        layers: {min_ndim: 2}
        params: {level: 4}
  - match: "hookbench-topk"
    policies:
      - type: fixed
        layers: {min_ndim: 2}
        params: {level: 0.01}
  - match: "hookbench-acc"
    policies:
      - type: accordion
        params: {critical_level: 0, stable_level: 0}
  - match: "*"
    policies:
      - type: fixed
        params: {level: 0}
"""


def make_model(torch, n: int, width: int, kind: str = "mlp"):
    """n Linear(width, width), a ReLU between each two; or, for "cnn",
    the Fashion-MNIST example's CNN (8 tensors, 80k parameters)."""
    torch.manual_seed(0)
    if kind == "cnn":
        import importlib.util
        spec = importlib.util.spec_from_file_location(
            "fashion_mnist", benchkit.SRC / "examples" / "pytorch" /
            "fashion_mnist.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod.Net()
    layers = []
    for i in range(n):
        layers.append(torch.nn.Linear(width, width))
        if i < n - 1:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def rank_main(rank, port, control, publish, args, out):
    import torch
    import torch.distributed as dist

    sys.path.insert(0, args.python)
    import bellows.torch as bt
    # A bellows.torch older than time_every times every step.
    every = ({} if "time_every" not in inspect.signature(bt.attach)
             .parameters else {"time_every": 16, "timed": 1,
                               "untimed": 0})

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=2)
    configs = args.configs
    models, agents = {}, {}
    stats_ms = {c: 0.0 for c in configs}
    parts = {c: [] for c in configs}
    # CPU time of the whole process (every thread: gloo's included) per
    # step: less bent by the machine's load than the wall time.
    cpu = {c: [] for c in configs}

    def timed_observe(observe, c):
        if observe is None:
            return None

        def wrapped(*a):
            t = time.perf_counter()
            observe(*a)
            stats_ms[c] += (time.perf_counter() - t) * 1e3
        return wrapped

    for c in configs:
        if c == "torch-psgd":
            # PyTorch's powerSGD_hook starts collectives inside futures'
            # callbacks: with several buckets on gloo the ranks start them
            # in different orders (torch 1.13 deadlocks; torch 2.15
            # aborts: "Received data size doesn't match expected size").
            # One bucket, for it alone.
            first = dist._DEFAULT_FIRST_BUCKET_BYTES
            dist._DEFAULT_FIRST_BUCKET_BYTES = 1 << 40
            ddp = torch.nn.parallel.DistributedDataParallel(
                make_model(torch, args.layers, args.width, args.model),
                bucket_cap_mb=1 << 20)
            dist._DEFAULT_FIRST_BUCKET_BYTES = first
        else:
            ddp = torch.nn.parallel.DistributedDataParallel(
                make_model(torch, args.layers, args.width, args.model))
        models[c] = ddp
        if c == "torch-allreduce":
            # PyTorch's own Python all-reduce hook: what any comm hook
            # written in Python costs over DDP's built-in one.
            from torch.distributed.algorithms.ddp_comm_hooks import \
                default_hooks as D
            ddp.register_comm_hook(None, D.allreduce_hook)
        elif c == "torch-psgd":
            from torch.distributed.algorithms.ddp_comm_hooks import \
                powerSGD_hook as P
            state = P.PowerSGDState(process_group=None,
                                    matrix_approximation_rank=4,
                                    start_powerSGD_iter=2,
                                    use_error_feedback=True,
                                    warm_start=True)
            ddp.register_comm_hook(state, P.powerSGD_hook)
        elif c != "plain":
            compressor = COMPRESSED.get(c, ("powersgd", 0))[0]
            te = {"timed": "timed", "untimed": "untimed"}.get(
                c, "time_every")
            # noacc: the window sum Accordion's acc_norm needs left out.
            flags = ({"layer_flags": bt._lib.LAYER_NO_ACCUMULATOR}
                     if c == "noacc" else {})
            a = bt.attach(ddp, f"hookbench-{c}", run_id="hookbench",
                          control=control, publish=publish,
                          window_steps=10, compressor=compressor,
                          **flags,
                          **({"time_every": every[te]} if every else {}))
            # Every way the hook observes: per tensor, per bucket.
            ways = [w for w in ("observe", "observe_at", "observe_many")
                    if hasattr(a.hook, w)]
            for w in ways:
                setattr(a.hook, w, None if c == "nostats" else
                        timed_observe(getattr(a.hook, w), c))
            agents[c] = a
    opts = {c: torch.optim.SGD(m.parameters(), lr=0.01)
            for c, m in models.items()}
    g = torch.Generator().manual_seed(rank)
    if args.model == "cnn":
        x = torch.randn(args.batch, 1, 28, 28, generator=g)
        y = torch.randn(args.batch, 10, generator=g)
    else:
        x = torch.randn(args.batch, args.width, generator=g)
        y = torch.randn(args.batch, args.width, generator=g)

    def step(c):
        a = agents.get(c)
        stats_ms[c] = 0.0
        comm0 = a.comm_ms if a is not None else 0.0
        c0 = time.process_time()
        t0 = time.perf_counter()
        if a is not None:
            a.step_begin()
        opts[c].zero_grad()
        loss = torch.nn.functional.mse_loss(models[c](x), y)
        loss.backward()
        opts[c].step()
        if a is not None:
            a.step_end(lr=0.01)
            parts[c].append([a.hook.hook_ms, stats_ms[c], a.comm_ms - comm0,
                             a.backward_ms(),
                             getattr(a.hook, "direct", 0)])
        wall = (time.perf_counter() - t0) * 1e3
        cpu[c].append((time.process_time() - c0) * 1e3)
        return wall

    times = {c: [] for c in configs}
    for c in configs:
        for _ in range(args.warmup):
            step(c)
        parts[c].clear()
        cpu[c].clear()
    for r in range(args.rounds):
        # Each config first in as many rounds as the others.
        k = r % len(configs)
        for c in configs[k:] + configs[:k]:
            times[c].append([step(c) for _ in range(args.steps)])
    # Layers with a window accumulator at the end (None: a library
    # without bellows_agent_accumulators).
    accs = {c: getattr(a.agent, "accumulators", lambda: None)()
            for c, a in agents.items()}
    for a in agents.values():
        a.close()
    del models, agents, opts
    dist.barrier()  # no rank closes its gloo pairs under a peer's last op
    dist.destroy_process_group()
    if rank == 0:
        pathlib.Path(out, "times.json").write_text(json.dumps(
            {"times": times, "parts": parts, "accumulators": accs,
             "cpu": cpu}))


def report(res, command):
    times, parts = res["times"], res["parts"]
    CONFIGS = tuple(times)
    lines = [benchkit.machine_line(),
             f"Link: {os.environ.get('BELLOWS_HOOK_LINK') or 'loopback'}; "
             f"load average before: {res.get('load', '?')}", "",
             f"    {command}", ""]
    med = {c: statistics.median(t for r in times[c] for t in r)
           for c in CONFIGS}
    rmed = {c: [statistics.median(r) for r in times[c]] for c in CONFIGS}
    lines += benchkit.table(
        ["config", "median step ms", "median of round medians ms",
         "round medians ms", "ratio to plain"])
    for c in CONFIGS:
        lines.append(benchkit.row([
            c, f"{med[c]:.1f}", f"{statistics.median(rmed[c]):.1f}",
            " ".join(f"{m:.0f}" for m in rmed[c]),
            f"{med[c] / med['plain']:.3f}"]))
    # Per round, the ratio to that round's plain: the least noisy view.
    for c in CONFIGS[1:]:
        ratios = [b / p for b, p in zip(rmed[c], rmed["plain"])]
        lines.append("")
        lines.append(f"{c}/plain per round: "
                     + " ".join(f"{r:.3f}" for r in ratios)
                     + f" (median {statistics.median(ratios):.3f})")
    accs = res.get("accumulators") or {}
    if any(v is not None for v in accs.values()):
        lines.append("window accumulators on rank 0 at the end: " +
                     ", ".join(f"{c} {v}" for c, v in accs.items()))
    if "bellows" in rmed and "nostats" in rmed:
        ratios = [b / n for b, n in zip(rmed["bellows"], rmed["nostats"])]
        lines.append(f"statistics pass, bellows/nostats per round median: "
                     f"{statistics.median(ratios):.3f}")
    if "torch-psgd" in rmed and "psgd" in rmed:
        ratios = [t / b for t, b in zip(rmed["torch-psgd"], rmed["psgd"])]
        lines.append(f"PyTorch's powerSGD_hook / bellows PowerSGD per "
                     f"round: " + " ".join(f"{r:.3f}" for r in ratios)
                     + f" (median {statistics.median(ratios):.3f})")
    # On a loaded machine whole rounds run at half speed (a rank waiting
    # for a CPU), and the per-round ratios swing by tens of per cent. The
    # fast steps are the ones no config had to wait in: their low
    # quantiles over all rounds compare the configs' own costs.
    lines.append("")
    lines.append("Fast steps (low quantiles of every step of every round; "
                 "the view that holds when the machine's load makes "
                 "steps bimodal):")
    lines.append("")
    lines += benchkit.table(["config", "p10 step ms", "p25 step ms",
                             "p10 / plain", "p25 / plain"])
    low = {c: sorted(t for r in times[c] for t in r) for c in CONFIGS}

    def q(v, p):
        return v[int(p * (len(v) - 1))]

    for c in CONFIGS:
        lines.append(benchkit.row([
            c, f"{q(low[c], .1):.1f}", f"{q(low[c], .25):.1f}",
            f"{q(low[c], .1) / q(low['plain'], .1):.3f}",
            f"{q(low[c], .25) / q(low['plain'], .25):.3f}"]))
    cpu = res.get("cpu")
    if cpu:
        lines.append("")
        lines.append("CPU time per step on rank 0 (the process, every "
                     "thread; medians): the work each config adds, less "
                     "bent by the load than the wall time.")
        lines.append("")
        lines += benchkit.table(["config", "CPU ms per step",
                                 "minus plain ms", "ratio to plain"])
        cmed = {c: statistics.median(cpu[c]) for c in CONFIGS if cpu[c]}
        for c in CONFIGS:
            if c in cmed:
                lines.append(benchkit.row([
                    c, f"{cmed[c]:.2f}", f"{cmed[c] - cmed['plain']:+.2f}",
                    f"{cmed[c] / cmed['plain']:.3f}"]))
    lines.append("")
    lines.append("Per step on rank 0 (medians): time inside the hook, in "
                 "Agent.observe, in collectives (comm_ms: for direct "
                 "buckets their busy time, hidden behind backward), the "
                 "backward pass outside the hook, "
                 "buckets handed to gloo directly; statistics as a share "
                 "of the median step.")
    lines.append("")
    lines += benchkit.table(["config", "hook ms", "observe ms",
                             "comm ms", "backward ms", "direct buckets",
                             "observe / step"])
    for c in CONFIGS[1:]:
        ps = parts.get(c)
        if not ps:
            continue
        col = [statistics.median(p[i] for p in ps) for i in range(5)]
        lines.append(benchkit.row([
            c, f"{col[0]:.2f}", f"{col[1]:.2f}", f"{col[2]:.1f}",
            f"{col[3]:.1f}",
            f"{col[4]:.0f}", f"{100 * col[1] / med[c]:.2f} %"]))
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--model", choices=("mlp", "cnn"), default="mlp",
                   help="mlp: --layers x Linear(--width); cnn: the "
                        "Fashion-MNIST example's CNN")
    p.add_argument("--layers", type=int, default=4,
                   help="Linear layers in the model (default 4)")
    p.add_argument("--width", type=int, default=1024,
                   help="their width: Linear(W, W) (default 1024)")
    p.add_argument("--batch", type=int, default=64,
                   help="samples per rank and step (default 64)")
    p.add_argument("--compressed", default="",
                   help="comma-separated compressing configs to add: "
                        "2bit, psgd, topk (bellows; topk keeps 1 %%), "
                        "torch-psgd (PyTorch's powerSGD_hook, rank 4)")
    p.add_argument("--link", default=None,
                   help="run the ranks over a loopback limited to this "
                        "tc rate (100mbit, 1gbit; a network namespace "
                        "with a token bucket, benchkit.link; needs root)")
    p.add_argument("--only", default="",
                   help="comma-separated configs to run instead of "
                        "plain,bellows,timed,nostats (also: untimed, "
                        "bellows with time_every=0; noacc, bellows with "
                        "LAYER_NO_ACCUMULATOR; acc, bellows under "
                        "accordion at level 0, accumulators kept; "
                        "torch-allreduce, PyTorch's Python allreduce_hook)")
    p.add_argument("--build", default=str(benchkit.SRC / "build"))
    p.add_argument("--python", default=str(benchkit.SRC / "agent" /
                                           "python"),
                   help="directory bellows is imported from (e.g. an "
                        "older checkout's agent/python, for a before/after)")
    p.add_argument("--out", default=None,
                   help="directory for report.md (default: print only)")
    args = p.parse_args()
    args.configs = tuple(c for c in (args.only.split(",") if args.only
                                     else CONFIGS) if c)
    args.configs += tuple(c for c in args.compressed.split(",") if c)
    for c in args.configs:
        if c not in CONFIGS + tuple(COMPRESSED) + (
                "torch-psgd", "torch-allreduce", "untimed", "noacc",
                "acc"):
            p.error(f"unknown config {c!r}")
    # plain first: the ratios' base.
    args.configs = ("plain",) + tuple(c for c in args.configs
                                      if c != "plain")
    if args.link and os.environ.get("BELLOWS_HOOK_LINK") != args.link:
        # The whole bench again, inside the namespace: gloo's TCP between
        # the ranks goes through the token bucket (bellowsd's ipc does
        # not).
        import subprocess
        with benchkit.link(args.link) as prefix:
            env = dict(os.environ, BELLOWS_HOOK_LINK=args.link)
            return subprocess.run(prefix + [sys.executable] + sys.argv,
                                  env=env).returncode
    os.environ.update(benchkit.lib_env(pathlib.Path(args.build)))
    os.environ["BELLOWS_BUILD_ROOT"] = str(pathlib.Path(args.build).resolve())
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch.multiprocessing as mp

    sys.path.insert(0, str(benchkit.SRC / "tests" / "python"))
    import support

    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    with support.Daemon(POLICY) as daemon, \
            tempfile.TemporaryDirectory() as tmp:
        mp.spawn(rank_main, (support.free_port(), daemon.control,
                             daemon.publish, args, tmp), nprocs=2)
        res = json.loads(pathlib.Path(tmp, "times.json").read_text())
        res["load"] = load
    command = sys.executable + " bench/hook/run.py " + " ".join(
        sys.argv[1:])
    text = report(res, command.strip())
    print(text, end="")
    if args.out:
        out = pathlib.Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.md").write_text(text)
        (out / "times.json").write_text(json.dumps(res))


if __name__ == "__main__":
    sys.exit(main())
