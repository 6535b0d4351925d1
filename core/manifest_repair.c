/*
 * manifest_repair — repair of heads from the journal: for each branch whose
 * heads or names trees differ from the replay of its journal
 * (manifest_replay.c), one commit (actor "graphfs:repair", no changes) whose
 * heads and names trees are rebuilt from the replay. Afterwards heads and
 * journal agree again (docs/ARCHITECTURE.md invariant 7).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manifest_int.h"

static int build_trees(struct manifest_publish *publish, const struct manifest_replay *replay,
		       struct block_address *heads_out, struct block_address *names_out)
{
	struct btree_builder *builder = NULL;
	struct buf bytes;
	buf_init(&bytes);
	const struct head_row **live = NULL;
	int rc = btree_builder_open(publish->append, &builder);
	for (size_t i = 0; rc == 0 && i < replay->count; i++) {
		buf_reset(&bytes);
		rc = journal_head_row_encode(&replay->heads[i], &bytes);
		if (rc == 0)
			rc = btree_builder_add(builder, replay->heads[i].stable_id.bytes, 16, bytes.data, bytes.size);
	}
	if (rc < 0)
		goto out;
	rc = btree_builder_finish(builder, heads_out);
	builder = NULL;
	if (rc < 0)
		goto out;
	size_t live_count;
	if (!(live = manifest_replay_live_by_name(replay, &live_count))) {
		rc = -ENOMEM;
		goto out;
	}
	if ((rc = btree_builder_open(publish->append, &builder)) < 0)
		goto out;
	for (size_t i = 0; rc == 0 && i < live_count; i++)
		rc = btree_builder_add(builder, live[i]->name, strlen(live[i]->name), live[i]->stable_id.bytes, 16);
	if (rc < 0)
		goto out;
	rc = btree_builder_finish(builder, names_out);
	builder = NULL;
out:
	btree_builder_free(builder);
	free(live);
	buf_free(&bytes);
	return rc;
}

static int repair_branch(struct manifest *manifest, const char *name, bool *repaired, struct error_info *error)
{
	*repaired = false;
	struct manifest_publish publish;
	int rc = manifest_publish_begin(manifest, &publish, error);
	if (rc < 0)
		return rc;
	struct branch_record branch;
	struct manifest_replay replay = { 0 };
	struct commit_record record;
	journal_commit_record_init(&record);
	char problem[256];
	rc = manifest_branch_find(manifest->pager, publish.base.branches, name, &branch);
	if (rc == -ENOENT) {
		rc = 0; /* deleted meanwhile */
		goto out;
	}
	if (rc < 0) {
		error_info_set(error, rc, "branch %s: the branch record cannot be read", name);
		goto out;
	}
	if ((rc = manifest_replay_branch(manifest, &branch, &replay, problem, sizeof problem)) < 0) {
		error_info_set(error, rc, "branch %s: the journal cannot be replayed: %s", name, problem);
		goto out;
	}
	rc = manifest_replay_compare(manifest, &branch, &replay, NULL, NULL);
	if (rc == 0)
		goto out;
	/* differences, or a heads/names tree that cannot even be read: rebuild both */
	struct ulid base_id;
	ulid_new(&base_id);
	manifest_commit_id(&base_id, publish.base.version + 1, &record.id);
	record.time_us = manifest_publish_time(&publish);
	record.actor = strdup("graphfs:repair");
	record.message = strdup("repair: rebuild heads from journal");
	if (!record.actor || !record.message) {
		rc = -ENOMEM;
		goto out;
	}
	/* the commit record and version index first, then the rebuilt trees (FORMAT.md §18) */
	if ((rc = manifest_publish_history(&publish, &branch, &record, error)) < 0)
		goto out;
	struct block_address heads, names;
	if ((rc = build_trees(&publish, &replay, &heads, &names)) < 0) {
		error_info_set(error, rc, "branch %s: cannot rebuild the heads: %s", name, io_strerror(rc));
		goto out;
	}
	rc = manifest_publish_commit_state(&publish, &branch, &record, heads, names, NULL, error);
	if (rc == 0) {
		io_failpoint("publish.after_sidecar_remove");
		*repaired = true;
	}
out:
	journal_commit_record_free(&record);
	manifest_replay_free(&replay);
	manifest_publish_end(&publish);
	return rc;
}

int manifest_repair(struct manifest *manifest, int *repaired_branches, struct error_info *error)
{
	error_info_clear(error);
	if (repaired_branches)
		*repaired_branches = 0;
	struct root_record latest;
	struct manifest_branch_list list = { 0 };
	int rc = manifest_refresh(manifest, NULL);
	if (rc == 0)
		rc = manifest_latest(manifest, &latest);
	if (rc == 0)
		rc = manifest_branches_each(manifest, &latest, manifest_branch_list_add, &list);
	if (rc < 0) {
		error_info_set(error, rc, "cannot read the branches: %s", io_strerror(rc));
		goto out;
	}
	for (size_t i = 0; i < list.count; i++) {
		bool repaired;
		rc = repair_branch(manifest, list.branches[i].name, &repaired, error);
		if (rc < 0)
			goto out;
		if (repaired && repaired_branches)
			(*repaired_branches)++;
	}
out:
	free(list.branches);
	return rc;
}
