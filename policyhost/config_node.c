/* config_node - typed values read from YAML nodes, see config_int.h.
 *
 * Every node carries its position, so each error a value earns names the
 * line and column of the offending key or value ("FILE:LINE:COLUMN:
 * message"); errors are recorded in the reading's config_ctx, which
 * decides whether validation goes on after one.
 */
#include "config_int.h"

#include "common/errbuf.h"

#include <bellows/error.h>

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool
ctl_config_cancelled(const config_ctx *cx)
{
	return cx->cancel != NULL &&
	    atomic_load_explicit(cx->cancel, memory_order_relaxed);
}

void
ctl_config_record(config_ctx *cx, const char *msg)
{
	if (cx->n_fail == 0 && cx->errlen > 0)
		snprintf(cx->errbuf, cx->errlen, "%s", msg);
	if (cx->errs != NULL && cx->errs->n < CTL_CONFIG_ERRORS_MAX)
		snprintf(cx->errs->msg[cx->errs->n++], CTL_CONFIG_ERR_MAX, "%s",
		    msg);
	cx->n_fail++;
}

int
ctl_config_fail(config_ctx *cx, const yaml_node_t *node, const char *fmt, ...)
{
	char msg[CTL_CONFIG_ERR_MAX];
	va_list ap;
	int n;

	/* Without a node (an empty document) the file itself is at fault:
	 * point at its start, so every message has a usable position. */
	n = snprintf(msg, sizeof(msg), "%s:%zu:%zu: ", cx->name,
	    node != NULL ? node->start_mark.line + 1 : 1,
	    node != NULL ? node->start_mark.column + 1 : 1);
	if (n > 0 && (size_t)n < sizeof(msg)) {
		va_start(ap, fmt);
		com_verrf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
		va_end(ap);
	}
	ctl_config_record(cx, msg);
	return BELLOWS_ECONFIG;
}

bool
ctl_config_go_on(const config_ctx *cx, int r)
{
	return r == BELLOWS_ECONFIG && cx->errs != NULL && !cx->stop &&
	    cx->n_fail < CTL_CONFIG_ERRORS_MAX;
}

yaml_node_t *
ctl_config_node(config_ctx *cx, int id)
{
	return yaml_document_get_node(&cx->doc, id);
}

const char *
ctl_config_scalar(const yaml_node_t *node)
{
	return node->type == YAML_SCALAR_NODE
	    ? (const char *)node->data.scalar.value
	    : NULL;
}

static const char *
config_type_name(const yaml_node_t *node)
{
	switch (node->type) {
	case YAML_SCALAR_NODE:
		return "a scalar";
	case YAML_SEQUENCE_NODE:
		return "a list";
	case YAML_MAPPING_NODE:
		return "a mapping";
	default:
		return "nothing";
	}
}

int
ctl_config_expect(config_ctx *cx, const yaml_node_t *node,
    yaml_node_type_t type, const char *what)
{
	static const char *const names[] = { "", "a scalar", "a list",
		"a mapping" };

	if (node->type != type)
		return ctl_config_fail(cx, node, "%s must be %s, not %s", what,
		    names[type], config_type_name(node));
	return 0;
}

int
ctl_config_double(config_ctx *cx, const yaml_node_t *node, const char *what,
    double min, double max, double *ret)
{
	const char *s = ctl_config_scalar(node);
	char *end;
	double v;

	if (s == NULL || s[0] == '\0')
		return ctl_config_fail(cx, node, "%s must be a number", what);
	errno = 0;
	v = strtod(s, &end);
	if (*end != '\0' || errno != 0 || !isfinite(v))
		return ctl_config_fail(cx, node,
		    "%s must be a number, not '%s'", what, s);
	if (v < min || v > max)
		return ctl_config_fail(cx, node,
		    "%s must be in [%g, %g], not %g", what, min, max, v);
	*ret = v;
	return 0;
}

int
ctl_config_int(config_ctx *cx, const yaml_node_t *node, const char *what,
    double min, double max, int64_t *ret)
{
	const char *s = ctl_config_scalar(node);
	char *end;
	long long v;

	if (s == NULL || s[0] == '\0')
		return ctl_config_fail(cx, node, "%s must be an integer", what);
	errno = 0;
	v = strtoll(s, &end, 10);
	if (*end != '\0' || errno != 0)
		return ctl_config_fail(cx, node,
		    "%s must be an integer, not '%s'", what, s);
	if ((double)v < min || (double)v > max)
		return ctl_config_fail(cx, node,
		    "%s must be in [%.0f, %.0f], not %lld", what, min, max, v);
	*ret = v;
	return 0;
}

int
ctl_config_u32(config_ctx *cx, const yaml_node_t *node, const char *what,
    uint32_t min, uint32_t max, uint32_t *ret)
{
	int64_t v;
	int r = ctl_config_int(cx, node, what, min, max, &v);

	if (r == 0)
		*ret = (uint32_t)v;
	return r;
}

int
ctl_config_bool(config_ctx *cx, const yaml_node_t *node, const char *what,
    bool *ret)
{
	const char *s = ctl_config_scalar(node);

	if (s != NULL && (strcmp(s, "true") == 0 || strcmp(s, "yes") == 0)) {
		*ret = true;
		return 0;
	}
	if (s != NULL && (strcmp(s, "false") == 0 || strcmp(s, "no") == 0)) {
		*ret = false;
		return 0;
	}
	return ctl_config_fail(cx, node, "%s must be true or false", what);
}

int
ctl_config_string(config_ctx *cx, const yaml_node_t *node, const char *what,
    char **ret)
{
	const char *s = ctl_config_scalar(node);
	char *copy;

	if (s == NULL)
		return ctl_config_fail(cx, node, "%s must be a string", what);
	copy = strdup(s);
	if (copy == NULL)
		return BELLOWS_ENOMEM;
	free(*ret);
	*ret = copy;
	return 0;
}

typedef struct config_key {
	const char *name; /* the key's text */
	size_t index;     /* its place in the mapping */
} config_key;

static int
config_key_cmp(const void *a, const void *b)
{
	const config_key *ka = a, *kb = b;
	int c = strcmp(ka->name, kb->name);

	if (c != 0)
		return c;
	return ka->index < kb->index ? -1 : ka->index > kb->index;
}

int
ctl_config_check_duplicates(config_ctx *cx, yaml_node_t *map)
{
	yaml_node_pair_t *start = map->data.mapping.pairs.start;
	size_t n = (size_t)(map->data.mapping.pairs.top - start), m = 0;
	size_t first = SIZE_MAX, second = 0;
	config_key *keys;

	if (n < 2)
		return 0;
	keys = malloc(n * sizeof(*keys));
	if (keys == NULL)
		return BELLOWS_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const char *name = ctl_config_scalar(
		    ctl_config_node(cx, start[i].key));

		if (name != NULL)
			keys[m++] = (config_key){ .name = name, .index = i };
	}
	qsort(keys, m, sizeof(*keys), config_key_cmp);
	for (size_t i = 1; i < m; i++) {
		/* keys[i - 1] opens its run of equal keys: the first place. */
		if (strcmp(keys[i].name, keys[i - 1].name) == 0 &&
		    (i < 2 ||
			strcmp(keys[i - 1].name, keys[i - 2].name) != 0) &&
		    keys[i - 1].index < first) {
			first = keys[i - 1].index;
			second = keys[i].index;
		}
	}
	free(keys);
	if (first == SIZE_MAX)
		return 0;
	yaml_node_t *kb = ctl_config_node(cx, start[second].key);
	return ctl_config_fail(cx, kb, "key '%s' appears twice",
	    ctl_config_scalar(kb));
}
