/* codec_arena - the block decoding borrows, see codec_arena.h.
 *
 * One malloc'd block and a bump offset: com_arena_alloc rounds every size
 * up to 16 bytes (the alignment of any struct protobuf-c builds) and
 * refuses what would pass the end, com_arena_owns tells the block's
 * pointers from the fallback's by address, com_arena_reset sets the offset
 * back to 0. Nothing is ever freed inside the block.
 */
#include "codec_arena.h"

#include <stdlib.h>

#include <bellows/error.h>

#define ARENA_ALIGN ((size_t)16)

struct com_arena {
	unsigned char *block;  /* bytes handed out, 16-aligned */
	size_t size;           /* bytes in block */
	size_t used;           /* bytes handed out this frame */
	com_arena_stats stats; /* counters since creation */
};

int
com_arena_new(size_t bytes, com_arena **ret_arena)
{
	com_arena *a;

	if (bytes == 0)
		bytes = COM_ARENA_DEFAULT_BYTES;
	if (bytes > SIZE_MAX - ARENA_ALIGN)
		return BELLOWS_ENOMEM;
	bytes = (bytes + ARENA_ALIGN - 1) & ~(ARENA_ALIGN - 1);
	if ((a = calloc(1, sizeof(*a))) == NULL)
		return BELLOWS_ENOMEM;
	if ((a->block = aligned_alloc(ARENA_ALIGN, bytes)) == NULL) {
		free(a);
		return BELLOWS_ENOMEM;
	}
	a->size = bytes;
	*ret_arena = a;
	return 0;
}

void
com_arena_destroy(com_arena **arena)
{
	if (arena == NULL || *arena == NULL)
		return;
	free((*arena)->block);
	free(*arena);
	*arena = NULL;
}

void
com_arena_stats_get(const com_arena *arena, com_arena_stats *ret_stats)
{
	*ret_stats = arena->stats;
}

void *
com_arena_alloc(com_arena *arena, size_t size)
{
	void *p;

	if (size == 0)
		size = 1;
	if (size > arena->size - arena->used)
		return NULL;
	size = (size + ARENA_ALIGN - 1) & ~(ARENA_ALIGN - 1);
	if (size > arena->size - arena->used)
		return NULL;
	p = arena->block + arena->used;
	arena->used += size;
	arena->stats.allocs++;
	return p;
}

bool
com_arena_owns(const com_arena *arena, const void *p)
{
	const unsigned char *c = p;

	/* Compared as integers: p may come from another object entirely. */
	return (uintptr_t)c >= (uintptr_t)arena->block &&
	    (uintptr_t)c < (uintptr_t)arena->block + arena->size;
}

void
com_arena_rewind(com_arena *arena)
{
	if (arena->used > arena->stats.high_water)
		arena->stats.high_water = arena->used;
	arena->used = 0;
}

void
com_arena_reset(com_arena *arena, uint64_t fellback)
{
	if (arena->used > arena->stats.high_water)
		arena->stats.high_water = arena->used;
	arena->stats.fallbacks += fellback;
	arena->stats.frames++;
	arena->used = 0;
}
