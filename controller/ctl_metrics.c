/* ctl_metrics - the Prometheus text format of bellowsd's state, see
 * ctl_metrics.h.
 *
 * The text is built in one growing buffer; an allocation failure is
 * remembered and reported once at the end, so the writers below need not
 * check each line. Names and the meaning of every family are documented
 * in docs/metrics.md, which must change with them.
 */
#include "ctl_metrics.h"

#include "bellows_config.h"

#include <bellows/error.h>

#include "common/utf8.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <inttypes.h>
#include <malloc.h>
#include <math.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

typedef struct metrics_buf {
	char *text;  /* NUL-terminated, NULL after a failure */
	size_t len;  /* bytes used, without the NUL */
	size_t cap;  /* bytes allocated */
	bool failed; /* an allocation failed: the text is lost */
} metrics_buf;

static void
metrics_reserve(metrics_buf *b, size_t more)
{
	size_t cap = b->cap ? b->cap : 4096;
	char *grown;

	if (b->failed || b->len + more + 1 <= b->cap)
		return;
	while (cap < b->len + more + 1)
		cap *= 2;
	grown = realloc(b->text, cap);
	if (grown == NULL) {
		b->failed = true;
		return;
	}
	b->text = grown;
	b->cap = cap;
}

static void metrics_printf(metrics_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
metrics_printf(metrics_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->failed = true;
		return;
	}
	metrics_reserve(b, (size_t)n);
	if (b->failed)
		return;
	va_start(ap, fmt);
	vsnprintf(b->text + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

/* A label value: backslash, double quote and line feed escaped, as the
 * exposition format requires, and a byte that starts no well-formed
 * UTF-8 replaced by U+FFFD: the format is UTF-8, and Prometheus refuses a
 * whole scrape for one bad label (the wire refuses such names; this
 * covers a history written before it did). */
static void
metrics_label(metrics_buf *b, const char *v)
{
	const unsigned char *p = (const unsigned char *)v;
	size_t left = strlen(v), n;

	while (left > 0) {
		metrics_reserve(b, 4);
		if (b->failed)
			return;
		if (*p == '\\' || *p == '"') {
			b->text[b->len++] = '\\';
			b->text[b->len++] = (char)*p;
		} else if (*p == '\n') {
			b->text[b->len++] = '\\';
			b->text[b->len++] = 'n';
		} else if ((n = com_utf8_len(p, left)) == 0) {
			memcpy(b->text + b->len, "\xef\xbf\xbd", 3);
			b->len += 3;
		} else {
			memcpy(b->text + b->len, p, n);
			b->len += n;
			p += n;
			left -= n;
			continue;
		}
		p++;
		left--;
	}
	if (!b->failed)
		b->text[b->len] = '\0';
}

static void
metrics_family(metrics_buf *b, const char *name, const char *type,
    const char *help)
{
	metrics_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
	    type);
}

/* A sample value: Prometheus spells the special ones NaN, +Inf, -Inf. */
static void
metrics_value(metrics_buf *b, double v)
{
	if (isnan(v))
		metrics_printf(b, " NaN\n");
	else if (isinf(v))
		metrics_printf(b, " %sInf\n", v > 0 ? "+" : "-");
	else
		metrics_printf(b, " %.17g\n", v);
}

static void
metrics_u64(metrics_buf *b, const char *name, const char *type,
    const char *help, uint64_t v)
{
	metrics_family(b, name, type, help);
	metrics_printf(b, "%s %" PRIu64 "\n", name, v);
}

/* The version's info metric, then the process' figures. */
static void
metrics_process(metrics_buf *b, const ctl_metrics_process *p)
{
	metrics_family(b, "bellows_build_info", "gauge",
	    "1, labelled with the version of the bellowsd serving.");
	metrics_printf(b, "bellows_build_info{version=\"");
	metrics_label(b, BELLOWS_VERSION);
	metrics_printf(b, "\"} 1\n");
	if (!p->known)
		return;
	metrics_family(b, "process_cpu_seconds_total", "counter",
	    "User and system CPU time spent in seconds.");
	metrics_printf(b, "process_cpu_seconds_total");
	metrics_value(b, p->cpu_seconds);
	metrics_u64(b, "process_resident_memory_bytes", "gauge",
	    "Resident memory size in bytes.", p->rss_bytes);
	metrics_u64(b, "process_virtual_memory_bytes", "gauge",
	    "Virtual memory size in bytes.", p->vm_bytes);
	if (p->heap_bytes > 0)
		metrics_u64(b, "bellows_heap_allocated_bytes", "gauge",
		    "Bytes malloc has handed out and not had back; unlike "
		    "the resident set it falls as soon as memory is freed.",
		    p->heap_bytes);
	metrics_u64(b, "process_open_fds", "gauge",
	    "Number of open file descriptors.", p->open_fds);
	metrics_u64(b, "process_max_fds", "gauge",
	    "Maximum number of open file descriptors.", p->max_fds);
	metrics_family(b, "process_start_time_seconds", "gauge",
	    "Start time of the process since unix epoch in seconds.");
	metrics_printf(b, "process_start_time_seconds");
	metrics_value(b, p->start_seconds);
}

static void
metrics_daemon(metrics_buf *b, const ctl_metrics_snapshot *s)
{
	const ctl_jobs_counters *c = &s->jobs;

	metrics_family(b, "bellows_uptime_seconds", "gauge",
	    "Seconds since bellowsd started.");
	metrics_printf(b, "bellows_uptime_seconds");
	metrics_value(b, (double)s->uptime_ms / 1000.0);
	metrics_u64(b, "bellows_messages_total", "counter",
	    "Messages received on the control socket.", s->messages);
	metrics_u64(b, "bellows_reports_total", "counter",
	    "Reports folded into windows.", c->reports);
	metrics_u64(b, "bellows_reports_duplicate_total", "counter",
	    "Reports of a window already taken, ignored.", c->duplicates);
	metrics_u64(b, "bellows_layer_stats_total", "counter",
	    "Layer statistics folded into windows.", c->layer_stats);
	metrics_u64(b, "bellows_windows_total", "counter", "Windows closed.",
	    c->windows);
	metrics_u64(b, "bellows_windows_incomplete_total", "counter",
	    "Windows closed by timeout with ranks missing.", c->incomplete);
	metrics_u64(b, "bellows_windows_late_total", "counter",
	    "Windows recorded late: not closed before a restart, their "
	    "reports sent again by the agents.",
	    c->windows_late);
	metrics_u64(b, "bellows_decisions_total", "counter",
	    "Decisions published.", c->decisions);
	metrics_u64(b, "bellows_repairs_total", "counter",
	    "Decisions re-issued after a rank diverged.", c->repairs);
	metrics_u64(b, "bellows_policy_errors_total", "counter",
	    "Policy calls that failed.", c->policy_errors);
	metrics_u64(b, "bellows_dropped_messages_total", "counter",
	    "Control messages dropped (malformed, oversized, refused).",
	    s->dropped);
	metrics_u64(b, "bellows_publish_dropped_total", "counter",
	    "Publications that could not be sent.", s->pub_dropped);
	metrics_u64(b, "bellows_reloads_total", "counter",
	    "Configuration reloads that took effect.", s->reloads);
	metrics_u64(b, "bellows_reloads_refused_total", "counter",
	    "Configuration reloads refused (the old file stayed).",
	    s->reloads_refused);
	metrics_u64(b, "bellows_rank_joins_total", "counter",
	    "Ranks that joined or rejoined a job.", c->ranks_joined);
	metrics_u64(b, "bellows_rank_losses_total", "counter",
	    "Ranks declared lost (silent past rank_timeout_ms).",
	    c->ranks_lost);
	metrics_u64(b, "bellows_jobs", "gauge",
	    "Jobs held (with security, those /metrics may show).", s->n_jobs);
}

static void
metrics_latency(metrics_buf *b, const ctl_jobs_latency_hist *h)
{
	metrics_family(b, "bellows_decision_latency_seconds", "histogram",
	    "From a window's close to the publication of the decision "
	    "answering it (policies and the history's commit included).");
	for (uint32_t i = 0; i < CTL_JOBS_LATENCY_BUCKETS; i++)
		metrics_printf(b,
		    "bellows_decision_latency_seconds_bucket{le=\"%g\"} "
		    "%" PRIu64 "\n",
		    ctl_jobs_latency_bounds_ms[i] / 1000.0, h->le[i]);
	metrics_printf(b,
	    "bellows_decision_latency_seconds_bucket{le=\"+Inf\"} %" PRIu64
	    "\n",
	    h->count);
	metrics_printf(b, "bellows_decision_latency_seconds_sum");
	metrics_value(b, h->sum_ms / 1000.0);
	metrics_printf(b,
	    "bellows_decision_latency_seconds_count %" PRIu64 "\n", h->count);
}

static void
metrics_store(metrics_buf *b, const ctl_metrics_snapshot *s)
{
	metrics_u64(b, "bellows_store_enabled", "gauge",
	    "1 when a history database is kept, 0 with --no-db.", s->store);
	metrics_u64(b, "bellows_store_degraded", "gauge",
	    "1 while the history store fails or falls behind.",
	    s->store_degraded);
	metrics_u64(b, "bellows_store_pending_rows", "gauge",
	    "Rows recorded but not yet committed (the store's lag).",
	    s->store_pending);
	metrics_u64(b, "bellows_store_dropped_rows_total", "counter",
	    "Rows the store dropped (window statistics past its queue).",
	    s->store_dropped);
}

/* One gauge per job: `get` picks its value. */
static void
metrics_per_job(metrics_buf *b, const ctl_metrics_snapshot *s, const char *name,
    const char *type, const char *help,
    double (*get)(const ctl_jobs_job_view *))
{
	metrics_family(b, name, type, help);
	for (uint32_t i = 0; i < s->n_jobs; i++) {
		metrics_printf(b, "%s{bellows_job=\"", name);
		metrics_label(b, s->job[i].name);
		metrics_printf(b, "\"}");
		metrics_value(b, get(&s->job[i]));
	}
}

static double
job_world(const ctl_jobs_job_view *j)
{
	return j->world;
}

static double
job_alive(const ctl_jobs_job_view *j)
{
	return j->alive;
}

static double
job_step(const ctl_jobs_job_view *j)
{
	return (double)j->step;
}

static double
job_windows(const ctl_jobs_job_view *j)
{
	return (double)j->windows;
}

static double
job_sent(const ctl_jobs_job_view *j)
{
	return 4.0 * (double)j->floats_sent;
}

static double
job_raw(const ctl_jobs_job_view *j)
{
	return 4.0 * (double)j->floats_raw;
}

static double
job_saved(const ctl_jobs_job_view *j)
{
	return j->floats_raw > j->floats_sent
	    ? 4.0 * (double)(j->floats_raw - j->floats_sent)
	    : 0;
}

/* One gauge per (job, layer), at most s->layer_series of them; returns
 * the layers left out. `values` picks a job's array, NULL: none. */
static uint64_t
metrics_per_layer(metrics_buf *b, const ctl_metrics_snapshot *s,
    const char *name, const char *help,
    const double *(*values)(const ctl_jobs_job_view *))
{
	uint64_t shown = 0, omitted = 0;

	metrics_family(b, name, "gauge", help);
	for (uint32_t i = 0; i < s->n_jobs; i++) {
		const ctl_jobs_job_view *j = &s->job[i];
		const double *v = values(j);

		for (uint32_t l = 0; l < j->n_layers; l++) {
			if (shown >= s->layer_series) {
				omitted++;
				continue;
			}
			shown++;
			if (v == NULL)
				continue;
			metrics_printf(b, "%s{bellows_job=\"", name);
			metrics_label(b, j->name);
			metrics_printf(b, "\",layer=\"");
			metrics_label(b, j->layers[l].name);
			metrics_printf(b, "\"}");
			metrics_value(b, v[l]);
		}
	}
	return omitted;
}

static const double *
layer_level(const ctl_jobs_job_view *j)
{
	return j->level;
}

static const double *
layer_level_applied(const ctl_jobs_job_view *j)
{
	return j->level_applied;
}

static const double *
layer_norm(const ctl_jobs_job_view *j)
{
	return j->grad_norm;
}

int
ctl_metrics_format(const ctl_metrics_snapshot *s, char **ret_text,
    size_t *ret_len)
{
	metrics_buf b = { 0 };
	uint64_t omitted;

	metrics_process(&b, &s->process);
	metrics_daemon(&b, s);
	metrics_latency(&b, &s->latency);
	metrics_store(&b, s);
	metrics_per_job(&b, s, "bellows_job_world", "gauge",
	    "Ranks in the job.", job_world);
	metrics_per_job(&b, s, "bellows_job_ranks_alive", "gauge",
	    "Ranks of the job heard within rank_timeout_ms.", job_alive);
	metrics_per_job(&b, s, "bellows_job_step", "gauge",
	    "Highest training step a rank of the job reported.", job_step);
	metrics_per_job(&b, s, "bellows_job_windows_total", "counter",
	    "Windows of the job closed by this bellowsd.", job_windows);
	metrics_per_job(&b, s, "bellows_job_sent_bytes_total", "counter",
	    "Gradient bytes the job's ranks sent (4 per float), summed over "
	    "ranks.",
	    job_sent);
	metrics_per_job(&b, s, "bellows_job_raw_bytes_total", "counter",
	    "Gradient bytes the same steps would send uncompressed.", job_raw);
	metrics_per_job(&b, s, "bellows_job_bytes_saved_total", "counter",
	    "Raw minus sent bytes: what compression saved on the wire.",
	    job_saved);
	omitted = metrics_per_layer(&b, s, "bellows_layer_level",
	    "Compression level decided for the layer, in force from the "
	    "newest decision (0: raw).",
	    layer_level);
	metrics_per_layer(&b, s, "bellows_layer_level_applied",
	    "Compression level the layer was sent at in the last window "
	    "closed, as applied (0: raw, e.g. below the size threshold or "
	    "with compression off; NaN: not reported).",
	    layer_level_applied);
	metrics_per_layer(&b, s, "bellows_layer_grad_norm",
	    "L2 norm of the layer's window-summed gradient in the last "
	    "window closed.",
	    layer_norm);
	metrics_u64(&b, "bellows_metrics_layers_omitted", "gauge",
	    "(job, layer) pairs left out of the per-layer families (past "
	    "the cap).",
	    omitted);
	if (b.failed || b.text == NULL) {
		free(b.text);
		return BELLOWS_ENOMEM;
	}
	*ret_text = b.text;
	*ret_len = b.len;
	return 0;
}

/* Reads a small text file whole into buf (NUL-terminated). */
static bool
process_read(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "re");
	size_t n;

	if (f == NULL)
		return false;
	n = fread(buf, 1, cap - 1, f);
	fclose(f);
	buf[n] = '\0';
	return n > 0;
}

/* Seconds since the epoch the machine booted at, from /proc/stat. */
static bool
process_boot_time(double *ret)
{
	char buf[16384];
	const char *line;
	unsigned long long btime;

	if (!process_read("/proc/stat", buf, sizeof(buf)) ||
	    (line = strstr(buf, "\nbtime ")) == NULL ||
	    sscanf(line + 7, "%llu", &btime) != 1)
		return false;
	*ret = (double)btime;
	return true;
}

static uint64_t
process_count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	uint64_t n = 0;

	if (d == NULL)
		return 0;
	while ((de = readdir(d)) != NULL)
		n += de->d_name[0] != '.';
	closedir(d);
	return n > 0 ? n - 1 : 0; /* less the one opendir holds */
}

/* Bytes in use from glibc's allocator: small chunks (uordblks) and
 * blocks mapped on their own (hblkhd). Freed memory the allocator keeps
 * for reuse counts in the resident set but not here, which is what
 * makes a leak tell from fragmentation. 0 where nothing is known
 * (AddressSanitizer's allocator answers zeros). */
static uint64_t
process_heap_bytes(void)
{
	struct mallinfo2 mi = mallinfo2();

	return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
}

int
ctl_metrics_read_process(ctl_metrics_process *p)
{
	char buf[1024];
	const char *rest;
	unsigned long long utime, stime, start, vsize;
	long long rss;
	long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	struct rlimit rl;
	double boot;

	memset(p, 0, sizeof(*p));
	/* After the command's ")" (it may hold spaces and parentheses):
	 * fields 3 (state) on; utime and stime are 14 and 15, starttime
	 * 22, vsize 23, rss 24 (proc(5)). */
	if (ticks <= 0 || page <= 0 ||
	    !process_read("/proc/self/stat", buf, sizeof(buf)) ||
	    (rest = strrchr(buf, ')')) == NULL ||
	    sscanf(rest + 1,
		" %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d "
		"%*d %*d %*d %*d %*d %llu %llu %lld",
		&utime, &stime, &start, &vsize, &rss) != 5 ||
	    !process_boot_time(&boot))
		return BELLOWS_EIO;
	p->cpu_seconds = (double)(utime + stime) / (double)ticks;
	p->start_seconds = boot + (double)start / (double)ticks;
	p->vm_bytes = vsize;
	p->rss_bytes = rss > 0 ? (uint64_t)rss * (uint64_t)page : 0;
	p->heap_bytes = process_heap_bytes();
	p->open_fds = process_count_fds();
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		p->max_fds = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX
							  : rl.rlim_cur;
	p->known = true;
	return 0;
}
