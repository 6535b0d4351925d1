/*
 * manifest_open — creating a store's files, opening and closing a manifest
 * handle, and stamping the format version (docs/FORMAT.md §2). The top of the
 * manifest layer: an open reads the header first (the format check comes
 * before anything else, invariant 1 of manifest.h), then the pager, the lock
 * and pins files, and either refreshes (read-only) or recovers under the
 * store lock (read-write: manifest_sync.c settles, manifest_recovery.c rolls
 * dead writers' work forward or back).
 *
 * A handle moves OPENING -> RECOVERING (read-write) -> OPEN here; the states
 * and the invariants of an open handle are manifest.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "manifest_int.h"

static const uint8_t file_magic[8] = { 'G', 'R', 'A', 'P', 'H', 'F', 'S', 0 };

/* ---- the file header --------------------------------------------------------- */

static void header_build(const struct ulid *store_id, uint32_t format_version, uint8_t *out)
{
	struct file_header header = {
		.format_version = format_version,
		.kind = FILE_KIND_MANIFEST,
		.store_id = *store_id,
		.segment_id = 0,
		.created_us = manifest_now_us(),
	};
	codec_file_header_encode(&header, out);
}

/*
 * Checks the header bytes in the order the contract requires: a graphfs
 * manifest at all (-EINVAL), intact (-EIO), then the format version (-EPROTO
 * with the export/upgrade guidance). Nothing else of the store is read
 * before this passes.
 */
static int header_check(const char *path, const uint8_t *bytes, struct ulid *store_id, uint32_t *granule,
			struct error_info *error)
{
	if (memcmp(bytes, file_magic, sizeof file_magic) != 0)
		return error_info_set(error, -EINVAL, "%s is not a graphfs store (its manifest has no graphfs header)",
				      path);
	bool intact = buf_load_u64(bytes + 48) == codec_hash(bytes, 48);
	*granule = buf_load_u32(bytes + MANIFEST_GRANULE_OFFSET);   /* FORMAT.md §2 */
	intact = intact && (*granule == 0 || *granule == MANIFEST_GRANULE);
	for (size_t i = MANIFEST_GRANULE_OFFSET + 4; i < FILE_HEADER_SIZE && intact; i++)
		intact = bytes[i] == 0;
	if (!intact)
		return error_info_set(error, -EIO, "%s/manifest: the file header at offset 0 is damaged (checksum mismatch)",
				      path);
	uint32_t kind = buf_load_u32(bytes + 12);
	if (kind != FILE_KIND_MANIFEST || buf_load_u64(bytes + 32) != 0)
		return error_info_set(error, -EINVAL, "%s is not a graphfs store (its manifest header is of kind %u)",
				      path, kind);
	uint32_t format = buf_load_u32(bytes + 8);
	if (format < MANIFEST_FORMAT_OLDEST)
		return error_info_set(error, -EPROTO,
				      "store format %u is older than this graphfs (formats %d to %d): dump it with the graphfs version that wrote it, keeping every branch, tag and commit (graphfs dump STORE --all > history.ndjson; a graphfs without dump --all: graphfs dump STORE > graph.ndjson, the current state; format 1 has no dump: graphfs export each table), then graphfs init a new store and graphfs load it (or graphfs import each table)",
				      format, MANIFEST_FORMAT_OLDEST, MANIFEST_FORMAT_VERSION);
	if (format > MANIFEST_FORMAT_VERSION)
		return error_info_set(error, -EPROTO,
				      "store format %u is newer than this graphfs (formats %d to %d): upgrade graphfs",
				      format, MANIFEST_FORMAT_OLDEST, MANIFEST_FORMAT_VERSION);
	memcpy(store_id->bytes, bytes + 16, 16);
	return 0;
}

int manifest_stamp_format(const char *path, uint32_t format_version)
{
	int directory = io_directory_open(path);
	if (directory < 0)
		return directory;
	struct io_file file;
	uint8_t bytes[FILE_HEADER_SIZE];
	int rc = io_file_open(directory, "manifest", O_RDWR, IO_MANIFEST, &file);
	if (rc < 0)
		goto out;
	rc = io_pread(&file, bytes, sizeof bytes, 0);
	if (rc == 0 && memcmp(bytes, file_magic, sizeof file_magic) != 0)
		rc = -EINVAL;
	if (rc == 0) {
		buf_store_u32(bytes + 8, format_version);
		buf_store_u64(bytes + 48, codec_hash(bytes, 48));
		rc = io_pwrite(&file, bytes, sizeof bytes, 0);
	}
	if (rc == 0)
		rc = io_fsync(&file);
	io_file_close(&file);
out:
	close(directory);
	return rc;
}

/* ---- create / open / close --------------------------------------------------------------- */

static int visit_any(const char *name, void *context)
{
	(void)name;
	(void)context;
	return 1;
}

int manifest_directory_prepare(const char *path, bool *created, struct error_info *error)
{
	*created = false;
	int directory = io_directory_open(path);
	if (directory == -ENOENT) {
		char parent[PATH_MAX];
		const char *slash = strrchr(path, '/');
		const char *leaf = slash ? slash + 1 : path;
		if (!slash)
			snprintf(parent, sizeof parent, ".");
		else if (slash == path)
			snprintf(parent, sizeof parent, "/");
		else
			snprintf(parent, sizeof parent, "%.*s", (int)(slash - path), path);
		int parent_directory = io_directory_open(parent);
		if (parent_directory < 0)
			return error_info_set(error, parent_directory, "cannot open %s: %s", parent,
					      strerror(-parent_directory));
		int rc = io_directory_make(parent_directory, leaf);
		if (rc == 0)
			io_directory_sync(parent_directory);
		close(parent_directory);
		if (rc < 0)
			return error_info_set(error, rc, "cannot create %s: %s", path, io_strerror(rc));
		*created = true;
		directory = io_directory_open(path);
	}
	if (directory < 0)
		return error_info_set(error, directory, "cannot open %s: %s", path, strerror(-directory));
	if (!*created) {
		int rc = io_directory_list(directory, NULL, visit_any, NULL);
		if (rc != 0) {
			close(directory);
			if (rc > 0)
				return error_info_set(error, -EEXIST, "%s exists and is not empty", path);
			return error_info_set(error, rc, "cannot list %s: %s", path, io_strerror(rc));
		}
	}
	return directory;
}

int manifest_create(const char *path, struct error_info *error)
{
	return manifest_create_format(path, MANIFEST_FORMAT_VERSION, error);
}

int manifest_create_format(const char *path, uint32_t format_version, struct error_info *error)
{
	if (format_version < MANIFEST_FORMAT_OLDEST || format_version > MANIFEST_FORMAT_VERSION)
		return error_info_set(error, -EINVAL, "this graphfs creates stores of format %d to %d, not %u",
				      MANIFEST_FORMAT_OLDEST, MANIFEST_FORMAT_VERSION, format_version);
	bool created;
	int directory = manifest_directory_prepare(path, &created, error);
	if (directory < 0)
		return directory;
	struct io_file file = { -1, IO_MANIFEST, NULL }, lock_file = { -1, IO_MANIFEST, NULL }, pins_file = { -1, IO_MANIFEST, NULL };
	struct pager *pager = NULL;
	struct pager_append *append = NULL;
	struct btree *branches = NULL;
	struct buf bytes;
	buf_init(&bytes);
	int rc;
	if ((rc = io_directory_make(directory, "segments")) < 0 ||
	    (rc = io_directory_make(directory, "recovery")) < 0 ||
	    (rc = io_file_open(directory, "lock", O_RDWR | O_CREAT | O_EXCL, IO_MANIFEST, &lock_file)) < 0 ||
	    (rc = io_file_open(directory, "pins", O_RDWR | O_CREAT | O_EXCL, IO_MANIFEST, &pins_file)) < 0 ||
	    (rc = io_file_open(directory, "manifest", O_RDWR | O_CREAT | O_EXCL, IO_MANIFEST, &file)) < 0) {
		error_info_set(error, rc, "cannot create the files of %s: %s", path, io_strerror(rc));
		goto out;
	}
	/* header, then two empty meta slots */
	struct ulid store_id;
	ulid_new(&store_id);
	if ((rc = buf_reserve(&bytes, MANIFEST_FIRST_BLOCK)) < 0)
		goto out;
	memset(bytes.data, 0, MANIFEST_FIRST_BLOCK);
	header_build(&store_id, format_version, bytes.data);
	if ((rc = io_pwrite(&file, bytes.data, MANIFEST_FIRST_BLOCK, 0)) < 0 ||
	    (rc = pager_init(directory, &file, &pager)) < 0)
		goto failed_write;

	/* the first root: branch main with no commit and no tables; version 0 */
	uint64_t now = manifest_now_us();
	struct branch_record main_branch;
	memset(&main_branch, 0, sizeof main_branch);
	snprintf(main_branch.name, sizeof main_branch.name, "main");
	ulid_new(&main_branch.incarnation);
	main_branch.created_time_us = now;
	struct root_record root = { .sequence = 1, .version = 0, .time_us = now };
	buf_reset(&bytes);
	if ((rc = pager_append_begin(pager, MANIFEST_FIRST_BLOCK, &append)) < 0 ||
	    (rc = btree_open(pager, (struct block_address){ 0, 0 }, &branches)) < 0 ||
	    (rc = manifest_branch_encode(&main_branch, &bytes)) < 0 ||
	    (rc = btree_put(branches, "main", 4, bytes.data, bytes.size)) < 0 ||
	    (rc = btree_flush(branches, append, &root.branches)) < 0)
		goto failed_write;
	buf_reset(&bytes);
	if ((rc = manifest_root_encode(&root, &bytes)) < 0 ||
	    (rc = pager_append_block(append, BLOCK_ROOT, CODEC_NONE, bytes.data, bytes.size, &root.self)) < 0 ||
	    (rc = pager_append_write(append)) < 0)
		goto failed_write;
	if ((rc = manifest_meta_write_file(&file, &root, root.self.offset + MANIFEST_ROOT_BLOCK_SIZE)) < 0 ||
	    (rc = io_fsync(&file)) < 0 || (rc = io_directory_sync(directory)) < 0)
		goto failed_write;
	goto out;
failed_write:
	error_info_set(error, rc, "cannot write the new store %s: %s", path, io_strerror(rc));
out:
	buf_free(&bytes);
	btree_free(branches);
	pager_append_free(append);
	pager_free(pager);
	io_file_close(&file);
	io_file_close(&lock_file);
	io_file_close(&pins_file);
	close(directory);
	return rc;
}

int manifest_open(const char *path, int flags, struct manifest **out, struct error_info *error)
{
	struct manifest *manifest = calloc(1, sizeof *manifest);
	if (!manifest)
		return -ENOMEM;
	manifest->directory = -1;
	manifest->file.descriptor = -1;
	manifest->lock_file.descriptor = -1;
	manifest->pins.file.descriptor = -1;
	manifest->flags = flags;
	pthread_mutex_init(&manifest->publish_mutex, NULL);
	pthread_mutex_init(&manifest->sync_mutex, NULL);
	pthread_mutex_init(&manifest->state_mutex, NULL);
	pthread_mutex_init(&manifest->pins.mutex, NULL);
	snprintf(manifest->path, sizeof manifest->path, "%s", path);
	bool read_only = flags & MANIFEST_READ_ONLY;
	uint8_t header[FILE_HEADER_SIZE];
	int rc = io_directory_open(path);
	if (rc < 0) {
		if (rc == -ENOENT)
			error_info_set(error, rc, "no graphfs store at %s (no such directory)", path);
		else if (rc == -ENOTDIR)
			error_info_set(error, -EINVAL, "%s is not a graphfs store (not a directory)", path), rc = -EINVAL;
		else
			error_info_set(error, rc, "cannot open %s: %s", path, io_strerror(rc));
		goto failed;
	}
	manifest->directory = rc;
	rc = io_file_open(manifest->directory, "manifest", read_only ? O_RDONLY : O_RDWR, IO_MANIFEST,
			  &manifest->file);
	if (rc == 0 && io_file_is_remote(&manifest->file))
		manifest->listed_us = manifest_monotonic_us();   /* the open listed the recent pieces */
	if (rc < 0) {
		if (rc == -ENOENT)
			error_info_set(error, rc, "%s is not a graphfs store (no manifest file)", path);
		else
			error_info_set(error, rc, "cannot open %s/manifest: %s", path, io_strerror(rc));
		goto failed;
	}
	/* OPENING: the header (and so the format version) before anything else */
	ssize_t got = io_pread_some(&manifest->file, header, sizeof header, 0);
	if (got < 0) {
		rc = (int)got;
		error_info_set(error, rc, "cannot read %s/manifest: %s", path, io_strerror(rc));
		goto failed;
	}
	if ((size_t)got < sizeof header) {
		rc = error_info_set(error, -EINVAL, "%s is not a graphfs store (its manifest is too short)", path);
		goto failed;
	}
	rc = header_check(path, header, &manifest->store_id, &manifest->granule, error);
	if (rc < 0)
		goto failed;
	if (!read_only && !io_file_is_remote(&manifest->file)) {
		/* a snapshot stays as it was taken (manifest_copy.c invariant 6) */
		struct io_file marker = { -1, IO_MANIFEST, NULL };
		if (io_file_open(manifest->directory, MANIFEST_SNAPSHOT_MARKER, O_RDONLY, IO_MANIFEST, &marker) == 0) {
			io_file_close(&marker);
			rc = error_info_set(error, -EROFS, "%s is a snapshot: restore it into a store (graphfs restore STORE "
					    "%s --confirm), or mount it -o ro", path, path);
			goto failed;
		}
	}
	rc = pager_init(manifest->directory, &manifest->file, &manifest->pager);
	if (rc < 0) {
		error_info_set(error, rc, "cannot read %s/manifest: %s", path, io_strerror(rc));
		goto failed;
	}
	rc = io_file_open(manifest->directory, "lock", read_only ? O_RDONLY : O_RDWR | O_CREAT, IO_MANIFEST,
			  &manifest->lock_file);
	if (rc < 0 && !(read_only && rc == -ENOENT)) {
		error_info_set(error, rc, "cannot open %s/lock: %s", path, io_strerror(rc));
		goto failed;
	}
	/* waits for the store lock and for syncs sleep until woken (FORMAT.md §18); without
	 * the page (an object store, a read-only open) they are plain bounded sleeps */
	if (!read_only)
		(void)io_wake_page_map(&manifest->lock_file, &manifest->wake);
	if ((rc = manifest_pins_open(manifest, read_only)) < 0) {
		error_info_set(error, rc, "cannot open %s/pins: %s", path, io_strerror(rc));
		goto failed;
	}
	if (read_only) {
		pthread_mutex_lock(&manifest->state_mutex);
		rc = manifest_state_refresh(manifest, NULL);
		pthread_mutex_unlock(&manifest->state_mutex);
		if (rc < 0 && manifest->state != MANIFEST_DAMAGED) {
			error_info_set(error, rc, "cannot read %s/manifest: %s", path, io_strerror(rc));
			goto failed;
		}
		/* a damaged read-only handle opens so that verify can report; reads answer -EIO */
		rc = 0;
	} else {
		manifest_handle_enter(manifest, MANIFEST_RECOVERING);
		rc = manifest_lock(manifest, error);
		if (rc < 0)
			goto failed;
		rc = manifest_refresh_locked(manifest, error);
		if (rc == 0)
			rc = manifest_recover(manifest, error);
		manifest_unlock(manifest);
		if (rc < 0)
			goto failed;
	}
	if (manifest->state != MANIFEST_DAMAGED)
		manifest_handle_enter(manifest, MANIFEST_OPEN);
	*out = manifest;
	return 0;
failed:
	manifest_close(manifest);
	return rc;
}

void manifest_close(struct manifest *manifest)
{
	if (!manifest)
		return;
	pager_free(manifest->pager);
	manifest_pins_close(manifest);
	io_wake_page_unmap(&manifest->wake);
	io_file_close(&manifest->lock_file);
	io_file_close(&manifest->file);
	if (manifest->directory >= 0)
		close(manifest->directory);
	pthread_mutex_destroy(&manifest->publish_mutex);
	pthread_mutex_destroy(&manifest->sync_mutex);
	pthread_mutex_destroy(&manifest->state_mutex);
	free(manifest);
}
