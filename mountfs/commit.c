/*
 * commit — how the mount commits: as the user who wrote (the commit's actor
 * is that user's name @ this host, not the daemon's), with a refusal
 * recorded in .graphfs/errors against the path that was written.
 */
#include <errno.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "mountfs_int.h"

void mount_actor(struct mountfs *mount, uid_t uid, char *out, size_t size)
{
	struct passwd entry, *found = NULL;
	char buffer[1024];
	if (getpwuid_r(uid, &entry, buffer, sizeof buffer, &found) == 0 && found)
		snprintf(out, size, "%s@%s", found->pw_name, mount->host);
	else
		snprintf(out, size, "%u@%s", (unsigned)uid, mount->host);
}

int mount_txn_begin(struct mountfs *mount, const char *branch, uid_t uid, struct store_txn **out,
		    struct error_info *error)
{
	int rc = store_txn_begin(mount->store, branch, out, error);
	if (rc < 0)
		return rc;
	char actor[512];
	mount_actor(mount, uid, actor, sizeof actor);
	rc = store_txn_set_actor(*out, actor);
	if (rc < 0) {
		store_txn_free(*out);
		*out = NULL;
	}
	return rc;
}

/* Both doors: a lost condition (-EBUSY) is -EAGAIN, unrecorded, when retryable. */
static int commit(struct mountfs *mount, struct store_txn *txn, const char *message, const char *path,
		  struct store_commit_result *result, bool retryable)
{
	struct store_commit_result ignored;
	struct error_info error;
	error_info_clear(&error);
	int rc = store_txn_commit(txn, message, result ? result : &ignored, &error);
	if (rc == -EBUSY && retryable)
		return -EAGAIN;   /* the table moved: the caller merges again */
	if (rc < 0) {
		if (rc == -EBUSY && !error.message[0])
			error_info_set(&error, -EBUSY, "the table moved since this file was opened; nothing was published");
		if (store_error_is_unreachable(rc))
			rc = -EIO;   /* the object store is out of reach: the errors line says so */
		mount_error_record(mount, error.path[0] ? error.path : path, &error, rc);
		return rc;
	}
	atomic_fetch_add(&mount->commits, 1);
	upkeep_poke(mount);
	return 0;
}

int mount_commit(struct mountfs *mount, struct store_txn *txn, const char *message, const char *path,
		 struct store_commit_result *result)
{
	return commit(mount, txn, message, path, result, false);
}

int mount_commit_retryable(struct mountfs *mount, struct store_txn *txn, const char *message, const char *path,
			   struct store_commit_result *result)
{
	return commit(mount, txn, message, path, result, true);
}

size_t mount_commit_message(const char *bytes, size_t size, char *out, size_t out_size)
{
	size_t length = size < out_size - 1 ? size : out_size - 1;
	memcpy(out, bytes, length);
	while (length > 0 && (out[length - 1] == '\n' || out[length - 1] == '\r'))
		length--;
	out[length] = '\0';
	return length;
}

/* ---- merge/<branch>/commit: a merge the mount publishes --------------------------- */

struct merged_names {
	char (*names)[JOURNAL_NAME_MAX + 1];
	size_t count, capacity;
};

static int note_name(const struct head_row *head, void *context)
{
	struct merged_names *list = context;
	if (buf_grow_array((void **)&list->names, &list->capacity, list->count + 1, sizeof *list->names) < 0)
		return -ENOMEM;
	snprintf(list->names[list->count++], JOURNAL_NAME_MAX + 1, "%s", head->name);
	return 0;
}

/* Every table name branch has now, added to names (for invalidation). */
static void branch_names(struct mountfs *mount, const char *branch, struct merged_names *names)
{
	struct store_snapshot *snapshot;
	struct error_info error;
	if (store_snapshot_open(mount->store, branch, STORE_LATEST, &snapshot, &error) == 0) {
		store_snapshot_heads(snapshot, false, note_name, names);
		store_snapshot_release(snapshot);
	}
}

int mount_merge_commit(struct mountfs *mount, const struct node *commit_file, const char *branch,
			 const char *message, size_t size, uid_t uid)
{
	const struct node *root = commit_file;
	while (root && root->kind != NODE_MERGE_ROOT)
		root = root->parent;
	if (!root)
		return -ENOENT;
	char text[4096];
	size_t length = mount_commit_message(message, size, text, sizeof text);
	char path[GRAPHFS_PATH_MAX];
	inode_path(mount, commit_file, path, sizeof path);
	char actor[512];
	mount_actor(mount, uid, actor, sizeof actor);
	struct store_merge_options options = { .message = length ? text : NULL, .actor = actor };
	struct store_merge_result result;
	struct error_info error;
	struct merged_names names = { 0 };
	branch_names(mount, branch, &names);
	int rc = store_merge(mount->store, root->name, branch, &options, NULL, NULL, &result, &error);
	if (rc < 0) {
		mount_error_record(mount, path, &error, rc);
	} else if (result.outcome == STORE_MERGE_CONFLICTS) {
		rc = -EBUSY;
		mount_error_refuse(mount, path, rc,
				   "%llu conflict%s merging %s into %s: nothing was published (see merge/%s/conflicts/)",
				   (unsigned long long)result.conflicts, result.conflicts == 1 ? "" : "s", root->name, branch,
				   root->name);
	} else if (result.outcome != STORE_MERGE_UP_TO_DATE) {
		atomic_fetch_add(&mount->commits, 1);
		branch_names(mount, branch, &names);
		const char **list = calloc(names.count + 1, sizeof *list);
		for (size_t i = 0; list && i < names.count; i++)
			list[i] = names.names[i];
		if (list)
			mount_invalidate_branch(mount, branch, list, names.count, true);
		free(list);
	}
	free(names.names);
	return rc;
}
