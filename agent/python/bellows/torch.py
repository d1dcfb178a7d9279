"""bellows.torch - run a DistributedDataParallel model under bellows.

``attach(ddp_model, job=...)`` opens a bellows agent for this rank with the
model's parameters as layers (names and shapes) and installs a DDP
communication hook that, for every bucket:

1. hands each local gradient, before any communication or error feedback,
   to the agent (the statistics Accordion's rule needs);
2. reduces the bucket tensor by tensor, each at the level in force for the
   current step (bellows.compress: PowerSGD rank, top-k keep fraction, or
   1-bit / 2-bit quantisation at any level > 0); a layer goes raw when
   ``Agent.send_mode`` says so for this step (level 0, under the
   decision's size threshold, compression gate off; during a calibration
   the compressible layers alternate, compressed on even steps and raw on
   odd ones), and 1-D tensors always do;
3. times each tensor's send (collectives, and encode + decode for a
   compressed one) and reports it with ``Agent.comm_layer``, and every
   collective (bytes, time) with ``Agent.comm_bucket``;
4. counts the floats this rank sent and what raw would have sent.

Steps 2 and 3 run only in a *timed* step: a calibration, a step that
compresses a layer, and one step in ``time_every`` (``attach``). In the
other steps a bucket whose layers all go raw (and hold no error-feedback
residual) is handed to the process group as DDP's own hook does: one
asynchronous all-reduce of the bucket, whose future the hook returns, so
that communication overlaps the rest of backward and nothing is copied
or timed per layer.

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

In a timed step the hook runs its collectives synchronously and returns
a completed future: waiting on a future inside another future's callback,
as torch 1.13's powerSGD_hook does, deadlocks on gloo with several
buckets. A bucket handed over directly waits on nothing: its future's
only callback divides the sum by the world.

This module is named after torch and imports it; absolute imports (the
default) make ``import torch`` below the real one.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import time
from typing import Callable, Sequence

import torch
import torch.distributed as dist

from bellows import _lib
from bellows.agent import Agent, Decision, Layer
from bellows.compress import (
    Counts,
    Item,
    PowerSGD,
    ProcessGroupComm,
    TopK,
    make_compressor,
)
from bellows.resireduce import Plan

__all__ = ["CompressionHook", "LevelChange", "PlanChange", "TorchAgent",
           "attach", "group_allreduce", "layer_table"]


def _unwrap(model: torch.nn.Module) -> torch.nn.Module:
    return model.module if hasattr(model, "module") else model


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


class CompressionHook:
    """The DDP communication hook: every tensor at its own level.

    ``params`` are the model's trainable parameters in layer order;
    ``levels`` holds the level in force for each layer and is set by the
    owner before each backward pass (TorchAgent does it in step_begin,
    with 0 for every layer that must go raw). ``observe(layer, grad)``,
    if given, sees each local gradient first.

    With ``per_layer`` (the default) each tensor of a bucket is reduced
    on its own, so that its collectives and codec time are its own and
    ``on_send(layer, compressed, comm_ms, codec_ms)`` gets them (codec_ms
    is the reduce's wall time minus its collectives, 0 for a raw send).
    Without, a bucket goes to the compressor in one call (fewer, larger
    collectives; no per-layer times). ``on_collective(nbytes, compressed,
    ms)`` gets every collective this rank made, with the bytes it put in.

    With ``align``, the first bucket after each reset() starts with a
    one-float all-reduce that is timed into ``comm.elapsed_ms`` but not
    reported: the ranks arrive at their first collective of a step at
    different times (their forward and backward passes do not take
    equally long), and without it that wait would be counted as the
    first layer's communication time.

    ``timed`` (True unless the owner clears it, per step) selects the
    path above for every bucket. With ``timed`` False, a bucket whose
    layers are all raw (level 0, or not compressed at their level) and
    hold no residual in ``compressor.errors`` goes to the process group
    directly: ``observe`` still sees every gradient, then one
    asynchronous sum all-reduce of DDP's bucket buffer is started and its
    future returned, divided by the world in its callback, as DDP's
    default hook does (no copy, no wait, no per-layer times, no
    ``on_send`` or ``on_collective``). A compressor without ``errors``
    (a user's) always takes the timed path. ``direct`` counts those
    buckets and ``direct_ms`` their collectives' busy time: from the
    later of the all-reduce's start and the previous direct one's end,
    to its end (the collectives overlap backward, so this is not time
    the step waited).

    ``counts``, ``codec_ms`` (encode + decode), ``hook_ms`` (wall time
    inside the hook) and ``last_end`` (perf_counter() when the hook last
    returned) accumulate until the owner reads and resets them.
    ``register(ddp_model)`` installs it.
    """

    def __init__(self, params: Sequence[torch.Tensor], compressor,
                 comm: ProcessGroupComm,
                 observe: Callable[[int, torch.Tensor], None] | None = None,
                 *, per_layer: bool = True,
                 on_send: Callable[[int, bool, float, float], None]
                 | None = None,
                 on_collective: Callable[[int, bool, float], None]
                 | None = None, align: bool = False):
        # Parameters are recognised by their storage: bucket.parameters()
        # returns the model's own parameter tensors.
        self.layer_of = {p.data_ptr(): i for i, p in enumerate(params)}
        self.levels = [0.0] * len(params)
        self.compressor = compressor
        self.comm = comm
        self.observe = observe
        self.per_layer = per_layer
        self.on_send = on_send
        self.on_collective = on_collective
        if on_collective is not None:
            comm.record = True
        self.align = align
        self._aligned = False
        self.timed = True
        self.direct = 0
        self.direct_ms = 0.0
        self._direct_end = 0.0
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

    def reset(self) -> None:
        """Zeroes the counters (counts, codec_ms, hook_ms, direct,
        direct_ms)."""
        self.counts = Counts()
        self.codec_ms = 0.0
        self.hook_ms = 0.0
        self.direct = 0
        self.direct_ms = 0.0
        self._direct_end = 0.0
        self._aligned = False

    def _align(self, device) -> None:
        """The step's first collective: waits for every rank, unreported."""
        self._aligned = True
        comm = self.comm
        n0 = len(comm.samples) if self.on_collective is not None else 0
        comm.all_reduce(torch.zeros(1, device=device))
        if self.on_collective is not None:
            del comm.samples[n0:]

    def _compressed(self, it: Item) -> bool:
        test = getattr(self.compressor, "compresses", None)
        if test is None:
            return it.level > 0
        return test(tuple(it.grad.shape), it.level)

    def _raw_only(self, items: list[Item]) -> bool:
        """True if every item goes raw and holds no residual to flush."""
        errors = getattr(self.compressor, "errors", None)
        if errors is None:
            return False
        residuals = getattr(self.compressor, "residuals", None)
        for it in items:
            held = (residuals.holds(it.layer) if residuals is not None
                    else it.layer in errors)
            if held or self._compressed(it):
                return False
        return True

    def _direct(self, buf: torch.Tensor, items: list[Item]):
        """Starts the sum all-reduce of DDP's bucket ``buf``; returns its
        future, whose value is divided by the world in the callback."""
        n = sum(it.grad.numel() for it in items)
        self.counts += Counts(floats_sent=n, floats_raw=n,
                              bytes_sent=n * buf.element_size())
        self.direct += 1
        world = self.comm.world
        t0 = time.perf_counter()
        work = dist.all_reduce(buf, group=self.comm.group, async_op=True)

        def divide(fut):
            # On the backend's thread, once the sum is in buf: no wait.
            end = time.perf_counter()
            self.direct_ms += (end - max(t0, self._direct_end)) * 1e3
            self._direct_end = end
            return fut.value()[0].div_(world)

        return work.get_future().then(divide)

    def _reduce(self, group: list[Item]) -> None:
        """Reduces ``group`` in one compressor call, timed."""
        comm = self.comm
        compressed = any(self._compressed(it) for it in group)
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
        items = []
        for p, g in zip(bucket.parameters(), bucket.gradients()):
            layer = self.layer_of.get(p.data_ptr())
            if layer is None:
                raise RuntimeError("bellows: a DDP bucket holds a parameter "
                                   "that is not in the layer table (was the "
                                   "model changed after attach?)")
            if self.observe is not None:
                self.observe(layer, g)
            items.append(Item(layer, g, self.levels[layer]))
        if not self.timed and self._raw_only(items):
            fut = self._direct(buf, items)
            self.calls += 1
            self.last_end = time.perf_counter()
            self.hook_ms += (self.last_end - t_in) * 1e3
            return fut
        if self.align and not self._aligned:
            self._align(buf.device)
        if self.per_layer:
            for it in items:
                self._reduce([it])
        elif items:
            self._reduce(items)
        self.calls += 1
        if buf.is_cuda:
            fut = torch.futures.Future(devices=[buf.device])
        else:
            fut = torch.futures.Future()
        fut.set_result(buf)
        self.last_end = time.perf_counter()
        self.hook_ms += (self.last_end - t_in) * 1e3
        return fut


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
    when a layer is compressed, and at every step that is a multiple of
    ``time_every`` (0: never otherwise; 1: every step).
    """

    def __init__(self, model, agent: Agent, hook: CompressionHook,
                 params: Sequence[torch.Tensor], time_every: int = 1,
                 optimizer=None):
        if time_every < 0:
            raise ValueError(f"time_every must be >= 0, not {time_every}")
        self.model = model
        self.optimizer = optimizer
        # The optimizer's LR when this step's backward pass began (before
        # the optimizer step and any scheduler step); None: not seen.
        self._lr_used: float | None = None
        self.time_every = time_every
        self.timed = True
        self.agent = agent
        self.hook = hook
        self.layers = agent.layers
        self._params = list(params)
        self._bytes = [p.numel() * p.element_size() for p in self._params]
        self._ndim = [p.dim() for p in self._params]
        self._base: list[float] = []
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

    def step_begin(self) -> int:
        """Begins a step (before the forward pass); returns its number.

        Makes the decision in force for the step current and gives this
        step's levels to the hook (the send mode of each layer can change
        from step to step during a calibration). May wait at a due apply
        step (see bellows.Agent.step_begin).
        """
        step = self.agent.step_begin()
        d = self.agent.decision()
        if self.decision is None or d.seq != self.decision.seq:
            self._base = [0.0 if self._ndim[i] < 2 else lv
                          for i, lv in enumerate(d.levels)]
            levels = self.effective_levels(d)
            if not self.changes or tuple(levels) != self.changes[-1].levels:
                self.changes.append(LevelChange(step, d.seq, d.window,
                                                tuple(levels), d.reason))
            self._apply_plan(step, d)
            self.agent.applied_levels(levels)
        elif self.residuals is not None:
            self.residuals.new_step()
        # The library decides each layer's mode per step, from the
        # decision in force: the same on every rank.
        levels = self._step_levels()
        self.hook.levels = levels
        self.calibrating = self.agent.calibrating()
        # Per-layer times are what slimgc (calibrations, drift) and
        # perfmodel (raw collectives) fit: every compressing step, and a
        # sample of the others; the rest go at DDP's own speed.
        every = self.time_every
        self.timed = (self.calibrating or any(lv > 0 for lv in levels)
                      or (every > 0 and step % every == 0))
        self.hook.timed = self.timed
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
        counts = hook.counts
        comm_ms = hook.comm.elapsed_ms - self._comm0 + hook.direct_ms
        wall_ms = (time.perf_counter() - self._t0) * 1e3
        if compute_ms is None:
            compute_ms = max(wall_ms - comm_ms, 0.0)
        if backward_ms is None:
            backward_ms = self.backward_ms()
        if self.residuals is not None:
            for layer, st in self.residuals.take_stats().items():
                self.agent.observe_residual(
                    layer, *st, floats=self.residuals.floats(layer))
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
        self.model = None
        self.agent.close()

    def __enter__(self) -> "TorchAgent":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def launch_id(process_group=None) -> str:
    """The identity of this launch, the same on every rank of the group.

    $BELLOWS_RUN_ID, else $TORCHELASTIC_RUN_ID, else a random one rank 0
    draws and broadcasts (a collective: every rank must call it).
    """
    for var in ("BELLOWS_RUN_ID", "TORCHELASTIC_RUN_ID"):
        if os.environ.get(var):
            return os.environ[var]
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
           quant_threshold: float = 0.5, per_layer: bool = True,
           align: bool = True, time_every: int = 16,
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
    by default) or an object with the PowerSGD/TopK interface; ``seed``
    seeds PowerSGD's random Q and must be the same on every rank.
    ``per_layer`` reduces and times every tensor on its own, ``align``
    makes the ranks meet before the first one is timed (see
    CompressionHook). Steps that compress nothing and are not in a
    calibration are timed only when their number is a multiple of
    ``time_every`` (1: every step, as before; 0: never); the others hand
    DDP's buckets to the process group as DDP does (see TorchAgent and
    CompressionHook). ``window_steps`` closes a window every N steps (0:
    only at window_end()). ``layer_flags`` are added to every layer (e.g.
    bellows.LAYER_MOMENTUM). ``exp_hist`` selects the layers that report
    the 256-bin histogram of their gradients' float32 exponents each
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
                               align=align)
        hook.register(model)
        return TorchAgent(model, agent, hook, params, time_every,
                          optimizer=optimizer)
    except BaseException:
        agent.close()
        raise
