/*
 * listing — the entries of one directory listing as the namespace's list
 * callbacks build them (namespace.c, graph.c, changes.c): rich entries (a
 * child each, with a precomputed attribute) first, then lean ones (a name
 * and a kind, for directories of thousands of rows). Below every file that
 * lists; it calls nothing of the mount.
 *
 * Invariant: every rich entry comes before the first lean one (asserted),
 * so an index below count is rich and the rest are lean, in order.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mountfs_int.h"

struct node *listing_directory(const struct lister *lister)
{
	return lister->parent;
}

struct dir_entry *listing_add(struct lister *lister, const char *name, enum node_kind kind)
{
	struct dir_listing *listing = lister->listing;
	assert(listing->lean_count == 0);   /* rich entries come first */
	if (listing->count == listing->capacity) {
		size_t capacity = listing->capacity ? listing->capacity * 2 : 32;
		struct dir_entry *grown = realloc(listing->entries, capacity * sizeof *grown);
		if (!grown)
			return NULL;
		listing->entries = grown;
		listing->capacity = capacity;
	}
	struct dir_entry *entry = &listing->entries[listing->count++];
	memset(entry, 0, sizeof *entry);
	snprintf(entry->name, sizeof entry->name, "%s", name);
	entry->child.kind = kind;
	entry->child.view = lister->parent->view;
	return entry;
}

int listing_add_lean(struct lister *lister, const char *name, enum node_kind kind)
{
	struct dir_listing *listing = lister->listing;
	size_t at = listing->names.size;
	if (at > UINT32_MAX ||
	    buf_grow_array((void **)&listing->lean, &listing->lean_capacity, listing->lean_count + 1,
			   sizeof *listing->lean) < 0 ||
	    buf_append(&listing->names, name, strlen(name) + 1) < 0)
		return -ENOMEM;
	listing->lean[listing->lean_count++] = (struct lean_entry){ (uint32_t)at, (uint8_t)kind };
	return 0;
}

void listing_free(struct dir_listing *listing)
{
	free(listing->entries);
	listing->entries = NULL;
	listing->count = listing->capacity = 0;
	free(listing->lean);
	listing->lean = NULL;
	listing->lean_count = listing->lean_capacity = 0;
	buf_free(&listing->names);
}

size_t listing_size(const struct dir_listing *listing)
{
	return listing->count + listing->lean_count;
}

const char *listing_entry(const struct dir_listing *listing, const struct node *directory, size_t i,
			      struct child *scratch, const struct child **child, bool *dot)
{
	if (i < listing->count) {
		*child = &listing->entries[i].child;
		*dot = listing->entries[i].dot;
		return listing->entries[i].name;
	}
	const struct lean_entry *lean = &listing->lean[i - listing->count];
	memset(scratch, 0, sizeof *scratch);
	scratch->kind = (enum node_kind)lean->kind;
	scratch->view = directory->view;
	snprintf(scratch->table, sizeof scratch->table, "%s", directory->table);
	*child = scratch;
	*dot = false;
	return (const char *)listing->names.data + lean->name;
}
