/* perfmodel_fit - the thesis's performance model as numbers, see
 * perfmodel_fit.h. */
#include "perfmodel_fit.h"

#include <math.h>
#include <stddef.h>

void
pol_perfmodel_stats_add(pol_perfmodel_stats *st, double x, double y, double w)
{
	pol_perfmodel_stats one = { .w = w,
		.mx = x,
		.my = y,
		.xmin = x,
		.xmax = x,
		.n = 1 };

	pol_perfmodel_stats_merge(st, &one);
}

void
pol_perfmodel_stats_merge(pol_perfmodel_stats *a, const pol_perfmodel_stats *b)
{
	double w, dx, dy, f;

	if (b->w <= 0)
		return;
	if (a->w <= 0) {
		*a = *b;
		return;
	}
	/* Chan, Golub and LeVeque's pairwise update, weighted. */
	w = a->w + b->w;
	dx = b->mx - a->mx;
	dy = b->my - a->my;
	f = a->w * b->w / w;
	a->cxx += b->cxx + dx * dx * f;
	a->cxy += b->cxy + dx * dy * f;
	a->cyy += b->cyy + dy * dy * f;
	a->mx += dx * b->w / w;
	a->my += dy * b->w / w;
	a->w = w;
	a->xmin = fmin(a->xmin, b->xmin);
	a->xmax = fmax(a->xmax, b->xmax);
	a->n += b->n;
}

pol_perfmodel_fit_status
pol_perfmodel_fit(const pol_perfmodel_stats *st, pol_perfmodel_line *ret)
{
	pol_perfmodel_line line = { 0 };
	double slope, intercept;

	if (st->w <= 0 || st->n == 0)
		return POL_PERFMODEL_FIT_EMPTY;
	if (!(st->xmin < st->xmax) || !(st->cxx > 0))
		return POL_PERFMODEL_FIT_ONE_SIZE;
	slope = st->cxy / st->cxx;
	intercept = st->my - slope * st->mx;
	line.raw_intercept = intercept;
	if (!(slope > 0)) {
		ret->slope = slope;
		return POL_PERFMODEL_FIT_SLOPE;
	}
	if (intercept >= 0) {
		line.slope = slope;
		line.intercept = intercept;
		line.r2 = st->cyy > 0 ? st->cxy * st->cxy / (st->cxx * st->cyy)
				      : 1;
	} else {
		/* Least squares with the intercept held at 0: s = Σwxy /
		 * Σwx², residual Σwy² − s·Σwxy. */
		double sxx = st->cxx + st->w * st->mx * st->mx;
		double sxy = st->cxy + st->w * st->mx * st->my;
		double syy = st->cyy + st->w * st->my * st->my;

		slope = sxy / sxx;
		if (!(slope > 0)) {
			ret->slope = slope;
			return POL_PERFMODEL_FIT_SLOPE;
		}
		line.slope = slope;
		line.intercept = 0;
		line.origin = true;
		line.r2 = st->cyy > 0 ? 1 - fmax(syy - slope * sxy, 0) / st->cyy
				      : 1;
	}
	*ret = line;
	return POL_PERFMODEL_FIT_OK;
}

double
pol_perfmodel_alpha(double intercept, uint32_t p)
{
	return intercept / (2.0 * ((double)p - 1));
}

double
pol_perfmodel_bw(double slope, uint32_t p)
{
	return 2.0 * ((double)p - 1) / ((double)p * slope);
}

double
pol_perfmodel_slope(double bw, uint32_t p)
{
	return 2.0 * ((double)p - 1) / ((double)p * bw);
}

void
pol_perfmodel_buckets(double model, double bucket, double *ret_k,
    double *ret_last)
{
	double k;

	if (!(model > 0)) {
		*ret_k = 0;
		*ret_last = 0;
		return;
	}
	k = bucket > 0 ? ceil(model / bucket) : 1;
	if (k < 1)
		k = 1;
	*ret_k = k;
	*ret_last = bucket > 0 ? model - (k - 1) * bucket : model;
}

double
pol_perfmodel_comm(const pol_perfmodel_model *m, double bytes)
{
	return m->latency + m->slope * bytes;
}

double
pol_perfmodel_overlapped(const pol_perfmodel_model *m)
{
	if (m->k < 1)
		return 0;
	return (m->k - 1) * m->latency + (m->model - m->last) * m->slope;
}

double
pol_perfmodel_sync(const pol_perfmodel_model *m)
{
	if (m->k < 1)
		return m->t_comp;
	if (!m->overlap)
		return m->t_comp + m->k * m->latency + m->model * m->slope;
	return fmax(m->gamma * m->t_comp, pol_perfmodel_overlapped(m)) +
	    pol_perfmodel_comm(m, m->last);
}

double
pol_perfmodel_overlapped_compressed(const pol_perfmodel_model *m)
{
	if (m->k < 1)
		return 0;
	return (m->k - 1) * m->latency +
	    (m->model - m->last) / m->cr * m->slope;
}

double
pol_perfmodel_tail_compressed(const pol_perfmodel_model *m)
{
	return m->latency + m->last / m->cr * m->slope + m->codec_ms;
}

double
pol_perfmodel_compressed(const pol_perfmodel_model *m)
{
	if (m->k < 1)
		return m->t_comp + m->codec_ms;
	if (m->overlap && m->comp_overlap)
		return fmax(m->gamma * m->t_comp,
			   pol_perfmodel_overlapped_compressed(m)) +
		    pol_perfmodel_tail_compressed(m);
	return m->t_comp + m->codec_ms + m->k * m->latency +
	    m->model / m->cr * m->slope;
}

bool
pol_perfmodel_comm_bound(const pol_perfmodel_model *m)
{
	return m->overlap && pol_perfmodel_overlapped(m) > m->gamma * m->t_comp;
}

/* Compressed minus synchronous step at bandwidth bw (bytes/ms). */
static double
fit_gap(const pol_perfmodel_model *m, uint32_t p, double bw)
{
	pol_perfmodel_model at = *m;

	at.slope = pol_perfmodel_slope(bw, p);
	return pol_perfmodel_compressed(&at) - pol_perfmodel_sync(&at);
}

/* Inserts, in increasing order after pt[0] = lo, the bandwidth at which
 * γ·T_comp equals (k−1)·L + bytes·s, when it lies inside (lo, hi). */
static void
fit_kink(const pol_perfmodel_model *m, uint32_t p, double lo, double hi,
    double bytes, double *pt, size_t *n)
{
	double s = (m->gamma * m->t_comp - (m->k - 1) * m->latency) / bytes;
	double bw;
	size_t i;

	if (!(s > 0))
		return;
	bw = pol_perfmodel_bw(s, p);
	if (!(bw > lo && bw < hi))
		return;
	for (i = 0; i < *n; i++) {
		if (pt[i] == bw)
			return; /* the same kink twice */
	}
	/* pt[0] = lo < bw: the loop stops at 1 at the latest. */
	for (i = *n; pt[i - 1] > bw; i--)
		pt[i] = pt[i - 1];
	pt[i] = bw;
	(*n)++;
}

int
pol_perfmodel_breakeven(const pol_perfmodel_model *m, uint32_t p, double lo,
    double hi, double *ret_bw)
{
	double pt[4], gap[4];
	size_t n = 0;
	bool faster = true, slower = true;

	/* In s = 1/BW-proportional units both predictions are linear but
	 * for the max() of an overlapped one: split the range at the kinks
	 * so that each piece holds at most one crossing. */
	pt[n++] = lo;
	if (m->overlap && m->k >= 1 && m->model > m->last) {
		fit_kink(m, p, lo, hi, m->model - m->last, pt, &n);
		if (m->comp_overlap)
			fit_kink(m, p, lo, hi, (m->model - m->last) / m->cr, pt,
			    &n);
	}
	pt[n++] = hi;
	for (size_t i = 0; i < n; i++) {
		gap[i] = fit_gap(m, p, pt[i]);
		faster = faster && gap[i] < 0;
		slower = slower && gap[i] > 0;
	}
	if (faster)
		return 1;
	if (slower)
		return 2;
	for (size_t i = n - 1; i > 0; i--) {
		double a = pt[i - 1], b = pt[i];
		double ga = gap[i - 1];

		if (gap[i] == 0) {
			*ret_bw = b;
			return 0;
		}
		if (ga == 0 && i - 1 == 0) {
			*ret_bw = a;
			return 0;
		}
		/* A zero at a is the next piece's right end. */
		if (ga == 0 || (ga < 0) == (gap[i] < 0))
			continue;
		/* Bisection on log(BW): the range spans decades. */
		for (int it = 0; it < 200 && b / a - 1 > 1e-12; it++) {
			double mid = sqrt(a * b);
			double g = fit_gap(m, p, mid);

			if ((g < 0) == (ga < 0) && g != 0) {
				a = mid;
				ga = g;
			} else {
				b = mid;
			}
		}
		*ret_bw = sqrt(a * b);
		return 0;
	}
	return 2; /* not reached: a sign change exists */
}

double
pol_perfmodel_cr_needed(const pol_perfmodel_model *m)
{
	double room = m->gamma * m->t_comp - m->k * m->latency;
	double cr;

	if (!(room > 0))
		return INFINITY;
	cr = m->model * m->slope / room;
	return cr > 1 ? cr : 1;
}
