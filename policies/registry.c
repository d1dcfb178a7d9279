/* registry - built-in policy table and ops validation, see registry.h. */
#include "registry.h"

#include "policies.h"

#include <bellows/error.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const bellows_policy_ops *const registry_builtins[] = {
	&pol_fixed_ops,
	&pol_schedule_ops,
	&pol_accordion_ops,
	&pol_accordion_batch_ops,
	&pol_adaqs_ops,
	&pol_slimgc_ops,
	&pol_comet_ops,
	&pol_comet_batch_ops,
	&pol_perfmodel_ops,
	&pol_resireduce_ops,
	&pol_gcomp_ops,
};

#define REGISTRY_N (sizeof(registry_builtins) / sizeof(registry_builtins[0]))

const bellows_policy_ops *
pol_registry_find(const char *name)
{
	if (name == NULL)
		return NULL;
	for (size_t i = 0; i < REGISTRY_N; i++) {
		if (strcmp(registry_builtins[i]->name, name) == 0)
			return registry_builtins[i];
	}
	return NULL;
}

const bellows_policy_ops *
pol_registry_at(size_t i)
{
	return i < REGISTRY_N ? registry_builtins[i] : NULL;
}

static bool
registry_name_ok(const char *name)
{
	if (name == NULL || name[0] == '\0' || strlen(name) > 64)
		return false;
	for (const char *p = name; *p != '\0'; p++) {
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
			*p == '_'))
			return false;
	}
	return true;
}

static size_t
registry_param_size(bellows_param_type type)
{
	switch (type) {
	case BELLOWS_PARAM_BOOL:
		return sizeof(bool);
	case BELLOWS_PARAM_INT:
		return sizeof(int64_t);
	case BELLOWS_PARAM_DOUBLE:
		return sizeof(double);
	case BELLOWS_PARAM_STRING:
		return BELLOWS_PARAM_STRING_MAX;
	case BELLOWS_PARAM_STEPS:
		return sizeof(bellows_steps);
	}
	return 0;
}

int
pol_registry_check(const bellows_policy_ops *ops, char *errbuf, size_t errlen)
{
	if (ops == NULL) {
		snprintf(errbuf, errlen, "no ops");
		return BELLOWS_EINVAL;
	}
	if (ops->abi_version < BELLOWS_POLICY_ABI_OLDEST ||
	    ops->abi_version > BELLOWS_POLICY_ABI) {
		/* An older policy was built against a smaller ops struct and
		 * event: reading its check or an event's LRs would read past
		 * what it knows. It must be rebuilt, not adapted. ABI 4 ops
		 * lack only stats_read, which nothing reads from them. */
		snprintf(errbuf, errlen,
		    "policy ABI version %u, this bellowsd speaks %u%s",
		    ops->abi_version, BELLOWS_POLICY_ABI,
		    ops->abi_version < BELLOWS_POLICY_ABI
			? ": rebuild the policy against this bellows' "
			  "<bellows/policy.h>"
			: "");
		return BELLOWS_EINVAL;
	}
	if (!registry_name_ok(ops->name)) {
		snprintf(errbuf, errlen,
		    "policy name must be 1-64 characters of [a-z0-9_]");
		return BELLOWS_EINVAL;
	}
	if (ops->init == NULL || ops->on_window == NULL) {
		snprintf(errbuf, errlen, "policy '%s' lacks init or on_window",
		    ops->name);
		return BELLOWS_EINVAL;
	}
	if (ops->knobs == 0) {
		snprintf(errbuf, errlen, "policy '%s' owns no knob", ops->name);
		return BELLOWS_EINVAL;
	}
	for (const bellows_param *p = ops->params; p != NULL && p->name != NULL;
	     p++) {
		size_t size = registry_param_size(p->type);

		/* Written so that a huge offset cannot wrap around. */
		if (size == 0 || size > ops->config_size ||
		    p->offset > ops->config_size - size) {
			snprintf(errbuf, errlen,
			    "policy '%s' parameter '%s': bad type or offset",
			    ops->name, p->name);
			return BELLOWS_EINVAL;
		}
		if ((p->type == BELLOWS_PARAM_INT ||
			p->type == BELLOWS_PARAM_DOUBLE) &&
		    !(p->min <= p->def && p->def <= p->max) && !p->required) {
			snprintf(errbuf, errlen,
			    "policy '%s' parameter '%s': default outside "
			    "[min, max]",
			    ops->name, p->name);
			return BELLOWS_EINVAL;
		}
	}
	return 0;
}

const bellows_window_layer *
pol_registry_layers(const bellows_policy_ops *ops,
    const bellows_window_layer *layers, uint32_t n, size_t layer_size,
    size_t *ret_size, void **buf, size_t *cap)
{
	const size_t old = BELLOWS_WINDOW_LAYER_SIZE_5;
	size_t need = old * n;

	*ret_size = layer_size;
	if (ops->abi_version >= 6 || layer_size == old || n == 0)
		return layers;
	if (need > *cap) {
		void *grown = realloc(*buf, need);

		if (grown == NULL)
			return NULL;
		*buf = grown;
		*cap = need;
	}
	for (uint32_t i = 0; i < n; i++)
		memcpy((char *)*buf + i * old,
		    (const char *)layers + i * layer_size, old);
	*ret_size = old;
	return *buf;
}

const bellows_window *
pol_registry_window(const bellows_policy_ops *ops, const bellows_window *w,
    bellows_window *tmp, void **buf, size_t *cap)
{
	size_t size;
	const bellows_window_layer *l = pol_registry_layers(ops, w->layers,
	    w->n_layers, w->layer_size, &size, buf, cap);

	if (l == NULL)
		return NULL;
	if (l == w->layers)
		return w;
	*tmp = *w;
	tmp->layers = l;
	tmp->layer_size = size;
	return tmp;
}

double
pol_steps_at(const bellows_steps *steps, uint64_t w, double def)
{
	double v = def;

	for (uint32_t i = 0; i < steps->n && steps->from[i] <= w; i++)
		v = steps->value[i];
	return v;
}
