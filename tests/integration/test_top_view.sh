#!/bin/bash
# test_top_view: how `bellows top` presents an Accordion job, in a real
# terminal (tmux) against a live bellowsd and `bellows sim`: each layer's
# r with the window of the check that judged it (and a regime that
# agrees with it), the legend, colours (and none with NO_COLOR,
# --no-color or a terminal without colours), Enter on a decision opening its whole reason wrapped to a
# narrow pane, Enter and Esc closing it, and a layer's detail.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/top_lib.sh"

PY=/usr/bin/python3

cat >"$TMP/policy.yaml" <<YAML
daemon:
  apply_lag: 1
  window_timeout_ms: 3000
  rank_timeout_ms: 1500
  heartbeat_ms: 200
jobs:
  - match: "*"
    policies:
      - type: accordion
        params:
          interval: 2
          eta: 0.3
          critical_level: 2
          stable_level: 1
YAML
DB="$TMP/history.db"
start_daemon

# 1,000 windows of 4 steps of 20 ms: long enough for every check below,
# and the LR drops (at half the windows) come after them.
"$BELLOWS" sim --control "$CTL" --publish "$PUB" --quiet --job accjob \
    --ranks 2 --layers 6 --windows 1000 --steps-per-window 4 --step-ms 20 \
    >"$TMP/sim.out" 2>"$TMP/sim.err" &
SIM_PID=$!

TOP="$BELLOWS top --control $CTL --publish $PUB --db $DB --job accjob"
tm new-session -d -s top -x 100 -y 30 "$TOP; sleep 120"

# A layer row: name, size, level decided and applied, regime, r @window,
# r against eta.
ROW='^ layer[0-9]\.[a-z]+ +[0-9.]+k? +[0-9]+ +[0-9]+ +(critical|stable) +[0-9.e+-]+ @w[0-9]+ +(<|>=)0\.3'
pane_has "$ROW" 30 || fail "the layers view shows no r with its check's window"
grep -Eq 'LAYER +SIZE +LEVEL +APPLIED +REGIME +R +VS_ETA +NORM' "$TMP/pane.txt" ||
	fail "the layers view lacks the APPLIED, REGIME, R and VS_ETA headings"
# The r shown is the one that decided: stable below eta, critical at or
# above it (an LR drop would make all critical; bellows sim has none).
bad=$(grep -E "$ROW" "$TMP/pane.txt" |
	grep -Ev 'critical +[0-9.e+-]+ @w[0-9]+ +>=|stable +[0-9.e+-]+ @w[0-9]+ +<' || true)
[ -z "$bad" ] || fail "a regime disagrees with the r shown beside it: $bad"
# The check's window is one of Accordion's (a multiple of the interval).
for w in $(grep -Eo '@w[0-9]+' "$TMP/pane.txt" | tr -d '@w'); do
	[ $((w % 2)) -eq 0 ] || fail "r shown at window $w, not a check window"
done
ok "layers show the r that decided each regime, with its check window"

pane_has '^ critical stable raw changed error +R: r of check @w +VS_ETA: vs eta' 5 ||
	fail "the layers view has no legend line"
tm send-keys -t top '?'
pane_has 'REGIME +Accordion.s: critical \(r >= eta' 5 || fail "? shows no legend"
pane_has 'VS_ETA +that r against the eta' 5 || fail "? does not explain VS_ETA"
tm send-keys -t top x
ok "a legend line and ? explain REGIME, R, VS_ETA and the colours"

# Colour: SGR foreground colours in the pane's escapes (magenta critical
# or green stable at least).
tm capture-pane -e -p -t top >"$TMP/esc.txt"
grep -Eq $'\e\\[([0-9;]*;)?3[25]m' "$TMP/esc.txt" ||
	fail "no colour for regimes on a colour terminal"
ok "regimes are coloured"

# Enter on a layer: its detail, the r with the window judged; Esc closes.
tm send-keys -t top Enter
pane_has 'judged at window [0-9]+ against eta 0\.3' 5 ||
	fail "the layer detail does not say which check judged r"
tm send-keys -t top Escape
pane_has 'LAYER +SIZE' 5 || fail "Esc did not close the layer detail"
ok "Enter opens a layer's detail and Esc closes it"

# Decisions, in a pane narrower than Accordion's reasons: Enter on the
# newest that compares windows opens it whole, wrapped.
tm resize-window -t top -x 60 -y 40
tm send-keys -t top Tab
pane_has 'SEQ +WIN +TIME' 10 || fail "Tab did not show the decisions"
pane_has 'window [0-9]+ vs window' 20 || fail "no Accordion comparison among the decisions"
# Paused (the rows stay put), select the first row whose reason compares
# windows, then open it.
tm send-keys -t top p
pane_has 'PAUSED' 5 || fail "p did not pause"
sel=$(grep -E '^ +[0-9]+ +[0-9]+ ' "$TMP/pane.txt" | grep -n 'vs window' | head -1 | cut -d: -f1)
for _ in $(seq 2 "$sel"); do tm send-keys -t top Down; done
tm send-keys -t top Enter
pane_has '^ decision seq [0-9]+, in force from window' 5 ||
	fail "Enter on a decision did not open its detail"
pane_has '^ reason:' 5 || fail "the decision detail shows no reason"
seq=$(grep -Eo 'decision seq [0-9]+' "$TMP/pane.txt" | grep -Eo '[0-9]+')
"$PY" - "$DB" "$seq" >"$TMP/reason.txt" <<'PY' || fail "cannot read decision $seq"
import sqlite3, sys
db = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
row = db.execute("SELECT reason FROM decisions WHERE seq = ? ORDER BY run_id DESC",
                 (int(sys.argv[2]),)).fetchone()
print(row[0])
PY
[ "$(wc -c <"$TMP/reason.txt")" -gt 60 ] ||
	fail "decision $seq's reason fits one line: $(cat "$TMP/reason.txt")"
grep -q '~' "$TMP/pane.txt" && fail "the decision detail cuts text with ~"
awk '{ if (length($0) > 60) exit 1 }' "$TMP/pane.txt" ||
	fail "a line of the detail is wider than the 60-column pane"
for word in $(cat "$TMP/reason.txt"); do
	grep -qF -- "$word" "$TMP/pane.txt" ||
		fail "the detail lacks '$word' of decision $seq's reason"
done
ok "Enter on a decision opens its whole reason wrapped to 60 columns"

tm send-keys -t top Enter
pane_has 'SEQ +WIN +TIME' 5 || fail "Enter did not close the decision detail"
tm send-keys -t top Enter
pane_has '^ decision seq' 5 || fail "Enter did not open the decision again"
tm send-keys -t top Escape
pane_has 'SEQ +WIN +TIME' 5 || fail "Esc did not close the decision detail"
ok "Enter and Esc close the decision detail"

# Without colours: NO_COLOR, --no-color, and a terminal without colours
# (vt100); bold and underline instead.
for how in "NO_COLOR=1 $TOP" "$TOP --no-color" "TERM=vt100 $TOP"; do
	tm respawn-pane -k -t top "env $how; sleep 120"
	tm resize-window -t top -x 100 -y 30
	pane_has "$ROW" 20 || fail "$how: the layers view did not draw"
	tm capture-pane -e -p -t top >"$TMP/esc.txt"
	grep -Eq $'\e\\[([0-9;]*;)?(3[0-7]|38;5;[0-9]+)m' "$TMP/esc.txt" &&
		fail "$how: colours on screen"
	grep -Eq $'\e\\[([0-9;]*;)?1m' "$TMP/esc.txt" ||
		fail "$how: no bold (critical and headings) instead of colours"
	ok "$how: monochrome, bold instead of colours"
done

tm send-keys -t top q
exit 0
