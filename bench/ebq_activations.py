"""ebq_activations - real convolution inputs for bench/codecs_ebq.

usage: /usr/bin/python3 bench/ebq_activations.py OUT [--steps 400]
           [--images 1024] [--seed 0]

Trains bench/comet's Fashion-MNIST network (conv 3x3 x16, ReLU, pool; conv
x32, ReLU, pool; conv x64, ReLU, pool; linear) for --steps SGD steps
(batch 64, LR 0.05, momentum 0.9, one thread), then runs --images test
images through it and writes the inputs of conv2 and conv3 (the pooled
ReLU outputs COMET compresses: bellows.activations' tensors) to OUT as
raw little-endian float32, conv2's then conv3's. Prints their shape,
fraction of zeros and largest value.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "comet"))
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "agent" / "python"))
sys.path.insert(0, str(HERE.parent / "examples" / "pytorch"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from run import Net  # noqa: E402  (bench/comet/run.py)
from fashion_mnist import DATA, load, normalise  # noqa: E402


def main(argv) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--images", type=int, default=1024)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    (xtr, ytr), (xte, _) = load(DATA)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    perm = torch.randperm(len(xtr))
    for s in range(args.steps):
        idx = perm[(s * 64) % len(perm):][:64]
        loss = F.cross_entropy(model(normalise(xtr[idx])), ytr[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    seen = {}

    def keep(name):
        def hook(_module, inputs):
            seen[name] = inputs[0].detach().contiguous()
        return hook

    model.conv2.register_forward_pre_hook(keep("conv2"))
    model.conv3.register_forward_pre_hook(keep("conv3"))
    with torch.no_grad():
        model(normalise(xte[:args.images]))
    with open(args.out, "wb") as f:
        for name in ("conv2", "conv3"):
            t = seen[name]
            f.write(t.numpy().astype("<f4").tobytes())
            print(f"{name} input {tuple(t.shape)}: "
                  f"{(t == 0).float().mean().item() * 100:.1f} % zeros, "
                  f"max {t.max().item():.3g}, "
                  f"mean of non-zeros {t[t != 0].mean().item():.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
