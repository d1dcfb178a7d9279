#!/bin/bash
# test_top_data: what `bellows top` reads, in a real terminal (tmux):
# live without --db it finds bellowsd's history through STATUS (from a
# directory holding no history) and says which file it reads; the
# Decisions view shows the decisions that changed something and `c` shows
# all of them; a finished job's ranks show that they left, live and
# offline, with their last step and window offline, not step 0 and
# alive.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/top_lib.sh"

DB="$TMP/history.db"
start_daemon

# STATUS names the history file, as bellows status shows.
"$BELLOWS" status --control "$CTL" >"$TMP/status.txt" ||
	fail "bellows status failed"
grep -qx "  history file: $DB" "$TMP/status.txt" ||
	{ cat "$TMP/status.txt"; fail "bellows status does not name the history file"; }
"$BELLOWS" status --control "$CTL" --format json |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["store"]["path"])' \
    >"$TMP/status.path" || fail "bellows status --format json is not JSON"
[ "$(cat "$TMP/status.path")" = "$DB" ] ||
	fail "the JSON status names '$(cat "$TMP/status.path")', not $DB"
ok "bellows status names the history file, in text and JSON"

# A run that finishes: 3 ranks, 20 windows of 5 steps (steps 0..99), each
# rank says goodbye at the end.
run_sim --job endjob --ranks 3 --layers 2 --windows 20 --steps-per-window 5 \
    --step-ms 5 || fail "the short sim failed"
expect_agreed 3 20

# A run that goes on while the dashboard watches it.
"$BELLOWS" sim --control "$CTL" --publish "$PUB" --quiet --job toyjob \
    --ranks 2 --layers 3 --windows 600 --steps-per-window 5 --step-ms 20 \
    >"$TMP/sim.out" 2>"$TMP/sim.err" &
SIM_PID=$!

# Live, from a directory without a bellows.db, without --db.
mkdir "$TMP/elsewhere"
tm new-session -d -s top -x 140 -y 30 \
    "cd $TMP/elsewhere && $BELLOWS top --control $CTL --publish $PUB --job toyjob; sleep 120"
pane_has "history $DB from bellowsd" 20 ||
	fail "the header does not name the history file bellowsd's STATUS gave"
pane_has 'layer0\.weight +[0-9.]+k? +[0-9]+' 20 ||
	fail "without --db the layers view shows no levels"
ok "live top without --db reads the history bellowsd names in STATUS"

tm send-keys -t top Tab
pane_has 'Decisions \| Events \| changed only \(c: all\)' 10 ||
	fail "the decisions view does not say it shows changed decisions only"
pane_has 'schedule: level' 20 || fail "the decisions view lacks the changes"
# Most windows change nothing: their decisions are not listed.
grep -q 'no change' "$TMP/pane.txt" &&
	fail "changed only, 'no change' decisions are listed"
tm send-keys -t top c
pane_has 'all \(c: changed only\)' 10 || fail "c did not show all decisions"
pane_has 'no change' 20 || fail "with all decisions, 'no change' is not listed"
tm send-keys -t top c
pane_has 'changed only \(c: all\)' 10 || fail "c again did not go back"
ok "decisions view shows changed decisions only, c toggles all"

# Live, the finished job: its ranks left (the history says so), the job
# ended; none is shown alive or lost.
(cd "$TMP/elsewhere" && "$BELLOWS" top --control "$CTL" --publish "$PUB" \
    --job endjob --once --view ranks --size 24x100) >"$TMP/once.txt" ||
	fail "bellows top --once failed"
grep -q 'job endjob  ended, 3 ranks' "$TMP/once.txt" ||
	{ cat "$TMP/once.txt"; fail "live, the finished job is not shown ended"; }
[ "$(grep -Ec '^ +[0-2] left +99 ' "$TMP/once.txt")" = 3 ] ||
	{ cat "$TMP/once.txt"; fail "live, the ranks that left are not shown left"; }
ok "live, a finished job is ended and its ranks left at step 99"

tm send-keys -t top q
kill -TERM "$SIM_PID" 2>/dev/null
wait "$SIM_PID" 2>/dev/null
SIM_PID=""
kill_daemon TERM

# Offline: the finished run, as of its last window.
tm respawn-pane -k -t top \
    "$BELLOWS top --db $DB --job endjob; sleep 120"
pane_has 'job endjob +ended, 3 ranks +step 99' 20 ||
	fail "the finished run's job line does not say ended at step 99"
# --job opens the Layers view: the Ranks view is the one before it.
tm send-keys -t top BTab
pane_has 'RANK STATE +STEP +WIN' 10 || fail "no ranks view"
for r in 0 1 2; do
	pane_has "^ +$r left +99 +19 " 5 ||
		fail "rank $r does not show left at step 99 in window 19"
done
grep -Eq '^ +[0-9]+ (alive|LOST) ' "$TMP/pane.txt" &&
	fail "a rank of the finished run is shown alive or lost"
# A window back: the run was still going, its ranks alive at step 94.
tm send-keys -t top Left
pane_has "^ +0 alive +94 +18 " 10 ||
	fail "one window back, rank 0 is not alive at step 94"
ok "offline, a finished run's ranks show their last step and that they left"
