"""codecs_auto - 2-bit threshold "auto": one C call against the torch means.

bellows.compress's TwoBit("auto").encode, one thread, three ways on the
same gradients, interleaved (each round runs the three in a rotating
order, each on its own residual):

  c      bellows_codec_encode_codes_auto: the means, the encode and the
         residual's move to +-v in one call (this libbellows);
  torch  the means, the selection and the move in torch around the C
         fixed-threshold encode (what a libbellows without the call runs);
  pure   the same in torch alone (native=False).

Shapes: 4 tensors of 1024 x 1024 values per round (a layer stack of
issue 24's bench/hook), and one 64 x 64 tensor per call, timed over 200
calls per round (the per-call cost of a small layer). Prints the median
time per tensor of each way and the median over rounds of the per-round
ratio torch / c and pure / c. Run from the source tree after building:

    BELLOWS_LIB=build/agent/libbellows.so PYTHONPATH=agent/python \\
        OMP_NUM_THREADS=1 nice -n19 /usr/bin/python3 bench/codecs_auto.py

--rounds N (default 15). --count WAY BIG SMALL runs no timing: it warms
both ways up on both shapes, then runs BIG encodes of one 1024 x 1024
tensor and SMALL of one 64 x 64 by WAY (c or torch), for callgrind:

    PYTHONHASHSEED=0 valgrind --tool=callgrind \
        /usr/bin/python3 bench/codecs_auto.py --count c 5 0

minus the same with 0 0 is 5 encodes (see bench/README.md).
"""

import argparse
import statistics
import time

import torch

from bellows import compress

WAYS = ("c", "torch", "pure")


def encoder(way: str):
    """An encode function of one way, with its own residuals."""
    q = compress.TwoBit("auto", native=way != "pure")
    if way == "torch":
        def enc(layer, g):
            err = q.errors.get(layer)
            if err is None:
                err = q.errors[layer] = torch.zeros(g.numel())
            return q._encode_auto_torch(err, g)
        return q, enc
    return q, q.encode


def run(shape, count, calls, rounds):
    """Median seconds per tensor per way, and median per-round ratios."""
    gen = torch.Generator().manual_seed(0)
    grads = [torch.randn(*shape, generator=gen) * 0.01 for _ in range(count)]
    encs = {w: encoder(w) for w in WAYS}
    for w in WAYS:  # warm up: residuals allocated, paths checked
        q, enc = encs[w]
        for i, g in enumerate(grads):
            enc(i, g)
        want = "torch" if w == "pure" else "c"
        assert q.last_path == want, (w, q.last_path)
    per = {w: [] for w in WAYS}
    for r in range(rounds):
        order = WAYS[r % 3:] + WAYS[:r % 3]
        for w in order:
            enc = encs[w][1]
            t0 = time.perf_counter()
            for _ in range(calls):
                for i, g in enumerate(grads):
                    enc(i, g)
            per[w].append((time.perf_counter() - t0) / (calls * count))
    med = {w: statistics.median(per[w]) for w in WAYS}
    ratio = {w: statistics.median(a / b for a, b in zip(per[w], per["c"]))
             for w in ("torch", "pure")}
    return med, ratio


def count_encodes(way: str, n_big: int, n_small: int) -> None:
    """Warm-up of both ways on both shapes, then the encodes to count."""
    gen = torch.Generator().manual_seed(0)
    big = torch.randn(1024, 1024, generator=gen) * 0.01
    small = torch.randn(64, 64, generator=gen) * 0.01
    encs = {w: encoder(w)[1] for w in ("c", "torch")}
    for layer, g in ((0, big), (1, small)):
        for enc in encs.values():
            enc(layer, g)
    enc = encs[way]
    for _ in range(n_big):
        enc(0, big)
    for _ in range(n_small):
        enc(1, small)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--count", nargs=3, metavar=("WAY", "BIG", "SMALL"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.count:
        way, n_big, n_small = args.count
        if way not in ("c", "torch"):
            ap.error("--count: WAY is c or torch")
        count_encodes(way, int(n_big), int(n_small))
        return
    lib = compress._codec_lib()
    assert lib is not None and lib.codec_encode_codes_auto is not None, \
        "this libbellows lacks bellows_codec_encode_codes_auto"
    print(f"torch {torch.__version__}, codecs {lib.codec_isa().decode()}, "
          f"{args.rounds} rounds")
    for name, shape, count, calls in (("4 x 1024^2", (1024, 1024), 4, 1),
                                      ("1 x 64^2", (64, 64), 1, 200)):
        med, ratio = run(shape, count, calls, args.rounds)
        print(f"{name:>10}: per tensor c {med['c'] * 1e6:9.1f} us, "
              f"torch means {med['torch'] * 1e6:9.1f} us "
              f"(x{ratio['torch']:.2f}), pure torch "
              f"{med['pure'] * 1e6:9.1f} us (x{ratio['pure']:.2f})")


if __name__ == "__main__":
    main()
