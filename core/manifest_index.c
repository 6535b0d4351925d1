/*
 * manifest_index — the version index: a persistent radix map of FIXED depth
 * (docs/FORMAT.md §16.1) from version to the last root record of that
 * version. A lookup reads exactly depth + 1 nodes and an insert writes
 * exactly depth + 1 nodes at any history depth (an insert reads the nodes of
 * its path that exist: all of them, except for the first version of a new
 * leaf). A B+tree grows a level every ~100× more commits, which would make
 * the cost of a commit and of resolving an old version depend on history;
 * this index does not (docs/ARCHITECTURE.md invariants 2 and 3). A node holds
 * up to 256 slots, stored as its non-empty slots only, each child's offset
 * as the difference to the previous one (a few bytes), so the path a commit
 * appends is small (FORMAT.md §16.1); a node counts one manifest row.
 *
 * Invariants kept:
 *   1. Every path from the root to a leaf has exactly depth + 1 nodes; the
 *      root is at level depth, leaves at level 0. The null address is the
 *      empty index.
 *   2. Every node has exactly 256 slots; no node is empty (at least one slot
 *      holds an address) and its stored count is its non-empty slots.
 *   3. An entry lives under the slots its version's bytes determine, so
 *      lookups never search.
 *   4. Nodes are copy-on-write: an insert appends a new path; published
 *      nodes are never rewritten.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "manifest_int.h"

#define NODE_HEADER_SIZE 8
#define NODE_SLOTS 256
#define VARINT_MAX 10
/* slot byte + offset varint; a leaf entry adds the commit's time and first-parent distance */
#define NODE_PAYLOAD_MAX (NODE_HEADER_SIZE + NODE_SLOTS * (1 + 3 * VARINT_MAX))
#define INDEX_KIND_VERSIONS 1

/*
 * One node, decoded into NODE_SLOTS dense slots: the manifest offset of the
 * child (or, in a leaf, of the root record) of each slot, 0 when empty. A
 * leaf also holds, per slot, what the log of a branch needs of that
 * version's commit (its time and its first parent), so that listing a
 * branch's versions reads a leaf per 256 versions instead of a commit record
 * per version (FORMAT.md §16.1).
 */
struct index_node {
	uint8_t level;
	size_t count;                         /* non-empty slots */
	uint64_t offsets[NODE_SLOTS];
	uint64_t commit_times[NODE_SLOTS];    /* leaves: µs since the epoch */
	uint64_t parent_distances[NODE_SLOTS];/* leaves: version − first parent's version; the version itself: none */
};

static void node_init(struct index_node *node, unsigned level)
{
	memset(node, 0, sizeof *node);
	node->level = (uint8_t)level;
}

/* The slot of version at a level (0 = leaf). */
static uint8_t path_slot(uint64_t version, unsigned level)
{
	return (uint8_t)(version >> (8 * level));
}

/* An unsigned LEB128 varint of at most VARINT_MAX bytes at *at: true and *at past it, or false. */
static bool varint_read(const uint8_t *bytes, size_t size, size_t *at, uint64_t *out)
{
	uint64_t value = 0;
	for (unsigned shift = 0; *at < size && shift < 7 * VARINT_MAX; shift += 7) {
		uint8_t byte = bytes[(*at)++];
		value |= (uint64_t)(byte & 0x7f) << shift;
		if (!(byte & 0x80)) {
			*out = value;
			return true;
		}
	}
	return false;
}

static size_t varint_write(uint8_t *bytes, uint64_t value)
{
	size_t at = 0;
	do {
		uint8_t byte = value & 0x7f;
		value >>= 7;
		bytes[at++] = byte | (value ? 0x80 : 0);
	} while (value);
	return at;
}

static uint64_t zigzag_encode(uint64_t difference)
{
	int64_t delta = (int64_t)difference;
	return ((uint64_t)delta << 1) ^ (uint64_t)(delta >> 63);
}

static uint64_t zigzag_decode(uint64_t zigzag)
{
	return (zigzag >> 1) ^ -(zigzag & 1);
}

/* Reads one node; counts one manifest row per node (its slots are not entries to decode). */
static int node_read(struct pager *pager, struct pager_append *append, struct block_address address,
		     unsigned level, struct index_node *out)
{
	struct buf raw;
	buf_init(&raw);
	node_init(out, level);
	int rc = address.segment != 0 ? -EIO
		 : append ? pager_append_read(append, address, BLOCK_INDEX, &raw)
			  : pager_read(pager, address, BLOCK_INDEX, &raw);
	if (rc < 0)
		goto out;
	if (raw.size < NODE_HEADER_SIZE || raw.size > NODE_PAYLOAD_MAX || raw.data[0] != level ||
	    raw.data[1] != INDEX_KIND_VERSIONS || raw.data[2] != 0 || raw.data[3] != 0) {
		rc = -EIO;
		goto out;
	}
	size_t count = 0, at = NODE_HEADER_SIZE;
	uint64_t previous = 0, previous_time = 0;
	int last_slot = -1;
	while (at < raw.size) {
		int slot = raw.data[at++];
		uint64_t delta = 0, time_delta = 0, distance = 0;
		bool ended = varint_read(raw.data, raw.size, &at, &delta);
		if (ended && level == 0)
			ended = varint_read(raw.data, raw.size, &at, &time_delta) &&
				varint_read(raw.data, raw.size, &at, &distance);
		uint64_t offset = previous + zigzag_decode(delta);
		/* slots in order; children are appended before their parent (invariant 4: no cycles) */
		if (!ended || slot <= last_slot || offset < MANIFEST_FIRST_BLOCK || offset >= address.offset) {
			rc = -EIO;
			goto out;
		}
		out->offsets[slot] = offset;
		if (level == 0) {
			out->commit_times[slot] = previous_time + zigzag_decode(time_delta);
			out->parent_distances[slot] = distance;
			previous_time = out->commit_times[slot];
		}
		previous = offset;
		last_slot = slot;
		count++;
	}
	if (count == 0 || count != buf_load_u32(raw.data + 4)) {
		rc = -EIO;
		goto out;
	}
	out->count = count;
	io_count_rows(IO_MANIFEST, 1);
out:
	if (rc == -EIO)
		io_log(LOG_ERR, "manifest: damaged version index node at offset %llu",
			(unsigned long long)address.offset);
	buf_free(&raw);
	return rc;
}

static struct block_address node_value(const struct index_node *node, uint8_t slot)
{
	return (struct block_address){ 0, node->offsets[slot] };
}

static void node_set(struct index_node *node, uint8_t slot, struct block_address value)
{
	assert(value.segment == 0 && value.offset != 0);
	node->count += node->offsets[slot] == 0;
	node->offsets[slot] = value.offset;
}

static int node_append(struct pager_append *append, const struct index_node *node,
		       struct block_address *address_out)
{
	uint8_t raw[NODE_PAYLOAD_MAX];
	raw[0] = node->level;
	raw[1] = INDEX_KIND_VERSIONS;
	raw[2] = raw[3] = 0;
	buf_store_u32(raw + 4, (uint32_t)node->count);
	size_t at = NODE_HEADER_SIZE;
	uint64_t previous = 0, previous_time = 0;
	for (size_t slot = 0; slot < NODE_SLOTS; slot++) {
		if (node->offsets[slot] == 0)
			continue;
		raw[at++] = (uint8_t)slot;
		at += varint_write(raw + at, zigzag_encode(node->offsets[slot] - previous));
		if (node->level == 0) {
			at += varint_write(raw + at, zigzag_encode(node->commit_times[slot] - previous_time));
			at += varint_write(raw + at, node->parent_distances[slot]);
			previous_time = node->commit_times[slot];
		}
		previous = node->offsets[slot];
	}
	return pager_append_block(append, BLOCK_INDEX, CODEC_NONE, raw, at, address_out);
}

/* The entry of a leaf slot; -EIO if its parent distance exceeds its version. */
static int leaf_entry(const struct index_node *leaf, uint64_t version, struct manifest_version_entry *out)
{
	uint8_t slot = path_slot(version, 0);
	if (leaf->parent_distances[slot] > version)
		return -EIO;
	out->root = node_value(leaf, slot);
	out->commit_time_us = leaf->commit_times[slot];
	out->parent_version = version - leaf->parent_distances[slot];
	return 0;
}

int manifest_versions_get(struct pager *pager, struct pager_append *append,
			  struct block_address root, uint64_t version, struct manifest_version_entry *out)
{
	if (version >= MANIFEST_VERSION_LIMIT)
		return -ENOENT;
	struct index_node *node = malloc(sizeof *node);
	if (!node)
		return -ENOMEM;
	struct block_address address = root;
	int rc = 0;
	for (unsigned level = MANIFEST_VERSIONS_DEPTH;; level--) {
		if (block_address_is_null(address) ||
		    (rc = node_read(pager, append, address, level, node)) < 0)
			break;
		address = node_value(node, path_slot(version, level));
		if (block_address_is_null(address) || level == 0)
			break;
	}
	if (rc == 0)
		rc = block_address_is_null(address) ? -ENOENT : leaf_entry(node, version, out);
	free(node);
	return rc;
}

/*
 * A cursor keeps the path of nodes its last lookup read: a walk over nearby
 * versions (a branch's log, newest first) reads each node once, about one
 * leaf per 256 versions.
 */
struct manifest_versions_cursor {
	struct pager *pager;
	struct block_address root;
	struct index_node nodes[MANIFEST_VERSIONS_DEPTH + 1];   /* by level */
	uint64_t node_offsets[MANIFEST_VERSIONS_DEPTH + 1];     /* of the node held at each level; 0: none */
};

int manifest_versions_cursor_open(struct pager *pager, struct block_address root,
				  struct manifest_versions_cursor **out)
{
	struct manifest_versions_cursor *cursor = calloc(1, sizeof *cursor);
	if (!cursor)
		return -ENOMEM;
	cursor->pager = pager;
	cursor->root = root;
	*out = cursor;
	return 0;
}

void manifest_versions_cursor_free(struct manifest_versions_cursor *cursor)
{
	free(cursor);
}

int manifest_versions_cursor_get(struct manifest_versions_cursor *cursor, uint64_t version,
				 struct manifest_version_entry *out)
{
	if (version >= MANIFEST_VERSION_LIMIT)
		return -ENOENT;
	struct block_address address = cursor->root;
	for (unsigned level = MANIFEST_VERSIONS_DEPTH;; level--) {
		if (block_address_is_null(address))
			return -ENOENT;
		struct index_node *node = &cursor->nodes[level];
		if (cursor->node_offsets[level] != address.offset) {
			cursor->node_offsets[level] = 0;
			int rc = node_read(cursor->pager, NULL, address, level, node);
			if (rc < 0)
				return rc;
			cursor->node_offsets[level] = address.offset;
		}
		address = node_value(node, path_slot(version, level));
		if (block_address_is_null(address))
			return -ENOENT;
		if (level == 0)
			return leaf_entry(node, version, out);
	}
}

int manifest_versions_put(struct pager *pager, struct pager_append *append,
			  struct block_address root, uint64_t version, const struct manifest_version_entry *entry,
			  struct block_address *root_out)
{
	if (version >= MANIFEST_VERSION_LIMIT)
		return -EOVERFLOW;
	if (entry->parent_version > version || (entry->parent_version == version && version != 0))
		return -EINVAL;
	struct index_node *nodes = malloc((MANIFEST_VERSIONS_DEPTH + 1) * sizeof *nodes);
	if (!nodes)
		return -ENOMEM;
	int rc = 0;
	struct block_address address = root;
	for (unsigned level = MANIFEST_VERSIONS_DEPTH;; level--) {
		if (block_address_is_null(address))
			node_init(&nodes[level], level);
		else if ((rc = node_read(pager, append, address, level, &nodes[level])) < 0)
			goto out;
		if (level == 0)
			break;
		address = node_value(&nodes[level], path_slot(version, level));
	}
	uint8_t slot = path_slot(version, 0);
	nodes[0].commit_times[slot] = entry->commit_time_us;
	nodes[0].parent_distances[slot] = version - entry->parent_version;
	struct block_address child = entry->root;
	for (unsigned level = 0; level <= MANIFEST_VERSIONS_DEPTH; level++) {
		node_set(&nodes[level], path_slot(version, level), child);
		if ((rc = node_append(append, &nodes[level], &child)) < 0)
			goto out;
	}
	*root_out = child;
out:
	free(nodes);
	return rc;
}

/* ---- verify --------------------------------------------------------------- */

struct index_walk {
	struct pager *pager;
	int (*visit)(uint64_t version, const struct manifest_version_entry *entry, void *context);
	void *context;
	char *message;
	size_t message_size;
};

static int walk_node(struct index_walk *walk, struct block_address address, unsigned level,
		     uint64_t prefix, uint64_t parent_offset)
{
	struct index_node node;
	int rc = address.offset >= parent_offset ? -EIO
						 : node_read(walk->pager, NULL, address, level, &node);
	if (rc < 0) {
		snprintf(walk->message, walk->message_size,
			 "version index node at manifest offset %llu (level %u) is damaged",
			 (unsigned long long)address.offset, level);
		return rc;
	}
	for (unsigned slot = 0; slot < NODE_SLOTS && rc == 0; slot++) {
		struct block_address value = node_value(&node, (uint8_t)slot);
		if (block_address_is_null(value))
			continue;
		uint64_t key = prefix | ((uint64_t)slot << (8 * level));
		if (level > 0) {
			rc = walk_node(walk, value, level - 1, key, address.offset);
		} else if (walk->visit) {
			struct manifest_version_entry entry;
			if (leaf_entry(&node, key, &entry) < 0) {
				snprintf(walk->message, walk->message_size,
					 "version index leaf at manifest offset %llu names a first parent above version %llu",
					 (unsigned long long)address.offset, (unsigned long long)key);
				return -EIO;
			}
			rc = walk->visit(key, &entry, walk->context);
		}
	}
	return rc;
}

int manifest_versions_verify(struct pager *pager, struct block_address root,
			     int (*visit)(uint64_t version, const struct manifest_version_entry *entry, void *context),
			     void *context, char *message, size_t message_size)
{
	if (message_size)
		message[0] = 0;
	if (block_address_is_null(root))
		return 0;
	struct index_walk walk = { pager, visit, context, message, message_size };
	return walk_node(&walk, root, MANIFEST_VERSIONS_DEPTH, 0, UINT64_MAX);
}

/* ---- retention (manifest_gc.c) -------------------------------------------------------------- */

/* The versions a slot covers at a level: [first, first + span - 1]. */
static uint64_t slot_span(unsigned level)
{
	return (uint64_t)1 << (8 * level);
}

struct retention_walk {
	struct pager *pager;
	struct pager_append *append;
	uint64_t horizon;
	manifest_versions_keep keep;
	void *keep_context;
	int (*visit_node)(struct block_address node, void *context);
	int (*visit_entry)(uint64_t version, struct block_address root, void *context);
	void *context;
};

/* Whether anything of [first, last] stays: above the horizon, or kept. */
static bool range_retained(const struct retention_walk *walk, uint64_t first, uint64_t last)
{
	if (last > walk->horizon)
		return true;
	return walk->keep && walk->keep(first, last, walk->keep_context);
}

static int retained_node(struct retention_walk *walk, struct block_address address, unsigned level,
			 uint64_t prefix)
{
	int rc = walk->visit_node ? walk->visit_node(address, walk->context) : 0;
	if (rc < 0)
		return rc;
	struct index_node node;
	if ((rc = node_read(walk->pager, NULL, address, level, &node)) < 0)
		return rc;
	for (unsigned slot = 0; slot < NODE_SLOTS && rc == 0; slot++) {
		struct block_address value = node_value(&node, (uint8_t)slot);
		uint64_t first = prefix | ((uint64_t)slot << (8 * level));
		if (block_address_is_null(value) || !range_retained(walk, first, first + slot_span(level) - 1))
			continue;
		if (level > 0)
			rc = retained_node(walk, value, level - 1, first);
		else if (walk->visit_entry)
			rc = walk->visit_entry(first, value, walk->context);
	}
	return rc;
}

int manifest_versions_retained(struct pager *pager, struct block_address root, uint64_t horizon,
			       manifest_versions_keep keep, void *keep_context,
			       int (*visit_node)(struct block_address node, void *context),
			       int (*visit_entry)(uint64_t version, struct block_address root, void *context),
			       void *context)
{
	if (block_address_is_null(root))
		return 0;
	struct retention_walk walk = { pager, NULL, horizon, keep, keep_context, visit_node, visit_entry, context };
	return retained_node(&walk, root, MANIFEST_VERSIONS_DEPTH, 0);
}

/* The node at address without what is not retained: *out is address itself
 * when nothing changed, a new node, or null when nothing is left. */
static int prune_node(struct retention_walk *walk, struct block_address address, unsigned level, uint64_t prefix,
		      struct block_address *out)
{
	if (!range_retained(walk, prefix, prefix + slot_span(level + 1) - 1)) {
		*out = (struct block_address){ 0, 0 };
		return 0;
	}
	if (prefix > walk->horizon) {   /* all of it above the horizon: kept as it is */
		*out = address;
		return 0;
	}
	struct index_node node;
	int rc = node_read(walk->pager, walk->append, address, level, &node);
	if (rc < 0)
		return rc;
	bool changed = false;
	for (unsigned slot = 0; slot < NODE_SLOTS; slot++) {
		struct block_address value = node_value(&node, (uint8_t)slot), kept = value;
		if (block_address_is_null(value))
			continue;
		uint64_t first = prefix | ((uint64_t)slot << (8 * level));
		if (level == 0)
			kept = range_retained(walk, first, first) ? value : (struct block_address){ 0, 0 };
		else if ((rc = prune_node(walk, value, level - 1, first, &kept)) < 0)
			return rc;
		if (kept.offset == value.offset)
			continue;
		changed = true;
		node.count -= kept.offset == 0;
		node.offsets[slot] = kept.offset;
	}
	if (!changed) {
		*out = address;
		return 0;
	}
	if (node.count == 0) {
		*out = (struct block_address){ 0, 0 };
		return 0;
	}
	return node_append(walk->append, &node, out);
}

int manifest_versions_prune(struct pager *pager, struct pager_append *append, struct block_address root,
			    uint64_t horizon, manifest_versions_keep keep, void *keep_context,
			    struct block_address *root_out)
{
	*root_out = root;
	if (block_address_is_null(root))
		return 0;
	struct retention_walk walk = { pager, append, horizon, keep, keep_context, NULL, NULL, NULL };
	return prune_node(&walk, root, MANIFEST_VERSIONS_DEPTH, 0, root_out);
}
