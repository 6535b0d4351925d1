/*
 * staging — the staging area of a live branch: files in staging/ are staged
 * overwrites or merges of one table each, published together by a write to
 * staging/.commit as ONE commit.
 *
 * Invariants:
 *   1. The staging area of a branch is one store transaction with deferred
 *      endpoint checks (an edge's node may arrive in another staged file).
 *   2. Each staged file has one writer in it whose input is exactly the
 *      staged file's bytes (rebuilt from the file when edited in place).
 *   3. A refused commit leaves every staged file as it was, to fix; a
 *      commit empties the staging area.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include <jansson.h>

#include "mountfs_int.h"

/* ---- the staging area ------------------------------------------------------------------- */

/* Stages one staged schema file into the staging transaction (commit_lock held). */
static int stage_schema(struct mountfs *mount, struct workspace *workspace, struct scratch *scratch)
{
	char path[GRAPHFS_PATH_MAX];
	scratch_path(mount, workspace->branch, SCRATCH_STAGED_SCHEMA, scratch->name, path, sizeof path);
	struct buf bytes;
	buf_init(&bytes);
	struct error_info error;
	error_info_clear(&error);
	int rc = scratch_read_held(scratch, &bytes, GRAPHFS_SCHEMA_MAX);
	if (rc == 0)
		rc = store_txn_schema(workspace->staging, scratch->table, (const char *)bytes.data, bytes.size,
				      &error);
	else
		error_info_set(&error, rc, "cannot read the staged schema: %s", strerror(-rc));
	if (rc < 0) {
		error_info_locate(&error, path, error.line);
		mount_error_record(mount, path, &error, rc);
	}
	buf_free(&bytes);
	return rc;
}

/* Ensures the workspace's staging transaction exists, with every staged schema
 * in it before any staged rows (commit_lock held). */
static int staging_transaction(struct mountfs *mount, struct workspace *workspace)
{
	if (workspace->staging)
		return 0;
	struct error_info error;
	error_info_clear(&error);
	int rc = store_txn_begin(mount->store, workspace->branch, &workspace->staging, &error);
	if (rc < 0)
		return rc;
	store_txn_defer_endpoint_checks(workspace->staging, true);
	/* The list is only changed under commit_lock too: safe to walk without workspace.lock
	 * while the store reads the files. */
	for (struct scratch *scratch = workspace->scratches; scratch && rc == 0; scratch = scratch->next)
		if (scratch->named && scratch->schema_staged)
			rc = stage_schema(mount, workspace, scratch);
	if (rc < 0) {
		store_txn_free(workspace->staging);
		workspace->staging = NULL;
	}
	return rc;
}

void staging_reset(struct workspace *workspace)
{
	pthread_mutex_lock(&workspace->lock);
	for (struct scratch *scratch = workspace->scratches; scratch; scratch = scratch->next)
		if (scratch->writer) {
			store_writer_discard(scratch->writer);
			scratch->writer = NULL;
			scratch->writer_failed = true;   /* rebuilt from its bytes when next needed */
		}
	pthread_mutex_unlock(&workspace->lock);
	if (workspace->staging) {
		store_txn_free(workspace->staging);
		workspace->staging = NULL;
	}
}

int staging_schema_written(struct mountfs *mount, struct scratch *scratch)
{
	struct workspace *workspace = scratch->workspace;
	struct buf bytes;
	buf_init(&bytes);
	int rc = scratch_read_held(scratch, &bytes, GRAPHFS_SCHEMA_MAX);
	bool complete = false;
	if (rc == 0) {
		json_error_t parse_error;
		json_t *value = json_loadb((const char *)bytes.data, bytes.size, 0, &parse_error);
		complete = value != NULL;
		json_decref(value);
	}
	buf_free(&bytes);
	if (rc < 0 || !complete)
		return rc;
	pthread_mutex_lock(&workspace->commit_lock);
	staging_reset(workspace);
	rc = scratch->named ? staging_transaction(mount, workspace) : 0;
	pthread_mutex_unlock(&workspace->commit_lock);
	return rc;
}

/* Rebuilds a staged file's writer from its bytes (commit_lock held). 0 or the
 * validation error (recorded). */
int staging_rebuild(struct mountfs *mount, struct workspace *workspace, struct scratch *scratch)
{
	char path[GRAPHFS_PATH_MAX];
	scratch_path(mount, workspace->branch, SCRATCH_STAGING, scratch->name, path, sizeof path);
	if (scratch->writer) {
		store_writer_discard(scratch->writer);
		scratch->writer = NULL;
	}
	scratch->writer_finished = false;
	scratch->writer_failed = false;
	int rc = staging_transaction(mount, workspace);
	if (rc < 0)
		return rc;
	struct error_info error;
	error_info_clear(&error);
	rc = store_txn_writer(workspace->staging, scratch->table, scratch->write_mode, 0, path,
			      &scratch->writer, &error);
	if (rc < 0) {
		mount_error_record(mount, path, &error, rc);
		return rc;
	}
	rc = scratch_hold(scratch);
	if (rc >= 0) {
		int descriptor = rc;
		rc = scratch_feed(scratch->writer, descriptor, &error);
		scratch_unhold(scratch);
	} else {
		error_info_set(&error, rc, "cannot read the staged file: %s", strerror(-rc));
	}
	if (rc < 0) {
		scratch->writer_failed = true;
		mount_error_record(mount, path, &error, rc);
	}
	return rc;
}

/* Frees the staging transaction when nothing is staged any more (commit_lock held). */
void staging_settle(struct workspace *workspace)
{
	pthread_mutex_lock(&workspace->lock);
	bool any = false;
	for (struct scratch *scratch = workspace->scratches; scratch; scratch = scratch->next)
		if (scratch->named && (scratch->staged || scratch->schema_staged))
			any = true;
	pthread_mutex_unlock(&workspace->lock);
	if (!any && workspace->staging) {
		store_txn_free(workspace->staging);
		workspace->staging = NULL;
	}
}

int staging_commit(struct mountfs *mount, const char *branch, const char *message, size_t size,
		   uid_t uid)
{
	struct workspace *workspace = scratch_workspace_get(mount, branch);
	if (!workspace)
		return -ENOMEM;
	char text[4096];
	size_t length = mount_commit_message(message, size, text, sizeof text);
	char commit_path[GRAPHFS_PATH_MAX];
	scratch_path(mount, branch, SCRATCH_STAGING, ".commit", commit_path, sizeof commit_path);

	pthread_mutex_lock(&workspace->commit_lock);
	int rc = 0;
	struct scratch **staged = NULL;
	char (*tables)[JOURNAL_NAME_MAX + 1] = NULL;
	const char **names = NULL;
	size_t count = 0, capacity = 0;
	bool committed = false;
	pthread_mutex_lock(&workspace->lock);
	for (struct scratch *scratch = workspace->scratches; scratch; scratch = scratch->next)
		if (scratch->named && (scratch->staged || scratch->schema_staged))
			capacity++;
	if (capacity) {
		staged = calloc(capacity, sizeof *staged);
		tables = calloc(capacity, sizeof *tables);
		names = calloc(capacity, sizeof *names);
	}
	if (capacity && (!staged || !tables || !names)) {
		rc = -ENOMEM;
	} else {
		for (struct scratch *scratch = workspace->scratches; scratch; scratch = scratch->next)
			if (scratch->named && (scratch->staged || scratch->schema_staged)) {
				scratch->references++;
				staged[count] = scratch;
				snprintf(tables[count], sizeof tables[count], "%s", scratch->table);
				names[count] = tables[count];
				count++;
			}
	}
	pthread_mutex_unlock(&workspace->lock);
	if (rc == 0 && count == 0) {
		struct error_info error;
		error_info_clear(&error);
		error_info_set(&error, -ENODATA, "nothing is staged");
		mount_error_record(mount, commit_path, &error, -ENODATA);
		rc = -ENODATA;
	}
	/* The staged schemas first, then every staged file's writer holding exactly its
	 * bytes, finished. */
	if (rc == 0)
		rc = staging_transaction(mount, workspace);
	for (size_t i = 0; i < count && rc == 0; i++) {
		struct scratch *scratch = staged[i];
		if (scratch->schema_staged)
			continue;
		if (!scratch->writer || scratch->writer_failed)
			rc = staging_rebuild(mount, workspace, scratch);
		if (rc == 0 && !scratch->writer_finished) {
			struct error_info error;
			error_info_clear(&error);
			rc = store_writer_finish(scratch->writer, &error);
			if (rc < 0) {
				char path[GRAPHFS_PATH_MAX];
				scratch_path(mount, branch, SCRATCH_STAGING, scratch->name, path, sizeof path);
				mount_error_record(mount, path, &error, rc);
				scratch->writer_failed = true;
			} else {
				scratch->writer_finished = true;
			}
		}
	}
	if (rc == 0) {
		char actor[512];
		mount_actor(mount, uid, actor, sizeof actor);
		rc = store_txn_set_actor(workspace->staging, actor);
		if (rc == 0)
			rc = mount_commit(mount, workspace->staging, length ? text : NULL, commit_path, NULL);
		if (rc == 0) {
			committed = true;
			/* The writers went with the commit. */
			pthread_mutex_lock(&workspace->lock);
			for (size_t i = 0; i < count; i++) {
				staged[i]->writer = NULL;
				if (staged[i]->named)
					scratch_unname(workspace, staged[i]);
			}
			pthread_mutex_unlock(&workspace->lock);
			store_txn_free(workspace->staging);
			workspace->staging = NULL;
		}
	}
	pthread_mutex_lock(&workspace->lock);
	for (size_t i = 0; i < count; i++)
		scratch_put(staged[i]);
	pthread_mutex_unlock(&workspace->lock);
	pthread_mutex_unlock(&workspace->commit_lock);
	/* Not under commit_lock: a request holding a directory lock may be waiting for it. */
	if (committed)
		mount_invalidate_branch(mount, branch, names, count, true);
	free(staged);
	free(tables);
	free(names);
	return rc;
}

