/* policy_host - policy instances of one job, see policy_host.h.
 *
 * A plug-in instance (unless plug-ins run in this process) lives in its
 * plug-in's worker process: `state` stays NULL here, and the instance is
 * named by the (remote_id, remote_gen) its worker gave it. Every call
 * goes through worker.h with a deadline; a worker that failed is
 * restarted by the worker module, and an instance whose generation is no
 * longer current is started again from init before its next window (its
 * initial proposal dropped, as on a reload: the decision in force stays).
 */
#include "policy_host.h"

#include "plugin.h"

#include "common/wire.h"

#include "log.h"
#include "policies/registry.h"

#include <bellows/error.h>

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct host_instance {
	const ctl_policy_conf *conf; /* name, ops, parsed config, selector */
	void *state;                 /* ops->state_size bytes */
	bool *selected;              /* per layer, from the selector */
	bool initialised;            /* init succeeded: fini is due */
	int32_t adopt;               /* prepared set: index of the replaced
				      * set's instance whose state it takes
				      * at commit, or -1 (started anew) */
	ctl_worker *worker;          /* plug-in run in this worker process;
				      * NULL: run in this process */
	uint32_t remote_id;          /* worker: the instance's id there */
	uint64_t remote_gen;         /* worker: generation that ran its
				      * init (0: none yet, start it at the
				      * next window) */
} host_instance;

/* What a prepared set needs to finish a reload at commit. */
typedef struct host_pending {
	const ctl_policy_set *old;    /* the set it replaces */
	const char *job;              /* job name */
	uint32_t world;               /* ranks */
	const com_layer_info *layers; /* the job's layer table */
	const com_decision *state;    /* knob state in force */
} host_pending;

struct ctl_policy_set {
	uint32_t n;                /* instances */
	host_instance *inst;       /* in configured order */
	uint32_t n_layers;         /* layers of the job */
	bellows_proposal proposal; /* scratch, reused every window */
	bellows_metric *metrics;   /* the last window's valid metrics, n *
				    * BELLOWS_METRICS_MAX allocated */
	com_metric *metric_view;   /* the same, named by instance */
	uint32_t n_metrics;        /* entries used in both */
	bool prepared;             /* built by prepare, not committed */
	host_pending pending;      /* while prepared */
	bool lr_known;             /* a window with a finite LR ran */
	double lr_last;            /* that window's LR: LR_CHANGE's lr_old */
	char *job;                 /* job name, for plug-in workers' faults */
	void *old_layers;          /* layers at an older policy ABI's stride
				    * (pol_registry_window), old_cap bytes */
	size_t old_cap;            /* bytes allocated at old_layers */
	bool all_stats;            /* the job entry's all_stats */
};

static void
host_append(char *buf, size_t len, const char *sep, const char *text)
{
	size_t used = strlen(buf);

	if (text[0] == '\0' || used + 1 >= len)
		return;
	snprintf(buf + used, len - used, "%s%s", used > 0 ? sep : "", text);
}

/* Fills the scratch proposal from the state in force. */
static void
host_prefill(ctl_policy_set *set, const com_decision *state)
{
	bellows_proposal *p = &set->proposal;

	memcpy(p->level, state->level, sizeof(double) * set->n_layers);
	memcpy(p->error_bound, state->error_bound,
	    sizeof(double) * set->n_layers);
	p->batch_size = state->batch_size;
	p->lr_scale = state->lr_scale;
	p->size_threshold = state->size_threshold;
	p->compression_off = state->compression_off;
	p->reason[0] = '\0';
	p->calibrate_steps = 0;
	p->n_metrics = 0;
	/* The codec's limit is the same: a table in force always fits. */
	p->codec_table_len = state->codec_table_len <= BELLOWS_CODEC_TABLE_MAX
	    ? (uint32_t)state->codec_table_len
	    : 0;
	if (p->codec_table_len > 0)
		memcpy(p->codec_table, state->codec_table, p->codec_table_len);
	for (uint32_t i = 0; i < set->n_layers; i++) {
		bool plan = !com_resid_plan_is_default(state);

		p->resid_group[i] = plan ? state->resid_group[i] : i;
		p->resid_phi[i] = plan ? state->resid_phi[i]
				       : BELLOWS_RESID_PHI_DEFAULT;
		p->resid_rows[i] = plan ? state->resid_rows[i] : 1.0;
		p->resid_cols[i] = plan ? state->resid_cols[i] : 1.0;
	}
}

/* BELLOWS_RESID_PHI_DEFAULT (policies) and COM_RESID_PHI_DEFAULT (the
 * wire) are both 0.5: the default plan is the same on both sides. */

/* Takes the proposal's residual plan into state. A plan that breaks the
 * rules (com_resid_plan_valid), or no memory for it, leaves the one in
 * force (logged); the default plan is kept as none. */
static void
host_merge_resid_plan(ctl_policy_set *set, com_decision *state)
{
	const bellows_proposal *p = &set->proposal;
	uint32_t n = set->n_layers;
	com_decision view = { .n_layers = n,
		.resid_group = p->resid_group,
		.resid_phi = p->resid_phi,
		.resid_rows = p->resid_rows,
		.resid_cols = p->resid_cols };

	if (!com_resid_plan_valid(n, p->resid_group, p->resid_phi,
		p->resid_rows, p->resid_cols)) {
		ctl_log(CTL_LOG_WARN, "policy",
		    "job '%s': a residual plan naming a group that is not its "
		    "own leader, a phi outside [0, 1], a kept fraction outside "
		    "(0, 1] or a reduced layer in a group is refused; the one "
		    "in force stays",
		    state->job != NULL ? state->job : "");
		return;
	}
	if (com_resid_plan_is_default(&view)) {
		free(state->resid_group);
		free(state->resid_phi);
		free(state->resid_rows);
		free(state->resid_cols);
		state->resid_group = NULL;
		state->resid_phi = NULL;
		state->resid_rows = NULL;
		state->resid_cols = NULL;
		return;
	}
	if (state->resid_group == NULL && com_resid_plan_alloc(state) != 0) {
		ctl_log(CTL_LOG_ERROR, "policy",
		    "job '%s': out of memory for a residual plan; the one in "
		    "force stays",
		    state->job != NULL ? state->job : "");
		return;
	}
	memcpy(state->resid_group, p->resid_group, sizeof(uint32_t) * n);
	memcpy(state->resid_phi, p->resid_phi, sizeof(double) * n);
	memcpy(state->resid_rows, p->resid_rows, sizeof(double) * n);
	memcpy(state->resid_cols, p->resid_cols, sizeof(double) * n);
}

_Static_assert(BELLOWS_CODEC_TABLE_MAX == COM_CODEC_TABLE_MAX,
    "a table a policy may propose is one every codec accepts");

/* Takes the proposal's codec table into state when it differs. A table
 * longer than BELLOWS_CODEC_TABLE_MAX, or no memory for it, leaves the
 * one in force (logged). */
static void
host_merge_table(ctl_policy_set *set, com_decision *state)
{
	const bellows_proposal *p = &set->proposal;
	uint8_t *table = NULL;

	if (p->codec_table_len > BELLOWS_CODEC_TABLE_MAX) {
		ctl_log(CTL_LOG_WARN, "policy",
		    "job '%s': a codec table of %" PRIu32 " bytes (more than "
		    "%d) is refused; the one in force stays",
		    state->job != NULL ? state->job : "", p->codec_table_len,
		    BELLOWS_CODEC_TABLE_MAX);
		return;
	}
	if (p->codec_table_len == state->codec_table_len &&
	    (p->codec_table_len == 0 ||
		memcmp(p->codec_table, state->codec_table,
		    p->codec_table_len) == 0))
		return;
	if (p->codec_table_len > 0) {
		table = malloc(p->codec_table_len);
		if (table == NULL) {
			ctl_log(CTL_LOG_ERROR, "policy",
			    "job '%s': out of memory for a codec table; the "
			    "one in force stays",
			    state->job != NULL ? state->job : "");
			return;
		}
		memcpy(table, p->codec_table, p->codec_table_len);
	}
	free(state->codec_table);
	state->codec_table = table;
	state->codec_table_len = p->codec_table_len;
}

/* Copies the knobs `knobs` from the scratch proposal into state. */
static void
host_merge(ctl_policy_set *set, uint32_t knobs, com_decision *state)
{
	const bellows_proposal *p = &set->proposal;

	if (knobs & BELLOWS_KNOB_LEVEL)
		memcpy(state->level, p->level, sizeof(double) * set->n_layers);
	if (knobs & BELLOWS_KNOB_ERROR_BOUND)
		memcpy(state->error_bound, p->error_bound,
		    sizeof(double) * set->n_layers);
	if (knobs & BELLOWS_KNOB_BATCH_SIZE)
		state->batch_size = p->batch_size;
	if (knobs & BELLOWS_KNOB_LR_SCALE)
		state->lr_scale = p->lr_scale;
	if (knobs & BELLOWS_KNOB_SIZE_THRESHOLD) {
		state->size_threshold = p->size_threshold;
		/* Calibration decides the threshold: its owner asks for it. */
		state->calibrate_steps = p->calibrate_steps;
	}
	if (knobs & BELLOWS_KNOB_COMPRESSION)
		state->compression_off = p->compression_off;
	if (knobs & BELLOWS_KNOB_CODEC_TABLE)
		host_merge_table(set, state);
	if (knobs & BELLOWS_KNOB_RESIDUAL_PLAN)
		host_merge_resid_plan(set, state);
}

void
ctl_policy_set_destroy(ctl_policy_set **set)
{
	ctl_policy_set *s;

	if (set == NULL || *set == NULL)
		return;
	s = *set;
	for (uint32_t i = 0; i < s->n; i++) {
		host_instance *in = &s->inst[i];

		if (in->initialised && in->worker != NULL)
			ctl_worker_fini(in->worker, in->remote_id,
			    in->remote_gen);
		else if (in->initialised && in->conf->ops->fini != NULL)
			in->conf->ops->fini(in->state, in->conf->config);
		free(in->state);
		free(in->selected);
	}
	free(s->inst);
	free(s->old_layers);
	free(s->proposal.level);
	free(s->proposal.error_bound);
	free(s->proposal.codec_table);
	free(s->proposal.resid_group);
	free(s->proposal.resid_phi);
	free(s->proposal.resid_rows);
	free(s->proposal.resid_cols);
	free(s->metrics);
	free(s->metric_view);
	free(s->job);
	free(s);
	*set = NULL;
}

/* The layer table as init sees it, levels and bounds from the state in
 * force; the caller frees it. NULL on out-of-memory. */
static bellows_window_layer *
host_layers(const com_layer_info *layers, uint32_t n_layers,
    const com_decision *state)
{
	bellows_window_layer *wl = calloc(n_layers ? n_layers : 1, sizeof(*wl));

	if (wl == NULL)
		return NULL;
	for (uint32_t l = 0; l < n_layers; l++) {
		wl[l].name = layers[l].name;
		wl[l].numel = layers[l].numel;
		wl[l].ndim = layers[l].ndim;
		wl[l].shape = layers[l].shape;
		wl[l].level = state->level[l];
		wl[l].error_bound = state->error_bound[l];
	}
	return wl;
}

/* True when r is the worker's failure rather than the policy's answer:
 * the instance is then started again at its next window. (A policy that
 * returns one of these codes itself is retried the same way.) */
static bool
host_worker_fault(int r)
{
	return r == BELLOWS_ECLOSED || r == BELLOWS_ETIMEDOUT ||
	    r == BELLOWS_EPROTO || r == BELLOWS_EAGAIN || r == BELLOWS_ESYS;
}

/* init in the worker, the proposal pre-filled. A worker that failed
 * leaves the instance running without a generation: it starts at its
 * next window, and the initial proposal (the state in force) changes
 * nothing. */
static int
host_start_remote(ctl_policy_set *set, host_instance *in,
    const bellows_job_info *info)
{
	int r;

	r = ctl_worker_init(in->worker, in->conf->name, in->conf->config,
	    in->conf->ops->config_size, info, &set->proposal, &in->remote_id,
	    &in->remote_gen);
	if (r != 0 && !host_worker_fault(r))
		return r;
	if (r != 0)
		in->remote_gen = 0;
	in->initialised = true;
	set->proposal.reason[sizeof(set->proposal.reason) - 1] = '\0';
	return 0;
}

/* Allocates in->state and calls init; wl[].selected must be in's. The
 * proposal is left in set->proposal. */
static int
host_start(ctl_policy_set *set, host_instance *in, const char *job,
    uint32_t world, const bellows_window_layer *wl, const com_decision *state)
{
	const bellows_policy_ops *ops = in->conf->ops;
	bellows_job_info info = {
		.job = job,
		.world = world,
		.n_layers = set->n_layers,
		.layers = wl,
		.layer_size = sizeof(*wl),
	};
	int r;

	host_prefill(set, state);
	if (in->worker != NULL)
		return host_start_remote(set, in, &info);
	if (in->state == NULL) {
		in->state = calloc(1, ops->state_size ? ops->state_size : 1);
		if (in->state == NULL)
			return BELLOWS_ENOMEM;
	}
	info.layers = pol_registry_layers(ops, wl, info.n_layers,
	    info.layer_size, &info.layer_size, &set->old_layers, &set->old_cap);
	if (info.layers == NULL)
		return BELLOWS_ENOMEM;
	r = ops->init(in->state, in->conf->config, &info, &set->proposal);
	if (r != 0)
		return r;
	in->initialised = true;
	set->proposal.reason[sizeof(set->proposal.reason) - 1] = '\0';
	return 0;
}

/* Index of the running instance of `old` that `conf` continues, or -1. */
static int32_t
host_find(const ctl_policy_set *old, const ctl_policy_conf *conf)
{
	for (uint32_t k = 0; old != NULL && k < old->n; k++) {
		if (old->inst[k].initialised &&
		    ctl_policy_conf_same_instance(old->inst[k].conf, conf))
			return (int32_t)k;
	}
	return -1;
}

/* Builds a set for jc. Instances found in `old` are only marked; the
 * others start against `in_force`. With `merge` non-NULL (a new job) the
 * initial proposals are merged into it and their reasons kept. */
static int
host_build(const ctl_policy_set *old, const ctl_job_conf *jc, const char *job,
    uint32_t world, const com_layer_info *layers, uint32_t n_layers,
    const com_decision *in_force, com_decision *merge, char *reason,
    size_t reason_len, ctl_policy_set **ret_set)
{
	bellows_window_layer *wl = NULL;
	ctl_policy_set *set;
	int r = BELLOWS_ENOMEM;

	assert(old == NULL || old->n_layers == n_layers);
	reason[0] = '\0';
	set = calloc(1, sizeof(*set));
	if (set == NULL)
		return BELLOWS_ENOMEM;
	set->n_layers = n_layers;
	set->all_stats = jc->all_stats;
	set->proposal.n_layers = n_layers;
	set->proposal.level = calloc(n_layers ? n_layers : 1, sizeof(double));
	set->proposal.error_bound = calloc(n_layers ? n_layers : 1,
	    sizeof(double));
	set->proposal.codec_table = malloc(BELLOWS_CODEC_TABLE_MAX);
	set->proposal.resid_group = calloc(n_layers ? n_layers : 1,
	    sizeof(uint32_t));
	set->proposal.resid_phi = calloc(n_layers ? n_layers : 1,
	    sizeof(double));
	set->proposal.resid_rows = calloc(n_layers ? n_layers : 1,
	    sizeof(double));
	set->proposal.resid_cols = calloc(n_layers ? n_layers : 1,
	    sizeof(double));
	set->inst = calloc(jc->n_policies ? jc->n_policies : 1,
	    sizeof(*set->inst));
	set->metrics = calloc((size_t)(jc->n_policies ? jc->n_policies : 1) *
		BELLOWS_METRICS_MAX,
	    sizeof(*set->metrics));
	set->metric_view = calloc((size_t)(jc->n_policies ? jc->n_policies
							  : 1) *
		BELLOWS_METRICS_MAX,
	    sizeof(*set->metric_view));
	wl = host_layers(layers, n_layers, in_force);
	set->job = strdup(job != NULL ? job : "");
	if (set->job == NULL || set->proposal.level == NULL ||
	    set->proposal.error_bound == NULL ||
	    set->proposal.codec_table == NULL ||
	    set->proposal.resid_group == NULL ||
	    set->proposal.resid_phi == NULL ||
	    set->proposal.resid_rows == NULL ||
	    set->proposal.resid_cols == NULL || set->inst == NULL ||
	    set->metrics == NULL || set->metric_view == NULL || wl == NULL)
		goto fail;
	for (uint32_t i = 0; i < jc->n_policies; i++) {
		host_instance *in = &set->inst[i];

		set->n++;
		in->conf = &jc->policies[i];
		if (in->conf->plugin != NULL && !ctl_plugin_in_process())
			in->worker = ctl_plugin_worker(in->conf->plugin);
		in->selected = calloc(n_layers ? n_layers : 1, sizeof(bool));
		if (in->selected == NULL) {
			r = BELLOWS_ENOMEM; /* r holds an earlier init's 0 */
			goto fail;
		}
		for (uint32_t l = 0; l < n_layers; l++) {
			in->selected[l] = ctl_selector_matches(&in->conf
								    ->selector,
			    layers[l].name, layers[l].numel,
			    layers[l].ndim ? layers[l].ndim : 1);
			wl[l].selected = in->selected[l];
		}
		in->adopt = host_find(old, in->conf);
		if (in->adopt >= 0)
			continue;
		r = host_start(set, in, job, world, wl, in_force);
		if (r != 0) {
			snprintf(reason, reason_len,
			    "policy '%s' failed to start: %s", in->conf->name,
			    bellows_strerror(r));
			goto fail;
		}
		if (merge != NULL) {
			host_merge(set, in->conf->ops->knobs, merge);
			host_append(reason, reason_len, "; ",
			    set->proposal.reason);
		}
	}
	free(wl);
	*ret_set = set;
	return 0;
fail:
	free(wl);
	ctl_policy_set_destroy(&set);
	return r;
}

int
ctl_policy_set_new(const ctl_job_conf *jc, const char *job, uint32_t world,
    const com_layer_info *layers, uint32_t n_layers, com_decision *state,
    char *reason, size_t reason_len, ctl_policy_set **ret_set)
{
	return host_build(NULL, jc, job, world, layers, n_layers, state, state,
	    reason, reason_len, ret_set);
}

int
ctl_policy_set_prepare(const ctl_policy_set *old, const ctl_job_conf *jc,
    const char *job, uint32_t world, const com_layer_info *layers,
    uint32_t n_layers, const com_decision *state, char *reason,
    size_t reason_len, ctl_policy_set **ret_set)
{
	ctl_policy_set *set;
	int r;

	r = host_build(old, jc, job, world, layers, n_layers, state, NULL,
	    reason, reason_len, &set);
	if (r != 0)
		return r;
	set->prepared = true;
	set->pending = (host_pending){
		.old = old,
		.job = job,
		.world = world,
		.layers = layers,
		.state = state,
	};
	*ret_set = set;
	return 0;
}

/* Restarts a kept instance that refused its new config. */
static int
host_restart(ctl_policy_set *set, host_instance *in)
{
	const host_pending *p = &set->pending;
	bellows_window_layer *wl;
	int r;

	wl = host_layers(p->layers, set->n_layers, p->state);
	if (wl == NULL)
		return BELLOWS_ENOMEM;
	for (uint32_t l = 0; l < set->n_layers; l++)
		wl[l].selected = in->selected[l];
	if (in->state != NULL)
		memset(in->state, 0, in->conf->ops->state_size);
	r = host_start(set, in, p->job, p->world, wl, p->state);
	free(wl);
	return r;
}

uint32_t
ctl_policy_set_commit(ctl_policy_set *set, ctl_policy_set **old,
    uint64_t next_window, uint32_t ranks_alive, char *note, size_t note_len)
{
	ctl_policy_set *prev = old != NULL ? *old : NULL;
	const bellows_event ev = {
		.type = BELLOWS_EVENT_RELOAD,
		.window = next_window,
		.ranks_alive = ranks_alive,
	};
	uint32_t refused = 0;

	assert(set->prepared && set->pending.old == prev);
	note[0] = '\0';
	for (uint32_t i = 0; i < set->n; i++) {
		host_instance *in = &set->inst[i], *was;
		const bellows_policy_ops *ops = in->conf->ops;
		char text[256];
		int r, r2;

		if (in->adopt < 0)
			continue;
		was = &prev->inst[in->adopt];
		in->state = was->state;
		in->remote_id = was->remote_id;
		in->remote_gen = was->remote_gen;
		in->initialised = true;
		was->state = NULL;
		was->initialised = false;
		if (ops->on_event == NULL)
			continue;
		if (in->worker == NULL)
			r = ops->on_event(in->state, in->conf->config, &ev);
		else if (!ctl_worker_current(in->worker, in->remote_gen))
			r = 0; /* starts at its next window, with this config */
		else
			r = ctl_worker_event(in->worker, in->remote_id,
			    in->remote_gen, in->conf->name, set->pending.job,
			    &ev, in->conf->config, ops->config_size);
		if (r == 0 || (in->worker != NULL && host_worker_fault(r)))
			continue;
		/* The state belongs to the old config until init runs
		 * again: it is finalised with that one. */
		refused++;
		in->initialised = false;
		if (in->worker != NULL)
			ctl_worker_fini(in->worker, in->remote_id,
			    in->remote_gen);
		else if (ops->fini != NULL)
			ops->fini(in->state, was->conf->config);
		r2 = host_restart(set, in);
		if (r2 == 0)
			snprintf(text, sizeof(text),
			    "policy '%s' refused the new configuration (%s) "
			    "and was restarted",
			    in->conf->name, bellows_strerror(r));
		else
			snprintf(text, sizeof(text),
			    "policy '%s' refused the new configuration (%s) "
			    "and failed to restart (%s): it is off until the "
			    "next reload",
			    in->conf->name, bellows_strerror(r),
			    bellows_strerror(r2));
		host_append(note, note_len, "; ", text);
	}
	if (prev != NULL) {
		/* An LR change across a reload is still one. */
		set->lr_known = prev->lr_known;
		set->lr_last = prev->lr_last;
	}
	set->prepared = false;
	memset(&set->pending, 0, sizeof(set->pending));
	ctl_policy_set_destroy(old);
	return refused;
}

/* Why metric m of a proposal cannot be recorded, or NULL when it can. */
static const char *
host_metric_invalid(const bellows_metric *m, uint32_t n_layers)
{
	size_t len = strnlen(m->name, sizeof(m->name));

	if (len == 0 || len == sizeof(m->name))
		return len == 0 ? "an empty name" : "an unterminated name";
	for (size_t i = 0; i < len; i++) {
		char c = m->name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
			c == '_'))
			return "a name outside [a-z0-9_]";
	}
	if (!isfinite(m->value))
		return "a value that is not finite";
	if (m->layer < -1 || (m->layer >= 0 && (uint32_t)m->layer >= n_layers))
		return "a layer outside the job's table";
	return NULL;
}

/* Keeps the valid metrics of instance `in`'s proposal; the others are
 * dropped with one log line per instance and window. */
static void
host_collect_metrics(ctl_policy_set *set, const host_instance *in,
    const bellows_window *w)
{
	const bellows_proposal *p = &set->proposal;
	uint32_t n = p->n_metrics, dropped = 0;
	const char *why = NULL;

	if (n > BELLOWS_METRICS_MAX) {
		dropped = n - BELLOWS_METRICS_MAX;
		why = "more than BELLOWS_METRICS_MAX metrics";
		n = BELLOWS_METRICS_MAX;
	}
	for (uint32_t k = 0; k < n; k++) {
		const bellows_metric *m = &p->metrics[k];
		const char *bad = host_metric_invalid(m, set->n_layers);

		if (bad != NULL) {
			if (why == NULL)
				why = bad;
			dropped++;
			continue;
		}
		set->metrics[set->n_metrics] = *m;
		set->metric_view[set->n_metrics] = (com_metric){
			.policy = (char *)in->conf->name,
			.name = set->metrics[set->n_metrics].name,
			.layer = m->layer,
			.value = m->value,
		};
		set->n_metrics++;
	}
	if (dropped > 0)
		ctl_log(CTL_LOG_WARN, "policy",
		    "job '%s' window %" PRIu64 ": policy '%s' gave %u invalid "
		    "metrics (e.g. %s); they are dropped",
		    w->job != NULL ? w->job : "", w->window, in->conf->name,
		    dropped, why);
}

/* Starts a plug-in instance again in a worker that was restarted (or
 * never answered its init), with the window's layers as its job and the
 * state in force as its initial proposal, which is dropped. An instance
 * that had run in an earlier worker is reported (for its job: the worker
 * may have failed in another job's call). Returns 0 or why it could not
 * start (the worker's failure, or init's error); on failure the instance
 * keeps its old generation and is tried again at its next window. */
static int
host_restart_remote(ctl_policy_set *set, host_instance *in,
    const bellows_window *w, const com_decision *state)
{
	const bellows_job_info info = {
		.job = w->job,
		.world = w->world,
		.n_layers = w->n_layers,
		.layers = w->layers,
		.layer_size = w->layer_size,
	};
	bool had_state = in->remote_gen != 0;
	int r;

	host_prefill(set, state);
	r = ctl_worker_init(in->worker, in->conf->name, in->conf->config,
	    in->conf->ops->config_size, &info, &set->proposal, &in->remote_id,
	    &in->remote_gen);
	if (r == 0 && had_state)
		ctl_worker_report(CTL_WORKER_FAULT_RESTARTED, w->job,
		    "policy '%s' (plug-in '%s') started again from init in "
		    "the plug-in's new worker: its state was lost",
		    in->conf->name, ctl_plugin_path(in->conf->plugin));
	return r;
}

int
ctl_policy_set_run(ctl_policy_set *set, bellows_window *w, com_decision *state,
    char *policies, size_t policies_len, char *reason, size_t reason_len,
    uint32_t *ret_failed)
{
	bellows_window_layer *wl = (bellows_window_layer *)w->layers;
	uint32_t failed = 0;

	assert(!set->prepared);
	policies[0] = '\0';
	reason[0] = '\0';
	set->n_metrics = 0;
	/* Every caller's layers are an array of this build's struct. */
	w->layer_size = sizeof(bellows_window_layer);
	/* A calibration is asked for anew by every decision. */
	state->calibrate_steps = 0;
	if (isfinite(w->lr)) {
		if (set->lr_known && w->lr != set->lr_last) {
			const bellows_event ev = {
				.type = BELLOWS_EVENT_LR_CHANGE,
				.window = w->window,
				.ranks_alive = w->ranks_reported,
				.lr_old = set->lr_last,
				.lr_new = w->lr,
			};

			failed += ctl_policy_set_event(set, &ev);
		}
		set->lr_known = true;
		set->lr_last = w->lr;
	}
	for (uint32_t i = 0; i < set->n; i++) {
		host_instance *in = &set->inst[i];
		const bellows_policy_ops *ops = in->conf->ops;
		int r;

		if (!in->initialised)
			continue;
		for (uint32_t l = 0; l < w->n_layers && l < set->n_layers; l++)
			wl[l].selected = in->selected[l];
		if (in->worker != NULL &&
		    !ctl_worker_current(in->worker, in->remote_gen) &&
		    host_restart_remote(set, in, w, state) != 0) {
			failed++;
			continue;
		}
		host_prefill(set, state);
		if (in->worker != NULL)
			r = ctl_worker_window(in->worker, in->remote_id,
			    in->remote_gen, in->conf->name, w, &set->proposal);
		else {
			bellows_window tmp;
			const bellows_window *pw = pol_registry_window(ops, w,
			    &tmp, &set->old_layers, &set->old_cap);

			r = pw == NULL
			    ? BELLOWS_ENOMEM
			    : ops->on_window(in->state, in->conf->config, pw,
				  &set->proposal);
		}
		if (r != 0) {
			failed++;
			continue;
		}
		set->proposal.reason[sizeof(set->proposal.reason) - 1] = '\0';
		host_merge(set, ops->knobs, state);
		host_collect_metrics(set, in, w);
		if (set->proposal.reason[0] != '\0') {
			host_append(policies, policies_len, ",",
			    in->conf->name);
			host_append(reason, reason_len, "; ",
			    set->proposal.reason);
		}
	}
	*ret_failed = failed;
	return 0;
}

uint32_t
ctl_policy_set_event(ctl_policy_set *set, const bellows_event *ev)
{
	uint32_t failed = 0;

	assert(!set->prepared);
	for (uint32_t i = 0; i < set->n; i++) {
		host_instance *in = &set->inst[i];
		const bellows_policy_ops *ops = in->conf->ops;

		if (!in->initialised || ops->on_event == NULL)
			continue;
		if (in->worker == NULL) {
			if (ops->on_event(in->state, in->conf->config, ev) != 0)
				failed++;
		} else if (ctl_worker_current(in->worker, in->remote_gen) &&
		    ctl_worker_event(in->worker, in->remote_id, in->remote_gen,
			in->conf->name, set->job, ev, NULL, 0) != 0) {
			failed++;
		}
	}
	return failed;
}

const com_metric *
ctl_policy_set_metrics(const ctl_policy_set *set, uint32_t *ret_n)
{
	*ret_n = set != NULL ? set->n_metrics : 0;
	return set != NULL ? set->metric_view : NULL;
}

uint64_t
ctl_policy_set_stats_skip(const ctl_policy_set *set)
{
	const uint64_t all = (UINT64_C(1) << BELLOWS_STAT_INDEX_N_) - 1;
	uint64_t read = 0;

	_Static_assert(BELLOWS_STAT_INDEX_N_ < 63,
	    "the layer statistics outgrow stats_read's bits");
	if (set != NULL && set->all_stats)
		return 0;
	for (uint32_t i = 0; set != NULL && i < set->n; i++) {
		const bellows_policy_ops *ops = set->inst[i].conf->ops;
		/* ABI 4 ops end before stats_read. */
		uint64_t r = ops->abi_version >= 5 ? ops->stats_read : 0;

		if (!(r & BELLOWS_STATS_DECLARED))
			return 0;
		read |= r;
	}
	return all & ~read;
}

void
ctl_policy_set_names(const ctl_policy_set *set, char *buf, size_t len)
{
	buf[0] = '\0';
	for (uint32_t i = 0; set != NULL && i < set->n; i++)
		host_append(buf, len, ",", set->inst[i].conf->name);
}

size_t
ctl_policy_set_bytes(const ctl_job_conf *jc, uint32_t n_layers)
{
	size_t n = sizeof(ctl_policy_set) + BELLOWS_CODEC_TABLE_MAX +
	    (size_t)n_layers * 2 * sizeof(double);

	for (uint32_t i = 0; jc != NULL && i < jc->n_policies; i++)
		n += sizeof(host_instance) + jc->policies[i].ops->state_size +
		    (size_t)n_layers * sizeof(bool) +
		    BELLOWS_METRICS_MAX *
			(sizeof(bellows_metric) + sizeof(com_metric));
	return n;
}
