/* config_int - what the files reading a configuration share, see
 * config.h.
 *
 * A configuration is read by one module in several files: config.c reads
 * the file and walks its top level; each other config_*.c owns one part
 * of the walk, which its file header names. They share the state of one
 * reading (config_ctx) and the helpers that read YAML nodes.
 */
#ifndef CTL_CONFIG_INT_H
#define CTL_CONFIG_INT_H

#include "config.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

/* The state of one reading of a file. */
typedef struct config_ctx {
	yaml_document_t doc;       /* the parsed document */
	const char *name;          /* file name for messages */
	ctl_config *cfg;           /* being built: plug-ins loaded so far */
	char *errbuf;              /* where the first error goes */
	size_t errlen;             /* its size */
	uint32_t n_fail;           /* errors found so far */
	ctl_config_errors *errs;   /* every error, NULL: only the first */
	const atomic_bool *cancel; /* stop reading when true, or NULL */
	uint32_t n_policies;       /* policy entries walked, aliases too */
	uint64_t regex_positions;  /* of the layer regexes compiled so far */
	bool stop;                 /* a limit of the whole file was hit:
				    * validation goes on no more */
} config_ctx;

/* Walks the pairs of mapping `map`: each turn, key and val are the pair's
 * nodes and kname the key's text (NULL when the key is no scalar). */
#define CONFIG_FOREACH_PAIR(cx, map, kname, key, val)                          \
	for (yaml_node_pair_t *pair_ = (map)->data.mapping.pairs.start;        \
	     pair_ < (map)->data.mapping.pairs.top &&                          \
	     ((key) = ctl_config_node((cx), pair_->key),                       \
	     (val) = ctl_config_node((cx), pair_->value),                      \
	     (kname) = ctl_config_scalar(key), 1);                             \
	     pair_++)

/* ---- config_node.c: typed values read from YAML nodes ------------ */

/* True when the reader was asked to stop (ctl_config_load_cancellable). */
bool ctl_config_cancelled(const config_ctx *cx);

/* Records one error message: the first goes to cx->errbuf, each of the
 * first CTL_CONFIG_ERRORS_MAX to cx->errs when every error is collected,
 * and all are counted. */
void ctl_config_record(config_ctx *cx, const char *msg);

/* Records the error `fmt` at node's line and column (NULL: the file's
 * start) and returns BELLOWS_ECONFIG. */
int ctl_config_fail(config_ctx *cx, const yaml_node_t *node, const char *fmt,
    ...) __attribute__((format(printf, 3, 4)));

/* Whether validation goes on after `r`, the error of one key, parameter,
 * policy or job: yes for a configuration error when every error is
 * collected (ctl_config_load_all) and fewer than CTL_CONFIG_ERRORS_MAX
 * were found; no for anything else (out of memory), nor when only the
 * first error is wanted (ctl_config_load, ctl_config_parse). A level that
 * went on returns 0: its errors are counted in cx->n_fail, which
 * config_parse turns into BELLOWS_ECONFIG. */
bool ctl_config_go_on(const config_ctx *cx, int r);

/* The node of the document numbered `id`, NULL when there is none. */
yaml_node_t *ctl_config_node(config_ctx *cx, int id);

/* The text of a scalar node; NULL when the node is a list or a mapping. */
const char *ctl_config_scalar(const yaml_node_t *node);

/* Refuses a node that is not of `type` (a scalar, list or mapping),
 * naming it `what`. Returns 0 or BELLOWS_ECONFIG. */
int ctl_config_expect(config_ctx *cx, const yaml_node_t *node,
    yaml_node_type_t type, const char *what);

/* Reads a finite number in [min, max] into *ret (untouched on failure).
 * Returns 0 or BELLOWS_ECONFIG; `what` names the value in the error. */
int ctl_config_double(config_ctx *cx, const yaml_node_t *node, const char *what,
    double min, double max, double *ret);

/* Reads a decimal integer in [min, max] into *ret (untouched on
 * failure). Returns 0 or BELLOWS_ECONFIG. */
int ctl_config_int(config_ctx *cx, const yaml_node_t *node, const char *what,
    double min, double max, int64_t *ret);

/* ctl_config_int for a uint32_t in [min, max]. */
int ctl_config_u32(config_ctx *cx, const yaml_node_t *node, const char *what,
    uint32_t min, uint32_t max, uint32_t *ret);

/* Reads true/yes or false/no into *ret (untouched on failure). Returns
 * 0 or BELLOWS_ECONFIG. */
int ctl_config_bool(config_ctx *cx, const yaml_node_t *node, const char *what,
    bool *ret);

/* Replaces *ret (freed) with a copy of a scalar's text. Returns 0,
 * BELLOWS_ECONFIG for a list or a mapping, or BELLOWS_ENOMEM (*ret
 * untouched on failure). */
int ctl_config_string(config_ctx *cx, const yaml_node_t *node, const char *what,
    char **ret);

/* Rejects a mapping key that appears twice: YAML allows it silently, and a
 * second value that quietly wins is a classic configuration bug. The
 * report is at the second place of the key that appears first; keys are
 * sorted, so a mapping of n keys costs O(n log n), not O(n^2). */
int ctl_config_check_duplicates(config_ctx *cx, yaml_node_t *map);

/* ---- config_pattern.c: job globs, layer regexes -------------------- */

/* Checks a job's glob: at most CTL_CONFIG_PATTERN_MAX bytes, every set
 * closed, every class known, no '\' at the end. Returns 0 or
 * BELLOWS_ECONFIG. */
int ctl_config_glob_check(config_ctx *cx, const yaml_node_t *node,
    const char *src);

/* Checks a layer regex: at most CTL_CONFIG_PATTERN_MAX bytes, no
 * back-reference, parentheses nested at most CTL_CONFIG_GROUPS_MAX deep
 * and at most CTL_CONFIG_REGEX_SIZE_MAX positions with counts expanded;
 * all the file's regexes together hold at most CTL_CONFIG_REGEX_TOTAL_MAX
 * (past it, cx->stop is set). Returns 0 or BELLOWS_ECONFIG. */
int ctl_config_regex_check(config_ctx *cx, const yaml_node_t *node,
    const char *src);

/* ---- config_job.c: the job entries --------------------------------- */

/* Reads one entry of `jobs:` into *jc (zeroed by the caller, freed with
 * the configuration whatever this returns): match, clients, and the
 * policies with their parameters, selectors and plug-ins. Returns 0,
 * BELLOWS_ECONFIG, BELLOWS_ENOMEM or BELLOWS_ETIMEDOUT when the reading
 * was cancelled. */
int ctl_config_job(config_ctx *cx, yaml_node_t *node, ctl_job_conf *jc);

/* ---- config_daemon.c: the daemon and store sections ---------------- */

/* Reads the `daemon:` mapping into cfg, security's key files included.
 * Returns 0, BELLOWS_ECONFIG or BELLOWS_ENOMEM. */
int ctl_config_daemon(config_ctx *cx, yaml_node_t *node, ctl_config *cfg);

/* Reads the `store:` mapping into *sc. Returns 0 or BELLOWS_ECONFIG. */
int ctl_config_store(config_ctx *cx, yaml_node_t *node, ctl_store_conf *sc);

/* Sets every setting of `daemon:` and `store:` to its default, before
 * the file is read. */
void ctl_config_defaults(ctl_config *cfg);

#endif
