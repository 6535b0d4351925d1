/*
 * ops — the FUSE low-level operations table.
 *
 * Every request resolves its node(s), refreshes the store for live paths (at
 * most once per interval), does its work through view.c / files.c, and
 * replies from stack or per-thread buffers (reads use one preallocated
 * buffer per worker thread: no allocation per read).
 *
 * Invariants:
 *   1. A reply that creates a kernel reference (entry, create, readdirplus
 *      entry) adds exactly one lookup to the node it names; an entry that
 *      does not fit in a readdirplus buffer is not counted.
 *   2. Notifications for a request's own directory or inode are sent only
 *      after its reply (the kernel holds their locks until then).
 *   3. Everything under history/ is read-only (EROFS) and cached by the
 *      kernel for GRAPHFS_HISTORY_TIMEOUT with keep_cache.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <syslog.h>

#include "fuse_int.h"

/* ---- per-thread read buffers ---------------------------------------------------------- */

static pthread_key_t read_buffer_key;
static pthread_once_t read_buffer_once = PTHREAD_ONCE_INIT;

static void read_buffer_key_create(void)
{
	pthread_key_create(&read_buffer_key, free);
}

static char *read_buffer(void)
{
	pthread_once(&read_buffer_once, read_buffer_key_create);
	char *buffer = pthread_getspecific(read_buffer_key);
	if (!buffer) {
		buffer = malloc(GRAPHFS_IO_MAX + 4096);
		if (buffer)
			pthread_setspecific(read_buffer_key, buffer);
	}
	return buffer;
}

/* ---- resolution --------------------------------------------------------------------------- */

struct child {
	enum node_kind kind;
	struct view view;
	char table[JOURNAL_NAME_MAX + 1];
	uint64_t version_target;
	bool has_head;              /* head holds the table's head row, read while resolving */
	struct head_row head;
};

static struct node *node_of(fuse_req_t request, fuse_ino_t id)
{
	return inode_from_id(request_mount(request), id);
}

static bool is_live(const struct node *node)
{
	return node->view.version == 0;
}

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

static int branch_info(struct mount *mount, const char *name, struct store_branch_info *out)
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
static bool commit_in_branch(struct mount *mount, const char *branch, const char *commit_branch,
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
		if (info.fork_version < limit)
			limit = info.fork_version;
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
static int head_exists(struct mount *mount, const struct view *view, const char *table,
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


/* True if name is a scratch file (an editor's or tool's temporary name) of a
 * live directory of this mount. */
static bool is_scratch_name(struct mount *mount, struct node *parent, const char *name)
{
	if (!is_live(parent))
		return false;
	struct scratch *scratch = scratch_find(mount, parent, name);
	if (!scratch)
		return false;
	scratch_release(scratch);
	return true;
}
static int resolve_child(struct mount *mount, struct node *parent, const char *name, struct child *out)
{
	memset(out, 0, sizeof *out);
	out->view = parent->view;
	struct view live = parent->view;
	char table[JOURNAL_NAME_MAX + 1];
	bool root_like = parent->kind == NODE_ROOT || parent->kind == NODE_BRANCH_ROOT ||
			 parent->kind == NODE_VERSION_ROOT;
	if (strlen(name) > GRAPHFS_NAME_MAX)
		return -ENAMETOOLONG;
	if (root_like) {
		bool version_root = parent->kind == NODE_VERSION_ROOT;
		if (strcmp(name, "tables") == 0)
			out->kind = NODE_TABLES_DIR;
		else if (strcmp(name, "heads") == 0)
			out->kind = NODE_HEADS_DIR;
		else if (strcmp(name, "schema") == 0)
			out->kind = NODE_SCHEMA_DIR;
		else if (strcmp(name, "log") == 0)
			out->kind = NODE_LOG_FILE;
		else if (!version_root && strcmp(name, "staging") == 0)
			out->kind = NODE_STAGING_DIR;
		else if (!version_root && strcmp(name, "history") == 0)
			out->kind = NODE_HISTORY_DIR;
		else if (parent->kind == NODE_ROOT && strcmp(name, "branches") == 0)
			out->kind = NODE_BRANCHES_DIR;
		else if (parent->kind == NODE_ROOT && strcmp(name, ".graphfs") == 0)
			out->kind = NODE_META_DIR;
		else
			return -ENOENT;
		return 0;
	}
	int rc;
	switch (parent->kind) {
	case NODE_META_DIR:
		if (strcmp(name, "stats") == 0)
			out->kind = NODE_STATS_FILE;
		else if (strcmp(name, "errors") == 0)
			out->kind = NODE_ERRORS_FILE;
		else if (strcmp(name, "version") == 0)
			out->kind = NODE_VERSION_FILE;
		else
			return -ENOENT;
		return 0;
	case NODE_BRANCHES_DIR:
		if (!table_name_valid(name))
			return -ENOENT;
		rc = branch_info(mount, name, NULL);
		if (rc < 0)
			return rc;
		out->kind = NODE_BRANCH_ROOT;
		snprintf(out->view.branch, sizeof out->view.branch, "%s", name);
		out->view.version = 0;
		return 0;
	case NODE_HISTORY_DIR: {
		uint64_t version = 0;
		if (parse_version(name, &version)) {
			struct view view = { .version = version };
			snprintf(view.branch, sizeof view.branch, "%s", parent->view.branch);
			struct store_snapshot *snapshot = NULL;
			rc = view_snapshot(mount, &view, &snapshot);
			if (rc < 0)
				return rc == -EINVAL ? -ENOENT : rc;
			store_snapshot_release(snapshot);
			out->kind = NODE_VERSION_ROOT;
			out->view = view;
			return 0;
		}
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
	case NODE_TABLES_DIR:
		if (is_scratch_name(mount, parent, name)) {
			out->kind = NODE_SCRATCH_FILE;
			return 0;
		}
		if (!table_name_from_file(name, ".jsonl", table))
			return -ENOENT;
		snprintf(out->table, sizeof out->table, "%s", table);
		out->kind = NODE_TABLE_FILE;
		if (is_live(parent)) {
			bool pending = pending_find(mount, live.branch, SCRATCH_TABLES, table, NULL);
			if (pending)
				return 0;
			if (workspace_hidden(mount, live.branch, table))
				return -ENOENT;
		}
		return head_exists(mount, &parent->view, table, out);
	case NODE_HEADS_DIR:
		if (strcmp(name, ".dropped") == 0) {
			out->kind = NODE_DROPPED_DIR;
			return 0;
		}
		if (!table_name_from_file(name, ".json", table))
			return -ENOENT;
		snprintf(out->table, sizeof out->table, "%s", table);
		out->kind = NODE_HEAD_FILE;
		return head_exists(mount, &parent->view, table, out);
	case NODE_DROPPED_DIR: {
		struct store_snapshot *snapshot = NULL;
		rc = view_snapshot(mount, &parent->view, &snapshot);
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
	case NODE_SCHEMA_DIR:
		if (is_scratch_name(mount, parent, name)) {
			out->kind = NODE_SCRATCH_FILE;
			return 0;
		}
		if (!table_name_from_file(name, ".json", table))
			return -ENOENT;
		snprintf(out->table, sizeof out->table, "%s", table);
		out->kind = NODE_SCHEMA_FILE;
		if (is_live(parent) && pending_find(mount, live.branch, SCRATCH_SCHEMA, table, NULL))
			return 0;
		return head_exists(mount, &parent->view, table, out);
	case NODE_STAGING_DIR: {
		if (strcmp(name, ".commit") == 0) {
			out->kind = NODE_COMMIT_FILE;
			return 0;
		}
		struct scratch *scratch = scratch_find(mount, parent, name);
		if (!scratch)
			return -ENOENT;
		out->kind = scratch->staged ? NODE_STAGED_FILE : NODE_SCRATCH_FILE;
		if (scratch->staged)
			snprintf(out->table, sizeof out->table, "%s", scratch->table);
		scratch_release(scratch);
		return 0;
	}
	default:
		return -ENOTDIR;
	}
}

/* Finds or creates the node for a resolved child with one kernel lookup and fills e. */
static int make_entry(struct mount *mount, struct node *parent, const char *name,
		      const struct child *child, struct fuse_entry_param *e, struct node **out)
{
	struct node *node = inode_get(mount, parent, name, child->kind, &child->view, child->table, 1);
	if (!node)
		return -ENOMEM;
	node->version_target = child->version_target;
	memset(e, 0, sizeof *e);
	int rc = child->has_head ? view_attr_head(mount, node, &child->head, &e->attr)
				 : view_attr(mount, node, &e->attr);
	if (rc < 0) {
		inode_forget(mount, node, 1);
		return rc;
	}
	e->ino = inode_id(mount, node);
	e->generation = 1;
	e->attr_timeout = view_timeout(node);
	e->entry_timeout = view_timeout(node);
	if (out)
		*out = node;
	return 0;
}

static void reply_negative(fuse_req_t request, struct node *parent, int rc)
{
	if (rc == -ENOENT && !is_live(parent)) {
		/* History is immutable: the kernel may remember the absence. */
		struct fuse_entry_param e;
		memset(&e, 0, sizeof e);
		e.entry_timeout = GRAPHFS_HISTORY_TIMEOUT;
		fuse_reply_entry(request, &e);
		return;
	}
	fuse_reply_err(request, -rc);
}

/* ---- operations --------------------------------------------------------------------------- */

static void op_init(void *userdata, struct fuse_conn_info *connection)
{
	(void)userdata;
	connection->max_write = GRAPHFS_IO_MAX;
	if (connection->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		connection->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	if (connection->capable & FUSE_CAP_READDIRPLUS)
		connection->want |= FUSE_CAP_READDIRPLUS;
	/* Writes must reach the daemon in order and synchronously: streams are
	 * validated write by write, and each close publishes. */
	connection->want &= ~(unsigned)(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_ASYNC_DIO);
	if (connection->max_readahead > GRAPHFS_IO_MAX)
		connection->max_readahead = GRAPHFS_IO_MAX;
}

static void op_lookup(fuse_req_t request, fuse_ino_t parent_id, const char *name)
{
	struct mount *mount = request_mount(request);
	atomic_fetch_add(&mount->requests, 1);
	struct node *parent = node_of(request, parent_id);
	if (!node_is_directory(parent->kind)) {
		fuse_reply_err(request, ENOTDIR);
		return;
	}
	if (is_live(parent))
		mount_refresh(mount);
	struct child child;
	int rc = resolve_child(mount, parent, name, &child);
	if (rc < 0) {
		reply_negative(request, parent, rc);
		return;
	}
	struct fuse_entry_param e;
	rc = make_entry(mount, parent, name, &child, &e, NULL);
	if (rc < 0) {
		reply_negative(request, parent, rc);
		return;
	}
	if (fuse_reply_entry(request, &e) != 0)
		inode_forget(mount, inode_from_id(mount, e.ino), 1);
}

static void op_forget(fuse_req_t request, fuse_ino_t id, uint64_t count)
{
	struct mount *mount = request_mount(request);
	inode_forget(mount, node_of(request, id), count);
	fuse_reply_none(request);
}

static void op_forget_multi(fuse_req_t request, size_t count, struct fuse_forget_data *forgets)
{
	struct mount *mount = request_mount(request);
	for (size_t i = 0; i < count; i++)
		inode_forget(mount, node_of(request, forgets[i].ino), forgets[i].nlookup);
	fuse_reply_none(request);
}

static void op_getattr(fuse_req_t request, fuse_ino_t id, struct fuse_file_info *fi)
{
	(void)fi;
	struct mount *mount = request_mount(request);
	atomic_fetch_add(&mount->requests, 1);
	struct node *node = node_of(request, id);
	if (is_live(node))
		mount_refresh(mount);
	struct stat st;
	int rc = view_attr(mount, node, &st);
	if (rc < 0) {
		fuse_reply_err(request, -rc);
		return;
	}
	fuse_reply_attr(request, &st, view_timeout(node));
}

static void op_setattr(fuse_req_t request, fuse_ino_t id, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct mount *mount = request_mount(request);
	atomic_fetch_add(&mount->requests, 1);
	struct node *node = node_of(request, id);
	if (!is_live(node) || mount->read_only) {
		fuse_reply_err(request, EROFS);
		return;
	}
	struct open_file *file = fi ? (struct open_file *)(uintptr_t)fi->fh : NULL;
	int rc = 0;
	bool published = false;
	if (to_set & FUSE_SET_ATTR_SIZE) {
		switch (node->kind) {
		case NODE_TABLE_FILE:
		case NODE_SCHEMA_FILE:
		case NODE_SCRATCH_FILE:
		case NODE_STAGED_FILE:
			rc = file_truncate(mount, node, file, (uint64_t)attr->st_size);
			published = !file && (node->kind == NODE_TABLE_FILE || node->kind == NODE_SCHEMA_FILE);
			break;
		default:
			rc = node_is_directory(node->kind) ? -EISDIR : -EACCES;
			break;
		}
	}
	if (rc == 0 && (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW)) &&
	    (node->kind == NODE_SCRATCH_FILE || node->kind == NODE_STAGED_FILE)) {
		struct scratch *scratch = scratch_find(mount, node->parent, node->name);
		if (scratch) {
			scratch_set_attr(scratch, attr, to_set);
			scratch_release(scratch);
		}
	}
	/* Modes, owners and times of store files are not stored: accepted and ignored
	 * so that cp -p, rsync -a and touch work. */
	struct stat st;
	if (rc == 0)
		rc = view_attr(mount, node, &st);
	if (rc < 0) {
		fuse_reply_err(request, -rc);
		return;
	}
	fuse_reply_attr(request, &st, view_timeout(node));
	if (published) {
		const char *names[1] = { node->table };
		mount_invalidate_branch(mount, node->view.branch, names, 1, false);
	}
}

static void op_readlink(fuse_req_t request, fuse_ino_t id)
{
	struct node *node = node_of(request, id);
	if (node->kind != NODE_COMMIT_LINK) {
		fuse_reply_err(request, EINVAL);
		return;
	}
	char target[32];
	snprintf(target, sizeof target, "@%" PRIu64, node->version_target);
	fuse_reply_readlink(request, target);
}

static void op_mkdir(fuse_req_t request, fuse_ino_t parent_id, const char *name, mode_t mode)
{
	(void)mode;
	struct mount *mount = request_mount(request);
	atomic_fetch_add(&mount->requests, 1);
	struct node *parent = node_of(request, parent_id);
	if (!is_live(parent) || mount->read_only) {
		fuse_reply_err(request, EROFS);
		return;
	}
	if (parent->kind != NODE_BRANCHES_DIR) {
		fuse_reply_err(request, EPERM);
		return;
	}
	if (!table_name_valid(name)) {
		fuse_reply_err(request, EINVAL);
		return;
	}
	struct error_info error;
	error_info_clear(&error);
	int rc = store_branch_create(mount->store, name, mount->branch, &error);
	if (rc < 0) {
		char path[GRAPHFS_PATH_MAX];
		snprintf(path, sizeof path, "branches/%s", name);
		if (rc != -EEXIST)
			mount_error_record(mount, path, &error, rc);
		fuse_reply_err(request, -rc);
		return;
	}
	atomic_fetch_add(&mount->commits, 1);
	view_cache_drop_live(mount);
	struct child child = { .kind = NODE_BRANCH_ROOT };
	snprintf(child.view.branch, sizeof child.view.branch, "%s", name);
	struct fuse_entry_param e;
	rc = make_entry(mount, parent, name, &child, &e, NULL);
	if (rc < 0) {
		fuse_reply_err(request, -rc);
		return;
	}
	if (fuse_reply_entry(request, &e) != 0)
		inode_forget(mount, inode_from_id(mount, e.ino), 1);
}

static void op_rmdir(fuse_req_t request, fuse_ino_t parent_id, const char *name)
{
	struct mount *mount = request_mount(request);
	atomic_fetch_add(&mount->requests, 1);
	struct node *parent = node_of(request, parent_id);
	if (!is_live(parent) || mount->read_only) {
		fuse_reply_err(request, EROFS);
		return;
	}
	if (parent->kind != NODE_BRANCHES_DIR) {
		struct child child;
		int rc = resolve_child(mount, parent, name, &child);
		fuse_reply_err(request, rc < 0 ? -rc : (node_is_directory(child.kind) ? EPERM : ENOTDIR));
		return;
	}
	if (strcmp(name, "main") == 0 || strcmp(name, mount->branch) == 0) {
		fuse_reply_err(request, EBUSY);
		return;
	}
	struct error_info error;
	error_info_clear(&error);
	int rc = store_branch_delete(mount->store, name, mount->branch, &error);
	if (rc < 0) {
		if (rc != -ENOENT) {
			char path[GRAPHFS_PATH_MAX];
			snprintf(path, sizeof path, "branches/%s", name);
			mount_error_record(mount, path, &error, rc);
		}
		fuse_reply_err(request, -rc);
		return;
	}
	atomic_fetch_add(&mount->commits, 1);
	view_cache_drop_live(mount);
	inode_detach(mount, parent, name);
	fuse_reply_err(request, 0);
}

static void op_unlink(fuse_req_t request, fuse_ino_t parent_id, const char *name)
{
	struct mount *mount = request_mount(request);
	atomic_fetch_add(&mount->requests, 1);
	struct node *parent = node_of(request, parent_id);
	char dropped[JOURNAL_NAME_MAX + 1];
	int rc = files_unlink(mount, parent, name, dropped);
	if (rc == 0)
		inode_detach(mount, parent, name);
	fuse_reply_err(request, -rc);
	if (rc == 0 && dropped[0]) {
		const char *names[1] = { dropped };
		mount_invalidate_branch(mount, parent->view.branch, names, 1, true);
	}
}

static void op_rename(fuse_req_t request, fuse_ino_t parent_id, const char *name,
		      fuse_ino_t new_parent_id, const char *new_name, unsigned int flags)
{
	struct mount *mount = request_mount(request);
	atomic_fetch_add(&mount->requests, 1);
	struct node *parent = node_of(request, parent_id);
	struct node *new_parent = node_of(request, new_parent_id);
	if (flags & RENAME_EXCHANGE) {
		fuse_reply_err(request, EINVAL);
		return;
	}
	if (flags & RENAME_NOREPLACE) {
		struct child existing;
		if (resolve_child(mount, new_parent, new_name, &existing) == 0) {
			fuse_reply_err(request, EEXIST);
			return;
		}
	}
	char changed[2][JOURNAL_NAME_MAX + 1];
	int rc = files_rename(mount, parent, name, new_parent, new_name, changed);
	if (rc == 0) {
		struct child child;
		struct node *node = inode_find(mount, parent, name);
		if (node) {
			if (resolve_child(mount, new_parent, new_name, &child) == 0)
				inode_move(mount, node, new_parent, new_name, child.kind, child.table);
			else
				inode_detach(mount, parent, name);
			inode_release(mount, node);
		} else {
			inode_detach(mount, new_parent, new_name);
		}
	}
	fuse_reply_err(request, -rc);
	if (rc == 0 && (changed[0][0] || changed[1][0])) {
		const char *names[2] = { changed[0], changed[1] };
		size_t count = changed[1][0] ? 2 : 1;
		mount_invalidate_branch(mount, parent->view.branch, names, count, true);
	}
}

static void op_open(fuse_req_t request, fuse_ino_t id, struct fuse_file_info *fi)
{
	struct mount *mount = request_mount(request);
	atomic_fetch_add(&mount->requests, 1);
	struct node *node = node_of(request, id);
	if (is_live(node))
		mount_refresh(mount);
	int rc = file_open(mount, node, fi, false);
	if (rc < 0) {
		fuse_reply_err(request, -rc);
		return;
	}
	if (fuse_reply_open(request, fi) != 0)
		file_release(mount, (struct open_file *)(uintptr_t)fi->fh);
}

static void op_create(fuse_req_t request, fuse_ino_t parent_id, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct mount *mount = request_mount(request);
	atomic_fetch_add(&mount->requests, 1);
	struct node *parent = node_of(request, parent_id);
	if (!is_live(parent) || mount->read_only) {
		fuse_reply_err(request, EROFS);
		return;
	}
	if (parent->kind != NODE_TABLES_DIR && parent->kind != NODE_SCHEMA_DIR &&
	    parent->kind != NODE_STAGING_DIR) {
		fuse_reply_err(request, EACCES);
		return;
	}
	if (strlen(name) > GRAPHFS_NAME_MAX) {
		fuse_reply_err(request, ENAMETOOLONG);
		return;
	}
	struct child child;
	int rc = resolve_child(mount, parent, name, &child);
	if (rc < 0 && rc != -ENOENT) {
		/* Only an absent name is created: an error reading the head must not
		 * turn an O_CREAT open of an existing table into an overwrite. */
		fuse_reply_err(request, -rc);
		return;
	}
	bool exists = rc == 0;
	bool created = false;
	if (exists && (fi->flags & O_EXCL)) {
		fuse_reply_err(request, EEXIST);
		return;
	}
	if (!exists) {
		char table[JOURNAL_NAME_MAX + 1];
		memset(&child, 0, sizeof child);
		child.view = parent->view;
		const char *suffix = parent->kind == NODE_SCHEMA_DIR ? ".json" : ".jsonl";
		bool is_table = table_name_from_file(name, suffix, table);
		if (parent->kind == NODE_STAGING_DIR || !is_table) {
			rc = scratch_create(mount, parent, name, mode);
			if (rc < 0 && rc != -EEXIST) {
				fuse_reply_err(request, -rc);
				return;
			}
			child.kind = parent->kind == NODE_STAGING_DIR && is_table ? NODE_STAGED_FILE
										  : NODE_SCRATCH_FILE;
			if (child.kind == NODE_STAGED_FILE)
				snprintf(child.table, sizeof child.table, "%s", table);
			created = rc == 0;
		} else {
			child.kind = parent->kind == NODE_SCHEMA_DIR ? NODE_SCHEMA_FILE : NODE_TABLE_FILE;
			snprintf(child.table, sizeof child.table, "%s", table);
			created = true;
		}
	}
	struct node *node = inode_get(mount, parent, name, child.kind, &child.view, child.table, 1);
	if (!node) {
		fuse_reply_err(request, ENOMEM);
		return;
	}
	rc = file_open(mount, node, fi, created);
	struct fuse_entry_param e;
	memset(&e, 0, sizeof e);
	if (rc == 0)
		rc = view_attr(mount, node, &e.attr);
	if (rc < 0) {
		if (fi->fh) {
			file_release(mount, (struct open_file *)(uintptr_t)fi->fh);
			fi->fh = 0;
		}
		inode_forget(mount, node, 1);
		fuse_reply_err(request, -rc);
		return;
	}
	e.ino = inode_id(mount, node);
	e.generation = 1;
	e.attr_timeout = view_timeout(node);
	e.entry_timeout = view_timeout(node);
	if (fuse_reply_create(request, &e, fi) != 0) {
		file_release(mount, (struct open_file *)(uintptr_t)fi->fh);
		inode_forget(mount, node, 1);
	}
}

static void op_read(fuse_req_t request, fuse_ino_t id, size_t size, off_t offset,
		    struct fuse_file_info *fi)
{
	(void)id;
	struct mount *mount = request_mount(request);
	atomic_fetch_add(&mount->requests, 1);
	char *buffer = read_buffer();
	if (!buffer) {
		fuse_reply_err(request, ENOMEM);
		return;
	}
	if (size > GRAPHFS_IO_MAX + 4096)
		size = GRAPHFS_IO_MAX + 4096;
	ssize_t got = file_read(mount, (struct open_file *)(uintptr_t)fi->fh, buffer, size, offset);
	if (got < 0) {
		fuse_reply_err(request, (int)-got);
		return;
	}
	fuse_reply_buf(request, buffer, (size_t)got);
}

static void op_write(fuse_req_t request, fuse_ino_t id, const char *bytes, size_t size, off_t offset,
		     struct fuse_file_info *fi)
{
	(void)id;
	struct mount *mount = request_mount(request);
	atomic_fetch_add(&mount->requests, 1);
	ssize_t written = file_write(mount, (struct open_file *)(uintptr_t)fi->fh, bytes, size, offset);
	if (written < 0) {
		fuse_reply_err(request, (int)-written);
		return;
	}
	fuse_reply_write(request, (size_t)written);
}

static void op_flush(fuse_req_t request, fuse_ino_t id, struct fuse_file_info *fi)
{
	(void)id;
	struct mount *mount = request_mount(request);
	atomic_fetch_add(&mount->requests, 1);
	int rc = file_flush(mount, (struct open_file *)(uintptr_t)fi->fh);
	fuse_reply_err(request, -rc);
}

static void op_release(fuse_req_t request, fuse_ino_t id, struct fuse_file_info *fi)
{
	(void)id;
	struct mount *mount = request_mount(request);
	file_release(mount, (struct open_file *)(uintptr_t)fi->fh);
	fuse_reply_err(request, 0);
}

static void op_fsync(fuse_req_t request, fuse_ino_t id, int datasync, struct fuse_file_info *fi)
{
	(void)id;
	(void)datasync;
	struct mount *mount = request_mount(request);
	int rc = file_fsync(mount, (struct open_file *)(uintptr_t)fi->fh);
	fuse_reply_err(request, -rc);
}

/* ---- directories ---------------------------------------------------------------------------- */

struct dir_entry {
	char name[GRAPHFS_NAME_MAX + 1];
	struct child child;
	bool dot;
};

struct dir_handle {
	struct dir_entry *entries;
	size_t count;
	size_t capacity;
};

static struct dir_entry *dir_add(struct dir_handle *dir, const char *name, enum node_kind kind)
{
	if (dir->count == dir->capacity) {
		size_t capacity = dir->capacity ? dir->capacity * 2 : 32;
		struct dir_entry *grown = realloc(dir->entries, capacity * sizeof *grown);
		if (!grown)
			return NULL;
		dir->entries = grown;
		dir->capacity = capacity;
	}
	struct dir_entry *entry = &dir->entries[dir->count++];
	memset(entry, 0, sizeof *entry);
	snprintf(entry->name, sizeof entry->name, "%s", name);
	entry->child.kind = kind;
	return entry;
}

struct listing {
	struct dir_handle *dir;
	struct node *parent;
	struct mount *mount;
	const char *suffix;
	enum node_kind kind;
	int rc;
};

static int list_head(const struct head_row *head, void *context)
{
	struct listing *listing = context;
	char name[GRAPHFS_NAME_MAX + 1];
	if (listing->kind == NODE_DROPPED_FILE) {
		char incarnation[ULID_TEXT_SIZE];
		snprintf(name, sizeof name, "%s.%s.json", head->name, ulid_format(&head->incarnation, incarnation));
	} else {
		if (listing->kind == NODE_TABLE_FILE && is_live(listing->parent) &&
		    workspace_hidden(listing->mount, listing->parent->view.branch, head->name))
			return 0;
		snprintf(name, sizeof name, "%s%s", head->name, listing->suffix);
	}
	struct dir_entry *entry = dir_add(listing->dir, name, listing->kind);
	if (!entry)
		return -ENOMEM;
	entry->child.view = listing->parent->view;
	snprintf(entry->child.table, sizeof entry->child.table, "%s", head->name);
	entry->child.has_head = view_attr_has_head(listing->kind);
	if (entry->child.has_head)
		entry->child.head = *head;
	return 0;
}

static int list_scratch(const char *name, const struct stat *st, void *context)
{
	(void)st;
	struct listing *listing = context;
	char table[JOURNAL_NAME_MAX + 1];
	bool staged = listing->parent->kind == NODE_STAGING_DIR && table_name_from_file(name, ".jsonl", table);
	struct dir_entry *entry = dir_add(listing->dir, name, staged ? NODE_STAGED_FILE : NODE_SCRATCH_FILE);
	if (!entry)
		return -ENOMEM;
	entry->child.view = listing->parent->view;
	if (staged)
		snprintf(entry->child.table, sizeof entry->child.table, "%s", table);
	return 0;
}

/* Lists the live heads of snapshot; live views use the snapshot's cached heads list. */
static int list_heads(struct mount *mount, struct store_snapshot *snapshot, struct listing *listing)
{
	if (!is_live(listing->parent))
		return store_snapshot_heads(snapshot, false, list_head, listing);
	struct heads_list *heads = NULL;
	int rc = view_heads(mount, snapshot, &heads);
	if (rc < 0)
		return rc;
	for (size_t i = 0; rc == 0 && i < heads->count; i++)
		rc = list_head(&heads->rows[i], listing);
	heads_list_release(heads);
	return rc;
}

static bool dir_has(const struct dir_handle *dir, const char *name)
{
	for (size_t i = 0; i < dir->count; i++)
		if (strcmp(dir->entries[i].name, name) == 0)
			return true;
	return false;
}

static int list_pending(const char *table, uint64_t size, void *context)
{
	(void)size;
	struct listing *listing = context;
	char name[GRAPHFS_NAME_MAX + 1];
	snprintf(name, sizeof name, "%s%s", table, listing->suffix);
	if (dir_has(listing->dir, name))
		return 0;
	struct dir_entry *entry = dir_add(listing->dir, name, listing->kind);
	if (!entry)
		return -ENOMEM;
	entry->child.view = listing->parent->view;
	snprintf(entry->child.table, sizeof entry->child.table, "%s", table);
	return 0;
}

static int list_version(const struct commit_record *record, void *context)
{
	struct listing *listing = context;
	char name[32];
	snprintf(name, sizeof name, "@%" PRIu64, record->version);
	struct dir_entry *entry = dir_add(listing->dir, name, NODE_VERSION_ROOT);
	if (!entry)
		return -ENOMEM;
	entry->child.view.version = record->version;
	snprintf(entry->child.view.branch, sizeof entry->child.view.branch, "%s", listing->parent->view.branch);
	return 0;
}

static int list_branch(const struct store_branch_info *branch, void *context)
{
	struct listing *listing = context;
	struct dir_entry *entry = dir_add(listing->dir, branch->name, NODE_BRANCH_ROOT);
	if (!entry)
		return -ENOMEM;
	snprintf(entry->child.view.branch, sizeof entry->child.view.branch, "%s", branch->name);
	return 0;
}

static int add_fixed(struct dir_handle *dir, struct node *parent, const char *name, enum node_kind kind)
{
	struct dir_entry *entry = dir_add(dir, name, kind);
	if (!entry)
		return -ENOMEM;
	entry->child.view = parent->view;
	return 0;
}

static int build_listing(struct mount *mount, struct node *parent, struct dir_handle *dir)
{
	struct dir_entry *dot = dir_add(dir, ".", parent->kind);
	struct dir_entry *dotdot = dir_add(dir, "..", NODE_ROOT);
	if (!dot || !dotdot)
		return -ENOMEM;
	dot->dot = dotdot->dot = true;
	struct listing listing = { .dir = dir, .parent = parent, .mount = mount };
	struct store_snapshot *snapshot = NULL;
	int rc = 0;
	switch (parent->kind) {
	case NODE_ROOT:
	case NODE_BRANCH_ROOT:
	case NODE_VERSION_ROOT:
		rc = add_fixed(dir, parent, "tables", NODE_TABLES_DIR);
		if (rc == 0)
			rc = add_fixed(dir, parent, "heads", NODE_HEADS_DIR);
		if (rc == 0)
			rc = add_fixed(dir, parent, "schema", NODE_SCHEMA_DIR);
		if (rc == 0)
			rc = add_fixed(dir, parent, "log", NODE_LOG_FILE);
		if (rc == 0 && parent->kind != NODE_VERSION_ROOT)
			rc = add_fixed(dir, parent, "staging", NODE_STAGING_DIR);
		if (rc == 0 && parent->kind != NODE_VERSION_ROOT)
			rc = add_fixed(dir, parent, "history", NODE_HISTORY_DIR);
		if (rc == 0 && parent->kind == NODE_ROOT)
			rc = add_fixed(dir, parent, "branches", NODE_BRANCHES_DIR);
		if (rc == 0 && parent->kind == NODE_ROOT)
			rc = add_fixed(dir, parent, ".graphfs", NODE_META_DIR);
		return rc;
	case NODE_META_DIR:
		rc = add_fixed(dir, parent, "stats", NODE_STATS_FILE);
		if (rc == 0)
			rc = add_fixed(dir, parent, "errors", NODE_ERRORS_FILE);
		if (rc == 0)
			rc = add_fixed(dir, parent, "version", NODE_VERSION_FILE);
		return rc;
	case NODE_BRANCHES_DIR:
		return store_branches(mount->store, list_branch, &listing);
	case NODE_STAGING_DIR:
		rc = add_fixed(dir, parent, ".commit", NODE_COMMIT_FILE);
		if (rc == 0)
			rc = scratch_list(mount, parent, list_scratch, &listing);
		return rc;
	default:
		break;
	}
	rc = view_snapshot(mount, &parent->view, &snapshot);
	if (rc < 0)
		return rc;
	switch (parent->kind) {
	case NODE_TABLES_DIR:
	case NODE_SCHEMA_DIR:
		listing.suffix = parent->kind == NODE_TABLES_DIR ? ".jsonl" : ".json";
		listing.kind = parent->kind == NODE_TABLES_DIR ? NODE_TABLE_FILE : NODE_SCHEMA_FILE;
		rc = list_heads(mount, snapshot, &listing);
		if (rc >= 0 && is_live(parent))
			rc = pending_list(mount, parent->view.branch,
					  parent->kind == NODE_TABLES_DIR ? SCRATCH_TABLES : SCRATCH_SCHEMA,
					  list_pending, &listing);
		if (rc >= 0 && is_live(parent))
			rc = scratch_list(mount, parent, list_scratch, &listing);
		break;
	case NODE_HEADS_DIR:
		listing.suffix = ".json";
		listing.kind = NODE_HEAD_FILE;
		rc = add_fixed(dir, parent, ".dropped", NODE_DROPPED_DIR);
		if (rc == 0)
			rc = list_heads(mount, snapshot, &listing);
		break;
	case NODE_DROPPED_DIR:
		listing.kind = NODE_DROPPED_FILE;
		rc = store_snapshot_heads(snapshot, true, list_head, &listing);
		break;
	case NODE_HISTORY_DIR:
		rc = store_snapshot_log(snapshot, list_version, &listing);
		break;
	default:
		rc = -ENOTDIR;
		break;
	}
	store_snapshot_release(snapshot);
	return rc < 0 ? rc : 0;
}

static void op_opendir(fuse_req_t request, fuse_ino_t id, struct fuse_file_info *fi)
{
	struct mount *mount = request_mount(request);
	atomic_fetch_add(&mount->requests, 1);
	struct node *node = node_of(request, id);
	if (!node_is_directory(node->kind)) {
		fuse_reply_err(request, ENOTDIR);
		return;
	}
	if (is_live(node))
		mount_refresh(mount);
	struct dir_handle *dir = calloc(1, sizeof *dir);
	if (!dir) {
		fuse_reply_err(request, ENOMEM);
		return;
	}
	int rc = build_listing(mount, node, dir);
	if (rc < 0) {
		free(dir->entries);
		free(dir);
		fuse_reply_err(request, -rc);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)dir;
	if (!is_live(node))
		fi->cache_readdir = 1;
	if (fuse_reply_open(request, fi) != 0) {
		free(dir->entries);
		free(dir);
	}
}

static void op_releasedir(fuse_req_t request, fuse_ino_t id, struct fuse_file_info *fi)
{
	(void)id;
	struct dir_handle *dir = (struct dir_handle *)(uintptr_t)fi->fh;
	free(dir->entries);
	free(dir);
	fuse_reply_err(request, 0);
}

static void readdir_common(fuse_req_t request, fuse_ino_t id, size_t size, off_t offset,
			   struct fuse_file_info *fi, bool plus)
{
	struct mount *mount = request_mount(request);
	atomic_fetch_add(&mount->requests, 1);
	struct node *parent = node_of(request, id);
	struct dir_handle *dir = (struct dir_handle *)(uintptr_t)fi->fh;
	char *buffer = read_buffer();
	if (!buffer) {
		fuse_reply_err(request, ENOMEM);
		return;
	}
	if (size > GRAPHFS_IO_MAX)
		size = GRAPHFS_IO_MAX;
	size_t used = 0;
	for (size_t i = (size_t)offset; i < dir->count; i++) {
		struct dir_entry *entry = &dir->entries[i];
		size_t needed;
		if (!plus) {
			struct stat st;
			memset(&st, 0, sizeof st);
			st.st_mode = node_is_directory(entry->child.kind) ? S_IFDIR
				     : entry->child.kind == NODE_COMMIT_LINK ? S_IFLNK : S_IFREG;
			st.st_ino = entry->dot ? parent->st_ino : 0;
			needed = fuse_add_direntry(request, buffer + used, size - used, entry->name, &st,
						   (off_t)(i + 1));
			if (needed > size - used)
				break;
			used += needed;
			continue;
		}
		struct fuse_entry_param e;
		memset(&e, 0, sizeof e);
		struct node *node = NULL;
		if (entry->dot) {
			e.attr.st_mode = S_IFDIR;
			e.attr.st_ino = parent->st_ino;
		} else if (make_entry(mount, parent, entry->name, &entry->child, &e, &node) < 0) {
			continue;   /* gone since opendir */
		}
		needed = fuse_add_direntry_plus(request, buffer + used, size - used, entry->name, &e,
						(off_t)(i + 1));
		if (needed > size - used) {
			if (node)
				inode_forget(mount, node, 1);
			break;
		}
		used += needed;
	}
	fuse_reply_buf(request, buffer, used);
}

static void op_readdir(fuse_req_t request, fuse_ino_t id, size_t size, off_t offset,
		       struct fuse_file_info *fi)
{
	readdir_common(request, id, size, offset, fi, false);
}

static void op_readdirplus(fuse_req_t request, fuse_ino_t id, size_t size, off_t offset,
			   struct fuse_file_info *fi)
{
	readdir_common(request, id, size, offset, fi, true);
}

/* ---- file system, xattrs ------------------------------------------------------------------------ */

static void op_statfs(fuse_req_t request, fuse_ino_t id)
{
	(void)id;
	struct mount *mount = request_mount(request);
	struct statvfs st;
	if (statvfs(mount->store_path, &st) != 0)
		memset(&st, 0, sizeof st);
	st.f_namemax = GRAPHFS_NAME_MAX;
	if (mount->read_only)
		st.f_flag |= ST_RDONLY;
	fuse_reply_statfs(request, &st);
}

static const char *const xattr_names[] = {
	"user.graphfs.stable_id", "user.graphfs.incarnation", "user.graphfs.version",
	"user.graphfs.rows", "user.graphfs.commit",
};

static bool has_xattrs(const struct node *node)
{
	return node->kind == NODE_TABLE_FILE || node->kind == NODE_HEAD_FILE ||
	       node->kind == NODE_DROPPED_FILE;
}

static void op_getxattr(fuse_req_t request, fuse_ino_t id, const char *name, size_t size)
{
	struct mount *mount = request_mount(request);
	atomic_fetch_add(&mount->requests, 1);
	struct node *node = node_of(request, id);
	if (strncmp(name, "user.", 5) != 0) {
		/* security.*, system.* (ACLs), trusted.*: not supported by this file
		 * system. EOPNOTSUPP (not ENODATA) lets ls, cp and others remember
		 * that per device and stop asking, as they do on file systems
		 * without xattrs; the store is not touched. */
		fuse_reply_err(request, EOPNOTSUPP);
		return;
	}
	size_t which = sizeof xattr_names / sizeof xattr_names[0];
	for (size_t i = 0; i < sizeof xattr_names / sizeof xattr_names[0]; i++)
		if (strcmp(name, xattr_names[i]) == 0)
			which = i;
	if (!has_xattrs(node) || which == sizeof xattr_names / sizeof xattr_names[0]) {
		fuse_reply_err(request, ENODATA);
		return;
	}
	struct store_snapshot *snapshot = NULL;
	int rc = view_snapshot(mount, &node->view, &snapshot);
	if (rc < 0) {
		fuse_reply_err(request, -rc);
		return;
	}
	struct head_row head;
	if (node->kind == NODE_DROPPED_FILE)
		rc = view_dropped_head(snapshot, node->name, &head);
	else
		rc = view_head(mount, snapshot, node->table, &head);
	store_snapshot_release(snapshot);
	if (rc < 0) {
		fuse_reply_err(request, rc == -ENOENT ? ENODATA : -rc);
		return;
	}
	char value[64];
	switch (which) {
	case 0:
		ulid_format(&head.stable_id, value);
		break;
	case 1:
		ulid_format(&head.incarnation, value);
		break;
	case 2:
		snprintf(value, sizeof value, "%" PRIu64, head.table_version);
		break;
	case 3:
		snprintf(value, sizeof value, "%" PRIu64, head.row_count);
		break;
	default:
		ulid_format(&head.commit, value);
		break;
	}
	size_t length = strlen(value);
	if (size == 0)
		fuse_reply_xattr(request, length);
	else if (size < length)
		fuse_reply_err(request, ERANGE);
	else
		fuse_reply_buf(request, value, length);
}

static void op_listxattr(fuse_req_t request, fuse_ino_t id, size_t size)
{
	struct node *node = node_of(request, id);
	char list[256];
	size_t length = 0;
	if (has_xattrs(node))
		for (size_t i = 0; i < sizeof xattr_names / sizeof xattr_names[0]; i++) {
			size_t part = strlen(xattr_names[i]) + 1;
			memcpy(list + length, xattr_names[i], part);
			length += part;
		}
	if (size == 0)
		fuse_reply_xattr(request, length);
	else if (size < length)
		fuse_reply_err(request, ERANGE);
	else
		fuse_reply_buf(request, list, length);
}

static void op_setxattr(fuse_req_t request, fuse_ino_t id, const char *name, const char *value,
			size_t size, int flags)
{
	(void)id;
	(void)name;
	(void)value;
	(void)size;
	(void)flags;
	fuse_reply_err(request, ENOTSUP);
}

static void op_removexattr(fuse_req_t request, fuse_ino_t id, const char *name)
{
	(void)id;
	(void)name;
	fuse_reply_err(request, ENOTSUP);
}

const struct fuse_lowlevel_ops graphfs_operations = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mkdir = op_mkdir,
	.rmdir = op_rmdir,
	.unlink = op_unlink,
	.rename = op_rename,
	.open = op_open,
	.create = op_create,
	.read = op_read,
	.write = op_write,
	.flush = op_flush,
	.release = op_release,
	.fsync = op_fsync,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.statfs = op_statfs,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.setxattr = op_setxattr,
	.removexattr = op_removexattr,
};
