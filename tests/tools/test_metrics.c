/* test_metrics - the recorded metrics reader of `bellows replay`: what a
 * well-formed file gives, and every kind of malformed file refused with
 * its line and the exact message.
 *
 * Files are written to anonymous temporary files (tmpfile) and read back
 * with tool_metrics_read, named "m.csv" in messages.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <bellows/error.h>

#include "client/metrics.h"

/* Reads `text` (len bytes) as file m.csv. Returns the reader's code; the
 * message goes to err. */
static int
read_text_len(const char *text, size_t len, tool_metrics **ret, char *err,
    size_t errlen)
{
	FILE *f = tmpfile();
	int r;

	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, len, f), len);
	rewind(f);
	r = tool_metrics_read(f, "m.csv", ret, err, errlen);
	fclose(f);
	return r;
}

static int
read_text(const char *text, tool_metrics **ret, char *err, size_t errlen)
{
	return read_text_len(text, strlen(text), ret, err, errlen);
}

/* Asserts that `text` is refused with `code` and exactly `message`. */
static void
expect_refused(const char *text, int code, const char *message)
{
	char err[TOOL_METRICS_ERR_MAX];
	tool_metrics *m = NULL;

	assert_int_equal(read_text(text, &m, err, sizeof(err)), code);
	assert_null(m);
	assert_string_equal(err, message);
}

/* ---- well-formed files ------------------------------------------------- */

static void
test_metrics_reads_windows_layers_norms_and_lrs(void **state)
{
	char err[TOOL_METRICS_ERR_MAX];
	tool_metrics *m = NULL;

	assert_int_equal(
	    read_text("window,layer,grad_norm,lr,numel,shape\n"
		      "0,fc.weight,10,0.1,640,10x64\n"
		      "0,fc.bias,0.5,0.1,10,10\n"
		      "1,fc.weight,4,0.1,640,10x64\n"
		      "1,fc.bias,0.25,0.1,10,10\n"
		      "5,fc.weight,3.9,0.010000000000000002,640,"
		      "10x64\n"
		      "5,fc.bias,1e-3,0.010000000000000002,10,10\n",
		&m, err, sizeof(err)),
	    0);
	assert_string_equal(err, "");
	assert_int_equal(m->n_layers, 2);
	assert_string_equal(m->layers[0].name, "fc.weight");
	assert_int_equal(m->layers[0].numel, 640);
	assert_int_equal(m->layers[0].ndim, 2);
	assert_int_equal(m->layers[0].shape[0], 10);
	assert_int_equal(m->layers[0].shape[1], 64);
	assert_string_equal(m->layers[1].name, "fc.bias");
	assert_int_equal(m->layers[1].ndim, 1);
	assert_int_equal(m->layers[1].numel, 10);
	assert_int_equal(m->n_unshaped, 0);
	/* Windows 2 to 4 are skipped: allowed. */
	assert_int_equal(m->n_windows, 3);
	assert_int_equal(m->window[0], 0);
	assert_int_equal(m->window[1], 1);
	assert_int_equal(m->window[2], 5);
	assert_true(m->lr[0] == 0.1);
	assert_true(m->lr[2] == 0.1 * 0.1);
	assert_true(m->grad_norm[0] == 10);
	assert_true(m->grad_norm[1] == 0.5);
	assert_true(m->grad_norm[2] == 4);
	assert_true(m->grad_norm[3] == 0.25);
	assert_true(m->grad_norm[4] == 3.9);
	assert_true(m->grad_norm[5] == 1e-3);
	tool_metrics_destroy(&m);
	assert_null(m);
	tool_metrics_destroy(&m);
}

static void
test_metrics_takes_columns_in_any_order_and_rows_in_any_layer_order(
    void **state)
{
	char err[TOOL_METRICS_ERR_MAX];
	tool_metrics *m = NULL;

	assert_int_equal(read_text("lr,grad_norm,layer,window\n"
				   "0.1,1,a,0\n"
				   "0.1,2,b,0\n"
				   "0.1,4,b,1\n"
				   "0.1,3,a,1\n",
			     &m, err, sizeof(err)),
	    0);
	assert_int_equal(m->n_layers, 2);
	assert_string_equal(m->layers[0].name, "a");
	/* The first window's order is the table's. */
	assert_true(m->grad_norm[2] == 3);
	assert_true(m->grad_norm[3] == 4);
	tool_metrics_destroy(&m);
}

static void
test_metrics_without_shapes_takes_layers_as_2d_of_unknown_size(void **state)
{
	char err[TOOL_METRICS_ERR_MAX];
	tool_metrics *m = NULL;

	assert_int_equal(read_text("window,layer,grad_norm,lr\n"
				   "0,a,1,0.1\n"
				   "0,b,2,0.1\n",
			     &m, err, sizeof(err)),
	    0);
	assert_int_equal(m->n_unshaped, 2);
	assert_int_equal(m->layers[0].ndim, 2);
	assert_int_equal(m->layers[0].numel, 0);
	assert_int_equal(m->layers[0].shape[0], 0);
	tool_metrics_destroy(&m);
}

static void
test_metrics_numel_alone_keeps_2d_and_shape_alone_gives_numel(void **state)
{
	char err[TOOL_METRICS_ERR_MAX];
	tool_metrics *m = NULL;

	assert_int_equal(read_text("window,layer,grad_norm,lr,numel,shape\n"
				   "0,a,1,0.1,100,\n"
				   "0,b,2,0.1,,3x4x5\n",
			     &m, err, sizeof(err)),
	    0);
	assert_int_equal(m->n_unshaped, 1);
	assert_int_equal(m->layers[0].numel, 100);
	assert_int_equal(m->layers[0].ndim, 2);
	assert_int_equal(m->layers[1].numel, 60);
	assert_int_equal(m->layers[1].ndim, 3);
	assert_int_equal(m->layers[1].shape[2], 5);
	tool_metrics_destroy(&m);
}

static void
test_metrics_reads_quotes_blanks_crlf_bom_and_empty_lines(void **state)
{
	char err[TOOL_METRICS_ERR_MAX];
	tool_metrics *m = NULL;

	assert_int_equal(read_text("\xef\xbb\xbf"
				   "window , layer,grad_norm,\"lr\"\r\n"
				   "\r\n"
				   "0, \"a,b\" ,1,0.1\r\n"
				   "0,\"say \"\"hi\"\"\",2,0.1\r\n"
				   "\n"
				   "1,\"a,b\",3,0.1\r\n"
				   "1,\"say \"\"hi\"\"\",4,0.1",
			     &m, err, sizeof(err)),
	    0);
	assert_int_equal(m->n_layers, 2);
	assert_string_equal(m->layers[0].name, "a,b");
	assert_string_equal(m->layers[1].name, "say \"hi\"");
	assert_int_equal(m->n_windows, 2);
	assert_true(m->grad_norm[3] == 4);
	tool_metrics_destroy(&m);
}

static void
test_metrics_finds_layers_listed_in_another_order_each_window(void **state)
{
	char text[64 * 40 + 64], err[TOOL_METRICS_ERR_MAX];
	tool_metrics *m = NULL;
	size_t used = 0;

	/* Enough layers that the name hash grows while the table does. */
	used += (size_t)snprintf(text + used, sizeof(text) - used,
	    "window,layer,grad_norm,lr\n");
	for (int w = 0; w < 2; w++) {
		for (int i = 0; i < 32; i++) {
			int l = w == 0 ? i : 31 - i;

			used += (size_t)snprintf(text + used,
			    sizeof(text) - used, "%d,l%d,%d,1\n", w, l,
			    100 * w + l);
		}
	}
	assert_int_equal(read_text(text, &m, err, sizeof(err)), 0);
	assert_int_equal(m->n_layers, 32);
	for (int l = 0; l < 32; l++) {
		assert_true(m->grad_norm[l] == l);
		assert_true(m->grad_norm[32 + l] == 100 + l);
	}
	tool_metrics_destroy(&m);
}

/* ---- malformed files --------------------------------------------------- */

static void
test_metrics_refuses_an_empty_file(void **state)
{
	char err[TOOL_METRICS_ERR_MAX];
	tool_metrics *m = NULL;

	assert_int_equal(read_text_len("", 0, &m, err, sizeof(err)),
	    BELLOWS_EINVAL);
	assert_null(m);
	assert_string_equal(err,
	    "m.csv:1: no header: expected columns window, layer, grad_norm, "
	    "lr");
}

static void
test_metrics_refuses_a_header_without_rows(void **state)
{
	expect_refused("\nwindow,layer,grad_norm,lr\n\n", BELLOWS_EINVAL,
	    "m.csv:2: no rows after the header");
}

static void
test_metrics_refuses_a_missing_column(void **state)
{
	expect_refused("window,layer,grad_norm\n0,a,1\n", BELLOWS_EINVAL,
	    "m.csv:1: missing column 'lr' (the header needs window, layer, "
	    "grad_norm and lr)");
}

static void
test_metrics_refuses_an_unknown_or_repeated_column(void **state)
{
	expect_refused("window,layer,grad_nrom,grad_norm,lr\n", BELLOWS_EINVAL,
	    "m.csv:1: unknown column 'grad_nrom' (columns: window, layer, "
	    "grad_norm, lr, and optionally numel, shape)");
	expect_refused("window,layer,lr,grad_norm,lr\n", BELLOWS_EINVAL,
	    "m.csv:1: column 'lr' appears twice");
}

static void
test_metrics_refuses_a_row_with_another_number_of_fields(void **state)
{
	expect_refused("window,layer,grad_norm,lr\n0,a,1,0.1\n0,b,1\n",
	    BELLOWS_EINVAL, "m.csv:3: 3 fields, the header has 4");
}

static void
test_metrics_refuses_non_numeric_values(void **state)
{
	expect_refused("window,layer,grad_norm,lr\n0,a,abc,0.1\n",
	    BELLOWS_EINVAL, "m.csv:2: grad_norm: 'abc' is not a number");
	expect_refused("window,layer,grad_norm,lr\n0,a,1,0.1x\n",
	    BELLOWS_EINVAL, "m.csv:2: lr: '0.1x' is not a number");
	expect_refused("window,layer,grad_norm,lr\n0,a,,0.1\n", BELLOWS_EINVAL,
	    "m.csv:2: grad_norm is empty");
	expect_refused("window,layer,grad_norm,lr\n0,a,1,0.1\n1.5,a,1,0.1\n",
	    BELLOWS_EINVAL,
	    "m.csv:3: window: '1.5' is not a window index (an integer >= 0)");
	expect_refused("window,layer,grad_norm,lr\n-1,a,1,0.1\n",
	    BELLOWS_EINVAL,
	    "m.csv:2: window: '-1' is not a window index (an integer >= 0)");
}

static void
test_metrics_refuses_non_finite_values(void **state)
{
	expect_refused("window,layer,grad_norm,lr\n0,a,1,0.1\n0,b,nan,0.1\n",
	    BELLOWS_EINVAL, "m.csv:3: grad_norm must be finite, not 'nan'");
	expect_refused("window,layer,grad_norm,lr\n0,a,1,inf\n", BELLOWS_EINVAL,
	    "m.csv:2: lr must be finite, not 'inf'");
	expect_refused("window,layer,grad_norm,lr\n0,a,1e999,0.1\n",
	    BELLOWS_EINVAL, "m.csv:2: grad_norm must be finite, not '1e999'");
}

static void
test_metrics_refuses_negative_norms_and_lrs(void **state)
{
	expect_refused("window,layer,grad_norm,lr\n0,a,-0.5,0.1\n",
	    BELLOWS_EINVAL, "m.csv:2: grad_norm must be >= 0, not '-0.5'");
	expect_refused("window,layer,grad_norm,lr\n0,a,1,-1e-3\n",
	    BELLOWS_EINVAL, "m.csv:2: lr must be >= 0, not '-1e-3'");
}

static void
test_metrics_refuses_windows_out_of_order(void **state)
{
	expect_refused("window,layer,grad_norm,lr\n"
		       "0,a,1,0.1\n"
		       "2,a,1,0.1\n"
		       "1,a,1,0.1\n",
	    BELLOWS_EINVAL,
	    "m.csv:4: window 1 after window 2: rows must be grouped by "
	    "window in increasing order");
	/* A window that comes back after another is out of order too. */
	expect_refused("window,layer,grad_norm,lr\n"
		       "0,a,1,0.1\n"
		       "1,a,1,0.1\n"
		       "0,a,1,0.1\n",
	    BELLOWS_EINVAL,
	    "m.csv:4: window 0 after window 1: rows must be grouped by "
	    "window in increasing order");
}

static void
test_metrics_refuses_a_window_that_lacks_a_layer(void **state)
{
	/* Reported at the first line of the window that lacks it. */
	expect_refused("window,layer,grad_norm,lr\n"
		       "0,a,1,0.1\n"
		       "0,b,1,0.1\n"
		       "0,c,1,0.1\n"
		       "1,a,1,0.1\n"
		       "1,c,1,0.1\n"
		       "2,a,1,0.1\n",
	    BELLOWS_EINVAL, "m.csv:5: window 1 lacks layer 'b'");
	/* The last window too. */
	expect_refused("window,layer,grad_norm,lr\n"
		       "0,a,1,0.1\n"
		       "0,b,1,0.1\n"
		       "3,b,1,0.1\n",
	    BELLOWS_EINVAL, "m.csv:4: window 3 lacks layer 'a'");
}

static void
test_metrics_refuses_a_layer_that_appears_after_the_first_window(void **state)
{
	expect_refused("window,layer,grad_norm,lr\n"
		       "0,a,1,0.1\n"
		       "1,a,1,0.1\n"
		       "1,z,1,0.1\n",
	    BELLOWS_EINVAL,
	    "m.csv:4: layer 'z' is not in the table of window 0 (the first "
	    "window fixes the layers)");
}

static void
test_metrics_refuses_a_layer_twice_in_a_window(void **state)
{
	expect_refused("window,layer,grad_norm,lr\n"
		       "0,a,1,0.1\n"
		       "0,a,2,0.1\n",
	    BELLOWS_EINVAL, "m.csv:3: layer 'a' appears twice in window 0");
	expect_refused("window,layer,grad_norm,lr\n"
		       "0,a,1,0.1\n"
		       "0,b,1,0.1\n"
		       "4,b,1,0.1\n"
		       "4,b,1,0.1\n",
	    BELLOWS_EINVAL, "m.csv:5: layer 'b' appears twice in window 4");
}

static void
test_metrics_refuses_two_lrs_in_one_window(void **state)
{
	expect_refused("window,layer,grad_norm,lr\n"
		       "0,a,1,0.1\n"
		       "0,b,1,0.01\n",
	    BELLOWS_EINVAL,
	    "m.csv:3: lr 0.01 differs from 0.10000000000000001 on line 2, "
	    "the first row of window 0");
}

static void
test_metrics_refuses_bad_sizes(void **state)
{
	expect_refused("window,layer,grad_norm,lr,numel,shape\n"
		       "0,a,1,0.1,100,10x11\n",
	    BELLOWS_EINVAL,
	    "m.csv:2: shape 10x11 has 110 elements, numel "
	    "says 100");
	expect_refused("window,layer,grad_norm,lr,shape\n0,a,1,0.1,64xx32\n",
	    BELLOWS_EINVAL,
	    "m.csv:2: shape: '64xx32' is not a shape like 64x32 (dimensions "
	    ">= 1 joined by x)");
	expect_refused("window,layer,grad_norm,lr,shape\n0,a,1,0.1,0x3\n",
	    BELLOWS_EINVAL,
	    "m.csv:2: shape: '0x3' is not a shape like 64x32 (dimensions "
	    ">= 1 joined by x)");
	expect_refused("window,layer,grad_norm,lr,shape\n"
		       "0,a,1,0.1,1x1x1x1x1x1x1x1x1\n",
	    BELLOWS_EINVAL,
	    "m.csv:2: shape '1x1x1x1x1x1x1x1x1' has more than 8 dimensions");
	expect_refused("window,layer,grad_norm,lr,numel\n0,a,1,0.1,0\n",
	    BELLOWS_EINVAL,
	    "m.csv:2: numel: '0' is not a count (an integer >= 1)");
	expect_refused("window,layer,grad_norm,lr,numel\n"
		       "0,a,1,0.1,10\n"
		       "1,a,1,0.1,12\n",
	    BELLOWS_EINVAL,
	    "m.csv:3: layer 'a' has another numel or shape than in window 0");
}

static void
test_metrics_refuses_bad_quoting_and_names(void **state)
{
	expect_refused("window,layer,grad_norm,lr\n0,\"a,1,0.1\n",
	    BELLOWS_EINVAL, "m.csv:2: field 2: unterminated quoted field");
	expect_refused("window,layer,grad_norm,lr\n0,\"a\"b,1,0.1\n",
	    BELLOWS_EINVAL, "m.csv:2: field 2: text after a quoted field");
	expect_refused("window,layer,grad_norm,lr\n0,a\"b,1,0.1\n",
	    BELLOWS_EINVAL,
	    "m.csv:2: field 2: a quote inside an unquoted "
	    "field");
	expect_refused("window,layer,grad_norm,lr\n0,,1,0.1\n", BELLOWS_EINVAL,
	    "m.csv:2: layer name is empty");
	expect_refused("window,layer,grad_norm,lr\n0,a\tb,1,0.1\n",
	    BELLOWS_EINVAL, "m.csv:2: layer name contains control characters");
}

static void
test_metrics_refuses_a_nul_byte(void **state)
{
	static const char text[] = "window,layer,grad_norm,lr\n0,a\0b,1,0.1\n";
	char err[TOOL_METRICS_ERR_MAX];
	tool_metrics *m = NULL;

	assert_int_equal(read_text_len(text, sizeof(text) - 1, &m, err,
			     sizeof(err)),
	    BELLOWS_EINVAL);
	assert_string_equal(err, "m.csv:2: the line contains a NUL byte");
}

static void
test_metrics_refuses_a_line_longer_than_the_limit_naming_it(void **state)
{
	size_t cap = TOOL_METRICS_LINE_MAX + 256, used;
	char *text = malloc(cap), err[TOOL_METRICS_ERR_MAX];
	tool_metrics *m = NULL;

	assert_non_null(text);
	used = (size_t)snprintf(text, cap, "window,layer,grad_norm,lr\n0,");
	memset(text + used, 'a', TOOL_METRICS_LINE_MAX);
	used += TOOL_METRICS_LINE_MAX;
	used += (size_t)snprintf(text + used, cap - used, ",1,1\n");
	assert_int_equal(read_text_len(text, used, &m, err, sizeof(err)),
	    BELLOWS_ELIMIT);
	assert_null(m);
	assert_string_equal(err,
	    "m.csv:2: the line is longer than 65536 bytes");
	free(text);
}

static void
test_metrics_reads_dev_zero_to_one_line_and_refuses_it(void **state)
{
	char err[TOOL_METRICS_ERR_MAX];
	tool_metrics *m = NULL;

	assert_int_equal(tool_metrics_load("/dev/zero", &m, err, sizeof(err)),
	    BELLOWS_ELIMIT);
	assert_null(m);
	assert_string_equal(err,
	    "/dev/zero:1: the line is longer than 65536 bytes");
}

static void
test_metrics_refuses_a_file_larger_than_its_limit_naming_the_line(void **state)
{
	static const char text[] = "window,layer,grad_norm,lr\n"
				   "0,a,1,0.1\n"
				   "1,a,1,0.1\n";
	char err[TOOL_METRICS_ERR_MAX];
	tool_metrics *m = NULL;
	FILE *f = tmpfile();

	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, sizeof(text) - 1, f),
	    sizeof(text) - 1);
	rewind(f);
	/* 36 bytes end in the middle of line 3. */
	assert_int_equal(tool_metrics_read_max(f, "m.csv", 40, &m, err,
			     sizeof(err)),
	    BELLOWS_ELIMIT);
	assert_null(m);
	assert_string_equal(err,
	    "m.csv:3: the file is larger than 40 bytes, the most a metrics "
	    "file may hold");
	rewind(f);
	assert_int_equal(tool_metrics_read_max(f, "m.csv", sizeof(text) - 1, &m,
			     err, sizeof(err)),
	    0);
	assert_non_null(m);
	assert_int_equal(m->n_windows, 2);
	tool_metrics_destroy(&m);
	fclose(f);
}

static void
test_metrics_refuses_more_layers_than_an_agent_may_have(void **state)
{
	size_t cap = (size_t)(TOOL_METRICS_MAX_LAYERS + 1) * 24 + 64, used;
	char *text = malloc(cap), err[TOOL_METRICS_ERR_MAX];
	tool_metrics *m = NULL;

	assert_non_null(text);
	used = (size_t)snprintf(text, cap, "window,layer,grad_norm,lr\n");
	for (int l = 0; l <= TOOL_METRICS_MAX_LAYERS; l++)
		used += (size_t)snprintf(text + used, cap - used, "0,l%d,1,1\n",
		    l);
	assert_int_equal(read_text_len(text, used, &m, err, sizeof(err)),
	    BELLOWS_ELIMIT);
	assert_null(m);
	assert_string_equal(err, "m.csv:65538: more than 65536 layers");
	free(text);
}

static void
test_metrics_load_names_a_file_it_cannot_open(void **state)
{
	char err[TOOL_METRICS_ERR_MAX];
	tool_metrics *m = NULL;

	assert_int_equal(tool_metrics_load("/nonexistent/m.csv", &m, err,
			     sizeof(err)),
	    BELLOWS_EIO);
	assert_null(m);
	assert_string_equal(err,
	    "/nonexistent/m.csv: No such file or directory");
}

/* ---- writing ----------------------------------------------------------- */

static void
test_metrics_quotes_only_fields_that_need_it_and_reads_them_back(void **state)
{
	static const char *const names[] = { "layer1.weight", "a,b",
		"say \"hi\"", " lead", "" };
	char *buf = NULL, err[TOOL_METRICS_ERR_MAX], shape[32];
	size_t len = 0;
	tool_metrics *m = NULL;
	FILE *f = open_memstream(&buf, &len);
	const uint32_t dims[3] = { 64, 3, 7 };

	assert_non_null(f);
	for (size_t i = 0; i < 5; i++) {
		assert_int_equal(tool_metrics_put_field(f, names[i]), 0);
		fputc('\n', f);
	}
	fclose(f);
	assert_string_equal(buf,
	    "layer1.weight\n\"a,b\"\n\"say \"\"hi\"\"\"\n"
	    "\" lead\"\n\n");
	free(buf);

	tool_metrics_shape_text(dims, 3, shape, sizeof(shape));
	assert_string_equal(shape, "64x3x7");
	tool_metrics_shape_text(dims, 0, shape, sizeof(shape));
	assert_string_equal(shape, "");
	tool_metrics_shape_text(dims, 3, shape, 4);
	assert_string_equal(shape, "64x");

	assert_int_equal(read_text("window,layer,grad_norm,lr\n"
				   "0,\" lead\",1,1\n",
			     &m, err, sizeof(err)),
	    0);
	assert_string_equal(m->layers[0].name, " lead");
	tool_metrics_destroy(&m);
}

static void
test_number_text_is_the_shortest_that_reads_back_exactly(void **state)
{
	static const struct {
		double v;
		const char *text;
	} cases[] = {
		{ 0.4, "0.4" },
		{ 256.0 / 640.0, "0.4" },
		{ 4, "4" },
		{ 0.1 + 0.2, "0.30000000000000004" }, /* needs 17 */
		{ 1.0 / 3.0, "0.3333333333333333" },  /* 16 */
		{ 1e-300, "1e-300" },
		{ -2.5, "-2.5" },
	};
	char buf[TOOL_NUMBER_TEXT_MAX];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tool_metrics_number_text(cases[i].v, buf, sizeof(buf));
		assert_string_equal(buf, cases[i].text);
		assert_true(strtod(buf, NULL) == cases[i].v);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_number_text_is_the_shortest_that_reads_back_exactly),
		cmocka_unit_test(
		    test_metrics_reads_windows_layers_norms_and_lrs),
		cmocka_unit_test(
		    test_metrics_takes_columns_in_any_order_and_rows_in_any_layer_order),
		cmocka_unit_test(
		    test_metrics_without_shapes_takes_layers_as_2d_of_unknown_size),
		cmocka_unit_test(
		    test_metrics_numel_alone_keeps_2d_and_shape_alone_gives_numel),
		cmocka_unit_test(
		    test_metrics_reads_quotes_blanks_crlf_bom_and_empty_lines),
		cmocka_unit_test(
		    test_metrics_finds_layers_listed_in_another_order_each_window),
		cmocka_unit_test(test_metrics_refuses_an_empty_file),
		cmocka_unit_test(test_metrics_refuses_a_header_without_rows),
		cmocka_unit_test(test_metrics_refuses_a_missing_column),
		cmocka_unit_test(
		    test_metrics_refuses_an_unknown_or_repeated_column),
		cmocka_unit_test(
		    test_metrics_refuses_a_row_with_another_number_of_fields),
		cmocka_unit_test(test_metrics_refuses_non_numeric_values),
		cmocka_unit_test(test_metrics_refuses_non_finite_values),
		cmocka_unit_test(test_metrics_refuses_negative_norms_and_lrs),
		cmocka_unit_test(test_metrics_refuses_windows_out_of_order),
		cmocka_unit_test(
		    test_metrics_refuses_a_window_that_lacks_a_layer),
		cmocka_unit_test(
		    test_metrics_refuses_a_layer_that_appears_after_the_first_window),
		cmocka_unit_test(
		    test_metrics_refuses_a_layer_twice_in_a_window),
		cmocka_unit_test(test_metrics_refuses_two_lrs_in_one_window),
		cmocka_unit_test(test_metrics_refuses_bad_sizes),
		cmocka_unit_test(test_metrics_refuses_bad_quoting_and_names),
		cmocka_unit_test(test_metrics_refuses_a_nul_byte),
		cmocka_unit_test(
		    test_metrics_refuses_a_line_longer_than_the_limit_naming_it),
		cmocka_unit_test(
		    test_metrics_reads_dev_zero_to_one_line_and_refuses_it),
		cmocka_unit_test(
		    test_metrics_refuses_a_file_larger_than_its_limit_naming_the_line),
		cmocka_unit_test(
		    test_metrics_refuses_more_layers_than_an_agent_may_have),
		cmocka_unit_test(test_metrics_load_names_a_file_it_cannot_open),
		cmocka_unit_test(
		    test_metrics_quotes_only_fields_that_need_it_and_reads_them_back),
	};

	return cmocka_run_group_tests_name("metrics", tests, NULL, NULL);
}
