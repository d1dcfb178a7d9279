/* plugin_wire - the framing between bellowsd and a plug-in worker: the
 * policy ABI's own structs (window, proposal, event, job info) written
 * into a byte buffer and read back on the other side of a socketpair.
 *
 * Both ends are the same build of bellows on the same machine, so the
 * fixed-size structs travel as their bytes (the worker checks sizes and
 * the ABI version in its hello); only the pointers inside them are
 * replaced: each variable part follows its struct, and the reader points
 * the struct back at its copy. Every frame is a header (magic, type,
 * instance, payload length: four uint32 in host order) and a payload of
 * at most CTL_PWIRE_PAYLOAD_MAX bytes. docs/policies/plugins.md describes
 * the frames.
 *
 * Readers never trust lengths: a short or inconsistent payload is
 * BELLOWS_EPROTO. What bellowsd reads from a worker (proposals) is read
 * field by field into host memory and bounded; what a worker reads from
 * bellowsd (windows) points into the received buffer, which must then
 * outlive the call.
 */
#ifndef CTL_PLUGIN_WIRE_H
#define CTL_PLUGIN_WIRE_H

#include <bellows/policy.h>

#include <stddef.h>
#include <stdint.h>

#define CTL_PWIRE_MAGIC       0x31575042u  /* "BPW1" */
#define CTL_PWIRE_PAYLOAD_MAX (256u << 20) /* bytes of one payload */

/* Exit statuses of a worker that stops on its own (a crash or a kill
 * shows as a signal instead; a sanitizer's report as its own status). */
#define CTL_PWIRE_EXIT_REFUSED                                                 \
	64                      /* the plug-in cannot be loaded or is          \
				 * refused by the checks */
#define CTL_PWIRE_EXIT_PROTO 65 /* a request it could not read */
#define CTL_PWIRE_EXIT_NOMEM 66 /* its own memory ran out */

/* Frame types. Requests go from bellowsd to the worker; each but FINI
 * gets exactly one reply of type CTL_PWIRE_REPLY, in order. */
enum ctl_pwire_type {
	CTL_PWIRE_HELLO = 1,  /* worker -> bellowsd, once, after loading */
	CTL_PWIRE_INIT = 2,   /* config, job info, proposal -> rc, proposal */
	CTL_PWIRE_WINDOW = 3, /* window, proposal -> rc, proposal */
	CTL_PWIRE_EVENT = 4,  /* event [, new config] -> rc */
	CTL_PWIRE_FINI = 5,   /* no payload, no reply */
	CTL_PWIRE_REPLY = 6,  /* int32 rc [, proposal | message] */
	CTL_PWIRE_CHECK = 7,  /* config -> rc [, message] (--check only) */
};

typedef struct ctl_pwire_header {
	uint32_t magic;    /* CTL_PWIRE_MAGIC */
	uint32_t type;     /* enum ctl_pwire_type */
	uint32_t instance; /* policy instance in the worker, 0 for HELLO */
	uint32_t len;      /* payload bytes that follow */
} ctl_pwire_header;

/* What a worker announces: a worker of another build is refused. */
typedef struct ctl_pwire_hello {
	uint32_t abi;         /* BELLOWS_POLICY_ABI */
	uint32_t window_size; /* sizeof(bellows_window) */
	uint32_t layer_size;  /* sizeof(bellows_window_layer) */
	uint32_t comm_size;   /* sizeof(bellows_comm_sample) */
	uint32_t event_size;  /* sizeof(bellows_event) */
	uint32_t metric_size; /* sizeof(bellows_metric) */
	uint32_t pid;         /* the worker's process id */
	uint32_t reserved;    /* 0 */
} ctl_pwire_hello;

/* A growable output buffer. */
typedef struct ctl_pwire_buf {
	uint8_t *data; /* len bytes used of cap */
	size_t len;    /* bytes written */
	size_t cap;    /* bytes allocated */
	int err;       /* first error (BELLOWS_ENOMEM, EMSGSIZE), sticky */
} ctl_pwire_buf;

/* A cursor over a received payload. */
typedef struct ctl_pwire_reader {
	const uint8_t *p; /* next byte */
	size_t left;      /* bytes after p */
	int err;          /* BELLOWS_EPROTO once a read ran short, sticky */
} ctl_pwire_reader;

/* Empties b (keeping its memory) and writes a header of `type` for
 * `instance`, its length filled in by ctl_pwire_end. */
void ctl_pwire_begin(ctl_pwire_buf *b, uint32_t type, uint32_t instance);

/* Sets the header's length. Returns b->err: 0, BELLOWS_ENOMEM, or
 * BELLOWS_EMSGSIZE past CTL_PWIRE_PAYLOAD_MAX. */
int ctl_pwire_end(ctl_pwire_buf *b);

/* Frees b's memory. NULL-safe. */
void ctl_pwire_buf_fini(ctl_pwire_buf *b);

/* Appends n raw bytes (errors are sticky in b->err). */
void ctl_pwire_put(ctl_pwire_buf *b, const void *data, size_t n);

/* Appends a uint32 length and the string with its NUL (NULL as ""). */
void ctl_pwire_put_str(ctl_pwire_buf *b, const char *s);

/* Copies n bytes out; on a short payload sets r->err, zeroes out and
 * returns BELLOWS_EPROTO. */
int ctl_pwire_get(ctl_pwire_reader *r, void *out, size_t n);

/* Points *ret at the next n bytes (unaligned) without copying, or NULL
 * and BELLOWS_EPROTO when fewer are left. */
int ctl_pwire_view(ctl_pwire_reader *r, size_t n, const uint8_t **ret);

/* Reads a string written by ctl_pwire_put_str in place (it is
 * NUL-terminated inside the payload). BELLOWS_EPROTO when it is not. */
int ctl_pwire_get_str(ctl_pwire_reader *r, const char **ret);

/* Writes a proposal of n_layers layers: knobs, reason, metrics (at most
 * BELLOWS_METRICS_MAX of them, the count as the policy set it) and the
 * codec table (at most BELLOWS_CODEC_TABLE_MAX bytes, the length as
 * set). */
void ctl_pwire_put_proposal(ctl_pwire_buf *b, const bellows_proposal *p);

/* Reads a proposal into p, whose level, error_bound (p->n_layers each) and
 * codec_table (BELLOWS_CODEC_TABLE_MAX bytes) are the caller's. A
 * proposal of another layer count, or one that runs short, is
 * BELLOWS_EPROTO (p then partly written). The reason is NUL-terminated. */
int ctl_pwire_get_proposal(ctl_pwire_reader *r, bellows_proposal *p);

/* Writes the layer table of a window or job info: the structs, then each
 * layer's name and shape, then per layer and array statistic its count
 * (0 or the table's length), then those arrays' values. */
void ctl_pwire_put_layers(ctl_pwire_buf *b, const bellows_window_layer *l,
    uint32_t n);

/* Reads n layers written by ctl_pwire_put_layers into `out` (n entries);
 * names point into the payload, shapes into `shapes` (grown with
 * realloc, *shapes_cap entries), array statistics into `arrays` (the
 * same, *arrays_cap values). Returns 0, BELLOWS_EPROTO (also for an
 * array count other than 0 and its length) or BELLOWS_ENOMEM. */
int ctl_pwire_get_layers(ctl_pwire_reader *r, bellows_window_layer *out,
    uint32_t n, uint32_t **shapes, size_t *shapes_cap, uint64_t **arrays,
    size_t *arrays_cap);

/* Writes a window: its struct, job name, layers and comm samples. */
void ctl_pwire_put_window(ctl_pwire_buf *b, const bellows_window *w);

#endif /* CTL_PLUGIN_WIRE_H */
