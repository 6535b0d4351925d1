/*
 * libFuzzer target for the schema parser (docs/ARCHITECTURE.md "Reliability tests"). Beyond "no crash, no
 * sanitizer report": a refused schema leaves the output empty and carries a
 * line within the text; an accepted one renders, parses and renders to the
 * same bytes with the same hash, is compatible with itself, and validates a
 * row built from its own property names without crashing.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct schema schema, again;
	struct error_info error;
	struct buf first, second;
	char first_hash[17], second_hash[17];
	error_info_clear(&error);
	int rc = schema_parse((const char *)data, size, &schema, &error);
	if (rc) {
		uint64_t lines = 1;
		for (size_t i = 0; i < size; i++)
			lines += data[i] == '\n';
		if ((rc != -EINVAL && rc != -ENOMEM) || schema.property_count || schema.key || error.line < 1 ||
		    error.line > lines || !error.message[0])
			abort();
		return 0;
	}
	buf_init(&first);
	buf_init(&second);
	if (schema_render(&schema, &first) || schema_parse((const char *)first.data, first.size, &again, &error) ||
	    schema_render(&again, &second))
		abort();
	if (first.size != second.size || memcmp(first.data, second.data, first.size))
		abort();
	schema_hash(&schema, first_hash);
	schema_hash(&again, second_hash);
	if (strcmp(first_hash, second_hash) || schema_check_compatible(&schema, &again, &error))
		abort();
	/* A row naming every property with a string value: refused or accepted, never a crash. */
	buf_reset(&second);
	buf_append_string(&second, "{\"id\":\"x\",\"from\":\"a\",\"to\":\"b\"");
	for (size_t i = 0; i < schema.property_count; i++)
		buf_printf(&second, ",\"%s\":\"2024-01-01\"", schema.properties[i].name);
	buf_append_string(&second, "}");
	struct schema_row row;
	schema_row_init(&row);
	schema_row_parse(&schema, (const char *)second.data, second.size, false, &row, &error);
	schema_row_free(&row);
	schema_free(&again);
	schema_free(&schema);
	buf_free(&first);
	buf_free(&second);
	return 0;
}
