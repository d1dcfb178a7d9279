/* config_pattern - the patterns a configuration names, see config.h.
 *
 * Job entries match job names with globs; policies select layers with
 * POSIX extended regexes. Both are checked as they are read: a glob must
 * be well formed, and a regex is bounded before regcomp sees it (no
 * back-reference, a limit on nesting and on its size once {m,n} counts
 * are expanded), so that no file can make compiling or matching slow.
 */
#include "config_int.h"

#include <ctype.h>
#include <stdbool.h>
#include <string.h>

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

int
ctl_config_glob_check(config_ctx *cx, const yaml_node_t *node, const char *src)
{
	size_t len = strlen(src);

	if (len > CTL_CONFIG_PATTERN_MAX)
		return ctl_config_fail(cx, node,
		    "match is %zu bytes long; a pattern may have at most %u",
		    len, CTL_CONFIG_PATTERN_MAX);
	for (const char *p = src; *p != '\0';) {
		const char *why, *next;
		bool in;

		if (*p == '\\') {
			if (p[1] == '\0')
				return ctl_config_fail(cx, node,
				    "match ends with a lone '\\'");
			p += 2;
		} else if (*p == '[') {
			next = config_glob_bracket(p, 0, &in, &why);
			if (next == NULL)
				return ctl_config_fail(cx, node,
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

int
ctl_config_regex_check(config_ctx *cx, const yaml_node_t *node, const char *src)
{
	config_re re = { .src = src, .p = src };
	size_t len = strlen(src);
	uint64_t size = 0;

	if (len > CTL_CONFIG_PATTERN_MAX)
		return ctl_config_fail(cx, node,
		    "match is %zu bytes long; a pattern may have at most %u",
		    len, CTL_CONFIG_PATTERN_MAX);
	while (*re.p != '\0' && re.why == NULL) {
		size += config_re_alt(&re);
		if (*re.p == ')')
			re.p++; /* unbalanced: regcomp says so */
	}
	if (re.why != NULL)
		return ctl_config_fail(cx, node,
		    "match: %s (byte %zu of the pattern)", re.why, re.at);
	/* Each position costs glibc about 100 bytes compiled. */
	cx->regex_positions += size;
	if (cx->regex_positions > CTL_CONFIG_REGEX_TOTAL_MAX) {
		cx->stop = true;
		return ctl_config_fail(cx, node,
		    "the layer regexes of the file hold more than %u positions "
		    "in all (an alias counts each time it is used)",
		    CTL_CONFIG_REGEX_TOTAL_MAX);
	}
	return 0;
}
