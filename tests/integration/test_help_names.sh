#!/usr/bin/env bash
# The names a newcomer types: `bellows help` and `bellows history --help`
# list every subcommand and history view; a mistyped command, option,
# history view or policy type is refused with "did you mean" the nearest one
# (and without a guess when none is near); and against a real bellowsd,
# ranks that end cleanly (a Bye) are recorded as rank_left, not
# rank_lost, in bellows status and bellows history events.
. "$(dirname "$0")/lib.sh"

# Every command of the dispatch table, and every history view.
"$BELLOWS" help >"$TMP/help.txt" || fail "bellows help exited with $?"
for c in status policy sim replay history export codec keygen top help; do
	if [ "$c" = top ] && ! grep -q "^  top " "$TMP/help.txt"; then
		# Built without the dashboard (-Ddashboard=false).
		continue
	fi
	grep -q "^  $c " "$TMP/help.txt" || fail "bellows help lacks $c"
done
views="runs layers windows decisions events timings stats metrics comm residuals"
for v in $views; do
	grep -q "history .*$v" "$TMP/help.txt" ||
	    fail "bellows help's history line lacks $v"
done
"$BELLOWS" history --help >"$TMP/hhelp.txt" || fail "history --help: $?"
for v in $views; do
	grep -q "^  $v " "$TMP/hhelp.txt" ||
	    fail "bellows history --help lacks $v"
done
"$BELLOWS" history 2>"$TMP/which.txt" && fail "history without a view ran"
for v in $views; do
	grep -q "$v" <(head -1 "$TMP/which.txt") ||
	    fail "'which history?' does not name $v"
done
ok "bellows help and history --help list every command and view"

# refused EXPECTED COMMAND...: exit 2 with EXPECTED on standard error.
refused() {
	local want=$1 rc

	shift
	"$@" >"$TMP/out.txt" 2>"$TMP/err.txt"
	rc=$?
	[ "$rc" -eq 2 ] || fail "'$*' exited with $rc, not 2"
	grep -qF "$want" "$TMP/err.txt" ||
	    fail "'$*' said '$(head -1 "$TMP/err.txt")', not '$want'"
}
refused "unknown command 'hsitory'; did you mean 'history'?" "$BELLOWS" hsitory
refused "unknown command 'stauts'; did you mean 'status'?" "$BELLOWS" stauts
refused "unknown command 'tpo'; did you mean 'top'?" "$BELLOWS" help tpo
refused "unknown command 'frobnicate'" "$BELLOWS" frobnicate
grep -q "did you mean" "$TMP/err.txt" && fail "a guess for 'frobnicate'"
refused "unknown subcommand 'chek'; did you mean 'check'?" \
    "$BELLOWS" policy chek x.yaml
refused "unknown action 'tabel'; did you mean 'table'?" \
    "$BELLOWS" codec tabel
refused "unknown history 'decison'; did you mean 'decisions'?" \
    "$BELLOWS" history decison --db "$TMP/none.db"
refused "unknown history 'metric'; did you mean 'metrics'?" \
    "$BELLOWS" history metric
cat >"$TMP/typo.yaml" <<'YAML'
jobs:
  - match: "*"
    policies:
      - type: slimgcc
YAML
"$BELLOWS" policy check "$TMP/typo.yaml" >"$TMP/out.txt" 2>&1 &&
    fail "a policy file with type slimgcc passed the check"
grep -qF "typo.yaml:4:15: unknown policy type 'slimgcc'; did you mean 'slimgc'?" \
    "$TMP/out.txt" || fail "policy check said: $(cat "$TMP/out.txt")"
# bellowsd refuses the same file with the same words.
"$BELLOWSD" --policy "$TMP/typo.yaml" --control "$CTL" --publish "$PUB" \
    --no-db >"$TMP/typo.log" 2>&1 && fail "bellowsd ran with type slimgcc"
grep -qF "did you mean 'slimgc'?" "$TMP/typo.log" ||
    fail "bellowsd said: $(cat "$TMP/typo.log")"
refused "unknown option '--dbb'; did you mean '--db'?" \
    "$BELLOWS" history runs --dbb "$TMP/none.db"
refused "bellows status: unknown option '--jbo'; did you mean '--job'?" \
    "$BELLOWS" status --jbo x
refused "bellows top: unknown option '--contrl'; did you mean '--control'?" \
    "$BELLOWS" top --contrl x
refused "bellowsd: unknown option '--polcy'; did you mean '--policy'?" \
    "$BELLOWSD" --polcy x.yaml
"$BELLOWSD" --policy >"$TMP/out.txt" 2>&1
grep -q "did you mean" "$TMP/out.txt" && fail "a guess for a missing value"
ok "mistyped commands, options, views and policy types get the nearest name"

# A clean end: every rank says Bye.
DB=$TMP/history.db
start_daemon
run_sim --job clean --ranks 2 --layers 4 --windows 3 --steps-per-window 5 \
    || fail "the sim failed: $(tail -3 "$TMP/sim.err")"
"$BELLOWS" status --control "$CTL" --format json >"$TMP/status.json" ||
    fail "bellows status failed"
python3 - "$TMP/status.json" <<'PYEOF' || fail "status events: $(cat "$TMP/status.json")"
import json, sys
ev = json.load(open(sys.argv[1]))["events"]
kinds = [e["kind"] for e in ev]
assert kinds.count("rank_left") == 2, kinds
assert "rank_lost" not in kinds, kinds
PYEOF
"$BELLOWS" history events --db "$DB" --format csv >"$TMP/events.csv" ||
    fail "history events failed"
[ "$(grep -c ',rank_left,' "$TMP/events.csv")" -eq 2 ] ||
    fail "history events: $(cat "$TMP/events.csv")"
grep -q ',rank_lost,' "$TMP/events.csv" && fail "a clean exit as rank_lost"
ok "a clean exit is rank_left in status and the history, never rank_lost"
exit 0
