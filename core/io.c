/*
 * io — the one choke point for every store file access. See io.h.
 *
 * Invariants:
 *   1. Every file and directory is opened relative to a directory descriptor
 *      with O_NOFOLLOW|O_CLOEXEC; a name may have one "dir/" level, and that
 *      directory is itself opened with O_NOFOLLOW|O_DIRECTORY, so no symlink
 *      is ever followed. Names with "", ".", ".." components are refused.
 *   2. Files are created 0600, directories 0700.
 *   3. Every call that reads, writes or syncs counts it once (io_diag.c
 *      invariant 1): one read per io_pread/io_pread_some call that returned
 *      data, one write per io_pwrite call, one fsync per io_fsync call.
 */
#include "io.h"
#include "io_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- names and directories --------------------------------------------- */

static bool component_is_valid(const char *component, size_t length)
{
	if (length == 0 || length > 255)
		return false;
	if (component[0] == '.' && (length == 1 || (length == 2 && component[1] == '.')))
		return false;
	return true;
}

/*
 * Resolves name ("leaf" or "dir/leaf") under directory: *parent_out is the
 * descriptor to use with *leaf_out, and *opened_out is that descriptor if it
 * was opened here (the caller closes it), else -1. Returns 0 or -errno.
 */
static int resolve_name(int directory, const char *name, int *parent_out, const char **leaf_out,
			int *opened_out)
{
	*opened_out = -1;
	if (!name)
		return -EINVAL;
	const char *slash = strchr(name, '/');
	if (!slash) {
		if (!component_is_valid(name, strlen(name)))
			return -EINVAL;
		*parent_out = directory;
		*leaf_out = name;
		return 0;
	}
	const char *leaf = slash + 1;
	size_t directory_length = (size_t)(slash - name);
	if (strchr(leaf, '/') || !component_is_valid(name, directory_length) ||
	    !component_is_valid(leaf, strlen(leaf)))
		return -EINVAL;
	char subdirectory[256];
	memcpy(subdirectory, name, directory_length);
	subdirectory[directory_length] = 0;
	int descriptor;
	do
		descriptor = openat(directory, subdirectory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	while (descriptor < 0 && errno == EINTR);
	if (descriptor < 0)
		return -errno;
	*parent_out = descriptor;
	*leaf_out = leaf;
	*opened_out = descriptor;
	return 0;
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
	io_remote_readahead_pause();
}

void io_threads_resume(void)
{
	io_remote_readahead_resume();
}

int io_directory_open(const char *path)
{
	if (strncmp(path, "s3://", 5) == 0)
		return io_remote_open_root(path);
	int descriptor;
	do
		descriptor = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	while (descriptor < 0 && errno == EINTR);
	return descriptor < 0 ? -errno : descriptor;
}

int io_directory_open_at(int directory, const char *name)
{
	if (!name || !component_is_valid(name, strlen(name)) || strchr(name, '/'))
		return -EINVAL;
	if (io_remote_directory(directory))
		return io_remote_open_at(directory, name);
	int descriptor;
	do
		descriptor = openat(directory, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	while (descriptor < 0 && errno == EINTR);
	return descriptor < 0 ? -errno : descriptor;
}

int io_directory_make(int directory, const char *name)
{
	if (!name || !component_is_valid(name, strlen(name)) || strchr(name, '/'))
		return -EINVAL;
	if (io_remote_directory(directory))
		return 0;   /* an object store has no directories: a prefix needs no making */
	return mkdirat(directory, name, 0700) < 0 ? -errno : 0;
}

int io_directory_sync(int directory)
{
	if (io_remote_directory(directory))
		return 0;   /* a PUT is durable, names included */
	int rc;
	do
		rc = fsync(directory);
	while (rc < 0 && errno == EINTR);
	return rc < 0 ? -errno : 0;
}

int io_unlink(int directory, const char *name)
{
	if (io_remote_directory(directory))
		return io_remote_unlink(directory, name);
	int parent, opened;
	const char *leaf;
	int rc = resolve_name(directory, name, &parent, &leaf, &opened);
	if (rc < 0)
		return rc;
	rc = unlinkat(parent, leaf, 0) < 0 ? -errno : 0;
	if (opened >= 0)
		close(opened);
	return rc;
}

int io_rename(int directory, const char *from, const char *to)
{
	if (io_remote_directory(directory))
		return io_remote_rename(directory, from, to);
	int from_parent, from_opened, to_parent, to_opened = -1;
	const char *from_leaf, *to_leaf;
	int rc = resolve_name(directory, from, &from_parent, &from_leaf, &from_opened);
	if (rc < 0)
		return rc;
	rc = resolve_name(directory, to, &to_parent, &to_leaf, &to_opened);
	if (rc < 0)
		goto cleanup;
	rc = renameat(from_parent, from_leaf, to_parent, to_leaf) < 0 ? -errno : 0;
cleanup:
	if (from_opened >= 0)
		close(from_opened);
	if (to_opened >= 0)
		close(to_opened);
	return rc;
}

int io_link(int from_directory, const char *from, int to_directory, const char *to)
{
	if (io_remote_directory(from_directory) || io_remote_directory(to_directory))
		return -EXDEV;   /* the caller copies */
	int from_parent, from_opened, to_parent, to_opened = -1;
	const char *from_leaf, *to_leaf;
	int rc = resolve_name(from_directory, from, &from_parent, &from_leaf, &from_opened);
	if (rc < 0)
		return rc;
	rc = resolve_name(to_directory, to, &to_parent, &to_leaf, &to_opened);
	if (rc < 0)
		goto cleanup;
	/* no AT_SYMLINK_FOLLOW: a symbolic link is linked as itself, never followed */
	rc = linkat(from_parent, from_leaf, to_parent, to_leaf, 0) < 0 ? -errno : 0;
cleanup:
	if (from_opened >= 0)
		close(from_opened);
	if (to_opened >= 0)
		close(to_opened);
	return rc;
}

int io_directory_list(int directory, const char *subdirectory,
		      int (*visit)(const char *name, void *context), void *context)
{
	if (io_remote_directory(directory))
		return io_remote_list(directory, subdirectory, visit, context);
	const char *target = subdirectory && *subdirectory ? subdirectory : ".";
	if (strchr(target, '/') || (strcmp(target, ".") != 0 && !component_is_valid(target, strlen(target))))
		return -EINVAL;
	int descriptor;
	do
		descriptor = openat(directory, target, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	while (descriptor < 0 && errno == EINTR);
	if (descriptor < 0)
		return -errno;
	DIR *listing = fdopendir(descriptor);
	if (!listing) {
		int rc = -errno;
		close(descriptor);
		return rc;
	}
	int rc = 0;
	for (;;) {
		errno = 0;
		struct dirent *entry = readdir(listing);
		if (!entry) {
			rc = errno ? -errno : 0;
			break;
		}
		if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
			continue;
		rc = visit(entry->d_name, context);
		if (rc != 0)
			break;
	}
	closedir(listing);
	return rc;
}

/* ---- files ------------------------------------------------------------- */

int io_file_open(int directory, const char *name, int flags, enum io_class class, struct io_file *out)
{
	out->descriptor = -1;
	out->class = class;
	out->remote = NULL;
	if (io_remote_directory(directory))
		return io_remote_file_open(directory, name, flags, class, out);
	int parent, opened;
	const char *leaf;
	int rc = resolve_name(directory, name, &parent, &leaf, &opened);
	if (rc < 0)
		return rc;
	/* The store's reads are its own business: they need not update access times (a check
	 * on every read). O_NOATIME is refused (EPERM) to a process that does not own the
	 * file: then it opens without. */
	int descriptor, extra = O_NOATIME;
	for (;;) {
		descriptor = openat(parent, leaf, flags | extra | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (descriptor >= 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno == EPERM && extra) {
			extra = 0;
			continue;
		}
		break;
	}
	rc = descriptor < 0 ? -errno : 0;
	if (opened >= 0)
		close(opened);
	if (rc == 0)
		out->descriptor = descriptor;
	return rc;
}

int io_file_create_locked(int directory, const char *name, enum io_class class, struct io_file *out)
{
	out->descriptor = -1;
	out->class = class;
	out->remote = NULL;
	if (io_remote_directory(directory))   /* locks are process-local no-ops there (io_remote.c) */
		return io_remote_file_open(directory, name, O_RDWR | O_CREAT | O_EXCL, class, out);
	int parent, opened;
	const char *leaf;
	int rc = resolve_name(directory, name, &parent, &leaf, &opened);
	if (rc < 0)
		return rc;
	/* unnamed, locked, then given its name: nobody ever sees it unlocked */
	int descriptor;
	do
		descriptor = openat(parent, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	while (descriptor < 0 && errno == EINTR);
	if (descriptor >= 0) {
		char proc_path[64];
		snprintf(proc_path, sizeof proc_path, "/proc/self/fd/%d", descriptor);
		if (flock(descriptor, LOCK_EX | LOCK_NB) < 0) {
			rc = -errno;
		} else if (linkat(AT_FDCWD, proc_path, parent, leaf, AT_SYMLINK_FOLLOW) < 0) {
			rc = -errno;
			if (rc == -ENOENT && faccessat(parent, leaf, F_OK, AT_SYMLINK_NOFOLLOW) != 0)
				rc = 1;   /* no /proc to link through: fall back */
		}
		if (rc != 0)
			close(descriptor);
		else
			out->descriptor = descriptor;
	} else if (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL) {
		rc = 1;   /* no O_TMPFILE on this file system */
	} else {
		rc = -errno;
	}
	if (rc == 1) {
		/* the narrow window between create and lock remains here */
		do
			descriptor = openat(parent, leaf, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		while (descriptor < 0 && errno == EINTR);
		rc = descriptor < 0 ? -errno : 0;
		if (rc == 0 && flock(descriptor, LOCK_EX | LOCK_NB) < 0) {
			rc = -errno;
			unlinkat(parent, leaf, 0);
			close(descriptor);
		} else if (rc == 0) {
			out->descriptor = descriptor;
		}
	}
	if (opened >= 0)
		close(opened);
	return rc;
}

int io_scratch_open(int directory, const char *subdirectory, enum io_class class, struct io_file *out)
{
	out->remote = NULL;
	/* scratch stays local (a memory file) for a store in an object store */
	int rc = io_remote_directory(directory) ? -EOPNOTSUPP
						: io_file_open(directory, subdirectory, O_TMPFILE | O_RDWR, class, out);
	if (rc != -EOPNOTSUPP && rc != -EISDIR && rc != -EINVAL)
		return rc;
	int descriptor = memfd_create("graphfs-scratch", MFD_CLOEXEC);
	if (descriptor < 0)
		return -errno;
	out->descriptor = descriptor;
	out->class = class;
	return 0;
}

void io_file_close(struct io_file *file)
{
	if (file->remote)
		io_remote_file_close(file);
	else if (file->descriptor >= 0)
		close(file->descriptor);
	file->descriptor = -1;
}

ssize_t io_pread_some(struct io_file *file, void *out, size_t size, uint64_t offset)
{
	if (offset > (uint64_t)INT64_MAX)
		return -EINVAL;
	ssize_t got;
	if (file->remote) {
		got = io_remote_pread(file, out, size, offset);
		if (got < 0)
			return got;
	} else {
		do
			got = pread(file->descriptor, out, size, (off_t)offset);
		while (got < 0 && errno == EINTR);
		if (got < 0)
			return -errno;
	}
	if (got > 0)
		io_count_read(file->class);
	return got;
}

int io_pread(struct io_file *file, void *out, size_t size, uint64_t offset)
{
	if (offset > (uint64_t)INT64_MAX || size > (uint64_t)INT64_MAX - offset)
		return -EINVAL;
	size_t done = 0;
	int rc = 0;
	while (done < size) {
		ssize_t got = file->remote ? io_remote_pread(file, (uint8_t *)out + done, size - done, offset + done)
					   : pread(file->descriptor, (uint8_t *)out + done, size - done,
						   (off_t)(offset + done));
		if (got < 0 && file->remote) {
			rc = (int)got;
			break;
		}
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			rc = -errno;
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
	int rc = 0;
	if (file->remote) {
		rc = io_remote_pwrite(file, bytes, size, offset);
		done = rc == 0 ? size : 0;
	}
	while (!file->remote && done < size) {
		ssize_t wrote = pwrite(file->descriptor, (const uint8_t *)bytes + done, size - done,
				       (off_t)(offset + done));
		if (wrote < 0 && errno == EINTR)
			continue;
		if (wrote < 0) {
			rc = -errno;
			break;
		}
		if (wrote == 0) {
			rc = -EIO;
			break;
		}
		done += (size_t)wrote;
	}
	io_count_write(file->class, done);
	return rc;
}

int io_fsync(struct io_file *file)
{
	if (file->remote) {
		io_count_fsync(file->class);
		return io_remote_sync(file);
	}
	int rc;
	do
		rc = fsync(file->descriptor);
	while (rc < 0 && errno == EINTR);
	io_count_fsync(file->class);
	return rc < 0 ? -errno : 0;
}

int io_datasync(struct io_file *file)
{
	if (file->remote) {
		io_count_fsync(file->class);
		return io_remote_sync(file);
	}
	int rc;
	do
		rc = fdatasync(file->descriptor);
	while (rc < 0 && errno == EINTR);
	io_count_fsync(file->class);
	return rc < 0 ? -errno : 0;
}

int io_truncate(struct io_file *file, uint64_t size)
{
	if (size > (uint64_t)INT64_MAX)
		return -EINVAL;
	if (file->remote)
		return io_remote_truncate(file, size);
	int rc;
	do
		rc = ftruncate(file->descriptor, (off_t)size);
	while (rc < 0 && errno == EINTR);
	return rc < 0 ? -errno : 0;
}

int io_size(struct io_file *file, uint64_t *size_out)
{
	/*
	 * lseek rather than fstat: a stat marks the file's timestamps as seen,
	 * after which the kernel gives the next write a fine-grained mtime, and
	 * every fsync then writes the inode too — one more synchronous write per
	 * commit. All I/O here is pread/pwrite, so the file offset is unused.
	 */
	if (file->remote)
		return io_remote_size(file, size_out);
	off_t end = lseek(file->descriptor, 0, SEEK_END);
	if (end < 0)
		return -errno;
	*size_out = (uint64_t)end;
	return 0;
}

uint64_t io_last_append_start(struct io_file *file)
{
	return file->remote ? io_remote_last_append_start(file) : 0;
}

void io_note_state_start(struct io_file *file, uint64_t offset)
{
	if (file->remote)
		io_remote_note_state_start(file, offset);
}

uint64_t io_append_offset(const struct io_file *file, uint64_t end)
{
	return file->remote ? io_remote_append_offset(file, end) : end;
}

int io_size_known(struct io_file *file, uint64_t *size_out)
{
	return file->remote ? io_remote_size_known(file, size_out) : io_size(file, size_out);
}

int io_lock(struct io_file *file, bool exclusive, bool wait)
{
	if (file->remote)
		return 0;   /* io_remote.c invariant 4 */
	int operation = (exclusive ? LOCK_EX : LOCK_SH) | (wait ? 0 : LOCK_NB);
	int rc;
	do
		rc = flock(file->descriptor, operation);
	while (rc < 0 && errno == EINTR);
	return rc < 0 ? -errno : 0;
}

int io_unlock(struct io_file *file)
{
	if (file->remote)
		return 0;
	int rc;
	do
		rc = flock(file->descriptor, LOCK_UN);
	while (rc < 0 && errno == EINTR);
	return rc < 0 ? -errno : 0;
}

/* ---- byte-range locks, holes -------------------------------------------- */

static int range_lock_call(struct io_file *file, int command, short type, uint64_t start, uint64_t length,
			   struct flock *out)
{
	if (file->remote) {
		/* io_remote.c invariant 4: no lock is seen, every lock is granted */
		if (out)
			*out = (struct flock){ .l_type = F_UNLCK };
		return 0;
	}
	struct flock lock = { 0 };
	lock.l_type = type;
	lock.l_whence = SEEK_SET;
	lock.l_start = (off_t)start;
	lock.l_len = (off_t)length;
	lock.l_pid = 0;   /* required by F_OFD_* */
	int rc;
	do
		rc = fcntl(file->descriptor, command, &lock);
	while (rc < 0 && errno == EINTR);
	if (rc < 0)
		return errno == EACCES ? -EAGAIN : -errno;
	if (out)
		*out = lock;
	return 0;
}

int io_range_lock(struct io_file *file, uint64_t start, uint64_t length, bool exclusive)
{
	return range_lock_call(file, F_OFD_SETLK, exclusive ? F_WRLCK : F_RDLCK, start, length, NULL);
}

int io_range_lock_shared_wait(struct io_file *file, uint64_t start, uint64_t length)
{
	return range_lock_call(file, F_OFD_SETLKW, F_RDLCK, start, length, NULL);
}

int io_range_lock_exclusive_wait(struct io_file *file, uint64_t start, uint64_t length)
{
	return range_lock_call(file, F_OFD_SETLKW, F_WRLCK, start, length, NULL);
}

int io_range_unlock(struct io_file *file, uint64_t start, uint64_t length)
{
	return range_lock_call(file, F_OFD_SETLK, F_UNLCK, start, length, NULL);
}

int io_range_test(struct io_file *file, uint64_t start, uint64_t length, uint64_t *found_start,
		  uint64_t *found_length)
{
	struct flock lock;
	int rc = range_lock_call(file, F_OFD_GETLK, F_WRLCK, start, length, &lock);
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
	if (file->remote)
		return io_remote_punch(file, start, end);
	int rc;
	do
		rc = fallocate(file->descriptor, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)start,
			       (off_t)(end - start));
	while (rc < 0 && errno == EINTR);
	return rc < 0 ? -errno : 0;
}

int io_data_bytes(struct io_file *file, uint64_t start, uint64_t end, uint64_t *bytes_out)
{
	if (file->remote)
		return io_remote_data_bytes(file, start, end, bytes_out);
	uint64_t total = 0, at = start;
	while (at < end) {
		off_t data = lseek(file->descriptor, (off_t)at, SEEK_DATA);
		if (data < 0) {
			if (errno == ENXIO)
				break;   /* only holes from here to the end of the file */
			return -errno;
		}
		if ((uint64_t)data >= end)
			break;
		off_t hole = lseek(file->descriptor, data, SEEK_HOLE);
		if (hole < 0)
			return -errno;
		uint64_t stop = (uint64_t)hole < end ? (uint64_t)hole : end;
		total += stop - (uint64_t)data;
		at = stop;
	}
	*bytes_out = total;
	return 0;
}

int io_allocated_bytes(struct io_file *file, uint64_t *bytes_out)
{
	if (file->remote)
		return io_remote_data_bytes(file, 0, UINT64_MAX, bytes_out);
	struct stat status;
	if (fstat(file->descriptor, &status) < 0)
		return -errno;
	*bytes_out = (uint64_t)status.st_blocks * 512u;
	return 0;
}
