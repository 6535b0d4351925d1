/*
 * manifest_int.h — internals shared by the manifest files (manifest*.c). Not
 * part of the API: only the manifest files and the manifest unit tests include it.
 */
#ifndef GRAPHFS_MANIFEST_INT_H
#define GRAPHFS_MANIFEST_INT_H

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "btree.h"
#include "manifest.h"

/* ---- fixed layout of the manifest file (docs/FORMAT.md §2, §3) ----------- */

#define MANIFEST_META_OFFSET FILE_HEADER_SIZE     /* slot 0; slot 1 follows */
#define MANIFEST_META_SLOT_SIZE 4096
#define MANIFEST_META_ENCODED_SIZE 48
#define MANIFEST_ROOT_PAYLOAD_SIZE 120            /* root record payload, fixed */
#define MANIFEST_ROOT_BLOCK_SIZE (BLOCK_HEADER_SIZE + MANIFEST_ROOT_PAYLOAD_SIZE)
/*
 * The manifest grows by zero bytes preallocated a chunk at a time (docs/FORMAT.md §4): a
 * publish overwrites zeros inside the file, so its fsync neither allocates blocks nor
 * changes the file's size or extent tree (whose depth grows with the file). The chunk is
 * an eighth of the space the file occupies (its allocated blocks, which gc shrinks) as a
 * power of two, from 64 KiB to 1 MiB: a small store carries little padding, a large one
 * allocates once per ~250 one-row commits.
 */
#define MANIFEST_PREALLOCATE_MIN (64u << 10)
#define MANIFEST_PREALLOCATE_MAX (1u << 20)

static inline uint64_t manifest_preallocation(uint64_t file_size)
{
	uint64_t chunk = MANIFEST_PREALLOCATE_MIN;
	while (chunk < MANIFEST_PREALLOCATE_MAX && chunk * 2 * 8 <= file_size)
		chunk *= 2;
	return chunk;
}
#define MANIFEST_LOCK_WAIT_US (30u * 1000000u)    /* bounded wait for the store lock */
#define MANIFEST_SIDECAR_MAGIC 0x52534647u        /* "GFSR" read as little-endian u32 */
#define MANIFEST_SIDECAR_MAX_SEGMENTS 65536
#define MANIFEST_BRANCH_DEPTH_MAX 64             /* branches forked from branches, at most this deep */

struct meta_slot {
	bool valid;            /* magic, checksum and zero padding check */
	bool empty;            /* all zero: never written (not damage) */
	uint64_t sequence;
	uint64_t root_offset;
	uint64_t size;         /* manifest size just after that root */
	uint64_t version;
};

/* One pinned range of this handle, with how many pins share it (manifest_pins.c). */
struct pin_range {
	uint64_t first, last;
	uint32_t count;
};

struct manifest_pins {
	pthread_mutex_t mutex;          /* guards ranges */
	struct io_file file;            /* pins (descriptor -1: none, read-only without the file) */
	struct pin_range *ranges;
	size_t count, capacity;
	struct lease *lease;            /* in an object store: this handle's pins as a lease, or NULL */
	struct lease *gc_lease;         /* in an object store: held while this handle runs gc */
};

/* The states of a handle (manifest.c explains each): OPENING -> RECOVERING (read-write) -> OPEN;
 * any -> DAMAGED, for good. manifest_handle_enter checks each change. */
enum manifest_handle_state { MANIFEST_OPENING, MANIFEST_RECOVERING, MANIFEST_OPEN, MANIFEST_DAMAGED };

struct manifest {
	enum manifest_handle_state state;   /* guarded by state_mutex once open */
	char path[PATH_MAX];
	int directory;                  /* the store directory */
	struct io_file file;            /* manifest */
	struct io_file lock_file;       /* lock */
	struct io_wake_page wake;       /* lock's wake-up words (io.h; NULL words: none) */
	struct pager *pager;
	int flags;
	struct ulid store_id;
	uint32_t granule;               /* the header's (FORMAT.md §2): 0, or MANIFEST_GRANULE in a local
					   copy of a store kept in an object store */
	pthread_mutex_t publish_mutex;  /* one publish at a time in this process */
	/* branch delete asks this under the store lock before it publishes (NULL: nothing) */
	int (*delete_check)(const char *name, void *context, struct error_info *error);
	void *delete_check_context;
	pthread_mutex_t sync_mutex;     /* one sync at a time in this process (manifest_sync.c) */
	pthread_mutex_t state_mutex;    /* guards the fields below */
	bool have_latest;
	struct root_record latest;      /* newest root this handle shows: durable (a meta slot
					   names it, or this process made it durable) */
	uint64_t committed_size;        /* where latest ends */
	bool have_written;
	struct root_record written;     /* newest complete root seen in the file (>= latest): a
					   publish builds on it; it may still wait for its sync */
	uint64_t written_size;          /* where written ends: the blocks end there */
	uint64_t observed_size;         /* file size when the tail was last scanned */
	uint64_t listed_us;             /* in an object store: when the pieces were last listed
					   (monotonic; 0: list at the next refresh), or a listing failed */
	uint64_t unreachable_us;        /* in an object store: when a listing last failed because the
					   store was out of reach (monotonic; 0: never) */
	int out_of_reach;               /* that listing's error while no later listing succeeded (0: none):
					   what a refresh without a listing returns meanwhile */
	atomic_ulong stale_reads;       /* reads that used the last known state because the object
					   store was out of reach (manifest_stale_reads) */
	uint64_t durable_size;          /* newest valid meta slot's size: never truncated below */
	uint64_t meta_sequence;         /* newest valid meta slot's sequence (0: none) */
	bool tail_torn;                 /* the last scan met something other than zeros or the
					   end of the file right after latest */
	char damage_message[256];       /* DAMAGED: what is unreadable (the newest durable root) */
	struct manifest_pins pins;      /* readers' holds on versions (manifest_pins.c) */
	/* the space the manifest occupies, as last measured (manifest_allocated_bytes), and the
	 * file size and gc sweep it was measured at; guarded by the store lock */
	uint64_t allocated, allocated_for_size, allocated_for_sweep;
};

/* ---- record codecs (manifest_records.c) -------------------------------- */

void manifest_meta_encode(const struct meta_slot *slot, uint8_t out[MANIFEST_META_SLOT_SIZE]);
void manifest_meta_decode(const uint8_t bytes[MANIFEST_META_SLOT_SIZE], struct meta_slot *out);
int manifest_root_encode(const struct root_record *root, struct buf *out);
int manifest_root_decode(const void *bytes, size_t size, struct root_record *out);
int manifest_branch_encode(const struct branch_record *branch, struct buf *out);
int manifest_branch_decode(const void *bytes, size_t size, struct branch_record *out);
int manifest_root_read(struct pager *pager, struct block_address address, struct root_record *out);

/* The wall clock (records' times) and a monotonic clock (waits, refresh bounds), in µs. */
uint64_t manifest_now_us(void);
uint64_t manifest_monotonic_us(void);
/* Moves the handle to state next (a debug build checks the change; DAMAGED stays). */
void manifest_handle_enter(struct manifest *manifest, enum manifest_handle_state next);
/* Table and branch names: schema_name_is_valid, with a message naming what is wrong. */
int manifest_name_check(const char *what, const char *name, struct error_info *error);

/* ---- latest root -------------------------------------------------------- */

/*
 * Reads the meta slots; moves the handle's latest root to the one the newest
 * names (durable: manifest_sync.c writes a slot only after the fsync). No
 * scan of the tail: a root no slot names yet is not shown. Caller holds
 * state_mutex. Returns 0 or -errno.
 */
int manifest_state_refresh(struct manifest *manifest, bool *changed);
/*
 * Under the store lock, before a publish: refresh, then scan every complete
 * root after the newest one known (written, possibly not durable yet: the
 * publish builds on it, and its own sync covers it); on read-write handles,
 * truncate a torn tail (bytes after the last complete root that are neither
 * zeros nor the end of the file). 0 or -errno with error set.
 */
int manifest_refresh_for_publish(struct manifest *manifest, struct error_info *error);
/*
 * The same, then (read-write) settle: every written root is made durable and
 * announced (manifest_sync_through), so that what the caller does under the
 * lock next (recovery, gc, a snapshot copy) sees one durable latest root.
 */
int manifest_refresh_locked(struct manifest *manifest, struct error_info *error);
/* Where blocks go on after zeros met at offset right after a root (FORMAT.md §2,
 * §23): the next granule in an object store or a local copy of one; offset itself
 * (no gap: the zeros end the blocks) in a local store. */
uint64_t manifest_gap_end(const struct manifest *manifest, uint64_t offset);
/* Reads blocks forward from start while they are complete and verified; the
 * last root continuing candidate's sequence wins (manifest.c). */
int manifest_scan_tail(struct manifest *manifest, uint64_t start, uint64_t file_size,
		       struct root_record *candidate, bool *have_candidate, uint64_t *end, bool *torn);
/* The written-root hint (manifest.c): recorded under the store lock after a
 * publish's pwrite; read back as the root it names once that root is read and
 * checked, if its sequence is above after_sequence and it ends within
 * file_size (false: no usable hint; scan instead). */
void manifest_written_hint_write(struct manifest *manifest, const struct root_record *root, uint64_t end);
bool manifest_written_hint_root(struct manifest *manifest, uint64_t after_sequence, uint64_t file_size,
				struct root_record *root, uint64_t *end);
/* The space the manifest occupies on disk (st_blocks), for the preallocation chunk:
 * measured again only when file_size or swept_below (the base root's gc sweep) differ
 * from the last measurement. file_size itself when it cannot be measured (or in an
 * object store). Called under the store lock. */
uint64_t manifest_allocated_bytes(struct manifest *manifest, uint64_t file_size, uint64_t swept_below);
/* The newest valid meta slot (out->valid false: none). 0 or -errno (read). */
int manifest_meta_newest(struct manifest *manifest, struct meta_slot *out);
/*
 * Group commit (manifest_sync.c): returns once root (ending at end) is
 * durable — at once if a meta slot already names it or a later root; else
 * one fdatasync that also covers every root other publishes wrote before it,
 * then the meta slot of the newest of them. after_fsync: a failpoint to hit
 * between the fsync and the slot (NULL: none). Called without the store lock.
 * 0, or -errno with error set (durability unknown: see manifest_publish.c).
 */
int manifest_sync_through(struct manifest *manifest, const struct root_record *root, uint64_t end,
			  const char *after_fsync, struct error_info *error);
/* Store lock: process mutex + flock with a bounded wait (-EAGAIN). */
int manifest_lock(struct manifest *manifest, struct error_info *error);
void manifest_unlock(struct manifest *manifest);
/* Opens the directory path for a new store (or a snapshot), creating it (not its
 * parents) when missing; -EEXIST if it exists and is not empty. Returns the fd. */
int manifest_directory_prepare(const char *path, bool *created, struct error_info *error);
/* Writes root's meta slot (sequence % 2) into the manifest file, not fsynced. */
int manifest_meta_write_file(struct io_file *file, const struct root_record *root, uint64_t size);
/* Both slots naming root (a snapshot's: one damaged slot leaves it readable). 0 or -errno. */
int manifest_meta_write_both(struct io_file *file, const struct root_record *root, uint64_t size);
/* The file whose presence makes a store a read-only snapshot (FORMAT.md §1). */
#define MANIFEST_SNAPSHOT_MARKER "snapshot"

/* Writes the meta slot of root (sequence % 2), not fsynced. */
int manifest_meta_write(struct manifest *manifest, const struct root_record *root, uint64_t size);
/* A root this process just wrote (under the store lock): the base of the next
 * publish; size is where it ends, file_size the manifest's size after the
 * write (larger when preallocated; 0: unchanged). Never moves backwards. */
void manifest_state_written(struct manifest *manifest, const struct root_record *root,
			    uint64_t size, uint64_t file_size);
/* A root known durable: shown as latest (and written) unless a newer one is. */
void manifest_state_durable(struct manifest *manifest, const struct root_record *root, uint64_t size);

/* Looks branch up in a branches tree. 0, -ENOENT, -EIO. */
int manifest_branch_find(struct pager *pager, struct block_address branches, const char *name,
			 struct branch_record *out);
/* The last root published at version (the latest root for its own version). */
int manifest_root_at(struct manifest *manifest, const struct root_record *latest, uint64_t version,
		     struct root_record *out);

/* ---- the version index (manifest_index.c, docs/FORMAT.md §16.1) -------------- */

#define MANIFEST_VERSIONS_DEPTH 4      /* interior levels above the leaves */
#define MANIFEST_VERSION_LIMIT (1ull << 40)

/* One version's entry: its last root, and what a branch's log needs of its commit. */
struct manifest_version_entry {
	struct block_address root;     /* the last root record published at the version */
	uint64_t commit_time_us;       /* the time of the version's commit (version 0: of the first root) */
	uint64_t parent_version;       /* the version of that commit's first parent; 0: it has none */
};

/* The entry of version. Reads go through append when it is non-NULL (blocks
 * appended in this publish). 0, -ENOENT (not in the index), -EIO, -ENOMEM. */
int manifest_versions_get(struct pager *pager, struct pager_append *append,
			  struct block_address root, uint64_t version, struct manifest_version_entry *out);
/* Appends the path of an index that is root with version's entry set: exactly
 * depth + 1 new nodes. 0 and *root_out, or -errno (nothing usable appended). */
int manifest_versions_put(struct pager *pager, struct pager_append *append,
			  struct block_address root, uint64_t version, const struct manifest_version_entry *entry,
			  struct block_address *root_out);
/* A cursor for many lookups in one index: it keeps the nodes of its last
 * path, so a walk over nearby versions reads each node once. get: as
 * manifest_versions_get. open: 0 or -ENOMEM. */
struct manifest_versions_cursor;
int manifest_versions_cursor_open(struct pager *pager, struct block_address root,
				  struct manifest_versions_cursor **out);
int manifest_versions_cursor_get(struct manifest_versions_cursor *cursor, uint64_t version,
				 struct manifest_version_entry *out);
void manifest_versions_cursor_free(struct manifest_versions_cursor *cursor);
/*
 * Verify walk of the version index: every node's checksum, level, key order
 * and slot placement. visit (may be NULL) gets every entry in version order.
 * Returns 0 or -EIO with message.
 */
int manifest_versions_verify(struct pager *pager, struct block_address root,
			     int (*visit)(uint64_t version, const struct manifest_version_entry *entry, void *context),
			     void *context, char *message, size_t message_size);
/* Whether retention keeps some version of [first, last] at or below the horizon (a pin). */
typedef bool (*manifest_versions_keep)(uint64_t first, uint64_t last, void *context);
/*
 * gc's walk of the index: visit_node for every node whose versions are not
 * all reclaimed, visit_entry for every version above horizon or kept (both
 * may be NULL). Returns 0 or the first error.
 */
int manifest_versions_retained(struct pager *pager, struct block_address root, uint64_t horizon,
			       manifest_versions_keep keep, void *keep_context,
			       int (*visit_node)(struct block_address node, void *context),
			       int (*visit_entry)(uint64_t version, struct block_address root, void *context),
			       void *context);
/* The index without the versions at or below horizon that keep does not keep:
 * new nodes only on the paths that changed (appended), the rest shared. *root_out
 * may be null (nothing left). Returns 0 or -errno. */
int manifest_versions_prune(struct pager *pager, struct pager_append *append, struct block_address root,
			    uint64_t horizon, manifest_versions_keep keep, void *keep_context,
			    struct block_address *root_out);

/* ---- commit ids (docs/FORMAT.md §16.2) ------------------------------------------ */

/* The id of the commit of version made from base (an intent's or a fresh ULID). */
void manifest_commit_id(const struct ulid *base, uint64_t version, struct ulid *out);
/* The version a commit id carries. */
uint64_t manifest_commit_id_version(const struct ulid *commit);
/* The commit record of version (1..latest) and its address. 0, -ENOENT, -EIO. */
int manifest_version_commit(struct manifest *manifest, const struct root_record *latest,
			    uint64_t version, struct block_address *record);

/* ---- publishing (manifest_publish.c) ------------------------------------ */

/* One publish in progress: the store lock is held from begin to end. */
/* Where a publish is (manifest_publish.c): a crash before DURABLE leaves the
 * store as before, from DURABLE on as after; nothing cuts a DURABLE root. */
enum publish_state {
	PUBLISH_IDLE,       /* not started, or ended */
	PUBLISH_LOCKED,     /* store lock held, base re-read; blocks being appended in memory */
	PUBLISH_APPENDED,   /* the blocks are in the file (one pwrite), not yet durable */
	PUBLISH_QUEUED,     /* store lock released; waiting for the fsync that covers it */
	PUBLISH_DURABLE,    /* fsynced: the root record is the commit point */
	PUBLISH_PUBLISHED,  /* the handle's state and the meta slot show the new root */
};

/* A commit's race against other hosts' writers (manifest_publish.c): begin, then after each
 * attempt manifest_race_again says whether to try again (a lost race, -ESTALE, on an object
 * store, for up to 30 s after a short random pause), setting the error when it gives up. */
struct manifest_race_state {
	uint64_t began;
	unsigned attempts;
};

struct manifest_race_state manifest_race_begin(void);
bool manifest_race_again(struct manifest *manifest, struct manifest_race_state *race, int rc, struct error_info *error);
/*
 * Runs once(manifest, context, error) again, after a short random pause, while
 * it loses an object store's race for the next piece (-ESTALE: nothing was
 * written; io_pieced.c), up to 64 times; a local store runs it once (its store
 * lock orders writers). Returns what the last run returned.
 */
int manifest_race_retry(struct manifest *manifest,
			int (*once)(struct manifest *manifest, void *context, struct error_info *error), void *context,
			struct error_info *error);

struct manifest_publish {
	struct manifest *manifest;
	enum publish_state state;
	struct root_record base;        /* the latest root under the lock */
	uint64_t base_size;             /* where this publish's blocks start (io_append_offset of base's end) */
	struct pager_append *append;
	struct btree *branches;
	struct btree *tags;             /* NULL, or the tags tree this publish changed (flushed at finish) */
	bool indexed;                   /* a commit's history blocks are appended (manifest_publish_history) */
	struct block_address versions;  /* ... and this is its version index (the new root's) */
	struct block_address commit_record;   /* ... and this its commit record */
	uint64_t state_start;           /* offset in the tail (from base_size) where the blocks a read of
					   the latest state needs begin: after the history blocks (0: the start) */
	bool locked;                    /* store lock held (LOCKED, APPENDED) */
	bool outcome_unknown;           /* QUEUED and the sync failed: a later fsync may still
					   make the root durable (the caller keeps its sidecar) */
	struct {                        /* a gc's root (manifest_gc.c); active false otherwise */
		bool active;
		uint64_t horizon;           /* the root's horizon (never below the base's) */
		bool prune;                 /* drop reclaimed versions from the index; swept_below = this root */
		bool (*keep)(uint64_t first, uint64_t last, void *context);
		void *keep_context;
	} retention;
};

int manifest_publish_begin(struct manifest *manifest, struct manifest_publish *publish,
			   struct error_info *error);
/* Unit tests only: called by every publish on entering QUEUED (store lock released,
 * its sync not begun), so that a test can hold one there. NULL (the default): none. */
extern void (*manifest_publish_queued_hook)(struct manifest *manifest);
/*
 * Appends the branches (and tags) tree and the root record, makes them
 * durable and updates the meta slot. commit non-NULL: a new version, whose
 * history blocks manifest_publish_history appended. On error the tail is
 * truncated back: nothing is published. Returns 0 or -errno.
 */
int manifest_publish_finish(struct manifest_publish *publish, const struct ulid *commit, uint64_t time_us,
			    struct root_record *root_out, struct error_info *error);
void manifest_publish_end(struct manifest_publish *publish);
/* The time to stamp on this publish: now, or the latest root's time if the
 * clock went back (root times never decrease; manifest_history.c invariant 1). */
uint64_t manifest_publish_time(const struct manifest_publish *publish);

/*
 * A commit's tail is laid out in two parts (docs/FORMAT.md §18 "The order of
 * a tail"): first what only history reads (table versions, fragments, the
 * commit record, the version index path), then what a read of the latest
 * state needs (heads and names nodes, the branches tree, the root). Used by
 * manifest_commit and by repair, in this order:
 *
 * manifest_publish_history appends the commit record of branch's next commit
 * (filling record's version and parents; its id, time and changes are the
 * caller's) and the version index path of the base, and marks where the
 * state part begins. Returns 0 or -errno (the publish is then abandoned by
 * manifest_publish_end: nothing was written).
 *
 * manifest_publish_commit_state then publishes that commit with heads and
 * names (flushed into publish->append after manifest_publish_history) as the
 * branch's trees. Returns 0 or -errno.
 */
int manifest_publish_history(struct manifest_publish *publish, const struct branch_record *branch,
			     struct commit_record *record, struct error_info *error);
int manifest_publish_commit_state(struct manifest_publish *publish, struct branch_record *branch,
				  const struct commit_record *record, struct block_address heads,
				  struct block_address names, struct root_record *root_out,
				  struct error_info *error);

/* Makes room for one more item in a growing array: items (a typed pointer
 * lvalue) of capacity items, count used; doubles it, from 16. Evaluates to 0,
 * or -ENOMEM with the array unchanged. */
#define MANIFEST_ARRAY_GROW(items, capacity, count)                                          \
	__extension__({                                                                      \
		int grow_rc_ = 0;                                                            \
		if ((count) >= (capacity)) {                                                 \
			size_t grow_capacity_ = (capacity) ? (capacity) * 2 : 16;            \
			void *grow_items_ = realloc((items), grow_capacity_ * sizeof *(items)); \
			if (grow_items_) {                                                   \
				(items) = grow_items_;                                       \
				(capacity) = grow_capacity_;                                 \
			} else {                                                             \
				grow_rc_ = -ENOMEM;                                          \
			}                                                                    \
		}                                                                            \
		grow_rc_;                                                                    \
	})

/* ---- pins (manifest_pins.c) ------------------------------------------------ */

/* Opens (read-write: creates) the pins file. 0 or -errno; read-only without one: 0, no pins. */
int manifest_pins_open(struct manifest *manifest, bool read_only);
void manifest_pins_close(struct manifest *manifest);
/* gc's turn: +1 on the sweep sequence (after its horizon is durable, before it lists pins). */
int manifest_sweep_sequence_advance(struct manifest *manifest);
/* The exclusive gc lock (never waits): 0, -EBUSY (another gc runs), -EROFS (no pins file). */
int manifest_gc_lock(struct manifest *manifest);
void manifest_gc_unlock(struct manifest *manifest);   /* releases the lock or the hold */
/* Every segment a retained state of latest reaches (gc's mark with latest's
 * horizon): *ids (malloc'd, free it) and *count. 0 or -errno. */
int manifest_retained_segments(struct manifest *manifest, const struct root_record *latest, uint64_t **ids,
			       size_t *count);
/* The pinned versions in [low, high] held by any process (this handle's included),
 * as sorted, possibly overlapping ranges. 0 or -errno; free with manifest_pin_list_free. */
struct manifest_pin_list {
	struct pin_range *ranges;
	size_t count, capacity;
};
int manifest_pins_list(struct manifest *manifest, uint64_t low, uint64_t high, struct manifest_pin_list *list);
bool manifest_pin_list_has(const struct manifest_pin_list *list, uint64_t version);
void manifest_pin_list_free(struct manifest_pin_list *list);

/* ---- recovery (manifest_recovery.c) -------------------------------------- */

/* Under the store lock: truncate the torn tail, then settle every dead writer's sidecar. */
int manifest_recover(struct manifest *manifest, struct error_info *error);
/* Removes the intent's sidecar and frees it (after its commit is durable). */
int manifest_intent_complete(struct manifest_intent *intent);

struct manifest_sidecar {
	uint32_t version;
	struct ulid commit;           /* the intent's ULID */
	uint64_t base_version;        /* the store version when the intent began */
	uint32_t writer_pid;
	uint32_t segment_count;
	uint64_t *segments;           /* owned */
};
/* The names of a store subdirectory (recovery/, segments/), collected by
 * io_directory_list(..., manifest_name_list_collect, &list); free(list.names). */
struct manifest_name_list {
	char (*names)[256];
	size_t count;
};
int manifest_name_list_collect(const char *name, void *context);

/* Decodes a sidecar file's bytes: 0, -EPROTO for another sidecar version (only version
 * set), -EIO if damaged, -ENOMEM. On success the caller frees with manifest_sidecar_free. */
int manifest_sidecar_decode(const uint8_t *bytes, size_t size, struct manifest_sidecar *out);
/* Appends a sidecar file's bytes (docs/FORMAT.md: header, then one BLOCK_SIDECAR block
 * stored uncompressed) to out. 0 or -ENOMEM (out may then hold part of them). */
int manifest_sidecar_encode(const struct manifest_sidecar *sidecar, struct buf *out);
void manifest_sidecar_free(struct manifest_sidecar *sidecar);

/* ---- the replay of a branch's journal (manifest_replay.c) ---------------------- */

/* A branch's heads as its journal says they are. */
struct manifest_replay {
	struct head_row *heads;       /* sorted by stable id */
	size_t count;
	size_t capacity;
};
void manifest_replay_free(struct manifest_replay *replay);
/*
 * Replays the branch's journal: the first-parent chain from its head to the
 * first commit, applied oldest first. Below a gc horizon the chain ends at
 * the oldest commit kept: the replay starts from the state that commit made
 * (or, if even that commit is below the horizon, there is nothing to replay
 * and the branch's heads are the replay). Returns 0, or -EIO with problem set.
 */
int manifest_replay_branch(struct manifest *manifest, const struct branch_record *branch,
			   struct manifest_replay *out, char *problem, size_t problem_size);
/* The replay's live heads in names-tree order (free the array), or NULL: out of memory. */
const struct head_row **manifest_replay_live_by_name(const struct manifest_replay *replay, size_t *count);
/* The first field in which two head rows differ, or NULL. */
const char *manifest_replay_head_difference(const struct head_row *a, const struct head_row *b);
/*
 * Compares the branch's heads and names trees with the replay: calls differ (when
 * not NULL) with one line per difference. Returns the number of differences, or
 * -errno if a tree cannot be read.
 */
int manifest_replay_compare(struct manifest *manifest, const struct branch_record *branch,
			    const struct manifest_replay *replay, void (*differ)(void *context, const char *line),
			    void *context);
/* Every branch record of a root, collected (a manifest_branches_each visitor, manifest.c; free
 * list->branches). 0 or -ENOMEM. */
struct manifest_branch_list {
	struct branch_record *branches;
	size_t count;
};
int manifest_branch_list_add(const struct branch_record *branch, void *context);
/* The names tree's order of two names (bytes, then length). */
int manifest_name_compare(const char *a, const char *b);

#endif
