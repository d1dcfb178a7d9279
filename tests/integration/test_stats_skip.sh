#!/usr/bin/env bash
# The agents skip the window accumulator (acc_norm) when no policy of the
# job reads it, through a real bellowsd and real agents
# (tests/integration/lag_agent, two ranks per job, 4 layers of one element,
# windows of 2 steps, gradient 1/(step+1) in every layer):
#
# - under `fixed` (reads no statistic) the ranks drop their accumulators
#   from a window start on: `bellows_agent_accumulators` is 0 there, the
#   history records acc_norm 0 for those windows and the other statistics
#   (count, sum_sq) as before;
# - under `accordion` (reads acc_norm) every layer keeps its accumulator
#   and every window's acc_norm is the sum of its two gradients;
# - under `fixed` with the job entry's `all_stats: true` every layer keeps
#   its accumulator too;
# - a reload from `fixed` to `accordion` turns the accumulators back on at
#   one window start, the same step on both ranks, and acc_norm is right
#   from that window on.
#
# Each window's acc_norm is checked against what the per-step file of
# rank 0 says its accumulators were in that window.
. "$(dirname "$0")/lib.sh"

LAG="$BUILD/tests/integration/lag_agent"
DB="$TMP/history.db"
P="$TMP/policy.yaml"

# config RL_POLICY: job "fx" under fixed, "keep" under fixed with
# all_stats, "acc" under accordion, "rl" under RL_POLICY (fixed or
# accordion).
config() {
	local rl
	if [ "$1" = fixed ]; then
		rl="      - type: fixed
        params: {level: 1}"
	else
		rl="      - type: accordion
        params: {interval: 2, eta: 0.3, critical_level: 2, stable_level: 1}"
	fi
	cat >"$P.new" <<YAML
daemon:
  apply_lag: 1
  window_timeout_ms: 3000
  rank_timeout_ms: 3000
  heartbeat_ms: 200
jobs:
  - match: "fx"
    policies:
      - type: fixed
        params: {level: 1}
  - match: "keep"
    all_stats: true
    policies:
      - type: fixed
        params: {level: 1}
  - match: "acc"
    policies:
      - type: accordion
        params: {interval: 2, eta: 0.3, critical_level: 2, stable_level: 1}
  - match: "rl"
    policies:
$rl
YAML
	mv "$P.new" "$P"
}

# ranks JOB STEPS: runs ranks 0 and 1 of JOB in the background (PIDs in
# R0 and R1), per-step files $TMP/JOB.rN.
ranks() {
	"$LAG" "$CTL" "$PUB" "$1" 0 2 4 "$2" 15 "$TMP/$1.r0" \
	    >"$TMP/$1.r0.out" 2>"$TMP/$1.r0.err" &
	R0=$!
	"$LAG" "$CTL" "$PUB" "$1" 1 2 4 "$2" 15 "$TMP/$1.r1" \
	    >"$TMP/$1.r1.out" 2>"$TMP/$1.r1.err" &
	R1=$!
}

# finish JOB: waits for both ranks, checks they applied the same decisions
# with the same accumulators at every step from the first window both
# began welcomed (before its Welcome a rank computes everything and
# applies no decision, and the two Welcomes may arrive steps apart).
finish() {
	wait "$R0" || { cat "$TMP/$1.r0.err"; fail "$1: rank 0 failed"; }
	wait "$R1" || { cat "$TMP/$1.r1.err"; fail "$1: rank 1 failed"; }
	/usr/bin/python3 - "$TMP/$1.r0" "$TMP/$1.r1" <<'PY' ||
import sys
a, b = ([tuple(map(int, l.split())) for l in open(f)] for f in sys.argv[1:])
assert len(a) == len(b), (len(a), len(b))
start = next(i for i in range(0, len(a), 2) if a[i][1] > 0 and b[i][1] > 0)
assert start <= 10, f"the ranks were welcomed only at step {start}"
bad = [(x, y) for x, y in zip(a[start:], b[start:]) if x != y]
assert not bad, f"from step {start} the ranks differ: {bad[:5]}"
PY
	    fail "$1: the ranks differ in decisions or accumulators"
}

# check JOB MODE: the history of JOB against rank 0's per-step file.
# MODE off: the accumulators end off; on: always on; reload: off, then on
# from one window start. Prints what it found.
check() {
	/usr/bin/python3 - "$DB" "$1" "$TMP/$1.r0" "$2" <<'PY'
import sqlite3, sys
db, job, steps, mode = sys.argv[1:]
acc = {}
for line in open(steps):
    s, _seq, n = map(int, line.split())
    acc[s] = n
con = sqlite3.connect(db)
run, = con.execute("SELECT id FROM runs WHERE job = ?", (job,)).fetchone()
rows = con.execute(
    "SELECT i.first_step, i.last_step, i.ranks_reported, w.layer, w.count, "
    "w.sum_sq, w.grad_norm_rank0 FROM windows w JOIN window_info i "
    "ON i.run_id = w.run_id AND i.window = w.window "
    "WHERE w.run_id = ? ORDER BY i.first_step, w.layer", (run,)).fetchall()
assert len(rows) >= 4 * 20, f"{job}: only {len(rows)} layer windows"
on = off = 0
for first, last, ranks, layer, count, sum_sq, norm in rows:
    g = [1.0 / (s + 1) for s in range(first, last + 1)]
    n = {acc[s] for s in range(first, last + 1)}
    assert len(n) == 1, f"{job}: accumulators changed inside window {first}..{last}: {n}"
    n = n.pop()
    assert n in (0, 4), f"{job}: {n} accumulators in steps {first}..{last}"
    # count and sum_sq are summed over the ranks that reported (a rank
    # that joined late misses the first windows), acc_norm is rank 0's.
    assert ranks in (1, 2), (job, first, ranks)
    assert count == ranks * len(g), (job, first, ranks, count)
    assert abs(sum_sq - ranks * sum(x * x for x in g)) < 1e-6 * sum_sq, (job, first, sum_sq)
    if norm is None:
        # Rank 0 had not joined yet: the window is rank 1's alone.
        assert first < 10, f"{job}: rank 0 missing from window {first}..{last}"
        continue
    want = sum(g) if n else 0.0
    assert abs(norm - want) <= 1e-6 * want, \
        f"{job}: window {first}..{last} layer {layer}: acc_norm {norm}, want {want} ({n} accumulators)"
    on += n > 0
    off += n == 0
seq = [acc[s] for s in sorted(acc)]
switches = [s for s in sorted(acc)[1:] if acc[s] != acc[s - 1]]
if mode == "off":
    assert seq[-1] == 0 and off >= 4 * 15, f"{job}: {off} layer windows without accumulators, last step {seq[-1]}"
    assert len(switches) <= 1 and all(acc[s] == 0 for s in switches), f"{job}: switches at {switches}"
elif mode == "on":
    assert off == 0, f"{job}: {off} layer windows without accumulators"
else:
    back_on = [s for s in switches if acc[s] == 4]
    assert len(back_on) == 1 and seq[-1] == 4, f"{job}: switches at {switches}"
    assert back_on[0] % 2 == 0, f"{job}: back on at step {back_on[0]}, not a window start"
    assert off >= 4 and on >= 4, (off, on)
    print(f"back on at step {back_on[0]}", end="; ")
print(f"{on} layer windows with accumulators, {off} without, switches at steps {switches}")
PY
}

config fixed
start_daemon

# ---- fixed and accordion side by side ---------------------------------
ranks fx 60
FX0=$R0 FX1=$R1
ranks acc 60
ACC0=$R0 ACC1=$R1
ranks keep 60
R0=$FX0 R1=$FX1 finish fx
R0=$ACC0 R1=$ACC1 finish acc
finish keep
# The reports of the last windows reach the history before the ranks'
# BYE is answered; give the store a moment to commit them.
for _ in $(seq 1 100); do
	n=$(sqlite3 -batch -noheader "$DB" "SELECT count(*) FROM window_info" 2>/dev/null)
	[ "${n:-0}" -ge 90 ] && break
	sleep 0.05
done
out=$(check fx off) || fail "fixed: $out"
ok "fixed: $out"
out=$(check acc on) || fail "accordion: $out"
ok "accordion: $out"
out=$(check keep on) || fail "fixed with all_stats: $out"
ok "fixed with all_stats: $out"

# ---- reload from fixed to accordion -----------------------------------
ranks rl 160
for _ in $(seq 1 200); do
	[ "$(wc -l <"$TMP/rl.r1" 2>/dev/null || echo 0)" -ge 40 ] && break
	sleep 0.05
done
[ "$(tail -n 1 "$TMP/rl.r0" | cut -d' ' -f3)" = 0 ] ||
    fail "rl: the accumulators are on under fixed: $(tail -n 1 "$TMP/rl.r0")"
config accordion
kill -HUP "$DAEMON_PID"
finish rl
for _ in $(seq 1 100); do
	n=$(sqlite3 -batch -noheader "$DB" "SELECT count(*) FROM window_info i
	    JOIN runs r ON r.id = i.run_id WHERE r.job = 'rl'" 2>/dev/null)
	[ "${n:-0}" -ge 80 ] && break
	sleep 0.05
done
grep -q "configuration reloaded" "$TMP/bellowsd.log" ||
    fail "bellowsd did not reload its configuration"
out=$(check rl reload) || fail "reload: $out"
ok "reload: $out; both ranks at the same step"
