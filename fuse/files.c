/*
 * files — open files and the write paths of DESIGN §3.
 *
 * An open file is one of:
 *   table reader   pins a snapshot and a store_table at open; reads pread it,
 *                  so a reader sees exactly one version however many commits
 *                  land while it reads (invariant 4)
 *   rendered       bytes rendered at open (heads, schema, log, .graphfs files)
 *   table writer   tables/<Name>.jsonl opened for writing:
 *                    O_TRUNC / created  stream overwrite
 *                    O_APPEND           stream merge
 *                    neither            private copy of the current bytes,
 *                                       published as an overwrite based on the
 *                                       version copied (-EBUSY if it moved)
 *   schema writer  schema/<Name>.json: the bytes, applied as one schema op
 *   scratch        a private temporary file (scratch names; staged tables)
 *   commit         staging/.commit: each write publishes the staging area
 *
 * Write-handle states: open -> writing (dirty) -> published at flush (clean;
 * further writes continue as a merge of the added lines) ... -> released.
 * A stream error is sticky: the handle publishes nothing afterwards.
 *
 * Invariants:
 *   1. One tool write = one commit: a handle publishes at flush only what
 *      was written since its last publish; an O_TRUNC never followed by a
 *      write publishes (an empty table) at release. close(2) sees the flush's
 *      error; nothing is published when it fails.
 *   2. Every write(2) to a stream writer is validated by the store before
 *      it returns; a rejected line fails that write with its errno and adds
 *      a line to .graphfs/errors.
 *   3. Scratch and staged files live in unnamed temporary files (O_TMPFILE)
 *      in the mount's temporary directory: nothing of them reaches the store
 *      until a rename onto a table name or a staging commit.
 *   4. The staging area of a branch is one store transaction with deferred
 *      endpoint checks; each staged file has one writer in it whose input is
 *      exactly the staged file's bytes (rebuilt from the file when edited).
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "fuse_int.h"

#define COPY_CHUNK (1024 * 1024)

enum file_role {
	FILE_TABLE_READ,
	FILE_RENDERED,
	FILE_TABLE_WRITE,
	FILE_SCHEMA_WRITE,
	FILE_SCRATCH,
	FILE_COMMIT,
};

enum write_kind { WRITE_OVERWRITE, WRITE_MERGE, WRITE_EDIT };

struct open_file {
	struct open_file *all_previous;
	struct open_file *all_next;
	pthread_mutex_t lock;
	struct node *node;                 /* retained */
	enum file_role role;
	bool writable;
	bool append;
	char path[GRAPHFS_PATH_MAX];       /* inside the mount, for messages */
	char branch[JOURNAL_NAME_MAX + 1];
	char table[JOURNAL_NAME_MAX + 1];

	/* readers (and the copy source of edits, and reads of merge handles) */
	struct store_snapshot *snapshot;
	struct store_table *reader;
	struct buf bytes;                  /* rendered bytes; schema writer input */

	/* table and schema writers */
	enum write_kind write_kind;
	struct store_txn *txn;
	struct store_writer *writer;
	uint64_t stream_bytes;             /* bytes fed (overwrite: the next offset) */
	bool dirty;                        /* something to publish */
	bool truncate_pending;             /* an overwrite not published yet */
	int failed;                        /* sticky negative errno */
	bool pending_registered;           /* counted in the workspace's pendings */
	int copy_descriptor;               /* edits: the private copy, -1 until the first change */
	uint64_t based_on;                 /* edits: the table version copied */

	/* scratch and staged files */
	struct scratch *scratch;
	bool staged_stream;                /* staged, appending through the writer */
	bool staged_edit;                  /* staged, edited in place: rebuild the writer */
};

static pthread_mutex_t all_files_lock = PTHREAD_MUTEX_INITIALIZER;
static struct open_file *all_files;

/* ---- helpers ------------------------------------------------------------------- */

static int temporary_file(struct mount *mount)
{
	int descriptor = open(mount->temporary_directory, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	return descriptor < 0 ? -errno : descriptor;
}

static uint64_t descriptor_size(int descriptor)
{
	struct stat st;
	if (fstat(descriptor, &st) != 0)
		return 0;
	return (uint64_t)st.st_size;
}

static int write_all(int descriptor, const void *bytes, size_t size, uint64_t offset)
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
static int copy_table(struct store_table *table, int descriptor)
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
		rc = write_all(descriptor, chunk, (size_t)got, offset);
		offset += (uint64_t)got;
	}
	free(chunk);
	return rc;
}

/* Feeds a temporary file's bytes into a writer. */
static int feed_descriptor(struct store_writer *writer, int descriptor, struct error_info *error)
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
static int read_descriptor(int descriptor, struct buf *out, size_t limit)
{
	uint64_t size = descriptor_size(descriptor);
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

static enum scratch_dir directory_of(const struct node *directory)
{
	switch (directory->kind) {
	case NODE_SCHEMA_DIR:
		return SCRATCH_SCHEMA;
	case NODE_STAGING_DIR:
		return SCRATCH_STAGING;
	default:
		return SCRATCH_TABLES;
	}
}

static const char *directory_name(enum scratch_dir directory)
{
	switch (directory) {
	case SCRATCH_SCHEMA:
		return "schema";
	case SCRATCH_STAGING:
		return "staging";
	default:
		return "tables";
	}
}

/* "tables/X.jsonl" or "branches/b/tables/X.jsonl" for messages. */
static void table_path(struct mount *mount, const char *branch, enum scratch_dir directory,
		       const char *file, char *out, size_t size)
{
	if (strcmp(branch, mount->branch) == 0)
		snprintf(out, size, "%s/%s", directory_name(directory), file);
	else
		snprintf(out, size, "branches/%s/%s/%s", branch, directory_name(directory), file);
}

static int commit_transaction(struct mount *mount, struct store_txn *txn, const char *message,
			      const char *path)
{
	struct store_commit_result result;
	struct error_info error;
	error_info_clear(&error);
	int rc = store_txn_commit(txn, message, &result, &error);
	if (rc < 0) {
		mount_error_record(mount, path, &error, rc);
		return rc;
	}
	atomic_fetch_add(&mount->commits, 1);
	return 0;
}

/* ---- scratch files ------------------------------------------------------------------ */

static struct scratch *scratch_lookup(struct workspace *workspace, enum scratch_dir directory,
				      const char *name)
{
	for (struct scratch *scratch = workspace->scratches; scratch; scratch = scratch->next)
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

/* Drops a reference; the caller holds the workspace lock or owns the last reference. */
static void scratch_put(struct scratch *scratch)
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
static void scratch_unname(struct workspace *workspace, struct scratch *scratch)
{
	struct scratch **link = &workspace->scratches;
	while (*link && *link != scratch)
		link = &(*link)->next;
	if (*link)
		*link = scratch->next;
	scratch->next = NULL;
	scratch->named = false;
	if (scratch->writer) {
		store_writer_discard(scratch->writer);
		scratch->writer = NULL;
	}
	scratch_put(scratch);
}

struct scratch *scratch_find(struct mount *mount, const struct node *directory, const char *name)
{
	if (!directory || directory->view.version != 0)
		return NULL;
	if (directory->kind != NODE_TABLES_DIR && directory->kind != NODE_SCHEMA_DIR &&
	    directory->kind != NODE_STAGING_DIR)
		return NULL;
	struct workspace *workspace = workspace_get(mount, directory->view.branch);
	if (!workspace)
		return NULL;
	pthread_mutex_lock(&workspace->lock);
	struct scratch *scratch = scratch_lookup(workspace, directory_of(directory), name);
	if (scratch)
		scratch->references++;
	pthread_mutex_unlock(&workspace->lock);
	return scratch;
}

static struct scratch *scratch_new(struct mount *mount, struct workspace *workspace,
				   enum scratch_dir directory, const char *name, mode_t mode, int *rc)
{
	struct scratch *scratch = calloc(1, sizeof *scratch);
	if (!scratch) {
		*rc = -ENOMEM;
		return NULL;
	}
	scratch->descriptor = temporary_file(mount);
	if (scratch->descriptor < 0) {
		*rc = scratch->descriptor;
		free(scratch);
		return NULL;
	}
	scratch->workspace = workspace;
	scratch->directory = directory;
	snprintf(scratch->name, sizeof scratch->name, "%s", name);
	scratch->mode = mode & 07777;
	clock_gettime(CLOCK_REALTIME, &scratch->mtime);
	scratch->references = 1;   /* the list */
	scratch->named = true;
	char table[JOURNAL_NAME_MAX + 1];
	scratch->staged = directory == SCRATCH_STAGING && table_name_from_file(name, ".jsonl", table);
	if (scratch->staged)
		snprintf(scratch->table, sizeof scratch->table, "%s", table);
	scratch->next = workspace->scratches;
	workspace->scratches = scratch;
	*rc = 0;
	return scratch;
}

int scratch_create(struct mount *mount, const struct node *directory, const char *name, mode_t mode)
{
	struct workspace *workspace = workspace_get(mount, directory->view.branch);
	if (!workspace)
		return -ENOMEM;
	int rc = 0;
	pthread_mutex_lock(&workspace->lock);
	if (scratch_lookup(workspace, directory_of(directory), name))
		rc = -EEXIST;
	else
		scratch_new(mount, workspace, directory_of(directory), name, mode, &rc);
	pthread_mutex_unlock(&workspace->lock);
	return rc;
}

void scratch_attr(const struct scratch *scratch, struct stat *st)
{
	st->st_mode = S_IFREG | (scratch->mode ? scratch->mode : 0644);
	st->st_nlink = 1;
	st->st_size = (off_t)descriptor_size(scratch->descriptor);
	st->st_blocks = (st->st_size + 511) / 512;
	st->st_mtim = scratch->mtime;
	st->st_ctim = scratch->mtime;
	st->st_atim = scratch->mtime;
}

void scratch_set_attr(struct scratch *scratch, const struct stat *st, int to_set)
{
	struct workspace *workspace = scratch->workspace;
	pthread_mutex_lock(&workspace->lock);
	if (to_set & FUSE_SET_ATTR_MODE)
		scratch->mode = st->st_mode & 07777;
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		clock_gettime(CLOCK_REALTIME, &scratch->mtime);
	else if (to_set & FUSE_SET_ATTR_MTIME)
		scratch->mtime = st->st_mtim;
	pthread_mutex_unlock(&workspace->lock);
}

int scratch_list(struct mount *mount, const struct node *directory,
		 int (*visit)(const char *name, const struct stat *st, void *context), void *context)
{
	struct workspace *workspace = workspace_get(mount, directory->view.branch);
	if (!workspace)
		return -ENOMEM;
	enum scratch_dir kind = directory_of(directory);
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

static void pending_add(struct mount *mount, const char *branch, enum scratch_dir directory,
			const char *table)
{
	struct workspace *workspace = workspace_get(mount, branch);
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

static void pending_remove(struct mount *mount, const char *branch, enum scratch_dir directory,
			   const char *table)
{
	struct workspace *workspace = workspace_get(mount, branch);
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

static void pending_set_size(struct mount *mount, const char *branch, enum scratch_dir directory,
			     const char *table, uint64_t size)
{
	struct workspace *workspace = workspace_get(mount, branch);
	if (!workspace)
		return;
	pthread_mutex_lock(&workspace->lock);
	for (struct pending *pending = workspace->pendings; pending; pending = pending->next)
		if (pending->directory == directory && strcmp(pending->table, table) == 0)
			pending->size = size;
	pthread_mutex_unlock(&workspace->lock);
}

bool pending_find(struct mount *mount, const char *branch, enum scratch_dir directory,
		  const char *table, uint64_t *size)
{
	struct workspace *workspace = workspace_get(mount, branch);
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

int pending_list(struct mount *mount, const char *branch, enum scratch_dir directory,
		 int (*visit)(const char *table, uint64_t size, void *context), void *context)
{
	struct workspace *workspace = workspace_get(mount, branch);
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

bool workspace_hidden(struct mount *mount, const char *branch, const char *table)
{
	struct workspace *workspace = workspace_get(mount, branch);
	if (!workspace)
		return false;
	pthread_mutex_lock(&workspace->lock);
	bool hidden = hidden_index(workspace, table) >= 0;
	pthread_mutex_unlock(&workspace->lock);
	return hidden;
}

static void hidden_set(struct mount *mount, const char *branch, const char *table, bool hide)
{
	struct workspace *workspace = workspace_get(mount, branch);
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

/* ---- the staging area ------------------------------------------------------------------- */

/* Ensures the workspace's staging transaction exists (commit_lock held). */
static int staging_transaction(struct mount *mount, struct workspace *workspace)
{
	if (workspace->staging)
		return 0;
	struct error_info error;
	error_info_clear(&error);
	int rc = store_txn_begin(mount->store, workspace->branch, &workspace->staging, &error);
	if (rc < 0)
		return rc;
	store_txn_defer_endpoint_checks(workspace->staging, true);
	return 0;
}

/* Rebuilds a staged file's writer from its bytes (commit_lock held). 0 or the
 * validation error (recorded). */
static int staged_rebuild(struct mount *mount, struct workspace *workspace, struct scratch *scratch)
{
	char path[GRAPHFS_PATH_MAX];
	table_path(mount, workspace->branch, SCRATCH_STAGING, scratch->name, path, sizeof path);
	if (scratch->writer) {
		store_writer_discard(scratch->writer);
		scratch->writer = NULL;
	}
	scratch->writer_finished = false;
	scratch->writer_failed = false;
	int rc = staging_transaction(mount, workspace);
	if (rc < 0)
		return rc;
	struct error_info error;
	error_info_clear(&error);
	rc = store_txn_writer(workspace->staging, scratch->table, scratch->write_mode, 0, path,
			      &scratch->writer, &error);
	if (rc < 0) {
		mount_error_record(mount, path, &error, rc);
		return rc;
	}
	rc = feed_descriptor(scratch->writer, scratch->descriptor, &error);
	if (rc < 0) {
		scratch->writer_failed = true;
		mount_error_record(mount, path, &error, rc);
	}
	return rc;
}

/* Frees the staging transaction when nothing is staged any more (commit_lock held). */
static void staging_settle(struct workspace *workspace)
{
	pthread_mutex_lock(&workspace->lock);
	bool any = false;
	for (struct scratch *scratch = workspace->scratches; scratch; scratch = scratch->next)
		if (scratch->named && scratch->staged)
			any = true;
	pthread_mutex_unlock(&workspace->lock);
	if (!any && workspace->staging) {
		store_txn_free(workspace->staging);
		workspace->staging = NULL;
	}
}

int staging_commit(struct mount *mount, const char *branch, const char *message, size_t size)
{
	struct workspace *workspace = workspace_get(mount, branch);
	if (!workspace)
		return -ENOMEM;
	char text[4096];
	size_t length = size < sizeof text - 1 ? size : sizeof text - 1;
	memcpy(text, message, length);
	while (length > 0 && (text[length - 1] == '\n' || text[length - 1] == '\r'))
		length--;
	text[length] = '\0';
	char commit_path[GRAPHFS_PATH_MAX];
	table_path(mount, branch, SCRATCH_STAGING, ".commit", commit_path, sizeof commit_path);

	pthread_mutex_lock(&workspace->commit_lock);
	int rc = 0;
	struct scratch **staged = NULL;
	char (*tables)[JOURNAL_NAME_MAX + 1] = NULL;
	const char **names = NULL;
	size_t count = 0, capacity = 0;
	bool committed = false;
	pthread_mutex_lock(&workspace->lock);
	for (struct scratch *scratch = workspace->scratches; scratch; scratch = scratch->next)
		if (scratch->named && scratch->staged)
			capacity++;
	if (capacity) {
		staged = calloc(capacity, sizeof *staged);
		tables = calloc(capacity, sizeof *tables);
		names = calloc(capacity, sizeof *names);
	}
	if (capacity && (!staged || !tables || !names)) {
		rc = -ENOMEM;
	} else {
		for (struct scratch *scratch = workspace->scratches; scratch; scratch = scratch->next)
			if (scratch->named && scratch->staged) {
				scratch->references++;
				staged[count] = scratch;
				snprintf(tables[count], sizeof tables[count], "%s", scratch->table);
				names[count] = tables[count];
				count++;
			}
	}
	pthread_mutex_unlock(&workspace->lock);
	if (rc == 0 && count == 0) {
		struct error_info error;
		error_info_clear(&error);
		error_info_set(&error, -ENODATA, "nothing is staged");
		mount_error_record(mount, commit_path, &error, -ENODATA);
		rc = -ENODATA;
	}
	/* Every staged file's writer must hold exactly its bytes, finished. */
	for (size_t i = 0; i < count && rc == 0; i++) {
		struct scratch *scratch = staged[i];
		if (!scratch->writer || scratch->writer_failed)
			rc = staged_rebuild(mount, workspace, scratch);
		if (rc == 0 && !scratch->writer_finished) {
			struct error_info error;
			error_info_clear(&error);
			rc = store_writer_finish(scratch->writer, &error);
			if (rc < 0) {
				char path[GRAPHFS_PATH_MAX];
				table_path(mount, branch, SCRATCH_STAGING, scratch->name, path, sizeof path);
				mount_error_record(mount, path, &error, rc);
				scratch->writer_failed = true;
			} else {
				scratch->writer_finished = true;
			}
		}
	}
	if (rc == 0) {
		struct store_commit_result result;
		struct error_info error;
		error_info_clear(&error);
		rc = store_txn_commit(workspace->staging, length ? text : NULL, &result, &error);
		if (rc < 0) {
			mount_error_record(mount, error.path[0] ? error.path : commit_path, &error, rc);
		} else {
			atomic_fetch_add(&mount->commits, 1);
			committed = true;
			/* The writers went with the commit. */
			pthread_mutex_lock(&workspace->lock);
			for (size_t i = 0; i < count; i++) {
				staged[i]->writer = NULL;
				if (staged[i]->named)
					scratch_unname(workspace, staged[i]);
			}
			pthread_mutex_unlock(&workspace->lock);
			store_txn_free(workspace->staging);
			workspace->staging = NULL;
		}
	}
	pthread_mutex_lock(&workspace->lock);
	for (size_t i = 0; i < count; i++)
		scratch_put(staged[i]);
	pthread_mutex_unlock(&workspace->lock);
	pthread_mutex_unlock(&workspace->commit_lock);
	/* Not under commit_lock: a request holding a directory lock may be waiting for it. */
	if (committed)
		mount_invalidate_branch(mount, branch, names, count, true);
	free(staged);
	free(tables);
	free(names);
	return rc;
}

/* ---- opening ------------------------------------------------------------------------- */

static void file_register(struct open_file *file)
{
	pthread_mutex_lock(&all_files_lock);
	file->all_previous = NULL;
	file->all_next = all_files;
	if (all_files)
		all_files->all_previous = file;
	all_files = file;
	pthread_mutex_unlock(&all_files_lock);
}

static void file_unregister(struct open_file *file)
{
	pthread_mutex_lock(&all_files_lock);
	if (file->all_previous)
		file->all_previous->all_next = file->all_next;
	else if (all_files == file)
		all_files = file->all_next;
	if (file->all_next)
		file->all_next->all_previous = file->all_previous;
	pthread_mutex_unlock(&all_files_lock);
}

static struct open_file *file_new(struct mount *mount, struct node *node, enum file_role role)
{
	struct open_file *file = calloc(1, sizeof *file);
	if (!file)
		return NULL;
	pthread_mutex_init(&file->lock, NULL);
	file->node = node;
	inode_retain(mount, node);
	file->role = role;
	file->copy_descriptor = -1;
	buf_init(&file->bytes);
	inode_path(mount, node, file->path, sizeof file->path);
	snprintf(file->branch, sizeof file->branch, "%s", node->view.branch);
	snprintf(file->table, sizeof file->table, "%s", node->table);
	return file;
}

/* Frees a file's resources (no publishing). */
static void file_free(struct mount *mount, struct open_file *file)
{
	if (file->txn)
		store_txn_free(file->txn);
	if (file->reader)
		store_table_close(file->reader);
	store_snapshot_release(file->snapshot);
	if (file->copy_descriptor >= 0)
		close(file->copy_descriptor);
	if (file->pending_registered)
		pending_remove(mount, file->branch,
			       file->role == FILE_SCHEMA_WRITE ? SCRATCH_SCHEMA : SCRATCH_TABLES, file->table);
	scratch_release(file->scratch);
	buf_free(&file->bytes);
	inode_release(mount, file->node);
	pthread_mutex_destroy(&file->lock);
	free(file);
}

void files_close_all(struct mount *mount)
{
	for (;;) {
		pthread_mutex_lock(&all_files_lock);
		struct open_file *file = all_files;
		pthread_mutex_unlock(&all_files_lock);
		if (!file)
			break;
		file_unregister(file);
		file_free(mount, file);
	}
}

/* Pins the live (or historical) table for reading; a missing table reads empty. */
static int pin_table(struct mount *mount, struct open_file *file)
{
	int rc = view_snapshot(mount, &file->node->view, &file->snapshot);
	if (rc < 0)
		return rc;
	rc = store_table_open(file->snapshot, file->table, &file->reader);
	if (rc == -ENOENT) {
		file->reader = NULL;
		return -ENOENT;
	}
	return rc;
}

static int begin_stream(struct mount *mount, struct open_file *file, enum store_write_mode mode)
{
	struct error_info error;
	error_info_clear(&error);
	int rc = 0;
	if (!file->txn) {
		rc = store_txn_begin(mount->store, file->branch, &file->txn, &error);
		if (rc < 0)
			return rc;
	}
	rc = store_txn_writer(file->txn, file->table, mode, 0, file->path, &file->writer, &error);
	if (rc < 0) {
		mount_error_record(mount, file->path, &error, rc);
		return rc;
	}
	return 0;
}

static int open_table_write(struct mount *mount, struct open_file *file, int flags, bool created)
{
	struct head_row head;
	struct store_snapshot *snapshot = NULL;
	int rc = view_snapshot(mount, &file->node->view, &snapshot);
	if (rc < 0)
		return rc;
	rc = store_snapshot_head(snapshot, file->table, &head);
	store_snapshot_release(snapshot);
	if (rc < 0 && rc != -ENOENT)
		return rc;   /* not "absent": that would publish an overwrite */
	bool exists = rc == 0 && !workspace_hidden(mount, file->branch, file->table);
	if (created || !exists) {
		hidden_set(mount, file->branch, file->table, false);
		if (!exists) {
			pending_add(mount, file->branch, SCRATCH_TABLES, file->table);
			file->pending_registered = true;
		}
	}
	if ((flags & O_TRUNC) || created || !exists) {
		file->write_kind = WRITE_OVERWRITE;
		file->truncate_pending = true;
		return begin_stream(mount, file, STORE_OVERWRITE);
	}
	if (flags & O_APPEND) {
		file->write_kind = WRITE_MERGE;
		file->append = true;
		if ((flags & O_ACCMODE) == O_RDWR) {
			rc = pin_table(mount, file);
			if (rc < 0 && rc != -ENOENT)
				return rc;
		}
		return begin_stream(mount, file, STORE_MERGE);
	}
	file->write_kind = WRITE_EDIT;
	rc = pin_table(mount, file);
	if (rc < 0)
		return rc;
	file->based_on = head.table_version;
	return 0;
}

static int open_schema_write(struct mount *mount, struct open_file *file, int flags, bool created)
{
	struct store_snapshot *snapshot = NULL;
	int rc = view_snapshot(mount, &file->node->view, &snapshot);
	if (rc < 0)
		return rc;
	struct head_row head;
	bool exists = store_snapshot_head(snapshot, file->table, &head) == 0;
	if (exists && !(flags & O_TRUNC) && !created)
		rc = store_snapshot_schema(snapshot, file->table, &file->bytes);
	store_snapshot_release(snapshot);
	if (rc < 0)
		return rc;
	if (!exists) {
		pending_add(mount, file->branch, SCRATCH_SCHEMA, file->table);
		file->pending_registered = true;
	}
	if (flags & O_APPEND)
		file->append = true;
	/* Not dirty until written: a shell redirection closes a duplicate
	 * descriptor before the command writes, and an empty schema is no
	 * schema, so an O_TRUNC never written publishes nothing. */
	return 0;
}

static int open_scratch(struct mount *mount, struct open_file *file, int flags, bool created)
{
	file->scratch = scratch_find(mount, file->node->parent, file->node->name);
	if (!file->scratch)
		return -ENOENT;
	struct scratch *scratch = file->scratch;
	if (flags & O_APPEND)
		file->append = true;
	if (!file->writable)
		return 0;
	if (!scratch->staged) {
		if ((flags & O_TRUNC) && ftruncate(scratch->descriptor, 0) != 0)
			return -errno;
		return 0;
	}
	struct workspace *workspace = scratch->workspace;
	pthread_mutex_lock(&workspace->commit_lock);
	int rc = 0;
	if (created) {
		/* A new staged file: >> stages a merge, anything else an overwrite. */
		scratch->write_mode = (flags & O_APPEND) ? STORE_MERGE : STORE_OVERWRITE;
		rc = staged_rebuild(mount, workspace, scratch);
		file->staged_stream = true;
	} else if (flags & O_TRUNC) {
		if (ftruncate(scratch->descriptor, 0) != 0)
			rc = -errno;
		scratch->write_mode = STORE_OVERWRITE;
		if (rc == 0)
			rc = staged_rebuild(mount, workspace, scratch);
		file->staged_stream = true;
	} else if (flags & O_APPEND) {
		if (!scratch->writer || scratch->writer_finished || scratch->writer_failed)
			rc = staged_rebuild(mount, workspace, scratch);
		file->staged_stream = true;
	} else {
		file->staged_edit = true;
	}
	pthread_mutex_unlock(&workspace->commit_lock);
	return rc;
}

int file_open(struct mount *mount, struct node *node, struct fuse_file_info *fi, bool created)
{
	int flags = fi->flags;
	bool writable = (flags & O_ACCMODE) != O_RDONLY;
	bool live = node->view.version == 0;
	if (writable && (!live || mount->read_only))
		return -EROFS;
	if (!live && (flags & O_TRUNC))
		return -EROFS;

	enum file_role role;
	switch (node->kind) {
	case NODE_TABLE_FILE:
		role = writable ? FILE_TABLE_WRITE : FILE_TABLE_READ;
		break;
	case NODE_SCHEMA_FILE:
		role = writable ? FILE_SCHEMA_WRITE : FILE_RENDERED;
		break;
	case NODE_SCRATCH_FILE:
	case NODE_STAGED_FILE:
		role = FILE_SCRATCH;
		break;
	case NODE_COMMIT_FILE:
		role = FILE_COMMIT;
		break;
	case NODE_HEAD_FILE:
	case NODE_DROPPED_FILE:
	case NODE_LOG_FILE:
	case NODE_STATS_FILE:
	case NODE_ERRORS_FILE:
	case NODE_VERSION_FILE:
		if (writable || (flags & O_TRUNC))
			return -EACCES;
		role = FILE_RENDERED;
		break;
	default:
		return -EISDIR;
	}
	struct open_file *file = file_new(mount, node, role);
	if (!file)
		return -ENOMEM;
	file->writable = writable;
	int rc = 0;
	switch (role) {
	case FILE_TABLE_READ:
		rc = pin_table(mount, file);
		if (rc == -ENOENT && live && pending_find(mount, file->branch, SCRATCH_TABLES, file->table, NULL))
			rc = 0;   /* being created by another handle: empty until published */
		break;
	case FILE_RENDERED: {
		struct store_snapshot *snapshot = NULL;
		if (node->kind != NODE_STATS_FILE && node->kind != NODE_ERRORS_FILE &&
		    node->kind != NODE_VERSION_FILE)
			rc = view_snapshot(mount, &node->view, &snapshot);
		if (rc == 0)
			rc = view_render(mount, node, snapshot, &file->bytes);
		if (rc == -ENOENT && node->kind == NODE_SCHEMA_FILE && live &&
		    pending_find(mount, file->branch, SCRATCH_SCHEMA, file->table, NULL))
			rc = 0;
		store_snapshot_release(snapshot);
		break;
	}
	case FILE_TABLE_WRITE:
		rc = open_table_write(mount, file, flags, created);
		break;
	case FILE_SCHEMA_WRITE:
		rc = open_schema_write(mount, file, flags, created);
		break;
	case FILE_SCRATCH:
		rc = open_scratch(mount, file, flags, created);
		break;
	case FILE_COMMIT:
		break;
	}
	if (rc < 0) {
		file_free(mount, file);
		return rc;
	}
	file_register(file);
	fi->fh = (uint64_t)(uintptr_t)file;
	if (live) {
		fi->direct_io = 1;
	} else {
		fi->keep_cache = 1;
	}
	return 0;
}

/* ---- reading ----------------------------------------------------------------------------- */

ssize_t file_read(struct mount *mount, struct open_file *file, char *out, size_t size, off_t offset)
{
	(void)mount;
	if (offset < 0)
		return -EINVAL;
	ssize_t result = 0;
	pthread_mutex_lock(&file->lock);
	switch (file->role) {
	case FILE_TABLE_READ:
	case FILE_TABLE_WRITE:
		if (file->copy_descriptor >= 0) {
			result = pread(file->copy_descriptor, out, size, offset);
			if (result < 0)
				result = -errno;
		} else if (file->reader && (file->role == FILE_TABLE_READ || file->write_kind != WRITE_OVERWRITE)) {
			result = store_table_pread(file->reader, out, size, (uint64_t)offset);
		}
		break;
	case FILE_RENDERED:
	case FILE_SCHEMA_WRITE:
		if ((uint64_t)offset < file->bytes.size) {
			size_t available = file->bytes.size - (size_t)offset;
			result = (ssize_t)(size < available ? size : available);
			memcpy(out, file->bytes.data + offset, (size_t)result);
		}
		break;
	case FILE_SCRATCH:
		result = pread(file->scratch->descriptor, out, size, offset);
		if (result < 0)
			result = -errno;
		break;
	case FILE_COMMIT:
		break;
	}
	pthread_mutex_unlock(&file->lock);
	return result;
}

/* ---- writing ---------------------------------------------------------------------------- */

/* Makes the private copy of an edit handle (file locked). */
static int ensure_copy(struct mount *mount, struct open_file *file)
{
	if (file->copy_descriptor >= 0)
		return 0;
	int descriptor = temporary_file(mount);
	if (descriptor < 0)
		return descriptor;
	int rc = file->reader ? copy_table(file->reader, descriptor) : 0;
	if (rc < 0) {
		close(descriptor);
		return rc;
	}
	file->copy_descriptor = descriptor;
	return 0;
}

static ssize_t write_stream(struct mount *mount, struct open_file *file, const char *bytes, size_t size,
			    off_t offset)
{
	if (file->failed)
		return file->failed;
	if (file->write_kind == WRITE_OVERWRITE && (uint64_t)offset != file->stream_bytes) {
		struct error_info error;
		error_info_clear(&error);
		error_info_set(&error, -EINVAL,
			       "a table opened with O_TRUNC is written from start to end (write at offset %lld, expected %llu)",
			       (long long)offset, (unsigned long long)file->stream_bytes);
		mount_error_record(mount, file->path, &error, -EINVAL);
		file->failed = -EINVAL;
		return -EINVAL;
	}
	int rc = 0;
	if (!file->writer) {
		/* After a publish, further lines are merged into what was published. */
		rc = begin_stream(mount, file, STORE_MERGE);
		if (rc < 0) {
			file->failed = rc;
			return rc;
		}
	}
	struct error_info error;
	error_info_clear(&error);
	rc = store_writer_write(file->writer, bytes, size, &error);
	if (rc < 0) {
		mount_error_record(mount, file->path, &error, rc);
		file->failed = rc;
		return rc;
	}
	file->stream_bytes += size;
	file->dirty = true;
	if (file->pending_registered)
		pending_set_size(mount, file->branch, SCRATCH_TABLES, file->table, file->stream_bytes);
	return (ssize_t)size;
}

static ssize_t write_staged(struct mount *mount, struct open_file *file, const char *bytes, size_t size,
			    off_t offset)
{
	struct scratch *scratch = file->scratch;
	struct workspace *workspace = scratch->workspace;
	if (file->failed)
		return file->failed;
	pthread_mutex_lock(&workspace->commit_lock);
	ssize_t result = (ssize_t)size;
	if (!scratch->named) {
		/* Removed or committed meanwhile: the bytes stay private. */
		int rc = write_all(scratch->descriptor, bytes, size, (uint64_t)offset);
		if (rc < 0)
			result = rc;
		goto out;
	}
	if (file->staged_edit) {
		int rc = write_all(scratch->descriptor, bytes, size, (uint64_t)offset);
		if (rc < 0)
			result = rc;
		else
			scratch->writer_failed = true;   /* rebuilt at flush / commit */
		goto out;
	}
	if (!scratch->writer || scratch->writer_finished || scratch->writer_failed) {
		int rc = staged_rebuild(mount, workspace, scratch);
		if (rc < 0) {
			result = rc;
			goto out;
		}
	}
	struct error_info error;
	error_info_clear(&error);
	int rc = store_writer_write(scratch->writer, bytes, size, &error);
	if (rc < 0) {
		mount_error_record(mount, file->path, &error, rc);
		file->failed = rc;
		/* The staged file keeps the bytes accepted before this write. */
		scratch->writer_failed = true;
		result = rc;
		goto out;
	}
	rc = write_all(scratch->descriptor, bytes, size, descriptor_size(scratch->descriptor));
	if (rc < 0)
		result = rc;
out:
	pthread_mutex_unlock(&workspace->commit_lock);
	return result;
}

ssize_t file_write(struct mount *mount, struct open_file *file, const char *bytes, size_t size,
		   off_t offset)
{
	if (!file->writable)
		return -EBADF;
	if (offset < 0)
		return -EINVAL;
	ssize_t result = (ssize_t)size;
	pthread_mutex_lock(&file->lock);
	switch (file->role) {
	case FILE_TABLE_WRITE:
		if (file->write_kind == WRITE_EDIT) {
			int rc = ensure_copy(mount, file);
			if (rc == 0)
				rc = write_all(file->copy_descriptor, bytes, size, (uint64_t)offset);
			if (rc < 0)
				result = rc;
			else
				file->dirty = true;
		} else {
			result = write_stream(mount, file, bytes, size, offset);
		}
		break;
	case FILE_SCHEMA_WRITE: {
		size_t at = file->append ? file->bytes.size : (size_t)offset;
		if ((uint64_t)offset + size > GRAPHFS_SCHEMA_MAX) {
			result = -EFBIG;
			break;
		}
		if (at + size > file->bytes.size) {
			size_t grow = at + size - file->bytes.size;
			if (buf_reserve(&file->bytes, grow) < 0) {
				result = -ENOMEM;
				break;
			}
			memset(file->bytes.data + file->bytes.size, 0, grow);
			file->bytes.size += grow;
		}
		memcpy(file->bytes.data + at, bytes, size);
		file->dirty = true;
		break;
	}
	case FILE_SCRATCH:
		/* A staged file removed (or committed) while open is a plain private file now. */
		if (file->scratch->staged && file->scratch->named && (file->staged_stream || file->staged_edit)) {
			result = write_staged(mount, file, bytes, size, offset);
		} else {
			uint64_t at = file->append ? descriptor_size(file->scratch->descriptor) : (uint64_t)offset;
			int rc = write_all(file->scratch->descriptor, bytes, size, at);
			if (rc < 0)
				result = rc;
			else
				clock_gettime(CLOCK_REALTIME, &file->scratch->mtime);
		}
		break;
	case FILE_COMMIT:
		result = staging_commit(mount, file->branch, bytes, size);
		if (result == 0)
			result = (ssize_t)size;
		break;
	default:
		result = -EBADF;
		break;
	}
	pthread_mutex_unlock(&file->lock);
	return result;
}

/* ---- publishing ------------------------------------------------------------------------- */

static void after_publish(struct mount *mount, struct open_file *file)
{
	const char *names[1] = { file->table };
	if (file->pending_registered) {
		pending_remove(mount, file->branch,
			       file->role == FILE_SCHEMA_WRITE ? SCRATCH_SCHEMA : SCRATCH_TABLES, file->table);
		file->pending_registered = false;
	}
	hidden_set(mount, file->branch, file->table, false);
	mount_invalidate_branch(mount, file->branch, names, 1, false);
}

static int publish_stream(struct mount *mount, struct open_file *file)
{
	struct error_info error;
	error_info_clear(&error);
	int rc = 0;
	if (!file->writer) {
		rc = begin_stream(mount, file, STORE_OVERWRITE);
		if (rc < 0)
			return rc;
	}
	rc = store_writer_finish(file->writer, &error);
	if (rc < 0) {
		mount_error_record(mount, file->path, &error, rc);
		return rc;
	}
	rc = commit_transaction(mount, file->txn, NULL, file->path);
	if (rc < 0)
		return rc;
	store_txn_free(file->txn);
	file->txn = NULL;
	file->writer = NULL;
	file->dirty = false;
	file->truncate_pending = false;
	after_publish(mount, file);
	return 0;
}

static int publish_edit(struct mount *mount, struct open_file *file)
{
	struct error_info error;
	error_info_clear(&error);
	struct store_txn *txn = NULL;
	struct store_writer *writer = NULL;
	int rc = ensure_copy(mount, file);
	if (rc < 0)
		return rc;
	rc = store_txn_begin(mount->store, file->branch, &txn, &error);
	if (rc < 0)
		return rc;
	rc = store_txn_writer(txn, file->table, STORE_OVERWRITE, file->based_on, file->path, &writer, &error);
	if (rc == 0)
		rc = feed_descriptor(writer, file->copy_descriptor, &error);
	if (rc == 0)
		rc = store_writer_finish(writer, &error);
	if (rc < 0) {
		mount_error_record(mount, file->path, &error, rc);
		store_txn_free(txn);
		return rc;
	}
	struct store_commit_result result;
	error_info_clear(&error);
	rc = store_txn_commit(txn, NULL, &result, &error);
	store_txn_free(txn);
	if (rc < 0) {
		if (rc == -EBUSY && !error.message[0])
			error_info_set(&error, -EBUSY, "the table changed since this file was opened; nothing was published");
		mount_error_record(mount, file->path, &error, rc);
		return rc;
	}
	atomic_fetch_add(&mount->commits, 1);
	file->based_on = result.version;
	file->dirty = false;
	after_publish(mount, file);
	return 0;
}

static int publish_schema(struct mount *mount, struct open_file *file)
{
	struct error_info error;
	error_info_clear(&error);
	struct store_txn *txn = NULL;
	int rc = store_txn_begin(mount->store, file->branch, &txn, &error);
	if (rc < 0)
		return rc;
	rc = store_txn_schema(txn, file->table, (const char *)file->bytes.data, file->bytes.size, &error);
	if (rc < 0) {
		mount_error_record(mount, file->path, &error, rc);
		store_txn_free(txn);
		return rc;
	}
	rc = commit_transaction(mount, txn, NULL, file->path);
	store_txn_free(txn);
	if (rc < 0)
		return rc;
	file->dirty = false;
	after_publish(mount, file);
	return 0;
}

static int publish(struct mount *mount, struct open_file *file, bool releasing)
{
	if (!file->writable)
		return 0;
	int rc = 0;
	switch (file->role) {
	case FILE_TABLE_WRITE:
		if (file->failed)
			return file->failed;
		if (file->write_kind == WRITE_EDIT) {
			if (file->dirty)
				rc = publish_edit(mount, file);
		} else if (file->dirty || (releasing && file->truncate_pending)) {
			rc = publish_stream(mount, file);
		}
		if (rc < 0)
			file->failed = rc;
		return rc;
	case FILE_SCHEMA_WRITE:
		if (file->failed)
			return file->failed;
		if (file->dirty)
			rc = publish_schema(mount, file);
		if (rc < 0)
			file->failed = rc;
		return rc;
	case FILE_SCRATCH:
		if (file->scratch->staged && file->scratch->named && file->staged_edit) {
			struct workspace *workspace = file->scratch->workspace;
			pthread_mutex_lock(&workspace->commit_lock);
			if (file->scratch->named && file->scratch->writer_failed)
				rc = staged_rebuild(mount, workspace, file->scratch);
			pthread_mutex_unlock(&workspace->commit_lock);
		}
		return rc;
	default:
		return 0;
	}
}

int file_flush(struct mount *mount, struct open_file *file)
{
	pthread_mutex_lock(&file->lock);
	int rc = publish(mount, file, false);
	pthread_mutex_unlock(&file->lock);
	return rc;
}

int file_fsync(struct mount *mount, struct open_file *file)
{
	return file_flush(mount, file);
}

void file_release(struct mount *mount, struct open_file *file)
{
	pthread_mutex_lock(&file->lock);
	bool was_pending = file->pending_registered;
	/* Only an O_TRUNC never written to publishes here; its error cannot reach
	 * close(2) any more, so it goes to .graphfs/errors and the log. */
	bool attempt = file->writable && file->role == FILE_TABLE_WRITE && !file->failed &&
		       file->truncate_pending && !file->dirty;
	int rc = publish(mount, file, true);
	if (attempt && rc < 0)
		mount_log(LOG_WARNING, "%s: publishing at the last close failed: %s", file->path,
			  strerror(-rc));
	pthread_mutex_unlock(&file->lock);
	file_unregister(file);
	char branch[JOURNAL_NAME_MAX + 1];
	char table[JOURNAL_NAME_MAX + 1];
	snprintf(branch, sizeof branch, "%s", file->branch);
	snprintf(table, sizeof table, "%s", file->table);
	bool still_pending = file->pending_registered;
	file_free(mount, file);
	/* A creation that never published: its name goes away again. */
	if (was_pending && still_pending) {
		const char *names[1] = { table };
		mount_invalidate_branch(mount, branch, names, 1, true);
	}
}

int64_t file_pending_size(struct mount *mount, const struct node *node)
{
	uint64_t size = 0;
	if (pending_find(mount, node->view.branch, SCRATCH_TABLES, node->table, &size))
		return (int64_t)size;
	return -1;
}

/* ---- truncate ------------------------------------------------------------------------------ */

static int truncate_open(struct mount *mount, struct open_file *file, uint64_t size)
{
	switch (file->role) {
	case FILE_TABLE_WRITE:
		if (file->failed)
			return file->failed;
		if (size == 0) {
			/* Overwrite semantics from here on. */
			if (file->writer) {
				store_writer_discard(file->writer);
				file->writer = NULL;
			}
			if (file->copy_descriptor >= 0) {
				close(file->copy_descriptor);
				file->copy_descriptor = -1;
			}
			file->write_kind = WRITE_OVERWRITE;
			file->stream_bytes = 0;
			file->truncate_pending = true;
			file->dirty = true;
			int rc = begin_stream(mount, file, STORE_OVERWRITE);
			if (rc < 0)
				file->failed = rc;
			return rc;
		}
		if (file->write_kind != WRITE_EDIT) {
			if (size == file->stream_bytes)
				return 0;
			return -EINVAL;
		}
		int rc = ensure_copy(mount, file);
		if (rc < 0)
			return rc;
		if (ftruncate(file->copy_descriptor, (off_t)size) != 0)
			return -errno;
		file->dirty = true;
		return 0;
	case FILE_SCHEMA_WRITE:
		if (size > GRAPHFS_SCHEMA_MAX)
			return -EFBIG;
		if (size <= file->bytes.size) {
			file->bytes.size = (size_t)size;
		} else {
			size_t grow = (size_t)size - file->bytes.size;
			if (buf_reserve(&file->bytes, grow) < 0)
				return -ENOMEM;
			memset(file->bytes.data + file->bytes.size, 0, grow);
			file->bytes.size += grow;
		}
		file->dirty = true;
		return 0;
	case FILE_SCRATCH: {
		struct scratch *scratch = file->scratch;
		if (ftruncate(scratch->descriptor, (off_t)size) != 0)
			return -errno;
		if (scratch->staged && scratch->named) {
			struct workspace *workspace = scratch->workspace;
			pthread_mutex_lock(&workspace->commit_lock);
			int result = staged_rebuild(mount, workspace, scratch);
			pthread_mutex_unlock(&workspace->commit_lock);
			return result;
		}
		return 0;
	}
	default:
		return -EACCES;
	}
}

int file_truncate(struct mount *mount, struct node *node, struct open_file *file, uint64_t size)
{
	if (node->view.version != 0 || mount->read_only)
		return -EROFS;
	if (file && file->writable) {
		pthread_mutex_lock(&file->lock);
		int rc = truncate_open(mount, file, size);
		pthread_mutex_unlock(&file->lock);
		return rc;
	}
	/* A path truncate (or through a read-only handle): a write of its own. */
	struct fuse_file_info fi;
	memset(&fi, 0, sizeof fi);
	fi.flags = O_WRONLY | (size == 0 ? O_TRUNC : 0);
	int rc = file_open(mount, node, &fi, false);
	if (rc < 0)
		return rc;
	struct open_file *own = (struct open_file *)(uintptr_t)fi.fh;
	pthread_mutex_lock(&own->lock);
	rc = truncate_open(mount, own, size);
	if (rc == 0)
		rc = publish(mount, own, false);
	pthread_mutex_unlock(&own->lock);
	file_unregister(own);
	file_free(mount, own);
	return rc;
}

/* ---- unlink and rename ------------------------------------------------------------------------ */

int files_unlink(struct mount *mount, struct node *parent, const char *name,
		 char dropped[JOURNAL_NAME_MAX + 1])
{
	dropped[0] = '\0';
	if (parent->view.version != 0)
		return -EROFS;
	if (mount->read_only)
		return -EROFS;
	char table[JOURNAL_NAME_MAX + 1];
	char path[GRAPHFS_PATH_MAX];
	struct workspace *workspace = workspace_get(mount, parent->view.branch);
	if (!workspace)
		return -ENOMEM;
	switch (parent->kind) {
	case NODE_TABLES_DIR:
	case NODE_SCHEMA_DIR:
	case NODE_STAGING_DIR: {
		enum scratch_dir directory = directory_of(parent);
		if (directory == SCRATCH_STAGING && strcmp(name, ".commit") == 0)
			return -EPERM;
		pthread_mutex_lock(&workspace->commit_lock);
		pthread_mutex_lock(&workspace->lock);
		struct scratch *scratch = scratch_lookup(workspace, directory, name);
		char detached[JOURNAL_NAME_MAX + 1] = "";
		if (scratch) {
			snprintf(detached, sizeof detached, "%s", scratch->detached_from);
			scratch_unname(workspace, scratch);
		}
		pthread_mutex_unlock(&workspace->lock);
		if (scratch && directory == SCRATCH_STAGING)
			staging_settle(workspace);
		pthread_mutex_unlock(&workspace->commit_lock);
		if (scratch) {
			/* `mv X.jsonl X.bak; rm X.bak`: the table goes. */
			if (detached[0] && workspace_hidden(mount, parent->view.branch, detached)) {
				struct store_txn *txn = NULL;
				struct error_info error;
				error_info_clear(&error);
				table_path(mount, parent->view.branch, SCRATCH_TABLES, name, path, sizeof path);
				int rc = store_txn_begin(mount->store, parent->view.branch, &txn, &error);
				if (rc == 0)
					rc = store_txn_drop(txn, detached, &error);
				if (rc == 0)
					rc = commit_transaction(mount, txn, NULL, path);
				else
					mount_error_record(mount, path, &error, rc);
				store_txn_free(txn);
				if (rc < 0)
					return rc;
				hidden_set(mount, parent->view.branch, detached, false);
				snprintf(dropped, JOURNAL_NAME_MAX + 1, "%s", detached);
			}
			return 0;
		}
		if (directory != SCRATCH_TABLES)
			return directory == SCRATCH_SCHEMA && table_name_from_file(name, ".json", table) ? -EPERM
															: -ENOENT;
		if (!table_name_from_file(name, ".jsonl", table))
			return -ENOENT;
		if (workspace_hidden(mount, parent->view.branch, table))
			return -ENOENT;
		table_path(mount, parent->view.branch, SCRATCH_TABLES, name, path, sizeof path);
		struct store_txn *txn = NULL;
		struct error_info error;
		error_info_clear(&error);
		int rc = store_txn_begin(mount->store, parent->view.branch, &txn, &error);
		if (rc < 0)
			return rc;
		rc = store_txn_drop(txn, table, &error);
		if (rc < 0) {
			if (rc != -ENOENT)
				mount_error_record(mount, path, &error, rc);
			else if (pending_find(mount, parent->view.branch, SCRATCH_TABLES, table, NULL))
				rc = -EBUSY;
			store_txn_free(txn);
			return rc;
		}
		rc = commit_transaction(mount, txn, NULL, path);
		store_txn_free(txn);
		if (rc == 0)
			snprintf(dropped, JOURNAL_NAME_MAX + 1, "%s", table);
		return rc;
	}
	case NODE_HEADS_DIR:
	case NODE_DROPPED_DIR:
	case NODE_ROOT:
	case NODE_BRANCH_ROOT:
	case NODE_META_DIR:
		return -EPERM;
	default:
		return -EPERM;
	}
}

/* Publishes bytes of a scratch as an overwrite of table (scratch -> <Name>.jsonl). */
static int publish_scratch_overwrite(struct mount *mount, const char *branch, struct scratch *scratch,
				     const char *table, const char *path)
{
	struct error_info error;
	error_info_clear(&error);
	struct store_txn *txn = NULL;
	struct store_writer *writer = NULL;
	int rc = store_txn_begin(mount->store, branch, &txn, &error);
	if (rc < 0)
		return rc;
	rc = store_txn_writer(txn, table, STORE_OVERWRITE, 0, path, &writer, &error);
	if (rc == 0)
		rc = feed_descriptor(writer, scratch->descriptor, &error);
	if (rc == 0)
		rc = store_writer_finish(writer, &error);
	if (rc < 0) {
		mount_error_record(mount, path, &error, rc);
		store_txn_free(txn);
		return rc;
	}
	rc = commit_transaction(mount, txn, NULL, path);
	store_txn_free(txn);
	return rc;
}

static int publish_scratch_schema(struct mount *mount, const char *branch, struct scratch *scratch,
				  const char *table, const char *path)
{
	struct buf bytes;
	buf_init(&bytes);
	int rc = read_descriptor(scratch->descriptor, &bytes, GRAPHFS_SCHEMA_MAX);
	if (rc < 0) {
		buf_free(&bytes);
		return rc;
	}
	struct error_info error;
	error_info_clear(&error);
	struct store_txn *txn = NULL;
	rc = store_txn_begin(mount->store, branch, &txn, &error);
	if (rc == 0) {
		rc = store_txn_schema(txn, table, (const char *)bytes.data, bytes.size, &error);
		if (rc < 0)
			mount_error_record(mount, path, &error, rc);
		else
			rc = commit_transaction(mount, txn, NULL, path);
	}
	store_txn_free(txn);
	buf_free(&bytes);
	return rc;
}

/* A table's current bytes become a scratch file; the table name is hidden in this mount. */
static int detach_table(struct mount *mount, struct workspace *workspace, enum scratch_dir directory,
			const char *table, const char *new_name)
{
	struct view view = { .version = 0 };
	snprintf(view.branch, sizeof view.branch, "%s", workspace->branch);
	struct store_snapshot *snapshot = NULL;
	int rc = view_snapshot(mount, &view, &snapshot);
	if (rc < 0)
		return rc;
	struct store_table *reader = NULL;
	struct buf schema;
	buf_init(&schema);
	if (directory == SCRATCH_TABLES)
		rc = store_table_open(snapshot, table, &reader);
	else
		rc = store_snapshot_schema(snapshot, table, &schema);
	store_snapshot_release(snapshot);
	if (rc < 0) {
		buf_free(&schema);
		return rc;
	}
	pthread_mutex_lock(&workspace->lock);
	struct scratch *existing = scratch_lookup(workspace, directory, new_name);
	if (existing)
		scratch_unname(workspace, existing);
	struct scratch *scratch = scratch_new(mount, workspace, directory, new_name, 0644, &rc);
	if (scratch) {
		snprintf(scratch->detached_from, sizeof scratch->detached_from, "%s", table);
		rc = reader ? copy_table(reader, scratch->descriptor)
			    : write_all(scratch->descriptor, schema.data, schema.size, 0);
	}
	pthread_mutex_unlock(&workspace->lock);
	if (reader)
		store_table_close(reader);
	buf_free(&schema);
	if (rc < 0)
		return rc;
	if (directory == SCRATCH_TABLES)
		hidden_set(mount, workspace->branch, table, true);
	return 0;
}

int files_rename(struct mount *mount, struct node *parent, const char *name, struct node *new_parent,
		 const char *new_name, char changed[2][JOURNAL_NAME_MAX + 1])
{
	changed[0][0] = changed[1][0] = '\0';
	if (parent->view.version != 0 || new_parent->view.version != 0 || mount->read_only)
		return -EROFS;
	if (parent->kind != new_parent->kind || strcmp(parent->view.branch, new_parent->view.branch) != 0)
		return -EXDEV;
	if (parent->kind != NODE_TABLES_DIR && parent->kind != NODE_SCHEMA_DIR &&
	    parent->kind != NODE_STAGING_DIR)
		return -EPERM;
	const char *branch = parent->view.branch;
	enum scratch_dir directory = directory_of(parent);
	const char *suffix = directory == SCRATCH_SCHEMA ? ".json" : ".jsonl";
	struct workspace *workspace = workspace_get(mount, branch);
	if (!workspace)
		return -ENOMEM;
	if (strcmp(name, new_name) == 0)
		return 0;
	if (directory == SCRATCH_STAGING && (strcmp(name, ".commit") == 0 || strcmp(new_name, ".commit") == 0))
		return -EPERM;
	char from_table[JOURNAL_NAME_MAX + 1], to_table[JOURNAL_NAME_MAX + 1];
	bool to_is_table = table_name_from_file(new_name, suffix, to_table);
	char path[GRAPHFS_PATH_MAX];
	table_path(mount, branch, directory, new_name, path, sizeof path);

	pthread_mutex_lock(&workspace->commit_lock);
	int rc = 0;
	struct scratch *scratch = scratch_find(mount, parent, name);
	if (scratch) {
		if (directory == SCRATCH_STAGING) {
			/* Staging: the name says whether the file is staged. */
			pthread_mutex_lock(&workspace->lock);
			struct scratch *existing = scratch_lookup(workspace, directory, new_name);
			if (existing && existing != scratch)
				scratch_unname(workspace, existing);
			if (scratch->writer) {
				store_writer_discard(scratch->writer);
				scratch->writer = NULL;
			}
			snprintf(scratch->name, sizeof scratch->name, "%s", new_name);
			scratch->staged = to_is_table;
			if (to_is_table) {
				snprintf(scratch->table, sizeof scratch->table, "%s", to_table);
				if (!scratch->writer_finished && scratch->write_mode != STORE_MERGE)
					scratch->write_mode = STORE_OVERWRITE;
			}
			pthread_mutex_unlock(&workspace->lock);
			if (to_is_table)
				rc = staged_rebuild(mount, workspace, scratch);
			staging_settle(workspace);
			scratch_release(scratch);
			goto out;
		}
		if (!to_is_table) {
			pthread_mutex_lock(&workspace->lock);
			struct scratch *existing = scratch_lookup(workspace, directory, new_name);
			if (existing && existing != scratch)
				scratch_unname(workspace, existing);
			snprintf(scratch->name, sizeof scratch->name, "%s", new_name);
			pthread_mutex_unlock(&workspace->lock);
			scratch_release(scratch);
			goto out;
		}
		/* scratch -> <Name>.jsonl / <Name>.json publishes. */
		if (directory == SCRATCH_TABLES)
			rc = publish_scratch_overwrite(mount, branch, scratch, to_table, path);
		else
			rc = publish_scratch_schema(mount, branch, scratch, to_table, path);
		if (rc == 0) {
			pthread_mutex_lock(&workspace->lock);
			if (scratch->named)
				scratch_unname(workspace, scratch);
			pthread_mutex_unlock(&workspace->lock);
			hidden_set(mount, branch, to_table, false);
			snprintf(changed[0], JOURNAL_NAME_MAX + 1, "%s", to_table);
		}
		scratch_release(scratch);
		goto out;
	}
	if (directory == SCRATCH_STAGING) {
		rc = -ENOENT;
		goto out;
	}
	if (!table_name_from_file(name, suffix, from_table) || workspace_hidden(mount, branch, from_table)) {
		rc = -ENOENT;
		goto out;
	}
	if (!to_is_table) {
		/* A table moved to a scratch name (an editor's backup): private copy, name hidden. */
		rc = detach_table(mount, workspace, directory, from_table, new_name);
		goto out;
	}
	/* <A>.jsonl -> <B>.jsonl: rename (replacing B drops it in the same commit). */
	struct store_txn *txn = NULL;
	struct error_info error;
	error_info_clear(&error);
	rc = store_txn_begin(mount->store, branch, &txn, &error);
	if (rc < 0)
		goto out;
	struct head_row head;
	bool target_exists = store_snapshot_head(store_txn_snapshot(txn), to_table, &head) == 0;
	if (target_exists)
		rc = store_txn_drop(txn, to_table, &error);
	if (rc == 0)
		rc = store_txn_rename(txn, from_table, to_table, &error);
	if (rc < 0)
		mount_error_record(mount, path, &error, rc);
	else
		rc = commit_transaction(mount, txn, NULL, path);
	store_txn_free(txn);
	if (rc == 0) {
		hidden_set(mount, branch, to_table, false);
		snprintf(changed[0], JOURNAL_NAME_MAX + 1, "%s", from_table);
		snprintf(changed[1], JOURNAL_NAME_MAX + 1, "%s", to_table);
	}
out:
	pthread_mutex_unlock(&workspace->commit_lock);
	return rc;
}

/* ---- unmount ---------------------------------------------------------------------------------- */

void workspaces_free(struct mount *mount)
{
	struct workspace *workspace = mount->workspaces;
	while (workspace) {
		struct workspace *next = workspace->next;
		while (workspace->scratches) {
			struct scratch *scratch = workspace->scratches;
			workspace->scratches = scratch->next;
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
		free(workspace);
		workspace = next;
	}
	mount->workspaces = NULL;
}
