/*
 * io_local — the io layer's backend for a store on a local file system: the
 * system calls behind io.h, reached only through io_local_methods (io.c picks
 * the backend of a directory or file; io_remote.c is the other).
 *
 * Invariants:
 *   1. Every file and directory is opened relative to a directory descriptor
 *      with O_NOFOLLOW|O_CLOEXEC; a name may have one "dir/" level, and that
 *      directory is itself opened with O_NOFOLLOW|O_DIRECTORY, so no symlink
 *      is ever followed. Names with "", ".", ".." components are refused.
 *   2. Files are created 0600, directories 0700.
 *   3. A call interrupted by a signal (EINTR) is made again; every other
 *      failure returns its negative errno.
 */
#include "io_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

bool io_component_is_valid(const char *component, size_t length)
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
		if (!io_component_is_valid(name, strlen(name)))
			return -EINVAL;
		*parent_out = directory;
		*leaf_out = name;
		return 0;
	}
	const char *leaf = slash + 1;
	size_t directory_length = (size_t)(slash - name);
	if (strchr(leaf, '/') || !io_component_is_valid(name, directory_length) ||
	    !io_component_is_valid(leaf, strlen(leaf)))
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

static int local_directory_open(const char *path)
{
	int descriptor;
	do
		descriptor = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	while (descriptor < 0 && errno == EINTR);
	return descriptor < 0 ? -errno : descriptor;
}

static int local_directory_open_at(int directory, const char *name)
{
	int descriptor;
	do
		descriptor = openat(directory, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	while (descriptor < 0 && errno == EINTR);
	return descriptor < 0 ? -errno : descriptor;
}

static int local_directory_make(int directory, const char *name)
{
	return mkdirat(directory, name, 0700) < 0 ? -errno : 0;
}

static int local_directory_sync(int directory)
{
	int rc;
	do
		rc = fsync(directory);
	while (rc < 0 && errno == EINTR);
	return rc < 0 ? -errno : 0;
}

static int local_unlink(int directory, const char *name)
{
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

static int local_rename(int directory, const char *from, const char *to)
{
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

static int local_link(int from_directory, const char *from, int to_directory, const char *to)
{
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

static int local_list(int directory, const char *subdirectory,
		      int (*visit)(const char *name, void *context), void *context)
{
	const char *target = subdirectory && *subdirectory ? subdirectory : ".";
	if (strchr(target, '/') || (strcmp(target, ".") != 0 && !io_component_is_valid(target, strlen(target))))
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

static int local_file_open(int directory, const char *name, int flags, enum io_class class, struct io_file *out)
{
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

static int local_file_create_locked(int directory, const char *name, enum io_class class, struct io_file *out)
{
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

static int local_scratch_open(int directory, const char *subdirectory, enum io_class class, struct io_file *out)
{
	return local_file_open(directory, subdirectory, O_TMPFILE | O_RDWR, class, out);
}

static void local_file_close(struct io_file *file)
{
	if (file->descriptor >= 0)
		close(file->descriptor);
}

static ssize_t local_pread(struct io_file *file, void *out, size_t size, uint64_t offset)
{
	ssize_t got;
	do
		got = pread(file->descriptor, out, size, (off_t)offset);
	while (got < 0 && errno == EINTR);
	return got < 0 ? -errno : got;
}

static int local_pwrite(struct io_file *file, const void *bytes, size_t size, uint64_t offset, size_t *done)
{
	*done = 0;
	while (*done < size) {
		ssize_t wrote = pwrite(file->descriptor, (const uint8_t *)bytes + *done, size - *done,
				       (off_t)(offset + *done));
		if (wrote < 0 && errno == EINTR)
			continue;
		if (wrote < 0)
			return -errno;
		if (wrote == 0)
			return -EIO;
		*done += (size_t)wrote;
	}
	return 0;
}

static int local_fsync(struct io_file *file)
{
	int rc;
	do
		rc = fsync(file->descriptor);
	while (rc < 0 && errno == EINTR);
	return rc < 0 ? -errno : 0;
}

static int local_datasync(struct io_file *file)
{
	int rc;
	do
		rc = fdatasync(file->descriptor);
	while (rc < 0 && errno == EINTR);
	return rc < 0 ? -errno : 0;
}

static int local_truncate(struct io_file *file, uint64_t size)
{
	int rc;
	do
		rc = ftruncate(file->descriptor, (off_t)size);
	while (rc < 0 && errno == EINTR);
	return rc < 0 ? -errno : 0;
}

static int local_size(struct io_file *file, uint64_t *size_out)
{
	/*
	 * lseek rather than fstat: a stat marks the file's timestamps as seen,
	 * after which the kernel gives the next write a fine-grained mtime, and
	 * every fsync then writes the inode too — one more synchronous write per
	 * commit. All I/O here is pread/pwrite, so the file offset is unused.
	 */
	off_t end = lseek(file->descriptor, 0, SEEK_END);
	if (end < 0)
		return -errno;
	*size_out = (uint64_t)end;
	return 0;
}

static uint64_t local_last_append_start(struct io_file *file)
{
	(void)file;
	return 0;
}

static void local_note_state_start(struct io_file *file, uint64_t offset)
{
	(void)file;
	(void)offset;
}

static uint64_t local_append_offset(const struct io_file *file, uint64_t end)
{
	(void)file;
	return end;
}

static int local_lock(struct io_file *file, bool exclusive, bool wait)
{
	int operation = (exclusive ? LOCK_EX : LOCK_SH) | (wait ? 0 : LOCK_NB);
	int rc;
	do
		rc = flock(file->descriptor, operation);
	while (rc < 0 && errno == EINTR);
	return rc < 0 ? -errno : 0;
}

static int local_unlock(struct io_file *file)
{
	int rc;
	do
		rc = flock(file->descriptor, LOCK_UN);
	while (rc < 0 && errno == EINTR);
	return rc < 0 ? -errno : 0;
}

static int local_range_lock(struct io_file *file, int command, short type, uint64_t start, uint64_t length,
			    struct flock *out)
{
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

static int local_punch(struct io_file *file, uint64_t start, uint64_t end)
{
	int rc;
	do
		rc = fallocate(file->descriptor, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)start,
			       (off_t)(end - start));
	while (rc < 0 && errno == EINTR);
	return rc < 0 ? -errno : 0;
}

static int local_data_bytes(struct io_file *file, uint64_t start, uint64_t end, uint64_t *bytes_out)
{
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

static int local_allocated_bytes(struct io_file *file, uint64_t *bytes_out)
{
	struct stat status;
	if (fstat(file->descriptor, &status) < 0)
		return -errno;
	*bytes_out = (uint64_t)status.st_blocks * 512u;
	return 0;
}

const struct io_methods io_local_methods = {
	.name = "local",
	.directory_open = local_directory_open,
	.directory_open_at = local_directory_open_at,
	.directory_make = local_directory_make,
	.directory_sync = local_directory_sync,
	.unlink = local_unlink,
	.rename = local_rename,
	.link = local_link,
	.list = local_list,
	.file_open = local_file_open,
	.file_create_locked = local_file_create_locked,
	.scratch_open = local_scratch_open,
	.file_close = local_file_close,
	.pread = local_pread,
	.pwrite = local_pwrite,
	.fsync = local_fsync,
	.datasync = local_datasync,
	.truncate = local_truncate,
	.size = local_size,
	.size_known = local_size,
	.last_append_start = local_last_append_start,
	.note_state_start = local_note_state_start,
	.append_offset = local_append_offset,
	.lock = local_lock,
	.unlock = local_unlock,
	.range_lock = local_range_lock,
	.punch = local_punch,
	.data_bytes = local_data_bytes,
	.allocated_bytes = local_allocated_bytes,
};
