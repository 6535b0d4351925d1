/*
 * notify — what the mount tells others: diagnostics through the log hook,
 * rejected writes in .graphfs/errors, and the kernel's caches after commits
 * (this mount's, and other processes' found by a refresh).
 *
 * Invariants:
 *   1. Commits by other processes become visible within refresh_interval_ms +
 *      GRAPHFS_LIVE_TIMEOUT: live requests refresh the store at most once per
 *      interval, and cached live attributes and entries expire after the live
 *      timeout.
 *   2. After a commit this mount made, the notify hooks hear of every live
 *      file of the tables it changed (and of the branch's log) before the
 *      request that made it returns, or right after its reply for requests
 *      that hold the directory (struct mountfs_changes).
 *   3. .graphfs/errors keeps the last GRAPHFS_ERRORS_KEPT rejected writes.
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

void mount_log(struct mountfs *mount, int priority, const char *format, ...)
{
	if (!mount->log)
		return;
	char line[2048];
	va_list arguments;
	va_start(arguments, format);
	vsnprintf(line, sizeof line, format, arguments);
	va_end(arguments);
	mount->log(mount->log_context, priority, line);
}

void mount_error_refuse(struct mountfs *mount, const char *path, int code, const char *format, ...)
{
	struct error_info error;
	error_info_clear(&error);
	va_list arguments;
	va_start(arguments, format);
	vsnprintf(error.message, sizeof error.message, format, arguments);
	va_end(arguments);
	error.code = code;
	mount_error_record(mount, path, &error, code);
}

void mount_actor(struct mountfs *mount, uid_t uid, char *out, size_t size)
{
	struct passwd entry, *found = NULL;
	char buffer[1024];
	if (getpwuid_r(uid, &entry, buffer, sizeof buffer, &found) == 0 && found)
		snprintf(out, size, "%s@%s", found->pw_name, mount->host);
	else
		snprintf(out, size, "%u@%s", (unsigned)uid, mount->host);
}

int mount_txn_begin(struct mountfs *mount, const char *branch, uid_t uid, struct store_txn **out,
		    struct error_info *error)
{
	int rc = store_txn_begin(mount->store, branch, out, error);
	if (rc < 0)
		return rc;
	char actor[512];
	mount_actor(mount, uid, actor, sizeof actor);
	rc = store_txn_set_actor(*out, actor);
	if (rc < 0) {
		store_txn_free(*out);
		*out = NULL;
	}
	return rc;
}

uint64_t mount_now_ms(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
}

/* ---- .graphfs/errors ------------------------------------------------------------ */

void mount_error_record(struct mountfs *mount, const char *path, const struct error_info *error,
			int code)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	char time_text[32];
	journal_format_time((uint64_t)now.tv_sec * 1000000 + (uint64_t)now.tv_nsec / 1000, time_text);
	const char *reason = error && error->message[0] ? error->message : strerror(code < 0 ? -code : code);
	json_t *line = json_object();
	json_object_set_new(line, "time", json_string(time_text));
	json_object_set_new(line, "path", json_string(path));
	json_object_set_new(line, "line", json_integer(error ? (json_int_t)error->line : 0));
	json_object_set_new(line, "errno", json_integer(code < 0 ? -code : code));
	json_object_set_new(line, "reason", json_string(reason));
	char *text = json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
	json_decref(line);
	atomic_fetch_add(&mount->rejected, 1);
	if (!text)
		return;
	pthread_mutex_lock(&mount->errors_lock);
	struct error_line *slot = &mount->errors[mount->errors_next];
	snprintf(slot->text, sizeof slot->text, "%s", text);
	mount->errors_next = (mount->errors_next + 1) % GRAPHFS_ERRORS_KEPT;
	if (mount->errors_count < GRAPHFS_ERRORS_KEPT)
		mount->errors_count++;
	pthread_mutex_unlock(&mount->errors_lock);
	if (mount->log_rejections)
		mount_log(mount, LOG_INFO, "rejected: %s", text);
	free(text);
}

int mount_errors_render(struct mountfs *mount, struct buf *out)
{
	int rc = 0;
	pthread_mutex_lock(&mount->errors_lock);
	size_t first = (mount->errors_next + GRAPHFS_ERRORS_KEPT - mount->errors_count) % GRAPHFS_ERRORS_KEPT;
	for (size_t i = 0; i < mount->errors_count && rc >= 0; i++) {
		const struct error_line *line = &mount->errors[(first + i) % GRAPHFS_ERRORS_KEPT];
		rc = buf_printf(out, "%s\n", line->text);
	}
	pthread_mutex_unlock(&mount->errors_lock);
	return rc < 0 ? rc : 0;
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
	struct mountfs *mount;
};

static bool names_match(const struct invalidation *work, const struct node *node)
{
	if (!work->names || node->kind == NODE_LOG_FILE)
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
	if (!node_is_directory(node->kind)) {
		if (names_match(work, node))
			add_inode(work, id);
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

static void invalidate(struct mountfs *mount, const char *branch, const char *const *names,
		       size_t name_count, bool removed)
{
	struct invalidation work = { .branch = branch, .names = names, .name_count = name_count,
				     .removed = removed, .mount = mount };
	inode_visit(mount, collect_live, &work);
	if (mount->notify.invalidate_inode)
		for (size_t i = 0; i < work.inode_count; i++)
			mount->notify.invalidate_inode(mount->notify.context, work.inodes[i]);
	if (mount->notify.invalidate_entry)
		for (size_t i = 0; i < work.entry_count; i++)
			mount->notify.invalidate_entry(mount->notify.context, work.entries[i].parent,
						       work.entries[i].name);
	free(work.inodes);
	free(work.entries);
}

void mount_invalidate_branch(struct mountfs *mount, const char *branch, const char *const *names,
			     size_t name_count, bool removed)
{
	view_cache_drop_live(mount);
	struct workspace *workspace = workspace_get(mount, branch);
	if (workspace)
		workspace_touch(workspace);
	invalidate(mount, branch, names, name_count, removed);
}

void mount_refresh(struct mountfs *mount)
{
	uint64_t now = mount_now_ms();
	pthread_mutex_lock(&mount->refresh_lock);
	if (now - mount->last_refresh_ms < mount->refresh_interval_ms) {
		pthread_mutex_unlock(&mount->refresh_lock);
		return;
	}
	mount->last_refresh_ms = now;
	pthread_mutex_unlock(&mount->refresh_lock);
	bool changed = false;
	int rc = store_refresh(mount->store, &changed);
	atomic_fetch_add(&mount->refreshes, 1);
	if (rc < 0) {
		mount_log(mount, LOG_ERR, "refreshing the store failed: %s", strerror(-rc));
		return;
	}
	if (changed) {
		view_cache_drop_live(mount);
		pthread_mutex_lock(&mount->workspaces_lock);
		for (struct workspace *workspace = mount->workspaces; workspace; workspace = workspace->next)
			workspace_touch(workspace);
		pthread_mutex_unlock(&mount->workspaces_lock);
		/* Attributes only: entries of a directory whose lookup is in flight
		 * cannot be invalidated from here; they expire after the live timeout. */
		invalidate(mount, NULL, NULL, 0, false);
	}
}

