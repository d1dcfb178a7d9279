#!/usr/bin/env bash
# bellows report and bellows history compare read what bellowsd recorded:
# two runs of an accordion job (3 ranks, then 2) and a run of another job
# against a real bellowsd with a history file. The text report must say
# what the database holds (the run's line, its policy file and hash, the
# first decision's changes, one line per LR change, the decision counts,
# the r metrics, the share of floats saved to the tenth of a percent);
# the HTML report must reference no http(s) URL, carry no script, and
# render in headless Chromium to a screenshot that is not blank; compare
# must put the two runs side by side within one file and across two,
# marking what differs, give percentages' differences in points and the
# policies; for two runs of `bellows sim --eval` in a history of their
# own it must give the history's final accuracy and loss, the time and
# step to the accuracy both reached and the wall times, warn about runs
# of two jobs, and --html must write one page (nothing on stdout) with
# both runs on the same axes that Chromium renders; bad input must get a
# clear error and exit 1
# (nothing to read) or 2 (misuse).
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
JOB=rep
DB="$TMP/h.db"
# A comment longer than any buffer a line of the report goes through.
printf '# %s\n' "$(printf 'long comment %.0s' $(seq 1 120))" >"$TMP/policy.yaml"
cat >>"$TMP/policy.yaml" <<YAML
daemon:
  apply_lag: 1
  window_timeout_ms: 3000
  rank_timeout_ms: 1500
  heartbeat_ms: 200
jobs:
  - match: "other"
    policies:
      - type: comet
        params:
          min_ndim: 2
  - match: "*"
    policies:
      - type: accordion
        params:
          interval: 2
          eta: 0.3
          critical_level: 2
          stable_level: 1
YAML
start_daemon

sq() {
	sqlite3 -readonly "$DB" "$1"
}

run_sim --job "$JOB" --ranks 3 --layers 4 --windows 12 \
    --steps-per-window 4 --step-ms 2 || fail "sim of run 1 exited with $?"
expect_agreed 3 12
run_sim --job "$JOB" --ranks 2 --layers 4 --windows 8 \
    --steps-per-window 4 --step-ms 1 --seed 7 ||
    fail "sim of run 2 exited with $?"
expect_agreed 2 8
run_sim --job other --ranks 1 --layers 2 --windows 3 \
    --steps-per-window 2 --act 0.5,0.3,4 || fail "sim of run 3 exited with $?"
# bellowsd ends a run when every rank has said Bye; a clean stop
# checkpoints the file, so that a copy of it holds everything.
for _ in $(seq 1 50); do
	[ "$(sq "SELECT count(*) FROM runs WHERE ended_wall_ms IS NOT NULL")" = 3 ] && break
	sleep 0.1
done
kill_daemon TERM
RUNS_Q="SELECT group_concat(x, ' ') FROM (SELECT id || job AS x FROM runs ORDER BY id)"
[ "$(sq "$RUNS_Q")" = "1rep 2rep 3other" ] || fail "runs in the database: $(sq "$RUNS_Q")"

# ---- the text report -----------------------------------------------------
"$BELLOWS" report --db "$DB" --run 1 >"$TMP/r1.txt" 2>"$TMP/r1.err" ||
    { cat "$TMP/r1.err"; fail "report --run 1 exited with $?"; }
has() {
	grep -qxF -- "$1" "$TMP/r1.txt" ||
	    { cat "$TMP/r1.txt"; fail "the report lacks the line '$1'"; }
}
has "run 1 of job 'rep' in $DB: 3 ranks, 4 layers, 12 windows (0 closed incomplete), ended"
HASH=$(sq "SELECT config_hash FROM runs WHERE id = 1")
has "policy file $TMP/policy.yaml (hash $HASH):"
has "          eta: 0.3"
has "$(head -n 1 "$TMP/policy.yaml")"
has "      level -> 2: layer0.weight, layer1.weight, layer2.weight"
has "      why: accordion: 3 layers critical (level 2) until the check at window 0"
N_DEC=$(sq "SELECT count(*) FROM decisions WHERE run_id = 1")
N_CHG=$(sq "SELECT count(DISTINCT seq) FROM decision_changes WHERE run_id = 1")
has "$N_DEC decisions, $N_CHG changed a knob"
# One line per LR change, with the window it came in.
sq "SELECT window, lr FROM window_info WHERE run_id = 1 ORDER BY window" |
    awk -F'|' 'NR == 1 || $2 != prev { printf "  from window %d: lr %.4g\n", $1, $2 } { prev = $2 }' \
    >"$TMP/lr.want"
sed -n '/^Learning rate/,/^$/p' "$TMP/r1.txt" | grep '^  from window' >"$TMP/lr.got"
[ "$(wc -l <"$TMP/lr.want")" -ge 2 ] || fail "the sim's LR never dropped"
diff "$TMP/lr.want" "$TMP/lr.got" >&2 || fail "the LR lines are not the database's changes"
N_R=$(sq "SELECT count(*) FROM policy_metrics WHERE run_id = 1 AND name = 'r'")
[ "$N_R" -gt 0 ] || fail "accordion recorded no r"
grep -qE "^  r +$N_R values, min " "$TMP/r1.txt" ||
    { cat "$TMP/r1.txt"; fail "the report does not count the $N_R r metrics"; }
PCT=$(sq "SELECT printf('%.1f', 100.0 * (sum(floats_raw) - sum(floats_sent)) / sum(floats_raw)) FROM window_info WHERE run_id = 1")
grep -qE "^  saved .*: $PCT% of raw, " "$TMP/r1.txt" ||
    { grep saved "$TMP/r1.txt"; fail "the report's savings are not $PCT% of raw"; }
grep -qE "^  sent [0-9.]+[kMG]? floats \([0-9.]+ (B|kB|MB)\) vs raw " "$TMP/r1.txt" ||
    fail "the traffic line has no units"
grep -qF "  not recorded: the trainer reported no evaluation" "$TMP/r1.txt" ||
    fail "the report does not say that accuracy is not recorded"
[ "$(grep -cE '^ +[0-9]+ +[0-9.]+ (us|ms|s) ' "$TMP/r1.txt")" -eq 12 ] ||
    fail "the step time table has no row per window with a unit"
# Without --run: the latest run, named on standard error.
"$BELLOWS" report --db "$DB" >/dev/null 2>"$TMP/latest.err" || fail "report without --run"
grep -qF "run 3 (job 'other', ended), the latest" "$TMP/latest.err" ||
    fail "report without --run did not name the latest run: $(cat "$TMP/latest.err")"
"$BELLOWS" report --db "$DB" --job "$JOB" >"$TMP/r2.txt" 2>/dev/null || fail "report --job"
grep -qF "run 2 of job 'rep'" "$TMP/r2.txt" || fail "report --job is not the job's latest run"
# --json: the same numbers, exact.
"$BELLOWS" report --db "$DB" --run 1 --json >"$TMP/r1.json" 2>/dev/null || fail "report --json"
SAVED=$(sq "SELECT (sum(floats_raw) - sum(floats_sent)) * 4 FROM window_info WHERE run_id = 1")
$PY - "$TMP/r1.json" "$SAVED" "$HASH" <<'PY' || fail "report --json does not hold the database's numbers"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["run"] == 1 and d["job"] == "rep" and d["windows"] == 12, d
assert d["bytes_saved"] == int(sys.argv[2]), (d["bytes_saved"], sys.argv[2])
assert d["config"]["hash"] == sys.argv[3], d["config"]
assert d["accuracy"] is None and d["evaluations"] == [], d["evaluations"]
assert [l["name"] for l in d["layer_summary"]] == ["layer0.weight", "layer1.weight", "layer2.weight", "layer3.bias"]
PY
# Did it get faster: the median step of the windows that compressed
# against that of the windows sent raw, from the same rows.
sq "SELECT floats_sent < floats_raw, step_ms_median FROM window_info WHERE run_id = 1 AND step_ms_median > 0" >"$TMP/split.rows"
$PY - "$TMP/r1.json" "$TMP/split.rows" "$TMP/r1.txt" <<'PY' || fail "the report's raw and compressed step times are not the database's"
import json, statistics, sys
d = json.load(open(sys.argv[1]))
comp, raw = [], []
for line in open(sys.argv[2]):
    c, ms = line.strip().split("|")
    (comp if c == "1" else raw).append(float(ms))
assert d["compressed_windows"] == len(comp) and d["raw_windows"] == len(raw), d
for key, xs in (("step_ms_compressed_windows", comp), ("step_ms_raw_windows", raw)):
    if xs:
        assert abs(d[key] - statistics.median(xs)) <= 1e-9 * statistics.median(xs), (key, d[key], xs)
    else:
        assert d[key] is None, (key, d[key])
text = open(sys.argv[3]).read()
if comp and raw:
    assert "of this run sent raw): " in text, text
    assert abs(d["speedup_vs_raw"] - statistics.median(raw) / statistics.median(comp)) < 1e-9
elif comp:
    assert "no window of this run was sent raw to compare with" in text, text
PY
grep -qF "  not measured (no layer reported activation statistics)" "$TMP/r1.txt" ||
    fail "run 1 measured no activations, the report does not say so"
# Run 3 (comet, activations of 4x their stored size): held vs raw.
"$BELLOWS" report --db "$DB" --run 3 >"$TMP/r3.txt" 2>/dev/null || fail "report --run 3"
"$BELLOWS" report --db "$DB" --run 3 --json >"$TMP/r3.json" 2>/dev/null || fail "report --run 3 --json"
sq "SELECT sum(act_bytes), sum(act_raw_bytes) FROM windows WHERE run_id = 3 AND act_steps > 0 GROUP BY window" >"$TMP/act.rows"
$PY - "$TMP/r3.json" "$TMP/act.rows" <<'PY' || fail "report --json's activation bytes are not the database's"
import json, statistics, sys
d = json.load(open(sys.argv[1]))
rows = [tuple(map(float, l.split("|"))) for l in open(sys.argv[2]) if l.strip()]
assert rows, "no window measured activations"
assert d["act_bytes_median"] == statistics.median(r[0] for r in rows), (d["act_bytes_median"], rows)
assert d["act_raw_bytes_median"] == statistics.median(r[1] for r in rows), (d["act_raw_bytes_median"], rows)
assert d["act_raw_bytes_median"] > d["act_bytes_median"] > 0
PY
grep -qE "^  activations held for backward: [0-9.]+ (B|kB|MB) per step \(median over windows\) vs [0-9.]+ (B|kB|MB) uncompressed" "$TMP/r3.txt" ||
    { sed -n '/^Activation/,/^$/p' "$TMP/r3.txt"; fail "the report of a COMET run does not say what activations it held"; }
ok "the text report says what the database holds, --json the exact numbers"

# ---- the HTML report -----------------------------------------------------
"$BELLOWS" report --db "$DB" --run 1 --html "$TMP/r1.html" >"$TMP/r1b.txt" 2>/dev/null ||
    fail "report --html exited with $?"
[ ! -s "$TMP/r1b.txt" ] || fail "--html FILE also printed on stdout: $(head -3 "$TMP/r1b.txt")"
"$BELLOWS" report --db "$DB" --run 1 --html "$TMP/no/such/dir/r.html" \
    >"$TMP/bad.txt" 2>"$TMP/bad.err" && fail "--html to a bad path succeeded"
[ ! -s "$TMP/bad.txt" ] || fail "--html to a bad path printed the report first"
grep -q "^bellows report: $TMP/no/such/dir/r.html: " "$TMP/bad.err" ||
    fail "--html to a bad path said: $(cat "$TMP/bad.err")"
if grep -qiE 'https?://' "$TMP/r1.html"; then
	grep -oiE '.{20}https?://.{20}' "$TMP/r1.html" | head -3
	fail "the HTML report references a URL"
fi
grep -qi '<script\|<link\|<img\|@import\|url(' "$TMP/r1.html" &&
    fail "the HTML report loads something or runs a script"
n_svg=$(grep -c '<svg ' "$TMP/r1.html")
[ "$n_svg" -ge 5 ] || fail "the HTML report has $n_svg plots, not 5 or more"
grep -qF "r layer0.weight" "$TMP/r1.html" || fail "no plot of r against eta"
ok "the HTML report is one file with $n_svg inline SVG plots and no URL"

# The level plotted is the level applied, held from window to window:
# every segment of its lines is flat or upright, and some are upright
# (accordion changed levels).
grep -qF "Compression level applied per layer (as sent)</text>" "$TMP/r1.html" ||
    fail "the level plot does not say it plots the level applied"
$PY - "$TMP/r1.html" <<'PY' || fail "the level plot draws slopes, not steps"
import re, sys
html = open(sys.argv[1]).read()
fig = html[html.index("Compression level applied per layer"):]
fig = fig[:fig.index("</svg>")]
upright = 0
for line in re.findall(r'<polyline[^>]* points="([^"]*)"', fig):
    pts = [tuple(map(float, p.split(","))) for p in line.split()]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        assert x0 == x1 or y0 == y1, ((x0, y0), (x1, y1))
        upright += x0 == x1
assert upright > 0, "no level changed in the plot"
PY
# The text and JSON reports take the level applied, the decided beside.
grep -qF "Layers (levels applied, as sent, weighted by the steps of each window)" \
    "$TMP/r1.txt" || fail "the text report does not say its levels are applied"
grep -q "recorded no applied level" "$TMP/r1.txt" &&
    fail "the report says a run of this build lacks applied levels"
LAST=$(sq "SELECT group_concat(level_applied, ' ') FROM (SELECT level_applied
    FROM windows WHERE run_id = 1 AND window = 11 ORDER BY layer)")
"$BELLOWS" report --db "$DB" --run 1 --json >"$TMP/r1a.json" 2>/dev/null ||
    fail "report --json"
$PY - "$TMP/r1a.json" "$LAST" <<'PY' || fail "report --json's applied_last is not the history's"
import json, sys
d = json.load(open(sys.argv[1]))
want = [float(v) for v in sys.argv[2].split()]
assert [l["applied_last"] for l in d["layer_summary"]] == want, d["layer_summary"]
assert d["applied_missing"] == 0, d["applied_missing"]
PY
ok "the report plots the level applied as steps and says so"

# The outcome first, the configuration last; round ticks, amounts from 0.
first=$(grep -m1 -n "^Summary (what the run bought)$" "$TMP/r1.txt" | cut -d: -f1)
conf=$(grep -m1 -n "^Configuration$" "$TMP/r1.txt" | cut -d: -f1)
[ "$first" = 4 ] || fail "the summary is not the report's first section (line $first)"
[ -n "$conf" ] && [ "$conf" -gt "$(grep -n '^Accuracy' "$TMP/r1.txt" | cut -d: -f1)" ] ||
    fail "the configuration is not after the other sections"
grep -q "^  wall time .* (the run's start to its end)$" "$TMP/r1.txt" ||
    fail "the summary has no wall time"
$PY - "$TMP/r1.html" <<'PY' || fail "plot ticks are not round numbers"
import math, re, sys
html = open(sys.argv[1]).read()
figs = re.findall(r"<figure>.*?</figure>", html, re.S)
assert figs, "no figure"
checked = 0
for fig in figs:
    title = re.search(r'font-weight="bold">([^<]*)<', fig).group(1)
    ys = [t for t in re.findall(r'text-anchor="end">([^<]*)</text>', fig)]
    nums = [float(t) for t in ys if re.fullmatch(r"-?[0-9.]+(e-?[0-9]+)?", t)]
    if len(nums) < 2:
        continue
    step = nums[1] - nums[0]
    mag = 10 ** math.floor(math.log10(step))
    assert round(step / mag, 6) in (1, 2, 5, 10), (title, nums)
    assert all(abs(v / step - round(v / step)) < 1e-6 for v in nums), (title, nums)
    if title.startswith(("Step time", "Compression level")):
        assert nums[0] == 0, (title, "does not start at 0", nums)
    checked += 1
assert checked >= 3, checked
assert "Test loss the trainer evaluated" in html or "not reported" in html
PY
ok "the report leads with its summary, ends with the configuration, ticks at 1-2-5"

CHROMIUM=$(command -v chromium || true)
# render HTML PNG: a screenshot of the page by headless Chromium, checked
# by png_ink below; false without Chromium.
render() {
	[ -n "$CHROMIUM" ] || return 1
	(cd "$TMP" && HOME="$TMP" timeout 60 "$CHROMIUM" --headless --no-sandbox \
	    --disable-gpu --screenshot="$2" --window-size=1200,2000 \
	    "file://$1" >"$TMP/chromium.log" 2>&1) ||
	    { tail -5 "$TMP/chromium.log"; fail "chromium could not render $1"; }
}
# Decodes the PNG (8-bit RGB or RGBA, any filter) with zlib and counts
# the pixels that are not near-white.
png_ink() {
$PY - "$1" <<'PY' >"$TMP/png.out" || { cat "$TMP/png.out"; fail "the screenshot $1 is blank or unreadable"; }
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat = 8, b""
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
assert depth == 8 and ctype in (2, 6), "PNG type %d/%d" % (depth, ctype)
bpp = 3 if ctype == 2 else 4
raw = zlib.decompress(idat)
stride = w * bpp
prev = bytearray(stride)
ink = colour = 0
i = 0
for y in range(h):
    f = raw[i]; line = bytearray(raw[i + 1:i + 1 + stride]); i += 1 + stride
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0
        b = prev[x]
        c = prev[x - bpp] if x >= bpp else 0
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + b) & 255
        elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    for x in range(0, stride, bpp):
        r, g, bl = line[x], line[x + 1], line[x + 2]
        if min(r, g, bl) < 200:
            ink += 1
        if max(r, g, bl) - min(r, g, bl) > 80:
            colour += 1
    prev = line
print("%dx%d: %d dark pixels, %d coloured" % (w, h, ink, colour))
assert ink > w * h // 100, "fewer than 1% dark pixels"
assert colour > 1000, "no coloured plot lines"
PY
}
if render "$TMP/r1.html" "$TMP/r1.png"; then
	png_ink "$TMP/r1.png"
	ok "chromium renders the HTML report: $(cat "$TMP/png.out")"
fi

# ---- compare -------------------------------------------------------------
"$BELLOWS" history compare --db "$DB" --run 1 --run 2 >"$TMP/cmp.txt" 2>"$TMP/cmp.err" ||
    { cat "$TMP/cmp.err"; fail "history compare exited with $?"; }
cmp_has() {
	grep -qE -- "$1" "$TMP/cmp.txt" ||
	    { cat "$TMP/cmp.txt"; fail "compare lacks a line matching '$1'"; }
}
cmp_has "^A: run 1 of job 'rep' in $DB$"
cmp_has "^B: run 2 of job 'rep' in $DB$"
cmp_has '^\* ranks +3 +2 +-33\.3%$'
cmp_has '^  layers +4 +4$'
cmp_has '^\* windows +12 +8 +-33\.3%$'
cmp_has "^[* ] decisions +$N_DEC +$(sq "SELECT count(*) FROM decisions WHERE run_id = 2")( |$)"
cmp_has '^[* ] bytes saved +[0-9.]+ (B|kB|MB) +[0-9.]+ (B|kB|MB)'
cmp_has '^[* ] step time, median +[0-9.]+ (us|ms|s) +[0-9.]+ (us|ms|s)'
for l in layer0.weight layer1.weight layer2.weight layer3.bias; do
	cmp_has "^[* ] $l +[0-9.]+ +[0-9.]+"
done
cmp_has '^  layer3.bias +0 +0 +0 +0 +0 +0 +12 +8$'
# Across two files: a copy of the database, runs named FILE:ID.
cp "$DB" "$TMP/copy.db"
"$BELLOWS" history compare --run "$DB:1" --run "$TMP/copy.db:1" >"$TMP/same.txt" 2>&1 ||
    { cat "$TMP/same.txt"; fail "compare across two files exited with $?"; }
grep -qF "B: run 1 of job 'rep' in $TMP/copy.db" "$TMP/same.txt" ||
    fail "compare did not read B from the second file"
grep -q '^\*' "$TMP/same.txt" && { cat "$TMP/same.txt"; fail "a run compared with its copy differs"; }
"$BELLOWS" history compare --db "$DB" --db "$TMP/copy.db" --run 1 --run 2 >"$TMP/two.txt" 2>&1 ||
    fail "compare --db A --db B --run --run exited with $?"
grep -qF "B: run 2 of job 'rep' in $TMP/copy.db" "$TMP/two.txt" ||
    fail "with two --db the second run is not read from the second"
ok "compare puts two runs side by side, in one file and across two, marking differences"

# Percentages differ in points: the share saved of raw, as shown.
$PY - "$TMP/cmp.txt" <<'PY' || fail "compare gives a percentage's difference as a per cent"
import re, sys
line = [l for l in open(sys.argv[1]) if " saved of raw " in l][0]
m = re.fullmatch(r"[* ] saved of raw +([0-9.]+)% +([0-9.]+)%(?:  ([+-][0-9.]+) pp)?\n", line)
assert m, line
a, b, d = m.groups()
if a == b:
    assert d is None, line
else:
    assert abs(float(d) - (float(b) - float(a))) < 1e-9, line
PY
cmp_has '^  policies A: accordion \(accordion\)$'
cmp_has '^  policies B: accordion \(accordion\)$'
cmp_has '^  time to the same accuracy: not comparable \(neither run reported an evaluation\)$'
grep -q "different jobs" "$TMP/cmp.txt" "$TMP/cmp.err" &&
    fail "compare warns about two runs of one job"
ok "compare gives percentages in points, the policies, and no warning within a job"

# Two runs of one job whose trainer evaluated (bellows sim --eval), in a
# history of their own: which was better.
DB_REP=$DB
DB="$TMP/eval.db"
start_daemon
run_sim --job "$JOB" --ranks 2 --layers 4 --windows 10 \
    --steps-per-window 4 --step-ms 1 --eval 0.9 || fail "sim --eval 0.9 exited with $?"
expect_agreed 2 10
run_sim --job "$JOB" --ranks 2 --layers 4 --windows 8 \
    --steps-per-window 4 --step-ms 2 --eval 0.8 --seed 3 ||
    fail "sim --eval 0.8 exited with $?"
expect_agreed 2 8
for _ in $(seq 1 50); do
	[ "$(sq "SELECT count(*) FROM runs WHERE ended_wall_ms IS NOT NULL")" = 2 ] && break
	sleep 0.1
done
kill_daemon TERM
EDB=$DB
DB=$DB_REP
[ "$(sqlite3 -readonly "$EDB" "SELECT count(*) FROM window_info WHERE run_id = 1 AND eval_accuracy > 0")" = 10 ] ||
    fail "sim --eval did not report an evaluation per window"
"$BELLOWS" history compare --db "$EDB" --run 1 --run 2 >"$TMP/ecmp.txt" 2>"$TMP/ecmp.err" ||
    { cat "$TMP/ecmp.err"; fail "history compare of evaluated runs exited with $?"; }
sqlite3 -readonly "$EDB" "SELECT w.run_id, w.eval_accuracy, w.eval_loss, w.last_step,
    w.closed_wall_ms - r.started_wall_ms, r.ended_wall_ms - r.started_wall_ms
    FROM window_info w JOIN runs r ON r.id = w.run_id
    WHERE w.eval_accuracy > 0 ORDER BY w.run_id, w.window" >"$TMP/evals.rows"
$PY - "$TMP/ecmp.txt" "$TMP/evals.rows" <<'PY' || { cat "$TMP/ecmp.txt"; fail "compare's accuracy, loss and time to accuracy are not the history's"; }
import re, sys
text = open(sys.argv[1]).read()
runs = {1: [], 2: []}
for l in open(sys.argv[2]):
    r, acc, loss, step, ms, wall = l.strip().split("|")
    runs[int(r)].append((float(acc), float(loss), int(step), float(ms), float(wall)))
def line(what):
    m = re.search(r"^[* ] %s +(\S+(?: \S+)?) +(\S+(?: \S+)?)(?:  (.*))?$" % re.escape(what), text, re.M)
    assert m, what
    return m.groups()
a, b, d = line("final test accuracy")
fa, fb = 100 * runs[1][-1][0], 100 * runs[2][-1][0]
assert (a, b) == ("%.2f%%" % fa, "%.2f%%" % fb), (a, b)
assert d == "%+.2f pp" % (round(fb, 2) - round(fa, 2)), d
a, b, _ = line("final test loss")
assert abs(float(a) - runs[1][-1][1]) < 1e-3 * runs[1][-1][1], a
assert abs(float(b) - runs[2][-1][1]) < 1e-3 * runs[2][-1][1], b
target = min(max(e[0] for e in runs[1]), max(e[0] for e in runs[2]))
assert "  target accuracy %.2f%%: the lower of the two best, reached by both\n" % (100 * target) in text, text
first = {r: next(e for e in runs[r] if e[0] >= target) for r in (1, 2)}
a, b, _ = line("step reaching %.2f%%" % (100 * target))
assert (a, b) == (str(first[1][2]), str(first[2][2])), (a, b, first)
a, b, _ = line("time to %.2f%%" % (100 * target))
def ms(t):
    v, u = t.split()
    return float(v) * {"us": 1e-3, "ms": 1, "s": 1000}[u]
for got, want in ((a, first[1][3]), (b, first[2][3])):
    assert abs(ms(got) - want) <= 0.01 * want + 0.01, (got, want)
a, b, _ = line("wall time")
for got, want in ((a, runs[1][0][4]), (b, runs[2][0][4])):
    assert abs(ms(got) - want) <= 0.01 * want + 0.01, (got, want)
assert re.search(r"^[* ] step, windows compressing +\S+ (us|ms|s) ", text, re.M), text
PY
ok "compare says which evaluated run was better: accuracy and loss, time and step to the same accuracy, wall time"

# Runs of two jobs: a warning on standard error and in the output.
"$BELLOWS" history compare --run "$EDB:1" --run "$DB:3" >"$TMP/jcmp.txt" 2>"$TMP/jcmp.err" ||
    fail "compare across jobs exited with $?"
W="warning: A and B are runs of different jobs ('rep' and 'other')"
grep -qF "bellows history compare: $W" "$TMP/jcmp.err" ||
    fail "compare across jobs did not warn on standard error: $(cat "$TMP/jcmp.err")"
sed -n 3p "$TMP/jcmp.txt" | grep -qF "$W" ||
    { head -4 "$TMP/jcmp.txt"; fail "compare across jobs has no warning under the runs"; }
grep -qE '^\* policies B: comet \(comet\)$' "$TMP/jcmp.txt" ||
    fail "compare does not name run 3's policy: $(grep policies "$TMP/jcmp.txt")"
grep -qF "  time to the same accuracy: not comparable (B reported no evaluation)" "$TMP/jcmp.txt" ||
    fail "compare does not say that B reported no evaluation"
ok "compare warns about runs of two jobs"

# --html: one page, nothing on stdout; both runs on the same axes.
"$BELLOWS" history compare --db "$EDB" --run 1 --run 2 --html "$TMP/cmp.html" \
    >"$TMP/hcmp.txt" 2>/dev/null || fail "compare --html exited with $?"
[ ! -s "$TMP/hcmp.txt" ] || fail "compare --html FILE also printed on stdout"
grep -qiE 'https?://|<script|<link|<img|@import|url\(' "$TMP/cmp.html" &&
    fail "the compare page references a URL or runs a script"
"$BELLOWS" history compare --db "$EDB" --run 1 --run 2 \
    --html "$TMP/no/such/dir/c.html" >"$TMP/bad.txt" 2>"$TMP/bad.err" &&
    fail "compare --html to a bad path succeeded"
[ ! -s "$TMP/bad.txt" ] && grep -qF "$TMP/no/such/dir/c.html: No such file" "$TMP/bad.err" ||
    fail "compare --html to a bad path: $(cat "$TMP/bad.err")"
$PY - "$TMP/cmp.html" "$TMP/ecmp.txt" "$TMP/evals.rows" <<'PY' || fail "the compare page does not overlay both runs"
import html, re, sys
page = open(sys.argv[1]).read()
text = open(sys.argv[2]).read()
assert html.escape(text, quote=False).replace('"', "&quot;") in page, "the page lacks the text"
want = {"Test accuracy against step": 0, "Test accuracy against wall time": 0,
        "Test loss against step": 0, "Test loss against wall time": 0,
        "Step time per window (median over ranks)": 0,
        "Gradient bytes sent, cumulative, all ranks": 0}
n_eval = {1: 0, 2: 0}
for l in open(sys.argv[3]):
    n_eval[int(l.split("|")[0])] += 1
for fig in re.findall(r"<figure>.*?</figure>", page, re.S):
    title = html.unescape(re.search(r'font-weight="bold">([^<]*)<', fig).group(1))
    if title not in want:
        continue
    lines = re.findall(r'<polyline[^>]* points="([^"]*)"', fig)
    assert len(lines) == 2, (title, len(lines))
    assert "A: run 1" in fig and "B: run 2" in fig, title
    if title.startswith("Test"):
        assert [len(p.split()) for p in lines] == [n_eval[1], n_eval[2]], (title, lines)
    want[title] += 1
assert all(v == 1 for v in want.values()), want
PY
ok "compare --html writes one page with both runs on the same axes"

# ---- bad input -----------------------------------------------------------
# expect_err STATUS TEXT CMD...: CMD exits with STATUS and says TEXT.
expect_err() {
	local want=$1 text=$2 rc
	shift 2
	"$@" >"$TMP/bad.out" 2>"$TMP/bad.err"
	rc=$?
	[ "$rc" -eq "$want" ] ||
	    fail "'$*' exited with $rc, not $want: $(cat "$TMP/bad.err")"
	grep -qF -- "$text" "$TMP/bad.err" ||
	    fail "'$*' did not say '$text': $(cat "$TMP/bad.err")"
	[ -s "$TMP/bad.out" ] && fail "'$*' wrote to standard output"
	return 0
}
expect_err 1 "$TMP/missing.db: No such file" "$BELLOWS" report --db "$TMP/missing.db"
expect_err 1 "there is no run 99" "$BELLOWS" report --db "$DB" --run 99
expect_err 1 "there is no run 3 of job 'rep'" "$BELLOWS" report --db "$DB" --run 3 --job "$JOB"
expect_err 2 "--run must be an integer" "$BELLOWS" report --db "$DB" --run x
expect_err 2 "unknown option '--bogus'" "$BELLOWS" report --bogus
"$BELLOWS" report --db "$DB" --run 1 --html "$TMP/no/such/dir/r.html" >/dev/null 2>"$TMP/bad.err"
[ $? -eq 1 ] && grep -qF "$TMP/no/such/dir/r.html: No such file" "$TMP/bad.err" ||
    fail "an unwritable --html file is not refused: $(cat "$TMP/bad.err")"
expect_err 2 "which database is run 1 in?" "$BELLOWS" history compare --db "$DB" --db "$TMP/copy.db" --run 1
expect_err 2 "two runs needed" "$BELLOWS" history compare --db "$DB" --run 1
expect_err 2 "give it without --db" "$BELLOWS" history compare --db "$DB" --run "$DB:1" --run "$DB:2"
expect_err 2 "give both runs as FILE:ID" "$BELLOWS" history compare --run "$DB:1" --run 2
expect_err 2 "--run given more than twice" "$BELLOWS" history compare --run 1 --run 2 --run 3
expect_err 1 "there is no run 9" "$BELLOWS" history compare --db "$DB" --run 1 --run 9
expect_err 1 "$TMP/missing.db: No such file" "$BELLOWS" history compare --run "$TMP/missing.db:1" --run "$DB:1"
expect_err 2 "--eval must be above 0, not 0" "$BELLOWS" sim --job "$JOB" --ranks 1 \
    --layers 1 --windows 1 --steps-per-window 1 --eval 0
expect_err 2 "--eval must be at most 1, not 1.5" "$BELLOWS" sim --job "$JOB" --ranks 1 \
    --layers 1 --windows 1 --steps-per-window 1 --eval 1.5
ok "unknown runs, missing files, runs of another job and ambiguous runs and evaluations out of 0..1 are refused"

"$BELLOWS" help | grep -qE '^  report +' || fail "bellows help does not list report"
"$BELLOWS" history --help | grep -qE '^  compare +' || fail "bellows history --help does not list compare"
ok "bellows help lists report, bellows history --help compare"

if render "$TMP/cmp.html" "$TMP/cmp.png"; then
	png_ink "$TMP/cmp.png"
	ok "chromium renders the compare page: $(cat "$TMP/png.out")"
else
	echo "skip: chromium is not installed (scripts/setup.sh full installs it)"
	exit 77
fi
