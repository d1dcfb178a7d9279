/* args - the command line's options: one table, one parser, one help.
 *
 * Every program parses its command line here: each subcommand of
 * `bellows` and bellowsd, which is why this lives in common/ (bellowsd
 * may not link the client library); it holds no socket and no state.
 * A subcommand (or a program: com_args_cmd.program) describes each of its
 * options as a row of a table (com_opt): its name, the name of its value, its
 * help, how the value is checked and where it is stored. The options several
 * subcommands take (--db, --run, --job) are rows of one shared table, declared
 * once in args.c and stored in a com_args_shared inside each subcommand's
 * options; a subcommand only names the ones it takes. com_args_parse
 * runs getopt_long over the shared rows, the subcommand's own and
 * --help, and com_args_help writes them in one layout, so that an
 * option reads, is refused and is explained the same way in every
 * subcommand that takes it.
 *
 * Every number a user types goes through com_args_u64, so that
 * "--ranks 4x", "--ranks -1" and "--ranks 99999999999999999999" are
 * refused with one kind of message ("bellows sim: --ranks must be an
 * integer in [1, 256], not '4x'") and the subcommands only see values in
 * range. Parsing is not thread-safe (getopt's globals); the tables are
 * constant data.
 */
#ifndef COM_ARGS_H
#define COM_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* How an option's value is checked and stored. */
typedef enum com_opt_kind {
	COM_OPT_FLAG,  /* no value: the bool at `at` becomes true */
	COM_OPT_TEXT,  /* a const char * borrowed from argv, of min..max
			* bytes (max 0: no upper bound) */
	COM_OPT_NAME,  /* COM_OPT_TEXT without control characters */
	COM_OPT_U32,   /* a uint32_t in [min, max] */
	COM_OPT_U64,   /* a uint64_t in [min, max] */
	COM_OPT_I64,   /* an int64_t in [min, max], max <= INT64_MAX */
	COM_OPT_PARSE, /* the row's parse function checks and stores it */
} com_opt_kind;

/* Checks the value `text` of option `opt` (e.g. "--kill") of subcommand
 * `cmd` and stores it in the subcommand's options `opts`. Returns 0, or
 * BELLOWS_EINVAL after saying why on stderr ("bellows CMD: ...", or
 * "CMD: ..." for a program of its own, com_args_cmd.program). */
typedef int (*com_opt_parse_fn)(const char *cmd, const char *opt,
    const char *text, void *opts);

/* One option. */
typedef struct com_opt {
	const char *name;       /* its long name, without "--" */
	const char *arg;        /* its value's name in the help ("FILE");
				 * NULL for a flag */
	const char *help;       /* what it does, one sentence or more;
				 * com_args_help wraps it */
	com_opt_kind kind;      /* how its value is checked */
	size_t at;              /* where it is stored: offset in the
				 * options (of com_args_shared for a
				 * shared option) */
	uint64_t min;           /* numbers: the least; text: fewest bytes */
	uint64_t max;           /* numbers: the most; text: most bytes */
	com_opt_parse_fn parse; /* COM_OPT_PARSE: checks and stores */
	char letter;            /* its short name ('p' for -p), '\0':
				 * none; never 'h' (-h is --help) */
} com_opt;

/* The options more than one subcommand takes, in the order their help
 * lists them. */
typedef enum com_args_id {
	COM_ARGS_DB,  /* --db FILE: the history database */
	COM_ARGS_RUN, /* --run ID: a run of it */
	COM_ARGS_JOB, /* --job NAME: a job */
	COM_ARGS_N,
} com_args_id;

#define COM_ARGS_TAKES(id) (1u << (id)) /* for com_args_cmd.shared */

/* Where the shared options are stored, inside a subcommand's options.
 * The subcommand sets the defaults before parsing. */
typedef struct com_args_shared {
	const char *db;  /* --db; the subcommand's default, or NULL */
	int64_t run;     /* --run, a run id >= 1; 0: not given */
	const char *job; /* --job; NULL: not given */
} com_args_shared;

/* The shared table, indexed by com_args_id. */
extern const com_opt com_args_shared_opts[COM_ARGS_N];

/* A subcommand's options. */
typedef struct com_args_cmd {
	const char *name; /* the subcommand ("export"), for
			   * its messages */
	bool program;     /* name is a program of its own ("bellowsd"):
			   * messages say "NAME: ", not "bellows NAME: " */
	unsigned shared;  /* COM_ARGS_TAKES of each shared
			   * option it takes */
	size_t shared_at; /* offset of its com_args_shared
			   * in its options */
	const char *notes[COM_ARGS_N]; /* per shared option: what it means
					* here, added to its help; NULL:
					* nothing to add */
	char letters[COM_ARGS_N];      /* per shared option: its short name here
					* ('j' for -j), '\0': none */
	int operands;                  /* operands it takes at most */
	const com_opt *opts;           /* its own options */
	size_t n_opts;                 /* their number */
	void (*usage)(FILE *f);        /* writes its usage text, on --help
					* and after an unknown option */
} com_args_cmd;

/* Parses the options of argv (argv[0] is the subcommand's name) into
 * `opts`, the subcommand's options, which the caller has filled with
 * the defaults. Options may come in any order, before or after the
 * operands; a long name may be abbreviated while it is unambiguous.
 * A row with a letter (a shared one: with a letter in cmd->letters) is
 * also taken as -LETTER (-p FILE).
 * Returns -1 to go on, with *ret_next the index in argv of the first
 * operand (operands are moved behind the options, as getopt_long does;
 * there are at most cmd->operands); 0 after --help or -h (cmd->usage
 * written to stdout); 2 on a usage error, said on stderr as
 * "bellows CMD: ..." ("CMD: ..." for a program) naming the option or
 * the operand too many, with the nearest option's name after an
 * unknown one ("did you mean '--db'?"): an
 * unknown or ambiguous option and a missing value also write
 * cmd->usage to stderr. On a usage error, options before the bad one
 * may have been stored; *ret_next is set only when -1 is returned. */
int com_args_parse(const com_args_cmd *cmd, int argc, char **argv, void *opts,
    int *ret_next);

/* Writes the option list of cmd's help to f: the shared options it
 * takes, then its own, then --help, one "  --name ARG  help" entry each
 * with the help wrapped under its column. A shared option whose default
 * in `defaults` (the subcommand's options as com_args_parse starts from
 * them, NULL: none) is a non-NULL text says "(default ...)". */
void com_args_help(FILE *f, const com_args_cmd *cmd, const void *defaults);

/* Parses `text`, the value of option `opt` of subcommand `cmd`, as a
 * decimal integer in [min, max] into *ret. Returns 0, or BELLOWS_EINVAL
 * after printing why to stderr (*ret untouched). */
int com_args_u64(const char *cmd, const char *opt, const char *text,
    uint64_t min, uint64_t max, uint64_t *ret);

/* Same for a uint32_t. */
int com_args_u32(const char *cmd, const char *opt, const char *text,
    uint32_t min, uint32_t max, uint32_t *ret);

/* Checks `text`, the value of option `opt` of subcommand `cmd`: min..max
 * bytes (max 0: no upper bound) and, when `plain`, no control
 * characters. Returns 0, or BELLOWS_EINVAL after printing why to stderr
 * ("--db must not be empty", "--job must have 1..255 bytes"). */
int com_args_text(const char *cmd, const char *opt, const char *text,
    uint64_t min, uint64_t max, bool plain);

#endif /* COM_ARGS_H */
