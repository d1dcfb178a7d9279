/* rng - the kernels tests' random numbers: xorshift64, one stream per test
 * file. Define TEST_RNG_SEED (a nonzero uint64_t) before including it, so
 * that each file draws the same values on every run and from every other
 * file's. */
#ifndef TESTS_KERNELS_RNG_H
#define TESTS_KERNELS_RNG_H

#include <stdint.h>

#ifndef TEST_RNG_SEED
#error "define TEST_RNG_SEED before including rng.h"
#endif

static uint64_t rng_state = TEST_RNG_SEED;

/* The next 64 random bits. */
static inline uint64_t
rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Uniform in [-1, 1). */
static inline float
unif(void)
{
	return (float)((double)(rng() >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

#endif
