/* config - bellowsd's YAML configuration: the daemon's settings and, per
 * job-name pattern, the ordered policies with their parameters and layer
 * selectors.
 *
 * A file is parsed and validated completely before anything takes effect:
 * unknown keys, wrong types, out-of-range values and knob conflicts are
 * errors reported as "FILE:LINE:COLUMN: message". This is the only module
 * that includes <yaml.h>; policies see their parsed config structs only.
 *
 * A policy entry may name a plug-in (`plugin: FILE`, relative to the YAML
 * file's directory) that provides its type; the configuration then holds a
 * reference to the loaded plug-in until it is destroyed.
 */
#ifndef CTL_CONFIG_H
#define CTL_CONFIG_H

#include "common/cert.h"
#include "plugin.h"

#include <bellows/policy.h>

#include <regex.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CTL_CONFIG_ERR_MAX 512 /* bytes of an error message */
/* The agent's default decision_timeout_ms (bellows_agent_config_init):
 * how long a rank waits at a decision's apply step before it gives up. */
#define CTL_CONFIG_AGENT_WAIT_MS 5000
/* What a window's decision needs after its timeout to reach the ranks:
 * the loop's tick, the policies, the history commit, the wire. */
#define CTL_CONFIG_DECIDE_MARGIN_MS 1000

/* Limits on what a file may hold, checked while it is read so that no file
 * can make reading it take long or use much memory; each refusal names the
 * place (FILE:LINE:COLUMN). bellowsd's start, its reloads and `bellows
 * policy check` read files through the same code, so they agree. */
#define CTL_CONFIG_FILE_MAX     (16u << 20) /* bytes of a file */
#define CTL_CONFIG_DEPTH_MAX    64          /* lists and mappings nested */
#define CTL_CONFIG_NODES_MAX    1000000     /* scalars, lists, mappings */
#define CTL_CONFIG_JOBS_MAX     4096        /* entries in jobs */
#define CTL_CONFIG_POLICIES_MAX 64          /* policies in a job entry */
/* Policies in the whole file, an alias counted each time it is used: an
 * alias repeats a node without repeating its text, and each policy costs
 * memory and time when it is validated. */
#define CTL_CONFIG_POLICIES_TOTAL_MAX 4096
#define CTL_CONFIG_PATTERN_MAX        256 /* bytes of a glob or regex */
/* Positions a layer regex may have once its {m,n} counts are expanded
 * (each bound at most CTL_CONFIG_REPEAT_MAX): what keeps regcomp fast. */
#define CTL_CONFIG_REGEX_SIZE_MAX 1024
#define CTL_CONFIG_REPEAT_MAX     255 /* a bound in {m,n} */
/* Positions of all the layer regexes of a file together (glibc keeps
 * about 100 bytes per position compiled). */
#define CTL_CONFIG_REGEX_TOTAL_MAX 65536
#define CTL_CONFIG_GROUPS_MAX      32 /* parentheses nested in a regex */
/* reload_timeout_ms: how long a reload may take before it is abandoned. */
#define CTL_CONFIG_RELOAD_TIMEOUT_MS 10000

/* Which tensors a policy acts on. */
typedef struct ctl_selector {
	bool has_regex;     /* match is set */
	regex_t regex;      /* POSIX extended regex on the layer name */
	char *regex_src;    /* its source text */
	uint64_t min_numel; /* smaller tensors are not selected */
	uint32_t min_ndim;  /* tensors with fewer dims are not (default 2,
			     * 0 for ops->select_every_layer) */
	bool has_min_ndim;  /* min_ndim was set in the YAML */
} ctl_selector;

typedef struct ctl_policy_conf {
	char *name;                    /* instance name, unique in the job */
	const bellows_policy_ops *ops; /* its type */
	ctl_plugin *plugin;            /* NULL for a built-in type, else the
					* configuration's reference to the
					* shared object providing ops */
	void *config;                  /* ops->config_size bytes, parsed */
	ctl_selector selector;         /* layers it acts on */
	int line;                      /* where it was defined */
} ctl_policy_conf;

typedef struct ctl_job_conf {
	char *match;               /* glob on the job name, matched by
				    * ctl_config_glob_match */
	uint32_t n_clients;        /* entries in clients */
	char **clients;            /* client names allowed (`clients:`),
				    * NULL: every authenticated client */
	uint32_t n_policies;       /* entries in policies */
	ctl_policy_conf *policies; /* in the order they run */
	bool all_stats;            /* `all_stats: true`: the agents compute
				    * every statistic, also those no policy
				    * reads (for the history and replay) */
} ctl_job_conf;

/* The history database's settings (`store:`), see docs/history.md. */
typedef struct ctl_store_conf {
	uint32_t max_windows_per_run; /* windows of a run kept whole, 0 = all */
	uint32_t max_age_days;        /* days windows are kept whole, 0 = all */
	uint32_t keep_every;          /* thinned windows: every k-th is kept */
	uint32_t batch_rows;          /* rows per batch (and transaction) */
	uint32_t queue_rows;          /* metric rows queued before the store
				       * downsamples them */
	uint32_t mode;                /* permission bits the database and its
				       * -wal/-shm files are created with */
} ctl_store_conf;

#define CTL_CONFIG_CLIENTS_MAX 4096 /* certificates in a clients directory */

/* One trusted client: a NAME.pub of the clients directory. */
typedef struct ctl_client_key {
	char *name;                    /* NAME (the file's name less .pub) */
	char public_key[COM_CERT_Z85]; /* Z85 */
} ctl_client_key;

/* `daemon.security`: CURVE on both endpoints, see docs/security.md. */
typedef struct ctl_security_conf {
	bool enabled;         /* the section is present */
	char *server_key;     /* path of bellowsd's secret certificate */
	char *clients;        /* path of the clients directory */
	com_cert server_cert; /* its keys, read when the file was loaded */
	uint32_t n_clients;   /* entries in keys */
	ctl_client_key *keys; /* the directory's certificates, by name */
	char *skipped;        /* the .pub files not trusted, one line
			       * "DIR/FILE: why" each, or NULL */
} ctl_security_conf;

#define CTL_CONFIG_TOKEN_MIN 16   /* bytes of a /metrics bearer token */
#define CTL_CONFIG_TOKEN_MAX 4096 /* at most */

/* `daemon.metrics`: who may read /metrics, see docs/metrics.md#access. */
typedef struct ctl_metrics_conf {
	char *token_file; /* path of the bearer token, NULL: none needed */
	char *token;      /* its text, surrounding white space left out;
			   * read when the file was loaded */
	char *client;     /* with security: the client whose jobs /metrics
			   * shows (the jobs' `clients` lists), NULL: none */
} ctl_metrics_conf;

typedef struct ctl_config {
	char *path;                 /* file it came from ("<string>") */
	char *text;                 /* the whole YAML text */
	size_t text_len;            /* bytes in text */
	char *control;              /* ROUTER endpoint, NULL = default */
	char *publish;              /* PUB endpoint, NULL = default */
	uint32_t apply_lag;         /* steps between window end+1 and apply */
	uint32_t window_timeout_ms; /* close a window with ranks missing */
	uint32_t rank_timeout_ms;   /* declare a silent rank lost */
	uint32_t heartbeat_ms;      /* heartbeat period told to agents */
	uint32_t repair_margin;     /* extra steps for a repair decision */
	uint32_t max_jobs;          /* jobs held at once */
	uint32_t max_world;         /* ranks per job */
	uint32_t max_layers;        /* layers per job */
	uint32_t job_idle_ms;       /* forget a job with no live rank */
	uint32_t reload_timeout_ms; /* abandon a reload that takes longer */
	uint32_t plugin_timeout_ms; /* deadline of one plug-in call */
	uint32_t plugin_memory_mb;  /* address space of a plug-in worker */
	uint32_t max_job_mb;        /* MiB one job may hold, as its Hello
				     * implies (ctl_jobs_job_bytes) */
	uint32_t max_total_job_mb;  /* MiB all jobs together may hold */
	uint32_t peer_queue_mb;     /* MiB queued to send to one connection
				     * (see server.h) */
	ctl_store_conf store;       /* history database settings */
	ctl_security_conf security; /* CURVE keys; security.enabled false:
				     * none */
	bool allow_insecure;        /* bind non-loopback endpoints without
				     * security (warned) */
	char *metrics_listen;       /* ADDR:PORT serving /metrics, NULL:
				     * none (docs/metrics.md); from
				     * metrics_listen or metrics.listen */
	ctl_metrics_conf metrics;   /* who may read /metrics */
	uint32_t n_jobs;            /* entries in jobs */
	ctl_job_conf *jobs;         /* first match wins */
} ctl_config;

#define CTL_CONFIG_ERRORS_MAX 50 /* errors one validation reports */

/* Every error one validation found, in the order the file was walked. */
typedef struct ctl_config_errors {
	uint32_t n; /* entries used */
	char msg[CTL_CONFIG_ERRORS_MAX]
		[CTL_CONFIG_ERR_MAX]; /* each
				       * "FILE:LINE:COLUMN:
				       * message" */
} ctl_config_errors;

/* Reads and validates `path`, loading the plug-ins it names. On success
 * *ret_cfg is the caller's (free with ctl_config_destroy). On failure
 * returns BELLOWS_EIO (cannot read), BELLOWS_ECONFIG (invalid, including a
 * plug-in that cannot be loaded or is refused; errbuf holds
 * "FILE:LINE:COLUMN: message") or BELLOWS_ENOMEM, and *ret_cfg is
 * untouched. */
int ctl_config_load(const char *path, ctl_config **ret_cfg, char *errbuf,
    size_t errlen);

/* Same as ctl_config_load, but validation goes on after an error in one
 * key, parameter, policy or job and every error goes into *errs (at most
 * CTL_CONFIG_ERRORS_MAX; validation stops at the last one). An error that
 * ends the reading (cannot open, YAML syntax) is the only entry. errs->n
 * is 0 on success and on BELLOWS_ENOMEM. */
int ctl_config_load_all(const char *path, ctl_config **ret_cfg,
    ctl_config_errors *errs);

/* Reports a ctl_config_load_all(path, ...) that returned r (not 0) with
 * *errs, one line(arg, text) call per line, the text without a line end:
 * each message in errs; "PATH: <text of r>" when errs holds none (out of
 * memory); "PATH: stopped after N errors" when validation stopped at
 * CTL_CONFIG_ERRORS_MAX. Borrows errs for the call. */
void ctl_config_errors_emit(const ctl_config_errors *errs, int r,
    const char *path, void (*line)(void *arg, const char *text), void *arg);

/* Same as ctl_config_load_all, but the reading stops soon after *cancel
 * becomes true (set from another thread): it then returns
 * BELLOWS_ETIMEDOUT with one message in *errs and *ret_cfg untouched.
 * Thread-safe: any thread may read a file while others read theirs; the
 * configuration returned belongs to the caller, who may hand it to
 * another thread. `cancel` may be NULL. */
int ctl_config_load_cancellable(const char *path, const atomic_bool *cancel,
    ctl_config **ret_cfg, ctl_config_errors *errs);

/* Same as ctl_config_load for a text in memory; `name` stands for the file
 * in messages, and relative plug-in paths are resolved against its
 * directory (the current one if `name` has no '/'). */
int ctl_config_parse(const char *text, size_t len, const char *name,
    ctl_config **ret_cfg, char *errbuf, size_t errlen);

/* Frees a configuration and drops its plug-in references. No policy set
 * may still borrow it. NULL-safe, sets *cfg to NULL. */
void ctl_config_destroy(ctl_config **cfg);

/* True when the glob `pattern` matches all of `name`, as fnmatch(3)
 * without flags does: '*' any bytes, '?' one byte, '[...]' one byte of a
 * set ('!' or '^' negates; ranges; [:class:]), '\' quotes the next
 * byte. Runs in O(length(pattern) * length(name)) steps, whatever the
 * pattern. A pattern the configuration refused (an unclosed '[') matches
 * nothing. */
bool ctl_config_glob_match(const char *pattern, const char *name);

/* The name of the trusted client whose Z85 public key is `z85`, or NULL
 * (also without security). Borrowed from cfg. */
const char *ctl_config_client_by_key(const ctl_config *cfg, const char *z85);

/* True when client `client` may join, report to and read the job `job`:
 * always without security; with it, `client` must be non-NULL and, when
 * the job's entry lists `clients`, one of them (a job no entry matches
 * is not allowed). */
bool ctl_config_client_allowed(const ctl_config *cfg, const char *job,
    const char *client);

/* True when /metrics may show job `job`: always without security; with
 * it, only with a token, and when daemon.metrics.client may read the job
 * (ctl_config_client_allowed). */
bool ctl_config_metrics_shows(const ctl_config *cfg, const char *job);

/* True when client `client` may read every job whatever its name: no
 * job entry leaves it out (always without security). */
bool ctl_config_client_allowed_all(const ctl_config *cfg, const char *client);

/* Reads a clients directory: every NAME.pub in it (other files are
 * ignored) into *ret_keys (sorted by name, the caller's: free with
 * ctl_config_keys_free). A file that cannot be trusted (an invalid name,
 * a certificate that does not load, a key another .pub holds too) is
 * skipped, and the rest is read: *ret_skipped is NULL, or one line
 * "DIR/FILE: why" per skipped file (the caller's, free()). Returns 0,
 * BELLOWS_EIO (the directory cannot be read), BELLOWS_EINVAL (more than
 * CTL_CONFIG_CLIENTS_MAX certificates) with errbuf saying why, or
 * BELLOWS_ENOMEM. */
int ctl_config_read_clients(const char *dir, ctl_client_key **ret_keys,
    uint32_t *ret_n, char **ret_skipped, char *errbuf, size_t errlen);

/* Frees what ctl_config_read_clients returned. NULL-safe. */
void ctl_config_keys_free(ctl_client_key *keys, uint32_t n);

/* Returns the first job entry whose pattern matches `job`, or NULL. */
const ctl_job_conf *ctl_config_match(const ctl_config *cfg, const char *job);

/* True when a and b are the same policy instance for a reload: same
 * instance name, same type, from the same plug-in file (or both built-in),
 * so that a's state is valid for b. */
bool ctl_policy_conf_same_instance(const ctl_policy_conf *a,
    const ctl_policy_conf *b);

/* True when the selector picks a tensor with this name and shape. */
bool ctl_selector_matches(const ctl_selector *sel, const char *name,
    uint64_t numel, uint32_t ndim);

/* Checks a valid configuration's timing against the agents' default
 * decision_timeout_ms. A window that closes by timeout (a rank missing)
 * must be decided before the other ranks, waiting at its apply step, give
 * up: a decision that arrives later is applied by each rank at its next
 * step, which differs between ranks. So window_timeout_ms must stay at or
 * below CTL_CONFIG_AGENT_WAIT_MS - CTL_CONFIG_DECIDE_MARGIN_MS. Returns
 * true and writes a warning into ret_why (why_len bytes, NUL-terminated)
 * when it does not; false, leaving ret_why untouched, when it does. */
bool ctl_config_timing_warning(const ctl_config *cfg, char *ret_why,
    size_t why_len);

/* Writes a normalised summary of what cfg configures (every value, with
 * defaults filled in) to `out` as YAML. Returns 0 or BELLOWS_EIO. */
int ctl_config_print(const ctl_config *cfg, void *out /* FILE * */);

#endif /* CTL_CONFIG_H */
