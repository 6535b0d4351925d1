/*
 * manifest_index — the version index and the commit index: persistent maps
 * of FIXED depth (docs/FORMAT.md §16.1), so that a lookup reads, and an
 * insert reads and writes, exactly depth + 1 nodes at any history depth.
 * A B+tree grows a level every ~100× more commits, which would make the cost
 * of a commit (and of resolving an old version) depend on history; these
 * indexes do not (invariants 2 and 3).
 *
 * Invariants kept:
 *   1. Every path from the root to a leaf has exactly depth + 1 nodes; the
 *      root is at level depth, leaves at level 0. The null address is the
 *      empty index.
 *   2. Within a node, keys are strictly increasing (memcmp); no node is empty.
 *   3. An entry lives under the slots its key determines (version bytes, or
 *      the bytes of the commit ULID's hash), so lookups never search.
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
	uint8_t kind;
	size_t key_size;
	size_t value_size;
	size_t count;
	struct buf entries;   /* count × (key_size + value_size) bytes */
};

static unsigned index_depth(enum manifest_index_kind kind)
{
	return kind == MANIFEST_INDEX_VERSIONS ? MANIFEST_VERSIONS_DEPTH : MANIFEST_COMMITS_DEPTH;
}

static void node_shape(enum manifest_index_kind kind, unsigned level, size_t *key_size,
		       size_t *value_size)
{
	if (level > 0 || kind == MANIFEST_INDEX_VERSIONS) {
		*key_size = 1;
		*value_size = ADDRESS_SIZE;
	} else {
		*key_size = 16;
		*value_size = 8 + ADDRESS_SIZE;
	}
}

static void node_init(struct index_node *node, enum manifest_index_kind kind, unsigned level)
{
	node->level = (uint8_t)level;
	node->kind = (uint8_t)kind;
	node_shape(kind, level, &node->key_size, &node->value_size);
	node->count = 0;
	buf_init(&node->entries);
}

/* The slot of key at an interior level (1..depth). */
static uint8_t path_slot(enum manifest_index_kind kind, uint64_t path_key, unsigned level)
{
	if (kind == MANIFEST_INDEX_VERSIONS)
		return (uint8_t)(path_key >> (8 * level));
	/* commits: the hash's top byte at the top level, then downwards */
	return (uint8_t)(path_key >> (64 - 8 * (MANIFEST_COMMITS_DEPTH + 1 - level)));
}

static int node_read(struct pager *pager, struct pager_append *append, struct block_address address,
		     enum manifest_index_kind kind, unsigned level, struct index_node *out)
{
	struct buf raw;
	buf_init(&raw);
	int rc = append ? pager_append_read(append, address, BLOCK_INDEX, &raw)
			: pager_read(pager, address, BLOCK_INDEX, &raw);
	if (rc < 0)
		goto out;
	node_init(out, kind, level);
	if (raw.size < NODE_HEADER_SIZE || raw.data[0] != level || raw.data[1] != kind ||
	    raw.data[2] != 0 || raw.data[3] != 0) {
		rc = -EIO;
		goto out;
	}
	size_t count = buf_load_u32(raw.data + 4);
	size_t entry_size = out->key_size + out->value_size;
	if (count == 0 || count > (raw.size - NODE_HEADER_SIZE) / entry_size ||
	    raw.size != NODE_HEADER_SIZE + count * entry_size) {
		rc = -EIO;
		goto out;
	}
	/* keys strictly increasing (invariant 2) */
	for (size_t i = 1; i < count; i++) {
		const uint8_t *previous = raw.data + NODE_HEADER_SIZE + (i - 1) * entry_size;
		if (memcmp(previous, previous + entry_size, out->key_size) >= 0) {
			rc = -EIO;
			goto out;
		}
	}
	rc = buf_append(&out->entries, raw.data + NODE_HEADER_SIZE, count * entry_size);
	if (rc < 0)
		goto out;
	out->count = count;
	io_count_rows(IO_MANIFEST, count);
out:
	if (rc == -EIO)
		fprintf(stderr, "graphfs: manifest: damaged index node at offset %llu\n",
			(unsigned long long)address.offset);
	buf_free(&raw);
	return rc;
}

/* Binary search: index of key, or -(insertion point) - 1. */
static long node_search(const struct index_node *node, const uint8_t *key)
{
	size_t entry_size = node->key_size + node->value_size;
	size_t low = 0, high = node->count;
	while (low < high) {
		size_t middle = (low + high) / 2;
		int order = memcmp(node->entries.data + middle * entry_size, key, node->key_size);
		if (order == 0)
			return (long)middle;
		if (order < 0)
			low = middle + 1;
		else
			high = middle;
	}
	return -(long)low - 1;
}

static const uint8_t *node_value(const struct index_node *node, size_t index)
{
	return node->entries.data + index * (node->key_size + node->value_size) + node->key_size;
}

static int node_set(struct index_node *node, const uint8_t *key, const uint8_t *value)
{
	size_t entry_size = node->key_size + node->value_size;
	long found = node_search(node, key);
	if (found >= 0) {
		memcpy(node->entries.data + (size_t)found * entry_size + node->key_size, value,
		       node->value_size);
		return 0;
	}
	size_t at = (size_t)(-found - 1);
	int rc = buf_reserve(&node->entries, entry_size);
	if (rc < 0)
		return rc;
	uint8_t *base = node->entries.data + at * entry_size;
	memmove(base + entry_size, base, (node->count - at) * entry_size);
	memcpy(base, key, node->key_size);
	memcpy(base + node->key_size, value, node->value_size);
	node->entries.size += entry_size;
	node->count++;
	return 0;
}

static int node_append(struct pager_append *append, const struct index_node *node,
		       struct block_address *address_out)
{
	struct buf raw;
	buf_init(&raw);
	int rc;
	if ((rc = buf_put_u8(&raw, node->level)) < 0 || (rc = buf_put_u8(&raw, node->kind)) < 0 ||
	    (rc = buf_put_u16(&raw, 0)) < 0 || (rc = buf_put_u32(&raw, (uint32_t)node->count)) < 0 ||
	    (rc = buf_append(&raw, node->entries.data, node->entries.size)) < 0)
		goto out;
	rc = pager_append_block(append, BLOCK_INDEX, CODEC_NONE, raw.data, raw.size, address_out);
out:
	buf_free(&raw);
	return rc;
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

/* Finds the leaf value of key; copies value_size bytes to value_out. 0, -ENOENT, -EIO. */
static int index_get(struct pager *pager, struct pager_append *append, enum manifest_index_kind kind,
		     struct block_address root, uint64_t path_key, const uint8_t *leaf_key,
		     uint8_t *value_out)
{
	struct block_address address = root;
	int rc = -ENOENT;
	for (unsigned level = index_depth(kind);; level--) {
		if (block_address_is_null(address))
			return -ENOENT;
		struct index_node node;
		rc = node_read(pager, append, address, kind, level, &node);
		if (rc < 0)
			return rc;
		uint8_t slot = level > 0 ? path_slot(kind, path_key, level) : 0;
		long found = node_search(&node, level > 0 ? &slot : leaf_key);
		if (found < 0) {
			buf_free(&node.entries);
			return -ENOENT;
		}
		if (level == 0) {
			memcpy(value_out, node_value(&node, (size_t)found), node.value_size);
			buf_free(&node.entries);
			return 0;
		}
		address = address_load(node_value(&node, (size_t)found));
		buf_free(&node.entries);
	}
}

static int index_put(struct pager *pager, struct pager_append *append, enum manifest_index_kind kind,
		     struct block_address root, uint64_t path_key, const uint8_t *leaf_key,
		     const uint8_t *value, struct block_address *root_out)
{
	unsigned depth = index_depth(kind);
	struct index_node nodes[MANIFEST_VERSIONS_DEPTH + 1];
	unsigned loaded = 0; /* nodes[depth - i] for i < loaded are initialised */
	int rc = 0;
	struct block_address address = root;
	for (unsigned level = depth;; level--) {
		if (block_address_is_null(address)) {
			node_init(&nodes[level], kind, level);
		} else {
			rc = node_read(pager, append, address, kind, level, &nodes[level]);
			if (rc < 0)
				goto out;
		}
		loaded++;
		if (level == 0)
			break;
		uint8_t slot = path_slot(kind, path_key, level);
		long found = node_search(&nodes[level], &slot);
		address = found >= 0 ? address_load(node_value(&nodes[level], (size_t)found))
				     : (struct block_address){ 0, 0 };
	}
	rc = node_set(&nodes[0], leaf_key, value);
	if (rc < 0)
		goto out;
	struct block_address child;
	rc = node_append(append, &nodes[0], &child);
	if (rc < 0)
		goto out;
	for (unsigned level = 1; level <= depth; level++) {
		uint8_t slot = path_slot(kind, path_key, level);
		uint8_t child_bytes[ADDRESS_SIZE];
		address_store(child_bytes, child);
		if ((rc = node_set(&nodes[level], &slot, child_bytes)) < 0 ||
		    (rc = node_append(append, &nodes[level], &child)) < 0)
			goto out;
	}
	*root_out = child;
out:
	for (unsigned i = 0; i < loaded; i++)
		buf_free(&nodes[depth - i].entries);
	return rc;
}

/* ---- the two indexes ---------------------------------------------------- */

int manifest_versions_get(struct pager *pager, struct pager_append *append,
			  struct block_address root, uint64_t version, struct block_address *out)
{
	if (version >= MANIFEST_VERSION_LIMIT)
		return -ENOENT;
	uint8_t key = (uint8_t)version, value[ADDRESS_SIZE];
	int rc = index_get(pager, append, MANIFEST_INDEX_VERSIONS, root, version, &key, value);
	if (rc == 0)
		*out = address_load(value);
	return rc;
}

int manifest_versions_put(struct pager *pager, struct pager_append *append,
			  struct block_address root, uint64_t version, struct block_address value,
			  struct block_address *root_out)
{
	if (version >= MANIFEST_VERSION_LIMIT)
		return -EOVERFLOW;
	uint8_t key = (uint8_t)version, bytes[ADDRESS_SIZE];
	address_store(bytes, value);
	return index_put(pager, append, MANIFEST_INDEX_VERSIONS, root, version, &key, bytes, root_out);
}

int manifest_commits_get(struct pager *pager, struct pager_append *append,
			 struct block_address root, const struct ulid *commit, uint64_t *version,
			 struct block_address *record)
{
	uint8_t value[8 + ADDRESS_SIZE];
	int rc = index_get(pager, append, MANIFEST_INDEX_COMMITS, root, codec_hash(commit->bytes, 16),
			   commit->bytes, value);
	if (rc == 0) {
		if (version)
			*version = buf_load_u64(value);
		if (record)
			*record = address_load(value + 8);
	}
	return rc;
}

int manifest_commits_put(struct pager *pager, struct pager_append *append,
			 struct block_address root, const struct ulid *commit, uint64_t version,
			 struct block_address record, struct block_address *root_out)
{
	uint8_t value[8 + ADDRESS_SIZE];
	buf_store_u64(value, version);
	address_store(value + 8, record);
	return index_put(pager, append, MANIFEST_INDEX_COMMITS, root, codec_hash(commit->bytes, 16),
			 commit->bytes, value, root_out);
}

/* ---- verify --------------------------------------------------------------- */

struct index_walk {
	struct pager *pager;
	enum manifest_index_kind kind;
	void (*visit_node)(struct block_address node, void *context);
	int (*visit_entry)(const uint8_t *key, const uint8_t *value, void *context);
	void *context;
	char *message;
	size_t message_size;
};

static int walk_node(struct index_walk *walk, struct block_address address, unsigned level,
		     uint64_t prefix)
{
	struct index_node node;
	int rc = node_read(walk->pager, NULL, address, walk->kind, level, &node);
	if (rc < 0) {
		snprintf(walk->message, walk->message_size,
			 "%s index node at manifest offset %llu (level %u) is damaged",
			 walk->kind == MANIFEST_INDEX_VERSIONS ? "version" : "commit",
			 (unsigned long long)address.offset, level);
		return rc;
	}
	if (walk->visit_node)
		walk->visit_node(address, walk->context);
	for (size_t i = 0; i < node.count && rc == 0; i++) {
		const uint8_t *entry = node.entries.data + i * (node.key_size + node.value_size);
		const uint8_t *value = entry + node.key_size;
		if (level > 0) {
			uint64_t child_prefix = walk->kind == MANIFEST_INDEX_VERSIONS
							? prefix | ((uint64_t)entry[0] << (8 * level))
							: prefix | ((uint64_t)entry[0]
								    << (64 - 8 * (MANIFEST_COMMITS_DEPTH + 1 - level)));
			rc = walk_node(walk, address_load(value), level - 1, child_prefix);
			continue;
		}
		uint8_t key[16];
		if (walk->kind == MANIFEST_INDEX_VERSIONS) {
			uint64_t version = prefix | entry[0];
			for (int b = 0; b < 8; b++)
				key[b] = (uint8_t)(version >> (56 - 8 * b));
		} else {
			uint64_t hash = codec_hash(entry, 16);
			uint64_t mask = ~0ull << (64 - 8 * MANIFEST_COMMITS_DEPTH);
			if ((hash & mask) != prefix) {
				snprintf(walk->message, walk->message_size,
					 "commit index leaf at manifest offset %llu holds a commit under the wrong path",
					 (unsigned long long)address.offset);
				rc = -EIO;
				break;
			}
			memcpy(key, entry, 16);
		}
		if (walk->visit_entry)
			rc = walk->visit_entry(key, value, walk->context);
	}
	buf_free(&node.entries);
	return rc;
}

int manifest_index_verify(struct pager *pager, enum manifest_index_kind kind,
			  struct block_address root,
			  void (*visit_node)(struct block_address node, void *context),
			  int (*visit_entry)(const uint8_t *key, const uint8_t *value, void *context),
			  void *context, char *message, size_t message_size)
{
	if (message_size)
		message[0] = 0;
	if (block_address_is_null(root))
		return 0;
	struct index_walk walk = { pager, kind, visit_node, visit_entry, context, message, message_size };
	return walk_node(&walk, root, index_depth(kind), 0);
}
