#!/usr/bin/env bash
# stats_pass.sh - callgrind's instruction counts of one rank's statistics
# pass with the window accumulator (an `accordion` policy reads acc_norm)
# and without (under `fixed` none does), for 4 x Linear(1024, 1024) and
# 200 x Linear(64, 64), through a private bellowsd (bench/stats_pass.c).
#
#   bench/stats_pass.sh [BUILD] [STEPS]
#
# Prints one line per run: shape, job, accumulators, instructions per step.
set -euo pipefail

build=${1:-build}
steps=${2:-20}
tmp=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
cat >"$tmp/policy.yaml" <<'YAML'
daemon:
  apply_lag: 1
jobs:
  - match: "withacc*"
    policies:
      - type: accordion
        params: {critical_level: 0, stable_level: 0}
  - match: "*"
    policies:
      - type: fixed
        params: {level: 0}
YAML
"$build/controller/bellowsd" --control "ipc://$tmp/c" --publish "ipc://$tmp/p" \
    --policy "$tmp/policy.yaml" --no-db >"$tmp/bellowsd.log" 2>&1 &
pid=$!
sleep 1
for shape in "4 1024" "200 64"; do
	set -- $shape
	for job in "withacc-$1" "noacc-$1"; do
		valgrind --tool=callgrind --collect-atstart=no \
		    --callgrind-out-file="$tmp/cg.out" \
		    "$build/bench/stats_pass" "ipc://$tmp/c" "ipc://$tmp/p" \
		    "$job" "$1" "$2" "$steps" >"$tmp/out" 2>"$tmp/err"
		n=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$tmp/err")
		acc=$(sed -n 's/.*, \([0-9]*\) with an accumulator.*/\1/p' \
		    "$tmp/out")
		echo "$1 x Linear($2, $2): $job: $acc accumulators," \
		    "$((n / steps)) instructions per step"
	done
done
