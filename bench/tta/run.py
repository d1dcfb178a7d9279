#!/usr/bin/python3
"""run - time to accuracy: bellows against plain DDP and PyTorch's PowerSGD.

Trains examples/pytorch/fashion_mnist.py (Fashion-MNIST, 2 ranks, gloo,
CPU) with the same model, data, seed and LR schedule in five
configurations:

    plain           plain DDP, no hook, no bellows (the reference)
    torch-psgd      PyTorch's powerSGD_hook, rank 4, error feedback, warm
                    start (one DDP bucket: see README.md)
    2bit            bellows, every matrix 2-bit (fixed level 1, the
                    threshold "auto": each tensor's mean magnitude)
    accordion-psgd  bellows, Accordion over PowerSGD ranks 8 and 4
    adaptive        bellows, PowerSGD rank 8 where SlimGC's threshold
                    and perfmodel's gate say it pays

and, asked for by name, level0: bellows attached with every tensor raw
(fixed level 0), what the agent and hook cost a step that compresses
nothing.

per model (--models net,resnet20), link (--links loopback,1gbit,100mbit:
a link other than loopback is a network namespace whose loopback a token
bucket limits, in which bellowsd and both ranks run; root only) and seed,
the configurations in turn within each seed. One bellowsd per model and
link, with bench/tta/policy.yaml, recording into out/history-MODEL-LINK.db.

The report, results.md in --out, has one table per model and link: per
configuration the median step time and its ratio to plain's, the time to
the target accuracy (plain DDP's final test accuracy with the same model,
link and seed, minus 0.5 point) and its ratio to plain's, the final test
accuracy (mean, min..max over the seeds). Time to target is the training
wall time at the end of the first evaluation that reaches it, less the
time spent evaluating; the trainer evaluates on the whole test split at
every window end (windows of WINDOW_STEPS steps, a fifth of an epoch,
and each epoch's end), in every configuration alike. A run that
never reaches the target is marked. --report-only rebuilds results.md
from the JSON files in --out.

usage: bench/tta/run.py [--models net,resnet20]
           [--links loopback,1gbit,100mbit]
           [--configs plain,torch-psgd,2bit,accordion-psgd,adaptive]
           [--seeds 0,1] [--epochs 3] [--lr-decay-at E] [--train-limit N]
           [--out DIR] [--build DIR] [--report-only]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
from typing import Mapping, Sequence

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import benchkit  # noqa: E402
from benchkit import PYTHON  # noqa: E402

POLICY = HERE / "policy.yaml"
# The trainer's options per configuration. 2-bit's value threshold is
# "auto" (per tensor and step): a fixed one suits one gradient scale
# (MXNet's 0.5 does not train this network, bench/slimgc; 0.15 lost 4.2
# points). The policies' levels are in policy.yaml.
CONFIGS = {
    "plain": ["--plain"],
    "torch-psgd": ["--torch-powersgd", "4", "--one-bucket"],
    "2bit": ["--compressor", "2bit", "--quant-threshold", "auto"],
    "accordion-psgd": ["--compressor", "powersgd"],
    "adaptive": ["--compressor", "powersgd"],
    "level0": ["--compressor", "powersgd"],
}
# What a run without --configs runs (level0 only when named).
DEFAULT_CONFIGS = ("plain", "torch-psgd", "2bit", "accordion-psgd",
                   "adaptive")
# Steps per window (and evaluation), the same in every configuration: a
# fifth of an epoch of 469 steps, so that the policies of a run of a few
# epochs settle after a few windows, and the time to target has a
# fifth-epoch resolution.
WINDOW_STEPS = 94
MODELS = ("net", "resnet20")
LINKS = ("loopback", "1gbit", "100mbit")
TARGET_GAP = 0.005  # the target: plain's final accuracy less 0.5 point


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--links", default=",".join(LINKS),
                   help="loopback, or a tc rate (1gbit, 100mbit, ...)")
    p.add_argument("--configs", default=",".join(DEFAULT_CONFIGS),
                   help="also: level0 (bellows, every tensor raw)")
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr-decay-at", default=None,
                   help="epoch of the tenfold LR drop (default: 2/3 of "
                   "--epochs)")
    benchkit.add_run_options(p, HERE)
    a = p.parse_args(argv)
    a.models = a.models.split(",")
    for m in a.models:
        if m not in ("net", "resnet", "resnet20"):
            p.error(f"unknown model {m!r}")
    a.links = [x.lower() for x in a.links.split(",")]
    for x in a.links:
        if x != "loopback" and benchkit.link_bps(x) is None:
            p.error(f"--links: {x!r} is neither loopback nor a tc rate")
    a.configs = benchkit.split_configs(p, a.configs, list(CONFIGS))
    a.seeds = [int(s) for s in a.seeds.split(",")]
    if a.lr_decay_at is None:
        a.lr_decay_at = str(max(1, (2 * a.epochs) // 3))
    return a


def prefix(model: str, link: str) -> str:
    """The job name's prefix of a model and link: a job is
    bench-tta-MODEL-LINK-CONFIG-sSEED (policy.yaml matches on it)."""
    return f"bench-tta-{model}-{link}-"


def run_all(args, out: pathlib.Path) -> None:
    """Every run, per model and link under one bellowsd (in the link's
    namespace), the configurations in turn within each seed, each seed
    starting one configuration later. A failed
    run is reported and left out; the others go on."""
    loads = {}
    loads_file = out / "loadavg.json"
    if loads_file.exists():
        loads = json.loads(loads_file.read_text())
    failed = []
    total = (len(args.models) * len(args.links) * len(args.seeds)
             * len(args.configs))
    n = 0
    for model in args.models:
        for link in args.links:
            rate = None if link == "loopback" else link
            with benchkit.link(rate) as wrap:
                for i, seed in enumerate(args.seeds):
                    # Each seed starts one configuration later: no
                    # configuration always runs first (after bellowsd's
                    # start, a link's set-up) or always right after
                    # another one.
                    k = i % len(args.configs)
                    for config in args.configs[k:] + args.configs[:k]:
                        job = benchkit.job_name(prefix(model, link), config,
                                                seed)
                        opts = [*CONFIGS[config], "--model", model,
                                "--seed", str(seed),
                                "--epochs", str(args.epochs),
                                "--lr-decay-at", args.lr_decay_at,
                                "--window-steps", str(WINDOW_STEPS)]
                        n += 1
                        print(f"({n}/{total})", end=" ", flush=True)
                        try:
                            benchkit.run_jobs(
                                args.build, POLICY, out, [(job, opts)],
                                args.train_limit,
                                db=out / f"history-{model}-{link}.db",
                                summary=progress, wrap=wrap)
                        except Exception as e:  # one run, not the bench
                            print(f"{job}: failed: {e}", flush=True)
                            failed.append(job)
                        loads[job] = os.getloadavg()
                        loads_file.write_text(json.dumps(loads, indent=1))
    if failed:
        print(f"{len(failed)} runs failed: {', '.join(failed)}")


def progress(res: dict) -> str:
    """run_jobs's progress line for one run."""
    return (f"final test acc {100 * res['final_acc']:.2f}%, training "
            f"{res['wall_s'] - res.get('eval_s', 0):.1f} s, median step "
            f"{benchkit.median(res.get('step_times_ms', [])):.1f} ms")


def train_s(row: Mapping) -> float:
    """The training wall time (s) at an evaluated window's end: the
    trainer's wall time then, less the time spent evaluating so far."""
    return row["wall_s"] - row.get("eval_s", 0.0)


def time_to_target(windows: Sequence[Mapping], target: float
                   ) -> float | None:
    """The training time (train_s) at the first evaluated window whose
    test accuracy reaches ``target`` (a fraction), in window order; None
    if none does.

    >>> ws = [{"test_acc": 0.70, "wall_s": 10.0, "eval_s": 1.0},
    ...       {"test_acc": 0.80, "wall_s": 21.0, "eval_s": 2.0},
    ...       {"test_acc": 0.79, "wall_s": 32.0, "eval_s": 3.0}]
    >>> time_to_target(ws, 0.80)
    19.0
    >>> time_to_target(ws, 0.81) is None
    True
    """
    for w in windows:
        if w["test_acc"] >= target:
            return train_s(w)
    return None


def cpu_per_step(windows: Sequence[Mapping]) -> float | None:
    """The trainer process's CPU time per step (ms, every thread), over
    the evaluated windows' steps; None from a trainer that did not
    record it. Less bent by the machine's load than the wall time: what
    a configuration's own work adds.

    >>> cpu_per_step([{"times": {"steps": 2, "cpu_ms": 10.0}},
    ...               {"times": {"steps": 1, "cpu_ms": 40.0}}])
    20.0
    >>> cpu_per_step([{"times": {"steps": 2}}]) is None
    True
    """
    n = sum(w["times"]["steps"] for w in windows
            if "cpu_ms" in w.get("times", {}))
    if n == 0:
        return None
    return sum(w["times"]["cpu_ms"] * w["times"]["steps"]
               for w in windows if "cpu_ms" in w.get("times", {})) / n


def run_summary(res: Mapping, target: float) -> dict:
    """One run's numbers: median step (ms), CPU per step (ms, None if
    not recorded), time to ``target`` (s, None if never), final
    accuracy, total training time (s), evaluation time (s)."""
    return {"step_ms": benchkit.median(res.get("step_times_ms", [])),
            "cpu_ms": cpu_per_step(res["windows"]),
            "tt": time_to_target(res["windows"], target),
            "final": res["final_acc"],
            "train_s": res["wall_s"] - res.get("eval_s", 0.0),
            "eval_s": res.get("eval_s", 0.0)}


def targets(runs: Mapping[tuple[str, str, str, int], Mapping]
            ) -> dict[tuple[str, str, int], tuple[float, str]]:
    """Per (model, link, seed): the target accuracy, plain's final less
    TARGET_GAP, and the link whose plain run gave it. Without a plain
    run on that link, another link's plain run of the same model and
    seed gives it (plain DDP computes the same sums on any link)."""
    plain = {(m, lk, s): r["final_acc"]
             for (m, lk, c, s), r in runs.items() if c == "plain"}
    out = {}
    for m, lk, _, s in runs:
        if (m, lk, s) in plain:
            out[(m, lk, s)] = (plain[(m, lk, s)] - TARGET_GAP, lk)
            continue
        others = sorted(k for k in plain if k[0] == m and k[2] == s)
        if others:
            out[(m, lk, s)] = (plain[others[0]] - TARGET_GAP, others[0][1])
    return out


def link_order(link: str) -> tuple[int, str]:
    """Links in LINKS's order (fastest first), others after them."""
    return (LINKS.index(link) if link in LINKS else len(LINKS), link)


def fmt(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def ratio(xs: Sequence[float]) -> str:
    """Per-seed ratios as "×mean" (with the range when they differ)."""
    if not xs:
        return "-"
    m = statistics.fmean(xs)
    if len(xs) > 1 and max(xs) - min(xs) >= 0.005:
        return f"×{m:.2f} ({min(xs):.2f}..{max(xs):.2f})"
    return f"×{m:.2f}"


def table(model: str, link: str, configs: Sequence[str],
          runs: Mapping[tuple[str, str, str, int], Mapping],
          tgt: Mapping[tuple[str, str, int], tuple[float, str]]
          ) -> list[str]:
    """The markdown table of one model and link: a row per configuration
    with runs. Ratios to plain are per seed (same seed's plain run),
    then averaged; time to target is the mean over the seeds that
    reached it, the others named."""
    rows = []
    for c in configs:
        seeds = sorted(s for (m, lk, cc, s) in runs
                       if (m, lk, cc) == (model, link, c)
                       and (m, lk, s) in tgt)
        if not seeds:
            continue
        sums = {s: run_summary(runs[(model, link, c, s)],
                               tgt[(model, link, s)][0]) for s in seeds}
        base = {s: run_summary(runs[(model, link, "plain", s)],
                               tgt[(model, link, s)][0])
                for s in seeds if (model, link, "plain", s) in runs}
        steps = [sums[s]["step_ms"] for s in seeds]
        step_r = [sums[s]["step_ms"] / base[s]["step_ms"]
                  for s in seeds if s in base]
        cpu_r = [sums[s]["cpu_ms"] / base[s]["cpu_ms"]
                 for s in seeds if s in base and sums[s]["cpu_ms"]
                 and base[s]["cpu_ms"]]
        reached = [s for s in seeds if sums[s]["tt"] is not None]
        never = [s for s in seeds if s not in reached]
        tt = (statistics.fmean(sums[s]["tt"] for s in reached)
              if reached else None)
        tt_r = [sums[s]["tt"] / base[s]["tt"] for s in reached
                if s in base and base[s]["tt"]]
        if not reached:
            tt_cell = "**never**"
        elif never:
            tt_cell = (f"{tt:.1f} (**never: "
                       f"{', '.join(f's{s}' for s in never)}**)")
        else:
            tt_cell = f"{tt:.1f}"
        accs = [100 * sums[s]["final"] for s in seeds]
        acc_cell = f"{statistics.fmean(accs):.2f}"
        if len(accs) > 1:
            acc_cell += f" ({min(accs):.2f}..{max(accs):.2f})"
        d_acc = [100 * (sums[s]["final"] - base[s]["final"])
                 for s in seeds if s in base]
        rows.append([c, len(seeds), fmt(statistics.fmean(steps)),
                     ratio(step_r), ratio(cpu_r), tt_cell, ratio(tt_r), acc_cell,
                     (f"{statistics.fmean(d_acc):+.2f}" if d_acc else "-")])
    return benchkit.table(["config", "seeds", "median step (ms)",
                           "step vs plain", "CPU per step vs plain",
                           "time to target (s)",
                           "vs plain", "final acc (%)",
                           "acc vs plain (pt)"], rows)


def load(out: pathlib.Path) -> dict[tuple[str, str, str, int], dict]:
    """Every run's JSON in ``out`` by (model, link, config, seed), read
    from the job name the trainer recorded."""
    runs = {}
    for f in sorted(out.glob("bench-tta-*.json")):
        res = json.loads(f.read_text())
        job = res["args"]["job"]
        model, link = res["args"]["model"], None
        for c in CONFIGS:
            head = f"bench-tta-{model}-"
            tail = f"-{c}-s{res['args']['seed']}"
            if job.startswith(head) and job.endswith(tail):
                link = job[len(head):-len(tail)]
                runs[(model, link, c, res["args"]["seed"])] = res
                break
    return runs


def report_lines(runs: Mapping[tuple[str, str, str, int], Mapping],
                 command: str, machine: str, loads: Sequence[float]
                 ) -> list[str]:
    """results.md's lines for ``runs`` (see load())."""
    tgt = targets(runs)
    lines = ["# bench/tta results", "", f"Command: `{command}`", "",
             machine + ".", ""]
    if loads:
        lines += [f"Load average (1 min) at the end of the runs: "
                  f"{min(loads):.1f}..{max(loads):.1f}, median "
                  f"{statistics.median(loads):.1f}.", ""]
    lines += ["Time to target: training wall time, evaluations excluded, "
              "at the end of the first evaluation (every half epoch) "
              "whose test accuracy reaches the target, plain DDP's final "
              "accuracy on the same model, link and seed less 0.5 point. "
              "Ratios are against plain on the same seed (below 1: "
              "faster), averaged over the seeds. **never**: the run did "
              "not reach the target.", ""]
    keys = sorted({(m, lk) for m, lk, _, _ in runs},
                  key=lambda k: (k[0], link_order(k[1])))
    for model, link in keys:
        lines += [f"## {model}, {link}", ""]
        ts = sorted({(s, tgt[(m, lk, s)]) for (m, lk, _, s) in runs
                     if (m, lk) == (model, link) and (m, lk, s) in tgt})
        if ts:
            lines.append("Target: " + "; ".join(
                f"s{s} {100 * t:.2f} %"
                + ("" if src == link else f" (plain on {src})")
                for s, (t, src) in ts) + ".")
            lines.append("")
        else:
            lines += ["No plain run: no target.", ""]
        lines += table(model, link, list(CONFIGS), runs, tgt)
        lines.append("")
    lines += choices(runs)
    lines += ["## Every run", ""]
    rows = []
    for (m, lk, c, s) in sorted(runs, key=lambda k: (
            k[0], link_order(k[1]), k[3], list(CONFIGS).index(k[2]))):
        res = runs[(m, lk, c, s)]
        t = tgt.get((m, lk, s))
        r = run_summary(res, t[0] if t else 2.0)
        sent = ""
        if res.get("floats_raw"):
            sent = f"{res['floats_raw'] / max(res['floats_sent'], 1):.1f}"
        rows.append([res["args"]["job"], fmt(r["step_ms"]),
                     fmt(r["train_s"]), fmt(r["eval_s"]),
                     fmt(r["tt"]) if t else "-",
                     f"{100 * r['final']:.2f}", sent])
    lines += benchkit.table(["job", "median step (ms)", "training (s)",
                             "evaluating (s)", "time to target (s)",
                             "final acc (%)", "floats raw / sent"], rows)
    return lines


def choices(runs: Mapping[tuple[str, str, str, int], Mapping]
            ) -> list[str]:
    """What the adaptive runs chose, window by window: how many matrices
    went compressed (the hook's levels as applied), and where the gate
    was off or a calibration ran."""
    lines = []
    for (m, lk, c, s), res in sorted(runs.items(), key=lambda kv: (
            kv[0][0], link_order(kv[0][1]), kv[0][3], kv[0][2])):
        if c != "adaptive":
            continue
        mats = [i for i, layer in enumerate(res["layers"])
                if len(layer["shape"]) >= 2]
        cells = []
        for w in res["windows"]:
            if "levels" not in w:
                continue
            on = sum(1 for i in mats if w["levels"][i] > 0)
            cell = f"{w['window']}: {on}/{len(mats)}"
            if w.get("times", {}).get("calibrating_steps"):
                # Its last step's levels, which alternate: say no more.
                cell = f"{w['window']}: calibrating"
            if w.get("compression_off"):
                cell += " gate off"
            cells.append(cell)
        if cells:
            lines.append(f"- {res['args']['job']}: " + "; ".join(cells))
    if not lines:
        return []
    return ["## What adaptive chose", "",
            "Per evaluated window: the matrices sent compressed (PowerSGD) "
            "at its end, of all matrices (the hook's levels as applied); "
            "`calibrating`: a SlimGC calibration ran in it (steps "
            "alternate raw and compressed); "
            "`gate off`: perfmodel's gate sent everything raw.", "",
            *lines, ""]


def report(out: pathlib.Path) -> None:
    runs = load(out)
    loads_file = out / "loadavg.json"
    loads = ([v[0] for v in json.loads(loads_file.read_text()).values()]
             if loads_file.exists() else [])
    lines = report_lines(runs, benchkit.read_command(out),
                         benchkit.machine_line(), loads)
    (out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main(argv) -> int:
    args = parse(argv)
    out = pathlib.Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        benchkit.write_command(out, [PYTHON, "bench/tta/run.py"] + argv,
                               stamp=True)
        run_all(args, out)
    report(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
