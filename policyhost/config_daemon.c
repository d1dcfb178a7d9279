/* config_daemon - bellowsd's own settings, see config.h.
 *
 * The `daemon:` section (endpoints, timing, the limits on what jobs may
 * hold, CURVE security) and the `store:` section (how the history is
 * batched, kept and protected), with their defaults. Security's key file
 * and clients directory are read while the file is, so that an error
 * names them at load time (and `bellows policy check` finds it too).
 */
#include "common/suggest.h"
#include "config_int.h"
#include "config_listen.h"

#include <bellows/error.h>

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A path of the file, relative paths taken from the YAML file's
 * directory (as plug-ins are). */
static int
config_path(config_ctx *cx, const yaml_node_t *node, const char *what,
    char **ret)
{
	const char *given = ctl_config_scalar(node), *slash;
	char joined[PATH_MAX];
	int n;

	if (given == NULL || given[0] == '\0')
		return ctl_config_fail(cx, node, "%s must be a path", what);
	slash = strrchr(cx->name, '/');
	if (given[0] == '/' || slash == NULL)
		n = snprintf(joined, sizeof(joined), "%s", given);
	else
		n = snprintf(joined, sizeof(joined), "%.*s/%s",
		    (int)(slash - cx->name), cx->name, given);
	if (n < 0 || (size_t)n >= sizeof(joined))
		return ctl_config_fail(cx, node, "%s is too long", what);
	free(*ret);
	if ((*ret = strdup(joined)) == NULL)
		return BELLOWS_ENOMEM;
	return 0;
}

static int
config_key_name_cmp(const void *a, const void *b)
{
	const ctl_client_key *x = a, *y = b;

	return strcmp(x->name, y->name);
}

void
ctl_config_keys_free(ctl_client_key *keys, uint32_t n)
{
	if (keys == NULL)
		return;
	for (uint32_t i = 0; i < n; i++)
		free(keys[i].name);
	free(keys);
}

/* Appends "PATH: why" (or `why` alone when it starts with PATH) as a
 * line of *skipped. */
static int
config_skip(char **skipped, const char *path, const char *why)
{
	size_t old = *skipped != NULL ? strlen(*skipped) : 0;
	size_t add = strlen(path) + strlen(why) + 4;
	bool named = strncmp(why, path, strlen(path)) == 0;
	char *grown = realloc(*skipped, old + add);

	if (grown == NULL)
		return BELLOWS_ENOMEM;
	snprintf(grown + old, add, "%s%s%s%s", old > 0 ? "\n" : "",
	    named ? "" : path, named ? "" : ": ", why);
	*skipped = grown;
	return 0;
}

/* Loads DIR/FILE (FILE a NAME.pub) into keys[*n]: 0 when loaded, 1 when
 * skipped (noted in *skipped), or BELLOWS_ENOMEM. */
static int
config_read_client(const char *dir, const char *file, ctl_client_key *key,
    char **skipped)
{
	size_t len = strlen(file);
	char path[PATH_MAX], name[COM_CERT_NAME_MAX + 1], err[512];
	com_cert c;
	int r;

	snprintf(name, sizeof(name), "%.*s", (int)(len - 4), file);
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (!com_cert_name_ok(name)) {
		r = config_skip(skipped, path, "not a valid client name");
		return r != 0 ? r : 1;
	}
	r = com_cert_load(path, &c, err, sizeof(err));
	if (r == BELLOWS_ENOMEM)
		return r;
	if (r == BELLOWS_ENOTFOUND)
		return 1; /* removed while we read */
	if (r != 0) {
		r = config_skip(skipped, path, err);
		return r != 0 ? r : 1;
	}
	if ((key->name = strdup(name)) == NULL)
		return BELLOWS_ENOMEM;
	memcpy(key->public_key, c.public_key, COM_CERT_Z85);
	return 0;
}

/* One key, one name: else the name a connection gets would depend on the
 * order the directory was read in. Every file of a key held twice is
 * dropped from keys (sorted by name) and noted in *skipped. */
static int
config_drop_shared_keys(const char *dir, ctl_client_key *keys, uint32_t *n,
    char **skipped)
{
	bool *shared = calloc(*n > 0 ? *n : 1, sizeof(*shared));
	uint32_t kept = 0;
	int r = 0;

	if (shared == NULL)
		return BELLOWS_ENOMEM;
	for (uint32_t i = 0; i < *n; i++) {
		for (uint32_t j = i + 1; j < *n; j++) {
			if (strcmp(keys[i].public_key, keys[j].public_key) == 0)
				shared[i] = shared[j] = true;
		}
	}
	for (uint32_t i = 0; i < *n; i++) {
		char path[PATH_MAX];

		if (!shared[i]) {
			keys[kept++] = keys[i];
			continue;
		}
		snprintf(path, sizeof(path), "%s/%s.pub", dir, keys[i].name);
		if (r == 0)
			r = config_skip(skipped, path,
			    "holds the same public key as another .pub");
		free(keys[i].name);
	}
	*n = kept;
	free(shared);
	return r;
}

int
ctl_config_read_clients(const char *dir, ctl_client_key **ret_keys,
    uint32_t *ret_n, char **ret_skipped, char *errbuf, size_t errlen)
{
	ctl_client_key *keys = NULL;
	uint32_t n = 0, cap = 0;
	char *skipped = NULL;
	struct dirent *de;
	DIR *d = opendir(dir);
	int r = 0;

	if (d == NULL) {
		snprintf(errbuf, errlen, "clients directory '%s': %s", dir,
		    strerror(errno));
		return BELLOWS_EIO;
	}
	while ((de = readdir(d)) != NULL) {
		size_t len = strlen(de->d_name);

		if (len <= 4 || strcmp(de->d_name + len - 4, ".pub") != 0 ||
		    de->d_name[0] == '.')
			continue;
		if (n == CTL_CONFIG_CLIENTS_MAX) {
			snprintf(errbuf, errlen,
			    "clients directory '%s' holds more than %u "
			    "certificates",
			    dir, CTL_CONFIG_CLIENTS_MAX);
			r = BELLOWS_EINVAL;
			goto out;
		}
		if (n == cap) {
			uint32_t ncap = cap ? cap * 2 : 16;
			ctl_client_key *grown = realloc(keys,
			    ncap * sizeof(*keys));

			if (grown == NULL) {
				r = BELLOWS_ENOMEM;
				goto out;
			}
			keys = grown;
			cap = ncap;
		}
		r = config_read_client(dir, de->d_name, &keys[n], &skipped);
		if (r < 0 || r > 1)
			goto out;
		n += r == 0;
		r = 0;
	}
	qsort(keys, n, sizeof(*keys), config_key_name_cmp);
	r = config_drop_shared_keys(dir, keys, &n, &skipped);
out:
	closedir(d);
	if (r != 0) {
		if (r == BELLOWS_ENOMEM)
			snprintf(errbuf, errlen, "%s", bellows_strerror(r));
		ctl_config_keys_free(keys, n);
		free(skipped);
		return r;
	}
	*ret_keys = keys;
	*ret_n = n;
	*ret_skipped = skipped;
	return 0;
}

/* `daemon.security`: both paths are required; the key file and the
 * directory are read now, so an error names them at load time (and
 * `bellows policy check` finds it too). */
static int
config_security(config_ctx *cx, yaml_node_t *node, ctl_security_conf *sec)
{
	yaml_node_t *key, *val, *key_node = NULL, *dir_node = NULL;
	char err[CTL_CONFIG_ERR_MAX];
	const char *kname;
	int r = 0;

	if ((r = ctl_config_expect(cx, node, YAML_MAPPING_NODE,
		 "daemon.security")) != 0 ||
	    (r = ctl_config_check_duplicates(cx, node)) != 0)
		return r;
	sec->enabled = true;
	CONFIG_FOREACH_PAIR(cx, node, kname, key, val)
	{
		if (kname == NULL)
			r = ctl_config_fail(cx, key, "keys must be scalars");
		else if (strcmp(kname, "server_key") == 0) {
			key_node = val;
			r = config_path(cx, val, kname, &sec->server_key);
		} else if (strcmp(kname, "clients") == 0) {
			dir_node = val;
			r = config_path(cx, val, kname, &sec->clients);
		} else
			r = ctl_config_fail(cx, key,
			    "unknown key '%s' in daemon.security (expected "
			    "server_key, clients)",
			    kname);
		if (r != 0 && !ctl_config_go_on(cx, r))
			return r;
	}
	if (key_node == NULL || dir_node == NULL)
		return ctl_config_fail(cx, node,
		    "daemon.security needs both server_key and clients");
	if (sec->server_key == NULL || sec->clients == NULL)
		return BELLOWS_ECONFIG; /* already reported */
	r = com_cert_load(sec->server_key, &sec->server_cert, err, sizeof(err));
	if (r == BELLOWS_ENOMEM)
		return r;
	if (r == 0 && sec->server_cert.secret_key[0] == '\0')
		return ctl_config_fail(cx, key_node,
		    "server_key '%s' is a public certificate; bellowsd needs "
		    "its secret one (the .key file)",
		    sec->server_key);
	if (r != 0)
		return ctl_config_fail(cx, key_node, "server_key: %s", err);
	r = ctl_config_read_clients(sec->clients, &sec->keys, &sec->n_clients,
	    &sec->skipped, err, sizeof(err));
	if (r == BELLOWS_ENOMEM)
		return r;
	if (r != 0)
		return ctl_config_fail(cx, dir_node, "%s", err);
	return 0;
}

/* `daemon.metrics_listen` or `daemon.metrics.listen` (`what`): checked
 * now, so that a bad address is an error of the file, with its position;
 * given twice, refused. */
static int
config_metrics_listen(config_ctx *cx, const yaml_node_t *node, const char *what,
    char **ret)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char err[CTL_CONFIG_ERR_MAX];
	int r;

	if (*ret != NULL)
		return ctl_config_fail(cx, node,
		    "%s: the address is given twice (daemon.metrics_listen "
		    "and daemon.metrics.listen); keep one",
		    what);
	if ((r = ctl_config_string(cx, node, what, ret)) != 0)
		return r;
	if (ctl_metrics_parse_listen(*ret, &ss, &len, err, sizeof(err)) != 0)
		return ctl_config_fail(cx, node, "%s: %s", what, err);
	return 0;
}

/* Reads the bearer token of daemon.metrics.token_file: the file's text
 * less the white space around it (a trailing line end), of
 * CTL_CONFIG_TOKEN_MIN to CTL_CONFIG_TOKEN_MAX visible ASCII characters,
 * as an HTTP header carries it. */
static int
config_metrics_token(config_ctx *cx, const yaml_node_t *node,
    ctl_metrics_conf *mc)
{
	char buf[CTL_CONFIG_TOKEN_MAX + 2], *t;
	FILE *f = fopen(mc->token_file, "re");
	size_t n, len;
	bool whole;
	int r = 0;

	if (f == NULL)
		return ctl_config_fail(cx, node,
		    "daemon.metrics.token_file '%s': %s", mc->token_file,
		    strerror(errno));
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	/* Not cut at the buffer's end, no NUL inside. */
	whole = n < sizeof(buf) - 1 && memchr(buf, '\0', n) == NULL;
	buf[n] = '\0';
	for (t = buf; *t != '\0' && strchr(" \t\r\n", *t) != NULL;)
		t++;
	len = strlen(t);
	while (len > 0 && strchr(" \t\r\n", t[len - 1]) != NULL)
		t[--len] = '\0';
	for (size_t i = 0; i < len && r == 0; i++) {
		if (t[i] < 0x21 || t[i] > 0x7e)
			r = ctl_config_fail(cx, node,
			    "daemon.metrics.token_file '%s': byte %zu of the "
			    "token (0x%02x) is not a visible ASCII character",
			    mc->token_file, i + 1, (unsigned char)t[i]);
	}
	if (r == 0 && (!whole || len < CTL_CONFIG_TOKEN_MIN))
		r = ctl_config_fail(cx, node,
		    "daemon.metrics.token_file '%s' must hold one token of "
		    "%u to %u visible ASCII characters (it holds %zu bytes)",
		    mc->token_file, CTL_CONFIG_TOKEN_MIN, CTL_CONFIG_TOKEN_MAX,
		    n);
	if (r == 0 && (mc->token = strdup(t)) == NULL)
		r = BELLOWS_ENOMEM;
	explicit_bzero(buf, sizeof(buf));
	return r;
}

/* `daemon.metrics`: listen, token_file, client. */
static int
config_metrics(config_ctx *cx, yaml_node_t *node, ctl_config *cfg)
{
	yaml_node_t *key, *val, *token = NULL;
	const char *kname;
	int r = 0;

	if ((r = ctl_config_expect(cx, node, YAML_MAPPING_NODE,
		 "daemon.metrics")) != 0 ||
	    (r = ctl_config_check_duplicates(cx, node)) != 0)
		return r;
	CONFIG_FOREACH_PAIR(cx, node, kname, key, val)
	{
		if (kname == NULL)
			r = ctl_config_fail(cx, key, "keys must be scalars");
		else if (strcmp(kname, "listen") == 0)
			r = config_metrics_listen(cx, val,
			    "daemon.metrics.listen", &cfg->metrics_listen);
		else if (strcmp(kname, "token_file") == 0) {
			token = val;
			r = config_path(cx, val, "daemon.metrics.token_file",
			    &cfg->metrics.token_file);
		} else if (strcmp(kname, "client") == 0) {
			r = ctl_config_string(cx, val, kname,
			    &cfg->metrics.client);
			if (r == 0 && !com_cert_name_ok(cfg->metrics.client))
				r = ctl_config_fail(cx, val,
				    "daemon.metrics.client '%s' is not a "
				    "client name (a NAME.pub of the clients "
				    "directory)",
				    cfg->metrics.client);
		} else
			r = ctl_config_fail(cx, key,
			    "unknown key '%s' in daemon.metrics (expected "
			    "listen, token_file, client)",
			    kname);
		if (r != 0 && !ctl_config_go_on(cx, r))
			return r;
	}
	if (token != NULL && cfg->metrics.token_file != NULL &&
	    (r = config_metrics_token(cx, token, &cfg->metrics)) != 0)
		return r;
	if (cfg->metrics.client != NULL && token == NULL)
		return ctl_config_fail(cx, node,
		    "daemon.metrics.client needs token_file: without a token "
		    "whoever reaches /metrics would read that client's jobs");
	return 0;
}

/* What holds only with the whole `daemon:` section read: with security
 * a token must say whose jobs it shows. */
static int
config_daemon_check(config_ctx *cx, yaml_node_t *node, const ctl_config *cfg)
{
	if (cfg->security.enabled && cfg->metrics.token_file != NULL &&
	    cfg->metrics.client == NULL)
		return ctl_config_fail(cx, node,
		    "daemon.metrics.token_file needs daemon.metrics.client "
		    "with daemon.security: it names the client whose jobs "
		    "/metrics shows");
	return 0;
}

/* `store.mode`: permission bits, an octal string ("0600") or a number
 * (384, or 0600 which YAML reads as the text "0600"). Owner read and
 * write are required: the daemon writes the file. */
static int
config_mode(config_ctx *cx, const yaml_node_t *node, uint32_t *ret)
{
	const char *s = ctl_config_scalar(node);
	char *end;
	unsigned long v;
	int base = 10;

	if (s == NULL || s[0] == '\0')
		return ctl_config_fail(cx, node,
		    "store.mode must be permission bits, e.g. \"0600\"");
	if (s[0] == '0' && s[1] != '\0') {
		base = 8;
		if (s[1] == 'o' || s[1] == 'O')
			s += 2;
	}
	errno = 0;
	v = strtoul(s, &end, base);
	if (*end != '\0' || errno != 0 || s[0] == '-' || s[0] == '+')
		return ctl_config_fail(cx, node,
		    "store.mode must be permission bits (octal, e.g. "
		    "\"0600\"), not '%s'",
		    ctl_config_scalar(node));
	if (v > 0777)
		return ctl_config_fail(cx, node,
		    "store.mode must be at most 0777, not %lo", v);
	if ((v & 0600) != 0600)
		return ctl_config_fail(cx, node,
		    "store.mode %04lo must let the owner read and write "
		    "(0600 at least)",
		    v);
	*ret = (uint32_t)v;
	return 0;
}

/* The keys of `daemon:`, in the order docs/configuration.md lists them;
 * config_daemon_unknown names them. Each has a branch in
 * the function below (tests/policyhost/test_config.c loads a file with
 * every one of them). */
static const char *const daemon_keys[] = {
	"control",
	"publish",
	"apply_lag",
	"window_timeout_ms",
	"rank_timeout_ms",
	"heartbeat_ms",
	"repair_margin",
	"max_jobs",
	"max_world",
	"max_layers",
	"job_idle_ms",
	"reload_timeout_ms",
	"plugin_timeout_ms",
	"plugin_memory_mb",
	"max_job_mb",
	"max_total_job_mb",
	"peer_queue_mb",
	"allow_insecure",
	"security",
	"metrics_listen",
	"metrics",
};

/* Refuses the unknown `daemon:` key kname at key, naming the nearest
 * known key when one is close, else listing them all. */
static int
config_daemon_unknown(config_ctx *cx, yaml_node_t *key, const char *kname)
{
	size_t n = sizeof(daemon_keys) / sizeof(daemon_keys[0]);
	const char *near = com_suggest(kname, daemon_keys, n);
	char list[512];
	size_t used = 0;

	if (near != NULL)
		return ctl_config_fail(cx, key,
		    "unknown key '%s' in daemon (did you mean '%s'?)", kname,
		    near);
	list[0] = '\0';
	for (size_t i = 0; i < n && used < sizeof(list); i++) {
		int w = snprintf(list + used, sizeof(list) - used, "%s%s",
		    i > 0 ? ", " : "", daemon_keys[i]);

		if (w < 0)
			break;
		used += (size_t)w;
	}
	return ctl_config_fail(cx, key,
	    "unknown key '%s' in daemon (expected %s)", kname, list);
}

int
ctl_config_daemon(config_ctx *cx, yaml_node_t *node, ctl_config *cfg)
{
	yaml_node_t *key, *val;
	const char *kname;
	int r = 0;

	if ((r = ctl_config_expect(cx, node, YAML_MAPPING_NODE, "daemon")) !=
		0 ||
	    (r = ctl_config_check_duplicates(cx, node)) != 0)
		return r;
	CONFIG_FOREACH_PAIR(cx, node, kname, key, val)
	{
		if (kname == NULL)
			r = ctl_config_fail(cx, key, "keys must be scalars");
		else if (strcmp(kname, "control") == 0)
			r = ctl_config_string(cx, val, kname, &cfg->control);
		else if (strcmp(kname, "publish") == 0)
			r = ctl_config_string(cx, val, kname, &cfg->publish);
		else if (strcmp(kname, "apply_lag") == 0)
			r = ctl_config_u32(cx, val, kname, 0, 1000000,
			    &cfg->apply_lag);
		else if (strcmp(kname, "window_timeout_ms") == 0)
			r = ctl_config_u32(cx, val, kname, 1, 86400000,
			    &cfg->window_timeout_ms);
		else if (strcmp(kname, "rank_timeout_ms") == 0)
			r = ctl_config_u32(cx, val, kname, 10, 86400000,
			    &cfg->rank_timeout_ms);
		else if (strcmp(kname, "heartbeat_ms") == 0)
			r = ctl_config_u32(cx, val, kname, 10, 3600000,
			    &cfg->heartbeat_ms);
		else if (strcmp(kname, "repair_margin") == 0)
			r = ctl_config_u32(cx, val, kname, 0, 1000000,
			    &cfg->repair_margin);
		else if (strcmp(kname, "max_jobs") == 0)
			r = ctl_config_u32(cx, val, kname, 1, 1000000,
			    &cfg->max_jobs);
		else if (strcmp(kname, "max_world") == 0)
			r = ctl_config_u32(cx, val, kname, 1, 65536,
			    &cfg->max_world);
		else if (strcmp(kname, "max_layers") == 0)
			r = ctl_config_u32(cx, val, kname, 1, 65536,
			    &cfg->max_layers);
		else if (strcmp(kname, "job_idle_ms") == 0)
			r = ctl_config_u32(cx, val, kname, 1000, 4000000000u,
			    &cfg->job_idle_ms);
		else if (strcmp(kname, "reload_timeout_ms") == 0)
			r = ctl_config_u32(cx, val, kname, 100, 3600000,
			    &cfg->reload_timeout_ms);
		else if (strcmp(kname, "plugin_timeout_ms") == 0)
			r = ctl_config_u32(cx, val, kname, 10, 600000,
			    &cfg->plugin_timeout_ms);
		else if (strcmp(kname, "plugin_memory_mb") == 0)
			r = ctl_config_u32(cx, val, kname, 64, 1048576,
			    &cfg->plugin_memory_mb);
		else if (strcmp(kname, "max_job_mb") == 0)
			r = ctl_config_u32(cx, val, kname, 1, 1048576,
			    &cfg->max_job_mb);
		else if (strcmp(kname, "max_total_job_mb") == 0)
			r = ctl_config_u32(cx, val, kname, 1, 1048576,
			    &cfg->max_total_job_mb);
		else if (strcmp(kname, "peer_queue_mb") == 0)
			r = ctl_config_u32(cx, val, kname, 1, 4096,
			    &cfg->peer_queue_mb);
		else if (strcmp(kname, "allow_insecure") == 0)
			r = ctl_config_bool(cx, val, kname,
			    &cfg->allow_insecure);
		else if (strcmp(kname, "security") == 0)
			r = config_security(cx, val, &cfg->security);
		else if (strcmp(kname, "metrics_listen") == 0)
			r = config_metrics_listen(cx, val,
			    "daemon.metrics_listen", &cfg->metrics_listen);
		else if (strcmp(kname, "metrics") == 0)
			r = config_metrics(cx, val, cfg);
		else
			r = config_daemon_unknown(cx, key, kname);
		if (r != 0 && !ctl_config_go_on(cx, r))
			return r;
	}
	return config_daemon_check(cx, node, cfg);
}

int
ctl_config_store(config_ctx *cx, yaml_node_t *node, ctl_store_conf *sc)
{
	yaml_node_t *key, *val;
	const char *kname;
	int r = 0;

	if ((r = ctl_config_expect(cx, node, YAML_MAPPING_NODE, "store")) !=
		0 ||
	    (r = ctl_config_check_duplicates(cx, node)) != 0)
		return r;
	CONFIG_FOREACH_PAIR(cx, node, kname, key, val)
	{
		if (kname == NULL)
			r = ctl_config_fail(cx, key, "keys must be scalars");
		else if (strcmp(kname, "max_windows_per_run") == 0)
			r = ctl_config_u32(cx, val, kname, 0, 1000000000,
			    &sc->max_windows_per_run);
		else if (strcmp(kname, "max_age_days") == 0)
			r = ctl_config_u32(cx, val, kname, 0, 36500,
			    &sc->max_age_days);
		else if (strcmp(kname, "keep_every") == 0)
			r = ctl_config_u32(cx, val, kname, 1, 1000000,
			    &sc->keep_every);
		else if (strcmp(kname, "batch_rows") == 0)
			r = ctl_config_u32(cx, val, kname, 1, 1000000,
			    &sc->batch_rows);
		else if (strcmp(kname, "queue_rows") == 0)
			r = ctl_config_u32(cx, val, kname, 1000, 100000000,
			    &sc->queue_rows);
		else if (strcmp(kname, "mode") == 0)
			r = config_mode(cx, val, &sc->mode);
		else
			r = ctl_config_fail(cx, key,
			    "unknown key '%s' in store (expected "
			    "max_windows_per_run, max_age_days, keep_every, "
			    "batch_rows, queue_rows, mode)",
			    kname);
		if (r != 0 && !ctl_config_go_on(cx, r))
			return r;
	}
	return 0;
}

void
ctl_config_defaults(ctl_config *cfg)
{
	cfg->apply_lag = 1;
	/* Below the agents' wait for a decision, see
	 * ctl_config_timing_warning. */
	cfg->window_timeout_ms = 3000;
	cfg->rank_timeout_ms = 10000;
	cfg->heartbeat_ms = 1000;
	cfg->repair_margin = 2;
	cfg->max_jobs = 256;
	cfg->max_world = 16384;
	cfg->max_layers = 65536;
	cfg->job_idle_ms = 600000;
	cfg->reload_timeout_ms = CTL_CONFIG_RELOAD_TIMEOUT_MS;
	cfg->plugin_timeout_ms = CTL_WORKER_TIMEOUT_MS;
	cfg->plugin_memory_mb = CTL_WORKER_MEMORY_MB;
	cfg->max_job_mb = 1024;
	cfg->max_total_job_mb = 4096;
	cfg->peer_queue_mb = 16;
	cfg->store.max_windows_per_run = 0;
	cfg->store.max_age_days = 0;
	cfg->store.keep_every = 10;
	cfg->store.batch_rows = 4096;
	cfg->store.queue_rows = 262144;
	cfg->store.mode = 0600;
}
