"""run - runs Python test modules with unittest, for meson.

usage: /usr/bin/python3 run.py MODULE...

Puts agent/python (the bellows package) and this directory on sys.path,
exits 77 (meson's "skipped") when torch cannot be imported, runs every
test of the named modules verbosely and ends with the line
"N passed, N failed, N skipped"; the exit status is 1 if anything failed.
"""

from __future__ import annotations

import pathlib
import sys
import unittest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "agent" / "python"))


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    try:
        import torch  # noqa: F401
    except ImportError as e:
        print(f"skipped: torch is not importable ({e}); install "
              "python3-torch (scripts/setup.sh full)")
        return 77
    suite = unittest.defaultTestLoader.loadTestsFromNames(argv)
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(
        suite)
    failed = len(result.failures) + len(result.errors) + \
        len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    passed = result.testsRun - failed - skipped
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
