/*
 * cmd_heads — `graphfs heads STORE [--branch B] [--at V]`: the head row of
 * every live table of branch B (default main), newest version or as of V, in
 * name order, one JSON object per line — each line the same JSON as the
 * mounted heads/<Name>.json.
 */
#include <errno.h>
#include <stdio.h>

#include "cli.h"

static const char usage[] =
	"usage: graphfs heads STORE [--branch B] [--at V]\n"
	"\n"
	"Prints the head row of every live table, in name order, one JSON object per\n"
	"line (the same JSON as heads/<Name>.json of a mount): state, stable_table_id,\n"
	"incarnation_id, table_key, table_version, table_branch, row_count,\n"
	"schema_hash, head_graph_commit_id.\n"
	"\n"
	"  --branch B   the branch (default main)\n"
	"  --at V       as of version V\n";

struct heads_context {
	struct buf line;
	int rc;
};

static int print_head(const struct head_row *head, void *context_pointer)
{
	struct heads_context *context = context_pointer;
	buf_reset(&context->line);
	int rc = head_row_render_json(head, &context->line);
	if (rc == 0 && fwrite(context->line.data, 1, context->line.size, stdout) != context->line.size)
		rc = -EIO;
	context->rc = rc;
	return rc;
}

int cmd_heads(int argc, char **argv)
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
	if ((status = cli_expect_arguments(argv[0], count, 1, 1)) != 0)
		return status;
	uint64_t version = STORE_LATEST;
	if (at && (status = cli_parse_version(argv[0], at, &version)) != 0)
		return status;

	struct store *store;
	if ((status = cli_store_open(arguments[0], true, &store)) != 0)
		return status;
	struct store_snapshot *snapshot;
	if ((status = cli_snapshot_open(store, branch, version, &snapshot)) == 0) {
		struct heads_context context = { .rc = 0 };
		buf_init(&context.line);
		int rc = store_snapshot_heads(snapshot, false, print_head, &context);
		if (rc == 0 && context.rc < 0)
			rc = context.rc;
		if (rc < 0)
			status = cli_fail_error(rc, NULL, "cannot read the heads of branch '%s'", branch);
		buf_free(&context.line);
		store_snapshot_release(snapshot);
	}
	store_close(store);
	return status;
}
