/* error_info: one error, formatted as one line for a human. */
#include "harness.h"

#include <errno.h>
#include <string.h>

#include "error_info.h"

TEST(set_records_code_and_message_and_returns_code)
{
	struct error_info error;
	error_info_clear(&error);
	CHECK_EQ(error_info_set(&error, -EINVAL, "bad %s number %d", "row", 7), -EINVAL);
	CHECK_EQ(error.code, -EINVAL);
	CHECK(strcmp(error.message, "bad row number 7") == 0);
}

TEST(clear_resets_everything)
{
	struct error_info error;
	error_info_locate(&error, "people.jsonl", 3);
	error_info_set(&error, -EIO, "x");
	error_info_clear(&error);
	CHECK_EQ(error.code, 0);
	CHECK_EQ(error.line, 0);
	CHECK(error.path[0] == 0 && error.message[0] == 0);
}

TEST(null_error_is_allowed_everywhere)
{
	char out[16];
	error_info_clear(NULL);
	error_info_locate(NULL, "p", 1);
	CHECK_EQ(error_info_set(NULL, -ENOENT, "dropped"), -ENOENT);
	CHECK(strcmp(error_info_format(NULL, out, sizeof out), "") == 0);
}

TEST(set_keeps_path_and_line)
{
	struct error_info error;
	error_info_clear(&error);
	error_info_locate(&error, "people.jsonl", 12);
	error_info_set(&error, -EINVAL, "duplicate id");
	CHECK(strcmp(error.path, "people.jsonl") == 0);
	CHECK_EQ(error.line, 12);
}

TEST(format_with_path_and_line)
{
	struct error_info error;
	char out[1024];
	error_info_clear(&error);
	error_info_locate(&error, "people.jsonl", 12);
	error_info_set(&error, -EINVAL, "duplicate id");
	CHECK(strcmp(error_info_format(&error, out, sizeof out), "people.jsonl:12: duplicate id") == 0);
}

TEST(format_with_path_only)
{
	struct error_info error;
	char out[1024];
	error_info_clear(&error);
	error_info_locate(&error, "people", 0);
	error_info_set(&error, -ENOENT, "no such table");
	CHECK(strcmp(error_info_format(&error, out, sizeof out), "people: no such table") == 0);
}

TEST(format_with_message_only)
{
	struct error_info error;
	char out[1024];
	error_info_clear(&error);
	error_info_set(&error, -EIO, "disk failed");
	CHECK(strcmp(error_info_format(&error, out, sizeof out), "disk failed") == 0);
}

TEST(format_truncates_to_the_buffer)
{
	struct error_info error;
	char out[8];
	error_info_clear(&error);
	error_info_set(&error, -EIO, "a rather long message");
	error_info_format(&error, out, sizeof out);
	CHECK(strcmp(out, "a rathe") == 0);
}

TEST(overlong_message_is_truncated_not_overflowed)
{
	struct error_info error;
	char long_text[2000];
	memset(long_text, 'a', sizeof long_text - 1);
	long_text[sizeof long_text - 1] = 0;
	error_info_clear(&error);
	error_info_set(&error, -EINVAL, "%s", long_text);
	CHECK_EQ(strlen(error.message), sizeof error.message - 1);
	error_info_locate(&error, long_text, 1);
	CHECK_EQ(strlen(error.path), sizeof error.path - 1);
}

int main(void)
{
	return harness_run();
}
