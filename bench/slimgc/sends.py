"""bench/slimgc/sends.py - per-send times of the hook, and what a window
statistic makes of them.

Two gloo ranks train the Fashion-MNIST example's CNN (random inputs of
its shape: the data does not change the sends) under bellows.torch's
CompressionHook with every step timed, per layer, as in a SlimGC
calibration: the four matrices 2-bit (C codecs) on even steps and raw on
odd ones, biases raw. Every send's (step, layer, compressed, comm_ms,
codec_ms) is recorded on both ranks (the hook's on_send), no bellowsd.

Then, per tensor and kind (raw / compressed), the sends are cut into
windows of --window steps (20: a calibration's length, 10 sends of each
kind) and each window summarised by the candidate statistics: median,
p25, p10, min, the mean of the lowest half. Reported per statistic:

    spread   median over tensors of (max - min) / median of the window
             values (how much the statistic moves between windows)
    flips    windows whose value is more than twice the lowest window's
             (the median's failure: a window where most sends were slow)
    bias     median over tensors of (whole-run statistic / reference - 1),
             the reference being the same tensor's median in a run with
             both ranks under SCHED_FIFO (--reference, needs root), where
             a send does not wait for a descheduled peer

    /usr/bin/python3 bench/slimgc/sends.py --steps 400 --out DIR
    /usr/bin/python3 bench/slimgc/sends.py --report DIR   # tables again

Writes DIR/sends-{normal,fifo}.json and DIR/report.md.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import socket
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
NAMES = ("conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
         "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")


def rank_main(rank: int, port: int, steps: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F

    from bellows.compress import ProcessGroupComm, make_compressor
    from bellows.torch import CompressionHook

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 16, 5)
            self.conv2 = nn.Conv2d(16, 32, 5)
            self.fc1 = nn.Linear(32 * 4 * 4, 128)
            self.fc2 = nn.Linear(128, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), 2)
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            return self.fc2(F.relu(self.fc1(x.flatten(1))))

    torch.set_num_threads(1)
    torch.manual_seed(0)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=2)
    model = Net()
    ddp = nn.parallel.DistributedDataParallel(model)
    params = [p for p in model.parameters()]
    sends = []
    step = [0]

    def on_send(layer, compressed, comm_ms, codec_ms):
        sends.append((step[0], layer, bool(compressed), comm_ms, codec_ms))

    hook = CompressionHook(params, make_compressor("2bit", 0, 0.15),
                           ProcessGroupComm(), on_send=on_send, align=True)
    hook.register(ddp)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(64, 1, 28, 28, generator=g)
    y = torch.randint(0, 10, (64,), generator=g)
    for s in range(steps):
        step[0] = s
        even = s % 2 == 0
        hook.levels = [1.0 if even and p.dim() >= 2 else 0.0
                       for p in params]
        hook.reset()
        opt.zero_grad()
        F.cross_entropy(ddp(x), y).backward()
        opt.step()
    dist.barrier()
    pathlib.Path(out).write_text(json.dumps(
        {"rank": rank, "names": NAMES, "sends": sends}))
    dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def record(steps: int, out: pathlib.Path, fifo: bool) -> None:
    """Runs the two ranks; fifo: both under SCHED_FIFO 10."""
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT / "agent/python"),
               BELLOWS_LIB=os.environ.get(
                   "BELLOWS_LIB", str(ROOT / "build/agent/libbellows.so")))
    procs = []
    for rank in range(2):
        cmd = [sys.executable, __file__, "--rank", str(rank), "--port",
               str(port), "--steps", str(steps), "--rank-out",
               str(out / f"rank{rank}.json")]
        if fifo:
            cmd = ["chrt", "-f", "10"] + cmd
        procs.append(subprocess.Popen(cmd, env=env))
    for p in procs:
        if p.wait() != 0:
            raise SystemExit(f"a rank failed: {p.args}")


def q(v: list[float], p: float) -> float:
    """The p-quantile of v, the lower of the two order statistics around
    it (the agent's rule: index floor(p * (n - 1)))."""
    s = sorted(v)
    return s[int(p * (len(s) - 1))]


def low_half_mean(v: list[float]) -> float:
    s = sorted(v)
    h = s[:max(1, (len(s) + 1) // 2)]
    return sum(h) / len(h)


STATS = {
    "median": statistics.median,
    "p25": lambda v: q(v, 0.25),
    "p10": lambda v: q(v, 0.10),
    "min": min,
    "lowmean": low_half_mean,
}


def series(run: dict, window: int):
    """{(rank, layer, compressed): [[window's comm_ms...], ...]}"""
    out = {}
    for r in run:
        for step, layer, comp, ms, codec in r["sends"]:
            key = (r["rank"], layer, comp)
            wins = out.setdefault(key, {})
            wins.setdefault(step // window, []).append(ms)
    return {k: [v[w] for w in sorted(v)] for k, v in out.items()}


def report(out: pathlib.Path, window: int) -> str:
    runs = {}
    for kind in ("normal", "fifo"):
        f = out / f"sends-{kind}.json"
        if f.exists():
            runs[kind] = json.loads(f.read_text())
    lines = [f"# Per-send times and window statistics ({window}-step "
             "windows)", ""]
    normal = series(runs["normal"], window)
    ref = series(runs["fifo"], 10**9) if "fifo" in runs else {}
    # The modes: share of sends over 1.5 ms, per kind.
    for kind, data in (("normal", normal), ("fifo", ref)):
        if not data:
            continue
        for comp in (False, True):
            v = [x for k, ws in data.items() if k[2] == comp
                 for w in ws for x in w]
            if not v:
                continue
            slow = sum(1 for x in v if x > 1.5) / len(v)
            lines.append(
                f"- {kind} run, {'compressed' if comp else 'raw'} sends: "
                f"{len(v)}, median {statistics.median(v):.3f} ms, p10 "
                f"{q(v, .1):.3f}, p90 {q(v, .9):.3f}, "
                f"{100 * slow:.0f} % over 1.5 ms")
    lines.append("")
    # Histogram of raw sends of the normal run (log bins).
    v = [x for k, ws in normal.items() if not k[2] for w in ws for x in w]
    edges = [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 1e9]
    lines += ["Raw sends of the normal run, by duration:", "", "```"]
    lo = 0.0
    for e in edges:
        n = sum(1 for x in v if lo <= x < e)
        lines.append(f"{lo:6.2f}-{e if e < 1e8 else float('inf'):6.2f} ms "
                     f"{n:5d} {'#' * round(60 * n / max(1, len(v)))}")
        lo = e
    lines += ["```", ""]
    lines += ["| statistic | spread (raw) | windows > 2x lowest (raw) | "
              "spread (comp) | bias vs FIFO median (raw) | "
              "bias (comp) |", "|---|---|---|---|---|---|"]
    for name, f in STATS.items():
        row = [name]
        flips_all = 0
        n_all = 0
        for comp in (False, True):
            spreads = []
            biases = []
            for key, wins in normal.items():
                if key[2] != comp or len(wins) < 2:
                    continue
                vals = [f(w) for w in wins if w]
                mid = statistics.median(vals)
                spreads.append((max(vals) - min(vals)) / mid)
                if not comp:
                    flips_all += sum(1 for x in vals if x > 2 * min(vals))
                    n_all += len(vals)
                if key in ref:
                    whole = [x for w in wins for x in w]
                    biases.append(f(whole) / statistics.median(
                        ref[key][0]) - 1)
            sp = statistics.median(spreads) if spreads else float("nan")
            bi = statistics.median(biases) if biases else float("nan")
            row.append((sp, bi))
        lines.append(
            f"| {name} | {row[1][0]:.2f} | {flips_all}/{n_all} | "
            f"{row[2][0]:.2f} | {100 * row[1][1]:+.0f} % | "
            f"{100 * row[2][1]:+.0f} % |")
    lines.append("")
    # SlimGC's question per window: t_c / (t_cq + t_pq) of each matrix on
    # each rank, on which side of 1 compared with the whole run's.
    codec = {}
    for r in runs["normal"]:
        for step, layer, comp, ms, cms in r["sends"]:
            if comp:
                codec.setdefault((r["rank"], layer), {}).setdefault(
                    step // window, []).append(cms)
    lines += ["SlimGC's ratio t_c / (t_cq + t_pq) per window, each matrix "
              "on each rank: windows on the other side of 1 than the whole "
              "run's ratio, and the ratio's spread (p90 / p10 over "
              "windows, median over tensors)", "",
              "| statistic | windows on the other side | spread |",
              "|---|---|---|"]
    for name, f in STATS.items():
        other = total = 0
        spreads = []
        for (rank, layer), cw in sorted(codec.items()):
            raw = normal[(rank, layer, False)]
            comp = normal[(rank, layer, True)]
            wins = sorted(cw)
            ratios = [f(raw[w]) / (f(comp[w]) + f(cw[w])) for w in
                      range(min(len(raw), len(comp), len(wins)))]
            whole = f([x for w in raw for x in w]) / (
                f([x for w in comp for x in w])
                + f([x for w in cw.values() for x in w]))
            other += sum(1 for x in ratios if (x > 1) != (whole > 1))
            total += len(ratios)
            spreads.append(q(ratios, .9) / q(ratios, .1))
        lines.append(f"| {name} | {other}/{total} | "
                     f"{statistics.median(spreads):.2f} |")
    lines.append("")
    # Per tensor (rank 0, raw): the window values of median and p25.
    lines += ["Rank 0, raw sends, per window (ms): median / p25", "",
              "| tensor | " + " | ".join(
                  f"w{i}" for i in range(len(next(iter(normal.values())))))
              + " |", "|---|" + "---|" * len(next(iter(normal.values())))]
    for (rank, layer, comp), wins in sorted(normal.items()):
        if rank != 0 or comp:
            continue
        cells = [f"{statistics.median(w):.2f}/{q(w, .25):.2f}"
                 for w in wins]
        lines.append(f"| {NAMES[layer]} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    (out / "report.md").write_text(text)
    return text


def main(argv) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--window", type=int, default=20)
    ap.add_argument("--out", default="bench/slimgc/results-sends")
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--no-reference", action="store_true",
                    help="skip the SCHED_FIFO run")
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--rank-out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.rank is not None:
        rank_main(args.rank, args.port, args.steps, args.rank_out)
        return 0
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.report:
        kinds = ["normal"] + ([] if args.no_reference else ["fifo"])
        for kind in kinds:
            record(args.steps, out, kind == "fifo")
            runs = [json.loads((out / f"rank{r}.json").read_text())
                    for r in range(2)]
            (out / f"sends-{kind}.json").write_text(json.dumps(runs))
            for r in range(2):
                (out / f"rank{r}.json").unlink()
        (out / "command.txt").write_text(
            "/usr/bin/python3 " + " ".join(["bench/slimgc/sends.py"] + argv)
            + "\n")
    print(report(out, args.window), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
