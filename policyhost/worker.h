/* worker - the process an out-of-tree plug-in runs in, seen from bellowsd:
 * started on demand, called with a deadline, killed and restarted with
 * backoff when it crashes, hangs or answers nonsense.
 *
 * One worker runs one plug-in library (the `bellows-plugin-worker`
 * executable, see worker_main.c) for every job and configuration that
 * uses it: workers are shared by canonical path and reference-counted.
 * A call writes one request frame (plugin_wire.h) over a socketpair and
 * waits, with poll, at most plugin_timeout_ms for the reply; the worker's
 * address space is capped at plugin_memory_mb (RLIMIT_AS). A call that
 * fails in the worker (crash, abort, deadline, malformed reply) kills the
 * process and reports the fault through the fault callback; the worker is
 * started again, by the first call after a backoff that doubles from
 * CTL_WORKER_BACKOFF_MIN_MS up to CTL_WORKER_BACKOFF_MAX_MS with every
 * failure in a row and is reset by a successful on_window. A restarted
 * worker has a new generation: the instances of the old one are gone and
 * their hosts start them again from init (their state is lost).
 *
 * The calls block the caller for at most plugin_timeout_ms each; that is
 * the price of keeping the policy host's ordered, synchronous flow (see
 * docs/policies/plugins.md). ctl_worker_get and ctl_worker_put may be
 * called from any thread (configurations are parsed on another one), and
 * so may the calls to a worker (init, window, event, fini): each holds
 * the worker for its duration, so a resume's thread replaying a run and
 * the loop take turns. The rest is the loop's.
 */
#ifndef CTL_WORKER_H
#define CTL_WORKER_H

#include <bellows/policy.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CTL_WORKER_EXE            "bellows-plugin-worker"
#define CTL_WORKER_TIMEOUT_MS     1000  /* plugin_timeout_ms default */
#define CTL_WORKER_MEMORY_MB      1024  /* plugin_memory_mb default */
#define CTL_WORKER_BACKOFF_MIN_MS 100   /* first restart delay */
#define CTL_WORKER_BACKOFF_MAX_MS 10000 /* longest restart delay */
#define CTL_WORKER_PROBE_MS       5000  /* longest load check */

/* Fault kinds given to the fault callback (they are event kinds). */
#define CTL_WORKER_FAULT_FAILED    "plugin_failed"
#define CTL_WORKER_FAULT_RESTARTED "plugin_restarted"

typedef struct ctl_worker ctl_worker;

/* Told about each fault and restart: `kind` is one of the
 * CTL_WORKER_FAULT_* kinds, `job` the job whose call met it (NULL when
 * none), `text` one line for people. Called on the caller's thread. */
typedef void ctl_worker_fault_fn(void *arg, const char *kind, const char *job,
    const char *text);

/* What a worker went through, for tests and STATUS. */
typedef struct ctl_worker_info {
	int pid;             /* running process, 0 when there is none */
	uint64_t generation; /* processes started so far */
	uint64_t failures;   /* calls that failed in the worker, ever */
	uint32_t in_a_row;   /* failures since the last good on_window */
	uint64_t restart_at; /* monotonic ms before which it stays down */
} ctl_worker_info;

/* Sets the deadline of every call and the address-space cap of workers
 * started from now on (process-wide; bellowsd sets them from the
 * configuration in force). 0 keeps the default. */
void ctl_worker_set_limits(uint32_t timeout_ms, uint32_t memory_mb);

/* Installs the fault callback (NULL: none). Process-wide. */
void ctl_worker_set_fault_fn(ctl_worker_fault_fn *fn, void *arg);

/* On the calling thread, faults are only logged (`mute` true), not
 * handed to the fault callback, which runs on the loop's thread: set by
 * the threads that read a run back for a resume. */
void ctl_worker_mute_faults(bool mute);

/* The current fault callback's argument (to uninstall only one's own). */
void *ctl_worker_fault_arg(void);

/* Loads the plug-in at `path` in a child worker (its entry function and
 * the checks of pol_registry_check), so that a plug-in whose loading
 * crashes or hangs is found without running it in this process. Returns
 * 0 when the child ended normally (loaded, or refused cleanly: loading it
 * here then gives the refusal's own message); BELLOWS_EIO with a message
 * naming the file in errbuf when it crashed, did not finish within
 * CTL_WORKER_PROBE_MS, or no worker executable could be started. */
int ctl_worker_probe(const char *path, char *errbuf, size_t errlen);

/* Runs the ops' check of the plug-in at `path` on `config` (config_size
 * bytes, as parsed) in a child worker, so that a check that crashes or
 * hangs does not take the caller down. Returns 0 when the check accepts
 * it; the check's own error with its message in errbuf; BELLOWS_EIO with
 * a message naming the file when the child crashed, did not answer
 * within CTL_WORKER_PROBE_MS or could not be started; BELLOWS_ESYS or
 * BELLOWS_ENOMEM. */
int ctl_worker_check(const char *path, const void *config, size_t config_size,
    char *errbuf, size_t errlen);

/* Takes a reference to the worker of the plug-in at canonical `path`,
 * creating it (no process yet) when there is none. Returns 0 or
 * BELLOWS_ENOMEM (*ret_worker untouched). Thread-safe. */
int ctl_worker_get(const char *path, ctl_worker **ret_worker);

/* Drops a reference and sets *w to NULL; the last one kills the process.
 * NULL-safe. Thread-safe. */
void ctl_worker_put(ctl_worker **w);

/* True when instances started in generation `gen` still live (the process
 * that ran their init is the one running). */
bool ctl_worker_current(const ctl_worker *w, uint64_t gen);

/* Starts an instance in the worker (the worker started first when there is
 * none and the backoff has passed): sends `config` (config_size bytes,
 * which the worker keeps for the instance) and `info`, and calls init
 * with `io` as the initial proposal, which receives the policy's. On
 * success *ret_id and *ret_gen name the instance. Returns 0; the init's
 * own error; BELLOWS_EAGAIN while the worker waits out its backoff;
 * BELLOWS_ECLOSED, BELLOWS_ETIMEDOUT or BELLOWS_EPROTO when the worker
 * failed (reported through the fault callback, the worker killed);
 * BELLOWS_ENOMEM. `policy` names the instance in messages. */
int ctl_worker_init(ctl_worker *w, const char *policy, const void *config,
    size_t config_size, const bellows_job_info *info, bellows_proposal *io,
    uint32_t *ret_id, uint64_t *ret_gen);

/* Calls on_window of instance (id, gen) with `win`; `io` is pre-filled
 * with the state in force and receives the proposal. Returns 0, the
 * policy's own error, BELLOWS_ESTATE when the instance is no longer
 * current, or a worker failure as for ctl_worker_init. */
int ctl_worker_window(ctl_worker *w, uint32_t id, uint64_t gen,
    const char *policy, const bellows_window *win, bellows_proposal *io);

/* Calls on_event of instance (id, gen). For BELLOWS_EVENT_RELOAD,
 * `config` (config_size bytes) is the new config, kept by the worker when
 * the policy accepts it. Returns as ctl_worker_window. */
int ctl_worker_event(ctl_worker *w, uint32_t id, uint64_t gen,
    const char *policy, const char *job, const bellows_event *ev,
    const void *config, size_t config_size);

/* Finalises instance (id, gen) in the worker (fini, then its state and
 * config are freed); nothing when it is no longer current. Does not wait
 * for the worker. */
void ctl_worker_fini(ctl_worker *w, uint32_t id, uint64_t gen);

/* Reports `kind` (a CTL_WORKER_FAULT_*) for `job` (NULL: none) as the
 * worker's own faults are: a log line and the fault callback. For hosts
 * of instances, e.g. one started again after its worker's restart. */
void ctl_worker_report(const char *kind, const char *job, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Copies what the worker went through into *ret. */
void ctl_worker_get_info(const ctl_worker *w, ctl_worker_info *ret);

#endif /* CTL_WORKER_H */
