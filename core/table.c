/*
 * table — table versions (records), fragments and their deletion bitmaps,
 * reads at any byte offset, lookups by id and the membership finder (layer:
 * table). Staged writes are in table_stage.c, applying them in
 * table_apply.c, checking versions in table_verify.c, adjacency indexes in
 * table_edges.c; what they share is in table_int.h. See table.h and
 * docs/FORMAT.md §10–§13.
 *
 * Fragment sequence keys are big-endian so that memcmp order of the keys is
 * the numeric order of the sequences, which is the table's row order.
 */
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
#include "table.h"
#include "table_int.h"

/* ---- small encodings ------------------------------------------------------------ */





static void address_store(uint8_t *at, struct block_address address)
{
	buf_store_u64(at, address.segment);
	buf_store_u64(at + 8, address.offset);
}

static struct block_address address_load(const uint8_t *at)
{
	return (struct block_address){ buf_load_u64(at), buf_load_u64(at + 8) };
}

void table_descriptor_encode(const struct fragment_descriptor *descriptor, uint8_t out[DESCRIPTOR_SIZE])
{
	address_store(out, descriptor->block);
	buf_store_u32(out + 16, descriptor->rows);
	address_store(out + 20, descriptor->bitmap);
	buf_store_u32(out + 36, descriptor->live_rows);
	buf_store_u64(out + 40, descriptor->live_bytes);
}

int table_descriptor_decode(const uint8_t *bytes, size_t size, struct fragment_descriptor *out)
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

void table_key_value_encode(const struct key_value *value, uint8_t out[KEY_VALUE_SIZE])
{
	buf_store_u64(out, value->sequence);
	buf_store_u32(out + 8, value->row_index);
	buf_store_u32(out + 12, value->row_size);
}

int table_key_value_decode(const uint8_t *bytes, size_t size, struct key_value *out)
{
	if (size != KEY_VALUE_SIZE)
		return -EIO;
	out->sequence = buf_load_u64(bytes);
	out->row_index = buf_load_u32(bytes + 8);
	out->row_size = buf_load_u32(bytes + 12);
	return 0;
}

int table_grow_array(void **array, size_t *capacity, size_t needed, size_t element_size)
{
	return buf_grow_array(array, capacity, needed, element_size);
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



void table_fragment_view_init(struct fragment_view *view)
{
	memset(view, 0, sizeof *view);
	buf_init(&view->raw);
}

/* Forgets the decoded fragment but keeps the memory for the next one. */
void table_fragment_view_reset(struct fragment_view *view)
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

void table_fragment_view_clear(struct fragment_view *view)
{
	table_fragment_view_reset(view);
	buf_free(&view->raw);
	free(view->ends);
	table_fragment_view_init(view);
}

/*
 * The id of a canonical line (which starts {"id":"<id as a JSON string>"):
 * points into the line when the id has no escapes, else decodes it (jansson)
 * into scratch. Returns 0, -EIO (not a canonical line) or -ENOMEM.
 */
int table_line_id(const uint8_t *line, size_t size, struct buf *scratch, const uint8_t **id,
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
bool table_line_has_id(const uint8_t *line, size_t size, const void *id, size_t id_size,
			struct buf *scratch)
{
	const uint8_t *found;
	size_t found_size;
	return table_line_id(line, size, scratch, &found, &found_size) == 0 && found_size == id_size &&
	       (id_size == 0 || memcmp(found, id, id_size) == 0);
}

/*
 * Reads and deserializes a deletion bitmap of a fragment of rows rows, through
 * append when given (apply may read what the same publish appended).
 * Returns 0, -EIO, -ENOENT, -ENOMEM.
 */
int table_bitmap_read(struct pager *pager, struct pager_append *append, struct block_address address,
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
int table_fragment_view_load(struct pager *pager, const struct fragment_descriptor *descriptor,
			      struct fragment_view *view)
{
	table_fragment_view_reset(view);
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
	if (table_grow_array((void **)&view->ends, &view->ends_capacity, rows, sizeof *view->ends) < 0) {
		inconsistent = false;
		rc = -ENOMEM;
		goto out;
	}
	view->rows = rows;
	size_t header = 4 + 4 * (size_t)rows;
	view->lines = view->raw.data + header;
	view->lines_size = view->raw.size - header;
	size_t end = 0;
	uint32_t empty_slots = 0;   /* a compacted fragment's slots of rows deleted before (deleted here too) */
	for (uint32_t row = 0; row < rows; row++) {
		size_t length = buf_load_u32(view->raw.data + 4 + 4 * (size_t)row);
		if (length == 0)
			empty_slots++;
		else if (length > view->lines_size - end || view->lines[end + length - 1] != '\n')
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
		rc = table_bitmap_read(pager, NULL, descriptor->bitmap, rows, &view->deleted);
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
			view->live_bytes -= table_line_end(view, row) - table_line_start(view, row);
		}
	}
	if (view->live_rows != descriptor->live_rows || view->live_bytes != descriptor->live_bytes)
		goto out;
	for (uint32_t row = 0; empty_slots > 0 && row < rows; row++)
		if (table_line_start(view, row) == table_line_end(view, row)) {
			if (!view->deleted || !roaring_bitmap_contains(view->deleted, row))
				goto out;   /* an empty line must be a deleted slot */
			empty_slots--;
		}
	rc = 0;
out:
	if (rc < 0) {
		if (inconsistent)
			io_log(LOG_ERR, "fragment at %llu:%llu is inconsistent with its descriptor",
				(unsigned long long)descriptor->block.segment,
				(unsigned long long)descriptor->block.offset);
		table_fragment_view_reset(view);
	}
	return rc;
}

bool table_fragment_view_is_live(const struct fragment_view *view, uint32_t row)
{
	return !view->deleted || !roaring_bitmap_contains(view->deleted, row);
}

/* Looks a fragment descriptor up by sequence in the fragment tree. 0, -ENOENT, -errno. */
int table_descriptor_get(struct btree *fragments, uint64_t sequence, struct fragment_descriptor *out)
{
	uint8_t key[SEQUENCE_KEY_SIZE];
	table_sequence_key(sequence, key);
	struct buf value;
	buf_init(&value);
	int rc = btree_get(fragments, key, sizeof key, &value);
	if (rc == 0)
		rc = table_descriptor_decode(value.data, value.size, out);
	buf_free(&value);
	return rc;
}

int table_descriptor_locate(struct btree *fragments, uint64_t sequence, uint32_t row_index,
			    struct fragment_descriptor *out, uint32_t *row_out)
{
	int rc = table_descriptor_get(fragments, sequence, out);
	if (rc == 0 && row_index < out->rows) {
		*row_out = row_index;
		return 0;
	}
	if (rc < 0 && rc != -ENOENT)
		return rc;
	uint64_t slot = sequence + row_index;
	uint8_t key[SEQUENCE_KEY_SIZE];
	table_sequence_key(slot, key);
	struct buf found_key, value;
	buf_init(&found_key);
	buf_init(&value);
	rc = btree_get_floor(fragments, key, sizeof key, &found_key, &value);
	if (rc == 0 && found_key.size != SEQUENCE_KEY_SIZE)
		rc = -EIO;
	if (rc == 0 && (rc = table_descriptor_decode(value.data, value.size, out)) == 0) {
		uint64_t base = table_sequence_from_key(found_key.data);
		if (slot - base >= out->rows)
			rc = -ENOENT;
		else
			*row_out = (uint32_t)(slot - base);
	}
	buf_free(&found_key);
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
	size_t prefetched_until;        /* fragments below this were asked for (pager_prefetch) */
};

#define PREFETCH_FRAGMENTS 16       /* fragments (and their bitmaps) asked for at once */

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
	table_fragment_view_init(&reader->view);
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
		    table_descriptor_decode(value, value_size, &fragment->descriptor) < 0) {
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
	table_fragment_view_clear(&reader->view);
	free(reader->live_row);
	free(reader->live_start);
	free(reader->fragments);
	free(reader);
}

uint64_t table_reader_size(const struct table_reader *reader)
{
	return reader->size;
}

/* Before fragment index is read, when it was not asked for yet: asks for it and the
 * PREFETCH_FRAGMENTS - 1 after it at once, so that a store in an object store fetches them
 * in parallel (pager_prefetch; the call returns when they are there). */
static void reader_prefetch(struct table_reader *reader, size_t index)
{
	if (!pager_prefetches(reader->pager) ||
	    (index < reader->prefetched_until && index >= reader->prefetched_until - PREFETCH_FRAGMENTS))
		return;
	struct block_address addresses[2 * PREFETCH_FRAGMENTS];
	size_t count = 0, until = index;
	for (; until < reader->fragment_count && until < index + PREFETCH_FRAGMENTS; until++) {
		const struct fragment_descriptor *descriptor = &reader->fragments[until].descriptor;
		addresses[count++] = descriptor->block;
		if (!block_address_is_null(descriptor->bitmap))
			addresses[count++] = descriptor->bitmap;
	}
	reader->prefetched_until = until;
	if (until - index > 1)   /* one fragment: its read fetches it */
		pager_prefetch(reader->pager, addresses, count);
}

/* Makes fragment index the decoded one (with its live-row map). 0 or -errno. */
static int reader_decode(struct table_reader *reader, size_t index)
{
	if (reader->cached == index)
		return 0;
	reader_prefetch(reader, index);
	reader->cached = SIZE_MAX;
	reader->live_count = 0;
	int rc = table_fragment_view_load(reader->pager, &reader->fragments[index].descriptor, &reader->view);
	if (rc < 0)
		return rc;
	struct fragment_view *view = &reader->view;
	if (view->deleted) {
		size_t capacity = reader->live_capacity;
		if ((rc = table_grow_array((void **)&reader->live_row, &capacity, view->live_rows,
				     sizeof *reader->live_row)) < 0 ||
		    (rc = table_grow_array((void **)&reader->live_start, &reader->live_capacity, view->live_rows,
				     sizeof *reader->live_start)) < 0) {
			table_fragment_view_reset(view);
			return rc;
		}
		uint32_t position = 0;
		for (uint32_t row = 0; row < view->rows; row++) {
			if (!table_fragment_view_is_live(view, row))
				continue;
			reader->live_row[reader->live_count] = row;
			reader->live_start[reader->live_count] = position;
			reader->live_count++;
			position += (uint32_t)(table_line_end(view, row) - table_line_start(view, row));
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
			size_t start = table_line_start(view, row);
			size_t length = table_line_end(view, row) - start;
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
	table_fragment_view_init(&view);
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
	if ((rc = table_key_value_decode(value.data, value.size, &location)) < 0 ||
	    (rc = btree_open(pager, info->fragments, &fragments)) < 0)
		goto out;
	rc = table_descriptor_locate(fragments, location.sequence, location.row_index, &descriptor,
				     &location.row_index);
	if (rc == -ENOENT)
		rc = -EIO; /* the key tree names a fragment the table does not have */
	if (rc < 0 || (rc = table_fragment_view_load(pager, &descriptor, &view)) < 0)
		goto out;
	if (location.row_index >= view.rows || !table_fragment_view_is_live(&view, location.row_index)) {
		rc = -EIO;
		goto out;
	}
	size_t start = table_line_start(&view, location.row_index);
	size_t length = table_line_end(&view, location.row_index) - start;
	if (!table_line_has_id(view.lines + start, length, id, id_size, &scratch)) {
		rc = -EIO;
		goto out;
	}
	rc = buf_append(row_out, view.lines + start, length);
out:
	table_fragment_view_clear(&view);
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

/* ---- every block of a table version (gc's mark) ----------------------------------------- */

struct blocks_walk {
	table_block_visit visit;
	void *context;
};

static int walk_tree_node(struct block_address node, void *context)
{
	const struct blocks_walk *walk = context;
	return walk->visit(node, walk->context);
}

/* Key and adjacency trees hold no addresses in their entries, and a node in a
 * segment points only into that segment: below it there is nothing to learn. */
static int walk_index_node(struct block_address node, void *context)
{
	const struct blocks_walk *walk = context;
	int rc = walk->visit(node, walk->context);
	return rc == 0 && node.segment != 0 ? 1 : rc;
}

static int walk_descriptor(const uint8_t *key, size_t key_size, const uint8_t *value, size_t value_size,
			   void *context)
{
	const struct blocks_walk *walk = context;
	struct fragment_descriptor descriptor;
	int rc = table_descriptor_decode(value, value_size, &descriptor);
	if (rc < 0)
		return rc;
	if ((rc = walk->visit(descriptor.block, walk->context)) < 0)
		return rc;
	if (!block_address_is_null(descriptor.bitmap) && (rc = walk->visit(descriptor.bitmap, walk->context)) < 0)
		return rc;
	return 0;
}

int table_blocks_each(struct pager *pager, const struct table_info *info, table_block_visit visit, void *context)
{
	struct blocks_walk walk = { visit, context };
	int rc = visit(info->schema, context);
	if (rc < 0)
		return rc;
	if ((rc = btree_nodes_each(pager, info->fragments, walk_tree_node, walk_descriptor, &walk)) < 0 ||
	    (rc = btree_nodes_each(pager, info->keys, walk_index_node, NULL, &walk)) < 0 ||
	    (rc = btree_nodes_each(pager, info->out_edges, walk_index_node, NULL, &walk)) < 0 ||
	    (rc = btree_nodes_each(pager, info->in_edges, walk_index_node, NULL, &walk)) < 0)
		return rc;
	return 0;
}
