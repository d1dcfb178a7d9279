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
import pathlib
import sqlite3
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import benchkit  # noqa: E402
from benchkit import PYTHON, median as med  # noqa: E402

POLICY = HERE / "policy.yaml"
CONFIGS = ["raw", "comp", "gate"]
PREFIX = "bench-perfmodel-"


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--window-steps", type=int, default=25)
    p.add_argument("--compressor", choices=("powersgd", "2bit"),
                   default="powersgd")
    p.add_argument("--configs", default=",".join(CONFIGS))
    benchkit.add_run_options(p, HERE)
    a = p.parse_args(argv)
    a.configs = benchkit.split_configs(p, a.configs, CONFIGS)
    return a


def job_name(config: str, seed: int) -> str:
    return benchkit.job_name(PREFIX, config, seed)


def run_all(args, out: pathlib.Path) -> None:
    """The runs under one bellowsd recording into out/history.db."""
    jobs = [(job_name(config, args.seed),
             ["--compressor", args.compressor,
              "--seed", str(args.seed), "--epochs", str(args.epochs),
              "--lr-decay-at", str(args.epochs + 1),
              "--window-steps", str(args.window_steps)])
            for config in args.configs]
    benchkit.run_jobs(args.build, POLICY, out, jobs, args.train_limit,
                      db=out / "history.db")


def metrics_of(db: pathlib.Path, job: str) -> dict[int, dict[str, float]]:
    """perfmodel's job-wide metrics of ``job`` per window (layer -1 or
    NULL), from the history."""
    out: dict[int, dict[str, float]] = {}
    try:
        with benchkit.history_run(db, job) as (con, run):
            if run is None:
                return {}
            for window, name, layer, value in benchkit.policy_metrics(
                    con, run, "perfmodel"):
                if layer is None or layer < 0:
                    out.setdefault(window, {})[name] = value
    except sqlite3.Error as e:
        print(f"history not readable: {e}", file=sys.stderr)
        return {}
    return out


def t_obs(w: dict) -> float:
    """Measured T_obs of a window: per step, backward outside the hook +
    collectives + encode/decode (ms)."""
    t = w["times"]
    return t["backward_ms"] + t["comm_ms"] + t["codec_ms"]


def step_ms(w: dict) -> float:
    """Measured wall time per step of a window (ms)."""
    return w["times"]["step_ms"]


def report(args, out: pathlib.Path) -> None:
    runs = {c: rs[0] for c, rs in
            benchkit.load_runs(out, PREFIX, CONFIGS, args.seed).items() if rs}
    lines = ["# bench/perfmodel results", ""]
    if (out / "command.txt").exists():
        lines += [f"Command: `{benchkit.read_command(out)}`", ""]
    lines += [benchkit.machine_line(), ""]
    # Measured, per configuration (the first window is a warm-up).
    lines += ["## Measured per step (median over windows, first one "
              "skipped), ms", "",
              *benchkit.table(["configuration", "step (wall)", "backward",
                               "collectives", "encode+decode", "T_obs"])]
    meas = {}
    for c, r in runs.items():
        ws = [w for w in r["windows"] if "times" in w][1:]
        if not ws:
            continue
        meas[c] = med([step_ms(w) for w in ws])
        lines.append(benchkit.row([c] + [
            f"{med(xs):.2f}" for xs in (
                [w["times"]["step_ms"] for w in ws],
                [w["times"]["backward_ms"] for w in ws],
                [w["times"]["comm_ms"] for w in ws],
                [w["times"]["codec_ms"] for w in ws],
                [t_obs(w) for w in ws])]))
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
                  *benchkit.table(["window", "compression", "step",
                                   "T_obs"] + names)]
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
            lines.append(benchkit.row([w["window"], state,
                                       f"{step_ms(w):.2f}",
                                       f"{t_obs(w):.2f}"] + cells))
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
        benchkit.write_command(
            out, [PYTHON, "bench/perfmodel/run.py"] + argv, stamp=True)
        run_all(args, out)
    report(args, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
