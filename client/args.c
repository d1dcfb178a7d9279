/* args - checked option values, see args.h.
 */
#include "args.h"

#include <bellows/error.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

int
tool_args_u64(const char *cmd, const char *opt, const char *text, uint64_t min,
    uint64_t max, uint64_t *ret)
{
	unsigned long long v;
	char *end = NULL;

	/* strtoull accepts a sign and leading blanks; a count does not. */
	if (text == NULL || !isdigit((unsigned char)text[0]))
		goto fail;
	errno = 0;
	v = strtoull(text, &end, 10);
	if (errno != 0 || end == text || *end != '\0' || v < min || v > max)
		goto fail;
	*ret = (uint64_t)v;
	return 0;
fail:
	fprintf(stderr,
	    "bellows %s: %s must be an integer in [%" PRIu64 ", %" PRIu64
	    "], not '%s'\n",
	    cmd, opt, min, max, text != NULL ? text : "");
	return BELLOWS_EINVAL;
}

int
tool_args_u32(const char *cmd, const char *opt, const char *text, uint32_t min,
    uint32_t max, uint32_t *ret)
{
	uint64_t v;
	int r;

	if ((r = tool_args_u64(cmd, opt, text, min, max, &v)) != 0)
		return r;
	*ret = (uint32_t)v;
	return 0;
}
