/*
 * scratch — the mount's private files and names: scratch files (editors' and
 * tools' temporary names, staged tables), table names an open handle is
 * creating (pending), and table names hidden because this mount renamed them
 * to a scratch name.
 *
 * Invariants:
 *   1. A named scratch file has a backing file, an ordinary file at
 *      <scratch directory>/<branch>/<kind>/<name> (docs/MOUNT.md "Scratch
 *      files"): nothing of it reaches the store until a rename onto a table
 *      name or a staging commit, and it outlives the mount. The workspace's
 *      list is loaded from those files when the branch is first used.
 *   2. The daemon holds a backing file open only while someone uses it (an
 *      open file, an operation): descriptor >= 0 exactly while holders > 0.
 *      A scratch that is removed or renamed over loses its backing file's
 *      name at once; an open file keeps reading and writing its descriptor.
 *   3. A scratch is freed when its last reference goes: the workspace list
 *      holds one while it is named, every open file one more.
 *   4. A pending name exists exactly while a handle that creates it is open
 *      and has not published.
 *   5. A named scratch file of tables/ with a base (the branch version it was
 *      made from) has <workspace directory>/bases/<name> holding that version
 *      in decimal, written when it is created and moved, removed with its
 *      name, read back when the workspace is loaded: a rename onto a table
 *      after a remount is still a based write. A backing file without one (or
 *      with one that does not parse) has no base.
 * States of a scratch: named (in its directory, backed) -> unnamed (removed,
 * renamed over, published or committed; no backing name) -> freed (no
 * references).
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <xxhash.h>

#include "mountfs_int.h"

#define COPY_CHUNK (1024 * 1024)
/* "<workspace directory>/<kind>/<name>" */
#define BACKING_PATH_MAX (4096 + JOURNAL_NAME_MAX + GRAPHFS_NAME_MAX + 48)

/* ---- helpers ------------------------------------------------------------------- */
int scratch_temporary_file(struct mountfs *mount)
{
	int descriptor = open(mount->temporary_directory, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	return descriptor < 0 ? -errno : descriptor;
}

uint64_t scratch_descriptor_size(int descriptor)
{
	struct stat st;
	if (fstat(descriptor, &st) != 0)
		return 0;
	return (uint64_t)st.st_size;
}

int scratch_write_all(int descriptor, const void *bytes, size_t size, uint64_t offset)
{
	const char *at = bytes;
	while (size > 0) {
		ssize_t written = pwrite(descriptor, at, size, (off_t)offset);
		if (written < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		at += written;
		size -= (size_t)written;
		offset += (uint64_t)written;
	}
	return 0;
}

/* Copies a table's bytes into descriptor (from offset 0). */
int scratch_copy_table(struct store_table *table, int descriptor)
{
	char *chunk = malloc(COPY_CHUNK);
	if (!chunk)
		return -ENOMEM;
	int rc = 0;
	uint64_t size = store_table_size(table);
	for (uint64_t offset = 0; offset < size && rc == 0;) {
		ssize_t got = store_table_pread(table, chunk, COPY_CHUNK, offset);
		if (got < 0) {
			rc = (int)got;
			break;
		}
		if (got == 0) {
			rc = -EIO;
			break;
		}
		rc = scratch_write_all(descriptor, chunk, (size_t)got, offset);
		offset += (uint64_t)got;
	}
	free(chunk);
	return rc;
}

/* Feeds a temporary file's bytes into a writer. */
int scratch_feed(struct store_writer *writer, int descriptor, struct error_info *error)
{
	char *chunk = malloc(COPY_CHUNK);
	if (!chunk)
		return -ENOMEM;
	int rc = 0;
	uint64_t offset = 0;
	for (;;) {
		ssize_t got = pread(descriptor, chunk, COPY_CHUNK, (off_t)offset);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			break;
		}
		if (got == 0)
			break;
		rc = store_writer_write(writer, chunk, (size_t)got, error);
		if (rc < 0)
			break;
		offset += (uint64_t)got;
	}
	free(chunk);
	return rc;
}

/* Reads a whole temporary file into out. */
int scratch_read_all(int descriptor, struct buf *out, size_t limit)
{
	uint64_t size = scratch_descriptor_size(descriptor);
	if (size > limit)
		return -EFBIG;
	int rc = buf_reserve(out, (size_t)size);
	if (rc < 0)
		return rc;
	ssize_t got = pread(descriptor, out->data + out->size, (size_t)size, 0);
	if (got < 0)
		return -errno;
	out->size += (size_t)got;
	return 0;
}

int scratch_read_held(struct scratch *scratch, struct buf *out, size_t limit)
{
	int rc = scratch_hold(scratch);
	if (rc < 0)
		return rc;
	rc = scratch_read_all(rc, out, limit);
	scratch_unhold(scratch);
	return rc;
}

enum scratch_dir scratch_dir_of(const struct node *directory)
{
	switch (directory->kind) {
	case NODE_SCHEMA_DIR:
		return SCRATCH_SCHEMA;
	case NODE_STAGING_DIR:
		return SCRATCH_STAGING;
	case NODE_STAGED_SCHEMA_DIR:
		return SCRATCH_STAGED_SCHEMA;
	default:
		return SCRATCH_TABLES;
	}
}

const char *scratch_dir_name(enum scratch_dir directory)
{
	switch (directory) {
	case SCRATCH_SCHEMA:
		return "schema";
	case SCRATCH_STAGING:
		return "staging";
	case SCRATCH_STAGED_SCHEMA:
		return "staging/schema";
	default:
		return "tables";
	}
}

/* "tables/X.jsonl" or "branches/b/tables/X.jsonl" for messages. */
void scratch_path(struct mountfs *mount, const char *branch, enum scratch_dir directory,
		       const char *file, char *out, size_t size)
{
	if (strcmp(branch, mount->branch) == 0)
		snprintf(out, size, "%s/%s", scratch_dir_name(directory), file);
	else
		snprintf(out, size, "branches/%s/%s/%s", branch, scratch_dir_name(directory), file);
}

/* ---- backing files ------------------------------------------------------------------ */

/* The backing directory of a kind of scratch (a staged merge has its own, so that
 * the write mode outlives the mount). */
static const char *backing_kind(enum scratch_dir directory, enum store_write_mode mode)
{
	switch (directory) {
	case SCRATCH_SCHEMA:
		return "schema";
	case SCRATCH_STAGING:
		return mode == STORE_MERGE ? "staging-merge" : "staging";
	case SCRATCH_STAGED_SCHEMA:
		return "staging-schema";
	default:
		return "tables";
	}
}

/* "<workspace directory>/<kind>/<name>". 0 or -ENAMETOOLONG. */
static int backing_path(const struct workspace *workspace, enum scratch_dir directory,
			enum store_write_mode mode, const char *name, char *out, size_t size)
{
	size_t length = (size_t)snprintf(out, size, "%s/%s/%s", workspace->directory,
					 backing_kind(directory, mode), name);
	return length >= size ? -ENAMETOOLONG : 0;
}

static int scratch_backing_path(const struct scratch *scratch, char *out, size_t size)
{
	return backing_path(scratch->workspace, scratch->directory, scratch->write_mode, scratch->name,
			    out, size);
}

/* "<workspace directory>/bases/<name>" (invariant 5). 0 or -ENAMETOOLONG. */
static int base_path(const struct workspace *workspace, const char *name, char *out, size_t size)
{
	size_t length = (size_t)snprintf(out, size, "%s/bases/%s", workspace->directory, name);
	return length >= size ? -ENAMETOOLONG : 0;
}

/* Keeps the base of a scratch of tables/ beside its backing file (invariant 5); best effort:
 * without it the scratch file has no base after a remount (a plain overwrite, logged). */
static void base_keep(const struct scratch *scratch)
{
	char path[BACKING_PATH_MAX], text[24];
	if (scratch->directory != SCRATCH_TABLES || !scratch->base_version ||
	    base_path(scratch->workspace, scratch->name, path, sizeof path) < 0)
		return;
	char *slash = strrchr(path, '/');
	*slash = '\0';
	(void)mkdir(path, 0700);
	*slash = '/';
	int length = snprintf(text, sizeof text, "%llu\n", (unsigned long long)scratch->base_version);
	int descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (descriptor < 0 || scratch_write_all(descriptor, text, (size_t)length, 0) < 0)
		mount_log(scratch->workspace->mount, LOG_WARNING,
			  "cannot keep the base of the scratch file %s (%s): after a remount it has none",
			  scratch->name, strerror(errno));
	if (descriptor >= 0)
		close(descriptor);
}

/* The base a scratch file of tables/ kept (invariant 5): the version, or 0. */
static uint64_t base_read(const struct workspace *workspace, const char *name)
{
	char path[BACKING_PATH_MAX], text[24] = "";
	if (base_path(workspace, name, path, sizeof path) < 0)
		return 0;
	int descriptor = open(path, O_RDONLY | O_CLOEXEC);
	if (descriptor < 0)
		return 0;
	ssize_t got = read(descriptor, text, sizeof text - 1);
	close(descriptor);
	char *end = NULL;
	unsigned long long version = got > 0 ? strtoull(text, &end, 10) : 0;
	return end && end != text && *end == '\n' ? (uint64_t)version : 0;
}

static void base_forget(const struct workspace *workspace, const char *name)
{
	char path[BACKING_PATH_MAX];
	if (base_path(workspace, name, path, sizeof path) == 0)
		(void)unlink(path);
}

/* Opens a backing file for reading and writing without moving its atime (the
 * mount stores the atime a user sets). >= 0 or -errno. */
static int backing_open(const char *path, int flags, mode_t mode)
{
	int descriptor = open(path, flags | O_RDWR | O_CLOEXEC | O_NOATIME, mode);
	if (descriptor < 0 && errno == EPERM)   /* O_NOATIME: not the file's owner */
		descriptor = open(path, flags | O_RDWR | O_CLOEXEC, mode);
	if (descriptor < 0 && errno == EACCES && geteuid() != 0) {
		/* A daemon that is not root: its own file, chmod'ed to lack u+rw by a user. */
		struct stat st;
		if (stat(path, &st) == 0 && chmod(path, st.st_mode | S_IRUSR | S_IWUSR) == 0) {
			descriptor = open(path, flags | O_RDWR | O_CLOEXEC, mode);
			if (descriptor >= 0)
				(void)fchmod(descriptor, st.st_mode & 07777);
		}
	}
	return descriptor < 0 ? -errno : descriptor;
}

int scratch_hold(struct scratch *scratch)
{
	struct workspace *workspace = scratch->workspace;
	pthread_mutex_lock(&workspace->lock);
	int rc = scratch->descriptor;
	if (rc < 0) {
		char path[BACKING_PATH_MAX];
		rc = scratch_backing_path(scratch, path, sizeof path);
		if (rc == 0)
			rc = backing_open(path, 0, 0);
		if (rc >= 0)
			scratch->descriptor = rc;
	}
	if (rc >= 0)
		scratch->holders++;
	pthread_mutex_unlock(&workspace->lock);
	return rc;
}

void scratch_unhold(struct scratch *scratch)
{
	struct workspace *workspace = scratch->workspace;
	pthread_mutex_lock(&workspace->lock);
	assert(scratch->holders > 0 && scratch->descriptor >= 0);
	if (--scratch->holders == 0) {
		close(scratch->descriptor);
		scratch->descriptor = -1;
	}
	pthread_mutex_unlock(&workspace->lock);
}

void scratch_set_write_mode(struct scratch *scratch, enum store_write_mode mode)
{
	if (scratch->write_mode == mode)
		return;
	char from[BACKING_PATH_MAX], to[BACKING_PATH_MAX];
	bool move = scratch->named && scratch_backing_path(scratch, from, sizeof from) == 0;
	scratch->write_mode = mode;
	if (move && scratch_backing_path(scratch, to, sizeof to) == 0 && strcmp(from, to) != 0) {
		char directory[BACKING_PATH_MAX];
		snprintf(directory, sizeof directory, "%s/%s", scratch->workspace->directory,
			 backing_kind(scratch->directory, mode));
		(void)mkdir(directory, 0700);
		(void)rename(from, to);
	}
}

/* Gives the backing file the scratch's mode (a daemon running as root: any mode; otherwise
 * the owner keeps read and write) and, with times, its atime and mtime, so that they
 * outlive the mount. Best effort (workspace lock held). */
static void backing_keep_attributes(const struct scratch *scratch, bool times)
{
	char path[BACKING_PATH_MAX];
	if (!scratch->named || scratch_backing_path(scratch, path, sizeof path) < 0)
		return;
	mode_t mode = scratch->mode & 07777;
	if (geteuid() != 0)
		mode |= S_IRUSR | S_IWUSR;
	else
		(void)lchown(path, scratch->uid, scratch->gid);   /* before chmod: chown clears set-user-ID */
	(void)chmod(path, mode);
	if (times) {
		struct timespec both[2] = { scratch->atime, scratch->mtime };
		(void)utimensat(AT_FDCWD, path, both, 0);
	}
}

/* The size, times and mode a backing file has (descriptor, else its path). 0 or -errno. */
static int backing_stat(const struct scratch *scratch, struct stat *st)
{
	if (scratch->descriptor >= 0)
		return fstat(scratch->descriptor, st) == 0 ? 0 : -errno;
	if (!scratch->named)
		return -ENOENT;
	char path[BACKING_PATH_MAX];
	int rc = scratch_backing_path(scratch, path, sizeof path);
	if (rc < 0)
		return rc;
	return stat(path, st) == 0 ? 0 : -errno;
}

/* Whether the live table's bytes are exactly size bytes hashing to hash (descriptor
 * -1) or the bytes of descriptor: 1 yes, 0 no (or no such table), -errno. */
int mount_table_is(struct mountfs *mount, const char *branch, const char *table, uint64_t size,
		   uint64_t hash, int descriptor)
{
	struct store_snapshot *snapshot = NULL;
	int rc = store_snapshot_open(mount->store, branch, STORE_LATEST, &snapshot, NULL);
	if (rc < 0)
		return rc == -ENOENT ? 0 : rc;
	struct store_table *reader = NULL;
	char *chunk = NULL, *other = NULL;
	XXH3_state_t *state = NULL;
	rc = store_table_open(snapshot, table, &reader);
	if (rc < 0) {
		rc = rc == -ENOENT ? 0 : rc;
		goto out;
	}
	if (descriptor >= 0)
		size = scratch_descriptor_size(descriptor);
	if (store_table_size(reader) != size) {
		rc = 0;
		goto out;
	}
	chunk = malloc(COPY_CHUNK);
	other = descriptor >= 0 ? malloc(COPY_CHUNK) : NULL;
	state = XXH3_createState();
	if (!chunk || (descriptor >= 0 && !other) || !state) {
		rc = -ENOMEM;
		goto out;
	}
	XXH3_64bits_reset(state);
	rc = 1;
	for (uint64_t offset = 0; offset < size && rc == 1;) {
		ssize_t got = store_table_pread(reader, chunk, COPY_CHUNK, offset);
		if (got <= 0) {
			rc = got < 0 ? (int)got : -EIO;
			break;
		}
		if (descriptor >= 0) {
			ssize_t theirs = pread(descriptor, other, (size_t)got, (off_t)offset);
			if (theirs != got || memcmp(chunk, other, (size_t)got) != 0)
				rc = 0;
		} else {
			XXH3_64bits_update(state, chunk, (size_t)got);
		}
		offset += (uint64_t)got;
	}
	if (rc == 1 && descriptor < 0 && XXH3_64bits_digest(state) != hash)
		rc = 0;
out:
	XXH3_freeState(state);
	free(chunk);
	free(other);
	if (reader)
		store_table_close(reader);
	store_snapshot_release(snapshot);
	return rc;
}

/* ---- workspaces: a live branch's private state -------------------------------------- */

static struct scratch *scratch_entry_new(struct workspace *workspace, enum scratch_dir directory,
					 const char *name, mode_t mode);

/* Lists the backing files a branch's workspace has from earlier mounts (invariant 1).
 * Files it cannot read are left alone (logged); they are not listed. */
static void workspace_load(struct mountfs *mount, struct workspace *workspace)
{
	static const struct {
		enum scratch_dir directory;
		enum store_write_mode mode;
	} kinds[] = {
		{ SCRATCH_TABLES, STORE_OVERWRITE },  { SCRATCH_SCHEMA, STORE_OVERWRITE },
		{ SCRATCH_STAGING, STORE_OVERWRITE }, { SCRATCH_STAGING, STORE_MERGE },
		{ SCRATCH_STAGED_SCHEMA, STORE_OVERWRITE },
	};
	for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
		char path[BACKING_PATH_MAX];
		snprintf(path, sizeof path, "%s/%s", workspace->directory,
			 backing_kind(kinds[k].directory, kinds[k].mode));
		DIR *listing = opendir(path);
		if (!listing) {
			if (errno != ENOENT)
				mount_log(mount, LOG_WARNING, "cannot list the scratch files in %s: %s", path,
					  strerror(errno));
			continue;
		}
		struct dirent *entry;
		while ((entry = readdir(listing))) {
			struct stat st;
			if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0 ||
			    strlen(entry->d_name) > GRAPHFS_NAME_MAX ||
			    fstatat(dirfd(listing), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
			    !S_ISREG(st.st_mode))
				continue;
			if (scratch_lookup(workspace, kinds[k].directory, entry->d_name))
				continue;   /* both staging directories: the first one found wins */
			struct scratch *scratch = scratch_entry_new(workspace, kinds[k].directory, entry->d_name,
								    st.st_mode);
			if (!scratch)
				break;
			scratch->write_mode = kinds[k].mode;
			if (geteuid() == 0) {   /* a daemon that is not root cannot give its files away */
				scratch->uid = st.st_uid;
				scratch->gid = st.st_gid;
			}
			scratch->mtime = st.st_mtim;
			scratch->ctime = st.st_ctim;
			scratch->atime = st.st_atim;
			if (kinds[k].directory == SCRATCH_TABLES)
				scratch->base_version = base_read(workspace, entry->d_name);
		}
		closedir(listing);
	}
}

struct workspace *scratch_workspace_get(struct mountfs *mount, const char *branch)
{
	pthread_mutex_lock(&mount->workspaces_lock);
	struct workspace *workspace = mount->workspaces;
	while (workspace && strcmp(workspace->branch, branch) != 0)
		workspace = workspace->next;
	if (!workspace) {
		workspace = calloc(1, sizeof *workspace);
		if (workspace) {
			workspace->mount = mount;
			snprintf(workspace->branch, sizeof workspace->branch, "%s", branch);
			snprintf(workspace->directory, sizeof workspace->directory, "%s/%s",
				 mount->scratch_directory, branch);
			pthread_mutex_init(&workspace->lock, NULL);
			pthread_mutex_init(&workspace->commit_lock, NULL);
			workspace_load(mount, workspace);
			workspace->next = mount->workspaces;
			mount->workspaces = workspace;
		}
	}
	pthread_mutex_unlock(&mount->workspaces_lock);
	return workspace;
}

/* ---- scratch files ------------------------------------------------------------------ */

/* ---- the index: (directory, name) -> named scratch, O(1) at any number of scratch files */

static size_t index_bucket(const struct workspace *workspace, enum scratch_dir directory, const char *name)
{
	return (size_t)((XXH3_64bits(name, strlen(name)) ^ (uint64_t)directory) % workspace->bucket_count);
}

/* Adds a named scratch to the list and the index (workspace lock held). 0 or -ENOMEM. */
static int index_add(struct workspace *workspace, struct scratch *scratch)
{
	if (workspace->named_count + 1 > workspace->bucket_count) {
		size_t count = workspace->bucket_count ? workspace->bucket_count * 2 : 64;
		struct scratch **buckets = calloc(count, sizeof *buckets);
		if (!buckets)
			return -ENOMEM;
		free(workspace->buckets);
		workspace->buckets = buckets;
		workspace->bucket_count = count;
		for (struct scratch *each = workspace->scratches; each; each = each->next) {
			size_t bucket = index_bucket(workspace, each->directory, each->name);
			each->hash_next = buckets[bucket];
			buckets[bucket] = each;
		}
	}
	size_t bucket = index_bucket(workspace, scratch->directory, scratch->name);
	scratch->hash_next = workspace->buckets[bucket];
	workspace->buckets[bucket] = scratch;
	scratch->previous = NULL;
	scratch->next = workspace->scratches;
	if (scratch->next)
		scratch->next->previous = scratch;
	workspace->scratches = scratch;
	workspace->named_count++;
	return 0;
}

/* Takes a scratch out of the list and the index (workspace lock held). */
static void index_remove(struct workspace *workspace, struct scratch *scratch)
{
	if (!scratch->previous && workspace->scratches != scratch)
		return;   /* not in the list */
	struct scratch **link = &workspace->buckets[index_bucket(workspace, scratch->directory, scratch->name)];
	while (*link && *link != scratch)
		link = &(*link)->hash_next;
	assert(*link);   /* in the list, so in the index */
	if (*link)
		*link = scratch->hash_next;
	if (scratch->previous)
		scratch->previous->next = scratch->next;
	else
		workspace->scratches = scratch->next;
	if (scratch->next)
		scratch->next->previous = scratch->previous;
	scratch->next = scratch->previous = scratch->hash_next = NULL;
	workspace->named_count--;
}

struct scratch *scratch_lookup(struct workspace *workspace, enum scratch_dir directory,
				      const char *name)
{
	if (!workspace->bucket_count)
		return NULL;
	for (struct scratch *scratch = workspace->buckets[index_bucket(workspace, directory, name)]; scratch;
	     scratch = scratch->hash_next)
		if (scratch->named && scratch->directory == directory && strcmp(scratch->name, name) == 0)
			return scratch;
	return NULL;
}

static void scratch_free(struct scratch *scratch)
{
	if (scratch->descriptor >= 0)
		close(scratch->descriptor);
	free(scratch);
}

/* Drops a reference (atomically: no lock needed; the last one is never the list's,
 * so a scratch freed here is already unnamed). */
void scratch_put(struct scratch *scratch)
{
	assert(scratch->references > 0);
	if (--scratch->references == 0)
		scratch_free(scratch);
}

void scratch_release(struct scratch *scratch)
{
	if (!scratch)
		return;
	struct workspace *workspace = scratch->workspace;
	pthread_mutex_lock(&workspace->lock);
	scratch_put(scratch);
	pthread_mutex_unlock(&workspace->lock);
}

/* Unlinks a scratch from its workspace list (workspace locked). */
struct timespec scratch_workspace_changed(struct workspace *workspace)
{
	pthread_mutex_lock(&workspace->lock);
	struct timespec changed = workspace->changed;
	pthread_mutex_unlock(&workspace->lock);
	return changed;
}

void scratch_rename(struct workspace *workspace, struct scratch *scratch, const char *new_name)
{
	struct scratch *existing = scratch_lookup(workspace, scratch->directory, new_name);
	if (existing && existing != scratch)
		scratch_unname(workspace, existing);
	char from[BACKING_PATH_MAX], to[BACKING_PATH_MAX];
	if (scratch_backing_path(scratch, from, sizeof from) == 0 &&
	    backing_path(workspace, scratch->directory, scratch->write_mode, new_name, to, sizeof to) == 0)
		(void)rename(from, to);
	if (scratch->directory == SCRATCH_TABLES)
		base_forget(workspace, scratch->name);
	index_remove(workspace, scratch);
	snprintf(scratch->name, sizeof scratch->name, "%s", new_name);
	(void)index_add(workspace, scratch);   /* the table only grows when a name is added */
	base_keep(scratch);
	clock_gettime(CLOCK_REALTIME, &workspace->changed);
}

void scratch_workspace_touch(struct workspace *workspace)
{
	pthread_mutex_lock(&workspace->lock);
	clock_gettime(CLOCK_REALTIME, &workspace->changed);
	pthread_mutex_unlock(&workspace->lock);
}

void scratch_unname(struct workspace *workspace, struct scratch *scratch)
{
	clock_gettime(CLOCK_REALTIME, &workspace->changed);
	index_remove(workspace, scratch);
	char path[BACKING_PATH_MAX];
	if (scratch->named && scratch_backing_path(scratch, path, sizeof path) == 0)
		(void)unlink(path);   /* an open file keeps its descriptor (invariant 2) */
	if (scratch->named && scratch->directory == SCRATCH_TABLES)
		base_forget(workspace, scratch->name);
	scratch->named = false;
	if (scratch->writer) {
		store_writer_discard(scratch->writer);
		scratch->writer = NULL;
	}
	scratch_put(scratch);
}

struct scratch *scratch_find(struct mountfs *mount, const struct node *directory, const char *name)
{
	if (!directory || directory->view.version != 0)
		return NULL;
	if (directory->kind != NODE_TABLES_DIR && directory->kind != NODE_SCHEMA_DIR &&
	    directory->kind != NODE_STAGING_DIR && directory->kind != NODE_STAGED_SCHEMA_DIR)
		return NULL;
	struct workspace *workspace = scratch_workspace_get(mount, directory->view.branch);
	if (!workspace)
		return NULL;
	pthread_mutex_lock(&workspace->lock);
	struct scratch *scratch = scratch_lookup(workspace, scratch_dir_of(directory), name);
	if (scratch)
		scratch->references++;
	pthread_mutex_unlock(&workspace->lock);
	return scratch;
}

/* A named scratch in the workspace's list, without touching its backing file
 * (workspace lock held, or the workspace not yet shared). NULL: out of memory. */
static struct scratch *scratch_entry_new(struct workspace *workspace, enum scratch_dir directory,
					 const char *name, mode_t mode)
{
	struct scratch *scratch = calloc(1, sizeof *scratch);
	if (!scratch)
		return NULL;
	scratch->descriptor = -1;
	scratch->workspace = workspace;
	scratch->directory = directory;
	snprintf(scratch->name, sizeof scratch->name, "%s", name);
	scratch->mode = mode & 07777;
	scratch->uid = workspace->mount->uid;
	scratch->gid = workspace->mount->gid;
	clock_gettime(CLOCK_REALTIME, &scratch->mtime);
	scratch->ctime = scratch->mtime;
	scratch->atime = scratch->mtime;
	scratch->references = 1;   /* the list */
	scratch->named = true;
	char table[JOURNAL_NAME_MAX + 1];
	scratch->staged = directory == SCRATCH_STAGING && names_table_from_file(name, ".jsonl", table);
	scratch->schema_staged = directory == SCRATCH_STAGED_SCHEMA && names_table_from_file(name, ".json", table);
	if (scratch->staged || scratch->schema_staged)
		snprintf(scratch->table, sizeof scratch->table, "%s", table);
	if (index_add(workspace, scratch) < 0) {
		free(scratch);
		return NULL;
	}
	workspace->changed = scratch->mtime;
	return scratch;
}

struct scratch *scratch_new(struct mountfs *mount, struct workspace *workspace,
				   enum scratch_dir directory, const char *name, mode_t mode, int *rc)
{
	(void)mount;
	char path[BACKING_PATH_MAX];
	*rc = backing_path(workspace, directory, STORE_OVERWRITE, name, path, sizeof path);
	if (*rc < 0)
		return NULL;
	/* the backing directory, made at the first scratch file of its kind */
	char *slash = strrchr(path, '/');
	*slash = '\0';
	int made = mkdir(workspace->directory, 0700) == 0 || errno == EEXIST ? 0 : -errno;
	if (made == 0)
		made = mkdir(path, 0700) == 0 || errno == EEXIST ? 0 : -errno;
	*slash = '/';
	if (made < 0) {
		*rc = made;
		return NULL;
	}
	int descriptor = backing_open(path, O_CREAT | O_TRUNC, 0600);
	if (descriptor < 0) {
		*rc = descriptor;
		return NULL;
	}
	if (directory == SCRATCH_TABLES)
		base_forget(workspace, name);   /* a new file: an earlier one's base is not its own */
	/* the mode outlives the mount (a daemon that is not root keeps the owner's rw) */
	(void)fchmod(descriptor, geteuid() == 0 ? mode & 07777 : (mode & 07777) | S_IRUSR | S_IWUSR);
	close(descriptor);
	struct scratch *scratch = scratch_entry_new(workspace, directory, name, mode);
	if (!scratch) {
		(void)unlink(path);
		*rc = -ENOMEM;
		return NULL;
	}
	*rc = 0;
	return scratch;
}

int scratch_keep(struct mountfs *mount, const char *branch, const char *name, int source, uint64_t size)
{
	struct workspace *workspace = scratch_workspace_get(mount, branch);
	if (!workspace)
		return -ENOMEM;
	int rc = 0;
	pthread_mutex_lock(&workspace->lock);
	struct scratch *existing = scratch_lookup(workspace, SCRATCH_TABLES, name);
	if (existing)
		scratch_unname(workspace, existing);
	struct scratch *scratch = scratch_new(mount, workspace, SCRATCH_TABLES, name, 0666 & ~mount->umask, &rc);
	if (scratch)
		scratch->references++;
	pthread_mutex_unlock(&workspace->lock);
	if (!scratch)
		return rc;
	int descriptor = scratch_hold(scratch);
	rc = descriptor < 0 ? descriptor : 0;
	char *chunk = rc == 0 && size ? malloc(COPY_CHUNK) : NULL;
	if (rc == 0 && size && !chunk)
		rc = -ENOMEM;
	for (uint64_t offset = 0; rc == 0 && offset < size;) {
		size_t want = size - offset < COPY_CHUNK ? (size_t)(size - offset) : COPY_CHUNK;
		ssize_t got = pread(source, chunk, want, (off_t)offset);
		if (got <= 0) {
			rc = got < 0 ? -errno : -EIO;
			break;
		}
		rc = scratch_write_all(descriptor, chunk, (size_t)got, offset);
		offset += (uint64_t)got;
	}
	free(chunk);
	if (descriptor >= 0)
		scratch_unhold(scratch);
	scratch_release(scratch);
	return rc;
}

int scratch_create(struct mountfs *mount, const struct node *directory, const char *name, mode_t mode,
		   uid_t uid, gid_t gid)
{
	struct workspace *workspace = scratch_workspace_get(mount, directory->view.branch);
	if (!workspace)
		return -ENOMEM;
	/* what a tool that writes a scratch file and renames it over a table read (sed -i) */
	uint64_t base_version = 0;
	struct store_snapshot *snapshot = NULL;
	if (scratch_dir_of(directory) == SCRATCH_TABLES && view_snapshot(mount, &directory->view, &snapshot) == 0) {
		base_version = store_snapshot_version(snapshot);
		store_snapshot_release(snapshot);
	}
	int rc = 0;
	pthread_mutex_lock(&workspace->lock);
	if (scratch_lookup(workspace, scratch_dir_of(directory), name))
		rc = -EEXIST;
	else
	{
		struct scratch *scratch = scratch_new(mount, workspace, scratch_dir_of(directory), name, mode, &rc);
		if (scratch) {
			scratch->base_version = base_version;
			scratch->uid = uid;
			scratch->gid = gid;
			backing_keep_attributes(scratch, false);
			base_keep(scratch);
		}
	}
	pthread_mutex_unlock(&workspace->lock);
	return rc;
}

void scratch_attr(const struct scratch *scratch, struct stat *st)
{
	struct stat backing;
	st->st_mode = S_IFREG | (scratch->mode & 07777);
	st->st_uid = scratch->uid;
	st->st_gid = scratch->gid;
	st->st_nlink = scratch->named ? 1 : 0;
	st->st_size = backing_stat(scratch, &backing) == 0 ? backing.st_size : 0;
	st->st_blocks = (st->st_size + 511) / 512;
	st->st_mtim = scratch->mtime;
	st->st_ctim = scratch->ctime;
	st->st_atim = scratch->atime;
}

void scratch_touch(struct scratch *scratch)
{
	struct workspace *workspace = scratch->workspace;
	pthread_mutex_lock(&workspace->lock);
	clock_gettime(CLOCK_REALTIME, &scratch->mtime);
	scratch->ctime = scratch->mtime;
	pthread_mutex_unlock(&workspace->lock);
}

void scratch_written(struct scratch *scratch, uid_t writer)
{
	struct workspace *workspace = scratch->workspace;
	pthread_mutex_lock(&workspace->lock);
	clock_gettime(CLOCK_REALTIME, &scratch->mtime);
	scratch->ctime = scratch->mtime;
	if (writer != 0 && (scratch->mode & (S_ISUID | S_ISGID))) {
		scratch->mode &= ~(mode_t)S_ISUID;
		if (scratch->mode & S_IXGRP)
			scratch->mode &= ~(mode_t)S_ISGID;
		backing_keep_attributes(scratch, false);
	}
	pthread_mutex_unlock(&workspace->lock);
}

void scratch_set_attr(struct scratch *scratch, const struct stat *st, int to_set)
{
	struct workspace *workspace = scratch->workspace;
	pthread_mutex_lock(&workspace->lock);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	if (to_set & MOUNTFS_SET_MODE)
		scratch->mode = st->st_mode & 07777;
	if (to_set & MOUNTFS_SET_UID)   /* the kernel checked the right to (default_permissions) */
		scratch->uid = st->st_uid;
	if (to_set & MOUNTFS_SET_GID)
		scratch->gid = st->st_gid;
	if (to_set & MOUNTFS_SET_ATIME_NOW)
		scratch->atime = now;
	else if (to_set & MOUNTFS_SET_ATIME)
		scratch->atime = st->st_atim;
	if (to_set & MOUNTFS_SET_MTIME_NOW)
		scratch->mtime = now;
	else if (to_set & MOUNTFS_SET_MTIME)
		scratch->mtime = st->st_mtim;
	else if (to_set & MOUNTFS_SET_SIZE)
		scratch->mtime = now;   /* truncate(2) changes the data */
	/* Any change of attributes is a change of the inode. */
	scratch->ctime = now;
	backing_keep_attributes(scratch, (to_set & (MOUNTFS_SET_ATIME | MOUNTFS_SET_ATIME_NOW |
						     MOUNTFS_SET_MTIME | MOUNTFS_SET_MTIME_NOW)) != 0);
	pthread_mutex_unlock(&workspace->lock);
}

int scratch_list(struct mountfs *mount, const struct node *directory,
		 int (*visit)(const char *name, const struct stat *st, void *context), void *context)
{
	struct workspace *workspace = scratch_workspace_get(mount, directory->view.branch);
	if (!workspace)
		return -ENOMEM;
	enum scratch_dir kind = scratch_dir_of(directory);
	int rc = 0;
	pthread_mutex_lock(&workspace->lock);
	for (struct scratch *scratch = workspace->scratches; scratch && rc == 0; scratch = scratch->next) {
		if (!scratch->named || scratch->directory != kind)
			continue;
		struct stat st;
		memset(&st, 0, sizeof st);
		scratch_attr(scratch, &st);
		rc = visit(scratch->name, &st, context);
	}
	pthread_mutex_unlock(&workspace->lock);
	return rc;
}

/* ---- pending creations and hidden names ------------------------------------------------- */

void scratch_pending_add(struct mountfs *mount, const char *branch, enum scratch_dir directory,
			const char *table)
{
	struct workspace *workspace = scratch_workspace_get(mount, branch);
	if (!workspace)
		return;
	pthread_mutex_lock(&workspace->lock);
	struct pending *pending = workspace->pendings;
	while (pending && (pending->directory != directory || strcmp(pending->table, table) != 0))
		pending = pending->next;
	if (!pending) {
		pending = calloc(1, sizeof *pending);
		if (pending) {
			pending->directory = directory;
			snprintf(pending->table, sizeof pending->table, "%s", table);
			pending->next = workspace->pendings;
			workspace->pendings = pending;
		}
	}
	if (pending)
		pending->handles++;
	pthread_mutex_unlock(&workspace->lock);
}

void scratch_pending_remove(struct mountfs *mount, const char *branch, enum scratch_dir directory,
			   const char *table)
{
	struct workspace *workspace = scratch_workspace_get(mount, branch);
	if (!workspace)
		return;
	pthread_mutex_lock(&workspace->lock);
	struct pending **link = &workspace->pendings;
	while (*link && ((*link)->directory != directory || strcmp((*link)->table, table) != 0))
		link = &(*link)->next;
	struct pending *pending = *link;
	if (pending && --pending->handles == 0) {
		*link = pending->next;
		free(pending);
	}
	pthread_mutex_unlock(&workspace->lock);
}

void scratch_pending_resize(struct mountfs *mount, const char *branch, enum scratch_dir directory,
			     const char *table, uint64_t size)
{
	struct workspace *workspace = scratch_workspace_get(mount, branch);
	if (!workspace)
		return;
	pthread_mutex_lock(&workspace->lock);
	for (struct pending *pending = workspace->pendings; pending; pending = pending->next)
		if (pending->directory == directory && strcmp(pending->table, table) == 0)
			pending->size = size;
	pthread_mutex_unlock(&workspace->lock);
}

bool scratch_pending_find(struct mountfs *mount, const char *branch, enum scratch_dir directory,
		  const char *table, uint64_t *size)
{
	struct workspace *workspace = scratch_workspace_get(mount, branch);
	if (!workspace)
		return false;
	bool found = false;
	pthread_mutex_lock(&workspace->lock);
	for (struct pending *pending = workspace->pendings; pending; pending = pending->next)
		if (pending->directory == directory && strcmp(pending->table, table) == 0) {
			found = true;
			if (size)
				*size = pending->size;
		}
	pthread_mutex_unlock(&workspace->lock);
	return found;
}

int scratch_pending_list(struct mountfs *mount, const char *branch, enum scratch_dir directory,
		 int (*visit)(const char *table, uint64_t size, void *context), void *context)
{
	struct workspace *workspace = scratch_workspace_get(mount, branch);
	if (!workspace)
		return -ENOMEM;
	int rc = 0;
	pthread_mutex_lock(&workspace->lock);
	for (struct pending *pending = workspace->pendings; pending && rc == 0; pending = pending->next)
		if (pending->directory == directory)
			rc = visit(pending->table, pending->size, context);
	pthread_mutex_unlock(&workspace->lock);
	return rc;
}

static int hidden_index(struct workspace *workspace, const char *table)
{
	for (int i = 0; i < WORKSPACE_HIDDEN_MAX; i++)
		if (workspace->hidden[i][0] && strcmp(workspace->hidden[i], table) == 0)
			return i;
	return -1;
}

bool scratch_hidden(struct mountfs *mount, const char *branch, const char *table)
{
	struct workspace *workspace = scratch_workspace_get(mount, branch);
	if (!workspace)
		return false;
	pthread_mutex_lock(&workspace->lock);
	bool hidden = hidden_index(workspace, table) >= 0;
	pthread_mutex_unlock(&workspace->lock);
	return hidden;
}

void scratch_hide(struct mountfs *mount, const char *branch, const char *table, bool hide)
{
	struct workspace *workspace = scratch_workspace_get(mount, branch);
	if (!workspace)
		return;
	pthread_mutex_lock(&workspace->lock);
	int index = hidden_index(workspace, table);
	if (hide && index < 0) {
		for (int i = 0; i < WORKSPACE_HIDDEN_MAX; i++)
			if (!workspace->hidden[i][0]) {
				snprintf(workspace->hidden[i], sizeof workspace->hidden[i], "%s", table);
				break;
			}
	} else if (!hide && index >= 0) {
		workspace->hidden[index][0] = '\0';
	}
	pthread_mutex_unlock(&workspace->lock);
}

/* ---- unmount ---------------------------------------------------------------------------------- */

void scratch_workspaces_free(struct mountfs *mount)
{
	struct workspace *workspace = mount->workspaces;
	while (workspace) {
		struct workspace *next = workspace->next;
		while (workspace->scratches) {
			struct scratch *scratch = workspace->scratches;
			index_remove(workspace, scratch);
			if (scratch->writer)
				store_writer_discard(scratch->writer);
			scratch->writer = NULL;
			scratch->named = false;
			scratch_put(scratch);
		}
		while (workspace->pendings) {
			struct pending *pending = workspace->pendings;
			workspace->pendings = pending->next;
			free(pending);
		}
		if (workspace->staging)
			store_txn_free(workspace->staging);
		pthread_mutex_destroy(&workspace->lock);
		pthread_mutex_destroy(&workspace->commit_lock);
		free(workspace->buckets);
		free(workspace);
		workspace = next;
	}
	mount->workspaces = NULL;
}

