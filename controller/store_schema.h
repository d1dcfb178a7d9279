/* store_schema - the history's schema as bellowsd makes it, for code
 * outside the store that makes history files: tests, and tools that
 * write a history of their own. Within the store, store_schema.c also
 * opens the writer's connection (store_int.h).
 *
 * Every file of schema version V is made the same way: version 1's DDL,
 * then the numbered migrations up to V, then (at the current version)
 * the statistic columns of the statistics table the file lacks, so a
 * file made here is the file bellowsd would have made or migrated.
 */
#ifndef CTL_STORE_SCHEMA_H
#define CTL_STORE_SCHEMA_H

#include <sqlite3.h>

#include <stddef.h>

/* Brings the database `db` (empty, or of an earlier version) to schema
 * `version` (1 .. CTL_STORE_SCHEMA_VERSION), one transaction per step,
 * as bellowsd migrates a file; rows already there are kept. On the
 * caller's thread; `db` stays the caller's. Returns 0, BELLOWS_EINVAL
 * for a version out of range, or BELLOWS_EIO (a newer file, a file that
 * is not a bellows history, an SQLite failure) with err saying why. */
int ctl_store_schema_make(sqlite3 *db, int version, char *err, size_t errlen);

#endif /* CTL_STORE_SCHEMA_H */
