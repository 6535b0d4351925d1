/* journal: head rows, commit records and their JSON renderings. */
#include "harness.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "journal.h"

static const char stable_text[] = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
static const char incarnation_text[] = "01BX5ZZKBKACTAV9WEVGEMMVRZ";
static const char commit_text[] = "01HZZZZZZZZZZZZZZZZZZZZZZZ";
static const char parent_text[] = "01HAAAAAAAAAAAAAAAAAAAAAAA";
static const char other_parent_text[] = "01HBBBBBBBBBBBBBBBBBBBBBBB";

/* 2026-11-30T12:00:00.123456Z */
#define SAMPLE_TIME_US (1796040000ull * 1000000ull + 123456ull)

static void sample_head(struct head_row *head)
{
	memset(head, 0, sizeof *head);
	head->state = HEAD_LIVE;
	ulid_parse(stable_text, &head->stable_id);
	ulid_parse(incarnation_text, &head->incarnation);
	strcpy(head->name, "Person");
	head->table_version = 7;
	head->row_count = 1234;
	head->byte_size = 56789;
	strcpy(head->schema_hash, "0123456789abcdef");
	head->kind = 1;
	ulid_parse(commit_text, &head->commit);
	head->commit_time_us = SAMPLE_TIME_US;
	head->table.segment = 3;
	head->table.offset = 12288;
}

static int heads_equal(const struct head_row *a, const struct head_row *b)
{
	return a->state == b->state && a->kind == b->kind &&
	       memcmp(&a->stable_id, &b->stable_id, 16) == 0 &&
	       memcmp(&a->incarnation, &b->incarnation, 16) == 0 && strcmp(a->name, b->name) == 0 &&
	       a->table_version == b->table_version && strcmp(a->owner, b->owner) == 0 &&
	       a->row_count == b->row_count && a->byte_size == b->byte_size &&
	       strcmp(a->schema_hash, b->schema_hash) == 0 &&
	       memcmp(&a->commit, &b->commit, 16) == 0 && a->commit_time_us == b->commit_time_us &&
	       a->table.segment == b->table.segment && a->table.offset == b->table.offset;
}

/* A commit with two parents, a rename, a drop and a long message. Caller frees. */
static void sample_commit(struct commit_record *record, size_t message_size)
{
	journal_commit_record_init(record);
	record->version = 42;
	ulid_parse(commit_text, &record->id);
	strcpy(record->branch, "feature");
	record->parent_count = 2;
	ulid_parse(parent_text, &record->parents[0]);
	ulid_parse(other_parent_text, &record->parents[1]);
	record->parent_records[0] = (struct block_address){ 0, 20000 };
	record->parent_records[1] = (struct block_address){ 0, 30000 };
	record->time_us = SAMPLE_TIME_US;
	record->actor = strdup("alice");
	record->message = malloc(message_size + 1);
	for (size_t i = 0; i < message_size; i++)
		record->message[i] = (char)('a' + i % 26);
	record->message[message_size] = 0;
	record->change_count = 3;
	record->changes = calloc(3, sizeof *record->changes);
	record->changes[0].op = CHANGE_MERGE;
	record->changes[0].rows = 5;
	sample_head(&record->changes[0].head_after);
	record->changes[1].op = CHANGE_RENAME;
	strcpy(record->changes[1].previous_name, "Old");
	sample_head(&record->changes[1].head_after);
	strcpy(record->changes[1].head_after.name, "New");
	strcpy(record->changes[1].head_after.owner, "feature");
	record->changes[2].op = CHANGE_DROP;
	sample_head(&record->changes[2].head_after);
	record->changes[2].head_after.state = HEAD_TOMBSTONED;
	record->changes[2].head_after.row_count = 0;
	strcpy(record->changes[2].head_after.name, "Gone");
}

static int commits_equal(const struct commit_record *a, const struct commit_record *b)
{
	if (a->version != b->version || memcmp(&a->id, &b->id, 16) != 0 ||
	    strcmp(a->branch, b->branch) != 0 || a->parent_count != b->parent_count ||
	    a->time_us != b->time_us || strcmp(a->actor, b->actor) != 0 ||
	    strcmp(a->message, b->message) != 0 || a->change_count != b->change_count ||
	    a->based_on != b->based_on)
		return 0;
	for (size_t i = 0; i < a->parent_count; i++)
		if (memcmp(&a->parents[i], &b->parents[i], 16) != 0 ||
		    a->parent_records[i].segment != b->parent_records[i].segment ||
		    a->parent_records[i].offset != b->parent_records[i].offset)
			return 0;
	for (size_t i = 0; i < a->change_count; i++)
		if (a->changes[i].op != b->changes[i].op || a->changes[i].rows != b->changes[i].rows ||
		    strcmp(a->changes[i].previous_name, b->changes[i].previous_name) != 0 ||
		    !heads_equal(&a->changes[i].head_after, &b->changes[i].head_after))
			return 0;
	return 1;
}

/* ---- head rows ------------------------------------------------------------------ */

TEST(a_head_row_round_trips_through_its_encoding)
{
	struct head_row head, decoded;
	sample_head(&head);
	strcpy(head.owner, "feature");
	struct buf encoded;
	buf_init(&encoded);
	CHECK_EQ(journal_head_row_encode(&head, &encoded), 0);
	CHECK_EQ(journal_head_row_decode(encoded.data, encoded.size, &decoded), 0);
	CHECK(heads_equal(&head, &decoded));
	buf_free(&encoded);
}

TEST(a_head_row_size_does_not_depend_on_its_numbers)
{
	struct head_row small, large;
	sample_head(&small);
	sample_head(&large);
	small.table_version = 1;
	small.row_count = 0;
	large.table_version = UINT64_MAX;
	large.row_count = UINT64_MAX;
	struct buf a, b;
	buf_init(&a);
	buf_init(&b);
	CHECK_EQ(journal_head_row_encode(&small, &a), 0);
	CHECK_EQ(journal_head_row_encode(&large, &b), 0);
	CHECK_EQ(a.size, b.size);
	buf_free(&a);
	buf_free(&b);
}

TEST(a_head_row_with_an_unknown_state_is_corruption)
{
	struct head_row head, decoded;
	sample_head(&head);
	struct buf encoded;
	buf_init(&encoded);
	CHECK_EQ(journal_head_row_encode(&head, &encoded), 0);
	uint8_t states[] = { 0, 3, 255 };
	for (size_t i = 0; i < sizeof states; i++) {
		encoded.data[0] = states[i];
		CHECK_EQ(journal_head_row_decode(encoded.data, encoded.size, &decoded), -EIO);
	}
	buf_free(&encoded);
}

TEST(a_truncated_head_row_is_corruption)
{
	struct head_row head, decoded;
	sample_head(&head);
	struct buf encoded;
	buf_init(&encoded);
	CHECK_EQ(journal_head_row_encode(&head, &encoded), 0);
	for (size_t size = 0; size < encoded.size; size++) {
		uint8_t *copy = malloc(size ? size : 1);
		memcpy(copy, encoded.data, size);
		CHECK_EQ(journal_head_row_decode(copy, size, &decoded), -EIO);
		free(copy);
	}
	buf_free(&encoded);
}

TEST(a_head_row_with_trailing_bytes_is_corruption)
{
	struct head_row head, decoded;
	sample_head(&head);
	struct buf encoded;
	buf_init(&encoded);
	CHECK_EQ(journal_head_row_encode(&head, &encoded), 0);
	CHECK_EQ(buf_put_u8(&encoded, 0), 0);
	CHECK_EQ(journal_head_row_decode(encoded.data, encoded.size, &decoded), -EIO);
	buf_free(&encoded);
}

TEST(a_head_row_with_a_non_hex_schema_hash_is_corruption)
{
	struct head_row head, decoded;
	sample_head(&head);
	struct buf encoded;
	buf_init(&encoded);
	CHECK_EQ(journal_head_row_encode(&head, &encoded), 0);
	/* The hash sits 16 + 16 + 8 bytes of numbers after the two strings. */
	size_t hash_at = 4 + 16 + 16 + 2 + strlen(head.name) + 8 + 2 + 8 + 8;
	CHECK(memcmp(encoded.data + hash_at, head.schema_hash, 16) == 0);
	encoded.data[hash_at] = '"';
	CHECK_EQ(journal_head_row_decode(encoded.data, encoded.size, &decoded), -EIO);
	buf_free(&encoded);
}

TEST(a_head_row_that_could_not_be_decoded_is_not_encoded)
{
	struct head_row head;
	struct buf encoded;
	buf_init(&encoded);
	sample_head(&head);
	head.state = 0;
	CHECK_EQ(journal_head_row_encode(&head, &encoded), -EINVAL);
	sample_head(&head);
	head.kind = 2;
	CHECK_EQ(journal_head_row_encode(&head, &encoded), -EINVAL);
	sample_head(&head);
	strcpy(head.schema_hash, "0123456789ABCDEF");
	CHECK_EQ(journal_head_row_encode(&head, &encoded), -EINVAL);
	CHECK_EQ(encoded.size, 0);
	buf_free(&encoded);
}

TEST(a_live_head_renders_as_the_exact_head_file_text)
{
	struct head_row head;
	sample_head(&head);
	struct buf json;
	buf_init(&json);
	CHECK_EQ(journal_head_row_render_json(&head, &json), 0);
	const char *expected =
		"{\"state\":\"live\",\"stable_table_id\":\"01ARZ3NDEKTSV4RRFFQ69G5FAV\","
		"\"incarnation_id\":\"01BX5ZZKBKACTAV9WEVGEMMVRZ\",\"table_key\":\"Person\","
		"\"table_version\":7,\"table_branch\":null,\"row_count\":1234,"
		"\"schema_hash\":\"0123456789abcdef\","
		"\"head_graph_commit_id\":\"01HZZZZZZZZZZZZZZZZZZZZZZZ\"}\n";
	CHECK(strcmp(buf_cstr(&json), expected) == 0);
	buf_free(&json);
}

TEST(a_tombstoned_head_on_a_branch_renders_null_rows_and_its_owner)
{
	struct head_row head;
	sample_head(&head);
	head.state = HEAD_TOMBSTONED;
	strcpy(head.owner, "dev");
	memset(&head.commit, 0, sizeof head.commit);
	struct buf json;
	buf_init(&json);
	CHECK_EQ(journal_head_row_render_json(&head, &json), 0);
	const char *expected =
		"{\"state\":\"tombstoned\",\"stable_table_id\":\"01ARZ3NDEKTSV4RRFFQ69G5FAV\","
		"\"incarnation_id\":\"01BX5ZZKBKACTAV9WEVGEMMVRZ\",\"table_key\":\"Person\","
		"\"table_version\":7,\"table_branch\":\"dev\",\"row_count\":null,"
		"\"schema_hash\":\"0123456789abcdef\",\"head_graph_commit_id\":null}\n";
	CHECK(strcmp(buf_cstr(&json), expected) == 0);
	buf_free(&json);
}

/* ---- commit records ------------------------------------------------------------ */

TEST(a_commit_record_with_renames_two_parents_and_a_long_message_round_trips)
{
	struct commit_record record, decoded;
	sample_commit(&record, 200000);
	struct buf encoded;
	buf_init(&encoded);
	CHECK_EQ(journal_commit_record_encode(&record, FILE_FORMAT_VERSION, &encoded), 0);
	CHECK_EQ(journal_commit_record_decode(encoded.data, encoded.size, FILE_FORMAT_VERSION, &decoded), 0);
	CHECK(commits_equal(&record, &decoded));
	journal_commit_record_free(&decoded);
	journal_commit_record_free(&record);
	buf_free(&encoded);
}

TEST(a_first_commit_without_parents_or_changes_round_trips)
{
	struct commit_record record, decoded;
	journal_commit_record_init(&record);
	record.version = 1;
	ulid_parse(commit_text, &record.id);
	strcpy(record.branch, "main");
	struct buf encoded;
	buf_init(&encoded);
	CHECK_EQ(journal_commit_record_encode(&record, FILE_FORMAT_VERSION, &encoded), 0);
	CHECK_EQ(journal_commit_record_decode(encoded.data, encoded.size, FILE_FORMAT_VERSION, &decoded), 0);
	CHECK_EQ(decoded.parent_count, 0);
	CHECK_EQ(decoded.change_count, 0);
	CHECK(strcmp(decoded.actor, "") == 0);
	CHECK(strcmp(decoded.message, "") == 0);
	CHECK(strcmp(decoded.branch, "main") == 0);
	journal_commit_record_free(&decoded);
	buf_free(&encoded);
}

TEST(every_truncation_of_a_commit_record_is_corruption)
{
	struct commit_record record, decoded;
	sample_commit(&record, 10);
	struct buf encoded;
	buf_init(&encoded);
	CHECK_EQ(journal_commit_record_encode(&record, FILE_FORMAT_VERSION, &encoded), 0);
	for (size_t size = 0; size < encoded.size; size++) {
		uint8_t *copy = malloc(size ? size : 1);
		memcpy(copy, encoded.data, size);
		CHECK_EQ(journal_commit_record_decode(copy, size, FILE_FORMAT_VERSION, &decoded), -EIO);
		CHECK(decoded.changes == NULL && decoded.actor == NULL);
		free(copy);
	}
	journal_commit_record_free(&record);
	buf_free(&encoded);
}

TEST(a_commit_record_with_more_than_two_parents_is_corruption)
{
	struct commit_record record, decoded;
	sample_commit(&record, 10);
	struct buf encoded;
	buf_init(&encoded);
	CHECK_EQ(journal_commit_record_encode(&record, FILE_FORMAT_VERSION, &encoded), 0);
	size_t parent_count_at = 8 + 16 + 2 + strlen(record.branch) + 8;
	CHECK_EQ(encoded.data[parent_count_at], 2);
	encoded.data[parent_count_at] = 3;
	CHECK_EQ(journal_commit_record_decode(encoded.data, encoded.size, FILE_FORMAT_VERSION, &decoded), -EIO);
	journal_commit_record_free(&record);
	buf_free(&encoded);
}

TEST(a_commit_record_claiming_billions_of_changes_is_refused_without_allocating)
{
	struct commit_record record, decoded;
	journal_commit_record_init(&record);
	strcpy(record.branch, "main");
	struct buf encoded;
	buf_init(&encoded);
	CHECK_EQ(journal_commit_record_encode(&record, 6, &encoded), 0);
	/* The change count is the last field of a format-6 record without changes. */
	buf_store_u32(encoded.data + encoded.size - 4, 0xffffffffu);
	CHECK_EQ(journal_commit_record_decode(encoded.data, encoded.size, 6, &decoded), -EIO);
	buf_free(&encoded);
}

TEST(a_commit_record_with_an_unknown_change_op_is_corruption)
{
	struct commit_record record, decoded;
	journal_commit_record_init(&record);
	strcpy(record.branch, "main");
	record.change_count = 1;
	record.changes = calloc(1, sizeof *record.changes);
	record.changes[0].op = CHANGE_MERGE;
	sample_head(&record.changes[0].head_after);
	struct buf encoded;
	buf_init(&encoded);
	CHECK_EQ(journal_commit_record_encode(&record, FILE_FORMAT_VERSION, &encoded), 0);
	size_t op_at = 8 + 16 + 2 + 4 + 8 + 1 + 2 + 4 + 4;
	CHECK_EQ(encoded.data[op_at], CHANGE_MERGE);
	encoded.data[op_at] = 0;
	CHECK_EQ(journal_commit_record_decode(encoded.data, encoded.size, FILE_FORMAT_VERSION, &decoded), -EIO);
	encoded.data[op_at] = CHANGE_OPTIMIZE + 1;
	CHECK_EQ(journal_commit_record_decode(encoded.data, encoded.size, FILE_FORMAT_VERSION, &decoded), -EIO);
	journal_commit_record_free(&record);
	buf_free(&encoded);
}

TEST(a_commit_record_with_trailing_bytes_is_corruption)
{
	struct commit_record record, decoded;
	sample_commit(&record, 10);
	struct buf encoded;
	buf_init(&encoded);
	CHECK_EQ(journal_commit_record_encode(&record, FILE_FORMAT_VERSION, &encoded), 0);
	CHECK_EQ(buf_put_u8(&encoded, 0), 0);
	CHECK_EQ(journal_commit_record_decode(encoded.data, encoded.size, FILE_FORMAT_VERSION, &decoded), -EIO);
	journal_commit_record_free(&record);
	buf_free(&encoded);
}

TEST(a_based_commit_record_keeps_its_base_version_and_its_log_line_says_based_on)
{
	struct commit_record record, decoded;
	sample_commit(&record, 10);
	record.based_on = 17;
	struct buf encoded, line;
	buf_init(&encoded);
	buf_init(&line);
	CHECK_EQ(journal_commit_record_encode(&record, 7, &encoded), 0);
	CHECK_EQ(journal_commit_record_decode(encoded.data, encoded.size, 7, &decoded), 0);
	CHECK(commits_equal(&record, &decoded));
	CHECK_EQ(journal_commit_record_render_json(&decoded, &line), 0);
	CHECK(strstr(buf_cstr(&line), "\"message\":\"abcdefghij\",\"based_on\":17,\"changes\":[") != NULL);
	journal_commit_record_free(&decoded);
	journal_commit_record_free(&record);
	buf_free(&encoded);
	buf_free(&line);
}

TEST(a_format_6_record_has_no_room_for_a_base_and_leaves_it_out)
{
	struct commit_record record, decoded;
	sample_commit(&record, 10);
	record.based_on = 17;
	struct buf six, seven;
	buf_init(&six);
	buf_init(&seven);
	CHECK_EQ(journal_commit_record_encode(&record, 6, &six), 0);
	record.based_on = 0;
	CHECK_EQ(journal_commit_record_encode(&record, 7, &seven), 0);
	CHECK_EQ(seven.size, six.size + 1);   /* format 7: an extension count of 0 */
	CHECK_EQ(journal_commit_record_decode(six.data, six.size, 6, &decoded), 0);
	CHECK_EQ(decoded.based_on, 0);
	journal_commit_record_free(&decoded);
	/* read as the other format, either is damaged */
	CHECK_EQ(journal_commit_record_decode(six.data, six.size, 7, &decoded), -EIO);
	CHECK_EQ(journal_commit_record_decode(seven.data, seven.size, 6, &decoded), -EIO);
	journal_commit_record_free(&record);
	buf_free(&six);
	buf_free(&seven);
}

TEST(an_extension_a_later_graphfs_added_is_skipped_and_a_base_not_below_the_commit_is_corruption)
{
	struct commit_record record, decoded;
	sample_commit(&record, 10);
	struct buf encoded;
	buf_init(&encoded);
	CHECK_EQ(journal_commit_record_encode(&record, 7, &encoded), 0);
	encoded.data[encoded.size - 1] = 1;   /* one extension: tag 200, 3 bytes */
	CHECK_EQ(buf_put_u8(&encoded, 200), 0);
	CHECK_EQ(buf_put_u16(&encoded, 3), 0);
	CHECK_EQ(buf_append(&encoded, "abc", 3), 0);
	CHECK_EQ(journal_commit_record_decode(encoded.data, encoded.size, 7, &decoded), 0);
	CHECK(commits_equal(&record, &decoded));
	journal_commit_record_free(&decoded);
	encoded.size--;   /* its bytes cut short */
	CHECK_EQ(journal_commit_record_decode(encoded.data, encoded.size, 7, &decoded), -EIO);

	buf_reset(&encoded);
	record.based_on = record.version;   /* a commit cannot be based on itself or later */
	CHECK_EQ(journal_commit_record_encode(&record, 7, &encoded), 0);
	CHECK_EQ(journal_commit_record_decode(encoded.data, encoded.size, 7, &decoded), -EIO);
	journal_commit_record_free(&record);
	buf_free(&encoded);
}

TEST(a_commit_record_with_a_nul_inside_its_message_is_corruption)
{
	struct commit_record record, decoded;
	sample_commit(&record, 10);
	struct buf encoded;
	buf_init(&encoded);
	CHECK_EQ(journal_commit_record_encode(&record, FILE_FORMAT_VERSION, &encoded), 0);
	uint8_t *message = memmem(encoded.data, encoded.size, record.message, 10);
	CHECK(message != NULL);
	message[3] = 0;
	CHECK_EQ(journal_commit_record_decode(encoded.data, encoded.size, FILE_FORMAT_VERSION, &decoded), -EIO);
	journal_commit_record_free(&record);
	buf_free(&encoded);
}

TEST(commit_record_decode_survives_random_corruption)
{
	struct commit_record record, decoded;
	sample_commit(&record, 50);
	struct buf encoded;
	buf_init(&encoded);
	CHECK_EQ(journal_commit_record_encode(&record, FILE_FORMAT_VERSION, &encoded), 0);
	uint8_t *copy = malloc(encoded.size);
	unsigned seed = 12345;
	for (int round = 0; round < 20000; round++) {
		memcpy(copy, encoded.data, encoded.size);
		int flips = 1 + round % 4;
		for (int i = 0; i < flips; i++) {
			seed = seed * 1103515245u + 12345u;
			size_t at = (seed >> 8) % encoded.size;
			seed = seed * 1103515245u + 12345u;
			copy[at] ^= (uint8_t)(1 + (seed >> 16) % 255);
		}
		int rc = journal_commit_record_decode(copy, encoded.size, FILE_FORMAT_VERSION, &decoded);
		CHECK(rc == 0 || rc == -EIO);
		if (rc == 0)
			journal_commit_record_free(&decoded);
	}
	free(copy);
	journal_commit_record_free(&record);
	buf_free(&encoded);
}

/* ---- log lines --------------------------------------------------------------------- */

TEST(a_log_line_is_the_exact_json_line)
{
	struct commit_record record;
	sample_commit(&record, 0);
	free(record.message);
	record.message = strdup("import people");
	record.changes[0].rows = 5;
	record.changes[1].rows = 0;
	struct buf line;
	buf_init(&line);
	CHECK_EQ(journal_commit_record_render_json(&record, &line), 0);
	const char *expected =
		"{\"version\":42,\"commit\":\"01HZZZZZZZZZZZZZZZZZZZZZZZ\","
		"\"parents\":[\"01HAAAAAAAAAAAAAAAAAAAAAAA\",\"01HBBBBBBBBBBBBBBBBBBBBBBB\"],"
		"\"branch\":\"feature\",\"time\":\"2026-11-30T12:00:00.123456Z\","
		"\"actor\":\"alice\",\"message\":\"import people\",\"changes\":["
		"{\"table\":\"Person\",\"op\":\"merge\",\"rows\":5},"
		"{\"table\":\"New\",\"from\":\"Old\",\"op\":\"rename\",\"rows\":0},"
		"{\"table\":\"Gone\",\"op\":\"drop\",\"rows\":0}]}\n";
	CHECK(strcmp(buf_cstr(&line), expected) == 0);
	journal_commit_record_free(&record);
	buf_free(&line);
}

TEST(a_log_line_of_a_first_commit_has_empty_parents_and_changes)
{
	struct commit_record record;
	journal_commit_record_init(&record);
	record.version = 1;
	ulid_parse(commit_text, &record.id);
	strcpy(record.branch, "main");
	record.time_us = 0;
	struct buf line;
	buf_init(&line);
	CHECK_EQ(journal_commit_record_render_json(&record, &line), 0);
	const char *expected =
		"{\"version\":1,\"commit\":\"01HZZZZZZZZZZZZZZZZZZZZZZZ\",\"parents\":[],"
		"\"branch\":\"main\",\"time\":\"1970-01-01T00:00:00.000000Z\",\"actor\":\"\","
		"\"message\":\"\",\"changes\":[]}\n";
	CHECK(strcmp(buf_cstr(&line), expected) == 0);
	buf_free(&line);
}

TEST(a_log_line_escapes_quotes_controls_and_invalid_utf8_in_messages)
{
	struct commit_record record;
	journal_commit_record_init(&record);
	ulid_parse(commit_text, &record.id);
	strcpy(record.branch, "main");
	record.actor = strdup("bob \"the builder\"");
	record.message = strdup("line1\nline2\t\\ \x01 caf\xc3\xa9 bad\xff end");
	struct buf line;
	buf_init(&line);
	CHECK_EQ(journal_commit_record_render_json(&record, &line), 0);
	const char *text = buf_cstr(&line);
	CHECK(strstr(text, "\"actor\":\"bob \\\"the builder\\\"\"") != NULL);
	CHECK(strstr(text, "\"message\":\"line1\\nline2\\t\\\\ \\u0001 caf\xc3\xa9 bad\\ufffd end\"") !=
	      NULL);
	journal_commit_record_free(&record);
	buf_free(&line);
}

/* ---- time ------------------------------------------------------------------------ */

TEST(times_format_as_rfc3339_utc_with_microseconds)
{
	char text[32];
	journal_format_time(0, text);
	CHECK(strcmp(text, "1970-01-01T00:00:00.000000Z") == 0);
	journal_format_time(SAMPLE_TIME_US, text);
	CHECK(strcmp(text, "2026-11-30T12:00:00.123456Z") == 0);
	journal_format_time(951782400000000ull + 1, text); /* leap day 2000 */
	CHECK(strcmp(text, "2000-02-29T00:00:00.000001Z") == 0);
}

TEST(the_largest_time_still_formats_within_32_bytes)
{
	char text[32];
	journal_format_time(UINT64_MAX, text);
	CHECK(strlen(text) < 32);
	CHECK(text[strlen(text) - 1] == 'Z');
}

TEST(change_ops_have_their_log_names)
{
	CHECK(strcmp(journal_change_op_name(CHANGE_CREATE), "create") == 0);
	CHECK(strcmp(journal_change_op_name(CHANGE_OVERWRITE), "overwrite") == 0);
	CHECK(strcmp(journal_change_op_name(CHANGE_MERGE), "merge") == 0);
	CHECK(strcmp(journal_change_op_name(CHANGE_DROP), "drop") == 0);
	CHECK(strcmp(journal_change_op_name(CHANGE_RENAME), "rename") == 0);
	CHECK(strcmp(journal_change_op_name(CHANGE_SCHEMA), "schema") == 0);
}

int main(void)
{
	return harness_run();
}
