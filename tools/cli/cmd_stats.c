/*
 * cmd_stats — `graphfs stats STORE`: the store's statistics and this
 * process's I/O counters as one JSON object (manifest.{reads,bytes,pages,
 * rows_decoded}, data.{...}, store.{version,...}).
 */
#include <stdio.h>

#include "cli.h"

static const char usage[] =
	"usage: graphfs stats STORE\n"
	"\n"
	"Prints one JSON object: the store's figures (store.version, ...) and the I/O\n"
	"counters of opening it (manifest.{reads,bytes,pages,rows_decoded}, data.{...}).\n";

int cmd_stats(int argc, char **argv)
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
	if ((status = cli_store_open(path, true, &store)) != 0)
		return status;
	struct buf json;
	buf_init(&json);
	int rc = store_stats_json(store, &json);
	if (rc < 0) {
		status = cli_fail_error(rc, NULL, "cannot read the statistics of %s", path);
	} else {
		fwrite(json.data, 1, json.size, stdout);
		if (json.size == 0 || json.data[json.size - 1] != '\n')
			putchar('\n');
	}
	buf_free(&json);
	store_close(store);
	return status;
}
