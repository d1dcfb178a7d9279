/* policy_host - runs a job's configured policy instances and merges their
 * proposals into one knob state.
 *
 * The host owns each instance's state (allocated from ops->state_size) and
 * its layer selection. Every knob has exactly one owner (checked when the
 * configuration was parsed), so merging is copying each policy's owned
 * knobs out of its proposal, and keeping the metrics it computed. Pure
 * computation (it only logs the metrics it drops): no sockets, files or
 * clocks, which is what lets `bellows replay` reproduce the daemon.
 *
 * A reload replaces a set in two steps, so that a daemon can refuse a new
 * configuration for all its jobs without having touched any of them:
 * ctl_policy_set_prepare builds the new set next to the old one (starting
 * the instances that are new), and ctl_policy_set_commit moves the state of
 * the instances that stay into it and retires the old set.
 */
#ifndef CTL_POLICY_HOST_H
#define CTL_POLICY_HOST_H

#include "config.h"
#include "common/msg.h"

#include <bellows/policy.h>

#include <stddef.h>

typedef struct ctl_policy_set ctl_policy_set;

/* Creates the instances of `jc` for a job with the given layer table and
 * calls each init. `state` (a decision with n_layers entries, lr_scale 1)
 * receives the merged initial state; `reason` (reason_len bytes) the
 * policies' initial reasons. Returns 0, BELLOWS_ENOMEM, or the first
 * init's error (with its policy named in reason). On failure nothing is
 * left allocated and *ret_set is untouched. The set borrows jc: keep the
 * configuration alive while the set lives. */
int ctl_policy_set_new(const ctl_job_conf *jc, const char *job, uint32_t world,
    const com_layer_info *layers, uint32_t n_layers, com_decision *state,
    char *reason, size_t reason_len, ctl_policy_set **ret_set);

/* The bytes a set for `jc` holds for a job of `n_layers` layers: the
 * scratch proposal, and per instance its state (ops->state_size), its
 * layer selection and its metrics. What a job's admission counts for its
 * policies. */
size_t ctl_policy_set_bytes(const ctl_job_conf *jc, uint32_t n_layers);

/* Prepares the set that replaces `old` (NULL if the job had none) after a
 * reload, from the job's entry `jc` in the new configuration. An instance
 * of `old` that is the same instance in jc (ctl_policy_conf_same_instance)
 * is marked to be kept: it is not touched until commit. Every other
 * instance is created and initialised now against `state`, the knob state
 * in force, which is not changed (a reload alone changes no knob: the
 * initial proposals are dropped). Layer selections are computed from jc.
 * Returns 0, BELLOWS_ENOMEM, or the first failing init's error (the policy
 * named in reason); on failure nothing is left allocated and old is as it
 * was. job, layers and state are borrowed until the set is committed or
 * destroyed; jc while the set lives. A prepared set must be committed
 * against the same `old` before it runs, or destroyed. */
int ctl_policy_set_prepare(const ctl_policy_set *old, const ctl_job_conf *jc,
    const char *job, uint32_t world, const com_layer_info *layers,
    uint32_t n_layers, const com_decision *state, char *reason,
    size_t reason_len, ctl_policy_set **ret_set);

/* Completes a reload: each kept instance's state moves from *old into
 * set, and the instance is told (on_event RELOAD, with `next_window` and
 * `ranks_alive`) that it now runs with the new config. An instance that
 * refuses is finalised and restarted from init with the new config (its
 * initial proposal dropped); if that init fails too, the instance stays
 * off until the next reload. Then the instances of *old that were not
 * kept are finalised and *old is freed and set to NULL (NULL-safe).
 * Returns the number of instances that refused, described in `note`
 * (note_len bytes, "" when none). */
uint32_t ctl_policy_set_commit(ctl_policy_set *set, ctl_policy_set **old,
    uint64_t next_window, uint32_t ranks_alive, char *note, size_t note_len);

/* Runs every instance on window `w` in configured order. When w->lr is
 * finite and differs from the LR of the last window this set (or the set
 * it replaced on reload) ran with a finite LR, every instance with an
 * on_event is first told BELLOWS_EVENT_LR_CHANGE (lr_old, lr_new, window
 * w->window); an instance refusing it counts as a failure in *ret_failed
 * and still runs on the window. `w->layers` is
 * borrowed and its `selected` flags are rewritten per instance; its
 * layer_size is set to this build's bellows_window_layer (policies of ABI
 * 4 and 5 get a copy at their stride, pol_registry_window). `state`
 * holds the state in force and receives the merged new state; its
 * calibrate_steps is the SIZE_THRESHOLD owner's request of this window
 * (0 when none asks, or the owner failed). Each instance's proposal
 * starts with calibrate_steps and n_metrics 0; its valid metrics are kept
 * for ctl_policy_set_metrics, the invalid ones (name outside
 * [a-z0-9_]{1,31}, a value not finite, a layer outside -1..n_layers-1)
 * dropped with a log line. `policies`
 * receives the comma-separated names of instances that gave a reason,
 * `reason` their reasons joined by "; ". A policy that fails is logged by
 * the caller through the returned count of failures (*ret_failed) and
 * changes nothing. Returns 0 or BELLOWS_ENOMEM. */
int ctl_policy_set_run(ctl_policy_set *set, bellows_window *w,
    com_decision *state, char *policies, size_t policies_len, char *reason,
    size_t reason_len, uint32_t *ret_failed);

/* The metrics the instances proposed in the last ctl_policy_set_run, in
 * configured order, each named by its instance (`policy`); *ret_n gets
 * their count. Borrowed: valid until the next run or the set's
 * destruction. NULL-safe (no metrics). */
const com_metric *ctl_policy_set_metrics(const ctl_policy_set *set,
    uint32_t *ret_n);

/* Tells every running instance that has an on_event about `ev` (a rank
 * lost or joined; LR changes are sent by ctl_policy_set_run). Returns the
 * number of instances that returned an error; nothing else follows from one. */
uint32_t ctl_policy_set_event(ctl_policy_set *set, const bellows_event *ev);

/* The layer statistics none of the set's instances reads, for the
 * decisions' stats_skip: the bits (bellows_stat_index order) of
 * BELLOWS_LAYER_STATS outside the union of the instances' stats_read. An
 * instance whose ops declare nothing (stats_read without
 * BELLOWS_STATS_DECLARED) reads every statistic, so the result is 0; a
 * NULL set (a job without policies) reads none. Instances that are off
 * (their init failed) count too: a reload or restart may bring them
 * back. A set of a job entry with `all_stats: true` skips nothing. */
uint64_t ctl_policy_set_stats_skip(const ctl_policy_set *set);

/* Names of the configured instances, comma-separated, into buf. */
void ctl_policy_set_names(const ctl_policy_set *set, char *buf, size_t len);

/* Calls fini on every instance and frees the set. NULL-safe. */
void ctl_policy_set_destroy(ctl_policy_set **set);

#endif /* CTL_POLICY_HOST_H */
