/*
 * store_compact — a store keeps its tables' fragments few, with nobody running
 * `optimize` (docs/ARCHITECTURE.md "Compaction"; the policy is
 * core/table_compact.c's, the publish core/manifest_compact.c's).
 *
 * When it runs, in the handle that wrote:
 *   - after each commit, for every table the commit merged rows into: a TIERED
 *     compaction when one is due (the newest eight small fragments of one size
 *     class) — in store_txn_commit, or, for a handle opened with
 *     no_compaction_at_commit (a mount), when its upkeep thread calls
 *     store_compact_pending;
 *   - when the writer stops (store_close after commits; a mount's upkeep when
 *     it has been idle): a FLUSH of each table it wrote, when the rows it wrote
 *     there since its last flush are at least an eighth of the rows the flush
 *     would rewrite — so a flush rewrites at most eight times what was written.
 *
 * Invariants kept:
 *   1. Only a store of format 8 or later is compacted (an older graphfs cannot
 *      read a compacted fragment); a read-only handle compacts nothing.
 *   2. A compaction never fails the command that wrote: its error is logged
 *      (the rows are committed; the fragments stay as they were).
 *   3. notes (the tables written, and their rows since the last flush) are read
 *      and changed under notes_lock only; no compaction runs under it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "store_int.h"

#define FLUSH_FACTOR 8   /* a flush rewrites at most this many times the rows written since the last */

static bool compacts(const struct store *store)
{
	return !store->read_only && store_format_version(store) >= 8;
}

int store_compact_table(struct store *store, const char *branch, const char *table, enum table_compact_mode mode,
			uint64_t min_written, uint64_t *rows_rewritten, struct error_info *error)
{
	*rows_rewritten = 0;
	if (!compacts(store))
		return 0;
	struct store_snapshot *snapshot = NULL;
	struct table_compaction *compaction = NULL;
	struct head_row head;
	struct table_info info;
	int rc = store_snapshot_open(store, branch, STORE_LATEST, &snapshot, error);
	if (rc < 0)
		return rc;
	if ((rc = store_snapshot_head(snapshot, table, &head)) < 0) {
		rc = rc == -ENOENT ? 0 : rc;   /* dropped or renamed since: nothing to do */
		goto out;
	}
	if ((rc = table_info_read(store->pager, head.table, &info)) < 0 ||
	    (rc = table_compaction_plan(store->pager, &info, mode, &compaction)) < 0 || !compaction)
		goto out;
	uint64_t rows = table_compaction_rows(compaction);
	if (min_written * FLUSH_FACTOR < rows && mode == TABLE_COMPACT_FLUSH)
		goto out;   /* not worth it yet */
	bool published;
	if ((rc = table_compaction_prepare(compaction, store->pager, store->codec)) < 0)   /* outside the lock */
		goto out;
	rc = manifest_compact(store->manifest, branch, &head.stable_id, head.table, compaction, store->codec,
			      &published, error);
	if (rc == 0 && published) {
		*rows_rewritten = rows;
		atomic_fetch_add(&store->compactions, 1);
		atomic_fetch_add(&store->rows_compacted, rows);
	}
out:
	if (rc < 0 && error && error->code == 0)
		error_info_set(error, rc, "cannot compact table %s: %s", table, io_strerror(rc));
	table_compaction_free(compaction);
	store_snapshot_release(snapshot);
	return rc;
}

/* The note of branch's table (created with 0 rows when create): its index, or -ENOMEM/-ENOENT. */
static ssize_t note_find(struct store *store, const char *branch, const char *table, bool create)
{
	for (size_t i = 0; i < store->compact_note_count; i++)
		if (strcmp(store->compact_notes[i].branch, branch) == 0 && strcmp(store->compact_notes[i].table, table) == 0)
			return (ssize_t)i;
	if (!create)
		return -ENOENT;
	if (buf_grow_array((void **)&store->compact_notes, &store->compact_note_capacity,
			   store->compact_note_count + 1, sizeof *store->compact_notes) < 0)
		return -ENOMEM;
	struct store_compact_note *note = &store->compact_notes[store->compact_note_count];
	memset(note, 0, sizeof *note);
	snprintf(note->branch, sizeof note->branch, "%s", branch);
	snprintf(note->table, sizeof note->table, "%s", table);
	return (ssize_t)store->compact_note_count++;
}

/* store_compact_table with its error logged (invariant 2): the rows rewritten, 0 on error. */
static uint64_t compact_logged(struct store *store, const char *branch, const char *table, enum table_compact_mode mode,
			       uint64_t min_written)
{
	uint64_t rewritten;
	struct error_info error;
	error_info_clear(&error);
	if (store_compact_table(store, branch, table, mode, min_written, &rewritten, &error) == 0)
		return rewritten;
	io_log(LOG_WARNING, "%s: table %s of branch %s was not compacted: %s", store->path, table, branch,
	       error.message);
	return 0;
}

/* A copy of note i, taken under the lock (invariant 3), its tiered_due cleared when take_due:
 * false past the last note. */
static bool note_copy(struct store *store, size_t i, bool take_due, struct store_compact_note *out)
{
	pthread_mutex_lock(&store->compact_lock);
	bool there = i < store->compact_note_count;
	if (there) {
		*out = store->compact_notes[i];
		if (take_due)
			store->compact_notes[i].tiered_due = false;
	}
	pthread_mutex_unlock(&store->compact_lock);
	return there;
}

void store_compact_after_commit(struct store *store, const char *branch, const char *table, uint64_t rows)
{
	if (!compacts(store))
		return;
	pthread_mutex_lock(&store->compact_lock);
	ssize_t index = note_find(store, branch, table, true);
	if (index >= 0) {
		store->compact_notes[index].rows_written += rows;
		store->compact_notes[index].tiered_due = !store->compaction_at_commit;
	}
	pthread_mutex_unlock(&store->compact_lock);
	if (store->compaction_at_commit)
		compact_logged(store, branch, table, TABLE_COMPACT_TIERED, 0);
	/* else store_compact_pending does it */
}

#define PENDING_MERGES_MAX 8   /* tiered merges of one table per store_compact_pending */

uint64_t store_compact_pending(struct store *store)
{
	uint64_t total = 0;
	struct store_compact_note note;
	for (size_t i = 0; compacts(store) && note_copy(store, i, true, &note); i++) {
		/* one merge per commit that made one due; the upkeep may come after several */
		for (int merge = 0; note.tiered_due && merge < PENDING_MERGES_MAX; merge++) {
			uint64_t rewritten = compact_logged(store, note.branch, note.table, TABLE_COMPACT_TIERED, 0);
			if (rewritten == 0)
				break;
			total += rewritten;
		}
	}
	return total;
}

uint64_t store_compact_flush(struct store *store)
{
	uint64_t total = 0;
	struct store_compact_note note;
	for (size_t i = 0; compacts(store) && note_copy(store, i, false, &note); i++) {
		if (note.rows_written == 0)
			continue;
		uint64_t rewritten = compact_logged(store, note.branch, note.table, TABLE_COMPACT_FLUSH, note.rows_written);
		if (rewritten == 0)
			continue;
		total += rewritten;
		pthread_mutex_lock(&store->compact_lock);
		ssize_t index = note_find(store, note.branch, note.table, false);
		if (index >= 0)
			store->compact_notes[index].rows_written = 0;
		pthread_mutex_unlock(&store->compact_lock);
	}
	return total;
}
