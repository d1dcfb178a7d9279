#!/usr/bin/env bash
# Hellos cannot make bellowsd hold more than its memory budgets: a client
# says Hello for 40 distinct jobs, each with 30,000 layers of 200-byte
# names (a 6 MB Hello; some 10 MB held per job admitted, 400 MB for all
# 40 without budgets). With max_total_job_mb 512, bellowsd admits the
# jobs whose worst case fits (tests/integration/hello_flood prints the
# count) and refuses the others with ELIMIT and a message naming
# max_total_job_mb; a job whose worst case alone exceeds max_job_mb (4096
# ranks of 2,000 layers) is refused naming that; its peak RSS grows by a
# bounded amount, and it still serves a job afterwards.
. "$(dirname "$0")/lib.sh"

BOUND_KB=${BOUND_KB:-131072}

cat >"$TMP/policy.yaml" <<YAML
daemon:
  apply_lag: 1
  window_timeout_ms: 3000
  rank_timeout_ms: 1500
  heartbeat_ms: 200
  max_job_mb: ${JOB_MB:-256}
  max_total_job_mb: ${TOTAL_MB:-512}
jobs:
  - match: "*"
    policies:
      - type: schedule
        name: levels
        params:
          levels: {0: 2, 3: 1}
YAML
DAEMON_ARGS=--no-db start_daemon
before=$(daemon_kb VmRSS)

"$BUILD/tests/integration/hello_flood" "$CTL" 40 30000 1 200 \
    >"$TMP/flood.out" 2>&1 || { cat "$TMP/flood.out"; fail "hello_flood failed"; }
cat "$TMP/flood.out"
echo "bellowsd after 40 hellos: peak VmRSS $(daemon_kb VmHWM) kB"
welcomed=$(sed -n 's/^hello_flood: \([0-9]*\) welcomed$/\1/p' "$TMP/flood.out")
[ -n "$welcomed" ] && [ "$welcomed" -ge 1 ] && [ "$welcomed" -lt 40 ] ||
    fail "$welcomed of 40 jobs welcomed: the budget did not apply"
grep -q "refused (limit exceeded): job 'flood-$welcomed' could hold up to [0-9]* MiB, and the $welcomed jobs held may hold [0-9]* MiB: more than max_total_job_mb (512)" \
    "$TMP/flood.out" || fail "the refusal does not name max_total_job_mb"
ok "$welcomed jobs admitted, the rest refused naming max_total_job_mb"

"$BUILD/tests/integration/hello_flood" "$CTL" 1 2000 4096 16 wide \
    >"$TMP/flood.out" 2>&1 || { cat "$TMP/flood.out"; fail "hello_flood failed"; }
cat "$TMP/flood.out"
grep -q "could hold up to [0-9]* MiB, more than max_job_mb (256)" \
    "$TMP/flood.out" || fail "a job over max_job_mb was not refused naming it"
ok "a job of 4096 ranks and 2000 layers is refused naming max_job_mb"

peak=$(daemon_kb VmHWM)
growth=$((peak - before))
echo "bellowsd: VmRSS ${before} kB before, peak ${peak} kB (grew ${growth} kB)"
if daemon_sanitized; then
	ok "bellowsd's RSS is not checked under AddressSanitizer"
else
	[ "$growth" -le "$BOUND_KB" ] ||
	    fail "bellowsd's peak RSS grew by ${growth} kB, more than ${BOUND_KB} kB"
	ok "bellowsd's peak RSS grew by ${growth} kB (bound ${BOUND_KB} kB)"
fi

run_sim --job after --ranks 2 --layers 4 --windows 6 --steps-per-window 5 ||
    fail "sim exited with $?"
expect_agreed 2 6
kill_daemon TERM
