#!/usr/bin/env bash
# bellowsd --metrics-listen serves GET /metrics in the Prometheus text
# format: promtool check metrics accepts what it serves while a sim job
# runs, the counters, per-layer gauges, process_* and bellows_build_info
# are there (bellows_up is not), other paths get 404
# and other methods 405, an oversized request 431; a client that connects
# and sends nothing stalls neither STATUS nor a scrape; bad addresses on
# the command line or in the file are refused with a clear error.
. "$(dirname "$0")/lib.sh"

command -v promtool >/dev/null || {
	echo "SKIP: promtool (Debian package prometheus) not installed"
	exit 77
}

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# http METHOD PATH [BODYBYTES]: prints the status code, then the body.
http() {
	python3 - "$PORT" "$@" <<'PY'
import http.client, sys
port, method, path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
headers = {}
if len(sys.argv) > 4:
    headers["X-Pad"] = "x" * int(sys.argv[4])
try:
    c.request(method, path, headers=headers)
except (BrokenPipeError, ConnectionResetError):
    pass  # the server answered before reading all of it: read the answer
r = c.getresponse()
try:
    print(r.status, flush=True)
    sys.stdout.write(r.read().decode())
    sys.stdout.flush()
except BrokenPipeError:
    pass  # the caller read the status line only
PY
}

# 1. Bad values: a clear error and no daemon.
"$BELLOWSD" --policy "$SRC/examples/policies/fixed.yaml" --no-db \
    --control "$CTL" --publish "$PUB" \
    --metrics-listen 127.0.0.1:99999 >"$TMP/bad.out" 2>&1 &&
    fail "bellowsd started with port 99999"
grep -q "port must be 1 to 65535" "$TMP/bad.out" ||
    fail "no clear error for port 99999: $(cat "$TMP/bad.out")"
ok "--metrics-listen 127.0.0.1:99999: $(head -n1 "$TMP/bad.out")"
write_config "$TMP/bad.yaml"
sed -i 's/^daemon:/daemon:\n  metrics_listen: "nowhere:80"/' "$TMP/bad.yaml"
"$BELLOWSD" --policy "$TMP/bad.yaml" --no-db --control "$CTL" \
    --publish "$PUB" >"$TMP/bad.out" 2>&1 &&
    fail "bellowsd started with metrics_listen nowhere:80"
grep -q "bad.yaml:2:.*metrics listen address 'nowhere:80'" "$TMP/bad.out" ||
    fail "no clear error for metrics_listen: $(cat "$TMP/bad.out")"
ok "metrics_listen: nowhere:80: $(head -n1 "$TMP/bad.out")"

# 2. The file's address, a sim job, promtool.
write_config "$TMP/policy.yaml"
sed -i "s/^daemon:/daemon:\n  metrics_listen: \"127.0.0.1:$PORT\"/" \
    "$TMP/policy.yaml"
start_daemon
run_sim --job prom\"job --ranks 2 --layers 3 --windows 12 \
    --steps-per-window 5 --step-ms 5 || fail "sim failed"
expect_agreed 2 12
sleep 1.2 # one publication period: the snapshot follows the run
http GET /metrics >"$TMP/m.txt" || fail "GET /metrics failed"
[ "$(head -n1 "$TMP/m.txt")" = 200 ] || fail "GET /metrics: $(head -n3 "$TMP/m.txt")"
sed 1d "$TMP/m.txt" >"$TMP/metrics.txt"
promtool check metrics <"$TMP/metrics.txt" >"$TMP/promtool.out" 2>&1 ||
    fail "promtool check metrics: $(cat "$TMP/promtool.out")"
ok "promtool check metrics accepts $(wc -l <"$TMP/metrics.txt") lines"
dec=$(sed -n 's/^bellows_decisions_total \([0-9]*\)$/\1/p' "$TMP/metrics.txt")
[ -n "$dec" ] && [ "$dec" -ge 12 ] ||
    fail "bellows_decisions_total '$dec' after a 12-window run"
ok "bellows_decisions_total $dec"
for m in bellows_reports_total bellows_rank_joins_total \
    bellows_reloads_total bellows_dropped_messages_total \
    bellows_store_pending_rows 'bellows_decision_latency_seconds_bucket{le="+Inf"}' \
    'bellows_job_bytes_saved_total{bellows_job="prom\"job"}' \
    'bellows_layer_level{bellows_job="prom\"job",layer=' \
    'bellows_layer_grad_norm{bellows_job="prom\"job",layer='; do
	grep -qF "$m" "$TMP/metrics.txt" || fail "no '$m' in /metrics"
done
joins=$(sed -n 's/^bellows_rank_joins_total \([0-9]*\)$/\1/p' "$TMP/metrics.txt")
[ "$joins" = 2 ] || fail "bellows_rank_joins_total '$joins', expected 2"
lat=$(sed -n 's/^bellows_decision_latency_seconds_count \([0-9]*\)$/\1/p' "$TMP/metrics.txt")
[ -n "$lat" ] && [ "$lat" -ge 12 ] || fail "latency count '$lat'"
ok "counters, histogram ($lat latencies), job and layer gauges with the label escaped"
for m in process_cpu_seconds_total process_resident_memory_bytes \
    process_virtual_memory_bytes process_open_fds process_max_fds \
    process_start_time_seconds; do
	grep -q "^$m [0-9.e+]*$" "$TMP/metrics.txt" || fail "no '$m' sample in /metrics"
done
fds=$(sed -n 's/^process_open_fds \([0-9]*\)$/\1/p' "$TMP/metrics.txt")
[ "$fds" -ge 3 ] || fail "process_open_fds is '$fds'"
start=$(sed -n 's/^process_start_time_seconds \(.*\)$/\1/p' "$TMP/metrics.txt")
python3 -c "import sys, time; sys.exit(0 if time.time() - 3600 < float('$start') <= time.time() else 1)" ||
    fail "process_start_time_seconds $start is not within the last hour"
grep -qx "bellows_build_info{version=\"$(sed -n "s/^  version : '\(.*\)',$/\1/p" "$SRC/meson.build")\"} 1" \
    "$TMP/metrics.txt" || fail "no bellows_build_info with the project's version"
grep -q "^bellows_up " "$TMP/metrics.txt" && fail "bellows_up is still served"
ok "process_* from /proc ($fds descriptors open), bellows_build_info, no bellows_up"

# 3. Other paths, methods, a request too large.
[ "$(http GET /nope | head -n1)" = 404 ] || fail "GET /nope is not 404"
[ "$(http POST /metrics | head -n1)" = 405 ] || fail "POST /metrics is not 405"
[ "$(http GET /metrics 20000 | head -n1)" = 431 ] ||
    fail "a 20,000-byte request head is not 431"
ok "404 for /nope, 405 for POST, 431 for a 20 kB request head"

# 4. A client that connects and sends nothing: STATUS and /metrics
# both answer while it holds its connection.
python3 -c "
import socket, time
s = socket.create_connection(('127.0.0.1', $PORT))
time.sleep(30)
" &
SILENT=$!
sleep 0.3
"$BELLOWS" status --control "$CTL" --timeout-ms 1000 >/dev/null ||
    fail "STATUS did not answer while a metrics client stalls"
[ "$(http GET /metrics | head -n1)" = 200 ] ||
    fail "/metrics did not answer while a client stalls"
kill "$SILENT" 2>/dev/null
wait "$SILENT" 2>/dev/null
ok "a silent client stalls neither STATUS nor /metrics"

# 5. A reload that moves daemon.metrics_listen says it takes a restart,
# and /metrics stays where it was.
sed -i "s/127.0.0.1:$PORT/127.0.0.1:1/" "$TMP/policy.yaml"
kill -HUP "$DAEMON_PID"
for _ in $(seq 1 100); do
	grep -q "metrics_listen is '127.0.0.1:1' in the reloaded file" \
	    "$TMP/bellowsd.log" && break
	sleep 0.05
done
grep -q "/metrics stays on '127.0.0.1:$PORT' until bellowsd restarts" \
    "$TMP/bellowsd.log" || fail "no warning when a reload moves metrics_listen"
[ "$(http GET /metrics | head -n1)" = 200 ] ||
    fail "/metrics moved or stopped on a reload"
ok "a reload moving metrics_listen is warned about; /metrics stays"

# 6. --metrics-listen overrides the file (bare port: loopback).
kill_daemon TERM
PORT2=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
DAEMON_ARGS="--metrics-listen $PORT2"
start_daemon
PORT=$PORT2
[ "$(http GET /metrics | head -n1)" = 200 ] ||
    fail "--metrics-listen $PORT2 does not serve /metrics on 127.0.0.1"
grep -q "metrics $PORT2" "$TMP/bellowsd.log" || fail "the start line does not name the metrics address"
ok "--metrics-listen PORT serves on 127.0.0.1:$PORT2"
kill_daemon TERM
