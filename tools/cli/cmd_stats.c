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

/* Prints the statistics of the store at path; the exit status. */
static int print_stats(struct store *store, const char *path)
{
	int status = CLI_EXIT_OK;
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
	return status;
}

int cmd_stats(int argc, char **argv)
{
	return cli_run_on_store(argc, argv, usage, true, print_stats);
}
