/* suggest - "did you mean X?" for a name that is not one of a known set.
 *
 * The CLI and the configuration reader both refuse unknown names
 * (subcommands, history views, policy types); this picks the known name
 * nearest to the one given by edit distance, so the refusal can name it.
 */
#ifndef COM_SUGGEST_H
#define COM_SUGGEST_H

#include <getopt.h>
#include <stddef.h>

#define COM_SUGGEST_OPTIONS_MAX 64 /* options com_suggest_option reads */

/* Returns the element of names[0..n) nearest to `given` by edit distance
 * (insertions, deletions, substitutions and swaps of two adjacent
 * characters, case-insensitive), if it is close enough to be a slip: at
 * most 1 edit for names up to 4 characters, 2 up to 8, else 3; also a
 * name that `given` is a prefix of (3 characters or more). Ties go to the
 * earlier name. Returns NULL when none is close, `given` is NULL or
 * longer than 64 bytes. NULL entries of `names` are skipped. Pure; the
 * result points into `names`. */
const char *com_suggest(const char *given, const char *const *names, size_t n);

/* The long option of `opts` (ended by an entry whose name is NULL; the
 * first COM_SUGGEST_OPTIONS_MAX are read) nearest to `arg`, an argument
 * getopt_long refused ("--contrl" or "--contrl=EP"), by com_suggest's
 * rule; the name without its dashes. Returns NULL when `arg` is not a
 * long option, names one of `opts` exactly (refused for its value), or
 * none is close, or either argument is NULL. Pure; the
 * result points into `opts`. */
const char *com_suggest_option(const char *arg, const struct option *opts);

#endif /* COM_SUGGEST_H */
