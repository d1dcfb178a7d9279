#!/bin/sh
# A launch that gets no decisions says so on the trainer's side. Two
# launches of job 'merged' given the same run identity: the second joins
# the first, ended, run at step 0 and bellowsd drops each of its reports
# as stale (windows 0-5 are decided already). Every rank of the second
# launch warns at its first such window, and its close summary counts the
# 6 windows without a decision; the first launch, decided throughout,
# warns of nothing and counts none.
. "$(dirname "$0")/lib.sh"

start_daemon
sim_same() {
	"$BELLOWS" sim --control "$CTL" --publish "$PUB" --job merged \
	    --ranks 2 --layers 2 --windows 6 --steps-per-window 4 \
	    --run-id same >"$TMP/sim$1.out" 2>"$TMP/sim$1.err"
}
sim_same 1 || { cat "$TMP/sim1.err"; fail "the first launch failed"; }
grep -q "decided before this rank reported it" "$TMP/sim1.err" &&
    fail "the first launch warned of windows decided without it"
grep -q "windows without a decision" "$TMP/sim1.err" &&
    fail "the first launch's close summary is a warning"
ok "the first launch is decided and warns of nothing"

sim_same 2 || { cat "$TMP/sim2.err"; fail "the second launch failed"; }
grep -q "stale report of window 0" "$TMP/bellowsd.log" ||
    fail "bellowsd took the second launch's reports: nothing to check"
for r in 0 1; do
	n=$(grep -c "^rank $r: warn: window [0-9]* was decided before this rank reported it" \
	    "$TMP/sim2.err")
	[ "$n" = 1 ] || { cat "$TMP/sim2.err"; fail "rank $r warned $n times, not once"; }
	grep -q "^rank $r: warn: closing job 'merged' rank $r: 6 windows, [0-9]* decisions received, 6 windows without a decision" \
	    "$TMP/sim2.err" ||
	    { cat "$TMP/sim2.err"; fail "rank $r's close summary does not count 6 windows without a decision"; }
done
ok "each rank of the merged launch warns once and counts 6 undecided windows at close"
