/* source - where `bellows top` gets its snapshots: bellowsd or a file.
 *
 * Live, a source asks bellowsd for STATUS over the control socket (ranks,
 * health, events, the store's state), subscribes to every job's telemetry
 * on the publish socket (a window closed: time to look again) and reads
 * the per-layer rows (levels, norms, decisions) from the history database
 * bellowsd writes, read-only through client/historydb: the file given,
 * else the one STATUS names when this machine can read it. The rates
 * (reports/s, decisions/s) are over the last DASH_RATE_SPAN_MS of
 * STATUS replies (rate.h). A daemon that stops
 * answering is reported in the snapshot and asked again on the next fetch
 * with a fresh socket, so it is picked up again when it comes back.
 * Offline, a source reads a recorded history only, at any window of a
 * run. The sockets are the client library's (client/client.h): the
 * dashboard includes no <zmq.h>. Used from one thread.
 */
#ifndef DASH_SOURCE_H
#define DASH_SOURCE_H

#include "client/client.h"
#include "model.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct dash_source dash_source;

typedef struct dash_source_opts {
	const char *control;   /* bellowsd's ROUTER; NULL = offline */
	const char *publish;   /* bellowsd's PUB (live only) */
	const char *db;        /* history database; NULL: offline
				* "bellows.db", live the file bellowsd's
				* STATUS names when readable here, else
				* "bellows.db" */
	const tool_keys *keys; /* CURVE keys of both sockets; NULL: none */
} dash_source_opts;

/* Opens a source. Live: creates the sockets (the daemon need not be up).
 * Offline: opens the database, which must exist. Returns 0 and *ret (the
 * caller's, dash_source_close), BELLOWS_EINVAL (an endpoint ZeroMQ
 * refuses), BELLOWS_ESYS, BELLOWS_ENOMEM, or what tool_hdb_open returns
 * for an offline database, with errbuf saying why. */
int dash_source_open(const dash_source_opts *o, dash_source **ret, char *errbuf,
    size_t errlen);

/* Closes everything. NULL-safe, sets *s to NULL. */
void dash_source_close(dash_source **s);

/* Reads a snapshot into *ret (zeroed first; the caller's, to
 * dash_snapshot_fini): every job, and the ranks, layers, decisions and
 * events of job `job` ("" = the first job; offline "name#run" picks an
 * older run) at window `window` (offline; DASH_NONE = the latest). An
 * unreachable daemon or an unreadable database is not an error: the
 * snapshot says so. Returns 0 or BELLOWS_ENOMEM. */
int dash_source_fetch(dash_source *s, const char *job, int64_t window,
    dash_snapshot *ret);

/* Whether fetches read every decision (true) or only those that changed
 * a knob (false, the default). */
void dash_source_all_decisions(dash_source *s, bool all);

/* Waits up to timeout_ms for telemetry or for `fd` (-1: none) to be
 * readable. Sets *ret_fd when fd is readable and *ret_telemetry when a
 * window closed (the telemetry is consumed). Returns 0 (also when a
 * signal interrupted the wait) or BELLOWS_EIO. */
int dash_source_wait(dash_source *s, int fd, int timeout_ms, bool *ret_fd,
    bool *ret_telemetry);

#endif /* DASH_SOURCE_H */
