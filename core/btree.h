/*
 * btree — copy-on-write B+tree over blocks in the manifest (layer: btree).
 *
 * Keys and values are byte strings; keys compare with memcmp, then length.
 * A tree is identified by the address of its root node; the null address is
 * the empty tree. Published nodes are immutable: a modification copies the
 * path from the root to the changed leaf into memory ("dirty" nodes), and
 * btree_flush() appends the dirty nodes children-first, returning the new
 * root. The old root stays valid forever — that is how every version keeps
 * its own heads, names and table indexes (invariants 2 and 3).
 *
 * Invariants kept:
 *   1. All leaves are at the same depth; keys are strictly increasing within
 *      a node and across leaves (in-order).
 *   2. An internal node with k keys has k+1 children; child i holds keys in
 *      [key[i-1], key[i]).
 *   3. No node other than the root is empty; an encoded node is at most
 *      BTREE_NODE_TARGET bytes unless it holds a single entry.
 *   4. Nothing reachable from a published root is ever rewritten.
 *
 * Two node layouts (docs/FORMAT.md §5), chosen per tree when it is created
 * and recorded in every node:
 *   - BTREE_PLAIN: codec NONE, nodes of at most BTREE_NODE_TARGET bytes, so a
 *     node's size depends only on its keys and values (manifest trees: heads,
 *     names, branches — their I/O is compared exactly across depths);
 *   - BTREE_PACKED: nodes of up to BTREE_PACKED_NODE_TARGET bytes (measured
 *     in the plain encoding), keys prefix-compressed, stored in columns and
 *     compressed with zstd (table key and fragment trees: size on disk).
 * A node's size against its target is always its plain encoded size.
 *
 * Reads count each node as one page (pager) and each entry decoded as one row
 * (io_count_rows) of its file's class — manifest, or data for nodes in a
 * segment — so lookups are exactly countable.
 *
 * Not thread-safe per handle: one struct btree is used by one thread. Any
 * number of handles may read the same published root concurrently.
 */
#ifndef GRAPHFS_BTREE_H
#define GRAPHFS_BTREE_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "codec.h"
#include "pager.h"

#define BTREE_NODE_TARGET 4096   /* split plain interior nodes whose encoding would exceed this */
#define BTREE_LEAF_TARGET 2048   /* the same for plain leaves (small: a commit rewrites one leaf of the heads tree) */
#define BTREE_PACKED_NODE_TARGET (32u << 10) /* the same for packed nodes (plain-encoded size) */
#define BTREE_MAX_KEY 1040       /* bytes (an adjacency key is two 512-byte ids and a separator); longer: -ENAMETOOLONG */
#define BTREE_MAX_VALUE 1024     /* bytes; longer values are refused with -E2BIG */

enum btree_layout {
	BTREE_PLAIN = 0,   /* uncompressed, exactly countable sizes */
	BTREE_PACKED = 1,  /* larger, prefix-compressed, zstd */
};

struct btree;

/* Opens a handle on the tree rooted at root (null address: empty tree). Returns 0 or -ENOMEM. */
int btree_open(struct pager *pager, struct block_address root, struct btree **out);
/*
 * The same, naming the layout of the nodes the handle creates (which matters
 * for an empty tree; existing nodes keep the layout they were written with,
 * so a tree keeps its root's). btree_open is BTREE_PLAIN. Returns 0 or -ENOMEM.
 */
int btree_open_layout(struct pager *pager, struct block_address root, enum btree_layout layout,
		      struct btree **out);
void btree_free(struct btree *tree);

/* Looks key up. Returns 0 and appends the value to value_out, -ENOENT, or -EIO/-ENOMEM. */
int btree_get(struct btree *tree, const void *key, size_t key_size, struct buf *value_out);

/* The entry with the greatest key at or below key: appends its key and value. 0, -ENOENT
 * (every key is above it), -EIO/-ENOMEM. */
int btree_get_floor(struct btree *tree, const void *key, size_t key_size, struct buf *key_out,
		    struct buf *value_out);

/* Inserts or replaces. Returns 0, -ENAMETOOLONG, -E2BIG, -EIO, -ENOMEM. On error the tree is unchanged. */
int btree_put(struct btree *tree, const void *key, size_t key_size, const void *value,
	      size_t value_size);

/* Removes key. Returns 0, -ENOENT, -EIO, -ENOMEM. */
int btree_delete(struct btree *tree, const void *key, size_t key_size);

/* True if the handle holds modifications not yet flushed. */
int btree_is_dirty(const struct btree *tree);

/*
 * Appends every dirty node, children before parents, and returns the new
 * root (the old root if nothing changed; the null address if the tree is
 * now empty). After a successful flush the handle reads from the new root.
 * Returns 0 or -errno; on error the handle is still dirty and unchanged.
 */
int btree_flush(struct btree *tree, struct pager_append *append, struct block_address *root_out);

/* The root the handle was opened on or last flushed to. */
struct block_address btree_root(const struct btree *tree);

/*
 * Routes the handle's node reads through append (pager_append_read) until
 * called again with NULL, so nodes flushed into an append that is not yet
 * written can be read and modified again — e.g. several versions of one tree
 * flushed into one publish. Without it, reading a root that exists only in an
 * unwritten append fails with -EIO. Nodes served from the append buffer cost
 * no pages (they are not read from disk); their entries still count as rows.
 * The append must outlive its use by the handle and by its iterators.
 */
void btree_attach_append(struct btree *tree, struct pager_append *append);

/*
 * In-order iteration, from the first key >= start (start NULL: from the
 * beginning). Sees the handle's dirty state; the tree must not be modified
 * or flushed while an iterator is open on it. The pointers returned by next
 * stay valid until the following next or free.
 */
struct btree_iterator;
int btree_iterator_open(struct btree *tree, const void *start, size_t start_size,
			struct btree_iterator **out);
/* Returns 1 with an entry, 0 at the end, or -errno. */
int btree_iterator_next(struct btree_iterator *iterator, const uint8_t **key, size_t *key_size,
			const uint8_t **value, size_t *value_size);
void btree_iterator_free(struct btree_iterator *iterator);

/*
 * A finder answers many lookups in one published tree, keeping the nodes it
 * decoded in a cache bounded by budget bytes (least recently used first out;
 * a tree smaller than the budget is decoded once, whatever the number of
 * lookups). Keys looked up in increasing order decode each node on their
 * path at most once at any budget. Nothing is allocated per lookup once the
 * cache is full. Reads count as btree_get's do, but only on a miss: a cached
 * node costs no page and no row. Not thread-safe: one finder per thread.
 */
struct btree_finder;
/* Opens a finder on root (null: the empty tree). Returns 0 or -ENOMEM. */
int btree_finder_open(struct pager *pager, struct block_address root, size_t budget,
		      struct btree_finder **out);
void btree_finder_free(struct btree_finder *finder);
/*
 * Looks key up. Returns 0 with *value and *value_size set (valid until the
 * next call on the finder; value may be NULL), -ENOENT, or -EIO/-ENOMEM.
 */
int btree_finder_get(struct btree_finder *finder, const void *key, size_t key_size,
		     const uint8_t **value, size_t *value_size);
/*
 * The first entry whose key is >= key (in-order successor search). Returns 1
 * with the entry (pointers valid until the next call on the finder), 0 when
 * no key is >= key, or -errno.
 */
int btree_finder_seek(struct btree_finder *finder, const void *key, size_t key_size,
		      const uint8_t **key_out, size_t *key_size_out, const uint8_t **value,
		      size_t *value_size);

/*
 * The entries where the trees rooted at a and b differ, in key order
 * (core/btree_diff.c): visit gets the key with a's value and b's (NULL when
 * the key is absent on that side; never both NULL, never equal bytes).
 * Subtrees both trees share (the same node address at the same place, as
 * copy-on-write leaves them) are skipped without being read, so a change of
 * k entries in a tree of n reads O(k log n) nodes plus the two leftmost
 * paths. visit returns 0 to go on; anything else stops the walk and is
 * returned. Returns 0, that value, -EIO or -ENOMEM.
 */
typedef int (*btree_diff_visit)(const uint8_t *key, size_t key_size, const uint8_t *a_value, size_t a_size,
				const uint8_t *b_value, size_t b_size, void *context);
int btree_diff(struct pager *pager, struct block_address a, struct block_address b, btree_diff_visit visit,
	       void *context);

/*
 * Bulk load: builds a new tree from entries supplied in strictly increasing
 * key order (-EINVAL otherwise), appending full nodes as it goes, in memory
 * proportional to the tree height. Used for overwrites of large tables.
 */
struct btree_builder;
int btree_builder_open(struct pager_append *append, struct btree_builder **out);  /* BTREE_PLAIN */
int btree_builder_open_layout(struct pager_append *append, enum btree_layout layout,
			      struct btree_builder **out);
/*
 * A builder that writes its nodes to a segment being written instead of the
 * manifest (a large table's trees, built outside the store lock). The tree
 * it returns may be named from the manifest once the segment is finished.
 */
int btree_builder_open_segment(struct pager_segment *segment, enum btree_layout layout,
			       struct btree_builder **out);
int btree_builder_add(struct btree_builder *builder, const void *key, size_t key_size,
		      const void *value, size_t value_size);
/* Finishes, returns the root (null address when no entry was added), frees the builder. */
int btree_builder_finish(struct btree_builder *builder, struct block_address *root_out);
void btree_builder_free(struct btree_builder *builder);

/*
 * Verify walk: checks every node reachable from root (checksums, ordering,
 * balance, sizes, one layout). Calls visit for each node address (may be NULL) so a
 * store-wide verify can account for reachable blocks. Returns 0 or -EIO with
 * a description in message.
 */
int btree_verify(struct pager *pager, struct block_address root,
		 void (*visit)(struct block_address node, void *context), void *context,
		 char *message, size_t message_size);

/*
 * Every node of the tree rooted at root, parents before children: visit_node
 * returns 0 to go on below the node, > 0 to skip what is below it (already
 * seen; or in a segment, whose nodes only point into the same segment), < 0
 * to stop with that error. visit_entry (may be NULL) sees every leaf entry of
 * the nodes walked. Returns 0, the first negative value a visitor returned,
 * -EIO or -ENOMEM.
 */
typedef int (*btree_node_visit)(struct block_address node, void *context);
typedef int (*btree_entry_visit)(const uint8_t *key, size_t key_size, const uint8_t *value, size_t value_size,
				 void *context);
int btree_nodes_each(struct pager *pager, struct block_address root, btree_node_visit visit_node,
		     btree_entry_visit visit_entry, void *context);

#endif
