/* sim_ctx - the shared mapping of `bellows sim`, see sim_ctx.h.
 */
#include "sim_ctx.h"
#include "sim_reduce.h"

#include <bellows/error.h>

#include <string.h>
#include <sys/mman.h>

int
tool_sim_ctx_map(sim_ctx *cx)
{
	const sim_opts *o = cx->o;
	size_t head = 64, slots = (size_t)o->ranks * sizeof(sim_slot);
	size_t records = (size_t)o->ranks * cx->total_steps * sizeof(uint64_t);
	void *map;

	size_t reduce;

	cx->reduce_len = o->aggregate != 0 ? tool_sim_reduce_len(o) : 0;
	reduce = (size_t)o->ranks * 2 * cx->reduce_len * sizeof(double);
	cx->map_len = head + slots + 2 * records + reduce;
	map = mmap(NULL, cx->map_len, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED)
		return BELLOWS_ENOMEM;
	cx->map = map;
	cx->sh = map;
	cx->slots = (sim_slot *)((char *)map + head);
	cx->seq = (uint64_t *)((char *)map + head + slots);
	cx->tables = (uint64_t *)((char *)map + head + slots + records);
	cx->reduce = reduce > 0
	    ? (double *)((char *)map + head + slots + 2 * records)
	    : NULL;
	atomic_init(&cx->sh->stop, 0);
	atomic_init(&cx->sh->levels_next, 0);
	for (uint32_t r = 0; r < o->ranks; r++) {
		/* Ranks started at a later window have done the steps
		 * before it. */
		atomic_init(&cx->slots[r].step_done,
		    (uint64_t)o->start_window * o->steps);
		atomic_init(&cx->slots[r].alive, 1);
		atomic_init(&cx->slots[r].at_kill, 0);
		atomic_init(&cx->slots[r].welcomed_end, 0);
		atomic_init(&cx->slots[r].lost, 0);
		atomic_init(&cx->slots[r].reduce_gen, 0);
	}
	memset(cx->seq, 0xff, records);
	memset(cx->tables, 0, records);
	return 0;
}

void
tool_sim_ctx_unmap(sim_ctx *cx)
{
	if (cx->map != NULL)
		munmap(cx->map, cx->map_len);
	cx->map = NULL;
	cx->sh = NULL;
	cx->slots = NULL;
	cx->seq = NULL;
	cx->tables = NULL;
	cx->reduce = NULL;
}
