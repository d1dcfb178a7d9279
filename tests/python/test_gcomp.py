"""test_gcomp - bellows.compress.GComp through libbellows' C codec.

Two workers in threads (the in-process communicator of test_compress):
level 0 gives the exact mean of the ranks' gradients bit for bit; the
fallback table is the same on every rank (built from the summed
histograms); a table from ``table_source`` is used and a table that is no
GComp table falls back with the reason kept; SGD's delta truncates each
value by the level it gives. Then two gloo ranks in processes: a DDP
model trained three steps with GComp and momentum SGD (delta levels) ends
with the same parameters bit for bit on both ranks, close to the
uncompressed run. GComp's CUDA twin: used only where libbellows has it
and sees a device (here its open and levels say ENOTSUP and the CPU codec
runs); on a device, CUDA gradients give the CPU run's bits, counts and
levels (skipped without one).
"""

from __future__ import annotations

import ctypes
import json
import pathlib
import struct
import tempfile
import unittest

import torch
import torch.distributed as dist

import support
from bellows import compress
from test_compress import run_workers

torch.set_num_threads(1)


def lib_or_skip(test):
    lib = compress._codec_lib()
    if lib is None or lib.gcomp_encode is None:
        test.skipTest("libbellows has no GComp")
    return lib


def grads_of(world, n=5000, seed=0):
    out = []
    for w in range(world):
        g = torch.Generator().manual_seed(seed + w)
        x = torch.randn(n, generator=g) * 1e-3
        x[torch.rand(n, generator=g) < 0.3] = 0.0
        out.append(x)
    return out


def truncate(x: torch.Tensor, bits: int) -> torch.Tensor:
    """x with its `bits` low mantissa bits cleared (normal floats)."""
    u = x.view(torch.int32)
    return (u & ~((1 << bits) - 1)).view(torch.float32)


def table_bytes(lib, hist, bits=8, version=1) -> bytes:
    h = torch.tensor(hist, dtype=torch.int64)
    t = ctypes.c_void_p()
    assert lib.gcomp_table_build(h.data_ptr(), bits, version,
                                 ctypes.byref(t)) == 0
    buf = ctypes.create_string_buffer(268)
    assert lib.gcomp_table_write(t, buf, 268) == 0
    lib.gcomp_table_destroy(ctypes.byref(t))
    return buf.raw


class GCompThreadsTest(unittest.TestCase):
    def test_level_0_gives_the_exact_mean_on_every_rank(self):
        lib_or_skip(self)
        grads = grads_of(2)

        def worker(rank, comm):
            q = compress.GComp()
            g = grads[rank].clone()
            counts = q.reduce([compress.Item(0, g, 1.0)], comm)
            return g, counts, q.table_version, list(comm.calls)

        runs = run_workers(2, worker)
        want = (torch.zeros(5000) + grads[0] + grads[1]) / 2
        for g, counts, version, calls in runs:
            self.assertTrue(torch.equal(g.view(torch.int32),
                                        want.view(torch.int32)))
            self.assertEqual(version, 0)  # the fallback table
            self.assertLess(counts.bytes_sent, 0.75 * 4 * 5000)
            # histogram sum, block lengths, blocks
            self.assertEqual([c[0] for c in calls],
                             ["all_reduce", "all_gather", "all_gather"])
        print(f"\n  level 0: exact mean, {runs[0][1].bytes_sent} bytes "
              f"for 5000 floats")

    def test_bf16_and_f16_gradients_go_through_their_own_dtype(self):
        lib_or_skip(self)
        for dtype in (torch.bfloat16, torch.float16):
            grads = [g.to(dtype) for g in grads_of(2, seed=9)]

            def worker(rank, comm):
                q = compress.GComp()
                g = grads[rank].clone()
                counts = q.reduce([compress.Item(0, g, 1.0)], comm)
                return g, counts

            want = ((torch.zeros(5000) + grads[0].float() +
                     grads[1].float()) / 2).to(dtype)
            for g, counts in run_workers(2, worker):
                self.assertEqual(g.dtype, dtype)
                self.assertTrue(torch.equal(g, want), str(dtype))
                self.assertLess(counts.bytes_sent, 2 * 5000)
        print("\n  bfloat16 and float16: exact means at level 0, fewer "
              "bytes than their own size")

    def test_a_table_from_the_source_is_used_and_a_bad_one_falls_back(self):
        lib = lib_or_skip(self)
        grads = grads_of(2, seed=5)
        hist = [0] * 256
        for x in grads[0].tolist():
            hist[(struct.unpack("<I", struct.pack("<f", x))[0] >> 23)
                 & 0xff] += 1
        good = table_bytes(lib, hist, version=42)

        def worker(rank, comm, source):
            q = compress.GComp()
            q.table_source = lambda: source
            g = grads[rank].clone()
            q.reduce([compress.Item(0, g, 1.0)], comm)
            return g, q.table_version, q.table_error

        want = (torch.zeros(5000) + grads[0] + grads[1]) / 2
        for g, version, error in run_workers(
                2, lambda r, c: worker(r, c, good)):
            self.assertTrue(torch.equal(g, want))
            self.assertEqual(version, 42)
            self.assertIsNone(error)
        for g, version, error in run_workers(
                2, lambda r, c: worker(r, c, b"BXT1" + bytes(20))):
            self.assertTrue(torch.equal(g, want))
            self.assertEqual(version, 0)
            self.assertIn("byte 0", error)
        print("\n  a policy's table is used (version 42); 'BXT1...' falls "
              "back to the shared local table")

    def test_sgd_delta_truncates_each_value_by_its_level(self):
        lib_or_skip(self)
        n = 4000
        # theta = 1, lr = 0.1: delta = 10 / g. |g| ~ 2^-22: delta > 2^18,
        # level 3 (18 bits); |g| ~ 2^-10: delta ~ 10240, level 2 (12
        # bits); |g| ~ 2^-2: delta ~ 40, level 0.
        scales = [2.0 ** -22, 2.0 ** -10, 2.0 ** -2]
        bits = [18, 12, 0]
        grads = []
        for w in range(2):
            g = torch.Generator().manual_seed(70 + w)
            x = torch.rand(n, generator=g) + 1.0
            for k, s in enumerate(scales):
                x[k::3] *= s
            grads.append(x)
        param = torch.nn.Parameter(torch.ones(n))
        opt = torch.optim.SGD([param], lr=0.1)

        def worker(rank, comm):
            q = compress.GComp()
            q.optimizer, q.params = opt, [param]
            g = grads[rank].clone()
            q.reduce([compress.Item(0, g, 1.0)], comm)
            return g

        want = torch.zeros(n)
        for w in range(2):
            t = grads[w].clone()
            for k, b in enumerate(bits):
                t[k::3] = truncate(grads[w][k::3].contiguous(), b)
            want += t
        want /= 2
        for g in run_workers(2, worker):
            self.assertTrue(torch.equal(g, want))
        print("\n  SGD delta: levels 3, 2 and 0 truncate 18, 12 and 0 bits")


class GCompCudaTest(unittest.TestCase):
    def test_cuda_gradients_use_the_twin_only_with_a_device(self):
        lib = lib_or_skip(self)
        self.assertIsNotNone(lib.gcomp_cuda_open, "no bellows_gcomp_cuda_*")
        has = lib.gcomp_cuda_available() == 1
        self.assertEqual(compress._gcomp_cuda(lib), has)
        table = ctypes.c_void_p()
        hist = torch.zeros(256, dtype=torch.int64)
        hist[120:130] = 10
        self.assertEqual(lib.gcomp_table_build(hist.data_ptr(), 8, 4,
                                               ctypes.byref(table)), 0)
        ctx = ctypes.c_void_p()
        rc = lib.gcomp_cuda_open(table, None, ctypes.byref(ctx))
        if has:
            self.assertEqual(rc, 0)
            lib.gcomp_cuda_close(ctypes.byref(ctx))
        else:
            # Without the twin or a device: ENOTSUP, nothing opened, and
            # the levels are not written.
            self.assertEqual(rc, -18)
            g = torch.full((64,), 1e-3)
            theta = torch.ones(64)
            levels = torch.full((64,), 9, dtype=torch.uint8)
            o = compress._GCompOptimizer(kind=compress._GCOMP_SGD, lr=0.1,
                                         param=theta.data_ptr())
            self.assertEqual(lib.gcomp_levels_cuda(
                ctypes.byref(o), 0, g.data_ptr(), 64, 3, levels.data_ptr(),
                None), -18)
            self.assertTrue(bool((levels == 9).all()))
        self.assertFalse(ctx)
        lib.gcomp_table_destroy(ctypes.byref(table))
        # CPU gradients (and CUDA ones without the twin) take the C codec.
        grads = grads_of(2, n=300)

        def worker(rank, comm):
            q = compress.GComp()
            q.reduce([compress.Item(0, grads[rank].clone(), 1.0)], comm)
            return q

        for q in run_workers(2, worker):
            self.assertEqual(q.last_path, "c")
            self.assertEqual(q.cuda_layers, 0)
        self.assertIsNone(compress.GComp()._cuda_device(
            lib, [compress.Item(0, torch.zeros(4, device="meta"), 1.0)]))
        print(f"\n  libbellows GComp CUDA twin: device {has}")

    @unittest.skipUnless(torch.cuda.is_available(), "no CUDA device here")
    def test_cuda_gradients_run_the_twin_as_the_cpu_codec(self):
        lib = lib_or_skip(self)
        if not compress._gcomp_cuda(lib):
            self.skipTest("libbellows built without GComp's CUDA twin")
        n = 3 * 8192 + 77
        grads = grads_of(2, n=n, seed=31)
        dtypes = (torch.float32, torch.float16, torch.bfloat16)

        def worker(rank, comm, dev, momentum):
            # SGD with a momentum buffer, so the delta levels read the
            # optimizer's state on the gradients' device. The state and
            # gradients are made on the CPU and copied, the same bits on
            # both devices.
            param = torch.nn.Parameter(torch.linspace(-1, 1, n).to(dev))
            opt = torch.optim.SGD([param], lr=0.1, momentum=momentum)
            if momentum:
                opt.state[param]["momentum_buffer"] = \
                    torch.linspace(-1e-3, 2e-3, n).to(dev)
            q = compress.GComp()
            q.optimizer, q.params = opt, [param]
            outs = []
            for k, dt in enumerate(dtypes):
                mine = [(grads[rank] * (k + 1)).to(dt).to(dev),
                        grads[1 - rank].to(dt).to(dev)]
                q.reduce([compress.Item(0, mine[0], 1.0),
                          compress.Item(1, mine[1], 1.0)], comm)
                outs.append([t.cpu() for t in mine])
            return outs, q.last_path, q.cuda_layers, q.bytes, q.exp_bits

        for momentum in (0.0, 0.9):
            gpu = run_workers(2, lambda r, c: worker(r, c, "cuda", momentum))
            cpu = run_workers(2, lambda r, c: worker(r, c, "cpu", momentum))
            for rank in range(2):
                og, path, layers, nbytes, ebits = gpu[rank]
                oc, cpath, clayers, cbytes, cebits = cpu[rank]
                self.assertEqual((path, layers), ("cuda", 6))
                self.assertEqual((cpath, clayers), ("c", 0))
                self.assertEqual((nbytes, ebits), (cbytes, cebits))
                for k in range(len(dtypes)):
                    for a, b in zip(og[k], oc[k]):
                        self.assertTrue(torch.equal(a, b),
                                        f"{dtypes[k]} momentum {momentum}")
        print("\n  CUDA twin: the CPU codec's bits, bytes and exponent bits")


WORLD = 2


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 10))


def batch(step, rank):
    g = torch.Generator().manual_seed(100 * step + rank)
    return (torch.randn(16, 32, generator=g),
            torch.randint(0, 10, (16,), generator=g))


def rank_main(rank, port, out_dir):
    import bellows.compress as compress
    from bellows.torch import CompressionHook

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=WORLD)
    model, ref = make_model(), make_model()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    params = list(model.parameters())
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9,
                          weight_decay=1e-4)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9,
                              weight_decay=1e-4)
    comp = compress.GComp()
    comp.optimizer, comp.params = opt, params
    hook = CompressionHook(params, comp, compress.ProcessGroupComm())
    hook.register(ddp)
    hook.levels = [1.0] * len(params)
    sent = raw = 0
    for step in range(3):
        hook.reset()
        opt.zero_grad()
        x, y = batch(step, rank)
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        ref_opt.zero_grad()
        for w in range(WORLD):
            xw, yw = batch(step, w)
            (torch.nn.functional.cross_entropy(ref(xw), yw) / WORLD) \
                .backward()
        opt.step()
        ref_opt.step()
        sent += hook.counts.bytes_sent
        raw += 4 * hook.counts.floats_raw
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    diff = max((p - q).abs().max().item()
               for p, q in zip(params, ref.parameters()))
    pathlib.Path(out_dir, f"{rank}.json").write_text(json.dumps({
        "bits": flat.view(torch.int32).tolist(), "diff": diff,
        "sent": sent, "raw": raw, "version": comp.table_version}))
    # DDP's reducer must go before its process group.
    del ddp, hook, opt, comp
    support.end_group()


class GCompGlooTest(unittest.TestCase):
    def test_two_gloo_ranks_train_to_the_same_parameters(self):
        lib_or_skip(self)
        with tempfile.TemporaryDirectory() as out:
            support.spawn(rank_main, (support.free_port(), out), WORLD,
                          timeout=120)
            reps = [json.loads(pathlib.Path(out, f"{r}.json").read_text())
                    for r in range(WORLD)]
        self.assertEqual(reps[0]["bits"], reps[1]["bits"])
        for rep in reps:
            self.assertLess(rep["diff"], 1e-4)
            self.assertLess(rep["sent"], rep["raw"])
            self.assertEqual(rep["version"], 0)
        print(f"\n  2 gloo ranks, 3 steps, momentum SGD delta levels: same "
              f"parameters bit for bit, {reps[0]['diff']:.2g} from the "
              f"uncompressed run, {reps[0]['sent']} of {reps[0]['raw']} "
              "bytes sent")


if __name__ == "__main__":
    unittest.main()
