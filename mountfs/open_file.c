/*
 * open_file — open files: pinned readers, rendered files, and the write
 * handles behind docs/MOUNT.md "Writing".
 *
 * An open file has one role, fixed at open:
 *   table reader   pins a snapshot and a store_table at open; reads pread it,
 *                  so a reader sees exactly one version however many commits
 *                  land while it reads
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
 * Write-handle states: enum write_state below (CLEAN, TRUNCATED,
 * TRUNCATED_CLOSED, DIRTY, FAILED), checked by write_state_check. After a
 * publish further writes continue as a merge of the added lines; an error is
 * sticky: the handle publishes nothing afterwards.
 *
 * Invariants:
 *   1. One tool write = one commit: a handle publishes at flush only what
 *      was written since its last publish; an O_TRUNC never followed by a
 *      write publishes (an empty table) at release. close(2) sees the flush's
 *      error; nothing is published when it fails.
 *   2. Every write(2) to a stream writer is validated by the store before
 *      it returns; a rejected line fails that write with its errno and adds
 *      a line to .graphfs/errors.
 *   3. A handle publishes as the user who opened it (the commit's actor).
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include <jansson.h>

#include "mountfs_int.h"

#define COPY_CHUNK (1024 * 1024)

enum file_role {
	FILE_TABLE_READ,
	FILE_RENDERED,
	FILE_TABLE_WRITE,
	FILE_SCHEMA_WRITE,
	FILE_SCRATCH,
	FILE_COMMIT,
	FILE_FEED,
};

enum write_kind { WRITE_OVERWRITE, WRITE_MERGE, WRITE_EDIT };

/*
 * The state of a write handle (table, schema and staged writers):
 *   CLEAN             nothing to publish (just opened, or published)
 *   TRUNCATED         an overwrite (O_TRUNC, a new table) not written to and not
 *                     published: the release publishes it (an empty table)
 *   TRUNCATED_CLOSED  the same after a close (flush) came: a shell redirection's
 *                     duplicate descriptor may still write (`cmd > t`); another open
 *                     of the table publishes it first (settle_deferred)
 *   DIRTY             written since the last publish: the next flush publishes
 *   FAILED            a write or publish failed (failure: its negative errno): sticky,
 *                     every later write and flush returns it, nothing is published
 * CLEAN -> TRUNCATED | DIRTY; TRUNCATED -> TRUNCATED_CLOSED; TRUNCATED(_CLOSED) ->
 * DIRTY | CLEAN (published); DIRTY -> CLEAN (published); any -> FAILED, never back.
 */
enum write_state { WRITE_CLEAN, WRITE_TRUNCATED, WRITE_TRUNCATED_CLOSED, WRITE_DIRTY, WRITE_FAILED };

struct open_file {
	struct open_file *all_previous;
	struct open_file *all_next;
	atomic_int references;             /* the handle's own, plus settle_deferred's while it works */
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
	bool counted_reader;               /* counted in the node's open_readers (live table reads) */

	/* table and schema writers */
	enum write_kind write_kind;
	struct store_txn *txn;
	struct store_writer *writer;
	uint64_t stream_bytes;             /* bytes fed (overwrite: the next offset) */
	enum write_state write_state;      /* what a publish has to do (write_state_enter) */
	int failure;                       /* WRITE_FAILED: the sticky negative errno */
	bool pending_registered;           /* counted in the workspace's pendings */
	int copy_descriptor;               /* edits: the private copy, -1 until the first change */
	int kept_descriptor;               /* streams: the bytes written since the last publish, kept
					    * for <Name>.jsonl.rej should the publish be refused (-1: none yet) */
	uint64_t kept_bytes;
	uint64_t based_on;                 /* edits: the table version copied */
	uint64_t read_base;                /* O_TRUNC streams: the branch version the writing process
					    * last read the table at (reads.c); 0: none, a plain overwrite */

	bool check_each_write;             /* schema streams: validate when the JSON completes */
	/* overwrite streams: the table as the stream began while every byte written so
	 * far equals its bytes (NULL: they differ, or there was no table) */
	struct store_table *same_as;
	uint64_t same_as_version;
	char *compare_buffer;
	uid_t uid;                         /* who opened it: the actor of its commits */

	/* scratch and staged files */
	struct scratch *scratch;
	bool staged_stream;                /* staged, appending through the writer */
	bool staged_edit;                  /* staged, edited in place: rebuild the writer */
};

/* ---- opening ------------------------------------------------------------------------- */

static void file_register(struct mountfs *mount, struct open_file *file)
{
	pthread_mutex_lock(&mount->files_lock);
	file->all_previous = NULL;
	file->all_next = mount->files;
	if (mount->files)
		mount->files->all_previous = file;
	mount->files = file;
	pthread_mutex_unlock(&mount->files_lock);
}

static void file_unregister(struct mountfs *mount, struct open_file *file)
{
	pthread_mutex_lock(&mount->files_lock);
	if (file->all_previous)
		file->all_previous->all_next = file->all_next;
	else if (mount->files == file)
		mount->files = file->all_next;
	if (file->all_next)
		file->all_next->all_previous = file->all_previous;
	file->all_previous = file->all_next = NULL;
	pthread_mutex_unlock(&mount->files_lock);
}

static struct open_file *file_new(struct mountfs *mount, struct node *node, enum file_role role)
{
	struct open_file *file = calloc(1, sizeof *file);
	if (!file)
		return NULL;
	pthread_mutex_init(&file->lock, NULL);
	atomic_init(&file->references, 1);
	file->node = node;
	inode_retain(mount, node);
	file->role = role;
	file->copy_descriptor = -1;
	file->kept_descriptor = -1;
	buf_init(&file->bytes);
	inode_path(mount, node, file->path, sizeof file->path);
	snprintf(file->branch, sizeof file->branch, "%s", node->view.branch);
	snprintf(file->table, sizeof file->table, "%s", node->table);
	return file;
}

/* Debug check of a write-state change: the transitions the comment on enum write_state allows. */
static void write_state_check(const struct open_file *file, enum write_state next)
{
	(void)file;
	(void)next;
	assert(file->write_state != WRITE_FAILED || next == WRITE_FAILED);
	assert(next != WRITE_TRUNCATED || file->write_state == WRITE_CLEAN || file->write_state == WRITE_TRUNCATED);
	assert(next != WRITE_TRUNCATED_CLOSED || file->write_state == WRITE_TRUNCATED ||
	       file->write_state == WRITE_TRUNCATED_CLOSED);
}

/* Moves file to state next, keeping the mount's count of handles in TRUNCATED_CLOSED. */
static void write_state_enter(struct mountfs *mount, struct open_file *file, enum write_state next)
{
	write_state_check(file, next);
	if (file->write_state == WRITE_TRUNCATED_CLOSED && next != WRITE_TRUNCATED_CLOSED)
		atomic_fetch_add(&mount->closed_unwritten, -1);
	else if (file->write_state != WRITE_TRUNCATED_CLOSED && next == WRITE_TRUNCATED_CLOSED)
		atomic_fetch_add(&mount->closed_unwritten, 1);
	file->write_state = next;
}

/* Fails file for good with rc (a negative errno); returns rc. */
static int write_fail(struct mountfs *mount, struct open_file *file, int rc)
{
	write_state_enter(mount, file, WRITE_FAILED);
	file->failure = rc;
	return rc;
}

/* Something was written: DIRTY, unless the handle failed (which stays). */
static void write_state_dirty(struct mountfs *mount, struct open_file *file)
{
	if (file->write_state != WRITE_FAILED)
		write_state_enter(mount, file, WRITE_DIRTY);
}

/* An overwrite waiting to be published though nothing was written to it. */
static bool truncation_waits(const struct open_file *file)
{
	return file->write_state == WRITE_TRUNCATED || file->write_state == WRITE_TRUNCATED_CLOSED;
}

/* Frees a file's resources (no publishing). */
static void file_free(struct mountfs *mount, struct open_file *file)
{
	if (file->write_state == WRITE_TRUNCATED_CLOSED)
		write_state_enter(mount, file, WRITE_CLEAN);
	if (file->same_as)
		store_table_close(file->same_as);
	free(file->compare_buffer);
	if (file->txn)
		store_txn_free(file->txn);
	if (file->reader)
		store_table_close(file->reader);
	bool history = file->snapshot && (file->node->view.version != 0 || file->node->view.tag[0]);
	store_snapshot_release(file->snapshot);
	if (history)
		view_cache_drop_history(mount);
	if (file->copy_descriptor >= 0)
		close(file->copy_descriptor);
	if (file->kept_descriptor >= 0)
		close(file->kept_descriptor);
	if (file->pending_registered)
		scratch_pending_remove(mount, file->branch,
			       file->role == FILE_SCHEMA_WRITE ? SCRATCH_SCHEMA : SCRATCH_TABLES, file->table);
	if (file->scratch) {
		scratch_unhold(file->scratch);
		scratch_release(file->scratch);
	}
	buf_free(&file->bytes);
	if (file->counted_reader)
		inode_reader_closed(mount, file->node);
	inode_release(mount, file->node);
	pthread_mutex_destroy(&file->lock);
	free(file);
}

/* Drops a reference; the last one frees the file (which is no longer registered). */
static void file_put(struct mountfs *mount, struct open_file *file)
{
	if (atomic_fetch_sub(&file->references, 1) == 1)
		file_free(mount, file);
}

void open_file_close_all(struct mountfs *mount)
{
	for (;;) {
		pthread_mutex_lock(&mount->files_lock);
		struct open_file *file = mount->files;
		pthread_mutex_unlock(&mount->files_lock);
		if (!file)
			break;
		file_unregister(mount, file);
		file_put(mount, file);
	}
}

/* Pins the live (or historical) table for reading; a missing table reads empty. */
static int pin_table(struct mountfs *mount, struct open_file *file)
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

static void same_as_forget(struct open_file *file)
{
	if (file->same_as)
		store_table_close(file->same_as);
	file->same_as = NULL;
	free(file->compare_buffer);
	file->compare_buffer = NULL;
}

/* Pins the table as it is now (if it exists) to compare an overwrite with. */
static void same_as_begin(struct mountfs *mount, struct open_file *file)
{
	struct store_snapshot *snapshot = NULL;
	if (store_snapshot_open(mount->store, file->branch, STORE_LATEST, &snapshot, NULL) < 0)
		return;
	struct head_row head;
	if (store_snapshot_head(snapshot, file->table, &head) == 0 &&
	    store_table_open(snapshot, file->table, &file->same_as) == 0)
		file->same_as_version = head.table_version;
	store_snapshot_release(snapshot);
}

/* The stream's bytes at offset: still the table's? Stops comparing at the first difference. */
static void same_as_compare(struct open_file *file, const char *bytes, size_t size, uint64_t offset)
{
	if (!file->same_as)
		return;
	if (offset + size > store_table_size(file->same_as)) {
		same_as_forget(file);
		return;
	}
	if (!file->compare_buffer && !(file->compare_buffer = malloc(COPY_CHUNK))) {
		same_as_forget(file);
		return;
	}
	for (size_t done = 0; done < size;) {
		size_t piece = size - done < COPY_CHUNK ? size - done : COPY_CHUNK;
		ssize_t got = store_table_pread(file->same_as, file->compare_buffer, piece, offset + done);
		if (got != (ssize_t)piece || memcmp(file->compare_buffer, bytes + done, piece) != 0) {
			same_as_forget(file);
			return;
		}
		done += piece;
	}
}

/* Whether a finished overwrite stream is exactly the table as it is now. */
static bool same_as_table(struct mountfs *mount, struct open_file *file)
{
	if (!file->same_as || file->stream_bytes != store_table_size(file->same_as))
		return false;
	struct store_snapshot *snapshot = NULL;
	if (store_snapshot_open(mount->store, file->branch, STORE_LATEST, &snapshot, NULL) < 0)
		return false;
	struct head_row head;
	bool same = store_snapshot_head(snapshot, file->table, &head) == 0 &&
		    head.table_version == file->same_as_version;
	store_snapshot_release(snapshot);
	return same;
}

static int begin_stream(struct mountfs *mount, struct open_file *file, enum store_write_mode mode)
{
	struct error_info error;
	error_info_clear(&error);
	int rc = 0;
	if (!file->txn) {
		rc = mount_txn_begin(mount, file->branch, file->uid, &file->txn, &error);
		if (rc < 0)
			return rc;
	}
	rc = store_txn_writer(file->txn, file->table, mode, 0, file->path, &file->writer, &error);
	if (rc < 0) {
		mount_error_record(mount, file->path, &error, rc);
		return rc;
	}
	/* An overwrite compares what it is given with what the table is, to publish
	 * nothing if they are the same bytes. */
	same_as_forget(file);
	if (mode == STORE_OVERWRITE)
		same_as_begin(mount, file);
	return 0;
}

/*
 * Publishes the deferred O_TRUNC (or creation) of every other handle of
 * branch/table that was closed without a write. Such a handle publishes at
 * its last close (RELEASE), which the kernel sends without waiting, so
 * `touch t` or `: > t` can return before it lands; a later open of the same
 * table settles it first, so that it sees the truncation (and is not undone
 * by it afterwards). A handle still being written (opened, not yet closed) is
 * left alone: a reader never makes a `cp` in progress publish an empty table.
 * Called holding no lock.
 */
static int publish(struct mountfs *mount, struct open_file *file, bool releasing);

static void settle_deferred(struct mountfs *mount, const char *branch, const char *table,
			    const struct open_file *except)
{
	struct open_file *found[16];
	size_t count = 0;
	if (atomic_load(&mount->closed_unwritten) == 0)
		return;   /* the common case: nothing waits, no list to walk */
	pthread_mutex_lock(&mount->files_lock);
	for (struct open_file *other = mount->files; other && count < 16; other = other->all_next)
		if (other != except && other->role == FILE_TABLE_WRITE && strcmp(other->table, table) == 0 &&
		    strcmp(other->branch, branch) == 0 && other->node->view.version == 0) {
			atomic_fetch_add(&other->references, 1);
			found[count++] = other;
		}
	pthread_mutex_unlock(&mount->files_lock);
	for (size_t i = 0; i < count; i++) {
		struct open_file *other = found[i];
		pthread_mutex_lock(&other->lock);
		if (other->write_kind == WRITE_OVERWRITE && other->write_state == WRITE_TRUNCATED_CLOSED) {
			int rc = publish(mount, other, true);
			if (rc < 0)
				mount_log(mount, LOG_WARNING, "%s: publishing its truncation before another open of it failed: %s",
					  other->path, strerror(-rc));
		}
		pthread_mutex_unlock(&other->lock);
		file_put(mount, other);
	}
}

static int open_table_write(struct mountfs *mount, struct open_file *file, int flags, bool created)
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
	bool exists = rc == 0 && !scratch_hidden(mount, file->branch, file->table);
	if (created || !exists) {
		scratch_hide(mount, file->branch, file->table, false);
		if (!exists) {
			scratch_pending_add(mount, file->branch, SCRATCH_TABLES, file->table);
			file->pending_registered = true;
		}
	}
	if ((flags & O_TRUNC) || created || !exists) {
		file->write_kind = WRITE_OVERWRITE;
		write_state_enter(mount, file, WRITE_TRUNCATED);
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

static int open_schema_write(struct mountfs *mount, struct open_file *file, int flags, bool created)
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
		scratch_pending_add(mount, file->branch, SCRATCH_SCHEMA, file->table);
		file->pending_registered = true;
	}
	if (flags & O_APPEND)
		file->append = true;
	/* A stream (the file starts empty) is validated by the write that completes
	 * its JSON; an edit in place only at close, its middle states being neither. */
	file->check_each_write = (flags & O_TRUNC) || created || !exists;
	/* Not dirty until written: a shell redirection closes a duplicate
	 * descriptor before the command writes, and an empty schema is no
	 * schema, so an O_TRUNC never written publishes nothing. */
	return 0;
}

static int open_scratch(struct mountfs *mount, struct open_file *file, int flags, bool created)
{
	struct scratch *scratch = scratch_find(mount, file->node->parent, file->node->name);
	if (!scratch)
		return -ENOENT;
	int held = scratch_hold(scratch);   /* while the file is open (scratch.c invariant 2) */
	if (held < 0) {
		scratch_release(scratch);
		return held;
	}
	file->scratch = scratch;
	if (flags & O_APPEND)
		file->append = true;
	if (!file->writable)
		return 0;
	if (flags & O_TRUNC)
		scratch_touch(scratch);
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
		pthread_mutex_lock(&workspace->lock);
		scratch_set_write_mode(scratch, (flags & O_APPEND) ? STORE_MERGE : STORE_OVERWRITE);
		pthread_mutex_unlock(&workspace->lock);
		rc = staging_rebuild(mount, workspace, scratch);
		file->staged_stream = true;
	} else if (flags & O_TRUNC) {
		if (ftruncate(scratch->descriptor, 0) != 0)
			rc = -errno;
		pthread_mutex_lock(&workspace->lock);
		scratch_set_write_mode(scratch, STORE_OVERWRITE);
		pthread_mutex_unlock(&workspace->lock);
		if (rc == 0)
			rc = staging_rebuild(mount, workspace, scratch);
		file->staged_stream = true;
	} else if (flags & O_APPEND) {
		if (!scratch->writer || scratch->writer_finished || scratch->writer_failed)
			rc = staging_rebuild(mount, workspace, scratch);
		file->staged_stream = true;
	} else {
		file->staged_edit = true;
	}
	pthread_mutex_unlock(&workspace->commit_lock);
	return rc;
}

int open_file_open(struct mountfs *mount, struct node *node, int flags, bool created, uid_t uid,
	      struct open_file **out)
{
	*out = NULL;
	bool writable = (flags & O_ACCMODE) != O_RDONLY;
	bool live = node->view.version == 0;
	if (writable && (!live || mount->read_only))
		return -EROFS;
	if (!live && (flags & O_TRUNC))
		return -EROFS;

	enum file_role role;
	switch (namespace_content_of(node->kind)) {
	case CONTENT_TABLE:
		role = writable ? FILE_TABLE_WRITE : FILE_TABLE_READ;
		break;
	case CONTENT_SCHEMA:
		role = writable ? FILE_SCHEMA_WRITE : FILE_RENDERED;
		break;
	case CONTENT_SCRATCH:
		role = FILE_SCRATCH;
		break;
	case CONTENT_COMMIT:
		role = FILE_COMMIT;
		break;
	case CONTENT_RENDERED:
		if (writable || (flags & O_TRUNC))
			return -EACCES;
		role = FILE_RENDERED;
		break;
	case CONTENT_FEED:
		if (writable || (flags & O_TRUNC))
			return -EACCES;
		role = FILE_FEED;
		break;
	default:
		return -EISDIR;
	}
	struct open_file *file = file_new(mount, node, role);
	if (!file)
		return -ENOMEM;
	if ((role == FILE_TABLE_WRITE || role == FILE_TABLE_READ) && live)
		settle_deferred(mount, file->branch, file->table, file);
	file->writable = writable;
	file->uid = uid;
	int rc = 0;
	switch (role) {
	case FILE_TABLE_READ:
		rc = pin_table(mount, file);
		if (rc == -ENOENT && live && scratch_pending_find(mount, file->branch, SCRATCH_TABLES, file->table, NULL))
			rc = 0;   /* being created by another handle: empty until published */
		break;
	case FILE_RENDERED:
		rc = namespace_render(mount, node, &file->bytes);
		if (rc == -ENOENT && node->kind == NODE_SCHEMA_FILE && live &&
		    scratch_pending_find(mount, file->branch, SCRATCH_SCHEMA, file->table, NULL))
			rc = 0;   /* being created by another handle: empty until published */
		break;
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
	case FILE_FEED:
		break;
	}
	if (rc < 0) {
		file_free(mount, file);
		return rc;
	}
	if (role == FILE_TABLE_READ && live && node->kind == NODE_TABLE_FILE) {
		inode_reader_opened(mount, node);
		file->counted_reader = true;
	}
	file_register(mount, file);
	*out = file;
	return 0;
}

/* ---- reading ----------------------------------------------------------------------------- */

ssize_t open_file_read(struct mountfs *mount, struct open_file *file, char *out, size_t size, off_t offset)
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
	case FILE_FEED:
		result = feed_read(mount, out, size, offset);
		break;
	}
	pthread_mutex_unlock(&file->lock);
	return result;
}

/*
 * A schema stream's bytes so far: refused if they cannot become a schema
 * (not a JSON object) or are a complete schema the table cannot take (bad,
 * or an incompatible change); 0 while incomplete. File locked.
 */
static int schema_check_written(struct mountfs *mount, struct open_file *file)
{
	const char *bytes = (const char *)file->bytes.data;
	size_t size = file->bytes.size, first = 0;
	while (first < size && strchr(" \t\r\n", bytes[first]))
		first++;
	if (first == size)
		return 0;
	struct error_info error;
	error_info_clear(&error);
	error_info_locate(&error, file->path, 1);
	if (bytes[first] != '{') {
		error_info_set(&error, -EINVAL, "a schema file is one JSON object: {\"kind\":\"node\"|\"edge\", ...}");
		mount_error_record(mount, file->path, &error, -EINVAL);
		return -EINVAL;
	}
	json_error_t parse_error;
	json_t *value = json_loadb(bytes, size, 0, &parse_error);
	if (!value)
		return 0;   /* not complete yet */
	json_decref(value);
	struct store_txn *txn = NULL;
	int rc = mount_txn_begin(mount, file->branch, file->uid, &txn, &error);
	if (rc < 0)
		return rc;
	rc = store_txn_schema(txn, file->table, bytes, size, &error);
	store_txn_free(txn);
	if (rc < 0)
		mount_error_record(mount, file->path, &error, rc);
	return rc;
}

/* ---- writing ---------------------------------------------------------------------------- */

/* Makes the private copy of an edit handle (file locked). */
static int ensure_copy(struct mountfs *mount, struct open_file *file)
{
	if (file->copy_descriptor >= 0)
		return 0;
	int descriptor = scratch_temporary_file(mount);
	if (descriptor < 0)
		return descriptor;
	int rc = file->reader ? scratch_copy_table(file->reader, descriptor) : 0;
	if (rc < 0) {
		close(descriptor);
		return rc;
	}
	file->copy_descriptor = descriptor;
	return 0;
}

/* Keeps a stream's accepted bytes until its publish (file locked). 0 or -errno. */
static int keep_written(struct mountfs *mount, struct open_file *file, const char *bytes, size_t size)
{
	if (file->kept_descriptor < 0) {
		int descriptor = scratch_temporary_file(mount);
		if (descriptor < 0)
			return descriptor;
		file->kept_descriptor = descriptor;
		file->kept_bytes = 0;
	}
	int rc = scratch_write_all(file->kept_descriptor, bytes, size, file->kept_bytes);
	if (rc == 0)
		file->kept_bytes += size;
	return rc;
}

/* Forgets the kept bytes: published, or overwritten from the start (file locked). */
static void keep_forget(struct open_file *file)
{
	if (file->kept_descriptor >= 0 && file->kept_bytes > 0 && ftruncate(file->kept_descriptor, 0) != 0) {
		close(file->kept_descriptor);
		file->kept_descriptor = -1;
	}
	file->kept_bytes = 0;
}

/*
 * A table write refused at close keeps what was written in tables/<Name>.jsonl.rej
 * (the newest refusal), named on the .graphfs/errors line: shells ignore close(2)'s
 * error, so this is how the bytes survive (docs/MOUNT.md "Refused writes"). File locked.
 */
static void keep_refused(struct mountfs *mount, struct open_file *file)
{
	int descriptor = file->write_kind == WRITE_EDIT ? file->copy_descriptor : file->kept_descriptor;
	uint64_t size = file->write_kind == WRITE_EDIT ? (descriptor >= 0 ? scratch_descriptor_size(descriptor) : 0)
						       : file->kept_bytes;
	char name[GRAPHFS_NAME_MAX + 1], path[GRAPHFS_PATH_MAX];
	snprintf(name, sizeof name, "%s.jsonl.rej", file->table);
	scratch_path(mount, file->branch, SCRATCH_TABLES, name, path, sizeof path);
	int rc = scratch_keep(mount, file->branch, name, descriptor, size);
	if (rc < 0) {
		mount_log(mount, LOG_ERR, "%s: the refused bytes could not be kept in %s: %s", file->path, path,
			  strerror(-rc));
		return;
	}
	mount_error_kept(mount, file->path, path);
	keep_forget(file);
}

static ssize_t write_stream(struct mountfs *mount, struct open_file *file, const char *bytes, size_t size,
			    off_t offset)
{
	if (file->write_state == WRITE_FAILED)
		return file->failure;
	if (file->write_kind == WRITE_OVERWRITE && (uint64_t)offset != file->stream_bytes) {
		struct error_info error;
		error_info_clear(&error);
		error_info_set(&error, -EINVAL,
			       "a table opened with O_TRUNC is written from start to end (write at offset %lld, expected %llu)",
			       (long long)offset, (unsigned long long)file->stream_bytes);
		mount_error_record(mount, file->path, &error, -EINVAL);
		return write_fail(mount, file, -EINVAL);
	}
	int rc = 0;
	if (!file->writer) {
		/* After a publish, further lines are merged into what was published. */
		rc = begin_stream(mount, file, STORE_MERGE);
		if (rc < 0)
			return write_fail(mount, file, rc);
	}
	struct error_info error;
	error_info_clear(&error);
	rc = store_writer_write(file->writer, bytes, size, &error);
	if (rc < 0) {
		mount_error_record(mount, file->path, &error, rc);
		return write_fail(mount, file, rc);
	}
	rc = keep_written(mount, file, bytes, size);
	if (rc < 0)
		return write_fail(mount, file, rc);
	same_as_compare(file, bytes, size, file->stream_bytes);
	file->stream_bytes += size;
	write_state_enter(mount, file, WRITE_DIRTY);   /* (from TRUNCATED_CLOSED: a duplicate descriptor writes after all, `cmd > t`) */
	if (file->pending_registered)
		scratch_pending_resize(mount, file->branch, SCRATCH_TABLES, file->table, file->stream_bytes);
	return (ssize_t)size;
}

static ssize_t write_staged(struct mountfs *mount, struct open_file *file, const char *bytes, size_t size,
			    off_t offset)
{
	struct scratch *scratch = file->scratch;
	struct workspace *workspace = scratch->workspace;
	if (file->write_state == WRITE_FAILED)
		return file->failure;
	pthread_mutex_lock(&workspace->commit_lock);
	ssize_t result = (ssize_t)size;
	if (!scratch->named) {
		/* Removed or committed meanwhile: the bytes stay private. */
		int rc = scratch_write_all(scratch->descriptor, bytes, size, (uint64_t)offset);
		if (rc < 0)
			result = rc;
		goto out;
	}
	if (file->staged_edit) {
		int rc = scratch_write_all(scratch->descriptor, bytes, size, (uint64_t)offset);
		if (rc < 0)
			result = rc;
		else
			scratch->writer_failed = true;   /* rebuilt at flush / commit */
		goto out;
	}
	if (!scratch->writer || scratch->writer_finished || scratch->writer_failed) {
		int rc = staging_rebuild(mount, workspace, scratch);
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
		write_fail(mount, file, rc);
		/* The staged file keeps the bytes accepted before this write. */
		scratch->writer_failed = true;
		result = rc;
		goto out;
	}
	rc = scratch_write_all(scratch->descriptor, bytes, size, scratch_descriptor_size(scratch->descriptor));
	if (rc < 0)
		result = rc;
out:
	pthread_mutex_unlock(&workspace->commit_lock);
	return result;
}

ssize_t open_file_write(struct mountfs *mount, struct open_file *file, const char *bytes, size_t size,
		   off_t offset, uid_t writer)
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
				rc = scratch_write_all(file->copy_descriptor, bytes, size, (uint64_t)offset);
			if (rc < 0)
				result = rc;
			else
				write_state_dirty(mount, file);
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
		write_state_dirty(mount, file);
		if (file->check_each_write) {
			int rc = schema_check_written(mount, file);
			if (rc < 0)
				result = write_fail(mount, file, rc);
		}
		break;
	}
	case FILE_SCRATCH:
		/* A staged file removed (or committed) while open is a plain private file now. */
		if (file->scratch->staged && file->scratch->named && (file->staged_stream || file->staged_edit)) {
			result = write_staged(mount, file, bytes, size, offset);
		} else {
			uint64_t at = file->append ? scratch_descriptor_size(file->scratch->descriptor) : (uint64_t)offset;
			int rc = scratch_write_all(file->scratch->descriptor, bytes, size, at);
			if (rc < 0)
				result = rc;
			else
				scratch_written(file->scratch, writer);
			if (rc == 0 && file->scratch->schema_staged && file->scratch->named) {
				rc = staging_schema_written(mount, file->scratch);
				if (rc < 0)
					result = rc;
			}
		}
		break;
	case FILE_COMMIT:
		result = file->node->kind == NODE_MERGE_COMMIT_FILE
				 ? mount_merge_commit(mount, file->node, file->branch, bytes, size, file->uid)
				 : staging_commit(mount, file->branch, bytes, size, file->uid);
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

static void after_publish(struct mountfs *mount, struct open_file *file)
{
	const char *names[1] = { file->table };
	if (file->pending_registered) {
		scratch_pending_remove(mount, file->branch,
			       file->role == FILE_SCHEMA_WRITE ? SCRATCH_SCHEMA : SCRATCH_TABLES, file->table);
		file->pending_registered = false;
	}
	scratch_hide(mount, file->branch, file->table, false);
	mount_invalidate_branch(mount, file->branch, names, 1, false);
}

/*
 * An O_TRUNC write-back of what the process read (file->read_base): if the table did
 * not move since, the stream itself, on the condition that it still has not; else
 * (or if it moved meanwhile) the kept bytes as a based write, merged three ways
 * (based.c). File locked; the stream's transaction is left for the caller to free.
 */
static int publish_stream_based(struct mountfs *mount, struct open_file *file)
{
	struct store_snapshot *base = NULL, *now = NULL;
	struct head_row base_head, now_head;
	bool same = store_snapshot_open(mount->store, file->branch, file->read_base, &base, NULL) == 0 &&
		    store_snapshot_head(base, file->table, &base_head) == 0 &&
		    store_snapshot_open(mount->store, file->branch, STORE_LATEST, &now, NULL) == 0 &&
		    store_snapshot_head(now, file->table, &now_head) == 0 &&
		    base_head.table_version == now_head.table_version &&
		    ulid_compare(&base_head.incarnation, &now_head.incarnation) == 0;
	store_snapshot_release(base);
	store_snapshot_release(now);
	if (same) {
		store_writer_require_version(file->writer, now_head.table_version);
		int rc = mount_commit_retryable(mount, file->txn, NULL, file->path, NULL);
		if (rc != -EAGAIN)
			return rc;
	}
	int descriptor = file->kept_descriptor;
	if (descriptor < 0 && (descriptor = scratch_temporary_file(mount)) < 0)   /* nothing was written */
		return descriptor;
	struct based_write write = { .branch = file->branch, .table = file->table, .path = file->path,
				     .descriptor = descriptor, .base_version = file->read_base, .uid = file->uid };
	bool merged;
	int rc = based_publish(mount, &write, &merged);
	if (descriptor != file->kept_descriptor)
		close(descriptor);
	return rc;
}

static int publish_stream(struct mountfs *mount, struct open_file *file)
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
	if (same_as_table(mount, file)) {
		/* The same bytes as the table now: an overwrite that changes nothing. */
		rc = -ENODATA;
	} else if (file->read_base && file->write_kind == WRITE_OVERWRITE) {
		rc = publish_stream_based(mount, file);
		if (rc < 0)
			return rc;
	} else {
		rc = mount_commit(mount, file->txn, NULL, file->path, NULL);
		if (rc < 0)
			return rc;
	}
	store_txn_free(file->txn);
	file->txn = NULL;
	file->writer = NULL;
	file->read_base = 0;   /* what it writes next is merged into what it published */
	keep_forget(file);
	write_state_enter(mount, file, WRITE_CLEAN);
	after_publish(mount, file);   /* also when nothing changed: the name is no longer pending or hidden */
	return 0;
}

static int publish_edit(struct mountfs *mount, struct open_file *file)
{
	struct error_info error;
	error_info_clear(&error);
	struct store_txn *txn = NULL;
	struct store_writer *writer = NULL;
	int rc = ensure_copy(mount, file);
	if (rc < 0)
		return rc;
	rc = mount_txn_begin(mount, file->branch, file->uid, &txn, &error);
	if (rc < 0)
		return rc;
	/* A table that moved refuses the edit whatever was written: the bytes may
	 * have been placed against the newer size (lseek SEEK_END). */
	struct head_row head;
	rc = store_snapshot_head(store_txn_snapshot(txn), file->table, &head);
	if (rc == 0 && head.table_version != file->based_on)
		rc = -EBUSY;
	if (rc == -EBUSY || rc == -ENOENT) {
		mount_error_refuse(mount, file->path, -EBUSY,
				   "the table moved since this file was opened (a commit changed or dropped it); nothing was published: open it again and redo the edit");
		store_txn_free(txn);
		return -EBUSY;
	}
	if (rc < 0) {
		store_txn_free(txn);
		return rc;
	}
	if (mount_table_is(mount, file->branch, file->table, 0, 0, file->copy_descriptor) == 1) {
		/* Saved without a change (vim :wq): nothing to publish. */
		store_txn_free(txn);
		write_state_enter(mount, file, WRITE_CLEAN);
		return 0;
	}
	rc = store_txn_writer(txn, file->table, STORE_OVERWRITE, file->based_on, file->path, &writer, &error);
	if (rc == 0)
		rc = scratch_feed(writer, file->copy_descriptor, &error);
	if (rc == 0)
		rc = store_writer_finish(writer, &error);
	if (rc < 0) {
		mount_error_record(mount, file->path, &error, rc);
		store_txn_free(txn);
		return rc;
	}
	struct store_commit_result result;
	rc = mount_commit(mount, txn, NULL, file->path, &result);
	store_txn_free(txn);
	if (rc < 0)
		return rc;
	file->based_on = result.version;
	write_state_enter(mount, file, WRITE_CLEAN);
	after_publish(mount, file);
	return 0;
}

static int publish_schema(struct mountfs *mount, struct open_file *file)
{
	struct error_info error;
	error_info_clear(&error);
	struct store_txn *txn = NULL;
	int rc = mount_txn_begin(mount, file->branch, file->uid, &txn, &error);
	if (rc < 0)
		return rc;
	rc = store_txn_schema(txn, file->table, (const char *)file->bytes.data, file->bytes.size, &error);
	if (rc < 0) {
		mount_error_record(mount, file->path, &error, rc);
		store_txn_free(txn);
		return rc;
	}
	rc = mount_commit(mount, txn, NULL, file->path, NULL);
	store_txn_free(txn);
	if (rc < 0)
		return rc;
	write_state_enter(mount, file, WRITE_CLEAN);
	after_publish(mount, file);
	return 0;
}

static int publish(struct mountfs *mount, struct open_file *file, bool releasing)
{
	if (!file->writable)
		return 0;
	int rc = 0;
	switch (file->role) {
	case FILE_TABLE_WRITE:
		if (file->write_state == WRITE_FAILED)
			return file->failure;
		if (file->write_kind == WRITE_EDIT) {
			if (file->write_state == WRITE_DIRTY)
				rc = publish_edit(mount, file);
		} else if (file->write_state == WRITE_DIRTY || (releasing && truncation_waits(file))) {
			rc = publish_stream(mount, file);
		}
		if (rc < 0) {
			write_fail(mount, file, rc);
			keep_refused(mount, file);
		}
		return rc;
	case FILE_SCHEMA_WRITE:
		if (file->write_state == WRITE_FAILED)
			return file->failure;
		if (file->write_state == WRITE_DIRTY)
			rc = publish_schema(mount, file);
		if (rc < 0)
			write_fail(mount, file, rc);
		return rc;
	case FILE_SCRATCH:
		if (file->scratch->staged && file->scratch->named && file->staged_edit) {
			struct workspace *workspace = file->scratch->workspace;
			pthread_mutex_lock(&workspace->commit_lock);
			if (file->scratch->named && file->scratch->writer_failed)
				rc = staging_rebuild(mount, workspace, file->scratch);
			pthread_mutex_unlock(&workspace->commit_lock);
		}
		return rc;
	default:
		return 0;
	}
}

int open_file_flush(struct mountfs *mount, struct open_file *file)
{
	pthread_mutex_lock(&file->lock);
	if (file->write_state == WRITE_TRUNCATED)
		write_state_enter(mount, file, WRITE_TRUNCATED_CLOSED);
	int rc = publish(mount, file, false);
	pthread_mutex_unlock(&file->lock);
	return rc;
}

int open_file_fsync(struct mountfs *mount, struct open_file *file)
{
	return open_file_flush(mount, file);
}

void open_file_release(struct mountfs *mount, struct open_file *file)
{
	pthread_mutex_lock(&file->lock);
	bool was_pending = file->pending_registered;
	/* Only an O_TRUNC never written to publishes here; its error cannot reach
	 * close(2) any more: a refusal goes to .graphfs/errors, naming the .rej file
	 * that keeps what was written (keep_refused). */
	(void)publish(mount, file, true);
	pthread_mutex_unlock(&file->lock);
	file_unregister(mount, file);
	char branch[JOURNAL_NAME_MAX + 1];
	char table[JOURNAL_NAME_MAX + 1];
	snprintf(branch, sizeof branch, "%s", file->branch);
	snprintf(table, sizeof table, "%s", file->table);
	bool still_pending = file->pending_registered;
	file_put(mount, file);
	/* A creation that never published: its name goes away again. */
	if (was_pending && still_pending) {
		const char *names[1] = { table };
		mount_invalidate_branch(mount, branch, names, 1, true);
	}
}

bool open_file_read_version(const struct open_file *file, uint64_t *version)
{
	if (file->role != FILE_TABLE_READ || file->node->view.version != 0 || file->node->view.tag[0] ||
	    file->node->kind != NODE_TABLE_FILE || !file->snapshot)
		return false;
	*version = store_snapshot_version(file->snapshot);
	return true;
}

void open_file_set_read_base(struct open_file *file, uint64_t version)
{
	pthread_mutex_lock(&file->lock);
	if (file->role == FILE_TABLE_WRITE && file->write_kind == WRITE_OVERWRITE)
		file->read_base = version;
	pthread_mutex_unlock(&file->lock);
}

struct node *open_file_node(const struct open_file *file)
{
	return file->node;
}

int open_file_attr_pinned(struct mountfs *mount, struct node *node, struct stat *st)
{
	struct open_file *reader = NULL;
	pthread_mutex_lock(&mount->files_lock);
	for (struct open_file *file = mount->files; file; file = file->all_next)
		if (file->node == node && file->counted_reader) {
			reader = file;
			atomic_fetch_add(&reader->references, 1);
			break;
		}
	pthread_mutex_unlock(&mount->files_lock);
	if (!reader)
		return 1;
	int rc = open_file_attr(mount, reader, st);
	file_put(mount, reader);
	return rc;
}

int open_file_attr(struct mountfs *mount, struct open_file *file, struct stat *st)
{
	int rc = 1;
	pthread_mutex_lock(&file->lock);
	switch (file->role) {
	case FILE_TABLE_READ:
	case FILE_TABLE_WRITE: {
		uint64_t size;
		if (file->copy_descriptor >= 0)
			size = scratch_descriptor_size(file->copy_descriptor);
		else if (file->role == FILE_TABLE_WRITE && file->write_kind == WRITE_OVERWRITE)
			size = file->stream_bytes;
		else if (file->reader)
			size = store_table_size(file->reader);
		else
			break;
		rc = namespace_attr(mount, file->node, st);
		if (rc == -ENOENT) {
			namespace_attr_base(mount, file->node, st);
			rc = 0;
		}
		st->st_size = (off_t)size;
		st->st_blocks = (st->st_size + 511) / 512;
		break;
	}
	case FILE_SCRATCH:
		namespace_attr_base(mount, file->node, st);
		scratch_attr(file->scratch, st);
		st->st_ino = file->node->st_ino;
		rc = 0;
		break;
	default:
		break;
	}
	pthread_mutex_unlock(&file->lock);
	return rc;
}

/* ---- truncate ------------------------------------------------------------------------------ */

static int truncate_open(struct mountfs *mount, struct open_file *file, uint64_t size)
{
	switch (file->role) {
	case FILE_TABLE_WRITE:
		if (file->write_state == WRITE_FAILED)
			return file->failure;
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
			keep_forget(file);
			write_state_dirty(mount, file);   /* an overwrite of nothing, published at flush */
			int rc = begin_stream(mount, file, STORE_OVERWRITE);
			if (rc < 0)
				write_fail(mount, file, rc);
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
		write_state_dirty(mount, file);
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
		write_state_dirty(mount, file);
		return 0;
	case FILE_SCRATCH: {
		struct scratch *scratch = file->scratch;
		if (ftruncate(scratch->descriptor, (off_t)size) != 0)
			return -errno;
		if (scratch->staged && scratch->named) {
			struct workspace *workspace = scratch->workspace;
			pthread_mutex_lock(&workspace->commit_lock);
			int result = staging_rebuild(mount, workspace, scratch);
			pthread_mutex_unlock(&workspace->commit_lock);
			return result;
		}
		return 0;
	}
	default:
		return -EACCES;
	}
}

int open_file_truncate(struct mountfs *mount, struct node *node, struct open_file *file, uint64_t size,
		  uid_t uid)
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
	struct open_file *own = NULL;
	int rc = open_file_open(mount, node, O_WRONLY | (size == 0 ? O_TRUNC : 0), false, uid, &own);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&own->lock);
	rc = truncate_open(mount, own, size);
	if (rc == 0)
		rc = publish(mount, own, false);
	pthread_mutex_unlock(&own->lock);
	file_unregister(mount, own);
	file_put(mount, own);
	return rc;
}

