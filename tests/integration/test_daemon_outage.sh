#!/usr/bin/env bash
# test_daemon_outage.sh OUTAGE_S KILLS: bellowsd killed with SIGKILL KILLS
# times in one run and kept down OUTAGE_S seconds each time, many windows
# long, then restarted on the same database and endpoints. The ranks train
# on; their agents keep every report bellowsd has not recorded (within
# keep_reports_mb) and send them again to the new instance, which records
# the windows it had not closed late, in order, without deciding on them:
# every window of the run, 0..N-1, is in the history with every layer and
# the report of every rank, the late ones marked late and answered by no
# decision, every other one by its decision. Cost: KILLS * (OUTAGE_S + 3)
# seconds and some.
#
# test_daemon_outage.sh OUTAGE_S KILLS again: the last rank is killed
# (by the sim) just after the first kill of bellowsd and is down until
# after the restart, so the late windows wait for it while live windows
# close without it (a short window_timeout_ms) and are recorded above
# them; bellowsd is then killed a second time, as soon as a window is
# missing below a newer one recorded (or 3 s after each restart), and
# restarted at once. The other ranks' agents still keep the reports of
# the missing windows, and the next instance takes them late again from
# the mark the store kept (runs.windows_closed): every window once, the
# late ones marked late, those the killed rank's lost reports belonged
# to recorded without them.
. "$(dirname "$0")/lib.sh"

command -v sqlite3 >/dev/null || { echo "sqlite3 not installed"; exit 77; }

OUTAGE_S=${1:-2}
KILLS=${2:-5}
AGAIN=0
SIM_KILL=()
if [ "${3:-}" = again ]; then
	AGAIN=1
	WINDOW_TIMEOUT_MS=300
	SIM_KILL=(--kill "$((4 - 1)):3" --down-ms "$(((OUTAGE_S + 4) * 1000))")
fi
DB="$TMP/history.db"
# Ranks must be back after each restart before bellowsd gives up on them:
# ZeroMQ reconnects within 2 s, the Hello is retried every second.
RANK_TIMEOUT_MS=8000
RANKS=4
LAYERS=4
STEPS=5
# Windows of a tenth of the outage (at most a second): each outage spans
# more windows than bellowsd aggregates at once (8), so a restarted one
# finds the ranks past the windows it had not closed. The run outlasts
# the kills: each takes the outage, the ranks' return and two windows.
WINDOW_MS=$((OUTAGE_S * 100))
[ "$WINDOW_MS" -le 1000 ] || WINDOW_MS=1000
STEP_MS=$((WINDOW_MS / STEPS))
WINDOWS=$((KILLS * ((OUTAGE_S + 3 + 4 * AGAIN) * 1000 / WINDOW_MS) + 12))

q() { sqlite3 -batch -noheader "$DB" "$1"; }

# closed: windows recorded so far (0 while the file is being created).
closed() {
	q "SELECT count(*) FROM window_info" 2>/dev/null || echo 0
}

start_daemon
"$BELLOWS" sim --control "$CTL" --publish "$PUB" --quiet --job outage \
    --ranks "$RANKS" --layers "$LAYERS" --windows "$WINDOWS" \
    --steps-per-window "$STEPS" --step-ms "$STEP_MS" \
    --decision-timeout-ms 1000 "${SIM_KILL[@]}" >"$TMP/sim.out" \
    2>"$TMP/sim.err" &
SIM=$!
ok "$RANKS ranks, $WINDOWS windows of about $WINDOW_MS ms"

# Each kill comes once two more windows are recorded than at the one
# before (after a restart: once the late ones and two live ones are).
n=0
open_at_kill=0
for k in $(seq 1 "$KILLS"); do
	target=$((n + 2))
	for _ in $(seq 1 3000); do
		n=$(closed)
		[ "${n:-0}" -ge "$target" ] && break
		sleep 0.02
	done
	[ "${n:-0}" -ge "$target" ] ||
	    fail "kill $k: only ${n:-0} windows recorded within 60 s"
	[ "$n" -lt "$WINDOWS" ] ||
	    fail "kill $k: the run ended before it ($n windows recorded)"
	kill_daemon KILL
	sleep "$OUTAGE_S"
	ok "kill $k: bellowsd killed after $n windows were recorded, down $OUTAGE_S s"
	start_daemon
	[ "$AGAIN" = 1 ] || continue
	base=$n
	deadline=$((SECONDS + 3))
	while [ "$SECONDS" -le "$deadline" ]; do
		read -r n hi <<<"$(q "SELECT count(*), ifnull(max(window), -1)
		    FROM window_info" 2>/dev/null | tr '|' ' ')"
		[ "${n:-0}" -gt "$base" ] && [ "$n" -lt $((hi + 1)) ] && break
		sleep 0.02
	done
	kill_daemon KILL
	open=$(((hi + 1) - n))
	[ "$open" -gt 0 ] && open_at_kill=$((open_at_kill + 1))
	ok "kill $k again: bellowsd killed with $open windows below window $hi not recorded"
	start_daemon
done
wait "$SIM"
rc=$?
# The ranks gave up the decisions of the windows bellowsd was down for:
# the sim says so, and exits 1, but trained on through every outage.
[ "$rc" -le 1 ] || fail "sim exited with $rc"
"$BELLOWS" status --control "$CTL" >"$TMP/status.out" || fail "status failed"
kill_daemon TERM

RECOVERIES=$((KILLS * (1 + AGAIN)))
[ "$(q "SELECT count(*) || ':' || max(recoveries) FROM runs")" = "1:$RECOVERIES" ] ||
    fail "not one run recovered $RECOVERIES times: $(q "SELECT id, recoveries FROM runs")"
ok "one run, recovered from the database after each of the $RECOVERIES kills"
if [ "$AGAIN" = 1 ]; then
	[ "$open_at_kill" -ge 1 ] ||
	    fail "no second kill came with late windows missing below a newer one"
	ok "$open_at_kill of $KILLS second kills came with late windows missing below a newer one"
fi

# Every window, once, with its layers and every rank's report.
read -r n lo hi distinct <<<"$(q "SELECT count(*), min(window), max(window),
    count(DISTINCT window) FROM window_info" | tr '|' ' ')"
[ "$n:$lo:$hi:$distinct" = "$WINDOWS:0:$((WINDOWS - 1)):$WINDOWS" ] ||
    fail "window_info holds $n rows of windows $lo..$hi ($distinct distinct), expected 0..$((WINDOWS - 1)): missing $(q "WITH RECURSIVE w(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM w WHERE i < $((WINDOWS - 1))) SELECT group_concat(i, ' ') FROM w WHERE i NOT IN (SELECT window FROM window_info)")"
ok "$WINDOWS of $WINDOWS windows recorded"
full=$(q "SELECT count(*) FROM (SELECT window FROM windows GROUP BY window
    HAVING count(*) = $LAYERS AND count(DISTINCT layer) = $LAYERS)")
[ "$full" = "$WINDOWS" ] ||
    fail "only $full of $WINDOWS windows have their $LAYERS layers recorded"
missing=$(q "SELECT group_concat(window || ':' || ranks_reported, ' ') FROM
    window_info WHERE ranks_reported <> $RANKS")
if [ "$AGAIN" = 1 ]; then
	# The killed rank's reports of the windows it was down for died
	# with it, and live windows closed by the short timeout lack the
	# reports that came later: what counts here is that every window
	# is recorded once.
	ok "every window holds its $LAYERS layers (windows:ranks short of $RANKS: ${missing:-none})"
else
	[ -z "$missing" ] ||
	    fail "windows recorded without every rank's report (window:ranks): $missing"
	timings=$(q "SELECT count(*) FROM (SELECT DISTINCT window, rank FROM timings)")
	# A window's timings rows commit with it: a kill loses none of them.
	[ "$timings" = "$((WINDOWS * RANKS))" ] ||
	    fail "$timings of $((WINDOWS * RANKS)) (window, rank) timings recorded"
	ok "every window holds its $LAYERS layers and the reports and timings of all $RANKS ranks"
fi

# The outages' windows are late, with no decision; the others decided.
late=$(q "SELECT count(*) FROM window_info WHERE late = 1")
[ "$late" -ge "$KILLS" ] ||
    fail "only $late windows recorded late over $KILLS outages of $OUTAGE_S s"
decided_late=$(q "SELECT count(*) FROM decisions d JOIN window_info w ON
    w.run_id = d.run_id AND d.window = w.window + 1 WHERE w.late = 1 AND
    d.source = 'window'")
[ "$decided_late" = 0 ] ||
    fail "$decided_late late windows are answered by a decision"
undecided=$(q "SELECT group_concat(window, ' ') FROM window_info w WHERE
    late = 0 AND NOT EXISTS (SELECT 1 FROM decisions d WHERE d.run_id =
    w.run_id AND d.source = 'window' AND d.window = w.window + 1)")
[ -z "$undecided" ] ||
    fail "windows recorded on time without their decision: $undecided"
ok "$late windows recorded late, none decided; the $((WINDOWS - late)) others each with its decision"
grep -q "windows .* to be recorded late\|recording them late" "$TMP/bellowsd.log" ||
    fail "bellowsd did not say it records windows late"

# bellows history shows every window, and which were late.
"$BELLOWS" history windows --db "$DB" --job outage --format csv \
    >"$TMP/windows.csv" 2>"$TMP/history.err" ||
    fail "bellows history windows failed: $(cat "$TMP/history.err")"
listed=$(tail -n +2 "$TMP/windows.csv" | cut -d, -f1 | tr '\n' ' ')
expected=$(seq 0 $((WINDOWS - 1)) | tr '\n' ' ')
[ "$listed" = "$expected" ] ||
    fail "bellows history lists windows '$listed', expected '$expected'"
ok "bellows history windows lists every window 0..$((WINDOWS - 1))"
# ... and which of them were late, as window_info says, in CSV and JSON.
want_late=$(q "SELECT group_concat(window, ' ') FROM (SELECT window FROM
    window_info WHERE late = 1 ORDER BY window)")
csv_late=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "late") c = i; next }
    c && $c == 1 { printf "%s%s", s, $1; s = " " }' "$TMP/windows.csv")
[ "$csv_late" = "$want_late" ] ||
    fail "bellows history windows (CSV) lists late windows '$csv_late', window_info '$want_late'"
"$BELLOWS" history windows --db "$DB" --job outage --format json \
    >"$TMP/windows.json" 2>"$TMP/history.err" ||
    fail "bellows history windows --format json failed: $(cat "$TMP/history.err")"
json_late=$(python3 -c 'import json, sys
print(" ".join(str(w["window"]) for w in json.load(open(sys.argv[1])) if w["late"] == 1))' \
    "$TMP/windows.json") || fail "bellows history windows printed no valid JSON"
[ "$json_late" = "$want_late" ] ||
    fail "bellows history windows (JSON) lists late windows '$json_late', window_info '$want_late'"
ok "bellows history windows marks the $late late windows late, in CSV and JSON"
