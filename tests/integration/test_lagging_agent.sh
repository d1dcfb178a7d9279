#!/usr/bin/env bash
# An agent whose subscriber falls behind catches up through a snapshot: two
# ranks of a 4,096-layer job (tests/integration/lag_agent, a real agent
# each; decisions of some 64 KB), rank 1 stopped with SIGSTOP while rank 0
# goes on and bellowsd closes windows without it, publishing 24 decisions:
# more than rank 1's send queue (peer_queue_mb 1: 8 messages) and socket
# buffers hold (test_stalled_subscriber.sh shows the queue drops the rest),
# fewer than the 32 bellowsd keeps for a snapshot, and in less time than
# the agent takes to think bellowsd gone (3 heartbeats of 5 s: it would
# then join again and get them in its Welcome instead). When it runs again
# it asks for a snapshot and applies every decision at the same step as
# rank 0.
. "$(dirname "$0")/lib.sh"

JOB=lagging
LAG="$BUILD/tests/integration/lag_agent"
STEPS=200

cat >"$TMP/policy.yaml" <<YAML
daemon:
  apply_lag: 1
  window_timeout_ms: 100
  rank_timeout_ms: 60000
  heartbeat_ms: 5000
  max_layers: 4096
  peer_queue_mb: ${QUEUE_MB:-1}
jobs:
  - match: "*"
    policies:
      - type: schedule
        name: levels
        params:
          levels: {0: 2, 10: 1, 30: 4, 60: 1}
YAML
DAEMON_ARGS=--no-db start_daemon

# job_seq: the job's decision seq in STATUS, or nothing.
job_seq() {
	"$BELLOWS" status --control "$CTL" --job "$JOB" --timeout-ms 500 \
	    2>/dev/null | sed -n "s/^job '$JOB': .*, seq \([0-9]*\),.*/\1/p"
}

"$LAG" "$CTL" "$PUB" "$JOB" 0 2 4096 "$STEPS" 20 "$TMP/r0.seq" \
    >"$TMP/r0.out" 2>"$TMP/r0.err" &
R0=$!
"$LAG" "$CTL" "$PUB" "$JOB" 1 2 4096 "$STEPS" 20 "$TMP/r1.seq" \
    >"$TMP/r1.out" 2>"$TMP/r1.err" &
R1=$!
for _ in $(seq 1 200); do
	[ "$(wc -l <"$TMP/r1.seq")" -ge 20 ] && break
	sleep 0.05
done
[ "$(wc -l <"$TMP/r1.seq")" -ge 20 ] || fail "rank 1 did not run 20 steps"
kill -STOP "$R1"
before=$(job_seq)
after=$before
for _ in $(seq 1 200); do
	after=$(job_seq)
	[ -n "$after" ] && [ "$after" -ge $((before + 24)) ] && break
	sleep 0.05
done
kill -CONT "$R1"
[ -n "$after" ] && [ "$after" -ge $((before + 24)) ] ||
    fail "bellowsd made no 24 decisions while rank 1 was stopped ($before -> $after)"
ok "rank 1 stopped while bellowsd went from decision $before to $after"
wait "$R0" || { cat "$TMP/r0.err"; fail "rank 0 exited with $?"; }
wait "$R1" || { cat "$TMP/r1.err"; fail "rank 1 exited with $?"; }
cat "$TMP/r0.out" "$TMP/r1.out"
snapshots=$(sed -n 's/.* snapshots \([0-9]*\) .*/\1/p' "$TMP/r1.out")
[ -n "$snapshots" ] && [ "$snapshots" -ge 1 ] ||
    { cat "$TMP/r1.err"; fail "rank 1 asked for no snapshot"; }
ok "rank 1 asked for $snapshots snapshots"
grep -m1 "out of sequence, asking for a snapshot" "$TMP/r1.err" &&
    ok "rank 1 saw the gap its bounded queue left in the decisions"
[ "$(wc -l <"$TMP/r0.seq")" -eq "$STEPS" ] &&
    [ "$(wc -l <"$TMP/r1.seq")" -eq "$STEPS" ] ||
    fail "the ranks did not run $STEPS steps each"
diff "$TMP/r0.seq" "$TMP/r1.seq" >"$TMP/seq.diff" ||
    { head -20 "$TMP/seq.diff"; fail "the ranks applied different decisions"; }
last=$(tail -n 1 "$TMP/r1.seq" | cut -d' ' -f2)
ok "both ranks applied the same decision at each of $STEPS steps (up to #$last)"
kill_daemon TERM
