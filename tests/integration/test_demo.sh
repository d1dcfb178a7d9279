#!/usr/bin/env bash
# scripts/demo.sh as a newcomer runs it, on `bellows sim` (fast): its
# options are checked (a bad --link RATE or --with policy is a clear
# error, exit 2); every mode (the default and --with each policy) ends
# with a summary in plain words read from the history: the decisions and
# their reasons, sent against raw with units, COMET's activation bytes,
# SlimGC's send times against compressed send plus encode+decode,
# perfmodel's predicted step times; and every command the summary prints
# works when pasted. --link without root says it runs on plain loopback;
# with root, the job runs in a rate-limited network namespace.
. "$(dirname "$0")/lib.sh"

demo() {
	BELLOWS_BUILD_DIR="$BUILD" BELLOWS_DEMO_OUT="$TMP/out" \
	    BELLOWS_DEMO_NO_SETUP=1 BELLOWS_DEMO_NO_TOP=1 \
	    BELLOWS_DEMO_SIM_WINDOWS=${WINDOWS:-8} \
	    bash "$SRC/scripts/demo.sh" "$@"
}

# The command line.
check_args() {
	BELLOWS_DEMO_CHECK_ARGS=1 bash "$SRC/scripts/demo.sh" "$@"
}
out=$(check_args --with slimgc --link 100mbit) ||
    fail "--with slimgc --link 100mbit refused"
[ "$out" = "demo: mode torch, policy slimgc, link 100mbit" ] ||
    fail "--with slimgc --link 100mbit read as: $out"
out=$(check_args --sim --link=1GBit) || fail "--sim --link=1GBit refused"
[ "$out" = "demo: mode sim, policy default, link 1gbit" ] ||
    fail "--sim --link=1GBit read as: $out"
for bad in "--link 100" "--link fast" "--link" "--link 100mbps" \
    "--with" "--with nope" "--frobnicate"; do
	# shellcheck disable=SC2086 # two words
	check_args $bad >"$TMP/args.out" 2>&1 && fail "'$bad' accepted"
	rc=$?
	[ "$rc" -eq 2 ] || fail "'$bad': exit $rc, not 2"
	grep -q "^demo: " "$TMP/args.out" ||
	    fail "'$bad' without a message: $(cat "$TMP/args.out")"
done
grep -q "'fast' is not a rate" <(check_args --link fast 2>&1) ||
    fail "--link fast does not say it is no rate"
grep -q "unknown policy 'nope'" <(check_args --with nope 2>&1) ||
    fail "--with nope does not name the policy"
out=$(check_args --with gcomp --out "$TMP/o") || fail "--with gcomp refused"
[ "$out" = "demo: mode torch, policy gcomp, link loopback, out $TMP/o" ] ||
    fail "--with gcomp --out read as: $out"
check_args --with resireduce >/dev/null || fail "--with resireduce refused"
check_args --sim --with resireduce >"$TMP/args.out" 2>&1 &&
    fail "--sim --with resireduce accepted"
grep -q "no residual statistics" "$TMP/args.out" ||
    fail "--sim --with resireduce without a reason: $(cat "$TMP/args.out")"
bash "$SRC/scripts/demo.sh" --help >"$TMP/help.out" 2>"$TMP/help.err" ||
    fail "demo.sh --help exits $?"
grep -q "^usage: .*--with accordion|comet|slimgc|perfmodel|gcomp|resireduce" \
    "$TMP/help.out" || fail "--help prints no usage on stdout"
[ ! -s "$TMP/help.err" ] || fail "--help writes to stderr: $(cat "$TMP/help.err")"
ok "demo.sh reads --sim, --with, --out and --link RATE, --help exits 0, and bad options exit 2"

# summary FILE: the summary block of a demo's output.
summary() {
	sed -n '/^summary of run /,/^demo: done/p' "$1"
}
# pasted FILE: runs every command the summary printed under "more:".
pasted() {
	local n=0
	while read -r line; do
		(cd "$SRC" && eval "$line") >"$TMP/pasted.out" 2>&1 ||
		    fail "pasted '$line' failed: $(tail -3 "$TMP/pasted.out")"
		n=$((n + 1))
	done < <(summary "$1" | sed -n '/^  more:$/,$p' | grep '^    ' |
	    sed 's/^    //')
	[ "$n" -ge 3 ] || fail "only $n commands to paste"
	echo "$n"
}
has() {
	grep -Eq "$2" <(summary "$1") ||
	    { summary "$1"; fail "$3: no line matching '$2'"; }
}

# The default: the schedule of examples/policies/demo.yaml.
demo --sim >"$TMP/default.out" 2>&1 ||
    { tail -20 "$TMP/default.out"; fail "demo --sim failed"; }
f=$TMP/default.out
has "$f" "^summary of run 1 \(job demo, 4 ranks, 8 windows, on plain loopback\)" default
has "$f" "^  decided: [0-9]+ decisions by levels \(schedule\), [0-9]+ of them changed something:" default
has "$f" "^    window 0 \(step 0, 0.0 s in\), levels: layer0.weight level 2" default
has "$f" "^      why: schedule: level 2 from window 0" default
has "$f" "^  saved: sent [0-9.]+ [kMG]?B of [0-9.]+ [kMG]?B raw \([0-9.]+x less\), [0-9.]+[kM]? of [0-9.]+[kM]? floats, all ranks; [0-9.]+ [kMG]?B saved" default
has "$f" "^  step time: [0-9.]+ ms \(median over windows\)" default
has "$f" "scripts/demo.sh --link 100mbit" default
grep -q "^\\\$ .*/tools/bellows history runs --db .*/demo-sim-schedule-[0-9-]*\\.db$" "$f" ||
    fail "the history commands printed lack --db"
n=$(pasted "$f")
cp "$TMP/out/demo-history.db" "$TMP/first.db"
ok "demo --sim: decisions, sent of raw, step time; $n pasted commands work"

# SlimGC: the threshold and, per tensor, why it is sent raw.
demo --sim --with slimgc >"$TMP/slimgc.out" 2>&1 ||
    { tail -20 "$TMP/slimgc.out"; fail "demo --sim --with slimgc failed"; }
f=$TMP/slimgc.out
has "$f" "cttab: calibrate_steps 0 -> 20" slimgc
has "$f" "size_threshold 0 B -> all raw" slimgc
has "$f" "^  size threshold: all raw \(every tensor sent uncompressed\), from window [0-9]+: calibration 1 over at window [0-9]+: threshold infinity" slimgc
has "$f" "^  decided: [0-9]+ decisions by cttab \(slimgc\), levels \(fixed\)," slimgc
has "$f" "^    as the calibration measured it \(the sends up to window [0-9]+, after which the threshold was set" slimgc
has "$f" "^    layer6.weight \(20.5 kB\): raw send [0-9.]+ ms \([0-9]+ sends\), compressed send [0-9.]+ ms \([0-9]+\) \+ encode\+decode [0-9.]+ ms = [0-9.]+ ms: compressing is slower$" slimgc
grep -q "1.8446744073709552e+19" "$f" && fail "slimgc: a raw threshold number"
n=$(pasted "$f")
# Step time against another run's, when the summary is given one.
python3 "$SRC/scripts/demo_summary.py" --db "$TMP/out/demo-history.db" \
    --raw-db "$TMP/first.db" >"$TMP/vs.out" ||
    fail "demo_summary.py --raw-db failed"
grep -Eq "^  step time: [0-9.]+ ms \(median over windows\) against [0-9.]+ ms raw \([0-9.]+x (faster|slower)\)$" \
    "$TMP/vs.out" || fail "no step time against raw: $(cat "$TMP/vs.out")"
ok "demo --sim --with slimgc: all raw, with each tensor's send and codec ms; $n pasted commands work"

# perfmodel: the gate and its predicted step times.
demo --sim --with perfmodel >"$TMP/perfmodel.out" 2>&1 ||
    { tail -20 "$TMP/perfmodel.out"; fail "demo --sim --with perfmodel failed"; }
f=$TMP/perfmodel.out
has "$f" "perfmodel: compression off -> on" perfmodel
has "$f" "^  compression gate: (on|off) \(window [0-9]+\): predicted step [0-9.]+ ms raw against [0-9.]+ ms compressed" perfmodel
has "$f" "^    break-even link: [0-9.]+ Gbit/s" perfmodel
has "$f" "^    measured link: [0-9.]+ Gbit/s" perfmodel
n=$(pasted "$f")
ok "demo --sim --with perfmodel: the gate with predicted step times; $n pasted commands work"

# COMET: error bounds, activation bytes held against uncompressed.
demo --sim --with comet >"$TMP/comet.out" 2>&1 ||
    { tail -20 "$TMP/comet.out"; fail "demo --sim --with comet failed"; }
f=$TMP/comet.out
has "$f" "comet: layer0.weight error_bound 0 -> " comet
has "$f" "^  saved: nothing on gradients: sent [0-9.]+ [kMG]?B raw" comet
has "$f" "^  activations: held [0-9.]+ [kMG]?B per step for backward against [0-9.]+ [kMG]?B uncompressed \([0-9.]+x less\)" comet
n=$(pasted "$f")
ok "demo --sim --with comet: bounds and activation bytes held; $n pasted commands work"

# GComp: the bits per value its tables code, against float32's 32.
demo --sim --with gcomp >"$TMP/gcomp.out" 2>&1 ||
    { tail -20 "$TMP/gcomp.out"; fail "demo --sim --with gcomp failed"; }
f=$TMP/gcomp.out
has "$f" "tables: codec_table 0 -> " gcomp
has "$f" "^  GComp: [0-9.]+ bits per value against float32's 32 \([0-9.]+x less\) in the [0-9]+ tensors it codes" gcomp
n=$(pasted "$f")
ok "demo --sim --with gcomp: bits per value against 32; $n pasted commands work"

# Accordion on the sim: its example file and summary.
demo --sim --with accordion >"$TMP/accordion.out" 2>&1 ||
    { tail -20 "$TMP/accordion.out"; fail "demo --sim --with accordion failed"; }
has "$TMP/accordion.out" "^  decided: [0-9]+ decisions by accordion" accordion
has "$TMP/accordion.out" "^  saved: sent " accordion
ok "demo --sim --with accordion ends with its summary"

# Every demo keeps its own history; demo-history.db names the latest, and
# the summary offers `history compare` against the previous demo (run by
# pasted above, so it works).
n=$(find "$TMP/out" -name 'demo-sim-*.db' | wc -l)
[ "$n" -eq 6 ] || fail "$n history files kept after 6 demos"
[ "$(readlink "$TMP/out/demo-history.db")" = "$(basename "$(ls -t "$TMP"/out/demo-sim-accordion-*.db | head -1)")" ] ||
    fail "demo-history.db is not the latest demo's: $(readlink "$TMP/out/demo-history.db")"
has "$TMP/accordion.out" "^    .*/tools/bellows history compare --run .*/demo-sim-gcomp-[0-9-]+\.db:1 --run .*/demo-sim-accordion-[0-9-]+\.db:1$" accordion
ok "each demo keeps a history of its own, and its summary compares it with the previous one"

# --link: as root, a rate-limited namespace; otherwise a note.
if [ "$(id -u)" -ne 0 ]; then
	demo --sim --link 100mbit >"$TMP/link.out" 2>&1 ||
	    fail "demo --sim --link 100mbit failed without root"
	grep -q "needs root .* running on plain loopback instead" \
	    "$TMP/link.out" || fail "no note that --link needs root"
	ok "demo --link without root runs on plain loopback and says so"
elif ! ip netns list >/dev/null 2>&1; then
	ok "demo --link: no network namespaces here (skipped)"
else
	demo --sim --with slimgc --link 100mbit >"$TMP/link.out" 2>&1 ||
	    { tail -20 "$TMP/link.out"; fail "demo --sim --link 100mbit failed"; }
	grep -q "^demo: the job runs in network namespace bellows-demo-[0-9]*, its loopback limited to 100mbit" \
	    "$TMP/link.out" || fail "no namespace announced"
	has "$TMP/link.out" "on a 100mbit link\)" link
	has "$TMP/link.out" "compressing is faster" link
	ip netns list | grep -q "^bellows-demo-" &&
	    fail "the demo's namespace was left behind"
	ok "demo --sim --link 100mbit: in a namespace, compressing pays, namespace removed"
fi
exit 0
