"""step - run by tests/python/test_wheel.sh inside a venv the wheel was
installed into: imports the installed bellows (never the source tree's),
runs a few steps against the bellowsd $BELLOWS_CONTROL names for the job
$BELLOWS_JOB and prints one JSON line: where the package and its library
were loaded from, whether py.typed is there, the torch version, the last
levels and the counts of decisions and misses."""

from __future__ import annotations

import json
import pathlib

import torch

import bellows
import bellows.torch  # noqa: F401  (imports under this torch)

LAYERS = [bellows.Layer("w", (4, 8)), bellows.Layer("b", (4,))]

with bellows.Agent(None, 0, 1, LAYERS, window_steps=2) as a:
    levels: tuple[float, ...] = ()
    for _ in range(8):
        a.step_begin()
        a.observe(0, torch.ones(32))
        a.observe(1, torch.ones(4))
        levels = (a.level(0), a.level(1))
        a.step_end(lr=0.1)
    st = a.stats()
pkg = pathlib.Path(bellows.__file__).parent
print(json.dumps({
    "package": str(pkg),
    "library": bellows.library_path(),
    "typed": (pkg / "py.typed").exists(),
    "torch": torch.__version__,
    "levels": list(levels),
    "decisions": st.decisions,
    "misses": st.decision_misses,
}))
