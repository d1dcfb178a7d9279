/* msg - bellows protocol messages as plain C structs.
 *
 * These structs are what the controller, the agent and the tools work with;
 * only the wire module (wire.c) converts them to and from the wire. They mirror
 * common/bellows.proto field for field. A com_msg owns everything it points
 * to: strings and arrays are heap-allocated and released by com_msg_fini().
 *
 * Decisions always carry the whole knob state (never a delta): `level` and
 * `error_bound` have exactly `n_layers` entries each.
 */
#ifndef COM_MSG_H
#define COM_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bellows/stats.h>

/* Values go on the wire inside the Envelope: never change, only append. */
#define BELLOWS_PROTO_MAJOR 1
#define BELLOWS_PROTO_MINOR 5

#define COM_MAX_NDIM 8 /* most dimensions a layer shape may have */

/* bellowsd's endpoints when neither its configuration nor its options
 * name others, and so every client's (agents, sim, status, top) when
 * neither an option nor $BELLOWS_CONTROL / $BELLOWS_PUBLISH does. */
#define COM_DEFAULT_CONTROL "tcp://127.0.0.1:5555"
#define COM_DEFAULT_PUBLISH "tcp://127.0.0.1:5556"

typedef enum com_msg_type {
	COM_MSG_NONE = 0,
	COM_MSG_HELLO,            /* agent -> ctl: join a job */
	COM_MSG_WELCOME,          /* ctl -> agent: joined, here is the state */
	COM_MSG_REPORT,           /* agent -> ctl: one window's statistics */
	COM_MSG_DECISION,         /* ctl -> all (PUB): new knob state */
	COM_MSG_HEARTBEAT,        /* agent -> ctl: still alive */
	COM_MSG_HEARTBEAT_ACK,    /* ctl -> agent */
	COM_MSG_BYE,              /* agent -> ctl: leaving cleanly */
	COM_MSG_STATUS_REQUEST,   /* any -> ctl */
	COM_MSG_STATUS_REPLY,     /* ctl -> requester */
	COM_MSG_SNAPSHOT_REQUEST, /* agent -> ctl: I saw a seq gap */
	COM_MSG_SNAPSHOT,         /* ctl -> agent: decisions in force/pending */
	COM_MSG_ERROR,            /* ctl -> peer: request refused */
	COM_MSG_TELEMETRY,        /* ctl -> all (PUB): per-window summary */
	COM_MSG_TYPE_MAX,
} com_msg_type;

typedef struct com_layer_info {
	char *name;                   /* unique within the job */
	uint64_t numel;               /* elements; = product of shape */
	uint32_t ndim;                /* entries used in shape */
	uint32_t shape[COM_MAX_NDIM]; /* dimensions, outermost first */
} com_layer_info;

typedef struct com_decision {
	char *job;                /* job name */
	uint64_t seq;             /* per-job sequence, from 1 */
	uint64_t apply_step;      /* first step this state is in force */
	uint64_t window;          /* window it answers, +1; 0 = none */
	uint32_t n_layers;        /* entries in level and error_bound */
	double *level;            /* per-layer compression level; 0 = raw */
	double *error_bound;      /* per-layer absolute bound; 0 = none */
	uint32_t batch_size;      /* 0 = the trainer's own */
	double lr_scale;          /* multiplier on the trainer's LR; 1 = none */
	uint64_t size_threshold;  /* tensors below this many bytes go raw */
	bool compression_off;     /* true: everything raw (perfmodel gate) */
	uint8_t *codec_table;     /* opaque codec parameters, may be NULL */
	size_t codec_table_len;   /* bytes in codec_table */
	char *policy;             /* policies that changed something */
	char *reason;             /* human-readable why */
	uint64_t calibrate_steps; /* from apply_step on, this many steps
				   * alternate compressed (even step) and raw
				   * (odd step) sends; 0 = none (SlimGC) */
	/* Appended in minor 2: the residual plan (ResiReduce), n_layers
	 * entries each, or all four NULL for the default plan (every layer its
	 * own residual, phi 0.5, kept whole); com_resid_plan_valid says what
	 * holds. */
	uint32_t *resid_group; /* per layer: its group's leader layer */
	double *resid_phi;     /* per layer: the group's phi, at leaders */
	double *resid_rows;    /* per layer: kept row fraction, (0, 1] */
	double *resid_cols;    /* per layer: kept column fraction, (0, 1] */
	uint64_t stats_skip;   /* minor 5: layer statistics no policy of the
				* job reads (bit i: BELLOWS_LAYER_STATS entry
				* i); 0 = compute everything. Not part of
				* the knob state (com_decision_same_state) */
} com_decision;

typedef struct com_hello {
	char *job;              /* job name */
	uint32_t rank;          /* 0 .. world-1 */
	uint32_t world;         /* ranks in the job */
	uint32_t n_layers;      /* entries in layers */
	com_layer_info *layers; /* the layer table */
	char *agent_version;    /* libbellows version string */
	uint64_t step;          /* next step the rank runs */
	uint64_t incarnation;   /* random per agent process */
	com_decision in_force;  /* state applied now; seq 0 = none */
	uint64_t last_window;   /* last window reported +1; 0 = none */
	char *run_id;           /* launch identity, "" = unknown */
	bool resume;            /* restarts from a checkpoint: continue the
				 * recorded run at step / last_window */
} com_hello;

typedef struct com_welcome {
	char *job;               /* echo of the job joined */
	uint32_t rank;           /* echo of the rank */
	uint32_t apply_lag;      /* steps between window end+1 and apply */
	uint32_t heartbeat_ms;   /* heartbeat period expected */
	uint64_t instance;       /* daemon instance id */
	uint32_t n_decisions;    /* entries in decisions */
	com_decision *decisions; /* in force and pending, ascending seq */
	uint64_t windows_closed; /* minor 2: windows below it are closed
				  * and committed to the history */
} com_welcome;

/* One layer's statistics of one rank's window: the fields of
 * BELLOWS_LAYER_STATS (bellows/stats.h), in its order, after the index. */
typedef struct com_layer_stats {
	uint32_t layer;                         /* index in the layer table */
	BELLOWS_LAYER_STATS(BELLOWS_STAT_FIELD) /* see bellows/stats.h */
	BELLOWS_LAYER_ARRAYS(BELLOWS_STAT_ARRAY_FIELD) /* each NULL or its
							* table length of
							* values: heap-owned
							* in a decoded report
							* (com_msg_fini), the
							* producer's in one
							* being built */
} com_layer_stats;

/* One rank's timings of a window: the fields of BELLOWS_RANK_TIMINGS
 * (bellows/stats.h), in its order. */
typedef struct com_timings {
	BELLOWS_RANK_TIMINGS(BELLOWS_STAT_FIELD) /* see bellows/stats.h */
} com_timings;

/* minor 1: the collectives of one size a rank ran in a window. */
typedef struct com_comm_sample {
	uint64_t bytes;  /* bytes this rank contributed */
	double ms;       /* median duration */
	uint32_t count;  /* collectives of this size and kind */
	bool compressed; /* a compressed payload (bytes after compression) */
} com_comm_sample;

typedef struct com_report {
	char *job;               /* job name */
	uint32_t rank;           /* reporting rank */
	uint64_t window;         /* window index, from 0 */
	uint64_t first_step;     /* first step of the window */
	uint64_t last_step;      /* last step of the window */
	uint32_t n_layers;       /* entries in layers */
	com_layer_stats *layers; /* per-layer statistics */
	com_timings timings;     /* per-rank timings */
	double lr;               /* learning rate used in the window */
	uint32_t batch_size;     /* per-rank batch size used */
	uint64_t epoch;          /* trainer's epoch counter */
	uint64_t seq_in_force;   /* decision applied at last_step */
	double lr_next;          /* LR the next window starts with; 0 = lr */
	uint32_t n_comm;         /* entries in comm (minor 1) */
	com_comm_sample *comm;   /* collective timings by size and kind */
	uint32_t ranks;          /* minor 3: ranks covered, rank .. rank +
				  * ranks - 1 (reduced inside the job); 0
				  * or 1: the rank alone */
} com_report;

typedef struct com_heartbeat {
	char *job;             /* job name */
	uint32_t rank;         /* sender */
	uint64_t step;         /* step the rank is at */
	uint64_t seq_in_force; /* decision it applies */
	uint64_t incarnation;  /* agent process id, random */
} com_heartbeat;

typedef struct com_heartbeat_ack {
	uint64_t instance;       /* daemon instance id */
	uint64_t last_seq;       /* last decision seq of the job */
	uint64_t windows_closed; /* minor 2: as in com_welcome */
} com_heartbeat_ack;

typedef struct com_bye {
	char *job;     /* job name */
	uint32_t rank; /* leaving rank */
} com_bye;

typedef struct com_status_request {
	char *job; /* NULL or "": every job */
} com_status_request;

typedef struct com_rank_status {
	uint32_t rank;         /* rank number */
	bool alive;            /* heard within the rank timeout */
	uint64_t step;         /* last step heard */
	uint64_t last_seen_ms; /* ms since last heard */
	uint64_t reports;      /* reports received */
	uint64_t seq_in_force; /* decision it said it applies */
	uint32_t rejoins;      /* times it joined again */
} com_rank_status;

typedef struct com_job_status {
	char *job;                   /* job name */
	uint32_t world;              /* expected ranks */
	uint32_t ranks_alive;        /* live ranks */
	uint64_t window;             /* windows closed */
	uint64_t seq;                /* last decision seq */
	uint64_t step;               /* highest step heard */
	uint32_t n_ranks;            /* entries in ranks */
	com_rank_status *ranks;      /* per-rank rows */
	uint32_t n_layers;           /* layers in the job's table */
	uint64_t windows_incomplete; /* closed by timeout, ranks missing */
	char *policy;                /* policies configured for the job */
} com_job_status;

typedef struct com_peer_status {
	uint8_t *peer;    /* routing id */
	size_t peer_len;  /* bytes in peer */
	uint64_t dropped; /* malformed messages dropped */
	char *last_error; /* text of the last drop reason */
} com_peer_status;

typedef struct com_event {
	uint64_t wall_ms; /* when, ms since the Unix epoch */
	char *kind;       /* e.g. "reload_ok", "rank_lost" */
	char *job;        /* job concerned, "" for the daemon */
	char *text;       /* what happened */
} com_event;

typedef struct com_status_reply {
	uint64_t instance;          /* daemon instance id */
	uint64_t uptime_ms;         /* since start */
	uint32_t n_jobs;            /* entries in jobs */
	com_job_status *jobs;       /* per job */
	uint32_t n_peers;           /* entries in peers */
	com_peer_status *peers;     /* peers with drops */
	uint64_t messages;          /* messages received */
	uint64_t dropped;           /* messages dropped as malformed/hostile */
	uint64_t reports;           /* reports accepted */
	uint64_t decisions;         /* decisions published */
	uint64_t layer_stats;       /* layer statistics ingested */
	uint32_t n_events;          /* entries in events */
	com_event *events;          /* recent events, oldest first */
	bool store_degraded;        /* the history database is not written */
	uint64_t store_pending;     /* rows queued for it, not yet committed */
	uint64_t store_dropped;     /* metric rows it never wrote */
	char *store_error;          /* why it is degraded, "" or NULL if not */
	double latency_p50_ms;      /* minor 1: window close -> decision
				     * published, median of the last 1024 */
	double latency_p99_ms;      /* 99th percentile of them */
	double latency_max_ms;      /* largest of them */
	uint32_t latency_samples;   /* decisions measured, 0: none yet */
	uint64_t reports_duplicate; /* minor 2: repeated reports ignored */
	char *store_path;           /* minor 2: the history file, absolute
				     * on bellowsd's machine; "" or NULL =
				     * none */
} com_status_reply;

typedef struct com_snapshot_request {
	char *job;     /* job name */
	uint32_t rank; /* asking rank */
} com_snapshot_request;

typedef struct com_snapshot {
	char *job;               /* job name */
	uint32_t n_decisions;    /* entries in decisions */
	com_decision *decisions; /* in force and pending, ascending seq */
} com_snapshot;

typedef struct com_error {
	int32_t code;  /* BELLOWS_E* */
	char *message; /* human-readable, for the agent's log */
} com_error;

/* minor 1: a named number a policy computed (bellows_metric). */
typedef struct com_metric {
	char *policy;  /* policy instance name */
	char *name;    /* metric name */
	int32_t layer; /* layer index, -1 = the job */
	double value;  /* finite */
} com_metric;

typedef struct com_telemetry {
	char *job;               /* job name */
	uint64_t window;         /* window just closed */
	uint32_t ranks_reported; /* ranks in it */
	uint32_t ranks_expected; /* live ranks when it closed */
	double step_ms_median;   /* median over ranks of mean step time */
	uint32_t n_metrics;      /* entries in metrics (minor 1) */
	com_metric *metrics;     /* what the policies computed this window */
} com_telemetry;

typedef struct com_msg {
	com_msg_type type; /* which member of u is valid */
	uint32_t major;    /* sender's protocol major version */
	uint32_t minor;    /* sender's protocol minor version */
	union {
		com_hello hello;
		com_welcome welcome;
		com_report report;
		com_decision decision;
		com_heartbeat heartbeat;
		com_heartbeat_ack heartbeat_ack;
		com_bye bye;
		com_status_request status_request;
		com_status_reply status_reply;
		com_snapshot_request snapshot_request;
		com_snapshot snapshot;
		com_error error;
		com_telemetry telemetry;
	} u; /* the body */
} com_msg;

/* Prepares *m as an empty message of the given type with the current
 * protocol version; every pointer NULL, every number 0. Never fails. */
void com_msg_init(com_msg *m, com_msg_type type);

/* Releases everything *m owns and leaves it as com_msg_init(m, NONE) would.
 * Safe on a zeroed, half-built or already finalised message. */
void com_msg_fini(com_msg *m);

/* Releases what *d owns and zeroes it. Safe on a zeroed struct. */
void com_decision_fini(com_decision *d);

/* Makes *d an empty decision for `n_layers` layers (levels 0, bounds 0,
 * lr_scale 1), with job copied from `job` (may be NULL). Returns 0 or
 * BELLOWS_ENOMEM (then *d is zeroed). */
int com_decision_init(com_decision *d, const char *job, uint32_t n_layers);

/* Deep-copies src into *dst (which must not own anything). Returns 0, or
 * BELLOWS_ENOMEM with *dst zeroed. */
int com_decision_copy(com_decision *dst, const com_decision *src);

/* The default residual plan's phi (ResiReduce's). */
#define COM_RESID_PHI_DEFAULT 0.5

/* True when the n-layer residual plan (group, phi, rows, cols) is one a
 * peer may apply: every group[i] < n names a leader (group[group[i]] ==
 * group[i]), phi at leaders in [0, 1], rows and cols in (0, 1], and a
 * layer with rows or cols below 1 is its own group. Any pointer NULL: the
 * default plan, valid. */
bool com_resid_plan_valid(uint32_t n, const uint32_t *group, const double *phi,
    const double *rows, const double *cols);

/* True when d's plan is the default one: none, or one whose every layer is
 * its own group with phi 0.5 and rows and cols 1. */
bool com_resid_plan_is_default(const com_decision *d);

/* Gives *d (n_layers set, no plan) the default plan's four arrays, for an
 * owner to edit. Returns 0 or BELLOWS_ENOMEM (d unchanged). */
int com_resid_plan_alloc(com_decision *d);

/* True when a and b carry the same knob state (levels, bounds, batch size,
 * LR scale, threshold, gate, codec table, calibration length, residual
 * plan, a missing plan being the default one); seq,
 * apply_step, window and texts are ignored. */
bool com_decision_same_state(const com_decision *a, const com_decision *b);

/* Returns a short lower-case name of a message type ("hello", ...), or
 * "unknown". */
const char *com_msg_type_name(com_msg_type type);

/* strdup that returns NULL for NULL; NULL also on out-of-memory. */
char *com_strdup(const char *s);

#endif /* COM_MSG_H */
