/* clock - the time sources bellows uses.
 *
 * Everything that measures intervals or schedules work uses the monotonic
 * clock, because the wall clock jumps. The wall clock is only for stored
 * timestamps that people read.
 */
#ifndef COM_CLOCK_H
#define COM_CLOCK_H

#include <stdint.h>

/* Monotonic time in milliseconds since an arbitrary origin. Never fails. */
uint64_t com_clock_ms(void);

/* Monotonic time in nanoseconds since an arbitrary origin. Never fails. */
uint64_t com_clock_ns(void);

/* Wall-clock time in milliseconds since the Unix epoch. */
uint64_t com_clock_wall_ms(void);

#endif /* COM_CLOCK_H */
