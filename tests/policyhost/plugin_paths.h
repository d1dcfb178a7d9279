/* plugin_paths - where the policy host and controller tests find the
 * plug-ins the build made: the threshold example under examples/ and the
 * deliberately broken ones built next to the policy host tests (see
 * meson.build here), found from BELLOWS_BUILD_ROOT, which `meson test`
 * sets.
 */
#ifndef TEST_PLUGIN_PATHS_H
#define TEST_PLUGIN_PATHS_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define THRESHOLD_SO    "examples/policies/threshold_example/libthreshold.so"
#define BROKEN_SO(what) "tests/policyhost/libbroken_" what ".so"

/* Writes the absolute path of the built plug-in `rel` into buf; fails the
 * test when it is missing. */
static inline void
plugin_path(char *buf, size_t len, const char *rel)
{
	const char *root = getenv("BELLOWS_BUILD_ROOT");

	if (root == NULL) {
		fail_msg("BELLOWS_BUILD_ROOT is not set: run under meson test");
		return;
	}
	snprintf(buf, len, "%s/%s", root, rel);
	if (access(buf, R_OK) != 0)
		fail_msg("plug-in '%s' is not built", buf);
}

#endif /* TEST_PLUGIN_PATHS_H */
