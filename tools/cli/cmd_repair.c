/*
 * cmd_repair — `graphfs repair STORE [--rollback]`: rebuilds every branch's
 * heads from a replay of its journal and publishes the branches that
 * differed, one audited commit each (actor "graphfs:repair"); with
 * --rollback, takes a store whose newest root is damaged back to its newest
 * intact root, printing the commits that drops.
 */
#include <errno.h>
#include <stdio.h>

#include "cli.h"

static const char usage[] =
	"usage: graphfs repair STORE [--rollback]\n"
	"\n"
	"Rebuilds every branch's heads from a replay of its journal and publishes\n"
	"each branch that differed as one audited commit (actor graphfs:repair).\n"
	"Run 'graphfs verify STORE' first to see what is wrong.\n"
	"\n"
	"  --rollback   when the store's newest state is damaged (no command opens\n"
	"               it): go back to its newest intact state. Prints each commit\n"
	"               that drops (their log lines, as far as they can be read),\n"
	"               then commits a note of the rollback on main. Local stores only.\n";

static int print_dropped(const struct commit_record *record, void *context)
{
	struct buf *line = context;
	buf_reset(line);
	int rc = journal_commit_record_render_json(record, line);
	if (rc == 0) {
		fputs("dropped: ", stdout);
		fwrite(line->data, 1, line->size, stdout);
		fflush(stdout);   /* before anything is cut: the record of the loss comes first */
	}
	return rc;
}

static int rollback(const char *path)
{
	struct error_info error;
	error_info_clear(&error);
	struct store_rollback_result result;
	struct buf line;
	buf_init(&line);
	int rc = store_rollback(path, print_dropped, &line, &result, &error);
	buf_free(&line);
	if (rc == -EINVAL)
		return cli_fail("%s", error.message);
	if (rc < 0)
		return cli_fail_error(rc, &error, "cannot roll %s back", path);
	printf("%s: rolled back to version %llu: %llu commit%s dropped, %llu bytes cut; the rollback is "
	       "commit version %llu on main\n", path, (unsigned long long)result.version,
	       (unsigned long long)result.commits_dropped, result.commits_dropped == 1 ? "" : "s",
	       (unsigned long long)result.bytes_dropped, (unsigned long long)result.audit_version);
	return CLI_EXIT_OK;
}

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
	bool roll_back = false;
	const struct cli_option options[] = { { "rollback", 0, NULL, &roll_back } };
	const struct cli_syntax syntax = { usage, options, 1, 1, 1 };
	char **arguments;
	int count;
	int status = cli_parse(argc, argv, &syntax, &arguments, &count);
	if (status >= 0)
		return status;
	if (roll_back)
		return rollback(arguments[0]);
	struct store *store;
	if ((status = cli_store_open(arguments[0], false, &store)) != 0)
		return status;
	status = repair(store, arguments[0]);
	store_close(store);
	return status;
}
