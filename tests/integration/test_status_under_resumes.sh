#!/usr/bin/env bash
# While launches resume two recorded jobs one after the other (each run
# read back off bellowsd's event loop), `bellows status` keeps
# answering within its 2 s timeout and a third job's ranks keep getting
# every decision. A functional check with generous bounds: the latency
# itself is measured by `build/bench/resume --live` (bench/README.md).
. "$(dirname "$0")/lib.sh"

DB="$TMP/resume.db"
WINDOWS=2000
LAYERS=20
# Long enough that a welcomed resume's silent rank does not matter.
RANK_TIMEOUT_MS=3000

write_config "$TMP/policy.yaml"
start_daemon

# The history: jobs 'one' and 'two', WINDOWS windows of LAYERS layers.
for job in one two; do
	run_sim --job "$job" --ranks 1 --layers "$LAYERS" \
	    --windows "$WINDOWS" --steps-per-window 1 ||
	    fail "the first launch of '$job' exited with $?"
	expect_agreed 1 "$WINDOWS"
done

# The third job: two ranks, a window every 5 steps of 10 ms, each
# decision waited for at most 5 s (a later one fails the sim).
"$BELLOWS" sim --control "$CTL" --publish "$PUB" --quiet --job third \
    --ranks 2 --layers 4 --windows 200 --steps-per-window 5 --step-ms 10 \
    --decision-timeout-ms 5000 >"$TMP/third.out" 2>"$TMP/third.err" &
THIRD=$!

# third_window: the window job 'third' is at in bellowsd (its ranks
# wait for each decision, so it moves only while they get them).
third_window() {
	"$BELLOWS" status --control "$CTL" --job third --format json \
	    --timeout-ms 2000 2>/dev/null |
	    python3 -c 'import json, sys
jobs = json.load(sys.stdin).get("jobs", [])
print(jobs[0].get("window", 0) if jobs else 0)' 2>/dev/null || echo 0
}

# The resumes: launches of 'one' and 'two' in turn, each resuming at
# the run's last window and running 3 windows more once read back.
(
	for k in 1 2 3 4; do
		job=one
		[ $((k % 2)) = 0 ] && job=two
		"$BELLOWS" sim --control "$CTL" --publish "$PUB" --quiet \
		    --job "$job" --ranks 1 --layers "$LAYERS" \
		    --windows $((WINDOWS + 3 * k)) --steps-per-window 1 \
		    --start-window $((WINDOWS + 3 * (k - 1))) --resume \
		    --decision-timeout-ms 5000 \
		    >"$TMP/resume-$k.out" 2>"$TMP/resume-$k.err" ||
		    echo "$k" >>"$TMP/resume-failed"
	done
) &
RESUMER=$!

# `bellows status` while the resumes run: every one answered.
before=$(third_window)
n=0
while kill -0 "$RESUMER" 2>/dev/null; do
	"$BELLOWS" status --control "$CTL" --timeout-ms 2000 \
	    >"$TMP/status.out" 2>&1 || {
		cat "$TMP/status.out"
		fail "bellows status was not answered within 2 s while a resume ran"
	}
	n=$((n + 1))
	sleep 0.05
done
after=$(third_window)
wait "$RESUMER"
[ ! -e "$TMP/resume-failed" ] || {
	k=$(head -n 1 "$TMP/resume-failed")
	tail -n 20 "$TMP/resume-$k.err"
	fail "resume launch $k failed"
}
[ "$(grep -c "its run is read back off the loop" "$TMP/bellowsd.log")" -ge 4 ] ||
    fail "bellowsd did not read back a run for each of the 4 resumes"
[ "$n" -ge 10 ] || fail "only $n STATUS requests ran during the resumes"
ok "bellows status answered $n times within 2 s during 4 resumes"

[ "$after" -gt "$before" ] ||
    fail "the third job got no decision during the resumes ($before, then $after)"
wait "$THIRD" || {
	tail -n 20 "$TMP/third.err"
	fail "the third job's sim exited with $?: a decision came late or never"
}
last=$(tail -n 1 "$TMP/third.out")
case "$last" in
"sim: ranks=2 windows=200 decisions="*" of "*" expected agreed=yes") ;;
*) fail "the third job's ranks did not agree: '$last'" ;;
esac
sim_counts "$last"
[ "$SIM_D" -eq "$SIM_E" ] || fail "the third job applied $SIM_D of $SIM_E decisions"
ok "the third job closed $((after - before)) windows during the resumes, each decision within 5 s: '$last'"

kill_daemon TERM
