/* jobs - the daemon's table of jobs: their ranks and liveness, the windows
 * being aggregated, the policies deciding, and each job's decision log.
 *
 * Pure state, driven by decoded messages and the monotonic clock: no
 * sockets here (the server owns them), which is what lets the tests drive
 * jobs directly. Everything runs on the event loop's thread.
 *
 * Decisions leave through the publish callback, in seq order. With a
 * store, everything is recorded there, and a decision is handed to the
 * callback only once the store has committed it (or at once while the
 * store is degraded); a restarted daemon rebuilds its live jobs from the
 * store (ctl_jobs_recover).
 */
#ifndef CTL_JOBS_H
#define CTL_JOBS_H

#include "policyhost/config.h"
#include "events.h"
#include "common/msg.h"
#include "store.h"

#include <stddef.h>
#include <stdint.h>

#define CTL_PEER_MAX 32 /* bytes of a routing id we keep */

typedef struct ctl_jobs ctl_jobs;

/* Receives each message to publish (a Decision or a Telemetry), borrowed
 * for the call. */
typedef void ctl_jobs_publish_fn(void *arg, const com_msg *msg);

/* Sends `msg` to one peer over the control socket, never blocking. */
typedef void ctl_jobs_send_fn(void *arg, const uint8_t *peer, size_t peer_len,
    const com_msg *msg);

/* Counters over the daemon's life. */
typedef struct ctl_jobs_counters {
	uint64_t reports;       /* reports folded into windows */
	uint64_t layer_stats;   /* layer statistics folded in */
	uint64_t decisions;     /* decisions published */
	uint64_t repairs;       /* decisions re-issued after a divergence */
	uint64_t windows;       /* windows closed */
	uint64_t incomplete;    /* windows closed with ranks missing */
	uint64_t ranks_joined;  /* hellos taken (joins and rejoins) */
	uint64_t ranks_lost;    /* ranks declared lost */
	uint64_t policy_errors; /* on_window and on_event calls that failed */
	uint64_t duplicates;    /* reports of a (rank, window) already
				 * taken, ignored (agents resend) */
	uint64_t windows_late;  /* windows recorded late: not closed
				 * before a restart, their reports sent
				 * again (jobs_late.c) */
} ctl_jobs_counters;

/* Creates the job table. `cfg` is borrowed and must stay alive until
 * replaced with ctl_jobs_reload or the table is destroyed. `instance`
 * identifies this daemon run to agents. Returns 0 or BELLOWS_ENOMEM. */
int ctl_jobs_new(const ctl_config *cfg, uint64_t instance,
    ctl_jobs_publish_fn *publish, void *publish_arg, ctl_jobs **ret_jobs);

/* Frees every job. NULL-safe. */
void ctl_jobs_destroy(ctl_jobs **jobs);

/* Stops every resume whose run is being read back off the loop, waits
 * for their threads and forgets them (their launches' next Hellos start
 * them again). Called before the store closes; ctl_jobs_destroy and
 * ctl_jobs_reload call it too. NULL-safe. */
void ctl_jobs_cancel_resumes(ctl_jobs *jobs);

/* Records everything in `store` (borrowed, must outlive the table; NULL:
 * no history) and publishes decisions only once it has committed them.
 * Call before the first message. */
void ctl_jobs_set_store(ctl_jobs *jobs, ctl_store *store);

/* Rebuilds every live run of the store as a job: its layer table and
 * world, its decision log and sequence (the next decision continues it),
 * the next window, the ranks that were there (expected again until they
 * rejoin or time out), and its policies' state, by running fresh
 * instances over every recorded window without publishing anything.
 * Ranks then find their job when they send Hello. Call once, after
 * ctl_jobs_set_store and before ctl_store_start. Returns the number of
 * jobs recovered. */
uint32_t ctl_jobs_recover(ctl_jobs *jobs, uint64_t now_ms);

/* Switches to a new configuration (borrowed, as in ctl_jobs_new). Every
 * job's policies are rebuilt from its entry in cfg: an instance that is
 * the same in both files keeps its state and is told of the reload, new
 * instances start, removed ones are finalised (ctl_policy_set_prepare and
 * _commit). The knob state in force does not change; the next window's
 * decision comes from the new policies. Timing settings apply at once.
 * All or nothing: when a job's new policies cannot start, returns
 * BELLOWS_ENOMEM or that init's error with "job 'NAME': why" in errbuf,
 * and the table is as it was. On success the previous configuration is
 * no longer used by the table and may be freed. */
int ctl_jobs_reload(ctl_jobs *jobs, const ctl_config *cfg, char *errbuf,
    size_t errlen);

/* The table's ring of recent events (borrowed, lives as long as the
 * table): the daemon records its own events there too. */
ctl_events *ctl_jobs_events(ctl_jobs *jobs);

/*
 * Message handlers. `peer` is the sender's routing id; `client` the name
 * its connection authenticated as (the certificate's NAME, borrowed for
 * the call), NULL without security. With security (cfg->security), a
 * client the configuration does not allow for the job
 * (ctl_config_client_allowed) is refused with BELLOWS_EPERM and an Error
 * reply, and nothing changes; a live rank is bound to the client whose
 * Hello took it: another client's Hello for it gets BELLOWS_EBUSY, its
 * reports BELLOWS_ENOTJOINED. Each returns 0 when
 * the message was accepted, or a negative BELLOWS_E* when it was dropped,
 * with a one-line reason in `why` (why_len bytes) for the per-peer drop
 * log. *reply (initialised by the caller to COM_MSG_NONE) may receive a
 * message to send back to the peer, also on failure (an Error).
 *
 * A Report repeating the (rank, window) of one already taken from the
 * same agent process (incarnation) is accepted and ignored, counted in
 * `duplicates`, also once the window closed (for the rank's last 64
 * windows): agents send again what was not durably closed when they
 * rejoin. A report of a closed window the rank had not reported is stale
 * (BELLOWS_ESTATE).
 *
 * Welcome and HeartbeatAck carry windows_closed: the lowest window whose
 * close is not durable yet, i.e. whose decision is not yet published
 * (which with a working store waits for its commit), or, for a window
 * recorded late (no decision answers it), whose rows are not committed.
 */
int ctl_jobs_hello(ctl_jobs *jobs, const uint8_t *peer, size_t peer_len,
    const char *client, const com_hello *hello, uint64_t now_ms, com_msg *reply,
    char *why, size_t why_len);
int ctl_jobs_report(ctl_jobs *jobs, const uint8_t *peer, size_t peer_len,
    const char *client, const com_report *report, uint64_t now_ms,
    com_msg *reply, char *why, size_t why_len);
int ctl_jobs_heartbeat(ctl_jobs *jobs, const uint8_t *peer, size_t peer_len,
    const char *client, const com_heartbeat *hb, uint64_t now_ms,
    com_msg *reply, char *why, size_t why_len);
int ctl_jobs_bye(ctl_jobs *jobs, const uint8_t *peer, size_t peer_len,
    const char *client, const com_bye *bye, uint64_t now_ms, char *why,
    size_t why_len);
int ctl_jobs_snapshot(ctl_jobs *jobs, const char *client,
    const com_snapshot_request *req, com_msg *reply, char *why, size_t why_len);

/* True when `client` may read job `name` (NULL: every job, whatever its
 * name) under the configuration in force: what the publish side asks
 * before it lets a subscription through. Always true without security. */
bool ctl_jobs_client_may_read(const ctl_jobs *jobs, const char *name,
    const char *client);

/* Fills the job part of a STATUS reply (jobs matching req->job, or all)
 * and the recent events (of that job and the daemon's, or all), leaving
 * out with security the jobs (and their events) `client` may not read.
 * Returns 0 or BELLOWS_ENOMEM. */
int ctl_jobs_status(ctl_jobs *jobs, const char *client,
    const com_status_request *req, uint64_t now_ms, com_status_reply *reply);

/* Periodic duties: declares silent ranks lost, closes windows whose
 * timeout passed, forgets jobs idle for job_idle_ms. */
void ctl_jobs_tick(ctl_jobs *jobs, uint64_t now_ms);

/* Copies the counters into *ret. */
void ctl_jobs_get_counters(const ctl_jobs *jobs, ctl_jobs_counters *ret);

/* Gives the table a way to reach one rank directly. A rank that resumed
 * (its Hello carried the decision it applies, as after a restart of
 * bellowsd) less than a second ago may not yet receive what is published
 * (its SUB connects on its own schedule, and PUB drops what no subscriber
 * takes): every decision published in that time is also sent to it as a
 * Snapshot, so that it cannot miss a decision due before its SUB is up.
 * NULL (the default): publish only. */
void ctl_jobs_set_sender(ctl_jobs *jobs, ctl_jobs_send_fn *send, void *arg);

/* Decision latency: from a window's close (its last report handled, or
 * its timeout) to the publication of the decision answering it, which
 * includes the policies and, with a history, the store's commit. */
typedef struct ctl_jobs_latency_info {
	uint32_t samples; /* decisions measured (the last 1024 at most) */
	double p50_ms;    /* median over them */
	double p99_ms;    /* 99th percentile (nearest rank) */
	double max_ms;    /* largest */
} ctl_jobs_latency_info;

/* Fills *ret from the last 1,024 window decisions published (all zero
 * before the first). */
void ctl_jobs_latency(const ctl_jobs *jobs, ctl_jobs_latency_info *ret);

#define CTL_JOBS_LATENCY_BUCKETS 14 /* finite bounds of the histogram */

/* Upper bounds of the latency histogram's buckets, in milliseconds,
 * ascending (the last bucket, +Inf, is the count). */
extern const double ctl_jobs_latency_bounds_ms[CTL_JOBS_LATENCY_BUCKETS];

/* Every decision latency measured since the table was created, as a
 * histogram. */
typedef struct ctl_jobs_latency_hist {
	uint64_t le[CTL_JOBS_LATENCY_BUCKETS]; /* cumulative: latencies at
						* or below each bound */
	uint64_t count;                        /* latencies measured */
	double sum_ms;                         /* their sum */
} ctl_jobs_latency_hist;

/* Fills *ret with the histogram of every decision latency so far. */
void ctl_jobs_latency_histogram(const ctl_jobs *jobs,
    ctl_jobs_latency_hist *ret);

/* What a reader outside the loop's modules sees of one job (metrics):
 * everything borrowed from the table, valid until the loop handles the
 * next message or timer. */
typedef struct ctl_jobs_job_view {
	const char *name;             /* job name */
	uint32_t world;               /* ranks */
	uint32_t alive;               /* ranks alive */
	uint64_t step;                /* highest step heard */
	uint64_t windows;             /* windows closed by this daemon */
	uint64_t floats_sent;         /* summed over ranks and windows */
	uint64_t floats_raw;          /* the same, uncompressed */
	uint32_t n_layers;            /* entries in layers, level,
				       * level_applied, norm */
	const com_layer_info *layers; /* the layer table */
	const double *level;          /* level in force (newest decision
				       * published), NULL: none yet */
	const double *level_applied;  /* each layer's level as the agents
				       * sent it in the last window closed
				       * (NAN: none, or not reported) */
	const double *grad_norm;      /* each layer's gradient norm in the
				       * last window closed (NAN: none) */
} ctl_jobs_job_view;

/* Fills ret[0 .. max-1] with views of the jobs held, in table order, and
 * returns how many it filled (at most max). */
uint32_t ctl_jobs_views(ctl_jobs *jobs, ctl_jobs_job_view *ret, uint32_t max);

#endif /* CTL_JOBS_H */
