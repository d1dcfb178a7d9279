#!/usr/bin/env bash
# test_gpu_check_skips.sh - scripts/gpu-check.sh, where nvidia-smi lists
# no GPU (it prints nothing, or fails as it does without a driver), exits
# 77 with one line and builds nothing.
#
#   tests/meta/test_gpu_check_skips.sh SOURCE_ROOT
set -euo pipefail

root=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/bin"

for stub in 'exit 0' 'echo "NVIDIA-SMI has failed" >&2; exit 9'; do
	printf '#!/bin/sh\n%s\n' "$stub" >"$tmp/bin/nvidia-smi"
	chmod +x "$tmp/bin/nvidia-smi"
	rc=0
	PATH=$tmp/bin:$PATH "$root/scripts/gpu-check.sh" "$tmp/build" \
		>"$tmp/out" 2>&1 || rc=$?
	if [ "$rc" -ne 77 ]; then
		echo "FAIL: exit $rc, not 77, with nvidia-smi: $stub"
		cat "$tmp/out"
		exit 1
	fi
	if [ "$(wc -l <"$tmp/out")" -ne 1 ] ||
		! grep -q '^gpu-check: no NVIDIA GPU' "$tmp/out"; then
		echo "FAIL: not the one line expected, with nvidia-smi: $stub"
		cat "$tmp/out"
		exit 1
	fi
	if [ -e "$tmp/build" ]; then
		echo "FAIL: a build folder was made without a GPU"
		exit 1
	fi
done
echo "gpu-check skips with one line: $(cat "$tmp/out")"
