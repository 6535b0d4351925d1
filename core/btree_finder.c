/*
 * btree_finder — many lookups in one published B+tree, through a bounded
 * cache of decoded nodes (see btree.h).
 *
 * Invariants kept:
 *   1. Every cached node is a verified view of the published block at its
 *      address (published blocks never change, so a cached view never goes
 *      stale) and is in exactly one hash chain and once in the LRU list.
 *   2. used is the sum of the cached nodes' sizes (node_bytes) and exceeds
 *      budget only by the nodes of the path being searched, which are never
 *      evicted (pinned): so the last path stays cached at any budget, and
 *      keys asked in increasing order decode each node once even at budget 0.
 *   3. A lookup holds at most one node at a time: eviction never frees a
 *      node a caller is still reading, except the value pointers it returned,
 *      which are documented as valid until the next call.
 */
#include "btree.h"
#include "btree_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define FINDER_BUCKETS 1024     /* hash chains; a power of two */
#define FINDER_MAX_DEPTH 32     /* deeper trees are damaged (32 KiB nodes, 2 entries at least) */

struct cached_node {
	struct block_address address;
	struct btree_node view;
	size_t bytes;
	struct cached_node *newer, *older;   /* LRU list */
	struct cached_node *next_in_bucket;
	bool pinned;                         /* on the path of the current lookup */
};

struct btree_finder {
	struct pager *pager;
	struct block_address root;
	size_t budget;
	size_t used;
	struct cached_node *newest, *oldest;
	struct cached_node *buckets[FINDER_BUCKETS];
	struct cached_node *path[FINDER_MAX_DEPTH];  /* the pinned nodes, root first */
	size_t path_depth;
};

static size_t bucket_of(struct block_address address)
{
	uint64_t mixed = (address.offset ^ (address.segment * UINT64_C(0x9e3779b97f4a7c15))) *
			 UINT64_C(0xff51afd7ed558ccd);
	return (size_t)(mixed >> 40) & (FINDER_BUCKETS - 1);
}

static size_t node_bytes(const struct cached_node *node)
{
	return sizeof *node + node->view.raw.capacity + node->view.expanded.capacity +
	       node->view.capacity * sizeof *node->view.entries;
}

int btree_finder_open(struct pager *pager, struct block_address root, size_t budget,
		      struct btree_finder **out)
{
	struct btree_finder *finder = calloc(1, sizeof *finder);
	if (!finder)
		return -ENOMEM;
	finder->pager = pager;
	finder->root = root;
	finder->budget = budget;
	*out = finder;
	return 0;
}

static void lru_unlink(struct btree_finder *finder, struct cached_node *node)
{
	if (node->newer)
		node->newer->older = node->older;
	else
		finder->newest = node->older;
	if (node->older)
		node->older->newer = node->newer;
	else
		finder->oldest = node->newer;
	node->newer = node->older = NULL;
}

static void lru_push(struct btree_finder *finder, struct cached_node *node)
{
	node->older = finder->newest;
	node->newer = NULL;
	if (finder->newest)
		finder->newest->newer = node;
	finder->newest = node;
	if (!finder->oldest)
		finder->oldest = node;
}

/* Starts a lookup: the previous path's nodes become evictable again. */
static void path_reset(struct btree_finder *finder)
{
	for (size_t i = 0; i < finder->path_depth; i++)
		finder->path[i]->pinned = false;
	finder->path_depth = 0;
}

static void path_pin(struct btree_finder *finder, struct cached_node *node)
{
	if (!node->pinned && finder->path_depth < FINDER_MAX_DEPTH) {
		node->pinned = true;
		finder->path[finder->path_depth++] = node;
	}
}

static void cache_remove(struct btree_finder *finder, struct cached_node *node)
{
	struct cached_node **link = &finder->buckets[bucket_of(node->address)];
	while (*link != node)
		link = &(*link)->next_in_bucket;
	*link = node->next_in_bucket;
	lru_unlink(finder, node);
	finder->used -= node->bytes;
	btree_view_clear(&node->view);
	free(node);
}

void btree_finder_free(struct btree_finder *finder)
{
	if (!finder)
		return;
	path_reset(finder);
	while (finder->oldest)
		cache_remove(finder, finder->oldest);
	free(finder);
}

/* Evicts unpinned nodes, oldest first, until needed more bytes fit the budget. */
static void cache_make_room(struct btree_finder *finder, size_t needed)
{
	struct cached_node *node = finder->oldest;
	while (node && finder->used + needed > finder->budget) {
		struct cached_node *newer = node->newer;
		if (!node->pinned)
			cache_remove(finder, node);
		node = newer;
	}
}

/* The decoded node at address, from the cache or read into it, pinned (invariant 2). NULL with *rc on error. */
static const struct btree_node *finder_node(struct btree_finder *finder, struct block_address address,
					    int *rc)
{
	size_t bucket = bucket_of(address);
	for (struct cached_node *node = finder->buckets[bucket]; node; node = node->next_in_bucket) {
		if (node->address.segment == address.segment && node->address.offset == address.offset) {
			if (finder->newest != node) {
				lru_unlink(finder, node);
				lru_push(finder, node);
			}
			path_pin(finder, node);
			return &node->view;
		}
	}
	struct cached_node *node = calloc(1, sizeof *node);
	if (!node) {
		*rc = -ENOMEM;
		return NULL;
	}
	node->address = address;
	*rc = btree_node_read(finder->pager, NULL, address, &node->view);
	if (*rc < 0) {
		btree_view_clear(&node->view);
		free(node);
		return NULL;
	}
	node->bytes = node_bytes(node);
	cache_make_room(finder, node->bytes);
	path_pin(finder, node);
	node->next_in_bucket = finder->buckets[bucket];
	finder->buckets[bucket] = node;
	lru_push(finder, node);
	finder->used += node->bytes;
	return &node->view;
}

static struct block_address child_address(const struct btree_node *node, size_t index)
{
	return index == 0 ? node->first_child.address : node->entries[index - 1].child.address;
}

int btree_finder_get(struct btree_finder *finder, const void *key, size_t key_size,
		     const uint8_t **value, size_t *value_size)
{
	path_reset(finder);
	if (key_size > BTREE_MAX_KEY || block_address_is_null(finder->root))
		return -ENOENT;
	struct block_address address = finder->root;
	for (size_t depth = 0; depth < FINDER_MAX_DEPTH; depth++) {
		int rc = 0;
		const struct btree_node *node = finder_node(finder, address, &rc);
		if (!node)
			return rc;
		if (!node->leaf) {
			address = child_address(node, btree_node_child_index(node, key, key_size));
			continue;
		}
		size_t index = btree_node_lower_bound(node, key, key_size);
		if (index == node->count ||
		    btree_key_compare(node->entries[index].key, node->entries[index].key_size, key, key_size) != 0)
			return -ENOENT;
		*value = node->entries[index].value;
		*value_size = node->entries[index].value_size;
		return 0;
	}
	return -EIO;
}

int btree_finder_seek(struct btree_finder *finder, const void *key, size_t key_size,
		      const uint8_t **key_out, size_t *key_size_out, const uint8_t **value,
		      size_t *value_size)
{
	path_reset(finder);
	if (block_address_is_null(finder->root))
		return 0;
	/* The path: the address and the child taken at each internal level. */
	struct block_address path[FINDER_MAX_DEPTH];
	size_t taken[FINDER_MAX_DEPTH];
	size_t depth = 0;
	struct block_address address = finder->root;
	bool leftmost = false;     /* descending to the first key of a subtree */
	for (;;) {
		if (depth == FINDER_MAX_DEPTH)
			return -EIO;
		int rc = 0;
		const struct btree_node *node = finder_node(finder, address, &rc);
		if (!node)
			return rc;
		if (!node->leaf) {
			size_t index = leftmost ? 0 : btree_node_child_index(node, key, key_size);
			path[depth] = address;
			taken[depth++] = index;
			address = child_address(node, index);
			continue;
		}
		size_t index = leftmost ? 0 : btree_node_lower_bound(node, key, key_size);
		if (index < node->count) {
			*key_out = node->entries[index].key;
			*key_size_out = node->entries[index].key_size;
			*value = node->entries[index].value;
			*value_size = node->entries[index].value_size;
			return 1;
		}
		/* Past this leaf: the next subtree to the right, from its first key. */
		for (;;) {
			if (depth == 0)
				return 0;
			depth--;
			const struct btree_node *parent = finder_node(finder, path[depth], &rc);
			if (!parent)
				return rc;
			if (taken[depth] < parent->count) {
				taken[depth]++;
				address = child_address(parent, taken[depth]);
				depth++;
				break;
			}
		}
		leftmost = true;
	}
}
