/*
 * btree_build — the bulk builder: a tree written bottom-up from keys given in
 * increasing order, each level's nodes filled to their target and written as
 * they fill, so that a tree of any size costs one pass and memory for one
 * node per level. Writes to a publish's append or to a segment being written
 * (btree_builder_open, btree_builder_open_segment). Works through
 * btree_node.c's node functions; knows nothing of a tree handle.
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
	struct btree_node_sink sink;
	enum btree_layout layout;
	struct builder_level *levels;
	size_t level_count;
	struct buf last_key;
	bool has_last_key;
	int error;            /* sticky: a failed add poisons the builder */
	struct buf encoded;
};

static int builder_open(struct btree_node_sink sink, enum btree_layout layout, struct btree_builder **out)
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
	return builder_open((struct btree_node_sink){ append, NULL }, BTREE_PLAIN, out);
}

int btree_builder_open_layout(struct pager_append *append, enum btree_layout layout,
			      struct btree_builder **out)
{
	return builder_open((struct btree_node_sink){ append, NULL }, layout, out);
}

int btree_builder_open_segment(struct pager_segment *segment, enum btree_layout layout,
			       struct btree_builder **out)
{
	return builder_open((struct btree_node_sink){ NULL, segment }, layout, out);
}

void btree_builder_free(struct btree_builder *builder)
{
	if (!builder)
		return;
	for (size_t i = 0; i < builder->level_count; i++) {
		struct builder_level *level = &builder->levels[i];
		btree_node_free(level->pending);
		btree_node_free(level->current);
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
	int rc = btree_node_store(builder->sink, node, &builder->encoded, &address);
	btree_node_free(node);
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
	rc = btree_entry_make(low->key, low->key_size, NULL, 0, &entry);
	if (rc)
		return rc;
	entry.value = NULL;
	entry.child.address = child;
	struct btree_node *current = level->current;
	if (current && current->encoded_size + btree_entry_encoded_size(false, &entry) > btree_node_target(current)) {
		rc = builder_shift(builder, level_index);
		if (rc)
			goto cleanup;
		level = &builder->levels[level_index];
		current = NULL;
	}
	if (!current) {
		current = btree_node_new(false, builder->layout);
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
	rc = btree_node_reserve(current, current->count + 1);
	if (rc)
		goto cleanup;
	btree_node_insert_entry(current, current->count, entry);
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
		rc = btree_entry_make(key, key_size, value, value_size, &entry);
	if (rc)
		return rc;
	struct btree_node *current = level->current;
	if (current && current->encoded_size + btree_entry_encoded_size(true, &entry) > btree_node_target(current)) {
		rc = builder_shift(builder, 0);
		if (rc)
			goto poison;
		level = &builder->levels[0];
		current = NULL;
	}
	if (!current) {
		current = btree_node_new(true, builder->layout);
		if (!current) {
			rc = -ENOMEM;
			goto poison;
		}
		level->current = current;
		rc = btree_entry_make(key, key_size, NULL, 0, &level->current_low);
		if (rc)
			goto poison;
	}
	rc = btree_node_reserve(current, current->count + 1);
	if (rc)
		goto poison;
	btree_node_insert_entry(current, current->count, entry);
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
	struct btree_node *parent = btree_node_new(false, builder->layout);
	if (!parent || btree_node_reserve(parent, 1)) {
		btree_node_free(parent);
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
			btree_node_insert_entry(parent, 0, entry);
		}
	} else {
		first_low = level->current_low;
		parent->first_child.node = level->current;
	}
	level->pending = level->current = NULL;
	level->pending_low = level->current_low = (struct btree_entry){ 0 };

	if (parent->count == 1) {
		struct btree_node *last = parent->entries[0].child.node;
		if ((!last->leaf && last->count == 0) || btree_node_underfull(last)) {
			rc = btree_node_merge_children(parent, 0);
			if (rc == 0 && btree_node_oversized(parent->first_child.node))
				rc = btree_node_split_child(parent, 0);
			if (rc)
				goto cleanup;
		}
	}
	if (top && parent->count == 0) {
		struct btree_node *only = parent->first_child.node;
		assert(only->leaf || only->count > 0);
		rc = btree_node_store(builder->sink, only, &builder->encoded, root_out);
		*done = true;
		goto cleanup;
	}
	for (size_t i = 0; i <= parent->count; i++) {
		struct btree_child *slot = btree_node_child_slot(parent, i);
		struct btree_entry low = { 0 };
		const struct btree_entry *source = i == 0 ? &first_low : &parent->entries[i - 1];
		rc = btree_entry_make(source->key, source->key_size, NULL, 0, &low);
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
	btree_node_free(parent);
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
