/*
 * btree — copy-on-write B+tree over BLOCK_NODE blocks (see btree.h for the
 * contract and docs/FORMAT.md §5 for the node payload).
 *
 * Invariants kept by a handle, in addition to those listed in btree.h:
 *   5. A child slot holds either a published address (node == NULL) or an
 *      in-memory copy (node != NULL; its address is then not used). The
 *      in-memory nodes form the top of the tree: every in-memory node's
 *      parent is in memory too, up to tree->root.
 *   6. In-memory nodes own their entries' bytes (one allocation per entry:
 *      key, then value); read-only views point into the block payload they
 *      were decoded from and own nothing but that payload.
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

/* ---- keys and sizes ---------------------------------------------------- */

int btree_key_compare(const uint8_t *a, size_t a_size, const uint8_t *b, size_t b_size)
{
	size_t common = a_size < b_size ? a_size : b_size;
	int order = common ? memcmp(a, b, common) : 0;
	if (order)
		return order;
	return (a_size > b_size) - (a_size < b_size);
}

static size_t node_empty_size(bool leaf)
{
	return leaf ? LEAF_EMPTY_SIZE : INTERNAL_EMPTY_SIZE;
}

static size_t entry_encoded_size(bool leaf, const struct btree_entry *entry)
{
	if (leaf)
		return 2 + (size_t)entry->key_size + 2 + entry->value_size;
	return 2 + (size_t)entry->key_size + BLOCK_ADDRESS_SIZE;
}

static size_t layout_target(unsigned layout)
{
	return layout == BTREE_PACKED ? BTREE_PACKED_NODE_TARGET : BTREE_NODE_TARGET;
}

/* Plain leaves are smaller than interior nodes: a commit rewrites one leaf of
 * the heads tree, and an interior node must hold three of the largest keys. */
static size_t node_target(const struct btree_node *node)
{
	if (node->layout == BTREE_PLAIN && node->leaf)
		return BTREE_LEAF_TARGET;
	return layout_target(node->layout);
}

/* Merge below a quarter of the target when the result fits. */
static bool node_underfull(const struct btree_node *node)
{
	return node->encoded_size < node_target(node) / 4;
}

static bool node_oversized(const struct btree_node *node)
{
	return node->encoded_size > node_target(node) && node->count > 1;
}

/* First index whose key is >= key (count if none). */
size_t btree_node_lower_bound(const struct btree_node *node, const uint8_t *key, size_t key_size)
{
	size_t low = 0, high = node->count;
	while (low < high) {
		size_t middle = low + (high - low) / 2;
		const struct btree_entry *entry = &node->entries[middle];
		if (btree_key_compare(entry->key, entry->key_size, key, key_size) < 0)
			low = middle + 1;
		else
			high = middle;
	}
	return low;
}

/* The child of an internal node whose key range holds key: the number of keys <= key. */
size_t btree_node_child_index(const struct btree_node *node, const uint8_t *key, size_t key_size)
{
	size_t low = 0, high = node->count;
	while (low < high) {
		size_t middle = low + (high - low) / 2;
		const struct btree_entry *entry = &node->entries[middle];
		if (btree_key_compare(entry->key, entry->key_size, key, key_size) <= 0)
			low = middle + 1;
		else
			high = middle;
	}
	return low;
}

static struct btree_child *child_slot(struct btree_node *node, size_t index)
{
	assert(!node->leaf && index <= node->count);
	return index == 0 ? &node->first_child : &node->entries[index - 1].child;
}

/* ---- node memory -------------------------------------------------------- */

static struct btree_node *node_new(bool leaf, unsigned layout)
{
	struct btree_node *node = calloc(1, sizeof *node);
	if (!node)
		return NULL;
	node->leaf = leaf;
	node->layout = (uint8_t)layout;
	node->owns_entries = true;
	node->encoded_size = node_empty_size(leaf);
	return node;
}

static int node_reserve(struct btree_node *node, size_t count)
{
	if (count <= node->capacity)
		return 0;
	size_t capacity = node->capacity ? node->capacity * 2 : 8;
	if (capacity < count)
		capacity = count;
	struct btree_entry *entries = realloc(node->entries, capacity * sizeof *entries);
	if (!entries)
		return -ENOMEM;
	node->entries = entries;
	node->capacity = capacity;
	return 0;
}

/* Frees an in-memory node, its entries and every in-memory node below it. */
static void node_free(struct btree_node *node)
{
	if (!node)
		return;
	assert(node->owns_entries);
	if (!node->leaf) {
		node_free(node->first_child.node);
		for (size_t i = 0; i < node->count; i++)
			node_free(node->entries[i].child.node);
	}
	for (size_t i = 0; i < node->count; i++)
		free((void *)node->entries[i].key);
	free(node->entries);
	buf_free(&node->raw);
	buf_free(&node->expanded);
	free(node);
}

/* Releases a view's memory and leaves it empty (views are embedded, not allocated). */
void btree_view_clear(struct btree_node *view)
{
	assert(!view->owns_entries);
	free(view->entries);
	buf_free(&view->raw);
	buf_free(&view->expanded);
	memset(view, 0, sizeof *view);
}

/* An owned copy of key and value as one allocation. Returns 0 or -ENOMEM. */
static int entry_make(const void *key, size_t key_size, const void *value, size_t value_size,
		      struct btree_entry *out)
{
	uint8_t *bytes = malloc(key_size + value_size ? key_size + value_size : 1);
	if (!bytes)
		return -ENOMEM;
	if (key_size)
		memcpy(bytes, key, key_size);
	if (value_size)
		memcpy(bytes + key_size, value, value_size);
	*out = (struct btree_entry){
		.key = bytes,
		.value = bytes + key_size,
		.key_size = (uint16_t)key_size,
		.value_size = (uint16_t)value_size,
	};
	return 0;
}

/* Removes entry index (freeing its key; not its child). */
static void node_remove_entry(struct btree_node *node, size_t index)
{
	assert(index < node->count);
	node->encoded_size -= entry_encoded_size(node->leaf, &node->entries[index]);
	if (node->owns_entries)
		free((void *)node->entries[index].key);
	memmove(node->entries + index, node->entries + index + 1,
		(node->count - index - 1) * sizeof *node->entries);
	node->count--;
}

/* Inserts entry at index; the capacity must already be reserved. */
static void node_insert_entry(struct btree_node *node, size_t index, struct btree_entry entry)
{
	assert(node->count < node->capacity && index <= node->count);
	memmove(node->entries + index + 1, node->entries + index,
		(node->count - index) * sizeof *node->entries);
	node->entries[index] = entry;
	node->count++;
	node->encoded_size += entry_encoded_size(node->leaf, &entry);
}

/* ---- reading published nodes -------------------------------------------- */

static uint16_t load_u16(const uint8_t *at)
{
	return (uint16_t)(at[0] | at[1] << 8);
}

static void store_u16(uint8_t *at, size_t value)
{
	at[0] = (uint8_t)value;
	at[1] = (uint8_t)(value >> 8);
}

/* Points *bytes at the next size bytes of reader and skips them. False (and failed) on overrun. */
static bool reader_take(struct buf_reader *reader, size_t size, const uint8_t **bytes)
{
	if (reader->failed || (size_t)(reader->end - reader->position) < size) {
		reader->failed = 1;
		return false;
	}
	*bytes = reader->position;
	reader->position += size;
	return true;
}

/* Checks the keys of a decoded view are strictly increasing; sets its plain encoded size. */
static int view_check(struct btree_node *view)
{
	size_t size = node_empty_size(view->leaf);
	for (size_t i = 0; i < view->count; i++) {
		const struct btree_entry *entry = &view->entries[i];
		if (i > 0 && btree_key_compare(entry[-1].key, entry[-1].key_size, entry->key, entry->key_size) >= 0)
			return -EIO;
		size += entry_encoded_size(view->leaf, entry);
	}
	view->encoded_size = size;
	return 0;
}

/* Decodes a plain node (FORMAT.md §5): the entries point into view->raw. */
static int node_decode_plain(struct btree_node *view, size_t count, struct buf_reader *reader)
{
	if (!view->leaf)
		view->first_child.address = codec_get_address(reader);
	for (size_t i = 0; i < count; i++) {
		struct btree_entry *entry = &view->entries[i];
		memset(entry, 0, sizeof *entry);
		size_t key_size = buf_get_str(reader, &entry->key);
		size_t value_size = 0;
		if (view->leaf)
			value_size = buf_get_str(reader, &entry->value);
		else
			entry->child.address = codec_get_address(reader);
		if (reader->failed || key_size > BTREE_MAX_KEY || value_size > BTREE_MAX_VALUE)
			return -EIO;
		entry->key_size = (uint16_t)key_size;
		entry->value_size = (uint16_t)value_size;
		view->count = i + 1;
	}
	return 0;
}

/*
 * Decodes a packed node (FORMAT.md §5, "packed layout"): columns of prefix,
 * suffix and value lengths, the suffixes, then the values or child
 * addresses (byte-transposed when of equal size). Keys and values are
 * rebuilt into view->expanded, which the entries point into.
 */
static int node_decode_packed(struct btree_node *view, size_t count, struct buf_reader *reader)
{
	size_t columns = view->leaf ? 3 : 2;
	const uint8_t *lengths;
	if (!reader_take(reader, 2 * columns * count, &lengths))
		return -EIO;
	const uint8_t *prefixes = lengths, *suffixes = lengths + 2 * count;
	const uint8_t *value_sizes = lengths + 4 * count;
	size_t key_total = 0, suffix_total = 0, value_total = 0, previous_key = 0;
	bool equal_values = true;
	for (size_t i = 0; i < count; i++) {
		size_t prefix = load_u16(prefixes + 2 * i), suffix = load_u16(suffixes + 2 * i);
		size_t key_size = prefix + suffix;
		if (prefix > previous_key || key_size > BTREE_MAX_KEY || (i == 0 && prefix != 0))
			return -EIO;
		previous_key = key_size;
		key_total += key_size;
		suffix_total += suffix;
		if (view->leaf) {
			size_t value_size = load_u16(value_sizes + 2 * i);
			if (value_size > BTREE_MAX_VALUE)
				return -EIO;
			value_total += value_size;
			equal_values = equal_values && value_size == load_u16(value_sizes);
		}
	}
	size_t addresses = view->leaf ? 0 : count + 1;
	const uint8_t *suffix_bytes, *value_bytes;
	if (!reader_take(reader, suffix_total, &suffix_bytes) ||
	    !reader_take(reader, view->leaf ? value_total : addresses * BLOCK_ADDRESS_SIZE, &value_bytes))
		return -EIO;
	buf_reset(&view->expanded);
	int rc = buf_reserve(&view->expanded, key_total + value_total + addresses * BLOCK_ADDRESS_SIZE);
	if (rc)
		return rc;
	uint8_t *out = view->expanded.data;
	const uint8_t *previous = NULL;
	for (size_t i = 0; i < count; i++) {
		struct btree_entry *entry = &view->entries[i];
		memset(entry, 0, sizeof *entry);
		size_t prefix = load_u16(prefixes + 2 * i), suffix = load_u16(suffixes + 2 * i);
		if (prefix)
			memcpy(out, previous, prefix);
		memcpy(out + prefix, suffix_bytes, suffix);
		suffix_bytes += suffix;
		entry->key = previous = out;
		entry->key_size = (uint16_t)(prefix + suffix);
		out += prefix + suffix;
	}
	if (view->leaf) {
		size_t value_size = count ? load_u16(value_sizes) : 0;
		for (size_t i = 0; i < count; i++) {
			struct btree_entry *entry = &view->entries[i];
			entry->value_size = load_u16(value_sizes + 2 * i);
			entry->value = out;
			if (equal_values) {
				for (size_t b = 0; b < value_size; b++)
					out[b] = value_bytes[b * count + i];
			} else {
				memcpy(out, value_bytes, entry->value_size);
				value_bytes += entry->value_size;
			}
			out += entry->value_size;
		}
	} else {
		uint8_t *rebuilt = out;
		for (size_t i = 0; i < addresses; i++)
			for (size_t b = 0; b < BLOCK_ADDRESS_SIZE; b++)
				rebuilt[i * BLOCK_ADDRESS_SIZE + b] = value_bytes[b * addresses + i];
		view->first_child.address.segment = buf_load_u64(rebuilt);
		view->first_child.address.offset = buf_load_u64(rebuilt + 8);
		for (size_t i = 0; i < count; i++) {
			const uint8_t *at = rebuilt + (i + 1) * BLOCK_ADDRESS_SIZE;
			view->entries[i].child.address = (struct block_address){ buf_load_u64(at),
										   buf_load_u64(at + 8) };
		}
	}
	view->expanded.size = key_total + value_total + addresses * BLOCK_ADDRESS_SIZE;
	view->count = count;
	return 0;
}

int btree_node_decode(struct btree_node *view)
{
	struct buf_reader reader;
	buf_reader_init(&reader, view->raw.data, view->raw.size);
	uint8_t kind = buf_get_u8(&reader);
	uint8_t layout = buf_get_u8(&reader);
	uint16_t count = buf_get_u16(&reader);
	view->count = 0;
	view->first_child = (struct btree_child){ { 0, 0 }, NULL };
	if (reader.failed || kind > NODE_INTERNAL || layout > BTREE_PACKED || count == 0)
		return -EIO;
	view->leaf = kind == NODE_LEAF;
	view->layout = layout;
	int rc = node_reserve(view, count);
	if (rc)
		return rc;
	rc = layout == BTREE_PLAIN ? node_decode_plain(view, count, &reader)
				   : node_decode_packed(view, count, &reader);
	if (rc)
		return rc;
	if (reader.failed || view->count != count || buf_reader_remaining(&reader) != 0)
		return -EIO;
	return view_check(view);
}

/*
 * A child must have been written before its parent (invariant 9): in the same
 * file at a lower offset, or in a segment below a parent in the manifest
 * (segments are complete before the manifest names them; a segment's nodes
 * only name nodes of their own segment).
 */
static bool child_precedes(struct block_address child, struct block_address parent)
{
	if (block_address_is_null(child))
		return false;
	if (child.segment == parent.segment)
		return child.offset < parent.offset;
	return parent.segment == 0;
}

/*
 * Reads and decodes the node at address into view (reusing its memory),
 * through append if it is not NULL. Counts one manifest page (pager, for
 * reads from disk) and one manifest row per entry. Returns 0, -EIO (damaged
 * or malformed node), -ENOENT or -ENOMEM.
 */
int btree_node_read(struct pager *pager, struct pager_append *append,
		     struct block_address address, struct btree_node *view)
{
	assert(!view->owns_entries);
	buf_reset(&view->raw);
	view->count = 0;
	int rc = append ? pager_append_read(append, address, BLOCK_NODE, &view->raw)
			: pager_read(pager, address, BLOCK_NODE, &view->raw);
	if (rc)
		return rc;
	rc = btree_node_decode(view);
	if (rc == 0 && !view->leaf) {
		bool ordered = child_precedes(view->first_child.address, address);
		for (size_t i = 0; i < view->count; i++)
			ordered = ordered && child_precedes(view->entries[i].child.address, address);
		if (!ordered)
			rc = -EIO;
	}
	if (rc == -EIO)
		io_log(LOG_ERR, "malformed B+tree node in segment %llu at offset %llu",
			(unsigned long long)address.segment, (unsigned long long)address.offset);
	if (rc) {
		view->count = 0;
		return rc;
	}
	io_count_rows(address.segment == 0 ? IO_MANIFEST : IO_DATA, view->count);
	return 0;
}

/* An in-memory copy of a view. Returns 0 or -ENOMEM (nothing allocated). */
static int node_copy_view(const struct btree_node *view, struct btree_node **out)
{
	struct btree_node *node = node_new(view->leaf, view->layout);
	if (!node)
		return -ENOMEM;
	int rc = node_reserve(node, view->count + 1);
	if (rc)
		goto cleanup;
	node->first_child = view->first_child;
	for (size_t i = 0; i < view->count; i++) {
		const struct btree_entry *entry = &view->entries[i];
		struct btree_entry copy;
		rc = entry_make(entry->key, entry->key_size, entry->value, entry->value_size, &copy);
		if (rc)
			goto cleanup;
		if (!view->leaf) {
			copy.value = NULL;
			copy.child = entry->child;
		}
		node->entries[node->count++] = copy;
	}
	node->encoded_size = view->encoded_size;
	*out = node;
	return 0;
cleanup:
	node_free(node);
	return rc;
}

/* Makes sure slot's node is in memory (reading and copying it if needed). */
static int slot_load(struct btree *tree, struct btree_child *slot)
{
	if (slot->node)
		return 0;
	int rc = btree_node_read(tree->pager, tree->append, slot->address, &tree->scratch);
	if (rc)
		return rc;
	return node_copy_view(&tree->scratch, &slot->node);
}

/* ---- splitting and merging in-memory nodes ------------------------------ */

/* Encoded size of a node holding entries [begin, end) of node (prefix: running entry sizes). */
static size_t range_size(const struct btree_node *node, const size_t *prefix, size_t begin,
			 size_t end)
{
	return node_empty_size(node->leaf) + prefix[end] - prefix[begin];
}

/*
 * Chooses where to cut entries [begin, end) so every piece fits (or holds a
 * single entry), cutting each oversized range where the larger half is
 * smallest. A leaf's cut is the first entry of the right piece; an internal
 * node's cut is the entry whose key moves up to the parent (its child becomes
 * the right piece's child 0), so both pieces keep at least one key.
 */
static void plan_split(const struct btree_node *node, const size_t *prefix, size_t begin,
		       size_t end, size_t *cuts, size_t *cut_count)
{
	if (range_size(node, prefix, begin, end) <= node_target(node) || end - begin <= 1)
		return;
	size_t first = begin + 1;
	size_t last = node->leaf ? end - 1 : end - 2;
	if (end - begin < 3 && !node->leaf)
		return; /* two keys always fit in an internal node (BTREE_MAX_KEY) */
	size_t best = first, best_size = SIZE_MAX;
	for (size_t cut = first; cut <= last; cut++) {
		size_t left = range_size(node, prefix, begin, cut);
		size_t right = range_size(node, prefix, node->leaf ? cut : cut + 1, end);
		size_t larger = left > right ? left : right;
		if (larger < best_size) {
			best_size = larger;
			best = cut;
		}
	}
	plan_split(node, prefix, begin, best, cuts, cut_count);
	cuts[(*cut_count)++] = best;
	plan_split(node, prefix, node->leaf ? best : best + 1, end, cuts, cut_count);
}

/*
 * Splits parent's child index (in memory) into as many nodes as it takes to
 * fit, inserting the new separators into parent. Returns 0 or -ENOMEM; on
 * error nothing changed.
 */
static int node_split_child(struct btree_node *parent, size_t index)
{
	struct btree_node *child = child_slot(parent, index)->node;
	size_t count = child->count;
	size_t *prefix = malloc((count + 1) * sizeof *prefix);
	size_t *cuts = malloc(count * sizeof *cuts);
	struct btree_node **pieces = NULL;
	struct btree_entry *separators = NULL;
	size_t cut_count = 0, made = 0;
	int rc = -ENOMEM;
	if (!prefix || !cuts)
		goto cleanup;
	prefix[0] = 0;
	for (size_t i = 0; i < count; i++)
		prefix[i + 1] = prefix[i] + entry_encoded_size(child->leaf, &child->entries[i]);
	plan_split(child, prefix, 0, count, cuts, &cut_count);
	rc = 0;
	if (cut_count == 0)
		goto cleanup;

	/* Allocate everything first, so a failure changes nothing. */
	rc = -ENOMEM;
	pieces = calloc(cut_count, sizeof *pieces);
	separators = calloc(cut_count, sizeof *separators);
	if (!pieces || !separators)
		goto cleanup;
	for (made = 0; made < cut_count; made++) {
		size_t begin = child->leaf ? cuts[made] : cuts[made] + 1;
		size_t end = made + 1 < cut_count ? cuts[made + 1] : count;
		pieces[made] = node_new(child->leaf, child->layout);
		if (!pieces[made] || node_reserve(pieces[made], end - begin + 1))
			goto undo;
		if (child->leaf) {
			const struct btree_entry *first = &child->entries[cuts[made]];
			if (entry_make(first->key, first->key_size, NULL, 0, &separators[made]))
				goto undo;
		}
	}
	if (node_reserve(parent, parent->count + cut_count))
		goto undo;

	/* Move entries; nothing below can fail. */
	for (size_t p = 0; p < cut_count; p++) {
		struct btree_node *piece = pieces[p];
		size_t begin = child->leaf ? cuts[p] : cuts[p] + 1;
		size_t end = p + 1 < cut_count ? cuts[p + 1] : count;
		if (!child->leaf) {
			struct btree_entry *raised = &child->entries[cuts[p]];
			piece->first_child = raised->child;
			separators[p] = (struct btree_entry){ .key = raised->key,
							      .key_size = raised->key_size };
		}
		memcpy(piece->entries, child->entries + begin, (end - begin) * sizeof *piece->entries);
		piece->count = end - begin;
		piece->encoded_size = range_size(child, prefix, begin, end);
	}
	child->count = cuts[0];
	child->encoded_size = range_size(child, prefix, 0, cuts[0]);
	for (size_t p = 0; p < cut_count; p++) {
		separators[p].child = (struct btree_child){ { 0, 0 }, pieces[p] };
		separators[p].value = NULL;
		separators[p].value_size = 0;
		node_insert_entry(parent, index + p, separators[p]);
	}
	rc = 0;
	goto cleanup;
undo:
	for (size_t p = 0; p < cut_count; p++) {
		node_free(pieces[p]);
		free((void *)separators[p].key);
	}
cleanup:
	free(prefix);
	free(cuts);
	free(pieces);
	free(separators);
	return rc;
}

/*
 * Merges parent's children left_index and left_index + 1 (both in memory)
 * into the left one, pulling the separator down for internal nodes. The
 * result may be oversized. Returns 0 or -ENOMEM (nothing changed).
 */
static int node_merge_children(struct btree_node *parent, size_t left_index)
{
	struct btree_node *left = child_slot(parent, left_index)->node;
	struct btree_node *right = child_slot(parent, left_index + 1)->node;
	struct btree_entry *separator = &parent->entries[left_index];
	assert(left && right && left->leaf == right->leaf);
	int rc = node_reserve(left, left->count + right->count + (left->leaf ? 0 : 1));
	if (rc)
		return rc;
	if (!left->leaf) {
		struct btree_entry pulled = { .key = separator->key,
					      .key_size = separator->key_size,
					      .child = right->first_child };
		left->entries[left->count++] = pulled;
		left->encoded_size += entry_encoded_size(false, &pulled);
		separator->key = NULL; /* moved into left */
		right->first_child = (struct btree_child){ { 0, 0 }, NULL };
	}
	memcpy(left->entries + left->count, right->entries, right->count * sizeof *right->entries);
	left->count += right->count;
	left->encoded_size += right->encoded_size - node_empty_size(right->leaf);
	right->count = 0;
	node_free(right);
	separator->child.node = NULL;
	node_remove_entry(parent, left_index);
	return 0;
}

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
	struct btree_node *child = child_slot(parent, index)->node;
	struct btree_child *sibling = child_slot(parent, index > 0 ? index - 1 : index + 1);
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
			node_empty_size(child->leaf);
	if (!child->leaf)
		merged += entry_encoded_size(false, &parent->entries[left_index]);
	if (merged > node_target(child) && !required)
		return 0;
	if (!sibling->node) {
		int rc = node_copy_view(&tree->scratch, &sibling->node);
		if (rc)
			return rc;
	}
	int rc = node_merge_children(parent, left_index);
	if (rc)
		return rc;
	if (node_oversized(child_slot(parent, left_index)->node))
		return node_split_child(parent, left_index);
	return 0;
}

/* True if the node breaks a rule that a flush must not write (invariants 2–3). */
static bool node_needs_fix(const struct btree_node *node)
{
	return node_oversized(node) || node->count == 0;
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
	struct btree_node *child = child_slot(parent, index)->node;
	assert(child);
	if (node_oversized(child))
		return node_split_child(parent, index);
	if (parent->count == 0)
		return 0; /* no sibling: the parent itself is fixed by its own parent */
	if (child->leaf && child->count == 0) {
		node_free(child);
		if (index == 0) {
			parent->first_child = parent->entries[0].child;
			parent->entries[0].child.node = NULL;
			node_remove_entry(parent, 0);
		} else {
			node_remove_entry(parent, index - 1);
		}
		return 0;
	}
	bool required = !child->leaf && child->count == 0;
	if (required || (!required_only && node_underfull(child)))
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
			struct btree_node *child = child_slot(node, i)->node;
			if (child) {
				int rc = node_normalize(tree, child);
				if (rc)
					return rc;
			}
		}
		bool changed = false;
		for (size_t i = 0; i <= node->count && !changed; i++) {
			struct btree_node *child = child_slot(node, i)->node;
			if (!child || !node_needs_fix(child) ||
			    (node->count == 0 && !node_oversized(child)))
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
		if (node_oversized(root)) {
			struct btree_node *top = node_new(false, root->layout);
			if (!top)
				return -ENOMEM;
			top->first_child = tree->root;
			int rc = node_split_child(top, 0);
			if (rc) {
				top->first_child.node = NULL;
				node_free(top);
				return rc;
			}
			tree->root = (struct btree_child){ { 0, 0 }, top };
		} else if (!root->leaf && root->count == 0) {
			tree->root = root->first_child;
			root->first_child.node = NULL;
			node_free(root);
		} else if (root->leaf && root->count == 0) {
			node_free(root);
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
		node_remove_entry(leaf, index);
		change->changed = true;
		return 0;
	}
	if (found && found->value_size == change->value_size &&
	    (change->value_size == 0 || memcmp(found->value, change->value, change->value_size) == 0))
		return 0;
	struct btree_entry entry;
	int rc = entry_make(change->key, change->key_size, change->value, change->value_size, &entry);
	if (rc)
		return rc;
	if (found) {
		leaf->encoded_size -= entry_encoded_size(true, found);
		leaf->encoded_size += entry_encoded_size(true, &entry);
		free((void *)found->key);
		*found = entry;
	} else {
		rc = node_reserve(leaf, leaf->count + 1);
		if (rc) {
			free((void *)entry.key);
			return rc;
		}
		node_insert_entry(leaf, index, entry);
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
	rc = node_modify(tree, child_slot(node, index), change);
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
		tree->root.node = node_new(true, tree->layout);
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
	node_free(tree->root.node);
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

int btree_get(struct btree *tree, const void *key, size_t key_size, struct buf *value_out)
{
	if (key_size > BTREE_MAX_KEY)
		return -ENOENT;
	struct btree_child slot = tree->root;
	for (;;) {
		const struct btree_node *node = slot.node;
		if (!node) {
			if (block_address_is_null(slot.address))
				return -ENOENT;
			int rc = btree_node_read(tree->pager, tree->append, slot.address, &tree->scratch);
			if (rc)
				return rc;
			node = &tree->scratch;
		}
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

/* ---- flush -------------------------------------------------------------- */

/* Encodes a node in the packed layout (FORMAT.md §5); its children all have addresses. */
static int node_pack(const struct btree_node *node, struct buf *out)
{
	size_t count = node->count, columns = node->leaf ? 3 : 2;
	size_t addresses = node->leaf ? 0 : count + 1;
	buf_reset(out);
	int rc = buf_reserve(out, node->encoded_size + 2 * count);
	if (rc)
		return rc;
	uint8_t *base = out->data;
	base[0] = node->leaf ? NODE_LEAF : NODE_INTERNAL;
	base[1] = BTREE_PACKED;
	store_u16(base + 2, count);
	uint8_t *prefixes = base + NODE_HEADER_SIZE, *suffixes = prefixes + 2 * count;
	uint8_t *value_sizes = suffixes + 2 * count;
	uint8_t *at = prefixes + 2 * columns * count;
	bool equal_values = true;
	for (size_t i = 0; i < count; i++) {
		const struct btree_entry *entry = &node->entries[i];
		size_t prefix = 0;
		if (i > 0) {
			const struct btree_entry *previous = &node->entries[i - 1];
			size_t common = previous->key_size < entry->key_size ? previous->key_size
									 : entry->key_size;
			while (prefix < common && previous->key[prefix] == entry->key[prefix])
				prefix++;
		}
		store_u16(prefixes + 2 * i, prefix);
		store_u16(suffixes + 2 * i, entry->key_size - prefix);
		memcpy(at, entry->key + prefix, entry->key_size - prefix);
		at += entry->key_size - prefix;
		if (node->leaf) {
			store_u16(value_sizes + 2 * i, entry->value_size);
			equal_values = equal_values && entry->value_size == node->entries[0].value_size;
		}
	}
	if (node->leaf) {
		size_t value_size = node->entries[0].value_size;
		for (size_t i = 0; i < count; i++) {
			const struct btree_entry *entry = &node->entries[i];
			if (equal_values) {
				for (size_t b = 0; b < value_size; b++)
					at[b * count + i] = entry->value[b];
			} else {
				memcpy(at, entry->value, entry->value_size);
				at += entry->value_size;
			}
		}
		if (equal_values)
			at += value_size * count;
	} else {
		for (size_t i = 0; i < addresses; i++) {
			struct block_address address = child_slot((struct btree_node *)node, i)->address;
			uint8_t bytes[BLOCK_ADDRESS_SIZE];
			buf_store_u64(bytes, address.segment);
			buf_store_u64(bytes + 8, address.offset);
			for (size_t b = 0; b < BLOCK_ADDRESS_SIZE; b++)
				at[b * addresses + i] = bytes[b];
		}
		at += addresses * BLOCK_ADDRESS_SIZE;
	}
	out->size = (size_t)(at - base);
	assert(out->size <= node->encoded_size + 2 * count);
	return 0;
}

int btree_node_encode(const struct btree_node *node, struct buf *out)
{
	if (node->layout == BTREE_PACKED)
		return node_pack(node, out);
	buf_reset(out);
	int rc = buf_reserve(out, node->encoded_size);
	if (rc)
		return rc;
	buf_put_u8(out, node->leaf ? NODE_LEAF : NODE_INTERNAL);
	buf_put_u8(out, BTREE_PLAIN);
	buf_put_u16(out, (uint16_t)node->count);
	if (!node->leaf)
		codec_put_address(out, node->first_child.address);
	for (size_t i = 0; i < node->count; i++) {
		const struct btree_entry *entry = &node->entries[i];
		buf_put_u16(out, entry->key_size);
		buf_append(out, entry->key, entry->key_size);
		if (node->leaf) {
			buf_put_u16(out, entry->value_size);
			buf_append(out, entry->value, entry->value_size);
		} else {
			codec_put_address(out, entry->child.address);
		}
	}
	/* Every put above fits in the reserved space, so none of them failed. */
	assert(out->size == node->encoded_size);
	return 0;
}

/* Where written nodes go: the manifest append of a publish, or a segment being written. */
struct node_sink {
	struct pager_append *append;
	struct pager_segment *segment;
};

/* Encodes node and writes it as one block: plain nodes uncompressed, packed ones with zstd. */
static int node_store(struct node_sink sink, const struct btree_node *node, struct buf *encoded,
		      struct block_address *address_out)
{
	int rc = btree_node_encode(node, encoded);
	if (rc)
		return rc;
	enum codec_kind codec = node->layout == BTREE_PACKED ? CODEC_ZSTD : CODEC_NONE;
	if (sink.segment)
		return pager_segment_block(sink.segment, BLOCK_NODE, codec, encoded->data, encoded->size,
					   address_out);
	return pager_append_block(sink.append, BLOCK_NODE, codec, encoded->data, encoded->size,
				  address_out);
}

/*
 * Appends the in-memory nodes below and including node, children first,
 * storing each child's new address in its slot (the node pointers stay until
 * the whole flush succeeded).
 */
static int node_write(struct btree_node *node, struct pager_append *append, struct buf *encoded,
		      struct block_address *address_out)
{
	assert(node->count > 0 && !node_oversized(node));
	if (!node->leaf) {
		for (size_t i = 0; i <= node->count; i++) {
			struct btree_child *slot = child_slot(node, i);
			if (slot->node) {
				int rc = node_write(slot->node, append, encoded, &slot->address);
				if (rc)
					return rc;
			}
		}
	}
	struct node_sink sink = { append, NULL };
	return node_store(sink, node, encoded, address_out);
}

int btree_flush(struct btree *tree, struct pager_append *append, struct block_address *root_out)
{
	if (!tree->modified) {
		node_free(tree->root.node);
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
	node_free(tree->root.node);
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
		slot = *child_slot(node, level->index);
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
		int rc = iterator_descend(iterator, *child_slot(node, level->index), NULL, 0);
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

/* ---- builder ------------------------------------------------------------ */

/*
 * Each level holds at most two unwritten nodes: `pending`, full, waiting to
 * learn whether the last node of its level will need some of its entries,
 * and `current`, being filled. A node is written when a third one starts
 * (children always before their parent, left to right); its lowest key and
 * address then go up one level. `lows` are the smallest keys under each node
 * (owned), the separators their parent will hold.
 */
struct builder_level {
	struct btree_node *pending;
	struct btree_node *current;
	struct btree_entry pending_low;
	struct btree_entry current_low;
};

struct btree_builder {
	struct node_sink sink;
	enum btree_layout layout;
	struct builder_level *levels;
	size_t level_count;
	struct buf last_key;
	bool has_last_key;
	int error;            /* sticky: a failed add poisons the builder */
	struct buf encoded;
};

static int builder_open(struct node_sink sink, enum btree_layout layout, struct btree_builder **out)
{
	struct btree_builder *builder = calloc(1, sizeof *builder);
	if (!builder)
		return -ENOMEM;
	builder->sink = sink;
	builder->layout = layout;
	buf_init(&builder->last_key);
	buf_init(&builder->encoded);
	*out = builder;
	return 0;
}

int btree_builder_open(struct pager_append *append, struct btree_builder **out)
{
	return builder_open((struct node_sink){ append, NULL }, BTREE_PLAIN, out);
}

int btree_builder_open_layout(struct pager_append *append, enum btree_layout layout,
			      struct btree_builder **out)
{
	return builder_open((struct node_sink){ append, NULL }, layout, out);
}

int btree_builder_open_segment(struct pager_segment *segment, enum btree_layout layout,
			       struct btree_builder **out)
{
	return builder_open((struct node_sink){ NULL, segment }, layout, out);
}

void btree_builder_free(struct btree_builder *builder)
{
	if (!builder)
		return;
	for (size_t i = 0; i < builder->level_count; i++) {
		struct builder_level *level = &builder->levels[i];
		node_free(level->pending);
		node_free(level->current);
		free((void *)level->pending_low.key);
		free((void *)level->current_low.key);
	}
	free(builder->levels);
	buf_free(&builder->last_key);
	buf_free(&builder->encoded);
	free(builder);
}

static int builder_level(struct btree_builder *builder, size_t index, struct builder_level **out)
{
	if (index == builder->level_count) {
		struct builder_level *levels =
			realloc(builder->levels, (index + 1) * sizeof *levels);
		if (!levels)
			return -ENOMEM;
		memset(&levels[index], 0, sizeof levels[index]);
		builder->levels = levels;
		builder->level_count = index + 1;
	}
	*out = &builder->levels[index];
	return 0;
}

static int builder_push(struct btree_builder *builder, size_t level_index,
			const struct btree_entry *low, struct block_address child);

/* Writes node (taking ownership of it and of low) and hands it to the level above. */
static int builder_write(struct btree_builder *builder, size_t level_index,
			 struct btree_node *node, struct btree_entry low)
{
	struct block_address address;
	int rc = node_store(builder->sink, node, &builder->encoded, &address);
	node_free(node);
	if (rc == 0)
		rc = builder_push(builder, level_index + 1, &low, address);
	free((void *)low.key);
	return rc;
}

/* Starts a new current node on a level: the old pending is written, current becomes pending. */
static int builder_shift(struct btree_builder *builder, size_t level_index)
{
	struct builder_level *level = &builder->levels[level_index];
	if (level->pending) {
		struct btree_node *pending = level->pending;
		struct btree_entry low = level->pending_low;
		level->pending = NULL;
		level->pending_low = (struct btree_entry){ 0 };
		int rc = builder_write(builder, level_index, pending, low);
		if (rc)
			return rc;
		level = &builder->levels[level_index]; /* the push may have grown the array */
	}
	level->pending = level->current;
	level->pending_low = level->current_low;
	level->current = NULL;
	level->current_low = (struct btree_entry){ 0 };
	return 0;
}

/* Adds a child (with the smallest key under it) to the internal level level_index. */
static int builder_push(struct btree_builder *builder, size_t level_index,
			const struct btree_entry *low, struct block_address child)
{
	struct builder_level *level;
	int rc = builder_level(builder, level_index, &level);
	if (rc)
		return rc;
	struct btree_entry entry;
	rc = entry_make(low->key, low->key_size, NULL, 0, &entry);
	if (rc)
		return rc;
	entry.value = NULL;
	entry.child.address = child;
	struct btree_node *current = level->current;
	if (current && current->encoded_size + entry_encoded_size(false, &entry) > node_target(current)) {
		rc = builder_shift(builder, level_index);
		if (rc)
			goto cleanup;
		level = &builder->levels[level_index];
		current = NULL;
	}
	if (!current) {
		current = node_new(false, builder->layout);
		if (!current) {
			rc = -ENOMEM;
			goto cleanup;
		}
		current->first_child.address = child;
		entry.child.address = (struct block_address){ 0, 0 };
		level->current = current;
		level->current_low = entry; /* the key becomes the node's low */
		return 0;
	}
	rc = node_reserve(current, current->count + 1);
	if (rc)
		goto cleanup;
	node_insert_entry(current, current->count, entry);
	return 0;
cleanup:
	free((void *)entry.key);
	return rc;
}

int btree_builder_add(struct btree_builder *builder, const void *key, size_t key_size,
		      const void *value, size_t value_size)
{
	if (builder->error)
		return builder->error;
	if (key_size > BTREE_MAX_KEY)
		return -ENAMETOOLONG;
	if (value_size > BTREE_MAX_VALUE)
		return -E2BIG;
	if (builder->has_last_key &&
	    btree_key_compare(builder->last_key.data, builder->last_key.size, key, key_size) >= 0)
		return -EINVAL;
	struct builder_level *level;
	struct btree_entry entry = { 0 };
	int rc = builder_level(builder, 0, &level);
	if (rc == 0)
		rc = entry_make(key, key_size, value, value_size, &entry);
	if (rc)
		return rc;
	struct btree_node *current = level->current;
	if (current && current->encoded_size + entry_encoded_size(true, &entry) > node_target(current)) {
		rc = builder_shift(builder, 0);
		if (rc)
			goto poison;
		level = &builder->levels[0];
		current = NULL;
	}
	if (!current) {
		current = node_new(true, builder->layout);
		if (!current) {
			rc = -ENOMEM;
			goto poison;
		}
		level->current = current;
		rc = entry_make(key, key_size, NULL, 0, &level->current_low);
		if (rc)
			goto poison;
	}
	rc = node_reserve(current, current->count + 1);
	if (rc)
		goto poison;
	node_insert_entry(current, current->count, entry);
	buf_reset(&builder->last_key);
	rc = buf_append(&builder->last_key, key, key_size);
	if (rc) {
		builder->error = rc;
		return rc;
	}
	builder->has_last_key = true;
	return 0;
poison:
	free((void *)entry.key);
	builder->error = rc;
	return rc;
}

/*
 * Finishes one level: if its last node is an internal node without keys or
 * under a quarter full, it is merged with the pending one (and split again if
 * that does not fit); then the remaining nodes are written and pushed up.
 * Sets *root_out and *done when this level turns out to be the top.
 */
static int builder_finish_level(struct btree_builder *builder, size_t level_index,
				struct block_address *root_out, bool *done)
{
	struct builder_level *level = &builder->levels[level_index];
	bool top = level_index + 1 == builder->level_count;
	if (!level->pending && !level->current) {
		assert(top);
		*done = true;
		return 0;
	}
	/* A temporary parent holding this level's nodes, so split/merge can be reused. */
	struct btree_node *parent = node_new(false, builder->layout);
	if (!parent || node_reserve(parent, 1)) {
		node_free(parent);
		return -ENOMEM;
	}
	struct btree_entry first_low;
	int rc = 0;
	if (level->pending) {
		first_low = level->pending_low;
		parent->first_child.node = level->pending;
		if (level->current) {
			struct btree_entry entry = level->current_low;
			entry.child = (struct btree_child){ { 0, 0 }, level->current };
			node_insert_entry(parent, 0, entry);
		}
	} else {
		first_low = level->current_low;
		parent->first_child.node = level->current;
	}
	level->pending = level->current = NULL;
	level->pending_low = level->current_low = (struct btree_entry){ 0 };

	if (parent->count == 1) {
		struct btree_node *last = parent->entries[0].child.node;
		if ((!last->leaf && last->count == 0) || node_underfull(last)) {
			rc = node_merge_children(parent, 0);
			if (rc == 0 && node_oversized(parent->first_child.node))
				rc = node_split_child(parent, 0);
			if (rc)
				goto cleanup;
		}
	}
	if (top && parent->count == 0) {
		struct btree_node *only = parent->first_child.node;
		assert(only->leaf || only->count > 0);
		rc = node_store(builder->sink, only, &builder->encoded, root_out);
		*done = true;
		goto cleanup;
	}
	for (size_t i = 0; i <= parent->count; i++) {
		struct btree_child *slot = child_slot(parent, i);
		struct btree_entry low = { 0 };
		const struct btree_entry *source = i == 0 ? &first_low : &parent->entries[i - 1];
		rc = entry_make(source->key, source->key_size, NULL, 0, &low);
		if (rc)
			goto cleanup;
		struct btree_node *node = slot->node;
		slot->node = NULL;
		rc = builder_write(builder, level_index, node, low);
		if (rc)
			goto cleanup;
	}
cleanup:
	free((void *)first_low.key);
	node_free(parent);
	return rc;
}

int btree_builder_finish(struct btree_builder *builder, struct block_address *root_out)
{
	int rc = builder->error;
	struct block_address root = { 0, 0 };
	bool done = builder->level_count == 0;
	for (size_t i = 0; rc == 0 && !done; i++)
		rc = builder_finish_level(builder, i, &root, &done);
	if (rc == 0)
		*root_out = root;
	btree_builder_free(builder);
	return rc;
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
	if (node_oversized(&view)) {
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
		rc = verify_node(walk, child_slot(&view, i)->address, depth + 1, child_lower,
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
		rc = walk_nodes(walk, child_slot(&view, i)->address);
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
