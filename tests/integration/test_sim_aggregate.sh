#!/usr/bin/env bash
# Aggregation inside the job changes what reaches bellowsd, not what its
# policies decide: the same 4-rank accordion job (same seed) runs three
# times against one real bellowsd, with every rank reporting, with one
# report per node of two ranks, and with rank 0 reporting for the job
# through sim's shared-memory all-reduce. The history must hold 4, 2 and
# 1 reports per window, every window complete with all 4 ranks, and the
# same decisions (step, policy, reason, levels, every knob) for all three
# runs; accordion must have changed a level, so that a run deciding
# nothing cannot pass.
. "$(dirname "$0")/lib.sh"

cat >"$TMP/policy.yaml" <<YAML
daemon:
  apply_lag: 1
  window_timeout_ms: 5000
  rank_timeout_ms: 3000
  heartbeat_ms: 200
jobs:
  - match: "agg-*"
    policies:
      - type: accordion
        params:
          interval: 2
          eta: 0.3
          critical_level: 2
          stable_level: 1
YAML
DB="$TMP/history.db"
WINDOWS=16

q() {
	sqlite3 -batch -noheader "file:$DB?mode=ro" "$1" ||
	    fail "sqlite3 cannot read $DB: $1"
}

# A killed rank would leave its group's all-reduce waiting: refused.
run_sim --job agg-kill --ranks 4 --layers 2 --windows 4 \
    --steps-per-window 2 --aggregate job --kill 1:2
rc=$?
[ "$rc" -eq 2 ] || fail "--aggregate job --kill exited with $rc, not 2"
grep -q "does not take --kill" "$TMP/sim.err" ||
    fail "--aggregate job --kill did not say why: $(cat "$TMP/sim.err")"
ok "--aggregate with --kill is refused as a usage error"
run_sim --job agg-bad --ranks 2 --layers 2 --windows 2 \
    --steps-per-window 2 --aggregate rack
rc=$?
[ "$rc" -eq 2 ] || fail "--aggregate rack exited with $rc, not 2"
grep -q "must be rank, node or job" "$TMP/sim.err" ||
    fail "--aggregate rack did not say why: $(cat "$TMP/sim.err")"
ok "--aggregate rack is refused naming rank, node and job"

start_daemon
for mode in rank node job; do
	run_sim --job "agg-$mode" --ranks 4 --layers 6 --windows $WINDOWS \
	    --steps-per-window 5 --seed 7 --aggregate "$mode" --node-ranks 2 ||
	    fail "sim --aggregate $mode exited with $?"
	expect_agreed 4 $WINDOWS
done
kill_daemon TERM

for pair in rank:4 node:2 job:1; do
	mode=${pair%:*}
	want=${pair#*:}
	per=$(q "SELECT DISTINCT count(*) FROM timings t JOIN runs r
	    ON r.id = t.run_id WHERE r.job = 'agg-$mode' GROUP BY t.window")
	[ "$per" = "$want" ] ||
	    fail "--aggregate $mode: reports per window '$per', not $want"
	bad=$(q "SELECT count(*) FROM window_info w JOIN runs r
	    ON r.id = w.run_id WHERE r.job = 'agg-$mode'
	    AND (w.ranks_reported != 4 OR w.complete != 1)")
	[ "$bad" = 0 ] ||
	    fail "--aggregate $mode: $bad windows not complete with 4 ranks"
	ok "--aggregate $mode: $want report(s) per window reached bellowsd, every window complete with 4 ranks"
done

# A covering report carries its fastest and slowest rank's mean step time
# (min <= median <= max); a rank's own report none.
bad=$(q "SELECT count(*) FROM timings t JOIN runs r ON r.id = t.run_id
    WHERE r.job IN ('agg-node', 'agg-job') AND NOT (t.step_ms_rank_min > 0
    AND t.step_ms_rank_min <= t.step_ms / t.steps + 1e-9
    AND t.step_ms / t.steps <= t.step_ms_rank_max + 1e-9)")
[ "$bad" = 0 ] || fail "$bad covering reports without min <= median <= max"
own=$(q "SELECT count(*) FROM timings t JOIN runs r ON r.id = t.run_id
    WHERE r.job = 'agg-rank' AND t.step_ms_rank_min != 0")
[ "$own" = 0 ] || fail "$own rank reports carry a group's spread"
ok "covering reports carry the fastest and slowest rank beside the median"

# The windows as the policies saw them: per layer the counts, sums,
# largest value and both norms (sums to 10 digits: the reduction adds in
# another order).
windows() {
	q "SELECT w.window, w.layer, w.count, w.nonzero, w.nonfinite,
	    printf('%.10g', w.sum_sq), printf('%.10g', w.abs_sum), w.max_abs,
	    w.grad_norm_rank0, printf('%.10g', w.grad_norm_mean)
	    FROM windows w JOIN runs r ON r.id = w.run_id
	    WHERE r.job = 'agg-$1' ORDER BY w.window, w.layer" \
	    >"$TMP/windows-$1.txt"
}
for mode in rank node job; do
	windows "$mode"
done
for mode in node job; do
	diff "$TMP/windows-rank.txt" "$TMP/windows-$mode.txt" \
	    >"$TMP/wdiff-$mode.txt" ||
	    { head -n 20 "$TMP/wdiff-$mode.txt";
	      fail "--aggregate $mode: the policies saw other windows"; }
done
[ -s "$TMP/windows-rank.txt" ] || fail "no windows recorded"
ok "the policies saw the same windows, layer by layer, in all three runs"

decisions() {
	q "SELECT d.seq, d.apply_step, d.window, d.source, d.policy, d.reason,
	    hex(d.levels), hex(d.error_bounds), d.batch_size, d.lr_scale,
	    d.size_threshold, d.compression_off, d.calibrate_steps
	    FROM decisions d JOIN runs r ON r.id = d.run_id
	    WHERE r.job = 'agg-$1' ORDER BY d.seq" >"$TMP/decisions-$1.txt"
}
for mode in rank node job; do
	decisions "$mode"
done
n=$(wc -l <"$TMP/decisions-rank.txt")
[ "$n" -ge $WINDOWS ] || fail "only $n decisions recorded for agg-rank"
grep -q "accordion" "$TMP/decisions-rank.txt" ||
    fail "accordion never changed a level: nothing to compare"
for mode in node job; do
	diff "$TMP/decisions-rank.txt" "$TMP/decisions-$mode.txt" \
	    >"$TMP/diff-$mode.txt" ||
	    { head -n 20 "$TMP/diff-$mode.txt";
	      fail "--aggregate $mode decided otherwise than every rank reporting"; }
	ok "--aggregate $mode: the same $n decisions as every rank reporting"
done
