#!/usr/bin/python3
"""run - 2-bit quantisation with and without SlimGC's size threshold.

Runs examples/pytorch/fashion_mnist.py (2 ranks, gloo, CPU) with
--compressor 2bit under one bellowsd with bench/slimgc/policy.yaml, in
three configurations told apart by job name, with the same model, data,
seeds and LR schedule:

    raw         every tensor raw (the reference)
    2bit        every matrix 2-bit quantised with error feedback
    threshold   2-bit above the size threshold SlimGC's calibration picks
                (matrices below it raw)

and writes to --out: one JSON per run (the trainer's summary), results.md
(final test accuracy, floats sent and their ratio to raw, wall time, the
threshold picked and the calibration table's ratios from the history) and
command.txt. --report-only rebuilds results.md from the files there.

usage: bench/slimgc/run.py [--seeds 0] [--epochs 3] [--out DIR]
           [--configs raw,2bit,threshold] [--quant-threshold 0.5]
           [--build DIR] [--train-limit N] [--report-only]
"""

from __future__ import annotations

import argparse
import math
import pathlib
import sqlite3
import statistics
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import benchkit  # noqa: E402
from benchkit import PYTHON  # noqa: E402

POLICY = HERE / "policy.yaml"
CONFIGS = ["raw", "2bit", "threshold"]
PREFIX = "bench-slimgc-"


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="0")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr-decay-at", default=None,
                   help="epochs of the LR drop (default: 2/3 of --epochs)")
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--quant-threshold", type=float, default=0.5,
                   help="2-bit value threshold (MXNet's and SlimGC's 0.5)")
    benchkit.add_run_options(p, HERE)
    a = p.parse_args(argv)
    a.seeds = [int(s) for s in a.seeds.split(",")]
    a.configs = benchkit.split_configs(p, a.configs, CONFIGS)
    if a.lr_decay_at is None:
        a.lr_decay_at = str(max(1, (2 * a.epochs) // 3))
    return a


def run_all(args, out: pathlib.Path) -> None:
    """The runs under one bellowsd recording into out/history.db."""
    jobs = [(benchkit.job_name(PREFIX, config, seed),
             ["--compressor", "2bit", "--quant-threshold",
              str(args.quant_threshold), "--seed", str(seed),
              "--epochs", str(args.epochs),
              "--lr-decay-at", args.lr_decay_at])
            for seed in args.seeds for config in args.configs]
    benchkit.run_jobs(args.build, POLICY, out, jobs, args.train_limit,
                      db=out / "history.db",
                      summary=lambda res: benchkit.acc_floats(res, 2))


def history(db: pathlib.Path, job: str) -> dict:
    """SlimGC's metrics and decision reasons of ``job`` from the history
    (empty if there is none)."""
    try:
        with benchkit.history_run(db, job) as (con, run):
            if run is None:
                return {}
            metrics = benchkit.policy_metrics(con, run, "slimgc")
            cols = [r[1] for r in
                    con.execute("PRAGMA table_info(decisions)")]
            reasons = []
            if "reason" in cols:
                reasons = con.execute(
                    "SELECT window, reason FROM decisions WHERE run_id = ? "
                    "ORDER BY window", (run,)).fetchall()
            return {"metrics": metrics, "reasons": reasons}
    except sqlite3.Error as e:
        return {"error": str(e)}


def fmt_bytes(b: int) -> str:
    if b >= 1 << 63:
        return "none compressed (infinite)"
    return f"{b} B"


def report(args, out: pathlib.Path) -> None:
    runs = benchkit.load_runs(out, PREFIX, CONFIGS)
    lines = ["# bench/slimgc results", ""]
    lines += [f"Command: `{benchkit.read_command(out)}`", "",
              benchkit.machine_line(), ""]
    raw_floats = None
    if runs["raw"]:
        raw_floats = statistics.fmean(r["floats_sent"] for r in runs["raw"])
    lines += benchkit.table(["configuration", "runs", "final test acc (%)",
                             "floats sent (M, all ranks)", "vs raw",
                             "wall (s)", "step (ms)"])
    for c in CONFIGS:
        rs = runs[c]
        if not rs:
            continue
        accs = [100 * r["final_acc"] for r in rs]
        floats = statistics.fmean(r["floats_sent"] for r in rs)
        wall = statistics.fmean(r["wall_s"] for r in rs)
        steps = [w["times"]["step_ms"] for r in rs for w in r["windows"]
                 if "times" in w]
        am, sd = benchkit.mean_std(accs)
        ratio = f"{raw_floats / floats:.1f}x less" if raw_floats else "-"
        lines.append(benchkit.row([c, len(rs), f"{am:.2f} ± {sd:.2f}",
                                   f"{floats / 1e6:.2f}", ratio,
                                   f"{wall:.0f}",
                                   f"{benchkit.median(steps, 0):.1f}"]))
    lines.append("")
    for r in runs["threshold"]:
        job = r["args"]["job"]
        lines += [f"## {job}: the threshold", ""]
        names = [layer["name"] for layer in r["layers"]]
        sizes = [4 * max(1, math.prod(layer["shape"]))
                 for layer in r["layers"]]
        for w in r["windows"]:
            t = w.get("size_threshold", 0)
            calib = w.get("times", {}).get("calibrating_steps", 0)
            lines.append(f"- window {w['window']}: threshold "
                         f"{fmt_bytes(t)}"
                         f"{f', {calib} calibration steps' if calib else ''}"
                         f", test acc {100 * w['test_acc']:.2f}%")
        last = r["windows"][-1] if r["windows"] else None
        if last is not None:
            t = last.get("size_threshold", 0)
            lines += ["", *benchkit.table(
                ["layer", "bytes", "level", "sent after the calibration"],
                [(name, size, f"{lv:g}", "2-bit" if lv > 0 else "raw")
                 for name, size, lv in zip(names, sizes, last["levels"])])]
        h = history(out / "history.db", job)
        if h.get("metrics"):
            lines += ["", "SlimGC's metrics in the history (window, name, "
                      "layer, value):", "", "```"]
            for m in h["metrics"]:
                lines.append(f"{m[0]:4d} {m[1]:<16} {m[2]!s:>4} {m[3]:.6g}")
            lines.append("```")
        if h.get("reasons"):
            lines += ["", "Decision reasons:", "", "```"]
            for wdw, reason in h["reasons"]:
                lines.append(f"{wdw}: {reason}")
            lines.append("```")
        if h.get("error"):
            lines += ["", f"(history not readable: {h['error']})"]
        if not h.get("reasons") and r.get("timeline"):
            lines += ["", "Level changes (step: reason):", "", "```"]
            lines += [f"{c['step']}: {c['reason']}" for c in r["timeline"]]
            lines.append("```")
        lines.append("")
    (out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main(argv) -> int:
    args = parse(argv)
    out = pathlib.Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        benchkit.write_command(out, [PYTHON, "bench/slimgc/run.py"] + argv,
                               stamp=True)
        run_all(args, out)
    report(args, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
