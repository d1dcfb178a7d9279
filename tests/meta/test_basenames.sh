#!/usr/bin/env bash
# test_basenames.sh - no two production source files share a basename.
#
#   tests/meta/test_basenames.sh [SOURCE_ROOT]
#
# The .c, .h and .cu files under the modules (agent, common, policyhost,
# controller, policies, tools, dashboards, kernels, history, client) are the
# production sources: a basename names one of them, so that a bare name in
# a document, a log line or a backtrace is unambiguous (the style's "a
# file's basename is unique in the tree"; test_doc_paths.sh relies on it).
# Prints each basename held by more than one file with its paths, then
# their count; exits 1 if there is one.
set -euo pipefail

root=${1:-${BELLOWS_SOURCE_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}}
cd "$root"

declare -A paths=()
n_files=0
while IFS= read -r -d '' file; do
	file=${file#./}
	name=${file##*/}
	paths[$name]+="${paths[$name]:+ }$file"
	n_files=$((n_files + 1))
done < <(find agent common policyhost controller policies tools dashboards \
    kernels history client -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) \
    -print0 | sort -z)

n_dups=0
while IFS= read -r name; do
	read -ra files <<<"${paths[$name]}"
	if [ "${#files[@]}" -gt 1 ]; then
		echo "$name: ${files[*]}" >&2
		n_dups=$((n_dups + 1))
	fi
done < <(printf '%s\n' "${!paths[@]}" | sort)

if [ "$n_dups" != 0 ]; then
	echo "test_basenames: $n_dups basenames are held by more than one of $n_files production files" >&2
	exit 1
fi
echo "test_basenames: $n_files production files, each basename once"
