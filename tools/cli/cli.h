/*
 * cli — the `graphfs` command line (DESIGN §4): shared declarations.
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
int cmd_log(int argc, char **argv);
int cmd_branch(int argc, char **argv);
int cmd_heads(int argc, char **argv);
int cmd_schema(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_repair(int argc, char **argv);
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

/*
 * Parses argv (argv[0] is the command) with getopt_long: options may appear
 * anywhere, "--" ends them. "-h"/"--help" prints usage on stdout. On return
 * *positional points at the arguments that are not options and
 * *positional_count says how many there are.
 * Returns -1 to continue, or an exit status the command must return now
 * (CLI_EXIT_OK after --help, CLI_EXIT_USAGE after a usage error).
 */
int cli_parse(int argc, char **argv, const char *usage, const struct cli_option *options,
	      size_t option_count, char ***positional, int *positional_count);

/* Checks the positional count is within [minimum, maximum]; 0 or CLI_EXIT_USAGE. */
int cli_expect_arguments(const char *command, int count, int minimum, int maximum);

/* Parses a version ("12" or "@12"); 0 or CLI_EXIT_USAGE after printing the error. */
int cli_parse_version(const char *command, const char *text, uint64_t *out);

/* ---- the store ---------------------------------------------------------------------- */

/* Opens the store at path; on failure prints one line and returns CLI_EXIT_FAILURE. */
int cli_store_open(const char *path, bool read_only, struct store **out);

/* Pins branch at version (STORE_LATEST: newest); prints one line on failure. */
int cli_snapshot_open(struct store *store, const char *branch, uint64_t version,
		      struct store_snapshot **out);

/* ---- output -------------------------------------------------------------------------- */

/* Writes all bytes to fd (retrying short writes); 0 or -errno. */
int cli_write_all(int fd, const void *bytes, size_t size);

/* Flushes stdout; on a write error prints it and returns CLI_EXIT_FAILURE, else status. */
int cli_finish_stdout(int status);

/* ---- progress bar ----------------------------------------------------------------------- */

struct cli_progress {
	bool enabled;            /* stderr is a terminal */
	const char *label;
	uint64_t last_draw_us;
	bool drawn;
};

/* Enables the bar if stderr is a terminal and draws it at 0 of total (0: unknown). */
void cli_progress_begin(struct cli_progress *progress, const char *label, uint64_t total);
/* A store_progress_fn: redraws at most ten times a second. context is the cli_progress. */
void cli_progress_update(uint64_t done, uint64_t total, void *context);
/* Draws the final state (when success) and ends the line. */
void cli_progress_end(struct cli_progress *progress, bool success, uint64_t total);

#endif
