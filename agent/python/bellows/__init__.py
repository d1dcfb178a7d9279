"""bellows - Python binding of libbellows, the bellows agent.

Pure Python over the shared library with ctypes: no compile step. The
library is found through BELLOWS_LIB, else (an installed package) the one
``meson install`` put with it (bellows/_install.py), else the build tree
this package sits in (``build*/agent/libbellows.so``, ``build/`` first),
else the system's library path. Importing this package does not load it;
the first use does.

    bellows.Agent        one rank's agent, mirroring bellows/agent.h
    bellows.torch        attach a DistributedDataParallel model to an agent
                         (import it explicitly: it needs torch)
    bellows.compress     the PowerSGD and top-k compressors (pure torch)
    bellows.activations  COMET's error-bounded compression of the inputs
                         convolutions save for backward (import it
                         explicitly: it needs torch)

Errors from the library raise bellows.BellowsError with its message; its
``code`` compares with the constants bellows.EINVAL, bellows.ESTATE, ...
(bellows/error.h), which, like bellows.ERRORS, are read from the library
on first use (bellows_error_name). See docs/pytorch.md.
"""

from __future__ import annotations

from bellows import _lib
from bellows._lib import (
    DTYPE_BF16,
    DTYPE_F16,
    DTYPE_F32,
    ERRORS,
    LAYER_DEVICE,
    LAYER_EXP_HIST,
    LAYER_MOMENTUM,
    LAYER_NO_ACCUMULATOR,
    LOG_DEBUG,
    LOG_ERROR,
    LOG_INFO,
    LOG_WARN,
    BellowsError,
    library_path,
)
from bellows.agent import (
    Agent,
    AgentStats,
    Decision,
    Layer,
    stat_bit,
    version,
)

__all__ = [
    "Agent",
    "AgentStats",
    "BellowsError",
    "DTYPE_BF16",
    "DTYPE_F16",
    "DTYPE_F32",
    "Decision",
    "ERRORS",
    "LAYER_DEVICE",
    "LAYER_EXP_HIST",
    "LAYER_MOMENTUM",
    "LAYER_NO_ACCUMULATOR",
    "LOG_DEBUG",
    "LOG_ERROR",
    "LOG_INFO",
    "LOG_WARN",
    "Layer",
    "LayerStats",
    "StepInfo",
    "library_path",
    "stat_bit",
    "version",
]


def __getattr__(name: str):
    # bellows.LayerStats and bellows.StepInfo are made from the loaded
    # library's description of their structs (bellows.agent): on first
    # use, so that importing bellows does not load libbellows.
    # The error codes (bellows.EINVAL == -2, ...) are the library's
    # (bellows._lib.ERRORS), read from it on first use.
    if name in ("LayerStats", "StepInfo"):
        from bellows import agent
        return getattr(agent, name)
    if _lib._ERROR_NAME.fullmatch(name):
        return getattr(_lib, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
