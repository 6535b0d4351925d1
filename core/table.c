/*
 * table — table versions, fragments, deletion bitmaps, the key tree, staged
 * writes and byte-offset reads. See table.h and docs/FORMAT.md §10–§13.
 *
 * Invariants kept (in addition to table.h's 1–3):
 *   4. In a stage, the id map names, for every id staged, the entry added
 *      last for it; every earlier entry for that id is DEAD. So the entries
 *      that are not DEAD are exactly "the last staged row or delete per id".
 *   5. A staged row is either pending (its line is in pending_lines) or cut
 *      (it is row `row_index` of stage fragment `location`). Pending rows
 *      that die are simply left out when cut; cut rows that die are added
 *      to their fragment's dead bitmap. stage live_rows / live_bytes always
 *      equal the rows that are neither DEAD nor deletes.
 *   6. Apply never changes the stage: a publish that must retry on a new
 *      base (compare-and-swap) applies the same sealed stage again.
 *   7. A spilled stage's fragments reach the segment in cut order: only its
 *      writer thread writes to the segment until seal joins it, and jobs
 *      are taken in submission order. A fragment's address is valid once
 *      its job is harvested (always by the end of seal). Only the stage's
 *      own thread touches entries, fragments and the id map.
 *   8. Before seal the id map is a hash map (5 bytes a slot, load at most
 *      3/4); seal replaces it, in its own memory, by the sorted index of the
 *      entries that are not DEAD (map_is_sorted), which lookups then search.
 *      While every entry's id is greater than the one before (ids_ascending:
 *      exports, generated keys), the map stays empty: an id greater than the
 *      last is new, and lookups binary-search the entries themselves. The
 *      first id out of order fills the map from the entries and clears
 *      ids_ascending.
 *   9. Runs (table_int.h): a spilled stage holding run_entries entries
 *      writes those that are not DEAD, sorted and all cut, as its next run
 *      and empties entries, ids and map. An id is then live in at most one
 *      place: the map, else the newest run holding it. A row staged again
 *      in a merge kills the earlier run's row in its fragment's dead
 *      bitmap at that add (invariant 5), so merging the runs newest-first
 *      per id yields exactly the last staged row or delete per id. A
 *      stage with runs seals by writing its entries as the last run: its
 *      lookups and apply then read only the runs.
 *  10. A sealed spilled overwrite has its key tree built into its segment
 *      (keys_prebuilt), with fragment sequences from 0: an overwrite keeps
 *      none of the base's fragments, so its sequences start over.
 *
 * States of a stage:
 *   OPEN (inline) --lines over TABLE_INLINE_LIMIT--> OPEN (spilled to a segment,
 *   writer thread running; its first error fails every later add and the seal)
 *   --run_entries ids held--> OPEN with runs (any number of times)
 *   OPEN --table_stage_seal--> SEALED --table_apply (any number of times)-->
 *   SEALED --table_stage_published--> PUBLISHED (free keeps the segment)
 *   free from OPEN or SEALED removes the segment, if any.
 *
 * Fragment sequence keys are big-endian so that memcmp order of the keys is
 * the numeric order of the sequences, which is the table's row order.
 */
#include "table.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include <jansson.h>
#include <roaring/roaring.h>

#include "io.h"
#include "table_int.h"

#define TABLE_RECORD_SIZE (16 + 16 + 8 + 5 * BLOCK_ADDRESS_SIZE + 8 + 8 + 8) /* docs/FORMAT.md §10 */
#define DESCRIPTOR_SIZE (BLOCK_ADDRESS_SIZE + 4 + BLOCK_ADDRESS_SIZE + 4 + 8)
#define KEY_VALUE_SIZE (8 + 4 + 4)
#define SEQUENCE_KEY_SIZE 8

/* ---- small encodings ------------------------------------------------------------ */

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

static void sequence_key(uint64_t sequence, uint8_t key[SEQUENCE_KEY_SIZE])
{
	for (int i = 0; i < SEQUENCE_KEY_SIZE; i++)
		key[i] = (uint8_t)(sequence >> (8 * (SEQUENCE_KEY_SIZE - 1 - i)));
}

static uint64_t sequence_from_key(const uint8_t key[SEQUENCE_KEY_SIZE])
{
	uint64_t sequence = 0;
	for (int i = 0; i < SEQUENCE_KEY_SIZE; i++)
		sequence = sequence << 8 | key[i];
	return sequence;
}

static void address_store(uint8_t *at, struct block_address address)
{
	buf_store_u64(at, address.segment);
	buf_store_u64(at + 8, address.offset);
}

static struct block_address address_load(const uint8_t *at)
{
	return (struct block_address){ buf_load_u64(at), buf_load_u64(at + 8) };
}

static void descriptor_encode(const struct fragment_descriptor *descriptor, uint8_t out[DESCRIPTOR_SIZE])
{
	address_store(out, descriptor->block);
	buf_store_u32(out + 16, descriptor->rows);
	address_store(out + 20, descriptor->bitmap);
	buf_store_u32(out + 36, descriptor->live_rows);
	buf_store_u64(out + 40, descriptor->live_bytes);
}

static int descriptor_decode(const uint8_t *bytes, size_t size, struct fragment_descriptor *out)
{
	if (size != DESCRIPTOR_SIZE)
		return -EIO;
	out->block = address_load(bytes);
	out->rows = buf_load_u32(bytes + 16);
	out->bitmap = address_load(bytes + 20);
	out->live_rows = buf_load_u32(bytes + 36);
	out->live_bytes = buf_load_u64(bytes + 40);
	if (block_address_is_null(out->block) || out->rows == 0 || out->live_rows == 0 ||
	    out->live_rows > out->rows || (out->live_rows < out->rows && block_address_is_null(out->bitmap)))
		return -EIO;
	return 0;
}

static void key_value_encode(const struct key_value *value, uint8_t out[KEY_VALUE_SIZE])
{
	buf_store_u64(out, value->sequence);
	buf_store_u32(out + 8, value->row_index);
	buf_store_u32(out + 12, value->row_size);
}

static int key_value_decode(const uint8_t *bytes, size_t size, struct key_value *out)
{
	if (size != KEY_VALUE_SIZE)
		return -EIO;
	out->sequence = buf_load_u64(bytes);
	out->row_index = buf_load_u32(bytes + 8);
	out->row_size = buf_load_u32(bytes + 12);
	return 0;
}

/* Keys compare as the B+tree does: memcmp over the shorter length, then length. */
static int id_compare(const uint8_t *a, size_t a_size, const uint8_t *b, size_t b_size)
{
	size_t common = a_size < b_size ? a_size : b_size;
	int order = common ? memcmp(a, b, common) : 0;
	if (order != 0)
		return order;
	return a_size < b_size ? -1 : a_size > b_size;
}

static int grow_array(void **array, size_t *capacity, size_t needed, size_t element_size)
{
	if (needed <= *capacity)
		return 0;
	size_t grown = *capacity ? *capacity : 64;
	while (grown < needed)
		grown *= 2;
	void *bigger = realloc(*array, grown * element_size);
	if (!bigger)
		return -ENOMEM;
	*array = bigger;
	*capacity = grown;
	return 0;
}

/* ---- table version records ---------------------------------------------------------- */

int table_info_read(struct pager *pager, struct block_address address, struct table_info *out)
{
	struct buf raw;
	buf_init(&raw);
	int rc = pager_read(pager, address, BLOCK_TABLE, &raw);
	if (rc < 0)
		goto out;
	struct buf_reader reader;
	buf_reader_init(&reader, raw.data, raw.size);
	struct table_info info;
	buf_get_raw(&reader, info.stable_id.bytes, 16);
	buf_get_raw(&reader, info.incarnation.bytes, 16);
	info.table_version = buf_get_u64(&reader);
	info.schema = codec_get_address(&reader);
	info.fragments = codec_get_address(&reader);
	info.keys = codec_get_address(&reader);
	info.row_count = buf_get_u64(&reader);
	info.byte_size = buf_get_u64(&reader);
	info.next_fragment = buf_get_u64(&reader);
	info.out_edges = codec_get_address(&reader);
	info.in_edges = codec_get_address(&reader);
	if (reader.failed || buf_reader_remaining(&reader) != 0 || info.table_version == 0 ||
	    block_address_is_null(info.fragments) != block_address_is_null(info.keys) ||
	    block_address_is_null(info.keys) != (info.row_count == 0) ||
	    block_address_is_null(info.out_edges) != block_address_is_null(info.in_edges) ||
	    (!block_address_is_null(info.out_edges) && info.row_count == 0)) {
		rc = -EIO;
		goto out;
	}
	*out = info;
out:
	buf_free(&raw);
	return rc;
}

int table_info_append(struct pager_append *append, const struct table_info *info,
		      struct block_address *address_out)
{
	struct buf record;
	buf_init(&record);
	int rc;
	if ((rc = buf_append(&record, info->stable_id.bytes, 16)) < 0 ||
	    (rc = buf_append(&record, info->incarnation.bytes, 16)) < 0 ||
	    (rc = buf_put_u64(&record, info->table_version)) < 0 ||
	    (rc = codec_put_address(&record, info->schema)) < 0 ||
	    (rc = codec_put_address(&record, info->fragments)) < 0 ||
	    (rc = codec_put_address(&record, info->keys)) < 0 ||
	    (rc = buf_put_u64(&record, info->row_count)) < 0 ||
	    (rc = buf_put_u64(&record, info->byte_size)) < 0 ||
	    (rc = buf_put_u64(&record, info->next_fragment)) < 0 ||
	    (rc = codec_put_address(&record, info->out_edges)) < 0 ||
	    (rc = codec_put_address(&record, info->in_edges)) < 0)
		goto out;
	assert(record.size == TABLE_RECORD_SIZE);
	rc = pager_append_block(append, BLOCK_TABLE, CODEC_NONE, record.data, record.size, address_out);
out:
	buf_free(&record);
	return rc;
}

int table_schema_read(struct pager *pager, struct block_address schema_block, struct schema *out)
{
	struct buf raw;
	buf_init(&raw);
	struct error_info error;
	error_info_clear(&error);
	int rc = pager_read(pager, schema_block, BLOCK_SCHEMA, &raw);
	if (rc < 0)
		goto out;
	rc = schema_parse(raw.size ? (const char *)raw.data : "", raw.size, out, &error);
	if (rc < 0) {
		io_log(LOG_ERR, "schema block at %llu:%llu does not parse: %s",
			(unsigned long long)schema_block.segment, (unsigned long long)schema_block.offset,
			error.message);
		rc = -EIO;
	}
out:
	buf_free(&raw);
	return rc;
}

/* ---- fragments: decoding ------------------------------------------------------------ */

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

static void fragment_view_init(struct fragment_view *view)
{
	memset(view, 0, sizeof *view);
	buf_init(&view->raw);
}

/* Forgets the decoded fragment but keeps the memory for the next one. */
static void fragment_view_reset(struct fragment_view *view)
{
	struct buf raw = view->raw;
	uint32_t *ends = view->ends;
	size_t ends_capacity = view->ends_capacity;
	if (view->deleted)
		roaring_bitmap_free(view->deleted);
	memset(view, 0, sizeof *view);
	view->raw = raw;
	buf_reset(&view->raw);
	view->ends = ends;
	view->ends_capacity = ends_capacity;
}

static void fragment_view_clear(struct fragment_view *view)
{
	fragment_view_reset(view);
	buf_free(&view->raw);
	free(view->ends);
	fragment_view_init(view);
}

static size_t line_start(const struct fragment_view *view, uint32_t row)
{
	return row ? view->ends[row - 1] : 0;
}

static size_t line_end(const struct fragment_view *view, uint32_t row)
{
	return view->ends[row];
}

/*
 * The id of a canonical line (which starts {"id":"<id as a JSON string>"):
 * points into the line when the id has no escapes, else decodes it (jansson)
 * into scratch. Returns 0, -EIO (not a canonical line) or -ENOMEM.
 */
static int line_id(const uint8_t *line, size_t size, struct buf *scratch, const uint8_t **id,
		   size_t *id_size)
{
	static const char prefix[] = "{\"id\":";
	const size_t prefix_size = sizeof prefix - 1;
	if (size < prefix_size + 2 || memcmp(line, prefix, prefix_size) != 0)
		return -EIO;
	size_t at = prefix_size;
	return table_line_string(line, size, &at, scratch, id, id_size);
}

/* True if the canonical line's id is id (what stage_add checks and readers rely on). */
static bool line_has_id(const uint8_t *line, size_t size, const void *id, size_t id_size,
			struct buf *scratch)
{
	const uint8_t *found;
	size_t found_size;
	return line_id(line, size, scratch, &found, &found_size) == 0 && found_size == id_size &&
	       (id_size == 0 || memcmp(found, id, id_size) == 0);
}

/*
 * Reads and deserializes a deletion bitmap of a fragment of rows rows, through
 * append when given (apply may read what the same publish appended).
 * Returns 0, -EIO, -ENOENT, -ENOMEM.
 */
static int bitmap_read(struct pager *pager, struct pager_append *append, struct block_address address,
		       uint32_t rows, roaring_bitmap_t **out)
{
	struct buf raw;
	buf_init(&raw);
	roaring_bitmap_t *bitmap = NULL;
	*out = NULL;
	int rc = append ? pager_append_read(append, address, BLOCK_BITMAP, &raw)
			: pager_read(pager, address, BLOCK_BITMAP, &raw);
	if (rc < 0)
		goto out;
	rc = -EIO;
	if (raw.size == 0 ||
	    roaring_bitmap_portable_deserialize_size((const char *)raw.data, raw.size) != raw.size ||
	    !(bitmap = roaring_bitmap_portable_deserialize_safe((const char *)raw.data, raw.size)) ||
	    (!roaring_bitmap_is_empty(bitmap) && roaring_bitmap_maximum(bitmap) >= rows)) {
		io_log(LOG_ERR, "deletion bitmap at %llu:%llu is malformed",
			(unsigned long long)address.segment, (unsigned long long)address.offset);
		if (bitmap)
			roaring_bitmap_free(bitmap);
		goto out;
	}
	*out = bitmap;
	rc = 0;
out:
	buf_free(&raw);
	return rc;
}

/*
 * Loads the fragment a descriptor names (block and bitmap), checks its
 * structure against the descriptor and counts its rows as decoded data rows.
 * On error the view is cleared. Returns 0, -EIO, -ENOENT, -ENOMEM.
 */
static int fragment_view_load(struct pager *pager, const struct fragment_descriptor *descriptor,
			      struct fragment_view *view)
{
	fragment_view_reset(view);
	bool inconsistent = false;
	int rc = pager_read(pager, descriptor->block, BLOCK_FRAGMENT, &view->raw);
	if (rc < 0)
		goto out;
	inconsistent = true;
	rc = -EIO;
	if (view->raw.size < 4)
		goto out;
	uint32_t rows = buf_load_u32(view->raw.data);
	if (rows != descriptor->rows || (view->raw.size - 4) / 4 < rows)
		goto out;
	if (grow_array((void **)&view->ends, &view->ends_capacity, rows, sizeof *view->ends) < 0) {
		inconsistent = false;
		rc = -ENOMEM;
		goto out;
	}
	view->rows = rows;
	size_t header = 4 + 4 * (size_t)rows;
	view->lines = view->raw.data + header;
	view->lines_size = view->raw.size - header;
	size_t end = 0;
	for (uint32_t row = 0; row < rows; row++) {
		size_t length = buf_load_u32(view->raw.data + 4 + 4 * (size_t)row);
		if (length == 0 || length > view->lines_size - end || view->lines[end + length - 1] != '\n')
			goto out;
		end += length;
		view->ends[row] = (uint32_t)end;
	}
	if (end != view->lines_size)
		goto out;
	io_count_rows(IO_DATA, rows);
	view->live_rows = rows;
	view->live_bytes = view->lines_size;
	if (!block_address_is_null(descriptor->bitmap)) {
		rc = bitmap_read(pager, NULL, descriptor->bitmap, rows, &view->deleted);
		if (rc < 0) {
			inconsistent = false; /* the pager has said why */
			goto out;
		}
		rc = -EIO;
		roaring_uint32_iterator_t iterator;
		roaring_init_iterator(view->deleted, &iterator);
		for (; iterator.has_value; roaring_advance_uint32_iterator(&iterator)) {
			uint32_t row = iterator.current_value;
			view->live_rows--;
			view->live_bytes -= line_end(view, row) - line_start(view, row);
		}
	}
	if (view->live_rows != descriptor->live_rows || view->live_bytes != descriptor->live_bytes)
		goto out;
	rc = 0;
out:
	if (rc < 0) {
		if (inconsistent)
			io_log(LOG_ERR, "fragment at %llu:%llu is inconsistent with its descriptor",
				(unsigned long long)descriptor->block.segment,
				(unsigned long long)descriptor->block.offset);
		fragment_view_reset(view);
	}
	return rc;
}

static bool fragment_view_is_live(const struct fragment_view *view, uint32_t row)
{
	return !view->deleted || !roaring_bitmap_contains(view->deleted, row);
}

/* Looks a fragment descriptor up by sequence in the fragment tree. 0, -ENOENT, -errno. */
static int descriptor_get(struct btree *fragments, uint64_t sequence, struct fragment_descriptor *out)
{
	uint8_t key[SEQUENCE_KEY_SIZE];
	sequence_key(sequence, key);
	struct buf value;
	buf_init(&value);
	int rc = btree_get(fragments, key, sizeof key, &value);
	if (rc == 0)
		rc = descriptor_decode(value.data, value.size, out);
	buf_free(&value);
	return rc;
}

/* ---- reading ------------------------------------------------------------------------ */

struct reader_fragment {
	struct fragment_descriptor descriptor;
	uint64_t start;                 /* rendered offset of its first live byte */
};

struct table_reader {
	struct pager *pager;
	struct reader_fragment *fragments;
	size_t fragment_count;
	uint64_t size;
	/* The last fragment decoded, and for fragments with deletions the live-row map. */
	size_t cached;                  /* index into fragments, or SIZE_MAX */
	struct fragment_view view;
	uint32_t *live_row;             /* live_count row indexes, in order */
	uint32_t *live_start;           /* their rendered offsets within the fragment */
	uint32_t live_count;
	size_t live_capacity;           /* of both arrays */
};

int table_reader_open(struct pager *pager, const struct table_info *info, struct table_reader **out)
{
	*out = NULL;
	struct table_reader *reader = calloc(1, sizeof *reader);
	struct btree *tree = NULL;
	struct btree_iterator *iterator = NULL;
	if (!reader)
		return -ENOMEM;
	reader->pager = pager;
	reader->cached = SIZE_MAX;
	fragment_view_init(&reader->view);
	size_t capacity = 0;
	int rc = btree_open(pager, info->fragments, &tree);
	if (rc < 0)
		goto out;
	rc = btree_iterator_open(tree, NULL, 0, &iterator);
	if (rc < 0)
		goto out;
	for (;;) {
		const uint8_t *key, *value;
		size_t key_size, value_size;
		rc = btree_iterator_next(iterator, &key, &key_size, &value, &value_size);
		if (rc <= 0)
			break;
		if (reader->fragment_count == capacity) {
			size_t grown = capacity ? capacity * 2 : 16;
			struct reader_fragment *fragments = realloc(reader->fragments, grown * sizeof *fragments);
			if (!fragments) {
				rc = -ENOMEM;
				goto out;
			}
			reader->fragments = fragments;
			capacity = grown;
		}
		struct reader_fragment *fragment = &reader->fragments[reader->fragment_count];
		if (key_size != SEQUENCE_KEY_SIZE ||
		    descriptor_decode(value, value_size, &fragment->descriptor) < 0) {
			rc = -EIO;
			goto out;
		}
		fragment->start = reader->size;
		reader->size += fragment->descriptor.live_bytes;
		reader->fragment_count++;
	}
	if (rc < 0)
		goto out;
	if (reader->size != info->byte_size) {
		io_log(LOG_ERR, "table fragments hold %llu bytes, the table version says %llu",
			(unsigned long long)reader->size, (unsigned long long)info->byte_size);
		rc = -EIO;
		goto out;
	}
	*out = reader;
	reader = NULL;
	rc = 0;
out:
	btree_iterator_free(iterator);
	btree_free(tree);
	table_reader_free(reader);
	return rc;
}

void table_reader_free(struct table_reader *reader)
{
	if (!reader)
		return;
	fragment_view_clear(&reader->view);
	free(reader->live_row);
	free(reader->live_start);
	free(reader->fragments);
	free(reader);
}

uint64_t table_reader_size(const struct table_reader *reader)
{
	return reader->size;
}

/* Makes fragment index the decoded one (with its live-row map). 0 or -errno. */
static int reader_decode(struct table_reader *reader, size_t index)
{
	if (reader->cached == index)
		return 0;
	reader->cached = SIZE_MAX;
	reader->live_count = 0;
	int rc = fragment_view_load(reader->pager, &reader->fragments[index].descriptor, &reader->view);
	if (rc < 0)
		return rc;
	struct fragment_view *view = &reader->view;
	if (view->deleted) {
		size_t capacity = reader->live_capacity;
		if ((rc = grow_array((void **)&reader->live_row, &capacity, view->live_rows,
				     sizeof *reader->live_row)) < 0 ||
		    (rc = grow_array((void **)&reader->live_start, &reader->live_capacity, view->live_rows,
				     sizeof *reader->live_start)) < 0) {
			fragment_view_reset(view);
			return rc;
		}
		uint32_t position = 0;
		for (uint32_t row = 0; row < view->rows; row++) {
			if (!fragment_view_is_live(view, row))
				continue;
			reader->live_row[reader->live_count] = row;
			reader->live_start[reader->live_count] = position;
			reader->live_count++;
			position += (uint32_t)(line_end(view, row) - line_start(view, row));
		}
		assert(reader->live_count == view->live_rows);
	}
	reader->cached = index;
	return 0;
}

/* Index of the fragment holding rendered byte offset (offset < reader->size). */
static size_t reader_find_fragment(const struct table_reader *reader, uint64_t offset)
{
	size_t low = 0, high = reader->fragment_count;
	while (high - low > 1) {
		size_t middle = low + (high - low) / 2;
		if (reader->fragments[middle].start <= offset)
			low = middle;
		else
			high = middle;
	}
	return low;
}

ssize_t table_reader_pread(struct table_reader *reader, void *out, size_t size, uint64_t offset)
{
	uint8_t *destination = out;
	size_t copied = 0;
	while (copied < size && offset < reader->size) {
		size_t index = reader->cached != SIZE_MAX &&
					       offset >= reader->fragments[reader->cached].start &&
					       offset - reader->fragments[reader->cached].start <
						       reader->fragments[reader->cached].descriptor.live_bytes
				       ? reader->cached
				       : reader_find_fragment(reader, offset);
		int rc = reader_decode(reader, index);
		if (rc < 0)
			return rc;
		const struct reader_fragment *fragment = &reader->fragments[index];
		const struct fragment_view *view = &reader->view;
		uint64_t within = offset - fragment->start;
		if (!view->deleted) {
			/* All lines live: the rendering is the lines area itself. */
			size_t take = (size_t)(view->lines_size - within);
			if (take > size - copied)
				take = size - copied;
			memcpy(destination + copied, view->lines + within, take);
			copied += take;
			offset += take;
			continue;
		}
		size_t low = 0, high = reader->live_count;
		while (high - low > 1) {
			size_t middle = low + (high - low) / 2;
			if (reader->live_start[middle] <= within)
				low = middle;
			else
				high = middle;
		}
		for (size_t live = low; live < reader->live_count && copied < size; live++) {
			uint32_t row = reader->live_row[live];
			size_t start = line_start(view, row);
			size_t length = line_end(view, row) - start;
			size_t skip = (size_t)(within - reader->live_start[live]);
			size_t take = length - skip;
			if (take > size - copied)
				take = size - copied;
			memcpy(destination + copied, view->lines + start + skip, take);
			copied += take;
			offset += take;
			within += take;
		}
	}
	return (ssize_t)copied;
}

int table_lookup(struct pager *pager, const struct table_info *info, const void *id, size_t id_size,
		 struct buf *row_out)
{
	struct btree *keys = NULL, *fragments = NULL;
	struct buf value;
	buf_init(&value);
	struct fragment_view view;
	fragment_view_init(&view);
	struct buf scratch;
	buf_init(&scratch);
	struct key_value location;
	struct fragment_descriptor descriptor;
	int rc;
	if (block_address_is_null(info->keys))
		return -ENOENT;
	if ((rc = btree_open(pager, info->keys, &keys)) < 0 ||
	    (rc = btree_get(keys, id, id_size, &value)) < 0)
		goto out;
	if ((rc = key_value_decode(value.data, value.size, &location)) < 0 ||
	    (rc = btree_open(pager, info->fragments, &fragments)) < 0)
		goto out;
	rc = descriptor_get(fragments, location.sequence, &descriptor);
	if (rc == -ENOENT)
		rc = -EIO; /* the key tree names a fragment the table does not have */
	if (rc < 0 || (rc = fragment_view_load(pager, &descriptor, &view)) < 0)
		goto out;
	if (location.row_index >= view.rows || !fragment_view_is_live(&view, location.row_index)) {
		rc = -EIO;
		goto out;
	}
	size_t start = line_start(&view, location.row_index);
	size_t length = line_end(&view, location.row_index) - start;
	if (!line_has_id(view.lines + start, length, id, id_size, &scratch)) {
		rc = -EIO;
		goto out;
	}
	rc = buf_append(row_out, view.lines + start, length);
out:
	fragment_view_clear(&view);
	buf_free(&value);
	buf_free(&scratch);
	btree_free(keys);
	btree_free(fragments);
	return rc;
}

/* ---- membership ---------------------------------------------------------------------- */

/*
 * A finder answers through the key tree's finder until it has been asked
 * often enough that reading the whole key tree once costs less than the
 * lookups would (more than FINDER_SET_MIN_LOOKUPS lookups, and more than
 * 1/16 of the rows: at random, every leaf would be decoded again and again);
 * it then loads every id into one compact array (the id bytes plus 4 bytes
 * each) with an open-addressing hash index over it (8 bytes an id): exact,
 * one or two cache misses and no node decode per lookup. A table whose ids
 * would take more than FINDER_SET_LIMIT bytes keeps the tree finder.
 */
#define FINDER_SET_LIMIT (512u << 20)
#define FINDER_SET_MIN_LOOKUPS 4096

struct table_finder {
	struct pager *pager;
	struct table_info info;
	struct btree_finder *keys;
	uint64_t lookups;
	bool set_tried;                 /* the id set was built, or could not be */
	struct buf ids;                 /* the id set: every id, in key order, concatenated */
	uint32_t *ends;                 /* end offset of id i in ids; NULL: no id set */
	size_t count;
	uint32_t *slots;                /* id index + 1, 0: empty; slot_mask + 1 slots */
	size_t slot_mask;
};

int table_finder_open(struct pager *pager, const struct table_info *info, size_t budget,
		      struct table_finder **out)
{
	struct table_finder *finder = calloc(1, sizeof *finder);
	if (!finder)
		return -ENOMEM;
	finder->pager = pager;
	finder->info = *info;
	buf_init(&finder->ids);
	int rc = btree_finder_open(pager, info->keys, budget, &finder->keys);
	if (rc < 0) {
		free(finder);
		return rc;
	}
	*out = finder;
	return 0;
}

void table_finder_free(struct table_finder *finder)
{
	if (!finder)
		return;
	btree_finder_free(finder->keys);
	buf_free(&finder->ids);
	free(finder->ends);
	free(finder->slots);
	free(finder);
}

/* Reads every id into the id set, once. A failure leaves the tree finder in use. */
static void finder_build_set(struct table_finder *finder)
{
	finder->set_tried = true;
	uint64_t rows = finder->info.row_count;
	if (rows == 0 || rows > UINT32_MAX)
		return;
	struct btree *keys = NULL;
	struct btree_iterator *iterator = NULL;
	uint32_t *ends = malloc((size_t)rows * sizeof *ends);
	size_t count = 0;
	int rc = ends ? btree_open(finder->pager, finder->info.keys, &keys) : -ENOMEM;
	if (rc == 0)
		rc = btree_iterator_open(keys, NULL, 0, &iterator);
	const uint8_t *id, *value;
	size_t id_size, value_size;
	while (rc == 0 && (rc = btree_iterator_next(iterator, &id, &id_size, &value, &value_size)) == 1) {
		if (count == rows || finder->ids.size + id_size > FINDER_SET_LIMIT) {
			rc = -E2BIG;
			break;
		}
		rc = buf_append(&finder->ids, id, id_size);
		if (rc == 0)
			ends[count++] = (uint32_t)finder->ids.size;
	}
	btree_iterator_free(iterator);
	btree_free(keys);
	size_t capacity = 1024;
	while (capacity < 2 * (size_t)rows)
		capacity *= 2;
	uint32_t *slots = rc == 0 && count == rows ? calloc(capacity, sizeof *slots) : NULL;
	if (!slots) {
		free(ends);
		buf_free(&finder->ids);
		buf_init(&finder->ids);
		return;
	}
	for (size_t i = 0; i < count; i++) {
		size_t start = i ? ends[i - 1] : 0;
		size_t slot = (size_t)codec_hash(finder->ids.data + start, ends[i] - start) & (capacity - 1);
		while (slots[slot])
			slot = (slot + 1) & (capacity - 1);
		slots[slot] = (uint32_t)i + 1;
	}
	finder->ends = ends;
	finder->count = count;
	finder->slots = slots;
	finder->slot_mask = capacity - 1;
	/* the set answers from now on: the decoded nodes go */
	btree_finder_free(finder->keys);
	finder->keys = NULL;
}

static int set_has(const struct table_finder *finder, const uint8_t *id, size_t id_size)
{
	for (size_t slot = (size_t)codec_hash(id, id_size) & finder->slot_mask; finder->slots[slot];
	     slot = (slot + 1) & finder->slot_mask) {
		size_t index = finder->slots[slot] - 1;
		size_t start = index ? finder->ends[index - 1] : 0;
		if (finder->ends[index] - start == id_size && memcmp(finder->ids.data + start, id, id_size) == 0)
			return 1;
	}
	return 0;
}

int table_finder_has(struct table_finder *finder, const void *id, size_t id_size)
{
	if (!finder->set_tried && ++finder->lookups > FINDER_SET_MIN_LOOKUPS &&
	    finder->lookups * 16 > finder->info.row_count)
		finder_build_set(finder);
	if (finder->ends)
		return set_has(finder, id, id_size);
	const uint8_t *value;
	size_t value_size;
	int rc = btree_finder_get(finder->keys, id, id_size, &value, &value_size);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	return value_size == KEY_VALUE_SIZE ? 1 : -EIO;
}

/* ---- staging ------------------------------------------------------------------------- */

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
	uint32_t fragment;              /* stage fragment ordinal */
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
};

struct table_stage {
	struct pager *pager;
	enum table_write_mode mode;
	enum codec_kind codec;
	table_segment_allocator allocate;
	void *allocate_context;
	struct pager_segment *segment;  /* non-NULL once spilled */
	uint64_t segment_id;
	bool sealed;
	bool published;

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
	/* A sealed spilled overwrite: its key tree, built into the segment by the seal. */
	bool keys_prebuilt;
	struct block_address prebuilt_keys;
	/* An edge table's stage: what its adjacency indexes need (table_edges.c); NULL for node tables. */
	struct stage_edges *edges;
	int edges_error;                /* the first failure to record a row in edges: sticky */
};

#define STAGE_RUN_ID_BYTES (UINT32_C(24) << 20)

static const uint8_t *entry_id(const struct table_stage *stage, const struct stage_entry *entry)
{
	return stage->ids.data + entry->id_offset;
}

/* The tag of a hash in the id map (never 0, which marks an empty slot). */
static uint8_t slot_tag(uint64_t hash)
{
	uint8_t tag = (uint8_t)(hash >> 56);
	return tag ? tag : 1;
}

/* Finds the map slot of id (hash: codec_hash of it): its entry's slot, or the empty slot it would take. */
static size_t stage_find_slot(const struct table_stage *stage, const void *id, size_t id_size,
			      uint64_t hash)
{
	size_t mask = stage->slot_capacity - 1;
	uint8_t tag = slot_tag(hash);
	size_t slot = (size_t)hash & mask;
	for (;;) {
		uint8_t held = stage->tags[slot];
		if (held == 0)
			return slot;
		if (held == tag) {
			const struct stage_entry *entry = &stage->entries[stage->slots[slot] - 1];
			if (entry->id_size == id_size && memcmp(entry_id(stage, entry), id, id_size) == 0)
				return slot;
		}
		slot = (slot + 1) & mask;
	}
}

static int compare_entries_by_id(const void *a, const void *b, void *context);
static void sort_entries(struct table_stage *stage, uint32_t *sorted, size_t count);

/* The index + 1 of the entry of id among count sorted entry indexes, or 0. */
static uint32_t sorted_search(const struct table_stage *stage, const uint32_t *sorted, size_t count,
			      const void *id, size_t id_size)
{
	size_t low = 0, high = count;
	while (low < high) {
		size_t middle = low + (high - low) / 2;
		const struct stage_entry *entry = &stage->entries[sorted[middle]];
		int order = id_compare(entry_id(stage, entry), entry->id_size, id, id_size);
		if (order == 0)
			return sorted[middle] + 1;
		if (order < 0)
			low = middle + 1;
		else
			high = middle;
	}
	return 0;
}

/* The index + 1 of the entry last staged for id, or 0. */
static uint32_t stage_lookup(const struct table_stage *stage, const void *id, size_t id_size)
{
	if (stage->map_is_sorted) {
		uint32_t held = sorted_search(stage, stage->sorted, stage->sorted_count, id, id_size);
		return held ? held
			    : sorted_search(stage, stage->sorted + stage->sorted_count, stage->deleted_count,
					    id, id_size);
	}
	if (stage->ids_ascending) {
		/* Every entry, in id order (none is DEAD: no id came twice). */
		size_t low = 0, high = stage->entry_count;
		while (low < high) {
			size_t middle = low + (high - low) / 2;
			const struct stage_entry *entry = &stage->entries[middle];
			int order = id_compare(entry_id(stage, entry), entry->id_size, id, id_size);
			if (order == 0)
				return (uint32_t)middle + 1;
			if (order < 0)
				low = middle + 1;
			else
				high = middle;
		}
		return 0;
	}
	if (stage->slot_capacity == 0)
		return 0;
	size_t slot = stage_find_slot(stage, id, id_size, codec_hash(id, id_size));
	return stage->tags[slot] ? stage->slots[slot] : 0;
}

/* True if id is greater than the last entry's (or there is none). */
static bool id_after_last(const struct table_stage *stage, const void *id, size_t id_size)
{
	if (stage->entry_count == 0)
		return true;
	const struct stage_entry *last = &stage->entries[stage->entry_count - 1];
	return id_compare(entry_id(stage, last), last->id_size, id, id_size) < 0;
}

/* True if the map must grow before it takes one more id (keeps the load at most 3/4). */
static bool stage_map_full(const struct table_stage *stage)
{
	return (stage->distinct + 1) * 4 > stage->slot_capacity * 3;
}

/* Doubles the id map. 0 or -ENOMEM; unchanged on error. */
static int stage_grow_map(struct table_stage *stage)
{
	size_t capacity = stage->slot_capacity ? stage->slot_capacity * 2 : 1024;
	uint32_t *slots = malloc(capacity * sizeof *slots);
	uint8_t *tags = calloc(capacity, sizeof *tags);
	if (!slots || !tags) {
		free(slots);
		free(tags);
		return -ENOMEM;
	}
	uint32_t *old_slots = stage->slots;
	uint8_t *old_tags = stage->tags;
	size_t old_capacity = stage->slot_capacity;
	stage->slots = slots;
	stage->tags = tags;
	stage->slot_capacity = capacity;
	for (size_t i = 0; i < old_capacity; i++) {
		if (!old_tags[i])
			continue;
		const struct stage_entry *entry = &stage->entries[old_slots[i] - 1];
		size_t slot = (size_t)codec_hash(entry_id(stage, entry), entry->id_size) & (capacity - 1);
		while (tags[slot])
			slot = (slot + 1) & (capacity - 1);
		slots[slot] = old_slots[i];
		tags[slot] = old_tags[i];
	}
	free(old_slots);
	free(old_tags);
	return 0;
}

/*
 * Leaves ascending mode (invariant 8): puts every entry (all distinct, none
 * DEAD) into the map. 0 or -ENOMEM; on error the stage is unchanged.
 */
static int stage_build_map(struct table_stage *stage)
{
	assert(stage->ids_ascending && stage->distinct == stage->entry_count);
	while (stage_map_full(stage)) {
		int rc = stage_grow_map(stage);
		if (rc < 0)
			return rc;
	}
	for (size_t i = 0; i < stage->entry_count; i++) {
		const struct stage_entry *entry = &stage->entries[i];
		uint64_t hash = codec_hash(entry_id(stage, entry), entry->id_size);
		size_t slot = stage_find_slot(stage, entry_id(stage, entry), entry->id_size, hash);
		stage->slots[slot] = (uint32_t)i + 1;
		stage->tags[slot] = slot_tag(hash);
	}
	stage->ids_ascending = false;
	return 0;
}

/* ---- the spill writer ---- */

/* Copies the addresses of completed jobs to their fragments. Called with the writer's lock held. */
static void writer_harvest(struct table_stage *stage)
{
	struct stage_writer *writer = &stage->writer;
	for (; writer->harvested < writer->completed; writer->harvested++) {
		const struct stage_job *job = &writer->jobs[writer->harvested % STAGE_QUEUE_DEPTH];
		stage->fragments[job->fragment].address = job->address;
	}
}

static void *writer_main(void *argument)
{
	struct table_stage *stage = argument;
	struct stage_writer *writer = &stage->writer;
	pthread_mutex_lock(&writer->lock);
	for (;;) {
		while (writer->completed == writer->submitted && !writer->stopping)
			pthread_cond_wait(&writer->changed, &writer->lock);
		if (writer->completed == writer->submitted)
			break;
		struct stage_job *job = &writer->jobs[writer->completed % STAGE_QUEUE_DEPTH];
		int failure = writer->failure;
		pthread_mutex_unlock(&writer->lock);
		int rc = failure;
		if (rc == 0)
			rc = pager_segment_block(stage->segment, BLOCK_FRAGMENT, stage->codec,
						 job->payload.data, job->payload.size, &job->address);
		pthread_mutex_lock(&writer->lock);
		if (rc < 0 && writer->failure == 0)
			writer->failure = rc;
		writer->completed++;
		pthread_cond_broadcast(&writer->changed);
	}
	pthread_mutex_unlock(&writer->lock);
	return NULL;
}

/* Starts the writer thread; without one (it could not start) fragments are written inline. */
static void writer_start(struct table_stage *stage)
{
	struct stage_writer *writer = &stage->writer;
	if (pthread_mutex_init(&writer->lock, NULL) != 0)
		return;
	if (pthread_cond_init(&writer->changed, NULL) != 0) {
		pthread_mutex_destroy(&writer->lock);
		return;
	}
	if (pthread_create(&writer->thread, NULL, writer_main, stage) != 0) {
		pthread_cond_destroy(&writer->changed);
		pthread_mutex_destroy(&writer->lock);
		return;
	}
	writer->running = true;
}

/* Waits until every submitted job is written, copies their addresses. Returns the writer's first error. */
static int writer_drain(struct table_stage *stage)
{
	struct stage_writer *writer = &stage->writer;
	if (!writer->running)
		return writer->failure;
	pthread_mutex_lock(&writer->lock);
	while (writer->completed < writer->submitted)
		pthread_cond_wait(&writer->changed, &writer->lock);
	writer_harvest(stage);
	int failure = writer->failure;
	pthread_mutex_unlock(&writer->lock);
	return failure;
}

/* Stops and joins the writer after it has written (or, after a failure, skipped) every job. */
static void writer_stop(struct table_stage *stage)
{
	struct stage_writer *writer = &stage->writer;
	if (!writer->running)
		return;
	pthread_mutex_lock(&writer->lock);
	writer->stopping = true;
	pthread_cond_broadcast(&writer->changed);
	pthread_mutex_unlock(&writer->lock);
	pthread_join(writer->thread, NULL);
	writer_harvest(stage);
	writer->running = false;
	pthread_cond_destroy(&writer->changed);
	pthread_mutex_destroy(&writer->lock);
}

/* The writer's first error (0 if none), as the next add or the seal reports it. */
static int writer_failure(struct table_stage *stage)
{
	/* Every add asks: a lock here would bounce its cache line to the writer's core each row. */
	return atomic_load_explicit(&stage->writer.failure, memory_order_relaxed);
}

/*
 * The buffer the next fragment's payload goes into: a free job's (waiting
 * for one if STAGE_QUEUE_DEPTH are in flight), or the scratch buffer when
 * no writer runs.
 */
static struct buf *writer_next_payload(struct table_stage *stage)
{
	struct stage_writer *writer = &stage->writer;
	if (!writer->running)
		return &stage->scratch;
	pthread_mutex_lock(&writer->lock);
	while (writer->submitted - writer->completed >= STAGE_QUEUE_DEPTH)
		pthread_cond_wait(&writer->changed, &writer->lock);
	writer_harvest(stage);
	pthread_mutex_unlock(&writer->lock);
	return &writer->jobs[writer->submitted % STAGE_QUEUE_DEPTH].payload;
}

/*
 * Writes the payload (from writer_next_payload) as stage fragment `fragment`:
 * hands it to the writer, or writes it now when no writer runs. 0 or -errno
 * (only when written now: the writer's errors surface later).
 */
static int writer_submit(struct table_stage *stage, uint32_t fragment)
{
	struct stage_writer *writer = &stage->writer;
	if (!writer->running) {
		if (writer->failure)
			return writer->failure;
		return pager_segment_block(stage->segment, BLOCK_FRAGMENT, stage->codec, stage->scratch.data,
					   stage->scratch.size, &stage->fragments[fragment].address);
	}
	pthread_mutex_lock(&writer->lock);
	writer->jobs[writer->submitted % STAGE_QUEUE_DEPTH].fragment = fragment;
	writer->submitted++;
	pthread_cond_broadcast(&writer->changed);
	pthread_mutex_unlock(&writer->lock);
	return 0;
}

int table_stage_open(struct pager *pager, enum table_write_mode mode, enum codec_kind codec,
		     table_segment_allocator allocate, void *allocate_context,
		     struct table_stage **out)
{
	struct table_stage *stage = calloc(1, sizeof *stage);
	if (!stage)
		return -ENOMEM;
	stage->pager = pager;
	stage->mode = mode;
	stage->codec = codec;
	stage->allocate = allocate;
	stage->allocate_context = allocate_context;
	stage->run_entries = TABLE_RUN_ENTRIES;
	stage->ids_ascending = true;
	buf_init(&stage->ids);
	buf_init(&stage->pending_lines);
	buf_init(&stage->scratch);
	for (size_t i = 0; i < STAGE_QUEUE_DEPTH; i++)
		buf_init(&stage->writer.jobs[i].payload);
	*out = stage;
	return 0;
}

void table_stage_free(struct table_stage *stage)
{
	if (!stage)
		return;
	writer_stop(stage);
	for (size_t i = 0; i < STAGE_QUEUE_DEPTH; i++)
		buf_free(&stage->writer.jobs[i].payload);
	if (stage->segment) {
		pager_segment_free(stage->segment);
		if (!stage->published)
			pager_segment_remove(stage->pager, stage->segment_id);
	}
	for (size_t i = 0; i < stage->fragment_count; i++) {
		buf_free(&stage->fragments[i].payload);
		if (stage->fragments[i].dead)
			roaring_bitmap_free(stage->fragments[i].dead);
	}
	free(stage->fragments);
	free(stage->entries);
	free(stage->slots);
	free(stage->tags);
	free(stage->pending);
	free(stage->sorted);
	stage_runs_free(stage->runs);
	stage_edges_free(stage->edges);
	buf_free(&stage->ids);
	buf_free(&stage->pending_lines);
	buf_free(&stage->scratch);
	free(stage);
}

bool table_stage_tracks_edges(const struct table_stage *stage)
{
	return stage->edges != NULL;
}

int table_stage_track_edges(struct table_stage *stage)
{
	if (stage->edges)
		return 0;
	if (stage->rows_added > 0 || stage->sealed)
		return -EINVAL;
	return stage_edges_open(stage->pager, stage->mode, &stage->edges);
}

void table_stage_set_run_entries(struct table_stage *stage, uint32_t entries)
{
	stage->run_entries = entries ? entries : 1;
}

void table_stage_published(struct table_stage *stage)
{
	stage->published = true;
}

enum table_write_mode table_stage_mode(const struct table_stage *stage)
{
	return stage->mode;
}

uint64_t table_stage_rows(const struct table_stage *stage)
{
	return stage->rows_added;
}

uint64_t table_stage_bytes(const struct table_stage *stage)
{
	return stage->bytes_added;
}

uint64_t table_stage_segment(const struct table_stage *stage)
{
	return stage->segment ? stage->segment_id : 0;
}

/* The record of an in-memory entry (its id points into stage->ids). */
static struct stage_record entry_record(const struct table_stage *stage, const struct stage_entry *entry)
{
	return (struct stage_record){
		.id = entry_id(stage, entry),
		.id_size = (uint16_t)entry->id_size,
		.is_delete = (entry->flags & ENTRY_DELETE) != 0,
		.fragment = entry->location,
		.row_index = (uint16_t)entry->row_index,
		.line_size = entry->line_size,
	};
}

/* What the stage last staged for id: 1 with *out, 0 if nothing, or -errno (a run read back damaged). */
static int stage_find(const struct table_stage *stage, const void *id, size_t id_size, struct stage_record *out)
{
	uint32_t held = stage_lookup(stage, id, id_size);
	if (held) {
		*out = entry_record(stage, &stage->entries[held - 1]);
		return 1;
	}
	return stage->runs ? stage_runs_find(stage->runs, id, id_size, out) : 0;
}

int table_stage_has(const struct table_stage *stage, const void *id, size_t id_size)
{
	struct stage_record record;
	int found = stage_find(stage, id, id_size, &record);
	return found == 1 ? !record.is_delete : found;
}

int table_stage_deletes(const struct table_stage *stage, const void *id, size_t id_size)
{
	struct stage_record record;
	int found = stage_find(stage, id, id_size, &record);
	return found == 1 ? record.is_delete : found;
}

/*
 * Cuts one fragment from the pending rows starting at *cursor: the live
 * rows that fit TABLE_FRAGMENT_ROWS / TABLE_FRAGMENT_BYTES. A spilled stage
 * writes it to the segment; an inline one keeps the payload for apply.
 * Advances *cursor past the rows consumed. 0 or -errno; on error no row was
 * assigned to a fragment.
 */
static int stage_cut(struct table_stage *stage, size_t *cursor)
{
	size_t first = *cursor, end = first;
	uint32_t rows = 0;
	uint64_t bytes = 0;
	while (end < stage->pending_count) {
		const struct stage_entry *entry = &stage->entries[stage->pending[end]];
		if (!(entry->flags & ENTRY_DEAD)) {
			if (rows == TABLE_FRAGMENT_ROWS ||
			    (rows > 0 && bytes + entry->line_size > TABLE_FRAGMENT_BYTES))
				break;
			rows++;
			bytes += entry->line_size;
		}
		end++;
	}
	if (rows == 0) {
		*cursor = end;
		return 0;
	}
	if (4 + 4 * (uint64_t)rows + bytes > BLOCK_MAX_RAW_SIZE)
		return -EFBIG;
	int rc = grow_array((void **)&stage->fragments, &stage->fragment_capacity,
			    stage->fragment_count + 1, sizeof *stage->fragments);
	if (rc < 0)
		return rc;
	struct buf *payload = stage->segment ? writer_next_payload(stage) : &stage->scratch;
	buf_reset(payload);
	if ((rc = buf_reserve(payload, 4 + 4 * (size_t)rows + bytes)) < 0)
		return rc;
	buf_put_u32(payload, rows);
	for (size_t i = first; i < end; i++) {
		const struct stage_entry *entry = &stage->entries[stage->pending[i]];
		if (!(entry->flags & ENTRY_DEAD))
			buf_put_u32(payload, entry->line_size);
	}
	for (size_t i = first; i < end; i++) {
		const struct stage_entry *entry = &stage->entries[stage->pending[i]];
		if (!(entry->flags & ENTRY_DEAD))
			buf_append(payload, stage->pending_lines.data + entry->location, entry->line_size);
	}
	struct stage_fragment *fragment = &stage->fragments[stage->fragment_count];
	memset(fragment, 0, sizeof *fragment);
	buf_init(&fragment->payload);
	if (stage->segment) {
		if ((rc = writer_submit(stage, (uint32_t)stage->fragment_count)) < 0)
			return rc;
	} else {
		/* Hand the scratch buffer over as the payload; the scratch starts afresh. */
		fragment->payload = *payload;
		buf_init(payload);
	}
	fragment->rows = rows;
	fragment->live_rows = rows;
	fragment->live_bytes = bytes;
	uint32_t index = 0;
	for (size_t i = first; i < end; i++) {
		struct stage_entry *entry = &stage->entries[stage->pending[i]];
		if (entry->flags & ENTRY_DEAD)
			continue;
		entry->flags |= ENTRY_CUT;
		entry->location = (uint32_t)stage->fragment_count;
		entry->row_index = index++;
	}
	stage->fragment_count++;
	*cursor = end;
	return 0;
}

/* Cuts every pending row into fragments; pending is empty after success. 0 or -errno. */
static int stage_cut_all(struct table_stage *stage)
{
	size_t cursor = 0;
	int rc = 0;
	while (cursor < stage->pending_count && rc == 0)
		rc = stage_cut(stage, &cursor);
	/* Drop the rows that were cut (all of them unless an error stopped us). */
	if (cursor > 0 && cursor < stage->pending_count)
		memmove(stage->pending, stage->pending + cursor,
			(stage->pending_count - cursor) * sizeof *stage->pending);
	stage->pending_count -= cursor;
	if (stage->pending_count == 0)
		buf_reset(&stage->pending_lines);
	return rc;
}

/* Moves the stage to a segment of its own: announces, creates it and cuts pending rows into it. */
static int stage_spill(struct table_stage *stage)
{
	if (!stage->allocate)
		return -ENOSPC;
	uint64_t segment_id;
	int rc = stage->allocate(stage->allocate_context, &segment_id);
	if (rc < 0)
		return rc;
	rc = pager_segment_create(stage->pager, segment_id, &stage->segment);
	if (rc < 0)
		return rc;
	stage->segment_id = segment_id;
	writer_start(stage);
	return stage_cut_all(stage);
}

/* Marks the entry superseded by a newer one for its id (invariant 5 for cut rows). */
static void stage_kill(struct table_stage *stage, struct stage_entry *entry)
{
	assert(!(entry->flags & ENTRY_DEAD));
	entry->flags |= ENTRY_DEAD;
	if (entry->flags & ENTRY_DELETE)
		return;
	stage->live_rows--;
	stage->live_bytes -= entry->line_size;
	if (entry->flags & ENTRY_CUT) {
		struct stage_fragment *fragment = &stage->fragments[entry->location];
		roaring_bitmap_add(fragment->dead, entry->row_index);
		fragment->live_rows--;
		fragment->live_bytes -= entry->line_size;
	}
}

/* Marks a row of an earlier run superseded (invariant 9); its fragment's dead bitmap exists. */
static void stage_kill_record(struct table_stage *stage, const struct stage_record *record)
{
	if (record->is_delete)
		return;
	struct stage_fragment *fragment = &stage->fragments[record->fragment];
	assert(fragment->dead && fragment->live_rows > 0);
	stage->live_rows--;
	stage->live_bytes -= record->line_size;
	roaring_bitmap_add(fragment->dead, record->row_index);
	fragment->live_rows--;
	fragment->live_bytes -= record->line_size;
}

/*
 * Writes the entries that are not DEAD, in id order, as the stage's next run
 * and starts entries, ids and map over (invariant 9). Cuts pending rows first,
 * so every row has its fragment. 0 or -errno; on error the entries are as
 * they were (some pending rows may have been cut).
 */
static int stage_flush_run(struct table_stage *stage)
{
	int rc = stage_cut_all(stage);
	if (rc < 0)
		return rc;
	if (!stage->runs && (rc = stage_runs_open(stage->pager, &stage->runs)) < 0)
		return rc;
	size_t count = 0;
	uint32_t *sorted = malloc((stage->distinct ? stage->distinct : 1) * sizeof *sorted);
	if (!sorted)
		return -ENOMEM;
	for (size_t i = 0; i < stage->entry_count; i++)
		if (!(stage->entries[i].flags & ENTRY_DEAD))
			sorted[count++] = (uint32_t)i;
	assert(count == stage->distinct);
	sort_entries(stage, sorted, count);
	rc = stage_runs_begin(stage->runs, count);
	for (size_t i = 0; rc == 0 && i < count; i++) {
		const struct stage_entry *entry = &stage->entries[sorted[i]];
		assert((entry->flags & ENTRY_DELETE) || (entry->flags & ENTRY_CUT));
		struct stage_record record = entry_record(stage, entry);
		rc = stage_runs_add(stage->runs, &record);
	}
	free(sorted);
	if (rc == 0)
		rc = stage_runs_end(stage->runs);
	if (rc < 0) {
		stage_runs_abandon(stage->runs);
		return rc;
	}
	stage->entry_count = 0;
	buf_reset(&stage->ids);
	if (stage->slot_capacity && !stage->ids_ascending)
		memset(stage->tags, 0, stage->slot_capacity);
	stage->distinct = 0;
	stage->ids_ascending = true;
	return 0;
}

static int stage_add_row(struct table_stage *stage, const struct schema_row *row)
{
	const uint8_t *id = row->id.data;
	size_t id_size = row->id.size;
	size_t line_size = row->is_delete ? 0 : row->canonical.size;
	int rc;
	if (stage->sealed || stage->map_is_sorted || id_size == 0 || id_size > BTREE_MAX_KEY || id_size > UINT16_MAX)
		return -EINVAL;
	if (row->is_delete && stage->mode == TABLE_OVERWRITE)
		return -EINVAL;
	/* The id's map slot is a cache miss in a large stage: start loading it while the line is checked. */
	bool hashed = !stage->ids_ascending;
	uint64_t hash = hashed ? codec_hash(id, id_size) : 0;
	if (hashed && stage->slot_capacity)
		__builtin_prefetch(&stage->tags[(size_t)hash & (stage->slot_capacity - 1)]);
	/* A row's line is canonical: it ends with "\n" and starts with its id (fragments keep no ids). */
	if (!row->is_delete && (line_size == 0 || row->canonical.data[line_size - 1] != '\n' ||
				!line_has_id(row->canonical.data, line_size, id, id_size, &stage->scratch)))
		return -EINVAL;
	/* A row must fit a fragment of its own; entry indexes are u32; id offsets fit 37 bits. */
	if (4 + 4 + (uint64_t)line_size > BLOCK_MAX_RAW_SIZE || stage->entry_count >= UINT32_MAX - 1 ||
	    stage->ids.size + id_size > STAGE_IDS_LIMIT)
		return -EFBIG;
	/* A fragment the spill writer failed to write fails every later add. */
	if ((rc = writer_failure(stage)) < 0)
		return rc;
	/* A full run goes to the scratch file before the lookups, which then see it there. */
	if (stage->segment &&
	    (stage->entry_count >= stage->run_entries || stage->ids.size + id_size > STAGE_RUN_ID_BYTES) &&
	    (rc = stage_flush_run(stage)) < 0)
		return rc;
	/* An id greater than the last is new to memory (invariant 8); one out of order needs the map. */
	if (stage->ids_ascending && !id_after_last(stage, id, id_size) && (rc = stage_build_map(stage)) < 0)
		return rc;
	size_t slot = 0;
	uint32_t held = 0;
	if (!stage->ids_ascending) {
		if (!hashed)
			hash = codec_hash(id, id_size);
		slot = stage->slot_capacity ? stage_find_slot(stage, id, id_size, hash) : 0;
		held = stage->slot_capacity && stage->tags[slot] ? stage->slots[slot] : 0;
	}
	if (held && stage->mode == TABLE_OVERWRITE)
		return -EEXIST;
	/* Not in memory: an earlier run may hold it. */
	struct stage_record earlier;
	int in_runs = 0;
	if (!held && stage->runs) {
		if ((in_runs = stage_runs_find(stage->runs, id, id_size, &earlier)) < 0)
			return in_runs;
		if (in_runs && stage->mode == TABLE_OVERWRITE)
			return -EEXIST;
		if (in_runs && !earlier.is_delete &&
		    (earlier.fragment >= stage->fragment_count ||
		     earlier.row_index >= stage->fragments[earlier.fragment].rows))
			return -EIO;
	}

	/* Make room first, so that nothing below can fail once the stage changes. */
	if (!row->is_delete) {
		if (!stage->segment && stage->pending_lines.size + line_size > TABLE_INLINE_LIMIT) {
			if ((rc = stage_spill(stage)) < 0)
				return rc;
		} else if (stage->segment &&
			   (stage->pending_count >= TABLE_FRAGMENT_ROWS ||
			    (stage->pending_count > 0 &&
			     stage->pending_lines.size + line_size > TABLE_FRAGMENT_BYTES))) {
			if ((rc = stage_cut_all(stage)) < 0)
				return rc;
		}
		if ((rc = buf_reserve(&stage->pending_lines, line_size)) < 0 ||
		    (rc = grow_array((void **)&stage->pending, &stage->pending_capacity,
				     stage->pending_count + 1, sizeof *stage->pending)) < 0)
			return rc;
	}
	/* The row this one supersedes may have been cut (just now, too): it needs a dead bitmap. */
	struct stage_entry *previous = held ? &stage->entries[held - 1] : NULL;
	uint32_t dying = UINT32_MAX; /* the fragment of the superseded row, if it was cut */
	if (previous && (previous->flags & ENTRY_CUT))
		dying = previous->location;
	else if (in_runs && !earlier.is_delete)
		dying = earlier.fragment;
	if (dying != UINT32_MAX && !stage->fragments[dying].dead) {
		roaring_bitmap_t *dead = roaring_bitmap_create();
		if (!dead)
			return -ENOMEM;
		stage->fragments[dying].dead = dead;
	}
	if ((rc = grow_array((void **)&stage->entries, &stage->entry_capacity, stage->entry_count + 1,
			     sizeof *stage->entries)) < 0 ||
	    (rc = buf_reserve(&stage->ids, id_size)) < 0)
		return rc;
	if (!stage->ids_ascending && !held && stage_map_full(stage)) {
		if ((rc = stage_grow_map(stage)) < 0)
			return rc;
		slot = stage_find_slot(stage, id, id_size, hash);
	}
	/* The entries array may have moved. */
	previous = held ? &stage->entries[held - 1] : NULL;

	size_t index = stage->entry_count++;
	struct stage_entry *entry = &stage->entries[index];
	memset(entry, 0, sizeof *entry);
	entry->id_offset = stage->ids.size;
	entry->id_size = id_size;
	buf_append(&stage->ids, id, id_size);
	if (row->is_delete) {
		entry->flags = ENTRY_DELETE;
	} else {
		entry->line_size = (uint32_t)line_size;
		entry->location = (uint32_t)stage->pending_lines.size;
		buf_append(&stage->pending_lines, row->canonical.data, line_size);
		stage->pending[stage->pending_count++] = (uint32_t)index;
		stage->live_rows++;
		stage->live_bytes += line_size;
	}
	if (previous) {
		stage_kill(stage, previous);
	} else {
		if (in_runs)
			stage_kill_record(stage, &earlier);
		stage->distinct++;
	}
	if (!stage->ids_ascending) {
		stage->slots[slot] = (uint32_t)index + 1;
		stage->tags[slot] = slot_tag(hash);
	}
	stage->rows_added++;
	stage->bytes_added += line_size;
	return 0;
}

int table_stage_add(struct table_stage *stage, const struct schema_row *row)
{
	if (stage->edges_error)
		return stage->edges_error;
	if (stage->edges && !row->is_delete && (row->from.size == 0 || row->to.size == 0))
		return -EINVAL;
	int rc = stage_add_row(stage, row);
	if (rc == 0 && stage->edges && (rc = stage_edges_add(stage->edges, row)) < 0)
		stage->edges_error = rc;  /* the row is staged but not indexed: the stage can no longer seal */
	return rc;
}

static int compare_entries_by_id(const void *a, const void *b, void *context)
{
	const struct table_stage *stage = context;
	const struct stage_entry *left = &stage->entries[*(const uint32_t *)a];
	const struct stage_entry *right = &stage->entries[*(const uint32_t *)b];
	return id_compare(entry_id(stage, left), left->id_size, entry_id(stage, right), right->id_size);
}

/* True if the count entry indexes are in strictly increasing id order. */
static bool entries_in_order(struct table_stage *stage, const uint32_t *sorted, size_t count)
{
	for (size_t i = 1; i < count; i++)
		if (compare_entries_by_id(&sorted[i - 1], &sorted[i], stage) >= 0)
			return false;
	return true;
}

#define SORT_SMALL 24   /* ranges this short are insertion-sorted */

/* Orders two entries by key, then (equal keys) by their whole ids. */
static int compare_keyed(const struct table_stage *stage, uint64_t key_a, uint32_t a, uint64_t key_b, uint32_t b)
{
	if (key_a != key_b)
		return key_a < key_b ? -1 : 1;
	return compare_entries_by_id(&a, &b, (void *)stage);
}

/*
 * Sorts keys[0..count) with the entry indexes beside them, in place: an
 * American flag sort (a most-significant-digit radix sort that permutes by
 * cycles, needing no second buffer) on byte `digit` of the keys, then each
 * bucket on the next byte; short ranges by insertion; ranges whose keys are
 * all equal by their whole ids.
 */
static void sort_keyed(struct table_stage *stage, uint64_t *keys, uint32_t *entries, size_t count, int digit)
{
	if (count < SORT_SMALL) {
		for (size_t i = 1; i < count; i++) {
			uint64_t key = keys[i];
			uint32_t entry = entries[i];
			size_t j = i;
			for (; j > 0 && compare_keyed(stage, keys[j - 1], entries[j - 1], key, entry) > 0; j--) {
				keys[j] = keys[j - 1];
				entries[j] = entries[j - 1];
			}
			keys[j] = key;
			entries[j] = entry;
		}
		return;
	}
	if (digit == 8) {
		/* Equal keys: only the whole ids tell them apart. */
		qsort_r(entries, count, sizeof *entries, compare_entries_by_id, stage);
		return;
	}
	int shift = 56 - 8 * digit;
	size_t counts[256] = { 0 }, starts[256], ends[256];
	for (size_t i = 0; i < count; i++)
		counts[(keys[i] >> shift) & 0xff]++;
	size_t position = 0;
	for (int b = 0; b < 256; b++) {
		starts[b] = position;
		position += counts[b];
		ends[b] = position;
	}
	size_t next[256];
	memcpy(next, starts, sizeof next);
	for (int b = 0; b < 256; b++) {
		while (next[b] < ends[b]) {
			uint64_t key = keys[next[b]];
			uint32_t entry = entries[next[b]];
			int home = (int)((key >> shift) & 0xff);
			/* Carry the element to its bucket, taking the one there along, until one belongs in b. */
			while (home != b) {
				uint64_t swap_key = keys[next[home]];
				uint32_t swap_entry = entries[next[home]];
				keys[next[home]] = key;
				entries[next[home]] = entry;
				next[home]++;
				key = swap_key;
				entry = swap_entry;
				home = (int)((key >> shift) & 0xff);
			}
			keys[next[b]] = key;
			entries[next[b]] = entry;
			next[b]++;
		}
	}
	for (int b = 0; b < 256; b++)
		if (counts[b] > 1)
			sort_keyed(stage, keys + starts[b], entries + starts[b], counts[b], digit + 1);
}

/*
 * Sorts count entry indexes by id. Ids often arrive in order (exports,
 * generated keys): then nothing moves. Otherwise each entry gets a key, the 8
 * bytes of its id after the common prefix of all of them (big-endian,
 * zero-padded: zero sorts first, as a shorter id does, so key order never
 * contradicts id order), and sort_keyed orders keys and indexes together: no
 * id is read but to break a tie. Cannot fail (without memory for the keys it
 * sorts the indexes by their ids).
 */
static void sort_entries(struct table_stage *stage, uint32_t *sorted, size_t count)
{
	if (count < 2 || entries_in_order(stage, sorted, count))
		return;
	uint64_t *keys = malloc(count * sizeof *keys);
	if (!keys) {
		qsort_r(sorted, count, sizeof *sorted, compare_entries_by_id, stage);
		return;
	}
	const struct stage_entry *first = &stage->entries[sorted[0]];
	size_t common = first->id_size;
	for (size_t i = 1; i < count && common > 0; i++) {
		const struct stage_entry *entry = &stage->entries[sorted[i]];
		const uint8_t *a = entry_id(stage, first), *b = entry_id(stage, entry);
		size_t limit = common < entry->id_size ? common : entry->id_size, same = 0;
		while (same < limit && a[same] == b[same])
			same++;
		common = same;
	}
	for (size_t i = 0; i < count; i++) {
		const struct stage_entry *entry = &stage->entries[sorted[i]];
		const uint8_t *id = entry_id(stage, entry);
		uint64_t key = 0;
		for (size_t byte = 0; byte < 8; byte++)
			key = key << 8 | (common + byte < entry->id_size ? id[common + byte] : 0);
		keys[i] = key;
	}
	sort_keyed(stage, keys, sorted, count, 0);
	free(keys);
}

/*
 * Replaces the id map by the sorted entry indexes, in the map's own memory
 * (one u32 a slot, and the map has a slot for every id it names, so the
 * indexes fit): the peak memory of a large stage is its map, not the map
 * plus a sorted copy. A stage whose ids came in order has no map (invariant
 * 8): the indexes get memory of their own. 0 or -ENOMEM (stage unchanged).
 */
static int stage_sort_map(struct table_stage *stage)
{
	uint32_t *sorted = stage->slots;
	size_t live = 0, deleted = 0;
	if (stage->ids_ascending) {
		if (!(sorted = malloc((stage->distinct ? stage->distinct : 1) * sizeof *sorted)))
			return -ENOMEM;
		free(stage->slots);
	}
	assert(stage->ids_ascending || stage->distinct <= stage->slot_capacity);
	free(stage->tags);
	stage->tags = NULL;
	/* Live rows from the start; deletes are counted, then placed after them. */
	for (size_t i = 0; i < stage->entry_count; i++) {
		uint8_t flags = stage->entries[i].flags;
		if (flags & ENTRY_DEAD)
			continue;
		if (flags & ENTRY_DELETE)
			deleted++;
		else
			sorted[live++] = (uint32_t)i;
	}
	assert(live == stage->live_rows && live + deleted == stage->distinct);
	size_t next = live;
	for (size_t i = 0; i < stage->entry_count && next < live + deleted; i++)
		if ((stage->entries[i].flags & (ENTRY_DEAD | ENTRY_DELETE)) == ENTRY_DELETE)
			sorted[next++] = (uint32_t)i;
	sort_entries(stage, sorted, live);
	sort_entries(stage, sorted + live, deleted);
	/* Give back the rest of the map (a shrinking realloc that fails leaves it as it was). */
	if (live + deleted > 0) {
		uint32_t *smaller = realloc(sorted, (live + deleted) * sizeof *sorted);
		if (smaller)
			sorted = smaller;
	}
	stage->slots = NULL;
	stage->slot_capacity = 0;
	stage->sorted = sorted;
	stage->sorted_count = live;
	stage->deleted_count = deleted;
	stage->map_is_sorted = true;
	stage->ids_ascending = false;
	return 0;
}

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

static int stage_iterator_open(const struct table_stage *stage, struct stage_iterator *iterator)
{
	iterator->stage = stage;
	iterator->cursor = NULL;
	iterator->next = 0;
	return stage->runs ? stage_runs_cursor_open(stage->runs, &iterator->cursor) : 0;
}

/* 1 with *out, 0 at the end, or -errno. */
static int stage_iterator_next(struct stage_iterator *iterator, struct stage_record *out)
{
	const struct table_stage *stage = iterator->stage;
	if (iterator->cursor)
		return stage_runs_cursor_next(iterator->cursor, out);
	if (iterator->next == stage->sorted_count + stage->deleted_count)
		return 0;
	*out = entry_record(stage, &stage->entries[stage->sorted[iterator->next++]]);
	return 1;
}

static void stage_iterator_close(struct stage_iterator *iterator)
{
	stage_runs_cursor_free(iterator->cursor);
	iterator->cursor = NULL;
}

static void record_location(uint64_t first_sequence, const struct stage_record *record,
			    uint8_t value[KEY_VALUE_SIZE])
{
	assert(!record->is_delete);
	struct key_value location = {
		.sequence = first_sequence + record->fragment,
		.row_index = record->row_index,
		.row_size = record->line_size,
	};
	key_value_encode(&location, value);
}

/*
 * Adds the key tree entry of every live row, in id order, to builder.
 * first_sequence: the sequence the stage's first fragment gets. 0 or -errno.
 */
static int stage_build_keys(const struct table_stage *stage, uint64_t first_sequence,
			    struct btree_builder *builder)
{
	struct stage_iterator iterator;
	int rc = stage_iterator_open(stage, &iterator);
	struct stage_record record;
	while (rc == 0 && (rc = stage_iterator_next(&iterator, &record)) == 1) {
		if (record.is_delete) {
			rc = 0;
			continue;
		}
		uint8_t value[KEY_VALUE_SIZE];
		record_location(first_sequence, &record, value);
		rc = btree_builder_add(builder, record.id, record.id_size, value, sizeof value);
	}
	stage_iterator_close(&iterator);
	return rc;
}

int table_stage_seal(struct table_stage *stage)
{
	if (stage->sealed)
		return 0;
	if (stage->edges_error)
		return stage->edges_error;
	int rc = stage_cut_all(stage);
	if (rc < 0)
		return rc;
	buf_free(&stage->pending_lines);
	if (stage->runs) {
		/* The last entries become the newest run; memory then holds no ids at all. */
		if ((rc = stage_flush_run(stage)) < 0)
			return rc;
		free(stage->entries);
		stage->entries = NULL;
		stage->entry_count = stage->entry_capacity = 0;
		buf_free(&stage->ids);
		free(stage->slots);
		free(stage->tags);
		stage->slots = NULL;
		stage->tags = NULL;
		stage->slot_capacity = 0;
		stage->map_is_sorted = true;
		stage->ids_ascending = false;
	} else if (!stage->map_is_sorted && (rc = stage_sort_map(stage)) < 0) {
		return rc;
	}
	for (size_t i = 0; i < stage->fragment_count; i++)
		if (stage->fragments[i].dead)
			roaring_bitmap_run_optimize(stage->fragments[i].dead);
	/* The spill writer wrote the last fragments while the ids were sorted. */
	if ((rc = writer_drain(stage)) < 0)
		return rc;
	writer_stop(stage);
	for (size_t i = 0; i < STAGE_QUEUE_DEPTH; i++)
		buf_free(&stage->writer.jobs[i].payload);
	/* A spilled overwrite's key tree does not depend on the base: build it now, outside the lock. */
	if (stage->segment && stage->mode == TABLE_OVERWRITE) {
		struct btree_builder *builder = NULL;
		if ((rc = btree_builder_open_segment(stage->segment, BTREE_PACKED, &builder)) < 0)
			return rc;
		if ((rc = stage_build_keys(stage, 0, builder)) < 0) {
			btree_builder_free(builder);
			return rc;
		}
		if ((rc = btree_builder_finish(builder, &stage->prebuilt_keys)) < 0)
			return rc;
		stage->keys_prebuilt = true;
	}
	if (stage->edges &&
	    (rc = stage_edges_seal(stage->edges, stage->mode == TABLE_OVERWRITE ? stage->segment : NULL)) < 0)
		return rc;
	if (stage->segment && (rc = pager_segment_finish(stage->segment)) < 0)
		return rc;
	stage->sealed = true;
	return 0;
}

/* ---- apply ------------------------------------------------------------------------------ */

/* Appends a deletion bitmap block. 0 or -errno. */
static int bitmap_append(struct pager_append *append, const roaring_bitmap_t *bitmap,
			 struct block_address *address_out)
{
	size_t size = roaring_bitmap_portable_size_in_bytes(bitmap);
	char *bytes = malloc(size);
	if (!bytes)
		return -ENOMEM;
	roaring_bitmap_portable_serialize(bitmap, bytes);
	int rc = pager_append_block(append, BLOCK_BITMAP, CODEC_NONE, bytes, size, address_out);
	free(bytes);
	return rc;
}

/* The fragment descriptors of the stage's fragments for this apply. */
struct apply_state {
	struct fragment_descriptor *descriptors; /* one per stage fragment; live_rows 0: left out */
	uint64_t first_sequence;
};

static int apply_fragments(struct pager_append *append, const struct table_stage *stage,
			   struct apply_state *state)
{
	state->descriptors = calloc(stage->fragment_count ? stage->fragment_count : 1,
				    sizeof *state->descriptors);
	if (!state->descriptors)
		return -ENOMEM;
	for (size_t i = 0; i < stage->fragment_count; i++) {
		const struct stage_fragment *fragment = &stage->fragments[i];
		struct fragment_descriptor *descriptor = &state->descriptors[i];
		descriptor->rows = fragment->rows;
		descriptor->live_rows = fragment->live_rows;
		descriptor->live_bytes = fragment->live_bytes;
		if (fragment->live_rows == 0)
			continue;
		int rc;
		if (stage->segment) {
			assert(!block_address_is_null(fragment->address)); /* invariant 7 */
			descriptor->block = fragment->address;
		} else if ((rc = pager_append_block(append, BLOCK_FRAGMENT, stage->codec,
						    fragment->payload.data, fragment->payload.size,
						    &descriptor->block)) < 0) {
			return rc;
		}
		if (fragment->live_rows < fragment->rows &&
		    (rc = bitmap_append(append, fragment->dead, &descriptor->bitmap)) < 0)
			return rc;
	}
	return 0;
}

/* Overwrites, and merges into an empty table: both trees bulk-built. */
static int apply_bulk(struct pager_append *append, const struct table_stage *stage,
		      const struct apply_state *state, struct table_info *info)
{
	struct btree_builder *builder = NULL;
	int rc = btree_builder_open_layout(append, BTREE_PACKED, &builder);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < stage->fragment_count; i++) {
		if (state->descriptors[i].live_rows == 0)
			continue;
		uint8_t key[SEQUENCE_KEY_SIZE], value[DESCRIPTOR_SIZE];
		sequence_key(state->first_sequence + i, key);
		descriptor_encode(&state->descriptors[i], value);
		if ((rc = btree_builder_add(builder, key, sizeof key, value, sizeof value)) < 0)
			goto out;
	}
	rc = btree_builder_finish(builder, &info->fragments);
	builder = NULL;
	if (rc < 0)
		goto out;
	if (stage->keys_prebuilt) {
		assert(state->first_sequence == 0);
		info->keys = stage->prebuilt_keys;
	} else {
		if ((rc = btree_builder_open_layout(append, BTREE_PACKED, &builder)) < 0 ||
		    (rc = stage_build_keys(stage, state->first_sequence, builder)) < 0)
			goto out;
		rc = btree_builder_finish(builder, &info->keys);
		builder = NULL;
		if (rc < 0)
			goto out;
	}
	info->row_count = stage->live_rows;
	info->byte_size = stage->live_bytes;
out:
	btree_builder_free(builder);
	return rc;
}

/*
 * The rows of old fragments that a merge deletes (replaced or deleted), per
 * fragment: a bitmap of row indexes and their bytes. An open-addressing map
 * on the fragment sequence finds a fragment's entry; memory is per touched
 * fragment, not per row.
 */
struct touched_fragment {
	uint64_t sequence;
	roaring_bitmap_t *rows;
	uint64_t bytes;
};

struct touched {
	struct touched_fragment *items;
	size_t count, capacity;
	uint32_t *slots;                /* item index + 1, 0: empty */
	size_t slot_capacity;           /* power of two */
	uint64_t rows, bytes;           /* totals */
};

static void touched_free(struct touched *touched)
{
	for (size_t i = 0; i < touched->count; i++)
		roaring_bitmap_free(touched->items[i].rows);
	free(touched->items);
	free(touched->slots);
	memset(touched, 0, sizeof *touched);
}

static size_t touched_slot(const struct touched *touched, uint64_t sequence)
{
	size_t mask = touched->slot_capacity - 1;
	size_t slot = (size_t)(sequence * UINT64_C(0x9e3779b97f4a7c15) >> 20) & mask;
	while (touched->slots[slot] && touched->items[touched->slots[slot] - 1].sequence != sequence)
		slot = (slot + 1) & mask;
	return slot;
}

/* Notes that the merge deletes row `row` (size bytes) of old fragment `sequence`.
 * 0, -EIO (the key tree named that row twice) or -ENOMEM. */
static int touched_add(struct touched *touched, uint64_t sequence, uint32_t row, uint32_t size)
{
	if ((touched->count + 1) * 4 > touched->slot_capacity * 3) {
		size_t capacity = touched->slot_capacity ? touched->slot_capacity * 2 : 64;
		uint32_t *slots = calloc(capacity, sizeof *slots);
		if (!slots)
			return -ENOMEM;
		free(touched->slots);
		touched->slots = slots;
		touched->slot_capacity = capacity;
		for (size_t i = 0; i < touched->count; i++)
			touched->slots[touched_slot(touched, touched->items[i].sequence)] = (uint32_t)i + 1;
	}
	size_t slot = touched_slot(touched, sequence);
	if (!touched->slots[slot]) {
		int rc = grow_array((void **)&touched->items, &touched->capacity, touched->count + 1,
				    sizeof *touched->items);
		if (rc < 0)
			return rc;
		roaring_bitmap_t *rows = roaring_bitmap_create();
		if (!rows)
			return -ENOMEM;
		touched->items[touched->count] = (struct touched_fragment){ sequence, rows, 0 };
		touched->slots[slot] = (uint32_t)++touched->count;
	}
	struct touched_fragment *item = &touched->items[touched->slots[slot] - 1];
	if (!roaring_bitmap_add_checked(item->rows, row))
		return -EIO;
	item->bytes += size;
	touched->rows++;
	touched->bytes += size;
	return 0;
}

static int compare_touched(const void *a, const void *b)
{
	const struct touched_fragment *left = a, *right = b;
	return left->sequence < right->sequence ? -1 : left->sequence > right->sequence;
}

/*
 * Marks the rows of one old fragment deleted: a new bitmap and descriptor,
 * or the fragment leaves the tree when no live row remains. -EIO if the
 * rows are not live rows of the fragment.
 */
static int apply_old_fragment(struct pager *pager, struct pager_append *append, struct btree *fragments,
			      const struct touched_fragment *old)
{
	struct fragment_descriptor descriptor;
	roaring_bitmap_t *bitmap = NULL;
	uint8_t key[SEQUENCE_KEY_SIZE];
	sequence_key(old->sequence, key);
	int rc = descriptor_get(fragments, old->sequence, &descriptor);
	if (rc == -ENOENT)
		rc = -EIO; /* the key tree names a fragment the table does not have */
	if (rc < 0)
		return rc;
	if (block_address_is_null(descriptor.bitmap))
		bitmap = roaring_bitmap_create();
	else if ((rc = bitmap_read(pager, append, descriptor.bitmap, descriptor.rows, &bitmap)) < 0)
		return rc;
	if (!bitmap)
		return -ENOMEM;
	uint64_t count = roaring_bitmap_get_cardinality(old->rows);
	/* The key tree points only at live rows (table.h invariant 2). */
	if (roaring_bitmap_maximum(old->rows) >= descriptor.rows || roaring_bitmap_intersect(bitmap, old->rows) ||
	    count > descriptor.live_rows || old->bytes > descriptor.live_bytes) {
		rc = -EIO;
		goto out;
	}
	descriptor.live_rows -= (uint32_t)count;
	descriptor.live_bytes -= old->bytes;
	if (descriptor.live_rows == 0) {
		if (descriptor.live_bytes != 0) {
			rc = -EIO;
			goto out;
		}
		rc = btree_delete(fragments, key, sizeof key);
		goto out;
	}
	roaring_bitmap_or_inplace(bitmap, old->rows);
	roaring_bitmap_run_optimize(bitmap);
	if ((rc = bitmap_append(append, bitmap, &descriptor.bitmap)) < 0)
		goto out;
	uint8_t value[DESCRIPTOR_SIZE];
	descriptor_encode(&descriptor, value);
	rc = btree_put(fragments, key, sizeof key, value, sizeof value);
out:
	roaring_bitmap_free(bitmap);
	return rc;
}

/*
 * An edge table's merge: the adjacency entries of the base rows it replaces
 * or deletes go, read from their lines (one decode per touched fragment).
 * 0 or -errno.
 */
static int touched_remove_edges(struct pager *pager, struct pager_append *append, const struct table_info *base,
				const struct touched *touched, struct table_edges_update *update)
{
	if (!update || touched->count == 0)
		return 0;
	struct btree *fragments = NULL;
	struct fragment_view view;
	fragment_view_init(&view);
	int rc = btree_open_layout(pager, base->fragments, BTREE_PACKED, &fragments);
	if (rc < 0)
		return rc;
	btree_attach_append(fragments, append);
	for (size_t i = 0; rc == 0 && i < touched->count; i++) {
		const struct touched_fragment *item = &touched->items[i];
		struct fragment_descriptor descriptor;
		fragment_view_reset(&view);
		if ((rc = descriptor_get(fragments, item->sequence, &descriptor)) < 0 ||
		    (rc = fragment_view_load(pager, &descriptor, &view)) < 0)
			break;
		roaring_uint32_iterator_t rows;
		roaring_init_iterator(item->rows, &rows);
		for (; rc == 0 && rows.has_value; roaring_advance_uint32_iterator(&rows)) {
			uint32_t row = rows.current_value;
			if (row >= view.rows) {
				rc = -EIO;
				break;
			}
			size_t start = line_start(&view, row);
			rc = table_edges_remove_line(update, view.lines + start, line_end(&view, row) - start);
		}
	}
	if (rc == -ENOENT)
		rc = -EIO; /* the key tree names a fragment the table does not have */
	fragment_view_clear(&view);
	btree_free(fragments);
	return rc;
}

/*
 * The fragment tree of a merge: the old fragments lose the rows in touched,
 * the stage's fragments are added; counts from the base. 0 or -errno.
 */
static int apply_merge_fragments(struct pager *pager, struct pager_append *append, const struct table_info *base,
				 const struct table_stage *stage, const struct apply_state *state,
				 struct touched *touched, struct table_info *info)
{
	struct btree *fragments = NULL;
	int rc = btree_open_layout(pager, base->fragments, BTREE_PACKED, &fragments);
	if (rc < 0)
		return rc;
	btree_attach_append(fragments, append);
	if (touched->count > 0)
		qsort(touched->items, touched->count, sizeof *touched->items, compare_touched);
	for (size_t i = 0; i < touched->count; i++)
		if ((rc = apply_old_fragment(pager, append, fragments, &touched->items[i])) < 0)
			goto out;
	for (size_t i = 0; i < stage->fragment_count; i++) {
		if (state->descriptors[i].live_rows == 0)
			continue;
		uint8_t key[SEQUENCE_KEY_SIZE], descriptor[DESCRIPTOR_SIZE];
		sequence_key(state->first_sequence + i, key);
		descriptor_encode(&state->descriptors[i], descriptor);
		if ((rc = btree_put(fragments, key, sizeof key, descriptor, sizeof descriptor)) < 0)
			goto out;
	}
	if (touched->rows > base->row_count || touched->bytes > base->byte_size) {
		rc = -EIO;
		goto out;
	}
	if ((rc = btree_flush(fragments, append, &info->fragments)) < 0)
		goto out;
	info->row_count = base->row_count - touched->rows + stage->live_rows;
	info->byte_size = base->byte_size - touched->bytes + stage->live_bytes;
out:
	btree_free(fragments);
	return rc;
}

/* A merge into a table with rows: O(k log n) tree updates, never a walk of the table. */
static int apply_merge(struct pager *pager, struct pager_append *append, const struct table_info *base,
		       const struct table_stage *stage, const struct apply_state *state,
		       struct table_edges_update *edges, struct table_info *info)
{
	struct btree *keys = NULL;
	struct stage_iterator staged = { .cursor = NULL };
	struct touched touched = { 0 };
	struct buf value;
	buf_init(&value);
	int rc;
	if ((rc = btree_open_layout(pager, base->keys, BTREE_PACKED, &keys)) < 0)
		goto out;
	/* The base may have been flushed into this same, still unwritten, publish. */
	btree_attach_append(keys, append);
	if ((rc = stage_iterator_open(stage, &staged)) < 0)
		goto out;
	struct stage_record entry;
	while ((rc = stage_iterator_next(&staged, &entry)) == 1) {
		const uint8_t *id = entry.id;
		buf_reset(&value);
		rc = btree_get(keys, id, entry.id_size, &value);
		if (rc < 0 && rc != -ENOENT)
			goto out;
		bool existed = rc == 0;
		if (existed) {
			struct key_value old;
			if ((rc = key_value_decode(value.data, value.size, &old)) < 0 ||
			    (rc = touched_add(&touched, old.sequence, old.row_index, old.row_size)) < 0)
				goto out;
		}
		if (entry.is_delete) {
			rc = existed ? btree_delete(keys, id, entry.id_size) : 0;
		} else {
			uint8_t location[KEY_VALUE_SIZE];
			record_location(state->first_sequence, &entry, location);
			rc = btree_put(keys, id, entry.id_size, location, sizeof location);
		}
		if (rc < 0)
			goto out;
	}
	if (rc == 0 && (rc = touched_remove_edges(pager, append, base, &touched, edges)) == 0 &&
	    (rc = apply_merge_fragments(pager, append, base, stage, state, &touched, info)) == 0)
		rc = btree_flush(keys, append, &info->keys);
out:
	stage_iterator_close(&staged);
	buf_free(&value);
	touched_free(&touched);
	btree_free(keys);
	return rc;
}

/*
 * A merge of about as many rows as the table has (a large stage, in runs):
 * one pass over the base's key tree and the stage's sorted ids together,
 * bulk-building the new key tree — O(n + k) in sequential reads, and memory
 * for one node per level instead of every touched node. 0 or -errno.
 */
static int apply_merge_streaming(struct pager *pager, struct pager_append *append, const struct table_info *base,
				 const struct table_stage *stage, const struct apply_state *state,
				 struct table_edges_update *edges, struct table_info *info)
{
	struct btree *keys = NULL;
	struct btree_iterator *iterator = NULL;
	struct btree_builder *builder = NULL;
	struct stage_iterator staged = { .cursor = NULL };
	struct touched touched = { 0 };
	int rc;
	if ((rc = btree_open_layout(pager, base->keys, BTREE_PACKED, &keys)) < 0)
		goto out;
	btree_attach_append(keys, append);
	if ((rc = btree_iterator_open(keys, NULL, 0, &iterator)) < 0 ||
	    (rc = stage_iterator_open(stage, &staged)) < 0 ||
	    (rc = btree_builder_open_layout(append, BTREE_PACKED, &builder)) < 0)
		goto out;
	const uint8_t *key = NULL, *value = NULL;
	size_t key_size = 0, value_size = 0;
	struct stage_record entry;
	int base_more = btree_iterator_next(iterator, &key, &key_size, &value, &value_size);
	int stage_more = stage_iterator_next(&staged, &entry);
	while (base_more == 1 || stage_more == 1) {
		int order = base_more != 1 ? 1 : stage_more != 1 ? -1 : id_compare(key, key_size, entry.id, entry.id_size);
		if (order <= 0 && value_size != KEY_VALUE_SIZE) {
			rc = -EIO;
			goto out;
		}
		if (order < 0) {
			rc = btree_builder_add(builder, key, key_size, value, value_size);
		} else {
			if (order == 0) {
				struct key_value old;
				if ((rc = key_value_decode(value, value_size, &old)) < 0 ||
				    (rc = touched_add(&touched, old.sequence, old.row_index, old.row_size)) < 0)
					goto out;
			}
			rc = 0;
			if (!entry.is_delete) {
				uint8_t location[KEY_VALUE_SIZE];
				record_location(state->first_sequence, &entry, location);
				rc = btree_builder_add(builder, entry.id, entry.id_size, location, sizeof location);
			}
		}
		if (rc < 0)
			goto out;
		if (order <= 0)
			base_more = btree_iterator_next(iterator, &key, &key_size, &value, &value_size);
		if (order >= 0)
			stage_more = stage_iterator_next(&staged, &entry);
		if (base_more < 0 || stage_more < 0) {
			rc = base_more < 0 ? base_more : stage_more;
			goto out;
		}
	}
	rc = btree_builder_finish(builder, &info->keys);
	builder = NULL;
	if (rc == 0)
		rc = touched_remove_edges(pager, append, base, &touched, edges);
	if (rc == 0)
		rc = apply_merge_fragments(pager, append, base, stage, state, &touched, info);
out:
	btree_builder_free(builder);
	stage_iterator_close(&staged);
	touched_free(&touched);
	btree_iterator_free(iterator);
	btree_free(keys);
	return rc;
}

int table_apply(struct pager *pager, struct pager_append *append, const struct table_info *base,
		struct table_stage *stage, struct block_address schema_block, struct table_info *out,
		struct block_address *address_out)
{
	if (!stage->sealed)
		return -EINVAL;
	struct table_info info;
	memset(&info, 0, sizeof info);
	if (base) {
		info.stable_id = base->stable_id;
		info.incarnation = base->incarnation;
	} else {
		info.stable_id = out->stable_id;
		info.incarnation = out->incarnation;
	}
	info.table_version = base ? base->table_version + 1 : 1;
	info.schema = schema_block;
	/* An overwrite starts the fragment sequence over: none of the base's fragments stays. */
	struct apply_state state = {
		.descriptors = NULL,
		.first_sequence = base && stage->mode != TABLE_OVERWRITE ? base->next_fragment : 0,
	};
	info.next_fragment = state.first_sequence + stage->fragment_count;
	struct table_edges_update *edges = NULL;
	int rc = apply_fragments(append, stage, &state);
	if (rc < 0)
		goto out;
	bool bulk = !base || stage->mode == TABLE_OVERWRITE || block_address_is_null(base->keys);
	/* A stage in runs holds at least TABLE_RUN_ENTRIES ids: stream when k log n would exceed n + k. */
	bool streaming = !bulk && stage->runs && stage_runs_records(stage->runs) * 16 >= base->row_count;
	/* An edge table's versions all carry the adjacency indexes (docs/FORMAT.md §12.1). */
	bool base_indexed = base && !block_address_is_null(base->out_edges);
	if (base_indexed && !stage->edges) {
		rc = -EINVAL;
		goto out;
	}
	if (stage->edges && !bulk && !base_indexed) {
		rc = -EIO; /* an edge table with rows but no adjacency */
		goto out;
	}
	if (stage->edges && !bulk && (rc = table_edges_update_open(stage->edges, pager, append, base, &edges)) < 0)
		goto out;
	rc = bulk ? apply_bulk(append, stage, &state, &info)
	    : streaming ? apply_merge_streaming(pager, append, base, stage, &state, edges, &info)
			: apply_merge(pager, append, base, stage, &state, edges, &info);
	if (rc < 0)
		goto out;
	if (stage->edges) {
		rc = bulk ? stage_edges_apply_bulk(stage->edges, append, &info.out_edges, &info.in_edges)
			  : table_edges_update_finish(edges, append, &info.out_edges, &info.in_edges);
		if (rc < 0)
			goto out;
		if (block_address_is_null(info.out_edges) != (info.row_count == 0)) {
			rc = -EIO; /* the indexes do not hold one entry per row (table_edges.c invariant 1) */
			goto out;
		}
	}
	assert(block_address_is_null(info.keys) == (info.row_count == 0));
	if ((rc = table_info_append(append, &info, address_out)) < 0)
		goto out;
	*out = info;
out:
	table_edges_update_free(edges);
	free(state.descriptors);
	return rc;
}

/* ---- what a write removes ------------------------------------------------------------------ */

int table_removed_ids(struct pager *pager, struct pager_append *append, const struct table_info *base,
		      const struct table_info *after, const struct table_stage *stage,
		      int (*visit)(void *context, const uint8_t *id, size_t id_size), void *context)
{
	if (!stage->sealed)
		return -EINVAL;
	if (!base || block_address_is_null(base->keys))
		return 0;
	struct btree *old_keys = NULL, *new_keys = NULL;
	struct btree_iterator *old_ids = NULL, *new_ids = NULL;
	struct stage_iterator staged = { .cursor = NULL };
	struct buf value;
	buf_init(&value);
	int rc;
	if ((rc = btree_open_layout(pager, base->keys, BTREE_PACKED, &old_keys)) < 0)
		goto out;
	btree_attach_append(old_keys, append);
	if (stage->mode == TABLE_MERGE) {
		if ((rc = stage_iterator_open(stage, &staged)) < 0)
			goto out;
		struct stage_record record;
		while ((rc = stage_iterator_next(&staged, &record)) == 1) {
			if (!record.is_delete)
				continue;
			buf_reset(&value);
			rc = btree_get(old_keys, record.id, record.id_size, &value);
			if (rc == -ENOENT)
				continue;
			if (rc < 0 || (rc = visit(context, record.id, record.id_size)) < 0)
				goto out;
		}
		goto out;
	}
	/* An overwrite: the ids of base that after lacks, walking both key trees in id order. */
	if ((rc = btree_iterator_open(old_keys, NULL, 0, &old_ids)) < 0)
		goto out;
	if (!block_address_is_null(after->keys)) {
		if ((rc = btree_open_layout(pager, after->keys, BTREE_PACKED, &new_keys)) < 0)
			goto out;
		btree_attach_append(new_keys, append);
		if ((rc = btree_iterator_open(new_keys, NULL, 0, &new_ids)) < 0)
			goto out;
	}
	const uint8_t *old_id = NULL, *new_id = NULL, *unused;
	size_t old_size = 0, new_size = 0, unused_size;
	int new_more = new_ids ? btree_iterator_next(new_ids, &new_id, &new_size, &unused, &unused_size) : 0;
	int old_more;
	while ((old_more = btree_iterator_next(old_ids, &old_id, &old_size, &unused, &unused_size)) == 1) {
		int order = 1;
		while (new_more == 1 && (order = id_compare(new_id, new_size, old_id, old_size)) < 0)
			new_more = btree_iterator_next(new_ids, &new_id, &new_size, &unused, &unused_size);
		if (new_more < 0) {
			rc = new_more;
			goto out;
		}
		if ((new_more == 0 || order != 0) && (rc = visit(context, old_id, old_size)) < 0)
			goto out;
	}
	rc = old_more;
out:
	stage_iterator_close(&staged);
	btree_iterator_free(old_ids);
	btree_iterator_free(new_ids);
	btree_free(old_keys);
	btree_free(new_keys);
	buf_free(&value);
	return rc < 0 ? rc : 0;
}

/* ---- verify ------------------------------------------------------------------------------ */

/* Called by walk_live_rows for each live row: 0 to go on, or -EIO with message. */
typedef int (*live_row_visit)(const uint8_t *id, size_t id_size, const struct key_value *location,
			      const uint8_t *line, void *context, char *message, size_t message_size);

/*
 * Walks every live row of a table version in row order, each fragment
 * decoded once, checking the fragment tree's entries, that every fragment
 * reads back and every live line starts with its id; adds up the live rows
 * and bytes. Returns 0, or -EIO with message (the first finding, or visit's).
 */
static int walk_live_rows(struct pager *pager, const struct table_info *info, live_row_visit visit, void *context,
			  uint64_t *live_rows, uint64_t *live_bytes, char *message, size_t message_size)
{
	struct btree *fragments = NULL;
	struct btree_iterator *iterator = NULL;
	struct fragment_view view;
	fragment_view_init(&view);
	struct buf scratch;
	buf_init(&scratch);
	*live_rows = *live_bytes = 0;
	int rc;
#define FAIL(...)                                                       \
	do {                                                            \
		if (message_size)                                       \
			snprintf(message, message_size, __VA_ARGS__);   \
		rc = -EIO;                                              \
		goto out;                                               \
	} while (0)
	if ((rc = btree_open(pager, info->fragments, &fragments)) < 0 ||
	    (rc = btree_iterator_open(fragments, NULL, 0, &iterator)) < 0)
		FAIL("the fragment tree cannot be opened (%d)", rc);
	for (;;) {
		const uint8_t *key, *encoded;
		size_t key_size, encoded_size;
		rc = btree_iterator_next(iterator, &key, &key_size, &encoded, &encoded_size);
		if (rc < 0)
			FAIL("fragment tree walk failed (%d)", rc);
		if (rc == 0)
			break;
		struct fragment_descriptor descriptor;
		if (key_size != SEQUENCE_KEY_SIZE || descriptor_decode(encoded, encoded_size, &descriptor) < 0)
			FAIL("malformed fragment descriptor");
		uint64_t sequence = sequence_from_key(key);
		if (sequence >= info->next_fragment)
			FAIL("fragment %llu is beyond the next fragment number %llu",
			     (unsigned long long)sequence, (unsigned long long)info->next_fragment);
		if ((rc = fragment_view_load(pager, &descriptor, &view)) < 0)
			FAIL("fragment %llu at %llu:%llu is corrupt or unreadable (%d)",
			     (unsigned long long)sequence, (unsigned long long)descriptor.block.segment,
			     (unsigned long long)descriptor.block.offset, rc);
		*live_rows += view.live_rows;
		*live_bytes += view.live_bytes;
		for (uint32_t row = 0; row < view.rows; row++) {
			if (!fragment_view_is_live(&view, row))
				continue;
			size_t id_size;
			const uint8_t *id;
			size_t start = line_start(&view, row), size = line_end(&view, row) - start;
			if (line_id(view.lines + start, size, &scratch, &id, &id_size) < 0)
				FAIL("row %u of fragment %llu is not a canonical line with an id", row,
				     (unsigned long long)sequence);
			struct key_value location = { sequence, row, (uint32_t)size };
			if ((rc = visit(id, id_size, &location, view.lines + start, context, message, message_size)) < 0)
				goto out;
		}
	}
	rc = 0;
#undef FAIL
out:
	btree_iterator_free(iterator);
	btree_free(fragments);
	fragment_view_clear(&view);
	buf_free(&scratch);
	return rc;
}

/* What verify adds up for one (id, location) pair: a 64-bit hash of both. */
static uint64_t pair_hash(const uint8_t *id, size_t id_size, const struct key_value *location,
			  struct buf *scratch)
{
	uint8_t value[KEY_VALUE_SIZE];
	key_value_encode(location, value);
	buf_reset(scratch);
	if (buf_append(scratch, id, id_size) < 0 || buf_append(scratch, value, sizeof value) < 0)
		return 0;
	return codec_hash(scratch->data, scratch->size);
}

struct pair_sum {
	struct buf scratch;
	uint64_t sum;
	/* edge tables: what the out and in trees must hold, as sums of hashes of their entries */
	bool edges;
	uint64_t out_sum, in_sum;
	struct buf id, from, to;
};

/* The hash of one adjacency entry: key node ++ 0x00 ++ edge, value other. */
static uint64_t adjacency_hash(const struct buf *node, const struct buf *edge, const struct buf *other,
			       struct buf *scratch)
{
	buf_reset(scratch);
	if (buf_append(scratch, node->data, node->size) < 0 || buf_append(scratch, "", 1) < 0 ||
	    buf_append(scratch, edge->data, edge->size) < 0 || buf_append(scratch, "\n", 1) < 0 ||
	    buf_append(scratch, other->data, other->size) < 0)
		return 0;
	return codec_hash(scratch->data, scratch->size);
}

static int add_pair(const uint8_t *id, size_t id_size, const struct key_value *location, const uint8_t *line,
		    void *context, char *message, size_t message_size)
{
	struct pair_sum *pairs = context;
	pairs->sum += pair_hash(id, id_size, location, &pairs->scratch);
	if (!pairs->edges)
		return 0;
	if (table_edge_line_parse(line, location->row_size, &pairs->id, &pairs->from, &pairs->to) < 0) {
		snprintf(message, message_size, "row %u of fragment %llu is not a canonical edge row",
			 location->row_index, (unsigned long long)location->sequence);
		return -EIO;
	}
	pairs->out_sum += adjacency_hash(&pairs->from, &pairs->id, &pairs->to, &pairs->scratch);
	pairs->in_sum += adjacency_hash(&pairs->to, &pairs->id, &pairs->from, &pairs->scratch);
	return 0;
}

/*
 * The adjacency half of verify (docs/FORMAT.md §12.1): a valid packed tree
 * whose entries, hashed and summed, match what the rows say, one per row.
 */
static int verify_adjacency(struct pager *pager, struct block_address root, uint64_t expected_sum,
			    uint64_t expected_count, const char *which, char *message, size_t message_size)
{
	if (btree_verify(pager, root, NULL, NULL, message, message_size) < 0)
		return -EIO;
	struct btree *tree = NULL;
	struct btree_iterator *iterator = NULL;
	struct buf node, edge, other, scratch;
	buf_init(&node);
	buf_init(&edge);
	buf_init(&other);
	buf_init(&scratch);
	uint64_t sum = 0, count = 0;
	int rc;
	if ((rc = btree_open(pager, root, &tree)) < 0 || (rc = btree_iterator_open(tree, NULL, 0, &iterator)) < 0)
		goto out;
	for (;;) {
		const uint8_t *key, *value;
		size_t key_size, value_size;
		if ((rc = btree_iterator_next(iterator, &key, &key_size, &value, &value_size)) <= 0)
			break;
		const uint8_t *separator = memchr(key, 0, key_size);
		if (!separator) {
			snprintf(message, message_size, "the %s index has a key without a separator", which);
			rc = -EIO;
			goto out;
		}
		size_t node_size = (size_t)(separator - key);
		buf_reset(&node);
		buf_reset(&edge);
		buf_reset(&other);
		if ((rc = buf_append(&node, key, node_size)) < 0 ||
		    (rc = buf_append(&edge, separator + 1, key_size - node_size - 1)) < 0 ||
		    (rc = buf_append(&other, value, value_size)) < 0)
			goto out;
		sum += adjacency_hash(&node, &edge, &other, &scratch);
		count++;
	}
	if (rc == 0 && (sum != expected_sum || count != expected_count)) {
		snprintf(message, message_size, "the %s index has %llu entries for %llu live rows%s", which,
			 (unsigned long long)count, (unsigned long long)expected_count,
			 count == expected_count ? ", and they do not name the rows' endpoints" : "");
		rc = -EIO;
	}
out:
	if (rc < 0 && rc != -EIO)
		snprintf(message, message_size, "the %s index cannot be read (%d)", which, rc);
	btree_iterator_free(iterator);
	btree_free(tree);
	buf_free(&node);
	buf_free(&edge);
	buf_free(&other);
	buf_free(&scratch);
	return rc < 0 ? -EIO : 0;
}

struct row_lookup {
	struct btree *keys;
	struct buf value;
};

/* The slow, precise half of invariant 2: the row's key entry must name it. */
static int look_row_up(const uint8_t *id, size_t id_size, const struct key_value *location, const uint8_t *line,
		       void *context, char *message, size_t message_size)
{
	(void)line;
	struct row_lookup *lookup = context;
	struct key_value found;
	buf_reset(&lookup->value);
	int rc = btree_get(lookup->keys, id, id_size, &lookup->value);
	if (rc < 0 || key_value_decode(lookup->value.data, lookup->value.size, &found) < 0) {
		snprintf(message, message_size, "live row %u of fragment %llu has no key tree entry (%d)",
			 location->row_index, (unsigned long long)location->sequence, rc);
		return -EIO;
	}
	if (found.sequence != location->sequence || found.row_index != location->row_index ||
	    found.row_size != location->row_size) {
		snprintf(message, message_size, "the key tree entry of live row %u of fragment %llu points elsewhere",
			 location->row_index, (unsigned long long)location->sequence);
		return -EIO;
	}
	return 0;
}

/*
 * Invariant 2 is checked in two sequential walks, each block decoded once:
 * the live rows' (id, location) pairs from the fragments and the key tree's
 * (key, value) pairs must be the same set. Keys are distinct (btree_verify
 * checks their order), so equal counts and equal 64-bit sums of a hash of
 * every pair mean equal sets (a difference goes unnoticed with probability
 * about 2^-64). On a difference, a walk that looks every row up names it.
 */
int table_verify(struct pager *pager, const struct table_info *info, char *message,
		 size_t message_size)
{
	struct btree *keys = NULL;
	struct btree_iterator *iterator = NULL;
	struct pair_sum rows = { .sum = 0 }, entries = { .sum = 0 };
	buf_init(&rows.scratch);
	buf_init(&rows.id);
	buf_init(&rows.from);
	buf_init(&rows.to);
	buf_init(&entries.scratch);
	struct row_lookup lookup = { .keys = NULL };
	buf_init(&lookup.value);
	struct schema schema;
	schema_init(&schema);
	uint64_t live_rows = 0, live_bytes = 0, key_entries = 0;
	int rc;
	if (message_size)
		message[0] = 0;
#define FAIL(...)                                                       \
	do {                                                            \
		if (message_size)                                       \
			snprintf(message, message_size, __VA_ARGS__);   \
		rc = -EIO;                                              \
		goto out;                                               \
	} while (0)

	if (!block_address_is_null(info->schema) && (rc = table_schema_read(pager, info->schema, &schema)) < 0)
		FAIL("table schema block at %llu:%llu is unreadable (%d)",
		     (unsigned long long)info->schema.segment, (unsigned long long)info->schema.offset, rc);
	if (btree_verify(pager, info->fragments, NULL, NULL, message, message_size) < 0 ||
	    btree_verify(pager, info->keys, NULL, NULL, message, message_size) < 0) {
		rc = -EIO;
		goto out;
	}
	rows.edges = schema.kind == SCHEMA_EDGE;
	bool indexed = !block_address_is_null(info->out_edges);
	if (!rows.edges && indexed)
		FAIL("a node table version has adjacency indexes");
	if (rows.edges && indexed != (info->row_count > 0))
		FAIL("an edge table version with %llu rows has %s adjacency indexes",
		     (unsigned long long)info->row_count, indexed ? "" : "no");
	if ((rc = walk_live_rows(pager, info, add_pair, &rows, &live_rows, &live_bytes, message, message_size)) < 0)
		goto out;
	if (live_rows != info->row_count || live_bytes != info->byte_size)
		FAIL("fragments hold %llu rows and %llu bytes; the table version says %llu and %llu",
		     (unsigned long long)live_rows, (unsigned long long)live_bytes,
		     (unsigned long long)info->row_count, (unsigned long long)info->byte_size);
	if (indexed && ((rc = verify_adjacency(pager, info->out_edges, rows.out_sum, live_rows, "out", message,
					       message_size)) < 0 ||
			(rc = verify_adjacency(pager, info->in_edges, rows.in_sum, live_rows, "in", message,
					       message_size)) < 0))
		goto out;
	if ((rc = btree_open(pager, info->keys, &keys)) < 0 ||
	    (rc = btree_iterator_open(keys, NULL, 0, &iterator)) < 0)
		goto out;
	for (;;) {
		const uint8_t *key, *encoded;
		size_t key_size, encoded_size;
		rc = btree_iterator_next(iterator, &key, &key_size, &encoded, &encoded_size);
		if (rc < 0)
			FAIL("key tree walk failed (%d)", rc);
		if (rc == 0)
			break;
		struct key_value location;
		if (key_value_decode(encoded, encoded_size, &location) < 0)
			FAIL("malformed key tree entry");
		entries.sum += pair_hash(key, key_size, &location, &entries.scratch);
		key_entries++;
	}
	if (key_entries == live_rows && entries.sum == rows.sum) {
		rc = 0;
		goto out;
	}
	/* Name the row if one points elsewhere; otherwise the key tree has entries of no live row. */
	lookup.keys = keys;
	if ((rc = walk_live_rows(pager, info, look_row_up, &lookup, &live_rows, &live_bytes, message,
				 message_size)) < 0)
		goto out;
	if (key_entries != live_rows)
		FAIL("the key tree has %llu entries for %llu live rows", (unsigned long long)key_entries,
		     (unsigned long long)live_rows);
	FAIL("the key tree indexes rows that are not live");
#undef FAIL
out:
	btree_iterator_free(iterator);
	btree_free(keys);
	buf_free(&rows.scratch);
	buf_free(&rows.id);
	buf_free(&rows.from);
	buf_free(&rows.to);
	buf_free(&entries.scratch);
	buf_free(&lookup.value);
	schema_free(&schema);
	return rc;
}
