/* agent - the libbellows API, see bellows/agent.h.
 *
 * This file is the training thread's side: it validates the configuration,
 * keeps the step and window bookkeeping, feeds gradients and activation
 * statistics to the window statistics (window.c) and timed sends to the
 * window's timings (timing.c), answers how a layer is sent under the
 * decision in force (and reports the level each layer was applied at),
 * and hands finished windows and step boundaries to the I/O module
 * (io.c), which owns the sockets, the decision table and the only wait
 * the trainer ever does.
 */
#include <bellows/agent.h>

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bellows_config.h"
#include "common/cert.h"
#include "common/clock.h"
#include "io.h"
#include "kernels/kernels.h"
#include "common/msg.h"
#include "common/stat_table.h"
#include "common/utf8.h"
#include "timing.h"
#include "aggregate.h"
#include "agent_window.h"

#define AGENT_MAX_NAME    255        /* bytes in a job or layer name */
#define AGENT_MAX_LAYERS  65536      /* layers in the table */
#define AGENT_MAX_WORLD   65536      /* ranks in a job (com_limits) */
#define AGENT_MAX_QUEUE   (1u << 20) /* largest report queue */
#define AGENT_MAX_KEEP_MB 65536      /* largest keep_reports_mb */
/* Reports held by default: a day of windows, one a minute, of a 1,000-layer
 * model (222 KiB a report with every statistic measured, 1,440 of them
 * 312 MiB; docs/operations.md). Held only while bellowsd has not recorded
 * them. */
#define AGENT_KEEP_MB 320
#define AGENT_KNOWN_FLAGS                                                      \
	(BELLOWS_LAYER_NO_ACCUMULATOR | BELLOWS_LAYER_MOMENTUM |               \
	    BELLOWS_LAYER_DEVICE | BELLOWS_LAYER_EXP_HIST)

/* The API's dtypes are the kernels'. */
_Static_assert((int)BELLOWS_DTYPE_F32 == (int)KERN_F32 &&
	(int)BELLOWS_DTYPE_F16 == (int)KERN_F16 &&
	(int)BELLOWS_DTYPE_BF16 == (int)KERN_BF16,
    "bellows_dtype and kern_dtype differ");

struct bellows_agent {
	char *job;                    /* job name */
	uint32_t rank;                /* this rank */
	uint32_t n_layers;            /* layers in the table */
	uint32_t window_steps;        /* steps per window; 0: explicit */
	uint32_t decision_timeout_ms; /* longest wait at an apply step */
	bellows_log_fn *log;          /* log sink, may be NULL */
	void *log_arg;                /* passed to log */
	int log_level;                /* highest level passed to log */
	agent_window win;             /* statistics of the open window */
	agent_timing timing;          /* timed sends of the open window */
	agent_io *io;                 /* the I/O thread and its hand-off */
	const com_decision *in_force; /* owned by io, see agent_io_in_force */
	com_layer_stats *stats;       /* n_layers, reused for every report */
	bool in_step;                 /* between step_begin and step_end */
	bool stepped;                 /* a step was begun since open */
	uint64_t step;                /* current step, or the next one */
	uint64_t step_start_ns;       /* when step_begin was entered */
	uint64_t window;              /* index of the open window */
	uint64_t first_step;          /* first step of the open window */
	com_timings timings;          /* of the open window */
	double lr;                    /* LR of the window's first step */
	double lr_next;               /* LR the last step said comes next */
	uint64_t closed_window;       /* last window closed + 1; 0 = none */
	uint32_t batch_size;          /* last step's batch size */
	uint64_t epoch;               /* last step's epoch */
	com_decision resid_default;   /* only its default residual plan:
				       * handed out for decisions without
				       * one */
	uint8_t *table_cur;           /* copy of the codec table in force */
	size_t table_cur_len;         /* its bytes; 0: none */
	uint8_t *table_prev;          /* the distinct table before it */
	size_t table_prev_len;        /* its bytes; 0: none */
	bool agg_on;                  /* aggregate: node or job */
	bool agg_leader;              /* it sends its group's report */
	bellows_allreduce_fn *allreduce; /* the group's collective */
	void *allreduce_arg;             /* passed to it */
	agent_aggregate agg;             /* the reduction's buffers */
	double *applied;                 /* n_layers: the levels the trainer
					  * said it applies
					  * (bellows_agent_applied_levels) */
	bool applied_given;              /* applied holds a call's levels */
	uint64_t applied_seq;            /* seq of the decision in force at
					  * that call: a later decision
					  * makes them stale */
};

__attribute__((format(printf, 5, 6))) static void
agent_log(bellows_log_fn *log, void *arg, int max_level, int level,
    const char *fmt, ...)
{
	char line[512];
	va_list ap;

	if (log == NULL || level > max_level)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	log(arg, level, line);
}

/* Checks a job or layer name: 1..255 bytes of UTF-8 without control
 * characters (what bellowsd accepts, common/wire_in.c). */
static const char *
agent_name_problem(const char *name)
{
	size_t len;

	if (name == NULL)
		return "is missing";
	len = strnlen(name, AGENT_MAX_NAME + 1);
	if (len == 0)
		return "is empty";
	if (len > AGENT_MAX_NAME)
		return "is longer than 255 bytes";
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];

		if (c < 0x20 || c == 0x7f)
			return "contains a control character";
	}
	if (!com_utf8_valid(name, len))
		return "is not UTF-8";
	return NULL;
}

static int
agent_name_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Returns BELLOWS_EINVAL for a duplicate layer name (logged), 0, or
 * BELLOWS_ENOMEM. */
static int
agent_check_unique(const bellows_agent_config *cfg)
{
	const char **names;
	int rc = 0;

	if ((names = malloc(cfg->n_layers * sizeof(*names))) == NULL)
		return BELLOWS_ENOMEM;
	for (uint32_t i = 0; i < cfg->n_layers; i++)
		names[i] = cfg->layers[i].name;
	qsort(names, cfg->n_layers, sizeof(*names), agent_name_cmp);
	for (uint32_t i = 1; i < cfg->n_layers; i++) {
		if (strcmp(names[i - 1], names[i]) == 0) {
			agent_log(cfg->log, cfg->log_arg, cfg->log_level,
			    BELLOWS_LOG_ERROR,
			    "bellows_agent_open: layer name \"%s\" is used "
			    "twice",
			    names[i]);
			rc = BELLOWS_EINVAL;
			break;
		}
	}
	free(names);
	return rc;
}

static int
agent_check_layer(const bellows_agent_config *cfg, uint32_t i)
{
	const bellows_layer *l = &cfg->layers[i];
	const char *problem;
	uint64_t product = 1;

	if ((problem = agent_name_problem(l->name)) != NULL) {
		agent_log(cfg->log, cfg->log_arg, cfg->log_level,
		    BELLOWS_LOG_ERROR,
		    "bellows_agent_open: the name of layer "
		    "%u %s",
		    i, problem);
		return BELLOWS_EINVAL;
	}
	if (l->numel == 0)
		problem = "has numel 0";
	else if (l->ndim > COM_MAX_NDIM)
		problem = "has more than 8 dimensions";
	else if (l->ndim > 0 && l->shape == NULL)
		problem = "has ndim > 0 but no shape";
	else if ((l->flags & ~(uint32_t)AGENT_KNOWN_FLAGS) != 0)
		problem = "has unknown flags";
	if (problem == NULL && l->ndim > 0) {
		/* Saturates on overflow: no numel can match then. */
		for (uint32_t d = 0; d < l->ndim; d++) {
			if (l->shape[d] != 0 &&
			    product > UINT64_MAX / l->shape[d]) {
				product = 0;
				break;
			}
			product *= l->shape[d];
		}
		if (product != l->numel)
			problem = "has a shape whose product is not numel";
	}
	if (problem == NULL)
		return 0;
	agent_log(cfg->log, cfg->log_arg, cfg->log_level, BELLOWS_LOG_ERROR,
	    "bellows_agent_open: layer %u (%s) %s", i, l->name, problem);
	return BELLOWS_EINVAL;
}

/* The run identity the agent sends: cfg->run_id, else the launcher's
 * (BELLOWS_RUN_ID, then TORCHELASTIC_RUN_ID), else "". torchrun sets
 * TORCHELASTIC_RUN_ID to "none" when it was given no --rdzv-id: the same
 * word in every launch, so no identity (taken as one, a relaunch would
 * rejoin the ended run and its reports be dropped as stale). *ret_from
 * names where it came from, for messages. Borrowed from cfg or the
 * environment. */
static const char *
agent_run_id(const bellows_agent_config *cfg, const char **ret_from)
{
	static const char *const vars[] = { "BELLOWS_RUN_ID",
		"TORCHELASTIC_RUN_ID" };
	const char *v;

	*ret_from = "run_id";
	if (cfg->run_id != NULL)
		return cfg->run_id;
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		v = getenv(vars[i]);
		if (v == NULL || v[0] == '\0' ||
		    (i == 1 && strcmp(v, "none") == 0))
			continue;
		*ret_from = vars[i];
		return v;
	}
	return "";
}

/* The environment's `var`, or `fallback` when it is unset or empty: the
 * defaults bellows_agent_config_init gives, which a field set after it
 * overrides. */
static const char *
agent_env(const char *var, const char *fallback)
{
	const char *v = getenv(var);

	return v != NULL && v[0] != '\0' ? v : fallback;
}

/* The kern_precision of cfg's stats_precision, else of the environment's
 * BELLOWS_STATS_PRECISION (unset or empty: relaxed); -1 for a value that
 * is neither "relaxed" nor "exact". *ret_from and *ret_value name where it
 * came from and what it was, for messages. */
static int
agent_stats_precision(const bellows_agent_config *cfg, const char **ret_from,
    const char **ret_value)
{
	const char *v = cfg->stats_precision;

	*ret_from = "stats_precision";
	if (v == NULL) {
		*ret_from = "BELLOWS_STATS_PRECISION";
		v = agent_env("BELLOWS_STATS_PRECISION", "relaxed");
	}
	*ret_value = v;
	if (strcmp(v, "relaxed") == 0)
		return KERN_PRECISION_RELAXED;
	if (strcmp(v, "exact") == 0)
		return KERN_PRECISION_EXACT;
	return -1;
}

/* A key file: `field` of cfg, else the environment's `var` (unset or
 * empty: none). *ret_from names where it came from, for messages. */
static const char *
agent_key_path(const char *field, const char *name, const char *var,
    const char **ret_from)
{
	const char *v;

	*ret_from = name;
	if (field != NULL)
		return field;
	*ret_from = var;
	if ((v = getenv(var)) != NULL && v[0] != '\0')
		return v;
	return NULL;
}

/* Loads the CURVE keys of cfg (or the environment) into *ret_server and
 * *ret_client and sets *ret_curve; neither key: *ret_curve false.
 * Returns 0 or BELLOWS_EINVAL, logged: only one key, a file that does not
 * load, a client certificate without its secret key. */
static int
agent_load_keys(const bellows_agent_config *cfg, com_cert *ret_server,
    com_cert *ret_client, bool *ret_curve)
{
	const char *sfrom, *cfrom;
	const char *spath = agent_key_path(cfg->server_key, "server_key",
	    "BELLOWS_SERVER_KEY", &sfrom);
	const char *cpath = agent_key_path(cfg->client_key, "client_key",
	    "BELLOWS_CLIENT_KEY", &cfrom);
	char err[512];
	int rc;

	*ret_curve = false;
	if (spath == NULL && cpath == NULL)
		return 0;
	if (spath == NULL || cpath == NULL) {
		agent_log(cfg->log, cfg->log_arg, cfg->log_level,
		    BELLOWS_LOG_ERROR,
		    "bellows_agent_open: %s is set (%s) but %s is not: CURVE "
		    "needs both the server's public key and this client's "
		    "secret key",
		    spath != NULL ? sfrom : cfrom,
		    spath != NULL ? spath : cpath,
		    spath != NULL ? "client_key (BELLOWS_CLIENT_KEY)"
				  : "server_key (BELLOWS_SERVER_KEY)");
		return BELLOWS_EINVAL;
	}
	if ((rc = com_cert_load(spath, ret_server, err, sizeof(err))) != 0) {
		agent_log(cfg->log, cfg->log_arg, cfg->log_level,
		    BELLOWS_LOG_ERROR, "bellows_agent_open: %s %s: %s", sfrom,
		    spath, rc == BELLOWS_EINVAL ? err : bellows_strerror(rc));
		return BELLOWS_EINVAL;
	}
	if ((rc = com_cert_load(cpath, ret_client, err, sizeof(err))) != 0) {
		agent_log(cfg->log, cfg->log_arg, cfg->log_level,
		    BELLOWS_LOG_ERROR, "bellows_agent_open: %s %s: %s", cfrom,
		    cpath, rc == BELLOWS_EINVAL ? err : bellows_strerror(rc));
		return BELLOWS_EINVAL;
	}
	if (ret_client->secret_key[0] == '\0') {
		agent_log(cfg->log, cfg->log_arg, cfg->log_level,
		    BELLOWS_LOG_ERROR,
		    "bellows_agent_open: %s %s is a public certificate; the "
		    "client needs its secret one (NAME.key)",
		    cfrom, cpath);
		return BELLOWS_EINVAL;
	}
	agent_log(cfg->log, cfg->log_arg, cfg->log_level, BELLOWS_LOG_INFO,
	    "CURVE: server key %s, client key %s", spath, cpath);
	*ret_curve = true;
	return 0;
}

static int
agent_validate(const bellows_agent_config *cfg)
{
	const char *problem = NULL;
	const char *job_problem;
	int rc;

	/* Checked first: a struct of another size has other fields. */
	if (cfg->size != sizeof(*cfg)) {
		agent_log(cfg->log, cfg->log_arg, cfg->log_level,
		    BELLOWS_LOG_ERROR,
		    "bellows_agent_open: config size %u "
		    "does not match this library's %zu (call "
		    "bellows_agent_config_init first)",
		    cfg->size, sizeof(*cfg));
		return BELLOWS_EINVAL;
	}
	if ((job_problem = agent_name_problem(cfg->job)) != NULL) {
		agent_log(cfg->log, cfg->log_arg, cfg->log_level,
		    BELLOWS_LOG_ERROR, "bellows_agent_open: the job name %s",
		    job_problem);
		return BELLOWS_EINVAL;
	}
	if (cfg->control == NULL || cfg->control[0] == '\0')
		problem = "control endpoint is missing";
	else if (cfg->publish == NULL || cfg->publish[0] == '\0')
		problem = "publish endpoint is missing";
	else if (cfg->world == 0)
		problem = "world is 0";
	else if (cfg->world > AGENT_MAX_WORLD)
		problem = "world is larger than 65536";
	else if (cfg->rank >= cfg->world)
		problem = "rank is not below world";
	else if (cfg->layers == NULL)
		problem = "layer table is missing";
	else if (cfg->n_layers == 0 || cfg->n_layers > AGENT_MAX_LAYERS)
		problem = "n_layers is not within 1..65536";
	else if (cfg->heartbeat_ms == 0)
		problem = "heartbeat_ms is 0";
	else if (cfg->queue_capacity == 0 ||
	    cfg->queue_capacity > AGENT_MAX_QUEUE)
		problem = "queue_capacity is not within 1..1048576";
	else if (cfg->keep_reports_mb == 0 ||
	    cfg->keep_reports_mb > AGENT_MAX_KEEP_MB)
		problem = "keep_reports_mb is not within 1..65536";
	else if (!(cfg->momentum_beta >= 0.0 && cfg->momentum_beta < 1.0))
		problem = "momentum_beta is not within [0, 1)";
	else if (cfg->stats_threads > KERN_MAX_THREADS)
		problem = "stats_threads is larger than 64";
	else if (cfg->aggregate > BELLOWS_AGGREGATE_JOB)
		problem = "aggregate is not rank, node or job";
	else if (cfg->aggregate != BELLOWS_AGGREGATE_RANK &&
	    cfg->allreduce == NULL)
		problem = "aggregate node or job needs an allreduce callback";
	else if (cfg->aggregate == BELLOWS_AGGREGATE_NODE &&
	    (cfg->aggregate_ranks == 0 || cfg->aggregate_ranks > cfg->world))
		problem = "aggregate node needs aggregate_ranks within "
			  "1..world";
	else if (cfg->resume && cfg->start_step == 0 && cfg->start_window == 0)
		problem = "resume is set but start_step and start_window are "
			  "0 (resume continues a run from a checkpoint)";
	if (problem == NULL) {
		const char *from, *id = agent_run_id(cfg, &from);

		if (id[0] != '\0' &&
		    (job_problem = agent_name_problem(id)) != NULL) {
			agent_log(cfg->log, cfg->log_arg, cfg->log_level,
			    BELLOWS_LOG_ERROR,
			    "bellows_agent_open: the run identity (%s) %s",
			    from, job_problem);
			return BELLOWS_EINVAL;
		}
	}
	if (problem == NULL) {
		const char *from, *value;

		if (agent_stats_precision(cfg, &from, &value) < 0) {
			agent_log(cfg->log, cfg->log_arg, cfg->log_level,
			    BELLOWS_LOG_ERROR,
			    "bellows_agent_open: %s is \"%.64s\", not "
			    "\"relaxed\" or \"exact\"",
			    from, value);
			return BELLOWS_EINVAL;
		}
	}
	if (problem != NULL) {
		agent_log(cfg->log, cfg->log_arg, cfg->log_level,
		    BELLOWS_LOG_ERROR, "bellows_agent_open: %s", problem);
		return BELLOWS_EINVAL;
	}
	for (uint32_t i = 0; i < cfg->n_layers; i++)
		if ((rc = agent_check_layer(cfg, i)) != 0)
			return rc;
	return agent_check_unique(cfg);
}

const char *
bellows_version(void)
{
	return BELLOWS_VERSION;
}

/* The public struct's layout, from the table that makes it. */
#define AGENT_SCHEMA_FIELD(name, type, tag, check, agg, gate, wtype, wfield,   \
    rcol, wcol, wcol2, hist, unit, doc)                                        \
	{ #name, BELLOWS_STAT_TYPE_##type,                                     \
		(uint32_t)offsetof(bellows_layer_stats, name), unit, doc },

/* clang-format off */
static const bellows_stat_field agent_stats_schema[] = {
	{ "window", BELLOWS_STAT_TYPE_U64,
	    (uint32_t)offsetof(bellows_layer_stats, window), "",
	    "window index" },
	BELLOWS_LAYER_STATS(AGENT_SCHEMA_FIELD)
	{ NULL, BELLOWS_STAT_TYPE_NONE, (uint32_t)sizeof(bellows_layer_stats),
	    NULL, NULL },
};
/* clang-format on */

const bellows_stat_field *
bellows_stats_schema(void)
{
	return agent_stats_schema;
}

#define AGENT_STEP_SCHEMA_FIELD(name, type, fold, check, unit, doc)            \
	{ #name, BELLOWS_STAT_TYPE_##type,                                     \
		(uint32_t)offsetof(bellows_step_info, name), unit, doc },

/* clang-format off */
static const bellows_stat_field agent_step_info_schema[] = {
	BELLOWS_STEP_INFO(AGENT_STEP_SCHEMA_FIELD)
	{ NULL, BELLOWS_STAT_TYPE_NONE, (uint32_t)sizeof(bellows_step_info),
	    NULL, NULL },
};
/* clang-format on */

const bellows_stat_field *
bellows_step_info_schema(void)
{
	return agent_step_info_schema;
}

#define AGENT_ARRAY_SCHEMA(name, len, tag, check, kind, wfield, wcol, unit,    \
    doc)                                                                       \
	{ #name, len, COM_LARRAY_##name, unit, doc },

/* clang-format off */
static const bellows_stat_array agent_arrays_schema[] = {
	BELLOWS_LAYER_ARRAYS(AGENT_ARRAY_SCHEMA)
	{ NULL, 0, 0, NULL, NULL },
};
/* clang-format on */

const bellows_stat_array *
bellows_layer_arrays_schema(void)
{
	return agent_arrays_schema;
}

void
bellows_agent_config_init(bellows_agent_config *cfg)
{
	if (cfg == NULL)
		return;
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->control = agent_env("BELLOWS_CONTROL", COM_DEFAULT_CONTROL);
	cfg->publish = agent_env("BELLOWS_PUBLISH", COM_DEFAULT_PUBLISH);
	cfg->job = agent_env("BELLOWS_JOB", NULL);
	cfg->decision_timeout_ms = 5000;
	cfg->heartbeat_ms = 1000;
	cfg->queue_capacity = AGENT_MAX_QUEUE;
	cfg->keep_reports_mb = AGENT_KEEP_MB;
	cfg->momentum_beta = 0.9;
	cfg->log_level = BELLOWS_LOG_WARN;
}

/* Lays out the reduction of the rank's group (aggregate node or job):
 * the job, or aggregate_ranks consecutive ranks, whose lowest reports.
 * Returns 0 or BELLOWS_ENOMEM. */
static int
agent_open_aggregate(bellows_agent *a, const bellows_agent_config *cfg)
{
	uint32_t per = cfg->aggregate == BELLOWS_AGGREGATE_JOB
	    ? cfg->world
	    : cfg->aggregate_ranks;
	uint32_t base = cfg->rank - cfg->rank % per;
	uint32_t group = cfg->world - base < per ? cfg->world - base : per;
	bool *arrays = calloc(cfg->n_layers, sizeof(bool));
	int rc;

	if (arrays == NULL)
		return BELLOWS_ENOMEM;
	for (uint32_t l = 0; l < cfg->n_layers; l++)
		arrays[l] = (cfg->layers[l].flags & BELLOWS_LAYER_EXP_HIST) !=
		    0;
	rc = agent_aggregate_init(&a->agg, cfg->n_layers, arrays, group,
	    cfg->rank - base);
	free(arrays);
	if (rc != 0)
		return rc;
	a->agg_on = true;
	a->agg_leader = cfg->rank == base;
	a->allreduce = cfg->allreduce;
	a->allreduce_arg = cfg->allreduce_arg;
	return 0;
}

int
bellows_agent_open(const bellows_agent_config *cfg, bellows_agent **ret_agent)
{
	bellows_agent *a;
	agent_io_config io_cfg;
	kern_config kcfg;
	com_cert server, client;
	const char *run_from;
	bool curve;
	int rc;

	if (cfg == NULL || ret_agent == NULL)
		return BELLOWS_EINVAL;
	if ((rc = agent_validate(cfg)) != 0)
		return rc;
	if ((rc = agent_load_keys(cfg, &server, &client, &curve)) != 0)
		return rc;
	if ((a = calloc(1, sizeof(*a))) == NULL) {
		explicit_bzero(&client, sizeof(client));
		return BELLOWS_ENOMEM;
	}
	a->rank = cfg->rank;
	a->n_layers = cfg->n_layers;
	a->window_steps = cfg->window_steps;
	a->decision_timeout_ms = cfg->decision_timeout_ms;
	a->log = cfg->log;
	a->log_arg = cfg->log_arg;
	a->log_level = cfg->log_level;
	a->step = cfg->start_step;
	a->first_step = cfg->start_step;
	a->window = cfg->start_window;
	if (cfg->aggregate != BELLOWS_AGGREGATE_RANK &&
	    (rc = agent_open_aggregate(a, cfg)) != 0)
		goto fail;
	rc = BELLOWS_ENOMEM;
	if ((a->job = strdup(cfg->job)) == NULL ||
	    (a->stats = calloc(cfg->n_layers, sizeof(*a->stats))) == NULL ||
	    (a->applied = calloc(cfg->n_layers, sizeof(*a->applied))) == NULL ||
	    (a->resid_default.n_layers = cfg->n_layers,
		com_resid_plan_alloc(&a->resid_default)) != 0 ||
	    agent_timing_init(&a->timing, cfg->n_layers) != 0)
		goto fail;
	kern_config_init(&kcfg);
	kcfg.threads = cfg->stats_threads;
	{
		const char *from, *value;

		kcfg.precision = agent_stats_precision(cfg, &from, &value);
	}
	if ((rc = agent_window_init_with(&a->win, cfg->layers, cfg->n_layers,
		 cfg->momentum_beta, &kcfg)) != 0) {
		if (rc == BELLOWS_ENOTSUP)
			agent_log(cfg->log, cfg->log_arg, cfg->log_level,
			    BELLOWS_LOG_ERROR,
			    "bellows_agent_open: a layer is flagged "
			    "BELLOWS_LAYER_DEVICE, but this library has no "
			    "CUDA support or the process sees no CUDA device");
		else if (rc != BELLOWS_ENOMEM)
			agent_log(cfg->log, cfg->log_arg, cfg->log_level,
			    BELLOWS_LOG_ERROR,
			    "bellows_agent_open: gradient statistics: %s",
			    bellows_strerror(rc));
		goto fail;
	}

	memset(&io_cfg, 0, sizeof(io_cfg));
	io_cfg.control = cfg->control;
	io_cfg.publish = cfg->publish;
	io_cfg.job = cfg->job;
	io_cfg.rank = cfg->rank;
	io_cfg.world = cfg->world;
	io_cfg.layers = cfg->layers;
	io_cfg.n_layers = cfg->n_layers;
	io_cfg.start_step = cfg->start_step;
	io_cfg.start_window = cfg->start_window;
	io_cfg.run_id = agent_run_id(cfg, &run_from);
	io_cfg.resume = cfg->resume != 0;
	io_cfg.heartbeat_ms = cfg->heartbeat_ms;
	io_cfg.queue_capacity = cfg->queue_capacity;
	io_cfg.keep_bytes = (size_t)cfg->keep_reports_mb << 20;
	io_cfg.log = cfg->log;
	io_cfg.log_arg = cfg->log_arg;
	io_cfg.log_level = cfg->log_level;
	io_cfg.server = curve ? &server : NULL;
	io_cfg.client = curve ? &client : NULL;
	io_cfg.handshake_ms = cfg->decision_timeout_ms / 2;
	rc = agent_io_open(&io_cfg, &a->io);
	explicit_bzero(&client, sizeof(client));
	if (rc != 0)
		goto fail;
	a->in_force = agent_io_in_force(a->io);
	*ret_agent = a;
	return 0;
fail:
	explicit_bzero(&client, sizeof(client));
	if (rc == BELLOWS_ENOMEM)
		agent_log(cfg->log, cfg->log_arg, cfg->log_level,
		    BELLOWS_LOG_ERROR, "bellows_agent_open: %s",
		    bellows_strerror(rc));
	bellows_agent_close(&a);
	return rc;
}

/* The summary said at close: windows reported, decisions received, and
 * the windows that got no decision (a warning when there are any: a
 * launch that was not steered must not end silently). */
static void
agent_close_summary(bellows_agent *a)
{
	bellows_agent_stats st;
	uint64_t undecided;

	if (a->io == NULL || !a->stepped)
		return;
	memset(&st, 0, sizeof(st));
	agent_io_stats(a->io, &st);
	undecided = agent_io_undecided(a->io);
	agent_log(a->log, a->log_arg, a->log_level,
	    undecided > 0 ? BELLOWS_LOG_WARN : BELLOWS_LOG_INFO,
	    "closing job '%s' rank %u: %llu windows, %llu decisions "
	    "received, %llu windows without a decision",
	    a->job, a->rank, (unsigned long long)st.window,
	    (unsigned long long)st.decisions, (unsigned long long)undecided);
}

void
bellows_agent_close(bellows_agent **agent)
{
	bellows_agent *a;

	if (agent == NULL || (a = *agent) == NULL)
		return;
	*agent = NULL;
	agent_close_summary(a);
	agent_io_close(&a->io);
	agent_window_fini(&a->win);
	agent_timing_fini(&a->timing);
	agent_aggregate_fini(&a->agg);
	com_decision_fini(&a->resid_default);
	free(a->stats);
	free(a->applied);
	free(a->table_cur);
	free(a->table_prev);
	free(a->job);
	free(a);
}

/* Keeps the codec table in force and the distinct one before it, so that
 * data encoded with the previous table still decodes after a switch. */
static void
agent_track_table(bellows_agent *a)
{
	const com_decision *d = a->in_force;
	uint8_t *copy;

	if (d->codec_table_len == a->table_cur_len &&
	    (d->codec_table_len == 0 ||
		memcmp(d->codec_table, a->table_cur, d->codec_table_len) == 0))
		return;
	copy = d->codec_table_len > 0 ? malloc(d->codec_table_len) : NULL;
	if (d->codec_table_len > 0 && copy == NULL) {
		agent_log(a->log, a->log_arg, a->log_level, BELLOWS_LOG_ERROR,
		    "step %llu: no memory to keep the codec table in force; "
		    "the previous one is forgotten",
		    (unsigned long long)a->step);
		free(a->table_prev);
		a->table_prev = NULL;
		a->table_prev_len = 0;
		return;
	}
	if (copy != NULL)
		memcpy(copy, d->codec_table, d->codec_table_len);
	free(a->table_prev);
	a->table_prev = a->table_cur;
	a->table_prev_len = a->table_cur_len;
	a->table_cur = copy;
	a->table_cur_len = d->codec_table_len;
}

/* At a window's first step: accumulates the gradients over the window
 * unless the decision in force says no policy reads acc_norm. Every rank
 * has the same decision in force at the same step, and windows start at
 * the same steps, so all turn the accumulators on and off together. */
static void
agent_window_start(bellows_agent *a)
{
	const uint64_t acc = UINT64_C(1) << BELLOWS_STAT_INDEX_acc_norm;
	int rc = agent_window_accumulate(&a->win,
	    !(a->in_force->stats_skip & acc));

	if (rc != 0)
		agent_log(a->log, a->log_arg, a->log_level, BELLOWS_LOG_WARN,
		    "window %llu: some layers have no window accumulator "
		    "(%s): their acc_norm is reported as 0",
		    (unsigned long long)a->window, bellows_strerror(rc));
}

int
bellows_agent_step_begin(bellows_agent *agent, uint64_t *ret_step)
{
	uint32_t missed;

	if (agent == NULL)
		return BELLOWS_EINVAL;
	if (agent->in_step)
		return BELLOWS_ESTATE;
	agent->step_start_ns = com_clock_ns();
	agent_io_step_begin(agent->io, agent->step, agent->decision_timeout_ms,
	    &missed);
	if (missed > 0) {
		agent->timings.decision_misses += missed;
		agent_log(agent->log, agent->log_arg, agent->log_level,
		    BELLOWS_LOG_WARN,
		    "step %llu began without the decision of %u window(s) "
		    "after %u ms; keeping decision seq %llu",
		    (unsigned long long)agent->step, missed,
		    agent->decision_timeout_ms,
		    (unsigned long long)agent->in_force->seq);
	}
	agent_track_table(agent);
	if (agent->timings.steps == 0)
		agent_window_start(agent);
	agent->in_step = true;
	agent->stepped = true;
	if (ret_step != NULL)
		*ret_step = agent->step;
	return 0;
}

/* The observe calls: `where` is the memory the caller says grad is in. */
static int
agent_observe(bellows_agent *agent, uint32_t layer, const void *grad,
    uint64_t n, int dtype, int where, void *stream)
{
	if (agent == NULL || layer >= agent->n_layers || grad == NULL ||
	    n != agent->win.layers[layer].numel ||
	    kern_dtype_size(dtype) == 0 ||
	    where != agent->win.layers[layer].where)
		return BELLOWS_EINVAL;
	if (!agent->in_step)
		return BELLOWS_ESTATE;
	return agent_window_observe_as(&agent->win, layer, grad, n, dtype,
	    where, stream, agent->step);
}

int
bellows_agent_observe(bellows_agent *agent, uint32_t layer, const float *grad,
    uint64_t n)
{
	return agent_observe(agent, layer, grad, n, KERN_F32, KERN_HOST, NULL);
}

int
bellows_agent_observe_typed(bellows_agent *agent, uint32_t layer,
    const void *grad, uint64_t n, int dtype)
{
	return agent_observe(agent, layer, grad, n, dtype, KERN_HOST, NULL);
}

int
bellows_agent_observe_many(bellows_agent *agent, uint32_t n,
    const uint32_t *layers, const void *base, const uint64_t *offsets,
    int dtype)
{
	size_t esz = kern_dtype_size(dtype);

	if (agent == NULL || esz == 0 ||
	    (n > 0 && (layers == NULL || base == NULL || offsets == NULL)))
		return BELLOWS_EINVAL;
	for (uint32_t i = 0; i < n; i++)
		if (layers[i] >= agent->n_layers ||
		    agent->win.layers[layers[i]].where != KERN_HOST)
			return BELLOWS_EINVAL;
	if (!agent->in_step)
		return BELLOWS_ESTATE;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t l = layers[i];
		int rc = agent_window_observe_as(&agent->win, l,
		    (const char *)base + offsets[i] * esz,
		    agent->win.layers[l].numel, dtype, KERN_HOST, NULL,
		    agent->step);

		if (rc != 0)
			return rc;
	}
	return 0;
}

int
bellows_agent_observe_device(bellows_agent *agent, uint32_t layer,
    const void *grad, uint64_t n, int dtype, void *cuda_stream)
{
	return agent_observe(agent, layer, grad, n, dtype, KERN_CUDA,
	    cuda_stream);
}

/* Reduces report r over the rank's group through the caller's
 * all-reduce; the group's lowest rank queues the report covering the
 * group, the others only expect its decision. If the collective fails
 * the rank reports alone. */
static void
agent_submit_aggregate(bellows_agent *a, com_report *r)
{
	static const int ops[3] = { BELLOWS_REDUCE_SUM, BELLOWS_REDUCE_MAX,
		BELLOWS_REDUCE_MIN };
	com_report cover;
	int rc = 0;

	agent_aggregate_pack(&a->agg, r);
	for (int i = 0; i < 3 && rc == 0; i++)
		rc = a->allreduce(a->allreduce_arg, a->agg.buf[ops[i]],
		    a->agg.len[ops[i]], ops[i]);
	if (rc != 0) {
		agent_log(a->log, a->log_arg, a->log_level, BELLOWS_LOG_WARN,
		    "window %llu: the all-reduce of the statistics failed "
		    "(%d); this rank reports alone",
		    (unsigned long long)r->window, rc);
		agent_io_submit_report(a->io, r);
		return;
	}
	if (!a->agg_leader) {
		agent_io_skip_report(a->io, r);
		return;
	}
	agent_aggregate_unpack(&a->agg, r, &cover);
	agent_io_submit_report(a->io, &cover);
}

static double agent_applied_level(const bellows_agent *a, uint32_t layer);

/* Finalises the open window, queues its report and opens the next. */
static void
agent_close_window(bellows_agent *a)
{
	com_report r;
	uint64_t dropped;
	int rc;

	if ((rc = agent_window_finish(&a->win, a->stats)) != 0)
		agent_log(a->log, a->log_arg, a->log_level, BELLOWS_LOG_ERROR,
		    "window %llu: the statistics of device layers were lost "
		    "(%s); they are reported as empty",
		    (unsigned long long)a->window, bellows_strerror(rc));
	/* The level in force at the window's last step: the decision of
	 * the last step begun is still in force between steps. */
	for (uint32_t l = 0; l < a->n_layers; l++) {
		a->stats[l].level_applied_n = 1;
		a->stats[l].level_applied = agent_applied_level(a, l);
	}
	memset(&r, 0, sizeof(r));
	agent_timing_finish(&a->timing, a->stats, &r.comm, &r.n_comm, &dropped);
	if (dropped > 0)
		agent_log(a->log, a->log_arg, a->log_level, BELLOWS_LOG_WARN,
		    "window %llu: %llu timed collectives were not reported: "
		    "more than %u distinct (bytes, compressed) pairs",
		    (unsigned long long)a->window, (unsigned long long)dropped,
		    AGENT_TIMING_MAX_BUCKETS);
	r.job = a->job;
	r.rank = a->rank;
	r.window = a->window;
	r.first_step = a->first_step;
	r.last_step = a->step - 1;
	r.n_layers = a->n_layers;
	r.layers = a->stats;
	r.timings = a->timings;
	r.lr = a->lr;
	r.lr_next = a->lr_next;
	r.batch_size = a->batch_size;
	r.epoch = a->epoch;
	r.seq_in_force = a->in_force->seq;
	if (a->agg_on)
		agent_submit_aggregate(a, &r);
	else
		agent_io_submit_report(a->io, &r);
	a->closed_window = a->window + 1;
	a->window++;
	a->first_step = a->step;
	memset(&a->timings, 0, sizeof(a->timings));
}

/* A time, size or rate a caller hands over: finite and not negative
 * (the statistics table's MAG rule). */
static bool
agent_magnitude(double v)
{
	return com_stat_check_passes(BELLOWS_STAT_CHECK_MAG, v);
}

/* The check column of BELLOWS_STEP_INFO: the rule the decoder holds
 * received values to (com_stat_check_passes), so a value the agent takes
 * is one bellowsd accepts. */
#define AGENT_STEP_CHECK(name, type, fold, check, ...)                         \
	&&com_stat_check_passes(BELLOWS_STAT_CHECK_##check, (double)info->name)

/* The fold column: a step's value into the window's timings. */
#define AGENT_FOLD_OWN(f)
#define AGENT_FOLD_SUM(f) t->f += info->f;
#define AGENT_FOLD_MAX(f)                                                      \
	if (info->f > t->f)                                                    \
		t->f = info->f;
#define AGENT_FOLD_LAST_NZ(f)                                                  \
	if (info->f > 0)                                                       \
		t->f = info->f;
#define AGENT_STEP_FOLD(name, type, fold, ...) AGENT_FOLD_##fold(name)

static bool
agent_step_info_valid(const bellows_step_info *info)
{
	return info == NULL || (true BELLOWS_STEP_INFO(AGENT_STEP_CHECK));
}

int
bellows_agent_step_end(bellows_agent *agent, const bellows_step_info *info)
{
	com_timings *t;
	double ms;

	if (agent == NULL)
		return BELLOWS_EINVAL;
	if (!agent->in_step)
		return BELLOWS_ESTATE;
	if (!agent_step_info_valid(info))
		return BELLOWS_EINVAL;
	t = &agent->timings;
	if (info != NULL && info->step_ms > 0.0 && isfinite(info->step_ms))
		ms = info->step_ms;
	else
		ms = (double)(com_clock_ns() - agent->step_start_ns) / 1e6;
	t->steps++;
	t->step_ms += ms;
	if (ms > t->step_ms_max)
		t->step_ms_max = ms;
	if (info != NULL) {
		BELLOWS_STEP_INFO(AGENT_STEP_FOLD)
		/* The window's LR is its first step's and lr_next the one
		 * after its last step: lr_next < lr then tells a policy that
		 * the LR dropped anywhere in or right after the window, even
		 * when a schedule decays mid-window. */
		if (t->steps == 1)
			agent->lr = info->lr;
		agent->lr_next = info->lr_next > 0 ? info->lr_next : info->lr;
		agent->batch_size = info->batch_size;
		agent->epoch = info->epoch;
	}
	agent->in_step = false;
	agent->step++;
	if (agent->window_steps > 0 && t->steps >= agent->window_steps)
		agent_close_window(agent);
	return 0;
}

int
bellows_agent_eval(bellows_agent *agent, double accuracy, double loss)
{
	if (agent == NULL ||
	    !com_stat_check_passes(BELLOWS_STAT_CHECK_FRAC, accuracy) ||
	    !com_stat_check_passes(BELLOWS_STAT_CHECK_MAG, loss))
		return BELLOWS_EINVAL;
	if (accuracy > 0)
		agent->timings.eval_accuracy = accuracy;
	if (loss > 0)
		agent->timings.eval_loss = loss;
	return 0;
}

int
bellows_agent_window_end(bellows_agent *agent)
{
	if (agent == NULL)
		return BELLOWS_EINVAL;
	if (agent->in_step)
		return BELLOWS_ESTATE;
	if (agent->timings.steps == 0)
		return BELLOWS_EAGAIN;
	agent_close_window(agent);
	return 0;
}

/* The codec table of decision d as the API hands it out: NULL and 0 when
 * there is none. */
static void
agent_codec_table(const com_decision *d, const uint8_t **ret_table,
    size_t *ret_len)
{
	*ret_table = d->codec_table_len > 0 ? d->codec_table : NULL;
	*ret_len = d->codec_table_len;
}

int
bellows_agent_decision(const bellows_agent *agent, bellows_decision *ret)
{
	const com_decision *d;

	if (agent == NULL || ret == NULL)
		return BELLOWS_EINVAL;
	d = agent->in_force;
	memset(ret, 0, sizeof(*ret));
	ret->seq = d->seq;
	ret->apply_step = d->apply_step;
	ret->window = d->window;
	ret->n_layers = d->n_layers;
	ret->level = d->level;
	ret->error_bound = d->error_bound;
	ret->batch_size = d->batch_size;
	ret->lr_scale = d->lr_scale;
	ret->size_threshold = d->size_threshold;
	ret->compression_off = d->compression_off;
	agent_codec_table(d, &ret->codec_table, &ret->codec_table_len);
	ret->policy = d->policy != NULL ? d->policy : "";
	ret->reason = d->reason != NULL ? d->reason : "";
	ret->calibrate_steps = d->calibrate_steps;
	ret->stats_skip = d->stats_skip;
	if (com_resid_plan_is_default(d)) {
		ret->resid_group = agent->resid_default.resid_group;
		ret->resid_phi = agent->resid_default.resid_phi;
		ret->resid_rows = agent->resid_default.resid_rows;
		ret->resid_cols = agent->resid_default.resid_cols;
	} else {
		ret->resid_group = d->resid_group;
		ret->resid_phi = d->resid_phi;
		ret->resid_rows = d->resid_rows;
		ret->resid_cols = d->resid_cols;
	}
	return 0;
}

int
bellows_agent_codec_table(const bellows_agent *agent, const uint8_t **ret_table,
    size_t *ret_len)
{
	if (agent == NULL || ret_table == NULL || ret_len == NULL)
		return BELLOWS_EINVAL;
	agent_codec_table(agent->in_force, ret_table, ret_len);
	return 0;
}

int
bellows_agent_codec_table_prev(const bellows_agent *agent,
    const uint8_t **ret_table, size_t *ret_len)
{
	if (agent == NULL || ret_table == NULL || ret_len == NULL)
		return BELLOWS_EINVAL;
	*ret_table = agent->table_prev_len > 0 ? agent->table_prev : NULL;
	*ret_len = agent->table_prev_len;
	return 0;
}

double
bellows_agent_level(const bellows_agent *agent, uint32_t layer)
{
	if (agent == NULL || layer >= agent->in_force->n_layers)
		return 0.0;
	return agent->in_force->level[layer];
}

uint32_t
bellows_agent_accumulators(const bellows_agent *agent)
{
	return agent == NULL ? 0 : agent_window_accumulators(&agent->win);
}

int
bellows_agent_stats_get(bellows_agent *agent, bellows_agent_stats *ret)
{
	if (agent == NULL || ret == NULL)
		return BELLOWS_EINVAL;
	memset(ret, 0, sizeof(*ret));
	agent_io_stats(agent->io, ret);
	return 0;
}

/* One statistic from the report's com_layer_stats to the public struct:
 * both are made from the same table (bellows/stats.h). */
#define AGENT_COPY_STAT(name, ...) ret->name = s->name;

int
bellows_agent_window_stats(const bellows_agent *agent, uint32_t layer,
    bellows_layer_stats *ret)
{
	const com_layer_stats *s;

	if (agent == NULL || ret == NULL || layer >= agent->n_layers)
		return BELLOWS_EINVAL;
	if (agent->closed_window == 0)
		return BELLOWS_EAGAIN;
	s = &agent->stats[layer];
	*ret = (bellows_layer_stats){ .window = agent->closed_window - 1 };
	BELLOWS_LAYER_STATS(AGENT_COPY_STAT)
	return 0;
}

int
bellows_agent_window_array(const bellows_agent *agent, uint32_t layer,
    uint32_t array, uint64_t *ret, uint32_t len)
{
	const com_stat_array *ar;
	const uint64_t *v;

	if (agent == NULL || ret == NULL || layer >= agent->n_layers ||
	    array >= COM_N_LARRAYS || len != com_layer_array_table[array].len)
		return BELLOWS_EINVAL;
	if (agent->closed_window == 0)
		return BELLOWS_EAGAIN;
	ar = &com_layer_array_table[array];
	if ((v = com_stat_array_get(ar, &agent->stats[layer])) == NULL)
		return BELLOWS_ENOTFOUND;
	memcpy(ret, v, sizeof(uint64_t) * len);
	return 0;
}

/* True when `step` lies in the calibration of decision d. Written as a
 * difference: apply_step + calibrate_steps may not fit in 64 bits. */
static bool
agent_in_calibration(const com_decision *d, uint64_t step)
{
	return d->calibrate_steps > 0 && step >= d->apply_step &&
	    step - d->apply_step < d->calibrate_steps;
}

/* True when decision d sends `layer` raw whatever the step: the gate is
 * off or the layer has no level. */
static bool
agent_raw_always(const com_decision *d, uint32_t layer)
{
	return d->compression_off || layer >= d->n_layers ||
	    !(d->level[layer] > 0.0);
}

/* True when `layer`'s float32 size is below d's size threshold: raw
 * outside a calibration. */
static bool
agent_below_threshold(const bellows_agent *a, const com_decision *d,
    uint32_t layer)
{
	/* float32 bytes, saturated: no threshold exceeds UINT64_MAX. */
	uint64_t bytes = a->win.layers[layer].numel > UINT64_MAX / 4
	    ? UINT64_MAX
	    : a->win.layers[layer].numel * 4;

	return bytes < d->size_threshold;
}

/* The level `layer` is applied at under the decision in force: the
 * trainer's (bellows_agent_applied_levels) while that decision is the
 * one it was given under, else the send mode's rules outside a
 * calibration. A calibration alternates raw and compressed sends to
 * measure them: it is not the level in force. */
static double
agent_applied_level(const bellows_agent *a, uint32_t layer)
{
	const com_decision *d = a->in_force;

	if (a->applied_given && a->applied_seq == d->seq)
		return a->applied[layer];
	if (agent_raw_always(d, layer) || agent_below_threshold(a, d, layer))
		return 0.0;
	return d->level[layer];
}

int
bellows_agent_send_mode(const bellows_agent *agent, uint32_t layer)
{
	const com_decision *d;

	if (agent == NULL || layer >= agent->n_layers)
		return BELLOWS_EINVAL;
	if (!agent->in_step)
		return BELLOWS_ESTATE;
	d = agent->in_force;
	if (agent_raw_always(d, layer))
		return BELLOWS_SEND_RAW;
	if (agent_in_calibration(d, agent->step))
		return agent->step % 2 == 0 ? BELLOWS_SEND_COMPRESSED
					    : BELLOWS_SEND_RAW;
	return agent_below_threshold(agent, d, layer) ? BELLOWS_SEND_RAW
						      : BELLOWS_SEND_COMPRESSED;
}

int
bellows_agent_applied_levels(bellows_agent *agent, const double *levels,
    uint32_t n)
{
	if (agent == NULL || levels == NULL || n != agent->n_layers)
		return BELLOWS_EINVAL;
	/* Checked whole before anything changes. */
	for (uint32_t l = 0; l < n; l++)
		if (!agent_magnitude(levels[l]))
			return BELLOWS_EINVAL;
	if (!agent->in_step)
		return BELLOWS_ESTATE;
	memcpy(agent->applied, levels, sizeof(double) * n);
	agent->applied_given = true;
	agent->applied_seq = agent->in_force->seq;
	return 0;
}

int
bellows_agent_calibrating(const bellows_agent *agent)
{
	if (agent == NULL)
		return BELLOWS_EINVAL;
	if (!agent->stepped)
		return 0;
	/* Between steps, step is the next one; the decision in force is
	 * still that of the last step begun. */
	return agent_in_calibration(agent->in_force,
	    agent->in_step ? agent->step : agent->step - 1);
}

int
bellows_agent_comm_layer(bellows_agent *agent, uint32_t layer, int compressed,
    double comm_ms, double codec_ms)
{
	if (agent == NULL || layer >= agent->n_layers ||
	    !agent_magnitude(comm_ms) || !agent_magnitude(codec_ms))
		return BELLOWS_EINVAL;
	if (!agent->in_step)
		return BELLOWS_ESTATE;
	return agent_timing_send(&agent->timing, layer, compressed != 0,
	    comm_ms, codec_ms);
}

int
bellows_agent_comm_bucket(bellows_agent *agent, uint64_t bytes, int compressed,
    double comm_ms)
{
	if (agent == NULL || !agent_magnitude(comm_ms))
		return BELLOWS_EINVAL;
	if (!agent->in_step)
		return BELLOWS_ESTATE;
	return agent_timing_collective(&agent->timing, bytes, compressed != 0,
	    comm_ms);
}

int
bellows_agent_observe_activation(bellows_agent *agent, uint32_t layer,
    const bellows_act_stats *s)
{
	if (agent == NULL || s == NULL || layer >= agent->n_layers ||
	    !agent_magnitude(s->lbar) || !agent_magnitude(s->nonzero) ||
	    s->nonzero > 1.0)
		return BELLOWS_EINVAL;
	if (!agent->in_step)
		return BELLOWS_ESTATE;
	return agent_window_activation(&agent->win, layer, s->lbar, s->nonzero,
	    s->stored_bytes, s->raw_bytes);
}

int
bellows_agent_observe_residual(bellows_agent *agent, uint32_t layer,
    const bellows_resid_stats *s)
{
	if (agent == NULL || s == NULL || layer >= agent->n_layers ||
	    !agent_magnitude(s->l1) || !agent_magnitude(s->l2) ||
	    !agent_magnitude(s->q50) || !agent_magnitude(s->q90) ||
	    !agent_magnitude(s->q99) || !agent_magnitude(s->floats))
		return BELLOWS_EINVAL;
	if (!agent->in_step)
		return BELLOWS_ESTATE;
	return agent_window_residual(&agent->win, layer, s);
}
