/*
 * main — `graphfs <command> STORE [arguments]`: dispatch, --help, --version.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

static const struct command commands[] = {
	{ "init", cmd_init, "init STORE                      create an empty store" },
	{ "mount", cmd_mount, "mount STORE MOUNTPOINT          mount the store as a directory tree" },
	{ "import", cmd_import, "import STORE TABLE FILE         publish FILE's rows into TABLE as one commit" },
	{ "export", cmd_export, "export STORE TABLE              write TABLE's rows (the bytes of tables/TABLE.jsonl)" },
	{ "dump", cmd_dump, "dump STORE                      the whole graph as JSON lines (schemas, nodes, edges)" },
	{ "load", cmd_load, "load STORE FILE                 publish a dump as one commit, its tables overwritten" },
	{ "log", cmd_log, "log STORE                       the commit log as JSON lines, newest first" },
	{ "branch", cmd_branch, "branch STORE list|create|delete list, create or delete branches" },
	{ "snapshot", cmd_snapshot, "snapshot STORE DIR              a self-contained copy of the store as of now" },
	{ "restore", cmd_restore, "restore STORE DIR --confirm     make the branches and tags those of a snapshot" },
	{ "gc", cmd_gc, "gc STORE [--keep-versions N]    reclaim old versions and the space they hold" },
	{ "optimize", cmd_optimize, "optimize STORE [TABLE]          rewrite tables into fresh fragments (same bytes)" },
	{ "revert", cmd_revert, "revert STORE VERSION            one commit back to the tables as of VERSION" },
	{ "merge", cmd_merge, "merge STORE SOURCE              three-way merge of branch SOURCE (--into DEST) as one commit" },
	{ "diff", cmd_diff, "diff STORE A B [TABLE]          rows that changed from A to B, JSON lines" },
	{ "tag", cmd_tag, "tag STORE list|create|delete     name versions with immutable tags" },
	{ "heads", cmd_heads, "heads STORE                     the head row of every live table, JSON lines" },
	{ "schema", cmd_schema, "schema STORE TABLE              show a table's schema, or set it with --set FILE" },
	{ "verify", cmd_verify, "verify STORE                    check everything; exit 1 on any finding" },
	{ "config", cmd_config, "config STORE [KEY [VALUE]]      the store's settings (the retention policy gc applies by itself)" },
	{ "repair", cmd_repair, "repair STORE                    rebuild heads from the journal (audited commit)" },
	{ "stats", cmd_stats, "stats STORE                     I/O and cache counters as JSON" },
	{ "debug", cmd_debug, "debug failpoints|stamp-format   tools for tests" },
};

#define COMMAND_COUNT (sizeof commands / sizeof commands[0])

static void print_usage(FILE *out)
{
	fputs("usage: graphfs <command> STORE [arguments]\n"
	      "       graphfs <command> --help\n"
	      "       graphfs --version\n"
	      "\n"
	      "graphfs keeps a versioned graph (typed node and edge tables, branches, full\n"
	      "history) in a store directory and mounts it as files. Commands:\n"
	      "\n",
	      out);
	for (size_t i = 0; i < COMMAND_COUNT; i++)
		fprintf(out, "  %s\n", commands[i].summary);
	fputs("\nEvery command takes the store directory first. Errors are one line on stderr\n"
	      "and a non-zero exit status (2 for usage errors).\n",
	      out);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		print_usage(stderr);
		return CLI_EXIT_USAGE;
	}
	const char *name = argv[1];
	if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
		print_usage(stdout);
		return cli_finish_stdout(CLI_EXIT_OK);
	}
	if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
		printf("graphfs %s (store format %d; opens formats %d to %d)\n", GRAPHFS_VERSION_STRING,
		       STORE_FORMAT_VERSION, STORE_FORMAT_OLDEST, STORE_FORMAT_VERSION);
		return cli_finish_stdout(CLI_EXIT_OK);
	}
	if (strcmp(name, "help") == 0 && argc >= 3) {
		/* "graphfs help CMD" is "graphfs CMD --help" */
		char help[] = "--help";
		char *help_argv[] = { argv[2], help, NULL };
		for (size_t i = 0; i < COMMAND_COUNT; i++)
			if (strcmp(commands[i].name, argv[2]) == 0)
				return cli_finish_stdout(commands[i].run(2, help_argv));
		return cli_usage_error(NULL, "unknown command '%s'", argv[2]);
	}
	if (strcmp(name, "help") == 0) {
		print_usage(stdout);
		return cli_finish_stdout(CLI_EXIT_OK);
	}
	for (size_t i = 0; i < COMMAND_COUNT; i++)
		if (strcmp(commands[i].name, name) == 0)
			return cli_finish_stdout(commands[i].run(argc - 1, argv + 1));
	if (name[0] == '-')
		return cli_usage_error(NULL, "unknown option '%s'", name);
	return cli_usage_error(NULL, "unknown command '%s'", name);
}
