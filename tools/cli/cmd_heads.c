/*
 * cmd_heads — `graphfs heads STORE [--branch B] [--at V]`: the head row of
 * every live table of branch B (default main), newest version or as of V, in
 * name order, one JSON object per line — each line the same JSON as the
 * mounted heads/<Name>.json.
 */

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

static int print_head(const struct head_row *head, void *context)
{
	struct cli_lines *lines = context;
	return cli_lines_write(lines, journal_head_row_render_json(head, &lines->line));
}

int cmd_heads(int argc, char **argv)
{
	struct cli_reading reading;
	int status = cli_reading_open(argc, argv, usage, 1, &reading);
	if (status >= 0)
		return status;
	struct store_snapshot *snapshot;
	status = cli_snapshot_open(reading.store, reading.branch, reading.version, &snapshot);
	if (status == 0) {
		struct cli_lines lines;
		cli_lines_init(&lines);
		int rc = store_snapshot_heads(snapshot, false, print_head, &lines);
		if ((rc = cli_lines_finish(&lines, rc)) < 0)
			status = cli_fail_error(rc, NULL, "cannot read the heads of branch '%s'",
						reading.branch);
		store_snapshot_release(snapshot);
	}
	store_close(reading.store);
	return status;
}
