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
#include <string.h>
#include <syslog.h>

#include "manifest_int.h"

#define NODE_HEADER_SIZE 8
#define NODE_SLOTS 256
#define NODE_PAYLOAD_MAX (NODE_HEADER_SIZE + NODE_SLOTS * 11)   /* slot byte + a varint of at most 10 */
#define INDEX_KIND_VERSIONS 1

/*
 * One node, always NODE_SLOTS dense slots: the manifest offset of the child
 * (or, in a leaf, of the root record) of each slot, 0 when empty. Every
 * node is the same size whatever it holds, so every lookup and insert reads
 * and writes the same bytes at any history depth.
 */
struct index_node {
	uint8_t level;
	size_t count;                   /* non-empty slots */
	uint64_t offsets[NODE_SLOTS];
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
	uint64_t previous = 0;
	int last_slot = -1;
	while (at < raw.size) {
		int slot = raw.data[at++];
		uint64_t zigzag = 0;
		unsigned shift = 0;
		bool ended = false;
		while (at < raw.size && shift < 64) {
			uint8_t byte = raw.data[at++];
			zigzag |= (uint64_t)(byte & 0x7f) << shift;
			shift += 7;
			if (!(byte & 0x80)) {
				ended = true;
				break;
			}
		}
		uint64_t offset = previous + (uint64_t)((zigzag >> 1) ^ -(zigzag & 1));
		/* slots in order; children are appended before their parent (invariant 4: no cycles) */
		if (!ended || slot <= last_slot || offset < MANIFEST_FIRST_BLOCK || offset >= address.offset) {
			rc = -EIO;
			goto out;
		}
		out->offsets[slot] = offset;
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
	uint64_t previous = 0;
	for (size_t slot = 0; slot < NODE_SLOTS; slot++) {
		if (node->offsets[slot] == 0)
			continue;
		int64_t delta = (int64_t)(node->offsets[slot] - previous);
		uint64_t zigzag = ((uint64_t)delta << 1) ^ (uint64_t)(delta >> 63);
		raw[at++] = (uint8_t)slot;
		do {
			uint8_t byte = zigzag & 0x7f;
			zigzag >>= 7;
			raw[at++] = byte | (zigzag ? 0x80 : 0);
		} while (zigzag);
		previous = node->offsets[slot];
	}
	return pager_append_block(append, BLOCK_INDEX, CODEC_NONE, raw, at, address_out);
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
		address = node_value(&node, path_slot(version, level));
		if (block_address_is_null(address))
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
	int rc = 0;
	struct block_address address = root;
	for (unsigned level = MANIFEST_VERSIONS_DEPTH;; level--) {
		if (block_address_is_null(address)) {
			node_init(&nodes[level], level);
		} else {
			rc = node_read(pager, append, address, level, &nodes[level]);
			if (rc < 0)
				return rc;
		}
		if (level == 0)
			break;
		address = node_value(&nodes[level], path_slot(version, level));
	}
	struct block_address child = value;
	for (unsigned level = 0; level <= MANIFEST_VERSIONS_DEPTH; level++) {
		node_set(&nodes[level], path_slot(version, level), child);
		if ((rc = node_append(append, &nodes[level], &child)) < 0)
			return rc;
	}
	*root_out = child;
	return 0;
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
		if (level > 0)
			rc = walk_node(walk, value, level - 1, key, address.offset);
		else if (walk->visit)
			rc = walk->visit(key, value, walk->context);
	}
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
