/* historydb_int - what the history database's two files share, private
 * to client/: the connection behind a tool_hdb and the way both report a
 * failure into it. historydb.c owns opening, the views and the named
 * questions; historydb_replay.c owns loading a run as replay input.
 */
#ifndef BELLOWS_CLIENT_HISTORYDB_INT_H
#define BELLOWS_CLIENT_HISTORYDB_INT_H

#include "historydb.h"

#include <sqlite3.h>

struct tool_hdb {
	sqlite3 *db;                /* read-only connection */
	int version;                /* PRAGMA user_version */
	char err[TOOL_HDB_ERR_MAX]; /* last failure */
};

/* Formats the message of a failure into db's error buffer (what
 * tool_hdb_error() returns) and returns `code`, so a caller can write
 * `return tool_hdb_fail(db, BELLOWS_EIO, ...)`. db is borrowed; not
 * thread-safe (the handle's thread only). Returns `code` unchanged. */
__attribute__((format(printf, 3, 4))) int tool_hdb_fail(tool_hdb *db, int code,
    const char *fmt, ...);

/* Maps SQLite's result code `rc` to ours and records SQLite's message
 * in db's error buffer. db is borrowed; the handle's thread only.
 * Returns BELLOWS_ENOMEM (SQLITE_NOMEM), BELLOWS_EBUSY (the database
 * stayed locked past TOOL_HDB_BUSY_MS) or BELLOWS_EIO (anything else). */
int tool_hdb_sqlite_fail(tool_hdb *db, int rc);

#endif
