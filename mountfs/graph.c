/*
 * graph — graph/: the rows of node tables as directories, their edges as
 * files and links (docs/MOUNT.md "The graph"). Every lookup and listing is a
 * read by id through core/store_graph.c: O(log rows + answer), the same at
 * any table size, never a scan of an edge table.
 *
 *   graph/<Node>/                       NODE_GRAPH_TABLE_DIR   (table: Node)
 *   graph/<Node>/<id>/                  NODE_GRAPH_NODE_DIR    (table: Node, name: encoded id)
 *   graph/<Node>/<id>/row.json          NODE_GRAPH_ROW_FILE
 *   graph/<Node>/<id>/out/ , in/        NODE_GRAPH_OUT_DIR, NODE_GRAPH_IN_DIR
 *   .../out/<Edge>.jsonl                NODE_GRAPH_EDGES_FILE  (table: Edge)
 *   .../out/<Edge>/                     NODE_GRAPH_NEIGHBOURS_DIR (table: Edge)
 *   .../out/<Edge>/<other-id>           NODE_GRAPH_NEIGHBOUR_LINK -> ../../../../<Other>/<other-id>
 *
 * Invariants:
 *   1. A node's context (its table, its id, the edge table, the end) is read
 *      from its ancestors, which live as long as it does: nothing is stored
 *      twice.
 *   2. A name resolves exactly when a listing shows it (namespace.c invariant
 *      1): ids whose encoding is too long are neither listed nor resolved.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mountfs_int.h"

/* The graph/<Node>/<id> directory at or above node. */
static const struct node *node_directory(const struct node *node)
{
	while (node && node->kind != NODE_GRAPH_NODE_DIR)
		node = node->parent;
	return node;
}

/* The end of the out/ or in/ directory at or above node. */
static enum store_edge_end edge_end(const struct node *node)
{
	while (node && node->kind != NODE_GRAPH_OUT_DIR && node->kind != NODE_GRAPH_IN_DIR)
		node = node->parent;
	return node && node->kind == NODE_GRAPH_IN_DIR ? STORE_EDGE_IN : STORE_EDGE_OUT;
}

/* The id of the node directory at or above node, decoded into id. 0 or -ENOENT. */
static int node_id(const struct node *node, struct buf *id)
{
	const struct node *directory = node_directory(node);
	return directory && names_graph_id_decode(directory->name, id) ? 0 : -ENOENT;
}

/* ---- graph/ and graph/<Node>/ ------------------------------------------------------ */

int graph_resolve_tables(struct mountfs *mount, struct node *parent, const char *name, struct child *out)
{
	if (!names_table_valid(name))
		return -ENOENT;
	struct store_snapshot *snapshot = NULL;
	int rc = view_snapshot(mount, &parent->view, &snapshot);
	if (rc < 0)
		return rc;
	struct head_row head;
	rc = view_head(mount, snapshot, name, &head);
	store_snapshot_release(snapshot);
	if (rc < 0)
		return rc;
	if (head.kind != STORE_NODE_TABLE)
		return -ENOENT;
	out->kind = NODE_GRAPH_TABLE_DIR;
	snprintf(out->table, sizeof out->table, "%s", name);
	return 0;
}

int graph_list_tables(struct mountfs *mount, struct node *directory, struct lister *lister)
{
	struct store_snapshot *snapshot = NULL;
	int rc = view_snapshot(mount, &directory->view, &snapshot);
	if (rc < 0)
		return rc;
	struct heads_list *heads = NULL;
	rc = view_heads(mount, snapshot, &heads);
	for (size_t i = 0; rc == 0 && i < heads->count; i++) {
		if (heads->rows[i].kind != STORE_NODE_TABLE)
			continue;
		struct dir_entry *entry = listing_add(lister, heads->rows[i].name, NODE_GRAPH_TABLE_DIR);
		if (!entry)
			rc = -ENOMEM;
		else
			snprintf(entry->child.table, sizeof entry->child.table, "%s", heads->rows[i].name);
	}
	view_heads_list_release(heads);
	store_snapshot_release(snapshot);
	return rc;
}

int graph_resolve_nodes(struct mountfs *mount, struct node *parent, const char *name, struct child *out)
{
	struct buf id;
	buf_init(&id);
	struct store_snapshot *snapshot = NULL;
	int rc = names_graph_id_decode(name, &id) ? view_snapshot(mount, &parent->view, &snapshot) : -ENOENT;
	if (rc == 0) {
		rc = store_graph_node_exists(snapshot, parent->table, id.data, id.size);
		if (rc == 0)
			rc = -ENOENT;
	}
	store_snapshot_release(snapshot);
	buf_free(&id);
	if (rc < 0)
		return rc;
	out->kind = NODE_GRAPH_NODE_DIR;
	snprintf(out->table, sizeof out->table, "%s", parent->table);
	return 0;
}

struct node_listing {
	struct lister *lister;
};

static int list_node(const uint8_t *id, size_t id_size, void *context)
{
	struct node_listing *listing = context;
	char name[GRAPHFS_NAME_MAX + 1];
	if (!names_graph_id_encode(id, id_size, name))
		return 0;   /* reach it through tables/ (invariant 2) */
	return listing_add_lean(listing->lister, name, NODE_GRAPH_NODE_DIR);   /* child: the directory's table */
}

int graph_list_nodes(struct mountfs *mount, struct node *directory, struct lister *lister)
{
	struct store_snapshot *snapshot = NULL;
	int rc = view_snapshot(mount, &directory->view, &snapshot);
	if (rc < 0)
		return rc;
	struct node_listing listing = { lister };
	rc = store_graph_node_ids(snapshot, directory->table, list_node, &listing);
	store_snapshot_release(snapshot);
	return rc;
}

int graph_render_row(struct mountfs *mount, const struct node *node, struct store_snapshot *snapshot,
		     struct buf *out)
{
	struct buf id;
	buf_init(&id);
	int rc = node_id(node, &id);
	if (rc == 0)
		rc = store_graph_node_row(snapshot, node_directory(node)->table, id.data, id.size, out);
	buf_free(&id);
	return rc;
}

/* ---- out/ and in/ ----------------------------------------------------------------- */

int graph_resolve_edge_tables(struct mountfs *mount, struct node *parent, const char *name, struct child *out)
{
	char table[JOURNAL_NAME_MAX + 1];
	bool file = names_table_from_file(name, ".jsonl", table);
	if (!file) {
		if (!names_table_valid(name))
			return -ENOENT;
		snprintf(table, sizeof table, "%s", name);
	}
	struct store_snapshot *snapshot = NULL;
	int rc = view_snapshot(mount, &parent->view, &snapshot);
	if (rc < 0)
		return rc;
	char from[JOURNAL_NAME_MAX + 1], to[JOURNAL_NAME_MAX + 1];
	rc = store_graph_edge_ends(snapshot, table, from, to);
	store_snapshot_release(snapshot);
	if (rc < 0)
		return rc;
	const char *near = edge_end(parent) == STORE_EDGE_OUT ? from : to;
	if (strcmp(near, node_directory(parent)->table) != 0)
		return -ENOENT;
	out->kind = file ? NODE_GRAPH_EDGES_FILE : NODE_GRAPH_NEIGHBOURS_DIR;
	snprintf(out->table, sizeof out->table, "%s", table);
	return 0;
}

static int list_edge_table(const char *edge_table, const char *other_table, void *context)
{
	(void)other_table;
	struct lister *lister = context;
	char name[GRAPHFS_NAME_MAX + 1];
	snprintf(name, sizeof name, "%s.jsonl", edge_table);
	struct dir_entry *file = listing_add(lister, name, NODE_GRAPH_EDGES_FILE);
	if (!file)
		return -ENOMEM;
	snprintf(file->child.table, sizeof file->child.table, "%s", edge_table);
	struct dir_entry *directory = listing_add(lister, edge_table, NODE_GRAPH_NEIGHBOURS_DIR);
	if (!directory)
		return -ENOMEM;
	snprintf(directory->child.table, sizeof directory->child.table, "%s", edge_table);
	return 0;
}

int graph_list_edge_tables(struct mountfs *mount, struct node *directory, struct lister *lister)
{
	struct store_snapshot *snapshot = NULL;
	int rc = view_snapshot(mount, &directory->view, &snapshot);
	if (rc < 0)
		return rc;
	rc = store_graph_edge_tables(snapshot, node_directory(directory)->table, edge_end(directory), list_edge_table,
				     lister);
	store_snapshot_release(snapshot);
	return rc;
}

int graph_render_edges(struct mountfs *mount, const struct node *node, struct store_snapshot *snapshot,
		       struct buf *out)
{
	struct buf id;
	buf_init(&id);
	int rc = node_id(node, &id);
	if (rc == 0)
		rc = store_graph_edge_rows(snapshot, node->table, edge_end(node), id.data, id.size, out);
	buf_free(&id);
	return rc;
}

/* ---- out/<Edge>/: the neighbours ----------------------------------------------------- */

struct neighbour_search {
	const struct buf *wanted;       /* resolve: the neighbour asked for */
	bool found;
	struct buf others;              /* list: every neighbour, u16 size + id each */
};

static int find_neighbour(const uint8_t *edge, size_t edge_size, const uint8_t *other, size_t other_size,
			  void *context)
{
	(void)edge;
	(void)edge_size;
	struct neighbour_search *search = context;
	if (other_size == search->wanted->size && memcmp(other, search->wanted->data, other_size) == 0) {
		search->found = true;
		return 1;
	}
	return 0;
}

int graph_resolve_neighbours(struct mountfs *mount, struct node *parent, const char *name, struct child *out)
{
	struct buf id, other;
	buf_init(&id);
	buf_init(&other);
	struct neighbour_search search = { .wanted = &other };
	struct store_snapshot *snapshot = NULL;
	int rc = names_graph_id_decode(name, &other) ? node_id(parent, &id) : -ENOENT;
	if (rc == 0)
		rc = view_snapshot(mount, &parent->view, &snapshot);
	if (rc == 0)
		rc = store_graph_edges(snapshot, parent->table, edge_end(parent), id.data, id.size, find_neighbour,
				       &search);
	store_snapshot_release(snapshot);
	buf_free(&id);
	buf_free(&other);
	if (rc < 0)
		return rc;
	if (!search.found)
		return -ENOENT;
	out->kind = NODE_GRAPH_NEIGHBOUR_LINK;
	snprintf(out->table, sizeof out->table, "%s", parent->table);
	return 0;
}

static int collect_neighbour(const uint8_t *edge, size_t edge_size, const uint8_t *other, size_t other_size,
			     void *context)
{
	(void)edge;
	(void)edge_size;
	struct neighbour_search *search = context;
	return buf_put_str(&search->others, (const char *)other, other_size);
}

struct neighbour {
	const uint8_t *id;
	size_t size;
};

static int compare_neighbours(const void *a, const void *b)
{
	const struct neighbour *left = a, *right = b;
	size_t common = left->size < right->size ? left->size : right->size;
	int order = memcmp(left->id, right->id, common);
	return order ? order : (left->size > right->size) - (left->size < right->size);
}

int graph_list_neighbours(struct mountfs *mount, struct node *directory, struct lister *lister)
{
	struct buf id;
	buf_init(&id);
	struct neighbour_search search = { .wanted = NULL };
	buf_init(&search.others);
	struct neighbour *neighbours = NULL;
	struct store_snapshot *snapshot = NULL;
	int rc = node_id(directory, &id);
	if (rc == 0)
		rc = view_snapshot(mount, &directory->view, &snapshot);
	if (rc == 0)
		rc = store_graph_edges(snapshot, directory->table, edge_end(directory), id.data, id.size,
				       collect_neighbour, &search);
	size_t count = 0;
	struct buf_reader reader;
	buf_reader_init(&reader, search.others.data, search.others.size);
	while (rc == 0 && buf_reader_remaining(&reader) > 0) {
		struct neighbour *grown = realloc(neighbours, (count + 1) * sizeof *grown);
		if (!grown) {
			rc = -ENOMEM;
			break;
		}
		neighbours = grown;
		neighbours[count].size = buf_get_str(&reader, &neighbours[count].id);
		count++;
	}
	/* parallel edges to one neighbour give one link */
	if (rc == 0 && count > 1)
		qsort(neighbours, count, sizeof *neighbours, compare_neighbours);
	for (size_t i = 0; rc == 0 && i < count; i++) {
		if (i > 0 && compare_neighbours(&neighbours[i - 1], &neighbours[i]) == 0)
			continue;
		char name[GRAPHFS_NAME_MAX + 1];
		if (!names_graph_id_encode(neighbours[i].id, neighbours[i].size, name))
			continue;
		struct dir_entry *entry = listing_add(lister, name, NODE_GRAPH_NEIGHBOUR_LINK);
		if (!entry)
			rc = -ENOMEM;
		else
			snprintf(entry->child.table, sizeof entry->child.table, "%s", directory->table);
	}
	free(neighbours);
	buf_free(&search.others);
	buf_free(&id);
	store_snapshot_release(snapshot);
	return rc;
}

int graph_link_target(struct mountfs *mount, const struct node *node, char *out, size_t size)
{
	struct store_snapshot *snapshot = NULL;
	int rc = view_snapshot(mount, &node->view, &snapshot);
	if (rc < 0)
		return rc;
	char from[JOURNAL_NAME_MAX + 1], to[JOURNAL_NAME_MAX + 1];
	rc = store_graph_edge_ends(snapshot, node->table, from, to);
	store_snapshot_release(snapshot);
	if (rc < 0)
		return rc;
	int length = snprintf(out, size, "../../../../%s/%s", edge_end(node) == STORE_EDGE_OUT ? to : from, node->name);
	return length < 0 || (size_t)length >= size ? -ENAMETOOLONG : 0;
}
