/*
 * mountfs_fixture — a mounted tree without the kernel: a fresh store in a
 * test directory, a struct mountfs over it, and the system calls a tool
 * makes, spelled as the kernel would send them (lookup each component, then
 * create or open, writes, flush, release). Included by test_mountfs*.c only.
 */
#ifndef GRAPHFS_MOUNTFS_FIXTURE_H
#define GRAPHFS_MOUNTFS_FIXTURE_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "mountfs.h"

struct fixture {
	char store_path[512];
	struct store *store;         /* the mount's (do not close) */
	struct mountfs *mount;
	struct mountfs_caller caller;
	char last_error[2048];       /* the last line of .graphfs/errors after fs_errors() */
};

static struct fixture fx;

/* A new store with branch main, mounted. Returns 0 or -errno. */
static int fixture_open_branch(const char *branch)
{
	memset(&fx, 0, sizeof fx);
	snprintf(fx.store_path, sizeof fx.store_path, "%s/store", harness_temp_directory());
	struct error_info error;
	error_info_clear(&error);
	int rc = store_init(fx.store_path, &error);
	if (rc < 0)
		return rc;
	rc = store_open(fx.store_path, NULL, &fx.store, &error);
	if (rc < 0)
		return rc;
	struct mountfs_config config = {
		.store = fx.store,
		.branch = branch,
		.temporary_directory = harness_temp_directory(),
		.refresh_interval_ms = 0,
		.uid = getuid(),
		.gid = getgid(),
		.umask = 022,
	};
	rc = mountfs_new(&config, &fx.mount);
	if (rc < 0) {
		store_close(fx.store);
		return rc;
	}
	fx.caller.uid = getuid();
	fx.caller.gid = getgid();
	fx.caller.pid = getpid();
	return 0;
}

static int fixture_open(void)
{
	return fixture_open_branch(NULL);
}

static void fixture_close(void)
{
	mountfs_free(fx.mount);
	fx.mount = NULL;
	fx.store = NULL;
}

/* Resolves a path inside the mount ("" is the root) to an id (lookups are kept:
 * mountfs_free frees everything). 0, -ENOENT, -errno. */
static int fs_resolve(const char *path, uint64_t *out)
{
	uint64_t id = MOUNTFS_ROOT_ID;
	char copy[1024];
	snprintf(copy, sizeof copy, "%s", path);
	char *saved = NULL;
	for (char *part = strtok_r(copy, "/", &saved); part; part = strtok_r(NULL, "/", &saved)) {
		struct mountfs_entry entry;
		int rc = mountfs_lookup(fx.mount, id, part, &entry);
		if (rc < 0)
			return rc;
		id = entry.id;
	}
	*out = id;
	return 0;
}

/* Splits "a/b/c" into the parent's id and the last name. */
static int fs_parent(const char *path, uint64_t *parent, const char **name)
{
	const char *slash = strrchr(path, '/');
	*name = slash ? slash + 1 : path;
	char directory[1024] = "";
	if (slash)
		snprintf(directory, sizeof directory, "%.*s", (int)(slash - path), path);
	return fs_resolve(directory, parent);
}

/* open(2): O_CREAT creates a missing name (mode), as the kernel does. Returns the handle
 * in *handle and the node id in *id (either may be NULL). 0 or -errno. */
static int fs_open(const char *path, int flags, mode_t mode, uint64_t *handle, uint64_t *id)
{
	uint64_t parent, node = 0;
	const char *name;
	int rc = fs_parent(path, &parent, &name);
	if (rc < 0)
		return rc;
	struct mountfs_entry entry;
	struct mountfs_open_result result;
	rc = mountfs_lookup(fx.mount, parent, name, &entry);
	if (rc == 0 && (flags & O_CREAT) && (flags & O_EXCL))
		return -EEXIST;
	if (rc == 0) {
		node = entry.id;
		rc = mountfs_open(fx.mount, node, flags & ~(O_CREAT | O_EXCL), &fx.caller, &result);
	} else if (rc == -ENOENT && (flags & O_CREAT)) {
		rc = mountfs_create(fx.mount, parent, name, mode, flags, &fx.caller, &entry, &result);
		node = entry.id;
	}
	if (rc < 0)
		return rc;
	if (handle)
		*handle = result.handle;
	if (id)
		*id = node;
	return 0;
}

/* close(2): flush then release; the flush's error. */
static int fs_close(uint64_t handle)
{
	int rc = mountfs_flush(fx.mount, handle);
	mountfs_release(fx.mount, handle);
	return rc;
}

/* Writes text at offset (O_APPEND handles ignore it, as the kernel's end of file). */
static int fs_write_at(uint64_t handle, const char *text, off_t offset)
{
	ssize_t written = mountfs_write(fx.mount, handle, text, strlen(text), offset, &fx.caller);
	return written < 0 ? (int)written : 0;
}

/* The whole of a shell redirection: open with flags, one write(2), close(2).
 * Returns the first error (open, write, then close). */
static int fs_write_file(const char *path, int flags, const char *text)
{
	uint64_t handle;
	int rc = fs_open(path, flags, 0644, &handle, NULL);
	if (rc < 0)
		return rc;
	int written = text && *text ? fs_write_at(handle, text, 0) : 0;
	int closed = fs_close(handle);
	return written < 0 ? written : closed;
}

static int fs_overwrite(const char *path, const char *text)
{
	return fs_write_file(path, O_WRONLY | O_CREAT | O_TRUNC, text);
}

static int fs_append(const char *path, const char *text)
{
	return fs_write_file(path, O_WRONLY | O_CREAT | O_APPEND, text);
}

/* Reads a whole file into out (NUL-terminated). Returns the byte count or -errno. */
static ssize_t fs_read_file(const char *path, char *out, size_t size)
{
	uint64_t handle;
	int rc = fs_open(path, O_RDONLY, 0, &handle, NULL);
	if (rc < 0)
		return rc;
	size_t used = 0;
	for (;;) {
		ssize_t got = mountfs_read(fx.mount, handle, out + used, size - 1 - used, (off_t)used);
		if (got < 0) {
			mountfs_release(fx.mount, handle);
			return got;
		}
		if (got == 0 || used + (size_t)got >= size - 1) {
			used += (size_t)got;
			break;
		}
		used += (size_t)got;
	}
	out[used] = '\0';
	mountfs_release(fx.mount, handle);
	return (ssize_t)used;
}

static int fs_stat(const char *path, struct stat *st)
{
	uint64_t id;
	int rc = fs_resolve(path, &id);
	if (rc < 0)
		return rc;
	double timeout;
	return mountfs_getattr(fx.mount, id, 0, st, &timeout);
}

static int fs_rename(const char *from, const char *to)
{
	uint64_t parent, new_parent;
	const char *name, *new_name;
	int rc = fs_parent(from, &parent, &name);
	if (rc == 0)
		rc = fs_parent(to, &new_parent, &new_name);
	if (rc < 0)
		return rc;
	struct mountfs_changes changes;
	rc = mountfs_rename(fx.mount, parent, name, new_parent, new_name, 0, &fx.caller, &changes);
	if (rc == 0)
		mountfs_notify_changes(fx.mount, &changes);
	return rc;
}

static int fs_unlink(const char *path)
{
	uint64_t parent;
	const char *name;
	int rc = fs_parent(path, &parent, &name);
	if (rc < 0)
		return rc;
	struct mountfs_changes changes;
	rc = mountfs_unlink(fx.mount, parent, name, &fx.caller, &changes);
	if (rc == 0)
		mountfs_notify_changes(fx.mount, &changes);
	return rc;
}

static int fs_mkdir(const char *path)
{
	uint64_t parent;
	const char *name;
	int rc = fs_parent(path, &parent, &name);
	if (rc < 0)
		return rc;
	struct mountfs_entry entry;
	return mountfs_mkdir(fx.mount, parent, name, 0755, &fx.caller, &entry);
}

static int fs_rmdir(const char *path)
{
	uint64_t parent;
	const char *name;
	int rc = fs_parent(path, &parent, &name);
	if (rc < 0)
		return rc;
	return mountfs_rmdir(fx.mount, parent, name, &fx.caller);
}

/* The store's version (the number of commits made so far). */
static uint64_t fs_version(void)
{
	store_refresh(fx.store, NULL);
	return store_version(fx.store);
}

/* Whether .graphfs/errors mentions text (the last line is kept in fx.last_error). */
static int fs_errors_mention(const char *text)
{
	static char errors[1 << 16];
	if (fs_read_file(".graphfs/errors", errors, sizeof errors) < 0)
		return 0;
	size_t length = strlen(errors);
	while (length > 0 && errors[length - 1] == '\n')
		errors[--length] = '\0';
	const char *last = strrchr(errors, '\n');
	const char *line = last ? last + 1 : errors;
	size_t length_kept = strlen(line) < sizeof fx.last_error - 1 ? strlen(line) : sizeof fx.last_error - 1;
	memcpy(fx.last_error, line, length_kept);
	fx.last_error[length_kept] = '\0';
	return strstr(errors, text) != NULL;
}

/* A directory's names, one per line, through mountfs_readdir in small batches. */
struct names_collector {
	char *out;
	size_t size;
	size_t used;
	size_t room;          /* entries accepted per call; 0: unlimited */
	size_t taken;
	int zero_inodes;
	size_t count;
	const char *watch;    /* a name whose inode number to keep */
	uint64_t watched_ino;
};

static int collect_name(void *context, const char *name, const struct mountfs_entry *entry,
			uint64_t next)
{
	(void)next;
	struct names_collector *collector = context;
	if (collector->room && collector->taken == collector->room)
		return 1;
	collector->taken++;
	if (entry->attr.st_ino == 0)
		collector->zero_inodes++;
	if (collector->watch && strcmp(name, collector->watch) == 0)
		collector->watched_ino = entry->attr.st_ino;
	collector->count++;
	int written = snprintf(collector->out + collector->used, collector->size - collector->used, "%s\n", name);
	if (written > 0 && (size_t)written < collector->size - collector->used)
		collector->used += (size_t)written;
	return 0;
}

/* Lists path with plain (plus false) or plus entries, batch entries per call. */
static int fs_list(const char *path, bool plus, size_t batch, struct names_collector *collector)
{
	uint64_t id;
	int rc = fs_resolve(path, &id);
	if (rc < 0)
		return rc;
	struct mountfs_open_result directory;
	rc = mountfs_opendir(fx.mount, id, &directory);
	if (rc < 0)
		return rc;
	collector->room = batch;
	uint64_t offset = 0;
	for (;;) {
		collector->taken = 0;
		size_t before = collector->count;
		rc = mountfs_readdir(fx.mount, id, directory.handle, offset, plus, collect_name, collector);
		if (rc < 0 || collector->count == before)
			break;
		offset += collector->count - before;
	}
	mountfs_releasedir(fx.mount, directory.handle);
	return rc;
}

#endif
