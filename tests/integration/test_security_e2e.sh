#!/usr/bin/env bash
# End to end with CURVE on: keys made with `bellows keygen`, a secured
# bellowsd, `bellows sim` ranks with a client key run a job and agree;
# a sim with an unknown key, one without keys and one whose client is
# not allowed for the job get no decisions (the honest sim says so) and
# leave no run in the history; `bellows status` needs a key too; after
# the allowed client's .pub is removed and bellowsd reloads, its next
# launch is refused; the history database is 0600.
. "$(dirname "$0")/lib.sh"

KEYS="$TMP/keys"
mkdir -p "$KEYS/clients" "$KEYS/own"
for n in server trainer intruder other; do
	"$BELLOWS" keygen --out "$KEYS/own" --name "$n" >/dev/null ||
	    fail "bellows keygen --name $n failed"
done
cp "$KEYS/own/trainer.pub" "$KEYS/own/other.pub" "$KEYS/clients/"
ok "keys made with bellows keygen; trainer and other are allowed"

cat >"$TMP/policy.yaml" <<YAML
daemon:
  apply_lag: 1
  window_timeout_ms: 3000
  rank_timeout_ms: 1500
  heartbeat_ms: 200
  security:
    server_key: $KEYS/own/server.key
    clients: $KEYS/clients
jobs:
  - match: "train-*"
    clients: [trainer]
    policies:
      - type: fixed
        params:
          level: 2
  - match: "*"
    policies:
      - type: fixed
        params:
          level: 1
YAML
DB="$TMP/secure.db"
start_daemon_keys() {
	BELLOWS_SERVER_KEY="$KEYS/own/server.pub" \
	BELLOWS_CLIENT_KEY="$KEYS/own/trainer.key" start_daemon
}
start_daemon_keys

# q SQL: one value from the history.
q() {
	sqlite3 -batch -noheader "file:$DB?mode=ro" "$1"
}

SIM=(--ranks 2 --layers 3 --windows 6 --steps-per-window 5
    --decision-timeout-ms 1000)
run_sim --job train-a "${SIM[@]}" --server-key "$KEYS/own/server.pub" \
    --client-key "$KEYS/own/trainer.key" || fail "the trainer's sim exited with $?"
expect_agreed 2 6
ok "an allowed client runs a job over CURVE"

for who in intruder other none; do
	args=(--server-key "$KEYS/own/server.pub")
	[ "$who" = none ] && args=() ||
	    args+=(--client-key "$KEYS/own/$who.key")
	if run_sim --job train-b "${SIM[@]}" "${args[@]}"; then
		fail "a sim as '$who' was given decisions for train-b"
	fi
	# Refused at the handshake, the sim stops before its ranks start;
	# let in but not for this job, its ranks are refused and it says
	# so in its verdict.
	why=$(grep -h -m 1 -E "refused this client's key|uses CURVE|agreed=no" \
	    "$TMP/sim.err" "$TMP/sim.out") ||
	    fail "the sim as '$who' did not say why it got nothing"
	ok "client '$who' is refused: $why"
done
grep -q "not allowed" "$TMP/bellowsd.log" ||
    fail "bellowsd did not log the refusal of a client not allowed for the job"
[ "$(q "SELECT count(*) FROM runs WHERE job = 'train-b'")" = 0 ] ||
    fail "a refused client left a run of train-b in the history"
ok "refused clients left no run in the history"

# STATUS over CURVE: the trainer sees its job, the other client does
# not (it may not read train-*), a client without keys is told why.
"$BELLOWS" status --control "$CTL" --server-key "$KEYS/own/server.pub" \
    --client-key "$KEYS/own/trainer.key" >"$TMP/status.out" 2>&1 ||
    fail "status as the trainer failed: $(cat "$TMP/status.out")"
grep -q "job 'train-a'" "$TMP/status.out" ||
    fail "status as the trainer does not show train-a"
BELLOWS_SERVER_KEY="$KEYS/own/server.pub" \
BELLOWS_CLIENT_KEY="$KEYS/own/other.key" \
    "$BELLOWS" status --control "$CTL" >"$TMP/status.out" 2>&1 ||
    fail "status as the other client failed: $(cat "$TMP/status.out")"
if grep -q "train-a" "$TMP/status.out"; then
	fail "status shows train-a to a client not allowed to read it"
fi
if "$BELLOWS" status --control "$CTL" --timeout-ms 2000 \
    >"$TMP/status.out" 2>&1; then
	fail "status without keys got an answer from a secured bellowsd"
fi
grep -q "uses CURVE" "$TMP/status.out" ||
    fail "status without keys does not say why: $(cat "$TMP/status.out")"
ok "status over CURVE answers per client, and says when keys are missing"

mode=$(stat -c %a "$DB")
[ "$mode" = 600 ] || fail "the history database is mode $mode, not 600"
ok "the history database is 0600"

# Rotation: the trainer's key is removed and bellowsd reloads.
rm "$KEYS/clients/trainer.pub"
kill -HUP "$DAEMON_PID"
sleep 1
if run_sim --job train-c "${SIM[@]}" --server-key "$KEYS/own/server.pub" \
    --client-key "$KEYS/own/trainer.key"; then
	fail "a removed client still got decisions"
fi
ok "a removed client is refused after the reload"
