/*
 * sorter — external sort of (key, value) records (see sorter.h).
 *
 * A record, in memory and in a run alike: key size (u16), value size (u16),
 * the key, the value. Runs are written one after the other to one scratch
 * file, each in key order.
 *
 * Invariants kept:
 *   1. The arena holds the records added since the last spill, in the order
 *      added; items index them, one each, and after sorter_sort are in
 *      (key, arena offset) order, so equal keys keep the order they came in.
 *   2. Run r holds records added before those of run r + 1 and before those
 *      still in memory: a cursor breaks ties by run index (memory last),
 *      which with invariant 1 makes the whole sort stable.
 *   3. A failed spill leaves the arena as it was (the file keeps bytes past
 *      its runs, which nothing reads).
 *
 * States: ADDING (sorter_add) -> SORTED (sorter_sort; cursors).
 */
#include "sorter.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "io.h"

#define RUN_BUFFER (256u << 10)   /* bytes read at a time from one run */
#define RECORD_HEADER 4

struct sort_item {
	uint64_t prefix;                /* the key's first 8 bytes, big-endian, zero padded */
	uint32_t offset;                /* into the arena */
};

struct sorter_run {
	uint64_t offset, size;          /* in the scratch file */
};

enum sorter_state { SORTER_ADDING, SORTER_SORTED };

struct sorter {
	struct pager *pager;
	size_t budget;
	enum sorter_state state;
	struct buf arena;
	struct sort_item *items;
	size_t item_count, item_capacity;
	struct io_file file;
	bool file_open;
	uint64_t file_size;
	struct sorter_run *runs;
	size_t run_count;
	uint64_t count;
};

int sorter_open(struct pager *pager, size_t budget, struct sorter **out)
{
	struct sorter *sorter = calloc(1, sizeof *sorter);
	if (!sorter)
		return -ENOMEM;
	sorter->pager = pager;
	sorter->budget = budget < (1u << 16) ? (1u << 16) : budget > (UINT32_MAX >> 1) ? (UINT32_MAX >> 1) : budget;
	buf_init(&sorter->arena);
	*out = sorter;
	return 0;
}

void sorter_free(struct sorter *sorter)
{
	if (!sorter)
		return;
	if (sorter->file_open)
		io_file_close(&sorter->file);
	buf_free(&sorter->arena);
	free(sorter->items);
	free(sorter->runs);
	free(sorter);
}

uint64_t sorter_count(const struct sorter *sorter)
{
	return sorter->count;
}

size_t sorter_runs(const struct sorter *sorter)
{
	return sorter->run_count;
}

static uint16_t load_u16(const uint8_t *at)
{
	return (uint16_t)(at[0] | at[1] << 8);
}

static void store_u16(uint8_t *at, uint16_t value)
{
	at[0] = (uint8_t)value;
	at[1] = (uint8_t)(value >> 8);
}

static int key_order(const uint8_t *a, size_t a_size, const uint8_t *b, size_t b_size)
{
	size_t common = a_size < b_size ? a_size : b_size;
	int order = common ? memcmp(a, b, common) : 0;
	if (order)
		return order;
	return (a_size > b_size) - (a_size < b_size);
}

static uint64_t key_prefix(const uint8_t *key, size_t size)
{
	uint64_t prefix = 0;
	for (size_t i = 0; i < 8; i++)
		prefix = prefix << 8 | (i < size ? key[i] : 0);
	return prefix;
}

/* The record at bytes: its key and value. */
static void record_parse(const uint8_t *bytes, const uint8_t **key, size_t *key_size, const uint8_t **value,
			 size_t *value_size)
{
	*key_size = load_u16(bytes);
	*value_size = load_u16(bytes + 2);
	*key = bytes + RECORD_HEADER;
	*value = *key + *key_size;
}

static int compare_items(const void *a, const void *b, void *context)
{
	const struct sort_item *left = a, *right = b;
	if (left->prefix != right->prefix)
		return left->prefix < right->prefix ? -1 : 1;
	const uint8_t *arena = context;
	const uint8_t *left_key, *right_key, *value;
	size_t left_size, right_size, value_size;
	record_parse(arena + left->offset, &left_key, &left_size, &value, &value_size);
	record_parse(arena + right->offset, &right_key, &right_size, &value, &value_size);
	int order = key_order(left_key, left_size, right_key, right_size);
	if (order)
		return order;
	return (left->offset > right->offset) - (left->offset < right->offset);
}

static void items_sort(struct sorter *sorter)
{
	if (sorter->item_count > 1)
		qsort_r(sorter->items, sorter->item_count, sizeof *sorter->items, compare_items, sorter->arena.data);
}

/* Writes the records in memory, sorted, as the next run; empties memory. 0 or -errno (invariant 3). */
static int sorter_spill(struct sorter *sorter)
{
	int rc;
	if (!sorter->file_open) {
		if ((rc = pager_scratch_open(sorter->pager, &sorter->file)) < 0)
			return rc;
		sorter->file_open = true;
	}
	struct sorter_run *runs = realloc(sorter->runs, (sorter->run_count + 1) * sizeof *runs);
	if (!runs)
		return -ENOMEM;
	sorter->runs = runs;
	items_sort(sorter);
	struct buf out;
	buf_init(&out);
	if ((rc = buf_reserve(&out, sorter->arena.size)) < 0)
		return rc;
	for (size_t i = 0; i < sorter->item_count; i++) {
		const uint8_t *record = sorter->arena.data + sorter->items[i].offset;
		size_t size = RECORD_HEADER + load_u16(record) + load_u16(record + 2);
		memcpy(out.data + out.size, record, size);
		out.size += size;
	}
	rc = io_pwrite(&sorter->file, out.data, out.size, sorter->file_size);
	if (rc == 0) {
		sorter->runs[sorter->run_count++] = (struct sorter_run){ sorter->file_size, out.size };
		sorter->file_size += out.size;
		buf_reset(&sorter->arena);
		sorter->item_count = 0;
	}
	buf_free(&out);
	return rc;
}

int sorter_add(struct sorter *sorter, const void *key, size_t key_size, const void *value,
	       size_t value_size)
{
	if (sorter->state != SORTER_ADDING)
		return -EINVAL;
	if (key_size > SORTER_MAX_KEY || value_size > SORTER_MAX_VALUE)
		return -E2BIG;
	size_t size = RECORD_HEADER + key_size + value_size;
	int rc;
	if (sorter->arena.size + size > sorter->budget && sorter->item_count > 0 &&
	    (rc = sorter_spill(sorter)) < 0)
		return rc;
	if (sorter->item_count == sorter->item_capacity) {
		size_t capacity = sorter->item_capacity ? sorter->item_capacity * 2 : 1024;
		struct sort_item *items = realloc(sorter->items, capacity * sizeof *items);
		if (!items)
			return -ENOMEM;
		sorter->items = items;
		sorter->item_capacity = capacity;
	}
	if ((rc = buf_reserve(&sorter->arena, size)) < 0)
		return rc;
	uint8_t *record = sorter->arena.data + sorter->arena.size;
	store_u16(record, (uint16_t)key_size);
	store_u16(record + 2, (uint16_t)value_size);
	if (key_size)
		memcpy(record + RECORD_HEADER, key, key_size);
	if (value_size)
		memcpy(record + RECORD_HEADER + key_size, value, value_size);
	sorter->items[sorter->item_count++] =
		(struct sort_item){ key_prefix(key, key_size), (uint32_t)sorter->arena.size };
	sorter->arena.size += size;
	sorter->count++;
	return 0;
}

int sorter_sort(struct sorter *sorter)
{
	if (sorter->state == SORTER_ADDING) {
		items_sort(sorter);
		sorter->state = SORTER_SORTED;
	}
	return 0;
}

/* ---- cursors ----------------------------------------------------------------- */

/* One source of a cursor: a run read through a buffer, or the records in memory. */
struct cursor_source {
	bool in_memory;
	uint64_t next_offset, end;      /* runs: the file range not yet buffered */
	uint8_t *buffer;
	size_t buffered, position;      /* runs: bytes in buffer, the current record's start */
	size_t next_item;               /* memory: the item after the current one */
	bool has_record;
	const uint8_t *key, *value;
	size_t key_size, value_size;
};

struct sorter_cursor {
	struct sorter *sorter;
	struct cursor_source *sources;  /* runs in order, then memory */
	size_t source_count;
	struct cursor_source *current;  /* returned last; advanced by the next call */
	int error;
};

/* Loads the source's next record into has_record/key/value. 0 or -errno. */
static int source_advance(struct sorter *sorter, struct cursor_source *source)
{
	source->has_record = false;
	if (source->in_memory) {
		if (source->next_item == sorter->item_count)
			return 0;
		record_parse(sorter->arena.data + sorter->items[source->next_item++].offset, &source->key,
			     &source->key_size, &source->value, &source->value_size);
		source->has_record = true;
		return 0;
	}
	for (;;) {
		size_t available = source->buffered - source->position;
		if (available >= RECORD_HEADER) {
			const uint8_t *record = source->buffer + source->position;
			size_t size = RECORD_HEADER + load_u16(record) + load_u16(record + 2);
			if (available >= size) {
				record_parse(record, &source->key, &source->key_size, &source->value,
					     &source->value_size);
				source->position += size;
				source->has_record = true;
				return 0;
			}
		}
		if (source->next_offset == source->end)
			return available == 0 ? 0 : -EIO;   /* a record cut by the run's end */
		memmove(source->buffer, source->buffer + source->position, available);
		source->buffered = available;
		source->position = 0;
		uint64_t wanted = RUN_BUFFER - available;
		if (wanted > source->end - source->next_offset)
			wanted = source->end - source->next_offset;
		int rc = io_pread(&sorter->file, source->buffer + available, (size_t)wanted, source->next_offset);
		if (rc < 0)
			return rc;
		source->next_offset += wanted;
		source->buffered += (size_t)wanted;
	}
}

int sorter_cursor_open(struct sorter *sorter, struct sorter_cursor **out)
{
	if (sorter->state != SORTER_SORTED)
		return -EINVAL;
	struct sorter_cursor *cursor = calloc(1, sizeof *cursor);
	if (!cursor)
		return -ENOMEM;
	cursor->sorter = sorter;
	cursor->source_count = sorter->run_count + 1;
	cursor->sources = calloc(cursor->source_count, sizeof *cursor->sources);
	int rc = cursor->sources ? 0 : -ENOMEM;
	for (size_t i = 0; rc == 0 && i < cursor->source_count; i++) {
		struct cursor_source *source = &cursor->sources[i];
		if (i == sorter->run_count) {
			source->in_memory = true;
		} else {
			source->next_offset = sorter->runs[i].offset;
			source->end = sorter->runs[i].offset + sorter->runs[i].size;
			if (!(source->buffer = malloc(RUN_BUFFER))) {
				rc = -ENOMEM;
				break;
			}
		}
		rc = source_advance(sorter, source);
	}
	if (rc < 0) {
		sorter_cursor_free(cursor);
		return rc;
	}
	*out = cursor;
	return 0;
}

int sorter_cursor_next(struct sorter_cursor *cursor, const uint8_t **key, size_t *key_size,
		       const uint8_t **value, size_t *value_size)
{
	if (cursor->error)
		return cursor->error;
	if (cursor->current) {
		int rc = source_advance(cursor->sorter, cursor->current);
		cursor->current = NULL;
		if (rc < 0)
			return cursor->error = rc;
	}
	/* The smallest key; the earliest source on ties (invariant 2). Few runs: a linear scan. */
	struct cursor_source *best = NULL;
	for (size_t i = 0; i < cursor->source_count; i++) {
		struct cursor_source *source = &cursor->sources[i];
		if (source->has_record &&
		    (!best || key_order(source->key, source->key_size, best->key, best->key_size) < 0))
			best = source;
	}
	if (!best)
		return 0;
	cursor->current = best;
	*key = best->key;
	*key_size = best->key_size;
	*value = best->value;
	*value_size = best->value_size;
	return 1;
}

void sorter_cursor_free(struct sorter_cursor *cursor)
{
	if (!cursor)
		return;
	for (size_t i = 0; cursor->sources && i < cursor->source_count; i++)
		free(cursor->sources[i].buffer);
	free(cursor->sources);
	free(cursor);
}
