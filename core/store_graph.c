/*
 * store_graph — reads of the graph by id: a node's row, a table's ids, an
 * edge table's ends, a node's edges through the adjacency indexes
 * (docs/FORMAT.md §12.1). See store.h. Each read resolves its table's head in
 * the snapshot (O(log tables)) and then costs O(log rows + answer).
 */
#include "store_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert((int)STORE_NODE_TABLE == (int)SCHEMA_NODE && (int)STORE_EDGE_TABLE == (int)SCHEMA_EDGE,
	       "head_row.kind is a schema kind");

#define GRAPH_READ_CACHE (256u << 10) /* decoded nodes a single listing keeps */

/* The table version of a live table of the given kind. 0, -ENOENT (none, or another kind), -errno. */
static int graph_table(struct store_snapshot *snapshot, const char *table, enum schema_kind kind,
		       struct table_info *info, struct schema *schema)
{
	struct head_row head;
	int rc = store_snapshot_head(snapshot, table, &head);
	if (rc < 0)
		return rc;
	if (head.kind != kind)
		return -ENOENT;
	return store_head_schema(snapshot->store, &head, info, schema);
}

int store_graph_node_exists(struct store_snapshot *snapshot, const char *table, const void *id, size_t id_size)
{
	struct table_info info;
	int rc = graph_table(snapshot, table, SCHEMA_NODE, &info, NULL);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	struct table_finder *finder = NULL;
	if ((rc = table_finder_open(snapshot->store->pager, &info, 0, &finder)) < 0)
		return rc;
	rc = table_finder_has(finder, id, id_size);
	table_finder_free(finder);
	return rc;
}

int store_graph_node_row(struct store_snapshot *snapshot, const char *table, const void *id, size_t id_size,
			 struct buf *out)
{
	struct table_info info;
	int rc = graph_table(snapshot, table, SCHEMA_NODE, &info, NULL);
	return rc < 0 ? rc : table_lookup(snapshot->store->pager, &info, id, id_size, out);
}

int store_graph_node_ids(struct store_snapshot *snapshot, const char *table,
			 int (*visit)(const uint8_t *id, size_t id_size, void *context), void *context)
{
	struct table_info info;
	int rc = graph_table(snapshot, table, SCHEMA_NODE, &info, NULL);
	if (rc < 0)
		return rc;
	struct btree *keys = NULL;
	struct btree_iterator *iterator = NULL;
	if ((rc = btree_open(snapshot->store->pager, info.keys, &keys)) < 0 ||
	    (rc = btree_iterator_open(keys, NULL, 0, &iterator)) < 0)
		goto out;
	const uint8_t *id, *value;
	size_t id_size, value_size;
	while ((rc = btree_iterator_next(iterator, &id, &id_size, &value, &value_size)) == 1)
		if ((rc = visit(id, id_size, context)) != 0)
			break;
out:
	btree_iterator_free(iterator);
	btree_free(keys);
	return rc < 0 ? rc : 0;
}

int store_graph_edge_ends(struct store_snapshot *snapshot, const char *edge_table, char from[JOURNAL_NAME_MAX + 1],
			  char to[JOURNAL_NAME_MAX + 1])
{
	struct table_info info;
	struct schema schema;
	schema_init(&schema);
	int rc = graph_table(snapshot, edge_table, SCHEMA_EDGE, &info, &schema);
	if (rc == 0) {
		snprintf(from, JOURNAL_NAME_MAX + 1, "%s", schema.from);
		snprintf(to, JOURNAL_NAME_MAX + 1, "%s", schema.to);
	}
	schema_free(&schema);
	return rc;
}

struct edge_table_search {
	struct store_snapshot *snapshot;
	const char *node_table;
	enum store_edge_end end;
	int (*visit)(const char *edge_table, const char *other_table, void *context);
	void *context;
	int rc;
};

static int edge_table_visit(const struct head_row *head, void *context)
{
	struct edge_table_search *search = context;
	if (head->kind != SCHEMA_EDGE)
		return 0;
	struct table_info info;
	struct schema schema;
	schema_init(&schema);
	int rc = store_head_schema(search->snapshot->store, head, &info, &schema);
	if (rc == 0) {
		const char *near = search->end == STORE_EDGE_OUT ? schema.from : schema.to;
		const char *far = search->end == STORE_EDGE_OUT ? schema.to : schema.from;
		if (strcmp(near, search->node_table) == 0)
			rc = search->visit(head->name, far, search->context);
	}
	schema_free(&schema);
	search->rc = rc;
	return rc;
}

int store_graph_edge_tables(struct store_snapshot *snapshot, const char *node_table, enum store_edge_end end,
			    int (*visit)(const char *edge_table, const char *other_table, void *context),
			    void *context)
{
	struct edge_table_search search = { snapshot, node_table, end, visit, context, 0 };
	int rc = store_snapshot_heads(snapshot, false, edge_table_visit, &search);
	if (rc == 0 && search.rc < 0)
		rc = search.rc;
	return rc;
}

int store_graph_edges(struct store_snapshot *snapshot, const char *edge_table, enum store_edge_end end,
		      const void *node, size_t node_size,
		      int (*visit)(const uint8_t *edge, size_t edge_size, const uint8_t *other, size_t other_size,
				   void *context),
		      void *context)
{
	struct table_info info;
	int rc = graph_table(snapshot, edge_table, SCHEMA_EDGE, &info, NULL);
	if (rc < 0)
		return rc;
	struct table_adjacency *adjacency = NULL;
	if ((rc = table_adjacency_open(snapshot->store->pager, &info,
				       end == STORE_EDGE_OUT ? TABLE_EDGE_FROM : TABLE_EDGE_TO, GRAPH_READ_CACHE,
				       &adjacency)) < 0)
		return rc;
	rc = table_adjacency_each(adjacency, node, node_size, visit, context);
	table_adjacency_free(adjacency);
	return rc < 0 ? rc : 0;
}

struct edge_rows {
	struct pager *pager;
	struct table_info info;
	struct buf *out;
};

static int edge_row_visit(const uint8_t *edge, size_t edge_size, const uint8_t *other, size_t other_size,
			  void *context)
{
	(void)other;
	(void)other_size;
	struct edge_rows *rows = context;
	int rc = table_lookup(rows->pager, &rows->info, edge, edge_size, rows->out);
	return rc == -ENOENT ? -EIO : rc;  /* an index entry names a live row (table_edges.c invariant 1) */
}

int store_graph_edge_rows(struct store_snapshot *snapshot, const char *edge_table, enum store_edge_end end,
			  const void *node, size_t node_size, struct buf *out)
{
	struct edge_rows rows = { .pager = snapshot->store->pager, .out = out };
	int rc = graph_table(snapshot, edge_table, SCHEMA_EDGE, &rows.info, NULL);
	return rc < 0 ? rc : store_graph_edges(snapshot, edge_table, end, node, node_size, edge_row_visit, &rows);
}
