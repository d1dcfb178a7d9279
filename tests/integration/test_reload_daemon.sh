#!/bin/sh
# bellowsd reloads its policy file while a job runs, by inotify and on
# SIGHUP: a valid change takes effect (logged, a reload_ok event, the new
# policy decides); an invalid file is refused with FILE:LINE:COLUMN in the
# log and a reload_refused event, and the policies in force stay (a file
# with several errors is refused once: each error is logged, the event
# holds the first and "(and N more)"); SIGHUP reloads even a file that did
# not change. The job agrees throughout.
. "$(dirname "$0")/lib.sh"

P="$TMP/policy.yaml"

# count PATTERN: lines of the daemon's log that hold PATTERN.
count() {
	grep -c -- "$1" "$TMP/bellowsd.log" 2>/dev/null || true
}

# wait_count PATTERN N WHAT: waits up to 10 s for N such lines.
wait_count() {
	for _ in $(seq 1 200); do
		[ "$(count "$1")" -ge "$2" ] && return 0
		sleep 0.05
	done
	fail "$3: expected $2 log lines with '$1', found $(count "$1")"
}

# status_has PATTERN WHAT: the job's STATUS holds PATTERN.
status_has() {
	"$BELLOWS" status --control "$CTL" >"$TMP/status.out" 2>&1 ||
	    fail "bellows status failed"
	grep -q -- "$1" "$TMP/status.out" ||
	    { cat "$TMP/status.out"; fail "$2"; }
}

# valid_config NAME LEVEL: a schedule named NAME holding LEVEL.
valid_config() {
	cat >"$P.new" <<YAML
daemon:
  apply_lag: 1
  window_timeout_ms: 3000
  rank_timeout_ms: 1500
  heartbeat_ms: 200
jobs:
  - match: "*"
    policies:
      - type: schedule
        name: $1
        params:
          levels: {0: $2}
YAML
	mv "$P.new" "$P"
}

valid_config before 2
start_daemon
"$BELLOWS" sim --control "$CTL" --publish "$PUB" --quiet --job reload \
    --ranks 2 --layers 4 --windows 120 --steps-per-window 10 --step-ms 15 \
    --record-levels "$TMP/levels.csv" >"$TMP/sim.out" 2>"$TMP/sim.err" &
SIM=$!
for _ in $(seq 1 100); do
	"$BELLOWS" status --control "$CTL" 2>/dev/null | grep -q "job 'reload'" &&
	    break
	sleep 0.05
done
status_has "policies: before" "the job does not run policy 'before'"
ok "job runs with policy 'before'"

# 1. A valid change, seen by inotify.
valid_config after 3
wait_count "configuration reloaded from '$P'" 1 "inotify reload"
sleep 1 # a few windows under the new policy
status_has "policies: after" "the reloaded policy 'after' is not in force"
status_has "reload_ok" "no reload_ok event"
ok "a valid rewrite is reloaded through inotify and 'after' decides"

# 2. An invalid file, seen by inotify: refused with its position.
cat >"$P.new" <<YAML
jobs:
  - match: "*"
    policies:
      - type: schedule
        name: broken
        params:
          levels: {0: 3}
          bogus: 1
YAML
mv "$P.new" "$P"
wait_count "reload refused" 1 "inotify refusal"
grep -q "reload refused, the running configuration stays: $P:8:11: policy type 'schedule' has no parameter 'bogus'" \
    "$TMP/bellowsd.log" || fail "the refusal does not give FILE:LINE:COLUMN"
sleep 0.5
status_has "policies: after" "the refused file replaced policy 'after'"
status_has "reload_refused" "no reload_refused event"
ok "an invalid rewrite is refused at $P:8:11 and 'after' stays"

# 3. A file with two independent errors: one refusal that names the
# first and says one more follows, and the second on a line of its own.
cat >"$P.new" <<YAML
daemon:
  apply_lagg: 1
jobs:
  - match: "*"
    policies:
      - type: schedule
        name: broken
        params:
          levels: {0: 3}
          bogus: 1
YAML
mv "$P.new" "$P"
wait_count "reload refused" 2 "refusal of two errors"
grep -q "reload refused, the running configuration stays: $P:2:3: unknown key 'apply_lagg' in daemon (did you mean 'apply_lag'?) (and 1 more)\$" \
    "$TMP/bellowsd.log" ||
    fail "the refusal does not name the first error and count the other"
wait_count "reload: $P:10:11: policy type 'schedule' has no parameter 'bogus'\$" \
    1 "the second error"
status_has "reload_refused .*$P:2:3: unknown key 'apply_lagg' in daemon (did you mean 'apply_lag'?) (and 1 more)" \
    "the reload_refused event does not say '(and 1 more)'"
status_has "policies: after" "the refused file replaced policy 'after'"
ok "two errors are refused once, both logged, '(and 1 more)' in STATUS"

# 4. SIGHUP reads the (still invalid) file again: refused again.
kill -HUP "$DAEMON_PID"
wait_count "reload refused" 3 "SIGHUP refusal"
ok "SIGHUP on the invalid file is refused too"

# 5. A valid file again (inotify; level 4, since a text identical to
# the one in force is left alone), then SIGHUP without a change: SIGHUP
# forces a reload that inotify would skip.
valid_config after 4
wait_count "configuration reloaded from '$P'" 2 "reload of the fixed file"
kill -HUP "$DAEMON_PID"
wait_count "configuration reloaded from '$P'" 3 "SIGHUP reload"
ok "SIGHUP reloads an unchanged valid file"

wait "$SIM" || fail "sim exited with $?"
expect_agreed 2 120
# The last windows ran under the last file: level 4 on every weight
# (biases are 1-D: not selected, they stay raw).
tail -n 4 "$TMP/levels.csv" | awk -F, '$2 ~ /weight/ && $NF != 4 { bad = 1 } END { exit bad }' ||
    { tail -n 8 "$TMP/levels.csv"; fail "the last windows are not at level 4"; }
ok "the job ended at the reloaded policy's level 4"
kill -0 "$DAEMON_PID" || fail "bellowsd died"
