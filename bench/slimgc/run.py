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
import datetime
import json
import os
import pathlib
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
SRC = HERE.parents[1]
TRAINER = SRC / "examples" / "pytorch" / "fashion_mnist.py"
POLICY = HERE / "policy.yaml"
PYTHON = "/usr/bin/python3"
CONFIGS = ["raw", "2bit", "threshold"]


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="0")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr-decay-at", default=None,
                   help="epochs of the LR drop (default: 2/3 of --epochs)")
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--quant-threshold", type=float, default=0.5,
                   help="2-bit value threshold (MXNet's and SlimGC's 0.5)")
    p.add_argument("--out", default=str(HERE / "results"))
    p.add_argument("--build", default=os.environ.get(
        "BELLOWS_BUILD_DIR", str(SRC / "build")))
    p.add_argument("--train-limit", type=int, default=0)
    p.add_argument("--report-only", action="store_true")
    a = p.parse_args(argv)
    a.seeds = [int(s) for s in a.seeds.split(",")]
    a.configs = a.configs.split(",")
    for c in a.configs:
        if c not in CONFIGS:
            p.error(f"unknown configuration {c!r}")
    if a.lr_decay_at is None:
        a.lr_decay_at = str(max(1, (2 * a.epochs) // 3))
    return a


class Daemon:
    """bellowsd on ipc endpoints in a temporary directory, recording its
    history into ``db`` (kept in --out)."""

    def __init__(self, build: pathlib.Path, out: pathlib.Path):
        self.tmp = pathlib.Path(tempfile.mkdtemp(prefix="bellows-bench."))
        self.control = f"ipc://{self.tmp}/control"
        self.publish = f"ipc://{self.tmp}/publish"
        self.bellowsd = build / "controller" / "bellowsd"
        self.bellows = build / "tools" / "bellows"
        self.log = out / "bellowsd.log"
        self.db = out / "history.db"
        self.proc = None

    def start(self) -> None:
        args = [str(self.bellowsd), "--policy", str(POLICY), "--control",
                self.control, "--publish", self.publish, "--db",
                str(self.db)]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log,
                                         stderr=subprocess.STDOUT,
                                         cwd=self.tmp)
        for _ in range(100):
            r = subprocess.run([str(self.bellows), "status", "--control",
                                self.control, "--timeout-ms", "200"],
                               capture_output=True)
            if r.returncode == 0:
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"bellowsd did not start; see {self.log}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


def run_all(args, out: pathlib.Path) -> None:
    build = pathlib.Path(args.build).resolve()
    daemon = Daemon(build, out)
    env = dict(os.environ, BELLOWS_LIB=str(build / "agent" /
                                           "libbellows.so"))
    daemon.start()
    try:
        total = len(args.seeds) * len(args.configs)
        n = 0
        for seed in args.seeds:
            for config in args.configs:
                n += 1
                job = f"bench-slimgc-{config}-s{seed}"
                cmd = [PYTHON, str(TRAINER), "--nproc", "2", "--job", job,
                       "--compressor", "2bit", "--quant-threshold",
                       str(args.quant_threshold), "--seed", str(seed),
                       "--epochs", str(args.epochs),
                       "--lr-decay-at", args.lr_decay_at,
                       "--control", daemon.control,
                       "--publish", daemon.publish,
                       "--json", str(out / f"{job}.json"), "--quiet"]
                if args.train_limit:
                    cmd += ["--train-limit", str(args.train_limit)]
                print(f"[{n}/{total}] {job} ...", end=" ", flush=True)
                t0 = time.perf_counter()
                subprocess.run(cmd, check=True, env=env)
                res = json.loads((out / f"{job}.json").read_text())
                print(f"{time.perf_counter() - t0:.0f} s, test acc "
                      f"{100 * res['final_acc']:.2f}%, "
                      f"{res['floats_sent'] / 1e6:.2f}M floats",
                      flush=True)
    finally:
        daemon.stop()


def history(db: pathlib.Path, job: str) -> dict:
    """SlimGC's metrics and decision reasons of ``job`` from the history
    (empty if there is none)."""
    if not db.exists():
        return {}
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        run = con.execute("SELECT id FROM runs WHERE job = ? ORDER BY id "
                          "DESC LIMIT 1", (job,)).fetchone()
        if run is None:
            return {}
        metrics = con.execute(
            "SELECT window, name, layer, value FROM policy_metrics WHERE "
            "run_id = ? AND policy LIKE 'slimgc%' ORDER BY window, name, "
            "layer", (run[0],)).fetchall()
        cols = [r[1] for r in con.execute("PRAGMA table_info(decisions)")]
        reasons = []
        if "reason" in cols:
            reasons = con.execute(
                "SELECT window, reason FROM decisions WHERE run_id = ? "
                "ORDER BY window", (run[0],)).fetchall()
        return {"metrics": metrics, "reasons": reasons}
    except sqlite3.Error as e:
        return {"error": str(e)}
    finally:
        con.close()


def fmt_bytes(b: int) -> str:
    if b >= 1 << 63:
        return "none compressed (infinite)"
    return f"{b} B"


def report(args, out: pathlib.Path) -> None:
    runs = {c: [] for c in CONFIGS}
    for c in CONFIGS:
        for f in sorted(out.glob(f"bench-slimgc-{c}-s*.json")):
            runs[c].append(json.loads(f.read_text()))
    lines = ["# bench/slimgc results", ""]
    cmd = (out / "command.txt").read_text().splitlines()[0] \
        if (out / "command.txt").exists() else "?"
    lines += [f"Command: `{cmd}`", "",
              f"Machine: {platform.node()}, {os.cpu_count()} CPUs, "
              f"{platform.platform()}", ""]
    raw_floats = None
    if runs["raw"]:
        raw_floats = statistics.fmean(r["floats_sent"] for r in runs["raw"])
    lines += ["| configuration | runs | final test acc (%) | floats sent "
              "(M, all ranks) | vs raw | wall (s) | step (ms) |",
              "|---|---|---|---|---|---|---|"]
    for c in CONFIGS:
        rs = runs[c]
        if not rs:
            continue
        accs = [100 * r["final_acc"] for r in rs]
        floats = statistics.fmean(r["floats_sent"] for r in rs)
        wall = statistics.fmean(r["wall_s"] for r in rs)
        steps = [w["times"]["step_ms"] for r in rs for w in r["windows"]
                 if "times" in w]
        sd = statistics.stdev(accs) if len(accs) > 1 else 0.0
        ratio = f"{raw_floats / floats:.1f}x less" if raw_floats else "-"
        lines.append(f"| {c} | {len(rs)} | {statistics.fmean(accs):.2f} "
                     f"± {sd:.2f} | {floats / 1e6:.2f} | {ratio} | "
                     f"{wall:.0f} | "
                     f"{statistics.median(steps) if steps else 0:.1f} |")
    lines.append("")
    for r in runs["threshold"]:
        job = r["args"]["job"]
        lines += [f"## {job}: the threshold", ""]
        names = [layer["name"] for layer in r["layers"]]
        sizes = [4 * max(1, _prod(layer["shape"])) for layer in r["layers"]]
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
            lines += ["", "| layer | bytes | level | sent after the "
                      "calibration |", "|---|---|---|---|"]
            for name, size, lv in zip(names, sizes, last["levels"]):
                mode = "2-bit" if lv > 0 else "raw"
                lines.append(f"| {name} | {size} | {lv:g} | {mode} |")
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


def _prod(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def main(argv) -> int:
    args = parse(argv)
    out = pathlib.Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        (out / "command.txt").write_text(
            " ".join([PYTHON, "bench/slimgc/run.py"] + argv) + "\n"
            + datetime.datetime.now(datetime.timezone.utc).strftime(
                "# %Y-%m-%d %H:%M UTC\n"))
        run_all(args, out)
    report(args, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
