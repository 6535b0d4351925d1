/*
 * table_apply — a sealed stage onto a base table version (layer: table): a
 * new version record, its fragments, deletion bitmaps and key tree, copy-on-
 * write, O(rows written × log rows) for a merge; and the ids a write removes
 * from its base (what referential integrity checks). The stage is never
 * changed: a publish that retries on a new base applies it again (table_stage.c
 * invariant 6).
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

/* ---- apply ------------------------------------------------------------------------------ */

int table_bitmap_append(struct pager_append *append, const roaring_bitmap_t *bitmap,
			 struct block_address *address_out)
{
	size_t size = roaring_bitmap_portable_size_in_bytes(bitmap);
	char *bytes = malloc(size);
	if (!bytes)
		return -ENOMEM;
	roaring_bitmap_portable_serialize(bitmap, bytes);
	int rc = pager_append_block(append, BLOCK_BITMAP, CODEC_NONE, bytes, size, address_out);
	free(bytes);
	return rc;
}

/* The fragment descriptors of the stage's fragments for this apply. */
struct apply_state {
	struct fragment_descriptor *descriptors; /* one per stage fragment; live_rows 0: left out */
	uint64_t first_sequence;
};

static int apply_fragments(struct pager_append *append, const struct table_stage *stage,
			   struct apply_state *state)
{
	state->descriptors = calloc(stage->fragment_count ? stage->fragment_count : 1,
				    sizeof *state->descriptors);
	if (!state->descriptors)
		return -ENOMEM;
	for (size_t i = 0; i < stage->fragment_count; i++) {
		const struct stage_fragment *fragment = &stage->fragments[i];
		struct fragment_descriptor *descriptor = &state->descriptors[i];
		descriptor->rows = fragment->rows;
		descriptor->live_rows = fragment->live_rows;
		descriptor->live_bytes = fragment->live_bytes;
		if (fragment->live_rows == 0)
			continue;
		int rc;
		if (stage->segment) {
			assert(!block_address_is_null(fragment->address)); /* invariant 7 */
			descriptor->block = fragment->address;
		} else if ((rc = pager_append_block(append, BLOCK_FRAGMENT, stage->codec,
						    fragment->payload.data, fragment->payload.size,
						    &descriptor->block)) < 0) {
			return rc;
		}
		if (fragment->live_rows < fragment->rows &&
		    (rc = table_bitmap_append(append, fragment->dead, &descriptor->bitmap)) < 0)
			return rc;
	}
	return 0;
}

/* Overwrites, and merges into an empty table: both trees bulk-built. */
static int apply_bulk(struct pager_append *append, const struct table_stage *stage,
		      const struct apply_state *state, struct table_info *info)
{
	struct btree_builder *builder = NULL;
	int rc = btree_builder_open_layout(append, BTREE_PACKED, &builder);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < stage->fragment_count; i++) {
		if (state->descriptors[i].live_rows == 0)
			continue;
		uint8_t key[SEQUENCE_KEY_SIZE], value[DESCRIPTOR_SIZE];
		table_sequence_key(state->first_sequence + stage->fragments[i].slot, key);
		table_descriptor_encode(&state->descriptors[i], value);
		if ((rc = btree_builder_add(builder, key, sizeof key, value, sizeof value)) < 0)
			goto out;
	}
	rc = btree_builder_finish(builder, &info->fragments);
	builder = NULL;
	if (rc < 0)
		goto out;
	if (stage->keys_prebuilt) {
		assert(state->first_sequence == 0);
		info->keys = stage->prebuilt_keys;
	} else {
		if ((rc = btree_builder_open_layout(append, BTREE_PACKED, &builder)) < 0 ||
		    (rc = table_stage_build_keys(stage, state->first_sequence, builder)) < 0)
			goto out;
		rc = btree_builder_finish(builder, &info->keys);
		builder = NULL;
		if (rc < 0)
			goto out;
	}
	info->row_count = stage->live_rows;
	info->byte_size = stage->live_bytes;
out:
	btree_builder_free(builder);
	return rc;
}

/*
 * The rows of old fragments that a merge deletes (replaced or deleted), per
 * fragment: a bitmap of row indexes and their bytes. An open-addressing map
 * on the fragment sequence finds a fragment's entry; memory is per touched
 * fragment, not per row.
 */
struct touched_fragment {
	uint64_t sequence;
	roaring_bitmap_t *rows;
	uint64_t bytes;
};

struct touched {
	struct touched_fragment *items;
	size_t count, capacity;
	uint32_t *slots;                /* item index + 1, 0: empty */
	size_t slot_capacity;           /* power of two */
	uint64_t rows, bytes;           /* totals */
};

static void touched_free(struct touched *touched)
{
	for (size_t i = 0; i < touched->count; i++)
		roaring_bitmap_free(touched->items[i].rows);
	free(touched->items);
	free(touched->slots);
	memset(touched, 0, sizeof *touched);
}

static size_t touched_slot(const struct touched *touched, uint64_t sequence)
{
	size_t mask = touched->slot_capacity - 1;
	size_t slot = (size_t)(sequence * UINT64_C(0x9e3779b97f4a7c15) >> 20) & mask;
	while (touched->slots[slot] && touched->items[touched->slots[slot] - 1].sequence != sequence)
		slot = (slot + 1) & mask;
	return slot;
}

/* Notes that the merge deletes row `row` (size bytes) of old fragment `sequence`.
 * 0, -EIO (the key tree named that row twice) or -ENOMEM. */
static int touched_add(struct touched *touched, uint64_t sequence, uint32_t row, uint32_t size)
{
	if ((touched->count + 1) * 4 > touched->slot_capacity * 3) {
		size_t capacity = touched->slot_capacity ? touched->slot_capacity * 2 : 64;
		uint32_t *slots = calloc(capacity, sizeof *slots);
		if (!slots)
			return -ENOMEM;
		free(touched->slots);
		touched->slots = slots;
		touched->slot_capacity = capacity;
		for (size_t i = 0; i < touched->count; i++)
			touched->slots[touched_slot(touched, touched->items[i].sequence)] = (uint32_t)i + 1;
	}
	size_t slot = touched_slot(touched, sequence);
	if (!touched->slots[slot]) {
		int rc = table_grow_array((void **)&touched->items, &touched->capacity, touched->count + 1,
				    sizeof *touched->items);
		if (rc < 0)
			return rc;
		roaring_bitmap_t *rows = roaring_bitmap_create();
		if (!rows)
			return -ENOMEM;
		touched->items[touched->count] = (struct touched_fragment){ sequence, rows, 0 };
		touched->slots[slot] = (uint32_t)++touched->count;
	}
	struct touched_fragment *item = &touched->items[touched->slots[slot] - 1];
	if (!roaring_bitmap_add_checked(item->rows, row))
		return -EIO;
	item->bytes += size;
	touched->rows++;
	touched->bytes += size;
	return 0;
}

static int compare_touched(const void *a, const void *b)
{
	const struct touched_fragment *left = a, *right = b;
	return left->sequence < right->sequence ? -1 : left->sequence > right->sequence;
}

/*
 * Names each touched fragment by the number it has in the base's fragment tree
 * and its rows by their index there: a key entry may name a fragment that
 * compaction merged into a larger one (table_descriptor_locate), whose rows
 * then sit further in; entries that land in one fragment are joined. Leaves
 * the items sorted by sequence. 0, -EIO (no such fragment), -ENOMEM.
 */
static int touched_resolve(struct pager *pager, struct pager_append *append, const struct table_info *base,
			   struct touched *touched)
{
	if (touched->count == 0)
		return 0;
	struct btree *fragments = NULL;
	int rc = btree_open_layout(pager, base->fragments, BTREE_PACKED, &fragments);
	if (rc == 0)
		btree_attach_append(fragments, append);   /* the base may be in this same publish */
	for (size_t i = 0; rc == 0 && i < touched->count; i++) {
		struct touched_fragment *item = &touched->items[i];
		struct fragment_descriptor descriptor;
		uint32_t last = roaring_bitmap_maximum(item->rows), row;
		if ((rc = table_descriptor_locate(fragments, item->sequence, last, &descriptor, &row)) < 0)
			break;
		if (row == last)
			continue;   /* the fragment of that number */
		uint64_t shift = row - last;   /* rows before the original fragment's in the merged one */
		roaring_bitmap_t *moved = roaring_bitmap_create();
		if (!moved) {
			rc = -ENOMEM;
			break;
		}
		roaring_uint32_iterator_t rows;
		roaring_init_iterator(item->rows, &rows);
		for (; rows.has_value; roaring_advance_uint32_iterator(&rows))
			roaring_bitmap_add(moved, (uint32_t)(rows.current_value + shift));
		roaring_bitmap_free(item->rows);
		item->rows = moved;
		item->sequence -= shift;
	}
	btree_free(fragments);
	if (rc == -ENOENT)
		rc = -EIO; /* the key tree names a fragment the table does not have */
	if (rc < 0)
		return rc;
	qsort(touched->items, touched->count, sizeof *touched->items, compare_touched);
	size_t kept = 0;
	for (size_t i = 0; i < touched->count; i++) {
		struct touched_fragment *item = &touched->items[i];
		if (kept > 0 && touched->items[kept - 1].sequence == item->sequence) {
			struct touched_fragment *into = &touched->items[kept - 1];
			if (roaring_bitmap_intersect(into->rows, item->rows))
				return -EIO;   /* one row named twice */
			roaring_bitmap_or_inplace(into->rows, item->rows);
			into->bytes += item->bytes;
			roaring_bitmap_free(item->rows);
			item->rows = NULL;
			continue;
		}
		touched->items[kept++] = *item;
	}
	touched->count = kept;   /* (the sequence map is not used after this) */
	return 0;
}

/*
 * Marks the rows of one old fragment deleted: a new bitmap and descriptor,
 * or the fragment leaves the tree when no live row remains. -EIO if the
 * rows are not live rows of the fragment.
 */
static int apply_old_fragment(struct pager *pager, struct pager_append *append, struct btree *fragments,
			      const struct touched_fragment *old)
{
	struct fragment_descriptor descriptor;
	roaring_bitmap_t *bitmap = NULL;
	uint8_t key[SEQUENCE_KEY_SIZE];
	table_sequence_key(old->sequence, key);
	int rc = table_descriptor_get(fragments, old->sequence, &descriptor);
	if (rc == -ENOENT)
		rc = -EIO; /* the key tree names a fragment the table does not have */
	if (rc < 0)
		return rc;
	if (block_address_is_null(descriptor.bitmap))
		bitmap = roaring_bitmap_create();
	else if ((rc = table_bitmap_read(pager, append, descriptor.bitmap, descriptor.rows, &bitmap)) < 0)
		return rc;
	if (!bitmap)
		return -ENOMEM;
	uint64_t count = roaring_bitmap_get_cardinality(old->rows);
	/* The key tree points only at live rows (table.h invariant 2). */
	if (roaring_bitmap_maximum(old->rows) >= descriptor.rows || roaring_bitmap_intersect(bitmap, old->rows) ||
	    count > descriptor.live_rows || old->bytes > descriptor.live_bytes) {
		rc = -EIO;
		goto out;
	}
	descriptor.live_rows -= (uint32_t)count;
	descriptor.live_bytes -= old->bytes;
	if (descriptor.live_rows == 0) {
		if (descriptor.live_bytes != 0) {
			rc = -EIO;
			goto out;
		}
		rc = btree_delete(fragments, key, sizeof key);
		goto out;
	}
	roaring_bitmap_or_inplace(bitmap, old->rows);
	roaring_bitmap_run_optimize(bitmap);
	if ((rc = table_bitmap_append(append, bitmap, &descriptor.bitmap)) < 0)
		goto out;
	uint8_t value[DESCRIPTOR_SIZE];
	table_descriptor_encode(&descriptor, value);
	rc = btree_put(fragments, key, sizeof key, value, sizeof value);
out:
	roaring_bitmap_free(bitmap);
	return rc;
}

/*
 * An edge table's merge: the adjacency entries of the base rows it replaces
 * or deletes go, read from their lines (one decode per touched fragment).
 * 0 or -errno.
 */
static int touched_remove_edges(struct pager *pager, struct pager_append *append, const struct table_info *base,
				const struct touched *touched, struct table_edges_update *update)
{
	if (!update || touched->count == 0)
		return 0;
	struct btree *fragments = NULL;
	struct fragment_view view;
	table_fragment_view_init(&view);
	int rc = btree_open_layout(pager, base->fragments, BTREE_PACKED, &fragments);
	if (rc < 0)
		return rc;
	btree_attach_append(fragments, append);
	for (size_t i = 0; rc == 0 && i < touched->count; i++) {
		const struct touched_fragment *item = &touched->items[i];
		struct fragment_descriptor descriptor;
		table_fragment_view_reset(&view);
		if ((rc = table_descriptor_get(fragments, item->sequence, &descriptor)) < 0 ||
		    (rc = table_fragment_view_load(pager, &descriptor, &view)) < 0)
			break;
		roaring_uint32_iterator_t rows;
		roaring_init_iterator(item->rows, &rows);
		for (; rc == 0 && rows.has_value; roaring_advance_uint32_iterator(&rows)) {
			uint32_t row = rows.current_value;
			if (row >= view.rows) {
				rc = -EIO;
				break;
			}
			size_t start = table_line_start(&view, row);
			rc = table_edges_remove_line(update, view.lines + start, table_line_end(&view, row) - start);
		}
	}
	if (rc == -ENOENT)
		rc = -EIO; /* the key tree names a fragment the table does not have */
	table_fragment_view_clear(&view);
	btree_free(fragments);
	return rc;
}

/*
 * The fragment tree of a merge: the old fragments lose the rows in touched,
 * the stage's fragments are added; counts from the base. 0 or -errno.
 */
static int apply_merge_fragments(struct pager *pager, struct pager_append *append, const struct table_info *base,
				 const struct table_stage *stage, const struct apply_state *state,
				 struct touched *touched, struct table_info *info)
{
	struct btree *fragments = NULL;
	int rc = btree_open_layout(pager, base->fragments, BTREE_PACKED, &fragments);
	if (rc < 0)
		return rc;
	btree_attach_append(fragments, append);
	if (touched->count > 0)
		qsort(touched->items, touched->count, sizeof *touched->items, compare_touched);
	for (size_t i = 0; i < touched->count; i++)
		if ((rc = apply_old_fragment(pager, append, fragments, &touched->items[i])) < 0)
			goto out;
	for (size_t i = 0; i < stage->fragment_count; i++) {
		if (state->descriptors[i].live_rows == 0)
			continue;
		uint8_t key[SEQUENCE_KEY_SIZE], descriptor[DESCRIPTOR_SIZE];
		table_sequence_key(state->first_sequence + stage->fragments[i].slot, key);
		table_descriptor_encode(&state->descriptors[i], descriptor);
		if ((rc = btree_put(fragments, key, sizeof key, descriptor, sizeof descriptor)) < 0)
			goto out;
	}
	if (touched->rows > base->row_count || touched->bytes > base->byte_size) {
		rc = -EIO;
		goto out;
	}
	if ((rc = btree_flush(fragments, append, &info->fragments)) < 0)
		goto out;
	info->row_count = base->row_count - touched->rows + stage->live_rows;
	info->byte_size = base->byte_size - touched->bytes + stage->live_bytes;
out:
	btree_free(fragments);
	return rc;
}

/* A merge into a table with rows: O(k log n) tree updates, never a walk of the table. */
static int apply_merge(struct pager *pager, struct pager_append *append, const struct table_info *base,
		       const struct table_stage *stage, const struct apply_state *state,
		       struct table_edges_update *edges, struct table_info *info)
{
	struct btree *keys = NULL;
	struct stage_iterator staged = { .cursor = NULL };
	struct touched touched = { 0 };
	struct buf value;
	buf_init(&value);
	int rc;
	if ((rc = btree_open_layout(pager, base->keys, BTREE_PACKED, &keys)) < 0)
		goto out;
	/* The base may have been flushed into this same, still unwritten, publish. */
	btree_attach_append(keys, append);
	if ((rc = table_stage_iterator_open(stage, &staged)) < 0)
		goto out;
	struct stage_record entry;
	while ((rc = table_stage_iterator_next(&staged, &entry)) == 1) {
		const uint8_t *id = entry.id;
		buf_reset(&value);
		rc = btree_get(keys, id, entry.id_size, &value);
		if (rc < 0 && rc != -ENOENT)
			goto out;
		bool existed = rc == 0;
		if (existed) {
			struct key_value old;
			if ((rc = table_key_value_decode(value.data, value.size, &old)) < 0 ||
			    (rc = touched_add(&touched, old.sequence, old.row_index, old.row_size)) < 0)
				goto out;
		}
		if (entry.is_delete) {
			rc = existed ? btree_delete(keys, id, entry.id_size) : 0;
		} else {
			uint8_t location[KEY_VALUE_SIZE];
			table_stage_record_location(stage, state->first_sequence, &entry, location);
			rc = btree_put(keys, id, entry.id_size, location, sizeof location);
		}
		if (rc < 0)
			goto out;
	}
	if (rc == 0 && (rc = touched_resolve(pager, append, base, &touched)) == 0 &&
	    (rc = touched_remove_edges(pager, append, base, &touched, edges)) == 0 &&
	    (rc = apply_merge_fragments(pager, append, base, stage, state, &touched, info)) == 0)
		rc = btree_flush(keys, append, &info->keys);
out:
	table_stage_iterator_close(&staged);
	buf_free(&value);
	touched_free(&touched);
	btree_free(keys);
	return rc;
}

/*
 * A merge of about as many rows as the table has (a large stage, in runs):
 * one pass over the base's key tree and the stage's sorted ids together,
 * bulk-building the new key tree — O(n + k) in sequential reads, and memory
 * for one node per level instead of every touched node. 0 or -errno.
 */
static int apply_merge_streaming(struct pager *pager, struct pager_append *append, const struct table_info *base,
				 const struct table_stage *stage, const struct apply_state *state,
				 struct table_edges_update *edges, struct table_info *info)
{
	struct btree *keys = NULL;
	struct btree_iterator *iterator = NULL;
	struct btree_builder *builder = NULL;
	struct stage_iterator staged = { .cursor = NULL };
	struct touched touched = { 0 };
	int rc;
	if ((rc = btree_open_layout(pager, base->keys, BTREE_PACKED, &keys)) < 0)
		goto out;
	btree_attach_append(keys, append);
	if ((rc = btree_iterator_open(keys, NULL, 0, &iterator)) < 0 ||
	    (rc = table_stage_iterator_open(stage, &staged)) < 0 ||
	    (rc = btree_builder_open_layout(append, BTREE_PACKED, &builder)) < 0)
		goto out;
	const uint8_t *key = NULL, *value = NULL;
	size_t key_size = 0, value_size = 0;
	struct stage_record entry;
	int base_more = btree_iterator_next(iterator, &key, &key_size, &value, &value_size);
	int stage_more = table_stage_iterator_next(&staged, &entry);
	while (base_more == 1 || stage_more == 1) {
		int order = base_more != 1 ? 1 : stage_more != 1 ? -1 : table_id_compare(key, key_size, entry.id, entry.id_size);
		if (order <= 0 && value_size != KEY_VALUE_SIZE) {
			rc = -EIO;
			goto out;
		}
		if (order < 0) {
			rc = btree_builder_add(builder, key, key_size, value, value_size);
		} else {
			if (order == 0) {
				struct key_value old;
				if ((rc = table_key_value_decode(value, value_size, &old)) < 0 ||
				    (rc = touched_add(&touched, old.sequence, old.row_index, old.row_size)) < 0)
					goto out;
			}
			rc = 0;
			if (!entry.is_delete) {
				uint8_t location[KEY_VALUE_SIZE];
				table_stage_record_location(stage, state->first_sequence, &entry, location);
				rc = btree_builder_add(builder, entry.id, entry.id_size, location, sizeof location);
			}
		}
		if (rc < 0)
			goto out;
		if (order <= 0)
			base_more = btree_iterator_next(iterator, &key, &key_size, &value, &value_size);
		if (order >= 0)
			stage_more = table_stage_iterator_next(&staged, &entry);
		if (base_more < 0 || stage_more < 0) {
			rc = base_more < 0 ? base_more : stage_more;
			goto out;
		}
	}
	rc = btree_builder_finish(builder, &info->keys);
	builder = NULL;
	if (rc == 0)
		rc = touched_resolve(pager, append, base, &touched);
	if (rc == 0)
		rc = touched_remove_edges(pager, append, base, &touched, edges);
	if (rc == 0)
		rc = apply_merge_fragments(pager, append, base, stage, state, &touched, info);
out:
	btree_builder_free(builder);
	table_stage_iterator_close(&staged);
	touched_free(&touched);
	btree_iterator_free(iterator);
	btree_free(keys);
	return rc;
}

int table_apply(struct pager *pager, struct pager_append *append, const struct table_info *base,
		struct table_stage *stage, struct block_address schema_block, struct table_info *out,
		struct block_address *address_out)
{
	if (stage->state == STAGE_OPEN)
		return -EINVAL;
	struct table_info info;
	memset(&info, 0, sizeof info);
	if (base) {
		info.stable_id = base->stable_id;
		info.incarnation = base->incarnation;
	} else {
		info.stable_id = out->stable_id;
		info.incarnation = out->incarnation;
	}
	info.table_version = base ? base->table_version + 1 : 1;
	info.schema = schema_block;
	/* An overwrite starts the fragment sequence over: none of the base's fragments stays. */
	struct apply_state state = {
		.descriptors = NULL,
		.first_sequence = base && stage->mode != TABLE_OVERWRITE ? base->next_fragment : 0,
	};
	info.next_fragment = state.first_sequence + (stage->fragment_count
		? stage->fragments[stage->fragment_count - 1].slot + stage->fragments[stage->fragment_count - 1].rows : 0);
	struct table_edges_update *edges = NULL;
	int rc = apply_fragments(append, stage, &state);
	if (rc < 0)
		goto out;
	bool bulk = !base || stage->mode == TABLE_OVERWRITE || block_address_is_null(base->keys);
	/* A stage in runs holds at least TABLE_RUN_ENTRIES ids: stream when k log n would exceed n + k. */
	bool streaming = !bulk && stage->runs && table_runs_records(stage->runs) * 16 >= base->row_count;
	/* An edge table's versions all carry the adjacency indexes (docs/FORMAT.md §12.1). */
	bool base_indexed = base && !block_address_is_null(base->out_edges);
	if (base_indexed && !stage->edges) {
		rc = -EINVAL;
		goto out;
	}
	if (stage->edges && !bulk && !base_indexed) {
		rc = -EIO; /* an edge table with rows but no adjacency */
		goto out;
	}
	if (stage->edges && !bulk && (rc = table_edges_update_open(stage->edges, pager, append, base, &edges)) < 0)
		goto out;
	rc = bulk ? apply_bulk(append, stage, &state, &info)
	    : streaming ? apply_merge_streaming(pager, append, base, stage, &state, edges, &info)
			: apply_merge(pager, append, base, stage, &state, edges, &info);
	if (rc < 0)
		goto out;
	if (stage->edges) {
		rc = bulk ? table_edges_stage_apply_bulk(stage->edges, append, &info.out_edges, &info.in_edges)
			  : table_edges_update_finish(edges, append, &info.out_edges, &info.in_edges);
		if (rc < 0)
			goto out;
		if (block_address_is_null(info.out_edges) != (info.row_count == 0)) {
			rc = -EIO; /* the indexes do not hold one entry per row (table_edges.c invariant 1) */
			goto out;
		}
	}
	assert(block_address_is_null(info.keys) == (info.row_count == 0));
	if ((rc = table_info_append(append, &info, address_out)) < 0)
		goto out;
	*out = info;
out:
	table_edges_update_free(edges);
	free(state.descriptors);
	return rc;
}

/* ---- what a write removes ------------------------------------------------------------------ */

int table_removed_ids(struct pager *pager, struct pager_append *append, const struct table_info *base,
		      const struct table_info *after, const struct table_stage *stage,
		      int (*visit)(void *context, const uint8_t *id, size_t id_size), void *context)
{
	if (stage->state == STAGE_OPEN)
		return -EINVAL;
	if (!base || block_address_is_null(base->keys))
		return 0;
	struct btree *old_keys = NULL, *new_keys = NULL;
	struct btree_iterator *old_ids = NULL, *new_ids = NULL;
	struct stage_iterator staged = { .cursor = NULL };
	struct buf value;
	buf_init(&value);
	int rc;
	if ((rc = btree_open_layout(pager, base->keys, BTREE_PACKED, &old_keys)) < 0)
		goto out;
	btree_attach_append(old_keys, append);
	if (stage->mode == TABLE_MERGE) {
		if ((rc = table_stage_iterator_open(stage, &staged)) < 0)
			goto out;
		struct stage_record record;
		while ((rc = table_stage_iterator_next(&staged, &record)) == 1) {
			if (!record.is_delete)
				continue;
			buf_reset(&value);
			rc = btree_get(old_keys, record.id, record.id_size, &value);
			if (rc == -ENOENT)
				continue;
			if (rc < 0 || (rc = visit(context, record.id, record.id_size)) < 0)
				goto out;
		}
		goto out;
	}
	/* An overwrite: the ids of base that after lacks, walking both key trees in id order. */
	if ((rc = btree_iterator_open(old_keys, NULL, 0, &old_ids)) < 0)
		goto out;
	if (!block_address_is_null(after->keys)) {
		if ((rc = btree_open_layout(pager, after->keys, BTREE_PACKED, &new_keys)) < 0)
			goto out;
		btree_attach_append(new_keys, append);
		if ((rc = btree_iterator_open(new_keys, NULL, 0, &new_ids)) < 0)
			goto out;
	}
	const uint8_t *old_id = NULL, *new_id = NULL, *unused;
	size_t old_size = 0, new_size = 0, unused_size;
	int new_more = new_ids ? btree_iterator_next(new_ids, &new_id, &new_size, &unused, &unused_size) : 0;
	int old_more;
	while ((old_more = btree_iterator_next(old_ids, &old_id, &old_size, &unused, &unused_size)) == 1) {
		int order = 1;
		while (new_more == 1 && (order = table_id_compare(new_id, new_size, old_id, old_size)) < 0)
			new_more = btree_iterator_next(new_ids, &new_id, &new_size, &unused, &unused_size);
		if (new_more < 0) {
			rc = new_more;
			goto out;
		}
		if ((new_more == 0 || order != 0) && (rc = visit(context, old_id, old_size)) < 0)
			goto out;
	}
	rc = old_more;
out:
	table_stage_iterator_close(&staged);
	btree_iterator_free(old_ids);
	btree_iterator_free(new_ids);
	btree_free(old_keys);
	btree_free(new_keys);
	buf_free(&value);
	return rc < 0 ? rc : 0;
}
