#!/usr/bin/python3
"""run - GComp against raw all-reduce in a short Fashion-MNIST training run.

Runs examples/pytorch/fashion_mnist.py (2 ranks, gloo, CPU, momentum SGD)
under one bellowsd with bench/gcomp/policy.yaml in two configurations,
told apart by job name, with the same model, data, seeds and LR schedule:

    raw     every tensor all-reduced as float32 (the reference)
    gcomp   every tensor through GComp (--compressor gcomp): the gcomp
            policy's exponent tables, each value truncated at the level
            of the optimizer's delta, all-gathered and decoded

and writes to --out: one JSON per run (the trainer's summary), results.md
(final test accuracy, floats and bytes sent and their ratio to raw, wall
and step time, the tables the policy built from the history) and
command.txt. --report-only rebuilds results.md from the files there. Run
it inside a network namespace with a slow loopback to see the step time
over a slow link (bench/gcomp/README.md).

usage: bench/gcomp/run.py [--seeds 0,1,2] [--epochs 1] [--out DIR]
           [--configs raw,gcomp] [--window-steps N] [--build DIR]
           [--train-limit N] [--report-only]
"""

from __future__ import annotations

import argparse
import pathlib
import sqlite3
import statistics
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import benchkit  # noqa: E402
from benchkit import PYTHON  # noqa: E402

POLICY = HERE / "policy.yaml"
CONFIGS = ["raw", "gcomp"]
PREFIX = "bench-gcomp-"


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr-decay-at", default=None,
                   help="epochs of the LR drop (default: 3/4 of --epochs)")
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--window-steps", type=int, default=0,
                   help="steps per bellows window (default: the "
                   "trainer's, half an epoch); the gcomp policy's tables "
                   "come at most once a window")
    benchkit.add_run_options(p, HERE)
    a = p.parse_args(argv)
    a.seeds = [int(s) for s in a.seeds.split(",")]
    a.configs = benchkit.split_configs(p, a.configs, CONFIGS)
    if a.lr_decay_at is None:
        a.lr_decay_at = str(max(1, (3 * a.epochs) // 4))
    return a


def run_all(args, out: pathlib.Path) -> None:
    """The runs under one bellowsd recording into out/history.db."""
    jobs = [(benchkit.job_name(PREFIX, config, seed),
             ["--compressor", "gcomp" if config == "gcomp" else "powersgd",
              "--seed", str(seed), "--epochs", str(args.epochs),
              "--lr-decay-at", args.lr_decay_at,
              "--window-steps", str(args.window_steps)])
            for seed in args.seeds for config in args.configs]
    benchkit.run_jobs(args.build, POLICY, out, jobs, args.train_limit,
                      db=out / "history.db",
                      summary=lambda res: benchkit.acc_floats(res, 2))


def reasons(db: pathlib.Path, job: str) -> list:
    """(window, reason) of the decisions of ``job`` that carry a table."""
    try:
        with benchkit.history_run(db, job) as (con, run):
            if run is None:
                return []
            return con.execute(
                "SELECT window, reason FROM decisions WHERE run_id = ? "
                "AND reason LIKE '%exponent table%' ORDER BY window",
                (run,)).fetchall()
    except sqlite3.Error as e:
        return [(-1, f"history not readable: {e}")]


def report(args, out: pathlib.Path) -> None:
    runs = benchkit.load_runs(out, PREFIX, CONFIGS)
    lines = ["# bench/gcomp results", ""]
    lines += [f"Command: `{benchkit.read_command(out)}`", "",
              benchkit.machine_line(), ""]
    raw_bytes = None
    if runs["raw"]:
        raw_bytes = statistics.fmean(r["bytes_sent"] for r in runs["raw"])
    lines += benchkit.table(["configuration", "runs", "final test acc (%)",
                             "per seed", "floats sent (M, all ranks)",
                             "MB sent (all ranks)", "vs raw", "wall (s)",
                             "step (ms)"])
    for c in CONFIGS:
        rs = runs[c]
        if not rs:
            continue
        accs = [100 * r["final_acc"] for r in rs]
        floats = statistics.fmean(r["floats_sent"] for r in rs)
        nbytes = statistics.fmean(r["bytes_sent"] for r in rs)
        wall = statistics.fmean(r["wall_s"] for r in rs)
        steps = [w["times"]["step_ms"] for r in rs for w in r["windows"]
                 if "times" in w]
        am, sd = benchkit.mean_std(accs)
        ratio = (f"{nbytes / raw_bytes:.3f}" if raw_bytes else "-")
        lines.append(benchkit.row([
            c, len(rs), f"{am:.2f} ± {sd:.2f}",
            " ".join(f"{a:.2f}" for a in accs), f"{floats / 1e6:.2f}",
            f"{nbytes / 1e6:.1f}", ratio, f"{wall:.0f}",
            f"{benchkit.median(steps, 0):.1f}"]))
    lines.append("")
    for r in runs["gcomp"]:
        job = r["args"]["job"]
        rs = reasons(out / "history.db", job)
        if rs:
            lines += [f"## {job}: the tables", "", "```"]
            lines += [f"{w}: {reason}" for w, reason in rs]
            lines += ["```", ""]
    (out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main(argv) -> int:
    args = parse(argv)
    out = pathlib.Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        benchkit.write_command(out, [PYTHON, "bench/gcomp/run.py"] + argv,
                               stamp=True)
        run_all(args, out)
    report(args, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
