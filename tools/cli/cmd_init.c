/*
 * cmd_init — `graphfs init STORE`: creates an empty store (branch main, no
 * tables, version 0). Refuses a directory that is not empty, so it never
 * overwrites an existing store.
 */
#include <errno.h>
#include <stdio.h>

#include "cli.h"

static const char usage[] =
	"usage: graphfs init STORE\n"
	"\n"
	"Creates an empty store in the directory STORE (created if missing; it must\n"
	"be empty otherwise). The store starts with the branch main and no tables.\n";

int cmd_init(int argc, char **argv)
{
	static const struct cli_syntax syntax = { usage, NULL, 0, 1, 1 };
	char **arguments;
	int status = cli_parse(argc, argv, &syntax, &arguments, NULL);
	if (status >= 0)
		return status;

	const char *path = arguments[0];
	struct error_info error;
	error_info_clear(&error);
	int rc = store_init(path, &error);
	if (rc == -EEXIST && error.message[0] == '\0')
		return cli_fail("%s is not empty: a store is created in a new or empty directory", path);
	if (rc < 0)
		return cli_fail_error(rc, &error, "cannot create a store in %s", path);
	printf("created an empty store in %s (branch main)\n", path);
	return CLI_EXIT_OK;
}
