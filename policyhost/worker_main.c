/* worker_main - bellows-plugin-worker: runs one out-of-tree policy library
 * for bellowsd, so that a plug-in that crashes, hangs or eats memory
 * takes only this process down.
 *
 *   bellows-plugin-worker --serve PATH --memory-mb N   (fd 3: socketpair)
 *   bellows-plugin-worker --probe PATH --memory-mb N
 *   bellows-plugin-worker --check PATH --memory-mb N   (fd 3: socketpair)
 *
 * --serve caps the address space (RLIMIT_AS), loads the plug-in, says
 * hello (plugin_wire.h) and then answers bellowsd's requests one at a
 * time, in order, calling the plug-in's init, on_window, on_event and
 * fini against state it allocates itself, until its socket closes.
 * --probe only loads the plug-in and checks its ops, and exits 0 (good)
 * or CTL_PWIRE_EXIT_REFUSED; a crash shows in its wait status. --check
 * loads it, reads one CHECK frame (a parsed config) and answers with the
 * ops' check. Usage
 * errors exit 2; the other CTL_PWIRE_EXIT_* codes say why a serving
 * worker gave up.
 *
 * It is started by bellowsd (worker.c), not by people; it exits when
 * bellowsd goes (PR_SET_PDEATHSIG and EOF).
 */
#include "plugin_wire.h"
#include "policies/registry.h"

#include <bellows/error.h>
#include <bellows/policy.h>

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#define WORKER_FD 3 /* the socketpair end bellowsd gave us */

/* One policy instance living here. */
typedef struct instance {
	uint32_t id;  /* bellowsd's name for it */
	void *state;  /* ops->state_size bytes */
	void *config; /* the config it runs with */
	bool live;    /* init succeeded, fini is due */
} instance;

typedef struct worker {
	const bellows_policy_ops *ops; /* the plug-in's */
	instance *inst;                /* n used of cap */
	size_t n, cap;                 /* instances */
	uint8_t *in;                   /* request payload */
	size_t in_cap;                 /* bytes allocated at in */
	ctl_pwire_buf out;             /* reply */
	bellows_window_layer *layers;  /* decoded layers */
	size_t layers_cap;             /* entries at layers */
	uint32_t *shapes;              /* decoded shapes */
	size_t shapes_cap;             /* entries at shapes */
	uint64_t *arrays;              /* decoded array statistics */
	size_t arrays_cap;             /* values at arrays */
	void *old_layers;              /* layers at an older policy ABI's
					* stride (pol_registry_window) */
	size_t old_cap;                /* bytes allocated at old_layers */
	bellows_proposal prop;         /* decoded proposal */
	size_t prop_cap;               /* layers allocated in prop */
} worker;

static void
worker_limit(const char *mb_text)
{
	char *end;
	unsigned long long mb = strtoull(mb_text, &end, 10);
	struct rlimit rl;

	if (*end != '\0' || mb == 0)
		return;
#if defined(__SANITIZE_ADDRESS__)
	/* AddressSanitizer reserves terabytes of address space. */
	(void)rl;
	fprintf(stderr,
	    "bellows-plugin-worker: built with AddressSanitizer: "
	    "no memory cap\n");
#else
	rl.rlim_cur = rl.rlim_max = (rlim_t)mb << 20;
	if (setrlimit(RLIMIT_AS, &rl) != 0)
		fprintf(stderr, "bellows-plugin-worker: setrlimit: %s\n",
		    strerror(errno));
#endif
}

/* Loads the plug-in; exits 1 with a message when it is refused. */
static const bellows_policy_ops *
worker_load(const char *path)
{
	bellows_policy_entry_fn *entry;
	const bellows_policy_ops *ops;
	char why[256];
	void *handle, *sym;

	handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (handle == NULL) {
		fprintf(stderr, "bellows-plugin-worker: '%s': %s\n", path,
		    dlerror());
		exit(CTL_PWIRE_EXIT_REFUSED);
	}
	sym = dlsym(handle, BELLOWS_POLICY_ENTRY);
	if (sym == NULL)
		exit(CTL_PWIRE_EXIT_REFUSED);
	memcpy(&entry, &sym, sizeof(entry));
	ops = entry();
	if (ops == NULL || pol_registry_check(ops, why, sizeof(why)) != 0)
		exit(CTL_PWIRE_EXIT_REFUSED);
	return ops;
}

static bool
worker_read(void *buf, size_t len)
{
	size_t off = 0;

	while (off < len) {
		ssize_t n = read(WORKER_FD, (uint8_t *)buf + off, len - off);

		if (n > 0)
			off += (size_t)n;
		else if (n < 0 && errno == EINTR)
			continue;
		else
			return false;
	}
	return true;
}

static void
worker_send(worker *wk)
{
	size_t off = 0;

	if (ctl_pwire_end(&wk->out) != 0)
		exit(CTL_PWIRE_EXIT_NOMEM);
	while (off < wk->out.len) {
		ssize_t n = write(WORKER_FD, wk->out.data + off,
		    wk->out.len - off);

		if (n > 0)
			off += (size_t)n;
		else if (n < 0 && errno == EINTR)
			continue;
		else
			exit(0); /* bellowsd is gone */
	}
}

static instance *
worker_find(worker *wk, uint32_t id)
{
	for (size_t i = 0; i < wk->n; i++)
		if (wk->inst[i].id == id)
			return &wk->inst[i];
	return NULL;
}

static void
worker_drop(worker *wk, instance *in)
{
	if (in->live && wk->ops->fini != NULL)
		wk->ops->fini(in->state, in->config);
	free(in->state);
	free(in->config);
	*in = wk->inst[--wk->n];
}

/* Reads a copy of config (config_size bytes) from r. */
static void *
worker_config(worker *wk, ctl_pwire_reader *r)
{
	uint32_t size;
	void *config;

	if (ctl_pwire_get(r, &size, sizeof(size)) != 0 ||
	    size != wk->ops->config_size)
		exit(CTL_PWIRE_EXIT_PROTO);
	config = calloc(1, size > 0 ? size : 1);
	if (config == NULL || ctl_pwire_get(r, config, size) != 0)
		exit(CTL_PWIRE_EXIT_PROTO);
	return config;
}

/* Decodes a proposal of n layers into wk->prop. */
static void
worker_proposal(worker *wk, ctl_pwire_reader *r, uint32_t n)
{
	bellows_proposal *p = &wk->prop;

	if (n > wk->prop_cap || p->level == NULL) {
		free(p->level);
		free(p->error_bound);
		free(p->resid_group);
		free(p->resid_phi);
		free(p->resid_rows);
		free(p->resid_cols);
		p->level = calloc(n ? n : 1, sizeof(double));
		p->error_bound = calloc(n ? n : 1, sizeof(double));
		p->resid_group = calloc(n ? n : 1, sizeof(uint32_t));
		p->resid_phi = calloc(n ? n : 1, sizeof(double));
		p->resid_rows = calloc(n ? n : 1, sizeof(double));
		p->resid_cols = calloc(n ? n : 1, sizeof(double));
		if (p->level == NULL || p->error_bound == NULL ||
		    p->resid_group == NULL || p->resid_phi == NULL ||
		    p->resid_rows == NULL || p->resid_cols == NULL)
			exit(CTL_PWIRE_EXIT_NOMEM);
		wk->prop_cap = n;
	}
	if (p->codec_table == NULL &&
	    (p->codec_table = malloc(BELLOWS_CODEC_TABLE_MAX)) == NULL)
		exit(CTL_PWIRE_EXIT_NOMEM);
	p->n_layers = n;
	if (ctl_pwire_get_proposal(r, p) != 0)
		exit(CTL_PWIRE_EXIT_PROTO);
}

static void
worker_layers(worker *wk, ctl_pwire_reader *r, uint32_t n)
{
	if (n > wk->layers_cap) {
		free(wk->layers);
		wk->layers = calloc(n, sizeof(*wk->layers));
		if (wk->layers == NULL)
			exit(CTL_PWIRE_EXIT_NOMEM);
		wk->layers_cap = n;
	}
	if (ctl_pwire_get_layers(r, wk->layers, n, &wk->shapes, &wk->shapes_cap,
		&wk->arrays, &wk->arrays_cap) != 0)
		exit(CTL_PWIRE_EXIT_PROTO);
}

static void
worker_reply(worker *wk, int32_t rc, bool proposal)
{
	ctl_pwire_begin(&wk->out, CTL_PWIRE_REPLY, 0);
	ctl_pwire_put(&wk->out, &rc, sizeof(rc));
	if (proposal && rc == 0) {
		wk->prop.reason[sizeof(wk->prop.reason) - 1] = '\0';
		ctl_pwire_put_proposal(&wk->out, &wk->prop);
	}
	worker_send(wk);
}

static void
worker_init(worker *wk, uint32_t id, ctl_pwire_reader *r)
{
	bellows_job_info info;
	instance *in;
	int rc;

	if (worker_find(wk, id) != NULL)
		exit(CTL_PWIRE_EXIT_PROTO);
	if (wk->n == wk->cap) {
		size_t cap = wk->cap ? wk->cap * 2 : 16;
		instance *grown = realloc(wk->inst, cap * sizeof(*grown));

		if (grown == NULL)
			exit(CTL_PWIRE_EXIT_NOMEM);
		wk->inst = grown;
		wk->cap = cap;
	}
	in = &wk->inst[wk->n++];
	*in = (instance){ .id = id };
	in->config = worker_config(wk, r);
	in->state = calloc(1, wk->ops->state_size ? wk->ops->state_size : 1);
	if (in->state == NULL)
		exit(CTL_PWIRE_EXIT_NOMEM);
	memset(&info, 0, sizeof(info));
	if (ctl_pwire_get_str(r, &info.job) != 0 ||
	    ctl_pwire_get(r, &info.world, sizeof(info.world)) != 0 ||
	    ctl_pwire_get(r, &info.n_layers, sizeof(info.n_layers)) != 0)
		exit(CTL_PWIRE_EXIT_PROTO);
	worker_layers(wk, r, info.n_layers);
	info.layers = pol_registry_layers(wk->ops, wk->layers, info.n_layers,
	    sizeof(*wk->layers), &info.layer_size, &wk->old_layers,
	    &wk->old_cap);
	if (info.layers == NULL)
		exit(CTL_PWIRE_EXIT_NOMEM);
	worker_proposal(wk, r, info.n_layers);
	rc = wk->ops->init(in->state, in->config, &info, &wk->prop);
	if (rc == 0)
		in->live = true;
	else
		worker_drop(wk, in);
	worker_reply(wk, rc, true);
}

static void
worker_window(worker *wk, uint32_t id, ctl_pwire_reader *r)
{
	instance *in = worker_find(wk, id);
	bellows_comm_sample *samples = NULL;
	bellows_window w, tmp;
	const bellows_window *pw;
	const uint8_t *comm;
	int rc;

	if (in == NULL || ctl_pwire_get(r, &w, sizeof(w)) != 0 ||
	    ctl_pwire_get_str(r, &w.job) != 0)
		exit(CTL_PWIRE_EXIT_PROTO);
	worker_layers(wk, r, w.n_layers);
	w.layers = wk->layers;
	w.layer_size = sizeof(bellows_window_layer);
	/* The samples are read in place: copy them to aligned memory. */
	if (ctl_pwire_view(r, sizeof(bellows_comm_sample) * w.n_comm, &comm) !=
	    0)
		exit(CTL_PWIRE_EXIT_PROTO);
	if (w.n_comm > 0) {
		samples = malloc(sizeof(*samples) * w.n_comm);
		if (samples == NULL)
			exit(CTL_PWIRE_EXIT_NOMEM);
		memcpy(samples, comm, sizeof(*samples) * w.n_comm);
	}
	w.comm = samples;
	worker_proposal(wk, r, w.n_layers);
	pw = pol_registry_window(wk->ops, &w, &tmp, &wk->old_layers,
	    &wk->old_cap);
	if (pw == NULL)
		exit(CTL_PWIRE_EXIT_NOMEM);
	rc = wk->ops->on_window(in->state, in->config, pw, &wk->prop);
	free(samples);
	worker_reply(wk, rc, true);
}

static void
worker_event(worker *wk, uint32_t id, ctl_pwire_reader *r)
{
	instance *in = worker_find(wk, id);
	bellows_event ev;
	uint32_t size;
	void *config = NULL;
	int rc = 0;

	if (in == NULL || ctl_pwire_get(r, &ev, sizeof(ev)) != 0 ||
	    ctl_pwire_get(r, &size, sizeof(size)) != 0)
		exit(CTL_PWIRE_EXIT_PROTO);
	if (size > 0) {
		if (size != wk->ops->config_size)
			exit(CTL_PWIRE_EXIT_PROTO);
		config = calloc(1, size);
		if (config == NULL || ctl_pwire_get(r, config, size) != 0)
			exit(CTL_PWIRE_EXIT_PROTO);
	}
	if (wk->ops->on_event != NULL)
		rc = wk->ops->on_event(in->state,
		    config != NULL ? config : in->config, &ev);
	if (config != NULL && rc == 0) {
		free(in->config);
		in->config = config;
	} else {
		free(config);
	}
	worker_reply(wk, rc, false);
}

static int
worker_serve(const char *path)
{
	ctl_pwire_hello hello = {
		.abi = BELLOWS_POLICY_ABI,
		.window_size = sizeof(bellows_window),
		.layer_size = sizeof(bellows_window_layer),
		.comm_size = sizeof(bellows_comm_sample),
		.event_size = sizeof(bellows_event),
		.metric_size = sizeof(bellows_metric),
		.pid = (uint32_t)getpid(),
	};
	worker wk = { 0 };
	ctl_pwire_header h;

	wk.ops = worker_load(path);
	ctl_pwire_begin(&wk.out, CTL_PWIRE_HELLO, 0);
	ctl_pwire_put(&wk.out, &hello, sizeof(hello));
	worker_send(&wk);
	while (worker_read(&h, sizeof(h))) {
		ctl_pwire_reader r;

		if (h.magic != CTL_PWIRE_MAGIC || h.len > CTL_PWIRE_PAYLOAD_MAX)
			return CTL_PWIRE_EXIT_PROTO;
		if (h.len > wk.in_cap) {
			free(wk.in);
			wk.in = malloc(h.len);
			if (wk.in == NULL)
				return CTL_PWIRE_EXIT_NOMEM;
			wk.in_cap = h.len;
		}
		if (!worker_read(wk.in, h.len))
			return 0;
		r = (ctl_pwire_reader){ .p = wk.in, .left = h.len };
		switch (h.type) {
		case CTL_PWIRE_INIT:
			worker_init(&wk, h.instance, &r);
			break;
		case CTL_PWIRE_WINDOW:
			worker_window(&wk, h.instance, &r);
			break;
		case CTL_PWIRE_EVENT:
			worker_event(&wk, h.instance, &r);
			break;
		case CTL_PWIRE_FINI: {
			instance *in = worker_find(&wk, h.instance);

			if (in != NULL)
				worker_drop(&wk, in);
			break;
		}
		default:
			return CTL_PWIRE_EXIT_PROTO;
		}
	}
	/* bellowsd closed the socket: finish politely. */
	while (wk.n > 0)
		worker_drop(&wk, &wk.inst[wk.n - 1]);
	return 0;
}

/* --check: one config on fd 3, the ops' check's answer back. */
static int
worker_check(const char *path)
{
	worker wk = { 0 };
	ctl_pwire_header h;
	ctl_pwire_reader r;
	char msg[512] = "";
	void *config;
	int32_t rc = 0;

	wk.ops = worker_load(path);
	if (!worker_read(&h, sizeof(h)) || h.magic != CTL_PWIRE_MAGIC ||
	    h.type != CTL_PWIRE_CHECK || h.len > CTL_PWIRE_PAYLOAD_MAX)
		return CTL_PWIRE_EXIT_PROTO;
	wk.in = malloc(h.len > 0 ? h.len : 1);
	if (wk.in == NULL)
		return CTL_PWIRE_EXIT_NOMEM;
	if (!worker_read(wk.in, h.len))
		return CTL_PWIRE_EXIT_PROTO;
	r = (ctl_pwire_reader){ .p = wk.in, .left = h.len };
	config = worker_config(&wk, &r);
	if (wk.ops->check != NULL)
		rc = wk.ops->check(config, msg, sizeof(msg));
	msg[sizeof(msg) - 1] = '\0';
	ctl_pwire_begin(&wk.out, CTL_PWIRE_REPLY, 0);
	ctl_pwire_put(&wk.out, &rc, sizeof(rc));
	if (rc != 0)
		ctl_pwire_put_str(&wk.out, msg);
	worker_send(&wk);
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc != 5 || strcmp(argv[3], "--memory-mb") != 0 ||
	    (strcmp(argv[1], "--serve") != 0 &&
		strcmp(argv[1], "--probe") != 0 &&
		strcmp(argv[1], "--check") != 0)) {
		fprintf(stderr,
		    "usage: bellows-plugin-worker --serve|--probe|--check PATH "
		    "--memory-mb N\n"
		    "(started by bellowsd; see docs/policies/plugins.md)\n");
		return 2;
	}
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	worker_limit(argv[4]);
	if (strcmp(argv[1], "--probe") == 0) {
		(void)worker_load(argv[2]);
		return 0;
	}
	if (strcmp(argv[1], "--check") == 0)
		return worker_check(argv[2]);
	return worker_serve(argv[2]);
}
