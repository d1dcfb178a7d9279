/* support - the policy tests' shared harness (see support.h). Everything
 * goes through the parts bellowsd uses: real files, the YAML parser, the
 * policy host, the policies' own ops and parameter tables.
 */
#include "support.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <bellows/error.h>

#include "policies/registry.h"

const com_layer_info sup_conv_layers[SUP_CONV_LAYERS] = {
	{ .name = "conv1.weight",
	    .numel = 1728,
	    .ndim = 4,
	    .shape = { 64, 3, 3, 3 } },
	{ .name = "conv1.bias", .numel = 64, .ndim = 1, .shape = { 64 } },
	{ .name = "conv2.weight",
	    .numel = 36864,
	    .ndim = 4,
	    .shape = { 64, 64, 3, 3 } },
	{ .name = "fc.weight", .numel = 640, .ndim = 2, .shape = { 10, 64 } },
};

void *
sup_fixture_new(size_t size, const char *name, const com_layer_info *layers,
    uint32_t n_layers)
{
	sup_host *h;

	if (size < sizeof(*h) || n_layers > SUP_LAYERS_MAX ||
	    (h = calloc(1, size)) == NULL)
		return NULL;
	snprintf(h->dir, sizeof(h->dir), "/tmp/bellows-%s-XXXXXX", name);
	if (mkdtemp(h->dir) == NULL) {
		free(h);
		return NULL;
	}
	snprintf(h->path, sizeof(h->path), "%s/policy.yaml", h->dir);
	snprintf(h->path2, sizeof(h->path2), "%s/reload.yaml", h->dir);
	h->layers = layers;
	h->n_layers = n_layers;
	h->world = 4;
	return h;
}

int
sup_fixture_free(void **state)
{
	sup_host *h = *state;

	sup_direct_stop(h);
	ctl_policy_set_destroy(&h->set);
	com_decision_fini(&h->state);
	ctl_config_destroy(&h->cfg);
	ctl_config_destroy(&h->cfg2);
	unlink(h->path);
	unlink(h->path2);
	rmdir(h->dir);
	free(h);
	*state = NULL;
	return 0;
}

void
sup_write_file(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");

	assert_non_null(fp);
	assert_true(fputs(text, fp) >= 0);
	assert_int_equal(fclose(fp), 0);
}

void
sup_load_file(const char *path, const char *text, ctl_config **ret)
{
	char err[CTL_CONFIG_ERR_MAX];

	sup_write_file(path, text);
	if (ctl_config_load(path, ret, err, sizeof(err)) != 0)
		fail_msg("%s", err);
}

void
sup_load(sup_host *h, const char *text)
{
	sup_load_file(h->path, text, &h->cfg);
}

/* Writes `text` to h->path, expects the parser to refuse it and returns
 * its message in err. */
static void
support_refused(sup_host *h, const char *text, char *err, size_t errlen)
{
	ctl_config *cfg = NULL;

	err[0] = '\0';
	sup_write_file(h->path, text);
	assert_int_equal(ctl_config_load(h->path, &cfg, err, errlen),
	    BELLOWS_ECONFIG);
	assert_null(cfg);
}

void
sup_load_refused(sup_host *h, const char *text, const char *what)
{
	char err[CTL_CONFIG_ERR_MAX];

	support_refused(h, text, err, sizeof(err));
	if (strstr(err, what) == NULL)
		fail_msg("expected '%s' in '%s'", what, err);
}

void
sup_load_refused_exactly(sup_host *h, const char *text, const char *what)
{
	char err[CTL_CONFIG_ERR_MAX], want[CTL_CONFIG_ERR_MAX];

	support_refused(h, text, err, sizeof(err));
	snprintf(want, sizeof(want), "%s:%s", h->path, what);
	assert_string_equal(err, want);
}

int
sup_start(sup_host *h)
{
	assert_int_equal(com_decision_init(&h->state, "job", h->n_layers), 0);
	return ctl_policy_set_new(&h->cfg->jobs[0], "job", h->world, h->layers,
	    h->n_layers, &h->state, h->reason, sizeof(h->reason), &h->set);
}

void
sup_start_refused(sup_host *h, const char *name)
{
	char want[BELLOWS_REASON_MAX];

	assert_int_equal(sup_start(h), BELLOWS_EINVAL);
	assert_null(h->set);
	snprintf(want, sizeof(want),
	    "policy '%s' failed to start: invalid argument", name);
	assert_string_equal(h->reason, want);
}

void
sup_restart(sup_host *h, const char *text)
{
	ctl_policy_set_destroy(&h->set);
	com_decision_fini(&h->state);
	ctl_config_destroy(&h->cfg);
	sup_load(h, text);
	assert_int_equal(sup_start(h), 0);
}

bellows_window
sup_window(sup_host *h, uint64_t index)
{
	for (uint32_t l = 0; l < h->n_layers; l++) {
		h->wl[l].name = h->layers[l].name;
		h->wl[l].numel = h->layers[l].numel;
		h->wl[l].ndim = h->layers[l].ndim;
		h->wl[l].shape = h->layers[l].shape;
	}
	return (bellows_window){
		.job = "job",
		.window = index,
		.lr = 0.1,
		.lr_next = 0.1,
		.world = h->world,
		.ranks_reported = h->world,
		.n_layers = h->n_layers,
		.layers = h->wl,
	};
}

void
sup_reload(sup_host *h, uint64_t next_window)
{
	ctl_policy_set *next = NULL;
	char note[256];

	assert_int_equal(ctl_policy_set_prepare(h->set, &h->cfg2->jobs[0],
			     "job", h->world, h->layers, h->n_layers, &h->state,
			     h->reason, sizeof(h->reason), &next),
	    0);
	assert_int_equal(ctl_policy_set_commit(next, &h->set, next_window, 4,
			     note, sizeof(note)),
	    0);
	assert_null(h->set);
	h->set = next;
	assert_string_equal(note, "");
}

void
sup_run(sup_host *h, bellows_window *w)
{
	uint32_t failed = 99;

	assert_int_equal(ctl_policy_set_run(h->set, w, &h->state, h->policies,
			     sizeof(h->policies), h->why, sizeof(h->why),
			     &failed),
	    0);
	assert_int_equal(failed, 0);
}

void
sup_assert_quiet(const sup_host *h, uint64_t index)
{
	if (h->why[0] != '\0')
		fail_msg("window %llu: unexpected reason '%s'",
		    (unsigned long long)index, h->why);
}

int
sup_direct_start(sup_host *h, const ctl_config *cfg)
{
	const ctl_policy_conf *pc = &cfg->jobs[0].policies[0];
	bellows_window_layer jl[SUP_LAYERS_MAX];
	bellows_job_info job = { .job = "job",
		.world = h->world,
		.n_layers = h->n_layers,
		.layers = jl };
	int r;

	h->ops = pc->ops;
	h->config = pc->config;
	h->pstate = calloc(1, h->ops->state_size);
	assert_non_null(h->pstate);
	for (uint32_t l = 0; l < h->n_layers; l++) {
		const com_layer_info *li = &h->layers[l];

		h->sel[l] = ctl_selector_matches(&pc->selector, li->name,
		    li->numel, li->ndim);
		jl[l] = (bellows_window_layer){ .name = li->name,
			.numel = li->numel,
			.ndim = li->ndim,
			.shape = li->shape,
			.selected = h->sel[l] };
	}
	h->prop = (bellows_proposal){ .n_layers = h->n_layers,
		.level = h->level,
		.error_bound = h->bound,
		.lr_scale = 1 };
	r = h->ops->init(h->pstate, h->config, &job, &h->prop);
	h->started = r == 0;
	return r;
}

int
sup_direct_run(sup_host *h, const bellows_window *w)
{
	h->prop.reason[0] = '\0';
	h->prop.n_metrics = 0;
	h->prop.calibrate_steps = 0;
	return h->ops->on_window(h->pstate, h->config, w, &h->prop);
}

int
sup_direct_reload(sup_host *h, uint64_t next_window)
{
	const void *config = h->cfg2->jobs[0].policies[0].config;
	bellows_event ev = { .type = BELLOWS_EVENT_RELOAD,
		.window = next_window,
		.ranks_alive = 4 };
	int r = h->ops->on_event(h->pstate, config, &ev);

	if (r == 0)
		h->config = config;
	return r;
}

void
sup_direct_stop(sup_host *h)
{
	if (h->started && h->ops->fini != NULL)
		h->ops->fini(h->pstate, h->config);
	h->started = false;
	free(h->pstate);
	h->pstate = NULL;
}

const bellows_metric *
sup_metric_find(const bellows_proposal *p, const char *name)
{
	for (uint32_t i = 0; i < p->n_metrics; i++) {
		if (strcmp(p->metrics[i].name, name) == 0)
			return &p->metrics[i];
	}
	return NULL;
}

double
sup_metric(const bellows_proposal *p, const char *name, int32_t layer)
{
	for (uint32_t i = 0; i < p->n_metrics; i++) {
		const bellows_metric *m = &p->metrics[i];

		if (strcmp(m->name, name) == 0 && m->layer == layer)
			return m->value;
	}
	fail_msg("no metric %s of layer %d", name, layer);
	return NAN;
}

/* The entry `name` of ops's parameter table; fails the test if none. */
static const bellows_param *
support_param(const bellows_policy_ops *ops, const char *name)
{
	for (const bellows_param *p = ops->params; p->name != NULL; p++) {
		if (strcmp(p->name, name) == 0)
			return p;
	}
	fail_msg("no parameter '%s'", name);
	return NULL;
}

void
sup_patch_string(const bellows_policy_ops *ops, const void *config,
    const char *name, const char *v)
{
	const bellows_param *p = support_param(ops, name);

	snprintf((char *)config + p->offset, BELLOWS_PARAM_STRING_MAX, "%s", v);
}

void
sup_patch_double(const bellows_policy_ops *ops, const void *config,
    const char *name, double v)
{
	const bellows_param *p = support_param(ops, name);

	memcpy((char *)config + p->offset, &v, sizeof(v));
}

void
sup_assert_registered(const char *name, const bellows_policy_ops *ops,
    uint32_t knobs)
{
	char err[256] = "";

	assert_ptr_equal(pol_registry_find(name), ops);
	assert_int_equal(pol_registry_check(ops, err, sizeof(err)), 0);
	assert_int_equal(ops->knobs, knobs);
}

void
sup_assert_contains(const char *text, const char *part)
{
	if (strstr(text, part) == NULL)
		fail_msg("expected '%s' in '%s'", part, text);
}

void
sup_assert_lacks(const char *text, const char *part)
{
	if (strstr(text, part) != NULL)
		fail_msg("did not expect '%s' in '%s'", part, text);
}

void
sup_assert_near(double got, double want, double rel)
{
	if (!(fabs(got - want) <= rel * fabs(want)))
		fail_msg("%.17g is not within %g of %.17g", got, rel, want);
}

void
sup_assert_levels(const double *level, const double *want, uint32_t n)
{
	for (uint32_t l = 0; l < n; l++) {
		if (level[l] != want[l])
			fail_msg("layer %u: level %g, expected %g", l, level[l],
			    want[l]);
	}
}
