#!/bin/sh
# bellowsd with daemon.security: both endpoints are CURVE servers and a
# ZAP handler lets in only the keys of the clients directory. A trusted
# client allowed for a job runs it and gets its decisions; a client with
# no keys, one with an unknown key and one allowed only for another job
# pattern are refused and leave no run in the history; STATUS shows a
# client only its jobs; a subscriber without a trusted key, or one not
# allowed for the job (by name or by a wider prefix), hears nothing;
# a plain ZeroMQ peer sending garbage changes nothing; removing a .pub
# (SIGHUP) refuses that client's next connection, adding it back (the
# directory is watched) lets it in again; the history and its WAL are
# created 0600.
. "$(dirname "$0")/lib.sh"

CC="$BUILD/tests/integration/curve_client"
K="$TMP/keys"
C="$TMP/clients"
H="$TMP/history.db"
mkdir -p "$K" "$C"
for n in server trainer other intruder; do
	"$CC" keygen "$K" "$n" || fail "keygen $n"
done
cp "$K/trainer.pub" "$K/other.pub" "$C/"
[ "$(stat -c %a "$K/trainer.key")" = 600 ] || fail "a .key is not 0600"

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
    clients: [trainer]
    policies:
      - type: schedule
        params:
          levels: {0: 2}
  - match: "eval-*"
    clients: [other]
    policies:
      - type: schedule
        params:
          levels: {0: 3}
  - match: "open-*"
    policies:
      - type: schedule
        params:
          levels: {0: 1}
YAML
"$BELLOWS" policy check "$TMP/policy.yaml" >/dev/null ||
    fail "policy check refuses the secured file"

# as NAME: the curve_client key arguments of client NAME.
as() {
	echo "$K/server.pub $K/$1.key"
}

# A umask that would make the history world-readable.
umask 022
"$BELLOWSD" --control "$CTL" --publish "$PUB" --policy "$TMP/policy.yaml" \
    --log-level info --db "$H" >>"$TMP/bellowsd.log" 2>&1 &
DAEMON_PID=$!
for _ in $(seq 1 100); do
	"$CC" status "$CTL" $(as trainer) >/dev/null 2>&1 && break
	sleep 0.05
done
"$CC" status "$CTL" $(as trainer) >/dev/null || fail "no STATUS with trainer's key"
grep -q "security: CURVE on both endpoints, 2 trusted client keys" \
    "$TMP/bellowsd.log" || fail "security not logged at start"
ok "bellowsd starts with CURVE and 2 trusted keys"

# runs JOB: runs of JOB in the history.
runs() {
	sqlite3 "$H" "SELECT count(*) FROM runs WHERE job = '$1'"
}

"$CC" run "$CTL" "$PUB" train-a 1 0 $(as trainer) >"$TMP/a.out" 2>&1 ||
    { cat "$TMP/a.out"; fail "trainer could not run train-a"; }
grep -q "^decision " "$TMP/a.out" || fail "trainer got no decision"
ok "a trusted client allowed for train-* joins and gets decisions"

"$CC" run "$CTL" "$PUB" train-b 1 0 >"$TMP/b.out" 2>&1
[ $? -eq 4 ] || { cat "$TMP/b.out"; fail "a client without keys was answered"; }
"$CC" run "$CTL" "$PUB" train-c 1 0 $(as intruder) >"$TMP/c.out" 2>&1
[ $? -eq 4 ] || { cat "$TMP/c.out"; fail "an unknown key was answered"; }
"$CC" run "$CTL" "$PUB" train-d 1 0 $(as other) >"$TMP/d.out" 2>&1
[ $? -eq 3 ] || { cat "$TMP/d.out"; fail "a client allowed only for eval-* joined train-d"; }
grep -q "error -19: client 'other' is not allowed for job 'train-d'" \
    "$TMP/d.out" || { cat "$TMP/d.out"; fail "the refusal is not clear"; }
grep -q "refused a connection from" "$TMP/bellowsd.log" ||
    fail "refused connections are not logged"
ok "no keys, an unknown key: no answer; another job's client: EPERM"

"$CC" run "$CTL" "$PUB" eval-a 1 0 $(as other) >"$TMP/e.out" 2>&1 ||
    { cat "$TMP/e.out"; fail "other could not run eval-a"; }
"$CC" status "$CTL" $(as other) >"$TMP/so.out" || fail "STATUS as other"
grep -q "^job eval-a" "$TMP/so.out" && ! grep -q "^job train-" "$TMP/so.out" ||
    { cat "$TMP/so.out"; fail "STATUS shows other a job it may not read"; }
"$CC" status "$CTL" $(as trainer) >"$TMP/st.out" || fail "STATUS as trainer"
grep -q "^job train-a" "$TMP/st.out" && ! grep -q "^job eval-" "$TMP/st.out" ||
    { cat "$TMP/st.out"; fail "STATUS shows trainer a job it may not read"; }
ok "STATUS shows each client only the jobs it may read"

# Subscribers: the trusted one hears train-l, the others nothing.
"$CC" listen "$PUB" train-l 4000 $(as trainer) >"$TMP/l-trainer.out" &
L1=$!
"$CC" listen "$PUB" train-l 4000 $(as intruder) >"$TMP/l-intruder.out" &
L2=$!
"$CC" listen "$PUB" train-l 4000 >"$TMP/l-none.out" &
L3=$!
"$CC" listen "$PUB" train-l 4000 $(as other) >"$TMP/l-other.out" &
L4=$!
CC_TOPIC="d:" "$CC" listen "$PUB" train-l 4000 $(as other) \
    >"$TMP/l-prefix.out" &
L5=$!
CC_LINGER_MS=2500 "$CC" run "$CTL" "$PUB" train-l 1 0 $(as trainer) \
    >"$TMP/l.out" 2>&1 || { cat "$TMP/l.out"; fail "train-l did not run"; }
wait $L1 $L2 $L3 $L4 $L5
grep -q "decisions [1-9]" "$TMP/l-trainer.out" ||
    { cat "$TMP/l-trainer.out"; fail "a trusted subscriber heard nothing"; }
grep -q "decisions 0" "$TMP/l-intruder.out" ||
    fail "a subscriber with an unknown key heard decisions"
grep -q "decisions 0" "$TMP/l-none.out" ||
    fail "a subscriber without keys heard decisions"
grep -q "decisions 0" "$TMP/l-other.out" ||
    fail "a client allowed only for eval-* heard train-l's decisions"
grep -q "decisions 0" "$TMP/l-prefix.out" ||
    fail "a prefix subscription let a restricted client hear train-l"
# Refusals are logged once per interval with a count: the first of
# 'other's two (its 'd:' prefix or 'd:train-l', whichever came first).
grep -q "client 'other' may not subscribe to 'd:" \
    "$TMP/bellowsd.log" || fail "the refused subscription is not logged"
ok "decisions reach the subscribers that may read the job only"

"$CC" garbage "$CTL" 300 >/dev/null || fail "garbage client failed"
kill -0 "$DAEMON_PID" || fail "bellowsd died of garbage"
"$CC" status "$CTL" $(as trainer) >/dev/null || fail "no STATUS after garbage"
for j in train-b train-c train-d train-garbage; do
	[ "$(runs $j)" = 0 ] || fail "a refused client left a run of $j"
done
[ "$(runs train-a)" = 1 ] || fail "train-a has no run"
ok "refused clients and garbage leave no run in the history"

# Rotation: removing trainer.pub and SIGHUP refuses its next connection.
loaded() {
	grep -c "trusted client keys from" "$TMP/bellowsd.log"
}
before=$(loaded)
rm "$C/trainer.pub"
kill -HUP "$DAEMON_PID"
for _ in $(seq 1 200); do
	[ "$(loaded)" -gt "$before" ] && break
	sleep 0.05
done
grep -q "1 trusted client keys from" "$TMP/bellowsd.log" ||
    fail "the reload did not read the clients directory again"
"$CC" run "$CTL" "$PUB" train-e 1 0 $(as trainer) >"$TMP/r.out" 2>&1
[ $? -eq 4 ] || { cat "$TMP/r.out"; fail "a removed key was let in"; }
[ "$(runs train-e)" = 0 ] || fail "a removed key left a run"
ok "a removed .pub refuses the client's next connection after SIGHUP"

before=$(loaded)
cp "$K/trainer.pub" "$C/trainer.pub.tmp" && mv "$C/trainer.pub.tmp" "$C/trainer.pub"
for _ in $(seq 1 200); do
	[ "$(loaded)" -gt "$before" ] && break
	sleep 0.05
done
[ "$(loaded)" -gt "$before" ] || fail "the clients directory is not watched"
"$CC" run "$CTL" "$PUB" train-f 1 0 $(as trainer) >"$TMP/f.out" 2>&1 ||
    { cat "$TMP/f.out"; fail "a key added back is refused"; }
ok "a .pub added to the watched directory lets its client in"

# Certificates of pyzmq (the format czmq's zcert_save writes) work both
# ways: a client made by zmq.auth is let in, and pyzmq reads our keys.
PY=/usr/bin/python3
if [ -x "$PY" ] && "$PY" -c "import zmq.auth" 2>/dev/null; then
	"$PY" - "$K" "$C" <<'PYEOF' || fail "pyzmq could not make or read certificates"
import os, shutil, sys, zmq.auth
keys, clients = sys.argv[1], sys.argv[2]
pub, sec = zmq.auth.create_certificates(keys, "pyclient")
shutil.copy(pub, os.path.join(clients, "pyclient.pub"))
ours_pub, _ = zmq.auth.load_certificate(os.path.join(keys, "server.pub"))
ours_pub2, ours_sec = zmq.auth.load_certificate(os.path.join(keys, "server.key"))
assert ours_pub == ours_pub2 and ours_sec is not None and len(ours_pub) == 40
PYEOF
	for _ in $(seq 1 200); do
		grep -q "3 trusted client keys from" "$TMP/bellowsd.log" && break
		sleep 0.05
	done
	"$CC" run "$CTL" "$PUB" open-py 1 0 "$K/server.pub" \
	    "$K/pyclient.key_secret" >"$TMP/py.out" 2>&1 ||
	    { cat "$TMP/py.out"; fail "a client certificate made by pyzmq is refused"; }
	ok "certificates made by pyzmq (czmq's format) work, and pyzmq reads ours"
else
	echo "note: /usr/bin/python3 without zmq (python3-zmq): format check skipped"
fi

[ "$(stat -c %a "$H")" = 600 ] || fail "history is $(stat -c %a "$H"), not 600"
[ -f "$H-wal" ] || fail "no WAL file"
[ "$(stat -c %a "$H-wal")" = 600 ] || fail "WAL is $(stat -c %a "$H-wal")"
[ ! -f "$H-shm" ] || [ "$(stat -c %a "$H-shm")" = 600 ] || fail "SHM is not 600"
ok "the history database and its WAL/SHM are 0600 under umask 022"
