/* cellfmt - history cells written as CSV fields and JSON values, see
 * cellfmt.h.
 *
 * Numbers go through client/metrics.c's writer (the shortest text that
 * reads back exactly), as metrics files write theirs.
 */
#include "cellfmt.h"

#include "metrics.h"

#include <bellows/error.h>

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if none. */
static size_t
cellfmt_utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	uint32_t cp, min;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) {
		len = 2;
		cp = s[0] & 0x1f;
		min = 0x80;
	} else if ((s[0] & 0xf0) == 0xe0) {
		len = 3;
		cp = s[0] & 0x0f;
		min = 0x800;
	} else if ((s[0] & 0xf8) == 0xf0) {
		len = 4;
		cp = s[0] & 0x07;
		min = 0x10000;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

int
tool_cellfmt_json_string(FILE *f, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;

	fputc('"', f);
	for (size_t i = 0; i < len;) {
		unsigned char c = p[i];
		size_t n;

		if (c == '"' || c == '\\') {
			fputc('\\', f);
			fputc(c, f);
		} else if (c == '\n') {
			fputs("\\n", f);
		} else if (c == '\r') {
			fputs("\\r", f);
		} else if (c == '\t') {
			fputs("\\t", f);
		} else if (c < 0x20 || c == 0x7f) {
			fprintf(f, "\\u%04x", c);
		} else if ((n = cellfmt_utf8_len(p + i, len - i)) == 0) {
			fputs("\\ufffd", f);
		} else {
			fwrite(p + i, 1, n, f);
			i += n;
			continue;
		}
		i++;
	}
	fputc('"', f);
	return ferror(f) ? BELLOWS_EIO : 0;
}

static void
cellfmt_hex(FILE *f, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		fprintf(f, "%02x", (unsigned char)s[i]);
}

int
tool_cellfmt_put(FILE *f, bool json, const tool_hdb_cell *c)
{
	switch (c->type) {
	case TOOL_HDB_INT:
		fprintf(f, "%" PRId64, c->i);
		break;
	case TOOL_HDB_REAL:
		if (!isfinite(c->d)) {
			if (json)
				fputs("null", f);
			break;
		}
		tool_metrics_put_number(f, c->d);
		break;
	case TOOL_HDB_TEXT:
		if (json)
			return tool_cellfmt_json_string(f, c->s, c->len);
		return tool_metrics_put_field(f, c->s);
	case TOOL_HDB_BLOB:
		if (json)
			fputc('"', f);
		cellfmt_hex(f, c->s, c->len);
		if (json)
			fputc('"', f);
		break;
	case TOOL_HDB_NULL:
	default:
		if (json)
			fputs("null", f);
		break;
	}
	return ferror(f) ? BELLOWS_EIO : 0;
}

int
tool_cellfmt_header(FILE *f, uint32_t n, const char *const *names)
{
	for (uint32_t i = 0; i < n; i++) {
		if ((i > 0 && fputc(',', f) == EOF) ||
		    tool_metrics_put_field(f, names[i]) != 0)
			return BELLOWS_EIO;
	}
	return fputc('\n', f) == EOF ? BELLOWS_EIO : 0;
}
