#!/usr/bin/env bash
# A rank killed with SIGKILL mid-run is declared lost by bellowsd (an
# event, not a crash), the other ranks' windows close without it, and the
# restarted rank rejoins with the current decisions from its Welcome: every
# step is still agreed by every rank that ran it. A killed rank that never
# comes back did not apply the later decisions: the sim says agreed=no and
# exits 1.
. "$(dirname "$0")/lib.sh"

start_daemon
# Rank 2 is down for 2.5 s (longer than rank_timeout_ms) from step 40; the
# others need at least 25 ms a step, so they are still running when it
# comes back.
run_sim --job rejoin --ranks 4 --layers 4 --windows 24 \
    --steps-per-window 10 --step-ms 25 --kill 2:4 --down-ms 2500
rc=$?
[ "$rc" -eq 0 ] || fail "sim exited with $rc"
ok "sim exited 0"
expect_agreed 4 24
grep -q "^sim: rank 2 rejoins as a new process at step" "$TMP/sim.out" ||
    fail "the sim did not start rank 2 again"
grep -q "job 'rejoin' rank 2 lost" "$TMP/bellowsd.log" ||
    fail "bellowsd did not report rank 2 lost"
ok "bellowsd reported rank 2 lost"
grep -q "job 'rejoin' rank 2 joined at step 0 " "$TMP/bellowsd.log" ||
    fail "no first join of rank 2"
grep -q "job 'rejoin' rank 2 rejoined at step [1-9]" "$TMP/bellowsd.log" ||
    fail "bellowsd did not see rank 2 rejoin"
[ "$(grep -c "job 'rejoin' rank 2 joined" "$TMP/bellowsd.log")" -eq 1 ] ||
    fail "the rejoin was logged as a first join"
ok "bellowsd logged rank 2's first join and its rejoin"
"$BELLOWS" status --control "$CTL" --job rejoin >"$TMP/status.out" ||
    fail "status failed"
grep -q "rank 2 rejoined at step" "$TMP/status.out" ||
    fail "status shows no rejoin event of rank 2"
ok "status shows the rejoin event"
kill -0 "$DAEMON_PID" || fail "bellowsd died"
ok "bellowsd still running"

# Down for longer than the rest of the run: rank 1 never rejoins.
run_sim --job norejoin --ranks 2 --layers 4 --windows 6 \
    --steps-per-window 10 --step-ms 5 --kill 1:2 --down-ms 60000
rc=$?
[ "$rc" -eq 1 ] || fail "sim exited with $rc for a rank that never rejoined"
ok "sim exited 1 when rank 1 never rejoined"
grep -q "^sim: the group is past window .*; rank 1 does not rejoin" \
    "$TMP/sim.out" || fail "the sim did not say why"
last=$(tail -n 1 "$TMP/sim.out")
case "$last" in
"sim: ranks=2 windows=6 decisions="*" agreed=no") ok "$last" ;;
*) fail "sim's last line: '$last'" ;;
esac
kill_daemon INT
ok "bellowsd exited 0 on SIGINT"
