/*
 * cli — the `graphfs` command line (docs/graphfs.1): shared declarations.
 *
 * Every subcommand is `int cmd_<name>(int argc, char **argv)` with argv[0]
 * the subcommand's name; it returns the process exit status:
 *   0  success
 *   1  the operation failed (one line "graphfs: …" on stderr), or `verify`
 *      found problems
 *   2  usage error (one line "graphfs: …" on stderr)
 * Results go to stdout, diagnostics to stderr, and a progress bar is drawn
 * on stderr only when stderr is a terminal.
 *
 * The CLI uses only core/store.h (the public API of libgraphfs) and libc.
 */
#ifndef GRAPHFS_CLI_H
#define GRAPHFS_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

#ifndef GRAPHFS_VERSION_STRING
#define GRAPHFS_VERSION_STRING "unknown"
#endif

enum cli_exit { CLI_EXIT_OK = 0, CLI_EXIT_FAILURE = 1, CLI_EXIT_USAGE = 2 };

/* ---- subcommands ------------------------------------------------------------ */

int cmd_init(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_load(int argc, char **argv);
int cmd_log(int argc, char **argv);
int cmd_branch(int argc, char **argv);
int cmd_tag(int argc, char **argv);
int cmd_revert(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);   /* also cmd_restore: tools/cli/cmd_snapshot.c */
int cmd_restore(int argc, char **argv);
int cmd_gc(int argc, char **argv);   /* also cmd_optimize: tools/cli/cmd_gc.c */
int cmd_optimize(int argc, char **argv);
int cmd_heads(int argc, char **argv);
int cmd_schema(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_repair(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_debug(int argc, char **argv);
int cmd_mount(int argc, char **argv);   /* fuse/ — tools/cli/cmd_mount.c */

/* ---- errors ------------------------------------------------------------------ */

/* Prints "graphfs: <message>\n" on stderr as one line; returns CLI_EXIT_FAILURE. */
int cli_fail(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* Prints a usage error "graphfs: <command>: <message> (see 'graphfs <command> --help')";
 * returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *command, const char *format, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Prints the engine's error as one line: an input error that names a line
 * as "<path>:<line>: <message>"; any other error_info that says something as
 * "<context>: <path>: <message>"; otherwise "<context>: <strerror>".
 * context is printf-style. Returns CLI_EXIT_FAILURE.
 */
int cli_fail_error(int rc, const struct error_info *error, const char *context, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- options -------------------------------------------------------------------- */

struct cli_option {
	const char *long_name;   /* "branch" for --branch */
	char short_name;         /* 'm' for -m, 0 for none */
	const char **value;      /* options with a value: where it goes (the last one given wins) */
	bool *flag;              /* flags without a value: set to true when given */
};

/* What a command accepts: parsed by cli_parse. */
struct cli_syntax {
	const char *usage;                 /* the help text, printed on stdout by -h/--help */
	const struct cli_option *options;  /* option_count of them (NULL and 0: none) */
	size_t option_count;
	int minimum;                       /* how many positional arguments it takes */
	int maximum;
};

/*
 * Parses argv (argv[0] is the command) with getopt_long: options may appear
 * anywhere, "--" ends them. "-h"/"--help" prints the usage on stdout. Then
 * checks the count of positional arguments is within [minimum, maximum].
 * On return *positional points at the positional arguments and, when
 * positional_count is not NULL, *positional_count says how many there are.
 * Returns -1 to continue, or an exit status the command must return now:
 * CLI_EXIT_OK after --help, CLI_EXIT_USAGE after printing one usage error
 * line (an unknown option, a missing value, too few or too many arguments).
 */
int cli_parse(int argc, char **argv, const struct cli_syntax *syntax, char ***positional,
	      int *positional_count);

/* Checks the positional count is within [minimum, maximum]; 0 or CLI_EXIT_USAGE
 * after printing "missing argument(s)" or "too many arguments". */
int cli_expect_arguments(const char *command, int count, int minimum, int maximum);

/* Parses --if-version / --if-commit (either NULL: not given). 0, or CLI_EXIT_USAGE
 * after printing the error. */
int cli_condition_parse(const char *command, const char *if_version, const char *if_commit,
			struct store_condition *out);

/* ---- the store ---------------------------------------------------------------------- */

/* Opens the store at path; on failure prints one line ("graphfs: <path> is
 * not a graphfs store …" or "graphfs: cannot open the store <path>: …"),
 * sets *out to NULL and returns CLI_EXIT_FAILURE; else 0. */
int cli_store_open(const char *path, bool read_only, struct store **out);

/*
 * cli_parse, then cli_store_open of the first positional argument (STORE;
 * the syntax's minimum must be at least 1). Returns -1 with *positional set
 * as by cli_parse and *store open (the caller closes it), or the exit status
 * the command must return now, with nothing open: that of cli_parse, or
 * CLI_EXIT_FAILURE after the store's one-line error.
 */
int cli_parse_and_open(int argc, char **argv, const struct cli_syntax *syntax, bool read_only,
		       char ***positional, struct store **store);

/*
 * Runs a "<command> STORE" command (no options, the one argument STORE):
 * parses argv, opens STORE (read-only or not), calls run with the store and
 * STORE as given, then closes the store. Returns run's exit status, or,
 * without calling run, CLI_EXIT_OK after --help, CLI_EXIT_USAGE after one
 * usage error line, CLI_EXIT_FAILURE after the store's one-line error.
 */
int cli_run_on_store(int argc, char **argv, const char *usage, bool read_only,
		     int (*run)(struct store *store, const char *path));

/* A reading command's "STORE ARGUMENT… [--branch B] [--at V]", parsed, with the store open. */
struct cli_reading {
	char **arguments;        /* the positional arguments; arguments[0] is STORE */
	const char *branch;      /* --branch B; "main" when not given */
	uint64_t version;        /* --at V (a version, time, date or tag, resolved); STORE_LATEST when not given */
	struct store *store;     /* open read-only; the caller closes it */
};

/*
 * Resolves the value of --at (NULL: the latest) on the open store: a version, a
 * time or date (the version of *branch's state then), or a tag (which sets
 * *branch to the tag's branch). Returns 0, CLI_EXIT_USAGE (not a version, time,
 * date or tag name) or CLI_EXIT_FAILURE (it names nothing) after one line.
 */
int cli_resolve_at(const char *command, struct store *store, const char *at, const char **branch,
		   uint64_t *version);

/*
 * Parses argv as "<command> STORE ARGUMENT… [--branch B] [--at V]" with
 * exactly argument_count positional arguments (STORE included), then opens
 * STORE read-only. Returns -1 with *out filled, or the exit status the
 * command must return now, with nothing open: CLI_EXIT_OK after --help,
 * CLI_EXIT_USAGE after one usage error line (an option, the argument count,
 * a version that is not a number), CLI_EXIT_FAILURE after the store's
 * one-line error.
 */
int cli_reading_open(int argc, char **argv, const char *usage, int argument_count,
		     struct cli_reading *out);

/* Pins branch at version (STORE_LATEST: newest). Returns 0, or CLI_EXIT_FAILURE
 * with *out NULL after one line ("there is no branch …", "branch … has no
 * version …" or "cannot read branch …: …"). */
int cli_snapshot_open(struct store *store, const char *branch, uint64_t version,
		      struct store_snapshot **out);

/* ---- output -------------------------------------------------------------------------- */

/* Writes all bytes to fd (retrying short writes); 0 or -errno. */
int cli_write_all(int fd, const void *bytes, size_t size);

/* Flushes stdout; on a write error prints it and returns CLI_EXIT_FAILURE, else status. */
int cli_finish_stdout(int status);

/*
 * Lines written to stdout from a store walk's visit callback (heads, log):
 * the callback renders one record into line and returns cli_lines_write.
 */
struct cli_lines {
	struct buf line;   /* the line being rendered; emptied after each write */
	int rc;            /* the first error rendering or writing a line, or 0 */
};

void cli_lines_init(struct cli_lines *lines);

/* Writes line to stdout when rendered (what rendering it returned) is 0.
 * Returns 0, or rendered / -EIO (a short write), which it also keeps in rc;
 * prints nothing on error. */
int cli_lines_write(struct cli_lines *lines, int rendered);

/* Ends the walk, whose result was walked: frees line and returns walked, or
 * the kept line error when the walk returned 0 (0 or -errno). */
int cli_lines_finish(struct cli_lines *lines, int walked);

/* ---- progress bar ----------------------------------------------------------------------- */

struct cli_progress {
	bool enabled;            /* stderr is a terminal */
	const char *label;
	uint64_t last_draw_us;
	bool drawn;
	const char *unit;        /* NULL: done and total are bytes; else counts of this ("versions") */
	uint64_t total_seen;     /* the last total an update gave (0: none yet) */
};

/* Enables the bar if stderr is a terminal and draws it at 0 of total (0: unknown). */
void cli_progress_begin(struct cli_progress *progress, const char *label, uint64_t total);
/* The same for a bar that counts things of unit ("versions") rather than bytes. */
void cli_progress_begin_counting(struct cli_progress *progress, const char *label, const char *unit, uint64_t total);
/* A store_progress_fn: redraws at most ten times a second. context is the cli_progress. */
void cli_progress_update(uint64_t done, uint64_t total, void *context);
/* Takes the bar off the terminal's line (before other output there); the next update redraws it. */
void cli_progress_clear(struct cli_progress *progress);
/* Draws the final state (when success: total, or 0 for the last total an update gave)
 * and ends the line. */
void cli_progress_end(struct cli_progress *progress, bool success, uint64_t total);

#endif
