/*
 * table_stage — staged writes (layer: table): the id map, adding rows and
 * deletes, cutting fragments (the spill writer thread that writes them is in
 * table_writer.c), runs, sorting and sealing. See table.h (table_stage_*)
 * and docs/ARCHITECTURE.md "How a large write stays small in memory".
 *
 * Invariants kept (in addition to table.h's 1–3):
 *   4. In a stage, the id map names, for every id staged, the entry added
 *      last for it; every earlier entry for that id is DEAD. So the entries
 *      that are not DEAD are exactly "the last staged row or delete per id".
 *   5. A staged row is either pending (its line is in pending_lines) or cut
 *      (it is row `row_index` of stage fragment `location`). Pending rows
 *      that die are simply left out when cut; cut rows that die are added
 *      to their fragment's dead bitmap. stage live_rows / live_bytes always
 *      equal the rows that are neither DEAD nor deletes.
 *   6. Apply never changes the stage: a publish that must retry on a new
 *      base (compare-and-swap) applies the same sealed stage again.
 *   7. A spilled stage's fragments reach the segment in cut order: only its
 *      writer thread writes to the segment until seal joins it, and jobs
 *      are taken in submission order. A fragment's address is valid once
 *      its job is harvested (always by the end of seal). Only the stage's
 *      own thread touches entries, fragments and the id map.
 *   8. Before seal the id map is a hash map (5 bytes a slot, load at most
 *      3/4); seal replaces it, in its own memory, by the sorted index of the
 *      entries that are not DEAD (map_is_sorted), which lookups then search.
 *      While every entry's id is greater than the one before (ids_ascending:
 *      exports, generated keys), the map stays empty: an id greater than the
 *      last is new, and lookups binary-search the entries themselves. The
 *      first id out of order fills the map from the entries and clears
 *      ids_ascending.
 *   9. Runs (table_int.h): a spilled stage holding run_entries entries
 *      writes those that are not DEAD, sorted and all cut, as its next run
 *      and empties entries, ids and map. An id is then live in at most one
 *      place: the map, else the newest run holding it. A row staged again
 *      in a merge kills the earlier run's row in its fragment's dead
 *      bitmap at that add (invariant 5), so merging the runs newest-first
 *      per id yields exactly the last staged row or delete per id. A
 *      stage with runs seals by writing its entries as the last run: its
 *      lookups and apply then read only the runs.
 *  10. A sealed spilled overwrite has its key tree built into its segment
 *      (keys_prebuilt), with fragment sequences from 0: an overwrite keeps
 *      none of the base's fragments, so its sequences start over.
 *  11. An overwrite stays KEYS_STREAMED while every id staged is greater
 *      than every id before it (so no row ever dies and cut order is id
 *      order); then every fragment cut while it is spilled goes to the
 *      writer with its rows' ids, and the writer adds their keys to
 *      writer.keys right after writing the fragment: the seal only finishes
 *      the tree. The first id out of order moves the stage to
 *      KEYS_BUILT_AT_SEAL for good; the nodes the writer already wrote stay
 *      unreferenced in the segment, and the seal builds the tree as for a
 *      merge.
 *
 * States of a stage:
 *   OPEN (inline) --lines over inline_limit--> OPEN (spilled to a segment,
 *   writer thread running; its first error fails every later add and the seal)
 *   --run_entries ids held--> OPEN with runs (any number of times)
 *   OPEN --table_stage_seal--> SEALED --table_apply (any number of times)-->
 *   SEALED --table_stage_published--> PUBLISHED (free keeps the segment)
 *   free from OPEN or SEALED removes the segment, if any.
 *
 * Fragment sequence keys are big-endian so that memcmp order of the keys is
 * the numeric order of the sequences, which is the table's row order.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include <jansson.h>
#include <roaring/roaring.h>

#include "io.h"
#include "table.h"
#include "table_int.h"

/* ---- staging ------------------------------------------------------------------------- */
















static const uint8_t *entry_id(const struct table_stage *stage, const struct stage_entry *entry)
{
	return stage->ids.data + entry->id_offset;
}

/* The tag of a hash in the id map (never 0, which marks an empty slot). */
static uint8_t slot_tag(uint64_t hash)
{
	uint8_t tag = (uint8_t)(hash >> 56);
	return tag ? tag : 1;
}

/* Finds the map slot of id (hash: codec_hash of it): its entry's slot, or the empty slot it would take. */
static size_t stage_find_slot(const struct table_stage *stage, const void *id, size_t id_size,
			      uint64_t hash)
{
	size_t mask = stage->slot_capacity - 1;
	uint8_t tag = slot_tag(hash);
	size_t slot = (size_t)hash & mask;
	for (;;) {
		uint8_t held = stage->tags[slot];
		if (held == 0)
			return slot;
		if (held == tag) {
			const struct stage_entry *entry = &stage->entries[stage->slots[slot] - 1];
			if (entry->id_size == id_size && memcmp(entry_id(stage, entry), id, id_size) == 0)
				return slot;
		}
		slot = (slot + 1) & mask;
	}
}

static int compare_entries_by_id(const void *a, const void *b, void *context);
static void sort_entries(struct table_stage *stage, uint32_t *sorted, size_t count);

/* The index + 1 of the entry of id among count sorted entry indexes, or 0. */
static uint32_t sorted_search(const struct table_stage *stage, const uint32_t *sorted, size_t count,
			      const void *id, size_t id_size)
{
	size_t low = 0, high = count;
	while (low < high) {
		size_t middle = low + (high - low) / 2;
		const struct stage_entry *entry = &stage->entries[sorted[middle]];
		int order = table_id_compare(entry_id(stage, entry), entry->id_size, id, id_size);
		if (order == 0)
			return sorted[middle] + 1;
		if (order < 0)
			low = middle + 1;
		else
			high = middle;
	}
	return 0;
}

/* The index + 1 of the entry last staged for id, or 0. */
static uint32_t stage_lookup(const struct table_stage *stage, const void *id, size_t id_size)
{
	if (stage->map_is_sorted) {
		uint32_t held = sorted_search(stage, stage->sorted, stage->sorted_count, id, id_size);
		return held ? held
			    : sorted_search(stage, stage->sorted + stage->sorted_count, stage->deleted_count,
					    id, id_size);
	}
	if (stage->ids_ascending) {
		/* Every entry, in id order (none is DEAD: no id came twice). */
		size_t low = 0, high = stage->entry_count;
		while (low < high) {
			size_t middle = low + (high - low) / 2;
			const struct stage_entry *entry = &stage->entries[middle];
			int order = table_id_compare(entry_id(stage, entry), entry->id_size, id, id_size);
			if (order == 0)
				return (uint32_t)middle + 1;
			if (order < 0)
				low = middle + 1;
			else
				high = middle;
		}
		return 0;
	}
	if (stage->slot_capacity == 0)
		return 0;
	size_t slot = stage_find_slot(stage, id, id_size, codec_hash(id, id_size));
	return stage->tags[slot] ? stage->slots[slot] : 0;
}

/* True if id is greater than the last entry's (or there is none). */
static bool id_after_last(const struct table_stage *stage, const void *id, size_t id_size)
{
	if (stage->entry_count == 0)
		return true;
	const struct stage_entry *last = &stage->entries[stage->entry_count - 1];
	return table_id_compare(entry_id(stage, last), last->id_size, id, id_size) < 0;
}

/*
 * KEYS_STREAMED (every id so far greater than the one before): true if id
 * is greater than every id staged, the last entry's or else the last run's.
 */
static bool id_above_all(const struct table_stage *stage, const void *id, size_t id_size)
{
	if (stage->entry_count > 0)
		return id_after_last(stage, id, id_size);
	return stage->last_run_id.size == 0 ||
	       table_id_compare(stage->last_run_id.data, stage->last_run_id.size, id, id_size) < 0;
}

/* True if the map must grow before it takes one more id (keeps the load at most 3/4). */
static bool stage_map_full(const struct table_stage *stage)
{
	return (stage->distinct + 1) * 4 > stage->slot_capacity * 3;
}

/* Doubles the id map. 0 or -ENOMEM; unchanged on error. */
static int stage_grow_map(struct table_stage *stage)
{
	size_t capacity = stage->slot_capacity ? stage->slot_capacity * 2 : 1024;
	uint32_t *slots = malloc(capacity * sizeof *slots);
	uint8_t *tags = calloc(capacity, sizeof *tags);
	if (!slots || !tags) {
		free(slots);
		free(tags);
		return -ENOMEM;
	}
	uint32_t *old_slots = stage->slots;
	uint8_t *old_tags = stage->tags;
	size_t old_capacity = stage->slot_capacity;
	stage->slots = slots;
	stage->tags = tags;
	stage->slot_capacity = capacity;
	for (size_t i = 0; i < old_capacity; i++) {
		if (!old_tags[i])
			continue;
		const struct stage_entry *entry = &stage->entries[old_slots[i] - 1];
		size_t slot = (size_t)codec_hash(entry_id(stage, entry), entry->id_size) & (capacity - 1);
		while (tags[slot])
			slot = (slot + 1) & (capacity - 1);
		slots[slot] = old_slots[i];
		tags[slot] = old_tags[i];
	}
	free(old_slots);
	free(old_tags);
	return 0;
}

/*
 * Leaves ascending mode (invariant 8): puts every entry (all distinct, none
 * DEAD) into the map. 0 or -ENOMEM; on error the stage is unchanged.
 */
static int stage_build_map(struct table_stage *stage)
{
	assert(stage->ids_ascending && stage->distinct == stage->entry_count);
	while (stage_map_full(stage)) {
		int rc = stage_grow_map(stage);
		if (rc < 0)
			return rc;
	}
	for (size_t i = 0; i < stage->entry_count; i++) {
		const struct stage_entry *entry = &stage->entries[i];
		uint64_t hash = codec_hash(entry_id(stage, entry), entry->id_size);
		size_t slot = stage_find_slot(stage, entry_id(stage, entry), entry->id_size, hash);
		stage->slots[slot] = (uint32_t)i + 1;
		stage->tags[slot] = slot_tag(hash);
	}
	stage->ids_ascending = false;
	return 0;
}

/*
 * The staged ids a spilled stage keeps in memory unless told otherwise:
 * TABLE_RUN_ENTRIES, or GRAPHFS_STAGE_RUN_ENTRIES (1..TABLE_RUN_ENTRIES), with
 * which the tests write runs from a few thousand rows instead of a million.
 */
static uint32_t default_run_entries(void)
{
	const char *text = getenv("GRAPHFS_STAGE_RUN_ENTRIES");
	unsigned long entries = text && *text ? strtoul(text, NULL, 10) : 0;
	return entries >= 1 && entries <= TABLE_RUN_ENTRIES ? (uint32_t)entries : TABLE_RUN_ENTRIES;
}

/*
 * The staged bytes a stage keeps in memory before it spills to a segment:
 * TABLE_INLINE_LIMIT, or GRAPHFS_STAGE_INLINE_BYTES (4096..TABLE_INLINE_LIMIT),
 * with which the tests make segment files from writes of a few hundred KiB.
 */
static size_t default_inline_limit(void)
{
	const char *text = getenv("GRAPHFS_STAGE_INLINE_BYTES");
	unsigned long bytes = text && *text ? strtoul(text, NULL, 10) : 0;
	return bytes >= 4096 && bytes <= TABLE_INLINE_LIMIT ? (size_t)bytes : TABLE_INLINE_LIMIT;
}

int table_stage_open(struct pager *pager, enum table_write_mode mode, enum codec_kind codec,
		     table_segment_allocator allocate, void *allocate_context,
		     struct table_stage **out)
{
	struct table_stage *stage = calloc(1, sizeof *stage);
	if (!stage)
		return -ENOMEM;
	stage->pager = pager;
	stage->mode = mode;
	stage->codec = codec;
	stage->allocate = allocate;
	stage->allocate_context = allocate_context;
	stage->run_entries = default_run_entries();
	stage->inline_limit = default_inline_limit();
	stage->ids_ascending = true;
	stage->keys_build = mode == TABLE_OVERWRITE ? KEYS_STREAMED : KEYS_BUILT_AT_SEAL;
	buf_init(&stage->last_run_id);
	buf_init(&stage->ids);
	buf_init(&stage->pending_lines);
	buf_init(&stage->scratch);
	for (size_t i = 0; i < STAGE_QUEUE_DEPTH; i++) {
		buf_init(&stage->writer.jobs[i].payload);
		buf_init(&stage->writer.jobs[i].keys);
	}
	*out = stage;
	return 0;
}

void table_stage_free(struct table_stage *stage)
{
	if (!stage)
		return;
	table_writer_stop(stage);
	btree_builder_free(stage->writer.keys);
	stage->writer.keys = NULL;
	for (size_t i = 0; i < STAGE_QUEUE_DEPTH; i++) {
		buf_free(&stage->writer.jobs[i].payload);
		buf_free(&stage->writer.jobs[i].keys);
	}
	buf_free(&stage->last_run_id);
	if (stage->segment) {
		pager_segment_free(stage->segment);
		if (stage->state != STAGE_PUBLISHED)
			pager_segment_remove(stage->pager, stage->segment_id);
	}
	for (size_t i = 0; i < stage->fragment_count; i++) {
		buf_free(&stage->fragments[i].payload);
		if (stage->fragments[i].dead)
			roaring_bitmap_free(stage->fragments[i].dead);
	}
	free(stage->fragments);
	free(stage->entries);
	free(stage->slots);
	free(stage->tags);
	free(stage->pending);
	free(stage->sorted);
	table_runs_free(stage->runs);
	table_edges_stage_free(stage->edges);
	buf_free(&stage->ids);
	buf_free(&stage->pending_lines);
	buf_free(&stage->scratch);
	free(stage);
}

/* Debug check of a stage's state change: OPEN -> SEALED -> PUBLISHED, never back. */
static void stage_state_check(const struct table_stage *stage, enum stage_state next)
{
	(void)stage;
	(void)next;
	assert(next >= stage->state && (next != STAGE_PUBLISHED || stage->state != STAGE_OPEN));
}

static void stage_enter(struct table_stage *stage, enum stage_state next)
{
	stage_state_check(stage, next);
	stage->state = next;
}

bool table_stage_tracks_edges(const struct table_stage *stage)
{
	return stage->edges != NULL;
}

int table_stage_track_edges(struct table_stage *stage)
{
	if (stage->edges)
		return 0;
	if (stage->rows_added > 0 || stage->state != STAGE_OPEN)
		return -EINVAL;
	return table_edges_stage_open(stage->pager, stage->mode, &stage->edges);
}

void table_stage_set_run_entries(struct table_stage *stage, uint32_t entries)
{
	stage->run_entries = entries ? entries : 1;
}

void table_stage_published(struct table_stage *stage)
{
	stage_enter(stage, STAGE_PUBLISHED);
}

bool table_stage_keys_streamed(const struct table_stage *stage)
{
	return stage->state != STAGE_OPEN && stage->keys_prebuilt && stage->keys_build == KEYS_STREAMED;
}

enum table_write_mode table_stage_mode(const struct table_stage *stage)
{
	return stage->mode;
}

uint64_t table_stage_rows(const struct table_stage *stage)
{
	return stage->rows_added;
}

uint64_t table_stage_bytes(const struct table_stage *stage)
{
	return stage->bytes_added;
}

uint64_t table_stage_segment(const struct table_stage *stage)
{
	return stage->segment ? stage->segment_id : 0;
}

/* The record of an in-memory entry (its id points into stage->ids). */
static struct stage_record entry_record(const struct table_stage *stage, const struct stage_entry *entry)
{
	return (struct stage_record){
		.id = entry_id(stage, entry),
		.id_size = (uint16_t)entry->id_size,
		.is_delete = (entry->flags & ENTRY_DELETE) != 0,
		.fragment = entry->location,
		.row_index = (uint16_t)entry->row_index,
		.line_size = entry->line_size,
	};
}

/* What the stage last staged for id: 1 with *out, 0 if nothing, or -errno (a run read back damaged). */
static int stage_find(const struct table_stage *stage, const void *id, size_t id_size, struct stage_record *out)
{
	uint32_t held = stage_lookup(stage, id, id_size);
	if (held) {
		*out = entry_record(stage, &stage->entries[held - 1]);
		return 1;
	}
	return stage->runs ? table_runs_find(stage->runs, id, id_size, out) : 0;
}

int table_stage_has(const struct table_stage *stage, const void *id, size_t id_size)
{
	struct stage_record record;
	int found = stage_find(stage, id, id_size, &record);
	return found == 1 ? !record.is_delete : found;
}

int table_stage_deletes(const struct table_stage *stage, const void *id, size_t id_size)
{
	struct stage_record record;
	int found = stage_find(stage, id, id_size, &record);
	return found == 1 ? record.is_delete : found;
}

/* Appends the ids of pending rows [first, end) to keys, as struct stage_job describes. 0 or -ENOMEM. */
static int stage_cut_keys(struct table_stage *stage, size_t first, size_t end, struct buf *keys)
{
	for (size_t i = first; i < end; i++) {
		const struct stage_entry *entry = &stage->entries[stage->pending[i]];
		assert(!(entry->flags & ENTRY_DEAD));  /* invariant 11: no row dies while streamed */
		int rc = buf_reserve(keys, 2 + (size_t)entry->id_size);
		if (rc < 0)
			return rc;
		buf_put_u16(keys, (uint16_t)entry->id_size);
		buf_append(keys, entry_id(stage, entry), entry->id_size);
	}
	return 0;
}

/*
 * Cuts one fragment from the pending rows starting at *cursor: the live
 * rows that fit TABLE_FRAGMENT_ROWS / TABLE_FRAGMENT_BYTES. A spilled stage
 * writes it to the segment; an inline one keeps the payload for apply.
 * Advances *cursor past the rows consumed. 0 or -errno; on error no row was
 * assigned to a fragment.
 */
static int stage_cut(struct table_stage *stage, size_t *cursor)
{
	size_t first = *cursor, end = first;
	uint32_t rows = 0;
	uint64_t bytes = 0;
	while (end < stage->pending_count) {
		const struct stage_entry *entry = &stage->entries[stage->pending[end]];
		if (!(entry->flags & ENTRY_DEAD)) {
			if (rows == TABLE_FRAGMENT_ROWS ||
			    (rows > 0 && bytes + entry->line_size > TABLE_FRAGMENT_BYTES))
				break;
			rows++;
			bytes += entry->line_size;
		}
		end++;
	}
	if (rows == 0) {
		*cursor = end;
		return 0;
	}
	if (4 + 4 * (uint64_t)rows + bytes > BLOCK_MAX_RAW_SIZE)
		return -EFBIG;
	int rc = table_grow_array((void **)&stage->fragments, &stage->fragment_capacity,
			    stage->fragment_count + 1, sizeof *stage->fragments);
	if (rc < 0)
		return rc;
	struct buf *payload = stage->segment ? table_writer_next_payload(stage) : &stage->scratch;
	buf_reset(payload);
	if ((rc = buf_reserve(payload, 4 + 4 * (size_t)rows + bytes)) < 0)
		return rc;
	buf_put_u32(payload, rows);
	for (size_t i = first; i < end; i++) {
		const struct stage_entry *entry = &stage->entries[stage->pending[i]];
		if (!(entry->flags & ENTRY_DEAD))
			buf_put_u32(payload, entry->line_size);
	}
	/* Invariant 11: the writer adds these rows' keys once it has written the fragment. */
	struct buf *keys = stage->segment && stage->writer.running
				   ? &stage->writer.jobs[stage->writer.submitted % STAGE_QUEUE_DEPTH].keys
				   : NULL;
	if (keys) {
		buf_reset(keys);
		if (stage->keys_build == KEYS_STREAMED && (rc = stage_cut_keys(stage, first, end, keys)) < 0)
			return rc;
	}
	for (size_t i = first; i < end; i++) {
		const struct stage_entry *entry = &stage->entries[stage->pending[i]];
		if (!(entry->flags & ENTRY_DEAD))
			buf_append(payload, stage->pending_lines.data + entry->location, entry->line_size);
	}
	struct stage_fragment *fragment = &stage->fragments[stage->fragment_count];
	memset(fragment, 0, sizeof *fragment);
	buf_init(&fragment->payload);
	if (stage->fragment_count > 0)
		fragment->slot = fragment[-1].slot + fragment[-1].rows;
	if (stage->segment) {
		if ((rc = table_writer_submit(stage, (uint32_t)stage->fragment_count)) < 0)
			return rc;
	} else {
		/* Hand the scratch buffer over as the payload; the scratch starts afresh. */
		fragment->payload = *payload;
		buf_init(payload);
	}
	fragment->rows = rows;
	fragment->live_rows = rows;
	fragment->live_bytes = bytes;
	uint32_t index = 0;
	for (size_t i = first; i < end; i++) {
		struct stage_entry *entry = &stage->entries[stage->pending[i]];
		if (entry->flags & ENTRY_DEAD)
			continue;
		entry->flags |= ENTRY_CUT;
		entry->location = (uint32_t)stage->fragment_count;
		entry->row_index = index++;
	}
	stage->fragment_count++;
	*cursor = end;
	return 0;
}

/* Cuts every pending row into fragments; pending is empty after success. 0 or -errno. */
static int stage_cut_all(struct table_stage *stage)
{
	size_t cursor = 0;
	int rc = 0;
	while (cursor < stage->pending_count && rc == 0)
		rc = stage_cut(stage, &cursor);
	/* Drop the rows that were cut (all of them unless an error stopped us). */
	if (cursor > 0 && cursor < stage->pending_count)
		memmove(stage->pending, stage->pending + cursor,
			(stage->pending_count - cursor) * sizeof *stage->pending);
	stage->pending_count -= cursor;
	if (stage->pending_count == 0)
		buf_reset(&stage->pending_lines);
	return rc;
}

/* Moves the stage to a segment of its own: announces, creates it and cuts pending rows into it. */
static int stage_spill(struct table_stage *stage)
{
	if (!stage->allocate)
		return -ENOSPC;
	uint64_t segment_id;
	int rc = stage->allocate(stage->allocate_context, &segment_id);
	if (rc < 0)
		return rc;
	rc = pager_segment_create(stage->pager, segment_id, &stage->segment);
	if (rc < 0)
		return rc;
	stage->segment_id = segment_id;
	table_writer_start(stage);
	if (!stage->writer.running)
		stage->keys_build = KEYS_BUILT_AT_SEAL;  /* fragments are written inline, without keys */
	return stage_cut_all(stage);
}

/* Marks the entry superseded by a newer one for its id (invariant 5 for cut rows). */
static void stage_kill(struct table_stage *stage, struct stage_entry *entry)
{
	assert(!(entry->flags & ENTRY_DEAD));
	entry->flags |= ENTRY_DEAD;
	if (entry->flags & ENTRY_DELETE)
		return;
	stage->live_rows--;
	stage->live_bytes -= entry->line_size;
	if (entry->flags & ENTRY_CUT) {
		struct stage_fragment *fragment = &stage->fragments[entry->location];
		roaring_bitmap_add(fragment->dead, entry->row_index);
		fragment->live_rows--;
		fragment->live_bytes -= entry->line_size;
	}
}

/* Marks a row of an earlier run superseded (invariant 9); its fragment's dead bitmap exists. */
static void stage_kill_record(struct table_stage *stage, const struct stage_record *record)
{
	if (record->is_delete)
		return;
	struct stage_fragment *fragment = &stage->fragments[record->fragment];
	assert(fragment->dead && fragment->live_rows > 0);
	stage->live_rows--;
	stage->live_bytes -= record->line_size;
	roaring_bitmap_add(fragment->dead, record->row_index);
	fragment->live_rows--;
	fragment->live_bytes -= record->line_size;
}

/*
 * Writes the entries that are not DEAD, in id order, as the stage's next run
 * and starts entries, ids and map over (invariant 9). Cuts pending rows first,
 * so every row has its fragment. 0 or -errno; on error the entries are as
 * they were (some pending rows may have been cut).
 */
static int stage_flush_run(struct table_stage *stage)
{
	int rc = stage_cut_all(stage);
	if (rc < 0)
		return rc;
	if (!stage->runs && (rc = table_runs_open(stage->pager, &stage->runs)) < 0)
		return rc;
	size_t count = 0;
	uint32_t *sorted = malloc((stage->distinct ? stage->distinct : 1) * sizeof *sorted);
	if (!sorted)
		return -ENOMEM;
	for (size_t i = 0; i < stage->entry_count; i++)
		if (!(stage->entries[i].flags & ENTRY_DEAD))
			sorted[count++] = (uint32_t)i;
	assert(count == stage->distinct);
	sort_entries(stage, sorted, count);
	rc = table_runs_begin(stage->runs, count);
	for (size_t i = 0; rc == 0 && i < count; i++) {
		const struct stage_entry *entry = &stage->entries[sorted[i]];
		assert((entry->flags & ENTRY_DELETE) || (entry->flags & ENTRY_CUT));
		struct stage_record record = entry_record(stage, entry);
		rc = table_runs_add(stage->runs, &record);
	}
	if (rc == 0 && count > 0 && stage->keys_build == KEYS_STREAMED) {
		/* The entries are about to go: keep the greatest id for the order check (invariant 11). */
		const struct stage_entry *last = &stage->entries[sorted[count - 1]];
		buf_reset(&stage->last_run_id);
		rc = buf_append(&stage->last_run_id, entry_id(stage, last), last->id_size);
	}
	free(sorted);
	if (rc == 0)
		rc = table_runs_end(stage->runs);
	if (rc < 0) {
		table_runs_abandon(stage->runs);
		return rc;
	}
	stage->entry_count = 0;
	buf_reset(&stage->ids);
	if (stage->slot_capacity && !stage->ids_ascending)
		memset(stage->tags, 0, stage->slot_capacity);
	stage->distinct = 0;
	stage->ids_ascending = true;
	return 0;
}

static int stage_add_row(struct table_stage *stage, const struct schema_row *row)
{
	const uint8_t *id = row->id.data;
	size_t id_size = row->id.size;
	size_t line_size = row->is_delete ? 0 : row->canonical.size;
	int rc;
	if (stage->state != STAGE_OPEN || stage->map_is_sorted || id_size == 0 || id_size > BTREE_MAX_KEY || id_size > UINT16_MAX)
		return -EINVAL;
	if (row->is_delete && stage->mode == TABLE_OVERWRITE)
		return -EINVAL;
	/* The id's map slot is a cache miss in a large stage: start loading it while the line is checked. */
	bool hashed = !stage->ids_ascending;
	uint64_t hash = hashed ? codec_hash(id, id_size) : 0;
	if (hashed && stage->slot_capacity)
		__builtin_prefetch(&stage->tags[(size_t)hash & (stage->slot_capacity - 1)]);
	/* A row's line is canonical: it ends with "\n" and starts with its id (fragments keep no ids). */
	if (!row->is_delete && (line_size == 0 || row->canonical.data[line_size - 1] != '\n' ||
				!table_line_has_id(row->canonical.data, line_size, id, id_size, &stage->scratch)))
		return -EINVAL;
	/* A row must fit a fragment of its own; entry indexes are u32; id offsets fit 37 bits. */
	if (4 + 4 + (uint64_t)line_size > BLOCK_MAX_RAW_SIZE || stage->entry_count >= UINT32_MAX - 1 ||
	    stage->ids.size + id_size > STAGE_IDS_LIMIT)
		return -EFBIG;
	/* A fragment the spill writer failed to write fails every later add. */
	if ((rc = stage_writer_failure(stage)) < 0)
		return rc;
	/* Invariant 11: an id not above every id before it ends the streamed key tree. */
	if (stage->keys_build == KEYS_STREAMED && !id_above_all(stage, id, id_size))
		stage->keys_build = KEYS_BUILT_AT_SEAL;
	/* A full run goes to the scratch file before the lookups, which then see it there. */
	if (stage->segment &&
	    (stage->entry_count >= stage->run_entries || stage->ids.size + id_size > STAGE_RUN_ID_BYTES) &&
	    (rc = stage_flush_run(stage)) < 0)
		return rc;
	/* An id greater than the last is new to memory (invariant 8); one out of order needs the map. */
	if (stage->ids_ascending && !id_after_last(stage, id, id_size) && (rc = stage_build_map(stage)) < 0)
		return rc;
	size_t slot = 0;
	uint32_t held = 0;
	if (!stage->ids_ascending) {
		if (!hashed)
			hash = codec_hash(id, id_size);
		slot = stage->slot_capacity ? stage_find_slot(stage, id, id_size, hash) : 0;
		held = stage->slot_capacity && stage->tags[slot] ? stage->slots[slot] : 0;
	}
	if (held && stage->mode == TABLE_OVERWRITE)
		return -EEXIST;
	/* Not in memory: an earlier run may hold it (not while streamed: it is above every id staged). */
	struct stage_record earlier;
	int in_runs = 0;
	if (!held && stage->runs && stage->keys_build != KEYS_STREAMED) {
		if ((in_runs = table_runs_find(stage->runs, id, id_size, &earlier)) < 0)
			return in_runs;
		if (in_runs && stage->mode == TABLE_OVERWRITE)
			return -EEXIST;
		if (in_runs && !earlier.is_delete &&
		    (earlier.fragment >= stage->fragment_count ||
		     earlier.row_index >= stage->fragments[earlier.fragment].rows))
			return -EIO;
	}

	/* Make room first, so that nothing below can fail once the stage changes. */
	if (!row->is_delete) {
		if (!stage->segment && stage->pending_lines.size + line_size > stage->inline_limit) {
			if ((rc = stage_spill(stage)) < 0)
				return rc;
		} else if (stage->segment &&
			   (stage->pending_count >= TABLE_FRAGMENT_ROWS ||
			    (stage->pending_count > 0 &&
			     stage->pending_lines.size + line_size > TABLE_FRAGMENT_BYTES))) {
			if ((rc = stage_cut_all(stage)) < 0)
				return rc;
		}
		if ((rc = buf_reserve(&stage->pending_lines, line_size)) < 0 ||
		    (rc = table_grow_array((void **)&stage->pending, &stage->pending_capacity,
				     stage->pending_count + 1, sizeof *stage->pending)) < 0)
			return rc;
	}
	/* The row this one supersedes may have been cut (just now, too): it needs a dead bitmap. */
	struct stage_entry *previous = held ? &stage->entries[held - 1] : NULL;
	uint32_t dying = UINT32_MAX; /* the fragment of the superseded row, if it was cut */
	if (previous && (previous->flags & ENTRY_CUT))
		dying = previous->location;
	else if (in_runs && !earlier.is_delete)
		dying = earlier.fragment;
	if (dying != UINT32_MAX && !stage->fragments[dying].dead) {
		roaring_bitmap_t *dead = roaring_bitmap_create();
		if (!dead)
			return -ENOMEM;
		stage->fragments[dying].dead = dead;
	}
	if ((rc = table_grow_array((void **)&stage->entries, &stage->entry_capacity, stage->entry_count + 1,
			     sizeof *stage->entries)) < 0 ||
	    (rc = buf_reserve(&stage->ids, id_size)) < 0)
		return rc;
	if (!stage->ids_ascending && !held && stage_map_full(stage)) {
		if ((rc = stage_grow_map(stage)) < 0)
			return rc;
		slot = stage_find_slot(stage, id, id_size, hash);
	}
	/* The entries array may have moved. */
	previous = held ? &stage->entries[held - 1] : NULL;

	size_t index = stage->entry_count++;
	struct stage_entry *entry = &stage->entries[index];
	memset(entry, 0, sizeof *entry);
	entry->id_offset = stage->ids.size;
	entry->id_size = id_size;
	buf_append(&stage->ids, id, id_size);
	if (row->is_delete) {
		entry->flags = ENTRY_DELETE;
	} else {
		entry->line_size = (uint32_t)line_size;
		entry->location = (uint32_t)stage->pending_lines.size;
		buf_append(&stage->pending_lines, row->canonical.data, line_size);
		stage->pending[stage->pending_count++] = (uint32_t)index;
		stage->live_rows++;
		stage->live_bytes += line_size;
	}
	if (previous) {
		stage_kill(stage, previous);
	} else {
		if (in_runs)
			stage_kill_record(stage, &earlier);
		stage->distinct++;
	}
	if (!stage->ids_ascending) {
		stage->slots[slot] = (uint32_t)index + 1;
		stage->tags[slot] = slot_tag(hash);
	}
	stage->rows_added++;
	stage->bytes_added += line_size;
	return 0;
}

int table_stage_add(struct table_stage *stage, const struct schema_row *row)
{
	if (stage->edges_error)
		return stage->edges_error;
	if (stage->edges && !row->is_delete && (row->from.size == 0 || row->to.size == 0))
		return -EINVAL;
	int rc = stage_add_row(stage, row);
	if (rc == 0 && stage->edges && (rc = table_edges_stage_add(stage->edges, row)) < 0)
		stage->edges_error = rc;  /* the row is staged but not indexed: the stage can no longer seal */
	return rc;
}

static int compare_entries_by_id(const void *a, const void *b, void *context)
{
	const struct table_stage *stage = context;
	const struct stage_entry *left = &stage->entries[*(const uint32_t *)a];
	const struct stage_entry *right = &stage->entries[*(const uint32_t *)b];
	return table_id_compare(entry_id(stage, left), left->id_size, entry_id(stage, right), right->id_size);
}

/* True if the count entry indexes are in strictly increasing id order. */
static bool entries_in_order(struct table_stage *stage, const uint32_t *sorted, size_t count)
{
	for (size_t i = 1; i < count; i++)
		if (compare_entries_by_id(&sorted[i - 1], &sorted[i], stage) >= 0)
			return false;
	return true;
}

#define SORT_SMALL 24   /* ranges this short are insertion-sorted */

/* Orders two entries by key, then (equal keys) by their whole ids. */
static int compare_keyed(const struct table_stage *stage, uint64_t key_a, uint32_t a, uint64_t key_b, uint32_t b)
{
	if (key_a != key_b)
		return key_a < key_b ? -1 : 1;
	return compare_entries_by_id(&a, &b, (void *)stage);
}

/*
 * Sorts keys[0..count) with the entry indexes beside them, in place: an
 * American flag sort (a most-significant-digit radix sort that permutes by
 * cycles, needing no second buffer) on byte `digit` of the keys, then each
 * bucket on the next byte; short ranges by insertion; ranges whose keys are
 * all equal by their whole ids.
 */
static void sort_keyed(struct table_stage *stage, uint64_t *keys, uint32_t *entries, size_t count, int digit)
{
	if (count < SORT_SMALL) {
		for (size_t i = 1; i < count; i++) {
			uint64_t key = keys[i];
			uint32_t entry = entries[i];
			size_t j = i;
			for (; j > 0 && compare_keyed(stage, keys[j - 1], entries[j - 1], key, entry) > 0; j--) {
				keys[j] = keys[j - 1];
				entries[j] = entries[j - 1];
			}
			keys[j] = key;
			entries[j] = entry;
		}
		return;
	}
	if (digit == 8) {
		/* Equal keys: only the whole ids tell them apart. */
		qsort_r(entries, count, sizeof *entries, compare_entries_by_id, stage);
		return;
	}
	int shift = 56 - 8 * digit;
	size_t counts[256] = { 0 }, starts[256], ends[256];
	for (size_t i = 0; i < count; i++)
		counts[(keys[i] >> shift) & 0xff]++;
	size_t position = 0;
	for (int b = 0; b < 256; b++) {
		starts[b] = position;
		position += counts[b];
		ends[b] = position;
	}
	size_t next[256];
	memcpy(next, starts, sizeof next);
	for (int b = 0; b < 256; b++) {
		while (next[b] < ends[b]) {
			uint64_t key = keys[next[b]];
			uint32_t entry = entries[next[b]];
			int home = (int)((key >> shift) & 0xff);
			/* Carry the element to its bucket, taking the one there along, until one belongs in b. */
			while (home != b) {
				uint64_t swap_key = keys[next[home]];
				uint32_t swap_entry = entries[next[home]];
				keys[next[home]] = key;
				entries[next[home]] = entry;
				next[home]++;
				key = swap_key;
				entry = swap_entry;
				home = (int)((key >> shift) & 0xff);
			}
			keys[next[b]] = key;
			entries[next[b]] = entry;
			next[b]++;
		}
	}
	for (int b = 0; b < 256; b++)
		if (counts[b] > 1)
			sort_keyed(stage, keys + starts[b], entries + starts[b], counts[b], digit + 1);
}

/*
 * Sorts count entry indexes by id. Ids often arrive in order (exports,
 * generated keys): then nothing moves. Otherwise each entry gets a key, the 8
 * bytes of its id after the common prefix of all of them (big-endian,
 * zero-padded: zero sorts first, as a shorter id does, so key order never
 * contradicts id order), and sort_keyed orders keys and indexes together: no
 * id is read but to break a tie. Cannot fail (without memory for the keys it
 * sorts the indexes by their ids).
 */
static void sort_entries(struct table_stage *stage, uint32_t *sorted, size_t count)
{
	if (count < 2 || entries_in_order(stage, sorted, count))
		return;
	uint64_t *keys = malloc(count * sizeof *keys);
	if (!keys) {
		qsort_r(sorted, count, sizeof *sorted, compare_entries_by_id, stage);
		return;
	}
	const struct stage_entry *first = &stage->entries[sorted[0]];
	size_t common = first->id_size;
	for (size_t i = 1; i < count && common > 0; i++) {
		const struct stage_entry *entry = &stage->entries[sorted[i]];
		const uint8_t *a = entry_id(stage, first), *b = entry_id(stage, entry);
		size_t limit = common < entry->id_size ? common : entry->id_size, same = 0;
		while (same < limit && a[same] == b[same])
			same++;
		common = same;
	}
	for (size_t i = 0; i < count; i++) {
		const struct stage_entry *entry = &stage->entries[sorted[i]];
		const uint8_t *id = entry_id(stage, entry);
		uint64_t key = 0;
		for (size_t byte = 0; byte < 8; byte++)
			key = key << 8 | (common + byte < entry->id_size ? id[common + byte] : 0);
		keys[i] = key;
	}
	sort_keyed(stage, keys, sorted, count, 0);
	free(keys);
}

/*
 * Replaces the id map by the sorted entry indexes, in the map's own memory
 * (one u32 a slot, and the map has a slot for every id it names, so the
 * indexes fit): the peak memory of a large stage is its map, not the map
 * plus a sorted copy. A stage whose ids came in order has no map (invariant
 * 8): the indexes get memory of their own. 0 or -ENOMEM (stage unchanged).
 */
static int stage_sort_map(struct table_stage *stage)
{
	uint32_t *sorted = stage->slots;
	size_t live = 0, deleted = 0;
	if (stage->ids_ascending) {
		if (!(sorted = malloc((stage->distinct ? stage->distinct : 1) * sizeof *sorted)))
			return -ENOMEM;
		free(stage->slots);
	}
	assert(stage->ids_ascending || stage->distinct <= stage->slot_capacity);
	free(stage->tags);
	stage->tags = NULL;
	/* Live rows from the start; deletes are counted, then placed after them. */
	for (size_t i = 0; i < stage->entry_count; i++) {
		uint8_t flags = stage->entries[i].flags;
		if (flags & ENTRY_DEAD)
			continue;
		if (flags & ENTRY_DELETE)
			deleted++;
		else
			sorted[live++] = (uint32_t)i;
	}
	assert(live == stage->live_rows && live + deleted == stage->distinct);
	size_t next = live;
	for (size_t i = 0; i < stage->entry_count && next < live + deleted; i++)
		if ((stage->entries[i].flags & (ENTRY_DEAD | ENTRY_DELETE)) == ENTRY_DELETE)
			sorted[next++] = (uint32_t)i;
	sort_entries(stage, sorted, live);
	sort_entries(stage, sorted + live, deleted);
	/* Give back the rest of the map (a shrinking realloc that fails leaves it as it was). */
	if (live + deleted > 0) {
		uint32_t *smaller = realloc(sorted, (live + deleted) * sizeof *sorted);
		if (smaller)
			sorted = smaller;
	}
	stage->slots = NULL;
	stage->slot_capacity = 0;
	stage->sorted = sorted;
	stage->sorted_count = live;
	stage->deleted_count = deleted;
	stage->map_is_sorted = true;
	stage->ids_ascending = false;
	return 0;
}



int table_stage_iterator_open(const struct table_stage *stage, struct stage_iterator *iterator)
{
	iterator->stage = stage;
	iterator->cursor = NULL;
	iterator->next = 0;
	return stage->runs ? table_runs_cursor_open(stage->runs, &iterator->cursor) : 0;
}

/* 1 with *out, 0 at the end, or -errno. */
int table_stage_iterator_next(struct stage_iterator *iterator, struct stage_record *out)
{
	const struct table_stage *stage = iterator->stage;
	if (iterator->cursor)
		return table_runs_cursor_next(iterator->cursor, out);
	if (iterator->next == stage->sorted_count + stage->deleted_count)
		return 0;
	*out = entry_record(stage, &stage->entries[stage->sorted[iterator->next++]]);
	return 1;
}

void table_stage_iterator_close(struct stage_iterator *iterator)
{
	table_runs_cursor_free(iterator->cursor);
	iterator->cursor = NULL;
}

void table_stage_record_location(const struct table_stage *stage, uint64_t first_sequence,
				 const struct stage_record *record, uint8_t value[KEY_VALUE_SIZE])
{
	assert(!record->is_delete && record->fragment < stage->fragment_count);
	struct key_value location = {
		.sequence = first_sequence + stage->fragments[record->fragment].slot,
		.row_index = record->row_index,
		.row_size = record->line_size,
	};
	table_key_value_encode(&location, value);
}

/*
 * Adds the key tree entry of every live row, in id order, to builder.
 * first_sequence: the sequence the stage's first fragment gets. 0 or -errno.
 */
int table_stage_build_keys(const struct table_stage *stage, uint64_t first_sequence,
			    struct btree_builder *builder)
{
	struct stage_iterator iterator;
	int rc = table_stage_iterator_open(stage, &iterator);
	struct stage_record record;
	while (rc == 0 && (rc = table_stage_iterator_next(&iterator, &record)) == 1) {
		if (record.is_delete) {
			rc = 0;
			continue;
		}
		uint8_t value[KEY_VALUE_SIZE];
		table_stage_record_location(stage, first_sequence, &record, value);
		rc = btree_builder_add(builder, record.id, record.id_size, value, sizeof value);
	}
	table_stage_iterator_close(&iterator);
	return rc;
}

int table_stage_seal(struct table_stage *stage)
{
	if (stage->state != STAGE_OPEN)
		return 0;
	if (stage->edges_error)
		return stage->edges_error;
	int rc = stage_cut_all(stage);
	if (rc < 0)
		return rc;
	buf_free(&stage->pending_lines);
	if (stage->runs) {
		/* The last entries become the newest run; memory then holds no ids at all. */
		if ((rc = stage_flush_run(stage)) < 0)
			return rc;
		free(stage->entries);
		stage->entries = NULL;
		stage->entry_count = stage->entry_capacity = 0;
		buf_free(&stage->ids);
		free(stage->slots);
		free(stage->tags);
		stage->slots = NULL;
		stage->tags = NULL;
		stage->slot_capacity = 0;
		stage->map_is_sorted = true;
		stage->ids_ascending = false;
	} else if (!stage->map_is_sorted && (rc = stage_sort_map(stage)) < 0) {
		return rc;
	}
	for (size_t i = 0; i < stage->fragment_count; i++)
		if (stage->fragments[i].dead)
			roaring_bitmap_run_optimize(stage->fragments[i].dead);
	/* The spill writer wrote the last fragments while the ids were sorted. */
	if ((rc = table_writer_drain(stage)) < 0)
		return rc;
	table_writer_stop(stage);
	for (size_t i = 0; i < STAGE_QUEUE_DEPTH; i++) {
		buf_free(&stage->writer.jobs[i].payload);
		buf_free(&stage->writer.jobs[i].keys);
	}
	/* The writer is joined: its key tree is the stage's now. */
	struct btree_builder *streamed = stage->writer.keys;
	stage->writer.keys = NULL;
	if (stage->segment && stage->mode == TABLE_OVERWRITE && stage->keys_build == KEYS_STREAMED &&
	    streamed) {
		/* Invariant 11: the writer added every row's key; only the upper levels are left. */
		if ((rc = btree_builder_finish(streamed, &stage->prebuilt_keys)) < 0)
			return rc;
		stage->keys_prebuilt = true;
		streamed = NULL;
	}
	btree_builder_free(streamed);   /* a stream given up (invariant 11): its nodes stay unreferenced */
	/* A spilled overwrite's key tree does not depend on the base: build it now, outside the lock. */
	if (stage->segment && stage->mode == TABLE_OVERWRITE && !stage->keys_prebuilt) {
		struct btree_builder *builder = NULL;
		if ((rc = btree_builder_open_segment(stage->segment, BTREE_PACKED, &builder)) < 0)
			return rc;
		if ((rc = table_stage_build_keys(stage, 0, builder)) < 0) {
			btree_builder_free(builder);
			return rc;
		}
		if ((rc = btree_builder_finish(builder, &stage->prebuilt_keys)) < 0)
			return rc;
		stage->keys_prebuilt = true;
	}
	if (stage->edges &&
	    (rc = table_edges_stage_seal(stage->edges, stage->mode == TABLE_OVERWRITE ? stage->segment : NULL)) < 0)
		return rc;
	if (stage->segment && (rc = pager_segment_finish(stage->segment)) < 0)
		return rc;
	stage_enter(stage, STAGE_SEALED);
	return 0;
}
