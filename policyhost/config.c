/* config - a configuration file read into a ctl_config, see config.h.
 *
 * We load the whole document with libyaml's document API and walk the node
 * tree, because every node carries its position: each error can name the
 * line and column of the offending key or value. Nothing is applied while
 * walking; the result is a fresh ctl_config that the caller swaps in only
 * when the whole file was valid.
 *
 * This file reads the file, bounds its shape before libyaml builds the
 * tree, walks the top level and answers what is asked of a finished
 * configuration (the entry matching a job, the clients it allows). The
 * parts of the walk are the other config_*.c files (config_int.h): YAML
 * values (config_node.c), patterns (config_pattern.c), job entries
 * (config_job.c), the daemon's sections (config_daemon.c); printing one
 * back is config_print.c.
 */
#include "config_int.h"
#include "config.h"
#include "policies/registry.h"

#include <bellows/error.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

static int
config_root(config_ctx *cx, ctl_config *cfg)
{
	yaml_node_t *root = yaml_document_get_root_node(&cx->doc);
	yaml_node_t *key, *val, *jobs = NULL;
	const char *kname;
	bool has_jobs = false;
	int r;

	if (root == NULL)
		return ctl_config_fail(cx, NULL, "the file is empty");
	if ((r = ctl_config_expect(cx, root, YAML_MAPPING_NODE,
		 "the top level")) != 0 ||
	    (r = ctl_config_check_duplicates(cx, root)) != 0)
		return r;
	CONFIG_FOREACH_PAIR(cx, root, kname, key, val)
	{
		r = 0;
		if (kname != NULL && strcmp(kname, "daemon") == 0) {
			r = ctl_config_daemon(cx, val, cfg);
		} else if (kname != NULL && strcmp(kname, "store") == 0) {
			r = ctl_config_store(cx, val, &cfg->store);
		} else if (kname != NULL && strcmp(kname, "jobs") == 0) {
			has_jobs = true;
			if ((r = ctl_config_expect(cx, val, YAML_SEQUENCE_NODE,
				 "jobs")) == 0)
				jobs = val;
		} else {
			r = ctl_config_fail(cx, key,
			    "unknown top-level key '%s' (expected daemon, "
			    "store, jobs)",
			    kname != NULL ? kname : "?");
		}
		if (r != 0 && !ctl_config_go_on(cx, r))
			return r;
	}
	if (jobs == NULL)
		return has_jobs
		    ? 0
		    : ctl_config_fail(cx, root, "the file needs a 'jobs' list");
	size_t n = (size_t)(jobs->data.sequence.items.top -
	    jobs->data.sequence.items.start);
	if (n == 0)
		return ctl_config_fail(cx, jobs, "jobs must not be empty");
	if (n > CTL_CONFIG_JOBS_MAX)
		return ctl_config_fail(cx, jobs,
		    "jobs may have at most %u entries, not %zu",
		    CTL_CONFIG_JOBS_MAX, n);
	cfg->jobs = calloc(n, sizeof(*cfg->jobs));
	if (cfg->jobs == NULL)
		return BELLOWS_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (ctl_config_cancelled(cx))
			return BELLOWS_ETIMEDOUT;
		cfg->n_jobs++;
		r = ctl_config_job(cx,
		    ctl_config_node(cx, jobs->data.sequence.items.start[i]),
		    &cfg->jobs[i]);
		if (r != 0 && !ctl_config_go_on(cx, r))
			return r;
	}
	return 0;
}

/* What config_read gives libyaml: the text, a chunk at a time, so that a
 * cancelled reading stops within a chunk. */
typedef struct config_input {
	config_ctx *cx;   /* whose cancel flag is read */
	const char *text; /* the whole text */
	size_t len;       /* its bytes */
	size_t at;        /* bytes given so far */
} config_input;

#define CONFIG_CHUNK 16384 /* bytes libyaml gets per read */

/* yaml_read_handler_t: 0 (an input error) once the reading is cancelled. */
static int
config_read(void *data, unsigned char *buffer, size_t size, size_t *size_read)
{
	config_input *in = data;
	size_t n = in->len - in->at;

	if (ctl_config_cancelled(in->cx))
		return 0;
	if (n > size)
		n = size;
	if (n > CONFIG_CHUNK)
		n = CONFIG_CHUNK;
	memcpy(buffer, in->text + in->at, n);
	in->at += n;
	*size_read = n;
	return 1;
}

/* Records the syntax error (or cancellation) that stopped `parser`. */
static int
config_parser_fail(config_ctx *cx, const yaml_parser_t *parser)
{
	char msg[CTL_CONFIG_ERR_MAX];

	if (ctl_config_cancelled(cx)) {
		snprintf(msg, sizeof(msg), "%s: reading was cancelled",
		    cx->name);
		ctl_config_record(cx, msg);
		return BELLOWS_ETIMEDOUT;
	}
	snprintf(msg, sizeof(msg), "%s:%zu:%zu: %s", cx->name,
	    parser->problem_mark.line + 1, parser->problem_mark.column + 1,
	    parser->problem != NULL ? parser->problem : "invalid YAML");
	ctl_config_record(cx, msg);
	return BELLOWS_ECONFIG;
}

/* Walks the first document's events before it is loaded as a tree and
 * refuses it at the first list or mapping nested deeper than
 * CTL_CONFIG_DEPTH_MAX, or the first node past CTL_CONFIG_NODES_MAX:
 * libyaml's time grows with the square of the depth, and its tree with
 * the nodes, so neither may be loaded first and judged after. */
static int
config_check_shape(config_ctx *cx, const char *text, size_t len)
{
	config_input in = { .cx = cx, .text = text, .len = len };
	yaml_parser_t parser;
	yaml_event_t ev;
	uint32_t depth = 0, nodes = 0;
	int r = 0;

	if (!yaml_parser_initialize(&parser))
		return BELLOWS_ENOMEM;
	yaml_parser_set_input(&parser, config_read, &in);
	for (bool done = false; !done && r == 0;) {
		if (!yaml_parser_parse(&parser, &ev)) {
			r = config_parser_fail(cx, &parser);
			break;
		}
		switch (ev.type) {
		case YAML_SEQUENCE_START_EVENT:
		case YAML_MAPPING_START_EVENT:
			if (++depth > CTL_CONFIG_DEPTH_MAX) {
				yaml_node_t at = {
					.start_mark = ev.start_mark
				};

				r = ctl_config_fail(cx, &at,
				    "nested more than %u levels deep (lists "
				    "and mappings)",
				    CTL_CONFIG_DEPTH_MAX);
			}
			/* fall through */
		case YAML_SCALAR_EVENT:
		case YAML_ALIAS_EVENT:
			if (r == 0 && ++nodes > CTL_CONFIG_NODES_MAX) {
				yaml_node_t at = {
					.start_mark = ev.start_mark
				};

				r = ctl_config_fail(cx, &at,
				    "more than %u values, lists and "
				    "mappings",
				    CTL_CONFIG_NODES_MAX);
			}
			break;
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			depth--;
			break;
		case YAML_DOCUMENT_END_EVENT:
		case YAML_STREAM_END_EVENT:
			done = true;
			break;
		default:
			break;
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&parser);
	return r;
}

/* Parses and validates `text` as the file cx->name into *ret_cfg;
 * errors go where cx says. */
static int
config_parse(config_ctx *cx, const char *text, size_t len, ctl_config **ret_cfg)
{
	config_input in = { .cx = cx, .text = text, .len = len };
	yaml_parser_t parser;
	ctl_config *cfg;
	int r;

	if ((r = config_check_shape(cx, text, len)) != 0)
		return r;
	cfg = calloc(1, sizeof(*cfg));
	if (cfg == NULL)
		return BELLOWS_ENOMEM;
	cx->cfg = cfg;
	ctl_config_defaults(cfg);
	cfg->path = strdup(cx->name);
	cfg->text = malloc(len + 1);
	if (cfg->path == NULL || cfg->text == NULL) {
		ctl_config_destroy(&cfg);
		return BELLOWS_ENOMEM;
	}
	memcpy(cfg->text, text, len);
	cfg->text[len] = '\0';
	cfg->text_len = len;

	if (!yaml_parser_initialize(&parser)) {
		ctl_config_destroy(&cfg);
		return BELLOWS_ENOMEM;
	}
	yaml_parser_set_input(&parser, config_read, &in);
	if (!yaml_parser_load(&parser, &cx->doc)) {
		r = config_parser_fail(cx, &parser);
		yaml_parser_delete(&parser);
		ctl_config_destroy(&cfg);
		return r;
	}
	r = config_root(cx, cfg);
	/* An error recorded below a level that went on still fails. */
	if (r == 0 && cx->n_fail > 0)
		r = BELLOWS_ECONFIG;
	yaml_document_delete(&cx->doc);
	yaml_parser_delete(&parser);
	if (r == BELLOWS_ETIMEDOUT) {
		char msg[CTL_CONFIG_ERR_MAX];

		snprintf(msg, sizeof(msg), "%s: reading was cancelled",
		    cx->name);
		ctl_config_record(cx, msg);
	}
	if (r != 0) {
		ctl_config_destroy(&cfg);
		return r;
	}
	*ret_cfg = cfg;
	return 0;
}

int
ctl_config_parse(const char *text, size_t len, const char *name,
    ctl_config **ret_cfg, char *errbuf, size_t errlen)
{
	config_ctx cx = { .name = name, .errbuf = errbuf, .errlen = errlen };

	return config_parse(&cx, text, len, ret_cfg);
}

/* Where byte `at` of text is, as "LINE:COLUMN" counted from 1. */
static void
config_position(const char *text, size_t at, size_t *ret_line, size_t *ret_col)
{
	size_t line = 1, col = 1;

	for (size_t i = 0; i < at; i++) {
		if (text[i] == '\n') {
			line++;
			col = 1;
		} else {
			col++;
		}
	}
	*ret_line = line;
	*ret_col = col;
}

/* Reads the file cx->name and parses it into *ret_cfg; errors go where cx
 * says. At most CTL_CONFIG_FILE_MAX bytes are accepted: one more byte is
 * read to tell a file of exactly that size from a longer one, and the
 * buffer never grows past that. */
static int
config_load(config_ctx *cx, ctl_config **ret_cfg)
{
	const size_t limit = CTL_CONFIG_FILE_MAX;
	/* Without O_NONBLOCK, opening a FIFO waits for a writer. */
	int fd = open(cx->name, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	char msg[CTL_CONFIG_ERR_MAX];
	char *text = NULL;
	size_t len = 0, cap = 0;
	struct stat st;
	FILE *f = NULL;
	int r;

	if (fd >= 0 && fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
		/* A FIFO or a device could keep the reader waiting or
		 * reading for ever. */
		snprintf(msg, sizeof(msg), "%s: not a regular file", cx->name);
		ctl_config_record(cx, msg);
		close(fd);
		return BELLOWS_EIO;
	}
	if (fd < 0 || (f = fdopen(fd, "rb")) == NULL) {
		snprintf(msg, sizeof(msg), "%s: cannot open: %s", cx->name,
		    strerror(errno));
		ctl_config_record(cx, msg);
		if (fd >= 0)
			close(fd);
		return BELLOWS_EIO;
	}
	while (len <= limit) {
		size_t n;

		if (ctl_config_cancelled(cx)) {
			snprintf(msg, sizeof(msg), "%s: reading was cancelled",
			    cx->name);
			ctl_config_record(cx, msg);
			free(text);
			fclose(f);
			return BELLOWS_ETIMEDOUT;
		}
		if (len == cap) {
			size_t want = cap == 0 ? 8192 : cap * 2;
			char *grown;

			if (want > limit + 1)
				want = limit + 1;
			grown = realloc(text, want);
			if (grown == NULL) {
				free(text);
				fclose(f);
				return BELLOWS_ENOMEM;
			}
			text = grown;
			cap = want;
		}
		n = fread(text + len, 1, cap - len, f);
		len += n;
		if (n == 0)
			break;
	}
	if (ferror(f)) {
		snprintf(msg, sizeof(msg), "%s: read error", cx->name);
		ctl_config_record(cx, msg);
		free(text);
		fclose(f);
		return BELLOWS_EIO;
	}
	fclose(f);
	if (len > limit) {
		size_t line, col;

		config_position(text, limit, &line, &col);
		snprintf(msg, sizeof(msg),
		    "%s:%zu:%zu: the file is longer than 16 MiB (%zu bytes); "
		    "this byte is past the limit",
		    cx->name, line, col, (size_t)limit);
		ctl_config_record(cx, msg);
		free(text);
		return BELLOWS_ECONFIG;
	}
	r = config_parse(cx, text != NULL ? text : "", len, ret_cfg);
	free(text);
	return r;
}

int
ctl_config_load(const char *path, ctl_config **ret_cfg, char *errbuf,
    size_t errlen)
{
	config_ctx cx = { .name = path, .errbuf = errbuf, .errlen = errlen };

	return config_load(&cx, ret_cfg);
}

int
ctl_config_load_all(const char *path, ctl_config **ret_cfg,
    ctl_config_errors *errs)
{
	return ctl_config_load_cancellable(path, NULL, ret_cfg, errs);
}

int
ctl_config_load_cancellable(const char *path, const atomic_bool *cancel,
    ctl_config **ret_cfg, ctl_config_errors *errs)
{
	config_ctx cx = { .name = path, .errs = errs, .cancel = cancel };
	int r;

	errs->n = 0;
	r = config_load(&cx, ret_cfg);
	if (r == BELLOWS_ENOMEM)
		errs->n = 0;
	return r;
}

void
ctl_config_errors_emit(const ctl_config_errors *errs, int r, const char *path,
    void (*line)(void *arg, const char *text), void *arg)
{
	char text[PATH_MAX + 64];

	for (uint32_t i = 0; i < errs->n; i++)
		line(arg, errs->msg[i]);
	if (errs->n == 0) {
		snprintf(text, sizeof(text), "%s: %s", path,
		    bellows_strerror(r));
		line(arg, text);
	} else if (errs->n == CTL_CONFIG_ERRORS_MAX) {
		snprintf(text, sizeof(text), "%s: stopped after %d errors",
		    path, CTL_CONFIG_ERRORS_MAX);
		line(arg, text);
	}
}

static void
config_selector_fini(ctl_selector *sel)
{
	if (sel->has_regex)
		regfree(&sel->regex);
	free(sel->regex_src);
	memset(sel, 0, sizeof(*sel));
}

void
ctl_config_destroy(ctl_config **cfg)
{
	ctl_config *c;

	if (cfg == NULL || *cfg == NULL)
		return;
	c = *cfg;
	for (uint32_t i = 0; i < c->n_jobs; i++) {
		ctl_job_conf *jc = &c->jobs[i];

		for (uint32_t j = 0; j < jc->n_policies; j++) {
			free(jc->policies[j].name);
			free(jc->policies[j].config);
			config_selector_fini(&jc->policies[j].selector);
			ctl_plugin_close(&jc->policies[j].plugin);
		}
		free(jc->policies);
		free(jc->match);
		for (uint32_t k = 0; k < jc->n_clients; k++)
			free(jc->clients[k]);
		free(jc->clients);
	}
	free(c->jobs);
	free(c->security.server_key);
	free(c->security.clients);
	ctl_config_keys_free(c->security.keys, c->security.n_clients);
	free(c->security.skipped);
	memset(&c->security.server_cert, 0, sizeof(c->security.server_cert));
	free(c->control);
	free(c->publish);
	free(c->metrics_listen);
	free(c->metrics.token_file);
	if (c->metrics.token != NULL) {
		explicit_bzero(c->metrics.token, strlen(c->metrics.token));
		free(c->metrics.token);
	}
	free(c->metrics.client);
	free(c->path);
	free(c->text);
	free(c);
	*cfg = NULL;
}

const char *
ctl_config_client_by_key(const ctl_config *cfg, const char *z85)
{
	const ctl_security_conf *sec = &cfg->security;

	if (!sec->enabled || z85 == NULL)
		return NULL;
	for (uint32_t i = 0; i < sec->n_clients; i++) {
		if (strcmp(sec->keys[i].public_key, z85) == 0)
			return sec->keys[i].name;
	}
	return NULL;
}

bool
ctl_config_client_allowed(const ctl_config *cfg, const char *job,
    const char *client)
{
	const ctl_job_conf *jc;

	if (!cfg->security.enabled)
		return true;
	if (client == NULL || client[0] == '\0' || job == NULL)
		return false;
	if ((jc = ctl_config_match(cfg, job)) == NULL)
		return false;
	if (jc->clients == NULL)
		return true;
	for (uint32_t i = 0; i < jc->n_clients; i++) {
		if (strcmp(jc->clients[i], client) == 0)
			return true;
	}
	return false;
}

bool
ctl_config_metrics_shows(const ctl_config *cfg, const char *job)
{
	if (!cfg->security.enabled)
		return true;
	return cfg->metrics.token != NULL &&
	    ctl_config_client_allowed(cfg, job, cfg->metrics.client);
}

bool
ctl_config_client_allowed_all(const ctl_config *cfg, const char *client)
{
	if (!cfg->security.enabled)
		return true;
	if (client == NULL || client[0] == '\0')
		return false;
	for (uint32_t i = 0; i < cfg->n_jobs; i++) {
		const ctl_job_conf *jc = &cfg->jobs[i];
		bool listed = jc->clients == NULL;

		for (uint32_t k = 0; k < jc->n_clients && !listed; k++)
			listed = strcmp(jc->clients[k], client) == 0;
		if (!listed)
			return false;
	}
	return true;
}

const ctl_job_conf *
ctl_config_match(const ctl_config *cfg, const char *job)
{
	for (uint32_t i = 0; i < cfg->n_jobs; i++) {
		if (ctl_config_glob_match(cfg->jobs[i].match, job))
			return &cfg->jobs[i];
	}
	return NULL;
}

bool
ctl_policy_conf_same_instance(const ctl_policy_conf *a,
    const ctl_policy_conf *b)
{
	/* Equal ops mean equal types; a plug-in file loaded twice maps
	 * once, so its ops compare equal too. */
	if (strcmp(a->name, b->name) != 0 || a->ops != b->ops ||
	    (a->plugin == NULL) != (b->plugin == NULL))
		return false;
	return a->plugin == NULL ||
	    strcmp(ctl_plugin_path(a->plugin), ctl_plugin_path(b->plugin)) == 0;
}

bool
ctl_selector_matches(const ctl_selector *sel, const char *name, uint64_t numel,
    uint32_t ndim)
{
	if (ndim < sel->min_ndim || numel < sel->min_numel)
		return false;
	return !sel->has_regex || regexec(&sel->regex, name, 0, NULL, 0) == 0;
}

bool
ctl_config_timing_warning(const ctl_config *cfg, char *ret_why, size_t why_len)
{
	const uint32_t limit = CTL_CONFIG_AGENT_WAIT_MS -
	    CTL_CONFIG_DECIDE_MARGIN_MS;

	if (cfg->window_timeout_ms <= limit)
		return false;
	snprintf(ret_why, why_len,
	    "daemon.window_timeout_ms %u is above %u: with agents waiting "
	    "the default decision_timeout_ms (%u), the decision of a window "
	    "closed with a rank missing may come after the other ranks gave "
	    "up waiting, and they would apply it at different steps; lower "
	    "it, or give every agent a decision_timeout_ms of at least "
	    "window_timeout_ms + %u",
	    cfg->window_timeout_ms, limit, CTL_CONFIG_AGENT_WAIT_MS,
	    CTL_CONFIG_DECIDE_MARGIN_MS);
	return true;
}
