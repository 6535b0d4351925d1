/*
 * test_mountfs — the write semantics of the mounted tree (docs/MOUNT.md
 * "Writing"), one behaviour per test, through mountfs without /dev/fuse.
 * The pytest mount suite checks the same with real tools end to end.
 */
#include <pwd.h>
#include <sys/stat.h>

#include "mountfs_fixture.h"
#include "mountfs_int.h"   /* a listing's own memory, for the lean-entries test */

#define PEOPLE "{\"id\":\"a\",\"name\":\"Ada\"}\n{\"id\":\"b\",\"name\":\"Bob\"}\n"

static char text[1 << 16];

/* A table Person with rows a and b (version 1). */
static int with_people(void)
{
	int rc = fixture_open();
	if (rc == 0)
		rc = fs_overwrite("tables/Person.jsonl", PEOPLE);
	return rc;
}

/* ---- the table of writes ---------------------------------------------------------------- */

TEST(an_o_trunc_write_makes_the_rows_exactly_the_file)
{
	CHECK(with_people() == 0);
	CHECK(fs_overwrite("tables/Person.jsonl", "{\"id\":\"c\",\"name\":\"Cy\"}\n") == 0);
	CHECK(fs_read_file("tables/Person.jsonl", text, sizeof text) > 0);
	CHECK(strcmp(text, "{\"id\":\"c\",\"name\":\"Cy\"}\n") == 0);
	CHECK_EQ(fs_version(), 2);
	fixture_close();
}

TEST(an_append_merges_rows_by_id)
{
	CHECK(with_people() == 0);
	CHECK(fs_append("tables/Person.jsonl", "{\"id\":\"a\",\"name\":\"Ada L\"}\n") == 0);
	CHECK(fs_read_file("tables/Person.jsonl", text, sizeof text) > 0);
	CHECK(strcmp(text, "{\"id\":\"b\",\"name\":\"Bob\"}\n{\"id\":\"a\",\"name\":\"Ada L\"}\n") == 0);
	fixture_close();
}

TEST(an_appended_delete_line_removes_the_row)
{
	CHECK(with_people() == 0);
	CHECK(fs_append("tables/Person.jsonl", "{\"id\":\"a\",\"@delete\":true}\n") == 0);
	CHECK(fs_read_file("tables/Person.jsonl", text, sizeof text) > 0);
	CHECK(strcmp(text, "{\"id\":\"b\",\"name\":\"Bob\"}\n") == 0);
	fixture_close();
}

TEST(an_edit_in_place_publishes_an_overwrite_of_the_edited_copy)
{
	CHECK(with_people() == 0);
	uint64_t handle;
	CHECK(fs_open("tables/Person.jsonl", O_RDWR, 0, &handle, NULL) == 0);
	/* "Bob" -> "Bea" at its offset, as dd conv=notrunc would. */
	const char *at = strstr(PEOPLE, "Bob");
	CHECK(fs_write_at(handle, "Bea", at - PEOPLE) == 0);
	CHECK(fs_close(handle) == 0);
	CHECK(fs_read_file("tables/Person.jsonl", text, sizeof text) > 0);
	CHECK(strstr(text, "\"Bea\"") != NULL);
	CHECK_EQ(fs_version(), 2);
	fixture_close();
}

TEST(an_edit_of_a_table_that_moved_meanwhile_is_ebusy_and_publishes_nothing)
{
	CHECK(with_people() == 0);
	uint64_t handle;
	CHECK(fs_open("tables/Person.jsonl", O_RDWR, 0, &handle, NULL) == 0);
	CHECK(fs_append("tables/Person.jsonl", "{\"id\":\"c\",\"name\":\"Cy\"}\n") == 0);
	CHECK(fs_write_at(handle, "{\"id\":\"z\",\"name\":\"Zed\"}\n", 0) == 0);
	CHECK_EQ(fs_close(handle), -EBUSY);
	CHECK(fs_errors_mention("the table moved"));
	CHECK_EQ(fs_version(), 2);
	fixture_close();
}

TEST(writing_a_new_table_name_creates_the_table_with_an_inferred_schema)
{
	CHECK(fixture_open() == 0);
	CHECK(fs_overwrite("tables/City.jsonl", "{\"id\":\"x\",\"pop\":5}\n") == 0);
	CHECK(fs_read_file("schema/City.json", text, sizeof text) > 0);
	CHECK(strstr(text, "\"pop\"") != NULL);
	CHECK(strstr(text, "i64") != NULL);
	fixture_close();
}

TEST(writing_a_schema_file_creates_an_empty_table)
{
	CHECK(fixture_open() == 0);
	CHECK(fs_overwrite("schema/City.json",
			   "{\"kind\":\"node\",\"properties\":{\"pop\":{\"type\":\"i64\",\"nullable\":true}}}") == 0);
	struct stat st;
	CHECK(fs_stat("tables/City.jsonl", &st) == 0);
	CHECK_EQ(st.st_size, 0);
	fixture_close();
}

TEST(removing_a_table_file_drops_the_table)
{
	CHECK(with_people() == 0);
	CHECK(fs_unlink("tables/Person.jsonl") == 0);
	struct stat st;
	CHECK_EQ(fs_stat("tables/Person.jsonl", &st), -ENOENT);
	struct names_collector names = { .out = text, .size = sizeof text };
	CHECK(fs_list("heads/.dropped", false, 0, &names) == 0);
	CHECK(strstr(text, "Person.") != NULL);
	fixture_close();
}

TEST(renaming_a_table_file_renames_the_table_and_keeps_its_rows)
{
	CHECK(with_people() == 0);
	CHECK(fs_rename("tables/Person.jsonl", "tables/People.jsonl") == 0);
	CHECK(fs_read_file("tables/People.jsonl", text, sizeof text) > 0);
	CHECK(strcmp(text, PEOPLE) == 0);
	struct stat st;
	CHECK_EQ(fs_stat("tables/Person.jsonl", &st), -ENOENT);
	fixture_close();
}

TEST(a_sed_style_temporary_file_renamed_onto_a_table_publishes_an_overwrite)
{
	CHECK(with_people() == 0);
	CHECK(fs_overwrite("tables/sedAb12Cd", "{\"id\":\"s\",\"name\":\"N\"}\n") == 0);
	CHECK_EQ(fs_version(), 1);
	CHECK(fs_rename("tables/sedAb12Cd", "tables/Person.jsonl") == 0);
	CHECK(fs_read_file("tables/Person.jsonl", text, sizeof text) > 0);
	CHECK(strcmp(text, "{\"id\":\"s\",\"name\":\"N\"}\n") == 0);
	struct stat st;
	CHECK_EQ(fs_stat("tables/sedAb12Cd", &st), -ENOENT);
	fixture_close();
}

TEST(an_rsync_style_dot_name_stays_private_until_renamed)
{
	CHECK(with_people() == 0);
	CHECK(fs_overwrite("tables/.Person.jsonl.Xy12Zq", "{\"id\":\"r\",\"name\":\"N\"}\n") == 0);
	CHECK_EQ(fs_version(), 1);
	CHECK(fs_read_file("tables/.Person.jsonl.Xy12Zq", text, sizeof text) > 0);
	CHECK(strcmp(text, "{\"id\":\"r\",\"name\":\"N\"}\n") == 0);
	CHECK(fs_rename("tables/.Person.jsonl.Xy12Zq", "tables/Person.jsonl") == 0);
	CHECK_EQ(fs_version(), 2);
	fixture_close();
}

TEST(an_editor_backup_rename_then_new_file_then_removal_publishes_once_per_step)
{
	CHECK(with_people() == 0);
	/* vim with backupcopy=no: mv X X~, write X, rm X~ */
	CHECK(fs_rename("tables/Person.jsonl", "tables/Person.jsonl~") == 0);
	CHECK(fs_overwrite("tables/Person.jsonl", "{\"id\":\"v\",\"name\":\"N\"}\n") == 0);
	CHECK(fs_unlink("tables/Person.jsonl~") == 0);
	CHECK(fs_read_file("tables/Person.jsonl", text, sizeof text) > 0);
	CHECK(strcmp(text, "{\"id\":\"v\",\"name\":\"N\"}\n") == 0);
	CHECK_EQ(fs_version(), 2);
	fixture_close();
}

TEST(a_table_name_spelled_with_another_data_extension_is_refused_at_create)
{
	CHECK(fixture_open() == 0);
	const char *names[] = { "tables/People.json", "tables/T.ndjson", "tables/T.csv", "tables/T.TSV",
				"tables/T.JSONL", "staging/T.Json" };
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		CHECK_EQ(fs_overwrite(names[i], "{\"id\":\"a\"}\n"), -EINVAL);
	CHECK(fs_errors_mention("tables are <Name>.jsonl"));
	CHECK(fs_errors_mention("write People.jsonl"));
	/* other scratch names stay scratch files: they do not name a table */
	CHECK_EQ(fs_overwrite("tables/notes.txt", "text\n"), 0);
	CHECK_EQ(fs_overwrite("tables/My Data.csv", "a,b\n"), 0);
	CHECK_EQ(fs_overwrite("tables/.People.json.swp", "x"), 0);
	CHECK_EQ(fs_version(), 0);
	fixture_close();
}

TEST(a_jsonl_name_that_is_not_a_table_name_is_refused_at_create)
{
	CHECK(fixture_open() == 0);
	CHECK_EQ(fs_overwrite("tables/My Table.jsonl", "{\"id\":\"a\"}\n"), -EINVAL);
	CHECK(fs_errors_mention("not a table name"));
	CHECK_EQ(fs_overwrite("tables/\xc3\x9cn\xc3\xaf.jsonl", "{\"id\":\"a\"}\n"), -EINVAL);
	char long_name[256];
	memset(long_name, 'a', 200);
	snprintf(long_name + 200, sizeof long_name - 200, ".jsonl");
	char path[300];
	snprintf(path, sizeof path, "tables/%s", long_name);
	CHECK_EQ(fs_overwrite(path, "{\"id\":\"a\"}\n"), -EINVAL);
	struct names_collector names = { .out = text, .size = sizeof text };
	CHECK(fs_list("tables", false, 0, &names) == 0);
	CHECK_EQ(names.count, 2);   /* . and .. */
	fixture_close();
}

TEST(a_bad_line_fails_the_write_that_completes_it_and_publishes_nothing)
{
	CHECK(with_people() == 0);
	CHECK_EQ(fs_append("tables/Person.jsonl", "{\"id\":\"c\",\"name\":5}\n"), -EINVAL);
	CHECK(fs_errors_mention("Person.jsonl"));
	CHECK_EQ(fs_version(), 1);
	fixture_close();
}

TEST(staged_tables_are_published_as_one_commit)
{
	CHECK(fixture_open() == 0);
	CHECK(fs_overwrite("staging/Person.jsonl", PEOPLE) == 0);
	CHECK(fs_overwrite("staging/City.jsonl", "{\"id\":\"x\"}\n") == 0);
	CHECK_EQ(fs_version(), 0);
	CHECK(fs_overwrite("staging/.commit", "two tables\n") == 0);
	CHECK_EQ(fs_version(), 1);
	CHECK(fs_read_file("tables/City.jsonl", text, sizeof text) > 0);
	CHECK(strcmp(text, "{\"id\":\"x\"}\n") == 0);
	struct names_collector names = { .out = text, .size = sizeof text };
	CHECK(fs_list("staging", false, 0, &names) == 0);
	CHECK(strstr(text, "Person") == NULL);
	fixture_close();
}

TEST(a_refused_staging_commit_leaves_the_files_staged)
{
	CHECK(fixture_open() == 0);
	CHECK(fs_overwrite("schema/Person.json",
			   "{\"kind\":\"node\",\"properties\":{\"name\":{\"type\":\"string\",\"nullable\":true}}}") == 0);
	CHECK(fs_overwrite("schema/KNOWS.json",
			   "{\"kind\":\"edge\",\"from\":\"Person\",\"to\":\"Person\",\"properties\":{}}") == 0);
	CHECK(fs_overwrite("staging/KNOWS.jsonl", "{\"id\":\"k\",\"from\":\"a\",\"to\":\"nobody\"}\n") == 0);
	uint64_t before = fs_version();
	CHECK_EQ(fs_overwrite("staging/.commit", "dangling\n"), -EINVAL);
	CHECK_EQ(fs_version(), before);
	struct names_collector names = { .out = text, .size = sizeof text };
	CHECK(fs_list("staging", false, 0, &names) == 0);
	CHECK(strstr(text, "KNOWS.jsonl") != NULL);
	fixture_close();
}

TEST(mkdir_under_branches_creates_a_branch_and_rmdir_deletes_it)
{
	CHECK(with_people() == 0);
	CHECK(fs_mkdir("branches/try") == 0);
	CHECK(fs_read_file("branches/try/tables/Person.jsonl", text, sizeof text) > 0);
	CHECK(strcmp(text, PEOPLE) == 0);
	CHECK(fs_rmdir("branches/try") == 0);
	struct stat st;
	CHECK_EQ(fs_stat("branches/try", &st), -ENOENT);
	CHECK_EQ(fs_rmdir("branches/main"), -EBUSY);
	fixture_close();
}

TEST(history_is_read_only)
{
	CHECK(with_people() == 0);
	CHECK_EQ(fs_overwrite("history/@1/tables/Person.jsonl", "{\"id\":\"h\"}\n"), -EROFS);
	CHECK(fs_read_file("history/@1/tables/Person.jsonl", text, sizeof text) > 0);
	CHECK(strcmp(text, PEOPLE) == 0);
	fixture_close();
}

/* ---- validation while writing ---------------------------------------------------------- */

TEST(a_last_line_without_newline_is_validated_in_its_write_and_published_at_close)
{
	CHECK(with_people() == 0);
	uint64_t handle;
	CHECK(fs_open("tables/Person.jsonl", O_WRONLY | O_APPEND, 0, &handle, NULL) == 0);
	CHECK(fs_write_at(handle, "{\"id\":\"z\",\"name\":\"Zed\"}", 0) == 0);
	CHECK_EQ(fs_version(), 1);
	CHECK(fs_close(handle) == 0);
	CHECK_EQ(fs_version(), 2);
	CHECK(fs_read_file("tables/Person.jsonl", text, sizeof text) > 0);
	CHECK(strstr(text, "{\"id\":\"z\",\"name\":\"Zed\"}\n") != NULL);
	fixture_close();
}

TEST(an_invalid_last_line_without_newline_fails_its_write)
{
	CHECK(with_people() == 0);
	CHECK_EQ(fs_append("tables/Person.jsonl", "{\"id\":\"z\",\"name\":5}"), -EINVAL);
	CHECK_EQ(fs_version(), 1);
	fixture_close();
}

TEST(a_schema_file_that_is_not_json_fails_the_write)
{
	CHECK(fixture_open() == 0);
	CHECK_EQ(fs_overwrite("schema/T.json", "garbage\n"), -EINVAL);
	CHECK(fs_errors_mention("schema/T.json"));
	CHECK_EQ(fs_version(), 0);
	fixture_close();
}

TEST(an_incompatible_schema_change_fails_the_write)
{
	CHECK(with_people() == 0);
	/* name becomes an i64: not a widening */
	CHECK_EQ(fs_overwrite("schema/Person.json",
			      "{\"kind\":\"node\",\"properties\":{\"name\":{\"type\":\"i64\",\"nullable\":false}}}\n"),
		 -EINVAL);
	CHECK(fs_errors_mention("schema/Person.json"));
	CHECK_EQ(fs_version(), 1);
	fixture_close();
}

TEST(a_compatible_schema_change_written_in_pieces_is_applied_at_close)
{
	CHECK(with_people() == 0);
	uint64_t handle;
	CHECK(fs_open("schema/Person.json", O_WRONLY | O_TRUNC, 0, &handle, NULL) == 0);
	const char *first = "{\"kind\":\"node\",\"properties\":{\"name\":{\"type\":\"string\",";
	CHECK(fs_write_at(handle, first, 0) == 0);
	CHECK(fs_write_at(handle, "\"nullable\":false},\"age\":{\"type\":\"i64\",\"nullable\":true}}}\n",
			  (off_t)strlen(first)) == 0);
	CHECK(fs_close(handle) == 0);
	CHECK(fs_read_file("schema/Person.json", text, sizeof text) > 0);
	CHECK(strstr(text, "\"age\"") != NULL);
	fixture_close();
}

TEST(a_table_created_empty_takes_its_schema_from_its_first_rows)
{
	CHECK(fixture_open() == 0);
	/* touch: create, no write */
	CHECK(fs_write_file("tables/New.jsonl", O_WRONLY | O_CREAT, NULL) == 0);
	struct stat st;
	CHECK(fs_stat("tables/New.jsonl", &st) == 0);
	CHECK_EQ(st.st_size, 0);
	CHECK(fs_append("tables/New.jsonl", "{\"id\":\"n\",\"size\":3}\n") == 0);
	CHECK(fs_read_file("schema/New.json", text, sizeof text) > 0);
	CHECK(strstr(text, "\"size\"") != NULL);
	/* From then on the schema holds. */
	CHECK_EQ(fs_append("tables/New.jsonl", "{\"id\":\"m\",\"size\":\"big\"}\n"), -EINVAL);
	fixture_close();
}

/* The kernel sends RELEASE without waiting: `touch t; echo row >> t` can reach the
 * daemon as create, flush, open, write, flush, and only then the touch's release. */
TEST(a_touch_whose_release_comes_after_the_next_open_does_not_lose_the_append)
{
	CHECK(fixture_open() == 0);
	uint64_t touched, appended;
	CHECK(fs_open("tables/New.jsonl", O_WRONLY | O_CREAT, 0644, &touched, NULL) == 0);
	CHECK(mountfs_flush(fx.mount, touched) == 0);           /* close(2) of touch returns here */
	CHECK(fs_open("tables/New.jsonl", O_WRONLY | O_CREAT | O_APPEND, 0644, &appended, NULL) == 0);
	mountfs_release(fx.mount, touched);                      /* the touch's RELEASE, late */
	CHECK(fs_write_at(appended, "{\"id\":\"n\",\"size\":3}\n", 0) == 0);
	CHECK(fs_close(appended) == 0);
	CHECK_EQ(fs_read_file("tables/New.jsonl", text, sizeof text), 20);
	CHECK(strcmp(text, "{\"id\":\"n\",\"size\":3}\n") == 0);
	fixture_close();
}

TEST(an_unwritten_truncation_is_seen_by_the_next_open_before_its_release)
{
	CHECK(with_people() == 0);
	uint64_t truncating;
	CHECK(fs_open("tables/Person.jsonl", O_WRONLY | O_TRUNC, 0644, &truncating, NULL) == 0);
	CHECK(mountfs_flush(fx.mount, truncating) == 0);        /* `: > tables/Person.jsonl` returns */
	CHECK(fs_append("tables/Person.jsonl", "{\"id\":\"z\",\"name\":\"Zed\"}\n") == 0);
	mountfs_release(fx.mount, truncating);
	CHECK(fs_read_file("tables/Person.jsonl", text, sizeof text) > 0);
	CHECK(strcmp(text, "{\"id\":\"z\",\"name\":\"Zed\"}\n") == 0);
	fixture_close();
}

TEST(a_reader_opened_while_an_overwrite_is_being_written_leaves_it_one_commit)
{
	CHECK(with_people() == 0);
	uint64_t version = fs_version();
	uint64_t writing;
	CHECK(fs_open("tables/Person.jsonl", O_WRONLY | O_TRUNC, 0644, &writing, NULL) == 0);
	CHECK(fs_read_file("tables/Person.jsonl", text, sizeof text) > 0);   /* still the old rows */
	CHECK(strcmp(text, PEOPLE) == 0);
	CHECK(fs_write_at(writing, "{\"id\":\"z\",\"name\":\"Zed\"}\n", 0) == 0);
	CHECK(fs_close(writing) == 0);
	CHECK_EQ(fs_version(), version + 1);
	fixture_close();
}

/* ---- what is published ---------------------------------------------------------------- */

TEST(an_overwrite_with_the_current_bytes_publishes_nothing)
{
	CHECK(with_people() == 0);
	CHECK(fs_overwrite("tables/Person.jsonl", PEOPLE) == 0);
	CHECK_EQ(fs_version(), 1);
	fixture_close();
}

TEST(an_edit_saved_without_a_change_publishes_nothing)
{
	CHECK(with_people() == 0);
	uint64_t handle;
	CHECK(fs_open("tables/Person.jsonl", O_RDWR, 0, &handle, NULL) == 0);
	CHECK(fs_write_at(handle, "{\"id\":\"a\"", 0) == 0);   /* the bytes that are there */
	CHECK(fs_close(handle) == 0);
	CHECK_EQ(fs_version(), 1);
	fixture_close();
}

TEST(a_scratch_file_with_the_current_bytes_renamed_onto_the_table_publishes_nothing)
{
	CHECK(with_people() == 0);
	CHECK(fs_overwrite("tables/.Person.jsonl.tmp", PEOPLE) == 0);
	CHECK(fs_rename("tables/.Person.jsonl.tmp", "tables/Person.jsonl") == 0);
	CHECK_EQ(fs_version(), 1);
	CHECK(fs_read_file("tables/Person.jsonl", text, sizeof text) > 0);
	CHECK(strcmp(text, PEOPLE) == 0);
	fixture_close();
}

TEST(an_editor_backup_cycle_without_a_change_publishes_nothing_and_keeps_the_table)
{
	CHECK(with_people() == 0);
	CHECK(fs_rename("tables/Person.jsonl", "tables/Person.jsonl~") == 0);
	CHECK(fs_overwrite("tables/Person.jsonl", PEOPLE) == 0);
	CHECK(fs_unlink("tables/Person.jsonl~") == 0);
	CHECK_EQ(fs_version(), 1);
	CHECK(fs_read_file("tables/Person.jsonl", text, sizeof text) > 0);
	CHECK(strcmp(text, PEOPLE) == 0);
	fixture_close();
}

/* ---- staging schemas ------------------------------------------------------------------- */

#define CITY_SCHEMA "{\"kind\":\"node\",\"key\":[\"name\"],\"properties\":{\"name\":{\"type\":\"string\",\"nullable\":false}," \
		    "\"at\":{\"type\":\"vector<2>\",\"nullable\":true}}}\n"

TEST(a_staged_schema_and_its_rows_are_published_as_one_commit)
{
	CHECK(fixture_open() == 0);
	CHECK(fs_overwrite("staging/schema/City.json", CITY_SCHEMA) == 0);
	CHECK(fs_overwrite("staging/City.jsonl", "{\"name\":\"Oslo\",\"at\":[1.5,2.5]}\n") == 0);
	CHECK_EQ(fs_version(), 0);
	CHECK(fs_overwrite("staging/.commit", "a city\n") == 0);
	CHECK_EQ(fs_version(), 1);
	CHECK(fs_read_file("schema/City.json", text, sizeof text) > 0);
	CHECK(strstr(text, "vector<2>") != NULL);
	CHECK(strstr(text, "\"key\"") != NULL);
	CHECK(fs_read_file("tables/City.jsonl", text, sizeof text) > 0);
	CHECK(strstr(text, "\"id\":\"Oslo\"") != NULL);
	struct names_collector names = { .out = text, .size = sizeof text };
	CHECK(fs_list("staging/schema", false, 0, &names) == 0);
	CHECK_EQ(names.count, 2);
	fixture_close();
}

TEST(staged_rows_are_validated_against_the_staged_schema)
{
	CHECK(fixture_open() == 0);
	CHECK(fs_overwrite("staging/schema/City.json", CITY_SCHEMA) == 0);
	CHECK_EQ(fs_overwrite("staging/City.jsonl", "{\"name\":\"Oslo\",\"at\":[1.5]}\n"), -EINVAL);
	CHECK(fs_errors_mention("staging/City.jsonl"));
	fixture_close();
}

TEST(a_bad_staged_schema_fails_its_write)
{
	CHECK(fixture_open() == 0);
	CHECK_EQ(fs_overwrite("staging/schema/City.json", "{\"kind\":\"rock\"}\n"), -EINVAL);
	CHECK(fs_errors_mention("staging/schema/City.json"));
	fixture_close();
}

TEST(a_restored_table_keeps_its_schema_when_it_is_staged_with_it)
{
	CHECK(fixture_open() == 0);
	CHECK(fs_overwrite("schema/City.json", CITY_SCHEMA) == 0);
	CHECK(fs_append("tables/City.jsonl", "{\"name\":\"Oslo\",\"at\":[1.5,2.5]}\n") == 0);
	uint64_t version = fs_version();
	CHECK(fs_unlink("tables/City.jsonl") == 0);
	char path[128], rows[4096], schema[4096];
	snprintf(path, sizeof path, "history/@%llu/tables/City.jsonl", (unsigned long long)version);
	CHECK(fs_read_file(path, rows, sizeof rows) > 0);
	snprintf(path, sizeof path, "history/@%llu/schema/City.json", (unsigned long long)version);
	CHECK(fs_read_file(path, schema, sizeof schema) > 0);
	CHECK(fs_overwrite("staging/schema/City.json", schema) == 0);
	CHECK(fs_overwrite("staging/City.jsonl", rows) == 0);
	CHECK(fs_overwrite("staging/.commit", "restore City\n") == 0);
	CHECK(fs_read_file("schema/City.json", text, sizeof text) > 0);
	CHECK(strcmp(text, schema) == 0);
	CHECK(fs_read_file("tables/City.jsonl", text, sizeof text) > 0);
	CHECK(strcmp(text, rows) == 0);
	fixture_close();
}

/* ---- who and where -------------------------------------------------------------------------- */

TEST(a_branch_a_mount_serves_cannot_be_deleted_by_another_process)
{
	CHECK(fixture_open_branch(NULL) == 0);
	struct error_info error;
	error_info_clear(&error);
	CHECK(store_branch_create(fx.store, "side", "main", NULL, &error) == 0);
	fixture_close();
	/* Mount "side"; a second handle (another process, as far as the lock can tell) tries to delete it. */
	memset(&fx, 0, sizeof fx);
	snprintf(fx.store_path, sizeof fx.store_path, "%s/store", harness_temp_directory());
	CHECK(store_open(fx.store_path, NULL, &fx.store, &error) == 0);
	struct mountfs_config config = { .store = fx.store, .branch = "side", .mountpoint = "/mnt/side",
					 .temporary_directory = harness_temp_directory() };
	CHECK(mountfs_new(&config, &fx.mount) == 0);
	struct store *other = NULL;
	CHECK(store_open(fx.store_path, NULL, &other, &error) == 0);
	error_info_clear(&error);
	CHECK_EQ(store_branch_delete(other, "side", "main", false, NULL, &error), -EBUSY);
	CHECK(strstr(error.message, "/mnt/side") != NULL);
	fixture_close();
	/* Unmounted: the branch can go. */
	error_info_clear(&error);
	CHECK_EQ(store_branch_delete(other, "side", "main", false, NULL, &error), 0);
	store_close(other);
}

TEST(a_commit_names_the_writing_user_as_its_actor)
{
	CHECK(fixture_open() == 0);
	struct passwd *nobody = getpwnam("nobody");
	CHECK(nobody != NULL);
	fx.caller.uid = nobody->pw_uid;
	CHECK(fs_overwrite("tables/Person.jsonl", PEOPLE) == 0);
	CHECK(fs_read_file("log", text, sizeof text) > 0);
	CHECK(strstr(text, "\"actor\":\"nobody@") != NULL);
	fixture_close();
}

/* ---- attributes ------------------------------------------------------------------------------ */

TEST(fstat_on_an_open_table_reports_the_size_of_the_version_it_reads)
{
	CHECK(with_people() == 0);
	uint64_t handle, id;
	CHECK(fs_open("tables/Person.jsonl", O_RDONLY, 0, &handle, &id) == 0);
	CHECK(fs_append("tables/Person.jsonl", "{\"id\":\"c\",\"name\":\"Cyrus the Great\"}\n") == 0);
	struct stat st;
	double timeout;
	CHECK(mountfs_getattr(fx.mount, id, handle, &st, &timeout) == 0);
	CHECK_EQ(st.st_size, strlen(PEOPLE));
	/* fstat(2) comes without the handle: the node the handle holds answers for it,
	 * and the path resolves to a new node showing the new version */
	CHECK(mountfs_getattr(fx.mount, id, 0, &st, &timeout) == 0);
	CHECK_EQ(st.st_size, strlen(PEOPLE));
	CHECK(fs_stat("tables/Person.jsonl", &st) == 0);
	CHECK(st.st_size > (off_t)strlen(PEOPLE));
	mountfs_release(fx.mount, handle);
	fixture_close();
}

TEST(fstat_on_an_open_scratch_file_works_after_it_is_removed)
{
	CHECK(fixture_open() == 0);
	CHECK(fs_overwrite("tables/notes.txt", "hello\n") == 0);
	uint64_t handle, id;
	CHECK(fs_open("tables/notes.txt", O_RDONLY, 0, &handle, &id) == 0);
	CHECK(fs_unlink("tables/notes.txt") == 0);
	struct stat st;
	double timeout;
	CHECK(mountfs_getattr(fx.mount, id, handle, &st, &timeout) == 0);
	CHECK_EQ(st.st_size, 6);
	CHECK_EQ(st.st_nlink, 0);
	char bytes[16];
	CHECK_EQ(mountfs_read(fx.mount, handle, bytes, sizeof bytes, 0), 6);
	mountfs_release(fx.mount, handle);
	fixture_close();
}

TEST(a_scratch_file_created_with_mode_0000_has_mode_0000)
{
	CHECK(fixture_open() == 0);
	uint64_t handle;
	CHECK(fs_open("tables/locked", O_WRONLY | O_CREAT, 0000, &handle, NULL) == 0);
	CHECK(fs_close(handle) == 0);
	struct stat st;
	CHECK(fs_stat("tables/locked", &st) == 0);
	CHECK_EQ(st.st_mode & 07777, 0);
	fixture_close();
}

static bool later(struct timespec a, struct timespec b)
{
	return a.tv_sec > b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec > b.tv_nsec);
}

TEST(truncate_o_trunc_and_chmod_of_a_scratch_file_move_its_times)
{
	CHECK(fixture_open() == 0);
	CHECK(fs_overwrite("tables/notes.txt", "hello\n") == 0);
	uint64_t id;
	CHECK(fs_resolve("tables/notes.txt", &id) == 0);
	struct stat before, after, change;
	double timeout;
	CHECK(fs_stat("tables/notes.txt", &before) == 0);
	usleep(2000);
	memset(&change, 0, sizeof change);
	change.st_size = 2;
	CHECK(mountfs_setattr(fx.mount, id, 0, &change, MOUNTFS_SET_SIZE, &fx.caller, &after, &timeout, NULL) == 0);
	CHECK(later(after.st_mtim, before.st_mtim));
	CHECK(later(after.st_ctim, before.st_ctim));
	before = after;
	usleep(2000);
	change.st_mode = 0600;
	CHECK(mountfs_setattr(fx.mount, id, 0, &change, MOUNTFS_SET_MODE, &fx.caller, &after, &timeout, NULL) == 0);
	CHECK_EQ(after.st_mode & 07777, 0600);
	CHECK(later(after.st_ctim, before.st_ctim));
	before = after;
	usleep(2000);
	uint64_t handle;
	CHECK(fs_open("tables/notes.txt", O_WRONLY | O_TRUNC, 0, &handle, NULL) == 0);
	CHECK(fs_close(handle) == 0);
	CHECK(fs_stat("tables/notes.txt", &after) == 0);
	CHECK(later(after.st_mtim, before.st_mtim));
	fixture_close();
}

TEST(setuid_and_setgid_bits_can_be_cleared_by_the_kernel_on_write)
{
	/* The daemon leaves HANDLE_KILLPRIV off: the kernel clears the bits with a setattr. */
	CHECK(fixture_open() == 0);
	CHECK(fs_overwrite("tables/run.sh", "echo\n") == 0);
	uint64_t id;
	CHECK(fs_resolve("tables/run.sh", &id) == 0);
	struct stat change, after;
	double timeout;
	memset(&change, 0, sizeof change);
	change.st_mode = 06755;
	CHECK(mountfs_setattr(fx.mount, id, 0, &change, MOUNTFS_SET_MODE, &fx.caller, &after, &timeout, NULL) == 0);
	CHECK_EQ(after.st_mode & 07777, 06755);
	change.st_mode = 0755;
	CHECK(mountfs_setattr(fx.mount, id, 0, &change, MOUNTFS_SET_MODE, &fx.caller, &after, &timeout, NULL) == 0);
	CHECK_EQ(after.st_mode & 07777, 0755);
	fixture_close();
}

TEST(another_users_write_clears_set_user_id_and_set_group_id_of_a_scratch_file)
{
	CHECK(fixture_open() == 0);
	CHECK(fs_overwrite("tables/run.sh", "echo\n") == 0);
	uint64_t id;
	CHECK(fs_resolve("tables/run.sh", &id) == 0);
	struct stat change, after;
	double timeout;
	memset(&change, 0, sizeof change);
	change.st_mode = 06755;
	CHECK(mountfs_setattr(fx.mount, id, 0, &change, MOUNTFS_SET_MODE, &fx.caller, &after, &timeout, NULL) == 0);
	/* root keeps them (it has CAP_FSETID) */
	struct mountfs_caller root = { 0, 0, fx.caller.pid };
	uint64_t handle;
	CHECK(fs_open("tables/run.sh", O_WRONLY | O_APPEND, 0, &handle, NULL) == 0);
	CHECK(mountfs_write(fx.mount, handle, "a\n", 2, 0, &root) == 2);
	CHECK(fs_stat("tables/run.sh", &after) == 0);
	CHECK_EQ(after.st_mode & 07777, 06755);
	/* any other user's write clears set-user-ID, and set-group-ID as group execution is set */
	struct mountfs_caller user = { 65534, 65534, fx.caller.pid };
	CHECK(mountfs_write(fx.mount, handle, "b\n", 2, 0, &user) == 2);
	CHECK(fs_close(handle) == 0);
	CHECK(fs_stat("tables/run.sh", &after) == 0);
	CHECK_EQ(after.st_mode & 07777, 0755);
	/* without group execution set-group-ID is mandatory locking's mark: it stays */
	change.st_mode = 02644;
	CHECK(mountfs_setattr(fx.mount, id, 0, &change, MOUNTFS_SET_MODE, &fx.caller, &after, &timeout, NULL) == 0);
	CHECK(fs_open("tables/run.sh", O_WRONLY | O_APPEND, 0, &handle, NULL) == 0);
	CHECK(mountfs_write(fx.mount, handle, "c\n", 2, 0, &user) == 2);
	CHECK(fs_close(handle) == 0);
	CHECK(fs_stat("tables/run.sh", &after) == 0);
	CHECK_EQ(after.st_mode & 07777, 02644);
	fixture_close();
}

TEST(the_access_time_of_a_scratch_file_is_stored_apart_from_its_modification_time)
{
	CHECK(fixture_open() == 0);
	CHECK(fs_overwrite("tables/notes.txt", "hello\n") == 0);
	uint64_t id;
	CHECK(fs_resolve("tables/notes.txt", &id) == 0);
	struct stat before, change, after;
	double timeout;
	CHECK(fs_stat("tables/notes.txt", &before) == 0);
	memset(&change, 0, sizeof change);
	change.st_atim.tv_sec = 1000000000;   /* touch -a -d 2001-09-09 */
	change.st_atim.tv_nsec = 5;
	CHECK(mountfs_setattr(fx.mount, id, 0, &change, MOUNTFS_SET_ATIME, &fx.caller, &after, &timeout, NULL) == 0);
	CHECK_EQ(after.st_atim.tv_sec, 1000000000);
	CHECK_EQ(after.st_atim.tv_nsec, 5);
	CHECK_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
	CHECK_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
	/* a write moves the modification time, not the access time */
	CHECK(fs_append("tables/notes.txt", "more\n") == 0);
	CHECK(fs_stat("tables/notes.txt", &after) == 0);
	CHECK_EQ(after.st_atim.tv_sec, 1000000000);
	CHECK(later(after.st_mtim, before.st_mtim) || (after.st_mtim.tv_sec == before.st_mtim.tv_sec &&
							 after.st_mtim.tv_nsec == before.st_mtim.tv_nsec));
	fixture_close();
}

TEST(a_chmod_or_chown_of_a_table_file_is_eperm_and_of_a_scratch_file_is_kept)
{
	CHECK(fixture_open() == 0);
	CHECK(fs_overwrite("tables/Person.jsonl", "{\"id\":\"a\"}\n") == 0);
	CHECK(fs_overwrite("tables/notes.txt", "x\n") == 0);
	uint64_t table, scratch, directory;
	CHECK(fs_resolve("tables/Person.jsonl", &table) == 0);
	CHECK(fs_resolve("tables/notes.txt", &scratch) == 0);
	CHECK(fs_resolve("tables", &directory) == 0);
	struct stat change, after;
	double timeout;
	memset(&change, 0, sizeof change);
	change.st_mode = 0600;
	change.st_uid = 1234;
	CHECK_EQ(mountfs_setattr(fx.mount, table, 0, &change, MOUNTFS_SET_MODE, &fx.caller, &after, &timeout, NULL),
		 -EPERM);
	CHECK_EQ(mountfs_setattr(fx.mount, table, 0, &change, MOUNTFS_SET_UID, &fx.caller, &after, &timeout, NULL),
		 -EPERM);
	CHECK(fs_stat("tables/Person.jsonl", &after) == 0);
	CHECK_EQ(after.st_mode & 07777, 0644);
	CHECK(mountfs_setattr(fx.mount, scratch, 0, &change, MOUNTFS_SET_MODE, &fx.caller, &after, &timeout, NULL) == 0);
	CHECK_EQ(after.st_mode & 07777, 0600);
	/* a directory takes and ignores it (rsync -a sets its destination directory's mode) */
	CHECK(mountfs_setattr(fx.mount, directory, 0, &change, MOUNTFS_SET_MODE, &fx.caller, &after, &timeout, NULL) == 0);
	CHECK_EQ(after.st_mode & 07777, 0755);
	fixture_close();
}

TEST(a_directory_mtime_moves_when_its_entries_change)
{
	CHECK(fixture_open() == 0);
	struct stat before, after;
	CHECK(fs_stat("tables", &before) == 0);
	usleep(2000);
	CHECK(fs_overwrite("tables/Person.jsonl", PEOPLE) == 0);
	CHECK(fs_stat("tables", &after) == 0);
	CHECK(later(after.st_mtim, before.st_mtim));
	before = after;
	usleep(2000);
	CHECK(fs_overwrite("tables/notes.txt", "x\n") == 0);
	CHECK(fs_stat("tables", &after) == 0);
	CHECK(later(after.st_mtim, before.st_mtim));
	fixture_close();
}

TEST(symlinks_devices_and_hard_links_are_eperm)
{
	CHECK(fixture_open() == 0);
	uint64_t tables;
	CHECK(fs_resolve("tables", &tables) == 0);
	CHECK_EQ(mountfs_make_node(fx.mount, tables, "link"), -EPERM);
	CHECK_EQ(mountfs_make_node(fx.mount, MOUNTFS_ROOT_ID, "fifo"), -EPERM);
	CHECK_EQ(mountfs_make_node(fx.mount, MOUNTFS_ROOT_ID, "tables"), -EEXIST);
	fixture_close();
}

/* ---- listings ------------------------------------------------------------------------------------ */

TEST(plain_readdir_entries_carry_the_inode_numbers_lookup_gives)
{
	CHECK(with_people() == 0);
	struct names_collector names = { .out = text, .size = sizeof text, .watch = "Person.jsonl" };
	CHECK(fs_list("tables", false, 0, &names) == 0);
	CHECK_EQ(names.zero_inodes, 0);
	struct stat st;
	CHECK(fs_stat("tables/Person.jsonl", &st) == 0);
	CHECK_EQ(names.watched_ino, st.st_ino);
	fixture_close();
}

TEST(a_listing_of_thousands_of_entries_is_complete_in_small_batches)
{
	CHECK(fixture_open() == 0);
	char path[64];
	for (int i = 0; i < 3000; i++) {
		snprintf(path, sizeof path, "tables/scratch%04d", i);
		CHECK(fs_overwrite(path, "") == 0);
	}
	static char many[1 << 20];
	struct names_collector plain = { .out = many, .size = sizeof many };
	CHECK(fs_list("tables", false, 100, &plain) == 0);
	CHECK_EQ(plain.count, 3002);
	CHECK_EQ(plain.zero_inodes, 0);
	struct names_collector plus = { .out = many, .size = sizeof many };
	CHECK(fs_list("tables", true, 77, &plus) == 0);
	CHECK_EQ(plus.count, 3002);
	CHECK_EQ(plus.zero_inodes, 0);
	fixture_close();
}

TEST(a_listing_of_graph_rows_keeps_a_name_and_a_kind_per_row_and_lists_them_all)
{
	CHECK(fixture_open() == 0);
	static char rows[1 << 17];
	size_t used = 0;
	for (int i = 0; i < 3000; i++)
		used += (size_t)snprintf(rows + used, sizeof rows - used, "{\"id\":\"n%04d\"}\n", i);
	CHECK(fs_overwrite("tables/N.jsonl", rows) == 0);
	uint64_t id;
	CHECK(fs_resolve("graph/N", &id) == 0);
	struct mountfs_open_result opened;
	CHECK(mountfs_opendir(fx.mount, id, &opened) == 0);
	const struct dir_listing *listing = &((struct open_directory *)(uintptr_t)opened.handle)->listing;
	CHECK_EQ(listing->count, 2);          /* . and .. */
	CHECK_EQ(listing->lean_count, 3000);  /* the rows: 8 bytes and a name each */
	CHECK(listing->names.size <= 3000 * 6);
	mountfs_releasedir(fx.mount, opened.handle);
	static char many[1 << 20];
	struct names_collector plain = { .out = many, .size = sizeof many, .watch = "n0042" };
	CHECK(fs_list("graph/N", false, 64, &plain) == 0);
	CHECK_EQ(plain.count, 3002);
	CHECK_EQ(plain.zero_inodes, 0);
	struct stat st;
	CHECK(fs_stat("graph/N/n0042", &st) == 0);
	CHECK_EQ(plain.watched_ino, st.st_ino);
	struct names_collector plus = { .out = many, .size = sizeof many };
	CHECK(fs_list("graph/N", true, 50, &plus) == 0);
	CHECK_EQ(plus.count, 3002);
	fixture_close();
}

int main(void)
{
	return harness_run();
}

/* The kernel sends RELEASEDIR without waiting: an unmount can come first. */
TEST(a_directory_still_open_at_unmount_is_freed_with_the_mount)
{
	CHECK(with_people() == 0);
	uint64_t id;
	CHECK(fs_resolve("tables", &id) == 0);
	struct mountfs_open_result directory;
	CHECK(mountfs_opendir(fx.mount, id, &directory) == 0);
	fixture_close();   /* no releasedir: the sanitizer build's leak check is the assertion */
}
