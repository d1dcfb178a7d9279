/* rate - a counter's rate over a sliding window of time, for the rates
 * `bellows top` shows (reports/s, decisions/s).
 *
 * bellowsd's counters move in bursts (a window closes, its decisions go
 * out together) while the dashboard reads them about once a second: the
 * difference of two readings one second apart jumps between multiples of
 * the burst (0.0, 2.4, 4.9 for a steady 2.5/s). A dash_rate keeps the
 * readings of the last `span_ms` (with their times on one monotonic
 * clock, e.g. bellowsd's uptime) and gives the counter's growth over that
 * whole span divided by its length, so that a steady rate reads steady
 * (to one count over the span). A counter that goes down or a clock that
 * goes back (bellowsd restarted) starts the window over. Pure, no I/O,
 * used from one thread.
 */
#ifndef DASH_RATE_H
#define DASH_RATE_H

#include <stdint.h>

#define DASH_RATE_SAMPLES 128   /* readings kept at most */
#define DASH_RATE_SPAN_MS 10000 /* the window `bellows top` uses */

typedef struct dash_rate {
	uint64_t span_ms;                  /* length of the window */
	uint32_t head;                     /* oldest reading kept */
	uint32_t n;                        /* readings kept */
	uint64_t t_ms[DASH_RATE_SAMPLES];  /* their times, a ring */
	uint64_t count[DASH_RATE_SAMPLES]; /* the counter then */
} dash_rate;

/* Empties *r, with a window of span_ms (> 0) milliseconds. */
void dash_rate_init(dash_rate *r, uint64_t span_ms);

/* Records that the counter was `count` at time t_ms. Readings older than
 * the window are dropped, except the newest of them, which the rate is
 * measured from (so that it covers the whole span once there is one). A
 * count below the last one or a time before it starts over from this
 * reading; one at the same time replaces the last. */
void dash_rate_add(dash_rate *r, uint64_t t_ms, uint64_t count);

/* The counter's growth per second between the oldest and the newest
 * reading kept; NAN until two readings at least 1 ms apart. */
double dash_rate_get(const dash_rate *r);

#endif /* DASH_RATE_H */
