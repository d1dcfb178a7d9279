#!/usr/bin/env bash
# bellowsd killed with SIGKILL mid-run and restarted on the same endpoints:
# the ranks keep training on the last decisions while it is away, rejoin the
# new instance by themselves, which adopts their state and continues the
# sequence; every step is agreed by every rank.
. "$(dirname "$0")/lib.sh"

start_daemon
"$BELLOWS" sim --control "$CTL" --publish "$PUB" --quiet --job restart \
    --ranks 8 --layers 4 --windows 60 --steps-per-window 10 --step-ms 6 \
    --decision-timeout-ms 1500 >"$TMP/sim.out" 2>"$TMP/sim.err" &
SIM=$!
sleep 1.5
kill_daemon KILL
ok "bellowsd killed with SIGKILL"
sleep 1
start_daemon
ok "bellowsd restarted"
wait "$SIM" || fail "sim exited with $?"
expect_agreed 8 60
grep -q "job 'restart' resumed at decision" "$TMP/bellowsd.log" ||
    fail "the new bellowsd did not adopt the ranks' decision"
ok "the new bellowsd adopted the ranks' decision"
"$BELLOWS" status --control "$CTL" --job restart >"$TMP/status.out" ||
    fail "status failed"
ok "status after restart: $(grep -m1 -i 'seq' "$TMP/status.out" || true)"
