"""codecs_torch - bellows.compress's 1-bit and 2-bit, C path against torch.

One thread; for float32 tensors of 1 and 16 MiB, the median of 7 calls of
OneBit/TwoBit.encode (with error feedback) and .decode, through libbellows'
C codecs (native=True, the default) and the torch code (native=False), in
GB/s of float32 values. Run from the source tree after building:

    BELLOWS_LIB=build/agent/libbellows.so PYTHONPATH=agent/python \\
        /usr/bin/python3 bench/codecs_torch.py
"""

import statistics
import time

import torch

from bellows import compress


def main() -> None:
    torch.set_num_threads(1)
    for n in (1 << 18, 1 << 22):
        g = torch.randn(n, generator=torch.Generator().manual_seed(0)) * 0.3
        for cls in (compress.OneBit, compress.TwoBit):
            rates = {}
            for native in (True, False):
                q = cls(0.5, native=native)
                q.encode(0, g)
                enc, dec = [], []
                for _ in range(7):
                    t0 = time.perf_counter()
                    words = q.encode(0, g)
                    t1 = time.perf_counter()
                    q.decode(words, n)
                    t2 = time.perf_counter()
                    enc.append(t1 - t0)
                    dec.append(t2 - t1)
                gb = n * 4 / 1e9
                rates[native] = (gb / statistics.median(enc),
                                 gb / statistics.median(dec))
            print(f"{cls.name} {n * 4 >> 20:3d} MiB: encode C "
                  f"{rates[True][0]:6.2f} GB/s, torch {rates[False][0]:5.2f}; "
                  f"decode C {rates[True][1]:6.2f}, torch "
                  f"{rates[False][1]:5.2f}")


if __name__ == "__main__":
    main()
