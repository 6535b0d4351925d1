/*
 * fuse_int — internals of the graphfs FUSE daemon (the files in fuse/). Not a public
 * header: tools/cli/cmd_mount.c only calls graphfs_mount_main().
 *
 * Structure:
 *   daemon.c   options, session, daemonize, signals, logging, the error log,
 *              refresh of commits made by other processes, kernel cache
 *              invalidation after commits
 *   inode.c    the node table: one node per path the kernel knows (nodeid =
 *              node address), stable st_ino, lookup counts, forget
 *   view.c     views (a branch live, or a branch as of a version), the
 *              snapshot cache, rendering of head/schema/log/stats files, attrs
 *   ops.c      the low-level operations table
 *   files.c    open files: pinned readers, write handles (stream overwrite /
 *              merge, private-copy edits, schema writes), scratch files and
 *              the staging area
 *
 * Locks (outermost first; never take an earlier one holding a later one):
 *   1. open_file.lock        one open file's state (reads and writes on it)
 *   2. workspace.commit_lock a branch's staging commit
 *   3. workspace.lock        a branch's scratch / staged / pending lists
 *   4. mount.inodes.lock     the node table
 *   5. mount.cache_lock, mount.refresh_lock, mount.errors_lock (leaves)
 * The store has its own locks and is never called holding 3, 4 or 5.
 */
#ifndef GRAPHFS_FUSE_INT_H
#define GRAPHFS_FUSE_INT_H

#define FUSE_USE_VERSION 314

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "store.h"

#define GRAPHFS_NAME_MAX 255                 /* longest file name component */
#define GRAPHFS_PATH_MAX 1024                /* longest path inside the mount */
#define GRAPHFS_IO_MAX (1024 * 1024 - 4096)  /* max_read / max_write */
#define GRAPHFS_LIVE_TIMEOUT 1.0             /* entry/attr seconds for live paths */
#define GRAPHFS_HISTORY_TIMEOUT 86400.0      /* entry/attr seconds under history/ */
#define GRAPHFS_REFRESH_INTERVAL_MS 1000     /* default: at most one store_refresh per second */
#define GRAPHFS_BLOCK_CACHE (32u << 20)      /* default bytes of the store's block cache */
#define GRAPHFS_ERRORS_KEPT 256              /* lines kept in .graphfs/errors */
#define GRAPHFS_SCHEMA_MAX (1024 * 1024)     /* largest schema file accepted */

/* ---- nodes ------------------------------------------------------------------ */

enum node_kind {
	NODE_ROOT,          /* the mount root: live view of the mounted branch */
	NODE_BRANCH_ROOT,   /* branches/<b>: live view of b */
	NODE_VERSION_ROOT,  /* history/@V: a branch as of V */
	NODE_TABLES_DIR,
	NODE_HEADS_DIR,
	NODE_DROPPED_DIR,   /* heads/.dropped */
	NODE_SCHEMA_DIR,
	NODE_STAGING_DIR,
	NODE_HISTORY_DIR,
	NODE_BRANCHES_DIR,
	NODE_META_DIR,      /* .graphfs */
	NODE_TABLE_FILE,    /* tables/<Name>.jsonl (also a pending creation) */
	NODE_HEAD_FILE,     /* heads/<Name>.json */
	NODE_DROPPED_FILE,  /* heads/.dropped/<Name>.<incarnation>.json */
	NODE_SCHEMA_FILE,   /* schema/<Name>.json (also a pending creation) */
	NODE_LOG_FILE,
	NODE_STAGED_FILE,   /* staging/<Name>.jsonl */
	NODE_COMMIT_FILE,   /* staging/.commit */
	NODE_SCRATCH_FILE,  /* any other name in tables/, schema/ or staging/ */
	NODE_STATS_FILE,
	NODE_ERRORS_FILE,
	NODE_VERSION_FILE,
	NODE_COMMIT_LINK,   /* history/<ULID> -> @V */
};

/* Where a node's contents come from: a branch, live (version 0) or as of a version. */
struct view {
	char branch[JOURNAL_NAME_MAX + 1];
	uint64_t version;   /* 0: live */
};

struct scratch;

struct node {
	struct node *hash_next;      /* chain in the (parent, name) hash */
	struct node *parent;         /* retained (references) while this node lives */
	enum node_kind kind;
	struct view view;
	char name[GRAPHFS_NAME_MAX + 1];   /* the entry's name in its parent */
	char table[JOURNAL_NAME_MAX + 1];  /* table files: the table name; dropped: name */
	uint64_t st_ino;             /* stable: a hash of what the path means */
	uint64_t lookups;            /* the kernel's lookup count */
	uint64_t references;         /* open files, children, scratch bindings */
	uint64_t version_target;     /* NODE_COMMIT_LINK: the version it points at */
};

/* ---- scratch files, staged files, pending creations -------------------------- */

enum scratch_dir { SCRATCH_TABLES, SCRATCH_SCHEMA, SCRATCH_STAGING };

struct workspace;

/* A private file of this mount: a scratch name, or a staged table. */
struct scratch {
	struct scratch *next;
	struct workspace *workspace;
	enum scratch_dir directory;
	char name[GRAPHFS_NAME_MAX + 1];
	char detached_from[JOURNAL_NAME_MAX + 1]; /* a table renamed to this name ("" if none) */
	int descriptor;              /* an unnamed temporary file */
	mode_t mode;
	struct timespec mtime;
	uint64_t references;         /* the workspace list (while named) + open files */
	bool named;                  /* still in its directory */
	/* staged tables only (a <Name>.jsonl in staging/) */
	bool staged;
	char table[JOURNAL_NAME_MAX + 1];
	enum store_write_mode write_mode;
	struct store_writer *writer; /* in the workspace's staging transaction */
	bool writer_finished;
	bool writer_failed;
};

/* A table or schema name written by an open handle that the store does not have yet. */
struct pending {
	struct pending *next;
	enum scratch_dir directory;  /* SCRATCH_TABLES or SCRATCH_SCHEMA */
	char table[JOURNAL_NAME_MAX + 1];
	unsigned handles;
	uint64_t size;
};

#define WORKSPACE_HIDDEN_MAX 16

/* The mount's private state for one live branch. */
struct workspace {
	struct workspace *next;
	char branch[JOURNAL_NAME_MAX + 1];
	pthread_mutex_t commit_lock;       /* held across a staging commit */
	pthread_mutex_t lock;              /* the lists below */
	struct scratch *scratches;         /* scratch names and staged tables (SCRATCH_STAGING + writer) */
	struct pending *pendings;
	struct store_txn *staging;         /* NULL while nothing is staged */
	char hidden[WORKSPACE_HIDDEN_MAX][JOURNAL_NAME_MAX + 1]; /* tables renamed to a scratch name */
};

/* ---- the mount ---------------------------------------------------------------- */

/* The live heads of one snapshot in name order, shared by reference count. */
struct heads_list {
	atomic_uint references;
	bool sorted;                 /* strictly increasing names (binary search allowed) */
	size_t count;
	struct head_row rows[];
};

struct snapshot_entry {
	struct view view;
	struct store_snapshot *snapshot;
	struct heads_list *heads;    /* live views: built at the first listing, NULL before */
	uint64_t store_version;      /* live entries: valid while the store is at this version */
	uint64_t last_used;
};

#define SNAPSHOT_CACHE_SIZE 32

struct inode_table {
	pthread_mutex_t lock;
	struct node **buckets;
	size_t bucket_count;
	size_t count;
	struct node *root;
};

struct error_line {
	char text[1024];
};

struct mount {
	struct store *store;
	struct fuse_session *session;
	char store_path[4096];
	char mountpoint[4096];
	char branch[JOURNAL_NAME_MAX + 1];   /* the mounted branch */
	char temporary_directory[4096];      /* where scratch and private copies live */
	bool read_only;
	bool foreground;
	bool debug;
	uid_t uid;
	gid_t gid;
	struct timespec mount_time;

	struct inode_table inodes;

	pthread_mutex_t cache_lock;
	struct snapshot_entry cache[SNAPSHOT_CACHE_SIZE];
	uint64_t cache_tick;

	pthread_mutex_t refresh_lock;
	uint64_t last_refresh_ms;
	uint64_t refresh_interval_ms;

	pthread_mutex_t workspaces_lock;
	struct workspace *workspaces;

	pthread_mutex_t errors_lock;
	struct error_line errors[GRAPHFS_ERRORS_KEPT];
	size_t errors_next;
	size_t errors_count;

	pthread_mutex_t log_lock;            /* cached log rendering */
	struct view log_view;
	uint64_t log_store_version;
	struct buf log_bytes;
	bool log_valid;

	atomic_uint_fast64_t requests;
	atomic_uint_fast64_t commits;
	atomic_uint_fast64_t refreshes;
	atomic_uint_fast64_t rejected;
};

/* ---- daemon.c --------------------------------------------------------------- */

/* The `graphfs mount` subcommand: parses, mounts, serves until unmounted. Exit status. */
int graphfs_mount_main(int argc, char **argv);

/* Logs one line: stderr in the foreground, syslog otherwise. */
void mount_log(int priority, const char *format, ...) __attribute__((format(printf, 2, 3)));
/* Records a rejected write in .graphfs/errors (and the log). */
void mount_error_record(struct mount *mount, const char *path, const struct error_info *error,
			int code);
/* Renders .graphfs/errors. 0 or -ENOMEM. */
int mount_errors_render(struct mount *mount, struct buf *out);
/* Picks up other processes' commits, at most once per interval; invalidates live attrs. */
void mount_refresh(struct mount *mount);
/* After a commit on branch by this mount: drops cached live snapshots and tells the
 * kernel that the live files of the tables in names (and the branch's log) changed;
 * removed: those names went away (drop, rename, failed creation), so their cached
 * directory entries go too. Not to be called while the request holds a lock the
 * kernel needs for the notification (see daemon.c). */
void mount_invalidate_branch(struct mount *mount, const char *branch, const char *const *names,
			     size_t name_count, bool removed);
uint64_t mount_now_ms(void);

/* ---- inode.c ---------------------------------------------------------------- */

int inode_table_init(struct inode_table *table, const struct view *root_view);
void inode_table_free(struct inode_table *table);
/* Finds or creates the child (parent, name) with the given identity; adds
 * `lookups` kernel lookups. Returns the node or NULL (-ENOMEM). */
struct node *inode_get(struct mount *mount, struct node *parent, const char *name,
		       enum node_kind kind, const struct view *view, const char *table,
		       uint64_t lookups);
/* The node for a nodeid the kernel sent. */
struct node *inode_from_id(struct mount *mount, fuse_ino_t id);
fuse_ino_t inode_id(struct mount *mount, const struct node *node);
/* Adds / drops references (open files); dropping may free a forgotten node. */
void inode_retain(struct mount *mount, struct node *node);
void inode_release(struct mount *mount, struct node *node);
void inode_forget(struct mount *mount, struct node *node, uint64_t count);
/* Moves a node to (parent, name), as rename(2) does; an existing node there is detached. */
void inode_move(struct mount *mount, struct node *node, struct node *parent, const char *name,
		enum node_kind kind, const char *table);
/* The hashed node (parent, name), retained (inode_release), or NULL. */
struct node *inode_find(struct mount *mount, struct node *parent, const char *name);
/* Detaches (parent, name) from the hash so the name resolves afresh (unlink). */
void inode_detach(struct mount *mount, struct node *parent, const char *name);
/* Calls visit for every node (under the table lock: visit must not call back). */
void inode_visit(struct mount *mount, void (*visit)(struct node *node, void *context), void *context);
/* Path of the node inside the mount ("tables/X.jsonl"), into out. */
void inode_path(struct mount *mount, const struct node *node, char *out, size_t size);
bool node_is_directory(enum node_kind kind);

extern const struct fuse_lowlevel_ops graphfs_operations;

/* ---- view.c ----------------------------------------------------------------- */

void view_cache_init(struct mount *mount);
void view_cache_free(struct mount *mount);
/* A retained snapshot for the view (release with store_snapshot_release). */
int view_snapshot(struct mount *mount, const struct view *view, struct store_snapshot **out);
/* Drops cached live snapshots (after a commit or refresh). */
void view_cache_drop_live(struct mount *mount);
/* The live (not tombstoned) heads of snapshot, retained (heads_list_release). Built once
 * per cached live snapshot, so repeated listings cost no store reads. 0, -ENOMEM, -errno. */
int view_heads(struct mount *mount, struct store_snapshot *snapshot, struct heads_list **out);
void heads_list_release(struct heads_list *list);
/* store_snapshot_head, answered from the snapshot's heads list when one was built. */
int view_head(struct mount *mount, struct store_snapshot *snapshot, const char *table,
	      struct head_row *out);
/* Renders the file's bytes (heads, schema, log, stats, errors, version, dropped heads). */
int view_render(struct mount *mount, const struct node *node, struct store_snapshot *snapshot,
		struct buf *out);
/* Fills *st for node. 0, -ENOENT (gone), -errno. */
int view_attr(struct mount *mount, struct node *node, struct stat *st);
/* The same for table, head and dropped-head files from their head row (no store I/O). */
bool view_attr_has_head(enum node_kind kind);
int view_attr_head(struct mount *mount, struct node *node, const struct head_row *head, struct stat *st);
/* Whether table names are valid, and the parts of file names. */
bool table_name_valid(const char *name);
/* "X.jsonl" -> "X" (returns false if not of that form); suffix ".jsonl" or ".json". */
bool table_name_from_file(const char *file, const char *suffix, char out[JOURNAL_NAME_MAX + 1]);
double view_timeout(const struct node *node);
/* The workspace for a live branch (created on first use; never freed before unmount). */
struct workspace *workspace_get(struct mount *mount, const char *branch);
void workspaces_free(struct mount *mount);
/* The tombstoned head heads/.dropped/<file> denotes. 0, -ENOENT, -errno. */
int view_dropped_head(struct store_snapshot *snapshot, const char *file, struct head_row *out);

/* ---- files.c ---------------------------------------------------------------- */

struct open_file;

/* Frees every open file still open at unmount. */
void files_close_all(struct mount *mount);
/* open / create for a node; fills fi (fh, direct_io, keep_cache). */
int file_open(struct mount *mount, struct node *node, struct fuse_file_info *fi, bool created);
ssize_t file_read(struct mount *mount, struct open_file *file, char *out, size_t size, off_t offset);
ssize_t file_write(struct mount *mount, struct open_file *file, const char *bytes, size_t size,
		   off_t offset);
/* flush: publishes what this handle wrote since the last publish (close(2) sees the error). */
int file_flush(struct mount *mount, struct open_file *file);
int file_fsync(struct mount *mount, struct open_file *file);
/* release: publishes a pending truncate never written to, frees. */
void file_release(struct mount *mount, struct open_file *file);
/* setattr size through an open handle (or NULL: a path truncate). */
int file_truncate(struct mount *mount, struct node *node, struct open_file *file, uint64_t size);
/* The size an open write handle shows for its node (pending creations), or -1. */
int64_t file_pending_size(struct mount *mount, const struct node *node);

/* Directory operations on live views. */
/* dropped receives the table dropped ("" if none), for invalidation after the reply. */
int files_unlink(struct mount *mount, struct node *parent, const char *name,
		 char dropped[JOURNAL_NAME_MAX + 1]);
/* changed receives the table names whose entries changed (for invalidation after the reply). */
int files_rename(struct mount *mount, struct node *parent, const char *name, struct node *new_parent,
		 const char *new_name, char changed[2][JOURNAL_NAME_MAX + 1]);
/* Scratch / staged lookups for a live directory: the scratch with that name, retained, or NULL. */
struct scratch *scratch_find(struct mount *mount, const struct node *directory, const char *name);
void scratch_release(struct scratch *scratch);
/* Visits scratch names (and staged tables) of a live directory, for readdir. */
int scratch_list(struct mount *mount, const struct node *directory,
		 int (*visit)(const char *name, const struct stat *st, void *context), void *context);
/* Fills st from a scratch file. */
void scratch_attr(const struct scratch *scratch, struct stat *st);
/* Whether the live table name has an open write handle creating it; its size. */
bool pending_find(struct mount *mount, const char *branch, enum scratch_dir directory,
		  const char *table, uint64_t *size);
/* Visits live table names being created by open handles (readdir). */
int pending_list(struct mount *mount, const char *branch, enum scratch_dir directory,
		 int (*visit)(const char *table, uint64_t size, void *context), void *context);
/* Whether a live table name is hidden (renamed to a scratch name by this mount). */
bool workspace_hidden(struct mount *mount, const char *branch, const char *table);
/* Creates a scratch file (O_CREAT on a scratch name). */
int scratch_create(struct mount *mount, const struct node *directory, const char *name, mode_t mode);
/* setattr on a scratch (mode, times). */
void scratch_set_attr(struct scratch *scratch, const struct stat *st, int to_set);
/* Writes to staging/.commit: publishes the staging area. */
int staging_commit(struct mount *mount, const char *branch, const char *message, size_t size);

/* The mount whose request this is. */
static inline struct mount *request_mount(fuse_req_t request)
{
	return (struct mount *)fuse_req_userdata(request);
}

/* The mount, for code without a request (one mount per process). */
extern struct mount *graphfs_mount;

#endif
