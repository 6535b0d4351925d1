/*
 * manifest_branches — branch create (O(1): the new branch shares its
 * source's trees) and delete, and running a function under the store lock
 * (layer: manifest). Each publishes a root without a new version through the
 * shared publish tail (manifest_publish.c).
 *
 * Invariants kept:
 *   1. A branch records its source, the source's head version it forked at
 *      (fork point) and the store version it was created at; a chain of forks
 *      is at most MANIFEST_BRANCH_DEPTH_MAX deep.
 *   2. A branch another branch was forked from is not deleted while that
 *      branch exists (-ENOTEMPTY), so every branch's ancestry stays readable
 *      (manifest_history.c invariant 2); main is never deleted.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "manifest_int.h"

/* ---- branches --------------------------------------------------------------------- */

/* How many forks separate branch from main (0 for main), or -errno. */
static int fork_depth(struct manifest *manifest, const struct root_record *root,
		      const struct branch_record *branch)
{
	struct branch_record current = *branch;
	int depth = 0;
	while (current.forked_from[0] && depth < MANIFEST_BRANCH_DEPTH_MAX) {
		char source[JOURNAL_NAME_MAX + 1];
		snprintf(source, sizeof source, "%s", current.forked_from);
		int rc = manifest_branch_find(manifest->pager, root->branches, source, &current);
		if (rc < 0)
			return rc == -ENOENT ? -EIO : rc;
		depth++;
	}
	return depth;
}

struct branch_call {
	const char *name, *from, *mounted_branch;
	const struct manifest_condition *condition;
};

static int branch_create_once(struct manifest *manifest, void *context, struct error_info *error)
{
	const struct branch_call *call = context;
	const char *name = call->name, *from = call->from;
	const struct manifest_condition *condition = call->condition;
	int rc;
	struct manifest_publish publish;
	struct buf bytes;
	buf_init(&bytes);
	if ((rc = manifest_publish_begin(manifest, &publish, error)) < 0)
		return rc;
	struct branch_record source, existing;
	rc = manifest_branch_find(manifest->pager, publish.base.branches, from, &source);
	if (rc < 0) {
		error_info_set(error, rc, rc == -ENOENT ? "no branch %s" : "cannot read branch %s", from);
		goto out;
	}
	if (condition && (rc = manifest_condition_check(condition, &publish.base, &source, error)) < 0)
		goto out;
	rc = manifest_branch_find(manifest->pager, publish.base.branches, name, &existing);
	if (rc == 0) {
		rc = error_info_set(error, -EEXIST, "branch %s already exists", name);
		goto out;
	}
	if (rc != -ENOENT)
		goto out;
	if ((rc = fork_depth(manifest, &publish.base, &source)) >= MANIFEST_BRANCH_DEPTH_MAX) {
		rc = error_info_set(error, -EMLINK, "branch %s is already %d forks deep: fork %s from a branch nearer main",
				    from, rc, name);
		goto out;
	}
	if (rc < 0)
		goto out;
	/* O(1): the new branch shares the source's heads and names trees */
	struct branch_record branch = source;
	snprintf(branch.name, sizeof branch.name, "%s", name);
	ulid_new(&branch.incarnation);
	snprintf(branch.forked_from, sizeof branch.forked_from, "%s", from);
	branch.fork_point = source.head_version;
	branch.created_version = publish.base.version;
	branch.created_time_us = manifest_publish_time(&publish);
	if ((rc = manifest_branch_encode(&branch, &bytes)) < 0 ||
	    (rc = btree_put(publish.branches, name, strlen(name), bytes.data, bytes.size)) < 0) {
		error_info_set(error, rc, "cannot create branch %s: %s", name, io_strerror(rc));
		goto out;
	}
	rc = manifest_publish_finish(&publish, NULL, branch.created_time_us,
				     NULL, error);
out:
	buf_free(&bytes);
	manifest_publish_end(&publish);
	return rc;
}

int manifest_branch_create(struct manifest *manifest, const char *name, const char *from,
			   const struct manifest_condition *condition, struct error_info *error)
{
	int rc = manifest_name_check("branch", name, error);
	if (rc < 0)
		return rc;
	struct branch_call call = { name, from && *from ? from : "main", NULL, condition };
	return manifest_race_retry(manifest, branch_create_once, &call, error);
}

struct fork_search {
	const char *name;
	char child[JOURNAL_NAME_MAX + 1];
};

static int find_fork(const struct branch_record *branch, void *context)
{
	struct fork_search *search = context;
	if (strcmp(branch->forked_from, search->name) == 0 && strcmp(branch->name, search->name) != 0) {
		snprintf(search->child, sizeof search->child, "%s", branch->name);
		return 1;
	}
	return 0;
}

void manifest_set_delete_check(struct manifest *manifest,
			       int (*check)(const char *name, void *context, struct error_info *error),
			       void *context)
{
	manifest->delete_check = check;
	manifest->delete_check_context = context;
}

int manifest_run_locked(struct manifest *manifest, int (*fn)(struct manifest *manifest, void *context),
			void *context, struct error_info *error)
{
	struct manifest_publish publish;
	/* in an object store no lock is held: what fn checks is at least the latest listed now */
	pthread_mutex_lock(&manifest->state_mutex);
	manifest->listed_us = 0;
	pthread_mutex_unlock(&manifest->state_mutex);
	int rc = manifest_publish_begin(manifest, &publish, error);
	if (rc == 0)
		rc = fn(manifest, context);
	manifest_publish_end(&publish);
	return rc;
}

static int branch_delete_once(struct manifest *manifest, void *context, struct error_info *error)
{
	const struct branch_call *call = context;
	const char *name = call->name;
	const struct manifest_condition *condition = call->condition;
	struct manifest_publish publish;
	int rc;
	if ((rc = manifest_publish_begin(manifest, &publish, error)) < 0)
		return rc;
	struct branch_record branch;
	rc = manifest_branch_find(manifest->pager, publish.base.branches, name, &branch);
	if (rc < 0) {
		error_info_set(error, rc, rc == -ENOENT ? "no branch %s" : "cannot read branch %s", name);
		goto out;
	}
	if (condition && (rc = manifest_condition_check(condition, &publish.base, &branch, error)) < 0)
		goto out;
	struct fork_search search = { .name = name };
	rc = manifest_branches_each(manifest, &publish.base, find_fork, &search);
	if (rc < 0)
		goto out;
	if (search.child[0]) {
		rc = error_info_set(error, -ENOTEMPTY, "branch %s was forked from %s: delete it first",
				    search.child, name);
		goto out;
	}
	if (manifest->delete_check && (rc = manifest->delete_check(name, manifest->delete_check_context, error)) < 0)
		goto out;
	if ((rc = btree_delete(publish.branches, name, strlen(name))) < 0) {
		error_info_set(error, rc, "cannot delete branch %s: %s", name, io_strerror(rc));
		goto out;
	}
	rc = manifest_publish_finish(&publish, NULL, manifest_publish_time(&publish), NULL,
				     error);
out:
	manifest_publish_end(&publish);
	return rc;
}

int manifest_branch_delete(struct manifest *manifest, const char *name, const char *mounted_branch,
			   const struct manifest_condition *condition, struct error_info *error)
{
	int rc = manifest_name_check("branch", name, error);
	if (rc < 0)
		return rc;
	if (strcmp(name, "main") == 0)
		return error_info_set(error, -EBUSY, "branch main cannot be deleted");
	if (mounted_branch && strcmp(name, mounted_branch) == 0)
		return error_info_set(error, -EBUSY, "branch %s is the mounted branch", name);
	struct branch_call call = { name, NULL, mounted_branch, condition };
	return manifest_race_retry(manifest, branch_delete_once, &call, error);
}
