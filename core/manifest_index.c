/*
 * manifest_index — the version index: a persistent radix map of FIXED depth
 * (docs/FORMAT.md §16.1) from version to the last root record of that
 * version. A lookup reads exactly depth + 1 nodes and an insert writes
 * exactly depth + 1 nodes at any history depth (an insert reads the nodes of
 * its path that exist: all of them, except for the first version of a new
 * leaf). A B+tree grows a level every ~100× more commits, which would make
 * the cost of a commit and of resolving an old version depend on history;
 * this index does not (DESIGN invariants 2 and 3).
 *
 * Invariants kept:
 *   1. Every path from the root to a leaf has exactly depth + 1 nodes; the
 *      root is at level depth, leaves at level 0. The null address is the
 *      empty index.
 *   2. Within a node, keys are strictly increasing (memcmp); no node is empty.
 *   3. An entry lives under the slots its version's bytes determine, so
 *      lookups never search.
 *   4. Nodes are copy-on-write: an insert appends a new path; published
 *      nodes are never rewritten.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "manifest_int.h"

#define NODE_HEADER_SIZE 8
#define ADDRESS_SIZE BLOCK_ADDRESS_SIZE

struct index_node {
	uint8_t level;
	size_t count;
	struct buf entries;   /* count × (1 + 16) bytes: slot, address */
};

#define ENTRY_SIZE (1 + ADDRESS_SIZE)
#define INDEX_KIND_VERSIONS 1

static void node_init(struct index_node *node, unsigned level)
{
	node->level = (uint8_t)level;
	node->count = 0;
	buf_init(&node->entries);
}

/* The slot of version at a level (0 = leaf). */
static uint8_t path_slot(uint64_t version, unsigned level)
{
	return (uint8_t)(version >> (8 * level));
}

static int node_read(struct pager *pager, struct pager_append *append, struct block_address address,
		     unsigned level, struct index_node *out)
{
	struct buf raw;
	buf_init(&raw);
	node_init(out, level);
	int rc = append ? pager_append_read(append, address, BLOCK_INDEX, &raw)
			: pager_read(pager, address, BLOCK_INDEX, &raw);
	if (rc < 0)
		goto out;
	if (raw.size < NODE_HEADER_SIZE || raw.data[0] != level || raw.data[1] != INDEX_KIND_VERSIONS ||
	    raw.data[2] != 0 || raw.data[3] != 0) {
		rc = -EIO;
		goto out;
	}
	size_t count = buf_load_u32(raw.data + 4);
	if (count == 0 || count > 256 || raw.size != NODE_HEADER_SIZE + count * ENTRY_SIZE) {
		rc = -EIO;
		goto out;
	}
	/* slots strictly increasing (invariant 2) */
	for (size_t i = 1; i < count; i++)
		if (raw.data[NODE_HEADER_SIZE + (i - 1) * ENTRY_SIZE] >= raw.data[NODE_HEADER_SIZE + i * ENTRY_SIZE]) {
			rc = -EIO;
			goto out;
		}
	rc = buf_append(&out->entries, raw.data + NODE_HEADER_SIZE, count * ENTRY_SIZE);
	if (rc < 0)
		goto out;
	out->count = count;
	io_count_rows(IO_MANIFEST, count);
out:
	if (rc == -EIO)
		fprintf(stderr, "graphfs: manifest: damaged version index node at offset %llu\n",
			(unsigned long long)address.offset);
	buf_free(&raw);
	return rc;
}

/* Index of slot, or -(insertion point) - 1. */
static long node_search(const struct index_node *node, uint8_t slot)
{
	size_t low = 0, high = node->count;
	while (low < high) {
		size_t middle = (low + high) / 2;
		uint8_t at = node->entries.data[middle * ENTRY_SIZE];
		if (at == slot)
			return (long)middle;
		if (at < slot)
			low = middle + 1;
		else
			high = middle;
	}
	return -(long)low - 1;
}

static struct block_address address_load(const uint8_t *bytes)
{
	struct block_address address = { buf_load_u64(bytes), buf_load_u64(bytes + 8) };
	return address;
}

static void address_store(uint8_t *bytes, struct block_address address)
{
	buf_store_u64(bytes, address.segment);
	buf_store_u64(bytes + 8, address.offset);
}

static struct block_address node_value(const struct index_node *node, size_t index)
{
	return address_load(node->entries.data + index * ENTRY_SIZE + 1);
}

static int node_set(struct index_node *node, uint8_t slot, struct block_address value)
{
	long found = node_search(node, slot);
	if (found >= 0) {
		address_store(node->entries.data + (size_t)found * ENTRY_SIZE + 1, value);
		return 0;
	}
	size_t at = (size_t)(-found - 1);
	int rc = buf_reserve(&node->entries, ENTRY_SIZE);
	if (rc < 0)
		return rc;
	uint8_t *base = node->entries.data + at * ENTRY_SIZE;
	memmove(base + ENTRY_SIZE, base, (node->count - at) * ENTRY_SIZE);
	base[0] = slot;
	address_store(base + 1, value);
	node->entries.size += ENTRY_SIZE;
	node->count++;
	return 0;
}

static int node_append(struct pager_append *append, const struct index_node *node,
		       struct block_address *address_out)
{
	struct buf raw;
	buf_init(&raw);
	int rc;
	if ((rc = buf_put_u8(&raw, node->level)) < 0 || (rc = buf_put_u8(&raw, INDEX_KIND_VERSIONS)) < 0 ||
	    (rc = buf_put_u16(&raw, 0)) < 0 || (rc = buf_put_u32(&raw, (uint32_t)node->count)) < 0 ||
	    (rc = buf_append(&raw, node->entries.data, node->entries.size)) < 0)
		goto out;
	rc = pager_append_block(append, BLOCK_INDEX, CODEC_NONE, raw.data, raw.size, address_out);
out:
	buf_free(&raw);
	return rc;
}

int manifest_versions_get(struct pager *pager, struct pager_append *append,
			  struct block_address root, uint64_t version, struct block_address *out)
{
	if (version >= MANIFEST_VERSION_LIMIT)
		return -ENOENT;
	struct block_address address = root;
	for (unsigned level = MANIFEST_VERSIONS_DEPTH;; level--) {
		if (block_address_is_null(address))
			return -ENOENT;
		struct index_node node;
		int rc = node_read(pager, append, address, level, &node);
		if (rc < 0)
			return rc;
		long found = node_search(&node, path_slot(version, level));
		if (found >= 0)
			address = node_value(&node, (size_t)found);
		buf_free(&node.entries);
		if (found < 0)
			return -ENOENT;
		if (level == 0) {
			*out = address;
			return 0;
		}
	}
}

int manifest_versions_put(struct pager *pager, struct pager_append *append,
			  struct block_address root, uint64_t version, struct block_address value,
			  struct block_address *root_out)
{
	if (version >= MANIFEST_VERSION_LIMIT)
		return -EOVERFLOW;
	struct index_node nodes[MANIFEST_VERSIONS_DEPTH + 1];
	unsigned loaded = 0; /* nodes[DEPTH - i] for i < loaded are initialised */
	int rc = 0;
	struct block_address address = root;
	for (unsigned level = MANIFEST_VERSIONS_DEPTH;; level--) {
		if (block_address_is_null(address)) {
			node_init(&nodes[level], level);
		} else {
			rc = node_read(pager, append, address, level, &nodes[level]);
			if (rc < 0)
				goto out;
		}
		loaded++;
		if (level == 0)
			break;
		long found = node_search(&nodes[level], path_slot(version, level));
		address = found >= 0 ? node_value(&nodes[level], (size_t)found) : (struct block_address){ 0, 0 };
	}
	struct block_address child = value;
	for (unsigned level = 0; level <= MANIFEST_VERSIONS_DEPTH; level++) {
		if ((rc = node_set(&nodes[level], path_slot(version, level), child)) < 0 ||
		    (rc = node_append(append, &nodes[level], &child)) < 0)
			goto out;
	}
	*root_out = child;
out:
	for (unsigned i = 0; i < loaded; i++)
		buf_free(&nodes[MANIFEST_VERSIONS_DEPTH - i].entries);
	return rc;
}

/* ---- verify --------------------------------------------------------------- */

struct index_walk {
	struct pager *pager;
	int (*visit)(uint64_t version, struct block_address root, void *context);
	void *context;
	char *message;
	size_t message_size;
};

static int walk_node(struct index_walk *walk, struct block_address address, unsigned level,
		     uint64_t prefix, uint64_t parent_offset)
{
	struct index_node node;
	int rc = address.segment != 0 || address.offset >= parent_offset
			 ? -EIO
			 : node_read(walk->pager, NULL, address, level, &node);
	if (rc < 0) {
		snprintf(walk->message, walk->message_size,
			 "version index node at manifest offset %llu (level %u) is damaged",
			 (unsigned long long)address.offset, level);
		return rc;
	}
	for (size_t i = 0; i < node.count && rc == 0; i++) {
		uint64_t key = prefix | ((uint64_t)node.entries.data[i * ENTRY_SIZE] << (8 * level));
		struct block_address value = node_value(&node, i);
		if (level > 0)
			rc = walk_node(walk, value, level - 1, key, address.offset);
		else if (walk->visit)
			rc = walk->visit(key, value, walk->context);
	}
	buf_free(&node.entries);
	return rc;
}

int manifest_versions_verify(struct pager *pager, struct block_address root,
			     int (*visit)(uint64_t version, struct block_address root, void *context),
			     void *context, char *message, size_t message_size)
{
	if (message_size)
		message[0] = 0;
	if (block_address_is_null(root))
		return 0;
	struct index_walk walk = { pager, visit, context, message, message_size };
	return walk_node(&walk, root, MANIFEST_VERSIONS_DEPTH, 0, UINT64_MAX);
}
