#!/usr/bin/env bash
# bellows replay reproduces bellowsd: 4 sim ranks run an accordion job
# against a real daemon while rank 0 records each window's gradient norms
# and LR (the replay's input) and the levels bellowsd decided for each
# window; replaying the recorded metrics through the same policy file must
# give the same level for every layer in every window the daemon decided,
# and the run must have changed level at least once, so that a broken rule
# cannot pass by deciding nothing.
. "$(dirname "$0")/lib.sh"

JOB=identity
cat >"$TMP/policy.yaml" <<YAML
daemon:
  apply_lag: 1
  window_timeout_ms: 3000
  rank_timeout_ms: 1500
  heartbeat_ms: 200
jobs:
  - match: "$JOB"
    policies:
      - type: accordion
        params:
          interval: 2
          eta: 0.3
          critical_level: 2
          stable_level: 1
YAML

start_daemon
run_sim --job "$JOB" --ranks 4 --layers 6 --windows 24 \
    --steps-per-window 5 --record-metrics "$TMP/m.csv" \
    --record-levels "$TMP/daemon.csv" || fail "sim exited with $?"
expect_agreed 4 24

"$BELLOWS" replay --policy "$TMP/policy.yaml" --metrics "$TMP/m.csv" \
    --job "$JOB" >"$TMP/replay.csv" 2>"$TMP/replay.err" ||
    { cat "$TMP/replay.err"; fail "replay exited with $?"; }
[ ! -s "$TMP/replay.err" ] || { cat "$TMP/replay.err"; fail "replay warned"; }

metric_windows=$(awk -F, 'NR > 1 { w[$1] = 1 } END { print length(w) }' \
    "$TMP/m.csv")
[ "$metric_windows" -eq 24 ] ||
    fail "rank 0 recorded $metric_windows windows of metrics, not 24"
ok "rank 0 recorded the metrics of all 24 windows"

# Numbers are the shortest text that reads back as the double: sim's
# first LR is 0.1, written "0.1", not "0.10000000000000001".
lr0=$(awk -F, '$1 == "0" { print $4; exit }' "$TMP/m.csv")
[ "$lr0" = 0.1 ] || fail "window 0's LR is written '$lr0', not '0.1'"
ok "the LR of window 0 is written as 0.1"

daemon_windows=$(awk -F, 'NR > 1 { w[$1] = 1 } END { print length(w) }' \
    "$TMP/daemon.csv")
[ "$daemon_windows" -ge 20 ] ||
    fail "rank 0 saw the decisions of only $daemon_windows windows"
ok "rank 0 recorded bellowsd's levels for $daemon_windows windows"

# Every (window, layer) of daemon.csv must be in replay.csv with the same
# level; prints the first difference.
awk -F, '
	FNR == 1 { next }
	NR == FNR { level[$1 "," $2] = $3; next }
	{
		key = $1 "," $2
		compared++
		if (!(key in level)) {
			print "window " $1 " layer " $2 \
			    ": bellowsd decided " $3 ", replay has no row"
			exit 1
		}
		if (level[key] != $3) {
			print "window " $1 " layer " $2 ": bellowsd decided " \
			    $3 ", replay says " level[key]
			exit 1
		}
	}
	END { if (compared == 0) { print "nothing compared"; exit 1 } }
' "$TMP/replay.csv" "$TMP/daemon.csv" >"$TMP/diff.out" ||
    fail "replay differs from bellowsd: $(cat "$TMP/diff.out")"
rows=$(($(wc -l <"$TMP/daemon.csv") - 1))
ok "replay gives bellowsd's level in all $rows (window, layer) rows"

# Changes of level from one window to the next, per layer, as bellowsd
# decided them.
changes=$(awk -F, '
	NR > 1 {
		if (($2 in last) && last[$2] != $3)
			n++
		last[$2] = $3
	}
	END { print n + 0 }
' "$TMP/daemon.csv")
[ "$changes" -gt 0 ] || fail "the level never changed: nothing was tested"
ok "the run changed level $changes times (layer by layer)"
echo "layer0.weight by window (bellowsd):" \
    "$(awk -F, '$2 == "layer0.weight" { printf "%s:%s ", $1, $3 }' \
    "$TMP/daemon.csv")"
