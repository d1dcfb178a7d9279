"""agent - bellows.Agent, one rank's libbellows agent, in Python.

The class mirrors bellows/agent.h call for call (open, step_begin, observe,
step_end, window_end, decision, level, window_stats, stats, close, and the
calls of protocol minor 1: send_mode, calibrating, comm_layer, comm_bucket,
observe_activation), with
the C contracts unchanged: one training thread makes every call except
``stats()``; the agent never blocks the training thread on the network
except in ``step_begin`` at a due apply step. Failures raise BellowsError
carrying the library's message. Results are copied into plain Python
objects, so nothing returned here points into the library's memory.

``observe`` takes a torch tensor or a numpy array. A contiguous CPU tensor
of float32 (or float16/bfloat16, where the library has
bellows_agent_observe_typed) is read in place through its data pointer:
no copy. Anything else is converted first (documented on ``observe``).
Neither torch nor numpy is needed to import this module.
"""

from __future__ import annotations

import ctypes
import dataclasses
import logging
import math
import os
import threading
import weakref
from typing import TYPE_CHECKING

from bellows import _lib
from bellows._lib import BellowsError

if TYPE_CHECKING:
    # Built from the loaded library's schema on first use (module
    # __getattr__ below): to a type checker, any attribute.
    from typing import Any as LayerStats
    from typing import Any as StepInfo

__all__ = [
    "Agent",
    "AgentStats",
    "Decision",
    "Layer",
    "LayerStats",
    "StepInfo",
    "version",
]

_log = logging.getLogger("bellows")

# bellows log levels -> logging levels.
_LEVELS = {
    _lib.LOG_ERROR: logging.ERROR,
    _lib.LOG_WARN: logging.WARNING,
    _lib.LOG_INFO: logging.INFO,
    _lib.LOG_DEBUG: logging.DEBUG,
}


def version() -> str:
    """Returns libbellows' version, e.g. "0.1.0"."""
    return _lib.library().version().decode()


@dataclasses.dataclass(frozen=True)
class Layer:
    """One gradient tensor of the model: a row of the layer table.

    ``shape`` is the tensor's shape (``()`` for a scalar); ``flags`` is a
    sum of bellows.LAYER_* values.
    """

    name: str
    shape: tuple[int, ...]
    flags: int = 0

    @property
    def numel(self) -> int:
        """Elements in the tensor."""
        return math.prod(self.shape)


_STEP_INFO_DOC = """Timings and counters of one step (struct bellows_step_info).

    The fields are those of the loaded libbellows' bellows_step_info, in
    its order (bellows/stats.h, BELLOWS_STEP_INFO; docs/statistics.md
    lists them), every one 0 by default. Zero means "not measured";
    step_ms 0 is measured by the agent. ``lr_next`` is the LR of the next
    step (0: the same as lr): the last step of a window tells bellowsd
    whether the LR is about to drop. Times and LRs must be finite and not
    negative (else EINVAL).

    ``backward_ms`` is the backward pass without communication and
    ``codec_ms`` the encode + decode time of the step's sends (the window
    reports their sums); ``mem_device_used`` and ``mem_host_used`` are the
    bytes in use (the window reports the largest), ``mem_device_total``
    the device's size (the window reports the last non-zero one).
    bellows.activations measures the bytes a step saved for backward (the
    window reports the largest).
    """


@dataclasses.dataclass(frozen=True)
class Decision:
    """The knob state in force for a step (a copy of bellows_decision).

    ``seq`` 0 means no decision yet (defaults: levels 0, lr_scale 1).
    ``batch_size`` 0 means "keep the trainer's own". ``calibrate_steps``
    > 0: from ``apply_step`` on, that many steps alternate compressed
    (even steps) and raw (odd steps) sends, see ``Agent.send_mode``.
    """

    seq: int
    apply_step: int
    window: int
    levels: tuple[float, ...]
    error_bounds: tuple[float, ...]
    batch_size: int
    lr_scale: float
    size_threshold: int
    compression_off: bool
    codec_table: bytes | None
    policy: str
    reason: str
    calibrate_steps: int = 0
    # The residual plan (error feedback, ResiReduce), one entry per layer:
    # the layer whose residual buffer each shares (its group's leader; its
    # own index: its own), the group's phi (read at leaders), the kept row
    # and column fractions of a 2-D reduction (1: whole). Empty: the
    # default plan (Decision.resid_plan gives it spelled out).
    resid_group: tuple[int, ...] = ()
    resid_phi: tuple[float, ...] = ()
    resid_rows: tuple[float, ...] = ()
    resid_cols: tuple[float, ...] = ()
    # The layer statistics no policy in force reads: bit i is the i-th
    # statistic of the table (bellows.stat_bit gives a name's bit); 0:
    # every one is read (no decision yet, or an older bellowsd).
    stats_skip: int = 0

    def skips(self, *names: str) -> bool:
        """True when no policy in force reads any of the layer statistics
        ``names`` (e.g. "comm_raw_ms"): the trainer may leave them
        unmeasured. Raises KeyError for a name the library lacks."""
        return all(self.stats_skip >> stat_bit(n) & 1 for n in names)

    def resid_plan(self) -> tuple[tuple[int, ...], tuple[float, ...],
                                  tuple[float, ...], tuple[float, ...]]:
        """(group, phi, rows, cols) per layer, the default plan (every
        layer its own, phi 0.5, kept whole) when the decision has none."""
        n = len(self.levels)
        if len(self.resid_group) == n and n > 0:
            return (self.resid_group, self.resid_phi, self.resid_rows,
                    self.resid_cols)
        return (tuple(range(n)), (0.5,) * n, (1.0,) * n, (1.0,) * n)


_LAYER_STATS_DOC = """One layer's statistics of the last closed window, as reported.

    The fields are those of the loaded libbellows' bellows_layer_stats, in
    its order: ``window``, then every statistic of the table in
    bellows/stats.h (docs/statistics.md lists them with their units).
    ``act_*`` are the means of the window's ``observe_activation`` calls
    (``act_steps`` of them); ``comm_raw_ms`` and ``comm_comp_ms`` the
    medians of its timed raw and compressed sends (``comm_raw_n``,
    ``comm_comp_n`` of them), ``codec_ms`` that of their codec times.
    """

_classes: dict[str, type] = {}


def _dataclass(name: str) -> type:
    """The dataclass `name`, made once from the library's description of
    its struct: LayerStats (frozen, from _lib.stats_schema) or StepInfo
    (fields default to 0, from _lib.step_info_schema)."""
    cls = _classes.get(name)
    if cls is None:
        if name == "LayerStats":
            fields, _ = _lib.stats_schema()
            cls = dataclasses.make_dataclass(
                name, [(f.name, f.pytype) for f in fields], frozen=True,
                namespace={"__doc__": _LAYER_STATS_DOC})
        else:
            fields, _ = _lib.step_info_schema()
            cls = dataclasses.make_dataclass(
                name, [(f.name, f.pytype,
                        dataclasses.field(default=f.pytype(0)))
                       for f in fields],
                namespace={"__doc__": _STEP_INFO_DOC})
        cls.__module__ = __name__
        _classes[name] = cls
    return cls


def _layer_stats() -> type:
    return _dataclass("LayerStats")


def _step_info() -> type:
    return _dataclass("StepInfo")


_step_fields: frozenset[str] | None = None


def _step_info_names() -> frozenset[str]:
    """The StepInfo field names, read once."""
    global _step_fields
    if _step_fields is None:
        _step_fields = frozenset(f.name for f in
                                 dataclasses.fields(_step_info()))
    return _step_fields


def __getattr__(name: str):
    # LayerStats and StepInfo need the library: made on first use, not at
    # import.
    if name in ("LayerStats", "StepInfo"):
        return _dataclass(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclasses.dataclass(frozen=True)
class AgentStats:
    """The agent's counters (bellows_agent_stats)."""

    connected: bool
    step: int
    window: int
    reports_sent: int
    reports_dropped: int
    decisions: int
    decision_misses: int
    snapshots: int
    reconnects: int
    seq_in_force: int
    last_error: int
    last_error_text: str


_arrays: dict[str, tuple[int, int]] | None = None


def layer_arrays() -> dict[str, tuple[int, int]]:
    """The library's array statistics (bellows_layer_arrays_schema): name
    -> (index, length), e.g. {"exp_hist": (0, 256)}; empty for a
    libbellows without them."""
    global _arrays
    if _arrays is None:
        fn = _lib.library().arrays_schema
        found = {}
        if fn is not None:
            p = fn()
            i = 0
            while p[i].name is not None:
                found[p[i].name.decode()] = (p[i].index, p[i].len)
                i += 1
        _arrays = found
    return _arrays


_stat_bits: dict[str, int] | None = None


def stat_bit(name: str) -> int:
    """The bit of layer statistic ``name`` in a decision's ``stats_skip``
    (and a policy's ``stats_read``): its position in the library's table
    (bellows_stats_schema, after ``window``), which never changes.
    Raises KeyError for a name the loaded library does not have."""
    global _stat_bits
    if _stat_bits is None:
        fields, _ = _lib.stats_schema()
        names = [f.name for f in fields if f.name != "window"]
        _stat_bits = {n: i for i, n in enumerate(names)}
    return _stat_bits[name]


def _table_version(table: bytes | None) -> int | None:
    """The version of a GComp exponent table (common/huffman.h: magic
    "BGHT", uint32 little-endian at bytes 8..11), None for another."""
    if table is None or len(table) < 12 or table[:4] != b"BGHT":
        return None
    return int.from_bytes(table[8:12], "little")


def _struct_dict(obj: ctypes.Structure) -> dict:
    return {f[0]: getattr(obj, f[0]) for f in obj._fields_}


class _LogSink:
    """The C log callback: forwards to logging.getLogger("bellows").

    It may run on the agent's I/O thread (ctypes takes the GIL for it). It
    also remembers the last error line logged on the thread that opened the
    agent during ``open``, which is the reason behind an EINVAL.
    """

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.capture: list[str] | None = None
        self.capture_thread: int | None = None
        self.c_fn = _lib.LOG_FN(self._call)

    def _call(self, arg, level, message):
        try:
            text = message.decode(errors="replace")
            if (self.capture is not None
                    and threading.get_ident() == self.capture_thread
                    and level <= _lib.LOG_WARN):
                self.capture.append(text)
            _log.log(_LEVELS.get(level, logging.DEBUG), "%s%s",
                     self.prefix, text)
        except Exception:  # an exception must not cross into C
            pass


def _tensor_args(grad):
    """Returns (pointer, numel, dtype code, device stream or None, keep).

    ``keep`` is whatever must stay alive for the call (a converted copy).
    """
    try:
        import torch
    except ImportError:  # pragma: no cover - numpy-only use
        torch = None
    if torch is not None and isinstance(grad, torch.Tensor):
        typed = {torch.float32: _lib.DTYPE_F32,
                 torch.float16: _lib.DTYPE_F16,
                 torch.bfloat16: _lib.DTYPE_BF16}
        t = grad.detach()
        if t.dtype not in typed:
            t = t.float()
        if not t.is_contiguous():
            t = t.contiguous()
        stream = None
        if t.is_cuda:
            stream = torch.cuda.current_stream(t.device).cuda_stream
        return t.data_ptr(), t.numel(), typed[t.dtype], stream, t
    import numpy as np
    a = np.ascontiguousarray(grad)
    if a.dtype == np.float16:
        code = _lib.DTYPE_F16
    else:
        if a.dtype != np.float32:
            a = a.astype(np.float32)
        code = _lib.DTYPE_F32
    return a.ctypes.data, a.size, code, None, a


_REDUCE_NAMES = {_lib.REDUCE_SUM: "sum", _lib.REDUCE_MAX: "max",
                 _lib.REDUCE_MIN: "min"}


def _allreduce_callback(fn, sink):
    """The C all-reduce callback around fn(values, op): values is a float64
    numpy view of the library's buffer, op "sum", "max" or "min". An
    exception is logged and returned as a failure (the rank then reports
    alone), never raised through C."""

    def call(_arg, values, n, op):
        try:
            import numpy as np

            fn(np.ctypeslib.as_array(values, shape=(n,)), _REDUCE_NAMES[op])
            return 0
        except BaseException as e:  # noqa: BLE001 - never unwind into C
            _log.warning("%saggregate: the all-reduce failed (%r); this "
                         "rank reports alone", sink.prefix, e)
            return -1

    return _lib.ALLREDUCE_FN(call)


class Agent:
    """One rank's bellows agent (bellows_agent_open ... _close).

    Opening does not wait for bellowsd: an agent opened while the daemon is
    down trains on defaults and joins when it appears. Use it as a context
    manager, or call ``close()``; an agent still open when it is garbage
    collected or at interpreter exit is closed then.
    """

    def __init__(self, job: str | None, rank: int, world: int, layers,
                 *, control: str | None = None, publish: str | None = None,
                 window_steps: int = 0, start_step: int = 0,
                 start_window: int = 0,
                 decision_timeout_ms: int | None = None,
                 heartbeat_ms: int | None = None,
                 queue_capacity: int | None = None,
                 keep_reports_mb: int | None = None,
                 momentum_beta: float | None = None,
                 log_level: int = _lib.LOG_WARN,
                 stats_threads: int = 0,
                 run_id: str | None = None, resume: bool = False,
                 server_key: str | os.PathLike | None = None,
                 client_key: str | os.PathLike | None = None,
                 stats_precision: str | None = None,
                 aggregate: str = "rank", aggregate_ranks: int = 0,
                 allreduce=None):
        """Opens the agent (bellows_agent_open).

        ``layers`` is a sequence of bellows.Layer, the same on every rank.
        ``run_id`` names this launch of the job, the same on every rank
        (None: $BELLOWS_RUN_ID, else $TORCHELASTIC_RUN_ID, else none);
        ``resume`` continues the job's recorded run from a checkpoint at
        ``start_step``/``start_window`` instead of starting a new run
        (docs/protocol.md, "Runs").
        ``server_key`` (bellowsd's public certificate, NAME.pub) and
        ``client_key`` (this client's secret certificate, NAME.key, from
        ``bellows keygen``) make both sockets CURVE clients; None:
        $BELLOWS_SERVER_KEY and $BELLOWS_CLIENT_KEY. Both or neither: one
        alone, or a file that is not a certificate, is EINVAL naming it
        (docs/agent.md, "Client keys").
        ``stats_precision`` is "relaxed" (gradient sums within 1e-6
        relative, at memory speed) or "exact" (within 3e-14); None:
        $BELLOWS_STATS_PRECISION, else "relaxed". Another value is EINVAL.
        ``aggregate`` is "rank" (every rank reports its own statistics),
        "node" (the ranks of each group of ``aggregate_ranks`` consecutive
        ranks reduce theirs and the group's lowest rank reports) or "job"
        (rank 0 reports for the job); the reduction is ``allreduce``, a
        callable (values, op) that replaces the float64 numpy array
        ``values`` in place with its element-wise op ("sum", "max",
        "min") over the group, called by every rank of the group at each
        window's end (bellows.torch.attach makes one from
        torch.distributed). Every rank still applies each decision at its
        step (docs/agent.md, "Aggregation inside the job").
        Options left None keep the library's defaults (docs/agent.md):
        ``control`` and ``publish`` come from $BELLOWS_CONTROL and
        $BELLOWS_PUBLISH when set, and a ``job`` of None from $BELLOWS_JOB
        (an argument wins over the environment, the environment over the
        default; ValueError when neither names the job).
        Raises BellowsError (EINVAL with the library's reason for a bad
        configuration; ENOTSUP for device layers without CUDA support).
        """
        self._f = _lib.library()
        self._handle = ctypes.c_void_p()
        self._layers = tuple(layers)
        self._n = len(self._layers)
        self._in_step = False
        self._sink = _LogSink(f"rank {rank}: ")
        cfg = _lib.new_config()
        # The C strings and the layer table must outlive the open call
        # only (the library copies them), but are kept with the agent.
        self._keep: list[object] = []

        def cstr(s: str) -> bytes:
            b = s.encode()
            self._keep.append(b)
            return b

        table = (_lib.Layer * max(self._n, 1))()
        for i, spec in enumerate(self._layers):
            shape = (ctypes.c_uint32 * max(len(spec.shape), 1))(
                *spec.shape)
            self._keep.append(shape)
            table[i].name = cstr(spec.name)
            table[i].numel = spec.numel
            table[i].ndim = len(spec.shape)
            table[i].shape = ctypes.cast(shape,
                                         ctypes.POINTER(ctypes.c_uint32))
            table[i].flags = spec.flags
        self._keep.append(table)
        if control is not None:
            cfg.control = cstr(control)
        if publish is not None:
            cfg.publish = cstr(publish)
        if job is None:
            job = os.environ.get("BELLOWS_JOB") or None
            if job is None:
                raise ValueError("no job name: pass job or set BELLOWS_JOB")
        cfg.job = cstr(job)
        cfg.rank = rank
        cfg.world = world
        cfg.layers = table
        cfg.n_layers = self._n
        cfg.window_steps = window_steps
        cfg.start_step = start_step
        cfg.start_window = start_window
        if decision_timeout_ms is not None:
            cfg.decision_timeout_ms = decision_timeout_ms
        if heartbeat_ms is not None:
            cfg.heartbeat_ms = heartbeat_ms
        if queue_capacity is not None:
            cfg.queue_capacity = queue_capacity
        if keep_reports_mb is not None:
            if not _lib.config_has("keep_reports_mb"):
                raise BellowsError("bellows_agent_open", _lib.ENOTSUP,
                                   "this libbellows has no keep_reports_mb")
            cfg.keep_reports_mb = keep_reports_mb
        if momentum_beta is not None:
            cfg.momentum_beta = momentum_beta
        cfg.log = self._sink.c_fn
        cfg.log_level = log_level
        if stats_threads:
            if not _lib.config_has("stats_threads"):
                raise BellowsError("bellows_agent_open", _lib.ENOTSUP,
                                   "this libbellows has no stats_threads")
            cfg.stats_threads = stats_threads
        if stats_precision is not None:
            if not _lib.config_has("stats_precision"):
                raise BellowsError("bellows_agent_open", _lib.ENOTSUP,
                                   "this libbellows has no "
                                   "stats_precision")
            cfg.stats_precision = cstr(stats_precision)
        if run_id is not None or resume:
            if not _lib.config_has("run_id"):
                raise BellowsError("bellows_agent_open", _lib.ENOTSUP,
                                   "this libbellows has no run_id/resume")
            if run_id is not None:
                cfg.run_id = cstr(run_id)
            cfg.resume = 1 if resume else 0
        if server_key is not None or client_key is not None:
            if not _lib.config_has("client_key"):
                raise BellowsError("bellows_agent_open", _lib.ENOTSUP,
                                   "this libbellows has no CURVE keys "
                                   "(server_key/client_key)")
            for name, path in (("server_key", server_key),
                               ("client_key", client_key)):
                if path is not None:
                    b = os.fsencode(path)
                    self._keep.append(b)
                    setattr(cfg, name, b)
        if aggregate not in _lib.AGGREGATE:
            raise ValueError("aggregate must be 'rank', 'node' or 'job', "
                             f"not {aggregate!r}")
        if aggregate != "rank":
            if not _lib.config_has("allreduce"):
                raise BellowsError("bellows_agent_open", _lib.ENOTSUP,
                                   "this libbellows has no aggregate")
            if allreduce is None:
                raise ValueError(f"aggregate={aggregate!r} needs allreduce")
            cfg.aggregate = _lib.AGGREGATE[aggregate]
            cfg.aggregate_ranks = aggregate_ranks
            self._allreduce = _allreduce_callback(allreduce, self._sink)
            cfg.allreduce = self._allreduce
        self._sink.capture = []
        self._sink.capture_thread = threading.get_ident()
        try:
            rc = self._f.open(ctypes.addressof(cfg),
                              ctypes.byref(self._handle))
        finally:
            lines, self._sink.capture = self._sink.capture, None
        _lib.check("bellows_agent_open", rc, lines[-1] if lines else None)
        # A weakref finalizer rather than __del__: it also runs at
        # interpreter exit, before ctypes' callback can no longer run.
        self._finalizer = weakref.finalize(self, Agent._close_handle,
                                           self._f, self._handle,
                                           self._sink)

    @staticmethod
    def _close_handle(f, handle, sink):
        if handle.value:
            f.close(ctypes.byref(handle))
        del sink  # the callback lives until the I/O thread is gone

    # -- lifecycle ------------------------------------------------------

    def close(self) -> None:
        """Sends the queued reports and BYE (best effort, within 100 ms),
        stops the I/O thread and frees the agent. Idempotent. Logs a
        summary to the "bellows" logger: windows, decisions received and
        windows without a decision (a warning when there are any)."""
        self._finalizer()

    @property
    def closed(self) -> bool:
        """True once close() ran."""
        return not self._handle.value

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _h(self) -> ctypes.c_void_p:
        if not self._handle.value:
            raise BellowsError("bellows_agent", _lib.ESTATE,
                               "the agent is closed")
        return self._handle

    # -- steps ----------------------------------------------------------

    @property
    def layers(self) -> tuple[Layer, ...]:
        """The layer table the agent was opened with."""
        return self._layers

    def step_begin(self) -> int:
        """Begins the next step; returns its number.

        Makes the decision in force for it current; at a due apply step
        whose decision has not arrived it waits up to
        decision_timeout_ms, then keeps the previous decision. Raises
        BellowsError(ESTATE) if the previous step was not ended.
        """
        step = ctypes.c_uint64()
        _lib.check("bellows_agent_step_begin",
                   self._f.step_begin(self._h(), ctypes.byref(step)))
        self._in_step = True
        return step.value

    def observe(self, layer: int, grad) -> None:
        """Adds one gradient of ``layer`` to the window statistics.

        ``grad`` is a torch tensor or anything numpy can view as an array,
        with the layer's number of elements. A contiguous CPU tensor of
        float32, float16 or bfloat16 is read in place (no copy); other
        dtypes are converted to float32 and non-contiguous tensors made
        contiguous first (a copy). A CUDA tensor goes to
        bellows_agent_observe_device on the current stream, for layers
        flagged LAYER_DEVICE. Raises BellowsError (EINVAL for a bad index
        or size, ESTATE outside a step).
        """
        ptr, n, dtype, stream, keep = _tensor_args(grad)
        h = self._h()
        if stream is not None:
            if self._f.observe_device is None:
                raise BellowsError("bellows_agent_observe_device",
                                   _lib.ENOTSUP,
                                   "this libbellows has no device support")
            rc = self._f.observe_device(h, layer, ptr, n, dtype, stream)
            _lib.check("bellows_agent_observe_device", rc)
        elif dtype == _lib.DTYPE_F32:
            _lib.check("bellows_agent_observe",
                       self._f.observe(h, layer, ptr, n))
        elif self._f.observe_typed is not None:
            _lib.check("bellows_agent_observe_typed",
                       self._f.observe_typed(h, layer, ptr, n, dtype))
        else:  # an older library: widen here
            import numpy as np
            import torch
            wide = (keep.float() if isinstance(keep, torch.Tensor)
                    else np.asarray(keep, dtype=np.float32))
            self.observe(layer, wide)
        del keep

    def bucket_observer(self):
        """A function ``observe(n, layers, address, offsets, dtype)`` that
        adds n gradients at once (bellows_agent_observe_many): gradient i
        of layer ``layers[i]`` lies ``offsets[i]`` elements of ``dtype``
        after the CPU ``address``; ``layers`` and ``offsets`` are the
        addresses of n uint32 and n uint64 values. What a DDP hook calls
        once per bucket. None when the loaded libbellows predates the
        call (then observe() per tensor serves). Raises BellowsError as
        observe()."""
        fn = self._f.observe_many
        if fn is None:
            return None
        h = self._h()
        check = _lib.check

        def observe(n: int, layers: int, address: int, offsets: int,
                    dtype: int) -> None:
            rc = fn(h, n, layers, address, offsets, dtype)
            if rc:
                check("bellows_agent_observe_many", rc)

        return observe

    def step_end(self, info: StepInfo | None = None, **fields) -> None:
        """Ends the step with its timings and counters.

        Give a StepInfo or its fields as keywords (``lr=0.1,
        floats_sent=...``). When the step closes a window, its REPORT is
        queued (never sent from this thread). Raises BellowsError(ESTATE)
        if no step was begun.
        """
        c = _lib.padded(_lib.step_info_type())
        if info is None:
            # Every step: the fields straight into the zeroed struct (a
            # StepInfo's defaults are 0), without a dataclass per step.
            names = _step_info_names()
            for name, value in fields.items():
                if name not in names:
                    raise TypeError(f"step_end() got an unexpected keyword "
                                    f"argument {name!r}")
                setattr(c, name, value)
        else:
            if fields:
                info = dataclasses.replace(info, **fields)
            for name, value in dataclasses.asdict(info).items():
                setattr(c, name, value)
        rc = self._f.step_end(self._h(), ctypes.addressof(c))
        _lib.check("bellows_agent_step_end", rc)
        self._in_step = False

    @property
    def in_step(self) -> bool:
        """True between step_begin and step_end."""
        return self._in_step

    def evaluation(self, accuracy: float = 0.0, loss: float = 0.0) -> None:
        """Records an evaluation the trainer ran (accuracy 0 to 1, loss;
        0: not measured), inside or between steps: the window in progress
        reports its last one and bellowsd keeps it in the history
        (window_info.eval_accuracy, eval_loss), where ``bellows report``
        shows it. Call it before window_end() to attach it to the window
        that ends there. Every rank may give the job's value (e.g.
        all-reduced): the window keeps the largest. Raises BellowsError:
        EINVAL for an accuracy outside 0..1 or a negative or non-finite
        value, ENOTSUP with a libbellows older than the function."""
        if self._f.eval is None:
            raise _lib.BellowsError("bellows_agent_eval", _lib.ENOTSUP,
                                    "this libbellows has no "
                                    "bellows_agent_eval")
        _lib.check("bellows_agent_eval",
                   self._f.eval(self._h(), float(accuracy), float(loss)))

    def window_end(self) -> None:
        """Ends the current window now, between steps (e.g. at an epoch
        end; every rank at the same step). Raises BellowsError: ESTATE
        inside a step, EAGAIN if the window has no steps."""
        _lib.check("bellows_agent_window_end", self._f.window_end(self._h()))

    # -- decisions ------------------------------------------------------

    def decision(self) -> Decision:
        """Returns a copy of the decision in force for the current step."""
        d = _lib.padded(_lib.Decision)
        _lib.check("bellows_agent_decision",
                   self._f.decision(self._h(), ctypes.addressof(d)))
        n = d.n_layers
        levels = tuple(d.level[i] for i in range(n)) if d.level else ()
        bounds = (tuple(d.error_bound[i] for i in range(n))
                  if d.error_bound else ())
        table = (ctypes.string_at(d.codec_table, d.codec_table_len)
                 if d.codec_table else None)
        plan: dict = {}
        if d.resid_group and d.resid_phi and d.resid_rows and d.resid_cols:
            plan = dict(
                resid_group=tuple(d.resid_group[i] for i in range(n)),
                resid_phi=tuple(d.resid_phi[i] for i in range(n)),
                resid_rows=tuple(d.resid_rows[i] for i in range(n)),
                resid_cols=tuple(d.resid_cols[i] for i in range(n)))
        return Decision(
            seq=d.seq, apply_step=d.apply_step, window=d.window,
            levels=levels or (0.0,) * self._n,
            error_bounds=bounds or (0.0,) * self._n,
            batch_size=d.batch_size, lr_scale=d.lr_scale,
            size_threshold=d.size_threshold,
            compression_off=bool(d.compression_off), codec_table=table,
            policy=(d.policy or b"").decode(errors="replace"),
            reason=(d.reason or b"").decode(errors="replace"),
            calibrate_steps=d.calibrate_steps, stats_skip=d.stats_skip,
            **plan)

    def send_mode(self, layer: int) -> bool:
        """True when ``layer`` is sent compressed in the current step,
        False when raw (bellows_agent_send_mode).

        Raw when the decision turns compression off, when the layer's
        level is 0, or when its float32 size is below the decision's
        size_threshold outside a calibration; during a calibration every
        layer with a level is compressed on even steps and raw on odd
        ones. Raises BellowsError: EINVAL for a bad index, ESTATE outside
        a step.
        """
        fn = self._need("send_mode", "bellows_agent_send_mode")
        rc = fn(self._h(), layer)
        if rc < 0:
            _lib.check("bellows_agent_send_mode", rc)
        return rc == _lib.SEND_COMPRESSED

    def applied_levels(self, levels) -> bool:
        """Tells the library the level at which each layer is sent from
        the current step on (one per layer, 0 for raw), e.g. 0 for a
        tensor the compressor cannot compress whatever its level
        (bellows_agent_applied_levels). Each window reports, per layer,
        the level applied in its last step, which bellowsd keeps in the
        history beside the level decided. Kept until the next call, and
        only while the decision in force is the one it was given under:
        call it again whenever the decision's seq changes (the library
        otherwise derives the level from that decision, 0 below its size
        threshold and while compression is off).

        Returns True, or False with a libbellows older than the call
        (which reports no applied level: nothing to tell). Raises
        BellowsError: EINVAL for a count other than the number of
        layers or a negative or non-finite level, ESTATE outside a step.
        """
        fn = self._f.applied_levels
        if fn is None:
            return False
        values = [float(v) for v in levels]
        buf = (ctypes.c_double * max(len(values), 1))(*values)
        _lib.check("bellows_agent_applied_levels",
                   fn(self._h(), buf, len(values)))
        return True

    def calibrating(self) -> bool:
        """True when the current step (between steps: the last one begun)
        is inside a calibration of the decision in force."""
        fn = self._need("calibrating", "bellows_agent_calibrating")
        rc = fn(self._h())
        if rc < 0:
            _lib.check("bellows_agent_calibrating", rc)
        return rc == 1

    def level(self, layer: int) -> float:
        """Level in force for ``layer`` in the current step (0 for a bad
        index, as the C function)."""
        return self._f.level(self._h(), layer)

    def accumulators(self) -> int | None:
        """Layers whose window accumulator (behind acc_norm) is kept in
        the current window: all but those flagged LAYER_NO_ACCUMULATOR,
        or none while bellowsd says no policy of the job reads acc_norm
        (bellows_agent_accumulators). None with a library older than
        the function."""
        if self._f.accumulators is None:
            return None
        return self._f.accumulators(self._h())

    def codec_table(self, version: int | None = None) -> bytes | None:
        """The codec table in force in the current step (the opaque
        bytes the job's codec_table policy proposed, at most 64 KiB), or
        None when there is none. Every rank gets the same table at the
        same step (bellows_agent_codec_table).

        With ``version``: the table of that version among the one in
        force and the one before it (bellows_agent_codec_table_prev), so
        that data encoded before a switch still decodes; None when
        neither is. The version is read from a GComp table's header
        (magic ``BGHT``, uint32 at bytes 8..11, common/huffman.h)."""
        fn = self._f.codec_table
        if fn is None:  # a libbellows older than the call
            current = self.decision().codec_table
        else:
            table = ctypes.POINTER(ctypes.c_uint8)()
            n = ctypes.c_size_t()
            _lib.check("bellows_agent_codec_table",
                       fn(self._h(), ctypes.byref(table),
                          ctypes.byref(n)))
            current = ctypes.string_at(table, n.value) if table else None
        if version is None:
            return current
        for t in (current, self._codec_table_prev()):
            if _table_version(t) == version:
                return t
        return None

    def _codec_table_prev(self) -> bytes | None:
        fn = self._need("codec_table_prev",
                        "bellows_agent_codec_table_prev")
        table = ctypes.POINTER(ctypes.c_uint8)()
        n = ctypes.c_size_t()
        _lib.check("bellows_agent_codec_table_prev",
                   fn(self._h(), ctypes.byref(table), ctypes.byref(n)))
        return ctypes.string_at(table, n.value) if table else None

    def codec_tables(self) -> list[bytes]:
        """The codec tables kept: the one in force first, then the one
        before it; each only if there is one."""
        return [t for t in (self.codec_table(), self._codec_table_prev())
                if t is not None]

    def batch_size(self, default: int) -> int:
        """The per-rank batch size in force: the decision's, or
        ``default`` (the trainer's own) when it says 0."""
        return self.decision().batch_size or default

    def lr_scale(self) -> float:
        """The multiplier on the trainer's LR in force (1 by default)."""
        return self.decision().lr_scale

    # -- statistics -----------------------------------------------------

    def _need(self, attr: str, function: str):
        """The library function ``attr``, or ENOTSUP when the loaded
        libbellows predates it."""
        fn = getattr(self._f, attr)
        if fn is None:
            raise BellowsError(function, _lib.ENOTSUP,
                               "this libbellows is older than the call")
        return fn

    @staticmethod
    def _count(function: str, name: str, value: int) -> int:
        """A byte count for a uint64_t argument: ctypes would wrap a
        negative one silently."""
        value = int(value)
        if not 0 <= value < 1 << 64:
            raise BellowsError(function, _lib.EINVAL,
                               f"{name} {value} is not within 0..2**64-1")
        return value

    def comm_layer(self, layer: int, compressed: bool, comm_ms: float,
                   codec_ms: float = 0.0) -> None:
        """Records one timed send of ``layer``'s gradient in this step
        (bellows_agent_comm_layer).

        ``comm_ms`` is the communication time, ``codec_ms`` the encode +
        decode time of a compressed send (ignored for a raw one). The
        window reports per layer the lower quartiles of its raw and
        compressed sends and of their codec times (docs/agent.md). Raises
        BellowsError: EINVAL for a bad index or a negative or non-finite
        time, ESTATE outside a step.
        """
        fn = self._need("comm_layer", "bellows_agent_comm_layer")
        _lib.check("bellows_agent_comm_layer",
                   fn(self._h(), layer, 1 if compressed else 0,
                      float(comm_ms), float(codec_ms)))

    def comm_bucket(self, nbytes: int, compressed: bool,
                    comm_ms: float) -> None:
        """Records one timed collective of ``nbytes`` bytes (this rank's,
        after compression when ``compressed``) that is not one layer's,
        e.g. a DDP bucket (bellows_agent_comm_bucket).

        The window reports one sample per (nbytes, compressed): median
        time and count, for at most 256 pairs. Raises BellowsError:
        EINVAL for a negative or non-finite time or a negative nbytes,
        ESTATE outside a step.
        """
        fn = self._need("comm_bucket", "bellows_agent_comm_bucket")
        nbytes = self._count("bellows_agent_comm_bucket", "nbytes", nbytes)
        _lib.check("bellows_agent_comm_bucket",
                   fn(self._h(), nbytes, 1 if compressed else 0,
                      float(comm_ms)))

    def observe_activation(self, layer: int, lbar: float, nonzero: float,
                           stored_bytes: int, raw_bytes: int) -> None:
        """Records this step's statistics of the activation stored for
        ``layer`` (the index of the weight it feeds), for COMET
        (bellows_agent_observe_activation).

        ``lbar`` is the mean over samples of max |dLoss/dOutput|,
        ``nonzero`` the non-zero fraction R in [0, 1] of the stored
        values, ``stored_bytes`` and ``raw_bytes`` what is kept for
        backward and what it would take uncompressed. The window reports
        their means. Raises BellowsError: EINVAL for a bad index, a
        negative or non-finite lbar, a nonzero outside [0, 1] or negative
        bytes; ESTATE outside a step.
        """
        fn = self._need("observe_activation",
                        "bellows_agent_observe_activation")
        name = "bellows_agent_observe_activation"
        s = _lib.ActStats(
            lbar=float(lbar), nonzero=float(nonzero),
            stored_bytes=self._count(name, "stored_bytes", stored_bytes),
            raw_bytes=self._count(name, "raw_bytes", raw_bytes))
        _lib.check(name, fn(self._h(), layer, ctypes.addressof(s)))

    def observe_residual(self, layer: int, l1: float, l2: float,
                         q50: float, q90: float, q99: float,
                         floats: float) -> None:
        """Records this step's statistics of ``layer``'s error-feedback
        residual r = G~ - Q(G~) (bellows_agent_observe_residual): its L1
        and L2 norms, the quantiles q50, q90, q99 of |r| / rms(r), and
        the residual floats the layer holds under the plan in force. The
        window reports their means. Raises BellowsError: EINVAL for a bad
        index or a negative or non-finite value, ESTATE outside a step.
        """
        fn = self._need("observe_residual",
                        "bellows_agent_observe_residual")
        s = _lib.ResidStats(l1=float(l1), l2=float(l2), q50=float(q50),
                            q90=float(q90), q99=float(q99),
                            floats=float(floats))
        _lib.check("bellows_agent_observe_residual",
                   fn(self._h(), layer, ctypes.addressof(s)))

    def window_stats(self, layer: int) -> LayerStats:
        """Statistics ``layer`` had in the last closed window, as reported.
        Raises BellowsError: EINVAL for a bad index, EAGAIN before the
        first window closed."""
        s = _lib.padded(_lib.layer_stats_type())
        _lib.check("bellows_agent_window_stats",
                   self._f.window_stats(self._h(), layer,
                                        ctypes.addressof(s)))
        return _layer_stats()(**_struct_dict(s))

    def window_array(self, layer: int, name: str = "exp_hist") -> \
            list[int] | None:
        """The array statistic ``name`` (bellows/stats.h
        BELLOWS_LAYER_ARRAYS, e.g. ``exp_hist``: 256 counts of float32
        exponents) ``layer`` had in the last closed window, as reported;
        None when the layer did not carry it (not flagged
        LAYER_EXP_HIST, or not observed). Raises BellowsError: EINVAL for
        a bad index or name, EAGAIN before the first window closed."""
        arrays = layer_arrays()
        if name not in arrays:
            raise BellowsError("bellows_agent_window_array", _lib.EINVAL,
                               f"no array statistic {name!r}")
        index, length = arrays[name]
        fn = self._need("window_array", "bellows_agent_window_array")
        buf = (ctypes.c_uint64 * length)()
        rc = fn(self._h(), layer, index, buf, length)
        if rc == _lib.ENOTFOUND:
            return None
        _lib.check("bellows_agent_window_array", rc)
        return list(buf)

    def stats(self) -> AgentStats:
        """The agent's counters. Safe from any thread."""
        s = _lib.padded(_lib.AgentStats)
        _lib.check("bellows_agent_stats_get",
                   self._f.stats_get(self._h(), ctypes.addressof(s)))
        d = _struct_dict(s)
        d["connected"] = bool(d["connected"])
        d["last_error_text"] = s.last_error_text.decode(errors="replace")
        return AgentStats(**d)
