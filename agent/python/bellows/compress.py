"""compress - per-tensor gradient compressors: PowerSGD, top-k, 1-bit, 2-bit,
GComp.

Pure torch, independent of DDP and of the agent, so each can be tested on
fixed tensors against a reference. A compressor reduces one group of
gradient tensors (a DDP bucket) across the ranks of a job: it takes every
rank's local gradients and leaves in each the average over the ranks, as
reconstructed from what was sent. Every tensor has its own level (0 =
sent raw) and its own state, keyed by its layer index:

- PowerSGD (Vogels, Karimireddy, Jaggi, NeurIPS 2019), rank r = int(level)
  per tensor, viewed as a matrix [shape[0], numel / shape[0]] (a conv
  weight [out, in, kh, kw] becomes [out, in*kh*kw]). With error feedback
  and warm start, no extra power iterations, as the paper's Algorithm 1
  and the Accordion authors' code:

      M = grad + error
      P = M Q                    (Q: last step's, the warm start)
      all-reduce(P) (sum); orthogonalise P
      Q = M^T P; all-reduce(Q); Q /= world
      grad <- P Q^T;  error = M - P Q^T

  A tensor whose rank changes gets a fresh random Q (the same on every
  rank: drawn from a generator seeded by ``query_seed``) and keeps its
  error. It sends r*(m + n) floats per step (P, then Q).
- top-k, keep fraction = level in (0, 1] per tensor, with error feedback:
  each rank keeps the k = round(level * numel) entries of M = grad + error
  largest in magnitude, sends their values and int32 indices (2k floats)
  with all-gather, and every rank averages the sparse tensors of all
  ranks; error = M minus what this rank sent.
- 1-bit and 2-bit quantisation with error feedback (OneBit, TwoBit), as
  MXNet's ``1bit`` and ``2bit`` gradient compression (the SlimGC paper's
  compressors, threshold 0.5 by default; see the classes): any level > 0
  compresses. The codes are packed (32 or 16 values per float32 word)
  and all-gathered, since codes cannot be summed; every rank decodes and
  averages all ranks' codes. Standard error feedback: the residual is
  grad + residual minus what was sent. CPU tensors (float32, float16,
  bfloat16) are encoded and decoded by libbellows' C codecs
  (bellows/codec.h) on the tensors' memory, CUDA tensors by their CUDA
  twins when libbellows was built with CUDA, bit for bit the torch
  code's results; that code stays as the reference and runs for other
  tensors or without the library. ``last_path`` and ``paths`` say which
  ran ("c", "cuda" or "torch").
- GComp (Li et al., SoCC '24), any level > 0: near-lossless, Huffman-coded
  exponents with a table every rank shares and mantissas truncated per
  value from the optimizer's delta; all-gathered, since codes are not
  summable (see the class).
- Level 0 (and, for PowerSGD, tensors of fewer than 2 dimensions): raw,
  one sum all-reduce of every such tensor in the group, divided by the
  world. A raw tensor that still has an error-feedback residual from
  compressed steps sends grad + residual once and drops the residual.

Collectives are synchronous and in a fixed order (raw and P together in
one all-reduce, then Q; or raw, then one all-gather for top-k and the
quantisers), the same on
every rank as long as every rank gives the same levels: what
bellows_agent_step_begin guarantees.
"""

from __future__ import annotations

import ctypes
import dataclasses
import math
import os
import time
from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist

from bellows.resireduce import Residuals

__all__ = [
    "COMPRESSORS",
    "Communicator",
    "Counts",
    "Flight",
    "GComp",
    "Item",
    "OneBit",
    "PowerSGD",
    "ProcessGroupComm",
    "TopK",
    "TwoBit",
    "make_compressor",
    "orthogonalize",
    "query_seed",
    "set_codec_threads",
]


@dataclasses.dataclass
class Item:
    """One tensor of a group to reduce.

    ``grad`` is this rank's local gradient; it receives the result in
    place. ``level`` is the tensor's compression level (0 = raw).
    """

    layer: int
    grad: torch.Tensor
    level: float


@dataclasses.dataclass
class Counts:
    """What one reduce sent from this rank."""

    floats_sent: int = 0  # elements this rank put on the wire
    bytes_sent: int = 0  # their bytes
    floats_raw: int = 0  # elements an uncompressed reduce would send

    def __iadd__(self, other: Counts) -> Counts:
        self.floats_sent += other.floats_sent
        self.bytes_sent += other.bytes_sent
        self.floats_raw += other.floats_raw
        return self


class Flight:
    """One group's reduce in flight: what a compressor's ``start``
    returns, for the overlapped path of a DDP hook.

    ``start`` runs on the thread that runs backward (the hook's): it
    encodes, sends the compressed bytes and the raw tensors with
    asynchronous collectives and returns at once. ``counts`` is what this
    rank sends (known when it returns); ``codec_ms`` the encode time
    spent there. The decode runs in the collectives' callbacks, on the
    backend's thread, and adds to ``decode_ms``; ``future`` completes
    once every item's gradient holds the average (its value means
    nothing; a failing stage makes it an error).

    A compressor whose second collective needs the first one's result
    (PowerSGD's Q after P) leaves that stage to ``advance()``: the owner
    calls it on the same thread before it starts any other collective
    (at the next bucket), so that every rank starts its collectives in
    the same order; after the last one it calls it in the first stage's
    callback instead (``then_advance``), where nothing else starts.
    ``finish()``, on the owner's thread once ``future`` is done, waits
    for the callbacks still unwinding on the backend's thread (``tails``)
    and hands back what only that thread may touch (the residual plan's
    state).
    """

    def __init__(self, counts: Counts | None = None, device=None):
        self.counts = counts if counts is not None else Counts()
        self.codec_ms = 0.0
        self.decode_ms = 0.0
        self._parts: list[torch.futures.Future] = []
        self._stage = None  # callable: the next stage, run by advance()
        self._gate: torch.futures.Future | None = None  # what it needs
        self._done: torch.futures.Future | None = None  # set by a stage
        self._finish: list = []
        self._device = device
        self.future: torch.futures.Future | None = None
        # Futures of callbacks that run after the flight's future is set
        # (a stage started in a callback, the decode that completes the
        # flight): finish() waits for them, so that no callback of the
        # step is still running on the backend's thread when the owner
        # goes on (and, say, destroys the process group).
        self.tails: list[torch.futures.Future] = []

    def part(self, fut: torch.futures.Future) -> None:
        """Adds a future the flight's completion waits for."""
        self._parts.append(fut)

    def stage(self, gate: torch.futures.Future, fn) -> None:
        """Leaves ``fn()`` to advance(), once ``gate`` is done; fn starts
        the next collectives and completes the flight through
        ``complete``/``fail``."""
        self._gate, self._stage = gate, fn
        self._done = _future(self._device)
        self._parts.append(self._done)

    def complete(self) -> None:
        assert self._done is not None  # stage() made it
        self._done.set_result(None)

    def fail(self, e: BaseException) -> None:
        assert self._done is not None
        self._done.set_exception(e)

    def on_finish(self, fn) -> None:
        """Runs ``fn()`` in finish()."""
        self._finish.append(fn)

    def seal(self) -> Flight:
        """Builds ``future`` from the parts; returns self."""
        parts = self._parts
        if not parts:
            self.future = _future(self._device)
            self.future.set_result(None)
        elif len(parts) == 1:
            self.future = parts[0]
        else:
            def check(fut):
                for f in fut.value():
                    f.wait()  # done: raises a part's error
                return None

            self.future = torch.futures.collect_all(parts).then(check)
        return self

    @property
    def pending(self) -> bool:
        """True while a stage waits for advance()."""
        return self._stage is not None

    def advance(self) -> None:
        """Runs the stage left for later, waiting for its gate first (on
        the owner's thread it may block; in the gate's callback it does
        not). A failure completes the flight with it."""
        fn, self._stage = self._stage, None
        if fn is None:
            return
        try:
            self._gate.wait()
            fn()
        except BaseException as e:  # noqa: BLE001 - to the future
            if not self._done.done():
                self.fail(e)

    def then_advance(self) -> None:
        """Runs advance() in the gate's callback (the last bucket)."""
        if self._stage is None:
            return

        def go(_fut):
            self.advance()

        self.tails.append(self._gate.then(go))

    def finish(self) -> None:
        tails, self.tails = self.tails, []
        for t in tails:
            try:
                t.wait()
            except Exception:  # noqa: BLE001 - the flight's future has it
                pass
        fns, self._finish = self._finish, []
        for fn in fns:
            fn()


def _future(device=None) -> torch.futures.Future:
    """An empty future, on ``device``'s streams when it is a CUDA one."""
    if device is not None and device.type == "cuda":
        return torch.futures.Future(devices=[device])
    return torch.futures.Future()


class Communicator:
    """Collectives over the ranks of one job, synchronous.

    ``all_reduce`` sums ``tensor`` over the ranks in place;
    ``all_gather`` returns every rank's ``tensor`` (same shape on all
    ranks), in rank order. ``world`` is the number of ranks.
    """

    world: int = 1

    def all_reduce(self, tensor: torch.Tensor) -> None:
        raise NotImplementedError

    def all_gather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        raise NotImplementedError


class ProcessGroupComm(Communicator):
    """torch.distributed collectives on a process group, run synchronously.

    Synchronous on purpose: a DDP communication hook that waits on a
    future inside another future's callback deadlocks on gloo when the
    model has several buckets (torch 1.13's powerSGD_hook does). Blocking
    calls inside the hook, which then returns a completed future, do not.
    ``elapsed_ms`` accumulates the wall time spent in collectives; with
    ``record`` set, ``samples`` also gets (bytes this rank put in, ms) of
    every collective, for the owner to take.
    """

    def __init__(self, group=None):
        self.group = group
        self.world = dist.get_world_size(group)
        self.elapsed_ms = 0.0
        self.record = False
        self.samples: list[tuple[int, float]] = []
        self.spans: list[tuple[float, float]] = []

    def _done(self, tensor: torch.Tensor, t0: float) -> None:
        ms = (time.perf_counter() - t0) * 1e3
        self.elapsed_ms += ms
        if self.record:
            self.samples.append((tensor.numel() * tensor.element_size(),
                                 ms))

    def all_reduce(self, tensor: torch.Tensor) -> None:
        t0 = time.perf_counter()
        dist.all_reduce(tensor, group=self.group)
        self._done(tensor, t0)

    def all_gather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        t0 = time.perf_counter()
        out = [torch.empty_like(tensor) for _ in range(self.world)]
        dist.all_gather(out, tensor, group=self.group)
        self._done(tensor, t0)
        return out

    # The asynchronous forms, for the overlapped path of a DDP hook: the
    # collective is started and its future returned, nothing waits. Every
    # rank must start the same collectives in the same order, from one
    # thread (the one running backward), as for the synchronous ones.
    # ``spans`` gets (start, end) of each, perf_counter() seconds, for the
    # owner to take: the collectives' busy time, not time anyone waited.

    def all_reduce_async(self, tensor: torch.Tensor, after=None
                         ) -> torch.futures.Future:
        """Starts the sum all-reduce of ``tensor`` in place; returns a
        future completed once the sum is in ``tensor`` and ``after(fut)``
        (if given, on the backend's thread) has returned its value."""
        t0 = time.perf_counter()
        work = dist.all_reduce(tensor, group=self.group, async_op=True)
        return work.get_future().then(self._span(t0, after))

    def all_gather_async(self, tensor: torch.Tensor, after=None
                         ) -> tuple[list[torch.Tensor], torch.futures.Future]:
        """Starts the all-gather of ``tensor``; returns every rank's
        (rank order; filled once the future completes) and the future,
        completed once ``after(fut, gathered)`` (if given) has returned."""
        out = [torch.empty_like(tensor) for _ in range(self.world)]
        t0 = time.perf_counter()
        work = dist.all_gather(out, tensor, group=self.group, async_op=True)
        then = None if after is None else (lambda fut: after(fut, out))
        return out, work.get_future().then(self._span(t0, then))

    def _span(self, t0: float, after):
        """The one callback of an asynchronous collective: records its
        span, then runs the caller's continuation."""
        spans = self.spans

        def done(fut):
            # On the backend's thread: a list append is atomic.
            spans.append((t0, time.perf_counter()))
            return fut.value() if after is None else after(fut)

        return done

    def take_busy_ms(self) -> float:
        """The union of the asynchronous collectives' spans since the last
        call, in ms (overlapping spans count once); clears them."""
        spans, self.spans = self.spans, []
        total, end = 0.0, 0.0
        for a, b in sorted(spans):
            if b > end:
                total += b - max(a, end)
                end = b
        return total * 1e3


def orthogonalize(matrix: torch.Tensor, eps: float = 1e-8) -> None:
    """Gram-Schmidt on the columns of ``matrix`` [m, r], in place.

    ``eps`` keeps an all-zero column (a layer without gradient) finite.
    """
    r = matrix.shape[1]
    for i in range(r):
        col = matrix[:, i:i + 1]
        col /= col.norm() + eps
        if i + 1 < r:
            rest = matrix[:, i + 1:]
            rest -= (col.t() @ rest) * col


def query_seed(seed: int, layer: int, inits: int) -> int:
    """Seed of the random Q of ``layer``'s ``inits``-th initialisation.

    Depends only on values every rank shares, so every rank draws the
    same Q without communicating it.
    """
    return ((seed * 1_000_003 + layer) * 1009 + inits) % (1 << 63)


def _matrix_shape(shape: Sequence[int]) -> tuple[int, int]:
    m = shape[0]
    n = 1
    for d in shape[1:]:
        n *= d
    return m, n


class _Base:
    """Shared raw path and error memory of the compressors."""

    def __init__(self):
        self.errors: dict[int, torch.Tensor] = {}
        # Which code encoded the last tensor ("c", "cuda", "torch"; None
        # before any), and how many tensors each encoded.
        self.last_path: str | None = None
        self.paths: dict[str, int] = {"c": 0, "cuda": 0, "torch": 0}
        # The residual plan's state (shared and reduced residuals); the
        # layers it leaves their own residual keep it in self.errors.
        self.residuals = Residuals(self.errors)

    def _used(self, path: str) -> None:
        self.last_path = path
        self.paths[path] += 1

    def level_floats(self, shape: Sequence[int], level: float) -> int:
        """Floats one rank sends for a tensor of ``shape`` at ``level``."""
        raise NotImplementedError

    def compresses(self, shape: Sequence[int], level: float) -> bool:
        """True if a tensor of ``shape`` at ``level`` is sent compressed
        (False: raw)."""
        return level > 0

    def _raw(self, raw: list[Item], counts: Counts) -> torch.Tensor | None:
        """Flattens the raw tensors (grad + any residual) into one."""
        if not raw:
            return None
        parts = []
        for it in raw:
            g = it.grad.reshape(-1)
            err = self.residuals.raw(it.layer)
            parts.append(g if err is None else g + err.reshape(-1))
            counts.floats_sent += g.numel()
            counts.bytes_sent += g.numel() * g.element_size()
        return torch.cat(parts) if len(parts) > 1 else parts[0].clone()

    def _send_raw(self, raw: list[Item], counts: Counts,
                  comm: Communicator) -> None:
        """All-reduces the raw tensors in one buffer and writes them back,
        averaged."""
        flat_raw = self._raw(raw, counts)
        if flat_raw is not None:
            comm.all_reduce(flat_raw)
            self._unflatten(raw, flat_raw, comm.world)

    def _start_raw(self, raw: list[Item], counts: Counts,
                   comm: ProcessGroupComm, fl: Flight,
                   flat: torch.Tensor | None = None) -> None:
        """Starts the all-reduce of the raw tensors in one buffer (``flat``
        when _raw() already made it); their averages are written back in
        its callback."""
        if flat is None:
            flat = self._raw(raw, counts)
        if flat is None:
            return
        world = comm.world

        def back(fut):
            fut.value()
            self._unflatten(raw, flat, world)

        fl.part(comm.all_reduce_async(flat, back))

    @staticmethod
    def _unflatten(raw: list[Item], flat: torch.Tensor, world: int) -> None:
        """Copies the summed raw tensors back, averaged."""
        off = 0
        for it in raw:
            n = it.grad.numel()
            it.grad.copy_(flat[off:off + n].view_as(it.grad)).div_(world)
            off += n

    def reset(self, layer: int | None = None) -> None:
        """Forgets the state of ``layer`` (all layers if None)."""
        if layer is None:
            self.errors.clear()
            old = self.residuals
            self.residuals = Residuals(self.errors)
            self.residuals.plan, self.residuals.shapes = old.plan, old.shapes
            self.residuals.planned = old.planned
            self.residuals.observing = old.observing
        else:
            self.errors.pop(layer, None)


class _Gathered(_Base):
    """A compressor whose codes are all-gathered (they cannot be summed):
    top-k and the quantisers. Subclasses split a group into raw and
    compressed items (``_split``, counting every item's raw floats),
    encode the compressed ones into one payload (``_encode_all``,
    counting what is sent, residuals updated) and decode every rank's
    payload into the items' gradients, averaged (``_decode_all``)."""

    def reduce(self, items: Sequence[Item], comm: Communicator) -> Counts:
        """Reduces ``items`` across the ranks; returns what was sent."""
        counts = Counts()
        raw, comp = self._split(items, counts)
        self._send_raw(raw, counts, comm)
        if comp:
            gathered = comm.all_gather(self._encode_all(comp, counts))
            self._decode_all(comp, gathered, comm.world)
        return counts

    def start(self, items: Sequence[Item], comm: ProcessGroupComm) -> Flight:
        """Starts reducing ``items`` with asynchronous collectives (see
        Flight): the raw tensors' all-reduce, then, once encoded here,
        one all-gather of every compressed item's codes, decoded in its
        callback. The same arithmetic as reduce()."""
        counts = Counts()
        fl = Flight(counts, items[0].grad.device if items else None)
        raw, comp = self._split(items, counts)
        self._start_raw(raw, counts, comm, fl)
        if comp:
            t1 = time.perf_counter()
            payload = self._encode_all(comp, counts)
            fl.codec_ms += (time.perf_counter() - t1) * 1e3
            world = comm.world

            def decode(f, gathered):
                f.value()
                t = time.perf_counter()
                self._decode_all(comp, gathered, world)
                fl.decode_ms += (time.perf_counter() - t) * 1e3

            fl.part(comm.all_gather_async(payload, decode)[1])
        return fl.seal()

    def _split(self, items, counts):
        raise NotImplementedError

    def _encode_all(self, comp, counts) -> torch.Tensor:
        raise NotImplementedError

    def _decode_all(self, comp, gathered, world: int) -> None:
        raise NotImplementedError


# The buffers of a _PsgdStep before _project sets them.
_NO_TENSOR = torch.empty(0)


class _PsgdStep:
    """One PowerSGD reduce between its stages (PowerSGD._project, _power,
    _decode, _end)."""

    def __init__(self):
        self.counts = Counts()
        self.raw: list[Item] = []
        self.low: list[tuple[Item, int]] = []
        self.flat_raw: torch.Tensor | None = None
        self.nraw = 0
        self.ms: list[torch.Tensor] = []  # M, then the residual
        self.qs: list[torch.Tensor] = []
        self.poff: list[int] = []
        self.qoff: list[int] = []
        self.nat: list[bool] = []
        # Set by _project before any use.
        self.buf: torch.Tensor = _NO_TENSOR  # raw values, then every P
        self.qbuf: torch.Tensor = _NO_TENSOR  # every Q
        self.groups: dict = {}
        self.lib: Any = None
        self.ctx: Any = None
        self.like: torch.Tensor | None = None

    def pview(self, i: int) -> torch.Tensor:
        m, n = self.ms[i].shape
        r = self.low[i][1]
        return self.buf[self.poff[i]:self.poff[i] + m * r].view(m, r)

    def qview(self, i: int) -> torch.Tensor:
        m, n = self.ms[i].shape
        r = self.low[i][1]
        return self.qbuf[self.qoff[i]:self.qoff[i] + n * r].view(n, r)


class PowerSGD(_Base):
    """PowerSGD per tensor, rank = int(level), error feedback, warm start.

    ``seed`` must be the same on every rank (see query_seed).

    ``native``: run the stages in libbellows' C building blocks
    (bellows/codec.h: the products through its BLAS, a two-pass blocked
    Gram-Schmidt) for contiguous CPU float32 gradients at ranks up to 32,
    on the tensors' memory, layers of one shape in one call per stage;
    False runs the torch code only. The two agree to rounding, not bit
    for bit (another order of summation; the C orthogonalisation is the
    more orthogonal on ill-conditioned P). In both, the residual is M
    minus the decoded gradient exactly. Every rank must take the same
    path (the same dtypes and devices do), or their replicas drift apart
    by rounding. Unless OPENBLAS_NUM_THREADS is set, the first C call
    sets libbellows' BLAS to torch.get_num_threads() threads.
    Contiguous CUDA float32 gradients go to libbellows' cuBLAS twin of
    the same stages (bellows_psgd_*_cuda) when the library was built with
    CUDA and cuBLAS and sees a device: the same layout and batching, on
    the device's current stream, through one cuBLAS context per device
    and stream; otherwise they run the torch code, as before.
    ``native_layers`` counts the layer steps the C stages ran (CPU or
    CUDA), ``cuda_layers`` those the cuBLAS twin ran.
    """

    name = "powersgd"
    max_native_rank = 32  # BELLOWS_PSGD_MAX_RANK

    def __init__(self, seed: int = 0, native: bool = True):
        super().__init__()
        self.seed = seed
        self.native = native
        self.queries: dict[int, torch.Tensor] = {}  # layer -> Q [n, r]
        self.inits: dict[int, int] = {}  # layer -> Q initialisations
        self.native_layers = 0  # layer steps run by the C stages
        self.cuda_layers = 0  # of which by the cuBLAS twin
        # (device index, stream) -> libbellows' cuBLAS context.
        self._cuda_ctxs: dict[tuple[int, int], _PsgdCudaContext] = {}

    @staticmethod
    def rank_of(shape: Sequence[int], level: float) -> int:
        """The rank used for ``shape`` at ``level``: int(level), capped by
        the matrix's dimensions; 0 (raw) below 2 dimensions."""
        if len(shape) < 2 or level <= 0:
            return 0
        m, n = _matrix_shape(shape)
        return max(0, min(int(level), m, n))

    def compresses(self, shape: Sequence[int], level: float) -> bool:
        return self.rank_of(shape, level) > 0

    def level_floats(self, shape: Sequence[int], level: float) -> int:
        r = self.rank_of(shape, level)
        if r == 0:
            numel = 1
            for d in shape:
                numel *= d
            return numel
        m, n = _matrix_shape(shape)
        return r * (m + n)

    def _query(self, layer: int, n: int, r: int,
               like: torch.Tensor) -> torch.Tensor:
        q = self.queries.get(layer)
        if q is not None and q.shape == (n, r):
            return q
        inits = self.inits.get(layer, 0)
        self.inits[layer] = inits + 1
        gen = torch.Generator().manual_seed(query_seed(self.seed, layer,
                                                       inits))
        q = torch.randn(n, r, generator=gen, dtype=torch.float32)
        q = q.to(device=like.device, dtype=like.dtype)
        self.queries[layer] = q
        return q

    def _native_lib(self, grad: torch.Tensor, r: int):
        """The C stages if they apply to ``grad`` at rank ``r`` (on the
        CPU, or on CUDA through the cuBLAS twin)."""
        if (not self.native or r > self.max_native_rank
                or grad.dtype != torch.float32
                or grad.device.type not in ("cpu", "cuda")
                or not grad.is_contiguous()):
            return None
        lib = _codec_lib()
        if grad.device.type == "cuda":
            return lib if lib is not None and _psgd_cuda(lib) else None
        if lib is None or lib.psgd_project is None:
            return None
        global _blas_threads_set
        if not _blas_threads_set:
            # libbellows' OpenBLAS starts one thread per core: as many as
            # torch runs instead, unless the user chose.
            _blas_threads_set = True
            if ("OPENBLAS_NUM_THREADS" not in os.environ
                    and lib.psgd_blas_threads is not None):
                lib.psgd_blas_threads(max(1, torch.get_num_threads()))
        return lib

    @staticmethod
    def _batches(low, nat) -> dict:
        """(m, n, r) -> indices into ``low`` of the C-path layers."""
        groups: dict[tuple[int, int, int], list[int]] = {}
        for i, ((it, r), use) in enumerate(zip(low, nat)):
            if use:
                m, n = _matrix_shape(it.grad.shape)
                groups.setdefault((m, n, r), []).append(i)
        return groups

    @staticmethod
    def _ptrs(addrs: list[int]):
        return (ctypes.c_void_p * len(addrs))(*addrs)

    def _cuda_context(self, lib, like: torch.Tensor):
        """libbellows' cuBLAS context for ``like``'s device and current
        stream (opened once), or None if it does not open."""
        key = (like.device.index if like.device.index is not None
               else torch.cuda.current_device(), _stream(like))
        ctx = self._cuda_ctxs.get(key)
        if ctx is None:
            try:
                ctx = _PsgdCudaContext(lib, like.device, key[1])
            except RuntimeError:
                return None
            self._cuda_ctxs[key] = ctx
        return ctx

    def reduce(self, items: Sequence[Item], comm: Communicator) -> Counts:
        """Reduces ``items`` across the ranks; returns what was sent."""
        st = self._project(items)
        if st.low:
            comm.all_reduce(st.buf)
            self._power(st, comm.world)
            comm.all_reduce(st.qbuf)
            self._decode(st, comm.world)
            self._end(st)
        elif st.flat_raw is not None:
            comm.all_reduce(st.flat_raw)
            self._unflatten(st.raw, st.flat_raw, comm.world)
        return st.counts

    def start(self, items: Sequence[Item], comm: ProcessGroupComm) -> Flight:
        """Starts reducing ``items`` with asynchronous collectives (see
        Flight): P (with the raw tensors) now; orthogonalisation, Q and
        its all-reduce in advance(); the decode in Q's callback; the
        residuals handed back in finish(). The same arithmetic as
        reduce()."""
        t0 = time.perf_counter()
        st = self._project(items)
        like = items[0].grad if items else None
        fl = Flight(st.counts, None if like is None else like.device)
        world = comm.world
        if not st.low:
            if st.flat_raw is not None:
                self._start_raw(st.raw, st.counts, comm, fl, st.flat_raw)
            return fl.seal()
        fl.codec_ms += (time.perf_counter() - t0) * 1e3
        gate = comm.all_reduce_async(st.buf)

        def decode(fut):
            try:
                fut.value()
                t = time.perf_counter()
                self._decode(st, world)
                fl.decode_ms += (time.perf_counter() - t) * 1e3
                fl.complete()
            except BaseException as e:  # noqa: BLE001 - to the future
                fl.fail(e)

        def second():
            t = time.perf_counter()
            self._power(st, world)
            fl.decode_ms += (time.perf_counter() - t) * 1e3
            fl.tails.append(comm.all_reduce_async(st.qbuf, decode))

        fl.stage(gate, second)
        fl.on_finish(lambda: self._end(st))
        return fl.seal()

    def _project(self, items: Sequence[Item]) -> _PsgdStep:
        """The first stage: splits raw and low-rank items, flattens the
        raw ones (grad + residual), builds M = grad + residual in the
        residual's memory and P = M Q into one buffer after the raw
        values."""
        st = _PsgdStep()
        counts = st.counts
        raw, low = st.raw, st.low
        for it in items:
            counts.floats_raw += it.grad.numel()
            r = self.rank_of(it.grad.shape, it.level)
            if r == 0:
                raw.append(it)
                # Back to raw: the next compressed step starts afresh.
                self.queries.pop(it.layer, None)
            else:
                low.append((it, r))
        st.flat_raw = flat_raw = self._raw(raw, counts)
        nraw = st.nraw = 0 if flat_raw is None else flat_raw.numel()
        if not low:
            return st
        # One buffer for the raw tensors and every P (the first
        # all-reduce), one for every Q (the second); P and Q are written
        # in place, by torch or by the C stages.
        ms, qs, poff, qoff, nat = st.ms, st.qs, st.poff, st.qoff, st.nat
        np_total = nq_total = 0
        for it, r in low:
            m, n = _matrix_shape(it.grad.shape)
            # The compensation: the layer's own residual, or its share of
            # a shared or reduced one under the residual plan; M = grad +
            # residual is built in its memory below.
            err = self.residuals.begin(it.layer, (m, n), it.grad.device)
            ms.append(err)
            qs.append(self._query(it.layer, n, r, err))
            poff.append(nraw + np_total)
            qoff.append(nq_total)
            np_total += m * r
            nq_total += n * r
            nat.append(err.is_contiguous() and err.dtype == torch.float32
                       and self._native_lib(it.grad, r) is not None)
            counts.floats_sent += r * (m + n)
            counts.bytes_sent += r * (m + n) * err.element_size()
        like = low[0][0].grad
        st.buf = buf = torch.empty(nraw + np_total, dtype=like.dtype,
                                   device=like.device)
        st.qbuf = torch.empty(nq_total, dtype=like.dtype,
                              device=like.device)
        if flat_raw is not None:
            buf[:nraw].copy_(flat_raw)
        st.groups = groups = self._batches(low, nat)
        st.lib = _codec_lib() if groups else None
        if groups and like.device.type == "cuda":
            st.ctx = self._cuda_context(st.lib, like)
            if st.ctx is None:  # no context: the torch code for all
                nat[:] = [False] * len(nat)
                st.groups = groups = {}
        st.like = like
        # M = grad + error, in the error's memory (then error = M - approx
        # is one subtraction); P = M Q.
        for i, (it, _r) in enumerate(low):
            if not nat[i]:
                m, n = ms[i].shape
                mat = ms[i].add_(it.grad.reshape(m, n))
                torch.matmul(mat, qs[i], out=st.pview(i))
        esz = buf.element_size()
        for (m, n, r), idx in groups.items():
            self._stage(st, "project",
                        m, n, r, len(idx),
                        self._ptrs([ms[i].data_ptr() for i in idx]),
                        self._ptrs([low[i][0].grad.data_ptr()
                                    for i in idx]),
                        self._ptrs([qs[i].data_ptr() for i in idx]),
                        self._ptrs([buf.data_ptr() + poff[i] * esz
                                    for i in idx]))
        return st

    @staticmethod
    def _stage(st: _PsgdStep, name: str, *args) -> None:
        """bellows_psgd_<name> on the CPU, or its CUDA twin."""
        lib, ctx = st.lib, st.ctx
        if ctx is None:
            rc = getattr(lib, "psgd_" + name)(*args)
        else:
            assert st.like is not None  # a CUDA context has its tensor
            with torch.cuda.device(st.like.device):
                rc = getattr(lib, f"psgd_{name}_cuda")(ctx.ptr, *args)
        if rc != 0:
            twin = "" if ctx is None else "_cuda"
            raise RuntimeError(f"bellows_psgd_{name}{twin}: {rc}")

    def _power(self, st: _PsgdStep, world: int) -> None:
        """The second stage, once P is summed: the raw tensors written
        back, P orthogonalised, Q = M^T P."""
        buf, qbuf, ms = st.buf, st.qbuf, st.ms
        if st.flat_raw is not None:
            self._unflatten(st.raw, buf[:st.nraw], world)
        for i in range(len(st.low)):
            if not st.nat[i]:
                p = st.pview(i)
                orthogonalize(p)
                torch.matmul(ms[i].t(), p, out=st.qview(i))
        esz = buf.element_size()
        for (m, n, r), idx in st.groups.items():
            self._stage(st, "power",
                        m, n, r, len(idx),
                        self._ptrs([ms[i].data_ptr() for i in idx]),
                        self._ptrs([buf.data_ptr() + st.poff[i] * esz
                                    for i in idx]),
                        self._ptrs([qbuf.data_ptr() + st.qoff[i] * esz
                                    for i in idx]))

    def _decode(self, st: _PsgdStep, world: int) -> None:
        """The last stage, once Q is summed: grad <- P Q^T and error =
        M - P Q^T; Q kept as the next step's warm start."""
        buf, qbuf, ms, low = st.buf, st.qbuf, st.ms, st.low
        qbuf.div_(world)
        for i, (it, _r) in enumerate(low):
            q = st.qview(i)
            self.queries[it.layer] = q.clone()  # the next step's warm start
            if not st.nat[i]:
                approx = st.pview(i) @ q.t()
                it.grad.copy_(approx.view_as(it.grad))
                ms[i].sub_(approx)
        esz = buf.element_size()
        for (m, n, r), idx in st.groups.items():
            self._stage(st, "decode",
                        m, n, r, len(idx),
                        self._ptrs([ms[i].data_ptr() for i in idx]),
                        self._ptrs([buf.data_ptr() + st.poff[i] * esz
                                    for i in idx]),
                        self._ptrs([qbuf.data_ptr() + st.qoff[i] * esz
                                    for i in idx]),
                        self._ptrs([low[i][0].grad.data_ptr()
                                    for i in idx]))
            self.native_layers += len(idx)
            if st.ctx is not None:
                self.cuda_layers += len(idx)

    def _end(self, st: _PsgdStep) -> None:
        """The residuals are final (error = M - P Q^T): hands them back to
        the plan, in the items' (backward) order."""
        for i, (it, _r) in enumerate(st.low):
            self.residuals.end(it.layer, st.ms[i])

    def reset(self, layer: int | None = None) -> None:
        super().reset(layer)
        if layer is None:
            self.queries.clear()
        else:
            self.queries.pop(layer, None)


class TopK(_Gathered):
    """top-k per tensor, keep fraction = level, error feedback, all-gather.

    Indices travel as int32 bit patterns inside the float32 payload, so
    one all-gather carries a whole group: tensors of 2^31 elements or more
    are refused (ValueError).
    """

    name = "topk"

    def __init__(self, native: bool = True):
        """``native``: select with libbellows' C top-k where it applies
        (contiguous CPU float32, float16 or bfloat16 gradients, or CUDA
        ones with a CUDA-built library); False runs the torch code
        only. Both send the same set of (index, value) pairs and leave
        the same residual; the C code sends the indices ascending and
        breaks ties at the k-th magnitude by the lower index, where
        torch.topk's choice among ties is unspecified."""
        super().__init__()
        self.native = native
        # Which code decoded each group ("c": bellows_codec_topk_average,
        # "torch": index_add_).
        self.decodes: dict[str, int] = {"c": 0, "torch": 0}

    def select(self, err: torch.Tensor, grad: torch.Tensor, k: int,
               out: tuple[torch.Tensor, torch.Tensor] | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Adds ``grad`` to the residual ``err``, takes the ``k`` entries
        of largest magnitude out of it (their residual becomes 0); returns
        their values (float32) and indices (int32): ``out`` (k float32 and
        k int32, contiguous, on grad's device) where given, which the C
        code writes in place (the caller's payload, no copy), else new
        tensors."""
        g = grad.reshape(-1)
        # _where() says "cpu" or "cuda" only with a library.
        lib: Any = _codec_lib() if self.native else None
        where = _where(lib, g, err)
        code = _DTYPE_CODE.get(g.dtype)
        if out is None:
            vals = torch.empty(k, dtype=torch.float32, device=g.device)
            idx = torch.empty(k, dtype=torch.int32, device=g.device)
        else:
            vals, idx = out
        if where == "cpu" and lib.codec_topk_encode is not None:
            if code == 0:
                rc = lib.codec_topk_encode(g.data_ptr(), err.data_ptr(),
                                           g.numel(), k, idx.data_ptr(),
                                           vals.data_ptr())
            elif lib.codec_topk_encode_dtype is not None:
                rc = lib.codec_topk_encode_dtype(
                    code, g.data_ptr(), err.data_ptr(), g.numel(), k,
                    idx.data_ptr(), vals.data_ptr())
            else:
                rc = -1
            if rc == 0:
                self._used("c")
                return vals, idx
        elif where == "cuda":
            work = torch.empty(
                max(1, lib.codec_topk_cuda_work_bytes(g.numel())),
                dtype=torch.uint8, device=g.device)
            with torch.cuda.device(g.device):
                rc = lib.codec_topk_encode_cuda(
                    code, g.data_ptr(), err.data_ptr(), g.numel(), k,
                    idx.data_ptr(), vals.data_ptr(), work.data_ptr(),
                    work.numel(), _stream(g))
            if rc == 0:
                self._used("cuda")
                return vals, idx
        self._used("torch")
        mat = err.add_(g.float())
        _, top = torch.topk(mat.abs(), k, sorted=False)
        vals.copy_(mat[top])
        idx.copy_(top)
        mat[top] = 0  # what is sent leaves the residual
        return vals, idx

    @staticmethod
    def k_of(numel: int, level: float) -> int:
        """Entries kept of ``numel`` at ``level``: round(level * numel),
        at least 1 and at most numel; 0 (raw) for level <= 0."""
        if level <= 0:
            return 0
        return max(1, min(numel, round(level * numel)))

    def level_floats(self, shape: Sequence[int], level: float) -> int:
        numel = 1
        for d in shape:
            numel *= d
        k = self.k_of(numel, level)
        return numel if k == 0 else 2 * k

    def _split(self, items: Sequence[Item], counts: Counts
               ) -> tuple[list[Item], list]:
        raw, sparse = [], []
        for it in items:
            counts.floats_raw += it.grad.numel()
            k = self.k_of(it.grad.numel(), it.level)
            if k:
                sparse.append((it, k))
            else:
                raw.append(it)
        return raw, sparse

    def _encode_all(self, sparse: list, counts: Counts) -> torch.Tensor:
        """One payload for the group: per tensor its k values, then its
        k indices (int32 bits), written in place by select()."""
        total = 2 * sum(k for _, k in sparse)
        payload = torch.empty(total, dtype=torch.float32,
                              device=sparse[0][0].grad.device)
        at = 0
        for it, k in sparse:
            numel = it.grad.numel()
            if numel >= 1 << 31:
                raise ValueError(f"layer {it.layer}: top-k of {numel} "
                                 "elements needs 64-bit indices")
            err = self.residuals.begin(it.layer, (numel,), it.grad.device)
            self.select(err, it.grad, k,
                        out=(payload[at:at + k],
                             payload[at + k:at + 2 * k].view(torch.int32)))
            self.residuals.end(it.layer, err)
            at += 2 * k
            counts.floats_sent += 2 * k
            counts.bytes_sent += 2 * k * 4
        return payload

    def _decode_all(self, sparse: list, gathered: list[torch.Tensor],
                    world: int) -> None:
        """Writes every tensor's average over the ranks into its gradient:
        with libbellows, one C call per tensor over all ranks
        (bellows_codec_topk_average: the average written straight into the
        gradient, no dense temporary), else the torch code, which gives
        the same bits (_decode_torch)."""
        if self._decode_native(sparse, gathered, world):
            self.decodes["c"] += 1
            return
        self.decodes["torch"] += 1
        self._decode_torch(sparse, gathered, world)

    def _decode_native(self, sparse: list, gathered: list[torch.Tensor],
                       world: int) -> bool:
        """The C decode; False (and the torch code to run) where it does
        not apply: no library, CUDA tensors, a gradient that is not
        contiguous float32, or a rank whose indices are not ascending (a
        rank that ran torch.topk). A tensor written before a refusal is
        written again by the torch code, from the same payloads."""
        lib: Any = _codec_lib() if self.native else None
        average = getattr(lib, "codec_topk_average", None)
        if average is None or len(gathered) != world:
            return False
        def flat_f32(t: torch.Tensor) -> bool:
            return (t.device.type == "cpu" and t.is_contiguous()
                    and t.dtype == torch.float32)

        if not (all(flat_f32(g) for g in gathered)
                and all(flat_f32(it.grad) for it, _ in sparse)):
            return False
        bases = [g.data_ptr() for g in gathered]
        ptrs = ctypes.c_void_p * world
        at = 0
        for it, k in sparse:
            vals = ptrs(*[b + 4 * at for b in bases])
            idx = ptrs(*[b + 4 * (at + k) for b in bases])
            if average(idx, vals, world, k, it.grad.numel(),
                       it.grad.data_ptr()) != 0:
                return False
            at += 2 * k
        return True

    def _decode_torch(self, sparse: list, gathered: list[torch.Tensor],
                      world: int) -> None:
        """Sums every rank's (value, index) pairs of every tensor into one
        flat buffer, the tensors end to end: the payload positions of all
        values and of all indices are gathered at once, each index moved
        by its tensor's place in the buffer, and one index_add_ adds
        them. On the CPU that is one call over all ranks, rank after rank
        (the sums in the same order as one call per rank); on a GPU one
        call per rank, whose indices are distinct, so that no two atomic
        adds meet and every rank gets the same bits."""
        dev = gathered[0].device
        ks = [k for _, k in sparse]
        numels = [it.grad.numel() for it, _ in sparse]
        k_all = torch.tensor(ks, dtype=torch.long, device=dev)
        starts = torch.cumsum(k_all, 0) - k_all  # each tensor's first pair
        base = torch.tensor([0] + numels[:-1], dtype=torch.long,
                            device=dev).cumsum(0)
        which = torch.repeat_interleave(
            torch.arange(len(ks), device=dev), k_all)
        pair = torch.arange(int(k_all.sum()), device=dev)
        vpos = pair + starts[which]  # payload place of each value
        ipos = vpos + k_all[which]  # and of its index
        shift = base[which]
        out = torch.zeros(sum(numels), dtype=torch.float32, device=dev)
        if dev.type == "cpu":
            g = torch.stack(gathered)
            idx = g[:, ipos].view(torch.int32).long() + shift
            out.index_add_(0, idx.reshape(-1), g[:, vpos].reshape(-1))
        else:
            for g in gathered:
                idx = g[ipos].view(torch.int32).long() + shift
                out.index_add_(0, idx, g[vpos])
        # The average written straight into each gradient: one pass over
        # the sums instead of a division in place and then a copy.
        at = 0
        for (it, _), numel in zip(sparse, numels):
            torch.div(out[at:at + numel].view_as(it.grad), world,
                      out=it.grad)
            at += numel


_native_codec = None  # libbellows' functions, False if unavailable
_cuda_codec = None  # True if libbellows has the CUDA codecs and a device

# bellows_dtype of the gradient types the C codecs take.
_DTYPE_CODE = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}


def set_codec_threads(threads: int = 0, min_values: int = 0) -> int:
    """Sets the threads libbellows' C codecs split a large tensor across
    (``threads`` in all, 0: one per processor) and the size below which
    they use one (``min_values``, 0: 2^20); the results do not depend on
    it. Returns the threads now in use, 1 without the library. Raises
    ValueError for more than 65 threads."""
    lib = _codec_lib()
    if lib is None or lib.codec_set_threads is None:
        return 1
    if threads < 0 or threads > 65 or min_values < 0:
        raise ValueError(f"codec threads: {threads} is not in 0..65")
    lib.codec_set_threads(threads, min_values)
    return lib.codec_threads()


def _cuda_codecs(lib) -> bool:
    """True if ``lib`` was built with the CUDA codecs and sees a device."""
    global _cuda_codec
    if _cuda_codec is None:
        _cuda_codec = bool(
            lib.codec_cuda_built is not None
            and lib.codec_encode_codes_cuda is not None
            and lib.codec_cuda_built() == 1
            and lib.codec_cuda_available() == 1)
    return _cuda_codec


def _where(lib, *tensors: torch.Tensor) -> str | None:
    """Which C codecs apply to ``tensors``: "cpu" (all contiguous CPU
    tensors), "cuda" (all contiguous on one CUDA device, and the library
    has the CUDA codecs), or None (the torch code). The first tensor is
    the gradient, whose dtype must be one the codecs take."""
    if lib is None or _DTYPE_CODE.get(tensors[0].dtype) is None:
        return None
    dev = tensors[0].device
    for t in tensors:
        if t.device != dev or not t.is_contiguous():
            return None
    if dev.type == "cpu":
        return "cpu"
    if dev.type == "cuda" and _cuda_codecs(lib):
        return "cuda"
    return None


def _stream(t: torch.Tensor) -> int:
    """The current CUDA stream of ``t``'s device, as a pointer."""
    return torch.cuda.current_stream(t.device).cuda_stream


_psgd_cuda_ok = None  # True if libbellows has PowerSGD's cuBLAS twin


def _psgd_cuda(lib) -> bool:
    """True if ``lib`` has PowerSGD's cuBLAS twin and sees a device."""
    global _psgd_cuda_ok
    if _psgd_cuda_ok is None:
        _psgd_cuda_ok = bool(
            lib.psgd_cuda_available is not None
            and lib.psgd_project_cuda is not None
            and lib.psgd_cuda_available() == 1)
    return _psgd_cuda_ok


class _PsgdCudaContext:
    """libbellows' cuBLAS context (bellows_psgd_cuda) for one device and
    stream, closed when the object goes."""

    def __init__(self, lib, device: torch.device, stream: int):
        self.lib = lib
        self.ptr = ctypes.c_void_p()
        with torch.cuda.device(device):
            rc = lib.psgd_cuda_open(stream, ctypes.byref(self.ptr))
        if rc != 0:
            raise RuntimeError(f"bellows_psgd_cuda_open: {rc}")

    def __del__(self):
        if self.ptr:
            try:
                self.lib.psgd_cuda_close(ctypes.byref(self.ptr))
            except Exception:  # interpreter shutdown
                pass
_blas_threads_set = False  # PowerSGD set libbellows' BLAS threads once


def _codec_lib():
    """libbellows' functions if it has the C codecs, else None."""
    global _native_codec
    if _native_codec is None:
        try:
            from bellows import _lib
            funcs = _lib.library()
            ok = funcs.codec_encode_codes is not None and \
                funcs.codec_decode_codes is not None
            _native_codec = funcs if ok else False
        except OSError:
            _native_codec = False
    return _native_codec or None


# The range a threshold "auto" is clamped to (float32's smallest normal
# and largest finite values).
_F32_TINY = float(torch.finfo(torch.float32).tiny)
_F32_MAX = float(torch.finfo(torch.float32).max)


class _Quantizer(_Gathered):
    """Shared part of the 1-bit and 2-bit quantisers (MXNet semantics).

    Every value of M = grad + residual becomes a code of ``bits`` bits;
    codes are packed LSB first (value i of a tensor in byte i * bits // 8,
    at bit (i * bits) % 8), and each tensor's bytes are padded to whole
    float32 words, so a tensor of n values sends ceil(n * bits / 32)
    floats, as MXNet counts it. Codes are not summable: every rank
    all-gathers the packed words of the whole group (one collective), and
    decodes and averages all ranks' codes. The residual is M minus what
    this rank's own code decodes to (standard error feedback).
    """

    bits = 0  # bits per value (1 or 2)
    name = ""  # the subclass's, for messages

    def __init__(self, threshold: float | str = 0.5, native: bool = True):
        """``native``: use libbellows' C codecs where they apply (CPU
        float32, float16 or bfloat16 gradients, or CUDA ones with a
        CUDA-built library; a threshold that is a valid float32); False
        runs the torch code only. ``threshold="auto"`` (where the class
        allows it, ``auto_ok``): each rank codes each tensor at each step
        at its own scale (see TwoBit) and sends the scale as one float32
        word after the tensor's codes."""
        super().__init__()
        # Codes are of whole tensors: the residuals stay per layer,
        # whatever residual plan is in force.
        self.residuals.planned = False
        self.native = native
        self.auto = threshold == "auto"
        if self.auto:
            if not self.auto_ok:
                raise ValueError(f"{self.name} takes no threshold 'auto'")
            threshold = 1.0  # replaced per tensor and step
        try:
            threshold = float(threshold)
        except (TypeError, ValueError):
            raise ValueError(f"{self.name} threshold must be a number or "
                             f"'auto', not {threshold!r}") from None
        if not math.isfinite(threshold) or threshold < self._min_threshold:
            raise ValueError(f"{self.name} threshold must be finite and "
                             f"{self._threshold_rule}, not {threshold!r}")
        self.threshold = threshold

    _min_threshold = 0.0
    _threshold_rule = ">= 0"
    auto_ok = False  # whether threshold="auto" is allowed

    @classmethod
    def words(cls, numel: int) -> int:
        """Float32 words the packed codes of ``numel`` values take."""
        return -(-numel * cls.bits // 32)

    def tensor_words(self, numel: int) -> int:
        """Float32 words one tensor of ``numel`` values sends: its codes,
        and with threshold "auto" the threshold it was coded with."""
        return self.words(numel) + (1 if self.auto else 0)

    def level_floats(self, shape: Sequence[int], level: float) -> int:
        numel = math.prod(shape)
        return self.tensor_words(numel) if level > 0 else numel

    def encode(self, layer: int, grad: torch.Tensor) -> torch.Tensor:
        """Adds ``grad`` to ``layer``'s residual, quantises it, leaves the
        quantisation error in the residual; returns the packed codes as
        float32 words (their bit patterns, not numbers)."""
        numel = grad.numel()
        err = self.errors.get(layer)
        if err is None:
            err = torch.zeros(numel, dtype=torch.float32,
                              device=grad.device)
            self.errors[layer] = err
        if self.auto:
            return self._encode_auto(err, grad)
        packed = self._encode_native(err, grad, self.threshold)
        if packed is None:
            packed = self._encode_torch(err, grad, self.threshold)
        return packed

    def _encode_auto(self, err: torch.Tensor, grad: torch.Tensor
                     ) -> torch.Tensor:
        """encode with threshold "auto" (see TwoBit): the codes at
        threshold t = mean |r|, then the residual moved from +-t to +-v
        where a code was sent; returns the codes and v's word.

        On CPU tensors libbellows does it in one call
        (bellows_codec_encode_codes_auto), whose means, taken in double,
        define t and v; elsewhere, or with an older library, the torch
        code below, whose float32 means may differ from them by a few ulp.
        """
        packed = self._encode_auto_native(err, grad)
        if packed is None:
            packed = self._encode_auto_torch(err, grad)
        return packed

    def _encode_auto_native(self, err: torch.Tensor, grad: torch.Tensor
                            ) -> torch.Tensor | None:
        """_encode_auto by bellows_codec_encode_codes_auto, which writes
        v's word after the codes itself; None where it does not apply
        (not CPU, or the library lacks it: err is then untouched)."""
        g = grad.reshape(-1)
        lib, where = self._native(g, err)
        if where != "cpu" or lib.codec_encode_codes_auto is None:
            return None
        numel = g.numel()
        words = self.words(numel)
        out = torch.empty(words + 1, dtype=torch.float32)
        rc = lib.codec_encode_codes_auto(
            self.bits, _DTYPE_CODE[g.dtype], g.data_ptr(), err.data_ptr(),
            numel, out.data_ptr(), words * 4, None,
            out.data_ptr() + 4 * words)
        if rc != 0:
            return None
        self._used("c")
        return out

    def _encode_auto_torch(self, err: torch.Tensor, grad: torch.Tensor,
                           scale: tuple[float, float] | None = None
                           ) -> torch.Tensor:
        """_encode_auto in torch around the fixed-threshold encode.

        t is clamped to float32's [smallest normal, largest finite]: a
        non-finite mean (a NaN or infinite gradient) would send no code
        and keep the residual growing. t and v are means of float32
        values, so float32 already, as sent. ``scale``: (t, v) to use
        instead of these means (tests give the C path's, to compare the
        rest bit for bit).
        """
        r = torch.add(err, grad.reshape(-1).float())
        mag = r.abs()
        sel = None
        if scale is None:
            t = float(mag.mean().clamp_(_F32_TINY, _F32_MAX).nan_to_num_(
                _F32_MAX))
            sel = mag >= t
            chosen = mag[sel]
            v = float(chosen.mean()) if chosen.numel() else t
        else:
            t, v = scale
        packed = self._encode_native(err, grad, t)
        if packed is None:
            packed = self._encode_torch(err, grad, t)
        if v != t:
            if sel is None:
                sel = mag >= t
            err.sub_(torch.sign(r) * sel * (v - t))
        return torch.cat([packed, packed.new_full((1,), v)])

    def _encode_torch(self, err: torch.Tensor, grad: torch.Tensor,
                      t: float) -> torch.Tensor:
        """encode by the torch code (the reference), threshold ``t``."""
        numel = grad.numel()
        self._used("torch")
        r = err.add_(grad.reshape(-1).float())
        codes = self._quantise(r, t)  # uint8, one code per value
        per_word = 32 // self.bits
        pad = self.words(numel) * per_word - numel
        if pad:
            codes = torch.cat([codes, codes.new_zeros(pad)])
        per_byte = 8 // self.bits
        shifts = torch.arange(0, 8, self.bits, dtype=torch.uint8,
                              device=codes.device)
        packed = (codes.view(-1, per_byte) << shifts).sum(
            1, dtype=torch.uint8)
        return packed.view(torch.float32)

    def _native(self, *tensors: torch.Tensor):
        """(the C codecs, "cpu" or "cuda") if they apply to ``tensors``
        (the first one's dtype decides), else (None, None)."""
        if not self.native:
            return None, None
        lib = _codec_lib()
        where = _where(lib, *tensors)
        return (lib, where) if where is not None else (None, None)

    def _encode_native(self, err: torch.Tensor, grad: torch.Tensor,
                       t: float) -> torch.Tensor | None:
        """encode by the C codec or its CUDA twin (err += grad, quantise,
        error left in err, as the torch code); None where it does not
        apply (err is then untouched)."""
        g = grad.reshape(-1)
        lib, where = self._native(g, err)
        if lib is None:
            return None
        numel = g.numel()
        code = _DTYPE_CODE[g.dtype]
        out = torch.empty(self.words(numel), dtype=torch.float32,
                          device=g.device)
        if where == "cuda":
            with torch.cuda.device(g.device):
                rc = lib.codec_encode_codes_cuda(
                    self.bits, t, code, g.data_ptr(),
                    err.data_ptr(), numel, out.data_ptr(), out.numel() * 4,
                    _stream(g))
        elif code == 0:
            rc = lib.codec_encode_codes(self.bits, t,
                                        g.data_ptr(), err.data_ptr(), numel,
                                        out.data_ptr(), out.numel() * 4)
        elif lib.codec_encode_codes_dtype is not None:
            rc = lib.codec_encode_codes_dtype(
                self.bits, t, code, g.data_ptr(),
                err.data_ptr(), numel, out.data_ptr(), out.numel() * 4)
        else:
            rc = -1
        if rc != 0:
            return None
        self._used(where if where == "cuda" else "c")
        return out

    def decode(self, words: torch.Tensor, numel: int,
               add_to: torch.Tensor | None = None,
               threshold: float | None = None) -> torch.Tensor:
        """The float32 values ``numel`` packed codes stand for; with
        ``add_to`` (``numel`` float32 values), added to it in place (the
        same sums as ``add_to += decode(words, numel)``) and returned.
        ``threshold``: the one the codes were made with (default: this
        compressor's; with "auto", the word after the codes)."""
        t = self.threshold if threshold is None else threshold
        if add_to is None:
            lib, where = self._native(words)
        else:
            lib, where = self._native(words, add_to)
            if add_to.dtype != torch.float32:
                lib = None
        if lib is not None and words.dtype == torch.float32:
            out = add_to if add_to is not None else \
                torch.empty(numel, dtype=torch.float32, device=words.device)
            flags = 0 if add_to is None else 1
            if where == "cuda":
                with torch.cuda.device(words.device):
                    rc = lib.codec_decode_codes_cuda(
                        self.bits, t, words.data_ptr(),
                        words.numel() * 4, numel, out.data_ptr(), flags,
                        _stream(words))
            else:
                rc = lib.codec_decode_codes(self.bits, t,
                                            words.data_ptr(),
                                            words.numel() * 4, numel,
                                            out.data_ptr(), flags)
            if rc == 0:
                return out
        if add_to is not None:
            return add_to.add_(self._decode_torch(words, numel, t))
        return self._decode_torch(words, numel, t)

    def _decode_torch(self, words: torch.Tensor, numel: int,
                      t: float) -> torch.Tensor:
        """decode by the torch code (the reference)."""
        packed = words.contiguous().view(torch.uint8)
        shifts = torch.arange(0, 8, self.bits, dtype=torch.uint8,
                              device=packed.device)
        mask = (1 << self.bits) - 1
        codes = ((packed.unsqueeze(1) >> shifts) & mask).reshape(-1)
        return self._dequantise(codes[:numel], t)

    def _quantise(self, r: torch.Tensor, t: float) -> torch.Tensor:
        raise NotImplementedError

    def _dequantise(self, codes: torch.Tensor, t: float) -> torch.Tensor:
        raise NotImplementedError

    def _split(self, items: Sequence[Item], counts: Counts
               ) -> tuple[list[Item], list[Item]]:
        raw: list[Item] = []
        quant: list[Item] = []
        for it in items:
            counts.floats_raw += it.grad.numel()
            (quant if it.level > 0 else raw).append(it)
        return raw, quant

    def _encode_all(self, quant: list[Item], counts: Counts) -> torch.Tensor:
        payload = [self.encode(it.layer, it.grad) for it in quant]
        words = torch.cat(payload) if len(payload) > 1 else payload[0]
        counts.floats_sent += words.numel()
        counts.bytes_sent += words.numel() * 4
        return words

    def _decode_all(self, quant: list[Item], gathered: list[torch.Tensor],
                    world: int) -> None:
        off = 0
        for it in quant:
            n = it.grad.numel()
            w = self.words(n)
            ts = [None] * len(gathered)
            if self.auto:  # one word per rank: .tolist() syncs once
                ts = torch.stack([g[off + w] for g in gathered]).tolist()
            total = self.decode(gathered[0][off:off + w], n,
                                threshold=ts[0])
            for g, t in zip(gathered[1:], ts[1:]):
                self.decode(g[off:off + w], n, add_to=total, threshold=t)
            off += self.tensor_words(n)
            total.div_(world)
            it.grad.copy_(total.view_as(it.grad))


class TwoBit(_Quantizer):
    """2-bit quantisation with error feedback, MXNet's ``2bit``.

    Per value, with r the residual and t the threshold (> 0)::

        r += g
        r >= +t: code 3 (binary 11), r -= t     decodes to +t
        r <= -t: code 2 (binary 10), r += t     decodes to -t
        else:    code 0                         decodes to 0

    16 values per float32 word.

    ``threshold="auto"`` scales the code per tensor, rank and step (as
    error-feedback sign compressors scale theirs): with r = g + residual,
    t = mean |r| selects the values, and those (|r| >= t) decode to +-v,
    v = their mean magnitude, the value that leaves the least squared
    error in the residual (about 0.2 of |r|^2 on Gaussian values, near
    the best any threshold gives). v is sent as one float32 word after
    the tensor's codes, each rank's decoded at its own. A fixed t suits
    only gradients of one scale: MXNet's 0.5 sends nothing of a
    batch-mean gradient for many steps, then a step of 0.5 that momentum
    multiplies; on the Fashion-MNIST CNN (bench/tta, 3 epochs) 0.15
    ended 4.2 points under plain DDP, "auto" 3.4.
    """

    name = "2bit"
    bits = 2
    _min_threshold = math.ulp(0.0)
    _threshold_rule = "> 0"
    auto_ok = True

    def _quantise(self, r: torch.Tensor, t: float) -> torch.Tensor:
        pos = r >= t
        neg = r <= -t
        r.sub_(pos.float() * t).add_(neg.float() * t)
        return pos.to(torch.uint8) * 3 + neg.to(torch.uint8) * 2

    def _dequantise(self, codes: torch.Tensor, t: float) -> torch.Tensor:
        return (codes == 3).float() * t - (codes == 2).float() * t


class OneBit(_Quantizer):
    """1-bit quantisation with error feedback, MXNet's ``1bit``.

    Per value, with r the residual and t the threshold (>= 0; only the
    decision boundary)::

        r += g
        r > t:  bit 1, r -= 1      decodes to +1
        else:   bit 0, r += 1      decodes to -1

    The reconstruction has unit magnitude whatever the gradient's: the
    learning rate and the residual carry the scale. 32 values per float32
    word.
    """

    name = "1bit"
    bits = 1

    def _quantise(self, r: torch.Tensor, t: float) -> torch.Tensor:
        bit = r > t
        r.add_(1.0 - 2.0 * bit.float())
        return bit.to(torch.uint8)

    def _dequantise(self, codes: torch.Tensor, t: float) -> torch.Tensor:
        return codes.float() * 2 - 1


class _GCompOptimizer(ctypes.Structure):
    """bellows_gcomp_optimizer (bellows/codec.h)."""

    _fields_ = [("kind", ctypes.c_int), ("lr", ctypes.c_double),
                ("weight_decay", ctypes.c_double),
                ("momentum", ctypes.c_double),
                ("dampening", ctypes.c_double), ("beta1", ctypes.c_double),
                ("beta2", ctypes.c_double), ("eps", ctypes.c_double),
                ("grad_scale", ctypes.c_double), ("step", ctypes.c_uint64),
                ("param", ctypes.c_void_p), ("buf", ctypes.c_void_p),
                ("exp_avg", ctypes.c_void_p),
                ("exp_avg_sq", ctypes.c_void_p)]


_GCOMP_DTYPES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
_GCOMP_SGD, _GCOMP_MOMENTUM, _GCOMP_NESTEROV = 1, 2, 3
_GCOMP_ADAM, _GCOMP_ADAMW = 4, 5
_CODEC_ADD = 1


def _dev32(t: torch.Tensor | None,
           device: torch.device) -> torch.Tensor | None:
    """``t`` flattened as a contiguous float32 tensor on ``device`` (no
    copy when it is one already)."""
    if t is None:
        return None
    t = t.detach().reshape(-1)
    if t.dtype != torch.float32 or t.device != device:
        t = t.to(device=device, dtype=torch.float32)
    return t.contiguous()


_gcomp_cuda_ok = None  # True if libbellows has GComp's CUDA twin


def _gcomp_cuda(lib) -> bool:
    """True if ``lib`` has GComp's CUDA twin and sees a device."""
    global _gcomp_cuda_ok
    if _gcomp_cuda_ok is None:
        _gcomp_cuda_ok = bool(
            lib.gcomp_cuda_available is not None
            and lib.gcomp_encode_cuda is not None
            and lib.gcomp_cuda_available() == 1)
    return _gcomp_cuda_ok


class _GCompCudaContext:
    """libbellows' GComp context (bellows_gcomp_cuda): a copy of one table
    on one device for one stream, closed when the object goes."""

    def __init__(self, lib, table: ctypes.c_void_p, device: torch.device,
                 stream: int):
        self.lib = lib
        self.ptr = ctypes.c_void_p()
        with torch.cuda.device(device):
            rc = lib.gcomp_cuda_open(table, stream, ctypes.byref(self.ptr))
        if rc != 0:
            raise RuntimeError(f"bellows_gcomp_cuda_open: {rc}")

    def close(self) -> None:
        if self.ptr:
            self.lib.gcomp_cuda_close(ctypes.byref(self.ptr))

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def _cpu32(t: torch.Tensor | None) -> torch.Tensor | None:
    """``t`` flattened as a contiguous CPU float32 tensor (no copy when it
    is one already)."""
    if t is None:
        return None
    t = t.detach().reshape(-1)
    if t.dtype != torch.float32 or t.device.type != "cpu":
        t = t.to(device="cpu", dtype=torch.float32)
    return t.contiguous()


class GComp(_Base):
    """GComp (Li et al., SoCC '24): near-lossless compression, all-gather.

    Each value's exponent is Huffman-coded with a table every rank shares,
    its mantissa truncated by 0, 6, 12 or 18 bits (its level), zeros sent
    as the exponent code alone; libbellows' C codec (bellows/codec.h)
    encodes and decodes, on the tensors' memory through ctypes (no copy
    for contiguous CPU float32, float16 or bfloat16 gradients; others are
    copied to the CPU first). There is no torch fallback: without the
    library's GComp functions ``reduce`` raises RuntimeError. When every
    compressed gradient of a call is a contiguous float32, float16 or
    bfloat16 tensor on one CUDA device and libbellows has GComp's CUDA
    twin (bellows_gcomp_*_cuda) and sees a device, the levels, encodes,
    all-gathers and decodes stay on that device (the same blocks byte for
    byte, the same values bit for bit, through one context per table,
    device and stream); otherwise CUDA gradients take the CPU codec as
    before. ``cuda_layers`` counts the layer encodes the twin ran,
    ``last_path`` says which codec the last call used ("c" or "cuda").

    A layer whose decision level is > 0 goes through GComp; level 0 is
    sent raw. Each value's truncation level is, with ``optimizer`` set
    (``attach(..., optimizer=opt)``: SGD with or without momentum or
    Nesterov, Adam, AdamW; ``params`` maps layers to parameters), the
    paper's delta level capped at ``max_level``; without, ``level`` for
    the whole tensor (0: lossless).

    The table: what ``table_source()`` returns (``Agent.codec_table()``
    when attached: the table the gcomp policy built, in force on every
    rank from the same step), re-read whenever its bytes change. Without
    one (no policy owns codec_table, or its bytes are no GComp table,
    then ``table_error`` says why), a table is built once from the first
    compressed step's gradients: the ranks all-reduce their 256-bin
    exponent histograms so that every rank builds the same table
    (version 0), kept from then on.

    Reduction: GComp's codes are not summable (the sum of two values has
    another exponent and mantissa), so each rank encodes its gradients
    once, the ranks all-gather the blocks (first their lengths, then the
    blocks padded to the longest), and every rank decodes every rank's
    blocks in rank order, summing into float32, and divides by the world:
    the same bits on every rank, each value truncated once. A
    reduce-scatter of decoded chunks would send less per rank on large
    worlds but decode and re-encode at every hop (compounding the
    truncation); with two to a few ranks the all-gather sends about the
    same.
    """

    name = "gcomp"

    def __init__(self, level: int = 0, max_level: int = 3,
                 max_code_bits: int = 8):
        super().__init__()
        if not 0 <= int(level) <= 3 or not 0 <= int(max_level) <= 3:
            raise ValueError("gcomp level and max_level must be in 0..3")
        if not 1 <= int(max_code_bits) <= 15:
            raise ValueError("gcomp max_code_bits must be in 1..15")
        self.level = int(level)
        self.max_level = int(max_level)
        self.max_code_bits = int(max_code_bits)
        self.table_source = None  # callable returning the table's bytes
        self.optimizer = None  # torch.optim optimizer for delta levels
        self.params: list[torch.Tensor] | None = None  # layer -> param
        self.table_error: str | None = None  # why table_source was unused
        self.table_version: int | None = None  # of the table in force
        self.exp_bits = 0  # totals of this rank's encodes
        self.values = 0
        self.bytes = 0
        self._table = ctypes.c_void_p()  # bellows_gcomp_table *
        self._table_bytes: bytes | None = None
        self._local = False
        self.cuda_layers = 0  # layer encodes run by the CUDA twin
        self.last_path: str | None = None  # "c" or "cuda", last reduce
        # (device index, stream) -> the table on that device.
        self._cuda_ctxs: dict[tuple[int, int], _GCompCudaContext] = {}

    def level_floats(self, shape: Sequence[int], level: float) -> int:
        """Raw size: what GComp sends depends on the data."""
        return math.prod(shape)

    @staticmethod
    def _lib():
        lib = _codec_lib()
        if lib is None or lib.gcomp_encode is None:
            raise RuntimeError("bellows.compress.GComp needs a libbellows "
                               "with GComp (bellows_gcomp_encode)")
        return lib

    def close(self) -> None:
        """Frees the table and its device copies (also done when the
        object is collected)."""
        ctxs = getattr(self, "_cuda_ctxs", None)
        if ctxs:
            for ctx in ctxs.values():
                ctx.close()
            ctxs.clear()
        destroy = getattr(self, "_destroy", None)
        if destroy is not None and self._table:
            destroy(ctypes.byref(self._table))
        self._table = ctypes.c_void_p()

    def __del__(self):
        # No import or library lookup here: it may run at interpreter
        # shutdown.
        try:
            self.close()
        except Exception:  # noqa: BLE001 - nothing to report to
            pass

    def _set_table(self, handle: ctypes.c_void_p) -> None:
        lib = self._lib()
        self._destroy = lib.gcomp_table_destroy
        self.close()
        self._table = handle
        self.table_version = lib.gcomp_table_version(handle)

    def set_table(self, data: bytes) -> None:
        """Uses the serialised table ``data`` from now on. Raises
        BellowsError (EPROTO, with the byte offset) for bytes that are no
        valid GComp table."""
        from bellows import _lib
        lib = self._lib()
        handle = ctypes.c_void_p()
        err = ctypes.create_string_buffer(256)
        raw = ctypes.create_string_buffer(bytes(data), len(data))
        rc = lib.gcomp_table_read(raw, len(data), ctypes.byref(handle), err,
                                  len(err))
        _lib.check("bellows_gcomp_table_read", rc, err.value.decode())
        self._set_table(handle)
        self._table_bytes = bytes(data)
        self._local = False

    def _build_local(self, grads: list[torch.Tensor],
                     comm: Communicator) -> None:
        """The fallback table: from the ranks' summed histograms."""
        lib = self._lib()
        hist = torch.zeros(256, dtype=torch.int64)
        for g in grads:
            g = g.cpu()  # once per table: the histogram runs on the CPU
            lib.gcomp_histogram(_GCOMP_DTYPES[g.dtype], g.data_ptr(),
                                g.numel(), hist.data_ptr())
        # Exact below 2^53 values; on the gradients' device when they
        # stay there (the CUDA twin), as the collective backend expects.
        total = hist.to(torch.float64).to(grads[0].device)
        comm.all_reduce(total)
        hist = total.to(device="cpu", dtype=torch.int64).contiguous()
        handle = ctypes.c_void_p()
        from bellows import _lib
        _lib.check("bellows_gcomp_table_build",
                   lib.gcomp_table_build(hist.data_ptr(),
                                         self.max_code_bits, 0,
                                         ctypes.byref(handle)))
        self._set_table(handle)
        self._table_bytes = None
        self._local = True

    def _ensure_table(self, grads: list[torch.Tensor],
                      comm: Communicator) -> None:
        from bellows import _lib
        data = self.table_source() if self.table_source else None
        if data and data != self._table_bytes:
            try:
                self.set_table(data)
                self.table_error = None
                return
            except _lib.BellowsError as e:
                # Every rank got the same bytes: every rank falls back.
                self.table_error = str(e)
                self._table_bytes = data
                if self._table and self._local:
                    return
        elif self._table:
            return
        if not self._table or not self._local:
            self._build_local(grads, comm)

    def _levels(self, layer: int, g: torch.Tensor) -> torch.Tensor | None:
        """Per-value levels of layer's gradient from the optimizer's delta,
        or None (then self.level for the whole tensor). For a CUDA ``g``
        (the twin's path) the levels are computed on its device, the
        optimizer's state as float32 there, on the current stream."""
        opt, params = self.optimizer, self.params
        if opt is None or params is None or layer >= len(params):
            return None
        p = params[layer]
        group = next((gr for gr in opt.param_groups
                      if any(q is p for q in gr["params"])), None)
        if group is None:
            return None
        state = opt.state.get(p, {})
        dev = g.device if g.device.type == "cuda" else None

        def as32(t):
            return _cpu32(t) if dev is None else _dev32(t, dev)

        o = _GCompOptimizer(lr=float(group["lr"]),
                            weight_decay=float(group.get("weight_decay",
                                                         0.0)))
        keep = []
        if isinstance(opt, (torch.optim.Adam, torch.optim.AdamW)):
            o.kind = _GCOMP_ADAMW if isinstance(opt, torch.optim.AdamW) \
                else _GCOMP_ADAM
            o.beta1, o.beta2 = (float(b) for b in group["betas"])
            o.eps = float(group["eps"])
            o.step = int(state.get("step", 0)) + 1
            for key, field in (("exp_avg", "exp_avg"),
                               ("exp_avg_sq", "exp_avg_sq")):
                t = as32(state.get(key))
                if t is not None:
                    keep.append(t)
                    setattr(o, field, t.data_ptr())
        elif isinstance(opt, torch.optim.SGD):
            mu = float(group.get("momentum", 0.0))
            o.momentum = mu
            o.dampening = float(group.get("dampening", 0.0))
            o.kind = _GCOMP_SGD if mu == 0 else \
                _GCOMP_NESTEROV if group.get("nesterov") else _GCOMP_MOMENTUM
            buf = as32(state.get("momentum_buffer"))
            if buf is not None:
                keep.append(buf)
                o.buf = buf.data_ptr()
        else:
            return None
        theta = as32(p)
        keep.append(theta)
        o.param = theta.data_ptr()
        levels = torch.empty(g.numel(), dtype=torch.uint8, device=g.device)
        lib = self._lib()
        if dev is None:
            rc = lib.gcomp_levels(ctypes.byref(o), _GCOMP_DTYPES[g.dtype],
                                  g.data_ptr(), g.numel(), self.max_level,
                                  levels.data_ptr())
        else:
            # Enqueued on the current stream; the copies in ``keep`` go
            # back to torch's allocator on that stream, so no later
            # allocation overwrites them before the kernel has read them.
            with torch.cuda.device(dev):
                rc = lib.gcomp_levels_cuda(
                    ctypes.byref(o), _GCOMP_DTYPES[g.dtype], g.data_ptr(),
                    g.numel(), self.max_level, levels.data_ptr(),
                    _stream(g))
        return levels if rc == 0 else None

    def _grad(self, grad: torch.Tensor, cuda: bool = False) -> torch.Tensor:
        """``grad`` flat and contiguous in a GComp dtype, on the CPU (or,
        with ``cuda``, where it is: then it is one already, no copy)."""
        g = grad.detach().reshape(-1)
        if g.dtype not in _GCOMP_DTYPES:
            g = g.float()
        if g.device.type != "cpu" and not cuda:
            g = g.cpu()
        return g.contiguous()

    def _cuda_device(self, lib, comp: Sequence[Item]) -> torch.device | None:
        """The CUDA device of every gradient of ``comp`` if the twin takes
        them all (contiguous, a GComp dtype, one device), else None."""
        dev = comp[0].grad.device
        if dev.type != "cuda" or not _gcomp_cuda(lib):
            return None
        for it in comp:
            g = it.grad
            if (g.device != dev or g.dtype not in _GCOMP_DTYPES
                    or not g.is_contiguous()):
                return None
        return dev

    def _cuda_context(self, lib, like: torch.Tensor):
        """The table's context on ``like``'s device and current stream
        (opened once per table), or None if it does not open."""
        key = (like.device.index if like.device.index is not None
               else torch.cuda.current_device(), _stream(like))
        ctx = self._cuda_ctxs.get(key)  # emptied when the table changes
        if ctx is None:
            try:
                ctx = _GCompCudaContext(lib, self._table, like.device,
                                        key[1])
            except RuntimeError:
                return None
            self._cuda_ctxs[key] = ctx
        return ctx

    def reduce(self, items: Sequence[Item], comm: Communicator) -> Counts:
        """Reduces ``items`` across the ranks; returns what was sent."""
        from bellows import _lib
        counts = Counts()
        raw: list[Item] = []
        comp: list[Item] = []
        for it in items:
            counts.floats_raw += it.grad.numel()
            (comp if it.level > 0 else raw).append(it)
        self._send_raw(raw, counts, comm)
        if not comp:
            return counts
        lib = self._lib()
        dev = self._cuda_device(lib, comp)
        grads = [self._grad(it.grad, dev is not None) for it in comp]
        self._ensure_table(grads, comm)
        ctx = self._cuda_context(lib, grads[0]) if dev is not None else None
        if ctx is None and dev is not None:  # no context: the CPU codec
            dev = None
            grads = [self._grad(it.grad) for it in comp]
        self.last_path = "c" if ctx is None else "cuda"
        where = dev if dev is not None else torch.device("cpu")

        def call(name, *args):
            """bellows_gcomp_<name> on the CPU, or its CUDA twin on the
            context's table, device and stream."""
            if ctx is None:
                return getattr(lib, "gcomp_" + name)(self._table, *args)
            with torch.cuda.device(dev):
                return getattr(lib, f"gcomp_{name}_cuda")(ctx.ptr, *args)

        twin = "" if ctx is None else "_cuda"
        blocks, lens = [], []
        for it, g in zip(comp, grads):
            self.errors.pop(it.layer, None)  # GComp keeps no residual
            dt = _GCOMP_DTYPES[g.dtype]
            levels = self._levels(it.layer, g)
            cap = lib.gcomp_bound(dt, g.numel())
            buf = torch.empty(cap, dtype=torch.uint8, device=where)
            n_out = ctypes.c_size_t()
            st = (ctypes.c_uint64 * 11)()
            rc = call("encode", dt, g.data_ptr(), g.numel(), self.level,
                      None if levels is None else levels.data_ptr(),
                      buf.data_ptr(), cap, ctypes.byref(n_out), st)
            _lib.check(f"bellows_gcomp_encode{twin}", rc)
            blocks.append(buf[:n_out.value])
            lens.append(n_out.value)
            self.values += st[0]
            self.exp_bits += st[7]
            self.bytes += st[10]
            if ctx is not None:
                self.cuda_layers += 1
        lens_t = torch.tensor(lens, dtype=torch.int64, device=where)
        all_lens = [x.cpu() for x in comm.all_gather(lens_t)]
        longest = max(int(x.sum()) for x in all_lens)
        payload = torch.zeros(longest, dtype=torch.uint8, device=where)
        mine = torch.cat(blocks) if len(blocks) > 1 else blocks[0]
        payload[:mine.numel()] = mine
        counts.bytes_sent += mine.numel()
        counts.floats_sent += -(-mine.numel() // 4)
        gathered = comm.all_gather(payload)
        offs = [0] * comm.world
        err = ctypes.create_string_buffer(256)
        for k, (it, g) in enumerate(zip(comp, grads)):
            n = g.numel()
            total = torch.zeros(n, dtype=torch.float32, device=where)
            tmp = None if g.dtype == torch.float32 else \
                torch.empty(n, dtype=g.dtype, device=where)
            for r, data in enumerate(gathered):
                size = int(all_lens[r][k])
                ptr = data.data_ptr() + offs[r]
                if tmp is None:
                    rc = call("decode", ptr, size, 0, total.data_ptr(), n,
                              _CODEC_ADD, err, len(err))
                else:
                    rc = call("decode", ptr, size, _GCOMP_DTYPES[g.dtype],
                              tmp.data_ptr(), n, 0, err, len(err))
                    if rc == 0:
                        total += tmp.float()
                _lib.check(f"bellows_gcomp_decode{twin}", rc,
                           f"rank {r} layer {it.layer}: "
                           f"{err.value.decode()}")
                offs[r] += size
            total.div_(comm.world)
            it.grad.copy_(total.view_as(it.grad))
        return counts


COMPRESSORS = ("powersgd", "topk", "1bit", "2bit", "gcomp")


def make_compressor(name: str, seed: int = 0,
                    threshold: float | str = 0.5):
    """Returns the compressor called ``name`` (one of COMPRESSORS):
    PowerSGD (seeded with ``seed``), TopK, OneBit or TwoBit (quantiser
    ``threshold``; TwoBit also takes "auto") or GComp (lossless unless given an optimizer). Raises
    ValueError for another name or a bad threshold."""
    if name == "powersgd":
        return PowerSGD(seed)
    if name == "topk":
        return TopK()
    if name == "1bit":
        return OneBit(threshold)
    if name == "2bit":
        return TwoBit(threshold)
    if name == "gcomp":
        return GComp()
    raise ValueError(f"unknown compressor {name!r} "
                     f"({', '.join(COMPRESSORS)})")
