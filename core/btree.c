/*
 * btree — copy-on-write B+tree over BLOCK_NODE blocks (see btree.h for the
 * contract and docs/FORMAT.md §5 for the node payload).
 *
 * Invariants kept by a handle, in addition to those listed in btree.h:
 *   5. A child slot holds either a published address (node == NULL) or an
 *      in-memory copy (node != NULL; its address is then not used). The
 *      in-memory nodes form the top of the tree: every in-memory node's
 *      parent is in memory too, up to tree->root.
 *   6. In-memory nodes own their entries' bytes; read-only views own only the
 *      payload they were decoded from (btree_node.c invariant 1).
 *   7. `modified` is set only when an operation changed the contents. A path
 *      copied into memory by an operation that then failed changes nothing,
 *      and flushing an unmodified handle appends nothing.
 *   8. After each put or delete the nodes on its path are rebalanced (split,
 *      merged, emptied nodes removed, root grown or collapsed). If that fails
 *      (memory, or a sibling that cannot be read) the tree stays correct for
 *      reads but may hold an oversized or empty node in memory; btree_flush()
 *      completes the rebalancing before it writes anything, so every
 *      published tree keeps invariants 1–3.
 *   9. Published nodes are never modified; a child is appended before its
 *      parent, so a child's offset is always below its parent's (node reads
 *      check this, which also rules out cycles in a damaged file).
 *
 * States of a handle: clean (root is a published address, nothing in memory)
 * → dirty (put/delete copied root-to-leaf paths into memory) → clean again
 * after btree_flush() (root = the newly appended root, memory released).
 *
 * A handle's reads never cache (btree_finder.c does, for repeated lookups): every
 * published node on a lookup path is read through
 * pager_read() (one manifest page) and counts its entries as manifest rows,
 * so a lookup's cost depends only on the shape of the tree it searches.
 */
#include "btree.h"
#include "btree_int.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "io.h"

struct btree {
	struct pager *pager;
	enum btree_layout layout;       /* of nodes the handle creates (an empty tree's root) */
	struct pager_append *append;    /* when set, node reads go through it */
	struct block_address published; /* opened on or last flushed to */
	struct btree_child root;
	bool modified;
	struct btree_node scratch;      /* view reused by lookups and rebalancing */
};

/* ---- loading a child into memory ----------------------------------------- */

/* Makes sure slot's node is in memory (reading and copying it if needed). */
static int slot_load(struct btree *tree, struct btree_child *slot)
{
	if (slot->node)
		return 0;
	int rc = btree_node_read(tree->pager, tree->append, slot->address, &tree->scratch);
	if (rc)
		return rc;
	return btree_node_copy_view(&tree->scratch, &slot->node);
}

/* ---- rebalancing the in-memory nodes of a path ----------------------------- */

/*
 * Merges parent's child index with a sibling. With `required` (the child is
 * an internal node without keys) it always merges, splitting the result again
 * if it does not fit; otherwise it merges only when the result fits and
 * leaves a sibling it had to read untouched when it does not. Returns 0,
 * -EIO or -ENOMEM; on error the tree still reads the same.
 */
static int node_rebalance_child(struct btree *tree, struct btree_node *parent, size_t index,
				bool required)
{
	assert(parent->count > 0);
	size_t left_index = index > 0 ? index - 1 : index;
	struct btree_node *child = btree_node_child_slot(parent, index)->node;
	struct btree_child *sibling = btree_node_child_slot(parent, index > 0 ? index - 1 : index + 1);
	const struct btree_node *sibling_node = sibling->node;
	if (!sibling_node) {
		int rc = btree_node_read(tree->pager, tree->append, sibling->address, &tree->scratch);
		if (rc)
			return rc;
		sibling_node = &tree->scratch;
	}
	if (sibling_node->leaf != child->leaf)
		return -EIO; /* leaves at different depths: the tree is damaged */
	size_t merged = child->encoded_size + sibling_node->encoded_size -
			btree_node_empty_size(child->leaf);
	if (!child->leaf)
		merged += btree_entry_encoded_size(false, &parent->entries[left_index]);
	if (merged > btree_node_target(child) && !required)
		return 0;
	if (!sibling->node) {
		int rc = btree_node_copy_view(&tree->scratch, &sibling->node);
		if (rc)
			return rc;
	}
	int rc = btree_node_merge_children(parent, left_index);
	if (rc)
		return rc;
	if (btree_node_oversized(btree_node_child_slot(parent, left_index)->node))
		return btree_node_split_child(parent, left_index);
	return 0;
}

/* True if the node breaks a rule that a flush must not write (invariants 2–3). */
static bool node_needs_fix(const struct btree_node *node)
{
	return btree_node_oversized(node) || node->count == 0;
}

/*
 * Restores the size rules for parent's in-memory child index: splits it if
 * oversized, removes it if it is an empty leaf, merges it with a sibling if
 * it is an internal node without keys — and, unless required_only, if it is
 * under a quarter full and the merge fits. Returns 0, -EIO or -ENOMEM; on
 * error the tree still reads the same.
 */
static int node_fix_child(struct btree *tree, struct btree_node *parent, size_t index,
			  bool required_only)
{
	struct btree_node *child = btree_node_child_slot(parent, index)->node;
	assert(child);
	if (btree_node_oversized(child))
		return btree_node_split_child(parent, index);
	if (parent->count == 0)
		return 0; /* no sibling: the parent itself is fixed by its own parent */
	if (child->leaf && child->count == 0) {
		btree_node_free(child);
		if (index == 0) {
			parent->first_child = parent->entries[0].child;
			parent->entries[0].child.node = NULL;
			btree_node_remove_entry(parent, 0);
		} else {
			btree_node_remove_entry(parent, index - 1);
		}
		return 0;
	}
	bool required = !child->leaf && child->count == 0;
	if (required || (!required_only && btree_node_underfull(child)))
		return node_rebalance_child(tree, parent, index, required);
	return 0;
}

/*
 * Makes every in-memory node below node obey invariants 2–3 (the flush-time
 * completion of invariant 8). Returns 0, -EIO or -ENOMEM.
 */
static int node_normalize(struct btree *tree, struct btree_node *node)
{
	if (node->leaf)
		return 0;
	for (;;) {
		for (size_t i = 0; i <= node->count; i++) {
			struct btree_node *child = btree_node_child_slot(node, i)->node;
			if (child) {
				int rc = node_normalize(tree, child);
				if (rc)
					return rc;
			}
		}
		bool changed = false;
		for (size_t i = 0; i <= node->count && !changed; i++) {
			struct btree_node *child = btree_node_child_slot(node, i)->node;
			if (!child || !node_needs_fix(child) ||
			    (node->count == 0 && !btree_node_oversized(child)))
				continue;
			int rc = node_fix_child(tree, node, i, true);
			if (rc)
				return rc;
			changed = true;
		}
		if (!changed)
			return 0;
	}
}

/* Grows an oversized root, collapses a root with one child, empties an empty root. */
static int tree_fix_root(struct btree *tree)
{
	for (;;) {
		struct btree_node *root = tree->root.node;
		if (!root)
			return 0;
		if (btree_node_oversized(root)) {
			struct btree_node *top = btree_node_new(false, root->layout);
			if (!top)
				return -ENOMEM;
			top->first_child = tree->root;
			int rc = btree_node_split_child(top, 0);
			if (rc) {
				top->first_child.node = NULL;
				btree_node_free(top);
				return rc;
			}
			tree->root = (struct btree_child){ { 0, 0 }, top };
		} else if (!root->leaf && root->count == 0) {
			tree->root = root->first_child;
			root->first_child.node = NULL;
			btree_node_free(root);
		} else if (root->leaf && root->count == 0) {
			btree_node_free(root);
			tree->root = (struct btree_child){ { 0, 0 }, NULL };
			return 0;
		} else {
			return 0;
		}
	}
}

/* ---- put / delete ------------------------------------------------------- */

struct change {
	const uint8_t *key;
	size_t key_size;
	const uint8_t *value;
	size_t value_size;
	bool remove;
	bool changed; /* out: the contents changed */
};

static int leaf_apply(struct btree_node *leaf, struct change *change)
{
	size_t index = btree_node_lower_bound(leaf, change->key, change->key_size);
	struct btree_entry *found = NULL;
	if (index < leaf->count &&
	    btree_key_compare(leaf->entries[index].key, leaf->entries[index].key_size, change->key,
			change->key_size) == 0)
		found = &leaf->entries[index];
	if (change->remove) {
		if (!found)
			return -ENOENT;
		btree_node_remove_entry(leaf, index);
		change->changed = true;
		return 0;
	}
	if (found && found->value_size == change->value_size &&
	    (change->value_size == 0 || memcmp(found->value, change->value, change->value_size) == 0))
		return 0;
	struct btree_entry entry;
	int rc = btree_entry_make(change->key, change->key_size, change->value, change->value_size, &entry);
	if (rc)
		return rc;
	if (found) {
		leaf->encoded_size -= btree_entry_encoded_size(true, found);
		leaf->encoded_size += btree_entry_encoded_size(true, &entry);
		free((void *)found->key);
		*found = entry;
	} else {
		rc = btree_node_reserve(leaf, leaf->count + 1);
		if (rc) {
			free((void *)entry.key);
			return rc;
		}
		btree_node_insert_entry(leaf, index, entry);
	}
	change->changed = true;
	return 0;
}

static int node_modify(struct btree *tree, struct btree_child *slot, struct change *change)
{
	int rc = slot_load(tree, slot);
	if (rc)
		return rc;
	struct btree_node *node = slot->node;
	if (node->leaf)
		return leaf_apply(node, change);
	size_t index = btree_node_child_index(node, change->key, change->key_size);
	rc = node_modify(tree, btree_node_child_slot(node, index), change);
	/* A failed rebalance leaves a correct tree; btree_flush completes it (invariant 8). */
	if (rc == 0 && change->changed)
		(void)node_fix_child(tree, node, index, false);
	return rc;
}

static int tree_modify(struct btree *tree, struct change *change)
{
	if (!tree->root.node && block_address_is_null(tree->root.address)) {
		if (change->remove)
			return -ENOENT;
		tree->root.node = btree_node_new(true, tree->layout);
		if (!tree->root.node)
			return -ENOMEM;
	}
	int rc = node_modify(tree, &tree->root, change);
	if (rc == 0 && change->changed) {
		tree->modified = true;
		(void)tree_fix_root(tree); /* as above: completed by btree_flush if it fails */
	}
	return rc;
}

int btree_put(struct btree *tree, const void *key, size_t key_size, const void *value,
	      size_t value_size)
{
	if (key_size > BTREE_MAX_KEY)
		return -ENAMETOOLONG;
	if (value_size > BTREE_MAX_VALUE)
		return -E2BIG;
	struct change change = { .key = key, .key_size = key_size, .value = value,
				 .value_size = value_size };
	return tree_modify(tree, &change);
}

int btree_delete(struct btree *tree, const void *key, size_t key_size)
{
	if (key_size > BTREE_MAX_KEY)
		return -ENOENT;
	struct change change = { .key = key, .key_size = key_size, .remove = true };
	return tree_modify(tree, &change);
}

/* ---- handle ------------------------------------------------------------- */

int btree_open(struct pager *pager, struct block_address root, struct btree **out)
{
	return btree_open_layout(pager, root, BTREE_PLAIN, out);
}

int btree_open_layout(struct pager *pager, struct block_address root, enum btree_layout layout,
		      struct btree **out)
{
	struct btree *tree = calloc(1, sizeof *tree);
	if (!tree)
		return -ENOMEM;
	tree->pager = pager;
	tree->layout = layout;
	tree->published = root;
	tree->root.address = root;
	*out = tree;
	return 0;
}

void btree_free(struct btree *tree)
{
	if (!tree)
		return;
	btree_node_free(tree->root.node);
	btree_view_clear(&tree->scratch);
	free(tree);
}

int btree_is_dirty(const struct btree *tree)
{
	return tree->modified;
}

struct block_address btree_root(const struct btree *tree)
{
	return tree->published;
}

void btree_attach_append(struct btree *tree, struct pager_append *append)
{
	tree->append = append;
}

/* The node of a child slot: its in-memory copy, or read into tree->scratch (valid until the
 * next read). 0, -ENOENT (a null address: the empty tree), -EIO, -ENOMEM. */
static int slot_node(struct btree *tree, struct btree_child slot, const struct btree_node **out)
{
	if (slot.node) {
		*out = slot.node;
		return 0;
	}
	if (block_address_is_null(slot.address))
		return -ENOENT;
	int rc = btree_node_read(tree->pager, tree->append, slot.address, &tree->scratch);
	*out = &tree->scratch;
	return rc;
}

int btree_get(struct btree *tree, const void *key, size_t key_size, struct buf *value_out)
{
	if (key_size > BTREE_MAX_KEY)
		return -ENOENT;
	struct btree_child slot = tree->root;
	for (;;) {
		const struct btree_node *node;
		int rc = slot_node(tree, slot, &node);
		if (rc)
			return rc;
		if (!node->leaf) {
			size_t index = btree_node_child_index(node, key, key_size);
			slot = index == 0 ? node->first_child : node->entries[index - 1].child;
			continue;
		}
		size_t index = btree_node_lower_bound(node, key, key_size);
		if (index == node->count ||
		    btree_key_compare(node->entries[index].key, node->entries[index].key_size, key,
				key_size) != 0)
			return -ENOENT;
		return buf_append(value_out, node->entries[index].value,
				  node->entries[index].value_size);
	}
}

/* Appends an entry's key and value. 0 or -ENOMEM. */
static int entry_copy(const struct btree_entry *entry, struct buf *key_out, struct buf *value_out)
{
	int rc = buf_append(key_out, entry->key, entry->key_size);
	return rc < 0 ? rc : buf_append(value_out, entry->value, entry->value_size);
}

/* The last entry below a child slot (its key and value appended), by last children down. */
static int rightmost_entry(struct btree *tree, struct btree_child slot, struct buf *key_out, struct buf *value_out)
{
	for (;;) {
		const struct btree_node *node;
		int rc = slot_node(tree, slot, &node);
		if (rc)
			return rc;
		if (node->count == 0)
			return -EIO;   /* only an empty root leaf has no entries, and it has no left sibling */
		if (!node->leaf) {
			slot = node->entries[node->count - 1].child;
			continue;
		}
		return entry_copy(&node->entries[node->count - 1], key_out, value_out);
	}
}

int btree_get_floor(struct btree *tree, const void *key, size_t key_size, struct buf *key_out,
		    struct buf *value_out)
{
	struct btree_child slot = tree->root, left = { 0 };
	bool have_left = false;
	for (;;) {
		const struct btree_node *node;
		int rc = slot_node(tree, slot, &node);
		if (rc)
			return rc;
		if (!node->leaf) {
			size_t index = btree_node_child_index(node, key, key_size);
			if (index > 0) {   /* the subtree just left of the one taken: the floor's if this one has none */
				left = index == 1 ? node->first_child : node->entries[index - 2].child;
				have_left = true;
			}
			slot = index == 0 ? node->first_child : node->entries[index - 1].child;
			continue;
		}
		size_t index = btree_node_lower_bound(node, key, key_size);
		if (index < node->count &&
		    btree_key_compare(node->entries[index].key, node->entries[index].key_size, key, key_size) == 0)
			index++;
		if (index == 0)
			return have_left ? rightmost_entry(tree, left, key_out, value_out) : -ENOENT;
		return entry_copy(&node->entries[index - 1], key_out, value_out);
	}
}

/* ---- flush -------------------------------------------------------------- */


/*
 * Appends the in-memory nodes below and including node, children first,
 * storing each child's new address in its slot (the node pointers stay until
 * the whole flush succeeded).
 */
static int node_write(struct btree_node *node, struct pager_append *append, struct buf *encoded,
		      struct block_address *address_out)
{
	assert(node->count > 0 && !btree_node_oversized(node));
	if (!node->leaf) {
		for (size_t i = 0; i <= node->count; i++) {
			struct btree_child *slot = btree_node_child_slot(node, i);
			if (slot->node) {
				int rc = node_write(slot->node, append, encoded, &slot->address);
				if (rc)
					return rc;
			}
		}
	}
	struct btree_node_sink sink = { append, NULL };
	return btree_node_store(sink, node, encoded, address_out);
}

int btree_flush(struct btree *tree, struct pager_append *append, struct block_address *root_out)
{
	if (!tree->modified) {
		btree_node_free(tree->root.node);
		tree->root = (struct btree_child){ tree->published, NULL };
		*root_out = tree->published;
		return 0;
	}
	int rc = 0;
	if (tree->root.node) {
		rc = node_normalize(tree, tree->root.node);
		if (rc)
			return rc;
	}
	rc = tree_fix_root(tree);
	if (rc)
		return rc;
	struct block_address root = tree->root.address;
	if (tree->root.node) {
		struct buf encoded;
		buf_init(&encoded);
		rc = node_write(tree->root.node, append, &encoded, &root);
		buf_free(&encoded);
		if (rc)
			return rc;
	}
	btree_node_free(tree->root.node);
	tree->root = (struct btree_child){ root, NULL };
	tree->published = root;
	tree->modified = false;
	*root_out = root;
	return 0;
}

/* ---- iterator ----------------------------------------------------------- */

/*
 * The iterator keeps one level per tree level: the node (in-memory, owned by
 * the tree, or a view owned by the level) and a position — for a leaf the
 * next entry to return, for an internal node the child being visited. The
 * tree must not be modified while an iterator is open on it.
 */
struct iterator_level {
	struct btree_node *memory_node; /* the tree's in-memory node, or NULL: use view */
	struct btree_node view;
	size_t index;
};

struct btree_iterator {
	struct btree *tree;
	struct iterator_level *levels;
	size_t depth;     /* levels in use */
	size_t capacity;  /* levels allocated (views kept for reuse) */
	int error;        /* sticky error of a failed next */
};

static struct btree_node *level_node(struct iterator_level *level)
{
	return level->memory_node ? level->memory_node : &level->view;
}

/* Descends from slot to a leaf: to the first key >= start, or leftmost when start is NULL. */
static int iterator_descend(struct btree_iterator *iterator, struct btree_child slot,
			    const uint8_t *start, size_t start_size)
{
	for (;;) {
		if (iterator->depth == iterator->capacity) {
			size_t capacity = iterator->capacity ? iterator->capacity * 2 : 8;
			struct iterator_level *levels =
				realloc(iterator->levels, capacity * sizeof *levels);
			if (!levels)
				return -ENOMEM;
			memset(levels + iterator->capacity, 0,
			       (capacity - iterator->capacity) * sizeof *levels);
			iterator->levels = levels;
			iterator->capacity = capacity;
		}
		struct iterator_level *level = &iterator->levels[iterator->depth];
		level->memory_node = slot.node;
		if (!slot.node) {
			struct btree *tree = iterator->tree;
			int rc = btree_node_read(tree->pager, tree->append, slot.address, &level->view);
			if (rc)
				return rc;
		}
		iterator->depth++;
		struct btree_node *node = level_node(level);
		if (node->leaf) {
			level->index = start ? btree_node_lower_bound(node, start, start_size) : 0;
			return 0;
		}
		level->index = start ? btree_node_child_index(node, start, start_size) : 0;
		slot = *btree_node_child_slot(node, level->index);
	}
}

int btree_iterator_open(struct btree *tree, const void *start, size_t start_size,
			struct btree_iterator **out)
{
	struct btree_iterator *iterator = calloc(1, sizeof *iterator);
	if (!iterator)
		return -ENOMEM;
	iterator->tree = tree;
	int rc = 0;
	if (tree->root.node || !block_address_is_null(tree->root.address)) {
		rc = iterator_descend(iterator, tree->root, start, start ? start_size : 0);
		if (rc) {
			btree_iterator_free(iterator);
			return rc;
		}
	}
	*out = iterator;
	return 0;
}

int btree_iterator_next(struct btree_iterator *iterator, const uint8_t **key, size_t *key_size,
			const uint8_t **value, size_t *value_size)
{
	if (iterator->error)
		return iterator->error;
	while (iterator->depth > 0) {
		struct iterator_level *level = &iterator->levels[iterator->depth - 1];
		struct btree_node *node = level_node(level);
		if (node->leaf && level->index < node->count) {
			const struct btree_entry *entry = &node->entries[level->index++];
			*key = entry->key;
			*key_size = entry->key_size;
			*value = entry->value;
			*value_size = entry->value_size;
			return 1;
		}
		if (node->leaf || level->index == node->count) {
			iterator->depth--;
			continue;
		}
		level->index++;
		int rc = iterator_descend(iterator, *btree_node_child_slot(node, level->index), NULL, 0);
		if (rc) {
			iterator->error = rc;
			return rc;
		}
	}
	return 0;
}

void btree_iterator_free(struct btree_iterator *iterator)
{
	if (!iterator)
		return;
	for (size_t i = 0; i < iterator->capacity; i++)
		btree_view_clear(&iterator->levels[i].view);
	free(iterator->levels);
	free(iterator);
}

/* ---- verify ------------------------------------------------------------- */

struct verify_walk {
	struct pager *pager;
	void (*visit)(struct block_address node, void *context);
	void *context;
	char *message;
	size_t message_size;
	size_t leaf_depth; /* 0 until the first leaf is reached */
	int layout;        /* the root's layout, every node's; -1 until the root is read */
};

static int verify_fail(struct verify_walk *walk, struct block_address address, const char *what)
{
	if (walk->message && walk->message_size)
		snprintf(walk->message, walk->message_size,
			 "B+tree node in segment %llu at offset %llu: %s",
			 (unsigned long long)address.segment, (unsigned long long)address.offset,
			 what);
	return -EIO;
}

/* Checks the subtree at address: its keys lie in [lower, upper) (NULL: unbounded). */
static int verify_node(struct verify_walk *walk, struct block_address address, size_t depth,
		       const struct btree_entry *lower, const struct btree_entry *upper)
{
	if (walk->visit)
		walk->visit(address, walk->context);
	struct btree_node view = { 0 };
	int rc = btree_node_read(walk->pager, NULL, address, &view);
	if (rc == -ENOMEM)
		goto cleanup;
	if (rc) {
		rc = verify_fail(walk, address, "unreadable, damaged or malformed");
		goto cleanup;
	}
	if (walk->layout < 0)
		walk->layout = view.layout;
	if (view.layout != walk->layout) {
		rc = verify_fail(walk, address, "of another layout than its tree's root");
		goto cleanup;
	}
	if (btree_node_oversized(&view)) {
		rc = verify_fail(walk, address, "larger than the node size target");
		goto cleanup;
	}
	const struct btree_entry *first = &view.entries[0], *last = &view.entries[view.count - 1];
	if (lower && btree_key_compare(first->key, first->key_size, lower->key, lower->key_size) < 0) {
		rc = verify_fail(walk, address, "key below its separator");
		goto cleanup;
	}
	if (upper && btree_key_compare(last->key, last->key_size, upper->key, upper->key_size) >= 0) {
		rc = verify_fail(walk, address, "key not below the next separator");
		goto cleanup;
	}
	if (view.leaf) {
		if (walk->leaf_depth == 0)
			walk->leaf_depth = depth;
		else if (walk->leaf_depth != depth)
			rc = verify_fail(walk, address, "leaf at a different depth than other leaves");
		goto cleanup;
	}
	for (size_t i = 0; i <= view.count && rc == 0; i++) {
		const struct btree_entry *child_lower = i == 0 ? lower : &view.entries[i - 1];
		const struct btree_entry *child_upper = i == view.count ? upper : &view.entries[i];
		rc = verify_node(walk, btree_node_child_slot(&view, i)->address, depth + 1, child_lower,
				 child_upper);
	}
cleanup:
	btree_view_clear(&view);
	return rc;
}

int btree_verify(struct pager *pager, struct block_address root,
		 void (*visit)(struct block_address node, void *context), void *context,
		 char *message, size_t message_size)
{
	if (message && message_size)
		message[0] = 0;
	if (block_address_is_null(root))
		return 0;
	struct verify_walk walk = { pager, visit, context, message, message_size, 0, -1 };
	return verify_node(&walk, root, 1, NULL, NULL);
}

/* ---- walk of every node (gc's mark) ---------------------------------------------------- */

struct nodes_walk {
	struct pager *pager;
	btree_node_visit visit_node;
	btree_entry_visit visit_entry;
	void *context;
};

static int walk_nodes(struct nodes_walk *walk, struct block_address address)
{
	int rc = walk->visit_node(address, walk->context);
	if (rc != 0)
		return rc > 0 ? 0 : rc;   /* > 0: not below this node */
	struct btree_node view = { 0 };
	if ((rc = btree_node_read(walk->pager, NULL, address, &view)) < 0)
		goto out;
	if (view.leaf) {
		for (size_t i = 0; i < view.count && rc == 0 && walk->visit_entry; i++)
			rc = walk->visit_entry(view.entries[i].key, view.entries[i].key_size, view.entries[i].value,
					       view.entries[i].value_size, walk->context);
		goto out;
	}
	for (size_t i = 0; i <= view.count && rc == 0; i++)
		rc = walk_nodes(walk, btree_node_child_slot(&view, i)->address);
out:
	btree_view_clear(&view);
	return rc;
}

int btree_nodes_each(struct pager *pager, struct block_address root, btree_node_visit visit_node,
		     btree_entry_visit visit_entry, void *context)
{
	if (block_address_is_null(root))
		return 0;
	struct nodes_walk walk = { pager, visit_node, visit_entry, context };
	return walk_nodes(&walk, root);
}
