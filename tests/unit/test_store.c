/* store: the public API — snapshots, transactions, streaming validation, import/export. */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codec.h"
#include "store.h"
#include "table.h"

/* ---- helpers ------------------------------------------------------------------ */

static struct store *open_store_with(const struct store_options *options)
{
	const char *directory = harness_temp_directory();
	char path[4096];
	snprintf(path, sizeof path, "%s/store", directory);
	struct error_info error;
	error_info_clear(&error);
	struct stat status;
	if (stat(path, &status) != 0 && store_init(path, &error) < 0) {
		fprintf(stderr, "    store_init: %s\n", error.message);
		return NULL;
	}
	struct store *store = NULL;
	if (store_open(path, options, &store, &error) < 0) {
		fprintf(stderr, "    store_open: %s\n", error.message);
		return NULL;
	}
	return store;
}

static struct store *open_store(void)
{
	struct store_options options = { .actor = "tester@test" };
	return open_store_with(&options);
}

/* One writer, one commit. Returns the rc of the first failing step. */
static int write_table(struct store *store, const char *table, enum store_write_mode mode,
		       const char *text, struct store_commit_result *result, struct error_info *error)
{
	struct store_txn *txn = NULL;
	struct store_writer *writer = NULL;
	int rc = store_txn_begin(store, "main", &txn, error);
	if (rc == 0)
		rc = store_txn_writer(txn, table, mode, 0, "input.jsonl", &writer, error);
	if (rc == 0)
		rc = store_writer_write(writer, text, strlen(text), error);
	if (rc == 0)
		rc = store_writer_finish(writer, error);
	if (rc == 0)
		rc = store_txn_commit(txn, NULL, result, error);
	store_txn_free(txn);
	return rc;
}

static int apply_schema(struct store *store, const char *table, const char *json)
{
	struct store_txn *txn = NULL;
	struct error_info error;
	int rc = store_txn_begin(store, "main", &txn, &error);
	if (rc == 0)
		rc = store_txn_schema(txn, table, json, strlen(json), &error);
	if (rc == 0)
		rc = store_txn_commit(txn, NULL, NULL, &error);
	if (rc < 0)
		fprintf(stderr, "    apply_schema: %s\n", error.message);
	store_txn_free(txn);
	return rc;
}

/* Reads the whole table through a snapshot; appends to out. */
static int read_snapshot_table(struct store_snapshot *snapshot, const char *table, struct buf *out)
{
	struct store_table *opened = NULL;
	int rc = store_table_open(snapshot, table, &opened);
	if (rc < 0)
		return rc;
	uint64_t size = store_table_size(opened);
	char chunk[7]; /* deliberately small: many reads at many offsets */
	uint64_t offset = 0;
	while (offset < size) {
		ssize_t got = store_table_pread(opened, chunk, sizeof chunk, offset);
		if (got <= 0) {
			rc = got < 0 ? (int)got : -EIO;
			break;
		}
		buf_append(out, chunk, (size_t)got);
		offset += (uint64_t)got;
	}
	store_table_close(opened);
	return rc;
}

static int read_table(struct store *store, const char *table, uint64_t version, struct buf *out)
{
	struct store_snapshot *snapshot = NULL;
	int rc = store_snapshot_open(store, "main", version, &snapshot, NULL);
	if (rc < 0)
		return rc;
	rc = read_snapshot_table(snapshot, table, out);
	store_snapshot_release(snapshot);
	return rc;
}

static int table_equals(struct store *store, const char *table, const char *expected)
{
	struct buf bytes;
	buf_init(&bytes);
	int rc = read_table(store, table, STORE_LATEST, &bytes);
	int equal = rc == 0 && strcmp(buf_cstr(&bytes), expected) == 0;
	if (!equal)
		fprintf(stderr, "    table %s (rc %d):\n%s    expected:\n%s", table, rc,
			buf_cstr(&bytes), expected);
	buf_free(&bytes);
	return equal;
}

/* A fingerprint of every file under a directory: sorted "path size hash" lines. */
static struct buf *fingerprint_out;

static int fingerprint_entry(const char *path, const struct stat *status, int flag, struct FTW *walk)
{
	(void)walk;
	if (flag != FTW_F)
		return 0;
	char *bytes = malloc((size_t)status->st_size + 1);
	int fd = open(path, O_RDONLY);
	ssize_t got = fd >= 0 ? read(fd, bytes, (size_t)status->st_size) : -1;
	if (fd >= 0)
		close(fd);
	buf_printf(fingerprint_out, "%s %lld %016llx\n", path, (long long)status->st_size,
		   (unsigned long long)codec_hash(bytes, got > 0 ? (size_t)got : 0));
	free(bytes);
	return 0;
}

static int compare_lines(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void fingerprint(struct store *store, struct buf *out)
{
	struct buf raw;
	buf_init(&raw);
	fingerprint_out = &raw;
	nftw(store_path(store), fingerprint_entry, 16, FTW_PHYS);
	char *text = strdup(buf_cstr(&raw));
	char *lines[1024];
	size_t count = 0;
	for (char *line = strtok(text, "\n"); line && count < 1024; line = strtok(NULL, "\n"))
		lines[count++] = line;
	qsort(lines, count, sizeof *lines, compare_lines);
	for (size_t i = 0; i < count; i++)
		buf_printf(out, "%s\n", lines[i]);
	free(text);
	buf_free(&raw);
}

static const char *person_rows = "{\"id\":\"a\",\"name\":\"Ann\",\"age\":30}\n"
				 "{\"name\":\"Bob\",\"id\":\"b\",\"age\":41}\n"
				 "{\"id\":\"c\",\"name\":\"Cy\"}\n";
static const char *person_canonical = "{\"id\":\"a\",\"name\":\"Ann\",\"age\":30}\n"
				      "{\"id\":\"b\",\"name\":\"Bob\",\"age\":41}\n"
				      "{\"id\":\"c\",\"name\":\"Cy\"}\n";

static const char *person_schema =
	"{\"kind\":\"node\",\"properties\":{\"name\":{\"type\":\"string\",\"nullable\":true},"
	"\"age\":{\"type\":\"i64\",\"nullable\":true}}}";
static const char *knows_schema =
	"{\"kind\":\"edge\",\"from\":\"Person\",\"to\":\"Person\",\"properties\":{}}";

static struct store *store_with_people(void)
{
	struct store *store = open_store();
	if (!store)
		return NULL;
	struct error_info error;
	if (apply_schema(store, "Person", person_schema) < 0 ||
	    write_table(store, "Person", STORE_OVERWRITE, person_rows, NULL, &error) < 0 ||
	    apply_schema(store, "Knows", knows_schema) < 0) {
		store_close(store);
		return NULL;
	}
	return store;
}

/* ---- reading what was written --------------------------------------------------- */

TEST(written_rows_read_back_as_canonical_bytes)
{
	struct store *store = open_store();
	CHECK(store);
	struct error_info error;
	CHECK_EQ(write_table(store, "Person", STORE_OVERWRITE, person_rows, NULL, &error), 0);
	CHECK(table_equals(store, "Person", person_canonical));
	store_close(store);
}

TEST(table_size_is_the_exact_byte_length)
{
	struct store *store = open_store();
	CHECK(store);
	struct error_info error;
	CHECK_EQ(write_table(store, "Person", STORE_OVERWRITE, person_rows, NULL, &error), 0);
	struct store_snapshot *snapshot = NULL;
	CHECK_EQ(store_snapshot_open(store, "main", STORE_LATEST, &snapshot, NULL), 0);
	struct store_table *table = NULL;
	CHECK_EQ(store_table_open(snapshot, "Person", &table), 0);
	CHECK_EQ(store_table_size(table), strlen(person_canonical));
	struct head_row head;
	CHECK_EQ(store_snapshot_head(snapshot, "Person", &head), 0);
	CHECK_EQ(head.byte_size, strlen(person_canonical));
	CHECK_EQ(head.row_count, 3);
	store_table_close(table);
	store_snapshot_release(snapshot);
	store_close(store);
}

TEST(pread_returns_the_bytes_at_any_offset)
{
	struct store *store = open_store();
	CHECK(store);
	struct error_info error;
	CHECK_EQ(write_table(store, "Person", STORE_OVERWRITE, person_rows, NULL, &error), 0);
	struct store_snapshot *snapshot = NULL;
	CHECK_EQ(store_snapshot_open(store, "main", STORE_LATEST, &snapshot, NULL), 0);
	struct store_table *table = NULL;
	CHECK_EQ(store_table_open(snapshot, "Person", &table), 0);
	size_t length = strlen(person_canonical);
	for (size_t offset = 0; offset <= length; offset += 3) {
		char bytes[16];
		ssize_t got = store_table_pread(table, bytes, sizeof bytes, offset);
		size_t expected = length - offset < sizeof bytes ? length - offset : sizeof bytes;
		CHECK_EQ(got, expected);
		CHECK(memcmp(bytes, person_canonical + offset, expected) == 0);
	}
	char byte;
	CHECK_EQ(store_table_pread(table, &byte, 1, length + 100), 0);
	store_table_close(table);
	store_snapshot_release(snapshot);
	store_close(store);
}

TEST(merge_upserts_by_id_and_deletes_rows)
{
	struct store *store = open_store();
	CHECK(store);
	struct error_info error;
	CHECK_EQ(write_table(store, "Person", STORE_OVERWRITE, person_rows, NULL, &error), 0);
	const char *merge = "{\"id\":\"a\",\"name\":\"Anna\",\"age\":31}\n"
			    "{\"id\":\"b\",\"@delete\":true}\n"
			    "{\"id\":\"d\",\"name\":\"Di\",\"age\":5}\n";
	CHECK_EQ(write_table(store, "Person", STORE_MERGE, merge, NULL, &error), 0);
	CHECK(table_equals(store, "Person",
			   "{\"id\":\"c\",\"name\":\"Cy\"}\n"
			   "{\"id\":\"a\",\"name\":\"Anna\",\"age\":31}\n"
			   "{\"id\":\"d\",\"name\":\"Di\",\"age\":5}\n"));
	store_close(store);
}

TEST(writing_rows_to_a_new_name_creates_the_table_with_an_inferred_schema)
{
	struct store *store = open_store();
	CHECK(store);
	struct error_info error;
	struct store_commit_result result;
	CHECK_EQ(write_table(store, "Person", STORE_OVERWRITE, person_rows, &result, &error), 0);
	CHECK_EQ(result.version, 1);
	struct store_snapshot *snapshot = NULL;
	CHECK_EQ(store_snapshot_open(store, "main", STORE_LATEST, &snapshot, NULL), 0);
	struct buf schema;
	buf_init(&schema);
	CHECK_EQ(store_snapshot_schema(snapshot, "Person", &schema), 0);
	CHECK(strstr(buf_cstr(&schema), "\"kind\":\"node\""));
	CHECK(strstr(buf_cstr(&schema), "\"name\":{\"type\":\"string\""));
	CHECK(strstr(buf_cstr(&schema), "\"age\":{\"type\":\"i64\",\"nullable\":true}"));
	buf_free(&schema);
	store_snapshot_release(snapshot);
	store_close(store);
}

TEST(a_schema_operation_creates_an_empty_table)
{
	struct store *store = open_store();
	CHECK(store);
	CHECK_EQ(apply_schema(store, "Person", person_schema), 0);
	struct store_snapshot *snapshot = NULL;
	CHECK_EQ(store_snapshot_open(store, "main", STORE_LATEST, &snapshot, NULL), 0);
	struct head_row head;
	CHECK_EQ(store_snapshot_head(snapshot, "Person", &head), 0);
	CHECK_EQ(head.row_count, 0);
	CHECK_EQ(head.byte_size, 0);
	struct store_table *table = NULL;
	CHECK_EQ(store_table_open(snapshot, "Person", &table), 0);
	CHECK_EQ(store_table_size(table), 0);
	store_table_close(table);
	store_snapshot_release(snapshot);
	store_close(store);
}

TEST(drop_through_a_transaction_tombstones_the_head)
{
	struct store *store = open_store();
	CHECK(store);
	struct error_info error;
	CHECK_EQ(write_table(store, "Person", STORE_OVERWRITE, person_rows, NULL, &error), 0);
	struct store_txn *txn = NULL;
	CHECK_EQ(store_txn_begin(store, "main", &txn, &error), 0);
	CHECK_EQ(store_txn_drop(txn, "Person", &error), 0);
	CHECK_EQ(store_txn_drop(txn, "Person", &error), -ENOENT);  /* already dropped in this txn */
	CHECK_EQ(store_txn_commit(txn, "drop it", NULL, &error), 0);
	store_txn_free(txn);
	struct store_snapshot *snapshot = NULL;
	CHECK_EQ(store_snapshot_open(store, "main", STORE_LATEST, &snapshot, NULL), 0);
	struct head_row head;
	CHECK_EQ(store_snapshot_head(snapshot, "Person", &head), -ENOENT);
	store_snapshot_release(snapshot);
	store_close(store);
}

TEST(rename_through_a_transaction_keeps_the_stable_id_and_bytes)
{
	struct store *store = open_store();
	CHECK(store);
	struct error_info error;
	CHECK_EQ(write_table(store, "Person", STORE_OVERWRITE, person_rows, NULL, &error), 0);
	struct store_snapshot *before = NULL;
	CHECK_EQ(store_snapshot_open(store, "main", STORE_LATEST, &before, NULL), 0);
	struct head_row old_head, new_head;
	CHECK_EQ(store_snapshot_head(before, "Person", &old_head), 0);
	struct store_txn *txn = NULL;
	CHECK_EQ(store_txn_begin(store, "main", &txn, &error), 0);
	CHECK_EQ(store_txn_rename(txn, "Person", "People", &error), 0);
	CHECK_EQ(store_txn_commit(txn, NULL, NULL, &error), 0);
	store_txn_free(txn);
	struct store_snapshot *after = NULL;
	CHECK_EQ(store_snapshot_open(store, "main", STORE_LATEST, &after, NULL), 0);
	CHECK_EQ(store_snapshot_head(after, "Person", &new_head), -ENOENT);
	CHECK_EQ(store_snapshot_head(after, "People", &new_head), 0);
	CHECK(memcmp(&old_head.stable_id, &new_head.stable_id, sizeof old_head.stable_id) == 0);
	CHECK(memcmp(&old_head.incarnation, &new_head.incarnation, sizeof old_head.incarnation) == 0);
	CHECK(table_equals(store, "People", person_canonical));
	store_snapshot_release(after);
	store_snapshot_release(before);
	store_close(store);
}

TEST(two_tables_in_one_transaction_are_one_commit)
{
	struct store *store = open_store();
	CHECK(store);
	struct error_info error;
	uint64_t before = store_version(store);
	struct store_txn *txn = NULL;
	struct store_writer *people = NULL, *places = NULL;
	CHECK_EQ(store_txn_begin(store, "main", &txn, &error), 0);
	CHECK_EQ(store_txn_writer(txn, "Person", STORE_OVERWRITE, 0, "p", &people, &error), 0);
	CHECK_EQ(store_txn_writer(txn, "Place", STORE_OVERWRITE, 0, "q", &places, &error), 0);
	CHECK_EQ(store_writer_write(people, person_rows, strlen(person_rows), &error), 0);
	CHECK_EQ(store_writer_write(places, "{\"id\":\"x\"}\n", 11, &error), 0);
	CHECK_EQ(store_txn_size(txn), 2);
	struct store_commit_result result;
	CHECK_EQ(store_txn_commit(txn, "two tables", &result, &error), 0);
	CHECK_EQ(result.version, before + 1);
	CHECK_EQ(store_version(store), before + 1);
	CHECK_EQ(store_txn_size(txn), 0);
	CHECK_EQ(store_snapshot_version(store_txn_snapshot(txn)), before + 1);
	store_txn_free(txn);
	CHECK(table_equals(store, "Person", person_canonical));
	CHECK(table_equals(store, "Place", "{\"id\":\"x\"}\n"));
	store_close(store);
}

TEST(a_pinned_snapshot_keeps_reading_the_old_bytes_after_later_commits)
{
	struct store *store = open_store();
	CHECK(store);
	struct error_info error;
	CHECK_EQ(write_table(store, "Person", STORE_OVERWRITE, person_rows, NULL, &error), 0);
	struct store_snapshot *pinned = NULL;
	CHECK_EQ(store_snapshot_open(store, "main", STORE_LATEST, &pinned, NULL), 0);
	struct store_table *open_table = NULL;
	CHECK_EQ(store_table_open(pinned, "Person", &open_table), 0);
	for (int i = 0; i < 21; i++) {
		char row[64];
		snprintf(row, sizeof row, "{\"id\":\"n%d\",\"name\":\"N\"}\n", i);
		CHECK_EQ(write_table(store, "Person", i % 2 ? STORE_MERGE : STORE_OVERWRITE, row, NULL,
				     &error), 0);
		if (i == 0 || i == 20) {
			struct buf bytes;
			buf_init(&bytes);
			CHECK_EQ(read_snapshot_table(pinned, "Person", &bytes), 0);
			CHECK(strcmp(buf_cstr(&bytes), person_canonical) == 0);
			buf_free(&bytes);
			char all[256];
			ssize_t got = store_table_pread(open_table, all, sizeof all, 0);
			CHECK_EQ(got, strlen(person_canonical));
			CHECK(memcmp(all, person_canonical, (size_t)got) == 0);
		}
	}
	CHECK_EQ(store_snapshot_version(pinned), 1);
	CHECK_EQ(store_version(store), 22);
	store_table_close(open_table);
	store_snapshot_release(pinned);
	store_close(store);
}

TEST(a_historical_snapshot_shows_that_version)
{
	struct store *store = open_store();
	CHECK(store);
	struct error_info error;
	CHECK_EQ(write_table(store, "Person", STORE_OVERWRITE, person_rows, NULL, &error), 0);
	CHECK_EQ(write_table(store, "Person", STORE_OVERWRITE, "{\"id\":\"z\",\"name\":\"Z\"}\n", NULL,
			     &error), 0);
	struct buf bytes;
	buf_init(&bytes);
	CHECK_EQ(read_table(store, "Person", 1, &bytes), 0);
	CHECK(strcmp(buf_cstr(&bytes), person_canonical) == 0);
	buf_free(&bytes);
	struct store_snapshot *snapshot = NULL;
	CHECK_EQ(store_snapshot_open(store, "main", 99, &snapshot, &error), -ENOENT);
	CHECK_EQ(store_snapshot_open(store, "nobranch", STORE_LATEST, &snapshot, &error), -ENOENT);
	store_close(store);
}

TEST(snapshot_time_is_the_head_commit_time)
{
	struct store *store = open_store();
	CHECK(store);
	struct store_snapshot *empty = NULL;
	CHECK_EQ(store_snapshot_open(store, "main", STORE_LATEST, &empty, NULL), 0);
	CHECK_EQ(store_snapshot_time_us(empty), 0);
	struct error_info error;
	struct store_commit_result result;
	CHECK_EQ(write_table(store, "Person", STORE_OVERWRITE, person_rows, &result, &error), 0);
	struct store_snapshot *snapshot = NULL;
	CHECK_EQ(store_snapshot_open(store, "main", STORE_LATEST, &snapshot, NULL), 0);
	CHECK_EQ(store_snapshot_time_us(snapshot), result.time_us);
	CHECK_EQ(store_snapshot_time_us(snapshot), result.time_us);
	CHECK(result.time_us > 0);
	store_snapshot_release(snapshot);
	store_snapshot_release(empty);
	store_close(store);
}

/* ---- writer semantics ------------------------------------------------------------ */

TEST(lines_split_across_writes_are_joined)
{
	struct store *store = open_store();
	CHECK(store);
	struct error_info error;
	struct store_txn *txn = NULL;
	struct store_writer *writer = NULL;
	CHECK_EQ(store_txn_begin(store, "main", &txn, &error), 0);
	CHECK_EQ(store_txn_writer(txn, "Person", STORE_OVERWRITE, 0, "p", &writer, &error), 0);
	for (size_t i = 0; person_rows[i]; i++)
		CHECK_EQ(store_writer_write(writer, &person_rows[i], 1, &error), 0);
	CHECK_EQ(store_writer_lines(writer), 3);
	CHECK_EQ(store_writer_finish(writer, &error), 0);
	CHECK_EQ(store_txn_commit(txn, NULL, NULL, &error), 0);
	store_txn_free(txn);
	CHECK(table_equals(store, "Person", person_canonical));
	store_close(store);
}

/* ---- a large write parsed on two threads (core/store_parse.c) --------------------------------- */

/* count Person lines (several KiB more than STORE_PARSE_PARALLEL_MIN together), line
 * bad_at (1-based; 0: none) replaced by bad. */
static char *people_text(size_t count, size_t bad_at, const char *bad)
{
	struct buf text;
	buf_init(&text);
	char line[256];
	for (size_t i = 1; i <= count; i++) {
		if (i == bad_at) {
			buf_append(&text, bad, strlen(bad));
			continue;
		}
		int length = i % 7 == 0 ? snprintf(line, sizeof line, "{\"age\": %zu, \"id\":\"p%06zu\"}\n", i % 90, i)
			   : snprintf(line, sizeof line, "{\"id\":\"p%06zu\",\"name\":\"Ada \\u00e9 \\\"%zu\\\"\",\"age\":%zu}\n",
				      i, i * 7, i % 90);
		buf_append(&text, line, (size_t)length);
	}
	buf_append(&text, "", 1);
	return (char *)text.data;
}

/* Writes text into a Person overwrite in one write(2) (pieces 0) or in pieces of that
 * many bytes; commits if that succeeded. The first failure's rc, error and lines read. */
static enum store_write_mode people_mode = STORE_OVERWRITE;

static int write_people(struct store *store, const char *text, size_t pieces, struct error_info *error,
			uint64_t *lines)
{
	struct store_txn *txn = NULL;
	struct store_writer *writer = NULL;
	int rc = store_txn_begin(store, "main", &txn, error);
	if (rc == 0)
		rc = store_txn_writer(txn, "Person", people_mode, 0, "people.jsonl", &writer, error);
	size_t size = strlen(text);
	for (size_t at = 0; rc == 0 && at < size; at += pieces ? pieces : size)
		rc = store_writer_write(writer, text + at, pieces && size - at > pieces ? pieces : size - at, error);
	*lines = writer ? store_writer_lines(writer) : 0;
	if (rc == 0)
		rc = store_writer_finish(writer, error);
	if (rc == 0)
		rc = store_txn_commit(txn, NULL, NULL, error);
	store_txn_free(txn);
	return rc;
}

/* The same text written at once (two threads parse it) and in 1,000-byte pieces (one
 * line at a time): the same outcome, error, line count and table. */
static void check_parallel_parse_in(struct store *store, size_t count, size_t bad_at, const char *bad,
				    int expected_rc);

static void check_parallel_parse(size_t count, size_t bad_at, const char *bad, int expected_rc)
{
	struct store *store = store_with_people();
	CHECK(store);
	check_parallel_parse_in(store, count, bad_at, bad, expected_rc);
	store_close(store);
}

static void check_parallel_parse_in(struct store *store, size_t count, size_t bad_at, const char *bad,
				    int expected_rc)
{
	char *text = people_text(count, bad_at, bad);
	CHECK(strlen(text) >= (128u << 10));   /* twice what makes core/store_parse.c help */
	struct error_info at_once, in_pieces;
	uint64_t lines_at_once, lines_in_pieces;
	struct buf table_at_once, table_in_pieces;
	buf_init(&table_at_once);
	buf_init(&table_in_pieces);
	error_info_clear(&at_once);
	error_info_clear(&in_pieces);
	CHECK_EQ(write_people(store, text, 0, &at_once, &lines_at_once), expected_rc);
	CHECK_EQ(read_table(store, "Person", STORE_LATEST, &table_at_once), 0);
	CHECK_EQ(write_people(store, text, 1000, &in_pieces, &lines_in_pieces), expected_rc);
	CHECK_EQ(read_table(store, "Person", STORE_LATEST, &table_in_pieces), 0);
	CHECK_EQ(at_once.line, in_pieces.line);
	CHECK_EQ(at_once.line, bad_at);
	CHECK(strcmp(at_once.message, in_pieces.message) == 0);
	CHECK_EQ(lines_at_once, bad_at ? bad_at - 1 + (expected_rc == -EFBIG ? 0 : 1) : count);
	CHECK_EQ(table_at_once.size, table_in_pieces.size);
	CHECK(table_at_once.size == 0 || memcmp(table_at_once.data, table_in_pieces.data, table_at_once.size) == 0);
	if (!bad_at)
		CHECK(table_at_once.size > strlen(text) / 2);
	buf_free(&table_at_once);
	buf_free(&table_in_pieces);
	free(text);
}

TEST(a_large_write_parsed_on_two_threads_stages_the_rows_one_line_at_a_time_would)
{
	check_parallel_parse(6000, 0, NULL, 0);
}

TEST(a_bad_line_in_the_second_half_of_a_large_write_is_the_error_one_line_at_a_time_gives)
{
	check_parallel_parse(6000, 4500, "{\"id\":\"p004500\",\"age\":\"old\"}\n", -EINVAL);
}

TEST(a_bad_line_in_the_first_half_of_a_large_write_stops_it_there)
{
	check_parallel_parse(6000, 700, "{\"id\":\"p000700\",\"name\":1}\n", -EINVAL);
}

TEST(an_empty_line_in_the_second_half_of_a_large_write_is_refused_at_its_number)
{
	check_parallel_parse(6000, 5000, "\n", -EINVAL);
}

TEST(a_duplicate_id_in_the_second_half_of_a_large_write_is_refused_at_its_number)
{
	check_parallel_parse(6000, 5999, "{\"id\":\"p000010\"}\n", -EINVAL);
}

TEST(a_large_merge_parsed_on_two_threads_applies_its_deletes_as_one_line_at_a_time_would)
{
	people_mode = STORE_MERGE;
	check_parallel_parse(6000, 0, NULL, 0);
	struct store *store = store_with_people();
	CHECK(store);
	/* a delete of a row the same write staged earlier, in the helper's half */
	char *text = people_text(6000, 5000, "{\"id\":\"p000010\",\"@delete\":true}\n");
	struct error_info error;
	uint64_t lines;
	CHECK_EQ(write_people(store, text, 0, &error, &lines), 0);
	CHECK_EQ(lines, 6000);
	struct buf table;
	buf_init(&table);
	CHECK_EQ(read_table(store, "Person", STORE_LATEST, &table), 0);
	buf_append(&table, "", 1);
	CHECK(strstr((const char *)table.data, "\"p000011\"") != NULL);
	CHECK(strstr((const char *)table.data, "\"p000010\"") == NULL);
	buf_free(&table);
	free(text);
	store_close(store);
	people_mode = STORE_OVERWRITE;
}

TEST(a_line_over_the_limit_in_the_second_half_of_a_large_write_is_refused_at_its_number)
{
	struct store_options options = { .actor = "tester@test", .row_max = 120 };
	struct store *store = open_store_with(&options);
	CHECK(store);
	CHECK_EQ(apply_schema(store, "Person", person_schema), 0);
	char long_line[200];
	snprintf(long_line, sizeof long_line, "{\"id\":\"p004000\",\"name\":\"%0150d\"}\n", 0);
	check_parallel_parse_in(store, 6000, 4000, long_line, -EFBIG);
	store_close(store);
}

TEST(an_overwrite_of_zero_lines_empties_the_table)
{
	struct store *store = open_store();
	CHECK(store);
	struct error_info error;
	CHECK_EQ(write_table(store, "Person", STORE_OVERWRITE, person_rows, NULL, &error), 0);
	CHECK_EQ(write_table(store, "Person", STORE_OVERWRITE, "", NULL, &error), 0);
	CHECK(table_equals(store, "Person", ""));
	store_close(store);
}

TEST(a_merge_of_zero_lines_is_nothing_staged)
{
	struct store *store = open_store();
	CHECK(store);
	struct error_info error;
	CHECK_EQ(write_table(store, "Person", STORE_OVERWRITE, person_rows, NULL, &error), 0);
	CHECK_EQ(write_table(store, "Person", STORE_MERGE, "", NULL, &error), -ENODATA);
	CHECK(strstr(error.message, "nothing staged"));
	CHECK_EQ(store_version(store), 1);
	store_close(store);
}

TEST(an_empty_transaction_is_nothing_staged)
{
	struct store *store = open_store();
	CHECK(store);
	struct error_info error;
	struct store_txn *txn = NULL;
	CHECK_EQ(store_txn_begin(store, "main", &txn, &error), 0);
	CHECK_EQ(store_txn_commit(txn, NULL, NULL, &error), -ENODATA);
	CHECK(strstr(error.message, "nothing staged"));
	store_txn_free(txn);
	store_close(store);
}

static int log_first_message(const struct commit_record *record, void *context)
{
	snprintf(context, 256, "%s|%s", record->message, record->actor);
	return 1;
}

TEST(the_default_commit_message_summarises_the_operations)
{
	struct store *store = open_store();
	CHECK(store);
	struct error_info error;
	CHECK_EQ(write_table(store, "Person", STORE_OVERWRITE, person_rows, NULL, &error), 0);
	CHECK_EQ(write_table(store, "Person", STORE_OVERWRITE, person_rows, NULL, &error), 0);
	struct store_snapshot *snapshot = NULL;
	CHECK_EQ(store_snapshot_open(store, "main", STORE_LATEST, &snapshot, NULL), 0);
	char first[256] = "";
	CHECK_EQ(store_snapshot_log(snapshot, log_first_message, first), 0);
	CHECK(strcmp(first, "overwrite Person (3 rows)|tester@test") == 0);
	store_snapshot_release(snapshot);
	store_close(store);
}

TEST(a_writer_after_a_schema_change_in_the_same_transaction_validates_against_it)
{
	struct store *store = store_with_people();
	CHECK(store);
	struct error_info error;
	const char *wider =
		"{\"kind\":\"node\",\"properties\":{\"name\":{\"type\":\"string\",\"nullable\":true},"
		"\"age\":{\"type\":\"i64\",\"nullable\":true},\"email\":{\"type\":\"string\",\"nullable\":true}}}";
	struct store_txn *txn = NULL;
	struct store_writer *writer = NULL;
	CHECK_EQ(store_txn_begin(store, "main", &txn, &error), 0);
	CHECK_EQ(store_txn_schema(txn, "Person", wider, strlen(wider), &error), 0);
	CHECK_EQ(store_txn_writer(txn, "Person", STORE_MERGE, 0, "p", &writer, &error), 0);
	const char *row = "{\"id\":\"e\",\"email\":\"e@x\"}\n";
	CHECK_EQ(store_writer_write(writer, row, strlen(row), &error), 0);
	struct store_commit_result result;
	CHECK_EQ(store_txn_commit(txn, NULL, &result, &error), 0);
	store_txn_free(txn);
	struct buf bytes;
	buf_init(&bytes);
	CHECK_EQ(read_table(store, "Person", STORE_LATEST, &bytes), 0);
	CHECK(strstr(buf_cstr(&bytes), "{\"id\":\"e\",\"email\":\"e@x\"}\n"));
	buf_free(&bytes);
	store_close(store);
}

TEST(an_incompatible_schema_change_is_refused_when_staged)
{
	struct store *store = store_with_people();
	CHECK(store);
	struct error_info error;
	const char *narrower = "{\"kind\":\"node\",\"properties\":{\"name\":{\"type\":\"i64\",\"nullable\":true}}}";
	struct store_txn *txn = NULL;
	CHECK_EQ(store_txn_begin(store, "main", &txn, &error), 0);
	CHECK_EQ(store_txn_schema(txn, "Person", narrower, strlen(narrower), &error), -EINVAL);
	CHECK(strcmp(error.path, "schema/Person.json") == 0);
	CHECK_EQ(store_txn_size(txn), 0);
	store_txn_free(txn);
	store_close(store);
}

TEST(a_writer_of_a_table_renamed_in_the_same_transaction_writes_the_renamed_table)
{
	struct store *store = open_store();
	CHECK(store);
	struct error_info error;
	CHECK_EQ(apply_schema(store, "Person", person_schema), 0);
	CHECK_EQ(write_table(store, "Person", STORE_OVERWRITE, person_rows, NULL, &error), 0);
	struct store_txn *txn = NULL;
	struct store_writer *writer = NULL;
	CHECK_EQ(store_txn_begin(store, "main", &txn, &error), 0);
	CHECK_EQ(store_txn_rename(txn, "Person", "People", &error), 0);
	CHECK_EQ(store_txn_writer(txn, "People", STORE_MERGE, 0, "p", &writer, &error), 0);
	/* validated against Person's schema: an unknown property is refused */
	const char *bad = "{\"id\":\"q\",\"shoe\":1}\n";
	CHECK_EQ(store_writer_write(writer, bad, strlen(bad), &error), -EINVAL);
	store_writer_discard(writer);
	CHECK_EQ(store_txn_writer(txn, "People", STORE_MERGE, 0, "p", &writer, &error), 0);
	const char *row = "{\"id\":\"q\",\"age\":7}\n";
	CHECK_EQ(store_writer_write(writer, row, strlen(row), &error), 0);
	int rc = store_txn_commit(txn, NULL, NULL, &error);
	if (rc < 0)
		fprintf(stderr, "    commit: %s\n", error.message);
	CHECK_EQ(rc, 0);
	store_txn_free(txn);
	struct buf expected;
	buf_init(&expected);
	buf_printf(&expected, "%s{\"id\":\"q\",\"age\":7}\n", person_canonical);
	CHECK(table_equals(store, "People", buf_cstr(&expected)));
	buf_free(&expected);
	store_close(store);
}

TEST(a_discarded_writer_leaves_nothing_in_the_commit)
{
	struct store *store = open_store();
	CHECK(store);
	struct error_info error;
	struct store_txn *txn = NULL;
	struct store_writer *kept = NULL, *dropped = NULL;
	CHECK_EQ(store_txn_begin(store, "main", &txn, &error), 0);
	CHECK_EQ(store_txn_writer(txn, "Kept", STORE_OVERWRITE, 0, "k", &kept, &error), 0);
	CHECK_EQ(store_txn_writer(txn, "Dropped", STORE_OVERWRITE, 0, "d", &dropped, &error), 0);
	struct store_writer *second = NULL;
	CHECK_EQ(store_txn_writer(txn, "Kept", STORE_MERGE, 0, "k2", &second, &error), -EBUSY);
	CHECK(second == NULL);
	CHECK_EQ(store_writer_write(kept, "{\"id\":\"k\"}\n", 11, &error), 0);
	CHECK_EQ(store_writer_write(dropped, "{\"id\":\"d\"}\n", 11, &error), 0);
	store_writer_discard(dropped);
	CHECK_EQ(store_txn_size(txn), 1);
	CHECK_EQ(store_txn_commit(txn, NULL, NULL, &error), 0);
	store_txn_free(txn);
	struct store_snapshot *snapshot = NULL;
	CHECK_EQ(store_snapshot_open(store, "main", STORE_LATEST, &snapshot, NULL), 0);
	struct head_row head;
	CHECK_EQ(store_snapshot_head(snapshot, "Kept", &head), 0);
	CHECK_EQ(store_snapshot_head(snapshot, "Dropped", &head), -ENOENT);
	store_snapshot_release(snapshot);
	store_close(store);
}

TEST(an_edit_based_on_a_version_the_table_has_left_is_ebusy)
{
	struct store *store = open_store();
	CHECK(store);
	struct error_info error;
	CHECK_EQ(write_table(store, "Person", STORE_OVERWRITE, person_rows, NULL, &error), 0);
	struct store_snapshot *snapshot = NULL;
	CHECK_EQ(store_snapshot_open(store, "main", STORE_LATEST, &snapshot, NULL), 0);
	struct head_row head;
	CHECK_EQ(store_snapshot_head(snapshot, "Person", &head), 0);
	store_snapshot_release(snapshot);
	/* an editor copies version head.table_version; meanwhile someone else commits */
	struct store_txn *txn = NULL;
	struct store_writer *writer = NULL;
	CHECK_EQ(store_txn_begin(store, "main", &txn, &error), 0);
	CHECK_EQ(store_txn_writer(txn, "Person", STORE_OVERWRITE, head.table_version, "p", &writer,
				  &error), 0);
	CHECK_EQ(store_writer_write(writer, person_rows, strlen(person_rows), &error), 0);
	CHECK_EQ(write_table(store, "Person", STORE_MERGE, "{\"id\":\"x\",\"name\":\"X\"}\n", NULL,
			     &error), 0);
	uint64_t version = store_version(store);
	CHECK_EQ(store_txn_commit(txn, NULL, NULL, &error), -EBUSY);
	CHECK_EQ(store_version(store), version);
	store_txn_free(txn);
	store_close(store);
}

TEST(rows_with_from_and_to_need_an_edge_schema_first)
{
	struct store *store = open_store();
	CHECK(store);
	struct error_info error;
	const char *edge = "{\"id\":\"e\",\"from\":\"a\",\"to\":\"b\"}\n";
	CHECK_EQ(write_table(store, "Edge", STORE_OVERWRITE, edge, NULL, &error), -EINVAL);
	CHECK_EQ(error.line, 1);
	CHECK(strstr(error.message, "schema"));
	CHECK_EQ(store_version(store), 0);
	store_close(store);
}

/* ---- refused input: errno, path and line, and the store unchanged ------------------ */

struct refusal {
	const char *table;
	enum store_write_mode mode;
	const char *input;
	int code;
	uint64_t line;
	const char *message_part;
};

/* Writes input, expects the refusal at write or finish, then checks that the
 * store's files are byte-identical to before and nothing was published. */
static void check_refused(struct store *store, const struct refusal *refusal, bool defer)
{
	struct buf before, after;
	buf_init(&before);
	buf_init(&after);
	fingerprint(store, &before);
	uint64_t version = store_version(store);
	struct error_info error;
	error_info_clear(&error);
	struct store_txn *txn = NULL;
	struct store_writer *writer = NULL;
	CHECK_EQ(store_txn_begin(store, "main", &txn, &error), 0);
	store_txn_defer_endpoint_checks(txn, defer);
	int rc = store_txn_writer(txn, refusal->table, refusal->mode, 0, "tables/T.jsonl", &writer,
				  &error);
	if (rc == 0)
		rc = store_writer_write(writer, refusal->input, strlen(refusal->input), &error);
	if (rc == 0)
		rc = store_writer_finish(writer, &error);
	if (rc == 0)
		rc = store_txn_commit(txn, NULL, NULL, &error);
	if (rc != refusal->code || error.line != refusal->line ||
	    !strstr(error.message, refusal->message_part))
		fprintf(stderr, "    got rc %d line %llu \"%s\"\n", rc, (unsigned long long)error.line,
			error.message);
	CHECK_EQ(rc, refusal->code);
	CHECK(strcmp(error.path, "tables/T.jsonl") == 0);
	CHECK_EQ(error.line, refusal->line);
	CHECK(strstr(error.message, refusal->message_part));
	if (writer && !defer) {
		/* sticky: the same error again */
		struct error_info again;
		CHECK_EQ(store_writer_write(writer, "{}\n", 3, &again), refusal->code);
		CHECK_EQ(again.line, refusal->line);
		/* and a commit is refused with it too */
		CHECK_EQ(store_txn_commit(txn, NULL, NULL, &again), refusal->code);
	}
	store_txn_free(txn);
	CHECK_EQ(store_version(store), version);
	fingerprint(store, &after);
	if (strcmp(buf_cstr(&before), buf_cstr(&after)) != 0)
		fprintf(stderr, "    before:\n%s    after:\n%s", buf_cstr(&before), buf_cstr(&after));
	CHECK(strcmp(buf_cstr(&before), buf_cstr(&after)) == 0);
	buf_free(&before);
	buf_free(&after);
}

TEST(malformed_json_is_refused_with_path_and_line)
{
	struct store *store = store_with_people();
	CHECK(store);
	struct refusal refusal = { "Person", STORE_OVERWRITE,
				   "{\"id\":\"a\"}\n{\"id\":\"b\",\n{\"id\":\"c\"}\n", -EINVAL, 2, "" };
	check_refused(store, &refusal, false);
	store_close(store);
}

TEST(a_wrong_type_is_refused_with_path_and_line)
{
	struct store *store = store_with_people();
	CHECK(store);
	struct refusal refusal = { "Person", STORE_MERGE,
				   "{\"id\":\"a\",\"age\":1}\n{\"id\":\"b\",\"age\":1}\n{\"id\":\"c\",\"age\":\"old\"}\n",
				   -EINVAL, 3, "age" };
	check_refused(store, &refusal, false);
	store_close(store);
}

TEST(an_unknown_property_is_refused_with_advice_naming_the_schema_file)
{
	struct store *store = store_with_people();
	CHECK(store);
	struct refusal refusal = { "Person", STORE_MERGE, "{\"id\":\"a\",\"nickname\":\"A\"}\n", -EINVAL, 1,
				   "add it to schema/Person.json first" };
	check_refused(store, &refusal, false);
	store_close(store);
}

TEST(a_duplicate_id_in_an_overwrite_is_refused)
{
	struct store *store = store_with_people();
	CHECK(store);
	struct refusal refusal = { "Person", STORE_OVERWRITE,
				   "{\"id\":\"a\"}\n{\"id\":\"b\"}\n{\"id\":\"a\"}\n", -EINVAL, 3,
				   "duplicate id" };
	check_refused(store, &refusal, false);
	store_close(store);
}

TEST(a_dangling_edge_is_refused_at_the_write)
{
	struct store *store = store_with_people();
	CHECK(store);
	struct refusal refusal = { "Knows", STORE_OVERWRITE,
				   "{\"id\":\"k1\",\"from\":\"a\",\"to\":\"b\"}\n"
				   "{\"id\":\"k2\",\"from\":\"a\",\"to\":\"nobody\"}\n",
				   -EINVAL, 2, "dangling edge: to \"nobody\"" };
	check_refused(store, &refusal, false);
	store_close(store);
}

TEST(an_invalid_table_name_is_refused)
{
	struct store *store = store_with_people();
	CHECK(store);
	const char *names[] = { "..", "a/b", "", "9lives", "with space" };
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		struct refusal refusal = { names[i], STORE_OVERWRITE, "{\"id\":\"a\"}\n", -EINVAL, 0,
					   "invalid table name" };
		check_refused(store, &refusal, false);
	}
	char long_name[200];
	memset(long_name, 'x', sizeof long_name - 1);
	long_name[sizeof long_name - 1] = 0;
	struct refusal refusal = { long_name, STORE_OVERWRITE, "{\"id\":\"a\"}\n", -EINVAL, 0,
				   "invalid table name" };
	check_refused(store, &refusal, false);
	store_close(store);
}

TEST(an_empty_line_is_refused)
{
	struct store *store = store_with_people();
	CHECK(store);
	struct refusal refusal = { "Person", STORE_OVERWRITE, "{\"id\":\"a\"}\n\n", -EINVAL, 2,
				   "empty line" };
	check_refused(store, &refusal, false);
	store_close(store);
}

TEST(a_line_over_row_max_is_efbig_as_soon_as_it_is_too_long)
{
	struct store_options options = { .actor = "t", .row_max = 64 };
	struct store *store = open_store_with(&options);
	CHECK(store);
	/* No newline yet: the write that makes the line too long already fails. */
	char line[200];
	memset(line, 'x', sizeof line);
	line[0] = '{';   /* could still become a row: only its length refuses it */
	struct error_info error;
	struct store_txn *txn = NULL;
	struct store_writer *writer = NULL;
	CHECK_EQ(store_txn_begin(store, "main", &txn, &error), 0);
	CHECK_EQ(store_txn_writer(txn, "T", STORE_OVERWRITE, 0, "tables/T.jsonl", &writer, &error), 0);
	CHECK_EQ(store_writer_write(writer, "{\"id\":\"a\"}\n", 11, &error), 0);
	CHECK_EQ(store_writer_write(writer, line, 60, &error), 0);
	CHECK_EQ(store_writer_write(writer, line, 60, &error), -EFBIG);
	CHECK_EQ(error.line, 2);
	store_txn_free(txn);

	struct refusal refusal = { "T", STORE_OVERWRITE, NULL, -EFBIG, 2, "longer than" };
	char input[256];
	snprintf(input, sizeof input, "{\"id\":\"a\"}\n{\"id\":\"%.*s\"}\n", 80, line);
	refusal.input = input;
	check_refused(store, &refusal, false);
	store_close(store);
}

TEST(staging_more_than_staged_max_is_enospc)
{
	struct store_options options = { .actor = "t", .staged_max = 40 };
	struct store *store = open_store_with(&options);
	CHECK(store);
	struct refusal refusal = { "T", STORE_OVERWRITE,
				   "{\"id\":\"a\",\"n\":1}\n{\"id\":\"b\",\"n\":1}\n{\"id\":\"c\",\"n\":1}\n",
				   -ENOSPC, 3, "more than 40 bytes" };
	check_refused(store, &refusal, false);
	store_close(store);
}

TEST(a_last_line_ending_inside_a_row_is_refused_at_finish)
{
	struct store *store = store_with_people();
	CHECK(store);
	struct refusal refusal = { "Person", STORE_OVERWRITE, "{\"id\":\"a\"}\n{\"id\":\"b\"", -EINVAL,
				   2, "not a complete JSON object" };
	check_refused(store, &refusal, false);
	store_close(store);
}

/* A transaction with one merge writer of Person. */
static int merge_writer(struct store *store, struct store_txn **txn, struct store_writer **writer,
			struct error_info *error)
{
	int rc = store_txn_begin(store, "main", txn, error);
	if (rc == 0)
		rc = store_txn_writer(*txn, "Person", STORE_MERGE, 0, NULL, writer, error);
	return rc;
}

TEST(a_last_line_without_newline_that_is_a_complete_object_is_a_row)
{
	struct store *store = store_with_people();
	CHECK(store);
	struct error_info error;
	struct store_txn *txn = NULL;
	struct store_writer *writer = NULL;
	CHECK_EQ(merge_writer(store, &txn, &writer, &error), 0);
	CHECK_EQ(store_writer_write(writer, "{\"id\":\"z\"}", strlen("{\"id\":\"z\"}"), &error), 0);
	CHECK_EQ(store_writer_lines(writer), 1);
	CHECK_EQ(store_writer_finish(writer, &error), 0);
	struct store_commit_result result;
	CHECK_EQ(store_txn_commit(txn, NULL, &result, &error), 0);
	store_txn_free(txn);
	store_close(store);
}

TEST(a_complete_last_line_that_is_invalid_fails_the_write_that_completes_it)
{
	struct store *store = store_with_people();
	CHECK(store);
	struct error_info error;
	struct store_txn *txn = NULL;
	struct store_writer *writer = NULL;
	CHECK_EQ(merge_writer(store, &txn, &writer, &error), 0);
	CHECK_EQ(store_writer_write(writer, "{\"id\":\"z\",", strlen("{\"id\":\"z\","), &error), 0);
	CHECK_EQ(store_writer_write(writer, "\"nope\":1}", strlen("\"nope\":1}"), &error), -EINVAL);
	store_txn_free(txn);
	store_close(store);
}

TEST(text_after_a_staged_last_line_on_the_same_line_is_refused)
{
	struct store *store = store_with_people();
	CHECK(store);
	struct error_info error;
	struct store_txn *txn = NULL;
	struct store_writer *writer = NULL;
	CHECK_EQ(merge_writer(store, &txn, &writer, &error), 0);
	CHECK_EQ(store_writer_write(writer, "{\"id\":\"z\"}", strlen("{\"id\":\"z\"}"), &error), 0);
	CHECK_EQ(store_writer_write(writer, "  \n{\"id\":\"y\"}", strlen("  \n{\"id\":\"y\"}"), &error), 0);
	CHECK_EQ(store_writer_write(writer, "{", strlen("{"), &error), -EINVAL);
	store_txn_free(txn);
	store_close(store);
}

TEST(a_commit_refused_with_ebusy_can_be_fixed_and_retried)
{
	struct store *store = store_with_people();
	CHECK(store);
	struct error_info error;
	struct head_row head;
	struct store_snapshot *snapshot = NULL;
	CHECK_EQ(store_snapshot_open(store, "main", STORE_LATEST, &snapshot, &error), 0);
	CHECK_EQ(store_snapshot_head(snapshot, "Person", &head), 0);
	store_snapshot_release(snapshot);
	/* One transaction: an edit of Person based on its version, and a new table. */
	struct store_txn *txn = NULL;
	struct store_writer *edit = NULL, *city = NULL;
	CHECK_EQ(store_txn_begin(store, "main", &txn, &error), 0);
	CHECK_EQ(store_txn_writer(txn, "Person", STORE_OVERWRITE, head.table_version, NULL, &edit, &error), 0);
	const char *edited = "{\"id\":\"z\",\"name\":\"Zed\"}\n";
	CHECK_EQ(store_writer_write(edit, edited, strlen(edited), &error), 0);
	CHECK_EQ(store_txn_writer(txn, "City", STORE_OVERWRITE, 0, NULL, &city, &error), 0);
	const char *cities = "{\"id\":\"o\"}\n";
	CHECK_EQ(store_writer_write(city, cities, strlen(cities), &error), 0);
	/* Person moves meanwhile: the commit is refused, nothing is published. */
	CHECK_EQ(write_table(store, "Person", STORE_MERGE, "{\"id\":\"m\"}\n", NULL, &error), 0);
	uint64_t version = store_version(store);
	struct store_commit_result result;
	CHECK_EQ(store_txn_commit(txn, NULL, &result, &error), -EBUSY);
	CHECK_EQ(store_version(store), version);
	/* Fixed by leaving the edit out: the rest of the transaction is intact. */
	store_writer_discard(edit);
	CHECK_EQ(store_txn_commit(txn, NULL, &result, &error), 0);
	CHECK_EQ(result.version, version + 1);
	store_txn_free(txn);
	CHECK_EQ(store_snapshot_open(store, "main", STORE_LATEST, &snapshot, &error), 0);
	CHECK_EQ(store_snapshot_head(snapshot, "City", &head), 0);
	CHECK_EQ(head.row_count, 1);
	store_snapshot_release(snapshot);
	store_close(store);
}

/* ---- deferred endpoint checks ------------------------------------------------------ */

TEST(deferred_endpoints_accept_a_node_staged_in_another_table_of_the_transaction)
{
	struct store *store = store_with_people();
	CHECK(store);
	struct error_info error;
	struct store_txn *txn = NULL;
	struct store_writer *edges = NULL, *nodes = NULL;
	CHECK_EQ(store_txn_begin(store, "main", &txn, &error), 0);
	store_txn_defer_endpoint_checks(txn, true);
	CHECK_EQ(store_txn_writer(txn, "Knows", STORE_OVERWRITE, 0, "staging/Knows.jsonl", &edges,
				  &error), 0);
	const char *edge_rows = "{\"id\":\"k1\",\"from\":\"a\",\"to\":\"zed\"}\n";
	CHECK_EQ(store_writer_write(edges, edge_rows, strlen(edge_rows), &error), 0);
	CHECK_EQ(store_writer_finish(edges, &error), 0);
	CHECK_EQ(store_txn_writer(txn, "Person", STORE_MERGE, 0, "staging/Person.jsonl", &nodes,
				  &error), 0);
	const char *node_rows = "{\"id\":\"zed\",\"name\":\"Zed\"}\n";
	CHECK_EQ(store_writer_write(nodes, node_rows, strlen(node_rows), &error), 0);
	CHECK_EQ(store_writer_finish(nodes, &error), 0);
	struct store_commit_result result;
	CHECK_EQ(store_txn_commit(txn, "staged", &result, &error), 0);
	store_txn_free(txn);
	CHECK(table_equals(store, "Knows", "{\"id\":\"k1\",\"from\":\"a\",\"to\":\"zed\"}\n"));
	store_close(store);
}

TEST(deferred_endpoints_refuse_the_commit_when_the_node_never_arrives)
{
	struct store *store = store_with_people();
	CHECK(store);
	struct buf before, after;
	buf_init(&before);
	buf_init(&after);
	fingerprint(store, &before);
	struct error_info error;
	struct store_txn *txn = NULL;
	struct store_writer *edges = NULL;
	CHECK_EQ(store_txn_begin(store, "main", &txn, &error), 0);
	store_txn_defer_endpoint_checks(txn, true);
	CHECK_EQ(store_txn_writer(txn, "Knows", STORE_OVERWRITE, 0, "staging/Knows.jsonl", &edges,
				  &error), 0);
	const char *edge_rows = "{\"id\":\"k1\",\"from\":\"a\",\"to\":\"b\"}\n"
				"{\"id\":\"k2\",\"from\":\"ghost\",\"to\":\"b\"}\n";
	CHECK_EQ(store_writer_write(edges, edge_rows, strlen(edge_rows), &error), 0);
	CHECK_EQ(store_writer_finish(edges, &error), 0);
	CHECK_EQ(store_txn_commit(txn, NULL, NULL, &error), -EINVAL);
	CHECK(strcmp(error.path, "staging/Knows.jsonl") == 0);
	CHECK_EQ(error.line, 2);
	CHECK(strstr(error.message, "from \"ghost\""));
	/* The refused commit left everything staged: fix it and commit again. */
	CHECK_EQ(store_txn_size(txn), 1);
	struct store_writer *nodes = NULL;
	CHECK_EQ(store_txn_writer(txn, "Person", STORE_MERGE, 0, "staging/Person.jsonl", &nodes,
				  &error), 0);
	CHECK_EQ(store_writer_write(nodes, "{\"id\":\"ghost\"}\n", 15, &error), 0);
	CHECK_EQ(store_txn_commit(txn, NULL, NULL, &error), 0);
	store_txn_free(txn);
	(void)after;
	buf_free(&before);
	buf_free(&after);
	store_close(store);
}

TEST(of_several_dangling_deferred_endpoints_the_first_in_the_input_is_named)
{
	struct store *store = store_with_people();
	CHECK(store);
	struct error_info error;
	struct store_txn *txn = NULL;
	struct store_writer *edges = NULL;
	CHECK_EQ(store_txn_begin(store, "main", &txn, &error), 0);
	store_txn_defer_endpoint_checks(txn, true);
	CHECK_EQ(store_txn_writer(txn, "Knows", STORE_OVERWRITE, 0, "staging/Knows.jsonl", &edges,
				  &error), 0);
	/* Sorted by id, "aaa" (line 4) and the "to" of line 3 come before "zzz" (line 3's "from"). */
	const char *edge_rows = "{\"id\":\"k1\",\"from\":\"a\",\"to\":\"b\"}\n"
				"{\"id\":\"k2\",\"from\":\"a\",\"to\":\"b\"}\n"
				"{\"id\":\"k3\",\"from\":\"zzz\",\"to\":\"aab\"}\n"
				"{\"id\":\"k4\",\"from\":\"aaa\",\"to\":\"b\"}\n";
	CHECK_EQ(store_writer_write(edges, edge_rows, strlen(edge_rows), &error), 0);
	CHECK_EQ(store_txn_commit(txn, NULL, NULL, &error), -EINVAL);
	CHECK_EQ(error.line, 3);
	CHECK(strstr(error.message, "from \"zzz\"") != NULL);
	store_txn_free(txn);
	store_close(store);
}

TEST(deferred_endpoints_beyond_what_memory_keeps_are_all_checked_and_name_their_line)
{
	struct store *store = store_with_people();
	CHECK(store);
	struct error_info error;
	struct store_txn *txn = NULL;
	struct store_writer *edges = NULL, *nodes = NULL;
	CHECK_EQ(store_txn_begin(store, "main", &txn, &error), 0);
	store_txn_defer_endpoint_checks(txn, true);
	/* 200,000 edges: about 8 MiB of deferred endpoints, so most of them go to a scratch file. */
	const long edge_count = 200000, ghost_line = 1234;
	CHECK_EQ(store_txn_writer(txn, "Knows", STORE_OVERWRITE, 0, "staging/Knows.jsonl", &edges,
				  &error), 0);
	struct buf rows;
	buf_init(&rows);
	for (long i = 1; i <= edge_count; i++)
		buf_printf(&rows, "{\"id\":\"k%ld\",\"from\":\"n%ld\",\"to\":\"%s%ld\"}\n", i, i % 1000,
			   i == ghost_line ? "ghost" : "n", (i * 7) % 1000);
	CHECK_EQ(store_writer_write(edges, rows.data, rows.size, &error), 0);
	CHECK_EQ(store_writer_finish(edges, &error), 0);
	CHECK_EQ(store_txn_writer(txn, "Person", STORE_MERGE, 0, "staging/Person.jsonl", &nodes,
				  &error), 0);
	buf_reset(&rows);
	for (long i = 0; i < 1000; i++)
		buf_printf(&rows, "{\"id\":\"n%ld\"}\n", i);
	CHECK_EQ(store_writer_write(nodes, rows.data, rows.size, &error), 0);
	CHECK_EQ(store_txn_commit(txn, NULL, NULL, &error), -EINVAL);
	CHECK(strcmp(error.path, "staging/Knows.jsonl") == 0);
	CHECK_EQ(error.line, ghost_line);
	CHECK(strstr(error.message, "to \"ghost") != NULL);
	/* Once the missing node is staged, every deferred endpoint holds. */
	char ghost[64];
	int length = snprintf(ghost, sizeof ghost, "{\"id\":\"ghost%ld\"}\n", (ghost_line * 7) % 1000);
	CHECK_EQ(store_writer_write(nodes, ghost, (size_t)length, &error), 0);
	CHECK_EQ(store_txn_commit(txn, NULL, NULL, &error), 0);
	store_txn_free(txn);
	buf_free(&rows);
	store_close(store);
}

TEST(a_refused_deferred_commit_leaves_the_store_unchanged)
{
	struct store *store = store_with_people();
	CHECK(store);
	struct refusal refusal = { "Knows", STORE_OVERWRITE,
				   "{\"id\":\"k1\",\"from\":\"a\",\"to\":\"nobody\"}\n", -EINVAL, 1,
				   "dangling edge: to \"nobody\"" };
	check_refused(store, &refusal, true);
	store_close(store);
}

/* ---- import and export ------------------------------------------------------------ */

TEST(export_writes_the_table_bytes)
{
	struct store *store = open_store();
	CHECK(store);
	struct error_info error;
	CHECK_EQ(write_table(store, "Person", STORE_OVERWRITE, person_rows, NULL, &error), 0);
	char path[4096];
	snprintf(path, sizeof path, "%s/export.jsonl", harness_temp_directory());
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	CHECK_EQ(store_export(store, "main", "Person", STORE_LATEST, fd, NULL, NULL, &error), 0);
	close(fd);
	char bytes[512];
	fd = open(path, O_RDONLY);
	ssize_t got = read(fd, bytes, sizeof bytes);
	close(fd);
	CHECK_EQ(got, strlen(person_canonical));
	CHECK(memcmp(bytes, person_canonical, (size_t)got) == 0);
	CHECK_EQ(store_export(store, "main", "Nobody", STORE_LATEST, 1, NULL, NULL, &error), -ENOENT);
	store_close(store);
}

static void count_progress(uint64_t done, uint64_t total, void *context)
{
	uint64_t *last = context;
	if (done >= last[0] && done <= total) {
		last[0] = done;
		last[1]++;
	}
}

TEST(an_import_larger_than_the_inline_limit_reads_back_identically)
{
	struct store *store = open_store();
	CHECK(store);
	char path[4096];
	snprintf(path, sizeof path, "%s/big.jsonl", harness_temp_directory());
	FILE *file = fopen(path, "w");
	CHECK(file);
	uint64_t size = 0;
	for (int i = 0; size <= TABLE_INLINE_LIMIT + (1u << 20); i++) {
		int written = fprintf(file, "{\"id\":\"row%08d\",\"text\":\"%s\",\"n\":%d}\n", i,
				      "lorem ipsum dolor sit amet, consectetur adipiscing elit", i);
		size += (uint64_t)written;
	}
	fclose(file);
	struct error_info error;
	struct store_commit_result result;
	uint64_t progress[2] = { 0, 0 };
	CHECK_EQ(store_import(store, "main", "Big", path, STORE_OVERWRITE, "import", NULL, count_progress,
			      progress, &result, &error), 0);
	CHECK_EQ(progress[0], size);
	CHECK(progress[1] >= 2);
	CHECK_EQ(result.version, 1);
	/* The data went to a segment file. */
	char segments[4096];
	snprintf(segments, sizeof segments, "%s/segments", store_path(store));
	struct stat status;
	CHECK(stat(segments, &status) == 0 && S_ISDIR(status.st_mode));

	struct buf bytes;
	buf_init(&bytes);
	struct store_snapshot *snapshot = NULL;
	CHECK_EQ(store_snapshot_open(store, "main", STORE_LATEST, &snapshot, NULL), 0);
	struct store_table *table = NULL;
	CHECK_EQ(store_table_open(snapshot, "Big", &table), 0);
	CHECK_EQ(store_table_size(table), size);
	char *all = malloc(size);
	uint64_t offset = 0;
	while (offset < size) {
		ssize_t got = store_table_pread(table, all + offset, 100000, offset);
		CHECK(got > 0);
		offset += (uint64_t)got;
	}
	char *original = malloc(size);
	int fd = open(path, O_RDONLY);
	CHECK_EQ(read(fd, original, size), size);
	close(fd);
	CHECK(memcmp(all, original, size) == 0);
	free(all);
	free(original);
	store_table_close(table);
	store_snapshot_release(snapshot);
	buf_free(&bytes);
	store_close(store);
}

TEST(an_import_of_a_bad_file_publishes_nothing)
{
	struct store *store = open_store();
	CHECK(store);
	char path[4096];
	snprintf(path, sizeof path, "%s/bad.jsonl", harness_temp_directory());
	FILE *file = fopen(path, "w");
	CHECK(file);
	fputs("{\"id\":\"a\"}\n{\"id\":\n", file);
	fclose(file);
	struct error_info error;
	CHECK_EQ(store_import(store, NULL, "T", path, STORE_OVERWRITE, NULL, NULL, NULL, NULL, NULL, &error),
		 -EINVAL);
	CHECK(strcmp(error.path, path) == 0);
	CHECK_EQ(error.line, 2);
	CHECK_EQ(store_version(store), 0);
	store_close(store);
}

TEST(a_refused_write_that_spilled_to_a_segment_leaves_the_store_byte_identical)
{
	struct store *store = open_store();
	CHECK(store);
	struct error_info error;
	CHECK_EQ(write_table(store, "Person", STORE_OVERWRITE, person_rows, NULL, &error), 0);
	struct buf before, after;
	buf_init(&before);
	buf_init(&after);
	fingerprint(store, &before);
	struct store_txn *txn = NULL;
	struct store_writer *writer = NULL;
	CHECK_EQ(store_txn_begin(store, "main", &txn, &error), 0);
	CHECK_EQ(store_txn_writer(txn, "Big", STORE_OVERWRITE, 0, "big.jsonl", &writer, &error), 0);
	uint64_t staged = 0;
	char line[128];
	for (int i = 0; staged <= TABLE_INLINE_LIMIT + (1u << 20); i++) {
		int length = snprintf(line, sizeof line, "{\"id\":\"r%08d\",\"text\":\"%s\"}\n", i,
				      "the quick brown fox jumps over the lazy dog, again and again");
		CHECK_EQ(store_writer_write(writer, line, (size_t)length, &error), 0);
		staged += (uint64_t)length;
	}
	/* The rows spilled: a segment and its recovery sidecar exist now. */
	char directory[4096];
	snprintf(directory, sizeof directory, "%s/segments", store_path(store));
	struct stat status;
	CHECK(stat(directory, &status) == 0);
	CHECK_EQ(store_writer_write(writer, "{\"id\":\"r00000001\"}\n", 19, &error), -EINVAL);
	CHECK(strstr(error.message, "duplicate id"));
	store_txn_free(txn);
	fingerprint(store, &after);
	if (strcmp(buf_cstr(&before), buf_cstr(&after)) != 0)
		fprintf(stderr, "    before:\n%s    after:\n%s", buf_cstr(&before), buf_cstr(&after));
	CHECK(strcmp(buf_cstr(&before), buf_cstr(&after)) == 0);
	buf_free(&before);
	buf_free(&after);
	store_close(store);
}

/* ---- concurrency, commits, branches, stats ------------------------------------------ */

struct committer {
	struct store *store;
	const char *table;
	int commits;
	int failures;
};

static void *commit_repeatedly(void *context)
{
	struct committer *committer = context;
	for (int i = 0; i < committer->commits; i++) {
		char row[64];
		snprintf(row, sizeof row, "{\"id\":\"r%d\",\"n\":%d}\n", i, i);
		struct error_info error;
		if (write_table(committer->store, committer->table, STORE_MERGE, row, NULL, &error) < 0)
			committer->failures++;
	}
	return NULL;
}

TEST(two_threads_committing_concurrently_both_land)
{
	struct store *store = open_store();
	CHECK(store);
	struct committer first = { store, "Left", 10, 0 }, second = { store, "Right", 10, 0 };
	pthread_t threads[2];
	CHECK_EQ(pthread_create(&threads[0], NULL, commit_repeatedly, &first), 0);
	CHECK_EQ(pthread_create(&threads[1], NULL, commit_repeatedly, &second), 0);
	pthread_join(threads[0], NULL);
	pthread_join(threads[1], NULL);
	CHECK_EQ(first.failures, 0);
	CHECK_EQ(second.failures, 0);
	CHECK_EQ(store_version(store), 20);
	struct store_snapshot *snapshot = NULL;
	CHECK_EQ(store_snapshot_open(store, "main", STORE_LATEST, &snapshot, NULL), 0);
	struct head_row head;
	CHECK_EQ(store_snapshot_head(snapshot, "Left", &head), 0);
	CHECK_EQ(head.row_count, 10);
	CHECK_EQ(store_snapshot_head(snapshot, "Right", &head), 0);
	CHECK_EQ(head.row_count, 10);
	store_snapshot_release(snapshot);
	store_close(store);
}

struct shared_reader {
	struct store_snapshot *snapshot;
	int mismatches;
};

static void *read_repeatedly(void *context)
{
	struct shared_reader *reader = context;
	for (int i = 0; i < 50; i++) {
		struct buf bytes;
		buf_init(&bytes);
		if (read_snapshot_table(reader->snapshot, "Person", &bytes) < 0 ||
		    strcmp(buf_cstr(&bytes), person_canonical) != 0)
			reader->mismatches++;
		struct head_row head;
		if (store_snapshot_head(reader->snapshot, "Person", &head) < 0 || head.row_count != 3)
			reader->mismatches++;
		buf_free(&bytes);
	}
	return NULL;
}

TEST(threads_sharing_a_snapshot_read_the_same_bytes_while_commits_land)
{
	struct store *store = open_store();
	CHECK(store);
	struct error_info error;
	CHECK_EQ(write_table(store, "Person", STORE_OVERWRITE, person_rows, NULL, &error), 0);
	struct store_snapshot *snapshot = NULL;
	CHECK_EQ(store_snapshot_open(store, "main", STORE_LATEST, &snapshot, NULL), 0);
	struct shared_reader readers[2] = { { snapshot, 0 }, { snapshot, 0 } };
	struct committer writer = { store, "Other", 10, 0 };
	pthread_t threads[3];
	CHECK_EQ(pthread_create(&threads[0], NULL, read_repeatedly, &readers[0]), 0);
	CHECK_EQ(pthread_create(&threads[1], NULL, read_repeatedly, &readers[1]), 0);
	CHECK_EQ(pthread_create(&threads[2], NULL, commit_repeatedly, &writer), 0);
	for (int i = 0; i < 3; i++)
		pthread_join(threads[i], NULL);
	CHECK_EQ(readers[0].mismatches, 0);
	CHECK_EQ(readers[1].mismatches, 0);
	CHECK_EQ(writer.failures, 0);
	CHECK_EQ(store_version(store), 11);
	store_snapshot_release(snapshot);
	store_close(store);
}

TEST(commit_find_gives_the_version_and_branch_of_a_commit)
{
	struct store *store = open_store();
	CHECK(store);
	struct error_info error;
	struct store_commit_result first, second;
	CHECK_EQ(write_table(store, "Person", STORE_OVERWRITE, person_rows, &first, &error), 0);
	CHECK_EQ(write_table(store, "Person", STORE_OVERWRITE, person_rows, &second, &error), 0);
	uint64_t version = 0;
	char branch[JOURNAL_NAME_MAX + 1] = "";
	CHECK_EQ(store_commit_find(store, first.commit, &version, branch), 0);
	CHECK_EQ(version, 1);
	CHECK(strcmp(branch, "main") == 0);
	CHECK_EQ(store_commit_find(store, second.commit, &version, branch), 0);
	CHECK_EQ(version, 2);
	CHECK_EQ(store_commit_find(store, "not-a-ulid", &version, branch), -EINVAL);
	CHECK_EQ(store_commit_find(store, "01ARZ3NDEKTSV4RRFFQ69G5FAV", &version, branch), -ENOENT);
	store_close(store);
}

static int count_heads(const struct head_row *head, void *context)
{
	(void)head;
	(*(int *)context)++;
	return 0;
}

static int find_branch(const struct store_branch_info *branch, void *context)
{
	if (strcmp(branch->name, "dev") == 0)
		*(uint64_t *)context = branch->created_version + 1;
	return 0;
}

TEST(a_branch_shares_its_parents_tables_until_it_writes)
{
	struct store *store = open_store();
	CHECK(store);
	struct error_info error;
	CHECK_EQ(write_table(store, "Person", STORE_OVERWRITE, person_rows, NULL, &error), 0);
	CHECK_EQ(store_branch_create(store, "dev", "main", NULL, &error), 0);
	uint64_t found = 0;
	CHECK_EQ(store_branches(store, find_branch, &found), 0);
	CHECK_EQ(found, 2);
	struct store_txn *txn = NULL;
	struct store_writer *writer = NULL;
	CHECK_EQ(store_txn_begin(store, "dev", &txn, &error), 0);
	CHECK_EQ(store_txn_writer(txn, "Person", STORE_MERGE, 0, "p", &writer, &error), 0);
	CHECK_EQ(store_writer_write(writer, "{\"id\":\"d\",\"name\":\"D\"}\n", 22, &error), 0);
	int rc = store_txn_commit(txn, NULL, NULL, &error);
	if (rc < 0)
		fprintf(stderr, "    commit: %s\n", error.message);
	CHECK_EQ(rc, 0);
	store_txn_free(txn);
	CHECK(table_equals(store, "Person", person_canonical));
	struct store_snapshot *dev = NULL;
	CHECK_EQ(store_snapshot_open(store, "dev", STORE_LATEST, &dev, NULL), 0);
	struct head_row head;
	CHECK_EQ(store_snapshot_head(dev, "Person", &head), 0);
	CHECK_EQ(head.row_count, 4);
	int heads = 0;
	CHECK_EQ(store_snapshot_heads(dev, false, count_heads, &heads), 0);
	CHECK_EQ(heads, 1);
	store_snapshot_release(dev);
	CHECK_EQ(store_branch_delete(store, "main", NULL, false, NULL, &error), -EBUSY);
	store_close(store);
}

TEST(stats_name_the_manifest_and_data_counters)
{
	struct store *store = open_store();
	CHECK(store);
	struct error_info error;
	CHECK_EQ(write_table(store, "Person", STORE_OVERWRITE, person_rows, NULL, &error), 0);
	struct buf stats;
	buf_init(&stats);
	CHECK_EQ(store_stats_json(store, &stats), 0);
	const char *text = buf_cstr(&stats);
	CHECK(strstr(text, "\"manifest\":{\"reads\":"));
	CHECK(strstr(text, "\"data\":{\"reads\":"));
	CHECK(strstr(text, "\"blocks\":"));
	CHECK(strstr(text, "\"rows_decoded\":"));
	CHECK(strstr(text, "\"fsyncs\":"));
	CHECK(strstr(text, "\"version\":1"));
	CHECK(strstr(text, store_path(store)));
	buf_free(&stats);
	store_close(store);
}

TEST(a_read_only_store_refuses_writes)
{
	struct store *store = open_store();
	CHECK(store);
	store_close(store);
	struct store_options options = { .read_only = true };
	store = open_store_with(&options);
	CHECK(store);
	struct error_info error;
	struct store_txn *txn = NULL;
	CHECK_EQ(store_txn_begin(store, "main", &txn, &error), -EROFS);
	CHECK_EQ(store_branch_create(store, "dev", "main", NULL, &error), -EROFS);
	store_close(store);
}

/* A based write's commit in a store of format; returns its log line (owned by line). */
static void based_commit_line(uint32_t format, struct buf *line)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/store%u", harness_temp_directory(), format);
	struct error_info error;
	error_info_clear(&error);
	CHECK_EQ(store_init_format(path, format, &error), 0);
	struct store *store = NULL;
	CHECK_EQ(store_open(path, NULL, &store, &error), 0);
	CHECK_EQ(store_format_version(store), format);
	struct store_commit_result first, second;
	CHECK_EQ(write_table(store, "Person", STORE_OVERWRITE, person_rows, &first, &error), 0);
	struct store_txn *txn = NULL;
	struct store_writer *writer = NULL;
	CHECK_EQ(store_txn_begin(store, "main", &txn, &error), 0);
	CHECK_EQ(store_txn_writer(txn, "Person", STORE_OVERWRITE, 0, "Person.jsonl", &writer, &error), 0);
	CHECK_EQ(store_writer_write(writer, person_rows, strlen(person_rows), &error), 0);
	CHECK_EQ(store_writer_finish(writer, &error), 0);
	store_txn_set_based_on(txn, first.version);
	CHECK_EQ(store_txn_commit(txn, "based", &second, &error), 0);
	store_txn_free(txn);
	CHECK_EQ(store_commit_line(store, second.version, line), 0);
	CHECK_EQ(store_verify(store, NULL, NULL), 0);
	store_close(store);
	/* the store keeps its format when it is opened again */
	CHECK_EQ(store_open(path, NULL, &store, &error), 0);
	CHECK_EQ(store_format_version(store), format);
	store_close(store);
}

TEST(a_based_commit_is_a_merge_whose_log_line_says_based_on_in_a_format_7_store)
{
	struct buf line;
	buf_init(&line);
	based_commit_line(7, &line);
	CHECK(strstr(buf_cstr(&line), "\"based_on\":1,\"changes\":[{\"table\":\"Person\",\"op\":\"merge\""));
	buf_free(&line);
}

TEST(a_format_6_store_is_read_and_written_as_format_6_and_its_log_lines_have_no_base)
{
	struct buf line;
	buf_init(&line);
	based_commit_line(6, &line);
	CHECK(strstr(buf_cstr(&line), "based_on") == NULL);
	CHECK(strstr(buf_cstr(&line), "\"op\":\"merge\""));
	buf_free(&line);
	struct error_info error;
	CHECK_EQ(store_init_format(harness_temp_directory(), 5, &error), -EINVAL);
	CHECK(strstr(error.message, "stores of format 6 to 8"));
}

TEST(a_store_stamped_with_another_format_is_refused)
{
	struct store *store = open_store();
	CHECK(store);
	char path[4096];
	snprintf(path, sizeof path, "%s", store_path(store));
	store_close(store);
	struct error_info error;
	CHECK_EQ(store_stamp_format(path, STORE_FORMAT_VERSION + 1, &error), 0);
	CHECK_EQ(store_open(path, NULL, &store, &error), -EPROTO);
	CHECK(strstr(error.message, "upgrade graphfs"));
	CHECK_EQ(store_stamp_format(path, STORE_FORMAT_VERSION, &error), 0);
	CHECK_EQ(store_open(path, NULL, &store, &error), 0);
	store_close(store);
}

/* ---- referential integrity (docs/ARCHITECTURE.md invariant 11) ------------------------- */

static const char *likes_schema =
	"{\"kind\":\"edge\",\"from\":\"Person\",\"to\":\"Person\",\"properties\":{}}";

/* People a, b, c; Knows a->b, b->c, c->c; Likes b->a. */
static struct store *store_with_graph(void)
{
	struct store *store = store_with_people();
	if (!store)
		return NULL;
	struct error_info error;
	if (write_table(store, "Knows", STORE_OVERWRITE,
			"{\"id\":\"k1\",\"from\":\"a\",\"to\":\"b\"}\n{\"id\":\"k2\",\"from\":\"b\",\"to\":\"c\"}\n"
			"{\"id\":\"k3\",\"from\":\"c\",\"to\":\"c\"}\n",
			NULL, &error) < 0 ||
	    apply_schema(store, "Likes", likes_schema) < 0 ||
	    write_table(store, "Likes", STORE_OVERWRITE, "{\"id\":\"l1\",\"from\":\"b\",\"to\":\"a\"}\n", NULL, &error) < 0) {
		store_close(store);
		return NULL;
	}
	return store;
}

/* One transaction of several writers, each (table, mode, text), committed. */
struct step {
	const char *table;
	enum store_write_mode mode;
	const char *text;
};

static int write_steps(struct store *store, bool defer, const struct step *steps, size_t count,
		       struct error_info *error)
{
	struct store_txn *txn = NULL;
	int rc = store_txn_begin(store, "main", &txn, error);
	if (rc == 0)
		store_txn_defer_endpoint_checks(txn, defer);
	for (size_t i = 0; rc == 0 && i < count; i++) {
		struct store_writer *writer = NULL;
		rc = store_txn_writer(txn, steps[i].table, steps[i].mode, 0, steps[i].table, &writer, error);
		if (rc == 0)
			rc = store_writer_write(writer, steps[i].text, strlen(steps[i].text), error);
		if (rc == 0)
			rc = store_writer_finish(writer, error);
	}
	if (rc == 0)
		rc = store_txn_commit(txn, NULL, NULL, error);
	store_txn_free(txn);
	return rc;
}

TEST(a_merge_delete_of_a_referenced_node_fails_its_line_naming_the_edge_table_and_edge)
{
	struct store *store = store_with_graph();
	CHECK(store);
	struct refusal refusal = { "Person", STORE_MERGE, "{\"id\":\"x\"}\n{\"id\":\"a\",\"@delete\":true}\n", -EINVAL,
				   2, "node \"a\" is still referenced by edge \"k1\" of Knows (its from)" };
	check_refused(store, &refusal, false);
	store_close(store);
}

TEST(a_node_referenced_only_as_a_to_is_refused_too)
{
	struct store *store = store_with_graph();
	CHECK(store);
	/* c is the from of k3 as well; a is the to of l1 */
	struct error_info error;
	CHECK_EQ(write_steps(store, false,
			     (struct step[]){ { "Knows", STORE_MERGE, "{\"id\":\"k1\",\"@delete\":true}\n" } }, 1, &error),
		 0);
	struct refusal refusal = { "Person", STORE_MERGE, "{\"id\":\"a\",\"@delete\":true}\n", -EINVAL, 1,
				   "edge \"l1\" of Likes (its to)" };
	check_refused(store, &refusal, false);
	store_close(store);
}

TEST(an_overwrite_that_leaves_out_a_referenced_node_is_refused_at_commit)
{
	struct store *store = store_with_graph();
	CHECK(store);
	uint64_t version = store_version(store);
	struct error_info error;
	error_info_clear(&error);
	int rc = write_steps(store, false,
			     (struct step[]){ { "Person", STORE_OVERWRITE, "{\"id\":\"a\"}\n{\"id\":\"b\"}\n" } }, 1, &error);
	CHECK_EQ(rc, -EINVAL);
	CHECK(strstr(error.message, "node \"c\" of Person is still referenced by edge \"k3\" of Knows (its from)"));
	CHECK(strstr(error.message, "\"@delete\":\"detach\""));
	CHECK_EQ(store_version(store), version);
	store_close(store);
}

TEST(deleting_a_node_and_its_edges_in_one_transaction_is_valid_in_either_order)
{
	struct store *store = store_with_graph();
	CHECK(store);
	struct error_info error;
	/* edges first, node after: the write-time check sees the staged deletes */
	CHECK_EQ(write_steps(store, false,
			     (struct step[]){ { "Knows", STORE_MERGE, "{\"id\":\"k1\",\"@delete\":true}\n" },
					      { "Likes", STORE_MERGE, "{\"id\":\"l1\",\"@delete\":true}\n" },
					      { "Person", STORE_MERGE, "{\"id\":\"a\",\"@delete\":true}\n" } },
			     3, &error),
		 0);
	CHECK(table_equals(store, "Knows", "{\"id\":\"k2\",\"from\":\"b\",\"to\":\"c\"}\n{\"id\":\"k3\",\"from\":\"c\",\"to\":\"c\"}\n"));
	/* staging: node first, its edges after (checks deferred to the commit) */
	CHECK_EQ(write_steps(store, true,
			     (struct step[]){ { "Person", STORE_MERGE, "{\"id\":\"c\",\"@delete\":true}\n" },
					      { "Knows", STORE_MERGE,
						"{\"id\":\"k2\",\"@delete\":true}\n{\"id\":\"k3\",\"@delete\":true}\n" } },
			     2, &error),
		 0);
	CHECK(table_equals(store, "Person", "{\"id\":\"b\",\"name\":\"Bob\",\"age\":41}\n"));
	CHECK(table_equals(store, "Knows", ""));
	store_close(store);
}

TEST(a_staged_node_delete_whose_edges_stay_is_refused_at_commit)
{
	struct store *store = store_with_graph();
	CHECK(store);
	uint64_t version = store_version(store);
	struct error_info error;
	error_info_clear(&error);
	CHECK_EQ(write_steps(store, true,
			     (struct step[]){ { "Person", STORE_MERGE, "{\"id\":\"c\",\"@delete\":true}\n" },
					      { "Knows", STORE_MERGE, "{\"id\":\"k2\",\"@delete\":true}\n" } },
			     2, &error),
		 -EINVAL);
	CHECK(strstr(error.message, "node \"c\" of Person is still referenced by edge \"k3\" of Knows"));
	CHECK_EQ(store_version(store), version);
	store_close(store);
}

TEST(an_edge_repointed_away_from_a_node_in_the_same_transaction_lets_the_node_go)
{
	struct store *store = store_with_graph();
	CHECK(store);
	struct error_info error;
	CHECK_EQ(write_steps(store, false,
			     (struct step[]){ { "Knows", STORE_MERGE, "{\"id\":\"k1\",\"from\":\"b\",\"to\":\"b\"}\n" },
					      { "Likes", STORE_MERGE, "{\"id\":\"l1\",\"from\":\"b\",\"to\":\"b\"}\n" },
					      { "Person", STORE_MERGE, "{\"id\":\"a\",\"@delete\":true}\n" } },
			     3, &error),
		 0);
	store_close(store);
}

TEST(detach_deletes_the_node_and_every_edge_naming_it_in_every_edge_table_and_direction)
{
	struct store *store = store_with_graph();
	CHECK(store);
	struct error_info error;
	/* b: from of k2 and l1, to of k1 */
	CHECK_EQ(write_steps(store, false,
			     (struct step[]){ { "Person", STORE_MERGE, "{\"id\":\"b\",\"@delete\":\"detach\"}\n" } }, 1,
			     &error),
		 0);
	CHECK(table_equals(store, "Person", "{\"id\":\"a\",\"name\":\"Ann\",\"age\":30}\n{\"id\":\"c\",\"name\":\"Cy\"}\n"));
	CHECK(table_equals(store, "Knows", "{\"id\":\"k3\",\"from\":\"c\",\"to\":\"c\"}\n"));
	CHECK(table_equals(store, "Likes", ""));
	/* one commit for all three tables */
	struct store_snapshot *snapshot;
	CHECK_EQ(store_snapshot_open(store, "main", STORE_LATEST, &snapshot, &error), 0);
	struct head_row head;
	CHECK_EQ(store_snapshot_head(snapshot, "Likes", &head), 0);
	struct head_row person;
	CHECK_EQ(store_snapshot_head(snapshot, "Person", &person), 0);
	CHECK(ulid_compare(&head.commit, &person.commit) == 0);
	store_snapshot_release(snapshot);
	/* a self-loop goes once */
	CHECK_EQ(write_steps(store, false,
			     (struct step[]){ { "Person", STORE_MERGE, "{\"id\":\"c\",\"@delete\":\"detach\"}\n" } }, 1,
			     &error),
		 0);
	CHECK(table_equals(store, "Knows", ""));
	store_close(store);
}

TEST(detach_leaves_an_edge_the_transaction_repoints)
{
	struct store *store = store_with_graph();
	CHECK(store);
	struct error_info error;
	CHECK_EQ(write_steps(store, false,
			     (struct step[]){ { "Knows", STORE_MERGE, "{\"id\":\"k1\",\"from\":\"c\",\"to\":\"c\"}\n" },
					      { "Person", STORE_MERGE, "{\"id\":\"a\",\"@delete\":\"detach\"}\n" } },
			     2, &error),
		 0);
	CHECK(table_equals(store, "Knows", "{\"id\":\"k2\",\"from\":\"b\",\"to\":\"c\"}\n{\"id\":\"k3\",\"from\":\"c\",\"to\":\"c\"}\n"
				   "{\"id\":\"k1\",\"from\":\"c\",\"to\":\"c\"}\n"));
	CHECK(table_equals(store, "Likes", ""));
	store_close(store);
}

TEST(a_discarded_writer_takes_its_detach_deletes_with_it)
{
	struct store *store = store_with_graph();
	CHECK(store);
	struct error_info error;
	struct store_txn *txn = NULL;
	struct store_writer *people = NULL, *knows = NULL;
	CHECK_EQ(store_txn_begin(store, "main", &txn, &error), 0);
	CHECK_EQ(store_txn_writer(txn, "Person", STORE_MERGE, 0, "p", &people, &error), 0);
	const char *detach = "{\"id\":\"a\",\"@delete\":\"detach\"}\n";
	CHECK_EQ(store_writer_write(people, detach, strlen(detach), &error), 0);
	store_writer_discard(people);
	CHECK_EQ(store_txn_writer(txn, "Knows", STORE_MERGE, 0, "k", &knows, &error), 0);
	const char *row = "{\"id\":\"k9\",\"from\":\"a\",\"to\":\"a\"}\n";
	CHECK_EQ(store_writer_write(knows, row, strlen(row), &error), 0);
	CHECK_EQ(store_writer_finish(knows, &error), 0);
	CHECK_EQ(store_txn_commit(txn, NULL, NULL, &error), 0);
	store_txn_free(txn);
	CHECK(table_equals(store, "Likes", "{\"id\":\"l1\",\"from\":\"b\",\"to\":\"a\"}\n"));
	store_close(store);
}

TEST(a_referenced_node_table_can_be_renamed_and_edge_schemas_name_it_by_its_new_name)
{
	struct store *store = store_with_graph();
	CHECK(store);
	uint64_t before = store_version(store);
	struct error_info error;
	struct store_txn *txn = NULL;
	CHECK_EQ(store_txn_begin(store, "main", &txn, &error), 0);
	CHECK_EQ(store_txn_rename(txn, "Person", "People", &error), 0);
	CHECK_EQ(store_txn_commit(txn, NULL, NULL, &error), 0);
	store_txn_free(txn);
	struct store_snapshot *now, *then;
	CHECK_EQ(store_snapshot_open(store, "main", STORE_LATEST, &now, &error), 0);
	CHECK_EQ(store_snapshot_open(store, "main", before, &then, &error), 0);
	struct buf schema;
	buf_init(&schema);
	CHECK_EQ(store_snapshot_schema(now, "Knows", &schema), 0);
	CHECK(strstr(buf_cstr(&schema), "\"from\":\"People\",\"to\":\"People\""));
	buf_reset(&schema);
	CHECK_EQ(store_snapshot_schema(now, "Likes", &schema), 0);
	CHECK(strstr(buf_cstr(&schema), "\"from\":\"People\""));
	buf_reset(&schema);
	CHECK_EQ(store_snapshot_schema(then, "Knows", &schema), 0);
	CHECK(strstr(buf_cstr(&schema), "\"from\":\"Person\",\"to\":\"Person\""));
	buf_free(&schema);
	store_snapshot_release(now);
	store_snapshot_release(then);
	/* the edges still check against the renamed table, both ways */
	CHECK_EQ(write_table(store, "Knows", STORE_MERGE, "{\"id\":\"k4\",\"from\":\"a\",\"to\":\"c\"}\n", NULL, &error), 0);
	CHECK_EQ(write_table(store, "Knows", STORE_MERGE, "{\"id\":\"k5\",\"from\":\"a\",\"to\":\"zz\"}\n", NULL, &error),
		 -EINVAL);
	CHECK_EQ(write_table(store, "People", STORE_MERGE, "{\"id\":\"a\",\"@delete\":true}\n", NULL, &error), -EINVAL);
	/* dropping it is still refused while edges name it */
	CHECK_EQ(store_txn_begin(store, "main", &txn, &error), 0);
	CHECK_EQ(store_txn_drop(txn, "People", &error), 0);
	CHECK_EQ(store_txn_commit(txn, NULL, NULL, &error), -EBUSY);
	store_txn_free(txn);
	store_close(store);
}

/* ---- graph reads cost the same at any table size ---------------------------------------- */

#define GRAPH_NODE_COUNT 1000

/* A store at path with GRAPH_NODE_COUNT people and `edges` random Knows edges, plus five from "n7". */
static struct store *graph_store_of(const char *path, unsigned edges)
{
	struct error_info error;
	struct store *store = NULL;
	if (store_init(path, &error) < 0 || store_open(path, NULL, &store, &error) < 0)
		return NULL;
	struct buf text;
	buf_init(&text);
	for (unsigned i = 0; i < GRAPH_NODE_COUNT; i++)
		buf_printf(&text, "{\"id\":\"n%u\"}\n", i);
	int rc = apply_schema(store, "Person", person_schema);
	if (rc == 0)
		rc = write_table(store, "Person", STORE_OVERWRITE, buf_cstr(&text), NULL, &error);
	if (rc == 0)
		rc = apply_schema(store, "Knows", knows_schema);
	buf_reset(&text);
	uint64_t state = 0x853c49e6748fea9bull;
	for (unsigned i = 0; rc == 0 && i < edges; i++) {
		state ^= state << 13;
		state ^= state >> 7;
		state ^= state << 17;
		unsigned from = (unsigned)(state % GRAPH_NODE_COUNT), to = (unsigned)((state >> 20) % GRAPH_NODE_COUNT);
		if (from == 7)
			from = 8;   /* n7's edges are exactly the five below */
		buf_printf(&text, "{\"id\":\"e%07u\",\"from\":\"n%u\",\"to\":\"n%u\"}\n", i, from, to);
	}
	for (unsigned i = 0; i < 5; i++)
		buf_printf(&text, "{\"id\":\"hub%u\",\"from\":\"n7\",\"to\":\"n%u\"}\n", i, i);
	if (rc == 0)
		rc = write_table(store, "Knows", STORE_OVERWRITE, buf_cstr(&text), NULL, &error);
	buf_free(&text);
	if (rc < 0) {
		fprintf(stderr, "    building the graph: %s\n", error.message);
		store_close(store);
		return NULL;
	}
	return store;
}

static int count_edge(const uint8_t *edge, size_t edge_size, const uint8_t *other, size_t other_size, void *context)
{
	++*(unsigned *)context;
	return 0;
}

/* Pages (manifest + data) a cold process reads to list n7's out edges, and to refuse deleting n3 (in: hub3). */
static void graph_read_pages(const char *path, uint64_t *listing, uint64_t *delete_check)
{
	struct error_info error;
	struct store *store = NULL;
	CHECK_EQ(store_open(path, NULL, &store, &error), 0);
	struct store_snapshot *snapshot;
	CHECK_EQ(store_snapshot_open(store, "main", STORE_LATEST, &snapshot, &error), 0);
	struct io_counters manifest, data;
	io_counters_reset();
	unsigned count = 0;
	CHECK_EQ(store_graph_edges(snapshot, "Knows", STORE_EDGE_OUT, "n7", 2, count_edge, &count), 0);
	CHECK_EQ(count, 5);
	io_counters_get(IO_MANIFEST, &manifest);
	io_counters_get(IO_DATA, &data);
	*listing = manifest.pages + data.pages;
	store_snapshot_release(snapshot);
	/* a delete line of a referenced node is refused at its write, by the adjacency index */
	struct store_txn *txn = NULL;
	struct store_writer *writer = NULL;
	CHECK_EQ(store_txn_begin(store, "main", &txn, &error), 0);
	CHECK_EQ(store_txn_writer(txn, "Person", STORE_MERGE, 0, "p", &writer, &error), 0);
	io_counters_reset();
	const char *line = "{\"id\":\"n7\",\"@delete\":true}\n";
	CHECK_EQ(store_writer_write(writer, line, strlen(line), &error), -EINVAL);
	io_counters_get(IO_MANIFEST, &manifest);
	io_counters_get(IO_DATA, &data);
	*delete_check = manifest.pages + data.pages;
	store_txn_free(txn);
	store_close(store);
}

TEST(listing_a_nodes_edges_and_checking_a_delete_read_as_many_pages_at_a_million_edges_as_at_ten_thousand)
{
	char small_path[4096], large_path[4096];
	snprintf(small_path, sizeof small_path, "%s/small", harness_temp_directory());
	snprintf(large_path, sizeof large_path, "%s/large", harness_temp_directory());
	/* a quarter of a million under ASan: still 25 times the small one, and the bound below holds there too */
	struct store *small = graph_store_of(small_path, 10000), *large = graph_store_of(large_path, harness_rounds(1000000));
	CHECK(small && large);
	store_close(small);
	store_close(large);
	uint64_t small_listing, small_check, large_listing, large_check;
	graph_read_pages(small_path, &small_listing, &small_check);
	graph_read_pages(large_path, &large_listing, &large_check);
	fprintf(stderr, "    pages: listing %llu / %llu, delete check %llu / %llu (10,000 / %d edges)\n",
		(unsigned long long)small_listing, (unsigned long long)large_listing, (unsigned long long)small_check,
		(unsigned long long)large_check, harness_rounds(1000000));
	/* the trees are at most two levels deeper: the index, and the node lookup */
	CHECK(large_listing <= small_listing + 2);
	CHECK(large_check <= small_check + 4);
}

int main(void)
{
	return harness_run();
}


/* ---- revert ------------------------------------------------------------------------------ */

/* The table's rows on main (NULL if it is not a live table); the caller frees. */
static char *rows_of(struct store *store, const char *table)
{
	struct store_snapshot *snapshot = NULL;
	struct store_table *open = NULL;
	if (store_snapshot_open(store, "main", STORE_LATEST, &snapshot, NULL) < 0)
		return NULL;
	char *text = NULL;
	if (store_table_open(snapshot, table, &open) == 0) {
		uint64_t size = store_table_size(open);
		text = calloc(1, size + 1);
		if (text && store_table_pread(open, text, size, 0) != (ssize_t)size) {
			free(text);
			text = NULL;
		}
		store_table_close(open);
	}
	store_snapshot_release(snapshot);
	return text;
}

static int run_txn_op(struct store *store, const char *drop, const char *from, const char *to)
{
	struct store_txn *txn = NULL;
	struct error_info error;
	int rc = store_txn_begin(store, "main", &txn, &error);
	if (rc == 0)
		rc = drop ? store_txn_drop(txn, drop, &error) : store_txn_rename(txn, from, to, &error);
	if (rc == 0)
		rc = store_txn_commit(txn, NULL, NULL, &error);
	if (rc < 0)
		fprintf(stderr, "    %s\n", error.message);
	store_txn_free(txn);
	return rc;
}

TEST(revert_undoes_a_drop_a_swap_of_names_and_edges_in_one_commit)
{
	struct store *store = open_store();
	CHECK(store);
	struct error_info error;
	CHECK_EQ(write_table(store, "A", STORE_OVERWRITE, "{\"id\":\"1\"}\n", NULL, &error), 0);
	CHECK_EQ(write_table(store, "B", STORE_OVERWRITE, "{\"id\":\"2\"}\n", NULL, &error), 0);
	CHECK_EQ(write_table(store, "Gone", STORE_OVERWRITE, "{\"id\":\"g\"}\n", NULL, &error), 0);
	uint64_t version = store_version(store);
	/* swap A and B, drop Gone, add New */
	CHECK_EQ(run_txn_op(store, NULL, "A", "T"), 0);
	CHECK_EQ(run_txn_op(store, NULL, "B", "A"), 0);
	CHECK_EQ(run_txn_op(store, NULL, "T", "B"), 0);
	CHECK_EQ(run_txn_op(store, "Gone", NULL, NULL), 0);
	CHECK_EQ(write_table(store, "New", STORE_OVERWRITE, "{\"id\":\"n\"}\n", NULL, &error), 0);
	struct store_commit_result result;
	CHECK_EQ(store_revert(store, "main", version, NULL, NULL, &result, &error), 0);
	CHECK_EQ(result.version, version + 6);
	char *a = rows_of(store, "A"), *b = rows_of(store, "B"), *gone = rows_of(store, "Gone"), *added = rows_of(store, "New");
	CHECK(a && strcmp(a, "{\"id\":\"1\"}\n") == 0);
	CHECK(b && strcmp(b, "{\"id\":\"2\"}\n") == 0);
	CHECK(gone && strcmp(gone, "{\"id\":\"g\"}\n") == 0);
	CHECK(added == NULL);
	free(a);
	free(b);
	free(gone);
	CHECK_EQ(store_revert(store, "main", version, NULL, NULL, &result, &error), -ENODATA);
	CHECK_EQ(store_verify(store, NULL, NULL), 0);
	store_close(store);
}
