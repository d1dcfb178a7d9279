/* cmdline - bellowsd's command line, see cmdline.h.
 *
 * The one-letter options (-p FILE, -c EP, -u EP, -d FILE, -n,
 * -l LEVEL, -V) are kept from before the table: the help does not list
 * them, scripts may still use them.
 */
#include "cmdline.h"

#include "common/args.h"

#include "bellows_config.h"

#include <bellows/error.h>

#include <stddef.h>
#include <stdio.h>

static int
cmdline_level(const char *cmd, const char *opt, const char *text, void *opts)
{
	ctl_cmdline *c = opts;

	if (ctl_log_parse_level(text, &c->level) != 0) {
		fprintf(stderr,
		    "%s: %s must be error, warn, info or debug, not '%s'\n",
		    cmd, opt, text);
		return BELLOWS_EINVAL;
	}
	c->level_given = true;
	return 0;
}

static const com_opt cmdline_rows[] = {
	{ .name = "policy",
	    .arg = "FILE",
	    .help = "YAML configuration (policies, timeouts); required",
	    .kind = COM_OPT_TEXT,
	    .at = offsetof(ctl_cmdline, policy),
	    .min = 1,
	    .letter = 'p' },
	{ .name = "control",
	    .arg = "EP",
	    .help = "ROUTER endpoint (default: the file's, else "
		    "tcp://127.0.0.1:5555)",
	    .kind = COM_OPT_TEXT,
	    .at = offsetof(ctl_cmdline, control),
	    .min = 1,
	    .letter = 'c' },
	{ .name = "publish",
	    .arg = "EP",
	    .help = "PUB endpoint (default: the file's, else "
		    "tcp://127.0.0.1:5556)",
	    .kind = COM_OPT_TEXT,
	    .at = offsetof(ctl_cmdline, publish),
	    .min = 1,
	    .letter = 'u' },
	{ .name = "db",
	    .arg = "FILE",
	    .help = "history database (SQLite), default " CTL_CMDLINE_DB
		    " in the working directory",
	    .kind = COM_OPT_TEXT,
	    .at = offsetof(ctl_cmdline, db),
	    .min = 1,
	    .letter = 'd' },
	{ .name = "no-db",
	    .help = "keep no history (jobs are not recovered after a "
		    "restart)",
	    .kind = COM_OPT_FLAG,
	    .at = offsetof(ctl_cmdline, no_db),
	    .letter = 'n' },
	{ .name = "metrics-listen",
	    .arg = "ADDR:PORT",
	    .help = "serve Prometheus metrics on GET /metrics (default: the "
		    "file's daemon.metrics_listen, else none; PORT alone: "
		    "127.0.0.1)",
	    .kind = COM_OPT_TEXT,
	    .at = offsetof(ctl_cmdline, metrics),
	    .min = 1 },
	{ .name = "log-level",
	    .arg = "L",
	    .help = "error, warn, info (default) or debug",
	    .kind = COM_OPT_PARSE,
	    .parse = cmdline_level,
	    .letter = 'l' },
	{ .name = "version",
	    .help = "print the version and exit",
	    .kind = COM_OPT_FLAG,
	    .at = offsetof(ctl_cmdline, version),
	    .letter = 'V' },
};

static const com_args_cmd cmdline_cmd = {
	.name = "bellowsd",
	.program = true,
	.opts = cmdline_rows,
	.n_opts = sizeof(cmdline_rows) / sizeof(cmdline_rows[0]),
	.usage = ctl_cmdline_usage,
};

void
ctl_cmdline_usage(FILE *f)
{
	fputs("usage: bellowsd --policy FILE [--control EP] [--publish EP]\n"
	      "                [--db FILE | --no-db]\n"
	      "                [--metrics-listen ADDR:PORT]\n"
	      "                [--log-level error|warn|info|debug]\n"
	      "\n",
	    f);
	com_args_help(f, &cmdline_cmd, NULL);
}

int
ctl_cmdline_parse(int argc, char **argv, ctl_cmdline *ret)
{
	int next, r;

	*ret = (ctl_cmdline){ .db = CTL_CMDLINE_DB, .level = CTL_LOG_INFO };
	if ((r = com_args_parse(&cmdline_cmd, argc, argv, ret, &next)) >= 0)
		return r;
	if (ret->version) {
		printf("bellowsd %s\n", BELLOWS_VERSION);
		return 0;
	}
	if (ret->policy == NULL) {
		fprintf(stderr, "bellowsd: --policy FILE is required\n");
		ctl_cmdline_usage(stderr);
		return 2;
	}
	if (ret->no_db)
		ret->db = NULL;
	return -1;
}
