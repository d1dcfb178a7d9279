"""dump - real gradients for the GComp codec benchmark.

usage: /usr/bin/python3 bench/gcomp/dump.py [--out DIR] [--steps N]
           [--every K] [--model cnn|mlp|both]

Trains on Fashion-MNIST (/usr/share/datasets/fashion-mnist), one process:
"cnn", the model of examples/pytorch/fashion_mnist.py (~80k parameters,
momentum SGD, lr 0.05, weight decay 1e-4), and "mlp", a larger MLP
784-1024-1024-512-10 (~2.4M parameters, AdamW, lr 1e-3, weight decay
1e-2). Every K steps it writes DIR/MODEL/step_NNNNN.f32, the gradient of
every parameter concatenated (raw little-endian float32, as `bellows codec`
reads), and step_NNNNN.lv, one byte per value: the level the paper's delta
gives it for the optimizer's state before that step (bellows_gcomp_levels,
max level 3), which `build/bench/gcomp` uses for the ratio with delta
levels.
"""

from __future__ import annotations

import argparse
import ctypes
import pathlib
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

SRC = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SRC / "agent" / "python"))
sys.path.insert(0, str(SRC / "examples" / "pytorch"))

import fashion_mnist as fm  # noqa: E402
from bellows import compress  # noqa: E402


def mlp() -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(),
                         nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Linear(1024, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def levels_of(comp: compress.GComp, params, grads) -> torch.Tensor:
    out = []
    for i, g in enumerate(grads):
        lv = comp._levels(i, g)
        out.append(lv if lv is not None else
                   torch.zeros(g.numel(), dtype=torch.uint8))
    return torch.cat(out)


def run(name: str, out: pathlib.Path, steps: int, every: int) -> None:
    torch.manual_seed(0)
    (train_x, train_y), _ = fm.load(fm.DATA)
    if name == "cnn":
        model = fm.Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9,
                              weight_decay=1e-4)
        bs = 64
    else:
        model = mlp()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3,
                                weight_decay=1e-2)
        bs = 128
    params = list(model.parameters())
    comp = compress.GComp(max_level=3)
    comp.optimizer, comp.params = opt, params
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(1)
    order = torch.randperm(len(train_x), generator=gen)
    pos = 0
    for step in range(steps):
        if pos + bs > len(order):
            order = torch.randperm(len(train_x), generator=gen)
            pos = 0
        idx = order[pos:pos + bs]
        pos += bs
        x, y = fm.normalise(train_x[idx]), train_y[idx]
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        if step % every == 0:
            grads = [p.grad.detach().reshape(-1).contiguous()
                     for p in params]
            flat = torch.cat(grads)
            flat.numpy().tofile(d / f"step_{step:05d}.f32")
            levels_of(comp, params, grads).numpy().tofile(
                d / f"step_{step:05d}.lv")
            print(f"{name} step {step}: loss {loss.item():.3f}, "
                  f"{flat.numel()} values", flush=True)
        opt.step()


def main(argv) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="/tmp/bellows-gcomp-dumps")
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--every", type=int, default=10)
    p.add_argument("--model", choices=("cnn", "mlp", "both"),
                   default="both")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    for name in (("cnn", "mlp") if a.model == "both" else (a.model,)):
        run(name, pathlib.Path(a.out), a.steps, a.every)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
