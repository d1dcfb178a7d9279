/* kern_pool - a few worker threads that run the parts of one kernel call.
 *
 * The CPU backend splits a large tensor into size() parts; kern_pool_run
 * runs part 0 on the calling thread and the others on the workers, and
 * returns when all are done. The threads are created at kern_pool_new and
 * sleep between calls: a call allocates nothing and costs a wake-up and a
 * wait (tens of microseconds), which is why only tensors above a size
 * threshold are split.
 *
 * kern_pool_share is the other way to run: the work is cut into chunks
 * that the caller and the workers take from a shared counter, and the call
 * returns as soon as every chunk is done, so a worker that does not get a
 * core in time leaves its share to the others instead of stalling the
 * call.
 *
 * Threading: one thread calls kern_pool_run or kern_pool_share at a time.
 */
#ifndef KERN_POOL_H
#define KERN_POOL_H

#include <stdint.h>

typedef struct kern_pool kern_pool;

/* Work of one part; `part` is in 0..kern_pool_size()-1. */
typedef void kern_pool_fn(void *arg, uint32_t part);

/* Starts `workers` threads (1..KERN_MAX_THREADS). Returns 0,
 * BELLOWS_EINVAL, BELLOWS_ENOMEM or BELLOWS_ESYS (no thread started
 * then); on success *ret is the caller's, to destroy. */
int kern_pool_new(uint32_t workers, kern_pool **ret);

/* Stops and joins the workers, frees the pool and sets *pool to NULL.
 * NULL-safe and idempotent. */
void kern_pool_destroy(kern_pool **pool);

/* Returns the number of parts a run has: the workers plus the caller. */
uint32_t kern_pool_size(const kern_pool *pool);

/* Runs fn(arg, p) for every part p, part 0 on the calling thread, and
 * returns when every part has returned. Never fails. */
void kern_pool_run(kern_pool *pool, kern_pool_fn *fn, void *arg);

/* Work of one chunk of a shared run; `slot` is the running thread's
 * part number (0: the caller), so that per-thread scratch indexed by slot
 * is used by one thread at a time. */
typedef void kern_pool_chunk_fn(void *arg, uint32_t chunk, uint32_t slot);

#define KERN_POOL_MAX_CHUNKS 4096 /* chunks of one shared run */

/* Runs fn(arg, c, slot) once for every chunk c in 0..chunks-1
 * (1..KERN_POOL_MAX_CHUNKS), each chunk taken by whichever thread gets
 * to it first: the caller and the workers that wake in time. Returns when
 * every chunk has returned, without waiting for workers that took none:
 * a worker still waiting for a core costs the call nothing. Never fails. */
void kern_pool_share(kern_pool *pool, kern_pool_chunk_fn *fn, void *arg,
    uint32_t chunks);

#endif /* KERN_POOL_H */
