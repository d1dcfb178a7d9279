"""topk_sparse - bellows.compress.TopK.select on mostly zero gradients,
C path against torch.

One thread; 1 Mi float32 values of which 0, 90, 99, 99.5 and 100 % are
exact zeros (the rest uniform in [-0.2, 0.2) at random places), k = 1 %,
error feedback carried between calls: the median of 30 calls of
TopK.select through libbellows' C top-k (native=True) and the torch code
(native=False), in milliseconds. Run from the source tree after building:

    BELLOWS_LIB=build/agent/libbellows.so PYTHONPATH=agent/python \\
        /usr/bin/python3 bench/topk_sparse.py
"""

import statistics
import time

import torch

from bellows.compress import TopK


def main() -> None:
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    n = 1 << 20
    k = n // 100
    print("TopK.select, 1 Mi float32, k = 1 %, 1 thread, "
          "median of 30 (ms)")
    print(f"{'zeros':>7} {'C':>7} {'torch':>7}")
    for zeros in (0.0, 0.9, 0.99, 0.995, 1.0):
        g = torch.zeros(n)
        nnz = round((1 - zeros) * n)
        if nnz:
            pos = torch.randperm(n, generator=gen)[:nnz]
            g[pos] = torch.rand(nnz, generator=gen) * 0.4 - 0.2 + 1e-3
        ms = {}
        for native in (True, False):
            t = TopK(native=native)
            err = torch.zeros(n)
            times = []
            for _ in range(30):
                t0 = time.perf_counter()
                t.select(err, g, k)
                times.append(time.perf_counter() - t0)
            ms[native] = statistics.median(times) * 1e3
            if native and t.paths["c"] == 0:
                raise SystemExit("topk_sparse: the C top-k did not run "
                                 f"(paths {t.paths}): is libbellows built?")
        print(f"{zeros * 100:6.1f}% {ms[True]:7.3f} {ms[False]:7.3f}")


if __name__ == "__main__":
    main()
