#!/bin/sh
# Every shipped configuration (examples/policies/*.yaml and every
# bench/*/policy.yaml) passes `bellows policy check`, and a broken one is
# refused with each of its errors at its FILE:LINE:COLUMN, by policy check
# and by bellowsd at start alike: documentation and benchmarks must not
# drift from what bellowsd accepts, and one try shows all there is to fix.
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

# bellowsd refuses to start on the same file with the same errors, each
# on its own line after "bellowsd: ", and exits 1.
"$BELLOWSD" --policy "$TMP/bad.yaml" --control "$CTL" --publish "$PUB" \
    --no-db >"$TMP/daemon.out" 2>"$TMP/daemon.err"
rc=$?
[ "$rc" -eq 1 ] ||
    { cat "$TMP/daemon.err"; fail "bellowsd exited $rc on an invalid file"; }
sed 's/^/bellowsd: /' "$TMP/check.err" >"$TMP/want.err"
cmp -s "$TMP/want.err" "$TMP/daemon.err" ||
    { diff "$TMP/want.err" "$TMP/daemon.err"; fail "bellowsd's errors differ from policy check's"; }
ok "bellowsd refuses to start on it with the same 3 errors and exit 1"

# Past 50 errors both stop and say so.
{
	echo "daemon:"
	for i in $(seq 1 60); do
		echo "  bogus_$i: 1"
	done
} >"$TMP/many.yaml"
"$BELLOWSD" --policy "$TMP/many.yaml" --control "$CTL" --publish "$PUB" \
    --no-db >"$TMP/daemon.out" 2>"$TMP/daemon.err"
rc=$?
[ "$rc" -eq 1 ] ||
    { cat "$TMP/daemon.err"; fail "bellowsd exited $rc on 60 errors"; }
[ "$(grep -c "^bellowsd: $TMP/many.yaml:[0-9]*:3: unknown key 'bogus_" \
    "$TMP/daemon.err")" -eq 50 ] &&
    [ "$(tail -n 1 "$TMP/daemon.err")" = \
    "bellowsd: $TMP/many.yaml: stopped after 50 errors" ] &&
    [ "$(wc -l <"$TMP/daemon.err")" -eq 51 ] ||
    { cat "$TMP/daemon.err"; fail "bellowsd does not stop at 50 errors"; }
ok "bellowsd gives the first 50 of 60 errors and says it stopped"

# A file it cannot read is one line that says why.
"$BELLOWSD" --policy "$TMP/missing.yaml" --control "$CTL" \
    --publish "$PUB" --no-db >"$TMP/daemon.out" 2>"$TMP/daemon.err"
rc=$?
[ "$rc" -eq 1 ] && [ "$(wc -l <"$TMP/daemon.err")" -eq 1 ] &&
    grep -q "^bellowsd: $TMP/missing.yaml: cannot open: " "$TMP/daemon.err" ||
    { cat "$TMP/daemon.err"; fail "exit $rc on a missing file"; }
ok "bellowsd gives one line and exit 1 for a file it cannot open"
