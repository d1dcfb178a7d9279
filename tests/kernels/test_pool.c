/* test_pool - the CPU backend's worker threads.
 *
 * Every part runs exactly once per call, on as many threads as asked,
 * over many consecutive calls; a shared run runs every chunk exactly once,
 * each on one thread's slot at a time, interleaved with ordinary runs;
 * bad sizes are refused; destroying is
 * NULL-safe and idempotent (and leaks nothing: ASan runs this too).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include <bellows/error.h>

#include "kernels/cpu/kern_pool.h"
#include "kernels/kernels.h"

typedef struct tally {
	uint32_t runs[KERN_MAX_THREADS + 1];     /* per part */
	pthread_t threads[KERN_MAX_THREADS + 1]; /* who ran it last */
} tally;

static void
tally_part(void *arg, uint32_t part)
{
	tally *t = arg;

	/* Each part is written by one thread only. */
	t->runs[part]++;
	t->threads[part] = pthread_self();
}

static void
test_pool_runs_every_part_once_per_call(void **state)
{
	static const uint32_t workers[] = { 1, 2, 3, 7 };

	(void)state;
	for (size_t k = 0; k < sizeof(workers) / sizeof(workers[0]); k++) {
		kern_pool *p = NULL;
		tally t;

		memset(&t, 0, sizeof(t));
		assert_int_equal(kern_pool_new(workers[k], &p), 0);
		assert_int_equal(kern_pool_size(p), workers[k] + 1);
		for (int call = 0; call < 500; call++)
			kern_pool_run(p, tally_part, &t);
		for (uint32_t part = 0; part <= workers[k]; part++)
			assert_int_equal(t.runs[part], 500);
		assert_int_equal(t.runs[workers[k] + 1], 0);
		/* Part 0 is the caller's; the others are not. */
		assert_true(pthread_equal(t.threads[0], pthread_self()));
		for (uint32_t part = 1; part <= workers[k]; part++)
			assert_false(
			    pthread_equal(t.threads[part], pthread_self()));
		kern_pool_destroy(&p);
		assert_null(p);
		kern_pool_destroy(&p);
	}
	kern_pool_destroy(NULL);
}

typedef struct chunks {
	_Atomic uint32_t runs[KERN_POOL_MAX_CHUNKS]; /* per chunk */
	_Atomic uint32_t busy[KERN_MAX_THREADS + 1]; /* slot in use */
	_Atomic uint32_t clash;                      /* a slot ran twice */
} chunks;

static void
chunk_run(void *arg, uint32_t chunk, uint32_t slot)
{
	chunks *c = arg;

	if (atomic_fetch_add(&c->busy[slot], 1) != 0)
		atomic_fetch_add(&c->clash, 1);
	atomic_fetch_add(&c->runs[chunk], 1);
	atomic_fetch_sub(&c->busy[slot], 1);
}

static void
test_pool_shared_runs_take_every_chunk_once(void **state)
{
	static const uint32_t workers[] = { 1, 2, 3, 7 };
	static const uint32_t counts[] = { 1, 2, 5, 64, KERN_POOL_MAX_CHUNKS };
	static chunks c;

	(void)state;
	for (size_t w = 0; w < sizeof(workers) / sizeof(workers[0]); w++) {
		kern_pool *pool = NULL;
		tally t;

		assert_int_equal(kern_pool_new(workers[w], &pool), 0);
		for (int call = 0; call < 200; call++) {
			uint32_t n = counts[call % 5];

			memset(&c, 0, sizeof(c));
			kern_pool_share(pool, chunk_run, &c, n);
			for (uint32_t i = 0; i < KERN_POOL_MAX_CHUNKS; i++)
				assert_int_equal(atomic_load(&c.runs[i]),
				    i < n ? 1 : 0);
			assert_int_equal(atomic_load(&c.clash), 0);
			if (call % 7 == 0) { /* an ordinary run between */
				memset(&t, 0, sizeof(t));
				kern_pool_run(pool, tally_part, &t);
				for (uint32_t p = 0; p <= workers[w]; p++)
					assert_int_equal(t.runs[p], 1);
			}
		}
		kern_pool_destroy(&pool);
	}
}

static void
test_pool_refuses_zero_or_too_many_workers(void **state)
{
	kern_pool *p = NULL;

	(void)state;
	assert_int_equal(kern_pool_new(0, &p), BELLOWS_EINVAL);
	assert_int_equal(kern_pool_new(KERN_MAX_THREADS + 1, &p),
	    BELLOWS_EINVAL);
	assert_null(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pool_runs_every_part_once_per_call),
		cmocka_unit_test(test_pool_shared_runs_take_every_chunk_once),
		cmocka_unit_test(test_pool_refuses_zero_or_too_many_workers),
	};

	return cmocka_run_group_tests_name("kernels cpu worker pool", tests,
	    NULL, NULL);
}
