/* metric - adding a named number to a policy's proposal, within the
 * proposal's room and the host's rules for metrics.
 */
#ifndef POL_METRIC_H
#define POL_METRIC_H

#include <bellows/policy.h>

#include <stdint.h>

/* Appends the metric `name` (cut to BELLOWS_METRIC_NAME_MAX - 1 bytes) of
 * `layer` (-1: the job) with `value` to out's metrics. Does nothing when
 * value is not finite (the host would drop it) or all
 * BELLOWS_METRICS_MAX entries are used. */
void pol_metric_add(bellows_proposal *out, const char *name, int32_t layer,
    double value);

#endif /* POL_METRIC_H */
