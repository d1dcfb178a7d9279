"""bench/topk_torch - bellows.compress.TopK from Python: its decode, C
against torch, and its encode against the 2-bit one.

The decode of one DDP bucket of top-k 1 %: every rank's (value, index)
pairs of each tensor averaged into the tensor's gradient. Three tensors
of 1 Mi float32 values (the larger bucket of a 4 x Linear(1024, 1024)
MLP under DDP's default bucket sizes), 2 ranks' payloads made by the C
encode; the C decode (one bellows_codec_topk_average call per tensor,
straight into the gradient) and the torch one (zeros, one index_add_,
a division into the gradient) alternated, --rounds times each, one
thread. Then the encode of each tensor (TopK.select, the C top-k with
error feedback) alternated with TwoBit.encode of the same tensor (the C
2-bit quantiser, which reads and writes as much): top-k's own cost over
a codec that streams the same bytes. Prints the median thread CPU time
of each (robust to other processes on the machine, unlike wall time),
and checks that both decodes wrote the same bits.

    BELLOWS_LIB=build/agent/libbellows.so PYTHONPATH=agent/python \\
        /usr/bin/python3 bench/topk_torch.py [--rounds 40] [--world 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from bellows.compress import Counts, Item, TopK, TwoBit


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--tensors", type=int, default=3)
    p.add_argument("--values", type=int, default=1 << 20)
    p.add_argument("--level", type=float, default=0.01)
    args = p.parse_args()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    topk = TopK()
    grads = [torch.randn(args.values, generator=gen)
             for _ in range(args.tensors)]
    sparse = [(Item(i, g, args.level), TopK.k_of(g.numel(), args.level))
              for i, g in enumerate(grads)]
    gathered = []
    for _ in range(args.world):  # each rank's payload: its own gradients
        for g in grads:
            g.copy_(torch.randn(g.numel(), generator=gen))
        gathered.append(topk._encode_all(sparse, Counts()).clone())
    if not topk._decode_native(sparse, gathered, args.world):
        print("topk_decode: no C decode in this libbellows")
        return 1
    c_bits = [g.clone() for g in grads]
    topk._decode_torch(sparse, gathered, args.world)
    same = all(torch.equal(a.view(torch.int32), b.view(torch.int32))
               for a, b in zip(c_bits, grads))
    ms: dict[str, list[float]] = {"C": [], "torch": []}
    for _ in range(args.rounds):
        for name, fn in (("C", topk._decode_native),
                         ("torch", topk._decode_torch)):
            t0 = time.thread_time()
            fn(sparse, gathered, args.world)
            ms[name].append((time.thread_time() - t0) * 1e3)
    c, t = statistics.median(ms["C"]), statistics.median(ms["torch"])
    print(f"decode of {args.tensors} x {args.values} float32 at "
          f"{args.level:g}, {args.world} ranks: C {c:.3f} ms, torch "
          f"{t:.3f} ms of CPU (medians of {args.rounds}); torch / C "
          f"{t / c:.2f}; same bits: {'yes' if same else 'NO'}")
    two = TwoBit()
    errs = [torch.zeros(g.numel()) for g in grads]
    enc: dict[str, list[float]] = {"top-k": [], "2-bit": []}
    for _ in range(args.rounds):
        for i, ((it, k), err) in enumerate(zip(sparse, errs)):
            t0 = time.thread_time()
            topk.select(err, it.grad, k)
            t1 = time.thread_time()
            two.encode(i, it.grad)
            t2 = time.thread_time()
            enc["top-k"].append((t1 - t0) * 1e3)
            enc["2-bit"].append((t2 - t1) * 1e3)
    a, b = statistics.median(enc["top-k"]), statistics.median(enc["2-bit"])
    print(f"encode of {args.values} float32: top-k {args.level:g} "
          f"{a:.3f} ms, 2-bit {b:.3f} ms of CPU (medians of "
          f"{args.rounds * args.tensors}); top-k / 2-bit {a / b:.2f}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
