/* wire_field - the scalar and string fields of every message, as tables.
 *
 * Each message's plain fields (names, texts, byte strings, numbers, flags)
 * are rows of a table: where the field lies in protobuf-c's struct and in
 * the com_* struct, its kind (what a received value must pass) and the
 * com_limits member that bounds it. The encoder (wire.c) and the decoder
 * (wire_in.c) each walk the tables with one routine, so a field added to a
 * message is one row here; what no row can say (repeated sub-messages,
 * checks across fields, like unique names or rank < world) stays in the
 * message's own code. The statistics of a report are not here: the
 * statistics table (bellows/stats.h) generates them. Private to common/:
 * only wire*.c include it.
 */
#ifndef COM_WIRE_FIELD_H
#define COM_WIRE_FIELD_H

#include <stdint.h>

#include "common/bellows.pb-c.h"
#include "msg.h"

/* What a field holds, and so what the decoder requires of it. Types are
 * checked against both structs when the tables are compiled. */
typedef enum com_wire_kind {
	COM_WIRE_NAME,     /* char *: 1..max_name_len bytes of UTF-8
			    * without control bytes (wire_in_name) */
	COM_WIRE_NAME_OPT, /* char *: the same, or empty */
	COM_WIRE_TEXT,     /* char *: 0..max_text_len bytes */
	COM_WIRE_BYTES,    /* uint8_t * and a size_t length (com_len):
			    * 0..limit bytes */
	COM_WIRE_BOOL,     /* bool; protobuf_c_boolean on the wire */
	COM_WIRE_U32,      /* uint32_t, at most the limit */
	COM_WIRE_INDEX,    /* uint32_t, below the limit */
	COM_WIRE_U64,      /* uint64_t, any value */
	COM_WIRE_I32,      /* int32_t, any value */
	COM_WIRE_ERRCODE,  /* int32_t, negative: a BELLOWS_E* code, maybe
			    * one appended after this build */
	COM_WIRE_F64,      /* double, finite */
	COM_WIRE_MAG,      /* double, finite and >= 0: sums, times, rates */
} com_wire_kind;

/* The com_limits member a field is bounded by. */
typedef enum com_wire_limit {
	COM_WIRE_NONE,        /* no bound */
	COM_WIRE_WORLD,       /* max_world */
	COM_WIRE_LAYERS,      /* max_layers */
	COM_WIRE_NAME_LEN,    /* max_name_len (a routing id's bytes) */
	COM_WIRE_CODEC_TABLE, /* max_codec_table */
} com_wire_limit;

/* One field of a message. */
typedef struct com_wire_field {
	uint16_t pb;      /* offsetof in protobuf-c's struct */
	uint16_t com;     /* offsetof in the com_* struct */
	uint16_t com_len; /* COM_WIRE_BYTES: offsetof its length, else 0 */
	uint8_t kind;     /* com_wire_kind */
	uint8_t limit;    /* com_wire_limit */
} com_wire_field;

/* A message's fields, in its .proto order. */
typedef struct com_wire_fields {
	const com_wire_field *f; /* the rows */
	uint32_t n;              /* entries in f */
} com_wire_fields;

/* Bodies of an Envelope, by com_msg_type: the Envelope's body field
 * number is the type + COM_WIRE_BODY_BASE (checked when compiled). */
#define COM_WIRE_BODY_BASE 9

typedef struct com_wire_body {
	const ProtobufCMessageDescriptor *desc; /* the body's message; NULL
						 * for COM_MSG_NONE */
	const com_wire_fields *fields;          /* its plain fields */
} com_wire_body;

/* Indexed by com_msg_type, COM_MSG_NONE's entry empty. */
extern const com_wire_body com_wire_bodies[COM_MSG_TYPE_MAX];

/* The messages that are only ever inside another. */
extern const com_wire_fields com_wire_layer_info;
extern const com_wire_fields com_wire_comm_sample;
extern const com_wire_fields com_wire_job_status;
extern const com_wire_fields com_wire_rank_status;
extern const com_wire_fields com_wire_peer_status;
extern const com_wire_fields com_wire_event;
extern const com_wire_fields com_wire_metric;

#endif /* COM_WIRE_FIELD_H */
