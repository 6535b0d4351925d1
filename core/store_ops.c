/*
 * store_ops — whole operations for the CLI: import a file as one commit,
 * export a table's bytes. See store.h.
 *
 * Both stream in chunks of STORE_CHUNK bytes, so memory does not grow with
 * the file (the table stage spills to a segment past TABLE_INLINE_LIMIT).
 * The imported or exported file is the user's, not a store file, so it is
 * read and written with plain read(2)/write(2); store files are only
 * touched through the table and manifest layers (core/io.h).
 */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STORE_CHUNK (1u << 20)

static ssize_t read_retrying(int fd, void *out, size_t size)
{
	for (;;) {
		ssize_t done = read(fd, out, size);
		if (done >= 0 || errno != EINTR)
			return done < 0 ? -errno : done;
	}
}

int store_import(struct store *store, const char *branch, const char *table, const char *file,
		 enum store_write_mode mode, const char *message, const struct store_condition *condition,
		 store_progress_fn progress, void *progress_context, struct store_commit_result *result,
		 struct error_info *error)
{
	bool from_stdin = strcmp(file, "-") == 0;
	const char *path = from_stdin ? "<stdin>" : file;
	int fd = from_stdin ? STDIN_FILENO : open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int code = -errno;
		error_info_locate(error, path, 0);
		return error_info_set(error, code, "cannot open: %s", strerror(-code));
	}
	struct store_txn *txn = NULL;
	struct store_writer *writer = NULL;
	char *chunk = NULL;
	uint64_t total = 0, done = 0;
	struct stat status;
	if (fstat(fd, &status) == 0 && S_ISREG(status.st_mode))
		total = (uint64_t)status.st_size;
	int rc = store_txn_begin(store, branch, &txn, error);
	if (rc < 0)
		goto cleanup;
	store_txn_set_condition(txn, condition);
	rc = store_txn_writer(txn, table, mode, 0, path, &writer, error);
	if (rc < 0)
		goto cleanup;
	chunk = malloc(STORE_CHUNK);
	if (!chunk) {
		rc = error_info_set(error, -ENOMEM, "out of memory");
		goto cleanup;
	}
	if (progress)
		progress(0, total, progress_context);
	for (;;) {
		ssize_t got = read_retrying(fd, chunk, STORE_CHUNK);
		if (got < 0) {
			rc = (int)got;
			error_info_locate(error, path, 0);
			error_info_set(error, rc, "cannot read: %s", io_strerror(rc));
			goto cleanup;
		}
		if (got == 0)
			break;
		rc = store_writer_write(writer, chunk, (size_t)got, error);
		if (rc < 0)
			goto cleanup;
		done += (uint64_t)got;
		if (progress)
			progress(done, total > done ? total : done, progress_context);
	}
	rc = store_writer_finish(writer, error);
	if (rc < 0)
		goto cleanup;
	rc = store_txn_commit(txn, message, result, error);
cleanup:
	free(chunk);
	store_txn_free(txn);
	if (!from_stdin)
		close(fd);
	return rc;
}

static int write_all(int fd, const char *bytes, size_t size)
{
	while (size > 0) {
		ssize_t written = write(fd, bytes, size);
		if (written < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		bytes += written;
		size -= (size_t)written;
	}
	return 0;
}

int store_export(struct store *store, const char *branch, const char *table, uint64_t version,
		 int fd, store_progress_fn progress, void *progress_context, struct error_info *error)
{
	struct store_snapshot *snapshot = NULL;
	struct store_table *opened = NULL;
	char *chunk = NULL;
	int rc = store_snapshot_open(store, branch, version, &snapshot, error);
	if (rc < 0)
		return rc;
	rc = store_table_open(snapshot, table, &opened);
	if (rc < 0) {
		if (rc == -ENOENT)
			error_info_set(error, rc, "no table named %.128s", table ? table : "");
		else
			error_info_set(error, rc, "cannot open table %.128s: %s", table, io_strerror(rc));
		goto cleanup;
	}
	chunk = malloc(STORE_CHUNK);
	if (!chunk) {
		rc = error_info_set(error, -ENOMEM, "out of memory");
		goto cleanup;
	}
	uint64_t size = store_table_size(opened);
	uint64_t offset = 0;
	while (offset < size) {
		ssize_t got = store_table_pread(opened, chunk, STORE_CHUNK, offset);
		if (got < 0) {
			rc = (int)got;
			error_info_set(error, rc, "cannot read table %s: %s", table, io_strerror(rc));
			goto cleanup;
		}
		if (got == 0) {
			rc = error_info_set(error, -EIO, "table %s ended at byte %llu of %llu", table,
					    (unsigned long long)offset, (unsigned long long)size);
			goto cleanup;
		}
		rc = write_all(fd, chunk, (size_t)got);
		if (rc < 0) {
			error_info_set(error, rc, "cannot write the output: %s", io_strerror(rc));
			goto cleanup;
		}
		offset += (uint64_t)got;
		if (progress)
			progress(offset, size, progress_context);
	}
	rc = 0;
cleanup:
	free(chunk);
	store_table_close(opened);
	store_snapshot_release(snapshot);
	return rc;
}
