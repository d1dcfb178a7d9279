#!/bin/sh
# With daemon.security a report may cover only ranks its own client
# holds: client ops holds rank 0 of a 4-rank job and client alice ranks
# 1-3; ops' report for rank 0 that says it covers all 4 ranks is refused
# with EPERM and records nothing, while alice's reports are recorded and
# her ranks get decisions. A report of alice covering only ranks she
# holds is taken.
. "$(dirname "$0")/lib.sh"

CC="$BUILD/tests/integration/curve_client"
K="$TMP/keys"
C="$TMP/clients"
H="$TMP/history.db"
mkdir -p "$K" "$C"
for n in server ops alice; do
	"$CC" keygen "$K" "$n" || fail "keygen $n"
done
cp "$K/ops.pub" "$K/alice.pub" "$C/"
cat >"$TMP/policy.yaml" <<YAML
daemon:
  apply_lag: 1
  window_timeout_ms: 3000
  rank_timeout_ms: 1000
  heartbeat_ms: 200
  security:
    server_key: keys/server.key
    clients: clients
jobs:
  - match: "train-*"
    clients: [ops, alice]
    policies:
      - type: schedule
        params:
          levels: {0: 2}
YAML
as() {
	echo "$K/server.pub $K/$1.key"
}
"$BELLOWSD" --control "$CTL" --publish "$PUB" --policy "$TMP/policy.yaml" \
    --log-level info --db "$H" >>"$TMP/bellowsd.log" 2>&1 &
DAEMON_PID=$!
for _ in $(seq 1 100); do
	"$CC" status "$CTL" $(as ops) >/dev/null 2>&1 && break
	sleep 0.05
done

# ops joins as rank 0 first and keeps sending its covering report.
"$CC" cover "$CTL" train-x 4 0 4 4000 $(as ops) >"$TMP/ops.out" 2>&1 &
OPS=$!
sleep 0.5
for r in 1 2 3; do
	CC_LINGER_MS=1500 "$CC" run "$CTL" "$PUB" train-x 4 $r $(as alice) \
	    >"$TMP/alice$r.out" 2>&1 &
	eval "A$r=\$!"
done
wait "$OPS" || { cat "$TMP/ops.out"; fail "ops' client failed"; }
for r in 1 2 3; do
	eval "wait \$A$r" ||
	    { cat "$TMP/alice$r.out"; fail "alice's rank $r got no decision"; }
done
grep -q "^welcome" "$TMP/ops.out" || { cat "$TMP/ops.out"; fail "ops did not join"; }
grep -q "error -19: report of rank 0 covers rank 1 of job 'train-x', which client 'ops' does not hold" \
    "$TMP/ops.out" || { cat "$TMP/ops.out"; fail "the covering report was not refused with EPERM"; }
grep -q "^errors 0" "$TMP/ops.out" && fail "no report of ops was refused"
ok "a report of ops covering alice's ranks is refused with EPERM"

sql() {
	sqlite3 "$H" "$1"
}
run=$(sql "SELECT id FROM runs WHERE job = 'train-x'")
[ -n "$run" ] || fail "train-x has no run"
[ "$(sql "SELECT count(*) FROM timings WHERE run_id = $run AND rank = 0")" = 0 ] ||
    fail "a refused covering report was recorded"
[ "$(sql "SELECT count(*) FROM window_info WHERE run_id = $run AND ranks_reported > 3")" = 0 ] ||
    fail "a window counts more ranks than alice's 3"
for r in 1 2 3; do
	[ "$(sql "SELECT count(*) FROM timings WHERE run_id = $run AND rank = $r")" -gt 0 ] ||
	    fail "no report of alice's rank $r was recorded"
done
grep -q "stale report" "$TMP/bellowsd.log" &&
    fail "reports were dropped as stale"
ok "nothing of ops' report is recorded; alice's reports are, none stale"

# A cover over the client's own ranks stands: alice holds ranks 0-2 of
# train-y, and her rank 0 reports for all three.
for r in 1 2; do
	CC_LINGER_MS=2000 "$CC" run "$CTL" "$PUB" train-y 3 $r $(as alice) \
	    >"$TMP/y$r.out" 2>&1 &
	eval "Y$r=\$!"
done
sleep 0.5
"$CC" cover "$CTL" train-y 3 0 3 1000 $(as alice) >"$TMP/own.out" 2>&1 ||
    { cat "$TMP/own.out"; fail "alice could not join rank 0 of train-y"; }
wait "$Y1" "$Y2"
grep -q "^errors 0" "$TMP/own.out" ||
    { cat "$TMP/own.out"; fail "a cover over the client's own ranks was refused"; }
ok "a report covering only the client's own ranks is taken"
