#!/bin/bash
# test_top: `bellows top` in a real terminal (tmux) against a live
# bellowsd and `bellows sim`: the job, its layers and levels, a decision's
# reason, a resize, a killed rank shown lost, bellowsd going away and coming back,
# and the terminal given back on q and on SIGTERM, SIGINT, SIGHUP and
# SIGQUIT.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/top_lib.sh"

DB="$TMP/history.db"
start_daemon

# 400 windows of 5 steps of 20 ms: long enough for every check below
# on a slow machine; rank 1 is killed at window 30 and stays down 15 s.
"$BELLOWS" sim --control "$CTL" --publish "$PUB" --quiet --job toyjob \
    --ranks 3 --layers 4 --windows 400 --steps-per-window 5 --step-ms 20 \
    --kill 1:30 --down-ms 15000 >"$TMP/sim.out" 2>"$TMP/sim.err" &
SIM_PID=$!

TOP="$BELLOWS top --control $CTL --publish $PUB --db $DB"
# The pane records the terminal settings before and after, and the exit
# status, then stays open for capture-pane.
tm new-session -d -s top -x 100 -y 30 \
    "stty -g >$TMP/stty.before; $TOP; echo top-exit=\$?; stty -g >$TMP/stty.after; sleep 120"

pane_has 'toyjob' 20 || fail "the jobs view does not show job toyjob"
pane_has 'reports/s [0-9.]+' 10 || fail "the header does not show reports/s"
pane_has 'latency [0-9.]+/[0-9.]+ms' 10 ||
	fail "the header does not show the decision latency p50/p99"
ok "jobs view shows toyjob and bellowsd's health (rates, decision latency)"

tm send-keys -t top Enter
pane_has 'RANK +STATE' 10 || fail "Enter did not open the job's ranks"
ok "Enter opens the job"

tm send-keys -t top Tab
pane_has 'layer0\.weight +[0-9.]+k? +[0-9]+ ' 20 ||
	fail "the layers view does not show layer0.weight with a level"
pane_has 'layer3\.bias' 5 || fail "the layers view lacks layer3.bias"
# A schedule has no regimes: no REGIME, R or VS_ETA, nor "critical".
grep -Eq 'REGIME|VS_ETA|critical' "$TMP/pane.txt" &&
	fail "the layers view of a schedule job shows Accordion's regime"
ok "layers view shows layer names and levels, and no regime for a schedule"

# A resize re-lays the screen out for the new size: at 60 columns the
# layer name column is narrower (40 at 100 columns), back at 100 it is
# as wide as before.
tm resize-window -t top -x 60 -y 20
pane_has '^ LAYER {20,34}SIZE' 10 || fail "at 60 columns the name column is as wide"
[ "$(awk '{ if (length($0) > w) w = length($0) } END { print w + 0 }' "$TMP/pane.txt")" -le 60 ] ||
	fail "a line is wider than the resized 60-column pane"
tm resize-window -t top -x 100 -y 30
pane_has '^ LAYER {35,}SIZE' 10 || fail "back at 100 columns the name column is still narrow"
pane_has '^ layer0\.weight +[0-9.]+k? ' 10 || fail "back at 100 columns the names are cut"
ok "a resize re-lays the screen out"

tm send-keys -t top Tab
pane_has 'schedule: level' 20 || fail "the decisions view shows no reason"
ok "decisions view shows the schedule's reason"

tm send-keys -t top BTab BTab
pane_has '^ +1 LOST' 40 || fail "the killed rank 1 is not shown LOST"
pane_has '2/3 alive' 5 || fail "the job line does not say 2/3 alive"
ok "the killed rank is shown lost"

tm send-keys -t top Tab Tab Tab
pane_has 'rank_lost +toyjob' 10 || fail "the events view lacks rank_lost"
ok "events view shows the loss"

tm send-keys -t top '?'
pane_has 'filter layers by name' 5 || fail "? does not show the keys"
tm send-keys -t top x
ok "? shows the keys"

kill_daemon TERM
pane_has "bellowsd not answering at" 15 ||
	fail "a stopped bellowsd is not reported"
ok "bellowsd going away is shown"
start_daemon
pane_has ' up [0-9]' 15 || fail "bellows top did not reconnect"
ok "bellows top reconnects when bellowsd is back"

tm send-keys -t top q
pane_has 'top-exit=0' 10 || fail "q did not end bellows top with status 0"
cmp -s "$TMP/stty.before" "$TMP/stty.after" ||
	fail "the terminal settings differ after q"
ok "q quits and gives the terminal back"

# A signal gives the terminal back too. (The pane is respawned: a new
# session right after the last one was killed can race the tmux server's
# exit.) Files, not the pane, tell when it ran: the old screen may linger.
# After bellows top, the pane's shell records `stty -a` and reads a line
# typed into the terminal: it is echoed and ends on Enter only if echo,
# canonical mode and CR->NL are back, and the pane must show the normal
# screen again, not the dashboard's.
# wait_file FILE SECONDS
wait_file() {
	for _ in $(seq 1 $(($2 * 5))); do
		[ -s "$1" ] && return 0
		sleep 0.2
	done
	return 1
}
for sig in TERM INT HUP QUIT; do
	rm -f "$TMP/top.pid" "$TMP/top.rc" "$TMP/stty.before" \
	    "$TMP/stty.after" "$TMP/stty.txt"
	tm respawn-pane -k -t top \
	    "stty -g >$TMP/stty.before; $TOP </dev/tty & echo \$! >$TMP/top.pid; wait; echo \$? >$TMP/top.rc; stty -g >$TMP/stty.after; stty -a >$TMP/stty.txt; read -r line; echo got=\$line; sleep 120"
	wait_file "$TMP/top.pid" 10 || fail "bellows top did not start again"
	pane_has 'RELOADED' 20 || fail "bellows top did not draw the jobs view"
	kill -"$sig" "$(cat "$TMP/top.pid")"
	wait_file "$TMP/stty.txt" 10 || fail "bellows top ignored SIG$sig"
	[ "$(cat "$TMP/top.rc")" = 0 ] ||
		fail "SIG$sig: exit status $(cat "$TMP/top.rc")"
	cmp -s "$TMP/stty.before" "$TMP/stty.after" ||
		fail "the terminal settings differ after SIG$sig"
	for flag in echo icanon icrnl isig; do
		grep -Eq "(^| )$flag( |;|\$)" "$TMP/stty.txt" ||
			fail "SIG$sig: stty -a lacks $flag: $(cat "$TMP/stty.txt")"
	done
	tm send-keys -t top "typed-$sig" Enter
	pane_has "^got=typed-$sig\$" 10 ||
		fail "SIG$sig: the shell does not read a line after bellows top"
	grep -q "^typed-$sig\$" "$TMP/pane.txt" ||
		fail "SIG$sig: the typed line is not echoed"
	! grep -q 'RELOADED' "$TMP/pane.txt" ||
		fail "SIG$sig: the dashboard's screen is still shown"
	ok "SIG$sig ends bellows top and gives the terminal back (echo, icanon, normal screen)"
done

# Not on a terminal: one screen as text.
$TOP --once --view layers >"$TMP/once.txt" ||
	fail "bellows top --once failed"
grep -q 'layer0\.weight' "$TMP/once.txt" || fail "--once lacks the layers"
ok "--once prints a screen without a terminal"

kill -TERM "$SIM_PID" 2>/dev/null
wait "$SIM_PID" 2>/dev/null
SIM_PID=""
"$BELLOWS" top --db "$DB" --once --view decisions >"$TMP/offline.txt" ||
	fail "bellows top --db (offline) failed"
grep -q 'offline' "$TMP/offline.txt" && grep -Eq 'no change|schedule:' \
    "$TMP/offline.txt" || fail "offline view lacks the decisions"
"$BELLOWS" top --db "$DB" --run 1 --once --view layers >"$TMP/offline.txt" ||
	fail "bellows top --db --run 1 failed"
grep -q 'layer2\.weight' "$TMP/offline.txt" ||
	fail "offline view of run 1 lacks the layers"
ok "offline --db shows the recorded decisions and layers"
exit 0
