/*
 * manifest_recovery — recovery sidecars (the intent of a commit that writes
 * segment files outside the store lock) and recovery on open.
 *
 * States of one intent:
 *   BEGUN      a commit ULID is minted; nothing on disk
 *   ANNOUNCED  recovery/<ULID> names every segment id handed out, written
 *              as a temp file, fsynced, renamed, directory fsynced
 *              ("sidecar.before_write", "sidecar.after_write") BEFORE the id
 *              is returned, so no segment exists that no sidecar names; the
 *              writer holds flock(LOCK_EX) on the current sidecar file
 *   COMPLETED  its commit is durable: the publisher removes the sidecar
 *   ABANDONED  the writer removes the segments, then the sidecar
 *
 * Recovery (every read-write open, under the store lock, after the torn
 * tail is truncated): for each sidecar whose flock is free (its writer is
 * dead) — version read first, an unknown one refuses the open — if its
 * commit ULID names a published commit (the root of the version the id
 * carries has that commit, FORMAT.md §16.2), roll forward (remove the sidecar);
 * otherwise roll back (remove its segments, "recovery.before_segment_remove",
 * then the sidecar, "recovery.before_sidecar_remove"). Stale temp files of
 * dead writers are removed.
 *
 * In an object store no lock crosses hosts, so a writer's liveness is a
 * lease (lease.h): recovery/<ULID>.lease, stored before the sidecar and
 * renewed while the intent lives; the sidecar is stored whole under its final
 * name (a PUT is atomic: no temporary, no rename). Recovery judges a sidecar
 * whose lease is absent or expired, and removes an expired lease whose
 * sidecar is gone (FORMAT.md §17).
 *
 * Invariants kept:
 *   1. A segment file exists only if a durable sidecar names it, or a
 *      published commit references it.
 *   2. Recovery is idempotent: every step removes something that the next
 *      run would remove anyway, and removing a missing file is success.
 *   3. A live writer's sidecar is never touched: it is flock-held (in an
 *      object store: its lease has not expired), and a lock taken on a file
 *      that was meanwhile replaced by rename is ignored.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lease.h"
#include "manifest_int.h"

#define SIDECAR_FILE_HEADER 8   /* u32 magic, u32 sidecar version */

struct manifest_intent {
	struct manifest *manifest;
	struct ulid commit;             /* the intent's ULID (its commit's id is derived from it) */
	uint64_t base_version;          /* the store version when the intent began */
	char name[ULID_TEXT_SIZE];      /* the sidecar's file name under recovery/ */
	struct io_file file;            /* the current sidecar, flock-held; -1 before the first segment */
	struct lease *lease;            /* in an object store: the writer's lease, from the first segment */
	size_t segment_count;
	uint64_t *segments;
};

/* ---- encoding ---------------------------------------------------------------- */

int manifest_sidecar_encode(const struct manifest_sidecar *sidecar, struct buf *out)
{
	struct buf payload;
	buf_init(&payload);
	int rc;
	if ((rc = buf_put_u32(out, MANIFEST_SIDECAR_MAGIC)) < 0 ||
	    (rc = buf_put_u32(out, MANIFEST_SIDECAR_VERSION)) < 0 ||
	    (rc = buf_append(&payload, sidecar->commit.bytes, 16)) < 0 ||
	    (rc = buf_put_u64(&payload, sidecar->base_version)) < 0 ||
	    (rc = buf_put_u32(&payload, sidecar->writer_pid)) < 0 ||
	    (rc = buf_put_u32(&payload, sidecar->segment_count)) < 0)
		goto out;
	for (uint32_t i = 0; i < sidecar->segment_count; i++)
		if ((rc = buf_put_u64(&payload, sidecar->segments[i])) < 0)
			goto out;
	rc = codec_encode(BLOCK_SIDECAR, CODEC_NONE, payload.data, payload.size, out);
out:
	buf_free(&payload);
	return rc;
}

/* The sidecar of an intent, written by this process. */
static int sidecar_encode(const struct manifest_intent *intent, struct buf *out)
{
	const struct manifest_sidecar sidecar = {
		.version = MANIFEST_SIDECAR_VERSION,
		.commit = intent->commit,
		.base_version = intent->base_version,
		.writer_pid = (uint32_t)getpid(),
		.segment_count = (uint32_t)intent->segment_count,
		.segments = intent->segments,
	};
	return manifest_sidecar_encode(&sidecar, out);
}

int manifest_sidecar_decode(const uint8_t *bytes, size_t size, struct manifest_sidecar *out)
{
	memset(out, 0, sizeof *out);
	if (size < SIDECAR_FILE_HEADER || buf_load_u32(bytes) != MANIFEST_SIDECAR_MAGIC)
		return -EIO;
	/* the version before anything else in it */
	out->version = buf_load_u32(bytes + 4);
	if (out->version != MANIFEST_SIDECAR_VERSION)
		return -EPROTO;
	struct buf raw;
	buf_init(&raw);
	int rc = codec_decode(bytes + SIDECAR_FILE_HEADER, size - SIDECAR_FILE_HEADER, BLOCK_SIDECAR, &raw);
	if (rc < 0)
		goto out;
	struct buf_reader reader;
	buf_reader_init(&reader, raw.data, raw.size);
	buf_get_raw(&reader, out->commit.bytes, 16);
	out->base_version = buf_get_u64(&reader);
	out->writer_pid = buf_get_u32(&reader);
	out->segment_count = buf_get_u32(&reader);
	if (reader.failed || out->segment_count > MANIFEST_SIDECAR_MAX_SEGMENTS ||
	    buf_reader_remaining(&reader) != (size_t)out->segment_count * 8) {
		rc = -EIO;
		goto out;
	}
	out->segments = calloc(out->segment_count ? out->segment_count : 1, sizeof *out->segments);
	if (!out->segments) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < out->segment_count; i++)
		out->segments[i] = buf_get_u64(&reader);
	if (reader.failed)
		rc = -EIO;
out:
	buf_free(&raw);
	if (rc < 0 && rc != -EPROTO)
		manifest_sidecar_free(out);
	return rc;
}

void manifest_sidecar_free(struct manifest_sidecar *sidecar)
{
	free(sidecar->segments);
	sidecar->segments = NULL;
	sidecar->segment_count = 0;
}

/* ---- directories ---------------------------------------------------------------- */

static int subdirectory_sync(struct manifest *manifest, const char *name)
{
	int directory = io_directory_open_at(manifest->directory, name);
	if (directory < 0)
		return directory;
	int rc = io_directory_sync(directory);
	close(directory);
	return rc;
}

/* ---- intents ---------------------------------------------------------------------- */

int manifest_intent_begin(struct manifest *manifest, struct manifest_intent **out)
{
	if (manifest->flags & MANIFEST_READ_ONLY)
		return -EROFS;
	struct manifest_intent *intent = calloc(1, sizeof *intent);
	if (!intent)
		return -ENOMEM;
	intent->manifest = manifest;
	intent->file.descriptor = -1;
	struct root_record latest;
	if (manifest_latest(manifest, &latest) == 0)
		intent->base_version = latest.version;
	ulid_new(&intent->commit);
	ulid_format(&intent->commit, intent->name);
	*out = intent;
	return 0;
}

void manifest_intent_set_commit(struct manifest_intent *intent, const struct ulid *commit)
{
	intent->commit = *commit;
	ulid_format(&intent->commit, intent->name);
}

const struct ulid *manifest_intent_commit(const struct manifest_intent *intent)
{
	return &intent->commit;
}

void manifest_request_attach_intent(struct manifest_commit_request *request,
				    struct manifest_intent *intent)
{
	request->intent = intent;
}

static void lease_name(const struct manifest_intent *intent, char out[80])
{
	snprintf(out, 80, "%s.lease", intent->name);
}

/* sidecar_write in an object store: the lease first (once), then the sidecar, whole. */
static int sidecar_store_remotely(struct manifest_intent *intent)
{
	struct manifest *manifest = intent->manifest;
	char final[64], lease[80], first_line[32];
	snprintf(final, sizeof final, "recovery/%s", intent->name);
	lease_name(intent, lease);
	snprintf(first_line, sizeof first_line, "%ld", (long)getpid());
	struct buf bytes;
	buf_init(&bytes);
	struct io_file file = { -1, IO_MANIFEST, NULL };
	int rc = io_failpoint("sidecar.before_write");
	if (rc == 0 && !intent->lease)
		rc = lease_begin(manifest->path, "recovery", lease, first_line, false, &intent->lease);
	if (rc == 0 && (rc = sidecar_encode(intent, &bytes)) == 0 &&
	    (rc = io_file_open(manifest->directory, final, O_RDWR | O_CREAT | O_TRUNC, IO_MANIFEST, &file)) == 0 &&
	    (rc = io_pwrite(&file, bytes.data, bytes.size, 0)) == 0 && (rc = io_fsync(&file)) == 0) {
		io_file_close(&intent->file);
		intent->file = file;
		file = (struct io_file){ -1, IO_MANIFEST, NULL };   /* moved */
		rc = io_failpoint("sidecar.after_write");
	}
	io_file_close(&file);
	buf_free(&bytes);
	return rc;
}

/* ANNOUNCED: the sidecar naming every segment so far, durable, replaced atomically. */
static int sidecar_write(struct manifest_intent *intent)
{
	if (io_is_remote(intent->manifest->directory))
		return sidecar_store_remotely(intent);
	struct manifest *manifest = intent->manifest;
	char temporary[64], final[64];
	snprintf(temporary, sizeof temporary, "recovery/%s.tmp", intent->name);
	snprintf(final, sizeof final, "recovery/%s", intent->name);
	struct buf bytes;
	buf_init(&bytes);
	struct io_file file = { -1, IO_MANIFEST, NULL };
	int rc = io_failpoint("sidecar.before_write");
	if (rc < 0)
		goto out;
	rc = io_directory_make(manifest->directory, "recovery");
	if (rc < 0 && rc != -EEXIST)
		goto out;
	/* A stale temporary of ours (a failed earlier rewrite) goes first: the new one
	 * is created already locked, so another process's recovery never removes it
	 * as a dead writer's. */
	io_unlink(manifest->directory, temporary);
	if ((rc = sidecar_encode(intent, &bytes)) < 0 ||
	    (rc = io_file_create_locked(manifest->directory, temporary, IO_MANIFEST, &file)) < 0 ||
	    (rc = io_pwrite(&file, bytes.data, bytes.size, 0)) < 0 || (rc = io_fsync(&file)) < 0 ||
	    (rc = io_rename(manifest->directory, temporary, final)) < 0 ||
	    (rc = subdirectory_sync(manifest, "recovery")) < 0)
		goto out;
	/* the renamed file is the one we hold locked; the previous one is gone */
	io_file_close(&intent->file);
	intent->file = file;
	file.descriptor = -1;
	rc = io_failpoint("sidecar.after_write");
out:
	if (file.descriptor >= 0) {
		io_unlink(manifest->directory, temporary);
		io_file_close(&file);
	}
	buf_free(&bytes);
	return rc;
}

int manifest_intent_new_segment(void *context, uint64_t *segment_id_out)
{
	struct manifest_intent *intent = context;
	if (intent->segment_count >= MANIFEST_SIDECAR_MAX_SEGMENTS)
		return -ENOSPC;
	uint64_t id = 0;
	for (;;) {
		if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id)
			return -EIO;
		bool used = id == 0;
		for (size_t i = 0; i < intent->segment_count && !used; i++)
			used = intent->segments[i] == id;
		if (!used)
			break;
	}
	uint64_t *grown = realloc(intent->segments, (intent->segment_count + 1) * sizeof *grown);
	if (!grown)
		return -ENOMEM;
	intent->segments = grown;
	intent->segments[intent->segment_count++] = id;
	int rc = sidecar_write(intent);
	if (rc < 0) {
		intent->segment_count--;
		return rc;
	}
	*segment_id_out = id;
	return 0;
}

static void intent_free(struct manifest_intent *intent)
{
	/* the writer is done: its lease goes, so recovery may judge what is left at once */
	lease_end(intent->lease, true);
	io_file_close(&intent->file);
	free(intent->segments);
	free(intent);
}

/* Removes the sidecar file (if one was written) and syncs recovery/. */
static void sidecar_remove(struct manifest_intent *intent)
{
	if (intent->file.descriptor < 0)
		return;
	char final[64];
	snprintf(final, sizeof final, "recovery/%s", intent->name);
	io_unlink(intent->manifest->directory, final);
	subdirectory_sync(intent->manifest, "recovery");
}

int manifest_intent_complete(struct manifest_intent *intent)
{
	sidecar_remove(intent);
	intent_free(intent);
	return 0;
}

void manifest_intent_release(struct manifest_intent *intent)
{
	if (intent)
		intent_free(intent);   /* closing the sidecar drops its flock: recovery may judge it */
}

void manifest_intent_abandon(struct manifest_intent *intent)
{
	if (!intent)
		return;
	for (size_t i = 0; i < intent->segment_count; i++)
		pager_segment_remove(intent->manifest->pager, intent->segments[i]);
	if (intent->segment_count)
		subdirectory_sync(intent->manifest, "segments");
	sidecar_remove(intent);
	intent_free(intent);
}

/* ---- recovery --------------------------------------------------------------------- */

int manifest_name_list_collect(const char *name, void *context)
{
	struct manifest_name_list *list = context;
	char (*grown)[256] = realloc(list->names, (list->count + 1) * sizeof *grown);
	if (!grown)
		return -ENOMEM;
	list->names = grown;
	snprintf(list->names[list->count++], 256, "%s", name);
	return 0;
}

static bool has_suffix(const char *name, const char *suffix)
{
	size_t length = strlen(name), suffix_length = strlen(suffix);
	return length >= suffix_length && strcmp(name + length - suffix_length, suffix) == 0;
}

/*
 * Opens recovery/<name> and takes its lock without waiting. Returns 1 with
 * *file open and locked (a dead writer's file), 0 if a live writer holds it
 * or it disappeared, or -errno.
 */
static int dead_writer_file(struct manifest *manifest, const char *name, struct io_file *file)
{
	char path[300];
	snprintf(path, sizeof path, "recovery/%s", name);
	if (io_is_remote(manifest->directory)) {
		/* the writer lives while its lease does */
		char lease[320];
		snprintf(lease, sizeof lease, "%s.lease", name);
		int directory = io_directory_open_at(manifest->directory, "recovery");
		int alive = directory < 0 ? directory : lease_alive(directory, lease, NULL, 0);
		if (directory >= 0)
			close(directory);
		if (alive != 0)
			return alive < 0 ? alive : 0;
		int rc = io_file_open(manifest->directory, path, O_RDONLY, IO_MANIFEST, file);
		return rc == -ENOENT ? 0 : rc < 0 ? rc : 1;
	}
	int rc = io_file_open(manifest->directory, path, O_RDWR, IO_MANIFEST, file);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	rc = io_lock(file, true, false);
	if (rc == -EWOULDBLOCK || rc == -EAGAIN) {
		io_file_close(file);
		return 0;
	}
	if (rc < 0) {
		io_file_close(file);
		return rc;
	}
	/* invariant 3: the lock must be on the file the name still refers to */
	struct stat held, named;
	int directory = io_directory_open_at(manifest->directory, "recovery");
	bool same = directory >= 0 && fstat(file->descriptor, &held) == 0 &&
		    fstatat(directory, name, &named, AT_SYMLINK_NOFOLLOW) == 0 &&
		    held.st_dev == named.st_dev && held.st_ino == named.st_ino;
	if (directory >= 0)
		close(directory);
	if (!same) {
		io_file_close(file);
		return 0;
	}
	return 1;
}

/*
 * Whether the intent's commit was published: its id is the intent's ULID
 * with the commit's version in it, and that version is after the one the
 * intent began at, so only the versions since then are looked at.
 */
static int intent_published(struct manifest *manifest, const struct manifest_sidecar *sidecar,
			    bool *published)
{
	*published = false;
	const struct root_record *latest = &manifest->latest;
	for (uint64_t version = sidecar->base_version + 1; version <= latest->version; version++) {
		struct ulid id;
		struct block_address address;
		struct commit_record record;
		manifest_commit_id(&sidecar->commit, version, &id);
		int rc = manifest_version_commit(manifest, latest, version, &address);
		if (rc == 0)
			rc = manifest_commit_read(manifest, address, &record);
		if (rc < 0)
			return rc == -ENOENT ? 0 : rc;
		*published = ulid_compare(&record.id, &id) == 0;
		journal_commit_record_free(&record);
		if (*published)
			return 0;
	}
	return 0;
}

static int sidecar_settle(struct manifest *manifest, const char *name, struct error_info *error)
{
	struct io_file file;
	int rc = dead_writer_file(manifest, name, &file);
	if (rc <= 0)
		return rc;
	char path[300];
	snprintf(path, sizeof path, "recovery/%s", name);
	uint8_t *bytes = NULL;
	struct manifest_sidecar sidecar = { 0 };
	uint64_t size;
	if ((rc = io_size(&file, &size)) < 0)
		goto out;
	if (size > SIDECAR_FILE_HEADER + BLOCK_HEADER_SIZE + 32 + 8ull * MANIFEST_SIDECAR_MAX_SEGMENTS) {
		rc = -EIO;
	} else if (!(bytes = malloc(size ? size : 1))) {
		rc = -ENOMEM;
		goto out;
	} else {
		rc = io_pread(&file, bytes, (size_t)size, 0);
		if (rc == 0)
			rc = manifest_sidecar_decode(bytes, (size_t)size, &sidecar);
	}
	if (rc == -EPROTO) {
		error_info_set(error, -EPROTO,
			       "recovery sidecar %s/%s has sidecar version %u; this graphfs reads version %d: let the graphfs version that wrote it open the store first",
			       manifest->path, path, sidecar.version, MANIFEST_SIDECAR_VERSION);
		goto out;
	}
	if (rc == -EIO) {
		/* left in place for verify to report: its segments cannot be known */
		io_log(LOG_ERR, "%s/%s: damaged recovery sidecar left in place", manifest->path, path);
		rc = 0;
		goto out;
	}
	if (rc < 0)
		goto out;
	bool published;
	if ((rc = intent_published(manifest, &sidecar, &published)) < 0)
		goto out;
	if (!published) {
		/* roll back: the commit never became durable */
		if ((rc = io_failpoint("recovery.before_segment_remove")) < 0)
			goto out;
		for (uint32_t i = 0; i < sidecar.segment_count; i++) {
			rc = pager_segment_remove(manifest->pager, sidecar.segments[i]);
			if (rc < 0 && rc != -ENOENT)
				goto out;
		}
		if ((rc = subdirectory_sync(manifest, "segments")) < 0 && rc != -ENOENT)
			goto out;
	}
	/* roll forward (or the rollback is complete): the sidecar goes */
	if ((rc = io_failpoint("recovery.before_sidecar_remove")) < 0)
		goto out;
	rc = io_unlink(manifest->directory, path);
	if (rc == -ENOENT)
		rc = 0;
	if (rc == 0)
		rc = subdirectory_sync(manifest, "recovery");
	if (rc == 0 && io_is_remote(manifest->directory)) {
		char lease[320];
		snprintf(lease, sizeof lease, "%s.lease", path);
		io_unlink(manifest->directory, lease);   /* expired: its writer is gone */
	}
out:
	if (rc < 0 && error && !error->code)
		error_info_set(error, rc, "recovery of %s/%s failed: %s", manifest->path, path, io_strerror(rc));
	manifest_sidecar_free(&sidecar);
	free(bytes);
	io_file_close(&file);
	return rc;
}

static int temporary_settle(struct manifest *manifest, const char *name)
{
	struct io_file file;
	int rc = dead_writer_file(manifest, name, &file);
	if (rc <= 0)
		return rc;
	char path[300];
	snprintf(path, sizeof path, "recovery/%s", name);
	rc = io_unlink(manifest->directory, path);
	io_file_close(&file);
	if (rc == -ENOENT)
		rc = 0;
	if (rc == 0)
		rc = subdirectory_sync(manifest, "recovery");
	return rc;
}

/* An expired lease whose sidecar is gone (its writer died after removing it) goes. */
static int lease_settle(struct manifest *manifest, const char *name)
{
	int directory = io_directory_open_at(manifest->directory, "recovery");
	if (directory < 0)
		return directory == -ENOENT ? 0 : directory;
	char sidecar[300];
	snprintf(sidecar, sizeof sidecar, "%.*s", (int)(strlen(name) - strlen(".lease")), name);
	struct io_file file;
	int rc = io_file_open(directory, sidecar, O_RDONLY, IO_MANIFEST, &file);
	if (rc == 0) {
		io_file_close(&file);   /* the sidecar's own settling judges it */
	} else if (rc == -ENOENT && (rc = lease_alive(directory, name, NULL, 0)) == 0) {
		rc = io_unlink(directory, name);
		rc = rc == -ENOENT ? 0 : rc;
	}
	close(directory);
	return rc < 0 ? rc : 0;
}

int manifest_recover(struct manifest *manifest, struct error_info *error)
{
	struct manifest_name_list list = { 0 };
	int rc = io_directory_list(manifest->directory, "recovery", manifest_name_list_collect, &list);
	if (rc == -ENOENT) {
		rc = io_directory_make(manifest->directory, "recovery");
		if (rc == -EEXIST)
			rc = 0;
		goto out;
	}
	if (rc < 0) {
		error_info_set(error, rc, "cannot list %s/recovery: %s", manifest->path, io_strerror(rc));
		goto out;
	}
	for (size_t i = 0; i < list.count && rc == 0; i++) {
		if (has_suffix(list.names[i], ".tmp"))
			rc = temporary_settle(manifest, list.names[i]);
		else if (has_suffix(list.names[i], ".lease"))
			rc = lease_settle(manifest, list.names[i]);
		else
			rc = sidecar_settle(manifest, list.names[i], error);
	}
	if (rc < 0 && error && !error->code)
		error_info_set(error, rc, "recovery of %s failed: %s", manifest->path, io_strerror(rc));
out:
	free(list.names);
	return rc;
}
