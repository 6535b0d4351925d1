/*
 * The object-store client (core/s3.h) against a live S3-compatible server:
 * tools/test starts one (tools/objectstore: radosgw on loopback) and sets
 * AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
 * GRAPHFS_TEST_BUCKET. Without GRAPHFS_TEST_BUCKET the tests that need the
 * server are skipped (meson's exit code 77), with a line saying how to run them.
 * Each run works under its own random prefix, so runs never see each other.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "io.h"
#include "s3.h"
#include "ulid.h"

static char run_prefix[64];

/* The test bucket's location under this run's prefix (and sub, if given). */
static int test_location(const char *sub, struct s3_location *out)
{
	char text[256];
	struct error_info error;
	if (!run_prefix[0]) {
		struct ulid id;
		char id_text[ULID_TEXT_SIZE];
		ulid_new(&id);
		snprintf(run_prefix, sizeof run_prefix, "test-s3/%s", ulid_format(&id, id_text));
	}
	snprintf(text, sizeof text, "s3://%s/%s/%s", getenv("GRAPHFS_TEST_BUCKET"), run_prefix, sub);
	int rc = s3_location_parse(text, out, &error);
	if (rc)
		fprintf(stderr, "    %s\n", error.message);
	return rc;
}

static int open_client(const char *sub, struct s3_client **out)
{
	struct s3_location location;
	struct error_info error;
	int rc = test_location(sub, &location);
	if (rc == 0 && (rc = s3_client_open(&location, out, &error)))
		fprintf(stderr, "    %s\n", error.message);
	return rc;
}

/* ---- without a server ------------------------------------------------------------------- */

/* The four AWS_* variables as they were, to put back. */
static const char *const aws_names[] = { "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY" };
static char *aws_saved[4];

static void aws_save(void)
{
	for (int i = 0; i < 4; i++)
		aws_saved[i] = getenv(aws_names[i]) ? strdup(getenv(aws_names[i])) : NULL;
}

static void aws_restore(void)
{
	for (int i = 0; i < 4; i++) {
		if (aws_saved[i])
			setenv(aws_names[i], aws_saved[i], 1);
		else
			unsetenv(aws_names[i]);
		free(aws_saved[i]);
		aws_saved[i] = NULL;
	}
}

static void check_location_from_environment(void)
{
	setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9/", 1);
	setenv("AWS_REGION", "eu-west-3", 1);
	setenv("AWS_ACCESS_KEY_ID", "access", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "secret", 1);
	struct s3_location location;
	struct error_info error;
	CHECK_EQ(s3_location_parse("s3://my-bucket/some/prefix/", &location, &error), 0);
	CHECK(strcmp(location.bucket, "my-bucket") == 0);
	CHECK(strcmp(location.prefix, "some/prefix/") == 0);
	CHECK(strcmp(location.endpoint, "http://127.0.0.1:9") == 0);
	CHECK(strcmp(location.region, "eu-west-3") == 0);
	CHECK_EQ(s3_location_parse("s3://my-bucket", &location, &error), 0);
	CHECK(strcmp(location.prefix, "") == 0);
	unsetenv("AWS_ENDPOINT_URL");
	CHECK_EQ(s3_location_parse("s3://b", &location, &error), 0);
	CHECK(strcmp(location.endpoint, "https://s3.eu-west-3.amazonaws.com") == 0);
	CHECK(s3_location_is_s3("s3://b/x"));
	CHECK(!s3_location_is_s3("/srv/store"));
}

TEST(a_location_takes_bucket_and_prefix_from_the_text_and_the_rest_from_the_environment)
{
	aws_save();
	check_location_from_environment();
	aws_restore();
}

TEST(a_location_without_credentials_says_which_variables_to_set)
{
	aws_save();
	unsetenv("AWS_ACCESS_KEY_ID");
	struct s3_location location;
	struct error_info error;
	int rc = s3_location_parse("s3://b/p", &location, &error);
	aws_restore();
	CHECK_EQ(rc, -EINVAL);
	CHECK(strstr(error.message, "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY") != NULL);
	CHECK_EQ(s3_location_parse("s3://Upper/p", &location, &error), -EINVAL);
	CHECK_EQ(s3_location_parse("/not/s3", &location, &error), -EINVAL);
	CHECK_EQ(s3_location_parse("s3:///p", &location, &error), -EINVAL);
}

TEST(a_key_outside_the_safe_characters_is_refused_before_any_request)
{
	struct s3_location location = { .endpoint = "http://127.0.0.1:9", .region = "us-east-1",
					.access_key = "a", .secret_key = "s", .bucket = "b" };
	struct s3_client *client;
	struct error_info error;
	CHECK_EQ(s3_client_open(&location, &client, &error), 0);
	CHECK_EQ(s3_put(client, "a key", "x", 1, S3_ALWAYS, &error), -EINVAL);
	CHECK_EQ(s3_put(client, "", "x", 1, S3_ALWAYS, &error), -EINVAL);
	CHECK_EQ(s3_head(client, "k?x=1", NULL, &error), -EINVAL);
	struct s3_counters counters;
	s3_counters_get(client, &counters);
	CHECK_EQ(counters.puts + counters.heads, 0);
	s3_client_free(client);
}

TEST(an_unreachable_endpoint_is_a_connection_error_naming_it)
{
	struct s3_location location = { .endpoint = "http://127.0.0.1:9", .region = "us-east-1",
					.access_key = "a", .secret_key = "s", .bucket = "b" };
	struct s3_client *client;
	struct error_info error;
	CHECK_EQ(s3_client_open(&location, &client, &error), 0);
	struct buf out;
	buf_init(&out);
	CHECK_EQ(s3_get(client, "k", 0, 0, &out, &error), -ECONNREFUSED);   /* not -EIO: nothing is damaged */
	CHECK(strstr(error.message, "http://127.0.0.1:9") != NULL);
	/* a conditional create is never repeated: its outcome would be unknown */
	CHECK_EQ(s3_put(client, "k", "x", 1, S3_IF_ABSENT, &error), -ECONNREFUSED);
	CHECK(strstr(error.message, "the outcome is unknown") != NULL);
	struct s3_counters counters;
	s3_counters_get(client, &counters);
	CHECK_EQ(counters.gets, 3);   /* a read is tried three times */
	CHECK_EQ(counters.puts, 1);
	buf_free(&out);
	s3_client_free(client);
}

/* ---- against the server --------------------------------------------------------------- */

static bool have_server(void)
{
	return getenv("GRAPHFS_TEST_BUCKET") != NULL;
}

TEST(a_conditional_create_succeeds_once_and_then_reports_that_the_object_exists)
{
	struct s3_client *client;
	struct error_info error;
	CHECK_EQ(open_client("create", &client), 0);
	CHECK_EQ(s3_put(client, "root/1", "first", 5, S3_IF_ABSENT, &error), 0);
	CHECK_EQ(s3_put(client, "root/1", "second", 6, S3_IF_ABSENT, &error), -EEXIST);
	CHECK(strstr(error.message, "412") != NULL);
	struct buf out;
	buf_init(&out);
	CHECK_EQ(s3_get(client, "root/1", 0, 0, &out, &error), 0);
	CHECK(out.size == 5 && memcmp(out.data, "first", 5) == 0);
	/* an unconditional put replaces */
	CHECK_EQ(s3_put(client, "root/1", "third", 5, S3_ALWAYS, &error), 0);
	buf_reset(&out);
	CHECK_EQ(s3_get(client, "root/1", 0, 0, &out, &error), 0);
	CHECK(out.size == 5 && memcmp(out.data, "third", 5) == 0);
	buf_free(&out);
	s3_client_free(client);
}

struct racer {
	int winner_of[100];   /* per key: 1 if this racer created it */
	int id;
	int rc;
};

static void *race(void *context)
{
	struct racer *racer = context;
	struct s3_client *client;
	if ((racer->rc = open_client("race", &client)))
		return NULL;
	for (int key = 0; key < 100 && racer->rc == 0; key++) {
		char name[32], body[16];
		struct error_info error;
		snprintf(name, sizeof name, "k/%03d", key);
		snprintf(body, sizeof body, "racer %d", racer->id);
		int rc = s3_put(client, name, body, strlen(body), S3_IF_ABSENT, &error);
		if (rc == 0)
			racer->winner_of[key] = 1;
		else if (rc != -EEXIST)
			racer->rc = rc;
	}
	s3_client_free(client);
	return NULL;
}

TEST(two_clients_racing_to_create_the_same_keys_have_exactly_one_winner_per_key)
{
	struct racer racers[2] = { { .id = 0 }, { .id = 1 } };
	pthread_t threads[2];
	for (int i = 0; i < 2; i++)
		CHECK_EQ(pthread_create(&threads[i], NULL, race, &racers[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(threads[i], NULL);
	CHECK_EQ(racers[0].rc, 0);
	CHECK_EQ(racers[1].rc, 0);
	struct s3_client *client;
	struct error_info error;
	CHECK_EQ(open_client("race", &client), 0);
	struct buf out;
	buf_init(&out);
	for (int key = 0; key < 100; key++) {
		CHECK_EQ(racers[0].winner_of[key] + racers[1].winner_of[key], 1);
		/* and the object is the winner's */
		char name[32], expected[16];
		snprintf(name, sizeof name, "k/%03d", key);
		snprintf(expected, sizeof expected, "racer %d", racers[0].winner_of[key] ? 0 : 1);
		buf_reset(&out);
		CHECK_EQ(s3_get(client, name, 0, 0, &out, &error), 0);
		CHECK(out.size == strlen(expected) && memcmp(out.data, expected, out.size) == 0);
	}
	buf_free(&out);
	s3_client_free(client);
}

TEST(a_ranged_get_returns_exactly_those_bytes)
{
	struct s3_client *client;
	struct error_info error;
	CHECK_EQ(open_client("range", &client), 0);
	char bytes[10000];
	for (size_t i = 0; i < sizeof bytes; i++)
		bytes[i] = (char)(i * 7);
	CHECK_EQ(s3_put(client, "segment", bytes, sizeof bytes, S3_IF_ABSENT, &error), 0);
	struct buf out;
	buf_init(&out);
	CHECK_EQ(s3_get(client, "segment", 4096, 100, &out, &error), 0);
	CHECK(out.size == 100 && memcmp(out.data, bytes + 4096, 100) == 0);
	buf_reset(&out);
	CHECK_EQ(s3_get(client, "segment", 9990, 0, &out, &error), 0);   /* to the end */
	CHECK(out.size == 10 && memcmp(out.data, bytes + 9990, 10) == 0);
	buf_reset(&out);
	CHECK_EQ(s3_get(client, "segment", 10000, 1, &out, &error), -ERANGE);
	CHECK_EQ(out.size, 0);
	CHECK_EQ(s3_get(client, "missing", 0, 0, &out, &error), -ENOENT);
	buf_free(&out);
	s3_client_free(client);
}

TEST(a_ranged_get_names_the_size_of_the_whole_object)
{
	struct s3_client *client;
	struct error_info error;
	CHECK_EQ(open_client("sized", &client), 0);
	char bytes[5000] = { 1 };
	CHECK_EQ(s3_put(client, "piece", bytes, sizeof bytes, S3_IF_ABSENT, &error), 0);
	struct buf out;
	buf_init(&out);
	uint64_t size = 0;
	/* a part (206) names the size in Content-Range; a range past the end is cut there */
	CHECK_EQ(s3_get_sized(client, "piece", 100, 65536, &out, &size, &error), 0);
	CHECK_EQ(out.size, 4900);
	CHECK_EQ(size, 5000);
	buf_reset(&out);
	size = 0;
	CHECK_EQ(s3_get_sized(client, "piece", 0, 0, &out, &size, &error), 0);   /* the whole object (200) */
	CHECK_EQ(size, 5000);
	buf_free(&out);
	s3_client_free(client);
}

TEST(a_listing_page_size_comes_from_the_environment_and_a_bad_one_is_named)
{
	struct s3_location location;
	struct error_info error;
	setenv("GRAPHFS_S3_LIST_PAGE", "7", 1);
	CHECK_EQ(s3_location_parse("s3://bucket/prefix", &location, &error), 0);
	CHECK_EQ(location.list_page, 7);
	setenv("GRAPHFS_S3_LIST_PAGE", "lots", 1);
	CHECK_EQ(s3_location_parse("s3://bucket/prefix", &location, &error), -EINVAL);
	CHECK(strstr(error.message, "GRAPHFS_S3_LIST_PAGE") != NULL);
	unsetenv("GRAPHFS_S3_LIST_PAGE");
}

TEST(head_gives_the_size_and_a_missing_object_is_enoent)
{
	struct s3_client *client;
	struct error_info error;
	CHECK_EQ(open_client("head", &client), 0);
	CHECK_EQ(s3_put(client, "object", "0123456789", 10, S3_ALWAYS, &error), 0);
	uint64_t size = 0;
	CHECK_EQ(s3_head(client, "object", &size, &error), 0);
	CHECK_EQ(size, 10);
	CHECK_EQ(s3_head(client, "absent", &size, &error), -ENOENT);
	s3_client_free(client);
}

struct listing {
	char keys[64][64];
	uint64_t sizes[64];
	int count;
};

static int collect_key(const char *key, uint64_t size, void *context)
{
	struct listing *listing = context;
	if (listing->count == 64)
		return -ENOSPC;
	snprintf(listing->keys[listing->count], sizeof listing->keys[0], "%s", key);
	listing->sizes[listing->count++] = size;
	return 0;
}

TEST(a_listing_visits_every_key_under_a_prefix_in_order_across_pages)
{
	struct s3_location location;
	struct s3_client *client;
	struct error_info error;
	CHECK_EQ(test_location("list", &location), 0);
	location.list_page = 7;   /* 25 keys: four pages */
	CHECK_EQ(s3_client_open(&location, &client, &error), 0);
	for (int i = 24; i >= 0; i--) {
		char key[32];
		snprintf(key, sizeof key, "tails/%04d", i * 10);
		CHECK_EQ(s3_put(client, key, key, (size_t)i, S3_IF_ABSENT, &error), 0);
	}
	CHECK_EQ(s3_put(client, "other/x", "x", 1, S3_IF_ABSENT, &error), 0);
	static struct listing listing;
	memset(&listing, 0, sizeof listing);
	CHECK_EQ(s3_list(client, "tails/", NULL, collect_key, &listing, &error), 0);
	CHECK_EQ(listing.count, 25);
	for (int i = 0; i < 25; i++) {
		char key[32];
		snprintf(key, sizeof key, "tails/%04d", i * 10);
		CHECK(strcmp(listing.keys[i], key) == 0);
		CHECK_EQ(listing.sizes[i], (uint64_t)i);
	}
	struct s3_counters counters;
	s3_counters_get(client, &counters);
	CHECK_EQ(counters.lists, 4);
	/* after a key: only the later ones */
	memset(&listing, 0, sizeof listing);
	CHECK_EQ(s3_list(client, "tails/", "tails/0200", collect_key, &listing, &error), 0);
	CHECK_EQ(listing.count, 4);
	CHECK(strcmp(listing.keys[0], "tails/0210") == 0);
	s3_client_free(client);
}

TEST(delete_removes_the_object_and_deleting_again_is_not_an_error)
{
	struct s3_client *client;
	struct error_info error;
	CHECK_EQ(open_client("delete", &client), 0);
	CHECK_EQ(s3_put(client, "pin", "x", 1, S3_ALWAYS, &error), 0);
	CHECK_EQ(s3_delete(client, "pin", &error), 0);
	CHECK_EQ(s3_head(client, "pin", NULL, &error), -ENOENT);
	CHECK_EQ(s3_delete(client, "pin", &error), 0);
	s3_client_free(client);
}

TEST(wrong_credentials_are_refused_with_eacces)
{
	struct s3_location location;
	struct s3_client *client;
	struct error_info error;
	CHECK_EQ(test_location("auth", &location), 0);
	snprintf(location.secret_key, sizeof location.secret_key, "not-the-secret");
	CHECK_EQ(s3_client_open(&location, &client, &error), 0);
	CHECK_EQ(s3_put(client, "x", "x", 1, S3_ALWAYS, &error), -EACCES);
	CHECK(strstr(error.message, "403") != NULL);
	s3_client_free(client);
}

TEST(counters_count_each_request_and_its_bytes)
{
	struct s3_client *client;
	struct error_info error;
	CHECK_EQ(open_client("counters", &client), 0);
	struct buf out;
	buf_init(&out);
	CHECK_EQ(s3_put(client, "a", "0123456789", 10, S3_ALWAYS, &error), 0);
	CHECK_EQ(s3_get(client, "a", 2, 3, &out, &error), 0);
	CHECK_EQ(s3_head(client, "a", NULL, &error), 0);
	CHECK_EQ(s3_delete(client, "a", &error), 0);
	struct s3_counters counters;
	s3_counters_get(client, &counters);
	CHECK_EQ(counters.puts, 1);
	CHECK_EQ(counters.gets, 1);
	CHECK_EQ(counters.heads, 1);
	CHECK_EQ(counters.deletes, 1);
	CHECK_EQ(counters.bytes_sent, 10);
	CHECK_EQ(counters.bytes_received, 3);
	buf_free(&out);
	s3_client_free(client);
}

TEST(the_before_request_failpoint_fails_a_request_without_sending_it)
{
	struct s3_client *client;
	struct error_info error;
	CHECK_EQ(open_client("failpoint", &client), 0);
	CHECK_EQ(io_failpoint_arm("object_store.before_request", IO_FAILPOINT_ERROR), 0);
	CHECK(s3_put(client, "never", "x", 1, S3_IF_ABSENT, &error) < 0);
	CHECK(strstr(error.message, "object_store.before_request") != NULL);
	CHECK_EQ(s3_head(client, "never", NULL, &error), -ENOENT);
	s3_client_free(client);
}

/* ---- WHOLE objects through the io layer: chunks and readahead (core/io_remote.c) ------- */

#define MIB (1u << 20)

/* The io directory of this run's prefix + sub (an s3:// location), or -errno. */
static int test_directory(const char *sub)
{
	struct s3_location unused;
	int rc = test_location(sub, &unused);   /* makes the run's prefix */
	if (rc)
		return rc;
	char text[256];
	snprintf(text, sizeof text, "s3://%s/%s/%s", getenv("GRAPHFS_TEST_BUCKET"), run_prefix, sub);
	return io_directory_open(text);
}

/* Stores an object of size bytes (byte i is (i * 131) >> 8 truncated) as name. */
static void store_object(int directory, const char *name, uint8_t *bytes, size_t size)
{
	for (size_t i = 0; i < size; i++)
		bytes[i] = (uint8_t)((i * 131) >> 8);
	struct io_file file = { -1, IO_DATA, NULL };
	CHECK_EQ(io_file_open(directory, name, O_RDWR | O_CREAT | O_EXCL, IO_DATA, &file), 0);
	CHECK_EQ(io_pwrite(&file, bytes, size, 0), 0);
	CHECK_EQ(io_fsync(&file), 0);
	io_file_close(&file);
}

/* The readahead tests' object: size bytes stored as name under this run's "readahead"
 * prefix; its directory, and its bytes (to free; NULL if that failed). */
static void readahead_object(const char *name, size_t size, int *directory_out, uint8_t **bytes_out)
{
	*bytes_out = NULL;
	*directory_out = test_directory("readahead");
	CHECK(*directory_out >= 0);
	*bytes_out = malloc(size);
	store_object(*directory_out, name, *bytes_out, size);
}

/* Reads name from start to end in 64 KiB reads; checks every byte; the GETs and bytes it took. */
static void read_through(int directory, const char *name, const uint8_t *expected, size_t size,
			 uint64_t *gets_out, uint64_t *bytes_out)
{
	struct io_file file = { -1, IO_DATA, NULL };
	CHECK_EQ(io_file_open(directory, name, O_RDONLY, IO_DATA, &file), 0);
	struct s3_counters before, after;
	s3_counters_process(&before);
	uint8_t *got = malloc(64 << 10);
	bool same = true;
	for (size_t at = 0; at < size; at += 64 << 10) {
		size_t length = size - at < (64u << 10) ? size - at : 64u << 10;
		CHECK_EQ(io_pread(&file, got, length, at), 0);
		same = same && memcmp(got, expected + at, length) == 0;
	}
	CHECK(same);
	free(got);
	io_file_close(&file);
	s3_counters_process(&after);
	*gets_out = after.gets - before.gets;
	*bytes_out = after.bytes_received - before.bytes_received;
}

TEST(a_whole_object_read_from_start_to_end_fetches_each_byte_once_in_few_gets)
{
	size_t size = 12 * MIB + 123;
	uint8_t *bytes;
	int directory;
	readahead_object("sequential", size, &directory, &bytes);
	CHECK(bytes != NULL);
	uint64_t gets, received;
	read_through(directory, "sequential", bytes, size, &gets, &received);
	/* two 1 MiB chunks, then readaheads of 4 MiB: [2, 6), [6, 10), [10, end) */
	CHECK_EQ(gets, 5);
	CHECK_EQ(received, size);
	free(bytes);
}

TEST(reads_here_and_there_in_a_whole_object_start_no_readahead)
{
	size_t size = 8 * MIB;
	uint8_t *bytes;
	int directory;
	readahead_object("random", size, &directory, &bytes);
	CHECK(bytes != NULL);
	struct io_file file = { -1, IO_DATA, NULL };
	CHECK_EQ(io_file_open(directory, "random", O_RDONLY, IO_DATA, &file), 0);
	struct s3_counters before, after;
	s3_counters_process(&before);
	uint8_t got[4096];
	const uint64_t offsets[] = { 5 * MIB + 17, 1 * MIB, 7 * MIB + 4000, 5 * MIB + 9000 };
	for (size_t i = 0; i < 4; i++) {
		CHECK_EQ(io_pread(&file, got, sizeof got, offsets[i]), 0);
		CHECK(memcmp(got, bytes + offsets[i], sizeof got) == 0);
	}
	s3_counters_process(&after);
	CHECK_EQ(after.gets - before.gets, 3);   /* the chunks at 5, 1 and 7 MiB; the last read is cached */
	CHECK_EQ(after.bytes_received - before.bytes_received, 3 * MIB);
	io_file_close(&file);
	free(bytes);
}

TEST(a_failed_readahead_is_read_again_by_the_reader_and_nothing_is_lost)
{
	size_t size = 12 * MIB + 123;
	uint8_t *bytes;
	int directory;
	readahead_object("failing", size, &directory, &bytes);
	CHECK(bytes != NULL);
	CHECK_EQ(io_failpoint_arm("object_store.readahead", IO_FAILPOINT_ERROR), 0);   /* the first one fails */
	uint64_t gets, received;
	read_through(directory, "failing", bytes, size, &gets, &received);
	/* [0, 1) and [1, 2); the readahead of [2, 6) fails unsent, so the reader fetches [2, 3)
	 * itself; then readaheads [3, 7), [7, 11), [11, end) */
	CHECK_EQ(gets, 6);
	CHECK_EQ(received, size);
	free(bytes);
}

TEST(around_a_fork_no_readahead_runs_and_reads_go_on_without_one)
{
	size_t size = 12 * MIB + 123;
	uint8_t *bytes, *got = malloc(size);
	int directory;
	readahead_object("paused", size, &directory, &bytes);
	CHECK(bytes != NULL);
	struct io_file file = { -1, IO_DATA, NULL };
	CHECK_EQ(io_file_open(directory, "paused", O_RDONLY, IO_DATA, &file), 0);
	struct s3_counters before, now;
	s3_counters_process(&before);
	CHECK_EQ(io_pread(&file, got, 2 * MIB, 0), 0);   /* [0, 1), [1, 2): a readahead of [2, 6) starts */
	io_threads_pause();                              /* returns once it has ended */
	s3_counters_process(&now);
	CHECK_EQ(now.gets - before.gets, 3);
	CHECK_EQ(now.bytes_received - before.bytes_received, 6 * MIB);
	CHECK_EQ(io_pread(&file, got + 2 * MIB, 6 * MIB, 2 * MIB), 0);   /* [2, 6) is there; [6, 7), [7, 8) read alone */
	s3_counters_process(&now);
	CHECK_EQ(now.gets - before.gets, 5);
	io_threads_resume();
	CHECK_EQ(io_pread(&file, got + 8 * MIB, size - 8 * MIB, 8 * MIB), 0);   /* [8, 9), then a readahead of the rest */
	s3_counters_process(&now);
	CHECK_EQ(now.gets - before.gets, 7);
	CHECK_EQ(now.bytes_received - before.bytes_received, size);
	CHECK(memcmp(got, bytes, size) == 0);
	io_file_close(&file);
	free(bytes);
	free(got);
}

/* ---- multipart uploads (s3_put_descriptor beyond the part size) ------------------------ */

/* A client whose uploads are multipart beyond 5 MiB (GRAPHFS_S3_PART_BYTES). */
static int open_part_client(const char *sub, struct s3_client **out)
{
	setenv("GRAPHFS_S3_PART_BYTES", "5242880", 1);
	int rc = open_client(sub, out);
	unsetenv("GRAPHFS_S3_PART_BYTES");
	return rc;
}

/* An unnamed file of size bytes (byte i is i * 7 + i / 4096) and its bytes. */
static int part_file(size_t size, uint8_t **bytes_out)
{
	uint8_t *bytes = malloc(size);
	for (size_t i = 0; i < size; i++)
		bytes[i] = (uint8_t)(i * 7 + i / 4096);
	FILE *file = tmpfile();
	fwrite(bytes, 1, size, file);
	fflush(file);
	*bytes_out = bytes;
	return dup(fileno(file));   /* the FILE goes with the process */
}

TEST(an_upload_beyond_the_part_size_goes_in_parts_and_reads_back_whole)
{
	struct s3_client *client;
	struct error_info error;
	CHECK_EQ(open_part_client("multipart", &client), 0);
	size_t size = 12 * MIB + 5;
	uint8_t *bytes;
	int descriptor = part_file(size, &bytes);
	CHECK_EQ(s3_put_descriptor(client, "big", descriptor, size, S3_ALWAYS, &error), 0);
	struct s3_counters counters;
	s3_counters_get(client, &counters);
	CHECK_EQ(counters.puts, 5);   /* start, three parts of 5, 5 and 2 MiB, completion */
	CHECK(counters.bytes_sent > size && counters.bytes_sent < size + 1024);   /* and the completion's XML */
	struct buf out;
	buf_init(&out);
	CHECK_EQ(s3_get(client, "big", 0, 0, &out, &error), 0);
	CHECK(out.size == size && memcmp(out.data, bytes, size) == 0);
	buf_free(&out);
	close(descriptor);
	free(bytes);
	s3_client_free(client);
}

TEST(a_conditional_upload_in_parts_onto_an_existing_key_is_refused_before_it_starts)
{
	struct s3_client *client;
	struct error_info error;
	CHECK_EQ(open_part_client("multipart-exists", &client), 0);
	CHECK_EQ(s3_put(client, "taken", "first", 5, S3_IF_ABSENT, &error), 0);
	size_t size = 6 * MIB;
	uint8_t *bytes;
	int descriptor = part_file(size, &bytes);
	CHECK_EQ(s3_put_descriptor(client, "taken", descriptor, size, S3_IF_ABSENT, &error), -EEXIST);
	struct s3_counters counters;
	s3_counters_get(client, &counters);
	CHECK_EQ(counters.puts, 1);   /* the first object's; the upload never started */
	struct buf out;
	buf_init(&out);
	CHECK_EQ(s3_get(client, "taken", 0, 0, &out, &error), 0);
	CHECK(out.size == 5 && memcmp(out.data, "first", 5) == 0);
	/* and a new key is created in parts */
	CHECK_EQ(s3_put_descriptor(client, "fresh", descriptor, size, S3_IF_ABSENT, &error), 0);
	CHECK_EQ(s3_head(client, "fresh", NULL, &error), 0);
	buf_free(&out);
	close(descriptor);
	free(bytes);
	s3_client_free(client);
}

TEST(a_failed_part_aborts_the_upload_and_no_object_appears)
{
	struct s3_client *client;
	struct error_info error;
	CHECK_EQ(open_part_client("multipart-abort", &client), 0);
	size_t size = 11 * MIB;
	uint8_t *bytes;
	int descriptor = part_file(size, &bytes);
	CHECK_EQ(io_failpoint_arm("object_store.before_part", IO_FAILPOINT_ERROR), 0);
	CHECK(s3_put_descriptor(client, "never", descriptor, size, S3_ALWAYS, &error) < 0);
	CHECK(strstr(error.message, "part 1") != NULL);
	CHECK_EQ(s3_head(client, "never", NULL, &error), -ENOENT);
	struct s3_counters counters;
	s3_counters_get(client, &counters);
	CHECK_EQ(counters.puts, 1);      /* the start; no part was sent */
	CHECK_EQ(counters.deletes, 1);   /* the abort */
	close(descriptor);
	free(bytes);
	s3_client_free(client);
}

TEST(a_part_size_outside_what_s3_allows_is_refused_with_the_range)
{
	struct s3_location location;
	setenv("GRAPHFS_S3_PART_BYTES", "1000", 1);
	struct error_info error;
	char text[256];
	snprintf(text, sizeof text, "s3://%s/x", getenv("GRAPHFS_TEST_BUCKET"));
	CHECK_EQ(s3_location_parse(text, &location, &error), -EINVAL);
	CHECK(strstr(error.message, "GRAPHFS_S3_PART_BYTES") != NULL);
	unsetenv("GRAPHFS_S3_PART_BYTES");
	CHECK_EQ(s3_location_parse(text, &location, &error), 0);
	CHECK_EQ(location.part_size, 64u << 20);
}

int main(void)
{
	if (!have_server()) {
		fprintf(stderr, "test_s3: GRAPHFS_TEST_BUCKET is not set: run tools/test (it starts tools/objectstore), "
				"or: tools/objectstore start DIR; eval \"$(tools/objectstore env DIR)\"\n");
		return 77;
	}
	return harness_run();
}
