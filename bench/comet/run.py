#!/usr/bin/python3
"""run - COMET's activation compression on Fashion-MNIST: accuracy and memory.

Trains the same small CNN (three 3x3 convolutions, ReLU, max pooling, one
linear layer) on Fashion-MNIST in one process on the CPU, once per
configuration, with the same initialisation, data order and LR:

    none          no compression: every convolution input held raw
                  (bellows.activations attached with bound 0, so the
                  bytes are counted by the same code)
    fixed-EB      every convolution input quantised with the fixed
                  absolute bound EB (--fixed, e.g. 0.01,0.05); no bellowsd
    comet         the bounds of a live bellowsd running the `comet` policy
                  (--policy, default bench/comet/policy.yaml), from
                  the statistics bellows.activations reports; run only
                  when that file exists and bellowsd accepts it

and writes --out/results.json, --out/results.md and --out/command.txt:
final test accuracy, the bytes held for backward per step (median): the
convolution inputs as stored and as they would be raw, and every other
tensor autograd saved (ReLU, pooling, batch-norm and linear inputs: not
compressed), host memory (VmRSS), wall time, and for comet the bounds
bellowsd chose over time. --report-only rebuilds results.md from
results.json. The data and its loading are
examples/pytorch/fashion_mnist.py's.

usage: bench/comet/run.py [--epochs 2] [--configs none,fixed-0.01,comet]
           [--batch-size 64] [--window 100] [--threads 2] [--out DIR]
           [--build DIR] [--policy YAML] [--train-limit N] [--seed 0]
           [--report-only]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import statistics
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import benchkit  # noqa: E402
from benchkit import PYTHON  # noqa: E402

sys.path.insert(0, str(benchkit.SRC / "agent" / "python"))
sys.path.insert(0, str(benchkit.TRAINER.parent))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import bellows  # noqa: E402
import bellows.activations as act  # noqa: E402
from fashion_mnist import DATA, load, normalise  # noqa: E402


class Net(nn.Module):
    """conv 3x3 x16, ReLU, pool; conv 3x3 x32, ReLU, pool; conv 3x3 x64,
    ReLU, pool; linear 576 -> 10. The inputs of conv2 and conv3 are pool
    outputs, saved by nothing but the convolution: compressing them frees
    them. conv1's input is the image batch."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.conv3 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc = nn.Linear(64 * 3 * 3, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.max_pool2d(F.relu(self.conv3(x)), 2)
        return self.fc(x.flatten(1))


def evaluate(model, test) -> float:
    x, y = test
    correct = 0
    model.eval()
    with torch.no_grad():
        for i in range(0, len(x), 1000):
            correct += (model(normalise(x[i:i + 1000])).argmax(1)
                        == y[i:i + 1000]).sum().item()
    model.train()
    return correct / len(x)


def step_fields() -> set[str]:
    """The StepInfo fields this bellows.Agent accepts."""
    import dataclasses
    return {f.name for f in dataclasses.fields(bellows.StepInfo)}


def train(config: str, args, data,
          daemon: benchkit.Daemon | None) -> dict:
    torch.manual_seed(args.seed)
    (train_x, train_y), test = data
    if args.train_limit:
        train_x, train_y = train_x[:args.train_limit], \
            train_y[:args.train_limit]
    model = Net()
    params = list(model.parameters())
    agent = None
    if config == "comet":
        agent = bellows.Agent(f"bench-comet-s{args.seed}", 0, 1,
                              act.layer_table(model),
                              control=daemon.control,
                              publish=daemon.publish,
                              window_steps=args.window,
                              decision_timeout_ms=2000)
        comp = act.attach(model, agent, every=args.every)
    elif config == "none":
        comp = act.attach(model, bounds=0.0)
    else:
        comp = act.attach(model, bounds=float(config.split("-", 1)[1]))
    fields = step_fields()
    opt = torch.optim.SGD(params, lr=args.lr, momentum=0.9)
    held, raw, other, rss = [], [], [], []
    timeline = []
    step = 0
    t0 = time.perf_counter()
    for epoch in range(args.epochs):
        perm = torch.randperm(len(train_x), generator=torch.Generator()
                              .manual_seed(args.seed * 1000 + epoch))
        for pos in range(0, len(perm), args.batch_size):
            idx = perm[pos:pos + args.batch_size]
            if agent is not None:
                agent.step_begin()
            x, y = normalise(train_x[idx]), train_y[idx]
            opt.zero_grad()
            comp.reset_peak()
            out = model(x)
            held.append(comp.held_bytes)
            raw.append(comp.held_raw_bytes)
            # The compressor measures every tensor the forward saved, the
            # convolution inputs at their stored size (saved_bytes); the
            # rest is what the convolutions' inputs are not.
            other.append(comp.saved_bytes - comp.held_bytes)
            loss = F.cross_entropy(out, y)
            loss.backward()
            del out
            if agent is not None:
                for i, p in enumerate(params):
                    agent.observe(i, p.grad)
            opt.step()
            if step % 50 == 0:
                rss.append(act.host_memory_used())
            if agent is not None:
                info = {"lr": args.lr, "batch_size": len(idx),
                        "epoch": epoch}
                mem = act.memory_fields(args.capacity)
                info.update({k: v for k, v in mem.items() if k in fields})
                agent.step_end(**info)
                if step % args.window == 0:
                    timeline.append({"step": step,
                                     "bounds": dict(sorted(
                                         comp.bounds.items())),
                                     "seq": agent.decision().seq})
            step += 1
    wall = time.perf_counter() - t0
    acc = evaluate(model, test)
    result = {
        "config": config, "steps": step, "final_acc": acc,
        "final_loss": loss.item(), "wall_s": wall,
        "held_median": statistics.median(held),
        "raw_median": statistics.median(raw),
        "other_median": statistics.median(other),
        "rss_median": statistics.median(rss),
        "layers": comp.layers,
        "bounds_final": dict(sorted(comp.bounds.items())),
    }
    result["last"] = {str(k): {f: getattr(v, f) for f in (
        "eb", "mode", "code_dtype", "lbar", "nonzero", "stored_bytes",
        "raw_bytes")} for k, v in comp.last.items()}
    if agent is not None:
        result["timeline"] = timeline
        result["reported"] = comp.reported
        result["decisions"] = agent.stats().decisions
        agent.close()
    comp.detach()
    return result


def report(results: list[dict], args, command: str) -> str:
    lines = [
        "# bench/comet results", "",
        f"Command: `{command}`", "",
        f"Date: {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC; "
        f"{platform.machine()}, {os.cpu_count()} CPUs, torch "
        f"{torch.__version__}, {args.threads} threads; "
        f"{args.epochs} epochs, batch {args.batch_size}, LR {args.lr}, "
        f"seed {args.seed}"
        + (f", first {args.train_limit} training images"
           if args.train_limit else "") + ".", "",
        "Bytes held for backward, median per step: *conv stored* = the "
        "convolution inputs as held (compressed or raw), *conv raw* = "
        "the same uncompressed, *other saved* = every other tensor "
        "autograd saved (ReLU and pooling inputs, indices, the linear "
        "input; never compressed). RSS: median VmRSS of the process.", "",
        *benchkit.table(["config", "bounds", "test acc", "conv stored",
                         "conv raw", "ratio", "other saved",
                         "total vs none", "RSS", "wall"]),
    ]
    base = next((r for r in results if r["config"] == "none"), None)
    for r in results:
        total = r["held_median"] + r["other_median"]
        vs = (f"{(base['held_median'] + base['other_median']) / total:.2f}x"
              if base else "-")
        if r["config"] == "none":
            bounds = "0 (raw)"
        elif r["config"] == "comet":
            bounds = "bellowsd comet: " + ", ".join(
                f"{k}={v:.3g}" for k, v in r["bounds_final"].items())
        else:
            bounds = f"fixed {r['config'].split('-', 1)[1]} (no bellowsd)"
        lines.append(benchkit.row([
            r["config"], bounds, f"{100 * r['final_acc']:.2f}%",
            f"{r['held_median'] / 1024:.1f} KiB",
            f"{r['raw_median'] / 1024:.1f} KiB",
            f"{r['raw_median'] / max(r['held_median'], 1):.2f}x",
            f"{r['other_median'] / 1024:.1f} KiB", vs,
            f"{r['rss_median'] / 2**20:.0f} MiB",
            f"{r['wall_s']:.0f} s"]))
    lines += ["", "Last measured step per layer (layer index: eb, storage, "
              "L-bar, R):", ""]
    for r in results:
        per = "; ".join(
            f"{k}: eb {v['eb']:.3g}, {v['mode']} {v['code_dtype']}, "
            f"L-bar {v['lbar']:.3g}, R {v['nonzero']:.3f}"
            for k, v in r["last"].items())
        lines.append(f"- {r['config']}: {per}")
    for r in results:
        if "timeline" in r:
            lines += ["", f"Bounds over time ({r['config']}, every "
                      f"{args.window} steps; {r['decisions']} decisions, "
                      f"{r['reported']} observe_activation calls):", "",
                      *benchkit.table(["step", "seq", "bounds"])]
            for t in r["timeline"]:
                lines.append(benchkit.row([t["step"], t["seq"], ", ".join(
                    f"{k}={v:.3g}" for k, v in t["bounds"].items())]))
    return "\n".join(lines) + "\n"


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", default="none,fixed-0.01,fixed-0.05,comet")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--window", type=int, default=100,
                   help="steps per bellows window (comet)")
    p.add_argument("--every", type=int, default=1,
                   help="measure the activations every N steps (comet)")
    p.add_argument("--capacity", type=int, default=2**30,
                   help="memory the job may use, reported as "
                   "mem_device_total (bytes)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", default=DATA)
    p.add_argument("--policy", default=str(HERE / "policy.yaml"))
    benchkit.add_run_options(p, HERE)
    return p.parse_args(argv)


def main(argv) -> int:
    args = parse(argv)
    out = pathlib.Path(args.out)
    if args.report_only:
        saved = json.loads((out / "results.json").read_text())
        (out / "results.md").write_text(report(
            saved["results"], argparse.Namespace(**saved["args"]),
            saved["command"]))
        return 0
    torch.set_num_threads(args.threads)
    build = pathlib.Path(args.build)
    lib = build / "agent" / "libbellows.so"
    if "BELLOWS_LIB" not in os.environ and lib.exists():
        os.environ["BELLOWS_LIB"] = str(lib)
    out.mkdir(parents=True, exist_ok=True)
    data = load(args.data)
    words = [PYTHON, "bench/comet/run.py"] + argv
    command = " ".join(words)
    results = []
    for config in args.configs.split(","):
        if config == "comet":
            policy = pathlib.Path(args.policy)
            if not policy.exists():
                print(f"comet: skipped, no {policy}", file=sys.stderr)
                continue
            try:
                with benchkit.Daemon(build, policy, out / "bellowsd.log",
                                     extra=["--log-level", "info",
                                            "--no-db"],
                                     append=False) as d:
                    r = train(config, args, data, d)
            except RuntimeError as e:
                print(f"comet: skipped, {e}", file=sys.stderr)
                continue
        elif config == "none" or config.startswith("fixed-"):
            r = train(config, args, data, None)
        else:
            print(f"unknown config {config}", file=sys.stderr)
            return 2
        print(f"{config}: test acc {100 * r['final_acc']:.2f}%, conv "
              f"inputs {r['held_median'] / 1024:.1f} KiB held of "
              f"{r['raw_median'] / 1024:.1f} KiB raw, other saved "
              f"{r['other_median'] / 1024:.1f} KiB, {r['wall_s']:.0f} s",
              flush=True)
        results.append(r)
    (out / "results.json").write_text(json.dumps(
        {"command": command, "args": vars(args), "results": results},
        indent=1))
    (out / "results.md").write_text(report(results, args, command))
    benchkit.write_command(out, words)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
