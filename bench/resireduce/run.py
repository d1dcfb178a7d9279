#!/usr/bin/python3
"""run - ResiReduce's residual plans on Fashion-MNIST, 2 ranks, top-k 0.1.

Runs examples/pytorch/fashion_mnist.py (2 ranks, gloo, CPU, --model
resnet: a small ResNet-style CNN with runs of same-shape convolutions and
one large fully connected layer) under one bellowsd with
bench/resireduce/policy.yaml, in three configurations told apart by job
name, with the same model, data, seeds and LR schedule:

    perlayer   top-k 0.1 with one whole residual per layer
    static     the same with the paper's static ResiReduce plan (runs of
               adjacent same-shape weights share, the large fc keeps
               0.5 x 0.5), fixed before training
    bellowsd   the same with the resireduce policy's plan

and writes to --out one JSON per run and results.md: final test accuracy
(mean +- std over the seeds), residual memory (floats held under the
plan, mean over steps, against one per parameter), floats sent, step
time. --report-only rebuilds the table from the JSON files there.

usage: bench/resireduce/run.py [--seeds 0,1,2] [--epochs 4] [--out DIR]
           [--configs perlayer,static,bellowsd] [--model resnet]
           [--build DIR] [--train-limit N] [--report-only]
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import benchkit  # noqa: E402
from benchkit import mean_std  # noqa: E402

POLICY = HERE / "policy.yaml"
CONFIGS = ["perlayer", "static", "bellowsd"]


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--lr-decay-at", default=None,
                   help="epoch of the LR drop (default 3/4 of --epochs)")
    p.add_argument("--model", default="resnet", choices=("resnet", "net"))
    p.add_argument("--configs", default=",".join(CONFIGS))
    benchkit.add_run_options(p, HERE)
    a = p.parse_args(argv)
    a.seeds = [int(s) for s in a.seeds.split(",")]
    a.configs = benchkit.split_configs(p, a.configs, CONFIGS)
    if a.lr_decay_at is None:
        a.lr_decay_at = str(max(1, (3 * a.epochs) // 4))
    return a


def summary(res: dict) -> str:
    kept = res["residual_memory_mean"]
    return (benchkit.acc_floats(res) + f", residual "
            f"{100 * kept['kept'] / max(kept['full'], 1):.0f}% kept")


def run_all(args, out: pathlib.Path) -> None:
    build = pathlib.Path(args.build).resolve()
    db = "history.db" if benchkit.has_history(build) else None
    jobs = []
    for seed in args.seeds:  # seed-major: partial results stay even
        for config in args.configs:
            opts = ["--seed", str(seed), "--epochs", str(args.epochs),
                    "--lr-decay-at", args.lr_decay_at, "--model",
                    args.model, "--compressor", "topk"]
            if config == "static":
                opts.append("--static-resireduce")
            jobs.append((benchkit.job_name("bench-", config, seed), opts))
    benchkit.run_jobs(build, POLICY, out, jobs, args.train_limit, db=db,
                      summary=summary)


def step_ms(res: dict) -> float:
    """Median over the run's windows of their mean step time."""
    return statistics.median(w["times"]["step_ms"] for w in res["windows"])


def report(args, out: pathlib.Path, argv) -> str:
    groups = {c: runs for c, runs in
              benchkit.load_runs(out, "bench-", CONFIGS).items() if runs}
    if not groups:
        raise SystemExit(f"no results in {out}")
    first = next(iter(groups.values()))[0]
    a = first["args"]
    command = benchkit.read_command(
        out, "bench/resireduce/run.py " + " ".join(argv))
    base = groups.get("perlayer")
    base_acc = (statistics.fmean(100 * r["final_acc"] for r in base)
                if base else None)
    rows = []
    for config, runs in groups.items():
        acc_m, acc_s = mean_std([100 * r["final_acc"] for r in runs])
        kept = [r["residual_memory_mean"]["kept"] /
                max(r["residual_memory_mean"]["full"], 1) for r in runs]
        last = [r["residual_memory"]["kept"] /
                max(r["residual_memory"]["full"], 1) for r in runs]
        peak = statistics.fmean(r["residual_peak_floats"] for r in runs)
        rows.append([
            config, len(runs), f"{acc_m:.2f} ± {acc_s:.2f}",
            "-" if base_acc is None else f"{acc_m - base_acc:+.2f}",
            f"{100 * statistics.fmean(kept):.1f}%",
            f"{100 * statistics.fmean(last):.1f}%",
            f"{peak:.0f}",
            f"{statistics.fmean(r['floats_sent'] for r in runs) / 1e6:.1f}M",
            f"{statistics.fmean(step_ms(r) for r in runs):.1f}",
            f"{sum(len(r['plan_changes']) for r in runs) / len(runs):.1f}",
        ])
    full = first["residual_memory"]["full"]
    lines = [
        "# ResiReduce on Fashion-MNIST: results", "",
        f"Command: `{command.strip()}`", "",
        benchkit.machine_line(), "",
        f"Model `{a['model']}`, {first['world']} ranks, top-k keep "
        f"fraction 0.1 on every weight (biases raw, without residual), "
        f"{a['epochs']} epochs, batch {a['batch_size']} per rank, LR "
        f"{a['lr']:g} x{a['lr_decay']:g} at epoch(s) {a['lr_decay_at']}, "
        f"train limit {a['train_limit'] or 'none'}; {full} residual "
        "floats per rank with one residual per layer.", "",
        *benchkit.table(
            ["config", "runs", "test acc %", "vs perlayer",
             "residual kept (mean over steps)", "kept (last plan)",
             "peak floats held", "floats sent", "step ms (median)",
             "plan changes"], rows),
        "",
        "Residual kept: floats the plan in force holds (a shared buffer "
        "once, a reduced layer's block with its row and column indices) "
        "over the layers with error feedback, against one float per "
        "parameter; `peak floats held` includes a group's accumulator "
        "during its backward (the double buffer).", "",
    ]
    for config, runs in groups.items():
        for r in runs:
            for c in r["plan_changes"]:
                lines.append(f"- {config} seed {r['args']['seed']} step "
                             f"{c['step']}: "
                             f"{'static plan' if config == 'static' else c['reason']}")
    return "\n".join(lines) + "\n"


def main(argv) -> int:
    args = parse(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        benchkit.write_command(out, ["bench/resireduce/run.py", *argv],
                               stamp=True)
        run_all(args, out)
    text = report(args, out, argv)
    (out / "results.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
