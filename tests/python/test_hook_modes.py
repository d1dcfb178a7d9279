"""test_hook_modes - bellows.torch sends each layer as bellowsd decides.

Two gloo ranks train a small CNN in DistributedDataParallel (one bucket
per tensor) through bellows.torch.attach with 2-bit quantisation, against
a real bellowsd whose YAML combines `fixed` (level 1 on every matrix) with
a policy owning the size threshold or the compression gate:

- `slimgc`: a calibration (every compressible layer compressed on even
  steps, raw on odd ones, on both ranks alike), then the size threshold
  it picked (layers below it raw);
- `perfmodel`, with a codec made deliberately slow (a sleep in encode):
  the gate goes off and every layer is sent raw.

At every step each rank checks that every layer was sent as the contract
of Agent.send_mode implies, computed here from the decision in force
(levels, size_threshold, compression_off, apply_step + calibrate_steps),
and that the reduced gradients equal a reference run over every rank's
local gradient with those modes (raw layers: the plain average, with the
flushed residual; compressed ones: test_compress's value-by-value 2-bit).
Both ranks must have used the same modes at every step; the window
statistics show raw and compressed sends timed (comm_raw_n, comm_comp_n);
backward and codec times are measured. A policy this bellowsd does not
know skips its test.
"""

from __future__ import annotations

import json
import math
import pathlib
import subprocess
import tempfile
import time
import unittest

import torch
import torch.distributed as dist

import support
from test_compress import ref_quantise

WORLD = 2
WINDOW = 4
THRESHOLD = 0.05  # 2-bit value threshold (the gradients here are small)

SLIMGC = """\
daemon:
  apply_lag: 1
  window_timeout_ms: 20000
  rank_timeout_ms: 20000
  heartbeat_ms: 200
jobs:
  - match: "*"
    policies:
      - type: fixed
        layers: {min_ndim: 2}
        params: {level: 1}
      - type: slimgc
        params: {calibration_steps: 8, min_samples: 1}
"""

PERFMODEL = """\
daemon:
  apply_lag: 1
  window_timeout_ms: 20000
  rank_timeout_ms: 20000
  heartbeat_ms: 200
jobs:
  - match: "*"
    policies:
      - type: fixed
        layers: {min_ndim: 2}
        params: {level: 1}
      - type: perfmodel
        params: {bucket_bytes: 0, overlap: false, fit_windows: 4,
                 hold_windows: 1}
"""
# fit_windows 4: 16 steps, so that every window from step 16 on has one
# of the hook's timed steps (time_every 16) behind its prediction; with 2
# only every fourth window predicted, and a loaded machine could make
# all four say compression pays.


class Net(torch.nn.Module):
    """A small CNN (conv.w, conv.b, fc1.w, fc1.b, fc2.w, fc2.b) and a 1 MB
    vector that only adds zero to the output: a large raw tensor, so that
    the collectives' times span sizes enough for perfmodel's fit."""

    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(2, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
            torch.nn.Linear(64, 16), torch.nn.ReLU(),
            torch.nn.Linear(16, 5))
        self.big = torch.nn.Parameter(torch.zeros(1 << 18))

    def forward(self, x):
        return self.body(x) + 0 * self.big.sum()


def make_model():
    torch.manual_seed(0)
    return Net()


def batch(step, rank):
    g = torch.Generator().manual_seed(100 * step + rank)
    return (torch.randn(8, 2, 6, 6, generator=g),
            torch.randint(0, 5, (8,), generator=g))


def slow_two_bit():
    """2-bit whose encode takes 20 ms more: compression that cannot pay."""
    from bellows import compress

    class SlowTwoBit(compress.TwoBit):
        def encode(self, layer, grad):
            time.sleep(0.02)
            return super().encode(layer, grad)

    return SlowTwoBit(THRESHOLD)


def expected_modes(d, step, shapes):
    """Compressed (True) or raw per layer, by the send-mode contract."""
    calibrating = (d.calibrate_steps > 0 and d.apply_step <= step
                   < d.apply_step + d.calibrate_steps)
    out = []
    for lv, shape in zip(d.levels, shapes):
        if lv <= 0 or len(shape) < 2 or d.compression_off:
            out.append(False)
        elif calibrating:
            out.append(step % 2 == 0)
        else:
            out.append(math.prod(shape) * 4 >= d.size_threshold)
    return calibrating, out


def rank_main(rank, port, control, publish, kind, steps, out_dir):
    import bellows.torch

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=WORLD)
    dist._DEFAULT_FIRST_BUCKET_BYTES = 1
    model = make_model()
    ref_model = make_model()
    ddp = torch.nn.parallel.DistributedDataParallel(model,
                                                    bucket_cap_mb=1e-6)
    comp = slow_two_bit() if kind == "perfmodel" else "2bit"
    agent = bellows.torch.attach(ddp, f"py-modes-{kind}", compressor=comp,
                                 quant_threshold=THRESHOLD,
                                 control=control, publish=publish,
                                 window_steps=WINDOW,
                                 decision_timeout_ms=10000)
    sends = []
    inner = agent.hook.on_send
    agent.hook.on_send = lambda *a: (sends.append(a), inner(*a))
    params = list(model.parameters())
    shapes = [tuple(p.shape) for p in params]
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref_model.parameters(), lr=0.1)
    residual = [dict() for _ in range(WORLD)]
    report = {"steps": [], "windows": [], "shapes": shapes}
    for _ in range(steps):
        step = agent.step_begin()
        d = agent.decision
        del sends[:]
        opt.zero_grad()
        x, y = batch(step, rank)
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        # How the hook sent each layer; the gradients below prove it.
        modes = list(agent.hook.compressed)
        sent = [None] * len(params)
        for layer, compressed, comm_ms, codec_ms in sends:
            sent[layer] = bool(compressed)
        # The reference: every rank's local gradient, each layer as sent.
        local = []
        for w in range(WORLD):
            ref_opt.zero_grad()
            xw, yw = batch(step, w)
            torch.nn.functional.cross_entropy(ref_model(xw), yw).backward()
            local.append([p.grad.reshape(-1).clone()
                          for p in ref_model.parameters()])
        diff = 0.0
        for i, p in enumerate(params):
            total = torch.zeros(p.numel())
            for w in range(WORLD):
                r = residual[w].pop(i, torch.zeros(p.numel()))
                if not modes[i]:
                    total += local[w][i] + r
                    continue
                _, dec, residual[w][i] = ref_quantise("2bit", THRESHOLD, r,
                                                      local[w][i])
                total += dec
            want = (total / WORLD).view_as(p)
            diff = max(diff, (p.grad - want).abs().max().item())
            list(ref_model.parameters())[i].grad = want.clone()
        opt.step()
        ref_opt.step()
        calibrating, want_modes = expected_modes(d, step, shapes)
        report["steps"].append({
            "step": step, "seq": d.seq, "modes": modes,
            "expected": want_modes, "calibrating": agent.calibrating,
            "calibrating_expected": calibrating,
            "size_threshold": d.size_threshold,
            "compression_off": d.compression_off,
            "reason": d.reason, "grad_diff": diff,
            "timed": agent.timed, "direct": agent.hook.direct,
            "overlapped": agent.hook.overlapped,
            "timed_sends": len(sends), "sent": sent,
            "backward_ms": agent.backward_ms(),
            "codec_ms": agent.hook.codec_ms,
            "send_times": [[c, ms, cod] for _, c, ms, cod in sends]})
        agent.step_end(lr=0.1)
        if (step + 1) % WINDOW == 0:
            st = [agent.agent.window_stats(i) for i in range(len(params))]
            report["windows"].append({
                "step": step,
                "raw_n": [s.comm_raw_n for s in st],
                "comp_n": [s.comm_comp_n for s in st],
                "raw_ms": [s.comm_raw_ms for s in st],
                "comp_ms": [s.comm_comp_ms for s in st],
                "codec_ms": [s.codec_ms for s in st]})
    agent.close()
    del ddp, opt, agent
    support.end_group()
    pathlib.Path(out_dir, f"{rank}.json").write_text(json.dumps(report))


def policy_known(yaml_text: str) -> bool:
    """True if this build's `bellows policy check` accepts the YAML."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write(yaml_text)
        f.flush()
        r = subprocess.run([str(support.BELLOWS), "policy", "check",
                            f.name], capture_output=True, text=True,
                           timeout=10)
    return r.returncode == 0


class HookModesTest(unittest.TestCase):
    def run_job(self, kind, policy, steps):
        if not policy_known(policy):
            self.skipTest(f"this bellowsd has no {kind} policy")
        with support.Daemon(policy) as daemon, \
                tempfile.TemporaryDirectory() as out:
            try:
                support.spawn(rank_main,
                              (support.free_port(), daemon.control,
                               daemon.publish, kind, steps, out),
                              WORLD, timeout=100)
            except BaseException:
                print(daemon.tail())
                raise
            reps = [json.loads(pathlib.Path(out, f"{r}.json").read_text())
                    for r in range(WORLD)]
        self.check_common(reps)
        return reps

    def check_common(self, reps):
        for rank, rep in enumerate(reps):
            for st in rep["steps"]:
                s = st["step"]
                self.assertEqual(st["modes"], st["expected"],
                                 f"rank {rank} step {s}: sent as "
                                 f"{st['modes']} under {st['reason']!r}")
                self.assertEqual(st["calibrating"],
                                 st["calibrating_expected"],
                                 f"rank {rank} step {s}")
                self.assertLess(st["grad_diff"], 1e-6, f"rank {rank} step "
                                f"{s}: gradients differ from the reference")
                self.assertGreater(st["backward_ms"], 0.0)
                if any(st["modes"]):
                    self.assertGreater(st["codec_ms"], 0.0)
                else:
                    self.assertEqual(st["codec_ms"], 0.0)
        # The same decision and modes on both ranks at every step.
        for a, b in zip(reps[0]["steps"], reps[1]["steps"]):
            self.assertEqual((a["step"], a["seq"], a["modes"]),
                             (b["step"], b["seq"], b["modes"]))
        # A step is timed in a calibration and every 16th step (attach's
        # default), each layer reduced and timed on its own; every other
        # step, compressed or not, goes on the overlapped path: a bucket
        # (one per tensor here, after the first step) of a raw layer that
        # holds no residual to gloo directly, the others through the
        # compressor's asynchronous collectives, and the gradients above
        # still equal the reference's.
        for rank, rep in enumerate(reps):
            for st in rep["steps"]:
                want = st["calibrating"] or st["step"] % 16 == 0
                self.assertEqual(st["timed"], want,
                                 f"rank {rank} step {st['step']}")
                if st["timed"]:
                    self.assertEqual(st["direct"], 0)
                    self.assertEqual(st["overlapped"], 0)
                    self.assertEqual(st["timed_sends"], 7)
                    self.assertEqual(st["sent"], st["modes"])
                else:
                    self.assertEqual(st["timed_sends"], 0)
                    if st["step"] > 0:
                        self.assertEqual(st["direct"] + st["overlapped"],
                                         7)
                        self.assertGreaterEqual(st["overlapped"],
                                                sum(st["modes"]))
                        self.assertGreater(st["direct"], 0)
        # Biases (and the 1-D vector) are never compressed; raw, and
        # timed in every timed step of the window.
        vectors = [i for i, s in enumerate(reps[0]["shapes"]) if len(s) < 2]
        self.assertEqual(len(vectors), 4)
        for w in reps[0]["windows"]:
            timed = sum(1 for st in reps[0]["steps"]
                        if w["step"] - WINDOW < st["step"] <= w["step"]
                        and st["timed"])
            for layer in vectors:
                self.assertEqual(w["comp_n"][layer], 0)
                self.assertEqual(w["raw_n"][layer], timed)

    def test_slimgc_calibration_alternates_then_the_threshold_holds(self):
        reps = self.run_job("slimgc", SLIMGC, 40)
        steps = reps[0]["steps"]
        shapes = reps[0]["shapes"]
        matrices = [i for i, s in enumerate(shapes) if len(s) >= 2]
        fc1 = shapes.index([16, 64])
        calib = [s for s in steps if s["calibrating"]]
        after = [s for s in steps if not s["calibrating"]
                 and calib and s["step"] > calib[-1]["step"]]
        self.assertTrue(calib, "no calibration ran")
        self.assertEqual({s["step"] % 2 for s in calib}, {0, 1})
        for s in calib:
            # Every matrix, whatever its size: compressed on even steps.
            self.assertEqual([s["modes"][i] for i in matrices],
                             [s["step"] % 2 == 0] * 3)
        # A window inside the calibration timed fc1.weight both ways.
        both = [w for w in reps[0]["windows"]
                if w["raw_n"][fc1] > 0 and w["comp_n"][fc1] > 0]
        self.assertTrue(both, reps[0]["windows"])
        for w in both:
            self.assertGreater(w["raw_ms"][fc1], 0.0)
            self.assertGreater(w["comp_ms"][fc1], 0.0)
            self.assertGreater(w["codec_ms"][fc1], 0.0)
        picked = [s for s in after if "calibration" in s["reason"]]
        self.assertTrue(picked, "no threshold decision after the "
                        "calibration: " + repr([s["reason"] for s in
                                                after[-1:]]))
        threshold = picked[-1]["size_threshold"]
        print(f"\n  calibration steps {calib[0]['step']}-"
              f"{calib[-1]['step']}, then threshold {threshold} B: "
              f"matrices of {[4 * math.prod(shapes[i]) for i in matrices]}"
              f" B sent compressed: "
              f"{[picked[-1]['modes'][i] for i in matrices]}")

    def test_perfmodel_gate_off_sends_every_layer_raw(self):
        reps = self.run_job("perfmodel", PERFMODEL, 64)
        steps = reps[0]["steps"]
        off = [s for s in steps if s["compression_off"]]
        self.assertTrue(off, "the gate never went off: "
                        + repr(steps[-1]["reason"]))
        for s in off:
            self.assertEqual(s["modes"], [False] * 7)
        # Gate off: most steps are untimed, their buckets go direct.
        self.assertTrue(any(s["direct"] == 7 for s in off),
                        [(s["step"], s["direct"]) for s in off])
        on = [s for s in steps if not s["compression_off"]]
        self.assertTrue(any(any(s["modes"]) for s in on))
        print(f"\n  gate off from step {off[0]['step']} "
              f"({len(off)} of {len(steps)} steps): "
              f"{off[0]['reason'][:160]}")


if __name__ == "__main__":
    unittest.main()
