#!/usr/bin/env bash
# bellows replay reads a bounded amount: a metrics file of /dev/zero (no
# newline, ever) and a file with one over-long line are refused at once,
# with an error naming the file and the line, instead of growing a line
# buffer until the machine runs out of memory.
. "$(dirname "$0")/lib.sh"

POLICY="$SRC/examples/policies/fixed.yaml"

# Runs replay on $1 under a 10 s guard and a 512 MiB address space limit:
# an unbounded reader is killed rather than taking the machine down (not
# under AddressSanitizer, which reserves terabytes of address space).
VLIMIT=524288
if ldd "$BELLOWS" 2>/dev/null | grep -q libasan; then
	VLIMIT=unlimited
fi
replay_on() {
	(ulimit -v "$VLIMIT"; timeout 10 "$BELLOWS" replay --policy "$POLICY" \
	    --metrics "$1") >"$TMP/replay.out" 2>"$TMP/replay.err"
}

replay_on /dev/zero
rc=$?
[ "$rc" -eq 1 ] || { cat "$TMP/replay.err"; fail "replay of /dev/zero exited $rc"; }
grep -qx "/dev/zero:1: the line is longer than 65536 bytes" "$TMP/replay.err" ||
    { cat "$TMP/replay.err"; fail "replay of /dev/zero did not name line 1"; }
ok "replay --metrics /dev/zero: $(cat "$TMP/replay.err")"

{
	echo "window,layer,grad_norm,lr"
	echo "0,a,1,0.1"
	printf '1,'
	head -c 200000 /dev/zero | tr '\0' 'x'
	echo ",1,0.1"
} >"$TMP/long.csv"
replay_on "$TMP/long.csv"
rc=$?
[ "$rc" -eq 1 ] || { cat "$TMP/replay.err"; fail "replay of a long line exited $rc"; }
grep -qx "$TMP/long.csv:3: the line is longer than 65536 bytes" \
    "$TMP/replay.err" ||
    { cat "$TMP/replay.err"; fail "replay of a long line did not name line 3"; }
ok "replay of a 200 kB line: $(cat "$TMP/replay.err")"
