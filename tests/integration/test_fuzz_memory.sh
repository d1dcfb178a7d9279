#!/bin/sh
# bellowsd's memory stays flat under live fuzzing. Mutated frames (valid
# messages of every request type with bits flipped, bytes overwritten or
# inserted, cut short, or random bytes) include Hellos whose mutated job
# name is a new, valid job: each is created, up to max_jobs, and that is
# what grew bellowsd by about 28 bytes a frame until the table was full.
# After a warm-up of 80,000 frames (the table full), 240,000 more grow
# its resident set by less than 4 MiB (17 bytes a frame: allocator
# noise). The fuzzer waits for a STATUS answer every 500 frames, so
# bellowsd keeps up and what is measured is what it keeps, not ZeroMQ's
# queue. A memory bound, not a time one.
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
start_daemon

for seed in 1 2; do
	"$FUZZ" "$CTL" 40000 "$seed" >/dev/null ||
	    fail "bellowsd stopped answering during the warm-up"
done
warm=$(daemon_kb VmRSS)
for seed in 3 4 5 6 7 8; do
	"$FUZZ" "$CTL" 40000 "$seed" >/dev/null ||
	    fail "bellowsd stopped answering (seed $seed)"
done
after=$(daemon_kb VmRSS)
kill -0 "$DAEMON_PID" || fail "bellowsd died of fuzzed frames"
echo "resident set: $warm kB after the warm-up, $after kB after 240000 more frames"
if daemon_sanitized; then
	ok "bellowsd's RSS is not checked under AddressSanitizer"
else
	[ "$after" -le $((warm + 4096)) ] ||
	    fail "bellowsd grew by $((after - warm)) kB over 240000 fuzzed frames"
	ok "240000 fuzzed frames after a warm-up grow bellowsd by less than 4 MiB"
fi
created=$(grep -c "created: world" "$TMP/bellowsd.log")
[ "$created" -gt 0 ] || fail "no fuzzed Hello created a job: the fuzzer sent nothing valid"
grep -q "dropping message" "$TMP/bellowsd.log" ||
    fail "no fuzzed frame was dropped: the fuzzer sent nothing bad"
"$BELLOWS" status --control "$CTL" --timeout-ms 2000 >"$TMP/status.out" ||
    fail "no STATUS after the fuzzing"
ok "fuzzed frames were refused and counted; the jobs they created stayed within max_jobs"
