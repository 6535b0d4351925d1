/* table: staged writes, apply, readers at any byte offset, lookups, verify. */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io.h"
#include "pager.h"
#include "schema.h"
#include "table.h"
#include "table_int.h"

/* ---- a store-like setup: a manifest with a valid header and two empty meta slots ---- */

struct fixture {
	int directory;
	struct io_file manifest;
	struct pager *pager;
	uint64_t size;            /* manifest size: where the next append starts */
	uint64_t next_segment;
	struct block_address schema_block; /* given to every apply; null unless a test sets it */
};

static int fixture_open(struct fixture *fixture)
{
	memset(fixture, 0, sizeof *fixture);
	fixture->directory = io_directory_open(harness_temp_directory());
	if (fixture->directory < 0)
		return fixture->directory;
	int rc = io_file_open(fixture->directory, "manifest", O_RDWR | O_CREAT | O_EXCL, IO_MANIFEST,
			      &fixture->manifest);
	if (rc < 0)
		return rc;
	uint8_t *start = calloc(1, MANIFEST_FIRST_BLOCK);
	struct file_header header = { .format_version = FILE_FORMAT_VERSION, .kind = FILE_KIND_MANIFEST };
	ulid_new(&header.store_id);
	header.created_us = 1;
	codec_file_header_encode(&header, start);
	rc = io_pwrite(&fixture->manifest, start, MANIFEST_FIRST_BLOCK, 0);
	free(start);
	if (rc < 0)
		return rc;
	fixture->size = MANIFEST_FIRST_BLOCK;
	return pager_init(fixture->directory, &fixture->manifest, &fixture->pager);
}

static void fixture_close(struct fixture *fixture)
{
	pager_free(fixture->pager);
	io_file_close(&fixture->manifest);
	close(fixture->directory);
}

static int allocate_segment(void *context, uint64_t *segment_id_out)
{
	struct fixture *fixture = context;
	*segment_id_out = ++fixture->next_segment;
	return 0;
}

/*
 * The stage's inline limit in this run: TABLE_INLINE_LIMIT, or a quarter of it in a
 * sanitized build (GRAPHFS_STAGE_INLINE_BYTES, set before the first test), where the
 * same spills, runs and segments then take a quarter of the rows (docs/TESTING.md "Tiers").
 */
#define INLINE_LIMIT (HARNESS_SANITIZED ? TABLE_INLINE_LIMIT / 4 : TABLE_INLINE_LIMIT)

__attribute__((constructor)) static void sanitized_inline_limit(void)
{
	if (HARNESS_SANITIZED) {
		char bytes[32];
		snprintf(bytes, sizeof bytes, "%u", TABLE_INLINE_LIMIT / 4);
		setenv("GRAPHFS_STAGE_INLINE_BYTES", bytes, 1);
	}
}

static int stage_open(struct fixture *fixture, enum table_write_mode mode, struct table_stage **out)
{
	return table_stage_open(fixture->pager, mode, CODEC_ZSTD, allocate_segment, fixture, out);
}

/* Stages the row {"id":"<id>","v":<value>}, or a delete of id when value < 0. */
static int stage_row(struct table_stage *stage, const char *id, long value)
{
	struct schema_row row;
	schema_row_init(&row);
	buf_append_string(&row.id, id);
	if (value < 0)
		row.is_delete = true;
	else
		buf_printf(&row.canonical, "{\"id\":\"%s\",\"v\":%ld}\n", id, value);
	int rc = table_stage_add(stage, &row);
	schema_row_free(&row);
	return rc;
}

static void row_id(char out[32], long number)
{
	snprintf(out, 32, "r%07ld", number);
}

/* Seals the stage, applies it on base (NULL: new table) and writes the append. */
static int publish(struct fixture *fixture, const struct table_info *base, struct table_stage *stage,
		   struct table_info *out, struct block_address *address_out)
{
	struct pager_append *append = NULL;
	struct block_address address;
	int rc = table_stage_seal(stage);
	if (rc < 0)
		return rc;
	if ((rc = pager_append_begin(fixture->pager, fixture->size, &append)) < 0)
		return rc;
	rc = table_apply(fixture->pager, append, base, stage, fixture->schema_block, out, &address);
	uint64_t size = fixture->size + pager_append_size(append);
	if (rc == 0)
		rc = pager_append_write(append);
	pager_append_free(append);
	if (rc < 0)
		return rc;
	fixture->size = size;
	table_stage_published(stage);
	if (address_out)
		*address_out = address;
	return 0;
}

/* Overwrites (base may be NULL) with rows first .. first + count - 1, values = number. */
static int write_rows(struct fixture *fixture, const struct table_info *base, long first, long count,
		      struct table_info *out)
{
	struct table_stage *stage;
	int rc = stage_open(fixture, TABLE_OVERWRITE, &stage);
	for (long i = first; rc == 0 && i < first + count; i++) {
		char id[32];
		row_id(id, i);
		rc = stage_row(stage, id, i);
	}
	if (rc == 0)
		rc = publish(fixture, base, stage, out, NULL);
	table_stage_free(stage);
	return rc;
}

/* The whole rendering of a table version, read in chunks of chunk bytes. */
static int render(struct fixture *fixture, const struct table_info *info, size_t chunk, struct buf *out)
{
	struct table_reader *reader;
	int rc = table_reader_open(fixture->pager, info, &reader);
	if (rc < 0)
		return rc;
	uint8_t *bytes = malloc(chunk);
	uint64_t offset = 0;
	for (;;) {
		ssize_t got = table_reader_pread(reader, bytes, chunk, offset);
		if (got < 0) {
			rc = (int)got;
			break;
		}
		if (got == 0)
			break;
		buf_append(out, bytes, (size_t)got);
		offset += (uint64_t)got;
	}
	free(bytes);
	if (rc == 0 && offset != table_reader_size(reader))
		rc = -EIO;
	table_reader_free(reader);
	return rc;
}

/* A model of the expected rendering: the canonical lines in order. */
static void expect_row(struct buf *expected, const char *id, long value)
{
	buf_printf(expected, "{\"id\":\"%s\",\"v\":%ld}\n", id, value);
}

static int render_equals(struct fixture *fixture, const struct table_info *info, struct buf *expected)
{
	struct buf actual;
	buf_init(&actual);
	int rc = render(fixture, info, 4096, &actual);
	int equal = rc == 0 && actual.size == expected->size &&
		    (actual.size == 0 || memcmp(actual.data, expected->data, actual.size) == 0);
	buf_free(&actual);
	return equal;
}

/* ---- table version records ------------------------------------------------------- */

TEST(a_table_version_record_round_trips)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_info info, read_back;
	memset(&info, 0, sizeof info);
	ulid_new(&info.stable_id);
	ulid_new(&info.incarnation);
	info.table_version = 9;
	info.schema = (struct block_address){ 0, 77777 };
	info.fragments = (struct block_address){ 4, 12345 };
	info.keys = (struct block_address){ 0, 99999 };
	info.row_count = 3;
	info.byte_size = 300;
	info.next_fragment = 17;
	struct pager_append *append;
	struct block_address address;
	CHECK_EQ(pager_append_begin(fixture.pager, fixture.size, &append), 0);
	CHECK_EQ(table_info_append(append, &info, &address), 0);
	CHECK_EQ(pager_append_write(append), 0);
	pager_append_free(append);
	CHECK_EQ(table_info_read(fixture.pager, address, &read_back), 0);
	CHECK(memcmp(&info.stable_id, &read_back.stable_id, 16) == 0);
	CHECK(memcmp(&info.incarnation, &read_back.incarnation, 16) == 0);
	CHECK_EQ(read_back.table_version, 9);
	CHECK_EQ(read_back.schema.offset, 77777);
	CHECK_EQ(read_back.fragments.segment, 4);
	CHECK_EQ(read_back.fragments.offset, 12345);
	CHECK_EQ(read_back.keys.offset, 99999);
	CHECK_EQ(read_back.row_count, 3);
	CHECK_EQ(read_back.byte_size, 300);
	CHECK_EQ(read_back.next_fragment, 17);
	fixture_close(&fixture);
}

static const char schema_text[] =
	"{\"kind\":\"node\",\"properties\":{\"v\":{\"type\":\"i64\",\"nullable\":false}}}";

/* Appends the canonical rendering of schema_text as a schema block; the fixture's applies use it. */
static int append_schema_text(struct fixture *fixture, const char *text)
{
	struct schema schema;
	schema_init(&schema);
	struct buf canonical;
	buf_init(&canonical);
	struct pager_append *append = NULL;
	int rc = schema_parse(text, strlen(text), &schema, NULL);
	if (rc == 0)
		rc = schema_render(&schema, &canonical);
	if (rc == 0)
		rc = pager_append_begin(fixture->pager, fixture->size, &append);
	if (rc == 0)
		rc = pager_append_block(append, BLOCK_SCHEMA, CODEC_ZSTD, canonical.data, canonical.size,
					&fixture->schema_block);
	if (rc == 0)
		rc = pager_append_write(append);
	if (rc == 0)
		fixture->size += pager_append_size(append);
	pager_append_free(append);
	buf_free(&canonical);
	schema_free(&schema);
	return rc;
}

static int append_schema(struct fixture *fixture)
{
	return append_schema_text(fixture, schema_text);
}

TEST(a_table_version_names_its_schema_block)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	CHECK_EQ(append_schema(&fixture), 0);
	struct table_info info;
	memset(&info, 0, sizeof info);
	CHECK_EQ(write_rows(&fixture, NULL, 0, 3, &info), 0);
	CHECK_EQ(info.schema.offset, fixture.schema_block.offset);
	struct schema schema;
	schema_init(&schema);
	CHECK_EQ(table_schema_read(fixture.pager, info.schema, &schema), 0);
	CHECK_EQ(schema.kind, SCHEMA_NODE);
	CHECK_EQ(schema.property_count, 1);
	CHECK(strcmp(schema.properties[0].name, "v") == 0);
	schema_free(&schema);
	char message[256];
	CHECK_EQ(table_verify(fixture.pager, &info, message, sizeof message), 0);
	fixture_close(&fixture);
}

TEST(verify_reports_a_corrupt_schema_block)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	CHECK_EQ(append_schema(&fixture), 0);
	struct table_info info;
	memset(&info, 0, sizeof info);
	CHECK_EQ(write_rows(&fixture, NULL, 0, 3, &info), 0);
	uint8_t byte;
	uint64_t at = fixture.schema_block.offset + BLOCK_HEADER_SIZE + 2;
	CHECK_EQ(io_pread(&fixture.manifest, &byte, 1, at), 0);
	byte ^= 0x01;
	CHECK_EQ(io_pwrite(&fixture.manifest, &byte, 1, at), 0);
	char message[256];
	CHECK_EQ(table_verify(fixture.pager, &info, message, sizeof message), -EIO);
	CHECK(strstr(message, "schema") != NULL);
	fixture_close(&fixture);
}

/* ---- overwrite ---------------------------------------------------------------------- */

TEST(an_overwrite_reads_back_as_the_concatenated_canonical_lines)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_info info;
	memset(&info, 0, sizeof info);
	ulid_new(&info.stable_id);
	ulid_new(&info.incarnation);
	struct ulid stable_id = info.stable_id;
	CHECK_EQ(write_rows(&fixture, NULL, 0, 1000, &info), 0);
	CHECK_EQ(info.table_version, 1);
	CHECK(memcmp(&info.stable_id, &stable_id, 16) == 0);
	CHECK_EQ(info.row_count, 1000);
	struct buf expected;
	buf_init(&expected);
	for (long i = 0; i < 1000; i++) {
		char id[32];
		row_id(id, i);
		expect_row(&expected, id, i);
	}
	CHECK_EQ(info.byte_size, expected.size);
	CHECK(render_equals(&fixture, &info, &expected));
	buf_free(&expected);
	fixture_close(&fixture);
}

TEST(an_overwrite_of_an_existing_table_replaces_its_rows_and_bumps_its_version)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_info first, second;
	memset(&first, 0, sizeof first);
	ulid_new(&first.stable_id);
	ulid_new(&first.incarnation);
	CHECK_EQ(write_rows(&fixture, NULL, 0, 50, &first), 0);
	CHECK_EQ(write_rows(&fixture, &first, 100, 3, &second), 0);
	CHECK_EQ(second.table_version, 2);
	CHECK(memcmp(&first.stable_id, &second.stable_id, 16) == 0);
	CHECK(memcmp(&first.incarnation, &second.incarnation, 16) == 0);
	CHECK_EQ(second.row_count, 3);
	struct buf expected;
	buf_init(&expected);
	expect_row(&expected, "r0000100", 100);
	expect_row(&expected, "r0000101", 101);
	expect_row(&expected, "r0000102", 102);
	CHECK(render_equals(&fixture, &second, &expected));
	buf_free(&expected);
	fixture_close(&fixture);
}

TEST(an_overwrite_with_no_rows_makes_an_empty_table)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_info first, second;
	memset(&first, 0, sizeof first);
	CHECK_EQ(write_rows(&fixture, NULL, 0, 5, &first), 0);
	CHECK_EQ(write_rows(&fixture, &first, 0, 0, &second), 0);
	CHECK_EQ(second.row_count, 0);
	CHECK_EQ(second.byte_size, 0);
	CHECK(block_address_is_null(second.keys));
	CHECK(block_address_is_null(second.fragments));
	struct buf expected;
	buf_init(&expected);
	CHECK(render_equals(&fixture, &second, &expected));
	char message[256];
	CHECK_EQ(table_verify(fixture.pager, &second, message, sizeof message), 0);
	fixture_close(&fixture);
}

TEST(a_duplicate_id_in_an_overwrite_is_eexist_and_leaves_the_stage_unchanged)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_stage *stage;
	CHECK_EQ(stage_open(&fixture, TABLE_OVERWRITE, &stage), 0);
	CHECK_EQ(stage_row(stage, "a", 1), 0);
	CHECK_EQ(stage_row(stage, "b", 2), 0);
	uint64_t bytes = table_stage_bytes(stage);
	CHECK_EQ(stage_row(stage, "a", 3), -EEXIST);
	CHECK_EQ(table_stage_rows(stage), 2);
	CHECK_EQ(table_stage_bytes(stage), bytes);
	struct table_info info;
	memset(&info, 0, sizeof info);
	CHECK_EQ(publish(&fixture, NULL, stage, &info, NULL), 0);
	struct buf expected;
	buf_init(&expected);
	expect_row(&expected, "a", 1);
	expect_row(&expected, "b", 2);
	CHECK(render_equals(&fixture, &info, &expected));
	buf_free(&expected);
	table_stage_free(stage);
	fixture_close(&fixture);
}

TEST(a_delete_in_an_overwrite_is_einval)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_stage *stage;
	CHECK_EQ(stage_open(&fixture, TABLE_OVERWRITE, &stage), 0);
	CHECK_EQ(stage_row(stage, "a", -1), -EINVAL);
	CHECK_EQ(table_stage_rows(stage), 0);
	table_stage_free(stage);
	fixture_close(&fixture);
}

/* Stages a row whose id needs JSON escapes; line is its canonical line. */
static int stage_raw(struct table_stage *stage, const char *id, size_t id_size, const char *line)
{
	struct schema_row row;
	schema_row_init(&row);
	buf_append(&row.id, id, id_size);
	buf_append_string(&row.canonical, line);
	int rc = table_stage_add(stage, &row);
	schema_row_free(&row);
	return rc;
}

TEST(rows_whose_ids_need_json_escapes_are_found_and_verified)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	static const char id[] = "a\"b\\c\x01\xc3\xa9/";
	static const char line[] = "{\"id\":\"a\\\"b\\\\c\\u0001\xc3\xa9/\",\"v\":1}\n";
	struct table_stage *stage;
	CHECK_EQ(stage_open(&fixture, TABLE_OVERWRITE, &stage), 0);
	CHECK_EQ(stage_raw(stage, id, sizeof id - 1, line), 0);
	CHECK_EQ(stage_row(stage, "plain", 2), 0);
	struct table_info info;
	memset(&info, 0, sizeof info);
	CHECK_EQ(publish(&fixture, NULL, stage, &info, NULL), 0);
	table_stage_free(stage);
	struct buf found;
	buf_init(&found);
	CHECK_EQ(table_lookup(fixture.pager, &info, id, sizeof id - 1, &found), 0);
	CHECK(strcmp(buf_cstr(&found), line) == 0);
	char message[256];
	CHECK_EQ(table_verify(fixture.pager, &info, message, sizeof message), 0);
	buf_free(&found);
	fixture_close(&fixture);
}

TEST(a_row_whose_line_does_not_start_with_its_id_is_einval)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_stage *stage;
	CHECK_EQ(stage_open(&fixture, TABLE_MERGE, &stage), 0);
	CHECK_EQ(stage_raw(stage, "a", 1, "{\"id\":\"b\",\"v\":1}\n"), -EINVAL);
	CHECK_EQ(stage_raw(stage, "a", 1, "{\"v\":1,\"id\":\"a\"}\n"), -EINVAL);
	CHECK_EQ(stage_raw(stage, "a", 1, "{\"id\":\"a\",\"v\":1}"), -EINVAL);
	CHECK_EQ(table_stage_rows(stage), 0);
	CHECK(!table_stage_has(stage, "a", 1));
	table_stage_free(stage);
	fixture_close(&fixture);
}

/* ---- staging -------------------------------------------------------------------------- */

TEST(ids_staged_in_order_are_found_and_one_out_of_order_still_sees_every_earlier_id)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_stage *stage;
	CHECK_EQ(stage_open(&fixture, TABLE_MERGE, &stage), 0);
	char id[32];
	for (long i = 0; i < 1000; i += 2) {
		row_id(id, i);
		CHECK_EQ(stage_row(stage, id, i), 0);
	}
	row_id(id, 500);
	CHECK_EQ(table_stage_has(stage, id, strlen(id)), 1);
	row_id(id, 501);
	CHECK_EQ(table_stage_has(stage, id, strlen(id)), 0);
	/* Out of order: an update of an earlier id and a new id below the last. */
	row_id(id, 500);
	CHECK_EQ(stage_row(stage, id, 5000), 0);
	row_id(id, 501);
	CHECK_EQ(stage_row(stage, id, 501), 0);
	row_id(id, 100);
	CHECK_EQ(stage_row(stage, id, -1), 0);
	CHECK_EQ(table_stage_deletes(stage, id, strlen(id)), 1);
	struct table_info info;
	memset(&info, 0, sizeof info);
	CHECK_EQ(publish(&fixture, NULL, stage, &info, NULL), 0);
	table_stage_free(stage);
	CHECK_EQ(info.row_count, 500);
	struct buf line;
	buf_init(&line);
	row_id(id, 500);
	CHECK_EQ(table_lookup(fixture.pager, &info, id, strlen(id), &line), 0);
	CHECK(strstr(buf_cstr(&line), "\"v\":5000") != NULL);
	buf_free(&line);

	CHECK_EQ(stage_open(&fixture, TABLE_OVERWRITE, &stage), 0);
	for (long i = 0; i < 100; i++) {
		row_id(id, i);
		CHECK_EQ(stage_row(stage, id, i), 0);
	}
	row_id(id, 42);
	CHECK_EQ(stage_row(stage, id, 0), -EEXIST);
	row_id(id, 99);
	CHECK_EQ(stage_row(stage, id, 0), -EEXIST);
	table_stage_free(stage);
	fixture_close(&fixture);
}

TEST(a_merge_stage_answers_has_and_deletes_for_the_last_entry_per_id)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_stage *stage;
	CHECK_EQ(stage_open(&fixture, TABLE_MERGE, &stage), 0);
	CHECK_EQ(table_stage_mode(stage), TABLE_MERGE);
	CHECK(!table_stage_has(stage, "a", 1));
	CHECK_EQ(stage_row(stage, "a", 1), 0);
	CHECK_EQ(stage_row(stage, "b", -1), 0);
	CHECK(table_stage_has(stage, "a", 1));
	CHECK(!table_stage_deletes(stage, "a", 1));
	CHECK(!table_stage_has(stage, "b", 1));
	CHECK(table_stage_deletes(stage, "b", 1));
	CHECK_EQ(stage_row(stage, "a", -1), 0);
	CHECK_EQ(stage_row(stage, "b", 5), 0);
	CHECK(table_stage_deletes(stage, "a", 1));
	CHECK(table_stage_has(stage, "b", 1));
	CHECK(!table_stage_has(stage, "ab", 2));
	CHECK_EQ(table_stage_rows(stage), 4);
	table_stage_free(stage);
	fixture_close(&fixture);
}

TEST(a_sealed_merge_stage_still_answers_has_and_deletes)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_stage *stage;
	CHECK_EQ(stage_open(&fixture, TABLE_MERGE, &stage), 0);
	/* Out of order, with deletes and superseded entries, so the seal sorts both kinds. */
	for (long i = 2000; i >= 0; i--) {
		char id[32];
		row_id(id, i);
		CHECK_EQ(stage_row(stage, id, i % 3 == 0 ? -1 : i), 0);
	}
	CHECK_EQ(stage_row(stage, "r0000003", 3), 0);    /* a delete undone */
	CHECK_EQ(stage_row(stage, "r0000004", -1), 0);   /* a row deleted */
	CHECK_EQ(table_stage_seal(stage), 0);
	for (long i = 0; i <= 2000; i++) {
		char id[32];
		row_id(id, i);
		bool deleted = (i % 3 == 0 && i != 3) || i == 4;
		CHECK_EQ(table_stage_has(stage, id, strlen(id)), !deleted);
		CHECK_EQ(table_stage_deletes(stage, id, strlen(id)), deleted);
	}
	CHECK(!table_stage_has(stage, "r0002001", 8));
	CHECK(!table_stage_deletes(stage, "r0002001", 8));
	CHECK(!table_stage_has(stage, "", 0));
	table_stage_free(stage);
	fixture_close(&fixture);
}

TEST(a_merge_stage_keeps_only_the_last_row_for_an_id)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_stage *stage;
	CHECK_EQ(stage_open(&fixture, TABLE_MERGE, &stage), 0);
	CHECK_EQ(stage_row(stage, "a", 1), 0);
	CHECK_EQ(stage_row(stage, "b", 2), 0);
	CHECK_EQ(stage_row(stage, "a", 3), 0);
	CHECK_EQ(stage_row(stage, "c", 4), 0);
	CHECK_EQ(stage_row(stage, "c", -1), 0);
	struct table_info info;
	memset(&info, 0, sizeof info);
	CHECK_EQ(publish(&fixture, NULL, stage, &info, NULL), 0);
	CHECK_EQ(info.row_count, 2);
	struct buf expected;
	buf_init(&expected);
	expect_row(&expected, "b", 2);
	expect_row(&expected, "a", 3);
	CHECK(render_equals(&fixture, &info, &expected));
	buf_free(&expected);
	table_stage_free(stage);
	fixture_close(&fixture);
}

/* ---- merge ----------------------------------------------------------------------------- */

TEST(a_merge_upserts_and_moves_updated_rows_to_the_end)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_info first, second;
	memset(&first, 0, sizeof first);
	CHECK_EQ(write_rows(&fixture, NULL, 0, 5, &first), 0);
	struct table_stage *stage;
	CHECK_EQ(stage_open(&fixture, TABLE_MERGE, &stage), 0);
	CHECK_EQ(stage_row(stage, "r0000001", 1001), 0);
	CHECK_EQ(stage_row(stage, "new", 7), 0);
	CHECK_EQ(stage_row(stage, "r0000003", 1003), 0);
	CHECK_EQ(publish(&fixture, &first, stage, &second, NULL), 0);
	table_stage_free(stage);
	CHECK_EQ(second.table_version, 2);
	CHECK_EQ(second.row_count, 6);
	struct buf expected;
	buf_init(&expected);
	expect_row(&expected, "r0000000", 0);
	expect_row(&expected, "r0000002", 2);
	expect_row(&expected, "r0000004", 4);
	expect_row(&expected, "r0000001", 1001);
	expect_row(&expected, "new", 7);
	expect_row(&expected, "r0000003", 1003);
	CHECK_EQ(second.byte_size, expected.size);
	CHECK(render_equals(&fixture, &second, &expected));
	char message[256];
	CHECK_EQ(table_verify(fixture.pager, &second, message, sizeof message), 0);
	buf_free(&expected);
	fixture_close(&fixture);
}

TEST(a_merge_deletes_rows_and_ignores_deletes_of_absent_ids)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_info first, second;
	memset(&first, 0, sizeof first);
	CHECK_EQ(write_rows(&fixture, NULL, 0, 4, &first), 0);
	struct table_stage *stage;
	CHECK_EQ(stage_open(&fixture, TABLE_MERGE, &stage), 0);
	CHECK_EQ(stage_row(stage, "r0000002", -1), 0);
	CHECK_EQ(stage_row(stage, "absent", -1), 0);
	CHECK_EQ(stage_row(stage, "r0000000", -1), 0);
	CHECK_EQ(publish(&fixture, &first, stage, &second, NULL), 0);
	table_stage_free(stage);
	CHECK_EQ(second.row_count, 2);
	struct buf expected;
	buf_init(&expected);
	expect_row(&expected, "r0000001", 1);
	expect_row(&expected, "r0000003", 3);
	CHECK_EQ(second.byte_size, expected.size);
	CHECK(render_equals(&fixture, &second, &expected));
	struct buf line;
	buf_init(&line);
	CHECK_EQ(table_lookup(fixture.pager, &second, "r0000002", 8, &line), -ENOENT);
	char message[256];
	CHECK_EQ(table_verify(fixture.pager, &second, message, sizeof message), 0);
	buf_free(&expected);
	fixture_close(&fixture);
}

TEST(a_merge_deleting_every_row_leaves_an_empty_table)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_info first, second;
	memset(&first, 0, sizeof first);
	CHECK_EQ(write_rows(&fixture, NULL, 0, 3, &first), 0);
	struct table_stage *stage;
	CHECK_EQ(stage_open(&fixture, TABLE_MERGE, &stage), 0);
	for (long i = 0; i < 3; i++) {
		char id[32];
		row_id(id, i);
		CHECK_EQ(stage_row(stage, id, -1), 0);
	}
	CHECK_EQ(publish(&fixture, &first, stage, &second, NULL), 0);
	table_stage_free(stage);
	CHECK_EQ(second.row_count, 0);
	CHECK_EQ(second.byte_size, 0);
	CHECK(block_address_is_null(second.fragments));
	CHECK(block_address_is_null(second.keys));
	char message[256];
	CHECK_EQ(table_verify(fixture.pager, &second, message, sizeof message), 0);
	fixture_close(&fixture);
}

TEST(repeated_merges_accumulate_deletion_bitmaps_correctly)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_info info;
	memset(&info, 0, sizeof info);
	long values[200];
	CHECK_EQ(write_rows(&fixture, NULL, 0, 200, &info), 0);
	for (long i = 0; i < 200; i++)
		values[i] = i;
	/* Model: row order is a list of row numbers; an update moves a row to the end. */
	long order[200 + 20 * 10];
	size_t order_count = 200;
	for (long i = 0; i < 200; i++)
		order[i] = i;
	unsigned seed = 7;
	for (int round = 0; round < 20; round++) {
		struct table_stage *stage;
		CHECK_EQ(stage_open(&fixture, TABLE_MERGE, &stage), 0);
		for (int j = 0; j < 10; j++) {
			seed = seed * 1103515245u + 12345u;
			long row = (long)((seed >> 8) % 200);
			if (values[row] < 0)
				continue;
			char id[32];
			row_id(id, row);
			bool delete_row = (seed >> 20) % 3 == 0;
			long value = delete_row ? -1 : round * 1000 + j;
			CHECK_EQ(stage_row(stage, id, value), 0);
			values[row] = value;
			size_t at = 0;
			while (order[at] != row)
				at++;
			memmove(order + at, order + at + 1, (order_count - at - 1) * sizeof *order);
			order_count--;
			if (!delete_row)
				order[order_count++] = row;
		}
		struct table_info next;
		CHECK_EQ(publish(&fixture, &info, stage, &next, NULL), 0);
		table_stage_free(stage);
		info = next;
		char message[256];
		CHECK_EQ(table_verify(fixture.pager, &info, message, sizeof message), 0);
	}
	struct buf expected;
	buf_init(&expected);
	for (size_t i = 0; i < order_count; i++) {
		char id[32];
		row_id(id, order[i]);
		expect_row(&expected, id, values[order[i]]);
	}
	CHECK_EQ(info.row_count, order_count);
	CHECK(render_equals(&fixture, &info, &expected));
	buf_free(&expected);
	fixture_close(&fixture);
}

/* Applies a one-row merge (an update of an existing row) and returns pages read. */
static int one_row_merge_pages(struct fixture *fixture, const struct table_info *base,
			       uint64_t *pages_read, uint64_t *bytes_written)
{
	struct table_stage *stage;
	int rc = stage_open(fixture, TABLE_MERGE, &stage);
	if (rc < 0)
		return rc;
	char id[32];
	row_id(id, 4321);
	if ((rc = stage_row(stage, id, 99)) < 0 || (rc = table_stage_seal(stage)) < 0)
		goto out;
	io_counters_reset();
	struct table_info next;
	if ((rc = publish(fixture, base, stage, &next, NULL)) < 0)
		goto out;
	struct io_counters manifest, data;
	io_counters_get(IO_MANIFEST, &manifest);
	io_counters_get(IO_DATA, &data);
	*pages_read = manifest.pages + data.pages;
	*bytes_written = manifest.bytes_written + data.bytes_written;
out:
	table_stage_free(stage);
	return rc;
}

TEST(a_one_row_merge_reads_a_bounded_number_of_pages_whatever_the_table_size)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_info small, large;
	memset(&small, 0, sizeof small);
	memset(&large, 0, sizeof large);
	CHECK_EQ(write_rows(&fixture, NULL, 0, 10000, &small), 0);
	CHECK_EQ(write_rows(&fixture, NULL, 0, 100000, &large), 0);
	uint64_t small_pages, small_written, large_pages, large_written;
	CHECK_EQ(one_row_merge_pages(&fixture, &small, &small_pages, &small_written), 0);
	CHECK_EQ(one_row_merge_pages(&fixture, &large, &large_pages, &large_written), 0);
	/* Key tree path + fragment tree path: a tree level more at most, never O(n). */
	CHECK(small_pages <= 10);
	CHECK(large_pages <= small_pages + 2);
	CHECK(large_written <= small_written + 2 * 4096 + 1024);
	CHECK(large_written < 64 * 1024);
	fixture_close(&fixture);
}

/* ---- reading -------------------------------------------------------------------------- */

TEST(reads_at_every_offset_and_length_equal_the_slice_of_the_full_rendering)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_info first, second, third;
	memset(&first, 0, sizeof first);
	CHECK_EQ(write_rows(&fixture, NULL, 0, 8, &first), 0);
	/* Three fragments, two with deletion bitmaps. */
	struct table_stage *stage;
	CHECK_EQ(stage_open(&fixture, TABLE_MERGE, &stage), 0);
	CHECK_EQ(stage_row(stage, "r0000002", 22), 0);
	CHECK_EQ(stage_row(stage, "x", 5), 0);
	CHECK_EQ(stage_row(stage, "r0000006", -1), 0);
	CHECK_EQ(publish(&fixture, &first, stage, &second, NULL), 0);
	table_stage_free(stage);
	CHECK_EQ(stage_open(&fixture, TABLE_MERGE, &stage), 0);
	CHECK_EQ(stage_row(stage, "x", -1), 0);
	CHECK_EQ(stage_row(stage, "y", 123456), 0);
	CHECK_EQ(stage_row(stage, "r0000000", -1), 0);
	CHECK_EQ(publish(&fixture, &second, stage, &third, NULL), 0);
	table_stage_free(stage);

	struct buf full;
	buf_init(&full);
	CHECK_EQ(render(&fixture, &third, 1, &full), 0);
	struct buf expected;
	buf_init(&expected);
	long kept[] = { 1, 3, 4, 5, 7 };
	for (size_t i = 0; i < 5; i++) {
		char id[32];
		row_id(id, kept[i]);
		expect_row(&expected, id, kept[i]);
	}
	expect_row(&expected, "r0000002", 22);
	expect_row(&expected, "y", 123456);
	CHECK_EQ(full.size, expected.size);
	CHECK(memcmp(full.data, expected.data, full.size) == 0);

	struct table_reader *reader;
	CHECK_EQ(table_reader_open(fixture.pager, &third, &reader), 0);
	CHECK_EQ(table_reader_size(reader), full.size);
	uint8_t out[512];
	for (size_t offset = 0; offset <= full.size + 1; offset++) {
		for (size_t length = 0; length <= full.size + 2 - offset && length <= sizeof out; length++) {
			memset(out, 0xaa, sizeof out);
			ssize_t got = table_reader_pread(reader, out, length, offset);
			size_t available = offset < full.size ? full.size - offset : 0;
			size_t want = length < available ? length : available;
			CHECK_EQ(got, want);
			CHECK(want == 0 || memcmp(out, full.data + offset, want) == 0);
			CHECK(want == sizeof out || out[want] == 0xaa);
		}
	}
	table_reader_free(reader);
	buf_free(&full);
	buf_free(&expected);
	fixture_close(&fixture);
}

TEST(a_sequential_read_decodes_each_fragment_once)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_info info;
	memset(&info, 0, sizeof info);
	CHECK_EQ(write_rows(&fixture, NULL, 0, 20000, &info), 0);
	io_counters_reset();
	struct buf full;
	buf_init(&full);
	CHECK_EQ(render(&fixture, &info, 1000, &full), 0);
	struct io_counters data;
	io_counters_get(IO_DATA, &data);
	/* 20000 rows in fragments of at most TABLE_FRAGMENT_ROWS: 3 fragments, each decoded once. */
	CHECK_EQ(data.rows_decoded, 20000);
	buf_free(&full);
	fixture_close(&fixture);
}

TEST(a_lookup_returns_the_canonical_line_of_a_live_row)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_info info;
	memset(&info, 0, sizeof info);
	CHECK_EQ(write_rows(&fixture, NULL, 0, 100, &info), 0);
	struct buf line;
	buf_init(&line);
	CHECK_EQ(table_lookup(fixture.pager, &info, "r0000042", 8, &line), 0);
	CHECK(strcmp(buf_cstr(&line), "{\"id\":\"r0000042\",\"v\":42}\n") == 0);
	buf_reset(&line);
	CHECK_EQ(table_lookup(fixture.pager, &info, "r000004", 7, &line), -ENOENT);
	CHECK_EQ(line.size, 0);
	buf_free(&line);
	fixture_close(&fixture);
}

TEST(old_table_versions_still_read_their_old_bytes)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_info versions[4];
	memset(versions, 0, sizeof versions);
	CHECK_EQ(write_rows(&fixture, NULL, 0, 30, &versions[0]), 0);
	struct buf renderings[4];
	for (int i = 0; i < 4; i++)
		buf_init(&renderings[i]);
	CHECK_EQ(render(&fixture, &versions[0], 4096, &renderings[0]), 0);
	for (int v = 1; v < 4; v++) {
		struct table_stage *stage;
		CHECK_EQ(stage_open(&fixture, TABLE_MERGE, &stage), 0);
		for (long i = v; i < 30; i += 3) {
			char id[32];
			row_id(id, i);
			CHECK_EQ(stage_row(stage, id, v % 2 ? -1 : i * 10), 0);
		}
		CHECK_EQ(publish(&fixture, &versions[v - 1], stage, &versions[v], NULL), 0);
		table_stage_free(stage);
		CHECK_EQ(render(&fixture, &versions[v], 4096, &renderings[v]), 0);
	}
	for (int v = 0; v < 4; v++) {
		struct buf again;
		buf_init(&again);
		CHECK_EQ(render(&fixture, &versions[v], 77, &again), 0);
		CHECK_EQ(again.size, renderings[v].size);
		CHECK(memcmp(again.data, renderings[v].data, again.size) == 0);
		char message[256];
		CHECK_EQ(table_verify(fixture.pager, &versions[v], message, sizeof message), 0);
		buf_free(&again);
	}
	CHECK(renderings[0].size != renderings[1].size);
	for (int i = 0; i < 4; i++)
		buf_free(&renderings[i]);
	fixture_close(&fixture);
}

/* ---- spilling to a segment -------------------------------------------------------------- */

static bool segment_exists(struct fixture *fixture, uint64_t segment_id)
{
	char name[64];
	snprintf(name, sizeof name, "segments/%016llx", (unsigned long long)segment_id);
	struct stat status;
	return fstatat(fixture->directory, name, &status, 0) == 0;
}

/* Rows with ~300-byte lines, so a few MiB of them cross the inline limit. */
static int stage_wide_row(struct table_stage *stage, long number, long value)
{
	char id[32];
	row_id(id, number);
	struct schema_row row;
	schema_row_init(&row);
	buf_append_string(&row.id, id);
	buf_printf(&row.canonical, "{\"id\":\"%s\",\"v\":%ld,\"pad\":\"", id, value);
	for (int i = 0; i < 256; i++)
		buf_put_u8(&row.canonical, (uint8_t)('a' + (number * 7 + i) % 26));
	buf_append_string(&row.canonical, "\"}\n");
	int rc = table_stage_add(stage, &row);
	schema_row_free(&row);
	return rc;
}

static void expect_wide_row(struct buf *expected, long number, long value)
{
	char id[32];
	row_id(id, number);
	buf_printf(expected, "{\"id\":\"%s\",\"v\":%ld,\"pad\":\"", id, value);
	for (int i = 0; i < 256; i++)
		buf_put_u8(expected, (uint8_t)('a' + (number * 7 + i) % 26));
	buf_append_string(expected, "\"}\n");
}

TEST(a_stage_above_the_inline_limit_spills_to_a_segment_and_reads_back_identically)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_stage *stage;
	CHECK_EQ(stage_open(&fixture, TABLE_OVERWRITE, &stage), 0);
	long count = 3 * INLINE_LIMIT / 290;
	struct buf expected;
	buf_init(&expected);
	for (long i = 0; i < count; i++) {
		CHECK_EQ(stage_wide_row(stage, i, i), 0);
		expect_wide_row(&expected, i, i);
	}
	CHECK(expected.size > INLINE_LIMIT);
	uint64_t segment_id = table_stage_segment(stage);
	CHECK(segment_id != 0);
	CHECK(segment_exists(&fixture, segment_id));
	struct table_info info;
	memset(&info, 0, sizeof info);
	CHECK_EQ(publish(&fixture, NULL, stage, &info, NULL), 0);
	table_stage_free(stage);
	CHECK(segment_exists(&fixture, segment_id));
	CHECK_EQ(info.row_count, count);
	CHECK_EQ(info.byte_size, expected.size);
	CHECK(render_equals(&fixture, &info, &expected));
	char message[256];
	CHECK_EQ(table_verify(fixture.pager, &info, message, sizeof message), 0);
	buf_free(&expected);
	fixture_close(&fixture);
}

TEST(a_spilled_merge_carries_superseded_rows_as_deleted_rows)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_info base, info;
	memset(&base, 0, sizeof base);
	CHECK_EQ(write_rows(&fixture, NULL, 0, 10, &base), 0);
	struct table_stage *stage;
	CHECK_EQ(stage_open(&fixture, TABLE_MERGE, &stage), 0);
	long count = 2 * INLINE_LIMIT / 290;
	for (long i = 0; i < count; i++)
		CHECK_EQ(stage_wide_row(stage, i, i), 0);
	CHECK(table_stage_segment(stage) != 0);
	/* Supersede early (already spilled) rows: an update, a delete; and delete a base row. */
	CHECK_EQ(stage_wide_row(stage, 1, 1111), 0);
	CHECK_EQ(stage_row(stage, "r0000003", -1), 0);
	CHECK_EQ(stage_row(stage, "r0000005", 55), 0);
	CHECK_EQ(publish(&fixture, &base, stage, &info, NULL), 0);
	table_stage_free(stage);
	struct buf expected;
	buf_init(&expected);
	for (long i = 0; i < count; i++)
		if (i != 1 && i != 3 && i != 5)
			expect_wide_row(&expected, i, i);
	expect_wide_row(&expected, 1, 1111);
	expect_row(&expected, "r0000005", 55);
	CHECK_EQ(info.row_count, count - 1);
	CHECK_EQ(info.byte_size, expected.size);
	CHECK(render_equals(&fixture, &info, &expected));
	char message[256];
	CHECK_EQ(table_verify(fixture.pager, &info, message, sizeof message), 0);
	buf_free(&expected);
	fixture_close(&fixture);
}

/* ---- large stages: sorted id runs in a scratch file ---------------------------- */

/* Stages count distinct ids of 1 to 20 letters a-c (some with a common prefix) in a scrambled order. */
static int stage_tricky_ids(struct table_stage *stage, long count, char (*ids)[32])
{
	uint64_t state = 7;
	long made = 0;
	while (made < count) {
		state = state * 6364136223846793005u + 1442695040888963407u;
		char id[32];
		int length = 1 + (int)((state >> 33) % 20), at = 0;
		if ((state >> 20) % 2)
			at = snprintf(id, sizeof id, "prefix-");
		for (int i = 0; i < length && at < 30; i++) {
			state = state * 6364136223846793005u + 1442695040888963407u;
			id[at++] = (char)('a' + (state >> 40) % 3);
		}
		id[at] = 0;
		bool seen = false;
		for (long i = 0; i < made && !seen; i++)
			seen = strcmp(ids[i], id) == 0;
		if (seen)
			continue;
		int rc = stage_row(stage, id, made);
		if (rc < 0)
			return rc;
		memcpy(ids[made++], id, sizeof id);
	}
	return 0;
}

TEST(ids_of_any_length_and_common_prefixes_are_sorted_into_a_valid_key_tree)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	const long count = 3000;
	char (*ids)[32] = calloc((size_t)count, sizeof *ids);
	for (int spilled = 0; spilled < 2; spilled++) {
		struct table_stage *stage;
		CHECK_EQ(stage_open(&fixture, TABLE_OVERWRITE, &stage), 0);
		if (spilled) {
			/* Wide rows first so the stage spills, then the tricky ids go to runs of 500. */
			table_stage_set_run_entries(stage, 500);
			for (long i = 0; i < 2 * (long)INLINE_LIMIT / 290; i++)
				CHECK_EQ(stage_wide_row(stage, i, i), 0);
		}
		CHECK_EQ(stage_tricky_ids(stage, count, ids), 0);
		struct table_info info;
		memset(&info, 0, sizeof info);
		CHECK_EQ(publish(&fixture, NULL, stage, &info, NULL), 0);
		table_stage_free(stage);
		char message[256];
		CHECK_EQ(table_verify(fixture.pager, &info, message, sizeof message), 0);
		bool found = true;
		for (long i = 0; i < count; i++) {
			struct buf line;
			buf_init(&line);
			found = found && table_lookup(fixture.pager, &info, ids[i], strlen(ids[i]), &line) == 0;
			buf_free(&line);
		}
		CHECK(found);
	}
	free(ids);
	fixture_close(&fixture);
}

/* A permutation of 0 .. count - 1 (a fixed linear congruential shuffle). */
static long *shuffled(long count)
{
	long *order = malloc((size_t)count * sizeof *order);
	for (long i = 0; i < count; i++)
		order[i] = i;
	uint64_t state = 42;
	for (long i = count - 1; i > 0; i--) {
		state = state * 6364136223846793005u + 1442695040888963407u;
		long j = (long)((state >> 33) % (uint64_t)(i + 1));
		long swap = order[i];
		order[i] = order[j];
		order[j] = swap;
	}
	return order;
}

/* The number in each rendered line's "v", by row number (-1: no row); 0 or -1 if a line is not ours. */
static int rendered_values(struct fixture *fixture, const struct table_info *info, long rows, long *values)
{
	for (long i = 0; i < rows; i++)
		values[i] = -1;
	struct buf bytes;
	buf_init(&bytes);
	int rc = render(fixture, info, 65536, &bytes);
	const char *line = (const char *)bytes.data, *end = line + bytes.size;
	while (rc == 0 && line < end) {
		long number, value;
		char head[48] = { 0 };
		memcpy(head, line, (size_t)(end - line) < sizeof head - 1 ? (size_t)(end - line) : sizeof head - 1);
		if (sscanf(head, "{\"id\":\"r%7ld\",\"v\":%ld", &number, &value) != 2 || number < 0 ||
		    number >= rows || values[number] != -1)
			rc = -1;
		else
			values[number] = value;
		const char *newline = memchr(line, '\n', (size_t)(end - line));
		line = newline ? newline + 1 : end;
	}
	buf_free(&bytes);
	return rc;
}

/* Every row's "v" is expected[row] (-1: no row), the row count matches, and verify is clean. */
static void check_values(struct fixture *fixture, const struct table_info *info, const long *expected, long rows)
{
	long *values = malloc((size_t)rows * sizeof *values);
	CHECK_EQ(rendered_values(fixture, info, rows, values), 0);
	long live = 0;
	bool same = true;
	for (long i = 0; i < rows; i++) {
		live += expected[i] >= 0;
		same = same && values[i] == expected[i];
	}
	CHECK(same);
	CHECK_EQ(info->row_count, live);
	char message[256];
	CHECK_EQ(table_verify(fixture->pager, info, message, sizeof message), 0);
	free(values);
}

/* Publishes an overwrite of ids[0..count) (wide rows, value = position) in runs of 1000;
 * checks it reads back in staging order, finds every id and verifies. */
static void check_overwrite_in_runs(const long *ids, long count, bool streamed)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_stage *stage;
	CHECK_EQ(stage_open(&fixture, TABLE_OVERWRITE, &stage), 0);
	table_stage_set_run_entries(stage, 1000);
	struct buf expected;
	buf_init(&expected);
	for (long i = 0; i < count; i++) {
		CHECK_EQ(stage_wide_row(stage, ids[i], i), 0);
		expect_wide_row(&expected, ids[i], i);
	}
	struct table_info info;
	memset(&info, 0, sizeof info);
	CHECK_EQ(publish(&fixture, NULL, stage, &info, NULL), 0);
	CHECK_EQ(table_stage_keys_streamed(stage), streamed);
	table_stage_free(stage);
	CHECK_EQ(info.row_count, count);
	CHECK(render_equals(&fixture, &info, &expected));
	/* verify checks the key tree against every row; lookups of every 53rd id and of the last */
	for (long n = 0; n <= count / 53; n++) {
		long i = n < count / 53 ? n * 53 : count - 1;
		char id[32];
		row_id(id, ids[i]);
		struct buf line;
		buf_init(&line);
		CHECK_EQ(table_lookup(fixture.pager, &info, id, strlen(id), &line), 0);
		CHECK(line.size > 0 && memcmp(line.data + 7, id, 8) == 0);
		buf_free(&line);
	}
	char missing[32];
	row_id(missing, 9999999);
	struct buf line;
	buf_init(&line);
	CHECK_EQ(table_lookup(fixture.pager, &info, missing, strlen(missing), &line), -ENOENT);
	buf_free(&line);
	char message[256];
	CHECK_EQ(table_verify(fixture.pager, &info, message, sizeof message), 0);
	buf_free(&expected);
	fixture_close(&fixture);
}

TEST(a_spilled_stage_in_many_runs_reads_back_every_row_in_staging_order)
{
	long count = 2 * INLINE_LIMIT / 290;
	long *order = shuffled(count);
	check_overwrite_in_runs(order, count, false);
	free(order);
}

TEST(an_overwrite_in_increasing_id_order_gets_the_key_tree_its_writer_built_as_the_rows_came)
{
	long count = 3 * INLINE_LIMIT / 290;
	long *ids = malloc((size_t)count * sizeof *ids);
	for (long i = 0; i < count; i++)
		ids[i] = 3 * i + 1;
	check_overwrite_in_runs(ids, count, true);
	free(ids);
}

/* Increasing ids (3i + 1) except ids[2500], after more than two runs, which is `odd`. */
static void check_overwrite_out_of_order_at(long odd)
{
	long count = 3 * INLINE_LIMIT / 290;
	long *ids = malloc((size_t)count * sizeof *ids);
	for (long i = 0; i < count; i++)
		ids[i] = 3 * i + 1;
	ids[2500] = odd;
	check_overwrite_in_runs(ids, count, false);
	free(ids);
}

TEST(an_overwrite_with_an_id_below_all_earlier_ones_after_several_runs_still_gets_every_key)
{
	check_overwrite_out_of_order_at(0);
}

TEST(an_overwrite_with_an_id_between_earlier_ones_after_several_runs_still_gets_every_key)
{
	check_overwrite_out_of_order_at(3 * 100 + 2);
}

TEST(an_id_repeated_from_an_earlier_run_is_eexist_at_its_add_in_an_overwrite)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_stage *stage;
	CHECK_EQ(stage_open(&fixture, TABLE_OVERWRITE, &stage), 0);
	table_stage_set_run_entries(stage, 500);
	long count = 2 * INLINE_LIMIT / 290;
	for (long i = 0; i < count; i++)
		CHECK_EQ(stage_wide_row(stage, i, i), 0);
	CHECK_EQ(stage_wide_row(stage, 3, 0), -EEXIST);
	CHECK_EQ(stage_wide_row(stage, count / 2, 0), -EEXIST);
	CHECK_EQ(stage_wide_row(stage, count - 1, 0), -EEXIST);
	CHECK_EQ(stage_wide_row(stage, count, count), 0);
	struct table_info info;
	memset(&info, 0, sizeof info);
	CHECK_EQ(publish(&fixture, NULL, stage, &info, NULL), 0);
	table_stage_free(stage);
	CHECK_EQ(info.row_count, count + 1);
	fixture_close(&fixture);
}

TEST(a_run_that_cannot_be_written_fails_that_add_and_the_stage_goes_on_unchanged)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_stage *stage;
	CHECK_EQ(stage_open(&fixture, TABLE_OVERWRITE, &stage), 0);
	table_stage_set_run_entries(stage, 1000);
	long count = 2 * INLINE_LIMIT / 290, failed = 0;
	struct buf expected;
	buf_init(&expected);
	for (long i = 0; i < count; i++) {
		/* Every second run's write fails once: that add fails, the same row is added again. */
		if (i % 2000 == 1000)
			CHECK_EQ(io_failpoint_arm("stage.before_run_write", IO_FAILPOINT_ERROR), 0);
		int rc = stage_wide_row(stage, i, i);
		if (rc == -EIO) {
			failed++;
			rc = stage_wide_row(stage, i, i);
		}
		CHECK_EQ(rc, 0);
		expect_wide_row(&expected, i, i);
	}
	io_failpoint_arm("stage.before_run_write", IO_FAILPOINT_OFF);
	CHECK(failed >= 2);
	/* The ids of the failed runs are still found: a duplicate of each is refused. */
	CHECK_EQ(stage_wide_row(stage, 999, 0), -EEXIST);
	CHECK_EQ(stage_wide_row(stage, 5999, 0), -EEXIST);
	struct table_info info;
	memset(&info, 0, sizeof info);
	CHECK_EQ(publish(&fixture, NULL, stage, &info, NULL), 0);
	table_stage_free(stage);
	CHECK_EQ(info.row_count, count);
	CHECK(render_equals(&fixture, &info, &expected));
	char message[256];
	CHECK_EQ(table_verify(fixture.pager, &info, message, sizeof message), 0);
	buf_free(&expected);
	fixture_close(&fixture);
}

TEST(has_and_deletes_see_ids_held_in_runs_before_and_after_the_seal)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_stage *stage;
	CHECK_EQ(stage_open(&fixture, TABLE_MERGE, &stage), 0);
	table_stage_set_run_entries(stage, 700);
	long count = 2 * INLINE_LIMIT / 290;
	for (long i = 0; i < count; i++) {
		char id[32];
		row_id(id, i);
		CHECK_EQ(i % 10 == 7 ? stage_row(stage, id, -1) : stage_wide_row(stage, i, i), 0);
	}
	for (int sealed = 0; sealed < 2; sealed++) {
		for (long i = 0; i < count + 5; i++) {
			char id[32];
			row_id(id, i);
			bool deleted = i < count && i % 10 == 7, live = i < count && !deleted;
			CHECK_EQ(table_stage_has(stage, id, strlen(id)), live);
			CHECK_EQ(table_stage_deletes(stage, id, strlen(id)), deleted);
		}
		CHECK_EQ(table_stage_seal(stage), 0);
	}
	table_stage_free(stage);
	fixture_close(&fixture);
}

TEST(a_merge_supersedes_and_deletes_rows_held_in_earlier_runs)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	long count = 2 * INLINE_LIMIT / 290, rows = count + 10;
	struct table_info base, info;
	memset(&base, 0, sizeof base);
	CHECK_EQ(write_rows(&fixture, NULL, count, 10, &base), 0);
	struct table_stage *stage;
	CHECK_EQ(stage_open(&fixture, TABLE_MERGE, &stage), 0);
	table_stage_set_run_entries(stage, 1000);
	long *expected = malloc((size_t)rows * sizeof *expected);
	for (long i = 0; i < rows; i++)
		expected[i] = i >= count ? i : -1;
	long *order = shuffled(count);
	for (long round = 0; round < 3; round++) {
		/* Each round restages a third of the ids: the earlier rows sit in earlier runs by now. */
		for (long k = 0; k < count; k++) {
			long i = order[k];
			if (round > 0 && i % 3 != round)
				continue;
			long value = round * 1000000 + i;
			CHECK_EQ(stage_wide_row(stage, i, value), 0);
			expected[i] = value;
		}
	}
	/* Deletes of ids held in runs (staged rows) and of base rows. */
	for (long i = 0; i < count; i += 11) {
		char id[32];
		row_id(id, i);
		CHECK_EQ(stage_row(stage, id, -1), 0);
		expected[i] = -1;
	}
	CHECK_EQ(stage_row(stage, "r0000000", -1), 0);
	char base_id[32];
	row_id(base_id, count + 4);
	CHECK_EQ(stage_row(stage, base_id, -1), 0);
	expected[count + 4] = -1;
	CHECK_EQ(stage_wide_row(stage, 11, 77), 0);
	expected[11] = 77;
	CHECK_EQ(publish(&fixture, &base, stage, &info, NULL), 0);
	table_stage_free(stage);
	check_values(&fixture, &info, expected, rows);
	free(order);
	free(expected);
	fixture_close(&fixture);
}

/* Merges ids 0, 3, 6, ... as wide rows (value + 1000000) and deletes ids 1, 301, 601, ...
 * into a table of rows 0 .. base_rows - 1; checks every row and verify. */
static void check_large_merge(long base_rows, uint32_t run_entries)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_info base, info;
	memset(&base, 0, sizeof base);
	CHECK_EQ(write_rows(&fixture, NULL, 0, base_rows, &base), 0);
	struct table_stage *stage;
	CHECK_EQ(stage_open(&fixture, TABLE_MERGE, &stage), 0);
	table_stage_set_run_entries(stage, run_entries);
	long *expected = malloc((size_t)base_rows * sizeof *expected);
	for (long i = 0; i < base_rows; i++)
		expected[i] = i;
	long staged = 0;
	for (long i = 0; i < base_rows && staged < 2 * (long)INLINE_LIMIT / 290; i += 3, staged++) {
		CHECK_EQ(stage_wide_row(stage, i, i + 1000000), 0);
		expected[i] = i + 1000000;
	}
	for (long i = 1; i < base_rows; i += 300) {
		char id[32];
		row_id(id, i);
		CHECK_EQ(stage_row(stage, id, -1), 0);
		expected[i] = -1;
	}
	CHECK_EQ(publish(&fixture, &base, stage, &info, NULL), 0);
	table_stage_free(stage);
	check_values(&fixture, &info, expected, base_rows);
	free(expected);
	fixture_close(&fixture);
}

TEST(a_merge_of_about_as_many_rows_as_the_table_rebuilds_the_key_tree_in_one_pass)
{
	check_large_merge(40000, 1000);
}

TEST(a_merge_in_runs_into_a_much_larger_table_updates_its_key_tree_in_place)
{
	check_large_merge(400000, 1000);
}

/*
 * Random merges in runs against a model: ids drawn from a small pool (so most
 * come back, in and out of order, in memory and in earlier runs), one row in
 * eight a delete, into a base table; then has/deletes for every id, the rows
 * and verify. Three seeds, both merge paths (streaming and in place).
 */
static void check_random_merge(uint64_t seed, long base_rows, uint32_t run_entries)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	const long pool = 3000, adds = 2 * INLINE_LIMIT / 290;
	long rows = pool > base_rows ? pool : base_rows;
	struct table_info base, info;
	memset(&base, 0, sizeof base);
	CHECK_EQ(write_rows(&fixture, NULL, 0, base_rows, &base), 0);
	long *expected = malloc((size_t)rows * sizeof *expected);
	int8_t *staged = calloc((size_t)rows, 1); /* 0: not staged, 1: row, 2: delete */
	for (long i = 0; i < rows; i++)
		expected[i] = i < base_rows ? i : -1;
	struct table_stage *stage;
	CHECK_EQ(stage_open(&fixture, TABLE_MERGE, &stage), 0);
	table_stage_set_run_entries(stage, run_entries);
	uint64_t state = seed;
	for (long k = 0; k < adds; k++) {
		state = state * 6364136223846793005u + 1442695040888963407u;
		/* Half the time the next id in order, else any id of the pool. */
		long id_number = (state >> 40) % 2 ? k % pool : (long)((state >> 20) % (uint64_t)pool);
		if ((state >> 60) == 0) {
			char id[32];
			row_id(id, id_number);
			CHECK_EQ(stage_row(stage, id, -1), 0);
			expected[id_number] = -1;
			staged[id_number] = 2;
		} else {
			CHECK_EQ(stage_wide_row(stage, id_number, k + 1000000), 0);
			expected[id_number] = k + 1000000;
			staged[id_number] = 1;
		}
	}
	bool answers = true;
	for (long i = 0; i < rows; i++) {
		char id[32];
		row_id(id, i);
		answers = answers && table_stage_has(stage, id, strlen(id)) == (staged[i] == 1) &&
			  table_stage_deletes(stage, id, strlen(id)) == (staged[i] == 2);
	}
	CHECK(answers);
	CHECK_EQ(publish(&fixture, &base, stage, &info, NULL), 0);
	table_stage_free(stage);
	check_values(&fixture, &info, expected, rows);
	free(staged);
	free(expected);
	fixture_close(&fixture);
}

TEST(random_merges_in_runs_into_a_small_table_equal_a_model)
{
	check_random_merge(1, 100, 700);
}

TEST(random_merges_in_runs_over_every_id_of_the_table_equal_a_model)
{
	check_random_merge(2, 3000, 1500);
}

TEST(random_merges_in_runs_into_a_large_table_update_in_place_and_equal_a_model)
{
	check_random_merge(3, 600000, 1000); /* about 29,000 records in runs: under 1/16 of it */
}

TEST(a_spilled_overwrite_has_its_key_tree_in_its_segment_and_fragments_from_sequence_zero)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_info base, info;
	memset(&base, 0, sizeof base);
	CHECK_EQ(write_rows(&fixture, NULL, 0, 10, &base), 0);
	CHECK_EQ(write_rows(&fixture, &base, 0, 10, &base), 0);
	CHECK(base.next_fragment > 0);
	struct table_stage *stage;
	CHECK_EQ(stage_open(&fixture, TABLE_OVERWRITE, &stage), 0);
	long count = 2 * INLINE_LIMIT / 290;
	for (long i = 0; i < count; i++)
		CHECK_EQ(stage_wide_row(stage, i, i), 0);
	uint64_t segment_id = table_stage_segment(stage);
	uint64_t before = fixture.size;
	CHECK_EQ(publish(&fixture, &base, stage, &info, NULL), 0);
	table_stage_free(stage);
	CHECK_EQ(info.keys.segment, segment_id);
	CHECK_EQ(info.fragments.segment, 0);
	/* The manifest got the fragment tree and the record only: well under a byte per row. */
	CHECK(fixture.size - before < (uint64_t)count);
	struct btree *fragments;
	struct btree_iterator *iterator;
	const uint8_t *key, *value;
	size_t key_size, value_size;
	CHECK_EQ(btree_open_layout(fixture.pager, info.fragments, BTREE_PACKED, &fragments), 0);
	CHECK_EQ(btree_iterator_open(fragments, NULL, 0, &iterator), 0);
	CHECK_EQ(btree_iterator_next(iterator, &key, &key_size, &value, &value_size), 1);
	CHECK(key_size == 8 && memcmp(key, "\0\0\0\0\0\0\0\0", 8) == 0);
	btree_iterator_free(iterator);
	btree_free(fragments);
	char message[256];
	CHECK_EQ(table_verify(fixture.pager, &info, message, sizeof message), 0);
	struct buf expected;
	buf_init(&expected);
	for (long i = 0; i < count; i++)
		expect_wide_row(&expected, i, i);
	CHECK(render_equals(&fixture, &info, &expected));
	buf_free(&expected);
	fixture_close(&fixture);
}

/* Writes one run of the given ids (each "k<n>"), every record's fragment = tag. */
static int write_run(struct stage_runs *runs, const long *numbers, size_t count, uint32_t tag)
{
	int rc = table_runs_begin(runs, count);
	for (size_t i = 0; rc == 0 && i < count; i++) {
		char id[32];
		snprintf(id, sizeof id, "k%05ld", numbers[i]);
		struct stage_record record = { .id = (const uint8_t *)id, .id_size = (uint16_t)strlen(id),
					       .fragment = tag, .row_index = (uint16_t)i, .line_size = 10 };
		rc = table_runs_add(runs, &record);
	}
	if (rc == 0)
		rc = table_runs_end(runs);
	if (rc < 0)
		table_runs_abandon(runs);
	return rc;
}

TEST(runs_merge_in_id_order_and_the_newest_run_wins_an_id)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct stage_runs *runs;
	CHECK_EQ(table_runs_open(fixture.pager, &runs), 0);
	long evens[3000], thirds[1000], few[3] = { 1, 4, 2999 };
	for (long i = 0; i < 3000; i++)
		evens[i] = 2 * i;
	for (long i = 0; i < 1000; i++)
		thirds[i] = 3 * i;
	CHECK_EQ(write_run(runs, evens, 3000, 1), 0);
	CHECK_EQ(write_run(runs, thirds, 1000, 2), 0);
	CHECK_EQ(write_run(runs, few, 3, 3), 0);
	CHECK_EQ(table_runs_count(runs), 3);
	struct stage_record record;
	CHECK_EQ(table_runs_find(runs, "k00004", 6, &record), 1);
	CHECK_EQ(record.fragment, 3);
	CHECK_EQ(table_runs_find(runs, "k00006", 6, &record), 1);
	CHECK_EQ(record.fragment, 2);
	CHECK_EQ(table_runs_find(runs, "k00008", 6, &record), 1);
	CHECK_EQ(record.fragment, 1);
	CHECK_EQ(table_runs_find(runs, "k00007", 6, &record), 0);
	CHECK_EQ(table_runs_find(runs, "k99999", 6, &record), 0);
	struct stage_runs_cursor *cursor;
	CHECK_EQ(table_runs_cursor_open(runs, &cursor), 0);
	long previous = -1, seen = 0;
	bool ordered = true, newest = true;
	while (table_runs_cursor_next(cursor, &record) == 1) {
		long number = strtol((const char *)record.id + 1, NULL, 10);
		ordered = ordered && number > previous;
		uint32_t want = (number == 1 || number == 4 || number == 2999) ? 3 : number % 3 == 0 && number < 3000 ? 2 : 1;
		newest = newest && record.fragment == want;
		previous = number;
		seen++;
	}
	table_runs_cursor_free(cursor);
	CHECK(ordered);
	CHECK(newest);
	/* The union of the evens below 6000, the multiples of 3 below 3000 and 1, 4, 2999. */
	long expected = 0;
	for (long n = 0; n < 6000; n++)
		expected += n % 2 == 0 || (n % 3 == 0 && n < 3000) || n == 1 || n == 2999;
	CHECK_EQ(seen, expected);
	table_runs_free(runs);
	fixture_close(&fixture);
}

TEST(a_run_refuses_ids_out_of_order_and_abandoning_it_leaves_the_runs_as_they_were)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct stage_runs *runs;
	CHECK_EQ(table_runs_open(fixture.pager, &runs), 0);
	long first[2] = { 5, 9 }, backwards[2] = { 7, 6 }, twice[2] = { 8, 8 };
	CHECK_EQ(write_run(runs, first, 2, 1), 0);
	CHECK_EQ(write_run(runs, backwards, 2, 2), -EINVAL);
	CHECK_EQ(write_run(runs, twice, 2, 2), -EINVAL);
	CHECK_EQ(table_runs_count(runs), 1);
	CHECK_EQ(table_runs_records(runs), 2);
	struct stage_record record;
	CHECK_EQ(table_runs_find(runs, "k00007", 6, &record), 0);
	CHECK_EQ(table_runs_find(runs, "k00009", 6, &record), 1);
	/* More records than announced is refused too. */
	CHECK_EQ(table_runs_begin(runs, 0), 0);
	struct stage_record extra = { .id = (const uint8_t *)"k1", .id_size = 2 };
	CHECK_EQ(table_runs_add(runs, &extra), -EINVAL);
	table_runs_abandon(runs);
	CHECK_EQ(write_run(runs, backwards + 1, 1, 3), 0);
	CHECK_EQ(table_runs_find(runs, "k00006", 6, &record), 1);
	CHECK_EQ(record.fragment, 3);
	table_runs_free(runs);
	fixture_close(&fixture);
}

TEST(freeing_an_unpublished_stage_removes_its_segment)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_stage *stage;
	CHECK_EQ(stage_open(&fixture, TABLE_OVERWRITE, &stage), 0);
	long count = 2 * INLINE_LIMIT / 290;
	for (long i = 0; i < count; i++)
		CHECK_EQ(stage_wide_row(stage, i, i), 0);
	uint64_t segment_id = table_stage_segment(stage);
	CHECK(segment_id != 0);
	CHECK_EQ(table_stage_seal(stage), 0);
	CHECK(segment_exists(&fixture, segment_id));
	table_stage_free(stage);
	CHECK(!segment_exists(&fixture, segment_id));
	fixture_close(&fixture);
}

/* The bytes of segments/<id> after its file header (which names the segment), or an empty buffer. */
static void segment_blocks(struct fixture *fixture, uint64_t segment_id, struct buf *out)
{
	char name[64];
	snprintf(name, sizeof name, "segments/%016llx", (unsigned long long)segment_id);
	int file = openat(fixture->directory, name, O_RDONLY);
	if (file < 0)
		return;
	uint8_t chunk[65536];
	off_t offset = FILE_HEADER_SIZE;
	ssize_t got;
	while ((got = pread(file, chunk, sizeof chunk, offset)) > 0) {
		buf_append(out, chunk, (size_t)got);
		offset += got;
	}
	close(file);
}

TEST(a_spilled_stage_writes_the_same_fragment_bytes_in_the_same_order_every_time)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	long count = 3 * INLINE_LIMIT / 290;
	uint64_t segments[2];
	struct table_info infos[2];
	for (int round = 0; round < 2; round++) {
		struct table_stage *stage;
		CHECK_EQ(stage_open(&fixture, TABLE_MERGE, &stage), 0);
		for (long i = 0; i < count; i++)
			CHECK_EQ(stage_wide_row(stage, i, i), 0);
		CHECK_EQ(stage_wide_row(stage, 7, 77), 0); /* supersedes a spilled row */
		segments[round] = table_stage_segment(stage);
		memset(&infos[round], 0, sizeof infos[round]);
		CHECK_EQ(publish(&fixture, NULL, stage, &infos[round], NULL), 0);
		table_stage_free(stage);
	}
	struct buf first, second;
	buf_init(&first);
	buf_init(&second);
	segment_blocks(&fixture, segments[0], &first);
	segment_blocks(&fixture, segments[1], &second);
	CHECK(first.size > 0);
	CHECK_EQ(first.size, second.size);
	CHECK(memcmp(first.data, second.data, first.size) == 0);
	CHECK_EQ(infos[0].byte_size, infos[1].byte_size);
	struct buf rendered;
	buf_init(&rendered);
	CHECK_EQ(render(&fixture, &infos[1], 100000, &rendered), 0);
	CHECK_EQ(rendered.size, infos[1].byte_size);
	buf_free(&rendered);
	buf_free(&first);
	buf_free(&second);
	fixture_close(&fixture);
}

/* A row with a ~300-byte pseudo-random pad, so its fragments barely compress. */
static int stage_noisy_row(struct table_stage *stage, long number)
{
	char id[32];
	row_id(id, number);
	struct schema_row row;
	schema_row_init(&row);
	buf_append_string(&row.id, id);
	buf_printf(&row.canonical, "{\"id\":\"%s\",\"pad\":\"", id);
	uint64_t state = (uint64_t)number * 0x9e3779b97f4a7c15u + 1;
	for (int i = 0; i < 256; i++) {
		state ^= state << 13;
		state ^= state >> 7;
		state ^= state << 17;
		buf_put_u8(&row.canonical, (uint8_t)('a' + state % 26));
	}
	buf_append_string(&row.canonical, "\"}\n");
	int rc = table_stage_add(stage, &row);
	schema_row_free(&row);
	return rc;
}

/*
 * In a child limited to 2 MiB files (RLIMIT_FSIZE): stages rows until the
 * segment's writes fail. Exits 0 if an add or the seal reported -EFBIG and
 * the stage could still be freed, 1 otherwise.
 */
static void stage_into_a_full_file_system(void)
{
	signal(SIGXFSZ, SIG_IGN);
	struct fixture fixture;
	if (fixture_open(&fixture) < 0)
		_exit(2);
	struct rlimit limit = { .rlim_cur = 2u << 20, .rlim_max = RLIM_INFINITY };
	if (setrlimit(RLIMIT_FSIZE, &limit) < 0)
		_exit(2);
	struct table_stage *stage;
	if (stage_open(&fixture, TABLE_OVERWRITE, &stage) < 0)
		_exit(2);
	int rc = 0;
	long count = 4 * INLINE_LIMIT / 290;
	for (long i = 0; i < count && rc == 0; i++)
		rc = stage_noisy_row(stage, i);
	if (rc == 0)
		rc = table_stage_seal(stage);
	table_stage_free(stage);
	_exit(rc == -EFBIG ? 0 : 1);
}

TEST(a_spilled_fragment_that_cannot_be_written_fails_a_later_add_or_the_seal)
{
	fflush(NULL);
	pid_t child = fork();
	if (child == 0)
		stage_into_a_full_file_system();
	int status = 0;
	CHECK_EQ(waitpid(child, &status, 0), child);
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), 0);
}

/* ---- apply ----------------------------------------------------------------------------- */

TEST(a_sealed_stage_can_be_applied_again_after_an_abandoned_publish)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_info base, abandoned, info;
	memset(&base, 0, sizeof base);
	CHECK_EQ(write_rows(&fixture, NULL, 0, 10, &base), 0);
	struct table_stage *stage;
	CHECK_EQ(stage_open(&fixture, TABLE_MERGE, &stage), 0);
	CHECK_EQ(stage_row(stage, "r0000004", 44), 0);
	CHECK_EQ(stage_row(stage, "r0000007", -1), 0);
	CHECK_EQ(table_stage_seal(stage), 0);
	struct pager_append *append;
	struct block_address address;
	CHECK_EQ(pager_append_begin(fixture.pager, fixture.size, &append), 0);
	CHECK_EQ(table_apply(fixture.pager, append, &base, stage, (struct block_address){ 0, 0 },
			     &abandoned, &address),
		 0);
	pager_append_free(append);
	CHECK_EQ(publish(&fixture, &base, stage, &info, NULL), 0);
	table_stage_free(stage);
	CHECK_EQ(info.row_count, 9);
	char message[256];
	CHECK_EQ(table_verify(fixture.pager, &info, message, sizeof message), 0);
	struct buf line;
	buf_init(&line);
	CHECK_EQ(table_lookup(fixture.pager, &info, "r0000004", 8, &line), 0);
	CHECK(strcmp(buf_cstr(&line), "{\"id\":\"r0000004\",\"v\":44}\n") == 0);
	buf_free(&line);
	fixture_close(&fixture);
}

TEST(a_merge_can_build_on_a_version_applied_earlier_in_the_same_publish)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_info base, middle, last;
	memset(&base, 0, sizeof base);
	CHECK_EQ(write_rows(&fixture, NULL, 0, 10, &base), 0);
	struct table_stage *first_stage, *second_stage;
	CHECK_EQ(stage_open(&fixture, TABLE_MERGE, &first_stage), 0);
	CHECK_EQ(stage_row(first_stage, "r0000002", -1), 0);
	CHECK_EQ(stage_row(first_stage, "r0000003", 33), 0);
	CHECK_EQ(table_stage_seal(first_stage), 0);
	CHECK_EQ(stage_open(&fixture, TABLE_MERGE, &second_stage), 0);
	CHECK_EQ(stage_row(second_stage, "r0000004", -1), 0);
	CHECK_EQ(stage_row(second_stage, "r0000003", 333), 0);
	CHECK_EQ(table_stage_seal(second_stage), 0);
	struct pager_append *append;
	struct block_address address;
	CHECK_EQ(pager_append_begin(fixture.pager, fixture.size, &append), 0);
	CHECK_EQ(table_apply(fixture.pager, append, &base, first_stage, fixture.schema_block, &middle,
			     &address),
		 0);
	CHECK_EQ(table_apply(fixture.pager, append, &middle, second_stage, fixture.schema_block, &last,
			     &address),
		 0);
	CHECK_EQ(pager_append_write(append), 0);
	fixture.size += pager_append_size(append);
	pager_append_free(append);
	table_stage_free(first_stage);
	table_stage_free(second_stage);
	CHECK_EQ(last.table_version, 3);
	struct buf expected;
	buf_init(&expected);
	long kept[] = { 0, 1, 5, 6, 7, 8, 9 };
	for (size_t i = 0; i < 7; i++) {
		char id[32];
		row_id(id, kept[i]);
		expect_row(&expected, id, kept[i]);
	}
	expect_row(&expected, "r0000003", 333);
	CHECK(render_equals(&fixture, &last, &expected));
	char message[256];
	CHECK_EQ(table_verify(fixture.pager, &last, message, sizeof message), 0);
	buf_free(&expected);
	fixture_close(&fixture);
}

TEST(an_unsealed_stage_is_not_applied)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_stage *stage;
	CHECK_EQ(stage_open(&fixture, TABLE_OVERWRITE, &stage), 0);
	CHECK_EQ(stage_row(stage, "a", 1), 0);
	struct pager_append *append;
	struct table_info info;
	memset(&info, 0, sizeof info);
	struct block_address address;
	CHECK_EQ(pager_append_begin(fixture.pager, fixture.size, &append), 0);
	CHECK_EQ(table_apply(fixture.pager, append, NULL, stage, (struct block_address){ 0, 0 }, &info,
			     &address),
		 -EINVAL);
	pager_append_free(append);
	table_stage_free(stage);
	fixture_close(&fixture);
}

/* ---- verify ------------------------------------------------------------------------------ */

TEST(verify_is_clean_on_a_good_table)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_info info;
	memset(&info, 0, sizeof info);
	CHECK_EQ(write_rows(&fixture, NULL, 0, 20000, &info), 0);
	char message[256];
	CHECK_EQ(table_verify(fixture.pager, &info, message, sizeof message), 0);
	fixture_close(&fixture);
}

TEST(a_flipped_byte_in_a_fragment_is_eio_for_verify_and_readers)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_info info;
	memset(&info, 0, sizeof info);
	/* apply appends the fragments first: the first one starts where the manifest ended. */
	uint64_t fragment_offset = fixture.size;
	CHECK_EQ(write_rows(&fixture, NULL, 0, 100, &info), 0);
	uint8_t byte;
	CHECK_EQ(io_pread(&fixture.manifest, &byte, 1, fragment_offset + 40), 0);
	byte ^= 0x10;
	CHECK_EQ(io_pwrite(&fixture.manifest, &byte, 1, fragment_offset + 40), 0);
	char message[256];
	CHECK_EQ(table_verify(fixture.pager, &info, message, sizeof message), -EIO);
	CHECK(message[0] != 0);
	struct table_reader *reader;
	CHECK_EQ(table_reader_open(fixture.pager, &info, &reader), 0);
	uint8_t out[64];
	CHECK_EQ(table_reader_pread(reader, out, sizeof out, 0), -EIO);
	table_reader_free(reader);
	struct buf line;
	buf_init(&line);
	CHECK_EQ(table_lookup(fixture.pager, &info, "r0000001", 8, &line), -EIO);
	buf_free(&line);
	fixture_close(&fixture);
}

TEST(verify_reports_a_table_version_whose_counts_disagree_with_its_fragments)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_info info;
	memset(&info, 0, sizeof info);
	CHECK_EQ(write_rows(&fixture, NULL, 0, 10, &info), 0);
	info.row_count++;
	char message[256];
	CHECK_EQ(table_verify(fixture.pager, &info, message, sizeof message), -EIO);
	CHECK(strstr(message, "rows") != NULL);
	info.row_count--;
	info.byte_size--;
	struct table_reader *reader;
	CHECK_EQ(table_reader_open(fixture.pager, &info, &reader), -EIO);
	fixture_close(&fixture);
}

/*
 * Rebuilds info's key tree from its entries, with each value changed by
 * damage (NULL: none), leaving out the entry of skip and adding the entry
 * extra (NULL: none) with the value of the first entry. Appends the tree.
 */
static int rebuild_keys(struct fixture *fixture, struct table_info *info, void (*damage)(uint8_t *value, size_t index),
			const char *skip, const char *extra)
{
	struct btree *keys;
	struct btree_iterator *iterator;
	struct pager_append *append;
	struct btree_builder *builder;
	int rc = btree_open_layout(fixture->pager, info->keys, BTREE_PACKED, &keys);
	if (rc < 0)
		return rc;
	if ((rc = btree_iterator_open(keys, NULL, 0, &iterator)) < 0 ||
	    (rc = pager_append_begin(fixture->pager, fixture->size, &append)) < 0 ||
	    (rc = btree_builder_open_layout(append, BTREE_PACKED, &builder)) < 0)
		return rc;
	const uint8_t *key, *value;
	size_t key_size, value_size, index = 0;
	uint8_t first[64];
	while ((rc = btree_iterator_next(iterator, &key, &key_size, &value, &value_size)) == 1) {
		uint8_t changed[64];
		memcpy(changed, value, value_size);
		if (index == 0)
			memcpy(first, value, value_size);
		if (damage)
			damage(changed, index);
		index++;
		if (skip && key_size == strlen(skip) && memcmp(key, skip, key_size) == 0)
			continue;
		if ((rc = btree_builder_add(builder, key, key_size, changed, value_size)) < 0)
			return rc;
	}
	if (extra && (rc = btree_builder_add(builder, extra, strlen(extra), first, value_size)) < 0)
		return rc;
	btree_iterator_free(iterator);
	btree_free(keys);
	if ((rc = btree_builder_finish(builder, &info->keys)) < 0)
		return rc;
	uint64_t size = pager_append_size(append);
	rc = pager_append_write(append);
	pager_append_free(append);
	fixture->size += size;
	return rc;
}

/* Swaps the row indexes of the second and third entries (bytes 8..11 of a key value). */
static void swap_rows_two_and_three(uint8_t *value, size_t index)
{
	if (index == 1 || index == 2)
		value[8] = (uint8_t)(index == 1 ? 2 : 1);
}

TEST(verify_names_a_live_row_whose_key_entry_points_at_another_row)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_info info;
	memset(&info, 0, sizeof info);
	CHECK_EQ(write_rows(&fixture, NULL, 0, 10, &info), 0);
	char message[256];
	CHECK_EQ(table_verify(fixture.pager, &info, message, sizeof message), 0);
	CHECK_EQ(rebuild_keys(&fixture, &info, swap_rows_two_and_three, NULL, NULL), 0);
	CHECK_EQ(table_verify(fixture.pager, &info, message, sizeof message), -EIO);
	CHECK(strstr(message, "live row 1 of fragment 0") != NULL && strstr(message, "points elsewhere") != NULL);
	fixture_close(&fixture);
}

TEST(verify_reports_a_live_row_missing_from_the_key_tree_and_a_key_entry_of_no_row)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_info info, missing, stray;
	memset(&info, 0, sizeof info);
	CHECK_EQ(write_rows(&fixture, NULL, 0, 10, &info), 0);
	missing = info;
	CHECK_EQ(rebuild_keys(&fixture, &missing, NULL, "r0000004", NULL), 0);
	char message[256];
	CHECK_EQ(table_verify(fixture.pager, &missing, message, sizeof message), -EIO);
	CHECK(strstr(message, "live row 4 of fragment 0 has no key tree entry") != NULL);
	stray = info;
	CHECK_EQ(rebuild_keys(&fixture, &stray, NULL, NULL, "r9999999"), 0);
	CHECK_EQ(table_verify(fixture.pager, &stray, message, sizeof message), -EIO);
	CHECK(strstr(message, "11 entries for 10 live rows") != NULL);
	fixture_close(&fixture);
}

/* ---- membership --------------------------------------------------------------------------- */

TEST(a_finder_answers_membership_exactly_before_and_after_it_loads_the_id_set)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_info info;
	memset(&info, 0, sizeof info);
	CHECK_EQ(write_rows(&fixture, NULL, 0, 20000, &info), 0);
	struct table_finder *finder;
	CHECK_EQ(table_finder_open(fixture.pager, &info, 1u << 20, &finder), 0);
	uint64_t state = 12345;
	uint64_t pages_before_last = 0;
	for (int step = 0; step < 12000; step++) {
		state = state * 6364136223846793005ull + 1442695040888963407ull;
		long number = (long)((state >> 33) % 40000);   /* half of them are not rows */
		char id[32];
		row_id(id, number);
		if (step == 11000) {
			io_counters_reset();
		}
		CHECK_EQ(table_finder_has(finder, id, strlen(id)), number < 20000 ? 1 : 0);
		if (step == 11999) {
			struct io_counters manifest;
			io_counters_get(IO_MANIFEST, &manifest);
			pages_before_last = manifest.pages;
		}
	}
	/* past 1/16 of the rows asked the id set answers: no more tree reads */
	CHECK_EQ(pages_before_last, 0);
	CHECK_EQ(table_finder_has(finder, "r", 1), 0);
	CHECK_EQ(table_finder_has(finder, "r00199990", 9), 0);
	table_finder_free(finder);
	fixture_close(&fixture);
}

/* ---- adjacency indexes (docs/FORMAT.md §12.1) ------------------------------------------ */

#define GRAPH_NODES 60
#define GRAPH_EDGES 5000   /* edge slots; tests use the first `used` of them */

static uint64_t graph_random_state = 0x9E3779B97F4A7C15ull;

static uint64_t random_next(void)
{
	graph_random_state ^= graph_random_state << 13;
	graph_random_state ^= graph_random_state >> 7;
	graph_random_state ^= graph_random_state << 17;
	return graph_random_state;
}

/* A model edge table: edge i is live when from[i] >= 0 (edge_model_clear: none). */
struct edge_model {
	int from[GRAPH_EDGES], to[GRAPH_EDGES];
	long value[GRAPH_EDGES];
};

static void edge_id(char out[32], int edge)
{
	snprintf(out, 32, "e/%04d", edge);
}

static void edge_model_clear(struct edge_model *model)
{
	for (int e = 0; e < GRAPH_EDGES; e++)
		model->from[e] = -1;
}

static void node_id(char out[32], int node)
{
	/* ids with a common prefix, one a prefix of others, and one that needs a JSON escape */
	if (node == 7)
		snprintf(out, 32, "n\"q");
	else
		snprintf(out, 32, "n%d", node);
}

/* Stages edge `edge` from -> to (from < 0: a delete) with a wide or narrow line. */
static int stage_edge(struct table_stage *stage, int edge, int from, int to, long value, bool wide)
{
	struct schema_row row;
	schema_row_init(&row);
	char id[32], from_id[32], to_id[32];
	edge_id(id, edge);
	buf_append_string(&row.id, id);
	if (from < 0) {
		row.is_delete = true;
	} else {
		node_id(from_id, from);
		node_id(to_id, to);
		buf_append_string(&row.from, from_id);
		buf_append_string(&row.to, to_id);
		const char *from_json = from == 7 ? "n\\\"q" : from_id, *to_json = to == 7 ? "n\\\"q" : to_id;
		buf_printf(&row.canonical, "{\"id\":\"%s\",\"from\":\"%s\",\"to\":\"%s\",\"v\":%ld%s%.*s%s}\n", id,
			   from_json, to_json, value, wide ? ",\"pad\":\"" : "", wide ? 900 : 0,
			   "................................................................................................"
			   "................................................................................................"
			   "................................................................................................"
			   "................................................................................................"
			   "................................................................................................"
			   "................................................................................................"
			   "................................................................................................"
			   "................................................................................................"
			   "................................................................................................"
			   "................................................................................................",
			   wide ? "\"" : "");
	}
	int rc = table_stage_add(stage, &row);
	schema_row_free(&row);
	return rc;
}

/* Every node's edges at both ends, listed through the indexes, equal the model's. */
static int adjacency_equals_model(struct fixture *fixture, const struct table_info *info,
				  const struct edge_model *model)
{
	int rc = 0;
	for (int end = TABLE_EDGE_FROM; end <= TABLE_EDGE_TO && rc == 0; end++) {
		struct table_adjacency *adjacency;
		if ((rc = table_adjacency_open(fixture->pager, info, (enum table_edge_end)end, 1u << 20, &adjacency)) < 0)
			return rc;
		for (int node = 0; node < GRAPH_NODES && rc == 0; node++) {
			char id[32];
			node_id(id, node);
			int expected[GRAPH_EDGES], expected_count = 0;
			for (int e = 0; e < GRAPH_EDGES; e++)
				if (model->from[e] >= 0 && (end == TABLE_EDGE_FROM ? model->from[e] : model->to[e]) == node)
					expected[expected_count++] = e;   /* edge ids sort as their numbers */
			char after[32] = "";
			bool first = true;
			for (int k = 0;; k++) {
				const uint8_t *edge, *other;
				size_t edge_size, other_size;
				int more = table_adjacency_next(adjacency, id, strlen(id), first ? NULL : after, strlen(after),
								&edge, &edge_size, &other, &other_size);
				if (more < 0) {
					rc = more;
					break;
				}
				if (more == 0) {
					if (k != expected_count)
						rc = -EDOM;
					break;
				}
				char want[32], other_want[32];
				if (k >= expected_count) {
					rc = -EDOM;
					break;
				}
				edge_id(want, expected[k]);
				node_id(other_want, end == TABLE_EDGE_FROM ? model->to[expected[k]] : model->from[expected[k]]);
				if (edge_size != strlen(want) || memcmp(edge, want, edge_size) != 0 ||
				    other_size != strlen(other_want) || memcmp(other, other_want, other_size) != 0) {
					rc = -EDOM;
					break;
				}
				snprintf(after, sizeof after, "%s", want);
				first = false;
			}
		}
		table_adjacency_free(adjacency);
	}
	return rc;
}

static const char edge_schema_text[] =
	"{\"kind\":\"edge\",\"from\":\"N\",\"to\":\"N\",\"properties\":{\"v\":{\"type\":\"i64\"},"
	"\"pad\":{\"type\":\"string\",\"nullable\":true}}}";

static int open_edge_stage(struct fixture *fixture, enum table_write_mode mode, struct table_stage **out)
{
	int rc = stage_open(fixture, mode, out);
	if (rc == 0 && (rc = table_stage_track_edges(*out)) < 0)
		table_stage_free(*out);
	return rc;
}

static void random_edge(struct edge_model *model, int edge)
{
	model->from[edge] = (int)(random_next() % GRAPH_NODES);
	model->to[edge] = random_next() % 5 == 0 ? model->from[edge] : (int)(random_next() % GRAPH_NODES); /* self-loops */
	model->value[edge] = (long)(random_next() % 1000);
}

TEST(an_edge_overwrite_indexes_every_edge_by_from_and_by_to)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	CHECK_EQ(append_schema_text(&fixture, edge_schema_text), 0);
	static struct edge_model model;
	edge_model_clear(&model);
	struct table_stage *stage;
	CHECK_EQ(open_edge_stage(&fixture, TABLE_OVERWRITE, &stage), 0);
	for (int e = 0; e < 400; e++) {
		random_edge(&model, e);
		CHECK_EQ(stage_edge(stage, e, model.from[e], model.to[e], model.value[e], false), 0);
	}
	struct table_info info;
	memset(&info, 0, sizeof info);
	CHECK_EQ(publish(&fixture, NULL, stage, &info, NULL), 0);
	table_stage_free(stage);
	CHECK(!block_address_is_null(info.out_edges) && !block_address_is_null(info.in_edges));
	CHECK_EQ(adjacency_equals_model(&fixture, &info, &model), 0);
	char message[256];
	CHECK_EQ(table_verify(fixture.pager, &info, message, sizeof message), 0);
	fixture_close(&fixture);
}

TEST(random_edge_merges_keep_both_indexes_equal_to_a_model_in_every_version)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	CHECK_EQ(append_schema_text(&fixture, edge_schema_text), 0);
	static struct edge_model models[12], model;
	struct table_info versions[12];
	edge_model_clear(&model);
	struct table_info base;
	memset(&base, 0, sizeof base);
	for (int round = 0; round < 12; round++) {
		struct table_stage *stage;
		CHECK_EQ(open_edge_stage(&fixture, TABLE_MERGE, &stage), 0);
		for (int change = 0; change < 80; change++) {
			int e = (int)(random_next() % 400);
			if (random_next() % 4 == 0) {
				model.from[e] = -1;
				CHECK_EQ(stage_edge(stage, e, -1, 0, 0, false), 0);
			} else {
				random_edge(&model, e);   /* new, or moved to other endpoints */
				CHECK_EQ(stage_edge(stage, e, model.from[e], model.to[e], model.value[e], false), 0);
			}
		}
		struct table_info info;
		memset(&info, 0, sizeof info);
		CHECK_EQ(publish(&fixture, round == 0 ? NULL : &base, stage, &info, NULL), 0);
		table_stage_free(stage);
		CHECK_EQ(adjacency_equals_model(&fixture, &info, &model), 0);
		char message[256];
		CHECK_EQ(table_verify(fixture.pager, &info, message, sizeof message), 0);
		models[round] = model;
		versions[round] = info;
		base = info;
	}
	/* every old version keeps its own indexes */
	for (int round = 0; round < 12; round++)
		CHECK_EQ(adjacency_equals_model(&fixture, &versions[round], &models[round]), 0);
	fixture_close(&fixture);
}

TEST(a_spilled_edge_overwrite_builds_its_indexes_into_its_segment)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	CHECK_EQ(append_schema_text(&fixture, edge_schema_text), 0);
	static struct edge_model model;
	edge_model_clear(&model);
	struct table_stage *stage;
	CHECK_EQ(open_edge_stage(&fixture, TABLE_OVERWRITE, &stage), 0);
	/* wide lines (about 960 bytes): past the inline limit, so the stage spills */
	for (int e = 0; e < GRAPH_EDGES; e++) {
		random_edge(&model, e);
		CHECK_EQ(stage_edge(stage, e, model.from[e], model.to[e], model.value[e], true), 0);
	}
	CHECK(table_stage_segment(stage) != 0);
	struct table_info info;
	memset(&info, 0, sizeof info);
	CHECK_EQ(publish(&fixture, NULL, stage, &info, NULL), 0);
	table_stage_free(stage);
	CHECK_EQ(adjacency_equals_model(&fixture, &info, &model), 0);
	CHECK(info.out_edges.segment != 0 && info.in_edges.segment != 0);
	char message[256];
	CHECK_EQ(table_verify(fixture.pager, &info, message, sizeof message), 0);
	fixture_close(&fixture);
}

TEST(a_large_edge_merge_in_runs_keeps_both_indexes_equal_to_a_model)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	CHECK_EQ(append_schema_text(&fixture, edge_schema_text), 0);
	static struct edge_model model;
	edge_model_clear(&model);
	struct table_stage *stage;
	CHECK_EQ(open_edge_stage(&fixture, TABLE_OVERWRITE, &stage), 0);
	for (int e = 0; e < GRAPH_EDGES; e += 2) {
		random_edge(&model, e);
		CHECK_EQ(stage_edge(stage, e, model.from[e], model.to[e], model.value[e], true), 0);
	}
	struct table_info base, merged;
	memset(&base, 0, sizeof base);
	CHECK_EQ(publish(&fixture, NULL, stage, &base, NULL), 0);
	table_stage_free(stage);
	/* a spilled merge in runs as large as the table: applied in one streaming pass */
	CHECK_EQ(open_edge_stage(&fixture, TABLE_MERGE, &stage), 0);
	table_stage_set_run_entries(stage, 700);
	for (int step = 0; step < 2 * GRAPH_EDGES; step++) {
		int e = (int)(random_next() % GRAPH_EDGES);
		if (random_next() % 3 == 0) {
			model.from[e] = -1;
			CHECK_EQ(stage_edge(stage, e, -1, 0, 0, true), 0);
		} else {
			random_edge(&model, e);
			CHECK_EQ(stage_edge(stage, e, model.from[e], model.to[e], model.value[e], true), 0);
		}
	}
	CHECK(table_stage_segment(stage) != 0);
	memset(&merged, 0, sizeof merged);
	CHECK_EQ(publish(&fixture, &base, stage, &merged, NULL), 0);
	table_stage_free(stage);
	CHECK_EQ(adjacency_equals_model(&fixture, &merged, &model), 0);
	char message[256];
	CHECK_EQ(table_verify(fixture.pager, &merged, message, sizeof message), 0);
	fixture_close(&fixture);
}

TEST(an_edge_merge_that_deletes_every_edge_leaves_no_indexes)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	CHECK_EQ(append_schema_text(&fixture, edge_schema_text), 0);
	struct table_stage *stage;
	CHECK_EQ(open_edge_stage(&fixture, TABLE_MERGE, &stage), 0);
	CHECK_EQ(stage_edge(stage, 1, 2, 3, 4, false), 0);
	CHECK_EQ(stage_edge(stage, 2, 3, 3, 4, false), 0);
	struct table_info first, second;
	memset(&first, 0, sizeof first);
	CHECK_EQ(publish(&fixture, NULL, stage, &first, NULL), 0);
	table_stage_free(stage);
	CHECK_EQ(open_edge_stage(&fixture, TABLE_MERGE, &stage), 0);
	CHECK_EQ(stage_edge(stage, 1, -1, 0, 0, false), 0);
	CHECK_EQ(stage_edge(stage, 2, -1, 0, 0, false), 0);
	CHECK_EQ(publish(&fixture, &first, stage, &second, NULL), 0);
	table_stage_free(stage);
	CHECK_EQ(second.row_count, 0);
	CHECK(block_address_is_null(second.out_edges) && block_address_is_null(second.in_edges));
	char message[256];
	CHECK_EQ(table_verify(fixture.pager, &second, message, sizeof message), 0);
	fixture_close(&fixture);
}

TEST(an_edge_table_version_without_its_indexes_fails_verify)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	CHECK_EQ(append_schema_text(&fixture, edge_schema_text), 0);
	struct table_stage *stage;
	CHECK_EQ(open_edge_stage(&fixture, TABLE_MERGE, &stage), 0);
	CHECK_EQ(stage_edge(stage, 1, 2, 3, 4, false), 0);
	struct table_info info;
	memset(&info, 0, sizeof info);
	CHECK_EQ(publish(&fixture, NULL, stage, &info, NULL), 0);
	table_stage_free(stage);
	char message[256];
	struct table_info swapped = info;
	swapped.out_edges = info.in_edges;   /* the in index where the out index belongs */
	CHECK_EQ(table_verify(fixture.pager, &swapped, message, sizeof message), -EIO);
	CHECK(strstr(message, "out index") != NULL);
	struct table_info missing = info;
	missing.out_edges = missing.in_edges = (struct block_address){ 0, 0 };
	CHECK_EQ(table_verify(fixture.pager, &missing, message, sizeof message), -EIO);
	CHECK(strstr(message, "adjacency") != NULL);
	fixture_close(&fixture);
}

TEST(a_stage_tracking_edges_refuses_a_row_without_endpoints_and_a_node_stage_cannot_apply_on_an_edge_version)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct table_stage *stage;
	CHECK_EQ(open_edge_stage(&fixture, TABLE_MERGE, &stage), 0);
	CHECK_EQ(stage_row(stage, "x", 1), -EINVAL);
	CHECK_EQ(stage_edge(stage, 1, 2, 3, 4, false), 0);
	struct table_info info, next;
	memset(&info, 0, sizeof info);
	CHECK_EQ(publish(&fixture, NULL, stage, &info, NULL), 0);
	table_stage_free(stage);
	CHECK_EQ(stage_open(&fixture, TABLE_MERGE, &stage), 0);
	CHECK_EQ(stage_row(stage, "x", 1), 0);
	CHECK_EQ(publish(&fixture, &info, stage, &next, NULL), -EINVAL);
	table_stage_free(stage);
	fixture_close(&fixture);
}

int main(void)
{
	return harness_run();
}
