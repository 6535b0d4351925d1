/*
 * cmd_debug — tools for tests, not for everyday use:
 *   graphfs debug failpoints              the failpoint registry, one name per line
 *   graphfs debug stamp-format STORE N    rewrites the store's format version to N
 *                                         (to test that other formats are refused)
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
	"usage: graphfs debug failpoints\n"
	"       graphfs debug stamp-format STORE N\n"
	"\n"
	"Tools for tests.\n"
	"failpoints     lists every failpoint compiled in, one per line; arm one with\n"
	"               GRAPHFS_FAILPOINT=<name>[=crash|error][@N] in the environment (@N: at its Nth hit)\n"
	"stamp-format   rewrites the format version recorded in STORE's manifest header\n"
	"               to N, so that tests can check stores of other formats are refused\n";

static int list_failpoints(void)
{
	for (const char *const *name = store_failpoint_names(); *name; name++)
		printf("%s\n", *name);
	return CLI_EXIT_OK;
}

static int stamp_format(const char *command, const char *path, const char *number)
{
	char *end = NULL;
	errno = 0;
	unsigned long value = strtoul(number, &end, 10);
	if (number[0] < '0' || number[0] > '9' || *end != '\0' || errno != 0 || value > UINT32_MAX)
		return cli_usage_error(command, "'%s' is not a format version", number);
	struct error_info error;
	error_info_clear(&error);
	int rc = store_stamp_format(path, (uint32_t)value, &error);
	if (rc < 0)
		return cli_fail_error(rc, &error, "cannot stamp %s", path);
	printf("%s: stamped store format %lu\n", path, value);
	return CLI_EXIT_OK;
}

int cmd_debug(int argc, char **argv)
{
	static const struct cli_syntax syntax = { usage, NULL, 0, 0, INT_MAX };
	char **arguments;
	int count;
	int status = cli_parse(argc, argv, &syntax, &arguments, &count);
	if (status >= 0)
		return status;
	if (count == 0)
		return cli_usage_error(argv[0], "missing the tool (failpoints or stamp-format)");
	if (strcmp(arguments[0], "failpoints") == 0) {
		if ((status = cli_expect_arguments(argv[0], count, 1, 1)) != 0)
			return status;
		return list_failpoints();
	}
	if (strcmp(arguments[0], "stamp-format") == 0) {
		if ((status = cli_expect_arguments(argv[0], count, 3, 3)) != 0)
			return status;
		return stamp_format(argv[0], arguments[1], arguments[2]);
	}
	return cli_usage_error(argv[0], "unknown tool '%s' (failpoints or stamp-format)", arguments[0]);
}
