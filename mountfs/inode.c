/*
 * inode — the node table: one node per (parent, name) the kernel knows.
 *
 * Invariants:
 *   1. A node's nodeid is its address (the root: MOUNTFS_ROOT_ID); it stays
 *      valid until the kernel has forgotten every lookup AND no open file,
 *      child node or scratch binding references it.
 *   2. At most one hashed node per (parent, name); rename moves the node
 *      (keeping its st_ino, as a real file system keeps the inode), unlink
 *      and identity changes unhash it so the name resolves afresh while the
 *      kernel may still hold the old node.
 *   3. st_ino is a hash of what the path means (kind, branch, version, name):
 *      the same path shows the same inode number across lookups and mounts.
 *   4. Every node holds one reference on its parent, so parents outlive
 *      children and inode_path() can always walk to the root.
 *   5. A live table file held by read handles when its table changes is
 *      unhashed (notify.c): the name resolves to a new node, and the old one,
 *      reachable only through those handles, answers getattr for the version
 *      they read. The kernel sends no handle with fstat(2), so the node is
 *      what tells fstat from stat.
 * States of a node: hashed (resolvable) -> unhashed (renamed over, unlinked,
 * or replaced) -> freed (no lookups, no references).
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "mountfs_int.h"

struct node_private {
	struct node node;
	bool hashed;
	struct node_private *all_previous;   /* every live node, for freeing at unmount */
	struct node_private *all_next;
};

static void all_link(struct inode_table *table, struct node_private *node)
{
	node->all_previous = NULL;
	node->all_next = table->all;
	if (table->all)
		table->all->all_previous = node;
	table->all = node;
}

static void all_unlink(struct inode_table *table, struct node_private *node)
{
	if (node->all_previous)
		node->all_previous->all_next = node->all_next;
	else
		table->all = node->all_next;
	if (node->all_next)
		node->all_next->all_previous = node->all_previous;
}

static struct node_private *private_of(struct node *node)
{
	return (struct node_private *)node;
}

static uint64_t bucket_hash(const struct node *parent, const char *name)
{
	uint64_t seed = (uint64_t)(uintptr_t)parent;
	return XXH3_64bits_withSeed(name, strlen(name), seed);
}

uint64_t inode_number(const struct node *parent, const char *name, enum node_kind kind,
			   const struct view *view)
{
	char identity[GRAPHFS_NAME_MAX + 2 * JOURNAL_NAME_MAX + 128];
	int length = snprintf(identity, sizeof identity, "%d/%d/%s/%llu/%s/%s", (int)kind,
			      parent ? (int)parent->kind : -1, view->branch,
			      (unsigned long long)view->version, view->tag, name);
	if (length < 0)
		length = 0;
	if ((size_t)length >= sizeof identity)
		length = (int)sizeof identity - 1;
	uint64_t value = XXH3_64bits(identity, (size_t)length);
	/* 0 is not an inode number and 1 is the root's. */
	if (value < 2)
		value += 2;
	return value;
}

int inode_table_init(struct inode_table *table, const struct view *root_view)
{
	memset(table, 0, sizeof *table);
	table->bucket_count = 4096;
	table->buckets = calloc(table->bucket_count, sizeof *table->buckets);
	struct node_private *root = calloc(1, sizeof *root);
	if (!table->buckets || !root) {
		free(table->buckets);
		free(root);
		table->buckets = NULL;
		return -ENOMEM;
	}
	if (pthread_mutex_init(&table->lock, NULL) != 0) {
		free(table->buckets);
		free(root);
		table->buckets = NULL;
		return -ENOMEM;
	}
	root->node.kind = NODE_ROOT;
	root->node.view = *root_view;
	root->node.st_ino = MOUNTFS_ROOT_ID;
	root->node.lookups = 1;
	table->root = &root->node;
	return 0;
}

void inode_table_free(struct inode_table *table)
{
	if (!table->buckets)
		return;
	/* Children before parents does not matter here: everything goes. */
	while (table->all) {
		struct node_private *node = table->all;
		all_unlink(table, node);
		if (node->node.scratch)
			scratch_put(node->node.scratch);
		free(node);
	}
	free(private_of(table->root));
	table->root = NULL;
	free(table->buckets);
	table->buckets = NULL;
	pthread_mutex_destroy(&table->lock);
}

static void hash_insert(struct inode_table *table, struct node *node)
{
	size_t index = bucket_hash(node->parent, node->name) % table->bucket_count;
	node->hash_next = table->buckets[index];
	table->buckets[index] = node;
	private_of(node)->hashed = true;
	table->count++;
}

static void hash_remove(struct inode_table *table, struct node *node)
{
	if (!private_of(node)->hashed)
		return;
	size_t index = bucket_hash(node->parent, node->name) % table->bucket_count;
	struct node **link = &table->buckets[index];
	while (*link && *link != node)
		link = &(*link)->hash_next;
	if (*link)
		*link = node->hash_next;
	node->hash_next = NULL;
	private_of(node)->hashed = false;
	table->count--;
}

static struct node *hash_find(struct inode_table *table, const struct node *parent, const char *name)
{
	size_t index = bucket_hash(parent, name) % table->bucket_count;
	for (struct node *node = table->buckets[index]; node; node = node->hash_next)
		if (node->parent == parent && strcmp(node->name, name) == 0)
			return node;
	return NULL;
}

/* Frees node (and parents that become unreferenced) if nothing holds it. Table locked. */
static void maybe_free(struct inode_table *table, struct node *node)
{
	while (node && node != table->root && node->lookups == 0 && node->references == 0) {
		struct node *parent = node->parent;
		hash_remove(table, node);
		all_unlink(table, private_of(node));
		if (node->scratch)
			scratch_put(node->scratch);
		free(private_of(node));
		if (!parent)
			break;
		assert(parent->references > 0);
		parent->references--;
		node = parent;
	}
}

struct node *inode_get(struct mountfs *mount, struct node *parent, const char *name,
		       enum node_kind kind, const struct view *view, const char *table_name,
		       uint64_t lookups)
{
	struct inode_table *table = &mount->inodes;
	if (strlen(name) > GRAPHFS_NAME_MAX)
		return NULL;
	pthread_mutex_lock(&table->lock);
	struct node *node = hash_find(table, parent, name);
	if (node && (node->kind != kind || strcmp(node->view.branch, view->branch) != 0 ||
		     node->view.version != view->version ||
		     strcmp(node->table, table_name ? table_name : "") != 0)) {
		/* The name now means something else: the old node lives on unhashed. */
		hash_remove(table, node);
		maybe_free(table, node);
		node = NULL;
	}
	if (!node) {
		struct node_private *created = calloc(1, sizeof *created);
		if (!created) {
			pthread_mutex_unlock(&table->lock);
			return NULL;
		}
		all_link(table, created);
		node = &created->node;
		node->parent = parent;
		node->kind = kind;
		node->view = *view;
		snprintf(node->name, sizeof node->name, "%s", name);
		snprintf(node->table, sizeof node->table, "%s", table_name ? table_name : "");
		node->st_ino = inode_number(parent, name, kind, view);
		if (parent)
			parent->references++;
		hash_insert(table, node);
	}
	node->lookups += lookups;
	pthread_mutex_unlock(&table->lock);
	return node;
}

struct node *inode_from_id(struct mountfs *mount, uint64_t id)
{
	if (id == MOUNTFS_ROOT_ID)
		return mount->inodes.root;
	return (struct node *)(uintptr_t)id;
}

uint64_t inode_id(struct mountfs *mount, const struct node *node)
{
	if (node == mount->inodes.root)
		return MOUNTFS_ROOT_ID;
	return (uint64_t)(uintptr_t)node;
}

void inode_retain(struct mountfs *mount, struct node *node)
{
	pthread_mutex_lock(&mount->inodes.lock);
	node->references++;
	pthread_mutex_unlock(&mount->inodes.lock);
}

void inode_release(struct mountfs *mount, struct node *node)
{
	pthread_mutex_lock(&mount->inodes.lock);
	assert(node->references > 0);
	node->references--;
	maybe_free(&mount->inodes, node);
	pthread_mutex_unlock(&mount->inodes.lock);
}

void inode_forget(struct mountfs *mount, struct node *node, uint64_t count)
{
	pthread_mutex_lock(&mount->inodes.lock);
	if (node != mount->inodes.root) {
		node->lookups = count > node->lookups ? 0 : node->lookups - count;
		maybe_free(&mount->inodes, node);
	}
	pthread_mutex_unlock(&mount->inodes.lock);
}

void inode_move(struct mountfs *mount, struct node *node, struct node *parent, const char *name,
		enum node_kind kind, const char *table_name)
{
	struct inode_table *table = &mount->inodes;
	pthread_mutex_lock(&table->lock);
	struct node *existing = hash_find(table, parent, name);
	if (existing && existing != node) {
		hash_remove(table, existing);
		maybe_free(table, existing);
	}
	hash_remove(table, node);
	struct node *old_parent = node->parent;
	node->parent = parent;
	if (parent)
		parent->references++;
	snprintf(node->name, sizeof node->name, "%s", name);
	snprintf(node->table, sizeof node->table, "%s", table_name ? table_name : "");
	node->kind = kind;
	if (parent)
		node->view = parent->view;
	hash_insert(table, node);
	if (old_parent) {
		assert(old_parent->references > 0);
		old_parent->references--;
		maybe_free(table, old_parent);
	}
	pthread_mutex_unlock(&table->lock);
}

void inode_detach(struct mountfs *mount, struct node *parent, const char *name)
{
	struct inode_table *table = &mount->inodes;
	pthread_mutex_lock(&table->lock);
	struct node *existing = hash_find(table, parent, name);
	if (existing) {
		hash_remove(table, existing);
		maybe_free(table, existing);
	}
	pthread_mutex_unlock(&table->lock);
}

void inode_visit(struct mountfs *mount, void (*visit)(struct node *node, void *context), void *context)
{
	struct inode_table *table = &mount->inodes;
	pthread_mutex_lock(&table->lock);
	visit(table->root, context);
	for (size_t i = 0; i < table->bucket_count; i++) {
		struct node *next;
		for (struct node *node = table->buckets[i]; node; node = next) {
			next = node->hash_next;   /* visit may unhash node (inode_unhash_visited) */
			if (node != table->root)
				visit(node, context);
		}
	}
	pthread_mutex_unlock(&table->lock);
}

void inode_unhash_visited(struct mountfs *mount, struct node *node)
{
	assert(node->references > 0);   /* held: not freed here, so the visit goes on */
	hash_remove(&mount->inodes, node);
}

void inode_reader_opened(struct mountfs *mount, struct node *node)
{
	pthread_mutex_lock(&mount->inodes.lock);
	node->open_readers++;
	pthread_mutex_unlock(&mount->inodes.lock);
}

void inode_reader_closed(struct mountfs *mount, struct node *node)
{
	pthread_mutex_lock(&mount->inodes.lock);
	assert(node->open_readers > 0);
	node->open_readers--;
	pthread_mutex_unlock(&mount->inodes.lock);
}

bool inode_pinned(struct mountfs *mount, const struct node *node)
{
	pthread_mutex_lock(&mount->inodes.lock);
	bool pinned = node->open_readers > 0 && !private_of((struct node *)node)->hashed;
	pthread_mutex_unlock(&mount->inodes.lock);
	return pinned;
}

void inode_path(struct mountfs *mount, const struct node *node, char *out, size_t size)
{
	const char *parts[64];
	size_t count = 0;
	pthread_mutex_lock(&mount->inodes.lock);
	for (const struct node *at = node; at && at->parent && count < 64; at = at->parent)
		parts[count++] = at->name;
	size_t used = 0;
	out[0] = '\0';
	while (count > 0) {
		const char *part = parts[--count];
		int written = snprintf(out + used, size - used, "%s%s", used ? "/" : "", part);
		if (written < 0 || (size_t)written >= size - used)
			break;
		used += (size_t)written;
	}
	pthread_mutex_unlock(&mount->inodes.lock);
}

struct node *inode_find(struct mountfs *mount, struct node *parent, const char *name)
{
	pthread_mutex_lock(&mount->inodes.lock);
	struct node *node = hash_find(&mount->inodes, parent, name);
	if (node)
		node->references++;
	pthread_mutex_unlock(&mount->inodes.lock);
	return node;
}
