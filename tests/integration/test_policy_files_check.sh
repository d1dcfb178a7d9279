#!/bin/sh
# Every shipped configuration (examples/policies/*.yaml and every
# bench/*/policy.yaml) passes `bellows policy check`, and a broken one is
# refused with each of its errors at its FILE:LINE:COLUMN: documentation
# and benchmarks must not drift from what bellowsd accepts.
. "$(dirname "$0")/lib.sh"

n=0
for f in "$SRC"/examples/policies/*.yaml "$SRC"/bench/*/policy.yaml; do
	[ -f "$f" ] || fail "no file matches $f"
	if ! "$BELLOWS" policy check "$f" >"$TMP/check.out" 2>"$TMP/check.err"
	then
		cat "$TMP/check.err"
		fail "bellows policy check refused $f"
	fi
	head -n 1 "$TMP/check.out" | grep -q "^# $f: valid$" ||
	    fail "$f: no '# FILE: valid' header: $(head -n 1 "$TMP/check.out")"
	n=$((n + 1))
done
[ "$n" -ge 8 ] || fail "only $n configurations found"
ok "$n shipped configurations pass bellows policy check"

# The same check must fail when it should: three errors, three lines.
cat >"$TMP/bad.yaml" <<YAML
daemon:
  apply_lagg: 3
jobs:
  - policies:
      - type: accordion
        params: {eta: -1}
      - type: fixed
        params: {level: 2}
YAML
if "$BELLOWS" policy check "$TMP/bad.yaml" >"$TMP/check.out" \
    2>"$TMP/check.err"; then
	fail "an invalid file passed"
fi
[ "$(wc -l <"$TMP/check.err")" -eq 3 ] ||
    { cat "$TMP/check.err"; fail "expected 3 error lines"; }
grep -q "^$TMP/bad.yaml:2:3: unknown key 'apply_lagg'" "$TMP/check.err" &&
    grep -q "^$TMP/bad.yaml:6:23: eta must be in" "$TMP/check.err" &&
    grep -q "^$TMP/bad.yaml:7:9: policy 'fixed' and policy 'accordion'" \
	"$TMP/check.err" ||
    { cat "$TMP/check.err"; fail "errors not at their positions"; }
ok "an invalid file gives its 3 errors at their positions and exit 1"
