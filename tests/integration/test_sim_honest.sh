#!/usr/bin/env bash
# bellows sim does not pass when decisions did not flow: a daemon stopped
# two seconds into the run and never restarted, a job the daemon refuses
# (a world beyond max_world), and a daemon killed by SIGKILL mid-run (as a
# crash would kill it) each make the sim exit 1 with agreed=no and a last
# line "decisions=D of E expected" with D < E, and a line saying why.
. "$(dirname "$0")/lib.sh"

# job_seq JOB: the job's decision seq in STATUS, or nothing.
job_seq() {
	"$BELLOWS" status --control "$CTL" --job "$1" --timeout-ms 500 \
	    2>/dev/null | sed -n "s/^job '$1': .*, seq \([0-9]*\),.*/\1/p"
}

# sim_until_seq JOB SEQ SIGNAL: runs a 4-rank, 60-window sim of JOB in the
# background, waits until bellowsd made SEQ decisions for it, sends SIGNAL
# to bellowsd and waits for the sim; sets SIM_RC.
sim_until_seq() {
	local seq=""

	"$BELLOWS" sim --control "$CTL" --publish "$PUB" --quiet --job "$1" \
	    --ranks 4 --layers 4 --windows 60 --steps-per-window 10 \
	    --step-ms 10 --decision-timeout-ms 1000 \
	    >"$TMP/sim.out" 2>"$TMP/sim.err" &
	SIM=$!
	for _ in $(seq 1 400); do
		seq=$(job_seq "$1")
		[ -n "$seq" ] && [ "$seq" -ge "$2" ] && break
		sleep 0.05
	done
	[ -n "$seq" ] && [ "$seq" -ge "$2" ] ||
	    fail "bellowsd made no $2 decisions for '$1' within 20 s"
	kill_daemon "$3"
	ok "bellowsd stopped by SIG$3 at seq $seq of job '$1'"
	wait "$SIM"
	SIM_RC=$?
}

# 1. Stopped after about 2 s (20 windows of 100 ms) and never restarted.
start_daemon
sim_until_seq gone 20 TERM
expect_not_agreed 4 60 "$SIM_RC"
[ "$SIM_E" -ge 55 ] || fail "only $SIM_E decisions expected of a 60-window run"
[ "$SIM_D" -ge 15 ] && [ "$SIM_D" -le 45 ] ||
    fail "$SIM_D decisions applied before bellowsd stopped 2 s in"
grep -q "ended without bellowsd" "$TMP/sim.out" ||
    fail "the sim does not say bellowsd went away"
ok "the sim says why: $(grep -m1 'ended without bellowsd' "$TMP/sim.out")"

# 2. A job the daemon refuses: 4 ranks where it takes at most 2.
cat >"$TMP/policy.yaml" <<YAML
daemon:
  apply_lag: 1
  window_timeout_ms: 3000
  rank_timeout_ms: 1500
  heartbeat_ms: 200
  max_world: 2
jobs:
  - match: "*"
    policies:
      - type: schedule
        name: levels
        params:
          levels: {0: 2, 3: 1}
YAML
start_daemon
run_sim --job refused --ranks 4 --layers 4 --windows 6 --steps-per-window 5 \
    --decision-timeout-ms 500
expect_not_agreed 4 6 $?
[ "$SIM_D" -eq 0 ] || fail "$SIM_D decisions applied by a refused job"
grep -q "bellowsd refused the job: .*exceeds this daemon's limits" \
    "$TMP/sim.out" || fail "the sim does not say the job was refused"
ok "the sim says why: $(grep -m1 'refused the job' "$TMP/sim.out")"
kill_daemon TERM

# 3. Killed by SIGKILL mid-run, as a crashing policy would kill it, and
# never restarted.
write_config "$TMP/policy.yaml"
start_daemon
sim_until_seq crash 10 KILL
expect_not_agreed 4 60 "$SIM_RC"
[ "$SIM_E" -ge 55 ] || fail "only $SIM_E decisions expected of a 60-window run"
grep -q "ended without bellowsd" "$TMP/sim.out" ||
    fail "the sim does not say bellowsd went away"
ok "the sim says why: $(grep -m1 'ended without bellowsd' "$TMP/sim.out")"
