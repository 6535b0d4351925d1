/*
 * manifest_config — the store's settings file `config` (docs/FORMAT.md §1):
 * one JSON object, replaced whole (written as config.tmp, made durable, then
 * renamed over config), read whole. What the settings mean is the store
 * layer's (core/store_config.c); here they are bytes.
 *
 * Invariants:
 *   1. `config` is always a complete file: a reader sees the old object or
 *      the new one, never a mix (rename is the commit point; in an object
 *      store the PUT of the whole object is).
 *   2. Only writers that hold the store lock replace it, so two `graphfs
 *      config` changes never interleave their read-modify-write.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>

#include "manifest_int.h"

#define CONFIG_NAME "config"
#define CONFIG_TEMPORARY "config.tmp"
#define CONFIG_MAX (64 * 1024)

int manifest_config_read(struct manifest *manifest, struct buf *out)
{
	struct io_file file = { -1, IO_MANIFEST, NULL };
	int rc = io_file_open(manifest->directory, CONFIG_NAME, O_RDONLY, IO_MANIFEST, &file);
	if (rc == -ENOENT)
		return 0;   /* never set: no settings */
	if (rc < 0)
		return rc;
	uint64_t size;
	if ((rc = io_size(&file, &size)) == 0 && size > CONFIG_MAX)
		rc = -EIO;
	if (rc == 0 && (rc = buf_reserve(out, (size_t)size)) == 0 && size > 0) {
		ssize_t got = io_pread_some(&file, out->data + out->size, (size_t)size, 0);
		if (got < 0)
			rc = (int)got;
		else
			out->size += (size_t)got;
	}
	io_file_close(&file);
	return rc;
}

int manifest_config_write(struct manifest *manifest, const void *bytes, size_t size, struct error_info *error)
{
	if (size > CONFIG_MAX)
		return error_info_set(error, -EFBIG, "the settings are larger than %d bytes", CONFIG_MAX);
	int rc = manifest_lock(manifest, error);
	if (rc < 0)
		return rc;
	struct io_file file = { -1, IO_MANIFEST, NULL };
	if ((rc = io_file_open(manifest->directory, CONFIG_TEMPORARY, O_RDWR | O_CREAT | O_TRUNC, IO_MANIFEST, &file)) == 0 &&
	    (rc = io_pwrite(&file, bytes, size, 0)) == 0 && (rc = io_fsync(&file)) == 0) {
		io_file_close(&file);
		if ((rc = io_rename(manifest->directory, CONFIG_TEMPORARY, CONFIG_NAME)) == 0)
			rc = io_directory_sync(manifest->directory);
	}
	io_file_close(&file);
	manifest_unlock(manifest);
	if (rc < 0)
		error_info_set(error, rc, "cannot write %s/%s: %s", manifest->path, CONFIG_NAME, io_strerror(rc));
	return rc;
}
