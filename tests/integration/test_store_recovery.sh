#!/usr/bin/env bash
# bellowsd killed with SIGKILL during an 8-rank run under accordion
# (interval 2) and restarted on the same history database: it rebuilds the
# job from the database, not from the ranks' Hellos; no decision committed
# before the crash is lost or changed; the sequence continues in the same
# run; every decision a rank applied is in the database; the ranks agree
# on every step; and the first accordion check after the restart compares
# with a window closed before the crash (the replayed history), not
# "no norm".
. "$(dirname "$0")/lib.sh"

command -v sqlite3 >/dev/null || { echo "sqlite3 not installed"; exit 77; }

DB="$TMP/history.db"
WINDOWS=24
cat >"$TMP/policy.yaml" <<YAML
daemon:
  apply_lag: 1
  window_timeout_ms: 3000
  rank_timeout_ms: 3000
  heartbeat_ms: 200
jobs:
  - match: "*"
    policies:
      - type: accordion
        layers: {min_ndim: 2}
        params: {critical_level: 2, stable_level: 1, eta: 0.5, interval: 2}
YAML

q() { sqlite3 -batch -noheader "$DB" "$1"; }

start_daemon
# Rank 0 prints every decision it applies (no --quiet).
"$BELLOWS" sim --control "$CTL" --publish "$PUB" --job acc --ranks 8 \
    --layers 4 --windows "$WINDOWS" --steps-per-window 20 --step-ms 25 \
    --decision-timeout-ms 3000 >"$TMP/sim.out" 2>"$TMP/sim.err" &
SIM=$!

# Kill once a few windows, and accordion checks, are committed.
for _ in $(seq 1 200); do
	n=$(q "SELECT count(*) FROM decisions" 2>/dev/null || echo 0)
	[ "${n:-0}" -ge 7 ] && break
	sleep 0.05
done
[ "${n:-0}" -ge 7 ] || fail "no decisions were committed (${n:-0})"
kill_daemon KILL
ok "bellowsd killed with SIGKILL after $n decisions were committed"

before=$(q "SELECT seq || ':' || apply_step || ':' || hex(levels) FROM
    decisions ORDER BY seq")
max_before=$(q "SELECT max(seq) FROM decisions")
crash_window=$(q "SELECT max(window) FROM window_info")
ok "at the crash: decisions 1..$max_before, last window closed $crash_window"

start_daemon
ok "bellowsd restarted on the same database"
wait "$SIM" || fail "sim exited with $?"
expect_agreed 8 "$WINDOWS"
kill_daemon TERM

grep -q "job 'acc' recovered from the database" "$TMP/bellowsd.log" ||
    fail "the new bellowsd did not recover the job from the database"
grep -q "job 'acc' resumed at decision" "$TMP/bellowsd.log" &&
    fail "the new bellowsd adopted the ranks' decision instead"
ok "the job was recovered from the database, not adopted from the ranks"

[ "$(q "SELECT count(*) FROM runs WHERE job = 'acc'")" = 1 ] ||
    fail "the restart started another run"
[ "$(q "SELECT recoveries FROM runs WHERE job = 'acc'")" = 1 ] ||
    fail "runs.recoveries is not 1"
ok "one run, recovered once"

now=$(q "SELECT seq || ':' || apply_step || ':' || hex(levels) FROM
    decisions WHERE seq <= $max_before ORDER BY seq")
[ "$before" = "$now" ] || fail "decisions committed before the crash changed"
ok "all $max_before decisions committed before the crash are intact"

read -r count lo hi <<<"$(q "SELECT count(*), min(seq), max(seq) FROM
    decisions" | tr '|' ' ')"
[ "$lo" = 1 ] && [ "$count" = "$hi" ] ||
    fail "seqs are not consecutive from 1: $count decisions, $lo..$hi"
[ "$hi" -gt "$max_before" ] || fail "no decision after the restart"
ok "seqs 1..$hi are consecutive across the crash (continued at $((max_before + 1)))"

applied=$(sed -n 's/^step [0-9]*: decision #\([0-9]*\) .*/\1/p' \
    "$TMP/sim.out" | sort -un)
[ -n "$applied" ] || fail "the sim printed no applied decision"
for s in $applied; do
	[ "$(q "SELECT count(*) FROM decisions WHERE seq = $s")" = 1 ] ||
	    fail "decision $s was applied by the ranks but is not in the database"
done
ok "every decision the ranks applied ($(echo "$applied" | wc -l)) is in the database"

check=$(q "SELECT (window - 1) || '|' || reason FROM decisions WHERE
    source = 'window' AND seq > $max_before AND
    reason LIKE 'window % vs window %' ORDER BY seq LIMIT 1")
[ -n "$check" ] || fail "no accordion check after the restart"
at=${check%%|*}
reason=${check#*|}
compared=$(echo "$reason" | sed -n 's/^window [0-9]* vs window \([0-9]*\) .*/\1/p')
echo "first check after the restart: window $at: $reason"
[ -n "$compared" ] || fail "cannot read the compared window in '$reason'"
[ "$compared" -le "$crash_window" ] ||
    fail "the first check (window $at) compared with window $compared, closed after the crash"
case "$reason" in
*"no norm"* | *" kept"*) fail "the first check had no norm: '$reason'" ;;
esac
[ "$(q "SELECT count(*) FROM windows WHERE window = $compared")" = 4 ] ||
    fail "window $compared does not have its 4 layers in the database"
ok "the first check after the restart (window $at) compared with window $compared, closed before the crash"
