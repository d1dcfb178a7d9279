"""_lib - the ctypes view of libbellows (bellows/agent.h, bellows/codec.h,
bellows/error.h).

This module owns everything that knows the C side: where the shared
library is found, the structs' layouts, the functions' prototypes and the
error table (read from the library: ``ERRORS``). Nothing here allocates
agents or holds state beyond the loaded library; agent.py builds the
Python API on top of it.

The structs mirror bellows/agent.h field for field, but for
``LayerStats`` and ``StepInfo`` (structs bellows_layer_stats and
bellows_step_info), which are built at run time from the loaded
library's own description of them (bellows_stats_schema,
bellows_step_info_schema: every statistic is declared once, in
bellows/stats.h) and checked against it offset by offset. The library checks
``bellows_agent_config.size`` against its own ``sizeof``, and later
versions only append fields, so the configuration is always built in a
buffer of the library's own size, initialised by
``bellows_agent_config_init`` (see ``new_config``); the structs the library
fills are given room beyond their known end for the same reason.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import pathlib
import re
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    # Built from the loaded library's schema on first use (module
    # __getattr__ below): to a type checker, any attribute.
    from typing import Any as LayerStats
    from typing import Any as StepInfo

__all__ = [
    "BellowsError",
    "ERRORS",
    "LAYER_NO_ACCUMULATOR",
    "LAYER_MOMENTUM",
    "LAYER_DEVICE",
    "LAYER_EXP_HIST",
    "DTYPE_F32",
    "DTYPE_F16",
    "DTYPE_BF16",
    "LOG_ERROR",
    "LOG_WARN",
    "LOG_INFO",
    "LOG_DEBUG",
    "SEND_RAW",
    "SEND_COMPRESSED",
    "LayerStats",
    "StepInfo",
    "library",
    "library_path",
    "layer_stats_type",
    "stats_schema",
    "step_info_schema",
    "step_info_type",
]


class _ErrorNames(Mapping[int, str]):
    """The error table, code -> name without the prefix (-2 -> "EINVAL"),
    read from the loaded library (bellows_error_name, generated from
    BELLOWS_ERROR_MAP in bellows/error.h) on first use, which loads it.

    Codes run from -1 down without a gap, so the first code the library
    does not name ends the table. A read-only mapping: the library is its
    one owner.
    """

    def __init__(self) -> None:
        self._names: dict[int, str] | None = None
        self._codes: dict[str, int] = {}

    def _table(self) -> dict[int, str]:
        if self._names is None:
            name_of = library().error_name
            names, codes = {}, {}
            code = -1
            while (raw := name_of(code)) is not None:
                name = raw.decode().removeprefix("BELLOWS_")
                names[code], codes[name] = name, code
                code -= 1
            self._codes = codes
            self._names = names  # last: another thread may be reading
        return self._names

    def code(self, name: str) -> int | None:
        """The code called ``name`` ("EINVAL"), None for none."""
        self._table()
        return self._codes.get(name)

    def __getitem__(self, code: int) -> str:
        return self._table()[code]

    def __iter__(self) -> Iterator[int]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())

    def __repr__(self) -> str:
        return f"ERRORS({self._table()!r})"


# The error codes: ERRORS[-2] == "EINVAL"; as module attributes
# (_lib.EINVAL == -2, bellows.EINVAL) through __getattr__ below.
ERRORS = _ErrorNames()

# enum bellows_layer_flags
LAYER_NO_ACCUMULATOR = 1 << 0
LAYER_MOMENTUM = 1 << 1
LAYER_DEVICE = 1 << 2
LAYER_EXP_HIST = 1 << 3  # report the 256-bin exponent histogram

# enum bellows_dtype
DTYPE_F32 = 0
DTYPE_F16 = 1
DTYPE_BF16 = 2

# enum bellows_send_mode
SEND_RAW = 0
SEND_COMPRESSED = 1

# enum bellows_log_level
LOG_ERROR = 0
LOG_WARN = 1
LOG_INFO = 2
LOG_DEBUG = 3

# Room given beyond the known end of every struct the library writes or
# reads by its own sizeof, for fields a newer library may have appended.
_SLACK = 1024


class BellowsError(Exception):
    """A call into libbellows failed.

    ``code`` is the negative BELLOWS_E* value, ``name`` its symbol without
    the prefix (``"EINVAL"``), ``function`` the C function that returned
    it; ``str()`` gives the library's message (bellows_strerror) and, when
    the library logged why, that line too.
    """

    def __init__(self, function: str, code: int, detail: str | None = None):
        self.function = function
        self.code = code
        self.name = ERRORS.get(code, "E?")
        self.detail = detail
        text = f"{function}: {strerror(code)} ({self.name})"
        if detail:
            text += f": {detail}"
        super().__init__(text)


class Layer(ctypes.Structure):
    """struct bellows_layer."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("numel", ctypes.c_uint64),
        ("ndim", ctypes.c_uint32),
        ("shape", ctypes.POINTER(ctypes.c_uint32)),
        ("flags", ctypes.c_uint32),
    ]


LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int,
                          ctypes.c_char_p)

# bellows_allreduce_fn: (arg, values, n, op) -> 0 or non-zero.
ALLREDUCE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p,
                                ctypes.POINTER(ctypes.c_double),
                                ctypes.c_size_t, ctypes.c_int)

# enum bellows_aggregate and enum bellows_reduce_op.
AGGREGATE = {"rank": 0, "node": 1, "job": 2}
REDUCE_SUM, REDUCE_MAX, REDUCE_MIN = 0, 1, 2


class AgentConfig(ctypes.Structure):
    """struct bellows_agent_config, as far as this binding knows it."""

    _fields_ = [
        ("size", ctypes.c_uint32),
        ("control", ctypes.c_char_p),
        ("publish", ctypes.c_char_p),
        ("job", ctypes.c_char_p),
        ("rank", ctypes.c_uint32),
        ("world", ctypes.c_uint32),
        ("layers", ctypes.POINTER(Layer)),
        ("n_layers", ctypes.c_uint32),
        ("window_steps", ctypes.c_uint32),
        ("start_step", ctypes.c_uint64),
        ("start_window", ctypes.c_uint64),
        ("decision_timeout_ms", ctypes.c_uint32),
        ("heartbeat_ms", ctypes.c_uint32),
        ("queue_capacity", ctypes.c_uint32),
        ("momentum_beta", ctypes.c_double),
        ("log", LOG_FN),
        ("log_arg", ctypes.c_void_p),
        ("log_level", ctypes.c_int),
        ("stats_threads", ctypes.c_uint32),
        ("run_id", ctypes.c_char_p),
        ("resume", ctypes.c_uint32),
        ("server_key", ctypes.c_char_p),
        ("client_key", ctypes.c_char_p),
        ("stats_precision", ctypes.c_char_p),
        ("aggregate", ctypes.c_uint32),
        ("aggregate_ranks", ctypes.c_uint32),
        ("allreduce", ALLREDUCE_FN),
        ("allreduce_arg", ctypes.c_void_p),
        ("keep_reports_mb", ctypes.c_uint32),
    ]


class Decision(ctypes.Structure):
    """struct bellows_decision."""

    _fields_ = [
        ("seq", ctypes.c_uint64),
        ("apply_step", ctypes.c_uint64),
        ("window", ctypes.c_uint64),
        ("n_layers", ctypes.c_uint32),
        ("level", ctypes.POINTER(ctypes.c_double)),
        ("error_bound", ctypes.POINTER(ctypes.c_double)),
        ("batch_size", ctypes.c_uint32),
        ("lr_scale", ctypes.c_double),
        ("size_threshold", ctypes.c_uint64),
        ("compression_off", ctypes.c_int),
        ("codec_table", ctypes.POINTER(ctypes.c_uint8)),
        ("codec_table_len", ctypes.c_size_t),
        ("policy", ctypes.c_char_p),
        ("reason", ctypes.c_char_p),
        ("calibrate_steps", ctypes.c_uint64),
        ("resid_group", ctypes.POINTER(ctypes.c_uint32)),
        ("resid_phi", ctypes.POINTER(ctypes.c_double)),
        ("resid_rows", ctypes.POINTER(ctypes.c_double)),
        ("resid_cols", ctypes.POINTER(ctypes.c_double)),
        ("stats_skip", ctypes.c_uint64),
    ]


class StatArray(ctypes.Structure):
    """struct bellows_stat_array (bellows/stats.h)."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("len", ctypes.c_uint32),
        ("index", ctypes.c_uint32),
        ("unit", ctypes.c_char_p),
        ("doc", ctypes.c_char_p),
    ]


class StatField(ctypes.Structure):
    """struct bellows_stat_field (bellows/stats.h)."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("type", ctypes.c_uint32),
        ("offset", ctypes.c_uint32),
        ("unit", ctypes.c_char_p),
        ("doc", ctypes.c_char_p),
    ]


# enum bellows_stat_type: the ctypes type and the Python type of each.
STAT_TYPES = {
    1: (ctypes.c_uint32, int),
    2: (ctypes.c_uint64, int),
    3: (ctypes.c_double, float),
}


class SchemaField(NamedTuple):
    """One field of bellows_layer_stats as the loaded library lays it out
    (bellows_stats_schema)."""

    name: str
    ctype: type
    pytype: type
    offset: int
    unit: str
    doc: str


class ActStats(ctypes.Structure):
    """struct bellows_act_stats (read by the library for the call)."""

    _fields_ = [
        ("lbar", ctypes.c_double),
        ("nonzero", ctypes.c_double),
        ("stored_bytes", ctypes.c_uint64),
        ("raw_bytes", ctypes.c_uint64),
    ]


class EbqInfo(ctypes.Structure):
    """struct bellows_ebq_info (bellows/codec.h, error-bounded quantiser)."""

    _fields_ = [
        ("mode", ctypes.c_int),
        ("bits", ctypes.c_uint),
        ("zstd", ctypes.c_int),
        ("n", ctypes.c_uint64),
        ("codes", ctypes.c_uint64),
        ("nonzero", ctypes.c_uint64),
        ("eb", ctypes.c_double),
        ("step", ctypes.c_double),
        ("mask_bytes", ctypes.c_uint64),
        ("codes_bytes", ctypes.c_uint64),
        ("payload_bytes", ctypes.c_uint64),
    ]


EBQ_RAW, EBQ_DENSE, EBQ_SPARSE = 0, 1, 2
EBQ_BYTE_CODES = 1 << 0


class ResidStats(ctypes.Structure):
    """struct bellows_resid_stats (read by the library for the call)."""

    _fields_ = [
        ("l1", ctypes.c_double),
        ("l2", ctypes.c_double),
        ("q50", ctypes.c_double),
        ("q90", ctypes.c_double),
        ("q99", ctypes.c_double),
        ("floats", ctypes.c_double),
    ]


class AgentStats(ctypes.Structure):
    """struct bellows_agent_stats."""

    _fields_ = [
        ("connected", ctypes.c_int),
        ("step", ctypes.c_uint64),
        ("window", ctypes.c_uint64),
        ("reports_sent", ctypes.c_uint64),
        ("reports_dropped", ctypes.c_uint64),
        ("decisions", ctypes.c_uint64),
        ("decision_misses", ctypes.c_uint64),
        ("snapshots", ctypes.c_uint64),
        ("reconnects", ctypes.c_uint64),
        ("seq_in_force", ctypes.c_uint64),
        ("last_error", ctypes.c_int),
        ("last_error_text", ctypes.c_char * 256),
    ]


def padded(struct_type: type[ctypes.Structure]) -> ctypes.Structure:
    """Returns a zeroed ``struct_type`` with room after it.

    For structs the library fills or reads by its own sizeof: a newer
    library that appended fields then writes (or reads zeros) past our
    known end instead of past the allocation.
    """
    buf = ctypes.create_string_buffer(ctypes.sizeof(struct_type) + _SLACK)
    obj = struct_type.from_buffer(buf)
    obj._bellows_buf = buf  # keeps the memory alive with the view
    return obj


_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_path: str | None = None


def _installed(here: pathlib.Path) -> list[str]:
    """The library ``meson install`` put beside this package, if this
    package is an installed one (it then has the generated _install.py):
    first at the same place relative to the package as when installed (a
    tree staged under DESTDIR or moved whole), then at the recorded
    libdir."""
    try:
        from bellows import _install
    except ImportError:
        return []
    rel = os.path.relpath(os.path.join(_install.LIBDIR, _install.SONAME),
                          _install.PACKAGE_DIR)
    found = [os.path.normpath(os.path.join(str(here), rel))]
    recorded = os.path.join(_install.LIBDIR, _install.SONAME)
    if recorded not in found:
        found.append(recorded)
    return [p for p in found if os.path.exists(p)]


def _candidates() -> list[str]:
    """Paths to try, in order: BELLOWS_LIB, the library installed with
    this package, the build tree, the system.

    The build tree is searched upward from this package for
    ``build*/agent/libbellows.so``, ``build/`` first, so that running from
    a source checkout picks up the library built beside it.
    """
    env = os.environ.get("BELLOWS_LIB")
    if env:
        return [env]
    here = pathlib.Path(__file__).resolve().parent
    found = _installed(here)
    for root in [here, *here.parents]:
        preferred = root / "build" / "agent" / "libbellows.so"
        others = sorted(p for p in root.glob("build*/agent/libbellows.so")
                        if p != preferred)
        hits = ([preferred] if preferred.exists() else []) + others
        if hits:
            found.extend(str(p) for p in hits)
            break
    name = ctypes.util.find_library("bellows")
    if name:
        found.append(name)
    for prefix in ("/usr/local/lib", "/usr/local/lib64",
                   "/usr/local/lib/x86_64-linux-gnu", "/usr/lib",
                   "/usr/lib/x86_64-linux-gnu", "/usr/lib64"):
        for soname in ("libbellows.so.0", "libbellows.so"):
            p = os.path.join(prefix, soname)
            if os.path.exists(p):
                found.append(p)
    found.append("libbellows.so.0")  # whatever the dynamic loader finds
    return found


def _prototype(lib: ctypes.CDLL, name: str, restype, argtypes,
               required: bool = True):
    """Declares one function; a missing optional one becomes None."""
    fn = getattr(lib, name, None)
    if fn is None:
        if required:
            raise OSError(f"libbellows lacks {name}: too old for this "
                          "binding")
        return None
    fn.restype = restype
    fn.argtypes = argtypes
    return fn


class _Functions:
    """The library's functions with their prototypes."""

    def __init__(self, lib: ctypes.CDLL):
        vp = ctypes.c_void_p
        u32, u64 = ctypes.c_uint32, ctypes.c_uint64
        self.version = _prototype(lib, "bellows_version", ctypes.c_char_p, [])
        self.strerror = _prototype(lib, "bellows_strerror",
                                   ctypes.c_char_p, [ctypes.c_int])
        self.error_name = _prototype(lib, "bellows_error_name",
                                     ctypes.c_char_p, [ctypes.c_int])
        self.config_init = _prototype(lib, "bellows_agent_config_init",
                                      None, [vp])
        self.open = _prototype(lib, "bellows_agent_open", ctypes.c_int,
                               [vp, ctypes.POINTER(vp)])
        self.close = _prototype(lib, "bellows_agent_close", None,
                                [ctypes.POINTER(vp)])
        self.step_begin = _prototype(lib, "bellows_agent_step_begin",
                                     ctypes.c_int,
                                     [vp, ctypes.POINTER(u64)])
        self.observe = _prototype(lib, "bellows_agent_observe", ctypes.c_int,
                                  [vp, u32, vp, u64])
        # Newer than the first release of the API: optional.
        self.observe_typed = _prototype(lib, "bellows_agent_observe_typed",
                                        ctypes.c_int,
                                        [vp, u32, vp, u64, ctypes.c_int],
                                        required=False)
        self.observe_many = _prototype(lib, "bellows_agent_observe_many",
                                       ctypes.c_int,
                                       [vp, u32, vp, vp, vp, ctypes.c_int],
                                       required=False)
        self.observe_device = _prototype(lib, "bellows_agent_observe_device",
                                         ctypes.c_int,
                                         [vp, u32, vp, u64, ctypes.c_int, vp],
                                         required=False)
        self.step_end = _prototype(lib, "bellows_agent_step_end",
                                   ctypes.c_int, [vp, vp])
        self.window_end = _prototype(lib, "bellows_agent_window_end",
                                     ctypes.c_int, [vp])
        self.eval = _prototype(lib, "bellows_agent_eval", ctypes.c_int,
                               [vp, ctypes.c_double, ctypes.c_double],
                               required=False)
        self.decision = _prototype(lib, "bellows_agent_decision",
                                   ctypes.c_int, [vp, vp])
        self.window_stats = _prototype(lib, "bellows_agent_window_stats",
                                       ctypes.c_int, [vp, u32, vp])
        # The layouts of bellows_layer_stats and bellows_step_info
        # (LayerStats and StepInfo are built from them).
        self.stats_schema = _prototype(lib, "bellows_stats_schema",
                                       ctypes.POINTER(StatField), [],
                                       required=False)
        self.step_info_schema = _prototype(lib, "bellows_step_info_schema",
                                           ctypes.POINTER(StatField), [],
                                           required=False)
        # Array statistics (the exponent histogram) and the previous
        # codec table: optional, Agent.window_array and
        # Agent.codec_table(version) raise ENOTSUP without them.
        self.arrays_schema = _prototype(lib, "bellows_layer_arrays_schema",
                                        ctypes.POINTER(StatArray), [],
                                        required=False)
        self.window_array = _prototype(
            lib, "bellows_agent_window_array", ctypes.c_int,
            [vp, u32, u32, ctypes.POINTER(ctypes.c_uint64), u32],
            required=False)
        self.codec_table_prev = _prototype(
            lib, "bellows_agent_codec_table_prev", ctypes.c_int,
            [vp, ctypes.POINTER(ctypes.POINTER(ctypes.c_uint8)),
             ctypes.POINTER(ctypes.c_size_t)], required=False)
        self.level = _prototype(lib, "bellows_agent_level", ctypes.c_double,
                                [vp, u32])
        self.stats_get = _prototype(lib, "bellows_agent_stats_get",
                                    ctypes.c_int, [vp, vp])
        # Protocol minor 1 (timed sends, calibration, activations):
        # optional, the methods using them raise ENOTSUP without them.
        dbl, cint = ctypes.c_double, ctypes.c_int
        self.send_mode = _prototype(lib, "bellows_agent_send_mode", cint,
                                    [vp, u32], required=False)
        self.calibrating = _prototype(lib, "bellows_agent_calibrating",
                                      cint, [vp], required=False)
        self.comm_layer = _prototype(lib, "bellows_agent_comm_layer", cint,
                                     [vp, u32, cint, dbl, dbl],
                                     required=False)
        self.comm_bucket = _prototype(lib, "bellows_agent_comm_bucket",
                                      cint, [vp, u64, cint, dbl],
                                      required=False)
        self.observe_activation = _prototype(
            lib, "bellows_agent_observe_activation", cint, [vp, u32, vp],
            required=False)
        self.observe_residual = _prototype(
            lib, "bellows_agent_observe_residual", cint, [vp, u32, vp],
            required=False)
        # Protocol minor 4: without it the library reports no applied
        # level, and Agent.applied_levels has nothing to tell.
        self.applied_levels = _prototype(
            lib, "bellows_agent_applied_levels", cint,
            [vp, ctypes.POINTER(dbl), u32], required=False)
        # Protocol minor 5: layers with a window accumulator (None
        # without it: Agent.accumulators then returns None).
        self.accumulators = _prototype(
            lib, "bellows_agent_accumulators", u32, [vp], required=False)
        # Newer than bellows_decision's codec_table: without it,
        # Agent.codec_table reads the decision.
        self.codec_table = _prototype(
            lib, "bellows_agent_codec_table", cint,
            [vp, ctypes.POINTER(ctypes.POINTER(ctypes.c_uint8)),
             ctypes.POINTER(ctypes.c_size_t)], required=False)
        # bellows/codec.h: the quantisers of bellows.compress in C;
        # without them bellows.compress runs its torch code.
        flt, sz = ctypes.c_float, ctypes.c_size_t
        self.codec_encode_codes = _prototype(
            lib, "bellows_codec_encode_codes", cint,
            [cint, flt, vp, vp, u64, vp, sz], required=False)
        self.codec_decode_codes = _prototype(
            lib, "bellows_codec_decode_codes", cint,
            [cint, flt, vp, sz, u64, vp, cint], required=False)
        self.codec_topk_encode = _prototype(
            lib, "bellows_codec_topk_encode", cint,
            [vp, vp, u64, u64, vp, vp], required=False)
        self.codec_isa = _prototype(lib, "bellows_codec_isa",
                                    ctypes.c_char_p, [], required=False)
        # Threads, float16/bfloat16 gradients and the CUDA twins.
        self.codec_set_threads = _prototype(
            lib, "bellows_codec_set_threads", cint, [u32, u64],
            required=False)
        self.codec_threads = _prototype(lib, "bellows_codec_threads", u32,
                                        [], required=False)
        self.codec_encode_codes_dtype = _prototype(
            lib, "bellows_codec_encode_codes_dtype", cint,
            [cint, flt, cint, vp, vp, u64, vp, sz], required=False)
        # Threshold "auto" in one call (newer than the _dtype encode):
        # without it, bellows.compress takes its means in torch.
        self.codec_encode_codes_auto = _prototype(
            lib, "bellows_codec_encode_codes_auto", cint,
            [cint, cint, vp, vp, u64, vp, sz, vp, vp], required=False)
        self.codec_topk_encode_dtype = _prototype(
            lib, "bellows_codec_topk_encode_dtype", cint,
            [cint, vp, vp, u64, u64, vp, vp], required=False)
        # Every rank's top-k of a tensor averaged in one call (newer than
        # the _dtype encode): without it, bellows.compress decodes in torch.
        self.codec_topk_average = _prototype(
            lib, "bellows_codec_topk_average", cint,
            [vp, vp, u32, u64, u64, vp], required=False)
        self.codec_cuda_built = _prototype(
            lib, "bellows_codec_cuda_built", cint, [], required=False)
        self.codec_cuda_available = _prototype(
            lib, "bellows_codec_cuda_available", cint, [], required=False)
        self.codec_encode_codes_cuda = _prototype(
            lib, "bellows_codec_encode_codes_cuda", cint,
            [cint, flt, cint, vp, vp, u64, vp, sz, vp], required=False)
        self.codec_decode_codes_cuda = _prototype(
            lib, "bellows_codec_decode_codes_cuda", cint,
            [cint, flt, vp, sz, u64, vp, cint, vp], required=False)
        self.codec_topk_cuda_work_bytes = _prototype(
            lib, "bellows_codec_topk_cuda_work_bytes", sz, [u64],
            required=False)
        self.codec_topk_encode_cuda = _prototype(
            lib, "bellows_codec_topk_encode_cuda", cint,
            [cint, vp, vp, u64, u64, vp, vp, vp, sz, vp], required=False)
        # The error-bounded quantiser of bellows.activations in C;
        # without it bellows.activations runs its torch code.
        info_p = ctypes.POINTER(EbqInfo)
        self.ebq_plan = _prototype(
            lib, "bellows_ebq_plan", cint,
            [vp, u64, dbl, cint, info_p], required=False)
        self.ebq_encode_parts = _prototype(
            lib, "bellows_ebq_encode_parts", cint,
            [vp, info_p, vp, vp, ctypes.POINTER(u64)], required=False)
        self.ebq_decode_parts = _prototype(
            lib, "bellows_ebq_decode_parts", cint,
            [info_p, vp, vp, vp], required=False)
        # Its CUDA twin (device memory, synchronous): used by
        # bellows.activations for CUDA tensors when available.
        self.ebq_cuda_available = _prototype(
            lib, "bellows_ebq_cuda_available", cint, [], required=False)
        self.ebq_cuda_scratch_bytes = _prototype(
            lib, "bellows_ebq_cuda_scratch_bytes", sz, [u64],
            required=False)
        self.ebq_plan_cuda = _prototype(
            lib, "bellows_ebq_plan_cuda", cint,
            [vp, u64, dbl, cint, vp, sz, vp, info_p], required=False)
        self.ebq_encode_parts_cuda = _prototype(
            lib, "bellows_ebq_encode_parts_cuda", cint,
            [vp, info_p, vp, vp, vp, sz, vp, ctypes.POINTER(u64)],
            required=False)
        self.ebq_decode_parts_cuda = _prototype(
            lib, "bellows_ebq_decode_parts_cuda", cint,
            [info_p, vp, vp, vp, vp, sz, vp], required=False)
        # bellows/codec.h: PowerSGD's stages, over arrays of pointers to
        # same-shape matrices; without them PowerSGD runs its torch code.
        self.psgd_project = _prototype(
            lib, "bellows_psgd_project", cint,
            [u64, u64, u32, sz, vp, vp, vp, vp], required=False)
        self.psgd_power = _prototype(
            lib, "bellows_psgd_power", cint,
            [u64, u64, u32, sz, vp, vp, vp], required=False)
        self.psgd_decode = _prototype(
            lib, "bellows_psgd_decode", cint,
            [u64, u64, u32, sz, vp, vp, vp, vp], required=False)
        self.psgd_orthogonalize = _prototype(
            lib, "bellows_psgd_orthogonalize", cint, [vp, u64, u32],
            required=False)
        self.psgd_blas = _prototype(lib, "bellows_psgd_blas",
                                    ctypes.c_char_p, [], required=False)
        self.psgd_blas_threads = _prototype(
            lib, "bellows_psgd_blas_threads", cint, [cint], required=False)
        # PowerSGD's cuBLAS twin: a context per stream, the same stages
        # over host arrays of device pointers.
        self.psgd_cuda_available = _prototype(
            lib, "bellows_psgd_cuda_available", cint, [], required=False)
        self.psgd_cuda_open = _prototype(
            lib, "bellows_psgd_cuda_open", cint,
            [vp, ctypes.POINTER(vp)], required=False)
        self.psgd_cuda_close = _prototype(
            lib, "bellows_psgd_cuda_close", None, [ctypes.POINTER(vp)],
            required=False)
        self.psgd_project_cuda = _prototype(
            lib, "bellows_psgd_project_cuda", cint,
            [vp, u64, u64, u32, sz, vp, vp, vp, vp], required=False)
        self.psgd_power_cuda = _prototype(
            lib, "bellows_psgd_power_cuda", cint,
            [vp, u64, u64, u32, sz, vp, vp, vp], required=False)
        self.psgd_decode_cuda = _prototype(
            lib, "bellows_psgd_decode_cuda", cint,
            [vp, u64, u64, u32, sz, vp, vp, vp, vp], required=False)
        # bellows/codec.h's GComp (bellows.compress.GComp).
        cp, dbl_p = ctypes.c_char_p, ctypes.c_double
        self.gcomp_histogram = _prototype(
            lib, "bellows_gcomp_histogram", cint, [cint, vp, u64, vp],
            required=False)
        self.gcomp_table_build = _prototype(
            lib, "bellows_gcomp_table_build", cint,
            [vp, ctypes.c_uint, u32, ctypes.POINTER(vp)], required=False)
        self.gcomp_table_read = _prototype(
            lib, "bellows_gcomp_table_read", cint,
            [vp, sz, ctypes.POINTER(vp), cp, sz], required=False)
        self.gcomp_table_write = _prototype(
            lib, "bellows_gcomp_table_write", cint, [vp, vp, sz],
            required=False)
        self.gcomp_table_version = _prototype(
            lib, "bellows_gcomp_table_version", u32, [vp], required=False)
        self.gcomp_table_bits = _prototype(
            lib, "bellows_gcomp_table_bits", dbl_p, [vp, vp],
            required=False)
        self.gcomp_table_destroy = _prototype(
            lib, "bellows_gcomp_table_destroy", None, [ctypes.POINTER(vp)],
            required=False)
        self.gcomp_bound = _prototype(lib, "bellows_gcomp_bound", sz,
                                      [cint, u64], required=False)
        self.gcomp_levels = _prototype(
            lib, "bellows_gcomp_levels", cint, [vp, cint, vp, u64, cint, vp],
            required=False)
        self.gcomp_encode = _prototype(
            lib, "bellows_gcomp_encode", cint,
            [vp, cint, vp, u64, cint, vp, vp, sz, ctypes.POINTER(sz), vp],
            required=False)
        self.gcomp_decode = _prototype(
            lib, "bellows_gcomp_decode", cint,
            [vp, vp, sz, cint, vp, u64, cint, cp, sz], required=False)
        # GComp's CUDA twin: a context per table, device and stream.
        self.gcomp_cuda_available = _prototype(
            lib, "bellows_gcomp_cuda_available", cint, [], required=False)
        self.gcomp_cuda_open = _prototype(
            lib, "bellows_gcomp_cuda_open", cint,
            [vp, vp, ctypes.POINTER(vp)], required=False)
        self.gcomp_cuda_close = _prototype(
            lib, "bellows_gcomp_cuda_close", None, [ctypes.POINTER(vp)],
            required=False)
        self.gcomp_levels_cuda = _prototype(
            lib, "bellows_gcomp_levels_cuda", cint,
            [vp, cint, vp, u64, cint, vp, vp], required=False)
        self.gcomp_encode_cuda = _prototype(
            lib, "bellows_gcomp_encode_cuda", cint,
            [vp, cint, vp, u64, cint, vp, vp, sz, ctypes.POINTER(sz), vp],
            required=False)
        self.gcomp_decode_cuda = _prototype(
            lib, "bellows_gcomp_decode_cuda", cint,
            [vp, vp, sz, cint, vp, u64, cint, cp, sz], required=False)
        self.config_size = self._config_size()

    def _config_size(self) -> int:
        """The library's sizeof(bellows_agent_config), from config_init."""
        buf = ctypes.create_string_buffer(ctypes.sizeof(AgentConfig)
                                          + _SLACK)
        self.config_init(buf)
        size = ctypes.c_uint32.from_buffer(buf).value
        if size > len(buf):  # config_init already wrote past the buffer
            raise OSError(f"libbellows' config is {size} bytes: this "
                          "binding cannot use it")
        return size


_funcs: _Functions | None = None


def library() -> _Functions:
    """Loads libbellows once and returns its declared functions.

    Raises OSError naming every path tried when none loads.
    """
    global _lib, _path, _funcs
    with _lock:
        if _funcs is not None:
            return _funcs
        errors = []
        for cand in _candidates():
            try:
                lib = ctypes.CDLL(cand)
            except OSError as e:
                errors.append(f"{cand}: {e}")
                continue
            _funcs = _Functions(lib)
            _lib, _path = lib, cand
            return _funcs
        raise OSError("libbellows not found (set BELLOWS_LIB to its path); "
                      "tried: " + "; ".join(errors))


def library_path() -> str:
    """Returns the path libbellows was loaded from (loading it if needed)."""
    library()
    assert _path is not None
    return _path


def strerror(code: int) -> str:
    """bellows_strerror(code) as str."""
    return library().strerror(code).decode()


def new_config() -> AgentConfig:
    """Returns a configuration initialised by bellows_agent_config_init.

    It lives in a buffer of the library's own size (at least ours), so the
    ``size`` field the library checks is its own and fields a newer library
    appended keep their defaults. Fields this binding knows but the loaded
    library does not have (an older library) lie beyond ``size``:
    ``known_fields`` tells which are real.
    """
    f = library()
    buf = ctypes.create_string_buffer(max(f.config_size,
                                          ctypes.sizeof(AgentConfig)))
    f.config_init(buf)
    cfg = AgentConfig.from_buffer(buf)
    cfg._bellows_buf = buf
    return cfg


def config_has(field: str) -> bool:
    """True if the loaded library's config struct includes ``field``."""
    desc = getattr(AgentConfig, field)
    return desc.offset + desc.size <= library().config_size


def check(function: str, rc: int, detail: str | None = None) -> None:
    """Raises BellowsError for a negative rc."""
    if rc != 0:
        raise BellowsError(function, rc, detail)


_schemas: dict[str, tuple[tuple[SchemaField, ...], int]] = {}
_types: dict[str, type] = {}

# Python name -> (the C function describing it, the C struct).
_SCHEMAS = {
    "LayerStats": ("bellows_stats_schema", "bellows_layer_stats"),
    "StepInfo": ("bellows_step_info_schema", "bellows_step_info"),
}


def _read_schema(name: str) -> tuple[tuple[SchemaField, ...], int]:
    """The loaded library's layout of struct _SCHEMAS[name]: its fields in
    order and its size, read once."""
    f = library()
    function, struct = _SCHEMAS[name]
    with _lock:
        if name in _schemas:
            return _schemas[name]
        fn = (f.stats_schema if name == "LayerStats"
              else f.step_info_schema)
        if fn is None:
            raise OSError(f"libbellows lacks {function}: too old for this "
                          "binding")
        arr = fn()
        fields = []
        i = 0
        while arr[i].name is not None:
            e = arr[i]
            if e.type not in STAT_TYPES:
                raise OSError(f"libbellows' {struct}.{e.name.decode()} "
                              f"has type {e.type}, unknown to this binding")
            ctype, pytype = STAT_TYPES[e.type]
            fields.append(SchemaField(e.name.decode(), ctype, pytype,
                                      e.offset, (e.unit or b"").decode(),
                                      (e.doc or b"").decode()))
            i += 1
        _schemas[name] = (tuple(fields), arr[i].offset)
        return _schemas[name]


def _struct_type(name: str) -> type:
    """The ctypes mirror of struct _SCHEMAS[name], built once from the
    library's schema and checked against its offsets and size."""
    fields, size = _read_schema(name)
    struct = _SCHEMAS[name][1]
    with _lock:
        if name in _types:
            return _types[name]
        cls = type(name, (ctypes.Structure,), {
            "__doc__": f"struct {struct}, as the loaded libbellows lays it "
                       f"out ({_SCHEMAS[name][0]}).",
            "__module__": __name__,
            "_fields_": [(fl.name, fl.ctype) for fl in fields],
        })
        for fl in fields:
            got = getattr(cls, fl.name).offset
            if got != fl.offset:
                raise OSError(f"{struct}.{fl.name} is at offset "
                              f"{fl.offset} in libbellows, {got} in ctypes")
        if ctypes.sizeof(cls) != size:
            raise OSError(f"{struct} is {size} bytes in libbellows, "
                          f"{ctypes.sizeof(cls)} in ctypes")
        _types[name] = cls
        return cls


def stats_schema() -> tuple[tuple[SchemaField, ...], int]:
    """The loaded library's bellows_layer_stats: its fields in order and
    the struct's size, read once from bellows_stats_schema().

    Raises OSError when the library does not describe it (too old for
    this binding) or describes a type this binding does not know.
    """
    return _read_schema("LayerStats")


def step_info_schema() -> tuple[tuple[SchemaField, ...], int]:
    """The same for bellows_step_info (bellows_step_info_schema())."""
    return _read_schema("StepInfo")


def layer_stats_type() -> type:
    """The ctypes mirror of struct bellows_layer_stats, built once from
    stats_schema(); ``LayerStats`` is the same class.

    Raises OSError when ctypes' layout of the fields differs from the
    library's (an offset or the size), rather than read the wrong bytes.
    """
    return _struct_type("LayerStats")


def step_info_type() -> type:
    """The ctypes mirror of struct bellows_step_info (``StepInfo``), as
    layer_stats_type()."""
    return _struct_type("StepInfo")


# What may name an error code: only these attribute names load the
# library to look one up.
_ERROR_NAME = re.compile(r"E[A-Z0-9]+")


def __getattr__(name: str):
    # LayerStats and StepInfo are built from the library on first use, and
    # the error codes (EINVAL, ...) read from it then, so that importing
    # this module does not load it.
    if name in _SCHEMAS:
        return _struct_type(name)
    if _ERROR_NAME.fullmatch(name):
        code = ERRORS.code(name)
        if code is not None:
            return code
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
