/*
 * cmd_export — `graphfs export STORE TABLE [--branch B] [--at V]`: writes the
 * exact bytes of tables/TABLE.jsonl (canonical rows, one per line) of a
 * branch, as of its newest version or of version V, to stdout.
 */
#include <errno.h>
#include <stdio.h>

#include "cli.h"

static const char usage[] =
	"usage: graphfs export STORE TABLE [--branch B] [--at V]\n"
	"\n"
	"Writes TABLE's rows to standard output: the same bytes as tables/TABLE.jsonl\n"
	"of a mount (canonical JSON, one row per line, in insertion order).\n"
	"\n"
	"  --branch B   read branch B (default main)\n"
	"  --at V       read the branch as of version V (see 'graphfs log')\n";

int cmd_export(int argc, char **argv)
{
	struct cli_reading reading;
	int status = cli_reading_open(argc, argv, usage, 2, &reading);
	if (status >= 0)
		return status;
	status = CLI_EXIT_OK;
	struct store *store = reading.store;
	const char *table = reading.arguments[1];
	const char *branch = reading.branch;
	uint64_t version = reading.version;

	struct error_info error;
	error_info_clear(&error);
	fflush(stdout);
	struct cli_progress progress;
	cli_progress_begin(&progress, "export", 0);
	int rc = store_export(store, branch, table, version, 1, cli_progress_update, &progress, &error);
	cli_progress_end(&progress, rc == 0, 0);
	if (rc < 0) {
		if (error.message[0] == '\0' && rc == -ENOENT) {
			if (version == STORE_LATEST)
				status = cli_fail("there is no table '%s' on branch '%s'", table, branch);
			else
				status = cli_fail("there is no table '%s' on branch '%s' at version %llu",
						  table, branch, (unsigned long long)version);
		} else if (version == STORE_LATEST) {
			status = cli_fail_error(rc, &error, "cannot export %s from branch '%s'", table,
						branch);
		} else {
			status = cli_fail_error(rc, &error, "cannot export %s from branch '%s' at version %llu",
						table, branch, (unsigned long long)version);
		}
	}
	store_close(store);
	return status;
}
