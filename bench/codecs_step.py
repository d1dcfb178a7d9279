"""codecs_step - the hook's codec time per training step, C path vs torch.

Two gloo ranks (one thread each) train two models under bellows.torch's
CompressionHook, every 2-D tensor compressed and every step timed per
layer (as in a compressing step): the Fashion-MNIST example's CNN on the
data set's first images (batch 64 per rank, 4 matrices of 1.6-256 KB)
and a 4 x 1024^2 MLP on random inputs (batch 64, four 4 MiB matrices).
Per model, the codecs 1-bit, 2-bit (value threshold 0.15) and top-k
(keep 1 %), each through libbellows' C codecs (native=True, the default
for CPU float32) and the torch code (native=False): six configurations
of one DDP model, swapped between rounds; rounds interleaved (each
starts one configuration later), --steps steps per configuration and
round after one warm-up step, each such block from the same initial
weights and an empty residual. Per step, rank 0 records the hook's
codec_ms (encode + decode: the per-layer reduce's wall time minus its
collectives) and the step's wall time. The report gives per model and
codec the median per step of both paths and their ratio.

    BELLOWS_LIB=build/agent/libbellows.so PYTHONPATH=agent/python \\
        /usr/bin/python3 bench/codecs_step.py [--rounds 5] [--steps 6] \\
        [--data /usr/share/datasets/fashion-mnist] [--out FILE]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import pathlib
import socket
import statistics
import subprocess
import sys

CODECS = ("1bit", "2bit", "topk")
PATHS = ("C", "torch")
CONFIGS = [(c, p) for c in CODECS for p in PATHS]


def load_images(data: str, n: int):
    import numpy as np
    import torch

    d = pathlib.Path(data)

    def idx(name):
        with gzip.open(d / name, "rb") as f:
            raw = f.read()
        ndim = raw[3]
        dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big")
                for i in range(ndim)]
        return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(
            dims)

    x = torch.from_numpy(idx("train-images-idx3-ubyte.gz")[:n].copy())
    y = torch.from_numpy(idx("train-labels-idx1-ubyte.gz")[:n].astype(
        np.int64))
    return (x.float().div_(255).sub_(0.2860).div_(0.3530)).unsqueeze(1), y


def models(torch):
    import torch.nn as nn
    import torch.nn.functional as F

    class Net(nn.Module):  # examples/pytorch/fashion_mnist.py's
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

    layers = []
    for i in range(4):
        layers.append(nn.Linear(1024, 1024))
        if i < 3:
            layers.append(nn.ReLU())
    return {"fashion-mnist CNN": Net, "4x1024^2 MLP":
            lambda: nn.Sequential(*layers)}


def rank_main(rank: int, port: int, args) -> None:
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    import time

    from bellows import compress
    from bellows.torch import CompressionHook

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=2)
    images, labels = load_images(args.data, 128)
    x_img = images[rank * 64:(rank + 1) * 64]
    y_img = labels[rank * 64:(rank + 1) * 64]
    g = torch.Generator().manual_seed(rank)
    x_mlp = torch.randn(64, 1024, generator=g)
    y_mlp = torch.randn(64, 1024, generator=g)
    out = {}
    for name, make in models(torch).items():
        torch.manual_seed(0)
        model = make()
        ddp = nn.parallel.DistributedDataParallel(model)
        params = list(model.parameters())
        comps = {}
        for codec, path in CONFIGS:
            native = path == "C"
            comps[codec, path] = (
                compress.TopK(native=native) if codec == "topk" else
                (compress.OneBit if codec == "1bit" else compress.TwoBit)(
                    0.15, native=native))
        hook = CompressionHook(params, comps[CONFIGS[0]],
                               compress.ProcessGroupComm(), align=True)
        hook.register(ddp)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        mlp = name.endswith("MLP")
        x, y = (x_mlp, y_mlp) if mlp else (x_img, y_img)
        rec = {f"{c} {p}": {"codec": [], "step": []} for c, p in CONFIGS}
        init = {k: v.clone() for k, v in model.state_dict().items()}
        for r in range(args.rounds):
            order = CONFIGS[r % len(CONFIGS):] + CONFIGS[:r % len(CONFIGS)]
            for codec, path in order:
                # Every block of steps from the same weights and an
                # empty residual: a codec that diverges (2-bit at this
                # LR can) must not hand the next one NaN gradients.
                model.load_state_dict(init)
                hook.compressor = comps[codec, path]
                hook.compressor.reset()
                level = 0.01 if codec == "topk" else 1.0
                for s in range(args.steps + 1):
                    hook.levels = [level if p.dim() >= 2 else 0.0
                                   for p in params]
                    hook.reset()
                    t0 = time.perf_counter()
                    opt.zero_grad()
                    o = ddp(x)
                    loss = F.mse_loss(o, y) if mlp else \
                        F.cross_entropy(o, y)
                    loss.backward()
                    opt.step()
                    ms = (time.perf_counter() - t0) * 1e3
                    if s > 0:  # the first step of a round warms up
                        rec[f"{codec} {path}"]["codec"].append(
                            hook.codec_ms)
                        rec[f"{codec} {path}"]["step"].append(ms)
        out[name] = rec
        del ddp
    if rank == 0:
        pathlib.Path(args.rank_out).write_text(json.dumps(out))
    dist.barrier()
    dist.destroy_process_group()


def report(data: dict) -> str:
    lines = ["| model | codec | C codec ms/step | torch codec ms/step | "
             "torch / C | C step ms | torch step ms |",
             "|---|---|---|---|---|---|---|"]
    for name, rec in data.items():
        for codec in CODECS:
            c = statistics.median(rec[f"{codec} C"]["codec"])
            t = statistics.median(rec[f"{codec} torch"]["codec"])
            cs = statistics.median(rec[f"{codec} C"]["step"])
            ts = statistics.median(rec[f"{codec} torch"]["step"])
            lines.append(f"| {name} | {codec} | {c:.3f} | {t:.3f} | "
                         f"{t / c:.1f} | {cs:.1f} | {ts:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--out", help="also write the samples here (JSON)")
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--rank-out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.rank is not None:
        rank_main(args.rank, args.port, args)
        return 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tmp = pathlib.Path(args.out or "/tmp/codecs_step.json")
    procs = [subprocess.Popen(
        [sys.executable, __file__, "--rank", str(r), "--port", str(port),
         "--rounds", str(args.rounds), "--steps", str(args.steps),
         "--data", args.data, "--rank-out", str(tmp)], env=os.environ)
        for r in range(2)]
    for p in procs:
        if p.wait() != 0:
            raise SystemExit("codecs_step: a rank failed")
    data = json.loads(tmp.read_text())
    print(report(data), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
