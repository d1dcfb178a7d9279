#!/usr/bin/env bash
# One run, every view: the bytes a sim job saved read the same, in the
# same decimal units (B, kB, MB, GB; docs/history.md#units), in
# Prometheus' counter, `bellows history runs`, `bellows report` (text and
# JSON), `bellows history compare`, the demo's summary and `bellows top`.
. "$(dirname "$0")/lib.sh"

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
write_config "$TMP/policy.yaml"
sed -i "s/^daemon:/daemon:\n  metrics_listen: \"127.0.0.1:$PORT\"/" \
    "$TMP/policy.yaml"
DB=$TMP/h.db
start_daemon
run_sim --job units --ranks 2 --layers 4 --windows 10 \
    --steps-per-window 5 --step-ms 5 || fail "sim failed"
expect_agreed 2 10
sleep 1.2 # one publication period: the counters follow the run
python3 - "$PORT" >"$TMP/metrics.txt" <<'PY' || fail "GET /metrics failed"
import sys, urllib.request
print(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics",
                             timeout=10).read().decode())
PY
kill_daemon TERM

# The number: Prometheus' counter, and the report's JSON.
prom=$(sed -n 's/^bellows_job_bytes_saved_total{bellows_job="units"} \([0-9.e+]*\)$/\1/p' \
    "$TMP/metrics.txt")
[ -n "$prom" ] || fail "no bellows_job_bytes_saved_total for job units"
"$BELLOWS" report --db "$DB" --json >"$TMP/r.json" 2>/dev/null ||
    fail "report --json failed"
json=$(python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
def find(o):
    if isinstance(o, dict):
        for k, v in o.items():
            if k == "bytes_saved":
                return v
            r = find(v)
            if r is not None:
                return r
    if isinstance(o, list):
        for v in o:
            r = find(v)
            if r is not None:
                return r
print(int(find(d)))' "$TMP/r.json") || fail "no bytes_saved in the report's JSON"
[ "$json" -gt 0 ] || fail "the run saved nothing: $json bytes"
python3 -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(a != b)' \
    "$prom" "$json" || fail "Prometheus says $prom bytes saved, the report's JSON $json"
col=$(sqlite3 -readonly "$DB" "SELECT sum(grad_bytes_saved) FROM window_info WHERE run_id = 1")
[ "$col" = "$json" ] ||
    fail "window_info.grad_bytes_saved sums to $col, the report's JSON says $json"
[ "$(sqlite3 -readonly "$DB" "SELECT count(*) FROM pragma_table_info('window_info') WHERE name = 'saved_bytes'")" = 0 ] ||
    fail "window_info still has a column named saved_bytes"
ok "Prometheus, the report's JSON and window_info.grad_bytes_saved: $json bytes saved"

# The words: each view prints the number as people read it, decimal, 3
# significant digits.
want=$(python3 -c 'import sys
n = float(sys.argv[1])
for u in ("B", "kB", "MB", "GB", "TB"):
    if abs(n) < 999.5 or u == "TB":
        print(f"{n:.0f} {u}" if u == "B" else f"{n:.3g} {u}")
        break
    n /= 1000' "$json")
"$BELLOWS" history runs --db "$DB" >"$TMP/runs.txt" 2>/dev/null ||
    fail "history runs failed"
grep -qF "$want" "$TMP/runs.txt" ||
    fail "history runs does not say $want: $(cat "$TMP/runs.txt")"
"$BELLOWS" report --db "$DB" >"$TMP/r.txt" 2>/dev/null || fail "report failed"
grep -qF "  saved $want:" "$TMP/r.txt" ||
    fail "report does not say saved $want: $(grep saved "$TMP/r.txt")"
"$BELLOWS" history compare --run "$DB:1" --run "$DB:1" >"$TMP/c.txt" \
    2>/dev/null || fail "history compare failed"
grep -Eq "^  bytes saved +$want +$want" "$TMP/c.txt" ||
    fail "compare does not say $want: $(grep 'bytes saved' "$TMP/c.txt")"
/usr/bin/python3 "$SRC/scripts/demo_summary.py" --db "$DB" >"$TMP/s.txt" ||
    fail "the demo summary failed"
grep -qF "; $want saved" "$TMP/s.txt" ||
    fail "the summary does not say $want saved: $(grep saved "$TMP/s.txt")"
ok "history runs, report, compare and the summary all say $want"

# No binary units anywhere, and top's sizes carry their unit.
for f in runs.txt r.txt c.txt s.txt; do
	grep -Eq "[0-9] ?(KiB|MiB|GiB)" "$TMP/$f" && fail "$f uses binary units"
done
"$BELLOWS" top --once --db "$DB" --view jobs --size 24x120 >"$TMP/top.txt" \
    2>/dev/null || fail "top --once --db failed"
grep -Eq "[0-9.]+(B|kB|MB|GB)/[0-9.]+(B|kB|MB|GB)" "$TMP/top.txt" ||
    fail "top shows no sent/raw sizes with units: $(cat "$TMP/top.txt")"
ok "no view uses binary units; top's sizes carry theirs"
