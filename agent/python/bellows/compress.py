"""compress - per-tensor gradient compressors: PowerSGD, top-k, 1-bit, 2-bit.

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
  grad + residual minus what was sent. CPU float32 tensors are encoded
  and decoded by libbellows' C codecs (bellows/codec.h) on the tensors'
  memory, bit for bit the torch code's results; that code stays as the
  reference and runs for other tensors or without the library.
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

import dataclasses
import math
import time
from typing import Sequence

import torch
import torch.distributed as dist

from bellows.resireduce import Residuals

__all__ = [
    "COMPRESSORS",
    "Communicator",
    "Counts",
    "Item",
    "OneBit",
    "PowerSGD",
    "ProcessGroupComm",
    "TopK",
    "TwoBit",
    "make_compressor",
    "orthogonalize",
    "query_seed",
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

    def __iadd__(self, other: "Counts") -> "Counts":
        self.floats_sent += other.floats_sent
        self.bytes_sent += other.bytes_sent
        self.floats_raw += other.floats_raw
        return self


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
        # The residual plan's state (shared and reduced residuals); the
        # layers it leaves their own residual keep it in self.errors.
        self.residuals = Residuals(self.errors)

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
        else:
            self.errors.pop(layer, None)


class PowerSGD(_Base):
    """PowerSGD per tensor, rank = int(level), error feedback, warm start.

    ``seed`` must be the same on every rank (see query_seed).
    """

    name = "powersgd"

    def __init__(self, seed: int = 0):
        super().__init__()
        self.seed = seed
        self.queries: dict[int, torch.Tensor] = {}  # layer -> Q [n, r]
        self.inits: dict[int, int] = {}  # layer -> Q initialisations

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

    def reduce(self, items: Sequence[Item], comm: Communicator) -> Counts:
        """Reduces ``items`` across the ranks; returns what was sent."""
        counts = Counts()
        raw, low = [], []
        for it in items:
            counts.floats_raw += it.grad.numel()
            r = self.rank_of(it.grad.shape, it.level)
            if r == 0:
                raw.append(it)
                # Back to raw: the next compressed step starts afresh.
                self.queries.pop(it.layer, None)
            else:
                low.append((it, r))
        flat_raw = self._raw(raw, counts)
        ms, ps, qs = [], [], []
        for it, r in low:
            m, n = _matrix_shape(it.grad.shape)
            # The compensation: own residual, shared or reduced one.
            err = self.residuals.begin(it.layer, (m, n), it.grad.device)
            # M lives in the error buffer: error = M - approx is then one
            # in-place subtraction.
            mat = err.add_(it.grad.reshape(m, n))
            q = self._query(it.layer, n, r, mat)
            ms.append(mat)
            qs.append(q)
            ps.append(mat @ q)
            counts.floats_sent += r * (m + n)
            counts.bytes_sent += r * (m + n) * mat.element_size()
        nraw = 0 if flat_raw is None else flat_raw.numel()
        parts = ([flat_raw] if flat_raw is not None else []) + \
            [p.reshape(-1) for p in ps]
        if parts:
            buf = torch.cat(parts) if len(parts) > 1 else parts[0]
            comm.all_reduce(buf)
            if flat_raw is not None:
                self._unflatten(raw, buf[:nraw], comm.world)
            off = nraw
            for i, p in enumerate(ps):
                ps[i] = buf[off:off + p.numel()].view_as(p)
                off += p.numel()
        if not low:
            return counts
        for i, (p, mat) in enumerate(zip(ps, ms)):
            orthogonalize(p)
            qs[i] = mat.t() @ p
        qbuf = torch.cat([q.reshape(-1) for q in qs])
        comm.all_reduce(qbuf)
        qbuf.div_(comm.world)
        off = 0
        for (it, r), p, mat in zip(low, ps, ms):
            m, n = mat.shape
            q = qbuf[off:off + n * r].view(n, r)
            off += n * r
            self.queries[it.layer] = q.clone()  # the next step's warm start
            approx = p @ q.t()
            it.grad.copy_(approx.view_as(it.grad))
            mat.sub_(approx)
            self.residuals.end(it.layer, mat)
        return counts

    def reset(self, layer: int | None = None) -> None:
        super().reset(layer)
        if layer is None:
            self.queries.clear()
        else:
            self.queries.pop(layer, None)


class TopK(_Base):
    """top-k per tensor, keep fraction = level, error feedback, all-gather.

    Indices travel as int32 bit patterns inside the float32 payload, so
    one all-gather carries a whole group: tensors of 2^31 elements or more
    are refused (ValueError).
    """

    name = "topk"

    def __init__(self, native: bool = True):
        """``native``: select with libbellows' C top-k where it applies
        (contiguous CPU float32 gradients); False runs the torch code
        only. Both send the same set of (index, value) pairs and leave
        the same residual; the C code sends the indices ascending and
        breaks ties at the k-th magnitude by the lower index, where
        torch.topk's choice among ties is unspecified."""
        super().__init__()
        self.native = native

    def select(self, err: torch.Tensor, grad: torch.Tensor,
               k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Adds ``grad`` to the residual ``err``, takes the ``k`` entries
        of largest magnitude out of it (their residual becomes 0); returns
        their values (float32) and indices (int32)."""
        g = grad.reshape(-1)
        lib = _codec_lib() if self.native else None
        if (lib is not None and lib.codec_topk_encode is not None
                and g.dtype == torch.float32 and g.device.type == "cpu"
                and err.device.type == "cpu" and g.is_contiguous()
                and err.is_contiguous()):
            vals = torch.empty(k, dtype=torch.float32)
            idx = torch.empty(k, dtype=torch.int32)
            if lib.codec_topk_encode(g.data_ptr(), err.data_ptr(),
                                     g.numel(), k, idx.data_ptr(),
                                     vals.data_ptr()) == 0:
                return vals, idx
        mat = err.add_(g.float())
        _, idx = torch.topk(mat.abs(), k, sorted=False)
        vals = mat[idx]
        mat[idx] = 0  # what is sent leaves the residual
        return vals, idx.to(torch.int32)

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

    def reduce(self, items: Sequence[Item], comm: Communicator) -> Counts:
        """Reduces ``items`` across the ranks; returns what was sent."""
        counts = Counts()
        raw, sparse = [], []
        for it in items:
            counts.floats_raw += it.grad.numel()
            k = self.k_of(it.grad.numel(), it.level)
            (sparse if k else raw).append((it, k))
        raw = [it for it, _ in raw]
        flat_raw = self._raw(raw, counts)
        if flat_raw is not None:
            comm.all_reduce(flat_raw)
            self._unflatten(raw, flat_raw, comm.world)
        if not sparse:
            return counts
        payload = []
        for it, k in sparse:
            numel = it.grad.numel()
            if numel >= 1 << 31:
                raise ValueError(f"layer {it.layer}: top-k of {numel} "
                                 "elements needs 64-bit indices")
            err = self.residuals.begin(it.layer, (numel,), it.grad.device)
            vals, idx = self.select(err, it.grad, k)
            self.residuals.end(it.layer, err)
            payload.append(vals)
            payload.append(idx.view(torch.float32))
            counts.floats_sent += 2 * k
            counts.bytes_sent += 2 * k * 4
        gathered = comm.all_gather(torch.cat(payload))
        off = 0
        for it, k in sparse:
            out = torch.zeros(it.grad.numel(), dtype=torch.float32,
                              device=it.grad.device)
            for g in gathered:
                vals = g[off:off + k]
                idx = g[off + k:off + 2 * k].view(torch.int32).long()
                out.index_add_(0, idx, vals)
            off += 2 * k
            out.div_(comm.world)
            it.grad.copy_(out.view_as(it.grad))
        return counts


_native_codec = None  # libbellows' functions, False if unavailable


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


class _Quantizer(_Base):
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

    def __init__(self, threshold: float = 0.5, native: bool = True):
        """``native``: use libbellows' C codecs where they apply (CPU
        float32 tensors, a threshold that is a valid float32); False runs
        the torch code only."""
        super().__init__()
        # Codes are of whole tensors: the residuals stay per layer,
        # whatever residual plan is in force.
        self.residuals.planned = False
        self.native = native
        threshold = float(threshold)
        if not math.isfinite(threshold) or threshold < self._min_threshold:
            raise ValueError(f"{self.name} threshold must be finite and "
                             f"{self._threshold_rule}, not {threshold!r}")
        self.threshold = threshold

    _min_threshold = 0.0
    _threshold_rule = ">= 0"

    @classmethod
    def words(cls, numel: int) -> int:
        """Float32 words the packed codes of ``numel`` values take."""
        return -(-numel * cls.bits // 32)

    def level_floats(self, shape: Sequence[int], level: float) -> int:
        numel = math.prod(shape)
        return self.words(numel) if level > 0 else numel

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
        packed = self._encode_native(err, grad)
        if packed is not None:
            return packed
        r = err.add_(grad.reshape(-1).float())
        codes = self._quantise(r)  # uint8, one code per value
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
        """The C codecs if they apply to ``tensors``, else None."""
        if not self.native:
            return None
        for t in tensors:
            if t.device.type != "cpu" or not t.is_contiguous():
                return None
        return _codec_lib()

    def _encode_native(self, err: torch.Tensor,
                       grad: torch.Tensor) -> torch.Tensor | None:
        """encode by the C codec (err += grad, quantise, error left in
        err, as the torch code); None where it does not apply (err is
        then untouched)."""
        g = grad.reshape(-1)
        if g.dtype != torch.float32:
            return None
        lib = self._native(err, g)
        if lib is None:
            return None
        numel = g.numel()
        out = torch.empty(self.words(numel), dtype=torch.float32)
        rc = lib.codec_encode_codes(self.bits, self.threshold, g.data_ptr(),
                                    err.data_ptr(), numel, out.data_ptr(),
                                    out.numel() * 4)
        return out if rc == 0 else None

    def decode(self, words: torch.Tensor, numel: int,
               add_to: torch.Tensor | None = None) -> torch.Tensor:
        """The float32 values ``numel`` packed codes stand for; with
        ``add_to`` (``numel`` float32 values), added to it in place (the
        same sums as ``add_to += decode(words, numel)``) and returned."""
        if add_to is None:
            lib = self._native(words)
        else:
            lib = self._native(words, add_to)
            if add_to.dtype != torch.float32:
                lib = None
        if lib is not None and words.dtype == torch.float32:
            out = add_to if add_to is not None else \
                torch.empty(numel, dtype=torch.float32)
            if lib.codec_decode_codes(self.bits, self.threshold,
                                      words.data_ptr(), words.numel() * 4,
                                      numel, out.data_ptr(),
                                      0 if add_to is None else 1) == 0:
                return out
        if add_to is not None:
            return add_to.add_(self._decode_torch(words, numel))
        return self._decode_torch(words, numel)

    def _decode_torch(self, words: torch.Tensor,
                      numel: int) -> torch.Tensor:
        """decode by the torch code (the reference)."""
        packed = words.contiguous().view(torch.uint8)
        shifts = torch.arange(0, 8, self.bits, dtype=torch.uint8,
                              device=packed.device)
        mask = (1 << self.bits) - 1
        codes = ((packed.unsqueeze(1) >> shifts) & mask).reshape(-1)
        return self._dequantise(codes[:numel])

    def _quantise(self, r: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _dequantise(self, codes: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def reduce(self, items: Sequence[Item], comm: Communicator) -> Counts:
        """Reduces ``items`` across the ranks; returns what was sent."""
        counts = Counts()
        raw, quant = [], []
        for it in items:
            counts.floats_raw += it.grad.numel()
            (quant if it.level > 0 else raw).append(it)
        flat_raw = self._raw(raw, counts)
        if flat_raw is not None:
            comm.all_reduce(flat_raw)
            self._unflatten(raw, flat_raw, comm.world)
        if not quant:
            return counts
        payload = [self.encode(it.layer, it.grad) for it in quant]
        words = torch.cat(payload) if len(payload) > 1 else payload[0]
        counts.floats_sent += words.numel()
        counts.bytes_sent += words.numel() * 4
        gathered = comm.all_gather(words)
        off = 0
        for it, p in zip(quant, payload):
            n = it.grad.numel()
            total = self.decode(gathered[0][off:off + p.numel()], n)
            for g in gathered[1:]:
                self.decode(g[off:off + p.numel()], n, add_to=total)
            off += p.numel()
            total.div_(comm.world)
            it.grad.copy_(total.view_as(it.grad))
        return counts


class TwoBit(_Quantizer):
    """2-bit quantisation with error feedback, MXNet's ``2bit``.

    Per value, with r the residual and t the threshold (> 0)::

        r += g
        r >= +t: code 3 (binary 11), r -= t     decodes to +t
        r <= -t: code 2 (binary 10), r += t     decodes to -t
        else:    code 0                         decodes to 0

    16 values per float32 word.
    """

    name = "2bit"
    bits = 2
    _min_threshold = math.ulp(0.0)
    _threshold_rule = "> 0"

    def _quantise(self, r: torch.Tensor) -> torch.Tensor:
        t = self.threshold
        pos = r >= t
        neg = r <= -t
        r.sub_(pos.float() * t).add_(neg.float() * t)
        return pos.to(torch.uint8) * 3 + neg.to(torch.uint8) * 2

    def _dequantise(self, codes: torch.Tensor) -> torch.Tensor:
        t = self.threshold
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

    def _quantise(self, r: torch.Tensor) -> torch.Tensor:
        bit = r > self.threshold
        r.add_(1.0 - 2.0 * bit.float())
        return bit.to(torch.uint8)

    def _dequantise(self, codes: torch.Tensor) -> torch.Tensor:
        return codes.float() * 2 - 1


COMPRESSORS = ("powersgd", "topk", "1bit", "2bit")


def make_compressor(name: str, seed: int = 0, threshold: float = 0.5):
    """Returns the compressor called ``name`` (one of COMPRESSORS):
    PowerSGD (seeded with ``seed``), TopK, OneBit or TwoBit (quantiser
    ``threshold``). Raises ValueError for another name or a bad
    threshold."""
    if name == "powersgd":
        return PowerSGD(seed)
    if name == "topk":
        return TopK()
    if name == "1bit":
        return OneBit(threshold)
    if name == "2bit":
        return TwoBit(threshold)
    raise ValueError(f"unknown compressor {name!r} "
                     f"({', '.join(COMPRESSORS)})")
