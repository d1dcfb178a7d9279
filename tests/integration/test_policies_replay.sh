#!/usr/bin/env bash
# test_policies_replay: comet_batch, slimgc and perfmodel decide together
# for one job through a real bellowsd, with 4 `bellows sim` ranks that
# report activation statistics, momentum, per-tensor and bucket timings,
# backward times and memory; then `bellows replay --db` runs the recorded
# windows through the same policy file and must reproduce every decision:
# the batch size and LR scale, each layer's activation error bound, the
# size threshold and the compression gate. The run must have changed each
# of them (bounds moved off their clamps, a batch change, a threshold), so
# that policies deciding nothing cannot pass.
. "$(dirname "$0")/lib.sh"

cat >"$TMP/policy.yaml" <<YAML
daemon:
  apply_lag: 1
  window_timeout_ms: 3000
  rank_timeout_ms: 1500
  heartbeat_ms: 200
jobs:
  - match: "*"
    policies:
      - type: fixed
        name: levels
        params:
          level: 1
      - type: comet_batch
        name: comet
        layers:
          min_ndim: 2
        params:
          min_ndim: 2
          interval_steps: 40
          min_interval_steps: 10
          max_batch: 1024
          lr_scaling: sqrt
      - type: slimgc
        name: cttab
      - type: perfmodel
        name: gate
        params:
          bucket_bytes: 0
          overlap: false
YAML

DB="$TMP/history.db"
start_daemon
run_sim --job mix --ranks 4 --layers 8 --windows 20 --steps-per-window 10 \
    --comm-model 0.01,1,32,0.13 --buckets 4 --backward-ms 5 \
    --act 1e-3,0.5,8 --mem 16000,2000 || fail "sim exited with $?"
expect_agreed 4 20
ok "4 ranks applied every decision of comet_batch, slimgc and perfmodel at the same step"

"$BELLOWS" history decisions --db "$DB" --changed --format csv \
    >"$TMP/decisions.csv" 2>/dev/null || fail "bellows history decisions failed"
grep -q 'size_threshold 0 -> 12288' "$TMP/decisions.csv" ||
	fail "no decision set the threshold the sim's model implies (12288 B)"
ok "slimgc calibrated and set the size threshold to 12288 B"
grep -Eq 'layer0\.weight error_bound 0\.1 -> 0\.0[0-9]+' "$TMP/decisions.csv" ||
	fail "comet did not move layer0's bound off its upper clamp"
ok "comet moved the error bounds off their clamps"
grep -Eq 'batch_size [0-9]+ -> 1024' "$TMP/decisions.csv" ||
	fail "comet_batch did not raise the batch to 1024"
ok "comet_batch raised the batch to 1024"

"$BELLOWS" history metrics --db "$DB" --format csv >"$TMP/metrics.csv" \
    2>/dev/null || fail "bellows history metrics failed"
for name in alpha_ms bw_gbps t_sync_ms t_comp_ms t_pred_level_1_ms t_pred_best_ms \
    threshold_bytes eb window_steps; do
	grep -q ",$name," "$TMP/metrics.csv" || fail "no metric $name in the history"
done
ok "the policies' metrics (perfmodel's fit and predictions, per level too, slimgc's threshold, comet's bounds) are in the history"

"$BELLOWS" replay --policy "$TMP/policy.yaml" --db "$DB" \
    >"$TMP/replay.csv" 2>"$TMP/replay.err" ||
	{ cat "$TMP/replay.err"; fail "replay exited with $?"; }
cat "$TMP/replay.err"
grep -q '20 windows compared, 0 of 20 windows differ; batch size changes: recorded 1, replayed 1' \
    "$TMP/replay.err" || fail "replay's batch sizes differ from the run's"
grep -q 'size threshold or compression gate: 0 of 20 windows differ' \
    "$TMP/replay.err" || fail "replay's threshold or gate differs"
grep -q 'activation error bounds: 0 of 160 rows differ' "$TMP/replay.err" ||
	fail "replay's error bounds differ"
ok "bellows replay --db reproduces the batch, bounds, threshold and gate"
exit 0
