/*
 * cmd_snapshot — `graphfs snapshot STORE DIR` and `graphfs restore STORE DIR
 * --confirm`: a self-contained copy of the whole store as of one instant, and
 * making a store's branches and tags those of such a copy again (as new
 * commits). See core/store_backup.c.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char snapshot_usage[] =
	"usage: graphfs snapshot STORE DIR\n"
	"\n"
	"Copies the whole store (every branch, all history, tags) as of one instant into\n"
	"the new directory DIR, while writers go on. Files that never change are hard-linked\n"
	"when DIR is on the same file system, copied otherwise. DIR is a store: every read\n"
	"command and 'graphfs mount -o ro' open it, and it stays as it is while STORE moves\n"
	"on. Bring it back with 'graphfs restore STORE DIR --confirm'.\n";

static const char restore_usage[] =
	"usage: graphfs restore STORE DIR --confirm [--if-version V]\n"
	"\n"
	"Makes STORE's branches and tags those of DIR, a snapshot of STORE, as new commits\n"
	"(one per branch that differs; versions continue upward and history is kept).\n"
	"Branches and tags DIR lacks are deleted, missing ones created. --confirm is\n"
	"required: the current state of every branch is replaced. --if-version V: only if\n"
	"the store is still at version V when the restore starts.\n";

static void report_line(const char *line, void *context)
{
	(void)context;
	printf("%s\n", line);
}

int cmd_snapshot(int argc, char **argv)
{
	const struct cli_syntax syntax = { snapshot_usage, NULL, 0, 2, 2 };
	char **arguments;
	struct store *store;
	int status = cli_parse_and_open(argc, argv, &syntax, true, &arguments, &store);
	if (status >= 0)
		return status;
	status = CLI_EXIT_OK;
	struct cli_progress progress;
	cli_progress_begin(&progress, "snapshot", 0);
	struct store_copy_result result;
	struct error_info error;
	int rc = store_snapshot_copy(store, arguments[1], cli_progress_update, &progress, &result, &error);
	cli_progress_end(&progress, rc == 0, 0);
	if (rc < 0)
		status = cli_fail_error(rc, &error, "cannot snapshot %s into %s", arguments[0], arguments[1]);
	else
		printf("snapshot of version %llu in %s: manifest %llu bytes copied, %llu segment%s linked (%llu bytes), %llu copied (%llu bytes)\n",
		       (unsigned long long)result.version, arguments[1], (unsigned long long)result.manifest_bytes,
		       (unsigned long long)result.segments_linked, result.segments_linked == 1 ? "" : "s",
		       (unsigned long long)result.bytes_linked, (unsigned long long)result.segments_copied,
		       (unsigned long long)result.bytes_copied);
	store_close(store);
	return status;
}

int cmd_restore(int argc, char **argv)
{
	bool confirm = false;
	const char *if_version = NULL;
	const struct cli_option options[] = {
		{ "confirm", 0, NULL, &confirm },
		{ "if-version", 0, &if_version, NULL },
	};
	const struct cli_syntax syntax = { restore_usage, options, sizeof options / sizeof options[0], 2, 2 };
	char **arguments;
	int status = cli_parse(argc, argv, &syntax, &arguments, NULL);
	if (status >= 0)
		return status;
	struct store_condition condition;
	if ((status = cli_condition_parse(argv[0], if_version, NULL, &condition)) != 0)
		return status;
	if (!confirm)
		return cli_usage_error(argv[0], "restore replaces the state of every branch of %s: add --confirm",
				       arguments[0]);
	struct store *store;
	if ((status = cli_store_open(arguments[0], false, &store)) != 0)
		return status;
	struct error_info error;
	int rc = store_restore(store, arguments[1], &condition, report_line, NULL, &error);
	if (rc < 0)
		status = cli_fail_error(rc, &error, "cannot restore %s from %s", arguments[0], arguments[1]);
	else
		printf("restored %s from %s (now at version %llu)\n", arguments[0], arguments[1],
		       (unsigned long long)store_version(store));
	store_close(store);
	return status;
}
