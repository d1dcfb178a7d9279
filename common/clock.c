/* clock - monotonic and wall time, see clock.h. */
#include "clock.h"

#include <time.h>

uint64_t
com_clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t
com_clock_ms(void)
{
	return com_clock_ns() / 1000000u;
}

uint64_t
com_clock_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}
