/*
 * manifest_compact — publishing a compacted table version (layer: manifest;
 * docs/FORMAT.md §14 "Compaction", docs/ARCHITECTURE.md "Compaction").
 *
 * A compaction changes how a table's rows are stored, not what they are: it
 * publishes a root of the same version (like a branch create), whose branch
 * record's heads tree names the compacted table version in place of the one
 * the compaction read. No commit, no log line, no new version: `--if-version`,
 * based writes and readers of the version see the same rows.
 *
 * Invariants kept:
 *   1. The compacted version replaces exactly the version it was made from: under
 *      the store lock, the branch's head of the table must still name that table
 *      version record, else nothing is published (a commit came first; the caller
 *      plans again from the new head later).
 *   2. The head row keeps every field but the table address (docs/FORMAT.md §8),
 *      so the heads agree with the journal's replay in everything but where the
 *      same rows are stored (manifest_replay.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "manifest_int.h"

struct compact_call {
	const char *branch;
	const struct ulid *stable_id;
	struct block_address table;
	struct table_compaction *compaction;
	enum codec_kind codec;
	bool *published;
};

static int compact_once(struct manifest *manifest, void *context, struct error_info *error)
{
	const struct compact_call *call = context;
	struct manifest_publish publish;
	struct btree *heads = NULL;
	struct buf value, bytes;
	buf_init(&value);
	buf_init(&bytes);
	int rc = manifest_publish_begin(manifest, &publish, error);
	if (rc < 0)
		return rc;
	struct branch_record branch;
	struct head_row head;
	if ((rc = manifest_branch_find(manifest->pager, publish.base.branches, call->branch, &branch)) < 0) {
		if (rc == -ENOENT)
			rc = 0;   /* deleted meanwhile: nothing to compact */
		goto out;
	}
	if ((rc = btree_open(manifest->pager, branch.heads, &heads)) < 0)
		goto out;
	rc = btree_get(heads, call->stable_id->bytes, sizeof call->stable_id->bytes, &value);
	if (rc == -ENOENT) {
		rc = 0;
		goto out;
	}
	if (rc < 0 || (rc = journal_head_row_decode(value.data, value.size, &head)) < 0)
		goto out;
	if (head.state != HEAD_LIVE || !block_address_equal(head.table, call->table)) {
		rc = 0;   /* invariant 1: a commit changed the table first */
		goto out;
	}
	if ((rc = table_compaction_apply(call->compaction, manifest->pager, publish.append, call->codec,
					 &head.table)) < 0 ||
	    (rc = journal_head_row_encode(&head, &bytes)) < 0 ||
	    (rc = btree_put(heads, call->stable_id->bytes, sizeof call->stable_id->bytes, bytes.data, bytes.size)) < 0 ||
	    (rc = btree_flush(heads, publish.append, &branch.heads)) < 0)
		goto out;
	buf_reset(&bytes);
	if ((rc = manifest_branch_encode(&branch, &bytes)) < 0 ||
	    (rc = btree_put(publish.branches, branch.name, strlen(branch.name), bytes.data, bytes.size)) < 0)
		goto out;
	if ((rc = manifest_publish_finish(&publish, NULL, manifest_publish_time(&publish), NULL, error)) == 0)
		*call->published = true;
out:
	if (rc < 0 && error && error->code == 0)
		error_info_set(error, rc, "cannot publish the compaction of a table of branch %s: %s", call->branch,
			       io_strerror(rc));
	btree_free(heads);
	buf_free(&value);
	buf_free(&bytes);
	manifest_publish_end(&publish);
	return rc;
}

int manifest_compact(struct manifest *manifest, const char *branch, const struct ulid *stable_id,
		     struct block_address table, struct table_compaction *compaction, enum codec_kind codec,
		     bool *published, struct error_info *error)
{
	*published = false;
	struct compact_call call = { branch, stable_id, table, compaction, codec, published };
	return manifest_race_retry(manifest, compact_once, &call, error);
}
