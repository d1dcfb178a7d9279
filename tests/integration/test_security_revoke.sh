#!/bin/sh
# Revocation with daemon.security fails closed. A malformed .pub written
# into the clients directory while another client's .pub is removed is
# skipped with an error naming it, and the rest applies: the removed key
# is no longer trusted. That client's connections made before the
# removal are refused at their next message (EPERM), and its
# subscription stops delivering decisions: bellowsd closes that client's
# subscriber connection and no other, so a client still trusted keeps
# its connection and its decisions. A key replaced under the same name
# refuses the connections made with the old one. A client taken off the
# job's clients loses its subscriber connection, and no other client.
. "$(dirname "$0")/lib.sh"

CC="$BUILD/tests/integration/curve_client"
K="$TMP/keys"
C="$TMP/clients"
H="$TMP/history.db"
mkdir -p "$K" "$C"
for n in server trainer keeper; do
	"$CC" keygen "$K" "$n" || fail "keygen $n"
done
cp "$K/trainer.pub" "$K/keeper.pub" "$C/"
cat >"$TMP/policy.yaml" <<YAML
daemon:
  apply_lag: 1
  window_timeout_ms: 3000
  rank_timeout_ms: 1500
  heartbeat_ms: 200
  security:
    server_key: keys/server.key
    clients: clients
jobs:
  - match: "train-*"
    clients: [trainer, keeper]
    policies:
      - type: schedule
        params:
          levels: {0: 2}
YAML
as() {
	echo "$K/server.pub $K/$1.key"
}
# Fails with MESSAGE, showing FILE, unless FILE has a line matching PATTERN.
expect() {
	grep -q "$2" "$1" || { cat "$1"; fail "$3"; }
}

# After a withdrawal named $3: the `listen` output $1 heard decisions
# before it and none after, its connection closed; the one of $2 kept
# its connection and decisions; bellowsd's latest such line says it
# closed one subscriber connection of several.
check_cut() {
	expect "$1" "^before [1-9]" \
	    "$3: the cut subscriber heard nothing before"
	expect "$1" "^decisions 0$" \
	    "$3: the cut subscriber still gets decisions"
	expect "$1" "^disconnects [1-9]" \
	    "$3: the cut subscriber's connection was not closed"
	expect "$2" "^decisions [1-9]" \
	    "$3: a subscriber still allowed lost its decisions"
	expect "$2" "^disconnects 0$" \
	    "$3: a subscriber still allowed was disconnected"
	grep "withdrawn" "$TMP/bellowsd.log" | tail -n 1 |
	    grep -q "closed 1 of [2-9] subscriber connections, those holding it" ||
	    { grep "withdrawn" "$TMP/bellowsd.log"; fail "$3: not just one subscriber connection was closed"; }
}
"$BELLOWSD" --control "$CTL" --publish "$PUB" --policy "$TMP/policy.yaml" \
    --log-level info --db "$H" >>"$TMP/bellowsd.log" 2>&1 &
DAEMON_PID=$!
for _ in $(seq 1 100); do
	"$CC" status "$CTL" $(as keeper) >/dev/null 2>&1 && break
	sleep 0.05
done

# Connections of trainer made before the removal: a control connection
# that asks STATUS before and after, and a subscriber of train-l that
# counts the decisions arriving after. keeper subscribes the same way.
AFTER="$TMP/removed"
CC_AFTER="$AFTER" "$CC" status "$CTL" $(as trainer) >"$TMP/st.out" 2>&1 &
ST=$!
CC_AFTER="$AFTER" "$CC" listen "$PUB" train-l 7000 $(as trainer) \
    >"$TMP/l-trainer.out" 2>&1 &
LT=$!
CC_AFTER="$AFTER" "$CC" listen "$PUB" train-l 7000 $(as keeper) \
    >"$TMP/l-keeper.out" 2>&1 &
LK=$!
CC_LINGER_MS=6000 "$CC" run "$CTL" "$PUB" train-l 1 0 $(as keeper) \
    >"$TMP/run.out" 2>&1 &
RUN=$!
for _ in $(seq 1 100); do
	grep -q "^decision" "$TMP/run.out" && grep -q "status ok" "$TMP/st.out" &&
	    break
	sleep 0.05
done
grep -q "status ok" "$TMP/st.out" || { cat "$TMP/st.out"; fail "trainer got no STATUS"; }
grep -q "^decision" "$TMP/run.out" || { cat "$TMP/run.out"; fail "train-l got no decision"; }
sleep 0.5

# At once: a broken .pub appears and trainer's is removed.
printf 'metadata\ncurve\n    public-key = "not a key"\n' >"$C/broken.pub"
rm "$C/trainer.pub"
kill -HUP "$DAEMON_PID"
for _ in $(seq 1 200); do
	grep -q "^.*1 trusted client keys from" "$TMP/bellowsd.log" && break
	sleep 0.05
done
grep -q "1 trusted client keys from" "$TMP/bellowsd.log" ||
    fail "the reload with a broken .pub did not apply the rest"
grep -q "error main: $C/broken.pub.*skipped, that client is not trusted" \
    "$TMP/bellowsd.log" || fail "the broken .pub is not named in an error"
"$BELLOWS" policy check "$TMP/policy.yaml" >/dev/null 2>"$TMP/check.err" ||
    { cat "$TMP/check.err"; fail "policy check refuses a file whose clients hold a broken .pub"; }
expect "$TMP/check.err" "warning: $C/broken.pub.*skipped" \
    "policy check does not name the broken .pub"
ok "a broken .pub is skipped with an error naming it; the removal applies"

sleep 0.3 # what was already on its way before the reload
touch "$AFTER"
wait "$ST"
expect "$TMP/st.out" "error -19: client 'trainer' is no longer trusted" \
    "a removed key's connection is still answered"
grep -q "client 'trainer' is no longer trusted" "$TMP/bellowsd.log" ||
    fail "the refusal is not logged"
ok "a removed key's existing connection is refused at its next message"

wait "$LT" "$LK" "$RUN"
check_cut "$TMP/l-trainer.out" "$TMP/l-keeper.out" "trainer's key removed"
ok "the removed key's subscription stops, its connection alone closed; a trusted one goes on"

# A replaced key: the name stays, the old key's connection is refused.
"$CC" keygen "$K" keeper2 || fail "keygen keeper2"
CC_AFTER="$TMP/replaced" "$CC" status "$CTL" $(as keeper) >"$TMP/rk.out" 2>&1 &
RK=$!
CC_AFTER="$TMP/replaced" "$CC" listen "$PUB" train-m 9000 $(as keeper) \
    >"$TMP/lm-old.out" 2>&1 &
LO=$!
sleep 0.3
CC_LINGER_MS=500 "$CC" run "$CTL" "$PUB" train-m 1 0 $(as keeper) \
    >"$TMP/m1.out" 2>&1 || { cat "$TMP/m1.out"; fail "train-m did not run with keeper's first key"; }
grep -q "status ok" "$TMP/rk.out" || { cat "$TMP/rk.out"; fail "no STATUS with keeper's first key"; }
before=$(grep -c "trusted client keys from" "$TMP/bellowsd.log")
cp "$K/keeper2.pub" "$C/keeper.pub.tmp" && mv "$C/keeper.pub.tmp" "$C/keeper.pub"
kill -HUP "$DAEMON_PID"
for _ in $(seq 1 200); do
	[ "$(grep -c "trusted client keys from" "$TMP/bellowsd.log")" -gt "$before" ] && break
	sleep 0.05
done
sleep 0.3
touch "$TMP/replaced"
wait "$RK"
"$CC" listen "$PUB" train-m 3000 "$K/server.pub" "$K/keeper2.key" \
    >"$TMP/lm-new.out" 2>&1 &
LN=$!
sleep 0.3
CC_LINGER_MS=2000 "$CC" run "$CTL" "$PUB" train-m 1 0 "$K/server.pub" \
    "$K/keeper2.key" >"$TMP/m2.out" 2>&1 ||
    { cat "$TMP/m2.out"; fail "train-m did not run with keeper's new key"; }
wait "$LO" "$LN"
expect "$TMP/lm-old.out" "^before [1-9]" \
    "the old key's subscriber heard nothing before"
expect "$TMP/lm-old.out" "^decisions 0$" \
    "a replaced key's subscription still delivers"
expect "$TMP/lm-new.out" "^decisions [1-9]" \
    "the new key's subscriber heard nothing"
expect "$TMP/rk.out" "error -19: client 'keeper' is no longer trusted" \
    "a connection made with a replaced key is still answered"
"$CC" status "$CTL" "$K/server.pub" "$K/keeper2.key" >/dev/null ||
    fail "the new key of keeper is refused"
ok "a replaced key's connection and subscription are cut; the new key is let in"

# A client taken off the job's clients (its key still trusted): its
# subscriber connection is closed, and no other; it subscribes again and
# is refused; keeper's subscriber keeps its connection and decisions.
"$CC" keygen "$K" watcher || fail "keygen watcher"
cp "$K/watcher.pub" "$C/"
sed -i 's/clients: \[trainer, keeper\]/clients: [trainer, keeper, watcher]/' \
    "$TMP/policy.yaml"
reload() {
	before=$(grep -c "trusted client keys from" "$TMP/bellowsd.log")
	kill -HUP "$DAEMON_PID"
	for _ in $(seq 1 200); do
		[ "$(grep -c "trusted client keys from" "$TMP/bellowsd.log")" -gt "$before" ] && return
		sleep 0.05
	done
	fail "bellowsd did not reload"
}
reload
OFF="$TMP/off"
CC_AFTER="$OFF" "$CC" listen "$PUB" train-n 7000 $(as watcher) \
    >"$TMP/ln-watcher.out" 2>&1 &
LW=$!
CC_AFTER="$OFF" "$CC" listen "$PUB" train-n 7000 "$K/server.pub" \
    "$K/keeper2.key" >"$TMP/ln-keeper.out" 2>&1 &
LK2=$!
sleep 0.3
CC_LINGER_MS=6000 "$CC" run "$CTL" "$PUB" train-n 1 0 "$K/server.pub" \
    "$K/keeper2.key" >"$TMP/n.out" 2>&1 &
RN=$!
for _ in $(seq 1 100); do
	grep -q "^decision" "$TMP/n.out" && break
	sleep 0.05
done
grep -q "^decision" "$TMP/n.out" || { cat "$TMP/n.out"; fail "train-n got no decision"; }
sleep 0.5
sed -i 's/clients: \[trainer, keeper, watcher\]/clients: [trainer, keeper]/' \
    "$TMP/policy.yaml"
reload
sleep 0.3
touch "$OFF"
wait "$LW" "$LK2" "$RN"
check_cut "$TMP/ln-watcher.out" "$TMP/ln-keeper.out" "watcher taken off the job"
ok "a client taken off the job loses its subscriber connection alone; keeper's goes on"
