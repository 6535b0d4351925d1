/*
 * test_mountfs — the write semantics of the mounted tree (docs/MOUNT.md
 * "Writing"), one behaviour per test, through mountfs without /dev/fuse.
 * The pytest mount suite checks the same with real tools end to end.
 */
#include <pwd.h>
#include <sys/stat.h>

#include "mountfs_fixture.h"

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

int main(void)
{
	return harness_run();
}
