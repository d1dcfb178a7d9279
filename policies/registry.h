/* registry - the one table of built-in policies, and the checks every
 * policy's ops must pass before the host uses it.
 */
#ifndef POL_REGISTRY_H
#define POL_REGISTRY_H

#include <bellows/policy.h>

#include <stddef.h>

/* Returns the built-in policy called `name`, or NULL. */
const bellows_policy_ops *pol_registry_find(const char *name);

/* Returns the i-th built-in policy (0-based), or NULL past the end. */
const bellows_policy_ops *pol_registry_at(size_t i);

/* Checks an ops struct (built-in or loaded): ABI version, name syntax,
 * required functions, a well-formed parameter table (types, offsets inside
 * config_size, min <= def <= max). Returns 0, or BELLOWS_EINVAL with a
 * message in errbuf (NUL-terminated, truncated to errlen). */
int pol_registry_check(const bellows_policy_ops *ops, char *errbuf,
    size_t errlen);

/* The n layers at `layers`, layer_size bytes apart, as a policy of ops'
 * ABI steps through them: `layers` itself for ABI 6 and later (they step
 * by layer_size), and for ABI 4 and 5 while layer_size is
 * BELLOWS_WINDOW_LAYER_SIZE_5; else their prefixes packed at that size in
 * *buf (grown as needed, *cap bytes; the caller frees it), with
 * *ret_size the stride handed. NULL when *buf cannot grow. */
const bellows_window_layer *pol_registry_layers(const bellows_policy_ops *ops,
    const bellows_window_layer *layers, uint32_t n, size_t layer_size,
    size_t *ret_size, void **buf, size_t *cap);

/* The window as a policy of ops' ABI steps through it: w itself, or *tmp,
 * a copy of w whose layers pol_registry_layers packed in *buf. NULL when
 * *buf cannot grow. The result lives as long as w, *tmp and *buf. */
const bellows_window *pol_registry_window(const bellows_policy_ops *ops,
    const bellows_window *w, bellows_window *tmp, void **buf, size_t *cap);

/* Value of a piecewise function at window w: the value of the last piece
 * starting at or before w, or `def` if none does. */
double pol_steps_at(const bellows_steps *steps, uint64_t w, double def);

#endif /* POL_REGISTRY_H */
