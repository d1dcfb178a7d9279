#!/bin/sh
# Without daemon.security bellowsd refuses to bind an endpoint other hosts
# can reach (a wildcard tcp address) and says why; with allow_insecure it
# binds and warns. And without security a Hello whose layer table
# conflicts with a live job is refused (EMISMATCH) while the job goes on
# deciding, with one run in the history.
. "$(dirname "$0")/lib.sh"

CC="$BUILD/tests/integration/curve_client"
write_config "$TMP/policy.yaml"
PORT=$((20000 + $$ % 20000))

"$BELLOWSD" --control "tcp://0.0.0.0:$PORT" --publish "$PUB" \
    --policy "$TMP/policy.yaml" --db "$TMP/refused.db" \
    >"$TMP/refused.log" 2>&1 &
REFUSED=$!
for _ in $(seq 1 100); do
	kill -0 $REFUSED 2>/dev/null || break
	sleep 0.05
done
kill -0 $REFUSED 2>/dev/null && { kill $REFUSED; fail "bellowsd bound 0.0.0.0 without security"; }
wait $REFUSED
[ $? -ne 0 ] || fail "the refusal exited 0"
grep -q "refusing to bind 'tcp://0.0.0.0:$PORT' without daemon.security" \
    "$TMP/refused.log" || { cat "$TMP/refused.log"; fail "no clear refusal"; }
ok "a wildcard endpoint without security is refused at start"

sed -i 's/^daemon:$/daemon:\n  allow_insecure: true/' "$TMP/policy.yaml"
CTL="tcp://127.0.0.1:$PORT"
"$BELLOWSD" --control "tcp://0.0.0.0:$PORT" --publish "$PUB" \
    --policy "$TMP/policy.yaml" --db "$TMP/h.db" \
    >>"$TMP/bellowsd.log" 2>&1 &
DAEMON_PID=$!
for _ in $(seq 1 100); do
	"$CC" status "$CTL" >/dev/null 2>&1 && break
	sleep 0.05
done
"$CC" status "$CTL" >/dev/null || fail "bellowsd with allow_insecure does not answer"
grep -q "reachable from other hosts without authentication" \
    "$TMP/bellowsd.log" || fail "allow_insecure is not warned about"
ok "allow_insecure binds the wildcard endpoint and warns"

CC_LINGER_MS=3000 "$CC" run "$CTL" "$PUB" job-x 1 0 >"$TMP/x.out" 2>&1 &
JOB=$!
for _ in $(seq 1 100); do
	grep -q "^decision" "$TMP/x.out" && break
	sleep 0.05
done
grep -q "^decision" "$TMP/x.out" || fail "job-x got no decision"
CC_LAYERS=3 "$CC" run "$CTL" "$PUB" job-x 1 0 >"$TMP/y.out" 2>&1
[ $? -eq 3 ] || { cat "$TMP/y.out"; fail "a conflicting Hello was not refused"; }
grep -q "error -17" "$TMP/y.out" || { cat "$TMP/y.out"; fail "not EMISMATCH"; }
wait $JOB || { cat "$TMP/x.out"; fail "job-x was disturbed"; }
"$CC" status "$CTL" | grep -q "^job job-x" || fail "job-x is gone"
[ "$(sqlite3 "$TMP/h.db" "SELECT count(*) FROM runs WHERE job='job-x'")" = 1 ] ||
    fail "the conflicting Hello changed the history"
[ "$(sqlite3 "$TMP/h.db" "SELECT n_layers FROM runs WHERE job='job-x'")" = 1 ] ||
    fail "the run's layer table changed"
ok "a conflicting Hello is refused and the live job keeps deciding"
