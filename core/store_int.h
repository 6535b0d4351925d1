/*
 * store_int — internals shared by store.c, store_txn.c and store_ops.c
 * (layer: store). Not included outside core/store*.c.
 *
 * Locking (outermost first; a thread never takes an earlier lock while
 * holding a later one):
 *   1. store_writer.lock   one writer's input state (line carry, counters)
 *   2. store_txn.lock      the transaction's operations and stages
 * The manifest handle is thread-safe by itself (its state and publish
 * mutexes; reads through a snapshot touch only immutable blocks), so the
 * store adds no lock around it: readers of pinned snapshots never wait for a
 * commit's fsync. Caller-supplied visitors run with no store or transaction
 * lock held, so a visitor may call back into the store.
 */
#ifndef GRAPHFS_STORE_INT_H
#define GRAPHFS_STORE_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "manifest.h"
#include "schema.h"
#include "store.h"
#include "table.h"

#define STORE_ACTOR_MAX 320  /* user@host: 64 + 1 + 255 */

#define STORE_SCHEMA_CACHE 16   /* parsed schemas kept per store handle */

struct store {
	struct manifest *manifest;
	struct pager *pager;              /* owned by the manifest */
	char *path;
	bool read_only;
	enum codec_kind codec;
	size_t row_max;
	uint64_t staged_max;
	char actor[STORE_ACTOR_MAX];
	atomic_long open_snapshots;       /* snapshots not yet released (checked at close) */
	struct io_file serving;           /* store_serving.c: the locked serving/ file, or closed */
	char serving_name[JOURNAL_NAME_MAX + 32 + 72];
	struct lease *lease;              /* store_serving.c: in an object store, the renewed lease, or NULL */
	bool upkeep_at_close;             /* store_open.c: store_keep_itself at close if this handle's version moved */
	bool compaction_at_commit;        /* store_compact.c: tiered merges in store_txn_commit, else pending */
	uint64_t opened_version;          /* the store's version when store_open returned */
	/* store_config.c: the retention policy as last read, and when (CLOCK_MONOTONIC µs, 0: never);
	 * used by store_keep_itself, which one thread at a time calls */
	struct store_retention_policy policy;
	uint64_t policy_read_us;
	uint64_t pack_bytes;              /* the newest pack's size when the last gc root was */
	uint64_t pack_swept_below;        /* ... this one (root swept_below): 0, looked at never */
	/* Parsed schemas by schema block (immutable at its address), so that a writer
	 * does not parse its table's schema JSON again for every transaction. */
	pthread_mutex_t schemas_lock;
	struct cached_schema {
		struct block_address block;   /* null: empty slot */
		struct schema schema;
		uint64_t used;                /* schemas_clock when last handed out */
	} schemas[STORE_SCHEMA_CACHE];
	uint64_t schemas_clock;
	/* store_compact.c: the tables this handle merged rows into, and the rows since each one's
	 * last flush (invariant 3 there) */
	pthread_mutex_t compact_lock;
	struct store_compact_note {
		char branch[JOURNAL_NAME_MAX + 1];
		char table[JOURNAL_NAME_MAX + 1];
		uint64_t rows_written;
		bool tiered_due;          /* a commit merged rows here; store_compact_pending has not run since */
	} *compact_notes;
	size_t compact_note_count, compact_note_capacity;
	atomic_ulong compactions;         /* compactions this handle published, and the rows they rewrote */
	atomic_ulong rows_compacted;
};

/*
 * Compacts one table of branch (core/store_compact.c): plans mode's compaction of its
 * current version and publishes it — a FLUSH only when min_written rows are at least an
 * eighth of the rows it would rewrite. *rows_rewritten: the live rows rewritten (0: none,
 * also when a commit came first). 0 or -errno with error set.
 */
int store_compact_table(struct store *store, const char *branch, const char *table, enum table_compact_mode mode,
			uint64_t min_written, uint64_t *rows_rewritten, struct error_info *error);
/* After a commit that merged rows rows into table: notes them, runs a TIERED compaction if due
 * (errors logged, invariant 2). */
void store_compact_after_commit(struct store *store, const char *branch, const char *table, uint64_t rows);

/*
 * The handle alone (store.c): options checked, the manifest opened, the schema
 * cache ready; no delete check for the mounts and no restore resumed (what
 * store_open adds, store_open.c). For the files below store_open.c that open
 * another store (store_backup.c: the snapshot). 0 or -errno with error set;
 * *out NULL on error. store_handle_close undoes it (serves nothing).
 */
int store_handle_open(const char *path, const struct store_options *options, struct store **out,
		      struct error_info *error);
void store_handle_close(struct store *store);

/* Releases the branch this handle serves (store_serving.c). */
void store_unserve(struct store *store);
/* The manifest's delete check: -EBUSY (saying where) for a branch a running mount serves. */
int store_delete_check(const char *name, void *context, struct error_info *error);
/* In an object store, announces a delete of branch (a lease in deleting/, which a mount starting
 * meanwhile waits for) before its check: *out to lease_end(*out, true) once it is published or
 * refused; NULL locally. 0 or -errno. */
struct lease;
int store_delete_announce(struct store *store, const char *branch, struct lease **out);

struct store_snapshot {
	atomic_long references;
	struct store *store;
	struct manifest_snapshot view;    /* plain data: the branch as of view.version (view.branch is the
					     record of the ancestor that held that state, or a tag's) */
	char branch[JOURNAL_NAME_MAX + 1]; /* the branch asked for (a tag's: the branch it was made on) */
	pthread_mutex_t time_lock;        /* guards the lazily read head commit time */
	atomic_bool time_known;
	uint64_t time_us;
};

/* Reads the table version record and schema of a live head. 0 or -errno. */
int store_head_schema(struct store *store, const struct head_row *head, struct table_info *info_out,
		      struct schema *schema_out);

/*
 * A snapshot that resolve fills in, pinned (manifest_pins.c) so that no gc
 * reclaims it: resolve is called again if a gc began a sweep between the
 * resolution and the pin. branch NULL: the resolved record's name. 0 or the
 * error resolve returned (error set).
 */
typedef int (*store_snapshot_resolver)(struct store *store, void *context, struct manifest_snapshot *view,
				       struct error_info *error);
int store_snapshot_pinned(struct store *store, store_snapshot_resolver resolve, void *context,
			  const char *branch, struct store_snapshot **out, struct error_info *error);
/* A new snapshot (one reference) of view, shown as branch, pinning view's
 * version (released at the last reference). 0 or -ENOMEM. */
int store_snapshot_wrap(struct store *store, const struct manifest_snapshot *view, const char *branch,
			struct store_snapshot **out, struct error_info *error);
/* The -ENOENT error of a version branch does not show: reclaimed, before the
 * first commit of its ancestry, or after the latest version (store.c). */
int store_version_missing(struct store *store, const char *branch, uint64_t version, struct error_info *error);

/* The manifest's form of a store condition (NULL: none). */
void store_condition_to_manifest(const struct store_condition *condition, struct manifest_condition *out);

/* One commit on branch making its tables exactly then's (store_revert.c): -ENODATA
 * when they already are. */
int store_revert_to(struct store *store, const char *branch, struct store_snapshot *then, const char *message,
		    const struct store_condition *condition, struct store_commit_result *result,
		    struct error_info *error);

/*
 * For merges (store_merge.c): stage the table version record at source as
 * table (MANIFEST_RESTORE; adopt_identity keeps the stable id of a table
 * this branch never had); make the next commit a merge with second parent
 * commit (at record); and let writers skip endpoint and reference checks at
 * write time (the merge checked them; the commit still checks references).
 */
int store_txn_restore(struct store_txn *txn, const char *table, struct block_address source, bool adopt_identity,
		      struct error_info *error);
void store_txn_set_merge_parent(struct store_txn *txn, const struct ulid *commit, struct block_address record);
void store_txn_trust_endpoints(struct store_txn *txn);

/* Live heads of a snapshot, in name order (store.c). */
struct store_head_list {
	struct head_row *heads;
	size_t count, capacity;
};
int store_heads_collect(struct store_snapshot *snapshot, struct store_head_list *out);   /* free out->heads */
int store_head_list_add(const struct head_row *head, void *context);   /* a store_snapshot_heads visitor */
const struct head_row *store_head_list_find(const struct store_head_list *list, const struct ulid *stable_id);
const struct head_row *store_head_list_named(const struct store_head_list *list, const char *name);
/* Appends bytes as a JSON string. 0 or -ENOMEM. */
int store_json_string(struct buf *out, const void *bytes, size_t size);

/* Completes a restore a crash interrupted (its marker is there and free); called
 * by every read-write store_open. Reports through the log hook; never fails the open. */
void store_restore_resume(struct store *store);

/* "main" when branch is NULL or empty. */
const char *store_branch_or_main(const char *branch);

#endif
