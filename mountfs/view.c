/*
 * view — what a path shows: the snapshot cache and file renderings.
 *
 * Invariants:
 *   1. A live view (version 0) answers from the snapshot of its branch at the
 *      store version the handle knows; a cached live snapshot is used only
 *      while store_version() equals the version the snapshot shows (commits
 *      by this mount and refreshes both move it), so a commit made here is
 *      visible to the next request, even one that opened its snapshot while
 *      the commit was landing.
 *   2. A history view answers from its pinned version forever (immutable).
 *   3. A heads list belongs to exactly one cached live snapshot and holds that
 *      snapshot's live heads (it is built from it and dropped with it), so a
 *      lookup answered from the list answers what the snapshot would.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "mountfs_int.h"

#ifndef GRAPHFS_VERSION_STRING
#define GRAPHFS_VERSION_STRING "unknown"
#endif

/* ---- the snapshot cache -------------------------------------------------------- */

void view_cache_init(struct mountfs *mount)
{
	pthread_mutex_init(&mount->cache_lock, NULL);
	memset(mount->cache, 0, sizeof mount->cache);
	mount->cache_tick = 0;
}

void view_heads_list_release(struct heads_list *list)
{
	if (list && atomic_fetch_sub(&list->references, 1) == 1)
		free(list);
}

void view_cache_free(struct mountfs *mount)
{
	pthread_mutex_lock(&mount->cache_lock);
	for (size_t i = 0; i < SNAPSHOT_CACHE_SIZE; i++) {
		store_snapshot_release(mount->cache[i].snapshot);
		mount->cache[i].snapshot = NULL;
		view_heads_list_release(mount->cache[i].heads);
		mount->cache[i].heads = NULL;
	}
	pthread_mutex_unlock(&mount->cache_lock);
	pthread_mutex_destroy(&mount->cache_lock);
}

void view_cache_drop_live(struct mountfs *mount)
{
	struct store_snapshot *dropped[SNAPSHOT_CACHE_SIZE];
	struct heads_list *lists[SNAPSHOT_CACHE_SIZE];
	size_t count = 0;
	pthread_mutex_lock(&mount->cache_lock);
	for (size_t i = 0; i < SNAPSHOT_CACHE_SIZE; i++) {
		struct snapshot_entry *entry = &mount->cache[i];
		if (entry->snapshot && entry->view.version == 0) {
			dropped[count] = entry->snapshot;
			lists[count++] = entry->heads;
			entry->snapshot = NULL;
			entry->heads = NULL;
		}
	}
	pthread_mutex_unlock(&mount->cache_lock);
	for (size_t i = 0; i < count; i++) {
		store_snapshot_release(dropped[i]);
		view_heads_list_release(lists[i]);
	}
}

/* The cache entry holding snapshot (cache_lock held), or NULL. */
static struct snapshot_entry *entry_of(struct mountfs *mount, const struct store_snapshot *snapshot)
{
	for (size_t i = 0; i < SNAPSHOT_CACHE_SIZE; i++)
		if (mount->cache[i].snapshot == snapshot)
			return &mount->cache[i];
	return NULL;
}

/* The heads list already built for snapshot, retained, or NULL. */
static struct heads_list *heads_cached(struct mountfs *mount, const struct store_snapshot *snapshot)
{
	pthread_mutex_lock(&mount->cache_lock);
	struct snapshot_entry *entry = entry_of(mount, snapshot);
	struct heads_list *list = entry ? entry->heads : NULL;
	if (list)
		atomic_fetch_add(&list->references, 1);
	pthread_mutex_unlock(&mount->cache_lock);
	return list;
}

struct heads_build {
	struct heads_list *list;
	size_t capacity;
};

static int heads_build_visit(const struct head_row *head, void *context)
{
	struct heads_build *build = context;
	struct heads_list *list = build->list;
	if (list->count == build->capacity) {
		size_t capacity = build->capacity ? build->capacity * 2 : 64;
		list = realloc(list, sizeof *list + capacity * sizeof list->rows[0]);
		if (!list)
			return -ENOMEM;
		build->list = list;
		build->capacity = capacity;
	}
	if (list->count > 0 && strcmp(list->rows[list->count - 1].name, head->name) >= 0)
		list->sorted = false;
	list->rows[list->count++] = *head;
	return 0;
}

int view_heads(struct mountfs *mount, struct store_snapshot *snapshot, struct heads_list **out)
{
	struct heads_list *list = heads_cached(mount, snapshot);
	if (list) {
		*out = list;
		return 0;
	}
	struct heads_build build = { calloc(1, sizeof *build.list), 0 };
	if (!build.list)
		return -ENOMEM;
	atomic_init(&build.list->references, 1);
	build.list->sorted = true;
	int rc = store_snapshot_heads(snapshot, false, heads_build_visit, &build);
	if (rc < 0) {
		free(build.list);
		return rc;
	}
	list = build.list;
	/* Kept with a cached live snapshot (history listings are cached by the kernel). */
	pthread_mutex_lock(&mount->cache_lock);
	struct snapshot_entry *entry = entry_of(mount, snapshot);
	if (entry && entry->view.version == 0 && !entry->heads) {
		atomic_fetch_add(&list->references, 1);
		entry->heads = list;
	}
	pthread_mutex_unlock(&mount->cache_lock);
	*out = list;
	return 0;
}

int view_head(struct mountfs *mount, struct store_snapshot *snapshot, const char *table,
	      struct head_row *out)
{
	struct heads_list *list = heads_cached(mount, snapshot);
	if (!list || !list->sorted) {
		view_heads_list_release(list);
		return store_snapshot_head(snapshot, table, out);
	}
	size_t low = 0, high = list->count;
	int rc = -ENOENT;
	while (low < high) {
		size_t middle = low + (high - low) / 2;
		int order = strcmp(list->rows[middle].name, table);
		if (order == 0) {
			*out = list->rows[middle];
			rc = 0;
			break;
		}
		if (order < 0)
			low = middle + 1;
		else
			high = middle;
	}
	view_heads_list_release(list);
	return rc;
}

static bool same_view(const struct view *a, const struct view *b)
{
	return a->version == b->version && strcmp(a->branch, b->branch) == 0 && strcmp(a->tag, b->tag) == 0;
}

static bool is_history(const struct view *view)
{
	return view->version != 0 || view->tag[0];
}

/* now: the store version (live views) or the sweep sequence (history, tags) read just before. */
static struct store_snapshot *cache_find(struct mountfs *mount, const struct view *view, uint64_t now)
{
	for (size_t i = 0; i < SNAPSHOT_CACHE_SIZE; i++) {
		struct snapshot_entry *entry = &mount->cache[i];
		if (!entry->snapshot || !same_view(&entry->view, view))
			continue;
		if (view->version == 0 && !view->tag[0] && entry->store_version != now)
			continue;
		if (is_history(view) && entry->sweep_sequence != now)
			continue;   /* a gc began since: resolve again (the version may be gone) */
		entry->last_used = ++mount->cache_tick;
		store_snapshot_retain(entry->snapshot);
		return entry->snapshot;
	}
	return NULL;
}

void view_cache_drop_history(struct mountfs *mount)
{
	struct store_snapshot *dropped[SNAPSHOT_CACHE_SIZE];
	size_t count = 0;
	pthread_mutex_lock(&mount->cache_lock);
	for (size_t i = 0; i < SNAPSHOT_CACHE_SIZE; i++) {
		struct snapshot_entry *entry = &mount->cache[i];
		if (entry->snapshot && is_history(&entry->view)) {
			dropped[count++] = entry->snapshot;
			entry->snapshot = NULL;
			view_heads_list_release(entry->heads);
			entry->heads = NULL;
		}
	}
	pthread_mutex_unlock(&mount->cache_lock);
	for (size_t i = 0; i < count; i++)
		store_snapshot_release(dropped[i]);
}

int view_snapshot(struct mountfs *mount, const struct view *view, struct store_snapshot **out)
{
	/* history and tags: keyed by the sweep sequence, read before the open (store.h) */
	uint64_t now = is_history(view) ? store_sweep_sequence(mount->store)
					: view->version == 0 ? store_version(mount->store) : 0;
	pthread_mutex_lock(&mount->cache_lock);
	struct store_snapshot *found = cache_find(mount, view, now);
	pthread_mutex_unlock(&mount->cache_lock);
	if (found) {
		*out = found;
		return 0;
	}
	struct store_snapshot *opened = NULL;
	int rc = view->tag[0] ? store_snapshot_open_tag(mount->store, view->tag, &opened, NULL)
			      : store_snapshot_open(mount->store, view->branch,
						    view->version ? view->version : STORE_LATEST, &opened, NULL);
	if (rc < 0)
		return rc;
	/* Keyed by the version the snapshot shows, not by store_version() read
	 * now: a commit landing since the open has moved the store past it, and
	 * the snapshot must not pass for that newer version (invariant 1). */
	uint64_t opened_at = is_history(view) ? now : store_snapshot_version(opened);
	struct store_snapshot *evicted = NULL;
	struct heads_list *evicted_heads = NULL;
	pthread_mutex_lock(&mount->cache_lock);
	found = cache_find(mount, view, opened_at);
	if (!found) {
		struct snapshot_entry *slot = &mount->cache[0];
		for (size_t i = 0; i < SNAPSHOT_CACHE_SIZE; i++) {
			struct snapshot_entry *entry = &mount->cache[i];
			if (!entry->snapshot) {
				slot = entry;
				break;
			}
			if (entry->last_used < slot->last_used)
				slot = entry;
		}
		evicted = slot->snapshot;
		evicted_heads = slot->heads;
		slot->heads = NULL;
		slot->snapshot = opened;
		slot->view = *view;
		slot->store_version = opened_at;
		slot->sweep_sequence = opened_at;
		slot->last_used = ++mount->cache_tick;
		store_snapshot_retain(opened);
		found = opened;
		opened = NULL;
	}
	pthread_mutex_unlock(&mount->cache_lock);
	store_snapshot_release(evicted);
	view_heads_list_release(evicted_heads);
	store_snapshot_release(opened);
	*out = found;
	return 0;
}

/* ---- renderings ---------------------------------------------------------------- */

struct dropped_search {
	const char *table;
	const char *incarnation;
	struct head_row *head;
	bool found;
};

static int dropped_visit(const struct head_row *head, void *context)
{
	struct dropped_search *search = context;
	char text[ULID_TEXT_SIZE];
	ulid_format(&head->incarnation, text);
	if (strcmp(head->name, search->table) == 0 && strcmp(text, search->incarnation) == 0) {
		*search->head = *head;
		search->found = true;
		return 1;
	}
	return 0;
}

/* The tombstoned head a heads/.dropped/<Name>.<incarnation>.json name denotes. */
int view_dropped_head(struct store_snapshot *snapshot, const char *file, struct head_row *out)
{
	char copy[GRAPHFS_NAME_MAX + 1];
	snprintf(copy, sizeof copy, "%s", file);
	size_t length = strlen(copy);
	if (length < 6 || strcmp(copy + length - 5, ".json") != 0)
		return -ENOENT;
	copy[length - 5] = '\0';
	char *dot = strrchr(copy, '.');
	if (!dot || strlen(dot + 1) != ULID_TEXT_SIZE - 1)
		return -ENOENT;
	*dot = '\0';
	struct dropped_search search = { .table = copy, .incarnation = dot + 1, .head = out };
	int rc = store_snapshot_heads(snapshot, true, dropped_visit, &search);
	if (rc < 0)
		return rc;
	return search.found ? 0 : -ENOENT;
}

/*
 * The log. One view's log is cached (its rendered bytes) for as
 * long as the store's version and horizon stay. When a live view's branch got
 * new commits, only those are read: the walk from the new head stops at the
 * cached head commit, and the new lines go before the cached ones. If the
 * walk never meets it (the branch was deleted and made again), the walk read
 * the whole log and that is the log. A gc (horizon moved) renders it anew.
 */
struct log_render {
	struct buf *out;
	size_t count;                   /* records rendered */
	const struct ulid *stop_at;     /* NULL: read to the end */
	bool met;                       /* the walk reached stop_at */
	struct ulid head;               /* the first commit read */
	int rc;
};

static int log_visit(const struct commit_record *record, void *context)
{
	struct log_render *render = context;
	if (render->stop_at && !record->reclaimed && ulid_compare(&record->id, render->stop_at) == 0) {
		render->met = true;
		return 1;
	}
	if (render->count == 0)
		render->head = record->id;
	if ((render->rc = journal_commit_record_render_json(record, render->out)) < 0)
		return render->rc;
	render->count++;
	return 0;
}

/* Brings the cache up to the view's log as of snapshot. log_lock held. 0 or -errno. */
static int log_refresh(struct mountfs *mount, const struct view *view, struct store_snapshot *snapshot)
{
	uint64_t version = store_snapshot_version(snapshot), horizon = store_horizon(mount->store);
	if (mount->log_valid && same_view(&mount->log_view, view) && mount->log_store_version == version &&
	    mount->log_horizon == horizon)
		return 0;
	bool incremental = mount->log_valid && same_view(&mount->log_view, view) && mount->log_horizon == horizon &&
			   view->version == 0 && !ulid_is_zero(&mount->log_head);
	struct buf rendered;
	buf_init(&rendered);
	struct log_render render = { .out = &rendered, .stop_at = incremental ? &mount->log_head : NULL };
	int rc = store_snapshot_log(snapshot, log_visit, &render);
	if (rc >= 0 && render.rc < 0)
		rc = render.rc;
	if (rc >= 0 && render.met) {
		/* the new commits, then what was cached */
		rc = buf_append(&rendered, mount->log_bytes.data, mount->log_bytes.size);
		if (render.count == 0)
			render.head = mount->log_head;   /* nothing new on the branch */
	}
	if (rc < 0) {
		buf_free(&rendered);
		return rc;
	}
	bool empty = rendered.size == 0;
	buf_free(&mount->log_bytes);
	mount->log_bytes = rendered;
	mount->log_head = empty ? (struct ulid){ 0 } : render.head;
	mount->log_view = *view;
	mount->log_store_version = version;
	mount->log_horizon = horizon;
	mount->log_valid = true;
	return 0;
}

static int render_log(struct mountfs *mount, const struct view *view, struct store_snapshot *snapshot,
		      struct buf *out)
{
	pthread_mutex_lock(&mount->log_lock);
	int rc = log_refresh(mount, view, snapshot);
	if (rc == 0)
		rc = buf_append(out, mount->log_bytes.data, mount->log_bytes.size);
	pthread_mutex_unlock(&mount->log_lock);
	return rc < 0 ? rc : 0;
}

static void json_set_number(json_t *object, const char *key, uint64_t value)
{
	json_object_set_new(object, key, json_integer((json_int_t)value));
}

static int render_stats(struct mountfs *mount, struct buf *out)
{
	struct buf raw;
	buf_init(&raw);
	int rc = store_stats_json(mount->store, &raw);
	if (rc < 0) {
		buf_free(&raw);
		return rc;
	}
	json_error_t error;
	json_t *object = json_loadb((const char *)raw.data, raw.size, 0, &error);
	buf_free(&raw);
	if (!object || !json_is_object(object)) {
		json_decref(object);
		return -EIO;
	}
	json_t *daemon = json_object();
	json_set_number(daemon, "requests", atomic_load(&mount->requests));
	json_set_number(daemon, "commits", atomic_load(&mount->commits));
	json_set_number(daemon, "refreshes", atomic_load(&mount->refreshes));
	json_object_set_new(daemon, "stale", json_boolean(atomic_load(&mount->unreachable)));
	json_set_number(daemon, "stale_reads", store_stale_reads(mount->store));
	json_set_number(daemon, "retention_gcs", atomic_load(&mount->upkeep_runs));
	json_set_number(daemon, "rejected_writes", atomic_load(&mount->rejected));
	pthread_mutex_lock(&mount->inodes.lock);
	json_set_number(daemon, "nodes", mount->inodes.count);
	pthread_mutex_unlock(&mount->inodes.lock);
	json_object_set_new(daemon, "branch", json_string(mount->branch));
	json_object_set_new(object, "mount", daemon);
	char *text = json_dumps(object, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(object);
	if (!text)
		return -ENOMEM;
	rc = buf_append_string(out, text);
	if (rc >= 0)
		rc = buf_append(out, "\n", 1);
	free(text);
	return rc;
}

int view_render_head(struct mountfs *mount, const struct node *node, struct store_snapshot *snapshot,
		     struct buf *out)
{
	struct head_row head;
	int rc = node->kind == NODE_DROPPED_FILE ? view_dropped_head(snapshot, node->name, &head)
						 : view_head(mount, snapshot, node->table, &head);
	return rc < 0 ? rc : journal_head_row_render_json(&head, out);
}

int view_render_schema(struct mountfs *mount, const struct node *node, struct store_snapshot *snapshot,
		       struct buf *out)
{
	return store_snapshot_schema(snapshot, node->table, out);
}

int view_render_log(struct mountfs *mount, const struct node *node, struct store_snapshot *snapshot,
		    struct buf *out)
{
	return render_log(mount, &node->view, snapshot, out);
}

int view_render_stats(struct mountfs *mount, const struct node *node, struct store_snapshot *snapshot,
		      struct buf *out)
{
	return render_stats(mount, out);
}

int view_render_errors(struct mountfs *mount, const struct node *node, struct store_snapshot *snapshot,
		       struct buf *out)
{
	return mount_errors_render(mount, out);
}

int view_render_version(struct mountfs *mount, const struct node *node, struct store_snapshot *snapshot,
			struct buf *out)
{
	return buf_printf(out, "{\"graphfs\":\"%s\",\"format\":%u}\n", GRAPHFS_VERSION_STRING,
			  store_format_version(mount->store));
}
