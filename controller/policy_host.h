/* policy_host - runs a job's configured policy instances and merges their
 * proposals into one knob state.
 *
 * The host owns each instance's state (allocated from ops->state_size) and
 * its layer selection. Every knob has exactly one owner (checked when the
 * configuration was parsed), so merging is copying each policy's owned
 * knobs out of its proposal. Pure computation: no sockets, files or
 * clocks, which is what lets `bellows replay` reproduce the daemon.
 */
#ifndef CTL_POLICY_HOST_H
#define CTL_POLICY_HOST_H

#include "config.h"
#include "msg.h"

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
int ctl_policy_set_new(const ctl_job_conf *jc, const char *job,
    uint32_t world, const com_layer_info *layers, uint32_t n_layers,
    com_decision *state, char *reason, size_t reason_len,
    ctl_policy_set **ret_set);

/* Runs every instance on window `w` in configured order. `w->layers` is
 * borrowed and its `selected` flags are rewritten per instance. `state`
 * holds the state in force and receives the merged new state. `policies`
 * receives the comma-separated names of instances that gave a reason,
 * `reason` their reasons joined by "; ". A policy that fails is logged by
 * the caller through the returned count of failures (*ret_failed) and
 * changes nothing. Returns 0 or BELLOWS_ENOMEM. */
int ctl_policy_set_run(ctl_policy_set *set, bellows_window *w,
    com_decision *state, char *policies, size_t policies_len, char *reason,
    size_t reason_len, uint32_t *ret_failed);

/* Names of the configured instances, comma-separated, into buf. */
void ctl_policy_set_names(const ctl_policy_set *set, char *buf, size_t len);

/* Calls fini on every instance and frees the set. NULL-safe. */
void ctl_policy_set_destroy(ctl_policy_set **set);

#endif /* CTL_POLICY_HOST_H */
