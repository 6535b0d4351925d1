/*
 * table_edges — the adjacency indexes of edge tables: every edge table
 * version has two packed B+trees over its live rows (docs/FORMAT.md §12.1):
 *   out: from ++ 0x00 ++ edge id  ->  to
 *   in:  to ++ 0x00 ++ edge id    ->  from
 * Ids never contain a NUL byte (docs/MOUNT.md "Rows"), so a node's edges
 * are the contiguous keys that start with its id and 0x00, and the trees
 * order nodes exactly as their node table's key tree does.
 *
 * A stage of an edge table records what it stages (stage_edges):
 *   - an overwrite feeds two sorters, by (from, id) and by (to, id): at
 *     apply, or at seal for a spilled stage, each becomes a tree in one
 *     bulk-built pass;
 *   - a merge feeds one sorter by id, in the order rows and deletes were
 *     added: the last record per id is what the stage leaves. At apply the
 *     base's trees lose the entries of the rows the merge replaces or
 *     deletes (their lines, given by table_apply.c, name their old endpoints) and
 *     gain those of the new rows: O(k log n). A merge into an empty table
 *     builds the trees from its last records instead.
 *
 * Invariants kept:
 *   1. A version's out and in trees hold exactly one entry per live row
 *      (so row_count entries each); both are null exactly when the table
 *      is empty (or is a node table).
 *   2. Recording never changes what was recorded before: apply may run any
 *      number of times on one sealed stage (table_stage.c invariant 6).
 *
 * States of a stage_edges: RECORDING (table_edges_stage_add) -> SEALED
 * (table_edges_stage_seal: sorted, and for a spilled overwrite built into the
 * segment) -> applied any number of times.
 */
#include "table_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "sorter.h"

#define EDGE_SORT_MEMORY (32u << 20)   /* bytes of records per sorter before it spills a run */

enum stage_edges_state { EDGES_RECORDING, EDGES_SEALED };

struct stage_edges {
	struct pager *pager;
	enum table_write_mode mode;
	enum stage_edges_state state;
	struct sorter *by_from;         /* overwrite: out-tree entries */
	struct sorter *by_to;           /* overwrite: in-tree entries */
	struct sorter *changes;         /* merge: id -> [u8 row?][u16 from size][from][to] */
	bool prebuilt;                  /* a spilled overwrite's trees, built into its segment */
	struct block_address prebuilt_out, prebuilt_in;
	struct buf key, value;          /* scratch */
};

int table_edges_stage_open(struct pager *pager, enum table_write_mode mode, struct stage_edges **out)
{
	struct stage_edges *edges = calloc(1, sizeof *edges);
	if (!edges)
		return -ENOMEM;
	edges->pager = pager;
	edges->mode = mode;
	buf_init(&edges->key);
	buf_init(&edges->value);
	int rc;
	if (mode == TABLE_OVERWRITE) {
		rc = sorter_open(pager, EDGE_SORT_MEMORY, &edges->by_from);
		if (rc == 0)
			rc = sorter_open(pager, EDGE_SORT_MEMORY, &edges->by_to);
	} else {
		rc = sorter_open(pager, EDGE_SORT_MEMORY, &edges->changes);
	}
	if (rc < 0) {
		table_edges_stage_free(edges);
		return rc;
	}
	*out = edges;
	return 0;
}

void table_edges_stage_free(struct stage_edges *edges)
{
	if (!edges)
		return;
	sorter_free(edges->by_from);
	sorter_free(edges->by_to);
	sorter_free(edges->changes);
	buf_free(&edges->key);
	buf_free(&edges->value);
	free(edges);
}

/* key = node ++ 0x00 ++ edge id. 0 or -ENOMEM. */
static int adjacency_key(struct buf *key, const void *node, size_t node_size, const void *edge, size_t edge_size)
{
	buf_reset(key);
	int rc = buf_append(key, node, node_size);
	if (rc == 0)
		rc = buf_append(key, "", 1);
	if (rc == 0)
		rc = buf_append(key, edge, edge_size);
	return rc;
}

int table_edges_stage_add(struct stage_edges *edges, const struct schema_row *row)
{
	if (edges->state != EDGES_RECORDING)
		return -EINVAL;
	int rc;
	if (edges->mode == TABLE_OVERWRITE) {
		if ((rc = adjacency_key(&edges->key, row->from.data, row->from.size, row->id.data, row->id.size)) < 0 ||
		    (rc = sorter_add(edges->by_from, edges->key.data, edges->key.size, row->to.data, row->to.size)) < 0 ||
		    (rc = adjacency_key(&edges->key, row->to.data, row->to.size, row->id.data, row->id.size)) < 0)
			return rc;
		return sorter_add(edges->by_to, edges->key.data, edges->key.size, row->from.data, row->from.size);
	}
	buf_reset(&edges->value);
	if ((rc = buf_put_u8(&edges->value, row->is_delete ? 0 : 1)) < 0)
		return rc;
	if (!row->is_delete &&
	    ((rc = buf_put_u16(&edges->value, (uint16_t)row->from.size)) < 0 ||
	     (rc = buf_append(&edges->value, row->from.data, row->from.size)) < 0 ||
	     (rc = buf_append(&edges->value, row->to.data, row->to.size)) < 0))
		return rc;
	return sorter_add(edges->changes, row->id.data, row->id.size, edges->value.data, edges->value.size);
}

/* Builds a packed tree from a sorted sorter into builder's destination. 0 or -errno. */
static int build_tree(struct sorter *sorter, struct btree_builder *builder, struct block_address *root_out)
{
	struct sorter_cursor *cursor = NULL;
	int rc = sorter_cursor_open(sorter, &cursor);
	const uint8_t *key, *value;
	size_t key_size, value_size;
	while (rc == 0 && (rc = sorter_cursor_next(cursor, &key, &key_size, &value, &value_size)) == 1)
		rc = btree_builder_add(builder, key, key_size, value, value_size);
	sorter_cursor_free(cursor);
	if (rc < 0) {
		btree_builder_free(builder);
		return rc;
	}
	return btree_builder_finish(builder, root_out);
}

int table_edges_stage_seal(struct stage_edges *edges, struct pager_segment *segment)
{
	if (edges->state == EDGES_SEALED)
		return 0;
	int rc = 0;
	struct sorter *sorters[3] = { edges->by_from, edges->by_to, edges->changes };
	for (int i = 0; i < 3 && rc == 0; i++)
		if (sorters[i])
			rc = sorter_sort(sorters[i]);
	if (rc == 0 && segment && edges->mode == TABLE_OVERWRITE) {
		struct btree_builder *builder = NULL;
		if ((rc = btree_builder_open_segment(segment, BTREE_PACKED, &builder)) < 0 ||
		    (rc = build_tree(edges->by_from, builder, &edges->prebuilt_out)) < 0 ||
		    (rc = btree_builder_open_segment(segment, BTREE_PACKED, &builder)) < 0 ||
		    (rc = build_tree(edges->by_to, builder, &edges->prebuilt_in)) < 0)
			return rc;
		edges->prebuilt = true;
	}
	if (rc == 0)
		edges->state = EDGES_SEALED;
	return rc;
}

/* Builds the tree of one sorted sorter into the append. */
static int build_into(struct pager_append *append, struct sorter *sorter, struct block_address *root_out)
{
	struct btree_builder *builder = NULL;
	int rc = btree_builder_open_layout(append, BTREE_PACKED, &builder);
	return rc < 0 ? rc : build_tree(sorter, builder, root_out);
}

/*
 * Calls visit for the last record of every id of a merge stage, in id order.
 * from/to are empty for a delete. 0 or the first error.
 */
typedef int (*change_visit)(void *context, const uint8_t *id, size_t id_size, bool is_row, const uint8_t *from,
			    size_t from_size, const uint8_t *to, size_t to_size);

static int each_last_change(struct stage_edges *edges, change_visit visit, void *context)
{
	struct sorter_cursor *cursor = NULL;
	int rc = sorter_cursor_open(edges->changes, &cursor);
	if (rc < 0)
		return rc;
	struct buf held_id, held_value;
	buf_init(&held_id);
	buf_init(&held_value);
	bool holding = false;
	for (;;) {
		const uint8_t *key = NULL, *value = NULL;
		size_t key_size = 0, value_size = 0;
		int more = sorter_cursor_next(cursor, &key, &key_size, &value, &value_size);
		if (more < 0) {
			rc = more;
			break;
		}
		bool same = more == 1 && holding && key_size == held_id.size && memcmp(key, held_id.data, key_size) == 0;
		if (holding && !same) {
			/* held is the last record of its id */
			const uint8_t *at = held_value.data;
			bool is_row = held_value.size > 0 && at[0] == 1;
			size_t from_size = 0;
			if (is_row) {
				if (held_value.size < 3) {
					rc = -EIO;
					break;
				}
				from_size = (size_t)(at[1] | at[2] << 8);
				if (3 + from_size > held_value.size) {
					rc = -EIO;
					break;
				}
			}
			const uint8_t *from = at + 3, *to = at + 3 + from_size;
			size_t to_size = is_row ? held_value.size - 3 - from_size : 0;
			if ((rc = visit(context, held_id.data, held_id.size, is_row, from, from_size, to, to_size)) < 0)
				break;
		}
		if (more == 0)
			break;
		buf_reset(&held_id);
		buf_reset(&held_value);
		if ((rc = buf_append(&held_id, key, key_size)) < 0 || (rc = buf_append(&held_value, value, value_size)) < 0)
			break;
		holding = true;
	}
	sorter_cursor_free(cursor);
	buf_free(&held_id);
	buf_free(&held_value);
	return rc;
}

/* A merge into an empty table: its last rows, sorted both ways, then built. */
struct bulk_merge {
	struct stage_edges *edges;
	struct sorter *by_from, *by_to;
};

static int bulk_merge_visit(void *context, const uint8_t *id, size_t id_size, bool is_row, const uint8_t *from,
			    size_t from_size, const uint8_t *to, size_t to_size)
{
	struct bulk_merge *bulk = context;
	if (!is_row)
		return 0;
	struct buf *key = &bulk->edges->key;
	int rc;
	if ((rc = adjacency_key(key, from, from_size, id, id_size)) < 0 ||
	    (rc = sorter_add(bulk->by_from, key->data, key->size, to, to_size)) < 0 ||
	    (rc = adjacency_key(key, to, to_size, id, id_size)) < 0)
		return rc;
	return sorter_add(bulk->by_to, key->data, key->size, from, from_size);
}

int table_edges_stage_apply_bulk(struct stage_edges *edges, struct pager_append *append, struct block_address *out_root,
			   struct block_address *in_root)
{
	if (edges->state != EDGES_SEALED)
		return -EINVAL;
	if (edges->mode == TABLE_OVERWRITE) {
		if (edges->prebuilt) {
			*out_root = edges->prebuilt_out;
			*in_root = edges->prebuilt_in;
			return 0;
		}
		int rc = build_into(append, edges->by_from, out_root);
		return rc < 0 ? rc : build_into(append, edges->by_to, in_root);
	}
	struct bulk_merge bulk = { .edges = edges };
	int rc;
	if ((rc = sorter_open(edges->pager, EDGE_SORT_MEMORY, &bulk.by_from)) < 0 ||
	    (rc = sorter_open(edges->pager, EDGE_SORT_MEMORY, &bulk.by_to)) < 0 ||
	    (rc = each_last_change(edges, bulk_merge_visit, &bulk)) < 0 ||
	    (rc = sorter_sort(bulk.by_from)) < 0 || (rc = sorter_sort(bulk.by_to)) < 0 ||
	    (rc = build_into(append, bulk.by_from, out_root)) < 0)
		goto out;
	rc = build_into(append, bulk.by_to, in_root);
out:
	sorter_free(bulk.by_from);
	sorter_free(bulk.by_to);
	return rc;
}

/* ---- merges into a table with rows ------------------------------------------ */

struct table_edges_update {
	struct stage_edges *edges;
	struct btree *out, *in;
	struct buf id, from, to;        /* table_edges_remove_line's parse */
};

int table_edges_update_open(struct stage_edges *edges, struct pager *pager, struct pager_append *append,
			    const struct table_info *base, struct table_edges_update **out)
{
	if (edges->state != EDGES_SEALED || edges->mode != TABLE_MERGE)
		return -EINVAL;
	struct table_edges_update *update = calloc(1, sizeof *update);
	if (!update)
		return -ENOMEM;
	update->edges = edges;
	buf_init(&update->id);
	buf_init(&update->from);
	buf_init(&update->to);
	int rc;
	if ((rc = btree_open_layout(pager, base->out_edges, BTREE_PACKED, &update->out)) < 0 ||
	    (rc = btree_open_layout(pager, base->in_edges, BTREE_PACKED, &update->in)) < 0) {
		table_edges_update_free(update);
		return rc;
	}
	/* The base may have been flushed into this same, still unwritten, publish. */
	btree_attach_append(update->out, append);
	btree_attach_append(update->in, append);
	*out = update;
	return 0;
}

void table_edges_update_free(struct table_edges_update *update)
{
	if (!update)
		return;
	btree_free(update->out);
	btree_free(update->in);
	buf_free(&update->id);
	buf_free(&update->from);
	buf_free(&update->to);
	free(update);
}

int table_line_string(const uint8_t *line, size_t size, size_t *at, struct buf *scratch, const uint8_t **out,
		      size_t *out_size)
{
	size_t start = *at;
	if (start >= size || line[start] != '"')
		return -EIO;
	bool escaped = false;
	size_t end = start + 1;
	while (end < size && line[end] != '"') {
		if (line[end] == '\\') {
			escaped = true;
			end++;
		}
		end++;
	}
	if (end >= size)
		return -EIO;
	*at = end + 1;
	if (!escaped) {
		*out = line + start + 1;
		*out_size = end - start - 1;
		return 0;
	}
	json_error_t error;
	json_t *text = json_loadb((const char *)line + start, end - start + 1, JSON_DECODE_ANY | JSON_ALLOW_NUL, &error);
	if (!text || !json_is_string(text)) {
		json_decref(text);
		return -EIO;
	}
	buf_reset(scratch);
	int rc = buf_append(scratch, json_string_value(text), json_string_length(text));
	json_decref(text);
	*out = scratch->data;
	*out_size = scratch->size;
	return rc;
}

/* A JSON string at line[*at] into out, unescaped. 0, -EIO or -ENOMEM. */
static int read_string(const uint8_t *line, size_t size, size_t *at, struct buf *out)
{
	const uint8_t *text;
	size_t text_size;
	int rc = table_line_string(line, size, at, out, &text, &text_size);
	if (rc < 0 || text == out->data)
		return rc;
	buf_reset(out);
	return buf_append(out, text, text_size);
}

/* Expects the literal text at line[*at]; moves past it. 0 or -EIO. */
static int expect(const uint8_t *line, size_t size, size_t *at, const char *text)
{
	size_t length = strlen(text);
	if (*at + length > size || memcmp(line + *at, text, length) != 0)
		return -EIO;
	*at += length;
	return 0;
}

int table_edge_line_parse(const uint8_t *line, size_t size, struct buf *id, struct buf *from, struct buf *to)
{
	size_t at = 0;
	int rc;
	if ((rc = expect(line, size, &at, "{\"id\":")) < 0 || (rc = read_string(line, size, &at, id)) < 0 ||
	    (rc = expect(line, size, &at, ",\"from\":")) < 0 || (rc = read_string(line, size, &at, from)) < 0 ||
	    (rc = expect(line, size, &at, ",\"to\":")) < 0)
		return rc;
	return read_string(line, size, &at, to);
}

int table_edges_remove_line(struct table_edges_update *update, const uint8_t *line, size_t size)
{
	int rc = table_edge_line_parse(line, size, &update->id, &update->from, &update->to);
	struct buf *key = &update->edges->key;
	if (rc < 0 ||
	    (rc = adjacency_key(key, update->from.data, update->from.size, update->id.data, update->id.size)) < 0)
		return rc;
	/* A live row has its entries (invariant 1): a missing one is damage. */
	if ((rc = btree_delete(update->out, key->data, key->size)) < 0 ||
	    (rc = adjacency_key(key, update->to.data, update->to.size, update->id.data, update->id.size)) < 0 ||
	    (rc = btree_delete(update->in, key->data, key->size)) < 0)
		return rc == -ENOENT ? -EIO : rc;
	return 0;
}

static int update_visit(void *context, const uint8_t *id, size_t id_size, bool is_row, const uint8_t *from,
			size_t from_size, const uint8_t *to, size_t to_size)
{
	struct table_edges_update *update = context;
	if (!is_row)
		return 0;
	struct buf *key = &update->edges->key;
	int rc;
	if ((rc = adjacency_key(key, from, from_size, id, id_size)) < 0 ||
	    (rc = btree_put(update->out, key->data, key->size, to, to_size)) < 0 ||
	    (rc = adjacency_key(key, to, to_size, id, id_size)) < 0)
		return rc;
	return btree_put(update->in, key->data, key->size, from, from_size);
}

int table_edges_update_finish(struct table_edges_update *update, struct pager_append *append,
			      struct block_address *out_root, struct block_address *in_root)
{
	int rc = each_last_change(update->edges, update_visit, update);
	if (rc == 0)
		rc = btree_flush(update->out, append, out_root);
	if (rc == 0)
		rc = btree_flush(update->in, append, in_root);
	return rc;
}

/* ---- lookups ---------------------------------------------------------------- */

struct table_adjacency {
	struct btree_finder *finder;
	struct buf key;
};

int table_adjacency_open(struct pager *pager, const struct table_info *info, enum table_edge_end end, size_t budget,
			 struct table_adjacency **out)
{
	struct table_adjacency *adjacency = calloc(1, sizeof *adjacency);
	if (!adjacency)
		return -ENOMEM;
	buf_init(&adjacency->key);
	int rc = btree_finder_open(pager, end == TABLE_EDGE_FROM ? info->out_edges : info->in_edges, budget,
				   &adjacency->finder);
	if (rc < 0) {
		free(adjacency);
		return rc;
	}
	*out = adjacency;
	return 0;
}

void table_adjacency_free(struct table_adjacency *adjacency)
{
	if (!adjacency)
		return;
	btree_finder_free(adjacency->finder);
	buf_free(&adjacency->key);
	free(adjacency);
}

int table_adjacency_next(struct table_adjacency *adjacency, const void *node, size_t node_size, const void *after,
			 size_t after_size, const uint8_t **edge, size_t *edge_size, const uint8_t **other,
			 size_t *other_size)
{
	/* The first key above node ++ 0x00 ++ after: after ++ 0x00 is the smallest key greater than after. */
	int rc = adjacency_key(&adjacency->key, node, node_size, after ? after : "", after ? after_size : 0);
	if (rc == 0 && after)
		rc = buf_append(&adjacency->key, "", 1);
	if (rc < 0)
		return rc;
	const uint8_t *key, *value;
	size_t key_size, value_size;
	rc = btree_finder_seek(adjacency->finder, adjacency->key.data, adjacency->key.size, &key, &key_size, &value,
			       &value_size);
	if (rc <= 0)
		return rc;
	if (key_size <= node_size + 1 || memcmp(key, node, node_size) != 0 || key[node_size] != 0)
		return 0;
	*edge = key + node_size + 1;
	*edge_size = key_size - node_size - 1;
	*other = value;
	*other_size = value_size;
	return 1;
}

int table_edges_first(struct pager *pager, struct pager_append *append, const struct table_info *info,
		      enum table_edge_end end, const void *node, size_t node_size, struct buf *edge_out)
{
	struct block_address root = end == TABLE_EDGE_FROM ? info->out_edges : info->in_edges;
	if (block_address_is_null(root))
		return 0;
	struct btree *tree = NULL;
	struct btree_iterator *iterator = NULL;
	struct buf start;
	buf_init(&start);
	int rc;
	if ((rc = adjacency_key(&start, node, node_size, "", 0)) < 0 ||
	    (rc = btree_open_layout(pager, root, BTREE_PACKED, &tree)) < 0)
		goto out;
	btree_attach_append(tree, append);
	if ((rc = btree_iterator_open(tree, start.data, start.size, &iterator)) < 0)
		goto out;
	const uint8_t *key, *value;
	size_t key_size, value_size;
	rc = btree_iterator_next(iterator, &key, &key_size, &value, &value_size);
	if (rc == 1 && (key_size <= start.size || memcmp(key, start.data, start.size) != 0))
		rc = 0;
	if (rc == 1 && (rc = buf_append(edge_out, key + start.size, key_size - start.size)) == 0)
		rc = 1;
out:
	btree_iterator_free(iterator);
	btree_free(tree);
	buf_free(&start);
	return rc;
}

int table_edges_check_endpoints(struct pager *pager, const struct table_info *edges, enum table_edge_end end,
				const struct table_info *nodes, char *message, size_t message_size)
{
	struct block_address root = end == TABLE_EDGE_FROM ? edges->out_edges : edges->in_edges;
	const char *which = end == TABLE_EDGE_FROM ? "from" : "to";
	if (block_address_is_null(root))
		return 0;
	struct btree *index = NULL, *keys = NULL;
	struct btree_iterator *entries = NULL, *ids = NULL;
	int rc;
	if ((rc = btree_open(pager, root, &index)) < 0 || (rc = btree_iterator_open(index, NULL, 0, &entries)) < 0 ||
	    (rc = btree_open(pager, nodes->keys, &keys)) < 0 || (rc = btree_iterator_open(keys, NULL, 0, &ids)) < 0) {
		snprintf(message, message_size, "the %s index or its node table's key tree cannot be read (%d)", which, rc);
		goto out;
	}
	const uint8_t *id = NULL, *unused;
	size_t id_size = 0, unused_size;
	int id_more = btree_iterator_next(ids, &id, &id_size, &unused, &unused_size);
	for (;;) {
		const uint8_t *key, *value;
		size_t key_size, value_size;
		int more = btree_iterator_next(entries, &key, &key_size, &value, &value_size);
		if (more <= 0) {
			rc = more;
			break;
		}
		const uint8_t *separator = memchr(key, 0, key_size);
		if (!separator) {
			snprintf(message, message_size, "the %s index has a key without a separator", which);
			rc = -EIO;
			break;
		}
		size_t node_size = (size_t)(separator - key);
		int order = -1;
		while (id_more == 1) {
			size_t common = id_size < node_size ? id_size : node_size;
			order = memcmp(id, key, common);
			if (order == 0)
				order = (id_size > node_size) - (id_size < node_size);
			if (order >= 0)
				break;
			id_more = btree_iterator_next(ids, &id, &id_size, &unused, &unused_size);
		}
		if (id_more < 0) {
			rc = id_more;
			break;
		}
		if (id_more == 0 || order != 0) {
			snprintf(message, message_size, "dangling edge \"%.*s\": %s \"%.*s\" is not a row of its node table",
				 (int)(key_size - node_size - 1 > 200 ? 200 : key_size - node_size - 1),
				 (const char *)separator + 1, which, (int)(node_size > 200 ? 200 : node_size),
				 (const char *)key);
			rc = -EIO;
			break;
		}
	}
	if (rc < 0 && rc != -EIO)
		snprintf(message, message_size, "the %s index or its node table's key tree cannot be read (%d)", which, rc);
out:
	btree_iterator_free(entries);
	btree_iterator_free(ids);
	btree_free(index);
	btree_free(keys);
	return rc < 0 ? -EIO : 0;
}

int table_adjacency_each(struct table_adjacency *adjacency, const void *node, size_t node_size,
			 int (*visit)(const uint8_t *edge, size_t edge_size, const uint8_t *other, size_t other_size,
				      void *context),
			 void *context)
{
	struct buf after;
	buf_init(&after);
	bool first = true;
	int rc;
	for (;;) {
		const uint8_t *edge, *other;
		size_t edge_size, other_size;
		rc = table_adjacency_next(adjacency, node, node_size, first ? NULL : after.data, after.size, &edge,
					  &edge_size, &other, &other_size);
		if (rc <= 0)
			break;
		buf_reset(&after);
		if ((rc = buf_append(&after, edge, edge_size)) < 0)
			break;
		first = false;
		if ((rc = visit(edge, edge_size, other, other_size, context)) != 0)
			break;
	}
	buf_free(&after);
	return rc;
}
