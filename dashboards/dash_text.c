/* text - plain-text output of a dashboard screen, see dash_text.h.
 */
#include "dash_text.h"

#include <bellows/error.h>

#include <stdlib.h>

int
dash_text_print(const dash_canvas *c, FILE *f)
{
	char *line = malloc((size_t)c->cols + 1);
	int last = c->rows - 1;

	if (line == NULL)
		return BELLOWS_ENOMEM;
	/* The key line is for people at a terminal: drop it, then any
	 * blank lines above it. */
	for (last = c->rows - 2; last >= 0; last--) {
		dash_canvas_line(c, last, line);
		if (line[0] != '\0')
			break;
	}
	for (int r = 0; r <= last; r++) {
		dash_canvas_line(c, r, line);
		fprintf(f, "%s\n", line);
	}
	free(line);
	return ferror(f) ? BELLOWS_EIO : 0;
}
