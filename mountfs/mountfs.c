/*
 * mountfs — lifetime, and the operations of mountfs.h: each resolves its
 * node(s), refreshes the store for live paths (at most once per interval)
 * and hands the work to namespace.c, open_file.c or rules.c.
 *
 * Invariants:
 *   1. A call that hands out an id (lookup, create, mkdir, readdir-plus
 *      entry) adds exactly one lookup to that node; an entry the caller could
 *      not use (fill returned non-zero) is taken back.
 *   2. Notifications for a request's own directory are left to the caller
 *      (struct mountfs_changes), to be sent after its reply.
 *   3. Everything under history/ is read-only (-EROFS).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "mountfs_int.h"

/* ---- lifetime ---------------------------------------------------------------------------- */

int mountfs_new(const struct mountfs_config *config, struct mountfs **out)
{
	*out = NULL;
	struct mountfs *mount = calloc(1, sizeof *mount);
	if (!mount)
		return -ENOMEM;
	const char *branch = config->branch && *config->branch ? config->branch : "main";
	snprintf(mount->branch, sizeof mount->branch, "%s", branch);
	snprintf(mount->temporary_directory, sizeof mount->temporary_directory, "%s",
		 config->temporary_directory ? config->temporary_directory : "/tmp");
	if (gethostname(mount->host, sizeof mount->host) != 0 || !mount->host[0])
		snprintf(mount->host, sizeof mount->host, "localhost");
	mount->host[sizeof mount->host - 1] = '\0';
	mount->read_only = config->read_only;
	mount->log_rejections = config->log_rejections;
	mount->uid = config->uid;
	mount->gid = config->gid;
	mount->umask = config->umask & 0777;
	mount->log = config->log;
	mount->log_context = config->log_context;
	mount->refresh_interval_ms = config->refresh_interval_ms;
	clock_gettime(CLOCK_REALTIME, &mount->mount_time);
	mount->last_refresh_ms = mount_now_ms();
	pthread_mutex_init(&mount->refresh_lock, NULL);
	pthread_mutex_init(&mount->workspaces_lock, NULL);
	pthread_mutex_init(&mount->files_lock, NULL);
	pthread_mutex_init(&mount->errors_lock, NULL);
	pthread_mutex_init(&mount->reads_lock, NULL);
	pthread_mutex_init(&mount->log_lock, NULL);
	buf_init(&mount->log_bytes);
	feed_init(&mount->feed);
	upkeep_init(&mount->upkeep);
	view_cache_init(mount);

	struct store_snapshot *check = NULL;
	mount->store = config->store;
	int rc = store_snapshot_open(mount->store, mount->branch, STORE_LATEST, &check, NULL);
	if (rc == 0) {
		store_snapshot_release(check);
		struct error_info error;
		error_info_clear(&error);
		rc = store_serve_branch(mount->store, mount->branch, config->mountpoint, &error);
		if (rc < 0 && rc != -ENOENT)
			mount_log(mount, LOG_ERR, "cannot record that branch %s is served: %s", mount->branch,
				  error.message[0] ? error.message : strerror(-rc));
	}
	if (rc == 0) {
		/* scratch files live beside the store (scratch.c invariant 1) */
		int made = store_host_directory(mount->store, "scratch", mount->scratch_directory,
						sizeof mount->scratch_directory);
		if (made < 0 && !mount->read_only) {
			mount_log(mount, LOG_ERR, "cannot make the directory for scratch files of %s: %s",
				  store_path(mount->store), strerror(-made));
			rc = made;
		}
	}
	if (rc == 0) {
		struct view root_view = { .version = 0 };
		snprintf(root_view.branch, sizeof root_view.branch, "%s", mount->branch);
		rc = inode_table_init(&mount->inodes, &root_view);
	}
	if (rc < 0) {
		mount->store = NULL;   /* still the caller's */
		mountfs_free(mount);
		return rc;
	}
	*out = mount;
	return 0;
}

static void directory_close(struct mountfs *mount, struct open_directory *directory);

void mountfs_free(struct mountfs *mount)
{
	if (!mount)
		return;
	upkeep_stop(mount);
	open_file_close_all(mount);
	while (mount->directories)
		directory_close(mount, mount->directories);
	scratch_workspaces_free(mount);
	view_cache_free(mount);
	buf_free(&mount->log_bytes);
	feed_free(&mount->feed);
	upkeep_free(&mount->upkeep);
	if (mount->inodes.buckets)
		inode_table_free(&mount->inodes);
	if (mount->store)
		store_close(mount->store);
	pthread_mutex_destroy(&mount->refresh_lock);
	pthread_mutex_destroy(&mount->workspaces_lock);
	pthread_mutex_destroy(&mount->files_lock);
	pthread_mutex_destroy(&mount->errors_lock);
	pthread_mutex_destroy(&mount->reads_lock);
	pthread_mutex_destroy(&mount->log_lock);
	free(mount);
}

void mountfs_fork_before(struct mountfs *mount)
{
	store_threads_pause(mount->store);
}

int mountfs_fork_after(struct mountfs *mount)
{
	return store_threads_resume(mount->store);
}

void mountfs_set_notify(struct mountfs *mount, const struct mountfs_notify *notify)
{
	if (notify)
		mount->notify = *notify;
	else
		memset(&mount->notify, 0, sizeof mount->notify);
}


/* ---- helpers ----------------------------------------------------------------------------- */

static struct node *node_of(struct mountfs *mount, uint64_t id)
{
	return inode_from_id(mount, id);
}

static struct open_file *file_of(uint64_t handle)
{
	return (struct open_file *)(uintptr_t)handle;
}

static uid_t caller_uid(const struct mountfs_caller *caller)
{
	return caller ? caller->uid : getuid();
}

static void changes_clear(struct mountfs_changes *changes)
{
	if (changes)
		memset(changes, 0, sizeof *changes);
}

static void changes_set(struct mountfs_changes *changes, const char *branch, const char *first,
			const char *second, bool removed)
{
	if (!changes)
		return;
	snprintf(changes->branch, sizeof changes->branch, "%s", branch);
	changes->count = 0;
	if (first && first[0])
		snprintf(changes->names[changes->count++], sizeof changes->names[0], "%s", first);
	if (second && second[0])
		snprintf(changes->names[changes->count++], sizeof changes->names[0], "%s", second);
	changes->removed = removed;
}

void mountfs_notify_changes(struct mountfs *mount, const struct mountfs_changes *changes)
{
	if (!changes || changes->count == 0)
		return;
	const char *names[2] = { changes->names[0], changes->names[1] };
	mount_invalidate_branch(mount, changes->branch, names, changes->count, changes->removed);
}

static void fill_open_result(const struct node *node, uint64_t handle, struct mountfs_open_result *out)
{
	memset(out, 0, sizeof *out);
	out->handle = handle;
	if (namespace_is_live(node))
		out->direct_io = true;
	else
		out->keep_cache = true;
}

/* ---- names -------------------------------------------------------------------------------- */

int mountfs_lookup(struct mountfs *mount, uint64_t parent_id, const char *name, struct mountfs_entry *entry)
{
	atomic_fetch_add(&mount->requests, 1);
	memset(entry, 0, sizeof *entry);
	struct node *parent = node_of(mount, parent_id);
	if (!namespace_is_directory(parent->kind))
		return -ENOTDIR;
	if (namespace_is_live(parent))
		mount_refresh(mount);
	struct child child;
	int rc = namespace_resolve(mount, parent, name, &child);
	if (rc == 0)
		rc = namespace_entry(mount, parent, name, &child, entry, NULL);
	if (rc == -ENOENT && !namespace_is_live(parent)) {
		/* History is immutable: the kernel may remember the absence. */
		memset(entry, 0, sizeof *entry);
		entry->entry_timeout = GRAPHFS_HISTORY_TIMEOUT;
	}
	return rc;
}

void mountfs_forget(struct mountfs *mount, uint64_t id, uint64_t count)
{
	inode_forget(mount, node_of(mount, id), count);
}

int mountfs_getattr(struct mountfs *mount, uint64_t id, uint64_t handle, struct stat *out, double *timeout)
{
	atomic_fetch_add(&mount->requests, 1);
	struct node *node = node_of(mount, id);
	if (namespace_is_live(node))
		mount_refresh(mount);
	*timeout = namespace_timeout(node);
	if (handle) {
		/* What this handle reads; not to be kept by the kernel for the path. */
		int rc = open_file_attr(mount, file_of(handle), out);
		if (rc <= 0) {
			*timeout = 0;
			return rc;
		}
	} else if (node->kind == NODE_TABLE_FILE && inode_pinned(mount, node)) {
		/* fstat(2) of a read handle whose table changed since (inode.c invariant 5) */
		int rc = open_file_attr_pinned(mount, node, out);
		if (rc <= 0) {
			*timeout = 0;
			return rc;
		}
	}
	return namespace_attr(mount, node, out);
}

int mountfs_setattr(struct mountfs *mount, uint64_t id, uint64_t handle, const struct stat *attr,
		    int to_set, const struct mountfs_caller *caller, struct stat *out, double *timeout,
		    struct mountfs_changes *changes)
{
	atomic_fetch_add(&mount->requests, 1);
	changes_clear(changes);
	struct node *node = node_of(mount, id);
	if (!namespace_is_live(node) || mount->read_only)
		return -EROFS;
	struct open_file *file = handle ? file_of(handle) : NULL;
	int rc = 0;
	bool published = false;
	/* The owner and mode of store files are the mount's (uid=, gid=, umask=): a chmod or
	 * chown of one would not be kept, so it fails. Scratch files keep their own modes;
	 * directories accept and ignore them (rsync -a sets the destination directory's). */
	if ((to_set & (MOUNTFS_SET_MODE | MOUNTFS_SET_UID | MOUNTFS_SET_GID)) &&
	    namespace_content_of(node->kind) != CONTENT_SCRATCH && !namespace_is_directory(node->kind))
		return -EPERM;
	if (to_set & MOUNTFS_SET_SIZE) {
		enum node_content content = namespace_content_of(node->kind);
		switch (content) {
		case CONTENT_TABLE:
		case CONTENT_SCHEMA:
		case CONTENT_SCRATCH:
			rc = open_file_truncate(mount, node, file, (uint64_t)attr->st_size, caller_uid(caller));
			published = !file && content != CONTENT_SCRATCH;
			break;
		default:
			rc = namespace_is_directory(node->kind) ? -EISDIR : -EACCES;
			break;
		}
	}
	if (rc == 0 && namespace_content_of(node->kind) == CONTENT_SCRATCH) {
		struct scratch *scratch = scratch_find(mount, node->parent, node->name);
		if (scratch) {
			scratch_set_attr(scratch, attr, to_set);
			scratch_release(scratch);
		}
	}
	/* Times of store files are not stored: accepted and ignored so that touch works. */
	if (rc == 0)
		rc = mountfs_getattr(mount, id, handle, out, timeout);
	if (rc == 0 && published)
		changes_set(changes, node->view.branch, node->table, NULL, false);
	return rc;
}

int mountfs_readlink(struct mountfs *mount, uint64_t id, char *out, size_t size)
{
	return namespace_readlink(mount, node_of(mount, id), out, size);
}

int mountfs_mkdir(struct mountfs *mount, uint64_t parent_id, const char *name, mode_t mode,
		  const struct mountfs_caller *caller, struct mountfs_entry *entry)
{
	atomic_fetch_add(&mount->requests, 1);
	struct node *parent = node_of(mount, parent_id);
	int rc = rules_mkdir(mount, parent, name, caller_uid(caller));
	if (rc < 0)
		return rc;
	struct child child;
	rc = namespace_resolve(mount, parent, name, &child);
	if (rc == 0)
		rc = namespace_entry(mount, parent, name, &child, entry, NULL);
	return rc;
}

int mountfs_rmdir(struct mountfs *mount, uint64_t parent_id, const char *name,
		  const struct mountfs_caller *caller)
{
	atomic_fetch_add(&mount->requests, 1);
	struct node *parent = node_of(mount, parent_id);
	int rc = rules_rmdir(mount, parent, name, caller_uid(caller));
	if (rc == 0)
		inode_detach(mount, parent, name);
	return rc;
}

int mountfs_unlink(struct mountfs *mount, uint64_t parent_id, const char *name,
		   const struct mountfs_caller *caller, struct mountfs_changes *changes)
{
	atomic_fetch_add(&mount->requests, 1);
	changes_clear(changes);
	struct node *parent = node_of(mount, parent_id);
	char dropped[JOURNAL_NAME_MAX + 1];
	int rc = rules_unlink(mount, parent, name, caller_uid(caller), dropped);
	if (rc == 0) {
		inode_detach(mount, parent, name);
		changes_set(changes, parent->view.branch, dropped, NULL, true);
		/* schema/X.json and heads/X.json went with tables/X.jsonl: their entries go
		 * before the reply, or the caller's next open of schema/X.json may reach a
		 * kernel entry that still names the dropped table (ENOENT, not a create) */
		const char *names[1] = { dropped };
		if (dropped[0] && namespace_is_live(parent))
			mount_invalidate_entries_beside(mount, parent->view.branch, names, 1, parent_id, parent_id);
	}
	return rc;
}

int mountfs_rename(struct mountfs *mount, uint64_t parent_id, const char *name, uint64_t new_parent_id,
		   const char *new_name, unsigned flags, const struct mountfs_caller *caller,
		   struct mountfs_changes *changes)
{
	atomic_fetch_add(&mount->requests, 1);
	changes_clear(changes);
	struct node *parent = node_of(mount, parent_id);
	struct node *new_parent = node_of(mount, new_parent_id);
	if (flags & RENAME_EXCHANGE)
		return -EINVAL;
	if (flags & RENAME_NOREPLACE) {
		struct child existing;
		if (namespace_resolve(mount, new_parent, new_name, &existing) == 0)
			return -EEXIST;
	}
	char changed[2][JOURNAL_NAME_MAX + 1];
	int rc = rules_rename(mount, parent, name, new_parent, new_name, caller_uid(caller), changed);
	if (rc < 0)
		return rc;
	struct child child;
	struct node *node = inode_find(mount, parent, name);
	if (node) {
		if (namespace_resolve(mount, new_parent, new_name, &child) == 0)
			inode_move(mount, node, new_parent, new_name, child.kind, child.table);
		else
			inode_detach(mount, parent, name);
		inode_release(mount, node);
	} else {
		inode_detach(mount, new_parent, new_name);
	}
	changes_set(changes, parent->view.branch, changed[0], changed[1], true);
	/* as for an unlink: the other directories' entries of both names before the reply */
	const char *names[2];
	size_t count = 0;
	for (size_t i = 0; i < 2; i++)
		if (changed[i][0])
			names[count++] = changed[i];
	if (count && namespace_is_live(parent))
		mount_invalidate_entries_beside(mount, parent->view.branch, names, count, parent_id, new_parent_id);
	return 0;
}

int mountfs_make_node(struct mountfs *mount, uint64_t parent_id, const char *name)
{
	atomic_fetch_add(&mount->requests, 1);
	struct node *parent = node_of(mount, parent_id);
	if (!namespace_is_live(parent) || mount->read_only)
		return -EROFS;
	struct child child;
	if (namespace_resolve(mount, parent, name, &child) == 0)
		return -EEXIST;
	return -EPERM;
}

/* ---- files ---------------------------------------------------------------------------------- */

/* Based writes (reads.c): a read of a live table notes its version for the process; an
 * O_TRUNC write of it by a process that read it is based on what it read. */
static void note_process(struct mountfs *mount, const struct node *node, struct open_file *file, int flags,
			 const struct mountfs_caller *caller)
{
	if (!caller || caller->pid <= 0 || node->kind != NODE_TABLE_FILE || !namespace_is_live(node))
		return;
	uint64_t version;
	if (open_file_read_version(file, &version)) {
		reads_note(mount, caller->pid, node->view.branch, node->table, version);
	} else if (flags & O_TRUNC) {
		uint64_t base = reads_base(mount, caller->pid, node->view.branch, node->table);
		if (base)
			open_file_set_read_base(file, base);
	}
}

int mountfs_open(struct mountfs *mount, uint64_t id, int flags, const struct mountfs_caller *caller,
		 struct mountfs_open_result *out)
{
	atomic_fetch_add(&mount->requests, 1);
	struct node *node = node_of(mount, id);
	int reach = namespace_is_live(node) ? mount_refresh_now(mount) : 0;   /* close-to-open */
	if (store_error_is_unreachable(reach) && (flags & O_ACCMODE) != O_RDONLY && node->kind == NODE_TABLE_FILE) {
		char path[GRAPHFS_PATH_MAX];
		inode_path(mount, node, path, sizeof path);
		mount_error_refuse(mount, path, -EIO, "the object store is out of reach (%s): nothing can be written "
				   "until it is back", strerror(-reach));
		return -EIO;
	}
	struct open_file *file = NULL;
	int rc = open_file_open(mount, node, flags, false, caller_uid(caller), &file);
	if (rc < 0)
		return rc;
	note_process(mount, node, file, flags, caller);
	fill_open_result(node, (uint64_t)(uintptr_t)file, out);
	return 0;
}

int mountfs_create(struct mountfs *mount, uint64_t parent_id, const char *name, mode_t mode, int flags,
		   const struct mountfs_caller *caller, struct mountfs_entry *entry,
		   struct mountfs_open_result *out)
{
	atomic_fetch_add(&mount->requests, 1);
	memset(entry, 0, sizeof *entry);
	struct node *parent = node_of(mount, parent_id);
	if (!namespace_is_live(parent) || mount->read_only)
		return -EROFS;
	if (parent->kind != NODE_TABLES_DIR && parent->kind != NODE_SCHEMA_DIR &&
	    parent->kind != NODE_STAGING_DIR && parent->kind != NODE_STAGED_SCHEMA_DIR)
		return -EACCES;
	if (strlen(name) > GRAPHFS_NAME_MAX)
		return -ENAMETOOLONG;
	struct child child;
	int rc = namespace_resolve(mount, parent, name, &child);
	if (rc < 0 && rc != -ENOENT) {
		/* Only an absent name is created: an error reading the head must not
		 * turn an O_CREAT open of an existing table into an overwrite. */
		return rc;
	}
	bool exists = rc == 0;
	bool created = false;
	if (exists && (flags & O_EXCL))
		return -EEXIST;
	if (!exists) {
		memset(&child, 0, sizeof child);
		child.view = parent->view;
		bool schema_directory = parent->kind == NODE_SCHEMA_DIR || parent->kind == NODE_STAGED_SCHEMA_DIR;
		const char *suffix = schema_directory ? ".json" : ".jsonl";
		bool is_table = names_table_from_file(name, suffix, child.table);
		/* a name that is refused rather than kept as a scratch file lost at unmount */
		char spelled[JOURNAL_NAME_MAX + 1];
		bool misspelled = !is_table && !schema_directory && names_is_data_spelling(name, spelled);
		if (misspelled || (!is_table && !names_is_scratch(name, suffix))) {
			char path[GRAPHFS_PATH_MAX];
			scratch_path(mount, parent->view.branch, scratch_dir_of(parent), name, path, sizeof path);
			if (misspelled)
				mount_error_refuse(mount, path, -EINVAL,
						   "tables are <Name>.jsonl: \"%s\" would be a scratch file, never stored; write %s.jsonl",
						   name, spelled);
			else
				mount_error_refuse(mount, path, -EINVAL,
						   "\"%s\" is not a table name: a table name is a letter or '_' followed by up to 127 letters, digits or '_'; scratch files start with '.', end in '~' or do not end in %s",
						   name, suffix);
			return -EINVAL;
		}
		if (parent->kind == NODE_STAGING_DIR || parent->kind == NODE_STAGED_SCHEMA_DIR || !is_table) {
			rc = scratch_create(mount, parent, name, mode, caller ? caller->uid : getuid(),
					    caller ? caller->gid : getgid());
			if (rc < 0 && rc != -EEXIST)
				return rc;
			child.kind = parent->kind == NODE_STAGING_DIR && is_table ? NODE_STAGED_FILE
										  : NODE_SCRATCH_FILE;
			if (child.kind != NODE_STAGED_FILE)
				child.table[0] = '\0';
			created = rc == 0;
		} else {
			child.kind = parent->kind == NODE_SCHEMA_DIR ? NODE_SCHEMA_FILE : NODE_TABLE_FILE;
			created = true;
		}
	}
	struct node *node = inode_get(mount, parent, name, child.kind, &child.view, child.table, 1);
	if (!node)
		return -ENOMEM;
	if (child.kind == NODE_SCRATCH_FILE || child.kind == NODE_STAGED_FILE)
		namespace_bind_scratch(mount, node);
	struct open_file *file = NULL;
	rc = open_file_open(mount, node, flags, created, caller_uid(caller), &file);
	if (rc == 0)
		rc = open_file_attr(mount, file, &entry->attr);
	if (rc == 1)
		rc = namespace_attr(mount, node, &entry->attr);
	if (rc < 0) {
		if (file)
			open_file_release(mount, file);
		inode_forget(mount, node, 1);
		memset(entry, 0, sizeof *entry);
		return rc;
	}
	if (exists)
		note_process(mount, node, file, flags, caller);
	entry->id = inode_id(mount, node);
	entry->attr_timeout = namespace_timeout(node);
	entry->entry_timeout = namespace_timeout(node);
	fill_open_result(node, (uint64_t)(uintptr_t)file, out);
	return 0;
}

ssize_t mountfs_read(struct mountfs *mount, uint64_t handle, char *out, size_t size, off_t offset)
{
	atomic_fetch_add(&mount->requests, 1);
	return open_file_read(mount, file_of(handle), out, size, offset);
}

ssize_t mountfs_write(struct mountfs *mount, uint64_t handle, const char *bytes, size_t size, off_t offset,
		      const struct mountfs_caller *caller)
{
	atomic_fetch_add(&mount->requests, 1);
	return open_file_write(mount, file_of(handle), bytes, size, offset, caller_uid(caller));
}

int mountfs_flush(struct mountfs *mount, uint64_t handle)
{
	atomic_fetch_add(&mount->requests, 1);
	return open_file_flush(mount, file_of(handle));
}

int mountfs_fsync(struct mountfs *mount, uint64_t handle)
{
	return open_file_fsync(mount, file_of(handle));
}

void mountfs_release(struct mountfs *mount, uint64_t handle)
{
	open_file_release(mount, file_of(handle));
}

/* ---- directories ------------------------------------------------------------------------------ */

int mountfs_opendir(struct mountfs *mount, uint64_t id, struct mountfs_open_result *out)
{
	atomic_fetch_add(&mount->requests, 1);
	struct node *node = node_of(mount, id);
	if (!namespace_is_directory(node->kind))
		return -ENOTDIR;
	if (namespace_is_live(node))
		mount_refresh(mount);
	struct open_directory *directory = calloc(1, sizeof *directory);
	if (!directory)
		return -ENOMEM;
	int rc = namespace_list(mount, node, &directory->listing);
	if (rc < 0) {
		free(directory);
		return rc;
	}
	pthread_mutex_lock(&mount->files_lock);
	directory->next = mount->directories;
	if (mount->directories)
		mount->directories->previous = directory;
	mount->directories = directory;
	pthread_mutex_unlock(&mount->files_lock);
	memset(out, 0, sizeof *out);
	out->handle = (uint64_t)(uintptr_t)directory;
	out->cache_readdir = !namespace_is_live(node);
	return 0;
}

/* Unlinks directory from the mount's list and frees it. */
static void directory_close(struct mountfs *mount, struct open_directory *directory)
{
	pthread_mutex_lock(&mount->files_lock);
	if (directory->previous)
		directory->previous->next = directory->next;
	else
		mount->directories = directory->next;
	if (directory->next)
		directory->next->previous = directory->previous;
	pthread_mutex_unlock(&mount->files_lock);
	listing_free(&directory->listing);
	free(directory);
}

void mountfs_releasedir(struct mountfs *mount, uint64_t handle)
{
	directory_close(mount, (struct open_directory *)(uintptr_t)handle);
}

int mountfs_readdir(struct mountfs *mount, uint64_t id, uint64_t handle, uint64_t offset, bool plus,
		    mountfs_fill_fn fill, void *context)
{
	atomic_fetch_add(&mount->requests, 1);
	struct node *parent = node_of(mount, id);
	struct dir_listing *listing = &((struct open_directory *)(uintptr_t)handle)->listing;
	for (uint64_t i = offset; i < listing_size(listing); i++) {
		struct child scratch;
		const struct child *child;
		bool dot;
		const char *name = listing_entry(listing, parent, i, &scratch, &child, &dot);
		struct mountfs_entry entry;
		memset(&entry, 0, sizeof entry);
		struct node *node = NULL;
		if (dot) {
			entry.attr.st_mode = S_IFDIR;
			entry.attr.st_ino = i == 0 || !parent->parent ? parent->st_ino : parent->parent->st_ino;
		} else if (plus) {
			if (namespace_entry(mount, parent, name, child, &entry, &node) < 0)
				continue;   /* gone since opendir */
		} else {
			entry.attr.st_mode = namespace_is_directory(child->kind) ? S_IFDIR
					     : namespace_is_link(child->kind) ? S_IFLNK : S_IFREG;
			entry.attr.st_ino = inode_number(parent, name, child->kind, &child->view);
		}
		if (fill(context, name, &entry, i + 1) != 0) {
			if (node)
				inode_forget(mount, node, 1);
			break;
		}
	}
	return 0;
}

/* ---- the rest ------------------------------------------------------------------------------------ */

int mountfs_statfs(struct mountfs *mount, struct statvfs *out)
{
	if (statvfs(store_path(mount->store), out) != 0)
		memset(out, 0, sizeof *out);
	out->f_namemax = GRAPHFS_NAME_MAX;
	if (mount->read_only)
		out->f_flag |= ST_RDONLY;
	return 0;
}

static const char *const xattr_names[] = {
	"user.graphfs.stable_id", "user.graphfs.incarnation", "user.graphfs.version",
	"user.graphfs.rows", "user.graphfs.commit",
};
#define XATTR_COUNT (sizeof xattr_names / sizeof xattr_names[0])

/* Table, head and dropped-head files: the files that show a head row. */
static bool has_xattrs(const struct node *node)
{
	return namespace_shows_head(node->kind);
}

static ssize_t reply_value(const char *value, size_t length, char *out, size_t size)
{
	if (size == 0)
		return (ssize_t)length;
	if (size < length)
		return -ERANGE;
	memcpy(out, value, length);
	return (ssize_t)length;
}

ssize_t mountfs_getxattr(struct mountfs *mount, uint64_t id, const char *name, char *out, size_t size)
{
	atomic_fetch_add(&mount->requests, 1);
	struct node *node = node_of(mount, id);
	if (strncmp(name, "user.", 5) != 0) {
		/* security.*, system.* (ACLs), trusted.*: not supported by this file
		 * system. EOPNOTSUPP (not ENODATA) lets ls, cp and others remember
		 * that per device and stop asking, as they do on file systems
		 * without xattrs; the store is not touched. */
		return -EOPNOTSUPP;
	}
	size_t which = XATTR_COUNT;
	for (size_t i = 0; i < XATTR_COUNT; i++)
		if (strcmp(name, xattr_names[i]) == 0)
			which = i;
	if (!has_xattrs(node) || which == XATTR_COUNT)
		return -ENODATA;
	struct head_row head;
	int rc = namespace_head(mount, node, &head);
	if (rc < 0)
		return rc == -ENOENT ? -ENODATA : rc;
	char value[64];
	switch (which) {
	case 0:
		ulid_format(&head.stable_id, value);
		break;
	case 1:
		ulid_format(&head.incarnation, value);
		break;
	case 2:
		snprintf(value, sizeof value, "%" PRIu64, head.table_version);
		break;
	case 3:
		snprintf(value, sizeof value, "%" PRIu64, head.row_count);
		break;
	default:
		ulid_format(&head.commit, value);
		break;
	}
	return reply_value(value, strlen(value), out, size);
}

ssize_t mountfs_listxattr(struct mountfs *mount, uint64_t id, char *out, size_t size)
{
	struct node *node = node_of(mount, id);
	char list[256];
	size_t length = 0;
	if (has_xattrs(node))
		for (size_t i = 0; i < XATTR_COUNT; i++) {
			size_t part = strlen(xattr_names[i]) + 1;
			memcpy(list + length, xattr_names[i], part);
			length += part;
		}
	return reply_value(list, length, out, size);
}
