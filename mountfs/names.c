/*
 * names — the names a user may write: table names, and the scratch-name rule
 * (docs/MOUNT.md "Writing"). Pure functions, no state.
 */
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "mountfs_int.h"

bool names_table_valid(const char *name)
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

bool names_table_from_file(const char *file, const char *suffix, char out[JOURNAL_NAME_MAX + 1])
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
	return names_table_valid(out);
}

bool names_is_scratch(const char *name, const char *suffix)
{
	size_t length = strlen(name);
	size_t suffix_length = strlen(suffix);
	if (name[0] == '.' || (length > 0 && name[length - 1] == '~'))
		return true;
	return length < suffix_length || strcmp(name + length - suffix_length, suffix) != 0;
}

bool names_is_data_spelling(const char *name, char table[JOURNAL_NAME_MAX + 1])
{
	static const char *const extensions[] = { "jsonl", "json", "ndjson", "csv", "tsv" };
	const char *dot = strrchr(name, '.');
	if (!dot || dot == name || (size_t)(dot - name) > JOURNAL_NAME_MAX)
		return false;
	bool data = false;
	for (size_t i = 0; i < sizeof extensions / sizeof extensions[0]; i++)
		data = data || strcasecmp(dot + 1, extensions[i]) == 0;
	if (!data || strcmp(dot + 1, "jsonl") == 0)
		return false;
	memcpy(table, name, (size_t)(dot - name));
	table[dot - name] = '\0';
	return names_table_valid(table);
}

/* ---- node ids as file names (docs/MOUNT.md "The graph") ---- */

bool names_graph_id_encode(const uint8_t *id, size_t size, char out[GRAPHFS_NAME_MAX + 1])
{
	if (size == 0)
		return false;
	if ((size == 1 && id[0] == '.') || (size == 2 && id[0] == '.' && id[1] == '.')) {
		strcpy(out, size == 1 ? "%2E" : "%2E%2E");
		return true;
	}
	size_t length = 0;
	for (size_t i = 0; i < size; i++) {
		const char *escape = id[i] == '%' ? "%25" : id[i] == '/' ? "%2F" : NULL;
		size_t piece = escape ? 3 : 1;
		if (id[i] == 0 || length + piece > GRAPHFS_NAME_MAX)
			return false;
		if (escape)
			memcpy(out + length, escape, 3);
		else
			out[length] = (char)id[i];
		length += piece;
	}
	out[length] = '\0';
	return true;
}

static int hex_value(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

bool names_graph_id_decode(const char *name, struct buf *out)
{
	buf_reset(out);
	for (size_t i = 0; name[i]; i++) {
		uint8_t byte = (uint8_t)name[i];
		if (byte == '%') {
			int high = hex_value(name[i + 1]), low = high < 0 ? -1 : hex_value(name[i + 2]);
			if (low < 0)
				return false;
			byte = (uint8_t)(high << 4 | low);
			i += 2;
		}
		if (buf_append(out, &byte, 1) < 0)
			return false;
	}
	/* one name per id: only the encoding names_graph_id_encode gives */
	char again[GRAPHFS_NAME_MAX + 1];
	return names_graph_id_encode(out->data, out->size, again) && strcmp(again, name) == 0;
}
