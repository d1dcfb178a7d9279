#!/usr/bin/env bash
# Under journald (JOURNAL_STREAM naming bellowsd's stderr, as systemd sets
# it) bellowsd's lines carry no timestamp of their own but the syslog
# priority journald reads ("<6>info main: ..."); with JOURNAL_STREAM
# naming another file, or unset, every line starts with its UTC time.
. "$(dirname "$0")/lib.sh"

write_config "$TMP/policy.yaml"
LOG="$TMP/journal.log"

# run_daemon JOURNAL_STREAM: bellowsd started and stopped with stderr on
# $LOG and the variable set to the given value ("" unsets it).
run_daemon() {
	: >"$LOG"
	if [ -n "$1" ]; then
		JOURNAL_STREAM=$1 "$BELLOWSD" --control "$CTL" --publish "$PUB" \
		    --policy "$TMP/policy.yaml" --no-db 2>>"$LOG" &
	else
		env -u JOURNAL_STREAM "$BELLOWSD" --control "$CTL" \
		    --publish "$PUB" --policy "$TMP/policy.yaml" --no-db \
		    2>>"$LOG" &
	fi
	DAEMON_PID=$!
	for _ in $(seq 1 100); do
		"$BELLOWS" status --control "$CTL" --timeout-ms 200 \
		    >/dev/null 2>&1 && break
		sleep 0.05
	done
	kill_daemon TERM
}

: >"$LOG"
stream=$(python3 -c 'import os, sys; s = os.stat(sys.argv[1]); print("%d:%d" % (s.st_dev, s.st_ino))' "$LOG")
run_daemon "$stream"
[ -s "$LOG" ] || fail "bellowsd logged nothing"
grep -q '^<6>info  main: bellowsd ' "$LOG" ||
    fail "no '<6>info  main: bellowsd ...' line under journald: $(head -n 3 "$LOG")"
grep -q '^<4>warn  main: --no-db' "$LOG" ||
    fail "the --no-db warning is not at priority 4: $(head -n 3 "$LOG")"
grep -vq '^<[0-7]>' "$LOG" &&
    fail "a line without its priority under journald: $(grep -v '^<[0-7]>' "$LOG" | head -n 1)"
grep -Eq '[0-9]{4}-[0-9]{2}-[0-9]{2}T' "$LOG" &&
    fail "a timestamp under journald: $(head -n 1 "$LOG")"
ok "under journald: $(head -n 1 "$LOG")"

run_daemon "1:1"
grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z info  main: bellowsd ' "$LOG" ||
    fail "JOURNAL_STREAM naming another file dropped the timestamp: $(head -n 1 "$LOG")"
ok "JOURNAL_STREAM of another stream: $(head -n 1 "$LOG")"

run_daemon ""
grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z info  main: bellowsd ' "$LOG" ||
    fail "no timestamp without JOURNAL_STREAM: $(head -n 1 "$LOG")"
ok "without JOURNAL_STREAM: $(head -n 1 "$LOG")"
