#!/usr/bin/env bash
# test_function_length.sh - no production C function outside kernels/ is
# over the length limit.
#
#   tests/meta/test_function_length.sh [SOURCE_ROOT] [LIMIT]
#
# A production function is one in a .c file under the modules agent,
# common, controller, policyhost, policies, tools, dashboards, history and
# client; kernels/ is left out (its loops are unrolled for speed and read
# against the papers they implement), and so are generated files (the
# protobuf-c output and any file whose head says DO NOT EDIT). In the
# project's style a definition starts with the return type on a line of
# its own and then `name(` at column 0, and ends at the first `}` at
# column 0; its length counts both lines and those between. A function
# longer than LIMIT (default 120) lines is printed with its file, line and
# length, longest first; the script exits 1 if there is one.
set -euo pipefail

root=${1:-${BELLOWS_SOURCE_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}}
limit=${2:-120}
cd "$root"

files=()
while IFS= read -r -d '' file; do
	file=${file#./}
	if head -n 5 "$file" | grep -q 'DO NOT EDIT'; then
		continue
	fi
	files+=("$file")
done < <(find agent common controller policyhost policies tools dashboards \
    history client -type f -name '*.c' ! -name '*.pb-c.c' ! -path '*/tests/*' \
    ! -name 'test_*' -print0 | sort -z)

# One line per function: "length file:line name".
report=$(awk -v limit="$limit" '
	FNR == 1 { name = ""; prev = "" }
	name == "" && /^[A-Za-z_][A-Za-z0-9_]*\(/ && prev ~ /^[A-Za-z_]/ &&
	    prev !~ /[;,]$/ && prev !~ /^#/ {
		name = $0; sub(/\(.*/, "", name); start = FNR
	}
	name != "" && /^}/ {
		len = FNR - start + 1
		if (len > limit)
			printf "%d %s:%d %s\n", len, FILENAME, start, name
		name = ""
	}
	{ prev = $0 }
' "${files[@]}" | sort -rn)

if [ -n "$report" ]; then
	n=0
	while read -r len where fn; do
		echo "$where: $fn is $len lines (limit $limit)" >&2
		n=$((n + 1))
	done <<<"$report"
	echo "test_function_length: $n functions over $limit lines in ${#files[@]} production files" >&2
	exit 1
fi
echo "test_function_length: ${#files[@]} production files, no function over $limit lines"
