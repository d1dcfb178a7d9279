#!/bin/bash
# idle.sh - what `bellows top` costs while it only watches, and whether it
# flickers.
#
#   bench/top/idle.sh [BUILD_DIR] [SECONDS]
#   LAYERS=100 FILL=2000 bench/top/idle.sh [BUILD_DIR] [SECONDS]
#
# Starts a real bellowsd and a `bellows sim` job that keeps running (3
# ranks, LAYERS layers (default 8), a window a second), then `bellows top`
# in a tmux pane
# of 100x30 on the layers view, refreshing once a second as it does by
# default. For SECONDS (default 60) after a 5 s settling time it reads
# the CPU time of the bellows top process from /proc/PID/stat and
# records everything top writes to its terminal (tmux pipe-pane). It
# prints:
#   - CPU: top's user+system time as a share of one core;
#   - bytes written per second and per refresh;
#   - full-screen clears (ESC[2J, or the terminfo `clear`) after the first
#     frame: a dashboard that redraws only what changed writes none, so
#     the screen does not flicker.
# With FILL=N the job first runs as fast as it can (1 rank, one step a
# window) until the history holds N windows (N x LAYERS rows of layer
# windows), then is stopped (SIGSTOP; its ranks are soon lost but the job
# and its run stay live) and top is measured against that long run: what
# a refresh costs must not grow with the run's length.
# The last line reads
#   top idle: cpu=X.XX% bytes/s=N clears=N (SECONDS s)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$root/build}
secs=${2:-60}
layers=${LAYERS:-8}
fill=${FILL:-0}
bellowsd=$build/controller/bellowsd
bellows=$build/tools/bellows
command -v tmux >/dev/null || { echo "idle.sh: needs tmux" >&2; exit 1; }
[ -x "$bellows" ] || { echo "idle.sh: no $bellows (build first)" >&2; exit 1; }

tmp=$(mktemp -d /tmp/bellows-top-idle.XXXXXX)
ctl=ipc://$tmp/control
pub=ipc://$tmp/publish
sock=$tmp/tmux.sock
daemon_pid=
sim_pid=
cleanup()
{
	tmux -S "$sock" kill-server 2>/dev/null || true
	[ -n "$sim_pid" ] && kill -CONT -- -"$sim_pid" 2>/dev/null
	[ -n "$sim_pid" ] && kill -TERM "$sim_pid" 2>/dev/null
	[ -n "$daemon_pid" ] && kill -TERM "$daemon_pid" 2>/dev/null
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

"$bellowsd" --control "$ctl" --publish "$pub" \
	--policy "$root/examples/policies/demo.yaml" --db "$tmp/h.db" \
	>"$tmp/bellowsd.log" 2>&1 &
daemon_pid=$!
sleep 0.5
if [ "$fill" -gt 0 ]; then
	# Its own process group, so that its ranks stop with it.
	setsid "$bellows" sim --control "$ctl" --publish "$pub" --quiet \
		--job idle --ranks 1 --layers "$layers" --windows 1000000 \
		--steps-per-window 1 >/dev/null 2>&1 &
	sim_pid=$!
	t_fill=$(date +%s)
	while :; do
		n=$(python3 -c 'import sqlite3, sys
try:
    c = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
    print(c.execute("SELECT count(*) FROM window_info").fetchone()[0])
except Exception:
    print(0)' "$tmp/h.db")
		[ "$n" -ge "$fill" ] && break
		kill -0 "$sim_pid" 2>/dev/null ||
			{ echo "idle.sh: the filling sim ended" >&2; exit 1; }
		sleep 1
	done
	kill -STOP -- -"$sim_pid"
	echo "filled $n windows x $layers layers in $(($(date +%s) - t_fill)) s"
else
	"$bellows" sim --control "$ctl" --publish "$pub" --quiet --job idle \
		--ranks 3 --layers "$layers" --windows 100000 \
		--steps-per-window 10 --step-ms 100 >/dev/null 2>&1 &
	sim_pid=$!
fi

tmux -S "$sock" new-session -d -s top -x 100 -y 30 \
	"$bellows top --control $ctl --publish $pub --db $tmp/h.db --job idle; sleep 60"
sleep 2
tmux -S "$sock" send-keys -t top Tab Tab
top_pid=
for p in $(pgrep -f "bellows top --control $ctl"); do
	# The pane's shell matches too; the dashboard is the `bellows` one.
	[ "$(cat "/proc/$p/comm" 2>/dev/null)" = bellows ] && top_pid=$p
done
[ -n "$top_pid" ] || { echo "idle.sh: bellows top did not start" >&2; exit 1; }
sleep 3

ticks=$(getconf CLK_TCK)
cpu_of() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
tmux -S "$sock" pipe-pane -t top "cat >$tmp/out.bin"
c0=$(cpu_of "$top_pid")
t0=$(date +%s.%N)
sleep "$secs"
c1=$(cpu_of "$top_pid")
t1=$(date +%s.%N)
tmux -S "$sock" pipe-pane -t top
sleep 0.2

clear_seq=$(tput -T screen clear 2>/dev/null | od -An -c | tr -d ' \n')
python3 - "$tmp/out.bin" "$c0" "$c1" "$t0" "$t1" "$ticks" <<'PY'
import sys
path, c0, c1, t0, t1, ticks = sys.argv[1:]
data = open(path, "rb").read()
wall = float(t1) - float(t0)
cpu = (int(c1) - int(c0)) / int(ticks) / wall * 100.0
clears = data.count(b"\x1b[2J") + data.count(b"\x1b[H\x1b[J")
print(f"wall {wall:.1f} s, bellows top CPU {cpu:.2f} % of one core")
print(f"terminal output {len(data)} bytes, {len(data) / wall:.0f} bytes/s "
      f"(~{len(data) / wall:.0f} bytes per 1 s refresh; a full 100x30 "
      f"screen is >= 3000)")
print(f"full-screen clears after the first frame: {clears}")
print(f"top idle: cpu={cpu:.2f}% bytes/s={len(data) / wall:.0f} "
      f"clears={clears} ({wall:.0f} s)")
PY
