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

/* Value of a piecewise function at window w: the value of the last piece
 * starting at or before w, or `def` if none does. */
double pol_steps_at(const bellows_steps *steps, uint64_t w, double def);

#endif /* POL_REGISTRY_H */
