#!/usr/bin/env bash
# check-format.sh - fail if a C file of the tree is not clang-formatted.
#
#   scripts/check-format.sh [SOURCE_ROOT]
#
# Checks every *.c and *.h under the source folders against the committed
# .clang-format (tracked or not, as long as git does not ignore it; build
# directories and generated protobuf code are left out). Prints each
# offending file with the change clang-format wants, and exits 1 if there is
# one. Exits 77 (meson's "skipped") when clang-format is not installed.
# Registered in tests/meson.build as the test 'tree is formatted'.
set -euo pipefail

root=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
cd "$root"

clang_format=${CLANG_FORMAT:-clang-format}
if ! command -v "$clang_format" >/dev/null 2>&1; then
	echo "check-format: $clang_format not found, skipping"
	exit 77
fi
if [ ! -f .clang-format ]; then
	echo "check-format: no .clang-format in $root" >&2
	exit 1
fi

dirs=()
for d in common agent policyhost controller policies kernels client dashboards \
    tools tests bench examples; do
	[ -d "$d" ] && dirs+=("$d")
done
if [ ${#dirs[@]} -eq 0 ]; then
	echo "check-format: no source folders under $root" >&2
	exit 1
fi

mapfile -d '' files < <(find "${dirs[@]}" \
	\( -type d \( -name 'build*' -o -name '.*' \) -prune \) -o \
	\( -type f \( -name '*.c' -o -name '*.h' \) \
	   ! -name '*.pb-c.c' ! -name '*.pb-c.h' -print0 \) | sort -z)

# Leave out what git ignores (generated or scratch files), when in a work
# tree.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1 &&
    [ ${#files[@]} -gt 0 ]; then
	mapfile -d '' ignored < <(printf '%s\0' "${files[@]}" |
	    git check-ignore -z --stdin || true)
	if [ ${#ignored[@]} -gt 0 ]; then
		declare -A skip=()
		for f in "${ignored[@]}"; do
			skip[$f]=1
		done
		kept=()
		for f in "${files[@]}"; do
			[ -n "${skip[$f]:-}" ] || kept+=("$f")
		done
		files=("${kept[@]}")
	fi
fi

bad=()
for f in "${files[@]}"; do
	if ! "$clang_format" --style=file --dry-run --Werror "$f" \
	    >/dev/null 2>&1; then
		bad+=("$f")
	fi
done

echo "check-format: ${#files[@]} files checked, ${#bad[@]} not formatted"
if [ ${#bad[@]} -eq 0 ]; then
	exit 0
fi
for f in "${bad[@]}"; do
	echo "not formatted: $f"
	"$clang_format" --style=file "$f" | diff -u "$f" - | head -n 60 || true
done
echo "fix with: clang-format -i ${bad[*]}"
exit 1
