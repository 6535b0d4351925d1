/*
 * manifest — the store's commit point: file header and format version, the
 * two meta slots, root records, branches, heads and names trees, the version
 * index, the publisher and crash recovery (layer: manifest).
 *
 * Files of a store directory (created 0700/0600, opened without following
 * symlinks, invariant 10):
 *   manifest            header (format version), meta slots, then an
 *                       append-only sequence of blocks ending with the latest
 *                       root, then preallocated zeros (FORMAT.md §4)
 *   segments/<id>       large table data written outside the lock
 *   recovery/<ulid>     sidecars: intent of a commit that writes segments
 *   lock                flock(2) target: the store lock (held only to publish)
 *
 * A publish moves through the states of enum publish_state (LOCKED,
 * APPENDED, DURABLE, PUBLISHED; manifest_int.h), all in manifest_publish.c,
 * whose publish_durably() is the commit point: one pwrite of every new block,
 * root record last, over preallocated zeros, then one fsync.
 * A crash before DURABLE leaves a tail that recovery truncates, and sidecar
 * segments that recovery deletes: the store opens to the state before. A
 * crash after DURABLE opens to the state after (the sidecar's commit is found
 * and the sidecar is removed).
 *
 * Invariants kept:
 *   1. The format version is read and checked before anything else,
 *      including recovery (invariant 6).
 *   2. The latest root record is the last complete, checksummed BLOCK_ROOT in
 *      the manifest; the meta slots only say where to start looking, and the
 *      open path reads forward from the newest valid slot, so current state
 *      costs O(1) blocks beyond the heads themselves (invariant 2).
 *   3. Every publish writes journal (commit record), heads, names, branch
 *      record, version index and root together in one append (invariants 1, 7).
 *   4. Version = latest root's version + 1 for every commit, on any branch;
 *      branch create/delete publish a root without a new version.
 *   5. A tombstoned head only becomes live again by a create that mints a new
 *      incarnation (invariant 8).
 */
#ifndef GRAPHFS_MANIFEST_H
#define GRAPHFS_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec.h"
#include "error_info.h"
#include "journal.h"
#include "pager.h"
#include "schema.h"
#include "table.h"
#include "ulid.h"

#define MANIFEST_FORMAT_VERSION FILE_FORMAT_VERSION   /* the store format this binary creates */
#define MANIFEST_FORMAT_OLDEST FILE_FORMAT_OLDEST     /* the oldest one it opens (docs/FORMAT.md §2) */
#define MANIFEST_GRANULE_OFFSET 56  /* u32 in the manifest's file header (FORMAT.md §2) */
#define MANIFEST_GRANULE 65536u     /* what it may say besides 0: tails start at its multiples (§23) */
#define MANIFEST_SIDECAR_VERSION 1  /* recovery sidecars have their own version space */

struct manifest;
struct manifest_intent;

struct root_record {
	uint64_t sequence;                  /* +1 per publish of any kind */
	uint64_t version;                   /* the store's version after this publish */
	uint64_t horizon;                   /* newest version reclaimed by retention (0: none) */
	uint64_t time_us;
	struct block_address branches;      /* tree: branch name -> branch record */
	struct block_address versions;      /* index: version -> the last root record of that version,
					       for every version below this root's own (FORMAT.md §16.1) */
	struct block_address commit;        /* the record of the commit that made this version (a
					       branch create/delete keeps its predecessor's); null at 0 */
	struct block_address previous;      /* the previous root record, null for the first */
	struct block_address tags;          /* tree: tag name -> tag record (FORMAT.md §20); null: no tags */
	uint64_t swept_below;               /* manifest offset below which gc may have returned space
					       (holes, FORMAT.md §4); 0: never swept */
	struct block_address self;          /* where this record lives (not encoded) */
};

struct branch_record {
	char name[JOURNAL_NAME_MAX + 1];
	struct ulid incarnation;            /* minted at create; a re-created name gets a new one */
	struct ulid head_commit;            /* zero before the branch's first commit (fresh main) */
	struct block_address head_record;   /* that commit's record, null before */
	uint64_t head_version;              /* that commit's version, 0 before */
	struct block_address heads;         /* tree: stable id -> head row */
	struct block_address names;         /* tree: live table name -> stable id */
	char forked_from[JOURNAL_NAME_MAX + 1]; /* "" for main */
	uint64_t fork_point;                /* the source's head version it forked from (0 for main) */
	uint64_t created_version;           /* the store version when it was created (0 for main) */
	uint64_t created_time_us;
};

/* A resolved view: one branch as of one version. Plain data; copying is fine. */
struct manifest_snapshot {
	uint64_t version;                   /* the version this snapshot shows */
	struct root_record root;
	struct branch_record branch;
};

enum manifest_open_flags {
	MANIFEST_READ_ONLY = 1,   /* never writes: no recovery (a pending sidecar is left as is) */
};

/*
 * Creates a new store in directory path (created if missing; must be empty
 * otherwise: -EEXIST). Writes the header, meta slots and the first root
 * (version 0, branch main with no tables). Returns 0 or -errno.
 */
int manifest_create(const char *path, struct error_info *error);
/* The same in store format format_version (MANIFEST_FORMAT_OLDEST..MANIFEST_FORMAT_VERSION;
 * otherwise -EINVAL): a store that an older graphfs can still open. */
int manifest_create_format(const char *path, uint32_t format_version, struct error_info *error);
/* The store's format (its manifest header's). */
uint32_t manifest_format_version(const struct manifest *manifest);

/*
 * Opens a store: reads and checks the format version first (older: -EPROTO
 * with the "export with the version that wrote it, then init + import"
 * message; newer: -EPROTO with "upgrade graphfs"; not a store: -ENOENT /
 * -EINVAL), then, unless read-only, runs recovery under the store lock.
 * Returns 0 or -errno with error filled.
 */
int manifest_open(const char *path, int flags, struct manifest **out, struct error_info *error);
/*
 * (A read-only open of a store whose latest durable root is damaged succeeds
 * so that manifest_verify can report; every current-state read on that
 * handle answers -EIO. A read-write open of such a store fails with -EIO.)
 */

/*
 * Test and debug tool: rewrites the manifest header of the store at path
 * with format_version (and a valid checksum), so the refusal of older and
 * newer formats can be exercised. Returns 0 or -errno.
 */
int manifest_stamp_format(const char *path, uint32_t format_version);
void manifest_close(struct manifest *manifest);
/* In an object store: pauses (resumes) the threads of this handle's leases (readers' pins, gc)
 * around a fork(2), which keeps no thread. manifest_leases_resume returns 0 or -errno. */
void manifest_leases_pause(struct manifest *manifest);
int manifest_leases_resume(struct manifest *manifest);
struct pager *manifest_pager(struct manifest *manifest);

/*
 * Picks up publishes made by other processes: re-reads the meta slots and
 * any roots after them. *changed (may be NULL) says whether the latest root
 * moved. Cheap when nothing changed (two meta slot reads). Returns 0 or -errno.
 */
int manifest_refresh(struct manifest *manifest, bool *changed);
/* manifest_refresh that sees every commit made before the call began: in an object store it
 * lists the newest pieces now (one LIST) instead of at most every REMOTE_REFRESH_US. */
int manifest_refresh_now(struct manifest *manifest, bool *changed);
/* A read's refresh: manifest_refresh, except that while the object store is out of reach
 * (io_error_is_unreachable) a handle that knows a root reads that last known state (counted:
 * manifest_stale_reads) instead of failing. Writes never do: a publish needs the store. */
int manifest_refresh_for_read(struct manifest *manifest);
uint64_t manifest_stale_reads(struct manifest *manifest);
/* The latest root this handle knows (after the last refresh or own publish). */
int manifest_latest(struct manifest *manifest, struct root_record *out);
/* Where the latest root known to this handle ends: the manifest's blocks end there (FORMAT.md §4). */
uint64_t manifest_end(struct manifest *manifest);

/* Resolves branch at the latest version, or at version (docs/MOUNT.md "History"
 * rules: before its creation a branch shows the branch it was forked from,
 * recursively; -ENOENT before the first commit of that ancestry, at or below
 * the horizon, or above the latest version). O(depth of forks) lookups in the
 * latest branches tree plus one version-index lookup, whatever the history. */
int manifest_snapshot_latest(struct manifest *manifest, const char *branch,
			     struct manifest_snapshot *out);
int manifest_snapshot_at(struct manifest *manifest, const char *branch, uint64_t version,
			 struct manifest_snapshot *out);

/*
 * The newest version whose commit is at or before time_us (µs since the
 * epoch): O(log versions) reads of the version index (docs/FORMAT.md
 * §16.3). -ENOENT when time_us is before the first commit (or every version
 * up to it was reclaimed).
 */
int manifest_version_at_time(struct manifest *manifest, uint64_t time_us, uint64_t *version);

/* Heads: by live name (-ENOENT), each live head in name order, each tombstoned head. */
int manifest_head_find(struct manifest *manifest, const struct manifest_snapshot *snapshot,
		       const char *name, struct head_row *out);
int manifest_heads_each(struct manifest *manifest, const struct manifest_snapshot *snapshot,
			bool tombstoned, int (*visit)(const struct head_row *head, void *context),
			void *context);

/* Branches of a root, in name order. */
int manifest_branches_each(struct manifest *manifest, const struct root_record *root,
			   int (*visit)(const struct branch_record *branch, void *context),
			   void *context);

/* Commit records. */
int manifest_commit_read(struct manifest *manifest, struct block_address address,
			 struct commit_record *out);
/*
 * The merge base of two commits (docs/ARCHITECTURE.md "Diffs and merges"):
 * the newest commit that is an ancestor of both (a commit is its own
 * ancestor), by walking both histories newest version first through every
 * parent — O(commits since the base), and deterministic when several
 * common ancestors tie (criss-cross histories: the newest version wins).
 * Commits gc reclaimed are not walked past. Returns 0 with its id, version
 * and record; -ENOENT when the two share no retained ancestor; -errno.
 */
int manifest_merge_base(struct manifest *manifest, const struct ulid *a, struct block_address a_record,
			const struct ulid *b, struct block_address b_record, struct ulid *base_out,
			uint64_t *version_out, struct block_address *record_out);
/* The branch state a commit left: the branch it was made on, in the last root
 * of its version. 0, -ENOENT (reclaimed), -EIO, -errno. */
int manifest_snapshot_of_commit(struct manifest *manifest, const struct ulid *commit, struct block_address record,
				struct manifest_snapshot *out);
/* The branch state the commit of version left (on whichever branch, deleted since or
 * not), as manifest_snapshot_of_commit. 0, -ENOENT (reclaimed or no such version), -EIO. */
int manifest_snapshot_of_version(struct manifest *manifest, uint64_t version, struct manifest_snapshot *out);
/*
 * What the commit of version made, as it published it: *made, its branch in the
 * commit's own root (the first root of that version: before any compaction at that
 * version stored a table anew, docs/FORMAT.md §14), and *base, the same branch in
 * the root before it — the state the commit was applied to (its version is the one
 * below). Of a version at or below the horizon (kept for a tag or a pin) only the
 * state gc kept is known: *made is that state and base->version is 0, as when the
 * root before is at or below the horizon (gc kept its record, not its states) or
 * lacks the branch. 0, -ENOENT (reclaimed or no such version), -EIO.
 */
int manifest_snapshots_of_commit_made(struct manifest *manifest, uint64_t version, struct manifest_snapshot *made,
				      struct manifest_snapshot *base);
/* Walks the branch's first-parent chain from the snapshot's head, newest first. */
int manifest_log_each(struct manifest *manifest, const struct manifest_snapshot *snapshot,
		      int (*visit)(const struct commit_record *record, void *context),
		      void *context);
int manifest_commit_find(struct manifest *manifest, const struct ulid *commit, uint64_t *version,
			 struct block_address *record);
/* The record of the commit that made version (on any branch), into out (journal_commit_record_free):
 * 0; -ENOENT when version is 0, above the latest or reclaimed by gc; -EIO. One version-index
 * lookup, one root and one commit record read. */
int manifest_commit_at(struct manifest *manifest, uint64_t version, struct commit_record *out);
/* A hint: the commit records of version and the versions after it (first_parent: its first
 * parent's, and so on down the chain; otherwise version + 1, …) are read next. In an object
 * store, asks for up to 16 of them at once (their roots, then the records those name: two
 * rounds of parallel GETs instead of a GET each, one after another); elsewhere nothing. */
void manifest_prefetch_commits(struct manifest *manifest, uint64_t version, bool first_parent);
/* One version of a branch's log, as the version index records it. */
struct manifest_log_version {
	uint64_t version;
	uint64_t time_us;      /* its commit's time */
	bool reclaimed;        /* gc reclaimed it: the walk's last entry */
};
/* The versions of manifest_log_each's walk, newest first, from the version
 * index rather than the commit records: about one index leaf read per 256
 * versions (FORMAT.md §16.1). visit returns non-zero to stop (returned). 0 or -errno. */
int manifest_log_versions(struct manifest *manifest, const struct manifest_snapshot *snapshot,
			  int (*visit)(const struct manifest_log_version *entry, void *context), void *context);

/* A publish's compare-and-swap (--if-version, --if-commit): -EBUSY, nothing published, when it fails. */
struct manifest_condition {
	bool has_version;
	uint64_t version;                         /* the store's version must still be this */
	struct ulid commit;                       /* non-zero: the branch's head commit must still be this */
};

/* 0 when condition holds for a publish on branch over root, else -EBUSY with the
 * expected and the actual value in error. */
int manifest_condition_check(const struct manifest_condition *condition, const struct root_record *root,
			     const struct branch_record *branch, struct error_info *error);

/* ---- tags (manifest_tags.c, FORMAT.md §20) ---------------------------------------- */

#define MANIFEST_TAG_ACTOR_MAX 255
#define MANIFEST_TAG_MESSAGE_MAX 4095

struct manifest_tag {
	char name[JOURNAL_NAME_MAX + 1];
	uint64_t version;                   /* the version of the commit it names: branch.head_version */
	uint64_t time_us;                   /* when the tag was made */
	char actor[MANIFEST_TAG_ACTOR_MAX + 1];
	char message[MANIFEST_TAG_MESSAGE_MAX + 1];
	struct branch_record branch;        /* the tagged state: the branch as of version */
};

struct manifest_tag_request {
	const char *name;
	const char *branch;                 /* NULL: main */
	uint64_t version;                   /* 0: the branch's head; else the branch as of this version */
	const char *actor;
	const char *message;
	struct manifest_condition condition;  /* checked against the store and the branch's latest head */
	uint64_t time_us;                     /* 0: now; else the tag's time (a replayed tag's) */
};

/* Tag names: a letter or _, then letters, digits, _, - and . (no ".."), 1..128 bytes. 0 or -EINVAL. */
int manifest_tag_name_check(const char *name, struct error_info *error);
/* Creates a tag (a publish without a new version, through the publish.* failpoints).
 * -EEXIST if the name is taken, -ENOENT if the branch or version does not
 * resolve or the branch has no commit there. out may be NULL. */
int manifest_tag_create(struct manifest *manifest, const struct manifest_tag_request *request,
			struct manifest_tag *out, struct error_info *error);
/* condition (NULL: none): its version only. */
int manifest_tag_delete(struct manifest *manifest, const char *name, const struct manifest_condition *condition,
			struct error_info *error);
/* The tag name in the latest root: 0, -ENOENT, -EIO. */
int manifest_tag_find(struct manifest *manifest, const char *name, struct manifest_tag *out);
/* The tagged state as a snapshot (version: the tag's version). */
int manifest_snapshot_tag(struct manifest *manifest, const char *name, struct manifest_snapshot *out);
/* Tags of a root in name order. */
int manifest_tags_each(struct manifest *manifest, const struct root_record *root,
		       int (*visit)(const struct manifest_tag *tag, void *context), void *context);

/* ---- publishing -------------------------------------------------------------- */

enum manifest_op_kind {
	MANIFEST_WRITE = 1,    /* overwrite or merge rows (stage); creates the table if missing */
	MANIFEST_SCHEMA = 2,   /* create an empty table with schema, or apply a compatible change */
	MANIFEST_DROP = 3,
	MANIFEST_RENAME = 4,
	MANIFEST_RESTORE = 5,  /* name becomes the table version at source (revert): O(1), its trees shared */
};

struct manifest_op {
	enum manifest_op_kind kind;
	char name[JOURNAL_NAME_MAX + 1];
	char new_name[JOURNAL_NAME_MAX + 1];      /* MANIFEST_RENAME */
	struct block_address source;              /* MANIFEST_RESTORE: a table version record of the branch's past */
	struct table_stage *stage;                /* MANIFEST_WRITE, sealed */
	const struct schema *schema;              /* MANIFEST_SCHEMA; WRITE of a new table (inferred); WRITE that refines */
	bool refines_schema;                      /* WRITE: schema (inferred from the rows) replaces the empty
						   * schema of a table that has no rows (schema_is_undeclared) */
	char expected_schema_hash[17];            /* WRITE to an existing table: "" or the hash the rows were validated against (-EBUSY if it changed) */
	uint64_t based_on_version;                /* non-zero: the table must still be at this version (-EBUSY) */
	bool optimize;                            /* WRITE, an overwrite with the table's own rows: recorded as op optimize */
	bool based;                               /* WRITE, an overwrite that a based write merged three ways
						   * (the request's based_on): recorded as op merge */
	bool adopt_identity;                      /* RESTORE of a table this branch never had (a merge takes a
						   * table the other branch created): it keeps its stable id */
	struct ulid based_on_incarnation;
};

struct manifest_commit_request {
	const char *branch;
	const char *actor;
	const char *message;
	size_t op_count;
	struct manifest_op *ops;
	struct manifest_intent *intent;           /* NULL, or the sidecar of the segments this commit publishes */
	struct manifest_condition condition;      /* compare-and-swap: checked under the lock, before anything */
	struct ulid merge_parent;                 /* non-zero: a merge commit's second parent (the source's head) */
	struct block_address merge_parent_record; /* and where its record is */
	struct ulid origin_id;                    /* non-zero: the commit id's base (a replayed commit's id) */
	uint64_t time_us;                         /* non-zero: the commit's time (a replayed commit's; the caller
						   * keeps commit times in version order, FORMAT.md §16.3) */
	uint64_t based_on;                        /* non-zero: the version a based write read (recorded in
						   * the commit record from format 7 on, FORMAT.md §9) */
};

struct manifest_commit_result {
	uint64_t version;
	struct ulid commit;
	uint64_t time_us;
	bool intent_released;   /* failed with the outcome unknown: the request's intent was
				   released (sidecar kept for recovery); the caller must not abandon it */
};

/*
 * Publishes one commit (see the states above). Holds the store lock only
 * while publishing. Errors: -ENOENT (branch or table missing), -EEXIST
 * (create or rename onto a live name), -EBUSY (based-on version moved,
 * schema changed under the rows, dropping a node table a live edge table
 * references), -EINVAL (incompatible schema change, invalid name), -EIO.
 * On error nothing is published. Failpoints on this path are in the io
 * registry ("publish.*").
 */
int manifest_commit(struct manifest *manifest, const struct manifest_commit_request *request,
		    struct manifest_commit_result *result, struct error_info *error);

/* Branch create from another branch's head (O(1)) and delete (docs/MOUNT.md "Branches";
 * mounted_branch may be NULL). condition (NULL: none) is checked under the lock
 * against the store and branch from (create) / the branch deleted (delete). */
int manifest_branch_create(struct manifest *manifest, const char *name, const char *from,
			   const struct manifest_condition *condition, struct error_info *error);
/* Branch create at a retained commit (any branch's, deleted since or not): the state
 * that commit left, its first-parent chain as its history (manifest_history.c
 * invariant 4). -ENOENT when the commit or its state is no longer kept. */
int manifest_branch_create_at(struct manifest *manifest, const char *name, const struct ulid *commit,
			      const struct manifest_condition *condition, struct error_info *error);
/* A check that branch delete makes under the store lock, before it publishes:
 * a negative result refuses the delete with that error (the store: a branch a
 * running mount serves). */
void manifest_set_delete_check(struct manifest *manifest,
			       int (*check)(const char *name, void *context, struct error_info *error),
			       void *context);
/* Runs fn under the store lock, after a refresh: no commit lands while it runs.
 * Returns fn's result, or the lock's error. */
int manifest_run_locked(struct manifest *manifest, int (*fn)(struct manifest *manifest, void *context),
			void *context, struct error_info *error);
/*
 * Publishes a compaction (core/table_compact.c) of branch's table stable_id, made
 * from the table version record at `table`: a root of the same version whose
 * heads name the compacted version (core/manifest_compact.c). *published says
 * whether it was published — false, with 0, when the branch or table is gone or
 * its head no longer names `table`. Returns 0 or -errno (nothing published).
 */
int manifest_compact(struct manifest *manifest, const char *branch, const struct ulid *stable_id,
		     struct block_address table, struct table_compaction *compaction, enum codec_kind codec,
		     bool *published, struct error_info *error);
/* Unless force: -ENOTEMPTY when no other branch or tag holds the branch's head commit
 * (manifest_branches.c invariant 3). */
int manifest_branch_delete(struct manifest *manifest, const char *name, const char *mounted_branch, bool force,
			   const struct manifest_condition *condition, struct error_info *error);

/* ---- recovery sidecars ------------------------------------------------------- */

/*
 * Before writing a segment, a writer registers its intent: a sidecar
 * recovery/<ulid> naming the segments, fsynced, and flock-held for as long as
 * the writer lives. manifest_commit accepts the sidecar and removes it once
 * DURABLE. On open, recovery takes every sidecar whose lock is free (its
 * writer died): if its commit is published it only removes it (roll
 * forward), otherwise it deletes its segments (roll back) — idempotently.
 */
struct manifest_intent;
int manifest_intent_begin(struct manifest *manifest, struct manifest_intent **out);
/* The commit id the intent's commit will carry (its base, as manifest_commit_request's
 * origin_id); only before its first segment. */
void manifest_intent_set_commit(struct manifest_intent *intent, const struct ulid *commit);
/* Mints a random segment id, records it in the sidecar and makes the sidecar
 * durable (failpoints sidecar.*) before returning it. Matches table_segment_allocator
 * when called as manifest_intent_new_segment(intent, &id). */
int manifest_intent_new_segment(void *intent, uint64_t *segment_id_out);
/* The intent's ULID (the name of its sidecar). The commit that publishes the
 * intent carries this ULID with the commit's version written into bits
 * 48..87 (FORMAT.md §16.2), which is how recovery finds it. */
const struct ulid *manifest_intent_commit(const struct manifest_intent *intent);
/* Attach to a commit request so the publish completes and clears it: on a
 * successful manifest_commit the intent is consumed (sidecar removed, struct
 * freed); on error it stays with the caller (retry, or abandon) — except when
 * the result says intent_released (the outcome is unknown: see below). */
void manifest_request_attach_intent(struct manifest_commit_request *request,
				    struct manifest_intent *intent);
/* Abandons: deletes the segments and the sidecar (a refused or abandoned write). */
void manifest_intent_abandon(struct manifest_intent *intent);
/* Lets go without deciding: the sidecar and segments stay, its lock is dropped,
 * and the next read-write open's recovery rolls it forward or back (a commit
 * whose fsync failed after other publishes may have built on it). Frees it. */
void manifest_intent_release(struct manifest_intent *intent);

/* ---- snapshots (manifest_copy.c) --------------------------------------------------- */

typedef void (*manifest_progress_fn)(uint64_t done, uint64_t total, void *context);

struct manifest_copy_result {
	uint64_t version;            /* the store version the copy shows */
	uint64_t manifest_bytes;     /* copied */
	uint64_t segments_linked, bytes_linked;
	uint64_t segments_copied, bytes_copied;
};

/*
 * Copies the whole store as of its latest root into a new directory path
 * (created; -EEXIST if it holds anything): the manifest up to that root, and
 * every segment a retained version references, hard-linked where the file
 * system allows and copied otherwise. Writers go on meanwhile; the store lock
 * is held only to read the latest root. The result is a store. Failpoints
 * snapshot.after_segments, snapshot.before_rename. 0 or -errno with error set;
 * on error path may hold a partial copy that is not a store (no manifest).
 */
int manifest_snapshot_copy(struct manifest *manifest, const char *path, manifest_progress_fn progress,
			   void *context, struct manifest_copy_result *result, struct error_info *error);

/* The store's ULID (the same in every file of it). */
const struct ulid *manifest_store_id(const struct manifest *manifest);
/* 0 if this manifest holds exactly root (of the store store_id) at root->self —
 * so that every address at or below it means the same here: a snapshot of this
 * store, restorable without copying data. -ENOENT otherwise; -ESTALE when a gc
 * swept this store after that root (what the snapshot shares may be gone). */
int manifest_root_is_ours(struct manifest *manifest, const struct ulid *store_id, const struct root_record *root);
/*
 * The states retention must keep whatever its horizon: every branch's head
 * state, then every tag's (label "branch B" / "tag T"). The hook a garbage
 * collector marks from, so that no tagged version is ever reclaimed.
 */
int manifest_retained_states_each(struct manifest *manifest, const struct root_record *root,
				  int (*visit)(const char *label, const struct branch_record *state, void *context),
				  void *context);
/* Publishes a tag record as it is (restore): -EEXIST if the name is taken. */
int manifest_tag_put(struct manifest *manifest, const struct manifest_tag *tag, struct error_info *error);

/* ---- pins and retention (manifest_pins.c, manifest_gc.c) ------------------------------ */

/*
 * Pins versions first..last for every process to see (gc keeps them) until the
 * matching manifest_unpin; pins of one range nest. Take one around any read
 * of a version, in this order: note manifest_sweep_sequence, resolve, pin,
 * compare the sequence again — if it moved, unpin and resolve again (a gc may
 * have listed pins before this one existed). Returns 0 or -errno (-ENOMEM);
 * a handle without a pins file pins nothing and returns 0.
 */
int manifest_pin(struct manifest *manifest, uint64_t first, uint64_t last);
void manifest_unpin(struct manifest *manifest, uint64_t first, uint64_t last);
/* The gc lock shared, waiting for a running gc to end: while it is held no gc
 * runs (a snapshot copy, a restore). In an object store it is the gc lease,
 * taken exclusively (holders wait for each other). 0 or -errno; without a
 * pins file 0. Release with manifest_gc_unlock. */
int manifest_gc_hold(struct manifest *manifest);
void manifest_gc_unlock(struct manifest *manifest);
/* How many gc sweeps have begun (0: none, or no pins file); in an object store the
 * horizon, refreshed when the last listing is over a second old. */
uint64_t manifest_sweep_sequence(struct manifest *manifest);

struct manifest_gc_request {
	uint64_t keep_versions;      /* keep the newest N versions (0: not asked) */
	uint64_t keep_since_us;      /* keep every version committed within this long (0: not asked) */
	bool dry_run;                /* compute and report, change nothing */
	manifest_progress_fn progress;
	void *progress_context;
};

struct manifest_gc_result {
	uint64_t version;                 /* the store version gc started at */
	uint64_t horizon_before, horizon;
	uint64_t versions_reclaimed;      /* newly at or below the horizon, not pinned */
	uint64_t versions_pinned;         /* newly below the horizon, kept for a reader until the next gc */
	uint64_t live_blocks;             /* blocks a retained state reaches */
	uint64_t manifest_bytes_before;   /* manifest (and pack) space on disk before and after */
	uint64_t manifest_bytes_after;
	uint64_t manifest_bytes_reclaimed;
	uint64_t pack_bytes;              /* the size of the pack of retained history it wrote (0: dry run) */
	uint64_t segments_removed, segment_bytes_reclaimed;
	char held_by[JOURNAL_NAME_MAX + 1];  /* "" or the branch whose merge base kept the horizon lower */
	uint64_t held_at;                 /* that merge base's version */
};

/*
 * Retention (docs/ARCHITECTURE.md "Retention"): raises the horizon to the
 * newest version both keep rules allow (neither given: the horizon stays),
 * never to the latest version; keeps every branch's and tag's state and
 * every pinned version; returns to the file system every manifest page no
 * retained state reaches and removes every segment none names. Commits and
 * readers go on meanwhile. Failpoints gc.after_horizon, gc.after_prune,
 * gc.after_punch, gc.before_segment_remove: a crash leaves the store before
 * or after. Returns 0, -EBUSY (another gc runs), -EROFS, -EOPNOTSUPP (no
 * holes on this file system), -errno with error set.
 */
int manifest_gc(struct manifest *manifest, const struct manifest_gc_request *request,
		struct manifest_gc_result *result, struct error_info *error);

/* ---- settings (manifest_config.c) ------------------------------------------------- */

/* Appends the bytes of the settings file `config` (nothing when it was never written). 0 or -errno. */
int manifest_config_read(struct manifest *manifest, struct buf *out);
/* Replaces the settings file with bytes, whole, under the store lock. 0 or -errno with error set. */
int manifest_config_write(struct manifest *manifest, const void *bytes, size_t size, struct error_info *error);

/* ---- verify and repair ----------------------------------------------------------- */

/*
 * Offline check of everything: header, meta slots, every block of the
 * manifest in order (checksums), every root, tree and table reachable from
 * the latest root, every segment, every sidecar, and for each branch the
 * heads against a replay of its journal. Calls report once per finding.
 * Returns the number of findings (0: clean) or -errno if the walk could not run.
 */
int manifest_verify(struct manifest *manifest, void (*report)(const char *finding, void *context),
		    void *context, manifest_progress_fn progress, void *progress_context);

/* Rebuilds every branch's heads from its journal replay and publishes them
 * as one audited commit per branch that differed (actor "graphfs:repair"). */
int manifest_repair(struct manifest *manifest, int *repaired_branches, struct error_info *error);

/* What a rollback did. */
struct manifest_rollback_result {
	uint64_t version;           /* the version of the intact root the store is back at */
	uint64_t commits_dropped;   /* commit records after it that could still be decoded */
	uint64_t bytes_dropped;     /* manifest bytes cut */
};
/*
 * `repair --rollback`: a local store whose newest durable root is damaged
 * (every open fails) goes back to its newest intact root. Under the store
 * lock: dropped hears each commit record after that root that still decodes
 * (the work lost), the manifest is cut after that root, then the meta slots
 * are made to name it alone (failpoint rollback.after_cut: a crash between
 * leaves the store damaged still, and a rerun finishes). Segments only the
 * dropped commits named are left for gc. 0; -EINVAL (the newest root is intact),
 * -EOPNOTSUPP (an object store), -EIO (no intact root), -errno; error set.
 */
int manifest_rollback(const char *path, int (*dropped)(const struct commit_record *record, void *context),
		      void *context, struct manifest_rollback_result *result, struct error_info *error);
/* One commit on branch with no changes (the same heads), by actor: an audited act's log line. */
int manifest_audit_commit(struct manifest *manifest, const char *branch, const char *actor, const char *message,
			  struct error_info *error);

#endif
