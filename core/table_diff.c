/*
 * table_diff — the rows where two table versions differ, in id order
 * (layer: table).
 *
 * The candidates come from btree_diff over the two key trees, which skips
 * every subtree the versions share. A candidate whose key-tree entries name
 * the same row of the same fragment block on both sides (an entry of a
 * rewritten leaf that did not itself change) is equal without being read;
 * every other candidate's lines are read and compared byte for byte, so a
 * row rewritten with the same content is not a difference. Fragment
 * descriptors come through a finder per side (cached nodes); the last
 * fragment read on each side stays decoded, so ids that sit together in a
 * fragment decode it once.
 */
#include <errno.h>
#include <string.h>

#include "table_int.h"

#define DIFF_FINDER_BUDGET (4u << 20)

struct diff_side {
	struct pager *pager;
	const struct table_info *info;
	struct btree_finder *fragments;
	struct btree *merged;              /* opened for a key entry into a compacted fragment */
	struct fragment_view view;
	struct block_address loaded;       /* the fragment block in view (null: none) */
};

struct diff_walk {
	struct diff_side sides[2];
	table_diff_visit visit;
	void *context;
};

/* The descriptor of the fragment a key-tree value names; its row index becomes the row's
 * index in that fragment (table_descriptor_locate). 0 or -errno (-EIO: no such fragment). */
static int side_descriptor(struct diff_side *side, struct key_value *location, struct fragment_descriptor *out)
{
	if (!side->fragments) {
		int rc = btree_finder_open(side->pager, side->info->fragments, DIFF_FINDER_BUDGET, &side->fragments);
		if (rc < 0)
			return rc;
	}
	uint8_t key[SEQUENCE_KEY_SIZE];
	table_sequence_key(location->sequence, key);
	const uint8_t *value;
	size_t value_size;
	int rc = btree_finder_get(side->fragments, key, sizeof key, &value, &value_size);
	if (rc == 0 && (rc = table_descriptor_decode(value, value_size, out)) == 0 && location->row_index < out->rows)
		return 0;
	if (rc < 0 && rc != -ENOENT)
		return rc;
	/* not a fragment of its own: a key entry into a fragment compaction made */
	if (!side->merged &&
	    (rc = btree_open_layout(side->pager, side->info->fragments, BTREE_PACKED, &side->merged)) < 0)
		return rc;
	rc = table_descriptor_locate(side->merged, location->sequence, location->row_index, out, &location->row_index);
	return rc == -ENOENT ? -EIO : rc;   /* -EIO: the key tree names a fragment the table does not have */
}

/* The canonical line of the row at location (valid until the side loads another fragment). */
static int side_line(struct diff_side *side, const struct key_value *location,
		     const struct fragment_descriptor *descriptor, const uint8_t **line, size_t *size)
{
	if (block_address_is_null(side->loaded) || !block_address_equal(side->loaded, descriptor->block)) {
		side->loaded = (struct block_address){ 0, 0 };
		int rc = table_fragment_view_load(side->pager, descriptor, &side->view);
		if (rc < 0)
			return rc;
		side->loaded = descriptor->block;
	}
	if (location->row_index >= side->view.rows)
		return -EIO;
	size_t start = table_line_start(&side->view, location->row_index);
	*line = side->view.lines + start;
	*size = table_line_end(&side->view, location->row_index) - start;
	if (*size && (*line)[*size - 1] == '\n')
		(*size)--;   /* the row, without its line end */
	return 0;
}

static int visit_candidate(const uint8_t *id, size_t id_size, const uint8_t *a_value, size_t a_size,
			   const uint8_t *b_value, size_t b_size, void *context)
{
	struct diff_walk *walk = context;
	const uint8_t *values[2] = { a_value, b_value };
	size_t value_sizes[2] = { a_size, b_size };
	struct key_value locations[2];
	struct fragment_descriptor descriptors[2];
	const uint8_t *lines[2] = { NULL, NULL };
	size_t line_sizes[2] = { 0, 0 };
	int rc;
	for (int i = 0; i < 2; i++) {
		if (!values[i])
			continue;
		if ((rc = table_key_value_decode(values[i], value_sizes[i], &locations[i])) < 0 ||
		    (rc = side_descriptor(&walk->sides[i], &locations[i], &descriptors[i])) < 0)
			return rc;
	}
	if (a_value && b_value && block_address_equal(descriptors[0].block, descriptors[1].block) &&
	    locations[0].row_index == locations[1].row_index)
		return 0;   /* the same row of the same immutable fragment */
	for (int i = 0; i < 2; i++)
		if (values[i] && (rc = side_line(&walk->sides[i], &locations[i], &descriptors[i], &lines[i],
						  &line_sizes[i])) < 0)
			return rc;
	if (lines[0] && lines[1] && line_sizes[0] == line_sizes[1] && memcmp(lines[0], lines[1], line_sizes[0]) == 0)
		return 0;   /* rewritten with the same bytes */
	return walk->visit(id, id_size, lines[0], line_sizes[0], lines[1], line_sizes[1], walk->context);
}

int table_diff(struct pager *pager, const struct table_info *a, const struct table_info *b, table_diff_visit visit,
	       void *context)
{
	struct diff_walk walk = { .visit = visit, .context = context };
	const struct table_info *infos[2] = { a, b };
	for (int i = 0; i < 2; i++) {
		walk.sides[i].pager = pager;
		walk.sides[i].info = infos[i];
		table_fragment_view_init(&walk.sides[i].view);
	}
	int rc = btree_diff(pager, a->keys, b->keys, visit_candidate, &walk);
	for (int i = 0; i < 2; i++) {
		btree_finder_free(walk.sides[i].fragments);
		btree_free(walk.sides[i].merged);
		table_fragment_view_clear(&walk.sides[i].view);
	}
	return rc;
}

/* ---- appended versions ------------------------------------------------------------------ */

struct appended_walk {
	const struct table_info *a;
	uint64_t tail_bytes;           /* live bytes of b's fragments numbered from a's next_fragment */
};

static int appended_visit(const uint8_t *key, size_t key_size, const uint8_t *a_value, size_t a_size,
			  const uint8_t *b_value, size_t b_size, void *context)
{
	struct appended_walk *walk = context;
	if (key_size != SEQUENCE_KEY_SIZE)
		return -EIO;
	uint64_t sequence = table_sequence_from_key(key);
	struct fragment_descriptor before, after;
	if (b_value && table_descriptor_decode(b_value, b_size, &after) < 0)
		return -EIO;
	if (sequence >= walk->a->next_fragment) {
		if (!b_value)
			return -EIO;   /* a holds a fragment it has not numbered yet */
		walk->tail_bytes += after.live_bytes;
		return 0;
	}
	if (!b_value)
		return 0;      /* every row of a's fragment was deleted */
	if (!a_value)
		return 1;      /* b numbered a fragment below a's next one that a does not hold */
	if (table_descriptor_decode(a_value, a_size, &before) < 0)
		return -EIO;
	return block_address_equal(before.block, after.block) ? 0 : 1;
}

int table_appended(struct pager *pager, const struct table_info *a, const struct table_info *b,
		   uint64_t *tail_offset)
{
	*tail_offset = 0;
	if (ulid_compare(&a->incarnation, &b->incarnation) != 0 || b->next_fragment < a->next_fragment)
		return 0;
	struct appended_walk walk = { a, 0 };
	int rc = btree_diff(pager, a->fragments, b->fragments, appended_visit, &walk);
	if (rc < 0)
		return rc;
	if (rc > 0 || walk.tail_bytes > b->byte_size)
		return 0;
	*tail_offset = b->byte_size - walk.tail_bytes;
	return 1;
}
