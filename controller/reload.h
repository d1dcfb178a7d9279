/* reload - the configuration bellowsd runs with, and replacing it while
 * jobs run, on request (SIGHUP) or when the file changes on disk.
 *
 * A new file is parsed and validated completely, plug-ins included, and
 * every job's new policies are prepared before anything changes
 * (ctl_jobs_reload); on any error the running configuration stays in
 * force and the refusal is logged and recorded as one reload_refused
 * event. An invalid file has every error logged (FILE:LINE:COLUMN:, as
 * `bellows policy check` prints them) and the event holds the first,
 * followed by " (and N more)" when there are more. After a reload no job
 * borrows the configuration it replaced, so that one is freed at once;
 * plug-ins it shares with the new one stay loaded through the new one's
 * references.
 */
#ifndef CTL_RELOAD_H
#define CTL_RELOAD_H

#include "policyhost/config.h"
#include "jobs.h"
#include "loop.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct ctl_reload ctl_reload;

typedef struct ctl_reload_counters {
	uint64_t done;      /* reloads that took effect */
	uint64_t refused;   /* reloads refused: the old file stayed */
	uint64_t unchanged; /* file changes that left the text as it was */
	uint64_t abandoned; /* readings given up after reload_timeout_ms
			     * (also counted in refused) */
	uint64_t coalesced; /* requests folded into a reading to come */
} ctl_reload_counters;

/* Takes over *cfg, loaded from `path`, as the configuration in force
 * (*cfg is set to NULL); `jobs` is borrowed and must run with *cfg. The
 * table must be destroyed before the reload object, since its jobs borrow
 * the configuration. Returns 0 or BELLOWS_ENOMEM (then *cfg is left to
 * the caller). */
int ctl_reload_new(const char *path, ctl_config **cfg, ctl_jobs *jobs,
    ctl_reload **ret_reload);

/* Frees the configuration in force and the object. A reader thread is
 * told to stop (a reading it has out is cancelled) and joined, and what it
 * hands back is freed. Must run before zmq_ctx_term of the context given
 * to ctl_reload_attach. NULL-safe. */
void ctl_reload_destroy(ctl_reload **r);

/* Starts the reader thread (with an inproc PAIR socket of `zctx`) and
 * registers its socket and a deadline timer with `loop` (borrowed; must
 * stay until ctl_reload_destroy, and no reading is taken from the socket
 * after the loop stops running). From then on ctl_reload_request and
 * ctl_reload_on_change read off the loop. Returns 0, BELLOWS_ESTATE when
 * already attached, BELLOWS_ESYS (socket or thread) or an error of
 * ctl_loop_add_socket / ctl_loop_add_timer; on failure no thread runs,
 * requests are served on the calling thread as before, and attach must
 * not be called again. */
int ctl_reload_attach(ctl_reload *r, void *zctx, ctl_loop *loop);

/* Asks for a reload: with a reader thread (ctl_reload_attach) the file is
 * read off the loop and put in force (or refused) from the loop later;
 * while a reading is out the request waits for it and coalesces with any
 * other that waits. Without one, ctl_reload_now(r, force). */
void ctl_reload_request(ctl_reload *r, bool force);

/* True while a reading is out on the reader thread (abandoned or not)
 * or a request waits for one. */
bool ctl_reload_busy(const ctl_reload *r);

/* The configuration in force (borrowed; replaced by a reload). */
const ctl_config *ctl_reload_config(const ctl_reload *r);

/* Reads the file again on the calling thread and, if valid, puts it in
 * force (what bellowsd's reader thread does, without a deadline). Without
 * `force` a text identical to the one in force is left alone (an editor saving
 * an unchanged file). Returns 0, or the error that kept the old
 * configuration: BELLOWS_EIO, BELLOWS_ECONFIG, BELLOWS_ENOMEM, or the
 * error of a policy that could not start. */
int ctl_reload_now(ctl_reload *r, bool force);

/* ctl_watch_fn: the file changed on disk; ctl_reload_request(r, false). */
void ctl_reload_on_change(void *r);

/* Copies the counters into *ret. */
void ctl_reload_get_counters(const ctl_reload *r, ctl_reload_counters *ret);

#endif /* CTL_RELOAD_H */
