#!/bin/sh
# bellowsd reads a reloaded file off its event loop: while a job runs and
# STATUS is asked again and again, a file nested 64k levels deep is
# refused at its FILE:LINE:COLUMN, and files that take longer to read
# than reload_timeout_ms (100 ms here) are abandoned with a
# reload_refused event, SIGHUPs that arrive meanwhile folded into one more
# reading. STATUS answers within 100 ms throughout: each probe is a
# `bellows status --timeout-ms 100`, which fails unless the answer comes
# within 100 ms of the request; at most two may fail, for a shared and
# noisy machine (a loop stalled by the readings of this test fails every
# probe for as long as each reading takes, six to eight of them), and
# the median run of the command, process start included, must be within
# 100 ms as well. Decisions keep flowing, the policy
# in force stays, and a SIGTERM that comes while a reading is out stops
# bellowsd cleanly. Last, bellowsd's start and bellows policy check refuse
# the deep file and one of 16 MiB + 1 byte with the same message.
. "$(dirname "$0")/lib.sh"

P="$TMP/policy.yaml"
RTT="$TMP/rtt"

# count PATTERN: lines of the daemon's log that hold PATTERN.
count() {
	grep -c -- "$1" "$TMP/bellowsd.log" 2>/dev/null || true
}

# wait_count PATTERN N WHAT: waits up to 20 s for N such lines.
wait_count() {
	for _ in $(seq 1 400); do
		[ "$(count "$1")" -ge "$2" ] && return 0
		sleep 0.05
	done
	fail "$3: expected $2 log lines with '$1', found $(count "$1")"
}

# window: the job's window number in STATUS.
window() {
	"$BELLOWS" status --control "$CTL" --job offloop 2>/dev/null |
	    sed -n "s/^job 'offloop':.* window \([0-9]*\),.*/\1/p"
}

# probe: measures STATUS round trips until $TMP/stop exists, one line per
# probe in $RTT: milliseconds, or "fail".
probe() {
	while [ ! -e "$TMP/stop" ] && [ -d "$TMP" ]; do
		t0=$(date +%s%N)
		if "$BELLOWS" status --control "$CTL" --timeout-ms 100 \
		    >/dev/null 2>&1; then
			t1=$(date +%s%N)
			echo $(((t1 - t0) / 1000000)) >>"$RTT"
		else
			echo fail >>"$RTT"
		fi
	done
}

# deep_file FILE: a valid start, then 65536 nested flow lists.
deep_file() {
	awk 'BEGIN {
		printf "jobs: [{policies: [{type: fixed}]}]\nx: "
		for (i = 0; i < 65536; i++) printf "["
		for (i = 0; i < 65536; i++) printf "]"
		printf "\n"
	}' >"$1"
}

# heavy_file FILE: about 14 MB and 990000 values, within every limit;
# parsing it takes about 0.4 s on a 2-core machine, four times the
# reload_timeout_ms of this test.
heavy_file() {
	awk 'BEGIN {
		printf "jobs: [{policies: [{type: fixed}]}]\nx: [a"
		for (i = 1; i < 990000; i++) printf ",aaaaaaaaaaaaa"
		printf "]\n"
	}' >"$1"
}

cat >"$P" <<YAML
daemon:
  apply_lag: 1
  window_timeout_ms: 3000
  rank_timeout_ms: 1500
  heartbeat_ms: 200
  reload_timeout_ms: 100
jobs:
  - match: "*"
    policies:
      - type: schedule
        name: before
        params:
          levels: {0: 3}
YAML
deep_file "$TMP/deep.yaml"
heavy_file "$TMP/heavy.yaml"
start_daemon
"$BELLOWS" sim --control "$CTL" --publish "$PUB" --quiet --job offloop \
    --ranks 2 --layers 4 --windows 150 --steps-per-window 10 --step-ms 5 \
    --record-levels "$TMP/levels.csv" >"$TMP/sim.out" 2>"$TMP/sim.err" &
SIM=$!
for _ in $(seq 1 100); do
	"$BELLOWS" status --control "$CTL" 2>/dev/null |
	    grep -q "job 'offloop'" && break
	sleep 0.05
done
"$BELLOWS" status --control "$CTL" | grep -q "policies: before" ||
    fail "the job does not run policy 'before'"
w0=$(window)
ok "job runs with policy 'before' (window $w0)"

probe &
PROBE=$!
trap 'kill "$PROBE" 2>/dev/null; cleanup' EXIT

# 1. 64k levels deep: refused at the 64th '[' of line 2 (column 3 + 64),
# which opens level 65 under the top mapping.
cp "$TMP/deep.yaml" "$P.new"
mv "$P.new" "$P"
wait_count "reload refused, the running configuration stays: $P:2:67: nested more than 64 levels deep" \
    1 "the deep file"
ok "a file 64k levels deep is refused at $P:2:67"

# 2. A file that takes longer than reload_timeout_ms, seen by inotify,
# with two SIGHUPs while it is read: abandoned, then read once more.
cp "$TMP/heavy.yaml" "$P.new"
mv "$P.new" "$P"
kill -HUP "$DAEMON_PID"
kill -HUP "$DAEMON_PID"
# Three refusals in all: the deep file, the heavy one and the reading
# the SIGHUPs folded into one (whether read on the loop or abandoned:
# STATUS is judged first, the abandonment after).
wait_count "reload refused" 3 "the heavy file"
sleep 1 # the last abandoned reading ends, unused
w1=$(window)
touch "$TMP/stop"
wait "$PROBE"

n=$(wc -l <"$RTT")
failed=$(grep -c fail "$RTT")
median=$(grep -v fail "$RTT" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
allowed=2
echo "STATUS probes: $n, $failed without an answer within 100 ms (allowed $allowed); bellows status ran for a median ${median} ms, max $(grep -v fail "$RTT" | sort -n | tail -n 1) ms, process start included"
[ "$n" -ge 10 ] || fail "only $n STATUS probes"
[ "$median" -le 100 ] || fail "bellows status ran for a median ${median} ms"
[ "$failed" -le "$allowed" ] ||
    fail "$failed STATUS probes had no answer within 100 ms"
ok "STATUS answered within 100 ms throughout the reloads"

# The first SIGHUP's reading, then one for the second SIGHUP and the
# change on disk (a third if the change is seen only after that one
# started).
n_abandoned=$(count "reading took longer than reload_timeout_ms (100 ms) and was abandoned")
[ "$n_abandoned" -ge 2 ] && [ "$n_abandoned" -le 3 ] ||
    fail "the heavy file was abandoned $n_abandoned times, expected 2 or 3"
ok "the heavy file was abandoned $n_abandoned times, the requests folded"

[ "$w1" -gt "$w0" ] || fail "no window was decided during the reloads ($w0, then $w1)"
ok "decisions kept flowing: window $w0, then $w1"

"$BELLOWS" status --control "$CTL" >"$TMP/status.out" 2>&1 ||
    fail "bellows status failed"
grep -q "policies: before" "$TMP/status.out" ||
    { cat "$TMP/status.out"; fail "the refused files replaced policy 'before'"; }
grep -q "reload_refused .*reading took longer than reload_timeout_ms (100 ms) and was abandoned" \
    "$TMP/status.out" ||
    { cat "$TMP/status.out"; fail "no reload_refused event for the abandoned reading"; }
grep -q "reload_refused .*$P:2:67: nested more than 64 levels deep" \
    "$TMP/status.out" ||
    { cat "$TMP/status.out"; fail "no reload_refused event for the deep file"; }
[ "$(count "configuration reloaded")" -eq 0 ] || fail "a refused file was put in force"
ok "the old configuration stays, both refusals are events in STATUS"

wait "$SIM" || fail "sim exited with $?"
expect_agreed 2 150
awk -F, '$2 ~ /weight/ && $NF != 3 { bad = 1 } END { exit bad }' "$TMP/levels.csv" ||
    fail "a window was decided at a level other than policy 'before''s 3"
ok "every window ran at policy 'before''s level"

# 3. SIGTERM while a reading is out: bellowsd cancels it and exits 0.
kill -HUP "$DAEMON_PID"
kill_daemon TERM
ok "SIGTERM during a reading stops bellowsd cleanly"

# 4. bellowsd's start and bellows policy check refuse the same files at
# the same place: the deep file, and a file one byte over 16 MiB (one of
# exactly 16 MiB is read).
check_same() { # FILE WHAT
	"$BELLOWS" policy check "$1" >/dev/null 2>"$TMP/check.err" &&
	    fail "bellows policy check accepted $2"
	"$BELLOWSD" --policy "$1" --no-db --control "ipc://$TMP/c2" \
	    --publish "ipc://$TMP/p2" >/dev/null 2>"$TMP/start.err" &&
	    fail "bellowsd started with $2"
	sed 's/^bellowsd: //' "$TMP/start.err" | grep -v " main: " >"$TMP/start.msg"
	diff "$TMP/check.err" "$TMP/start.msg" >/dev/null ||
	    { cat "$TMP/check.err" "$TMP/start.err"; fail "policy check and bellowsd disagree on $2"; }
	head -n 1 "$TMP/check.err"
}
check_same "$TMP/deep.yaml" "the deep file" | grep -q "deep.yaml:2:67: nested more than 64 levels deep" ||
    fail "the deep file is not refused at 2:67 by both"
awk 'BEGIN {
	printf "jobs: [{policies: [{type: fixed}]}]\n"
	for (n = 36; n + 100 <= 16777216; n += 100) printf "#%098d\n", 0
	for (; n < 16777215; n++) printf "#"
	printf "\n"
}' >"$TMP/max.yaml"
[ "$(wc -c <"$TMP/max.yaml")" -eq 16777216 ] || fail "max.yaml is not 16 MiB"
"$BELLOWS" policy check "$TMP/max.yaml" >/dev/null ||
    fail "bellows policy check refused a file of exactly 16 MiB"
printf '#' >>"$TMP/max.yaml"
check_same "$TMP/max.yaml" "a file of 16 MiB + 1 byte" |
    grep -q "max.yaml:[0-9]*:[0-9]*: the file is longer than 16 MiB (16777216 bytes)" ||
    fail "the file of 16 MiB + 1 byte is not refused by both"
ok "bellowsd and bellows policy check refuse the deep file and 16 MiB + 1 byte alike; 16 MiB passes"
