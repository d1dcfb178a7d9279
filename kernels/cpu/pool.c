/* pool - worker threads for one kernel call at a time, see pool.h.
 *
 * A run publishes its function under the mutex and bumps a generation
 * counter; each worker runs its part once per generation and the last one
 * to finish signals the caller. Condition variables rather than spinning:
 * the machines this runs on share their cores with the trainer's own
 * threads, and a spinning worker would steal from them.
 */
#include "pool.h"

#include <pthread.h>
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
	uint32_t n_workers;   /* threads started */
	pool_worker *workers; /* n_workers entries */
};

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
