/* watch - tells when a file has been rewritten on disk, once its writer is
 * done: inotify on the file's directory, bursts of events coalesced.
 *
 * The directory is watched, not the file, so that an editor that writes a
 * new file and renames it over the old one (a new inode) is seen as well
 * as one that writes in place. Events for other names in the directory are
 * ignored. A change is reported `settle_ms` after the last event of a
 * burst, so a writer's create, writes, close and rename give one report.
 */
#ifndef CTL_WATCH_H
#define CTL_WATCH_H

#include "loop.h"

#include <stdint.h>

typedef struct ctl_watch ctl_watch;

/* Called from the loop when the file changed and settled. */
typedef void ctl_watch_fn(void *arg);

/* Starts watching `path` (its directory must exist). Returns 0,
 * BELLOWS_EINVAL (no file name in path), BELLOWS_ESYS (inotify refused:
 * errno-style reason logged) or BELLOWS_ENOMEM; *ret_watch untouched on
 * failure. */
int ctl_watch_open(const char *path, uint32_t settle_ms, ctl_watch_fn *cb,
    void *arg, ctl_watch **ret_watch);

/* Same as ctl_watch_open for a whole directory: any name created,
 * written, renamed into, removed or renamed out of `dir` is a change.
 * Returns 0, BELLOWS_EINVAL (an empty or too long path), BELLOWS_ESYS or
 * BELLOWS_ENOMEM. */
int ctl_watch_open_dir(const char *dir, uint32_t settle_ms, ctl_watch_fn *cb,
    void *arg, ctl_watch **ret_watch);

/* Registers the watch's descriptor and its settle timer with `loop`. The
 * watch must stay open while the loop may run. Returns what
 * ctl_loop_add_fd or ctl_loop_add_timer returned. */
int ctl_watch_attach(ctl_watch *w, ctl_loop *loop);

/* Changes seen since the watch was opened (reports, not raw events). */
uint64_t ctl_watch_changes(const ctl_watch *w);

/* Stops watching and frees. NULL-safe, sets *w to NULL. */
void ctl_watch_close(ctl_watch **w);

#endif /* CTL_WATCH_H */
