/* export_cli - `bellows export`, see export_cli.h.
 *
 * All files are checked before the first is written, so that a refusal
 * to overwrite leaves the directory as it was; without --force each file
 * is also created exclusively ("wx"), so that one appearing meanwhile is
 * not clobbered either. Rows stream from SQLite to the file: a run's
 * windows table may not fit in memory.
 */
#include "export_cli.h"

#include "common/args.h"
#include "history.h"
#include "client/cellfmt.h"
#include "client/metrics.h"

#include <bellows/error.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- options ----------------------------------------------------------- */

typedef struct export_opts {
	com_args_shared sh; /* --db, --run */
	const char *out;    /* --out */
	bool force;         /* --force */
} export_opts;

static const export_opts export_defaults = {
	.sh = { .db = TOOL_HISTORY_DEFAULT_DB },
};

static const com_opt export_opt_rows[] = {
	{ .name = "out",
	    .arg = "DIR",
	    .help = "where to write; created if missing",
	    .kind = COM_OPT_TEXT,
	    .at = offsetof(export_opts, out),
	    .min = 1 },
	{ .name = "force",
	    .help = "overwrite existing files",
	    .kind = COM_OPT_FLAG,
	    .at = offsetof(export_opts, force) },
};

static const com_args_cmd export_cmd = {
	.name = "export",
	.shared = COM_ARGS_TAKES(COM_ARGS_DB) | COM_ARGS_TAKES(COM_ARGS_RUN),
	.shared_at = offsetof(export_opts, sh),
	.opts = export_opt_rows,
	.n_opts = sizeof(export_opt_rows) / sizeof(export_opt_rows[0]),
	.usage = tool_export_usage,
};

void
tool_export_usage(FILE *f)
{
	fputs("usage: bellows export [--db FILE] [--run ID] --out DIR "
	      "[--force]\n"
	      "\n"
	      "  Writes every table's rows of one run of bellowsd's history\n"
	      "  as DIR/<table>.csv: runs, layers, rank_events, window_info,\n"
	      "  windows, timings, comm_samples (every rank's collectives),\n"
	      "  policy_metrics (what the policies computed), decisions\n"
	      "  (levels and error_bounds as numbers separated by spaces),\n"
	      "  decision_changes, events (the run's and the daemon's own\n"
	      "  while it was live) and the policy_files they name. A history\n"
	      "  older than schema 3 gives comm_samples and policy_metrics\n"
	      "  with a header and no rows. See docs/history.md.\n"
	      "\n",
	    f);
	com_args_help(f, &export_cmd, &export_defaults);
}

/* ---- cells ------------------------------------------------------------- */

static bool
export_is_doubles(const char *name)
{
	return strcmp(name, "levels") == 0 || strcmp(name, "error_bounds") == 0;
}

int
tool_export_put_cell(FILE *f, const char *name, const tool_hdb_cell *c)
{
	const unsigned char *p = (const unsigned char *)c->s;

	if (c->type != TOOL_HDB_BLOB || !export_is_doubles(name) ||
	    c->len % 8 != 0)
		return tool_cellfmt_put(f, false, c);
	for (size_t i = 0; i < c->len; i += 8) {
		uint64_t bits = 0;
		double v;

		for (int b = 7; b >= 0; b--)
			bits = (bits << 8) | p[i + (size_t)b];
		memcpy(&v, &bits, sizeof(v));
		if ((i > 0 && fputc(' ', f) == EOF) ||
		    tool_metrics_put_number(f, v) != 0)
			return BELLOWS_EIO;
	}
	return 0;
}

/* ---- files ------------------------------------------------------------- */

typedef struct export_file {
	FILE *f;                  /* the table's CSV file */
	uint32_t n_cols;          /* columns */
	const char *const *names; /* their names, valid during the query */
	uint64_t rows;            /* rows written */
} export_file;

static int
export_columns(void *arg, uint32_t n, const char *const *names)
{
	export_file *ef = arg;

	ef->n_cols = n;
	ef->names = names;
	return tool_cellfmt_header(ef->f, n, names);
}

static int
export_row(void *arg, const tool_hdb_cell *cells)
{
	export_file *ef = arg;

	for (uint32_t c = 0; c < ef->n_cols; c++) {
		if ((c > 0 && fputc(',', ef->f) == EOF) ||
		    tool_export_put_cell(ef->f, ef->names[c], &cells[c]) != 0)
			return BELLOWS_EIO;
	}
	if (fputc('\n', ef->f) == EOF)
		return BELLOWS_EIO;
	ef->rows++;
	return 0;
}

/* mkdir -p: creates dir and its missing parents. */
static int
export_mkdir(const char *dir)
{
	char path[PATH_MAX];
	size_t n = strlen(dir);

	if (n == 0 || n >= sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(path, dir, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (path[i] != '/' && path[i] != '\0')
			continue;
		path[i] = '\0';
		if (mkdir(path, 0777) != 0 && errno != EEXIST)
			return -1;
		path[i] = i < n ? '/' : '\0';
	}
	{
		struct stat sb;

		if (stat(dir, &sb) != 0)
			return -1;
		if (!S_ISDIR(sb.st_mode)) {
			errno = ENOTDIR;
			return -1;
		}
	}
	return 0;
}

static int
export_path(const char *dir, tool_hdb_table t, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/%s.csv", dir, tool_hdb_table_name(t));

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* ---- the subcommand ---------------------------------------------------- */

/* Returns -1 to go on, else the exit code. */
static int
export_parse(int argc, char **argv, export_opts *o)
{
	int next, rc;

	*o = export_defaults;
	if ((rc = com_args_parse(&export_cmd, argc, argv, o, &next)) >= 0)
		return rc;
	if (o->out == NULL) {
		fprintf(stderr, "bellows export: --out DIR is required\n");
		tool_export_usage(stderr);
		return 2;
	}
	return -1;
}

/* Writes table t of the run to its file. Returns 0, or 1 after saying
 * why. */
static int
export_table(tool_hdb *db, const export_opts *o, int64_t run, tool_hdb_table t,
    const char *path)
{
	export_file ef = { 0 };
	bool werr;
	tool_hdb_sink sink = {
		.columns = export_columns,
		.row = export_row,
		.arg = &ef,
	};
	int r;

	if ((ef.f = fopen(path, o->force ? "w" : "wx")) == NULL) {
		fprintf(stderr, "bellows export: %s: %s%s\n", path,
		    strerror(errno),
		    errno == EEXIST ? " (--force overwrites)" : "");
		return 1;
	}
	r = tool_hdb_export(db, t, run, &sink);
	werr = ferror(ef.f) != 0;
	if (fclose(ef.f) != 0)
		werr = true;
	if (werr || r != 0) {
		fprintf(stderr, "bellows export: %s: %s\n", path,
		    werr ? "write error" : tool_hdb_error(db));
		unlink(path);
		return 1;
	}
	printf("%s: %" PRIu64 " row%s\n", path, ef.rows,
	    ef.rows == 1 ? "" : "s");
	return 0;
}

int
tool_export_main(int argc, char **argv)
{
	char err[TOOL_HDB_ERR_MAX], path[PATH_MAX];
	tool_hdb_run run = { 0 };
	tool_hdb *db = NULL;
	bool begun = false;
	export_opts o;
	int rc;

	if ((rc = export_parse(argc, argv, &o)) >= 0)
		return rc;
	rc = 1;
	if (tool_hdb_open(o.sh.db, &db, err, sizeof(err)) != 0) {
		fprintf(stderr, "bellows export: %s\n", err);
		goto out;
	}
	if (tool_hdb_begin(db) != 0) {
		fprintf(stderr, "bellows export: %s: %s\n", o.sh.db,
		    tool_hdb_error(db));
		goto out;
	}
	begun = true;
	if (tool_hdb_run_find(db, o.sh.run != 0 ? o.sh.run : TOOL_HDB_NONE,
		NULL, &run) != 0) {
		fprintf(stderr, "bellows export: %s: %s\n", o.sh.db,
		    tool_hdb_error(db));
		goto out;
	}
	if (o.sh.run == 0)
		fprintf(stderr,
		    "bellows export: run %" PRId64
		    " (job '%s', %s), the latest; --run picks another\n",
		    run.id, run.job, run.live ? "live" : "ended");
	if (export_mkdir(o.out) != 0) {
		fprintf(stderr, "bellows export: cannot create %s: %s\n", o.out,
		    strerror(errno));
		goto out;
	}
	for (int t = 0; t < TOOL_HDB_T_N; t++) {
		if (export_path(o.out, (tool_hdb_table)t, path, sizeof(path)) !=
		    0) {
			fprintf(stderr, "bellows export: %s: name too long\n",
			    o.out);
			goto out;
		}
		if (!o.force && access(path, F_OK) == 0) {
			fprintf(stderr,
			    "bellows export: %s exists (--force overwrites "
			    "it); nothing written\n",
			    path);
			goto out;
		}
	}
	for (int t = 0; t < TOOL_HDB_T_N; t++) {
		(void)export_path(o.out, (tool_hdb_table)t, path, sizeof(path));
		if (export_table(db, &o, run.id, (tool_hdb_table)t, path) != 0)
			goto out;
	}
	if (fflush(stdout) != 0) {
		fprintf(stderr, "bellows export: cannot write the output\n");
		goto out;
	}
	rc = 0;
out:
	if (begun)
		(void)tool_hdb_end(db);
	tool_hdb_run_fini(&run);
	tool_hdb_close(&db);
	return rc;
}
