#!/usr/bin/env bash
# A real Prometheus server scrapes a running bellowsd every second (a
# temporary configuration and TSDB, its web API on a free loopback port);
# after a sim job its query API returns bellows_decisions_total > 0 and a
# per-layer level of the job.
. "$(dirname "$0")/lib.sh"

command -v prometheus >/dev/null || {
	echo "SKIP: prometheus (Debian package prometheus) not installed"
	exit 77
}

MPORT=$(free_port)
PPORT=$(free_port)
PROM_PID=""
trap 'kill "$PROM_PID" 2>/dev/null; wait "$PROM_PID" 2>/dev/null; cleanup' EXIT

DAEMON_ARGS="--metrics-listen 127.0.0.1:$MPORT"
start_daemon
run_sim --job scraped --ranks 2 --layers 2 --windows 10 \
    --steps-per-window 5 --step-ms 5 || fail "sim failed"
expect_agreed 2 10

cat >"$TMP/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: bellowsd
    static_configs:
      - targets: ["127.0.0.1:$MPORT"]
YAML
prometheus --config.file="$TMP/prometheus.yml" \
    --storage.tsdb.path="$TMP/tsdb" \
    --web.listen-address="127.0.0.1:$PPORT" >"$TMP/prometheus.log" 2>&1 &
PROM_PID=$!

# query EXPR: the first sample's value of an instant query, or nothing.
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
if res:
    print(res[0]["value"][1])
PY
}

val=""
for _ in $(seq 1 120); do
	val=$(query bellows_decisions_total)
	[ -n "$val" ] && break
	sleep 0.25
done
[ -n "$val" ] || {
	tail -n 20 "$TMP/prometheus.log"
	fail "Prometheus has no bellows_decisions_total within 30 s"
}
python3 -c "import sys; sys.exit(0 if float('$val') > 0 else 1)" ||
    fail "bellows_decisions_total is $val in Prometheus"
ok "Prometheus scraped bellows_decisions_total = $val"
up=$(query 'up{job="bellowsd"}')
[ "$up" = 1 ] || fail "up{job=\"bellowsd\"} is '$up'"
lvl=$(query 'bellows_layer_level{bellows_job="scraped"}')
[ -n "$lvl" ] || fail "no bellows_layer_level of job 'scraped' in Prometheus"
ok "up = 1, bellows_layer_level{bellows_job=\"scraped\"} = $lvl"
info=$(query 'bellows_build_info{job="bellowsd"}')
[ "$info" = 1 ] || fail "bellows_build_info is '$info' in Prometheus"
rss=$(query 'process_resident_memory_bytes{job="bellowsd"}')
python3 -c "import sys; sys.exit(0 if float('${rss:-0}') > 0 else 1)" ||
    fail "process_resident_memory_bytes is '$rss' in Prometheus"
ok "bellows_build_info = 1, process_resident_memory_bytes = $rss"
kill_daemon TERM
