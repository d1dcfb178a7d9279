"""test_schema - the Python mirror of bellows_layer_stats comes from the
library.

bellows_stats_schema() describes the loaded libbellows' struct; the ctypes
Structure and the LayerStats dataclass are built from it, so their fields
are exactly the statistics table's (common/bellows/stats.h,
BELLOWS_LAYER_STATS) after the window index, at the library's offsets.
Importing the package must not load the library.
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


def table_names() -> list[str]:
    """The entry names of BELLOWS_LAYER_STATS, in order, from the header."""
    text = (SOURCE / "common" / "bellows" / "stats.h").read_text()
    start = text.index("#define BELLOWS_LAYER_STATS(X)")
    end = text.index("#define BELLOWS_RANK_TIMINGS(X)")
    return re.findall(r"\bX\((\w+),", text[start:end])


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

    def test_importing_bellows_does_not_load_the_library(self):
        code = ("import bellows, bellows._lib as l, bellows.agent; "
                "assert l._funcs is None, 'loaded at import'")
        env = dict(os.environ)
        env["PYTHONPATH"] = str(SOURCE / "agent" / "python")
        r = subprocess.run([sys.executable, "-c", code], env=env,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    unittest.main()
