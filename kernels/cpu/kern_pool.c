/* kern_pool - worker threads for one kernel call at a time, see kern_pool.h.
 *
 * A run publishes its function under the mutex and bumps a generation
 * counter; each worker runs its part once per generation and the last one
 * to finish signals the caller. Condition variables rather than spinning:
 * the machines this runs on share their cores with the trainer's own
 * threads, and a spinning worker would steal from them.
 *
 * A shared run (kern_pool_share) publishes, in the atomic word `claim`, a
 * run number (24 bits), the chunk count (20 bits) and the next chunk to
 * take (20 bits); the caller and every woken worker take chunks by
 * compare-and-swap until none is left. A worker counts itself in `active`
 * before it tries to take a chunk and out when it stops; the caller waits
 * (on `idle`) only until `active` is 0 once every chunk is taken. So a
 * worker that wakes late finds nothing to take and touches nothing but
 * those two atomics. The invariant: share_fn and share_arg are read only
 * after taking a chunk of the run whose `claim` was published after them,
 * and rewritten only once every chunk of that run has returned (the
 * caller waited for `active` to reach 0).
 */
#include "kern_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include <bellows/error.h>

#include "../kernels.h"

typedef struct pool_worker {
	kern_pool *pool;  /* owner */
	uint32_t part;    /* part this worker runs */
	pthread_t thread; /* the thread */
} pool_worker;

struct kern_pool {
	pthread_mutex_t lock; /* guards everything below */
	pthread_cond_t wake;  /* generation changed or stopping */
	pthread_cond_t done;  /* pending reached 0 */
	uint64_t generation;  /* runs published so far */
	uint32_t pending;     /* workers yet to finish this run */
	bool stop;            /* workers must exit */
	kern_pool_fn *fn;     /* work of the current run */
	void *arg;            /* its argument */
	bool share;           /* the current run is a shared run */
	pthread_cond_t idle;  /* active reached 0 */
	/* Shared runs (see the file comment); not guarded by lock: */
	_Atomic uint64_t claim;       /* run 24 | chunks 20 | next 20 bits */
	_Atomic uint32_t active;      /* workers trying to take chunks */
	kern_pool_chunk_fn *share_fn; /* work of the shared run */
	void *share_arg;              /* its argument */
	uint32_t share_runs;          /* shared runs so far (caller only) */
	uint32_t n_workers;           /* threads started */
	pool_worker *workers;         /* n_workers entries */
};

#define CLAIM_BITS 20 /* bits of the chunk count and of the next chunk */
#define CLAIM_MASK ((UINT64_C(1) << CLAIM_BITS) - 1)

/* Takes and runs chunks of the published shared run until none is left;
 * slot is the thread's part. */
static void
pool_take(kern_pool *p, uint32_t slot)
{
	for (;;) {
		uint64_t c = atomic_load(&p->claim);
		uint64_t next = c & CLAIM_MASK;

		if (next >= ((c >> CLAIM_BITS) & CLAIM_MASK))
			return;
		if (!atomic_compare_exchange_weak(&p->claim, &c, c + 1))
			continue;
		p->share_fn(p->share_arg, (uint32_t)next, slot);
	}
}

/* A worker's part of a shared run. */
static void
pool_share_worker(kern_pool *p, uint32_t slot)
{
	atomic_fetch_add(&p->active, 1);
	pool_take(p, slot);
	if (atomic_fetch_sub(&p->active, 1) == 1) {
		pthread_mutex_lock(&p->lock);
		pthread_cond_signal(&p->idle);
		pthread_mutex_unlock(&p->lock);
	}
}

static void *
pool_main(void *arg)
{
	pool_worker *w = arg;
	kern_pool *p = w->pool;
	uint64_t seen = 0;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!p->stop && p->generation == seen)
			pthread_cond_wait(&p->wake, &p->lock);
		if (p->stop)
			break;
		seen = p->generation;
		if (p->share) {
			pthread_mutex_unlock(&p->lock);
			pool_share_worker(p, w->part);
			pthread_mutex_lock(&p->lock);
			continue;
		}
		pthread_mutex_unlock(&p->lock);
		p->fn(p->arg, w->part);
		pthread_mutex_lock(&p->lock);
		if (--p->pending == 0)
			pthread_cond_signal(&p->done);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int
kern_pool_new(uint32_t workers, kern_pool **ret)
{
	kern_pool *p;

	if (workers == 0 || workers > KERN_MAX_THREADS)
		return BELLOWS_EINVAL;
	if ((p = calloc(1, sizeof(*p))) == NULL)
		return BELLOWS_ENOMEM;
	if ((p->workers = calloc(workers, sizeof(*p->workers))) == NULL) {
		free(p);
		return BELLOWS_ENOMEM;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->wake, NULL);
	pthread_cond_init(&p->done, NULL);
	pthread_cond_init(&p->idle, NULL);
	atomic_init(&p->claim, 0);
	atomic_init(&p->active, 0);
	for (uint32_t i = 0; i < workers; i++) {
		pool_worker *w = &p->workers[i];

		w->pool = p;
		w->part = i + 1;
		if (pthread_create(&w->thread, NULL, pool_main, w) != 0) {
			kern_pool_destroy(&p);
			return BELLOWS_ESYS;
		}
		p->n_workers++;
	}
	*ret = p;
	return 0;
}

void
kern_pool_destroy(kern_pool **pool)
{
	kern_pool *p;

	if (pool == NULL || (p = *pool) == NULL)
		return;
	*pool = NULL;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->lock);
	for (uint32_t i = 0; i < p->n_workers; i++)
		pthread_join(p->workers[i].thread, NULL);
	pthread_cond_destroy(&p->idle);
	pthread_cond_destroy(&p->done);
	pthread_cond_destroy(&p->wake);
	pthread_mutex_destroy(&p->lock);
	free(p->workers);
	free(p);
}

uint32_t
kern_pool_size(const kern_pool *pool)
{
	return pool->n_workers + 1;
}

void
kern_pool_run(kern_pool *pool, kern_pool_fn *fn, void *arg)
{
	pthread_mutex_lock(&pool->lock);
	pool->fn = fn;
	pool->arg = arg;
	pool->share = false;
	pool->pending = pool->n_workers;
	pool->generation++;
	pthread_cond_broadcast(&pool->wake);
	pthread_mutex_unlock(&pool->lock);

	fn(arg, 0);

	pthread_mutex_lock(&pool->lock);
	while (pool->pending > 0)
		pthread_cond_wait(&pool->done, &pool->lock);
	pthread_mutex_unlock(&pool->lock);
}

void
kern_pool_share(kern_pool *pool, kern_pool_chunk_fn *fn, void *arg,
    uint32_t chunks)
{
	uint64_t run;

	/* No chunk can be taken and no worker is active: see the file
	 * comment. */
	pool->share_fn = fn;
	pool->share_arg = arg;
	run = ++pool->share_runs & ((UINT64_C(1) << 24) - 1);
	pthread_mutex_lock(&pool->lock);
	atomic_store(&pool->claim,
	    run << (2 * CLAIM_BITS) | (uint64_t)chunks << CLAIM_BITS);
	pool->share = true;
	pool->generation++;
	pthread_cond_broadcast(&pool->wake);
	pthread_mutex_unlock(&pool->lock);

	pool_take(pool, 0);

	pthread_mutex_lock(&pool->lock);
	while (atomic_load(&pool->active) > 0)
		pthread_cond_wait(&pool->idle, &pool->lock);
	pthread_mutex_unlock(&pool->lock);
}
