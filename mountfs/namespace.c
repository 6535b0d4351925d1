/*
 * namespace — the mounted tree, declared once.
 *
 * Every node kind has one entry in node_classes[]: its fixed name and the
 * parents that have it (or none: the name comes from a pattern its parent's
 * resolve callback recognises), whether it is a directory, whether it can be
 * written, and its callbacks — a directory's resolve (names that are not
 * fixed children) and list (the entries that are not fixed children), a
 * file's attr. Resolving a name, listing a directory and filling attributes
 * are three loops over this table; a new subtree is one entry per node kind
 * plus its callbacks. docs/MOUNT.md describes each path.
 *
 * Invariants:
 *   1. A name resolves to at most one kind, and readdir lists exactly the
 *      names that resolve (modulo changes between the two calls).
 *   2. Every listed entry has a non-zero inode number, the same number a
 *      lookup of it gives (plain READDIR and READDIRPLUS alike), so readdir(3),
 *      which skips entries with d_ino 0, sees them all.
 *   3. Sizes are the exact byte length reads return.
 *   4. Nothing on the path of `ls`/`cat heads/<all>` does work that grows with
 *      history: heads come from the snapshot's heads tree, never the log.
 *   5. Everything under history/ is read-only and cached by the kernel for
 *      GRAPHFS_HISTORY_TIMEOUT.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mountfs_int.h"

#define PARENT(kind) (UINT64_C(1) << (kind))
#define ROOTS (PARENT(NODE_ROOT) | PARENT(NODE_BRANCH_ROOT) | PARENT(NODE_VERSION_ROOT) | PARENT(NODE_TAG_ROOT))
#define LIVE_ROOTS (PARENT(NODE_ROOT) | PARENT(NODE_BRANCH_ROOT))

enum class_flags {
	CLASS_DIRECTORY = 1 << 0,
	CLASS_WRITABLE = 1 << 1,    /* writable when live on a writable mount */
	CLASS_HEAD_ATTR = 1 << 2,   /* attributes come from the table's head row */
	CLASS_MOUNT_WIDE = 1 << 3,  /* renders the mount's own state: no snapshot */
};

struct lister;

struct node_class {
	const char *name;           /* fixed name in its parents, NULL: a pattern */
	const char *shown_as;       /* the pattern, for messages */
	uint64_t parents;           /* fixed names: PARENT() of the kinds that have it */
	unsigned flags;
	/* directories: names other than the fixed children, and listing them */
	int (*resolve)(struct mountfs *mount, struct node *parent, const char *name, struct child *out);
	int (*list)(struct mountfs *mount, struct node *directory, struct lister *lister);
	/* files: attributes beyond the common ones, what opening gives, the bytes of
	 * read-only renderings */
	int (*attr)(struct mountfs *mount, struct node *node, struct stat *st);
	enum node_content content;
	view_render_fn render;
};

static int resolve_tables(struct mountfs *, struct node *, const char *, struct child *);
static int resolve_heads(struct mountfs *, struct node *, const char *, struct child *);
static int resolve_dropped(struct mountfs *, struct node *, const char *, struct child *);
static int resolve_schema(struct mountfs *, struct node *, const char *, struct child *);
static int resolve_staging(struct mountfs *, struct node *, const char *, struct child *);
static int resolve_history(struct mountfs *, struct node *, const char *, struct child *);
static int resolve_branches(struct mountfs *, struct node *, const char *, struct child *);
static int resolve_tags(struct mountfs *, struct node *, const char *, struct child *);
static int list_tags(struct mountfs *, struct node *, struct lister *);
static int list_tables(struct mountfs *, struct node *, struct lister *);
static int list_head_files(struct mountfs *, struct node *, struct lister *);
static int list_dropped(struct mountfs *, struct node *, struct lister *);
static int list_schema(struct mountfs *, struct node *, struct lister *);
static int list_staging(struct mountfs *, struct node *, struct lister *);
static int list_history(struct mountfs *, struct node *, struct lister *);
static int list_branches(struct mountfs *, struct node *, struct lister *);
static int attr_table(struct mountfs *, struct node *, struct stat *);
static int attr_head(struct mountfs *, struct node *, struct stat *);
static int attr_schema(struct mountfs *, struct node *, struct stat *);
static int attr_log(struct mountfs *, struct node *, struct stat *);
static int attr_scratch(struct mountfs *, struct node *, struct stat *);
static int attr_rendered(struct mountfs *, struct node *, struct stat *);
static int attr_feed(struct mountfs *, struct node *, struct stat *);
static int attr_commit_file(struct mountfs *, struct node *, struct stat *);
static int attr_link(struct mountfs *, struct node *, struct stat *);
static int attr_graph_link(struct mountfs *, struct node *, struct stat *);

static const struct node_class node_classes[] = {
	/* (parents is a bit set of node kinds: there must be at most 64 kinds) */
	[NODE_ROOT] = { NULL, "/", 0, CLASS_DIRECTORY | CLASS_WRITABLE },
	[NODE_BRANCH_ROOT] = { NULL, "branches/<branch>", 0, CLASS_DIRECTORY | CLASS_WRITABLE },
	[NODE_VERSION_ROOT] = { NULL, "history/@<version>", 0, CLASS_DIRECTORY },
	[NODE_TABLES_DIR] = { "tables", NULL, ROOTS, CLASS_DIRECTORY | CLASS_WRITABLE,
			      resolve_tables, list_tables },
	[NODE_HEADS_DIR] = { "heads", NULL, ROOTS, CLASS_DIRECTORY, resolve_heads, list_head_files },
	[NODE_DROPPED_DIR] = { ".dropped", NULL, PARENT(NODE_HEADS_DIR), CLASS_DIRECTORY,
			       resolve_dropped, list_dropped },
	[NODE_SCHEMA_DIR] = { "schema", NULL, ROOTS, CLASS_DIRECTORY | CLASS_WRITABLE,
			      resolve_schema, list_schema },
	[NODE_STAGING_DIR] = { "staging", NULL, LIVE_ROOTS, CLASS_DIRECTORY | CLASS_WRITABLE,
			       resolve_staging, list_staging },
	[NODE_STAGED_SCHEMA_DIR] = { "schema", NULL, PARENT(NODE_STAGING_DIR), CLASS_DIRECTORY | CLASS_WRITABLE,
				     resolve_staging, list_staging },
	[NODE_HISTORY_DIR] = { "history", NULL, LIVE_ROOTS, CLASS_DIRECTORY, resolve_history,
			       list_history },
	[NODE_BRANCHES_DIR] = { "branches", NULL, PARENT(NODE_ROOT), CLASS_DIRECTORY | CLASS_WRITABLE,
				resolve_branches, list_branches },
	[NODE_META_DIR] = { ".graphfs", NULL, PARENT(NODE_ROOT), CLASS_DIRECTORY },
	[NODE_TABLE_FILE] = { NULL, "tables/<Name>.jsonl", 0, CLASS_WRITABLE | CLASS_HEAD_ATTR,
			      NULL, NULL, attr_table, CONTENT_TABLE },
	[NODE_HEAD_FILE] = { NULL, "heads/<Name>.json", 0, CLASS_HEAD_ATTR, NULL, NULL, attr_head,
			     CONTENT_RENDERED, view_render_head },
	[NODE_DROPPED_FILE] = { NULL, "heads/.dropped/<Name>.<incarnation>.json", 0, CLASS_HEAD_ATTR,
				NULL, NULL, attr_head, CONTENT_RENDERED, view_render_head },
	[NODE_SCHEMA_FILE] = { NULL, "schema/<Name>.json", 0, CLASS_WRITABLE, NULL, NULL, attr_schema,
			       CONTENT_SCHEMA, view_render_schema },
	[NODE_LOG_FILE] = { "log", NULL, ROOTS, 0, NULL, NULL, attr_log, CONTENT_RENDERED, view_render_log },
	[NODE_STAGED_FILE] = { NULL, "staging/<Name>.jsonl", 0, CLASS_WRITABLE, NULL, NULL, attr_scratch,
			       CONTENT_SCRATCH },
	[NODE_COMMIT_FILE] = { ".commit", NULL, PARENT(NODE_STAGING_DIR), CLASS_WRITABLE, NULL, NULL,
			       attr_commit_file, CONTENT_COMMIT },
	[NODE_SCRATCH_FILE] = { NULL, "a scratch name", 0, CLASS_WRITABLE, NULL, NULL, attr_scratch,
				CONTENT_SCRATCH },
	[NODE_STATS_FILE] = { "stats", NULL, PARENT(NODE_META_DIR), CLASS_MOUNT_WIDE, NULL, NULL,
			      attr_rendered, CONTENT_RENDERED, view_render_stats },
	[NODE_ERRORS_FILE] = { "errors", NULL, PARENT(NODE_META_DIR), CLASS_MOUNT_WIDE, NULL, NULL,
			       attr_rendered, CONTENT_RENDERED, view_render_errors },
	[NODE_VERSION_FILE] = { "version", NULL, PARENT(NODE_META_DIR), CLASS_MOUNT_WIDE, NULL, NULL,
				attr_rendered, CONTENT_RENDERED, view_render_version },
	[NODE_FEED_FILE] = { "feed", NULL, PARENT(NODE_META_DIR), CLASS_MOUNT_WIDE, NULL, NULL,
			     attr_feed, CONTENT_FEED },
	[NODE_COMMIT_LINK] = { NULL, "history/<commit>", 0, 0, NULL, NULL, attr_link },
	[NODE_TAGS_DIR] = { "tags", NULL, PARENT(NODE_ROOT), CLASS_DIRECTORY | CLASS_WRITABLE, resolve_tags, list_tags },
	[NODE_TAG_ROOT] = { NULL, "tags/<tag>", 0, CLASS_DIRECTORY },
	/* graph/ (graph.c) */
	[NODE_GRAPH_DIR] = { "graph", NULL, ROOTS, CLASS_DIRECTORY, graph_resolve_tables, graph_list_tables },
	[NODE_GRAPH_TABLE_DIR] = { NULL, "graph/<Node>", 0, CLASS_DIRECTORY, graph_resolve_nodes, graph_list_nodes },
	[NODE_GRAPH_NODE_DIR] = { NULL, "graph/<Node>/<id>", 0, CLASS_DIRECTORY },
	[NODE_GRAPH_ROW_FILE] = { "row.json", NULL, PARENT(NODE_GRAPH_NODE_DIR), 0, NULL, NULL, attr_rendered,
				  CONTENT_RENDERED, graph_render_row },
	[NODE_GRAPH_OUT_DIR] = { "out", NULL, PARENT(NODE_GRAPH_NODE_DIR), CLASS_DIRECTORY, graph_resolve_edge_tables,
				 graph_list_edge_tables },
	[NODE_GRAPH_IN_DIR] = { "in", NULL, PARENT(NODE_GRAPH_NODE_DIR), CLASS_DIRECTORY, graph_resolve_edge_tables,
				graph_list_edge_tables },
	[NODE_GRAPH_EDGES_FILE] = { NULL, "graph/<Node>/<id>/out/<Edge>.jsonl", 0, 0, NULL, NULL, attr_rendered,
				    CONTENT_RENDERED, graph_render_edges },
	[NODE_GRAPH_NEIGHBOURS_DIR] = { NULL, "graph/<Node>/<id>/out/<Edge>", 0, CLASS_DIRECTORY,
					graph_resolve_neighbours, graph_list_neighbours },
	[NODE_GRAPH_NEIGHBOUR_LINK] = { NULL, "graph/<Node>/<id>/out/<Edge>/<other-id>", 0, 0, NULL, NULL,
					attr_graph_link },
	/* diff/, merge/, history/by-id/ (changes.c) */
	[NODE_DIFF_DIR] = { "diff", NULL, LIVE_ROOTS, CLASS_DIRECTORY, changes_resolve_diffs },
	[NODE_DIFF_ROOT] = { NULL, "diff/<A>..<B>", 0, CLASS_DIRECTORY, changes_resolve_diff, changes_list_diff },
	[NODE_DIFF_FILE] = { NULL, "diff/<A>..<B>/<Name>.jsonl", 0, 0, NULL, NULL, attr_rendered, CONTENT_RENDERED,
			     changes_render_diff },
	[NODE_DIFF_TABLES_FILE] = { ".tables.jsonl", NULL, PARENT(NODE_DIFF_ROOT), 0, NULL, NULL, attr_rendered,
				    CONTENT_RENDERED, changes_render_diff_tables },
	[NODE_MERGE_DIR] = { "merge", NULL, LIVE_ROOTS, CLASS_DIRECTORY, changes_resolve_merges, changes_list_merges },
	[NODE_MERGE_ROOT] = { NULL, "merge/<source>", 0, CLASS_DIRECTORY },
	[NODE_MERGE_STATUS_FILE] = { "status", NULL, PARENT(NODE_MERGE_ROOT), 0, NULL, NULL, attr_rendered,
				     CONTENT_RENDERED, changes_render_merge_status },
	[NODE_MERGE_TABLES_DIR] = { "tables", NULL, PARENT(NODE_MERGE_ROOT), CLASS_DIRECTORY, changes_resolve_merge_file,
				    changes_list_merge_files },
	[NODE_MERGE_TABLE_FILE] = { NULL, "merge/<source>/tables/<Name>.jsonl", 0, 0, NULL, NULL, attr_rendered,
				    CONTENT_RENDERED, changes_render_merge_file },
	[NODE_MERGE_CONFLICTS_DIR] = { "conflicts", NULL, PARENT(NODE_MERGE_ROOT), CLASS_DIRECTORY,
				       changes_resolve_merge_file, changes_list_merge_files },
	[NODE_MERGE_CONFLICT_FILE] = { NULL, "merge/<source>/conflicts/<Name>.jsonl", 0, 0, NULL, NULL, attr_rendered,
				       CONTENT_RENDERED, changes_render_merge_file },
	[NODE_MERGE_COMMIT_FILE] = { ".commit", NULL, PARENT(NODE_MERGE_ROOT), CLASS_WRITABLE, NULL, NULL,
				     attr_commit_file, CONTENT_COMMIT },
	[NODE_BY_ID_DIR] = { "by-id", NULL, PARENT(NODE_HISTORY_DIR), CLASS_DIRECTORY, changes_resolve_row_tables,
			     changes_list_row_tables },
	[NODE_BY_ID_TABLE_DIR] = { NULL, "history/by-id/<Table>", 0, CLASS_DIRECTORY, changes_resolve_row,
				   changes_list_rows },
	[NODE_BY_ID_FILE] = { NULL, "history/by-id/<Table>/<id>.jsonl", 0, 0, NULL, NULL, attr_rendered,
			      CONTENT_RENDERED, changes_render_row },
};

#define CLASS_COUNT (sizeof node_classes / sizeof node_classes[0])
_Static_assert(CLASS_COUNT <= 64, "node_class.parents holds one bit per node kind");

bool namespace_is_directory(enum node_kind kind)
{
	return (size_t)kind < CLASS_COUNT && (node_classes[kind].flags & CLASS_DIRECTORY);
}

bool namespace_shows_head(enum node_kind kind)
{
	return (size_t)kind < CLASS_COUNT && (node_classes[kind].flags & CLASS_HEAD_ATTR);
}

bool namespace_is_graph(enum node_kind kind)
{
	return kind >= NODE_GRAPH_TABLE_DIR && kind <= NODE_GRAPH_NEIGHBOUR_LINK;
}

bool namespace_is_link(enum node_kind kind)
{
	return kind == NODE_COMMIT_LINK || kind == NODE_GRAPH_NEIGHBOUR_LINK;
}

int namespace_readlink(struct mountfs *mount, const struct node *node, char *out, size_t size)
{
	if (node->kind == NODE_COMMIT_LINK) {
		snprintf(out, size, "@%" PRIu64, node->version_target);
		return 0;
	}
	if (node->kind == NODE_GRAPH_NEIGHBOUR_LINK)
		return graph_link_target(mount, node, out, size);
	return -EINVAL;
}

enum node_content namespace_content_of(enum node_kind kind)
{
	return (size_t)kind < CLASS_COUNT ? node_classes[kind].content : CONTENT_NONE;
}

int namespace_render(struct mountfs *mount, const struct node *node, struct buf *out)
{
	const struct node_class *class = &node_classes[node->kind];
	if (!class->render)
		return -EINVAL;
	if (class->flags & CLASS_MOUNT_WIDE)
		return class->render(mount, node, NULL, out);
	struct store_snapshot *snapshot = NULL;
	int rc = view_snapshot(mount, &node->view, &snapshot);
	if (rc == 0)
		rc = class->render(mount, node, snapshot, out);
	store_snapshot_release(snapshot);
	return rc;
}

bool namespace_is_live(const struct node *node)
{
	return node->view.version == 0;
}

bool namespace_is_writable(const struct mountfs *mount, const struct node *node)
{
	return !mount->read_only && namespace_is_live(node) && (node_classes[node->kind].flags & CLASS_WRITABLE);
}

double namespace_timeout(const struct node *node)
{
	/* A tag's name can be deleted and made again elsewhere: the entry tags/<tag>
	 * expires like a live one, while everything under it (its inodes carry the
	 * tag's version) is as immutable as history. */
	if (node->kind == NODE_TAG_ROOT)
		return GRAPHFS_LIVE_TIMEOUT;
	return namespace_is_live(node) ? GRAPHFS_LIVE_TIMEOUT : GRAPHFS_HISTORY_TIMEOUT;
}

/* ---- resolving ----------------------------------------------------------------- */

struct branch_search {
	const char *name;
	struct store_branch_info info;
	bool found;
};

static int branch_visit(const struct store_branch_info *branch, void *context)
{
	struct branch_search *search = context;
	if (strcmp(branch->name, search->name) == 0) {
		search->info = *branch;
		search->found = true;
		return 1;
	}
	return 0;
}

static int branch_info(struct mountfs *mount, const char *name, struct store_branch_info *out)
{
	struct branch_search search = { .name = name };
	int rc = store_branches(mount->store, branch_visit, &search);
	if (rc < 0)
		return rc;
	if (!search.found)
		return -ENOENT;
	if (out)
		*out = search.info;
	return 0;
}

/* Whether the commit at version on commit_branch is in branch's history. */
static bool commit_in_branch(struct mountfs *mount, const char *branch, const char *commit_branch,
			     uint64_t version)
{
	char current[JOURNAL_NAME_MAX + 1];
	uint64_t limit = UINT64_MAX;
	snprintf(current, sizeof current, "%s", branch);
	for (int depth = 0; depth < 64; depth++) {
		if (strcmp(current, commit_branch) == 0)
			return version <= limit;
		struct store_branch_info info;
		if (branch_info(mount, current, &info) < 0 || !info.forked_from[0])
			return false;
		if (info.fork_point < limit)
			limit = info.fork_point;
		snprintf(current, sizeof current, "%s", info.forked_from);
	}
	return false;
}

static bool parse_version(const char *text, uint64_t *out)
{
	if (text[0] != '@' || text[1] < '1' || text[1] > '9')
		return false;
	char *end = NULL;
	errno = 0;
	unsigned long long value = strtoull(text + 1, &end, 10);
	if (errno || *end)
		return false;
	*out = value;
	return true;
}

/* Reads the live head of table into child (0, -ENOENT, -errno). */
static int head_exists(struct mountfs *mount, const struct view *view, const char *table,
		       struct child *child)
{
	struct store_snapshot *snapshot = NULL;
	int rc = view_snapshot(mount, view, &snapshot);
	if (rc < 0)
		return rc;
	rc = view_head(mount, snapshot, table, &child->head);
	store_snapshot_release(snapshot);
	child->has_head = rc == 0;
	return rc;
}

/* A scratch file of a live directory: NODE_SCRATCH_FILE / NODE_STAGED_FILE. */
static bool resolve_scratch(struct mountfs *mount, struct node *parent, const char *name,
			    struct child *out)
{
	if (!namespace_is_live(parent))
		return false;
	struct scratch *scratch = scratch_find(mount, parent, name);
	if (!scratch)
		return false;
	out->kind = scratch->staged ? NODE_STAGED_FILE : NODE_SCRATCH_FILE;
	if (scratch->staged)
		snprintf(out->table, sizeof out->table, "%s", scratch->table);
	scratch_release(scratch);
	return true;
}

static int resolve_tables(struct mountfs *mount, struct node *parent, const char *name, struct child *out)
{
	if (resolve_scratch(mount, parent, name, out))
		return 0;
	if (!names_table_from_file(name, ".jsonl", out->table))
		return -ENOENT;
	out->kind = NODE_TABLE_FILE;
	if (namespace_is_live(parent)) {
		if (scratch_pending_find(mount, parent->view.branch, SCRATCH_TABLES, out->table, NULL))
			return 0;
		if (scratch_hidden(mount, parent->view.branch, out->table))
			return -ENOENT;
	}
	return head_exists(mount, &parent->view, out->table, out);
}

static int resolve_heads(struct mountfs *mount, struct node *parent, const char *name, struct child *out)
{
	if (!names_table_from_file(name, ".json", out->table))
		return -ENOENT;
	out->kind = NODE_HEAD_FILE;
	return head_exists(mount, &parent->view, out->table, out);
}

static int resolve_dropped(struct mountfs *mount, struct node *parent, const char *name, struct child *out)
{
	struct store_snapshot *snapshot = NULL;
	int rc = view_snapshot(mount, &parent->view, &snapshot);
	if (rc < 0)
		return rc;
	rc = view_dropped_head(snapshot, name, &out->head);
	store_snapshot_release(snapshot);
	if (rc < 0)
		return rc;
	out->kind = NODE_DROPPED_FILE;
	out->has_head = true;
	snprintf(out->table, sizeof out->table, "%s", out->head.name);
	return 0;
}

static int resolve_schema(struct mountfs *mount, struct node *parent, const char *name, struct child *out)
{
	if (resolve_scratch(mount, parent, name, out))
		return 0;
	if (!names_table_from_file(name, ".json", out->table))
		return -ENOENT;
	out->kind = NODE_SCHEMA_FILE;
	if (namespace_is_live(parent) && scratch_pending_find(mount, parent->view.branch, SCRATCH_SCHEMA, out->table, NULL))
		return 0;
	return head_exists(mount, &parent->view, out->table, out);
}

static int resolve_staging(struct mountfs *mount, struct node *parent, const char *name, struct child *out)
{
	return resolve_scratch(mount, parent, name, out) ? 0 : -ENOENT;
}

/* history/@<time>: a link to the version of the branch's state at that time
 * (not listed; resolved again whenever the kernel asks, as later commits can
 * answer a time in the future differently). */
static int resolve_time_link(struct mountfs *mount, struct node *parent, const char *name, struct child *out)
{
	uint64_t time_us, version;
	if (name[0] != '@' || store_time_parse(name + 1, &time_us) < 0)
		return -ENOENT;
	struct error_info error;
	error_info_clear(&error);
	if (store_version_at_time(mount->store, parent->view.branch, time_us, &version, &error) < 0)
		return -ENOENT;
	out->kind = NODE_COMMIT_LINK;
	out->version_target = version;
	return 0;
}

static int resolve_history(struct mountfs *mount, struct node *parent, const char *name, struct child *out)
{
	uint64_t version = 0;
	int rc;
	if (parse_version(name, &version)) {
		struct view view = { .version = version };
		snprintf(view.branch, sizeof view.branch, "%s", parent->view.branch);
		struct store_snapshot *snapshot = NULL;
		rc = view_snapshot(mount, &view, &snapshot);
		uint64_t horizon = rc == -ENOENT ? store_horizon(mount->store) : 0;
		if (rc == -ENOENT && version <= horizon) {
			char path[4096];
			inode_path(mount, parent, path, sizeof path - 64);
			snprintf(path + strlen(path), 64, "%s%s", path[0] ? "/" : "", name);
			mount_error_refuse(mount, path, -ENOENT, "version %llu of branch %s was reclaimed by gc (horizon %llu)",
					   (unsigned long long)version, view.branch, (unsigned long long)horizon);
		}
		if (rc < 0)
			return rc == -EINVAL ? -ENOENT : rc;
		store_snapshot_release(snapshot);
		out->kind = NODE_VERSION_ROOT;
		out->view = view;
		return 0;
	}
	if (name[0] == '@')
		return resolve_time_link(mount, parent, name, out);
	if (strlen(name) != ULID_TEXT_SIZE - 1)
		return -ENOENT;
	char commit_branch[JOURNAL_NAME_MAX + 1];
	rc = store_commit_find(mount->store, name, &version, commit_branch);
	if (rc < 0)
		return -ENOENT;
	if (!commit_in_branch(mount, parent->view.branch, commit_branch, version))
		return -ENOENT;
	out->kind = NODE_COMMIT_LINK;
	out->version_target = version;
	return 0;
}

/* tags/<tag>: the tagged state, immutable like history/@V. */
static int resolve_tags(struct mountfs *mount, struct node *parent, const char *name, struct child *out)
{
	struct store_tag_info *tag = malloc(sizeof *tag);
	if (!tag)
		return -ENOMEM;
	int rc = store_tag_find(mount->store, name, tag);
	if (rc == 0) {
		out->kind = NODE_TAG_ROOT;
		memset(&out->view, 0, sizeof out->view);
		snprintf(out->view.branch, sizeof out->view.branch, "%s", tag->branch);
		snprintf(out->view.tag, sizeof out->view.tag, "%s", tag->name);
		out->view.version = tag->version;
		out->time_us = tag->time_us;
	}
	free(tag);
	return rc;
}

static int resolve_branches(struct mountfs *mount, struct node *parent, const char *name, struct child *out)
{
	if (!names_table_valid(name))
		return -ENOENT;
	int rc = branch_info(mount, name, NULL);
	if (rc < 0)
		return rc;
	out->kind = NODE_BRANCH_ROOT;
	snprintf(out->view.branch, sizeof out->view.branch, "%s", name);
	out->view.version = 0;
	return 0;
}

int namespace_resolve(struct mountfs *mount, struct node *parent, const char *name, struct child *out)
{
	memset(out, 0, sizeof *out);
	out->view = parent->view;
	if (strlen(name) > GRAPHFS_NAME_MAX)
		return -ENAMETOOLONG;
	if (!namespace_is_directory(parent->kind))
		return -ENOTDIR;
	for (size_t kind = 0; kind < CLASS_COUNT; kind++) {
		const struct node_class *class = &node_classes[kind];
		if (class->name && (class->parents & PARENT(parent->kind)) && strcmp(class->name, name) == 0) {
			out->kind = (enum node_kind)kind;
			return 0;
		}
	}
	const struct node_class *class = &node_classes[parent->kind];
	return class->resolve ? class->resolve(mount, parent, name, out) : -ENOENT;
}

/* ---- attributes ------------------------------------------------------------------ */

static void set_time(struct stat *st, uint64_t time_us)
{
	st->st_mtim.tv_sec = (time_t)(time_us / 1000000);
	st->st_mtim.tv_nsec = (long)(time_us % 1000000) * 1000;
	st->st_ctim = st->st_mtim;
	st->st_atim = st->st_mtim;
}

void namespace_attr_base(struct mountfs *mount, const struct node *node, struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_ino = node->st_ino;
	st->st_uid = mount->uid;
	st->st_gid = mount->gid;
	st->st_blksize = 512 * 1024;
	st->st_mtim = mount->mount_time;
	st->st_ctim = mount->mount_time;
	st->st_atim = mount->mount_time;
	bool writable = namespace_is_writable(mount, node);
	if (namespace_is_directory(node->kind)) {
		st->st_mode = S_IFDIR | ((writable ? 0777 : 0555) & ~mount->umask);
		st->st_nlink = 2;
	} else {
		st->st_mode = S_IFREG | ((writable ? 0666 : 0444) & ~mount->umask);
		st->st_nlink = 1;
	}
}

/* Attributes of table, head and dropped-head files from a head row already read. */
static int attr_from_head(const struct node *node, const struct head_row *head, struct stat *st)
{
	set_time(st, head->commit_time_us);
	if (node->kind == NODE_TABLE_FILE) {
		st->st_size = (off_t)head->byte_size;
	} else {
		struct buf rendered;
		buf_init(&rendered);
		int rc = journal_head_row_render_json(head, &rendered);
		st->st_size = (off_t)rendered.size;
		buf_free(&rendered);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* A live table or schema name an open handle is creating: its size so far. */
static bool pending_attr(struct mountfs *mount, struct node *node, struct stat *st)
{
	uint64_t size = 0;
	if (!namespace_is_live(node))
		return false;
	enum scratch_dir directory = node->kind == NODE_TABLE_FILE ? SCRATCH_TABLES : SCRATCH_SCHEMA;
	if (!scratch_pending_find(mount, node->view.branch, directory, node->table, &size))
		return false;
	st->st_size = (off_t)size;
	return true;
}

int namespace_head(struct mountfs *mount, const struct node *node, struct head_row *out)
{
	struct store_snapshot *snapshot = NULL;
	int rc = view_snapshot(mount, &node->view, &snapshot);
	if (rc < 0)
		return rc;
	rc = node->kind == NODE_DROPPED_FILE ? view_dropped_head(snapshot, node->name, out)
					     : view_head(mount, snapshot, node->table, out);
	store_snapshot_release(snapshot);
	return rc;
}

static int attr_table(struct mountfs *mount, struct node *node, struct stat *st)
{
	if (namespace_is_live(node) && scratch_hidden(mount, node->view.branch, node->table) &&
	    !scratch_pending_find(mount, node->view.branch, SCRATCH_TABLES, node->table, NULL))
		return -ENOENT;
	struct head_row head;
	int rc = namespace_head(mount, node, &head);
	if (rc == 0)
		return attr_from_head(node, &head, st);
	if (rc == -ENOENT && pending_attr(mount, node, st))
		return 0;
	return rc;
}

/* heads/<Name>.json and heads/.dropped/<Name>.<incarnation>.json */
static int attr_head(struct mountfs *mount, struct node *node, struct stat *st)
{
	struct head_row head;
	int rc = namespace_head(mount, node, &head);
	return rc < 0 ? rc : attr_from_head(node, &head, st);
}

static int attr_schema(struct mountfs *mount, struct node *node, struct stat *st)
{
	struct store_snapshot *snapshot = NULL;
	int rc = view_snapshot(mount, &node->view, &snapshot);
	if (rc < 0)
		return rc;
	struct head_row head;
	struct buf rendered;
	buf_init(&rendered);
	rc = view_head(mount, snapshot, node->table, &head);
	if (rc == 0) {
		set_time(st, head.commit_time_us);
		rc = view_render_schema(mount, node, snapshot, &rendered);
		st->st_size = (off_t)rendered.size;
	}
	buf_free(&rendered);
	store_snapshot_release(snapshot);
	if (rc == -ENOENT && pending_attr(mount, node, st))
		return 0;
	return rc;
}

static int attr_log(struct mountfs *mount, struct node *node, struct stat *st)
{
	struct store_snapshot *snapshot = NULL;
	int rc = view_snapshot(mount, &node->view, &snapshot);
	if (rc < 0)
		return rc;
	struct buf rendered;
	buf_init(&rendered);
	set_time(st, store_snapshot_time_us(snapshot));
	rc = view_render_log(mount, node, snapshot, &rendered);
	st->st_size = (off_t)rendered.size;
	buf_free(&rendered);
	store_snapshot_release(snapshot);
	return rc;
}

void namespace_bind_scratch(struct mountfs *mount, struct node *node)
{
	struct scratch *scratch = scratch_find(mount, node->parent, node->name);
	if (!scratch)
		return;
	pthread_mutex_lock(&mount->inodes.lock);
	struct scratch *old = node->scratch;
	node->scratch = scratch;
	pthread_mutex_unlock(&mount->inodes.lock);
	if (old)
		scratch_put(old);
}

static int attr_scratch(struct mountfs *mount, struct node *node, struct stat *st)
{
	struct scratch *scratch = scratch_find(mount, node->parent, node->name);
	if (!scratch) {
		/* Removed or renamed over: a node bound to it still answers (an open
		 * descriptor's fstat asks by node). */
		pthread_mutex_lock(&mount->inodes.lock);
		scratch = node->scratch;
		if (scratch)
			scratch->references++;
		pthread_mutex_unlock(&mount->inodes.lock);
		if (!scratch)
			return -ENOENT;
	}
	scratch_attr(scratch, st);
	scratch_put(scratch);
	return 0;
}

static int attr_rendered(struct mountfs *mount, struct node *node, struct stat *st)
{
	struct buf rendered;
	buf_init(&rendered);
	int rc = namespace_render(mount, node, &rendered);
	st->st_size = (off_t)rendered.size;
	buf_free(&rendered);
	return rc;
}

static int attr_feed(struct mountfs *mount, struct node *node, struct stat *st)
{
	uint64_t size = 0;
	int rc = feed_size(mount, &size);
	st->st_size = (off_t)size;
	return rc;
}

static int attr_commit_file(struct mountfs *mount, struct node *node, struct stat *st)
{
	return 0;
}

static int attr_link(struct mountfs *mount, struct node *node, struct stat *st)
{
	char target[32];
	st->st_mode = S_IFLNK | 0777;
	st->st_size = snprintf(target, sizeof target, "@%" PRIu64, node->version_target);
	return 0;
}

static int attr_graph_link(struct mountfs *mount, struct node *node, struct stat *st)
{
	char target[2 * GRAPHFS_NAME_MAX + 32];
	int rc = graph_link_target(mount, node, target, sizeof target);
	st->st_mode = S_IFLNK | 0777;
	st->st_size = rc == 0 ? (off_t)strlen(target) : 0;
	return rc;
}

static bool time_later(struct timespec a, struct timespec b)
{
	return a.tv_sec > b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec > b.tv_nsec);
}

/* A directory's times: for a live view, the last time this mount saw its branch
 * change (a commit it made, or one a refresh found) or a scratch name in it come
 * or go; for a version, its commit's time once a listing told it. No store I/O:
 * a stat costs the same at any history depth. */
static void attr_directory(struct mountfs *mount, struct node *node, struct stat *st)
{
	struct timespec newest = mount->mount_time;
	if ((node->kind == NODE_VERSION_ROOT || node->kind == NODE_TAG_ROOT) && node->time_us) {
		newest.tv_sec = (time_t)(node->time_us / 1000000);
		newest.tv_nsec = (long)(node->time_us % 1000000) * 1000;
	} else if (namespace_is_live(node) && node->kind != NODE_META_DIR) {
		struct workspace *workspace = scratch_workspace_get(mount, node->view.branch);
		if (workspace) {
			struct timespec changed = scratch_workspace_changed(workspace);
			if (time_later(changed, newest))
				newest = changed;
		}
	}
	st->st_mtim = st->st_ctim = st->st_atim = newest;
}

int namespace_attr(struct mountfs *mount, struct node *node, struct stat *st)
{
	namespace_attr_base(mount, node, st);
	if (namespace_is_directory(node->kind))
		attr_directory(mount, node, st);
	const struct node_class *class = &node_classes[node->kind];
	int rc = class->attr ? class->attr(mount, node, st) : 0;
	st->st_ino = node->st_ino;
	st->st_blocks = (st->st_size + 511) / 512;
	return rc < 0 ? rc : 0;
}

/* The attributes of a child resolved with its head row, without store I/O. */
static int attr_of_child(struct mountfs *mount, struct node *node, const struct child *child,
			 struct stat *st)
{
	if (!child->has_head || !(node_classes[node->kind].flags & CLASS_HEAD_ATTR))
		return namespace_attr(mount, node, st);
	namespace_attr_base(mount, node, st);
	int rc = attr_from_head(node, &child->head, st);
	st->st_blocks = (st->st_size + 511) / 512;
	return rc;
}

int namespace_entry(struct mountfs *mount, struct node *parent, const char *name,
		    const struct child *child, struct mountfs_entry *entry, struct node **out)
{
	struct node *node = inode_get(mount, parent, name, child->kind, &child->view, child->table, 1);
	if (!node)
		return -ENOMEM;
	node->version_target = child->version_target;
	if (child->time_us)
		node->time_us = child->time_us;
	if (child->kind == NODE_SCRATCH_FILE || child->kind == NODE_STAGED_FILE)
		namespace_bind_scratch(mount, node);
	memset(entry, 0, sizeof *entry);
	int rc = attr_of_child(mount, node, child, &entry->attr);
	if (rc < 0) {
		inode_forget(mount, node, 1);
		return rc;
	}
	entry->id = inode_id(mount, node);
	entry->attr_timeout = namespace_timeout(node);
	entry->entry_timeout = namespace_timeout(node);
	if (out)
		*out = node;
	return 0;
}

/* ---- listing ------------------------------------------------------------------------ */

static int list_head(const struct head_row *head, void *context)
{
	struct lister *lister = context;
	char name[GRAPHFS_NAME_MAX + 1];
	if (lister->kind == NODE_DROPPED_FILE) {
		char incarnation[ULID_TEXT_SIZE];
		snprintf(name, sizeof name, "%s.%s.json", head->name, ulid_format(&head->incarnation, incarnation));
	} else {
		if (lister->kind == NODE_TABLE_FILE && namespace_is_live(lister->parent) &&
		    scratch_hidden(lister->mount, lister->parent->view.branch, head->name))
			return 0;
		snprintf(name, sizeof name, "%s%s", head->name, lister->suffix);
	}
	struct dir_entry *entry = listing_add(lister, name, lister->kind);
	if (!entry)
		return -ENOMEM;
	snprintf(entry->child.table, sizeof entry->child.table, "%s", head->name);
	entry->child.has_head = (node_classes[lister->kind].flags & CLASS_HEAD_ATTR) != 0;
	if (entry->child.has_head)
		entry->child.head = *head;
	return 0;
}

static int list_scratch(const char *name, const struct stat *st, void *context)
{
	struct lister *lister = context;
	char table[JOURNAL_NAME_MAX + 1];
	bool staged = lister->parent->kind == NODE_STAGING_DIR && names_table_from_file(name, ".jsonl", table);
	struct dir_entry *entry = listing_add(lister, name, staged ? NODE_STAGED_FILE : NODE_SCRATCH_FILE);
	if (!entry)
		return -ENOMEM;
	if (staged)
		snprintf(entry->child.table, sizeof entry->child.table, "%s", table);
	return 0;
}

static bool listing_has(const struct dir_listing *listing, const char *name)
{
	for (size_t i = 0; i < listing->count; i++)
		if (strcmp(listing->entries[i].name, name) == 0)
			return true;
	return false;
}

static int list_pending(const char *table, uint64_t size, void *context)
{
	struct lister *lister = context;
	char name[GRAPHFS_NAME_MAX + 1];
	snprintf(name, sizeof name, "%s%s", table, lister->suffix);
	if (listing_has(lister->listing, name))
		return 0;
	struct dir_entry *entry = listing_add(lister, name, lister->kind);
	if (!entry)
		return -ENOMEM;
	snprintf(entry->child.table, sizeof entry->child.table, "%s", table);
	return 0;
}

/* The live heads of the directory's view; live views use the cached heads list. */
static int list_heads_of(struct mountfs *mount, struct lister *lister, bool tombstoned)
{
	struct store_snapshot *snapshot = NULL;
	int rc = view_snapshot(mount, &lister->parent->view, &snapshot);
	if (rc < 0)
		return rc;
	if (tombstoned || !namespace_is_live(lister->parent)) {
		rc = store_snapshot_heads(snapshot, tombstoned, list_head, lister);
	} else {
		struct heads_list *heads = NULL;
		rc = view_heads(mount, snapshot, &heads);
		for (size_t i = 0; rc == 0 && i < heads->count; i++)
			rc = list_head(&heads->rows[i], lister);
		view_heads_list_release(heads);
	}
	store_snapshot_release(snapshot);
	return rc < 0 ? rc : 0;
}

/* Table-named files of tables/ or schema/, then names being created, then scratch files. */
static int list_table_files(struct mountfs *mount, struct lister *lister, enum scratch_dir directory)
{
	int rc = list_heads_of(mount, lister, false);
	if (rc == 0 && namespace_is_live(lister->parent))
		rc = scratch_pending_list(mount, lister->parent->view.branch, directory, list_pending, lister);
	if (rc == 0 && namespace_is_live(lister->parent))
		rc = scratch_list(mount, lister->parent, list_scratch, lister);
	return rc;
}

static int list_tables(struct mountfs *mount, struct node *directory, struct lister *lister)
{
	lister->suffix = ".jsonl";
	lister->kind = NODE_TABLE_FILE;
	return list_table_files(mount, lister, SCRATCH_TABLES);
}

static int list_schema(struct mountfs *mount, struct node *directory, struct lister *lister)
{
	lister->suffix = ".json";
	lister->kind = NODE_SCHEMA_FILE;
	return list_table_files(mount, lister, SCRATCH_SCHEMA);
}

static int list_head_files(struct mountfs *mount, struct node *directory, struct lister *lister)
{
	lister->suffix = ".json";
	lister->kind = NODE_HEAD_FILE;
	return list_heads_of(mount, lister, false);
}

static int list_dropped(struct mountfs *mount, struct node *directory, struct lister *lister)
{
	lister->kind = NODE_DROPPED_FILE;
	return list_heads_of(mount, lister, true);
}

static int list_staging(struct mountfs *mount, struct node *directory, struct lister *lister)
{
	return scratch_list(mount, directory, list_scratch, lister);
}

static int list_version(const struct store_log_version *commit, void *context)
{
	struct lister *lister = context;
	if (commit->reclaimed)
		return 0;   /* reclaimed by gc: history/@V is ENOENT */
	char name[32];
	snprintf(name, sizeof name, "@%" PRIu64, commit->version);
	struct dir_entry *entry = listing_add(lister, name, NODE_VERSION_ROOT);
	if (!entry)
		return -ENOMEM;
	entry->child.view.version = commit->version;
	entry->child.time_us = commit->time_us;
	return 0;
}

/* The versions of the branch's log, from the version index: a leaf per 256
 * versions, not a commit record per version (docs/FORMAT.md §16.1). */
static int list_history(struct mountfs *mount, struct node *directory, struct lister *lister)
{
	struct store_snapshot *snapshot = NULL;
	int rc = view_snapshot(mount, &directory->view, &snapshot);
	if (rc < 0)
		return rc;
	rc = store_snapshot_log_versions(snapshot, list_version, lister);
	store_snapshot_release(snapshot);
	return rc < 0 ? rc : 0;
}

static int list_tag(const struct store_tag_info *tag, void *context)
{
	struct lister *lister = context;
	struct dir_entry *entry = listing_add(lister, tag->name, NODE_TAG_ROOT);
	if (!entry)
		return -ENOMEM;
	memset(&entry->child.view, 0, sizeof entry->child.view);
	snprintf(entry->child.view.branch, sizeof entry->child.view.branch, "%s", tag->branch);
	snprintf(entry->child.view.tag, sizeof entry->child.view.tag, "%s", tag->name);
	entry->child.view.version = tag->version;
	entry->child.time_us = tag->time_us;
	return 0;
}

static int list_tags(struct mountfs *mount, struct node *directory, struct lister *lister)
{
	int rc = store_tags(mount->store, list_tag, lister);
	return rc < 0 ? rc : 0;
}

static int list_branch(const struct store_branch_info *branch, void *context)
{
	struct lister *lister = context;
	struct dir_entry *entry = listing_add(lister, branch->name, NODE_BRANCH_ROOT);
	if (!entry)
		return -ENOMEM;
	snprintf(entry->child.view.branch, sizeof entry->child.view.branch, "%s", branch->name);
	entry->child.view.version = 0;
	return 0;
}

static int list_branches(struct mountfs *mount, struct node *directory, struct lister *lister)
{
	int rc = store_branches(mount->store, list_branch, lister);
	return rc < 0 ? rc : 0;
}

static int count_scratch(const char *name, const struct stat *st, void *context)
{
	(*(size_t *)context)++;
	return 0;
}

/* staging/schema/ is listed only while it holds something, so that `rm staging/...`
 * finds only files (it still resolves: `cp x.json staging/schema/` works). */
static int hide_empty_staged_schemas(struct mountfs *mount, struct node *staging, struct dir_listing *listing)
{
	struct node probe = *staging;
	probe.kind = NODE_STAGED_SCHEMA_DIR;
	size_t count = 0;
	int rc = scratch_list(mount, &probe, count_scratch, &count);
	if (rc < 0 || count > 0)
		return rc;
	for (size_t i = 0; i < listing->count; i++)
		if (listing->entries[i].child.kind == NODE_STAGED_SCHEMA_DIR) {
			memmove(&listing->entries[i], &listing->entries[i + 1],
				(listing->count - i - 1) * sizeof listing->entries[0]);
			listing->count--;
			break;
		}
	return 0;
}

int namespace_list(struct mountfs *mount, struct node *directory, struct dir_listing *out)
{
	memset(out, 0, sizeof *out);
	buf_init(&out->names);
	if (!namespace_is_directory(directory->kind))
		return -ENOTDIR;
	struct lister lister = { .listing = out, .parent = directory, .mount = mount };
	int rc = -ENOMEM;
	if (!listing_add(&lister, ".", directory->kind) || !listing_add(&lister, "..", NODE_ROOT))
		goto out;
	out->entries[0].dot = out->entries[1].dot = true;
	for (size_t kind = 0; kind < CLASS_COUNT; kind++) {
		const struct node_class *class = &node_classes[kind];
		if (class->name && (class->parents & PARENT(directory->kind)) &&
		    !listing_add(&lister, class->name, (enum node_kind)kind))
			goto out;
	}
	const struct node_class *class = &node_classes[directory->kind];
	rc = class->list ? class->list(mount, directory, &lister) : 0;
	if (rc == 0 && directory->kind == NODE_STAGING_DIR)
		rc = hide_empty_staged_schemas(mount, directory, out);
out:
	if (rc < 0)
		listing_free(out);
	return rc;
}

bool namespace_is_change_view(enum node_kind kind)
{
	return kind >= NODE_DIFF_DIR && kind <= NODE_BY_ID_FILE;
}
