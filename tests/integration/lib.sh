# lib.sh - shared helpers of the integration tests: a real bellowsd on ipc
# endpoints in a private temporary directory, real `bellows sim` ranks.
# Sourced by the test scripts; every test prints what it checks.
set -u

BUILD=${BELLOWS_BUILD_ROOT:?run through meson test}
SRC=${BELLOWS_SOURCE_ROOT:?run through meson test}
BELLOWSD="$BUILD/controller/bellowsd"
BELLOWS="$BUILD/tools/bellows"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/bellows-it.XXXXXX")
CTL="ipc://$TMP/control"
PUB="ipc://$TMP/publish"
DAEMON_PID=""
DAEMON_STARTS=0

cleanup() {
	if [ -n "$DAEMON_PID" ]; then
		kill -TERM "$DAEMON_PID" 2>/dev/null
		wait "$DAEMON_PID" 2>/dev/null
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*"
	if [ -s "$TMP/sim.out" ] || [ -s "$TMP/sim.err" ]; then
		echo "---- sim stdout (last 15 lines) ----"
		tail -n 15 "$TMP/sim.out" 2>/dev/null
		echo "---- sim stderr (last 25 lines) ----"
		tail -n 25 "$TMP/sim.err" 2>/dev/null
	fi
	echo "---- bellowsd log (last 40 lines) ----"
	tail -n 40 "$TMP/bellowsd.log" 2>/dev/null
	exit 1
}

ok() {
	echo "ok: $*"
}

# write_config FILE [extra daemon lines]: a fast-timing schedule policy.
write_config() {
	cat >"$1" <<YAML
daemon:
  apply_lag: 1
  window_timeout_ms: ${WINDOW_TIMEOUT_MS:-3000}
  rank_timeout_ms: ${RANK_TIMEOUT_MS:-1500}
  heartbeat_ms: 200
jobs:
  - match: "*"
    policies:
      - type: schedule
        name: levels
        params:
          levels: {0: 2, 3: 1, 6: 4, 9: 1, 14: 2}
YAML
}

# start_daemon: starts bellowsd in the background and waits until it
# answers STATUS. Its history database is $DB when set (kept across
# restarts: a restart then recovers the jobs from it), else a new
# $TMP/bellows-N.db per start (a restart without history); $DAEMON_ARGS
# (e.g. --no-db) come last.
start_daemon() {
	[ -f "$TMP/policy.yaml" ] || write_config "$TMP/policy.yaml"
	DAEMON_STARTS=$((DAEMON_STARTS + 1))
	"$BELLOWSD" --control "$CTL" --publish "$PUB" \
	    --policy "$TMP/policy.yaml" --log-level info \
	    --db "${DB:-$TMP/bellows-$DAEMON_STARTS.db}" ${DAEMON_ARGS:-} \
	    >>"$TMP/bellowsd.log" 2>&1 &
	DAEMON_PID=$!
	for _ in $(seq 1 100); do
		if "$BELLOWS" status --control "$CTL" --timeout-ms 200 \
		    >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.05
	done
	fail "bellowsd did not answer STATUS within 5 s"
}

# kill_daemon SIGNAL: sends SIGNAL (TERM, INT or KILL) to bellowsd and
# waits for it; fails unless it exits 0 on TERM and INT (a clean shutdown)
# and dies of the signal on KILL.
kill_daemon() {
	local rc want=0

	kill "-$1" "$DAEMON_PID" 2>/dev/null ||
	    fail "cannot send SIG$1 to bellowsd: it is not running"
	wait "$DAEMON_PID"
	rc=$?
	DAEMON_PID=""
	[ "$1" = KILL ] && want=$((128 + 9))
	[ "$rc" -eq "$want" ] ||
	    fail "bellowsd exited with status $rc on SIG$1 (expected $want)"
}

# run_sim ARGS...: runs bellows sim against the daemon, output in
# $TMP/sim.out; returns its exit status.
run_sim() {
	"$BELLOWS" sim --control "$CTL" --publish "$PUB" --quiet "$@" \
	    >"$TMP/sim.out" 2>"$TMP/sim.err"
}

# expect_agreed RANKS WINDOWS: checks the sim's last line, "sim: ranks=N
# windows=W decisions=D of E expected agreed=yes", with D = E.
expect_agreed() {
	last=$(tail -n 1 "$TMP/sim.out")
	case "$last" in
	"sim: ranks=$1 windows=$2 decisions="*" of "*" expected agreed=yes")
		sim_counts "$last"
		[ "$SIM_D" -eq "$SIM_E" ] ||
		    fail "sim agreed with $SIM_D of $SIM_E decisions: '$last'"
		;;
	*)
		echo "---- sim stdout ----"
		tail -n 20 "$TMP/sim.out"
		echo "---- sim stderr ----"
		tail -n 20 "$TMP/sim.err"
		fail "sim did not agree: '$last'"
		;;
	esac
	ok "$last"
}

# sim_counts LINE: sets SIM_D and SIM_E from a sim's last line.
sim_counts() {
	SIM_D=$(echo "$1" | sed -n 's/.* decisions=\([0-9]*\) of .*/\1/p')
	SIM_E=$(echo "$1" | sed -n 's/.* decisions=[0-9]* of \([0-9]*\) expected .*/\1/p')
	[ -n "$SIM_D" ] && [ -n "$SIM_E" ] ||
	    fail "no 'decisions=D of E expected' in the sim's line '$1'"
}

# expect_not_agreed RANKS WINDOWS STATUS: checks that the sim exited with
# STATUS 1 and that its last line says agreed=no with fewer decisions than
# expected (D < E); sets SIM_D and SIM_E.
expect_not_agreed() {
	last=$(tail -n 1 "$TMP/sim.out")
	[ "$3" -eq 1 ] || fail "sim exited with $3, expected 1: '$last'"
	case "$last" in
	"sim: ranks=$1 windows=$2 decisions="*" of "*" expected agreed=no") ;;
	*) fail "sim did not say agreed=no: '$last'" ;;
	esac
	sim_counts "$last"
	[ "$SIM_D" -lt "$SIM_E" ] ||
	    fail "sim failed but applied $SIM_D of $SIM_E decisions: '$last'"
	ok "$last (exit 1)"
}

# free_port: a TCP port on 127.0.0.1 that nothing listens on now.
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# daemon_kb FIELD: bellowsd's FIELD (VmRSS, VmHWM) from /proc, in kB.
daemon_kb() {
	awk -v f="$1:" '$1 == f { print $2 }' "/proc/$DAEMON_PID/status"
}

# daemon_sanitized: true when bellowsd is built with AddressSanitizer,
# whose quarantine and shadow memory make its RSS no measure of what it
# holds.
daemon_sanitized() {
	ldd "$BELLOWSD" 2>/dev/null | grep -q libasan
}
