/* merge and diff at the store API (core/store_merge.c, core/store_diff.c): table-level
 * merges (renames, drops, creations), the cost of a one-row merge and diff, diffs of
 * every pair of versions against a model. */
#include "harness.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "buf.h"
#include "io.h"
#include "store.h"

/* ---- helpers ------------------------------------------------------------------ */

static struct store *open_store(void)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/store", harness_temp_directory());
	struct error_info error;
	struct stat status;
	if (stat(path, &status) != 0 && store_init(path, &error) < 0)
		return NULL;
	struct store_options options = { .actor = "tester@test" };
	struct store *store = NULL;
	if (store_open(path, &options, &store, &error) < 0) {
		fprintf(stderr, "    store_open: %s\n", error.message);
		return NULL;
	}
	return store;
}

static int write_rows(struct store *store, const char *branch, const char *table, enum store_write_mode mode,
		      const char *text)
{
	struct store_txn *txn = NULL;
	struct store_writer *writer = NULL;
	struct error_info error;
	int rc = store_txn_begin(store, branch, &txn, &error);
	if (rc == 0)
		rc = store_txn_writer(txn, table, mode, 0, NULL, &writer, &error);
	if (rc == 0)
		rc = store_writer_write(writer, text, strlen(text), &error);
	if (rc == 0)
		rc = store_writer_finish(writer, &error);
	if (rc == 0)
		rc = store_txn_commit(txn, NULL, NULL, &error);
	if (rc < 0)
		fprintf(stderr, "    write %s on %s: %s\n", table, branch, error.message);
	store_txn_free(txn);
	return rc;
}

/* A drop (to NULL) or a rename of table on branch, as one commit. */
static int change_table(struct store *store, const char *branch, const char *table, const char *to)
{
	struct store_txn *txn = NULL;
	struct error_info error;
	int rc = store_txn_begin(store, branch, &txn, &error);
	if (rc == 0)
		rc = to ? store_txn_rename(txn, table, to, &error) : store_txn_drop(txn, table, &error);
	if (rc == 0)
		rc = store_txn_commit(txn, NULL, NULL, &error);
	if (rc < 0)
		fprintf(stderr, "    change %s on %s: %s\n", table, branch, error.message);
	store_txn_free(txn);
	return rc;
}

static int branch(struct store *store, const char *name, const char *from)
{
	struct error_info error;
	return store_branch_create(store, name, from, NULL, &error);
}

/* The bytes of table on branch ("" when it does not exist). */
static char *table_text(struct store *store, const char *branch_name, const char *table)
{
	struct store_snapshot *snapshot;
	struct error_info error;
	if (store_snapshot_open(store, branch_name, STORE_LATEST, &snapshot, &error) < 0)
		return NULL;
	struct store_table *opened;
	char *text = NULL;
	if (store_table_open(snapshot, table, &opened) == 0) {
		uint64_t size = store_table_size(opened);
		text = calloc(1, size + 1);
		if (text && store_table_pread(opened, text, size, 0) != (ssize_t)size) {
			free(text);
			text = NULL;
		}
		store_table_close(opened);
	} else {
		text = strdup("");
	}
	store_snapshot_release(snapshot);
	return text;
}

static bool table_is(struct store *store, const char *branch_name, const char *table, const char *expected)
{
	char *text = table_text(store, branch_name, table);
	bool same = text && strcmp(text, expected) == 0;
	if (!same)
		fprintf(stderr, "    %s on %s is:\n%s    expected:\n%s", table, branch_name, text ? text : "(unreadable)\n",
			expected);
	free(text);
	return same;
}

struct conflicts {
	char kinds[1024];
	size_t count;
};

static void note_conflict(const char *table, const char *line, size_t size, void *context)
{
	(void)table;
	(void)size;
	struct conflicts *conflicts = context;
	const char *kind = strstr(line, "\"kind\":\"");
	if (kind) {
		kind += 8;
		size_t length = (size_t)(strchr(kind, '"') - kind);
		size_t used = strlen(conflicts->kinds);
		snprintf(conflicts->kinds + used, sizeof conflicts->kinds - used, "%s%.*s", used ? "," : "", (int)length,
			 kind);
	}
	conflicts->count++;
}

static int merge(struct store *store, const char *source, const char *dest, enum store_merge_strategy strategy,
		 struct conflicts *conflicts, struct store_merge_result *result)
{
	struct store_merge_options options = { .strategy = strategy };
	struct error_info error;
	memset(conflicts, 0, sizeof *conflicts);
	int rc = store_merge(store, source, dest, &options, note_conflict, conflicts, result, &error);
	if (rc < 0)
		fprintf(stderr, "    merge %s into %s: %s\n", source, dest, error.message);
	return rc;
}

/* Whether merging source into dest publishes nothing and reports exactly these conflict kinds. */
static bool merge_refused(struct store *store, const char *source, const char *dest, const char *kinds)
{
	struct conflicts conflicts;
	struct store_merge_result result;
	uint64_t before = store_version(store);
	bool refused = merge(store, source, dest, STORE_MERGE_NO_STRATEGY, &conflicts, &result) == 0 &&
		       result.outcome == STORE_MERGE_CONFLICTS && strcmp(conflicts.kinds, kinds) == 0 &&
		       store_version(store) == before;
	if (!refused)
		fprintf(stderr, "    merge %s into %s: outcome %d, conflicts \"%s\" (expected \"%s\")\n", source, dest,
			(int)result.outcome, conflicts.kinds, kinds);
	return refused;
}

/* ---- table level ------------------------------------------------------------------ */

TEST(a_rename_on_one_side_and_row_edits_on_the_other_merge_into_the_renamed_table)
{
	struct store *store = open_store();
	CHECK(store != NULL);
	CHECK_EQ(write_rows(store, "main", "Person", STORE_OVERWRITE, "{\"id\":\"a\",\"n\":1}\n{\"id\":\"b\",\"n\":2}\n"), 0);
	CHECK_EQ(branch(store, "dev", "main"), 0);
	CHECK_EQ(change_table(store, "main", "Person", "People"), 0);
	CHECK_EQ(write_rows(store, "main", "People", STORE_MERGE, "{\"id\":\"c\",\"n\":3}\n"), 0);
	CHECK_EQ(write_rows(store, "dev", "Person", STORE_MERGE, "{\"id\":\"a\",\"n\":10}\n"), 0);
	struct conflicts conflicts;
	struct store_merge_result result;
	CHECK_EQ(merge(store, "dev", "main", STORE_MERGE_NO_STRATEGY, &conflicts, &result), 0);
	CHECK_EQ(result.outcome, STORE_MERGE_MERGED);
	CHECK(table_is(store, "main", "People", "{\"id\":\"b\",\"n\":2}\n{\"id\":\"c\",\"n\":3}\n{\"id\":\"a\",\"n\":10}\n"));
	CHECK(table_is(store, "main", "Person", ""));
	/* and the other way: the rename comes over to dev */
	CHECK_EQ(merge(store, "main", "dev", STORE_MERGE_NO_STRATEGY, &conflicts, &result), 0);
	CHECK_EQ(result.outcome, STORE_MERGE_FAST_FORWARD);
	CHECK(table_is(store, "dev", "Person", ""));
	CHECK(table_is(store, "dev", "People", "{\"id\":\"b\",\"n\":2}\n{\"id\":\"c\",\"n\":3}\n{\"id\":\"a\",\"n\":10}\n"));
	CHECK_EQ(store_verify(store, NULL, NULL), 0);
	store_close(store);
}

TEST(a_table_renamed_differently_on_the_two_sides_is_a_table_conflict)
{
	struct store *store = open_store();
	CHECK(store != NULL);
	CHECK_EQ(write_rows(store, "main", "T", STORE_OVERWRITE, "{\"id\":\"a\"}\n"), 0);
	CHECK_EQ(branch(store, "dev", "main"), 0);
	CHECK_EQ(change_table(store, "main", "T", "Ours"), 0);
	CHECK_EQ(change_table(store, "dev", "T", "Theirs"), 0);
	CHECK(merge_refused(store, "dev", "main", "table"));
	struct conflicts conflicts;
	struct store_merge_result result;
	CHECK_EQ(merge(store, "dev", "main", STORE_MERGE_THEIRS, &conflicts, &result), 0);
	CHECK(table_is(store, "main", "Theirs", "{\"id\":\"a\"}\n"));
	CHECK(table_is(store, "main", "Ours", ""));
	store_close(store);
}

TEST(a_table_dropped_on_one_side_and_changed_on_the_other_is_a_table_conflict)
{
	struct store *store = open_store();
	CHECK(store != NULL);
	CHECK_EQ(write_rows(store, "main", "T", STORE_OVERWRITE, "{\"id\":\"a\"}\n"), 0);
	CHECK_EQ(branch(store, "dev", "main"), 0);
	CHECK_EQ(branch(store, "copy", "main"), 0);
	CHECK_EQ(change_table(store, "dev", "T", NULL), 0);
	CHECK_EQ(write_rows(store, "main", "T", STORE_MERGE, "{\"id\":\"b\"}\n"), 0);
	CHECK_EQ(write_rows(store, "copy", "T", STORE_MERGE, "{\"id\":\"b\"}\n"), 0);
	CHECK(merge_refused(store, "dev", "main", "table"));
	struct conflicts conflicts;
	struct store_merge_result result;
	CHECK_EQ(merge(store, "dev", "main", STORE_MERGE_OURS, &conflicts, &result), 0);
	CHECK(table_is(store, "main", "T", "{\"id\":\"a\"}\n{\"id\":\"b\"}\n"));
	CHECK_EQ(merge(store, "dev", "copy", STORE_MERGE_THEIRS, &conflicts, &result), 0);
	CHECK(table_is(store, "copy", "T", ""));
	store_close(store);
}

TEST(a_table_dropped_on_one_side_and_left_alone_on_the_other_is_dropped)
{
	struct store *store = open_store();
	CHECK(store != NULL);
	CHECK_EQ(write_rows(store, "main", "T", STORE_OVERWRITE, "{\"id\":\"a\"}\n"), 0);
	CHECK_EQ(write_rows(store, "main", "U", STORE_OVERWRITE, "{\"id\":\"u\"}\n"), 0);
	CHECK_EQ(branch(store, "dev", "main"), 0);
	CHECK_EQ(change_table(store, "dev", "T", NULL), 0);
	CHECK_EQ(write_rows(store, "main", "U", STORE_MERGE, "{\"id\":\"v\"}\n"), 0);
	struct conflicts conflicts;
	struct store_merge_result result;
	CHECK_EQ(merge(store, "dev", "main", STORE_MERGE_NO_STRATEGY, &conflicts, &result), 0);
	CHECK_EQ(result.outcome, STORE_MERGE_MERGED);
	CHECK_EQ(conflicts.count, 0);
	CHECK(table_is(store, "main", "T", ""));
	CHECK(table_is(store, "main", "U", "{\"id\":\"u\"}\n{\"id\":\"v\"}\n"));
	store_close(store);
}

TEST(a_table_dropped_on_one_side_and_only_compacted_on_the_other_is_dropped)
{
	struct store *store = open_store();
	CHECK(store != NULL);
	for (int i = 0; i < 5; i++) {   /* five fragments */
		char row[32];
		snprintf(row, sizeof row, "{\"id\":\"r%d\"}\n", i);
		CHECK_EQ(write_rows(store, "main", "T", STORE_MERGE, row), 0);
	}
	CHECK_EQ(branch(store, "dev", "main"), 0);
	CHECK_EQ(change_table(store, "dev", "T", NULL), 0);
	CHECK_EQ(write_rows(store, "main", "U", STORE_OVERWRITE, "{\"id\":\"u\"}\n"), 0);   /* not a fast-forward */
	uint64_t version = store_version(store);
	CHECK_EQ(store_compact_flush(store), 5);   /* main's T stored anew, the same rows, no commit */
	CHECK_EQ(store_version(store), version);
	struct conflicts conflicts;
	struct store_merge_result result;
	CHECK_EQ(merge(store, "dev", "main", STORE_MERGE_NO_STRATEGY, &conflicts, &result), 0);
	CHECK_EQ(result.outcome, STORE_MERGE_MERGED);
	CHECK_EQ(conflicts.count, 0);
	CHECK(table_is(store, "main", "T", "") && table_is(store, "main", "U", "{\"id\":\"u\"}\n"));
	store_close(store);
}

TEST(two_different_tables_created_under_one_name_are_a_table_conflict)
{
	struct store *store = open_store();
	CHECK(store != NULL);
	CHECK_EQ(write_rows(store, "main", "Base", STORE_OVERWRITE, "{\"id\":\"a\"}\n"), 0);
	CHECK_EQ(branch(store, "dev", "main"), 0);
	CHECK_EQ(write_rows(store, "main", "New", STORE_OVERWRITE, "{\"id\":\"ours\"}\n"), 0);
	CHECK_EQ(write_rows(store, "dev", "New", STORE_OVERWRITE, "{\"id\":\"theirs\"}\n"), 0);
	CHECK(merge_refused(store, "dev", "main", "table"));
	struct conflicts conflicts;
	struct store_merge_result result;
	CHECK_EQ(merge(store, "dev", "main", STORE_MERGE_THEIRS, &conflicts, &result), 0);
	CHECK(table_is(store, "main", "New", "{\"id\":\"theirs\"}\n"));
	store_close(store);
}

/* ---- cost ------------------------------------------------------------------------------ */

static uint64_t pages_read(void)
{
	struct io_counters manifest, data;
	io_counters_get(IO_MANIFEST, &manifest);
	io_counters_get(IO_DATA, &data);
	return manifest.pages + data.pages;
}

/* A table of rows rows on main and branch dev; one row changed on each side. */
static int one_row_each_side(struct store *store, unsigned rows, const char *dev)
{
	struct buf text;
	buf_init(&text);
	int rc = 0;
	for (unsigned i = 0; i < rows && rc == 0; i++)
		rc = buf_printf(&text, "{\"id\":\"row%09u\",\"n\":%u}\n", i, i);
	char table[32];
	snprintf(table, sizeof table, "T%u", rows);
	if (rc == 0)
		rc = write_rows(store, "main", table, STORE_OVERWRITE, (const char *)text.data);
	buf_free(&text);
	if (rc == 0)
		rc = branch(store, dev, "main");
	char line[64];
	snprintf(line, sizeof line, "{\"id\":\"row%09u\",\"n\":-1}\n", rows / 3);
	if (rc == 0)
		rc = write_rows(store, "main", table, STORE_MERGE, line);
	snprintf(line, sizeof line, "{\"id\":\"row%09u\",\"n\":-2}\n", 2 * rows / 3);
	if (rc == 0)
		rc = write_rows(store, dev, table, STORE_MERGE, line);
	return rc;
}

static int count_line(const char *line, size_t size, void *context)
{
	(void)line;
	(void)size;
	(*(size_t *)context)++;
	return 0;
}

TEST(a_one_row_change_on_each_side_merges_and_diffs_reading_about_as_many_pages_at_100000_rows_as_at_2000)
{
	struct store *store = open_store();
	CHECK(store != NULL);
	unsigned sizes[2] = { 2000, 100000 };
	uint64_t merge_pages[2], diff_pages[2];
	for (int s = 0; s < 2; s++) {
		char dev[16];
		snprintf(dev, sizeof dev, "dev%d", s);
		CHECK_EQ(one_row_each_side(store, sizes[s], dev), 0);
		struct store_merge_options options = { .dry_run = true };
		struct store_merge_result result;
		struct error_info error;
		struct store_snapshot *a, *b;
		CHECK_EQ(store_snapshot_open(store, "main", STORE_LATEST, &a, &error), 0);
		CHECK_EQ(store_snapshot_open(store, dev, STORE_LATEST, &b, &error), 0);
		io_counters_reset();
		CHECK_EQ(store_merge(store, dev, "main", &options, NULL, NULL, &result, &error), 0);
		merge_pages[s] = pages_read();
		CHECK_EQ(result.outcome, STORE_MERGE_MERGED);
		char table[32];
		snprintf(table, sizeof table, "T%u", sizes[s]);
		size_t lines = 0;
		io_counters_reset();
		CHECK_EQ(store_diff_rows(a, b, table, count_line, &lines), 0);
		diff_pages[s] = pages_read();
		CHECK_EQ(lines, 2);
		store_snapshot_release(a);
		store_snapshot_release(b);
		fprintf(stderr, "    %u rows: merge read %llu pages, diff %llu\n", sizes[s],
			(unsigned long long)merge_pages[s], (unsigned long long)diff_pages[s]);
	}
	/* 50 times the rows: one more level of each tree at most, and fragments of the same size */
	CHECK(merge_pages[1] <= merge_pages[0] + 12);
	CHECK(diff_pages[1] <= diff_pages[0] + 8);
	store_close(store);
}

/* ---- diffs against a model ------------------------------------------------------------------ */

#define MODEL_IDS 24
#define MODEL_VERSIONS 100

struct model_line {
	char text[160];
};

struct diff_collect {
	char text[8192];
	size_t used;
};

static int collect_line(const char *line, size_t size, void *context)
{
	struct diff_collect *collect = context;
	if (collect->used + size >= sizeof collect->text)
		return -ENOSPC;
	memcpy(collect->text + collect->used, line, size);
	collect->used += size;
	collect->text[collect->used] = 0;
	return 0;
}

TEST(the_diff_of_every_pair_of_versions_of_a_random_history_is_the_models)
{
	struct store *store = open_store();
	CHECK(store != NULL);
	static int states[MODEL_VERSIONS][MODEL_IDS];   /* -1: absent, else n */
	uint64_t versions[MODEL_VERSIONS];
	int current[MODEL_IDS];
	for (int i = 0; i < MODEL_IDS; i++)
		current[i] = -1;
	uint64_t seed = 12345;
	for (int v = 0; v < MODEL_VERSIONS; v++) {
		char text[1024] = "";
		size_t used = 0;
		for (int k = 0; k < 3; k++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			int id = (int)((seed >> 33) % MODEL_IDS);
			int n = (int)((seed >> 20) % 4);
			bool remove = current[id] >= 0 && (seed >> 40) % 4 == 0;
			used += (size_t)snprintf(text + used, sizeof text - used,
						 remove ? "{\"id\":\"k%02d\",\"@delete\":true}\n" : "{\"id\":\"k%02d\",\"n\":%d}\n", id, n);
			current[id] = remove ? -1 : n;
		}
		CHECK_EQ(write_rows(store, "main", "T", STORE_MERGE, text), 0);
		versions[v] = store_version(store);
		memcpy(states[v], current, sizeof current);
	}
	struct store_snapshot *snapshots[MODEL_VERSIONS];
	struct error_info error;
	for (int v = 0; v < MODEL_VERSIONS; v++)
		CHECK_EQ(store_snapshot_open(store, "main", versions[v], &snapshots[v], &error), 0);
	size_t pairs = 0;
	for (int i = 0; i < MODEL_VERSIONS; i++)
		for (int j = 0; j < MODEL_VERSIONS; j++) {
			struct diff_collect got = { .used = 0 };
			struct diff_collect expected = { .used = 0 };
			CHECK_EQ(store_diff_rows(snapshots[i], snapshots[j], "T", collect_line, &got), 0);
			for (int id = 0; id < MODEL_IDS; id++) {
				int a = states[i][id], b = states[j][id];
				if (a == b)
					continue;
				char before[64] = "null", after[64] = "null";
				if (a >= 0)
					snprintf(before, sizeof before, "{\"id\":\"k%02d\",\"n\":%d}", id, a);
				if (b >= 0)
					snprintf(after, sizeof after, "{\"id\":\"k%02d\",\"n\":%d}", id, b);
				expected.used += (size_t)snprintf(expected.text + expected.used, sizeof expected.text - expected.used,
								  "{\"op\":\"%s\",\"id\":\"k%02d\",\"before\":%s,\"after\":%s}\n",
								  a < 0 ? "insert" : b < 0 ? "delete" : "update", id, before, after);
			}
			if (strcmp(got.text, expected.text) != 0) {
				fprintf(stderr, "    diff @%llu..@%llu:\n%s    expected:\n%s", (unsigned long long)versions[i],
					(unsigned long long)versions[j], got.text, expected.text);
				CHECK(false);
				goto out;
			}
			pairs++;
		}
	CHECK_EQ(pairs, MODEL_VERSIONS * MODEL_VERSIONS);
out:
	for (int v = 0; v < MODEL_VERSIONS; v++)
		store_snapshot_release(snapshots[v]);
	store_close(store);
}

/* ---- row history ---------------------------------------------------------------------------- */

TEST(the_history_of_a_row_follows_its_table_through_a_rename)
{
	struct store *store = open_store();
	CHECK(store != NULL);
	CHECK_EQ(write_rows(store, "main", "Old", STORE_OVERWRITE, "{\"id\":\"x\",\"n\":1}\n"), 0);
	CHECK_EQ(change_table(store, "main", "Old", "New"), 0);
	CHECK_EQ(write_rows(store, "main", "New", STORE_MERGE, "{\"id\":\"x\",\"n\":2}\n"), 0);
	CHECK_EQ(write_rows(store, "main", "New", STORE_MERGE, "{\"id\":\"y\",\"n\":3}\n"), 0);   /* x unchanged */
	struct store_snapshot *snapshot;
	struct error_info error;
	CHECK_EQ(store_snapshot_open(store, "main", STORE_LATEST, &snapshot, &error), 0);
	struct diff_collect lines = { .used = 0 };
	CHECK_EQ(store_row_history(snapshot, "New", "x", 1, collect_line, &lines), 0);
	CHECK(strstr(lines.text, "\"version\":3,") != NULL && strstr(lines.text, "\"op\":\"update\",\"row\":{\"id\":\"x\",\"n\":2}") != NULL);
	CHECK(strstr(lines.text, "\"version\":1,") != NULL && strstr(lines.text, "\"op\":\"insert\"") != NULL);
	CHECK(strstr(lines.text, "\"version\":4,") == NULL);   /* the commit that left x alone */
	size_t count = 0;
	for (const char *at = lines.text; (at = strchr(at, '\n')); at++)
		count++;
	CHECK_EQ(count, 2);
	CHECK_EQ(store_row_history(snapshot, "Old", "x", 1, collect_line, &lines), -ENOENT);
	store_snapshot_release(snapshot);
	store_close(store);
}

int main(void)
{
	return harness_run();
}
