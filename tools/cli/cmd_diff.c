/*
 * cmd_diff — `graphfs diff STORE A B [TABLE] [--branch BR] [--tables]`: what
 * changed from A to B as JSON lines (the lines of the mount's
 * diff/<A>..<B>/, docs/MOUNT.md "Diffs"). A and B are each a branch, @V, a
 * time or a tag (@V and times on --branch).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
	"usage: graphfs diff STORE A B [TABLE] [--branch BR] [--tables]\n"
	"\n"
	"Prints what changed from A to B as JSON lines, in id order:\n"
	"  {\"op\":\"insert\"|\"update\"|\"delete\",\"id\":…,\"before\":ROW|null,\"after\":ROW|null}\n"
	"for the rows of TABLE, or, without TABLE, one {\"table\":NAME} line before the\n"
	"rows of each table that differs. --tables prints the table changes instead:\n"
	"  {\"op\":\"create\"|\"drop\"|\"rename\"|\"schema\",\"table\":…}\n"
	"A and B are each a branch name (its head), @VERSION, an RFC 3339 time or\n"
	"date, or a tag. Only what changed is read: O(changed rows × log rows).\n"
	"\n"
	"  --branch BR   the branch @VERSION and times refer to (default main)\n"
	"  --tables      the table changes (.tables.jsonl on the mount)\n";

static int print_line(const char *line, size_t size, void *context)
{
	(void)context;
	return fwrite(line, 1, size, stdout) == size ? 0 : -EIO;
}

struct all_tables {
	struct store_snapshot *a, *b;
	int rc;
};

static int print_table(const char *table, void *context)
{
	struct all_tables *all = context;
	printf("{\"table\":\"%s\"}\n", table);   /* table names need no escaping */
	all->rc = store_diff_rows(all->a, all->b, table, print_line, NULL);
	return all->rc < 0 ? all->rc : 0;
}

int cmd_diff(int argc, char **argv)
{
	const char *branch = "main";
	bool tables = false;
	const struct cli_option options[] = {
		{ "branch", 0, &branch, NULL },
		{ "tables", 0, NULL, &tables },
	};
	const struct cli_syntax syntax = { usage, options, sizeof options / sizeof options[0], 3, 4 };
	char **arguments;
	int count = 0;
	int status = cli_parse(argc, argv, &syntax, &arguments, &count);
	if (status >= 0)
		return status;
	if (tables && count == 4)
		return cli_usage_error("diff", "--tables lists table changes: give no TABLE");
	struct store *store;
	if ((status = cli_store_open(arguments[0], true, &store)) != 0)
		return status;
	struct store_snapshot *a = NULL, *b = NULL;
	struct error_info error;
	int rc = store_snapshot_open_named(store, branch, arguments[1], &a, &error);
	if (rc < 0) {
		status = cli_fail_error(rc, &error, "cannot read %s", arguments[1]);
		goto out;
	}
	if ((rc = store_snapshot_open_named(store, branch, arguments[2], &b, &error)) < 0) {
		status = cli_fail_error(rc, &error, "cannot read %s", arguments[2]);
		goto out;
	}
	if (tables) {
		rc = store_diff_tables(a, b, print_line, NULL);
	} else if (count == 4) {
		rc = store_diff_rows(a, b, arguments[3], print_line, NULL);
		if (rc == -ENOENT) {
			status = cli_fail("no table %s in %s or %s", arguments[3], arguments[1], arguments[2]);
			goto out;
		}
	} else {
		struct all_tables all = { a, b, 0 };
		rc = store_diff_names(a, b, print_table, &all);
	}
	if (rc < 0)
		status = cli_fail("cannot diff %s and %s: %s", arguments[1], arguments[2], strerror(-rc));
out:
	if (a)
		store_snapshot_release(a);
	if (b)
		store_snapshot_release(b);
	store_close(store);
	return status;
}
