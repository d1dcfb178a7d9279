/* policy_check - `bellows policy check`, see policy_check.h.
 */
#include "policy_check.h"

#include "policyhost/config.h"
#include "common/suggest.h"

#include <bellows/error.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
tool_policy_check_usage(FILE *f)
{
	fprintf(f,
	    "usage: bellows policy check FILE\n"
	    "\n"
	    "  Validates FILE as bellowsd would load it. Prints every\n"
	    "  error as FILE:LINE:COLUMN: message (at most 50) and exits 1\n"
	    "  when it is invalid;\n"
	    "  prints what it configures (defaults filled in) and exits 0\n"
	    "  when it is valid. A valid file whose window_timeout_ms is too\n"
	    "  close to the agents' default decision_timeout_ms (5000) gets\n"
	    "  a warning on stderr (still exit 0).\n");
}

static void
policy_check_line(void *arg, const char *text)
{
	fprintf(arg, "%s\n", text);
}

int
tool_policy_check_main(int argc, char **argv)
{
	ctl_config_errors *errs;
	ctl_config *cfg = NULL;
	int r, rc;

	if (argc >= 2 &&
	    (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		tool_policy_check_usage(stdout);
		return 0;
	}
	if (argc < 2 || strcmp(argv[1], "check") != 0) {
		if (argc < 2)
			fprintf(stderr, "bellows policy: missing subcommand\n");
		else if (com_suggest(argv[1], (const char *[]){ "check" }, 1) !=
		    NULL)
			fprintf(stderr,
			    "bellows policy: unknown subcommand '%s'; did you "
			    "mean 'check'?\n",
			    argv[1]);
		else
			fprintf(stderr,
			    "bellows policy: unknown subcommand '%s'\n",
			    argv[1]);
		tool_policy_check_usage(stderr);
		return 2;
	}
	if (argc != 3 || argv[2][0] == '\0') {
		fprintf(stderr, "bellows policy check: %s\n",
		    argc < 3 ? "missing FILE" : "expected exactly one FILE");
		tool_policy_check_usage(stderr);
		return 2;
	}
	errs = malloc(sizeof(*errs));
	if (errs == NULL) {
		fprintf(stderr, "bellows policy check: %s\n",
		    bellows_strerror(BELLOWS_ENOMEM));
		return 1;
	}
	r = ctl_config_load_all(argv[2], &cfg, errs);
	if (r != 0) {
		/* An error without a message (out of memory) is printed
		 * bare, not after the file's name. */
		if (errs->n == 0)
			fprintf(stderr, "%s\n", bellows_strerror(r));
		else
			ctl_config_errors_emit(errs, r, argv[2],
			    policy_check_line, stderr);
		free(errs);
		return 1;
	}
	free(errs);
	printf("# %s: valid\n", argv[2]);
	/* Valid but unsafe with the agents' defaults: said, not refused,
	 * since the agents may be configured to wait longer. */
	char warn[CTL_CONFIG_ERR_MAX];
	if (ctl_config_timing_warning(cfg, warn, sizeof(warn)))
		fprintf(stderr, "bellows policy check: %s: warning: %s\n",
		    argv[2], warn);
	/* A .pub bellowsd would skip: the file is valid, that client is not
	 * trusted. */
	for (const char *l = cfg->security.enabled ? cfg->security.skipped
						   : NULL;
	     l != NULL && *l != '\0';) {
		const char *end = strchr(l, '\n');
		int len = end != NULL ? (int)(end - l) : (int)strlen(l);

		fprintf(stderr,
		    "bellows policy check: warning: %.*s: skipped, that "
		    "client is not trusted\n",
		    len, l);
		l = end != NULL ? end + 1 : NULL;
	}
	rc = ctl_config_print(cfg, stdout) == 0 && fflush(stdout) == 0 ? 0 : 1;
	ctl_config_destroy(&cfg);
	return rc;
}
