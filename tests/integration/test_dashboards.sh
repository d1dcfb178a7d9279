#!/usr/bin/env bash
# dist/prometheus/bellows-alerts.yml passes promtool check rules and its
# unit tests (bellows-alerts.test.yml: every alert fires on what it means
# and not on a healthy bellowsd); dist/grafana/bellows.json is a dashboard
# Grafana imports (its panels: decisions, levels, bytes saved, step time,
# ranks alive, misses; every query on the datasource variable); and every
# metric a query or rule names is one a live bellowsd serves on /metrics
# during a sim job, or Prometheus' own up{job="bellowsd"}. Skipped without
# promtool (Debian package prometheus) or curl.
. "$(dirname "$0")/lib.sh"

command -v promtool >/dev/null || {
	echo "SKIP: promtool (Debian package prometheus) not installed"
	exit 77
}
command -v curl >/dev/null || {
	echo "SKIP: curl not installed"
	exit 77
}
RULES="$SRC/dist/prometheus/bellows-alerts.yml"
DASH="$SRC/dist/grafana/bellows.json"
promtool check rules "$RULES" >"$TMP/check.out" 2>&1 ||
    fail "promtool check rules: $(cat "$TMP/check.out")"
ok "promtool check rules: $(grep -o '[0-9]* rules found' "$TMP/check.out")"
(cd "$SRC/tests/integration" && promtool test rules bellows-alerts.test.yml) \
    >"$TMP/test.out" 2>&1 || fail "promtool test rules: $(cat "$TMP/test.out")"
ok "promtool test rules: each alert fires on its series, none on a healthy bellowsd"

# A live bellowsd with a job, so that the per-job and per-layer
# families are served.
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
DAEMON_ARGS="--metrics-listen 127.0.0.1:$PORT"
start_daemon
run_sim --job dash --ranks 2 --layers 3 --windows 6 --steps-per-window 5 \
    --step-ms 5 || fail "sim failed"
expect_agreed 2 6
got=0
for _ in $(seq 1 50); do
	curl -sf "http://127.0.0.1:$PORT/metrics" >"$TMP/metrics.txt" &&
	    grep -q '^bellows_layer_level{' "$TMP/metrics.txt" && got=1 && break
	sleep 0.1
done
[ $got = 1 ] || fail "no per-layer metrics served: $(head -n 20 "$TMP/metrics.txt")"

python3 - "$DASH" "$RULES" "$TMP/metrics.txt" <<'PY' || fail "see above"
import json, re, sys

dash_path, rules_path, metrics_path = sys.argv[1:]
bad = []

# The families served, histograms with their series.
served = set()
for line in open(metrics_path):
    m = re.match(r"# TYPE (\S+) (\S+)", line)
    if m:
        served.add(m[1])
        if m[2] == "histogram":
            served |= {m[1] + s for s in ("_bucket", "_sum", "_count")}

# PromQL's words the files use; anything else outside braces, brackets,
# by (...) and strings must be a served metric or up.
WORDS = {"rate", "increase", "histogram_quantile", "sum", "by", "or",
         "and", "unless", "on", "ignoring", "max", "min", "avg", "topk"}

served_text = open(metrics_path).read()

def metrics_of(expr):
    # label_values(METRIC, LABEL): a metric and one of its labels.
    lv = re.match(r"label_values\((\w+), (\w+)\)$", expr)
    if lv:
        if f"{lv[1]}{{{lv[2]}=" not in served_text:
            bad.append(f"{expr}: no {lv[1]} with label {lv[2]} served")
        return [lv[1]]
    e = re.sub(r'"[^"]*"', "", expr)
    e = re.sub(r"\{[^}]*\}|\[[^\]]*\]|\bby \([^)]*\)", " ", e)
    return [w for w in re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", e)
            if w not in WORDS]

def check(where, expr):
    if "bellows_up" in expr:
        bad.append(f"{where}: bellows_up (use up{{job=\"bellowsd\"}}): {expr}")
    for name in metrics_of(expr):
        if name == "up":
            if 'up{job="bellowsd"}' not in expr:
                bad.append(f"{where}: up without job=\"bellowsd\": {expr}")
        elif name not in served:
            bad.append(f"{where}: {name} is not served by bellowsd: {expr}")

dash = json.load(open(dash_path))
exprs = 0
titles = []
for p in dash["panels"]:
    titles.append(p["title"])
    if p["datasource"]["uid"] != "${datasource}":
        bad.append(f"panel {p['title']}: datasource {p['datasource']}")
    if not p["targets"]:
        bad.append(f"panel {p['title']}: no query")
    for t in p["targets"]:
        check(f"panel {p['title']}", t["expr"])
        exprs += 1
for v in dash["templating"]["list"]:
    if v["type"] == "query":
        check(f"variable {v['name']}", v["definition"])
        exprs += 1
for want in ("Decisions", "Levels", "Bytes saved", "Step time",
             "Ranks alive", "Misses"):
    if not any(t.startswith(want) for t in titles):
        bad.append(f"no panel for {want}: {titles}")
for key in ("uid", "title", "schemaVersion", "panels", "templating"):
    if key not in dash:
        bad.append(f"the dashboard has no {key}")

rules = 0
text = open(rules_path).read()
for m in re.finditer(r"expr: (?:>-\n((?:\s{10,}.*\n)+)|(.*)\n)", text):
    expr = " ".join((m[1] or m[2]).split())
    check("rule", expr)
    rules += 1
if rules != 4:
    bad.append(f"{rules} rule expressions read, 4 expected")

if bad:
    print("FAIL:\n  " + "\n  ".join(bad))
    sys.exit(1)
print(f"ok: {len(dash['panels'])} panels, {exprs} dashboard queries and "
      f"{rules} rules name only metrics the live bellowsd serves "
      f"({len(served)} families and series) or up{{job=\"bellowsd\"}}")
PY
