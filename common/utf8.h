/* utf8 - the one check of UTF-8 that every reader and writer of names
 * shares.
 *
 * Names on the wire (jobs, layers, runs) are protobuf `string`s, which
 * must be UTF-8; they end up in Prometheus labels, JSON and HTML, where a
 * stray byte breaks the whole document, so the wire refuses them and the
 * writers replace what slipped past (U+FFFD).
 */
#ifndef COM_UTF8_H
#define COM_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* Length (1 to 4) of the well-formed UTF-8 sequence at s, n bytes left
 * (n >= 1); 0 if none starts there: a stray continuation byte, a
 * sequence cut short, an overlong form, a surrogate or a code point
 * above U+10FFFF. Pure. */
size_t com_utf8_len(const unsigned char *s, size_t n);

/* Whether s[0..n) is all well-formed UTF-8 (true for n == 0). Pure. */
bool com_utf8_valid(const char *s, size_t n);

#endif /* COM_UTF8_H */
