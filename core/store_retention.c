/*
 * store_retention — `gc` and `optimize` through the store API: the horizon,
 * pins and the space they give back (core/manifest_gc.c does the work), and
 * tables rewritten into fresh fragments (docs/ARCHITECTURE.md "Retention").
 */
#include "store_int.h"
#include "store_txn_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int store_gc(struct store *store, const struct store_gc_options *options, store_progress_fn progress,
	     void *progress_context, struct store_gc_result *out, struct error_info *error)
{
	memset(out, 0, sizeof *out);
	if (store->read_only)
		return error_info_set(error, -EROFS, "the store is open read-only");
	int rc;
	struct manifest_gc_request request = {
		.keep_versions = options->keep_versions,
		.keep_since_us = options->keep_since_us,
		.dry_run = options->dry_run,
		.progress = progress,
		.progress_context = progress_context,
	};
	struct manifest_gc_result result;
	rc = manifest_gc(store->manifest, &request, &result, error);
	if (rc < 0)
		return rc;
	out->version = result.version;
	out->horizon_before = result.horizon_before;
	out->horizon = result.horizon;
	out->versions_reclaimed = result.versions_reclaimed;
	out->versions_pinned = result.versions_pinned;
	out->live_blocks = result.live_blocks;
	out->manifest_bytes_before = result.manifest_bytes_before;
	out->manifest_bytes_after = result.manifest_bytes_after;
	out->manifest_bytes_reclaimed = result.manifest_bytes_reclaimed;
	out->pack_bytes = result.pack_bytes;
	out->segments_removed = result.segments_removed;
	out->segment_bytes_reclaimed = result.segment_bytes_reclaimed;
	snprintf(out->held_by, sizeof out->held_by, "%s", result.held_by);
	out->held_at = result.held_at;
	return 0;
}

uint64_t store_sweep_sequence(struct store *store)
{
	return manifest_sweep_sequence(store->manifest);
}

/* ---- optimize ------------------------------------------------------------------------ */

struct optimize_list {
	struct head_row *heads;
	size_t count, capacity;
	const char *only;          /* NULL: every live table with rows */
	uint64_t bytes;
};

static int collect_table(const struct head_row *head, void *context)
{
	struct optimize_list *list = context;
	if ((list->only && strcmp(head->name, list->only) != 0) || head->row_count == 0)
		return 0;
	if (list->count == list->capacity) {
		size_t capacity = list->capacity ? list->capacity * 2 : 16;
		struct head_row *grown = realloc(list->heads, capacity * sizeof *grown);
		if (!grown)
			return -ENOMEM;
		list->heads = grown;
		list->capacity = capacity;
	}
	list->heads[list->count++] = *head;
	list->bytes += head->byte_size;
	return 0;
}

/* Node tables first: an edge table's rows are checked against them. */
static int node_tables_first(const void *a, const void *b)
{
	const struct head_row *x = a, *y = b;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Streams the table's rows as the snapshot shows them into writer. */
static int feed_rows(struct store_snapshot *snapshot, const char *name, struct store_writer *writer,
		     store_progress_fn progress, void *context, uint64_t *done, uint64_t total,
		     struct error_info *error)
{
	struct store_table *table = NULL;
	int rc = store_table_open(snapshot, name, &table);
	if (rc < 0)
		return error_info_set(error, rc, "cannot read table %s: %s", name, io_strerror(rc));
	enum { CHUNK = 1 << 20 };
	char *chunk = malloc(CHUNK);
	uint64_t size = store_table_size(table);
	rc = chunk ? 0 : error_info_set(error, -ENOMEM, "out of memory");
	for (uint64_t offset = 0; rc == 0 && offset < size;) {
		ssize_t got = store_table_pread(table, chunk, CHUNK, offset);
		if (got <= 0) {
			rc = error_info_set(error, got < 0 ? (int)got : -EIO, "cannot read table %s: %s", name,
					    strerror(got < 0 ? (int)-got : EIO));
			break;
		}
		if ((rc = store_writer_write(writer, chunk, (size_t)got, error)) < 0)
			break;
		offset += (uint64_t)got;
		*done += (uint64_t)got;
		if (progress)
			progress(*done, total, context);
	}
	free(chunk);
	store_table_close(table);
	return rc;
}

int store_optimize(struct store *store, const char *branch, const char *table, const char *message,
		   const struct store_condition *condition, store_progress_fn progress, void *progress_context,
		   struct store_commit_result *result, struct error_info *error)
{
	memset(result, 0, sizeof *result);
	branch = store_branch_or_main(branch);
	struct store_txn *txn = NULL;
	struct optimize_list list = { .only = table };
	int rc = store_txn_begin(store, branch, &txn, error);
	if (rc < 0)
		return rc;
	store_txn_set_condition(txn, condition);
	if ((rc = store_snapshot_heads(txn->snapshot, false, collect_table, &list)) < 0) {
		error_info_set(error, rc, "cannot list the tables of branch %s: %s", branch, io_strerror(rc));
		goto out;
	}
	if (table && list.count == 0) {
		struct head_row head;
		rc = store_snapshot_head(txn->snapshot, table, &head);
		rc = rc == 0 ? error_info_set(error, -ENODATA, "table %s has no rows: nothing to optimize", table)
			     : error_info_set(error, -ENOENT, "no table %s on branch %s", table, branch);
		goto out;
	}
	if (list.count == 0) {
		rc = error_info_set(error, -ENODATA, "branch %s has no table with rows: nothing to optimize", branch);
		goto out;
	}
	qsort(list.heads, list.count, sizeof *list.heads, node_tables_first);
	uint64_t done = 0;
	for (size_t i = 0; i < list.count && rc == 0; i++) {
		const struct head_row *head = &list.heads[i];
		struct store_writer *writer = NULL;
		if ((rc = store_txn_writer(txn, head->name, STORE_OVERWRITE, head->table_version, head->name, &writer,
					   error)) < 0)
			break;
		writer->optimize = true;
		if ((rc = feed_rows(txn->snapshot, head->name, writer, progress, progress_context, &done, list.bytes,
				    error)) < 0 ||
		    (rc = store_writer_finish(writer, error)) < 0)
			break;
	}
	if (rc < 0)
		goto out;
	char summary[160];
	if (!message || !*message) {
		if (list.count == 1)
			snprintf(summary, sizeof summary, "optimize %s", list.heads[0].name);
		else
			snprintf(summary, sizeof summary, "optimize %zu tables", list.count);
		message = summary;
	}
	rc = store_txn_commit(txn, message, result, error);
out:
	free(list.heads);
	store_txn_free(txn);
	return rc;
}
