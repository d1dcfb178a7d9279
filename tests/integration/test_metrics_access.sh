#!/usr/bin/env bash
# Who may read /metrics. With daemon.metrics.token_file a scrape needs
# "Authorization: Bearer <token>" (401 without it or with another one);
# with daemon.security on, the token maps to daemon.metrics.client and
# /metrics shows only the jobs whose `clients` lists let that client in,
# and none at all without a token. A reload replaces the token. A real
# Prometheus scrapes with `authorization: credentials_file:` the same
# file, and a scrape job without it is down. Bad daemon.metrics keys are
# refused with the file's line.
. "$(dirname "$0")/lib.sh"

command -v curl >/dev/null || { echo "SKIP: curl not installed"; exit 77; }

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
MPORT=$(free_port)
KEYS="$TMP/keys"
mkdir -p "$KEYS/clients" "$KEYS/own"
for n in server trainer other; do
	"$BELLOWS" keygen --out "$KEYS/own" --name "$n" >/dev/null ||
	    fail "bellows keygen --name $n failed"
done
cp "$KEYS/own/trainer.pub" "$KEYS/own/other.pub" "$KEYS/clients/"
python3 -c 'import secrets; print(secrets.token_hex(24))' >"$TMP/token"
chmod 600 "$TMP/token"
TOKEN=$(cat "$TMP/token")

# policy METRICS_LINES: the secured configuration with a daemon.metrics
# section of the given lines (indented by 4).
policy() {
	cat <<YAML
daemon:
  apply_lag: 1
  window_timeout_ms: 3000
  rank_timeout_ms: 1500
  heartbeat_ms: 200
  security:
    server_key: $KEYS/own/server.key
    clients: $KEYS/clients
  metrics:
    listen: "127.0.0.1:$MPORT"
$1
jobs:
  - match: "train-*"
    clients: [trainer]
    policies:
      - type: fixed
        params: {level: 2}
  - match: "ops-*"
    clients: [other]
    policies:
      - type: fixed
        params: {level: 2}
  - match: "*"
    policies:
      - type: fixed
        params: {level: 1}
YAML
}

# 1. Bad daemon.metrics sections: a clear error naming the line.
bad() {
	policy "$1" >"$TMP/bad.yaml"
	"$BELLOWS" policy check "$TMP/bad.yaml" >"$TMP/bad.out" 2>&1 &&
	    fail "policy check accepted: $1"
	grep -q "$2" "$TMP/bad.out" || fail "no '$2' for '$1': $(cat "$TMP/bad.out")"
	ok "refused: $(grep -m1 "$2" "$TMP/bad.out")"
}
bad "    token_file: $TMP/none" "bad.yaml:11:17: daemon.metrics.token_file '$TMP/none': No such file or directory"
printf 'short\n' >"$TMP/short"
bad "    token_file: $TMP/short
    client: trainer" "token_file '$TMP/short' must hold one token of 16 to 4096 visible ASCII characters"
printf 'a token with spaces in it\n' >"$TMP/spaces"
bad "    token_file: $TMP/spaces
    client: trainer" "byte 2 of the token (0x20) is not a visible ASCII character"
bad "    client: trainer" "daemon.metrics.client needs token_file"
bad "    token_file: $TMP/token" "daemon.metrics.token_file needs daemon.metrics.client with daemon.security"
bad "    tokenfile: $TMP/token" "unknown key 'tokenfile' in daemon.metrics (expected listen, token_file, client)"
bad "    client: no/such" "daemon.metrics.client 'no/such' is not a client name"
policy "" | sed "s|^  metrics:|  metrics_listen: \"127.0.0.1:1\"\n  metrics:|" >"$TMP/bad.yaml"
"$BELLOWS" policy check "$TMP/bad.yaml" >"$TMP/bad.out" 2>&1 &&
    fail "policy check accepted metrics_listen and metrics.listen"
grep -q "the address is given twice" "$TMP/bad.out" ||
    fail "no error for two addresses: $(cat "$TMP/bad.out")"
ok "refused: $(head -n1 "$TMP/bad.out")"

# 2. A secured bellowsd with a token for client 'trainer', three jobs.
policy "    token_file: $TMP/token
    client: trainer" >"$TMP/policy.yaml"
"$BELLOWS" policy check "$TMP/policy.yaml" >/dev/null ||
    fail "policy check refused the token configuration"
start_daemon_keys() {
	BELLOWS_SERVER_KEY="$KEYS/own/server.pub" \
	BELLOWS_CLIENT_KEY="$KEYS/own/trainer.key" start_daemon
}
start_daemon_keys
SIM=(--ranks 2 --layers 2 --windows 4 --steps-per-window 5 --step-ms 2
    --server-key "$KEYS/own/server.pub")
for run in train-a:trainer ops-b:other free-c:other; do
	run_sim --job "${run%%:*}" "${SIM[@]}" \
	    --client-key "$KEYS/own/${run##*:}.key" ||
	    fail "the sim of ${run%%:*} as ${run##*:} failed"
	expect_agreed 2 4
done
ok "jobs train-a (clients [trainer]), ops-b (clients [other]) and free-c (no list) ran"
sleep 1.2 # one publication period

# scrape [CURL ARGS]: the status code, the body in $TMP/scrape.txt.
scrape() {
	curl -s --max-time 20 -o "$TMP/scrape.txt" -w '%{http_code}' "$@" \
	    "http://127.0.0.1:$MPORT/metrics"
}
code=$(scrape)
[ "$code" = 401 ] || fail "a scrape without the token answered $code"
curl -s -D - -o /dev/null "http://127.0.0.1:$MPORT/metrics" |
    grep -qi '^WWW-Authenticate: Bearer' || fail "a 401 without WWW-Authenticate: Bearer"
code=$(scrape -H "Authorization: Bearer ${TOKEN%?}x")
[ "$code" = 401 ] || fail "a scrape with a wrong token answered $code"
code=$(scrape -H "Authorization: Bearer ${TOKEN}x")
[ "$code" = 401 ] || fail "a scrape with a longer token answered $code"
code=$(scrape -H "Authorization: Basic $TOKEN")
[ "$code" = 401 ] || fail "a scrape with the token as Basic answered $code"
grep -q "bellows_job" "$TMP/scrape.txt" && fail "a 401 carried job series"
ok "401 with WWW-Authenticate without the token, with a wrong or longer one, as Basic"
code=$(scrape -H "Authorization: Bearer $TOKEN")
[ "$code" = 200 ] || fail "a scrape with the token answered $code"
for job in train-a free-c; do
	grep -q "^bellows_job_step{bellows_job=\"$job\"} " "$TMP/scrape.txt" ||
	    fail "no series of $job, which trainer may read"
done
grep -q 'bellows_job="ops-b"' "$TMP/scrape.txt" &&
    fail "/metrics shows ops-b, which trainer may not read"
grep -q '^bellows_jobs 2$' "$TMP/scrape.txt" || fail "bellows_jobs is not 2"
ok "with the token: train-a and free-c shown, ops-b (clients [other]) left out"

# 3. A reload with a new token: the old one is refused, the new taken.
python3 -c 'import secrets; print(secrets.token_hex(24))' >"$TMP/token2"
TOKEN2=$(cat "$TMP/token2")
sed -i "s|token_file: $TMP/token\$|token_file: $TMP/token2|" "$TMP/policy.yaml"
kill -HUP "$DAEMON_PID"
for _ in $(seq 1 100); do
	[ "$(scrape -H "Authorization: Bearer $TOKEN2")" = 200 ] && break
	sleep 0.05
done
[ "$(scrape -H "Authorization: Bearer $TOKEN2")" = 200 ] ||
    fail "the reloaded token is not taken"
[ "$(scrape -H "Authorization: Bearer $TOKEN")" = 401 ] ||
    fail "the old token is still taken after the reload"
ok "a reload replaces the token"

# 4. A real Prometheus with credentials_file is up and reads train-a; a
# scrape job without it is down.
if command -v prometheus >/dev/null; then
	PPORT=$(free_port)
	cat >"$TMP/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: bellowsd
    authorization:
      credentials_file: $TMP/token2
    static_configs:
      - targets: ["127.0.0.1:$MPORT"]
  - job_name: anonymous
    static_configs:
      - targets: ["127.0.0.1:$MPORT"]
YAML
	prometheus --config.file="$TMP/prometheus.yml" \
	    --storage.tsdb.path="$TMP/tsdb" \
	    --web.listen-address="127.0.0.1:$PPORT" >"$TMP/prometheus.log" 2>&1 &
	PROM_PID=$!
	trap 'kill "$PROM_PID" 2>/dev/null; wait "$PROM_PID" 2>/dev/null; cleanup' EXIT
	query() {
		python3 - "$PPORT" "$1" <<'PY'
import json, sys, urllib.parse, urllib.request
port, expr = sys.argv[1], sys.argv[2]
url = "http://127.0.0.1:%s/api/v1/query?query=%s" % (port, urllib.parse.quote(expr))
try:
    with urllib.request.urlopen(url, timeout=2) as r:
        res = json.load(r)["data"]["result"]
except Exception:
    sys.exit(0)
print(" ".join(sorted(x["value"][1] for x in res)))
PY
	}
	up=""
	for _ in $(seq 1 120); do
		up=$(query 'up{job="bellowsd"}')$(query 'up{job="anonymous"}')
		[ "$up" = 10 ] && break
		sleep 0.25
	done
	[ "$up" = 10 ] || {
		tail -n 20 "$TMP/prometheus.log"
		fail "up{job=\"bellowsd\"} up{job=\"anonymous\"} are '$up', expected 1 and 0"
	}
	step=$(query 'bellows_job_step{job="bellowsd",bellows_job="train-a"}')
	[ -n "$step" ] || fail "Prometheus has no bellows_job_step of train-a"
	[ -z "$(query 'bellows_job_step{bellows_job="ops-b"}')" ] ||
	    fail "Prometheus has series of ops-b"
	ok "Prometheus with credentials_file: up 1, train-a's step $step, no ops-b; without it: up 0"
	kill "$PROM_PID"
	wait "$PROM_PID" 2>/dev/null
else
	echo "skipped: Prometheus (Debian package prometheus) not installed"
fi

# 5. Security on and no token_file (after a reload): /metrics answers
# anyone, and shows no job; bellowsd says so at start.
policy "" >"$TMP/policy.yaml"
kill -HUP "$DAEMON_PID"
for _ in $(seq 1 100); do
	[ "$(scrape)" = 200 ] && break
	sleep 0.05
done
sleep 1.2 # one publication period
[ "$(scrape)" = 200 ] || fail "without a token_file /metrics does not answer"
grep -q 'bellows_job=' "$TMP/scrape.txt" &&
    fail "without a token /metrics shows jobs under security"
grep -q '^bellows_decisions_total ' "$TMP/scrape.txt" ||
    fail "without a token the daemon's counters are gone too"
kill_daemon TERM
start_daemon_keys
grep -q "/metrics shows no job or layer series: daemon.security is on" \
    "$TMP/bellowsd.log" || fail "no warning at start without a token"
ok "security without a token: daemon counters only, and a warning at start"
kill_daemon TERM
