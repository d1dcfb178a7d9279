/* status - `bellows status`, see status.h.
 */
#include "status.h"

#include "common/args.h"
#include "client/client.h"
#include "common/msg.h"

#include <bellows/error.h>

#include <stddef.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define STATUS_DEFAULT_CONTROL    COM_DEFAULT_CONTROL
#define STATUS_DEFAULT_TIMEOUT_MS 2000

/* The default in the help, from the same number. */
#define STATUS_STR2(x) #x
#define STATUS_STR(x)  STATUS_STR2(x)

static int
status_format(const char *cmd, const char *opt, const char *text, void *opts)
{
	tool_status_opts *o = opts;

	if (strcmp(text, "json") != 0 && strcmp(text, "table") != 0) {
		fprintf(stderr,
		    "bellows %s: %s must be table or json, not '%s'\n", cmd,
		    opt, text);
		return BELLOWS_EINVAL;
	}
	o->json = strcmp(text, "json") == 0;
	return 0;
}

static const com_opt status_rows[] = {
	{ .name = "control",
	    .arg = "EP",
	    .help = "bellowsd's control endpoint (default $BELLOWS_CONTROL, "
		    "else " STATUS_DEFAULT_CONTROL ")",
	    .kind = COM_OPT_TEXT,
	    .at = offsetof(tool_status_opts, control),
	    .min = 1,
	    .letter = 'c' },
	{ .name = "format",
	    .arg = "F",
	    .help = "table (default) or json",
	    .kind = COM_OPT_PARSE,
	    .parse = status_format,
	    .letter = 'f' },
	{ .name = "timeout-ms",
	    .arg = "N",
	    .help = "wait this long for the answer (default " STATUS_STR(
		STATUS_DEFAULT_TIMEOUT_MS) ")",
	    .kind = COM_OPT_U32,
	    .at = offsetof(tool_status_opts, timeout_ms),
	    .min = 1,
	    .max = 3600000,
	    .letter = 't' },
	{ .name = "server-key",
	    .arg = "FILE",
	    .help = "bellowsd's public certificate (default "
		    "$BELLOWS_SERVER_KEY)",
	    .kind = COM_OPT_TEXT,
	    .at = offsetof(tool_status_opts, server_key) },
	{ .name = "client-key",
	    .arg = "FILE",
	    .help = "this client's secret certificate (default "
		    "$BELLOWS_CLIENT_KEY); with both, CURVE",
	    .kind = COM_OPT_TEXT,
	    .at = offsetof(tool_status_opts, client_key) },
};

static const com_args_cmd status_cmd = {
	.name = "status",
	.shared = COM_ARGS_TAKES(COM_ARGS_JOB),
	.shared_at = offsetof(tool_status_opts, sh),
	.notes = { [COM_ARGS_JOB] = "only this one (default $BELLOWS_JOB, "
				    "else every job)" },
	.letters = { [COM_ARGS_JOB] = 'j' },
	.opts = status_rows,
	.n_opts = sizeof(status_rows) / sizeof(status_rows[0]),
	.usage = tool_status_usage,
};

void
tool_status_usage(FILE *f)
{
	fputs("usage: bellows status [--control EP] [--job NAME]\n"
	      "                      [--format table|json] [--timeout-ms N]\n"
	      "                      [--server-key FILE --client-key FILE]\n"
	      "\n",
	    f);
	com_args_help(f, &status_cmd, NULL);
	fputs(
	    "\n"
	    "  Exits 0 with the answer, 1 when there is none (bellowsd down,\n"
	    "  refused this client's key, or the server key is wrong), 2 on\n"
	    "  a usage error or a bad key file.\n",
	    f);
}

static void
status_hex(FILE *f, const uint8_t *id, size_t len)
{
	for (size_t i = 0; i < len; i++)
		fprintf(f, "%02x", id[i]);
	if (len == 0)
		fputc('-', f);
}

/* Writes a duration as "1h02m03s", "4m05s" or "6.7s". */
static void
status_duration(FILE *f, uint64_t ms)
{
	uint64_t s = ms / 1000;

	if (s >= 3600)
		fprintf(f, "%" PRIu64 "h%02" PRIu64 "m%02" PRIu64 "s", s / 3600,
		    s / 60 % 60, s % 60);
	else if (s >= 60)
		fprintf(f, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
	else
		fprintf(f, "%.1fs", (double)ms / 1000.0);
}

static void
status_print_table(FILE *f, const com_status_reply *st)
{
	fprintf(f, "bellowsd instance %016" PRIx64 ", up ", st->instance);
	status_duration(f, st->uptime_ms);
	fprintf(f,
	    "\n  messages %" PRIu64 ", dropped %" PRIu64 ", reports %" PRIu64
	    ", decisions %" PRIu64 ", layer stats %" PRIu64
	    ", duplicate reports %" PRIu64 "\n",
	    st->messages, st->dropped, st->reports, st->decisions,
	    st->layer_stats, st->reports_duplicate);
	if (st->latency_samples > 0)
		fprintf(f,
		    "  decision latency p50 %.3f ms, p99 %.3f ms, max %.3f ms"
		    " (last %u decisions; window close to publish)\n",
		    st->latency_p50_ms, st->latency_p99_ms, st->latency_max_ms,
		    st->latency_samples);
	else
		fprintf(f, "  decision latency: no decision yet\n");
	if (st->store_degraded)
		fprintf(f,
		    "  history store DEGRADED: %s (%" PRIu64
		    " rows pending, %" PRIu64 " metric rows not written)\n",
		    st->store_error != NULL && st->store_error[0] != '\0'
			? st->store_error
			: "unknown",
		    st->store_pending, st->store_dropped);
	else if (st->store_error != NULL && st->store_error[0] != '\0')
		fprintf(f, "  history: %s\n", st->store_error);
	else
		fprintf(f,
		    "  history store ok (%" PRIu64 " rows pending, %" PRIu64
		    " metric rows not written)\n",
		    st->store_pending, st->store_dropped);
	if (st->store_path != NULL && st->store_path[0] != '\0')
		fprintf(f, "  history file: %s\n", st->store_path);
	if (st->n_jobs == 0)
		fprintf(f, "\nno jobs\n");
	for (uint32_t i = 0; i < st->n_jobs; i++) {
		const com_job_status *js = &st->jobs[i];

		fprintf(f,
		    "\njob '%s': world %u, %u alive, %u layers, window %" PRIu64
		    ", seq %" PRIu64 ", step %" PRIu64 ", %" PRIu64
		    " incomplete windows\n"
		    "  policies: %s\n",
		    js->job != NULL ? js->job : "", js->world, js->ranks_alive,
		    js->n_layers, js->window, js->seq, js->step,
		    js->windows_incomplete,
		    js->policy != NULL && js->policy[0] != '\0' ? js->policy
								: "(none)");
		fprintf(f, "  %6s %-5s %10s %12s %8s %8s %7s\n", "rank",
		    "alive", "step", "last seen ms", "reports", "seq",
		    "rejoins");
		for (uint32_t r = 0; r < js->n_ranks; r++) {
			const com_rank_status *rs = &js->ranks[r];

			fprintf(f,
			    "  %6u %-5s %10" PRIu64 " %12" PRIu64 " %8" PRIu64
			    " %8" PRIu64 " %7u\n",
			    rs->rank, rs->alive ? "yes" : "no", rs->step,
			    rs->last_seen_ms, rs->reports, rs->seq_in_force,
			    rs->rejoins);
		}
	}
	if (st->n_peers > 0) {
		fprintf(f, "\npeers with drops:\n");
		for (uint32_t i = 0; i < st->n_peers; i++) {
			const com_peer_status *p = &st->peers[i];

			fprintf(f, "  ");
			status_hex(f, p->peer, p->peer_len);
			fprintf(f, "  %" PRIu64 " dropped, last: %s\n",
			    p->dropped,
			    p->last_error != NULL ? p->last_error : "-");
		}
	}
	if (st->n_events > 0) {
		fprintf(f, "\nrecent events:\n");
		for (uint32_t i = 0; i < st->n_events; i++) {
			const com_event *e = &st->events[i];
			time_t t = (time_t)(e->wall_ms / 1000);
			struct tm tm;
			char when[32] = "?";

			if (gmtime_r(&t, &tm) != NULL)
				strftime(when, sizeof(when), "%H:%M:%S", &tm);
			fprintf(f, "  %s %-16s %-12s %s\n", when,
			    e->kind != NULL ? e->kind : "",
			    e->job != NULL && e->job[0] != '\0' ? e->job : "-",
			    e->text != NULL ? e->text : "");
		}
	}
}

/* Writes s as a JSON string. */
static void
status_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s != NULL && *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void
status_print_json(FILE *f, const com_status_reply *st)
{
	fprintf(f,
	    "{\"instance\": \"%016" PRIx64 "\", \"uptime_ms\": %" PRIu64
	    ", \"messages\": %" PRIu64 ", \"dropped\": %" PRIu64
	    ", \"reports\": %" PRIu64 ", \"decisions\": %" PRIu64
	    ", \"layer_stats\": %" PRIu64 ", \"reports_duplicate\": %" PRIu64
	    ",\n",
	    st->instance, st->uptime_ms, st->messages, st->dropped, st->reports,
	    st->decisions, st->layer_stats, st->reports_duplicate);
	fprintf(f,
	    " \"latency\": {\"samples\": %u, \"p50_ms\": %.6f, "
	    "\"p99_ms\": %.6f, \"max_ms\": %.6f},\n",
	    st->latency_samples, st->latency_p50_ms, st->latency_p99_ms,
	    st->latency_max_ms);
	fprintf(f,
	    " \"store\": {\"degraded\": %s, \"pending\": %" PRIu64
	    ", \"dropped\": %" PRIu64 ", \"error\": ",
	    st->store_degraded ? "true" : "false", st->store_pending,
	    st->store_dropped);
	status_json_str(f, st->store_error);
	fprintf(f, ", \"path\": ");
	status_json_str(f, st->store_path);
	fprintf(f, "},\n \"events\": [");
	for (uint32_t i = 0; i < st->n_events; i++) {
		const com_event *e = &st->events[i];

		fprintf(f,
		    "%s\n  {\"wall_ms\": %" PRIu64 ", \"kind\": ", i ? "," : "",
		    e->wall_ms);
		status_json_str(f, e->kind);
		fprintf(f, ", \"job\": ");
		status_json_str(f, e->job);
		fprintf(f, ", \"text\": ");
		status_json_str(f, e->text);
		fputc('}', f);
	}
	fprintf(f, "%s],\n \"jobs\": [", st->n_events ? "\n " : "");
	for (uint32_t i = 0; i < st->n_jobs; i++) {
		const com_job_status *js = &st->jobs[i];

		fprintf(f, "%s\n  {\"job\": ", i ? "," : "");
		status_json_str(f, js->job);
		fprintf(f,
		    ", \"world\": %u, \"ranks_alive\": %u, \"layers\": %u, "
		    "\"window\": %" PRIu64 ", \"seq\": %" PRIu64
		    ", \"step\": %" PRIu64 ", \"windows_incomplete\": %" PRIu64
		    ", \"policies\": ",
		    js->world, js->ranks_alive, js->n_layers, js->window,
		    js->seq, js->step, js->windows_incomplete);
		status_json_str(f, js->policy);
		fprintf(f, ",\n   \"ranks\": [");
		for (uint32_t r = 0; r < js->n_ranks; r++) {
			const com_rank_status *rs = &js->ranks[r];

			fprintf(f,
			    "%s\n    {\"rank\": %u, \"alive\": %s, \"step\": "
			    "%" PRIu64 ", \"last_seen_ms\": %" PRIu64
			    ", \"reports\": %" PRIu64
			    ", \"seq_in_force\": %" PRIu64 ", \"rejoins\": %u}",
			    r ? "," : "", rs->rank,
			    rs->alive ? "true" : "false", rs->step,
			    rs->last_seen_ms, rs->reports, rs->seq_in_force,
			    rs->rejoins);
		}
		fprintf(f, "%s]}", js->n_ranks ? "\n   " : "");
	}
	fprintf(f, "%s],\n \"peers\": [", st->n_jobs ? "\n " : "");
	for (uint32_t i = 0; i < st->n_peers; i++) {
		const com_peer_status *p = &st->peers[i];

		fprintf(f, "%s\n  {\"peer\": \"", i ? "," : "");
		status_hex(f, p->peer, p->peer_len);
		fprintf(f, "\", \"dropped\": %" PRIu64 ", \"last_error\": ",
		    p->dropped);
		status_json_str(f, p->last_error);
		fputc('}', f);
	}
	fprintf(f, "%s]}\n", st->n_peers ? "\n " : "");
}

int
tool_status_parse(int argc, char **argv, tool_status_opts *ret)
{
	int next;

	*ret = (tool_status_opts){
		.control = tool_client_env("BELLOWS_CONTROL",
		    STATUS_DEFAULT_CONTROL),
		.sh = { .job = tool_client_env("BELLOWS_JOB", NULL) },
		.timeout_ms = STATUS_DEFAULT_TIMEOUT_MS,
	};
	return com_args_parse(&status_cmd, argc, argv, ret, &next);
}

int
tool_status_main(int argc, char **argv)
{
	tool_client *client = NULL;
	com_msg req, reply;
	tool_status_opts o;
	tool_keys keys;
	int r, rc = 1;

	if ((rc = tool_status_parse(argc, argv, &o)) >= 0)
		return rc;
	if (tool_client_keys("status", o.server_key, o.client_key, &keys) != 0)
		return 2;
	rc = 1;
	com_msg_init(&req, COM_MSG_STATUS_REQUEST);
	com_msg_init(&reply, COM_MSG_NONE);
	req.u.status_request.job = (char *)o.sh.job; /* borrowed, not freed */
	r = tool_client_open(o.control, &keys, &client);
	explicit_bzero(&keys.client, sizeof(keys.client));
	if (r != 0) {
		fprintf(stderr, "bellows status: cannot connect to '%s': %s\n",
		    o.control, bellows_strerror(r));
		goto out;
	}
	r = tool_client_request(client, &req, o.timeout_ms, &reply);
	if (r == BELLOWS_ECONFIG ||
	    (r == BELLOWS_ETIMEDOUT && tool_client_why(client)[0] != '\0')) {
		fprintf(stderr, "bellows status: %s (bellowsd at %s)\n",
		    tool_client_why(client), o.control);
		goto out;
	}
	if (r == BELLOWS_ETIMEDOUT) {
		fprintf(stderr,
		    "bellows status: bellowsd at %s did not answer within %u "
		    "ms\n",
		    o.control, o.timeout_ms);
		goto out;
	}
	if (r != 0) {
		fprintf(stderr, "bellows status: bad answer from %s: %s\n",
		    o.control, bellows_strerror(r));
		goto out;
	}
	if (reply.type == COM_MSG_ERROR) {
		fprintf(stderr, "bellows status: bellowsd at %s refused: %s\n",
		    o.control,
		    reply.u.error.message != NULL
			? reply.u.error.message
			: bellows_strerror(reply.u.error.code));
		goto out;
	}
	if (reply.type != COM_MSG_STATUS_REPLY) {
		fprintf(stderr,
		    "bellows status: bellowsd at %s answered with a %s\n",
		    o.control, com_msg_type_name(reply.type));
		goto out;
	}
	if (o.json)
		status_print_json(stdout, &reply.u.status_reply);
	else
		status_print_table(stdout, &reply.u.status_reply);
	if (o.sh.job != NULL && reply.u.status_reply.n_jobs == 0) {
		fprintf(stderr,
		    "bellows status: bellowsd at %s has no job '%s'\n",
		    o.control, o.sh.job);
		goto out;
	}
	rc = fflush(stdout) == 0 ? 0 : 1;
out:
	req.u.status_request.job = NULL;
	com_msg_fini(&req);
	com_msg_fini(&reply);
	tool_client_close(&client);
	return rc;
}
