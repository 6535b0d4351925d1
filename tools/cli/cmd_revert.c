/*
 * cmd_revert — `graphfs revert STORE VERSION [--branch B] [-m MSG]
 * [--if-version V] [--if-commit ULID]`: one new commit whose tables and schemas
 * are exactly those of branch B as of VERSION (a version, time, date or tag).
 * Nothing is rewritten: the revert is a commit like any other.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
	"usage: graphfs revert STORE VERSION [--branch B] [-m MSG] [--if-version V] [--if-commit ULID]\n"
	"\n"
	"Publishes one commit that makes branch B's tables and schemas (drops and renames\n"
	"included) exactly what they were as of VERSION: a version, an RFC 3339 time, a\n"
	"date or a tag. History is kept; a table dropped since comes back as a new\n"
	"incarnation.\n"
	"\n"
	"  --branch B         the branch to revert (default main)\n"
	"  -m, --message MSG  the commit message (default \"revert to version V\")\n"
	"  --if-version V     publish only if the store is still at version V\n"
	"  --if-commit ULID   publish only if the branch's head is still commit ULID\n";

int cmd_revert(int argc, char **argv)
{
	const char *branch = "main", *message = NULL, *if_version = NULL, *if_commit = NULL;
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
	struct store *store;
	if ((status = cli_store_open(arguments[0], false, &store)) != 0)
		return status;
	const char *target_branch = branch;
	uint64_t version = STORE_LATEST;
	if ((status = cli_resolve_at(argv[0], store, arguments[1], &target_branch, &version)) == 0) {
		if (strcmp(target_branch, branch) != 0) {
			status = cli_fail("%s is a tag of branch '%s': revert it with --branch %s, or give a version",
					  arguments[1], target_branch, target_branch);
		} else {
			struct store_commit_result result;
			struct error_info error;
			int rc = store_revert(store, branch, version, message, &condition, &result, &error);
			if (rc == -ENODATA)
				printf("%s\n", error.message);
			else if (rc < 0)
				status = cli_fail_error(rc, &error, "cannot revert branch '%s'", branch);
			else
				printf("reverted %s to version %llu: committed version %llu (commit %s)\n", branch,
				       (unsigned long long)version, (unsigned long long)result.version, result.commit);
		}
	}
	store_close(store);
	return status;
}
