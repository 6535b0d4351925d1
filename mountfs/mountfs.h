/*
 * mountfs — the mounted tree of a graphfs store, without FUSE (layer above
 * core/store.h; fuse/ translates kernel requests to these calls and nothing
 * more). docs/MOUNT.md describes what every path shows and what every system
 * call on it does; this header is that contract as an API.
 *
 * The API has the shape of the file-system operations. Nodes are named by a
 * 64-bit id (MOUNTFS_ROOT_ID is the root); an id handed out by lookup,
 * create, mkdir or a readdir-plus entry carries one lookup reference until
 * mountfs_forget drops it, as the kernel's nodeids do. Open files and open
 * directories are named by a handle. Every call returns 0 (or a size) or a
 * negative errno; a call that is refused changes nothing unless its comment
 * says otherwise. Every call may be made from any thread.
 *
 * Who is asking: calls that may publish a commit take the caller's uid (and
 * gid, pid); the commit's actor is that user's name @ this host, not the
 * daemon's user. An open file remembers its opener, and publishes as them.
 *
 * Kernel caches: when a commit changes what a path shows, mountfs tells the
 * embedding through the notify hooks (mountfs_set_notify). A few operations
 * (unlink, rename, setattr) change the directory the request itself holds
 * locked in the kernel; they return the names to invalidate in a struct
 * mountfs_changes, and the caller passes it to mountfs_notify_changes after
 * its reply.
 */
#ifndef GRAPHFS_MOUNTFS_H
#define GRAPHFS_MOUNTFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include "store.h"

#define MOUNTFS_ROOT_ID 1
#define MOUNTFS_NAME_MAX 255                  /* longest file name component */
#define MOUNTFS_IO_MAX (1024 * 1024 - 4096)   /* largest read or write request */

struct mountfs;

/* How a mount is set up. Strings are copied. */
struct mountfs_config {
	struct store *store;            /* taken over: mountfs_free closes it */
	const char *branch;             /* the mounted branch (NULL: main) */
	const char *mountpoint;         /* where it is mounted, for "branch B is mounted at ..." */
	const char *temporary_directory; /* where scratch files and private copies live (O_TMPFILE) */
	bool read_only;
	uint64_t refresh_interval_ms;   /* look for other processes' commits at most this often */
	uid_t uid;                      /* owner and group of store files and directories (uid=, gid=) */
	gid_t gid;
	mode_t umask;                   /* bits taken from their modes (umask=; the daemon's default 022):
					   0666 / 0777 writable, 0444 / 0555 read-only, then this */
	bool log_rejections;            /* also log every rejected write (debug) */
	/* Where diagnostics go (priority as syslog(3)); NULL: nowhere. */
	void (*log)(void *context, int priority, const char *message);
	void *log_context;
};

/* The kernel's caches, told about changes. Either hook may be NULL. */
struct mountfs_notify {
	void (*invalidate_inode)(void *context, uint64_t id);
	void (*invalidate_entry)(void *context, uint64_t parent, const char *name);
	void *context;
};

/* The process a request comes from. */
struct mountfs_caller {
	uid_t uid;
	gid_t gid;
	pid_t pid;
};

/* A directory entry handed to the kernel. */
struct mountfs_entry {
	uint64_t id;                    /* 0 in a negative entry */
	struct stat attr;
	double attr_timeout;            /* seconds the kernel may keep attr */
	double entry_timeout;           /* seconds the kernel may keep the name (or its absence) */
};

/* How an open file or directory may be cached. */
struct mountfs_open_result {
	uint64_t handle;
	bool direct_io;                 /* live files: every read reaches mountfs */
	bool keep_cache;                /* immutable files: the page cache stays valid */
	bool cache_readdir;             /* immutable directories */
};

/* Names whose kernel entries a request changed; see mountfs_notify_changes. */
struct mountfs_changes {
	char branch[JOURNAL_NAME_MAX + 1];
	char names[2][JOURNAL_NAME_MAX + 1];
	size_t count;
	bool removed;                   /* the names went away: their entries go too */
};

/* setattr: which fields of the given stat to apply (values as FUSE_SET_ATTR_*). */
enum mountfs_set {
	MOUNTFS_SET_MODE = 1 << 0,
	MOUNTFS_SET_UID = 1 << 1,
	MOUNTFS_SET_GID = 1 << 2,
	MOUNTFS_SET_SIZE = 1 << 3,
	MOUNTFS_SET_ATIME = 1 << 4,
	MOUNTFS_SET_MTIME = 1 << 5,
	MOUNTFS_SET_ATIME_NOW = 1 << 7,
	MOUNTFS_SET_MTIME_NOW = 1 << 8,
	MOUNTFS_SET_CTIME = 1 << 10,
};

/* ---- lifetime ---------------------------------------------------------------- */

/* Creates the mount. The branch must exist (-ENOENT otherwise); from here on the
 * store records that this process serves it, so no other process can delete it
 * (store_serve_branch). On error the store is not closed (the caller still owns
 * it). 0, -ENOENT, -ENOMEM, -errno. */
int mountfs_new(const struct mountfs_config *config, struct mountfs **out);
/* Frees every open file, staging area and node, then closes the store. */
void mountfs_free(struct mountfs *mount);
void mountfs_set_notify(struct mountfs *mount, const struct mountfs_notify *notify);
/* Around the daemon's fork (fuse_daemonize): the store's background threads stop, then start
 * again in the process that serves (store_threads_pause). mountfs_fork_after returns 0 or -errno. */
void mountfs_fork_before(struct mountfs *mount);
int mountfs_fork_after(struct mountfs *mount);

/* ---- names ------------------------------------------------------------------------ */

/* Resolves name in directory parent; the entry carries one lookup. -ENOENT with
 * entry->entry_timeout > 0 means the absence may be cached that long. */
int mountfs_lookup(struct mountfs *mount, uint64_t parent, const char *name, struct mountfs_entry *entry);
/* Drops count lookups of id (the kernel forgot them). */
void mountfs_forget(struct mountfs *mount, uint64_t id, uint64_t count);
/* Attributes of id, or of the open file handle (non-zero) on it: an open
 * handle answers for what it reads (its pinned version, its private copy, its
 * scratch file), with timeout 0. A scratch file's node answers after rm or a
 * rename over it too (the kernel asks fstat by node, without the handle). */
int mountfs_getattr(struct mountfs *mount, uint64_t id, uint64_t handle, struct stat *out,
		    double *timeout);
/* Applies the fields in to_set (enum mountfs_set); a size change of a table is
 * a write (published unless a handle is given: then at its close). */
int mountfs_setattr(struct mountfs *mount, uint64_t id, uint64_t handle, const struct stat *attr,
		    int to_set, const struct mountfs_caller *caller, struct stat *out, double *timeout,
		    struct mountfs_changes *changes);
/* The target of a symbolic link, NUL-terminated. */
int mountfs_readlink(struct mountfs *mount, uint64_t id, char *out, size_t size);

int mountfs_mkdir(struct mountfs *mount, uint64_t parent, const char *name, mode_t mode,
		  const struct mountfs_caller *caller, struct mountfs_entry *entry);
int mountfs_rmdir(struct mountfs *mount, uint64_t parent, const char *name,
		  const struct mountfs_caller *caller);
int mountfs_unlink(struct mountfs *mount, uint64_t parent, const char *name,
		   const struct mountfs_caller *caller, struct mountfs_changes *changes);
/* flags: RENAME_NOREPLACE is honoured, RENAME_EXCHANGE is -EINVAL. */
int mountfs_rename(struct mountfs *mount, uint64_t parent, const char *name, uint64_t new_parent,
		   const char *new_name, unsigned flags, const struct mountfs_caller *caller,
		   struct mountfs_changes *changes);
/* Symbolic links, hard links, devices, FIFOs and sockets cannot be made: -EPERM
 * (-EEXIST if the name exists, -EROFS where nothing can be written). */
int mountfs_make_node(struct mountfs *mount, uint64_t parent, const char *name);
/* Tells the kernel about changes a request returned, after its reply. */
void mountfs_notify_changes(struct mountfs *mount, const struct mountfs_changes *changes);

/* ---- files ---------------------------------------------------------------------------- */

int mountfs_open(struct mountfs *mount, uint64_t id, int flags, const struct mountfs_caller *caller,
		 struct mountfs_open_result *out);
/* open(O_CREAT): the entry carries one lookup; mode 0000 is honoured. */
int mountfs_create(struct mountfs *mount, uint64_t parent, const char *name, mode_t mode, int flags,
		   const struct mountfs_caller *caller, struct mountfs_entry *entry,
		   struct mountfs_open_result *out);
/* Bytes copied into out (0 at the end) or -errno. */
ssize_t mountfs_read(struct mountfs *mount, uint64_t handle, char *out, size_t size, off_t offset);
/* Bytes accepted or -errno: a line this write completes that is invalid fails
 * it (-EINVAL, with a .graphfs/errors line), as does a staged commit's refusal. caller: who
 * writes (a user's write clears set-user-ID of a scratch file; NULL: this process). */
ssize_t mountfs_write(struct mountfs *mount, uint64_t handle, const char *bytes, size_t size, off_t offset,
		      const struct mountfs_caller *caller);
/* close(2): publishes what the handle wrote since its last publish. */
int mountfs_flush(struct mountfs *mount, uint64_t handle);
int mountfs_fsync(struct mountfs *mount, uint64_t handle);
/* The last close: publishes an O_TRUNC never written to, frees the handle. */
void mountfs_release(struct mountfs *mount, uint64_t handle);

/* ---- directories ------------------------------------------------------------------------ */

int mountfs_opendir(struct mountfs *mount, uint64_t id, struct mountfs_open_result *out);
/*
 * Lists entries from offset on, calling fill for each with the offset of the
 * next one. With plus, each entry carries one lookup (as from mountfs_lookup);
 * without, only entry->attr.st_ino (never 0) and the type bits of st_mode are
 * set. fill returns non-zero when the entry did not fit: listing stops there
 * and that entry's lookup is taken back. 0 or -errno.
 */
typedef int (*mountfs_fill_fn)(void *context, const char *name, const struct mountfs_entry *entry,
			       uint64_t next_offset);
int mountfs_readdir(struct mountfs *mount, uint64_t id, uint64_t handle, uint64_t offset, bool plus,
		    mountfs_fill_fn fill, void *context);
void mountfs_releasedir(struct mountfs *mount, uint64_t handle);

/* ---- the rest ----------------------------------------------------------------------------- */

int mountfs_statfs(struct mountfs *mount, struct statvfs *out);
/* The value's length (size 0: only that), -ERANGE, -ENODATA, -EOPNOTSUPP. */
ssize_t mountfs_getxattr(struct mountfs *mount, uint64_t id, const char *name, char *out, size_t size);
ssize_t mountfs_listxattr(struct mountfs *mount, uint64_t id, char *out, size_t size);

#endif
