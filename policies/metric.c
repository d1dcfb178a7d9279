/* metric - adding a named number to a policy's proposal (see metric.h).
 */
#include "metric.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void
pol_metric_add(bellows_proposal *out, const char *name, int32_t layer,
    double value)
{
	bellows_metric *m;

	if (!isfinite(value) || out->n_metrics >= BELLOWS_METRICS_MAX)
		return;
	m = &out->metrics[out->n_metrics++];
	memset(m, 0, sizeof(*m));
	snprintf(m->name, sizeof(m->name), "%s", name);
	m->layer = layer;
	m->value = value;
}
