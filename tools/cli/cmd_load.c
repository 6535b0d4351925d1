/*
 * cmd_load — `graphfs load STORE FILE [--branch B] [-m MSG]`: publishes a
 * dump (graphfs dump, or any file of the same JSON lines) as one commit, each
 * table it names overwritten (see store_load in core/store.h); or replays a
 * `dump --all` stream, commit by commit, into a new store.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

static const char usage[] =
	"usage: graphfs load STORE FILE [--branch B] [-m MSG]\n"
	"       [--if-version V] [--if-commit ULID]\n"
	"\n"
	"Publishes FILE ('-': standard input), JSON lines as 'graphfs dump' writes\n"
	"them, as ONE commit: every table it names is overwritten with its rows.\n"
	"Schema lines are optional: node schemas are inferred from the rows, and an\n"
	"edge table's node tables when there is only one it can join. Edges may come\n"
	"before their nodes. Any bad line refuses the load, naming its line: nothing\n"
	"is published.\n"
	"\n"
	"A stream of 'graphfs dump --all' (its first line says so) is replayed\n"
	"instead, into a new store (graphfs init): every commit with its branch,\n"
	"parents, time, actor and message, then the branches and tags. A commit whose\n"
	"id changes (versions reclaimed before the dump renumber what follows) is\n"
	"printed as 'renamed OLD NEW'. --branch, -m and the conditions do not apply.\n"
	"\n"
	"  --branch B         commit on branch B (default main)\n"
	"  -m, --message MSG  the commit message\n"
	"  --if-version V     publish only if the store is still at version V\n"
	"  --if-commit ULID   publish only if the branch's head is still commit ULID\n";

static void print_mapping(const char *from, const char *to, void *context)
{
	(void)context;
	printf("renamed %s %s\n", from, to);
}

int cmd_load(int argc, char **argv)
{
	const char *branch = "main";
	const char *message = NULL, *if_version = NULL, *if_commit = NULL;
	const struct cli_option options[] = {
		{ "branch", 0, &branch, NULL },
		{ "message", 'm', &message, NULL },
		{ "if-version", 0, &if_version, NULL },
		{ "if-commit", 0, &if_commit, NULL },
	};
	const struct cli_syntax syntax = { usage, options, sizeof options / sizeof options[0], 2, 2 };
	char **arguments;
	int status = cli_parse(argc, argv, &syntax, &arguments, NULL);
	if (status >= 0)
		return status;
	struct store_condition condition;
	if ((status = cli_condition_parse(argv[0], if_version, if_commit, &condition)) != 0)
		return status;
	const char *path = arguments[0];
	const char *file = arguments[1];
	struct stat file_status = { 0 };
	bool from_stdin = strcmp(file, "-") == 0;
	if (!from_stdin && stat(file, &file_status) != 0)
		return cli_fail("cannot read %s: %s", file, strerror(errno));
	if (S_ISDIR(file_status.st_mode))
		return cli_fail("cannot read %s: it is a directory", file);
	struct store *store;
	if ((status = cli_store_open(path, false, &store)) != 0)
		return status;
	struct cli_progress progress;
	uint64_t total = S_ISREG(file_status.st_mode) ? (uint64_t)file_status.st_size : 0;
	cli_progress_begin(&progress, "load", total);
	struct store_commit_result result;
	struct error_info error;
	error_info_clear(&error);
	struct store_load_replay replay = { .mapped = print_mapping };
	int rc = store_load(store, branch, file, message, &condition, cli_progress_update, &progress, &replay, &result,
			    &error);
	cli_progress_end(&progress, rc == 0, total);
	if (replay.all) {
		if (rc < 0)
			status = cli_fail_error(rc, &error, "cannot load %s", file);
		else
			printf("loaded %s: replayed %llu commits\n", from_stdin ? "standard input" : file,
			       (unsigned long long)replay.commits);
	} else if (rc < 0) {
		if (error.message[0] == '\0' && rc == -ENOENT)
			status = cli_fail("cannot load %s: there is no branch '%s'", file, branch);
		else
			status = cli_fail_error(rc, &error, "cannot load %s", file);
	} else {
		printf("loaded %s: committed version %llu (commit %s) on %s\n", from_stdin ? "standard input" : file,
		       (unsigned long long)result.version, result.commit, branch);
	}
	store_close(store);
	return status;
}
