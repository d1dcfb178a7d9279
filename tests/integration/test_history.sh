#!/usr/bin/env bash
# bellows history, export and replay --db read what bellowsd recorded: a
# 3-rank accordion job runs against a real bellowsd with a history file;
# while it runs, `bellows history` must read the file (WAL, read-only)
# and see the run live. Afterwards every history subcommand must answer
# in every format (JSON that parses, CSV whose row counts are the
# database's, tables whose columns line up), `bellows export` must write
# each table with the database's row count, and replaying the run
# against its own policy must differ nowhere, against a fixed level
# everywhere the level was not that.
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
JOB=hist
DB="$TMP/h.db"
RANKS=3
LAYERS=4
WINDOWS=16
cat >"$TMP/policy.yaml" <<YAML
daemon:
  apply_lag: 1
  window_timeout_ms: 3000
  rank_timeout_ms: 1500
  heartbeat_ms: 200
jobs:
  - match: "$JOB"
    policies:
      - type: accordion
        params:
          interval: 2
          eta: 0.3
          critical_level: 2
          stable_level: 1
YAML

# start_daemon from lib.sh, with the history in $DB.
"$BELLOWSD" --control "$CTL" --publish "$PUB" --policy "$TMP/policy.yaml" \
    --db "$DB" --log-level info >>"$TMP/bellowsd.log" 2>&1 &
DAEMON_PID=$!
for _ in $(seq 1 100); do
	"$BELLOWS" status --control "$CTL" --timeout-ms 200 >/dev/null 2>&1 &&
	    break
	sleep 0.05
done

hist() {
	"$BELLOWS" history "$@" --db "$DB"
}

sq() {
	sqlite3 -readonly "$DB" "$1"
}

# ---- reading while bellowsd writes ---------------------------------------
run_sim --job "$JOB" --ranks $RANKS --layers $LAYERS --windows $WINDOWS \
    --steps-per-window 4 --step-ms 25 &
SIM_PID=$!
reads=0
live_reads=0
while kill -0 $SIM_PID 2>/dev/null; do
	if [ -f "$DB" ]; then
		hist runs --format csv >"$TMP/live_runs.csv" 2>"$TMP/live.err" ||
		    { cat "$TMP/live.err"; fail "history runs failed while bellowsd wrote"; }
		reads=$((reads + 1))
		state=$(awk -F, 'NR == 2 { print $7 }' "$TMP/live_runs.csv")
	fi
	# Once the run is recorded, its windows as they close.
	if [ -n "${state:-}" ]; then
		hist windows --format csv >"$TMP/live.csv" 2>"$TMP/live.err" ||
		    { cat "$TMP/live.err"; fail "history windows failed while bellowsd wrote"; }
		reads=$((reads + 1))
		n=$(($(wc -l <"$TMP/live.csv") - 1))
		if [ "$n" -gt 0 ] && [ "$n" -lt $WINDOWS ] && [ "$state" = live ]; then
			live_reads=$((live_reads + 1))
		fi
	fi
	sleep 0.1
done
wait $SIM_PID || fail "sim exited with $?"
expect_agreed $RANKS $WINDOWS
[ "$live_reads" -gt 0 ] ||
    fail "no read saw the run live with some of its windows ($reads reads)"
ok "history windows read the file $reads times while bellowsd wrote; $live_reads saw the run live, part way"

# The run ends when every rank has said Bye.
for _ in $(seq 1 50); do
	[ "$(sq "SELECT count(*) FROM runs WHERE ended_wall_ms IS NOT NULL")" = 1 ] && break
	sleep 0.1
done
RUN=$(sq "SELECT max(id) FROM runs")
[ "$RUN" = 1 ] || fail "expected run 1, the database has '$RUN'"

# ---- every subcommand in every format ------------------------------------
# count_csv FILE: records of a CSV file (fields may span lines).
count_csv() {
	$PY -c 'import csv, sys; print(sum(1 for _ in csv.reader(open(sys.argv[1]))) - 1)' "$1"
}
# check_json FILE N: a JSON array of N objects.
check_json() {
	$PY -c '
import json, sys
a = json.load(open(sys.argv[1]))
assert isinstance(a, list), "not an array"
assert all(isinstance(o, dict) for o in a), "not objects"
assert len(a) == int(sys.argv[2]), "%d objects, not %s" % (len(a), sys.argv[2])
' "$1" "$2"
}
# check_table FILE: every line has the header's columns, each column
# lined up on its left or its right edge.
check_table() {
	$PY -c '
import re, sys
lines = open(sys.argv[1]).read().splitlines()
spans = [[m.span() for m in re.finditer(r"\S+(?: \S+)*", l)] for l in lines]
assert len(lines) > 1, "no rows"
for i, s in enumerate(spans):
    assert len(s) == len(spans[0]), "line %d: %d columns, header %d" % (i + 1, len(s), len(spans[0]))
for c in range(len(spans[0])):
    starts = {s[c][0] for s in spans}
    ends = {s[c][1] for s in spans}
    assert len(starts) == 1 or len(ends) == 1, "column %d not aligned" % c
' "$1"
}

# subcommand: rows expected from the database
declare -A want=(
	[runs]=$(sq "SELECT count(*) FROM runs")
	[layers]=$(sq "SELECT count(*) FROM layers WHERE run_id = $RUN")
	[windows]=$(sq "SELECT count(*) FROM window_info WHERE run_id = $RUN")
	[decisions]=$(sq "SELECT count(*) FROM decisions WHERE run_id = $RUN")
	[events]=$(sq "SELECT count(*) FROM events")
	[timings]=$(sq "SELECT count(DISTINCT rank) FROM timings WHERE run_id = $RUN")
)
[ "${want[windows]}" -eq $WINDOWS ] ||
    fail "the database holds ${want[windows]} windows, the sim ran $WINDOWS"
[ "${want[layers]}" -eq $LAYERS ] || fail "the database holds ${want[layers]} layers"
[ "${want[timings]}" -eq $RANKS ] || fail "timings of ${want[timings]} ranks"
[ "${want[decisions]}" -gt $WINDOWS ] ||
    fail "only ${want[decisions]} decisions for $WINDOWS windows"
for sub in runs layers windows decisions events timings; do
	hist $sub --format json >"$TMP/$sub.json" 2>"$TMP/$sub.err" ||
	    { cat "$TMP/$sub.err"; fail "history $sub --format json exited with $?"; }
	check_json "$TMP/$sub.json" "${want[$sub]}" ||
	    fail "history $sub --format json: not ${want[$sub]} objects"
	hist $sub --format csv >"$TMP/$sub.csv" 2>/dev/null ||
	    fail "history $sub --format csv exited with $?"
	n=$(count_csv "$TMP/$sub.csv")
	[ "$n" -eq "${want[$sub]}" ] ||
	    fail "history $sub --format csv: $n rows, the database has ${want[$sub]}"
	hist $sub >"$TMP/$sub.txt" 2>/dev/null || fail "history $sub exited with $?"
	n=$(($(wc -l <"$TMP/$sub.txt") - 1))
	[ "$n" -eq "${want[$sub]}" ] ||
	    fail "history $sub: $n table rows, the database has ${want[$sub]}"
	ok "history $sub: ${want[$sub]} rows as JSON, CSV and a table"
done
head -1 "$TMP/windows.csv" | grep -q '^window,first_step,last_step,lr,lr_next,reported,expected,complete,late,step_ms_median,floats_sent,floats_raw,sent_pct,bytes_saved,compressed_applied,compressed_decided,closed$' ||
    fail "windows CSV header: $(head -1 "$TMP/windows.csv")"
head -1 "$TMP/decisions.csv" | grep -q '^seq,window,apply_step,time,source,policy,reason,n_changes,changes$' ||
    fail "decisions CSV header: $(head -1 "$TMP/decisions.csv")"
for sub in runs windows timings; do
	check_table "$TMP/$sub.txt" || { cat "$TMP/$sub.txt"; fail "history $sub: columns not aligned"; }
done
ok "the runs, windows and timings tables line up"
hist layers --wide >"$TMP/layers_wide.txt" 2>/dev/null
grep -q "^ *0  layer0.weight  " "$TMP/layers_wide.txt" ||
    { cat "$TMP/layers_wide.txt"; fail "history layers lacks layer0.weight"; }

hist windows 2>&1 >/dev/null | grep -q "run $RUN (job '$JOB', ended), the latest" ||
    fail "history windows did not say which run it took"
ok "history names the run it took by default"

saved=$(sq "SELECT sum(floats_raw - floats_sent) * 4 FROM window_info WHERE run_id = $RUN")
$PY -c '
import json, sys
r = json.load(open(sys.argv[1]))[0]
assert r["bytes_saved"] == int(sys.argv[2]), r
assert r["state"] == "ended" and r["job"] == sys.argv[3] and r["world"] == 3, r
assert r["windows"] == int(sys.argv[4]), r
' "$TMP/runs.json" "$saved" "$JOB" $WINDOWS || fail "history runs: $(cat "$TMP/runs.json")"
ok "history runs: $saved bytes saved, as the database sums them"

# Level changes as decisions made them, and per layer; accordion sets no
# threshold or gate: each layer was sent at the levels decided (its
# highest alike), recorded by this build's agents (no note of a missing
# applied level).
changes=$(sq "SELECT count(*) FROM decision_changes WHERE run_id = $RUN AND knob = 'level' AND old IS NOT NULL")
$PY -c '
import json, sys
layers = json.load(open(sys.argv[1]))
assert sum(l["decided_changes"] for l in layers) == int(sys.argv[2]), layers
assert all(l["windows"] == int(sys.argv[3]) for l in layers), layers
assert all(l["applied_max"] == l["decided_max"] for l in layers), layers
' "$TMP/layers.json" "$changes" $WINDOWS || fail "history layers: $(cat "$TMP/layers.json")"
[ "$changes" -gt 0 ] || fail "the level never changed: nothing was tested"
hist layers 2>&1 >/dev/null | grep -q "recorded no applied level" &&
    fail "history layers says this run recorded no applied level"
ok "history layers: $changes level changes, as decision_changes holds; applied as decided"

hist windows --layer layer0.weight --since 3 --until 7 --format csv >"$TMP/l0.csv" 2>/dev/null ||
    fail "history windows --layer exited with $?"
[ "$(count_csv "$TMP/l0.csv")" -eq 5 ] || fail "windows 3..7 of layer0.weight: $(cat "$TMP/l0.csv")"
head -1 "$TMP/l0.csv" | grep -q '^window,layer,norm_rank0,norm_mean,level_applied,level_decided,error_bound,lr$' ||
    fail "layer windows header: $(head -1 "$TMP/l0.csv")"
n=$(hist decisions --changed --format csv 2>/dev/null | count_csv /dev/stdin)
m=$(sq "SELECT count(DISTINCT seq) FROM decision_changes WHERE run_id = $RUN")
[ "$n" -eq "$m" ] || fail "decisions --changed: $n, decision_changes names $m"
since=$(sq "SELECT strftime('%Y-%m-%dT%H:%M:%S', min(closed_wall_ms) / 1000, 'unixepoch') FROM window_info WHERE run_id = $RUN")
hist timings --per-window --since "$since" --format json >"$TMP/tw.json" 2>/dev/null ||
    fail "history timings --per-window --since $since exited with $?"
check_json "$TMP/tw.json" "$(sq "SELECT count(*) FROM timings WHERE run_id = $RUN")" ||
    fail "timings --per-window since $since"
ok "--layer, --since/--until (windows and times), --changed, --per-window"

hist windows --layer nosuch >/dev/null 2>&1 && fail "an unknown layer was accepted"
hist windows --run 99 >/dev/null 2>&1 && fail "an unknown run was accepted"
hist events --since 3 >/dev/null 2>&1; [ $? -eq 2 ] || fail "events --since WINDOW was not a usage error"
hist windows --layer layer0.weigth >/dev/null 2>"$TMP/typo.err" &&
    fail "a mistyped layer was accepted"
grep -q "has no layer 'layer0.weigth' (did you mean 'layer0.weight'?)" \
    "$TMP/typo.err" || fail "no suggestion for a layer: $(cat "$TMP/typo.err")"
typo=${JOB%?}
hist runs --job "$typo" >/dev/null 2>"$TMP/typo.err"
[ $? -eq 1 ] || fail "runs --job $typo (a job with no run) did not exit 1"
grep -q "job '$typo' has no run (did you mean '$JOB'?)" "$TMP/typo.err" ||
    fail "no suggestion for a job: $(cat "$TMP/typo.err")"
ok "unknown layers, jobs and runs fail, naming the nearest; events refuse window bounds"

# ---- export ----------------------------------------------------------------
"$BELLOWS" export --db "$DB" --run $RUN --out "$TMP/export" >"$TMP/export.out" 2>&1 ||
    { cat "$TMP/export.out"; fail "export exited with $?"; }
declare -A sql=(
	[runs]="SELECT count(*) FROM runs WHERE id = $RUN"
	[layers]="SELECT count(*) FROM layers WHERE run_id = $RUN"
	[rank_events]="SELECT count(*) FROM rank_events WHERE run_id = $RUN"
	[window_info]="SELECT count(*) FROM window_info WHERE run_id = $RUN"
	[windows]="SELECT count(*) FROM windows WHERE run_id = $RUN"
	[timings]="SELECT count(*) FROM timings WHERE run_id = $RUN"
	[decisions]="SELECT count(*) FROM decisions WHERE run_id = $RUN"
	[decision_changes]="SELECT count(*) FROM decision_changes WHERE run_id = $RUN"
	[events]="SELECT count(*) FROM events WHERE run_id = $RUN OR (run_id IS NULL AND job IS NULL AND wall_ms BETWEEN (SELECT started_wall_ms FROM runs WHERE id = $RUN) AND (SELECT ended_wall_ms FROM runs WHERE id = $RUN))"
	[policy_files]="SELECT count(*) FROM policy_files WHERE hash = (SELECT config_hash FROM runs WHERE id = $RUN)"
)
for t in "${!sql[@]}"; do
	[ -f "$TMP/export/$t.csv" ] || fail "export wrote no $t.csv"
	n=$(count_csv "$TMP/export/$t.csv")
	m=$(sq "${sql[$t]}")
	[ "$n" -eq "$m" ] || fail "export $t.csv: $n rows, the database has $m"
done
ok "export wrote ${#sql[@]} tables with the database's row counts"
$PY -c '
import csv, struct, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert all(len(r["levels"].split()) == int(r["n_layers"]) for r in rows), rows[0]
assert any(float(x) > 0 for r in rows for x in r["levels"].split()), "no level"
' "$TMP/export/decisions.csv" || fail "decisions.csv levels: $(head -3 "$TMP/export/decisions.csv")"
ok "export decodes the levels BLOB: n_layers numbers per decision"
"$BELLOWS" export --db "$DB" --run $RUN --out "$TMP/export" >/dev/null 2>&1 &&
    fail "export overwrote its files without --force"
"$BELLOWS" export --db "$DB" --run $RUN --out "$TMP/export" --force >/dev/null 2>&1 ||
    fail "export --force exited with $?"
ok "export refuses to overwrite, and overwrites with --force"

# ---- replay --db -----------------------------------------------------------
"$BELLOWS" replay --db "$DB" --run $RUN --policy "$TMP/policy.yaml" \
    >"$TMP/same.csv" 2>"$TMP/same.err" ||
    { cat "$TMP/same.err"; fail "replay --db exited with $?"; }
[ "$(cat "$TMP/same.csv")" = "window,layer,recorded,replayed" ] ||
    fail "replay against the run's own policy differs: $(head -5 "$TMP/same.csv")"
rows=$((WINDOWS * LAYERS))
grep -q "$WINDOWS windows compared, 0 of $rows rows differ; level changes: recorded $changes, replayed $changes" "$TMP/same.err" ||
    fail "replay summary: $(cat "$TMP/same.err")"
ok "replay --db against the run's own policy: $(tail -1 "$TMP/same.err" | sed 's/^bellows replay: //')"

cat >"$TMP/fixed.yaml" <<YAML
jobs:
  - match: "*"
    policies:
      - type: fixed
        params: {level: 4}
YAML
"$BELLOWS" replay --db "$DB" --policy "$TMP/fixed.yaml" \
    >"$TMP/fixed.csv" 2>"$TMP/fixed.err" ||
    { cat "$TMP/fixed.err"; fail "replay --db (fixed) exited with $?"; }
differ=$(($(wc -l <"$TMP/fixed.csv") - 1))
selected=$(sq "SELECT count(*) FROM windows WHERE run_id = $RUN AND level != 4 AND layer IN (SELECT idx FROM layers WHERE run_id = $RUN AND ndim >= 2)")
[ "$differ" -eq "$selected" ] && [ "$differ" -gt 0 ] ||
    fail "replay at fixed level 4: $differ rows differ, the run had $selected weight rows not at 4"
awk -F, 'NR > 1 && $4 != 4 { exit 1 }' "$TMP/fixed.csv" || fail "a differing row is not replayed at 4"
grep -q "$differ of $rows rows differ; level changes: recorded $changes, replayed 0" "$TMP/fixed.err" ||
    fail "replay summary: $(cat "$TMP/fixed.err")"
"$BELLOWS" replay --db "$DB" --policy "$TMP/fixed.yaml" --all 2>/dev/null >"$TMP/all.csv"
[ $(($(wc -l <"$TMP/all.csv") - 1)) -eq $rows ] || fail "replay --all does not print every row"
ok "replay --db at a fixed level 4: $differ of $rows rows differ"
