/* suggest - the nearest known name, see suggest.h.
 *
 * Optimal string alignment distance (Levenshtein with adjacent swaps)
 * over bytes folded to lower case, in three rows of a bounded size:
 * names are short and the lists are small.
 */
#include "suggest.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

#define SUGGEST_MAX 64 /* longest name compared */

static int
suggest_min3(int a, int b, int c)
{
	int m = a < b ? a : b;

	return m < c ? m : c;
}

/* Distance between a and b, each at most SUGGEST_MAX bytes. */
static int
suggest_distance(const char *a, size_t la, const char *b, size_t lb)
{
	int rows[3][SUGGEST_MAX + 1];
	int *pp = rows[0], *p = rows[1], *c = rows[2];

	for (size_t j = 0; j <= lb; j++)
		p[j] = (int)j;
	for (size_t i = 1; i <= la; i++) {
		int *t;

		c[0] = (int)i;
		for (size_t j = 1; j <= lb; j++) {
			int ai = tolower((unsigned char)a[i - 1]);
			int bj = tolower((unsigned char)b[j - 1]);
			int cost = ai == bj ? 0 : 1;

			c[j] = suggest_min3(p[j] + 1, c[j - 1] + 1,
			    p[j - 1] + cost);
			if (i > 1 && j > 1 &&
			    ai == tolower((unsigned char)b[j - 2]) &&
			    tolower((unsigned char)a[i - 2]) == bj &&
			    pp[j - 2] + 1 < c[j])
				c[j] = pp[j - 2] + 1;
		}
		t = pp;
		pp = p;
		p = c;
		c = t;
	}
	return p[lb];
}

const char *
com_suggest(const char *given, const char *const *names, size_t n)
{
	const char *best = NULL;
	int best_d = 0;
	size_t lg;

	if (given == NULL || (lg = strlen(given)) > SUGGEST_MAX || lg == 0)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		size_t ln;
		int d, limit;

		if (names[i] == NULL || (ln = strlen(names[i])) > SUGGEST_MAX)
			continue;
		if (lg >= 3 && lg < ln && strncasecmp(names[i], given, lg) == 0)
			d = 1; /* a prefix: as good as one slip */
		else
			d = suggest_distance(given, lg, names[i], ln);
		limit = ln <= 4 ? 1 : ln <= 8 ? 2 : 3;
		if (d > limit || d >= (int)(ln > lg ? ln : lg))
			continue;
		if (best == NULL || d < best_d) {
			best = names[i];
			best_d = d;
		}
	}
	return best;
}

const char *
com_suggest_option(const char *arg, const struct option *opts)
{
	const char *names[COM_SUGGEST_OPTIONS_MAX];
	char given[SUGGEST_MAX + 1];
	size_t n = 0, len;

	if (arg == NULL || opts == NULL || strncmp(arg, "--", 2) != 0)
		return NULL;
	len = strcspn(arg + 2, "=");
	if (len == 0 || len > SUGGEST_MAX)
		return NULL;
	memcpy(given, arg + 2, len);
	given[len] = '\0';
	for (; opts[n].name != NULL && n < COM_SUGGEST_OPTIONS_MAX; n++) {
		if (strcmp(opts[n].name, given) == 0)
			return NULL; /* known: refused for its value */
		names[n] = opts[n].name;
	}
	return com_suggest(given, names, n);
}
