#!/usr/bin/env bash
# The man pages bellowsd(8), bellows(1) and bellows-policy(5) render with
# groff -man and man -l without a warning, each with its NAME, SYNOPSIS
# and SEE ALSO; every bellows subcommand `bellows help` lists has its
# entry in bellows(1), and every bellowsd option in bellowsd(8).
. "$(dirname "$0")/lib.sh"

command -v groff >/dev/null || {
	echo "SKIP: groff not installed"
	exit 77
}
for page in bellowsd.8 bellows.1 bellows-policy.5; do
	f="$SRC/man/$page"
	[ -f "$f" ] || fail "man/$page missing"
	groff -man -Tutf8 -ww -z "$f" 2>"$TMP/warn" ||
	    fail "groff failed on $page: $(cat "$TMP/warn")"
	[ ! -s "$TMP/warn" ] || fail "groff warns on $page: $(cat "$TMP/warn")"
	if command -v man >/dev/null; then
		LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$f" \
		    >"$TMP/out" 2>"$TMP/warn" || fail "man -l $page failed"
		[ ! -s "$TMP/warn" ] ||
		    fail "man -l warns on $page: $(cat "$TMP/warn")"
	else
		groff -man -Tutf8 "$f" >"$TMP/out" 2>/dev/null
	fi
	for s in NAME SYNOPSIS "SEE ALSO"; do
		grep -q "^$s" "$TMP/out" || fail "$page has no $s section"
	done
	ok "$page renders without warnings ($(wc -l <"$TMP/out") lines)"
	cp "$TMP/out" "$TMP/$page.txt"
done

cmds=$("$BELLOWS" help | sed -n '/^commands:/,/^$/s/^  \([a-z]\+\) .*/\1/p')
[ -n "$cmds" ] || fail "bellows help lists no commands"
for c in $cmds; do
	grep -Eq "^ {7}$c( |$)" "$TMP/bellows.1.txt" ||
	    fail "bellows(1) has no entry for '$c', which bellows help lists"
done
ok "bellows(1) describes every command bellows help lists: $(echo $cmds)"
opts=$("$BELLOWSD" --help | sed -n 's/^  \(--[a-z-]\+\).*/\1/p')
for o in $opts; do
	grep -q -- "$o" "$TMP/bellowsd.8.txt" ||
	    fail "bellowsd(8) does not describe $o"
done
ok "bellowsd(8) describes every option of bellowsd --help: $(echo $opts)"
