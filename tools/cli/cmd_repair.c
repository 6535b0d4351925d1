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

/* Repairs the store at path; the exit status. */
static int repair(struct store *store, const char *path)
{
	int repaired = 0;
	struct error_info error;
	error_info_clear(&error);
	int rc = store_repair(store, &repaired, &error);
	if (rc < 0)
		return cli_fail_error(rc, &error, "cannot repair %s", path);
	if (repaired == 0)
		printf("%s: every branch's heads already agree with its journal; nothing to repair\n", path);
	else
		printf("%s: repaired %d branch%s (see 'graphfs log')\n", path, repaired,
		       repaired == 1 ? "" : "es");
	return CLI_EXIT_OK;
}

int cmd_repair(int argc, char **argv)
{
	return cli_run_on_store(argc, argv, usage, false, repair);
}
