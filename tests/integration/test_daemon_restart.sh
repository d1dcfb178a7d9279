#!/usr/bin/env bash
# bellowsd killed with SIGKILL mid-run and restarted on the same endpoints:
# the ranks keep training on the last decisions while it is away, rejoin the
# new instance by themselves, which adopts their state and continues the
# sequence; every step is agreed by every rank.
. "$(dirname "$0")/lib.sh"

# job_seq: the seq of job 'restart' in STATUS, or nothing.
job_seq() {
	"$BELLOWS" status --control "$CTL" --job restart --timeout-ms 500 \
	    2>/dev/null | sed -n "s/^job 'restart': .*, seq \([0-9]*\),.*/\1/p"
}

start_daemon
"$BELLOWS" sim --control "$CTL" --publish "$PUB" --quiet --job restart \
    --ranks 8 --layers 4 --windows 60 --steps-per-window 10 --step-ms 6 \
    --decision-timeout-ms 1500 >"$TMP/sim.out" 2>"$TMP/sim.err" &
SIM=$!
# Kill it once a few decisions were made.
before=""
for _ in $(seq 1 200); do
	before=$(job_seq)
	[ -n "$before" ] && [ "$before" -ge 4 ] && break
	sleep 0.05
done
[ -n "$before" ] && [ "$before" -ge 4 ] ||
    fail "bellowsd made no 4 decisions within 10 s (seq '$before')"
kill_daemon KILL
ok "bellowsd killed with SIGKILL at seq $before or just after"
sleep 1
start_daemon
ok "bellowsd restarted"
wait "$SIM" || fail "sim exited with $?"
expect_agreed 8 60
resumed=$(sed -n "s/.*job 'restart' resumed at decision \([0-9]*\) .*/\1/p" \
    "$TMP/bellowsd.log" | head -n 1)
[ -n "$resumed" ] ||
    fail "the new bellowsd did not adopt the ranks' decision"
[ "$resumed" -ge "$before" ] ||
    fail "the new bellowsd resumed at decision $resumed, before $before"
ok "the new bellowsd adopted the ranks' decision $resumed"
"$BELLOWS" status --control "$CTL" --job restart >"$TMP/status.out" ||
    fail "status failed"
after=$(sed -n "s/^job 'restart': .*, seq \([0-9]*\),.*/\1/p" \
    "$TMP/status.out")
[ -n "$after" ] || fail "status after the restart does not show job 'restart'"
[ "$after" -gt "$resumed" ] ||
    fail "no decision after the restart: seq $after, resumed at $resumed"
ok "decisions continued after the restart: seq $resumed -> $after"
# The ranks applied them: decisions made after the restart (the last one
# bellowsd makes may be due after the run's last step).
applied=$(sed -n 's/^  #\([0-9]*\): steps.*/\1/p' "$TMP/sim.out" | tail -n 1)
[ -n "$applied" ] && [ "$applied" -gt "$resumed" ] && [ "$applied" -le "$after" ] ||
    fail "the ranks' last decision is #$applied (resumed at $resumed, bellowsd at $after)"
ok "the ranks applied decisions made after the restart, up to #$applied"
