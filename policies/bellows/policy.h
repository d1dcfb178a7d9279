/* policy - the bellows policy ABI: what a policy is to bellowsd.
 *
 * A policy is a versioned ops struct. It declares its parameters as data
 * (the host parses and checks the YAML, a policy never sees it), the knobs
 * it owns (each knob of a job has exactly one owner), how much state the
 * host must allocate for it, and three functions: init, on_window, fini.
 * Policies are pure: they touch no sockets, files or clocks, so the same
 * window history gives the same decisions in bellowsd and in `bellows
 * replay`.
 *
 * Threading: the host calls a policy instance from one thread at a time.
 * Nothing a policy is handed may be kept past the call except its own
 * state and config.
 */
#ifndef BELLOWS_POLICY_H
#define BELLOWS_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bellows/export.h>
#include <bellows/stats.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any incompatible change of this header. 2: bellows_param's
 * `choices`, the ops' `check` and `select_every_layer`,
 * BELLOWS_EVENT_LR_CHANGE and the event's lr_old/lr_new. 3: the residual
 * statistics and the array statistics' pointers and lengths appended to
 * bellows_window_layer (its size, the stride of the layers array,
 * changed), BELLOWS_KNOB_RESIDUAL_PLAN and the proposal's residual plan.
 * 4: the level applied (level_applied) appended to bellows_window_layer.
 * 5: the ops' `stats_read` (the statistics a policy reads, as data).
 * 6: bellows_window's `layer_size`, the stride of its layers array, which
 * ABI 6 policies step by (bellows_window_layer_at): from ABI 6 on, a field
 * appended to bellows_window_layer needs no bump, and the bump is the last
 * one a per-layer statistic costs.
 * bellowsd loads policies from BELLOWS_POLICY_ABI_OLDEST to its own
 * version: an older plug-in is refused with a message asking for a rebuild (it
 * would step through the layers array by the old size). */
#define BELLOWS_POLICY_ABI 6

/* The oldest ABI bellowsd still loads: ABI 5 only appended `stats_read`
 * to the ops, which bellowsd reads from ABI 5 ops only (an ABI 4 policy
 * reads every statistic); ABI 4 and 5 policies step through the layers
 * by BELLOWS_WINDOW_LAYER_SIZE_5, and the host hands them layers at that
 * stride (a copy, once bellows_window_layer has grown past it). */
#define BELLOWS_POLICY_ABI_OLDEST 4

#define BELLOWS_REASON_MAX 512 /* bytes of a proposal's reason, with NUL */

/* Bytes of a codec table (BELLOWS_KNOB_CODEC_TABLE). A Decision carrying
 * a longer one is refused by every peer's codec. */
#define BELLOWS_CODEC_TABLE_MAX 65536

/* Knobs a policy may own (bit set). Values go into configs: only append. */
enum bellows_knob {
	BELLOWS_KNOB_LEVEL = 1u << 0,          /* per-layer compression level */
	BELLOWS_KNOB_BATCH_SIZE = 1u << 1,     /* per-rank batch size */
	BELLOWS_KNOB_LR_SCALE = 1u << 2,       /* LR multiplier */
	BELLOWS_KNOB_ERROR_BOUND = 1u << 3,    /* per-layer error bound */
	BELLOWS_KNOB_SIZE_THRESHOLD = 1u << 4, /* raw below this size */
	BELLOWS_KNOB_CODEC_TABLE = 1u << 5,    /* opaque codec table */
	BELLOWS_KNOB_COMPRESSION = 1u << 6,    /* compression on/off gate */
	BELLOWS_KNOB_RESIDUAL_PLAN = 1u << 7,  /* error-feedback residual
						* sharing and 2-D reduction
						* (ABI 3) */
};

/* The statistics a policy reads (the ops' `stats_read`, ABI 5): bit
 * BELLOWS_STAT_READ(name) for each entry of BELLOWS_LAYER_STATS
 * (bellows/stats.h) it looks at, by that table's order, which never
 * changes, and BELLOWS_STATS_DECLARED. A stats_read without
 * BELLOWS_STATS_DECLARED (0, an ops struct that does not set it) reads
 * every statistic. bellowsd tells a job's agents which statistics none of
 * its policies reads, and the agents skip the per-step work that only
 * those need (docs/statistics.md, "Statistics no policy reads"). */
#define BELLOWS_STAT_READ(name) (UINT64_C(1) << BELLOWS_STAT_INDEX_##name)
#define BELLOWS_STATS_DECLARED  (UINT64_C(1) << 63)

/* The residual plan's defaults: every layer its own residual, kept whole. */
#define BELLOWS_RESID_PHI_DEFAULT 0.5 /* ResiReduce's significance phi */

typedef enum bellows_param_type {
	BELLOWS_PARAM_BOOL = 1,   /* bool at offset */
	BELLOWS_PARAM_INT = 2,    /* int64_t at offset, within [min, max] */
	BELLOWS_PARAM_DOUBLE = 3, /* double at offset, within [min, max] */
	BELLOWS_PARAM_STRING = 4, /* char[BELLOWS_PARAM_STRING_MAX] at offset */
	BELLOWS_PARAM_STEPS = 5,  /* bellows_steps at offset: window -> value */
} bellows_param_type;

#define BELLOWS_PARAM_STRING_MAX 128
#define BELLOWS_STEPS_MAX        64

/* A piecewise-constant function of the window index, written in YAML as a
 * mapping {first_window: value, ...}; keys strictly increase. */
typedef struct bellows_steps {
	uint32_t n;                       /* entries used */
	uint64_t from[BELLOWS_STEPS_MAX]; /* first window of each piece */
	double value[BELLOWS_STEPS_MAX];  /* value from that window on */
} bellows_steps;

/* One parameter. The table ends with an entry whose name is NULL. */
typedef struct bellows_param {
	const char *name;           /* YAML key */
	bellows_param_type type;    /* how it is parsed and stored */
	size_t offset;              /* where in the policy's config struct */
	double min;                 /* INT/DOUBLE lower bound (inclusive) */
	double max;                 /* INT/DOUBLE upper bound (inclusive) */
	double def;                 /* default for BOOL/INT/DOUBLE */
	const char *def_str;        /* default for STRING (NULL = "") */
	bool required;              /* must appear in the YAML */
	const char *help;           /* one line for `bellows policy check` */
	const char *const *choices; /* STRING: the allowed values, NULL-
				     * terminated; NULL = any string */
} bellows_param;

/* One layer of the job as a policy sees it in a window.
 *
 * The statistics below are aggregated across ranks as the statistics
 * table says (bellows/stats.h: each row's `agg`, `view` and `field`), and
 * the controller writes them by offsetof with a static assertion of each
 * field's type. The fields up to level_applied are written out by hand:
 * that layout predates the table and orders fields its own way (sum_sq
 * before count, the grad_norm triple, level and error_bound among them),
 * and it is frozen. The statistics appended after ABI 6 are generated
 * from the table (BELLOWS_LAYER_STATS_APPENDED, at the end of the
 * struct): a new row of it is a new field here, with no edit to this
 * header. Their meanings are the table's (docs/statistics.md).
 *
 * The contract on its size: a policy steps through bellows_window.layers
 * by the window's `layer_size`, never by sizeof (bellows_window_layer_at
 * does it). So a statistic is appended at the end of this struct within
 * the same ABI: a plug-in built against an older header reads the prefix
 * it knows; one built against a newer header than the host's checks a
 * field appended after ABI 6 with BELLOWS_WINDOW_LAYER_HAS before reading
 * it. Fields are never removed, reordered or resized.
 * Policies of ABI 4 and 5 index by their own sizeof, which is
 * BELLOWS_WINDOW_LAYER_SIZE_5: the host hands them a copy at that stride.
 * tests/policies/test_abi.c holds the frozen layouts. */
typedef struct bellows_window_layer {
	const char *name;         /* layer name */
	uint64_t numel;           /* elements */
	uint32_t ndim;            /* dimensions in shape */
	const uint32_t *shape;    /* dimensions */
	bool selected;            /* the policy's layer selectors match it */
	double grad_norm;         /* norm of the window-summed gradient, from
				   * the configured source (rank 0 or mean) */
	double grad_norm_rank0;   /* rank 0's, NAN if rank 0 did not report */
	double grad_norm_mean;    /* mean over reporting ranks */
	double sum_sq;            /* summed over ranks */
	double abs_sum;           /* summed over ranks */
	double max_abs;           /* largest over ranks */
	uint64_t count;           /* elements observed, summed over ranks */
	uint64_t nonzero;         /* summed over ranks */
	uint64_t nonfinite;       /* summed over ranks */
	double momentum_abs_mean; /* mean over ranks */
	double level;             /* level in force during the window */
	double error_bound;       /* bound in force during the window */

	/* Activation statistics (COMET), over the ranks that measured them;
	 * act_steps 0: not measured in this window (the rest then 0). */
	uint64_t act_steps;   /* steps measured, summed over ranks */
	double act_lbar;      /* L-bar: mean over samples of the per-sample
			       * max |dLoss/dOutput|, mean over ranks */
	double act_nonzero;   /* R: non-zero fraction of the stored
			       * activation (after the zero filter), mean
			       * over ranks */
	double act_bytes;     /* stored bytes per step, mean over ranks */
	double act_raw_bytes; /* uncompressed bytes per step, mean over ranks */

	/* Per-tensor communication timings (SlimGC): medians over the
	 * reporting ranks of each rank's median over its window; NAN when no
	 * rank measured it. Sizes are numel * 4 bytes (float32). */
	double comm_raw_ms;   /* one raw collective of this tensor */
	double comm_comp_ms;  /* one compressed collective (codec excluded) */
	double codec_ms;      /* encode + decode around one compressed one */
	uint32_t comm_raw_n;  /* raw samples, summed over ranks */
	uint32_t comm_comp_n; /* compressed samples, summed over ranks */

	/* Appended in ABI 3: the error-feedback residual r = G~ - Q(G~) of the
	 * layer (ResiReduce), the rank's mean over its steps, then the mean
	 * over the ranks that measured it; resid_steps 0: not measured (the
	 * rest then 0). The quantiles are of |r| / rms(r), rms(r) = resid_l2 /
	 * sqrt(numel): scale-free shapes of the distribution. */
	uint64_t resid_steps; /* steps measured, summed over ranks */
	double resid_l1;      /* ||r||_1 */
	double resid_l2;      /* ||r||_2 */
	double resid_q50;     /* median of |r| / rms(r) */
	double resid_q90;     /* 90th percentile of |r| / rms(r) */
	double resid_q99;     /* 99th percentile of |r| / rms(r) */
	double resid_floats;  /* residual floats the layer holds under the
			       * plan in force (a shared buffer counted at its
			       * group's leader, 0 at the other members) */

	/* Appended in ABI 3: the array statistics (bellows/stats.h,
	 * BELLOWS_LAYER_ARRAYS), each a pointer to its values, summed over
	 * the ranks that reported it, and their count: NULL and 0 when no
	 * rank did (only the layers a trainer asks for carry one). */
	const uint64_t *exp_hist; /* 256 bins: how many gradient values
				   * had each float32 biased exponent (bin
				   * 0: zeros and denormals, 255: Inf and
				   * NaN) */
	uint32_t exp_hist_len;    /* 256, or 0 */

	/* Appended in ABI 4: the level the layer was sent at in the
	 * window's last step, as the ranks applied it (0: raw), where
	 * `level` is the one decided: 0 below the size threshold, while
	 * the gate is off, and for tensors the trainer sends raw whatever
	 * their level (bellows.torch's 1-D ones); a calibration's
	 * alternation does not count. The largest over the ranks that
	 * reported it; NAN when none did (agents older than protocol
	 * minor 4). */
	double level_applied;

	/* Appended after ABI 6, generated from the statistics table: one
	 * field per row of BELLOWS_LAYER_STATS_APPENDED in the window, in
	 * its order (check with BELLOWS_WINDOW_LAYER_HAS before reading). */
	BELLOWS_LAYER_STATS_APPENDED(BELLOWS_WINDOW_LAYER_FIELD)
} bellows_window_layer;

/* The size of bellows_window_layer in ABI 4 and 5: the stride those
 * policies step by. */
#define BELLOWS_WINDOW_LAYER_SIZE_5                                            \
	(offsetof(bellows_window_layer, level_applied) + sizeof(double))

/* One measured collective of a rank (perfmodel's fit), as reported: the
 * rank's median time over the window's collectives of that size. */
typedef struct bellows_comm_sample {
	uint32_t rank;   /* reporting rank */
	uint64_t bytes;  /* bytes each rank contributed to the collective */
	double ms;       /* median duration */
	uint32_t count;  /* collectives of this size in the window */
	bool compressed; /* payload after compression (bytes = compressed) */
} bellows_comm_sample;

/* The aggregated window handed to on_window. */
typedef struct bellows_window {
	const char *job;                    /* job name */
	uint64_t window;                    /* window index, from 0 */
	uint64_t first_step;                /* first step */
	uint64_t last_step;                 /* last step (max over ranks) */
	uint64_t epoch;                     /* trainer's epoch (rank 0) */
	double lr;                          /* LR of the window's first step */
	double lr_next;                     /* LR the next window starts with */
	uint32_t batch_size;                /* per-rank batch size in force */
	double lr_scale;                    /* LR scale in force */
	uint32_t world;                     /* ranks in the job */
	uint32_t ranks_reported;            /* ranks that reported it */
	double step_ms_median;              /* median over ranks, mean/step */
	double compute_ms_median;           /* same, compute time */
	double comm_ms_median;              /* same, communication time */
	uint64_t floats_sent;               /* summed over ranks */
	uint64_t floats_raw;                /* summed over ranks */
	uint32_t n_layers;                  /* entries in layers */
	const bellows_window_layer *layers; /* the layer table */

	/* Appended in 0.2 (performance model, COMET, SlimGC). Zero: not
	 * reported by any rank. */
	double backward_ms_median;       /* median over ranks, mean per step:
					  * backward compute, communication
					  * excluded */
	double codec_ms_median;          /* same: encode + decode per step */
	double mem_device_used;          /* bytes, max over ranks */
	double mem_device_total;         /* bytes, min over ranks */
	double mem_host_used;            /* bytes, max over ranks */
	bool compression_off;            /* gate in force during the window */
	uint64_t size_threshold;         /* threshold in force (bytes) */
	uint64_t calibrate_until;        /* calibration in force up to this
					  * step (exclusive); 0: none */
	uint32_t n_comm;                 /* entries in comm */
	const bellows_comm_sample *comm; /* every rank's collectives */

	/* Appended in 0.3. */
	double saved_bytes; /* bytes one step saved for backward (every
			     * activation, compressed ones as stored), max
			     * over ranks; 0: not reported */

	/* Appended in 0.4. Zero: no rank reported an evaluation. */
	double eval_accuracy; /* accuracy of the trainer's last evaluation
			       * in the window (0 to 1), max over ranks */
	double eval_loss;     /* its loss, max over ranks */

	/* Appended in ABI 6. */
	size_t layer_size; /* bytes from one entry of `layers` to the next:
			    * a policy steps by it (bellows_window_layer_at),
			    * so fields appended to bellows_window_layer
			    * need no new ABI */
} bellows_window;

/* Layer i of window w (i < n_layers), by the stride the host gave. */
static inline const bellows_window_layer *
bellows_window_layer_at(const bellows_window *w, uint32_t i)
{
	const char *base = (const char *)w->layers;

	return (const bellows_window_layer *)(const void *)(base +
	    (size_t)i * w->layer_size);
}

/* True when the host's layers carry `field` of bellows_window_layer (a
 * field appended after ABI 6, which an older host lacks). */
#define BELLOWS_WINDOW_LAYER_HAS(w, field)                                     \
	((w)->layer_size >= offsetof(bellows_window_layer, field) +            \
		sizeof(((bellows_window_layer *)0)->field))

#define BELLOWS_METRICS_MAX     256 /* metrics one proposal may carry */
#define BELLOWS_METRIC_NAME_MAX 32  /* bytes of a metric name, with NUL */

/* A named number a policy computed, for people: never a knob. */
typedef struct bellows_metric {
	char name[BELLOWS_METRIC_NAME_MAX]; /* [a-z0-9_]+, e.g. "alpha_ms" */
	int32_t layer;                      /* layer index, -1: the job */
	double value;                       /* in the unit its name says */
} bellows_metric;

/* What a policy proposes. The host pre-fills it with the state in force;
 * the policy changes only knobs it owns (others are ignored) and writes a
 * reason when it changes something. */
typedef struct bellows_proposal {
	uint32_t n_layers;               /* entries in level and error_bound */
	double *level;                   /* per layer */
	double *error_bound;             /* per layer */
	uint32_t batch_size;             /* 0 = trainer's own */
	double lr_scale;                 /* LR multiplier */
	uint64_t size_threshold;         /* bytes */
	bool compression_off;            /* gate */
	char reason[BELLOWS_REASON_MAX]; /* why, empty if nothing changed */

	/* Appended in 0.2. */
	uint64_t calibrate_steps; /* SIZE_THRESHOLD owner: for this many
				   * steps from the decision's apply step,
				   * every rank sends each tensor compressed
				   * on even steps and raw on odd steps; 0:
				   * none (pre-filled 0 each window) */
	uint32_t n_metrics;       /* entries used in metrics (pre-filled 0) */
	bellows_metric
	    metrics[BELLOWS_METRICS_MAX]; /* named values the
					   * policy computed this window
					   * (predicted times, fitted
					   * parameters...): recorded in the
					   * history, shown by bellows top */

	/* Appended in 0.3. The CODEC_TABLE owner's opaque table for the
	 * agents' codec (e.g. GComp's Huffman table of gradient exponents):
	 * a host buffer of BELLOWS_CODEC_TABLE_MAX bytes pre-filled with the
	 * table in force, its first codec_table_len bytes used (0: none). A
	 * policy rebuilds it by writing the buffer and the length; a length
	 * above BELLOWS_CODEC_TABLE_MAX is refused (the table in force
	 * stays). Other policies' edits are ignored. */
	uint8_t *codec_table;     /* BELLOWS_CODEC_TABLE_MAX bytes */
	uint32_t codec_table_len; /* bytes used */

	/* Appended in ABI 3. The RESIDUAL_PLAN owner's plan, n_layers entries
	 * each, pre-filled with the plan in force (by default every layer its
	 * own group, phi BELLOWS_RESID_PHI_DEFAULT, rows and columns 1).
	 * resid_group[i] is the index of the layer whose residual buffer
	 * layer i shares (its group's leader; i: its own); a leader must be
	 * its own leader. resid_phi[g], for a leader g, is the group's phi in
	 * [0, 1] (the others are ignored). resid_rows / resid_cols in (0, 1]
	 * are the kept row / column fractions of a 2-D reduction (1: whole;
	 * only for ungrouped layers of 2 or more dimensions). A plan breaking
	 * these rules is refused (the plan in force stays). */
	uint32_t *resid_group; /* per layer: its group's leader */
	double *resid_phi;     /* per layer: phi, read at leaders */
	double *resid_rows;    /* per layer: kept row fraction */
	double *resid_cols;    /* per layer: kept column fraction */
} bellows_proposal;

/* Something that happened to the job between windows. */
typedef enum bellows_event_type {
	BELLOWS_EVENT_RANK_LOST = 1,   /* a rank went silent or left */
	BELLOWS_EVENT_RANK_JOINED = 2, /* a rank joined or rejoined */
	BELLOWS_EVENT_RELOAD = 3,      /* the configuration was reloaded and
					* this instance kept: `config` is now
					* the new file's */
	BELLOWS_EVENT_LR_CHANGE = 4,   /* the window about to be handed to
					* on_window started with another LR
					* than the window before it (lr_old ->
					* lr_new); sent just before that
					* on_window call (ABI 2) */
} bellows_event_type;

typedef struct bellows_event {
	bellows_event_type type; /* what happened */
	uint32_t rank;           /* RANK_*: which rank */
	uint64_t window;         /* the next window to close */
	uint32_t ranks_alive;    /* live ranks after the event (LR_CHANGE:
				  * ranks that reported the window) */
	double lr_old;           /* LR_CHANGE: the previous window's LR */
	double lr_new;           /* LR_CHANGE: this window's LR (its
				  * bellows_window.lr) */
} bellows_event;

/* Static facts about the job, handed to init. */
typedef struct bellows_job_info {
	const char *job;                    /* job name */
	uint32_t world;                     /* ranks */
	uint32_t n_layers;                  /* entries in layers */
	const bellows_window_layer *layers; /* names, sizes, selection */

	/* Appended in ABI 6. */
	size_t layer_size; /* bytes from one entry of `layers` to the next,
			    * as bellows_window's */
} bellows_job_info;

/* Layer i of job (i < n_layers), by the stride the host gave. */
static inline const bellows_window_layer *
bellows_job_layer_at(const bellows_job_info *job, uint32_t i)
{
	const char *base = (const char *)job->layers;

	return (const bellows_window_layer *)(const void *)(base +
	    (size_t)i * job->layer_size);
}

typedef struct bellows_policy_ops {
	uint32_t abi_version; /* BELLOWS_POLICY_ABI */
	const char *name;     /* type name used in YAML, [a-z0-9_]+ */
	const char *summary;  /* one line */
	uint32_t knobs;       /* bellows_knob bits it owns */
	size_t config_size;   /* bytes of its config struct */
	size_t state_size;    /* bytes of state the host allocates, zeroed */
	const bellows_param *params; /* parameter table, NULL-name terminated */

	/* Called once per job instance after the config was parsed; fills
	 * the initial proposal (the state in force before any window).
	 * Returns 0 or a BELLOWS_E* (the instance is then not used). */
	int (*init)(void *state, const void *config,
	    const bellows_job_info *job, bellows_proposal *initial);

	/* Called for every closed window, in window order. Edits `out`
	 * (pre-filled with the state in force) and returns 0, or a
	 * BELLOWS_E* to propose nothing for this window. */
	int (*on_window)(void *state, const void *config,
	    const bellows_window *window, bellows_proposal *out);

	/* Releases whatever init acquired inside state (not state itself).
	 * May be NULL when there is nothing to release. */
	void (*fini)(void *state, const void *config);

	/* Optional (may be NULL): told about rank losses, joins, LR
	 * changes and reloads; ignores event types it does not know. On RELOAD
	 * the instance keeps its state and from now on is called with the new
	 * `config`; it may adapt its state here. Returns 0, or a BELLOWS_E* to
	 * refuse the new config (the host then restarts the instance from
	 * init). */
	int (*on_event)(void *state, const void *config,
	    const bellows_event *event);

	/* Optional (may be NULL): checks a parsed config for what the
	 * parameter table cannot express (e.g. one value below another).
	 * Returns 0, or a BELLOWS_E* with a one-line message in err (errlen
	 * bytes); the host reports it as a configuration error at the
	 * policy's position, so `bellows policy check` catches it. */
	int (*check)(const void *config, char *err, size_t errlen);

	/* Layers the default selector picks when the YAML's `layers:` sets
	 * no min_ndim: false, tensors of 2 or more dimensions (1-D biases
	 * and norms stay raw); true, every layer (min_ndim 0), for a policy
	 * whose statistic is of the whole model. */
	bool select_every_layer;

	/* ABI 5: the layer statistics the policy reads: BELLOWS_STAT_READ
	 * bits and BELLOWS_STATS_DECLARED; 0 (not declared) reads every
	 * one. A policy that declares a set must not read a statistic
	 * outside it: the agents may report it as 0. */
	uint64_t stats_read;
} bellows_policy_ops;

/* Out-of-tree policies export this symbol (a function returning the ops). */
#define BELLOWS_POLICY_ENTRY "bellows_policy_entry"
typedef const bellows_policy_ops *bellows_policy_entry_fn(void);

#ifdef __cplusplus
}
#endif

#endif /* BELLOWS_POLICY_H */
