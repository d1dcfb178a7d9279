/* bellows - the `bellows` command line: dispatches to one subcommand.
 *
 * Each subcommand lives in its own module and returns the process exit
 * code; this file only picks it, and is the only place that exits. Exit
 * codes: 0 success, 1 the command failed, 2 it was used wrongly.
 */
#include "codec_cli.h"
#include "export_cli.h"
#include "history.h"
#include "keygen.h"
#include "policy_check.h"
#include "replay.h"
#include "report.h"
#include "sim.h"
#include "status.h"
#ifdef BELLOWS_HAVE_TOP
#include "dashboards/top.h"
#endif

#include "bellows_config.h"
#include "common/msg.h"
#include "common/suggest.h"

#include <bellows/agent.h>

#include <stdio.h>
#include <string.h>

typedef struct bellows_command {
	const char *name;                  /* first argument */
	int (*run)(int argc, char **argv); /* gets argv from the name on */
	void (*usage)(FILE *f);            /* its usage text */
	const char *summary;               /* one line for `bellows help` */
} bellows_command;

/* `bellows history`: compare takes two runs and options of its own and
 * is report_compare.c's, the other questions history.c's; the two share
 * what they read with (client/), not each other. */
static int
bellows_history(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "compare") == 0)
		return tool_report_compare_main(argc - 1, argv + 1);
	return tool_history_main(argc, argv);
}

static const bellows_command commands[] = {
	{ "status", tool_status_main, tool_status_usage,
	    "show what bellowsd is doing: jobs, ranks, drops" },
	{ "policy", tool_policy_check_main, tool_policy_check_usage,
	    "policy check FILE: validate a policy file" },
	{ "sim", tool_sim_main, tool_sim_usage,
	    "run a simulated data-parallel job against bellowsd" },
	{ "replay", tool_replay_main, tool_replay_usage,
	    "run policies over recorded metrics or a recorded run" },
	{ "history", bellows_history, tool_history_usage,
	    "what happened: runs, layers, windows, decisions, events, "
	    "timings, stats, metrics, comm, residuals, compare" },
	{ "report", tool_report_main, tool_report_usage,
	    "a run's story: decisions, savings, step times; --html plots" },
	{ "export", tool_export_main, tool_export_usage,
	    "write one run of the history as CSV files" },
	{ "codec", tool_codec_main, tool_codec_usage,
	    "codec table|encode|decode|stats: try GComp on .f32 files" },
	{ "keygen", tool_keygen_main, tool_keygen_usage,
	    "write a CURVE keypair: DIR/NAME.key and DIR/NAME.pub" },
#ifdef BELLOWS_HAVE_TOP
	{ "top", dash_top_main, dash_top_usage,
	    "watch bellowsd and its jobs live, or browse a history" },
#endif
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void
bellows_usage(FILE *f)
{
	fprintf(f,
	    "usage: bellows COMMAND [ARGS...]\n"
	    "\n"
	    "commands:\n");
	for (size_t i = 0; i < N_COMMANDS; i++)
		fprintf(f, "  %-8s %s\n", commands[i].name,
		    commands[i].summary);
	fprintf(f,
	    "  %-8s %s\n"
	    "\n"
	    "  bellows --version     print the version\n",
	    "help", "help [COMMAND]: show this text or a command's usage");
}

static const bellows_command *
bellows_find(const char *name)
{
	for (size_t i = 0; i < N_COMMANDS; i++) {
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	}
	return NULL;
}

/* Says that `name` is no command, with the nearest one if any. */
static void
bellows_unknown(const char *who, const char *name)
{
	const char *names[N_COMMANDS + 1];
	const char *near;

	for (size_t i = 0; i < N_COMMANDS; i++)
		names[i] = commands[i].name;
	names[N_COMMANDS] = "help";
	near = com_suggest(name, names, N_COMMANDS + 1);
	if (near != NULL)
		fprintf(stderr,
		    "%s: unknown command '%s'; did you mean '%s'?\n", who, name,
		    near);
	else
		fprintf(stderr, "%s: unknown command '%s'\n", who, name);
}

static int
bellows_help(int argc, char **argv)
{
	const bellows_command *c;

	if (argc < 2) {
		bellows_usage(stdout);
		return 0;
	}
	if ((c = bellows_find(argv[1])) == NULL) {
		bellows_unknown("bellows help", argv[1]);
		return 2;
	}
	c->usage(stdout);
	return 0;
}

int
main(int argc, char **argv)
{
	const bellows_command *c;

	if (argc < 2) {
		bellows_usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "--version") == 0 ||
	    strcmp(argv[1], "version") == 0) {
		printf("bellows %s (libbellows %s, protocol %d.%d)\n",
		    BELLOWS_VERSION, bellows_version(), BELLOWS_PROTO_MAJOR,
		    BELLOWS_PROTO_MINOR);
		return 0;
	}
	if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0)
		return bellows_help(argc - 1, argv + 1);
	if ((c = bellows_find(argv[1])) == NULL) {
		bellows_unknown("bellows", argv[1]);
		bellows_usage(stderr);
		return 2;
	}
	return c->run(argc - 1, argv + 1);
}
