/* benchutil - what the C benchmarks share: the monotonic clock, medians,
 * and page-aligned buffers that are touched before they are timed.
 *
 * Header-only (static functions): each benchmark is one executable.
 */
#ifndef BENCH_BENCHUTIL_H
#define BENCH_BENCHUTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Monotonic time in nanoseconds. */
static inline uint64_t
bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline int
bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a;
	double y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of v[0..n-1] (n > 0); sorts v. */
static inline double
bench_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

/* `bytes` of zeroed memory on 4 KiB pages, every page touched; exits
 * with a message naming the benchmark `who` when there is none. */
static inline void *
bench_alloc(const char *who, size_t bytes)
{
	void *p = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);

	if (p == NULL) {
		fprintf(stderr, "%s: out of memory for %zu bytes\n", who,
		    bytes);
		exit(1);
	}
	memset(p, 0, bytes);
	return p;
}

#endif /* BENCH_BENCHUTIL_H */
