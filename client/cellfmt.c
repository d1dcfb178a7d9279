/* cellfmt - history cells written as CSV fields and JSON values, see
 * cellfmt.h.
 *
 * Numbers go through client/metrics.c's writer (the shortest text that
 * reads back exactly), as metrics files write theirs.
 */
#include "cellfmt.h"

#include "metrics.h"

#include <bellows/error.h>

#include "common/utf8.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

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
		} else if ((n = com_utf8_len(p + i, len - i)) == 0) {
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
