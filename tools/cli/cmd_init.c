/*
 * cmd_init — `graphfs init STORE [--format N]`: creates an empty store (branch
 * main, no tables, version 0). Refuses a directory that is not empty, so it
 * never overwrites an existing store.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

static const char usage[] =
	"usage: graphfs init STORE [--format N]\n"
	"\n"
	"Creates an empty store in the directory STORE (created if missing; it must\n"
	"be empty otherwise). The store starts with the branch main and no tables.\n"
	"\n"
	"  --format N  the store format (docs/FORMAT.md §2): the newest by default;\n"
	"              6 makes a store that a graphfs of format 6 can still open\n"
	"              (its log lines cannot say \"based_on\").\n";

int cmd_init(int argc, char **argv)
{
	const char *format_text = NULL;
	const struct cli_option options[] = { { "format", 0, &format_text, NULL } };
	const struct cli_syntax syntax = { usage, options, sizeof options / sizeof options[0], 1, 1 };
	char **arguments;
	int status = cli_parse(argc, argv, &syntax, &arguments, NULL);
	if (status >= 0)
		return status;
	uint32_t format = STORE_FORMAT_VERSION;
	if (format_text) {
		char *end;
		unsigned long value = strtoul(format_text, &end, 10);
		if (*format_text < '0' || *format_text > '9' || *end || value < STORE_FORMAT_OLDEST ||
		    value > STORE_FORMAT_VERSION)
			return cli_usage_error("init", "--format takes %d to %d, not %s", STORE_FORMAT_OLDEST,
					       STORE_FORMAT_VERSION, format_text);
		format = (uint32_t)value;
	}

	const char *path = arguments[0];
	struct error_info error;
	error_info_clear(&error);
	int rc = store_init_format(path, format, &error);
	if (rc == -EEXIST && error.message[0] == '\0')
		return cli_fail("%s is not empty: a store is created in a new or empty directory", path);
	if (rc < 0)
		return cli_fail_error(rc, &error, "cannot create a store in %s", path);
	if (format == STORE_FORMAT_VERSION)
		printf("created an empty store in %s (branch main)\n", path);
	else
		printf("created an empty store of format %u in %s (branch main)\n", format, path);
	return CLI_EXIT_OK;
}
