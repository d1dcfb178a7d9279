#!/usr/bin/env bash
# Plug-ins that segfault, abort(), hang and eat memory (on windows 1, 9
# and 17; tests/policyhost/broken_plugin.c) run beside the built-in
# schedule in one job, while a second job runs the built-in alone. For
# each, through a real bellowsd and real sim ranks: both jobs get every
# decision (agreed=yes), STATUS answers throughout, the fault is recorded
# as an event (STATUS and the history database) with the worker started
# again, and bellowsd itself stays small (its RSS, also after the plug-in
# that allocates until malloc fails). Last, a plug-in whose entry
# function crashes is refused by policy check and by a reload, and both
# live on.
. "$(dirname "$0")/lib.sh"

TIMEOUT_MS=300
plugin() { echo "$BUILD/tests/policyhost/libbroken_$1.so"; }

cat >"$TMP/policy.yaml" <<YAML
daemon:
  apply_lag: 1
  window_timeout_ms: 3000
  rank_timeout_ms: 3000
  heartbeat_ms: 200
  plugin_timeout_ms: $TIMEOUT_MS
  plugin_memory_mb: 256
jobs:
YAML
for v in segv abort hang oom; do
	cat >>"$TMP/policy.yaml" <<YAML
  - match: "$v-*"
    policies:
      - type: schedule
        name: levels
        params:
          levels: {0: 2, 3: 1, 6: 4}
      - type: broken
        plugin: $(plugin "$v")
YAML
done
cat >>"$TMP/policy.yaml" <<YAML
  - match: "*"
    policies:
      - type: schedule
        name: levels
        params:
          levels: {0: 2, 3: 1, 6: 4}
YAML

DB="$TMP/faults.db"
start_daemon

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$DAEMON_PID/status"; }

for v in segv abort hang oom; do
	# The faulty job and a built-in-only job side by side; STATUS is
	# asked all along, each answer within a generous 5 s (a call
	# waits at most plugin_timeout_ms).
	"$BELLOWS" sim --control "$CTL" --publish "$PUB" --quiet \
	    --job "$v-job" --ranks 2 --layers 4 --windows 20 \
	    --steps-per-window 5 --step-ms 10 \
	    >"$TMP/sim.out" 2>"$TMP/sim.err" &
	faulty=$!
	"$BELLOWS" sim --control "$CTL" --publish "$PUB" --quiet \
	    --job "clean-$v" --ranks 2 --layers 4 --windows 20 \
	    --steps-per-window 5 --step-ms 10 \
	    >"$TMP/clean.out" 2>"$TMP/clean.err" &
	clean=$!
	asked=0
	while kill -0 "$faulty" 2>/dev/null || kill -0 "$clean" 2>/dev/null; do
		"$BELLOWS" status --control "$CTL" --timeout-ms 5000 \
		    >/dev/null 2>&1 ||
		    fail "$v: STATUS went unanswered while the plug-in failed"
		kill -0 "$DAEMON_PID" 2>/dev/null ||
		    fail "$v: bellowsd died"
		asked=$((asked + 1))
		sleep 0.1
	done
	wait "$faulty" || fail "$v: the faulty job's sim exited with $?"
	expect_agreed 2 20
	wait "$clean" || {
		cp "$TMP/clean.out" "$TMP/sim.out"
		cp "$TMP/clean.err" "$TMP/sim.err"
		fail "$v: the built-in job's sim exited with $?"
	}
	tail -n 1 "$TMP/clean.out" | grep -q "agreed=yes" ||
	    fail "$v: the built-in job did not agree"
	ok "$v: both jobs got every decision; STATUS answered $asked times"

	"$BELLOWS" status --control "$CTL" --job "$v-job" >"$TMP/status.out" ||
	    fail "$v: status failed"
	grep -q "plugin_failed" "$TMP/status.out" ||
	    fail "$v: STATUS shows no plugin_failed event"
	grep -q "plugin_restarted" "$TMP/status.out" ||
	    fail "$v: STATUS shows no plugin_restarted event"
	ok "$v: STATUS shows the failure and the restart"
	"$BELLOWS" status --control "$CTL" --job "clean-$v" \
	    >"$TMP/status.out" || fail "$v: status failed"
	if grep -q "plugin_failed" "$TMP/status.out"; then
		fail "$v: the built-in job shows a plug-in failure"
	fi
	ok "$v: the built-in job saw no plug-in event"

	rss=$(rss_kb)
	[ "$rss" -lt 102400 ] ||
	    fail "$v: bellowsd holds $rss kB (more than 100 MB)"
	ok "$v: bellowsd's RSS is $rss kB"
done

# What the failures were, from the log and the history.
# A sanitizer-built worker reports a crash itself and exits with a
# status instead of dying of the signal, and runs without the memory cap
# (the plug-in is then stopped by its deadline while it fills memory).
asan=no
ldd "$BUILD/controller/bellows-plugin-worker" | grep -q libasan && asan=yes
worker_logged() {
	grep -q "libbroken_$1.so.*the worker $2" "$TMP/bellowsd.log" ||
	    { [ "$asan" = yes ] &&
	    grep -q "libbroken_$1.so.*the worker $3" "$TMP/bellowsd.log"; }
}
worker_logged segv "was killed by signal 11" "exited with status" ||
    fail "no segfault logged"
worker_logged abort "was killed by signal 6" "exited with status" ||
    fail "no abort logged"
worker_logged hang "did not answer within $TIMEOUT_MS ms" - ||
    fail "no deadline logged"
worker_logged oom "ran out of memory (plugin_memory_mb 256)" \
    "did not answer within $TIMEOUT_MS ms" ||
    fail "no memory exhaustion logged"
ok "the log says how each worker failed"

# A plug-in whose entry function crashes is refused, by policy check and
# by a reload, without taking either down.
cat >"$TMP/crash.yaml" <<YAML
jobs:
  - match: "*"
    policies:
      - type: broken
        plugin: $(plugin entry_crash)
YAML
"$BELLOWS" policy check "$TMP/crash.yaml" >"$TMP/check.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "policy check of a crashing plug-in exited $rc"
grep -q "crash.yaml:5:17: plugin '.*libbroken_entry_crash.so' crashed while loading" \
    "$TMP/check.out" || fail "policy check did not say: $(cat "$TMP/check.out")"
ok "policy check refuses a plug-in whose entry crashes, at its position"
cp "$TMP/crash.yaml" "$TMP/policy.yaml.new"
mv "$TMP/policy.yaml.new" "$TMP/policy.yaml"
for _ in $(seq 1 100); do
	grep -q "reload refused.*crashed while loading" "$TMP/bellowsd.log" &&
	    break
	sleep 0.05
done
grep -q "reload refused.*crashed while loading" "$TMP/bellowsd.log" ||
    fail "the reload of a crashing plug-in was not refused"
"$BELLOWS" status --control "$CTL" --timeout-ms 5000 >"$TMP/status.out" ||
    fail "STATUS went unanswered after the crashing reload"
grep -q "reload_refused" "$TMP/status.out" ||
    fail "STATUS shows no reload_refused event"
ok "bellowsd refuses to reload a plug-in whose entry crashes, and serves on"
kill_daemon TERM
for v in segv abort hang oom; do
	n=$(sqlite3 "$DB" "SELECT count(*) FROM events
	    WHERE kind = 'plugin_failed' AND job = '$v-job'")
	[ "$n" -ge 1 ] || fail "$v: no plugin_failed event in the history"
	n=$(sqlite3 "$DB" "SELECT count(*) FROM events
	    WHERE kind = 'plugin_restarted' AND job = '$v-job'")
	[ "$n" -ge 1 ] || fail "$v: no plugin_restarted event in the history"
	# Between failures the plug-in decided through its worker.
	# (LR scale 0.5 and 0.25 in turn: each is a change recorded.)
	n=$(sqlite3 "$DB" "SELECT count(*) FROM decisions d JOIN runs r
	    ON r.id = d.run_id WHERE r.job = '$v-job'
	    AND d.reason LIKE '%broken: window %'")
	[ "$n" -ge 3 ] || fail "$v: the plug-in decided $n windows through" \
	    "its worker: $(sqlite3 "$DB" "SELECT window, policy, reason
	    FROM decisions d JOIN runs r ON r.id = d.run_id
	    WHERE r.job = '$v-job'")"
done
ok "the history holds every failure and restart, and the plug-in's decisions"
