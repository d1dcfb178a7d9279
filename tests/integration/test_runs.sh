#!/usr/bin/env bash
# A job name is a label, a run one launch of it: bellowsd starts a new run
# for a relaunch after a clean end, after SIGKILLed ranks (once the old
# ranks are gone), and after its own restart on the same database; a
# launch that resumes from a checkpoint continues the recorded run, its
# later windows superseded and kept.
. "$(dirname "$0")/lib.sh"

DB="$TMP/runs.db"
SIM_ARGS=(--ranks 3 --layers 4 --windows 12 --steps-per-window 5
    --decision-timeout-ms 3000)

# q SQL: one value from the history.
q() {
	sqlite3 -batch -noheader "file:$DB?mode=ro" "$1" ||
	    fail "sqlite3 cannot read $DB: $1"
}

# expect_run N JOB: the job's newest run has id N and all 12 windows and
# every rank's timings recorded.
expect_run() {
	local id windows timings
	id=$(q "SELECT max(id) FROM runs WHERE job = '$2'")
	[ "$id" = "$1" ] || fail "job '$2': newest run is '$id', expected $1"
	windows=$(q "SELECT count(*) FROM window_info WHERE run_id = $1")
	timings=$(q "SELECT count(DISTINCT window || '/' || rank) FROM timings WHERE run_id = $1")
	[ "$windows" = 12 ] && [ "$timings" = 36 ] ||
	    fail "run $1 recorded $windows windows and $timings timings (12, 36 expected)"
	ok "run $1 of job '$2' recorded all 12 windows of 3 ranks"
}

# kill_launch JOB: starts a launch of JOB in its own process group and
# SIGKILLs it with all its ranks once two of its windows are recorded.
kill_launch() {
	local pid pgid
	setsid "$BELLOWS" sim --control "$CTL" --publish "$PUB" --quiet \
	    --job "$1" --step-ms 20 "${SIM_ARGS[@]}" \
	    >"$TMP/$1.out" 2>&1 &
	pid=$!
	for _ in $(seq 1 200); do
		[ "$(q "SELECT count(*) FROM window_info w JOIN runs r ON r.id = w.run_id WHERE r.job = '$1'")" -ge 2 ] && break
		sleep 0.05
	done
	pgid=$(ps -o pgid= -p "$pid" | tr -d ' ')
	[ -n "$pgid" ] || fail "the first launch of '$1' is not running"
	kill -KILL -- "-$pgid"
	wait "$pid" 2>/dev/null
	ok "the first launch of '$1' SIGKILLed with all its ranks"
}

start_daemon

# 1. The same job run again from step 0 after a clean end: a new run.
run_sim --job again "${SIM_ARGS[@]}" || fail "first sim exited with $?"
expect_agreed 3 12
run_sim --job again "${SIM_ARGS[@]}" || fail "second sim exited with $?"
expect_agreed 3 12
expect_run 2 again
grep -q "launch '.*' started run 2 after run 1" "$TMP/bellowsd.log" ||
    fail "bellowsd did not log the new run"
ok "a rerun after a clean end is a new run with its own decisions"

# 2. Ranks SIGKILLed mid-run (a preemption) and relaunched: the new launch
# is refused while the old ranks count as alive, then admitted.
kill_launch preempted
run_sim --job preempted "${SIM_ARGS[@]}" ||
    fail "the relaunch exited with $?"
expect_agreed 3 12
"$BELLOWS" status --control "$CTL" --job preempted >"$TMP/status.out" ||
    fail "status failed"
grep -q "run_refused.*launch '.*' refused: launch '.*' (run 3) still has" \
    "$TMP/status.out" ||
    fail "no run_refused event: the relaunch was never told the old run had ranks"
expect_run 4 preempted
[ "$(q "SELECT ended_wall_ms IS NOT NULL FROM runs WHERE id = 3")" = 1 ] ||
    fail "the preempted run 3 was not ended"
ok "a relaunch after SIGKILLed ranks waits for them, then runs anew"

# 3. Ranks and bellowsd both SIGKILLed, bellowsd restarted on the same
# database: the relaunch (a new launch) is a new run there too.
kill_launch crashed
kill_daemon KILL
start_daemon
grep -q "job 'crashed' recovered from the database" "$TMP/bellowsd.log" ||
    fail "the restarted bellowsd did not recover job 'crashed'"
run_sim --job crashed "${SIM_ARGS[@]}" ||
    fail "the relaunch after the restart exited with $?"
expect_agreed 3 12
expect_run 6 crashed
ok "after a restart of bellowsd the relaunch is a new run"

# 4. A resume from a checkpoint at window 5 continues run 2 of 'again':
# windows 5.. superseded (kept), decisions go on after the run's last.
last_seq=$(q "SELECT max(seq) FROM decisions WHERE run_id = 2")
run_sim --job again --start-window 5 --resume "${SIM_ARGS[@]}" ||
    fail "the resume exited with $?"
expect_agreed 3 12
[ "$(q "SELECT count(*) FROM runs WHERE job = 'again'")" = 2 ] ||
    fail "the resume started a run of its own"
[ "$(q "SELECT resumes FROM runs WHERE id = 2")" = 1 ] ||
    fail "run 2 does not count the resume"
[ "$(q "SELECT count(*) || ',' || min(window) || ',' || max(window) FROM superseded_window_info WHERE run_id = 2 AND resume = 1")" = "7,5,11" ] ||
    fail "windows 5..11 of run 2 were not superseded: $(q "SELECT count(*), min(window), max(window) FROM superseded_window_info WHERE run_id = 2")"
expect_run 2 again
first=$(q "SELECT min(seq) FROM decisions WHERE run_id = 2 AND source = 'resumed'")
[ -n "$first" ] && [ "$first" -gt "$last_seq" ] ||
    fail "the resumed decisions start at '$first', not after $last_seq"
[ "$(q "SELECT count(*) FROM decisions WHERE run_id = 2 AND window > 5 AND seq < $first")" = 0 ] ||
    fail "decisions answering superseded windows are still in the run"
grep -q "resumes run 2 at window 5" "$TMP/bellowsd.log" ||
    fail "bellowsd did not log the resume"
ok "a resume continues the recorded run: decisions from #$first, windows 5..11 superseded"

# 5. After a restart of bellowsd, which holds no job 'again' any more (its
# run ended), a resume finds the run in the history by name.
kill_daemon TERM
start_daemon
run_sim --job again --start-window 8 --resume "${SIM_ARGS[@]}" ||
    fail "the resume after the restart exited with $?"
expect_agreed 3 12
[ "$(q "SELECT count(*) FROM runs WHERE job = 'again'")" = 2 ] &&
    [ "$(q "SELECT resumes FROM runs WHERE id = 2")" = 2 ] ||
    fail "the resume after the restart did not continue run 2"
[ "$(q "SELECT count(*) FROM superseded_window_info WHERE run_id = 2 AND resume = 2")" = 4 ] ||
    fail "windows 8..11 were not superseded by the second resume"
expect_run 2 again
ok "after a restart a resume continues the run the history holds"
