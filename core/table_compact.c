/*
 * table_compact — fewer, larger fragments for a table version whose rows came
 * in many small commits (docs/ARCHITECTURE.md "Compaction", docs/FORMAT.md §12).
 *
 * A compaction reads a table version and writes another with the same rows,
 * the same key tree, the same adjacency indexes and the same counts, whose
 * fragment tree holds merged fragments in place of runs of small ones. No key
 * entry is rewritten: a fragment is numbered by the slot of its first row (a
 * new fragment's number is the previous number plus its rows), a key entry
 * (n, i) names slot n + i, and a merged fragment numbered m holds the slots
 * m .. m + rows - 1 in order — a slot whose row was deleted (or that no
 * fragment held any more) is an empty line, deleted in its bitmap. Lookups
 * find the fragment whose slots cover n + i (table_descriptor_locate).
 *
 * Dense or not: a merged fragment keeps its empty slots while they are at most
 * as many as its rows; beyond that (rows replaced or deleted over and over) it
 * is written dense — its rows renumbered from its first slot, their key entries
 * rewritten — so a fragment never holds more than twice the slots it has rows.
 * That rewrite costs O(rows moved × log rows) key-tree work, paid for by the
 * more than as many rows that died there. A lone fragment that sparse (at least
 * SPARSE_MIN slots) is rewritten dense on its own.
 *
 * Which fragments merge (the policy; a fragment is "small" while its rows — its
 * slots, if it keeps them — and its live bytes are below three quarters of a
 * fragment's limits):
 *   TIERED  while the table ends with more than TIERED_SMALL_MAX small
 *           fragments, the eight adjacent ones that are smallest joined merge
 *           into one (fewer, when eight would pass the limits). Smallest first
 *           makes it size-tiered: a row is rewritten about once per eightfold
 *           growth of the fragment it is in (at most five times below the
 *           limits), amortized O(1) bytes per row written, and a fragment whose
 *           rows died shrinks and merges early.
 *   FLUSH   every trailing small fragment, packed from the oldest into as few
 *           fragments as the limits allow, when there are at least
 *           FLUSH_FRAGMENTS of them (fewer cost a read or two more, not worth
 *           a publish). The caller runs it when the rows written since its
 *           last flush are worth it too (core/store_compact.c).
 *
 * Invariants kept:
 *   1. The compacted version renders exactly the bytes of the input, row for
 *      row, and every key entry names the same row in it: the input's entry,
 *      or for a row renumbered, its new one.
 *   2. Only adjacent fragments merge, and a merged fragment stays within
 *      TABLE_FRAGMENT_ROWS slots and TABLE_FRAGMENT_BYTES of live lines.
 *   3. The input is never changed (table.h invariant 3): the compaction
 *      appends new blocks and a new record.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "table_int.h"

#define COMPACT_FANOUT 8
#define TIERED_SMALL_MAX 16   /* small fragments a table keeps before the commits merge some */
#define SPARSE_MIN 64   /* slots a lone fragment needs before its emptiness is worth a rewrite */
#define FLUSH_FRAGMENTS 4

struct compact_source {
	uint64_t base;                      /* its number: the slot of its first row */
	struct fragment_descriptor descriptor;
};

/* A run of adjacent sources [first, first + count) that becomes one fragment, and once
 * prepared (outside the store lock) that fragment: its block encoded, its descriptor but for
 * the block's and bitmap's addresses, its empty slots, and the key entries a dense write moves. */
struct compact_group {
	size_t first, count;
	struct buf block;
	struct fragment_descriptor descriptor;
	roaring_bitmap_t *dead;          /* NULL: no empty slot */
	struct buf moved;                /* each: the id (buf_put_str), the new key entry */
};

struct table_compaction {
	struct table_info info;              /* the input */
	struct compact_source *sources;      /* the input's fragments, in order */
	size_t source_count, source_capacity;
	struct compact_group *groups;        /* the fragments after the plan, in order */
	size_t group_count, group_capacity;
	uint64_t rows_rewritten;
};

void table_compaction_free(struct table_compaction *compaction)
{
	if (!compaction)
		return;
	for (size_t g = 0; g < compaction->group_count; g++) {
		buf_free(&compaction->groups[g].block);
		buf_free(&compaction->groups[g].moved);
		if (compaction->groups[g].dead)
			roaring_bitmap_free(compaction->groups[g].dead);
	}
	free(compaction->sources);
	free(compaction->groups);
	free(compaction);
}

uint64_t table_compaction_rows(const struct table_compaction *compaction)
{
	return compaction ? compaction->rows_rewritten : 0;
}

static uint64_t group_slots(const struct table_compaction *c, const struct compact_group *group)
{
	const struct compact_source *first = &c->sources[group->first];
	const struct compact_source *last = &c->sources[group->first + group->count - 1];
	return last->base + last->descriptor.rows - first->base;
}

static uint64_t group_live(const struct table_compaction *c, const struct compact_group *group)
{
	uint64_t live = 0;
	for (size_t i = group->first; i < group->first + group->count; i++)
		live += c->sources[i].descriptor.live_rows;
	return live;
}

/* Whether a group is written dense: more empty slots than rows. */
static bool group_dense(const struct table_compaction *c, const struct compact_group *group)
{
	uint64_t slots = group_slots(c, group), live = group_live(c, group);
	return slots - live > live;
}

/* The slots a group takes once written: its rows when written dense. */
static uint64_t group_size(const struct table_compaction *c, const struct compact_group *group)
{
	return group_dense(c, group) ? group_live(c, group) : group_slots(c, group);
}

/* Whether the plan rewrites a group: a merge, or a lone fragment sparse enough. */
static bool group_written(const struct table_compaction *c, const struct compact_group *group)
{
	return group->count > 1 || (group_dense(c, group) && group_slots(c, group) >= SPARSE_MIN);
}

static uint64_t groups_bytes(const struct table_compaction *c, const struct compact_group *group, size_t count)
{
	uint64_t bytes = 0;
	for (size_t g = 0; g < count; g++)
		for (size_t i = group[g].first; i < group[g].first + group[g].count; i++)
			bytes += c->sources[i].descriptor.live_bytes;
	return bytes;
}

/* Whether groups [g, g + count) fit one fragment: their slots and live lines. */
static bool groups_fit(const struct table_compaction *c, size_t g, size_t count)
{
	struct compact_group joined = { .first = c->groups[g].first, .count = 0 };
	for (size_t i = g; i < g + count; i++)
		joined.count += c->groups[i].count;
	uint64_t slots = group_size(c, &joined);
	return slots <= TABLE_FRAGMENT_ROWS && groups_bytes(c, &c->groups[g], count) <= TABLE_FRAGMENT_BYTES &&
	       4 + 4 * slots + groups_bytes(c, &c->groups[g], count) <= BLOCK_MAX_RAW_SIZE;
}

static bool group_small(const struct table_compaction *c, size_t g)
{
	return group_size(c, &c->groups[g]) < TABLE_FRAGMENT_ROWS * 3 / 4 &&
	       groups_bytes(c, &c->groups[g], 1) < TABLE_FRAGMENT_BYTES / 4 * 3;
}

/* Joins groups [g, g + count) into one. */
static void groups_join(struct table_compaction *c, size_t g, size_t count)
{
	for (size_t i = g + 1; i < g + count; i++)
		c->groups[g].count += c->groups[i].count;
	memmove(&c->groups[g + 1], &c->groups[g + count], (c->group_count - g - count) * sizeof *c->groups);
	c->group_count -= count - 1;
}

/* The first group of the trailing run of small groups. */
static size_t trailing_small(const struct table_compaction *c)
{
	size_t g = c->group_count;
	while (g > 0 && group_small(c, g - 1))
		g--;
	return g;
}

/* The slots groups [g, g + count) would take joined. */
static uint64_t joined_size(const struct table_compaction *c, size_t g, size_t count)
{
	struct compact_group joined = { .first = c->groups[g].first, .count = 0 };
	for (size_t i = g; i < g + count; i++)
		joined.count += c->groups[i].count;
	return group_size(c, &joined);
}

static void plan_tiered(struct table_compaction *c)
{
	for (;;) {
		size_t start = trailing_small(c), end = c->group_count;
		if (end - start <= TIERED_SMALL_MAX)
			return;
		/* the adjacent window of COMPACT_FANOUT (or, near the limits, fewer) groups that is
		 * smallest joined: the newest and the emptiest go first */
		for (size_t count = COMPACT_FANOUT; count >= 2; count--) {
			size_t best = SIZE_MAX;
			uint64_t best_size = UINT64_MAX;
			for (size_t g = start; g + count <= end; g++) {
				uint64_t size = joined_size(c, g, count);
				if (size < best_size && groups_fit(c, g, count)) {
					best = g;
					best_size = size;
				}
			}
			if (best != SIZE_MAX) {
				groups_join(c, best, count);
				break;
			}
			if (count == 2)
				return;   /* no two neighbours fit one fragment */
		}
	}
}

static void plan_flush(struct table_compaction *c)
{
	if (c->group_count - trailing_small(c) < FLUSH_FRAGMENTS)
		return;
	for (size_t g = trailing_small(c); g + 1 < c->group_count; g++) {
		size_t count = 1;
		while (g + count < c->group_count && groups_fit(c, g, count + 1))
			count++;
		if (count > 1)
			groups_join(c, g, count);
	}
}

int table_compaction_plan(struct pager *pager, const struct table_info *info, enum table_compact_mode mode,
			  struct table_compaction **out)
{
	*out = NULL;
	struct table_compaction *c = calloc(1, sizeof *c);
	if (!c)
		return -ENOMEM;
	c->info = *info;
	struct btree *fragments = NULL;
	struct btree_iterator *iterator = NULL;
	int rc = 0;
	if (block_address_is_null(info->fragments))
		goto out;
	if ((rc = btree_open_layout(pager, info->fragments, BTREE_PACKED, &fragments)) < 0 ||
	    (rc = btree_iterator_open(fragments, NULL, 0, &iterator)) < 0)
		goto out;
	const uint8_t *key, *value;
	size_t key_size, value_size;
	while ((rc = btree_iterator_next(iterator, &key, &key_size, &value, &value_size)) == 1) {
		if (key_size != SEQUENCE_KEY_SIZE) {
			rc = -EIO;
			goto out;
		}
		if ((rc = table_grow_array((void **)&c->sources, &c->source_capacity, c->source_count + 1,
					   sizeof *c->sources)) < 0 ||
		    (rc = table_grow_array((void **)&c->groups, &c->group_capacity, c->source_count + 1,
					   sizeof *c->groups)) < 0)
			goto out;
		struct compact_source *source = &c->sources[c->source_count];
		source->base = table_sequence_from_key(key);
		if ((rc = table_descriptor_decode(value, value_size, &source->descriptor)) < 0)
			goto out;
		if (c->source_count > 0 && source->base < source[-1].base + source[-1].descriptor.rows) {
			rc = -EIO;   /* slots overlap: not numbered by slot (docs/FORMAT.md §12) */
			goto out;
		}
		c->groups[c->source_count] = (struct compact_group){ .first = c->source_count, .count = 1 };
		c->source_count++;
		c->group_count++;
	}
	if (rc < 0)
		goto out;
	rc = 0;
	if (mode == TABLE_COMPACT_FLUSH)
		plan_flush(c);
	else
		plan_tiered(c);
	for (size_t g = 0; g < c->group_count; g++)
		if (group_written(c, &c->groups[g]))
			c->rows_rewritten += group_live(c, &c->groups[g]);
out:
	btree_iterator_free(iterator);
	btree_free(fragments);
	if (rc == 0 && c->rows_rewritten > 0)
		*out = c;
	else
		table_compaction_free(c);
	return rc;
}

/*
 * Prepares one group's fragment (outside the store lock): its payload encoded with codec,
 * its empty slots, and for a dense write the key entry of every row whose slot moved.
 * 0, -EIO, -ENOMEM.
 */
static int prepare_group(struct pager *pager, enum codec_kind codec, const struct table_compaction *c,
			 struct compact_group *group)
{
	bool dense = group_dense(c, group);
	uint64_t base = c->sources[group->first].base, slots = group_size(c, group);
	struct buf payload, lines, scratch;
	buf_init(&payload);
	buf_init(&lines);
	buf_init(&scratch);
	struct fragment_view view;
	table_fragment_view_init(&view);
	roaring_bitmap_t *dead = roaring_bitmap_create();
	int rc = dead ? buf_reserve(&payload, 4 + 4 * (size_t)slots) : -ENOMEM;
	if (rc < 0)
		goto out;
	buf_put_u32(&payload, (uint32_t)slots);
	struct fragment_descriptor *out = &group->descriptor;
	*out = (struct fragment_descriptor){ .rows = (uint32_t)slots };
	uint64_t slot = base;   /* the next slot written */
	for (size_t i = group->first; i < group->first + group->count; i++) {
		const struct compact_source *source = &c->sources[i];
		for (; !dense && slot < source->base; slot++) {   /* slots no fragment holds any more */
			buf_put_u32(&payload, 0);
			roaring_bitmap_add(dead, (uint32_t)(slot - base));
		}
		if ((rc = table_fragment_view_load(pager, &source->descriptor, &view)) < 0)
			goto out;
		for (uint32_t row = 0; row < view.rows; row++) {
			size_t start = table_line_start(&view, row), end = table_line_end(&view, row);
			if (!table_fragment_view_is_live(&view, row)) {
				if (!dense) {
					buf_put_u32(&payload, 0);
					roaring_bitmap_add(dead, (uint32_t)(slot++ - base));
				}
				continue;
			}
			if (dense && slot != source->base + row) {   /* moved: its key entry follows */
				const uint8_t *id;
				size_t id_size;
				struct key_value location = { base, (uint32_t)(slot - base), (uint32_t)(end - start) };
				uint8_t value[KEY_VALUE_SIZE];
				table_key_value_encode(&location, value);
				if ((rc = table_line_id(view.lines + start, end - start, &scratch, &id, &id_size)) < 0 ||
				    (rc = buf_put_str(&group->moved, (const char *)id, id_size)) < 0 ||
				    (rc = buf_append(&group->moved, value, sizeof value)) < 0)
					goto out;
			}
			slot++;
			buf_put_u32(&payload, (uint32_t)(end - start));
			if ((rc = buf_append(&lines, view.lines + start, end - start)) < 0)
				goto out;
			out->live_rows++;
			out->live_bytes += end - start;
		}
	}
	if (slot != base + slots || out->live_rows == 0) {
		rc = -EIO;
		goto out;
	}
	if ((rc = buf_append(&payload, lines.data, lines.size)) < 0 ||
	    (rc = codec_encode(BLOCK_FRAGMENT, codec, payload.data, payload.size, &group->block)) < 0)
		goto out;
	if (!roaring_bitmap_is_empty(dead)) {
		roaring_bitmap_run_optimize(dead);
		group->dead = dead;
		dead = NULL;
	}
out:
	if (dead)
		roaring_bitmap_free(dead);
	table_fragment_view_clear(&view);
	buf_free(&payload);
	buf_free(&lines);
	buf_free(&scratch);
	return rc;
}

int table_compaction_prepare(struct table_compaction *c, struct pager *pager, enum codec_kind codec)
{
	int rc = 0;
	for (size_t g = 0; rc == 0 && g < c->group_count; g++)
		if (group_written(c, &c->groups[g]) && c->groups[g].block.size == 0)
			rc = prepare_group(pager, codec, c, &c->groups[g]);
	return rc;
}

/* Rewrites the key entries a dense group moved. 0 or -errno. */
static int apply_moved(struct pager *pager, struct pager_append *append, const struct table_compaction *c,
		       const struct compact_group *group, struct btree **keys)
{
	if (group->moved.size == 0)
		return 0;
	int rc;
	if (!*keys) {
		if ((rc = btree_open_layout(pager, c->info.keys, BTREE_PACKED, keys)) < 0)
			return rc;
		btree_attach_append(*keys, append);
	}
	struct buf_reader reader;
	buf_reader_init(&reader, group->moved.data, group->moved.size);
	while (buf_reader_remaining(&reader) > 0) {
		const uint8_t *id;
		size_t id_size = buf_get_str(&reader, &id);
		uint8_t value[KEY_VALUE_SIZE];
		buf_get_raw(&reader, value, sizeof value);
		if (reader.failed)
			return -EIO;
		if ((rc = btree_put(*keys, id, id_size, value, sizeof value)) < 0)
			return rc;
	}
	return 0;
}

int table_compaction_apply(struct table_compaction *c, struct pager *pager, struct pager_append *append,
			   enum codec_kind codec, struct block_address *address_out)
{
	struct table_info info = c->info;
	struct btree *fragments = NULL, *keys = NULL;
	int rc = btree_open_layout(pager, c->info.fragments, BTREE_PACKED, &fragments);
	if (rc < 0)
		return rc;
	btree_attach_append(fragments, append);
	for (size_t g = 0; g < c->group_count; g++) {
		struct compact_group *group = &c->groups[g];
		if (!group_written(c, group))
			continue;
		if (group->block.size == 0 && (rc = prepare_group(pager, codec, c, group)) < 0)
			goto out;   /* (not prepared before the lock) */
		struct fragment_descriptor merged = group->descriptor;
		if ((rc = pager_append_encoded(append, group->block.data, group->block.size, &merged.block)) < 0 ||
		    (group->dead && (rc = table_bitmap_append(append, group->dead, &merged.bitmap)) < 0) ||
		    (rc = apply_moved(pager, append, c, group, &keys)) < 0)
			goto out;
		uint8_t key[SEQUENCE_KEY_SIZE], value[DESCRIPTOR_SIZE];
		for (size_t i = group->first + 1; i < group->first + group->count; i++) {
			table_sequence_key(c->sources[i].base, key);
			if ((rc = btree_delete(fragments, key, sizeof key)) < 0)
				goto out;
		}
		table_sequence_key(c->sources[group->first].base, key);
		table_descriptor_encode(&merged, value);
		if ((rc = btree_put(fragments, key, sizeof key, value, sizeof value)) < 0)
			goto out;
	}
	if ((rc = btree_flush(fragments, append, &info.fragments)) < 0 ||
	    (keys && (rc = btree_flush(keys, append, &info.keys)) < 0))
		goto out;
	rc = table_info_append(append, &info, address_out);
out:
	btree_free(fragments);
	btree_free(keys);
	return rc;
}
