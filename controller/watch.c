/* watch - inotify on a file's directory, debounced, see watch.h.
 *
 * The loop has periodic timers only, so the debounce is a deadline that a
 * short periodic timer checks: every matching event pushes the deadline
 * to now + settle_ms, and the timer reports once the deadline has passed.
 */
#include "watch.h"

#include "common/clock.h"
#include "policyhost/log.h"

#include <bellows/error.h>

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#define WATCH_EVENTS (IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE)
/* A whole directory also changes when a name leaves it. */
#define WATCH_DIR_EVENTS (WATCH_EVENTS | IN_DELETE | IN_MOVED_FROM)

struct ctl_watch {
	int fd;             /* inotify descriptor */
	char *dir;          /* directory watched */
	char *name;         /* file name within it, "": every name */
	uint32_t settle_ms; /* quiet time before reporting */
	bool pending;       /* a change waits for quiet */
	uint64_t due_ms;    /* report when the monotonic clock passes it */
	uint64_t changes;   /* reports made */
	ctl_watch_fn *cb;   /* what to call */
	void *arg;          /* its argument */
};

/* Opens a watch of `path`; one ending in '/' watches every name of the
 * directory. */
static int
watch_open(const char *path, uint32_t settle_ms, ctl_watch_fn *cb, void *arg,
    ctl_watch **ret_watch)
{
	const char *slash = strrchr(path, '/');
	ctl_watch *w;

	if (cb == NULL || path[0] == '\0')
		return BELLOWS_EINVAL;
	w = calloc(1, sizeof(*w));
	if (w == NULL)
		return BELLOWS_ENOMEM;
	w->fd = -1;
	w->settle_ms = settle_ms;
	w->cb = cb;
	w->arg = arg;
	if (slash == NULL) {
		w->dir = strdup(".");
		w->name = strdup(path);
	} else {
		/* "/bellows.yaml" lives in "/", not in "". */
		w->dir = strndup(path,
		    slash == path ? 1 : (size_t)(slash - path));
		w->name = strdup(slash + 1);
	}
	if (w->dir == NULL || w->name == NULL) {
		ctl_watch_close(&w);
		return BELLOWS_ENOMEM;
	}
	w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->fd < 0 ||
	    inotify_add_watch(w->fd, w->dir,
		w->name[0] == '\0' ? WATCH_DIR_EVENTS : WATCH_EVENTS) < 0) {
		ctl_log(CTL_LOG_WARN, "watch", "cannot watch '%s': %s", w->dir,
		    strerror(errno));
		ctl_watch_close(&w);
		return BELLOWS_ESYS;
	}
	*ret_watch = w;
	return 0;
}

int
ctl_watch_open(const char *path, uint32_t settle_ms, ctl_watch_fn *cb,
    void *arg, ctl_watch **ret_watch)
{
	const char *slash = strrchr(path, '/');

	if ((slash != NULL ? slash[1] : path[0]) == '\0')
		return BELLOWS_EINVAL;
	return watch_open(path, settle_ms, cb, arg, ret_watch);
}

int
ctl_watch_open_dir(const char *dir, uint32_t settle_ms, ctl_watch_fn *cb,
    void *arg, ctl_watch **ret_watch)
{
	char path[PATH_MAX];
	int n = snprintf(path, sizeof(path), "%s/", dir);

	if (dir[0] == '\0' || n < 0 || (size_t)n >= sizeof(path))
		return BELLOWS_EINVAL;
	return watch_open(path, settle_ms, cb, arg, ret_watch);
}

/* Drains the descriptor; a matching event (or a lost one: the queue
 * overflowed) moves the deadline. */
static void
watch_on_readable(ctl_loop *loop, void *arg)
{
	ctl_watch *w = arg;
	char buf[4096]
	    __attribute__((aligned(__alignof__(struct inotify_event))));
	bool hit = false;
	ssize_t n;

	while ((n = read(w->fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const void *)p;

			if ((ev->mask & IN_Q_OVERFLOW) ||
			    (ev->len > 0 &&
				(w->name[0] == '\0' ||
				    strcmp(ev->name, w->name) == 0)))
				hit = true;
			p += sizeof(*ev) + ev->len;
		}
	}
	if (hit) {
		w->pending = true;
		w->due_ms = com_clock_ms() + w->settle_ms;
	}
}

static void
watch_on_timer(ctl_loop *loop, uint64_t now_ms, void *arg)
{
	ctl_watch *w = arg;

	if (!w->pending || now_ms < w->due_ms)
		return;
	w->pending = false;
	w->changes++;
	w->cb(w->arg);
}

int
ctl_watch_attach(ctl_watch *w, ctl_loop *loop)
{
	/* A quarter of the settle time: the report comes between settle_ms
	 * and 1.25 settle_ms after the last event. */
	uint32_t period = w->settle_ms / 4 > 0 ? w->settle_ms / 4 : 1;
	int r;

	if ((r = ctl_loop_add_fd(loop, w->fd, watch_on_readable, w)) != 0)
		return r;
	return ctl_loop_add_timer(loop, period, watch_on_timer, w);
}

uint64_t
ctl_watch_changes(const ctl_watch *w)
{
	return w->changes;
}

void
ctl_watch_close(ctl_watch **w)
{
	if (w == NULL || *w == NULL)
		return;
	if ((*w)->fd >= 0)
		close((*w)->fd);
	free((*w)->dir);
	free((*w)->name);
	free(*w);
	*w = NULL;
}
