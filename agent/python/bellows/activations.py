"""bellows.activations - COMET's lossy compression of convolution inputs.

COMET (Jin et al., PVLDB 15(4), 2022) keeps the activation a convolution
needs for its weight gradient, its INPUT, in an error-bounded lossy form
between the forward and the backward pass; bellowsd's ``comet`` policy sets
each layer's absolute error bound eb from the statistics this module
reports. ``attach(model, agent)`` wraps the forward of every selected
convolution module (nn.Conv1d/2d/3d, not transposed) so that, inside it
only, ``torch.autograd.graph.saved_tensors_hooks`` packs the saved input:

    q  = round(x / (2 eb'))       eb' = eb less a float rounding margin
    x' = 2 eb' q                  |x - x'| <= eb for every element
    x' = 0 where |x'| <= eb       COMET's zero filter, at unpack

With this pre-quantisation q = 0 already reconstructs as exactly 0 and a
non-zero q as |x'| >= 2 eb' > eb, so the filter changes a value only where
2 eb' rounds to eb in x's dtype (eb' within a rounding of eb / 2); it is
applied anyway, explicitly, because it is what the bound statistics (R)
and the theory assume. The codes are stored in the narrowest integer type
that holds them (int8, int16, int32); when that saves memory, as a packed
bitmask of the non-zero codes plus those codes only. A layer whose bound is
0, whose input holds NaN/Inf, whose codes do not fit int32, or whose dtype
is too coarse for its bound keeps the input as it is (exact, no copy).

Contiguous CPU float32 inputs are packed and unpacked by libbellows' C
quantiser (bellows/codec.h, bellows_ebq_*, through ctypes on the tensors'
data pointers, no copy): the same arithmetic operation for operation, so
the same codes, bitmask and floats bit for bit. Contiguous CUDA float32
inputs go to its CUDA twin (bellows_ebq_*_cuda) when libbellows was built
with CUDA and sees a device: the same codes and floats again, on the
device's current stream, with a scratch buffer of about twice the input
taken from torch's allocator for the call (the twin waits for its
stream: the plan sizes the codes). The torch code below stays the
reference and the fallback (other dtypes and devices, a library without
the quantiser or its twin, ``native=False``).

What is compressed and what is not: only the input tensor a selected
convolution saves for its weight gradient. Its weight, the outputs of
ReLU, batch norm, pooling and every other layer are saved untouched (the
hooks are active inside the convolution's forward only, and there only
for the tensor that is the input). The input gradient of a convolution
does not use its input, so the error stays in that layer's weight gradient
(COMET's premise). Memory is really freed only when nothing else holds the
input: an input that is also saved by another layer (e.g. the output of a
ReLU directly before the convolution, which ReLU saves for its own
backward) stays alive in full. docs/comet-activations.md has the details.

Statistics, every ``every``-th forward of a layer with gradients on, are
reported with ``Agent.observe_activation(layer, lbar, nonzero,
stored_bytes, raw_bytes)`` from the backward pass (inside the step):

- lbar: mean over the samples of the per-sample max |dLoss/dOutput|, on
  the gradient autograd hands the convolution's output (which carries the
  1/N of a batch-mean loss);
- nonzero: R, the fraction of non-zero elements of the stored activation
  after the zero filter (a density, not a sparsity);
- stored_bytes and raw_bytes: bytes held for backward and uncompressed.

Every forward of the whole model with gradients on is also measured as a
whole: ``saved_bytes`` is the bytes of every tensor that forward saved for
backward (a pass-through pack hook around the model's forward sees what
each layer saves; the compressed convolution inputs count at their stored
size; a storage counts once however many layers save it or a view of it;
parameters do not count, they do not grow with the batch). The comet_batch
policy's memory model needs it: ``memory_fields(..., compressor=c)`` puts
it in the step's ``saved_bytes``.

``layer`` is the index of the convolution's WEIGHT in the agent's layer
table. bellowsd's M_avg comes from the momentum average of that weight's
gradients: open the agent with ``layer_table(model)`` here (LAYER_MOMENTUM
on every convolution weight) or bellows.torch.attach(...,
layer_flags=bellows.LAYER_MOMENTUM); attach() warns when the flag is
missing.
"""

from __future__ import annotations

import ctypes
import dataclasses
import math
import threading
import warnings
from collections.abc import Iterable
from typing import Any

import torch
import torch.nn as nn

from bellows import _lib
from bellows.agent import Layer

__all__ = [
    "ActStats",
    "ActivationCompressor",
    "Packed",
    "attach",
    "host_memory_used",
    "layer_table",
    "memory_fields",
    "pack",
    "unpack",
]

# Integer code types, narrowest first, with the largest |code| each holds.
_CODES = ((torch.int8, 127), (torch.int16, 32767), (torch.int32, 2**31 - 1))

# Relative margin taken off the step for the float64 arithmetic of the
# division and product (|q| < 2**31: errors below 2**-20 of the step).
_MARGIN = 2.0**-18

# Elements per chunk of the float64 arithmetic in pack (8 MiB a buffer).
_CHUNK = 1 << 20

_CONV = (nn.Conv1d, nn.Conv2d, nn.Conv3d)

# Code type of each width of the C quantiser's byte codes.
_CODE_OF_BITS = {8: torch.int8, 16: torch.int16, 32: torch.int32}

_native_ebq = None  # libbellows' functions, False if unavailable


def _ebq_lib():
    """libbellows' functions if it has the C quantiser, else None."""
    global _native_ebq
    if _native_ebq is None:
        try:
            funcs = _lib.library()
            ok = None not in (funcs.ebq_plan, funcs.ebq_encode_parts,
                              funcs.ebq_decode_parts)
            _native_ebq = funcs if ok else False
        except OSError:
            _native_ebq = False
    return _native_ebq or None


_cuda_ebq = None  # True if libbellows has the CUDA twin and a device


def _ebq_cuda_lib():
    """libbellows' functions if it has the quantiser's CUDA twin and sees
    a device, else None."""
    global _cuda_ebq
    lib = _ebq_lib()
    if lib is None:
        return None
    if _cuda_ebq is None:
        _cuda_ebq = bool(lib.ebq_plan_cuda is not None
                         and lib.ebq_cuda_available is not None
                         and lib.ebq_cuda_available() == 1)
    return lib if _cuda_ebq else None


def _native_ok(t: torch.Tensor) -> bool:
    return t.device.type == "cpu" and t.is_contiguous()


def _cuda_ok(t: torch.Tensor) -> bool:
    return t.device.type == "cuda" and t.is_contiguous()


def _scratch(lib, n: int, device: torch.device) -> torch.Tensor:
    """Device scratch of the CUDA twin for n values (torch's allocator
    aligns it to 256 bytes or more)."""
    return torch.empty(max(8, lib.ebq_cuda_scratch_bytes(n)),
                       dtype=torch.uint8, device=device)


def _ptr(t: torch.Tensor | None) -> int | None:
    """A tensor's data pointer, None for no tensor or an empty one."""
    return None if t is None or t.numel() == 0 else t.data_ptr()


def _unwrap(model: nn.Module) -> nn.Module:
    inner = getattr(model, "module", model)
    return inner if isinstance(inner, nn.Module) else model


def _packbits(mask: torch.Tensor) -> torch.Tensor:
    """A flat bool tensor as uint8, eight elements a byte (LSB first)."""
    n = mask.numel()
    pad = (-n) % 8
    m = mask.reshape(-1).to(torch.uint8)
    if pad:
        m = torch.cat([m, m.new_zeros(pad)])
    weights = torch.tensor([1, 2, 4, 8, 16, 32, 64, 128], dtype=torch.uint8,
                           device=mask.device)
    return (m.view(-1, 8) * weights).sum(1, dtype=torch.uint8)


def _unpackbits(bits: torch.Tensor, n: int) -> torch.Tensor:
    """The inverse of _packbits: a flat bool tensor of ``n`` elements."""
    shifts = torch.arange(8, dtype=torch.uint8, device=bits.device)
    return ((bits.unsqueeze(1) >> shifts) & 1).bool().view(-1)[:n]


class _Ledger:
    """Bytes held by live Packed objects, and their peak. Thread-safe:
    on CUDA the backward (which frees packs) runs on another thread."""

    def __init__(self):
        self.lock = threading.Lock()
        self.held = 0
        self.held_raw = 0
        self.peak = 0
        self.packs = 0

    def add(self, stored: int, raw: int) -> None:
        with self.lock:
            self.held += stored
            self.held_raw += raw
            self.packs += 1
            if self.held > self.peak:
                self.peak = self.held

    def remove(self, stored: int, raw: int) -> None:
        with self.lock:
            self.held -= stored
            self.held_raw -= raw
            self.packs -= 1


class Packed:
    """One saved activation as held for backward.

    ``mode`` is "raw" (the tensor itself, exact), "dense" (one code per
    element) or "sparse" (a bitmask of the non-zero codes and those codes).
    ``eb`` is the bound asked for, ``step`` the quantisation step 2 eb'
    actually used (eb' <= eb), ``nonzero`` the non-zero fraction of what
    unpack returns, ``stored_bytes`` the bytes held, ``raw_bytes`` those of
    the input. While a ledger is attached the bytes count in it until the
    object is freed (autograd frees it with the graph).
    """

    __slots__ = ("shape", "dtype", "mode", "eb", "step", "codes", "bits",
                 "raw", "nonzero", "stored_bytes", "raw_bytes", "_ledger")
    shape: tuple[int, ...]
    dtype: torch.dtype
    mode: str
    eb: float
    step: float
    # Tensors or None, as ``mode`` says: raw holds ``raw``, dense ``codes``,
    # sparse ``codes`` and the bitmask ``bits``.
    codes: Any
    bits: Any
    raw: Any
    nonzero: float
    stored_bytes: int
    raw_bytes: int
    _ledger: _Ledger | None

    def __init__(self) -> None:
        self._ledger = None

    @property
    def code_dtype(self) -> torch.dtype | None:
        """Integer type of the codes (None when raw)."""
        return None if self.codes is None else self.codes.dtype

    @property
    def ratio(self) -> float:
        """raw_bytes / stored_bytes."""
        return self.raw_bytes / self.stored_bytes if self.stored_bytes \
            else 1.0

    def _account(self, ledger: _Ledger) -> None:
        self._ledger = ledger
        ledger.add(self.stored_bytes, self.raw_bytes)

    def __del__(self):
        ledger = self._ledger
        if ledger is not None:
            self._ledger = None
            try:
                ledger.remove(self.stored_bytes, self.raw_bytes)
            except Exception:  # interpreter shutdown
                pass


def _raw(x: torch.Tensor, count_nonzero: bool) -> Packed:
    p = Packed()
    p.shape, p.dtype, p.mode = tuple(x.shape), x.dtype, "raw"
    p.eb, p.step, p.codes, p.bits, p.raw = 0.0, 0.0, None, None, x
    n = x.numel()
    p.nonzero = (torch.count_nonzero(x).item() / n
                 if count_nonzero and n else float("nan"))
    p.stored_bytes = p.raw_bytes = n * x.element_size()
    return p


def _pack_native(x: torch.Tensor, eb: float,
                 count_nonzero: bool) -> Packed | None:
    """pack by the C quantiser (x contiguous CPU float32, eb > 0, x not
    empty); None when the library lacks it."""
    lib = _ebq_lib()
    if lib is None:
        return None
    flat = x.detach().reshape(-1)  # a view: x is contiguous
    n = flat.numel()
    info = _lib.EbqInfo()
    if lib.ebq_plan(flat.data_ptr(), n, eb, _lib.EBQ_BYTE_CODES,
                    ctypes.byref(info)) != 0:
        return None
    if info.mode == _lib.EBQ_RAW:
        return _raw(x, count_nonzero)
    code = _CODE_OF_BITS[info.bits]
    codes = torch.empty(info.codes, dtype=code)
    bits = torch.empty(info.mask_bytes, dtype=torch.uint8) \
        if info.mode == _lib.EBQ_SPARSE else None
    nz = ctypes.c_uint64()
    if lib.ebq_encode_parts(flat.data_ptr(), ctypes.byref(info),
                            None if bits is None else bits.data_ptr(),
                            codes.data_ptr(), ctypes.byref(nz)) != 0:
        return _raw(x, count_nonzero)  # pragma: no cover - the margin
    p = Packed()
    p.shape, p.dtype, p.eb, p.step, p.raw = tuple(x.shape), x.dtype, eb, \
        info.step, None
    p.mode = "sparse" if bits is not None else "dense"
    p.bits, p.codes = bits, codes
    p.nonzero = nz.value / n
    p.raw_bytes = n * x.element_size()
    p.stored_bytes = (0 if bits is None else bits.numel()) + \
        codes.numel() * codes.element_size()
    return p


def _pack_cuda(x: torch.Tensor, eb: float,
               count_nonzero: bool) -> Packed | None:
    """pack by the quantiser's CUDA twin (x contiguous CUDA float32, eb >
    0, x not empty); None when the library lacks it or it fails."""
    lib = _ebq_cuda_lib()
    if lib is None:
        return None
    flat = x.detach().reshape(-1)
    n = flat.numel()
    scratch = _scratch(lib, n, x.device)
    stream = torch.cuda.current_stream(x.device).cuda_stream
    info = _lib.EbqInfo()
    with torch.cuda.device(x.device):
        if lib.ebq_plan_cuda(flat.data_ptr(), n, eb, _lib.EBQ_BYTE_CODES,
                             scratch.data_ptr(), scratch.numel(), stream,
                             ctypes.byref(info)) != 0:
            return None
        if info.mode == _lib.EBQ_RAW:
            return _raw(x, count_nonzero)
        code = _CODE_OF_BITS[info.bits]
        codes = torch.empty(info.codes, dtype=code, device=x.device)
        bits = torch.empty(info.mask_bytes, dtype=torch.uint8,
                           device=x.device) \
            if info.mode == _lib.EBQ_SPARSE else None
        nz = ctypes.c_uint64()
        if lib.ebq_encode_parts_cuda(flat.data_ptr(), ctypes.byref(info),
                                     _ptr(bits), _ptr(codes),
                                     scratch.data_ptr(), scratch.numel(),
                                     stream, ctypes.byref(nz)) != 0:
            return _raw(x, count_nonzero)  # pragma: no cover - the margin
    p = Packed()
    p.shape, p.dtype, p.eb, p.step, p.raw = tuple(x.shape), x.dtype, eb, \
        info.step, None
    p.mode = "sparse" if bits is not None else "dense"
    p.bits, p.codes = bits, codes
    p.nonzero = nz.value / n
    p.raw_bytes = n * x.element_size()
    p.stored_bytes = (0 if bits is None else bits.numel()) + \
        codes.numel() * codes.element_size()
    return p


def _unpack_cuda(p: Packed) -> torch.Tensor | None:
    """unpack by the quantiser's CUDA twin; None where it does not
    apply."""
    lib = _ebq_cuda_lib()
    if lib is None or p.dtype != torch.float32 or \
            not _cuda_ok(p.codes) or \
            (p.bits is not None and (not _cuda_ok(p.bits) or
                                     p.bits.device != p.codes.device)) or \
            p.codes.element_size() * 8 not in _CODE_OF_BITS:
        return None
    dev = p.codes.device
    n = math.prod(p.shape)
    size = p.codes.element_size()
    sparse = p.mode == "sparse"
    info = _lib.EbqInfo(
        mode=_lib.EBQ_SPARSE if sparse else _lib.EBQ_DENSE,
        bits=size * 8, zstd=0, n=n, codes=p.codes.numel(), nonzero=0,
        eb=p.eb, step=p.step, mask_bytes=p.bits.numel() if sparse else 0,
        codes_bytes=p.codes.numel() * size)
    info.payload_bytes = info.mask_bytes + info.codes_bytes
    out = torch.empty(p.shape, dtype=torch.float32, device=dev)
    scratch = _scratch(lib, n, dev)
    with torch.cuda.device(dev):
        rc = lib.ebq_decode_parts_cuda(
            ctypes.byref(info), _ptr(p.bits) if sparse else None,
            _ptr(p.codes), _ptr(out), scratch.data_ptr(), scratch.numel(),
            torch.cuda.current_stream(dev).cuda_stream)
    return out if rc == 0 else None


def _unpack_native(p: Packed) -> torch.Tensor | None:
    """unpack by the C quantiser; None where it does not apply."""
    lib = _ebq_lib()
    if lib is None or p.dtype != torch.float32 or \
            not _native_ok(p.codes) or \
            (p.bits is not None and not _native_ok(p.bits)) or \
            p.codes.element_size() * 8 not in _CODE_OF_BITS:
        return None
    n = math.prod(p.shape)
    size = p.codes.element_size()
    sparse = p.mode == "sparse"
    info = _lib.EbqInfo(
        mode=_lib.EBQ_SPARSE if sparse else _lib.EBQ_DENSE,
        bits=size * 8, zstd=0, n=n, codes=p.codes.numel(), nonzero=0,
        eb=p.eb, step=p.step, mask_bytes=p.bits.numel() if sparse else 0,
        codes_bytes=p.codes.numel() * size)
    info.payload_bytes = info.mask_bytes + info.codes_bytes
    out = torch.empty(p.shape, dtype=torch.float32)
    rc = lib.ebq_decode_parts(ctypes.byref(info),
                              p.bits.data_ptr() if sparse else None,
                              p.codes.data_ptr(), out.data_ptr())
    return out if rc == 0 else None


def pack(x: torch.Tensor, eb: float, count_nonzero: bool = True,
         native: bool = True) -> Packed:
    """Quantises ``x`` with absolute error bound ``eb``; see the module
    text for the rule and for when ``x`` is kept raw (eb 0 included).

    The result satisfies |x - unpack(result)| <= eb for every element,
    checked here before the codes are accepted (a failure, which the
    margin rules out, falls back to raw). The float64 arithmetic runs in
    chunks of _CHUNK elements, so the memory it takes beyond the codes
    does not grow with the input. ``count_nonzero`` False skips the count
    of non-zeros of a raw tensor (``nonzero`` is then NaN). ``native``
    False runs the torch code even where the C quantiser applies
    (contiguous CPU float32, or CUDA float32 with the CUDA twin). Raises
    ValueError for a negative or non-finite ``eb``.
    """
    eb = float(eb)
    if not math.isfinite(eb) or eb < 0:
        raise ValueError(f"error bound must be finite and >= 0, not {eb}")
    n = x.numel()
    if eb == 0 or n == 0 or not x.is_floating_point():
        return _raw(x, count_nonzero)
    if native and x.dtype == torch.float32 and _native_ok(x):
        p = _pack_native(x, eb, count_nonzero)
        if p is not None:
            return p
    if native and x.dtype == torch.float32 and _cuda_ok(x):
        p = _pack_cuda(x, eb, count_nonzero)
        if p is not None:
            return p
    flat = x.detach().reshape(-1)
    amax = max(flat[lo:lo + _CHUNK].abs().max().item()
               for lo in range(0, n, _CHUNK))
    if not math.isfinite(amax):
        return _raw(x, count_nonzero)
    # Rounding the reconstruction to x's dtype moves it by at most half an
    # ulp of the largest magnitude it can have, amax + eb: take that (and
    # the float64 margin) off the bound, and give up if little is left.
    top = amax + eb
    half_ulp = 0.5 * torch.finfo(x.dtype).eps * 2.0**math.floor(
        math.log2(top))
    eb_eff = (eb - half_ulp) * (1.0 - _MARGIN)
    if eb_eff <= 0.5 * eb:
        return _raw(x, count_nonzero)
    step = 2.0 * eb_eff
    # round() is monotone: the largest |code| is that of the largest |x|.
    qmax = abs(round(amax / step))
    code, limit = next(((t, m) for t, m in _CODES if qmax <= m),
                       (None, 0))
    if code is None:
        return _raw(x, count_nonzero)
    size = torch.tensor([], dtype=code).element_size()
    raw_bytes = n * x.element_size()
    codes = torch.empty(n, dtype=code, device=x.device)
    nz = nzq = 0  # non-zero reconstructions, non-zero codes
    for lo in range(0, n, _CHUNK):
        xd = flat[lo:lo + _CHUNK].to(torch.float64)
        q = torch.round(xd / step)
        # The check unpack's arithmetic passes: the same product, cast
        # and filter.
        rec = (q * step).to(x.dtype)
        rec.masked_fill_(rec.abs() <= eb, 0)
        if (xd - rec.to(torch.float64)).abs_().max().item() > eb or \
                q.abs().max().item() > limit:
            return _raw(x, count_nonzero)  # pragma: no cover - the margin
        nz += int(torch.count_nonzero(rec).item())
        nzq += int(torch.count_nonzero(q).item())
        codes[lo:lo + _CHUNK] = q.to(code)
        del xd, q, rec
    dense = n * size
    # The sparse layout stores every non-zero code, including one the
    # filter zeroes (possible only when the step rounds to eb in x's
    # dtype): size it by the codes.
    sparse = (n + 7) // 8 + nzq * size
    if min(dense, sparse) >= raw_bytes:
        return _raw(x, count_nonzero)
    p = Packed()
    p.shape, p.dtype, p.eb, p.step, p.raw = tuple(x.shape), x.dtype, eb, \
        step, None
    p.nonzero = nz / n
    p.raw_bytes = raw_bytes
    if sparse < dense:
        mask = codes != 0
        p.mode, p.bits = "sparse", _packbits(mask)
        p.codes = codes[mask]
        p.stored_bytes = p.bits.numel() + p.codes.numel() * size
    else:
        p.mode, p.bits, p.codes = "dense", None, codes
        p.stored_bytes = n * size
    return p


def unpack(p: Packed, native: bool = True) -> torch.Tensor:
    """The activation ``p`` holds: the tensor itself when raw, else the
    reconstruction 2 eb' q after COMET's zero filter (|x'| <= eb -> 0),
    a new contiguous tensor of the original shape and dtype. ``native``
    False runs the torch code even where the C quantiser applies."""
    if p.mode == "raw":
        return p.raw
    if native:
        out = _unpack_native(p) if p.codes.device.type == "cpu" \
            else _unpack_cuda(p)
        if out is not None:
            return out
    vals = (p.codes.to(torch.float64) * p.step).to(p.dtype)
    if p.mode == "sparse":
        n = math.prod(p.shape)
        mask = _unpackbits(p.bits, n)
        out = torch.zeros(n, dtype=p.dtype, device=vals.device)
        out[mask] = vals
        vals = out
    vals = vals.view(p.shape)
    # COMET's zero filter. With this quantiser it changes nothing (q = 0
    # gives 0, q != 0 gives |x'| > eb) unless 2 eb' rounds to eb; kept so
    # the stored activation is by construction what the bound statistics
    # assume.
    return vals.masked_fill_(vals.abs() <= p.eb, 0)


@dataclasses.dataclass(frozen=True)
class ActStats:
    """One measured forward/backward of a convolution layer."""

    layer: int          # index of the convolution's weight in the table
    eb: float           # bound in force (0: stored raw)
    mode: str           # "raw", "dense" or "sparse"
    code_dtype: str     # "int8", "int16", "int32" or "" (raw)
    lbar: float         # mean over samples of max |dLoss/dOutput|
    nonzero: float      # R: non-zero fraction of the stored activation
    stored_bytes: int   # bytes held for backward
    raw_bytes: int      # bytes uncompressed


def layer_table(model: nn.Module, flags: int = 0,
                conv_flags: int = _lib.LAYER_MOMENTUM) -> list[Layer]:
    """The layer table bellows.torch.layer_table gives (trainable
    parameters in order, DDP prefix stripped), with ``conv_flags`` added to
    the weight of every convolution (nn.Conv1d/2d/3d): by default
    LAYER_MOMENTUM, so that bellowsd gets M_avg for COMET's rule."""
    root = _unwrap(model)
    conv_weights = {f"{name}.weight" if name else "weight"
                    for name, m in root.named_modules()
                    if isinstance(m, _CONV)}
    table = []
    for name, p in root.named_parameters():
        if not p.requires_grad:
            continue
        f = flags | (_lib.LAYER_DEVICE if p.is_cuda else 0)
        if name in conv_weights:
            f |= conv_flags
        table.append(Layer(name, tuple(p.shape), f))
    return table


def host_memory_used() -> int:
    """This process's resident set size in bytes (VmRSS of
    /proc/self/status); 0 where that file does not exist."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _storage(t: torch.Tensor) -> tuple[int, int]:
    """(address, bytes) of the storage behind t."""
    s = t.untyped_storage() if hasattr(t, "untyped_storage") \
        else t.storage()
    return s.data_ptr(), s.nbytes()


def memory_fields(capacity: int = 0, device=None,
                  compressor: ActivationCompressor | None = None) -> dict:
    """The memory fields of Agent.step_end for this process.

    On a CUDA ``device``: the bytes torch allocated there at peak since the
    last torch.cuda.reset_peak_memory_stats and the device's total. On CPU
    the host is the device: mem_device_used is the resident set size and
    mem_device_total ``capacity``, the memory the job may use (0: unknown).
    mem_host_used is the resident set size either way. With a
    ``compressor``, saved_bytes is its ``saved_bytes`` (the bytes the
    model's last forward saved for backward).
    """
    rss = host_memory_used()
    if device is not None and torch.device(device).type == "cuda":
        used = torch.cuda.max_memory_allocated(device)
        total = torch.cuda.get_device_properties(device).total_memory
        out = {"mem_device_used": int(used),
               "mem_device_total": int(total), "mem_host_used": rss}
    else:
        out = {"mem_device_used": rss, "mem_device_total": int(capacity),
               "mem_host_used": rss}
    if compressor is not None:
        out["saved_bytes"] = int(compressor.saved_bytes)
    return out


class _Conv:
    """One compressed convolution module."""

    __slots__ = ("name", "module", "layer", "calls", "eb", "prev")

    def __init__(self, name: str, module: nn.Module, layer: int):
        self.name = name
        self.module: Any = module  # a torch.nn.Conv1d, 2d or 3d
        self.layer = layer
        self.calls = 0
        self.eb = 0.0
        self.prev = None  # an instance-level forward found at install


class ActivationCompressor:
    """The convolutions of one model with compressed inputs; made by
    ``attach``. Attributes:

    - ``layers``: {module name: layer index} of the compressed modules;
    - ``bounds``: {layer index: eb} in force (from the decision unless
      fixed ones were given);
    - ``last``: {layer index: ActStats} of the last measured pass;
    - ``held_bytes`` / ``held_raw_bytes``: bytes live packs hold for
      backward now and would hold raw; ``peak_bytes`` their peak since
      ``reset_peak()``; ``reported`` observe_activation calls made;
    - ``saved_bytes``: bytes of every tensor the model's last forward with
      gradients on saved for backward (activations of every layer, each
      storage once, compressed convolution inputs as stored, parameters
      excluded); what the loss outside the model saves is not in it.

    Single training thread, as the agent.
    """

    def __init__(self, model: nn.Module, agent=None, *, layers=None,
                 bounds=None, every: int = 1, min_kernel: int = 1):
        if every < 1:
            raise ValueError("every must be at least 1")
        self.model = model
        self.root = _unwrap(model)
        self._torch_agent = agent if hasattr(agent, "agent") else None
        self.agent = agent.agent if self._torch_agent is not None else agent
        self.every = every
        self._ledger = _Ledger()
        self.last: dict[int, ActStats] = {}
        self.reported = 0
        self._fixed: dict[int, float] | None = None
        self._seq = None
        self._convs: list[_Conv] = []
        index = self._layer_index()
        chosen = self._select(layers, min_kernel)
        for name, m in chosen:
            wname = f"{name}.weight" if name else "weight"
            if wname not in index:
                raise ValueError(f"bellows.activations: {wname} is not in "
                                 "the agent's layer table")
            self._convs.append(_Conv(name, m, index[wname]))
        if self.agent is not None:
            flags = {lay.name: lay.flags for lay in self.agent.layers}
            missing = [c.name for c in self._convs
                       if not flags[f"{c.name}.weight" if c.name
                                    else "weight"] & _lib.LAYER_MOMENTUM]
            if missing:
                warnings.warn("bellows.activations: the weights of "
                              f"{', '.join(missing)} are not flagged "
                              "LAYER_MOMENTUM: bellowsd gets no M_avg for "
                              "them (open the agent with "
                              "bellows.activations.layer_table(model))",
                              stacklevel=3)
        self.layers = {c.name: c.layer for c in self._convs}
        if bounds is not None:
            self.set_bounds(bounds)
        self._installed = False
        self._root_prev = None
        self.saved_bytes = 0
        self._saved: dict | None = None  # storage key -> bytes, in a pass
        self._param_ptrs: set[int] = set()  # the parameters' storages
        self._param_key: tuple[int, ...] | None = None  # their addresses
        self.install()

    # -- configuration --------------------------------------------------

    def _layer_index(self) -> dict[str, int]:
        if self.agent is not None:
            return {lay.name: i for i, lay in enumerate(self.agent.layers)}
        return {lay.name: i for i, lay in enumerate(layer_table(self.root))}

    def _select(self, layers, min_kernel: int):
        convs = [(n, m) for n, m in self.root.named_modules()
                 if isinstance(m, _CONV)]
        if layers is not None:
            want = list(layers)
            by_module = {id(m): n for n, m in convs}
            names = {n for n, _ in convs}
            keep = set()
            for w in want:
                if isinstance(w, nn.Module):
                    if id(w) not in by_module:
                        raise ValueError("bellows.activations: a module in "
                                         "layers is not a convolution of "
                                         "the model")
                    keep.add(by_module[id(w)])
                elif w in names:
                    keep.add(w)
                else:
                    raise ValueError(f"bellows.activations: no convolution "
                                     f"named {w!r} in the model")
            convs = [(n, m) for n, m in convs if n in keep]
        return [(n, m) for n, m in convs
                if math.prod(m.kernel_size) >= min_kernel]

    def set_bounds(self, bounds) -> None:
        """Fixes the bounds, overriding the agent's decisions: one float
        for every layer, or {layer index or module name: eb} (layers not
        named get 0). ``set_bounds(None)`` returns to the decisions."""
        if bounds is None:
            self._fixed = None
            self._seq = None
            self.refresh()
            return
        if isinstance(bounds, (int, float)):
            fixed = {c.layer: float(bounds) for c in self._convs}
        else:
            fixed = {}
            for k, v in dict(bounds).items():
                layer = self.layers.get(k, k) if isinstance(k, str) else k
                if layer not in {c.layer for c in self._convs}:
                    raise ValueError(f"bellows.activations: {k!r} is not a "
                                     "compressed layer")
                fixed[layer] = float(v)
        for v in fixed.values():
            if not math.isfinite(v) or v < 0:
                raise ValueError(f"error bound must be finite and >= 0, "
                                 f"not {v}")
        self._fixed = fixed
        for c in self._convs:
            c.eb = fixed.get(c.layer, 0.0)

    @property
    def bounds(self) -> dict[int, float]:
        return {c.layer: c.eb for c in self._convs}

    def refresh(self) -> None:
        """Takes the bounds of the decision in force (called before every
        forward of the model with gradients on; cheap when unchanged)."""
        if self._fixed is not None or self.agent is None:
            return
        if self._torch_agent is not None and \
                self._torch_agent.decision is not None:
            d = self._torch_agent.decision
        elif self.agent.closed:
            return
        else:
            d = self.agent.decision()
        if d.seq == self._seq:
            return
        self._seq = d.seq
        for c in self._convs:
            eb = d.error_bounds[c.layer] if c.layer < len(
                d.error_bounds) else 0.0
            c.eb = eb if math.isfinite(eb) and eb > 0 else 0.0

    # -- memory ---------------------------------------------------------

    @property
    def held_bytes(self) -> int:
        return self._ledger.held

    @property
    def held_raw_bytes(self) -> int:
        return self._ledger.held_raw

    @property
    def peak_bytes(self) -> int:
        return self._ledger.peak

    def reset_peak(self) -> None:
        """Restarts the peak at the bytes held now."""
        with self._ledger.lock:
            self._ledger.peak = self._ledger.held

    # -- hooks ----------------------------------------------------------

    def install(self) -> None:
        """Wraps the convolutions' forward (attach does it)."""
        if self._installed:
            return
        for c in self._convs:
            c.prev = c.module.__dict__.get("forward")
            c.module.forward = self._wrap(c)
        # After the convolutions': a model that is itself one convolution
        # measures around its wrapped forward.
        self._root_prev = self.root.__dict__.get("forward")
        self.root.forward = self._wrap_root(self.root.forward)
        self._installed = True

    def detach(self) -> None:
        """Restores the convolutions' own forward. Packs already made stay
        valid for their backward. Idempotent."""
        if not self._installed:
            return
        if self._root_prev is not None:
            self.root.forward = self._root_prev
        elif "forward" in self.root.__dict__:
            del self.root.forward
        self._root_prev = None
        for c in self._convs:
            if c.prev is not None:
                c.module.forward = c.prev
            elif "forward" in c.module.__dict__:
                del c.module.forward
            c.prev = None
        self._installed = False

    def __enter__(self) -> ActivationCompressor:
        return self

    def __exit__(self, *exc) -> None:
        self.detach()

    def _note_saved(self, t: torch.Tensor) -> None:
        """Counts the storage of t, once, in the pass being measured."""
        ptr, n = _storage(t)
        if self._saved is not None and ptr not in self._param_ptrs:
            self._saved.setdefault(("s", ptr), n)

    def _note_packed(self, p: Packed) -> None:
        if self._saved is None:
            return
        if p.raw is not None:
            self._note_saved(p.raw)
        else:
            self._saved[("p", id(p))] = p.stored_bytes

    def _note_params(self) -> None:
        """Keeps _param_ptrs the storages of the root's parameters,
        rebuilt only when their addresses changed (a model.to() after
        attach, a parameter added)."""
        params = list(self.root.parameters())
        key = tuple(p.data_ptr() for p in params)
        if key != self._param_key:
            self._param_ptrs = {_storage(p)[0] for p in params}
            self._param_key = key

    def _wrap_root(self, orig):
        def note(t):
            if isinstance(t, torch.Tensor):
                self._note_saved(t)
            return t

        def forward(*args, **kwargs):
            if not torch.is_grad_enabled():
                return orig(*args, **kwargs)
            self.refresh()
            if self._saved is not None:  # the model inside its own pass
                return orig(*args, **kwargs)
            self._note_params()
            self._saved = {}
            try:
                with torch.autograd.graph.saved_tensors_hooks(
                        note, lambda t: t):
                    y = orig(*args, **kwargs)
                self.saved_bytes = sum(self._saved.values())
            finally:
                self._saved = None
            return y

        return forward

    def _wrap(self, c: _Conv):
        orig = c.module.forward  # the class's, or a wrapper found there
        params = {id(p) for p in c.module.parameters(recurse=False)}

        def forward(x, *args, **kwargs):
            if not torch.is_grad_enabled():
                return orig(x, *args, **kwargs)
            c.calls += 1
            due = (c.calls - 1) % self.every == 0
            eb = c.eb
            box: list[Packed] = []
            # Nothing below may hold x itself: the point is to free it.
            ptr, shape, dtype, in_dim = x.data_ptr(), x.shape, x.dtype, \
                x.dim()

            def pack_hook(t):
                # The input only: the weight (and anything else) as is.
                if (id(t) in params or t.data_ptr() != ptr
                        or t.shape != shape or t.dtype != dtype):
                    return t
                p = pack(t, eb, count_nonzero=due)
                p._account(self._ledger)
                self._note_packed(p)
                box.append(p)
                return p

            def unpack_hook(p):
                return unpack(p) if isinstance(p, Packed) else p

            with torch.autograd.graph.saved_tensors_hooks(pack_hook,
                                                          unpack_hook):
                y = orig(x, *args, **kwargs)
            if due and box and y.requires_grad:
                p = box[0]
                info = (p.eb, p.mode, str(p.code_dtype or "")
                        .replace("torch.", ""), p.nonzero, p.stored_bytes,
                        p.raw_bytes)
                y.register_hook(
                    lambda g: self._on_grad(c, in_dim, info, g))
            return y

        return forward

    def _on_grad(self, c: _Conv, in_dim: int, info, g) -> None:
        eb, mode, code, nonzero, stored, raw = info
        g = g.detach()
        batched = in_dim == len(c.module.kernel_size) + 2
        if batched and g.shape[0] > 0:
            lbar = g.abs().flatten(1).amax(1).mean().item()
        else:
            lbar = g.abs().max().item() if g.numel() else 0.0
        self.last[c.layer] = ActStats(c.layer, eb, mode, code, lbar,
                                      nonzero, stored, raw)
        a = self.agent
        if a is not None and not a.closed and a.in_step and \
                math.isfinite(lbar):
            a.observe_activation(c.layer, lbar, nonzero, stored, raw)
            self.reported += 1


def attach(model: nn.Module, agent=None, *, layers: Iterable | None = None,
           bounds=None, every: int = 1,
           min_kernel: int = 1) -> ActivationCompressor:
    """Compresses the inputs the convolutions of ``model`` save for
    backward, COMET-style, and reports their statistics to ``agent``.

    ``model``: a module or a DistributedDataParallel wrapping one (attach
    before training; it stays attached until ``detach()``, or the end of a
    ``with`` block). ``agent``: a bellows.Agent or a bellows.torch
    TorchAgent, whose layer table holds the convolutions' weights under
    their parameter names; the bound of each layer is the decision's
    error_bound of its weight's index, read before every forward with
    gradients on; statistics go to ``observe_activation`` while a step is
    open. ``agent`` None: indices of ``layer_table(model)``, nothing
    reported. ``layers``: the convolutions to compress (modules or their
    names; default every nn.Conv1d/2d/3d). ``bounds``: fixed bounds instead
    of the decisions (a float for all, or {layer index or name: eb}).
    ``every``: measure and report every N-th forward of a layer (packing
    happens at every one). ``min_kernel``: skip convolutions whose kernel
    has fewer elements (2 skips 1x1 convolutions, whose compression costs
    more than their compute).

    Raises ValueError for a layer that is not a convolution of the model
    or not in the agent's table, and for bad bounds; warns when a
    convolution weight lacks LAYER_MOMENTUM in the agent's table.
    """
    return ActivationCompressor(model, agent, layers=layers, bounds=bounds,
                                every=every, min_kernel=min_kernel)
