/* main - bellowsd: wires the configuration, the sockets, the job table,
 * the history store and the event loop together, and is the only place
 * that exits.
 *
 * Signals arrive through a signalfd polled by the loop, so handlers never
 * run inside library code: SIGTERM and SIGINT stop the loop cleanly
 * (what clients sent before the stop is still read, within bounds:
 * ctl_server_drain), SIGHUP reloads the configuration (validated completely
 * first; on error the old one stays in force). The file is also watched: a
 * change on disk reloads it the same way once the writer is done. The file is
 * read and validated on reload's reader thread; the loop only swaps the result
 * in, so a reload never holds up decisions or STATUS.
 *
 * With a history database (the default), the live jobs it holds are
 * rebuilt before the sockets are read, so ranks that outlived a previous
 * bellowsd find their job as it was. The store never stops the daemon: a
 * database that cannot be opened or written leaves it running without
 * history (degraded, retried).
 */
#include "common/clock.h"
#include "common/wire.h"
#include "common/msg.h"
#include "cmdline.h"
#include "policyhost/config.h"
#include "jobs.h"
#include "policyhost/log.h"
#include "loop.h"
#include "ctl_metrics.h"
#include "metrics_http.h"
#include "notify.h"
#include "reload.h"
#include "server.h"
#include "store.h"
#include "watch.h"

#include "bellows_config.h"

#include <bellows/error.h>

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <unistd.h>
#include <zmq.h>

#define MAIN_CRON_MS   100  /* liveness and window timeouts resolution */
#define MAIN_SETTLE_MS 100  /* quiet after a file change before reloading */
#define MAIN_DRAIN_MS  5000 /* longest wait for the store at exit */
/* At a stop, what clients already sent is read until this long passes
 * without a message, within a total and a count: */
#define MAIN_DRAIN_QUIET_MS 20
#define MAIN_DRAIN_MAX_MS   500
#define MAIN_DRAIN_MSGS     4096

typedef struct daemon_state {
	ctl_cmdline cl;          /* what the command line asks */
	const char *policy_path; /* --policy */
	const char *control;     /* ROUTER endpoint bound */
	const char *publish;     /* PUB endpoint bound */
	const char *db;          /* history file, NULL with --no-db */
	const char *metrics_at;  /* /metrics address, NULL: not served */
	void *zctx;              /* ZeroMQ context */
	uint64_t instance;       /* this run's instance id, odd */
	ctl_config *cfg;         /* first configuration, until reload owns it */
	ctl_reload *reload;      /* configuration in force and its reloads */
	ctl_watch *watch;        /* the file on disk, NULL if not watched */
	ctl_watch *clients;      /* the clients directory, NULL without
				  * security or if not watched */
	bool secure;             /* security was on at start (read once) */
	ctl_jobs *jobs;          /* job table */
	ctl_server *server;      /* sockets */
	ctl_store *store;        /* history, NULL with --no-db */
	ctl_loop *loop;          /* event loop */
	ctl_metrics_http *metrics; /* /metrics actor, NULL: not served */
	char *metrics_file;       /* the file's metrics_listen at start (owned),
				   * NULL: none or --metrics-listen given */
	ctl_jobs_job_view *views; /* max_jobs entries for its snapshots */
	uint32_t n_views;         /* entries allocated in views */
	uint64_t started_ms;      /* monotonic, for the uptime */
	uint64_t reloads;         /* reloads done that the store has seen */
	uint32_t queue_mb; /* peer_queue_mb the sockets were bound with */
	int sigfd;         /* signalfd */
} daemon_state;

/* Cron: every duty that depends on time passing.
 * - ranks silent for rank_timeout_ms are declared lost;
 * - windows open for window_timeout_ms close with the ranks they have;
 * - jobs without live ranks for job_idle_ms are forgotten. */
static void
main_cron(ctl_loop *loop, uint64_t now_ms, void *arg)
{
	daemon_state *d = arg;

	ctl_jobs_tick(d->jobs, now_ms);
	ctl_store_tick(d->store, now_ms);
}

/* Keeps the first n views the ones /metrics may show
 * (ctl_config_metrics_shows), in their order; returns how many. */
static uint32_t
main_metrics_visible(const ctl_config *cfg, ctl_jobs_job_view *v, uint32_t n)
{
	uint32_t kept = 0;

	for (uint32_t i = 0; i < n; i++) {
		if (ctl_config_metrics_shows(cfg, v[i].name))
			v[kept++] = v[i];
	}
	return kept;
}

/* Every CTL_METRICS_PERIOD_MS: a snapshot of the daemon's state,
 * formatted here and handed to the /metrics actor, which serves it until
 * the next one. */
static void
main_metrics(ctl_loop *loop, uint64_t now_ms, void *arg)
{
	daemon_state *d = arg;
	const ctl_config *cfg = ctl_reload_config(d->reload);
	ctl_metrics_snapshot s = { .layer_series = CTL_METRICS_LAYER_SERIES };
	ctl_reload_counters rc;
	com_status_reply st = { 0 };
	char *text;
	size_t len;

	(void)loop;
	if (d->n_views < cfg->max_jobs) {
		ctl_jobs_job_view *grown = realloc(d->views,
		    cfg->max_jobs * sizeof(*grown));

		if (grown == NULL)
			return; /* the last snapshot stays served */
		d->views = grown;
		d->n_views = cfg->max_jobs;
	}
	s.uptime_ms = now_ms - d->started_ms;
	ctl_metrics_read_process(&s.process); /* left out if it fails */
	ctl_jobs_get_counters(d->jobs, &s.jobs);
	ctl_jobs_latency_histogram(d->jobs, &s.latency);
	ctl_server_counts(d->server, &s.messages, &s.dropped, &s.pub_dropped);
	ctl_reload_get_counters(d->reload, &rc);
	s.reloads = rc.done;
	s.reloads_refused = rc.refused;
	s.store = d->store != NULL;
	if (d->store != NULL && ctl_store_status(d->store, &st) == 0) {
		s.store_degraded = st.store_degraded;
		s.store_pending = st.store_pending;
		s.store_dropped = st.store_dropped;
	}
	free(st.store_error);
	s.n_jobs = main_metrics_visible(cfg, d->views,
	    ctl_jobs_views(d->jobs, d->views, d->n_views));
	s.job = d->views;
	if (ctl_metrics_format(&s, &text, &len) == 0)
		ctl_metrics_http_publish(d->metrics, text, len);
}

/* Starts the /metrics actor on `listen_at` with the file's token, warns
 * about who can read it, and publishes a first snapshot and one every
 * CTL_METRICS_PERIOD_MS. Returns 0 or -1 (said on stderr or logged). */
static int
main_metrics_start(daemon_state *d, const char *listen_at)
{
	const ctl_config *cfg = ctl_reload_config(d->reload);
	char err[256];

	if (ctl_metrics_http_open(listen_at, &d->metrics, err, sizeof(err)) !=
	    0) {
		fprintf(stderr, "bellowsd: %s\n", err);
		return -1;
	}
	if (ctl_metrics_http_set_token(d->metrics, cfg->metrics.token) != 0)
		return ctl_log_fail(-1, CTL_LOG_ERROR, "main",
		    "out of memory for the metrics token");
	if (cfg->security.enabled && cfg->metrics.token == NULL)
		ctl_log(CTL_LOG_WARN, "main",
		    "/metrics shows no job or layer series: daemon.security "
		    "is on and daemon.metrics has no token_file "
		    "(docs/metrics.md#access)");
	else if (!ctl_metrics_listen_local(listen_at))
		ctl_log(CTL_LOG_WARN, "main",
		    "metrics on '%s' are readable by %s who reaches it "
		    "(job and layer names included)",
		    listen_at,
		    cfg->metrics.token != NULL ? "anyone with the token"
					       : "anyone");
	d->started_ms = com_clock_ms();
	main_metrics(d->loop, d->started_ms, d);
	return ctl_loop_add_timer(d->loop, CTL_METRICS_PERIOD_MS, main_metrics,
		   d) != 0
	    ? -1
	    : 0;
}

/* Logs each .pub of the clients directory that was not trusted: the
 * others apply (a key removed beside a broken file is still removed). */
static void
main_log_skipped(const ctl_security_conf *sec)
{
	const char *line = sec->enabled ? sec->skipped : NULL;

	while (line != NULL && *line != '\0') {
		const char *end = strchr(line, '\n');
		int len = end != NULL ? (int)(end - line) : (int)strlen(line);

		ctl_log(CTL_LOG_ERROR, "main",
		    "%.*s: skipped, that client is not trusted", len, line);
		line = end != NULL ? end + 1 : NULL;
	}
}

/* Says at start which keys are trusted, and which files were not. */
static void
main_log_security(const ctl_security_conf *sec)
{
	main_log_skipped(sec);
	ctl_log(CTL_LOG_INFO, "main",
	    "security: CURVE on both endpoints, %u trusted client keys from "
	    "'%s'",
	    sec->n_clients, sec->clients);
}

/* Once per loop turn: what the turn recorded goes to the store's writer
 * (a reload's configuration first, so its events name it). */
static void
main_before_sleep(ctl_loop *loop, void *arg)
{
	daemon_state *d = arg;
	ctl_reload_counters rc;

	(void)loop;
	ctl_reload_get_counters(d->reload, &rc);
	if (rc.done != d->reloads) {
		const ctl_config *cfg = ctl_reload_config(d->reload);

		d->reloads = rc.done;
		if (cfg->peer_queue_mb != d->queue_mb)
			ctl_log(CTL_LOG_WARN, "main",
			    "peer_queue_mb is %u in the reloaded file; the "
			    "send queues keep %u until bellowsd restarts",
			    cfg->peer_queue_mb, d->queue_mb);
		if (cfg->security.enabled != d->secure)
			ctl_log(CTL_LOG_WARN, "main",
			    "daemon.security is %s in the reloaded file; the "
			    "sockets keep it %s until bellowsd restarts",
			    cfg->security.enabled ? "set" : "unset",
			    d->secure ? "on" : "off");
		/* The new clients directory takes effect for the next
		 * connection; those authenticated stay (server.h). */
		if (ctl_server_set_clients(d->server, &cfg->security) != 0)
			ctl_log(CTL_LOG_ERROR, "main",
			    "out of memory: the trusted keys were not "
			    "replaced");
		else if (cfg->security.enabled && d->secure) {
			main_log_skipped(&cfg->security);
			ctl_log(CTL_LOG_INFO, "main",
			    "%u trusted client keys from '%s'",
			    cfg->security.n_clients, cfg->security.clients);
		}
		if (d->metrics_file != NULL &&
		    (cfg->metrics_listen == NULL ||
			strcmp(cfg->metrics_listen, d->metrics_file) != 0))
			ctl_log(CTL_LOG_WARN, "main",
			    "daemon.metrics_listen is '%s' in the reloaded "
			    "file; /metrics stays on '%s' until bellowsd "
			    "restarts",
			    cfg->metrics_listen != NULL ? cfg->metrics_listen
							: "(none)",
			    d->metrics_file);
		if (ctl_metrics_http_set_token(d->metrics,
			cfg->metrics.token) != 0)
			ctl_log(CTL_LOG_ERROR, "main",
			    "out of memory: the metrics token was not "
			    "replaced");
		ctl_store_config(d->store, cfg);
		ctl_store_set_conf(d->store, &cfg->store);
	}
	ctl_store_sync_events(d->store, ctl_jobs_events(d->jobs));
	ctl_store_flush(d->store);
}

static void
main_on_signal(ctl_loop *loop, void *arg)
{
	daemon_state *d = arg;
	struct signalfd_siginfo si;

	while (read(d->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			ctl_reload_request(d->reload, true);
		} else {
			ctl_log(CTL_LOG_INFO, "main", "signal %u: stopping",
			    si.ssi_signo);
			ctl_loop_stop(loop);
		}
	}
}

/* The clients directory changed: the file is read again even though its
 * text did not change, as on SIGHUP, which reads the directory again. */
static void
main_on_clients(void *arg)
{
	daemon_state *d = arg;

	ctl_reload_request(d->reload, true);
}

static void
main_config_line(void *arg, const char *text)
{
	(void)arg;
	fprintf(stderr, "bellowsd: %s\n", text);
}

/* Refuses endpoints other hosts can reach without security, unless the
 * file allows it (then warns). Returns 0 or BELLOWS_ECONFIG. */
static int
main_check_endpoints(const ctl_config *cfg, const char *control,
    const char *publish)
{
	const char *eps[2] = { control, publish };

	if (cfg->security.enabled)
		return 0;
	for (int i = 0; i < 2; i++) {
		if (ctl_server_endpoint_local(eps[i]))
			continue;
		if (!cfg->allow_insecure) {
			fprintf(stderr,
			    "bellowsd: refusing to bind '%s' without "
			    "daemon.security: anyone who reaches it could "
			    "steer every job (see docs/security.md); set "
			    "daemon.security, or daemon.allow_insecure: true "
			    "on a trusted network\n",
			    eps[i]);
			return BELLOWS_ECONFIG;
		}
		ctl_log(CTL_LOG_WARN, "main",
		    "'%s' is reachable from other hosts without "
		    "authentication or encryption (daemon.allow_insecure): "
		    "anyone who reaches it can steer every job",
		    eps[i]);
	}
	return 0;
}

/* Loads --policy into d->cfg. An invalid file gets every error on
 * stderr, one per line as policy check prints them, so that one start
 * shows all that must be fixed. */
static int
main_load_config(daemon_state *d)
{
	ctl_config_errors *errs = malloc(sizeof(*errs));
	int r;

	if (errs == NULL) {
		fprintf(stderr, "bellowsd: %s: %s\n", d->policy_path,
		    bellows_strerror(BELLOWS_ENOMEM));
		return BELLOWS_ENOMEM;
	}
	r = ctl_config_load_all(d->policy_path, &d->cfg, errs);
	if (r != 0)
		ctl_config_errors_emit(errs, r, d->policy_path,
		    main_config_line, NULL);
	free(errs);
	return r;
}

/* Settles what the command line left to the loaded configuration: the endpoints
 * (checked for exposure) and the /metrics address (checked). Returns 0 or -1
 * (said on stderr). */
static int
main_configure(daemon_state *d)
{
	char err[CTL_CONFIG_ERR_MAX];
	struct sockaddr_storage ss;
	socklen_t sslen;

	if (ctl_config_timing_warning(d->cfg, err, sizeof(err)))
		ctl_log(CTL_LOG_WARN, "main", "%s: %s", d->policy_path, err);
	d->control = d->cl.control;
	if (d->control == NULL)
		d->control = d->cfg->control != NULL ? d->cfg->control
						     : COM_DEFAULT_CONTROL;
	d->publish = d->cl.publish;
	if (d->publish == NULL)
		d->publish = d->cfg->publish != NULL ? d->cfg->publish
						     : COM_DEFAULT_PUBLISH;
	if (main_check_endpoints(d->cfg, d->control, d->publish) != 0)
		return -1;
	d->metrics_at = d->cl.metrics;
	if (d->metrics_at == NULL && d->cfg->metrics_listen != NULL) {
		d->metrics_at = d->cfg->metrics_listen;
		if ((d->metrics_file = strdup(d->metrics_at)) == NULL) {
			fprintf(stderr, "bellowsd: out of memory\n");
			return -1;
		}
	}
	if (d->metrics_at != NULL &&
	    ctl_metrics_parse_listen(d->metrics_at, &ss, &sslen, err,
		sizeof(err)) != 0) {
		fprintf(stderr, "bellowsd: --metrics-listen: %s\n", err);
		return -1;
	}
	return 0;
}

/* Blocks the signals the loop reads from d->sigfd and picks this run's
 * instance id. */
static void
main_signals(daemon_state *d)
{
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	d->sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (getrandom(&d->instance, sizeof(d->instance), 0) !=
	    sizeof(d->instance))
		d->instance = com_clock_wall_ms() ^ ((uint64_t)getpid() << 32);
	d->instance |= 1; /* 0 means "unknown" to agents */
}

/* Opens the history store on d->db and recovers the live jobs it holds.
 * Returns 0 or -1 (said on stderr). */
static int
main_open_store(daemon_state *d)
{
	if (d->db == NULL) {
		ctl_log(CTL_LOG_WARN, "main",
		    "--no-db: no history is kept and jobs are not recovered "
		    "after a restart");
		return 0;
	}
	/* Problems with the file itself leave the store degraded, not the
	 * daemon stopped. */
	if (ctl_store_open(d->db, d->zctx, &d->cfg->store, d->instance,
		ctl_jobs_events(d->jobs), &d->store) != 0) {
		fprintf(stderr, "bellowsd: cannot set up the store\n");
		return -1;
	}
	ctl_store_config(d->store, d->cfg);
	ctl_jobs_set_store(d->jobs, d->store);
	ctl_server_set_store(d->server, d->store);
	ctl_jobs_recover(d->jobs, com_clock_ms());
	if (ctl_store_start(d->store) != 0) {
		fprintf(stderr, "bellowsd: cannot start the store\n");
		return -1;
	}
	return 0;
}

/* Opens the sockets, the job table, the loop and the store. Returns 0
 * or -1 (said on stderr). */
static int
main_open(daemon_state *d)
{
	com_limits limits;

	main_signals(d);
	com_limits_default(&limits);
	d->zctx = zmq_ctx_new();
	if (d->sigfd < 0 || d->zctx == NULL) {
		fprintf(stderr, "bellowsd: cannot set up signals or ZeroMQ\n");
		return -1;
	}
	d->queue_mb = d->cfg->peer_queue_mb;
	d->secure = d->cfg->security.enabled;
	if (ctl_server_open(d->zctx, d->control, d->publish, &limits,
		d->queue_mb, d->cfg->max_layers, d->instance, &d->cfg->security,
		&d->server) != 0)
		return -1;
	if (d->secure)
		main_log_security(&d->cfg->security);
	if (ctl_jobs_new(d->cfg, d->instance, ctl_server_publish, d->server,
		&d->jobs) != 0 ||
	    ctl_loop_new(&d->loop) != 0) {
		fprintf(stderr, "bellowsd: out of memory\n");
		return -1;
	}
	ctl_jobs_set_sender(d->jobs, ctl_server_send, d->server);
	return main_open_store(d);
}

/* Hands the configuration to its reloader, watches the file and the
 * clients directory, and puts every source on the loop. Returns 0 or
 * -1. */
static int
main_attach(daemon_state *d)
{
	if (ctl_reload_new(d->policy_path, &d->cfg, d->jobs, &d->reload) != 0) {
		fprintf(stderr, "bellowsd: out of memory\n");
		return -1;
	}
	/* Without inotify the daemon still reloads on SIGHUP. */
	if (ctl_watch_open(d->policy_path, MAIN_SETTLE_MS, ctl_reload_on_change,
		d->reload, &d->watch) != 0)
		ctl_log(CTL_LOG_WARN, "main",
		    "'%s' is not watched for changes; send SIGHUP to reload",
		    d->policy_path);
	/* A .pub added to or removed from the clients directory reloads
	 * the whole file, which reads the directory again. */
	if (d->secure &&
	    ctl_watch_open_dir(ctl_reload_config(d->reload)->security.clients,
		MAIN_SETTLE_MS, main_on_clients, d, &d->clients) != 0)
		ctl_log(CTL_LOG_WARN, "main",
		    "the clients directory is not watched for changes; send "
		    "SIGHUP after adding or removing a certificate");
	ctl_server_set_jobs(d->server, d->jobs);
	if ((d->watch != NULL && ctl_watch_attach(d->watch, d->loop) != 0) ||
	    (d->clients != NULL &&
		ctl_watch_attach(d->clients, d->loop) != 0) ||
	    ctl_reload_attach(d->reload, d->zctx, d->loop) != 0 ||
	    ctl_server_attach(d->server, d->loop) != 0 ||
	    (d->store != NULL && ctl_store_attach(d->store, d->loop) != 0) ||
	    ctl_loop_add_fd(d->loop, d->sigfd, main_on_signal, d) != 0 ||
	    ctl_loop_add_timer(d->loop, MAIN_CRON_MS, main_cron, d) != 0)
		return -1;
	if (d->metrics_at != NULL && main_metrics_start(d, d->metrics_at) != 0)
		return -1;
	ctl_loop_set_before_sleep(d->loop, main_before_sleep, d);
	return 0;
}

/* Says bellowsd started, runs the loop until a signal stops it, then
 * reads what clients sent before the stop. Returns 0 or -1. */
static int
main_serve(daemon_state *d)
{
	const char *db = d->db != NULL ? d->db : "(none)";
	uint32_t drained;

	ctl_log(CTL_LOG_INFO, "main",
	    "bellowsd %s: control %s, publish %s, policy '%s', history '%s', "
	    "metrics %s, instance %016" PRIx64,
	    BELLOWS_VERSION, d->control, d->publish, d->policy_path, db,
	    d->metrics_at != NULL ? d->metrics_at : "(none)", d->instance);
	ctl_events_add(ctl_jobs_events(d->jobs), CTL_EVENT_DAEMON_STARTED, NULL,
	    "bellowsd %s started: instance %016" PRIx64
	    ", policy '%s', history '%s'",
	    BELLOWS_VERSION, d->instance, d->policy_path, db);
	/* Sockets bound, history recovered: the service manager may start
	 * what depends on bellowsd. */
	ctl_notify_ready(d->control);
	if (ctl_loop_run(d->loop) != 0) {
		ctl_log(CTL_LOG_ERROR, "main", "event loop failed");
		return -1;
	}
	ctl_notify_stopping();
	drained = ctl_server_drain(d->server, MAIN_DRAIN_QUIET_MS,
	    MAIN_DRAIN_MAX_MS, MAIN_DRAIN_MSGS);
	if (drained > 0)
		ctl_log(CTL_LOG_INFO, "main",
		    "read %" PRIu32 " message(s) sent before the stop",
		    drained);
	ctl_log(CTL_LOG_INFO, "main", "stopped");
	return 0;
}

/* Closes whatever d holds, in the order the parts borrow from each
 * other; d may be half built. */
static void
main_close(daemon_state *d)
{
	ctl_loop_destroy(&d->loop);
	ctl_metrics_http_close(&d->metrics);
	free(d->views);
	free(d->metrics_file);
	ctl_watch_close(&d->watch);
	ctl_watch_close(&d->clients);
	if (d->store != NULL && d->jobs != NULL)
		ctl_store_sync_events(d->store, ctl_jobs_events(d->jobs));
	/* The store borrows the job table's event ring, and the jobs the
	 * store and the configuration: store first, then jobs. */
	/* Resumes read the history on threads of their own. */
	ctl_jobs_cancel_resumes(d->jobs);
	ctl_store_close(&d->store, MAIN_DRAIN_MS);
	ctl_jobs_destroy(&d->jobs);
	ctl_reload_destroy(&d->reload);
	ctl_server_close(&d->server);
	if (d->zctx != NULL)
		zmq_ctx_term(d->zctx);
	if (d->sigfd >= 0)
		close(d->sigfd);
	ctl_config_destroy(&d->cfg);
}

int
main(int argc, char **argv)
{
	daemon_state d = { .sigfd = -1 };
	int rc;

	if ((rc = ctl_cmdline_parse(argc, argv, &d.cl)) >= 0)
		return rc;
	if (d.cl.level_given)
		ctl_log_set_level(d.cl.level);
	d.policy_path = d.cl.policy;
	d.db = d.cl.db;
	if (main_load_config(&d) != 0)
		return 1;
	rc = main_configure(&d) == 0 && main_open(&d) == 0 &&
		main_attach(&d) == 0 && main_serve(&d) == 0
	    ? 0
	    : 1;
	main_close(&d);
	return rc;
}
