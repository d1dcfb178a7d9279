#!/usr/bin/env bash
# check_package.sh - ruff (lint) and mypy (types) over agent/python/bellows
# with their configuration in pyproject.toml, both from the torch 2.x venv
# (scripts/setup.sh installs them there; mypy then sees torch's types).
# Exits 77 without that venv or without ruff and mypy in it.
set -u
SRC=${BELLOWS_SOURCE_ROOT:?run through meson test}
PY=${BELLOWS_TORCH2_PYTHON:-}
if [ -z "$PY" ] || ! "$PY" -c 'import mypy, ruff' 2>/dev/null; then
	echo "SKIP: no torch 2.x venv with ruff and mypy (scripts/setup.sh torch2)"
	exit 77
fi
cd "$SRC" || exit 1
rc=0
# Caches out of the tree.
export RUFF_CACHE_DIR="${BELLOWS_BUILD_ROOT:-$SRC/build}/ruff-cache"
"$PY" -m ruff check --no-fix . || rc=1
[ $rc = 0 ] && echo "ok: ruff finds nothing"
"$PY" -m mypy --cache-dir "${BELLOWS_BUILD_ROOT:-$SRC/build}/mypy-cache" || rc=1
exit $rc
