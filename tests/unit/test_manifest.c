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
		1, "store format 1 is older than this graphfs (formats 6 to 8): dump it with the graphfs version that "
		   "wrote it, keeping every branch, tag and commit (graphfs dump STORE --all > history.ndjson; a graphfs "
		   "without dump --all: graphfs dump STORE > graph.ndjson, the current state; format 1 has no dump: "
		   "graphfs export each table), then graphfs init a new store and graphfs load it (or graphfs import "
		   "each table)");
}

TEST(a_newer_format_is_refused_with_the_upgrade_message_before_recovery)
{
	format_refused_before_recovery(9, "store format 9 is newer than this graphfs (formats 6 to 8): upgrade graphfs");
}

TEST(a_format_5_store_is_refused_with_the_dump_message)
{
	format_refused_before_recovery(
		5, "store format 5 is older than this graphfs (formats 6 to 8): dump it with the graphfs version that "
		   "wrote it, keeping every branch, tag and commit (graphfs dump STORE --all > history.ndjson; a graphfs "
		   "without dump --all: graphfs dump STORE > graph.ndjson, the current state; format 1 has no dump: "
		   "graphfs export each table), then graphfs init a new store and graphfs load it (or graphfs import "
		   "each table)");
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
	CHECK_EQ(manifest_branch_create(manifest, "side", "main", NULL, &error), 0);
	CHECK_EQ(fixture_version(manifest), 1);
	CHECK_EQ(fixture_merge_one(manifest, "side", "Person", "b", 2), 0);
	CHECK_EQ(fixture_version(manifest), 2);
	CHECK_EQ(fixture_merge_one(manifest, "main", "Person", "c", 3), 0);
	CHECK_EQ(fixture_version(manifest), 3);
	struct manifest_snapshot snapshot;
	CHECK_EQ(manifest_snapshot_latest(manifest, "side", &snapshot), 0);
	CHECK_EQ(snapshot.branch.head_version, 2);
	CHECK_EQ(snapshot.branch.fork_point, 1);
	CHECK_EQ(snapshot.branch.created_version, 1);
	CHECK_EQ(manifest_snapshot_latest(manifest, "main", &snapshot), 0);
	CHECK_EQ(snapshot.branch.head_version, 3);
	manifest_close(manifest);
}

TEST(history_refuses_future_versions_unknown_branches_and_versions_before_the_first_commit)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct error_info error;
	struct manifest_snapshot snapshot;
	CHECK_EQ(manifest_snapshot_at(manifest, "main", 1, &snapshot), -ENOENT);
	CHECK_EQ(fixture_merge_one(manifest, "main", "Person", "a", 1), 0);
	CHECK_EQ(fixture_merge_one(manifest, "main", "Person", "b", 1), 0);
	CHECK_EQ(manifest_branch_create(manifest, "side", "main", NULL, &error), 0);
	CHECK_EQ(manifest_snapshot_at(manifest, "main", 3, &snapshot), -ENOENT);
	CHECK_EQ(manifest_snapshot_at(manifest, "main", 0, &snapshot), -ENOENT);
	CHECK_EQ(manifest_snapshot_at(manifest, "nope", 2, &snapshot), -ENOENT);
	CHECK_EQ(manifest_snapshot_at(manifest, "side", 2, &snapshot), 0);
	CHECK_EQ(fixture_merge_one(manifest, "side", "Person", "c", 1), 0);
	CHECK_EQ(manifest_snapshot_at(manifest, "side", 2, &snapshot), 0);
	struct fixture_heads heads;
	CHECK_EQ(manifest_heads_each(manifest, &snapshot, false, fixture_collect_head, &heads), 0);
	CHECK_EQ(heads.count, 1);
	CHECK_EQ(heads.heads[0].row_count, 2);
	manifest_close(manifest);
}

/* Rows of Person in branch at version (-1: the snapshot does not resolve). */
static long rows_at(struct manifest *manifest, const char *branch, uint64_t version)
{
	struct manifest_snapshot snapshot;
	struct head_row head;
	if (manifest_snapshot_at(manifest, branch, version, &snapshot) < 0 ||
	    manifest_head_find(manifest, &snapshot, "Person", &head) < 0)
		return -1;
	return (long)head.row_count;
}

TEST(a_branch_before_its_creation_shows_the_branch_it_forked_from_two_forks_deep)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct error_info error;
	/* main: 1, 2; exp forks at 2; main: 3; exp: 4; sub forks from exp at 4; main: 5; sub: 6 */
	CHECK_EQ(fixture_merge_one(manifest, "main", "Person", "a", 1), 0);
	CHECK_EQ(fixture_merge_one(manifest, "main", "Person", "b", 1), 0);
	CHECK_EQ(manifest_branch_create(manifest, "exp", "main", NULL, &error), 0);
	CHECK_EQ(fixture_merge_one(manifest, "main", "Person", "c", 1), 0);
	CHECK_EQ(fixture_merge_one(manifest, "exp", "Person", "x", 1), 0);
	CHECK_EQ(manifest_branch_create(manifest, "sub", "exp", NULL, &error), 0);
	CHECK_EQ(fixture_merge_one(manifest, "main", "Person", "d", 1), 0);
	CHECK_EQ(fixture_merge_one(manifest, "sub", "Person", "y", 1), 0);
	long expected_sub[] = { -1, 1, 2, 2, 3, 3, 4 };
	long expected_main[] = { -1, 1, 2, 3, 3, 4, 4 };
	for (uint64_t version = 0; version <= 6; version++) {
		CHECK_EQ(rows_at(manifest, "sub", version), expected_sub[version]);
		CHECK_EQ(rows_at(manifest, "main", version), expected_main[version]);
	}
	/* every version sub's log lists opens */
	struct manifest_snapshot snapshot;
	CHECK_EQ(manifest_snapshot_latest(manifest, "sub", &snapshot), 0);
	CHECK_EQ(snapshot.branch.fork_point, 4);
	CHECK_EQ(snapshot.branch.created_version, 4);
	struct fixture_versions listed = { 0 };
	CHECK_EQ(manifest_log_each(manifest, &snapshot, fixture_collect_version, &listed), 0);
	CHECK_EQ(listed.count, 4);   /* 6, 4, 2, 1 */
	for (size_t i = 0; i < listed.count; i++)
		CHECK(rows_at(manifest, "sub", listed.versions[i]) > 0);
	manifest_close(manifest);
}

TEST(the_fork_point_is_the_sources_version_not_the_stores)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct error_info error;
	CHECK_EQ(fixture_merge_one(manifest, "main", "Person", "a", 1), 0);
	CHECK_EQ(manifest_branch_create(manifest, "exp", "main", NULL, &error), 0);
	CHECK_EQ(fixture_merge_one(manifest, "exp", "Person", "b", 1), 0);
	CHECK_EQ(fixture_merge_one(manifest, "exp", "Person", "c", 1), 0);
	CHECK_EQ(manifest_branch_create(manifest, "late", "main", NULL, &error), 0);
	struct manifest_snapshot snapshot;
	CHECK_EQ(manifest_snapshot_latest(manifest, "late", &snapshot), 0);
	CHECK_EQ(snapshot.branch.fork_point, 1);
	CHECK_EQ(snapshot.branch.created_version, 3);
	CHECK_EQ(rows_at(manifest, "late", 2), 1);
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
	CHECK_EQ(manifest_branch_create(manifest, "side", "main", NULL, &error), 0);
	enum { COMMITS = 200, BRANCHES = 2 };
	static struct model models[COMMITS + 1][BRANCHES];
	static bool committed[COMMITS + 1][BRANCHES];   /* the branch has a commit at or before the version */
	memset(models, 0, sizeof models);
	memset(committed, 0, sizeof committed);
	const char *branch_names[BRANCHES] = { "main", "side" };
	const char *table_names[] = { "A", "B", "C", "D", "E" };
	unsigned seed = 24601;
	for (uint64_t version = 1; version <= COMMITS; version++) {
		memcpy(models[version], models[version - 1], sizeof models[version]);
		memcpy(committed[version], committed[version - 1], sizeof committed[version]);
		int b = (int)(rand_r(&seed) % BRANCHES);
		committed[version][b] = true;
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
			/* before a branch's first commit there is no state to show */
			CHECK_EQ(fixture_heads(manifest, branch_names[b], version, false, &heads),
				 committed[version][b] ? 0 : -ENOENT);
			if (!committed[version][b])
				continue;
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
		CHECK_EQ(manifest_branch_create(manifest, bad[i], "main", NULL, &error), -EINVAL);
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

TEST(a_node_table_referenced_by_a_live_edge_table_cannot_be_dropped_but_can_be_renamed)
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
	/* the rename gives Knows a schema naming People, in the same commit */
	CHECK_EQ(fixture_op(manifest, "main", MANIFEST_RENAME, "Person", "People", NULL, &error), 0);
	CHECK_EQ(fixture_op(manifest, "main", MANIFEST_DROP, "People", NULL, NULL, &error), -EBUSY);
	CHECK(strstr(error.message, "Knows") != NULL);
	CHECK_EQ(fixture_op(manifest, "main", MANIFEST_DROP, "Knows", NULL, NULL, &error), 0);
	CHECK_EQ(fixture_op(manifest, "main", MANIFEST_DROP, "People", NULL, NULL, &error), 0);
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

/* Where the manifest's blocks end: after the latest root (preallocated zeros follow). */
static uint64_t manifest_blocks_end(struct manifest *manifest)
{
	struct root_record latest;
	return manifest_latest(manifest, &latest) == 0 ? latest.self.offset + MANIFEST_ROOT_BLOCK_SIZE : 0;
}

TEST(the_preallocation_chunk_is_an_eighth_of_the_file_from_64_kib_to_1_mib)
{
	CHECK_EQ(manifest_preallocation(12288), 64u << 10);
	CHECK_EQ(manifest_preallocation(1u << 20), 128u << 10);
	CHECK_EQ(manifest_preallocation((2u << 20) - 1), 128u << 10);
	CHECK_EQ(manifest_preallocation(2u << 20), 256u << 10);
	CHECK_EQ(manifest_preallocation(8u << 20), 1u << 20);
	CHECK_EQ(manifest_preallocation(UINT64_C(1) << 40), 1u << 20);
}

TEST(commits_overwrite_preallocated_zeros_and_the_file_grows_a_chunk_at_a_time)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	CHECK_EQ(fixture_merge_one(manifest, "main", "T", "a", 1), 0);
	uint64_t size = manifest_file_size();
	CHECK_EQ(size % MANIFEST_PREALLOCATE_MIN, 0);
	CHECK(manifest_blocks_end(manifest) < size);
	io_counters_reset();
	CHECK_EQ(fixture_merge_one(manifest, "main", "T", "b", 2), 0);
	struct io_counters counters;
	io_counters_get(IO_MANIFEST, &counters);
	CHECK_EQ(manifest_file_size(), size);
	CHECK(counters.bytes_written < MANIFEST_PREALLOCATE_MIN);   /* the blocks and a meta slot, no padding */
	CHECK_EQ(manifest_verify(manifest, NULL, NULL, NULL, NULL), 0);
	manifest_close(manifest);
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
	uint64_t before = manifest_blocks_end(manifest);
	struct error_info error;
	if (manifest_branch_create(manifest, "feature", "main", NULL, &error) < 0)
		return 0;
	uint64_t after = manifest_blocks_end(manifest);
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
	CHECK_EQ(manifest_branch_create(manifest, "dev", "main", NULL, &error), 0);
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
	CHECK_EQ(manifest_branch_create(manifest, "a", "main", NULL, &error), 0);
	CHECK_EQ(manifest_branch_create(manifest, "b", "a", NULL, &error), 0);
	CHECK_EQ(manifest_branch_create(manifest, "a", "main", NULL, &error), -EEXIST);
	CHECK_EQ(manifest_branch_delete(manifest, "main", NULL, false, NULL, &error), -EBUSY);
	CHECK_EQ(manifest_branch_delete(manifest, "b", "b", false, NULL, &error), -EBUSY);
	CHECK_EQ(manifest_branch_delete(manifest, "a", NULL, false, NULL, &error), -ENOTEMPTY);
	CHECK_EQ(manifest_branch_delete(manifest, "zzz", NULL, false, NULL, &error), -ENOENT);
	CHECK_EQ(manifest_branch_delete(manifest, "b", "main", false, NULL, &error), 0);
	CHECK_EQ(manifest_branch_delete(manifest, "a", "main", false, NULL, &error), 0);
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
	CHECK_EQ(manifest_branch_create(manifest, "dev", "main", NULL, &error), 0);
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
	journal_commit_record_free(&record);
	struct ulid unknown;
	ulid_new(&unknown);
	CHECK_EQ(manifest_commit_find(manifest, &unknown, &version, &address), -ENOENT);
	manifest_close(manifest);
}

/* Versions and times of a log walk, newest first (up to 4,096). */
struct log_lines {
	size_t count;
	uint64_t versions[4096];
	uint64_t times[4096];
	bool reclaimed[4096];
};

static int collect_record(const struct commit_record *record, void *context)
{
	struct log_lines *lines = context;
	if (lines->count == 4096)
		return -ENOSPC;
	lines->versions[lines->count] = record->version;
	lines->times[lines->count] = record->time_us;
	lines->reclaimed[lines->count++] = record->reclaimed;
	return 0;
}

static int collect_version(const struct manifest_log_version *entry, void *context)
{
	struct log_lines *lines = context;
	if (lines->count == 4096)
		return -ENOSPC;
	lines->versions[lines->count] = entry->version;
	lines->times[lines->count] = entry->time_us;
	lines->reclaimed[lines->count++] = entry->reclaimed;
	return 0;
}

/* The log of branch twice, by records and by the index; both must agree (times
 * only where the record is read: a reclaimed line has none). expected: the
 * number of lines (0: not checked). */
static void check_log_versions_agree(struct manifest *manifest, const char *branch, size_t expected,
				     struct io_counters *index_cost, struct io_counters *record_cost,
				     bool *ends_reclaimed)
{
	static struct log_lines by_record, by_index;
	memset(&by_record, 0, sizeof by_record);
	memset(&by_index, 0, sizeof by_index);
	struct manifest_snapshot snapshot;
	CHECK_EQ(manifest_snapshot_latest(manifest, branch, &snapshot), 0);
	io_counters_reset();
	CHECK_EQ(manifest_log_each(manifest, &snapshot, collect_record, &by_record), 0);
	io_counters_get(IO_MANIFEST, record_cost);
	io_counters_reset();
	CHECK_EQ(manifest_log_versions(manifest, &snapshot, collect_version, &by_index), 0);
	io_counters_get(IO_MANIFEST, index_cost);
	if (expected)
		CHECK_EQ(by_index.count, expected);
	CHECK_EQ(by_record.count, by_index.count);
	CHECK(by_index.count > 0);
	for (size_t i = 0; i < by_index.count; i++) {
		CHECK_EQ(by_index.versions[i], by_record.versions[i]);
		CHECK_EQ(by_index.reclaimed[i], by_record.reclaimed[i]);
		if (!by_index.reclaimed[i])
			CHECK_EQ(by_index.times[i], by_record.times[i]);
	}
	*ends_reclaimed = by_index.reclaimed[by_index.count - 1];
}

TEST(listing_a_branch_s_versions_reads_an_index_leaf_per_256_versions_not_a_record_per_commit)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct error_info error;
	/* main commits 1,200 times; side, forked at version 300, commits every third time in between */
	for (int i = 0; i < 1200; i++) {
		CHECK_EQ(fixture_merge_one(manifest, "main", "T", "a", i), 0);
		if (i == 299)
			CHECK_EQ(manifest_branch_create(manifest, "side", "main", NULL, &error), 0);
		if (i >= 300 && i % 3 == 0)
			CHECK_EQ(fixture_merge_one(manifest, "side", "T", "b", i), 0);
	}
	struct io_counters by_index, by_record;
	bool ends_reclaimed;
	check_log_versions_agree(manifest, "main", 1200, &by_index, &by_record, &ends_reclaimed);
	CHECK(!ends_reclaimed);
	/* 1,500 versions: six leaves and their parents, against a record per commit */
	CHECK(by_record.pages >= 1200);
	CHECK(by_index.pages <= 1500 / 256 + 1 + 4 + 2);
	fprintf(stderr, "    pages to list 1,200 versions of main: %llu from the index, %llu from the commit records\n",
	       (unsigned long long)by_index.pages, (unsigned long long)by_record.pages);
	check_log_versions_agree(manifest, "side", 300 + 300, &by_index, &by_record, &ends_reclaimed);
	CHECK(by_index.pages <= 1500 / 256 + 1 + 4 + 2);
	/* after a gc the walk ends with the reclaimed line, like the records' */
	struct manifest_gc_request request = { .keep_versions = 100 };
	struct manifest_gc_result result;
	CHECK_EQ(manifest_gc(manifest, &request, &result, &error), 0);
	/* side's fork holds the horizon below the merge base (version 300) */
	CHECK_EQ(result.horizon, 299);
	check_log_versions_agree(manifest, "main", 0, &by_index, &by_record, &ends_reclaimed);
	CHECK(ends_reclaimed);
	CHECK(by_index.pages <= 1500 / 256 + 1 + 4 + 2);
	manifest_close(manifest);
}

TEST(the_merge_base_of_branches_that_diverged_for_hundreds_of_commits_is_their_fork_point)
{
	/* walks this long grow the walk's table several times; ids are random, so try a few forks */
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct error_info error;
	for (int attempt = 0; attempt < 4; attempt++) {
		char side[16];
		snprintf(side, sizeof side, "side%d", attempt);
		CHECK_EQ(fixture_merge_one(manifest, "main", "T", "a", attempt), 0);
		uint64_t fork = fixture_version(manifest);
		CHECK_EQ(manifest_branch_create(manifest, side, "main", NULL, &error), 0);
		for (int i = 0; i < 400; i++)
			CHECK_EQ(fixture_merge_one(manifest, i % 2 ? side : "main", "T", "b", i), 0);
		struct manifest_snapshot main_head, side_head;
		CHECK_EQ(manifest_snapshot_latest(manifest, "main", &main_head), 0);
		CHECK_EQ(manifest_snapshot_latest(manifest, side, &side_head), 0);
		struct ulid base;
		uint64_t version = 0;
		struct block_address record;
		CHECK_EQ(manifest_merge_base(manifest, &side_head.branch.head_commit, side_head.branch.head_record,
					     &main_head.branch.head_commit, main_head.branch.head_record, &base, &version,
					     &record),
			 0);
		CHECK_EQ(version, fork);
	}
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

/* Manifest read calls and pages of one one-row merge commit by manifest. */
static void commit_reads(struct manifest *manifest, const char *table, long value, struct io_counters *out)
{
	io_counters_reset();
	CHECK_EQ(fixture_merge_one(manifest, "main", table, "r", value), 0);
	io_counters_get(IO_MANIFEST, out);
}

TEST(a_publish_reads_the_tails_other_writers_appended_since_its_last_with_one_read)
{
	struct manifest *mine, *other;
	CHECK_EQ(fixture_create_open(&mine), 0);
	CHECK_EQ(fixture_open(&other), 0);
	CHECK_EQ(pager_cache_limit(manifest_pager(mine), 1u << 20), 0);   /* as a store handle keeps blocks */
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(fixture_merge_one(mine, "main", "Mine", "r", i), 0);
		CHECK_EQ(fixture_merge_one(other, "main", "Other", "r", i), 0);
	}
	/* after its own commit, every node the next one rewrites is in its cache */
	struct io_counters after_own, after_others;
	commit_reads(mine, "Mine", 10, &after_own);
	commit_reads(mine, "Mine", 11, &after_own);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(fixture_merge_one(other, "main", "Other", "r", 20 + i), 0);
	/* after three commits of another writer, the nodes they rewrote (heads, branches and
	 * version index paths, the base's commit record) come from one read of their tails */
	commit_reads(mine, "Mine", 12, &after_others);
	CHECK_EQ(after_own.pages, 0);
	CHECK(after_others.pages >= 8);
	/* the newest root (the refresh finds it) and the window: two reads more, however many blocks */
	CHECK_EQ(after_others.reads, after_own.reads + 2);
	manifest_close(other);
	manifest_close(mine);
}

TEST(a_hint_that_names_no_root_of_the_store_is_ignored)
{
	struct manifest *first, *second;
	CHECK_EQ(fixture_create_open(&first), 0);
	CHECK_EQ(fixture_open(&second), 0);
	CHECK_EQ(fixture_merge_one(first, "main", "A", "a", 1), 0);
	struct root_record bogus;
	CHECK_EQ(manifest_latest(first, &bogus), 0);
	uint64_t version = bogus.version;
	/* past the end of the file; then on a block that is not a root; then a root of another sequence */
	const uint64_t offsets[3] = { 1u << 30, MANIFEST_FIRST_BLOCK, bogus.self.offset };
	for (int i = 0; i < 3; i++) {
		struct root_record lie = bogus;
		lie.sequence = bogus.sequence + 100 + (uint64_t)i;
		lie.self.offset = offsets[i];
		manifest_written_hint_write(first, &lie, offsets[i] + MANIFEST_ROOT_BLOCK_SIZE);
		CHECK_EQ(fixture_merge_one(second, "main", "B", "b", i), 0);
		CHECK_EQ(fixture_version(second), ++version);
	}
	CHECK_EQ(fixture_merge_one(first, "main", "A", "a", 2), 0);
	CHECK_EQ(fixture_version(first), version + 1);
	CHECK_EQ(manifest_verify(first, fixture_print_finding, NULL, NULL, NULL), 0);
	manifest_close(second);
	manifest_close(first);
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

/* ---- versions by time ------------------------------------------------------------------- */

/* The newest version whose commit time is at or before time_us (0: none), from the list. */
static uint64_t expected_version(const struct fixture_versions *list, uint64_t time_us)
{
	uint64_t best = 0;
	for (size_t i = 0; i < list->count; i++)
		if (list->times[i] <= time_us && list->versions[i] > best)
			best = list->versions[i];
	return best;
}

TEST(a_time_resolves_to_the_last_version_committed_at_or_before_it)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	uint64_t version = 0;
	CHECK_EQ(manifest_version_at_time(manifest, manifest_now_us(), &version), -ENOENT);
	struct error_info error;
	for (int i = 0; i < 6; i++) {
		CHECK_EQ(fixture_merge_one(manifest, "main", "Person", "a", i), 0);
		if (i == 2)
			CHECK_EQ(manifest_branch_create(manifest, "side", "main", NULL, &error), 0);
	}
	struct manifest_snapshot snapshot;
	struct fixture_versions list = { 0 };
	CHECK_EQ(manifest_snapshot_latest(manifest, "main", &snapshot), 0);
	CHECK_EQ(manifest_log_each(manifest, &snapshot, fixture_collect_version, &list), 0);
	CHECK_EQ(list.count, 6);
	for (size_t i = 0; i + 1 < list.count; i++)
		CHECK(list.times[i] >= list.times[i + 1]);
	uint64_t first = list.times[list.count - 1], last = list.times[0];
	/* before the first commit */
	CHECK_EQ(manifest_version_at_time(manifest, first - 1, &version), -ENOENT);
	/* exactly at, just after and just before each commit */
	for (size_t i = 0; i < list.count; i++) {
		uint64_t probes[] = { list.times[i], list.times[i] + 1, list.times[i] - 1 };
		for (size_t p = 0; p < 3; p++) {
			uint64_t expected = expected_version(&list, probes[p]);
			int rc = manifest_version_at_time(manifest, probes[p], &version);
			if (expected == 0) {
				CHECK_EQ(rc, -ENOENT);
			} else {
				CHECK_EQ(rc, 0);
				CHECK_EQ(version, expected);
			}
		}
	}
	/* long after the last */
	CHECK_EQ(manifest_version_at_time(manifest, last + 3600000000ull, &version), 0);
	CHECK_EQ(version, 6);
	manifest_close(manifest);
}

/* Manifest pages read to resolve the time of the middle commit. */
static int time_cost(struct manifest *manifest, struct io_counters *out, uint64_t *found)
{
	struct manifest_snapshot snapshot;
	struct fixture_versions list = { 0 };
	int rc = manifest_snapshot_latest(manifest, "main", &snapshot);
	if (rc == 0)
		rc = manifest_log_each(manifest, &snapshot, fixture_collect_version, &list);
	if (rc < 0)
		return rc;
	uint64_t probe = list.times[list.count / 2];
	io_counters_reset();
	rc = manifest_version_at_time(manifest, probe, found);
	io_counters_get(IO_MANIFEST, out);
	return rc;
}

TEST(resolving_a_time_reads_log_pages_of_history)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct io_counters shallow, deep, tag_cost;
	uint64_t found;
	CHECK_EQ(extend_history(manifest, 100), 0);
	CHECK_EQ(time_cost(manifest, &shallow, &found), 0);
	struct manifest_tag_request request = { .name = "early", .branch = "main" };
	struct error_info error;
	CHECK_EQ(manifest_tag_create(manifest, &request, NULL, &error), 0);
	CHECK_EQ(extend_history(manifest, 10000), 0);
	CHECK_EQ(time_cost(manifest, &deep, &found), 0);
	/* a tag resolves in one lookup of the tags tree, whatever the depth */
	struct manifest_snapshot tagged;
	io_counters_reset();
	CHECK_EQ(manifest_snapshot_tag(manifest, "early", &tagged), 0);
	io_counters_get(IO_MANIFEST, &tag_cost);
	CHECK_EQ(tagged.version, 100);
	manifest_close(manifest);
	fprintf(stderr, "    pages to resolve a tag at 10,000 versions: %llu\n", (unsigned long long)tag_cost.pages);
	CHECK(tag_cost.pages <= 3);
	fprintf(stderr, "    pages to resolve a time: %llu at 100 versions, %llu at 10,000\n",
		(unsigned long long)shallow.pages, (unsigned long long)deep.pages);
	/* a binary search over the commit times of the index's leaves (~log2(versions) probes,
	 * the nodes near the root read once), never a walk of the log (10,000 commit records) */
	CHECK(deep.pages > 0);
	CHECK(deep.pages <= 14 + 5 + 1);
	CHECK(deep.pages <= shallow.pages * 3);
}

static int collect_retained(const char *label, const struct branch_record *state, void *context)
{
	struct fixture_versions *list = context;
	if (list->count < 256)
		list->versions[list->count++] = state->head_version;
	return 0;
}

TEST(the_retention_hook_keeps_every_branch_head_and_every_tagged_version)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct error_info error;
	CHECK_EQ(fixture_merge_one(manifest, "main", "Person", "a", 1), 0);
	struct manifest_tag_request request = { .name = "first", .branch = "main" };
	CHECK_EQ(manifest_tag_create(manifest, &request, NULL, &error), 0);
	CHECK_EQ(manifest_branch_create(manifest, "side", "main", NULL, &error), 0);
	CHECK_EQ(extend_history(manifest, 6), 0);
	CHECK_EQ(fixture_merge_one(manifest, "side", "Person", "s", 1), 0);
	struct root_record latest;
	CHECK_EQ(manifest_latest(manifest, &latest), 0);
	struct fixture_versions retained = { 0 };
	CHECK_EQ(manifest_retained_states_each(manifest, &latest, collect_retained, &retained), 0);
	/* main's head (6), side's (7), and the tag's version 1, older than both */
	CHECK_EQ(retained.count, 3);
	CHECK_EQ(retained.versions[0], 6);
	CHECK_EQ(retained.versions[1], 7);
	CHECK_EQ(retained.versions[2], 1);
	/* and the tagged state reads as it was */
	struct manifest_snapshot tagged;
	struct head_row head;
	CHECK_EQ(manifest_snapshot_tag(manifest, "first", &tagged), 0);
	CHECK_EQ(manifest_head_find(manifest, &tagged, "Person", &head), 0);
	CHECK_EQ(head.row_count, 1);
	manifest_close(manifest);
}

/* ---- verify, corruption and repair ------------------------------------------------------- */

/* A store with every kind of manifest block: tables, deletes (bitmaps), schema changes,
 * an edge table, rename, drop, recreate, a branch with its own writes. */
static int build_rich_store(struct manifest *manifest)
{
	struct error_info error;
	struct schema node, wider, edge;
	const char *people[] = { "{\"id\":\"a\",\"v\":1}", "{\"id\":\"b\",\"v\":2}", "{\"id\":\"c\",\"v\":3}" };
	const char *remove_b[] = { "{\"id\":\"b\",\"@delete\":true}" };
	const char *knows[] = { "{\"id\":\"k1\",\"from\":\"a\",\"to\":\"c\"}" };
	struct table_stage *stage = NULL;
	int rc;
	if ((rc = fixture_schema(NODE_SCHEMA, &node)) < 0 ||
	    (rc = fixture_schema("{\"kind\":\"node\",\"properties\":{\"v\":{\"type\":\"f64\",\"nullable\":true},"
				 "\"w\":{\"type\":\"string\",\"nullable\":true}}}", &wider)) < 0 ||
	    (rc = fixture_schema("{\"kind\":\"edge\",\"from\":\"Person\",\"to\":\"Person\",\"properties\":{}}",
				 &edge)) < 0)
		return rc;
	if ((rc = fixture_write(manifest, "main", "Person", TABLE_MERGE, people, 3, NULL, &error)) < 0 ||
	    (rc = fixture_write(manifest, "main", "Person", TABLE_MERGE, remove_b, 1, NULL, &error)) < 0 ||
	    (rc = fixture_op(manifest, "main", MANIFEST_SCHEMA, "Person", NULL, &wider, &error)) < 0 ||
	    (rc = fixture_op(manifest, "main", MANIFEST_SCHEMA, "Knows", NULL, &edge, &error)) < 0 ||
	    (rc = fixture_stage(manifest, &edge, TABLE_MERGE, knows, 1, NULL, &stage)) < 0)
		goto out;
	struct manifest_op op = { .kind = MANIFEST_WRITE, .stage = stage };
	snprintf(op.name, sizeof op.name, "Knows");
	struct manifest_commit_request request = { .branch = "main", .actor = "t", .message = "edges",
						   .op_count = 1, .ops = &op };
	struct manifest_commit_result result;
	if ((rc = manifest_commit(manifest, &request, &result, &error)) < 0 ||
	    (rc = fixture_merge_one(manifest, "main", "Company", "x", 1)) < 0 ||
	    (rc = fixture_op(manifest, "main", MANIFEST_RENAME, "Company", "Firm", NULL, &error)) < 0 ||
	    (rc = fixture_op(manifest, "main", MANIFEST_DROP, "Firm", NULL, NULL, &error)) < 0 ||
	    (rc = fixture_merge_one(manifest, "main", "Firm", "y", 2)) < 0 ||
	    (rc = manifest_branch_create(manifest, "dev", "main", NULL, &error)) < 0 ||
	    (rc = fixture_merge_one(manifest, "dev", "Firm", "z", 3)) < 0 ||
	    (rc = fixture_write(manifest, "main", "Firm", TABLE_OVERWRITE, people, 2, NULL, &error)) < 0)
		goto out;
out:
	table_stage_free(stage);
	schema_free(&node);
	schema_free(&wider);
	schema_free(&edge);
	return rc;
}

static void collect_finding(const char *finding, void *context)
{
	struct buf *findings = context;
	buf_append_string(findings, finding);
	buf_append_string(findings, "\n");
}

TEST(verify_finds_nothing_in_a_good_store)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	CHECK_EQ(build_rich_store(manifest), 0);
	struct error_info error;
	CHECK_EQ(fixture_write_big(manifest, "Big", 1, NULL, &error), 0);
	struct buf findings;
	buf_init(&findings);
	int count = manifest_verify(manifest, collect_finding, &findings, NULL, NULL);
	if (count)
		fprintf(stderr, "%s", buf_cstr(&findings));
	CHECK_EQ(count, 0);
	manifest_close(manifest);
	CHECK_EQ(manifest_open(fixture_store_path(), MANIFEST_READ_ONLY, &manifest, &error), 0);
	CHECK_EQ(manifest_verify(manifest, NULL, NULL, NULL, NULL), 0);
	manifest_close(manifest);
	buf_free(&findings);
}

/* ---- what a reader can ask of a store, answered item by item ---- */

enum answer_kind { ANSWER_HEADS, ANSWER_LOG, ANSWER_TABLE, ANSWER_COMMIT };

struct answer {
	enum answer_kind kind;
	const char *branch;
	uint64_t version;
	char name[JOURNAL_NAME_MAX + 1];
	struct ulid commit;
	int rc;
	struct buf bytes;
};

struct answers {
	size_t count;
	struct answer items[512];
};

static int encode_head(const struct head_row *head, void *context)
{
	return journal_head_row_encode(head, context);
}

static int encode_commit(const struct commit_record *record, void *context)
{
	struct buf *out = context;
	int rc = buf_append(out, record->id.bytes, 16);
	if (rc == 0)
		rc = buf_put_u64(out, record->version);
	if (rc == 0)
		rc = journal_commit_record_encode(record, FILE_FORMAT_VERSION, out);
	return rc;
}

static int answer(struct manifest *manifest, struct answer *item)
{
	struct manifest_snapshot snapshot;
	buf_reset(&item->bytes);
	if (item->kind == ANSWER_COMMIT) {
		uint64_t version;
		struct block_address address;
		int rc = manifest_commit_find(manifest, &item->commit, &version, &address);
		if (rc == 0)
			rc = buf_put_u64(&item->bytes, version);
		if (rc == 0)
			rc = codec_put_address(&item->bytes, address);
		return rc;
	}
	int rc = manifest_snapshot_at(manifest, item->branch, item->version, &snapshot);
	if (rc < 0)
		return rc;
	switch (item->kind) {
	case ANSWER_HEADS:
		rc = manifest_heads_each(manifest, &snapshot, false, encode_head, &item->bytes);
		if (rc == 0)
			rc = manifest_heads_each(manifest, &snapshot, true, encode_head, &item->bytes);
		return rc;
	case ANSWER_LOG:
		return manifest_log_each(manifest, &snapshot, encode_commit, &item->bytes);
	case ANSWER_TABLE:
		return fixture_table_bytes(manifest, &snapshot, item->name, &item->bytes);
	default:
		return -EINVAL;
	}
}

static int add_table_answer(const struct head_row *head, void *context)
{
	struct answers *answers = context;
	struct answer *last = &answers->items[answers->count - 1];
	struct answer *item = &answers->items[answers->count++];
	item->kind = ANSWER_TABLE;
	item->branch = last->branch;
	item->version = last->version;
	snprintf(item->name, sizeof item->name, "%s", head->name);
	return 0;
}

/* Every question worth asking of the store, with the good store's answers. */
static int answers_build(struct manifest *manifest, struct answers *answers)
{
	const char *branches[] = { "main", "dev" };
	uint64_t latest = fixture_version(manifest);
	memset(answers, 0, sizeof *answers);
	for (uint64_t version = 0; version <= latest; version++)
		for (int b = 0; b < 2; b++) {
			struct manifest_snapshot snapshot;
			if (manifest_snapshot_at(manifest, branches[b], version, &snapshot) < 0)
				continue;
			struct answer *heads = &answers->items[answers->count++];
			heads->kind = ANSWER_HEADS;
			heads->branch = branches[b];
			heads->version = version;
			if (manifest_heads_each(manifest, &snapshot, false, add_table_answer, answers) < 0)
				return -EIO;
			struct answer *log = &answers->items[answers->count++];
			*log = *heads;
			log->kind = ANSWER_LOG;
			if (!ulid_is_zero(&snapshot.branch.head_commit) && b == 0) {
				struct answer *commit = &answers->items[answers->count++];
				commit->kind = ANSWER_COMMIT;
				commit->commit = snapshot.branch.head_commit;
			}
		}
	for (size_t i = 0; i < answers->count; i++) {
		buf_init(&answers->items[i].bytes);
		answers->items[i].rc = answer(manifest, &answers->items[i]);
		if (answers->items[i].rc < 0)
			return answers->items[i].rc;
	}
	return 0;
}

static void answers_free(struct answers *answers)
{
	for (size_t i = 0; i < answers->count; i++)
		buf_free(&answers->items[i].bytes);
}

/* Every answer of the damaged store is the good answer or an error: never other data. */
static bool answers_never_wrong(struct manifest *manifest, const struct answers *good, int *errors)
{
	struct answer item;
	buf_init(&item.bytes);
	bool ok = true;
	*errors = 0;
	for (size_t i = 0; i < good->count && ok; i++) {
		item = (struct answer){ .kind = good->items[i].kind, .branch = good->items[i].branch,
					.version = good->items[i].version, .commit = good->items[i].commit,
					.bytes = item.bytes };
		memcpy(item.name, good->items[i].name, sizeof item.name);
		int rc = answer(manifest, &item);
		if (rc < 0) {
			(*errors)++;
			continue;
		}
		/* an empty answer has no data pointer: memcmp must not see it */
		ok = item.bytes.size == good->items[i].bytes.size &&
		     (item.bytes.size == 0 ||
		      memcmp(item.bytes.data, good->items[i].bytes.data, item.bytes.size) == 0);
		if (!ok)
			fprintf(stderr, "    answer %zu (kind %d, %s @%llu %s) changed\n", i, (int)item.kind,
				item.branch ? item.branch : "", (unsigned long long)item.version, item.name);
	}
	buf_free(&item.bytes);
	return ok;
}

/*
 * The engine logs every damaged block it meets on stderr. While a test damages a
 * store on purpose, that log goes to a memory stream and is shown only with a
 * failing sample. Descriptor 2 is left alone, so a sanitizer report or a CHECK
 * message is never lost (redirecting descriptor 2 to /dev/null hid a UBSan
 * report here: the test exited 1 with no word said).
 */
struct engine_log {
	FILE *test_stderr;
	FILE *stream;
	char *text;
	size_t size;
};

static void engine_log_capture(struct engine_log *log)
{
	log->text = NULL;
	log->size = 0;
	log->test_stderr = stderr;
	log->stream = open_memstream(&log->text, &log->size);
	if (log->stream)
		stderr = log->stream;
}

/* Restores stderr; prints the captured lines when show is true. */
static void engine_log_release(struct engine_log *log, bool show)
{
	stderr = log->test_stderr;
	if (log->stream)
		fclose(log->stream);
	if (show && log->text && log->size)
		fprintf(stderr, "%s", log->text);
	free(log->text);
}

struct block_span {
	uint64_t offset;
	uint64_t size;
	int type;
};

static size_t manifest_blocks(const unsigned char *bytes, size_t size, struct block_span *out, size_t max)
{
	size_t count = 0;
	uint64_t offset = MANIFEST_FIRST_BLOCK;
	while (offset + BLOCK_HEADER_SIZE <= size && count < max) {
		struct block_header header;
		if (codec_decode_header(bytes + offset, &header) < 0)
			break;
		out[count++] = (struct block_span){ offset, BLOCK_HEADER_SIZE + header.stored_size, (int)header.type };
		offset += BLOCK_HEADER_SIZE + header.stored_size;
	}
	return count;
}

TEST(a_flipped_byte_anywhere_in_the_manifest_is_found_by_verify_and_never_read_as_data)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	CHECK_EQ(build_rich_store(manifest), 0);
	static struct answers good;
	CHECK_EQ(answers_build(manifest, &good), 0);
	manifest_close(manifest);
	char path[4300];
	snprintf(path, sizeof path, "%s/manifest", fixture_store_path());
	size_t size;
	unsigned char *original = fixture_read_file(path, &size);
	CHECK(original != NULL);
	static struct block_span blocks[4096];
	size_t block_count = manifest_blocks(original, size, blocks, 4096);
	CHECK(block_count > 20);
	bool types[BLOCK_TYPE_MAX + 1] = { false };
	for (size_t i = 0; i < block_count; i++)
		types[blocks[i].type] = true;
	CHECK(types[BLOCK_ROOT] && types[BLOCK_NODE] && types[BLOCK_COMMIT] && types[BLOCK_TABLE] &&
	      types[BLOCK_SCHEMA] && types[BLOCK_FRAGMENT] && types[BLOCK_BITMAP] && types[BLOCK_INDEX]);

	/* the samples: the header, both meta slots, and in every block its header,
	 * checksum, first payload byte, middle and last byte */
	static uint64_t samples[4096 * 5 + 32];
	size_t sample_count = 0;
	const uint64_t fixed[] = { 0, 9, 13, 20, 41, 49, 60, 4095, 4096, 4110, 4130, 4140, 5000, 8192, 8200, 8230 };
	for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
		samples[sample_count++] = fixed[i];
	for (size_t i = 0; i < block_count; i++) {
		samples[sample_count++] = blocks[i].offset + 4;
		samples[sample_count++] = blocks[i].offset + 18;
		samples[sample_count++] = blocks[i].offset + BLOCK_HEADER_SIZE;
		samples[sample_count++] = blocks[i].offset + blocks[i].size / 2;
		samples[sample_count++] = blocks[i].offset + blocks[i].size - 1;
	}
	unsigned char *damaged = malloc(size);
	CHECK(damaged != NULL);
	/* every sample in the normal build; every fourth under ASan (harness_rounds) */
	size_t stride = sample_count / (size_t)harness_rounds((int)sample_count);
	for (size_t s = 0; s < sample_count; s += stride) {
		uint64_t offset = samples[s];
		memcpy(damaged, original, size);
		damaged[offset] ^= 0x5a;
		FILE *file = fopen(path, "wb");
		CHECK(file != NULL);
		CHECK_EQ(fwrite(damaged, 1, size, file), size);
		fclose(file);
		struct engine_log log;
		engine_log_capture(&log);
		struct error_info error;
		int rc = manifest_open(fixture_store_path(), MANIFEST_READ_ONLY, &manifest, &error);
		int findings = 0, errors = 0;
		bool never_wrong = true;
		int block_read = 0;
		if (rc == 0) {
			findings = manifest_verify(manifest, NULL, NULL, NULL, NULL);
			never_wrong = answers_never_wrong(manifest, &good, &errors);
			for (size_t i = 0; i < block_count; i++) {
				if (offset < blocks[i].offset || offset >= blocks[i].offset + blocks[i].size)
					continue;
				struct buf raw;
				buf_init(&raw);
				block_read = pager_read(manifest_pager(manifest), (struct block_address){ 0, blocks[i].offset },
							0, &raw);
				buf_free(&raw);
			}
			manifest_close(manifest);
		}
		if (offset < FILE_HEADER_SIZE) {
			engine_log_release(&log, rc == 0);
			if (rc == 0)
				fprintf(stderr, "    header byte %llu flipped, yet the store opened\n", (unsigned long long)offset);
			CHECK(rc < 0);
			continue;
		}
		bool failed = rc < 0 || findings < 1 || !never_wrong ||
			      (offset >= MANIFEST_FIRST_BLOCK && block_read != -EIO);
		engine_log_release(&log, failed);
		if (failed)
			fprintf(stderr, "    flipped byte at offset %llu: open %d, findings %d, reads never wrong %d, block read %d\n",
				(unsigned long long)offset, rc, findings, never_wrong, block_read);
		CHECK_EQ(rc, 0);
		CHECK(findings >= 1);
		CHECK(never_wrong);
		if (offset >= MANIFEST_FIRST_BLOCK)
			CHECK_EQ(block_read, -EIO);
	}
	free(damaged);
	free(original);
	answers_free(&good);
}

/* Reads every byte of table name, then looks up its first row: 0 or the first error. */
static int read_and_look_up(struct manifest *manifest, const struct manifest_snapshot *snapshot, const char *name,
			    const char *id)
{
	struct buf bytes;
	buf_init(&bytes);
	int rc = fixture_table_bytes(manifest, snapshot, name, &bytes);
	struct head_row head;
	struct table_info info;
	if (rc == 0)
		rc = manifest_head_find(manifest, snapshot, name, &head);
	if (rc == 0)
		rc = table_info_read(manifest_pager(manifest), head.table, &info);
	buf_reset(&bytes);
	if (rc == 0)
		rc = table_lookup(manifest_pager(manifest), &info, id, strlen(id), &bytes);
	buf_free(&bytes);
	/* Every leaf of the key tree: the writer puts its nodes between the fragments. */
	struct table_finder *finder = NULL;
	if (rc == 0)
		rc = table_finder_open(manifest_pager(manifest), &info, 1 << 20, &finder);
	for (int i = 0; rc >= 0 && i < BIG_ROWS; i++) {
		char key[16];
		snprintf(key, sizeof key, "r%06d", i);
		rc = table_finder_has(finder, key, strlen(key));
	}
	table_finder_free(finder);
	return rc < 0 ? rc : 0;
}

/* A large overwrite's segment holds its fragments and its key tree: a damaged
 * byte fails verify, and a full read (fragments) or the key tree's lookups. */
TEST(a_flipped_byte_in_a_segment_file_is_found_by_verify_and_read_or_looked_up_as_eio)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct error_info error;
	CHECK_EQ(fixture_write_big(manifest, "Big", 1, NULL, &error), 0);
	manifest_close(manifest);
	struct buf listing;
	buf_init(&listing);
	fixture_list("segments", &listing);
	CHECK(listing.size >= 17);
	char segment[4400];
	snprintf(segment, sizeof segment, "%s/segments/%.16s", fixture_store_path(), (const char *)listing.data);
	buf_free(&listing);
	size_t size;
	unsigned char *original = fixture_read_file(segment, &size);
	CHECK(original != NULL && size > FILE_HEADER_SIZE + 1000);
	const uint64_t offsets[] = { 3, 30, FILE_HEADER_SIZE + 2, FILE_HEADER_SIZE + 100, size / 2, size - 1 };
	for (size_t s = 0; s < sizeof offsets / sizeof offsets[0]; s++) {
		unsigned char *damaged = malloc(size);
		memcpy(damaged, original, size);
		damaged[offsets[s]] ^= 0x21;
		FILE *file = fopen(segment, "wb");
		CHECK(file != NULL);
		CHECK_EQ(fwrite(damaged, 1, size, file), size);
		fclose(file);
		free(damaged);
		struct engine_log log;
		engine_log_capture(&log);
		int rc = manifest_open(fixture_store_path(), MANIFEST_READ_ONLY, &manifest, &error);
		if (rc < 0) {
			engine_log_release(&log, true);
			CHECK_EQ(rc, 0);
		}
		int findings = manifest_verify(manifest, NULL, NULL, NULL, NULL);
		struct manifest_snapshot snapshot;
		rc = manifest_snapshot_latest(manifest, "main", &snapshot);
		if (rc == 0)
			rc = read_and_look_up(manifest, &snapshot, "Big", "r000000");
		manifest_close(manifest);
		engine_log_release(&log, findings < 1 || rc != -EIO);
		CHECK(findings >= 1);
		CHECK_EQ(rc, -EIO);
	}
	free(original);
}

TEST(repair_rebuilds_heads_that_disagree_with_the_journal)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	CHECK_EQ(build_rich_store(manifest), 0);
	struct fixture_heads before, after;
	CHECK_EQ(fixture_heads(manifest, "main", UINT64_MAX, false, &before), 0);
	CHECK(before.count >= 3);

	/* damage: a head with a wrong row count and a missing names entry, published
	 * as a commit whose journal says nothing about either */
	struct manifest_publish publish;
	struct error_info error;
	CHECK_EQ(manifest_publish_begin(manifest, &publish, &error), 0);
	struct branch_record branch;
	CHECK_EQ(manifest_branch_find(manifest_pager(manifest), publish.base.branches, "main", &branch), 0);
	struct btree *heads, *names;
	CHECK_EQ(btree_open(manifest_pager(manifest), branch.heads, &heads), 0);
	CHECK_EQ(btree_open(manifest_pager(manifest), branch.names, &names), 0);
	struct head_row wrong = before.heads[0];
	wrong.row_count += 5;
	struct buf bytes;
	buf_init(&bytes);
	CHECK_EQ(journal_head_row_encode(&wrong, &bytes), 0);
	CHECK_EQ(btree_put(heads, wrong.stable_id.bytes, 16, bytes.data, bytes.size), 0);
	CHECK_EQ(btree_delete(names, before.heads[1].name, strlen(before.heads[1].name)), 0);
	struct commit_record record;
	journal_commit_record_init(&record);
	struct ulid base;
	ulid_new(&base);
	manifest_commit_id(&base, publish.base.version + 1, &record.id);
	record.time_us = 1;
	record.actor = strdup("test");
	record.message = strdup("damage");
	CHECK_EQ(manifest_publish_history(&publish, &branch, &record, &error), 0);
	struct block_address heads_root, names_root;
	CHECK_EQ(btree_flush(heads, publish.append, &heads_root), 0);
	CHECK_EQ(btree_flush(names, publish.append, &names_root), 0);
	CHECK_EQ(manifest_publish_commit_state(&publish, &branch, &record, heads_root, names_root, NULL, &error), 0);
	journal_commit_record_free(&record);
	manifest_publish_end(&publish);
	btree_free(heads);
	btree_free(names);
	buf_free(&bytes);

	struct buf findings;
	buf_init(&findings);
	CHECK(manifest_verify(manifest, collect_finding, &findings, NULL, NULL) >= 2);
	CHECK(strstr(buf_cstr(&findings), "row_count") != NULL);
	CHECK(strstr(buf_cstr(&findings), before.heads[1].name) != NULL);
	int repaired = 0;
	CHECK_EQ(manifest_repair(manifest, &repaired, &error), 0);
	CHECK_EQ(repaired, 1);
	buf_reset(&findings);
	int count = manifest_verify(manifest, collect_finding, &findings, NULL, NULL);
	if (count)
		fprintf(stderr, "%s", buf_cstr(&findings));
	CHECK_EQ(count, 0);
	CHECK_EQ(fixture_heads(manifest, "main", UINT64_MAX, false, &after), 0);
	CHECK_EQ(after.count, before.count);
	CHECK_EQ(memcmp(after.heads, before.heads, before.count * sizeof before.heads[0]), 0);
	struct manifest_snapshot snapshot;
	CHECK_EQ(manifest_snapshot_latest(manifest, "main", &snapshot), 0);
	CHECK_EQ(manifest_commit_read(manifest, snapshot.branch.head_record, &record), 0);
	CHECK_EQ(strcmp(record.actor, "graphfs:repair"), 0);
	CHECK_EQ(strcmp(record.message, "repair: rebuild heads from journal"), 0);
	journal_commit_record_free(&record);
	/* a second repair has nothing to do */
	CHECK_EQ(manifest_repair(manifest, &repaired, &error), 0);
	CHECK_EQ(repaired, 0);
	buf_free(&findings);
	manifest_close(manifest);
}

/* ---- the commit point ------------------------------------------------------------------ */

/* One merge commit with failpoint armed to fail once; the commit's result. */
static int merge_with_failpoint(const char *failpoint, uint64_t *version_before, uint64_t *version_after,
				uint64_t *version_reopened)
{
	struct manifest *manifest = NULL;
	int rc = fixture_create_open(&manifest);
	if (rc == 0)
		rc = fixture_merge_one(manifest, "main", "T", "a", 1);
	if (rc < 0)
		return -1000;
	*version_before = fixture_version(manifest);
	io_failpoint_arm(failpoint, IO_FAILPOINT_ERROR);
	rc = fixture_merge_one(manifest, "main", "T", "b", 2);
	io_failpoint_arm(failpoint, IO_FAILPOINT_OFF);
	*version_after = fixture_version(manifest);
	manifest_close(manifest);
	if (fixture_open(&manifest) < 0)
		return -1001;
	*version_reopened = fixture_version(manifest);
	manifest_close(manifest);
	return rc;
}

TEST(an_error_before_the_write_publishes_nothing)
{
	uint64_t before, after, reopened;
	CHECK_EQ(merge_with_failpoint("publish.before_write", &before, &after, &reopened), -EIO);
	CHECK_EQ(after, before);
	CHECK_EQ(reopened, before);
}

TEST(a_torn_write_error_is_cut_back_and_publishes_nothing)
{
	uint64_t before, after, reopened;
	CHECK_EQ(merge_with_failpoint("publish.torn_write", &before, &after, &reopened), -EIO);
	CHECK_EQ(after, before);
	CHECK_EQ(reopened, before);
}

TEST(an_error_before_the_fsync_is_cut_back_and_publishes_nothing)
{
	uint64_t before, after, reopened;
	CHECK_EQ(merge_with_failpoint("publish.before_fsync", &before, &after, &reopened), -EIO);
	CHECK_EQ(after, before);
	CHECK_EQ(reopened, before);
}

TEST(an_error_after_the_fsync_never_cuts_the_durable_root)
{
	uint64_t before, after, reopened;
	CHECK_EQ(merge_with_failpoint("publish.after_fsync", &before, &after, &reopened), 0);
	CHECK_EQ(after, before + 1);
	CHECK_EQ(reopened, before + 1);
}

/* ---- group commit --------------------------------------------------------------------------- */

#include <pthread.h>

static pthread_mutex_t queued_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queued_moved = PTHREAD_COND_INITIALIZER;
static int queued_stage;                 /* 1: the held commit is queued; 2: let it go on */
static _Thread_local bool hold_when_queued;

static void hold_queued_publish(struct manifest *manifest)
{
	(void)manifest;
	if (!hold_when_queued)
		return;
	pthread_mutex_lock(&queued_mutex);
	queued_stage = 1;
	pthread_cond_broadcast(&queued_moved);
	while (queued_stage != 2)
		pthread_cond_wait(&queued_moved, &queued_mutex);
	pthread_mutex_unlock(&queued_mutex);
}

struct held_commit {
	struct manifest *manifest;
	int rc;
};

static void *commit_held_in_the_queue(void *context)
{
	struct held_commit *held = context;
	hold_when_queued = true;
	held->rc = fixture_merge_one(held->manifest, "main", "A", "a2", 2);
	return NULL;
}

/* Starts a commit of row a2 into A on a thread and returns once it is QUEUED (written,
 * store lock released, its sync not begun). 0 or the pthread error. */
static int commit_and_hold_it_queued(struct held_commit *held, pthread_t *thread)
{
	queued_stage = 0;
	manifest_publish_queued_hook = hold_queued_publish;
	int rc = pthread_create(thread, NULL, commit_held_in_the_queue, held);
	if (rc != 0)
		return rc;
	pthread_mutex_lock(&queued_mutex);
	while (queued_stage != 1)
		pthread_cond_wait(&queued_moved, &queued_mutex);
	pthread_mutex_unlock(&queued_mutex);
	return 0;
}

/* Lets the held commit sync and finish; joins its thread. */
static int let_the_held_commit_go(pthread_t thread)
{
	pthread_mutex_lock(&queued_mutex);
	queued_stage = 2;
	pthread_cond_broadcast(&queued_moved);
	pthread_mutex_unlock(&queued_mutex);
	int rc = pthread_join(thread, NULL);
	manifest_publish_queued_hook = NULL;
	return rc;
}

TEST(a_commit_queued_behind_another_is_made_durable_by_that_commits_fsync)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	CHECK_EQ(fixture_merge_one(manifest, "main", "A", "a1", 1), 0);
	CHECK_EQ(fixture_merge_one(manifest, "main", "B", "b1", 1), 0);
	uint64_t before = fixture_version(manifest);
	struct io_counters start, between, end;
	io_counters_get(IO_MANIFEST, &start);
	struct held_commit held = { manifest, -1 };
	pthread_t thread;
	CHECK_EQ(commit_and_hold_it_queued(&held, &thread), 0);
	/* the held commit is written, the store lock free: this one builds on it and syncs both */
	CHECK_EQ(fixture_merge_one(manifest, "main", "B", "b2", 2), 0);
	io_counters_get(IO_MANIFEST, &between);
	CHECK_EQ(between.fsyncs - start.fsyncs, 1);
	CHECK_EQ(fixture_version(manifest), before + 2);
	CHECK_EQ(let_the_held_commit_go(thread), 0);
	CHECK_EQ(held.rc, 0);
	io_counters_get(IO_MANIFEST, &end);
	CHECK_EQ(end.fsyncs - start.fsyncs, 1);   /* the held commit found itself covered */
	CHECK_EQ(manifest_verify(manifest, fixture_print_finding, NULL, NULL, NULL), 0);
	manifest_close(manifest);
	CHECK_EQ(fixture_open(&manifest), 0);
	CHECK_EQ(fixture_version(manifest), before + 2);
	struct fixture_heads heads;
	CHECK_EQ(fixture_heads(manifest, "main", UINT64_MAX, false, &heads), 0);
	CHECK_EQ(heads.count, 2);
	manifest_close(manifest);
}

TEST(a_reader_sees_a_written_commit_only_once_it_is_durable)
{
	struct manifest *manifest, *reader;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	CHECK_EQ(fixture_merge_one(manifest, "main", "A", "a1", 1), 0);
	struct error_info error;
	CHECK_EQ(manifest_open(fixture_store_path(), MANIFEST_READ_ONLY, &reader, &error), 0);
	uint64_t before = fixture_version(reader);
	struct held_commit held = { manifest, -1 };
	pthread_t thread;
	CHECK_EQ(commit_and_hold_it_queued(&held, &thread), 0);
	/* written, not yet durable: neither the other handle nor the writer's own shows it */
	CHECK_EQ(fixture_version(reader), before);
	CHECK_EQ(fixture_version(manifest), before);
	CHECK_EQ(let_the_held_commit_go(thread), 0);
	CHECK_EQ(held.rc, 0);
	CHECK_EQ(fixture_version(reader), before + 1);
	manifest_close(reader);
	manifest_close(manifest);
}

/* Manifest pages one one-row commit of handle `late` reads while handle `busy` holds a
 * commit written but not yet durable (no meta slot names it). */
static int commit_pages_past_a_queued_commit(struct manifest *busy, struct manifest *late, uint64_t *pages_out)
{
	int rc = fixture_merge_one(late, "main", "L", "l", 0);
	struct held_commit held = { busy, -1 };
	pthread_t thread;
	if (rc == 0)
		rc = commit_and_hold_it_queued(&held, &thread);
	if (rc != 0)
		return rc;
	struct io_counters counters;
	io_counters_reset();
	rc = fixture_merge_one(late, "main", "L", "l", 1);
	io_counters_get(IO_MANIFEST, &counters);
	*pages_out = counters.pages;
	int joined = let_the_held_commit_go(thread);
	return rc < 0 ? rc : joined != 0 ? -joined : held.rc;
}

TEST(a_publish_reads_the_root_a_queued_commit_left_in_the_hint_not_every_block_it_wrote)
{
	struct manifest *busy, *late;
	CHECK_EQ(fixture_create_open(&busy), 0);
	CHECK_EQ(fixture_open(&late), 0);
	uint64_t hinted, scanned;
	CHECK_EQ(commit_pages_past_a_queued_commit(busy, late, &hinted), 0);
	/* without the shared page (FORMAT.md §18) the refresh reads each block of the queued tail */
	io_wake_page_unmap(&late->wake);
	io_wake_page_unmap(&busy->wake);
	CHECK_EQ(commit_pages_past_a_queued_commit(busy, late, &scanned), 0);
	fprintf(stderr, "    pages of a commit past a queued one: %llu with the hint, %llu scanning\n",
		(unsigned long long)hinted, (unsigned long long)scanned);
	CHECK(hinted + 3 <= scanned);
	CHECK_EQ(manifest_verify(late, fixture_print_finding, NULL, NULL, NULL), 0);
	manifest_close(late);
	manifest_close(busy);
}

int main(void)
{
	return harness_run();
}
