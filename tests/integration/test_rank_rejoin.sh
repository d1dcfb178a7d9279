#!/usr/bin/env bash
# A rank killed with SIGKILL mid-run is declared lost by bellowsd (an
# event, not a crash), the other ranks' windows close without it, and the
# restarted rank rejoins with the current decisions from its Welcome: every
# step is still agreed by every rank that ran it.
. "$(dirname "$0")/lib.sh"

start_daemon
run_sim --job rejoin --ranks 4 --layers 4 --windows 14 \
    --steps-per-window 10 --step-ms 5 --kill 2:4 --down-ms 2500 ||
    fail "sim exited with $?"
expect_agreed 4 14
grep -q "job 'rejoin' rank 2 lost" "$TMP/bellowsd.log" ||
    fail "bellowsd did not report rank 2 lost"
ok "bellowsd reported rank 2 lost"
grep -q "job 'rejoin' rank 2 joined" "$TMP/bellowsd.log" ||
    fail "rank 2 did not rejoin"
ok "rank 2 rejoined"
kill -0 "$DAEMON_PID" || fail "bellowsd died"
ok "bellowsd still running"
