/*
 * table_int.h — internals shared by table.c and table_runs.c (layer: table).
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
int stage_runs_open(struct pager *pager, struct stage_runs **out);
/* Closes the scratch file (its space returns) and frees everything. NULL is a no-op. */
void stage_runs_free(struct stage_runs *runs);
size_t stage_runs_count(const struct stage_runs *runs);          /* runs written */
uint64_t stage_runs_records(const struct stage_runs *runs);      /* records in them */

/*
 * Writes one run of exactly `records` records (which sizes its filter), given
 * by stage_runs_add in strictly increasing id order, then stage_runs_end.
 * Each returns 0 or -errno (-EINVAL: out of order or more records than
 * announced; -EIO / -ENOSPC: the scratch file). After any error, or instead
 * of end, stage_runs_abandon drops the run being written: the set is then
 * as it was before begin.
 */
int stage_runs_begin(struct stage_runs *runs, uint64_t records);
int stage_runs_add(struct stage_runs *runs, const struct stage_record *record);
int stage_runs_end(struct stage_runs *runs);
void stage_runs_abandon(struct stage_runs *runs);

/*
 * Finds id in the newest run that holds it (a run is skipped without I/O when
 * id is outside its range or its filter rules it out). Returns 1 with *out
 * set (out->id valid until the next call on runs), 0 if no run holds it, or
 * -EIO (a scratch block read back damaged) / -errno.
 */
int stage_runs_find(struct stage_runs *runs, const void *id, size_t id_size, struct stage_record *out);

/*
 * Every id of every run once, in increasing id order; for an id in several
 * runs, the record of the newest. Reads the runs block by block (one block
 * buffer per run). next returns 1 with *out (valid until the following
 * next), 0 at the end, or -errno. Runs must not be added while a cursor is
 * open.
 */
struct stage_runs_cursor;
int stage_runs_cursor_open(struct stage_runs *runs, struct stage_runs_cursor **out);
int stage_runs_cursor_next(struct stage_runs_cursor *cursor, struct stage_record *out);
void stage_runs_cursor_free(struct stage_runs_cursor *cursor);

/* ---- table_edges.c: what an edge table's stage records for its adjacency indexes ---- */

struct stage_edges;

/* Returns 0 or -ENOMEM. */
int stage_edges_open(struct pager *pager, enum table_write_mode mode, struct stage_edges **out);
void stage_edges_free(struct stage_edges *edges);
/* Records a row or delete the stage has just accepted. 0, -EINVAL (sealed) or -errno. */
int stage_edges_add(struct stage_edges *edges, const struct schema_row *row);
/* Sorts what was recorded; a spilled overwrite (segment given) builds its two trees into the segment. 0 or -errno. */
int stage_edges_seal(struct stage_edges *edges, struct pager_segment *segment);
/* The trees of an overwrite, or of a merge into an empty table, built into append (or prebuilt). 0 or -errno. */
int stage_edges_apply_bulk(struct stage_edges *edges, struct pager_append *append, struct block_address *out_root,
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

#endif
