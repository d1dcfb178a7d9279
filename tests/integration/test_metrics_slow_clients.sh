#!/usr/bin/env bash
# /metrics is served concurrently: while 50 clients hold connections (25
# silent, 25 sending a byte of a request every 2 s), curl's scrapes are
# answered in full and promtool accepts them, and malformed requests
# (NUL bytes in the request line, a header line without a colon) get
# their answer at once instead of waiting behind the slow ones. The slow
# clients are then cut at their deadline. The time each scrape took is
# printed, not asserted (bench/metrics/slow_clients.py measures it).
. "$(dirname "$0")/lib.sh"

command -v curl >/dev/null || { echo "SKIP: curl not installed"; exit 77; }
command -v promtool >/dev/null || {
	echo "SKIP: promtool (Debian package prometheus) not installed"
	exit 77
}

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
DAEMON_ARGS="--metrics-listen 127.0.0.1:$PORT"
start_daemon
for _ in $(seq 1 100); do
	curl -s -o /dev/null "http://127.0.0.1:$PORT/metrics" && break
	sleep 0.05
done

# The slow clients: they connect, say "connected N", then trickle or
# stay silent until stdin closes; at the end they say how many of their
# connections the server closed ("closed N").
python3 - "$PORT" >"$TMP/slow.out" 2>&1 <<'PY' &
import socket, sys, time, select
port = int(sys.argv[1])
socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(50)]
print("connected", len(socks), flush=True)
request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n"
closed, pos, start = set(), 0, time.monotonic()
while time.monotonic() - start < 30 and len(closed) < len(socks):
    for i, s in enumerate(socks[:25]):
        if i not in closed:
            try:
                s.send(request[pos % len(request):pos % len(request) + 1])
            except OSError:
                closed.add(i)
    pos += 1
    ready, _, _ = select.select([s for i, s in enumerate(socks)
                                 if i not in closed], [], [], 2.0)
    for s in ready:
        try:
            data = s.recv(4096)
        except OSError:
            data = b""
        if not data:
            closed.add(socks.index(s))
print("closed", len(closed), flush=True)
PY
SLOW=$!
for _ in $(seq 1 200); do
	grep -q "connected 50" "$TMP/slow.out" && break
	sleep 0.05
done
grep -q "connected 50" "$TMP/slow.out" || fail "the slow clients did not connect: $(cat "$TMP/slow.out")"

# Scrapes while the 50 are open: whole answers that promtool accepts.
for i in 1 2 3 4 5; do
	curl -s --max-time 30 -o "$TMP/scrape.txt" \
	    -w '%{http_code} %{time_total}\n' \
	    "http://127.0.0.1:$PORT/metrics" >"$TMP/curl.out" ||
	    fail "scrape $i failed with 50 slow clients: $(cat "$TMP/curl.out")"
	read -r code took <"$TMP/curl.out"
	[ "$code" = 200 ] || fail "scrape $i answered $code"
	promtool check metrics <"$TMP/scrape.txt" >"$TMP/promtool.out" 2>&1 ||
	    fail "promtool check metrics: $(cat "$TMP/promtool.out")"
	grep -q '^bellows_uptime_seconds ' "$TMP/scrape.txt" ||
	    fail "scrape $i has no bellows_uptime_seconds"
	echo "scrape $i with 50 slow clients open: $code in $took s"
done
ok "5 scrapes answered in full while 50 slow clients held connections"

# raw BYTES (python literal): the status line the server answers, or
# "(closed)" when it closes without one.
raw() {
	python3 - "$PORT" "$1" <<'PY'
import ast, socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(30)
s.sendall(ast.literal_eval(sys.argv[2]))
out = b""
while b"\r\n" not in out:
    d = s.recv(4096)
    if not d:
        break
    out += d
print(out.split(b"\r\n")[0].decode() or "(closed)")
PY
}
line=$(raw 'b"\x00GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"')
[ "$line" = "HTTP/1.1 400 Bad Request" ] || fail "a request line starting with NUL: '$line'"
line=$(raw 'b"GET /metrics HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n"')
[ "$line" = "HTTP/1.1 400 Bad Request" ] || fail "a header line without a colon: '$line'"
line=$(raw 'b"GET /me\x00trics HTTP/1.1\r\nHost: x\r\n\r\n"')
[ "$line" = "HTTP/1.1 404 Not Found" ] || fail "a NUL inside the path: '$line'"
line=$(raw 'b"GARBAGE\r\n\r\n"')
[ "$line" = "(closed)" ] || fail "a request line of one word: '$line'"
ok "with the 50 still open: 400 for NUL and a header without a colon, 404 for a NUL inside the path, a one-word request line closed"

# The deadline: each slow connection is cut (5 s from accept, checked
# once a second), the trickling ones included.
wait "$SLOW"
grep -q "^closed 50$" "$TMP/slow.out" ||
    fail "not every slow connection was cut at its deadline: $(cat "$TMP/slow.out")"
ok "all 50 slow connections were cut at their deadline"
"$BELLOWS" status --control "$CTL" --timeout-ms 1000 >/dev/null ||
    fail "STATUS did not answer after the slow clients"
kill_daemon TERM
