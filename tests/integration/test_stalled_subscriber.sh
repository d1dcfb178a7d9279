#!/usr/bin/env bash
# A subscriber that connects to bellowsd's publish socket and stops reading
# does not grow bellowsd's memory beyond peer_queue_mb (16 MiB by default,
# divided by the largest message max_layers 2000 allows: a queue of a few
# messages): 2 sim ranks run
# 1,000 windows of a 2,000-layer model (a decision of some 32 KB each)
# while a SUB socket of the job (tests/integration/stall) reads nothing.
# bellowsd's peak RSS grows by far less than the 1,000 decisions it would
# otherwise queue for it; the ranks agree on every decision; the stalled
# subscriber, once it reads again, finds the decisions it lost as a gap
# in their seq and a snapshot brings it to the newest decision.
. "$(dirname "$0")/lib.sh"

JOB=stalled
# peer_queue_mb as bellowsd has it by default; QUEUE_MB=4096 lets the
# 1,000 decisions queue, as they did before the queue was bounded.
QUEUE_MB=${QUEUE_MB:-16}
# The most bellowsd's peak RSS may grow over the run, in kB: the job's
# tables, the queue and a margin; 1,000 queued decisions take 32 MB.
BOUND_KB=${BOUND_KB:-16384}
# 1,000 windows of 2,000 layers take over 6 minutes under the sanitizers,
# where the RSS is not measured anyway: there a smaller queue (4 MiB, about
# 125 decisions) overflows as surely in 300 windows.
WINDOWS=1000
if daemon_sanitized; then
	QUEUE_MB=${QUEUE_MB_SANITIZED:-4}
	WINDOWS=300
fi

cat >"$TMP/policy.yaml" <<YAML
daemon:
  apply_lag: 1
  window_timeout_ms: 3000
  rank_timeout_ms: 5000
  heartbeat_ms: 200
  max_layers: 2000
  peer_queue_mb: $QUEUE_MB
jobs:
  - match: "*"
    policies:
      - type: schedule
        name: levels
        params:
          levels: {0: 2, 300: 1, 600: 4, 900: 1}
YAML
# No history: the store's own queue is not what is measured here.
DAEMON_ARGS=--no-db start_daemon

"$BUILD/tests/integration/stall" "$CTL" "$PUB" "$JOB" "$TMP/stall.ready" \
    >"$TMP/stall.out" 2>&1 &
STALL=$!
before=$(daemon_kb VmRSS)
run_sim --job "$JOB" --ranks 2 --layers 2000 --windows "$WINDOWS" \
    --steps-per-window 1 || fail "sim exited with $?"
expect_agreed 2 "$WINDOWS"
[ -f "$TMP/stall.ready" ] ||
    fail "the stalled subscriber never received the job's first decision"
rss=$(daemon_kb VmRSS)
peak=$(daemon_kb VmHWM)
growth=$((peak - before))
echo "bellowsd: VmRSS ${before} kB before, ${rss} kB after, peak ${peak} kB" \
    "(grew ${growth} kB; peer_queue_mb ${QUEUE_MB})"
if daemon_sanitized; then
	ok "bellowsd's RSS is not checked under AddressSanitizer"
else
	[ "$growth" -le "$BOUND_KB" ] ||
	    fail "bellowsd's peak RSS grew by ${growth} kB, more than ${BOUND_KB} kB"
	ok "bellowsd's peak RSS grew by ${growth} kB (bound ${BOUND_KB} kB)"
fi

seq=$("$BELLOWS" status --control "$CTL" --job "$JOB" |
    sed -n "s/^job '$JOB': .*, seq \([0-9]*\),.*/\1/p")
[ -n "$seq" ] || fail "status does not show job '$JOB'"
echo "stall VmRSS: $(awk '$1 == "VmRSS:" { print $2 }' /proc/$STALL/status) kB"
kill -USR1 "$STALL"
wait "$STALL" || { cat "$TMP/stall.out"; fail "the stalled subscriber got no snapshot"; }
line=$(cat "$TMP/stall.out")
echo "$line"
missing=$(echo "$line" | sed -n 's/.*, \([0-9]*\) missing;.*/\1/p')
top=$(echo "$line" | sed -n 's/.*snapshot to seq \([0-9]*\)$/\1/p')
[ -n "$missing" ] && [ "$missing" -gt 0 ] ||
    fail "the stalled subscriber lost nothing: the queue was not bounded"
ok "the stalled subscriber lost $missing decisions"
[ "$top" = "$seq" ] ||
    fail "its snapshot reaches seq $top, the job is at seq $seq"
ok "a snapshot brings it to the job's newest decision, seq $seq"

# The queues are bound once: a reload that changes peer_queue_mb says so.
sed -i "s/peer_queue_mb: $QUEUE_MB/peer_queue_mb: $((QUEUE_MB + 1))/" \
    "$TMP/policy.yaml"
kill -HUP "$DAEMON_PID"
for _ in $(seq 1 100); do
	grep -q "peer_queue_mb is $((QUEUE_MB + 1)) in the reloaded file; the send queues keep $QUEUE_MB until bellowsd restarts" \
	    "$TMP/bellowsd.log" && break
	sleep 0.05
done
grep -q "send queues keep $QUEUE_MB until bellowsd restarts" \
    "$TMP/bellowsd.log" ||
    fail "a reload that changed peer_queue_mb was not warned about"
ok "a reload that changes peer_queue_mb is warned about"
kill_daemon TERM
