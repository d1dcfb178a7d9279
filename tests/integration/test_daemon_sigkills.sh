#!/usr/bin/env bash
# bellowsd killed with SIGKILL five times in one run, each time while
# windows are in flight, and restarted each time on the same database and
# endpoints: the agents keep the reports bellowsd has not durably recorded
# and send them again to the new instance, which takes each (rank, window)
# once, so every window of the run, 0..N-1, is in the history with every
# layer and the report of every rank.
. "$(dirname "$0")/lib.sh"

command -v sqlite3 >/dev/null || { echo "sqlite3 not installed"; exit 77; }

DB="$TMP/history.db"
# Ranks must be back after each restart before bellowsd gives up on them
# (every window is to hold every rank's report): a generous bound.
RANK_TIMEOUT_MS=5000
WINDOWS=40
RANKS=4
LAYERS=4
KILLS=5

q() { sqlite3 -batch -noheader "$DB" "$1"; }

# closed: windows recorded so far (0 while the file is being created).
closed() {
	q "SELECT count(*) FROM window_info" 2>/dev/null || echo 0
}

start_daemon
"$BELLOWS" sim --control "$CTL" --publish "$PUB" --quiet --job kills \
    --ranks "$RANKS" --layers "$LAYERS" --windows "$WINDOWS" \
    --steps-per-window 5 --step-ms 20 --decision-timeout-ms 3000 \
    >"$TMP/sim.out" 2>"$TMP/sim.err" &
SIM=$!

# Each kill comes once three more windows are recorded than at the one
# before: reports of the next windows are then on their way or waiting
# in an open window, and the decision of the last may not be committed.
n=0
for k in $(seq 1 "$KILLS"); do
	target=$((n + 3))
	for _ in $(seq 1 500); do
		n=$(closed)
		[ "${n:-0}" -ge "$target" ] && break
		sleep 0.02
	done
	[ "${n:-0}" -ge "$target" ] ||
	    fail "kill $k: only ${n:-0} windows recorded within 10 s"
	[ "$n" -lt "$WINDOWS" ] ||
	    fail "kill $k: the run ended before it ($n windows recorded)"
	kill_daemon KILL
	ok "kill $k: bellowsd killed with SIGKILL after $n windows were recorded"
	start_daemon
done
wait "$SIM" || fail "sim exited with $?"
expect_agreed "$RANKS" "$WINDOWS"
"$BELLOWS" status --control "$CTL" >"$TMP/status.out" ||
    fail "status failed"
kill_daemon TERM
sed -n 's/.*\(duplicate reports [0-9]*\).*/the last instance: \1/p' \
    "$TMP/status.out"

[ "$(grep -c "recovered from the database" "$TMP/bellowsd.log")" -ge "$KILLS" ] ||
    fail "the job was not recovered after each of the $KILLS kills"
[ "$(q "SELECT count(*) || ':' || max(recoveries) FROM runs")" = "1:$KILLS" ] ||
    fail "not one run recovered $KILLS times: $(q "SELECT id, recoveries FROM runs")"
ok "one run, recovered from the database after each of the $KILLS kills"

# bellows history sees every window.
"$BELLOWS" history windows --db "$DB" --job kills --format csv \
    >"$TMP/windows.csv" 2>"$TMP/history.err" ||
    fail "bellows history windows failed: $(cat "$TMP/history.err")"
listed=$(tail -n +2 "$TMP/windows.csv" | cut -d, -f1 | tr '\n' ' ')
expected=$(seq 0 $((WINDOWS - 1)) | tr '\n' ' ')
[ "$listed" = "$expected" ] ||
    fail "bellows history lists windows '$listed', expected '$expected'"
ok "bellows history windows lists every window 0..$((WINDOWS - 1))"

# And the database holds each with every layer and every rank's report.
read -r n lo hi distinct <<<"$(q "SELECT count(*), min(window), max(window),
    count(DISTINCT window) FROM window_info" | tr '|' ' ')"
[ "$n:$lo:$hi:$distinct" = "$WINDOWS:0:$((WINDOWS - 1)):$WINDOWS" ] ||
    fail "window_info holds $n rows of windows $lo..$hi ($distinct distinct)"
full=$(q "SELECT count(*) FROM (SELECT window FROM windows GROUP BY window
    HAVING count(*) = $LAYERS AND count(DISTINCT layer) = $LAYERS)")
[ "$full" = "$WINDOWS" ] ||
    fail "only $full of $WINDOWS windows have their $LAYERS layers recorded"
ok "every window 0..$((WINDOWS - 1)) is recorded with its $LAYERS layers"
missing=$(q "SELECT group_concat(window || ':' || ranks_reported, ' ') FROM
    window_info WHERE ranks_reported <> $RANKS")
[ -z "$missing" ] ||
    fail "windows recorded without every rank's report (window:ranks): $missing"
ok "every window holds the reports of all $RANKS ranks"
decided=$(q "SELECT count(DISTINCT window) FROM decisions WHERE
    source = 'window'")
[ "$decided" = "$WINDOWS" ] ||
    fail "$decided of $WINDOWS windows have a decision recorded"
ok "every window has its decision recorded"
