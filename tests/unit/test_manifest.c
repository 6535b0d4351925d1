/*
 * test_manifest — the manifest as specified by core/manifest.h and
 * docs/FORMAT.md §14–18: create/open, the format check, snapshots and
 * history, identity (rename, drop, recreate), branches, compare-and-swap,
 * the flat-cost gate, verify and repair.
 */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "manifest_fixture.h"
#include "manifest_int.h"

/* ---- create / open / format --------------------------------------------------- */

TEST(create_then_open_round_trips_an_empty_store)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct root_record root;
	CHECK_EQ(manifest_latest(manifest, &root), 0);
	CHECK_EQ(root.version, 0);
	CHECK_EQ(root.sequence, 1);
	struct manifest_snapshot snapshot;
	CHECK_EQ(manifest_snapshot_latest(manifest, "main", &snapshot), 0);
	CHECK(ulid_is_zero(&snapshot.branch.head_commit));
	CHECK(block_address_is_null(snapshot.branch.heads));
	CHECK_EQ(strcmp(snapshot.branch.forked_from, ""), 0);
	struct fixture_heads heads;
	CHECK_EQ(fixture_heads(manifest, "main", UINT64_MAX, false, &heads), 0);
	CHECK_EQ(heads.count, 0);
	manifest_close(manifest);

	struct error_info error;
	CHECK_EQ(manifest_open(fixture_store_path(), MANIFEST_READ_ONLY, &manifest, &error), 0);
	CHECK_EQ(manifest_latest(manifest, &root), 0);
	CHECK_EQ(root.version, 0);
	manifest_close(manifest);
}

TEST(create_makes_the_store_directory_private)
{
	struct error_info error;
	CHECK_EQ(manifest_create(fixture_store_path(), &error), 0);
	struct stat status;
	CHECK_EQ(stat(fixture_store_path(), &status), 0);
	CHECK_EQ(status.st_mode & 0777, 0700);
	char path[4300];
	snprintf(path, sizeof path, "%s/manifest", fixture_store_path());
	CHECK_EQ(stat(path, &status), 0);
	CHECK_EQ(status.st_mode & 0777, 0600);
}

TEST(create_refuses_a_directory_that_is_not_empty)
{
	struct error_info error;
	CHECK_EQ(manifest_create(fixture_store_path(), &error), 0);
	CHECK_EQ(manifest_create(fixture_store_path(), &error), -EEXIST);
}

TEST(a_missing_directory_is_not_a_store)
{
	struct manifest *manifest;
	struct error_info error;
	error_info_clear(&error);
	CHECK_EQ(manifest_open(fixture_store_path(), 0, &manifest, &error), -ENOENT);
	CHECK(strstr(error.message, "no graphfs store") != NULL);
}

TEST(a_directory_without_a_manifest_is_not_a_store)
{
	CHECK_EQ(mkdir(fixture_store_path(), 0700), 0);
	struct manifest *manifest;
	struct error_info error;
	error_info_clear(&error);
	CHECK_EQ(manifest_open(fixture_store_path(), 0, &manifest, &error), -ENOENT);
	CHECK(strstr(error.message, "not a graphfs store") != NULL);
}

TEST(a_manifest_of_other_bytes_is_not_a_store)
{
	CHECK_EQ(mkdir(fixture_store_path(), 0700), 0);
	char path[4300];
	snprintf(path, sizeof path, "%s/manifest", fixture_store_path());
	FILE *file = fopen(path, "wb");
	CHECK(file != NULL);
	for (int i = 0; i < 20000; i++)
		fputc('x', file);
	fclose(file);
	struct manifest *manifest;
	struct error_info error;
	error_info_clear(&error);
	CHECK_EQ(manifest_open(fixture_store_path(), 0, &manifest, &error), -EINVAL);
	CHECK(strstr(error.message, "not a graphfs store") != NULL);
}

/* A child process announces a segment in a sidecar and dies without publishing. */
static void leave_dead_writer_sidecar(void)
{
	pid_t child = fork();
	if (child == 0) {
		struct manifest *manifest;
		struct manifest_intent *intent;
		uint64_t segment;
		if (fixture_open(&manifest) < 0 || manifest_intent_begin(manifest, &intent) < 0 ||
		    manifest_intent_new_segment(intent, &segment) < 0)
			_exit(1);
		_exit(0);
	}
	int status;
	waitpid(child, &status, 0);
}

static int sidecar_file(char *out, size_t size)
{
	char directory[4300];
	snprintf(directory, sizeof directory, "%s/recovery", fixture_store_path());
	int found = 0;
	int fd = open(directory, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return 0;
	DIR *dir = fdopendir(fd);
	struct dirent *entry;
	while ((entry = readdir(dir)))
		if (entry->d_name[0] != '.') {
			snprintf(out, size, "%s/%s", directory, entry->d_name);
			found++;
		}
	closedir(dir);
	return found;
}

static void format_refused_before_recovery(uint32_t format, const char *expected)
{
	struct error_info error;
	CHECK_EQ(manifest_create(fixture_store_path(), &error), 0);
	leave_dead_writer_sidecar();
	char sidecar[4600];
	CHECK_EQ(sidecar_file(sidecar, sizeof sidecar), 1);
	size_t before_size, after_size;
	unsigned char *before = fixture_read_file(sidecar, &before_size);
	CHECK(before != NULL);
	CHECK_EQ(manifest_stamp_format(fixture_store_path(), format), 0);

	struct manifest *manifest;
	error_info_clear(&error);
	CHECK_EQ(manifest_open(fixture_store_path(), 0, &manifest, &error), -EPROTO);
	CHECK_EQ(strcmp(error.message, expected), 0);
	unsigned char *after = fixture_read_file(sidecar, &after_size);
	CHECK(after != NULL);
	CHECK_EQ(after_size, before_size);
	CHECK(memcmp(after, before, before_size) == 0);
	free(before);
	free(after);

	/* the same store at the right format recovers the sidecar */
	CHECK_EQ(manifest_stamp_format(fixture_store_path(), MANIFEST_FORMAT_VERSION), 0);
	CHECK_EQ(fixture_open(&manifest), 0);
	CHECK_EQ(sidecar_file(sidecar, sizeof sidecar), 0);
	manifest_close(manifest);
}

TEST(an_older_format_is_refused_with_the_export_message_before_recovery)
{
	format_refused_before_recovery(
		0, "store format 0 is older than this graphfs (format 1): export it with the graphfs version that "
		   "wrote it, then graphfs init a new store and graphfs import the tables");
}

TEST(a_newer_format_is_refused_with_the_upgrade_message_before_recovery)
{
	format_refused_before_recovery(2, "store format 2 is newer than this graphfs (format 1): upgrade graphfs");
}

TEST(a_read_only_open_leaves_a_pending_sidecar_untouched)
{
	struct error_info error;
	CHECK_EQ(manifest_create(fixture_store_path(), &error), 0);
	leave_dead_writer_sidecar();
	char sidecar[4600];
	CHECK_EQ(sidecar_file(sidecar, sizeof sidecar), 1);
	struct manifest *manifest;
	CHECK_EQ(manifest_open(fixture_store_path(), MANIFEST_READ_ONLY, &manifest, &error), 0);
	CHECK_EQ(sidecar_file(sidecar, sizeof sidecar), 1);
	manifest_close(manifest);
}

/* ---- versions and history ----------------------------------------------------- */

TEST(every_commit_advances_the_version_by_one_on_any_branch)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct error_info error;
	CHECK_EQ(fixture_merge_one(manifest, "main", "Person", "a", 1), 0);
	CHECK_EQ(fixture_version(manifest), 1);
	CHECK_EQ(manifest_branch_create(manifest, "side", "main", &error), 0);
	CHECK_EQ(fixture_version(manifest), 1);
	CHECK_EQ(fixture_merge_one(manifest, "side", "Person", "b", 2), 0);
	CHECK_EQ(fixture_version(manifest), 2);
	CHECK_EQ(fixture_merge_one(manifest, "main", "Person", "c", 3), 0);
	CHECK_EQ(fixture_version(manifest), 3);
	struct manifest_snapshot snapshot;
	CHECK_EQ(manifest_snapshot_latest(manifest, "side", &snapshot), 0);
	CHECK_EQ(snapshot.branch.head_version, 2);
	CHECK_EQ(snapshot.branch.fork_version, 1);
	CHECK_EQ(manifest_snapshot_latest(manifest, "main", &snapshot), 0);
	CHECK_EQ(snapshot.branch.head_version, 3);
	manifest_close(manifest);
}

TEST(history_refuses_future_versions_and_branches_absent_at_a_version)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct error_info error;
	CHECK_EQ(fixture_merge_one(manifest, "main", "Person", "a", 1), 0);
	CHECK_EQ(fixture_merge_one(manifest, "main", "Person", "b", 1), 0);
	CHECK_EQ(manifest_branch_create(manifest, "side", "main", &error), 0);
	struct manifest_snapshot snapshot;
	CHECK_EQ(manifest_snapshot_at(manifest, "main", 3, &snapshot), -ENOENT);
	CHECK_EQ(manifest_snapshot_at(manifest, "side", 1, &snapshot), -ENOENT);
	/* created at version 2: visible at 2 */
	CHECK_EQ(manifest_snapshot_at(manifest, "side", 2, &snapshot), 0);
	CHECK_EQ(manifest_snapshot_at(manifest, "nope", 2, &snapshot), -ENOENT);
	CHECK_EQ(manifest_snapshot_at(manifest, "main", 0, &snapshot), 0);
	CHECK(block_address_is_null(snapshot.branch.heads));
	CHECK_EQ(fixture_merge_one(manifest, "side", "Person", "c", 1), 0);
	CHECK_EQ(manifest_snapshot_at(manifest, "side", 2, &snapshot), 0);
	struct fixture_heads heads;
	CHECK_EQ(manifest_heads_each(manifest, &snapshot, false, fixture_collect_head, &heads), 0);
	CHECK_EQ(heads.count, 1);
	CHECK_EQ(heads.heads[0].row_count, 2);
	manifest_close(manifest);
}

/* A small in-test model of one branch: name -> (stable id, version, rows). */
struct model_table {
	char name[16];
	struct ulid stable_id;
	uint64_t table_version;
	uint64_t rows;
	bool ids[8];
};

struct model {
	size_t count;
	struct model_table tables[8];
};

static struct model_table *model_find(struct model *model, const char *name)
{
	for (size_t i = 0; i < model->count; i++)
		if (strcmp(model->tables[i].name, name) == 0)
			return &model->tables[i];
	return NULL;
}

static void model_remove(struct model *model, const char *name)
{
	struct model_table *table = model_find(model, name);
	size_t index = (size_t)(table - model->tables);
	memmove(table, table + 1, (model->count - index - 1) * sizeof *table);
	model->count--;
}

static bool model_matches(const struct model *model, const struct fixture_heads *heads)
{
	if (heads->count != model->count)
		return false;
	for (size_t i = 0; i < heads->count; i++) {
		const struct head_row *head = &heads->heads[i];
		const struct model_table *table = NULL;
		for (size_t t = 0; t < model->count; t++)
			if (strcmp(model->tables[t].name, head->name) == 0)
				table = &model->tables[t];
		if (!table || head->table_version != table->table_version || head->row_count != table->rows ||
		    ulid_compare(&head->stable_id, &table->stable_id) != 0)
			return false;
	}
	return true;
}

TEST(snapshot_at_every_version_of_a_random_history_matches_a_model)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct error_info error;
	CHECK_EQ(manifest_branch_create(manifest, "side", "main", &error), 0);
	enum { COMMITS = 200, BRANCHES = 2 };
	static struct model models[COMMITS + 1][BRANCHES];
	memset(models, 0, sizeof models);
	const char *branch_names[BRANCHES] = { "main", "side" };
	const char *table_names[] = { "A", "B", "C", "D", "E" };
	unsigned seed = 24601;
	for (uint64_t version = 1; version <= COMMITS; version++) {
		memcpy(models[version], models[version - 1], sizeof models[version]);
		int b = (int)(rand_r(&seed) % BRANCHES);
		struct model *model = &models[version][b];
		const char *branch = branch_names[b];
		const char *name = table_names[rand_r(&seed) % 5];
		struct model_table *table = model_find(model, name);
		int action = (int)(rand_r(&seed) % 10);
		if (!table || action < 5) {
			/* merge one row (creates the table when missing) */
			int id = (int)(rand_r(&seed) % 8);
			char row_id[8];
			snprintf(row_id, sizeof row_id, "r%d", id);
			CHECK_EQ(fixture_merge_one(manifest, branch, name, row_id, (long)version), 0);
			if (!table) {
				table = &model->tables[model->count++];
				memset(table, 0, sizeof *table);
				snprintf(table->name, sizeof table->name, "%s", name);
				struct manifest_snapshot snapshot;
				struct head_row head;
				CHECK_EQ(manifest_snapshot_latest(manifest, branch, &snapshot), 0);
				CHECK_EQ(manifest_head_find(manifest, &snapshot, name, &head), 0);
				table->stable_id = head.stable_id;
			}
			table->table_version++;
			if (!table->ids[id])
				table->rows++;
			table->ids[id] = true;
		} else if (action < 7) {
			CHECK_EQ(fixture_op(manifest, branch, MANIFEST_DROP, name, NULL, NULL, &error), 0);
			model_remove(model, name);
		} else {
			const char *target = table_names[rand_r(&seed) % 5];
			int rc = fixture_op(manifest, branch, MANIFEST_RENAME, name, target, NULL, &error);
			if (model_find(model, target)) {
				CHECK_EQ(rc, -EEXIST);
				/* refused: publish a merge instead so that every version is a commit */
				CHECK_EQ(fixture_merge_one(manifest, branch, name, "r0", (long)version), 0);
				table->table_version++;
				if (!table->ids[0])
					table->rows++;
				table->ids[0] = true;
			} else {
				CHECK_EQ(rc, 0);
				snprintf(table->name, sizeof table->name, "%s", target);
			}
		}
		CHECK_EQ(fixture_version(manifest), version);
	}
	static struct fixture_heads heads;
	for (uint64_t version = 0; version <= COMMITS; version++)
		for (int b = 0; b < BRANCHES; b++) {
			CHECK_EQ(fixture_heads(manifest, branch_names[b], version, false, &heads), 0);
			if (!model_matches(&models[version][b], &heads)) {
				fprintf(stderr, "    version %llu branch %s differs from the model\n",
					(unsigned long long)version, branch_names[b]);
				CHECK(false);
			}
		}
	manifest_close(manifest);
}

/* ---- identity ------------------------------------------------------------------- */

static int head_of(struct manifest *manifest, const char *branch, const char *name, struct head_row *out)
{
	struct manifest_snapshot snapshot;
	int rc = manifest_snapshot_latest(manifest, branch, &snapshot);
	return rc ? rc : manifest_head_find(manifest, &snapshot, name, out);
}

TEST(rename_keeps_the_stable_id_and_the_incarnation)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct error_info error;
	CHECK_EQ(fixture_merge_one(manifest, "main", "Old", "a", 1), 0);
	struct head_row before, after;
	CHECK_EQ(head_of(manifest, "main", "Old", &before), 0);
	CHECK_EQ(fixture_op(manifest, "main", MANIFEST_RENAME, "Old", "New", NULL, &error), 0);
	CHECK_EQ(head_of(manifest, "main", "Old", &after), -ENOENT);
	CHECK_EQ(head_of(manifest, "main", "New", &after), 0);
	CHECK_EQ(ulid_compare(&before.stable_id, &after.stable_id), 0);
	CHECK_EQ(ulid_compare(&before.incarnation, &after.incarnation), 0);
	CHECK_EQ(after.table_version, before.table_version);
	CHECK_EQ(after.row_count, 1);
	manifest_close(manifest);
}

TEST(rename_onto_a_live_name_is_refused)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct error_info error;
	CHECK_EQ(fixture_merge_one(manifest, "main", "A", "a", 1), 0);
	CHECK_EQ(fixture_merge_one(manifest, "main", "B", "a", 1), 0);
	CHECK_EQ(fixture_op(manifest, "main", MANIFEST_RENAME, "A", "B", NULL, &error), -EEXIST);
	CHECK_EQ(fixture_op(manifest, "main", MANIFEST_RENAME, "Z", "Y", NULL, &error), -ENOENT);
	CHECK_EQ(fixture_version(manifest), 2);
	manifest_close(manifest);
}

TEST(drop_tombstones_the_head)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct error_info error;
	CHECK_EQ(fixture_merge_one(manifest, "main", "Gone", "a", 1), 0);
	struct head_row live;
	CHECK_EQ(head_of(manifest, "main", "Gone", &live), 0);
	CHECK_EQ(fixture_op(manifest, "main", MANIFEST_DROP, "Gone", NULL, NULL, &error), 0);
	struct head_row head;
	CHECK_EQ(head_of(manifest, "main", "Gone", &head), -ENOENT);
	struct fixture_heads heads;
	CHECK_EQ(fixture_heads(manifest, "main", UINT64_MAX, false, &heads), 0);
	CHECK_EQ(heads.count, 0);
	CHECK_EQ(fixture_heads(manifest, "main", UINT64_MAX, true, &heads), 0);
	CHECK_EQ(heads.count, 1);
	CHECK_EQ(heads.heads[0].state, HEAD_TOMBSTONED);
	CHECK_EQ(ulid_compare(&heads.heads[0].stable_id, &live.stable_id), 0);
	CHECK_EQ(heads.heads[0].row_count, 0);
	CHECK_EQ(strcmp(heads.heads[0].name, "Gone"), 0);
	/* history keeps it live at version 1 */
	CHECK_EQ(fixture_heads(manifest, "main", 1, false, &heads), 0);
	CHECK_EQ(heads.count, 1);
	CHECK_EQ(fixture_op(manifest, "main", MANIFEST_DROP, "Gone", NULL, NULL, &error), -ENOENT);
	manifest_close(manifest);
}

TEST(recreating_a_dropped_name_mints_a_new_stable_id_and_incarnation)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct error_info error;
	CHECK_EQ(fixture_merge_one(manifest, "main", "T", "a", 1), 0);
	struct head_row first, second;
	CHECK_EQ(head_of(manifest, "main", "T", &first), 0);
	CHECK_EQ(fixture_op(manifest, "main", MANIFEST_DROP, "T", NULL, NULL, &error), 0);
	CHECK_EQ(fixture_merge_one(manifest, "main", "T", "b", 2), 0);
	CHECK_EQ(head_of(manifest, "main", "T", &second), 0);
	CHECK(ulid_compare(&first.stable_id, &second.stable_id) != 0);
	CHECK(ulid_compare(&first.incarnation, &second.incarnation) != 0);
	CHECK_EQ(second.table_version, 1);
	CHECK_EQ(second.row_count, 1);
	manifest_close(manifest);
}

TEST(a_tombstoned_head_never_becomes_live_again)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct error_info error;
	CHECK_EQ(fixture_merge_one(manifest, "main", "T", "a", 1), 0);
	CHECK_EQ(fixture_merge_one(manifest, "main", "T", "b", 1), 0);
	struct head_row old;
	CHECK_EQ(head_of(manifest, "main", "T", &old), 0);
	CHECK_EQ(fixture_op(manifest, "main", MANIFEST_DROP, "T", NULL, NULL, &error), 0);
	CHECK_EQ(fixture_merge_one(manifest, "main", "T", "c", 1), 0);
	CHECK_EQ(fixture_op(manifest, "main", MANIFEST_DROP, "T", NULL, NULL, &error), 0);
	CHECK_EQ(fixture_merge_one(manifest, "main", "T", "d", 1), 0);
	struct fixture_heads tombstoned, live;
	CHECK_EQ(fixture_heads(manifest, "main", UINT64_MAX, true, &tombstoned), 0);
	CHECK_EQ(tombstoned.count, 2);
	for (size_t i = 0; i < tombstoned.count; i++)
		CHECK_EQ(tombstoned.heads[i].state, HEAD_TOMBSTONED);
	CHECK_EQ(fixture_heads(manifest, "main", UINT64_MAX, false, &live), 0);
	CHECK_EQ(live.count, 1);
	CHECK(ulid_compare(&live.heads[0].stable_id, &old.stable_id) != 0);
	CHECK_EQ(live.heads[0].row_count, 1);
	/* an in-place edit based on the old incarnation's version is refused */
	const char *lines[] = { "{\"id\":\"x\",\"v\":1}" };
	struct schema schema;
	CHECK_EQ(fixture_schema(NODE_SCHEMA, &schema), 0);
	struct table_stage *stage;
	CHECK_EQ(fixture_stage(manifest, &schema, TABLE_OVERWRITE, lines, 1, NULL, &stage), 0);
	struct manifest_op op = { .kind = MANIFEST_WRITE, .stage = stage, .based_on_version = 2,
				  .based_on_incarnation = old.incarnation };
	snprintf(op.name, sizeof op.name, "T");
	struct manifest_commit_request request = { .branch = "main", .actor = "t", .message = "m",
						   .op_count = 1, .ops = &op };
	struct manifest_commit_result result;
	CHECK_EQ(manifest_commit(manifest, &request, &result, &error), -EBUSY);
	table_stage_free(stage);
	schema_free(&schema);
	manifest_close(manifest);
}

TEST(invalid_table_and_branch_names_are_refused)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct error_info error;
	char overlong[200];
	memset(overlong, 'a', sizeof overlong - 1);
	overlong[sizeof overlong - 1] = 0;
	const char *bad[] = { "..", "a/b", "", "9x", "a b", overlong };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		if (strlen(bad[i]) <= JOURNAL_NAME_MAX)
			CHECK_EQ(fixture_merge_one(manifest, "main", bad[i], "a", 1), -EINVAL);
		CHECK_EQ(manifest_branch_create(manifest, bad[i], "main", &error), -EINVAL);
	}
	/* a table name filling the whole field (no terminating NUL) is overlong */
	struct manifest_op op;
	memset(&op, 0, sizeof op);
	op.kind = MANIFEST_DROP;
	memset(op.name, 'a', sizeof op.name);
	struct manifest_commit_request request = { .branch = "main", .actor = "t", .message = "m",
						   .op_count = 1, .ops = &op };
	struct manifest_commit_result result;
	CHECK_EQ(manifest_commit(manifest, &request, &result, &error), -EINVAL);
	request.branch = "../x";
	memset(op.name, 0, sizeof op.name);
	snprintf(op.name, sizeof op.name, "Good");
	CHECK_EQ(manifest_commit(manifest, &request, &result, &error), -EINVAL);
	CHECK_EQ(fixture_merge_one(manifest, "main", "Good", "a", 1), 0);
	CHECK_EQ(fixture_op(manifest, "main", MANIFEST_RENAME, "Good", "..", NULL, &error), -EINVAL);
	CHECK_EQ(fixture_version(manifest), 1);
	manifest_close(manifest);
}

/* ---- schemas and edges ------------------------------------------------------------ */

TEST(a_node_table_referenced_by_a_live_edge_table_cannot_be_dropped_or_renamed)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct error_info error;
	struct schema node, edge;
	CHECK_EQ(fixture_schema(NODE_SCHEMA, &node), 0);
	CHECK_EQ(fixture_schema("{\"kind\":\"edge\",\"from\":\"Person\",\"to\":\"Person\",\"properties\":{}}", &edge), 0);
	CHECK_EQ(fixture_op(manifest, "main", MANIFEST_SCHEMA, "Person", NULL, &node, &error), 0);
	CHECK_EQ(fixture_op(manifest, "main", MANIFEST_SCHEMA, "Knows", NULL, &edge, &error), 0);
	CHECK_EQ(fixture_op(manifest, "main", MANIFEST_DROP, "Person", NULL, NULL, &error), -EBUSY);
	CHECK(strstr(error.message, "Knows") != NULL);
	CHECK_EQ(fixture_op(manifest, "main", MANIFEST_RENAME, "Person", "People", NULL, &error), -EBUSY);
	CHECK_EQ(fixture_op(manifest, "main", MANIFEST_DROP, "Knows", NULL, NULL, &error), 0);
	CHECK_EQ(fixture_op(manifest, "main", MANIFEST_DROP, "Person", NULL, NULL, &error), 0);
	schema_free(&node);
	schema_free(&edge);
	manifest_close(manifest);
}

TEST(an_edge_table_must_name_live_node_tables)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct error_info error;
	struct schema edge;
	CHECK_EQ(fixture_schema("{\"kind\":\"edge\",\"from\":\"Nobody\",\"to\":\"Nobody\",\"properties\":{}}", &edge), 0);
	CHECK_EQ(fixture_op(manifest, "main", MANIFEST_SCHEMA, "Knows", NULL, &edge, &error), -EINVAL);
	CHECK_EQ(fixture_version(manifest), 0);
	schema_free(&edge);
	manifest_close(manifest);
}

TEST(a_compatible_schema_change_makes_a_new_table_version_and_an_incompatible_one_is_refused)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct error_info error;
	CHECK_EQ(fixture_merge_one(manifest, "main", "T", "a", 1), 0);
	struct head_row before, after;
	CHECK_EQ(head_of(manifest, "main", "T", &before), 0);
	struct schema wider, other;
	CHECK_EQ(fixture_schema("{\"kind\":\"node\",\"properties\":{\"v\":{\"type\":\"f64\",\"nullable\":true},"
				"\"w\":{\"type\":\"string\",\"nullable\":true}}}", &wider), 0);
	CHECK_EQ(fixture_schema("{\"kind\":\"node\",\"properties\":{\"v\":{\"type\":\"string\",\"nullable\":true}}}",
				&other), 0);
	CHECK_EQ(fixture_op(manifest, "main", MANIFEST_SCHEMA, "T", NULL, &wider, &error), 0);
	CHECK_EQ(head_of(manifest, "main", "T", &after), 0);
	CHECK_EQ(after.table_version, before.table_version + 1);
	CHECK(strcmp(after.schema_hash, before.schema_hash) != 0);
	CHECK_EQ(after.row_count, 1);
	CHECK_EQ(after.byte_size, before.byte_size);
	CHECK_EQ(fixture_op(manifest, "main", MANIFEST_SCHEMA, "T", NULL, &other, &error), -EINVAL);
	CHECK_EQ(fixture_version(manifest), 2);
	schema_free(&wider);
	schema_free(&other);
	manifest_close(manifest);
}

/* ---- branches ----------------------------------------------------------------------- */

static uint64_t manifest_file_size(void)
{
	char path[4300];
	struct stat status;
	snprintf(path, sizeof path, "%s/manifest", fixture_store_path());
	return stat(path, &status) == 0 ? (uint64_t)status.st_size : 0;
}

/* Bytes a branch create appends to a store holding tables tables. */
static uint64_t branch_create_cost(int tables)
{
	char path[4300];
	snprintf(path, sizeof path, "rm -rf '%s'", fixture_store_path());
	if (system(path) != 0)
		return 0;
	struct manifest *manifest;
	if (fixture_create_open(&manifest) < 0)
		return 0;
	for (int i = 0; i < tables; i++) {
		char name[16];
		snprintf(name, sizeof name, "T%03d", i);
		if (fixture_merge_one(manifest, "main", name, "a", i) < 0)
			return 0;
	}
	uint64_t before = manifest_file_size();
	struct error_info error;
	if (manifest_branch_create(manifest, "feature", "main", &error) < 0)
		return 0;
	uint64_t after = manifest_file_size();
	manifest_close(manifest);
	return after - before;
}

TEST(branch_create_costs_the_same_at_any_table_count)
{
	uint64_t small = branch_create_cost(2), large = branch_create_cost(60);
	CHECK(small > 0);
	CHECK_EQ(small, large);
}

TEST(a_branch_sees_the_source_tables_and_its_first_write_takes_ownership)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct error_info error;
	CHECK_EQ(fixture_merge_one(manifest, "main", "T", "a", 1), 0);
	CHECK_EQ(fixture_merge_one(manifest, "main", "U", "a", 1), 0);
	CHECK_EQ(manifest_branch_create(manifest, "dev", "main", &error), 0);
	struct head_row on_main, on_dev;
	CHECK_EQ(head_of(manifest, "dev", "T", &on_dev), 0);
	CHECK_EQ(head_of(manifest, "main", "T", &on_main), 0);
	CHECK_EQ(strcmp(on_dev.owner, ""), 0);
	CHECK_EQ(memcmp(&on_dev, &on_main, sizeof on_dev), 0);
	CHECK_EQ(fixture_merge_one(manifest, "dev", "T", "b", 2), 0);
	CHECK_EQ(head_of(manifest, "dev", "T", &on_dev), 0);
	CHECK_EQ(strcmp(on_dev.owner, "dev"), 0);
	CHECK_EQ(on_dev.row_count, 2);
	CHECK_EQ(ulid_compare(&on_dev.stable_id, &on_main.stable_id), 0);
	struct head_row main_after, untouched;
	CHECK_EQ(head_of(manifest, "main", "T", &main_after), 0);
	CHECK_EQ(memcmp(&main_after, &on_main, sizeof on_main), 0);
	CHECK_EQ(head_of(manifest, "dev", "U", &untouched), 0);
	CHECK_EQ(strcmp(untouched.owner, ""), 0);
	manifest_close(manifest);
}

TEST(branch_delete_refuses_main_the_mounted_branch_and_a_forked_from_branch)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct error_info error;
	CHECK_EQ(manifest_branch_create(manifest, "a", "main", &error), 0);
	CHECK_EQ(manifest_branch_create(manifest, "b", "a", &error), 0);
	CHECK_EQ(manifest_branch_create(manifest, "a", "main", &error), -EEXIST);
	CHECK_EQ(manifest_branch_delete(manifest, "main", NULL, &error), -EBUSY);
	CHECK_EQ(manifest_branch_delete(manifest, "b", "b", &error), -EBUSY);
	CHECK_EQ(manifest_branch_delete(manifest, "a", NULL, &error), -ENOTEMPTY);
	CHECK_EQ(manifest_branch_delete(manifest, "zzz", NULL, &error), -ENOENT);
	CHECK_EQ(manifest_branch_delete(manifest, "b", "main", &error), 0);
	CHECK_EQ(manifest_branch_delete(manifest, "a", "main", &error), 0);
	struct manifest_snapshot snapshot;
	CHECK_EQ(manifest_snapshot_latest(manifest, "a", &snapshot), -ENOENT);
	CHECK_EQ(fixture_version(manifest), 0);
	manifest_close(manifest);
}

/* ---- compare-and-swap ----------------------------------------------------------------- */

TEST(a_based_on_write_to_a_moved_table_is_ebusy_and_publishes_nothing)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct error_info error;
	CHECK_EQ(fixture_merge_one(manifest, "main", "T", "a", 1), 0);
	CHECK_EQ(fixture_merge_one(manifest, "main", "T", "b", 1), 0);
	char path[4300];
	snprintf(path, sizeof path, "%s/manifest", fixture_store_path());
	size_t before_size, after_size;
	unsigned char *before = fixture_read_file(path, &before_size);
	CHECK(before != NULL);

	const char *lines[] = { "{\"id\":\"x\",\"v\":1}" };
	struct schema schema;
	CHECK_EQ(fixture_schema(NODE_SCHEMA, &schema), 0);
	struct table_stage *stage;
	CHECK_EQ(fixture_stage(manifest, &schema, TABLE_OVERWRITE, lines, 1, NULL, &stage), 0);
	struct manifest_op op = { .kind = MANIFEST_WRITE, .stage = stage, .based_on_version = 1 };
	snprintf(op.name, sizeof op.name, "T");
	struct manifest_commit_request request = { .branch = "main", .actor = "t", .message = "m",
						   .op_count = 1, .ops = &op };
	struct manifest_commit_result result;
	error_info_clear(&error);
	CHECK_EQ(manifest_commit(manifest, &request, &result, &error), -EBUSY);
	CHECK(strstr(error.message, "moved from version 1 to 2") != NULL);
	unsigned char *after = fixture_read_file(path, &after_size);
	CHECK(after != NULL);
	CHECK_EQ(after_size, before_size);
	CHECK(memcmp(before, after, before_size) == 0);
	free(before);
	free(after);

	/* based on the current version, the same stage publishes */
	op.based_on_version = 2;
	CHECK_EQ(manifest_commit(manifest, &request, &result, &error), 0);
	CHECK_EQ(result.version, 3);
	struct head_row head;
	CHECK_EQ(head_of(manifest, "main", "T", &head), 0);
	CHECK_EQ(head.row_count, 1);
	table_stage_free(stage);
	schema_free(&schema);
	manifest_close(manifest);
}

TEST(a_write_validated_against_a_changed_schema_is_ebusy)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct error_info error;
	CHECK_EQ(fixture_merge_one(manifest, "main", "T", "a", 1), 0);
	const char *lines[] = { "{\"id\":\"x\",\"v\":1}" };
	struct schema schema;
	CHECK_EQ(fixture_schema(NODE_SCHEMA, &schema), 0);
	struct table_stage *stage;
	CHECK_EQ(fixture_stage(manifest, &schema, TABLE_MERGE, lines, 1, NULL, &stage), 0);
	struct manifest_op op = { .kind = MANIFEST_WRITE, .stage = stage };
	snprintf(op.name, sizeof op.name, "T");
	snprintf(op.expected_schema_hash, sizeof op.expected_schema_hash, "0123456789abcdef");
	struct manifest_commit_request request = { .branch = "main", .actor = "t", .message = "m",
						   .op_count = 1, .ops = &op };
	struct manifest_commit_result result;
	CHECK_EQ(manifest_commit(manifest, &request, &result, &error), -EBUSY);
	CHECK_EQ(fixture_version(manifest), 1);
	table_stage_free(stage);
	schema_free(&schema);
	manifest_close(manifest);
}

/* ---- log and commits -------------------------------------------------------------------- */

static int count_commit(const struct commit_record *record, void *context)
{
	uint64_t *versions = context;
	versions[++versions[0]] = record->version;
	return 0;
}

TEST(the_log_walks_the_branch_newest_first_into_its_source)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct error_info error;
	CHECK_EQ(fixture_merge_one(manifest, "main", "T", "a", 1), 0);
	CHECK_EQ(manifest_branch_create(manifest, "dev", "main", &error), 0);
	CHECK_EQ(fixture_merge_one(manifest, "main", "T", "b", 1), 0);
	CHECK_EQ(fixture_merge_one(manifest, "dev", "T", "c", 1), 0);
	struct manifest_snapshot snapshot;
	CHECK_EQ(manifest_snapshot_latest(manifest, "dev", &snapshot), 0);
	uint64_t versions[8] = { 0 };
	CHECK_EQ(manifest_log_each(manifest, &snapshot, count_commit, versions), 0);
	CHECK_EQ(versions[0], 2);
	CHECK_EQ(versions[1], 3);
	CHECK_EQ(versions[2], 1);
	struct commit_record record;
	CHECK_EQ(manifest_commit_read(manifest, snapshot.branch.head_record, &record), 0);
	CHECK_EQ(record.parent_count, 1);
	uint64_t version;
	struct block_address address;
	CHECK_EQ(manifest_commit_find(manifest, &record.id, &version, &address), 0);
	CHECK_EQ(version, 3);
	CHECK_EQ(address.offset, snapshot.branch.head_record.offset);
	CHECK_EQ(manifest_commit_find(manifest, &record.parents[0], &version, &address), 0);
	CHECK_EQ(version, 1);
	commit_record_free(&record);
	struct ulid unknown;
	ulid_new(&unknown);
	CHECK_EQ(manifest_commit_find(manifest, &unknown, &version, &address), -ENOENT);
	manifest_close(manifest);
}

TEST(another_handle_sees_a_publish_after_refresh)
{
	struct manifest *writer, *reader;
	CHECK_EQ(fixture_create_open(&writer), 0);
	struct error_info error;
	CHECK_EQ(manifest_open(fixture_store_path(), MANIFEST_READ_ONLY, &reader, &error), 0);
	CHECK_EQ(fixture_merge_one(writer, "main", "T", "a", 1), 0);
	bool changed = false;
	CHECK_EQ(manifest_refresh(reader, &changed), 0);
	CHECK(changed);
	CHECK_EQ(fixture_version(reader), 1);
	CHECK_EQ(manifest_refresh(reader, &changed), 0);
	CHECK(!changed);
	manifest_close(reader);
	manifest_close(writer);
}

/* ---- the flat-cost gate ----------------------------------------------------------------- */

static int count_head(const struct head_row *head, void *context)
{
	(void)head;
	(*(size_t *)context)++;
	return 0;
}

/* Opens a fresh handle and resolves every live head of main; returns the manifest counters. */
static int heads_cost(struct io_counters *out, size_t *heads)
{
	struct manifest *manifest;
	struct error_info error;
	struct manifest_snapshot snapshot;
	*heads = 0;
	io_counters_reset();
	int rc = manifest_open(fixture_store_path(), MANIFEST_READ_ONLY, &manifest, &error);
	if (rc < 0)
		return rc;
	rc = manifest_snapshot_latest(manifest, "main", &snapshot);
	if (rc == 0)
		rc = manifest_heads_each(manifest, &snapshot, false, count_head, heads);
	io_counters_get(IO_MANIFEST, out);
	manifest_close(manifest);
	return rc;
}

/* Commits one-row merges (32 tables in turn, the same row id) until version target. */
static int extend_history(struct manifest *manifest, uint64_t target)
{
	for (uint64_t version = fixture_version(manifest); version < target; version++) {
		char table[8];
		snprintf(table, sizeof table, "T%02d", (int)(version % 32));
		int rc = fixture_merge_one(manifest, "main", table, "r", (long)version);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Pages (manifest and data) read by one one-row merge commit. */
static int merge_cost(struct manifest *manifest, struct io_counters *manifest_out,
		      struct io_counters *data_out)
{
	io_counters_reset();
	int rc = fixture_merge_one(manifest, "main", "T05", "r", 7);
	io_counters_get(IO_MANIFEST, manifest_out);
	io_counters_get(IO_DATA, data_out);
	return rc;
}

TEST(resolving_all_heads_of_32_tables_costs_the_same_at_100_and_5000_commits)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct io_counters shallow, deep, shallow_commit, deep_commit, shallow_data, deep_data;
	size_t shallow_heads, deep_heads;
	CHECK_EQ(extend_history(manifest, 99), 0);
	CHECK_EQ(merge_cost(manifest, &shallow_commit, &shallow_data), 0);
	CHECK_EQ(fixture_version(manifest), 100);
	CHECK_EQ(heads_cost(&shallow, &shallow_heads), 0);
	CHECK_EQ(extend_history(manifest, 4999), 0);
	CHECK_EQ(merge_cost(manifest, &deep_commit, &deep_data), 0);
	CHECK_EQ(fixture_version(manifest), 5000);
	CHECK_EQ(heads_cost(&deep, &deep_heads), 0);
	manifest_close(manifest);

	CHECK_EQ(shallow_heads, 32);
	CHECK_EQ(deep_heads, 32);
	CHECK(shallow.pages > 32);
	CHECK_EQ(deep.reads, shallow.reads);
	CHECK_EQ(deep.bytes, shallow.bytes);
	CHECK_EQ(deep.pages, shallow.pages);
	CHECK_EQ(deep.rows_decoded, shallow.rows_decoded);
	CHECK_EQ(deep.writes, shallow.writes);
	CHECK_EQ(deep.bytes_written, shallow.bytes_written);
	CHECK_EQ(deep.fsyncs, shallow.fsyncs);
	/* and a commit touches the same number of pages at both depths */
	CHECK(shallow_commit.pages > 0);
	CHECK_EQ(deep_commit.pages, shallow_commit.pages);
	CHECK_EQ(deep_data.pages, shallow_data.pages);
	CHECK_EQ(deep_commit.writes, shallow_commit.writes);
	CHECK_EQ(deep_commit.fsyncs, shallow_commit.fsyncs);
}

int main(void)
{
	return harness_run();
}
