#!/usr/bin/python3
"""run - Accordion against fixed PowerSGD ranks on Fashion-MNIST, 2 ranks.

Runs examples/pytorch/fashion_mnist.py (2 ranks, gloo, CPU) under one
bellowsd with bench/accordion/policy.yaml, in four configurations told
apart by job name, with the same model, data, seeds and LR schedule:

    uncompressed   every tensor raw
    rank2          PowerSGD rank 2 on every matrix (the critical level)
    rank1          PowerSGD rank 1 (the stable level)
    accordion      Accordion switching each matrix between rank 2 and 1

and writes to --out: one JSON per run (the trainer's summary), the table
results.md (final test accuracy mean +- std, floats communicated and the
ratio to rank 2, wall time, Accordion's per-layer switching timeline) and
accuracy_vs_floats.svg. --report-only rebuilds the table and plot from
the JSON files already there.

usage: bench/accordion/run.py [--seeds 0,1,2] [--epochs 10] [--out DIR]
           [--configs uncompressed,rank2,rank1,accordion] [--build DIR]
           [--train-limit N] [--report-only]
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import benchkit  # noqa: E402
from benchkit import PYTHON, mean_std  # noqa: E402

POLICY = HERE / "policy.yaml"
CONFIGS = ["uncompressed", "rank2", "rank1", "accordion"]
COLOURS = {"uncompressed": "#555555", "rank2": "#1f77b4",
           "rank1": "#d62728", "accordion": "#2ca02c"}


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--lr-decay-at", default=None,
                   help="epochs of the LR drops (default: at 1/2 and 5/6 "
                   "of --epochs, as the thesis's 150 and 250 of 300)")
    p.add_argument("--configs", default=",".join(CONFIGS))
    benchkit.add_run_options(p, HERE)
    a = p.parse_args(argv)
    a.seeds = [int(s) for s in a.seeds.split(",")]
    a.configs = benchkit.split_configs(p, a.configs, CONFIGS)
    if a.lr_decay_at is None:
        a.lr_decay_at = f"{max(1, a.epochs // 2)},{max(1, 5 * a.epochs // 6)}"
    return a


def run_all(args, out: pathlib.Path) -> None:
    build = pathlib.Path(args.build).resolve()
    # The history goes into bellowsd's private directory, removed with it.
    db = "history.db" if benchkit.has_history(build) else None
    jobs = [(benchkit.job_name("bench-", config, seed),
             ["--seed", str(seed), "--epochs", str(args.epochs),
              "--lr-decay-at", args.lr_decay_at])
            for seed in args.seeds  # seed-major: partial results stay even
            for config in args.configs]
    benchkit.run_jobs(build, POLICY, out, jobs, args.train_limit, db=db,
                      summary=benchkit.acc_floats)


def switching(res) -> list[str]:
    """Per matrix layer, its level at the end of every window, as one
    character per window."""
    rows = []
    for i, layer in enumerate(res["layers"]):
        if len(layer["shape"]) < 2:
            continue
        cells = "".join(f"{w['levels'][i]:g}" for w in res["windows"])
        rows.append(f"{layer['name']:<14} {cells}")
    return rows


def lr_marks(res) -> str:
    """A line under the timeline: '|' at the first window of each LR."""
    out, last = [], None
    for w in res["windows"]:
        out.append("|" if last is not None and w["lr"] != last else " ")
        last = w["lr"]
    return f"{'LR drop':<14} " + "".join(out)


def svg_plot(groups, path: pathlib.Path) -> None:
    """Accuracy vs floats communicated: each run a dot, each configuration
    its mean with a +-1 std bar; x logarithmic."""
    w, h, ml, mr, mt, mb = 640, 400, 70, 150, 30, 55
    pts = [(r["floats_sent"], 100 * r["final_acc"], c)
           for c, runs in groups.items() for r in runs]
    xs = [math.log10(p[0]) for p in pts]
    ys = [p[1] for p in pts]
    x0, x1 = math.floor(min(xs) * 4) / 4, math.ceil(max(xs) * 4) / 4
    if x1 <= x0:
        x1 = x0 + 0.25
    y0, y1 = min(ys), max(ys)
    pad = max(0.2, (y1 - y0) * 0.15)
    y0, y1 = y0 - pad, y1 + pad

    def sx(v):
        return ml + (math.log10(v) - x0) / (x1 - x0) * (w - ml - mr)

    def sy(v):
        return h - mb - (v - y0) / (y1 - y0) * (h - mt - mb)

    e = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" '
         f'height="{h}" font-family="sans-serif" font-size="12">',
         f'<rect width="{w}" height="{h}" fill="white"/>',
         f'<text x="{ml}" y="18" font-size="14">Fashion-MNIST, 2 ranks: '
         'final test accuracy vs floats communicated</text>',
         f'<line x1="{ml}" y1="{h - mb}" x2="{w - mr}" y2="{h - mb}" '
         'stroke="black"/>',
         f'<line x1="{ml}" y1="{mt}" x2="{ml}" y2="{h - mb}" '
         'stroke="black"/>']
    decade = math.floor(x0)
    while decade <= x1:
        for m in (1, 2, 5):
            v = m * 10 ** decade
            if x0 <= math.log10(v) <= x1:
                x = sx(v)
                e.append(f'<line x1="{x:.1f}" y1="{h - mb}" x2="{x:.1f}" '
                         f'y2="{h - mb + 5}" stroke="black"/>')
                e.append(f'<text x="{x:.1f}" y="{h - mb + 18}" '
                         f'text-anchor="middle">{v / 1e6:g}M</text>')
        decade += 1
    step = 10 ** math.floor(math.log10(max(y1 - y0, 1e-9)))
    if (y1 - y0) / step < 4:
        step /= 2
    t = math.ceil(y0 / step) * step
    while t <= y1:
        y = sy(t)
        e.append(f'<line x1="{ml - 5}" y1="{y:.1f}" x2="{w - mr}" '
                 f'y2="{y:.1f}" stroke="#dddddd"/>')
        e.append(f'<text x="{ml - 8}" y="{y + 4:.1f}" text-anchor="end">'
                 f'{t:g}</text>')
        t += step
    e.append(f'<text x="{(ml + w - mr) / 2}" y="{h - 12}" '
             'text-anchor="middle">floats communicated, all ranks '
             '(log scale)</text>')
    e.append(f'<text x="16" y="{(mt + h - mb) / 2}" text-anchor="middle" '
             f'transform="rotate(-90 16 {(mt + h - mb) / 2})">final test '
             'accuracy (%)</text>')
    for i, (config, runs) in enumerate(groups.items()):
        col = COLOURS[config]
        for r in runs:
            e.append(f'<circle cx="{sx(r["floats_sent"]):.1f}" '
                     f'cy="{sy(100 * r["final_acc"]):.1f}" r="3" '
                     f'fill="{col}" fill-opacity="0.45"/>')
        fm = statistics.fmean(r["floats_sent"] for r in runs)
        am, asd = mean_std([100 * r["final_acc"] for r in runs])
        x = sx(fm)
        e.append(f'<line x1="{x:.1f}" y1="{sy(am - asd):.1f}" '
                 f'x2="{x:.1f}" y2="{sy(am + asd):.1f}" stroke="{col}" '
                 'stroke-width="2"/>')
        e.append(f'<rect x="{x - 5:.1f}" y="{sy(am) - 5:.1f}" width="10" '
                 f'height="10" fill="{col}"/>')
        ly = mt + 20 + 20 * i
        e.append(f'<rect x="{w - mr + 15}" y="{ly - 9}" width="10" '
                 f'height="10" fill="{col}"/>')
        e.append(f'<text x="{w - mr + 31}" y="{ly}">{config}</text>')
    for j, note in enumerate(("square: mean", "bar: ±1 std",
                              "dot: one run")):
        e.append(f'<text x="{w - mr + 15}" '
                 f'y="{mt + 25 + 20 * len(groups) + 15 * j}" '
                 f'fill="#555555">{note}</text>')
    e.append("</svg>")
    path.write_text("\n".join(e) + "\n")


def report(args, out: pathlib.Path, argv) -> str:
    groups = {c: runs for c, runs in
              benchkit.load_runs(out, "bench-", CONFIGS).items() if runs}
    if not groups:
        raise SystemExit(f"no results in {out}")
    base = groups.get("rank2")
    base_floats = (statistics.fmean(r["floats_sent"] for r in base)
                   if base else None)
    first = next(iter(groups.values()))[0]
    a = first["args"]
    command = benchkit.read_command(
        out, "bench/accordion/run.py " + " ".join(argv))
    lines = [
        "# Accordion on Fashion-MNIST: results",
        "",
        f"Command: `{command.strip()}`" +
        f" ({datetime.date.today()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, torch {torch_version()})",
        "",
        f"2 ranks (gloo, CPU, 1 thread each), {a['epochs']} epochs, batch "
        f"{a['batch_size']} per rank, SGD momentum 0.9, LR {a['lr']:g} "
        f"x{a['lr_decay']:g} at epochs {a['lr_decay_at']}, windows of "
        f"{first['window_steps']} steps and at epoch ends; "
        f"{first['floats_raw'] / a['epochs'] / 1e6:.2f}M floats per "
        "epoch uncompressed (all ranks).",
        "",
        *benchkit.table(["configuration", "runs",
                         "final test accuracy (%)",
                         "floats communicated (M)", "vs rank 2",
                         "wall time (s)"]),
    ]
    for config, runs in groups.items():
        am, asd = mean_std([100 * r["final_acc"] for r in runs])
        fm = statistics.fmean(r["floats_sent"] for r in runs) / 1e6
        wm, wsd = mean_std([r["wall_s"] for r in runs])
        ratio = "-"
        if base_floats:
            r = base_floats / 1e6 / fm
            ratio = f"{r:.2f}x less" if r >= 1 else f"{1 / r:.1f}x more"
        lines.append(benchkit.row([config, len(runs),
                                   f"{am:.2f} ± {asd:.2f}", f"{fm:.2f}",
                                   ratio, f"{wm:.0f} ± {wsd:.0f}"]))
    lines += ["", "Accuracy vs floats: "
              "[accuracy_vs_floats.svg](accuracy_vs_floats.svg).", ""]
    if "accordion" in groups:
        lines += ["## Accordion's switching, per layer", "",
                  "PowerSGD rank of each matrix at the end of every window "
                  "(one character per window, half an epoch each):", ""]
        for r in groups["accordion"]:
            lines += [f"seed {r['args']['seed']}:", "", "```"]
            lines += switching(r)
            lines += [lr_marks(r), "```", ""]
    text = "\n".join(lines) + "\n"
    (out / "results.md").write_text(text)
    svg_plot(groups, out / "accuracy_vs_floats.svg")
    return text


def torch_version() -> str:
    r = subprocess.run([PYTHON, "-c",
                        "import torch; print(torch.__version__)"],
                       capture_output=True, text=True)
    return r.stdout.strip() or "?"


def main(argv) -> int:
    args = parse(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        benchkit.write_command(out, ["bench/accordion/run.py"] + argv)
        t0 = time.perf_counter()
        run_all(args, out)
        print(f"benchmark: {time.perf_counter() - t0:.0f} s in all")
    print(report(args, out, argv))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
