/*
 * table_runs — the sorted id runs of a large stage (see table_int.h).
 *
 * A run is a sequence of blocks of at most RUN_BLOCK_SIZE bytes in the
 * stage's scratch file, each holding whole records in increasing id order,
 * then the offset of each record in the block (u16 each) and their count
 * (u16), so that a lookup binary-searches the block:
 *
 *   record: u16 id size | id | u32 fragment | u16 row index | u32 line size | u8 flags
 *
 * (little-endian; flags bit 0: a delete). The scratch file is private to the
 * process and never outlives it, so this layout is not part of the store
 * format; what keeps a damaged read from being believed is the checksum of
 * every block, kept in memory.
 *
 * Invariants kept:
 *   1. Runs are numbered in the order they were written; run i holds the ids
 *      staged between its flush and run i-1's, so for an id in several runs
 *      the highest-numbered one is the newest.
 *   2. Within a run ids strictly increase; block b's first id is index id b,
 *      and every id of block b is below block b+1's first id.
 *   3. A run's filter has every id of the run (no false negatives), and
 *      its first block's first id and last_id bound all of them.
 *   4. Only a completed run (table_runs_end) is searched or merged; the run
 *      being written lives in `writing` and, until end, in no list.
 *
 * States: EMPTY (no scratch file) --begin--> WRITING --end--> IDLE (runs
 * searchable) --begin--> WRITING ...; abandon returns WRITING to the state
 * before begin.
 */
#include "table_int.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "codec.h"
#include "io.h"

#define RUN_BLOCK_SIZE 2048
#define RUN_RECORD_FIXED (2 + 4 + 2 + 4 + 1)
#define RUN_READ_CHUNK (64u << 10)                  /* a cursor reads this much of a run at a time */
_Static_assert(RUN_BLOCK_SIZE >= RUN_RECORD_FIXED + 1024 + 4, "the longest id's record fits a block");
#define RUN_WRITE_BUFFER (1u << 20)
#define RUN_FILTER_BITS_PER_ID 16
#define RUN_FILTER_BLOCK_WORDS 8                    /* 512 bits: one cache line per probe */
#define RUN_FILTER_PROBES 7

struct run {
	uint64_t records;
	uint64_t first_block;        /* index into the set's block arrays */
	uint64_t block_count;
	struct buf last_id;
	uint64_t *filter;            /* filter_blocks × RUN_FILTER_BLOCK_WORDS words */
	uint64_t filter_blocks;
	struct buf read;             /* find: the block of this run read last */
	uint64_t read_block;         /* which block that is (UINT64_MAX: none) */
};

/* One block of a run, as the index keeps it. */
struct block_entry {
	uint64_t offset;             /* in the scratch file */
	uint64_t checksum;
	uint64_t id_offset;          /* its first id: ids[id_offset .. id_offset + id_size) */
	uint32_t size;
	uint16_t id_size;
};

/* Every block of every run, in file order. */
struct block_index {
	struct buf entries;          /* struct block_entry each */
	struct buf ids;              /* the first id of every block */
	uint64_t count;
};

static const struct block_entry *block_at(const struct block_index *index, uint64_t block)
{
	return (const struct block_entry *)index->entries.data + block;
}

struct stage_runs {
	struct pager *pager;
	struct io_file scratch;
	bool scratch_open;
	uint64_t file_size;          /* bytes written or buffered in `output` */

	struct buf list;             /* the runs written (struct run each), oldest first */
	size_t count;
	uint64_t records;
	struct block_index blocks;

	bool writing;
	struct run run;              /* the run being written */
	uint64_t announced;          /* records announced at begin */
	uint64_t block_count_before, id_bytes_before, file_size_before;
	struct buf block;            /* the block being filled (its records) */
	uint16_t record_offsets[RUN_BLOCK_SIZE / RUN_RECORD_FIXED];
	uint16_t block_records;      /* records in the block being filled */
	size_t last_id_at;           /* where the id of the block's last record starts in it */
	uint16_t last_id_size;
	struct buf output;           /* blocks not yet written; they start at output_offset */
	uint64_t output_offset;
};

static struct run *run_at(const struct stage_runs *runs, size_t i)
{
	return (struct run *)runs->list.data + i;
}

/* ---- filter ------------------------------------------------------------------------ */

static uint64_t filter_mix(uint64_t hash)
{
	hash ^= hash >> 31;
	hash *= UINT64_C(0x9e3779b97f4a7c15);
	return hash ^ (hash >> 29);
}

static uint64_t *filter_block(const struct run *run, uint64_t hash)
{
	uint64_t block = (uint64_t)(((unsigned __int128)(hash >> 32 | hash << 32) * run->filter_blocks) >> 64);
	return run->filter + block * RUN_FILTER_BLOCK_WORDS;
}

static void filter_add(struct run *run, uint64_t hash)
{
	uint64_t *words = filter_block(run, hash);
	uint64_t bits = filter_mix(hash);
	for (int i = 0; i < RUN_FILTER_PROBES; i++, bits >>= 9)
		words[(bits & 511) >> 6] |= UINT64_C(1) << (bits & 63);
}

static bool filter_may_hold(const struct run *run, uint64_t hash)
{
	const uint64_t *words = filter_block(run, hash);
	uint64_t bits = filter_mix(hash);
	for (int i = 0; i < RUN_FILTER_PROBES; i++, bits >>= 9)
		if (!(words[(bits & 511) >> 6] & (UINT64_C(1) << (bits & 63))))
			return false;
	return true;
}

/* ---- records ----------------------------------------------------------------------- */

/* Appends the record to out, which has room for it (buf_reserve). */
static void record_encode(const struct stage_record *record, struct buf *out)
{
	uint8_t *at = out->data + out->size;
	at[0] = (uint8_t)record->id_size;
	at[1] = (uint8_t)(record->id_size >> 8);
	memcpy(at + 2, record->id, record->id_size);
	at += 2 + record->id_size;
	buf_store_u32(at, record->fragment);
	at[4] = (uint8_t)record->row_index;
	at[5] = (uint8_t)(record->row_index >> 8);
	buf_store_u32(at + 6, record->line_size);
	at[10] = record->is_delete ? 1 : 0;
	out->size += RUN_RECORD_FIXED + record->id_size;
}

/* Decodes the record at *position of a block; advances it. 0 or -EIO. */
static int record_decode(const uint8_t *block, size_t size, size_t *position, struct stage_record *out)
{
	size_t at = *position;
	if (size - at < RUN_RECORD_FIXED)
		return -EIO;
	uint16_t id_size = (uint16_t)(block[at] | block[at + 1] << 8);
	if (id_size == 0 || size - at - RUN_RECORD_FIXED < id_size)
		return -EIO;
	const uint8_t *fields = block + at + 2 + id_size;
	if (fields[10] > 1)
		return -EIO;
	out->id = block + at + 2;
	out->id_size = id_size;
	out->fragment = buf_load_u32(fields);
	out->row_index = (uint16_t)(fields[4] | fields[5] << 8);
	out->line_size = buf_load_u32(fields + 6);
	out->is_delete = fields[10] == 1;
	*position = at + RUN_RECORD_FIXED + id_size;
	return 0;
}

/* ---- the set ----------------------------------------------------------------------- */

int table_runs_open(struct pager *pager, struct stage_runs **out)
{
	struct stage_runs *runs = calloc(1, sizeof *runs);
	if (!runs)
		return -ENOMEM;
	runs->pager = pager;
	runs->scratch.descriptor = -1;
	buf_init(&runs->list);
	buf_init(&runs->blocks.entries);
	buf_init(&runs->blocks.ids);
	buf_init(&runs->block);
	buf_init(&runs->output);
	buf_init(&runs->run.last_id);
	buf_init(&runs->run.read);
	*out = runs;
	return 0;
}

static void run_free(struct run *run)
{
	buf_free(&run->last_id);
	buf_free(&run->read);
	free(run->filter);
	run->filter = NULL;
}

void table_runs_free(struct stage_runs *runs)
{
	if (!runs)
		return;
	if (runs->writing)
		table_runs_abandon(runs);
	for (size_t i = 0; i < runs->count; i++)
		run_free(run_at(runs, i));
	buf_free(&runs->list);
	buf_free(&runs->blocks.entries);
	buf_free(&runs->blocks.ids);
	buf_free(&runs->block);
	buf_free(&runs->output);
	run_free(&runs->run);
	if (runs->scratch_open)
		io_file_close(&runs->scratch);
	free(runs);
}

size_t table_runs_count(const struct stage_runs *runs)
{
	return runs->count;
}

uint64_t table_runs_records(const struct stage_runs *runs)
{
	return runs->records;
}

/* ---- writing ----------------------------------------------------------------------- */

int table_runs_begin(struct stage_runs *runs, uint64_t records)
{
	if (runs->writing)
		return -EINVAL;
	if (!runs->scratch_open) {
		int rc = pager_scratch_open(runs->pager, &runs->scratch);
		if (rc < 0)
			return rc;
		runs->scratch_open = true;
	}
	int rc = buf_reserve(&runs->list, sizeof(struct run));
	if (rc < 0)
		return rc;
	struct run *run = &runs->run;
	run->records = 0;
	run->first_block = runs->blocks.count;
	run->block_count = 0;
	buf_reset(&run->last_id);
	buf_reset(&run->read);
	run->read_block = UINT64_MAX;
	run->filter_blocks = (records * RUN_FILTER_BITS_PER_ID + 511) / 512;
	if (run->filter_blocks == 0)
		run->filter_blocks = 1;
	run->filter = calloc(run->filter_blocks * RUN_FILTER_BLOCK_WORDS, sizeof *run->filter);
	if (!run->filter)
		return -ENOMEM;
	runs->announced = records;
	runs->block_count_before = runs->blocks.count;
	runs->id_bytes_before = runs->blocks.ids.size;
	runs->file_size_before = runs->file_size;
	runs->output_offset = runs->file_size;
	buf_reset(&runs->block);
	runs->block_records = 0;
	buf_reset(&runs->output);
	runs->writing = true;
	return 0;
}

/* Writes the buffered blocks to the scratch file. 0 or -errno. */
static int output_write(struct stage_runs *runs)
{
	if (runs->output.size == 0)
		return 0;
	int rc = io_failpoint("stage.before_run_write");
	if (rc == 0)
		rc = io_pwrite(&runs->scratch, runs->output.data, runs->output.size, runs->output_offset);
	if (rc < 0)
		return rc;
	runs->output_offset += runs->output.size;
	buf_reset(&runs->output);
	return 0;
}

/* Closes the block being filled: into the index and the output buffer. 0 or -errno. */
static int block_close(struct stage_runs *runs)
{
	if (runs->block.size == 0)
		return 0;
	/* The run's last id so far: what the next record is compared with, and its range. */
	buf_reset(&runs->run.last_id);
	int rc = buf_append(&runs->run.last_id, runs->block.data + runs->last_id_at, runs->last_id_size);
	if (rc < 0)
		return rc;
	/* The directory: every record's offset, then their count. */
	if ((rc = buf_reserve(&runs->block, 2 * (size_t)runs->block_records + 2)) < 0)
		return rc;
	for (uint16_t i = 0; i < runs->block_records; i++)
		buf_put_u16(&runs->block, runs->record_offsets[i]);
	buf_put_u16(&runs->block, runs->block_records);
	runs->block_records = 0;
	/* Into the index, with its first id (the block's first record: offset 0, after the id size). */
	struct block_index *index = &runs->blocks;
	struct block_entry entry = {
		.offset = runs->file_size,
		.checksum = codec_hash(runs->block.data, runs->block.size),
		.id_offset = index->ids.size,
		.size = (uint32_t)runs->block.size,
		.id_size = (uint16_t)(runs->block.data[0] | runs->block.data[1] << 8),
	};
	if ((rc = buf_reserve(&index->entries, sizeof entry)) < 0 ||
	    (rc = buf_append(&index->ids, runs->block.data + 2, entry.id_size)) < 0)
		return rc;
	buf_append(&index->entries, &entry, sizeof entry);
	index->count++;
	runs->run.block_count++;
	rc = buf_append(&runs->output, runs->block.data, runs->block.size);
	if (rc < 0)
		return rc;
	runs->file_size += runs->block.size;
	buf_reset(&runs->block);
	return runs->output.size >= RUN_WRITE_BUFFER ? output_write(runs) : 0;
}

int table_runs_add(struct stage_runs *runs, const struct stage_record *record)
{
	struct run *run = &runs->run;
	if (!runs->writing || run->records >= runs->announced || record->id_size == 0)
		return -EINVAL;
	if (run->records > 0) {
		bool in_block = runs->block.size > 0;
		const uint8_t *last = in_block ? runs->block.data + runs->last_id_at : run->last_id.data;
		size_t last_size = in_block ? runs->last_id_size : run->last_id.size;
		if (table_id_compare(last, last_size, record->id, record->id_size) >= 0)
			return -EINVAL;
	}
	size_t size = RUN_RECORD_FIXED + record->id_size;
	int rc;
	/* The block with this record and its directory entry must fit. */
	if (runs->block.size > 0 &&
	    runs->block.size + size + 2 * ((size_t)runs->block_records + 1) + 2 > RUN_BLOCK_SIZE &&
	    (rc = block_close(runs)) < 0)
		return rc;
	if ((rc = buf_reserve(&runs->block, size)) < 0)
		return rc;
	runs->record_offsets[runs->block_records++] = (uint16_t)runs->block.size;
	runs->last_id_at = runs->block.size + 2;
	runs->last_id_size = record->id_size;
	record_encode(record, &runs->block);
	filter_add(run, codec_hash(record->id, record->id_size));
	run->records++;
	return 0;
}

int table_runs_end(struct stage_runs *runs)
{
	if (!runs->writing || runs->run.records != runs->announced)
		return -EINVAL;
	int rc = block_close(runs);
	if (rc == 0)
		rc = output_write(runs);
	if (rc < 0)
		return rc;
	if (runs->run.records == 0) {
		table_runs_abandon(runs);
		return 0;
	}
	buf_append(&runs->list, &runs->run, sizeof runs->run); /* room reserved by begin */
	runs->count++;
	runs->records += runs->run.records;
	/* The set owns the run's memory now; the next run starts with fresh buffers. */
	memset(&runs->run, 0, sizeof runs->run);
	buf_init(&runs->run.last_id);
	buf_init(&runs->run.read);
	runs->writing = false;
	return 0;
}

void table_runs_abandon(struct stage_runs *runs)
{
	if (!runs->writing)
		return;
	runs->blocks.count = runs->block_count_before;
	runs->blocks.entries.size = runs->block_count_before * sizeof(struct block_entry);
	runs->blocks.ids.size = runs->id_bytes_before;
	runs->file_size = runs->file_size_before;
	free(runs->run.filter);
	runs->run.filter = NULL;
	buf_reset(&runs->block);
	runs->block_records = 0;
	buf_reset(&runs->output);
	runs->writing = false;
}

/* ---- reading ----------------------------------------------------------------------- */

static const uint8_t *index_id(const struct block_index *index, uint64_t block, size_t *size)
{
	const struct block_entry *entry = block_at(index, block);
	*size = entry->id_size;
	return index->ids.data + entry->id_offset;
}

/* Reads count consecutive blocks from first (one run's) into out and checks each. 0, -EIO or -errno. */
static int blocks_read(struct stage_runs *runs, uint64_t first, uint64_t count, struct buf *out)
{
	const struct block_index *index = &runs->blocks;
	const struct block_entry *head = block_at(index, first), *tail = block_at(index, first + count - 1);
	uint64_t size = tail->offset + tail->size - head->offset;
	buf_reset(out);
	int rc = buf_reserve(out, (size_t)size);
	if (rc < 0)
		return rc;
	if ((rc = io_pread(&runs->scratch, out->data, (size_t)size, head->offset)) < 0)
		return rc;
	out->size = (size_t)size;
	for (const struct block_entry *entry = head; entry <= tail; entry++)
		if (codec_hash(out->data + (entry->offset - head->offset), entry->size) != entry->checksum)
			return -EIO;
	return 0;
}

/* A block's records, found through its directory. */
struct block_view {
	const uint8_t *data;
	size_t records_end;          /* where the directory starts */
	uint16_t count;
};

static int block_view(const uint8_t *data, size_t size, struct block_view *out)
{
	if (size < 2)
		return -EIO;
	uint16_t count = (uint16_t)(data[size - 2] | data[size - 1] << 8);
	if (count == 0 || 2 * (size_t)count + 2 > size)
		return -EIO;
	out->data = data;
	out->records_end = size - 2 - 2 * (size_t)count;
	out->count = count;
	return 0;
}

/* Decodes record i of a block. 0 or -EIO (the directory or the record is damaged). */
static int record_at(const struct block_view *view, uint16_t i, struct stage_record *out)
{
	const uint8_t *directory = view->data + view->records_end;
	size_t start = directory[2 * i] | (size_t)directory[2 * i + 1] << 8;
	size_t end = i + 1 < view->count ? (directory[2 * i + 2] | (size_t)directory[2 * i + 3] << 8)
					 : view->records_end;
	if (start >= end || end > view->records_end)
		return -EIO;
	size_t position = start;
	int rc = record_decode(view->data, end, &position, out);
	return rc < 0 || position != end ? -EIO : 0;
}

/* Searches one run for id. 1 with *out (id in run->read), 0, or -errno. Ids looked up
 * near each other (edges of one node, ids in order) find their block already read. */
static int run_find(struct stage_runs *runs, struct run *run, const void *id, size_t id_size,
		    struct stage_record *out)
{
	const struct block_index *index = &runs->blocks;
	/* The last block whose first id is <= id. */
	uint64_t low = run->first_block, high = run->first_block + run->block_count;
	while (high - low > 1) {
		uint64_t middle = low + (high - low) / 2;
		size_t first_size;
		const uint8_t *first = index_id(index, middle, &first_size);
		if (table_id_compare(first, first_size, id, id_size) <= 0)
			low = middle;
		else
			high = middle;
	}
	int rc = 0;
	if (low != run->read_block) {
		run->read_block = UINT64_MAX;
		if ((rc = blocks_read(runs, low, 1, &run->read)) < 0)
			return rc;
		run->read_block = low;
	}
	struct block_view view;
	if ((rc = block_view(run->read.data, run->read.size, &view)) < 0)
		return rc;
	size_t first = 0, after = view.count;
	while (first < after) {
		uint16_t middle = (uint16_t)(first + (after - first) / 2);
		if ((rc = record_at(&view, middle, out)) < 0)
			return rc;
		int order = table_id_compare(out->id, out->id_size, id, id_size);
		if (order == 0)
			return 1;
		if (order < 0)
			first = middle + 1u;
		else
			after = middle;
	}
	return 0;
}

int table_runs_find(struct stage_runs *runs, const void *id, size_t id_size, struct stage_record *out)
{
	if (runs->count == 0)
		return 0;
	uint64_t hash = codec_hash(id, id_size);
	for (size_t i = runs->count; i-- > 0;) {
		struct run *run = run_at(runs, i);
		size_t first_size;
		const uint8_t *first = index_id(&runs->blocks, run->first_block, &first_size);
		if (table_id_compare(id, id_size, first, first_size) < 0 ||
		    table_id_compare(id, id_size, run->last_id.data, run->last_id.size) > 0 ||
		    !filter_may_hold(run, hash))
			continue;
		int found = run_find(runs, run, id, id_size, out);
		if (found != 0)
			return found;
	}
	return 0;
}

/* ---- merging ----------------------------------------------------------------------- */

struct cursor_source {
	size_t run;                  /* its run number: higher is newer */
	uint64_t next_block, end_block;   /* the run's blocks not read yet */
	struct buf chunk;            /* blocks chunk_first .. chunk_first + chunk_blocks - 1 */
	uint64_t chunk_first, chunk_blocks;
	uint64_t block;              /* the block being walked (an index); chunk_first + chunk_blocks: none */
	struct block_view view;
	uint16_t next_record;        /* in view */
	struct stage_record current;
};

struct stage_runs_cursor {
	struct stage_runs *runs;
	struct cursor_source *sources;
	size_t *heap;                /* source indexes, a min-heap on (id, newest first) */
	size_t heap_size;
	struct buf id;               /* the id last returned */
};

/* Moves a source to its next record, reading RUN_READ_CHUNK of its run at a time. 1, 0 (exhausted) or -errno. */
static int source_advance(struct stage_runs *runs, struct cursor_source *source)
{
	const struct block_index *index = &runs->blocks;
	int rc;
	while (source->block == source->chunk_first + source->chunk_blocks ||
	       source->next_record == source->view.count) {
		if (source->block + 1 < source->chunk_first + source->chunk_blocks) {
			source->block++;
		} else {
			if (source->next_block == source->end_block)
				return 0;
			uint64_t count = 1, size = block_at(index, source->next_block)->size;
			while (source->next_block + count < source->end_block &&
			       size + block_at(index, source->next_block + count)->size <= RUN_READ_CHUNK)
				size += block_at(index, source->next_block + count++)->size;
			if ((rc = blocks_read(runs, source->next_block, count, &source->chunk)) < 0)
				return rc;
			source->chunk_first = source->next_block;
			source->chunk_blocks = count;
			source->block = source->next_block;
			source->next_block += count;
		}
		const struct block_entry *entry = block_at(index, source->block);
		size_t start = entry->offset - block_at(index, source->chunk_first)->offset;
		if ((rc = block_view(source->chunk.data + start, entry->size, &source->view)) < 0)
			return rc;
		source->next_record = 0;
	}
	rc = record_at(&source->view, source->next_record++, &source->current);
	return rc < 0 ? rc : 1;
}

/* True if source a comes before source b: a smaller id, or the same id in a newer run. */
static bool source_before(const struct cursor_source *a, const struct cursor_source *b)
{
	int order = table_id_compare(a->current.id, a->current.id_size, b->current.id, b->current.id_size);
	return order < 0 || (order == 0 && a->run > b->run);
}

static void heap_down(struct stage_runs_cursor *cursor, size_t at)
{
	for (;;) {
		size_t smallest = at, left = 2 * at + 1, right = left + 1;
		if (left < cursor->heap_size &&
		    source_before(&cursor->sources[cursor->heap[left]], &cursor->sources[cursor->heap[smallest]]))
			smallest = left;
		if (right < cursor->heap_size &&
		    source_before(&cursor->sources[cursor->heap[right]], &cursor->sources[cursor->heap[smallest]]))
			smallest = right;
		if (smallest == at)
			return;
		size_t swap = cursor->heap[at];
		cursor->heap[at] = cursor->heap[smallest];
		cursor->heap[smallest] = swap;
		at = smallest;
	}
}

/* Advances the source at the top of the heap and restores the heap. 0 or -errno. */
static int heap_advance_top(struct stage_runs_cursor *cursor)
{
	int rc = source_advance(cursor->runs, &cursor->sources[cursor->heap[0]]);
	if (rc < 0)
		return rc;
	if (rc == 0)
		cursor->heap[0] = cursor->heap[--cursor->heap_size];
	if (cursor->heap_size > 0)
		heap_down(cursor, 0);
	return 0;
}

void table_runs_cursor_free(struct stage_runs_cursor *cursor)
{
	if (!cursor)
		return;
	if (cursor->sources)
		for (size_t i = 0; i < cursor->runs->count; i++)
			buf_free(&cursor->sources[i].chunk);
	free(cursor->sources);
	free(cursor->heap);
	buf_free(&cursor->id);
	free(cursor);
}

int table_runs_cursor_open(struct stage_runs *runs, struct stage_runs_cursor **out)
{
	if (runs->writing)
		return -EINVAL;
	struct stage_runs_cursor *cursor = calloc(1, sizeof *cursor);
	if (!cursor)
		return -ENOMEM;
	cursor->runs = runs;
	buf_init(&cursor->id);
	size_t count = runs->count ? runs->count : 1;
	cursor->sources = calloc(count, sizeof *cursor->sources);
	cursor->heap = calloc(count, sizeof *cursor->heap);
	int rc = cursor->sources && cursor->heap ? 0 : -ENOMEM;
	for (size_t i = 0; rc == 0 && i < runs->count; i++) {
		struct cursor_source *source = &cursor->sources[i];
		buf_init(&source->chunk);
		source->run = i;
		source->next_block = run_at(runs, i)->first_block;
		source->end_block = source->next_block + run_at(runs, i)->block_count;
		source->chunk_first = source->block = source->next_block;
		source->chunk_blocks = 0;
		rc = source_advance(runs, source);
		if (rc == 1) {
			cursor->heap[cursor->heap_size++] = i;
			rc = 0;
		}
	}
	if (rc < 0) {
		table_runs_cursor_free(cursor);
		return rc;
	}
	for (size_t i = cursor->heap_size / 2; i-- > 0;)
		heap_down(cursor, i);
	*out = cursor;
	return 0;
}

int table_runs_cursor_next(struct stage_runs_cursor *cursor, struct stage_record *out)
{
	if (cursor->heap_size == 0)
		return 0;
	struct cursor_source *top = &cursor->sources[cursor->heap[0]];
	*out = top->current;
	buf_reset(&cursor->id);
	int rc = buf_append(&cursor->id, out->id, out->id_size);
	if (rc < 0)
		return rc;
	out->id = cursor->id.data;
	/* Older records of the same id are superseded: skip them. */
	do {
		if ((rc = heap_advance_top(cursor)) < 0)
			return rc;
	} while (cursor->heap_size > 0 &&
		 table_id_compare(cursor->sources[cursor->heap[0]].current.id,
			    cursor->sources[cursor->heap[0]].current.id_size, out->id, out->id_size) == 0);
	return 1;
}
