/* plugin - an out-of-tree policy type: a shared object that exports
 * BELLOWS_POLICY_ENTRY, loaded with dlopen and checked like a built-in.
 *
 * A loaded plug-in is reference-counted. Each configuration holds one
 * reference per plug-in it names, and jobs run policies through their
 * configuration, so the shared object stays mapped while any instance
 * might still call into it, and is closed when the last holder lets go.
 * This is the only module that calls dlopen. A ctl_plugin belongs to the
 * one configuration that loaded it (another configuration naming the same
 * file loads its own; dlopen shares the mapping), and one thread at a time
 * holds a configuration: bellowsd's reader thread loads plug-ins while it
 * reads a file, and the event loop uses and drops them once it has the
 * configuration. So the reference count needs no lock.
 */
#ifndef CTL_PLUGIN_H
#define CTL_PLUGIN_H

#include <bellows/policy.h>

#include <stddef.h>

typedef struct ctl_plugin ctl_plugin;

/* Loads the shared object at `path` (RTLD_NOW | RTLD_LOCAL), calls its
 * entry function and checks the ops it returns with pol_registry_check.
 * On success *ret_plugin holds one reference (drop it with
 * ctl_plugin_close). On failure *ret_plugin is untouched, the object is
 * closed again, errbuf holds a message naming the file, and the return is
 * BELLOWS_EIO (it cannot be loaded), BELLOWS_EINVAL (no entry symbol, no
 * ops, or ops that fail the checks) or BELLOWS_ENOMEM. */
int ctl_plugin_open(const char *path, ctl_plugin **ret_plugin, char *errbuf,
    size_t errlen);

/* Takes another reference to p and returns p. */
ctl_plugin *ctl_plugin_hold(ctl_plugin *p);

/* Drops one reference and sets *p to NULL; the last one closes the shared
 * object, after which its ops must not be used. NULL-safe. */
void ctl_plugin_close(ctl_plugin **p);

/* The policy type the plug-in provides (valid while a reference is held). */
const bellows_policy_ops *ctl_plugin_ops(const ctl_plugin *p);

/* The path it was loaded from (valid while a reference is held). */
const char *ctl_plugin_path(const ctl_plugin *p);

#endif /* CTL_PLUGIN_H */
