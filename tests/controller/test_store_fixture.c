/* test_store_fixture - a history database made by an earlier bellowsd
 * (tests/fixtures/history-v5.db, see the README there) opens with the
 * store of this build, and what recovery and a resume read back from it,
 * every field of every decision and window, is what the code that made the
 * file read back: the text in tests/fixtures/history-v5.recovered.txt.
 *
 * The file is copied into a private temporary directory first (opening
 * migrates it in place). With BELLOWS_FIXTURE_RECORD=1 in the environment
 * the test writes the expected text instead of comparing (how the fixture
 * was made, README.md).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zmq.h>

#include <bellows/error.h>

#include "policyhost/config.h"
#include "controller/events.h"
#include "policyhost/log.h"
#include "controller/store.h"

#define FIXTURE  "tests/fixtures/history-v5.db"
#define EXPECTED "tests/fixtures/history-v5.recovered.txt"

typedef struct fixture {
	char dir[64];        /* private temporary directory */
	char db[128];        /* the copy under test */
	char src[1024];      /* the fixture */
	char expected[1024]; /* the expected text */
	void *zctx;          /* ZeroMQ context */
	ctl_events *events;  /* the store's event ring */
	ctl_store *store;    /* under test */
	char *text;          /* what was read back, appended to */
	size_t len;          /* bytes in text */
	size_t cap;          /* bytes allocated */
} fixture;

/* ---- the text of what was read back ------------------------------------ */

static void
out(fixture *f, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	assert_true(n >= 0);
	if (f->len + (size_t)n + 1 > f->cap) {
		size_t cap = f->cap == 0 ? 4096 : f->cap;

		while (f->len + (size_t)n + 1 > cap)
			cap *= 2;
		f->text = realloc(f->text, cap);
		assert_non_null(f->text);
		f->cap = cap;
	}
	va_start(ap, fmt);
	vsnprintf(f->text + f->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	f->len += (size_t)n;
}

static void
out_decision(fixture *f, const char *what, const com_decision *d)
{
	out(f, "%s seq=%llu apply_step=%llu window=%llu n_layers=%u", what,
	    (unsigned long long)d->seq, (unsigned long long)d->apply_step,
	    (unsigned long long)d->window, d->n_layers);
	out(f,
	    " batch_size=%u lr_scale=%.17g size_threshold=%llu"
	    " compression_off=%d calibrate_steps=%llu codec_table_len=%zu",
	    d->batch_size, d->lr_scale, (unsigned long long)d->size_threshold,
	    (int)d->compression_off, (unsigned long long)d->calibrate_steps,
	    d->codec_table_len);
	out(f, " policy=%s reason=%s\n", d->policy != NULL ? d->policy : "-",
	    d->reason != NULL ? d->reason : "-");
	for (uint32_t i = 0; i < d->n_layers; i++)
		out(f, "  layer %u level=%.17g error_bound=%.17g\n", i,
		    d->level[i], d->error_bound[i]);
	for (size_t i = 0; i < d->codec_table_len; i++)
		out(f, "%s%02x%s", i == 0 ? "  codec_table " : "",
		    d->codec_table[i], i + 1 == d->codec_table_len ? "\n" : "");
}

static int
on_run(void *arg, const ctl_store_run *run, void **ret_ctx)
{
	fixture *f = arg;

	out(f,
	    "run id=%lld job=%s world=%u n_layers=%u n_decisions=%u"
	    " next_window=%llu max_step=%llu last_seq=%llu run_key=%s"
	    " config_hash=%s\n",
	    (long long)run->id, run->job, run->world, run->n_layers,
	    run->n_decisions, (unsigned long long)run->next_window,
	    (unsigned long long)run->max_step,
	    (unsigned long long)run->last_seq, run->run_key, run->config_hash);
	for (uint32_t r = 0; r < run->world; r++)
		out(f, " rank %u alive=%d\n", r, (int)run->alive[r]);
	for (uint32_t i = 0; i < run->n_layers; i++) {
		const com_layer_info *l = &run->layers[i];

		out(f, " layer %u name=%s numel=%llu ndim=%u shape=", i,
		    l->name, (unsigned long long)l->numel, l->ndim);
		for (uint32_t k = 0; k < l->ndim; k++)
			out(f, "%s%u", k == 0 ? "" : "x", l->shape[k]);
		out(f, "\n");
	}
	for (uint32_t i = 0; i < run->n_decisions; i++)
		out_decision(f, " decision", &run->decisions[i]);
	*ret_ctx = f;
	return 0;
}

static bool
on_window(void *arg, void *ctx, bellows_window *w, const com_decision *in_force)
{
	fixture *f = ctx;

	assert_ptr_equal(arg, ctx);
	out(f,
	    " window %llu job=%s first_step=%llu last_step=%llu epoch=%llu"
	    " lr=%.17g lr_next=%.17g batch_size=%u lr_scale=%.17g world=%u"
	    " ranks_reported=%u\n",
	    (unsigned long long)w->window, w->job,
	    (unsigned long long)w->first_step, (unsigned long long)w->last_step,
	    (unsigned long long)w->epoch, w->lr, w->lr_next, w->batch_size,
	    w->lr_scale, w->world, w->ranks_reported);
	out(f,
	    "  step_ms_median=%.17g compute_ms_median=%.17g"
	    " comm_ms_median=%.17g floats_sent=%llu floats_raw=%llu"
	    " n_layers=%u\n",
	    w->step_ms_median, w->compute_ms_median, w->comm_ms_median,
	    (unsigned long long)w->floats_sent,
	    (unsigned long long)w->floats_raw, w->n_layers);
	out(f,
	    "  backward_ms_median=%.17g codec_ms_median=%.17g"
	    " mem_device_used=%.17g mem_device_total=%.17g"
	    " mem_host_used=%.17g compression_off=%d size_threshold=%llu"
	    " calibrate_until=%llu saved_bytes=%.17g n_comm=%u\n",
	    w->backward_ms_median, w->codec_ms_median, w->mem_device_used,
	    w->mem_device_total, w->mem_host_used, (int)w->compression_off,
	    (unsigned long long)w->size_threshold,
	    (unsigned long long)w->calibrate_until, w->saved_bytes, w->n_comm);
	for (uint32_t i = 0; i < w->n_layers; i++) {
		const bellows_window_layer *l = &w->layers[i];

		out(f,
		    "  layer %u name=%s numel=%llu ndim=%u grad_norm=%.17g"
		    " grad_norm_rank0=%.17g grad_norm_mean=%.17g"
		    " sum_sq=%.17g abs_sum=%.17g max_abs=%.17g count=%llu"
		    " nonzero=%llu nonfinite=%llu"
		    " momentum_abs_mean=%.17g level=%.17g"
		    " error_bound=%.17g\n",
		    i, l->name, (unsigned long long)l->numel, l->ndim,
		    l->grad_norm, l->grad_norm_rank0, l->grad_norm_mean,
		    l->sum_sq, l->abs_sum, l->max_abs,
		    (unsigned long long)l->count,
		    (unsigned long long)l->nonzero,
		    (unsigned long long)l->nonfinite, l->momentum_abs_mean,
		    l->level, l->error_bound);
		out(f,
		    "   act_steps=%llu act_lbar=%.17g act_nonzero=%.17g"
		    " act_bytes=%.17g act_raw_bytes=%.17g"
		    " comm_raw_ms=%.17g comm_comp_ms=%.17g codec_ms=%.17g"
		    " comm_raw_n=%u comm_comp_n=%u\n",
		    (unsigned long long)l->act_steps, l->act_lbar,
		    l->act_nonzero, l->act_bytes, l->act_raw_bytes,
		    l->comm_raw_ms, l->comm_comp_ms, l->codec_ms, l->comm_raw_n,
		    l->comm_comp_n);
	}
	for (uint32_t i = 0; i < w->n_comm; i++) {
		const bellows_comm_sample *c = &w->comm[i];

		out(f,
		    "  comm rank=%u bytes=%llu ms=%.17g count=%u"
		    " compressed=%d\n",
		    c->rank, (unsigned long long)c->bytes, c->ms, c->count,
		    (int)c->compressed);
	}
	out_decision(f, "  in_force", in_force);
	return true;
}

static void
on_end(void *arg, void *ctx, uint64_t n_windows)
{
	fixture *f = ctx;

	assert_ptr_equal(arg, ctx);
	out(f, "end windows=%llu\n", (unsigned long long)n_windows);
}

static const ctl_store_recover_ops ops = { on_run, on_window, on_end };

/* ---- fixture ----------------------------------------------------------- */

static void
copy_file(const char *from, const char *to)
{
	FILE *in = fopen(from, "rb");
	FILE *o = fopen(to, "wb");
	char buf[65536];
	size_t n;

	if (in == NULL)
		fail_msg("cannot read %s", from);
	assert_non_null(o);
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		assert_int_equal(fwrite(buf, 1, n, o), n);
	assert_int_equal(fclose(in), 0);
	assert_int_equal(fclose(o), 0);
}

static int
setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	const char *root = getenv("BELLOWS_SOURCE_ROOT");

	if (f == NULL || root == NULL)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/bellows-fixture-XXXXXX");
	if (mkdtemp(f->dir) == NULL)
		return -1;
	snprintf(f->db, sizeof(f->db), "%s/history.db", f->dir);
	snprintf(f->src, sizeof(f->src), "%s/%s", root, FIXTURE);
	snprintf(f->expected, sizeof(f->expected), "%s/%s", root, EXPECTED);
	if ((f->zctx = zmq_ctx_new()) == NULL ||
	    ctl_events_new(&f->events) != 0)
		return -1;
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	fixture *f = *state;
	char cmd[160];

	ctl_store_close(&f->store, 2000);
	ctl_events_destroy(&f->events);
	zmq_ctx_term(f->zctx);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", f->dir);
	free(f->text);
	free(f);
	return 0;
}

/* Compares f->text with the expected file line by line, naming the first
 * line that differs; or writes the file when recording. */
static void
compare(fixture *f)
{
	FILE *fp;
	char *want;
	long n;
	size_t line = 1;

	if (getenv("BELLOWS_FIXTURE_RECORD") != NULL) {
		fp = fopen(f->expected, "w");
		assert_non_null(fp);
		assert_int_equal(fwrite(f->text, 1, f->len, fp), f->len);
		assert_int_equal(fclose(fp), 0);
		return;
	}
	fp = fopen(f->expected, "rb");
	if (fp == NULL)
		fail_msg("cannot read %s", f->expected);
	assert_int_equal(fseek(fp, 0, SEEK_END), 0);
	n = ftell(fp);
	assert_true(n >= 0);
	rewind(fp);
	want = calloc((size_t)n + 1, 1);
	assert_non_null(want);
	assert_int_equal(fread(want, 1, (size_t)n, fp), (size_t)n);
	fclose(fp);
	for (size_t i = 0; i < f->len || i < (size_t)n; i++) {
		char a = i < f->len ? f->text[i] : '\0';
		char b = i < (size_t)n ? want[i] : '\0';

		if (a != b) {
			const char *ga = f->text + i, *gb = want + i;

			while (ga > f->text && ga[-1] != '\n')
				ga--;
			while (gb > want && gb[-1] != '\n')
				gb--;
			fail_msg("line %zu differs:\nread back: %.300s\n"
				 "expected:  %.300s",
			    line, ga, gb);
		}
		if (a == '\n')
			line++;
	}
	free(want);
}

static void
open_fixture(fixture *f)
{
	ctl_store_conf conf = { 0 };
	char err[CTL_CONFIG_ERR_MAX];
	ctl_config *cfg = NULL;
	char yaml[1100];

	snprintf(yaml, sizeof(yaml), "%s/tests/fixtures/history-v5.yaml",
	    getenv("BELLOWS_SOURCE_ROOT"));
	if (ctl_config_load(yaml, &cfg, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	conf = cfg->store;
	ctl_config_destroy(&cfg);
	copy_file(f->src, f->db);
	assert_int_equal(ctl_store_open(f->db, f->zctx, &conf, 0x42, f->events,
			     &f->store),
	    0);
}

/* ---- tests ------------------------------------------------------------- */

static void
test_store_fixture_recovers_what_the_code_that_wrote_it_recovered(void **state)
{
	fixture *f = *state;
	com_status_reply st = { 0 };

	open_fixture(f);
	assert_int_equal(ctl_store_status(f->store, &st), 0);
	assert_false(st.store_degraded);
	free(st.store_error);
	out(f, "# ctl_store_recover: the live runs\n");
	assert_int_equal(ctl_store_recover(f->store, 64, &ops, f), 1);
	out(f, "# ctl_store_load_run: job mix, every window\n");
	assert_int_equal(ctl_store_load_run(f->store, 0, "mix", UINT64_MAX, 64,
			     &ops, f),
	    0);
	out(f, "# ctl_store_load_run: run 1 below window 5\n");
	assert_int_equal(ctl_store_load_run(f->store, 1, NULL, 5, 64, &ops, f),
	    0);
	compare(f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
		    test_store_fixture_recovers_what_the_code_that_wrote_it_recovered,
		    setup, teardown),
	};

	ctl_log_set_level(CTL_LOG_ERROR);
	return cmocka_run_group_tests_name("store fixture", tests, NULL, NULL);
}
