/*
 * btree_node — one node of the B+tree (docs/FORMAT.md §5): sizes and fill
 * targets, in-memory nodes and their entries, decoding a published node (plain
 * or packed) into a read-only view, encoding and storing a node as one block,
 * and splitting and merging children of an in-memory parent. Below the tree
 * (btree.c: put, delete, flush, iterators) and the bulk builder
 * (btree_build.c), which both work through these.
 *
 * Invariants (btree.c numbers the tree's):
 *   1. An in-memory node owns its entries' bytes (one allocation per entry:
 *      key, then value); a read-only view points into the block payload it was
 *      decoded from and owns nothing but that payload.
 *   2. A decoded node is checked before it is used: sizes, key order, and that
 *      every child lies below its parent in the file (no cycles in a damaged
 *      file); a failed check is -EIO and a log line, never a wrong entry.
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

/* ---- keys and sizes ---------------------------------------------------- */

/* ---- node memory ------------------------------------------------------- */

/* ---- reading published nodes ------------------------------------------- */

/* ---- splitting and merging children ------------------------------------ */

size_t btree_node_empty_size(bool leaf)
{
	return leaf ? LEAF_EMPTY_SIZE : INTERNAL_EMPTY_SIZE;
}
size_t btree_entry_encoded_size(bool leaf, const struct btree_entry *entry)
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
size_t btree_node_target(const struct btree_node *node)
{
	if (node->layout == BTREE_PLAIN && node->leaf)
		return BTREE_LEAF_TARGET;
	return layout_target(node->layout);
}
/* Merge below a quarter of the target when the result fits. */
bool btree_node_underfull(const struct btree_node *node)
{
	return node->encoded_size < btree_node_target(node) / 4;
}
bool btree_node_oversized(const struct btree_node *node)
{
	return node->encoded_size > btree_node_target(node) && node->count > 1;
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
struct btree_child *btree_node_child_slot(struct btree_node *node, size_t index)
{
	assert(!node->leaf && index <= node->count);
	return index == 0 ? &node->first_child : &node->entries[index - 1].child;
}
struct btree_node *btree_node_new(bool leaf, unsigned layout)
{
	struct btree_node *node = calloc(1, sizeof *node);
	if (!node)
		return NULL;
	node->leaf = leaf;
	node->layout = (uint8_t)layout;
	node->owns_entries = true;
	node->encoded_size = btree_node_empty_size(leaf);
	return node;
}
int btree_node_reserve(struct btree_node *node, size_t count)
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
void btree_node_free(struct btree_node *node)
{
	if (!node)
		return;
	assert(node->owns_entries);
	if (!node->leaf) {
		btree_node_free(node->first_child.node);
		for (size_t i = 0; i < node->count; i++)
			btree_node_free(node->entries[i].child.node);
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
int btree_entry_make(const void *key, size_t key_size, const void *value, size_t value_size,
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
void btree_node_remove_entry(struct btree_node *node, size_t index)
{
	assert(index < node->count);
	node->encoded_size -= btree_entry_encoded_size(node->leaf, &node->entries[index]);
	if (node->owns_entries)
		free((void *)node->entries[index].key);
	memmove(node->entries + index, node->entries + index + 1,
		(node->count - index - 1) * sizeof *node->entries);
	node->count--;
}
/* Inserts entry at index; the capacity must already be reserved. */
void btree_node_insert_entry(struct btree_node *node, size_t index, struct btree_entry entry)
{
	assert(node->count < node->capacity && index <= node->count);
	memmove(node->entries + index + 1, node->entries + index,
		(node->count - index) * sizeof *node->entries);
	node->entries[index] = entry;
	node->count++;
	node->encoded_size += btree_entry_encoded_size(node->leaf, &entry);
}
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
	size_t size = btree_node_empty_size(view->leaf);
	for (size_t i = 0; i < view->count; i++) {
		const struct btree_entry *entry = &view->entries[i];
		if (i > 0 && btree_key_compare(entry[-1].key, entry[-1].key_size, entry->key, entry->key_size) >= 0)
			return -EIO;
		size += btree_entry_encoded_size(view->leaf, entry);
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
	int rc = btree_node_reserve(view, count);
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
int btree_node_copy_view(const struct btree_node *view, struct btree_node **out)
{
	struct btree_node *node = btree_node_new(view->leaf, view->layout);
	if (!node)
		return -ENOMEM;
	int rc = btree_node_reserve(node, view->count + 1);
	if (rc)
		goto cleanup;
	node->first_child = view->first_child;
	for (size_t i = 0; i < view->count; i++) {
		const struct btree_entry *entry = &view->entries[i];
		struct btree_entry copy;
		rc = btree_entry_make(entry->key, entry->key_size, entry->value, entry->value_size, &copy);
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
	btree_node_free(node);
	return rc;
}
/* Encoded size of a node holding entries [begin, end) of node (prefix: running entry sizes). */
static size_t range_size(const struct btree_node *node, const size_t *prefix, size_t begin,
			 size_t end)
{
	return btree_node_empty_size(node->leaf) + prefix[end] - prefix[begin];
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
	if (range_size(node, prefix, begin, end) <= btree_node_target(node) || end - begin <= 1)
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
int btree_node_split_child(struct btree_node *parent, size_t index)
{
	struct btree_node *child = btree_node_child_slot(parent, index)->node;
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
		prefix[i + 1] = prefix[i] + btree_entry_encoded_size(child->leaf, &child->entries[i]);
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
		pieces[made] = btree_node_new(child->leaf, child->layout);
		if (!pieces[made] || btree_node_reserve(pieces[made], end - begin + 1))
			goto undo;
		if (child->leaf) {
			const struct btree_entry *first = &child->entries[cuts[made]];
			if (btree_entry_make(first->key, first->key_size, NULL, 0, &separators[made]))
				goto undo;
		}
	}
	if (btree_node_reserve(parent, parent->count + cut_count))
		goto undo;

/* ---- writing a node ---------------------------------------------------- */

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
		btree_node_insert_entry(parent, index + p, separators[p]);
	}
	rc = 0;
	goto cleanup;
undo:
	for (size_t p = 0; p < cut_count; p++) {
		btree_node_free(pieces[p]);
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
int btree_node_merge_children(struct btree_node *parent, size_t left_index)
{
	struct btree_node *left = btree_node_child_slot(parent, left_index)->node;
	struct btree_node *right = btree_node_child_slot(parent, left_index + 1)->node;
	struct btree_entry *separator = &parent->entries[left_index];
	assert(left && right && left->leaf == right->leaf);
	int rc = btree_node_reserve(left, left->count + right->count + (left->leaf ? 0 : 1));
	if (rc)
		return rc;
	if (!left->leaf) {
		struct btree_entry pulled = { .key = separator->key,
					      .key_size = separator->key_size,
					      .child = right->first_child };
		left->entries[left->count++] = pulled;
		left->encoded_size += btree_entry_encoded_size(false, &pulled);
		separator->key = NULL; /* moved into left */
		right->first_child = (struct btree_child){ { 0, 0 }, NULL };
	}
	memcpy(left->entries + left->count, right->entries, right->count * sizeof *right->entries);
	left->count += right->count;
	left->encoded_size += right->encoded_size - btree_node_empty_size(right->leaf);
	right->count = 0;
	btree_node_free(right);
	separator->child.node = NULL;
	btree_node_remove_entry(parent, left_index);
	return 0;
}
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
			struct block_address address = btree_node_child_slot((struct btree_node *)node, i)->address;
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
/* Encodes node and writes it as one block: plain nodes uncompressed, packed ones with zstd. */
int btree_node_store(struct btree_node_sink sink, const struct btree_node *node, struct buf *encoded,
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
int btree_key_compare(const uint8_t *a, size_t a_size, const uint8_t *b, size_t b_size)
{
	size_t common = a_size < b_size ? a_size : b_size;
	int order = common ? memcmp(a, b, common) : 0;
	if (order)
		return order;
	return (a_size > b_size) - (a_size < b_size);
}
