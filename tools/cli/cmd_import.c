/*
 * cmd_import — `graphfs import STORE TABLE FILE [--mode overwrite|merge]
 * [--branch B] [-m MSG]`: publishes FILE's rows (JSON lines) into TABLE as one
 * commit. overwrite (the default) makes TABLE's rows exactly FILE's rows;
 * merge upserts by id and deletes rows given as {"id":"…","@delete":true}.
 * A missing table is created with a schema inferred from the rows. Any bad
 * line refuses the whole import and publishes nothing.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

static const char usage[] =
	"usage: graphfs import STORE TABLE FILE [--mode overwrite|merge] [--branch B] [-m MSG]\n"
	"       [--if-version V] [--if-commit ULID]\n"
	"\n"
	"Publishes the rows of FILE (one JSON object per line; '-' reads standard input)\n"
	"into TABLE as one commit.\n"
	"A table that does not exist is created, its schema inferred from the rows.\n"
	"\n"
	"  --mode overwrite   TABLE's rows become exactly FILE's rows (default)\n"
	"  --mode merge       upsert by id; {\"id\":\"…\",\"@delete\":true} deletes a row,\n"
	"                     {\"id\":\"…\",\"@patch\":true,\"p\":v} changes only the properties it names\n"
	"  --branch B         commit on branch B (default main)\n"
	"  -m, --message MSG  the commit message\n"
	"  --if-version V     publish only if the store is still at version V\n"
	"  --if-commit ULID   publish only if the branch's head is still commit ULID\n"
	"\n"
	"A bad line (JSON syntax, types, duplicate ids in an overwrite, an edge whose\n"
	"endpoint does not exist) refuses the import: nothing is published.\n";

int cmd_import(int argc, char **argv)
{
	const char *mode_text = "overwrite";
	const char *branch = "main";
	const char *message = NULL, *if_version = NULL, *if_commit = NULL;
	const struct cli_option options[] = {
		{ "mode", 0, &mode_text, NULL },
		{ "branch", 0, &branch, NULL },
		{ "message", 'm', &message, NULL },
		{ "if-version", 0, &if_version, NULL },
		{ "if-commit", 0, &if_commit, NULL },
	};
	const struct cli_syntax syntax = { usage, options, sizeof options / sizeof options[0], 3, 3 };
	char **arguments;
	int status = cli_parse(argc, argv, &syntax, &arguments, NULL);
	if (status >= 0)
		return status;
	struct store_condition condition;
	if ((status = cli_condition_parse(argv[0], if_version, if_commit, &condition)) != 0)
		return status;
	enum store_write_mode mode;
	if (strcmp(mode_text, "overwrite") == 0)
		mode = STORE_OVERWRITE;
	else if (strcmp(mode_text, "merge") == 0)
		mode = STORE_MERGE;
	else
		return cli_usage_error(argv[0], "--mode must be overwrite or merge, not '%s'", mode_text);

	const char *path = arguments[0];
	const char *table = arguments[1];
	const char *file = arguments[2];

	bool from_stdin = strcmp(file, "-") == 0;
	struct stat file_status = { 0 };
	if (!from_stdin && stat(file, &file_status) != 0)
		return cli_fail("cannot read %s: %s", file, strerror(errno));
	if (S_ISDIR(file_status.st_mode))
		return cli_fail("cannot read %s: it is a directory", file);

	char default_message[512];
	if (!message) {
		snprintf(default_message, sizeof default_message, "import %s (%s)",
			 from_stdin ? "from standard input" : file, mode_text);
		message = default_message;
	}

	struct store *store;
	if ((status = cli_store_open(path, false, &store)) != 0)
		return status;

	struct cli_progress progress;
	uint64_t total = S_ISREG(file_status.st_mode) ? (uint64_t)file_status.st_size : 0;
	cli_progress_begin(&progress, table, total);

	struct store_commit_result result;
	struct error_info error;
	error_info_clear(&error);
	int rc = store_import(store, branch, table, file, mode, message, &condition, cli_progress_update, &progress,
			      &result, &error);
	cli_progress_end(&progress, rc == 0, total);
	if (rc < 0) {
		if (error.message[0] == '\0' && rc == -ENOENT)
			status = cli_fail("cannot import into %s: there is no branch '%s'", table, branch);
		else
			status = cli_fail_error(rc, &error, "cannot import %s into %s", file, table);
	} else {
		printf("%s: committed version %llu (commit %s) on %s\n", table,
		       (unsigned long long)result.version, result.commit, branch);
	}
	store_close(store);
	return status;
}
