/* text - a policy's reason being written, cut whole pieces at a time
 * (see pol_text.h). The built-in policies that compose long reasons write
 * them through it, so they all end the same way when they run out of
 * room.
 */
#include "pol_text.h"

#include <bellows/policy.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define TEXT_ELLIPSIS " ..."

void
pol_text_init(pol_text *t, char *buf, size_t len)
{
	*t = (pol_text){ .buf = buf, .len = len };
	buf[0] = '\0';
}

void
pol_text_add(pol_text *t, const char *fmt, ...)
{
	char piece[BELLOWS_REASON_MAX];
	va_list ap;
	int n;

	if (t->full)
		return;
	va_start(ap, fmt);
	n = vsnprintf(piece, sizeof(piece), fmt, ap);
	va_end(ap);
	/* Room is always left for the ellipsis and the NUL. */
	if (n < 0 || (size_t)n >= sizeof(piece) ||
	    t->used + (size_t)n + sizeof(TEXT_ELLIPSIS) > t->len) {
		t->full = true;
		if (t->used + sizeof(TEXT_ELLIPSIS) <= t->len) {
			memcpy(t->buf + t->used, TEXT_ELLIPSIS,
			    sizeof(TEXT_ELLIPSIS));
			t->used += sizeof(TEXT_ELLIPSIS) - 1;
		}
		return;
	}
	memcpy(t->buf + t->used, piece, (size_t)n + 1);
	t->used += (size_t)n;
}

void
pol_text_sep(pol_text *t)
{
	if (t->used > 0)
		pol_text_add(t, "; ");
}
