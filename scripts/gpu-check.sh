#!/usr/bin/env bash
# gpu-check.sh - everything CUDA in bellows, on a machine with an NVIDIA GPU.
#
#   scripts/gpu-check.sh [BUILD_DIR]
#
# 1. builds with CUDA (meson -Dcuda=enabled, in BUILD_DIR, default
#    build-gpu under the source root);
# 2. runs every CUDA test: the kernels' twins against their CPU codecs,
#    byte for byte on the device (tests/kernels/test_*cuda*.c), and the
#    Python tests that run the twins through bellows.compress and
#    bellows.activations;
# 3. benchmarks each twin that the Python package calls against a
#    device-to-device copy of the same bytes and against torch's own
#    operations (bench/gpu_check.py bench);
# 4. runs three DDP steps of bellows.torch on CUDA tensors per compressor
#    (one rank on one GPU; two ranks over NCCL with two or more GPUs;
#    bench/gpu_check.py step);
# and prints one summary table. Python is the torch 2.x venv
# /var/cache/bellows/torch2/bin/python where it exists, else python3
# ($PYTHON overrides). About 3 to 5 minutes on one H100, most of it the
# build; each step has its own time limit, so the whole stays under 8.
#
# Exits 0 when every row passed, 1 when one failed, and 77 (meson's
# "skipped") with one line where there is no NVIDIA GPU.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build-gpu}

if ! command -v nvidia-smi >/dev/null 2>&1 ||
	! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
	echo "gpu-check: no NVIDIA GPU here (nvidia-smi lists none), skipped"
	exit 77
fi

python=${PYTHON:-}
if [ -z "$python" ]; then
	if [ -x /var/cache/bellows/torch2/bin/python ]; then
		python=/var/cache/bellows/torch2/bin/python
	else
		python=python3
	fi
fi
log=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
summary=$log/summary.tsv
: >"$summary"
failed=0

# row KIND NAME RESULT DETAIL: one line of the summary.
row() {
	printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$summary"
	[ "$3" = FAIL ] && failed=1
	printf '%-6s %-40s %s  %s\n' "$1" "$2" "$3" "$4"
}

# run KIND NAME LIMIT CMD...: runs CMD under a time limit, its output in
# the log folder; PASS on 0, FAIL otherwise, SKIP on 77 where $may_skip
# is 1 (elsewhere a skip on a machine with a GPU is a failure).
may_skip=0
run() {
	local kind=$1 name=$2 limit=$3 out rc t0
	shift 3
	out=$log/$(echo "$kind-$name" | tr -c 'A-Za-z0-9_.-' _).log
	t0=$(date +%s)
	timeout "$limit" "$@" >"$out" 2>&1
	rc=$?
	case $rc in
	0) row "$kind" "$name" PASS "$(($(date +%s) - t0)) s" ;;
	77) row "$kind" "$name" "$([ "$may_skip" = 1 ] && echo SKIP ||
		echo FAIL)" "skipped: $(tail -n 1 "$out")" ;;
	124) row "$kind" "$name" FAIL "over ${limit} s; log $out" ;;
	*) row "$kind" "$name" FAIL "exit $rc; log $out" ;;
	esac
	return "$rc"
}

echo "gpu-check: $(nvidia-smi -L | head -n 1); logs in $log"
row device "$(nvidia-smi --query-gpu=name,driver_version \
	--format=csv,noheader | head -n 1)" PASS \
	"$(nvidia-smi -L | grep -c '^GPU ') GPU(s), $($python -c \
	'import torch; print("torch", torch.__version__)' 2>&1 | tail -n 1)"

# 1. The build.
cd "$root" || exit 1
if [ -d "$build" ]; then
	setup=(meson setup --reconfigure "$build" -Dcuda=enabled)
else
	setup=(meson setup "$build" -Dcuda=enabled -Dbuildtype=release)
fi
if ! run build "meson setup -Dcuda=enabled" 120 "${setup[@]}" ||
	! run build "ninja" 360 ninja -C "$build"; then
	echo "gpu-check: the build failed; nothing else ran"
	exit 1
fi

# 2. The CUDA tests: the kernels' twins (every tests/kernels/test_*cuda*
# program; a skip here means the GPU was not usable, a failure), then the
# Python tests of the twins.
export BELLOWS_BUILD_ROOT=$build BELLOWS_SOURCE_ROOT=$root
for src in "$root"/tests/kernels/test_*cuda*.c; do
	name=$(basename "$src" .c)
	exe=$build/tests/kernels/test_kern_${name#test_}
	if [ ! -x "$exe" ]; then
		row test "$name" FAIL "not built ($exe)"
		continue
	fi
	# The absent-device test has nothing to check where a device is.
	may_skip=$([ "$name" = test_cuda_absent ] && echo 1 || echo 0)
	run test "$name" 120 "$exe"
done
may_skip=0
lib=$(find "$build/agent" -maxdepth 1 -type f -name "libbellows.so.*.*.*" | head -n 1)
export BELLOWS_LIB=$lib LD_LIBRARY_PATH=$build/agent${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONPATH=$root/agent/python${PYTHONPATH:+:$PYTHONPATH}
for t in test_compress.NativePowerSGDTest test_compress.DispatchTest \
	test_activations_native.CudaTwinTest test_gcomp.GCompCudaTest; do
	run test "$t" 180 env -C "$root/tests/python" "$python" run.py "$t"
done

# 3. and 4. The benchmark and the DDP step.
run bench "bench/gpu_check.py bench" 180 \
	"$python" "$root/bench/gpu_check.py" bench "$log/bench.tsv"
run step "bench/gpu_check.py step" 180 \
	"$python" "$root/bench/gpu_check.py" step "$log/step.tsv"
cat "$log"/bench.tsv "$log"/step.tsv >>"$summary" 2>/dev/null
grep -q "	FAIL	" "$summary" && failed=1

echo
echo "gpu-check summary ($(date -u '+%Y-%m-%d %H:%M UTC'))"
printf '%-6s | %-40s | %-6s | %s\n' kind name result detail
printf '%s-|-%s-|-%s-|-%s\n' ------ \
	---------------------------------------- ------ ------
while IFS=$'\t' read -r kind name result detail; do
	printf '%-6s | %-40s | %-6s | %s\n' "$kind" "$name" "$result" "$detail"
done <"$summary"
exit "$failed"
