/*
 * sorter — an external sort of (key, value) records in bounded memory
 * (layer: codec, beside the pager whose scratch files it spills to).
 *
 * Records are added in any order; once the memory they take reaches the
 * budget, they are sorted and written as one run to an unnamed scratch file
 * (pager_scratch_open), and memory starts over. sorter_sort sorts what is
 * left in memory; cursors then return every record in key order (memcmp,
 * then the shorter key first), records with equal keys in the order they
 * were added (the sort is stable), merging the runs as they read them. Any
 * number of cursors may be opened one after the other (or at once): a
 * sorted sorter is read-only. Nothing survives a close or a crash.
 *
 * Used by the adjacency indexes of edge tables (docs/FORMAT.md §10): the
 * rows of a large write sorted by (from, id) and by (to, id).
 */
#ifndef GRAPHFS_SORTER_H
#define GRAPHFS_SORTER_H

#include <stddef.h>
#include <stdint.h>

#include "pager.h"

#define SORTER_MAX_KEY 2048
#define SORTER_MAX_VALUE 2048

struct sorter;

/* An empty sorter spilling past budget bytes of records. Returns 0 or -ENOMEM. */
int sorter_open(struct pager *pager, size_t budget, struct sorter **out);
/* Closes the scratch file (its space returns) and frees everything. NULL is a no-op. */
void sorter_free(struct sorter *sorter);
/*
 * Adds one record (copied). Returns 0, -E2BIG (a key or value over the
 * limits), -EINVAL (the sorter is sorted), or -errno of a spill (the record
 * is then not added and the sorter is as before the call).
 */
int sorter_add(struct sorter *sorter, const void *key, size_t key_size, const void *value,
	       size_t value_size);
/* Ends the adding: sorts the records in memory. Returns 0 or -ENOMEM. Idempotent. */
int sorter_sort(struct sorter *sorter);
uint64_t sorter_count(const struct sorter *sorter);   /* records added */
size_t sorter_runs(const struct sorter *sorter);      /* runs spilled to the scratch file */

struct sorter_cursor;
/* A cursor over a sorted sorter, before its first record. Returns 0, -EINVAL (not sorted) or -ENOMEM. */
int sorter_cursor_open(struct sorter *sorter, struct sorter_cursor **out);
/*
 * The next record: 1 with its key and value (valid until the following call
 * on the cursor), 0 after the last, or -EIO (a run read back damaged) / -errno.
 */
int sorter_cursor_next(struct sorter_cursor *cursor, const uint8_t **key, size_t *key_size,
		       const uint8_t **value, size_t *value_size);
void sorter_cursor_free(struct sorter_cursor *cursor);

#endif
