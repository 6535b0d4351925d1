/*
 * cmd_log — `graphfs log STORE [--branch B] [--graph | --follow [--all]]`.
 *
 * Without --graph: the commit log of branch B (default main) as JSON lines,
 * newest first — the same lines as the mounted `log` file.
 *
 * With --follow: the same lines oldest first, then each new commit of the
 * branch as it is made, until interrupted; with --all every commit of the
 * store by version, as `.graphfs/feed` shows them (docs/MOUNT.md).
 *
 * With --graph: one line per commit, newest first, with the branches drawn as
 * ASCII lanes (like `git log --graph --all`). Without --branch every branch
 * is drawn; with --branch B only the commits of B's history. A lane starts at
 * a branch head, a commit is drawn as '*' in its lane, and a lane that joins
 * another (the fork point of a branch) is drawn with '/'.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const char usage[] =
	"usage: graphfs log STORE [--branch B] [--graph]\n"
	"       graphfs log STORE [--branch B | --all] --follow\n"
	"       graphfs log STORE --table T --id X [--branch B]\n"
	"\n"
	"Prints the commit log of branch B (default main), newest first, one JSON\n"
	"object per line: version, commit, parents, branch, time, actor, message,\n"
	"changes — the same lines as the mounted log file.\n"
	"With --table and --id: one line per version in which row X of table T\n"
	"changed, newest first: version, commit, time, op (insert, update, delete)\n"
	"and the row (null once deleted) — the lines of history/by-id/T/X.jsonl.\n"
	"\n"
	"  --branch B   the branch (default main)\n"
	"  --graph      draw the history as lanes instead: every branch, or only B's\n"
	"               history when --branch is given\n"
	"  --follow     oldest first, then every new commit as it is made, until\n"
	"               interrupted (Ctrl-C)\n"
	"  --all        with --follow: every commit of every branch, by version (the\n"
	"               lines of .graphfs/feed on a mount)\n"
	"  --table T, --id X   the history of one row\n";

/* ---- JSON lines -------------------------------------------------------------------- */

static int print_json_line(const struct commit_record *record, void *context)
{
	struct cli_lines *lines = context;
	return cli_lines_write(lines, journal_commit_record_render_json(record, &lines->line));
}

static int print_row_line(const char *line, size_t size, void *context)
{
	struct cli_lines *lines = context;
	return cli_lines_write(lines, buf_append(&lines->line, line, size));
}

/* ---- --follow ---------------------------------------------------------------------- */

/* How often --follow looks for new commits. */
#define FOLLOW_INTERVAL_US 250000

/* The branch's log, oldest first: its records' lines collected newest first. */
struct collected_lines {
	char **lines;
	size_t count, capacity;
	int rc;
};

static int collect_line(const struct commit_record *record, void *context)
{
	struct collected_lines *collected = context;
	struct buf line;
	buf_init(&line);
	int rc = journal_commit_record_render_json(record, &line);
	if (rc == 0 && collected->count == collected->capacity) {
		size_t capacity = collected->capacity ? 2 * collected->capacity : 64;
		char **grown = realloc(collected->lines, capacity * sizeof *grown);
		if (!grown)
			rc = -ENOMEM;
		else {
			collected->lines = grown;
			collected->capacity = capacity;
		}
	}
	if (rc == 0 && buf_put_u8(&line, '\0') == 0)
		collected->lines[collected->count++] = (char *)line.data;
	else
		buf_free(&line);
	return rc < 0 ? (collected->rc = rc) : 0;
}

/* Writes text and flushes it, so a pipe sees each commit as it comes. 0 or -EIO. */
static int put_now(const char *text, size_t size)
{
	if (fwrite(text, 1, size, stdout) != size || fflush(stdout) != 0)
		return -EIO;
	return 0;
}

/* Prints the lines of versions (*through, latest] that belong to branch (NULL: all). */
static int follow_print(struct store *store, const char *branch, uint64_t *through)
{
	uint64_t latest = store_version(store);
	struct buf line;
	buf_init(&line);
	int rc = 0;
	for (uint64_t version = *through + 1; version <= latest && rc == 0; version++) {
		line.size = 0;
		if (branch) {
			struct commit_record record;
			rc = store_commit_at(store, version, &record);
			if (rc == 0 && strcmp(record.branch, branch) == 0)
				rc = journal_commit_record_render_json(&record, &line);
			journal_commit_record_free(&record);
			if (rc == -ENOENT)
				rc = 0;   /* reclaimed while we looked: gc keeps a branch's head */
		} else {
			rc = store_commit_line(store, version, &line);
		}
		if (rc == 0 && line.size)
			rc = put_now((const char *)line.data, line.size);
		if (rc == 0)
			*through = version;
	}
	buf_free(&line);
	return rc;
}

static int follow(struct store *store, const char *branch)
{
	uint64_t through = 0;
	int rc;
	if (branch) {
		/* the branch's log as it stands (its ancestry included), oldest first */
		struct store_snapshot *snapshot;
		struct error_info error;
		error_info_clear(&error);
		through = store_version(store);
		if ((rc = store_snapshot_open(store, branch, STORE_LATEST, &snapshot, &error)) < 0)
			return rc;
		struct collected_lines collected = { 0 };
		rc = store_snapshot_log(snapshot, collect_line, &collected);
		store_snapshot_release(snapshot);
		if (rc == 0 && collected.rc < 0)
			rc = collected.rc;
		for (size_t i = collected.count; rc == 0 && i-- > 0;)
			rc = put_now(collected.lines[i], strlen(collected.lines[i]));
		for (size_t i = 0; i < collected.count; i++)
			free(collected.lines[i]);
		free(collected.lines);
		if (rc < 0)
			return rc;
	}
	for (;;) {
		if ((rc = follow_print(store, branch, &through)) < 0)
			return rc;
		usleep(FOLLOW_INTERVAL_US);
		bool changed = false;
		if ((rc = store_refresh(store, &changed)) < 0)
			return rc;
	}
}

/* ---- the graph --------------------------------------------------------------------- */

struct graph_commit {
	uint64_t version;
	char id[ULID_TEXT_SIZE];
	char branch[JOURNAL_NAME_MAX + 1];
	size_t parent_count;
	char parents[JOURNAL_MAX_PARENTS][ULID_TEXT_SIZE];
	char *message;
	char *tips;      /* ", "-separated names of the branches whose head this is, or NULL */
};

struct graph {
	struct graph_commit *commits;
	size_t count;
	size_t capacity;
	int rc;
};

static struct graph_commit *graph_find(struct graph *graph, const char *id)
{
	for (size_t i = 0; i < graph->count; i++)
		if (strcmp(graph->commits[i].id, id) == 0)
			return &graph->commits[i];
	return NULL;
}

static int graph_collect(const struct commit_record *record, void *context)
{
	struct graph *graph = context;
	char id[ULID_TEXT_SIZE];
	ulid_format(&record->id, id);
	if (graph_find(graph, id))
		return 0;
	if (graph->count == graph->capacity) {
		size_t capacity = graph->capacity ? 2 * graph->capacity : 64;
		struct graph_commit *grown = realloc(graph->commits, capacity * sizeof *grown);
		if (!grown)
			return graph->rc = -ENOMEM;
		graph->commits = grown;
		graph->capacity = capacity;
	}
	struct graph_commit *commit = &graph->commits[graph->count];
	memset(commit, 0, sizeof *commit);
	commit->version = record->version;
	memcpy(commit->id, id, sizeof id);
	snprintf(commit->branch, sizeof commit->branch, "%s", record->branch);
	commit->parent_count = record->parent_count;
	for (size_t i = 0; i < record->parent_count && i < JOURNAL_MAX_PARENTS; i++)
		ulid_format(&record->parents[i], commit->parents[i]);
	commit->message = strdup(record->message ? record->message : "");
	if (!commit->message)
		return graph->rc = -ENOMEM;
	graph->count++;
	return 0;
}

static int compare_newest_first(const void *a, const void *b)
{
	const struct graph_commit *left = a;
	const struct graph_commit *right = b;
	return left->version < right->version ? 1 : left->version > right->version ? -1 : 0;
}

static void graph_free(struct graph *graph)
{
	for (size_t i = 0; i < graph->count; i++) {
		free(graph->commits[i].message);
		free(graph->commits[i].tips);
	}
	free(graph->commits);
}

/* The branches of the store, copied out of store_branches() before any is read. */
struct branch_list {
	struct store_branch_info *branches;
	size_t count;
	int rc;
};

static int branch_list_add(const struct store_branch_info *branch, void *context)
{
	struct branch_list *list = context;
	struct store_branch_info *grown = realloc(list->branches, (list->count + 1) * sizeof *grown);
	if (!grown)
		return list->rc = -ENOMEM;
	list->branches = grown;
	list->branches[list->count++] = *branch;
	return 0;
}

/* Collects one branch's history and marks its head. */
static int graph_add_branch(struct store *store, struct graph *graph,
			    const struct store_branch_info *branch)
{
	struct store_snapshot *snapshot;
	struct error_info error;
	error_info_clear(&error);
	int rc = store_snapshot_open(store, branch->name, STORE_LATEST, &snapshot, &error);
	if (rc < 0)
		return rc;
	rc = store_snapshot_log(snapshot, graph_collect, graph);
	store_snapshot_release(snapshot);
	if (rc < 0 || graph->rc < 0)
		return rc < 0 ? rc : graph->rc;
	if (branch->head_commit[0] == '\0')
		return 0;
	struct graph_commit *head = graph_find(graph, branch->head_commit);
	if (!head)
		return 0;
	size_t old_length = head->tips ? strlen(head->tips) : 0;
	char *tips = realloc(head->tips, old_length + strlen(branch->name) + 3);
	if (!tips)
		return -ENOMEM;
	if (old_length)
		sprintf(tips + old_length, ", %s", branch->name);
	else
		strcpy(tips, branch->name);
	head->tips = tips;
	return 0;
}

/* Lanes: each holds the commit id it waits for, "" when free. */
struct lanes {
	char (*expect)[ULID_TEXT_SIZE];
	size_t count;
};

static int lanes_add(struct lanes *lanes, const char *id)
{
	for (size_t i = 0; i < lanes->count; i++)
		if (lanes->expect[i][0] == '\0') {
			snprintf(lanes->expect[i], ULID_TEXT_SIZE, "%s", id);
			return (int)i;
		}
	char (*grown)[ULID_TEXT_SIZE] = realloc(lanes->expect, (lanes->count + 1) * sizeof *grown);
	if (!grown)
		return -ENOMEM;
	lanes->expect = grown;
	snprintf(lanes->expect[lanes->count], ULID_TEXT_SIZE, "%s", id);
	return (int)lanes->count++;
}

static void lanes_trim(struct lanes *lanes)
{
	while (lanes->count > 0 && lanes->expect[lanes->count - 1][0] == '\0')
		lanes->count--;
}

/* Prints the lane columns, with marker at column mark (or none when mark < 0). */
static void lanes_print(const struct lanes *lanes, long mark, char marker)
{
	for (size_t i = 0; i < lanes->count; i++) {
		char c = (long)i == mark ? marker : lanes->expect[i][0] ? '|' : ' ';
		putchar(c);
		putchar(' ');
	}
}

/* A connector row: "|" at every lane still waiting (and at `into`), blanks
 * elsewhere; NULL when out of memory. Free it with row_print. */
static char *lanes_row(const struct lanes *lanes, size_t into, const bool *joining)
{
	size_t width = 2 * lanes->count;
	char *row = malloc(width + 1);
	if (!row)
		return NULL;
	memset(row, ' ', width);
	row[width] = '\0';
	for (size_t k = 0; k < lanes->count; k++)
		if ((k == into || lanes->expect[k][0]) && !(joining && joining[k]))
			row[2 * k] = '|';
	return row;
}

/* Prints a connector row without its trailing blanks and frees it. 0 or -ENOMEM (row NULL). */
static int row_print(char *row)
{
	if (!row)
		return -ENOMEM;
	size_t width = strlen(row);
	while (width > 0 && row[width - 1] == ' ')
		row[--width] = '\0';
	puts(row);
	free(row);
	return 0;
}

/* Draws the lanes marked in joining (all right of `into`) joining lane `into`
 * in one row: "|/", "|/ /", "| |/"... (a fork point of several branches). */
static int print_join(const struct lanes *lanes, size_t into, const bool *joining)
{
	char *row = lanes_row(lanes, into, joining);
	for (size_t k = 0; row && k < lanes->count; k++)
		if (joining[k])
			row[2 * k - 1] = '/';
	return row_print(row);
}

/* A merge's link to the lane of its second parent: "|\|", "|\-|" (a lane that
 * waited already), "|\" (a lane it opens). */
static int print_merge(const struct lanes *lanes, size_t into, size_t from, bool opened)
{
	char *row = lanes_row(lanes, into, NULL);
	if (row) {
		row[2 * into + 1] = '\\';
		for (size_t p = 2 * into + 2; p < 2 * from; p++)
			if (row[p] == ' ')
				row[p] = '-';
		if (opened && from == into + 1)
			row[2 * from] = ' ';
	}
	return row_print(row);
}

/*
 * Newest first, one line per commit, each in a lane: a lane waits for the
 * commit it continues with (a first parent). Lanes that wait for the same
 * commit join into the leftmost before it is drawn (the fork: "|/"); a merge
 * opens a lane for its second parent, or, if a lane waits for it already,
 * draws the link to that lane. Only commits in the graph get lanes, so no
 * lane is left waiting for a commit that is never drawn.
 */
static int graph_print(struct graph *graph)
{
	struct lanes lanes = { NULL, 0 };
	int rc = 0;
	qsort(graph->commits, graph->count, sizeof graph->commits[0], compare_newest_first);
	for (size_t c = 0; c < graph->count && rc == 0; c++) {
		struct graph_commit *commit = &graph->commits[c];
		long lane = -1;
		for (size_t i = 0; i < lanes.count; i++)
			if (strcmp(lanes.expect[i], commit->id) == 0) {
				lane = (long)i;
				break;
			}
		/* other lanes waiting for this commit join it first: branches forked here */
		if (lane >= 0) {
			bool *joining = calloc(lanes.count + 1, sizeof *joining);
			bool any = false;
			if (!joining) {
				rc = -ENOMEM;
				break;
			}
			for (size_t i = (size_t)lane + 1; i < lanes.count; i++)
				if (strcmp(lanes.expect[i], commit->id) == 0)
					joining[i] = any = true;
			if (any)
				rc = print_join(&lanes, (size_t)lane, joining);
			for (size_t i = (size_t)lane + 1; i < lanes.count; i++)
				if (joining[i])
					lanes.expect[i][0] = '\0';
			free(joining);
			lanes_trim(&lanes);
			if (rc < 0)
				break;
		}
		if (lane < 0) {
			int added = lanes_add(&lanes, commit->id);
			if (added < 0) {
				rc = added;
				break;
			}
			lane = added;
		}

		lanes_print(&lanes, lane, '*');
		printf("%llu %s [%s]", (unsigned long long)commit->version, commit->id, commit->branch);
		if (commit->tips)
			printf(" (%s)", commit->tips);
		fputs(" ", stdout);
		for (const char *p = commit->message; *p; p++)
			putchar(*p == '\n' || *p == '\r' ? ' ' : *p);
		putchar('\n');

		/* The lane continues with the first parent; a second parent (a merge) opens a lane. */
		if (commit->parent_count > 0 && graph_find(graph, commit->parents[0]))
			snprintf(lanes.expect[lane], ULID_TEXT_SIZE, "%s", commit->parents[0]);
		else
			lanes.expect[lane][0] = '\0';
		for (size_t p = 1; p < commit->parent_count && rc == 0; p++) {
			if (!graph_find(graph, commit->parents[p]))
				continue;   /* not drawn (another branch's history): no lane */
			long waiting = -1;
			for (size_t i = 0; i < lanes.count; i++)
				if (strcmp(lanes.expect[i], commit->parents[p]) == 0)
					waiting = (long)i;
			if (waiting > lane) {
				rc = print_merge(&lanes, (size_t)lane, (size_t)waiting, false);
				continue;
			}
			if (waiting >= 0)
				continue;
			int added = lanes_add(&lanes, commit->parents[p]);
			if (added < 0) {
				rc = added;
				break;
			}
			if (added > lane)
				rc = print_merge(&lanes, (size_t)lane, (size_t)added, true);
		}
		lanes_trim(&lanes);
	}
	free(lanes.expect);
	return rc;
}

/* ---- the command -------------------------------------------------------------------- */

int cmd_log(int argc, char **argv)
{
	const char *branch = NULL, *table = NULL, *id = NULL;
	bool draw_graph = false, follow_on = false, all = false;
	const struct cli_option options[] = {
		{ "branch", 0, &branch, NULL },
		{ "graph", 0, NULL, &draw_graph },
		{ "table", 0, &table, NULL },
		{ "id", 0, &id, NULL },
		{ "follow", 0, NULL, &follow_on },
		{ "all", 0, NULL, &all },
	};
	const struct cli_syntax syntax = { usage, options, 6, 1, 1 };
	char **arguments;
	struct store *store;
	int status = cli_parse_and_open(argc, argv, &syntax, true, &arguments, &store);
	if (status >= 0)
		return status;
	status = CLI_EXIT_OK;
	if ((table != NULL) != (id != NULL) || (table && draw_graph)) {
		store_close(store);
		return cli_usage_error("log", table && draw_graph ? "--graph draws commits, not one row's history"
								   : "--table and --id go together");
	}
	if (all && !follow_on) {
		store_close(store);
		return cli_usage_error("log", "--all goes with --follow (for every branch drawn: --graph)");
	}
	if (follow_on && (table || draw_graph || (all && branch))) {
		store_close(store);
		return cli_usage_error("log", "--follow takes --branch B or --all, and no --graph or --table");
	}
	if (follow_on) {
		int rc = follow(store, all ? NULL : branch ? branch : "main");
		if (rc == -ENOENT)
			status = cli_fail("no branch '%s' in %s", branch ? branch : "main", arguments[0]);
		else
			status = cli_fail_error(rc, NULL, "cannot follow the log of %s", arguments[0]);
		store_close(store);
		return status;
	}
	if (table) {
		struct store_snapshot *snapshot;
		status = cli_snapshot_open(store, branch ? branch : "main", STORE_LATEST, &snapshot);
		if (status == 0) {
			struct cli_lines lines;
			cli_lines_init(&lines);
			int rc = store_row_history(snapshot, table, id, strlen(id), print_row_line, &lines);
			if (rc == -ENOENT)
				status = cli_fail("no table %s on branch '%s'", table, branch ? branch : "main");
			else if ((rc = cli_lines_finish(&lines, rc)) < 0)
				status = cli_fail_error(rc, NULL, "cannot read the history of row %s of %s", id, table);
			store_snapshot_release(snapshot);
		}
		store_close(store);
		return status;
	}

	if (!draw_graph) {
		struct store_snapshot *snapshot;
		status = cli_snapshot_open(store, branch ? branch : "main", STORE_LATEST, &snapshot);
		if (status == 0) {
			struct cli_lines lines;
			cli_lines_init(&lines);
			int rc = store_snapshot_log(snapshot, print_json_line, &lines);
			if ((rc = cli_lines_finish(&lines, rc)) < 0)
				status = cli_fail_error(rc, NULL, "cannot read the log of branch '%s'",
							branch ? branch : "main");
			store_snapshot_release(snapshot);
		}
		store_close(store);
		return status;
	}

	if (branch) {
		/* Fails with one clear line if the branch does not exist. */
		struct store_snapshot *snapshot;
		if ((status = cli_snapshot_open(store, branch, STORE_LATEST, &snapshot)) != 0) {
			store_close(store);
			return status;
		}
		store_snapshot_release(snapshot);
	}
	struct graph graph = { NULL, 0, 0, 0 };
	struct branch_list list = { NULL, 0, 0 };
	int rc = store_branches(store, branch_list_add, &list);
	if (rc == 0 && list.rc < 0)
		rc = list.rc;
	for (size_t i = 0; rc == 0 && i < list.count; i++)
		if (!branch || strcmp(branch, list.branches[i].name) == 0)
			rc = graph_add_branch(store, &graph, &list.branches[i]);
	free(list.branches);
	if (rc == 0)
		rc = graph_print(&graph);
	if (rc < 0)
		status = cli_fail_error(rc, NULL, "cannot draw the history of %s", arguments[0]);
	graph_free(&graph);
	store_close(store);
	return status;
}
