/*
 * cmd_dump — `graphfs dump STORE [--branch B] [--at V]`: the whole graph of a
 * branch as NDJSON on stdout (schemas, then node rows, then edge rows; see
 * store_dump in core/store.h). `graphfs load` reads it back.
 */
#include <errno.h>
#include <stdio.h>

#include "cli.h"

static const char usage[] =
	"usage: graphfs dump STORE [--branch B] [--at V]\n"
	"\n"
	"Writes the whole graph to standard output as JSON lines: one\n"
	"{\"schema\":NAME,\"data\":SCHEMA} line per table (node tables first), then every\n"
	"row: {\"type\":NODE,\"data\":ROW} and {\"edge\":EDGE,\"from\":…,\"to\":…,\"data\":{…}}.\n"
	"'graphfs init' and 'graphfs load' make a store with exactly these tables again\n"
	"(also the way to move a store to another graphfs format).\n"
	"\n"
	"  --branch B   dump branch B (default main)\n"
	"  --at V       dump the branch as of version V\n";

int cmd_dump(int argc, char **argv)
{
	struct cli_reading reading;
	int status = cli_reading_open(argc, argv, usage, 1, &reading);
	if (status >= 0)
		return status;
	struct error_info error;
	error_info_clear(&error);
	fflush(stdout);
	struct cli_progress progress;
	cli_progress_begin(&progress, "dump", 0);
	int rc = store_dump(reading.store, reading.branch, reading.version, 1, cli_progress_update, &progress, &error);
	cli_progress_end(&progress, rc == 0, 0);
	status = CLI_EXIT_OK;
	if (rc < 0)
		status = cli_fail_error(rc, &error, "cannot dump branch '%s'", reading.branch);
	store_close(reading.store);
	return status;
}
