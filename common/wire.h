/* wire - the one module that turns bellows messages into bytes and back.
 *
 * Only wire*.c see the protobuf-c generated types. Decoding trusts nothing:
 * every length is checked against com_limits before anything is allocated
 * from it, and anything malformed is an error, never an assert. Checks that
 * need a job's context (a report's layer indices against that job's layer
 * table) are the controller's; everything a message can be checked for on
 * its own is done here.
 */
#ifndef COM_WIRE_H
#define COM_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "msg.h"

/* Bytes of a Decision's codec table by default (the policy ABI's
 * BELLOWS_CODEC_TABLE_MAX): a Welcome of max_decisions decisions with the
 * largest tables stays well within a frame. */
#define COM_CODEC_TABLE_MAX 65536

/* Bytes of a Hello's run_id (docs/protocol.md): a fixed part of the
 * protocol, not one of the configurable limits. */
#define COM_RUN_ID_MAX 255

typedef struct com_limits {
	size_t max_msg_bytes;   /* largest frame decoded (bellowsd reads 2x) */
	uint32_t max_layers;    /* layers in a table, report or decision */
	uint32_t max_world;     /* ranks in a job */
	uint32_t max_name_len;  /* bytes in a job or layer name */
	uint32_t max_text_len;  /* bytes in a reason, policy or error text */
	uint32_t max_decisions; /* decisions in a welcome or snapshot */
	uint32_t max_codec_table; /* bytes of an opaque codec table */
	uint32_t max_jobs;        /* jobs in a status reply */
	uint32_t max_peers;       /* peers in a status reply */
	uint32_t max_comm;        /* comm samples in a report */
	uint32_t max_metrics;     /* metrics in a telemetry */
	uint32_t max_ndim;        /* dimensions the wire reader takes in a
				   * layer's shape; the conversion refuses
				   * more than COM_MAX_NDIM whatever this is */
} com_limits;

/* Fills *lim with the defaults: 16 MiB frames, 65536 layers, 65536 ranks,
 * 256-byte names, 4096-byte texts, 64 decisions, 64 KiB codec table, 4096
 * jobs, 4096 peers, 256 comm samples, 4096 metrics, COM_MAX_NDIM
 * dimensions. */
void com_limits_default(com_limits *lim);

/* Encodes *m (any type) as one Envelope carrying m->major/minor (as set by
 * com_msg_init). On success *ret_buf is a malloc'd buffer of *ret_len bytes
 * owned by the caller (free()). Returns BELLOWS_EINVAL for a message that
 * violates its own invariants (e.g. a decision whose arrays are missing),
 * BELLOWS_ENOMEM on allocation failure; outputs are untouched on failure. */
int com_wire_encode(const com_msg *m, uint8_t **ret_buf, size_t *ret_len);

/* Decodes one frame into *ret_msg (which must not own anything). Returns:
 *   BELLOWS_EMSGSIZE  frame longer than lim->max_msg_bytes;
 *   BELLOWS_EVERSION  major version differs from BELLOWS_PROTO_MAJOR (the
 *                     message is still decoded as far as the type, so the
 *                     caller can answer with an Error);
 *   BELLOWS_EPROTO    not a valid Envelope, no body, a field out of its
 *                     limits, a shape that does not multiply to numel,
 *                     duplicate layer names or indices, arrays whose length
 *                     disagrees with n_layers, a name that is empty or has
 *                     control bytes, a rank >= world, world 0, a double
 *                     that is not finite, a time, size or statistic
 *                     below 0, a non-zero fraction above 1, a metric's
 *                     layer below -1;
 *   BELLOWS_ENOMEM.
 * On any failure but EVERSION *ret_msg is left zeroed; with EVERSION only
 * type/major/minor are set. */
int com_wire_decode(const uint8_t *buf, size_t len, const com_limits *lim,
    com_msg *ret_msg);

#endif /* COM_WIRE_H */
