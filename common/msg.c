/* msg - lifecycle of the protocol message structs, see msg.h.
 *
 * A com_msg owns every string and array it points to. Releasing follows the
 * counts (n_layers, n_decisions, ...) so that a message half-built by the
 * wire decoder, with a counted array allocated but only partly filled, is freed
 * exactly like a complete one: unfilled entries are zero and free(NULL) is a
 * no-op.
 */
#include "msg.h"

#include <stdlib.h>
#include <string.h>

#include <bellows/error.h>

static const char *const msg_type_names[COM_MSG_TYPE_MAX] = {
	[COM_MSG_NONE] = "none",
	[COM_MSG_HELLO] = "hello",
	[COM_MSG_WELCOME] = "welcome",
	[COM_MSG_REPORT] = "report",
	[COM_MSG_DECISION] = "decision",
	[COM_MSG_HEARTBEAT] = "heartbeat",
	[COM_MSG_HEARTBEAT_ACK] = "heartbeat_ack",
	[COM_MSG_BYE] = "bye",
	[COM_MSG_STATUS_REQUEST] = "status_request",
	[COM_MSG_STATUS_REPLY] = "status_reply",
	[COM_MSG_SNAPSHOT_REQUEST] = "snapshot_request",
	[COM_MSG_SNAPSHOT] = "snapshot",
	[COM_MSG_ERROR] = "error",
	[COM_MSG_TELEMETRY] = "telemetry",
};

const char *
com_msg_type_name(com_msg_type type)
{
	if ((unsigned)type >= COM_MSG_TYPE_MAX)
		return "unknown";
	return msg_type_names[type];
}

char *
com_strdup(const char *s)
{
	if (s == NULL)
		return NULL;
	return strdup(s);
}

void
com_msg_init(com_msg *m, com_msg_type type)
{
	memset(m, 0, sizeof(*m));
	m->type = type;
	m->major = BELLOWS_PROTO_MAJOR;
	m->minor = BELLOWS_PROTO_MINOR;
}

/* True when layer i keeps only part of its residual (a 2-D reduction). */
static bool
msg_reduced(const double *rows, const double *cols, uint32_t i)
{
	return rows[i] < 1.0 || cols[i] < 1.0;
}

void
com_decision_fini(com_decision *d)
{
	free(d->job);
	free(d->level);
	free(d->error_bound);
	free(d->codec_table);
	free(d->policy);
	free(d->reason);
	free(d->resid_group);
	free(d->resid_phi);
	free(d->resid_rows);
	free(d->resid_cols);
	memset(d, 0, sizeof(*d));
}

bool
com_resid_plan_valid(uint32_t n, const uint32_t *group, const double *phi,
    const double *rows, const double *cols)
{
	if (group == NULL || phi == NULL || rows == NULL || cols == NULL)
		return true;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t g = group[i];

		if (g >= n || group[g] != g)
			return false;
		if (!(rows[i] > 0.0 && rows[i] <= 1.0) ||
		    !(cols[i] > 0.0 && cols[i] <= 1.0))
			return false;
		if (g == i && !(phi[i] >= 0.0 && phi[i] <= 1.0))
			return false;
		/* A reduced layer keeps its own buffer: sharing and the 2-D
		 * reduction do not combine. Checked from the members' side
		 * (neither a member nor its leader reduced), so that the
		 * check stays linear in the layers: a Hello's plan comes
		 * from a peer. */
		if (g != i &&
		    (msg_reduced(rows, cols, i) || msg_reduced(rows, cols, g)))
			return false;
	}
	return true;
}

bool
com_resid_plan_is_default(const com_decision *d)
{
	if (d->resid_group == NULL || d->resid_phi == NULL ||
	    d->resid_rows == NULL || d->resid_cols == NULL)
		return true;
	for (uint32_t i = 0; i < d->n_layers; i++)
		if (d->resid_group[i] != i ||
		    d->resid_phi[i] != COM_RESID_PHI_DEFAULT ||
		    d->resid_rows[i] != 1.0 || d->resid_cols[i] != 1.0)
			return false;
	return true;
}

int
com_resid_plan_alloc(com_decision *d)
{
	uint32_t n = d->n_layers;
	uint32_t *group = calloc(n > 0 ? n : 1, sizeof(*group));
	double *phi = calloc(n > 0 ? n : 1, sizeof(*phi));
	double *rows = calloc(n > 0 ? n : 1, sizeof(*rows));
	double *cols = calloc(n > 0 ? n : 1, sizeof(*cols));

	if (group == NULL || phi == NULL || rows == NULL || cols == NULL) {
		free(group);
		free(phi);
		free(rows);
		free(cols);
		return BELLOWS_ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++) {
		group[i] = i;
		phi[i] = COM_RESID_PHI_DEFAULT;
		rows[i] = 1.0;
		cols[i] = 1.0;
	}
	free(d->resid_group);
	free(d->resid_phi);
	free(d->resid_rows);
	free(d->resid_cols);
	d->resid_group = group;
	d->resid_phi = phi;
	d->resid_rows = rows;
	d->resid_cols = cols;
	return 0;
}

int
com_decision_init(com_decision *d, const char *job, uint32_t n_layers)
{
	memset(d, 0, sizeof(*d));
	d->lr_scale = 1.0;
	if (job != NULL && (d->job = strdup(job)) == NULL)
		goto fail;
	if (n_layers > 0) {
		d->level = calloc(n_layers, sizeof(*d->level));
		d->error_bound = calloc(n_layers, sizeof(*d->error_bound));
		if (d->level == NULL || d->error_bound == NULL)
			goto fail;
	}
	d->n_layers = n_layers;
	return 0;
fail:
	com_decision_fini(d);
	return BELLOWS_ENOMEM;
}

int
com_decision_copy(com_decision *dst, const com_decision *src)
{
	size_t layer_bytes = (size_t)src->n_layers * sizeof(double);

	*dst = *src;
	dst->job = NULL;
	dst->level = NULL;
	dst->error_bound = NULL;
	dst->codec_table = NULL;
	dst->policy = NULL;
	dst->reason = NULL;
	dst->resid_group = NULL;
	dst->resid_phi = NULL;
	dst->resid_rows = NULL;
	dst->resid_cols = NULL;
	if ((src->job != NULL && (dst->job = strdup(src->job)) == NULL) ||
	    (src->policy != NULL &&
		(dst->policy = strdup(src->policy)) == NULL) ||
	    (src->reason != NULL &&
		(dst->reason = strdup(src->reason)) == NULL))
		goto fail;
	if (layer_bytes > 0) {
		dst->level = malloc(layer_bytes);
		dst->error_bound = malloc(layer_bytes);
		if (dst->level == NULL || dst->error_bound == NULL)
			goto fail;
		memcpy(dst->level, src->level, layer_bytes);
		memcpy(dst->error_bound, src->error_bound, layer_bytes);
	}
	if (src->codec_table_len > 0) {
		dst->codec_table = malloc(src->codec_table_len);
		if (dst->codec_table == NULL)
			goto fail;
		memcpy(dst->codec_table, src->codec_table,
		    src->codec_table_len);
	}
	if (src->resid_group != NULL && src->resid_phi != NULL &&
	    src->resid_rows != NULL && src->resid_cols != NULL) {
		if (com_resid_plan_alloc(dst) != 0)
			goto fail;
		memcpy(dst->resid_group, src->resid_group,
		    src->n_layers * sizeof(*dst->resid_group));
		memcpy(dst->resid_phi, src->resid_phi, layer_bytes);
		memcpy(dst->resid_rows, src->resid_rows, layer_bytes);
		memcpy(dst->resid_cols, src->resid_cols, layer_bytes);
	}
	return 0;
fail:
	com_decision_fini(dst);
	return BELLOWS_ENOMEM;
}

/* The wire reads an LR scale of 0 as "unchanged". */
static double
msg_lr_scale(double s)
{
	return s == 0.0 ? 1.0 : s;
}

/* The residual plans of a and b (same n_layers) agree; a missing plan is
 * the default one. */
static bool
msg_same_resid_plan(const com_decision *a, const com_decision *b)
{
	bool da = com_resid_plan_is_default(a);
	bool db = com_resid_plan_is_default(b);

	if (da || db)
		return da && db;
	for (uint32_t i = 0; i < a->n_layers; i++)
		if (a->resid_group[i] != b->resid_group[i] ||
		    a->resid_rows[i] != b->resid_rows[i] ||
		    a->resid_cols[i] != b->resid_cols[i] ||
		    (a->resid_group[i] == i &&
			a->resid_phi[i] != b->resid_phi[i]))
			return false;
	return true;
}

bool
com_decision_same_state(const com_decision *a, const com_decision *b)
{
	if (a->n_layers != b->n_layers || a->batch_size != b->batch_size ||
	    msg_lr_scale(a->lr_scale) != msg_lr_scale(b->lr_scale) ||
	    a->size_threshold != b->size_threshold ||
	    a->compression_off != b->compression_off ||
	    a->calibrate_steps != b->calibrate_steps ||
	    a->codec_table_len != b->codec_table_len)
		return false;
	/* Element-wise ==, not memcmp: 0.0 and -0.0 are the same level. */
	for (uint32_t i = 0; i < a->n_layers; i++)
		if (a->level[i] != b->level[i] ||
		    a->error_bound[i] != b->error_bound[i])
			return false;
	if (a->codec_table_len != 0 &&
	    memcmp(a->codec_table, b->codec_table, a->codec_table_len) != 0)
		return false;
	return msg_same_resid_plan(a, b);
}

static void
msg_decisions_free(com_decision *d, uint32_t n)
{
	if (d == NULL)
		return;
	for (uint32_t i = 0; i < n; i++)
		com_decision_fini(&d[i]);
	free(d);
}

static void
msg_hello_fini(com_hello *h)
{
	if (h->layers != NULL)
		for (uint32_t i = 0; i < h->n_layers; i++)
			free(h->layers[i].name);
	free(h->layers);
	free(h->job);
	free(h->agent_version);
	free(h->run_id);
	com_decision_fini(&h->in_force);
}

static void
msg_status_reply_fini(com_status_reply *r)
{
	if (r->jobs != NULL) {
		for (uint32_t i = 0; i < r->n_jobs; i++) {
			free(r->jobs[i].job);
			free(r->jobs[i].ranks);
			free(r->jobs[i].policy);
		}
	}
	free(r->jobs);
	if (r->peers != NULL) {
		for (uint32_t i = 0; i < r->n_peers; i++) {
			free(r->peers[i].peer);
			free(r->peers[i].last_error);
		}
	}
	free(r->peers);
	if (r->events != NULL) {
		for (uint32_t i = 0; i < r->n_events; i++) {
			free(r->events[i].kind);
			free(r->events[i].job);
			free(r->events[i].text);
		}
	}
	free(r->store_error);
	free(r->store_path);
	free(r->events);
}

static void
msg_telemetry_fini(com_telemetry *t)
{
	if (t->metrics != NULL) {
		for (uint32_t i = 0; i < t->n_metrics; i++) {
			free(t->metrics[i].policy);
			free(t->metrics[i].name);
		}
	}
	free(t->metrics);
	free(t->job);
}

/* The array statistics of a report's layers (each NULL or owned). */
#define MSG_FREE_ARRAY(name, ...) free(r->layers[i].name);
static void
msg_report_arrays_free(com_report *r)
{
	for (uint32_t i = 0; r->layers != NULL && i < r->n_layers; i++) {
		BELLOWS_LAYER_ARRAYS(MSG_FREE_ARRAY)
	}
}

void
com_msg_fini(com_msg *m)
{
	switch (m->type) {
	case COM_MSG_HELLO:
		msg_hello_fini(&m->u.hello);
		break;
	case COM_MSG_WELCOME:
		free(m->u.welcome.job);
		msg_decisions_free(m->u.welcome.decisions,
		    m->u.welcome.n_decisions);
		break;
	case COM_MSG_REPORT:
		free(m->u.report.job);
		msg_report_arrays_free(&m->u.report);
		free(m->u.report.layers);
		free(m->u.report.comm);
		break;
	case COM_MSG_DECISION:
		com_decision_fini(&m->u.decision);
		break;
	case COM_MSG_HEARTBEAT:
		free(m->u.heartbeat.job);
		break;
	case COM_MSG_BYE:
		free(m->u.bye.job);
		break;
	case COM_MSG_STATUS_REQUEST:
		free(m->u.status_request.job);
		break;
	case COM_MSG_STATUS_REPLY:
		msg_status_reply_fini(&m->u.status_reply);
		break;
	case COM_MSG_SNAPSHOT_REQUEST:
		free(m->u.snapshot_request.job);
		break;
	case COM_MSG_SNAPSHOT:
		free(m->u.snapshot.job);
		msg_decisions_free(m->u.snapshot.decisions,
		    m->u.snapshot.n_decisions);
		break;
	case COM_MSG_ERROR:
		free(m->u.error.message);
		break;
	case COM_MSG_TELEMETRY:
		msg_telemetry_fini(&m->u.telemetry);
		break;
	case COM_MSG_NONE:
	case COM_MSG_HEARTBEAT_ACK:
	case COM_MSG_TYPE_MAX:
	default:
		break;
	}
	com_msg_init(m, COM_MSG_NONE);
}
