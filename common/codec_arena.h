/* codec_arena - a reusable block that decoding borrows instead of malloc.
 *
 * protobuf-c allocates one struct per sub-message it unpacks and one array
 * per repeated field: ~100 allocations and frees for a Report of 100
 * layers. A com_arena is one block, allocated once and kept by its owner
 * (bellowsd's event loop holds one), from which com_codec_decode_arena
 * hands protobuf-c its memory by bumping an offset; the whole block is
 * given back at once when the frame is done. What does not fit the block
 * (a frame far larger than the usual report) is malloc'd and freed as
 * before, so the arena bounds memory held between frames, not the frames
 * decoded: those keep every limit of com_codec_decode, byte budget
 * included. Only the intermediate protobuf-c structs live in the arena;
 * the decoded com_msg is malloc'd exactly as com_codec_decode's is.
 *
 * An arena is not thread-safe: one thread decodes with it at a time.
 */
#ifndef COM_CODEC_ARENA_H
#define COM_CODEC_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec.h"

/* The block's size by default: a 100-layer Report unpacks into ~40 KiB. */
#define COM_ARENA_DEFAULT_BYTES ((size_t)256 << 10)

typedef struct com_arena com_arena;

/* What an arena has done since it was created (for tests and benches). */
typedef struct com_arena_stats {
	uint64_t frames;    /* frames decoded with it */
	uint64_t allocs;    /* allocations served from the block */
	uint64_t fallbacks; /* allocations that did not fit and were malloc'd */
	size_t high_water;  /* most bytes of the block used by one frame */
} com_arena_stats;

/* Creates an arena whose block holds bytes (0: COM_ARENA_DEFAULT_BYTES;
 * rounded up to 16). *ret_arena is owned by the caller
 * (com_arena_destroy). Returns BELLOWS_ENOMEM; *ret_arena untouched on
 * failure. */
int com_arena_new(size_t bytes, com_arena **ret_arena);

/* Frees *arena and sets it to NULL; NULL or *arena NULL is a no-op. The
 * arena must not be in use by a decode. */
void com_arena_destroy(com_arena **arena);

/* Copies the arena's counters into *ret_stats. Never fails. */
void com_arena_stats_get(const com_arena *arena, com_arena_stats *ret_stats);

/* Decodes one frame as com_codec_decode does, with the same results and
 * return codes for every input, protobuf-c's intermediate structs taken
 * from arena (NULL: from malloc, i.e. com_codec_decode). *ret_msg owns
 * nothing of the arena; the arena is free again when this returns. */
int com_codec_decode_arena(const uint8_t *buf, size_t len,
    const com_limits *lim, com_arena *arena, com_msg *ret_msg);

/* For codec_in.c: size bytes (16-aligned) from the block, or NULL when they
 * do not fit (the caller then mallocs them). */
void *com_arena_alloc(com_arena *arena, size_t size);

/* For codec_in.c: true when p was handed out by com_arena_alloc. */
bool com_arena_owns(const com_arena *arena, const void *p);

/* For codec_in.c: gives back everything handed out in this frame, to start
 * the frame again (another way); counts nothing. */
void com_arena_rewind(com_arena *arena);

/* For codec_in.c: gives the whole block back at the end of a frame; fellback
 * is how many of its allocations were malloc'd instead. */
void com_arena_reset(com_arena *arena, uint64_t fellback);

#endif /* COM_CODEC_ARENA_H */
