/* plugin - loading out-of-tree policies, see plugin.h.
 *
 * dlopen keeps its own count per shared object; ours exists so that the
 * configuration code can share one loaded plug-in between the entries
 * that name it and so that the one dlclose happens when we, not the
 * loader, know nobody needs the code any more.
 */
#include "plugin.h"

#include "policies/registry.h"

#include <bellows/error.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ctl_plugin {
	unsigned refs;                 /* holders; closed at zero */
	void *handle;                  /* dlopen's handle */
	const bellows_policy_ops *ops; /* what the entry function returned */
	char *path;                    /* file it was loaded from */
	ctl_worker *worker;            /* where its instances run */
};

static bool plugin_in_process; /* see ctl_plugin_set_in_process */

void
ctl_plugin_set_in_process(bool in_process)
{
	plugin_in_process = in_process;
}

bool
ctl_plugin_in_process(void)
{
	return plugin_in_process;
}

int
ctl_plugin_open(const char *path, ctl_plugin **ret_plugin, char *errbuf,
    size_t errlen)
{
	bellows_policy_entry_fn *entry;
	const bellows_policy_ops *ops;
	const char *dlerr;
	char why[256];
	ctl_plugin *p;
	void *handle, *sym;
	int r;

	/* A plug-in that crashes while loading must crash a child. */
	if (!plugin_in_process &&
	    (r = ctl_worker_probe(path, errbuf, errlen)) != 0)
		return r;
	dlerror();
	handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (handle == NULL) {
		dlerr = dlerror();
		snprintf(errbuf, errlen, "plugin '%s' cannot be loaded: %s",
		    path, dlerr != NULL ? dlerr : "unknown error");
		return BELLOWS_EIO;
	}
	/* ISO C has no conversion from void * to a function pointer;
	 * POSIX guarantees the representation, so copy the bits. */
	sym = dlsym(handle, BELLOWS_POLICY_ENTRY);
	if (sym == NULL) {
		snprintf(errbuf, errlen,
		    "plugin '%s' does not export '%s' (is it a bellows "
		    "policy?)",
		    path, BELLOWS_POLICY_ENTRY);
		r = BELLOWS_EINVAL;
		goto fail;
	}
	memcpy(&entry, &sym, sizeof(entry));
	ops = entry();
	if (ops == NULL) {
		snprintf(errbuf, errlen, "plugin '%s': %s() returned no policy",
		    path, BELLOWS_POLICY_ENTRY);
		r = BELLOWS_EINVAL;
		goto fail;
	}
	if ((r = pol_registry_check(ops, why, sizeof(why))) != 0) {
		snprintf(errbuf, errlen, "plugin '%s' refused: %s", path, why);
		goto fail;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL || (p->path = strdup(path)) == NULL ||
	    ctl_worker_get(path, &p->worker) != 0) {
		if (p != NULL)
			free(p->path);
		free(p);
		r = BELLOWS_ENOMEM;
		goto fail;
	}
	p->refs = 1;
	p->handle = handle;
	p->ops = ops;
	*ret_plugin = p;
	return 0;
fail:
	dlclose(handle);
	return r;
}

ctl_plugin *
ctl_plugin_hold(ctl_plugin *p)
{
	p->refs++;
	return p;
}

void
ctl_plugin_close(ctl_plugin **p)
{
	ctl_plugin *pl;

	if (p == NULL || *p == NULL)
		return;
	pl = *p;
	*p = NULL;
	if (--pl->refs > 0)
		return;
	ctl_worker_put(&pl->worker);
	dlclose(pl->handle);
	free(pl->path);
	free(pl);
}

const bellows_policy_ops *
ctl_plugin_ops(const ctl_plugin *p)
{
	return p->ops;
}

const char *
ctl_plugin_path(const ctl_plugin *p)
{
	return p->path;
}

ctl_worker *
ctl_plugin_worker(const ctl_plugin *p)
{
	return p->worker;
}

int
ctl_plugin_check(const ctl_plugin *p, const void *config, char *err,
    size_t errlen)
{
	if (p->ops->check == NULL)
		return 0;
	if (plugin_in_process)
		return p->ops->check(config, err, errlen);
	return ctl_worker_check(p->path, config, p->ops->config_size, err,
	    errlen);
}
