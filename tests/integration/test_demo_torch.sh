#!/usr/bin/env bash
# scripts/demo.sh's real job, short: two PyTorch ranks for one epoch of
# 512 Fashion-MNIST images under Accordion. The trainer's window lines
# say what rank 0 sent against raw with units, its final line what all
# ranks sent, and the demo ends with the summary read from the history,
# which holds the trainer's test accuracies (bellows report lists them).
# Skipped (77) without Debian's python3-torch or the data set.
. "$(dirname "$0")/lib.sh"

/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "no torch"; exit 77; }
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
    { echo "no Fashion-MNIST"; exit 77; }

BELLOWS_BUILD_DIR="$BUILD" BELLOWS_DEMO_OUT="$TMP/out" \
    BELLOWS_DEMO_NO_SETUP=1 BELLOWS_DEMO_NO_TOP=1 BELLOWS_DEMO_EPOCHS=1 \
    BELLOWS_DEMO_TRAIN_LIMIT=512 OMP_NUM_THREADS=1 \
    bash "$SRC/scripts/demo.sh" >"$TMP/demo.out" 2>&1 ||
    { tail -30 "$TMP/demo.out"; fail "the demo failed"; }
f=$TMP/demo.out
has() {
	grep -Eq "$1" "$f" || { cat "$f"; fail "no line matching '$1'"; }
}
S='[0-9.]+ [kMG]?B'
has "^window +0 step +[0-9]+ epoch 0 .* rank 0 sent $S of $S raw \(([0-9.]+x|no) less\), step [0-9.]+ ms$"
has "^fashion_mnist: all ranks sent $S of $S raw \(([0-9.]+x|no) less\); [0-9.]+[kMG]? of [0-9.]+[kMG]? floats; [0-9]+ decisions, 0 misses$"
grep -q "floats sent\|uncompressed (" "$f" && fail "the old words are back"
has "^summary of run 1 \(job fashion-mnist, 2 ranks, [0-9]+ windows, on plain loopback\)"
has "^  decided: [0-9]+ decisions by accordion, [0-9]+ of them changed something:"
has "^    window 0 \(step 0, [0-9.]+ s in\), accordion: conv1.weight level 2"
has "^  saved: sent $S of $S raw \([0-9.]+x less\), [0-9.]+[kM] of [0-9.]+[kM] floats, all ranks; $S saved"
# The trainer's first window went raw (--raw-windows 1): the summary
# sets the compressed windows' step against it.
has "^  step time: [0-9.]+ ms compressing \(median of [0-9]+ windows?\) against [0-9.]+ ms raw \(median of 1 window of this run sent raw\): [0-9.]+x (faster|slower)$"
has "^  final test accuracy [0-9.]+%, loss [0-9.]+ \(the last window evaluated\)$"
[ "$(sqlite3 -readonly "$TMP/out/demo-history.db" "SELECT floats_sent = floats_raw FROM window_info WHERE run_id = 1 AND window = 0")" = 1 ] ||
    fail "window 0 of the demo was not sent raw"
while read -r line; do
	(cd "$SRC" && eval "$line") >/dev/null 2>&1 ||
	    fail "pasted '$line' failed"
done < <(sed -n '/^  more:$/,$p' "$f" | grep '^    ' | sed 's/^    //')
ok "the PyTorch demo: sent of raw with units per window and at the end, and its summary"
# The trainer reports the test accuracy of every window it prints to
# bellowsd: the history holds one per window line, the last equal to the
# last line's, and bellows report lists them.
db=$TMP/out/demo-history.db
lines=$(grep -cE '^window +[0-9]+ step .* test acc ' "$f")
last=$(grep -E '^window +[0-9]+ step .* test acc ' "$f" | tail -n 1 |
    sed -E 's/.* test acc +([0-9.]+)%.*/\1/')
got=$(sqlite3 -readonly "$db" "SELECT count(*) FROM window_info WHERE run_id = 1 AND eval_accuracy > 0")
[ "$got" = "$lines" ] ||
    fail "the history holds $got evaluations, the trainer printed $lines"
want=$(sqlite3 -readonly "$db" "SELECT printf('%.2f', 100 * eval_accuracy) FROM window_info WHERE run_id = 1 AND eval_accuracy > 0 ORDER BY window DESC LIMIT 1")
[ "$want" = "$last" ] ||
    fail "the last evaluation in the history is $want%, the trainer printed $last%"
"$BELLOWS" report --db "$db" --run 1 >"$TMP/report.txt" 2>&1 ||
    fail "bellows report of the demo's run"
grep -qE "^  $lines evaluations; last $last% \(loss [0-9.]+\) after window " \
    "$TMP/report.txt" ||
    { sed -n '/^Accuracy/,$p' "$TMP/report.txt"; fail "the report does not show the trainer's accuracy"; }
ok "the demo's $lines test accuracies are in the history and bellows report (last $last%)"
exit 0
