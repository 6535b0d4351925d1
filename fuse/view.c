/*
 * view — what a path shows: the snapshot cache, file renderings and attributes.
 *
 * Invariants:
 *   1. A live view (version 0) answers from the snapshot of its branch at the
 *      store version the handle knows; a cached live snapshot is used only
 *      while store_version() equals the version the snapshot shows (commits
 *      by this mount and refreshes both move it), so a commit made here is
 *      visible to the next request, even one that opened its snapshot while
 *      the commit was landing.
 *   2. A history view answers from its pinned version forever (immutable).
 *   3. Sizes are the exact byte length reads return: table files from the
 *      head row's rendered size, rendered files from their rendering.
 *   4. Nothing on the path of `ls`/`cat heads/<all>` does work that grows with
 *      history: heads come from the snapshot's heads tree, never the log.
 *   5. A heads list belongs to exactly one cached live snapshot and holds that
 *      snapshot's live heads (it is built from it and dropped with it), so a
 *      lookup answered from the list answers what the snapshot would.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "fuse_int.h"

#ifndef GRAPHFS_VERSION_STRING
#define GRAPHFS_VERSION_STRING "unknown"
#endif

/* ---- names ---------------------------------------------------------------- */

bool table_name_valid(const char *name)
{
	size_t length = strlen(name);
	if (length == 0 || length > 128)
		return false;
	for (size_t i = 0; i < length; i++) {
		char c = name[i];
		bool letter = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
		bool digit = c >= '0' && c <= '9';
		if (!letter && !(digit && i > 0))
			return false;
	}
	return true;
}

bool table_name_from_file(const char *file, const char *suffix, char out[JOURNAL_NAME_MAX + 1])
{
	size_t length = strlen(file);
	size_t suffix_length = strlen(suffix);
	if (length <= suffix_length || strcmp(file + length - suffix_length, suffix) != 0)
		return false;
	size_t name_length = length - suffix_length;
	if (name_length > JOURNAL_NAME_MAX)
		return false;
	memcpy(out, file, name_length);
	out[name_length] = '\0';
	return table_name_valid(out);
}

double view_timeout(const struct node *node)
{
	return node->view.version != 0 ? GRAPHFS_HISTORY_TIMEOUT : GRAPHFS_LIVE_TIMEOUT;
}

/* ---- the snapshot cache -------------------------------------------------------- */

void view_cache_init(struct mount *mount)
{
	pthread_mutex_init(&mount->cache_lock, NULL);
	memset(mount->cache, 0, sizeof mount->cache);
	mount->cache_tick = 0;
}

void heads_list_release(struct heads_list *list)
{
	if (list && atomic_fetch_sub(&list->references, 1) == 1)
		free(list);
}

void view_cache_free(struct mount *mount)
{
	pthread_mutex_lock(&mount->cache_lock);
	for (size_t i = 0; i < SNAPSHOT_CACHE_SIZE; i++) {
		store_snapshot_release(mount->cache[i].snapshot);
		mount->cache[i].snapshot = NULL;
		heads_list_release(mount->cache[i].heads);
		mount->cache[i].heads = NULL;
	}
	pthread_mutex_unlock(&mount->cache_lock);
	pthread_mutex_destroy(&mount->cache_lock);
}

void view_cache_drop_live(struct mount *mount)
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
		heads_list_release(lists[i]);
	}
}

/* The cache entry holding snapshot (cache_lock held), or NULL. */
static struct snapshot_entry *entry_of(struct mount *mount, const struct store_snapshot *snapshot)
{
	for (size_t i = 0; i < SNAPSHOT_CACHE_SIZE; i++)
		if (mount->cache[i].snapshot == snapshot)
			return &mount->cache[i];
	return NULL;
}

/* The heads list already built for snapshot, retained, or NULL. */
static struct heads_list *heads_cached(struct mount *mount, const struct store_snapshot *snapshot)
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

int view_heads(struct mount *mount, struct store_snapshot *snapshot, struct heads_list **out)
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

int view_head(struct mount *mount, struct store_snapshot *snapshot, const char *table,
	      struct head_row *out)
{
	struct heads_list *list = heads_cached(mount, snapshot);
	if (!list || !list->sorted) {
		heads_list_release(list);
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
	heads_list_release(list);
	return rc;
}

static bool same_view(const struct view *a, const struct view *b)
{
	return a->version == b->version && strcmp(a->branch, b->branch) == 0;
}

static struct store_snapshot *cache_find(struct mount *mount, const struct view *view,
					 uint64_t store_version_now)
{
	for (size_t i = 0; i < SNAPSHOT_CACHE_SIZE; i++) {
		struct snapshot_entry *entry = &mount->cache[i];
		if (!entry->snapshot || !same_view(&entry->view, view))
			continue;
		if (view->version == 0 && entry->store_version != store_version_now)
			continue;
		entry->last_used = ++mount->cache_tick;
		store_snapshot_retain(entry->snapshot);
		return entry->snapshot;
	}
	return NULL;
}

int view_snapshot(struct mount *mount, const struct view *view, struct store_snapshot **out)
{
	uint64_t now = view->version == 0 ? store_version(mount->store) : 0;
	pthread_mutex_lock(&mount->cache_lock);
	struct store_snapshot *found = cache_find(mount, view, now);
	pthread_mutex_unlock(&mount->cache_lock);
	if (found) {
		*out = found;
		return 0;
	}
	struct store_snapshot *opened = NULL;
	int rc = store_snapshot_open(mount->store, view->branch,
				     view->version ? view->version : STORE_LATEST, &opened, NULL);
	if (rc < 0)
		return rc;
	/* Keyed by the version the snapshot shows, not by store_version() read
	 * now: a commit landing since the open has moved the store past it, and
	 * the snapshot must not pass for that newer version (invariant 1). */
	uint64_t opened_at = view->version == 0 ? store_snapshot_version(opened) : 0;
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
		slot->last_used = ++mount->cache_tick;
		store_snapshot_retain(opened);
		found = opened;
		opened = NULL;
	}
	pthread_mutex_unlock(&mount->cache_lock);
	store_snapshot_release(evicted);
	heads_list_release(evicted_heads);
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

struct log_render {
	struct buf *out;
	int rc;
};

static int log_visit(const struct commit_record *record, void *context)
{
	struct log_render *render = context;
	render->rc = commit_record_render_json(record, render->out);
	return render->rc < 0 ? render->rc : 0;
}

/* The log of a view, cached for the last (view, version) rendered. */
static int render_log(struct mount *mount, const struct view *view, struct store_snapshot *snapshot,
		      struct buf *out)
{
	uint64_t version = store_snapshot_version(snapshot);
	pthread_mutex_lock(&mount->log_lock);
	if (mount->log_valid && same_view(&mount->log_view, view) && mount->log_store_version == version) {
		int rc = buf_append(out, mount->log_bytes.data, mount->log_bytes.size);
		pthread_mutex_unlock(&mount->log_lock);
		return rc;
	}
	pthread_mutex_unlock(&mount->log_lock);

	struct buf rendered;
	buf_init(&rendered);
	struct log_render render = { .out = &rendered, .rc = 0 };
	int rc = store_snapshot_log(snapshot, log_visit, &render);
	if (rc >= 0 && render.rc < 0)
		rc = render.rc;
	if (rc >= 0)
		rc = buf_append(out, rendered.data, rendered.size);
	if (rc >= 0) {
		pthread_mutex_lock(&mount->log_lock);
		buf_free(&mount->log_bytes);
		mount->log_bytes = rendered;
		mount->log_view = *view;
		mount->log_store_version = version;
		mount->log_valid = true;
		pthread_mutex_unlock(&mount->log_lock);
	} else {
		buf_free(&rendered);
	}
	return rc < 0 ? rc : 0;
}

static void json_set_number(json_t *object, const char *key, uint64_t value)
{
	json_object_set_new(object, key, json_integer((json_int_t)value));
}

static int render_stats(struct mount *mount, struct buf *out)
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

int view_render(struct mount *mount, const struct node *node, struct store_snapshot *snapshot,
		struct buf *out)
{
	struct head_row head;
	int rc;
	switch (node->kind) {
	case NODE_HEAD_FILE:
		rc = view_head(mount, snapshot, node->table, &head);
		if (rc < 0)
			return rc;
		return head_row_render_json(&head, out);
	case NODE_DROPPED_FILE:
		rc = view_dropped_head(snapshot, node->name, &head);
		if (rc < 0)
			return rc;
		return head_row_render_json(&head, out);
	case NODE_SCHEMA_FILE:
		return store_snapshot_schema(snapshot, node->table, out);
	case NODE_LOG_FILE:
		return render_log(mount, &node->view, snapshot, out);
	case NODE_STATS_FILE:
		return render_stats(mount, out);
	case NODE_ERRORS_FILE:
		return mount_errors_render(mount, out);
	case NODE_VERSION_FILE:
		return buf_printf(out, "{\"graphfs\":\"%s\",\"format\":%d}\n", GRAPHFS_VERSION_STRING,
				  STORE_FORMAT_VERSION);
	default:
		return -EINVAL;
	}
}

/* ---- attributes ------------------------------------------------------------------ */

static void set_time(struct stat *st, uint64_t time_us)
{
	st->st_mtim.tv_sec = (time_t)(time_us / 1000000);
	st->st_mtim.tv_nsec = (long)(time_us % 1000000) * 1000;
	st->st_ctim = st->st_mtim;
	st->st_atim = st->st_mtim;
}

static bool writable_kind(const struct node *node)
{
	if (node->view.version != 0)
		return false;
	switch (node->kind) {
	case NODE_ROOT:
	case NODE_BRANCH_ROOT:
	case NODE_TABLES_DIR:
	case NODE_SCHEMA_DIR:
	case NODE_STAGING_DIR:
	case NODE_BRANCHES_DIR:
	case NODE_TABLE_FILE:
	case NODE_SCHEMA_FILE:
	case NODE_STAGED_FILE:
	case NODE_COMMIT_FILE:
	case NODE_SCRATCH_FILE:
		return true;
	default:
		return false;
	}
}

/* The attributes every node shares; false when nothing more is needed (directories). */
static bool attr_common(struct mount *mount, const struct node *node, struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_ino = node->st_ino;
	st->st_uid = mount->uid;
	st->st_gid = mount->gid;
	st->st_blksize = 512 * 1024;
	st->st_mtim = mount->mount_time;
	st->st_ctim = mount->mount_time;
	st->st_atim = mount->mount_time;
	bool writable = writable_kind(node) && !mount->read_only;
	if (node_is_directory(node->kind)) {
		st->st_mode = S_IFDIR | (writable ? 0755 : 0555);
		st->st_nlink = 2;
		return false;
	}
	st->st_mode = S_IFREG | (writable ? 0644 : 0444);
	st->st_nlink = 1;
	return true;
}

/* Attributes of table, head and dropped-head files from a head row already read. */
static int attr_from_head(const struct node *node, const struct head_row *head, struct stat *st)
{
	set_time(st, head->commit_time_us);
	if (node->kind == NODE_TABLE_FILE) {
		st->st_size = (off_t)head->byte_size;
	} else {
		struct buf rendered;
		buf_init(&rendered);
		int rc = head_row_render_json(head, &rendered);
		st->st_size = (off_t)rendered.size;
		buf_free(&rendered);
		if (rc < 0)
			return rc;
	}
	st->st_blocks = (st->st_size + 511) / 512;
	return 0;
}

bool view_attr_has_head(enum node_kind kind)
{
	return kind == NODE_TABLE_FILE || kind == NODE_HEAD_FILE || kind == NODE_DROPPED_FILE;
}

int view_attr_head(struct mount *mount, struct node *node, const struct head_row *head, struct stat *st)
{
	if (!view_attr_has_head(node->kind))
		return view_attr(mount, node, st);
	attr_common(mount, node, st);
	return attr_from_head(node, head, st);
}

int view_attr(struct mount *mount, struct node *node, struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_ino = node->st_ino;
	st->st_uid = mount->uid;
	st->st_gid = mount->gid;
	st->st_blksize = 512 * 1024;
	st->st_mtim = mount->mount_time;
	st->st_ctim = mount->mount_time;
	st->st_atim = mount->mount_time;
	bool writable = writable_kind(node) && !mount->read_only;
	if (node_is_directory(node->kind)) {
		st->st_mode = S_IFDIR | (writable ? 0755 : 0555);
		st->st_nlink = 2;
		return 0;
	}
	st->st_mode = S_IFREG | (writable ? 0644 : 0444);
	st->st_nlink = 1;

	if (node->kind == NODE_COMMIT_LINK) {
		char target[32];
		st->st_mode = S_IFLNK | 0777;
		st->st_size = snprintf(target, sizeof target, "@%llu",
				       (unsigned long long)node->version_target);
		return 0;
	}
	if (node->kind == NODE_COMMIT_FILE) {
		st->st_mode = S_IFREG | (mount->read_only ? 0444 : 0644);
		return 0;
	}
	if (node->kind == NODE_SCRATCH_FILE || node->kind == NODE_STAGED_FILE) {
		struct scratch *scratch = scratch_find(mount, node->parent, node->name);
		if (!scratch)
			return -ENOENT;
		scratch_attr(scratch, st);
		st->st_ino = node->st_ino;
		scratch_release(scratch);
		return 0;
	}
	if (node->kind == NODE_STATS_FILE || node->kind == NODE_ERRORS_FILE ||
	    node->kind == NODE_VERSION_FILE) {
		struct buf rendered;
		buf_init(&rendered);
		int rc = view_render(mount, node, NULL, &rendered);
		st->st_size = (off_t)rendered.size;
		buf_free(&rendered);
		return rc < 0 ? rc : 0;
	}

	/* Live table and schema names an open handle is creating. */
	uint64_t pending_size = 0;
	bool pending = false;
	if (node->view.version == 0 && (node->kind == NODE_TABLE_FILE || node->kind == NODE_SCHEMA_FILE))
		pending = pending_find(mount, node->view.branch,
				       node->kind == NODE_TABLE_FILE ? SCRATCH_TABLES : SCRATCH_SCHEMA,
				       node->table, &pending_size);
	if (node->view.version == 0 && node->kind == NODE_TABLE_FILE &&
	    workspace_hidden(mount, node->view.branch, node->table) && !pending)
		return -ENOENT;

	struct store_snapshot *snapshot = NULL;
	int rc = view_snapshot(mount, &node->view, &snapshot);
	if (rc < 0)
		return rc;
	struct head_row head;
	struct buf rendered;
	buf_init(&rendered);
	switch (node->kind) {
	case NODE_TABLE_FILE:
	case NODE_HEAD_FILE:
		rc = view_head(mount, snapshot, node->table, &head);
		if (rc == 0)
			rc = attr_from_head(node, &head, st);
		break;
	case NODE_SCHEMA_FILE:
		rc = view_head(mount, snapshot, node->table, &head);
		if (rc == 0) {
			set_time(st, head.commit_time_us);
			rc = view_render(mount, node, snapshot, &rendered);
			st->st_size = (off_t)rendered.size;
		}
		break;
	case NODE_DROPPED_FILE:
		rc = view_dropped_head(snapshot, node->name, &head);
		if (rc == 0)
			rc = attr_from_head(node, &head, st);
		break;
	case NODE_LOG_FILE:
		set_time(st, store_snapshot_time_us(snapshot));
		rc = view_render(mount, node, snapshot, &rendered);
		st->st_size = (off_t)rendered.size;
		break;
	default:
		rc = -EINVAL;
		break;
	}
	if (rc == -ENOENT && pending) {
		st->st_size = (off_t)pending_size;
		rc = 0;
	}
	buf_free(&rendered);
	store_snapshot_release(snapshot);
	st->st_blocks = (st->st_size + 511) / 512;
	return rc < 0 ? rc : 0;
}

/* ---- workspaces ------------------------------------------------------------------ */

struct workspace *workspace_get(struct mount *mount, const char *branch)
{
	pthread_mutex_lock(&mount->workspaces_lock);
	struct workspace *workspace = mount->workspaces;
	while (workspace && strcmp(workspace->branch, branch) != 0)
		workspace = workspace->next;
	if (!workspace) {
		workspace = calloc(1, sizeof *workspace);
		if (workspace) {
			snprintf(workspace->branch, sizeof workspace->branch, "%s", branch);
			pthread_mutex_init(&workspace->lock, NULL);
			pthread_mutex_init(&workspace->commit_lock, NULL);
			workspace->next = mount->workspaces;
			mount->workspaces = workspace;
		}
	}
	pthread_mutex_unlock(&mount->workspaces_lock);
	return workspace;
}
