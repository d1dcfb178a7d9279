"""test_compress - bellows.compress against the reference, on fixed tensors.

PowerSGD and top-k against reference.py; 1-bit and 2-bit quantisation
against a value-by-value reference written here (MXNet's rules), through
libbellows' C codecs where they apply, and those against the torch code
bit for bit (NativeCodecTest).

Every worker runs the real compressor in its own thread; their collectives
meet in an in-process communicator (sums and gathers in rank order). The
reference (reference.py) computes the same steps over all workers' tensors
at once. Compared: each worker's result, its error-feedback residual, the
floats counted, and the number of collectives.
"""

from __future__ import annotations

import ctypes
import math
import threading
import unittest

import numpy as np
import torch

from bellows import compress
from reference import RefPowerSGD, RefTopK

torch.set_num_threads(1)


class _Meeting:
    """Where the workers' collectives meet."""

    def __init__(self, world: int):
        self.world = world
        self.barrier = threading.Barrier(world, timeout=30)
        self.slots = [None] * world


class ThreadComm(compress.Communicator):
    """One worker's end of an in-process communicator."""

    def __init__(self, meeting: _Meeting, rank: int):
        self.meeting = meeting
        self.rank = rank
        self.world = meeting.world
        self.calls = []

    def _exchange(self, tensor):
        m = self.meeting
        m.slots[self.rank] = tensor.clone()
        m.barrier.wait()
        got = [s.clone() for s in m.slots]
        m.barrier.wait()  # nobody overwrites a slot still being read
        return got

    def all_reduce(self, tensor):
        self.calls.append(("all_reduce", tensor.numel()))
        got = self._exchange(tensor)
        total = got[0]
        for g in got[1:]:
            total += g
        tensor.copy_(total)

    def all_gather(self, tensor):
        self.calls.append(("all_gather", tensor.numel()))
        return self._exchange(tensor)


def run_workers(world, fn):
    """Runs fn(rank, comm) in ``world`` threads; returns their results."""
    meeting = _Meeting(world)
    results = [None] * world
    errors = []

    def body(rank):
        try:
            results[rank] = fn(rank, ThreadComm(meeting, rank))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
            meeting.barrier.abort()

    threads = [threading.Thread(target=body, args=(r,))
               for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


# Shapes of a small model: a conv weight, a linear weight, a bias, a
# matrix smaller than the ranks asked of it.
SHAPES = {0: (6, 3, 3, 3), 1: (10, 8), 2: (10,), 3: (3, 2)}


def gradients(world, step):
    """Fixed gradients: worker w's tensors at ``step``."""
    out = []
    for w in range(world):
        g = torch.Generator().manual_seed(1000 * step + w)
        out.append({k: torch.randn(*s, generator=g)
                    for k, s in SHAPES.items()})
    return out


def compare_runs(test, world, make, ref, schedule):
    """Runs the compressor made by ``make`` and the reference ``ref``
    over ``schedule`` (a list of {layer: level}); checks every step."""
    grads = [gradients(world, s) for s in range(len(schedule))]

    def worker(rank, comm):
        c = make()
        steps = []
        for s, levels in enumerate(schedule):
            mine = {k: v.clone() for k, v in grads[s][rank].items()}
            items = [compress.Item(k, mine[k], levels[k]) for k in levels]
            ncalls = len(comm.calls)
            counts = c.reduce(items, comm)
            steps.append({
                "out": mine,
                "errors": {k: v.clone() for k, v in c.errors.items()},
                "counts": counts,
                "calls": comm.calls[ncalls:],
            })
        return steps

    runs = run_workers(world, worker)
    for s, levels in enumerate(schedule):
        expect = ref.step(grads[s], levels)
        for rank in range(world):
            got = runs[rank][s]
            for k in levels:
                test.assertTrue(
                    torch.allclose(got["out"][k], expect[k], rtol=1e-4,
                                   atol=1e-5),
                    f"step {s} rank {rank} layer {k} (level {levels[k]}): "
                    f"max diff "
                    f"{(got['out'][k] - expect[k]).abs().max():.3g}")
            # The residuals: what this worker did not get across.
            for k in levels:
                want = ref.errors[rank].get(k)
                have = got["errors"].get(k)
                if want is None:
                    test.assertIsNone(have, f"step {s} layer {k} keeps an "
                                      "error it should have sent")
                    continue
                test.assertTrue(
                    torch.allclose(have.reshape(want.shape), want,
                                   rtol=1e-4, atol=1e-5),
                    f"step {s} rank {rank} layer {k}: residual differs")
            floats = sum(ref.floats(SHAPES[k], lv) for k, lv in
                         levels.items())
            test.assertEqual(got["counts"].floats_sent, floats)
            test.assertEqual(sum(make().level_floats(SHAPES[k], lv)
                                 for k, lv in levels.items()), floats)
            test.assertEqual(got["counts"].floats_raw,
                             sum(math.prod(SHAPES[k]) for k in levels))
    return runs


class PowerSGDTest(unittest.TestCase):
    SCHEDULE = [
        {0: 2, 1: 2, 2: 0, 3: 4},  # a fresh Q for every matrix
        {0: 2, 1: 2, 2: 0, 3: 4},  # warm start from the last Q
        {0: 1, 1: 2, 2: 0, 3: 4},  # rank change: new Q, error kept
        {0: 1, 1: 0, 2: 0, 3: 1},  # layer 1 raw: its residual goes too
        {0: 2, 1: 1, 2: 0, 3: 1},  # back up, and compressed again
    ]

    def test_powersgd_matches_the_reference_over_rank_changes(self):
        print("\n  3 workers, 5 steps of conv/linear/bias tensors at ranks "
              "2/1/0/4(capped to 2)")
        compare_runs(self, 3, lambda: compress.PowerSGD(seed=7),
                     RefPowerSGD(3, seed=7), self.SCHEDULE)

    def test_powersgd_sends_raw_and_p_together_then_q(self):
        runs = compare_runs(self, 2, lambda: compress.PowerSGD(seed=1),
                            RefPowerSGD(2, seed=1), self.SCHEDULE[:1])
        calls = runs[0][0]["calls"]
        # raw bias (10) + P of 6x27 r2, 10x8 r2, 3x2 r2; then the Qs.
        self.assertEqual(calls, [("all_reduce", 10 + 12 + 20 + 6),
                                 ("all_reduce", 54 + 16 + 4)])
        print(f"\n  collectives of one step: {calls}")

    def test_powersgd_rank_change_keeps_the_error_and_redraws_q(self):
        def worker(rank, comm):
            c = compress.PowerSGD(seed=3)
            g = torch.randn(4, 5, generator=torch.Generator().manual_seed(
                rank))
            c.reduce([compress.Item(0, g, 2)], comm)
            q_before = c.queries[0].clone()
            err_before = c.errors[0].clone()
            out = torch.zeros(4, 5)  # no new gradient: M is the residual
            c.reduce([compress.Item(0, out, 1)], comm)
            return q_before, err_before, out, c

        runs = run_workers(2, worker)
        for q_before, err_before, out, c in runs:
            self.assertEqual(tuple(q_before.shape), (5, 2))
            self.assertEqual(tuple(c.queries[0].shape), (5, 1))
            self.assertEqual(c.inits[0], 2, "Q was not drawn again")
            self.assertGreater(err_before.norm(), 0.1)
            # The old residual went in as M: what was sent back plus
            # what is kept is exactly it.
            self.assertTrue(torch.allclose(out + c.errors[0], err_before,
                                           atol=1e-6))
        self.assertTrue(torch.equal(runs[0][3].queries[0],
                                    runs[1][3].queries[0]),
                        "ranks disagree on Q")

    def test_orthogonalize_gives_orthonormal_columns(self):
        m = torch.randn(20, 3, generator=torch.Generator().manual_seed(0))
        compress.orthogonalize(m)
        self.assertTrue(torch.allclose(m.t() @ m, torch.eye(3), atol=1e-5))

    def test_orthogonalize_keeps_a_zero_column_finite(self):
        m = torch.zeros(5, 2)
        compress.orthogonalize(m)
        self.assertTrue(torch.isfinite(m).all())

    def test_an_empty_group_makes_no_collective(self):
        def worker(rank, comm):
            compress.PowerSGD().reduce([], comm)
            compress.TopK().reduce([], comm)
            return comm.calls

        self.assertEqual(run_workers(2, worker), [[], []])


def _ill_conditioned(rows, rank, digits, seed):
    """P [rows, rank] whose columns share a direction up to 10^-digits."""
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(rows, 1, generator=g, dtype=torch.float64)
    noise = torch.randn(rows, rank, generator=g, dtype=torch.float64)
    return (base + 10.0 ** -digits * noise).float()


class NativePowerSGDTest(unittest.TestCase):
    """PowerSGD's C stages (bellows/codec.h) against the torch code.

    Not bit for bit: the products sum in another order (OpenBLAS's
    blocking against torch's), and the C orthogonalisation is two-pass
    Gram-Schmidt in double sums where the torch one is one modified pass
    in float. On these well-conditioned matrices each stage differs by a
    few float32 roundings of the largest terms, and the results of a
    step (and of five, through the residual and the warm start) by less
    than 1e-4 of the largest magnitude: the bound asserted. The residual
    is M minus the decoded gradient exactly, on both paths.
    """

    SCHEDULE = PowerSGDTest.SCHEDULE

    def setUp(self):
        lib = compress._codec_lib()
        if lib is None or lib.psgd_project is None:
            self.fail("libbellows has no PowerSGD stages")
        self.lib = lib

    def test_c_stages_agree_with_torch_within_the_bound(self):
        shapes = {0: (6, 3, 3, 3), 1: (10, 8), 2: (10,), 3: (3, 2),
                  4: (64, 48), 5: (64, 48), 6: (64, 48), 7: (33, 65)}
        sched = [{0: 2, 1: 2, 2: 0, 3: 4, 4: 4, 5: 4, 6: 1, 7: 16},
                 {0: 2, 1: 2, 2: 0, 3: 4, 4: 4, 5: 4, 6: 1, 7: 16},
                 {0: 1, 1: 2, 2: 0, 3: 1, 4: 4, 5: 8, 6: 1, 7: 32},
                 {0: 1, 1: 0, 2: 0, 3: 1, 4: 4, 5: 8, 6: 1, 7: 32},
                 {0: 2, 1: 1, 2: 0, 3: 1, 4: 4, 5: 8, 6: 2, 7: 32}]

        def grads(world, step):
            out = []
            for w in range(world):
                g = torch.Generator().manual_seed(500 * step + w)
                out.append({k: torch.randn(*s, generator=g)
                            for k, s in shapes.items()})
            return out

        def worker(rank, comm, native):
            c = compress.PowerSGD(seed=11, native=native)
            steps = []
            for s, levels in enumerate(sched):
                mine = {k: v.clone() for k, v in grads(2, s)[rank].items()}
                before = {k: v.clone() for k, v in c.errors.items()}
                given = {k: v.clone() for k, v in mine.items()}
                c.reduce([compress.Item(k, mine[k], lv)
                          for k, lv in levels.items()], comm)
                steps.append((mine, {k: v.clone() for k, v in
                                     c.errors.items()}, before, given))
            return steps, c

        nat = run_workers(2, lambda r, comm: worker(r, comm, True))
        ref = run_workers(2, lambda r, comm: worker(r, comm, False))
        worst = 0.0
        for rank in range(2):
            steps_c, cc = nat[rank]
            steps_t, ct = ref[rank]
            self.assertEqual(ct.native_layers, 0)
            # Every compressed layer of every step ran in C.
            self.assertEqual(cc.native_layers, sum(
                1 for lv in sched for k in lv
                if compress.PowerSGD.rank_of(shapes[k], lv[k]) > 0))
            for s, levels in enumerate(sched):
                (oc, ec, before, given), (ot, et, _, _) = \
                    steps_c[s], steps_t[s]
                for k in levels:
                    scale = max(1.0, float(ot[k].abs().max()))
                    d = float((oc[k] - ot[k]).abs().max()) / scale
                    worst = max(worst, d)
                    self.assertLess(d, 1e-4, f"step {s} layer {k}")
                    if k in ec:
                        d = float((ec[k] - et[k]).abs().max()) / max(
                            1.0, float(et[k].abs().max()))
                        worst = max(worst, d)
                        self.assertLess(d, 1e-4, f"step {s} layer {k} "
                                        "residual")
                        # residual == (old residual + grad) - decoded,
                        # exactly.
                        m = before.get(k, torch.zeros_like(ec[k])) + \
                            given[k].reshape(ec[k].shape)
                        self.assertTrue(torch.equal(
                            ec[k], m - oc[k].reshape(ec[k].shape)),
                            f"step {s} layer {k}: residual is not M - out")
        print(f"\n  C stages ({self.lib.psgd_blas().decode()}) vs torch: "
              f"max difference {worst:.2g} of the largest magnitude")

    def test_other_tensors_take_the_torch_path(self):
        c = compress.PowerSGD()
        self.assertIsNone(c._native_lib(torch.zeros(4, 4,
                                                    dtype=torch.float64), 2))
        self.assertIsNone(c._native_lib(torch.zeros(8, 4).t(), 2))
        self.assertIsNone(c._native_lib(torch.zeros(40, 40), 33))
        self.assertIsNotNone(c._native_lib(torch.zeros(40, 40), 32))
        self.assertIsNone(compress.PowerSGD(native=False)._native_lib(
            torch.zeros(4, 4), 2))

    def test_cuda_gradients_use_the_cublas_twin_only_with_a_device(self):
        lib = self.lib
        self.assertIsNotNone(lib.psgd_cuda_open, "no bellows_psgd_cuda_*")
        has = lib.psgd_cuda_available() == 1
        self.assertEqual(compress._psgd_cuda(lib), has)
        ptr = ctypes.c_void_p()
        rc = lib.psgd_cuda_open(None, ctypes.byref(ptr))
        if has:
            self.assertEqual(rc, 0)
            lib.psgd_cuda_close(ctypes.byref(ptr))
        else:
            # Without the twin or a device: ENOTSUP, nothing opened.
            self.assertEqual(rc, -18)
        self.assertFalse(ptr)
        # Tensors on neither the CPU nor CUDA take the torch code.
        self.assertIsNone(compress.PowerSGD()._native_lib(
            torch.zeros(40, 40, device="meta"), 4))
        print(f"\n  libbellows PowerSGD cuBLAS twin: device {has}")

    @unittest.skipUnless(torch.cuda.is_available(), "no CUDA device here")
    def test_cuda_gradients_run_the_cublas_twin_as_the_c_stages(self):
        if not compress._psgd_cuda(self.lib):
            self.skipTest("libbellows built without the cuBLAS twin")
        shapes = {0: (64, 48), 1: (64, 48), 2: (33, 65), 3: (10,)}
        sched = [{0: 4, 1: 4, 2: 8, 3: 0}, {0: 4, 1: 2, 2: 8, 3: 0},
                 {0: 4, 1: 2, 2: 32, 3: 0}]

        def worker(rank, comm, dev):
            c = compress.PowerSGD(seed=5)
            outs = []
            for s, levels in enumerate(sched):
                g = torch.Generator().manual_seed(100 * s + rank)
                mine = {k: torch.randn(*sh, generator=g).to(dev)
                        for k, sh in shapes.items()}
                before = {k: v.clone() for k, v in c.errors.items()}
                given = {k: v.clone() for k, v in mine.items()}
                c.reduce([compress.Item(k, mine[k], lv)
                          for k, lv in levels.items()], comm)
                for k in levels:
                    if k in c.errors:  # residual == M - out exactly
                        e = c.errors[k]
                        m = before.get(k, torch.zeros_like(e)) + \
                            given[k].reshape(e.shape)
                        self.assertTrue(torch.equal(
                            e, m - mine[k].reshape(e.shape)))
                outs.append({k: v.cpu() for k, v in mine.items()})
            return outs, c

        gpu = run_workers(2, lambda r, comm: worker(r, comm, "cuda"))
        cpu = run_workers(2, lambda r, comm: worker(r, comm, "cpu"))
        for rank in range(2):
            (og, cg), (oc, cc) = gpu[rank], cpu[rank]
            self.assertEqual(cg.cuda_layers, cg.native_layers)
            self.assertEqual(cg.native_layers, cc.native_layers)
            self.assertGreater(cg.cuda_layers, 0)
            for s in range(len(sched)):
                for k in shapes:
                    scale = max(1.0, float(oc[s][k].abs().max()))
                    d = float((og[s][k] - oc[s][k]).abs().max()) / scale
                    self.assertLess(d, 1e-4, f"step {s} layer {k}")

    def test_c_orthogonalisation_holds_where_the_torch_one_drifts(self):
        """Off the diagonal of P^T P: the lengths follow the torch rule
        (a remainder of norm nu ends at nu / (nu + 1e-8)), which P of
        nearly parallel columns feels on both paths."""
        worst_c = worst_t = 0.0
        for digits in (2, 4, 5):
            for rank in (4, 16, 32):
                p = _ill_conditioned(1000, rank, digits, rank + digits)
                pt = p.clone()
                compress.orthogonalize(pt)
                self.assertEqual(self.lib.psgd_orthogonalize(
                    p.data_ptr(), 1000, rank), 0)
                off = ~torch.eye(rank, dtype=torch.bool)
                ec = float((p.double().t() @ p.double())[off].abs().max())
                et = float((pt.double().t() @ pt.double())[off]
                           .abs().max())
                worst_c, worst_t = max(worst_c, ec), max(worst_t, et)
        self.assertLess(worst_c, 1e-7)
        print(f"\n  max |P^T P - I| off the diagonal, P of condition up to "
              f"7e5: C {worst_c:.2g}, torch {worst_t:.2g}")


class TopKTest(unittest.TestCase):
    SCHEDULE = [
        {0: 0.25, 1: 0.1, 2: 0, 3: 1.0},
        {0: 0.25, 1: 0.5, 2: 0, 3: 0.5},
        {0: 0.1, 1: 0, 2: 0.5, 3: 0.5},  # layer 1 raw: residual flushed
        {0: 0.1, 1: 0.2, 2: 0.5, 3: 0.01},  # k never below 1
    ]

    def test_topk_matches_the_reference_with_error_feedback(self):
        print("\n  2 workers, 4 steps, keep fractions 1.0 .. 0.01 and raw")
        compare_runs(self, 2, compress.TopK, RefTopK(2), self.SCHEDULE)

    def test_topk_sends_raw_then_one_gather_of_values_and_indices(self):
        runs = compare_runs(self, 2, compress.TopK, RefTopK(2),
                            self.SCHEDULE[:1])
        k = [round(0.25 * 162), round(0.1 * 80), 6]
        self.assertEqual(runs[1][0]["calls"],
                         [("all_reduce", 10), ("all_gather", 2 * sum(k))])

    def _decode_case(self, ordered: bool, native: bool = True):
        """Decodes 3 ranks' pairs of 3 tensors whose indices collide
        across ranks (ascending, as the C encode sends them, or in
        torch.topk's arbitrary order); checks every gradient against a
        sum rank by rank, tensor by tensor, divided once, bit for bit;
        returns the compressor."""
        gen = torch.Generator().manual_seed(7)
        shapes, ks, world = [(5, 7), (1,), (300,)], [4, 1, 60], 3
        items = [compress.Item(j, torch.empty(sh), 0.1)
                 for j, sh in enumerate(shapes)]
        gathered = []
        for _ in range(world):
            parts = []
            for it, k in zip(items, ks):
                idx = torch.randperm(it.grad.numel(), generator=gen)[:k]
                if ordered:
                    idx = idx.sort().values
                vals = torch.randn(k, generator=gen) * 1e3
                parts += [vals, idx.to(torch.int32).view(torch.float32)]
            gathered.append(torch.cat(parts))
        topk = compress.TopK(native=native)
        topk._decode_all(list(zip(items, ks)), gathered, world)
        off = 0
        for it, k in zip(items, ks):
            want = torch.zeros(it.grad.numel())
            for g in gathered:
                want.index_add_(0, g[off + k:off + 2 * k].view(
                    torch.int32).long(), g[off:off + k])
            want.div_(world)
            self.assertTrue(torch.equal(it.grad.reshape(-1).view(
                torch.int32), want.view(torch.int32)), f"tensor {it.layer}")
            off += 2 * k
        return topk

    def test_topk_decode_of_all_ranks_has_the_bits_of_a_sum_per_rank(self):
        """The C decode (one call per tensor over all ranks) and the torch
        one (one index_add_ over every rank's and tensor's pairs) both
        give the bits of a sum rank by rank, divided once."""
        self._decode_case(ordered=True, native=False)
        topk = self._decode_case(ordered=True)
        if compress._codec_lib() is not None:
            self.assertEqual(topk.decodes, {"c": 1, "torch": 0})

    def test_topk_decode_of_unordered_indices_falls_back_to_torch(self):
        """A rank that ran torch.topk sends its indices in no order: the
        C decode refuses them and the torch code gives the same bits."""
        topk = self._decode_case(ordered=False)
        self.assertEqual(topk.decodes, {"c": 0, "torch": 1})

    def test_topk_level_rounding(self):
        self.assertEqual(compress.TopK.k_of(400, 0.1), 40)
        self.assertEqual(compress.TopK.k_of(400, 0.001), 1)
        self.assertEqual(compress.TopK.k_of(400, 2.0), 400)
        self.assertEqual(compress.TopK.k_of(400, 0), 0)


def ref_quantise(kind, thr, residual, grad):
    """MXNet's 1bit / 2bit on one tensor, value by value in float32 as
    the notes state it: returns (codes, decoded values, new residual)."""
    r = [np.float32(v) for v in residual.reshape(-1).tolist()]
    g = [np.float32(v) for v in grad.reshape(-1).tolist()]
    t = np.float32(thr)
    codes, dec = [], []
    for i in range(len(r)):
        r[i] = np.float32(r[i] + g[i])
        if kind == "2bit":
            if r[i] >= t:
                codes.append(3)
                dec.append(t)
                r[i] = np.float32(r[i] - t)
            elif r[i] <= -t:
                codes.append(2)
                dec.append(-t)
                r[i] = np.float32(r[i] + t)
            else:
                codes.append(0)
                dec.append(np.float32(0))
        else:
            if r[i] > t:
                codes.append(1)
                dec.append(np.float32(1))
                r[i] = np.float32(r[i] - 1)
            else:
                codes.append(0)
                dec.append(np.float32(-1))
                r[i] = np.float32(r[i] + 1)
    return (codes, torch.tensor(dec, dtype=torch.float32),
            torch.tensor(r, dtype=torch.float32))


def ref_pack(codes, bits):
    """Codes packed LSB first, padded to whole 4-byte words."""
    out = bytearray(-(-len(codes) * bits // 32) * 4)
    for i, c in enumerate(codes):
        out[i * bits // 8] |= c << (i * bits % 8)
    return bytes(out)


class QuantiserTest(unittest.TestCase):
    KINDS = {"1bit": compress.OneBit, "2bit": compress.TwoBit}

    def steps(self, n, count, scale=0.4, seed=0):
        g = torch.Generator().manual_seed(seed)
        return [torch.randn(n, generator=g) * scale for _ in range(count)]

    def test_encode_and_decode_match_the_reference_value_by_value(self):
        # Thresholds: MXNet's 0.5, and others (1bit's 0 is the sign).
        for kind, thr in (("2bit", 0.5), ("2bit", 0.1), ("1bit", 0.5),
                          ("1bit", 0.0)):
            q = self.KINDS[kind](thr)
            residual = torch.zeros(37)
            for s, grad in enumerate(self.steps(37, 4, seed=len(kind))):
                codes, dec, residual = ref_quantise(kind, thr, residual,
                                                    grad)
                words = q.encode(0, grad.clone())
                self.assertEqual(words.dtype, torch.float32)
                self.assertEqual(bytes(words.view(torch.uint8).tolist()),
                                 ref_pack(codes, q.bits),
                                 f"{kind} t={thr} step {s}: packed codes")
                self.assertTrue(torch.equal(q.decode(words, 37), dec),
                                f"{kind} t={thr} step {s}: decoded")
                self.assertTrue(torch.equal(q.errors[0], residual),
                                f"{kind} t={thr} step {s}: residual")
        print("\n  1bit and 2bit, 37 values, 4 steps: codes, bytes, "
              "decoded values and residuals equal to the reference")

    def test_two_bit_codes_on_a_hand_made_vector(self):
        q = compress.TwoBit(0.5)
        g = torch.tensor([0.6, -0.7, 0.1, 0.5, -0.5, 0.49])
        words = q.encode(3, g.clone())
        # codes 3, 2, 0, 3 | 2, 0: bytes 0b11_00_10_11, 0b0000_00_10.
        self.assertEqual(words.view(torch.uint8).tolist(),
                         [0b11001011, 0b00000010, 0, 0])
        self.assertTrue(torch.equal(
            q.decode(words, 6),
            torch.tensor([0.5, -0.5, 0.0, 0.5, -0.5, 0.0])))
        self.assertTrue(torch.allclose(
            q.errors[3], torch.tensor([0.1, -0.2, 0.1, 0.0, 0.0, 0.49]),
            atol=1e-7))

    def test_packed_sizes_are_32_and_16_values_per_float(self):
        for n, one, two in ((1, 1, 1), (16, 1, 1), (17, 1, 2), (32, 1, 2),
                            (33, 2, 3), (1000, 32, 63), (4096, 128, 256)):
            for cls, want in ((compress.OneBit, one),
                              (compress.TwoBit, two)):
                q = cls()
                self.assertEqual(cls.words(n), want)
                self.assertEqual(q.encode(0, torch.randn(n)).numel(), want)
                self.assertEqual(q.level_floats((n,), 1), want)
                self.assertEqual(q.level_floats((n,), 0), n)
                self.assertTrue(q.compresses((n,), 1))
                self.assertFalse(q.compresses((n,), 0))

    def test_decoded_sums_plus_the_residual_give_the_inputs_sum(self):
        for kind in self.KINDS:
            q = self.KINDS[kind](0.5)
            grads = self.steps(300, 25, scale=0.2, seed=4)
            sent = torch.zeros(300)
            for grad in grads:
                sent += q.decode(q.encode(0, grad.clone()), 300)
            total = sum(grads)
            self.assertTrue(torch.allclose(sent + q.errors[0], total,
                                           atol=1e-4),
                            f"{kind}: max diff "
                            f"{(sent + q.errors[0] - total).abs().max():.3g}")

    def test_two_workers_average_the_decoded_codes(self):
        schedule = [{0: 1, 1: 1, 2: 0}, {0: 1, 1: 0, 2: 1},
                    {0: 1, 1: 1, 2: 1}]
        shapes = {0: (6, 3, 3, 3), 1: (10, 8), 2: (10,)}
        grads = [[{k: torch.randn(*s, generator=torch.Generator()
                                  .manual_seed(100 * step + 10 * w + k))
                   * 0.3 for k, s in shapes.items()}
                  for w in range(2)] for step in range(len(schedule))]
        for kind in self.KINDS:
            def worker(rank, comm):
                q = self.KINDS[kind](0.5)
                out = []
                for s, levels in enumerate(schedule):
                    mine = {k: v.clone() for k, v in grads[s][rank].items()}
                    n0 = len(comm.calls)
                    counts = q.reduce([compress.Item(k, mine[k], lv)
                                       for k, lv in levels.items()], comm)
                    out.append((mine, counts, comm.calls[n0:]))
                return out

            runs = run_workers(2, worker)
            residual = [dict() for _ in range(2)]
            for s, levels in enumerate(schedule):
                for k, lv in levels.items():
                    n = math.prod(shapes[k])
                    total = torch.zeros(n)
                    for w in range(2):
                        g = grads[s][w][k].reshape(-1)
                        r = residual[w].pop(k, torch.zeros(n))
                        if lv == 0:  # raw: the residual goes along
                            total += g + r
                            continue
                        _, dec, residual[w][k] = ref_quantise(kind, 0.5, r,
                                                              g)
                        total += dec
                    for w in range(2):
                        self.assertTrue(torch.allclose(
                            runs[w][s][0][k].reshape(-1), total / 2,
                            atol=1e-6), f"{kind} step {s} layer {k}")
                cls = self.KINDS[kind]
                words = sum(cls.words(math.prod(shapes[k]))
                            for k, lv in levels.items() if lv)
                raw = sum(math.prod(shapes[k]) for k, lv in levels.items()
                          if not lv)
                counts, calls = runs[0][s][1], runs[0][s][2]
                self.assertEqual(counts.floats_sent, words + raw)
                self.assertEqual(counts.bytes_sent, 4 * (words + raw))
                self.assertEqual(counts.floats_raw,
                                 sum(math.prod(x) for x in shapes.values()))
                self.assertEqual(calls, ([("all_reduce", raw)] if raw
                                         else []) + [("all_gather", words)])
        print("\n  2 workers, 3 steps, 1bit and 2bit with raw layers: "
              "results, floats and collectives as the reference")

    @staticmethod
    def ref_auto(residual, grad, exact=False):
        """2bit "auto" on one tensor: (codes, decoded values, new
        residual, v). Values with |r| >= mean |r| (r = residual + grad)
        are sent as +-v, v their mean magnitude (float32). ``exact``: the
        means of the C path, in float64 rounded once to float32, else
        torch's float32 means (they may differ by an ulp)."""
        r = residual + grad
        mag = r.abs()
        if exact:
            mag64 = mag.double()
            t = float(np.float32(float(mag64.mean())))
            sel = mag >= t
            v = float(np.float32(float(mag64[sel].mean()))) \
                if sel.any() else t
        else:
            t = float(mag.mean())
            sel = mag >= t
            v = float(np.float32(float(mag[sel].mean()))) \
                if sel.any() else t
        codes = [3 if x >= t else 2 if x <= -t else 0 for x in r.tolist()]
        dec = torch.sign(r) * sel * v
        return codes, dec, r - dec, v

    def test_two_bit_auto_sends_each_tensor_at_its_own_scale(self):
        # Per tensor and step: values of |r| >= mean |r| go as +-v, v
        # their mean magnitude, sent as the word after the codes; the C
        # codec (float64 means) and the torch code (float32 means) agree
        # with the reference taking its means the same way.
        for native in (True, False):
            q = compress.TwoBit("auto", native=native)
            residual = torch.zeros(37)
            for s, grad in enumerate(self.steps(37, 4, scale=0.01, seed=3)):
                codes, dec, residual, v = self.ref_auto(residual, grad,
                                                        exact=native)
                words = q.encode(0, grad.clone())
                w = compress.TwoBit.words(37)
                self.assertEqual(words.numel(), w + 1)
                self.assertEqual(q.level_floats((37,), 1), w + 1)
                self.assertEqual(float(words[w]), v, f"step {s}: scale")
                self.assertEqual(bytes(words[:w].view(torch.uint8).tolist()),
                                 ref_pack(codes, 2), f"step {s}: codes")
                self.assertTrue(torch.equal(
                    q.decode(words[:w], 37, threshold=v), dec))
                self.assertTrue(torch.allclose(q.errors[0], residual,
                                               rtol=0, atol=1e-8),
                                f"native={native} step {s}: residual")
        print("\n  2bit auto, 37 values at scale 0.01, 4 steps, C and torch:"
              " scale word, codes and residuals as the reference")

    def test_two_workers_with_auto_thresholds_decode_each_at_its_own(self):
        # Rank 1's gradients are 100x rank 0's: each rank's codes decode
        # at the scale it sent, so neither scale drowns the other.
        shapes = {0: (10, 8), 1: (10,)}
        grads = [{k: torch.randn(*s, generator=torch.Generator()
                                 .manual_seed(10 * w + k)) * (0.01, 1.0)[w]
                  for k, s in shapes.items()} for w in range(2)]

        def worker(rank, comm):
            q = compress.TwoBit("auto")
            mine = {k: v.clone() for k, v in grads[rank].items()}
            counts = q.reduce([compress.Item(0, mine[0], 1),
                               compress.Item(1, mine[1], 0)], comm)
            return mine, counts

        runs = run_workers(2, worker)
        total = torch.zeros(80)
        for w in range(2):
            total += self.ref_auto(torch.zeros(80),
                                   grads[w][0].reshape(-1))[1]
        raw = (grads[0][1] + grads[1][1]) / 2
        for w in range(2):
            mine, counts = runs[w]
            self.assertTrue(torch.allclose(mine[0].reshape(-1), total / 2,
                                           atol=1e-7))
            self.assertTrue(torch.allclose(mine[1], raw, atol=1e-7))
            self.assertEqual(counts.floats_sent,
                             compress.TwoBit.words(80) + 1 + 10)
        print("\n  2 workers, scales 0.01 and 1: each rank's codes decoded "
              "at its own scale")

    def test_bad_thresholds_are_refused(self):
        with self.assertRaises(ValueError):
            compress.OneBit("auto")  # 1bit's threshold is a boundary only
        with self.assertRaises(ValueError):
            compress.TwoBit("mean")
        self.assertTrue(compress.TwoBit("auto").auto)
        for bad in (float("nan"), float("inf"), -0.1):
            with self.assertRaises(ValueError):
                compress.TwoBit(bad)
            with self.assertRaises(ValueError):
                compress.OneBit(bad)
        with self.assertRaises(ValueError):
            compress.TwoBit(0.0)  # 2bit needs a positive threshold
        self.assertEqual(compress.OneBit(0.0).threshold, 0.0)


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal bit patterns, or NaN in both places (a NaN's sign and
    payload follow the operand order, which neither path fixes)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    nan = torch.isnan(a)
    if not torch.equal(nan, torch.isnan(b)):
        return False
    return torch.equal(a[~nan].view(torch.int32), b[~nan].view(torch.int32))


class NativeCodecTest(unittest.TestCase):
    """libbellows' C codecs against the torch code, bit for bit."""

    def data(self, n, kind, thr, seed):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(n, generator=g) * 0.4
        if kind == 1 and n:
            x[::5] = float("nan")
        elif kind == 2 and n:
            x[::3] = float("inf")
            x[1::7] = float("-inf")
        elif kind == 3:
            x *= 1e-40  # subnormal
        elif kind == 4:
            x *= 3e38
        elif kind == 5 and n:  # at and around the float32 threshold
            t = float(np.float32(thr))
            x[::2] = t
            x[1::4] = -t
            x[3::8] = float(np.nextafter(np.float32(t), np.float32(1)))
        elif kind == 6:
            x.zero_()
            x[::2] = -0.0
        return x

    def test_c_codecs_give_the_torch_codes_residuals_and_values(self):
        lib = compress._codec_lib()
        self.assertIsNotNone(lib, "libbellows has no C codecs")
        cases = 0
        for cls, thrs in ((compress.TwoBit, (0.5, 0.7, 0.1, 1e-30)),
                          (compress.OneBit, (0.5, 0.7, 0.0))):
            for thr in thrs:
                for n in (0, 1, 15, 16, 17, 31, 33, 255, 257, 1000, 4097):
                    for kind in range(7):
                        c, ref = cls(thr), cls(thr, native=False)
                        for step in range(3):
                            x = self.data(n, kind, thr, step + n)
                            self.assertEqual(c._native(x)[1], "cpu")
                            wc = c.encode(5, x.clone())
                            wr = ref.encode(5, x.clone())
                            what = f"{cls.name} t={thr} n={n} data {kind}"
                            self.assertTrue(torch.equal(
                                wc.view(torch.uint8), wr.view(torch.uint8)),
                                what + ": packed codes")
                            self.assertTrue(_same_bits(c.errors[5],
                                                       ref.errors[5]),
                                            what + ": residual")
                            self.assertTrue(_same_bits(c.decode(wc, n),
                                                       ref.decode(wr, n)),
                                            what + ": decoded")
                            acc = self.data(n, 0, thr, 99)
                            want = acc.clone()
                            want += ref.decode(wr, n)
                            self.assertIs(c.decode(wc, n, add_to=acc), acc)
                            self.assertTrue(_same_bits(acc, want),
                                            what + ": decoded and added")
                            cases += 1
        print(f"\n  C codecs ({lib.codec_isa().decode()}) equal to torch "
              f"in {cases} encode/decode steps")

    def test_c_topk_sends_the_torch_set_and_leaves_its_residual(self):
        """Distinct magnitudes: the C and torch top-k send the same
        (index, value) pairs and leave the same residual bit for bit;
        ties: the C code takes the lower indices, exactly k of them."""
        lib = compress._codec_lib()
        self.assertIsNotNone(lib, "libbellows has no C codecs")
        self.assertIsNotNone(lib.codec_topk_encode)
        cases = 0
        for n in (1, 2, 17, 1000, 4097, 40000, 100003):
            for k in sorted({1, max(1, n // 100), n // 3, n}):
                if k == 0:
                    continue
                c, ref = compress.TopK(), compress.TopK(native=False)
                ec = torch.zeros(n)
                er = torch.zeros(n)
                for step in range(3):
                    g = torch.Generator().manual_seed(n + step)
                    x = torch.randn(n, generator=g) * 0.4
                    if n > 10:
                        x[5] = float("inf")
                        x[7] = -1e30 * (step + 1)
                        x[9] = 1e-42  # subnormal
                    vc, ic = c.select(ec, x.clone(), k)
                    vr, ir = ref.select(er, x.clone(), k)
                    what = f"n={n} k={k} step {step}"
                    self.assertEqual(ic.numel(), k, what)
                    self.assertTrue(bool((ic[1:] > ic[:-1]).all()),
                                    what + ": ascending indices")
                    order = torch.argsort(ir.long())
                    self.assertTrue(torch.equal(ic, ir[order]),
                                    what + ": index set")
                    self.assertTrue(_same_bits(vc, vr[order]),
                                    what + ": values")
                    self.assertTrue(_same_bits(ec, er), what + ": residual")
                    cases += 1
        # Ties everywhere: exactly k, the lowest indices first.
        c = compress.TopK()
        err = torch.zeros(1000)
        vals, idx = c.select(err, torch.full((1000,), -0.25), 10)
        self.assertTrue(torch.equal(idx, torch.arange(10, dtype=torch.int32)))
        self.assertTrue(bool((vals == -0.25).all()))
        self.assertEqual(int((err == 0).sum()), 10)
        print(f"\n  C top-k equal to torch in {cases} steps")

    def test_other_tensors_take_the_torch_path(self):
        q = compress.TwoBit(0.5)
        x = torch.randn(64, dtype=torch.float64)
        self.assertEqual(q.encode(0, x).numel(), 4)  # converted, torch path
        self.assertIsNone(q._native(torch.randn(8, 8).t())[0])
        self.assertEqual(q.last_path, "torch")
        tiny = compress.TwoBit(math.ulp(0.0))  # 0 as a float32: torch only
        ref = compress.TwoBit(math.ulp(0.0), native=False)
        x = torch.randn(40, generator=torch.Generator().manual_seed(3))
        self.assertIsNone(tiny._encode_native(torch.zeros(40), x, tiny.threshold))
        self.assertTrue(torch.equal(
            tiny.encode(0, x.clone()).view(torch.uint8),
            ref.encode(0, x.clone()).view(torch.uint8)))
        self.assertTrue(torch.equal(tiny.errors[0], ref.errors[0]))


def _ulps(a: float, b: float) -> int:
    """Float32 steps between a and b (positive floats)."""
    return abs(int(np.float32(a).view(np.int32))
               - int(np.float32(b).view(np.int32)))


class NativeAutoTest(unittest.TestCase):
    """2-bit threshold "auto" in one C call (bellows_codec_encode_codes_auto)
    against the torch code: the C means define t and v (float64 sums,
    within an ulp of exact), torch's float32 means are a few ulp away, and
    given the C path's t and v the torch code gives its codes, v word and
    residual bit for bit."""

    SIZES = (1, 2, 15, 16, 17, 33, 1000, 4097, 65537)

    def data(self, n, kind, seed, dtype=torch.float32):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(n, generator=g) * 0.03
        if kind == 1:
            x.zero_()
        elif kind == 2:
            x[::5] = float("nan")
        elif kind == 3:
            x[n // 2] = float("-inf")
        elif kind == 4:
            x[::9] *= 1e4  # a few large values: v far above t
        return x.to(dtype)

    def c_auto(self, err, x):
        """The library call on float32 err and x: (words with v last,
        t)."""
        lib = compress._codec_lib()
        n = x.numel()
        w = compress.TwoBit.words(n)
        out = torch.empty(w + 1)
        t = ctypes.c_float()
        rc = lib.codec_encode_codes_auto(
            2, compress._DTYPE_CODE[x.dtype], x.data_ptr(), err.data_ptr(),
            n, out.data_ptr(), 4 * w, ctypes.addressof(t),
            out.data_ptr() + 4 * w)
        self.assertEqual(rc, 0)
        return out, t.value

    def test_c_auto_gives_the_torch_codes_and_residual_at_its_scale(self):
        lib = compress._codec_lib()
        self.assertIsNotNone(lib, "libbellows has no C codecs")
        self.assertIsNotNone(lib.codec_encode_codes_auto)
        cases, worst = 0, 0
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            for n in self.SIZES:
                for kind in range(5):
                    q = compress.TwoBit("auto")
                    ref = compress.TwoBit("auto", native=False)
                    ec = torch.zeros(n)
                    er = torch.zeros(n)
                    for step in range(3):
                        x = self.data(n, kind, 7 * n + step, dtype)
                        what = f"{dtype} n={n} data {kind} step {step}"
                        # torch's own means, before the residuals move.
                        mag = (er + x.float()).abs()
                        tt = float(mag.mean().clamp_(
                            compress._F32_TINY, compress._F32_MAX)
                            .nan_to_num_(compress._F32_MAX))
                        sel = mag >= tt
                        vt = float(mag[sel].mean()) if sel.any() else tt
                        words, t = self.c_auto(ec, x)
                        v = float(words[-1])
                        # The compressor runs the same call.
                        wq = q.encode(0, x)
                        self.assertEqual(q.last_path, "c", what)
                        self.assertTrue(_same_bits(wq, words), what)
                        self.assertTrue(_same_bits(q.errors[0], ec), what)
                        wr = ref._encode_auto_torch(er, x, scale=(t, v))
                        self.assertTrue(torch.equal(
                            words.view(torch.int32), wr.view(torch.int32)),
                            what + ": codes and v word")
                        self.assertTrue(_same_bits(ec, er),
                                        what + ": residual")
                        if math.isfinite(v):
                            worst = max(worst, _ulps(t, tt), _ulps(v, vt))
                            self.assertLessEqual(_ulps(t, tt), 4, what)
                            self.assertLessEqual(_ulps(v, vt), 4, what)
                        else:  # an infinite gradient: torch's v too
                            self.assertEqual(v, vt, what)
                        cases += 1
        print(f"\n  C auto equal to torch at its t and v in {cases} steps;"
              f" t and v at most {worst} ulp from torch's means")

    def test_auto_clamps_t_for_zero_nan_and_infinite_gradients(self):
        big, tiny = compress._F32_MAX, compress._F32_TINY
        for x, t_want, v_want in (
                (torch.zeros(5), tiny, tiny),
                (torch.tensor([0.1, float("nan"), -0.2]), big, big),
                (torch.tensor([0.1, float("-inf"), 0.2]), big,
                 float("inf"))):
            words, t = self.c_auto(torch.zeros(x.numel()), x)
            self.assertEqual(t, t_want)
            self.assertEqual(float(words[-1]), v_want)
        words, t = self.c_auto(torch.zeros(0), torch.zeros(0))
        self.assertEqual((t, float(words[-1])), (big, big))

    def test_an_older_library_without_the_call_takes_the_torch_means(self):
        lib = compress._codec_lib()
        self.assertIsNotNone(lib, "libbellows has no C codecs")
        saved = lib.codec_encode_codes_auto
        x = self.data(1000, 0, 5)
        ref = compress.TwoBit("auto", native=False)
        want = ref.encode(0, x)
        try:
            lib.codec_encode_codes_auto = None
            q = compress.TwoBit("auto")
            got = q.encode(0, x)
        finally:
            lib.codec_encode_codes_auto = saved
        self.assertTrue(torch.equal(got.view(torch.int32),
                                    want.view(torch.int32)))
        self.assertTrue(_same_bits(q.errors[0], ref.errors[0]))
        self.assertEqual(q.last_path, "c")  # the fixed-threshold C encode


def _distinct(n: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    """n values of distinct magnitudes, random signs, exact in dtype."""
    g = torch.Generator().manual_seed(seed)
    mag = (torch.randperm(n, generator=g) + 1).float() / 64
    sign = torch.randint(0, 2, (n,), generator=g).float() * 2 - 1
    return (mag * sign).to(dtype)


class DispatchTest(unittest.TestCase):
    """Which code bellows.compress runs: the C codecs for CPU float32,
    float16 and bfloat16 gradients, the CUDA twins for CUDA tensors
    with a CUDA-built libbellows, torch otherwise; and that each gives
    the torch code's results."""

    def test_half_precision_gradients_run_the_c_codecs_as_torch(self):
        lib = compress._codec_lib()
        self.assertIsNotNone(lib, "libbellows has no C codecs")
        self.assertIsNotNone(lib.codec_encode_codes_dtype)
        for dtype, n in ((torch.float16, 1500), (torch.bfloat16, 250)):
            for cls in (compress.OneBit, compress.TwoBit):
                c, ref = cls(0.5), cls(0.5, native=False)
                for step in range(3):
                    x = _distinct(n, dtype, step) * (0.02 * (step + 1))
                    wc = c.encode(1, x.clone())
                    wr = ref.encode(1, x.clone())
                    what = f"{cls.name} {dtype} step {step}"
                    self.assertEqual(c.last_path, "c", what)
                    self.assertEqual(ref.last_path, "torch", what)
                    self.assertTrue(torch.equal(wc.view(torch.uint8),
                                                wr.view(torch.uint8)),
                                    what + ": packed codes")
                    self.assertEqual(c.errors[1].dtype, torch.float32)
                    self.assertTrue(_same_bits(c.errors[1], ref.errors[1]),
                                    what + ": residual")
            c, ref = compress.TopK(), compress.TopK(native=False)
            ec, er = torch.zeros(n), torch.zeros(n)
            for step in range(3):
                x = _distinct(n, dtype, 10 + step)
                k = max(1, n // 20)
                vc, ic = c.select(ec, x.clone(), k)
                vr, ir = ref.select(er, x.clone(), k)
                what = f"top-k {dtype} step {step}"
                self.assertEqual(c.last_path, "c", what)
                order = torch.argsort(ir.long())
                self.assertTrue(torch.equal(ic, ir[order]), what + ": set")
                self.assertTrue(_same_bits(vc, vr[order]), what + ": values")
                self.assertTrue(_same_bits(ec, er), what + ": residual")
        self.assertEqual(c.paths["c"], 3)
        self.assertEqual(c.paths["torch"], 0)

    def test_every_thread_count_gives_the_same_codes(self):
        lib = compress._codec_lib()
        self.assertIsNotNone(lib, "libbellows has no C codecs")
        x = torch.randn(200_003, generator=torch.Generator().manual_seed(5))
        want = None
        try:
            for threads in (1, 2, 3, 4):
                self.assertEqual(
                    compress.set_codec_threads(threads, 4096), threads)
                q, t = compress.TwoBit(0.5), compress.TopK()
                codes = q.encode(0, x.clone()).view(torch.uint8)
                vals, idx = t.select(torch.zeros(x.numel()), x, 2000)
                got = (codes, q.errors[0], vals, idx)
                if want is None:
                    want = got
                    continue
                for a, b in zip(got, want):
                    self.assertTrue(_same_bits(a, b), f"{threads} threads")
        finally:
            compress.set_codec_threads(1, 0)
        with self.assertRaises(ValueError):
            compress.set_codec_threads(66)

    def test_cuda_tensors_need_a_cuda_build_and_a_device(self):
        lib = compress._codec_lib()
        self.assertIsNotNone(lib, "libbellows has no C codecs")
        built = lib.codec_cuda_built() == 1
        has = built and lib.codec_cuda_available() == 1
        self.assertEqual(compress._cuda_codecs(lib), has)
        self.assertIsNone(compress._where(lib, torch.empty(4,
                                                           device="meta")))
        self.assertEqual(compress._where(lib, torch.empty(4)), "cpu")
        self.assertIsNone(compress._where(lib, torch.empty(4,
                                          dtype=torch.float64)))
        print(f"\n  libbellows CUDA codecs: built {built}, device {has}")

    @unittest.skipUnless(torch.cuda.is_available(), "no CUDA device here")
    def test_cuda_tensors_run_the_cuda_twins_as_the_cpu_path(self):
        lib = compress._codec_lib()
        if lib is None or not compress._cuda_codecs(lib):
            self.skipTest("libbellows built without CUDA")
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            for cls in (compress.OneBit, compress.TwoBit):
                c, g = cls(0.5), cls(0.5)
                for step in range(3):
                    x = torch.randn(100_003, generator=torch.Generator()
                                    .manual_seed(step)).to(dtype)
                    wc = c.encode(2, x.clone())
                    wg = g.encode(2, x.cuda())
                    self.assertEqual(g.last_path, "cuda")
                    self.assertTrue(torch.equal(
                        wc.view(torch.uint8), wg.cpu().view(torch.uint8)))
                    self.assertTrue(_same_bits(c.errors[2],
                                               g.errors[2].cpu()))
                    self.assertTrue(_same_bits(
                        c.decode(wc, x.numel()),
                        g.decode(wg, x.numel()).cpu()))
            c, g = compress.TopK(), compress.TopK()
            ec, eg = torch.zeros(100_003), torch.zeros(100_003,
                                                       device="cuda")
            for step in range(3):
                x = torch.randn(100_003, generator=torch.Generator()
                                .manual_seed(step)).to(dtype)
                vc, ic = c.select(ec, x.clone(), 1000)
                vg, ig = g.select(eg, x.cuda(), 1000)
                self.assertEqual(g.last_path, "cuda")
                self.assertTrue(torch.equal(ic, ig.cpu()))
                self.assertTrue(_same_bits(vc, vg.cpu()))
                self.assertTrue(_same_bits(ec, eg.cpu()))


class FactoryTest(unittest.TestCase):
    def test_unknown_compressor_is_refused(self):
        with self.assertRaises(ValueError):
            compress.make_compressor("zip")

    def test_every_named_compressor_is_made(self):
        for name in compress.COMPRESSORS:
            self.assertEqual(compress.make_compressor(name).name, name)
        self.assertEqual(compress.make_compressor("2bit", threshold=0.25)
                         .threshold, 0.25)


if __name__ == "__main__":
    unittest.main()
