/*
 * cmd_dump — `graphfs dump STORE [--branch B] [--at V]`: the whole graph of a
 * branch as NDJSON on stdout (schemas, then node rows, then edge rows; see
 * store_dump in core/store.h). `graphfs load` reads it back.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
	"usage: graphfs dump STORE [--branch B] [--at V]\n"
	"       graphfs dump STORE --all\n"
	"\n"
	"Writes the whole graph to standard output as JSON lines: one\n"
	"{\"schema\":NAME,\"data\":SCHEMA} line per table (node tables first), then every\n"
	"row: {\"type\":NODE,\"data\":ROW} and {\"edge\":EDGE,\"from\":…,\"to\":…,\"data\":{…}}.\n"
	"'graphfs init' and 'graphfs load' make a store with exactly these tables again\n"
	"(also the way to move a store to another graphfs format).\n"
	"\n"
	"  --branch B   dump branch B (default main)\n"
	"  --at V       dump the branch as of version V\n"
	"  --all        every retained commit instead (branch, parents, time, actor,\n"
	"               message and what it changed), then the branches and tags:\n"
	"               'graphfs load' of it into a new store keeps the history\n"
	"               (the way to move a store to another graphfs format)\n";

int cmd_dump(int argc, char **argv)
{
	const char *branch = "main", *at = NULL;
	bool all = false;
	const struct cli_option options[] = {
		{ "branch", 0, &branch, NULL },
		{ "at", 0, &at, NULL },
		{ "all", 0, NULL, &all },
	};
	const struct cli_syntax syntax = { usage, options, sizeof options / sizeof options[0], 1, 1 };
	char **arguments;
	int status = cli_parse(argc, argv, &syntax, &arguments, NULL);
	if (status >= 0)
		return status;
	if (all && (at || strcmp(branch, "main") != 0))
		return cli_usage_error(argv[0], "--all dumps every branch at every retained version: it takes no --branch or --at");
	struct store *store;
	if ((status = cli_store_open(arguments[0], true, &store)) != 0)
		return status;
	uint64_t version = STORE_LATEST;
	if (!all && (status = cli_resolve_at(argv[0], store, at, &branch, &version)) != 0) {
		store_close(store);
		return status;
	}
	struct error_info error;
	error_info_clear(&error);
	fflush(stdout);
	struct cli_progress progress;
	cli_progress_begin(&progress, all ? "dump --all" : "dump", 0);
	int rc = all ? store_dump_all(store, 1, cli_progress_update, &progress, &error)
		     : store_dump(store, branch, version, 1, cli_progress_update, &progress, &error);
	cli_progress_end(&progress, rc == 0, 0);
	status = CLI_EXIT_OK;
	if (rc < 0)
		status = all ? cli_fail_error(rc, &error, "cannot dump the store")
			     : cli_fail_error(rc, &error, "cannot dump branch '%s'", branch);
	store_close(store);
	return status;
}
