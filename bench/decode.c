/* decode - what bellowsd's decoder costs per report, by layers per report.
 *
 * Encodes one Report of L layers (the statistics a trainer sends for a
 * layer every window, a few comm samples, the timings) with the codec and
 * decodes it N times through one arena, as bellowsd's event loop does
 * (com_wire_decode_arena: the wire reader and the conversion to
 * com_report, then com_msg_fini). Prints the frame's size and the time
 * per decode for each L given. Timings move with the machine's load; for
 * numbers that do not, count instructions:
 *
 *   valgrind --tool=callgrind build/bench/decode --layers 100 --decodes 0
 *   valgrind --tool=callgrind build/bench/decode --layers 100 --decodes 100
 *
 * and divide the difference by 100 (the first run is the set-up alone).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bellows/error.h>

#include "common/clock.h"
#include "common/wire.h"
#include "common/wire_arena.h"

/* Fills *m with a Report of n layers, as a trainer's agent sends one. */
static void
bench_report(com_msg *m, uint32_t n)
{
	com_report *r = &m->u.report;

	com_msg_init(m, COM_MSG_REPORT);
	if ((r->job = strdup("resnet50")) == NULL ||
	    (r->layers = calloc(n, sizeof(*r->layers))) == NULL ||
	    (r->comm = calloc(2, sizeof(*r->comm))) == NULL) {
		fprintf(stderr, "decode: out of memory\n");
		exit(1);
	}
	r->rank = 2;
	r->window = 9;
	r->first_step = 100;
	r->last_step = 149;
	r->n_layers = n;
	for (uint32_t i = 0; i < n; i++) {
		com_layer_stats *s = &r->layers[i];

		s->layer = i;
		s->count = 1000 + i;
		s->nonzero = 900 + i;
		s->sum_sq = 1.5 + i;
		s->abs_sum = 2.5 + i;
		s->max_abs = 0.75;
		s->acc_norm = 3.25 * i;
		s->momentum_abs_mean = 1e-4;
		s->observed_steps = 50;
		s->comm_raw_ms = 1.75;
		s->comm_raw_n = 25;
		s->codec_ms = 0.0625;
	}
	r->n_comm = 2;
	for (uint32_t i = 0; i < 2; i++) {
		r->comm[i].bytes = (uint64_t)1 << (20 + i);
		r->comm[i].ms = 2.5;
		r->comm[i].count = 50;
	}
	r->timings.steps = 50;
	r->timings.step_ms = 5000.5;
	r->timings.compute_ms = 3000.25;
	r->lr = 0.1;
	r->batch_size = 32;
	r->ranks = 1;
}

/* Decodes one L-layer report n times; prints the time per decode. */
static int
bench_layers(uint32_t layers, unsigned n, com_arena *arena)
{
	com_limits lim;
	com_msg m;
	uint8_t *buf = NULL;
	size_t len = 0;
	uint64_t t0;
	int rc;

	com_limits_default(&lim);
	bench_report(&m, layers);
	rc = com_wire_encode(&m, &buf, &len);
	com_msg_fini(&m);
	if (rc != 0) {
		fprintf(stderr, "decode: encode: %s\n", bellows_strerror(rc));
		return 1;
	}
	t0 = com_clock_ns();
	for (unsigned k = 0; k < n && rc == 0; k++) {
		com_msg out;

		if ((rc = com_wire_decode_arena(buf, len, &lim, arena, &out)) ==
		    0)
			com_msg_fini(&out);
	}
	free(buf);
	if (rc != 0) {
		fprintf(stderr, "decode: %s\n", bellows_strerror(rc));
		return 1;
	}
	printf("%8u %10zu %12.2f\n", layers, len,
	    n > 0 ? (double)(com_clock_ns() - t0) / n / 1e3 : 0.0);
	return 0;
}

int
main(int argc, char **argv)
{
	unsigned decodes = 2000, layers[8] = { 100, 1000 }, n_layers = 2;
	bool given = false; /* --layers replaces the default list */
	com_arena *arena = NULL;
	int rc = 0;

	for (int i = 1; i < argc; i += 2) {
		if (i + 1 < argc && strcmp(argv[i], "--decodes") == 0) {
			decodes = (unsigned)strtoul(argv[i + 1], NULL, 10);
		} else if (i + 1 < argc && strcmp(argv[i], "--layers") == 0 &&
		    (!given || n_layers < 8)) {
			n_layers = given ? n_layers : 0;
			given = true;
			layers[n_layers++] = (unsigned)strtoul(argv[i + 1],
			    NULL, 10);
		} else {
			fprintf(stderr,
			    "usage: decode [--layers L]... "
			    "[--decodes N]\n");
			return 2;
		}
	}
	if (com_arena_new(0, &arena) != 0)
		return 1;
	printf("  layers      bytes    us/decode\n");
	for (unsigned i = 0; i < n_layers && rc == 0; i++)
		rc = bench_layers(layers[i],
		    layers[i] >= 1000 ? decodes / 10 : decodes, arena);
	com_arena_destroy(&arena);
	return rc;
}
