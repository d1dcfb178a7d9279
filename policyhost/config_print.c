/* config_print - a configuration written back as YAML, see config.h.
 *
 * What `bellows policy check` prints for a valid file: a normalised
 * summary with every setting's value in force (defaults filled in) and
 * every policy's parameters, texts quoted so that they read back
 * unchanged.
 */
#include "config_int.h"

#include <bellows/error.h>

#include <stdio.h>
#include <string.h>

/* Writes s as a YAML double-quoted scalar, so that any text (quotes,
 * backslashes, '#', ": ") reads back unchanged. */
static void
config_print_quoted(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p != '\0';
	     p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(f, "\\x%02x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

static void
config_print_param(FILE *f, const bellows_param *p, const void *config)
{
	const char *src = (const char *)config + p->offset;
	const bellows_steps *st;
	bool bv;
	int64_t iv;
	double dv;

	fprintf(f, "          %s: ", p->name);
	switch (p->type) {
	case BELLOWS_PARAM_BOOL:
		memcpy(&bv, src, sizeof(bv));
		fprintf(f, "%s", bv ? "true" : "false");
		break;
	case BELLOWS_PARAM_INT:
		memcpy(&iv, src, sizeof(iv));
		fprintf(f, "%lld", (long long)iv);
		break;
	case BELLOWS_PARAM_DOUBLE:
		memcpy(&dv, src, sizeof(dv));
		fprintf(f, "%.17g", dv);
		break;
	case BELLOWS_PARAM_STRING:
		config_print_quoted(f, src);
		break;
	case BELLOWS_PARAM_STEPS:
		st = (const bellows_steps *)src;
		fprintf(f, "{");
		for (uint32_t k = 0; k < st->n; k++)
			fprintf(f, "%s%llu: %.17g", k ? ", " : "",
			    (unsigned long long)st->from[k], st->value[k]);
		fprintf(f, "}");
		break;
	}
	fprintf(f, "\n");
}

static void
config_print_policy(FILE *f, const ctl_policy_conf *pc)
{
	const ctl_selector *sel = &pc->selector;

	fprintf(f, "      - name: ");
	config_print_quoted(f, pc->name);
	fprintf(f, "\n        type: %s\n", pc->ops->name);
	if (pc->plugin != NULL) {
		fprintf(f, "        plugin: ");
		config_print_quoted(f, ctl_plugin_path(pc->plugin));
		fprintf(f, "\n");
	}
	fprintf(f, "        layers: {");
	/* No regex means every name: printing one would change that. */
	if (sel->has_regex) {
		fprintf(f, "match: ");
		config_print_quoted(f, sel->regex_src);
		fprintf(f, ", ");
	}
	fprintf(f, "min_numel: %llu, min_ndim: %u}\n",
	    (unsigned long long)sel->min_numel, sel->min_ndim);
	if (pc->ops->params == NULL || pc->ops->params[0].name == NULL) {
		fprintf(f, "        params: {}\n");
		return;
	}
	fprintf(f, "        params:\n");
	for (const bellows_param *p = pc->ops->params; p->name != NULL; p++)
		config_print_param(f, p, pc->config);
}

/* `daemon.metrics` when it has a token (the token itself is not
 * printed, its file is). */
static void
config_print_metrics(FILE *f, const ctl_config *cfg)
{
	const ctl_metrics_conf *mc = &cfg->metrics;

	if (mc->token_file == NULL)
		return;
	fprintf(f, "  metrics:\n");
	if (cfg->metrics_listen != NULL) {
		fprintf(f, "    listen: ");
		config_print_quoted(f, cfg->metrics_listen);
		fprintf(f, "\n");
	}
	fprintf(f, "    token_file: ");
	config_print_quoted(f, mc->token_file);
	fprintf(f, "\n");
	if (mc->client != NULL) {
		fprintf(f, "    client: ");
		config_print_quoted(f, mc->client);
		fprintf(f, "\n");
	}
}

int
ctl_config_print(const ctl_config *cfg, void *out)
{
	FILE *f = out;

	fprintf(f, "daemon:\n");
	/* Endpoints left out of the file come from the command line. */
	if (cfg->control != NULL) {
		fprintf(f, "  control: ");
		config_print_quoted(f, cfg->control);
		fprintf(f, "\n");
	}
	if (cfg->publish != NULL) {
		fprintf(f, "  publish: ");
		config_print_quoted(f, cfg->publish);
		fprintf(f, "\n");
	}
	if (cfg->metrics_listen != NULL && cfg->metrics.token_file == NULL) {
		fprintf(f, "  metrics_listen: ");
		config_print_quoted(f, cfg->metrics_listen);
		fprintf(f, "\n");
	}
	config_print_metrics(f, cfg);
	fprintf(f, "  apply_lag: %u\n", cfg->apply_lag);
	fprintf(f, "  window_timeout_ms: %u\n", cfg->window_timeout_ms);
	fprintf(f, "  rank_timeout_ms: %u\n", cfg->rank_timeout_ms);
	fprintf(f, "  heartbeat_ms: %u\n", cfg->heartbeat_ms);
	fprintf(f, "  repair_margin: %u\n", cfg->repair_margin);
	fprintf(f, "  max_jobs: %u\n", cfg->max_jobs);
	fprintf(f, "  max_world: %u\n", cfg->max_world);
	fprintf(f, "  max_layers: %u\n", cfg->max_layers);
	fprintf(f, "  job_idle_ms: %u\n", cfg->job_idle_ms);
	fprintf(f, "  reload_timeout_ms: %u\n", cfg->reload_timeout_ms);
	fprintf(f, "  plugin_timeout_ms: %u\n", cfg->plugin_timeout_ms);
	fprintf(f, "  plugin_memory_mb: %u\n", cfg->plugin_memory_mb);
	fprintf(f, "  max_job_mb: %u\n", cfg->max_job_mb);
	fprintf(f, "  max_total_job_mb: %u\n", cfg->max_total_job_mb);
	fprintf(f, "  peer_queue_mb: %u\n", cfg->peer_queue_mb);
	if (cfg->allow_insecure)
		fprintf(f, "  allow_insecure: true\n");
	if (cfg->security.enabled) {
		fprintf(f, "  security:\n    server_key: ");
		config_print_quoted(f, cfg->security.server_key);
		fprintf(f, "\n    clients: ");
		config_print_quoted(f, cfg->security.clients);
		fprintf(f, "\n");
	}
	fprintf(f, "store:\n");
	fprintf(f, "  max_windows_per_run: %u\n",
	    cfg->store.max_windows_per_run);
	fprintf(f, "  max_age_days: %u\n", cfg->store.max_age_days);
	fprintf(f, "  keep_every: %u\n", cfg->store.keep_every);
	fprintf(f, "  batch_rows: %u\n", cfg->store.batch_rows);
	fprintf(f, "  queue_rows: %u\n", cfg->store.queue_rows);
	fprintf(f, "  mode: \"%04o\"\n", cfg->store.mode);
	fprintf(f, "jobs:\n");
	for (uint32_t i = 0; i < cfg->n_jobs; i++) {
		const ctl_job_conf *jc = &cfg->jobs[i];

		fprintf(f, "  - match: ");
		config_print_quoted(f, jc->match);
		if (jc->clients != NULL) {
			fprintf(f, "\n    clients: [");
			for (uint32_t k = 0; k < jc->n_clients; k++) {
				fprintf(f, "%s", k ? ", " : "");
				config_print_quoted(f, jc->clients[k]);
			}
			fprintf(f, "]");
		}
		if (jc->all_stats)
			fprintf(f, "\n    all_stats: true");
		fprintf(f, "\n    policies:\n");
		for (uint32_t j = 0; j < jc->n_policies; j++)
			config_print_policy(f, &jc->policies[j]);
	}
	return ferror(f) ? BELLOWS_EIO : 0;
}
