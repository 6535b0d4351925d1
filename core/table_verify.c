/*
 * table_verify — the offline check of one table version (layer: table): its
 * record, fragment tree, fragments, bitmaps and key tree against each other
 * (docs/FORMAT.md §10–§13). Reports each finding; reads nothing twice.
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

/* ---- verify ------------------------------------------------------------------------------ */

/* Called by walk_live_rows for each live row: 0 to go on, or -EIO with message. */
typedef int (*live_row_visit)(const uint8_t *id, size_t id_size, const struct key_value *location,
			      const uint8_t *line, void *context, char *message, size_t message_size);

/* Asks at once for the next PREFETCH_FRAGMENTS fragments (and their bitmaps) that ahead — a
 * second iterator of the fragment tree, as far along as what was asked for — walks to, so that
 * a store in an object store fetches them in parallel (pager_prefetch). Returns how many it
 * walked (0 at the end). */
#define PREFETCH_FRAGMENTS 16
static size_t prefetch_ahead(struct pager *pager, struct btree_iterator *ahead)
{
	struct block_address addresses[2 * PREFETCH_FRAGMENTS];
	size_t count = 0, walked = 0;
	while (walked < PREFETCH_FRAGMENTS) {
		const uint8_t *key, *encoded;
		size_t key_size, encoded_size;
		struct fragment_descriptor descriptor;
		if (btree_iterator_next(ahead, &key, &key_size, &encoded, &encoded_size) <= 0 ||
		    table_descriptor_decode(encoded, encoded_size, &descriptor) < 0)
			break;   /* the walk itself finds and reports what is wrong */
		walked++;
		addresses[count++] = descriptor.block;
		if (!block_address_is_null(descriptor.bitmap))
			addresses[count++] = descriptor.bitmap;
	}
	if (walked > 1)
		pager_prefetch(pager, addresses, count);
	return walked;
}

/*
 * Walks every live row of a table version in row order, each fragment
 * decoded once, checking the fragment tree's entries, that every fragment
 * reads back and every live line starts with its id; adds up the live rows
 * and bytes. Returns 0, or -EIO with message (the first finding, or visit's).
 */
static int walk_live_rows(struct pager *pager, const struct table_info *info, live_row_visit visit, void *context,
			  uint64_t *live_rows, uint64_t *live_bytes, char *message, size_t message_size)
{
	struct btree *fragments = NULL;
	struct btree_iterator *iterator = NULL, *ahead = NULL;
	size_t walked = 0, asked = 0;   /* fragments loaded, and asked for through ahead */
	struct fragment_view view;
	table_fragment_view_init(&view);
	struct buf scratch;
	buf_init(&scratch);
	*live_rows = *live_bytes = 0;
	int rc;
#define FAIL(...)                                                       \
	do {                                                            \
		if (message_size)                                       \
			snprintf(message, message_size, __VA_ARGS__);   \
		rc = -EIO;                                              \
		goto out;                                               \
	} while (0)
	if ((rc = btree_open(pager, info->fragments, &fragments)) < 0 ||
	    (rc = btree_iterator_open(fragments, NULL, 0, &iterator)) < 0 ||
	    (pager_prefetches(pager) && (rc = btree_iterator_open(fragments, NULL, 0, &ahead)) < 0))
		FAIL("the fragment tree cannot be opened (%d)", rc);
	for (;;) {
		const uint8_t *key, *encoded;
		size_t key_size, encoded_size;
		rc = btree_iterator_next(iterator, &key, &key_size, &encoded, &encoded_size);
		if (rc < 0)
			FAIL("fragment tree walk failed (%d)", rc);
		if (rc == 0)
			break;
		struct fragment_descriptor descriptor;
		if (key_size != SEQUENCE_KEY_SIZE || table_descriptor_decode(encoded, encoded_size, &descriptor) < 0)
			FAIL("malformed fragment descriptor");
		uint64_t sequence = table_sequence_from_key(key);
		if (sequence >= info->next_fragment)
			FAIL("fragment %llu is beyond the next fragment number %llu",
			     (unsigned long long)sequence, (unsigned long long)info->next_fragment);
		if (ahead && walked++ == asked)   /* (none where prefetching does nothing) */
			asked += prefetch_ahead(pager, ahead);
		if ((rc = table_fragment_view_load(pager, &descriptor, &view)) < 0)
			FAIL("fragment %llu at %llu:%llu is corrupt or unreadable (%d)",
			     (unsigned long long)sequence, (unsigned long long)descriptor.block.segment,
			     (unsigned long long)descriptor.block.offset, rc);
		*live_rows += view.live_rows;
		*live_bytes += view.live_bytes;
		for (uint32_t row = 0; row < view.rows; row++) {
			if (!table_fragment_view_is_live(&view, row))
				continue;
			size_t id_size;
			const uint8_t *id;
			size_t start = table_line_start(&view, row), size = table_line_end(&view, row) - start;
			if (table_line_id(view.lines + start, size, &scratch, &id, &id_size) < 0)
				FAIL("row %u of fragment %llu is not a canonical line with an id", row,
				     (unsigned long long)sequence);
			struct key_value location = { sequence, row, (uint32_t)size };
			if ((rc = visit(id, id_size, &location, view.lines + start, context, message, message_size)) < 0)
				goto out;
		}
	}
	rc = 0;
#undef FAIL
out:
	btree_iterator_free(ahead);
	btree_iterator_free(iterator);
	btree_free(fragments);
	table_fragment_view_clear(&view);
	buf_free(&scratch);
	return rc;
}

/* What verify adds up for one (id, location) pair: a 64-bit hash of both, the location as
 * the row's slot (sequence + row index: a key entry into a fragment compaction made names
 * the row's first fragment, docs/FORMAT.md §12) and size. */
static uint64_t pair_hash(const uint8_t *id, size_t id_size, const struct key_value *location,
			  struct buf *scratch)
{
	uint8_t value[KEY_VALUE_SIZE];
	struct key_value slot = { location->sequence + location->row_index, 0, location->row_size };
	table_key_value_encode(&slot, value);
	buf_reset(scratch);
	if (buf_append(scratch, id, id_size) < 0 || buf_append(scratch, value, sizeof value) < 0)
		return 0;
	return codec_hash(scratch->data, scratch->size);
}

struct pair_sum {
	struct buf scratch;
	uint64_t sum;
	/* edge tables: what the out and in trees must hold, as sums of hashes of their entries */
	bool edges;
	uint64_t out_sum, in_sum;
	struct buf id, from, to;
};

/* The hash of one adjacency entry: key node ++ 0x00 ++ edge, value other. */
static uint64_t adjacency_hash(const struct buf *node, const struct buf *edge, const struct buf *other,
			       struct buf *scratch)
{
	buf_reset(scratch);
	if (buf_append(scratch, node->data, node->size) < 0 || buf_append(scratch, "", 1) < 0 ||
	    buf_append(scratch, edge->data, edge->size) < 0 || buf_append(scratch, "\n", 1) < 0 ||
	    buf_append(scratch, other->data, other->size) < 0)
		return 0;
	return codec_hash(scratch->data, scratch->size);
}

static int add_pair(const uint8_t *id, size_t id_size, const struct key_value *location, const uint8_t *line,
		    void *context, char *message, size_t message_size)
{
	struct pair_sum *pairs = context;
	pairs->sum += pair_hash(id, id_size, location, &pairs->scratch);
	if (!pairs->edges)
		return 0;
	if (table_edge_line_parse(line, location->row_size, &pairs->id, &pairs->from, &pairs->to) < 0) {
		snprintf(message, message_size, "row %u of fragment %llu is not a canonical edge row",
			 location->row_index, (unsigned long long)location->sequence);
		return -EIO;
	}
	pairs->out_sum += adjacency_hash(&pairs->from, &pairs->id, &pairs->to, &pairs->scratch);
	pairs->in_sum += adjacency_hash(&pairs->to, &pairs->id, &pairs->from, &pairs->scratch);
	return 0;
}

/*
 * The adjacency half of verify (docs/FORMAT.md §12.1): a valid packed tree
 * whose entries, hashed and summed, match what the rows say, one per row.
 */
static int verify_adjacency(struct pager *pager, struct block_address root, uint64_t expected_sum,
			    uint64_t expected_count, const char *which, char *message, size_t message_size)
{
	if (btree_verify(pager, root, NULL, NULL, message, message_size) < 0)
		return -EIO;
	struct btree *tree = NULL;
	struct btree_iterator *iterator = NULL;
	struct buf node, edge, other, scratch;
	buf_init(&node);
	buf_init(&edge);
	buf_init(&other);
	buf_init(&scratch);
	uint64_t sum = 0, count = 0;
	int rc;
	if ((rc = btree_open(pager, root, &tree)) < 0 || (rc = btree_iterator_open(tree, NULL, 0, &iterator)) < 0)
		goto out;
	for (;;) {
		const uint8_t *key, *value;
		size_t key_size, value_size;
		if ((rc = btree_iterator_next(iterator, &key, &key_size, &value, &value_size)) <= 0)
			break;
		const uint8_t *separator = memchr(key, 0, key_size);
		if (!separator) {
			snprintf(message, message_size, "the %s index has a key without a separator", which);
			rc = -EIO;
			goto out;
		}
		size_t node_size = (size_t)(separator - key);
		buf_reset(&node);
		buf_reset(&edge);
		buf_reset(&other);
		if ((rc = buf_append(&node, key, node_size)) < 0 ||
		    (rc = buf_append(&edge, separator + 1, key_size - node_size - 1)) < 0 ||
		    (rc = buf_append(&other, value, value_size)) < 0)
			goto out;
		sum += adjacency_hash(&node, &edge, &other, &scratch);
		count++;
	}
	if (rc == 0 && (sum != expected_sum || count != expected_count)) {
		snprintf(message, message_size, "the %s index has %llu entries for %llu live rows%s", which,
			 (unsigned long long)count, (unsigned long long)expected_count,
			 count == expected_count ? ", and they do not name the rows' endpoints" : "");
		rc = -EIO;
	}
out:
	if (rc < 0 && rc != -EIO)
		snprintf(message, message_size, "the %s index cannot be read (%d)", which, rc);
	btree_iterator_free(iterator);
	btree_free(tree);
	buf_free(&node);
	buf_free(&edge);
	buf_free(&other);
	buf_free(&scratch);
	return rc < 0 ? -EIO : 0;
}

struct row_lookup {
	struct btree *keys;
	struct buf value;
};

/* The slow, precise half of invariant 2: the row's key entry must name it. */
static int look_row_up(const uint8_t *id, size_t id_size, const struct key_value *location, const uint8_t *line,
		       void *context, char *message, size_t message_size)
{
	(void)line;
	struct row_lookup *lookup = context;
	struct key_value found;
	buf_reset(&lookup->value);
	int rc = btree_get(lookup->keys, id, id_size, &lookup->value);
	if (rc < 0 || table_key_value_decode(lookup->value.data, lookup->value.size, &found) < 0) {
		snprintf(message, message_size, "live row %u of fragment %llu has no key tree entry (%d)",
			 location->row_index, (unsigned long long)location->sequence, rc);
		return -EIO;
	}
	if (found.sequence + found.row_index != location->sequence + location->row_index ||
	    found.row_size != location->row_size) {
		snprintf(message, message_size, "the key tree entry of live row %u of fragment %llu points elsewhere",
			 location->row_index, (unsigned long long)location->sequence);
		return -EIO;
	}
	return 0;
}

/*
 * Invariant 2 is checked in two sequential walks, each block decoded once:
 * the live rows' (id, location) pairs from the fragments and the key tree's
 * (key, value) pairs must be the same set. Keys are distinct (btree_verify
 * checks their order), so equal counts and equal 64-bit sums of a hash of
 * every pair mean equal sets (a difference goes unnoticed with probability
 * about 2^-64). On a difference, a walk that looks every row up names it.
 */
int table_verify(struct pager *pager, const struct table_info *info, char *message,
		 size_t message_size)
{
	struct btree *keys = NULL;
	struct btree_iterator *iterator = NULL;
	struct pair_sum rows = { .sum = 0 }, entries = { .sum = 0 };
	buf_init(&rows.scratch);
	buf_init(&rows.id);
	buf_init(&rows.from);
	buf_init(&rows.to);
	buf_init(&entries.scratch);
	struct row_lookup lookup = { .keys = NULL };
	buf_init(&lookup.value);
	struct schema schema;
	schema_init(&schema);
	uint64_t live_rows = 0, live_bytes = 0, key_entries = 0;
	int rc;
	if (message_size)
		message[0] = 0;
#define FAIL(...)                                                       \
	do {                                                            \
		if (message_size)                                       \
			snprintf(message, message_size, __VA_ARGS__);   \
		rc = -EIO;                                              \
		goto out;                                               \
	} while (0)

	if (!block_address_is_null(info->schema) && (rc = table_schema_read(pager, info->schema, &schema)) < 0)
		FAIL("table schema block at %llu:%llu is unreadable (%d)",
		     (unsigned long long)info->schema.segment, (unsigned long long)info->schema.offset, rc);
	if (btree_verify(pager, info->fragments, NULL, NULL, message, message_size) < 0 ||
	    btree_verify(pager, info->keys, NULL, NULL, message, message_size) < 0) {
		rc = -EIO;
		goto out;
	}
	rows.edges = schema.kind == SCHEMA_EDGE;
	bool indexed = !block_address_is_null(info->out_edges);
	if (!rows.edges && indexed)
		FAIL("a node table version has adjacency indexes");
	if (rows.edges && indexed != (info->row_count > 0))
		FAIL("an edge table version with %llu rows has %s adjacency indexes",
		     (unsigned long long)info->row_count, indexed ? "" : "no");
	if ((rc = walk_live_rows(pager, info, add_pair, &rows, &live_rows, &live_bytes, message, message_size)) < 0)
		goto out;
	if (live_rows != info->row_count || live_bytes != info->byte_size)
		FAIL("fragments hold %llu rows and %llu bytes; the table version says %llu and %llu",
		     (unsigned long long)live_rows, (unsigned long long)live_bytes,
		     (unsigned long long)info->row_count, (unsigned long long)info->byte_size);
	if (indexed && ((rc = verify_adjacency(pager, info->out_edges, rows.out_sum, live_rows, "out", message,
					       message_size)) < 0 ||
			(rc = verify_adjacency(pager, info->in_edges, rows.in_sum, live_rows, "in", message,
					       message_size)) < 0))
		goto out;
	if ((rc = btree_open(pager, info->keys, &keys)) < 0 ||
	    (rc = btree_iterator_open(keys, NULL, 0, &iterator)) < 0)
		goto out;
	for (;;) {
		const uint8_t *key, *encoded;
		size_t key_size, encoded_size;
		rc = btree_iterator_next(iterator, &key, &key_size, &encoded, &encoded_size);
		if (rc < 0)
			FAIL("key tree walk failed (%d)", rc);
		if (rc == 0)
			break;
		struct key_value location;
		if (table_key_value_decode(encoded, encoded_size, &location) < 0)
			FAIL("malformed key tree entry");
		entries.sum += pair_hash(key, key_size, &location, &entries.scratch);
		key_entries++;
	}
	if (key_entries == live_rows && entries.sum == rows.sum) {
		rc = 0;
		goto out;
	}
	/* Name the row if one points elsewhere; otherwise the key tree has entries of no live row. */
	lookup.keys = keys;
	if ((rc = walk_live_rows(pager, info, look_row_up, &lookup, &live_rows, &live_bytes, message,
				 message_size)) < 0)
		goto out;
	if (key_entries != live_rows)
		FAIL("the key tree has %llu entries for %llu live rows", (unsigned long long)key_entries,
		     (unsigned long long)live_rows);
	FAIL("the key tree indexes rows that are not live");
#undef FAIL
out:
	btree_iterator_free(iterator);
	btree_free(keys);
	buf_free(&rows.scratch);
	buf_free(&rows.id);
	buf_free(&rows.from);
	buf_free(&rows.to);
	buf_free(&entries.scratch);
	buf_free(&lookup.value);
	schema_free(&schema);
	return rc;
}
