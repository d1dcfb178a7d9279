#!/usr/bin/env bash
# A resume from a checkpoint reads its run back off bellowsd's event
# loop: the resuming launch is told to retry while the run is read back
# and then continues it; STATUS is answered while a read-back is held
# for a launch that has not come back; a second resume by the same
# client meanwhile is refused with an error that says why.
. "$(dirname "$0")/lib.sh"

DB="$TMP/resume.db"
# Long enough that a read-back nobody takes stays held for the checks.
RANK_TIMEOUT_MS=30000
SIM_ARGS=(--ranks 2 --layers 4 --windows 12 --steps-per-window 5
    --decision-timeout-ms 5000)
# One rank: its Hello is the launch's only one, so a launch stopped
# right after its first refusal (agents retry after a second) never
# takes the run read back for it.
SIM1_ARGS=(--ranks 1 --layers 4 --windows 12 --steps-per-window 5
    --decision-timeout-ms 5000)

# q SQL: one value from the history.
q() {
	sqlite3 -batch -noheader "file:$DB?mode=ro" "$1" ||
	    fail "sqlite3 cannot read $DB: $1"
}

# launch_until JOB TEXT [SIM ARGS...]: starts a launch of JOB (one rank)
# in its own process group, waits until its stderr shows TEXT, then
# SIGKILLs it (a launch that never comes back).
launch_until() {
	local job=$1 text=$2 pid pgid seen=no
	shift 2
	setsid "$BELLOWS" sim --control "$CTL" --publish "$PUB" --quiet \
	    --job "$job" "$@" "${SIM1_ARGS[@]}" \
	    >"$TMP/$job.out" 2>"$TMP/$job.err" &
	pid=$!
	for _ in $(seq 1 2000); do
		if grep -q "$text" "$TMP/$job.err"; then
			seen=yes
			break
		fi
		sleep 0.01
	done
	pgid=$(ps -o pgid= -p "$pid" | tr -d ' ')
	[ -n "$pgid" ] && kill -KILL -- "-$pgid"
	wait "$pid" 2>/dev/null
	[ "$seen" = yes ] || {
		tail -n 20 "$TMP/$job.err"
		fail "the launch of '$job' was never told '$text'"
	}
}

write_config "$TMP/policy.yaml"
start_daemon
run_sim --job one "${SIM_ARGS[@]}" ||
    fail "the first launch of 'one' exited with $?"
expect_agreed 2 12
for job in two three; do
	run_sim --job "$job" "${SIM1_ARGS[@]}" ||
	    fail "the first launch of '$job' exited with $?"
	expect_agreed 1 12
done

# 1. A resume is read back off the loop: the launch is told to retry,
# then continues the recorded run.
run_sim --job one --start-window 5 --resume "${SIM_ARGS[@]}" ||
    fail "the resume of 'one' exited with $?"
expect_agreed 2 12
grep -q "its run is read back for the resume, off the loop; retry" \
    "$TMP/sim.err" ||
    fail "the resuming ranks were not told their run is being read back"
grep -q "job 'one': launch '.*' resumes at window 5; its run is read back off the loop" \
    "$TMP/bellowsd.log" || fail "bellowsd did not log the read-back"
grep -q "resumes run 1 at window 5" "$TMP/bellowsd.log" ||
    fail "the read-back did not continue run 1"
[ "$(q "SELECT resumes FROM runs WHERE id = 1")" = 1 ] ||
    fail "run 1 does not count the resume"
[ "$(q "SELECT count(*) FROM runs WHERE job = 'one'")" = 1 ] ||
    fail "the resume of 'one' started a run of its own"
ok "a resume is read back off the loop and continues run 1 at window 5"

# 2. A launch that asked for a resume and never came back: its
# read-back is held, and STATUS is answered meanwhile.
launch_until two "read back for the resume, off the loop" \
    --start-window 6 --resume
"$BELLOWS" status --control "$CTL" --timeout-ms 2000 >"$TMP/status.out" ||
    fail "STATUS was not answered while a read-back is held"
grep -q "run_resuming.*launch '.*' resumes at window 6 (client (local, no security)): its run is read back" \
    "$TMP/status.out" || {
	cat "$TMP/status.out"
	fail "STATUS does not show the resume being read back"
}
ok "STATUS is answered and shows job 'two' resuming at window 6"

# 3. The same client resuming another job meanwhile is refused, and
# told why; nothing of that job changes.
launch_until three "the most one client may have" \
    --start-window 4 --resume
grep -q "client (local, no security) already has 1 resume(s) being read back (job 'two'), the most one client may have; retry once it has joined" \
    "$TMP/three.err" || fail "the refusal does not say which resume holds the client"
[ "$(q "SELECT resumes FROM runs WHERE job = 'three'")" = 0 ] ||
    fail "the refused resume of 'three' was counted"
ok "a second resume by the same client is refused while its first is held"

# 4. Another launch of the job being resumed is told so, and waits.
launch_until two "job 'two' is being resumed by launch '.*' at window 6 (its run is read back); retry once it has joined"
[ "$(q "SELECT count(*) FROM runs WHERE job = 'two'")" = 1 ] ||
    fail "a launch of 'two' started a run while 'two' was being resumed"
ok "another launch of job 'two' is refused while its resume is held"

# 4. bellowsd stops with a read-back held (its thread done or stopped).
kill_daemon TERM
ok "bellowsd stops cleanly with a read-back held"
