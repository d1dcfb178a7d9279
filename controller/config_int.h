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
	     ((key) = config_node((cx), pair_->key),                           \
	     (val) = config_node((cx), pair_->value),                          \
	     (kname) = config_scalar(key), 1);                                 \
	     pair_++)

#endif
