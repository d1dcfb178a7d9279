/* plugin - an out-of-tree policy type: a shared object that exports
 * BELLOWS_POLICY_ENTRY, loaded with dlopen and checked like a built-in.
 *
 * A loaded plug-in is reference-counted. Each configuration holds one
 * reference per plug-in it names, and jobs run policies through their
 * configuration, so the shared object stays mapped while any instance
 * might still call into it, and is closed when the last holder lets go.
 * This is the only module of bellowsd that calls dlopen. A ctl_plugin
 * belongs to the one configuration that loaded it (another configuration
 * naming the same file loads its own; dlopen shares the mapping), and one
 * thread at a time holds a configuration: bellowsd's reader thread loads
 * plug-ins while it reads a file, and the event loop uses and drops them
 * once it has the configuration. So the reference count needs no lock.
 *
 * bellowsd maps a plug-in only to read its ops (parameter table, knobs,
 * sizes) and check them; it never calls init, on_window, on_event or fini
 * itself. Those run in the plug-in's worker process (worker.h), shared by
 * every plug-in object of the same file (the worker registry is the one
 * part safe to use from the reader thread). Before the shared object is
 * mapped here, a worker process loads it first (ctl_worker_probe), so that
 * a plug-in whose constructors or entry function crash or hang is refused
 * without taking the caller down. Tools that run policies themselves
 * (`bellows replay`) switch this off with ctl_plugin_set_in_process.
 */
#ifndef CTL_PLUGIN_H
#define CTL_PLUGIN_H

#include "worker.h"

#include <bellows/policy.h>

#include <stdbool.h>
#include <stddef.h>

typedef struct ctl_plugin ctl_plugin;

/* Loads the shared object at `path` in a worker process first (unless
 * policies run in this process, see ctl_plugin_set_in_process), then here
 * (RTLD_NOW | RTLD_LOCAL), calls its entry function and checks the ops it
 * returns with pol_registry_check, and takes a reference to its worker.
 * On success *ret_plugin holds one reference (drop it with
 * ctl_plugin_close). On failure *ret_plugin is untouched, the object is
 * closed again, errbuf holds a message naming the file, and the return is
 * BELLOWS_EIO (it cannot be loaded, or its loading crashed or hung in the
 * worker), BELLOWS_EINVAL (no entry symbol, no
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

/* Runs the plug-in's check op (if any) on a parsed `config`: in a child
 * worker (ctl_worker_check), or here when plug-ins run in this process.
 * Returns 0, the check's error with its message in err (errlen bytes),
 * or BELLOWS_EIO when the check crashed or hung in the child (err says
 * so), BELLOWS_ENOMEM, BELLOWS_ESYS. */
int ctl_plugin_check(const ctl_plugin *p, const void *config, char *err,
    size_t errlen);

/* The worker process the plug-in's instances run in (valid while a
 * reference is held). */
ctl_worker *ctl_plugin_worker(const ctl_plugin *p);

/* Chooses where plug-in policies run, process-wide: false (the default,
 * bellowsd) in their worker processes; true in this process, for tools
 * that replay history and may crash with the plug-in (`bellows replay`).
 * Call before the first plug-in is opened. */
void ctl_plugin_set_in_process(bool in_process);

/* True when plug-in policies run in this process. */
bool ctl_plugin_in_process(void);

#endif /* CTL_PLUGIN_H */
