/*
 * io_int.h — the io layer's internals shared by io.c and io_remote.c (with io_pieced.c): the
 * store directory on an object store (docs/ARCHITECTURE.md "Stores in an
 * object store"; the object layout is docs/FORMAT.md §23).
 *
 * A remote directory is named by a number at or above IO_REMOTE_BASE where
 * the io functions take a directory descriptor, and a remote file by an
 * io_file whose remote field is set (its descriptor is IO_REMOTE_BASE, so
 * "is it open" checks read as for a local file). io.c hands every call on
 * them to the functions below; nothing above the io layer can tell, except
 * through io_is_remote().
 */
#ifndef GRAPHFS_IO_INT_H
#define GRAPHFS_IO_INT_H

#include "io.h"

#define IO_REMOTE_BASE (1 << 28)

static inline bool io_remote_directory(int directory)
{
	return directory >= IO_REMOTE_BASE;
}

void io_remote_readahead_pause(void);
void io_remote_readahead_resume(void);
int io_remote_open_root(const char *location);
int io_remote_open_at(int directory, const char *name);
int io_remote_file_open(int directory, const char *name, int flags, enum io_class class, struct io_file *out);
void io_remote_file_close(struct io_file *file);
ssize_t io_remote_pread(struct io_file *file, void *out, size_t size, uint64_t offset);
int io_remote_pwrite(struct io_file *file, const void *bytes, size_t size, uint64_t offset);
int io_remote_sync(struct io_file *file);
int io_remote_truncate(struct io_file *file, uint64_t size);
int io_remote_size(struct io_file *file, uint64_t *size_out);
int io_remote_size_known(struct io_file *file, uint64_t *size_out);
uint64_t io_remote_append_offset(const struct io_file *file, uint64_t end);
uint64_t io_remote_last_append_start(struct io_file *file);
void io_remote_note_state_start(struct io_file *file, uint64_t offset);
int io_remote_punch(struct io_file *file, uint64_t start, uint64_t end);
int io_remote_data_bytes(struct io_file *file, uint64_t start, uint64_t end, uint64_t *bytes_out);
int io_remote_unlink(int directory, const char *name);
int io_remote_rename(int directory, const char *from, const char *to);
int io_remote_list(int directory, const char *subdirectory, int (*visit)(const char *name, void *context),
		   void *context);

#endif
