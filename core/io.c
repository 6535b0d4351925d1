/*
 * io — the one choke point for every store file access (see io.h): the
 * facade over two backends behind one method table (struct io_methods,
 * io_int.h, as SQLite's VFS), io_local.c for a directory on a local file
 * system and io_remote.c for a store in an object store. The facade checks
 * arguments, picks the backend of a directory or file, and counts.
 *
 * Invariants:
 *   1. A directory is remote exactly when its number is at or above
 *      IO_REMOTE_BASE, a file exactly when its remote field is set: every call
 *      goes to that backend and no other.
 *   2. Names given to the directory calls are one component ("", ".", ".."
 *      and names with "/" are refused) before any backend sees them.
 *   3. Every call that reads, writes or syncs counts it once (io_diag.c
 *      invariant 1): one read per io_pread/io_pread_some call that returned
 *      data, one write per io_pwrite call, one fsync per io_fsync/io_datasync.
 */
#include "io.h"
#include "io_int.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const struct io_methods *of_directory(int directory)
{
	return io_remote_directory(directory) ? &io_remote_methods : &io_local_methods;
}

static const struct io_methods *of_file(const struct io_file *file)
{
	return file->remote ? &io_remote_methods : &io_local_methods;
}

static bool one_component(const char *name)
{
	return name && !strchr(name, '/') && io_component_is_valid(name, strlen(name));
}

bool io_is_remote(int directory)
{
	return io_remote_directory(directory);
}

bool io_file_is_remote(const struct io_file *file)
{
	return file->remote != NULL;
}

void io_threads_pause(void)
{
	io_remote_methods.threads_pause();
}

void io_threads_resume(void)
{
	io_remote_methods.threads_resume();
}

/* ---- names and directories --------------------------------------------- */

int io_directory_open(const char *path)
{
	const struct io_methods *methods = strncmp(path, "s3://", 5) == 0 ? &io_remote_methods : &io_local_methods;
	return methods->directory_open(path);
}

int io_directory_open_at(int directory, const char *name)
{
	if (!one_component(name))
		return -EINVAL;
	return of_directory(directory)->directory_open_at(directory, name);
}

int io_directory_make(int directory, const char *name)
{
	if (!one_component(name))
		return -EINVAL;
	return of_directory(directory)->directory_make(directory, name);
}

int io_directory_sync(int directory)
{
	return of_directory(directory)->directory_sync(directory);
}

int io_unlink(int directory, const char *name)
{
	return of_directory(directory)->unlink(directory, name);
}

int io_rename(int directory, const char *from, const char *to)
{
	return of_directory(directory)->rename(directory, from, to);
}

int io_link(int from_directory, const char *from, int to_directory, const char *to)
{
	if (io_remote_directory(from_directory) != io_remote_directory(to_directory))
		return -EXDEV;   /* the caller copies */
	return of_directory(from_directory)->link(from_directory, from, to_directory, to);
}

int io_directory_list(int directory, const char *subdirectory,
		      int (*visit)(const char *name, void *context), void *context)
{
	return of_directory(directory)->list(directory, subdirectory, visit, context);
}

/* ---- files ------------------------------------------------------------- */

int io_file_open(int directory, const char *name, int flags, enum io_class class, struct io_file *out)
{
	*out = (struct io_file){ .descriptor = -1, .class = class, .remote = NULL };
	return of_directory(directory)->file_open(directory, name, flags, class, out);
}

int io_file_create_locked(int directory, const char *name, enum io_class class, struct io_file *out)
{
	*out = (struct io_file){ .descriptor = -1, .class = class, .remote = NULL };
	return of_directory(directory)->file_create_locked(directory, name, class, out);
}

int io_scratch_open(int directory, const char *subdirectory, enum io_class class, struct io_file *out)
{
	*out = (struct io_file){ .descriptor = -1, .class = class, .remote = NULL };
	int rc = of_directory(directory)->scratch_open(directory, subdirectory, class, out);
	if (rc != -EOPNOTSUPP && rc != -EISDIR && rc != -EINVAL)
		return rc;
	/* no unnamed files there (an object store, or a file system without O_TMPFILE): memory */
	int descriptor = memfd_create("graphfs-scratch", MFD_CLOEXEC);
	if (descriptor < 0)
		return -errno;
	*out = (struct io_file){ .descriptor = descriptor, .class = class, .remote = NULL };
	return 0;
}

void io_file_close(struct io_file *file)
{
	if (file->remote || file->descriptor >= 0)
		of_file(file)->file_close(file);
	file->descriptor = -1;
}

ssize_t io_pread_some(struct io_file *file, void *out, size_t size, uint64_t offset)
{
	if (offset > (uint64_t)INT64_MAX)
		return -EINVAL;
	ssize_t got = of_file(file)->pread(file, out, size, offset);
	if (got > 0)
		io_count_read(file->class);
	return got;
}

int io_pread(struct io_file *file, void *out, size_t size, uint64_t offset)
{
	if (offset > (uint64_t)INT64_MAX || size > (uint64_t)INT64_MAX - offset)
		return -EINVAL;
	const struct io_methods *methods = of_file(file);
	size_t done = 0;
	int rc = 0;
	while (done < size) {
		ssize_t got = methods->pread(file, (uint8_t *)out + done, size - done, offset + done);
		if (got < 0) {
			rc = (int)got;
			break;
		}
		if (got == 0) {
			rc = -EIO; /* end of file before size bytes */
			break;
		}
		done += (size_t)got;
	}
	if (done > 0)
		io_count_read(file->class);
	return rc;
}

int io_pwrite(struct io_file *file, const void *bytes, size_t size, uint64_t offset)
{
	if (offset > (uint64_t)INT64_MAX || size > (uint64_t)INT64_MAX - offset)
		return -EINVAL;
	size_t done = 0;
	int rc = of_file(file)->pwrite(file, bytes, size, offset, &done);
	io_count_write(file->class, done);
	return rc;
}

int io_fsync(struct io_file *file)
{
	int rc = of_file(file)->fsync(file);
	io_count_fsync(file->class);
	return rc;
}

int io_datasync(struct io_file *file)
{
	int rc = of_file(file)->datasync(file);
	io_count_fsync(file->class);
	return rc;
}

int io_truncate(struct io_file *file, uint64_t size)
{
	if (size > (uint64_t)INT64_MAX)
		return -EINVAL;
	return of_file(file)->truncate(file, size);
}

int io_size(struct io_file *file, uint64_t *size_out)
{
	return of_file(file)->size(file, size_out);
}

void io_prefetch(struct io_file *file, const uint64_t *offsets, size_t count)
{
	const struct io_methods *methods = of_file(file);
	if (methods->prefetch && count > 0)
		methods->prefetch(file, offsets, count);
}

uint64_t io_last_append_start(struct io_file *file)
{
	return of_file(file)->last_append_start(file);
}

void io_note_state_start(struct io_file *file, uint64_t offset)
{
	of_file(file)->note_state_start(file, offset);
}

uint64_t io_append_offset(const struct io_file *file, uint64_t end)
{
	return of_file(file)->append_offset(file, end);
}

int io_size_known(struct io_file *file, uint64_t *size_out)
{
	return of_file(file)->size_known(file, size_out);
}

int io_lock(struct io_file *file, bool exclusive, bool wait)
{
	return of_file(file)->lock(file, exclusive, wait);
}

int io_unlock(struct io_file *file)
{
	return of_file(file)->unlock(file);
}

/* ---- byte-range locks, holes -------------------------------------------- */

int io_range_lock(struct io_file *file, uint64_t start, uint64_t length, bool exclusive)
{
	return of_file(file)->range_lock(file, F_OFD_SETLK, exclusive ? F_WRLCK : F_RDLCK, start, length, NULL);
}

int io_range_lock_shared_wait(struct io_file *file, uint64_t start, uint64_t length)
{
	return of_file(file)->range_lock(file, F_OFD_SETLKW, F_RDLCK, start, length, NULL);
}

int io_range_lock_exclusive_wait(struct io_file *file, uint64_t start, uint64_t length)
{
	return of_file(file)->range_lock(file, F_OFD_SETLKW, F_WRLCK, start, length, NULL);
}

int io_range_unlock(struct io_file *file, uint64_t start, uint64_t length)
{
	return of_file(file)->range_lock(file, F_OFD_SETLK, F_UNLCK, start, length, NULL);
}

int io_range_test(struct io_file *file, uint64_t start, uint64_t length, uint64_t *found_start,
		  uint64_t *found_length)
{
	struct flock lock;
	int rc = of_file(file)->range_lock(file, F_OFD_GETLK, F_WRLCK, start, length, &lock);
	if (rc < 0)
		return rc;
	if (lock.l_type == F_UNLCK)
		return -ENOENT;
	*found_start = (uint64_t)lock.l_start;
	*found_length = (uint64_t)lock.l_len;
	return 0;
}

int io_punch_hole(struct io_file *file, uint64_t start, uint64_t end)
{
	if (end <= start)
		return 0;
	return of_file(file)->punch(file, start, end);
}

int io_data_bytes(struct io_file *file, uint64_t start, uint64_t end, uint64_t *bytes_out)
{
	return of_file(file)->data_bytes(file, start, end, bytes_out);
}

int io_allocated_bytes(struct io_file *file, uint64_t *bytes_out)
{
	return of_file(file)->allocated_bytes(file, bytes_out);
}
