/*
 * io_int.h — the io layer's internals shared by io.c and io_remote.c (with io_pieced.c): the
 * store directory on an object store (docs/ARCHITECTURE.md "Stores in an
 * object store"; the object layout is docs/FORMAT.md §23).
 *
 * A remote directory is named by a number at or above IO_REMOTE_BASE where
 * the io functions take a directory descriptor, and a remote file by an
 * io_file whose remote field is set (its descriptor is IO_REMOTE_BASE, so
 * "is it open" checks read as for a local file). io.c hands every call on
 * them to io_remote_methods, and every other to io_local_methods; nothing
 * above the io layer can tell, except through io_is_remote().
 */
#ifndef GRAPHFS_IO_INT_H
#define GRAPHFS_IO_INT_H

#include "io.h"

#define IO_REMOTE_BASE (1 << 28)

static inline bool io_remote_directory(int directory)
{
	return directory >= IO_REMOTE_BASE;
}

#include <fcntl.h>
#include <sys/types.h>

/*
 * A backend of the io layer: what io.c's facade calls for a directory or file
 * of its kind (as SQLite's VFS methods). Names reach directory calls already
 * checked to be one component (io.c invariant 2); every call returns 0 or a
 * negative errno unless said otherwise.
 */
struct io_methods {
	const char *name;                                     /* "local", "s3" */
	int (*directory_open)(const char *path);              /* a directory number, or -errno */
	int (*directory_open_at)(int directory, const char *name);
	int (*directory_make)(int directory, const char *name);
	int (*directory_sync)(int directory);
	int (*unlink)(int directory, const char *name);
	int (*rename)(int directory, const char *from, const char *to);
	int (*link)(int from_directory, const char *from, int to_directory, const char *to);
	int (*list)(int directory, const char *subdirectory, int (*visit)(const char *name, void *context),
		    void *context);
	int (*file_open)(int directory, const char *name, int flags, enum io_class class, struct io_file *out);
	int (*file_create_locked)(int directory, const char *name, enum io_class class, struct io_file *out);
	/* an unnamed file; -EOPNOTSUPP, -EISDIR or -EINVAL: none here (the facade makes a memory file) */
	int (*scratch_open)(int directory, const char *subdirectory, enum io_class class, struct io_file *out);
	void (*file_close)(struct io_file *file);
	ssize_t (*pread)(struct io_file *file, void *out, size_t size, uint64_t offset);   /* bytes read, or -errno */
	void (*prefetch)(struct io_file *file, const uint64_t *offsets, size_t count);      /* NULL: none */
	int (*pwrite)(struct io_file *file, const void *bytes, size_t size, uint64_t offset, size_t *done);
	int (*fsync)(struct io_file *file);
	int (*datasync)(struct io_file *file);
	int (*truncate)(struct io_file *file, uint64_t size);
	int (*size)(struct io_file *file, uint64_t *size_out);
	int (*size_known)(struct io_file *file, uint64_t *size_out);
	uint64_t (*last_append_start)(struct io_file *file);
	void (*note_state_start)(struct io_file *file, uint64_t offset);
	uint64_t (*append_offset)(const struct io_file *file, uint64_t end);
	int (*lock)(struct io_file *file, bool exclusive, bool wait);
	int (*unlock)(struct io_file *file);
	/* fcntl(2)'s F_OFD_SETLK, F_OFD_SETLKW or F_OFD_GETLK of type over [start, start + length) */
	int (*range_lock)(struct io_file *file, int command, short type, uint64_t start, uint64_t length,
			  struct flock *out);
	int (*punch)(struct io_file *file, uint64_t start, uint64_t end);
	int (*data_bytes)(struct io_file *file, uint64_t start, uint64_t end, uint64_t *bytes_out);
	int (*allocated_bytes)(struct io_file *file, uint64_t *bytes_out);
	void (*threads_pause)(void);                          /* around a fork(2) (io.h) */
	void (*threads_resume)(void);
};

extern const struct io_methods io_local_methods;    /* io_local.c */
extern const struct io_methods io_remote_methods;   /* io_remote.c */

/* A name component: not empty, not "." or "..", at most 255 bytes (io_local.c). */
bool io_component_is_valid(const char *component, size_t length);

#endif
