#!/usr/bin/env bash
# test_boundaries.sh - fail on an include that crosses a module boundary
# the wrong way.
#
#   tests/meta/test_boundaries.sh [SOURCE_ROOT]
#
# Every #include of a module's .c, .h and .cu files is resolved as the
# compiler resolves it (a file beside the includer, else a path from the
# source root, else a header bellows generates; <bellows/...> is the
# installed header of the module whose bellows/ holds it), and its module
# is looked up in the table below: a module includes itself and those its
# row names, nothing else. A quoted include that is none of these (a bare
# name from another module: "msg.h" outside common/) fails too. The
# examples include installed headers only. docs/architecture.md shows the
# same table; change both together.
set -euo pipefail

root=${1:-${BELLOWS_SOURCE_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}}
cd "$root"

# module       what it may include besides itself
#
# policyhost is the policy host (the library bellows_policy_host), below
# bellowsd's own modules: what the command line may use of bellowsd.
declare -A allowed=(
	[common]=""
	[kernels]="common"
	[agent]="common kernels"
	[policies]="common"
	[history]="common policies"
	[policyhost]="common policies"
	[controller]="common policies history policyhost"
	[client]="common policies history"
	[dashboards]="common client"
	[tools]="common agent policies history policyhost client dashboards"
)
modules="common kernels agent policies history policyhost controller client
    dashboards tools"

# Headers generated into the build tree, and whose they are.
declare -A generated=(
	[bellows_config.h]=common
	[common/bellows.pb-c.h]=common
)

fail=0
n_files=0
n_includes=0

# The module of a path from the root.
module_of() {
	printf '%s\n' "${1%%/*}"
}

# Whether module $1 may include a file of module $2.
may_include() {
	local from=$1 to=$2 a
	if [ "$from" = "$to" ]; then
		return 0
	fi
	for a in ${allowed[$from]}; do
		if [ "$a" = "$to" ]; then
			return 0
		fi
	done
	return 1
}

complain() {
	echo "$1" >&2
	fail=1
}

check_file() {
	local file=$1 from dir lineno line kind name target to owner
	from=$(module_of "$file")
	dir=$(dirname "$file")
	n_files=$((n_files + 1))
	while IFS=: read -r lineno line; do
		n_includes=$((n_includes + 1))
		if [[ $line =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\"([^\"]+)\" ]]; then
			name=${BASH_REMATCH[1]}
			if [ -f "$dir/$name" ]; then
				target=$(realpath -m --relative-to=. "$dir/$name")
			elif [ -f "$name" ]; then
				target=$name
			elif [ -n "${generated[$name]:-}" ]; then
				target=$name
			else
				complain "$file:$lineno: \"$name\" is not beside $file nor a path from the source root: name its module (\"MODULE/$name\")"
				continue
			fi
			if [ "$from" = examples ]; then
				complain "$file:$lineno: an example includes installed headers only (<bellows/...>), not \"$name\""
				continue
			fi
			to=${generated[$target]:-$(module_of "$target")}
		elif [[ $line =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\<(bellows/[^>]+)\> ]]; then
			name=${BASH_REMATCH[1]}
			owner=""
			for m in $modules; do
				if [ -f "$m/$name" ]; then
					owner=$m
				fi
			done
			if [ -z "$owner" ]; then
				complain "$file:$lineno: <$name> is no module's installed header"
				continue
			fi
			[ "$from" = examples ] && continue
			target=$owner/$name
			to=$owner
		else
			continue
		fi
		if may_include "$from" "$to"; then
			continue
		fi
		complain "$file:$lineno: $from may not include $target (it may include: ${allowed[$from]:-nothing}; see docs/architecture.md)"
	done < <(grep -nE '^[[:space:]]*#[[:space:]]*include' "$file" || true)
}

while IFS= read -r -d '' file; do
	check_file "${file#./}"
done < <(find common kernels agent policies history policyhost controller \
    client dashboards tools examples -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) \
    -print0 | sort -z)

if [ "$fail" != 0 ]; then
	echo "test_boundaries: an include crosses a module boundary the wrong way" >&2
	exit 1
fi
echo "test_boundaries: $n_includes includes of $n_files files, each allowed"
