"""test_activations - COMET's activation compression (bellows.activations).

Real torch, no mocks: the quantiser keeps every element of random and
adversarial tensors within the bound and stores the codes in the narrowest
integer type; COMET's zero filter leaves exact zeros; wrapped into a small
CNN only the convolutions' inputs change, so every gradient but the
convolution weights' is bit-identical to the uncompressed run and those
differ by no more than the bound allows (and by the theory's standard
deviation); the bytes held for backward shrink by the expected factor,
and the process's resident memory with them; L-bar and R come out right on
hand-built cases and reach the agent; two DDP ranks on gloo train alike.
"""

from __future__ import annotations

import ctypes
import gc
import json
import math
import pathlib
import tempfile
import unittest
import warnings

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import bellows
import bellows.activations as act
import bellows.torch
import support


def within(test, x, eb):
    """Asserts |x - unpack(pack(x, eb))| <= eb everywhere (exactly, in
    float64 on the float values) and returns the pack."""
    p = act.pack(x, eb)
    r = act.unpack(p)
    test.assertEqual(r.shape, x.shape)
    test.assertEqual(r.dtype, x.dtype)
    err = (x.double() - r.double()).abs().max().item() if x.numel() else 0
    test.assertLessEqual(err, eb, f"mode {p.mode}, eb {eb}")
    return p


class QuantiserTest(unittest.TestCase):
    def test_every_reconstructed_element_is_within_the_bound(self):
        g = torch.Generator().manual_seed(1)
        cases = {
            "normal": torch.randn(10000, generator=g),
            "relu": torch.relu(torch.randn(10000, generator=g)),
            "negative": -torch.rand(5000, generator=g) * 3,
            "zeros": torch.zeros(777),
            "huge": torch.randn(1000, generator=g) * 1e4,
            "tiny": torch.randn(1000, generator=g) * 1e-7,
            "mixed": torch.randn(4000, generator=g) *
            10.0 ** torch.randint(-8, 5, (4000,), generator=g).float(),
            "float64": torch.randn(2000, generator=g, dtype=torch.float64),
            "float16": torch.randn(2000, generator=g).half(),
        }
        for name, x in cases.items():
            for eb in (1e-6, 1e-4, 1e-3, 0.01, 0.3, 2.0):
                with self.subTest(name=name, eb=eb):
                    within(self, x, eb)

    def test_midpoints_between_levels_stay_within_the_bound(self):
        # x exactly halfway between two reconstruction levels, at
        # magnitudes where float32 rounding of the reconstruction matters.
        for eb in (1e-3, 0.05, 0.37):
            k = torch.arange(-20000, 20000, 37, dtype=torch.float64)
            x = ((k + 0.5) * 2 * eb).float()
            x = torch.cat([x, torch.nextafter(x, x + 1),
                           torch.nextafter(x, x - 1)])
            p = within(self, x, eb)
            self.assertNotEqual(p.mode, "raw")

    def test_a_bound_of_zero_stores_the_tensor_itself(self):
        x = torch.randn(3, 4)
        p = act.pack(x, 0.0)
        self.assertEqual(p.mode, "raw")
        self.assertIs(act.unpack(p), x)
        self.assertEqual(p.stored_bytes, p.raw_bytes)
        self.assertEqual(p.raw_bytes, 48)

    def test_non_finite_values_are_stored_raw(self):
        x = torch.tensor([1.0, float("nan"), 2.0, float("inf")])
        p = act.pack(x, 0.1)
        self.assertEqual(p.mode, "raw")
        self.assertTrue(torch.equal(act.unpack(p).nan_to_num(),
                                    x.nan_to_num()))

    def test_a_bad_bound_is_a_value_error(self):
        for eb in (-1e-3, float("nan"), float("inf")):
            with self.assertRaises(ValueError):
                act.pack(torch.ones(3), eb)

    def test_the_zero_filter_leaves_no_value_within_the_bound_of_zero(self):
        g = torch.Generator().manual_seed(2)
        x = torch.relu(torch.randn(50000, generator=g))
        x[::7] = 0.0
        eb = 0.05
        p = act.pack(x, eb)
        r = act.unpack(p)
        self.assertTrue(bool((r[::7] == 0).all()))  # zeros stay exactly 0
        small = r[(r != 0)].abs()
        self.assertGreater(small.min().item(), eb)  # nothing in (0, eb]
        # Inputs within the bound of zero come back exactly 0.
        self.assertTrue(bool((r[x.abs() <= 0.9 * eb] == 0).all()))
        self.assertAlmostEqual(p.nonzero, (r != 0).double().mean().item())

    def test_codes_take_the_narrowest_integer_type(self):
        eb = 0.5  # step ~1: codes ~ round(x)
        for top, dtype in ((100.0, torch.int8), (127.0, torch.int8),
                           (128.0, torch.int16), (30000.0, torch.int16),
                           (40000.0, torch.int32)):
            x = torch.linspace(-top, top, 4001, dtype=torch.float64)
            # int32 codes are no smaller than float32: use float64 there.
            p = within(self, x, eb)
            self.assertEqual(p.code_dtype, dtype, f"range {top}")
        # Out of int32's range, or no smaller than the input: raw.
        self.assertEqual(act.pack(torch.tensor([3e9, 1.0],
                                               dtype=torch.float64),
                                  0.5).mode, "raw")
        self.assertEqual(act.pack(torch.linspace(-4e4, 4e4, 1000),
                                  0.5).mode, "raw")

    def test_mostly_zero_tensors_store_a_bitmask_and_the_non_zeros(self):
        x = torch.zeros(10001)
        x[::10] = torch.linspace(1, 5, 1001)
        p = within(self, x, 0.01)
        self.assertEqual(p.mode, "sparse")
        self.assertEqual(p.code_dtype, torch.int16)
        self.assertEqual(p.stored_bytes, 1251 + 1001 * 2)
        self.assertAlmostEqual(p.nonzero, 1001 / 10001)
        dense = act.pack(torch.linspace(1, 5, 1001), 0.01)
        self.assertEqual(dense.mode, "dense")
        self.assertEqual(dense.stored_bytes, 1001 * 2)


class Net(nn.Module):
    """Two convolutions (the second's input a pooled ReLU output, held by
    nothing else), batch norm, an in-place ReLU, a linear layer."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3)
        self.fc = nn.Linear(16 * 6 * 6, 5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv1(x))), 2)
        x = torch.relu_(self.conv2(x))
        return self.fc(x.flatten(1))


def make_net(seed=0):
    torch.manual_seed(seed)
    return Net()


def data(n=16, seed=3):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, 3, 16, 16, generator=g),
            torch.randint(0, 5, (n,), generator=g))


def grads(model, x, y):
    model.zero_grad()
    F.cross_entropy(model(x), y).backward()
    return {n: p.grad.clone() for n, p in model.named_parameters()}


class ModelTest(unittest.TestCase):
    def test_only_the_convolution_weight_gradients_change(self):
        x, y = data()
        ref = grads(make_net(), x, y)
        model = make_net()
        eb = 0.02
        captured = {}

        def keep(name):
            def hook(g):
                captured[name] = g.detach().clone()
            return hook

        with act.attach(model, bounds=eb) as comp:
            model.zero_grad()
            out = model(x)
            self.assertGreater(comp.held_bytes, 0)
            F.cross_entropy(out, y).backward()
            got = {n: p.grad.clone() for n, p in model.named_parameters()}
        for name in ref:
            if name.endswith("conv1.weight") or name.endswith("conv2.weight"):
                continue
            self.assertTrue(torch.equal(ref[name], got[name]), name)
        # Within the theory's scale: worst case eb * sum |dY| per output
        # channel, and about (eb/sqrt 3) sqrt(R sum dY^2) in RMS (COMET
        # section 4, uniform errors on the non-zero inputs).
        model2 = make_net()
        outs = {}
        model2.conv1.register_forward_hook(
            lambda m, i, o: outs.__setitem__("conv1", (i[0], o)))
        model2.conv2.register_forward_hook(
            lambda m, i, o: outs.__setitem__("conv2", (i[0], o)))
        model2.zero_grad()
        loss = F.cross_entropy(model2(x), y)
        douts = torch.autograd.grad(loss, [outs["conv1"][1],
                                           outs["conv2"][1]])
        for (name, (inp, _)), dy in zip(outs.items(), douts):
            err = (got[f"{name}.weight"] - ref[f"{name}.weight"]).double()
            worst = eb * dy.abs().sum((0, 2, 3)).double()
            self.assertTrue(bool((err.abs().amax((1, 2, 3))
                                  <= worst * (1 + 1e-6) + 1e-9).all()), name)
            r = (inp != 0).double().mean().item()
            theory = eb / math.sqrt(3) * math.sqrt(
                r * dy.double().pow(2).sum().item() / dy.shape[1])
            rms = err.pow(2).mean().sqrt().item()
            print(f"\n  {name}: dW error RMS {rms:.3g}, theory {theory:.3g}, "
                  f"R {r:.3f}", end="")
            self.assertGreater(rms, 0.5 * theory, name)
            self.assertLess(rms, 2.0 * theory, name)
        print()

    def test_memory_held_for_backward_shrinks_by_the_expected_factor(self):
        x, y = data()
        model = make_net()
        comp = act.attach(model, bounds={"conv1": 0.05, "conv2": 0.05})
        out = model(x)
        # conv1: a dense normal input, |q| <= ~45: int8, 1/4 of float32.
        # conv2: a pooled ReLU output, few zeros: int8 too (a bitmask
        # and the non-zeros if that is smaller).
        raw1 = 16 * 3 * 16 * 16 * 4
        raw2 = 16 * 8 * 8 * 8 * 4
        self.assertEqual(comp.held_raw_bytes, raw1 + raw2)
        F.cross_entropy(out, y).backward()
        c1, c2 = comp.last[0], comp.last[4]
        self.assertEqual((c1.mode, c1.code_dtype, c1.stored_bytes),
                         ("dense", "int8", raw1 // 4))
        n2 = raw2 // 4
        self.assertEqual(c2.code_dtype, "int8")
        self.assertEqual(c2.stored_bytes,
                         min(n2, n2 // 8 + round(c2.nonzero * n2)))
        self.assertEqual(comp.peak_bytes, c1.stored_bytes + c2.stored_bytes)
        ratio = (raw1 + raw2) / comp.peak_bytes
        print(f"\n  held for backward {comp.peak_bytes} B of {raw1 + raw2} "
              f"B raw ({ratio:.1f}x); conv2 R {c2.nonzero:.3f}")
        self.assertGreaterEqual(ratio, 4.0)
        # Backward freed the graph: nothing is held any more.
        del out
        gc.collect()
        self.assertEqual(comp.held_bytes, 0)
        self.assertEqual(comp.held_raw_bytes, 0)
        comp.detach()

    def test_saved_bytes_count_every_saved_tensor_once(self):
        # conv1 -> ReLU -> conv2 -> max pool -> flatten -> linear, N 4,
        # C 3, 8x8 inputs. What torch saves for backward:
        #   conv1: its input x (4x1x8x8 float32) and its weight;
        #   ReLU: its output r (4x3x8x8 float32), which conv2 saves too
        #     (its input: the same storage, counted once);
        #   max pool: its input, conv2's output (4x3x8x8 float32), and
        #     the indices (4x3x4x4 int64);
        #   linear: its input, the pool output (4x48 float32, the
        #     flatten is a view) and the weight (transposed).
        # The weights and biases are parameters: not counted.
        torch.manual_seed(0)
        n, c = 4, 3
        model = nn.Sequential(nn.Conv2d(1, c, 3, padding=1), nn.ReLU(),
                              nn.Conv2d(c, c, 3, padding=1),
                              nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(c * 16, 5))
        x = torch.randn(n, 1, 8, 8)
        x_b, r_b = n * 64 * 4, n * c * 64 * 4
        other = n * c * 64 * 4 + n * c * 16 * 8 + n * c * 16 * 4
        with act.attach(model, bounds=0.0) as comp:
            self.assertEqual(comp.saved_bytes, 0)
            out = model(x)
            self.assertEqual(comp.saved_bytes, x_b + r_b + other)
            out.sum().backward()
            # Compressed: conv1's input as int8 codes (a dense normal
            # input, |q| <= 127 at eb 0.05), conv2's codes held beside
            # the ReLU output it cannot free.
            comp.set_bounds(0.05)
            out = model(x)
            out.sum().backward()
            c1, c2 = comp.last[0], comp.last[2]
            self.assertEqual((c1.mode, c1.code_dtype, c1.stored_bytes),
                             ("dense", "int8", n * 64))
            self.assertNotEqual(c2.mode, "raw")
            self.assertEqual(comp.saved_bytes,
                             n * 64 + r_b + c2.stored_bytes + other)
            # Without gradients nothing is saved or measured.
            with torch.no_grad():
                model(torch.randn(2 * n, 1, 8, 8))
            self.assertEqual(comp.saved_bytes,
                             n * 64 + r_b + c2.stored_bytes + other)
            # Twice the batch, twice the bytes (raw: no code-size noise).
            comp.set_bounds(0.0)
            model(torch.randn(2 * n, 1, 8, 8)).sum().backward()
            self.assertEqual(comp.saved_bytes, 2 * (x_b + r_b + other))
            f = act.memory_fields(1 << 30, compressor=comp)
            self.assertEqual(f["saved_bytes"], 2 * (x_b + r_b + other))
        self.assertNotIn("forward", model.__dict__)

    def test_resident_memory_really_shrinks(self):
        # A 64 MiB input held for backward raw, against int8 codes of it.
        conv = nn.Conv2d(16, 1, 1)

        def forward():
            g = torch.Generator().manual_seed(4)
            x = torch.randn(4, 16, 512, 512, generator=g)
            return conv(x)  # x goes; only what backward holds remains

        # Memory glibc keeps for reuse (the pack's chunk buffers) is not
        # held for backward: hand it back before each reading.
        libc = ctypes.CDLL("libc.so.6")

        def rss():
            gc.collect()
            libc.malloc_trim(0)
            return act.host_memory_used()

        def growth(bound):
            before = rss()
            if bound is None:
                y = forward()
            else:
                with act.attach(conv, bounds=bound):
                    y = forward()
            grown = rss() - before
            y.sum().backward()
            del y
            gc.collect()
            return grown

        raw = growth(None)
        comp = growth(0.05)
        print(f"\n  resident memory held: raw {raw / 2**20:.1f} MiB, "
              f"compressed {comp / 2**20:.1f} MiB")
        self.assertGreater(raw, 60 * 2**20)
        self.assertLess(comp, 0.5 * raw)

    def test_statistics_of_a_hand_built_case(self):
        conv = nn.Conv2d(1, 2, 1, bias=False)
        # 2 samples x 1 channel x 4 x 4: 10 of 32 elements non-zero, on
        # reconstruction levels (multiples of 0.25: exact at eb 0.125).
        x = torch.zeros(2, 1, 4, 4)
        x.view(-1)[[0, 3, 5, 8, 13, 17, 20, 26, 30, 31]] = torch.tensor(
            [0.25, -1.0, 2.0, 0.5, -0.75, 1.25, 3.0, -2.5, 0.25, 1.0])
        with act.attach(conv, bounds=0.125) as comp:
            y = conv(x)
            g = torch.zeros_like(y)  # grad of the output, [2, 2, 4, 4]
            g[0, 0, 1, 2], g[0, 1, 3, 3] = -0.5, 0.2  # sample 0: max 0.5
            g[1, 1, 0, 0], g[1, 0, 2, 1] = 0.1, -0.3  # sample 1: max 0.3
            y.backward(g)
        s = comp.last[0]
        self.assertEqual(s.layer, 0)
        self.assertAlmostEqual(s.lbar, (0.5 + 0.3) / 2, places=7)
        self.assertEqual(s.nonzero, 10 / 32)
        self.assertEqual(s.raw_bytes, 128)
        self.assertEqual(s.eb, 0.125)
        # 32 int8 codes (dense) vs 4 mask bytes + 10 codes: sparse, 14 B.
        self.assertEqual((s.mode, s.code_dtype, s.stored_bytes),
                         ("sparse", "int8", 14))
        # Exact inputs give the exact weight gradient.
        self.assertTrue(torch.allclose(
            conv.weight.grad.view(2), (g * x).sum((0, 2, 3)), atol=1e-6))

    def test_statistics_are_taken_every_k_forwards(self):
        model = make_net()
        x, y = data(4)
        with act.attach(model, bounds=0.01, every=3) as comp:
            measured = []
            for _ in range(7):
                comp.last.clear()
                F.cross_entropy(model(x), y).backward()
                measured.append(sorted(comp.last))
        self.assertEqual(measured, [[0, 4], [], [], [0, 4], [], [], [0, 4]])

    def test_layers_can_be_chosen_and_detach_restores_the_model(self):
        model = make_net()
        x, y = data(4)
        ref = model(x)
        comp = act.attach(model, layers=["conv2"], bounds=0.5)
        self.assertEqual(comp.layers, {"conv2": 4})
        self.assertEqual(comp.bounds, {4: 0.5})
        out = model(x)
        self.assertTrue(torch.equal(out, ref))  # forward is untouched
        F.cross_entropy(out, y).backward()
        self.assertEqual(sorted(comp.last), [4])
        comp.detach()
        self.assertNotIn("forward", vars(model.conv2))
        with self.assertRaises(ValueError):
            act.attach(model, layers=["fc"])
        with self.assertRaises(ValueError):
            act.attach(model, layers=[model.fc])
        with self.assertRaises(ValueError):
            act.attach(model, bounds={"conv1": -1.0})
        # 1x1 convolutions can be left out (COMET: not worth it).
        net1 = nn.Sequential(nn.Conv2d(2, 2, 1), nn.Conv2d(2, 2, 3))
        self.assertEqual(act.attach(net1, min_kernel=2).layers, {"1": 2})

    def test_without_gradients_nothing_is_packed(self):
        model = make_net()
        x, _ = data(4)
        with act.attach(model, bounds=0.1) as comp:
            with torch.no_grad():
                model(x)
            self.assertEqual(comp.peak_bytes, 0)
            self.assertEqual(comp.last, {})

    def test_the_layer_table_flags_convolution_weights_for_momentum(self):
        table = act.layer_table(make_net())
        flags = {lay.name: lay.flags for lay in table}
        self.assertEqual([lay.name for lay in table],
                         [n for n, _ in make_net().named_parameters()])
        for name, f in flags.items():
            want = bellows.LAYER_MOMENTUM if name in (
                "conv1.weight", "conv2.weight") else 0
            self.assertEqual(f, want, name)


def offline_agent(layers):
    return bellows.Agent("py-act", 0, 1, layers,
                         control="ipc:///nonexistent/bellows-control",
                         publish="ipc:///nonexistent/bellows-publish",
                         decision_timeout_ms=50)


class AgentTest(unittest.TestCase):
    def test_statistics_reach_the_agent_in_the_step(self):
        model = make_net()
        x, y = data(8)
        with offline_agent(act.layer_table(model)) as agent:
            comp = act.attach(model, agent)
            self.assertEqual(comp.layers, {"conv1": 0, "conv2": 4})
            # No decision yet: bound 0, inputs kept raw.
            lbars = []
            for _ in range(3):
                agent.step_begin()
                F.cross_entropy(model(x), y).backward()
                agent.step_end(batch_size=8)
                lbars.append(comp.last[4].lbar)
            self.assertEqual(comp.bounds, {0: 0.0, 4: 0.0})
            self.assertEqual(comp.reported, 6)
            self.assertEqual(comp.last[4].mode, "raw")
            agent.window_end()
            s = agent.window_stats(4)
            self.assertEqual(s.act_steps, 3)
            self.assertAlmostEqual(s.act_lbar, sum(lbars) / 3, places=6)
            self.assertAlmostEqual(s.act_nonzero, comp.last[4].nonzero,
                                   places=6)
            self.assertEqual(s.act_bytes, comp.last[4].stored_bytes)
            self.assertEqual(s.act_raw_bytes, 8 * 8 * 8 * 8 * 4)
            # Outside a step nothing is reported (the agent would refuse).
            F.cross_entropy(model(x), y).backward()
            self.assertEqual(comp.reported, 6)
            comp.detach()

    def test_a_table_without_momentum_is_warned_about(self):
        model = make_net()
        table = bellows.torch.layer_table(model)
        with offline_agent(table) as agent:
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                act.attach(model, agent).detach()
            self.assertEqual(len(w), 1)
            self.assertIn("LAYER_MOMENTUM", str(w[0].message))
            self.assertIn("conv1, conv2", str(w[0].message))


COMET = """\
daemon: {apply_lag: 1, heartbeat_ms: 200}
jobs:
  - match: "*"
    policies:
      - type: comet
        params: {eb_min: 1.0e-4, eb_max: 0.5, interval_steps: 2,
                 min_interval_steps: 1}
"""


class DaemonTest(unittest.TestCase):
    def test_a_live_comet_policy_sets_the_bounds_the_convolutions_use(self):
        model = make_net()
        params = list(model.parameters())
        opt = torch.optim.SGD(params, lr=0.05, momentum=0.9)
        x, y = data(8)
        with support.Daemon(COMET) as d, bellows.Agent(
                "py-act-comet", 0, 1, act.layer_table(model),
                control=d.control, publish=d.publish, window_steps=2,
                decision_timeout_ms=10000) as agent:
            comp = act.attach(model, agent)
            used = []
            for _ in range(40):
                agent.step_begin()
                opt.zero_grad()
                F.cross_entropy(model(x), y).backward()
                for i, p in enumerate(params):
                    agent.observe(i, p.grad)
                opt.step()
                agent.step_end(lr=0.05, batch_size=8)
                used.append((agent.decision(), dict(comp.last)))
                if all(s.mode != "raw" for s in comp.last.values()):
                    break
            d_last, last = used[-1]
            print(f"\n  {len(used)} steps; bounds {comp.bounds}; "
                  f"{d_last.reason}")
            for layer in (0, 4):
                eb = d_last.error_bounds[layer]
                self.assertGreaterEqual(eb, 1e-4)
                self.assertLessEqual(eb, 0.5)
                # The bound of the decision in force is the one packed.
                self.assertEqual(comp.bounds[layer], eb)
                self.assertEqual(last[layer].eb, eb)
                self.assertNotEqual(last[layer].mode, "raw")
            self.assertEqual(agent.window_stats(4).act_steps, 2)
            self.assertGreater(agent.window_stats(4).momentum_abs_mean, 0)
            comp.detach()


WORLD = 2


def ddp_rank(rank, port, out_dir):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=WORLD)
    report = {}
    for mode in ("raw", "comet"):
        model = make_net()
        ddp = nn.parallel.DistributedDataParallel(model)
        comp = act.attach(ddp, bounds=0.02) if mode == "comet" else None
        x, y = data(8, seed=10 + rank)
        ddp.zero_grad()
        F.cross_entropy(ddp(x), y).backward()
        report[mode] = {n: p.grad.flatten().tolist()
                        for n, p in model.named_parameters()}
        if comp is not None:
            report["packed"] = sorted(comp.last)
            comp.detach()
        del ddp
    # Through bellows.torch: the TorchAgent's table and decision (no
    # bellowsd: bounds 0, inputs kept raw, statistics still reported).
    model = make_net()
    ddp = nn.parallel.DistributedDataParallel(model)
    ta = bellows.torch.attach(
        ddp, "py-act-ddp", control="ipc:///nonexistent/bellows-control",
        publish="ipc:///nonexistent/bellows-publish",
        layer_flags=bellows.LAYER_MOMENTUM, decision_timeout_ms=50)
    comp = act.attach(ddp, ta)
    x, y = data(8, seed=10 + rank)
    ta.step_begin()
    F.cross_entropy(ddp(x), y).backward()
    ta.step_end(lr=0.1, batch_size=8, **act.memory_fields(2**30))
    ta.window_end()
    report["torchagent"] = {"layers": comp.layers,
                            "reported": comp.reported,
                            "act_steps": ta.agent.window_stats(4).act_steps,
                            "mode": comp.last[4].mode}
    comp.detach()
    ta.close()
    del ddp, ta
    support.end_group()
    pathlib.Path(out_dir, f"{rank}.json").write_text(json.dumps(report))


class DDPTest(unittest.TestCase):
    def test_two_gloo_ranks_train_alike_with_compressed_activations(self):
        with tempfile.TemporaryDirectory() as out:
            support.spawn(ddp_rank, (support.free_port(), out), WORLD,
                          timeout=120)
            reps = [json.loads(pathlib.Path(out, f"{r}.json").read_text())
                    for r in range(WORLD)]
        for rep in reps:
            self.assertEqual(rep["packed"], [0, 4])
            self.assertEqual(rep["torchagent"], {
                "layers": {"conv1": 0, "conv2": 4}, "reported": 2,
                "act_steps": 1, "mode": "raw"})
        # DDP averaged the same gradients on both ranks.
        self.assertEqual(reps[0]["comet"], reps[1]["comet"])
        for name, raw in reps[0]["raw"].items():
            a, b = torch.tensor(raw), torch.tensor(reps[0]["comet"][name])
            if name.endswith("conv1.weight") or name.endswith("conv2.weight"):
                diff = (a - b).abs().max().item()
                self.assertGreater(diff, 0.0, name)
                self.assertLess(diff, 0.05 * a.abs().max().item(), name)
            else:
                self.assertTrue(torch.allclose(a, b, rtol=0, atol=1e-7),
                                name)


if __name__ == "__main__":
    unittest.main()
