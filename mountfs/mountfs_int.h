/*
 * mountfs_int — internals shared by the files of mountfs/ (not for fuse/ or
 * tools/: they use mountfs.h).
 *
 * Structure (one responsibility per file):
 *   mountfs.c    lifetime, the operations of mountfs.h (dispatch only)
 *   namespace.c  the mounted tree declared once: the node classes, resolving
 *                a name, listing a directory, attributes
 *   inode.c      the node table: one node per path the kernel knows (id =
 *                node address), stable st_ino, lookup counts, forget
 *   view.c       views (a branch live, or a branch as of a version), the
 *                snapshot cache, renderings of head/schema/log/stats files
 *   names.c      table names and the scratch-name rule
 *   errors.c     the log hook, .graphfs/errors
 *   commit.c     commits as the writing user, refusals recorded
 *   notify.c     refresh of other processes' commits, kernel cache
 *                invalidation after commits
 *   scratch.c    workspaces: scratch files, names being created, hidden names
 *   staging.c    the staging area of a branch (one transaction)
 *   open_file.c  open files: pinned readers, write handles, publishing
 *   rules.c      unlink, rename, mkdir and rmdir: what each name change means
 *   based.c      based writes: three-way merges of a write-back with what changed since
 *   reads.c      the version each process last read a table at (a write-back's base)
 *
 * Locks (outermost first; never take an earlier one holding a later one):
 *   1. open_file.lock        one open file's state (reads and writes on it)
 *   2. workspace.commit_lock a branch's staging commit
 *   3. workspace.lock        a branch's scratch / staged / pending lists
 *   4. mountfs.inodes.lock   the node table
 *   5. cache_lock, refresh_lock, errors_lock, files_lock (leaves)
 * The store has its own locks and is never called holding 3, 4 or 5.
 */
#ifndef GRAPHFS_MOUNTFS_INT_H
#define GRAPHFS_MOUNTFS_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "mountfs.h"
#include "store.h"

#define GRAPHFS_NAME_MAX MOUNTFS_NAME_MAX
#define GRAPHFS_PATH_MAX 1024                /* longest path inside the mount */
#define GRAPHFS_IO_MAX MOUNTFS_IO_MAX
#define GRAPHFS_LIVE_TIMEOUT 1.0             /* entry/attr seconds for live paths */
#define GRAPHFS_HISTORY_TIMEOUT 86400.0      /* entry/attr seconds under history/ */
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
	NODE_STAGED_SCHEMA_DIR, /* staging/schema */
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
	NODE_FEED_FILE,     /* .graphfs/feed */
	NODE_COMMIT_LINK,   /* history/<ULID> and history/@<time> -> @V */
	NODE_TAGS_DIR,      /* tags/ */
	NODE_TAG_ROOT,      /* tags/<tag>: the tagged branch as of the tag's version */
	NODE_GRAPH_DIR,             /* graph/ */
	NODE_GRAPH_TABLE_DIR,       /* graph/<Node>/ (table: Node) */
	NODE_GRAPH_NODE_DIR,        /* graph/<Node>/<id>/ (table: Node; name: the encoded id) */
	NODE_GRAPH_ROW_FILE,        /* graph/<Node>/<id>/row.json */
	NODE_GRAPH_OUT_DIR,         /* graph/<Node>/<id>/out/ */
	NODE_GRAPH_IN_DIR,          /* graph/<Node>/<id>/in/ */
	NODE_GRAPH_EDGES_FILE,      /* .../out/<Edge>.jsonl (table: Edge) */
	NODE_GRAPH_NEIGHBOURS_DIR,  /* .../out/<Edge>/ (table: Edge) */
	NODE_GRAPH_NEIGHBOUR_LINK,  /* .../out/<Edge>/<other-id> -> ../../../../<Other>/<other-id> */
	/* diff/, merge/, history/by-id/ (changes.c) */
	NODE_DIFF_DIR,              /* diff/ */
	NODE_DIFF_ROOT,             /* diff/<A>..<B>/ (name: "A..B") */
	NODE_DIFF_FILE,             /* diff/<A>..<B>/<Name>.jsonl (table: Name) */
	NODE_DIFF_TABLES_FILE,      /* diff/<A>..<B>/.tables.jsonl */
	NODE_MERGE_DIR,             /* merge/ */
	NODE_MERGE_ROOT,            /* merge/<source>/ (name: the source branch) */
	NODE_MERGE_STATUS_FILE,     /* merge/<source>/status */
	NODE_MERGE_TABLES_DIR,      /* merge/<source>/tables/ */
	NODE_MERGE_TABLE_FILE,      /* merge/<source>/tables/<Name>.jsonl (table: Name) */
	NODE_MERGE_CONFLICTS_DIR,   /* merge/<source>/conflicts/ */
	NODE_MERGE_CONFLICT_FILE,   /* merge/<source>/conflicts/<Name>.jsonl (table: Name) */
	NODE_MERGE_COMMIT_FILE,     /* merge/<source>/.commit: a write publishes the merge */
	NODE_BY_ID_DIR,             /* history/by-id/ */
	NODE_BY_ID_TABLE_DIR,       /* history/by-id/<Table>/ (table: Table) */
	NODE_BY_ID_FILE,            /* history/by-id/<Table>/<id>.jsonl (table: Table; name: the encoded id) */
};

/* Where a node's contents come from: a branch, live (version 0) or as of a version. */
struct view {
	char branch[JOURNAL_NAME_MAX + 1];
	uint64_t version;   /* 0: live */
	char tag[JOURNAL_NAME_MAX + 1];   /* "" or the tag this view shows (tags/<tag>/; version: its version) */
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
	uint64_t open_readers;       /* live table files: open read handles (each pins a version) */
	uint64_t version_target;     /* NODE_COMMIT_LINK: the version it points at */
	uint64_t time_us;            /* NODE_VERSION_ROOT: its commit's time, once known (0: not yet) */
	struct scratch *scratch;     /* scratch and staged files: the file this node names (a
				      * reference), so it answers after rm or a rename over it */
};

/* ---- scratch files, staged files, pending creations -------------------------- */

enum scratch_dir { SCRATCH_TABLES, SCRATCH_SCHEMA, SCRATCH_STAGING, SCRATCH_STAGED_SCHEMA };

struct workspace;

/* A private file of this mount: a scratch name, or a staged table. */
struct scratch {
	struct scratch *next;        /* the workspace's list of named scratches */
	struct scratch *previous;
	struct scratch *hash_next;   /* the workspace's index by (directory, name) */
	struct workspace *workspace;
	enum scratch_dir directory;
	char name[GRAPHFS_NAME_MAX + 1];
	char detached_from[JOURNAL_NAME_MAX + 1]; /* a table renamed to this name ("" if none) */
	int descriptor;              /* its backing file, open while held (holders > 0), else -1 */
	unsigned holders;            /* open files and operations using descriptor */
	mode_t mode;
	uint64_t base_version;       /* tables/: the branch version this mount showed when it was
				      * created (the base of a rename onto a table); 0: none known */
	uid_t uid;                   /* its owner and group: who created it (chown changes them) */
	gid_t gid;
	struct timespec mtime;
	struct timespec ctime;
	struct timespec atime;       /* as set (touch -a, utimensat); reads do not move it */
	_Atomic uint64_t references; /* the workspace list (while named) + open files + nodes bound to it */
	bool named;                  /* still in its directory */
	bool schema_staged;          /* a <Name>.json in staging/schema/ (table holds Name) */
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
	struct mountfs *mount;
	char branch[JOURNAL_NAME_MAX + 1];
	char directory[4096 + JOURNAL_NAME_MAX + 2]; /* "<scratch directory>/<branch>": backing files */
	pthread_mutex_t commit_lock;       /* held across a staging commit */
	pthread_mutex_t lock;              /* the lists below */
	struct scratch *scratches;         /* scratch names and staged tables (SCRATCH_STAGING + writer) */
	struct scratch **buckets;          /* the same, indexed by directory and name (scratch.c) */
	size_t bucket_count, named_count;
	struct pending *pendings;
	struct store_txn *staging;         /* NULL while nothing is staged */
	char hidden[WORKSPACE_HIDDEN_MAX][JOURNAL_NAME_MAX + 1]; /* tables renamed to a scratch name */
	struct timespec changed;           /* the last time a scratch name came or went, or this
					    * mount saw the branch change (directory times) */
};

/* ---- the mount ---------------------------------------------------------------- */

#define READS_KEPT 512

/* A process's last open of a live table file for reading (reads.c). */
struct read_record {
	pid_t pid;
	unsigned long long started;  /* the process's start time: a reused pid is another process */
	char branch[JOURNAL_NAME_MAX + 1];
	char table[JOURNAL_NAME_MAX + 1];
	uint64_t version;            /* the branch version it read (0: an empty record) */
	uint64_t used;               /* reads_clock when last noted */
};

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
	uint64_t sweep_sequence;     /* history and tag entries: valid while no gc began a sweep since */
	uint64_t last_used;
};

#define SNAPSHOT_CACHE_SIZE 32

struct node_private;

struct inode_table {
	pthread_mutex_t lock;
	struct node **buckets;
	size_t bucket_count;
	size_t count;
	struct node *root;
	struct node_private *all;    /* every node but the root, for freeing at unmount */
};

struct error_line {
	char text[1024];
};

struct open_file;

/* .graphfs/feed (feed.c): the store's commits as log lines, appended as they come. */
enum feed_state { FEED_EMPTY, FEED_OPEN, FEED_FAILED };
struct feed {
	pthread_mutex_t lock;
	enum feed_state state;
	int descriptor;              /* the private file of lines (OPEN), else -1 */
	uint64_t size;               /* bytes of whole lines in it */
	uint64_t through_version;    /* the newest version whose line is in it */
};

/* upkeep.c: the thread that applies the store's retention policy. */
enum upkeep_state { UPKEEP_IDLE, UPKEEP_RUNNING, UPKEEP_STOPPING, UPKEEP_STOPPED };
struct upkeep {
	pthread_mutex_t lock;
	pthread_cond_t wake;          /* a poke, or stopping */
	pthread_t thread;             /* RUNNING, STOPPING */
	enum upkeep_state state;
	bool poked;                   /* a commit since the last run */
	struct timespec flush_due;    /* CLOCK_MONOTONIC: when the tables written are flushed (a second
					 after the last poke: the writer stopped); zero: none due */
};

struct mountfs {
	struct store *store;
	char branch[JOURNAL_NAME_MAX + 1];   /* the mounted branch */
	char temporary_directory[4096];      /* where an edit handle's private copy lives */
	char scratch_directory[4096];        /* the backing files of scratch files, per branch */
	char host[256];                      /* for actors: user@host */
	bool read_only;
	bool log_rejections;
	uid_t uid;
	gid_t gid;
	mode_t umask;
	struct timespec mount_time;
	void (*log)(void *context, int priority, const char *message);
	void *log_context;
	struct mountfs_notify notify;

	struct inode_table inodes;

	pthread_mutex_t cache_lock;
	struct snapshot_entry cache[SNAPSHOT_CACHE_SIZE];
	uint64_t cache_tick;

	pthread_mutex_t refresh_lock;
	uint64_t last_refresh_ms;
	uint64_t refresh_interval_ms;

	pthread_mutex_t workspaces_lock;
	struct workspace *workspaces;

	pthread_mutex_t files_lock;          /* every open file, for freeing at unmount */
	atomic_int closed_unwritten;         /* open files closed without a write whose truncation waits
						for their release (open_file.c settle_deferred) */
	struct open_file *files;
	struct open_directory *directories;  /* every open directory listing (files_lock), freed at unmount:
						the kernel does not wait for RELEASEDIR */

	pthread_mutex_t reads_lock;          /* reads, reads_clock */
	struct read_record reads[READS_KEPT];
	uint64_t reads_clock;
	pthread_mutex_t errors_lock;
	struct error_line errors[GRAPHFS_ERRORS_KEPT];
	size_t errors_next;
	size_t errors_count;

	struct feed feed;
	struct upkeep upkeep;
	atomic_ulong upkeep_runs;            /* gcs the retention policy ran on this mount's thread */

	pthread_mutex_t log_lock;            /* the cached log of one view (view.c "the log") */
	struct view log_view;
	uint64_t log_store_version;
	uint64_t log_horizon;                /* a gc since the rendering ends the log earlier */
	struct buf log_bytes;
	struct ulid log_head;                /* the newest commit in it (zero: none): a new commit
					      * on the branch renders only what came after it */
	bool log_valid;

	atomic_uint_fast64_t requests;
	atomic_uint_fast64_t commits;
	atomic_uint_fast64_t refreshes;
	atomic_bool unreachable;        /* the last refresh found the object store out of reach: live
					   files show the last known state, writes fail (docs/MOUNT.md "Outages") */
	atomic_uint_fast64_t rejected;
};

/* ---- names.c ---------------------------------------------------------------- */

/* Whether table names are valid, and the parts of file names. */
bool names_table_valid(const char *name);
/* "X.jsonl" -> "X" (returns false if not of that form); suffix ".jsonl" or ".json". */
bool names_table_from_file(const char *file, const char *suffix, char out[JOURNAL_NAME_MAX + 1]);
/* The scratch-name rule: a name starting with '.', ending in '~', or not ending
 * in suffix is private to the mount until renamed onto a table name. */
bool names_is_scratch(const char *name, const char *suffix);
/* Whether name is a table name with a data extension other than ".jsonl" (".json", ".ndjson",
 * ".csv", ".tsv" or ".jsonl" in another case: People.json, T.CSV): in tables/ and staging/ such a
 * file would be a scratch file never stored, so its create is refused. table receives the name. */
bool names_is_data_spelling(const char *name, char table[JOURNAL_NAME_MAX + 1]);
/* A node id as a file name under graph/: % as %25, / as %2F, the ids . and .. as
 * %2E and %2E%2E. false when the name would be longer than GRAPHFS_NAME_MAX bytes. */
bool names_graph_id_encode(const uint8_t *id, size_t size, char out[GRAPHFS_NAME_MAX + 1]);
/* The id a graph/ file name names (only names names_graph_id_encode gives). */
bool names_graph_id_decode(const char *name, struct buf *out);

/* ---- errors.c ---------------------------------------------------------------- */

/* Logs one line through the configured hook. */
void mount_log(struct mountfs *mount, int priority, const char *format, ...)
	__attribute__((format(printf, 3, 4)));
/* Records a rejected write in .graphfs/errors (and the log when asked to). */
/* Says on the newest .graphfs/errors line of path (a new line if it is not the newest)
 * that the refused bytes are kept in kept_path. */
void mount_error_kept(struct mountfs *mount, const char *path, const char *kept_path);
void mount_error_record(struct mountfs *mount, const char *path, const struct error_info *error,
			int code);
/* Records a refusal described by a message (for refusals found by mountfs itself). */
void mount_error_refuse(struct mountfs *mount, const char *path, int code, const char *format, ...)
	__attribute__((format(printf, 4, 5)));
/* Renders .graphfs/errors. 0 or -ENOMEM. */
int mount_errors_render(struct mountfs *mount, struct buf *out);

/* ---- commit.c ---------------------------------------------------------------- */

/* "user@host" for uid, into out. */
void mount_actor(struct mountfs *mount, uid_t uid, char *out, size_t size);
/* Begins a transaction on branch whose commit names the caller as its actor. */
int mount_txn_begin(struct mountfs *mount, const char *branch, uid_t uid, struct store_txn **out,
		    struct error_info *error);
/* The commit message a write to a .commit file gives: its bytes without the
 * line ends they finish with, NUL-terminated in out (cut to out_size - 1). Returns its length. */
size_t mount_commit_message(const char *bytes, size_t size, char *out, size_t out_size);
/*
 * The mount's one commit door: every publish of the mount (a table file's close, a
 * schema, staging/.commit, rm and mv of tables, merge/.commit through store_merge)
 * goes through here or mount_merge_commit. Commits txn (the caller frees it); counts
 * the commit; a refusal is recorded in .graphfs/errors against the path the store's
 * error names, else path. result (may be NULL) receives the new version. 0 or -errno.
 */
int mount_commit(struct mountfs *mount, struct store_txn *txn, const char *message, const char *path,
		 struct store_commit_result *result);
/* The same for a write conditional on a table version (based.c): a lost condition is
 * -EAGAIN, not recorded, for the caller to merge again. */
int mount_commit_retryable(struct mountfs *mount, struct store_txn *txn, const char *message, const char *path,
			   struct store_commit_result *result);

/* ---- reads.c ------------------------------------------------------------------ */

/* Notes that pid read table of branch at version. */
void reads_note(struct mountfs *mount, pid_t pid, const char *branch, const char *table, uint64_t version);
/* The version pid last read table of branch at; 0: it did not (or it is another process now). */
uint64_t reads_base(struct mountfs *mount, pid_t pid, const char *branch, const char *table);

/* ---- based.c ------------------------------------------------------------------ */

/* A whole-table write and the branch version its writer read the table at. */
struct based_write {
	const char *branch;
	const char *table;
	const char *path;            /* for messages and .graphfs/errors */
	int descriptor;              /* the written bytes, from offset 0 */
	uint64_t base_version;       /* a branch version */
	uid_t uid;                   /* the actor */
};
/*
 * Publishes write as an overwrite of its table; if the table moved since the base,
 * merged three ways with the rows changed since (*merged set). 0; -EBUSY (a conflict,
 * or a base no longer kept) or -EINVAL (a bad row) with a .graphfs/errors line; -errno.
 */
int based_publish(struct mountfs *mount, const struct based_write *write, bool *merged);

/* ---- notify.c ---------------------------------------------------------------- */

/* Picks up other processes' commits, at most once per interval; invalidates live attrs. */
void mount_refresh(struct mountfs *mount);
/* The same at once, whatever the interval: an open's close-to-open refresh (one LIST in an
 * object store). Returns the refresh's result: 0, or -errno (the last known state stays). */
int mount_refresh_now(struct mountfs *mount);
/* After a commit on branch by this mount: drops cached live snapshots and tells the
 * kernel that the live files of the tables in names (and the branch's log) changed;
 * removed: those names went away (drop, rename, failed creation), so their cached
 * directory entries go too. Not to be called while the request holds a lock the
 * kernel needs for the notification (mountfs.h: struct mountfs_changes). */
void mount_invalidate_branch(struct mountfs *mount, const char *branch, const char *const *names,
			     size_t name_count, bool removed);
/* The cached entries of names in the branch's live directories other than the one or two a
 * request holds (held_parent, other_held_parent): safe while that request runs, so that
 * a name that went away in tables/ is gone from schema/ and heads/ before its reply. */
void mount_invalidate_entries_beside(struct mountfs *mount, const char *branch, const char *const *names,
				     size_t name_count, uint64_t held_parent, uint64_t other_held_parent);
uint64_t mount_now_ms(void);

/* ---- inode.c ---------------------------------------------------------------- */

int inode_table_init(struct inode_table *table, const struct view *root_view);
void inode_table_free(struct inode_table *table);
/* Finds or creates the child (parent, name) with the given identity; adds
 * `lookups` lookups. Returns the node or NULL (-ENOMEM). */
struct node *inode_get(struct mountfs *mount, struct node *parent, const char *name,
		       enum node_kind kind, const struct view *view, const char *table,
		       uint64_t lookups);
/* The node for an id the kernel sent. */
struct node *inode_from_id(struct mountfs *mount, uint64_t id);
uint64_t inode_id(struct mountfs *mount, const struct node *node);
/* The st_ino the node (parent, name) has or would have: a hash of what the path
 * means, never 0 or 1 (the root's). */
uint64_t inode_number(const struct node *parent, const char *name, enum node_kind kind,
		      const struct view *view);
/* Adds / drops references (open files); dropping may free a forgotten node. */
void inode_retain(struct mountfs *mount, struct node *node);
void inode_release(struct mountfs *mount, struct node *node);
void inode_forget(struct mountfs *mount, struct node *node, uint64_t count);
/* Moves a node to (parent, name), as rename(2) does; an existing node there is detached. */
void inode_move(struct mountfs *mount, struct node *node, struct node *parent, const char *name,
		enum node_kind kind, const char *table);
/* The hashed node (parent, name), retained (inode_release), or NULL. */
struct node *inode_find(struct mountfs *mount, struct node *parent, const char *name);
/* Detaches (parent, name) from the hash so the name resolves afresh (unlink). */
void inode_detach(struct mountfs *mount, struct node *parent, const char *name);
/* Calls visit for every hashed node (under the table lock: visit must not call back,
 * except inode_unhash_visited on the node it was given). */
void inode_visit(struct mountfs *mount, void (*visit)(struct node *node, void *context), void *context);
/* From a visit callback: unhashes the node it was given, which open files hold, so
 * that its name resolves to a new node while they keep this one (inode.c invariant 5). */
void inode_unhash_visited(struct mountfs *mount, struct node *node);
/* Counts a read handle of a live table file opened / closed on node. */
void inode_reader_opened(struct mountfs *mount, struct node *node);
void inode_reader_closed(struct mountfs *mount, struct node *node);
/* Whether node is a live table file unhashed while read handles hold it: its
 * attributes are those of the version they read (inode.c invariant 5). */
bool inode_pinned(struct mountfs *mount, const struct node *node);
/* Path of the node inside the mount ("tables/X.jsonl"), into out. */
void inode_path(struct mountfs *mount, const struct node *node, char *out, size_t size);

/* ---- namespace.c ---------------------------------------------------------------- */

/* A name resolved in a directory, before it has a node. */
struct child {
	enum node_kind kind;
	struct view view;
	char table[JOURNAL_NAME_MAX + 1];
	uint64_t version_target;
	uint64_t time_us;           /* NODE_VERSION_ROOT: its commit's time (0: unknown) */
	bool has_head;              /* head holds the table's head row, read while resolving */
	struct head_row head;
};

bool namespace_is_directory(enum node_kind kind);
/* What opening a node of this kind gives (node_classes[] says). */
enum node_content {
	CONTENT_NONE,       /* a directory or a link: not opened as a file */
	CONTENT_TABLE,      /* tables/<Name>.jsonl: pinned reads, write streams, edits */
	CONTENT_SCHEMA,     /* schema/<Name>.json: rendered; written as one schema operation */
	CONTENT_SCRATCH,    /* a private file of the mount */
	CONTENT_COMMIT,     /* staging/.commit: each write publishes the staging area */
	CONTENT_RENDERED,   /* read-only bytes rendered at open */
	CONTENT_FEED,       /* .graphfs/feed: grows while open (feed.c) */
};
enum node_content namespace_content_of(enum node_kind kind);
/* Whether files of this kind show a table's head row (table, head, dropped head). */
bool namespace_shows_head(enum node_kind kind);
/* Renders a node's bytes (schema and rendered files); the snapshot is opened
 * here unless the file is mount-wide. 0, -ENOENT, -errno. */
int namespace_render(struct mountfs *mount, const struct node *node, struct buf *out);
/* Whether a node of this kind may be written (on a live, writable mount). */
bool namespace_is_writable(const struct mountfs *mount, const struct node *node);
bool namespace_is_live(const struct node *node);
/* Resolves name in parent. 0, -ENOENT, -ENOTDIR, -ENAMETOOLONG, -errno. */
int namespace_resolve(struct mountfs *mount, struct node *parent, const char *name, struct child *out);
/* The head row a table, head or dropped-head file node shows. 0, -ENOENT, -errno. */
int namespace_head(struct mountfs *mount, const struct node *node, struct head_row *out);
/* Binds a scratch-file node to the scratch its name holds now (a reference). */
void namespace_bind_scratch(struct mountfs *mount, struct node *node);
/* Finds or creates the node of a resolved child with one lookup and fills entry. */
int namespace_entry(struct mountfs *mount, struct node *parent, const char *name,
		    const struct child *child, struct mountfs_entry *entry, struct node **out);

/* Whether a node is below graph/ (notify.c invalidates all of them after a commit). */
bool namespace_is_graph(enum node_kind kind);
/* Whether nodes of this kind are symbolic links (their target: namespace_readlink). */
bool namespace_is_link(enum node_kind kind);
/* The target of a link node. 0, -EINVAL (not a link), -errno. */
int namespace_readlink(struct mountfs *mount, const struct node *node, char *out, size_t size);

/* A directory listing, built at opendir. */
struct dir_entry {
	char name[GRAPHFS_NAME_MAX + 1];
	struct child child;
	bool dot;
};
/*
 * A listing holds its entries in two forms: rich ones (a whole struct child
 * each, first) and, after them, lean ones — a name and a kind, whose child is
 * the directory's own view and table — so that a directory of a million rows
 * (graph/<Node>/, history/by-id/<Node>/) costs a few bytes an entry, not a
 * kilobyte. Read entries with listing_size / listing_entry.
 */
struct lean_entry {
	uint32_t name;               /* offset of its NUL-terminated name in names */
	uint8_t kind;                /* enum node_kind */
};
struct dir_listing {
	struct dir_entry *entries;
	size_t count;
	size_t capacity;
	struct lean_entry *lean;
	size_t lean_count;
	size_t lean_capacity;
	struct buf names;
};

/* An opendir handle: its listing, in the mount's list of open directories. */
struct open_directory {
	struct open_directory *previous, *next;
	struct dir_listing listing;
};
int namespace_list(struct mountfs *mount, struct node *directory, struct dir_listing *out);
void listing_free(struct dir_listing *listing);
/* How many entries the listing has (rich and lean). */
size_t listing_size(const struct dir_listing *listing);
/* Entry i (< listing_size) of the listing of directory: returns its name and
 * sets *child (lean entries are built in *scratch) and *dot (. and ..). */
const char *listing_entry(const struct dir_listing *listing, const struct node *directory, size_t i,
			      struct child *scratch, const struct child **child, bool *dot);
/* The attributes every node shares (owner, mode, mount time), no store I/O. */
void namespace_attr_base(struct mountfs *mount, const struct node *node, struct stat *st);
/* Fills *st for node. 0, -ENOENT (gone), -errno. */
int namespace_attr(struct mountfs *mount, struct node *node, struct stat *st);
double namespace_timeout(const struct node *node);

/* ---- listing.c: building a listing (namespace.c's list loop makes the lister; the
 * class list callbacks add to it) ---- */
struct lister {
	struct dir_listing *listing;
	struct node *parent;         /* the directory listed */
	struct mountfs *mount;
	const char *suffix;          /* the file name suffix of the heads listed (namespace.c) */
	enum node_kind kind;         /* the kind of the heads listed (namespace.c) */
};
/* Adding one entry to a listing being built. NULL: out of memory. */
struct dir_entry *listing_add(struct lister *lister, const char *name, enum node_kind kind);
/* A lean entry (after every rich one): its child is the directory's view and table. 0 or -ENOMEM. */
int listing_add_lean(struct lister *lister, const char *name, enum node_kind kind);
struct node *listing_directory(const struct lister *lister);

/* ---- graph.c: the callbacks of graph/ (namespace.c's class table names them) ---- */

int graph_resolve_tables(struct mountfs *mount, struct node *parent, const char *name, struct child *out);
int graph_list_tables(struct mountfs *mount, struct node *directory, struct lister *lister);
int graph_resolve_nodes(struct mountfs *mount, struct node *parent, const char *name, struct child *out);
int graph_list_nodes(struct mountfs *mount, struct node *directory, struct lister *lister);
int graph_resolve_edge_tables(struct mountfs *mount, struct node *parent, const char *name, struct child *out);
int graph_list_edge_tables(struct mountfs *mount, struct node *directory, struct lister *lister);
int graph_resolve_neighbours(struct mountfs *mount, struct node *parent, const char *name, struct child *out);
int graph_list_neighbours(struct mountfs *mount, struct node *directory, struct lister *lister);
int graph_render_row(struct mountfs *mount, const struct node *node, struct store_snapshot *snapshot,
		     struct buf *out);
int graph_render_edges(struct mountfs *mount, const struct node *node, struct store_snapshot *snapshot,
		       struct buf *out);
int graph_link_target(struct mountfs *mount, const struct node *node, char *out, size_t size);

/* ---- changes.c: diff/, merge/ and history/by-id/ (namespace.c's class table names them) ---- */

/* Whether a node shows something derived from several versions (notify.c looks it up again after a commit). */
bool namespace_is_change_view(enum node_kind kind);
int changes_resolve_diffs(struct mountfs *mount, struct node *parent, const char *name, struct child *out);
int changes_resolve_diff(struct mountfs *mount, struct node *parent, const char *name, struct child *out);
int changes_list_diff(struct mountfs *mount, struct node *directory, struct lister *lister);
int changes_render_diff(struct mountfs *mount, const struct node *node, struct store_snapshot *snapshot,
			struct buf *out);
int changes_render_diff_tables(struct mountfs *mount, const struct node *node, struct store_snapshot *snapshot,
			       struct buf *out);
int changes_resolve_merges(struct mountfs *mount, struct node *parent, const char *name, struct child *out);
int changes_list_merges(struct mountfs *mount, struct node *directory, struct lister *lister);
int changes_render_merge_status(struct mountfs *mount, const struct node *node, struct store_snapshot *snapshot,
				struct buf *out);
int changes_resolve_merge_file(struct mountfs *mount, struct node *parent, const char *name, struct child *out);
int changes_list_merge_files(struct mountfs *mount, struct node *directory, struct lister *lister);
int changes_render_merge_file(struct mountfs *mount, const struct node *node, struct store_snapshot *snapshot,
			      struct buf *out);
/* A write to merge/<source>/.commit: publishes the merge into branch (the write's
 * bytes are the message). 0, -EBUSY (conflicts, recorded), -errno (recorded). */
int mount_merge_commit(struct mountfs *mount, const struct node *commit_file, const char *branch,
			 const char *message, size_t size, uid_t uid);
int changes_resolve_row_tables(struct mountfs *mount, struct node *parent, const char *name, struct child *out);
int changes_list_row_tables(struct mountfs *mount, struct node *directory, struct lister *lister);
int changes_resolve_row(struct mountfs *mount, struct node *parent, const char *name, struct child *out);
int changes_list_rows(struct mountfs *mount, struct node *directory, struct lister *lister);
int changes_render_row(struct mountfs *mount, const struct node *node, struct store_snapshot *snapshot,
		       struct buf *out);

/* ---- view.c ----------------------------------------------------------------- */

void view_cache_init(struct mountfs *mount);
void view_cache_free(struct mountfs *mount);
/* A retained snapshot for the view (release with store_snapshot_release). */
/* Drops the cache's history and tag snapshots (open files keep their own): after
 * such a file closes, only open files pin old versions, so the next gc can take them. */
void view_cache_drop_history(struct mountfs *mount);
int view_snapshot(struct mountfs *mount, const struct view *view, struct store_snapshot **out);
/* Drops cached live snapshots (after a commit or refresh). */
void view_cache_drop_live(struct mountfs *mount);
/* The live (not tombstoned) heads of snapshot, retained (view_heads_list_release). Built once
 * per cached live snapshot, so repeated listings cost no store reads. 0, -ENOMEM, -errno. */
int view_heads(struct mountfs *mount, struct store_snapshot *snapshot, struct heads_list **out);
void view_heads_list_release(struct heads_list *list);
/* store_snapshot_head, answered from the snapshot's heads list when one was built. */
int view_head(struct mountfs *mount, struct store_snapshot *snapshot, const char *table,
	      struct head_row *out);
/* Renderings of the read-only files (namespace.c's class table names them): a head
 * or dropped head, a schema, the log, and the mount-wide .graphfs files (which
 * take no snapshot: NULL). 0 or -errno; out holds the bytes. */
typedef int (*view_render_fn)(struct mountfs *mount, const struct node *node,
			      struct store_snapshot *snapshot, struct buf *out);
int view_render_head(struct mountfs *mount, const struct node *node, struct store_snapshot *snapshot,
		     struct buf *out);
int view_render_schema(struct mountfs *mount, const struct node *node, struct store_snapshot *snapshot,
		       struct buf *out);
int view_render_log(struct mountfs *mount, const struct node *node, struct store_snapshot *snapshot,
		    struct buf *out);
int view_render_stats(struct mountfs *mount, const struct node *node, struct store_snapshot *snapshot,
		      struct buf *out);
int view_render_errors(struct mountfs *mount, const struct node *node, struct store_snapshot *snapshot,
		       struct buf *out);
int view_render_version(struct mountfs *mount, const struct node *node, struct store_snapshot *snapshot,
			struct buf *out);
/* The tombstoned head heads/.dropped/<file> denotes. 0, -ENOENT, -errno. */
int view_dropped_head(struct store_snapshot *snapshot, const char *file, struct head_row *out);

/* ---- scratch.c ---------------------------------------------------------------- */

/* The workspace for a live branch (created on first use; never freed before unmount). */
struct workspace *scratch_workspace_get(struct mountfs *mount, const char *branch);
void scratch_workspaces_free(struct mountfs *mount);
/* The scratch directory a live directory node is (tables/, schema/, staging/). */
enum scratch_dir scratch_dir_of(const struct node *directory);
const char *scratch_dir_name(enum scratch_dir directory);
/* "tables/X.jsonl" or "branches/b/tables/X.jsonl" for messages. */
void scratch_path(struct mountfs *mount, const char *branch, enum scratch_dir directory,
		  const char *file, char *out, size_t size);
/* An unnamed temporary file in the mount's temporary directory, or -errno. */
int scratch_temporary_file(struct mountfs *mount);
/* The backing file's descriptor, opened if no one holds it (workspace lock NOT held):
 * >= 0 or -errno. Every hold is paired with a scratch_unhold. */
int scratch_hold(struct scratch *scratch);
void scratch_unhold(struct scratch *scratch);
/* Sets a staged file's write mode, moving its backing file to the directory that
 * records the mode (workspace lock held). */
void scratch_set_write_mode(struct scratch *scratch, enum store_write_mode mode);
uint64_t scratch_descriptor_size(int descriptor);
int scratch_write_all(int descriptor, const void *bytes, size_t size, uint64_t offset);
/* Copies a table's bytes into descriptor (from offset 0). */
int scratch_copy_table(struct store_table *table, int descriptor);
/* Feeds a temporary file's bytes into a writer. */
int scratch_feed(struct store_writer *writer, int descriptor, struct error_info *error);
/* Whether the live table's bytes are exactly size bytes hashing (XXH3-64) to hash
 * (descriptor -1) or the bytes of descriptor: 1 yes, 0 no (or no such table), -errno. */
int mount_table_is(struct mountfs *mount, const char *branch, const char *table, uint64_t size,
		   uint64_t hash, int descriptor);
/* Reads a whole temporary file into out (-EFBIG beyond limit). */
int scratch_read_all(int descriptor, struct buf *out, size_t limit);
/* The same, of a scratch's backing file (held meanwhile). */
int scratch_read_held(struct scratch *scratch, struct buf *out, size_t limit);

/* Scratch lookups for a live directory: the scratch with that name, retained, or NULL. */
struct scratch *scratch_find(struct mountfs *mount, const struct node *directory, const char *name);
void scratch_release(struct scratch *scratch);
/* In a workspace (its lock held): lookup, a new named scratch, unname, drop a reference. */
struct scratch *scratch_lookup(struct workspace *workspace, enum scratch_dir directory, const char *name);
struct scratch *scratch_new(struct mountfs *mount, struct workspace *workspace,
			    enum scratch_dir directory, const char *name, mode_t mode, int *rc);
void scratch_unname(struct workspace *workspace, struct scratch *scratch);
/* Renames a named scratch within its directory, replacing a scratch of that name. */
void scratch_rename(struct workspace *workspace, struct scratch *scratch, const char *new_name);
void scratch_put(struct scratch *scratch);
/* Visits scratch names (and staged tables) of a live directory, for readdir. */
int scratch_list(struct mountfs *mount, const struct node *directory,
		 int (*visit)(const char *name, const struct stat *st, void *context), void *context);
/* Fills st from a scratch file. */
void scratch_attr(const struct scratch *scratch, struct stat *st);
/* Makes tables/<name> of branch a scratch file holding the first size bytes of source,
 * replacing one of that name (a refused write's .rej). 0 or -errno. */
int scratch_keep(struct mountfs *mount, const char *branch, const char *name, int source, uint64_t size);
/* Creates a scratch file (O_CREAT on a scratch name). 0, -EEXIST, -errno. */
int scratch_create(struct mountfs *mount, const struct node *directory, const char *name, mode_t mode,
		   uid_t uid, gid_t gid);
/* setattr on a scratch (mode, times). */
void scratch_set_attr(struct scratch *scratch, const struct stat *st, int to_set);
/* The newest time a scratch name of the workspace came or went or its branch was
 * seen to change (0 if never); scratch_workspace_touch makes it now. */
struct timespec scratch_workspace_changed(struct workspace *workspace);
void scratch_workspace_touch(struct workspace *workspace);
/* Marks a scratch file changed now (mtime and ctime). */
void scratch_touch(struct scratch *scratch);
/* A write by writer: changed now, and, as the kernel does for a writer without CAP_FSETID (any
 * user but root), set-user-ID cleared, and set-group-ID when group execution is set. */
void scratch_written(struct scratch *scratch, uid_t writer);

/* Live table names being created by open handles, and their sizes. */
void scratch_pending_add(struct mountfs *mount, const char *branch, enum scratch_dir directory, const char *table);
void scratch_pending_remove(struct mountfs *mount, const char *branch, enum scratch_dir directory,
		    const char *table);
void scratch_pending_resize(struct mountfs *mount, const char *branch, enum scratch_dir directory,
		      const char *table, uint64_t size);
bool scratch_pending_find(struct mountfs *mount, const char *branch, enum scratch_dir directory,
		  const char *table, uint64_t *size);
int scratch_pending_list(struct mountfs *mount, const char *branch, enum scratch_dir directory,
		 int (*visit)(const char *table, uint64_t size, void *context), void *context);
/* Whether a live table name is hidden (renamed to a scratch name by this mount). */
bool scratch_hidden(struct mountfs *mount, const char *branch, const char *table);
void scratch_hide(struct mountfs *mount, const char *branch, const char *table, bool hide);

/* ---- staging.c ---------------------------------------------------------------- */

/* Rebuilds a staged file's writer from its bytes (commit_lock held). 0 or the
 * validation error (recorded). */
int staging_rebuild(struct mountfs *mount, struct workspace *workspace, struct scratch *scratch);
/* Frees the staging transaction when nothing is staged any more (commit_lock held). */
void staging_settle(struct workspace *workspace);
/* Starts the staging transaction over (commit_lock held): staged schemas changed,
 * so every staged file is validated again against them. */
void staging_reset(struct workspace *workspace);
/* After bytes were written to a staged schema file (commit_lock not held): once
 * the file is a complete JSON object, the schemas are staged again and checked.
 * 0 or the schema's error (recorded). */
int staging_schema_written(struct mountfs *mount, struct scratch *scratch);
/* A write to staging/.commit: publishes the staging area as one commit. */
int staging_commit(struct mountfs *mount, const char *branch, const char *message, size_t size,
		   uid_t uid);

/* ---- open_file.c ---------------------------------------------------------------- */

/* Frees every open file still open at unmount. */
void open_file_close_all(struct mountfs *mount);
/* open / create for a node. created: this open made the name. */
int open_file_open(struct mountfs *mount, struct node *node, int flags, bool created, uid_t uid,
	      struct open_file **out);
ssize_t open_file_read(struct mountfs *mount, struct open_file *file, char *out, size_t size, off_t offset);
/* writer: the uid of the process that writes (set-user-ID of scratch files, scratch_written). */
ssize_t open_file_write(struct mountfs *mount, struct open_file *file, const char *bytes, size_t size,
		   off_t offset, uid_t writer);
/* flush: publishes what this handle wrote since the last publish (close(2) sees the error). */
int open_file_flush(struct mountfs *mount, struct open_file *file);
int open_file_fsync(struct mountfs *mount, struct open_file *file);
/* release: publishes a pending truncate never written to, frees. */
void open_file_release(struct mountfs *mount, struct open_file *file);
/* setattr size through an open handle (or NULL: a path truncate, published now). */
int open_file_truncate(struct mountfs *mount, struct node *node, struct open_file *file, uint64_t size,
		  uid_t uid);
/* The node an open file was opened on. */
struct node *open_file_node(const struct open_file *file);
/* A reader of a live table file: true with the branch version it pinned. */
bool open_file_read_version(const struct open_file *file, uint64_t *version);
/* An O_TRUNC write of a live table file by a process that read the table at version:
 * its publish becomes a based write (based.c). */
void open_file_set_read_base(struct open_file *file, uint64_t version);
/* Attributes of what the handle reads: 0, or 1 if the handle has nothing of its
 * own to say (answer from the node), or -errno. */
int open_file_attr(struct mountfs *mount, struct open_file *file, struct stat *st);
/* Attributes of a pinned node (inode_pinned) as one of its read handles sees them:
 * 0, or 1 if no read handle holds it any more, or -errno. */
int open_file_attr_pinned(struct mountfs *mount, struct node *node, struct stat *st);

/* ---- feed.c ---------------------------------------------------------------- */

void feed_init(struct feed *feed);
void feed_free(struct feed *feed);
/* The feed's size after catching up with the store's version (feed.c invariant 2).
 * 0, or -errno when no file can hold it (size: what there is). */
int feed_size(struct mountfs *mount, uint64_t *size);
/* Reads the feed at offset; a read at or past its end catches up first. The bytes
 * copied (0 at the end), or -EIO, -errno. */
ssize_t feed_read(struct mountfs *mount, char *out, size_t size, off_t offset);

/* ---- upkeep.c ---------------------------------------------------------------- */

void upkeep_init(struct upkeep *upkeep);
/* After a commit (or a refresh that found others'): the policy is looked at soon, on the
 * upkeep thread (started here the first time, upkeep.c invariant 1). Read-only mounts: nothing. */
void upkeep_poke(struct mountfs *mount);
/* Stops the thread and waits for a running gc to end (unmount). */
void upkeep_stop(struct mountfs *mount);
void upkeep_free(struct upkeep *upkeep);

/* ---- rules.c ---------------------------------------------------------------- */

/* dropped receives the table dropped ("" if none), for invalidation after the reply. */
int rules_unlink(struct mountfs *mount, struct node *parent, const char *name, uid_t uid,
		 char dropped[JOURNAL_NAME_MAX + 1]);
/* changed receives the table names whose entries changed (for invalidation after the reply). */
int rules_rename(struct mountfs *mount, struct node *parent, const char *name, struct node *new_parent,
		 const char *new_name, uid_t uid, char changed[2][JOURNAL_NAME_MAX + 1]);
int rules_mkdir(struct mountfs *mount, struct node *parent, const char *name, uid_t uid);
int rules_rmdir(struct mountfs *mount, struct node *parent, const char *name, uid_t uid);

#endif
