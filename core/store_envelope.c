/*
 * store_envelope — see store_envelope_int.h: one dump line read into its
 * envelope, for `graphfs load` (core/store_dump.c).
 *
 * Two readers, one result:
 *   - the fast one takes the envelopes exactly as dump writes them apart by
 *     their bytes ({"type":"N","data":{…}} and {"edge":"E","from":F,"to":T,
 *     "data":{…}}, N and E valid table names), so that a loaded row is
 *     parsed once, by its table's writer;
 *   - jansson reads every other line.
 * Invariant: where the fast reader's row is one JSON object without a
 * repeated key (any other row its writer refuses), jansson's reader of the
 * same line gives the same kind, table and an equal row
 * (tests/fuzz/fuzz_envelope.c checks it).
 */
#include "store_envelope_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "schema.h"

void store_envelope_init(struct store_envelope *envelope)
{
	memset(envelope, 0, sizeof *envelope);
	buf_init(&envelope->row);
}

void store_envelope_free(struct store_envelope *envelope)
{
	buf_free(&envelope->row);
}

size_t store_envelope_string_end(const char *text, size_t size, size_t at)
{
	size_t end = at + 1;
	while (end < size && text[end] != '"')
		end += text[end] == '\\' ? 2 : 1;
	return end < size ? end + 1 : 0;
}

/* The JSON string at text[*at], quotes included, without decoding it; *at moves past it. 0 or -EINVAL. */
static int raw_string(const char *text, size_t size, size_t *at, const char **start, size_t *length)
{
	if (*at >= size || text[*at] != '"')
		return -EINVAL;
	size_t end = store_envelope_string_end(text, size, *at);
	if (!end)
		return -EINVAL;
	*start = text + *at;
	*length = end - *at;
	*at = end;
	return 0;
}

static bool take(const char *text, size_t size, size_t *at, const char *literal)
{
	size_t length = strlen(literal);
	if (*at + length > size || memcmp(text + *at, literal, length) != 0)
		return false;
	*at += length;
	return true;
}

/* The fast reader: 1 (read), 0 (not an envelope as dump writes it: parse the line) or -ENOMEM. */
static int read_fast(const char *line, size_t size, struct store_envelope *out)
{
	size_t at = 0;
	const char *name;
	size_t name_size;
	bool edge;
	if (take(line, size, &at, "{\"type\":"))
		edge = false;
	else if (take(line, size, &at, "{\"edge\":"))
		edge = true;
	else
		return 0;
	/* a table name as dump writes it: an identifier (no escapes, ASCII, at most JOURNAL_NAME_MAX) */
	if (raw_string(line, size, &at, &name, &name_size) < 0 || !schema_name_is_valid(name + 1, name_size - 2))
		return 0;
	const char *from = NULL, *to = NULL;
	size_t from_size = 0, to_size = 0;
	if (edge && (!take(line, size, &at, ",\"from\":") || raw_string(line, size, &at, &from, &from_size) < 0 ||
		     !take(line, size, &at, ",\"to\":") || raw_string(line, size, &at, &to, &to_size) < 0))
		return 0;
	if (!take(line, size, &at, ",\"data\":{") || line[size - 1] != '}' || line[size - 2] != '}')
		return 0;
	memcpy(out->table, name + 1, name_size - 2);
	out->table[name_size - 2] = 0;
	out->kind = edge ? STORE_ENVELOPE_EDGE : STORE_ENVELOPE_NODE;
	out->parsed = false;
	if (!edge)   /* data's "{" to its "}": the line less its last byte */
		return buf_append(&out->row, line + at - 1, size - 1 - (at - 1)) < 0 ? -ENOMEM : 1;
	/* {"from":F,"to":T,<data's members>}: the writer puts id first */
	size_t members = size - 2 - at;     /* between data's "{" and its "}" */
	int rc = buf_append(&out->row, "{\"from\":", 8);
	if (rc == 0)
		rc = buf_append(&out->row, from, from_size);
	if (rc == 0)
		rc = buf_append(&out->row, ",\"to\":", 6);
	if (rc == 0)
		rc = buf_append(&out->row, to, to_size);
	if (rc == 0 && members)
		rc = buf_append(&out->row, ",", 1);
	if (rc == 0)
		rc = buf_append(&out->row, line + at, members);
	if (rc == 0)
		rc = buf_append(&out->row, "}", 1);
	return rc < 0 ? -ENOMEM : 1;
}

/* Appends value's compact text to out. 0 or -ENOMEM. */
static int append_json(struct buf *out, const json_t *value)
{
	char *text = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);
	if (!text)
		return -ENOMEM;
	int rc = buf_append(out, text, strlen(text));
	free(text);
	return rc < 0 ? -ENOMEM : 0;
}

/* The jansson reader: 1 or -EINVAL / -ENOMEM. */
static int read_parsed(const char *line, size_t size, struct store_envelope *out, char *message, size_t message_size)
{
	json_error_t parse_error;
	json_t *object = json_loadb(line, size, 0, &parse_error);
	int rc = 1;
	if (!json_is_object(object)) {
		snprintf(message, message_size, "not a JSON object%s%s", object ? "" : ": ", object ? "" : parse_error.text);
		rc = -EINVAL;
		goto out;
	}
	json_t *schema = json_object_get(object, "schema"), *type = json_object_get(object, "type");
	json_t *edge = json_object_get(object, "edge"), *data = json_object_get(object, "data");
	json_t *from = json_object_get(object, "from"), *to = json_object_get(object, "to");
	json_t *name;
	if (json_is_string(schema) && json_is_object(data) && json_object_size(object) == 2) {
		out->kind = STORE_ENVELOPE_SCHEMA;
		name = schema;
	} else if (json_is_string(type) && json_is_object(data) && json_object_size(object) == 2) {
		out->kind = STORE_ENVELOPE_NODE;
		name = type;
	} else if (json_is_string(edge) && json_is_object(data) && from && to && json_object_size(object) == 4) {
		out->kind = STORE_ENVELOPE_EDGE;
		name = edge;
	} else {
		snprintf(message, message_size,
			 "not a dump line: expected {\"schema\":NAME,\"data\":{…}}, {\"type\":NODE,\"data\":{…}} "
			 "or {\"edge\":EDGE,\"from\":…,\"to\":…,\"data\":{…}}");
		rc = -EINVAL;
		goto out;
	}
	if (json_string_length(name) > JOURNAL_NAME_MAX || strlen(json_string_value(name)) != json_string_length(name)) {
		snprintf(message, message_size, "invalid table name \"%.128s\"", json_string_value(name));
		rc = -EINVAL;
		goto out;
	}
	snprintf(out->table, sizeof out->table, "%s", json_string_value(name));
	out->parsed = true;
	if (out->kind != STORE_ENVELOPE_EDGE) {
		if (append_json(&out->row, data) < 0)
			rc = -ENOMEM;
		goto out;
	}
	/* data with the envelope's from and to set (they replace any data names itself) */
	json_t *row = json_deep_copy(data);
	if (!row || json_object_set(row, "from", from) || json_object_set(row, "to", to) ||
	    append_json(&out->row, row) < 0)
		rc = -ENOMEM;
	json_decref(row);
out:
	json_decref(object);
	return rc;
}

int store_envelope_read(const char *line, size_t size, bool fast, struct store_envelope *out, char *message,
			size_t message_size)
{
	buf_reset(&out->row);
	message[0] = 0;
	while (size && (line[size - 1] == '\r' || line[size - 1] == ' ' || line[size - 1] == '\t'))
		size--;
	if (size == 0)
		return 0;   /* blank lines are allowed */
	int rc = fast ? read_fast(line, size, out) : 0;
	if (rc != 0)
		return rc;
	buf_reset(&out->row);
	return read_parsed(line, size, out, message, message_size);
}
