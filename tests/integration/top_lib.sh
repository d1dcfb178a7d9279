# top_lib.sh - sourced after lib.sh by the tests that drive `bellows top`
# in a real terminal: skips without tmux or without a dashboard build,
# gives them a private tmux server (`tm`), a cleanup that also ends it
# and the background sim (SIM_PID), and pane_has.

command -v tmux >/dev/null 2>&1 || { echo "SKIP: tmux is not installed"; exit 77; }
"$BELLOWS" help 2>&1 | awk '{ print $1 }' | grep -qx top ||
	{ echo "SKIP: this build has no bellows top (no ncurses)"; exit 77; }

TMUX_SOCK="$TMP/tmux.sock"
SIM_PID=""
tm() { tmux -S "$TMUX_SOCK" "$@"; }
top_cleanup() {
	tm kill-server 2>/dev/null
	if [ -n "$SIM_PID" ]; then
		kill -TERM "$SIM_PID" 2>/dev/null
		wait "$SIM_PID" 2>/dev/null
	fi
	cleanup
}
trap top_cleanup EXIT

# pane_has PATTERN SECONDS: waits until the pane of the tmux window
# `top` shows PATTERN (ERE); prints the pane and fails if it does not.
pane_has() {
	for _ in $(seq 1 $(($2 * 5))); do
		if tm capture-pane -p -t top >"$TMP/pane.txt" 2>/dev/null &&
		    grep -Eq -- "$1" "$TMP/pane.txt"; then
			return 0
		fi
		sleep 0.2
	done
	echo "---- pane ----"
	cat "$TMP/pane.txt"
	return 1
}
