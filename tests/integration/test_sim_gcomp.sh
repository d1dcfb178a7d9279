#!/usr/bin/env bash
# test_sim_gcomp: the gcomp policy builds exponent tables from the
# histograms 4 `bellows sim` ranks report (--exp-hist), through a real
# bellowsd. Every rank must hold the same codec table at every step (the
# sim checks each step's table like its decision), the tables must change
# (versions 1, 2, ... as the gradients' scale moves), the history must keep
# the summed histograms, and `bellows replay --db` must rebuild the same
# tables from the recorded windows.
. "$(dirname "$0")/lib.sh"

cat >"$TMP/policy.yaml" <<YAML
daemon:
  apply_lag: 1
  window_timeout_ms: 3000
  rank_timeout_ms: 1500
  heartbeat_ms: 200
jobs:
  - match: "*"
    policies:
      - type: gcomp
        name: tables
        params:
          every_steps: 40
          rebuild_bits: 0.5
YAML

DB="$TMP/history.db"
start_daemon
"$BELLOWS" sim --control "$CTL" --publish "$PUB" --job gc --ranks 4 \
    --layers 6 --windows 16 --steps-per-window 10 --exp-hist \
    >"$TMP/sim.out" 2>"$TMP/sim.err" ||
	{ tail -n 20 "$TMP/sim.out" "$TMP/sim.err"; fail "sim exited with $?"; }
expect_agreed 4 16
ok "4 ranks applied every decision and held the same codec table at every step"

versions=$(grep -o 'table_version=[0-9]*' "$TMP/sim.out" | cut -d= -f2 | sort -un)
first=$(echo "$versions" | head -n 1)
last=$(echo "$versions" | tail -n 1)
[ "$first" = 1 ] || fail "the first table applied is version '$first', not 1"
[ "${last:-0}" -ge 2 ] || fail "no table switch: versions '$versions'"
[ "$(echo "$versions" | wc -l)" -eq "$last" ] ||
	fail "table versions skip: '$versions'"
ok "tables v1..v$last switched at the same step on every rank"
grep -q 'reason=.*bits/exponent.*entropy' "$TMP/sim.out" ||
	fail "no reason with bits per exponent and entropy"
ok "the reasons give bits per exponent against the entropy"

kill_daemon TERM
blobs=$(sqlite3 "$DB" "SELECT count(*) FROM windows WHERE length(exp_hist) = 2048" 2>/dev/null ||
	python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT count(*) FROM windows WHERE length(exp_hist) = 2048').fetchone()[0])" "$DB")
# 16 windows x the 5 weight matrices of 6 layers (layer3 is a bias).
[ "$blobs" -eq 80 ] || fail "$blobs windows rows hold a histogram, not 80"
ok "the history keeps the 80 summed histograms"

"$BELLOWS" replay --policy "$TMP/policy.yaml" --db "$DB" \
    >"$TMP/replay.csv" 2>"$TMP/replay.err" ||
	{ cat "$TMP/replay.err"; fail "replay exited with $?"; }
cat "$TMP/replay.err"
grep -Eq 'codec tables: 0 of 16 windows differ; table changes: recorded ([1-9][0-9]*), replayed \1$' \
    "$TMP/replay.err" || fail "replay's codec tables differ from the run's"
ok "bellows replay --db rebuilds the same tables"
exit 0
