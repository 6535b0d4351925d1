/*
 * cmd_gc — `graphfs gc STORE [--keep-versions N] [--keep-since DURATION]
 * [--dry-run]`: raises the retention horizon and gives the space of what no
 * retained state needs back to the file system (core/manifest_gc.c); and
 * `graphfs optimize STORE [TABLE]`: tables rewritten into fresh fragments.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
	"usage: graphfs gc STORE [--keep-versions N] [--keep-since DURATION] [--dry-run]\n"
	"\n"
	"Reclaims old versions: the horizon rises to the newest version both rules given\n"
	"allow, and every version at or below it can no longer be read (history/@V, --at V:\n"
	"\"version V was reclaimed by gc\"). Always kept: every branch's current state, every\n"
	"tagged version, and every version a reader holds open in any process (a file under\n"
	"history/ or tags/ on a mount, a running export or snapshot) until the next gc after\n"
	"it is closed. The space nothing kept needs goes back to the file system, so du of\n"
	"the store shrinks. Mounts and writers go on meanwhile. With neither rule, no version\n"
	"is reclaimed and only unreachable space is returned.\n"
	"\n"
	"  --keep-versions N      keep the newest N versions of the store (N >= 1)\n"
	"  --keep-since DURATION  keep every version committed within DURATION: a number\n"
	"                         with s, m, h, d or w (30m, 12h, 7d, 2w)\n"
	"  --dry-run              print what gc would reclaim; change nothing\n";

/* "7d" -> µs. 0 or CLI_EXIT_USAGE after one line. */
static int parse_duration(const char *text, uint64_t *out)
{
	if (store_duration_parse(text, out) < 0)
		return cli_usage_error("gc", "--keep-since %s: not a duration (a number with s, m, h, d or w: 12h, 7d)", text);
	return 0;
}

static void say_bytes(uint64_t bytes, char *out, size_t size)
{
	if (bytes >= (1ull << 30))
		snprintf(out, size, "%.1f GiB", (double)bytes / (double)(1ull << 30));
	else if (bytes >= (1ull << 20))
		snprintf(out, size, "%.1f MiB", (double)bytes / (double)(1ull << 20));
	else if (bytes >= 1024)
		snprintf(out, size, "%.1f KiB", (double)bytes / 1024.0);
	else
		snprintf(out, size, "%llu B", (unsigned long long)bytes);
}

int cmd_gc(int argc, char **argv)
{
	const char *keep_versions = NULL, *keep_since = NULL;
	bool dry_run = false;
	const struct cli_option options[] = {
		{ "keep-versions", 0, &keep_versions, NULL },
		{ "keep-since", 0, &keep_since, NULL },
		{ "dry-run", 0, NULL, &dry_run },
	};
	const struct cli_syntax syntax = { usage, options, sizeof options / sizeof options[0], 1, 1 };
	char **arguments;
	int status = cli_parse(argc, argv, &syntax, &arguments, NULL);
	if (status >= 0)
		return status;
	struct store_gc_options gc = { .dry_run = dry_run };
	if (keep_versions) {
		char *end;
		errno = 0;
		unsigned long long count = strtoull(keep_versions, &end, 10);
		if (errno != 0 || end == keep_versions || *end || count == 0 || keep_versions[0] == '-') {
			return cli_usage_error("gc", "--keep-versions %s: not a count of versions (1 or more)", keep_versions);
		}
		gc.keep_versions = count;
	}
	if (keep_since && (status = parse_duration(keep_since, &gc.keep_since_us)) != 0)
		return status;
	struct store *store;
	if ((status = cli_store_open(arguments[0], false, &store)) != 0)
		return status;
	struct cli_progress progress;
	cli_progress_begin_counting(&progress, "gc: marking", "versions", 0);
	struct store_gc_result result;
	struct error_info error;
	int rc = store_gc(store, &gc, cli_progress_update, &progress, &result, &error);
	cli_progress_end(&progress, rc == 0, 0);
	if (rc < 0) {
		status = cli_fail_error(rc, &error, "cannot gc %s", arguments[0]);
	} else {
		const char *would = dry_run ? "would reclaim" : "reclaimed";
		char before[32], after[32], returned[32], segments[32];
		say_bytes(result.manifest_bytes_before, before, sizeof before);
		say_bytes(dry_run ? result.manifest_bytes_before - result.manifest_bytes_reclaimed
				  : result.manifest_bytes_after, after, sizeof after);
		say_bytes(result.manifest_bytes_reclaimed, returned, sizeof returned);
		say_bytes(result.segment_bytes_reclaimed, segments, sizeof segments);
		if (result.horizon > result.horizon_before)
			printf("gc: %s versions %llu..%llu (%llu version%s; horizon %llu, was %llu)\n", would,
			       (unsigned long long)result.horizon_before + 1, (unsigned long long)result.horizon,
			       (unsigned long long)result.versions_reclaimed, result.versions_reclaimed == 1 ? "" : "s",
			       (unsigned long long)result.horizon, (unsigned long long)result.horizon_before);
		else
			printf("gc: no version %s (horizon %llu, latest version %llu)\n",
			       dry_run ? "would be reclaimed" : "reclaimed", (unsigned long long)result.horizon,
			       (unsigned long long)result.version);
		if (result.held_by[0])
			printf("gc: kept version %llu and later: the merge base of branch %s and the branch it was forked from, "
			       "which a merge between them reads (delete %s once no merge needs it, and gc goes further)\n",
			       (unsigned long long)result.held_at, result.held_by, result.held_by);
		if (result.versions_pinned)
			printf("gc: %llu version%s below the horizon kept for open readers (the next gc after they close takes them)\n",
			       (unsigned long long)result.versions_pinned, result.versions_pinned == 1 ? "" : "s");
		char packed[96] = "";
		if (result.pack_bytes) {
			char pack[32];
			say_bytes(result.pack_bytes, pack, sizeof pack);
			snprintf(packed, sizeof packed, "; the retained history packed into %s", pack);
		}
		printf("gc: %s %s of manifest space (%s on disk -> %s%s) and %llu segment file%s (%s)\n", would,
		       returned, before, after, packed, (unsigned long long)result.segments_removed,
		       result.segments_removed == 1 ? "" : "s", segments);
	}
	store_close(store);
	return status;
}

static const char optimize_usage[] =
	"usage: graphfs optimize STORE [TABLE] [--branch B] [-m MSG] [--if-version V] [--if-commit ULID]\n"
	"\n"
	"Rewrites TABLE (default: every table with rows) of branch B into fresh fragments,\n"
	"as one commit whose changes have op \"optimize\": rows deleted or replaced by merges,\n"
	"deletion bitmaps and many small fragments are gone, the key tree and an edge table's\n"
	"adjacency indexes are rebuilt. The table's bytes stay exactly the same. The old\n"
	"fragments stay in history until 'graphfs gc' reclaims the versions that use them.\n"
	"\n"
	"  --branch B         the branch (default main)\n"
	"  -m, --message MSG  the commit message (default \"optimize TABLE\")\n"
	"  --if-version V     publish only if the store is still at version V\n"
	"  --if-commit ULID   publish only if the branch's head is still commit ULID\n";

int cmd_optimize(int argc, char **argv)
{
	const char *branch = "main", *message = NULL, *if_version = NULL, *if_commit = NULL;
	const struct cli_option options[] = {
		{ "branch", 0, &branch, NULL },
		{ "message", 'm', &message, NULL },
		{ "if-version", 0, &if_version, NULL },
		{ "if-commit", 0, &if_commit, NULL },
	};
	const struct cli_syntax syntax = { optimize_usage, options, sizeof options / sizeof options[0], 1, 2 };
	char **arguments;
	int count = 0;
	int status = cli_parse(argc, argv, &syntax, &arguments, &count);
	if (status >= 0)
		return status;
	struct store_condition condition;
	if ((status = cli_condition_parse(argv[0], if_version, if_commit, &condition)) != 0)
		return status;
	struct store *store;
	if ((status = cli_store_open(arguments[0], false, &store)) != 0)
		return status;
	const char *table = count > 1 ? arguments[1] : NULL;
	struct cli_progress progress;
	cli_progress_begin(&progress, "optimize", 0);
	struct store_commit_result result;
	struct error_info error;
	int rc = store_optimize(store, branch, table, message, &condition, cli_progress_update, &progress, &result,
				&error);
	cli_progress_end(&progress, rc == 0, 0);
	if (rc == -ENODATA)
		printf("%s\n", error.message);
	else if (rc < 0)
		status = cli_fail_error(rc, &error, "cannot optimize %s", table ? table : "the tables");
	else
		printf("optimized %s on %s: committed version %llu (commit %s)\n", table ? table : "every table", branch,
		       (unsigned long long)result.version, result.commit);
	store_close(store);
	return status;
}
