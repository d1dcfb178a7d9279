/* codec_cli - `bellows codec`, see codec_cli.h.
 *
 * Every file is read whole into memory, the work is done there, and the
 * output is written to OUT.tmp then renamed, so a failure leaves OUT as it
 * was. Errors in a table or block are the library's messages, which name
 * the byte offset.
 */
#include "codec_cli.h"

#include "common/args.h"
#include "common/suggest.h"

#include <bellows/codec.h>
#include <bellows/error.h>

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct codec_opts {
	const char *codec; /* --codec, "gcomp" */
	const char *table; /* --table FILE */
	uint32_t max_bits; /* --max-code-bits */
	uint32_t level;    /* --level */
	uint32_t version;  /* --table-version */
} codec_opts;

static const codec_opts codec_defaults = {
	.codec = "gcomp",
	.max_bits = 8,
	.level = 0,
	.version = 1,
};

/* The rows more than one action takes. */
#define CODEC_OPT_CODEC                                                        \
	{                                                                      \
		.name = "codec", .arg = "NAME",                                \
		.help = "the codec: gcomp (the only one so far)",              \
		.kind = COM_OPT_NAME, .at = offsetof(codec_opts, codec),       \
		.min = 1, .max = 64                                            \
	}
#define CODEC_OPT_TABLE                                                        \
	{                                                                      \
		.name = "table", .arg = "FILE",                                \
		.help = "the exponent table, as `bellows codec table` "        \
			"writes it",                                           \
		.kind = COM_OPT_TEXT, .at = offsetof(codec_opts, table),       \
		.min = 1                                                       \
	}

static const com_opt codec_table_rows[] = {
	CODEC_OPT_CODEC,
	{ .name = "max-code-bits",
	    .arg = "N",
	    .help = "longest code; longer ones are escaped (default 8)",
	    .kind = COM_OPT_U32,
	    .at = offsetof(codec_opts, max_bits),
	    .min = 1,
	    .max = BELLOWS_GCOMP_MAX_BITS },
	{ .name = "table-version",
	    .arg = "N",
	    .help = "the version written in the table (default 1)",
	    .kind = COM_OPT_U32,
	    .at = offsetof(codec_opts, version),
	    .min = 0,
	    .max = UINT32_MAX },
};

static const com_opt codec_encode_rows[] = {
	CODEC_OPT_CODEC,
	CODEC_OPT_TABLE,
	{ .name = "level",
	    .arg = "L",
	    .help = "truncation level of every value: 0 (lossless), 1, 2 "
		    "or 3 (6, 12, 18 mantissa bits dropped; default 0)",
	    .kind = COM_OPT_U32,
	    .at = offsetof(codec_opts, level),
	    .min = 0,
	    .max = 3 },
};

static const com_opt codec_decode_rows[] = {
	CODEC_OPT_CODEC,
	CODEC_OPT_TABLE,
};

#define CODEC_CMD(nm, rows, ops)                                               \
	{                                                                      \
		.name = nm, .operands = ops, .opts = rows,                     \
		.n_opts = sizeof(rows) / sizeof(rows[0]),                      \
		.usage = tool_codec_usage                                      \
	}

static const com_args_cmd codec_cmd_table = CODEC_CMD("codec table",
    codec_table_rows, 4096);
static const com_args_cmd codec_cmd_encode = CODEC_CMD("codec encode",
    codec_encode_rows, 2);
static const com_args_cmd codec_cmd_decode = CODEC_CMD("codec decode",
    codec_decode_rows, 2);
static const com_args_cmd codec_cmd_stats = CODEC_CMD("codec stats",
    codec_encode_rows, 1);

void
tool_codec_usage(FILE *f)
{
	fputs("usage: bellows codec table --codec gcomp [--max-code-bits N] "
	      "IN.f32... > TABLE\n"
	      "       bellows codec encode --codec gcomp --table TABLE "
	      "[--level 0-3] IN.f32 OUT\n"
	      "       bellows codec decode --table TABLE IN OUT.f32\n"
	      "       bellows codec stats --table TABLE [--level 0-3] "
	      "IN.f32\n"
	      "\n"
	      "  Tries GComp (docs/codecs.md#gcomp) on dumped tensors; a "
	      ".f32\n"
	      "  file is raw little-endian float32. `table` builds the\n"
	      "  exponent table of the files' values (the builder bellowsd's\n"
	      "  gcomp policy runs) and writes it to stdout; `encode` and\n"
	      "  `decode` turn a file into a block and back; `stats` prints\n"
	      "  bits per exponent and mantissa and the ratio. Exits 0 when\n"
	      "  done, 1 when a file cannot be read or is malformed (said\n"
	      "  with its byte offset), 2 on a usage error.\n"
	      "\n",
	    f);
	com_args_help(f, &codec_cmd_table, NULL);
	com_args_help(f, &codec_cmd_encode, NULL);
}

/* Reads the whole file at path into a malloc'd *ret_buf. Returns 0, or 1
 * after saying why. */
static int
codec_read(const char *cmd, const char *path, uint8_t **ret_buf,
    size_t *ret_len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0, got;

	if (f == NULL) {
		fprintf(stderr, "bellows %s: %s: %s\n", cmd, path,
		    strerror(errno));
		return 1;
	}
	do {
		if (len == cap) {
			uint8_t *nb;

			cap = cap ? 2 * cap : 1 << 16;
			if ((nb = realloc(buf, cap)) == NULL) {
				fprintf(stderr,
				    "bellows %s: %s: out of memory\n", cmd,
				    path);
				free(buf);
				fclose(f);
				return 1;
			}
			buf = nb;
		}
		got = fread(buf + len, 1, cap - len, f);
		len += got;
	} while (got > 0);
	if (ferror(f)) {
		fprintf(stderr, "bellows %s: %s: read error\n", cmd, path);
		free(buf);
		fclose(f);
		return 1;
	}
	fclose(f);
	*ret_buf = buf;
	*ret_len = len;
	return 0;
}

/* Reads a .f32 file. Returns 0, or 1 after saying why. */
static int
codec_read_f32(const char *cmd, const char *path, float **ret, uint64_t *ret_n)
{
	uint8_t *buf;
	size_t len;

	if (codec_read(cmd, path, &buf, &len) != 0)
		return 1;
	if (len % 4 != 0) {
		fprintf(stderr,
		    "bellows %s: %s: %zu bytes is not a whole number of "
		    "float32 values (byte %zu)\n",
		    cmd, path, len, len - len % 4);
		free(buf);
		return 1;
	}
	*ret = (float *)buf;
	*ret_n = len / 4;
	return 0;
}

static int
codec_read_table(const char *cmd, const char *path, bellows_gcomp_table **ret)
{
	uint8_t *buf;
	size_t len;
	char err[256];
	int rc;

	if (codec_read(cmd, path, &buf, &len) != 0)
		return 1;
	rc = bellows_gcomp_table_read(buf, len, ret, err, sizeof(err));
	free(buf);
	if (rc < 0) {
		fprintf(stderr, "bellows %s: %s: %s\n", cmd, path, err);
		return 1;
	}
	if (len != BELLOWS_GCOMP_TABLE_BYTES) {
		fprintf(stderr,
		    "bellows %s: %s: byte %d: %zu bytes after the table\n", cmd,
		    path, BELLOWS_GCOMP_TABLE_BYTES,
		    len - BELLOWS_GCOMP_TABLE_BYTES);
		bellows_gcomp_table_destroy(ret);
		return 1;
	}
	return 0;
}

/* Writes len bytes to path through path.tmp and a rename. Returns 0, or
 * 1 after saying why. */
static int
codec_write(const char *cmd, const char *path, const void *buf, size_t len)
{
	size_t pl = strlen(path) + 5;
	char *tmp = malloc(pl);
	FILE *f;
	bool bad;

	if (tmp == NULL) {
		fprintf(stderr, "bellows %s: out of memory\n", cmd);
		return 1;
	}
	snprintf(tmp, pl, "%s.tmp", path);
	if ((f = fopen(tmp, "wb")) == NULL) {
		fprintf(stderr, "bellows %s: %s: %s\n", cmd, tmp,
		    strerror(errno));
		free(tmp);
		return 1;
	}
	bad = fwrite(buf, 1, len, f) != len;
	bad = fclose(f) != 0 || bad;
	if (bad || rename(tmp, path) != 0) {
		fprintf(stderr, "bellows %s: %s: cannot write\n", cmd, path);
		unlink(tmp);
		free(tmp);
		return 1;
	}
	free(tmp);
	return 0;
}

/* Parses argv into *o; the operands are argv[*ret_next..argc), exactly
 * `want` of them (at least 1 when want < 0). Returns -1 to go on, else the
 * exit code. */
static int
codec_parse(const com_args_cmd *cmd, int argc, char **argv, codec_opts *o,
    int want, int *ret_next)
{
	int next, rc, have;

	*o = codec_defaults;
	if ((rc = com_args_parse(cmd, argc, argv, o, &next)) >= 0)
		return rc;
	if (strcmp(o->codec, "gcomp") != 0) {
		fprintf(stderr, "bellows %s: --codec must be gcomp, not '%s'\n",
		    cmd->name, o->codec);
		return 2;
	}
	have = argc - next;
	if ((want >= 0 && have != want) || (want < 0 && have < 1)) {
		fprintf(stderr, "bellows %s: %s\n", cmd->name,
		    want == 2  ? "needs IN and OUT"
			: want ? "needs one IN file"
			       : "needs IN files");
		tool_codec_usage(stderr);
		return 2;
	}
	if (cmd != &codec_cmd_table && o->table == NULL) {
		fprintf(stderr, "bellows %s: --table FILE is required\n",
		    cmd->name);
		return 2;
	}
	*ret_next = next;
	return -1;
}

static int
codec_table(int argc, char **argv)
{
	uint64_t hist[256] = { 0 };
	uint8_t out[BELLOWS_GCOMP_TABLE_BYTES];
	bellows_gcomp_table *t = NULL;
	codec_opts o;
	int next, rc;
	unsigned escaped = 0, used = 0;

	if ((rc = codec_parse(&codec_cmd_table, argc, argv, &o, -1, &next)) >=
	    0)
		return rc;
	if (isatty(STDOUT_FILENO)) {
		fprintf(stderr,
		    "bellows codec table: the table is binary: redirect "
		    "stdout to a file\n");
		return 2;
	}
	for (int i = next; i < argc; i++) {
		float *x;
		uint64_t n;

		if (codec_read_f32("codec table", argv[i], &x, &n) != 0)
			return 1;
		bellows_gcomp_histogram(BELLOWS_GCOMP_F32, x, n, hist);
		free(x);
	}
	if ((rc = bellows_gcomp_table_build(hist, o.max_bits, o.version, &t)) <
	    0) {
		fprintf(stderr, "bellows codec table: %s\n",
		    bellows_strerror(rc));
		return 1;
	}
	bellows_gcomp_table_write(t, out, sizeof(out));
	for (unsigned s = 0; s < 256; s++) {
		used += hist[s] > 0;
		escaped += hist[s] > 0 && bellows_gcomp_table_length(t, s) == 0;
	}
	fprintf(stderr,
	    "table version %u: %.3f bits per exponent (entropy %.3f), %u "
	    "exponents seen, %u escaped, escape %u bits\n",
	    o.version, bellows_gcomp_table_bits(t, hist),
	    bellows_gcomp_table_bits(NULL, hist), used, escaped,
	    bellows_gcomp_table_length(t, 256));
	bellows_gcomp_table_destroy(&t);
	if (fwrite(out, 1, sizeof(out), stdout) != sizeof(out) ||
	    fflush(stdout) != 0) {
		fprintf(stderr, "bellows codec table: cannot write stdout\n");
		return 1;
	}
	return 0;
}

/* Encodes the file; *ret_block is malloc'd. Returns 0 or 1. */
static int
codec_encode_file(const char *cmd, const bellows_gcomp_table *t,
    const char *path, int level, uint8_t **ret_block, size_t *ret_len,
    bellows_gcomp_stats *st, uint64_t *ret_n)
{
	float *x;
	uint64_t n;
	size_t cap;
	uint8_t *out;
	int rc;

	if (codec_read_f32(cmd, path, &x, &n) != 0)
		return 1;
	cap = bellows_gcomp_bound(BELLOWS_GCOMP_F32, n);
	if (cap == 0 || (out = malloc(cap)) == NULL) {
		fprintf(stderr, "bellows %s: %s: too large\n", cmd, path);
		free(x);
		return 1;
	}
	rc = bellows_gcomp_encode(t, BELLOWS_GCOMP_F32, x, n, level, NULL, out,
	    cap, ret_len, st);
	free(x);
	if (rc < 0) {
		fprintf(stderr, "bellows %s: %s: %s\n", cmd, path,
		    bellows_strerror(rc));
		free(out);
		return 1;
	}
	*ret_block = out;
	*ret_n = n;
	return 0;
}

static int
codec_encode(int argc, char **argv)
{
	bellows_gcomp_table *t = NULL;
	bellows_gcomp_stats st;
	uint8_t *block;
	size_t len;
	uint64_t n;
	codec_opts o;
	int next, rc;

	if ((rc = codec_parse(&codec_cmd_encode, argc, argv, &o, 2, &next)) >=
	    0)
		return rc;
	if (codec_read_table("codec encode", o.table, &t) != 0)
		return 1;
	rc = codec_encode_file("codec encode", t, argv[next], (int)o.level,
	    &block, &len, &st, &n);
	bellows_gcomp_table_destroy(&t);
	if (rc != 0)
		return 1;
	rc = codec_write("codec encode", argv[next + 1], block, len);
	free(block);
	return rc;
}

static int
codec_decode(int argc, char **argv)
{
	bellows_gcomp_table *t = NULL;
	uint8_t *in;
	size_t len, block;
	uint64_t n;
	int dtype, next, rc;
	uint32_t version;
	codec_opts o;
	char err[256];
	float *out;

	if ((rc = codec_parse(&codec_cmd_decode, argc, argv, &o, 2, &next)) >=
	    0)
		return rc;
	if (codec_read_table("codec decode", o.table, &t) != 0)
		return 1;
	if (codec_read("codec decode", argv[next], &in, &len) != 0) {
		bellows_gcomp_table_destroy(&t);
		return 1;
	}
	rc = bellows_gcomp_info(in, len, &n, &dtype, &version, &block, err,
	    sizeof(err));
	if (rc == 0 && dtype != BELLOWS_GCOMP_F32) {
		snprintf(err, sizeof(err),
		    "byte 5: a block of dtype %d, not float32", dtype);
		rc = BELLOWS_EPROTO;
	}
	if (rc == 0 && block != len) {
		snprintf(err, sizeof(err),
		    "byte %zu: %zu bytes after the block", block, len - block);
		rc = BELLOWS_EPROTO;
	}
	out = NULL;
	if (rc == 0 && (out = malloc(n > 0 ? n * 4 : 1)) == NULL) {
		snprintf(err, sizeof(err), "out of memory");
		rc = BELLOWS_ENOMEM;
	}
	if (rc == 0)
		rc = bellows_gcomp_decode(t, in, len, BELLOWS_GCOMP_F32, out, n,
		    0, err, sizeof(err));
	bellows_gcomp_table_destroy(&t);
	free(in);
	if (rc < 0) {
		fprintf(stderr, "bellows codec decode: %s: %s\n", argv[next],
		    err);
		free(out);
		return 1;
	}
	rc = codec_write("codec decode", argv[next + 1], out, n * 4);
	free(out);
	return rc;
}

static int
codec_stats(int argc, char **argv)
{
	bellows_gcomp_table *t = NULL;
	bellows_gcomp_stats st;
	uint8_t *block;
	size_t len;
	uint64_t n, nz;
	codec_opts o;
	int next, rc;

	if ((rc = codec_parse(&codec_cmd_stats, argc, argv, &o, 1, &next)) >= 0)
		return rc;
	if (codec_read_table("codec stats", o.table, &t) != 0)
		return 1;
	rc = codec_encode_file("codec stats", t, argv[next], (int)o.level,
	    &block, &len, &st, &n);
	bellows_gcomp_table_destroy(&t);
	if (rc != 0)
		return 1;
	free(block);
	nz = n - st.zeros;
	printf("values            %llu (%.1f %% zero, %llu escaped)\n",
	    (unsigned long long)n, n ? 100.0 * (double)st.zeros / (double)n : 0,
	    (unsigned long long)st.escaped);
	printf("bits per exponent %.3f\n",
	    n ? (double)st.exp_bits / (double)n : 0);
	printf("bits per mantissa %.3f (sign included, per non-zero value)\n",
	    nz ? (double)st.mant_bits / (double)nz : 0);
	printf("bits per value    %.3f (levels %.3f)\n",
	    n ? 8.0 * (double)len / (double)n : 0,
	    n ? (double)st.level_bits / (double)n : 0);
	printf("levels            %llu %llu %llu %llu\n",
	    (unsigned long long)st.levels[0], (unsigned long long)st.levels[1],
	    (unsigned long long)st.levels[2], (unsigned long long)st.levels[3]);
	printf("bytes             %zu of %llu\n", len,
	    (unsigned long long)(4 * n));
	printf("ratio             %.4f (exponents %.4f of the original)\n",
	    n ? (double)len / (4.0 * (double)n) : 0,
	    n ? (double)st.exp_bits / (32.0 * (double)n) : 0);
	return fflush(stdout) == 0 ? 0 : 1;
}

/* Says that `action` is none of codec's, with the nearest if any. */
static void
codec_unknown(const char *action)
{
	static const char *const actions[] = { "table", "encode", "decode",
		"stats" };
	const char *near = com_suggest(action, actions, 4);

	if (near != NULL)
		fprintf(stderr,
		    "bellows codec: unknown action '%s'; did you mean '%s'?\n",
		    action, near);
	else
		fprintf(stderr, "bellows codec: unknown action '%s'\n", action);
}

int
tool_codec_main(int argc, char **argv)
{
	if (argc < 2) {
		tool_codec_usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		tool_codec_usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "table") == 0)
		return codec_table(argc - 1, argv + 1);
	if (strcmp(argv[1], "encode") == 0)
		return codec_encode(argc - 1, argv + 1);
	if (strcmp(argv[1], "decode") == 0)
		return codec_decode(argc - 1, argv + 1);
	if (strcmp(argv[1], "stats") == 0)
		return codec_stats(argc - 1, argv + 1);
	codec_unknown(argv[1]);
	tool_codec_usage(stderr);
	return 2;
}
