/*
 * libFuzzer target for the reader of `graphfs load`'s lines
 * (core/store_envelope.c): each input line is read twice, by the fast reader
 * (the envelopes exactly as dump writes them, taken apart by their bytes) and
 * by jansson alone.
 *
 * Beyond "no crash, no sanitizer report":
 *   - a refusal is -EINVAL with a message, and only from jansson's reader;
 *   - where the fast reader's row is one JSON object without a repeated key
 *     (any other row its table's writer refuses), jansson's reader gives the
 *     same kind, the same table and an equal row;
 *   - every row jansson's reader gives is one JSON object, and an edge row
 *     names "from" and "to".
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "store_envelope_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static json_t *row_object(const struct store_envelope *envelope)
{
	json_t *row = json_loadb((const char *)envelope->row.data, envelope->row.size, JSON_REJECT_DUPLICATES, NULL);
	if (row && !json_is_object(row)) {
		json_decref(row);
		return NULL;
	}
	return row;
}

static void check_line(const char *line, size_t size)
{
	struct store_envelope fast, parsed;
	store_envelope_init(&fast);
	store_envelope_init(&parsed);
	char fast_message[256], parsed_message[256];
	int fast_rc = store_envelope_read(line, size, true, &fast, fast_message, sizeof fast_message);
	int parsed_rc = store_envelope_read(line, size, false, &parsed, parsed_message, sizeof parsed_message);
	if ((fast_rc < 0 && fast_rc != -EINVAL) || (parsed_rc < 0 && parsed_rc != -EINVAL))
		abort();
	if ((fast_rc == -EINVAL && !fast_message[0]) || (parsed_rc == -EINVAL && !parsed_message[0]))
		abort();
	if ((fast_rc == 0) != (parsed_rc == 0))
		abort();   /* blank to one reader, not to the other */
	if (parsed_rc == 1) {
		json_t *row = json_loadb((const char *)parsed.row.data, parsed.row.size, 0, NULL);
		if (!json_is_object(row) || !parsed.parsed)
			abort();
		if (parsed.kind == STORE_ENVELOPE_EDGE && (!json_object_get(row, "from") || !json_object_get(row, "to")))
			abort();
		json_decref(row);
	}
	if (fast_rc == 1 && !fast.parsed) {
		json_t *fast_row = row_object(&fast);
		if (fast_row) {
			json_t *parsed_row = parsed_rc == 1 ? row_object(&parsed) : NULL;
			if (!parsed_row || fast.kind != parsed.kind || strcmp(fast.table, parsed.table) ||
			    !json_equal(fast_row, parsed_row))
				abort();
			json_decref(parsed_row);
			json_decref(fast_row);
		}
	}
	store_envelope_free(&fast);
	store_envelope_free(&parsed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	size_t start = 0;
	for (size_t i = 0; i <= size; i++) {
		if (i == size || text[i] == '\n') {
			check_line(text + start, i - start);
			start = i + 1;
		}
	}
	return 0;
}
