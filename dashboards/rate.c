/* rate - a counter's rate over a sliding window, see rate.h.
 */
#include "rate.h"

#include <math.h>
#include <string.h>

/* Index of the i-th reading kept, oldest first. */
static uint32_t
rate_at(const dash_rate *r, uint32_t i)
{
	return (r->head + i) % DASH_RATE_SAMPLES;
}

void
dash_rate_init(dash_rate *r, uint64_t span_ms)
{
	memset(r, 0, sizeof(*r));
	r->span_ms = span_ms > 0 ? span_ms : 1;
}

void
dash_rate_add(dash_rate *r, uint64_t t_ms, uint64_t count)
{
	uint32_t last;

	if (r->n > 0) {
		last = rate_at(r, r->n - 1);
		if (t_ms < r->t_ms[last] || count < r->count[last]) {
			r->n = 0;
		} else if (t_ms == r->t_ms[last]) {
			r->count[last] = count;
			return;
		}
	}
	if (r->n == DASH_RATE_SAMPLES) {
		r->head = rate_at(r, 1);
		r->n--;
	}
	last = rate_at(r, r->n);
	r->t_ms[last] = t_ms;
	r->count[last] = count;
	r->n++;
	/* Keep one reading at least span_ms old: the second oldest being
	 * that old makes the oldest useless. */
	while (r->n > 2 && t_ms - r->t_ms[rate_at(r, 1)] >= r->span_ms) {
		r->head = rate_at(r, 1);
		r->n--;
	}
}

double
dash_rate_get(const dash_rate *r)
{
	uint32_t a, b;

	if (r->n < 2)
		return NAN;
	a = rate_at(r, 0);
	b = rate_at(r, r->n - 1);
	if (r->t_ms[b] <= r->t_ms[a])
		return NAN;
	return (double)(r->count[b] - r->count[a]) * 1000.0 /
	    (double)(r->t_ms[b] - r->t_ms[a]);
}
