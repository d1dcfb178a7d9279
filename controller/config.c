/* config - YAML configuration parsing and validation, see config.h.
 *
 * We load the whole document with libyaml's document API and walk the node
 * tree, because every node carries its position: each error can name the
 * line and column of the offending key or value. Nothing is applied while
 * walking; the result is a fresh ctl_config that the caller swaps in only
 * when the whole file was valid.
 */
#include "config.h"

#include "policies/registry.h"

#include <bellows/error.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

typedef struct config_ctx {
	yaml_document_t doc;       /* the parsed document */
	const char *name;          /* file name for messages */
	ctl_config *cfg;           /* being built: plug-ins loaded so far */
	char *errbuf;              /* where the first error goes */
	size_t errlen;             /* its size */
	uint32_t n_fail;           /* errors found so far */
	ctl_config_errors *errs;   /* every error, NULL: only the first */
	const atomic_bool *cancel; /* stop reading when true, or NULL */
	uint32_t n_policies;       /* policy entries walked, aliases too */
	uint64_t regex_positions;  /* of the layer regexes compiled so far */
	bool stop;                 /* a limit of the whole file was hit:
				    * validation goes on no more */
} config_ctx;

/* True when the reader was asked to stop (ctl_config_load_cancellable). */
static bool
config_cancelled(const config_ctx *cx)
{
	return cx->cancel != NULL &&
	    atomic_load_explicit(cx->cancel, memory_order_relaxed);
}

/* Records one error message: the first goes to cx->errbuf, each of the
 * first CTL_CONFIG_ERRORS_MAX to cx->errs when every error is collected,
 * and all are counted. */
static void
config_record(config_ctx *cx, const char *msg)
{
	if (cx->n_fail == 0 && cx->errlen > 0)
		snprintf(cx->errbuf, cx->errlen, "%s", msg);
	if (cx->errs != NULL && cx->errs->n < CTL_CONFIG_ERRORS_MAX)
		snprintf(cx->errs->msg[cx->errs->n++], CTL_CONFIG_ERR_MAX, "%s",
		    msg);
	cx->n_fail++;
}

static int config_fail(config_ctx *cx, const yaml_node_t *node, const char *fmt,
    ...) __attribute__((format(printf, 3, 4)));

static int
config_fail(config_ctx *cx, const yaml_node_t *node, const char *fmt, ...)
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
		vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
		va_end(ap);
	}
	config_record(cx, msg);
	return BELLOWS_ECONFIG;
}

/* Whether validation goes on after `r`, the error of one key, parameter,
 * policy or job: yes for a configuration error when every error is
 * collected (ctl_config_load_all) and fewer than CTL_CONFIG_ERRORS_MAX
 * were found; no for anything else (out of memory), nor when only the
 * first error is wanted (ctl_config_load, ctl_config_parse). A level that
 * went on returns 0: its errors are counted in cx->n_fail, which
 * config_parse turns into BELLOWS_ECONFIG. */
static bool
config_go_on(const config_ctx *cx, int r)
{
	return r == BELLOWS_ECONFIG && cx->errs != NULL && !cx->stop &&
	    cx->n_fail < CTL_CONFIG_ERRORS_MAX;
}

static yaml_node_t *
config_node(config_ctx *cx, int id)
{
	return yaml_document_get_node(&cx->doc, id);
}

static const char *
config_scalar(const yaml_node_t *node)
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

static int
config_expect(config_ctx *cx, const yaml_node_t *node, yaml_node_type_t type,
    const char *what)
{
	static const char *const names[] = { "", "a scalar", "a list",
		"a mapping" };

	if (node->type != type)
		return config_fail(cx, node, "%s must be %s, not %s", what,
		    names[type], config_type_name(node));
	return 0;
}

static int
config_double(config_ctx *cx, const yaml_node_t *node, const char *what,
    double min, double max, double *ret)
{
	const char *s = config_scalar(node);
	char *end;
	double v;

	if (s == NULL || s[0] == '\0')
		return config_fail(cx, node, "%s must be a number", what);
	errno = 0;
	v = strtod(s, &end);
	if (*end != '\0' || errno != 0 || !isfinite(v))
		return config_fail(cx, node, "%s must be a number, not '%s'",
		    what, s);
	if (v < min || v > max)
		return config_fail(cx, node, "%s must be in [%g, %g], not %g",
		    what, min, max, v);
	*ret = v;
	return 0;
}

static int
config_int(config_ctx *cx, const yaml_node_t *node, const char *what,
    double min, double max, int64_t *ret)
{
	const char *s = config_scalar(node);
	char *end;
	long long v;

	if (s == NULL || s[0] == '\0')
		return config_fail(cx, node, "%s must be an integer", what);
	errno = 0;
	v = strtoll(s, &end, 10);
	if (*end != '\0' || errno != 0)
		return config_fail(cx, node, "%s must be an integer, not '%s'",
		    what, s);
	if ((double)v < min || (double)v > max)
		return config_fail(cx, node,
		    "%s must be in [%.0f, %.0f], not %lld", what, min, max, v);
	*ret = v;
	return 0;
}

static int
config_u32(config_ctx *cx, const yaml_node_t *node, const char *what,
    uint32_t min, uint32_t max, uint32_t *ret)
{
	int64_t v;
	int r = config_int(cx, node, what, min, max, &v);

	if (r == 0)
		*ret = (uint32_t)v;
	return r;
}

static int
config_bool(config_ctx *cx, const yaml_node_t *node, const char *what,
    bool *ret)
{
	const char *s = config_scalar(node);

	if (s != NULL && (strcmp(s, "true") == 0 || strcmp(s, "yes") == 0)) {
		*ret = true;
		return 0;
	}
	if (s != NULL && (strcmp(s, "false") == 0 || strcmp(s, "no") == 0)) {
		*ret = false;
		return 0;
	}
	return config_fail(cx, node, "%s must be true or false", what);
}

static int
config_string(config_ctx *cx, const yaml_node_t *node, const char *what,
    char **ret)
{
	const char *s = config_scalar(node);
	char *copy;

	if (s == NULL)
		return config_fail(cx, node, "%s must be a string", what);
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

/* Rejects a mapping key that appears twice: YAML allows it silently, and a
 * second value that quietly wins is a classic configuration bug. The
 * report is at the second place of the key that appears first; keys are
 * sorted, so a mapping of n keys costs O(n log n), not O(n^2). */
static int
config_check_duplicates(config_ctx *cx, yaml_node_t *map)
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
		const char *name = config_scalar(config_node(cx, start[i].key));

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
	yaml_node_t *kb = config_node(cx, start[second].key);
	return config_fail(cx, kb, "key '%s' appears twice", config_scalar(kb));
}

/* The [:name:] classes a glob or regex bracket may name. */
static const char *const config_classes[] = { "alnum", "alpha", "blank",
	"cntrl", "digit", "graph", "lower", "print", "punct", "space", "upper",
	"xdigit", NULL };

/* Whether byte c is in the class named by the `len` bytes at `name`;
 * *known is false for a name that is no class. */
static bool
config_class_has(const char *name, size_t len, unsigned char c, bool *known)
{
	static int (*const fns[])(int) = { isalnum, isalpha, isblank, iscntrl,
		isdigit, isgraph, islower, isprint, ispunct, isspace, isupper,
		isxdigit };

	for (int i = 0; config_classes[i] != NULL; i++) {
		if (strlen(config_classes[i]) == len &&
		    memcmp(config_classes[i], name, len) == 0) {
			*known = true;
			return fns[i](c) != 0;
		}
	}
	*known = false;
	return false;
}

/* Reads the glob bracket expression at p (p[0] == '['): sets *in to
 * whether byte c is in its set and returns the byte after its ']', or NULL
 * when it is malformed (not closed, an unknown class), with *why saying
 * so. */
static const char *
config_glob_bracket(const char *p, unsigned char c, bool *in, const char **why)
{
	bool neg = false, hit = false;

	p++;
	if (*p == '!' || *p == '^') {
		neg = true;
		p++;
	}
	for (bool first = true; first || *p != ']'; first = false) {
		unsigned char lo, hi;

		if (*p == '\0') {
			*why = "'[' opens a set that no ']' closes";
			return NULL;
		}
		if (p[0] == '[' && p[1] == ':') {
			const char *end = strstr(p + 2, ":]");
			bool known;

			if (end == NULL) {
				*why = "'[:' opens a class that no ':]' "
				       "closes";
				return NULL;
			}
			hit = config_class_has(p + 2, (size_t)(end - p - 2), c,
				  &known) ||
			    hit;
			if (!known) {
				*why = "unknown class in '[:...:]' (expected "
				       "alnum, alpha, blank, cntrl, digit, "
				       "graph, lower, print, punct, space, "
				       "upper, xdigit)";
				return NULL;
			}
			p = end + 2;
			continue;
		}
		if (*p == '\\' && p[1] != '\0')
			p++;
		lo = (unsigned char)*p++;
		hi = lo;
		if (p[0] == '-' && p[1] != ']' && p[1] != '\0') {
			p++;
			if (*p == '\\' && p[1] != '\0')
				p++;
			hi = (unsigned char)*p++;
		}
		hit = hit || (c >= lo && c <= hi);
	}
	*in = hit != neg;
	return p + 1;
}

bool
ctl_config_glob_match(const char *pattern, const char *name)
{
	const char *p = pattern, *n = name;
	const char *star = NULL, *resume = NULL;

	/* One element of the pattern matches one byte, so only the last '*'
	 * ever needs to take one more byte: every earlier one is already
	 * placed as early as it can be. */
	while (*n != '\0') {
		const char *next = NULL;
		const char *why;
		bool in = false;

		switch (*p) {
		case '*':
			while (*p == '*')
				p++;
			star = p;
			resume = n;
			continue;
		case '?':
			next = p + 1;
			break;
		case '[':
			next = config_glob_bracket(p, (unsigned char)*n, &in,
			    &why);
			if (next == NULL)
				return false;
			if (!in)
				next = NULL;
			break;
		case '\\':
			if (p[1] != '\0' && p[1] == *n)
				next = p + 2;
			break;
		case '\0':
			break;
		default:
			if (*p == *n)
				next = p + 1;
			break;
		}
		if (next != NULL) {
			p = next;
			n++;
		} else if (star != NULL) {
			p = star;
			n = ++resume;
		} else {
			return false;
		}
	}
	while (*p == '*')
		p++;
	return *p == '\0';
}

/* Checks a job's glob: at most CTL_CONFIG_PATTERN_MAX bytes, every set
 * closed, every class known, no '\' at the end. */
static int
config_glob_check(config_ctx *cx, const yaml_node_t *node, const char *src)
{
	size_t len = strlen(src);

	if (len > CTL_CONFIG_PATTERN_MAX)
		return config_fail(cx, node,
		    "match is %zu bytes long; a pattern may have at most %u",
		    len, CTL_CONFIG_PATTERN_MAX);
	for (const char *p = src; *p != '\0';) {
		const char *why, *next;
		bool in;

		if (*p == '\\') {
			if (p[1] == '\0')
				return config_fail(cx, node,
				    "match ends with a lone '\\'");
			p += 2;
		} else if (*p == '[') {
			next = config_glob_bracket(p, 0, &in, &why);
			if (next == NULL)
				return config_fail(cx, node,
				    "match: %s (byte %zu of the pattern)", why,
				    (size_t)(p - src) + 1);
			p = next;
		} else {
			p++;
		}
	}
	return 0;
}

_Static_assert(CTL_CONFIG_REGEX_SIZE_MAX == 1024 &&
	CTL_CONFIG_REPEAT_MAX == 255 && CTL_CONFIG_GROUPS_MAX == 32,
    "the messages of config_re_alt and config_re_bound name the limits");

/* A layer regex, walked once before regcomp sees it: glibc compiles
 * nested {m,n} counts by copying, and matches back-references by trying
 * every split, so both are bounded here. */
typedef struct config_re {
	const char *src; /* the pattern */
	const char *p;   /* next byte */
	uint32_t depth;  /* parentheses open */
	const char *why; /* what is wrong, NULL while nothing */
	size_t at;       /* the byte it is at, from 1 */
} config_re;

static void
config_re_fail(config_re *re, const char *p, const char *why)
{
	if (re->why == NULL) {
		re->why = why;
		re->at = (size_t)(p - re->src) + 1;
	}
}

/* Reads a {m}, {m,} or {m,n} at re->p (after its '{'); returns the
 * largest count it allows (the smallest for an open bound, which the
 * size check then treats as one more copy). */
static uint64_t
config_re_bound(config_re *re)
{
	const char *at = re->p - 1;
	uint64_t v[2] = { 0, 0 };
	bool upper = false; /* digits after the ',' */
	int k = 0;

	for (;;) {
		char c = *re->p;

		if (c >= '0' && c <= '9') {
			v[k] = v[k] * 10 + (uint64_t)(c - '0');
			upper = upper || k == 1;
			if (v[k] > CTL_CONFIG_REPEAT_MAX) {
				config_re_fail(re, at,
				    "a count in {m,n} is above 255");
				return 1;
			}
		} else if (c == ',' && k == 0) {
			k = 1;
		} else if (c == '}') {
			re->p++;
			break;
		} else {
			/* glibc reads a '{' that opens no count as a
			 * literal; the size check counts it as one. */
			return 1;
		}
		re->p++;
	}
	if (k == 0)
		return v[0] > 0 ? v[0] : 1;
	if (!upper)
		return v[0] + 1;
	return v[1] > 0 ? v[1] : 1;
}

/* Reads an alternation up to ')' or the end; returns its size: the
 * positions it holds once counts are expanded. */
static uint64_t
config_re_alt(config_re *re)
{
	uint64_t total = 0, last = 0;

	while (*re->p != '\0' && re->why == NULL) {
		const char *at = re->p;
		char c = *re->p++;

		switch (c) {
		case ')':
			re->p--;
			return total;
		case '|':
			last = 0;
			continue;
		case '(':
			if (++re->depth > CTL_CONFIG_GROUPS_MAX) {
				config_re_fail(re, at,
				    "parentheses are nested more than 32 "
				    "deep");
				return total;
			}
			last = config_re_alt(re) + 1;
			if (*re->p == ')')
				re->p++;
			re->depth--;
			break;
		case '[': {
			const char *q = re->p;

			if (*q == '^')
				q++;
			if (*q == ']')
				q++;
			while (*q != '\0' && *q != ']') {
				if (q[0] == '[' &&
				    (q[1] == ':' || q[1] == '.' ||
					q[1] == '=')) {
					const char *end = strchr(q + 2, ']');

					q = end != NULL ? end + 1 : q + 2;
				} else {
					q++;
				}
			}
			re->p = *q == ']' ? q + 1 : q;
			last = 1;
			break;
		}
		case '\\':
			if (*re->p >= '1' && *re->p <= '9') {
				config_re_fail(re, at,
				    "back-references (\\1 to \\9) are not "
				    "allowed: matching them can take time "
				    "exponential in the name's length");
				return total;
			}
			if (*re->p != '\0')
				re->p++;
			last = 1;
			break;
		case '*':
		case '+':
		case '?':
			/* Repeating costs no positions, only a loop. */
			continue;
		case '{':
			if (*re->p >= '0' && *re->p <= '9') {
				uint64_t times = config_re_bound(re);

				/* The repeated part is already counted once. */
				total += last * (times - 1);
				last *= times;
				if (total > CTL_CONFIG_REGEX_SIZE_MAX)
					config_re_fail(re, at,
					    "the counts in {m,n} make it "
					    "longer than 1024 positions");
				continue;
			}
			last = 1;
			break;
		default:
			last = 1;
			break;
		}
		total += last;
		if (total > CTL_CONFIG_REGEX_SIZE_MAX)
			config_re_fail(re, at,
			    "the counts in {m,n} make it longer than 1024 "
			    "positions");
	}
	return total;
}

/* Checks a layer regex: at most CTL_CONFIG_PATTERN_MAX bytes, no
 * back-reference, parentheses nested at most CTL_CONFIG_GROUPS_MAX deep
 * and at most CTL_CONFIG_REGEX_SIZE_MAX positions with counts expanded. */
static int
config_regex_check(config_ctx *cx, const yaml_node_t *node, const char *src)
{
	config_re re = { .src = src, .p = src };
	size_t len = strlen(src);
	uint64_t size = 0;

	if (len > CTL_CONFIG_PATTERN_MAX)
		return config_fail(cx, node,
		    "match is %zu bytes long; a pattern may have at most %u",
		    len, CTL_CONFIG_PATTERN_MAX);
	while (*re.p != '\0' && re.why == NULL) {
		size += config_re_alt(&re);
		if (*re.p == ')')
			re.p++; /* unbalanced: regcomp says so */
	}
	if (re.why != NULL)
		return config_fail(cx, node,
		    "match: %s (byte %zu of the pattern)", re.why, re.at);
	/* Each position costs glibc about 100 bytes compiled. */
	cx->regex_positions += size;
	if (cx->regex_positions > CTL_CONFIG_REGEX_TOTAL_MAX) {
		cx->stop = true;
		return config_fail(cx, node,
		    "the layer regexes of the file hold more than %u positions "
		    "in all (an alias counts each time it is used)",
		    CTL_CONFIG_REGEX_TOTAL_MAX);
	}
	return 0;
}

#define CONFIG_FOREACH_PAIR(cx, map, kname, key, val)                          \
	for (yaml_node_pair_t *pair_ = (map)->data.mapping.pairs.start;        \
	     pair_ < (map)->data.mapping.pairs.top &&                          \
	     ((key) = config_node((cx), pair_->key),                           \
	     (val) = config_node((cx), pair_->value),                          \
	     (kname) = config_scalar(key), 1);                                 \
	     pair_++)

static int
config_param_steps(config_ctx *cx, const yaml_node_t *node,
    const bellows_param *p, bellows_steps *steps)
{
	yaml_node_t *key, *val;
	const char *kname;
	int r;

	if ((r = config_expect(cx, node, YAML_MAPPING_NODE, p->name)) != 0)
		return r;
	steps->n = 0;
	CONFIG_FOREACH_PAIR(cx, node, kname, key, val)
	{
		int64_t from;
		double v;

		(void)kname;
		if (steps->n >= BELLOWS_STEPS_MAX)
			return config_fail(cx, key,
			    "%s has more than %d entries", p->name,
			    BELLOWS_STEPS_MAX);
		if ((r = config_int(cx, key, "a window index", 0, 1e15,
			 &from)) != 0)
			return r;
		if (steps->n > 0 && (uint64_t)from <= steps->from[steps->n - 1])
			return config_fail(cx, key,
			    "%s: window %lld does not follow %llu", p->name,
			    (long long)from,
			    (unsigned long long)steps->from[steps->n - 1]);
		if ((r = config_double(cx, val, p->name, p->min, p->max, &v)) !=
		    0)
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
		if ((r = config_bool(cx, node, p->name, &bv)) == 0)
			memcpy(dst, &bv, sizeof(bv));
		return r;
	case BELLOWS_PARAM_INT:
		if ((r = config_int(cx, node, p->name, p->min, p->max, &iv)) ==
		    0)
			memcpy(dst, &iv, sizeof(iv));
		return r;
	case BELLOWS_PARAM_DOUBLE:
		if ((r = config_double(cx, node, p->name, p->min, p->max,
			 &dv)) == 0)
			memcpy(dst, &dv, sizeof(dv));
		return r;
	case BELLOWS_PARAM_STRING: {
		const char *s = config_scalar(node);

		if (s == NULL || strlen(s) >= BELLOWS_PARAM_STRING_MAX)
			return config_fail(cx, node,
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
				return config_fail(cx, node,
				    "%s must be one of %s, not '%s'", p->name,
				    allowed, s);
		}
		memcpy(dst, s, strlen(s) + 1);
		return 0;
	}
	case BELLOWS_PARAM_STEPS:
		return config_param_steps(cx, node, p, (bellows_steps *)dst);
	}
	return config_fail(cx, node, "parameter '%s' has an unknown type",
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
		if ((r = config_expect(cx, node, YAML_MAPPING_NODE,
			 "params")) != 0 ||
		    (r = config_check_duplicates(cx, node)) != 0)
			return r;
		CONFIG_FOREACH_PAIR(cx, node, kname, key, val)
		{
			const bellows_param *p = ops->params;

			while (p != NULL && p->name != NULL &&
			    (kname == NULL || strcmp(p->name, kname) != 0))
				p++;
			if (p == NULL || p->name == NULL)
				r = config_fail(cx, key,
				    "policy type '%s' has no parameter '%s'",
				    ops->name, kname != NULL ? kname : "?");
			else
				r = config_param(cx, val, p, pc->config);
			if (r != 0 && !config_go_on(cx, r))
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
		r = config_fail(cx, node != NULL ? node : where,
		    "policy '%s' (type '%s') needs parameter '%s'", pc->name,
		    ops->name, p->name);
		if (!config_go_on(cx, r))
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

	if ((r = config_expect(cx, node, YAML_MAPPING_NODE, "layers")) != 0 ||
	    (r = config_check_duplicates(cx, node)) != 0)
		return r;
	CONFIG_FOREACH_PAIR(cx, node, kname, key, val)
	{
		if (kname != NULL && strcmp(kname, "match") == 0) {
			char msg[128];

			int rc;

			if ((r = config_string(cx, val, "match",
				 &sel->regex_src)) == 0 &&
			    (r = config_regex_check(cx, val, sel->regex_src)) ==
				0) {
				rc = regcomp(&sel->regex, sel->regex_src,
				    REG_EXTENDED | REG_NOSUB);
				if (rc != 0) {
					regerror(rc, &sel->regex, msg,
					    sizeof(msg));
					r = config_fail(cx, val,
					    "match is not a valid regular "
					    "expression: %s",
					    msg);
				} else {
					sel->has_regex = true;
				}
			}
		} else if (kname != NULL && strcmp(kname, "min_numel") == 0) {
			if ((r = config_int(cx, val, "min_numel", 0, 1e15,
				 &v)) == 0)
				sel->min_numel = (uint64_t)v;
		} else if (kname != NULL && strcmp(kname, "min_ndim") == 0) {
			if ((r = config_int(cx, val, "min_ndim", 0, 8, &v)) ==
			    0) {
				sel->min_ndim = (uint32_t)v;
				sel->has_min_ndim = true;
			}
		} else {
			r = config_fail(cx, key,
			    "unknown key '%s' in layers (expected match, "
			    "min_numel, min_ndim)",
			    kname != NULL ? kname : "?");
		}
		if (r != 0 && !config_go_on(cx, r))
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
	const char *given = config_scalar(node), *slash;
	char joined[PATH_MAX], real[PATH_MAX], err[CTL_CONFIG_ERR_MAX];
	ctl_plugin *loaded;
	int n, r;

	if (given == NULL || given[0] == '\0')
		return config_fail(cx, node, "plugin must be a file name");
	slash = strrchr(cx->name, '/');
	if (given[0] == '/' || slash == NULL)
		n = snprintf(joined, sizeof(joined), "%s", given);
	else
		n = snprintf(joined, sizeof(joined), "%.*s/%s",
		    (int)(slash - cx->name), cx->name, given);
	if (n < 0 || (size_t)n >= sizeof(joined))
		return config_fail(cx, node, "plugin path is too long");
	if (realpath(joined, real) == NULL)
		return config_fail(cx, node, "plugin '%s': %s", joined,
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
		return config_fail(cx, node, "%s", err);
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
	if ((r = config_expect(cx, node, YAML_MAPPING_NODE, "a policy")) != 0 ||
	    (r = config_check_duplicates(cx, node)) != 0)
		return r;
	CONFIG_FOREACH_PAIR(cx, node, kname, key, val)
	{
		r = 0;
		if (kname != NULL && strcmp(kname, "type") == 0) {
			type_node = val;
		} else if (kname != NULL && strcmp(kname, "name") == 0) {
			r = config_string(cx, val, "name", &pc->name);
		} else if (kname != NULL && strcmp(kname, "params") == 0) {
			params = val;
		} else if (kname != NULL && strcmp(kname, "layers") == 0) {
			r = config_selector(cx, val, &pc->selector);
		} else if (kname != NULL && strcmp(kname, "plugin") == 0) {
			plugin_node = val;
		} else {
			r = config_fail(cx, key,
			    "unknown key '%s' in a policy (expected type, "
			    "name, plugin, params, layers)",
			    kname != NULL ? kname : "?");
		}
		if (r != 0 && !config_go_on(cx, r))
			return r;
	}
	if (type_node == NULL || config_scalar(type_node) == NULL)
		return config_fail(cx, type_node != NULL ? type_node : node,
		    "a policy needs a 'type'");
	if (plugin_node != NULL) {
		const bellows_policy_ops *ops;

		if ((r = config_plugin(cx, plugin_node, pc)) != 0)
			return r;
		ops = ctl_plugin_ops(pc->plugin);
		if (strcmp(ops->name, config_scalar(type_node)) != 0)
			return config_fail(cx, type_node,
			    "plugin '%s' provides policy type '%s', not '%s'",
			    ctl_plugin_path(pc->plugin), ops->name,
			    config_scalar(type_node));
		pc->ops = ops;
	} else {
		pc->ops = pol_registry_find(config_scalar(type_node));
	}
	if (pc->ops == NULL)
		return config_fail(cx, type_node,
		    "unknown policy type '%s' (a plug-in's type needs "
		    "'plugin: FILE')",
		    config_scalar(type_node));
	if (pol_registry_check(pc->ops, err, sizeof(err)) != 0)
		return config_fail(cx, type_node, "%s", err);
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
			return config_fail(cx, type_node, "policy '%s': %s",
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

	if ((r = config_expect(cx, node, YAML_SEQUENCE_NODE, "clients")) != 0)
		return r;
	n = (size_t)(node->data.sequence.items.top -
	    node->data.sequence.items.start);
	if (n > CTL_CONFIG_CLIENTS_MAX)
		return config_fail(cx, node,
		    "clients may list at most %u names, not %zu",
		    CTL_CONFIG_CLIENTS_MAX, n);
	jc->clients = calloc(n > 0 ? n : 1, sizeof(*jc->clients));
	if (jc->clients == NULL)
		return BELLOWS_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		yaml_node_t *item = config_node(cx,
		    node->data.sequence.items.start[i]);
		const char *name = config_scalar(item);

		if (name == NULL || !com_cert_name_ok(name))
			return config_fail(cx, item,
			    "a client name is 1..%d letters, digits, '.', "
			    "'_' or '-', not starting with '.'",
			    COM_CERT_NAME_MAX);
		if ((jc->clients[jc->n_clients] = strdup(name)) == NULL)
			return BELLOWS_ENOMEM;
		jc->n_clients++;
	}
	return 0;
}

static int
config_job(config_ctx *cx, yaml_node_t *node, ctl_job_conf *jc)
{
	yaml_node_t *key, *val, *list = NULL;
	const char *kname;
	bool has_list = false;
	int r;

	if ((r = config_expect(cx, node, YAML_MAPPING_NODE, "a job entry")) !=
		0 ||
	    (r = config_check_duplicates(cx, node)) != 0)
		return r;
	CONFIG_FOREACH_PAIR(cx, node, kname, key, val)
	{
		r = 0;
		if (kname != NULL && strcmp(kname, "match") == 0) {
			if ((r = config_string(cx, val, "match", &jc->match)) ==
			    0)
				r = config_glob_check(cx, val, jc->match);
		} else if (kname != NULL && strcmp(kname, "clients") == 0) {
			r = config_job_clients(cx, val, jc);
		} else if (kname != NULL && strcmp(kname, "policies") == 0) {
			has_list = true;
			if ((r = config_expect(cx, val, YAML_SEQUENCE_NODE,
				 "policies")) == 0)
				list = val;
		} else {
			r = config_fail(cx, key,
			    "unknown key '%s' in a job entry (expected match, "
			    "clients, policies)",
			    kname != NULL ? kname : "?");
		}
		if (r != 0 && !config_go_on(cx, r))
			return r;
	}
	if (jc->match == NULL && (jc->match = strdup("*")) == NULL)
		return BELLOWS_ENOMEM;
	if (list == NULL)
		return has_list
		    ? 0
		    : config_fail(cx, node, "a job entry needs 'policies'");
	size_t n = (size_t)(list->data.sequence.items.top -
	    list->data.sequence.items.start);
	if (n == 0)
		return config_fail(cx, list, "policies must not be empty");
	if (n > CTL_CONFIG_POLICIES_MAX)
		return config_fail(cx, list,
		    "a job entry may have at most %u policies, not %zu",
		    CTL_CONFIG_POLICIES_MAX, n);
	jc->policies = calloc(n, sizeof(*jc->policies));
	if (jc->policies == NULL)
		return BELLOWS_ENOMEM;
	uint32_t owned = 0;
	for (size_t i = 0; i < n; i++) {
		yaml_node_t *pn = config_node(cx,
		    list->data.sequence.items.start[i]);
		ctl_policy_conf *pc = &jc->policies[i];

		if (config_cancelled(cx))
			return BELLOWS_ETIMEDOUT;
		if (++cx->n_policies > CTL_CONFIG_POLICIES_TOTAL_MAX) {
			cx->stop = true;
			return config_fail(cx, pn,
			    "more than %u policies in the file (an alias "
			    "counts each time it is used)",
			    CTL_CONFIG_POLICIES_TOTAL_MAX);
		}
		jc->n_policies++;
		if ((r = config_policy(cx, pn, pc)) != 0) {
			if (!config_go_on(cx, r))
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
				r = config_fail(cx, pn,
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
			r = config_fail(cx, pn,
			    "policy '%s' and policy '%s' both own the knob "
			    "'%s'; each knob has one owner",
			    pc->name, other, config_knob_name(bit));
		}
		if (r != 0 && !config_go_on(cx, r))
			return r;
		owned |= pc->ops->knobs;
	}
	return 0;
}

/* A path of the file, relative paths taken from the YAML file's
 * directory (as plug-ins are). */
static int
config_path(config_ctx *cx, const yaml_node_t *node, const char *what,
    char **ret)
{
	const char *given = config_scalar(node), *slash;
	char joined[PATH_MAX];
	int n;

	if (given == NULL || given[0] == '\0')
		return config_fail(cx, node, "%s must be a path", what);
	slash = strrchr(cx->name, '/');
	if (given[0] == '/' || slash == NULL)
		n = snprintf(joined, sizeof(joined), "%s", given);
	else
		n = snprintf(joined, sizeof(joined), "%.*s/%s",
		    (int)(slash - cx->name), cx->name, given);
	if (n < 0 || (size_t)n >= sizeof(joined))
		return config_fail(cx, node, "%s is too long", what);
	free(*ret);
	if ((*ret = strdup(joined)) == NULL)
		return BELLOWS_ENOMEM;
	return 0;
}

static int
config_key_name_cmp(const void *a, const void *b)
{
	const ctl_client_key *x = a, *y = b;

	return strcmp(x->name, y->name);
}

void
ctl_config_keys_free(ctl_client_key *keys, uint32_t n)
{
	if (keys == NULL)
		return;
	for (uint32_t i = 0; i < n; i++)
		free(keys[i].name);
	free(keys);
}

int
ctl_config_read_clients(const char *dir, ctl_client_key **ret_keys,
    uint32_t *ret_n, char *errbuf, size_t errlen)
{
	ctl_client_key *keys = NULL;
	uint32_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d = opendir(dir);
	int r = 0;

	if (d == NULL) {
		snprintf(errbuf, errlen, "clients directory '%s': %s", dir,
		    strerror(errno));
		return BELLOWS_EIO;
	}
	while ((de = readdir(d)) != NULL) {
		size_t len = strlen(de->d_name);
		char path[PATH_MAX], name[COM_CERT_NAME_MAX + 1];
		com_cert c;

		if (len <= 4 || strcmp(de->d_name + len - 4, ".pub") != 0 ||
		    de->d_name[0] == '.')
			continue;
		snprintf(name, sizeof(name), "%.*s", (int)(len - 4),
		    de->d_name);
		if (!com_cert_name_ok(name)) {
			snprintf(errbuf, errlen,
			    "%s/%s: not a valid client name", dir, de->d_name);
			r = BELLOWS_EINVAL;
			goto out;
		}
		if (n == CTL_CONFIG_CLIENTS_MAX) {
			snprintf(errbuf, errlen,
			    "clients directory '%s' holds more than %u "
			    "certificates",
			    dir, CTL_CONFIG_CLIENTS_MAX);
			r = BELLOWS_EINVAL;
			goto out;
		}
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		r = com_cert_load(path, &c, errbuf, errlen);
		if (r != 0) {
			if (r == BELLOWS_ENOTFOUND)
				r = 0; /* removed while we read */
			else if (r != BELLOWS_ENOMEM)
				r = BELLOWS_EINVAL;
			if (r != 0)
				goto out;
			continue;
		}
		if (n == cap) {
			uint32_t ncap = cap ? cap * 2 : 16;
			ctl_client_key *grown = realloc(keys,
			    ncap * sizeof(*keys));

			if (grown == NULL) {
				r = BELLOWS_ENOMEM;
				goto out;
			}
			keys = grown;
			cap = ncap;
		}
		if ((keys[n].name = strdup(name)) == NULL) {
			r = BELLOWS_ENOMEM;
			goto out;
		}
		memcpy(keys[n].public_key, c.public_key, COM_CERT_Z85);
		n++;
	}
	qsort(keys, n, sizeof(*keys), config_key_name_cmp);
	/* One key, one name: else the name a connection gets would depend
	 * on the order the directory was read in. */
	for (uint32_t i = 0; i < n; i++) {
		for (uint32_t j = i + 1; j < n; j++) {
			if (strcmp(keys[i].public_key, keys[j].public_key) ==
			    0) {
				snprintf(errbuf, errlen,
				    "%s/%s.pub and %s/%s.pub hold the same "
				    "public key",
				    dir, keys[i].name, dir, keys[j].name);
				r = BELLOWS_EINVAL;
				goto out;
			}
		}
	}
out:
	closedir(d);
	if (r != 0) {
		ctl_config_keys_free(keys, n);
		return r;
	}
	*ret_keys = keys;
	*ret_n = n;
	return 0;
}

/* `daemon.security`: both paths are required; the key file and the
 * directory are read now, so an error names them at load time (and
 * `bellows policy check` finds it too). */
static int
config_security(config_ctx *cx, yaml_node_t *node, ctl_security_conf *sec)
{
	yaml_node_t *key, *val, *key_node = NULL, *dir_node = NULL;
	char err[CTL_CONFIG_ERR_MAX];
	const char *kname;
	int r = 0;

	if ((r = config_expect(cx, node, YAML_MAPPING_NODE,
		 "daemon.security")) != 0 ||
	    (r = config_check_duplicates(cx, node)) != 0)
		return r;
	sec->enabled = true;
	CONFIG_FOREACH_PAIR(cx, node, kname, key, val)
	{
		if (kname == NULL)
			r = config_fail(cx, key, "keys must be scalars");
		else if (strcmp(kname, "server_key") == 0) {
			key_node = val;
			r = config_path(cx, val, kname, &sec->server_key);
		} else if (strcmp(kname, "clients") == 0) {
			dir_node = val;
			r = config_path(cx, val, kname, &sec->clients);
		} else
			r = config_fail(cx, key,
			    "unknown key '%s' in daemon.security (expected "
			    "server_key, clients)",
			    kname);
		if (r != 0 && !config_go_on(cx, r))
			return r;
	}
	if (key_node == NULL || dir_node == NULL)
		return config_fail(cx, node,
		    "daemon.security needs both server_key and clients");
	if (sec->server_key == NULL || sec->clients == NULL)
		return BELLOWS_ECONFIG; /* already reported */
	r = com_cert_load(sec->server_key, &sec->server_cert, err, sizeof(err));
	if (r == BELLOWS_ENOMEM)
		return r;
	if (r == 0 && sec->server_cert.secret_key[0] == '\0')
		return config_fail(cx, key_node,
		    "server_key '%s' is a public certificate; bellowsd needs "
		    "its secret one (the .key file)",
		    sec->server_key);
	if (r != 0)
		return config_fail(cx, key_node, "server_key: %s", err);
	r = ctl_config_read_clients(sec->clients, &sec->keys, &sec->n_clients,
	    err, sizeof(err));
	if (r == BELLOWS_ENOMEM)
		return r;
	if (r != 0)
		return config_fail(cx, dir_node, "%s", err);
	return 0;
}

/* `store.mode`: permission bits, an octal string ("0600") or a number
 * (384, or 0600 which YAML reads as the text "0600"). Owner read and
 * write are required: the daemon writes the file. */
static int
config_mode(config_ctx *cx, const yaml_node_t *node, uint32_t *ret)
{
	const char *s = config_scalar(node);
	char *end;
	unsigned long v;
	int base = 10;

	if (s == NULL || s[0] == '\0')
		return config_fail(cx, node,
		    "store.mode must be permission bits, e.g. \"0600\"");
	if (s[0] == '0' && s[1] != '\0') {
		base = 8;
		if (s[1] == 'o' || s[1] == 'O')
			s += 2;
	}
	errno = 0;
	v = strtoul(s, &end, base);
	if (*end != '\0' || errno != 0 || s[0] == '-' || s[0] == '+')
		return config_fail(cx, node,
		    "store.mode must be permission bits (octal, e.g. "
		    "\"0600\"), not '%s'",
		    config_scalar(node));
	if (v > 0777)
		return config_fail(cx, node,
		    "store.mode must be at most 0777, not %lo", v);
	if ((v & 0600) != 0600)
		return config_fail(cx, node,
		    "store.mode %04lo must let the owner read and write "
		    "(0600 at least)",
		    v);
	*ret = (uint32_t)v;
	return 0;
}

static int
config_daemon(config_ctx *cx, yaml_node_t *node, ctl_config *cfg)
{
	yaml_node_t *key, *val;
	const char *kname;
	int r = 0;

	if ((r = config_expect(cx, node, YAML_MAPPING_NODE, "daemon")) != 0 ||
	    (r = config_check_duplicates(cx, node)) != 0)
		return r;
	CONFIG_FOREACH_PAIR(cx, node, kname, key, val)
	{
		if (kname == NULL)
			r = config_fail(cx, key, "keys must be scalars");
		else if (strcmp(kname, "control") == 0)
			r = config_string(cx, val, kname, &cfg->control);
		else if (strcmp(kname, "publish") == 0)
			r = config_string(cx, val, kname, &cfg->publish);
		else if (strcmp(kname, "apply_lag") == 0)
			r = config_u32(cx, val, kname, 0, 1000000,
			    &cfg->apply_lag);
		else if (strcmp(kname, "window_timeout_ms") == 0)
			r = config_u32(cx, val, kname, 1, 86400000,
			    &cfg->window_timeout_ms);
		else if (strcmp(kname, "rank_timeout_ms") == 0)
			r = config_u32(cx, val, kname, 10, 86400000,
			    &cfg->rank_timeout_ms);
		else if (strcmp(kname, "heartbeat_ms") == 0)
			r = config_u32(cx, val, kname, 10, 3600000,
			    &cfg->heartbeat_ms);
		else if (strcmp(kname, "repair_margin") == 0)
			r = config_u32(cx, val, kname, 0, 1000000,
			    &cfg->repair_margin);
		else if (strcmp(kname, "max_jobs") == 0)
			r = config_u32(cx, val, kname, 1, 1000000,
			    &cfg->max_jobs);
		else if (strcmp(kname, "max_world") == 0)
			r = config_u32(cx, val, kname, 1, 65536,
			    &cfg->max_world);
		else if (strcmp(kname, "max_layers") == 0)
			r = config_u32(cx, val, kname, 1, 65536,
			    &cfg->max_layers);
		else if (strcmp(kname, "job_idle_ms") == 0)
			r = config_u32(cx, val, kname, 1000, 4000000000u,
			    &cfg->job_idle_ms);
		else if (strcmp(kname, "reload_timeout_ms") == 0)
			r = config_u32(cx, val, kname, 100, 3600000,
			    &cfg->reload_timeout_ms);
		else if (strcmp(kname, "plugin_timeout_ms") == 0)
			r = config_u32(cx, val, kname, 10, 600000,
			    &cfg->plugin_timeout_ms);
		else if (strcmp(kname, "plugin_memory_mb") == 0)
			r = config_u32(cx, val, kname, 64, 1048576,
			    &cfg->plugin_memory_mb);
		else if (strcmp(kname, "max_job_mb") == 0)
			r = config_u32(cx, val, kname, 1, 1048576,
			    &cfg->max_job_mb);
		else if (strcmp(kname, "max_total_job_mb") == 0)
			r = config_u32(cx, val, kname, 1, 1048576,
			    &cfg->max_total_job_mb);
		else if (strcmp(kname, "peer_queue_mb") == 0)
			r = config_u32(cx, val, kname, 1, 4096,
			    &cfg->peer_queue_mb);
		else if (strcmp(kname, "allow_insecure") == 0)
			r = config_bool(cx, val, kname, &cfg->allow_insecure);
		else if (strcmp(kname, "security") == 0)
			r = config_security(cx, val, &cfg->security);
		else
			r = config_fail(cx, key, "unknown key '%s' in daemon",
			    kname);
		if (r != 0 && !config_go_on(cx, r))
			return r;
	}
	return 0;
}

static int
config_store(config_ctx *cx, yaml_node_t *node, ctl_store_conf *sc)
{
	yaml_node_t *key, *val;
	const char *kname;
	int r = 0;

	if ((r = config_expect(cx, node, YAML_MAPPING_NODE, "store")) != 0 ||
	    (r = config_check_duplicates(cx, node)) != 0)
		return r;
	CONFIG_FOREACH_PAIR(cx, node, kname, key, val)
	{
		if (kname == NULL)
			r = config_fail(cx, key, "keys must be scalars");
		else if (strcmp(kname, "max_windows_per_run") == 0)
			r = config_u32(cx, val, kname, 0, 1000000000,
			    &sc->max_windows_per_run);
		else if (strcmp(kname, "max_age_days") == 0)
			r = config_u32(cx, val, kname, 0, 36500,
			    &sc->max_age_days);
		else if (strcmp(kname, "keep_every") == 0)
			r = config_u32(cx, val, kname, 1, 1000000,
			    &sc->keep_every);
		else if (strcmp(kname, "batch_rows") == 0)
			r = config_u32(cx, val, kname, 1, 1000000,
			    &sc->batch_rows);
		else if (strcmp(kname, "queue_rows") == 0)
			r = config_u32(cx, val, kname, 1000, 100000000,
			    &sc->queue_rows);
		else if (strcmp(kname, "mode") == 0)
			r = config_mode(cx, val, &sc->mode);
		else
			r = config_fail(cx, key,
			    "unknown key '%s' in store (expected "
			    "max_windows_per_run, max_age_days, keep_every, "
			    "batch_rows, queue_rows, mode)",
			    kname);
		if (r != 0 && !config_go_on(cx, r))
			return r;
	}
	return 0;
}

static void
config_defaults(ctl_config *cfg)
{
	cfg->apply_lag = 1;
	/* Below the agents' wait for a decision, see
	 * ctl_config_timing_warning. */
	cfg->window_timeout_ms = 3000;
	cfg->rank_timeout_ms = 10000;
	cfg->heartbeat_ms = 1000;
	cfg->repair_margin = 2;
	cfg->max_jobs = 256;
	cfg->max_world = 16384;
	cfg->max_layers = 65536;
	cfg->job_idle_ms = 600000;
	cfg->reload_timeout_ms = CTL_CONFIG_RELOAD_TIMEOUT_MS;
	cfg->plugin_timeout_ms = CTL_WORKER_TIMEOUT_MS;
	cfg->plugin_memory_mb = CTL_WORKER_MEMORY_MB;
	cfg->max_job_mb = 1024;
	cfg->max_total_job_mb = 4096;
	cfg->peer_queue_mb = 16;
	cfg->store.max_windows_per_run = 0;
	cfg->store.max_age_days = 0;
	cfg->store.keep_every = 10;
	cfg->store.batch_rows = 4096;
	cfg->store.queue_rows = 262144;
	cfg->store.mode = 0600;
}

static int
config_root(config_ctx *cx, ctl_config *cfg)
{
	yaml_node_t *root = yaml_document_get_root_node(&cx->doc);
	yaml_node_t *key, *val, *jobs = NULL;
	const char *kname;
	bool has_jobs = false;
	int r;

	if (root == NULL)
		return config_fail(cx, NULL, "the file is empty");
	if ((r = config_expect(cx, root, YAML_MAPPING_NODE, "the top level")) !=
		0 ||
	    (r = config_check_duplicates(cx, root)) != 0)
		return r;
	CONFIG_FOREACH_PAIR(cx, root, kname, key, val)
	{
		r = 0;
		if (kname != NULL && strcmp(kname, "daemon") == 0) {
			r = config_daemon(cx, val, cfg);
		} else if (kname != NULL && strcmp(kname, "store") == 0) {
			r = config_store(cx, val, &cfg->store);
		} else if (kname != NULL && strcmp(kname, "jobs") == 0) {
			has_jobs = true;
			if ((r = config_expect(cx, val, YAML_SEQUENCE_NODE,
				 "jobs")) == 0)
				jobs = val;
		} else {
			r = config_fail(cx, key,
			    "unknown top-level key '%s' (expected daemon, "
			    "store, jobs)",
			    kname != NULL ? kname : "?");
		}
		if (r != 0 && !config_go_on(cx, r))
			return r;
	}
	if (jobs == NULL)
		return has_jobs
		    ? 0
		    : config_fail(cx, root, "the file needs a 'jobs' list");
	size_t n = (size_t)(jobs->data.sequence.items.top -
	    jobs->data.sequence.items.start);
	if (n == 0)
		return config_fail(cx, jobs, "jobs must not be empty");
	if (n > CTL_CONFIG_JOBS_MAX)
		return config_fail(cx, jobs,
		    "jobs may have at most %u entries, not %zu",
		    CTL_CONFIG_JOBS_MAX, n);
	cfg->jobs = calloc(n, sizeof(*cfg->jobs));
	if (cfg->jobs == NULL)
		return BELLOWS_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (config_cancelled(cx))
			return BELLOWS_ETIMEDOUT;
		cfg->n_jobs++;
		r = config_job(cx,
		    config_node(cx, jobs->data.sequence.items.start[i]),
		    &cfg->jobs[i]);
		if (r != 0 && !config_go_on(cx, r))
			return r;
	}
	return 0;
}

/* What config_read gives libyaml: the text, a chunk at a time, so that a
 * cancelled reading stops within a chunk. */
typedef struct config_input {
	config_ctx *cx;   /* whose cancel flag is read */
	const char *text; /* the whole text */
	size_t len;       /* its bytes */
	size_t at;        /* bytes given so far */
} config_input;

#define CONFIG_CHUNK 16384 /* bytes libyaml gets per read */

/* yaml_read_handler_t: 0 (an input error) once the reading is cancelled. */
static int
config_read(void *data, unsigned char *buffer, size_t size, size_t *size_read)
{
	config_input *in = data;
	size_t n = in->len - in->at;

	if (config_cancelled(in->cx))
		return 0;
	if (n > size)
		n = size;
	if (n > CONFIG_CHUNK)
		n = CONFIG_CHUNK;
	memcpy(buffer, in->text + in->at, n);
	in->at += n;
	*size_read = n;
	return 1;
}

/* Records the syntax error (or cancellation) that stopped `parser`. */
static int
config_parser_fail(config_ctx *cx, const yaml_parser_t *parser)
{
	char msg[CTL_CONFIG_ERR_MAX];

	if (config_cancelled(cx)) {
		snprintf(msg, sizeof(msg), "%s: reading was cancelled",
		    cx->name);
		config_record(cx, msg);
		return BELLOWS_ETIMEDOUT;
	}
	snprintf(msg, sizeof(msg), "%s:%zu:%zu: %s", cx->name,
	    parser->problem_mark.line + 1, parser->problem_mark.column + 1,
	    parser->problem != NULL ? parser->problem : "invalid YAML");
	config_record(cx, msg);
	return BELLOWS_ECONFIG;
}

/* Walks the first document's events before it is loaded as a tree and
 * refuses it at the first list or mapping nested deeper than
 * CTL_CONFIG_DEPTH_MAX, or the first node past CTL_CONFIG_NODES_MAX:
 * libyaml's time grows with the square of the depth, and its tree with
 * the nodes, so neither may be loaded first and judged after. */
static int
config_check_shape(config_ctx *cx, const char *text, size_t len)
{
	config_input in = { .cx = cx, .text = text, .len = len };
	yaml_parser_t parser;
	yaml_event_t ev;
	uint32_t depth = 0, nodes = 0;
	int r = 0;

	if (!yaml_parser_initialize(&parser))
		return BELLOWS_ENOMEM;
	yaml_parser_set_input(&parser, config_read, &in);
	for (bool done = false; !done && r == 0;) {
		if (!yaml_parser_parse(&parser, &ev)) {
			r = config_parser_fail(cx, &parser);
			break;
		}
		switch (ev.type) {
		case YAML_SEQUENCE_START_EVENT:
		case YAML_MAPPING_START_EVENT:
			if (++depth > CTL_CONFIG_DEPTH_MAX) {
				yaml_node_t at = {
					.start_mark = ev.start_mark
				};

				r = config_fail(cx, &at,
				    "nested more than %u levels deep (lists "
				    "and mappings)",
				    CTL_CONFIG_DEPTH_MAX);
			}
			/* fall through */
		case YAML_SCALAR_EVENT:
		case YAML_ALIAS_EVENT:
			if (r == 0 && ++nodes > CTL_CONFIG_NODES_MAX) {
				yaml_node_t at = {
					.start_mark = ev.start_mark
				};

				r = config_fail(cx, &at,
				    "more than %u values, lists and "
				    "mappings",
				    CTL_CONFIG_NODES_MAX);
			}
			break;
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			depth--;
			break;
		case YAML_DOCUMENT_END_EVENT:
		case YAML_STREAM_END_EVENT:
			done = true;
			break;
		default:
			break;
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&parser);
	return r;
}

/* Parses and validates `text` as the file cx->name into *ret_cfg;
 * errors go where cx says. */
static int
config_parse(config_ctx *cx, const char *text, size_t len, ctl_config **ret_cfg)
{
	config_input in = { .cx = cx, .text = text, .len = len };
	yaml_parser_t parser;
	ctl_config *cfg;
	int r;

	if ((r = config_check_shape(cx, text, len)) != 0)
		return r;
	cfg = calloc(1, sizeof(*cfg));
	if (cfg == NULL)
		return BELLOWS_ENOMEM;
	cx->cfg = cfg;
	config_defaults(cfg);
	cfg->path = strdup(cx->name);
	cfg->text = malloc(len + 1);
	if (cfg->path == NULL || cfg->text == NULL) {
		ctl_config_destroy(&cfg);
		return BELLOWS_ENOMEM;
	}
	memcpy(cfg->text, text, len);
	cfg->text[len] = '\0';
	cfg->text_len = len;

	if (!yaml_parser_initialize(&parser)) {
		ctl_config_destroy(&cfg);
		return BELLOWS_ENOMEM;
	}
	yaml_parser_set_input(&parser, config_read, &in);
	if (!yaml_parser_load(&parser, &cx->doc)) {
		r = config_parser_fail(cx, &parser);
		yaml_parser_delete(&parser);
		ctl_config_destroy(&cfg);
		return r;
	}
	r = config_root(cx, cfg);
	/* An error recorded below a level that went on still fails. */
	if (r == 0 && cx->n_fail > 0)
		r = BELLOWS_ECONFIG;
	yaml_document_delete(&cx->doc);
	yaml_parser_delete(&parser);
	if (r == BELLOWS_ETIMEDOUT) {
		char msg[CTL_CONFIG_ERR_MAX];

		snprintf(msg, sizeof(msg), "%s: reading was cancelled",
		    cx->name);
		config_record(cx, msg);
	}
	if (r != 0) {
		ctl_config_destroy(&cfg);
		return r;
	}
	*ret_cfg = cfg;
	return 0;
}

int
ctl_config_parse(const char *text, size_t len, const char *name,
    ctl_config **ret_cfg, char *errbuf, size_t errlen)
{
	config_ctx cx = { .name = name, .errbuf = errbuf, .errlen = errlen };

	return config_parse(&cx, text, len, ret_cfg);
}

/* Where byte `at` of text is, as "LINE:COLUMN" counted from 1. */
static void
config_position(const char *text, size_t at, size_t *ret_line, size_t *ret_col)
{
	size_t line = 1, col = 1;

	for (size_t i = 0; i < at; i++) {
		if (text[i] == '\n') {
			line++;
			col = 1;
		} else {
			col++;
		}
	}
	*ret_line = line;
	*ret_col = col;
}

/* Reads the file cx->name and parses it into *ret_cfg; errors go where cx
 * says. At most CTL_CONFIG_FILE_MAX bytes are accepted: one more byte is
 * read to tell a file of exactly that size from a longer one, and the
 * buffer never grows past that. */
static int
config_load(config_ctx *cx, ctl_config **ret_cfg)
{
	const size_t limit = CTL_CONFIG_FILE_MAX;
	/* Without O_NONBLOCK, opening a FIFO waits for a writer. */
	int fd = open(cx->name, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	char msg[CTL_CONFIG_ERR_MAX];
	char *text = NULL;
	size_t len = 0, cap = 0;
	struct stat st;
	FILE *f = NULL;
	int r;

	if (fd >= 0 && fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
		/* A FIFO or a device could keep the reader waiting or
		 * reading for ever. */
		snprintf(msg, sizeof(msg), "%s: not a regular file", cx->name);
		config_record(cx, msg);
		close(fd);
		return BELLOWS_EIO;
	}
	if (fd < 0 || (f = fdopen(fd, "rb")) == NULL) {
		snprintf(msg, sizeof(msg), "%s: cannot open: %s", cx->name,
		    strerror(errno));
		config_record(cx, msg);
		if (fd >= 0)
			close(fd);
		return BELLOWS_EIO;
	}
	while (len <= limit) {
		size_t n;

		if (config_cancelled(cx)) {
			snprintf(msg, sizeof(msg), "%s: reading was cancelled",
			    cx->name);
			config_record(cx, msg);
			free(text);
			fclose(f);
			return BELLOWS_ETIMEDOUT;
		}
		if (len == cap) {
			size_t want = cap == 0 ? 8192 : cap * 2;
			char *grown;

			if (want > limit + 1)
				want = limit + 1;
			grown = realloc(text, want);
			if (grown == NULL) {
				free(text);
				fclose(f);
				return BELLOWS_ENOMEM;
			}
			text = grown;
			cap = want;
		}
		n = fread(text + len, 1, cap - len, f);
		len += n;
		if (n == 0)
			break;
	}
	if (ferror(f)) {
		snprintf(msg, sizeof(msg), "%s: read error", cx->name);
		config_record(cx, msg);
		free(text);
		fclose(f);
		return BELLOWS_EIO;
	}
	fclose(f);
	if (len > limit) {
		size_t line, col;

		config_position(text, limit, &line, &col);
		snprintf(msg, sizeof(msg),
		    "%s:%zu:%zu: the file is longer than 16 MiB (%zu bytes); "
		    "this byte is past the limit",
		    cx->name, line, col, (size_t)limit);
		config_record(cx, msg);
		free(text);
		return BELLOWS_ECONFIG;
	}
	r = config_parse(cx, text != NULL ? text : "", len, ret_cfg);
	free(text);
	return r;
}

int
ctl_config_load(const char *path, ctl_config **ret_cfg, char *errbuf,
    size_t errlen)
{
	config_ctx cx = { .name = path, .errbuf = errbuf, .errlen = errlen };

	return config_load(&cx, ret_cfg);
}

int
ctl_config_load_all(const char *path, ctl_config **ret_cfg,
    ctl_config_errors *errs)
{
	return ctl_config_load_cancellable(path, NULL, ret_cfg, errs);
}

int
ctl_config_load_cancellable(const char *path, const atomic_bool *cancel,
    ctl_config **ret_cfg, ctl_config_errors *errs)
{
	config_ctx cx = { .name = path, .errs = errs, .cancel = cancel };
	int r;

	errs->n = 0;
	r = config_load(&cx, ret_cfg);
	if (r == BELLOWS_ENOMEM)
		errs->n = 0;
	return r;
}

void
ctl_config_errors_emit(const ctl_config_errors *errs, int r, const char *path,
    void (*line)(void *arg, const char *text), void *arg)
{
	char text[PATH_MAX + 64];

	for (uint32_t i = 0; i < errs->n; i++)
		line(arg, errs->msg[i]);
	if (errs->n == 0) {
		snprintf(text, sizeof(text), "%s: %s", path,
		    bellows_strerror(r));
		line(arg, text);
	} else if (errs->n == CTL_CONFIG_ERRORS_MAX) {
		snprintf(text, sizeof(text), "%s: stopped after %d errors",
		    path, CTL_CONFIG_ERRORS_MAX);
		line(arg, text);
	}
}

static void
config_selector_fini(ctl_selector *sel)
{
	if (sel->has_regex)
		regfree(&sel->regex);
	free(sel->regex_src);
	memset(sel, 0, sizeof(*sel));
}

void
ctl_config_destroy(ctl_config **cfg)
{
	ctl_config *c;

	if (cfg == NULL || *cfg == NULL)
		return;
	c = *cfg;
	for (uint32_t i = 0; i < c->n_jobs; i++) {
		ctl_job_conf *jc = &c->jobs[i];

		for (uint32_t j = 0; j < jc->n_policies; j++) {
			free(jc->policies[j].name);
			free(jc->policies[j].config);
			config_selector_fini(&jc->policies[j].selector);
			ctl_plugin_close(&jc->policies[j].plugin);
		}
		free(jc->policies);
		free(jc->match);
		for (uint32_t k = 0; k < jc->n_clients; k++)
			free(jc->clients[k]);
		free(jc->clients);
	}
	free(c->jobs);
	free(c->security.server_key);
	free(c->security.clients);
	ctl_config_keys_free(c->security.keys, c->security.n_clients);
	memset(&c->security.server_cert, 0, sizeof(c->security.server_cert));
	free(c->control);
	free(c->publish);
	free(c->path);
	free(c->text);
	free(c);
	*cfg = NULL;
}

const char *
ctl_config_client_by_key(const ctl_config *cfg, const char *z85)
{
	const ctl_security_conf *sec = &cfg->security;

	if (!sec->enabled || z85 == NULL)
		return NULL;
	for (uint32_t i = 0; i < sec->n_clients; i++) {
		if (strcmp(sec->keys[i].public_key, z85) == 0)
			return sec->keys[i].name;
	}
	return NULL;
}

bool
ctl_config_client_allowed(const ctl_config *cfg, const char *job,
    const char *client)
{
	const ctl_job_conf *jc;

	if (!cfg->security.enabled)
		return true;
	if (client == NULL || client[0] == '\0' || job == NULL)
		return false;
	if ((jc = ctl_config_match(cfg, job)) == NULL)
		return false;
	if (jc->clients == NULL)
		return true;
	for (uint32_t i = 0; i < jc->n_clients; i++) {
		if (strcmp(jc->clients[i], client) == 0)
			return true;
	}
	return false;
}

bool
ctl_config_client_allowed_all(const ctl_config *cfg, const char *client)
{
	if (!cfg->security.enabled)
		return true;
	if (client == NULL || client[0] == '\0')
		return false;
	for (uint32_t i = 0; i < cfg->n_jobs; i++) {
		const ctl_job_conf *jc = &cfg->jobs[i];
		bool listed = jc->clients == NULL;

		for (uint32_t k = 0; k < jc->n_clients && !listed; k++)
			listed = strcmp(jc->clients[k], client) == 0;
		if (!listed)
			return false;
	}
	return true;
}

const ctl_job_conf *
ctl_config_match(const ctl_config *cfg, const char *job)
{
	for (uint32_t i = 0; i < cfg->n_jobs; i++) {
		if (ctl_config_glob_match(cfg->jobs[i].match, job))
			return &cfg->jobs[i];
	}
	return NULL;
}

bool
ctl_policy_conf_same_instance(const ctl_policy_conf *a,
    const ctl_policy_conf *b)
{
	/* Equal ops mean equal types; a plug-in file loaded twice maps
	 * once, so its ops compare equal too. */
	if (strcmp(a->name, b->name) != 0 || a->ops != b->ops ||
	    (a->plugin == NULL) != (b->plugin == NULL))
		return false;
	return a->plugin == NULL ||
	    strcmp(ctl_plugin_path(a->plugin), ctl_plugin_path(b->plugin)) == 0;
}

bool
ctl_selector_matches(const ctl_selector *sel, const char *name, uint64_t numel,
    uint32_t ndim)
{
	if (ndim < sel->min_ndim || numel < sel->min_numel)
		return false;
	return !sel->has_regex || regexec(&sel->regex, name, 0, NULL, 0) == 0;
}

/* Writes s as a YAML double-quoted scalar, so that any text (quotes,
 * backslashes, '#', ": ") reads back unchanged. */
static void
config_print_quoted(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p != '\0';
	     p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(f, "\\x%02x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

static void
config_print_param(FILE *f, const bellows_param *p, const void *config)
{
	const char *src = (const char *)config + p->offset;
	const bellows_steps *st;
	bool bv;
	int64_t iv;
	double dv;

	fprintf(f, "          %s: ", p->name);
	switch (p->type) {
	case BELLOWS_PARAM_BOOL:
		memcpy(&bv, src, sizeof(bv));
		fprintf(f, "%s", bv ? "true" : "false");
		break;
	case BELLOWS_PARAM_INT:
		memcpy(&iv, src, sizeof(iv));
		fprintf(f, "%lld", (long long)iv);
		break;
	case BELLOWS_PARAM_DOUBLE:
		memcpy(&dv, src, sizeof(dv));
		fprintf(f, "%.17g", dv);
		break;
	case BELLOWS_PARAM_STRING:
		config_print_quoted(f, src);
		break;
	case BELLOWS_PARAM_STEPS:
		st = (const bellows_steps *)src;
		fprintf(f, "{");
		for (uint32_t k = 0; k < st->n; k++)
			fprintf(f, "%s%llu: %.17g", k ? ", " : "",
			    (unsigned long long)st->from[k], st->value[k]);
		fprintf(f, "}");
		break;
	}
	fprintf(f, "\n");
}

static void
config_print_policy(FILE *f, const ctl_policy_conf *pc)
{
	const ctl_selector *sel = &pc->selector;

	fprintf(f, "      - name: ");
	config_print_quoted(f, pc->name);
	fprintf(f, "\n        type: %s\n", pc->ops->name);
	if (pc->plugin != NULL) {
		fprintf(f, "        plugin: ");
		config_print_quoted(f, ctl_plugin_path(pc->plugin));
		fprintf(f, "\n");
	}
	fprintf(f, "        layers: {");
	/* No regex means every name: printing one would change that. */
	if (sel->has_regex) {
		fprintf(f, "match: ");
		config_print_quoted(f, sel->regex_src);
		fprintf(f, ", ");
	}
	fprintf(f, "min_numel: %llu, min_ndim: %u}\n",
	    (unsigned long long)sel->min_numel, sel->min_ndim);
	if (pc->ops->params == NULL || pc->ops->params[0].name == NULL) {
		fprintf(f, "        params: {}\n");
		return;
	}
	fprintf(f, "        params:\n");
	for (const bellows_param *p = pc->ops->params; p->name != NULL; p++)
		config_print_param(f, p, pc->config);
}

bool
ctl_config_timing_warning(const ctl_config *cfg, char *ret_why, size_t why_len)
{
	const uint32_t limit = CTL_CONFIG_AGENT_WAIT_MS -
	    CTL_CONFIG_DECIDE_MARGIN_MS;

	if (cfg->window_timeout_ms <= limit)
		return false;
	snprintf(ret_why, why_len,
	    "daemon.window_timeout_ms %u is above %u: with agents waiting "
	    "the default decision_timeout_ms (%u), the decision of a window "
	    "closed with a rank missing may come after the other ranks gave "
	    "up waiting, and they would apply it at different steps; lower "
	    "it, or give every agent a decision_timeout_ms of at least "
	    "window_timeout_ms + %u",
	    cfg->window_timeout_ms, limit, CTL_CONFIG_AGENT_WAIT_MS,
	    CTL_CONFIG_DECIDE_MARGIN_MS);
	return true;
}

int
ctl_config_print(const ctl_config *cfg, void *out)
{
	FILE *f = out;

	fprintf(f, "daemon:\n");
	/* Endpoints left out of the file come from the command line. */
	if (cfg->control != NULL) {
		fprintf(f, "  control: ");
		config_print_quoted(f, cfg->control);
		fprintf(f, "\n");
	}
	if (cfg->publish != NULL) {
		fprintf(f, "  publish: ");
		config_print_quoted(f, cfg->publish);
		fprintf(f, "\n");
	}
	fprintf(f, "  apply_lag: %u\n", cfg->apply_lag);
	fprintf(f, "  window_timeout_ms: %u\n", cfg->window_timeout_ms);
	fprintf(f, "  rank_timeout_ms: %u\n", cfg->rank_timeout_ms);
	fprintf(f, "  heartbeat_ms: %u\n", cfg->heartbeat_ms);
	fprintf(f, "  repair_margin: %u\n", cfg->repair_margin);
	fprintf(f, "  max_jobs: %u\n", cfg->max_jobs);
	fprintf(f, "  max_world: %u\n", cfg->max_world);
	fprintf(f, "  max_layers: %u\n", cfg->max_layers);
	fprintf(f, "  job_idle_ms: %u\n", cfg->job_idle_ms);
	fprintf(f, "  reload_timeout_ms: %u\n", cfg->reload_timeout_ms);
	fprintf(f, "  plugin_timeout_ms: %u\n", cfg->plugin_timeout_ms);
	fprintf(f, "  plugin_memory_mb: %u\n", cfg->plugin_memory_mb);
	fprintf(f, "  max_job_mb: %u\n", cfg->max_job_mb);
	fprintf(f, "  max_total_job_mb: %u\n", cfg->max_total_job_mb);
	fprintf(f, "  peer_queue_mb: %u\n", cfg->peer_queue_mb);
	if (cfg->allow_insecure)
		fprintf(f, "  allow_insecure: true\n");
	if (cfg->security.enabled) {
		fprintf(f, "  security:\n    server_key: ");
		config_print_quoted(f, cfg->security.server_key);
		fprintf(f, "\n    clients: ");
		config_print_quoted(f, cfg->security.clients);
		fprintf(f, "\n");
	}
	fprintf(f, "store:\n");
	fprintf(f, "  max_windows_per_run: %u\n",
	    cfg->store.max_windows_per_run);
	fprintf(f, "  max_age_days: %u\n", cfg->store.max_age_days);
	fprintf(f, "  keep_every: %u\n", cfg->store.keep_every);
	fprintf(f, "  batch_rows: %u\n", cfg->store.batch_rows);
	fprintf(f, "  queue_rows: %u\n", cfg->store.queue_rows);
	fprintf(f, "  mode: \"%04o\"\n", cfg->store.mode);
	fprintf(f, "jobs:\n");
	for (uint32_t i = 0; i < cfg->n_jobs; i++) {
		const ctl_job_conf *jc = &cfg->jobs[i];

		fprintf(f, "  - match: ");
		config_print_quoted(f, jc->match);
		if (jc->clients != NULL) {
			fprintf(f, "\n    clients: [");
			for (uint32_t k = 0; k < jc->n_clients; k++) {
				fprintf(f, "%s", k ? ", " : "");
				config_print_quoted(f, jc->clients[k]);
			}
			fprintf(f, "]");
		}
		fprintf(f, "\n    policies:\n");
		for (uint32_t j = 0; j < jc->n_policies; j++)
			config_print_policy(f, &jc->policies[j]);
	}
	return ferror(f) ? BELLOWS_EIO : 0;
}
