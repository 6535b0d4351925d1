/*
 * ops — the FUSE low-level operations table: each operation translates one
 * kernel request into a mountfs call (mountfs/mountfs.h) and its reply.
 * Nothing here knows what a path means.
 *
 * Invariants:
 *   1. A reply that hands the kernel a node (entry, create, readdirplus
 *      entry) was given one lookup by mountfs; if the reply fails, the
 *      lookup (and the open handle) is given back.
 *   2. Changes a request returns (struct mountfs_changes) are notified only
 *      after its reply: the kernel holds the directory's lock until then.
 *   3. No memory is allocated per request: reads and listings reply from one
 *      preallocated buffer per worker thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuse_ops.h"

_Static_assert(MOUNTFS_SET_MODE == FUSE_SET_ATTR_MODE && MOUNTFS_SET_SIZE == FUSE_SET_ATTR_SIZE &&
		       MOUNTFS_SET_MTIME == FUSE_SET_ATTR_MTIME &&
		       MOUNTFS_SET_MTIME_NOW == FUSE_SET_ATTR_MTIME_NOW &&
		       MOUNTFS_SET_ATIME_NOW == FUSE_SET_ATTR_ATIME_NOW && MOUNTFS_SET_CTIME == FUSE_SET_ATTR_CTIME,
	       "mountfs_set values are FUSE_SET_ATTR_* values");

static pthread_key_t reply_buffer_key;
static pthread_once_t reply_buffer_once = PTHREAD_ONCE_INIT;

static void reply_buffer_key_create(void)
{
	pthread_key_create(&reply_buffer_key, free);
}

/* This worker thread's reply buffer (MOUNTFS_IO_MAX + 4 KiB), or NULL. */
static char *reply_buffer(void)
{
	pthread_once(&reply_buffer_once, reply_buffer_key_create);
	char *buffer = pthread_getspecific(reply_buffer_key);
	if (!buffer) {
		buffer = malloc(MOUNTFS_IO_MAX + 4096);
		if (buffer)
			pthread_setspecific(reply_buffer_key, buffer);
	}
	return buffer;
}

static struct mountfs *mount_of(fuse_req_t request)
{
	return fuse_req_userdata(request);
}

static struct mountfs_caller caller_of(fuse_req_t request)
{
	const struct fuse_ctx *context = fuse_req_ctx(request);
	struct mountfs_caller caller = { context->uid, context->gid, context->pid };
	return caller;
}

static void to_fuse_entry(const struct mountfs_entry *entry, struct fuse_entry_param *out)
{
	memset(out, 0, sizeof *out);
	out->ino = entry->id;
	out->generation = 1;
	out->attr = entry->attr;
	out->attr_timeout = entry->attr_timeout;
	out->entry_timeout = entry->entry_timeout;
}

static void to_fuse_open(const struct mountfs_open_result *result, struct fuse_file_info *fi)
{
	fi->fh = result->handle;
	fi->direct_io = result->direct_io;
	fi->keep_cache = result->keep_cache;
	fi->cache_readdir = result->cache_readdir;
}

/* Replies with an entry, giving its lookup back if the kernel did not take it. */
static void reply_entry(fuse_req_t request, int rc, const struct mountfs_entry *entry)
{
	struct mountfs *mount = mount_of(request);
	if (rc == -ENOENT && entry->entry_timeout > 0) {
		struct fuse_entry_param negative;
		to_fuse_entry(entry, &negative);
		fuse_reply_entry(request, &negative);
		return;
	}
	if (rc < 0) {
		fuse_reply_err(request, -rc);
		return;
	}
	struct fuse_entry_param e;
	to_fuse_entry(entry, &e);
	if (fuse_reply_entry(request, &e) != 0)
		mountfs_forget(mount, entry->id, 1);
}

static void op_init(void *userdata, struct fuse_conn_info *connection)
{
	(void)userdata;
	connection->max_write = MOUNTFS_IO_MAX;
	if (connection->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		connection->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	if (connection->capable & FUSE_CAP_READDIRPLUS)
		connection->want |= FUSE_CAP_READDIRPLUS;
	/* Writes must reach the daemon in order and synchronously: streams are
	 * validated write by write, and each close publishes. The kernel clears
	 * SUID/SGID itself on a write by another user (a setattr of the mode). */
	connection->want &= ~(unsigned)(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_ASYNC_DIO |
					FUSE_CAP_HANDLE_KILLPRIV);
#ifdef FUSE_CAP_HANDLE_KILLPRIV_V2
	connection->want &= ~(unsigned)FUSE_CAP_HANDLE_KILLPRIV_V2;
#endif
#ifdef FUSE_CAP_DIRECT_IO_ALLOW_MMAP
	if (connection->capable & FUSE_CAP_DIRECT_IO_ALLOW_MMAP)
		connection->want |= FUSE_CAP_DIRECT_IO_ALLOW_MMAP;
#endif
	if (connection->max_readahead > MOUNTFS_IO_MAX)
		connection->max_readahead = MOUNTFS_IO_MAX;
}

static void op_lookup(fuse_req_t request, fuse_ino_t parent, const char *name)
{
	struct mountfs_entry entry;
	int rc = mountfs_lookup(mount_of(request), parent, name, &entry);
	reply_entry(request, rc, &entry);
}

static void op_forget(fuse_req_t request, fuse_ino_t id, uint64_t count)
{
	mountfs_forget(mount_of(request), id, count);
	fuse_reply_none(request);
}

static void op_forget_multi(fuse_req_t request, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		mountfs_forget(mount_of(request), forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(request);
}

static void op_getattr(fuse_req_t request, fuse_ino_t id, struct fuse_file_info *fi)
{
	struct stat st;
	double timeout = 0;
	int rc = mountfs_getattr(mount_of(request), id, fi ? fi->fh : 0, &st, &timeout);
	if (rc < 0)
		fuse_reply_err(request, -rc);
	else
		fuse_reply_attr(request, &st, timeout);
}

static void op_setattr(fuse_req_t request, fuse_ino_t id, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct mountfs *mount = mount_of(request);
	struct mountfs_caller caller = caller_of(request);
	struct mountfs_changes changes;
	struct stat st;
	double timeout = 0;
	int rc = mountfs_setattr(mount, id, fi ? fi->fh : 0, attr, to_set, &caller, &st, &timeout, &changes);
	if (rc < 0) {
		fuse_reply_err(request, -rc);
		return;
	}
	fuse_reply_attr(request, &st, timeout);
	mountfs_notify_changes(mount, &changes);
}

static void op_readlink(fuse_req_t request, fuse_ino_t id)
{
	char target[64];
	int rc = mountfs_readlink(mount_of(request), id, target, sizeof target);
	if (rc < 0)
		fuse_reply_err(request, -rc);
	else
		fuse_reply_readlink(request, target);
}

static void op_mkdir(fuse_req_t request, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct mountfs_caller caller = caller_of(request);
	struct mountfs_entry entry;
	int rc = mountfs_mkdir(mount_of(request), parent, name, mode, &caller, &entry);
	entry.entry_timeout = rc < 0 ? 0 : entry.entry_timeout;
	reply_entry(request, rc, &entry);
}

static void op_rmdir(fuse_req_t request, fuse_ino_t parent, const char *name)
{
	struct mountfs_caller caller = caller_of(request);
	fuse_reply_err(request, -mountfs_rmdir(mount_of(request), parent, name, &caller));
}

static void op_unlink(fuse_req_t request, fuse_ino_t parent, const char *name)
{
	struct mountfs *mount = mount_of(request);
	struct mountfs_caller caller = caller_of(request);
	struct mountfs_changes changes;
	int rc = mountfs_unlink(mount, parent, name, &caller, &changes);
	fuse_reply_err(request, -rc);
	if (rc == 0)
		mountfs_notify_changes(mount, &changes);
}

static void op_rename(fuse_req_t request, fuse_ino_t parent, const char *name, fuse_ino_t new_parent,
		      const char *new_name, unsigned int flags)
{
	struct mountfs *mount = mount_of(request);
	struct mountfs_caller caller = caller_of(request);
	struct mountfs_changes changes;
	int rc = mountfs_rename(mount, parent, name, new_parent, new_name, flags, &caller, &changes);
	fuse_reply_err(request, -rc);
	if (rc == 0)
		mountfs_notify_changes(mount, &changes);
}

static void op_mknod(fuse_req_t request, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	(void)mode;
	(void)rdev;
	fuse_reply_err(request, -mountfs_make_node(mount_of(request), parent, name));
}

static void op_symlink(fuse_req_t request, const char *link, fuse_ino_t parent, const char *name)
{
	(void)link;
	fuse_reply_err(request, -mountfs_make_node(mount_of(request), parent, name));
}

static void op_link(fuse_req_t request, fuse_ino_t id, fuse_ino_t new_parent, const char *new_name)
{
	(void)id;
	fuse_reply_err(request, -mountfs_make_node(mount_of(request), new_parent, new_name));
}

static void op_open(fuse_req_t request, fuse_ino_t id, struct fuse_file_info *fi)
{
	struct mountfs *mount = mount_of(request);
	struct mountfs_caller caller = caller_of(request);
	struct mountfs_open_result result;
	int rc = mountfs_open(mount, id, fi->flags, &caller, &result);
	if (rc < 0) {
		fuse_reply_err(request, -rc);
		return;
	}
	to_fuse_open(&result, fi);
	if (fuse_reply_open(request, fi) != 0)
		mountfs_release(mount, result.handle);
}

static void op_create(fuse_req_t request, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct mountfs *mount = mount_of(request);
	struct mountfs_caller caller = caller_of(request);
	struct mountfs_entry entry;
	struct mountfs_open_result result;
	int rc = mountfs_create(mount, parent, name, mode, fi->flags, &caller, &entry, &result);
	if (rc < 0) {
		fuse_reply_err(request, -rc);
		return;
	}
	struct fuse_entry_param e;
	to_fuse_entry(&entry, &e);
	to_fuse_open(&result, fi);
	if (fuse_reply_create(request, &e, fi) != 0) {
		mountfs_release(mount, result.handle);
		mountfs_forget(mount, entry.id, 1);
	}
}

static void op_read(fuse_req_t request, fuse_ino_t id, size_t size, off_t offset, struct fuse_file_info *fi)
{
	(void)id;
	char *buffer = reply_buffer();
	if (!buffer) {
		fuse_reply_err(request, ENOMEM);
		return;
	}
	if (size > MOUNTFS_IO_MAX + 4096)
		size = MOUNTFS_IO_MAX + 4096;
	ssize_t got = mountfs_read(mount_of(request), fi->fh, buffer, size, offset);
	if (got < 0)
		fuse_reply_err(request, (int)-got);
	else
		fuse_reply_buf(request, buffer, (size_t)got);
}

static void op_write(fuse_req_t request, fuse_ino_t id, const char *bytes, size_t size, off_t offset,
		     struct fuse_file_info *fi)
{
	(void)id;
	struct mountfs_caller caller = caller_of(request);
	ssize_t written = mountfs_write(mount_of(request), fi->fh, bytes, size, offset, &caller);
	if (written < 0)
		fuse_reply_err(request, (int)-written);
	else
		fuse_reply_write(request, (size_t)written);
}

static void op_flush(fuse_req_t request, fuse_ino_t id, struct fuse_file_info *fi)
{
	(void)id;
	fuse_reply_err(request, -mountfs_flush(mount_of(request), fi->fh));
}

static void op_release(fuse_req_t request, fuse_ino_t id, struct fuse_file_info *fi)
{
	(void)id;
	mountfs_release(mount_of(request), fi->fh);
	fuse_reply_err(request, 0);
}

static void op_fsync(fuse_req_t request, fuse_ino_t id, int datasync, struct fuse_file_info *fi)
{
	(void)id;
	(void)datasync;
	fuse_reply_err(request, -mountfs_fsync(mount_of(request), fi->fh));
}

static void op_opendir(fuse_req_t request, fuse_ino_t id, struct fuse_file_info *fi)
{
	struct mountfs *mount = mount_of(request);
	struct mountfs_open_result result;
	int rc = mountfs_opendir(mount, id, &result);
	if (rc < 0) {
		fuse_reply_err(request, -rc);
		return;
	}
	to_fuse_open(&result, fi);
	if (fuse_reply_open(request, fi) != 0)
		mountfs_releasedir(mount, result.handle);
}

static void op_releasedir(fuse_req_t request, fuse_ino_t id, struct fuse_file_info *fi)
{
	(void)id;
	mountfs_releasedir(mount_of(request), fi->fh);
	fuse_reply_err(request, 0);
}

struct directory_reply {
	fuse_req_t request;
	char *buffer;
	size_t size;
	size_t used;
	bool plus;
};

static int add_entry(void *context, const char *name, const struct mountfs_entry *entry, uint64_t next)
{
	struct directory_reply *reply = context;
	size_t room = reply->size - reply->used;
	size_t needed;
	if (reply->plus) {
		struct fuse_entry_param e;
		to_fuse_entry(entry, &e);
		/* "." and "..": no node id (the kernel links neither); d_ino is attr.st_ino */
		needed = fuse_add_direntry_plus(reply->request, reply->buffer + reply->used, room, name, &e,
						(off_t)next);
	} else {
		needed = fuse_add_direntry(reply->request, reply->buffer + reply->used, room, name,
					   &entry->attr, (off_t)next);
	}
	if (needed > room)
		return 1;
	reply->used += needed;
	return 0;
}

static void readdir_common(fuse_req_t request, fuse_ino_t id, size_t size, off_t offset,
			   struct fuse_file_info *fi, bool plus)
{
	struct directory_reply reply = { .request = request, .buffer = reply_buffer(), .plus = plus };
	if (!reply.buffer) {
		fuse_reply_err(request, ENOMEM);
		return;
	}
	reply.size = size > MOUNTFS_IO_MAX ? MOUNTFS_IO_MAX : size;
	int rc = mountfs_readdir(mount_of(request), id, fi->fh, (uint64_t)offset, plus, add_entry, &reply);
	if (rc < 0)
		fuse_reply_err(request, -rc);
	else
		fuse_reply_buf(request, reply.buffer, reply.used);
}

static void op_readdir(fuse_req_t request, fuse_ino_t id, size_t size, off_t offset,
		       struct fuse_file_info *fi)
{
	readdir_common(request, id, size, offset, fi, false);
}

static void op_readdirplus(fuse_req_t request, fuse_ino_t id, size_t size, off_t offset,
			   struct fuse_file_info *fi)
{
	readdir_common(request, id, size, offset, fi, true);
}

static void op_statfs(fuse_req_t request, fuse_ino_t id)
{
	(void)id;
	struct statvfs st;
	mountfs_statfs(mount_of(request), &st);
	fuse_reply_statfs(request, &st);
}

static void reply_xattr(fuse_req_t request, ssize_t length, const char *value, size_t size)
{
	if (length < 0)
		fuse_reply_err(request, (int)-length);
	else if (size == 0)
		fuse_reply_xattr(request, (size_t)length);
	else
		fuse_reply_buf(request, value, (size_t)length);
}

static void op_getxattr(fuse_req_t request, fuse_ino_t id, const char *name, size_t size)
{
	char value[256];
	size_t room = size < sizeof value ? size : sizeof value;
	reply_xattr(request, mountfs_getxattr(mount_of(request), id, name, value, room), value, size);
}

static void op_listxattr(fuse_req_t request, fuse_ino_t id, size_t size)
{
	char list[256];
	size_t room = size < sizeof list ? size : sizeof list;
	reply_xattr(request, mountfs_listxattr(mount_of(request), id, list, room), list, size);
}

static void op_setxattr(fuse_req_t request, fuse_ino_t id, const char *name, const char *value,
			size_t size, int flags)
{
	(void)id;
	(void)name;
	(void)value;
	(void)size;
	(void)flags;
	fuse_reply_err(request, ENOTSUP);
}

static void op_removexattr(fuse_req_t request, fuse_ino_t id, const char *name)
{
	(void)id;
	(void)name;
	fuse_reply_err(request, ENOTSUP);
}

const struct fuse_lowlevel_ops graphfs_operations = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.open = op_open,
	.create = op_create,
	.read = op_read,
	.write = op_write,
	.flush = op_flush,
	.release = op_release,
	.fsync = op_fsync,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.statfs = op_statfs,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.setxattr = op_setxattr,
	.removexattr = op_removexattr,
};
