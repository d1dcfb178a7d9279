/* policy_host - policy instances of one job, see policy_host.h. */
#include "policy_host.h"

#include <bellows/error.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct host_instance {
	const ctl_policy_conf *conf; /* name, ops, parsed config, selector */
	void *state;                 /* ops->state_size bytes */
	bool *selected;              /* per layer, from the selector */
	bool initialised;            /* init succeeded: fini is due */
} host_instance;

struct ctl_policy_set {
	uint32_t n;                 /* instances */
	host_instance *inst;        /* in configured order */
	uint32_t n_layers;          /* layers of the job */
	bellows_proposal proposal;  /* scratch, reused every window */
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
	if (knobs & BELLOWS_KNOB_SIZE_THRESHOLD)
		state->size_threshold = p->size_threshold;
	if (knobs & BELLOWS_KNOB_COMPRESSION)
		state->compression_off = p->compression_off;
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

		if (in->initialised && in->conf->ops->fini != NULL)
			in->conf->ops->fini(in->state, in->conf->config);
		free(in->state);
		free(in->selected);
	}
	free(s->inst);
	free(s->proposal.level);
	free(s->proposal.error_bound);
	free(s);
	*set = NULL;
}

int
ctl_policy_set_new(const ctl_job_conf *jc, const char *job, uint32_t world,
    const com_layer_info *layers, uint32_t n_layers, com_decision *state,
    char *reason, size_t reason_len, ctl_policy_set **ret_set)
{
	bellows_window_layer *wl = NULL;
	ctl_policy_set *set;
	int r = BELLOWS_ENOMEM;

	set = calloc(1, sizeof(*set));
	if (set == NULL)
		return BELLOWS_ENOMEM;
	set->n_layers = n_layers;
	set->proposal.n_layers = n_layers;
	set->proposal.level = calloc(n_layers ? n_layers : 1, sizeof(double));
	set->proposal.error_bound = calloc(n_layers ? n_layers : 1,
	    sizeof(double));
	set->inst = calloc(jc->n_policies ? jc->n_policies : 1,
	    sizeof(*set->inst));
	wl = calloc(n_layers ? n_layers : 1, sizeof(*wl));
	if (set->proposal.level == NULL || set->proposal.error_bound == NULL ||
	    set->inst == NULL || wl == NULL)
		goto fail;
	for (uint32_t l = 0; l < n_layers; l++) {
		wl[l].name = layers[l].name;
		wl[l].numel = layers[l].numel;
		wl[l].ndim = layers[l].ndim;
		wl[l].shape = layers[l].shape;
		wl[l].level = state->level[l];
		wl[l].error_bound = state->error_bound[l];
	}
	reason[0] = '\0';
	for (uint32_t i = 0; i < jc->n_policies; i++) {
		host_instance *in = &set->inst[i];
		const bellows_policy_ops *ops = jc->policies[i].ops;
		bellows_job_info info = {
			.job = job,
			.world = world,
			.n_layers = n_layers,
			.layers = wl,
		};

		set->n++;
		in->conf = &jc->policies[i];
		in->state = calloc(1, ops->state_size ? ops->state_size : 1);
		in->selected = calloc(n_layers ? n_layers : 1, sizeof(bool));
		if (in->state == NULL || in->selected == NULL) {
			r = BELLOWS_ENOMEM; /* r holds an earlier init's 0 */
			goto fail;
		}
		for (uint32_t l = 0; l < n_layers; l++) {
			in->selected[l] = ctl_selector_matches(
			    &in->conf->selector, layers[l].name,
			    layers[l].numel,
			    layers[l].ndim ? layers[l].ndim : 1);
			wl[l].selected = in->selected[l];
		}
		host_prefill(set, state);
		r = ops->init(in->state, in->conf->config, &info,
		    &set->proposal);
		if (r != 0) {
			snprintf(reason, reason_len,
			    "policy '%s' failed to start: %s", in->conf->name,
			    bellows_strerror(r));
			goto fail;
		}
		in->initialised = true;
		set->proposal.reason[sizeof(set->proposal.reason) - 1] = '\0';
		host_merge(set, ops->knobs, state);
		host_append(reason, reason_len, "; ", set->proposal.reason);
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
ctl_policy_set_run(ctl_policy_set *set, bellows_window *w,
    com_decision *state, char *policies, size_t policies_len, char *reason,
    size_t reason_len, uint32_t *ret_failed)
{
	bellows_window_layer *wl = (bellows_window_layer *)w->layers;
	uint32_t failed = 0;

	policies[0] = '\0';
	reason[0] = '\0';
	for (uint32_t i = 0; i < set->n; i++) {
		host_instance *in = &set->inst[i];
		const bellows_policy_ops *ops = in->conf->ops;
		int r;

		for (uint32_t l = 0; l < w->n_layers && l < set->n_layers; l++)
			wl[l].selected = in->selected[l];
		host_prefill(set, state);
		r = ops->on_window(in->state, in->conf->config, w,
		    &set->proposal);
		if (r != 0) {
			failed++;
			continue;
		}
		set->proposal.reason[sizeof(set->proposal.reason) - 1] = '\0';
		host_merge(set, ops->knobs, state);
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

void
ctl_policy_set_names(const ctl_policy_set *set, char *buf, size_t len)
{
	buf[0] = '\0';
	for (uint32_t i = 0; set != NULL && i < set->n; i++)
		host_append(buf, len, ",", set->inst[i].conf->name);
}
