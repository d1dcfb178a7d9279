/* metrics - bellowsd's state in the Prometheus text exposition format
 * (version 0.0.4), and the address /metrics is served on.
 *
 * The loop fills a ctl_metrics_snapshot from the job table, the server,
 * the store and the reloads, and formats it here into one text: every
 * family with its HELP and TYPE lines, label values escaped (backslash,
 * double quote, line feed). The text is handed to the HTTP actor
 * (metrics_http.h), which serves it as it was last published; nothing
 * here touches a socket or keeps state between calls.
 *
 * Cardinality is bounded: at most max_jobs jobs (the configuration's
 * limit) and, over all of them, CTL_METRICS_LAYER_SERIES (job, layer)
 * pairs; the layers past that are left out and counted in
 * bellows_metrics_layers_omitted (docs/metrics.md).
 */
#ifndef CTL_CTL_METRICS_H
#define CTL_CTL_METRICS_H

#include "policyhost/config_listen.h"
#include "jobs.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define CTL_METRICS_LAYER_SERIES 4096 /* (job, layer) pairs exported */
#define CTL_METRICS_PERIOD_MS    1000 /* the loop publishes this often */

/* The process' own figures, the `process_*` families client libraries
 * export (read from /proc by ctl_metrics_read_process). */
typedef struct ctl_metrics_process {
	bool known;           /* read; false: the families are left out */
	double cpu_seconds;   /* user and system CPU time */
	uint64_t rss_bytes;   /* resident memory */
	uint64_t heap_bytes;  /* handed out by malloc, not yet freed; 0:
			       * unknown (an allocator without mallinfo2) */
	uint64_t vm_bytes;    /* virtual memory */
	uint64_t open_fds;    /* descriptors open */
	uint64_t max_fds;     /* RLIMIT_NOFILE's soft limit */
	double start_seconds; /* start time, seconds since the epoch */
} ctl_metrics_process;

/* What one publication says; everything borrowed for the call. */
typedef struct ctl_metrics_snapshot {
	uint64_t uptime_ms;            /* since bellowsd started */
	ctl_metrics_process process;   /* the process' figures */
	ctl_jobs_counters jobs;        /* the job table's totals */
	ctl_jobs_latency_hist latency; /* decision latency */
	uint64_t messages;             /* control messages received */
	uint64_t dropped;              /* control messages dropped */
	uint64_t pub_dropped;          /* publications that failed */
	uint64_t reloads;              /* reloads that took effect */
	uint64_t reloads_refused;      /* reloads refused */
	bool store;                    /* a history is kept */
	bool store_degraded;           /* failing or slow */
	uint64_t store_pending;        /* rows not yet committed */
	uint64_t store_dropped;        /* rows the store had to drop */
	uint32_t n_jobs;               /* entries in job */
	const ctl_jobs_job_view *job;  /* each job held */
	uint32_t layer_series;         /* most (job, layer) pairs, normally
					* CTL_METRICS_LAYER_SERIES */
} ctl_metrics_snapshot;

/* Fills *p with this process' figures from /proc/self/stat,
 * /proc/self/fd, /proc/stat (boot time) and getrlimit. Returns 0 (and
 * p->known true) or BELLOWS_EIO when /proc cannot be read or parsed
 * (p->known false). A few file reads: loop thread, once a publication. */
int ctl_metrics_read_process(ctl_metrics_process *p);

/* Formats `s` into a fresh NUL-terminated text (the caller's, free())
 * of *ret_len bytes. Returns 0 or BELLOWS_ENOMEM (*ret_text untouched).
 * Pure: any thread. */
int ctl_metrics_format(const ctl_metrics_snapshot *s, char **ret_text,
    size_t *ret_len);

#endif /* CTL_CTL_METRICS_H */
