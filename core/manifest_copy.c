/*
 * manifest_copy — `graphfs snapshot`: a self-contained copy of a whole store
 * as of one instant, taken while writers go on (layer: manifest). How a
 * snapshot is cut: docs/ARCHITECTURE.md "Snapshots".
 *
 * Invariants:
 *   1. The store lock is held only to read the latest root (a refresh): the
 *      copy is of that root and everything before it. The gc lock is held
 *      shared for the whole copy, so no gc returns space it reads.
 *   2. The manifest below the latest root's end never changes (publishes
 *      append after it; only the two meta slots are rewritten in place), so
 *      its first committed_size bytes, copied, with both meta slots rewritten
 *      to name that root alone, are the store as of that instant.
 *   3. Segment files never change once published: every segment a state
 *      that root retains reaches (gc's mark) is hard-linked (same file system) or
 *      byte-copied (elsewhere, or where links are refused). Segments of
 *      writers still in flight are not referenced, so they are not copied.
 *      The newest pack (docs/FORMAT.md §22) is immutable too and is brought
 *      the same way: the copied manifest's pages below its offset are holes,
 *      neither read nor written (in an object store the pieces there are gone).
 *   4. The destination is a store only once its manifest is complete and
 *      durable: it is written as manifest.tmp and renamed last (failpoints
 *      snapshot.after_segments, snapshot.before_rename); a crash before leaves
 *      a directory that is not a store and that a rerun refuses until it is
 *      removed.
 *   5. The copy keeps the source's addresses (a restore reads the store's own
 *      blocks at the snapshot's offsets): a store kept in an object store is
 *      copied with its granule gaps (docs/FORMAT.md §23) as holes, and its
 *      header says so. Segments and packs come through the io layer from
 *      objects the same way as from files.
 *   6. A snapshot is read-only: its `snapshot` marker, written before its
 *      manifest is renamed into place, makes every read-write open refuse it;
 *      both its meta slots name its one root, so one damaged slot leaves it
 *      readable.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "manifest_int.h"
#include "pack.h"

#define COPY_CHUNK (1u << 20)
#define COPY_PAGE 4096u

/* Whether the page at bytes (or what is left of the chunk, if less) is all zeros. */
static bool page_is_zero(const uint8_t *bytes, size_t left)
{
	size_t size = left < COPY_PAGE ? left : COPY_PAGE;
	return bytes[0] == 0 && memcmp(bytes, bytes + 1, size - 1) == 0;
}

/* Copies bytes [0, size) of from into to, except [hole_from, hole_to), which stays a
 * hole (zeros) in to and is not read. */
static int copy_bytes(struct io_file *from, struct io_file *to, uint64_t size, uint64_t hole_from,
		      uint64_t hole_to, uint64_t *done, uint64_t total, manifest_progress_fn progress, void *context)
{
	uint8_t *chunk = malloc(COPY_CHUNK);
	if (!chunk)
		return -ENOMEM;
	int rc = 0;
	for (uint64_t offset = 0; rc == 0 && offset < size;) {
		if (offset >= hole_from && offset < hole_to) {
			uint64_t end = hole_to < size ? hole_to : size;
			*done += end - offset;   /* said as copied: the copy is as far on */
			offset = end;
			continue;
		}
		uint64_t stop = offset < hole_from && hole_from < size ? hole_from : size;
		size_t length = stop - offset < COPY_CHUNK ? (size_t)(stop - offset) : COPY_CHUNK;
		if ((rc = io_pread(from, chunk, length, offset)) < 0)
			break;
		/* pages of zeros stay holes (space gc returned, preallocation): the copy is as sparse as its source */
		for (size_t page = 0; page < length && rc == 0;) {
			size_t run = page;
			while (run < length && !page_is_zero(chunk + run, length - run))
				run += COPY_PAGE;
			if (run > page)
				rc = io_pwrite(to, chunk + page, (run < length ? run : length) - page, offset + page);
			page = run + COPY_PAGE;
		}
		if (rc < 0)
			break;
		offset += length;
		*done += length;
		if (progress)
			progress(*done, total, context);
	}
	if (rc == 0)
		rc = io_truncate(to, size);
	free(chunk);
	return rc;
}

/* A copy of a manifest kept in an object store keeps its addresses, granule gaps
 * included (invariant 5): its header says so (FORMAT.md §2). 0 or -errno. */
static int granule_mark(struct io_file *source, struct io_file *copy)
{
	if (!io_file_is_remote(source))
		return 0;   /* a local source's header is copied as it is */
	uint8_t granule[4];
	buf_store_u32(granule, MANIFEST_GRANULE);
	return io_pwrite(copy, granule, sizeof granule, MANIFEST_GRANULE_OFFSET);
}

/* Links segments/<name> into destination, or copies it when links cannot cross. */
static int bring_segment(struct manifest *manifest, int destination, const char *name,
			 struct manifest_copy_result *result, uint64_t *done, uint64_t total,
			 manifest_progress_fn progress, void *context)
{
	struct io_file from = { -1, IO_DATA, NULL }, to = { -1, IO_DATA, NULL };
	uint64_t size = 0;
	int rc = io_file_open(manifest->directory, name, O_RDONLY, IO_DATA, &from);
	if (rc == 0)
		rc = io_size(&from, &size);
	if (rc < 0)
		goto out;
	rc = io_link(manifest->directory, name, destination, name);
	if (rc == 0) {
		result->segments_linked++;
		result->bytes_linked += size;
		*done += size;
		if (progress)
			progress(*done, total, context);
		goto out;
	}
	if (rc != -EXDEV && rc != -EPERM && rc != -EMLINK && rc != -EACCES)
		goto out;
	if ((rc = io_file_open(destination, name, O_RDWR | O_CREAT | O_EXCL, IO_DATA, &to)) < 0 ||
	    (rc = copy_bytes(&from, &to, size, 0, 0, done, total, progress, context)) < 0 || (rc = io_fsync(&to)) < 0)
		goto out;
	result->segments_copied++;
	result->bytes_copied += size;
out:
	io_file_close(&from);
	io_file_close(&to);
	return rc;
}

/* The `snapshot` marker (FORMAT.md §1): a read-write open refuses the copy. 0 or -errno. */
static int write_marker(int destination, const char *source_path, const struct root_record *root)
{
	struct io_file marker = { -1, IO_MANIFEST, NULL };
	char text[4096 + 128];
	int length = snprintf(text, sizeof text, "{\"snapshot_of\":\"%s\",\"version\":%llu}\n", source_path,
			      (unsigned long long)root->version);
	if (length < 0 || (size_t)length >= sizeof text || strpbrk(source_path, "\"\\\n"))
		length = snprintf(text, sizeof text, "{\"version\":%llu}\n", (unsigned long long)root->version);
	int rc = io_file_open(destination, MANIFEST_SNAPSHOT_MARKER, O_RDWR | O_CREAT | O_TRUNC, IO_MANIFEST, &marker);
	if (rc == 0)
		rc = io_pwrite(&marker, text, (size_t)length, 0);
	if (rc == 0)
		rc = io_fsync(&marker);
	io_file_close(&marker);
	return rc;
}

int manifest_snapshot_copy(struct manifest *manifest, const char *path, manifest_progress_fn progress,
			   void *context, struct manifest_copy_result *result, struct error_info *error)
{
	memset(result, 0, sizeof *result);
	uint64_t *segments = NULL;
	size_t segment_count = 0;
	struct io_file source = { -1, IO_MANIFEST, NULL }, copy = { -1, IO_MANIFEST, NULL }, lock = { -1, IO_MANIFEST, NULL },
		       pins = { -1, IO_MANIFEST, NULL };
	int destination = -1;
	/* 1. the instant: the latest root, under the lock only for the refresh (invariant 1) */
	bool read_only = manifest->flags & MANIFEST_READ_ONLY;
	/* no gc returns space while the copy reads it (a running one is waited for) */
	int rc = manifest_gc_hold(manifest);
	if (rc < 0)
		return error_info_set(error, rc, "cannot wait for gc to finish: %s", io_strerror(rc));
	rc = read_only ? manifest_refresh(manifest, NULL) : manifest_lock(manifest, error);
	if (rc < 0) {
		manifest_gc_unlock(manifest);
		return rc;
	}
	/* A read-only handle cannot take the lock (a snapshot of a snapshot, of a
	 * store on read-only media): the newest complete root it finds is the copy's. */
	if (!read_only)
		rc = manifest_refresh_locked(manifest, error);
	pthread_mutex_lock(&manifest->state_mutex);
	struct root_record root = manifest->latest;
	uint64_t committed_size = manifest->committed_size;
	pthread_mutex_unlock(&manifest->state_mutex);
	if (!read_only)
		manifest_unlock(manifest);
	if (rc < 0) {
		manifest_gc_unlock(manifest);
		return rc;
	}
	result->version = root.version;
	result->manifest_bytes = committed_size;
	/* 2. what it references */
	if ((rc = manifest_retained_segments(manifest, &root, &segments, &segment_count)) < 0) {
		error_info_set(error, rc, "cannot walk the versions to copy: %s", io_strerror(rc));
		goto out;
	}
	bool created;
	destination = manifest_directory_prepare(path, &created, error);
	if (destination < 0) {
		rc = destination;
		if (rc == -EEXIST)
			error_info_set(error, rc, "%s exists and is not empty: a snapshot goes into a new directory", path);
		goto out;
	}
	if ((rc = io_directory_make(destination, "segments")) < 0 || (rc = io_directory_make(destination, "recovery")) < 0 ||
	    (rc = io_file_open(destination, "lock", O_RDWR | O_CREAT | O_EXCL, IO_MANIFEST, &lock)) < 0 ||
	    (rc = io_file_open(destination, "pins", O_RDWR | O_CREAT | O_EXCL, IO_MANIFEST, &pins)) < 0) {
		error_info_set(error, rc, "cannot create the files of %s: %s", path, io_strerror(rc));
		goto out;
	}
	/* 3. segments (invariant 3) */
	uint64_t total = committed_size, done = 0;
	for (size_t i = 0; i < segment_count; i++) {
			char name[64];
			snprintf(name, sizeof name, "segments/%016" PRIx64, segments[i]);
			struct io_file probe = { -1, IO_DATA, NULL };
			uint64_t size = 0;
			if (io_file_open(manifest->directory, name, O_RDONLY, IO_DATA, &probe) == 0 &&
			    io_size(&probe, &size) == 0)
				total += size;
			io_file_close(&probe);
		}
	for (size_t i = 0; i < segment_count && rc == 0; i++) {
		char name[64];
		snprintf(name, sizeof name, "segments/%016" PRIx64, segments[i]);
		rc = bring_segment(manifest, destination, name, result, &done, total, progress, context);
		if (rc < 0)
			error_info_set(error, rc, "cannot copy %s/%s: %s", manifest->path, name, io_strerror(rc));
	}
	if (rc < 0)
		goto out;
	if ((rc = io_directory_open_at(destination, "segments")) >= 0) {
		io_directory_sync(rc);
		close(rc);
		rc = 0;
	}
	/* the newest pack (no gc runs meanwhile: invariant 1), which holds the blocks below its offset */
	uint64_t pack = 0;
	if ((rc = pack_newest(manifest->directory, &pack)) == 0) {
		char name[64];
		snprintf(name, sizeof name, "packs/%016" PRIx64, pack);
		if ((rc = io_directory_make(destination, "packs")) == 0)
			rc = bring_segment(manifest, destination, name, result, &done, total, progress, context);
		int packs = rc == 0 ? io_directory_open_at(destination, "packs") : rc;
		if (packs >= 0) {
			rc = io_directory_sync(packs);
			close(packs);
		} else {
			rc = packs;
		}
		if (rc < 0) {
			error_info_set(error, rc, "cannot copy %s/%s: %s", manifest->path, name, io_strerror(rc));
			goto out;
		}
	} else if (rc != -ENOENT) {
		error_info_set(error, rc, "cannot list %s/packs: %s", manifest->path, io_strerror(rc));
		goto out;
	}
	rc = 0;
	if ((rc = io_failpoint("snapshot.after_segments")) < 0) {
		error_info_set(error, rc, "the snapshot stopped after its segments: %s", io_strerror(rc));
		goto out;
	}
	/* 4. the manifest, up to the root's end, both meta slots naming that root alone, and the
	 *    marker that makes the copy read-only (invariants 2, 4, 6) */
	if ((rc = io_file_open(manifest->directory, "manifest", O_RDONLY, IO_MANIFEST, &source)) == 0 &&
	    (rc = io_file_open(destination, "manifest.tmp", O_RDWR | O_CREAT | O_EXCL, IO_MANIFEST, &copy)) == 0 &&
	    (rc = copy_bytes(&source, &copy, committed_size, MANIFEST_FIRST_BLOCK, pack, &done, total, progress,
			     context)) == 0 &&
	    (rc = granule_mark(&source, &copy)) == 0 &&
	    (rc = manifest_meta_write_both(&copy, &root, committed_size)) == 0)
		rc = io_fsync(&copy);
	if (rc == 0)
		rc = write_marker(destination, manifest->path, &root);
	if (rc == 0)
		rc = io_failpoint("snapshot.before_rename");
	if (rc == 0 && (rc = io_rename(destination, "manifest.tmp", "manifest")) == 0)
		rc = io_directory_sync(destination);
	if (rc < 0)
		error_info_set(error, rc, "cannot write the snapshot's manifest: %s", io_strerror(rc));
out:
	io_file_close(&source);
	io_file_close(&copy);
	io_file_close(&lock);
	io_file_close(&pins);
	if (destination >= 0)
		close(destination);
	free(segments);
	manifest_gc_unlock(manifest);
	return rc;
}

int manifest_root_is_ours(struct manifest *manifest, const struct ulid *store_id, const struct root_record *root)
{
	if (ulid_compare(store_id, &manifest->store_id) != 0)
		return -ENOENT;
	struct root_record ours;
	int rc = manifest_root_read(manifest->pager, root->self, &ours);
	if (rc == -EIO || rc == -ENOENT || rc == -EINVAL)
		return -ENOENT;
	if (rc < 0)
		return rc;
	if (!(ours.sequence == root->sequence && ours.version == root->version && ours.time_us == root->time_us &&
	      ours.branches.offset == root->branches.offset && ours.previous.offset == root->previous.offset))
		return -ENOENT;
	/* a gc since may have returned blocks the snapshot's states share with this store */
	struct root_record latest;
	if ((rc = manifest_latest(manifest, &latest)) < 0)
		return rc;
	return latest.swept_below > root->self.offset ? -ESTALE : 0;
}

const struct ulid *manifest_store_id(const struct manifest *manifest)
{
	return &manifest->store_id;
}
