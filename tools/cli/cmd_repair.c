/*
 * cmd_repair — `graphfs repair STORE`: rebuilds every branch's heads from a
 * replay of its journal and publishes the branches that differed, one
 * audited commit each (actor "graphfs:repair").
 */
#include <stdio.h>

#include "cli.h"

static const char usage[] =
	"usage: graphfs repair STORE\n"
	"\n"
	"Rebuilds every branch's heads from a replay of its journal and publishes\n"
	"each branch that differed as one audited commit (actor graphfs:repair).\n"
	"Run 'graphfs verify STORE' first to see what is wrong.\n";

int cmd_repair(int argc, char **argv)
{
	char **arguments;
	int count;
	int status = cli_parse(argc, argv, usage, NULL, 0, &arguments, &count);
	if (status >= 0)
		return status;
	if ((status = cli_expect_arguments(argv[0], count, 1, 1)) != 0)
		return status;

	const char *path = arguments[0];
	struct store *store;
	if ((status = cli_store_open(path, false, &store)) != 0)
		return status;
	int repaired = 0;
	struct error_info error;
	error_info_clear(&error);
	int rc = store_repair(store, &repaired, &error);
	if (rc < 0)
		status = cli_fail_error(rc, &error, "cannot repair %s", path);
	else if (repaired == 0)
		printf("%s: every branch's heads already agree with its journal; nothing to repair\n", path);
	else
		printf("%s: repaired %d branch%s (see 'graphfs log')\n", path, repaired,
		       repaired == 1 ? "" : "es");
	store_close(store);
	return status;
}
