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
	const char *branch = "main";
	const char *at = NULL;
	const struct cli_option options[] = {
		{ "branch", 0, &branch, NULL },
		{ "at", 0, &at, NULL },
	};
	char **arguments;
	int count;
	int status = cli_parse(argc, argv, usage, options, 2, &arguments, &count);
	if (status >= 0)
		return status;
	if ((status = cli_expect_arguments(argv[0], count, 2, 2)) != 0)
		return status;
	uint64_t version = STORE_LATEST;
	if (at && (status = cli_parse_version(argv[0], at, &version)) != 0)
		return status;

	const char *path = arguments[0];
	const char *table = arguments[1];
	struct store *store;
	if ((status = cli_store_open(path, true, &store)) != 0)
		return status;

	struct error_info error;
	error_info_clear(&error);
	fflush(stdout);
	int rc = store_export(store, branch, table, version, 1, &error);
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
