/*
 * btree_diff — the entries where two published trees differ, in key order,
 * skipping every subtree the two share (layer: btree).
 *
 * Copy-on-write makes two versions of one tree share every node a change did
 * not touch, so their difference is found by walking both at once and never
 * entering a node that both name at the same place: a one-entry change in a
 * tree of n entries reads O(log n) nodes of each (docs/ARCHITECTURE.md
 * "Diffs and merges").
 *
 * Each side is a cursor over "items": the pending root, a child pointer of an
 * internal node (with a lower bound on its keys: the separator left of it, or
 * its parent's bound for child 0) or a leaf entry. Every item before a
 * cursor's current one has been processed. One step:
 *   - both items are children with the same address: skip both (same keys,
 *     same values);
 *   - a child whose lower bound is not above the other side's current key
 *     (or that is taller, at equal bounds) is opened: its node replaces it by
 *     its items;
 *   - two entries: equal keys are compared by value, otherwise the smaller
 *     key is reported as present on one side only.
 * Invariant: every processed key of either side is below both current items'
 * keys, so an entry reported on one side only is absent from the other.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "btree.h"
#include "btree_int.h"

enum item_kind { ITEM_END = 0, ITEM_CHILD, ITEM_ENTRY };

struct item {
	enum item_kind kind;
	struct block_address address;   /* ITEM_CHILD */
	unsigned height;                /* ITEM_CHILD: 1 for a leaf */
	const uint8_t *key;             /* ITEM_ENTRY: the key; ITEM_CHILD: the lower bound (NULL: none) */
	size_t key_size;
	const uint8_t *value;           /* ITEM_ENTRY */
	size_t value_size;
};

struct frame {
	struct btree_node view;
	size_t position;                /* internal: child 0..count; leaf: entry 0..count-1 */
	const uint8_t *bound;           /* the lower bound of the node (NULL: none) */
	size_t bound_size;
};

struct cursor {
	struct pager *pager;
	struct block_address root;
	unsigned height;                /* levels of the tree (1: the root is a leaf; 0: empty) */
	bool root_pending;              /* the root has not been opened or skipped */
	struct frame *frames;
	size_t depth;                   /* frames in use */
	size_t capacity;
};

/* Levels of the tree rooted at root: the length of its leftmost path. 0 or -errno. */
static int tree_height(struct pager *pager, struct block_address root, unsigned *out)
{
	struct btree_node view;
	memset(&view, 0, sizeof view);
	buf_init(&view.raw);
	buf_init(&view.expanded);
	unsigned height = 0;
	int rc = 0;
	struct block_address at = root;
	while (!block_address_is_null(at)) {
		if ((rc = btree_node_read(pager, NULL, at, &view)) < 0)
			break;
		height++;
		if (view.leaf || height > 64)
			break;
		at = view.first_child.address;
	}
	btree_view_clear(&view);
	*out = height;
	return rc;
}

static int cursor_init(struct cursor *cursor, struct pager *pager, struct block_address root)
{
	memset(cursor, 0, sizeof *cursor);
	cursor->pager = pager;
	cursor->root = root;
	cursor->root_pending = !block_address_is_null(root);
	return cursor->root_pending ? tree_height(pager, root, &cursor->height) : 0;
}

static void cursor_free(struct cursor *cursor)
{
	for (size_t i = 0; i < cursor->capacity; i++)
		btree_view_clear(&cursor->frames[i].view);
	free(cursor->frames);
}

/* The current item (popping finished nodes). */
static void cursor_item(struct cursor *cursor, struct item *out)
{
	memset(out, 0, sizeof *out);
	if (cursor->root_pending) {
		out->kind = ITEM_CHILD;
		out->address = cursor->root;
		out->height = cursor->height;
		return;
	}
	while (cursor->depth > 0) {
		struct frame *frame = &cursor->frames[cursor->depth - 1];
		const struct btree_node *node = &frame->view;
		if (node->leaf && frame->position < node->count) {
			const struct btree_entry *entry = &node->entries[frame->position];
			out->kind = ITEM_ENTRY;
			out->key = entry->key;
			out->key_size = entry->key_size;
			out->value = entry->value;
			out->value_size = entry->value_size;
			return;
		}
		if (!node->leaf && frame->position <= node->count) {
			out->kind = ITEM_CHILD;
			out->height = cursor->height - (unsigned)cursor->depth;
			if (frame->position == 0) {
				out->address = node->first_child.address;
				out->key = frame->bound;
				out->key_size = frame->bound_size;
			} else {
				const struct btree_entry *entry = &node->entries[frame->position - 1];
				out->address = entry->child.address;
				out->key = entry->key;
				out->key_size = entry->key_size;
			}
			return;
		}
		cursor->depth--;   /* finished: the parent moves past it */
		if (cursor->depth > 0)
			cursor->frames[cursor->depth - 1].position++;
	}
	out->kind = ITEM_END;
}

/* Moves past the current item (a child: without reading it). */
static void cursor_advance(struct cursor *cursor)
{
	if (cursor->root_pending)
		cursor->root_pending = false;
	else if (cursor->depth > 0)
		cursor->frames[cursor->depth - 1].position++;
}

/* Opens the current item, a child: its node's items replace it. 0 or -errno. */
static int cursor_open(struct cursor *cursor, const struct item *child)
{
	if (cursor->depth == cursor->capacity) {
		size_t capacity = cursor->capacity ? cursor->capacity * 2 : 8;
		struct frame *grown = realloc(cursor->frames, capacity * sizeof *grown);
		if (!grown)
			return -ENOMEM;
		memset(grown + cursor->capacity, 0, (capacity - cursor->capacity) * sizeof *grown);
		for (size_t i = cursor->capacity; i < capacity; i++) {
			buf_init(&grown[i].view.raw);
			buf_init(&grown[i].view.expanded);
		}
		cursor->frames = grown;
		cursor->capacity = capacity;
	}
	/* the bound points into the parent's view, which stays below on the stack */
	struct frame *frame = &cursor->frames[cursor->depth];
	int rc = btree_node_read(cursor->pager, NULL, child->address, &frame->view);
	if (rc < 0)
		return rc;
	bool expected_leaf = child->height <= 1;
	if (frame->view.leaf != expected_leaf)
		return -EIO;   /* leaves at different depths: not a valid tree */
	frame->position = 0;
	frame->bound = child->key;
	frame->bound_size = child->key_size;
	if (cursor->root_pending)
		cursor->root_pending = false;
	cursor->depth++;
	return 0;
}

/* a < b for lower bounds and keys, NULL being below everything. */
static int bound_compare(const struct item *a, const struct item *b)
{
	if (!a->key || !b->key)
		return (a->key != NULL) - (b->key != NULL);
	return btree_key_compare(a->key, a->key_size, b->key, b->key_size);
}

int btree_diff(struct pager *pager, struct block_address a_root, struct block_address b_root,
	       btree_diff_visit visit, void *context)
{
	struct cursor a, b;
	memset(&b, 0, sizeof b);
	int rc = cursor_init(&a, pager, a_root);
	if (rc == 0)
		rc = cursor_init(&b, pager, b_root);
	if (rc < 0)
		goto out;
	if (block_address_equal(a_root, b_root))
		goto out;
	for (;;) {
		struct item x, y;
		cursor_item(&a, &x);
		cursor_item(&b, &y);
		if (x.kind == ITEM_END && y.kind == ITEM_END)
			break;
		if (x.kind == ITEM_CHILD && y.kind == ITEM_CHILD && block_address_equal(x.address, y.address)) {
			cursor_advance(&a);
			cursor_advance(&b);
			continue;
		}
		if (x.kind == ITEM_END || y.kind == ITEM_END) {
			struct cursor *side = x.kind == ITEM_END ? &b : &a;
			struct item *item = x.kind == ITEM_END ? &y : &x;
			if (item->kind == ITEM_CHILD) {
				if ((rc = cursor_open(side, item)) < 0)
					goto out;
				continue;
			}
			rc = side == &a ? visit(item->key, item->key_size, item->value, item->value_size, NULL, 0, context)
					: visit(item->key, item->key_size, NULL, 0, item->value, item->value_size, context);
			if (rc != 0)
				goto out;
			cursor_advance(side);
			continue;
		}
		int order = bound_compare(&x, &y);
		if (x.kind == ITEM_CHILD || y.kind == ITEM_CHILD) {
			/* open the child that starts first; at equal bounds the taller (or both) */
			bool open_x, open_y;
			if (x.kind == ITEM_CHILD && y.kind == ITEM_CHILD) {
				open_x = order < 0 || (order == 0 && x.height >= y.height);
				open_y = order > 0 || (order == 0 && y.height >= x.height);
			} else if (x.kind == ITEM_CHILD) {
				open_x = order <= 0;
				open_y = false;
			} else {
				open_x = false;
				open_y = order >= 0;
			}
			if (!open_x && !open_y) {
				/* an entry strictly before the other side's child: on one side only */
				struct cursor *side = x.kind == ITEM_ENTRY ? &a : &b;
				rc = side == &a ? visit(x.key, x.key_size, x.value, x.value_size, NULL, 0, context)
						: visit(y.key, y.key_size, NULL, 0, y.value, y.value_size, context);
				if (rc != 0)
					goto out;
				cursor_advance(side);
				continue;
			}
			if (open_x && (rc = cursor_open(&a, &x)) < 0)
				goto out;
			if (open_y && (rc = cursor_open(&b, &y)) < 0)
				goto out;
			continue;
		}
		if (order < 0) {
			rc = visit(x.key, x.key_size, x.value, x.value_size, NULL, 0, context);
			cursor_advance(&a);
		} else if (order > 0) {
			rc = visit(y.key, y.key_size, NULL, 0, y.value, y.value_size, context);
			cursor_advance(&b);
		} else {
			if (x.value_size != y.value_size || memcmp(x.value, y.value, x.value_size) != 0)
				rc = visit(x.key, x.key_size, x.value, x.value_size, y.value, y.value_size, context);
			cursor_advance(&a);
			cursor_advance(&b);
		}
		if (rc != 0)
			goto out;
	}
out:
	cursor_free(&a);
	cursor_free(&b);
	return rc;
}
