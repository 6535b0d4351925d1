/*
 * rules — what a name change in the mounted tree means: unlink drops a table
 * (or removes a scratch file), rename renames a table, publishes a scratch
 * file onto a table name, or detaches a table to a scratch name (an editor's
 * backup); mkdir and rmdir under branches/ create and delete branches.
 * docs/MOUNT.md "Writing" is the contract.
 *
 * Invariants:
 *   1. Each name change that reaches the store is one commit.
 *   2. A table renamed to a scratch name is hidden in this mount until its
 *      scratch copy is renamed back, published or removed (then dropped).
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "mountfs_int.h"

/* ---- unlink and rename ------------------------------------------------------------------------ */

int rules_unlink(struct mountfs *mount, struct node *parent, const char *name, uid_t uid,
		 char dropped[JOURNAL_NAME_MAX + 1])
{
	dropped[0] = '\0';
	if (parent->view.version != 0)
		return -EROFS;
	if (mount->read_only)
		return -EROFS;
	char table[JOURNAL_NAME_MAX + 1];
	char path[GRAPHFS_PATH_MAX];
	struct workspace *workspace = scratch_workspace_get(mount, parent->view.branch);
	if (!workspace)
		return -ENOMEM;
	switch (parent->kind) {
	case NODE_TABLES_DIR:
	case NODE_SCHEMA_DIR:
	case NODE_STAGING_DIR:
	case NODE_STAGED_SCHEMA_DIR: {
		enum scratch_dir directory = scratch_dir_of(parent);
		if (directory == SCRATCH_STAGING && strcmp(name, ".commit") == 0)
			return -EPERM;
		pthread_mutex_lock(&workspace->commit_lock);
		pthread_mutex_lock(&workspace->lock);
		struct scratch *scratch = scratch_lookup(workspace, directory, name);
		char detached[JOURNAL_NAME_MAX + 1] = "";
		bool found = scratch != NULL, schema_staged = scratch && scratch->schema_staged;
		if (scratch) {
			snprintf(detached, sizeof detached, "%s", scratch->detached_from);
			scratch_unname(workspace, scratch);   /* may free it */
		}
		pthread_mutex_unlock(&workspace->lock);
		if (schema_staged)
			staging_reset(workspace);
		if (found && (directory == SCRATCH_STAGING || directory == SCRATCH_STAGED_SCHEMA))
			staging_settle(workspace);
		pthread_mutex_unlock(&workspace->commit_lock);
		if (found) {
			/* `mv X.jsonl X.bak; rm X.bak`: the table goes. */
			if (detached[0] && scratch_hidden(mount, parent->view.branch, detached)) {
				struct store_txn *txn = NULL;
				struct error_info error;
				error_info_clear(&error);
				scratch_path(mount, parent->view.branch, SCRATCH_TABLES, name, path, sizeof path);
				int rc = mount_txn_begin(mount, parent->view.branch, uid, &txn, &error);
				if (rc == 0)
					rc = store_txn_drop(txn, detached, &error);
				if (rc == 0)
					rc = mount_commit(mount, txn, NULL, path, NULL);
				else
					mount_error_record(mount, path, &error, rc);
				store_txn_free(txn);
				if (rc < 0)
					return rc;
				scratch_hide(mount, parent->view.branch, detached, false);
				snprintf(dropped, JOURNAL_NAME_MAX + 1, "%s", detached);
			}
			return 0;
		}
		if (directory == SCRATCH_STAGED_SCHEMA)
			return -ENOENT;
		if (directory != SCRATCH_TABLES)
			return directory == SCRATCH_SCHEMA && names_table_from_file(name, ".json", table) ? -EPERM
															: -ENOENT;
		if (!names_table_from_file(name, ".jsonl", table))
			return -ENOENT;
		if (scratch_hidden(mount, parent->view.branch, table))
			return -ENOENT;
		scratch_path(mount, parent->view.branch, SCRATCH_TABLES, name, path, sizeof path);
		struct store_txn *txn = NULL;
		struct error_info error;
		error_info_clear(&error);
		int rc = mount_txn_begin(mount, parent->view.branch, uid, &txn, &error);
		if (rc < 0)
			return rc;
		rc = store_txn_drop(txn, table, &error);
		if (rc < 0) {
			if (rc != -ENOENT)
				mount_error_record(mount, path, &error, rc);
			else if (scratch_pending_find(mount, parent->view.branch, SCRATCH_TABLES, table, NULL))
				rc = -EBUSY;
			store_txn_free(txn);
			return rc;
		}
		rc = mount_commit(mount, txn, NULL, path, NULL);
		store_txn_free(txn);
		if (rc == 0)
			snprintf(dropped, JOURNAL_NAME_MAX + 1, "%s", table);
		return rc;
	}
	case NODE_HEADS_DIR:
	case NODE_DROPPED_DIR:
	case NODE_ROOT:
	case NODE_BRANCH_ROOT:
	case NODE_META_DIR:
		return -EPERM;
	default:
		return -EPERM;
	}
}

/* Publishes bytes of a scratch as an overwrite of table (scratch -> <Name>.jsonl). */
static int publish_scratch_overwrite(struct mountfs *mount, const char *branch, struct scratch *scratch,
				     const char *table, const char *path, uid_t uid)
{
	struct error_info error;
	error_info_clear(&error);
	struct store_txn *txn = NULL;
	struct store_writer *writer = NULL;
	int descriptor = scratch_hold(scratch);
	if (descriptor < 0)
		return descriptor;
	int rc = mount_table_is(mount, branch, table, 0, 0, descriptor);
	if (rc == 1) {
		rc = 0;   /* the same bytes as the table: nothing to publish */
		goto out;
	}
	if (scratch->base_version) {
		/* a based write (based.c): what others committed since it was read is kept */
		struct based_write write = { .branch = branch, .table = table, .path = path, .descriptor = descriptor,
					     .base_version = scratch->base_version, .uid = uid };
		bool merged;
		rc = based_publish(mount, &write, &merged);
		goto out;
	}
	rc = mount_txn_begin(mount, branch, uid, &txn, &error);
	if (rc < 0)
		goto out;
	rc = store_txn_writer(txn, table, STORE_OVERWRITE, 0, path, &writer, &error);
	if (rc == 0)
		rc = scratch_feed(writer, descriptor, &error);
	if (rc == 0)
		rc = store_writer_finish(writer, &error);
	if (rc < 0) {
		mount_error_record(mount, path, &error, rc);
		goto out;
	}
	rc = mount_commit(mount, txn, NULL, path, NULL);
out:
	store_txn_free(txn);
	scratch_unhold(scratch);
	return rc;
}

static int publish_scratch_schema(struct mountfs *mount, const char *branch, struct scratch *scratch,
				  const char *table, const char *path, uid_t uid)
{
	struct buf bytes;
	buf_init(&bytes);
	int rc = scratch_hold(scratch);
	if (rc >= 0) {
		int descriptor = rc;
		rc = scratch_read_all(descriptor, &bytes, GRAPHFS_SCHEMA_MAX);
		scratch_unhold(scratch);
	}
	if (rc < 0) {
		buf_free(&bytes);
		return rc;
	}
	struct error_info error;
	error_info_clear(&error);
	struct store_txn *txn = NULL;
	rc = mount_txn_begin(mount, branch, uid, &txn, &error);
	if (rc == 0) {
		rc = store_txn_schema(txn, table, (const char *)bytes.data, bytes.size, &error);
		if (rc < 0)
			mount_error_record(mount, path, &error, rc);
		else
			rc = mount_commit(mount, txn, NULL, path, NULL);
	}
	store_txn_free(txn);
	buf_free(&bytes);
	return rc;
}

/* A table's current bytes become a scratch file; the table name is hidden in this mount. */
static int detach_table(struct mountfs *mount, struct workspace *workspace, enum scratch_dir directory,
			const char *table, const char *new_name)
{
	struct view view = { .version = 0 };
	snprintf(view.branch, sizeof view.branch, "%s", workspace->branch);
	struct store_snapshot *snapshot = NULL;
	int rc = view_snapshot(mount, &view, &snapshot);
	if (rc < 0)
		return rc;
	struct store_table *reader = NULL;
	struct buf schema;
	buf_init(&schema);
	if (directory == SCRATCH_TABLES)
		rc = store_table_open(snapshot, table, &reader);
	else
		rc = store_snapshot_schema(snapshot, table, &schema);
	store_snapshot_release(snapshot);
	if (rc < 0) {
		buf_free(&schema);
		return rc;
	}
	pthread_mutex_lock(&workspace->lock);
	struct scratch *existing = scratch_lookup(workspace, directory, new_name);
	if (existing)
		scratch_unname(workspace, existing);
	struct scratch *scratch = scratch_new(mount, workspace, directory, new_name, 0644, &rc);
	if (scratch) {
		snprintf(scratch->detached_from, sizeof scratch->detached_from, "%s", table);
		scratch->references++;
	}
	pthread_mutex_unlock(&workspace->lock);
	if (scratch) {
		int descriptor = scratch_hold(scratch);
		rc = descriptor;
		if (descriptor >= 0) {
			rc = reader ? scratch_copy_table(reader, descriptor)
				    : scratch_write_all(descriptor, schema.data, schema.size, 0);
			scratch_unhold(scratch);
		}
		scratch_release(scratch);
	}
	if (reader)
		store_table_close(reader);
	buf_free(&schema);
	if (rc < 0)
		return rc;
	if (directory == SCRATCH_TABLES)
		scratch_hide(mount, workspace->branch, table, true);
	return 0;
}

int rules_rename(struct mountfs *mount, struct node *parent, const char *name, struct node *new_parent,
		 const char *new_name, uid_t uid, char changed[2][JOURNAL_NAME_MAX + 1])
{
	changed[0][0] = changed[1][0] = '\0';
	if (parent->view.version != 0 || new_parent->view.version != 0 || mount->read_only)
		return -EROFS;
	if (parent->kind != new_parent->kind || strcmp(parent->view.branch, new_parent->view.branch) != 0)
		return -EXDEV;
	if (parent->kind != NODE_TABLES_DIR && parent->kind != NODE_SCHEMA_DIR &&
	    parent->kind != NODE_STAGING_DIR && parent->kind != NODE_STAGED_SCHEMA_DIR)
		return -EPERM;
	const char *branch = parent->view.branch;
	enum scratch_dir directory = scratch_dir_of(parent);
	const char *suffix = directory == SCRATCH_SCHEMA || directory == SCRATCH_STAGED_SCHEMA ? ".json" : ".jsonl";
	struct workspace *workspace = scratch_workspace_get(mount, branch);
	if (!workspace)
		return -ENOMEM;
	if (strcmp(name, new_name) == 0)
		return 0;
	if (directory == SCRATCH_STAGING && (strcmp(name, ".commit") == 0 || strcmp(new_name, ".commit") == 0))
		return -EPERM;
	char from_table[JOURNAL_NAME_MAX + 1], to_table[JOURNAL_NAME_MAX + 1];
	bool to_is_table = names_table_from_file(new_name, suffix, to_table);
	char path[GRAPHFS_PATH_MAX];
	scratch_path(mount, branch, directory, new_name, path, sizeof path);

	pthread_mutex_lock(&workspace->commit_lock);
	int rc = 0;
	struct scratch *scratch = scratch_find(mount, parent, name);
	if (scratch) {
		if (directory == SCRATCH_STAGED_SCHEMA) {
			/* staging/schema: the name says whether the file is a staged schema. */
			pthread_mutex_lock(&workspace->lock);
			scratch_rename(workspace, scratch, new_name);
			scratch->schema_staged = to_is_table;
			if (to_is_table)
				snprintf(scratch->table, sizeof scratch->table, "%s", to_table);
			pthread_mutex_unlock(&workspace->lock);
			staging_reset(workspace);
			staging_settle(workspace);
			scratch_release(scratch);
			goto out;
		}
		if (directory == SCRATCH_STAGING) {
			/* Staging: the name says whether the file is staged. */
			pthread_mutex_lock(&workspace->lock);
			scratch_rename(workspace, scratch, new_name);
			if (scratch->writer) {
				store_writer_discard(scratch->writer);
				scratch->writer = NULL;
			}
			scratch->staged = to_is_table;
			if (to_is_table) {
				snprintf(scratch->table, sizeof scratch->table, "%s", to_table);
				if (!scratch->writer_finished && scratch->write_mode != STORE_MERGE)
					scratch_set_write_mode(scratch, STORE_OVERWRITE);
			}
			pthread_mutex_unlock(&workspace->lock);
			if (to_is_table)
				rc = staging_rebuild(mount, workspace, scratch);
			staging_settle(workspace);
			scratch_release(scratch);
			goto out;
		}
		if (!to_is_table) {
			pthread_mutex_lock(&workspace->lock);
			scratch_rename(workspace, scratch, new_name);
			pthread_mutex_unlock(&workspace->lock);
			scratch_release(scratch);
			goto out;
		}
		/* scratch -> <Name>.jsonl / <Name>.json publishes. */
		if (directory == SCRATCH_TABLES)
			rc = publish_scratch_overwrite(mount, branch, scratch, to_table, path, uid);
		else
			rc = publish_scratch_schema(mount, branch, scratch, to_table, path, uid);
		if (rc == 0) {
			pthread_mutex_lock(&workspace->lock);
			if (scratch->named)
				scratch_unname(workspace, scratch);
			pthread_mutex_unlock(&workspace->lock);
			scratch_hide(mount, branch, to_table, false);
			snprintf(changed[0], JOURNAL_NAME_MAX + 1, "%s", to_table);
		}
		scratch_release(scratch);
		goto out;
	}
	if (directory == SCRATCH_STAGING || directory == SCRATCH_STAGED_SCHEMA) {
		rc = -ENOENT;
		goto out;
	}
	if (!names_table_from_file(name, suffix, from_table) || scratch_hidden(mount, branch, from_table)) {
		rc = -ENOENT;
		goto out;
	}
	if (!to_is_table) {
		/* A table moved to a scratch name (an editor's backup): private copy, name hidden. */
		rc = detach_table(mount, workspace, directory, from_table, new_name);
		goto out;
	}
	/* <A>.jsonl -> <B>.jsonl: rename (replacing B drops it in the same commit). */
	struct store_txn *txn = NULL;
	struct error_info error;
	error_info_clear(&error);
	rc = mount_txn_begin(mount, branch, uid, &txn, &error);
	if (rc < 0)
		goto out;
	struct head_row head;
	bool target_exists = store_snapshot_head(store_txn_snapshot(txn), to_table, &head) == 0;
	if (target_exists)
		rc = store_txn_drop(txn, to_table, &error);
	if (rc == 0)
		rc = store_txn_rename(txn, from_table, to_table, &error);
	if (rc < 0)
		mount_error_record(mount, path, &error, rc);
	else
		rc = mount_commit(mount, txn, NULL, path, NULL);
	store_txn_free(txn);
	if (rc == 0) {
		scratch_hide(mount, branch, to_table, false);
		snprintf(changed[0], JOURNAL_NAME_MAX + 1, "%s", from_table);
		snprintf(changed[1], JOURNAL_NAME_MAX + 1, "%s", to_table);
	}
out:
	pthread_mutex_unlock(&workspace->commit_lock);
	return rc;
}


/* ---- tags ------------------------------------------------------------------------------------ */

/* mkdir tags/NAME: tags the mounted branch's head, as the writing user. */
static int rules_tag(struct mountfs *mount, const char *name, uid_t uid)
{
	char actor[256];
	mount_actor(mount, uid, actor, sizeof actor);
	struct error_info error;
	error_info_clear(&error);
	int rc = store_tag_create(mount->store, name, mount->branch, STORE_LATEST, NULL, actor, NULL, &error);
	if (rc < 0 && rc != -EEXIST) {
		char path[GRAPHFS_PATH_MAX];
		snprintf(path, sizeof path, "tags/%s", name);
		mount_error_record(mount, path, &error, rc);
	}
	return rc;
}

static int rules_untag(struct mountfs *mount, const char *name)
{
	struct error_info error;
	error_info_clear(&error);
	int rc = store_tag_delete(mount->store, name, NULL, &error);
	if (rc < 0 && rc != -ENOENT) {
		char path[GRAPHFS_PATH_MAX];
		snprintf(path, sizeof path, "tags/%s", name);
		mount_error_record(mount, path, &error, rc);
	}
	return rc;
}

/* ---- branches ---------------------------------------------------------------------------------- */

int rules_mkdir(struct mountfs *mount, struct node *parent, const char *name, uid_t uid)
{
	if (!namespace_is_live(parent) || mount->read_only)
		return -EROFS;
	if (parent->kind == NODE_TAGS_DIR)
		return rules_tag(mount, name, uid);
	if (parent->kind != NODE_BRANCHES_DIR)
		return -EPERM;
	if (!names_table_valid(name))
		return -EINVAL;
	struct error_info error;
	error_info_clear(&error);
	int rc = store_branch_create(mount->store, name, mount->branch, NULL, &error);
	if (rc < 0) {
		char path[GRAPHFS_PATH_MAX];
		snprintf(path, sizeof path, "branches/%s", name);
		if (rc != -EEXIST)
			mount_error_record(mount, path, &error, rc);
		return rc;
	}
	atomic_fetch_add(&mount->commits, 1);
	view_cache_drop_live(mount);
	return 0;
}

int rules_rmdir(struct mountfs *mount, struct node *parent, const char *name, uid_t uid)
{
	if (!namespace_is_live(parent) || mount->read_only)
		return -EROFS;
	if (parent->kind == NODE_TAGS_DIR)
		return rules_untag(mount, name);
	if (parent->kind != NODE_BRANCHES_DIR) {
		struct child child;
		int rc = namespace_resolve(mount, parent, name, &child);
		return rc < 0 ? rc : (namespace_is_directory(child.kind) ? -EPERM : -ENOTDIR);
	}
	if (strcmp(name, "main") == 0 || strcmp(name, mount->branch) == 0)
		return -EBUSY;
	struct error_info error;
	error_info_clear(&error);
	int rc = store_branch_delete(mount->store, name, mount->branch, false, NULL, &error);
	if (rc < 0) {
		if (rc != -ENOENT) {
			char path[GRAPHFS_PATH_MAX];
			snprintf(path, sizeof path, "branches/%s", name);
			mount_error_record(mount, path, &error, rc);
		}
		return rc;
	}
	atomic_fetch_add(&mount->commits, 1);
	view_cache_drop_live(mount);
	return 0;
}
