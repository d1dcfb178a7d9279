#!/usr/bin/env bash
# test_boundaries_refuses.sh - test_boundaries.sh fails on each kind of
# forbidden include, naming the file and line, and passes a tree that
# keeps the rules.
#
# Each case is a small tree in a temporary directory, made of empty
# modules and the one include under test, checked with the real script.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
check="$here/test_boundaries.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# tree DIR: the modules, each with a header, and installed headers.
tree() {
	local d=$1 m
	rm -rf "$d"
	for m in common kernels agent policies policyhost controller client \
	    dashboards tools examples; do
		mkdir -p "$d/$m"
		echo "/* $m */" >"$d/$m/$m.h"
	done
	mkdir -p "$d/common/bellows" "$d/agent/bellows" "$d/policies/bellows"
	echo '/* error */' >"$d/common/bellows/error.h"
	echo '/* agent */' >"$d/agent/bellows/agent.h"
	echo '/* policy */' >"$d/policies/bellows/policy.h"
	for m in config policy_host; do
		echo "/* $m */" >"$d/policyhost/$m.h"
	done
	for m in jobs store; do
		echo "/* $m */" >"$d/controller/$m.h"
	done
	echo '/* msg */' >"$d/common/msg.h"
}

# refused NAME FILE LINE WHY: FILE with LINE fails the check with WHY.
refused() {
	local name=$1 file=$2 line=$3 why=$4 out
	tree "$tmp/t"
	printf '/* x */\n%s\n' "$line" >"$tmp/t/$file"
	if out=$(bash "$check" "$tmp/t" 2>&1); then
		echo "FAIL: $name: passed" >&2
		fail=1
	elif ! grep -qF "$file:2: " <<<"$out" || ! grep -qF "$why" <<<"$out"; then
		echo "FAIL: $name: wrong message:" >&2
		echo "$out" >&2
		fail=1
	else
		echo "ok: $name is refused"
	fi
}

tree "$tmp/t"
cat >"$tmp/t/tools/ok.c" <<'X'
#include "tools.h"
#include "policyhost/config.h"
#include "policyhost/policy_host.h"
#include "client/client.h"
#include "dashboards/dashboards.h"
#include "common/msg.h"
#include "bellows_config.h"
#include <bellows/policy.h>
#include <stdio.h>
X
printf '#include "client/client.h"\n#include <bellows/error.h>\n' \
    >"$tmp/t/dashboards/ok.c"
printf '#include "store.h"\n#include "common/msg.h"\n' \
    >"$tmp/t/controller/jobs.c"
printf '#include "policyhost/config.h"\n' >"$tmp/t/controller/server.c"
printf '#include "config.h"\n#include <bellows/policy.h>\n' \
    >"$tmp/t/policyhost/policy_host.c"
printf '#include <bellows/policy.h>\n' >"$tmp/t/examples/ok.c"
if out=$(bash "$check" "$tmp/t" 2>&1); then
	echo "ok: a tree that keeps the rules passes"
else
	echo "FAIL: a tree that keeps the rules is refused:" >&2
	echo "$out" >&2
	fail=1
fi

refused "dashboards -> tools" dashboards/d.c '#include "tools/tools.h"' \
    "dashboards may not include tools/tools.h"
refused "dashboards -> tools by a relative path" dashboards/d.c \
    '#include "../tools/tools.h"' "dashboards may not include tools/tools.h"
refused "policies -> the policy host" policies/p.c \
    '#include "policyhost/config.h"' \
    "policies may not include policyhost/config.h"
refused "common -> anything" common/c.c '#include "kernels/kernels.h"' \
    "common may not include kernels/kernels.h"
refused "agent -> controller" agent/a.c '#include "controller/jobs.h"' \
    "agent may not include controller/jobs.h"
refused "kernels -> agent's installed header" kernels/k.c \
    '#include <bellows/agent.h>' "kernels may not include agent/bellows/agent.h"
refused "client -> tools" client/c.c '#include "tools/tools.h"' \
    "client may not include tools/tools.h"
refused "tools -> bellowsd's store" tools/t.c '#include "controller/store.h"' \
    "tools may not include controller/store.h"
refused "the policy host -> controller" policyhost/p.c \
    '#include "controller/jobs.h"' \
    "policyhost may not include controller/jobs.h"
refused "the policy host -> controller by a relative path" policyhost/p.c \
    '#include "../controller/jobs.h"' \
    "policyhost may not include controller/jobs.h"
refused "tools -> controller" tools/t.c '#include "controller/jobs.h"' \
    "tools may not include controller/jobs.h"
refused "a bare name from another module" tools/t.c '#include "msg.h"' \
    '"msg.h" is not beside tools/t.c nor a path from the source root'
refused "an example -> a module's header" examples/e.c \
    '#include "common/msg.h"' "an example includes installed headers only"

if [ "$fail" != 0 ]; then
	exit 1
fi
