/*
 * cmd_branch — `graphfs branch STORE list | create NAME [--from B | --at X] | delete NAME [--force]`.
 *
 * list prints one line per branch, in name order:
 *   NAME<TAB>head version V<TAB>commit ULID|-<TAB>forked from B at version V|-
 * create forks NAME from B's head (default main) in O(1), or makes it at a
 * retained commit (--at: a commit, a version or a tag); delete refuses main, a
 * branch another existing branch was forked from, and (without --force) a
 * branch whose head no other branch or tag holds.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
	"usage: graphfs branch STORE list\n"
	"       graphfs branch STORE create NAME [--from B | --at COMMIT|V|TAG] [--if-version V] [--if-commit ULID]\n"
	"       graphfs branch STORE delete NAME [--force] [--if-version V] [--if-commit ULID]\n"
	"\n"
	"list     one line per branch: name, head version, head commit, where it forked from\n"
	"create   a new branch NAME from the head of branch B (default main); it shares\n"
	"         B's tables until it writes them. With --at: at a retained commit (its\n"
	"         ULID, the version it made, or a tag), with that commit's history; a\n"
	"         deleted branch comes back this way until gc reclaims its commits\n"
	"delete   removes branch NAME (never main, nor a branch another branch forked\n"
	"         from); a branch whose head no other branch or tag holds only with --force\n"
	"\n"
	"--if-version V and --if-commit ULID: only if the store is still at version V and\n"
	"the branch (the source for create) is still at commit ULID.\n";

static int print_branch(const struct store_branch_info *branch, void *context)
{
	(void)context;
	printf("%s\thead version %llu\t%s\t", branch->name, (unsigned long long)branch->head_version,
	       branch->head_commit[0] ? branch->head_commit : "-");
	if (branch->forked_from[0])
		printf("forked from %s at version %llu\n", branch->forked_from,
		       (unsigned long long)branch->fork_point);
	else
		printf("-\n");
	return 0;
}

int cmd_branch(int argc, char **argv)
{
	const char *from = NULL, *at = NULL, *if_version = NULL, *if_commit = NULL;
	bool force = false;
	const struct cli_option options[] = {
		{ "from", 0, &from, NULL },
		{ "at", 0, &at, NULL },
		{ "force", 0, NULL, &force },
		{ "if-version", 0, &if_version, NULL },
		{ "if-commit", 0, &if_commit, NULL },
	};
	const struct cli_syntax syntax = { usage, options, sizeof options / sizeof options[0], 2, 3 };
	char **arguments;
	int count;
	int status = cli_parse(argc, argv, &syntax, &arguments, &count);
	if (status >= 0)
		return status;
	const char *path = arguments[0];
	const char *action = arguments[1];
	bool listing = strcmp(action, "list") == 0;
	if (!listing && strcmp(action, "create") != 0 && strcmp(action, "delete") != 0)
		return cli_usage_error(argv[0], "unknown action '%s' (list, create or delete)", action);
	if (listing && count != 2)
		return cli_usage_error(argv[0], "list takes no other argument");
	if (!listing && count != 3)
		return cli_usage_error(argv[0], "%s needs the branch NAME", action);
	if ((from || at) && strcmp(action, "create") != 0)
		return cli_usage_error(argv[0], "--from and --at apply to create only");
	if (from && at)
		return cli_usage_error(argv[0], "--from B forks from B's head, --at X from a commit: one of them");
	if (force && strcmp(action, "delete") != 0)
		return cli_usage_error(argv[0], "--force applies to delete only");
	if (listing && (if_version || if_commit))
		return cli_usage_error(argv[0], "--if-version and --if-commit apply to create and delete");
	struct store_condition condition;
	if ((status = cli_condition_parse(argv[0], if_version, if_commit, &condition)) != 0)
		return status;

	struct store *store;
	if ((status = cli_store_open(path, listing, &store)) != 0)
		return status;

	struct error_info error;
	error_info_clear(&error);
	int rc;
	if (listing) {
		rc = store_branches(store, print_branch, NULL);
		if (rc < 0)
			status = cli_fail_error(rc, NULL, "cannot list the branches of %s", path);
	} else if (strcmp(action, "create") == 0) {
		const char *source = at ? at : from ? from : "main";
		rc = at ? store_branch_create_at(store, arguments[2], at, &condition, &error)
			: store_branch_create(store, arguments[2], source, &condition, &error);
		if (rc == -EEXIST && error.message[0] == '\0')
			status = cli_fail("branch '%s' already exists", arguments[2]);
		else if (rc == -ENOENT && error.message[0] == '\0')
			status = cli_fail("cannot create branch '%s': there is no branch '%s'", arguments[2],
					  source);
		else if (rc == -EINVAL && error.message[0] == '\0')
			status = cli_fail("'%s' is not a valid branch name ([A-Za-z_][A-Za-z0-9_]{0,127})",
					  arguments[2]);
		else if (rc < 0)
			status = cli_fail_error(rc, &error, "cannot create branch '%s'", arguments[2]);
		else if (at)
			printf("created branch %s at %s\n", arguments[2], at);
		else
			printf("created branch %s from %s\n", arguments[2], source);
	} else {
		rc = store_branch_delete(store, arguments[2], NULL, force, &condition, &error);
		if (rc == -ENOENT && error.message[0] == '\0')
			status = cli_fail("there is no branch '%s'", arguments[2]);
		else if (rc == -EBUSY && error.message[0] == '\0')
			status = cli_fail("branch '%s' cannot be deleted", arguments[2]);
		else if (rc == -ENOTEMPTY && error.message[0] == '\0')
			status = cli_fail("branch '%s' cannot be deleted: another branch was forked from it "
					  "(delete that one first)", arguments[2]);
		else if (rc < 0)
			status = cli_fail_error(rc, &error, "cannot delete branch '%s'", arguments[2]);
		else
			printf("deleted branch %s\n", arguments[2]);
	}
	store_close(store);
	return status;
}
