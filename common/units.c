/* units - numbers for people (units.h). */
#include "units.h"

#include <math.h>
#include <stdio.h>

static const char *const units_size[] = { "B", "kB", "MB", "GB", "TB", "PB" };
static const char *const units_count[] = { "", "k", "M", "G", "T", "P" };

#define UNITS_N (sizeof(units_size) / sizeof(units_size[0]))

/* Scales *v down by 1000s while it would print as 1000 or more at three
 * significant digits; returns the power of 1000 taken out. */
static size_t
units_scale(double *v)
{
	size_t k = 0;

	while (fabs(*v) >= 999.5 && k + 1 < UNITS_N) {
		*v /= 1000.0;
		k++;
	}
	return k;
}

void
com_fmt_bytes(double b, char *buf, size_t len)
{
	size_t k;

	if (!isfinite(b)) {
		snprintf(buf, len, "-");
		return;
	}
	k = units_scale(&b);
	snprintf(buf, len, k == 0 ? "%.0f %s" : "%.3g %s", b, units_size[k]);
}

void
com_fmt_bytes_short(double b, char *buf, size_t len)
{
	size_t k;

	if (!isfinite(b)) {
		snprintf(buf, len, "-");
		return;
	}
	k = units_scale(&b);
	snprintf(buf, len, k == 0 || fabs(b) >= 10 ? "%.0f%s" : "%.1f%s", b,
	    units_size[k]);
}

void
com_fmt_count(double n, char *buf, size_t len)
{
	size_t k;

	if (!isfinite(n)) {
		snprintf(buf, len, "-");
		return;
	}
	k = units_scale(&n);
	snprintf(buf, len, k == 0 ? "%.0f%s" : "%.3g%s", n, units_count[k]);
}
