#!/usr/bin/env bash
# The C example trainer (examples/c/trainer.c), two ranks as two processes
# against a real bellowsd: both print the same level changes at the same
# steps, and the model converges.
. "$(dirname "$0")/lib.sh"

TRAINER="$BUILD/examples/c/trainer"
start_daemon
# One launch: both ranks carry its identity, as a launcher's would give
# them (the two never meet in a collective, so one may finish first).
export BELLOWS_RUN_ID="ctrain-$$"
"$TRAINER" "$CTL" "$PUB" ctrain 0 2 200 >"$TMP/r0.out" 2>"$TMP/r0.err" &
R0=$!
"$TRAINER" "$CTL" "$PUB" ctrain 1 2 200 >"$TMP/r1.out" 2>"$TMP/r1.err" ||
    fail "rank 1 exited with $?"
wait "$R0" || fail "rank 0 exited with $?"
grep decision "$TMP/r0.out" >"$TMP/d0"
grep decision "$TMP/r1.out" >"$TMP/d1"
[ -s "$TMP/d0" ] || fail "rank 0 printed no decision"
# Both ranks may join before or after the first window's decision; the
# level changes after that must be identical.
diff <(grep -v '^step 0:' "$TMP/d0") <(grep -v '^step 0:' "$TMP/d1") ||
    fail "the ranks applied different level changes"
ok "both ranks applied $(wc -l <"$TMP/d0") level changes at the same steps"
loss=$(grep 'loss' "$TMP/r0.out" | tail -n 1 | awk '{print $4}')
python3 -c "import sys; sys.exit(0 if float('$loss') < 0.01 else 1)" ||
    fail "final loss $loss did not converge"
ok "final loss $loss"
