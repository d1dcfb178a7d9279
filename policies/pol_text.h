/* text - a policy's reason being written: pieces go in whole or not at
 * all, and the first that does not fit ends the text with " ...", so a
 * long layer list is cut cleanly instead of mid-name.
 */
#ifndef POL_TEXT_H
#define POL_TEXT_H

#include <stdbool.h>
#include <stddef.h>

typedef struct pol_text {
	char *buf;   /* destination, borrowed */
	size_t len;  /* its size, with NUL */
	size_t used; /* bytes written, without NUL */
	bool full;   /* a piece did not fit: nothing more is added */
} pol_text;

/* Starts an empty text in buf (len bytes, at least 1), which it borrows
 * while t is used: buf[0] becomes NUL. */
void pol_text_init(pol_text *t, char *buf, size_t len);

/* Appends the printf-formatted piece if it fits with room left for " ..."
 * and the NUL; otherwise ends the text with " ..." (if that fits) and
 * ignores every later piece. A piece longer than BELLOWS_REASON_MAX - 1
 * never fits. The text stays NUL-terminated. */
__attribute__((format(printf, 2, 3))) void pol_text_add(pol_text *t,
    const char *fmt, ...);

/* Appends "; " as a piece of its own if the text is not empty: separates
 * what follows from a reason already begun. */
void pol_text_sep(pol_text *t);

#endif /* POL_TEXT_H */
