/* wire_field - the field tables of the wire module, see wire_field.h.
 *
 * A row names its field once; the macros derive both offsets from it and
 * refuse to compile a row whose kind does not match the types of the two
 * fields (a uint64_t read as uint32_t, a bool as protobuf_c_boolean), so
 * a table cannot say more or less than the structs do.
 */
#include "wire_field.h"

#include <stdbool.h>
#include <stddef.h>

/* 1 when the expression has type T. */
#define WIRE_IS(e, T) _Generic((e), T : 1, default : 0)

/* The types a kind takes: p in protobuf-c's struct, c in the com_* one. */
#define WIRE_TYPES_NAME(p, c)     (WIRE_IS(p, char *) && WIRE_IS(c, char *))
#define WIRE_TYPES_NAME_OPT(p, c) WIRE_TYPES_NAME(p, c)
#define WIRE_TYPES_TEXT(p, c)     WIRE_TYPES_NAME(p, c)
#define WIRE_TYPES_BYTES(p, c)                                                 \
	(WIRE_IS(p, ProtobufCBinaryData) && WIRE_IS(c, uint8_t *))
#define WIRE_TYPES_BOOL(p, c)                                                  \
	(WIRE_IS(p, protobuf_c_boolean) && WIRE_IS(c, bool))
#define WIRE_TYPES_U32(p, c)     (WIRE_IS(p, uint32_t) && WIRE_IS(c, uint32_t))
#define WIRE_TYPES_INDEX(p, c)   WIRE_TYPES_U32(p, c)
#define WIRE_TYPES_U64(p, c)     (WIRE_IS(p, uint64_t) && WIRE_IS(c, uint64_t))
#define WIRE_TYPES_I32(p, c)     (WIRE_IS(p, int32_t) && WIRE_IS(c, int32_t))
#define WIRE_TYPES_ERRCODE(p, c) WIRE_TYPES_I32(p, c)
#define WIRE_TYPES_F64(p, c)     (WIRE_IS(p, double) && WIRE_IS(c, double))
#define WIRE_TYPES_MAG(p, c)     WIRE_TYPES_F64(p, c)

/* 0, or a compile error (an array of negative size) when !ok. */
#define WIRE_REQUIRE(ok) (0 * sizeof(char[(ok) ? 1 : -1]))

/* A row of the table of WIRE_P (protobuf-c) and WIRE_C (com_*), which
 * each table defines before its rows; `len` is the com_* length field of
 * a byte string. */
#define WIRE_ROW_(field, len, k, lim)                                          \
	{ .pb = offsetof(WIRE_P, field),                                       \
		.com = offsetof(WIRE_C, field),                                \
		.com_len = len,                                                \
		.kind = COM_WIRE_##k +                                         \
		    WIRE_REQUIRE(WIRE_TYPES_##k(((WIRE_P *)0)->field,          \
			((WIRE_C *)0)->field)),                                \
		.limit = COM_WIRE_##lim },
#define WIRE_F(field, k, lim) WIRE_ROW_(field, 0, k, lim)
#define WIRE_BYTES(field, len, lim)                                            \
	WIRE_ROW_(field,                                                       \
	    offsetof(WIRE_C, len) +                                            \
		WIRE_REQUIRE(WIRE_IS(((WIRE_C *)0)->len, size_t)),             \
	    BYTES, lim)

/* Defines the rows of a table and the com_wire_fields `name`. */
#define WIRE_TABLE(name, ...)                                                  \
	static const com_wire_field name##_rows[] = { __VA_ARGS__ };           \
	const com_wire_fields name = { name##_rows,                            \
		sizeof(name##_rows) / sizeof(name##_rows[0]) }

/* clang-format off */

#define WIRE_P Bellows__LayerInfo
#define WIRE_C com_layer_info
WIRE_TABLE(com_wire_layer_info,
	WIRE_F(name, NAME, NONE)
	WIRE_F(numel, U64, NONE));
#undef WIRE_P
#undef WIRE_C

/* Hello: rank < world <= max_world and the run id's length are checked
 * by hand, across fields or against the protocol's fixed limit. */
#define WIRE_P Bellows__Hello
#define WIRE_C com_hello
WIRE_TABLE(wire_hello,
	WIRE_F(job, NAME, NONE)
	WIRE_F(rank, U32, NONE)
	WIRE_F(world, U32, WORLD)
	WIRE_F(agent_version, TEXT, NONE)
	WIRE_F(step, U64, NONE)
	WIRE_F(incarnation, U64, NONE)
	WIRE_F(last_window, U64, NONE)
	WIRE_F(run_id, NAME_OPT, NONE)
	WIRE_F(resume, BOOL, NONE));
#undef WIRE_P
#undef WIRE_C

/* Decision: the job may be empty inside a hello, welcome or snapshot
 * (the message names it); a Decision of its own checks it by hand. An
 * lr_scale of 0 reads as 1 (wire_in.c). */
#define WIRE_P Bellows__Decision
#define WIRE_C com_decision
WIRE_TABLE(wire_decision,
	WIRE_F(job, NAME_OPT, NONE)
	WIRE_F(seq, U64, NONE)
	WIRE_F(apply_step, U64, NONE)
	WIRE_F(window, U64, NONE)
	WIRE_F(batch_size, U32, NONE)
	WIRE_F(lr_scale, MAG, NONE)
	WIRE_F(size_threshold, U64, NONE)
	WIRE_F(compression_off, BOOL, NONE)
	WIRE_BYTES(codec_table, codec_table_len, CODEC_TABLE)
	WIRE_F(policy, TEXT, NONE)
	WIRE_F(reason, TEXT, NONE)
	WIRE_F(calibrate_steps, U64, NONE)
	WIRE_F(stats_skip, U64, NONE)); /* any bits: an agent acts only on
					 * those it knows */
#undef WIRE_P
#undef WIRE_C

#define WIRE_P Bellows__Welcome
#define WIRE_C com_welcome
WIRE_TABLE(wire_welcome,
	WIRE_F(job, NAME, NONE)
	WIRE_F(rank, INDEX, WORLD)
	WIRE_F(apply_lag, U32, NONE)
	WIRE_F(heartbeat_ms, U32, NONE)
	WIRE_F(instance, U64, NONE)
	/* Any value: it can only make an agent let go of kept reports. */
	WIRE_F(windows_closed, U64, NONE));
#undef WIRE_P
#undef WIRE_C

/* Report: ranks <= max_world - rank is checked by hand. */
#define WIRE_P Bellows__Report
#define WIRE_C com_report
WIRE_TABLE(wire_report,
	WIRE_F(job, NAME, NONE)
	WIRE_F(rank, INDEX, WORLD)
	WIRE_F(window, U64, NONE)
	WIRE_F(first_step, U64, NONE)
	WIRE_F(last_step, U64, NONE)
	WIRE_F(lr, MAG, NONE)
	WIRE_F(batch_size, U32, NONE)
	WIRE_F(epoch, U64, NONE)
	WIRE_F(seq_in_force, U64, NONE)
	WIRE_F(lr_next, MAG, NONE)
	WIRE_F(ranks, U32, NONE));
#undef WIRE_P
#undef WIRE_C

#define WIRE_P Bellows__CommSample
#define WIRE_C com_comm_sample
WIRE_TABLE(com_wire_comm_sample,
	WIRE_F(bytes, U64, NONE)
	WIRE_F(ms, MAG, NONE)
	WIRE_F(count, U32, NONE)
	WIRE_F(compressed, BOOL, NONE));
#undef WIRE_P
#undef WIRE_C

#define WIRE_P Bellows__Heartbeat
#define WIRE_C com_heartbeat
WIRE_TABLE(wire_heartbeat,
	WIRE_F(job, NAME, NONE)
	WIRE_F(rank, INDEX, WORLD)
	WIRE_F(step, U64, NONE)
	WIRE_F(seq_in_force, U64, NONE)
	WIRE_F(incarnation, U64, NONE));
#undef WIRE_P
#undef WIRE_C

#define WIRE_P Bellows__HeartbeatAck
#define WIRE_C com_heartbeat_ack
WIRE_TABLE(wire_heartbeat_ack,
	WIRE_F(instance, U64, NONE)
	WIRE_F(last_seq, U64, NONE)
	WIRE_F(windows_closed, U64, NONE));
#undef WIRE_P
#undef WIRE_C

#define WIRE_P Bellows__Bye
#define WIRE_C com_bye
WIRE_TABLE(wire_bye,
	WIRE_F(job, NAME, NONE)
	WIRE_F(rank, INDEX, WORLD));
#undef WIRE_P
#undef WIRE_C

/* An empty job asks for every job. */
#define WIRE_P Bellows__StatusRequest
#define WIRE_C com_status_request
WIRE_TABLE(wire_status_request,
	WIRE_F(job, NAME_OPT, NONE));
#undef WIRE_P
#undef WIRE_C

#define WIRE_P Bellows__RankStatus
#define WIRE_C com_rank_status
WIRE_TABLE(com_wire_rank_status,
	WIRE_F(rank, INDEX, WORLD)
	WIRE_F(alive, BOOL, NONE)
	WIRE_F(step, U64, NONE)
	WIRE_F(last_seen_ms, U64, NONE)
	WIRE_F(reports, U64, NONE)
	WIRE_F(seq_in_force, U64, NONE)
	WIRE_F(rejoins, U32, NONE));
#undef WIRE_P
#undef WIRE_C

#define WIRE_P Bellows__JobStatus
#define WIRE_C com_job_status
WIRE_TABLE(com_wire_job_status,
	WIRE_F(job, NAME, NONE)
	WIRE_F(world, U32, WORLD)
	WIRE_F(ranks_alive, U32, WORLD)
	WIRE_F(window, U64, NONE)
	WIRE_F(seq, U64, NONE)
	WIRE_F(step, U64, NONE)
	WIRE_F(n_layers, U32, LAYERS)
	WIRE_F(windows_incomplete, U64, NONE)
	WIRE_F(policy, TEXT, NONE));
#undef WIRE_P
#undef WIRE_C

/* Routing ids are at most 255 bytes, like names. */
#define WIRE_P Bellows__PeerStatus
#define WIRE_C com_peer_status
WIRE_TABLE(com_wire_peer_status,
	WIRE_BYTES(peer, peer_len, NAME_LEN)
	WIRE_F(dropped, U64, NONE)
	WIRE_F(last_error, TEXT, NONE));
#undef WIRE_P
#undef WIRE_C

/* An empty job: the daemon's own event. */
#define WIRE_P Bellows__Event
#define WIRE_C com_event
WIRE_TABLE(com_wire_event,
	WIRE_F(wall_ms, U64, NONE)
	WIRE_F(kind, NAME, NONE)
	WIRE_F(job, NAME_OPT, NONE)
	WIRE_F(text, TEXT, NONE));
#undef WIRE_P
#undef WIRE_C

#define WIRE_P Bellows__StatusReply
#define WIRE_C com_status_reply
WIRE_TABLE(wire_status_reply,
	WIRE_F(instance, U64, NONE)
	WIRE_F(uptime_ms, U64, NONE)
	WIRE_F(messages, U64, NONE)
	WIRE_F(dropped, U64, NONE)
	WIRE_F(reports, U64, NONE)
	WIRE_F(decisions, U64, NONE)
	WIRE_F(layer_stats, U64, NONE)
	WIRE_F(store_degraded, BOOL, NONE)
	WIRE_F(store_pending, U64, NONE)
	WIRE_F(store_dropped, U64, NONE)
	WIRE_F(store_error, TEXT, NONE)
	WIRE_F(latency_p50_ms, MAG, NONE)
	WIRE_F(latency_p99_ms, MAG, NONE)
	WIRE_F(latency_max_ms, MAG, NONE)
	WIRE_F(latency_samples, U32, NONE)
	WIRE_F(reports_duplicate, U64, NONE)
	WIRE_F(store_path, TEXT, NONE));
#undef WIRE_P
#undef WIRE_C

#define WIRE_P Bellows__SnapshotRequest
#define WIRE_C com_snapshot_request
WIRE_TABLE(wire_snapshot_request,
	WIRE_F(job, NAME, NONE)
	WIRE_F(rank, INDEX, WORLD));
#undef WIRE_P
#undef WIRE_C

#define WIRE_P Bellows__Snapshot
#define WIRE_C com_snapshot
WIRE_TABLE(wire_snapshot,
	WIRE_F(job, NAME, NONE));
#undef WIRE_P
#undef WIRE_C

#define WIRE_P Bellows__Error
#define WIRE_C com_error
WIRE_TABLE(wire_error,
	WIRE_F(code, ERRCODE, NONE)
	WIRE_F(message, TEXT, NONE));
#undef WIRE_P
#undef WIRE_C

/* Metric: the layer (-1, or below max_layers) is checked by hand. */
#define WIRE_P Bellows__Metric
#define WIRE_C com_metric
WIRE_TABLE(com_wire_metric,
	WIRE_F(policy, NAME_OPT, NONE)
	WIRE_F(name, NAME, NONE)
	WIRE_F(layer, I32, NONE)
	WIRE_F(value, F64, NONE));
#undef WIRE_P
#undef WIRE_C

#define WIRE_P Bellows__Telemetry
#define WIRE_C com_telemetry
WIRE_TABLE(wire_telemetry,
	WIRE_F(job, NAME, NONE)
	WIRE_F(window, U64, NONE)
	WIRE_F(ranks_reported, U32, WORLD)
	WIRE_F(ranks_expected, U32, WORLD)
	WIRE_F(step_ms_median, MAG, NONE));
#undef WIRE_P
#undef WIRE_C

/* clang-format on */

/* A body's entry, at its type: the Envelope's field number of the body
 * must be the type + COM_WIRE_BODY_BASE, or this does not compile. */
#define WIRE_BODY(type, name)                                                  \
	[COM_MSG_##type] = { &bellows__##name##__descriptor,                   \
		&wire_##name +                                                 \
		    WIRE_REQUIRE(BELLOWS__ENVELOPE__BODY_##type ==             \
			COM_MSG_##type + COM_WIRE_BODY_BASE) }

const com_wire_body com_wire_bodies[COM_MSG_TYPE_MAX] = {
	WIRE_BODY(HELLO, hello),
	WIRE_BODY(WELCOME, welcome),
	WIRE_BODY(REPORT, report),
	WIRE_BODY(DECISION, decision),
	WIRE_BODY(HEARTBEAT, heartbeat),
	WIRE_BODY(HEARTBEAT_ACK, heartbeat_ack),
	WIRE_BODY(BYE, bye),
	WIRE_BODY(STATUS_REQUEST, status_request),
	WIRE_BODY(STATUS_REPLY, status_reply),
	WIRE_BODY(SNAPSHOT_REQUEST, snapshot_request),
	WIRE_BODY(SNAPSHOT, snapshot),
	WIRE_BODY(ERROR, error),
	WIRE_BODY(TELEMETRY, telemetry),
};
