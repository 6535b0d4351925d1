/*
 * notify — the kernel's caches after commits: this mount's, and other
 * processes' found by a refresh.
 *
 * Invariants:
 *   1. Commits by other processes become visible within refresh_interval_ms +
 *      GRAPHFS_LIVE_TIMEOUT: live requests refresh the store at most once per
 *      interval, and cached live attributes and entries expire after the live
 *      timeout. An open(2) of a live file sees every commit acknowledged
 *      anywhere before it began (close-to-open): it refreshes the store at once
 *      (mount_refresh_now).
 *   2. After a commit this mount made, the notify hooks hear of every live
 *      file of the tables it changed (and of the branch's log) before the
 *      request that made it returns, or right after its reply for requests
 *      that hold the directory (struct mountfs_changes).
 */
#include <errno.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "mountfs_int.h"

uint64_t mount_now_ms(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
}

/* ---- cache invalidation ---------------------------------------------------------- */

struct invalidation {
	uint64_t *inodes;
	size_t inode_count;
	size_t inode_capacity;
	struct {
		uint64_t parent;
		char name[GRAPHFS_NAME_MAX + 1];
	} *entries;
	size_t entry_count;
	size_t entry_capacity;
	const char *branch;           /* NULL: every live view */
	const char *const *names;     /* NULL: every file; else only these tables' files and logs */
	size_t name_count;
	bool removed;                 /* the names went away: invalidate their entries too */
	bool entries_only;            /* only the entries in directories other than held[] */
	bool refresh;                 /* a refresh found others' commits: attributes only (the
				       * request that refreshes may hold a directory) */
	uint64_t held[2];             /* directories the request holds (entries_only) */
	struct mountfs *mount;
};

static bool names_match(const struct invalidation *work, const struct node *node)
{
	if (!work->names || node->kind == NODE_LOG_FILE || node->kind == NODE_FEED_FILE)
		return true;
	for (size_t i = 0; i < work->name_count; i++)
		if (strcmp(node->table, work->names[i]) == 0)
			return true;
	return false;
}

static void add_inode(struct invalidation *work, uint64_t id)
{
	if (work->inode_count == work->inode_capacity) {
		size_t capacity = work->inode_capacity ? work->inode_capacity * 2 : 64;
		uint64_t *grown = realloc(work->inodes, capacity * sizeof *grown);
		if (!grown)
			return;
		work->inodes = grown;
		work->inode_capacity = capacity;
	}
	work->inodes[work->inode_count++] = id;
}

static void add_entry(struct invalidation *work, uint64_t parent, const char *name)
{
	if (work->entry_count == work->entry_capacity) {
		size_t capacity = work->entry_capacity ? work->entry_capacity * 2 : 16;
		void *grown = realloc(work->entries, capacity * sizeof *work->entries);
		if (!grown)
			return;
		work->entries = grown;
		work->entry_capacity = capacity;
	}
	work->entries[work->entry_count].parent = parent;
	snprintf(work->entries[work->entry_count].name, sizeof work->entries[0].name, "%s", name);
	work->entry_count++;
}

static void collect_live(struct node *node, void *context)
{
	struct invalidation *work = context;
	if (node->view.version != 0)
		return;
	if (work->branch && strcmp(node->view.branch, work->branch) != 0)
		return;
	uint64_t id = inode_id(work->mount, node);
	if (work->entries_only && (!namespace_is_directory(node->kind) || namespace_is_graph(node->kind) ||
				   namespace_is_change_view(node->kind) || id == work->held[0] || id == work->held[1]))
		return;
	/* graph/ shows rows and edges of any table by id: after a commit of this
	 * mount, every graph node the kernel knows is looked up again (rows and
	 * edges come and go with no table file of their own to invalidate) */
	if (namespace_is_graph(node->kind) || namespace_is_change_view(node->kind)) {
		if (work->branch && node->parent && node->parent->view.version == 0)
			add_entry(work, inode_id(work->mount, node->parent), node->name);
		add_inode(work, id);
		return;
	}
	if (!namespace_is_directory(node->kind)) {
		if (!names_match(work, node))
			return;
		add_inode(work, id);
		/* Read handles keep the version they opened (inode.c invariant 5): the name
		 * goes to a new node, the kernel's entry too (a refresh's expires instead). */
		if (node->kind == NODE_TABLE_FILE && node->open_readers > 0) {
			inode_unhash_visited(work->mount, node);
			if (!work->refresh && node->parent)
				add_entry(work, inode_id(work->mount, node->parent), node->name);
		}
		return;
	}
	if (!work->removed)
		return;
	const char *suffix = NULL;
	if (node->kind == NODE_TABLES_DIR)
		suffix = ".jsonl";
	else if (node->kind == NODE_HEADS_DIR || node->kind == NODE_SCHEMA_DIR)
		suffix = ".json";
	else if (node->kind == NODE_STAGING_DIR)
		suffix = ".jsonl";
	if (!suffix)
		return;
	for (size_t i = 0; i < work->name_count; i++) {
		char name[GRAPHFS_NAME_MAX + 1];
		snprintf(name, sizeof name, "%s%s", work->names[i], suffix);
		add_entry(work, id, name);
	}
}

/* Collects what work names, tells the kernel, and frees the collection. */
static void invalidate_collected(struct mountfs *mount, struct invalidation *work)
{
	inode_visit(mount, collect_live, work);
	if (mount->notify.invalidate_inode)
		for (size_t i = 0; i < work->inode_count; i++)
			mount->notify.invalidate_inode(mount->notify.context, work->inodes[i]);
	if (mount->notify.invalidate_entry)
		for (size_t i = 0; i < work->entry_count; i++)
			mount->notify.invalidate_entry(mount->notify.context, work->entries[i].parent,
						       work->entries[i].name);
	free(work->inodes);
	free(work->entries);
}

void mount_invalidate_branch(struct mountfs *mount, const char *branch, const char *const *names,
			     size_t name_count, bool removed)
{
	view_cache_drop_live(mount);
	struct workspace *workspace = scratch_workspace_get(mount, branch);
	if (workspace)
		scratch_workspace_touch(workspace);
	struct invalidation work = { .branch = branch, .names = names, .name_count = name_count,
				     .removed = removed, .mount = mount };
	invalidate_collected(mount, &work);
}

void mount_invalidate_entries_beside(struct mountfs *mount, const char *branch, const char *const *names,
				     size_t name_count, uint64_t held_parent, uint64_t other_held_parent)
{
	struct invalidation work = { .branch = branch, .names = names, .name_count = name_count,
				     .removed = true, .entries_only = true,
				     .held = { held_parent, other_held_parent }, .mount = mount };
	invalidate_collected(mount, &work);   /* entries only: collect_live adds no inode */
}

/* An outage begins or ends (docs/MOUNT.md "Outages"): said once each way, in .graphfs/errors
 * and the log. */
static void note_reachability(struct mountfs *mount, int rc)
{
	bool unreachable = store_error_is_unreachable(rc);
	if (atomic_exchange(&mount->unreachable, unreachable) == unreachable)
		return;
	if (unreachable) {
		mount_error_refuse(mount, store_path(mount->store), -EIO,
				   "the object store is out of reach (%s): live files show the last state this mount "
				   "knew (version %llu) and every write fails until it is back",
				   strerror(-rc), (unsigned long long)store_version(mount->store));
		mount_log(mount, LOG_WARNING, "the object store is out of reach (%s): showing version %llu, refusing "
			  "writes until it is back", strerror(-rc), (unsigned long long)store_version(mount->store));
	} else {
		mount_log(mount, LOG_NOTICE, "the object store is back: live files show its latest state again");
	}
}

/* A refresh: at most once per interval, or (now) at once. */
static int refresh(struct mountfs *mount, bool now)
{
	uint64_t now_ms = mount_now_ms();
	pthread_mutex_lock(&mount->refresh_lock);
	if (!now && now_ms - mount->last_refresh_ms < mount->refresh_interval_ms) {
		pthread_mutex_unlock(&mount->refresh_lock);
		return 0;
	}
	mount->last_refresh_ms = now_ms;
	pthread_mutex_unlock(&mount->refresh_lock);
	bool changed = false;
	int rc = now ? store_refresh_now(mount->store, &changed) : store_refresh(mount->store, &changed);
	atomic_fetch_add(&mount->refreshes, 1);
	note_reachability(mount, rc);
	if (rc < 0) {
		if (!store_error_is_unreachable(rc))
			mount_log(mount, LOG_ERR, "refreshing the store failed: %s", strerror(-rc));
		return rc;
	}
	if (changed) {
		upkeep_poke(mount);   /* others' commits count towards the policy too */
		view_cache_drop_live(mount);
		pthread_mutex_lock(&mount->workspaces_lock);
		for (struct workspace *workspace = mount->workspaces; workspace; workspace = workspace->next)
			scratch_workspace_touch(workspace);
		pthread_mutex_unlock(&mount->workspaces_lock);
		/* Attributes only: entries of a directory whose lookup is in flight
		 * cannot be invalidated from here; they expire after the live timeout. */
		struct invalidation work = { .refresh = true, .mount = mount };
		invalidate_collected(mount, &work);
	}
	return 0;
}

void mount_refresh(struct mountfs *mount)
{
	refresh(mount, false);
}

int mount_refresh_now(struct mountfs *mount)
{
	return refresh(mount, true);
}

