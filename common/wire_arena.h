/* wire_arena - the memory one frame decodes into, reused between frames.
 *
 * The decoder (wire_in.c, wire_fast.c) unpacks a frame into protobuf-c's
 * structs (one per sub-message, one array per repeated field: ~100 for a
 * Report of 100 layers) before it checks and converts them to com_*
 * structs. All of them come from a com_arena: one block and a bump offset,
 * given back whole when the frame is done. A frame that needs more than
 * the block gets further chunks for itself (freed when it is done), and
 * the block then grows to what that frame took, up to
 * COM_ARENA_KEEP_MAX, so that the next frame like it fits in one block.
 * A frame's allocations are bounded by a byte budget the decoder sets from
 * the frame's length and com_limits (com_arena_begin); the arena bounds
 * the memory held between frames, not the frames decoded. The decoded
 * com_msg owns nothing of the arena.
 *
 * An arena is not thread-safe: one thread decodes with it at a time.
 */
#ifndef COM_WIRE_ARENA_H
#define COM_WIRE_ARENA_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"

/* The block's size by default: a 100-layer Report unpacks into ~40 KiB. */
#define COM_ARENA_DEFAULT_BYTES ((size_t)256 << 10)

/* The largest block an arena keeps between frames: a 16,000-layer Report
 * unpacks into ~4 MiB. */
#define COM_ARENA_KEEP_MAX ((size_t)8 << 20)

typedef struct com_arena com_arena;

/* What an arena has done since it was created (for tests and benches). */
typedef struct com_arena_stats {
	uint64_t frames;   /* frames decoded with it */
	uint64_t allocs;   /* allocations served */
	uint64_t chunks;   /* chunks allocated beyond the block */
	size_t high_water; /* most bytes one frame took */
	size_t block;      /* bytes in the block now */
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

/* Decodes one frame as com_wire_decode does, with the same results and
 * return codes for every input, the intermediate structs taken from arena
 * (NULL: from an arena made for this frame and sized from it). *ret_msg
 * owns nothing of the arena; the arena is free again when this returns. */
int com_wire_decode_arena(const uint8_t *buf, size_t len, const com_limits *lim,
    com_arena *arena, com_msg *ret_msg);

/* For the decoder: starts a frame that may take at most budget bytes. */
void com_arena_begin(com_arena *arena, size_t budget);

/* For the decoder: size bytes (16-aligned) for this frame, or NULL when
 * they would pass its budget or cannot be allocated (com_arena_error
 * says which). */
void *com_arena_alloc(com_arena *arena, size_t size);

/* For the decoder: why com_arena_alloc last failed, BELLOWS_EMSGSIZE (the
 * budget) or BELLOWS_ENOMEM. */
int com_arena_error(const com_arena *arena);

/* For the decoder: ends the frame, giving back everything it took. */
void com_arena_reset(com_arena *arena);

#endif /* COM_WIRE_ARENA_H */
