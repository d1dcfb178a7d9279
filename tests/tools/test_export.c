/* test_export - `bellows export`: a run of a hand-made history
 * (hdb_fixture.h) as one CSV file per table, with decisions' level BLOBs
 * as numbers, and no file overwritten unless asked.
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

#include <bellows/error.h>

#include "tools/export_cli.h"
#include "hdb_fixture.h"

typedef struct fixture {
	char dir[64];  /* temporary directory */
	char db[96];   /* the history in it */
	char out[96];  /* export directory: DIR/out/run */
	FILE *stdout_; /* the real stdout while tests silence it */
} fixture;

static const char *const tables[] = {
	"runs",
	"layers",
	"rank_events",
	"window_info",
	"windows",
	"timings",
	"comm_samples",
	"policy_metrics",
	"decisions",
	"decision_changes",
	"events",
	"policy_files",
};

#define N_TABLES (sizeof(tables) / sizeof(tables[0]))

static int
setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/bellows-export.XXXXXX");
	if (mkdtemp(f->dir) == NULL)
		return -1;
	snprintf(f->db, sizeof(f->db), "%s/h.db", f->dir);
	snprintf(f->out, sizeof(f->out), "%s/out/run", f->dir);
	if (fixture_db_create(f->db, 2, 1) != SQLITE_OK)
		return -1;
	f->stdout_ = stdout;
	stdout = fopen("/dev/null", "w");
	*state = f;
	return stdout == NULL ? -1 : 0;
}

static int
teardown(void **state)
{
	fixture *f = *state;
	char p[160];

	fclose(stdout);
	stdout = f->stdout_;
	for (size_t i = 0; i < N_TABLES; i++) {
		snprintf(p, sizeof(p), "%s/%s.csv", f->out, tables[i]);
		remove(p);
	}
	rmdir(f->out);
	snprintf(p, sizeof(p), "%s/out", f->dir);
	rmdir(p);
	fixture_db_remove(f->db);
	rmdir(f->dir);
	free(f);
	return 0;
}

/* Runs `bellows export ARGS...` and returns its exit code. */
static int export(const char *first, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;

	argv[argc++] = (char *)"export";
	va_start(ap, first);
	for (const char *a = first; a != NULL; a = va_arg(ap, const char *))
		argv[argc++] = (char *)a;
	va_end(ap);
	argv[argc] = NULL;
	return tool_export_main(argc, argv);
}

static char *
slurp(const char *dir, const char *table)
{
	char path[160], *buf;
	long n;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s.csv", dir, table);
	fp = fopen(path, "r");
	assert_non_null(fp);
	fseek(fp, 0, SEEK_END);
	n = ftell(fp);
	rewind(fp);
	buf = calloc(1, (size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, fp), (size_t)n);
	fclose(fp);
	return buf;
}

static size_t
lines(const char *s)
{
	size_t n = 0;

	for (; *s != '\0'; s++)
		n += *s == '\n';
	return n;
}

static void
test_export_writes_every_table_of_the_run(void **state)
{
	fixture *f = *state;
	/* Rows + 1 header line; policy_files' "b" text spans two lines. */
	/* A schema 2 file: no collectives nor metrics, a header each. */
	static const size_t want[N_TABLES] = { 2, 3, 5, 5, 8, 12, 1, 1, 5, 4, 3,
		4 };
	char *csv;

	assert_int_equal(export("--db", f->db, "--run", "1", "--out", f->out,
			     NULL),
	    0);
	for (size_t i = 0; i < N_TABLES; i++) {
		csv = slurp(f->out, tables[i]);
		if (lines(csv) != want[i])
			fail_msg("%s.csv has %zu lines, not %zu:\n%s",
			    tables[i], lines(csv), want[i], csv);
		free(csv);
	}
	csv = slurp(f->out, "decisions");
	assert_non_null(strstr(csv,
	    "run_id,seq,apply_step,window,wall_ms,source,policy,reason,"
	    "n_layers,levels,error_bounds,batch_size,lr_scale,"
	    "size_threshold,compression_off,codec_table\n"));
	assert_non_null(strstr(csv,
	    "1,3,10,2,1795305602000,window,accordion,\"window 1: "
	    "conv.weight stable, r=0.01\",2,1 0,0 0,0,1,0,0,0102\n"));
	free(csv);
	csv = slurp(f->out, "policy_files");
	assert_string_equal(csv,
	    "hash,path,text,first_seen_wall_ms\n"
	    "a,p.yaml,jobs: [],1795305599000\n"
	    "b,p.yaml,\"jobs:\n  - match: \"\"*\"\"\",1795305601500\n");
	free(csv);
	csv = slurp(f->out, "runs");
	assert_string_equal(csv,
	    "id,job,world,n_layers,started_wall_ms,ended_wall_ms,instance,"
	    "config_hash,first_seq,recoveries\n"
	    "1,resnet,3,2,1795305600000,1795305605000,00000000000000aa,a,1,"
	    "0\n");
	free(csv);
}

static void
test_export_writes_collectives_and_metrics_of_a_version_3_run(void **state)
{
	fixture *f = *state;
	char *csv;

	assert_int_equal(fixture_db_create(f->db, 3, 1), SQLITE_OK);
	assert_int_equal(export("--db", f->db, "--run", "1", "--out", f->out,
			     NULL),
	    0);
	csv = slurp(f->out, "comm_samples");
	assert_string_equal(csv,
	    "run_id,window,rank,bytes,ms,count,compressed\n"
	    "1,0,1,4096,0.75,10,0\n"
	    "1,3,0,4096,0.5,10,0\n"
	    "1,3,2,1024,0.25,2,1\n");
	free(csv);
	csv = slurp(f->out, "policy_metrics");
	assert_string_equal(csv,
	    "run_id,window,policy,name,layer,value\n"
	    "1,1,slim,threshold_bytes,,2200000\n"
	    "1,1,slim,ratio,0,1.5\n"
	    "1,3,perf,alpha_ms,,0.25\n");
	free(csv);
	csv = slurp(f->out, "decisions");
	assert_non_null(strstr(csv, ",codec_table,calibrate_steps\n"));
	assert_non_null(strstr(csv, ",0,1,0,0,,4\n"));
	free(csv);
}

static void
test_export_refuses_to_overwrite_without_force(void **state)
{
	fixture *f = *state;
	char path[160], *csv;
	FILE *fp;

	assert_int_equal(export("--db", f->db, "--out", f->out, NULL), 0);
	/* The latest run is 2 (bert): one layer. */
	csv = slurp(f->out, "layers");
	assert_int_equal(lines(csv), 2);
	free(csv);
	/* One file in the way: nothing is written, not even the others. */
	snprintf(path, sizeof(path), "%s/windows.csv", f->out);
	assert_int_equal(remove(path), 0);
	snprintf(path, sizeof(path), "%s/events.csv", f->out);
	fp = fopen(path, "w");
	assert_non_null(fp);
	fputs("mine\n", fp);
	fclose(fp);
	assert_int_equal(export("--db", f->db, "--run", "1", "--out", f->out,
			     NULL),
	    1);
	csv = slurp(f->out, "events");
	assert_string_equal(csv, "mine\n");
	free(csv);
	snprintf(path, sizeof(path), "%s/windows.csv", f->out);
	assert_int_not_equal(access(path, F_OK), 0);
	assert_int_equal(export("--db", f->db, "--run", "1", "--out", f->out,
			     "--force", NULL),
	    0);
	csv = slurp(f->out, "events");
	assert_int_equal(lines(csv), 3);
	free(csv);
}

static void
test_export_refuses_bad_arguments_and_missing_runs(void **state)
{
	fixture *f = *state;

	assert_int_equal(export(NULL), 2);
	assert_int_equal(export("--db", f->db, NULL), 2);
	assert_int_equal(export("--out", "", NULL), 2);
	assert_int_equal(export("--out", f->out, "--run", "0", NULL), 2);
	assert_int_equal(export("--out", f->out, "extra", NULL), 2);
	assert_int_equal(export("--db", f->db, "--run", "5", "--out", f->out,
			     NULL),
	    1);
	assert_int_not_equal(access(f->out, F_OK), 0);
	assert_int_equal(export("--db", "/nonexistent/h.db", "--out", f->out,
			     NULL),
	    1);
}

static char *
put(const char *name, const tool_hdb_cell *c)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	assert_non_null(out);
	assert_int_equal(tool_export_put_cell(out, name, c), 0);
	fclose(out);
	return buf;
}

static void
test_export_decodes_level_blobs_as_little_endian_doubles(void **state)
{
	/* 0.5, -3, 0.1 */
	static const char blob[] = "\x00\x00\x00\x00\x00\x00\xe0\x3f"
				   "\x00\x00\x00\x00\x00\x00\x08\xc0"
				   "\x9a\x99\x99\x99\x99\x99\xb9\x3f";
	tool_hdb_cell c = { .type = TOOL_HDB_BLOB, .s = blob, .len = 24 };
	char *s;

	(void)state;
	s = put("levels", &c);
	assert_string_equal(s, "0.5 -3 0.1");
	free(s);
	s = put("error_bounds", &c);
	assert_string_equal(s, "0.5 -3 0.1");
	free(s);
	s = put("codec_table", &c);
	assert_string_equal(s,
	    "000000000000e03f000000000000"
	    "08c09a9999999999b93f");
	free(s);
	/* Not a whole number of doubles: hex, rather than a guess. */
	c.len = 3;
	s = put("levels", &c);
	assert_string_equal(s, "000000");
	free(s);
	c.len = 0;
	s = put("levels", &c);
	assert_string_equal(s, "");
	free(s);
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_export_writes_every_table_of_the_run),
		T(test_export_writes_collectives_and_metrics_of_a_version_3_run),
		T(test_export_refuses_to_overwrite_without_force),
		T(test_export_refuses_bad_arguments_and_missing_runs),
		T(test_export_decodes_level_blobs_as_little_endian_doubles),
	};
#undef T

	return cmocka_run_group_tests_name("export", tests, NULL, NULL);
}
