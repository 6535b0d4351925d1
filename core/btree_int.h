/*
 * btree_int.h — internals shared by btree.c and btree_finder.c (layer: btree).
 *
 * The node as it is held in memory: an owned in-memory copy (a handle's
 * dirty path) or a read-only view decoded from a block payload.
 */
#ifndef GRAPHFS_BTREE_INT_H
#define GRAPHFS_BTREE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "pager.h"

enum node_kind {
	NODE_LEAF = 0,
	NODE_INTERNAL = 1,
};

#define NODE_HEADER_SIZE 4                            /* kind, layout, count */
#define LEAF_EMPTY_SIZE NODE_HEADER_SIZE
#define INTERNAL_EMPTY_SIZE (NODE_HEADER_SIZE + BLOCK_ADDRESS_SIZE) /* + child 0 */

struct btree_node;

struct btree_child {
	struct block_address address; /* the published node, used when node is NULL */
	struct btree_node *node;       /* the in-memory copy, or NULL */
};

struct btree_entry {
	const uint8_t *key;       /* in-memory nodes: owned allocation holding key then value */
	const uint8_t *value;     /* leaves only */
	uint16_t key_size;
	uint16_t value_size;
	struct btree_child child; /* internal nodes only: the child right of key */
};

struct btree_node {
	bool leaf;
	uint8_t layout;                 /* enum btree_layout: how the node is encoded */
	bool owns_entries;              /* in-memory copy, or read-only view of raw */
	struct btree_child first_child; /* internal nodes only: child 0 */
	struct btree_entry *entries;
	size_t count;
	size_t capacity;
	size_t encoded_size;            /* bytes of the node payload in the plain encoding (its size
					   under either layout: what the node size targets bound) */
	struct buf raw;                 /* views only: the payload the entries point into */
	struct buf expanded;            /* views of packed nodes: the keys and values rebuilt */
};

/* memcmp order over the common length, then the shorter key first. */
int btree_key_compare(const uint8_t *a, size_t a_size, const uint8_t *b, size_t b_size);
/* First index whose key is >= key (count if none). */
size_t btree_node_lower_bound(const struct btree_node *node, const uint8_t *key, size_t key_size);
/* The child of an internal node whose key range holds key: the number of keys <= key. */
size_t btree_node_child_index(const struct btree_node *node, const uint8_t *key, size_t key_size);
/*
 * Reads and decodes the node at address into view (reusing its memory),
 * through append if it is not NULL. Counts one page (pager, for reads from
 * disk) and one row per entry of the file's class. Returns 0, -EIO (damaged
 * or malformed node), -ENOENT or -ENOMEM.
 */
int btree_node_read(struct pager *pager, struct pager_append *append, struct block_address address,
		    struct btree_node *view);
/*
 * Decodes view->raw (a node block's payload) into view's entries, checking
 * the layout, the count, that the entries fill the payload exactly and that
 * keys ascend. Returns 0, or -EIO (malformed; view->count is then 0 or
 * partial and must not be used) or -ENOMEM. Does not check where children
 * live (btree_node_read does: invariant 9).
 */
int btree_node_decode(struct btree_node *view);
/*
 * Encodes a node (an in-memory copy, or a decoded view) whose children all
 * have published addresses into out (reset first), in the node's layout: the
 * payload a node block carries. Returns 0 or -ENOMEM.
 */
int btree_node_encode(const struct btree_node *node, struct buf *out);
/* Releases a view's memory and leaves it empty (views are embedded, not allocated). */
void btree_view_clear(struct btree_node *view);

/* ---- btree_node.c: nodes, for the tree (btree.c) and the builder (btree_build.c) ---- */

/* Where written nodes go: the manifest append of a publish, or a segment being written. */
struct btree_node_sink {
	struct pager_append *append;
	struct pager_segment *segment;
};

/* Sizes: an empty node's encoding, one entry's, the fill a node aims at, and whether a node is
 * below or above it. */
size_t btree_node_empty_size(bool leaf);
size_t btree_entry_encoded_size(bool leaf, const struct btree_entry *entry);
size_t btree_node_target(const struct btree_node *node);
bool btree_node_underfull(const struct btree_node *node);
bool btree_node_oversized(const struct btree_node *node);
struct btree_child *btree_node_child_slot(struct btree_node *node, size_t index);
struct btree_node *btree_node_new(bool leaf, unsigned layout);
int btree_node_reserve(struct btree_node *node, size_t count);
void btree_node_free(struct btree_node *node);
int btree_entry_make(const void *key, size_t key_size, const void *value, size_t value_size,
		      struct btree_entry *out);
void btree_node_remove_entry(struct btree_node *node, size_t index);
void btree_node_insert_entry(struct btree_node *node, size_t index, struct btree_entry entry);
int btree_node_copy_view(const struct btree_node *view, struct btree_node **out);
int btree_node_split_child(struct btree_node *parent, size_t index);
int btree_node_merge_children(struct btree_node *parent, size_t left_index);
int btree_node_store(struct btree_node_sink sink, const struct btree_node *node, struct buf *encoded,
		      struct block_address *address_out);

#endif
