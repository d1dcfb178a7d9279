#!/usr/bin/env bash
# slimgc through a real bellowsd with real agents: `bellows sim` ranks time
# every layer's send with a communication model and follow the agent's
# send mode. The first window asks for a calibration; while it runs every
# rank sends each layer compressed on even steps and raw on odd ones; when
# it is over, the size threshold bellowsd records (decision, metric and
# reason) is the one the model implies, computed here independently; after
# it, layers below the threshold go raw and the others compressed. A
# second job whose model makes compression never pay gets "everything
# raw" (threshold infinity). These jobs test the calibration's table
# alone (verify: false): the sim's steps are timed by the wall clock,
# which knows nothing of the modelled sends. Two more jobs report modelled
# step times (--step-model) and let slimgc verify the table's threshold
# with whole steps: kept when the sends are synchronous, as the table's
# are; every tensor raw when raw sends hide behind the backward pass.
. "$(dirname "$0")/lib.sh"

command -v sqlite3 >/dev/null || { echo "sqlite3 not installed"; exit 77; }

DB="$TMP/history.db"
RANKS=4
LAYERS=8
WINDOWS=8
cat >"$TMP/policy.yaml" <<YAML
daemon:
  apply_lag: 1
  window_timeout_ms: ${WINDOW_TIMEOUT_MS:-3000}
  rank_timeout_ms: ${RANK_TIMEOUT_MS:-1500}
  heartbeat_ms: 200
jobs:
  - match: "verify-*"
    policies:
      - type: fixed
        name: levels
        params: {level: 1}
      - type: slimgc
        name: cttab
        params: {calibration_steps: 20}
  - match: "*"
    policies:
      - type: fixed
        name: levels
        params: {level: 1}
      - type: slimgc
        name: cttab
        params: {calibration_steps: 20, verify: false}
YAML

q() { sqlite3 -batch -noheader "$DB" "$1"; }

# implied ALPHA GBPS RATIO CODEC: the robust rule over the sim's 2-D
# layer sizes (256 (32 + 8 l) bytes for l % 4 != 3) with the sim's ring
# all-reduce model, T(b) = 2A(p-1) + 2b(p-1)/(p G), without noise.
implied() {
	awk -v a="$1" -v g="$2" -v r="$3" -v c="$4" -v p="$RANKS" \
	    -v n="$LAYERS" 'function t(b) {
		return 2 * a * (p - 1) + 2 * b * (p - 1) / (p * g * 1e9 / 8e3)
	}
	BEGIN {
		k = 0
		for (l = 0; l < n; l++)
			if (l % 4 != 3)
				size[k++] = 256 * (32 + 8 * (l % 64))
		# ascending already; from the largest down while it pays
		i = k
		while (i > 0 && t(size[i - 1]) > t(size[i - 1] / r) + c)
			i--
		if (i == k) print "infinity"; else if (i == 0) print 0
		else print size[i]
	}'
}

start_daemon

# ---- a model with a threshold inside the model's sizes -----------------
MODEL="0.01,1,32,0.13"
want=$(implied 0.01 1 32 0.13)
[ "$want" = 12288 ] || fail "the model was meant to imply 12288 B, not $want"
run_sim --job sg --ranks $RANKS --layers $LAYERS --windows $WINDOWS \
    --steps-per-window 10 --comm-model "$MODEL" ||
    fail "sim exited with $?"
expect_agreed $RANKS $WINDOWS
grep -q "^sim: comm model implies threshold=$want over 6 sizes$" \
    "$TMP/sim.out" || fail "the sim does not state the threshold $want"
ok "the sim and this test agree the model implies $want B"

run=$(q "SELECT id FROM runs WHERE job = 'sg'")
asked=$(q "SELECT calibrate_steps FROM decisions WHERE run_id = $run
    AND calibrate_steps > 0 ORDER BY seq LIMIT 1")
[ "$asked" = 20 ] || fail "no decision asked for a 20-step calibration ($asked)"
ok "a decision asked for a calibration of 20 steps"

# The calibration's full window (steps 20-29): each layer with a level
# was timed raw and compressed equally often, by every rank.
parity=$(q "SELECT count(*) FROM windows WHERE run_id = $run AND window = 2
    AND level > 0 AND comm_raw_n = 5 * $RANKS AND comm_comp_n = 5 * $RANKS")
[ "$parity" = 6 ] ||
    fail "window 2: $parity of 6 layers were sent 5 times raw and 5 compressed per rank"
ok "during the calibration every layer went raw on odd and compressed on even steps, on every rank"

got=$(q "SELECT size_threshold FROM decisions WHERE run_id = $run
    ORDER BY seq DESC LIMIT 1")
[ "$got" = "$want" ] || fail "the last decision's threshold is $got, not $want"
ok "the last decision carries the threshold $want B"
reason=$(q "SELECT reason FROM decisions WHERE run_id = $run
    AND reason LIKE '%calibration 1 over%'")
case "$reason" in
*"threshold $want B"*"rule robust"*) ok "its reason: ${reason%%;*}" ;;
*) fail "no reason names the threshold $want B: '$reason'" ;;
esac
metric=$(q "SELECT CAST(value AS INTEGER) FROM policy_metrics WHERE
    run_id = $run AND name = 'threshold_bytes' ORDER BY window DESC LIMIT 1")
[ "$metric" = "$want" ] || fail "metric threshold_bytes is $metric, not $want"
ok "the history's threshold_bytes metric is $want"

# The last window ran under the threshold: smaller layers raw only,
# the others compressed only (the 1-D biases have no level: raw).
last=$((WINDOWS - 1))
wrong=$(q "SELECT count(*) FROM windows w WHERE run_id = $run
    AND window = $last AND level > 0 AND
    ((256 * (32 + 8 * layer) < $want AND comm_comp_n > 0) OR
     (256 * (32 + 8 * layer) >= $want AND comm_raw_n > 0))")
[ "$wrong" = 0 ] || fail "window $last: $wrong layers were sent the wrong way"
ok "after it, layers below $want B went raw and the others compressed"

# ---- a model in which compression never pays ---------------------------
want=$(implied 0.01 1 32 2)
[ "$want" = infinity ] || fail "the second model was meant to imply infinity"
run_sim --job sg2 --ranks $RANKS --layers $LAYERS --windows 6 \
    --steps-per-window 10 --comm-model 0.01,1,32,2 ||
    fail "sim exited with $?"
expect_agreed $RANKS 6
grep -q "^sim: comm model implies threshold=infinity" "$TMP/sim.out" ||
    fail "the sim does not state an infinite threshold"
run=$(q "SELECT id FROM runs WHERE job = 'sg2'")
reason=$(q "SELECT reason FROM decisions WHERE run_id = $run
    AND reason LIKE '%calibration 1 over%'")
case "$reason" in
*"threshold infinity: the largest size"*"every tensor goes raw"*)
	ok "compression that never pays: ${reason%%;*}" ;;
*) fail "no reason sends everything raw: '$reason'" ;;
esac
metric=$(q "SELECT value FROM policy_metrics WHERE run_id = $run
    AND name = 'threshold_bytes' ORDER BY window DESC LIMIT 1")
[ "$metric" = "1.84467440737096e+19" ] ||
    fail "metric threshold_bytes is $metric, not 2^64 - 1"
wrong=$(q "SELECT count(*) FROM windows WHERE run_id = $run AND window = 5
    AND comm_comp_n > 0")
[ "$wrong" = 0 ] || fail "window 5: $wrong layers were still compressed"
ok "afterwards nothing was compressed"

# ---- the verification with whole steps ---------------------------------
# The calibration over at window 3 proposes 12288 B; its decision applies
# at step 41, so window 5 is the first one entirely under it; the switch
# to every tensor raw applies at step 61: window 7 runs raw, and the
# verdict of window 7 is in force in windows 9 and later.
# verify MODE BACKWARD_MS: runs job verify-MODE for 11 windows with
# --step-model MODE; sets $run and $reason (the verdict).
verify() {
	run_sim --job "verify-$1" --ranks $RANKS --layers $LAYERS --windows 11 \
	    --steps-per-window 10 --comm-model "$MODEL" --backward-ms "$2" \
	    --step-model "$1" || fail "sim --step-model $1 exited with $?"
	expect_agreed $RANKS 11
	run=$(q "SELECT id FROM runs WHERE job = 'verify-$1'")
	reason=$(q "SELECT reason FROM decisions WHERE run_id = $run
	    AND reason LIKE '%verified on the real path%'")
	[ -n "$reason" ] || fail "verify-$1: no decision gave a verdict"
	grep -q "calibration 1 over at window 3: threshold 12288 B" \
	    <<<"$(q "SELECT reason FROM decisions WHERE run_id = $run")" ||
	    fail "verify-$1: the table did not propose 12288 B"
}

# sync, no backward time: a step is every send one after the other, as
# the table measured them: the threshold saves about a sixth of it.
verify sync 0
case "$reason" in
*"verified on the real path: compressed "*" ms per step (x0."*"): threshold 12288 B (12.3 kB) kept"*)
	ok "synchronous sends: ${reason%%;*}" ;;
*) fail "sync: the threshold was not kept: '$reason'" ;;
esac
wrong=$(q "SELECT count(*) FROM windows w WHERE run_id = $run
    AND window = 10 AND level > 0 AND
    ((256 * (32 + 8 * layer) < 12288 AND comm_comp_n > 0) OR
     (256 * (32 + 8 * layer) >= 12288 AND comm_raw_n > 0))")
[ "$wrong" = 0 ] || fail "sync, window 10: $wrong layers were sent the wrong way"
kept=$(q "SELECT value FROM policy_metrics WHERE run_id = $run
    AND name = 'verify_kept' ORDER BY window DESC LIMIT 1")
[ "$kept" = 1.0 ] || fail "sync: metric verify_kept is '$kept', not 1"
ok "after it, layers below 12288 B went raw and the others compressed"

# overlap: raw sends (about 1.5 ms) hide behind a 5 ms backward pass, the
# compressed ones and the codec (about 0.8 ms) come after it.
verify overlap 5
case "$reason" in
*"verified on the real path: compressed "*" ms per step (x1."*"): every tensor raw"*)
	ok "raw sends overlapped with the backward pass: ${reason%%;*}" ;;
*) fail "overlap: the threshold was kept: '$reason'" ;;
esac
wrong=$(q "SELECT count(*) FROM windows WHERE run_id = $run AND window = 10
    AND comm_comp_n > 0")
[ "$wrong" = 0 ] || fail "overlap, window 10: $wrong layers were still compressed"
metric=$(q "SELECT value FROM policy_metrics WHERE run_id = $run
    AND name = 'threshold_bytes' ORDER BY window DESC LIMIT 1")
[ "$metric" = "1.84467440737096e+19" ] ||
    fail "overlap: metric threshold_bytes is $metric, not 2^64 - 1"
ok "afterwards nothing was compressed"

# ---- the sim's other modelled statistics reach the history -------------
run_sim --job sg3 --ranks $RANKS --layers $LAYERS --windows 4 \
    --steps-per-window 10 --comm-model "$MODEL" --buckets 2 \
    --backward-ms 5 --act 0.5,0.4,4 --mem 1000,200 ||
    fail "sim exited with $?"
expect_agreed $RANKS 4
run=$(q "SELECT id FROM runs WHERE job = 'sg3'")
n=$(q "SELECT count(DISTINCT window || ':' || rank) FROM comm_samples
    WHERE run_id = $run")
[ "$n" = $((4 * RANKS)) ] ||
    fail "bucket samples from $n of $((4 * RANKS)) rank windows"
n=$(q "SELECT count(*) FROM timings WHERE run_id = $run
    AND backward_ms BETWEEN 45 AND 55 AND mem_device_total = 1048576000
    AND mem_device_used > 200 * 1048576")
[ "$n" = $((4 * RANKS)) ] ||
    fail "backward time and memory in $n of $((4 * RANKS)) rank windows"
n=$(q "SELECT count(*) FROM windows WHERE run_id = $run AND layer % 4 != 3
    AND act_steps = 10 * $RANKS AND abs(act_nonzero - 0.4) < 0.01")
[ "$n" = $((4 * 6)) ] ||
    fail "activation statistics in $n of $((4 * 6)) layer windows"
ok "bucket samples, backward time, memory and activations reach the history"

# ---- usage errors ------------------------------------------------------
usage() {
	"$BELLOWS" sim --control "$CTL" --publish "$PUB" --job bad --ranks 1 \
	    --layers 2 --windows 1 --steps-per-window 1 "$@" \
	    >"$TMP/usage.out" 2>"$TMP/usage.err"
	rc=$?
	[ $rc = 2 ] || fail "sim $* exited with $rc, not 2"
}
usage --buckets 2
grep -q "needs --comm-model" "$TMP/usage.err" || fail "--buckets alone accepted"
usage --comm-model 0.1,1
grep -q "must be A,G,R,C\[,M\]" "$TMP/usage.err" || fail "a short --comm-model accepted"
usage --comm-model 0.1,1,0.5,0
grep -q "at least 1" "$TMP/usage.err" || fail "a ratio below 1 accepted"
usage --act 1,1.5,2
grep -q "R in \[0, 1\]" "$TMP/usage.err" || fail "R > 1 accepted"
usage --mem 100,200
grep -q "USED_MB <= TOTAL_MB" "$TMP/usage.err" || fail "used > total accepted"
usage --step-model sync
grep -q "needs --comm-model" "$TMP/usage.err" || fail "--step-model alone accepted"
usage --comm-model 0.1,1,2,0 --step-model fast
grep -q "must be wall, sync or overlap" "$TMP/usage.err" ||
    fail "--step-model fast accepted"
ok "bad model options are usage errors"
