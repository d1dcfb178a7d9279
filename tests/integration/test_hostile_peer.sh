#!/usr/bin/env bash
# A hostile peer floods the control socket (garbage, truncated and
# multi-frame messages, a wrong version, huge layer tables and worlds,
# unknown jobs, claims on ranks of the live job, reports for ranks it does
# not hold) while a real 4-rank job runs: the job is served correctly,
# bellowsd stays up, and STATUS counts the drops against the peer.
. "$(dirname "$0")/lib.sh"

HOSTILE="$BUILD/tests/integration/hostile"
start_daemon
"$HOSTILE" "$CTL" victim 20000 >"$TMP/hostile.out" 2>&1 &
HPID=$!
run_sim --job victim --ranks 4 --layers 6 --windows 12 \
    --steps-per-window 10 --step-ms 2 || fail "sim exited with $?"
wait "$HPID" || fail "hostile peer failed"
ok "$(cat "$TMP/hostile.out")"
expect_agreed 4 12
kill -0 "$DAEMON_PID" || fail "bellowsd died"
ok "bellowsd still running"
"$BELLOWS" status --control "$CTL" --format json >"$TMP/status.json" ||
    fail "status failed"
python3 - "$TMP/status.json" <<'PY' || fail "drops not counted"
import json, sys
st = json.load(open(sys.argv[1]))
dropped = st.get("dropped", 0)
peers = st.get("peers", [])
assert dropped > 1000, f"only {dropped} drops counted"
assert peers and max(p["dropped"] for p in peers) > 1000, peers
print(f"ok: {dropped} messages dropped, worst peer {max(p['dropped'] for p in peers)}")
PY
