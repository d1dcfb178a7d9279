#!/usr/bin/env bash
# bellows keygen writes certificates ZeroMQ's other tools read and the
# other way round, and the command line's CURVE client says what is wrong
# instead of hanging: a key bellowsd's ZAP handler refuses, a wrong
# server key, a missing or garbled key file, one key without the other.
# The CURVE server here is pyzmq's (a ROUTER with pyzmq's own ZAP
# handler), so both directions of the certificate format are exercised
# over a real handshake.
. "$(dirname "$0")/lib.sh"

# Debian's python3, where python3-zmq is installed (not a pyenv's).
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
"$PY" -c 'import zmq.auth' 2>/dev/null ||
    fail "python3-zmq is missing (scripts/setup.sh full installs it)"

KEYS="$TMP/keys"
ALLOWED="$TMP/allowed"
mkdir -p "$KEYS" "$ALLOWED"

# ---- keygen ----
"$BELLOWS" keygen --out "$KEYS" --name client >"$TMP/kg.out" 2>"$TMP/kg.err" ||
    fail "keygen exited $?: $(cat "$TMP/kg.err")"
[ "$(stat -c %a "$KEYS/client.key")" = 600 ] || fail "client.key is not 0600"
[ -f "$KEYS/client.pub" ] || fail "no client.pub"
pub=$(awk '$1 == "public-key" {print $2}' "$TMP/kg.out")
[ ${#pub} -eq 40 ] || fail "keygen printed no public key: $(cat "$TMP/kg.out")"
grep -q "$KEYS/client.key" "$TMP/kg.out" || fail "keygen did not print the paths"
ok "keygen wrote client.key (0600) and client.pub, public key $pub"

before=$(cat "$KEYS/client.key")
"$BELLOWS" keygen --out "$KEYS" --name client >/dev/null 2>"$TMP/kg.err"
rc=$?
[ "$rc" -eq 1 ] || fail "keygen over an existing key exited $rc"
grep -q "client.key exists (--force replaces it)" "$TMP/kg.err" ||
    fail "keygen did not say why: $(cat "$TMP/kg.err")"
[ "$before" = "$(cat "$KEYS/client.key")" ] || fail "keygen replaced a key without --force"
ok "keygen refuses to replace a key: $(cat "$TMP/kg.err")"
"$BELLOWS" keygen --out "$KEYS" --name spare >/dev/null || fail "keygen spare"
"$BELLOWS" keygen --out "$KEYS" --name spare --force >"$TMP/kg2.out" ||
    fail "keygen --force exited $?"
ok "keygen --force replaces one"
"$BELLOWS" keygen --out "$KEYS" --name ../evil >/dev/null 2>"$TMP/kg.err"
rc=$?
[ "$rc" -eq 2 ] || fail "keygen --name ../evil exited $rc"
"$BELLOWS" keygen --name x >/dev/null 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "keygen without --out exited $rc"
ok "keygen refuses a bad name and a missing --out with exit 2"

# ---- the format, both ways ----
"$PY" - "$KEYS/client.key" "$KEYS/client.pub" "$pub" <<'PY' || fail "pyzmq cannot load bellows' certificates"
import sys, zmq.auth
pub, sec = zmq.auth.load_certificate(sys.argv[1])
assert pub.decode() == sys.argv[3], (pub, sys.argv[3])
assert sec is not None and len(sec) == 40
assert zmq.curve_public(sec) == pub, "the secret key does not match"
pub2, sec2 = zmq.auth.load_certificate(sys.argv[2])
assert pub2 == pub and sec2 is None
PY
ok "pyzmq's zmq.auth.load_certificate reads bellows' .key and .pub"
"$PY" -c '
import sys, zmq.auth
zmq.auth.create_certificates(sys.argv[1], "server")
zmq.auth.create_certificates(sys.argv[1], "stranger")
' "$KEYS" || fail "pyzmq create_certificates"
mv "$KEYS/server.key_secret" "$KEYS/server.key"
mv "$KEYS/stranger.key_secret" "$KEYS/stranger.key"
# pyzmq's authenticator reads the public certificates of a folder named
# NAME.key (its secret ones are NAME.key_secret): our .pub under its name.
cp "$KEYS/client.pub" "$ALLOWED/client.key"

"$PY" "$SRC/tests/integration/curve_server.py" "$KEYS/server.key" \
    "$ALLOWED" "$TMP/endpoint" >"$TMP/server.out" 2>"$TMP/server.err" &
SERVER_PID=$!
trap 'kill $SERVER_PID 2>/dev/null; wait $SERVER_PID 2>/dev/null; cleanup' EXIT
for _ in $(seq 100); do
	[ -s "$TMP/endpoint" ] && break
	"$PY" -c 'import time; time.sleep(0.05)'
done
[ -s "$TMP/endpoint" ] || fail "the pyzmq server did not start: $(cat "$TMP/server.err")"
EP=$(cat "$TMP/endpoint")

# status with pyzmq's server.key (its .pub is the server key) and our
# client.key: the handshake succeeds, the request arrives; nothing answers.
"$BELLOWS" status --control "$EP" --timeout-ms 1500 \
    --server-key "$KEYS/server.key" --client-key "$KEYS/client.key" \
    >/dev/null 2>"$TMP/st.err"
rc=$?
[ "$rc" -eq 1 ] || fail "status against a silent server exited $rc"
grep -q "did not answer within 1500 ms" "$TMP/st.err" ||
    fail "status: $(cat "$TMP/st.err")"
for _ in $(seq 40); do
	grep -q "^request" "$TMP/server.out" && break
	"$PY" -c 'import time; time.sleep(0.05)'
done
grep -q "^request" "$TMP/server.out" || fail "no request reached the CURVE server"
ok "a pyzmq certificate loads in bellows: status got through the CURVE handshake"

# The same through the environment, with pyzmq's .pub as the server key.
: >"$TMP/server.out"
BELLOWS_SERVER_KEY="$KEYS/server.key" BELLOWS_CLIENT_KEY="$KEYS/client.key" \
    "$BELLOWS" status --control "$EP" --timeout-ms 1000 >/dev/null 2>&1
for _ in $(seq 40); do
	grep -q "^request" "$TMP/server.out" && break
	"$PY" -c 'import time; time.sleep(0.05)'
done
grep -q "^request" "$TMP/server.out" || fail "BELLOWS_SERVER_KEY/BELLOWS_CLIENT_KEY were not used"
ok "status takes its keys from BELLOWS_SERVER_KEY and BELLOWS_CLIENT_KEY"

# ---- handshakes that fail ----
t0=$(date +%s%N)
"$BELLOWS" status --control "$EP" --timeout-ms 5000 \
    --server-key "$KEYS/server.key" --client-key "$KEYS/stranger.key" \
    >/dev/null 2>"$TMP/st.err"
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$rc" -eq 1 ] || fail "status with an unknown key exited $rc"
grep -q "bellows status: bellowsd refused this client's key" "$TMP/st.err" ||
    fail "status with an unknown key: $(cat "$TMP/st.err")"
[ "$ms" -lt 4500 ] || fail "status waited $ms ms for a refused handshake"
ok "an unknown client key: '$(cat "$TMP/st.err")' after $ms ms"

"$BELLOWS" status --control "$EP" --timeout-ms 2000 \
    --server-key "$KEYS/stranger.key" --client-key "$KEYS/client.key" \
    >/dev/null 2>"$TMP/st.err"
rc=$?
[ "$rc" -eq 1 ] || fail "status with a wrong server key exited $rc"
grep -q "bellows status: no answer: wrong server key?" "$TMP/st.err" ||
    fail "status with a wrong server key: $(cat "$TMP/st.err")"
ok "a wrong server key: $(cat "$TMP/st.err")"

# ---- bad key files: exit 2 before anything is sent ----
printf 'curve\n    public-key = "short"\n' >"$KEYS/garbled.pub"
check_bad() {
	local what=$1 expect=$2
	shift 2
	"$@" >/dev/null 2>"$TMP/bad.err"
	rc=$?
	[ "$rc" -eq 2 ] || fail "$what: exited $rc ($(cat "$TMP/bad.err"))"
	grep -qF -- "$expect" "$TMP/bad.err" || fail "$what: $(cat "$TMP/bad.err")"
	ok "$what: $(head -n 1 "$TMP/bad.err")"
}
check_bad "status, a missing server key file" "$TMP/nothing.pub" \
    "$BELLOWS" status --control "$EP" --server-key "$TMP/nothing.pub" \
    --client-key "$KEYS/client.key"
check_bad "status, a garbled server key" "garbled.pub" \
    "$BELLOWS" status --control "$EP" --server-key "$KEYS/garbled.pub" \
    --client-key "$KEYS/client.key"
check_bad "status, a public certificate as the client key" \
    "is a public certificate" \
    "$BELLOWS" status --control "$EP" --server-key "$KEYS/server.key" \
    --client-key "$KEYS/client.pub"
check_bad "status, a server key without a client key" \
    "CURVE needs both" \
    "$BELLOWS" status --control "$EP" --server-key "$KEYS/server.key"
check_bad "status, BELLOWS_CLIENT_KEY alone" "a client key (--client-key" \
    env BELLOWS_CLIENT_KEY="$KEYS/client.key" "$BELLOWS" status --control "$EP"
check_bad "sim, a garbled client key" "garbled.pub" \
    "$BELLOWS" sim --control "$EP" --publish "$EP" --job j --ranks 1 \
    --layers 1 --windows 1 --steps-per-window 1 \
    --server-key "$KEYS/server.key" --client-key "$KEYS/garbled.pub"
if "$BELLOWS" help top >/dev/null 2>&1; then
	check_bad "top, a server key without a client key" "CURVE needs both" \
	    "$BELLOWS" top --once --control "$EP" --server-key "$KEYS/server.key"
fi

# sim with a refused key fails at its first contact, saying why.
"$BELLOWS" sim --control "$EP" --publish "$EP" --job j --ranks 1 \
    --layers 1 --windows 1 --steps-per-window 1 \
    --server-key "$KEYS/server.key" --client-key "$KEYS/stranger.key" \
    >/dev/null 2>"$TMP/sim.err"
rc=$?
[ "$rc" -eq 1 ] || fail "sim with an unknown key exited $rc"
grep -q "bellows sim: bellowsd refused this client's key" "$TMP/sim.err" ||
    fail "sim with an unknown key: $(cat "$TMP/sim.err")"
ok "sim with an unknown key: $(cat "$TMP/sim.err")"
