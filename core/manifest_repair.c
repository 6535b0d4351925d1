/*
 * manifest_repair — repair of heads from the journal: for each branch whose
 * heads or names trees differ from the replay of its journal
 * (manifest_replay.c), one commit (actor "graphfs:repair", no changes) whose
 * heads and names trees are rebuilt from the replay. Afterwards heads and
 * journal agree again (docs/ARCHITECTURE.md invariant 7).
 */
#include <errno.h>
#include <fcntl.h>
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

/* ---- rollback to the newest intact root ----------------------------------------------- */

/* Calls dropped for each commit record that decodes in the blocks from offset on. 0 or -errno. */
static int walk_dropped_commits(struct manifest *manifest, uint64_t offset,
				int (*dropped)(const struct commit_record *record, void *context), void *context,
				uint64_t *count)
{
	uint64_t file_size;
	int rc = io_size(&manifest->file, &file_size);
	struct buf raw;
	buf_init(&raw);
	while (rc == 0 && offset + BLOCK_HEADER_SIZE <= file_size) {
		uint8_t header_bytes[BLOCK_HEADER_SIZE];
		struct block_header header;
		if (io_pread(&manifest->file, header_bytes, sizeof header_bytes, offset) < 0 ||
		    codec_decode_header(header_bytes, &header) < 0 ||
		    offset + BLOCK_HEADER_SIZE + header.stored_size > file_size)
			break;   /* the damage, zeros, or the end: nothing after it can be walked */
		if (header.type == BLOCK_COMMIT) {
			struct commit_record record;
			buf_reset(&raw);
			if (pager_read(manifest->pager, (struct block_address){ 0, offset }, BLOCK_COMMIT, &raw) == 0 &&
			    journal_commit_record_decode(raw.data, raw.size, manifest_format_version(manifest), &record) == 0) {
				(*count)++;
				rc = dropped ? dropped(&record, context) : 0;
				journal_commit_record_free(&record);
			}
		}
		offset += BLOCK_HEADER_SIZE + header.stored_size;
	}
	buf_free(&raw);
	return rc;
}

int manifest_rollback(const char *path, int (*dropped)(const struct commit_record *record, void *context),
		      void *context, struct manifest_rollback_result *result, struct error_info *error)
{
	memset(result, 0, sizeof *result);
	struct manifest *manifest = NULL;
	struct io_file file = { -1, IO_MANIFEST, NULL }, lock = { -1, IO_MANIFEST, NULL };
	uint8_t *zeros = NULL;
	bool locked = false;
	int rc = manifest_open(path, MANIFEST_READ_ONLY, &manifest, error);
	if (rc < 0)
		return rc;
	if (io_file_is_remote(&manifest->file)) {
		rc = error_info_set(error, -EOPNOTSUPP, "%s: a rollback works on a local store only", path);
		goto out;
	}
	if (manifest->state != MANIFEST_DAMAGED || !manifest->have_latest) {
		rc = error_info_set(error, manifest->have_latest ? -EINVAL : -EIO,
				    manifest->have_latest ? "%s: its newest root is intact: there is nothing to roll back "
							    "(graphfs verify %s says what is damaged)"
							  : "%s: no intact root to roll back to", path, path);
		goto out;
	}
	/* the newest intact root (the other meta slot's, or the last one the scan found) */
	struct root_record root = manifest->latest;
	uint64_t end = manifest->committed_size;
	result->version = root.version;
	/* the store lock, so that nothing else writes while the manifest is cut */
	if ((rc = io_file_open(manifest->directory, "lock", O_RDWR | O_CREAT, IO_MANIFEST, &lock)) < 0 ||
	    (rc = io_lock(&lock, true, true)) < 0) {
		error_info_set(error, rc, "cannot take the lock of %s: %s", path, io_strerror(rc));
		goto out;
	}
	locked = true;
	if ((rc = walk_dropped_commits(manifest, end, dropped, context, &result->commits_dropped)) < 0) {
		error_info_set(error, rc, "cannot list the commits after version %llu: %s",
			       (unsigned long long)root.version, io_strerror(rc));
		goto out;
	}
	uint64_t file_size;
	if ((rc = io_size(&manifest->file, &file_size)) < 0)
		goto out;
	result->bytes_dropped = file_size > end ? file_size - end : 0;
	/* the cut first, then the slots: a crash between leaves a slot naming a root past the
	 * end, so the store is still damaged and a rerun finishes (with nothing left to list) */
	zeros = calloc(1, MANIFEST_META_SLOT_SIZE);
	if (!zeros) {
		rc = -ENOMEM;
		goto out;
	}
	if ((rc = io_file_open(manifest->directory, "manifest", O_RDWR, IO_MANIFEST, &file)) < 0 ||
	    (rc = io_truncate(&file, end)) < 0 || (rc = io_fsync(&file)) < 0 ||
	    (rc = io_failpoint("rollback.after_cut")) < 0 ||
	    (rc = io_pwrite(&file, zeros, MANIFEST_META_SLOT_SIZE,
			    MANIFEST_META_OFFSET + ((root.sequence + 1) % 2) * MANIFEST_META_SLOT_SIZE)) < 0 ||
	    (rc = manifest_meta_write_file(&file, &root, end)) < 0 || (rc = io_fsync(&file)) < 0) {
		error_info_set(error, rc, "cannot roll %s back to version %llu: %s", path,
			       (unsigned long long)root.version, io_strerror(rc));
		goto out;
	}
out:
	free(zeros);
	io_file_close(&file);
	if (locked)
		io_lock(&lock, false, true);   /* released at close too */
	io_file_close(&lock);
	manifest_close(manifest);
	return rc;
}

int manifest_audit_commit(struct manifest *manifest, const char *branch_name, const char *actor, const char *message,
			  struct error_info *error)
{
	struct manifest_publish publish;
	int rc = manifest_publish_begin(manifest, &publish, error);
	if (rc < 0)
		return rc;
	struct branch_record branch;
	struct commit_record record;
	journal_commit_record_init(&record);
	if ((rc = manifest_branch_find(manifest->pager, publish.base.branches, branch_name, &branch)) < 0) {
		error_info_set(error, rc, "branch %s: the branch record cannot be read", branch_name);
		goto out;
	}
	struct ulid base_id;
	ulid_new(&base_id);
	manifest_commit_id(&base_id, publish.base.version + 1, &record.id);
	record.time_us = manifest_publish_time(&publish);
	record.actor = strdup(actor);
	record.message = strdup(message);
	if (!record.actor || !record.message) {
		rc = error_info_set(error, -ENOMEM, "out of memory");
		goto out;
	}
	if ((rc = manifest_publish_history(&publish, &branch, &record, error)) < 0)
		goto out;
	rc = manifest_publish_commit_state(&publish, &branch, &record, branch.heads, branch.names, NULL, error);
out:
	journal_commit_record_free(&record);
	manifest_publish_end(&publish);
	return rc;
}
