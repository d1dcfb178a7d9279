#!/usr/bin/env bash
# 8 ranks, each a real agent process, against a real bellowsd: every
# decision is applied by all ranks at the same step (the sim checks every
# step), the schedule's changes all arrive, and STATUS shows the job.
. "$(dirname "$0")/lib.sh"

start_daemon
run_sim --job agree --ranks 8 --layers 6 --windows 16 \
    --steps-per-window 10 || fail "sim exited with $?"
expect_agreed 8 16
decisions=$(tail -n 1 "$TMP/sim.out" | sed 's/.*decisions=\([0-9]*\).*/\1/')
# One decision per window plus the initial one, all applied.
[ "$decisions" -ge 16 ] || fail "only $decisions decisions applied"
ok "$decisions decisions applied by all 8 ranks"
"$BELLOWS" status --control "$CTL" --job agree >"$TMP/status.out" ||
    fail "status failed"
grep -q "agree" "$TMP/status.out" || fail "status does not list the job"
ok "status lists the job"
grep -q "levels" "$TMP/status.out" || fail "status does not name the policy"
ok "status names the policy"
grep -q "rank_joined" "$TMP/status.out" || fail "status shows no rank_joined event"
ok "status shows the job's events"
grep -q "history store ok" "$TMP/status.out" || fail "status shows no store state"
ok "status shows the history store's state"
kill_daemon TERM
ok "bellowsd exited 0 on SIGTERM"
