#!/usr/bin/python3
"""run - perfmodel's predicted step times against the measured ones.

Runs examples/pytorch/fashion_mnist.py (2 ranks, gloo, CPU) under one
bellowsd with bench/perfmodel/policy.yaml, recording the history, in three
configurations told apart by job name:

    raw     every tensor raw                   (measures T_sync)
    comp    every matrix compressed, always    (measures T_comp)
    gate    compressed unless perfmodel predicts it loses (its predictions)

For every window of the gate run, the metrics perfmodel recorded in the
history (fitted alpha and BW, gamma, predicted t_sync_ms and t_comp_ms,
break-even bandwidth, compression needed, fit r2) are set against the
step times the trainer measured (wall time per step, mean over the
window), in the window itself and in the raw and comp runs. perfmodel's
predictions are whole steps: the thesis's T_obs (backward plus
synchronisation) plus the rest of the step as measured (forward,
optimizer). T_obs as measured (backward outside the hook + collectives +
encode/decode) is shown too. Writes results.md, the runs' JSON
and command.txt to --out; --report-only rebuilds results.md.

usage: bench/perfmodel/run.py [--seed 0] [--epochs 1] [--window-steps 25]
           [--compressor powersgd|2bit] [--out DIR] [--build DIR]
           [--train-limit N] [--configs raw,comp,gate] [--report-only]
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
CONFIGS = ["raw", "comp", "gate"]


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--window-steps", type=int, default=25)
    p.add_argument("--compressor", choices=("powersgd", "2bit"),
                   default="powersgd")
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--out", default=str(HERE / "results"))
    p.add_argument("--build", default=os.environ.get(
        "BELLOWS_BUILD_DIR", str(SRC / "build")))
    p.add_argument("--train-limit", type=int, default=0)
    p.add_argument("--report-only", action="store_true")
    a = p.parse_args(argv)
    a.configs = a.configs.split(",")
    for c in a.configs:
        if c not in CONFIGS:
            p.error(f"unknown configuration {c!r}")
    return a


class Daemon:
    """bellowsd on ipc endpoints in a temporary directory, recording its
    history into --out/history.db."""

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


def job_name(config: str, seed: int) -> str:
    return f"bench-perfmodel-{config}-s{seed}"


def run_all(args, out: pathlib.Path) -> None:
    build = pathlib.Path(args.build).resolve()
    daemon = Daemon(build, out)
    env = dict(os.environ, BELLOWS_LIB=str(build / "agent" /
                                           "libbellows.so"))
    daemon.start()
    try:
        for n, config in enumerate(args.configs, 1):
            job = job_name(config, args.seed)
            cmd = [PYTHON, str(TRAINER), "--nproc", "2", "--job", job,
                   "--compressor", args.compressor,
                   "--seed", str(args.seed), "--epochs", str(args.epochs),
                   "--lr-decay-at", str(args.epochs + 1),
                   "--window-steps", str(args.window_steps),
                   "--control", daemon.control, "--publish", daemon.publish,
                   "--json", str(out / f"{job}.json"), "--quiet"]
            if args.train_limit:
                cmd += ["--train-limit", str(args.train_limit)]
            print(f"[{n}/{len(args.configs)}] {job} ...", end=" ",
                  flush=True)
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, env=env)
            print(f"{time.perf_counter() - t0:.0f} s", flush=True)
    finally:
        daemon.stop()


def metrics_of(db: pathlib.Path, job: str) -> dict[int, dict[str, float]]:
    """perfmodel's job-wide metrics of ``job`` per window (layer -1 or
    NULL), from the history."""
    if not db.exists():
        return {}
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        run = con.execute("SELECT id FROM runs WHERE job = ? ORDER BY id "
                          "DESC LIMIT 1", (job,)).fetchone()
        if run is None:
            return {}
        out: dict[int, dict[str, float]] = {}
        for window, name, layer, value in con.execute(
                "SELECT window, name, layer, value FROM policy_metrics "
                "WHERE run_id = ? AND policy LIKE 'perfmodel%' ORDER BY "
                "window", (run[0],)):
            if layer is None or layer < 0:
                out.setdefault(window, {})[name] = value
        return out
    except sqlite3.Error as e:
        print(f"history not readable: {e}", file=sys.stderr)
        return {}
    finally:
        con.close()


def t_obs(w: dict) -> float:
    """Measured T_obs of a window: per step, backward outside the hook +
    collectives + encode/decode (ms)."""
    t = w["times"]
    return t["backward_ms"] + t["comm_ms"] + t["codec_ms"]


def step_ms(w: dict) -> float:
    """Measured wall time per step of a window (ms)."""
    return w["times"]["step_ms"]


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def report(args, out: pathlib.Path) -> None:
    runs = {}
    for c in CONFIGS:
        f = out / f"{job_name(c, args.seed)}.json"
        if f.exists():
            runs[c] = json.loads(f.read_text())
    lines = ["# bench/perfmodel results", ""]
    if (out / "command.txt").exists():
        lines += ["Command: `" + (out / "command.txt").read_text()
                  .splitlines()[0] + "`", ""]
    lines += [f"Machine: {platform.node()}, {os.cpu_count()} CPUs, "
              f"{platform.platform()}", ""]
    # Measured, per configuration (the first window is a warm-up).
    lines += ["## Measured per step (median over windows, first one "
              "skipped), ms", "",
              "| configuration | step (wall) | backward | collectives | "
              "encode+decode | T_obs |", "|---|---|---|---|---|---|"]
    meas = {}
    for c, r in runs.items():
        ws = [w for w in r["windows"] if "times" in w][1:]
        if not ws:
            continue
        meas[c] = med([step_ms(w) for w in ws])
        lines.append(
            f"| {c} | {med([w['times']['step_ms'] for w in ws]):.2f} | "
            f"{med([w['times']['backward_ms'] for w in ws]):.2f} | "
            f"{med([w['times']['comm_ms'] for w in ws]):.2f} | "
            f"{med([w['times']['codec_ms'] for w in ws]):.2f} | "
            f"{med([t_obs(w) for w in ws]):.2f} |")
    lines.append("")
    gate = runs.get("gate")
    if gate is not None:
        m = metrics_of(out / "history.db", job_name("gate", args.seed))
        names = ["alpha_ms", "bw_gbps", "gamma", "t_sync_ms", "t_comp_ms",
                 "breakeven_gbps", "cr_needed", "fit_r2", "codec_ms",
                 "t_backward_ms"]
        lines += ["## The gate run, window by window", "",
                  "Predictions are made at the end of each window from "
                  "the samples so far; `step` and `T_obs` are that "
                  "window's measured per-step times (ms), with "
                  "compression on or off as it was during the window.",
                  "",
                  "| window | compression | step | T_obs | "
                  + " | ".join(names) + " |",
                  "|---|---|---|---|" + "---|" * len(names)]
        errs_sync, errs_comp = [], []
        for w in gate["windows"]:
            if "times" not in w:
                continue
            mw = m.get(w["window"], {})
            # Off: the gate, or every layer raw at the window's end
            # (SlimGC's threshold above every tensor).
            off = w.get("compression_off", False) or not any(w["levels"])
            calib = w["times"].get("calibrating_steps", 0) > 0
            state = "calibrating" if calib else "off" if off else "on"
            cells = [f"{mw[n]:.4g}" if n in mw else "-" for n in names]
            lines.append(f"| {w['window']} | {state} | {step_ms(w):.2f} | "
                         f"{t_obs(w):.2f} | " + " | ".join(cells) + " |")
            if w["window"] == 0 or calib:
                continue
            key = "t_sync_ms" if off else "t_comp_ms"
            if key in mw and step_ms(w) > 0:
                (errs_sync if off else errs_comp).append(
                    (mw[key] - step_ms(w)) / step_ms(w))
        lines.append("")
        last = m[max(m)] if m else {}
        mr = metrics_of(out / "history.db", job_name("raw", args.seed))
        lines += ["## Predictions against measurements", ""]
        if mr:
            preds = [mw["t_sync_ms"] for mw in mr.values()
                     if "t_sync_ms" in mw]
            errs = []
            for w in runs.get("raw", {}).get("windows", []):
                mw = mr.get(w["window"], {})
                if w["window"] > 0 and "t_sync_ms" in mw and "times" in w:
                    errs.append((mw["t_sync_ms"] - step_ms(w))
                                / step_ms(w))
            lines.append(
                f"- uncompressed, perfmodel in the `raw` run (fit on "
                f"every tensor size): predicted {med(preds):.2f} ms "
                f"(median), measured step "
                f"{meas.get('raw', float('nan')):.2f} ms"
                + (f"; same-window error median "
                   f"{100 * med(errs):+.1f}%, max |err| "
                   f"{100 * max(abs(e) for e in errs):.1f}% over "
                   f"{len(errs)} windows" if errs else ""))
        for label, key, cfg in (("uncompressed", "t_sync_ms", "raw"),
                                ("compressed", "t_comp_ms", "comp")):
            preds = [mw[key] for mw in m.values() if key in mw]
            lines.append(
                f"- {label}, perfmodel in the gate run: predicted "
                f"{med(preds):.2f} ms (median over windows; last "
                f"{last.get(key, float('nan')):.2f}), measured step "
                f"{meas.get(cfg, float('nan')):.2f} ms in the `{cfg}` "
                f"run, {meas.get('gate', float('nan')):.2f} ms in the "
                "gate run overall")
        for label, errs in (("gate off (vs t_sync_ms)", errs_sync),
                            ("gate on (vs t_comp_ms)", errs_comp)):
            if errs:
                lines.append(
                    f"- same-window error, {label}: median "
                    f"{100 * med(errs):+.1f}%, max |err| "
                    f"{100 * max(abs(e) for e in errs):.1f}% over "
                    f"{len(errs)} windows (with overlap: false the "
                    "unmodelled communication of the mode in force is "
                    "measured from that window: close to 0 by "
                    "construction)")
        # The real test: the mode NOT in force, predicted from the fit
        # and that mode's last measurements, against the other run's
        # measured step.
        cross = []
        for w in gate["windows"]:
            if "times" not in w or w["window"] == 0:
                continue
            mw = m.get(w["window"], {})
            off = w.get("compression_off", False) or not any(w["levels"])
            key, cfg = ("t_comp_ms", "comp") if off else ("t_sync_ms", "raw")
            if key in mw and meas.get(cfg, 0) > 0:
                cross.append((key, (mw[key] - meas[cfg]) / meas[cfg]))
        for key, cfg in (("t_sync_ms", "raw"), ("t_comp_ms", "comp")):
            errs = [e for k, e in cross if k == key]
            if errs:
                lines.append(
                    f"- the mode not in force, {key} in the gate run "
                    f"against the measured step of the `{cfg}` run: "
                    f"median {100 * med(errs):+.1f}%, max |err| "
                    f"{100 * max(abs(e) for e in errs):.1f}% over "
                    f"{len(errs)} windows")
        lines.append("")
        reasons = [(c["step"], c["reason"])
                   for c in gate.get("timeline", [])]
        if reasons:
            lines += ["Decisions (step: reason):", "", "```"]
            lines += [f"{s}: {r}" for s, r in reasons]
            lines += ["```", ""]
    (out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main(argv) -> int:
    args = parse(argv)
    out = pathlib.Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        (out / "command.txt").write_text(
            " ".join([PYTHON, "bench/perfmodel/run.py"] + argv) + "\n"
            + datetime.datetime.now(datetime.timezone.utc).strftime(
                "# %Y-%m-%d %H:%M UTC\n"))
        run_all(args, out)
    report(args, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
