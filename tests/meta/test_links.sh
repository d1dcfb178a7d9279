#!/usr/bin/env bash
# test_links.sh - the libraries are below the programs that need them:
# checked on the built binaries and archives with nm and readelf.
#
#   tests/meta/test_links.sh [BUILD_ROOT]
#
# - bellowsd defines ctl_server_* and ctl_store_open (so the symbol
#   tables are readable and a missing symbol below means something);
# - the `bellows` command line is not linked with the controller library
#   and has no symbol of bellowsd's own modules (server, store, jobs,
#   loop, reload, watch), yet has the policy host that replay and policy
#   check run;
# - the policy-host library refers to no SQLite and no symbol of those
#   modules: it is below them, not beside;
# - the dashboard's libraries refer to no ZeroMQ function: its sockets
#   are the client library's;
# - the plug-in worker needs no SQLite.
# Exits 77 (skipped) without nm or readelf.
set -euo pipefail

build=${1:-${BELLOWS_BUILD_ROOT:?BELLOWS_BUILD_ROOT or an argument}}
for tool in nm readelf; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "test_links: $tool not found, skipping"
		exit 77
	fi
done

fail=0
daemon_modules='ctl_(server|store|jobs|loop|reload|watch)_'

# check WHAT OUTPUT PATTERN: PATTERN must not match OUTPUT.
none() {
	local what=$1 out=$2 pattern=$3 hits
	hits=$(grep -E "$pattern" <<<"$out" || true)
	if [ -n "$hits" ]; then
		echo "FAIL: $what:" >&2
		head -5 <<<"$hits" >&2
		fail=1
	else
		echo "ok: $what"
	fi
}

some() {
	local what=$1 out=$2 pattern=$3
	if grep -qE "$pattern" <<<"$out"; then
		echo "ok: $what"
	else
		echo "FAIL: $what: no symbol matches $pattern" >&2
		fail=1
	fi
}

daemon=$(nm "$build/controller/bellowsd")
some "bellowsd defines the server" "$daemon" ' T ctl_server_'
some "bellowsd defines the store's open" "$daemon" ' T ctl_store_open$'

cli=$(nm "$build/tools/bellows")
none "bellows has no symbol of bellowsd's server, store, jobs, loop, reload or watch" \
    "$cli" " $daemon_modules"
some "bellows has the policy host's policy sets (replay)" "$cli" \
    ' T ctl_policy_set_run$'
some "bellows has the policy host's configuration (policy check)" "$cli" \
    ' T ctl_config_load$'

# The link line itself (ninja backend): the library is not even offered
# to the linker, so no later reference can pull an object of it in.
if [ -f "$build/build.ninja" ]; then
	none "bellows is not linked with the controller library" \
	    "$(grep -E '^build tools/bellows:' "$build/build.ninja" | tr ' ' '\n')" \
	    'libbellows_controller\.a'
fi

host=$(nm -u "$build/policyhost/libbellows_policy_host.a")
none "the policy-host library refers to no SQLite" "$host" ' sqlite3_'
none "the policy-host library refers to no module above it" "$host" \
    " $daemon_modules"

for lib in libbellows_dash_model.a libbellows_dash_top.a; do
	if [ -f "$build/dashboards/$lib" ]; then
		none "dashboards/$lib calls no ZeroMQ function" \
		    "$(nm -u "$build/dashboards/$lib")" ' zmq_'
	fi
done

none "bellows-plugin-worker needs no SQLite" \
    "$(readelf -d "$build/controller/bellows-plugin-worker")" 'libsqlite3'

if [ "$fail" != 0 ]; then
	echo "test_links: a program links more than it needs" >&2
	exit 1
fi
