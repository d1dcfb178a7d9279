#!/usr/bin/env bash
# test.sh - build bellows and run every test suite.
#
# Installs what is missing (scripts/setup.sh full), configures the build
# directory with warnings as errors (or reconfigures it, so changed options
# take effect), compiles, and runs `meson test` over all suites. Exits with
# meson's status; meson's summary (Ok/Fail/Skipped) is the last thing
# printed. Arguments are passed on to `meson test` (e.g. `--suite unit`).
#
# Environment:
#   BELLOWS_BUILD_DIR   build directory, relative to the source root
#                       (default: build)
#   BELLOWS_MESON_ARGS  extra `meson setup` arguments, split on blanks
#                       (e.g. "-Db_sanitize=address,undefined -Db_lundef=false")
#   BELLOWS_REQUIRE_CUDA 1: where nvcc exists, fail if the CUDA kernels
#                       cannot be configured instead of building without
#                       them (.ci/run sets it)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

bash scripts/setup.sh full

builddir=${BELLOWS_BUILD_DIR:-build}
read -r -a extra <<<"${BELLOWS_MESON_ARGS:-}"
setup_args=(-Dwerror=true)
# Where nvcc exists the CUDA kernels must build: a broken .cu file fails the
# tests instead of being skipped quietly by -Dcuda=auto. (GPU tests still
# skip, exit 77, without a device.)
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
	setup_args+=(-Dcuda=enabled)
fi
# The Python tests run under PyPI's torch 2.x too, from the venv
# setup.sh made (a venv that is not there leaves them to Debian's torch,
# with a warning from meson).
torch2_venv=${BELLOWS_TORCH2_VENV:-/var/cache/bellows/torch2}
if [ "${BELLOWS_NO_TORCH2:-0}" != 1 ]; then
	setup_args+=("-Dtorch2_python=$torch2_venv/bin/python")
fi
setup_args+=("${extra[@]}")

# A log from an earlier run must not pass for this run's results (.ci/run
# reads it), even if this run fails before testing.
rm -f "$builddir/meson-logs/testlog.json"

configure() {
	if [ -f "$builddir/meson-private/coredata.dat" ]; then
		meson setup --reconfigure "$builddir" "$@"
	else
		meson setup "$builddir" "$@"
	fi
}

if ! configure "${setup_args[@]}"; then
	# nvcc without a usable toolkit beside it (no CUDA runtime library
	# or headers where nvcc says they are) must not cost every other
	# test: say so loudly, then build without the CUDA kernels.
	case " ${setup_args[*]} " in
	*" -Dcuda=enabled "*) ;;
	*) exit 1 ;;
	esac
	# CI must prove the kernels compile: no quiet fallback there.
	if [ "${BELLOWS_REQUIRE_CUDA:-0}" = 1 ]; then
		echo "test.sh: configuring with -Dcuda=enabled failed and" \
			"BELLOWS_REQUIRE_CUDA=1: not building without the CUDA" \
			"kernels" >&2
		exit 1
	fi
	echo "test.sh: WARNING: configuring with -Dcuda=enabled failed" \
		"(see above); building WITHOUT the CUDA kernels" >&2
	rm -rf "$builddir"
	fallback=()
	for a in "${setup_args[@]}"; do
		[ "$a" = -Dcuda=enabled ] || fallback+=("$a")
	done
	configure "${fallback[@]}" -Dcuda=disabled
fi

meson compile -C "$builddir"

rc=0
meson test -C "$builddir" --print-errorlogs "$@" || rc=$?
exit "$rc"
