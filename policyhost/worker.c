/* worker - plug-in worker processes seen from bellowsd, see worker.h.
 *
 * A worker is spawned with posix_spawn (no fork of the daemon's threads
 * and sockets): its end of the socketpair becomes fd 3, its signal mask
 * and the daemon's blocked or ignored signals are reset, and it gets its
 * own process group, so a terminal's ^C reaches bellowsd, which then
 * stops its workers. The worker dies with bellowsd (PR_SET_PDEATHSIG, and
 * EOF on its socket); the death signal follows the thread that spawned
 * it, which is why serving workers are started by calls (the event
 * loop's thread) and the load and check children are waited for by the
 * thread that started them.
 *
 * The process is waited for through a pidfd where the kernel has them, so
 * telling "it crashed" from "it closed its socket and went on" never
 * blocks for long: a worker that is not gone shortly after EOF is killed.
 */
#include "worker.h"

#include "common/clock.h"
#include "log.h"
#include "plugin_wire.h"

#include "bellows_config.h"

#include <bellows/error.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define WORKER_EXIT_GRACE_MS 250 /* after EOF, before it is killed */

extern char **environ;

struct ctl_worker {
	ctl_worker *next;     /* registry list */
	unsigned refs;        /* holders; killed and freed at zero */
	char *path;           /* canonical path of the plug-in */
	int pid;              /* running process, 0 when none */
	int fd;               /* our end of the socketpair, -1 when none */
	int pidfd;            /* pidfd of pid, -1 when none or unsupported */
	bool hello_due;       /* the process has not said hello yet */
	uint64_t generation;  /* processes started */
	uint64_t failures;    /* calls failed in the worker, ever */
	uint32_t in_a_row;    /* failures since the last good on_window */
	uint64_t restart_at;  /* down until this monotonic ms */
	uint32_t next_id;     /* instance ids handed out, this generation */
	ctl_pwire_buf out;    /* request being sent */
	uint8_t *in;          /* reply payload */
	size_t in_cap;        /* bytes allocated at in */
	size_t in_len;        /* bytes of the last reply's payload */
	pthread_mutex_t lock; /* held through each call: the loop and a
			       * resume's thread may call one worker */
};

static pthread_mutex_t worker_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static ctl_worker *worker_registry;
static uint32_t worker_timeout_ms = CTL_WORKER_TIMEOUT_MS;
static uint32_t worker_memory_mb = CTL_WORKER_MEMORY_MB;
static ctl_worker_fault_fn *worker_fault_fn;
static void *worker_fault_arg;
static _Thread_local bool worker_faults_muted; /* this thread: log only */

void
ctl_worker_set_limits(uint32_t timeout_ms, uint32_t memory_mb)
{
	worker_timeout_ms = timeout_ms > 0 ? timeout_ms : CTL_WORKER_TIMEOUT_MS;
	worker_memory_mb = memory_mb > 0 ? memory_mb : CTL_WORKER_MEMORY_MB;
}

void
ctl_worker_set_fault_fn(ctl_worker_fault_fn *fn, void *arg)
{
	worker_fault_fn = fn;
	worker_fault_arg = arg;
}

void
ctl_worker_mute_faults(bool mute)
{
	worker_faults_muted = mute;
}

void *
ctl_worker_fault_arg(void)
{
	return worker_fault_arg;
}

/* The worker executable: $BELLOWS_PLUGIN_WORKER, else the one next to
 * this program (a build tree, or a bindir holding both), else the
 * installed one in libexec. */
static const char *
worker_exe(void)
{
	static char found[PATH_MAX];
	const char *env = getenv("BELLOWS_PLUGIN_WORKER");
	char self[PATH_MAX];
	ssize_t n;
	char *slash;

	if (env != NULL && env[0] != '\0')
		return env;
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		slash = strrchr(self, '/');
		if (slash != NULL) {
			*slash = '\0';
			if (snprintf(found, sizeof(found), "%s/%s", self,
				CTL_WORKER_EXE) < (int)sizeof(found) &&
			    access(found, X_OK) == 0)
				return found;
		}
	}
	snprintf(found, sizeof(found), "%s/%s", BELLOWS_LIBEXECDIR,
	    CTL_WORKER_EXE);
	return found;
}

/* Describes a wait status: "was killed by signal 11 (Segmentation
 * fault)" or "exited with status 1". */
static void
worker_describe(int status, char *buf, size_t len)
{
	if (WIFSIGNALED(status))
		snprintf(buf, len, "was killed by signal %d (%s)",
		    WTERMSIG(status), strsignal(WTERMSIG(status)));
	else if (WIFEXITED(status) &&
	    WEXITSTATUS(status) == CTL_PWIRE_EXIT_REFUSED)
		snprintf(buf, len,
		    "could not load the plug-in (status %d; its message is in "
		    "bellowsd's standard error)",
		    WEXITSTATUS(status));
	else if (WIFEXITED(status) &&
	    WEXITSTATUS(status) == CTL_PWIRE_EXIT_NOMEM)
		snprintf(buf, len, "ran out of memory itself (status %d)",
		    WEXITSTATUS(status));
	else if (WIFEXITED(status))
		snprintf(buf, len, "exited with status %d",
		    WEXITSTATUS(status));
	else
		snprintf(buf, len, "ended (status %#x)", (unsigned)status);
}

static int
worker_pidfd(int pid)
{
#ifdef SYS_pidfd_open
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (fd >= 0)
		fcntl(fd, F_SETFD, FD_CLOEXEC);
	return fd;
#else
	(void)pid;
	return -1;
#endif
}

/* Waits at most wait_ms for pid (pidfd, or -1) to end; kills it if it
 * has not; reaps it. Returns its wait status. */
static int
worker_reap(int pid, int pidfd, uint32_t wait_ms)
{
	int status = 0;
	pid_t r;

	if (pidfd >= 0 && wait_ms > 0) {
		struct pollfd p = { .fd = pidfd, .events = POLLIN };

		while (poll(&p, 1, (int)wait_ms) < 0 && errno == EINTR)
			;
	}
	r = waitpid(pid, &status, WNOHANG);
	if (r == pid)
		return status;
	kill(pid, SIGKILL);
	while ((r = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
		;
	return status;
}

/* posix_spawn of the worker with `args` (after argv[0]); `fd3` becomes
 * its fd 3 (-1: none). Returns 0 with *ret_pid, or an errno. */
static int
worker_spawn_exe(const char *const *args, int fd3, pid_t *ret_pid)
{
	const char *exe = worker_exe();
	const char *argv[8];
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, dfl;
	size_t n = 0;
	int err;

	argv[n++] = exe;
	for (size_t i = 0; args[i] != NULL && n < 7; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	sigemptyset(&none);
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGPIPE);
	sigaddset(&dfl, SIGINT);
	sigaddset(&dfl, SIGTERM);
	sigaddset(&dfl, SIGHUP);
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&attr);
	if (fd3 >= 0)
		posix_spawn_file_actions_adddup2(&fa, fd3, 3);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &dfl);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setflags(&attr,
	    POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
		POSIX_SPAWN_SETPGROUP);
	err = posix_spawn(ret_pid, exe, &fa, &attr, (char *const *)argv,
	    environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	return err;
}

/* Spawns the worker in `mode` for `path` with one end of a new
 * socketpair as its fd 3; *ret_fd gets the other (non-blocking). Returns
 * 0 or an errno. */
static int
worker_spawn_paired(const char *mode, const char *path, int *ret_fd,
    pid_t *ret_pid)
{
	char mem[16];
	const char *args[] = { mode, path, "--memory-mb", mem, NULL };
	int sv[2], fd3, err;

	snprintf(mem, sizeof(mem), "%" PRIu32, worker_memory_mb);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return errno;
	/* dup2 onto itself would keep FD_CLOEXEC: move it above 3 first. */
	fd3 = fcntl(sv[1], F_DUPFD_CLOEXEC, 4);
	err = fd3 < 0 ? errno : worker_spawn_exe(args, fd3, ret_pid);
	close(sv[1]);
	if (fd3 >= 0)
		close(fd3);
	if (err != 0) {
		close(sv[0]);
		return err;
	}
	fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
	*ret_fd = sv[0];
	return 0;
}

int
ctl_worker_probe(const char *path, char *errbuf, size_t errlen)
{
	char mem[16], how[128];
	const char *args[] = { "--probe", path, "--memory-mb", mem, NULL };
	int err, pidfd, status;
	uint64_t until;
	pid_t pid;

	snprintf(mem, sizeof(mem), "%" PRIu32, worker_memory_mb);
	err = worker_spawn_exe(args, -1, &pid);
	if (err != 0) {
		snprintf(errbuf, errlen,
		    "plugin '%s' cannot be checked: the plug-in worker '%s' "
		    "cannot be started: %s (set BELLOWS_PLUGIN_WORKER)",
		    path, worker_exe(), strerror(err));
		return BELLOWS_EIO;
	}
	pidfd = worker_pidfd(pid);
	until = com_clock_ms() + CTL_WORKER_PROBE_MS;
	for (;;) {
		uint64_t now = com_clock_ms();
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			break;
		if (now >= until) {
			status = worker_reap(pid, -1, 0);
			if (pidfd >= 0)
				close(pidfd);
			snprintf(errbuf, errlen,
			    "plugin '%s' did not finish loading within %d ms "
			    "(it was killed)",
			    path, CTL_WORKER_PROBE_MS);
			return BELLOWS_EIO;
		}
		if (pidfd >= 0) {
			struct pollfd p = { .fd = pidfd, .events = POLLIN };

			poll(&p, 1, (int)(until - now));
		} else {
			poll(NULL, 0, 5); /* no pidfd: look again soon */
		}
	}
	if (pidfd >= 0)
		close(pidfd);
	if (WIFEXITED(status) &&
	    (WEXITSTATUS(status) == 0 ||
		WEXITSTATUS(status) == CTL_PWIRE_EXIT_REFUSED))
		return 0;
	worker_describe(status, how, sizeof(how));
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
		snprintf(errbuf, errlen,
		    "plugin '%s' cannot be checked: the plug-in worker '%s' "
		    "cannot run (set BELLOWS_PLUGIN_WORKER)",
		    path, worker_exe());
	else
		snprintf(errbuf, errlen,
		    "plugin '%s' crashed while loading: the checking process "
		    "%s",
		    path, how);
	return BELLOWS_EIO;
}

int
ctl_worker_get(const char *path, ctl_worker **ret_worker)
{
	ctl_worker *w;

	pthread_mutex_lock(&worker_registry_lock);
	for (w = worker_registry; w != NULL; w = w->next) {
		if (strcmp(w->path, path) == 0) {
			w->refs++;
			pthread_mutex_unlock(&worker_registry_lock);
			*ret_worker = w;
			return 0;
		}
	}
	w = calloc(1, sizeof(*w));
	if (w == NULL || (w->path = strdup(path)) == NULL) {
		pthread_mutex_unlock(&worker_registry_lock);
		free(w);
		return BELLOWS_ENOMEM;
	}
	w->refs = 1;
	w->fd = -1;
	w->pidfd = -1;
	pthread_mutex_init(&w->lock, NULL);
	w->next = worker_registry;
	worker_registry = w;
	pthread_mutex_unlock(&worker_registry_lock);
	*ret_worker = w;
	return 0;
}

/* Ends the running process (if any) and forgets it; returns its wait
 * status (0 when there was none). */
static int
worker_stop(ctl_worker *w, uint32_t grace_ms)
{
	int status = 0;

	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	if (w->pid > 0)
		status = worker_reap(w->pid, w->pidfd, grace_ms);
	if (w->pidfd >= 0)
		close(w->pidfd);
	w->pidfd = -1;
	w->pid = 0;
	return status;
}

void
ctl_worker_put(ctl_worker **w)
{
	ctl_worker *wk, **link;

	if (w == NULL || *w == NULL)
		return;
	wk = *w;
	*w = NULL;
	pthread_mutex_lock(&worker_registry_lock);
	if (--wk->refs > 0) {
		pthread_mutex_unlock(&worker_registry_lock);
		return;
	}
	for (link = &worker_registry; *link != NULL; link = &(*link)->next) {
		if (*link == wk) {
			*link = wk->next;
			break;
		}
	}
	pthread_mutex_unlock(&worker_registry_lock);
	worker_stop(wk, 0);
	pthread_mutex_destroy(&wk->lock);
	ctl_pwire_buf_fini(&wk->out);
	free(wk->in);
	free(wk->path);
	free(wk);
}

bool
ctl_worker_current(const ctl_worker *w, uint64_t gen)
{
	return w->pid > 0 && gen == w->generation;
}

void
ctl_worker_get_info(const ctl_worker *w, ctl_worker_info *ret)
{
	*ret = (ctl_worker_info){
		.pid = w->pid,
		.generation = w->generation,
		.failures = w->failures,
		.in_a_row = w->in_a_row,
		.restart_at = w->restart_at,
	};
}

void
ctl_worker_report(const char *kind, const char *job, const char *fmt, ...)
{
	char text[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	ctl_log(strcmp(kind, CTL_WORKER_FAULT_FAILED) == 0 ? CTL_LOG_ERROR
							   : CTL_LOG_WARN,
	    "plugin", "%s%s%s%s", job != NULL ? "job '" : "",
	    job != NULL ? job : "", job != NULL ? "': " : "", text);
	if (worker_fault_fn != NULL && !worker_faults_muted)
		worker_fault_fn(worker_fault_arg, kind, job, text);
}

/* Starts the process when there is none and the backoff has passed.
 * Returns 0, BELLOWS_EAGAIN (still backing off), or BELLOWS_ECLOSED when
 * it cannot be started (reported, and counted as a failure). */
static int worker_fail(ctl_worker *w, const char *job, const char *policy,
    const char *call, int why);

static int
worker_start(ctl_worker *w, const char *job, const char *policy)
{
	int fd, err;
	pid_t pid;

	if (w->pid > 0)
		return 0;
	if (com_clock_ms() < w->restart_at)
		return BELLOWS_EAGAIN;
	if ((err = worker_spawn_paired("--serve", w->path, &fd, &pid)) != 0) {
		ctl_log(CTL_LOG_ERROR, "plugin",
		    "cannot start the plug-in worker '%s': %s", worker_exe(),
		    strerror(err));
		return worker_fail(w, job, policy, "start", BELLOWS_ESYS);
	}
	w->fd = fd;
	w->pid = pid;
	w->pidfd = worker_pidfd(pid);
	w->hello_due = true;
	w->next_id = 0;
	w->generation++;
	if (w->generation > 1)
		ctl_worker_report(CTL_WORKER_FAULT_RESTARTED, job,
		    "plug-in '%s' worker started again (pid %d, start %" PRIu64
		    "); its policy instances start again from init",
		    w->path, (int)pid, w->generation);
	return 0;
}

/* After a failed call: kills the process, reports why, schedules the
 * restart. Returns `why`, except BELLOWS_ECLOSED for BELLOWS_ENOMEM (a
 * policy that ran out of memory in the worker: the process goes, so that
 * the memory does). */
static int
worker_fail(ctl_worker *w, const char *job, const char *policy,
    const char *call, int why)
{
	char how[160] = "could not be started";
	uint64_t backoff;
	int status;

	w->failures++;
	w->in_a_row++;
	backoff = CTL_WORKER_BACKOFF_MIN_MS;
	for (uint32_t i = 1;
	     i < w->in_a_row && backoff < CTL_WORKER_BACKOFF_MAX_MS; i++)
		backoff *= 2;
	if (backoff > CTL_WORKER_BACKOFF_MAX_MS)
		backoff = CTL_WORKER_BACKOFF_MAX_MS;
	w->restart_at = com_clock_ms() + backoff;
	if (w->pid > 0) {
		/* A worker that closed its end is probably exiting: give it
		 * a moment, so that its own status is what we report. */
		status = worker_stop(w,
		    why == BELLOWS_ECLOSED ? WORKER_EXIT_GRACE_MS : 0);
		if (why == BELLOWS_ETIMEDOUT)
			snprintf(how, sizeof(how),
			    "did not answer within %" PRIu32 " ms and was "
			    "killed",
			    worker_timeout_ms);
		else if (why == BELLOWS_EPROTO)
			snprintf(how, sizeof(how),
			    "answered with a malformed frame and was killed");
		else if (why == BELLOWS_ENOMEM)
			snprintf(how, sizeof(how),
			    "ran out of memory (plugin_memory_mb %" PRIu32
			    ") and was stopped to give it back",
			    worker_memory_mb);
		else
			worker_describe(status, how, sizeof(how));
	}
	ctl_worker_report(CTL_WORKER_FAULT_FAILED, job,
	    "plug-in '%s': policy '%s' %s: the worker %s; it starts again in "
	    "%" PRIu64 " ms and its instances lose their state; the decision "
	    "in force stays",
	    w->path, policy != NULL ? policy : "?", call, how, backoff);
	return why == BELLOWS_ENOMEM ? BELLOWS_ECLOSED : why;
}

/* Waits for fd to be ready for `events` until `until`. Returns 0,
 * BELLOWS_ETIMEDOUT, or BELLOWS_ECLOSED (hang-up, error). */
static int
worker_wait(int fd, short events, uint64_t until)
{
	struct pollfd p = { .fd = fd, .events = events };

	for (;;) {
		uint64_t now = com_clock_ms();
		int n;

		if (now >= until)
			return BELLOWS_ETIMEDOUT;
		n = poll(&p, 1, (int)(until - now));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return BELLOWS_ECLOSED;
		if (n == 0)
			return BELLOWS_ETIMEDOUT;
		if (p.revents & events)
			return 0;
		return BELLOWS_ECLOSED;
	}
}

static int
worker_send(ctl_worker *w, uint64_t until)
{
	size_t off = 0;

	while (off < w->out.len) {
		ssize_t n = send(w->fd, w->out.data + off, w->out.len - off,
		    MSG_NOSIGNAL);
		int r;

		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return BELLOWS_ECLOSED;
		if ((r = worker_wait(w->fd, POLLOUT, until)) != 0)
			return r;
	}
	return 0;
}

static int
worker_read(ctl_worker *w, void *buf, size_t len, uint64_t until)
{
	size_t off = 0;

	while (off < len) {
		ssize_t n = recv(w->fd, (uint8_t *)buf + off, len - off, 0);
		int r;

		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n == 0)
			return BELLOWS_ECLOSED;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return BELLOWS_ECLOSED;
		if ((r = worker_wait(w->fd, POLLIN, until)) != 0)
			return r;
	}
	return 0;
}

/* Reads one frame of `type` into w->in. */
static int
worker_recv(ctl_worker *w, uint32_t type, uint64_t until)
{
	ctl_pwire_header h;
	int r;

	if ((r = worker_read(w, &h, sizeof(h), until)) != 0)
		return r;
	if (h.magic != CTL_PWIRE_MAGIC || h.type != type ||
	    h.len > CTL_PWIRE_PAYLOAD_MAX)
		return BELLOWS_EPROTO;
	if (h.len > w->in_cap) {
		uint8_t *grown = realloc(w->in, h.len);

		if (grown == NULL)
			return BELLOWS_ENOMEM;
		w->in = grown;
		w->in_cap = h.len;
	}
	w->in_len = h.len;
	return worker_read(w, w->in, h.len, until);
}

static int
worker_hello(ctl_worker *w, uint64_t until)
{
	ctl_pwire_hello hello;
	ctl_pwire_reader rd;
	int r;

	if ((r = worker_recv(w, CTL_PWIRE_HELLO, until)) != 0)
		return r;
	rd = (ctl_pwire_reader){ .p = w->in, .left = w->in_len };
	if (ctl_pwire_get(&rd, &hello, sizeof(hello)) != 0 ||
	    hello.abi != BELLOWS_POLICY_ABI ||
	    hello.window_size != sizeof(bellows_window) ||
	    hello.layer_size != sizeof(bellows_window_layer) ||
	    hello.comm_size != sizeof(bellows_comm_sample) ||
	    hello.event_size != sizeof(bellows_event) ||
	    hello.metric_size != sizeof(bellows_metric)) {
		ctl_log(CTL_LOG_ERROR, "plugin",
		    "the plug-in worker '%s' is of another bellows build",
		    worker_exe());
		return BELLOWS_EPROTO;
	}
	w->hello_due = false;
	return 0;
}

/* Sends w->out (already framed) and, when `reply`, reads the reply into
 * w->in, within the deadline. Worker failures are handled here (killed,
 * reported) and returned. */
static int
worker_call(ctl_worker *w, const char *job, const char *policy,
    const char *call, bool reply)
{
	uint64_t until = com_clock_ms() + worker_timeout_ms;
	int r;

	if ((r = ctl_pwire_end(&w->out)) != 0)
		return r;
	r = worker_send(w, until);
	if (r == 0 && reply && w->hello_due)
		r = worker_hello(w, until);
	if (r == 0 && reply)
		r = worker_recv(w, CTL_PWIRE_REPLY, until);
	if (r == BELLOWS_ENOMEM)
		return r;
	if (r != 0)
		return worker_fail(w, job, policy, call, r);
	return 0;
}

/* Reads the reply's rc and, with `p`, its proposal. */
static int
worker_reply(ctl_worker *w, const char *job, const char *policy,
    const char *call, bellows_proposal *p, int *ret_rc)
{
	ctl_pwire_reader rd = { .p = w->in, .left = w->in_len };
	int32_t rc;

	if (ctl_pwire_get(&rd, &rc, sizeof(rc)) != 0 ||
	    (rc == 0 && p != NULL && ctl_pwire_get_proposal(&rd, p) != 0))
		return worker_fail(w, job, policy, call, BELLOWS_EPROTO);
	*ret_rc = rc;
	return 0;
}

static int
worker_init_locked(ctl_worker *w, const char *policy, const void *config,
    size_t config_size, const bellows_job_info *info, bellows_proposal *io,
    uint32_t *ret_id, uint64_t *ret_gen)
{
	uint32_t size = (uint32_t)config_size, id;
	int r, rc;

	if ((r = worker_start(w, info->job, policy)) != 0)
		return r;
	id = ++w->next_id;
	ctl_pwire_begin(&w->out, CTL_PWIRE_INIT, id);
	ctl_pwire_put(&w->out, &size, sizeof(size));
	ctl_pwire_put(&w->out, config, config_size);
	ctl_pwire_put_str(&w->out, info->job);
	ctl_pwire_put(&w->out, &info->world, sizeof(info->world));
	ctl_pwire_put(&w->out, &info->n_layers, sizeof(info->n_layers));
	ctl_pwire_put_layers(&w->out, info->layers, info->n_layers);
	ctl_pwire_put_proposal(&w->out, io);
	if ((r = worker_call(w, info->job, policy, "init", true)) != 0 ||
	    (r = worker_reply(w, info->job, policy, "init", io, &rc)) != 0)
		return r;
	if (rc == BELLOWS_ENOMEM)
		return worker_fail(w, info->job, policy, "init", rc);
	if (rc != 0)
		return rc;
	*ret_id = id;
	*ret_gen = w->generation;
	return 0;
}

static int
worker_window_locked(ctl_worker *w, uint32_t id, uint64_t gen,
    const char *policy, const bellows_window *win, bellows_proposal *io)
{
	int r, rc;

	if (!ctl_worker_current(w, gen))
		return BELLOWS_ESTATE;
	ctl_pwire_begin(&w->out, CTL_PWIRE_WINDOW, id);
	ctl_pwire_put_window(&w->out, win);
	ctl_pwire_put_proposal(&w->out, io);
	if ((r = worker_call(w, win->job, policy, "on_window", true)) != 0 ||
	    (r = worker_reply(w, win->job, policy, "on_window", io, &rc)) != 0)
		return r;
	if (rc == BELLOWS_ENOMEM)
		return worker_fail(w, win->job, policy, "on_window", rc);
	w->in_a_row = 0;
	return rc;
}

static int
worker_event_locked(ctl_worker *w, uint32_t id, uint64_t gen,
    const char *policy, const char *job, const bellows_event *ev,
    const void *config, size_t config_size)
{
	uint32_t size = config != NULL ? (uint32_t)config_size : 0;
	int r, rc;

	if (!ctl_worker_current(w, gen))
		return BELLOWS_ESTATE;
	ctl_pwire_begin(&w->out, CTL_PWIRE_EVENT, id);
	ctl_pwire_put(&w->out, ev, sizeof(*ev));
	ctl_pwire_put(&w->out, &size, sizeof(size));
	if (size > 0)
		ctl_pwire_put(&w->out, config, size);
	if ((r = worker_call(w, job, policy, "on_event", true)) != 0 ||
	    (r = worker_reply(w, job, policy, "on_event", NULL, &rc)) != 0)
		return r;
	if (rc == BELLOWS_ENOMEM)
		return worker_fail(w, job, policy, "on_event", rc);
	return rc;
}

int
ctl_worker_init(ctl_worker *w, const char *policy, const void *config,
    size_t config_size, const bellows_job_info *info, bellows_proposal *io,
    uint32_t *ret_id, uint64_t *ret_gen)
{
	int r;

	pthread_mutex_lock(&w->lock);
	r = worker_init_locked(w, policy, config, config_size, info, io, ret_id,
	    ret_gen);
	pthread_mutex_unlock(&w->lock);
	return r;
}

int
ctl_worker_window(ctl_worker *w, uint32_t id, uint64_t gen, const char *policy,
    const bellows_window *win, bellows_proposal *io)
{
	int r;

	pthread_mutex_lock(&w->lock);
	r = worker_window_locked(w, id, gen, policy, win, io);
	pthread_mutex_unlock(&w->lock);
	return r;
}

int
ctl_worker_event(ctl_worker *w, uint32_t id, uint64_t gen, const char *policy,
    const char *job, const bellows_event *ev, const void *config,
    size_t config_size)
{
	int r;

	pthread_mutex_lock(&w->lock);
	r = worker_event_locked(w, id, gen, policy, job, ev, config,
	    config_size);
	pthread_mutex_unlock(&w->lock);
	return r;
}

void
ctl_worker_fini(ctl_worker *w, uint32_t id, uint64_t gen)
{
	pthread_mutex_lock(&w->lock);
	if (ctl_worker_current(w, gen)) {
		ctl_pwire_begin(&w->out, CTL_PWIRE_FINI, id);
		(void)worker_call(w, NULL, NULL, "fini", false);
	}
	pthread_mutex_unlock(&w->lock);
}

int
ctl_worker_check(const char *path, const void *config, size_t config_size,
    char *errbuf, size_t errlen)
{
	char how[128];
	ctl_worker tmp = { .fd = -1, .pidfd = -1 };
	uint32_t size = (uint32_t)config_size;
	uint64_t until = com_clock_ms() + CTL_WORKER_PROBE_MS;
	const char *msg = NULL;
	ctl_pwire_reader rd;
	int err, r, status, pidfd;
	int32_t rc = 0;
	pid_t pid;

	if ((err = worker_spawn_paired("--check", path, &tmp.fd, &pid)) != 0) {
		snprintf(errbuf, errlen,
		    "plugin '%s' cannot be checked: the plug-in worker '%s' "
		    "cannot be started: %s (set BELLOWS_PLUGIN_WORKER)",
		    path, worker_exe(), strerror(err));
		return BELLOWS_EIO;
	}
	ctl_pwire_begin(&tmp.out, CTL_PWIRE_CHECK, 0);
	ctl_pwire_put(&tmp.out, &size, sizeof(size));
	ctl_pwire_put(&tmp.out, config, config_size);
	r = ctl_pwire_end(&tmp.out);
	if (r == 0)
		r = worker_send(&tmp, until);
	if (r == 0)
		r = worker_recv(&tmp, CTL_PWIRE_REPLY, until);
	if (r == 0) {
		rd = (ctl_pwire_reader){ .p = tmp.in, .left = tmp.in_len };
		if (ctl_pwire_get(&rd, &rc, sizeof(rc)) != 0 ||
		    (rc != 0 && ctl_pwire_get_str(&rd, &msg) != 0))
			r = BELLOWS_EPROTO;
	}
	close(tmp.fd);
	/* After a failure the child is probably ending: let it, so that
	 * its own status is what we report. */
	pidfd = worker_pidfd(pid);
	status = worker_reap(pid, pidfd, r != 0 ? WORKER_EXIT_GRACE_MS : 0);
	if (pidfd >= 0)
		close(pidfd);
	if (r == 0 && rc != 0)
		snprintf(errbuf, errlen, "%s", msg);
	ctl_pwire_buf_fini(&tmp.out);
	free(tmp.in);
	if (r == BELLOWS_ENOMEM)
		return r;
	if (r != 0) {
		if (r == BELLOWS_ETIMEDOUT)
			snprintf(how, sizeof(how),
			    "did not answer within %d ms (it was killed)",
			    CTL_WORKER_PROBE_MS);
		else
			worker_describe(status, how, sizeof(how));
		snprintf(errbuf, errlen,
		    "plugin '%s' crashed checking the parameters: the "
		    "checking process %s",
		    path, how);
		return BELLOWS_EIO;
	}
	return rc;
}
