/*
 * libFuzzer target for the row parser and schema inference (docs/ARCHITECTURE.md "Reliability tests").
 *
 * Input: the first byte picks a fixture schema (or inference); the rest is
 * split at "\n" into lines. Beyond "no crash, no sanitizer report", every
 * accepted line must be a fixed point: its canonical form parses back to the
 * same bytes (against the fixture, or against the schema inferred from all
 * lines), and an inferred schema must render, parse and render identically.
 * And the two sources of fields agree (schema_int.h): the tokenizer with
 * its jansson fallback accepts and refuses exactly what jansson's fields
 * alone do, with the same bytes (ids aside when both assigned a ULID), the same
 * message, and the same inferred schema.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema.h"
#include "schema_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const fixture_texts[] = {
	("{\"kind\":\"node\",\"properties\":{\"s\":{\"type\":\"string\",\"nullable\":false},"
	 "\"b\":{\"type\":\"bool\"},\"i\":{\"type\":\"i64\"},\"f\":{\"type\":\"f64\"},"
	 "\"d\":{\"type\":\"date\"},\"t\":{\"type\":\"datetime\"},\"li\":{\"type\":\"list<i64>\"},"
	 "\"lf\":{\"type\":\"list<f64>\"},\"ls\":{\"type\":\"list<string>\"},\"v\":{\"type\":\"vector<3>\"}}}"),
	("{\"kind\":\"node\",\"key\":[\"k\",\"n\"],\"properties\":{\"k\":{\"type\":\"string\",\"nullable\":false},"
	 "\"n\":{\"type\":\"f64\",\"nullable\":false},\"x\":{\"type\":\"list<date>\"}}}"),
	("{\"kind\":\"node\",\"key\":[\"n\"],\"properties\":{\"n\":{\"type\":\"i64\",\"nullable\":false}}}"),
	("{\"kind\":\"edge\",\"from\":\"A\",\"to\":\"B\",\"properties\":{\"w\":{\"type\":\"f64\"}}}"),
};
#define FIXTURES (sizeof fixture_texts / sizeof *fixture_texts)

static struct schema fixtures[FIXTURES];

static void fail(const char *what, const struct buf *first, const struct buf *second)
{
	fprintf(stderr, "%s\n  first:  %.*s\n  second: %.*s\n", what, (int)first->size, (const char *)first->data,
		second ? (int)second->size : 0, second ? (const char *)second->data : "");
	abort();
}

/* canonical (with its "\n") parsed against schema renders to the same bytes. */
static void check_fixed_point(const struct schema *schema, const struct buf *canonical)
{
	struct schema_row again;
	struct error_info error;
	schema_row_init(&again);
	if (schema_row_parse(schema, (const char *)canonical->data, canonical->size - 1, false, &again, &error)) {
		fprintf(stderr, "canonical row refused: %s\n", error.message);
		fail("canonical row refused", canonical, NULL);
	}
	if (again.canonical.size != canonical->size || memcmp(again.canonical.data, canonical->data, canonical->size))
		fail("canonical row is not a fixed point", canonical, &again.canonical);
	schema_row_free(&again);
}

static void check_schema_round_trip(const struct schema *schema)
{
	struct buf first, second;
	struct schema parsed;
	struct error_info error;
	buf_init(&first);
	buf_init(&second);
	if (schema_render(schema, &first))
		abort();
	if (schema_parse((const char *)first.data, first.size, &parsed, &error))
		fail("rendered schema refused", &first, NULL);
	if (schema_render(&parsed, &second))
		abort();
	if (first.size != second.size || memcmp(first.data, second.data, first.size))
		fail("schema is not a fixed point", &first, &second);
	schema_free(&parsed);
	buf_free(&first);
	buf_free(&second);
}

static bool same_bytes(const struct buf *first, const struct buf *second)
{
	return first->size == second->size && (!first->size || !memcmp(first->data, second->data, first->size));
}

/* A ULID assigned to a row without id: 26 Crockford base-32 characters. */
static bool is_ulid(const struct buf *id)
{
	if (id->size != 26)
		return false;
	for (size_t i = 0; i < 26; i++)
		if (!strchr("0123456789ABCDEFGHJKMNPQRSTVWXYZ", id->data[i]))
			return false;
	return true;
}

/* The results of both parsers for one line agree (rc, message, row). */
static void check_agreement(int rc, const struct error_info *error, const struct schema_row *row, int tree_rc,
			    const struct error_info *tree_error, const struct schema_row *tree_row)
{
	if (rc != tree_rc) {
		fprintf(stderr, "tokenizer rc %d, jansson rc %d (%s)\n", rc, tree_rc,
			tree_rc ? tree_error->message : error->message);
		fail("the parsers disagree on accepting", &row->canonical, &tree_row->canonical);
	}
	if (rc) {
		if (strcmp(error->message, tree_error->message)) {
			fprintf(stderr, "messages differ:\n  %s\n  %s\n", error->message, tree_error->message);
			abort();
		}
		return;
	}
	bool assigned = !same_bytes(&row->id, &tree_row->id) && is_ulid(&row->id) && is_ulid(&tree_row->id);
	if (row->is_delete != tree_row->is_delete || !same_bytes(&row->from, &tree_row->from) ||
	    !same_bytes(&row->to, &tree_row->to) || (!assigned && !same_bytes(&row->id, &tree_row->id)))
		fail("the parsers disagree on id, from, to or delete", &row->canonical, &tree_row->canonical);
	if (row->is_delete) {
		if (row->canonical.size || tree_row->canonical.size)
			fail("a delete line has canonical bytes", &row->canonical, &tree_row->canonical);
		return;
	}
	/* canonical = {"id":"<id>"… : compare what follows the id */
	size_t skip = 8 + row->id.size, tree_skip = 8 + tree_row->id.size;
	if (row->canonical.size < skip || tree_row->canonical.size < tree_skip ||
	    row->canonical.size - skip != tree_row->canonical.size - tree_skip ||
	    (assigned ? memcmp(row->canonical.data + skip, tree_row->canonical.data + tree_skip,
			       row->canonical.size - skip)
		      : !same_bytes(&row->canonical, &tree_row->canonical)))
		fail("the parsers disagree on the canonical bytes", &row->canonical, &tree_row->canonical);
}

static void run_fixture(const struct schema *schema, const uint8_t *data, size_t size)
{
	struct schema_row row, tree_row;
	struct error_info error, tree_error;
	schema_row_init(&row);
	schema_row_init(&tree_row);
	for (size_t start = 0; start <= size;) {
		const uint8_t *end = memchr(data + start, '\n', size - start);
		size_t length = end ? (size_t)(end - (data + start)) : size - start;
		error_info_clear(&error);
		error_info_clear(&tree_error);
		int rc = schema_row_parse(schema, (const char *)data + start, length, true, &row, &error);
		int tree_rc = schema_row_parse_tree(schema, (const char *)data + start, length, true, &tree_row,
						    &tree_error);
		check_agreement(rc, &error, &row, tree_rc, &tree_error, &tree_row);
		if (rc == 0 && !row.is_delete)
			check_fixed_point(schema, &row.canonical);
		start += length + 1;
	}
	schema_row_free(&row);
	schema_row_free(&tree_row);
}

static void run_inference(const uint8_t *data, size_t size)
{
	struct schema_inference *inference, *tree_inference;
	struct schema_row row, tree_row;
	struct error_info error, tree_error;
	struct buf rows;   /* accepted canonical lines, back to back */
	struct schema inferred, tree_inferred;
	if (schema_inference_open(&inference) || schema_inference_open(&tree_inference))
		abort();
	schema_row_init(&row);
	schema_row_init(&tree_row);
	buf_init(&rows);
	for (size_t start = 0; start <= size;) {
		const uint8_t *end = memchr(data + start, '\n', size - start);
		size_t length = end ? (size_t)(end - (data + start)) : size - start;
		error_info_clear(&error);
		error_info_clear(&tree_error);
		int rc = schema_inference_row(inference, (const char *)data + start, length, true, &row, &error);
		int tree_rc = schema_inference_row_tree(tree_inference, (const char *)data + start, length, true,
							&tree_row, &tree_error);
		check_agreement(rc, &error, &row, tree_rc, &tree_error, &tree_row);
		if (rc == 0 && !row.is_delete && buf_append(&rows, row.canonical.data, row.canonical.size))
			abort();
		start += length + 1;
	}
	if (schema_inference_finish(inference, &inferred) || schema_inference_finish(tree_inference, &tree_inferred))
		abort();
	check_schema_round_trip(&inferred);
	{
		struct buf first, second;
		buf_init(&first);
		buf_init(&second);
		if (schema_render(&inferred, &first) || schema_render(&tree_inferred, &second))
			abort();
		if (!same_bytes(&first, &second))
			fail("the parsers infer different schemas", &first, &second);
		buf_free(&first);
		buf_free(&second);
	}
	schema_free(&tree_inferred);
	schema_row_free(&tree_row);
	schema_inference_free(tree_inference);
	for (size_t start = 0; start < rows.size;) {
		const uint8_t *end = memchr(rows.data + start, '\n', rows.size - start);
		struct buf line = {.data = rows.data + start, .size = (size_t)(end - (rows.data + start)) + 1};
		check_fixed_point(&inferred, &line);
		start += line.size;
	}
	schema_free(&inferred);
	buf_free(&rows);
	schema_row_free(&row);
	schema_inference_free(inference);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	if (!ready) {
		for (size_t i = 0; i < FIXTURES; i++) {
			struct error_info error;
			if (schema_parse(fixture_texts[i], strlen(fixture_texts[i]), &fixtures[i], &error)) {
				fprintf(stderr, "fixture %zu refused: %s\n", i, error.message);
				abort();
			}
		}
		ready = 1;
	}
	if (size == 0)
		return 0;
	unsigned choice = data[0] % (FIXTURES + 1);
	if (choice < FIXTURES)
		run_fixture(&fixtures[choice], data + 1, size - 1);
	else
		run_inference(data + 1, size - 1);
	return 0;
}
