"""test_activations_native - bellows.activations on libbellows' C
quantiser against its torch code.

Real torch and the built libbellows, no mocks: for contiguous CPU float32
tensors pack() and unpack() run the C quantiser (bellows_ebq_*, through
ctypes on the data pointers); with native=False the torch code, the
reference. On random and adversarial tensors (sizes 1, odd, 2^k +- 1,
ReLU halves of zeros, huge, tiny and subnormal magnitudes, values at the
midpoints between levels, NaN and infinities, every bound from 1e-7 to
well above the data) both give the same mode, step, code type, codes,
bitmask, non-zero fraction and stored bytes, and the same floats bit for
bit, whichever path decodes; every element is within the bound. CUDA
tensors take the quantiser's CUDA twin, with the same codes and floats,
where a device is (skipped here); without one, the twin is not used and
its entry points say ENOTSUP.
"""

from __future__ import annotations

import ctypes
import unittest

import torch

import bellows.activations as act


def bits(t: torch.Tensor) -> torch.Tensor:
    """The bit patterns of a float32 tensor (so -0, NaN compare exactly)."""
    return t.contiguous().view(torch.int32)


class _Counting:
    """libbellows' functions, counting the quantiser's calls."""

    def __init__(self, funcs):
        self.funcs = funcs
        self.calls = 0

    def __getattr__(self, name):
        fn = getattr(self.funcs, name)
        if not name.startswith("ebq_"):
            return fn

        def call(*args):
            self.calls += 1
            return fn(*args)

        return call


def cases():
    g = torch.Generator().manual_seed(11)
    out = {
        "normal": torch.randn(10007, generator=g),
        "relu": torch.relu(torch.randn(4, 16, 13, 13, generator=g)),
        "negative": -torch.rand(4097, generator=g) * 3,
        "zeros": torch.zeros(777),
        "huge": torch.randn(1023, generator=g) * 1e30,
        "tiny": torch.randn(1025, generator=g) * 1e-30,
        "subnormal": torch.randn(513, generator=g) * 1e-39,
        "mixed": torch.randn(4001, generator=g) *
        10.0 ** torch.randint(-8, 5, (4001,), generator=g).float(),
        "one": torch.tensor([0.7]),
        "sparse": torch.zeros(10001).index_fill_(
            0, torch.arange(0, 10001, 10), 3.25),
    }
    # Mostly zeros with a wide range: int32 codes, sparse.
    wide = torch.zeros(20000)
    wide[::50] = torch.linspace(-3000, 3000, 400)
    out["sparse-int32"] = wide
    k = torch.arange(-20000, 20000, 37, dtype=torch.float64)
    out["midpoints"] = ((k + 0.5) * 2 * 0.05).float()
    return out


BOUNDS = (1e-7, 1e-4, 1e-3, 0.01, 0.05, 0.3, 2.0, 1e3)


class NativeTest(unittest.TestCase):
    def setUp(self):
        self.lib = act._ebq_lib()
        if self.lib is None:
            self.skipTest("libbellows has no error-bounded quantiser")

    def assert_same(self, x, eb):
        ref = act.pack(x, eb, native=False)
        got = act.pack(x, eb)
        self.assertEqual(got.mode, ref.mode)
        self.assertEqual(got.shape, ref.shape)
        self.assertEqual(got.stored_bytes, ref.stored_bytes)
        self.assertEqual(got.raw_bytes, ref.raw_bytes)
        if ref.mode != "raw":
            self.assertEqual(got.step, ref.step)
            self.assertEqual(got.code_dtype, ref.code_dtype)
            self.assertTrue(torch.equal(got.codes, ref.codes))
            self.assertEqual(got.bits is None, ref.bits is None)
            if ref.bits is not None:
                self.assertTrue(torch.equal(got.bits, ref.bits))
            self.assertEqual(got.nonzero, ref.nonzero)
        else:
            self.assertIs(got.raw, x)
        want = act.unpack(ref, native=False)
        for p, native in ((got, True), (got, False), (ref, True)):
            r = act.unpack(p, native=native)
            self.assertEqual(r.shape, x.shape)
            self.assertTrue(torch.equal(bits(r), bits(want)),
                            f"mode {p.mode}, native {native}")
        fin = torch.isfinite(x)
        err = (x[fin].double() - want[fin].double()).abs()
        if err.numel():
            self.assertLessEqual(err.max().item(), eb)
        return got

    def test_both_paths_give_the_same_codes_and_floats(self):
        for name, x in cases().items():
            for eb in BOUNDS:
                with self.subTest(name=name, eb=eb):
                    self.assert_same(x, eb)

    def test_sizes_around_the_vector_widths(self):
        g = torch.Generator().manual_seed(5)
        for n in (1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 4095, 4096,
                  4097, 8193):
            x = torch.relu(torch.randn(n, generator=g))
            for eb in (1e-3, 0.05):
                with self.subTest(n=n, eb=eb):
                    self.assert_same(x, eb)

    def test_wide_sparse_tensors_take_int32_codes_on_both_paths(self):
        p = self.assert_same(cases()["sparse-int32"], 1e-3)
        self.assertEqual((p.mode, p.code_dtype), ("sparse", torch.int32))

    def test_codes_the_filter_zeroes_count_in_the_layout(self):
        # A bound whose step rounds to eb in float32 (amax 1.5): values
        # around 0.75 eb get code 1 and a filtered reconstruction 0. The
        # sparse layout stores their codes, so both paths size it by the
        # codes: raw when those make it no smaller than the floats.
        eb = 2.0 ** -23 * (1 + 2.0 ** -18 + 2.0 ** -30)
        for many in (1000, 4000):
            x = torch.zeros(4096)
            x[0] = 1.5
            x[1:many] = 0.75 * eb
            with self.subTest(many=many):
                p = self.assert_same(x, eb)
                self.assertLessEqual(p.stored_bytes, p.raw_bytes)
                self.assertEqual(p.mode, "sparse" if many == 1000
                                 else "raw")

    def test_non_finite_values_stay_raw_on_both_paths(self):
        for special in (float("nan"), float("inf"), -float("inf")):
            x = torch.randn(100)
            x[37] = special
            p = self.assert_same(x, 0.01)
            self.assertEqual(p.mode, "raw")

    def test_contiguous_cpu_float32_takes_the_c_path(self):
        saved = act._native_ebq
        counting = _Counting(self.lib)
        act._native_ebq = counting
        try:
            x = torch.relu(torch.randn(3, 5, 7, 9))
            p = act.pack(x, 0.01)
            self.assertNotEqual(p.mode, "raw")
            act.unpack(p)
            self.assertEqual(counting.calls, 3)  # plan, encode, decode
            # Other dtypes and non-contiguous views pack by the torch
            # code; float64 codes decode by it too.
            act.unpack(act.pack(x.double(), 0.01))
            act.pack(x.transpose(1, 3), 0.01)
            act.unpack(act.pack(x, 0.01, native=False), native=False)
            self.assertEqual(counting.calls, 3)
            # The codes of a float32 view are the C decoder's.
            act.unpack(act.pack(x.transpose(1, 3), 0.01))
            self.assertEqual(counting.calls, 4)
        finally:
            act._native_ebq = saved

    def test_non_contiguous_and_other_dtypes_still_pack(self):
        x = torch.relu(torch.randn(6, 8, 10))
        for t in (x.transpose(0, 2), x.double(), x.half()):
            p = act.pack(t, 0.01)
            r = act.unpack(p)
            err = (t.double() - r.double()).abs().max().item()
            self.assertLessEqual(err, 0.01)


class CudaTwinTest(unittest.TestCase):
    """The quantiser's CUDA twin (bellows_ebq_*_cuda) for CUDA tensors:
    the codes and floats of the CPU paths, where a device is; here, that
    it is not used without one and says ENOTSUP as documented."""

    def setUp(self):
        self.lib = act._ebq_lib()
        if self.lib is None:
            self.skipTest("libbellows has no error-bounded quantiser")
        if self.lib.ebq_plan_cuda is None:
            self.fail("libbellows has no bellows_ebq_*_cuda")

    def test_the_twin_runs_only_with_a_device(self):
        has = self.lib.ebq_cuda_available() == 1
        self.assertEqual(act._ebq_cuda_lib() is not None, has)
        if has:
            return  # the device case is the test below
        x = torch.relu(torch.randn(1000))
        n = x.numel()
        scratch = torch.zeros(max(8, self.lib.ebq_cuda_scratch_bytes(n)),
                              dtype=torch.uint8)
        info = act._lib.EbqInfo()
        rc = self.lib.ebq_plan_cuda(x.data_ptr(), n, 0.01, 0,
                                    scratch.data_ptr(), scratch.numel(),
                                    None, ctypes.byref(info))
        self.assertEqual(rc, -18)  # BELLOWS_ENOTSUP
        self.assertEqual(info.n, 0)  # untouched

    @unittest.skipUnless(torch.cuda.is_available(), "no CUDA device here")
    def test_cuda_tensors_give_the_cpu_codes_and_floats(self):
        if act._ebq_cuda_lib() is None:
            self.skipTest("libbellows built without CUDA")
        saved = act._native_ebq
        counting = _CountingCuda(self.lib)
        act._native_ebq = counting
        try:
            for name, x in cases().items():
                for eb in BOUNDS:
                    with self.subTest(name=name, eb=eb):
                        ref = act.pack(x, eb, native=False)
                        before = counting.calls
                        got = act.pack(x.cuda(), eb)
                        self.assertEqual(got.mode, ref.mode)
                        self.assertEqual(got.stored_bytes,
                                         ref.stored_bytes)
                        if ref.mode == "raw":
                            continue
                        self.assertEqual(counting.calls, before + 2)
                        self.assertEqual(got.step, ref.step)
                        self.assertEqual(got.nonzero, ref.nonzero)
                        self.assertTrue(torch.equal(got.codes.cpu(),
                                                    ref.codes))
                        if ref.bits is not None:
                            self.assertTrue(torch.equal(got.bits.cpu(),
                                                        ref.bits))
                        r = act.unpack(got)
                        self.assertEqual(counting.calls, before + 3)
                        self.assertTrue(r.is_cuda)
                        self.assertTrue(torch.equal(
                            bits(r.cpu()),
                            bits(act.unpack(ref, native=False))))
        finally:
            act._native_ebq = saved


class _CountingCuda(_Counting):
    """libbellows' functions, counting the CUDA twin's plan, encode and
    decode calls."""

    def __getattr__(self, name):
        fn = getattr(self.funcs, name)
        if name not in ("ebq_plan_cuda", "ebq_encode_parts_cuda",
                        "ebq_decode_parts_cuda"):
            return fn

        def call(*args):
            self.calls += 1
            return fn(*args)

        return call


if __name__ == "__main__":
    unittest.main()
