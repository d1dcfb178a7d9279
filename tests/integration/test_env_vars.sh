#!/usr/bin/env bash
# bellows status, sim and top take --control, --publish and --job from
# BELLOWS_CONTROL, BELLOWS_PUBLISH and BELLOWS_JOB when the option is not
# given; an option given wins over the variable.
. "$(dirname "$0")/lib.sh"

start_daemon
unset BELLOWS_CONTROL BELLOWS_PUBLISH BELLOWS_JOB

# sim with no --control, --publish or --job at all.
BELLOWS_CONTROL=$CTL BELLOWS_PUBLISH=$PUB BELLOWS_JOB=env-job \
    "$BELLOWS" sim --quiet --ranks 2 --layers 2 --windows 4 \
    --steps-per-window 5 --step-ms 5 >"$TMP/sim.out" 2>"$TMP/sim.err" ||
    fail "sim from the environment failed"
expect_agreed 2 4
"$BELLOWS" status --control "$CTL" --job env-job >"$TMP/st.out" ||
    fail "no job 'env-job' after a sim with BELLOWS_JOB=env-job"
ok "sim ran job 'env-job' on the daemon BELLOWS_CONTROL and BELLOWS_PUBLISH name"

# An option wins over its variable.
BELLOWS_CONTROL=ipc:///nonexistent/c BELLOWS_PUBLISH=ipc:///nonexistent/p \
    BELLOWS_JOB=env-loses "$BELLOWS" sim --quiet --control "$CTL" \
    --publish "$PUB" --job opt-job --ranks 1 --layers 1 --windows 2 \
    --steps-per-window 5 --step-ms 5 >"$TMP/sim.out" 2>"$TMP/sim.err" ||
    fail "sim with options over a wrong environment failed"
"$BELLOWS" status --control "$CTL" --job opt-job >/dev/null ||
    fail "the --job option did not win over BELLOWS_JOB"
"$BELLOWS" status --control "$CTL" --job env-loses >/dev/null 2>&1 &&
    fail "BELLOWS_JOB won over --job"
ok "--control, --publish and --job win over the variables"

# status: BELLOWS_CONTROL reaches the daemon, BELLOWS_JOB picks the job.
BELLOWS_CONTROL=$CTL BELLOWS_JOB=opt-job "$BELLOWS" status >"$TMP/st.out" ||
    fail "status from BELLOWS_CONTROL failed"
grep -q "job 'opt-job'" "$TMP/st.out" || fail "status did not show job opt-job"
grep -q "job 'env-job'" "$TMP/st.out" && fail "BELLOWS_JOB did not narrow status"
BELLOWS_CONTROL=ipc:///nonexistent/c "$BELLOWS" status --control "$CTL" \
    --timeout-ms 1000 >/dev/null || fail "--control did not win over BELLOWS_CONTROL"
BELLOWS_CONTROL=ipc:///nonexistent/c "$BELLOWS" status --timeout-ms 300 \
    >/dev/null 2>&1 && fail "status ignored a wrong BELLOWS_CONTROL"
ok "status: BELLOWS_CONTROL and BELLOWS_JOB as defaults, --control first"

# top --once: the job BELLOWS_JOB names is the one opened.
if [ -x "$BELLOWS" ] && "$BELLOWS" help top >/dev/null 2>&1; then
	BELLOWS_CONTROL=$CTL BELLOWS_PUBLISH=$PUB BELLOWS_JOB=env-job \
	    "$BELLOWS" top --once --db "$TMP/bellows-1.db" --control "$CTL" \
	    >"$TMP/top.out" 2>&1 || fail "top --once failed: $(tail -n 3 "$TMP/top.out")"
	grep -q "env-job" "$TMP/top.out" ||
	    fail "top did not open job env-job: $(head -n 5 "$TMP/top.out")"
	ok "top --once opened job 'env-job' from BELLOWS_JOB"
fi

# top --once with no bellowsd behind the endpoint: the screen, a line
# saying why, and status 1 for scripts.
if [ -x "$BELLOWS" ] && "$BELLOWS" help top >/dev/null 2>&1; then
	"$BELLOWS" top --once --control ipc:///nonexistent/c \
	    --publish ipc:///nonexistent/p >"$TMP/top.out" 2>"$TMP/top.err"
	rc=$?
	[ "$rc" -eq 1 ] || fail "top --once unconnected exited $rc, not 1"
	grep -q "^bellows top: not connected to ipc:///nonexistent/c" \
	    "$TMP/top.err" || fail "top --once unconnected said: $(cat "$TMP/top.err")"
	[ -s "$TMP/top.out" ] || fail "top --once unconnected printed no screen"
	ok "top --once exits 1 and says so when bellowsd does not answer"
fi

# sim without the job: one line naming what is missing, not the usage.
"$BELLOWS" sim --ranks 2 >"$TMP/sim.out" 2>"$TMP/sim.err"
rc=$?
[ "$rc" -eq 2 ] || fail "sim without --job exited $rc, not 2"
[ "$(wc -l <"$TMP/sim.err")" -eq 1 ] ||
    fail "sim without --job wrote $(wc -l <"$TMP/sim.err") lines"
grep -q "^bellows sim: --job is required" "$TMP/sim.err" ||
    fail "sim without --job said: $(cat "$TMP/sim.err")"
ok "sim without --job says so in one line; its endpoints default as bellowsd's"
