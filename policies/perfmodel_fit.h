/* perfmodel_fit - the performance model of chapter 4 of Agarwal's thesis
 * as numbers: a weighted least-squares line through measured collective
 * times, and the step times it predicts with and without compression.
 *
 * All times are milliseconds and all sizes bytes. A ring all-reduce of b
 * bytes over p ranks takes T_comm(b) = L + s·b with L = 2α(p−1) and
 * s = 2(p−1)/(p·BW) (thesis eq. 4.1), so a line fitted to (bytes, ms)
 * samples gives L as its intercept and s as its slope; α and BW follow
 * from p. Pure functions, no allocation: used by policies/perfmodel.c and
 * tested on their own against hand-computed values.
 */
#ifndef POL_PERFMODEL_FIT_H
#define POL_PERFMODEL_FIT_H

#include <stdbool.h>
#include <stdint.h>

/* 1 Gbit/s in bytes per millisecond. */
#define POL_PERFMODEL_GBPS 125000.0

/* Weighted sums of (x, y) samples about their means, so that sets can be
 * merged without the cancellation of raw sums of squares. */
typedef struct pol_perfmodel_stats {
	double w;    /* total weight; 0: empty */
	double mx;   /* weighted mean of x (bytes) */
	double my;   /* weighted mean of y (ms) */
	double cxx;  /* sum w (x - mx)^2 */
	double cxy;  /* sum w (x - mx)(y - my) */
	double cyy;  /* sum w (y - my)^2 */
	double xmin; /* smallest x seen */
	double xmax; /* largest x seen */
	uint32_t n;  /* samples */
} pol_perfmodel_stats;

/* Adds one sample of weight w > 0 (callers skip the others). */
void pol_perfmodel_stats_add(pol_perfmodel_stats *st, double x, double y,
    double w);

/* Merges `b` into `a` (either may be empty). */
void pol_perfmodel_stats_merge(pol_perfmodel_stats *a,
    const pol_perfmodel_stats *b);

/* Why a fit was not made. */
typedef enum pol_perfmodel_fit_status {
	POL_PERFMODEL_FIT_OK = 0,       /* line fitted */
	POL_PERFMODEL_FIT_EMPTY = 1,    /* no sample */
	POL_PERFMODEL_FIT_ONE_SIZE = 2, /* fewer than two distinct sizes */
	POL_PERFMODEL_FIT_SLOPE = 3,    /* slope <= 0: time does not grow
					 * with size */
} pol_perfmodel_fit_status;

/* A fitted line y = intercept + slope·x. */
typedef struct pol_perfmodel_line {
	double intercept;     /* ms: L = 2α(p−1), >= 0 */
	double slope;         /* ms per byte: s = 2(p−1)/(p·BW), > 0 */
	double r2;            /* weighted coefficient of determination */
	double raw_intercept; /* the unconstrained fit's intercept */
	bool origin; /* the unconstrained intercept was negative: refitted
		      * through the origin (α = 0) */
} pol_perfmodel_line;

/* Fits the weighted least-squares line through the samples of `st`. A
 * negative intercept is not a latency: the line is then refitted through
 * the origin (the least-squares line with intercept 0). Returns the
 * status; *ret is written only for POL_PERFMODEL_FIT_OK, and for
 * POL_PERFMODEL_FIT_SLOPE gets the rejected slope in ret->slope. */
pol_perfmodel_fit_status pol_perfmodel_fit(const pol_perfmodel_stats *st,
    pol_perfmodel_line *ret);

/* α in ms from the intercept L over p > 1 ranks: L / (2(p−1)). */
double pol_perfmodel_alpha(double intercept, uint32_t p);

/* BW in bytes/ms from the slope s over p > 1 ranks: 2(p−1)/(p·s). */
double pol_perfmodel_bw(double slope, uint32_t p);

/* The slope s for bandwidth bw (bytes/ms) over p > 1 ranks. */
double pol_perfmodel_slope(double bw, uint32_t p);

/* Everything a prediction needs. */
typedef struct pol_perfmodel_model {
	double latency;    /* L: ms per collective, 2α(p−1) */
	double slope;      /* s: ms per byte, 2(p−1)/(p·BW) */
	double t_comp;     /* backward compute, ms */
	double gamma;      /* slowdown of backward under overlap */
	double model;      /* M: gradient bytes */
	double k;          /* collectives per step (buckets or layers) */
	double last;       /* bytes of the collective that cannot overlap */
	bool overlap;      /* collectives overlap the backward pass */
	bool comp_overlap; /* with overlap: compressed collectives overlap
			    * it too (an asynchronous compressing hook) */
	double codec_ms;   /* T_ed: encode + decode per step */
	double cr;         /* compression ratio, raw / sent, > 0 */
} pol_perfmodel_model;

/* k and b_last for a model of `model` bytes in buckets of `bucket`
 * bytes: k = ceil(M / b), b_last = M − (k−1)·b (k = 0 for M = 0). */
void pol_perfmodel_buckets(double model, double bucket, double *ret_k,
    double *ret_last);

/* T_comm(b) = L + s·b. */
double pol_perfmodel_comm(const pol_perfmodel_model *m, double bytes);

/* The collectives that overlap the backward pass, all but the last:
 * (k−1)·L + (M − b_last)·s, 0 for k < 1. */
double pol_perfmodel_overlapped(const pol_perfmodel_model *m);

/* Backward plus synchronisation without compression (thesis §4.2.4.1):
 * overlap: max(γ·T_comp, (k−1)·L + (M − b_last)·s) + L + b_last·s,
 * which for equal buckets is max(γT_comp, (k−1)T_comm(b)) +
 * T_comm(b_last); without overlap: T_comp + k·L + M·s. */
double pol_perfmodel_sync(const pol_perfmodel_model *m);

/* The compressed collectives that overlap the backward pass, all but the
 * last: (k−1)·L + ((M − b_last) / CR)·s, 0 for k < 1. Each of the k
 * collectives carries its share of the M / CR bytes sent. */
double pol_perfmodel_overlapped_compressed(const pol_perfmodel_model *m);

/* What follows the backward pass of a compressed step whose collectives
 * overlap it: the last collective, L + (b_last / CR)·s, and the whole
 * encode + decode T_ed. Only the sum T_ed is measured; counting all of
 * it after the backward pass bounds every split of it into an encode
 * inside the backward pass and a decode after it from above. */
double pol_perfmodel_tail_compressed(const pol_perfmodel_model *m);

/* Backward plus synchronisation with compression. Not overlapped (no
 * overlap, or comp_overlap false; thesis §4.2.1): T_comp + T_ed + k·L +
 * (M / CR)·s. Overlapped (overlap and comp_overlap): max(γ·T_comp,
 * pol_perfmodel_overlapped_compressed) + pol_perfmodel_tail_compressed.
 * T_comp + T_ed for k < 1. */
double pol_perfmodel_compressed(const pol_perfmodel_model *m);

/* The communication-bound test: (k−1)·L + (M − b_last)·s > γ·T_comp. */
bool pol_perfmodel_comm_bound(const pol_perfmodel_model *m);

/* The bandwidth (bytes/ms) at which pol_perfmodel_compressed equals
 * pol_perfmodel_sync over p > 1 ranks, everything but BW as in m, found
 * by bisection between lo and hi (bytes/ms, 0 < lo < hi). With several
 * crossings the highest is returned: above it compression loses.
 * Returns 0 and sets *ret_bw, or 1 when compression is faster over the
 * whole range, or 2 when it is slower over the whole range. */
int pol_perfmodel_breakeven(const pol_perfmodel_model *m, uint32_t p, double lo,
    double hi, double *ret_bw);

/* The smallest compression ratio with k·L + (M / CR)·s <= γ·T_comp:
 * CR = M·s / (γ·T_comp − k·L), at least 1 (no compression needed).
 * INFINITY when the latencies alone exceed γ·T_comp. */
double pol_perfmodel_cr_needed(const pol_perfmodel_model *m);

#endif /* POL_PERFMODEL_FIT_H */
