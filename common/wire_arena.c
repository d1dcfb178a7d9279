/* wire_arena - the memory one frame decodes into, see wire_arena.h.
 *
 * One block and a bump offset, then a list of chunks for a frame that
 * outgrows the block: each chunk at least twice the one before, so a
 * frame of n bytes takes O(log n) chunks. com_arena_alloc rounds every
 * size up to 16 bytes (the alignment of any struct protobuf-c declares;
 * malloc's blocks are 16-aligned). com_arena_reset frees the chunks and,
 * when the frame took more than the block, replaces the block with one
 * that would have held it. The block and the chunks come from
 * com_wire_malloc, so injected allocation failures reach them.
 */
#include "wire_arena.h"

#include <stdlib.h>

#include <bellows/error.h>

#include "wire_int.h"

#define ARENA_ALIGN    ((size_t)16)
#define ARENA_ROUND(n) (((n) + ARENA_ALIGN - 1) & ~(ARENA_ALIGN - 1))

/* A chunk beyond the block: its bytes follow the header. */
typedef struct arena_chunk {
	struct arena_chunk *next; /* the chunk allocated before, or NULL */
	size_t size;              /* bytes after the header */
	size_t pad[2];            /* keeps the bytes 16-aligned */
} arena_chunk;

struct com_arena {
	unsigned char *block;  /* the kept block, 16-aligned */
	size_t size;           /* bytes in block */
	arena_chunk *chunks;   /* this frame's chunks, newest first */
	unsigned char *cur;    /* where allocations come from now */
	size_t cur_size;       /* bytes at cur */
	size_t cur_used;       /* bytes handed out at cur */
	size_t frame;          /* bytes handed out this frame */
	size_t budget;         /* most bytes this frame may take */
	int err;               /* why the last allocation failed */
	com_arena_stats stats; /* counters since creation */
};

int
com_arena_new(size_t bytes, com_arena **ret_arena)
{
	com_arena *a;

	if (bytes == 0)
		bytes = COM_ARENA_DEFAULT_BYTES;
	if (bytes > SIZE_MAX / 2)
		return BELLOWS_ENOMEM;
	bytes = ARENA_ROUND(bytes);
	if ((a = com_wire_calloc(1, sizeof(*a))) == NULL)
		return BELLOWS_ENOMEM;
	if ((a->block = com_wire_malloc(bytes)) == NULL) {
		free(a);
		return BELLOWS_ENOMEM;
	}
	a->size = bytes;
	a->cur = a->block;
	a->cur_size = bytes;
	a->budget = SIZE_MAX;
	a->stats.block = bytes;
	*ret_arena = a;
	return 0;
}

static void
arena_free_chunks(com_arena *a)
{
	while (a->chunks != NULL) {
		arena_chunk *c = a->chunks;

		a->chunks = c->next;
		free(c);
	}
	a->cur = a->block;
	a->cur_size = a->size;
	a->cur_used = 0;
}

void
com_arena_destroy(com_arena **arena)
{
	if (arena == NULL || *arena == NULL)
		return;
	arena_free_chunks(*arena);
	free((*arena)->block);
	free(*arena);
	*arena = NULL;
}

void
com_arena_stats_get(const com_arena *arena, com_arena_stats *ret_stats)
{
	*ret_stats = arena->stats;
}

void
com_arena_begin(com_arena *arena, size_t budget)
{
	arena->budget = budget;
	arena->err = 0;
}

/* Makes a chunk of at least size bytes the current one. */
static int
arena_grow(com_arena *a, size_t size)
{
	size_t want = a->cur_size * 2;
	arena_chunk *c;

	if (want < size)
		want = size;
	if (want > SIZE_MAX - sizeof(*c) ||
	    (c = com_wire_malloc(sizeof(*c) + want)) == NULL)
		return BELLOWS_ENOMEM;
	c->next = a->chunks;
	c->size = want;
	a->chunks = c;
	a->cur = (unsigned char *)(c + 1);
	a->cur_size = want;
	a->cur_used = 0;
	a->stats.chunks++;
	return 0;
}

void *
com_arena_alloc(com_arena *arena, size_t size)
{
	void *p;

	if (size == 0)
		size = 1;
	if (size > SIZE_MAX - ARENA_ALIGN ||
	    ARENA_ROUND(size) > arena->budget - arena->frame) {
		arena->err = BELLOWS_EMSGSIZE;
		return NULL;
	}
	size = ARENA_ROUND(size);
	if (size > arena->cur_size - arena->cur_used &&
	    (arena->err = arena_grow(arena, size)) != 0)
		return NULL;
	p = arena->cur + arena->cur_used;
	arena->cur_used += size;
	arena->frame += size;
	arena->stats.allocs++;
	return p;
}

int
com_arena_error(const com_arena *arena)
{
	return arena->err != 0 ? arena->err : BELLOWS_ENOMEM;
}

void
com_arena_reset(com_arena *arena)
{
	size_t took = arena->frame;

	if (took > arena->stats.high_water)
		arena->stats.high_water = took;
	arena->stats.frames++;
	arena_free_chunks(arena);
	arena->frame = 0;
	arena->budget = SIZE_MAX;
	/* Grow the block to what this frame took. Not an allocation of the
	 * frame's (plain malloc, no injected failure); a failure keeps the
	 * old block and the next such frame takes chunks again. */
	if (took > arena->size && took <= COM_ARENA_KEEP_MAX) {
		size_t want = ARENA_ROUND(took + took / 4);
		unsigned char *b = malloc(want);

		if (b != NULL) {
			free(arena->block);
			arena->block = b;
			arena->size = want;
			arena->stats.block = want;
		}
	}
	arena->cur = arena->block;
	arena->cur_size = arena->size;
}
