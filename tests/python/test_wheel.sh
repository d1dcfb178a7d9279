#!/usr/bin/env bash
# test_wheel.sh build|torch2|debian|torchrun - `pip install` of the bellows
# wheel (pyproject.toml, meson-python), each mode one meson test:
#
#   build     pip builds the wheel from a copy of this tree with Debian's
#             meson-python (python3-mesonpy), offline; it is
#             platform-specific and holds the package, py.typed and
#             libbellows
#   torch2    installed into a fresh venv that sees PyPI's torch 2.x (the
#             venv of -Dtorch2_python, through a .pth file), the package
#             imports from the venv, loads the libbellows inside it and
#             runs steps against bellowsd taking its job and endpoints
#             from BELLOWS_*; BELLOWS_LIB still wins over it
#   debian    the same in a --system-site-packages venv of /usr/bin/python3
#             (Debian's torch 1.13)
#   torchrun  two ranks under `torchrun --nproc-per-node 2` in the torch
#             2.x venv with the wheel, nothing but BELLOWS_* (and
#             torchrun's own variables) telling them where bellowsd is:
#             both get decisions and apply the same levels at every step
#
# The wheel is built once per change of the tree (a lock serialises the
# modes; $BUILD/wheel-test keeps the copy, meson-python's build directory
# and the wheel). Exits 77 without meson-python, python3-venv, git or
# (torch2, torchrun) the torch 2.x venv.
set -u
MODE=${1:?usage: test_wheel.sh build|torch2|debian|torchrun}
BUILD=${BELLOWS_BUILD_ROOT:?run through meson test}
SRC=${BELLOWS_SOURCE_ROOT:?run through meson test}
HERE=$(cd "$(dirname "$0")" && pwd)
TORCH2=${BELLOWS_TORCH2_PYTHON:-}
WT="$BUILD/wheel-test"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/bellows-wheel.XXXXXX")
DAEMON_PID=""
cleanup() {
	if [ -n "$DAEMON_PID" ]; then
		kill -TERM "$DAEMON_PID" 2>/dev/null
		wait "$DAEMON_PID" 2>/dev/null
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	[ -f "$TMP/bellowsd.log" ] && tail -n 30 "$TMP/bellowsd.log"
	exit 1
}
ok() { echo "ok: $*"; }
skip() {
	echo "SKIP: $*"
	exit 77
}
unset BELLOWS_LIB PYTHONPATH

/usr/bin/python3 -c 'import mesonpy' 2>/dev/null ||
    skip "Debian's meson-python (python3-mesonpy) is not installed"
/usr/bin/python3 -c 'import ensurepip' 2>/dev/null ||
    skip "python3-venv is not installed"
git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1 ||
    skip "$SRC is not a git checkout: the files to build from are unknown"
if [ "$MODE" = torch2 ] || [ "$MODE" = torchrun ]; then
	[ -n "$TORCH2" ] && "$TORCH2" -c 'import torch' 2>/dev/null ||
	    skip "no torch 2.x venv (-Dtorch2_python)"
fi

# wheel: builds $WT/dist/bellows-*.whl unless one newer than every file of
# the tree is there; prints its path.
wheel() {
	mkdir -p "$WT"
	exec 9>"$WT/lock"
	flock 9
	local whl files
	whl=$(ls "$WT"/dist/bellows-*.whl 2>/dev/null | head -n 1)
	files=$(cd "$SRC" && git ls-files -co --exclude-standard)
	if [ -n "$whl" ] && [ -z "$(cd "$SRC" && echo "$files" |
	    xargs -d '\n' find 2>/dev/null -newer "$whl" -print -quit)" ]; then
		echo "$whl"
		return 0
	fi
	rm -rf "$WT/dist" "$WT/venv"
	mkdir -p "$WT/src"
	# A copy: meson-python writes beside the sources. Unchanged files
	# keep their times, so meson-python's build is incremental.
	(cd "$SRC" && echo "$files" | tar -cf - -T - --ignore-failed-read) |
	    tar -xf - -C "$WT/src" || return 1
	/usr/bin/python3 -m venv --system-site-packages "$WT/venv" || return 1
	# meson-python 0.12 reconfigures a build directory it is given even
	# when it is empty: make it a build tree first.
	if [ ! -f "$WT/build/meson-private/coredata.dat" ]; then
		rm -rf "$WT/build"
		meson setup "$WT/build" "$WT/src" -Dwheel=true \
		    -Dpython_package=enabled -Dtests=false \
		    >"$WT/setup.log" 2>&1 || { cat "$WT/setup.log" >&2; return 1; }
	fi
	nice "$WT/venv/bin/python" -m pip wheel --no-build-isolation --no-deps \
	    --no-index -w "$WT/dist" \
	    --config-settings builddir="$WT/build" \
	    --config-settings setup-args=-Dcuda=disabled \
	    "$WT/src" >"$WT/pip.log" 2>&1 || { tail -n 40 "$WT/pip.log" >&2; return 1; }
	ls "$WT"/dist/bellows-*.whl | head -n 1
}

# daemon: a bellowsd of this build on ipc endpoints in $TMP, a fixed
# policy (level 3 for 2-D tensors); exports the BELLOWS_* the trainers read.
daemon() {
	cat >"$TMP/policy.yaml" <<'YAML'
daemon: {apply_lag: 1, heartbeat_ms: 200, window_timeout_ms: 20000, rank_timeout_ms: 20000}
jobs:
  - match: "*"
    policies:
      - type: fixed
        params: {level: 3}
YAML
	export BELLOWS_CONTROL="ipc://$TMP/control" \
	    BELLOWS_PUBLISH="ipc://$TMP/publish" BELLOWS_JOB=wheel-test
	"$BUILD/controller/bellowsd" --control "$BELLOWS_CONTROL" \
	    --publish "$BELLOWS_PUBLISH" --policy "$TMP/policy.yaml" \
	    --no-db >"$TMP/bellowsd.log" 2>&1 &
	DAEMON_PID=$!
	for _ in $(seq 1 200); do
		env -u BELLOWS_JOB "$BUILD/tools/bellows" status \
		    --control "$BELLOWS_CONTROL" --timeout-ms 200 \
		    >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	fail "bellowsd did not answer STATUS"
}

# venv KIND: a fresh venv in $TMP/venv with the wheel installed; KIND
# torch2 (sees the torch 2.x venv's packages) or debian
# (--system-site-packages of /usr/bin/python3).
venv() {
	local whl=$1 site
	if [ "$2" = torch2 ]; then
		/usr/bin/python3 -m venv "$TMP/venv" || fail "venv"
		site=$("$TORCH2" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
		"$TMP/venv/bin/python" -c 'import sysconfig, sys; open(sysconfig.get_path("purelib") + "/torch2.pth", "w").write(sys.argv[1] + "\n")' "$site"
	else
		/usr/bin/python3 -m venv --system-site-packages "$TMP/venv" ||
		    fail "venv"
	fi
	"$TMP/venv/bin/python" -m pip install -q --no-index --no-deps \
	    --disable-pip-version-check "$whl" >"$TMP/pip.log" 2>&1 ||
	    fail "pip install $whl: $(tail -n 20 "$TMP/pip.log")"
}

case "$MODE" in
build)
	whl=$(wheel) || fail "building the wheel (see above)"
	case "$(basename "$whl")" in
	*-none-any.whl) fail "$(basename "$whl") claims to be pure Python" ;;
	*linux_x86_64.whl | *linux_*.whl) ;;
	*) fail "$(basename "$whl") is not tagged for Linux" ;;
	esac
	list=$(/usr/bin/python3 -m zipfile -l "$whl") || fail "not a zip: $whl"
	for f in bellows/__init__.py bellows/torch.py bellows/_install.py \
	    bellows/py.typed bellows/libbellows.so; do
		echo "$list" | grep -q " *$f" || fail "$f not in the wheel"
	done
	echo "$list" | grep -Eq 'bin/|include/|share/' &&
	    fail "the wheel holds more than the package: $(echo "$list" | grep -E 'bin/|include/|share/')"
	ok "$(basename "$whl"): the package, py.typed and libbellows, nothing else"
	;;
torch2 | debian)
	whl=$(wheel) || fail "building the wheel"
	venv "$whl" "$MODE"
	daemon
	out=$(cd "$TMP" && "$TMP/venv/bin/python" "$HERE/wheel/step.py" 2>&1) ||
	    fail "the step in the $MODE venv: $out"
	echo "$out"
	/usr/bin/python3 - "$TMP/venv" "$out" <<'PY' || fail "checks above"
import json, sys
venv, out = sys.argv[1], json.loads(sys.argv[2].splitlines()[-1])
def check(cond, what):
    if not cond:
        sys.exit(f"FAIL: {what}: {out}")
check(out["package"].startswith(venv + "/"), "the package is not the venv's")
check(out["library"].startswith(out["package"] + "/libbellows.so"),
      "libbellows is not the one inside the package")
check(out["typed"], "no py.typed")
check(out["decisions"] >= 1 and out["misses"] == 0, "no decisions")
check(out["levels"] == [3.0, 0.0], "not the fixed policy's levels")
print(f"ok: torch {out['torch']}: the package and its libbellows from the "
      f"venv, py.typed, {out['decisions']} decisions, levels {out['levels']}")
PY
	got=$(cd "$TMP" && BELLOWS_LIB="$BUILD/agent/libbellows.so" \
	    "$TMP/venv/bin/python" -c 'import bellows; print(bellows.library_path())') ||
	    fail "BELLOWS_LIB: $got"
	[ "$got" = "$BUILD/agent/libbellows.so" ] ||
	    fail "BELLOWS_LIB names $BUILD/agent/libbellows.so, loaded $got"
	ok "BELLOWS_LIB still chooses the library"
	;;
torchrun)
	whl=$(wheel) || fail "building the wheel"
	venv "$whl" torch2
	daemon
	# Nothing but PATH, HOME and BELLOWS_* from here: torchrun sets the
	# rendezvous variables itself.
	env -i PATH=/usr/bin:/bin HOME="$TMP" OMP_NUM_THREADS=1 \
	    BELLOWS_CONTROL="$BELLOWS_CONTROL" \
	    BELLOWS_PUBLISH="$BELLOWS_PUBLISH" BELLOWS_JOB="$BELLOWS_JOB" \
	    "$TMP/venv/bin/python" -m torch.distributed.run \
	    --nproc-per-node 2 --master-port "$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')" \
	    "$HERE/wheel/ddp.py" >"$TMP/ranks.out" 2>"$TMP/ranks.err" ||
	    fail "torchrun: $(grep -E '^\[rank[0-9]\]|Error' "$TMP/ranks.err" | tail -n 30)"
	/usr/bin/python3 - "$TMP/venv" "$TMP/ranks.out" <<'PY' || fail "checks above"
import json, sys
venv = sys.argv[1]
ranks = {}
for line in open(sys.argv[2]):
    if line.startswith("{"):
        r = json.loads(line)
        ranks[r["rank"]] = r
if sorted(ranks) != [0, 1]:
    sys.exit(f"FAIL: ranks reported: {sorted(ranks)}")
for r in ranks.values():
    if not r["library"].startswith(venv + "/"):
        sys.exit(f"FAIL: rank {r['rank']} loaded {r['library']}")
    if r["decisions"] < 1 or r["misses"] != 0:
        sys.exit(f"FAIL: rank {r['rank']}: {r['decisions']} decisions, "
                 f"{r['misses']} misses")
if ranks[0]["levels"] != ranks[1]["levels"]:
    sys.exit("FAIL: the ranks applied different levels")
if 3.0 not in ranks[0]["levels"][-1]:
    sys.exit(f"FAIL: the last levels {ranks[0]['levels'][-1]} are not the policy's")
print(f"ok: torchrun --nproc-per-node 2 with BELLOWS_* alone: both ranks "
      f"loaded the venv's libbellows, {ranks[0]['decisions']} decisions each, "
      f"the same levels at all {len(ranks[0]['levels'])} steps "
      f"(last {ranks[0]['levels'][-1]})")
PY
	;;
*)
	fail "unknown mode $MODE"
	;;
esac
