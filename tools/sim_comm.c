/* sim_comm - the modelled communication of `bellows sim`, see
 * sim_comm.h.
 */
#include "sim_comm.h"

#include "sim_model.h"

#include <bellows/error.h>

#include <stdlib.h>

#define SIM_MIB 1048576.0

double
tool_sim_allreduce_ms(const sim_opts *o, double bytes)
{
	double p = o->ranks > 1 ? (double)o->ranks : 2.0;
	double per_ms = o->gbps * 1e9 / 8.0 / 1e3; /* bytes per ms */

	return 2.0 * o->alpha_ms * (p - 1) +
	    2.0 * bytes * (p - 1) / (p * per_ms);
}

double
tool_sim_codec_ms(const sim_opts *o, double bytes)
{
	return o->codec_ms + o->codec_ms_per_mb * bytes / SIM_MIB;
}

/* A tensor of `bytes` is faster compressed, codec included. */
static bool
sim_pays(const sim_opts *o, double bytes)
{
	return tool_sim_allreduce_ms(o, bytes) >
	    tool_sim_allreduce_ms(o, bytes / o->ratio) +
	    tool_sim_codec_ms(o, bytes);
}

static int
sim_cmp_size(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int
tool_sim_model_threshold(const sim_ctx *cx, uint64_t *ret, uint32_t *ret_rows)
{
	uint64_t *size = malloc(cx->o->layers * sizeof(*size));
	uint32_t n = 0, rows = 0, i;

	if (size == NULL)
		return BELLOWS_ENOMEM;
	for (uint32_t l = 0; l < cx->o->layers; l++) {
		if (cx->table[l].ndim >= 2)
			size[n++] = cx->table[l].numel * 4;
	}
	qsort(size, n, sizeof(*size), sim_cmp_size);
	for (i = 0; i < n; i++) {
		if (i == 0 || size[i] != size[i - 1])
			size[rows++] = size[i];
	}
	for (i = rows; i > 0 && sim_pays(cx->o, (double)size[i - 1]); i--)
		;
	*ret = i == rows ? UINT64_MAX : i == 0 ? 0 : size[i];
	*ret_rows = rows;
	free(size);
	return 0;
}

double
tool_sim_noise(const sim_opts *o, uint32_t rank, uint64_t step, uint64_t key)
{
	uint64_t h = tool_sim_hash(o->seed ^ 0x636f6d6dull, rank + 1, step,
	    key);

	return 1.0 + o->comm_noise * (2.0 * tool_sim_unit(h) - 1.0);
}
