#!/usr/bin/python3
"""fashion_mnist - a small CNN on Fashion-MNIST, data-parallel, under bellows.

Trains on CPU with the gloo backend, one process per rank, each attached to
bellowsd through bellows.torch: the gradients are compressed per layer at
the levels bellowsd decides (PowerSGD rank, top-k keep fraction, or 1-bit /
2-bit quantisation, or GComp's Huffman-coded exponents and truncated
mantissas), each layer sent raw when the decision says so (size
threshold, compression gate, calibration), and bellowsd's batch-size and
LR-scale decisions are applied. With --comet the convolutions' inputs are
kept for the backward pass compressed at the error bounds bellowsd decides
(bellows.activations). The data comes from Debian's dataset-fashion-mnist
(/usr/share/datasets/fashion-mnist).

Policies per option (bellowsd's YAML picks them; examples/policies/):
fixed or accordion levels with any --compressor; `slimgc` (size
threshold, calibrated) with --compressor 2bit or 1bit; `perfmodel`
(compression gate) with any; `comet` (error bounds) with --comet;
`resireduce` (the residual plan: shared and reduced error-feedback
residuals, resireduce.yaml) with --compressor topk or powersgd, best with
--model resnet, whose runs of same-shape convolutions it can group
(--static-resireduce applies the paper's static plan instead). Rank 0
ends with the residual memory the plan kept.
`gcomp` (the exponent tables; examples/policies/gcomp.yaml) with
--compressor gcomp.

--plain trains the same model with the same data, seed and LR schedule as
plain DDP, without bellows: no hook, no bellowsd, every gradient in DDP's
own bucket all-reduce. It is the reference a benchmark measures bellows
against (bench/tta); it prints and writes the same per-window accuracy
and step times, and no bellows counts. --torch-powersgd RANK is --plain
with PyTorch's own PowerSGD comm hook (powerSGD_hook: rank RANK, error
feedback, warm start, compressing from the second step on).

Two ways to start it:

    fashion_mnist.py --nproc 2 [options]          # spawns the ranks itself
    RANK=0 WORLD_SIZE=2 MASTER_ADDR=host MASTER_PORT=29500 \\
        fashion_mnist.py [options]                # one rank per command

(the second as on several machines; torch 1.13's torch.distributed.run
launcher does not work with Python 3.11 and is not needed). Every rank
must be given the same options. Rank 0 prints the test accuracy at the end
of every window and, at the end, what all ranks sent against raw; every
rank reports that accuracy and loss to bellowsd (TorchAgent.evaluation),
which keeps them in the history for `bellows report`.

The learning rate follows a step decay (--lr, --lr-decay, --lr-decay-at
epochs), set on the optimizer; step_end() reads the LR of each step and of
the next one from it (the next epoch's is set before the last step of an
epoch ends) and they go to bellowsd, so Accordion sees the decays coming.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import importlib
import json
import math
import os
import pathlib
import signal
import socket
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

# A source checkout runs without installing the package.
_HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE.parents[1] / "agent" / "python"))

import bellows  # noqa: E402
import bellows.torch  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530  # of the training images, in [0, 1]


class Net(nn.Module):
    """Two 5x5 convolutions and two fully connected layers (~80k
    parameters): 4 matrices for PowerSGD, 4 biases sent raw."""

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


class ResNet(nn.Module):
    """A small ResNet-style CNN (~270k parameters) with runs of
    same-shape 3x3 convolutions, where ResiReduce has something to group:
    a stride-2 stem (1 -> 16), two residual blocks of two 16 -> 16
    convolutions at 14x14, a stride-2 16 -> 32 convolution, two blocks of
    two 32 -> 32 convolutions at 7x7, then fc 1568 -> 128 (the large
    2-D layer) and fc 128 -> 10. No batch norm: biases only."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(1, 16, 3, stride=2, padding=1)
        self.s1 = nn.ModuleList(nn.Conv2d(16, 16, 3, padding=1)
                                for _ in range(4))
        self.down = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.s2 = nn.ModuleList(nn.Conv2d(32, 32, 3, padding=1)
                                for _ in range(4))
        self.fc1 = nn.Linear(32 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    @staticmethod
    def _blocks(x, convs):
        for a, b in zip(convs[0::2], convs[1::2]):
            x = F.relu(x + b(F.relu(a(x))))
        return x

    def forward(self, x):
        x = F.relu(self.stem(x))
        x = self._blocks(x, self.s1)
        x = F.relu(self.down(x))
        x = self._blocks(x, self.s2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


class Block(nn.Module):
    """ResNet's basic block: two 3x3 convolutions, each followed by batch
    norm, added to the input (through a 1x1 convolution and batch norm
    where the shape changes)."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False),
                nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.short is None else self.short(x)))


class ResNet20(nn.Module):
    """ResNet-20 (He et al.'s CIFAR network) for Fashion-MNIST, a deeper
    model with many small tensors: a 3x3 stem convolution of stride 2
    (1 -> 16 channels, 28x28 -> 14x14, to keep the CPU's compute
    modest), three stages of three basic blocks at 16, 32 and 64
    channels (14x14, 7x7, 4x4), global average pooling, fc 64 -> 10:
    20 weighted layers plus two 1x1 projections, batch norm after every
    convolution, no convolution bias. 65 parameter tensors (22 of them
    matrices), 272k parameters."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(1, 16, 3, 2, 1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        blocks, cin = [], 16
        for cout, stride in ((16, 1), (32, 2), (64, 2)):
            for i in range(3):
                blocks.append(Block(cin, cout, stride if i == 0 else 1))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = self.blocks(F.relu(self.bn(self.stem(x))))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


MODELS = {"net": Net, "resnet": ResNet, "resnet20": ResNet20}


def static_plan(model: nn.Module, max_group: int = 4,
                min_2d: int = 65536) -> "bellows.resireduce.Plan":
    """The paper's static ResiReduce plan, fixed before training: runs of
    adjacent same-shape weights of 2 or more dimensions grouped (at most
    max_group), phi 0.5, and the ungrouped 2-D weights of at least min_2d
    elements reduced to 0.5 x 0.5 (the reference code's)."""
    from bellows.resireduce import Plan
    shapes = [tuple(p.shape) for p in model.parameters() if p.requires_grad]
    n = len(shapes)
    group, rows, cols = list(range(n)), [1.0] * n, [1.0] * n
    i = 0
    while i < n:
        j = i + 1
        if len(shapes[i]) >= 2:
            # Biases between weights do not break a run (the paper groups
            # the weights of adjacent layers).
            k = i + 1
            members = [i]
            while k < n and len(members) < max_group:
                if len(shapes[k]) < 2:
                    k += 1
                    continue
                if shapes[k] != shapes[i]:
                    break
                members.append(k)
                k += 1
            if len(members) > 1:
                for m in members:
                    group[m] = i
                j = members[-1] + 1
            elif math.prod(shapes[i]) >= min_2d:
                rows[i] = cols[i] = 0.5
        i = j
    return Plan(tuple(group), (0.5,) * n, tuple(rows), tuple(cols))


def load_idx(path: pathlib.Path) -> np.ndarray:
    """Reads one gzipped IDX file (images: N x 28 x 28, labels: N)."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic = int.from_bytes(raw[0:4], "big")
    ndim = magic & 0xFF
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big")
            for i in range(ndim)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(data_dir: str):
    """The train and test splits as uint8 image and int64 label tensors."""
    d = pathlib.Path(data_dir)
    out = []
    for split in ("train", "t10k"):
        x = load_idx(d / f"{split}-images-idx3-ubyte.gz")
        y = load_idx(d / f"{split}-labels-idx1-ubyte.gz")
        out.append((torch.from_numpy(x.copy()),
                    torch.from_numpy(y.astype(np.int64))))
    return out


def normalise(images: torch.Tensor) -> torch.Tensor:
    return (images.float().div_(255).sub_(MEAN).div_(STD)).unsqueeze(1)


def host_rss() -> int:
    """This process's resident memory in bytes (VmRSS), 0 if unknown."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class WindowTimes:
    """Per-step times of one window, summed for the JSON summary."""

    def __init__(self):
        self.steps = 0
        self.step_ms = 0.0
        # The process's CPU time (every thread), less bent by the
        # machine's load than the wall time: what a configuration adds.
        self.cpu_ms = 0.0
        self.backward_ms = 0.0
        self.comm_ms = 0.0
        self.codec_ms = 0.0
        self.calibrating = 0
        self.mem_host_max = 0

    def row(self) -> dict:
        n = max(self.steps, 1)
        return {"steps": self.steps, "step_ms": self.step_ms / n,
                "cpu_ms": self.cpu_ms / n,
                "backward_ms": self.backward_ms / n,
                "comm_ms": self.comm_ms / n, "codec_ms": self.codec_ms / n,
                "calibrating_steps": self.calibrating,
                "mem_host_max": self.mem_host_max}


def size(n: float) -> str:
    """Bytes as people read them: 1.20 GB, 7.56 MB, 512 B."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 999.5 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.3g} {unit}"
        n /= 1000.0
    return f"{n:.3g} TB"


def count(n: float) -> str:
    """A count as people read it, as every bellows tool writes it: 301M,
    8.47M, 512."""
    for unit in ("", "k", "M", "G", "T"):
        if abs(n) < 999.5 or unit == "T":
            return f"{n:.0f}" if unit == "" else f"{n:.3g}{unit}"
        n /= 1000.0
    return f"{n:.3g}T"


def sent_of_raw(sent: int, raw: int) -> str:
    """Floats sent against raw in the words of docs/history.md (sent, raw,
    x less): "sent 7.56 MB of 226 MB raw (29.9x less)"; a float is 4
    bytes, sent as the float32 words on the wire, raw as every gradient
    element uncompressed."""
    ratio = f"{raw / sent:.1f}x less" if 0 < sent < raw else "no less"
    return f"sent {size(4 * sent)} of {size(4 * raw)} raw ({ratio})"


def lr_at(args, epoch: int) -> float:
    """The schedule: --lr, times --lr-decay at each --lr-decay-at epoch."""
    drops = sum(1 for e in args.lr_decay_at if epoch >= e)
    return args.lr * args.lr_decay ** drops


def evaluate(model, test, rank: int, world: int):
    """Test accuracy and loss over the whole test split, each rank
    evaluating its share."""
    x, y = test
    x, y = x[rank::world], y[rank::world]
    correct = torch.zeros(3, dtype=torch.float64)
    model.eval()
    with torch.no_grad():
        for i in range(0, len(x), 1000):
            out = model(normalise(x[i:i + 1000]))
            correct[0] += (out.argmax(1) == y[i:i + 1000]).sum().item()
            correct[1] += F.cross_entropy(out, y[i:i + 1000],
                                          reduction="sum").item()
            correct[2] += len(out)
    model.train()
    dist.all_reduce(correct)
    return correct[0].item() / correct[2].item(), \
        correct[1].item() / correct[2].item()


def sent_summary(agent, log: bool) -> dict:
    """What bellows sent and decided over the run, for the JSON summary:
    floats and bytes of all ranks (an all-reduce: every rank calls it),
    decisions, the level timeline, the residual memory and plan changes.
    With ``log`` it also prints what all ranks sent and the residual
    memory."""
    # Bytes: what the compressor put on the wire, against 4 bytes per
    # float of an uncompressed reduce (the model is float32).
    totals = torch.tensor([agent.floats_sent, agent.floats_raw,
                           agent.bytes_sent], dtype=torch.float64)
    dist.all_reduce(totals)
    sent, raw = int(totals[0]), int(totals[1])
    bytes_sent, bytes_raw = int(totals[2]), 4 * raw
    stats = agent.agent.stats()
    if log:
        print(f"fashion_mnist: all ranks {sent_of_raw(sent, raw)}; "
              f"{count(sent)} of {count(raw)} floats; "
              f"{stats.decisions} decisions, "
              f"{stats.decision_misses} misses", flush=True)
        kept, full = agent.residual_memory()
        mkept, mfull = agent.residual_memory_mean()
        print(f"residual memory: {kept} of {full} floats "
              f"({100 * (1 - kept / full) if full else 0:.1f}% saved) "
              f"under the last plan; mean over steps {mkept:.0f} "
              f"({100 * (1 - mkept / mfull) if mfull else 0:.1f}% "
              f"saved)", flush=True)
    return {
        "layers": [{"name": layer.name, "shape": list(layer.shape)}
                   for layer in agent.layers],
        "floats_sent": sent, "floats_raw": raw, "bytes_sent": bytes_sent,
        "bytes_raw": bytes_raw,
        "comm_ms": agent.comm_ms, "codec_ms": agent.codec_ms,
        "decisions": stats.decisions,
        "decision_misses": stats.decision_misses,
        "timeline": [{"step": c.step, "seq": c.seq,
                      "window": c.window, "levels": list(c.levels),
                      "reason": c.reason} for c in agent.changes],
        "residual_memory": dict(zip(("kept", "full"),
                                    agent.residual_memory())),
        "residual_memory_mean": dict(zip(
            ("kept", "full"), agent.residual_memory_mean())),
        "residual_peak_floats": (agent.residuals.peak_floats
                                 if agent.residuals else 0),
        "plan_changes": [{"step": c.step, "seq": c.seq,
                          "group": list(c.plan.group),
                          "rows": list(c.plan.rows),
                          "cols": list(c.plan.cols),
                          "reason": c.reason}
                         for c in agent.plan_changes],
    }


def train(rank: int, world: int, args) -> None:
    """One rank: init the process group, attach to bellows (unless
    --plain), train."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    (train_x, train_y), test = load(args.data)
    if args.train_limit:
        train_x, train_y = train_x[:args.train_limit], \
            train_y[:args.train_limit]
    shard = len(train_x) // world
    window_steps = args.window_steps or max(
        1, math.ceil(shard / args.batch_size / 2))
    model = MODELS[args.model]()  # same seed, same weights on every rank
    if args.one_bucket:
        # DDP's first bucket has its own cap (1 MiB), read when the
        # buckets are rebuilt after the first step.
        dist._DEFAULT_FIRST_BUCKET_BYTES = 1 << 62
    ddp = nn.parallel.DistributedDataParallel(
        model, bucket_cap_mb=(1 << 42) if args.one_bucket else 25)
    if args.torch_powersgd:
        from torch.distributed.algorithms.ddp_comm_hooks import \
            powerSGD_hook as psgd
        # start_powerSGD_iter 2 is the smallest torch allows with error
        # feedback or warm start: the first step is a plain all-reduce.
        state = psgd.PowerSGDState(
            process_group=None,
            matrix_approximation_rank=args.torch_powersgd,
            start_powerSGD_iter=2, use_error_feedback=True,
            warm_start=True, random_seed=args.seed)
        ddp.register_comm_hook(state, psgd.powerSGD_hook)
    # Windows are closed here rather than by the agent (window_steps 0):
    # every N steps and at every epoch end, so that an LR drop, which
    # comes at an epoch boundary, is announced by a window's last step
    # (a report carries the lr and lr_next of its last step only).
    # COMET's rule needs M_avg of the convolution weights: momentum
    # statistics (on every layer here, the simplest).
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9,
                          weight_decay=args.weight_decay)
    # GComp: the weight matrices report their exponent histograms (the
    # gcomp policy's tables are built from them) and the optimizer sets
    # each value's truncation level (the paper's delta). With the
    # optimizer, step_end() reads each step's LR and the next from it.
    gcomp = args.compressor == "gcomp"
    agent = None
    if not args.plain and not args.torch_powersgd:
        agent = bellows.torch.attach(
            ddp, args.job, compressor=args.compressor, seed=args.seed,
            quant_threshold=args.quant_threshold,
            layer_flags=bellows.LAYER_MOMENTUM if args.comet else 0,
            control=args.control, publish=args.publish, window_steps=0,
            exp_hist=True if gcomp else None, optimizer=opt,
            raw_windows=args.raw_windows)
    comet = None
    if args.comet:
        try:
            activations = importlib.import_module("bellows.activations")
        except ImportError as e:
            raise SystemExit(f"fashion_mnist: --comet needs "
                             f"bellows.activations ({e})")
        comet = activations.attach(model, agent)
    if args.static_resireduce:
        if agent is None or agent.residuals is None:
            raise SystemExit("fashion_mnist: --static-resireduce needs a "
                             "compressor with error feedback")
        agent.static_plan = static_plan(model)
    log = rank == 0 and not args.quiet
    quant = (f" (threshold {args.quant_threshold})"
             if args.compressor in ("1bit", "2bit") else "")
    how = (f"compressor {args.compressor}{quant}"
           f"{', COMET activations' if comet is not None else ''}, "
           f"bellowsd {args.control}")
    if agent is None:
        how = "plain DDP, without bellows"
        if args.torch_powersgd:
            how += (f", PyTorch's powerSGD_hook rank "
                    f"{args.torch_powersgd}")
    if log:
        print(f"fashion_mnist: {world} ranks, {shard} images per rank, "
              f"batch {args.batch_size} per rank, windows of "
              f"{window_steps} steps and at epoch ends, {args.epochs} "
              f"epochs, LR {args.lr:g} x{args.lr_decay:g} at epochs "
              f"{args.lr_decay_at}, {how}", flush=True)
    windows = []
    window = 0
    in_window = 0
    step = -1  # this step's index (bellowsd's, with bellows)
    times = WindowTimes()
    step_times = []  # every step's wall time, ms
    eval_s = 0.0  # time spent evaluating so far, inside the wall time
    t_start = time.perf_counter()
    for epoch in range(args.epochs):
        # The same permutation on every rank; each takes its own slice.
        perm = torch.randperm(len(train_x), generator=torch.Generator()
                              .manual_seed(args.seed * 1000 + epoch))
        mine = perm[rank * shard:(rank + 1) * shard]
        pos = 0
        lr = lr_at(args, epoch)
        while pos < shard:
            t_step = time.perf_counter()
            c_step = time.process_time()
            bs, lr_scale = args.batch_size, 1.0
            if agent is not None:
                step = agent.step_begin()
                # bellowsd's batch size and LR scale, in force for this
                # step on every rank alike.
                bs = agent.batch_size(args.batch_size)
                lr_scale = agent.lr_scale()
            else:
                step += 1
            for group in opt.param_groups:
                group["lr"] = lr * lr_scale
            idx = mine[pos:pos + bs]
            pos += bs
            x, y = normalise(train_x[idx]), train_y[idx]
            opt.zero_grad()
            loss = F.cross_entropy(ddp(x), y)
            loss.backward()
            opt.step()
            last_of_epoch = pos >= shard
            if last_of_epoch:
                # The next epoch's LR, set now (as a scheduler stepped
                # here would): step_end() reads it as this step's
                # lr_next, so the window announces the decay.
                for group in opt.param_groups:
                    group["lr"] = lr_at(args, epoch + 1) * lr_scale
            extra = {}
            if comet is not None:
                # On CPU the host is the device (memory_fields).
                # saved_bytes: what the forward saved for backward, for
                # comet_batch's memory model.
                extra = activations.memory_fields(args.mem_capacity << 20,
                                                  compressor=comet)
            else:
                extra["mem_host_used"] = host_rss()
            times.mem_host_max = max(times.mem_host_max,
                                     extra.get("mem_host_used", 0))
            if agent is not None:
                comm0, codec0 = agent.comm_ms, agent.codec_ms
                backward_ms = agent.backward_ms()
                agent.step_end(batch_size=len(idx), epoch=epoch, **extra)
                times.backward_ms += backward_ms
                times.comm_ms += agent.comm_ms - comm0
                times.codec_ms += agent.codec_ms - codec0
                times.calibrating += int(agent.calibrating)
            step_times.append((time.perf_counter() - t_step) * 1e3)
            times.cpu_ms += (time.process_time() - c_step) * 1e3
            times.steps += 1
            times.step_ms += step_times[-1]
            in_window += 1
            if in_window < window_steps and not last_of_epoch:
                continue
            evaluating = window % args.eval_every == 0
            if evaluating:
                t_eval = time.perf_counter()
                acc, test_loss = evaluate(model, test, rank, world)
                eval_s += time.perf_counter() - t_eval
                # Into the window that ends here: the history keeps it
                # (window_info.eval_accuracy), `bellows report` shows it.
                if agent is not None:
                    agent.evaluation(acc, test_loss)
            if agent is not None:
                agent.window_end()
            in_window = 0
            window += 1
            wtimes, times = times.row(), WindowTimes()
            if not evaluating:
                continue
            row = {"window": window - 1, "step": step + 1, "epoch": epoch,
                   "lr": lr, "batch_size": bs, "train_loss": loss.item(),
                   "test_acc": acc, "test_loss": test_loss,
                   "times": wtimes,
                   "wall_s": time.perf_counter() - t_start,
                   "eval_s": eval_s}
            if agent is not None:
                d = agent.decision
                row.update({"floats_sent": agent.floats_sent,
                            "floats_raw": agent.floats_raw,
                            "seq": agent.seq,
                            "levels": list(agent.hook.levels),
                            "size_threshold": d.size_threshold,
                            "compression_off": d.compression_off,
                            "error_bounds": list(d.error_bounds),
                            "reason": d.reason})
            if comet is not None:
                # Bytes held for backward at peak in the window, and per
                # layer its last measured pass (bound, stored vs raw).
                row["activations"] = {
                    "peak_bytes": comet.peak_bytes,
                    "layers": {str(k): dataclasses.asdict(v)
                               for k, v in comet.last.items()}}
                comet.reset_peak()
            windows.append(row)
            if log and agent is None:
                print(f"window {window - 1:3d} step {step + 1:5d} epoch "
                      f"{epoch} lr {lr:g} batch {bs} test acc "
                      f"{100 * acc:5.2f}% loss {test_loss:.3f}, step "
                      f"{wtimes['step_ms']:.1f} ms", flush=True)
            elif log:
                shown = " ".join(f"{v:g}" for v in row["levels"])
                extra = ""
                if d.size_threshold:
                    extra += (" threshold all raw"
                              if d.size_threshold >= 2**64 - 1
                              else f" threshold {d.size_threshold}B")
                if d.compression_off:
                    extra += " compression off"
                if wtimes["calibrating_steps"]:
                    extra += f" calibrating {wtimes['calibrating_steps']}"
                print(f"window {window - 1:3d} step {step + 1:5d} epoch "
                      f"{epoch} lr {lr:g} batch {bs} levels [{shown}]"
                      f"{extra} test acc {100 * acc:5.2f}% loss "
                      f"{test_loss:.3f} rank 0 "
                      f"{sent_of_raw(agent.floats_sent, agent.floats_raw)}"
                      f", step "
                      f"{wtimes['step_ms']:.1f} ms", flush=True)
    wall = time.perf_counter() - t_start
    acc, test_loss = evaluate(model, test, rank, world)
    summary = {"args": {k: v for k, v in vars(args).items()},
               "world": world, "window_steps": window_steps,
               "layers": [{"name": name, "shape": list(q.shape)}
                          for name, q in model.named_parameters()
                          if q.requires_grad],
               "windows": windows, "final_acc": acc,
               "final_loss": test_loss, "wall_s": wall, "eval_s": eval_s,
               "step_times_ms": step_times}
    if rank == 0 and not args.quiet:
        print(f"fashion_mnist: final test accuracy {100 * acc:.2f}% "
              f"(loss {test_loss:.3f}) after {args.epochs} epochs, "
              f"{wall:.1f} s", flush=True)
    if agent is not None:
        summary.update(sent_summary(agent, log=rank == 0 and not args.quiet))
    if rank == 0 and args.json:
        pathlib.Path(args.json).write_text(json.dumps(summary, indent=1))
    if comet is not None:
        comet.detach()
    if agent is not None:
        agent.close()
    # The DDP model goes before the process group: tearing down gloo
    # under a live DDP reducer can hang in torch 1.13. The barrier keeps
    # a rank that finished first from closing its gloo pairs while its
    # peer still completes the last collective (torch 2.x then aborts).
    del ddp, opt, agent
    dist.barrier()
    dist.destroy_process_group()


def _spawned(rank: int, world: int, args) -> None:
    os.environ["RANK"] = str(rank)
    train(rank, world, args)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _threshold(text: str):
    """--quant-threshold: a number, or 'auto'."""
    if text == "auto":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a number or 'auto', not {text!r}") from None


def parse(argv):
    p = argparse.ArgumentParser(
        description="A small CNN on Fashion-MNIST, data-parallel on CPU "
        "(gloo), under bellows.")
    p.add_argument("--nproc", type=int, default=0,
                   help="spawn this many ranks on this machine (else one "
                   "rank from RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT)")
    p.add_argument("--control",
                   default=os.environ.get("BELLOWS_CONTROL",
                                          "tcp://127.0.0.1:5555"),
                   help="bellowsd's control endpoint (default "
                   "$BELLOWS_CONTROL, else bellowsd's own)")
    p.add_argument("--publish",
                   default=os.environ.get("BELLOWS_PUBLISH",
                                          "tcp://127.0.0.1:5556"),
                   help="bellowsd's publish endpoint (default "
                   "$BELLOWS_PUBLISH, else bellowsd's own)")
    p.add_argument("--job", default=os.environ.get("BELLOWS_JOB",
                                                   "fashion-mnist"),
                   help="job name (default $BELLOWS_JOB, else "
                   "fashion-mnist)")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=64,
                   help="per-rank batch size (bellowsd may override it)")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--lr-decay", type=float, default=0.1,
                   help="factor at each --lr-decay-at epoch")
    p.add_argument("--lr-decay-at", default="",
                   help="comma-separated epochs at which the LR drops "
                   "(default: at 3/4 of --epochs)")
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--window-steps", type=int, default=0,
                   help="steps per bellows window; windows also end at "
                   "every epoch end (default: half an epoch at "
                   "--batch-size)")
    p.add_argument("--eval-every", type=int, default=1,
                   help="evaluate every N windows")
    p.add_argument("--compressor",
                   choices=("powersgd", "topk", "1bit", "2bit", "gcomp"),
                   default="powersgd",
                   help="what a layer at a level > 0 is sent as: PowerSGD "
                   "(level = rank), top-k (level = keep fraction), 1-bit or "
                   "2-bit quantisation with error feedback (any level), "
                   "GComp (any level; bellowsd's gcomp policy builds the "
                   "tables, the optimizer's delta sets the truncation)")
    p.add_argument("--model", choices=tuple(MODELS), default="net",
                   help="net: two convolutions, two fc layers; resnet: a "
                   "small ResNet-style CNN with runs of same-shape "
                   "convolutions (for ResiReduce's grouping); resnet20: "
                   "ResNet-20 with batch norm, 65 parameter tensors")
    p.add_argument("--static-resireduce", action="store_true",
                   help="keep the error-feedback residuals per the paper's "
                   "static ResiReduce plan (adjacent same-shape weights "
                   "share, large ungrouped fc 0.5x0.5) instead of "
                   "bellowsd's residual plan")
    p.add_argument("--quant-threshold", type=_threshold, default=0.5,
                   help="1bit/2bit value threshold (MXNet's 0.5; MXNet's "
                   "gradients are batch sums, these are batch means); "
                   "'auto' (2bit): per tensor and step, the mean "
                   "magnitude of gradient + residual, sent with the codes")
    p.add_argument("--comet", action="store_true",
                   help="compress the convolutions' saved inputs at "
                   "bellowsd's error bounds (bellows.activations; run "
                   "bellowsd with the comet policy)")
    p.add_argument("--mem-capacity", type=int, default=0,
                   help="with --comet: memory (MiB) a rank may use, "
                   "reported as mem_device_total (0: unknown)")
    p.add_argument("--raw-windows", type=int, default=0,
                   help="send every gradient raw in the first N windows, "
                        "whatever bellowsd decides: the run's own raw "
                        "step time, which bellows report and the demo's "
                        "summary compare the compressed windows with")
    p.add_argument("--plain", action="store_true",
                   help="plain DDP without bellows (no hook, no bellowsd): "
                   "the reference to measure bellows against")
    p.add_argument("--torch-powersgd", type=int, default=0,
                   metavar="RANK",
                   help="as --plain, with PyTorch's powerSGD_hook at this "
                   "rank (error feedback, warm start)")
    p.add_argument("--one-bucket", action="store_true",
                   help="every gradient in one DDP bucket (else DDP's "
                   "default: 1 MiB first, then 25 MiB)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads per rank")
    p.add_argument("--data", default=DATA,
                   help="directory of the gzipped IDX files")
    p.add_argument("--train-limit", type=int, default=0,
                   help="use only the first N training images")
    p.add_argument("--json", help="rank 0 writes a summary here")
    p.add_argument("--quiet", action="store_true",
                   help="print nothing but errors")
    args = p.parse_args(argv)
    if args.lr_decay_at:
        args.lr_decay_at = [int(e) for e in args.lr_decay_at.split(",")]
    else:
        args.lr_decay_at = [max(1, (3 * args.epochs) // 4)]
    if args.eval_every < 1:
        p.error("--eval-every must be at least 1")
    if args.torch_powersgd < 0:
        p.error("--torch-powersgd must be a rank of at least 1")
    if (args.plain or args.torch_powersgd) and (args.comet or
                                                args.static_resireduce):
        p.error("--plain and --torch-powersgd run without bellows: no "
                "--comet or --static-resireduce")
    return args


def main(argv) -> int:
    args = parse(argv)
    if not pathlib.Path(args.data, "train-images-idx3-ubyte.gz").exists():
        print(f"fashion_mnist: no Fashion-MNIST in {args.data} (apt-get "
              "install dataset-fashion-mnist)", file=sys.stderr)
        return 1
    if args.nproc:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(free_port()))
        os.environ["WORLD_SIZE"] = str(args.nproc)
        import torch.multiprocessing as mp
        ctx = mp.start_processes(_spawned, args=(args.nproc, args),
                                 nprocs=args.nproc, join=False,
                                 start_method="spawn")

        # A SIGTERM to this process (e.g. from a script that started it)
        # must stop the ranks too, not leave them training on their own.
        def stop(signum, frame):
            for p in ctx.processes:
                if p.is_alive():
                    p.terminate()
            sys.exit(128 + signum)

        signal.signal(signal.SIGTERM, stop)
        while not ctx.join():  # raises if a rank failed
            pass
        return 0
    try:
        rank = int(os.environ["RANK"])
        world = int(os.environ["WORLD_SIZE"])
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]
    except KeyError as e:
        print(f"fashion_mnist: give --nproc N, or set {e.args[0]} (with "
              "RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)", file=sys.stderr)
        return 2
    train(rank, world, args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
