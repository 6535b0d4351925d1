/*
 * cmd_merge — `graphfs merge STORE SOURCE [--into DEST] [--strategy
 * ours|theirs] [-m MSG] [--dry-run] [--if-version V] [--if-commit ULID]`:
 * three-way merge of branch SOURCE into DEST as one commit (docs/MOUNT.md
 * "Merging"). Conflicts are printed as JSON lines on stdout, exit 1.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
	"usage: graphfs merge STORE SOURCE [--into DEST] [--strategy ours|theirs] [-m MSG]\n"
	"                     [--dry-run] [--if-version V] [--if-commit ULID]\n"
	"\n"
	"Merges branch SOURCE into DEST (default main) against their merge base, the\n"
	"newest common ancestor: row by row by id and property by property, so both\n"
	"sides' changes to different rows or properties apply. Publishes ONE commit\n"
	"(a fast-forward when DEST has not moved since the base; a merge commit with two\n"
	"parents otherwise); nothing when SOURCE has nothing new. On conflicts nothing\n"
	"is published: each is printed as a JSON line on stdout and the exit status is 1.\n"
	"Conflict kinds: divergent_insert, divergent_update, delete_update, orphan_edge,\n"
	"schema, table.\n"
	"\n"
	"  --into DEST         the branch merged into (default main)\n"
	"  --strategy S        resolve every conflict to one side: ours (DEST) or theirs\n"
	"  -m, --message MSG   the commit message (default \"merge SOURCE into DEST\")\n"
	"  --dry-run           print the outcome and the conflicts; publish nothing\n"
	"  --if-version V      publish only if the store is still at version V\n"
	"  --if-commit ULID    publish only if DEST's head is still commit ULID\n";

static void print_conflict(const char *table, const char *line, size_t size, void *context)
{
	(void)table;
	(void)context;
	fwrite(line, 1, size, stdout);
}

int cmd_merge(int argc, char **argv)
{
	const char *into = "main", *strategy = NULL, *message = NULL, *if_version = NULL, *if_commit = NULL;
	bool dry_run = false;
	const struct cli_option options[] = {
		{ "into", 0, &into, NULL },
		{ "strategy", 0, &strategy, NULL },
		{ "message", 'm', &message, NULL },
		{ "dry-run", 0, NULL, &dry_run },
		{ "if-version", 0, &if_version, NULL },
		{ "if-commit", 0, &if_commit, NULL },
	};
	const struct cli_syntax syntax = { usage, options, sizeof options / sizeof options[0], 2, 2 };
	char **arguments;
	int status = cli_parse(argc, argv, &syntax, &arguments, NULL);
	if (status >= 0)
		return status;
	struct store_merge_options merge = { .message = message, .dry_run = dry_run };
	if (strategy && strcmp(strategy, "ours") == 0)
		merge.strategy = STORE_MERGE_OURS;
	else if (strategy && strcmp(strategy, "theirs") == 0)
		merge.strategy = STORE_MERGE_THEIRS;
	else if (strategy)
		return cli_usage_error("merge", "--strategy %s: give ours or theirs", strategy);
	struct store_condition condition;
	if ((status = cli_condition_parse(argv[0], if_version, if_commit, &condition)) != 0)
		return status;
	merge.condition = &condition;
	struct store *store;
	if ((status = cli_store_open(arguments[0], dry_run, &store)) != 0)
		return status;
	struct store_merge_result result;
	struct error_info error;
	int rc = store_merge(store, arguments[1], into, &merge, print_conflict, NULL, &result, &error);
	if (rc < 0) {
		status = cli_fail_error(rc, &error, "cannot merge %s into %s", arguments[1], into);
	} else if (result.outcome == STORE_MERGE_CONFLICTS) {
		status = cli_fail("%llu conflict%s merging %s into %s: nothing was published (resolve them on one branch, "
				  "or give --strategy ours|theirs)",
				  (unsigned long long)result.conflicts, result.conflicts == 1 ? "" : "s", arguments[1], into);
	} else if (result.outcome == STORE_MERGE_UP_TO_DATE) {
		printf("%s is up to date with %s: nothing to merge\n", into, arguments[1]);
	} else if (dry_run) {
		printf("merging %s into %s would be a %s (base: version %llu)%s\n", arguments[1], into,
		       result.outcome == STORE_MERGE_FAST_FORWARD ? "fast-forward" : "merge commit",
		       (unsigned long long)result.base_version,
		       result.resolved ? ", conflicts resolved by the strategy" : "");
	} else {
		printf("%s %s into %s: committed version %llu (commit %s)", 
		       result.outcome == STORE_MERGE_FAST_FORWARD ? "fast-forwarded" : "merged", arguments[1], into,
		       (unsigned long long)result.commit.version, result.commit.commit);
		if (result.resolved)
			printf(", %llu conflict%s resolved as %s", (unsigned long long)result.resolved,
			       result.resolved == 1 ? "" : "s", strategy);
		printf("\n");
	}
	store_close(store);
	return status;
}
