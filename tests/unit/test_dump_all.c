/* store_dump_all: a `dump --all` stream replays table drops, renames (with the edge schemas
 * a node rename changes), a table created again under a dropped name and merges that move
 * rows, and a loaded store dumps the same stream (the cases the CLI cannot make). */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store.h"

static struct store *open_named(const char *name)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", harness_temp_directory(), name);
	struct error_info error;
	error_info_clear(&error);
	struct store_options options = { .actor = "tester@test" };
	struct store *store = NULL;
	if (store_init(path, &error) < 0 || store_open(path, &options, &store, &error) < 0) {
		fprintf(stderr, "    %s: %s\n", name, error.message);
		return NULL;
	}
	return store;
}

static uint64_t next_based_on;   /* non-zero: the next commit_ops commit is a based write's */

/* One commit of operations: "schema T JSON", "overwrite T ROWS", "merge T ROWS", "drop T",
 * "rename T U" (ROWS: lines joined by '\n'). */
static int commit_ops(struct store *store, const char *message, const char *const *ops, size_t count)
{
	struct store_txn *txn = NULL;
	struct error_info error;
	error_info_clear(&error);
	int rc = store_txn_begin(store, "main", &txn, &error);
	if (rc == 0)
		store_txn_set_based_on(txn, next_based_on);
	next_based_on = 0;
	for (size_t i = 0; rc == 0 && i < count; i++) {
		char verb[16], table[64], rest[512] = "";
		if (sscanf(ops[i], "%15s %63s %511[^\a]", verb, table, rest) < 2)
			return -EINVAL;
		if (strcmp(verb, "schema") == 0) {
			rc = store_txn_schema(txn, table, rest, strlen(rest), &error);
		} else if (strcmp(verb, "drop") == 0) {
			rc = store_txn_drop(txn, table, &error);
		} else if (strcmp(verb, "rename") == 0) {
			rc = store_txn_rename(txn, table, rest, &error);
		} else {
			struct store_writer *writer = NULL;
			rc = store_txn_writer(txn, table, strcmp(verb, "merge") == 0 ? STORE_MERGE : STORE_OVERWRITE, 0,
					      table, &writer, &error);
			if (rc == 0)
				rc = store_writer_write(writer, rest, strlen(rest), &error);
			if (rc == 0)
				rc = store_writer_finish(writer, &error);
		}
	}
	if (rc == 0)
		rc = store_txn_commit(txn, message, NULL, &error);
	if (rc < 0)
		fprintf(stderr, "    %s: %s\n", message, error.message);
	store_txn_free(txn);
	return rc;
}

/* The whole dump --all stream of store, as a NUL-terminated string in a temporary file's bytes. */
static char *dump_all(struct store *store, const char *name)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", harness_temp_directory(), name);
	int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
	struct error_info error;
	error_info_clear(&error);
	if (fd < 0 || store_dump_all(store, fd, NULL, NULL, &error) < 0) {
		fprintf(stderr, "    dump --all: %s\n", error.message);
		return NULL;
	}
	off_t size = lseek(fd, 0, SEEK_END);
	char *text = calloc(1, (size_t)size + 1);
	if (text && pread(fd, text, (size_t)size, 0) != size) {
		free(text);
		text = NULL;
	}
	close(fd);
	return text;
}

/* Loads the stream at name (in the temporary directory) into loaded, a store without commits,
 * saying what it replayed in *replay. 0 or the rc of store_load (its message printed). */
static int load_into(struct store *loaded, const char *name, struct store_load_replay *replay)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", harness_temp_directory(), name);
	*replay = (struct store_load_replay){ 0 };
	struct error_info error;
	error_info_clear(&error);
	int rc = store_load(loaded, "main", path, NULL, NULL, NULL, NULL, replay, NULL, &error);
	if (rc < 0)
		fprintf(stderr, "    load: %s\n", error.message);
	return rc;
}

#define PERSON_SCHEMA "{\"kind\":\"node\",\"properties\":{\"name\":{\"type\":\"string\",\"nullable\":true}}}"
#define KNOWS_SCHEMA "{\"kind\":\"edge\",\"from\":\"Person\",\"to\":\"Person\",\"properties\":{}}"

TEST(renames_drops_a_name_used_again_and_moved_rows_replay_to_the_same_stream)
{
	struct store *store = open_named("original");
	CHECK(store);
	const char *first[] = {
		"schema Person " PERSON_SCHEMA,
		"overwrite Person {\"id\":\"a\",\"name\":\"A\"}\n{\"id\":\"b\",\"name\":\"B\"}\n{\"id\":\"c\",\"name\":\"C\"}\n",
		"schema KNOWS " KNOWS_SCHEMA,
		"overwrite KNOWS {\"id\":\"k1\",\"from\":\"a\",\"to\":\"c\"}\n",
		"overwrite Scratch {\"id\":\"s\"}\n",
	};
	CHECK_EQ(commit_ops(store, "three tables", first, 5), 0);
	const char *moved[] = { "merge Person {\"id\":\"a\",\"name\":\"A\"}\n{\"id\":\"b\",\"@delete\":true}\n" };
	CHECK_EQ(commit_ops(store, "a moves to the end, b goes", moved, 1), 0);
	const char *renamed[] = { "rename Person People", "drop Scratch" };
	CHECK_EQ(commit_ops(store, "Person is People now, Scratch goes", renamed, 2), 0);
	const char *again[] = { "overwrite Scratch {\"id\":\"t\"}\n{\"id\":\"u\"}\n",
				"merge People {\"id\":\"d\",\"name\":\"D\"}\n" };
	CHECK_EQ(commit_ops(store, "a new Scratch", again, 2), 0);
	char *stream = dump_all(store, "original.ndjson");
	CHECK(stream);
	CHECK(strstr(stream, "{\"rename\":\"Person\",\"to\":\"People\"}\n"));
	CHECK(strstr(stream, "{\"drop\":\"Scratch\"}\n"));
	CHECK(strstr(stream, "{\"delete\":\"Person\",\"id\":\"b\"}\n{\"type\":\"Person\",\"data\":{\"id\":\"a\",\"name\":\"A\"}}\n"));

	struct store *loaded = open_named("loaded");
	CHECK(loaded);
	struct store_load_replay replay;
	CHECK_EQ(load_into(loaded, "original.ndjson", &replay), 0);
	CHECK(replay.all);
	CHECK_EQ(replay.commits, 4);
	char *again_stream = dump_all(loaded, "loaded.ndjson");
	CHECK(again_stream);
	if (strcmp(again_stream, stream) != 0)
		fprintf(stderr, "    first stream:\n%s    the loaded store's:\n%s", stream, again_stream);
	CHECK(strcmp(again_stream, stream) == 0);
	free(again_stream);
	free(stream);
	store_close(loaded);
	store_close(store);
}

static size_t count_of(const char *text, const char *needle)
{
	size_t count = 0;
	for (const char *at = text; (at = strstr(at, needle)); at += strlen(needle))
		count++;
	return count;
}

TEST(compacted_tables_replay_as_the_merges_that_made_them)
{
	/* 40 one-row merges: the store compacts the table's fragments as it goes (core/store_compact.c)
	 * and when the writer closes; the stream still says what each commit merged, not an overwrite */
	struct store *store = open_named("compacted");
	CHECK(store);
	const char *first[] = { "schema Person " PERSON_SCHEMA, "overwrite Person {\"id\":\"p00\",\"name\":\"P\"}\n" };
	CHECK_EQ(commit_ops(store, "first", first, 2), 0);
	for (int i = 1; i < 40; i++) {
		char op[96];
		snprintf(op, sizeof op, "merge Person {\"id\":\"p%02d\",\"name\":\"P%d\"}\n", i, i);
		const char *ops[] = { op };
		CHECK_EQ(commit_ops(store, "one row", ops, 1), 0);
	}
	char path[4096];
	snprintf(path, sizeof path, "%s/compacted", harness_temp_directory());
	store_close(store);   /* the close's flush */
	struct store_options options = { .actor = "tester@test" };
	struct error_info error;
	CHECK_EQ(store_open(path, &options, &store, &error), 0);
	char *stream = dump_all(store, "compacted.ndjson");
	CHECK(stream);
	CHECK_EQ(count_of(stream, "{\"overwrite\":\"Person\"}"), 1);   /* the first commit's only */
	CHECK_EQ(count_of(stream, "{\"type\":\"Person\""), 40);         /* each row once */
	struct store *loaded = open_named("loaded");
	CHECK(loaded);
	struct store_load_replay replay;
	CHECK_EQ(load_into(loaded, "compacted.ndjson", &replay), 0);
	CHECK_EQ(replay.commits, 40);
	char *again = dump_all(loaded, "loaded.ndjson");
	CHECK(again && strcmp(again, stream) == 0);
	free(again);
	free(stream);
	store_close(loaded);
	store_close(store);
}

TEST(a_based_commit_keeps_its_base_through_dump_all_and_load_and_a_format_6_store_leaves_it_out)
{
	struct store *store = open_named("based");
	CHECK(store);
	const char *first[] = { "overwrite Person {\"id\":\"a\",\"name\":\"A\"}\n" };
	CHECK_EQ(commit_ops(store, "one row", first, 1), 0);
	const char *meanwhile[] = { "merge Person {\"id\":\"b\",\"name\":\"B\"}\n" };
	CHECK_EQ(commit_ops(store, "another row meanwhile", meanwhile, 1), 0);
	const char *based[] = { "overwrite Person {\"id\":\"a\",\"name\":\"Ay\"}\n{\"id\":\"b\",\"name\":\"B\"}\n" };
	next_based_on = 1;
	CHECK_EQ(commit_ops(store, "edited what version 1 showed", based, 1), 0);
	char *stream = dump_all(store, "based.ndjson");
	CHECK(stream);
	CHECK(strstr(stream, "\"message\":\"edited what version 1 showed\",\"based_on\":1}\n"));

	struct store *loaded = open_named("based-loaded");
	CHECK(loaded);
	struct store_load_replay replay;
	CHECK_EQ(load_into(loaded, "based.ndjson", &replay), 0);
	CHECK_EQ(replay.commits, 3);
	char *again = dump_all(loaded, "based-loaded.ndjson");
	CHECK(again && strcmp(again, stream) == 0);
	struct buf line;
	buf_init(&line);
	CHECK_EQ(store_commit_line(loaded, 3, &line), 0);
	CHECK(strstr(buf_cstr(&line), "\"based_on\":1,"));

	char path[4096];
	snprintf(path, sizeof path, "%s/six", harness_temp_directory());
	struct error_info error;
	struct store *six = NULL;
	CHECK_EQ(store_init_format(path, 6, &error), 0);
	CHECK_EQ(store_open(path, NULL, &six, &error), 0);
	CHECK_EQ(load_into(six, "based.ndjson", &replay), 0);
	buf_reset(&line);
	CHECK_EQ(store_commit_line(six, 3, &line), 0);
	CHECK(strstr(buf_cstr(&line), "based_on") == NULL);
	buf_free(&line);
	free(again);
	free(stream);
	store_close(six);
	store_close(loaded);
	store_close(store);
}

int main(void)
{
	return harness_run();
}
