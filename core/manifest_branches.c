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
 *   3. Unless forced, a branch is deleted only when its head commit is in the
 *      history of another branch or a tag (-ENOTEMPTY otherwise, naming how
 *      many commits only it holds), so no work is lost by a slip.
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
	bool force;
	const struct ulid *at;              /* create at this commit instead of from's head (NULL) */
	struct block_address at_record;
	uint64_t at_version;
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
	if (call->at) {
		/* the state that commit left, on whichever branch made it (deleted since or not) */
		struct manifest_snapshot state;
		rc = manifest_snapshot_of_commit(manifest, call->at, call->at_record, &state);
		if (rc < 0) {
			char text[ULID_TEXT_SIZE];
			error_info_set(error, rc == -EIO ? -ENOENT : rc,
				       "the state of commit %s is no longer kept (gc reclaimed it)", ulid_format(call->at, text));
			rc = rc == -EIO ? -ENOENT : rc;
			goto out;
		}
		source = state.branch;
	} else {
		rc = manifest_branch_find(manifest->pager, publish.base.branches, from, &source);
	}
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
	if (call->at)
		rc = 0;   /* no source: its past is its commits' (manifest_history.c invariant 4) */
	else if ((rc = fork_depth(manifest, &publish.base, &source)) >= MANIFEST_BRANCH_DEPTH_MAX) {
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
	snprintf(branch.forked_from, sizeof branch.forked_from, "%s", call->at ? "" : from);
	branch.fork_point = call->at ? call->at_version : source.head_version;
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
	struct branch_call call = { name, from && *from ? from : "main", NULL, condition, false, NULL, { 0, 0 }, 0 };
	return manifest_race_retry(manifest, branch_create_once, &call, error);
}

int manifest_branch_create_at(struct manifest *manifest, const char *name, const struct ulid *commit,
			      const struct manifest_condition *condition, struct error_info *error)
{
	int rc = manifest_name_check("branch", name, error);
	if (rc < 0)
		return rc;
	struct branch_call call = { name, "", NULL, condition, false, commit, { 0, 0 }, 0 };
	rc = manifest_commit_find(manifest, commit, &call.at_version, &call.at_record);
	if (rc < 0) {
		char text[ULID_TEXT_SIZE];
		return error_info_set(error, rc, rc == -ENOENT ? "no commit %s is kept (never made, or gc reclaimed it)"
							      : "cannot read commit %s", ulid_format(commit, text));
	}
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

/* Whether a head commit is in another branch's or a tag's history (invariant 3). */
struct containment {
	struct manifest *manifest;
	const char *name;                 /* the branch to delete: not compared with itself */
	struct ulid head;
	struct block_address record;
	bool contained;
	uint64_t newest_shared;           /* the newest version of its history another holds */
	int unshared;                     /* commits of its first-parent chain above newest_shared */
	int rc;
};

/* Compares the head with one other head: 1 (stop) when it contains it, 0, or -errno. */
static int contain_head(struct containment *search, const struct ulid *other, struct block_address record)
{
	if (ulid_is_zero(other) || block_address_is_null(record))
		return 0;
	struct ulid base;
	uint64_t version;
	struct block_address base_record;
	int rc = manifest_merge_base(search->manifest, &search->head, search->record, other, record, &base,
				     &version, &base_record);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return search->rc = rc;
	if (ulid_compare(&base, &search->head) == 0) {
		search->contained = true;
		return 1;
	}
	if (version > search->newest_shared)
		search->newest_shared = version;
	return 0;
}

static int contain_in_branch(const struct branch_record *branch, void *context)
{
	struct containment *search = context;
	if (strcmp(branch->name, search->name) == 0)
		return 0;
	return contain_head(search, &branch->head_commit, branch->head_record);
}

static int contain_in_tag(const struct manifest_tag *tag, void *context)
{
	return contain_head(context, &tag->branch.head_commit, tag->branch.head_record);
}

static int count_unshared(const struct manifest_log_version *entry, void *context)
{
	struct containment *search = context;
	if (entry->reclaimed || entry->version <= search->newest_shared)
		return 1;
	search->unshared++;
	return 0;
}

/* 0 when branch's head is in another branch's or a tag's history (or it has no commit);
 * else -ENOTEMPTY with how many of its commits no other holds; -errno. */
static int check_contained(struct manifest *manifest, const struct root_record *root,
			   const struct branch_record *branch, struct error_info *error)
{
	if (ulid_is_zero(&branch->head_commit))
		return 0;
	struct containment search = { manifest, branch->name, branch->head_commit, branch->head_record, false, 0, 0, 0 };
	int rc = manifest_branches_each(manifest, root, contain_in_branch, &search);
	if (rc >= 0 && !search.contained && search.rc == 0)
		rc = manifest_tags_each(manifest, root, contain_in_tag, &search);
	if (rc >= 0 && search.rc < 0)
		rc = search.rc;
	if (rc < 0)
		return error_info_set(error, rc, "cannot tell whether branch %s is merged: %s", branch->name,
				      io_strerror(rc));
	if (search.contained)
		return 0;
	struct manifest_snapshot snapshot = { .branch = *branch, .version = root->version, .root = *root };
	rc = manifest_log_versions(manifest, &snapshot, count_unshared, &search);
	if (rc < 0)
		return error_info_set(error, rc, "cannot count the commits of branch %s: %s", branch->name,
				      io_strerror(rc));
	char head[ULID_TEXT_SIZE];
	ulid_format(&branch->head_commit, head);
	return error_info_set(error, -ENOTEMPTY,
			      "branch %s has %d commit%s merged nowhere (no other branch or tag holds its head "
			      "%s): --force deletes it, and 'graphfs branch STORE create %s --at %s' brings it back "
			      "until gc reclaims it", branch->name, search.unshared, search.unshared == 1 ? "" : "s",
			      head, branch->name, head);
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
	if (!call->force && (rc = check_contained(manifest, &publish.base, &branch, error)) < 0)
		goto out;
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

int manifest_branch_delete(struct manifest *manifest, const char *name, const char *mounted_branch, bool force,
			   const struct manifest_condition *condition, struct error_info *error)
{
	int rc = manifest_name_check("branch", name, error);
	if (rc < 0)
		return rc;
	if (strcmp(name, "main") == 0)
		return error_info_set(error, -EBUSY, "branch main cannot be deleted");
	if (mounted_branch && strcmp(name, mounted_branch) == 0)
		return error_info_set(error, -EBUSY, "branch %s is the mounted branch", name);
	struct branch_call call = { name, NULL, mounted_branch, condition, force, NULL, { 0, 0 }, 0 };
	return manifest_race_retry(manifest, branch_delete_once, &call, error);
}
