/* support - the harness the policy tests share: a private temporary
 * directory for YAML files, configurations loaded from them as bellowsd
 * loads them, the controller's policy host run on a window, one policy's
 * ops driven directly as the host drives them, and the assertions and
 * look-ups those tests make on what comes out.
 *
 * A test's fixture begins with a sup_host; its window builder (test-specific:
 * which statistics a window carries) fills the host's `wl` and hands the
 * window to sup_run or sup_direct_run.
 */
#ifndef TEST_POL_SUPPORT_H
#define TEST_POL_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policyhost/config.h"
#include "policyhost/policy_host.h"

#define SUP_LAYERS_MAX  8 /* layers a test's job may have */
#define SUP_CONV_LAYERS 4 /* entries in sup_conv_layers */

/* Two convolutions, a bias and a fully connected weight: the host's
 * default selector (min_ndim 2) picks layers 0, 2 and 3. */
extern const com_layer_info sup_conv_layers[SUP_CONV_LAYERS];

typedef struct sup_host {
	char dir[64];                    /* private temporary directory */
	char path[128];                  /* dir/policy.yaml */
	char path2[128];                 /* dir/reload.yaml */
	const com_layer_info *layers;    /* the job's layers, borrowed */
	uint32_t n_layers;               /* entries in layers */
	uint32_t world;                  /* ranks of the job (4) */
	ctl_config *cfg;                 /* configuration started with */
	ctl_config *cfg2;                /* configuration reloaded */
	ctl_policy_set *set;             /* host-driven instances */
	com_decision state;              /* knob state in force */
	char reason[BELLOWS_REASON_MAX]; /* initial reasons */
	char policies[128];              /* last run: who gave a reason */
	char why[2048];                  /* last run: the reasons */
	bellows_window_layer wl[SUP_LAYERS_MAX]; /* the next window's layers */
	/* Direct driving of one policy's ops. */
	const bellows_policy_ops *ops; /* the policy */
	const void *config;            /* its config in force */
	void *pstate;                  /* its state */
	bool started;                  /* init succeeded: fini is due */
	bool sel[SUP_LAYERS_MAX];      /* its layer selection */
	double level[SUP_LAYERS_MAX];  /* the proposal's levels */
	double bound[SUP_LAYERS_MAX];  /* the proposal's error bounds */
	bellows_proposal prop;         /* state in force, then proposed */
} sup_host;

/* Allocates a zeroed fixture of `size` bytes that begins with its
 * sup_host, and sets that up: the temporary directory
 * /tmp/bellows-NAME-XXXXXX, a job of the n_layers (at most
 * SUP_LAYERS_MAX) `layers`, which it borrows, over 4 ranks. Returns the
 * fixture (the caller's, freed with sup_fixture_free), or NULL. */
void *sup_fixture_new(size_t size, const char *name,
    const com_layer_info *layers, uint32_t n_layers);

/* A cmocka teardown for *state, a fixture from sup_fixture_new: stops the
 * directly driven policy, destroys the set and both configurations,
 * removes the directory's files and the directory and frees the fixture.
 * Returns 0. */
int sup_fixture_free(void **state);

/* Writes `text` to `path`, failing the test if it cannot. */
void sup_write_file(const char *path, const char *text);

/* Writes `text` to `path` and loads it as bellowsd would into *ret,
 * failing the test with the parser's message if it refuses. */
void sup_load_file(const char *path, const char *text, ctl_config **ret);

/* sup_load_file into h->path and h->cfg. */
void sup_load(sup_host *h, const char *text);

/* Expects `text` (written to h->path) to be refused by the parser with
 * BELLOWS_ECONFIG and `what` somewhere in the message. */
void sup_load_refused(sup_host *h, const char *text, const char *what);

/* The same, the message exactly h->path, ":" and `what`. */
void sup_load_refused_exactly(sup_host *h, const char *text, const char *what);

/* Starts the host's set for the first job entry of h->cfg as job "job".
 * Returns ctl_policy_set_new's result. */
int sup_start(sup_host *h);

/* Expects sup_start to be refused by the init of the policy called
 * `name`: BELLOWS_EINVAL, no set, and that policy named in h->reason. */
void sup_start_refused(sup_host *h, const char *name);

/* Throws away the set and configuration, loads `text` and starts it,
 * failing the test if it does not start. */
void sup_restart(sup_host *h, const char *text);

/* Window `index` of job "job" as h->world ranks all report it, at LR 0.1
 * now and next, with h->wl as its layers; their names, sizes and shapes
 * are set from h->layers, every other field of theirs is left as the
 * test set it, and every other field of the window is 0. */
bellows_window sup_window(sup_host *h, uint64_t index);

/* Replaces the set, through the host's prepare and commit, by one for
 * h->cfg2's first job, from window `next_window` on with 4 ranks alive:
 * what a reload does. Fails the test unless every kept instance takes
 * the new config. */
void sup_reload(sup_host *h, uint64_t next_window);

/* Runs the host's set on `w` (whose layers are rewritten by the host);
 * the reasons land in h->why. Fails the test on an error or a failed
 * policy. */
void sup_run(sup_host *h, bellows_window *w);

/* Fails the test if the last run gave a reason, naming window `index`. */
void sup_assert_quiet(const sup_host *h, uint64_t index);

/* Starts the first policy of cfg's first job by calling its init, with
 * the layer selection its selector gives (in h->sel) and a proposal with
 * lr_scale 1 and everything else 0 (h->prop). Returns init's result. */
int sup_direct_start(sup_host *h, const ctl_config *cfg);

/* Runs the directly driven policy on `w` as the host does: the proposal
 * starts from the state in force with no reason, no calibration and no
 * metrics. Returns on_window's result. */
int sup_direct_run(sup_host *h, const bellows_window *w);

/* Tells the directly driven policy that h->cfg2's first policy's config
 * replaced its own, from window `next_window` on; on success that config
 * is in force. Returns on_event's result. */
int sup_direct_reload(sup_host *h, uint64_t next_window);

/* Calls the directly driven policy's fini if its init succeeded and
 * frees its state. Idempotent. */
void sup_direct_stop(sup_host *h);

/* The first metric called `name` in p, or NULL. */
const bellows_metric *sup_metric_find(const bellows_proposal *p,
    const char *name);

/* The value of metric `name` of `layer` in p; fails the test if none. */
double sup_metric(const bellows_proposal *p, const char *name, int32_t layer);

/* Overwrites a string (double) parameter of a parsed config through the
 * policy's own parameter table: how a test hands ops a config the parser
 * would refuse. Fails the test if ops has no parameter `name`. */
void sup_patch_string(const bellows_policy_ops *ops, const void *config,
    const char *name, const char *v);
void sup_patch_double(const bellows_policy_ops *ops, const void *config,
    const char *name, double v);

/* Fails the test unless the registry lists `ops` as `name`, ops passes
 * the registry's checks and it owns exactly the knobs `knobs`. */
void sup_assert_registered(const char *name, const bellows_policy_ops *ops,
    uint32_t knobs);

/* Fail the test unless `text` contains (lacks) `part`. */
void sup_assert_contains(const char *text, const char *part);
void sup_assert_lacks(const char *text, const char *part);

/* Fails the test unless got is within rel * |want| of want. */
void sup_assert_near(double got, double want, double rel);

/* Fails the test unless level[0..n) equals want[0..n) exactly. */
void sup_assert_levels(const double *level, const double *want, uint32_t n);

/* sup_assert_levels with the expected levels listed:
 * SUP_ASSERT_LEVELS(f->h.state.level, 2, 0, 2, 2). */
#define SUP_ASSERT_LEVELS(level, ...)                                          \
	sup_assert_levels((level), (const double[]){ __VA_ARGS__ },            \
	    (uint32_t)(sizeof((const double[]){ __VA_ARGS__ }) /               \
		sizeof(double)))

#endif /* TEST_POL_SUPPORT_H */
