#!/usr/bin/env bash
# A new history database is created at the current schema in one step:
# bellowsd's first start on a fresh file logs "created schema version N"
# and no migration or added column; an old file (the version 5 fixture a
# bellowsd of that version wrote) still migrates, logging each step, and
# both end with the same schema, table for table.
. "$(dirname "$0")/lib.sh"

DB="$TMP/fresh.db"
start_daemon
kill_daemon TERM
created=$(grep -c "created schema version" "$TMP/bellowsd.log")
migrated=$(grep -c "migrated schema version\|added column" "$TMP/bellowsd.log")
[ "$created" = 1 ] || fail "a fresh file: $created 'created schema' lines"
[ "$migrated" = 0 ] || fail "a fresh file logs $migrated migration lines"
version=$(sqlite3 "$DB" "PRAGMA user_version")
grep -q "created schema version $version\$" "$TMP/bellowsd.log" ||
    fail "created a version other than the file's $version"
ok "a fresh file is created at schema version $version in one log line, no migration"

cp "$SRC/tests/fixtures/history-v5.db" "$TMP/old.db"
: >"$TMP/bellowsd.log"
DB="$TMP/old.db"
start_daemon
kill_daemon TERM
steps=$(grep -c "migrated schema version" "$TMP/bellowsd.log")
[ "$steps" -ge 1 ] || fail "the version 5 file was not migrated"
[ "$(sqlite3 "$DB" "PRAGMA user_version")" = "$version" ] ||
    fail "the version 5 file ends at $(sqlite3 "$DB" "PRAGMA user_version"), not $version"
ok "the version 5 fixture still migrates ($steps steps) to version $version"

schema() {
	sqlite3 "$1" "SELECT type, name, sql FROM sqlite_master
	    WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name"
}
schema "$TMP/fresh.db" >"$TMP/fresh.schema"
schema "$TMP/old.db" >"$TMP/old.schema"
diff "$TMP/old.schema" "$TMP/fresh.schema" >"$TMP/schema.diff" ||
    fail "a fresh file and a migrated one differ: $(head -20 "$TMP/schema.diff")"
ok "the fresh and the migrated file have the same $(wc -l <"$TMP/fresh.schema") schema objects"
