"""vs_zipnn - GComp's level 0 beside zstd -1 and ZipNN on the same gradients.

usage: BELLOWS_LIB=build/agent/libbellows.so \\
           /var/cache/bellows/torch2/bin/python bench/gcomp/vs_zipnn.py \\
           [--rounds R] [--batch-ms MS] DIR...

Each DIR holds the .f32 dumps of bench/gcomp/dump.py. For every dump,
GComp's level 0 (the table built from the dump before, the first dump's
own for the first), zstd -1 (libzstd, the library bellows links) and ZipNN
(PyPI's zipnn, torch input, one thread) code the same bytes; each must
give them back byte for byte. Ratios are bytes over float32 bytes summed
over the dumps, with the number of dumps each codes larger than zstd -1.

Speed is measured on the last dump in R rounds (default 9): each round
times every coder's compression and decompression once in turn, in GB/s
of float32 bytes per second of this process's CPU time (all its threads:
ZipNN's C code runs threads of its own on large inputs even with
threads=1) over a batch of at least MS ms (default 40), so that load from
other work falls on all alike. The table gives the medians and the median of the same-round
ratios to zstd -1. ZipNN's compression reorders its input in place, so
it codes a fresh copy each time and the copy's time, measured in the
same round, is taken off. ZipNN runs from Python (its compression and
decompression are C under a Python call; a 9.5 MB dump makes that call's
cost small), GComp and zstd through ctypes.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import pathlib
import statistics
import time
import warnings

import torch

warnings.filterwarnings("ignore")
from zipnn import ZipNN  # noqa: E402

F32 = 0
u64 = ctypes.c_uint64
sz = ctypes.c_size_t
vp = ctypes.c_void_p


def load_libs():
    lib = ctypes.CDLL(os.environ.get("BELLOWS_LIB", "libbellows.so"))
    lib.bellows_gcomp_histogram.argtypes = [ctypes.c_int, vp, u64, vp]
    lib.bellows_gcomp_table_build.argtypes = [vp, ctypes.c_uint,
                                              ctypes.c_uint32,
                                              ctypes.POINTER(vp)]
    lib.bellows_gcomp_table_destroy.argtypes = [ctypes.POINTER(vp)]
    lib.bellows_gcomp_bound.restype = sz
    lib.bellows_gcomp_bound.argtypes = [ctypes.c_int, u64]
    lib.bellows_gcomp_encode.argtypes = [vp, ctypes.c_int, vp, u64,
                                         ctypes.c_int, vp, vp, sz,
                                         ctypes.POINTER(sz), vp]
    lib.bellows_gcomp_decode.argtypes = [vp, vp, sz, ctypes.c_int, vp, u64,
                                         ctypes.c_int, vp, sz]
    z = ctypes.CDLL("libzstd.so.1")
    z.ZSTD_compressBound.restype = sz
    z.ZSTD_compressBound.argtypes = [sz]
    z.ZSTD_compress.restype = sz
    z.ZSTD_compress.argtypes = [vp, sz, vp, sz, ctypes.c_int]
    z.ZSTD_decompress.restype = sz
    z.ZSTD_decompress.argtypes = [vp, sz, vp, sz]
    z.ZSTD_isError.argtypes = [sz]
    return lib, z


class Coders:
    """The three coders on one dump (x: a contiguous float32 tensor)."""

    def __init__(self, lib, z, x: torch.Tensor, table: vp):
        self.lib, self.z, self.x, self.t = lib, z, x, table
        self.n = x.numel()
        self.raw = self.n * 4
        self.gcap = lib.bellows_gcomp_bound(F32, self.n)
        self.gbuf = ctypes.create_string_buffer(self.gcap)
        self.glen = sz(0)
        self.zcap = z.ZSTD_compressBound(self.raw)
        self.zbuf = ctypes.create_string_buffer(self.zcap)
        self.zlen = 0
        self.out = torch.empty_like(x)
        self.zipnn = ZipNN(input_format="torch", threads=1)
        self.zx = torch.empty_like(x)
        self.zc = b""

    def gcomp_enc(self):
        rc = self.lib.bellows_gcomp_encode(self.t, F32, self.x.data_ptr(),
                                           self.n, 0, None, self.gbuf,
                                           self.gcap, ctypes.byref(self.glen),
                                           None)
        assert rc == 0, rc

    def gcomp_dec(self):
        rc = self.lib.bellows_gcomp_decode(self.t, self.gbuf, self.glen.value,
                                           F32, self.out.data_ptr(), self.n,
                                           0, None, 0)
        assert rc == 0, rc

    def zstd_enc(self):
        self.zlen = self.z.ZSTD_compress(self.zbuf, self.zcap,
                                         self.x.data_ptr(), self.raw, 1)
        assert not self.z.ZSTD_isError(self.zlen)

    def zstd_dec(self):
        r = self.z.ZSTD_decompress(self.out.data_ptr(), self.raw, self.zbuf,
                                   self.zlen)
        assert r == self.raw

    def zipnn_enc(self):
        # ZipNN's compress reorders its input's bytes in place: it gets a
        # fresh copy each time (the copy's time is taken off, copy()).
        self.zx.copy_(self.x)
        self.zc = self.zipnn.compress(self.zx)

    def copy(self):
        self.zx.copy_(self.x)

    def zipnn_dec(self):
        self.zout = self.zipnn.decompress(self.zc)

    def check(self) -> tuple[int, int, int]:
        """Codes once with each, checks the round trips; returns bytes."""
        want = self.x.numpy().tobytes()
        self.gcomp_enc()
        self.out.zero_()
        self.gcomp_dec()
        assert self.out.numpy().tobytes() == want, "gcomp round trip"
        self.zstd_enc()
        self.out.zero_()
        self.zstd_dec()
        assert self.out.numpy().tobytes() == want, "zstd round trip"
        self.zipnn_enc()
        self.zipnn_dec()
        assert self.zout.contiguous().numpy().tobytes() == want, \
            "zipnn round trip"
        return self.glen.value, self.zlen, len(self.zc)


def table_of(lib, x: torch.Tensor, version: int) -> vp:
    hist = (u64 * 256)()
    assert lib.bellows_gcomp_histogram(F32, x.data_ptr(), x.numel(),
                                       hist) == 0
    t = vp()
    assert lib.bellows_gcomp_table_build(hist, 8, version,
                                         ctypes.byref(t)) == 0
    return t


def gbps(fn, raw: int, ms: float) -> float:
    t0 = time.process_time()
    reps = 0
    while True:
        fn()
        reps += 1
        t1 = time.process_time()
        if t1 - t0 >= ms / 1000:
            return raw * reps / (t1 - t0) / 1e9


def run_dir(lib, z, d: pathlib.Path, rounds: int, ms: float) -> None:
    files = sorted(d.glob("step_*.f32"))
    if not files:
        raise SystemExit(f"vs_zipnn.py: no .f32 in {d}")
    tot = {"gcomp": 0, "zstd": 0, "zipnn": 0}
    larger = {"gcomp": 0, "zipnn": 0}
    raw = 0
    prev = None
    for f in files:
        x = torch.frombuffer(bytearray(f.read_bytes()), dtype=torch.float32)
        t = table_of(lib, prev if prev is not None else x, 1)
        c = Coders(lib, z, x, t)
        g, zs, zn = c.check()
        tot["gcomp"] += g
        tot["zstd"] += zs
        tot["zipnn"] += zn
        larger["gcomp"] += g > zs
        larger["zipnn"] += zn > zs
        raw += c.raw
        prev = x
        if f != files[-1]:
            lib.bellows_gcomp_table_destroy(ctypes.byref(t))
    print(f"\n### {d}: {len(files)} dumps of {c.n} values\n")
    print("| coder | ratio (bytes / float32 bytes) | of zstd -1's | "
          "dumps larger than zstd -1 |\n|---|---|---|---|")
    print(f"| GComp level 0 | {tot['gcomp'] / raw:.4f} | "
          f"{tot['gcomp'] / tot['zstd']:.4f} | {larger['gcomp']} |")
    print(f"| zstd -1 | {tot['zstd'] / raw:.4f} | 1 | |")
    print(f"| ZipNN | {tot['zipnn'] / raw:.4f} | "
          f"{tot['zipnn'] / tot['zstd']:.4f} | {larger['zipnn']} |")
    kinds = [("GComp level 0", c.gcomp_enc, c.gcomp_dec),
             ("zstd -1", c.zstd_enc, c.zstd_dec),
             ("ZipNN", c.zipnn_enc, c.zipnn_dec)]
    enc = {k: [] for k, _, _ in kinds}
    dec = {k: [] for k, _, _ in kinds}
    for _ in range(rounds):
        for k, e, dd in kinds:
            enc[k].append(gbps(e, c.raw, ms))
            dec[k].append(gbps(dd, c.raw, ms))
        # ZipNN's compression without the copy of its input
        cp = gbps(c.copy, c.raw, ms)
        enc["ZipNN"][-1] = 1 / (1 / enc["ZipNN"][-1] - 1 / cp)
    print(f"\nLast dump, {rounds} rounds in turn, {ms:g} ms batches:\n")
    print("| coder | compress GB/s | decompress GB/s | compress / zstd -1 "
          "| decompress / zstd -1 |\n|---|---|---|---|---|")
    for k, _, _ in kinds:
        re = statistics.median(a / b for a, b in zip(enc[k],
                                                      enc["zstd -1"]))
        rd = statistics.median(a / b for a, b in zip(dec[k],
                                                      dec["zstd -1"]))
        print(f"| {k} | {statistics.median(enc[k]):.3f} | "
              f"{statistics.median(dec[k]):.3f} | {re:.2f} | {rd:.2f} |")
    lib.bellows_gcomp_table_destroy(ctypes.byref(t))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--batch-ms", type=float, default=40)
    ap.add_argument("dirs", nargs="+")
    a = ap.parse_args()
    torch.set_num_threads(1)
    lib, z = load_libs()
    print(f"torch {torch.__version__}, zipnn "
          f"{getattr(__import__('zipnn'), '__version__', '?')}")
    for d in a.dirs:
        run_dir(lib, z, pathlib.Path(d), a.rounds, a.batch_ms)


if __name__ == "__main__":
    main()
