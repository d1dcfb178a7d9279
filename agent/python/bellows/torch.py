"""bellows.torch - run a DistributedDataParallel model under bellows.

``attach(ddp_model, job=...)`` opens a bellows agent for this rank with the
model's parameters as layers (names and shapes) and installs a DDP
communication hook that, for every bucket:

1. hands each local gradient, before any communication or error feedback,
   to the agent (the statistics Accordion's rule needs), read in place in
   DDP's bucket buffer;
2. reduces the bucket, each tensor at the level in force for the current
   step (bellows.compress: PowerSGD rank, top-k keep fraction, or 1-bit /
   2-bit quantisation at any level > 0); a layer goes raw when the
   decision says so for this step (level 0, under the decision's size
   threshold, compression gate off; during a calibration the compressible
   layers alternate, compressed on even steps and raw on odd ones, as
   ``Agent.send_mode`` says), and 1-D tensors always do;
3. counts the floats this rank sent and what raw would have sent.

A bucket takes one of three paths (CompressionHook): *direct* (all raw,
no residual: DDP's own asynchronous all-reduce of the bucket),
*overlapped* (the compressor's asynchronous collectives, one per codec
per bucket, decoded in their callbacks: backward keeps overlapping
communication) or *timed* (a calibration step, one step in
``time_every``: each tensor reduced and timed on its own, synchronously,
and reported with ``Agent.comm_layer`` and ``Agent.comm_bucket``, what
the policies fit). No future is waited on inside another's callback
(what makes torch 1.13's powerSGD_hook deadlock on gloo with several
buckets), and every collective starts on the thread that runs backward,
in bucket order, the same on every rank.

Per step, ``step_end`` also reports the backward pass's own time (from
the gradient of the model's output to the last bucket, minus the time
spent in the hook) and the step's encode + decode time.

The training loop calls ``step_begin()`` before the forward pass and
``step_end()`` after the optimizer step (and after the LR scheduler's
step, if any): with the optimizer given to ``attach``, step_end reads the
step's LR and the next one from it (see TorchAgent.step_end;
``step_end(lr=..., lr_next=...)`` says them explicitly); the levels the
hook uses in a backward pass are those of the decision in force at that
step, identical on every rank (bellows_agent_step_begin applies each
decision at the same step everywhere), so the ranks' collectives always
match. Batch-size and LR-scale decisions are read with ``batch_size()``
and ``lr_scale()``; docs/pytorch.md shows the pattern.

This module is named after torch and imports it; absolute imports (the
default) make ``import torch`` below the real one.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import secrets
import time
from collections.abc import Sequence
from typing import Callable

import torch
import torch.distributed as dist

from bellows import _lib
from bellows.agent import Agent, Decision, Layer
from bellows.compress import (
    Counts,
    Flight,
    Item,
    PowerSGD,
    ProcessGroupComm,
    TopK,
    make_compressor,
)
from bellows.compress import _future as compress_future
from bellows.resireduce import Plan

__all__ = ["CompressionHook", "LevelChange", "PlanChange", "TorchAgent",
           "attach", "group_allreduce", "layer_table"]


def _unwrap(model: torch.nn.Module) -> torch.nn.Module:
    inner = getattr(model, "module", model)
    return inner if isinstance(inner, torch.nn.Module) else model


def _wants_exp_hist(exp_hist, name: str, p: torch.Tensor) -> bool:
    """Whether layer ``name`` reports its exponent histogram: exp_hist is
    None/False (none), True (every tensor of 2 or more dimensions, the
    default selector's), a callable (name, parameter) -> bool, or a
    collection of layer names."""
    if exp_hist is None or exp_hist is False:
        return False
    if exp_hist is True:
        return p.dim() >= 2
    if callable(exp_hist):
        return bool(exp_hist(name, p))
    return name in exp_hist


def layer_table(model: torch.nn.Module, flags: int = 0,
                exp_hist=None) -> list[Layer]:
    """The bellows layer table of ``model``: its trainable parameters in
    ``named_parameters()`` order, named as there (without DDP's
    ``module.`` prefix). Parameters on a CUDA device get LAYER_DEVICE;
    those ``exp_hist`` selects (see attach) LAYER_EXP_HIST."""
    table = []
    for name, p in _unwrap(model).named_parameters():
        if not p.requires_grad:
            continue
        f = flags | (_lib.LAYER_DEVICE if p.is_cuda else 0)
        if _wants_exp_hist(exp_hist, name, p):
            f |= _lib.LAYER_EXP_HIST
        table.append(Layer(name, tuple(p.shape), f))
    return table


class _Bucket:
    """What the hook knows of one DDP bucket, built on its first call and
    reused while DDP keeps the bucket: its layers in bucket order, and
    where each gradient lies in the bucket's buffer (element offsets;
    None when a gradient is no contiguous view of it)."""

    __slots__ = ("layers", "offsets", "c_arrays", "c_layers", "c_offsets")

    def __init__(self, layers, offsets):
        self.layers = layers
        self.offsets = offsets
        # The same as C arrays, for one observe call per bucket.
        self.c_arrays = None
        self.c_layers = self.c_offsets = 0
        if offsets is not None:
            la = (ctypes.c_uint32 * len(layers))(*layers)
            oa = (ctypes.c_uint64 * len(offsets))(*offsets)
            self.c_arrays = (la, oa)  # kept alive with the bucket
            self.c_layers = ctypes.addressof(la)
            self.c_offsets = ctypes.addressof(oa)


class CompressionHook:
    """The DDP communication hook: every tensor at its own level.

    ``params`` are the model's trainable parameters in layer order;
    ``set_levels(levels)`` gives the level in force for each layer (0 for
    every layer that must go raw) before each backward pass (TorchAgent
    does it in step_begin); what follows from them for a step, which
    layers are compressed, is computed there, once per distinct set of
    levels, not per bucket. ``observe(layer, grad)``, if given, sees
    each local gradient first; ``observe_many(n, layers, address,
    offsets, dtype)`` (Agent.bucket_observer), if given, is used instead
    for a bucket whose gradients lie in its CPU buffer: all of them in
    one call, without building a tensor per gradient.

    Each bucket takes one of three paths:

    - **direct**: every layer raw, none holding an error-feedback
      residual, and the step not timed. One asynchronous sum all-reduce
      of DDP's bucket buffer, in place, divided by the world in its
      callback, as DDP's own hook does; ``direct`` counts these buckets.
    - **overlapped**: some layer compressed (or flushing a residual),
      the step not timed, and a compressor with ``start`` (every one of
      bellows.compress but GComp). The compressor encodes here and
      starts asynchronous collectives, one per codec per bucket (the raw
      layers in one all-reduce, the compressed ones packed in one
      all-gather or, for PowerSGD, one all-reduce of every P and one of
      every Q); the hook returns a future that completes when the
      callbacks have decoded, so backward goes on overlapping
      communication; ``overlapped`` counts these buckets. Every collective
      starts on the thread that runs backward, in bucket order, the same
      on every rank: a stage that needs a collective's result
      (PowerSGD's Q) runs at the next bucket's call, or, for the last bucket, in that collective's
      callback, after which nothing else starts (compress.Flight).
    - **timed**: ``timed`` set (a calibration, a sampled step), or a
      compressor without ``start``. The bucket is reduced synchronously
      inside the hook and a completed future returned. With
      ``per_layer`` (the default) each tensor is reduced on its own,
      so that its collectives and codec time are its own and
      ``on_send(layer, compressed, comm_ms, codec_ms)`` gets them
      (codec_ms is the reduce's wall time minus its collectives, 0 for
      a raw send); without, a bucket goes to the compressor in one call.
      With ``time_only`` a set of layers (a sampled step of a model with
      many layers), only those are reduced on their own, and the rest of
      the bucket in one call after them.
      ``on_collective(nbytes, compressed, ms)`` gets every collective of
      this path, with the bytes this rank put in. With ``align``, the
      first timed bucket after each reset() starts with a one-float
      all-reduce that is timed into ``comm.elapsed_ms`` but not
      reported: the ranks arrive at their first collective at different
      times, and that wait is no layer's communication time.

    Only the timed path calls on_send and on_collective: the policies'
    per-layer times come from sampled steps, never from slowing every
    step. ``counts`` (what this rank sent), ``codec_ms`` (encode +
    decode; the overlapped path's decode is added by finish()),
    ``hook_ms`` (wall time inside the hook), ``direct_ms`` (the busy
    time of the asynchronous collectives, overlapping ones counted once:
    communication that overlapped backward, not time the step waited;
    added by finish()) and ``last_end`` (perf_counter() when the hook
    last returned) accumulate until the owner calls reset().
    ``finish()``, once the step's backward pass is over (DDP has waited
    for every future), hands back the compressors' deferred state;
    reset() calls it. ``register(ddp_model)`` installs the hook.
    """

    def __init__(self, params: Sequence[torch.Tensor], compressor,
                 comm: ProcessGroupComm,
                 observe: Callable[[int, torch.Tensor], None] | None = None,
                 *, per_layer: bool = True,
                 on_send: Callable[[int, bool, float, float], None]
                 | None = None,
                 on_collective: Callable[[int, bool, float], None]
                 | None = None, align: bool = False,
                 observe_many: Callable[[int, int, int, int, int], None]
                 | None = None):
        # Parameters are recognised by their storage: bucket.parameters()
        # returns the model's own parameter tensors.
        self.layer_of = {p.data_ptr(): i for i, p in enumerate(params)}
        self._shapes = [tuple(p.shape) for p in params]
        self._buckets: dict[tuple, _Bucket] = {}
        self.compressor = compressor
        self.comm = comm
        self.observe = observe
        self.observe_many = observe_many
        self.per_layer = per_layer
        self.on_send = on_send
        self.on_collective = on_collective
        if on_collective is not None:
            comm.record = True
        self.align = align
        self._aligned = False
        self.timed = True
        # On the timed path with per_layer: None times every layer on its
        # own; a set, only those (the rest of a bucket goes together).
        self.time_only: frozenset[int] | None = None
        self._level_cache: dict[tuple, tuple[list, list, bool]] = {}
        self._levels: list[float] = []
        self._comp: list[bool] = []
        self._any_comp = False
        self.set_levels([0.0] * len(params))
        self._start: Callable | None = getattr(compressor, "start", None)
        self._flights: list[Flight] = []
        self._pending: list[Flight] = []
        self.direct = 0
        self.direct_ms = 0.0
        self.overlapped = 0
        self.counts = Counts()
        self.calls = 0
        self.codec_ms = 0.0
        self.hook_ms = 0.0
        self.last_end = 0.0

    def register(self, model) -> None:
        """Installs the hook on a DistributedDataParallel model."""

        # DDP wants a function (it reads __name__) whose annotations, if
        # any, are the real objects, not the strings this module's
        # postponed annotations would give: so none.
        def bellows_comm_hook(state, bucket):
            return self(state, bucket)

        model.register_comm_hook(None, bellows_comm_hook)

    def set_levels(self, levels: Sequence[float]) -> None:
        """Puts ``levels`` (one per layer) in force for the next backward
        passes. Which layers they compress is worked out here, once per
        distinct set of levels (a calibration alternates two)."""
        key = tuple(levels)
        hit = self._level_cache.get(key)
        if hit is None:
            test = getattr(self.compressor, "compresses", None)
            if test is None:
                comp = [lv > 0 for lv in key]
            else:
                comp = [lv > 0 and bool(test(shape, lv))
                        for shape, lv in zip(self._shapes, key)]
            if len(self._level_cache) >= 8:
                self._level_cache.clear()
            hit = self._level_cache[key] = (list(key), comp, any(comp))
        self._levels, self._comp, self._any_comp = hit

    @property
    def levels(self) -> list[float]:
        """The levels in force (set_levels)."""
        return self._levels

    @levels.setter
    def levels(self, levels: Sequence[float]) -> None:
        self.set_levels(levels)

    @property
    def compressed(self) -> tuple[bool, ...]:
        """Per layer, whether the levels in force send it compressed."""
        return tuple(self._comp)

    def finish(self) -> None:
        """Once backward is over: hands back the overlapped reduces'
        deferred state (in the order they started) and adds their decode
        time to codec_ms and their busy time to direct_ms."""
        flights, self._flights = self._flights, []
        self._pending = []
        for fl in flights:
            fl.finish()
            self.codec_ms += fl.decode_ms
        self.direct_ms += self.comm.take_busy_ms()

    def reset(self) -> None:
        """Finishes the last step (finish()) and zeroes the counters
        (counts, codec_ms, hook_ms, direct, direct_ms, overlapped)."""
        self.finish()
        self.counts = Counts()
        self.codec_ms = 0.0
        self.hook_ms = 0.0
        self.direct = 0
        self.direct_ms = 0.0
        self.overlapped = 0
        self._aligned = False

    def _align(self, device) -> None:
        """The step's first collective: waits for every rank, unreported."""
        self._aligned = True
        comm = self.comm
        n0 = len(comm.samples) if self.on_collective is not None else 0
        comm.all_reduce(torch.zeros(1, device=device))
        if self.on_collective is not None:
            del comm.samples[n0:]

    def _bucket(self, bucket, buf: torch.Tensor) -> _Bucket:
        """The bucket's layers and offsets, from the cache while DDP keeps
        the bucket (same index, same first and last parameter, same
        count: DDP rebuilds its buckets once, after the first step)."""
        params = bucket.parameters()
        key = (bucket.index(), len(params),
               params[0].data_ptr() if params else 0,
               params[-1].data_ptr() if params else 0)
        b = self._buckets.get(key)
        if b is not None:
            return b
        layers = []
        for p in params:
            layer = self.layer_of.get(p.data_ptr())
            if layer is None:
                raise RuntimeError("bellows: a DDP bucket holds a parameter "
                                   "that is not in the layer table (was the "
                                   "model changed after attach?)")
            layers.append(layer)
        offsets: list[int] | None = []
        base, esz = buf.data_ptr(), buf.element_size()
        for g in bucket.gradients():
            off, rem = divmod(g.data_ptr() - base, esz)
            if (rem or not g.is_contiguous() or g.dtype != buf.dtype
                    or off < 0 or off + g.numel() > buf.numel()):
                offsets = None
                break
            offsets.append(off)  # type: ignore[union-attr]  # None breaks
        b = self._buckets[key] = _Bucket(tuple(layers), offsets)
        return b

    def _observe(self, b: _Bucket, buf: torch.Tensor, bucket) -> list | None:
        """Hands every gradient of the bucket to the observer; returns the
        bucket's gradient tensors if it had to build them."""
        many = self.observe_many
        if (many is not None and b.offsets is not None
                and buf.device.type == "cpu"
                and buf.dtype in _OBSERVE_DTYPES):
            many(len(b.layers), b.c_layers, buf.data_ptr(), b.c_offsets,
                 _OBSERVE_DTYPES[buf.dtype])
            return None
        grads = bucket.gradients()
        if self.observe is not None:
            for layer, g in zip(b.layers, grads):
                self.observe(layer, g)
        return grads

    def _raw_only(self, b: _Bucket) -> bool:
        """True if every layer of ``b`` goes raw and holds no residual to
        flush (a compressor without ``errors``, a user's: never)."""
        if getattr(self.compressor, "errors", None) is None:
            return False
        comp = self._comp
        if self._any_comp and any(comp[i] for i in b.layers):
            return False
        residuals = getattr(self.compressor, "residuals", None)
        if residuals is not None:
            return not residuals.any_held() or \
                not any(residuals.holds(i) for i in b.layers)
        errors = self.compressor.errors
        return not errors or not any(i in errors for i in b.layers)

    def _direct(self, buf: torch.Tensor, b: _Bucket):
        """Starts the sum all-reduce of DDP's bucket ``buf``; returns its
        future, whose value is divided by the world in the callback."""
        n = buf.numel()
        self.counts += Counts(floats_sent=n, floats_raw=n,
                              bytes_sent=n * buf.element_size())
        self.direct += 1
        world = self.comm.world

        def divide(fut):
            # On the backend's thread, once the sum is in buf: no wait.
            return fut.value()[0].div_(world)

        return self.comm.all_reduce_async(buf, divide)

    def _overlapped(self, buf: torch.Tensor, items: list[Item], last: bool):
        """Starts the compressor's reduce of ``items``; returns a future
        of ``buf`` completed once every gradient holds the average."""
        assert self._start is not None  # only compressors with start()
        fl = self._start(items, self.comm)
        self.overlapped += 1
        self._flights.append(fl)
        self.counts += fl.counts
        self.codec_ms += fl.codec_ms
        if fl.pending:
            if last:
                fl.then_advance()
            else:
                self._pending.append(fl)

        def result(fut):
            fut.value()  # raises a stage's error
            return buf

        return fl.future.then(result)

    def _advance(self) -> None:
        """Runs the stages earlier buckets left (see compress.Flight),
        before this bucket starts any collective."""
        pending, self._pending = self._pending, []
        for fl in pending:
            fl.advance()

    def _reduce(self, group: list[Item]) -> None:
        """Reduces ``group`` in one compressor call, timed."""
        comm = self.comm
        compressed = any(self._comp[it.layer] for it in group)
        c0 = comm.elapsed_ms
        n0 = len(comm.samples) if self.on_collective is not None else 0
        t0 = time.perf_counter()
        self.counts += self.compressor.reduce(group, comm)
        wall_ms = (time.perf_counter() - t0) * 1e3
        comm_ms = comm.elapsed_ms - c0
        codec_ms = max(wall_ms - comm_ms, 0.0) if compressed else 0.0
        self.codec_ms += codec_ms
        if self.on_collective is not None:
            samples = comm.samples[n0:]
            del comm.samples[n0:]
            for nbytes, ms in samples:
                self.on_collective(nbytes, compressed, ms)
        if self.on_send is not None and len(group) == 1:
            self.on_send(group[0].layer, compressed, comm_ms, codec_ms)

    def __call__(self, state, bucket):
        """Reduces one bucket; returns a future of its buffer (completed
        on the timed path)."""
        t_in = time.perf_counter()
        buf = bucket.buffer()
        b = self._bucket(bucket, buf)
        grads = self._observe(b, buf, bucket)
        fut = None
        if not self.timed:
            self._advance()
            if self._raw_only(b):
                fut = self._direct(buf, b)
            elif self._start is not None:
                if grads is None:
                    grads = bucket.gradients()
                levels = self.levels
                items = [Item(i, g, levels[i])
                         for i, g in zip(b.layers, grads)]
                fut = self._overlapped(buf, items, bucket.is_last())
        if fut is None:
            fut = self._timed(bucket, buf, b, grads)
        self.calls += 1
        self.last_end = time.perf_counter()
        self.hook_ms += (self.last_end - t_in) * 1e3
        return fut

    def _timed(self, bucket, buf: torch.Tensor, b: _Bucket, grads):
        """The timed path: the bucket reduced synchronously, a completed
        future returned."""
        self._advance()
        if grads is None:
            grads = bucket.gradients()
        levels = self.levels
        items = [Item(i, g, levels[i]) for i, g in zip(b.layers, grads)]
        if self.align and not self._aligned:
            self._align(buf.device)
        only = self.time_only
        if self.per_layer and only is not None:
            # A sampled step of a model with many layers: the layers
            # picked this step each on their own, the rest of the bucket
            # together (one reduce, its collectives still sampled).
            rest = [it for it in items if it.layer not in only]
            for it in items:
                if it.layer in only:
                    self._reduce([it])
            if rest:
                self._reduce(rest)
        elif self.per_layer:
            for it in items:
                self._reduce([it])
        elif items:
            self._reduce(items)
        fut = compress_future(buf.device)
        fut.set_result(buf)
        return fut


# bellows_dtype codes of the gradient types Agent.bucket_observer takes.
_OBSERVE_DTYPES = {torch.float32: _lib.DTYPE_F32,
                   torch.float16: _lib.DTYPE_F16,
                   torch.bfloat16: _lib.DTYPE_BF16}


@dataclasses.dataclass(frozen=True)
class PlanChange:
    """A step from which the residual plan is different."""

    step: int
    seq: int
    plan: Plan
    migrated: tuple[int, ...]  # layers whose residual state was moved
    reason: str


@dataclasses.dataclass(frozen=True)
class LevelChange:
    """A step from which the layers' levels are different."""

    step: int
    seq: int
    window: int  # the decision's window (answered + 1)
    levels: tuple[float, ...]  # as applied (after the raw rules)
    reason: str


class TorchAgent:
    """A DDP model attached to a bellows agent; made by ``attach``.

    One training thread calls step_begin, step_end, window_end and close.
    Counters: ``floats_sent``, ``floats_raw``, ``bytes_sent``,
    ``comm_ms``, ``codec_ms`` (totals since attach) and ``last`` (the
    Counts of the last ended step); ``changes`` lists every LevelChange;
    ``calibrating`` says whether the current step is in a calibration,
    ``timed`` whether the hook times its sends in it: in a calibration,
    and at every step that is a multiple of ``time_every`` (0: never
    otherwise; 1: every step) while a policy in force reads per-layer
    times (the decision's ``stats_skip``); the other steps, compressed or
    not, take
    the overlapped path (CompressionHook). ``baseline`` is True while the
    first ``raw_windows`` windows run: every layer is then sent raw,
    whatever the decisions say (a calibration included), so that the
    run measures its own raw step time (``attach``).
    """

    def __init__(self, model, agent: Agent, hook: CompressionHook,
                 params: Sequence[torch.Tensor], time_every: int = 1,
                 optimizer=None, raw_windows: int = 0,
                 time_layers: int = 0):
        if time_layers < 0:
            raise ValueError(f"time_layers must be >= 0, not {time_layers}")
        # A sampled step times at most this many layers on their own
        # (0: all), the next ones in layer order at each sampled step.
        self.time_layers = time_layers
        if raw_windows < 0:
            raise ValueError(f"raw_windows must be >= 0, not {raw_windows}")
        # The run's own raw baseline: every layer raw until this many
        # windows have closed, whatever the decisions say.
        self.raw_windows = raw_windows
        self.baseline = raw_windows > 0
        if time_every < 0:
            raise ValueError(f"time_every must be >= 0, not {time_every}")
        self.model = model
        self.optimizer = optimizer
        # The optimizer's LR when this step's backward pass began (before
        # the optimizer step and any scheduler step); None: not seen.
        self._lr_used: float | None = None
        self.time_every = time_every
        self.timed = True
        # Whether a policy in force reads per-layer times (sampled steps
        # then run one in time_every); set from each new decision.
        self._sample = True
        self.agent = agent
        self.hook = hook
        self.layers = agent.layers
        self._params = list(params)
        self._bytes = [p.numel() * p.element_size() for p in self._params]
        self._ndim = [p.dim() for p in self._params]
        self._base: list[float] = []
        self._levels: list[float] = [0.0] * len(self._params)
        self.decision: Decision | None = None
        self.step: int | None = None
        self.calibrating = False
        self.changes: list[LevelChange] = []
        self.plan_changes: list[PlanChange] = []
        self._plan: Plan | None = None
        # A plan fixed by the trainer (e.g. the paper's static grouping):
        # decisions' residual plans are then ignored.
        self.static_plan: Plan | None = None
        self._resid_steps = 0
        self._resid_kept = 0
        self._resid_full = 0
        self.residuals = getattr(hook.compressor, "residuals", None)
        if self.residuals is not None:
            self.residuals.set_shapes([tuple(p.shape)
                                       for p in self._params])
        self.floats_sent = 0
        self.floats_raw = 0
        self.bytes_sent = 0
        self.comm_ms = 0.0
        self.codec_ms = 0.0
        self.last = Counts()
        self._t0 = 0.0
        self._comm0 = 0.0
        self._bwd_start = 0.0
        self._handle = _unwrap(model).register_forward_hook(self._forward)

    def _forward(self, module, inputs, output) -> None:
        """Marks where this step's backward pass starts: when the
        gradient of the model's output has been computed."""
        if isinstance(output, torch.Tensor):
            t = output
        elif isinstance(output, (tuple, list)) and output and \
                isinstance(output[0], torch.Tensor):
            t = output[0]
        else:
            return
        if t.requires_grad:
            t.register_hook(self._backward_starts)

    def _backward_starts(self, grad):
        if not self._bwd_start:
            self._bwd_start = time.perf_counter()
            self._lr_used = self._optimizer_lr()

    def _optimizer_lr(self) -> float | None:
        """The optimizer's LR now: its first parameter group's ``lr``,
        divided by this step's lr_scale() (which the trainer applies to
        the optimizer, as docs/pytorch.md shows); None without an
        optimizer."""
        if self.optimizer is None or not self.optimizer.param_groups:
            return None
        lr = float(self.optimizer.param_groups[0]["lr"])
        scale = self.lr_scale()
        return lr / scale if scale > 0 else lr

    def effective_levels(self, d: Decision) -> list[float]:
        """The level each layer is reduced at under decision ``d`` outside
        a calibration: its level, or 0 for 1-D tensors, tensors smaller
        than the size threshold (bytes) and everything while compression
        is off."""
        out = []
        for i, level in enumerate(d.levels):
            if (d.compression_off or self._ndim[i] < 2
                    or self._bytes[i] < d.size_threshold):
                level = 0.0
            out.append(level)
        return out

    def _step_levels(self) -> list[float]:
        """This step's level of each layer: the decision's (1-D tensors
        at 0) where Agent.send_mode says compressed, else 0."""
        send_mode = self.agent.send_mode
        return [lv if lv > 0 and send_mode(i) else 0.0
                for i, lv in enumerate(self._base)]

    # The layer statistics that sampled steps measure, and the residual
    # statistics (error feedback; ResiReduce's policy reads them).
    _TIMES = ("comm_raw_ms", "comm_raw_n", "comm_comp_ms", "comm_comp_n",
              "codec_ms")
    _RESID = ("resid_steps", "resid_l1", "resid_l2", "resid_q50",
              "resid_q90", "resid_q99", "resid_floats")

    @staticmethod
    def _read(d: Decision, names: tuple[str, ...]) -> bool:
        """True when a policy in force reads any of the statistics
        ``names``, so that the trainer measures them: not when the
        decision skips them all (under fixed or accordion alone); also
        True when it does not say (no decision yet, an older bellowsd, a
        libbellows without them)."""
        if d.stats_skip == 0:
            return True
        try:
            return not d.skips(*names)
        except KeyError:
            return True

    def step_begin(self) -> int:
        """Begins a step (before the forward pass); returns its number.

        Makes the decision in force for the step current and gives this
        step's levels to the hook (the send mode of each layer can change
        from step to step during a calibration). May wait at a due apply
        step (see bellows.Agent.step_begin).
        """
        step = self.agent.step_begin()
        d = self.agent.decision()
        baseline = self.baseline and \
            self.agent.stats().window < self.raw_windows
        if (self.decision is None or d.seq != self.decision.seq
                or baseline != self.baseline):
            self.baseline = baseline
            self._base = [0.0 if self._ndim[i] < 2 or baseline else lv
                          for i, lv in enumerate(d.levels)]
            levels = ([0.0] * len(self._base) if baseline
                      else self.effective_levels(d))
            self._levels = levels
            if not self.changes or tuple(levels) != self.changes[-1].levels:
                self.changes.append(LevelChange(step, d.seq, d.window,
                                                tuple(levels), d.reason))
            self._apply_plan(step, d)
            self.agent.applied_levels(levels)
            self._sample = self._read(d, self._TIMES)
            residuals = getattr(self.hook.compressor, "residuals", None)
            if residuals is not None:
                residuals.observing = self._read(d, self._RESID)
        elif self.residuals is not None:
            self.residuals.new_step()
        self.calibrating = self.agent.calibrating()
        # Outside a calibration a layer's mode follows from the decision
        # alone (computed once per decision above); in one the library
        # alternates it per step, the same on every rank. The raw
        # baseline sends everything raw, a calibration included.
        calibrating = self.calibrating and not baseline
        self.hook.set_levels(self._step_levels() if calibrating
                             else self._levels)
        # Per-layer times are what slimgc (calibrations, drift) and
        # perfmodel (raw collectives) fit: every calibration step, and a
        # sample of the others while a policy in force reads them (the
        # decision's stats_skip); every other step, compressed or not,
        # goes on the overlapped path at DDP's own pace.
        every = self.time_every if self._sample else 0
        self.timed = (calibrating
                      or (every > 0 and step % every == 0))
        self.hook.timed = self.timed
        self.hook.time_only = None
        n = len(self._params)
        k = self.time_layers
        if self.timed and not calibrating and 0 < k < n:
            # A sample of the layers, in turn: a model of 400 tensors
            # would otherwise make 400 synchronous collectives in the
            # step. The same layers on every rank: the step decides.
            first = (step // every if every > 0 else 0) * k % n
            self.hook.time_only = frozenset((first + i) % n
                                            for i in range(k))
        self.decision = d
        self.step = step
        self.hook.reset()
        self._comm0 = self.hook.comm.elapsed_ms
        self._bwd_start = 0.0
        self._lr_used = None
        self._t0 = time.perf_counter()
        return step

    def _apply_plan(self, step: int, d: Decision) -> None:
        """Puts decision d's residual plan in force from this step, on
        every rank at the same step (the decision's), migrating the
        residuals of the layers whose role changes."""
        if self.residuals is None or not self.residuals.planned:
            return
        plan = self.static_plan or Plan(*d.resid_plan())
        if plan == (self._plan or Plan.default(len(plan.group))):
            self.residuals.new_step()
            self._plan = plan
            return
        migrated = self.residuals.set_plan(plan)
        self._plan = plan
        self.plan_changes.append(PlanChange(step, d.seq, plan,
                                            tuple(migrated), d.reason))

    def residual_memory(self) -> tuple[int, int]:
        """(residual floats kept under the plan in force, floats of one
        whole residual per layer) over the layers with error feedback;
        (0, 0) for a compressor without residuals."""
        if self.residuals is None:
            return 0, 0
        return self.residuals.memory()

    def residual_memory_mean(self) -> tuple[float, float]:
        """residual_memory() averaged over the steps ended so far."""
        n = max(self._resid_steps, 1)
        return self._resid_kept / n, self._resid_full / n

    @property
    def seq(self) -> int:
        """Seq of the decision applied in the current (or last) step."""
        return self.decision.seq if self.decision is not None else 0

    def batch_size(self, default: int) -> int:
        """Per-rank batch size to use this step: the decision's, or
        ``default`` (the trainer's own) when it leaves it to the trainer."""
        d = self.decision or self.agent.decision()
        return d.batch_size or default

    def lr_scale(self) -> float:
        """Multiplier on the trainer's LR this step (1 by default)."""
        d = self.decision or self.agent.decision()
        return d.lr_scale

    def backward_ms(self) -> float:
        """The current step's backward time so far without the hook's:
        from the gradient of the model's output to the hook's last
        return, minus the time spent in the hook; 0 if unknown."""
        if not self._bwd_start or self.hook.last_end <= self._bwd_start:
            return 0.0
        ms = (self.hook.last_end - self._bwd_start) * 1e3 - \
            self.hook.hook_ms
        return max(ms, 0.0)

    def step_end(self, *, lr: float | None = None,
                 lr_next: float | None = None,
                 batch_size: int = 0, epoch: int = 0,
                 compute_ms: float | None = None,
                 backward_ms: float | None = None, **fields) -> None:
        """Ends the step (after the optimizer step).

        ``lr`` is the schedule's LR of this step and ``lr_next`` that of
        the next one, both before bellows's lr_scale (the Accordion rule
        looks for the schedule's decays). Left out, they come from the
        optimizer given to ``attach``, its first parameter group's
        ``lr`` (``param_groups[0]``; with several groups, give the one
        the schedule's decays show in first, or pass them explicitly),
        divided by this step's ``lr_scale()``: ``lr`` is its value when
        this step's backward pass began (the LR the optimizer step used),
        ``lr_next`` its value now, so that a scheduler stepped (or a
        new LR set) after the optimizer step and before step_end is the
        next step's LR; stepped after step_end, the drop shows one step
        later. An explicit ``lr`` without ``lr_next`` means lr_next =
        lr, as before. Without an optimizer, ``lr`` is required
        (TypeError). The floats sent and raw, bytes,
        communication and codec time the hook counted go to the agent;
        compute_ms defaults to the step's wall time minus communication,
        backward_ms to the backward pass's time outside the hook (see
        backward_ms()). Other keywords are StepInfo fields (e.g.
        mem_host_used=...).
        """
        if lr is None:
            now = self._optimizer_lr()
            if now is None:
                raise TypeError("step_end() needs lr=... when attach() "
                                "was given no optimizer")
            lr = now if self._lr_used is None else self._lr_used
            if lr_next is None:
                lr_next = now
        hook = self.hook
        hook.finish()
        counts = hook.counts
        comm_ms = hook.comm.elapsed_ms - self._comm0 + hook.direct_ms
        wall_ms = (time.perf_counter() - self._t0) * 1e3
        if compute_ms is None:
            compute_ms = max(wall_ms - comm_ms, 0.0)
        if backward_ms is None:
            backward_ms = self.backward_ms()
        if self.residuals is not None:
            for layer, st in self.residuals.take_stats().items():
                l1, l2, q50, q90, q99 = st
                self.agent.observe_residual(
                    layer, l1, l2, q50, q90, q99,
                    floats=self.residuals.floats(layer))
            kept, full = self.residuals.memory()
            self._resid_steps += 1
            self._resid_kept += kept
            self._resid_full += full
        # step_ms 0: the agent times the step itself, from step_begin.
        self.agent.step_end(
            step_ms=0.0, compute_ms=compute_ms, comm_ms=comm_ms,
            bytes_sent=counts.bytes_sent, floats_sent=counts.floats_sent,
            floats_raw=counts.floats_raw, lr=lr,
            lr_next=lr if lr_next is None else lr_next,
            batch_size=batch_size, epoch=epoch, backward_ms=backward_ms,
            codec_ms=hook.codec_ms, **fields)
        self.last = counts
        self.floats_sent += counts.floats_sent
        self.floats_raw += counts.floats_raw
        self.bytes_sent += counts.bytes_sent
        self.comm_ms += comm_ms
        self.codec_ms += hook.codec_ms

    def evaluation(self, accuracy: float = 0.0, loss: float = 0.0) -> None:
        """Records an evaluation (accuracy 0 to 1, loss) for the window in
        progress (see Agent.evaluation): call it before window_end()."""
        self.agent.evaluation(accuracy, loss)

    def window_end(self) -> None:
        """Ends the window now, between steps (see Agent.window_end)."""
        self.agent.window_end()

    def close(self) -> None:
        """Closes the agent (last report and BYE). The hook stays on the
        model, which must not be trained further. The agent lets go of
        the model, so that ``del`` of the caller's last reference frees
        it: a DistributedDataParallel model must be freed before its
        process group is destroyed (gloo's teardown can hang when the
        model outlives the group and is freed at interpreter exit)."""
        self._handle.remove()
        self.hook.finish()
        self.model = None
        self.agent.close()

    def __enter__(self) -> TorchAgent:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def launch_id(process_group=None) -> str:
    """The identity of this launch, the same on every rank of the group.

    $BELLOWS_RUN_ID, else $TORCHELASTIC_RUN_ID, else a random one rank 0
    draws and broadcasts (a collective: every rank must call it).
    torchrun sets TORCHELASTIC_RUN_ID to "none" when given no
    --rdzv-id: the same in every launch, so it is no identity (a plain
    relaunch would otherwise rejoin the ended run, its reports dropped
    as stale).
    """
    for var in ("BELLOWS_RUN_ID", "TORCHELASTIC_RUN_ID"):
        value = os.environ.get(var)
        if value and not (var == "TORCHELASTIC_RUN_ID" and value == "none"):
            return value
    token = [secrets.token_hex(8) if dist.get_rank(process_group) == 0
             else None]
    dist.broadcast_object_list(token, src=_group_rank0(process_group),
                               group=process_group)
    return str(token[0])


def _group_rank0(process_group) -> int:
    """The global rank of the group's rank 0."""
    if process_group is None:
        return 0
    return dist.get_global_rank(process_group, 0)


_TORCH_OPS = {"sum": "SUM", "max": "MAX", "min": "MIN"}


def group_allreduce(process_group=None):
    """An all-reduce for bellows.Agent's ``allreduce`` over the process
    group (None: the default group): reduces the float64 values in place
    with torch.distributed.all_reduce, through the group's device when its
    backend is NCCL."""
    device = None
    if dist.get_backend(process_group) == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())

    def allreduce(values, op: str) -> None:
        t = torch.from_numpy(values)
        if device is not None:
            t = t.to(device)
        dist.all_reduce(t, op=getattr(dist.ReduceOp, _TORCH_OPS[op]),
                        group=process_group)
        if device is not None:
            values[:] = t.cpu().numpy()

    return allreduce


def _aggregate_options(aggregate: str, node_ranks: int | None,
                       process_group, options: dict) -> None:
    """Fills the Agent options of ``aggregate`` ("rank", "node", "job"):
    the group's all-reduce from torch.distributed. With "node", the
    nodes are groups of node_ranks consecutive ranks (None:
    $LOCAL_WORLD_SIZE, as torchrun sets it), each a group made here by
    every rank (dist.new_group)."""
    options["aggregate"] = aggregate
    if aggregate == "rank":
        return
    if aggregate == "job":
        options["allreduce"] = group_allreduce(process_group)
        return
    if aggregate != "node":
        raise ValueError("aggregate must be 'rank', 'node' or 'job', not "
                         f"{aggregate!r}")
    if process_group is not None:
        raise ValueError("aggregate='node' works on the default process "
                         "group only")
    if node_ranks is None:
        node_ranks = int(os.environ.get("LOCAL_WORLD_SIZE", "0"))
    world = dist.get_world_size()
    if node_ranks <= 0 or world % node_ranks != 0:
        raise ValueError(f"aggregate='node' needs node_ranks dividing the "
                         f"world of {world} (got {node_ranks}; set "
                         "LOCAL_WORLD_SIZE or pass node_ranks)")
    # Every rank makes every node's group, in the same order, as
    # dist.new_group requires (dist.new_subgroups wants CUDA).
    groups = [dist.new_group(list(range(first, first + node_ranks)))
              for first in range(0, world, node_ranks)]
    options["aggregate_ranks"] = node_ranks
    options["allreduce"] = group_allreduce(
        groups[dist.get_rank() // node_ranks])


def attach(model, job: str | None = None, *, compressor="powersgd", seed: int = 0,
           quant_threshold: float | str = 0.5, per_layer: bool = True,
           align: bool = True, time_every: int = 16, raw_windows: int = 0,
           time_layers: int = 32,
           control: str | None = None, publish: str | None = None,
           window_steps: int = 0, layer_flags: int = 0,
           exp_hist=None, process_group=None, optimizer=None,
           aggregate: str = "rank", node_ranks: int | None = None,
           **agent_options) -> TorchAgent:
    """Attaches a DistributedDataParallel model to a new bellows agent.

    ``model`` is the DDP-wrapped model, after init_process_group, with no
    communication hook yet. ``job`` None takes $BELLOWS_JOB, and
    ``control``/``publish`` None $BELLOWS_CONTROL/$BELLOWS_PUBLISH when set
    (see Agent). ``compressor`` is "powersgd" (level = rank),
    "topk" (level = keep fraction), "1bit" or "2bit" (any level > 0
    quantises, with the value threshold ``quant_threshold``, MXNet's 0.5
    by default; "auto" for 2bit: each tensor scaled per step) or an
    object with the PowerSGD/TopK interface; ``seed``
    seeds PowerSGD's random Q and must be the same on every rank.
    ``per_layer`` reduces and times every tensor on its own, ``align``
    makes the ranks meet before the first one is timed (see
    CompressionHook). Steps outside a calibration are timed only when
    their number is a multiple of ``time_every`` (1: every step; 0:
    never) and some policy in force reads per-layer times (slimgc,
    perfmodel; not fixed or accordion alone); the others, compressed or
    not, send DDP's buckets
    asynchronously, overlapped with backward (see TorchAgent and
    CompressionHook). In such a sampled step (not in a calibration, which
    times every layer) at most ``time_layers`` layers are timed on their
    own (default 32; 0: all), the next ones in layer order at each
    sampled step, the rest of each bucket in one reduce: a model of
    hundreds of tensors would otherwise make that many synchronous
    collectives in the step. ``raw_windows`` sends every layer raw until that
    many windows have closed, whatever the decisions say: the run's own
    raw baseline, which the history then shows as windows sent raw
    (applied level 0) and `bellows report` and the demo's summary compare
    the compressed windows' step time with. ``window_steps`` closes a
    window every N steps (0: only at window_end()). ``layer_flags`` are
    added to every layer (e.g. bellows.LAYER_MOMENTUM). ``exp_hist``
    selects the layers that report the 256-bin histogram of their gradients' float32 exponents each
    window (LAYER_EXP_HIST, what the gcomp policy builds its tables
    from; float16 and bfloat16 gradients count in the bins of their
    float32 widening): None (default, none: nothing is measured or sent),
    True (every tensor of 2 or more dimensions), a collection of layer
    names, or a callable (name, parameter) -> bool. Remaining keywords go
    to bellows.Agent
    (decision_timeout_ms, heartbeat_ms, log_level, server_key and
    client_key for a bellowsd that wants CURVE keys, stats_precision=
    "exact" for gradient sums within 3e-14 instead of the default 1e-6,
    ...).

    ``optimizer``, the model's torch.optim optimizer, lets
    ``step_end()`` read the step's LR and the next one from it (its
    first parameter group; see TorchAgent.step_end). With "gcomp"
    (bellows.compress.GComp), the table in force comes from the agent
    (``Agent.codec_table()``, what bellowsd's gcomp policy proposed) and
    ``optimizer``, when given, also sets each value's truncation level
    from the paper's delta (SGD, momentum, Nesterov, Adam, AdamW);
    without it every value is sent losslessly.

    The launch's identity (``run_id``, see bellows.Agent) is, unless given,
    $BELLOWS_RUN_ID or $TORCHELASTIC_RUN_ID, else one rank 0 draws and
    broadcasts over the process group, so that every rank of this launch
    sends the same one and a relaunch a new one.

    ``aggregate`` "job" reduces each window's statistics over the process
    group with torch.distributed before rank 0 alone reports them; "node"
    does so within each node (groups of ``node_ranks`` consecutive ranks,
    None: $LOCAL_WORLD_SIZE), one report per node; "rank" (default) sends
    every rank's own. Every rank still applies each decision at its step;
    the reduction costs three small all-reduces per window (docs/agent.md,
    "Aggregation inside the job").

    Rank and world come from the process group. Raises BellowsError if the
    agent cannot open, ValueError for an unknown compressor or a bad
    threshold or a negative time_every. Returns the TorchAgent the
    training loop drives.
    """
    if not hasattr(model, "register_comm_hook"):
        raise TypeError("bellows.torch.attach needs a "
                        "DistributedDataParallel model")
    if time_every < 0:
        raise ValueError(f"time_every must be >= 0, not {time_every}")
    if raw_windows < 0:
        raise ValueError(f"raw_windows must be >= 0, not {raw_windows}")
    if time_layers < 0:
        raise ValueError(f"time_layers must be >= 0, not {time_layers}")
    if isinstance(compressor, str):
        compressor = make_compressor(compressor, seed, quant_threshold)
    elif not isinstance(compressor, (PowerSGD, TopK)) and \
            not hasattr(compressor, "reduce"):
        raise TypeError("compressor must be 'powersgd', 'topk', '1bit', "
                        "'2bit', 'gcomp' or have reduce(items, comm)")
    params = [p for p in _unwrap(model).parameters() if p.requires_grad]
    table = layer_table(model, layer_flags, exp_hist)
    if agent_options.get("run_id") is None:
        agent_options["run_id"] = launch_id(process_group)
    _aggregate_options(aggregate, node_ranks, process_group, agent_options)
    agent = Agent(job, dist.get_rank(process_group),
                  dist.get_world_size(process_group), table,
                  control=control, publish=publish,
                  window_steps=window_steps, **agent_options)

    def observe(layer: int, grad: torch.Tensor) -> None:
        if not agent.in_step:
            raise RuntimeError("bellows: a backward pass outside a step: "
                               "call step_begin() before the forward pass")
        agent.observe(layer, grad)

    if hasattr(compressor, "table_source"):  # GComp
        compressor.table_source = agent.codec_table
        compressor.params = params
        if optimizer is not None:
            compressor.optimizer = optimizer

    try:
        hook = CompressionHook(params, compressor,
                               ProcessGroupComm(process_group),
                               observe=observe, per_layer=per_layer,
                               on_send=agent.comm_layer,
                               on_collective=agent.comm_bucket,
                               align=align,
                               observe_many=agent.bucket_observer())
        hook.register(model)
        return TorchAgent(model, agent, hook, params, time_every,
                          optimizer=optimizer, raw_windows=raw_windows,
                          time_layers=time_layers)
    except BaseException:
        agent.close()
        raise
