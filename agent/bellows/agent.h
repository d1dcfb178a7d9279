/* agent - libbellows, the bellows agent linked into every training process.
 *
 * A training process opens one agent per rank. The agent measures the
 * gradients the trainer hands it (bellows_agent_observe), closes windows of
 * steps, and sends one REPORT per window to bellowsd from a background I/O
 * thread; the training thread never waits on the network for that. bellowsd
 * answers each window with a decision that names the step at which it takes
 * effect (apply_step); every rank applies it exactly there, so all ranks
 * change compression level at the same step.
 *
 * The training thread waits only in bellows_agent_step_begin(): at the
 * first step, for bellowsd's Welcome (the job's current decision), and at
 * the apply step of a decision that is due and has not arrived yet. Either
 * wait lasts at most decision_timeout_ms; then it keeps the decision it has
 * (the library's defaults at the first step) and counts a miss (reported
 * to bellowsd, which re-issues the state so every rank converges again).
 *
 * If bellowsd is down or restarts, training goes on with the last decision;
 * reports wait, and those sent are kept until bellowsd has recorded them,
 * within keep_reports_mb (the oldest dropped and counted beyond it); the
 * agent reconnects, sends them again and resynchronises by itself.
 *
 * Threading: one training thread calls every function except
 * bellows_agent_stats_get(), which any thread may call. The agent never
 * aborts and never writes to stdout/stderr; it logs through the callback
 * given in the configuration, possibly from its I/O thread.
 *
 * Errors: every int-returning function returns 0 or a negative BELLOWS_E*
 * (see bellows/error.h); outputs (ret_*) are untouched on failure.
 */
#ifndef BELLOWS_AGENT_H
#define BELLOWS_AGENT_H

#include <stddef.h>
#include <stdint.h>

#include <bellows/error.h>
#include <bellows/export.h>
#include <bellows/stats.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bellows_agent bellows_agent;

enum bellows_log_level {
	BELLOWS_LOG_ERROR = 0,
	BELLOWS_LOG_WARN = 1,
	BELLOWS_LOG_INFO = 2,
	BELLOWS_LOG_DEBUG = 3,
};

/* Log sink: `message` is one line without a newline, valid for the call. */
typedef void bellows_log_fn(void *arg, int level, const char *message);

enum bellows_layer_flags {
	BELLOWS_LAYER_NO_ACCUMULATOR = 1u
	    << 0,                         /* skip the window sum (acc_norm 0) */
	BELLOWS_LAYER_MOMENTUM = 1u << 1, /* keep a momentum average */
	BELLOWS_LAYER_DEVICE = 1u << 2,   /* gradients in CUDA device memory:
					   * bellows_agent_observe_device */
	BELLOWS_LAYER_EXP_HIST = 1u << 3, /* report the exponent histogram
					   * (exp_hist, 256 bins) of its
					   * gradients: 2 KiB per window on
					   * the wire, one histogram pass per
					   * observation; off by default */
};

/* Element types of observed gradients. float16 and bfloat16 values are
 * widened exactly to float32; the statistics, accumulator and momentum are
 * then those of float32 gradients. */
enum bellows_dtype {
	BELLOWS_DTYPE_F32 = 0,  /* IEEE binary32 */
	BELLOWS_DTYPE_F16 = 1,  /* IEEE binary16 */
	BELLOWS_DTYPE_BF16 = 2, /* bfloat16 */
};

/* One gradient tensor of the model. Copied by bellows_agent_open. */
typedef struct bellows_layer {
	const char *name;      /* unique, 1..255 bytes, no control characters */
	uint64_t numel;        /* elements */
	uint32_t ndim;         /* entries in shape; 0 means 1-D [numel] */
	const uint32_t *shape; /* dimensions; product must equal numel */
	uint32_t flags;        /* bellows_layer_flags */
} bellows_layer;

/* Where a window's statistics are reduced (bellows_agent_config.aggregate):
 * each rank reports its own to bellowsd (RANK), or the ranks of a node
 * (NODE) or of the whole job (JOB) reduce theirs inside the job through
 * the caller's all-reduce and the group's lowest rank sends one report
 * covering the group. Policies see the same window either way; every
 * rank still joins, heartbeats and applies each decision at its step
 * (docs/agent.md, "Aggregation inside the job"). */
enum bellows_aggregate {
	BELLOWS_AGGREGATE_RANK = 0, /* one report per rank (the default) */
	BELLOWS_AGGREGATE_NODE = 1, /* one per group of aggregate_ranks
				     * consecutive ranks */
	BELLOWS_AGGREGATE_JOB = 2,  /* one for the job, from rank 0 */
};

/* The element-wise operators a bellows_allreduce_fn is asked for. */
enum bellows_reduce_op {
	BELLOWS_REDUCE_SUM = 0, /* sum */
	BELLOWS_REDUCE_MAX = 1, /* largest */
	BELLOWS_REDUCE_MIN = 2, /* smallest */
};

/* The caller's collective: replaces values[0..n) on every rank of the
 * group (the job's process group with BELLOWS_AGGREGATE_JOB, the rank's
 * node group with NODE) with their element-wise `op` (bellows_reduce_op)
 * over the group, like MPI_Allreduce or torch.distributed.all_reduce on
 * float64. Called on the training thread, inside
 * bellows_agent_step_end()/bellows_agent_window_end() at a window's end,
 * three times (SUM, MAX, MIN) on every rank of the group in the same
 * order with the same n. Values are finite. Returns 0, or non-zero on
 * failure: every rank whose call failed then reports its own statistics
 * for that window (the caller should fail on every rank alike). */
typedef int bellows_allreduce_fn(void *arg, double *values, size_t n, int op);

typedef struct bellows_agent_config {
	uint32_t size;       /* sizeof(bellows_agent_config); set by _init */
	const char *control; /* bellowsd ROUTER endpoint */
	const char *publish; /* bellowsd PUB endpoint */
	const char *job;     /* job name, 1..255 bytes */
	uint32_t rank;       /* this process's rank, < world */
	uint32_t world;      /* number of ranks */
	const bellows_layer *layers; /* the layer table, n_layers entries */
	uint32_t n_layers;           /* 1..65536 */
	uint32_t window_steps; /* steps per window; 0: only window_end() */
	uint64_t start_step;   /* first step number (resume) */
	uint64_t start_window; /* index of its first window (resume) */
	uint32_t decision_timeout_ms; /* longest wait at an apply step */
	uint32_t heartbeat_ms;        /* heartbeat period */
	uint32_t queue_capacity;      /* most reports queued while
				       * disconnected (keep_reports_mb
				       * bounds their bytes) */
	double momentum_beta;         /* beta of the momentum average */
	bellows_log_fn *log;          /* NULL: no logging */
	void *log_arg;                /* passed to log */
	int log_level;                /* highest level passed to log */
	uint32_t stats_threads; /* extra threads for the statistics of host
				 * tensors of >= 1 Mi elements, 0..64; 0: the
				 * training thread alone */
	const char *run_id; /* this launch of the job, 0..255 bytes, the same
			     * on every rank of the launch; NULL: the
			     * environment's BELLOWS_RUN_ID, else
			     * TORCHELASTIC_RUN_ID unless it is "none"
			     * (torchrun's word for no --rdzv-id), else none
			     * ("": bellowsd tells runs apart by their
			     * steps) */
	uint32_t resume;    /* non-zero: the trainer restarts from a
			     * checkpoint at start_step / start_window and
			     * continues the job's recorded run there,
			     * instead of starting a new run */
	const char *server_key;      /* bellowsd's public certificate (its
				      * NAME.pub, or its NAME.key); NULL: the
				      * environment's BELLOWS_SERVER_KEY, else
				      * none. With client_key, both sockets use
				      * CURVE; one without the other is refused */
	const char *client_key;      /* this client's secret certificate
				      * (NAME.key, from `bellows keygen`); NULL:
				      * the environment's BELLOWS_CLIENT_KEY,
				      * else none */
	const char *stats_precision; /* "relaxed": the gradient sums (sum
				      * of squares, of magnitudes) within
				      * 1e-6 relative, at memory speed;
				      * "exact": within 3e-14, slower;
				      * NULL: the environment's
				      * BELLOWS_STATS_PRECISION, else
				      * "relaxed" */

	/* Aggregation inside the job (appended). */
	uint32_t aggregate;       /* bellows_aggregate; 0: RANK. NODE and
				   * JOB need allreduce and a bellowsd of
				   * protocol minor 3 or later */
	uint32_t aggregate_ranks; /* NODE: ranks per node, the groups being
				   * ranks k*aggregate_ranks ..
				   * (k+1)*aggregate_ranks - 1 (the last
				   * may be smaller); 1..world. Ignored
				   * otherwise */
	bellows_allreduce_fn *allreduce; /* the group's all-reduce; NULL
					  * with RANK */
	void *allreduce_arg;             /* passed to allreduce */

	/* Outages of bellowsd (appended). */
	uint32_t keep_reports_mb; /* MiB of reports held, 1..65536: those
				   * waiting to be sent and those sent and
				   * not yet recorded by bellowsd, sent
				   * again to a restarted one; beyond it the
				   * oldest go (see docs/operations.md) */
} bellows_agent_config;

/* Timings and counters of one step, given to bellows_agent_step_end():
 * the fields of BELLOWS_STEP_INFO (bellows/stats.h gives each one's type,
 * unit, meaning and how the window reports it: a sum, the largest, the
 * last non-zero value), in its order. Zero fields mean "not measured";
 * step_ms 0 is measured by the agent from step_begin to step_end. Times,
 * lr and lr_next must be finite and not negative (step_ms: anything but a
 * positive finite value is measured). bellows_step_info_schema()
 * describes the layout at run time. */
typedef struct bellows_step_info {
	BELLOWS_STEP_INFO(BELLOWS_STAT_FIELD) /* see bellows/stats.h */
} bellows_step_info;

/* The knob state in force. Pointers stay valid until the next
 * bellows_agent_step_begin() or bellows_agent_close(). */
typedef struct bellows_decision {
	uint64_t seq;               /* 0: no decision yet (defaults) */
	uint64_t apply_step;        /* step it took effect */
	uint64_t window;            /* window it answered, +1; 0: none */
	uint32_t n_layers;          /* entries in level and error_bound */
	const double *level;        /* per layer; 0 = send raw */
	const double *error_bound;  /* per layer; 0 = none */
	uint32_t batch_size;        /* 0: keep the trainer's own */
	double lr_scale;            /* multiply the LR by this */
	uint64_t size_threshold;    /* tensors smaller (bytes) go raw */
	int compression_off;        /* non-zero: send everything raw */
	const uint8_t *codec_table; /* opaque, may be NULL */
	size_t codec_table_len;     /* bytes in codec_table */
	const char *policy;         /* who decided */
	const char *reason;         /* why */
	uint64_t calibrate_steps;   /* from apply_step on, this many steps
				     * alternate compressed (even step) and
				     * raw (odd step) sends: see
				     * bellows_agent_send_mode; 0 = none */
	/* Appended: the residual plan (error feedback, ResiReduce), n_layers
	 * entries each, never NULL (the default plan when bellowsd sent
	 * none: every layer its own group, phi 0.5, rows and columns 1). */
	const uint32_t *resid_group; /* per layer: the layer whose residual
				      * buffer it shares (its group's
				      * leader; itself: its own) */
	const double *resid_phi;     /* per layer: its group's phi, read at
				      * the leader; w_i = phi ||r_i||_1 / n_i +
				      * (1 - phi) ||r_i||_2 / sqrt(n_i) */
	const double *resid_rows;    /* per layer: kept row fraction of the
				      * 2-D reduction, (0, 1]; 1: whole */
	const double *resid_cols;    /* per layer: kept column fraction */
	/* Appended: the layer statistics no policy in force reads, bit i
	 * entry i of BELLOWS_LAYER_STATS (bellows/stats.h); 0: every one is
	 * read (no decision yet, or a bellowsd before protocol minor 5). A
	 * trainer may skip measuring what is skipped: bellows.torch times
	 * no sampled step when comm_raw_ms, comm_comp_ms and codec_ms all
	 * are. */
	uint64_t stats_skip;
} bellows_decision;

/* Statistics of one layer over the last closed window, as reported: the
 * window index, then one field per entry of BELLOWS_LAYER_STATS
 * (bellows/stats.h gives each one's type, unit and meaning), in its
 * order. Entries are only ever appended, so the layout of the fields
 * known to a caller never changes; bellows_stats_schema() describes the
 * library's own layout for bindings that build their mirror at run
 * time. */
typedef struct bellows_layer_stats {
	uint64_t window;                        /* window index */
	BELLOWS_LAYER_STATS(BELLOWS_STAT_FIELD) /* see bellows/stats.h */
} bellows_layer_stats;

/* How a layer's gradient is sent in a step: bellows_agent_send_mode. */
enum bellows_send_mode {
	BELLOWS_SEND_RAW = 0,        /* uncompressed */
	BELLOWS_SEND_COMPRESSED = 1, /* at the layer's level */
};

/* COMET's statistics of the activation a layer's input keeps for the
 * backward pass, for one step: bellows_agent_observe_activation. */
typedef struct bellows_act_stats {
	double lbar;           /* mean over samples of max |dLoss/dOutput| */
	double nonzero;        /* non-zero fraction R of the stored values,
				* in [0, 1] */
	uint64_t stored_bytes; /* bytes kept for backward (compressed) */
	uint64_t raw_bytes;    /* bytes it would take uncompressed */
} bellows_act_stats;

/* One step's statistics of a layer's error-feedback residual (ResiReduce):
 * bellows_agent_observe_residual. r is the layer's fresh residual G~ -
 * Q(G~) of the step (before any sharing); q50..q99 are quantiles of |r| /
 * rms(r), rms(r) = l2 / sqrt(numel), and may come from a sample. */
typedef struct bellows_resid_stats {
	double l1;     /* ||r||_1 */
	double l2;     /* ||r||_2 */
	double q50;    /* median of |r| / rms(r) */
	double q90;    /* 90th percentile of |r| / rms(r) */
	double q99;    /* 99th percentile of |r| / rms(r) */
	double floats; /* residual floats the layer holds under the plan in
			* force (a shared buffer at its group's leader, 0 at
			* the other members; kept values and indices of a
			* 2-D reduction) */
} bellows_resid_stats;

typedef struct bellows_agent_stats {
	int connected;             /* welcomed by the current daemon */
	uint64_t step;             /* next step to begin */
	uint64_t window;           /* windows closed */
	uint64_t reports_sent;     /* reports handed to the socket */
	uint64_t reports_dropped;  /* dropped because the queue was full */
	uint64_t decisions;        /* decisions received (unique seq) */
	uint64_t decision_misses;  /* apply steps passed without the decision */
	uint64_t snapshots;        /* snapshot requests made (gaps, rejoins) */
	uint64_t reconnects;       /* welcomes after the first */
	uint64_t seq_in_force;     /* decision applied in the current step */
	int last_error;            /* last BELLOWS_E* the daemon refused with;
				    * BELLOWS_ECONFIG when a CURVE handshake
				    * failed */
	char last_error_text[256]; /* its message: for a failed handshake
				    * "bellowsd refused this client's key"
				    * or "no answer: wrong server key?" */
} bellows_agent_stats;

/* Returns the library version, e.g. "0.1.0". */
BELLOWS_EXPORT const char *bellows_version(void);

/* The layout of bellows_layer_stats in this library: one entry per field
 * in order (the window index, then the statistics of BELLOWS_LAYER_STATS
 * with their type, offset, unit and doc), then an entry whose name is
 * NULL and whose offset is sizeof(bellows_layer_stats). For bindings that
 * build their mirror of the struct at run time (the Python one does). The
 * array is static and constant: valid for the life of the process, safe
 * from any thread. Never fails. */
BELLOWS_EXPORT const bellows_stat_field *bellows_stats_schema(void);

/* The layout of bellows_step_info in this library, as
 * bellows_stats_schema() describes bellows_layer_stats: its fields in
 * order, then an entry whose name is NULL and whose offset is
 * sizeof(bellows_step_info). Static and constant; never fails. */
BELLOWS_EXPORT const bellows_stat_field *bellows_step_info_schema(void);

/* Fills *cfg with defaults: control $BELLOWS_CONTROL, else
 * tcp://127.0.0.1:5555; publish $BELLOWS_PUBLISH, else
 * tcp://127.0.0.1:5556; job $BELLOWS_JOB, else NULL; window_steps 0,
 * decision_timeout_ms 5000, heartbeat_ms 1000, queue_capacity 1048576,
 * keep_reports_mb 320, momentum_beta 0.9, no logger, log_level
 * BELLOWS_LOG_WARN (unset or empty variables count as absent). A field set
 * after this call wins over the environment; the strings from it are the
 * environment's, valid until it changes. layers, rank and world must be set,
 * and job unless $BELLOWS_JOB gave it. */
BELLOWS_EXPORT void bellows_agent_config_init(bellows_agent_config *cfg);

/* Opens an agent: validates *cfg (BELLOWS_EINVAL with the reason logged on
 * a bad field), copies everything it needs from it, starts the I/O thread
 * and sends HELLO. It does not wait for bellowsd: an agent opened while the
 * daemon is down trains on defaults and joins when the daemon appears.
 * With keys (server_key and client_key, or the environment's
 * BELLOWS_SERVER_KEY and BELLOWS_CLIENT_KEY) both sockets are CURVE
 * clients; only one of the two, a file that is not a certificate, or a
 * client certificate without its secret key is BELLOWS_EINVAL, logged
 * naming the file. A handshake bellowsd refuses (an unknown client key)
 * or never completes (a wrong server key, a daemon without CURVE) is not
 * an error here: it is logged and shown in bellows_agent_stats
 * (last_error BELLOWS_ECONFIG) within decision_timeout_ms, and training
 * goes on on defaults as while bellowsd is away.
 * Layers flagged BELLOWS_LAYER_DEVICE get their accumulator, momentum and
 * running statistics in the memory of the CUDA device current now, which
 * must be the device of their gradients. Returns BELLOWS_ENOMEM,
 * BELLOWS_ESYS (thread or socket creation failed), BELLOWS_ENOTSUP (a
 * device layer, but this library was built without CUDA or the process
 * sees no CUDA device), BELLOWS_EIO (a CUDA error) or BELLOWS_EINVAL. On
 * success *ret_agent is the caller's, to close. */
BELLOWS_EXPORT int bellows_agent_open(const bellows_agent_config *cfg,
    bellows_agent **ret_agent);

/* Hands over the reports still queued and sends BYE (best effort, within
 * 100 ms, and only while bellowsd is reachable), stops the I/O thread, frees
 * everything and sets *agent to NULL. An agent that stepped first logs a
 * summary: windows, decisions received and windows without a decision (a
 * warning when there are any, see docs/protocol.md). NULL-safe and
 * idempotent. */
BELLOWS_EXPORT void bellows_agent_close(bellows_agent **agent);

/* Begins the next step and makes the decision in force for it current.
 * If a decision is due at this step and has not arrived, waits for it up to
 * decision_timeout_ms; on timeout keeps the previous decision and counts a
 * miss. The first step of an agent likewise waits for bellowsd's Welcome,
 * so that every rank starts on the job's initial decision. *ret_step (may be
 * NULL) receives the step number. Returns 0, or BELLOWS_ESTATE if the previous
 * step was not ended. */
BELLOWS_EXPORT int bellows_agent_step_begin(bellows_agent *agent,
    uint64_t *ret_step);

/* Adds one gradient of `layer` (n float32 values at grad, CPU memory,
 * borrowed for the call) to the window statistics. Observing a layer
 * twice in one step adds both. Returns BELLOWS_EINVAL for a bad layer index,
 * a NULL grad with n > 0, n != the layer's numel, or a layer flagged
 * BELLOWS_LAYER_DEVICE; BELLOWS_ESTATE outside a step. */
BELLOWS_EXPORT int bellows_agent_observe(bellows_agent *agent, uint32_t layer,
    const float *grad, uint64_t n);

/* bellows_agent_observe for a gradient of n elements of `dtype`
 * (bellows_dtype) in CPU memory. Returns the same errors, and
 * BELLOWS_EINVAL for an unknown dtype. */
BELLOWS_EXPORT int bellows_agent_observe_typed(bellows_agent *agent,
    uint32_t layer, const void *grad, uint64_t n, int dtype);

/* Adds n gradients of CPU memory at once, as n calls of
 * bellows_agent_observe_typed would: gradient i is of layer layers[i] and
 * is that layer's numel elements of `dtype` starting offsets[i] elements
 * after base (a DDP bucket's buffer and where each gradient lies in it).
 * What a hook calls once per bucket instead of once per gradient. Every
 * argument is checked before anything is added: on an error nothing is.
 * Returns 0; BELLOWS_EINVAL for a NULL agent, a NULL layers, base or
 * offsets with n > 0, a bad layer index, a layer flagged
 * BELLOWS_LAYER_DEVICE or an unknown dtype; BELLOWS_ESTATE outside a
 * step. */
BELLOWS_EXPORT int bellows_agent_observe_many(bellows_agent *agent, uint32_t n,
    const uint32_t *layers, const void *base, const uint64_t *offsets,
    int dtype);

/* Adds one gradient of a layer flagged BELLOWS_LAYER_DEVICE: n elements of
 * `dtype` at grad, in the memory of the layer's CUDA device. The
 * statistics kernel is enqueued on cuda_stream (a cudaStream_t; NULL: the
 * default stream) after the work already there, such as the backward pass
 * that produced grad, and the call returns without waiting: grad must
 * keep its value until the kernel has run, as for any kernel on that
 * stream. Observe a layer on one stream (streams may differ between
 * layers); closing the window waits for the stream of its last
 * observation. Returns BELLOWS_EINVAL for a bad layer index, a NULL grad,
 * n != the layer's numel, an unknown dtype or a layer not flagged
 * BELLOWS_LAYER_DEVICE; BELLOWS_ESTATE outside a step; BELLOWS_EIO if the
 * launch failed (a bad stream or an earlier device fault). */
BELLOWS_EXPORT int bellows_agent_observe_device(bellows_agent *agent,
    uint32_t layer, const void *grad, uint64_t n, int dtype, void *cuda_stream);

/* Ends the current step with its timings (info may be NULL). When
 * window_steps > 0 and this step closes a window, the window is finalised
 * and its REPORT queued (never waits on the network; with device layers it
 * waits for their streams, see bellows_agent_observe_device). Returns 0,
 * BELLOWS_ESTATE if no step was begun, or BELLOWS_EINVAL for a NULL
 * agent or an info whose compute_ms, comm_ms, backward_ms, codec_ms, lr
 * or lr_next is negative or not finite (the step then stays open and
 * nothing is recorded). */
BELLOWS_EXPORT int bellows_agent_step_end(bellows_agent *agent,
    const bellows_step_info *info);

/* Records an evaluation the trainer ran (e.g. on its test split): its
 * accuracy (0 to 1) and loss, either 0 for "not measured". Callable
 * inside a step or between steps; the values go into the window in
 * progress, whose REPORT carries the last non-zero ones
 * (Timings.eval_accuracy, eval_loss) and bellowsd keeps them in the
 * history (window_info). Call it before bellows_agent_window_end to
 * attach it to the window that ends there; once a window has closed the
 * values go into the next one. The same as the eval_accuracy and
 * eval_loss fields of bellows_step_info, without a step. Every rank may
 * call it (the window keeps the largest value over ranks: give the
 * job's value, e.g. all-reduced, or call it on rank 0 only). Same thread
 * as step_end. Returns 0, or BELLOWS_EINVAL for a NULL agent, an
 * accuracy that is not finite or outside 0..1, or a loss that is negative
 * or not finite (nothing recorded). */
BELLOWS_EXPORT int bellows_agent_eval(bellows_agent *agent, double accuracy,
    double loss);

/* Ends the current window now (e.g. at an epoch end), between steps.
 * Every rank must end windows at the same steps. With device layers it
 * waits for their streams. Returns 0, BELLOWS_ESTATE inside a step, or
 * BELLOWS_EAGAIN if the window has no steps. */
BELLOWS_EXPORT int bellows_agent_window_end(bellows_agent *agent);

/* Copies the decision in force for the current step into *ret (pointers
 * borrowed, see bellows_decision). Before any decision: seq 0, levels 0,
 * lr_scale 1. Returns 0 or BELLOWS_EINVAL. */
BELLOWS_EXPORT int bellows_agent_decision(const bellows_agent *agent,
    bellows_decision *ret);

/* Copies the statistics `layer` had in the last closed window (the ones
 * its REPORT carried) into *ret. Returns 0, BELLOWS_EINVAL for a bad
 * index, or BELLOWS_EAGAIN before the first window closed. */
BELLOWS_EXPORT int bellows_agent_window_stats(const bellows_agent *agent,
    uint32_t layer, bellows_layer_stats *ret);

/* The array statistics of this library (bellows/stats.h,
 * BELLOWS_LAYER_ARRAYS) in order, then an entry whose name is NULL: each
 * one's name, length, index for bellows_agent_window_array, unit and
 * doc. Static and constant; never fails. */
BELLOWS_EXPORT const bellows_stat_array *bellows_layer_arrays_schema(void);

/* Copies array statistic `array` (its index in
 * bellows_layer_arrays_schema(), e.g. 0 for exp_hist) of `layer` in the
 * last closed window, as its REPORT carried it, into ret[0..len-1].
 * Returns 0; BELLOWS_EINVAL for a bad index or a len other than the
 * array's; BELLOWS_EAGAIN before the first window closed;
 * BELLOWS_ENOTFOUND when the layer did not carry it in that window (not
 * flagged for it, e.g. BELLOWS_LAYER_EXP_HIST, or not observed). */
BELLOWS_EXPORT int bellows_agent_window_array(const bellows_agent *agent,
    uint32_t layer, uint32_t array, uint64_t *ret, uint32_t len);

/* The codec table in force in the current step (the opaque bytes the
 * job's CODEC_TABLE policy last proposed, at most 64 KiB, e.g. a Huffman
 * table of gradient exponents): *ret_table and *ret_len, NULL and 0 when
 * there is none. The pointer stays valid until the next
 * bellows_agent_step_begin() or bellows_agent_close(); every rank gets
 * the same table at the same step. Returns 0 or BELLOWS_EINVAL. */
BELLOWS_EXPORT int bellows_agent_codec_table(const bellows_agent *agent,
    const uint8_t **ret_table, size_t *ret_len);

/* The codec table that was in force before the current one (the last
 * distinct table before it, as of the current step): data encoded with it
 * in earlier steps still decodes with it after the switch. *ret_table and
 * *ret_len, NULL and 0 when there was none. Valid until the next
 * bellows_agent_step_begin() or bellows_agent_close(). Returns 0 or
 * BELLOWS_EINVAL. */
BELLOWS_EXPORT int bellows_agent_codec_table_prev(const bellows_agent *agent,
    const uint8_t **ret_table, size_t *ret_len);

/* The number of layers whose window accumulator (the gradient summed over
 * the window, behind acc_norm) is allocated and updated in the current
 * window: every layer not flagged BELLOWS_LAYER_NO_ACCUMULATOR, except
 * while bellowsd says no policy of the job reads acc_norm (the decision
 * in force at the window's first step; docs/statistics.md, "Statistics no
 * policy reads"); 0 for a NULL agent. */
BELLOWS_EXPORT uint32_t bellows_agent_accumulators(const bellows_agent *agent);

/* Level in force for `layer` in the current step; 0 for a bad index. */
BELLOWS_EXPORT double bellows_agent_level(const bellows_agent *agent,
    uint32_t layer);

/* How `layer` is sent in the current step (bellows_send_mode), under the
 * decision in force: BELLOWS_SEND_RAW when the decision turns compression
 * off, when the layer's level is 0, or when the layer's float32 size
 * (numel * 4 bytes) is below size_threshold and no calibration runs.
 * During a calibration (apply_step <= step < apply_step +
 * calibrate_steps) every layer with a level is sent COMPRESSED on even
 * step numbers and RAW on odd ones, whatever the threshold, so that all
 * ranks time both kinds on the same steps; compression_off still wins.
 * Returns the mode, BELLOWS_EINVAL for a bad index or a NULL agent, or
 * BELLOWS_ESTATE outside a step. */
BELLOWS_EXPORT int bellows_agent_send_mode(const bellows_agent *agent,
    uint32_t layer);

/* Tells the agent the level at which the trainer sends each layer from
 * the current step on: levels[0 .. n-1], n the number of layers, 0 for
 * raw, e.g. 0 for a tensor its compressor cannot compress whatever its
 * level. Copied; kept until the next call. Each window's report carries,
 * per layer, the level applied in its last step (level_applied), which
 * bellowsd keeps in the history beside the level decided. Without a
 * call the agent derives it from the decision in force as
 * bellows_agent_send_mode does outside a calibration: the layer's level,
 * or 0 when compression is off or its float32 size is below
 * size_threshold; a calibration's alternation is a measurement, never
 * the level in force. A call holds only under the decision in force when
 * it was made: once a decision with another seq is in force the agent
 * derives the level again, so a trainer that applies levels of its own
 * calls again at each step where bellows_agent_decision's seq changes
 * (a stale array is never reported). Returns 0; BELLOWS_EINVAL for a
 * NULL agent or levels, an n other than the number of layers, or a
 * level that is negative or not finite (nothing is kept then);
 * BELLOWS_ESTATE outside a step. */
BELLOWS_EXPORT int bellows_agent_applied_levels(bellows_agent *agent,
    const double *levels, uint32_t n);

/* Returns 1 when the current step (between steps: the last step begun)
 * lies inside a calibration of the decision in force, 0 when not or
 * before the first step, BELLOWS_EINVAL for a NULL agent. */
BELLOWS_EXPORT int bellows_agent_calibrating(const bellows_agent *agent);

/* Records one timed send of `layer`'s gradient in the current step:
 * compressed (non-zero) or raw, comm_ms the communication and codec_ms
 * the encode + decode time (0 for a raw send; ignored then). The window's
 * report carries per layer the lower quartiles (not the medians: a send
 * that waited for a descheduled peer is an outlier there, docs/agent.md)
 * of its raw and of its compressed sends and of their codec times, with
 * their counts. Quartiles are taken over a reservoir of at most 32 sends
 * per layer and kind, a uniform sample when the window has more; it is
 * allocated on a layer's first call and reused, so later calls never
 * allocate. Returns 0,
 * BELLOWS_EINVAL for a bad index or a time that is negative or not
 * finite (nothing is recorded then), BELLOWS_ESTATE outside a step, or
 * BELLOWS_ENOMEM on a layer's first call. */
BELLOWS_EXPORT int bellows_agent_comm_layer(bellows_agent *agent,
    uint32_t layer, int compressed, double comm_ms, double codec_ms);

/* Records one timed collective of `bytes` bytes (this rank's share, after
 * compression when compressed is non-zero) that is not one layer's, such
 * as a DDP bucket. The window's report carries one sample per distinct
 * (bytes, compressed): the median time (over a reservoir of at most 32,
 * as above) and the count. A window keeps at most 256 distinct pairs;
 * collectives of further pairs are counted, logged at the window's end
 * and not reported. The table is allocated on the first call. Returns 0,
 * BELLOWS_EINVAL for a comm_ms that is negative or not finite,
 * BELLOWS_ESTATE outside a step, or BELLOWS_ENOMEM on the first call. */
BELLOWS_EXPORT int bellows_agent_comm_bucket(bellows_agent *agent,
    uint64_t bytes, int compressed, double comm_ms);

/* Records the statistics of the activation stored for `layer` in the
 * current step (*s borrowed for the call); `layer` is the index of the
 * weight the activation feeds (e.g. a convolution's weight). The window's
 * report carries the number of calls (act_steps) and the means of each
 * field over them. Returns 0, BELLOWS_EINVAL for a bad index, a NULL s,
 * an lbar that is negative or not finite, or a nonzero outside [0, 1];
 * BELLOWS_ESTATE outside a step. */
BELLOWS_EXPORT int bellows_agent_observe_activation(bellows_agent *agent,
    uint32_t layer, const bellows_act_stats *s);

/* Records the statistics of `layer`'s error-feedback residual in the
 * current step (*s borrowed for the call). The window's report carries the
 * number of calls (resid_steps) and the mean of each field over them.
 * Returns 0, BELLOWS_EINVAL for a bad index, a NULL s or a field that is
 * negative or not finite (nothing is recorded then), BELLOWS_ESTATE
 * outside a step. */
BELLOWS_EXPORT int bellows_agent_observe_residual(bellows_agent *agent,
    uint32_t layer, const bellows_resid_stats *s);

/* Copies counters into *ret. Safe from any thread. Returns 0 or
 * BELLOWS_EINVAL. */
BELLOWS_EXPORT int bellows_agent_stats_get(bellows_agent *agent,
    bellows_agent_stats *ret);

#ifdef __cplusplus
}
#endif

#endif /* BELLOWS_AGENT_H */
