/*
 * table_int.h — internals shared by the table files (table*.c; layer: table).
 *
 * A large stage keeps at most TABLE_RUN_ENTRIES staged ids in memory. When
 * that many are held, they are sorted and written, as one run, to an unnamed
 * scratch file (pager_scratch_open); memory then starts over. The runs are
 * searched when a later row names an id again (an overwrite refuses it, a
 * merge supersedes the earlier row) and merged, in id order, when the stage
 * is applied. So the memory of a stage is bounded by one run plus, per run,
 * a block index and a filter (about 2.2 bytes per id), whatever its size.
 */
#ifndef GRAPHFS_TABLE_INT_H
#define GRAPHFS_TABLE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <pthread.h>
#include <stdatomic.h>

#include <roaring/roaring.h>

#include "pager.h"
#include "table.h"

/* One staged id as a run holds it. */
struct stage_record {
	const uint8_t *id;      /* valid until the next call on the object that returned it */
	uint16_t id_size;
	bool is_delete;         /* a staged delete (merge): no row */
	uint32_t fragment;      /* rows: stage fragment ordinal */
	uint16_t row_index;     /* rows: row in that fragment */
	uint32_t line_size;     /* rows: bytes of the canonical line; 0 for deletes */
};

/* The sorted runs of one stage and their scratch file. Used by one thread at a time. */
struct stage_runs;

/* Creates an empty set; the scratch file is opened by the first run. 0 or -ENOMEM. */
int table_runs_open(struct pager *pager, struct stage_runs **out);
/* Closes the scratch file (its space returns) and frees everything. NULL is a no-op. */
void table_runs_free(struct stage_runs *runs);
size_t table_runs_count(const struct stage_runs *runs);          /* runs written */
uint64_t table_runs_records(const struct stage_runs *runs);      /* records in them */

/*
 * Writes one run of exactly `records` records (which sizes its filter), given
 * by table_runs_add in strictly increasing id order, then table_runs_end.
 * Each returns 0 or -errno (-EINVAL: out of order or more records than
 * announced; -EIO / -ENOSPC: the scratch file). After any error, or instead
 * of end, table_runs_abandon drops the run being written: the set is then
 * as it was before begin.
 */
int table_runs_begin(struct stage_runs *runs, uint64_t records);
int table_runs_add(struct stage_runs *runs, const struct stage_record *record);
int table_runs_end(struct stage_runs *runs);
void table_runs_abandon(struct stage_runs *runs);

/*
 * Finds id in the newest run that holds it (a run is skipped without I/O when
 * id is outside its range or its filter rules it out). Returns 1 with *out
 * set (out->id valid until the next call on runs), 0 if no run holds it, or
 * -EIO (a scratch block read back damaged) / -errno.
 */
int table_runs_find(struct stage_runs *runs, const void *id, size_t id_size, struct stage_record *out);

/*
 * Every id of every run once, in increasing id order; for an id in several
 * runs, the record of the newest. Reads the runs block by block (one block
 * buffer per run). next returns 1 with *out (valid until the following
 * next), 0 at the end, or -errno. Runs must not be added while a cursor is
 * open.
 */
struct stage_runs_cursor;
int table_runs_cursor_open(struct stage_runs *runs, struct stage_runs_cursor **out);
int table_runs_cursor_next(struct stage_runs_cursor *cursor, struct stage_record *out);
void table_runs_cursor_free(struct stage_runs_cursor *cursor);

/* ---- table_edges.c: what an edge table's stage records for its adjacency indexes ---- */

struct stage_edges;

/* Returns 0 or -ENOMEM. */
int table_edges_stage_open(struct pager *pager, enum table_write_mode mode, struct stage_edges **out);
void table_edges_stage_free(struct stage_edges *edges);
/* Records a row or delete the stage has just accepted. 0, -EINVAL (sealed) or -errno. */
int table_edges_stage_add(struct stage_edges *edges, const struct schema_row *row);
/* Sorts what was recorded; a spilled overwrite (segment given) builds its two trees into the segment. 0 or -errno. */
int table_edges_stage_seal(struct stage_edges *edges, struct pager_segment *segment);
/* The trees of an overwrite, or of a merge into an empty table, built into append (or prebuilt). 0 or -errno. */
int table_edges_stage_apply_bulk(struct stage_edges *edges, struct pager_append *append, struct block_address *out_root,
			   struct block_address *in_root);

/*
 * A merge into a table with rows: open on the base's trees, remove the entries
 * of every base row the merge replaces or deletes (its canonical line), then
 * finish: adds the stage's rows and flushes both trees. Each returns 0 or
 * -errno (-EIO: a line that is not a canonical edge row, or a row without its
 * entries).
 */
struct table_edges_update;
int table_edges_update_open(struct stage_edges *edges, struct pager *pager, struct pager_append *append,
			    const struct table_info *base, struct table_edges_update **out);
int table_edges_remove_line(struct table_edges_update *update, const uint8_t *line, size_t size);
int table_edges_update_finish(struct table_edges_update *update, struct pager_append *append,
			      struct block_address *out_root, struct block_address *in_root);
void table_edges_update_free(struct table_edges_update *update);

/*
 * The JSON string at line[*at] (its opening quote): *out points into line when
 * it has no escapes, else into scratch, where it is decoded; *at moves past its
 * closing quote. 0, -EIO (not a string) or -ENOMEM.
 */
int table_line_string(const uint8_t *line, size_t size, size_t *at, struct buf *scratch, const uint8_t **out,
		      size_t *out_size);
/* The id, from and to of a canonical edge line, unescaped. 0, -EIO or -ENOMEM. */
int table_edge_line_parse(const uint8_t *line, size_t size, struct buf *id, struct buf *from, struct buf *to);

/* ---- shared by table.c, table_stage.c, table_apply.c and table_verify.c ----------
 * The layouts are docs/FORMAT.md §10–§13; the invariants a stage keeps (the
 * numbers below refer to them) are at the top of table_stage.c. */

#define TABLE_RECORD_SIZE (16 + 16 + 8 + 5 * BLOCK_ADDRESS_SIZE + 8 + 8 + 8) /* docs/FORMAT.md §10 */
#define DESCRIPTOR_SIZE (BLOCK_ADDRESS_SIZE + 4 + BLOCK_ADDRESS_SIZE + 4 + 8)
#define KEY_VALUE_SIZE (8 + 4 + 4)
#define SEQUENCE_KEY_SIZE 8

struct fragment_descriptor {
	struct block_address block;
	uint32_t rows;                 /* rows in the fragment block */
	struct block_address bitmap;   /* deletion bitmap, null if none */
	uint32_t live_rows;
	uint64_t live_bytes;
};

struct key_value {
	uint64_t sequence;             /* fragment sequence */
	uint32_t row_index;            /* row in that fragment */
	uint32_t row_size;             /* bytes of the row's canonical line */
};

/*
 * One decoded fragment. Payload (FORMAT.md §11): u32 rows n, n u32 line
 * lengths, the lines. Lengths (not offsets) because similar lengths compress
 * to almost nothing; the ends are summed up once per decode.
 */
struct fragment_view {
	struct buf raw;
	uint32_t *ends;                 /* end offset of each line within lines */
	size_t ends_capacity;
	uint32_t rows;
	const uint8_t *lines;
	size_t lines_size;
	roaring_bitmap_t *deleted;      /* NULL when no row is deleted */
	uint32_t live_rows;
	uint64_t live_bytes;
};

enum {
	ENTRY_DELETE = 1,   /* a staged delete (merges) */
	ENTRY_DEAD = 2,     /* superseded by a later entry for the same id */
	ENTRY_CUT = 4,      /* the row is in stage fragment `fragment` at `row_index` */
};

/*
 * One staged row or delete: 16 bytes (plus its id in stage->ids and
 * 7 to 14 bytes of id map), the whole per-row cost of a large import.
 */
struct stage_entry {
	uint64_t id_offset : 37;        /* into stage->ids (STAGE_IDS_LIMIT) */
	uint64_t id_size : 11;          /* 1 .. BTREE_MAX_KEY */
	uint64_t flags : 3;
	uint64_t row_index : 13;        /* ENTRY_CUT: row index in its stage fragment */
	uint32_t line_size;             /* bytes of the canonical line, 0 for deletes */
	uint32_t location;              /* ENTRY_CUT: stage fragment ordinal; pending: offset in pending_lines */
};

#define STAGE_IDS_LIMIT (UINT64_C(1) << 37)
_Static_assert(sizeof(struct stage_entry) == 16, "a stage entry is 16 bytes");
_Static_assert(BTREE_MAX_KEY < (1 << 11), "ids fit stage_entry.id_size");
_Static_assert(TABLE_FRAGMENT_ROWS <= (1 << 13), "row indexes fit stage_entry.row_index");

struct stage_fragment {
	struct block_address address;   /* spilled: its block in the segment (set once written); inline: null */
	struct buf payload;             /* inline: the raw payload, appended at apply */
	uint64_t slot;                  /* its first row's slot within the stage: the rows cut before it
					   (docs/FORMAT.md §12: a fragment's number is the slot of its first row) */
	uint32_t rows;
	uint32_t live_rows;
	uint64_t live_bytes;
	roaring_bitmap_t *dead;         /* rows that died after the cut, NULL if none */
};

/*
 * The spill writer: a thread that compresses and writes the fragments cut
 * from a spilled stage, in the order they were cut, while the stage keeps
 * taking rows. At most STAGE_QUEUE_DEPTH fragments wait or are being
 * written; their payloads are job buffers reused from one fragment to the
 * next, so memory stays bounded.
 */
#define STAGE_QUEUE_DEPTH 2

struct stage_job {
	struct buf payload;             /* the raw fragment payload */
	struct buf keys;                /* KEYS_STREAMED: the ids of its rows, in row order, each as
					   u16 size (little-endian) then the id; empty otherwise */
	uint32_t fragment;              /* stage fragment ordinal */
	uint64_t slot;                  /* its slot (stage_fragment.slot): the writer thread reads no fragment */
	struct block_address address;   /* written: the block's address */
};

struct stage_writer {
	pthread_t thread;
	bool running;                   /* the thread exists and has not been joined */
	pthread_mutex_t lock;
	pthread_cond_t changed;         /* a job was submitted or completed, or stopping was set */
	struct stage_job jobs[STAGE_QUEUE_DEPTH];
	uint64_t submitted;             /* jobs handed over (job n uses jobs[n % STAGE_QUEUE_DEPTH]) */
	uint64_t completed;             /* jobs written (or skipped after a failure) */
	uint64_t harvested;             /* completed jobs whose address was copied to its fragment */
	bool stopping;
	_Atomic int failure;            /* first write error, 0 if none; written under lock, read without */
	/*
	 * KEYS_STREAMED: the overwrite's key tree, added to job by job after each
	 * fragment is written. Only the writer thread touches it while it runs;
	 * the seal finishes it (or, if the stream was given up, frees it) after
	 * the join. NULL until the first job with keys.
	 */
	struct btree_builder *keys;
};

/*
 * How a spilled overwrite gets its key tree (invariant 11 of table_stage.c):
 * streamed by the writer while the rows arrive in strictly increasing id
 * order, or built by the seal from the entries or runs.
 */
enum stage_keys_build {
	KEYS_BUILT_AT_SEAL = 0,         /* merges, and overwrites whose ids came out of order */
	KEYS_STREAMED,                  /* every id so far above the one before: each cut fragment's ids go
					   to the writer with it */
};

/* The states of a stage (table_stage.c). */
enum stage_state { STAGE_OPEN, STAGE_SEALED, STAGE_PUBLISHED };

struct table_stage {
	struct pager *pager;
	enum table_write_mode mode;
	enum codec_kind codec;
	table_segment_allocator allocate;
	void *allocate_context;
	struct pager_segment *segment;  /* non-NULL once spilled */
	uint64_t segment_id;
	enum stage_state state;         /* table_stage.c "States of a stage"; stage_enter checks each change */

	struct stage_entry *entries;
	size_t entry_count, entry_capacity;
	struct buf ids;                 /* every staged id, concatenated */
	/*
	 * The id map: open addressing, linear probing. A slot is the entry
	 * index + 1 in slots and a one-byte tag from the id's hash in tags (0:
	 * empty), so a probe reads an entry and its id only when the tags match:
	 * 5 bytes a slot.
	 */
	uint32_t *slots;
	uint8_t *tags;
	size_t slot_capacity;           /* power of two */
	size_t distinct;                /* entries that are not DEAD (the ids the map names) */
	bool ids_ascending;             /* invariant 8: entries in strictly increasing id order, map empty */

	struct buf pending_lines;       /* lines of rows not yet cut */
	uint32_t *pending;              /* entry indexes of those rows, in order */
	size_t pending_count, pending_capacity;

	struct stage_fragment *fragments;
	size_t fragment_count, fragment_capacity;

	/*
	 * After seal the id map is replaced, in its own memory, by the entries
	 * that are not DEAD in id order: sorted_count live rows, then
	 * deleted_count deletes. Lookups then binary-search them.
	 */
	uint32_t *sorted;
	size_t sorted_count, deleted_count;
	bool map_is_sorted;

	uint64_t rows_added, bytes_added, live_rows, live_bytes;
	struct buf scratch;
	struct stage_writer writer;     /* used once spilled */

	/*
	 * A spilled stage that holds run_entries entries (or
	 * STAGE_RUN_ID_BYTES of ids) writes them, sorted, as a run to a scratch
	 * file and starts its entries, ids and map over (invariant 9).
	 */
	struct stage_runs *runs;        /* NULL until the first run */
	uint32_t run_entries;           /* entries held in memory before a run is written */
	size_t inline_limit;            /* staged bytes kept in memory before spilling (TABLE_INLINE_LIMIT) */
	/* A sealed spilled overwrite: its key tree, built into the segment by the seal or the writer. */
	enum stage_keys_build keys_build;
	struct buf last_run_id;         /* KEYS_STREAMED with runs: the greatest id written to a run */
	bool keys_prebuilt;
	struct block_address prebuilt_keys;
	/* An edge table's stage: what its adjacency indexes need (table_edges.c); NULL for node tables. */
	struct stage_edges *edges;
	int edges_error;                /* the first failure to record a row in edges: sticky */
};

/* The spill writer (table_writer.c). */
/* Starts the writer thread; without one (it could not start) fragments are written inline. */
void table_writer_start(struct table_stage *stage);
/* Waits until every submitted job is written, copies their addresses. Returns the writer's first error. */
int table_writer_drain(struct table_stage *stage);
/* Stops and joins the writer after it has written (or, after a failure, skipped) every job. */
void table_writer_stop(struct table_stage *stage);
/* The buffer the next fragment's payload goes into: a free job's (waiting while STAGE_QUEUE_DEPTH
 * are in flight), or the stage's scratch buffer when no writer runs. */
struct buf *table_writer_next_payload(struct table_stage *stage);
/* Writes that payload as stage fragment `fragment`: hands it to the writer, or writes it now when no
 * writer runs. 0 or -errno (only when written now: the writer's errors surface later). */
int table_writer_submit(struct table_stage *stage, uint32_t fragment);
/* The writer's first error (0 if none), as the next add or the seal reports it. Every add asks: a
 * lock here would bounce its cache line to the writer's core each row. */
static inline int stage_writer_failure(struct table_stage *stage)
{
	return atomic_load_explicit(&stage->writer.failure, memory_order_relaxed);
}

#define STAGE_RUN_ID_BYTES (UINT32_C(24) << 20)

/*
 * The sealed stage's last record per id, live rows and deletes: from the
 * runs in id order, or from the sorted entries in memory (live rows in id
 * order, then deletes in id order).
 */
struct stage_iterator {
	const struct table_stage *stage;
	struct stage_runs_cursor *cursor;  /* NULL: the entries in memory */
	size_t next;
};

void table_descriptor_encode(const struct fragment_descriptor *descriptor, uint8_t out[DESCRIPTOR_SIZE]);
int table_descriptor_decode(const uint8_t *bytes, size_t size, struct fragment_descriptor *out);
void table_key_value_encode(const struct key_value *value, uint8_t out[KEY_VALUE_SIZE]);
int table_key_value_decode(const uint8_t *bytes, size_t size, struct key_value *out);
int table_grow_array(void **array, size_t *capacity, size_t needed, size_t element_size);
void table_fragment_view_init(struct fragment_view *view);
/* Forgets the decoded fragment but keeps the memory for the next one. */
void table_fragment_view_reset(struct fragment_view *view);
void table_fragment_view_clear(struct fragment_view *view);
/*
 * The id of a canonical line (which starts {"id":"<id as a JSON string>"):
 * points into the line when the id has no escapes, else decodes it (jansson)
 * into scratch. Returns 0, -EIO (not a canonical line) or -ENOMEM.
 */
int table_line_id(const uint8_t *line, size_t size, struct buf *scratch, const uint8_t **id,
		   size_t *id_size);
/* True if the canonical line's id is id (what stage_add checks and readers rely on). */
bool table_line_has_id(const uint8_t *line, size_t size, const void *id, size_t id_size,
			struct buf *scratch);
/*
 * Reads and deserializes a deletion bitmap of a fragment of rows rows, through
 * append when given (apply may read what the same publish appended).
 * Returns 0, -EIO, -ENOENT, -ENOMEM.
 */
int table_bitmap_read(struct pager *pager, struct pager_append *append, struct block_address address,
		       uint32_t rows, roaring_bitmap_t **out);
/*
 * Loads the fragment a descriptor names (block and bitmap), checks its
 * structure against the descriptor and counts its rows as decoded data rows.
 * On error the view is cleared. Returns 0, -EIO, -ENOENT, -ENOMEM.
 */
/* Appends a deletion bitmap block (docs/FORMAT.md §13). 0 or -errno. */
int table_bitmap_append(struct pager_append *append, const roaring_bitmap_t *bitmap,
			struct block_address *address_out);
int table_fragment_view_load(struct pager *pager, const struct fragment_descriptor *descriptor,
			      struct fragment_view *view);
bool table_fragment_view_is_live(const struct fragment_view *view, uint32_t row);
/* Looks a fragment descriptor up by sequence in the fragment tree. 0, -ENOENT, -errno. */
int table_descriptor_get(struct btree *fragments, uint64_t sequence, struct fragment_descriptor *out);
/*
 * The fragment that holds the row a key entry names (docs/FORMAT.md §12): the
 * fragment numbered `sequence` when the table has it (row `row_index` of it), else
 * the one whose slots cover sequence + row_index — a fragment that compaction made
 * of several (core/table_compact.c): there the row is at sequence + row_index
 * minus its number. Sets *out and *row_out. 0, -ENOENT (no such fragment or row),
 * -EIO, -ENOMEM.
 */
int table_descriptor_locate(struct btree *fragments, uint64_t sequence, uint32_t row_index,
			    struct fragment_descriptor *out, uint32_t *row_out);
void table_stage_record_location(const struct table_stage *stage, uint64_t first_sequence,
				 const struct stage_record *record,
			    uint8_t value[KEY_VALUE_SIZE]);
int table_stage_iterator_open(const struct table_stage *stage, struct stage_iterator *iterator);
/* 1 with *out, 0 at the end, or -errno. */
int table_stage_iterator_next(struct stage_iterator *iterator, struct stage_record *out);
void table_stage_iterator_close(struct stage_iterator *iterator);
/*
 * Adds the key tree entry of every live row, in id order, to builder.
 * first_sequence: the sequence the stage's first fragment gets. 0 or -errno.
 */
int table_stage_build_keys(const struct table_stage *stage, uint64_t first_sequence,
		     struct btree_builder *builder);

/* Small and hot (sorting ids, walking lines): inline in every table file. */
static inline void table_sequence_key(uint64_t sequence, uint8_t key[SEQUENCE_KEY_SIZE])
{
	for (int i = 0; i < SEQUENCE_KEY_SIZE; i++)
		key[i] = (uint8_t)(sequence >> (8 * (SEQUENCE_KEY_SIZE - 1 - i)));
}

static inline uint64_t table_sequence_from_key(const uint8_t key[SEQUENCE_KEY_SIZE])
{
	uint64_t sequence = 0;
	for (int i = 0; i < SEQUENCE_KEY_SIZE; i++)
		sequence = sequence << 8 | key[i];
	return sequence;
}

/* Keys compare as the B+tree does: memcmp over the shorter length, then length. */
static inline int table_id_compare(const uint8_t *a, size_t a_size, const uint8_t *b, size_t b_size)
{
	size_t common = a_size < b_size ? a_size : b_size;
	int order = common ? memcmp(a, b, common) : 0;
	if (order != 0)
		return order;
	return a_size < b_size ? -1 : a_size > b_size;
}

static inline size_t table_line_start(const struct fragment_view *view, uint32_t row)
{
	return row ? view->ends[row - 1] : 0;
}

static inline size_t table_line_end(const struct fragment_view *view, uint32_t row)
{
	return view->ends[row];
}

#endif
