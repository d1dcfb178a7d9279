#!/bin/sh
# bellowsd's memory stays flat under live fuzzing. Mutated frames (valid
# messages of every request type with bits flipped, bytes overwritten or
# inserted, cut short, or random bytes) include Hellos whose mutated job
# name is a new, valid job: each is created, up to max_jobs, and that is
# what grew bellowsd by about 28 bytes a frame until the table was full.
# After a warm-up of 80,000 frames (the table full), 240,000 more grow
# what bellowsd has allocated (bellows_heap_allocated_bytes on /metrics,
# glibc's bytes in use) by less than 1 MiB: a leak of 5 bytes a frame
# would show. The resident set is no such measure: freed memory the
# allocator keeps, and ZeroMQ's queues while bellowsd falls behind on a
# loaded machine, move it by several MiB either way (4.2 MiB up once in
# CI), so it only has a loose bound (16 MiB). The fuzzer waits for a
# STATUS answer every 500 frames, so bellowsd keeps up and what is
# measured is what it keeps. A memory bound, not a time one.
. "$(dirname "$0")/lib.sh"

FUZZ="$BUILD/tests/integration/frame_fuzz"
cat >"$TMP/policy.yaml" <<YAML
daemon:
  max_jobs: 64
jobs:
  - match: "*"
    policies:
      - type: schedule
        params:
          levels: {0: 2}
YAML
PORT=$(free_port)
DAEMON_ARGS="--metrics-listen 127.0.0.1:$PORT"
start_daemon

# heap_kb: bellowsd's allocated heap in kB, from a metrics snapshot taken
# at least a second after the call (they are taken once a second), so
# after the frames sent before it were handled. Empty if not served.
heap_kb() {
	python3 - "$PORT" <<'PY'
import http.client, sys, time
port = int(sys.argv[1])

def scrape():
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/metrics")
    vals = {}
    body = c.getresponse().read()
    for line in body.decode().splitlines():
        name, _, value = line.rpartition(" ")
        if name and not line.startswith("#"):
            vals[name] = float(value)
    return vals

first = scrape()["bellows_uptime_seconds"]
while True:
    time.sleep(0.2)
    m = scrape()
    if m["bellows_uptime_seconds"] >= first + 2:
        break
heap = m.get("bellows_heap_allocated_bytes")
print("" if heap is None else int(heap) // 1024)
PY
}

for seed in 1 2; do
	"$FUZZ" "$CTL" 40000 "$seed" >/dev/null ||
	    fail "bellowsd stopped answering during the warm-up"
done
warm=$(daemon_kb VmRSS)
warm_heap=$(heap_kb) || fail "no /metrics after the warm-up"
for seed in 3 4 5 6 7 8; do
	"$FUZZ" "$CTL" 40000 "$seed" >/dev/null ||
	    fail "bellowsd stopped answering (seed $seed)"
done
after=$(daemon_kb VmRSS)
after_heap=$(heap_kb) || fail "no /metrics after the fuzzing"
kill -0 "$DAEMON_PID" || fail "bellowsd died of fuzzed frames"
echo "resident set: $warm kB after the warm-up, $after kB after 240000 more frames"
echo "allocated: ${warm_heap:-?} kB after the warm-up, ${after_heap:-?} kB after 240000 more frames"
if daemon_sanitized; then
	ok "bellowsd's memory is not checked under AddressSanitizer"
else
	[ -n "$warm_heap" ] && [ -n "$after_heap" ] ||
	    fail "/metrics serves no bellows_heap_allocated_bytes"
	[ "$after_heap" -le $((warm_heap + 1024)) ] ||
	    fail "bellowsd's allocations grew by $((after_heap - warm_heap)) kB over 240000 fuzzed frames"
	ok "240000 fuzzed frames after a warm-up grow bellowsd's allocations by less than 1 MiB"
	[ "$after" -le $((warm + 16384)) ] ||
	    fail "bellowsd's resident set grew by $((after - warm)) kB over 240000 fuzzed frames"
	ok "and its resident set by less than 16 MiB"
fi
created=$(grep -c "created: world" "$TMP/bellowsd.log")
[ "$created" -gt 0 ] || fail "no fuzzed Hello created a job: the fuzzer sent nothing valid"
grep -q "dropping message" "$TMP/bellowsd.log" ||
    fail "no fuzzed frame was dropped: the fuzzer sent nothing bad"
"$BELLOWS" status --control "$CTL" --timeout-ms 2000 >"$TMP/status.out" ||
    fail "no STATUS after the fuzzing"
ok "fuzzed frames were refused and counted; the jobs they created stayed within max_jobs"
