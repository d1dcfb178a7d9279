/* timing - the timed communications of one window, reduced to one time
 * per kind of send.
 *
 * The trainer times the sends of each layer's gradient (raw or compressed,
 * with the codec time of a compressed one) and the collectives that are
 * not one layer's, such as DDP buckets, keyed by (bytes, compressed). At
 * the window's end each kind of send is reported as one statistic of its
 * durations and the number of sends: SlimGC compares a layer's raw and
 * compressed times, the performance model fits latency and bandwidth to
 * the layer and bucket times.
 *
 * A layer's times are reported as their lower quartile
 * (AGENT_TIMING_QUANTILE), not their median: where the ranks share too few
 * CPUs, a send either completes at once or waits, often for milliseconds,
 * for a peer that is not running, and a window's median jumps between the
 * two modes with the share of slow sends. The lower quartile stays in the
 * fast mode unless three quarters of the sends were slow, and is what the
 * send costs when the peer is ready (bench/slimgc/sends.py measured it;
 * docs/policies/slimgc.md). Bucket collectives stay medians.
 *
 * A window may time thousands of sends of one layer, so each kind keeps a
 * reservoir of at most AGENT_TIMING_RESERVOIR durations: every send
 * until it is full, then a uniform sample of the window's sends
 * (Vitter's algorithm R, with a fixed-seed generator so runs repeat).
 * Memory is allocated on the first send of a layer and on the first
 * bucket; recording never allocates after that, and finishing never does.
 *
 * Not thread-safe: the training thread owns it.
 */
#ifndef AGENT_TIMING_H
#define AGENT_TIMING_H

#include <stdbool.h>
#include <stdint.h>

#include "common/msg.h"

#define AGENT_TIMING_RESERVOIR   32   /* durations kept per kind of send */
#define AGENT_TIMING_MAX_BUCKETS 256  /* (bytes, compressed) per window */
#define AGENT_TIMING_QUANTILE    0.25 /* a layer's reported send time */

/* The durations kept of one kind of send, and how many there were. */
typedef struct agent_reservoir {
	double *ms;    /* AGENT_TIMING_RESERVOIR entries; NULL until used */
	double *codec; /* paired codec times, or NULL for raw sends */
	uint64_t seen; /* sends recorded this window */
} agent_reservoir;

/* The sends of one layer in the window. */
typedef struct agent_timing_layer {
	agent_reservoir raw;  /* uncompressed sends */
	agent_reservoir comp; /* compressed sends, with codec times */
} agent_timing_layer;

/* The collectives of one (bytes, compressed) in the window. */
typedef struct agent_timing_bucket {
	uint64_t bytes;      /* this rank's share */
	bool compressed;     /* a compressed payload */
	agent_reservoir res; /* their durations */
} agent_timing_bucket;

typedef struct agent_timing {
	uint32_t n_layers;            /* entries in layers */
	agent_timing_layer *layers;   /* per layer; reservoirs lazy, one
				       * allocation each at raw.ms */
	agent_timing_bucket *buckets; /* AGENT_TIMING_MAX_BUCKETS, or NULL */
	double *bucket_mem;           /* their durations, one allocation */
	uint32_t n_buckets;           /* distinct keys this window */
	uint64_t dropped;             /* collectives beyond the keys */
	com_comm_sample *samples;     /* report buffer, with buckets */
	uint64_t rng;                 /* xorshift64 state for the sampling */
} agent_timing;

/* Prepares *t for `n_layers` layers. Allocates only the per-layer
 * headers. Returns 0 or BELLOWS_ENOMEM (then *t needs no fini). */
int agent_timing_init(agent_timing *t, uint32_t n_layers);

/* Frees everything *t owns. Safe on a zeroed or finalised struct. */
void agent_timing_fini(agent_timing *t);

/* Records one send of `layer` taking comm_ms (and codec_ms when
 * compressed). Arguments are the caller's to check (index in range, times
 * finite and >= 0). Returns 0, or BELLOWS_ENOMEM on the layer's first
 * send if its reservoirs cannot be allocated (nothing recorded). */
int agent_timing_send(agent_timing *t, uint32_t layer, bool compressed,
    double comm_ms, double codec_ms);

/* Records one collective of `bytes` taking comm_ms. When the window holds
 * AGENT_TIMING_MAX_BUCKETS other keys already, it is only counted as
 * dropped. Returns 0, or BELLOWS_ENOMEM on the first call if the table
 * cannot be allocated (nothing recorded). */
int agent_timing_collective(agent_timing *t, uint64_t bytes, bool compressed,
    double comm_ms);

/* Writes the window's lower quartiles (AGENT_TIMING_QUANTILE) of each
 * layer's raw sends, compressed sends and their codec times, and their
 * counts, into the comm_* and codec_ms fields of ret[0..n_layers-1] (zero for a
 * layer without sends; counts saturate at UINT32_MAX), points *ret_comm at one
 * sample per key, sorted by bytes then raw before compressed (valid until the
 * next call of any agent_timing function; NULL when there are none),
 * *ret_n_comm at their number and *ret_dropped at the collectives dropped; then
 * starts a new window. Never fails, never allocates. */
void agent_timing_finish(agent_timing *t, com_layer_stats *ret,
    com_comm_sample **ret_comm, uint32_t *ret_n_comm, uint64_t *ret_dropped);

/* The median of the n values at v (n > 0), which it reorders: the middle
 * one for odd n, the mean of the two middle ones for even n. */
double agent_timing_median(double *v, uint32_t n);

/* The p-quantile of the n values at v (n > 0), which it sorts: the value
 * of index floor(p * (n - 1)), one of the values, never interpolated (so
 * one slow value next to fast ones is never averaged in). p <= 0 or NAN
 * gives the least value, p >= 1 the greatest. */
double agent_timing_quantile(double *v, uint32_t n, double p);

#endif /* AGENT_TIMING_H */
