#!/usr/bin/env bash
# bellows codec: a table built from .f32 files, a level-0 round trip that
# gives the file back byte for byte, stats, level 3 smaller than level 0,
# and bad input (a truncated block, a table of another version, a table
# that is no prefix code, a file that is no table, a file that is not a
# whole number of floats) refused with exit 1 and the byte offset, OUT
# left as it was.
. "$(dirname "$0")/lib.sh"

# Gradient-like floats: 40 % zeros, normal around 1e-4, and every
# exponent but 0 and 255 once (so some are escaped).
awk 'BEGIN { srand(3); for (i = 0; i < 200000; i++) {
    if (rand() < 0.4) print 0; else print (rand() - 0.5) * 2e-4 * exp(-10 * rand()) } }' \
    >"$TMP/g.txt"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
"$PY" - "$TMP/g.txt" "$TMP/g.f32" <<'PYEOF' || fail "cannot write g.f32"
import struct, sys
vals = [float(l) for l in open(sys.argv[1])]
vals += [struct.unpack('<f', struct.pack('<I', (e << 23) | 12345))[0] for e in range(1, 255)]
open(sys.argv[2], 'wb').write(struct.pack('<%df' % len(vals), *vals))
PYEOF

"$BELLOWS" codec table --codec gcomp --max-code-bits 8 "$TMP/g.f32" \
    >"$TMP/T" 2>"$TMP/table.err" || fail "codec table exited $?: $(cat "$TMP/table.err")"
[ "$(stat -c %s "$TMP/T")" -eq 268 ] || fail "the table is not 268 bytes"
grep -q "bits per exponent" "$TMP/table.err" || fail "codec table said nothing"
ok "codec table: $(cat "$TMP/table.err")"

"$BELLOWS" codec encode --codec gcomp --table "$TMP/T" --level 0 "$TMP/g.f32" "$TMP/g.gc" ||
    fail "codec encode exited $?"
"$BELLOWS" codec decode --table "$TMP/T" "$TMP/g.gc" "$TMP/back.f32" ||
    fail "codec decode exited $?"
cmp -s "$TMP/g.f32" "$TMP/back.f32" || fail "level 0 did not give the file back"
ok "level 0: $(stat -c %s "$TMP/g.f32") bytes -> $(stat -c %s "$TMP/g.gc") and back byte for byte"

"$BELLOWS" codec stats --table "$TMP/T" "$TMP/g.f32" >"$TMP/s0" || fail "codec stats exited $?"
"$BELLOWS" codec stats --table "$TMP/T" --level 3 "$TMP/g.f32" >"$TMP/s3" || fail "codec stats --level 3 exited $?"
r0=$(awk '$1 == "ratio" {print $2}' "$TMP/s0")
r3=$(awk '$1 == "ratio" {print $2}' "$TMP/s3")
grep -q "bits per exponent" "$TMP/s0" && grep -q "bits per mantissa" "$TMP/s0" ||
    fail "stats lack bits per exponent or mantissa: $(cat "$TMP/s0")"
awk -v a="$r0" -v b="$r3" 'BEGIN { exit !(b < a && a < 1) }' ||
    fail "ratios level 0 $r0, level 3 $r3"
ok "codec stats: ratio $r0 at level 0, $r3 at level 3"

expect_refused() { # WHAT PATTERN ARGS...
    local what=$1 pat=$2
    shift 2
    echo keep >"$TMP/out.f32"
    "$BELLOWS" codec "$@" 2>"$TMP/err" >/dev/null
    local rc=$?
    [ "$rc" -eq 1 ] || fail "$what: exit $rc, not 1: $(cat "$TMP/err")"
    grep -q "$pat" "$TMP/err" || fail "$what: no '$pat' in: $(cat "$TMP/err")"
    [ "$(cat "$TMP/out.f32")" = keep ] || fail "$what: OUT was overwritten"
    ok "$what refused: $(cat "$TMP/err")"
}
head -c 5000 "$TMP/g.gc" >"$TMP/trunc.gc"
expect_refused "a truncated block" "byte 5000: block truncated" \
    decode --table "$TMP/T" "$TMP/trunc.gc" "$TMP/out.f32"
"$BELLOWS" codec table --table-version 9 "$TMP/g.f32" >"$TMP/T9" 2>/dev/null
expect_refused "a table of another version" "byte 8: block encoded with table version 1, the table is version 9" \
    decode --table "$TMP/T9" "$TMP/g.gc" "$TMP/out.f32"
cp "$TMP/T" "$TMP/Tbad"
printf '\001\001\001\001' | dd of="$TMP/Tbad" bs=1 seek=12 conv=notrunc 2>/dev/null
expect_refused "a table that is no prefix code" "not a prefix code" \
    decode --table "$TMP/Tbad" "$TMP/g.gc" "$TMP/out.f32"
expect_refused "a block given as the table" "byte 0: not a GComp table" \
    decode --table "$TMP/g.gc" "$TMP/g.gc" "$TMP/out.f32"
expect_refused "a table given as the block" "byte 0: not a GComp block" \
    decode --table "$TMP/T" "$TMP/T" "$TMP/out.f32"
head -c 4003 "$TMP/g.f32" >"$TMP/odd.f32"
expect_refused "a file of 4003 bytes" "byte 4000" \
    encode --table "$TMP/T" "$TMP/odd.f32" "$TMP/out.f32"

"$BELLOWS" codec encode --table "$TMP/T" --level 4 "$TMP/g.f32" "$TMP/x" 2>/dev/null
[ $? -eq 2 ] || fail "--level 4 is not a usage error"
"$BELLOWS" codec encode --codec zstd --table "$TMP/T" "$TMP/g.f32" "$TMP/x" 2>/dev/null
[ $? -eq 2 ] || fail "--codec zstd is not a usage error"
ok "--level 4 and --codec zstd are usage errors"
