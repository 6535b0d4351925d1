/*
 * cmd_config — `graphfs config STORE [KEY [VALUE] | KEY --unset]`: the
 * store's settings (core/store_config.c), printed as JSON.
 */
#include <errno.h>
#include <stdio.h>

#include "cli.h"

static const char usage[] =
	"usage: graphfs config STORE [KEY [VALUE]]\n"
	"       graphfs config STORE KEY --unset\n"
	"\n"
	"The store's settings, kept in the store: without KEY every setting as one\n"
	"JSON object (null where unset); with KEY its value; with VALUE it is set.\n"
	"\n"
	"  retention.keep-versions N     gc by itself keeps the newest N versions\n"
	"  retention.keep-since D        gc by itself keeps every version committed\n"
	"                                within D (a number with s, m, h, d or w: 12h, 7d)\n"
	"  retention.auto-gc-versions N  with either rule set, gc runs by itself once N\n"
	"                                versions are reclaimable and the store grew by half\n"
	"                                of what the last gc kept (default 8; 0: never):\n"
	"                                after a writing command's commits, and on a mount\n"
	"\n"
	"  --unset   remove KEY's setting\n";

int cmd_config(int argc, char **argv)
{
	bool unset = false;
	const struct cli_option options[] = { { "unset", 0, NULL, &unset } };
	const struct cli_syntax syntax = { usage, options, 1, 1, 3 };
	char **arguments;
	int count;
	int status = cli_parse(argc, argv, &syntax, &arguments, &count);
	if (status >= 0)
		return status;
	const char *key = count >= 2 ? arguments[1] : NULL;
	const char *value = count >= 3 ? arguments[2] : NULL;
	if (unset && (!key || value))
		return cli_usage_error("config", "--unset takes KEY and no VALUE");
	bool writing = value || unset;
	struct store *store;
	if ((status = cli_store_open(arguments[0], !writing, &store)) != 0)
		return status;
	struct error_info error;
	error_info_clear(&error);
	int rc;
	if (writing) {
		rc = store_config_set(store, key, unset ? NULL : value, &error);
		if (rc == -EINVAL || rc == -ENOENT)
			status = cli_fail("%s", error.message);
		else if (rc < 0)
			status = cli_fail_error(rc, &error, "cannot change the settings of %s", arguments[0]);
	}
	if (status == CLI_EXIT_OK) {
		struct buf shown;
		buf_init(&shown);
		rc = store_config_json(store, writing ? NULL : key, &shown, &error);
		if (rc == -ENOENT)
			status = cli_fail("%s", error.message);
		else if (rc < 0)
			status = cli_fail_error(rc, &error, "cannot read the settings of %s", arguments[0]);
		else
			fwrite(shown.data, 1, shown.size, stdout);
		buf_free(&shown);
	}
	store_close(store);
	return status;
}
