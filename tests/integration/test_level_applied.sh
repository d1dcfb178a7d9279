#!/usr/bin/env bash
# The history records the level each layer was sent at beside the level
# decided, through a real bellowsd and `bellows sim` ranks (real agents,
# which derive the level applied from the decision in force):
#
# - slimgc (with `fixed` level 1) calibrates to a size threshold (12288 B
#   for the sim's model): after it, the layers below it are recorded at
#   applied level 0 with decided level 1, the others at 1;
# - perfmodel (with `fixed` level 4 on the matrices) starts with its gate
#   off (raw_windows): those windows record applied level 0 for every
#   layer, decided 4 for the matrices; once it is on, applied is decided.
#
# Every row is checked against the decision in force at its window's
# last step (the newest with apply_step <= last_step): applied is 0 when
# that decision turns compression off or the layer's float32 size is
# below its threshold, else the level decided. `bellows history layers`
# shows both, labelled, with no note of a missing applied level.
. "$(dirname "$0")/lib.sh"

command -v sqlite3 >/dev/null || { echo "sqlite3 not installed"; exit 77; }

DB="$TMP/history.db"
RANKS=4
LAYERS=8
cat >"$TMP/policy.yaml" <<YAML
daemon:
  apply_lag: 1
  window_timeout_ms: ${WINDOW_TIMEOUT_MS:-3000}
  rank_timeout_ms: ${RANK_TIMEOUT_MS:-1500}
  heartbeat_ms: 200
jobs:
  - match: "gate"
    policies:
      - type: fixed
        name: levels
        layers:
          min_ndim: 2
        params: {level: 4}
      - type: perfmodel
        name: gate
        params:
          bucket_bytes: 0
          overlap: false
          raw_windows: 3
  - match: "*"
    policies:
      - type: fixed
        name: levels
        params: {level: 1}
      - type: slimgc
        name: cttab
        params: {calibration_steps: 20}
YAML

q() { sqlite3 -batch -noheader "$DB" "$1"; }

# wrong RUN: the rows whose applied level is not what the decision in
# force at their window's last step implies (or is not recorded).
wrong() {
	q "SELECT count(*) FROM windows w
	    JOIN window_info i ON i.run_id = w.run_id AND i.window = w.window
	    JOIN layers l ON l.run_id = w.run_id AND l.idx = w.layer
	    JOIN decisions d ON d.run_id = w.run_id AND d.seq =
	        (SELECT max(seq) FROM decisions d2 WHERE d2.run_id = w.run_id
	         AND d2.apply_step <= i.last_step)
	    WHERE w.run_id = $1 AND (w.level_applied IS NULL OR
	        w.level_applied != CASE WHEN d.compression_off
	            OR l.numel * 4 < d.size_threshold THEN 0
	            ELSE w.level END)"
}

start_daemon

# ---- slimgc: the size threshold ---------------------------------------
run_sim --job sg --ranks $RANKS --layers $LAYERS --windows 8 \
    --steps-per-window 10 --comm-model 0.01,1,32,0.13 ||
    fail "sim exited with $?"
expect_agreed $RANKS 8
run=$(q "SELECT id FROM runs WHERE job = 'sg'")
thr=$(q "SELECT group_concat(DISTINCT size_threshold) FROM decisions
    WHERE run_id = $run AND size_threshold > 0")
[ -n "$thr" ] || fail "slimgc set no size threshold"
n=$(wrong "$run")
[ "$n" = 0 ] || fail "sg: $n rows do not hold the level applied under the decision in force"
# Rows decided 1 and sent raw under a threshold, and rows decided 1 and
# sent at 1 (before the calibration's end, or above the threshold).
raw=$(q "SELECT count(*) FROM windows w
    JOIN window_info i ON i.run_id = w.run_id AND i.window = w.window
    JOIN layers l ON l.run_id = w.run_id AND l.idx = w.layer
    JOIN decisions d ON d.run_id = w.run_id AND d.seq =
        (SELECT max(seq) FROM decisions d2 WHERE d2.run_id = w.run_id
         AND d2.apply_step <= i.last_step)
    WHERE w.run_id = $run AND w.level = 1 AND w.level_applied = 0
    AND NOT d.compression_off AND l.numel * 4 < d.size_threshold")
sent=$(q "SELECT count(*) FROM windows WHERE run_id = $run AND level = 1
    AND level_applied = 1")
[ "$raw" -gt 0 ] && [ "$sent" -gt 0 ] ||
    fail "$raw rows decided 1 recorded at applied 0 under the threshold, $sent at 1"
ok "slimgc (threshold $thr B): $raw layer windows under it recorded at applied 0, decided 1; $sent at 1"

"$BELLOWS" history layers --db "$DB" --run "$run" --format csv \
    >"$TMP/layers.csv" 2>"$TMP/layers.err" ||
    fail "bellows history layers exited with $?"
grep -q "recorded no applied level" "$TMP/layers.err" &&
    fail "history layers says levels are missing: $(cat "$TMP/layers.err")"
head -n 1 "$TMP/layers.csv" | grep -q "applied_last,.*decided_last," ||
    fail "history layers has no applied_last and decided_last: $(head -n 1 "$TMP/layers.csv")"
small=$(q "SELECT name FROM layers WHERE run_id = $run AND ndim >= 2
    ORDER BY numel LIMIT 1")
/usr/bin/python3 - "$TMP/layers.csv" "$small" <<'PY' ||
import csv, sys
rows = {r["name"]: r for r in csv.DictReader(open(sys.argv[1]))}
r = rows[sys.argv[2]]
assert (float(r["applied_last"]), float(r["decided_last"])) == (0, 1), r
PY
    fail "history layers does not show $small applied 0, decided 1"
ok "bellows history layers shows $small applied 0 beside decided 1"

# ---- perfmodel: the compression gate ----------------------------------
run_sim --job gate --ranks $RANKS --layers $LAYERS --windows 8 \
    --steps-per-window 10 || fail "sim exited with $?"
expect_agreed $RANKS 8
run=$(q "SELECT id FROM runs WHERE job = 'gate'")
n=$(wrong "$run")
[ "$n" = 0 ] || fail "gate: $n rows do not hold the level applied under the decision in force"
off=$(q "SELECT count(*) FROM windows w JOIN window_info i
    ON i.run_id = w.run_id AND i.window = w.window
    WHERE w.run_id = $run AND i.state_compression_off = 1")
off_decided=$(q "SELECT count(*) FROM windows w JOIN window_info i
    ON i.run_id = w.run_id AND i.window = w.window
    WHERE w.run_id = $run AND i.state_compression_off = 1 AND w.level = 4
    AND w.level_applied = 0")
off_sent=$(q "SELECT count(*) FROM windows w JOIN window_info i
    ON i.run_id = w.run_id AND i.window = w.window
    WHERE w.run_id = $run AND i.state_compression_off = 1
    AND w.level_applied != 0")
[ "$off" -gt 0 ] || fail "perfmodel's gate was never off"
[ "$off_sent" = 0 ] || fail "$off_sent rows of windows with the gate off were applied above 0"
[ "$off_decided" -gt 0 ] || fail "no row with the gate off was decided 4"
ok "perfmodel's gate off: $off layer windows recorded at applied 0, $off_decided of them decided 4"
exit 0
