/* config_job - the job entries of a configuration, see config.h.
 *
 * Each entry of `jobs:` matches job names with a glob, may list the
 * clients allowed for them, and orders the policies deciding for them.
 * A policy is a built-in type or one a plug-in provides; its parameters
 * are read by the type's parameter table (the host parses and checks the
 * YAML, the policy sees its config struct), its layer selector is
 * compiled, and no two policies of an entry own the same knob.
 */
#include "config_int.h"

#include "policies/registry.h"
#include "common/suggest.h"

#include <bellows/error.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int
config_param_steps(config_ctx *cx, const yaml_node_t *node,
    const bellows_param *p, bellows_steps *steps)
{
	yaml_node_t *key, *val;
	const char *kname;
	int r;

	if ((r = ctl_config_expect(cx, node, YAML_MAPPING_NODE, p->name)) != 0)
		return r;
	steps->n = 0;
	CONFIG_FOREACH_PAIR(cx, node, kname, key, val)
	{
		int64_t from;
		double v;

		(void)kname;
		if (steps->n >= BELLOWS_STEPS_MAX)
			return ctl_config_fail(cx, key,
			    "%s has more than %d entries", p->name,
			    BELLOWS_STEPS_MAX);
		if ((r = ctl_config_int(cx, key, "a window index", 0, 1e15,
			 &from)) != 0)
			return r;
		if (steps->n > 0 && (uint64_t)from <= steps->from[steps->n - 1])
			return ctl_config_fail(cx, key,
			    "%s: window %lld does not follow %llu", p->name,
			    (long long)from,
			    (unsigned long long)steps->from[steps->n - 1]);
		if ((r = ctl_config_double(cx, val, p->name, p->min, p->max,
			 &v)) != 0)
			return r;
		steps->from[steps->n] = (uint64_t)from;
		steps->value[steps->n] = v;
		steps->n++;
	}
	return 0;
}

static int
config_param(config_ctx *cx, const yaml_node_t *node, const bellows_param *p,
    void *config)
{
	char *dst = (char *)config + p->offset;
	int64_t iv = 0;
	double dv = 0;
	bool bv = false;
	int r;

	switch (p->type) {
	case BELLOWS_PARAM_BOOL:
		if ((r = ctl_config_bool(cx, node, p->name, &bv)) == 0)
			memcpy(dst, &bv, sizeof(bv));
		return r;
	case BELLOWS_PARAM_INT:
		if ((r = ctl_config_int(cx, node, p->name, p->min, p->max,
			 &iv)) == 0)
			memcpy(dst, &iv, sizeof(iv));
		return r;
	case BELLOWS_PARAM_DOUBLE:
		if ((r = ctl_config_double(cx, node, p->name, p->min, p->max,
			 &dv)) == 0)
			memcpy(dst, &dv, sizeof(dv));
		return r;
	case BELLOWS_PARAM_STRING: {
		const char *s = ctl_config_scalar(node);

		if (s == NULL || strlen(s) >= BELLOWS_PARAM_STRING_MAX)
			return ctl_config_fail(cx, node,
			    "%s must be a string of at most %d bytes", p->name,
			    BELLOWS_PARAM_STRING_MAX - 1);
		if (p->choices != NULL) {
			char allowed[256] = "";
			bool found = false;

			for (const char *const *c = p->choices; *c != NULL;
			     c++) {
				size_t used = strlen(allowed);

				found = found || strcmp(*c, s) == 0;
				snprintf(allowed + used, sizeof(allowed) - used,
				    "%s%s", used ? ", " : "", *c);
			}
			if (!found)
				return ctl_config_fail(cx, node,
				    "%s must be one of %s, not '%s'", p->name,
				    allowed, s);
		}
		memcpy(dst, s, strlen(s) + 1);
		return 0;
	}
	case BELLOWS_PARAM_STEPS:
		return config_param_steps(cx, node, p, (bellows_steps *)dst);
	}
	return ctl_config_fail(cx, node, "parameter '%s' has an unknown type",
	    p->name);
}

static void
config_param_defaults(const bellows_policy_ops *ops, void *config)
{
	for (const bellows_param *p = ops->params; p != NULL && p->name != NULL;
	     p++) {
		char *dst = (char *)config + p->offset;
		int64_t iv = (int64_t)p->def;
		bool bv = p->def != 0;

		switch (p->type) {
		case BELLOWS_PARAM_BOOL:
			memcpy(dst, &bv, sizeof(bv));
			break;
		case BELLOWS_PARAM_INT:
			memcpy(dst, &iv, sizeof(iv));
			break;
		case BELLOWS_PARAM_DOUBLE:
			memcpy(dst, &p->def, sizeof(p->def));
			break;
		case BELLOWS_PARAM_STRING:
			snprintf(dst, BELLOWS_PARAM_STRING_MAX, "%s",
			    p->def_str != NULL ? p->def_str : "");
			break;
		case BELLOWS_PARAM_STEPS:
			memset(dst, 0, sizeof(bellows_steps));
			break;
		}
	}
}

/* `node` is the params mapping, or NULL when the policy `where` has none;
 * a missing required parameter is then reported at the policy. */
static int
config_params(config_ctx *cx, yaml_node_t *node, yaml_node_t *where,
    ctl_policy_conf *pc)
{
	const bellows_policy_ops *ops = pc->ops;
	yaml_node_t *key, *val;
	const char *kname;
	int r;

	if (node != NULL) {
		if ((r = ctl_config_expect(cx, node, YAML_MAPPING_NODE,
			 "params")) != 0 ||
		    (r = ctl_config_check_duplicates(cx, node)) != 0)
			return r;
		CONFIG_FOREACH_PAIR(cx, node, kname, key, val)
		{
			const bellows_param *p = ops->params;

			while (p != NULL && p->name != NULL &&
			    (kname == NULL || strcmp(p->name, kname) != 0))
				p++;
			if (p == NULL || p->name == NULL)
				r = ctl_config_fail(cx, key,
				    "policy type '%s' has no parameter '%s'",
				    ops->name, kname != NULL ? kname : "?");
			else
				r = config_param(cx, val, p, pc->config);
			if (r != 0 && !ctl_config_go_on(cx, r))
				return r;
		}
	}
	for (const bellows_param *p = ops->params; p != NULL && p->name != NULL;
	     p++) {
		bool seen = false;

		if (!p->required)
			continue;
		if (node != NULL) {
			CONFIG_FOREACH_PAIR(cx, node, kname, key, val)
			{
				if (kname != NULL &&
				    strcmp(kname, p->name) == 0)
					seen = true;
			}
		}
		if (seen)
			continue;
		r = ctl_config_fail(cx, node != NULL ? node : where,
		    "policy '%s' (type '%s') needs parameter '%s'", pc->name,
		    ops->name, p->name);
		if (!ctl_config_go_on(cx, r))
			return r;
	}
	return 0;
}

static int
config_selector(config_ctx *cx, yaml_node_t *node, ctl_selector *sel)
{
	yaml_node_t *key, *val;
	const char *kname;
	int64_t v;
	int r;

	if ((r = ctl_config_expect(cx, node, YAML_MAPPING_NODE, "layers")) !=
		0 ||
	    (r = ctl_config_check_duplicates(cx, node)) != 0)
		return r;
	CONFIG_FOREACH_PAIR(cx, node, kname, key, val)
	{
		if (kname != NULL && strcmp(kname, "match") == 0) {
			char msg[128];

			int rc;

			if ((r = ctl_config_string(cx, val, "match",
				 &sel->regex_src)) == 0 &&
			    (r = ctl_config_regex_check(cx, val,
				 sel->regex_src)) == 0) {
				rc = regcomp(&sel->regex, sel->regex_src,
				    REG_EXTENDED | REG_NOSUB);
				if (rc != 0) {
					regerror(rc, &sel->regex, msg,
					    sizeof(msg));
					r = ctl_config_fail(cx, val,
					    "match is not a valid regular "
					    "expression: %s",
					    msg);
				} else {
					sel->has_regex = true;
				}
			}
		} else if (kname != NULL && strcmp(kname, "min_numel") == 0) {
			if ((r = ctl_config_int(cx, val, "min_numel", 0, 1e15,
				 &v)) == 0)
				sel->min_numel = (uint64_t)v;
		} else if (kname != NULL && strcmp(kname, "min_ndim") == 0) {
			if ((r = ctl_config_int(cx, val, "min_ndim", 0, 8,
				 &v)) == 0) {
				sel->min_ndim = (uint32_t)v;
				sel->has_min_ndim = true;
			}
		} else {
			r = ctl_config_fail(cx, key,
			    "unknown key '%s' in layers (expected match, "
			    "min_numel, min_ndim)",
			    kname != NULL ? kname : "?");
		}
		if (r != 0 && !ctl_config_go_on(cx, r))
			return r;
	}
	return 0;
}

/* A plug-in this configuration has already loaded from `path`, if any:
 * entries naming one file share one reference. */
static ctl_plugin *
config_plugin_loaded(const ctl_config *cfg, const char *path)
{
	for (uint32_t i = 0; i < cfg->n_jobs; i++) {
		const ctl_job_conf *jc = &cfg->jobs[i];

		for (uint32_t j = 0; j < jc->n_policies; j++) {
			ctl_plugin *p = jc->policies[j].plugin;

			if (p != NULL && strcmp(ctl_plugin_path(p), path) == 0)
				return p;
		}
	}
	return NULL;
}

/* Loads the plug-in named by `node` into pc->plugin. A relative path is
 * taken from the YAML file's directory, not the daemon's working
 * directory, so a configuration and its plug-ins can move together; the
 * canonical path is what identifies the plug-in across reloads. */
static int
config_plugin(config_ctx *cx, yaml_node_t *node, ctl_policy_conf *pc)
{
	const char *given = ctl_config_scalar(node), *slash;
	char joined[PATH_MAX], real[PATH_MAX], err[CTL_CONFIG_ERR_MAX];
	ctl_plugin *loaded;
	int n, r;

	if (given == NULL || given[0] == '\0')
		return ctl_config_fail(cx, node, "plugin must be a file name");
	slash = strrchr(cx->name, '/');
	if (given[0] == '/' || slash == NULL)
		n = snprintf(joined, sizeof(joined), "%s", given);
	else
		n = snprintf(joined, sizeof(joined), "%.*s/%s",
		    (int)(slash - cx->name), cx->name, given);
	if (n < 0 || (size_t)n >= sizeof(joined))
		return ctl_config_fail(cx, node, "plugin path is too long");
	if (realpath(joined, real) == NULL)
		return ctl_config_fail(cx, node, "plugin '%s': %s", joined,
		    strerror(errno));
	loaded = config_plugin_loaded(cx->cfg, real);
	if (loaded != NULL) {
		pc->plugin = ctl_plugin_hold(loaded);
		return 0;
	}
	r = ctl_plugin_open(real, &pc->plugin, err, sizeof(err));
	if (r == BELLOWS_ENOMEM)
		return r;
	if (r != 0)
		return ctl_config_fail(cx, node, "%s", err);
	return 0;
}

static int
config_policy(config_ctx *cx, yaml_node_t *node, ctl_policy_conf *pc)
{
	yaml_node_t *key, *val, *params = NULL, *type_node = NULL;
	yaml_node_t *plugin_node = NULL;
	const char *kname;
	char err[256];
	uint32_t start = cx->n_fail;
	int r;

	pc->line = (int)node->start_mark.line + 1;
	pc->selector.min_ndim = 2; /* 1-D tensors (biases, norms) stay raw */
	if ((r = ctl_config_expect(cx, node, YAML_MAPPING_NODE, "a policy")) !=
		0 ||
	    (r = ctl_config_check_duplicates(cx, node)) != 0)
		return r;
	CONFIG_FOREACH_PAIR(cx, node, kname, key, val)
	{
		r = 0;
		if (kname != NULL && strcmp(kname, "type") == 0) {
			type_node = val;
		} else if (kname != NULL && strcmp(kname, "name") == 0) {
			r = ctl_config_string(cx, val, "name", &pc->name);
		} else if (kname != NULL && strcmp(kname, "params") == 0) {
			params = val;
		} else if (kname != NULL && strcmp(kname, "layers") == 0) {
			r = config_selector(cx, val, &pc->selector);
		} else if (kname != NULL && strcmp(kname, "plugin") == 0) {
			plugin_node = val;
		} else {
			r = ctl_config_fail(cx, key,
			    "unknown key '%s' in a policy (expected type, "
			    "name, plugin, params, layers)",
			    kname != NULL ? kname : "?");
		}
		if (r != 0 && !ctl_config_go_on(cx, r))
			return r;
	}
	if (type_node == NULL || ctl_config_scalar(type_node) == NULL)
		return ctl_config_fail(cx, type_node != NULL ? type_node : node,
		    "a policy needs a 'type'");
	if (plugin_node != NULL) {
		const bellows_policy_ops *ops;

		if ((r = config_plugin(cx, plugin_node, pc)) != 0)
			return r;
		ops = ctl_plugin_ops(pc->plugin);
		if (strcmp(ops->name, ctl_config_scalar(type_node)) != 0)
			return ctl_config_fail(cx, type_node,
			    "plugin '%s' provides policy type '%s', not '%s'",
			    ctl_plugin_path(pc->plugin), ops->name,
			    ctl_config_scalar(type_node));
		pc->ops = ops;
	} else {
		pc->ops = pol_registry_find(ctl_config_scalar(type_node));
	}
	if (pc->ops == NULL) {
		const char *names[64];
		const char *near;
		size_t n = 0;

		while (n < sizeof(names) / sizeof(names[0]) &&
		    pol_registry_at(n) != NULL) {
			names[n] = pol_registry_at(n)->name;
			n++;
		}
		near = com_suggest(ctl_config_scalar(type_node), names, n);
		if (near != NULL)
			return ctl_config_fail(cx, type_node,
			    "unknown policy type '%s'; did you mean '%s'? (a "
			    "plug-in's type needs 'plugin: FILE')",
			    ctl_config_scalar(type_node), near);
		return ctl_config_fail(cx, type_node,
		    "unknown policy type '%s' (a plug-in's type needs "
		    "'plugin: FILE')",
		    ctl_config_scalar(type_node));
	}
	if (pol_registry_check(pc->ops, err, sizeof(err)) != 0)
		return ctl_config_fail(cx, type_node, "%s", err);
	if (pc->name == NULL && (pc->name = strdup(pc->ops->name)) == NULL)
		return BELLOWS_ENOMEM;
	if (pc->ops->select_every_layer && !pc->selector.has_min_ndim)
		pc->selector.min_ndim = 0;
	pc->config = calloc(1,
	    pc->ops->config_size > 0 ? pc->ops->config_size : 1);
	if (pc->config == NULL)
		return BELLOWS_ENOMEM;
	config_param_defaults(pc->ops, pc->config);
	if ((r = config_params(cx, params, node, pc)) != 0)
		return r;
	/* check reads a config whose keys and parameters all parsed: no
	 * error since `start`. */
	if (cx->n_fail == start && pc->ops->check != NULL) {
		/* A plug-in's check runs in a child: it may crash. */
		r = pc->plugin != NULL
		    ? ctl_plugin_check(pc->plugin, pc->config, err, sizeof(err))
		    : pc->ops->check(pc->config, err, sizeof(err));
		if (r == BELLOWS_ENOMEM)
			return r;
		if (r != 0)
			return ctl_config_fail(cx, type_node, "policy '%s': %s",
			    pc->name, err);
	}
	return 0;
}

static const char *
config_knob_name(uint32_t bit)
{
	switch (bit) {
	case BELLOWS_KNOB_LEVEL:
		return "level";
	case BELLOWS_KNOB_BATCH_SIZE:
		return "batch_size";
	case BELLOWS_KNOB_LR_SCALE:
		return "lr_scale";
	case BELLOWS_KNOB_ERROR_BOUND:
		return "error_bound";
	case BELLOWS_KNOB_SIZE_THRESHOLD:
		return "size_threshold";
	case BELLOWS_KNOB_CODEC_TABLE:
		return "codec_table";
	case BELLOWS_KNOB_COMPRESSION:
		return "compression";
	case BELLOWS_KNOB_RESIDUAL_PLAN:
		return "residual_plan";
	default:
		return "?";
	}
}

/* `clients: [NAME, ...]` of a job entry: certificate names (a name the
 * clients directory does not hold is allowed: its .pub may come later). */
static int
config_job_clients(config_ctx *cx, yaml_node_t *node, ctl_job_conf *jc)
{
	size_t n;
	int r;

	if ((r = ctl_config_expect(cx, node, YAML_SEQUENCE_NODE, "clients")) !=
	    0)
		return r;
	n = (size_t)(node->data.sequence.items.top -
	    node->data.sequence.items.start);
	if (n > CTL_CONFIG_CLIENTS_MAX)
		return ctl_config_fail(cx, node,
		    "clients may list at most %u names, not %zu",
		    CTL_CONFIG_CLIENTS_MAX, n);
	jc->clients = calloc(n > 0 ? n : 1, sizeof(*jc->clients));
	if (jc->clients == NULL)
		return BELLOWS_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		yaml_node_t *item = ctl_config_node(cx,
		    node->data.sequence.items.start[i]);
		const char *name = ctl_config_scalar(item);

		if (name == NULL || !com_cert_name_ok(name))
			return ctl_config_fail(cx, item,
			    "a client name is 1..%d letters, digits, '.', "
			    "'_' or '-', not starting with '.'",
			    COM_CERT_NAME_MAX);
		if ((jc->clients[jc->n_clients] = strdup(name)) == NULL)
			return BELLOWS_ENOMEM;
		jc->n_clients++;
	}
	return 0;
}

int
ctl_config_job(config_ctx *cx, yaml_node_t *node, ctl_job_conf *jc)
{
	yaml_node_t *key, *val, *list = NULL;
	const char *kname;
	bool has_list = false;
	int r;

	if ((r = ctl_config_expect(cx, node, YAML_MAPPING_NODE,
		 "a job entry")) != 0 ||
	    (r = ctl_config_check_duplicates(cx, node)) != 0)
		return r;
	CONFIG_FOREACH_PAIR(cx, node, kname, key, val)
	{
		r = 0;
		if (kname != NULL && strcmp(kname, "match") == 0) {
			if ((r = ctl_config_string(cx, val, "match",
				 &jc->match)) == 0)
				r = ctl_config_glob_check(cx, val, jc->match);
		} else if (kname != NULL && strcmp(kname, "clients") == 0) {
			r = config_job_clients(cx, val, jc);
		} else if (kname != NULL && strcmp(kname, "all_stats") == 0) {
			r = ctl_config_bool(cx, val, "all_stats",
			    &jc->all_stats);
		} else if (kname != NULL && strcmp(kname, "policies") == 0) {
			has_list = true;
			if ((r = ctl_config_expect(cx, val, YAML_SEQUENCE_NODE,
				 "policies")) == 0)
				list = val;
		} else {
			r = ctl_config_fail(cx, key,
			    "unknown key '%s' in a job entry (expected match, "
			    "clients, all_stats, policies)",
			    kname != NULL ? kname : "?");
		}
		if (r != 0 && !ctl_config_go_on(cx, r))
			return r;
	}
	if (jc->match == NULL && (jc->match = strdup("*")) == NULL)
		return BELLOWS_ENOMEM;
	if (list == NULL)
		return has_list
		    ? 0
		    : ctl_config_fail(cx, node, "a job entry needs 'policies'");
	size_t n = (size_t)(list->data.sequence.items.top -
	    list->data.sequence.items.start);
	if (n == 0)
		return ctl_config_fail(cx, list, "policies must not be empty");
	if (n > CTL_CONFIG_POLICIES_MAX)
		return ctl_config_fail(cx, list,
		    "a job entry may have at most %u policies, not %zu",
		    CTL_CONFIG_POLICIES_MAX, n);
	jc->policies = calloc(n, sizeof(*jc->policies));
	if (jc->policies == NULL)
		return BELLOWS_ENOMEM;
	uint32_t owned = 0;
	for (size_t i = 0; i < n; i++) {
		yaml_node_t *pn = ctl_config_node(cx,
		    list->data.sequence.items.start[i]);
		ctl_policy_conf *pc = &jc->policies[i];

		if (ctl_config_cancelled(cx))
			return BELLOWS_ETIMEDOUT;
		if (++cx->n_policies > CTL_CONFIG_POLICIES_TOTAL_MAX) {
			cx->stop = true;
			return ctl_config_fail(cx, pn,
			    "more than %u policies in the file (an alias "
			    "counts each time it is used)",
			    CTL_CONFIG_POLICIES_TOTAL_MAX);
		}
		jc->n_policies++;
		if ((r = config_policy(cx, pn, pc)) != 0) {
			if (!ctl_config_go_on(cx, r))
				return r;
			/* Its name and knobs may be unknown: the checks
			 * across policies skip it. */
			if (pc->ops == NULL || pc->name == NULL)
				continue;
		}
		r = 0;
		for (uint32_t j = 0; j < i && r == 0; j++) {
			if (jc->policies[j].name != NULL &&
			    strcmp(jc->policies[j].name, pc->name) == 0)
				r = ctl_config_fail(cx, pn,
				    "two policies named '%s' in one job entry; "
				    "give one a 'name'",
				    pc->name);
		}
		uint32_t clash = owned & pc->ops->knobs;
		if (r == 0 && clash != 0) {
			uint32_t bit = clash & -clash;
			const char *other = "?";

			for (uint32_t j = 0; j < i; j++) {
				if (jc->policies[j].ops != NULL &&
				    jc->policies[j].name != NULL &&
				    (jc->policies[j].ops->knobs & bit))
					other = jc->policies[j].name;
			}
			r = ctl_config_fail(cx, pn,
			    "policy '%s' and policy '%s' both own the knob "
			    "'%s'; each knob has one owner",
			    pc->name, other, config_knob_name(bit));
		}
		if (r != 0 && !ctl_config_go_on(cx, r))
			return r;
		owned |= pc->ops->knobs;
	}
	return 0;
}
