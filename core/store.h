/*
 * store — the public API of libgraphfs (layer: store). This is the only
 * core header that fuse/ and tools/ include.
 *
 * A struct store is one process's handle on one store directory; it is
 * thread-safe. Reads go through snapshots: a snapshot pins one branch as of
 * one version for as long as it is retained (an open file keeps one), and
 * what it shows never changes (invariant 4). Writes go through transactions:
 * a transaction pins the snapshot its rows are validated against, collects
 * one or several table writers and schema/drop/rename operations, and
 * publishes them as ONE commit with store_txn_commit().
 *
 * Every function returns 0 (or a count/size) on success and a negative errno
 * on failure, filling struct error_info when it is given.
 *
 * Threads: every entry point may be called from any thread. A snapshot, an
 * open table and a transaction may be shared between threads; a writer is
 * meant to be fed by one thread at a time (concurrent calls on one writer
 * are serialized). Visitors (heads, log, branches, verify) are called
 * without any store lock held, so they may call back into the store.
 * Branch arguments may be NULL or "" for "main".
 *
 * Lifetimes: every snapshot (and table, which retains its snapshot) must be
 * released before store_close. Writers belong to their transaction: a
 * successful store_txn_commit, store_writer_discard and store_txn_free free
 * them; do not use a writer after any of those.
 */
#ifndef GRAPHFS_STORE_H
#define GRAPHFS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "error_info.h"
#include "journal.h"
#include "ulid.h"

#define STORE_LATEST UINT64_MAX   /* "the newest version" for snapshot and export */
#define STORE_FORMAT_VERSION 8    /* same as MANIFEST_FORMAT_VERSION: the format init creates */
#define STORE_FORMAT_OLDEST 6     /* the oldest format this graphfs opens, reads and writes */

struct store;
struct store_snapshot;
struct store_table;
struct store_txn;
struct store_writer;

struct store_options {
	bool read_only;             /* no recovery, no writes (-EROFS) */
	int codec;                  /* 0 zstd (default), 2 lz4 — for table fragments */
	size_t row_max;             /* longest accepted input line (bytes, without its "\n"); 0: 1 MiB. Longer: -EFBIG */
	uint64_t staged_max;        /* most input bytes ("\n" included) one transaction may stage; 0: unlimited. More: -ENOSPC */
	const char *actor;          /* recorded in commits; NULL: "$USER@host" */
	size_t block_cache;         /* bytes of verified manifest blocks kept in memory after the
				     * open (pager.h: hits are not counted as reads); 0: none */
	/* Where diagnostics go (damaged blocks, recovery notes; priority as syslog(3)).
	 * Process-wide: the last store_open that sets it wins. NULL: stderr. */
	void (*log)(void *context, int priority, const char *message);
	void *log_context;
	/* A read-write handle that committed runs the store's upkeep (store_keep_itself) when
	 * it is closed; a mount, which keeps the store on a thread of its own, turns that off. */
	bool no_upkeep_at_close;
	/* A read-write handle compacts a table right after the commit that makes a compaction
	 * due (core/store_compact.c), before store_txn_commit returns; a mount turns that off and
	 * runs store_compact_pending on its upkeep thread, so that no request waits for one. */
	bool no_compaction_at_commit;
};

/* ---- lifetime ------------------------------------------------------------- */

/* 0, or -EINVAL with a message when path is an object-store location
 * (s3://BUCKET/PREFIX) whose environment is incomplete (core/s3.h says
 * what it needs). store_init and store_open check it themselves. */
int store_location_check(const char *path, struct error_info *error);
/* 0 for a local store; -EPROTONOSUPPORT with a message saying that `what`
 * (a command: "mount", "gc", "snapshot", ...) does not work on an s3:// store
 * yet (docs/MOUNT.md "Stores in an object store"). */
int store_unsupported_remotely(const char *path, const char *what, struct error_info *error);
/* Creates an empty store (branch main, version 0) in path. 0, -EEXIST (not empty), -errno. */
int store_init(const char *path, struct error_info *error);
/* The same in store format format_version (STORE_FORMAT_OLDEST..STORE_FORMAT_VERSION, otherwise
 * -EINVAL with a message): a store an older graphfs can still open (docs/FORMAT.md §2). */
int store_init_format(const char *path, uint32_t format_version, struct error_info *error);
/* The store's format (docs/FORMAT.md §2): STORE_FORMAT_OLDEST..STORE_FORMAT_VERSION. */
uint32_t store_format_version(const struct store *store);
/* Opens (and, unless read_only, recovers) the store at path. options may be NULL
 * (all defaults). Returns 0, -EPROTO (format too old / too new: the message
 * says what to do), -ENOENT / -EINVAL (not a store), -ENOMEM, -EIO. */
int store_open(const char *path, const struct store_options *options, struct store **out,
	       struct error_info *error);
void store_close(struct store *store);
/*
 * Around a fork(2) that keeps the store (a mount daemonizing): pauses the
 * threads that renew its leases in an object store (the served branch, the
 * readers' pins) and the io layer's readaheads (io_threads_pause), then
 * resumes them in the process that goes on. Nothing else of the store runs
 * a thread while it is idle. store_threads_resume
 * returns 0 or -errno (a lease that is not renewed lapses).
 */
void store_threads_pause(struct store *store);
int store_threads_resume(struct store *store);
/* Picks up commits made by other processes; *changed (may be NULL) says whether
 * anything moved. Operations that mean "latest" (snapshot_open, txn_begin,
 * branches, commit_find) refresh by themselves. Returns 0 or -errno. */
int store_refresh(struct store *store, bool *changed);
/* store_refresh that sees every commit acknowledged anywhere before the call began (a mount's
 * open(2) of a live file: close-to-open); in an object store one LIST, not at most one per
 * 100 ms. Returns 0 or -errno. */
int store_refresh_now(struct store *store, bool *changed);
/* Whether rc says the object store is out of reach (refused, timed out, unreachable, cut),
 * not damage or a refusal. While it is, reads of a handle that knew a state use that last
 * known state (store_stale_reads counts them) and every write fails with that rc. */
bool store_error_is_unreachable(int rc);
uint64_t store_stale_reads(struct store *store);
/* The newest version the handle knows. */
uint64_t store_version(struct store *store);
const char *store_path(const struct store *store);
/* A directory on this host that belongs to this store and is never part of it (no command
 * reads, copies, verifies or collects it): "<store>/<purpose>" for a local store,
 * "<cache root>/<store id>/<purpose>" for an s3:// store (io.h); created if missing
 * (mode 0700). 0 or -errno (nothing else changed). */
int store_host_directory(struct store *store, const char *purpose, char *out, size_t size);

/* ---- snapshots (pinned reads) ------------------------------------------------ */

/* Pins branch at version (STORE_LATEST: newest). -ENOENT: no such branch, or not at
 * that version (before the branch existed, at or below the horizon, in the future).
 * The snapshot starts with one reference; release it with store_snapshot_release. */
int store_snapshot_open(struct store *store, const char *branch, uint64_t version,
			struct store_snapshot **out, struct error_info *error);
/* The state the commit of version left on the branch it was made on (deleted since or
 * not; store_snapshot_branch names it). -ENOENT: reclaimed by gc, or no such version. */
int store_snapshot_open_version(struct store *store, uint64_t version, struct store_snapshot **out,
				struct error_info *error);
void store_snapshot_retain(struct store_snapshot *snapshot);
void store_snapshot_release(struct store_snapshot *snapshot);   /* frees at the last release */
uint64_t store_snapshot_version(const struct store_snapshot *snapshot);
const char *store_snapshot_branch(const struct store_snapshot *snapshot);
/* The time of the commit the snapshot's branch head is (0 before the first commit).
 * Read once, lazily, from that commit record; never on the head-lookup path. */
uint64_t store_snapshot_time_us(const struct store_snapshot *snapshot);

/* The live head of table: 0, -ENOENT (no live table of that name, or an invalid name), -EIO. */
int store_snapshot_head(struct store_snapshot *snapshot, const char *table, struct head_row *out);
/* Live heads in name order, or tombstoned heads. visit returns non-zero to stop
 * (a negative value is returned as the result, a positive one gives 0). */
int store_snapshot_heads(struct store_snapshot *snapshot, bool tombstoned,
			 int (*visit)(const struct head_row *head, void *context), void *context);
/* Appends the canonical schema JSON of a live table. 0, -ENOENT, -EIO, -ENOMEM;
 * on error out may hold nothing new. */
int store_snapshot_schema(struct store_snapshot *snapshot, const char *table, struct buf *out);
/* Commit records of the branch, newest first, up to the snapshot's version.
 * visit as for store_snapshot_heads; the record is valid during the call only. */
int store_snapshot_log(struct store_snapshot *snapshot,
		       int (*visit)(const struct commit_record *record, void *context), void *context);
/* The record of the commit that made version, on whichever branch, into out
 * (journal_commit_record_free): 0; -ENOENT when version is 0, above the store's version or
 * reclaimed by gc; -EIO. */
int store_commit_at(struct store *store, uint64_t version, struct commit_record *out);
/* The store's log line of version (docs/MOUNT.md ".graphfs/feed"), appended to out: the
 * commit that made it, on whichever branch, as `log` renders it, or
 * {"version":V,"reclaimed":true} when gc reclaimed it. 0; -ENOENT when version is 0 or
 * above the store's version (store_version); -EIO, -ENOMEM (out may hold part of a line). */
int store_commit_line(struct store *store, uint64_t version, struct buf *out);
/* A hint before store_commit_line of version, version + 1, …: an s3:// store fetches their
 * records sixteen at a time (manifest_prefetch_commits); a local one does nothing. */
void store_prefetch_commit_lines(struct store *store, uint64_t version);
/* One version of a branch's log without its record: what history/ lists. */
struct store_log_version {
	uint64_t version;
	uint64_t time_us;      /* its commit's time */
	bool reclaimed;        /* gc reclaimed it (the last one visited) */
};
/* The versions store_snapshot_log visits, newest first, read from the
 * version index: about one page per 256 versions, not one per commit.
 * visit as for store_snapshot_heads. */
int store_snapshot_log_versions(struct store_snapshot *snapshot,
				int (*visit)(const struct store_log_version *version, void *context),
				void *context);

/* Table contents as of the snapshot: exact size, reads at any offset. open: 0,
 * -ENOENT, -EIO, -ENOMEM; the table retains the snapshot until store_table_close.
 * pread returns the bytes copied (0 at or past the end) or -EIO / -ENOMEM. */
int store_table_open(struct store_snapshot *snapshot, const char *table, struct store_table **out);
uint64_t store_table_size(const struct store_table *table);
ssize_t store_table_pread(struct store_table *table, void *out, size_t size, uint64_t offset);
void store_table_close(struct store_table *table);

/* ---- graph reads (docs/MOUNT.md "The graph"): by id, never a scan ----------------- */

enum store_edge_end { STORE_EDGE_OUT = 0, STORE_EDGE_IN = 1 };
/* What head_row.kind holds (the schema's kind). */
enum store_table_kind { STORE_NODE_TABLE = 0, STORE_EDGE_TABLE = 1 };  /* edges by their from / by their to */

/* Whether id is a row of node table table: 1, 0 (no such row or table), or -errno. O(log rows). */
int store_graph_node_exists(struct store_snapshot *snapshot, const char *table, const void *id, size_t id_size);
/* Appends the canonical line of row id of table. 0, -ENOENT, -errno. */
int store_graph_node_row(struct store_snapshot *snapshot, const char *table, const void *id, size_t id_size,
			 struct buf *out);
/* Every row id of table in id order; visit returns non-zero to stop (as store_snapshot_heads). */
int store_graph_node_ids(struct store_snapshot *snapshot, const char *table,
			 int (*visit)(const uint8_t *id, size_t id_size, void *context), void *context);
/* The node tables an edge table joins. 0, -ENOENT (no such live edge table), -errno. */
int store_graph_edge_ends(struct store_snapshot *snapshot, const char *edge_table, char from[JOURNAL_NAME_MAX + 1],
			  char to[JOURNAL_NAME_MAX + 1]);
/* The live edge tables whose from (STORE_EDGE_OUT) or to (STORE_EDGE_IN) is node_table, in name order,
 * with the node table at their other end. visit as above. */
int store_graph_edge_tables(struct store_snapshot *snapshot, const char *node_table, enum store_edge_end end,
			    int (*visit)(const char *edge_table, const char *other_table, void *context),
			    void *context);
/* The edges of node at one end of edge_table, in edge-id order, each with the node at its other end:
 * O(log edges + answer) through the adjacency index. visit as above. */
int store_graph_edges(struct store_snapshot *snapshot, const char *edge_table, enum store_edge_end end,
		      const void *node, size_t node_size,
		      int (*visit)(const uint8_t *edge, size_t edge_size, const uint8_t *other, size_t other_size,
				   void *context),
		      void *context);
/* Appends the canonical lines of those edges, in edge-id order. 0 or -errno. */
int store_graph_edge_rows(struct store_snapshot *snapshot, const char *edge_table, enum store_edge_end end,
			  const void *node, size_t node_size, struct buf *out);

/* ---- names and time (core/store_names.c) ----------------------------------------- */

/* What --at and history/@… name (docs/MOUNT.md "History"). */
enum store_at_kind { STORE_AT_VERSION = 1, STORE_AT_TIME, STORE_AT_TAG };
struct store_at {
	enum store_at_kind kind;
	uint64_t version;                 /* STORE_AT_VERSION: 1.. */
	uint64_t time_us;                 /* STORE_AT_TIME */
	char tag[JOURNAL_NAME_MAX + 1];   /* STORE_AT_TAG */
};
/* "12" or "@12"; an RFC 3339 time ("2026-12-01T08:00:00Z", fractions, +hh:mm) or a
 * date ("2026-12-01" = its 00:00:00Z); otherwise a tag name. 0 or -EINVAL. */
int store_at_parse(const char *text, struct store_at *out, struct error_info *error);
/* A time or date alone (the form of history/@<time>). 0 or -EINVAL. */
int store_time_parse(const char *text, uint64_t *time_us);
/* The version of branch's state at time_us: the newest commit of its history
 * (ancestry included) at or before it. O(log versions). 0, -ENOENT. */
int store_version_at_time(struct store *store, const char *branch, uint64_t time_us, uint64_t *version,
			  struct error_info *error);
/* store_snapshot_open of what at names (NULL: the latest); a tag names its own
 * branch, so branch is then ignored. */
int store_snapshot_open_at(struct store *store, const char *branch, const char *at,
			   struct store_snapshot **out, struct error_info *error);

/* Compare-and-swap of a write (--if-version V, --if-commit ULID): refused with
 * -EBUSY, naming the expected and the actual value, and nothing published. */
struct store_condition {
	bool has_version;
	uint64_t version;      /* the store's version must still be this */
	bool has_commit;
	struct ulid commit;    /* the branch's head commit must still be this */
};
/* Either text may be NULL (no condition). 0 or -EINVAL. */
int store_condition_parse(const char *if_version, const char *if_commit, struct store_condition *out,
			  struct error_info *error);

struct store_tag_info {
	char name[JOURNAL_NAME_MAX + 1];
	char branch[JOURNAL_NAME_MAX + 1];   /* the branch it was made on */
	uint64_t version;                    /* the version of the commit it names */
	char commit[ULID_TEXT_SIZE];
	uint64_t time_us;                    /* when it was made */
	char actor[256];
	char message[4096];
};
/* Tags in name order; visit as for store_snapshot_heads. */
int store_tags(struct store *store, int (*visit)(const struct store_tag_info *tag, void *context), void *context);
/* Appends the tag as one JSON line: {"tag","version","branch","commit","time","actor","message"}. */
int store_tag_render_json(const struct store_tag_info *tag, struct buf *out);
/* Reads tag name into out (may be NULL): 0, -ENOENT, -errno. */
int store_tag_find(struct store *store, const char *name, struct store_tag_info *out);
/* Tags branch as of version (STORE_LATEST: its head) as name; actor NULL: the
 * store's. -EEXIST (tags never move), -ENOENT (no such branch or version, or no
 * commit there), -EINVAL (name). */
int store_tag_create(struct store *store, const char *name, const char *branch, uint64_t version,
		     const char *message, const char *actor, const struct store_condition *condition,
		     struct error_info *error);
/* store_tag_create with the tag's time given (0: now): a replayed tag's (load of a
 * `dump --all` stream). */
int store_tag_create_at_time(struct store *store, const char *name, const char *branch, uint64_t version,
			     const char *message, const char *actor, uint64_t time_us,
			     const struct store_condition *condition, struct error_info *error);
/* condition: its version only (a tag is on no branch). */
int store_tag_delete(struct store *store, const char *name, const struct store_condition *condition,
		     struct error_info *error);
/* A snapshot of what tag names: the tagged branch as of the tag's version. */
int store_snapshot_open_tag(struct store *store, const char *tag, struct store_snapshot **out,
			    struct error_info *error);

/* ---- commits and branches ------------------------------------------------------ */

/* Finds a commit by ULID text: its version and branch (either may be NULL). -ENOENT / -EINVAL. */
int store_commit_find(struct store *store, const char *ulid_text, uint64_t *version,
		      char branch[JOURNAL_NAME_MAX + 1]);

struct store_branch_info {
	char name[JOURNAL_NAME_MAX + 1];
	char forked_from[JOURNAL_NAME_MAX + 1];
	uint64_t fork_point;       /* the version of forked_from it forked at (its head then) */
	uint64_t created_version;  /* the store's version when it was created */
	uint64_t head_version;
	char head_commit[ULID_TEXT_SIZE];  /* "" before the first commit */
};
/* Branches of the latest root in name order; visit as for store_snapshot_heads. */
int store_branches(struct store *store,
		   int (*visit)(const struct store_branch_info *branch, void *context), void *context);
/* condition (NULL: none) is checked against the store and branch from. */
int store_branch_create(struct store *store, const char *name, const char *from,
			const struct store_condition *condition, struct error_info *error);
/* Creates branch name at a retained commit: at is a commit ULID, a store version (the
 * commit that made it) or a tag; the branch's history is that commit's first-parent chain
 * (a deleted branch comes back this way until gc reclaims its commits). -EEXIST, -EINVAL
 * (name), -ENOENT (no such commit kept), -errno. */
int store_branch_create_at(struct store *store, const char *name, const char *at,
			   const struct store_condition *condition, struct error_info *error);
/* Deletes branch name. -EBUSY if it is mounted_branch, main, or served by a running
 * mount in any process (the message says where it is mounted), or condition (NULL:
 * none) fails; -ENOTEMPTY if a branch forked from it still exists, or (unless force)
 * if no other branch or tag holds its head commit (the message counts its commits
 * merged nowhere); -ENOENT. */
int store_branch_delete(struct store *store, const char *name, const char *mounted_branch, bool force,
			const struct store_condition *condition, struct error_info *error);
/* Records, until store_close, that this process serves branch (a mount at where),
 * so that no other process deletes it; the record goes when the process dies.
 * 0, -ENOENT (no such branch), -EBUSY (this handle serves one already), -errno. */
int store_serve_branch(struct store *store, const char *branch, const char *where,
		       struct error_info *error);
/* 1 if a running mount serves branch (where: "PID MOUNTPOINT" of one of them), 0 if
 * none does, or -errno. Stale records of dead processes are removed. */
int store_branch_served(struct store *store, const char *branch, char *where, size_t where_size);

/* ---- writing ---------------------------------------------------------------- */

enum store_write_mode { STORE_OVERWRITE = 0, STORE_MERGE = 1 };

/* Starts a transaction on branch, pinning its latest snapshot. 0, -ENOENT (no such
 * branch), -EROFS (read-only store), -ENOMEM. */
int store_txn_begin(struct store *store, const char *branch, struct store_txn **out,
		    struct error_info *error);
/* The actor recorded in this transaction's commits instead of the store's
 * (a mount's writing user, "name@host"). 0, or -EINVAL (NULL or too long). */
int store_txn_set_actor(struct store_txn *txn, const char *actor);
/* Staging mode: edge endpoints missing from the snapshot are checked at commit
 * against the snapshot plus every staged table, instead of at write. */
void store_txn_defer_endpoint_checks(struct store_txn *txn, bool defer);
/* Where the next commit comes from when it replays another store's commit (load of a
 * `dump --all` stream, core/store_dump_all.c): its id (the version part is always the new
 * version's; zero: a new id), its time (0: now; otherwise never earlier than the time of the
 * store's newest commit: the caller keeps commit times in version order), and whether
 * it may publish no change (a merge commit that changed nothing). Applies to the next commit
 * only. 0, or -EBUSY when an id is set after a writer spilled rows (set it first). */
struct store_commit_origin {
	struct ulid id;
	uint64_t time_us;
	bool empty_allowed;
};
int store_txn_set_origin(struct store_txn *txn, const struct store_commit_origin *origin);
/* The next commit is a based write's (docs/MOUNT.md "Based writes"): version is what its writer
 * read. Its log line says "based_on":version (a store of format 6 cannot record it: nothing
 * is). Applies to the next commit only. */
void store_txn_set_based_on(struct store_txn *txn, uint64_t version);
/* Records commit_text (a retained commit's ULID) as the second parent of the next commit.
 * 0, -ENOENT (no such commit), -EINVAL. */
int store_txn_set_merge_commit(struct store_txn *txn, const char *commit_text, struct error_info *error);
/* The snapshot the transaction validates against (not retained for the caller:
 * valid until the transaction's next successful commit or its free). */
struct store_snapshot *store_txn_snapshot(struct store_txn *txn);
/* The next commit of txn publishes only if condition holds (NULL: none). */
void store_txn_set_condition(struct store_txn *txn, const struct store_condition *condition);

/*
 * Opens a writer for one table in the transaction (at most one per table).
 * based_on_version non-zero makes the publish fail with -EBUSY if the table
 * is no longer at that version (in-place edits). A missing table is created
 * at commit, its schema inferred from the rows; so is the schema of a table
 * that has no rows and an empty node schema (`touch`), in the same commit. path names the input in
 * error messages (e.g. "tables/Person.jsonl" or the imported file; NULL: the
 * table name). A writer of an existing table validates against its schema (or
 * the schema of a SCHEMA operation earlier in this transaction). Returns 0,
 * -EINVAL (invalid table name), -EBUSY (the table already has a writer, or is
 * written through a rename, in this transaction), -EIO, -ENOMEM; on error the
 * transaction is unchanged.
 */
int store_txn_writer(struct store_txn *txn, const char *table, enum store_write_mode mode,
		     uint64_t based_on_version, const char *path, struct store_writer **out,
		     struct error_info *error);
/*
 * Streams bytes into the writer; every line completed by these bytes is
 * parsed and validated now (syntax, types, ids, duplicate ids in an
 * overwrite, edge endpoints unless deferred), and so is a last line without
 * "\n" as soon as it is a complete JSON object (or cannot become one). Returns 0, -EINVAL (error
 * names path and line), -EFBIG (line over row_max), -ENOSPC (staged_max).
 * After an error the writer refuses further bytes with the same error.
 */
int store_writer_write(struct store_writer *writer, const void *bytes, size_t size,
		       struct error_info *error);
/* Ends the input: a last line without "\n" is a row if it is a complete JSON
 * object (it was validated by the write that completed it), else -EINVAL
 * (sticky, like write errors); a commit refuses such a writer too. */
int store_writer_finish(struct store_writer *writer, struct error_info *error);
uint64_t store_writer_lines(const struct store_writer *writer);
/* Drops this writer's staged rows from the transaction and frees the writer. */
void store_writer_discard(struct store_writer *writer);
/* From now on the writer's commit requires its table to be at table_version still
 * (-EBUSY otherwise), as store_txn_writer's based_on_version. */
void store_writer_require_version(struct store_writer *writer, uint64_t table_version);

/*
 * Stages a schema operation: creates table (empty) or changes its schema
 * compatibly. The schema is parsed and, for an existing table, checked for
 * compatibility now. Returns 0, -EINVAL (invalid name, schema or change; error
 * names "schema/<table>.json" and the line), -EIO, -ENOMEM.
 */
int store_txn_schema(struct store_txn *txn, const char *table, const char *json, size_t size,
		     struct error_info *error);
/* Stage a drop / a rename, as the table stands after the operations already
 * staged. -EINVAL (invalid name, rename onto itself), -ENOENT (no such table),
 * -EEXIST (rename onto a live name). Refusals that depend on other tables
 * (a node table a live edge table references: -EBUSY) come from the commit. */
int store_txn_drop(struct store_txn *txn, const char *table, struct error_info *error);
int store_txn_rename(struct store_txn *txn, const char *from, const char *to,
		     struct error_info *error);
/* Number of operations staged (writers with input, schema, drop, rename). */
size_t store_txn_size(const struct store_txn *txn);

struct store_commit_result {
	uint64_t version;
	char commit[ULID_TEXT_SIZE];
	uint64_t time_us;
};

/*
 * Publishes everything staged as one commit (merges of zero lines are left
 * out; an overwrite of zero lines empties the table). message NULL or "":
 * a summary such as "overwrite Person (3 rows)". Returns 0 (the transaction
 * is then empty and pinned to the snapshot it published), -ENODATA (nothing
 * staged), -EINVAL (a failed writer's error, a last line that is not a
 * complete JSON object, a dangling deferred endpoint: error names path and
 * line), -EBUSY (a writer is being written right now, a based-on version
 * moved, the schema changed under the rows), -ENOENT, -EEXIST, -EIO. On error
 * nothing is published and the transaction keeps every operation: commit it
 * again, leave a writer out (store_writer_discard) and commit, or free it. A
 * writer whose rows a refused commit already sealed takes no more input. Once
 * the commit is durable it is reported as done: nothing after the commit
 * point undoes it.
 */
int store_txn_commit(struct store_txn *txn, const char *message, struct store_commit_result *result,
		     struct error_info *error);
void store_txn_free(struct store_txn *txn);   /* abandons anything not committed */

/* ---- whole operations for the CLI ------------------------------------------------ */

/* Progress callback for long operations: done and total bytes (total 0: unknown). */
typedef void (*store_progress_fn)(uint64_t done, uint64_t total, void *context);

/* Streams file ("-": standard input) through one writer and commits
 * it; errors as store_txn_writer / store_writer_write / store_txn_commit, plus
 * -errno of open/read (error names the file). Nothing is published on error. */
int store_import(struct store *store, const char *branch, const char *table, const char *file,
		 enum store_write_mode mode, const char *message, const struct store_condition *condition,
		 store_progress_fn progress,
		 void *progress_context, struct store_commit_result *result, struct error_info *error);
/* Writes the table's bytes (as tables/TABLE.jsonl shows them) to fd, at version
 * (STORE_LATEST: newest); progress (NULL: none) hears the bytes written of the table's size.
 * 0, -ENOENT (branch, version or table), -EIO, or the -errno of write(2); on error part of
 * the bytes may have been written. */
int store_export(struct store *store, const char *branch, const char *table, uint64_t version,
		 int fd, store_progress_fn progress, void *progress_context, struct error_info *error);
/*
 * The whole graph of branch at version (STORE_LATEST: newest) as NDJSON on fd:
 * one {"schema":…} line per table (node tables first), then every row in an
 * envelope, {"type":<Node>,"data":<row>} and {"edge":<Edge>,"from":…,"to":…,
 * "data":{"id":…,…}} (core/store_dump.c). 0 or -errno with error set.
 */
int store_dump(struct store *store, const char *branch, uint64_t version, int fd, store_progress_fn progress,
	       void *progress_context, struct error_info *error);
/*
 * Publishes a dump file ("-": standard input) as ONE commit on branch, every
 * table it names overwritten; schema lines are optional (inferred). Errors
 * name the input line. 0 or -errno with error set; nothing published then.
 * A dump --all stream (replay non-NULL) is replayed instead, into a store that has no
 * commit yet; an error then leaves what was replayed before it.
 */
/* Hears a replayed commit's new id where it differs from the stream's (versions reclaimed
 * before the dump renumber what follows). */
typedef void (*store_mapped_fn)(const char *from, const char *to, void *context);
/* A load of a `dump --all` stream (store_load finds its header on the first line):
 * mapped in, all and commits out. */
struct store_load_replay {
	store_mapped_fn mapped;       /* NULL: none */
	void *mapped_context;
	bool all;                     /* the input was a dump --all stream, replayed (branch,
					 message and condition are not used then) */
	uint64_t commits;             /* commits replayed */
};
/*
 * Every retained commit of the store, in version order, then its branches, tags and an
 * end line, as the NDJSON stream of docs/FORMAT.md §24 (core/store_dump_all.c): what a
 * load into a new store replays, keeping history. Progress counts versions. 0 or -errno
 * with error set.
 */
int store_dump_all(struct store *store, int fd, store_progress_fn progress, void *progress_context,
		   struct error_info *error);
int store_load(struct store *store, const char *branch, const char *file, const char *message,
	       const struct store_condition *condition, store_progress_fn progress, void *progress_context,
	       struct store_load_replay *replay, struct store_commit_result *result, struct error_info *error);

/*
 * One commit on branch whose tables and schemas (drops and renames included)
 * are exactly those of the branch as of version (core/store_revert.c); history
 * is kept. message NULL: "revert to version V". -ENODATA when nothing differs
 * (nothing published), -ENOENT (no such branch or version), -EBUSY (condition),
 * or the commit's errors.
 */
int store_revert(struct store *store, const char *branch, uint64_t version, const char *message,
		 const struct store_condition *condition, struct store_commit_result *result,
		 struct error_info *error);

/* ---- diffs (core/store_diff.c; docs/MOUNT.md "Diffs") ------------------------------------ */

/* A snapshot of what text names: a branch's head if a branch has that name,
 * else what --at names on branch (@V or V, a time, a tag). 0, -ENOENT, -EINVAL. */
int store_snapshot_open_named(struct store *store, const char *branch, const char *text,
			      struct store_snapshot **out, struct error_info *error);
/* One JSON line per table created, dropped, renamed or whose schema changed
 * from a to b, in name order: {"op":"create"|"drop"|"rename"|"schema","table":…}
 * ("from" for a rename; "before"/"after" schemas). visit returns non-zero to stop. */
int store_diff_tables(struct store_snapshot *a, struct store_snapshot *b,
		      int (*visit)(const char *line, size_t size, void *context), void *context);
/* The tables (b's names; a's for those b dropped) whose rows differ, in name order. */
int store_diff_names(struct store_snapshot *a, struct store_snapshot *b,
		     int (*visit)(const char *table, void *context), void *context);
/* One line per row of table that differs, in id order:
 * {"op":"insert"|"update"|"delete","id":…,"before":row|null,"after":row|null}.
 * O(rows changed × log rows). 0, -ENOENT (no such table in a or b), -errno. */
int store_diff_rows(struct store_snapshot *a, struct store_snapshot *b, const char *table,
		    int (*visit)(const char *line, size_t size, void *context), void *context);

/*
 * One JSON line per version of the snapshot's branch in which row id of table
 * changed, newest first (core/store_row_history.c):
 * {"version":V,"commit":"ULID","time":"…","op":"insert"|"update"|"delete","row":ROW|null}.
 * The table is followed by stable id through renames (a dropped table: its
 * last incarnation of that name). 0, -ENOENT (no such table), -errno.
 */
int store_row_history(struct store_snapshot *snapshot, const char *table, const void *id, size_t id_size,
		      int (*visit)(const char *line, size_t size, void *context), void *context);

/* ---- merging (core/store_merge.c; docs/MOUNT.md "Merging") -------------------------------- */

enum store_merge_outcome {
	STORE_MERGE_UP_TO_DATE = 1,   /* nothing to merge: nothing published */
	STORE_MERGE_FAST_FORWARD,     /* dest was the merge base: it takes source's state (one commit) */
	STORE_MERGE_MERGED,           /* one merge commit with two parents */
	STORE_MERGE_CONFLICTS,        /* conflicts and no strategy: nothing published */
};
enum store_merge_strategy { STORE_MERGE_NO_STRATEGY = 0, STORE_MERGE_OURS, STORE_MERGE_THEIRS };

struct store_merge_options {
	enum store_merge_strategy strategy;   /* resolves every conflict to one side */
	const char *message;                  /* NULL: "merge SOURCE into DEST" */
	const struct store_condition *condition;   /* on dest (NULL: none) */
	bool dry_run;                         /* compute the outcome and conflicts; publish nothing */
	const char *actor;                    /* the commit's actor (NULL: the store's) */
};

struct store_merge_result {
	enum store_merge_outcome outcome;     /* a dry run: what a merge would do */
	uint64_t base_version;                /* 0: no common ancestor (merged against the empty state) */
	char base_commit[ULID_TEXT_SIZE];
	uint64_t conflicts;                   /* unresolved */
	uint64_t resolved;                    /* resolved by the strategy */
	struct store_commit_result commit;    /* what was published (fast-forward, merge) */
};

/* Hears each conflict: its table and one JSON line {"kind","table","id","property",
 * "reason","base","ours","theirs","resolved"} (fields as they apply) ending in "\n". */
typedef void (*store_merge_conflict_fn)(const char *table, const char *line, size_t size, void *context);
/*
 * Merges branch source into branch dest (NULL: main) three-way against their
 * merge base, as ONE commit on dest (docs/ARCHITECTURE.md "Diffs and
 * merges"). Returns 0 with out->outcome (CONFLICTS: nothing published);
 * -ENOENT (no such branch; a base gc reclaimed), -EINVAL (source is dest),
 * -EBUSY (condition), or a commit's errors (-EINVAL naming a row), with
 * error set. conflict may be NULL.
 */
int store_merge(struct store *store, const char *source, const char *dest, const struct store_merge_options *options,
		store_merge_conflict_fn conflict, void *context, struct store_merge_result *out,
		struct error_info *error);
const char *store_merge_outcome_name(enum store_merge_outcome outcome);   /* "up-to-date", "fast-forward", ... */

/*
 * A preview of a merge (the mount's merge/<source>/): computed as store_merge
 * would, nothing published. It holds the snapshots it merged, so what it
 * renders never changes. 0 or -errno (as store_merge) with error set.
 */
struct store_merge_plan;
int store_merge_plan_open(struct store *store, const char *source, const char *dest,
			  enum store_merge_strategy strategy, struct store_merge_plan **out, struct error_info *error);
void store_merge_plan_free(struct store_merge_plan *plan);
const struct store_merge_result *store_merge_plan_result(const struct store_merge_plan *plan);
/* The tables of the merged result, in name order; visit as for store_snapshot_heads. */
int store_merge_plan_tables(struct store_merge_plan *plan, int (*visit)(const char *table, void *context),
			    void *context);
/* Appends the bytes table would have once the merge is published (byte for byte
 * what tables/<table>.jsonl then shows). 0, -ENOENT, -errno. */
int store_merge_plan_render(struct store_merge_plan *plan, const char *table, struct buf *out);
/* The tables with conflicts, in name order; and one table's conflict lines (-ENOENT: none). */
int store_merge_plan_conflict_tables(struct store_merge_plan *plan,
				     int (*visit)(const char *table, void *context), void *context);
int store_merge_plan_conflicts(struct store_merge_plan *plan, const char *table, struct buf *out);

/* ---- snapshots (core/store_backup.c) ------------------------------------------------ */

struct store_copy_result {
	uint64_t version;            /* the store version the snapshot shows */
	uint64_t manifest_bytes;     /* bytes of manifest copied */
	uint64_t segments_linked, bytes_linked;   /* segment files hard-linked */
	uint64_t segments_copied, bytes_copied;   /* segment files copied (another file system) */
};
/*
 * Copies the whole store (every branch, all history, tags) as of one instant
 * into the new directory path while writers go on: a store every read command
 * and `mount -o ro` open, which never changes as the source moves on. 0 or
 * -errno (-EEXIST: path is not empty) with error set.
 */
int store_snapshot_copy(struct store *store, const char *path, store_progress_fn progress, void *context,
			struct store_copy_result *out, struct error_info *error);

/* ---- retention (store_retention.c) ------------------------------------------------ */

/* ---- settings and upkeep (core/store_config.c) ------------------------------------------ */

/* "7d" (a number with s, m, h, d or w) -> µs. 0 or -EINVAL. */
int store_duration_parse(const char *text, uint64_t *out);
/* Appends the settings as one JSON line: every known key (null where unset) when key is
 * NULL, else that key's value. 0; -ENOENT (no such setting), -EIO (a damaged settings
 * file), -errno; error set. */
int store_config_json(struct store *store, const char *key, struct buf *out, struct error_info *error);
/* Sets key to value (as text: a count, or a duration) or, value NULL, unsets it. 0;
 * -ENOENT (no such setting), -EINVAL (value refused), -EROFS, -errno; error set. */
int store_config_set(struct store *store, const char *key, const char *value, struct error_info *error);
/* The retention policy the settings give (zeros: none; auto_gc_versions defaults to 64). */
struct store_retention_policy {
	uint64_t keep_versions;
	uint64_t keep_since_us;
	uint64_t auto_gc_versions;   /* gc by itself once this many versions are reclaimable; 0: never */
};
int store_retention_policy(struct store *store, struct store_retention_policy *out, struct error_info *error);

struct store_gc_options {
	uint64_t keep_versions;     /* keep the newest N versions of the store (0: not asked) */
	uint64_t keep_since_us;     /* keep every version committed within this long (0: not asked) */
	bool dry_run;               /* report what gc would do; change nothing */
};

struct store_gc_result {
	uint64_t version;                  /* the store's version when gc started */
	uint64_t horizon_before, horizon;  /* versions at or below the horizon are reclaimed */
	uint64_t versions_reclaimed;       /* newly reclaimed by this gc */
	uint64_t versions_pinned;          /* newly below the horizon but kept for a reader (the next gc takes them) */
	uint64_t live_blocks;              /* manifest and segment blocks a retained state reaches */
	uint64_t manifest_bytes_before, manifest_bytes_after;   /* the manifest's and its pack's space on disk */
	uint64_t manifest_bytes_reclaimed; /* returned (dry run: would be) */
	uint64_t pack_bytes;               /* the pack of retained history written (FORMAT.md §22; 0: dry run) */
	uint64_t segments_removed, segment_bytes_reclaimed;
	char held_by[JOURNAL_NAME_MAX + 1];   /* "" or the branch whose merge base held the horizon back */
	uint64_t held_at;                     /* the version of that merge base (kept, with all above it) */
};

/*
 * Reclaims old versions (docs/ARCHITECTURE.md "Retention"): the horizon rises
 * to the newest version that both keep rules given allow (none given: only
 * unreachable space is returned), never to the latest; every branch's and
 * tag's state and every version a reader pins (in any process) stay. Runs
 * while mounts and writers go on. 0, -EBUSY (another gc), -EOPNOTSUPP (the
 * file system cannot punch holes), -errno with error set.
 */
int store_gc(struct store *store, const struct store_gc_options *options, store_progress_fn progress,
	     void *progress_context, struct store_gc_result *out, struct error_info *error);
/*
 * Flushes the fragments of every table this handle merged rows into (core/store_compact.c)
 * where the rows it wrote since the last flush are worth the rewrite: fewer, fuller
 * fragments, the same rows, no new version. Store formats before 8 are left alone;
 * errors are logged. Returns the live rows rewritten. store_close runs it after commits.
 */
uint64_t store_compact_flush(struct store *store);
/*
 * Runs the compactions the commits of a handle opened with no_compaction_at_commit made
 * due (the tiered merges store_txn_commit would have run), as many as are due now. Errors
 * are logged. Returns the live rows rewritten.
 */
uint64_t store_compact_pending(struct store *store);
/* What store_keep_itself did: how many versions the policy allowed to reclaim, and the gc
 * it ran (ran false: none was due). */
struct store_upkeep {
	uint64_t reclaimable;
	bool ran;
	struct store_gc_result gc;
};
/* The store keeps itself: under a retention policy (store_retention_policy, read again at
 * most every 10 s), runs gc when at least auto_gc_versions versions are reclaimable
 * (core/store_config.c invariant 3). One thread at a time per handle. A gc running
 * elsewhere is not waited for. 0 (also when nothing was due), -errno; error set. */
int store_keep_itself(struct store *store, struct store_upkeep *out, struct error_info *error);
/*
 * Rewrites table (NULL: every live table with rows) of branch into fresh
 * fragments, as one commit whose changes have op optimize: dead rows, deletion
 * bitmaps and many small fragments gone, key tree and adjacency indexes
 * rebuilt; every table's bytes stay exactly the same. The old fragments are
 * garbage for gc once no retained version needs them. progress hears bytes.
 * 0, -ENODATA (nothing to optimize), -ENOENT (no such table), -EBUSY (a table
 * moved meanwhile, or condition failed), -errno with error set.
 */
int store_optimize(struct store *store, const char *branch, const char *table, const char *message,
		   const struct store_condition *condition, store_progress_fn progress, void *progress_context,
		   struct store_commit_result *result, struct error_info *error);
/* The newest version reclaimed by gc (0: none). */
uint64_t store_horizon(struct store *store);
/* How many gc sweeps have begun, in any process (one pread): a holder of
 * snapshots it does not use (a cache) drops them when this moves, so that gc
 * can reclaim what they pin and nothing is read after it was reclaimed. In an
 * object store: the horizon, refreshed when the last listing is over a second old. */
uint64_t store_sweep_sequence(struct store *store);

typedef void (*store_report_fn)(const char *line, void *context);
/*
 * Makes store's branches and tags those of the snapshot at path (a snapshot of
 * this store), as new commits: one per branch that differs (versions continue
 * upward), branches and tags it lacks deleted (a branch a mount serves is
 * refused: -EBUSY), missing ones created. report (may be NULL) hears one line
 * per change. condition (NULL: none): its version, checked as the restore starts.
 * 0 or -errno with error set (-EINVAL: not a snapshot of store).
 */
int store_restore(struct store *store, const char *path, const struct store_condition *condition,
		  store_report_fn report, void *context, struct error_info *error);

/* ---- maintenance and stats ---------------------------------------------------------- */

/* Appends one JSON object: manifest.{reads,bytes,pages,rows_decoded,writes,
 * bytes_written,fsyncs}, data.{reads,bytes,blocks,rows_decoded,writes,
 * bytes_written,fsyncs} (process-wide io counters), store.{version,path,format}.
 * 0 or -ENOMEM. */
int store_stats_json(struct store *store, struct buf *out);
/* This process's I/O counters as one JSON object: manifest.{...}, data.{...}
 * as above and object_store.{gets,puts,heads,deletes,lists,bytes_sent,
 * bytes_received,cache_hits,cache_bytes,cache_stores} (requests to s3:// stores and the local cache of their pieces). 0 or -ENOMEM. */
int store_counters_json(struct buf *out);
/* Returns the number of findings (0 clean), reporting each; or -errno. */
int store_verify(struct store *store, void (*report)(const char *finding, void *context),
		 void *context);
/* The same, telling progress (NULL: none) how many of its passes are done. */
int store_verify_progress(struct store *store, void (*report)(const char *finding, void *context), void *context,
			  store_progress_fn progress, void *progress_context);
/* Rebuilds heads from the journal as audited commits; -EROFS when read-only. */
int store_repair(struct store *store, int *repaired_branches, struct error_info *error);
/* What store_rollback did: the version the store is back at, the commits and bytes it
 * dropped, and the version of its audited commit on main. */
struct store_rollback_result {
	uint64_t version;
	uint64_t commits_dropped;
	uint64_t bytes_dropped;
	uint64_t audit_version;
};
/* `repair --rollback` of the local store at path, whose newest root is damaged: back to
 * its newest intact root (dropped hears each later commit that still decodes, before
 * anything changes), then one audited commit on main saying so, then a gc without rules
 * for the segments only dropped commits named. 0; -EINVAL (its newest root is intact:
 * nothing to roll back), -EOPNOTSUPP (an object store), -errno; error set. */
int store_rollback(const char *path, int (*dropped)(const struct commit_record *record, void *context),
		   void *context, struct store_rollback_result *result, struct error_info *error);

/* ---- test support ---------------------------------------------------------------------- */

/* The failpoint registry (io_failpoint_names): NULL-terminated, one name each. */
const char *const *store_failpoint_names(void);
/*
 * Rewrites the format version in the manifest header of the store at path
 * (recomputing the header checksum; docs/FORMAT.md §2), so that tests can
 * check that older and newer stores are refused. Not for everyday use: the
 * store must not be open. Returns 0, -ENOENT (no manifest), -EIO (the header
 * is not a valid graphfs header), -errno.
 */
int store_stamp_format(const char *path, uint32_t format_version, struct error_info *error);

#endif
