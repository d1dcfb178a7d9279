"""test_schema - the Python mirrors of bellows_layer_stats and
bellows_step_info come from the library.

bellows_stats_schema() and bellows_step_info_schema() describe the loaded
libbellows' structs; the ctypes Structures and the LayerStats and StepInfo
dataclasses are built from them, so their fields are exactly the tables'
(common/bellows/stats.h: BELLOWS_LAYER_STATS after the window index,
BELLOWS_STEP_INFO), at the library's offsets. Importing the package must
not load the library.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import pathlib
import re
import subprocess
import sys
import unittest

import bellows
from bellows import _lib

SOURCE = pathlib.Path(os.environ.get(
    "BELLOWS_SOURCE_ROOT", pathlib.Path(__file__).resolve().parents[2]))


def table_names(table: str = "BELLOWS_LAYER_STATS") -> list[str]:
    """The row names of a table of the header, in order: a row is
    BELLOWS_<KIND>(X, name, ...) or, in BELLOWS_STEP_INFO, X(name, ...)."""
    text = (SOURCE / "common" / "bellows" / "stats.h").read_text()
    if table == "BELLOWS_LAYER_STATS":
        # the rows of ABI 6, then those appended after it
        return (table_names("BELLOWS_LAYER_STATS_ABI6")
                + table_names("BELLOWS_LAYER_STATS_APPENDED"))
    start = text.index(f"#define {table}(X)")
    end = text.index("\n\n", start)
    return re.findall(r"(?:\bBELLOWS_[A-Z_]+\(X, |\bX\()(\w+),",
                      text[start:end])


class SchemaTest(unittest.TestCase):
    def test_ctypes_mirror_has_the_library_layout(self):
        fields, size = _lib.stats_schema()
        cls = _lib.layer_stats_type()
        self.assertIs(_lib.LayerStats, cls)
        self.assertEqual([f[0] for f in cls._fields_],
                         [f.name for f in fields])
        for f in fields:
            self.assertEqual(getattr(cls, f.name).offset, f.offset, f.name)
            self.assertEqual(getattr(cls, f.name).size,
                             ctypes.sizeof(f.ctype), f.name)
        self.assertEqual(ctypes.sizeof(cls), size)

    def test_fields_are_the_statistics_table(self):
        fields, _ = _lib.stats_schema()
        names = table_names()
        self.assertIn("momentum_abs_mean", names)
        self.assertEqual([f.name for f in fields], ["window"] + names)
        by_name = {f.name: f for f in fields}
        self.assertIs(by_name["count"].ctype, ctypes.c_uint64)
        self.assertIs(by_name["act_steps"].ctype, ctypes.c_uint32)
        self.assertIs(by_name["codec_ms"].ctype, ctypes.c_double)
        self.assertEqual(by_name["comm_raw_ms"].unit, "ms")
        self.assertTrue(all(f.doc for f in fields))

    def test_dataclass_follows_the_schema(self):
        fields, _ = _lib.stats_schema()
        ls = bellows.LayerStats
        self.assertTrue(dataclasses.is_dataclass(ls))
        self.assertEqual([(f.name, f.type) for f in dataclasses.fields(ls)],
                         [(f.name, f.pytype) for f in fields])
        s = ls(**{f.name: f.pytype(1) for f in fields})
        self.assertEqual(s.momentum_abs_mean, 1.0)
        with self.assertRaises(dataclasses.FrozenInstanceError):
            s.count = 2
        self.assertIs(bellows.agent.LayerStats, ls)

    def test_array_statistics_are_the_arrays_table(self):
        arrays = bellows.agent.layer_arrays()
        names = table_names("BELLOWS_LAYER_ARRAYS")
        self.assertIn("exp_hist", names)
        self.assertEqual(list(arrays), names)
        self.assertEqual(arrays["exp_hist"], (0, 256))
        self.assertEqual(bellows.LAYER_EXP_HIST, 1 << 3)

    def test_step_info_follows_its_table(self):
        fields, size = _lib.step_info_schema()
        names = table_names("BELLOWS_STEP_INFO")
        self.assertIn("saved_bytes", names)
        self.assertEqual([f.name for f in fields], names)
        cls = _lib.step_info_type()
        self.assertIs(_lib.StepInfo, cls)
        self.assertEqual(ctypes.sizeof(cls), size)
        for f in fields:
            self.assertEqual(getattr(cls, f.name).offset, f.offset, f.name)
        info = bellows.StepInfo(lr=0.5, saved_bytes=7)
        self.assertEqual([f.name for f in dataclasses.fields(info)], names)
        self.assertEqual(info.saved_bytes, 7)
        self.assertEqual(info.compute_ms, 0.0)
        self.assertIsInstance(info.batch_size, int)
        info.epoch = 3  # not frozen, as before
        self.assertEqual(dataclasses.replace(info, epoch=4).epoch, 4)

    def test_importing_bellows_does_not_load_the_library(self):
        # The error codes are the library's too: the first use loads it.
        code = ("import bellows, bellows._lib as l, bellows.agent; "
                "assert l._funcs is None, 'loaded at import'; "
                "assert bellows.EINVAL == -2 and l._funcs is not None")
        env = dict(os.environ)
        env["PYTHONPATH"] = str(SOURCE / "agent" / "python")
        r = subprocess.run([sys.executable, "-c", code], env=env,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    unittest.main()
