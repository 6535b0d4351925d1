/*
 * table — table versions: fragments, deletion bitmaps, the key index,
 * staged writes and reads at any byte offset (layer: table).
 *
 * A table version is an immutable record (block type BLOCK_TABLE) naming:
 *   - the schema block (canonical schema JSON, BLOCK_SCHEMA);
 *   - the fragment tree: B+tree fragment sequence (u64 big-endian key) ->
 *     fragment descriptor {fragment block, rows in block, deletion bitmap
 *     block or null, live rows, live bytes}. In-order iteration of the
 *     fragment tree, skipping deleted rows, is the table's row order
 *     (insertion order; an updated row moves to the end);
 *   - the key tree: B+tree row id -> {fragment sequence u64, row index u32,
 *     line length u32} (docs/FORMAT.md §12): the row's slot, sequence + index
 *     (a fragment is numbered by its first row's slot; a compacted fragment
 *     holds the slots of several, table_descriptor_locate);
 *   - row count, rendered byte size (exact st_size), the next fragment sequence.
 * Fragments (BLOCK_FRAGMENT, zstd by default) hold up to TABLE_FRAGMENT_ROWS
 * rows or about TABLE_FRAGMENT_BYTES of canonical lines; deletion bitmaps
 * (BLOCK_BITMAP) are CRoaring portable serializations of deleted row indexes.
 * Byte layouts: docs/FORMAT.md.
 *
 * Costs kept (invariant 2):
 *   - a merge of k rows into a table of n rows: O(k log n) key-tree work plus
 *     one new fragment and, per touched old fragment, one new bitmap and one
 *     fragment-tree update — never O(n); a merge large enough to be staged in
 *     runs with k >= n / 16 rebuilds the key tree in one O(n + k) = O(k) pass;
 *   - an overwrite: O(rows written), bulk-built key tree;
 *   - opening a reader: O(fragments) to build the byte-offset map; each read
 *     decodes only the fragments it touches, each once for sequential reads.
 *
 * Invariants kept:
 *   1. row_count == sum of fragment live rows; byte_size == sum of live bytes.
 *   2. Every live row appears exactly once in the key tree, and the key tree
 *      points only at live rows.
 *   3. A table version never changes once written; all its blocks are immutable.
 */
#ifndef GRAPHFS_TABLE_H
#define GRAPHFS_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "btree.h"
#include "buf.h"
#include "codec.h"
#include "error_info.h"
#include "pager.h"
#include "schema.h"
#include "ulid.h"

#define TABLE_FRAGMENT_ROWS 8192
#define TABLE_FRAGMENT_BYTES (1u << 20)
#define TABLE_INLINE_LIMIT (4u << 20) /* staged bytes kept in memory before spilling to a segment */
#define TABLE_RUN_ENTRIES (1u << 20)   /* staged ids a spilled stage keeps in memory (about 36 MiB) */

/* The decoded table version record. */
struct table_info {
	struct ulid stable_id;
	struct ulid incarnation;
	uint64_t table_version;            /* 1 for the first version of an incarnation */
	struct block_address schema;       /* BLOCK_SCHEMA */
	struct block_address fragments;    /* fragment tree root (null: no fragments) */
	struct block_address keys;         /* key tree root (null: no rows) */
	struct block_address out_edges;    /* edge tables: (from, id) -> to tree (null: no rows, or a node table) */
	struct block_address in_edges;     /* edge tables: (to, id) -> from tree */
	uint64_t row_count;
	uint64_t byte_size;
	uint64_t next_fragment;            /* next fragment sequence number to assign */
};

/* Reads / appends a table version record. Return 0 or -errno. */
int table_info_read(struct pager *pager, struct block_address address, struct table_info *out);
int table_info_append(struct pager_append *append, const struct table_info *info,
		      struct block_address *address_out);

/*
 * Every block a table version reaches besides its own record: its schema,
 * the nodes of its fragment, key and adjacency trees, every fragment and
 * deletion bitmap. visit returns 0 to go on (below a tree node too), > 0 to
 * skip what is below a tree node (seen already), < 0 to stop. Below a key or
 * adjacency tree node in a segment nothing is visited (it points only into
 * its own segment).
 * Returns 0 or the first error.
 */
typedef int (*table_block_visit)(struct block_address block, void *context);
int table_blocks_each(struct pager *pager, const struct table_info *info, table_block_visit visit, void *context);

/* Reads the schema of a table version (parses the BLOCK_SCHEMA JSON). */
int table_schema_read(struct pager *pager, struct block_address schema_block, struct schema *out);

/* ---- reading ------------------------------------------------------------------ */

struct table_reader;

/* Opens a reader on one table version; O(fragments). Thread-compatible: one reader per thread. */
int table_reader_open(struct pager *pager, const struct table_info *info, struct table_reader **out);
void table_reader_free(struct table_reader *reader);
uint64_t table_reader_size(const struct table_reader *reader);
/*
 * Copies up to size rendered bytes starting at offset into out. Returns the
 * number of bytes (0 at or past the end) or -EIO / -ENOMEM. Sequential reads
 * decode each fragment once (the reader keeps the last fragment decoded).
 */
ssize_t table_reader_pread(struct table_reader *reader, void *out, size_t size, uint64_t offset);
/* Looks a row up by id through the key tree; appends its canonical line to row_out. 0 / -ENOENT / -errno. */
int table_lookup(struct pager *pager, const struct table_info *info, const void *id, size_t id_size,
		 struct buf *row_out);

/*
 * The rows where versions a and b of a table differ, in id order
 * (core/table_diff.c): visit gets the id and the row's canonical line (no
 * "\n") in a and in b (NULL: no such row there; valid during the call).
 * Rows with equal bytes are never reported. Key-tree subtrees both versions
 * share are skipped unread, so the cost is O(rows changed × log rows) plus
 * one fragment decode per run of changed rows in a fragment. visit returns 0
 * to go on; anything else stops the walk and is returned. Returns 0, that
 * value, -EIO or -ENOMEM.
 */
typedef int (*table_diff_visit)(const uint8_t *id, size_t id_size, const uint8_t *a_row, size_t a_size,
				const uint8_t *b_row, size_t b_size, void *context);
int table_diff(struct pager *pager, const struct table_info *a, const struct table_info *b, table_diff_visit visit,
	       void *context);

/*
 * Whether version b of a table is version a with rows appended (what a merge
 * makes): b is of a's incarnation and every fragment b holds numbered below
 * a's next_fragment is a's fragment of that number (its rows may have been
 * deleted since). b's rendering is then a's surviving rows in a's order
 * followed by the live rows of b's newer fragments. Returns 1 with
 * *tail_offset, where those newer rows begin in b's rendering; 0 when b is
 * not such a version (an overwrite, an optimize, another incarnation);
 * -EIO, -ENOMEM. O(fragments that differ × log fragments).
 */
int table_appended(struct pager *pager, const struct table_info *a, const struct table_info *b,
		   uint64_t *tail_offset);

/*
 * Compaction (core/table_compact.c): a version with the same rows, keys and
 * indexes whose runs of small fragments are merged. table_compaction_plan reads
 * the fragment tree and decides (TIERED: what the last commits made due;
 * FLUSH: every trailing small fragment); *out is NULL when nothing would merge.
 * table_compaction_prepare builds and compresses the merged fragments (and the
 * key entries a dense write moves) — the costly part, done outside the store
 * lock; table_compaction_apply appends them, their bitmaps, the fragment (and
 * key) tree and the new record, and sets *address_out (it prepares what was
 * not). codec: the store's. All return 0 or -EIO / -ENOMEM; apply leaves
 * appended bytes for the caller to abandon on error.
 */
enum table_compact_mode { TABLE_COMPACT_TIERED, TABLE_COMPACT_FLUSH };
struct table_compaction;
int table_compaction_plan(struct pager *pager, const struct table_info *info, enum table_compact_mode mode,
			  struct table_compaction **out);
int table_compaction_prepare(struct table_compaction *compaction, struct pager *pager, enum codec_kind codec);
int table_compaction_apply(struct table_compaction *compaction, struct pager *pager, struct pager_append *append,
			   enum codec_kind codec, struct block_address *address_out);
/* Live rows the compaction rewrites (0 for NULL). */
uint64_t table_compaction_rows(const struct table_compaction *compaction);
void table_compaction_free(struct table_compaction *compaction);

/*
 * Membership tests against one table version's key tree alone (no fragment
 * is read): a finder caches the decoded key-tree nodes within budget bytes
 * (btree.h), so ids asked in increasing order read each node once; once it
 * has been asked about more than 1/16 of the rows, it reads every id once
 * into a compact hash set (table.c "membership") and answers from that.
 */
struct table_finder;
/* Returns 0 or -ENOMEM. The finder reads info's key tree as it was when opened. */
int table_finder_open(struct pager *pager, const struct table_info *info, size_t budget,
		      struct table_finder **out);
void table_finder_free(struct table_finder *finder);
/* 1 if id is a live row of the version, 0 if not, or -EIO/-ENOMEM. */
int table_finder_has(struct table_finder *finder, const void *id, size_t id_size);

/*
 * An edge table's adjacency: its edges by one end, through a finder over the
 * out (TABLE_EDGE_FROM) or in (TABLE_EDGE_TO) tree of one version, caching
 * decoded nodes within budget bytes (docs/FORMAT.md §12.1).
 */
enum table_edge_end { TABLE_EDGE_FROM = 0, TABLE_EDGE_TO = 1 };
struct table_adjacency;
int table_adjacency_open(struct pager *pager, const struct table_info *info, enum table_edge_end end, size_t budget,
			 struct table_adjacency **out);
void table_adjacency_free(struct table_adjacency *adjacency);
/*
 * The edge of node (at this end) whose id comes first after `after` (NULL:
 * its first edge), in id order. Returns 1 with the edge id and the node at
 * its other end (valid until the next call), 0 when there is none, or -errno.
 * So "is node referenced" is one call, and listing a node's edges costs
 * O(log edges + answer).
 */
int table_adjacency_next(struct table_adjacency *adjacency, const void *node, size_t node_size, const void *after,
			 size_t after_size, const uint8_t **edge, size_t *edge_size, const uint8_t **other,
			 size_t *other_size);
/* Every edge of node at this end, in edge-id order. visit returns 0 to go on; anything else stops the
 * walk and is returned (as is -errno of a read). 0 after the last edge. */
int table_adjacency_each(struct table_adjacency *adjacency, const void *node, size_t node_size,
			 int (*visit)(const uint8_t *edge, size_t edge_size, const uint8_t *other, size_t other_size,
				      void *context),
			 void *context);

/*
 * The first edge of node at one end in a version that may exist only in an
 * unwritten append (a commit checking what it is about to publish; append
 * may be NULL). Returns 1 with the edge's id appended to edge_out, 0 if node
 * has no edge there (or the table has no rows), or -errno. O(log edges).
 */
int table_edges_first(struct pager *pager, struct pager_append *append, const struct table_info *info,
		      enum table_edge_end end, const void *node, size_t node_size, struct buf *edge_out);

/*
 * Checks that every edge's node at one end is a live row of node_info: one
 * merge of the index against the node table's key tree, O(edges + nodes).
 * Returns 0, or -EIO with message naming the first edge whose node is
 * missing (or what could not be read).
 */
int table_edges_check_endpoints(struct pager *pager, const struct table_info *edges, enum table_edge_end end,
				const struct table_info *nodes, char *message, size_t message_size);

/* ---- staging writes -------------------------------------------------------------- */

enum table_write_mode {
	TABLE_OVERWRITE = 0,  /* the rows become exactly the staged rows */
	TABLE_MERGE = 1,      /* upsert by id; staged deletes remove rows */
};

struct table_stage;

/*
 * Where a stage gets the id of a new segment before creating it: the store
 * wires this to the recovery sidecar (manifest_intent_new_segment), so the
 * segment is announced durably before it exists. Returns 0 or -errno.
 */
typedef int (*table_segment_allocator)(void *context, uint64_t *segment_id_out);

/*
 * Starts staging rows for one table. Staged canonical lines are kept in
 * memory up to TABLE_INLINE_LIMIT bytes and then spilled, as compressed
 * fragments, to a segment file of their own (pager_segment_create with an id
 * from allocate), so memory stays bounded by the ids staged. codec is used
 * for fragments. A spilled stage compresses and writes its fragments on a
 * thread of its own (at most 2 fragments queued), in the order they were
 * cut, so the segment's bytes do not depend on timing. Returns 0 or -ENOMEM.
 */
int table_stage_open(struct pager *pager, enum table_write_mode mode, enum codec_kind codec,
		     table_segment_allocator allocate, void *allocate_context,
		     struct table_stage **out);
void table_stage_free(struct table_stage *stage);  /* joins its writer thread; removes an unpublished segment */
/*
 * Makes the stage an edge table's: every row added must have from and to,
 * and the version it applies carries the adjacency indexes (docs/FORMAT.md
 * §12.1). Call before the first add. 0, -EINVAL (rows already added) or -ENOMEM.
 */
int table_stage_track_edges(struct table_stage *stage);
bool table_stage_tracks_edges(const struct table_stage *stage);

/*
 * The ids a sealed stage, applied on base as after, removes from the table:
 * for a merge its deletes of ids base has; for an overwrite every id of
 * base that after lacks (one merge of the two key trees). Reads through
 * append (may be NULL). visit returns 0 to go on, or an error to stop with.
 * Returns 0, visit's error, or -errno.
 */
int table_removed_ids(struct pager *pager, struct pager_append *append, const struct table_info *base,
		      const struct table_info *after, const struct table_stage *stage,
		      int (*visit)(void *context, const uint8_t *id, size_t id_size), void *context);
/*
 * Sets how many staged ids (rows or deletes) a spilled stage keeps in memory
 * (default TABLE_RUN_ENTRIES, at least 1): when it holds that many, it writes
 * them, sorted, as a run to an unnamed scratch file and starts over, so its
 * memory does not grow with the rows it stages. Later rows with an id held
 * in a run are found there (an overwrite refuses them, a merge supersedes).
 * Call before the first add.
 */
void table_stage_set_run_entries(struct table_stage *stage, uint32_t entries);
/*
 * Marks the stage's segment as published: called by the manifest once the
 * commit that references it is durable, so table_stage_free keeps the file.
 */
void table_stage_published(struct table_stage *stage);
enum table_write_mode table_stage_mode(const struct table_stage *stage);

/*
 * Adds one validated row (schema_row_parse output). In an overwrite a
 * second row with the same id is -EEXIST and a delete is -EINVAL; in a merge
 * the last row for an id wins. Returns 0 or -errno; on error the stage is
 * unchanged. A fragment that the stage's writer thread failed to write
 * fails every later add (and the seal) with that write's error.
 */
int table_stage_add(struct table_stage *stage, const struct schema_row *row);
/*
 * 1 if the stage holds a live (not deleted) row with this id — edge checks
 * within one commit — 0 if not, or -errno (a large stage's sorted id run
 * could not be read back).
 */
int table_stage_has(const struct table_stage *stage, const void *id, size_t id_size);
/* 1 if the stage deletes this id, 0 if not, or -errno as table_stage_has. */
int table_stage_deletes(const struct table_stage *stage, const void *id, size_t id_size);
uint64_t table_stage_rows(const struct table_stage *stage);     /* rows added (deletes included) */
uint64_t table_stage_bytes(const struct table_stage *stage);    /* canonical bytes staged */
/* The segment the stage spilled to, 0 if none (for the recovery sidecar). */
uint64_t table_stage_segment(const struct table_stage *stage);
/*
 * True once a sealed spilled overwrite has the key tree its writer thread
 * built while the rows came in increasing id order, so the seal did not
 * build one (docs/ARCHITECTURE.md "How a large write stays small in memory").
 */
bool table_stage_keys_streamed(const struct table_stage *stage);
/* Waits for the writer thread, flushes and fsyncs any spilled segment. Called before the
 * publish takes the store lock. Returns 0 or -errno (a write error of any fragment). */
int table_stage_seal(struct table_stage *stage);

/*
 * Applies a sealed stage on top of base (NULL: a new, empty incarnation
 * whose ids are taken from *out on entry) and appends the new table version:
 * fragments (inline ones into the manifest append), bitmaps, tree nodes and
 * the record. schema_block is the schema of the new version. On success
 * *out is the new version (table_version = base's + 1, or 1) and
 * *address_out its record. Called with the store lock held. Returns 0 or
 * -errno; on error nothing usable was appended (the publish is abandoned).
 */
int table_apply(struct pager *pager, struct pager_append *append, const struct table_info *base,
		struct table_stage *stage, struct block_address schema_block, struct table_info *out,
		struct block_address *address_out);

/*
 * Verify walk of one table version: every block's checksum, tree shapes,
 * invariants 1 and 2 above. Returns 0 or -EIO with message.
 */
int table_verify(struct pager *pager, const struct table_info *info, char *message,
		 size_t message_size);

#endif
