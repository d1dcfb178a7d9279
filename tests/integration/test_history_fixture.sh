#!/usr/bin/env bash
# A history database made by an earlier bellowsd (tests/fixtures/
# history-v5.db, see the README there) reads the same with this build:
# every `bellows history` listing of both its runs and `bellows replay
# --db` of each run print exactly what the bellows that made the file
# printed (tests/fixtures/history-v5/*.txt). Recovery from the same file
# is checked by test_store_fixture. With BELLOWS_FIXTURE_RECORD=1 the
# outputs are written instead of compared (README.md).
. "$(dirname "$0")/lib.sh"

FIX="$SRC/tests/fixtures"
WANT="$FIX/history-v5"
export TZ=UTC
cp "$FIX/history-v5.db" "$TMP/history.db"
cp "$FIX/history-v5.yaml" "$TMP/policy.yaml"
cd "$TMP" || fail "cannot enter $TMP"

# out NAME COMMAND...: COMMAND's standard output and error and its exit
# status, as NAME.txt.
out() {
	local name=$1 rc

	shift
	"$@" >"$TMP/out.txt" 2>&1
	rc=$?
	echo "exit $rc" >>"$TMP/out.txt"
	if [ -n "${BELLOWS_FIXTURE_RECORD:-}" ]; then
		mkdir -p "$WANT"
		cp "$TMP/out.txt" "$WANT/$name.txt"
		return
	fi
	[ -f "$WANT/$name.txt" ] || fail "no expected output $WANT/$name.txt"
	diff -u "$WANT/$name.txt" "$TMP/out.txt" >"$TMP/diff.txt" ||
	    fail "$name differs from what the fixture's bellows printed:
$(head -n 30 "$TMP/diff.txt")"
	ok "$name: as recorded ($(($(wc -l <"$TMP/out.txt") - 1)) lines)"
}

H=("$BELLOWS" history --db history.db)
out runs "${H[@]}" runs --format csv
out runs-table "${H[@]}" runs
out events "${H[@]}" events --format csv
for run in 1 2; do
	for what in layers windows decisions timings stats metrics comm; do
		out "$what-$run" "${H[@]}" "$what" --run "$run" --format csv
	done
	out "windows-layer0-$run" "${H[@]}" windows --run "$run" \
	    --layer layer0.weight --format csv
	out "stats-layer1-$run" "${H[@]}" stats --run "$run" \
	    --layer layer1.weight --format csv
	out "decisions-changed-$run" "${H[@]}" decisions --run "$run" \
	    --changed --format json
	out "timings-per-window-$run" "${H[@]}" timings --run "$run" \
	    --per-window --format csv
	out "replay-$run" "$BELLOWS" replay --policy policy.yaml \
	    --db history.db --run "$run" --all
done
exit 0
