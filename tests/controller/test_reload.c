/* test_reload - replacing bellowsd's configuration while jobs run.
 *
 * A real YAML file in a temporary directory, the real job table driven
 * with decoded messages (as in test_jobs), the threshold example plug-in
 * loaded with dlopen. The threshold policy writes in every reason how many
 * windows and reloads its instance has seen, which is how these tests see
 * whether a reload kept an instance's state, told it of the reload, or
 * started it over. The last tests go through the real event loop and
 * inotify, and run a job twice, with and without a reload mid-window, to
 * show that a reload of unrelated settings changes no decision.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <dlfcn.h>
#include <limits.h>
#include <time.h>
#include <zmq.h>

#include <bellows/error.h>

#include "common/clock.h"
#include "policyhost/config.h"
#include "controller/jobs.h"
#include "policyhost/log.h"
#include "controller/loop.h"
#include "plugin_paths.h"
#include "controller/reload.h"
#include "controller/watch.h"

#define N_LAYERS 3
#define MAX_PUB  512
#define GUARD_MS 5000

/* The threshold policy on every job "job*": level 4 above a gradient norm
 * of 1.5, else 1. */
#define BASE_CONFIG                                                            \
	"daemon:\n"                                                            \
	"  window_timeout_ms: 1000\n"                                          \
	"  rank_timeout_ms: 5000\n"                                            \
	"jobs:\n"                                                              \
	"  - match: \"job*\"\n"                                                \
	"    policies:\n"                                                      \
	"      - type: threshold\n"                                            \
	"        plugin: @THRESHOLD@\n"                                        \
	"        params: {threshold: 1.5}\n"

static const com_layer_info table[N_LAYERS] = {
	{ .name = "conv.weight", .numel = 32, .ndim = 2, .shape = { 8, 4 } },
	{ .name = "conv.bias", .numel = 8, .ndim = 1, .shape = { 8 } },
	{ .name = "fc.weight", .numel = 32, .ndim = 2, .shape = { 4, 8 } },
};

typedef struct fixture {
	char dir[64];                 /* private temporary directory */
	char path[128];               /* dir/bellows.yaml */
	char tmp[128];                /* dir/.bellows.yaml.new */
	char threshold[PATH_MAX];     /* the example plug-in */
	char broken_init[PATH_MAX];   /* a plug-in whose init fails */
	char broken_abi[PATH_MAX];    /* a plug-in of another ABI */
	char broken_reload[PATH_MAX]; /* one refusing reloads */
	ctl_jobs *jobs;               /* job table */
	ctl_reload *reload;           /* under test, owns the config */
	com_msg pub[MAX_PUB];         /* deep copies of publications */
	uint32_t n_pub;               /* entries in pub */
	com_msg reply;                /* last reply */
	char why[256];                /* last drop reason */
	uint64_t window;              /* next window the ranks report */
	ctl_loop *loop;               /* for the inotify tests */
	ctl_watch *watch;             /* idem */
	bool guard_hit;               /* the guard timer stopped the loop */
	uint64_t wait_done;           /* loop runs until this many reloads */
	uint64_t wait_refused;        /* ... and this many refusals */
	void *zctx;                   /* for the reader thread's sockets */
} fixture;

/* ctl_jobs_publish_fn: keeps a deep copy of every Decision. */
static void
record(void *arg, const com_msg *m)
{
	fixture *f = arg;
	com_msg *c;

	if (m->type != COM_MSG_DECISION)
		return;
	assert_true(f->n_pub < MAX_PUB);
	c = &f->pub[f->n_pub++];
	com_msg_init(c, m->type);
	assert_int_equal(com_decision_copy(&c->u.decision, &m->u.decision), 0);
}

static void
write_file(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");

	assert_non_null(fp);
	assert_int_equal(fwrite(text, 1, strlen(text), fp), strlen(text));
	assert_int_equal(fclose(fp), 0);
}

/* Writes the configuration `text` to `path`; @THRESHOLD@, @BROKEN_INIT@,
 * @BROKEN_ABI@ and @BROKEN_RELOAD@ in it stand for the threshold plug-in,
 * one whose init fails, one of another ABI version and one that refuses
 * reloads and cannot start with x >= 0.5. */
static void
write_config_to(fixture *f, const char *path, const char *text)
{
	const struct {
		const char *token, *value;
	} subst[] = {
		{ "@THRESHOLD@", f->threshold },
		{ "@BROKEN_INIT@", f->broken_init },
		{ "@BROKEN_ABI@", f->broken_abi },
		{ "@BROKEN_RELOAD@", f->broken_reload },
	};
	const size_t n_subst = sizeof(subst) / sizeof(subst[0]);
	char out[16384];
	size_t n = 0;

	while (*text != '\0') {
		size_t i = 0, len;
		const char *put = text;

		while (i < n_subst &&
		    strncmp(text, subst[i].token, strlen(subst[i].token)) != 0)
			i++;
		if (i < n_subst) {
			put = subst[i].value;
			len = strlen(put);
			text += strlen(subst[i].token);
		} else {
			len = 1;
			text++;
		}
		assert_true(n + len < sizeof(out));
		memcpy(out + n, put, len);
		n += len;
	}
	out[n] = '\0';
	write_file(path, out);
}

static void
write_config(fixture *f, const char *text)
{
	write_config_to(f, f->path, text);
}

static int
setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	char err[CTL_CONFIG_ERR_MAX];
	ctl_config *cfg = NULL;

	if (f == NULL)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/bellows-reload-XXXXXX");
	if (mkdtemp(f->dir) == NULL)
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/bellows.yaml", f->dir);
	snprintf(f->tmp, sizeof(f->tmp), "%s/.bellows.yaml.new", f->dir);
	plugin_path(f->threshold, sizeof(f->threshold), THRESHOLD_SO);
	plugin_path(f->broken_init, sizeof(f->broken_init),
	    BROKEN_SO("init_fails"));
	plugin_path(f->broken_abi, sizeof(f->broken_abi), BROKEN_SO("abi"));
	plugin_path(f->broken_reload, sizeof(f->broken_reload),
	    BROKEN_SO("refuses_reload"));
	write_config(f, BASE_CONFIG);
	if (ctl_config_load(f->path, &cfg, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	if (ctl_jobs_new(cfg, 42, record, f, &f->jobs) != 0 ||
	    ctl_reload_new(f->path, &cfg, f->jobs, &f->reload) != 0)
		return -1;
	com_msg_init(&f->reply, COM_MSG_NONE);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	fixture *f = *state;

	ctl_loop_destroy(&f->loop);
	ctl_watch_close(&f->watch);
	ctl_jobs_destroy(&f->jobs);
	ctl_reload_destroy(&f->reload);
	if (f->zctx != NULL)
		zmq_ctx_term(f->zctx);
	for (uint32_t i = 0; i < f->n_pub; i++)
		com_msg_fini(&f->pub[i]);
	com_msg_fini(&f->reply);
	unlink(f->path);
	unlink(f->tmp);
	rmdir(f->dir);
	free(f);
	return 0;
}

/* ---- driving a job ------------------------------------------------------ */

static void
join(fixture *f, const char *peer, const char *job, uint32_t rank,
    uint32_t world)
{
	com_msg m;
	com_hello *h = &m.u.hello;

	com_msg_init(&m, COM_MSG_HELLO);
	h->job = com_strdup(job);
	h->agent_version = com_strdup("0.1.0");
	h->rank = rank;
	h->world = world;
	h->incarnation = 100 + rank;
	h->n_layers = N_LAYERS;
	h->layers = calloc(N_LAYERS, sizeof(*h->layers));
	assert_non_null(h->layers);
	for (uint32_t l = 0; l < N_LAYERS; l++) {
		h->layers[l] = table[l];
		h->layers[l].name = com_strdup(table[l].name);
	}
	com_msg_fini(&f->reply);
	com_msg_init(&f->reply, COM_MSG_NONE);
	assert_int_equal(ctl_jobs_hello(f->jobs, (const uint8_t *)peer,
			     strlen(peer), NULL, h, 0, &f->reply, f->why,
			     sizeof(f->why)),
	    0);
	com_msg_fini(&m);
}

/* Rank `rank` of `job` (held by `peer`) reports window w of 10 steps in
 * which it saw gradient norm `norm` on every layer. */
static void
report(fixture *f, const char *peer, const char *job, uint32_t rank, uint64_t w,
    double norm)
{
	com_layer_stats stats[N_LAYERS];
	com_report rep = {
		.job = (char *)job,
		.rank = rank,
		.window = w,
		.first_step = 10 * w,
		.last_step = 10 * w + 9,
		.n_layers = N_LAYERS,
		.layers = stats,
		.timings = { .steps = 10, .step_ms = 100 },
		.lr = 0.1,
	};

	for (uint32_t l = 0; l < N_LAYERS; l++)
		stats[l] = (com_layer_stats){ .layer = l,
			.count = 8,
			.sum_sq = norm * norm,
			.acc_norm = norm };
	com_msg_fini(&f->reply);
	com_msg_init(&f->reply, COM_MSG_NONE);
	assert_int_equal(ctl_jobs_report(f->jobs, (const uint8_t *)peer,
			     strlen(peer), NULL, &rep, 1, &f->reply, f->why,
			     sizeof(f->why)),
	    0);
}

/* The two ranks of "job" (peers A and B) join. */
static void
join_job(fixture *f)
{
	join(f, "A", "job", 0, 2);
	join(f, "B", "job", 1, 2);
}

/* Both ranks of "job" report the next window with norm `norm`: it
 * closes. */
static void
window(fixture *f, double norm)
{
	report(f, "A", "job", 0, f->window, norm);
	report(f, "B", "job", 1, f->window, norm);
	f->window++;
}

static const com_decision *
last(const fixture *f)
{
	assert_true(f->n_pub > 0);
	return &f->pub[f->n_pub - 1].u.decision;
}

static void
assert_reason(const fixture *f, const char *expected)
{
	if (strcmp(last(f)->reason, expected) != 0)
		fail_msg("reason '%s', expected '%s'", last(f)->reason,
		    expected);
}

static void
assert_levels(const com_decision *d, double a, double b, double c)
{
	if (d->level[0] != a || d->level[1] != b || d->level[2] != c)
		fail_msg("levels [%g, %g, %g], expected [%g, %g, %g]",
		    d->level[0], d->level[1], d->level[2], a, b, c);
}

static ctl_reload_counters
counters(const fixture *f)
{
	ctl_reload_counters c;

	ctl_reload_get_counters(f->reload, &c);
	return c;
}

/* STATUS of every job into *m (com_msg_fini it). */
static void
status(fixture *f, com_msg *m)
{
	com_status_request req = { .job = NULL };

	com_msg_init(m, COM_MSG_STATUS_REPLY);
	assert_int_equal(ctl_jobs_status(f->jobs, NULL, &req, 1,
			     &m->u.status_reply),
	    0);
}

/* The newest event of `kind` in STATUS must contain `text`, or be
 * exactly `text` if `exact`. */
static void
check_event(fixture *f, const char *kind, const char *text, bool exact)
{
	const com_event *found = NULL;
	com_msg m;

	status(f, &m);
	for (uint32_t i = 0; i < m.u.status_reply.n_events; i++) {
		if (strcmp(m.u.status_reply.events[i].kind, kind) == 0)
			found = &m.u.status_reply.events[i];
	}
	if (found == NULL)
		fail_msg("no '%s' event", kind);
	if (exact ? strcmp(found->text, text) != 0
		  : strstr(found->text, text) == NULL)
		fail_msg("event '%s' says '%s', expected '%s'", kind,
		    found->text, text);
	com_msg_fini(&m);
}

static void
assert_event(fixture *f, const char *kind, const char *text)
{
	check_event(f, kind, text, false);
}

static void
assert_event_is(fixture *f, const char *kind, const char *text)
{
	check_event(f, kind, text, true);
}

/* ---- what a reload keeps ------------------------------------------------ */

static void
test_reload_keeps_an_unchanged_instance_and_its_state(void **state)
{
	fixture *f = *state;
	const ctl_config *before = ctl_reload_config(f->reload);
	uint32_t n;

	join_job(f);
	window(f, 2.0);
	window(f, 2.0);
	window(f, 2.0);
	assert_reason(f,
	    "threshold 1.5: 2 high, 0 low; seen 3 windows, 0 reloads, 2 ranks "
	    "joined, 0 lost");
	n = f->n_pub;
	assert_int_equal(ctl_reload_now(f->reload, true), 0);
	assert_true(ctl_reload_config(f->reload) != before);
	assert_int_equal(counters(f).done, 1);
	/* A reload alone decides nothing. */
	assert_int_equal(f->n_pub, n);
	window(f, 2.0);
	assert_reason(f,
	    "threshold 1.5: 2 high, 0 low; seen 4 windows, 1 reloads, 2 ranks "
	    "joined, 0 lost");
	assert_event(f, "reload_ok", f->path);
}

static void
test_reload_gives_a_changed_parameter_to_the_kept_instance(void **state)
{
	fixture *f = *state;
	uint32_t n;

	join_job(f);
	window(f, 2.0);
	assert_levels(last(f), 4, 0, 4);
	write_config(f,
	    "jobs:\n"
	    "  - match: \"job*\"\n"
	    "    policies:\n"
	    "      - type: threshold\n"
	    "        plugin: @THRESHOLD@\n"
	    "        params: {threshold: 3, high: 8}\n");
	n = f->n_pub;
	assert_int_equal(ctl_reload_now(f->reload, false), 0);
	/* The knobs in force do not move until the next window closes. */
	assert_int_equal(f->n_pub, n);
	assert_levels(last(f), 4, 0, 4);
	window(f, 2.0);
	assert_levels(last(f), 1, 0, 1);
	window(f, 3.5);
	assert_levels(last(f), 8, 0, 8);
	assert_reason(f,
	    "threshold 3: 2 high, 0 low; seen 3 windows, 1 reloads, 2 ranks "
	    "joined, 0 lost");
	/* The new file's daemon settings are in force: defaults again. */
	assert_int_equal(ctl_reload_config(f->reload)->window_timeout_ms, 3000);
}

static void
test_reload_restarts_an_instance_that_refuses_it(void **state)
{
	fixture *f = *state;

	join_job(f);
	window(f, 2.0);
	window(f, 2.0);
	write_config(f,
	    "jobs:\n"
	    "  - match: \"job*\"\n"
	    "    policies:\n"
	    "      - type: threshold\n"
	    "        plugin: @THRESHOLD@\n"
	    "        params: {threshold: 1.5, reset_on_reload: true}\n");
	assert_int_equal(ctl_reload_now(f->reload, false), 0);
	assert_event(f, "policy_restarted",
	    "policy 'threshold' refused the new configuration (not valid in "
	    "this state) and was restarted");
	window(f, 2.0);
	assert_reason(f,
	    "threshold 1.5: 2 high, 0 low; seen 1 windows, 0 reloads, 0 ranks "
	    "joined, 0 lost");
}

/* The second policy refuses the reload and cannot start again with its
 * new x: the reload still happens, that instance is off until the next
 * one, and the first policy goes on. */
static void
test_reload_turns_off_an_instance_that_cannot_restart(void **state)
{
	fixture *f = *state;
	uint64_t errors;
	ctl_jobs_counters c;

	write_config(f,
	    "jobs:\n"
	    "  - match: \"job*\"\n"
	    "    policies:\n"
	    "      - {type: threshold, plugin: @THRESHOLD@, "
	    "params: {threshold: 1.5}}\n"
	    "      - {type: broken, plugin: @BROKEN_RELOAD@, params: {x: 0}}\n");
	assert_int_equal(ctl_reload_now(f->reload, false), 0);
	join_job(f);
	window(f, 2.0);
	write_config(f,
	    "jobs:\n"
	    "  - match: \"job*\"\n"
	    "    policies:\n"
	    "      - {type: threshold, plugin: @THRESHOLD@, "
	    "params: {threshold: 1.5}}\n"
	    "      - {type: broken, plugin: @BROKEN_RELOAD@, params: {x: 1}}\n");
	assert_int_equal(ctl_reload_now(f->reload, false), 0);
	assert_event(f, "policy_restarted",
	    "policy 'broken' refused the new configuration (not valid in this "
	    "state) and failed to restart (invalid argument): it is off until "
	    "the next reload");
	ctl_jobs_get_counters(f->jobs, &c);
	errors = c.policy_errors;
	window(f, 2.0);
	assert_reason(f,
	    "threshold 1.5: 2 high, 0 low; seen 2 windows, 1 reloads, 2 ranks "
	    "joined, 0 lost");
	assert_string_equal(last(f)->policy, "threshold");
	/* Off is not failing: it is not called at all. */
	ctl_jobs_get_counters(f->jobs, &c);
	assert_int_equal(c.policy_errors, errors);

	/* The next reload starts it again from init. */
	write_config(f,
	    "jobs:\n"
	    "  - match: \"job*\"\n"
	    "    policies:\n"
	    "      - {type: threshold, plugin: @THRESHOLD@, "
	    "params: {threshold: 1.5}}\n"
	    "      - {type: broken, plugin: @BROKEN_RELOAD@, "
	    "params: {x: 0.25}}\n");
	assert_int_equal(ctl_reload_now(f->reload, false), 0);
	assert_int_equal(counters(f).done, 3);
	window(f, 2.0);
	assert_reason(f,
	    "threshold 1.5: 2 high, 0 low; seen 3 windows, 2 reloads, 2 ranks "
	    "joined, 0 lost");
}

static void
test_reload_recreates_a_renamed_instance(void **state)
{
	fixture *f = *state;
	com_msg m;

	join_job(f);
	window(f, 2.0);
	write_config(f,
	    "jobs:\n"
	    "  - match: \"job*\"\n"
	    "    policies:\n"
	    "      - type: threshold\n"
	    "        name: gate\n"
	    "        plugin: @THRESHOLD@\n"
	    "        params: {threshold: 1.5}\n");
	assert_int_equal(ctl_reload_now(f->reload, false), 0);
	status(f, &m);
	assert_string_equal(m.u.status_reply.jobs[0].policy, "gate");
	com_msg_fini(&m);
	window(f, 2.0);
	assert_string_equal(last(f)->policy, "gate");
	assert_reason(f,
	    "threshold 1.5: 2 high, 0 low; seen 1 windows, 0 reloads, 0 ranks "
	    "joined, 0 lost");
}

static bool
is_loaded(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);

	if (h == NULL)
		return false;
	dlclose(h);
	return true;
}

static void
test_reload_replaces_a_removed_instance_and_unloads_its_plugin(void **state)
{
	fixture *f = *state;

	join_job(f);
	window(f, 2.0);
	assert_true(is_loaded(f->threshold));
	write_config(f,
	    "jobs:\n"
	    "  - match: \"job*\"\n"
	    "    policies:\n"
	    "      - type: schedule\n"
	    "        params: {levels: {0: 7}}\n");
	assert_int_equal(ctl_reload_now(f->reload, false), 0);
	/* Neither the configuration nor any job needs the plug-in now. */
	assert_false(is_loaded(f->threshold));
	window(f, 2.0);
	assert_string_equal(last(f)->policy, "");
	assert_levels(last(f), 7, 0, 7);
}

static void
test_reload_leaves_an_identical_file_alone_unless_forced(void **state)
{
	fixture *f = *state;

	join_job(f);
	window(f, 2.0);
	write_config(f, BASE_CONFIG);
	assert_int_equal(ctl_reload_now(f->reload, false), 0);
	assert_int_equal(counters(f).unchanged, 1);
	assert_int_equal(counters(f).done, 0);
	window(f, 2.0);
	assert_reason(f,
	    "threshold 1.5: 2 high, 0 low; seen 2 windows, 0 reloads, 2 ranks "
	    "joined, 0 lost");
	assert_int_equal(ctl_reload_now(f->reload, true), 0);
	assert_int_equal(counters(f).done, 1);
}

/* ---- what a reload refuses ---------------------------------------------- */

static void
test_reload_refuses_an_invalid_file_and_keeps_the_old_policies(void **state)
{
	fixture *f = *state;
	const ctl_config *before = ctl_reload_config(f->reload);
	char where[256];

	join_job(f);
	window(f, 2.0);
	write_config(f,
	    "jobs:\n"
	    "  - match: \"job*\"\n"
	    "    policies:\n"
	    "      - type: threshold\n"
	    "        plugin: @THRESHOLD@\n"
	    "        params: {threshold: -1}\n");
	assert_int_equal(ctl_reload_now(f->reload, false), BELLOWS_ECONFIG);
	assert_ptr_equal(ctl_reload_config(f->reload), before);
	assert_int_equal(counters(f).refused, 1);
	snprintf(where, sizeof(where),
	    "%s:6:29: threshold must be in [0, 1e+300], not -1", f->path);
	assert_event_is(f, "reload_refused", where);
	window(f, 2.0);
	assert_reason(f,
	    "threshold 1.5: 2 high, 0 low; seen 2 windows, 0 reloads, 2 ranks "
	    "joined, 0 lost");
}

/* Two independent errors: one refusal, whose event names the first and
 * says how many more the log holds. */
static void
test_reload_refuses_a_file_with_two_errors_in_one_event(void **state)
{
	fixture *f = *state;
	const ctl_config *before = ctl_reload_config(f->reload);
	char where[256];

	join_job(f);
	window(f, 2.0);
	write_config(f,
	    "daemon:\n"
	    "  apply_lagg: 1\n"
	    "jobs:\n"
	    "  - match: \"job*\"\n"
	    "    policies:\n"
	    "      - type: threshold\n"
	    "        plugin: @THRESHOLD@\n"
	    "        params: {threshold: -1}\n");
	assert_int_equal(ctl_reload_now(f->reload, false), BELLOWS_ECONFIG);
	assert_ptr_equal(ctl_reload_config(f->reload), before);
	assert_int_equal(counters(f).refused, 1);
	assert_int_equal(counters(f).done, 0);
	snprintf(where, sizeof(where),
	    "%s:2:3: unknown key 'apply_lagg' in daemon (did you mean 'apply_lag'?) (and 1 more)",
	    f->path);
	assert_event_is(f, "reload_refused", where);
	window(f, 2.0);
	assert_reason(f,
	    "threshold 1.5: 2 high, 0 low; seen 2 windows, 0 reloads, 2 ranks "
	    "joined, 0 lost");
}

static void
test_reload_refuses_a_broken_plugin_and_keeps_the_old_policies(void **state)
{
	fixture *f = *state;
	char where[2 * PATH_MAX];

	join_job(f);
	window(f, 2.0);
	write_config(f,
	    "jobs:\n"
	    "  - match: \"job*\"\n"
	    "    policies:\n"
	    "      - type: threshold\n"
	    "        plugin: @THRESHOLD@\n"
	    "        params: {threshold: 1.5}\n"
	    "      - type: broken\n"
	    "        plugin: @BROKEN_ABI@\n");
	assert_int_equal(ctl_reload_now(f->reload, false), BELLOWS_ECONFIG);
	/* broken_plugin.c's abi build says BELLOWS_POLICY_ABI + 97. */
	snprintf(where, sizeof(where),
	    "%s:8:17: plugin '%s' refused: policy ABI version %d", f->path,
	    f->broken_abi, BELLOWS_POLICY_ABI + 97);
	assert_event(f, "reload_refused", where);
	window(f, 2.0);
	assert_reason(f,
	    "threshold 1.5: 2 high, 0 low; seen 2 windows, 0 reloads, 2 ranks "
	    "joined, 0 lost");
}

/* Job "job-1" would get a new threshold, "job-2" a second policy whose
 * init fails: nothing changes for either. */
static void
test_reload_refuses_for_all_jobs_when_a_policy_cannot_start(void **state)
{
	fixture *f = *state;
	char where[256];

	join(f, "A", "job-1", 0, 1);
	join(f, "B", "job-2", 0, 1);
	write_config(f,
	    "jobs:\n"
	    "  - match: \"job-1\"\n"
	    "    policies:\n"
	    "      - {type: threshold, plugin: @THRESHOLD@, params: {threshold: 9}}\n"
	    "  - match: \"*\"\n"
	    "    policies:\n"
	    "      - {type: threshold, plugin: @THRESHOLD@, params: {threshold: 1}}\n"
	    "      - {type: broken, plugin: @BROKEN_INIT@}\n");
	assert_int_equal(ctl_reload_now(f->reload, false), BELLOWS_EINVAL);
	snprintf(where, sizeof(where),
	    "%s: job 'job-2': policy 'broken' failed to start: invalid "
	    "argument",
	    f->path);
	assert_event(f, "reload_refused", where);
	report(f, "A", "job-1", 0, 0, 2.0);
	assert_string_equal(last(f)->job, "job-1");
	assert_reason(f,
	    "threshold 1.5: 2 high, 0 low; seen 1 windows, 0 reloads, 1 ranks "
	    "joined, 0 lost");
	report(f, "B", "job-2", 0, 0, 2.0);
	assert_string_equal(last(f)->policy, "threshold");
}

/* ---- through the loop and inotify ---------------------------------------- */

static void
on_guard(ctl_loop *loop, uint64_t now_ms, void *arg)
{
	fixture *f = arg;

	f->guard_hit = true;
	ctl_loop_stop(loop);
}

/* Stops the loop once the awaited reloads happened and no reading is
 * out any more. */
static void
on_check(ctl_loop *loop, uint64_t now_ms, void *arg)
{
	fixture *f = arg;
	ctl_reload_counters c = counters(f);

	if (c.done >= f->wait_done && c.refused >= f->wait_refused &&
	    !ctl_reload_busy(f->reload))
		ctl_loop_stop(loop);
}

static void
run_until(fixture *f, uint64_t done, uint64_t refused)
{
	f->wait_done = done;
	f->wait_refused = refused;
	assert_int_equal(ctl_loop_run(f->loop), 0);
	assert_false(f->guard_hit);
}

static void
test_reload_follows_the_file_through_inotify(void **state)
{
	fixture *f = *state;

	assert_int_equal(ctl_loop_new(&f->loop), 0);
	assert_int_equal(ctl_watch_open(f->path, 100, ctl_reload_on_change,
			     f->reload, &f->watch),
	    0);
	assert_int_equal(ctl_watch_attach(f->watch, f->loop), 0);
	assert_int_equal(ctl_loop_add_timer(f->loop, GUARD_MS, on_guard, f), 0);
	assert_int_equal(ctl_loop_add_timer(f->loop, 10, on_check, f), 0);
	join_job(f);
	window(f, 2.0);

	/* An editor that writes a new file and renames it over: invalid
	 * first, then fixed. */
	write_file(f->tmp, "jobs: [\n");
	assert_int_equal(rename(f->tmp, f->path), 0);
	run_until(f, 0, 1);
	assert_int_equal(counters(f).done, 0);
	assert_event(f, "reload_refused", f->path);
	write_config_to(f, f->tmp,
	    "jobs:\n"
	    "  - match: \"job*\"\n"
	    "    policies:\n"
	    "      - type: threshold\n"
	    "        plugin: @THRESHOLD@\n"
	    "        params: {threshold: 3}\n");
	assert_int_equal(rename(f->tmp, f->path), 0);
	run_until(f, 1, 1);
	window(f, 2.0);
	assert_reason(f,
	    "threshold 3: 0 high, 2 low; seen 2 windows, 1 reloads, 2 ranks "
	    "joined, 0 lost");
	/* One written in place is seen as well. */
	write_config(f, BASE_CONFIG);
	run_until(f, 2, 1);
	window(f, 2.0);
	assert_reason(f,
	    "threshold 1.5: 2 high, 0 low; seen 3 windows, 2 reloads, 2 ranks "
	    "joined, 0 lost");
}

/* ---- a reload under load ------------------------------------------------- */

#define LOAD_WORLD   4
#define LOAD_WINDOWS 12

/* A schedule that moves several times; the reload in the middle changes
 * the heartbeat and another job entry only. */
#define LOAD_CONFIG                                                            \
	"daemon: {heartbeat_ms: 1000, apply_lag: 2}\n"                         \
	"jobs:\n"                                                              \
	"  - match: \"job*\"\n"                                                \
	"    policies:\n"                                                      \
	"      - type: schedule\n"                                             \
	"        params: {levels: {0: 2, 3: 1, 6: 3, 9: 0, 11: 5}}\n"          \
	"  - match: \"*\"\n"                                                   \
	"    policies:\n"                                                      \
	"      - {type: fixed, params: {level: 1}}\n"
#define LOAD_CONFIG_2                                                          \
	"daemon: {heartbeat_ms: 250, apply_lag: 2}\n"                          \
	"jobs:\n"                                                              \
	"  - match: \"other*\"\n"                                              \
	"    policies:\n"                                                      \
	"      - {type: fixed, params: {level: 6}}\n"                          \
	"  - match: \"job*\"\n"                                                \
	"    policies:\n"                                                      \
	"      - type: schedule\n"                                             \
	"        params: {levels: {0: 2, 3: 1, 6: 3, 9: 0, 11: 5}}\n"          \
	"  - match: \"*\"\n"                                                   \
	"    policies:\n"                                                      \
	"      - {type: fixed, params: {level: 2}}\n"

/* Accordion on every weight, each window's decision depending on the
 * norm of the window before; the reload changes only where the norm comes
 * from: every rank reports the same norms here, so rank 0's is the mean
 * and the decisions must not change. */
#define LOAD_ACCORDION(source)                                                 \
	"daemon: {heartbeat_ms: 1000, apply_lag: 2}\n"                         \
	"jobs:\n"                                                              \
	"  - match: \"other*\"\n"                                              \
	"    policies:\n"                                                      \
	"      - {type: fixed, params: {level: 6}}\n"                          \
	"  - match: \"job*\"\n"                                                \
	"    policies:\n"                                                      \
	"      - type: accordion\n"                                            \
	"        name: acc\n"                                                  \
	"        params: {eta: 0.3, interval: 1, critical_level: 4,\n"         \
	"                 stable_level: 1, norm_source: " source "}\n"
/* Norms of the windows: jumps at windows 3 and 7 are critical. */
static const double load_norms[LOAD_WINDOWS] = { 1, 1.1, 1.2, 3, 3.1, 3.2, 3.3,
	1, 1.05, 1.1, 1.15, 1.2 };

/* Runs "job" with LOAD_WORLD ranks over LOAD_WINDOWS windows, ranks
 * reporting in a rotating order, with configuration `conf` and window w's
 * norm norms[w] (1 + w when norms is NULL); with `conf2`, the file is
 * rewritten to it and reloaded in window 5 after two ranks reported.
 * Leaves the decisions in f->pub. */
static void
run_load(fixture *f, const char *conf, const char *conf2, const double *norms)
{
	static const char *const peers[LOAD_WORLD] = { "P0", "P1", "P2", "P3" };

	write_config(f, conf);
	assert_int_equal(ctl_reload_now(f->reload, true), 0);
	for (uint32_t r = 0; r < LOAD_WORLD; r++)
		join(f, peers[r], "job", r, LOAD_WORLD);
	for (uint64_t w = 0; w < LOAD_WINDOWS; w++) {
		for (uint32_t k = 0; k < LOAD_WORLD; k++) {
			uint32_t r = (uint32_t)(k + w) % LOAD_WORLD;

			if (conf2 != NULL && w == 5 && k == 2) {
				write_config(f, conf2);
				assert_int_equal(ctl_reload_now(f->reload,
						     false),
				    0);
			}
			report(f, peers[r], "job", r, w,
			    norms != NULL ? norms[w] : 1.0 + (double)w);
		}
	}
}

/* A second daemon next to f's, with its own file `name` holding conf. */
static fixture *
twin_new(const fixture *f, const char *name, const char *conf)
{
	fixture *g = calloc(1, sizeof(*g));
	ctl_config *cfg = NULL;
	char err[CTL_CONFIG_ERR_MAX];

	assert_non_null(g);
	memcpy(g->dir, f->dir, sizeof(g->dir));
	memcpy(g->threshold, f->threshold, sizeof(g->threshold));
	snprintf(g->path, sizeof(g->path), "%s/%s", f->dir, name);
	write_config(g, conf);
	assert_int_equal(ctl_config_load(g->path, &cfg, err, sizeof(err)), 0);
	assert_int_equal(ctl_jobs_new(cfg, 42, record, g, &g->jobs), 0);
	assert_int_equal(ctl_reload_new(g->path, &cfg, g->jobs, &g->reload), 0);
	com_msg_init(&g->reply, COM_MSG_NONE);
	return g;
}

static void
twin_destroy(fixture *g)
{
	ctl_jobs_destroy(&g->jobs);
	ctl_reload_destroy(&g->reload);
	for (uint32_t i = 0; i < g->n_pub; i++)
		com_msg_fini(&g->pub[i]);
	com_msg_fini(&g->reply);
	unlink(g->path);
	free(g);
}

/* f's and g's decisions are the same, one by one. */
static void
assert_same_decisions(const fixture *f, const fixture *g)
{
	assert_int_equal(f->n_pub, 1 + LOAD_WINDOWS);
	assert_int_equal(f->n_pub, g->n_pub);
	for (uint32_t i = 0; i < f->n_pub; i++) {
		const com_decision *a = &f->pub[i].u.decision;
		const com_decision *b = &g->pub[i].u.decision;

		assert_int_equal(a->seq, b->seq);
		assert_int_equal(a->apply_step, b->apply_step);
		assert_int_equal(a->window, b->window);
		if (!com_decision_same_state(a, b))
			fail_msg("decision %u differs: level %g vs %g", i,
			    a->level[0], b->level[0]);
		assert_string_equal(a->policy, b->policy);
		assert_string_equal(a->reason, b->reason);
	}
}

static void
test_reload_under_load_changes_no_decision_that_should_not_change(void **state)
{
	fixture *f = *state;
	/* A second, identical daemon that is never reloaded. */
	fixture *g = twin_new(f, "twin.yaml", LOAD_CONFIG);

	run_load(f, LOAD_CONFIG, LOAD_CONFIG_2, NULL);
	run_load(g, LOAD_CONFIG, NULL, NULL);
	assert_int_equal(counters(f).done, 2);
	assert_int_equal(ctl_reload_config(f->reload)->heartbeat_ms, 250);
	assert_int_equal(counters(g).done, 1);
	assert_same_decisions(f, g);
	/* The schedule did move: the runs are not trivially equal. */
	assert_levels(&f->pub[3].u.decision, 1, 0, 1);
	assert_levels(&f->pub[f->n_pub - 1].u.decision, 5, 0, 5);
	twin_destroy(g);
}

static void
test_reload_under_load_keeps_accordions_window_history(void **state)
{
	fixture *f = *state;
	fixture *g = twin_new(f, "twin.yaml", LOAD_ACCORDION("rank0"));
	fixture *h = twin_new(f, "renamed.yaml", LOAD_ACCORDION("rank0"));
	char renamed[2048];
	const char *from;

	run_load(f, LOAD_ACCORDION("rank0"), LOAD_ACCORDION("mean"),
	    load_norms);
	run_load(g, LOAD_ACCORDION("rank0"), NULL, load_norms);
	assert_int_equal(counters(f).done, 2);
	assert_same_decisions(f, g);
	/* Decision i + 1 closes window i and holds the level of window
	 * i + 1: critical (4) after the jumps of windows 3 and 7 - the
	 * latter judged after the reload, against the history kept across
	 * it - stable (1) otherwise; the bias is not selected. */
	static const double want[1 + LOAD_WINDOWS] = { 4, 4, 1, 1, 4, 1, 1, 1,
		4, 1, 1, 1, 1 };
	for (uint32_t i = 0; i < f->n_pub; i++)
		assert_levels(&f->pub[i].u.decision, want[i], 0, want[i]);

	/* The control: the same reload renaming the instance starts it
	 * afresh, without history, and window 5's decision differs. */
	snprintf(renamed, sizeof(renamed), "%s", LOAD_ACCORDION("mean"));
	from = strstr(renamed, "name: acc");
	assert_non_null(from);
	memcpy((char *)from, "name: abc", strlen("name: abc"));
	run_load(h, LOAD_ACCORDION("rank0"), renamed, load_norms);
	assert_int_equal(counters(h).done, 2);
	assert_true(!com_decision_same_state(&h->pub[6].u.decision,
	    &g->pub[6].u.decision));
	twin_destroy(h);
	twin_destroy(g);
}

/* ---- reading off the loop ------------------------------------------------ */

/* A loop with the guard and check timers, and the reload's reader thread
 * attached to it, as bellowsd runs it. */
static void
attach_reader(fixture *f)
{
	assert_int_equal(ctl_loop_new(&f->loop), 0);
	f->zctx = zmq_ctx_new();
	assert_non_null(f->zctx);
	assert_int_equal(ctl_reload_attach(f->reload, f->zctx, f->loop), 0);
	assert_int_equal(ctl_reload_attach(f->reload, f->zctx, f->loop),
	    BELLOWS_ESTATE);
	assert_int_equal(ctl_loop_add_timer(f->loop, GUARD_MS, on_guard, f), 0);
	assert_int_equal(ctl_loop_add_timer(f->loop, 10, on_check, f), 0);
}

#define THRESHOLD_3                                                            \
	"jobs:\n"                                                              \
	"  - match: \"job*\"\n"                                                \
	"    policies:\n"                                                      \
	"      - type: threshold\n"                                            \
	"        plugin: @THRESHOLD@\n"                                        \
	"        params: {threshold: 3}\n"

static void
test_reload_reads_off_the_loop_and_swaps_the_result_in(void **state)
{
	fixture *f = *state;
	const ctl_config *before = ctl_reload_config(f->reload);

	attach_reader(f);
	join_job(f);
	window(f, 2.0);
	write_config(f, THRESHOLD_3);
	ctl_reload_request(f->reload, false);
	/* The request returns at once: the reader thread has the file,
	 * and nothing changed yet. */
	assert_true(ctl_reload_busy(f->reload));
	assert_ptr_equal(ctl_reload_config(f->reload), before);
	assert_int_equal(counters(f).done, 0);
	run_until(f, 1, 0);
	assert_true(ctl_reload_config(f->reload) != before);
	assert_event(f, "reload_ok", f->path);
	window(f, 2.0);
	assert_reason(f,
	    "threshold 3: 0 high, 2 low; seen 2 windows, 1 reloads, 2 ranks "
	    "joined, 0 lost");
}

static void
test_reload_refuses_an_invalid_file_read_off_the_loop(void **state)
{
	fixture *f = *state;
	const ctl_config *before = ctl_reload_config(f->reload);
	char want[256];

	attach_reader(f);
	write_file(f->path,
	    "jobs: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
	    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]\n");
	ctl_reload_request(f->reload, false);
	run_until(f, 0, 1);
	assert_ptr_equal(ctl_reload_config(f->reload), before);
	snprintf(want, sizeof(want), "%s:1:70: nested more than 64 levels deep",
	    f->path);
	assert_event(f, "reload_refused", want);
}

static void
test_reload_coalesces_requests_that_arrive_while_one_is_out(void **state)
{
	fixture *f = *state;

	attach_reader(f);
	write_config(f, THRESHOLD_3);
	/* The first goes to the reader; the other three wait for it as one
	 * more reading, forced since one of them was. */
	ctl_reload_request(f->reload, false);
	ctl_reload_request(f->reload, false);
	ctl_reload_request(f->reload, true);
	ctl_reload_request(f->reload, false);
	assert_int_equal(counters(f).coalesced, 2);
	run_until(f, 2, 0);
	assert_int_equal(counters(f).done, 2);
	assert_int_equal(counters(f).unchanged, 0);
	assert_int_equal(counters(f).refused, 0);
}

/* Waits until `ms` milliseconds of the monotonic clock have passed: what
 * is waited for is a deadline, not another thread. */
static void
let_pass(uint64_t ms)
{
	uint64_t end = com_clock_ms() + ms;

	while (com_clock_ms() < end) {
		struct timespec ts = { .tv_nsec = 5 * 1000 * 1000 };

		nanosleep(&ts, NULL);
	}
}

static void
test_reload_abandons_a_reading_past_reload_timeout_ms(void **state)
{
	fixture *f = *state;
	const ctl_config *before;
	char want[512];

	write_config(f,
	    "daemon: {reload_timeout_ms: 100}\n"
	    "jobs:\n"
	    "  - match: \"job*\"\n"
	    "    policies:\n"
	    "      - type: threshold\n"
	    "        plugin: @THRESHOLD@\n"
	    "        params: {threshold: 1.5}\n");
	assert_int_equal(ctl_reload_now(f->reload, true), 0);
	before = ctl_reload_config(f->reload);
	attach_reader(f);
	join_job(f);
	write_config(f, THRESHOLD_3);
	ctl_reload_request(f->reload, false);
	/* The loop does not look before the deadline has passed: the
	 * reading, done or not, is then late, and its result (handed over
	 * in this same turn or later) is freed unused. */
	let_pass(150);
	run_until(f, 1, 1);
	assert_int_equal(counters(f).abandoned, 1);
	assert_int_equal(counters(f).done, 1);
	assert_ptr_equal(ctl_reload_config(f->reload), before);
	snprintf(want, sizeof(want),
	    "%s: reading took longer than reload_timeout_ms (100 ms) and was "
	    "abandoned",
	    f->path);
	assert_event_is(f, "reload_refused", want);
	/* The instance in force, which joined after the first reload,
	 * was told of none. */
	window(f, 2.0);
	assert_reason(f,
	    "threshold 1.5: 2 high, 0 low; seen 1 windows, 0 reloads, 2 ranks "
	    "joined, 0 lost");
	/* The next request is read again and taken. */
	ctl_reload_request(f->reload, false);
	run_until(f, 2, 1);
	assert_true(ctl_reload_config(f->reload) != before);
	assert_int_equal(counters(f).abandoned, 1);
}

static void
test_reload_destroys_cleanly_while_a_reading_is_out(void **state)
{
	fixture *f = *state;
	FILE *fp;

	attach_reader(f);
	/* About 14 MB of YAML, most of a second to parse: the reading is
	 * still out when the teardown destroys the reload, which cancels
	 * it, joins the thread and frees what it handed back. */
	fp = fopen(f->path, "w");
	assert_non_null(fp);
	fputs("jobs: [{policies: [{type: fixed}]}]\nx: [", fp);
	for (int i = 0; i < 990000; i++)
		fputs(i ? ",aaaaaaaaaaaaa" : "aaaaaaaaaaaaa", fp);
	fputs("]\n", fp);
	assert_int_equal(fclose(fp), 0);
	ctl_reload_request(f->reload, true);
	assert_true(ctl_reload_busy(f->reload));
}

static void
test_reload_destroy_is_null_safe(void **state)
{
	ctl_reload *r = NULL;

	ctl_reload_destroy(NULL);
	ctl_reload_destroy(&r);
	assert_null(r);
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_reload_keeps_an_unchanged_instance_and_its_state),
		T(test_reload_gives_a_changed_parameter_to_the_kept_instance),
		T(test_reload_restarts_an_instance_that_refuses_it),
		T(test_reload_turns_off_an_instance_that_cannot_restart),
		T(test_reload_recreates_a_renamed_instance),
		T(test_reload_replaces_a_removed_instance_and_unloads_its_plugin),
		T(test_reload_leaves_an_identical_file_alone_unless_forced),
		T(test_reload_refuses_an_invalid_file_and_keeps_the_old_policies),
		T(test_reload_refuses_a_file_with_two_errors_in_one_event),
		T(test_reload_refuses_a_broken_plugin_and_keeps_the_old_policies),
		T(test_reload_refuses_for_all_jobs_when_a_policy_cannot_start),
		T(test_reload_follows_the_file_through_inotify),
		T(test_reload_under_load_changes_no_decision_that_should_not_change),
		T(test_reload_under_load_keeps_accordions_window_history),
		T(test_reload_reads_off_the_loop_and_swaps_the_result_in),
		T(test_reload_refuses_an_invalid_file_read_off_the_loop),
		T(test_reload_coalesces_requests_that_arrive_while_one_is_out),
		T(test_reload_abandons_a_reading_past_reload_timeout_ms),
		T(test_reload_destroys_cleanly_while_a_reading_is_out),
		T(test_reload_destroy_is_null_safe),
	};
#undef T
	/* Refused reloads are logged as errors on purpose; the info lines
	 * of every reload and join are not interesting here. */
	ctl_log_set_level(CTL_LOG_ERROR);
	return cmocka_run_group_tests_name("reload", tests, NULL, NULL);
}
