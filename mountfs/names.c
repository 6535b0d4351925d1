/*
 * names — the names a user may write: table names, and the scratch-name rule
 * (docs/MOUNT.md "Writing"). Pure functions, no state.
 */
#include <stdbool.h>
#include <string.h>

#include "mountfs_int.h"

bool table_name_valid(const char *name)
{
	size_t length = strlen(name);
	if (length == 0 || length > 128)
		return false;
	for (size_t i = 0; i < length; i++) {
		char c = name[i];
		bool letter = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
		bool digit = c >= '0' && c <= '9';
		if (!letter && !(digit && i > 0))
			return false;
	}
	return true;
}

bool table_name_from_file(const char *file, const char *suffix, char out[JOURNAL_NAME_MAX + 1])
{
	size_t length = strlen(file);
	size_t suffix_length = strlen(suffix);
	if (length <= suffix_length || strcmp(file + length - suffix_length, suffix) != 0)
		return false;
	size_t name_length = length - suffix_length;
	if (name_length > JOURNAL_NAME_MAX)
		return false;
	memcpy(out, file, name_length);
	out[name_length] = '\0';
	return table_name_valid(out);
}

bool is_scratch_name(const char *name, const char *suffix)
{
	size_t length = strlen(name);
	size_t suffix_length = strlen(suffix);
	if (name[0] == '.' || (length > 0 && name[length - 1] == '~'))
		return true;
	return length < suffix_length || strcmp(name + length - suffix_length, suffix) != 0;
}

