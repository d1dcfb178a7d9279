/* errbuf - the one formatter of a caller's error-message buffer.
 *
 * A function that explains its refusals takes (char *err, size_t errlen)
 * from its caller and passes it down as it is: the caller may want no
 * message (NULL or 0) or a buffer of any size. com_errf is the only code
 * that writes such a buffer, so every module agrees on what NULL, 0 and a
 * message longer than the buffer mean.
 */
#ifndef COM_ERRBUF_H
#define COM_ERRBUF_H

#include <stdarg.h>
#include <stddef.h>

/* Formats fmt and its arguments into buf as vsnprintf does: at most
 * len - 1 bytes and a terminating NUL, a longer message cut there (at a
 * byte, not a character). buf NULL or len 0 is allowed and writes
 * nothing: the caller wanted no message. Cannot fail; returns nothing,
 * since whether the message was cut changes no caller's outcome. */
void com_errf(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The same with a va_list, for a formatter that adds a prefix of its own
 * (a file and line) before the caller's message; ap is consumed. */
void com_verrf(char *buf, size_t len, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

#endif /* COM_ERRBUF_H */
