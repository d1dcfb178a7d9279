/* errbuf - the one formatter of a caller's error-message buffer; see
 * errbuf.h. */
#include "errbuf.h"

#include <stdio.h>

void
com_errf(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	com_verrf(buf, len, fmt, ap);
	va_end(ap);
}

void
com_verrf(char *buf, size_t len, const char *fmt, va_list ap)
{
	if (buf == NULL || len == 0)
		return;
	if (vsnprintf(buf, len, fmt, ap) < 0)
		buf[0] = '\0'; /* an encoding error leaves no half message */
}
