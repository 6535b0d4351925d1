/*
 * changes — the subtrees that show change (docs/MOUNT.md "Diffs", "Merging",
 * "History"): diff/, merge/ and history/by-id/, each a reading of the store's
 * diff, merge preview and row history (core/store_diff.c, store_merge.c,
 * store_row_history.c).
 *
 *   diff/<A>..<B>/                     NODE_DIFF_ROOT (name "A..B"; not listed in diff/)
 *   diff/<A>..<B>/<Name>.jsonl         NODE_DIFF_FILE (table: Name), tables whose rows differ
 *   diff/<A>..<B>/.tables.jsonl        NODE_DIFF_TABLES_FILE
 *   merge/<source>/                    NODE_MERGE_ROOT (name: source), every other branch
 *   merge/<source>/status              NODE_MERGE_STATUS_FILE
 *   merge/<source>/tables/<Name>.jsonl NODE_MERGE_TABLE_FILE: the merged rows
 *   merge/<source>/conflicts/<Name>.jsonl NODE_MERGE_CONFLICT_FILE
 *   merge/<source>/.commit             NODE_MERGE_COMMIT_FILE: a write publishes
 *   history/by-id/<Table>/<id>.jsonl   NODE_BY_ID_FILE (name: the encoded id)
 *
 * Invariants:
 *   1. A node's context (A and B, the source, the table, the id) is read from
 *      its own name and its ancestors' names: nothing is stored twice.
 *   2. Every rendering is computed afresh from the store (a preview holds its
 *      snapshots while it renders), so what a file shows is what the store
 *      would publish now; live nodes are read with direct I/O.
 *   3. A preview file is byte for byte what the merge's commit publishes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mountfs_int.h"

/* The ancestor (or node itself) of kind, or NULL. */
static const struct node *ancestor(const struct node *node, enum node_kind kind)
{
	while (node && node->kind != kind)
		node = node->parent;
	return node;
}

/* ---- diff/ -------------------------------------------------------------------------- */

/* The two snapshots "A..B" names, on branch. 0 or -ENOENT. */
static int diff_snapshots(struct mountfs *mount, const char *branch, const char *name, struct store_snapshot **a,
			  struct store_snapshot **b)
{
	*a = *b = NULL;
	const char *dots = strstr(name, "..");
	if (!dots || dots == name || !dots[2])
		return -ENOENT;
	char left[GRAPHFS_NAME_MAX + 1];
	snprintf(left, sizeof left, "%.*s", (int)(dots - name), name);
	struct error_info error;
	int rc = store_snapshot_open_named(mount->store, branch, left, a, &error);
	if (rc == 0)
		rc = store_snapshot_open_named(mount->store, branch, dots + 2, b, &error);
	if (rc < 0) {
		if (*a)
			store_snapshot_release(*a);
		*a = NULL;
		return rc == -EINVAL ? -ENOENT : rc;
	}
	return 0;
}

static void release_both(struct store_snapshot *a, struct store_snapshot *b)
{
	if (a)
		store_snapshot_release(a);
	if (b)
		store_snapshot_release(b);
}

int changes_resolve_diffs(struct mountfs *mount, struct node *parent, const char *name, struct child *out)
{
	struct store_snapshot *a, *b;
	int rc = diff_snapshots(mount, parent->view.branch, name, &a, &b);
	release_both(a, b);
	if (rc == 0)
		out->kind = NODE_DIFF_ROOT;
	return rc;
}

/*
 * Table files of a listing (<Name>.jsonl of kind), or, resolving, whether the
 * one wanted is among them: the visitor of store_diff_names and of a merge
 * preview's tables.
 */
struct table_files {
	struct lister *lister;
	enum node_kind kind;
	const char *wanted;
	bool found;
};

static int table_file(const char *table, void *context)
{
	struct table_files *files = context;
	if (files->wanted) {
		files->found = strcmp(table, files->wanted) == 0;
		return files->found;
	}
	char name[GRAPHFS_NAME_MAX + 1];
	snprintf(name, sizeof name, "%s.jsonl", table);
	struct dir_entry *entry = listing_add(files->lister, name, files->kind);
	if (!entry)
		return -ENOMEM;
	snprintf(entry->child.table, sizeof entry->child.table, "%s", table);
	return 0;
}

static int diff_tables(struct mountfs *mount, const struct node *root, struct table_files *names)
{
	struct store_snapshot *a, *b;
	names->kind = NODE_DIFF_FILE;
	int rc = diff_snapshots(mount, root->view.branch, root->name, &a, &b);
	if (rc == 0)
		rc = store_diff_names(a, b, table_file, names);
	release_both(a, b);
	return rc;
}

int changes_list_diff(struct mountfs *mount, struct node *directory, struct lister *lister)
{
	struct table_files names = { .lister = lister };
	return diff_tables(mount, directory, &names);
}

/* name, a <Name>.jsonl that each (a listing of the directory) has. */
static int resolve_table_file(struct mountfs *mount, struct node *parent, const char *name, struct child *out,
			      int (*each)(struct mountfs *, const struct node *, struct table_files *))
{
	if (!names_table_from_file(name, ".jsonl", out->table))
		return -ENOENT;
	struct table_files files = { .wanted = out->table };
	int rc = each(mount, parent, &files);
	if (rc < 0)
		return rc;
	out->kind = files.kind;
	return files.found ? 0 : -ENOENT;
}

int changes_resolve_diff(struct mountfs *mount, struct node *parent, const char *name, struct child *out)
{
	return resolve_table_file(mount, parent, name, out, diff_tables);
}

static int append_line(const char *line, size_t size, void *context)
{
	return buf_append(context, line, size);
}

int changes_render_diff(struct mountfs *mount, const struct node *node, struct store_snapshot *snapshot,
			struct buf *out)
{
	(void)snapshot;
	struct store_snapshot *a, *b;
	int rc = diff_snapshots(mount, node->view.branch, node->parent->name, &a, &b);
	if (rc == 0)
		rc = store_diff_rows(a, b, node->table, append_line, out);
	release_both(a, b);
	return rc;
}

int changes_render_diff_tables(struct mountfs *mount, const struct node *node, struct store_snapshot *snapshot,
			       struct buf *out)
{
	(void)snapshot;
	struct store_snapshot *a, *b;
	int rc = diff_snapshots(mount, node->view.branch, node->parent->name, &a, &b);
	if (rc == 0)
		rc = store_diff_tables(a, b, append_line, out);
	release_both(a, b);
	return rc;
}

/* ---- merge/ --------------------------------------------------------------------------- */

struct branch_lister {
	struct lister *lister;
	const char *own;
	const char *wanted;
	bool found;
};

static int merge_branch(const struct store_branch_info *branch, void *context)
{
	struct branch_lister *branches = context;
	if (strcmp(branch->name, branches->own) == 0)
		return 0;
	if (branches->wanted) {
		branches->found = strcmp(branch->name, branches->wanted) == 0;
		return branches->found;
	}
	return listing_add(branches->lister, branch->name, NODE_MERGE_ROOT) ? 0 : -ENOMEM;
}

int changes_resolve_merges(struct mountfs *mount, struct node *parent, const char *name, struct child *out)
{
	struct branch_lister branches = { .own = parent->view.branch, .wanted = name };
	int rc = store_branches(mount->store, merge_branch, &branches);
	if (rc < 0)
		return rc;
	out->kind = NODE_MERGE_ROOT;
	return branches.found ? 0 : -ENOENT;
}

int changes_list_merges(struct mountfs *mount, struct node *directory, struct lister *lister)
{
	struct branch_lister branches = { .lister = lister, .own = directory->view.branch };
	int rc = store_branches(mount->store, merge_branch, &branches);
	return rc < 0 ? rc : 0;
}

/* The preview of merging the source of node's merge/<source>/ into its branch. */
static int merge_plan(struct mountfs *mount, const struct node *node, struct store_merge_plan **out)
{
	const struct node *root = ancestor(node, NODE_MERGE_ROOT);
	if (!root)
		return -ENOENT;
	struct error_info error;
	int rc = store_merge_plan_open(mount->store, root->name, node->view.branch, STORE_MERGE_NO_STRATEGY, out,
				       &error);
	return rc == -EINVAL ? -ENOENT : rc;
}

int changes_render_merge_status(struct mountfs *mount, const struct node *node, struct store_snapshot *snapshot,
				struct buf *out)
{
	(void)snapshot;
	struct store_merge_plan *plan;
	int rc = merge_plan(mount, node, &plan);
	if (rc < 0)
		return rc;
	rc = buf_printf(out, "%s\n", store_merge_outcome_name(store_merge_plan_result(plan)->outcome));
	store_merge_plan_free(plan);
	return rc;
}

/* The tables of the merged result (tables/) or those with conflicts (conflicts/). */
static int merge_files_of(struct mountfs *mount, const struct node *directory, struct table_files *files)
{
	struct store_merge_plan *plan;
	int rc = merge_plan(mount, directory, &plan);
	if (rc < 0)
		return rc;
	files->kind = directory->kind == NODE_MERGE_TABLES_DIR ? NODE_MERGE_TABLE_FILE : NODE_MERGE_CONFLICT_FILE;
	rc = directory->kind == NODE_MERGE_TABLES_DIR ? store_merge_plan_tables(plan, table_file, files)
						       : store_merge_plan_conflict_tables(plan, table_file, files);
	store_merge_plan_free(plan);
	return rc;
}

int changes_list_merge_files(struct mountfs *mount, struct node *directory, struct lister *lister)
{
	struct table_files files = { .lister = lister };
	return merge_files_of(mount, directory, &files);
}

int changes_resolve_merge_file(struct mountfs *mount, struct node *parent, const char *name, struct child *out)
{
	return resolve_table_file(mount, parent, name, out, merge_files_of);
}

int changes_render_merge_file(struct mountfs *mount, const struct node *node, struct store_snapshot *snapshot,
			      struct buf *out)
{
	(void)snapshot;
	struct store_merge_plan *plan;
	int rc = merge_plan(mount, node, &plan);
	if (rc < 0)
		return rc;
	rc = node->kind == NODE_MERGE_TABLE_FILE ? store_merge_plan_render(plan, node->table, out)
						 : store_merge_plan_conflicts(plan, node->table, out);
	store_merge_plan_free(plan);
	return rc;
}

/* ---- history/by-id/ ------------------------------------------------------------------------ */

struct row_tables {
	struct lister *lister;
};

static int row_table(const struct head_row *head, void *context)
{
	struct row_tables *tables = context;
	struct dir_entry *entry = listing_add(tables->lister, head->name, NODE_BY_ID_TABLE_DIR);
	if (!entry)
		return -ENOMEM;
	snprintf(entry->child.table, sizeof entry->child.table, "%s", head->name);
	return 0;
}

int changes_list_row_tables(struct mountfs *mount, struct node *directory, struct lister *lister)
{
	struct store_snapshot *snapshot = NULL;
	int rc = view_snapshot(mount, &directory->view, &snapshot);
	struct row_tables tables = { lister };
	if (rc == 0)
		rc = store_snapshot_heads(snapshot, false, row_table, &tables);
	store_snapshot_release(snapshot);
	return rc < 0 ? rc : 0;
}

int changes_resolve_row_tables(struct mountfs *mount, struct node *parent, const char *name, struct child *out)
{
	if (!names_table_valid(name))
		return -ENOENT;
	struct store_snapshot *snapshot = NULL;
	struct head_row head;
	int rc = view_snapshot(mount, &parent->view, &snapshot);
	if (rc == 0)
		rc = view_head(mount, snapshot, name, &head);
	store_snapshot_release(snapshot);
	if (rc < 0)
		return rc;
	out->kind = NODE_BY_ID_TABLE_DIR;
	snprintf(out->table, sizeof out->table, "%s", name);
	return 0;
}

static int row_file(const uint8_t *id, size_t id_size, void *context)
{
	struct lister *lister = context;
	char name[GRAPHFS_NAME_MAX + 1];
	if (!names_graph_id_encode(id, id_size, name) || strlen(name) + 6 > GRAPHFS_NAME_MAX)
		return 0;   /* too long a name: reach it through tables/ */
	strcat(name, ".jsonl");
	return listing_add_lean(lister, name, NODE_BY_ID_FILE);   /* child: the directory's table */
}

/* Lists the rows a node table has now (ids of deleted rows resolve, but are not listed). */
int changes_list_rows(struct mountfs *mount, struct node *directory, struct lister *lister)
{
	struct store_snapshot *snapshot = NULL;
	int rc = view_snapshot(mount, &directory->view, &snapshot);
	if (rc == 0)
		rc = store_graph_node_ids(snapshot, directory->table, row_file, lister);
	store_snapshot_release(snapshot);
	return rc == -ENOENT ? 0 : rc < 0 ? rc : 0;   /* an edge table: nothing listed */
}

/* The id a history/by-id/<Table>/<name> names. */
static bool row_id(const char *name, struct buf *id)
{
	size_t length = strlen(name);
	if (length <= 6 || strcmp(name + length - 6, ".jsonl") != 0)
		return false;
	char encoded[GRAPHFS_NAME_MAX + 1];
	snprintf(encoded, sizeof encoded, "%.*s", (int)(length - 6), name);
	return names_graph_id_decode(encoded, id);
}

int changes_render_row(struct mountfs *mount, const struct node *node, struct store_snapshot *snapshot,
		       struct buf *out)
{
	struct buf id;
	buf_init(&id);
	int rc = row_id(node->name, &id) ? store_row_history(snapshot, node->table, id.data, id.size, append_line, out)
					 : -ENOENT;
	buf_free(&id);
	return rc;
}

int changes_resolve_row(struct mountfs *mount, struct node *parent, const char *name, struct child *out)
{
	struct buf id, lines;
	buf_init(&id);
	buf_init(&lines);
	struct store_snapshot *snapshot = NULL;
	int rc = row_id(name, &id) ? view_snapshot(mount, &parent->view, &snapshot) : -ENOENT;
	if (rc == 0)
		rc = store_row_history(snapshot, parent->table, id.data, id.size, append_line, &lines);
	if (rc == 0 && lines.size == 0)
		rc = -ENOENT;   /* never a row of the table */
	store_snapshot_release(snapshot);
	buf_free(&id);
	buf_free(&lines);
	if (rc < 0)
		return rc;
	out->kind = NODE_BY_ID_FILE;
	snprintf(out->table, sizeof out->table, "%s", parent->table);
	return 0;
}
