/* sim_record - the records `bellows sim` writes for `bellows replay`,
 * see sim_record.h.
 */
#include "sim_record.h"

#include "client/metrics.h"

#include <bellows/error.h>

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

int
tool_sim_record_failed(const sim_rank *rk, const char *path)
{
	fprintf(stderr, "rank %u: cannot write %s: %s\n", rk->rank, path,
	    strerror(errno));
	return BELLOWS_EIO;
}

int
tool_sim_record_levels(sim_rank *rk, const bellows_decision *d)
{
	const sim_ctx *cx = rk->cx;
	uint32_t n = d->n_layers < cx->o->layers ? d->n_layers : cx->o->layers;
	FILE *f = rk->levels_out;

	if (f == NULL || d->seq == 0 ||
	    d->window < atomic_load(&cx->sh->levels_next))
		return 0;
	for (uint32_t l = 0; l < n; l++) {
		fprintf(f, "%" PRIu64 ",", d->window);
		tool_metrics_put_field(f, cx->table[l].name);
		fputc(',', f);
		tool_metrics_put_number(f, d->level[l]);
		fputc('\n', f);
	}
	if (fflush(f) != 0 || ferror(f))
		return tool_sim_record_failed(rk, cx->o->record_levels);
	atomic_store(&cx->sh->levels_next, d->window + 1);
	return 0;
}

int
tool_sim_record_metrics(sim_rank *rk, uint64_t window, double lr)
{
	const sim_ctx *cx = rk->cx;
	FILE *f = rk->metrics_out;

	if (f == NULL)
		return 0;
	for (uint32_t l = 0; l < cx->o->layers; l++) {
		const bellows_layer *t = &cx->table[l];
		bellows_layer_stats st;
		char shape[64];
		int r;

		r = bellows_agent_window_stats(rk->agent, l, &st);
		if (r == 0 && st.window != window)
			r = BELLOWS_ESTATE;
		if (r != 0) {
			fprintf(stderr,
			    "rank %u: statistics of window %" PRIu64
			    " layer %u: %s\n",
			    rk->rank, window, l, bellows_strerror(r));
			return r;
		}
		tool_metrics_shape_text(t->shape, t->ndim, shape,
		    sizeof(shape));
		fprintf(f, "%" PRIu64 ",", window);
		tool_metrics_put_field(f, t->name);
		fputc(',', f);
		tool_metrics_put_number(f, st.acc_norm);
		fputc(',', f);
		tool_metrics_put_number(f, lr);
		fprintf(f, ",%" PRIu64 ",%s\n", t->numel, shape);
	}
	if (fflush(f) != 0 || ferror(f))
		return tool_sim_record_failed(rk, cx->o->record_metrics);
	return 0;
}

int
tool_sim_record_create(const char *path, const char *header)
{
	FILE *f;

	if (path == NULL)
		return 0;
	if ((f = fopen(path, "w")) == NULL || fputs(header, f) < 0 ||
	    fclose(f) != 0) {
		fprintf(stderr, "bellows sim: cannot create %s: %s\n", path,
		    strerror(errno));
		return BELLOWS_EIO;
	}
	return 0;
}
