/*
 * schema_row — rows of a declared schema: one validator and one renderer
 * over a line's list of fields (schema_int.h). See schema.h for the API and
 * docs/FORMAT.md §7 for the canonical form.
 *
 * A line's fields come from one of two sources: the tokenizer
 * (schema_scan_line, the fast one, for the common line) or jansson
 * (schema_scan_tree, for every line the tokenizer declines). Whatever the
 * source, the same code below checks and renders the fields, so what a row
 * becomes never depends on which source read it.
 *
 * Invariants:
 *   1. Checks run in one order, whatever the source: keys in line order
 *      (unknown names, directives), then a delete's shape, then properties
 *      in schema order (missing, types), then the id, then the endpoints;
 *      the first failure is the line's error.
 *   2. The tokenizer's fields may repeat a key (jansson refuses that line):
 *      a repeat found there DECLINES, and so does any error: the line is read
 *      again by jansson, which refuses duplicates with its own message, so an
 *      error always comes from jansson's fields, in jansson's terms.
 *   3. A failed call leaves the row reset and an inference exactly as it was.
 *   4. A tokenized node line that is already its own canonical form (id
 *      first, properties in schema order, no whitespace, no nulls, every
 *      value written canonically for its type: line_is_canonical) is taken
 *      as it is instead of being rendered; the test for that accepts only
 *      lines the renderer would reproduce byte for byte, so what a row
 *      becomes still never depends on the path.
 *
 * Inference, over the same fields and helpers, is schema_infer.c's.
 */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "schema.h"
#include "schema_int.h"
#include "ulid.h"

#define DESCRIBED_MAX (SCHEMA_SNIPPET_MAX * 6 + 32)

/* ---- memory ---------------------------------------------------------------------- */

void schema_row_init(struct schema_row *row)
{
	buf_init(&row->canonical);
	buf_init(&row->id);
	buf_init(&row->from);
	buf_init(&row->to);
	row->is_delete = row->is_detach = row->is_patch = false;
	row->scan = NULL;
}

void schema_row_free(struct schema_row *row)
{
	buf_free(&row->canonical);
	buf_free(&row->id);
	buf_free(&row->from);
	buf_free(&row->to);
	row->is_delete = row->is_detach = row->is_patch = false;
	if (row->scan) {
		schema_scan_free(row->scan);
		free(row->scan);
		row->scan = NULL;
	}
}

void schema_row_reset(struct schema_row *row)
{
	buf_reset(&row->canonical);
	buf_reset(&row->id);
	buf_reset(&row->from);
	buf_reset(&row->to);
	row->is_delete = row->is_detach = row->is_patch = false;
}

int schema_row_scan_of(struct schema_row *row, struct schema_scan **out)
{
	if (!row->scan) {
		row->scan = malloc(sizeof *row->scan);
		if (!row->scan)
			return -ENOMEM;
		schema_scan_init(row->scan);
	}
	*out = row->scan;
	return 0;
}

/* Room for count properties or fields in slots, spans and new_fields; the first properties slots zeroed. */
int schema_row_scan_reserve(struct schema_scan *scan, size_t count, size_t properties)
{
	if (count > scan->slot_capacity) {
		size_t capacity = scan->slot_capacity ? scan->slot_capacity : 16;
		while (capacity < count)
			capacity *= 2;
		size_t *slots = realloc(scan->slots, capacity * sizeof *slots);
		if (!slots)
			return -ENOMEM;
		scan->slots = slots;
		size_t *spans = realloc(scan->spans, 2 * capacity * sizeof *spans);
		if (!spans)
			return -ENOMEM;
		scan->spans = spans;
		size_t *new_fields = realloc(scan->new_fields, capacity * sizeof *new_fields);
		if (!new_fields)
			return -ENOMEM;
		scan->new_fields = new_fields;
		scan->slot_capacity = capacity;
	}
	if (properties)
		memset(scan->slots, 0, properties * sizeof *scan->slots);
	return 0;
}

/* ---- output ------------------------------------------------------------------------ */


/* buf_reserve with the common case (room left) inline. */
static inline int room(struct buf *out, size_t size)
{
	return out->capacity - out->size > size ? 0 : buf_reserve(out, size);
}

/* ,"name": */
int schema_row_put_property_name(struct buf *out, const char *name, size_t length)
{
	int rc = room(out, length + 4);
	if (rc)
		return rc;
	uint8_t *at = out->data + out->size;
	at[0] = ',';
	at[1] = '"';
	memcpy(at + 2, name, length); /* names are [A-Za-z0-9_]: nothing to escape */
	at[length + 2] = '"';
	at[length + 3] = ':';
	out->size += length + 4;
	return 0;
}

static int render_string_value(struct buf *out, const struct schema_scan *scan, const struct scan_value *value)
{
	size_t length;
	const char *text = schema_scan_text(scan, value, &length);
	if (value->escaped)
		return schema_render_string(out, text, length);
	/* Unescaped tokenized text holds no byte that needs escaping: it is its own canonical form. */
	int rc = room(out, length + 2);
	if (rc)
		return rc;
	uint8_t *at = out->data + out->size;
	at[0] = '"';
	memcpy(at + 1, text, length);
	at[length + 1] = '"';
	out->size += length + 2;
	return 0;
}

/* An integer as written is canonical (JSON has no leading zeros), except -0. */
static int render_integer_value(struct buf *out, const struct scan_value *value)
{
	if (value->integer == 0)
		return schema_put(out, "0", 1);
	if (value->text)
		return schema_put(out, value->text, value->length);
	char text[24];
	int length = snprintf(text, sizeof text, "%lld", (long long)value->integer);
	return schema_put(out, text, (size_t)length);
}

static int render_real_value(struct buf *out, const struct scan_value *value)
{
	char text[40], digits[24];
	size_t length;
	if (value->canonical_text)
		return schema_put(out, value->text, value->length);
	if (value->real == 0 || !value->short_form) {
		length = schema_format_decimal(text, value->real, false);
	} else {
		uint64_t rest = value->digits;
		for (int i = value->digit_count - 1; i >= 0; i--) {
			digits[i] = (char)('0' + rest % 10);
			rest /= 10;
		}
		length = schema_format_digits(text, value->real, digits, value->digit_count, value->point);
	}
	return schema_put(out, text, length);
}

/* An integer as f64: exact below 2^53, where its shortest digits are its own. */
static int render_integer_as_f64(struct buf *out, const struct scan_value *value)
{
	int64_t exact = (int64_t)1 << 53;
	if (value->integer >= -exact && value->integer <= exact)
		return render_integer_value(out, value);
	return schema_render_decimal(out, (double)value->integer, false);
}

/* Any scalar or list of scalars, by its JSON type alone (inference; nulls, objects and nesting never get here). */
int schema_row_render_untyped(struct buf *out, const struct schema_scan *scan, const struct scan_value *value)
{
	int rc;
	switch (value->kind) {
	case SCAN_STRING:
		return render_string_value(out, scan, value);
	case SCAN_TRUE:
		return schema_put(out, "true", 4);
	case SCAN_FALSE:
		return schema_put(out, "false", 5);
	case SCAN_INTEGER:
		return render_integer_value(out, value);
	case SCAN_REAL:
		return render_real_value(out, value);
	case SCAN_ARRAY:
		if ((rc = schema_put(out, "[", 1)))
			return rc;
		for (size_t i = 0; i < value->count; i++) {
			if ((i && (rc = schema_put(out, ",", 1))) ||
			    (rc = schema_row_render_untyped(out, scan, &scan->elements[value->first + i])))
				return rc;
		}
		return schema_put(out, "]", 1);
	default:
		assert(!"inference refuses objects and nulls before rendering");
		return -EINVAL;
	}
}

/* {"id":…[,"from":…,"to":…] from row's id and endpoints, appended to out. */
static int render_row_head(struct buf *out, const struct schema_row *row, bool edge)
{
	int rc;
	if ((rc = schema_put(out, "{\"id\":", 6)) ||
	    (rc = schema_render_string(out, (const char *)row->id.data, row->id.size)))
		return rc;
	if (edge && ((rc = buf_append_string(out, ",\"from\":")) ||
		     (rc = schema_render_string(out, (const char *)row->from.data, row->from.size)) ||
		     (rc = buf_append_string(out, ",\"to\":")) ||
		     (rc = schema_render_string(out, (const char *)row->to.data, row->to.size))))
		return rc;
	return 0;
}

/* render_row_head for a row whose id is the field value given (NULL: row->id was assigned or derived). */
int schema_row_render_head_given(struct buf *out, const struct schema_scan *scan, const struct scan_value *given,
			     const struct schema_row *row, bool edge)
{
	int rc;
	if (!given || edge)
		return render_row_head(out, row, edge);
	if ((rc = schema_put(out, "{\"id\":", 6)))
		return rc;
	return render_string_value(out, scan, given);
}

/* ---- describing values in messages ---------------------------------------------- */

static void describe(const struct schema_scan *scan, const struct scan_value *value, char *out, size_t size)
{
	char text[SCHEMA_SNIPPET_MAX * 6 + 8];
	size_t length;
	const char *bytes;
	switch (value->kind) {
	case SCAN_NULL:
		snprintf(out, size, "null");
		break;
	case SCAN_TRUE:
		snprintf(out, size, "true");
		break;
	case SCAN_FALSE:
		snprintf(out, size, "false");
		break;
	case SCAN_INTEGER:
		snprintf(out, size, "integer %lld", (long long)value->integer);
		break;
	case SCAN_REAL:
		schema_format_decimal(text, value->real, false);
		snprintf(out, size, "number %s", text);
		break;
	case SCAN_STRING:
		bytes = schema_scan_text(scan, value, &length);
		schema_snippet(bytes, length, text, sizeof text);
		snprintf(out, size, "string \"%s\"", text);
		break;
	case SCAN_ARRAY:
		snprintf(out, size, "an array");
		break;
	case SCAN_OBJECT:
		snprintf(out, size, "an object");
		break;
	}
}

/* Where a value is, for messages: property "p" or property "p"[3]. */
void schema_row_value_path(char *out, size_t size, const char *property, long index)
{
	if (index < 0)
		snprintf(out, size, "property \"%s\"", property);
	else
		snprintf(out, size, "property \"%s\"[%ld]", property, index);
}

int schema_row_type_mismatch(const char *path, const char *expected, const struct schema_scan *scan,
			 const struct scan_value *value, struct error_info *error)
{
	char described[DESCRIBED_MAX];
	describe(scan, value, described, sizeof described);
	return error_info_set(error, -EINVAL, "%s: expected %s, got %s", path, expected, described);
}

/* A key as a NUL-terminated snippet for messages. */
void schema_row_quote_key(const struct scan_field *field, char *out, size_t size)
{
	schema_snippet(field->key, field->key_length, out, size);
}

bool schema_row_key_is(const struct scan_field *field, const char *name, size_t length)
{
	return field->key_length == length && !memcmp(field->key, name, length);
}

/* A schema property name (NUL-terminated) equals key[0..length). */
bool schema_row_name_equals(const char *name, const char *key, size_t length)
{
	return length <= SCHEMA_NAME_MAX && name[length] == 0 && name[0] == key[0] && !memcmp(name, key, length);
}

/* ---- typed values -------------------------------------------------------------------- */

/* The message for a scalar of the wrong kind (cold: kept out of render_scalar's frame). */
static __attribute__((noinline, cold)) int scalar_mismatch(enum schema_type_kind kind, const struct schema_scan *scan,
							    const struct scan_value *value, const char *property,
							    long index, struct error_info *error)
{
	static const char *const expected[] = {
		[SCHEMA_STRING] = "string", [SCHEMA_BOOL] = "bool", [SCHEMA_I64] = "i64", [SCHEMA_F64] = "f64",
		[SCHEMA_DATE] = "a date (YYYY-MM-DD, a real calendar day)",
		[SCHEMA_DATETIME] = "a datetime (RFC 3339, e.g. 2024-01-31T12:00:00Z)",
	};
	char path[SCHEMA_NAME_MAX + 48];
	schema_row_value_path(path, sizeof path, property, index);
	if (kind == SCHEMA_F64 && value->kind == SCAN_REAL)
		return error_info_set(error, -EINVAL, "%s: NaN and infinities are not JSON numbers", path);
	return schema_row_type_mismatch(path, expected[kind], scan, value, error);
}

/* Checks a scalar against kind and appends its canonical form. */
static int render_scalar(struct buf *out, enum schema_type_kind kind, const struct schema_scan *scan,
			 const struct scan_value *value, const char *property, long index, struct error_info *error)
{
	size_t length;
	const char *text;
	switch (kind) {
	case SCHEMA_STRING:
		if (value->kind == SCAN_STRING)
			return render_string_value(out, scan, value);
		break;
	case SCHEMA_BOOL:
		if (value->kind == SCAN_TRUE || value->kind == SCAN_FALSE)
			return value->kind == SCAN_TRUE ? schema_put(out, "true", 4) : schema_put(out, "false", 5);
		break;
	case SCHEMA_I64:
		if (value->kind == SCAN_INTEGER)
			return render_integer_value(out, value);
		break;
	case SCHEMA_F64:
		if (value->kind == SCAN_INTEGER)
			return render_integer_as_f64(out, value);
		if (value->kind == SCAN_REAL && isfinite(value->real))
			return render_real_value(out, value);
		break;
	case SCHEMA_DATE:
	case SCHEMA_DATETIME:
		text = value->kind == SCAN_STRING ? schema_scan_text(scan, value, &length) : NULL;
		if (text && (kind == SCHEMA_DATE ? schema_date_is_valid(text, length)
						 : schema_datetime_is_valid(text, length)))
			return render_string_value(out, scan, value);
		break;
	default:
		assert(!"render_scalar takes scalar kinds");
		return -EINVAL;
	}
	return scalar_mismatch(kind, scan, value, property, index, error);
}

/* The messages of render_typed (cold). element: the element's index, -1 for the value itself. */
static __attribute__((noinline, cold)) int typed_mismatch(const struct schema_type *type, const struct schema_scan *scan,
							   const struct scan_value *value, const char *property,
							   long element, struct error_info *error)
{
	char path[SCHEMA_NAME_MAX + 48], type_text[24], expected[64];
	schema_row_value_path(path, sizeof path, property, element);
	if (element >= 0)   /* a vector's element */
		return schema_row_type_mismatch(path,
				     value->kind != SCAN_INTEGER && value->kind != SCAN_REAL
					     ? "a number (vector elements are f32)"
					     : "a number that fits f32",
				     scan, value, error);
	schema_type_format(type, type_text, sizeof type_text);
	if (value->kind != SCAN_ARRAY)
		return schema_row_type_mismatch(path, type_text, scan, value, error);
	snprintf(expected, sizeof expected, "%s (%u numbers)", type_text, (unsigned)type->dimension);
	return error_info_set(error, -EINVAL, "%s: expected %s, got %zu elements", path, expected, value->count);
}

static int render_typed(struct buf *out, const struct schema_type *type, const struct schema_scan *scan,
			const struct scan_value *value, const char *property, struct error_info *error)
{
	int rc;
	if (schema_kind_is_scalar(type->kind))
		return render_scalar(out, type->kind, scan, value, property, -1, error);
	if (value->kind != SCAN_ARRAY || (type->kind == SCHEMA_VECTOR && value->count != type->dimension))
		return typed_mismatch(type, scan, value, property, -1, error);
	if ((rc = schema_put(out, "[", 1)))
		return rc;
	for (size_t i = 0; i < value->count; i++) {
		const struct scan_value *element = &scan->elements[value->first + i];
		if (i && (rc = schema_put(out, ",", 1)))
			return rc;
		if (type->kind == SCHEMA_LIST) {
			rc = render_scalar(out, type->element, scan, element, property, (long)i, error);
		} else if (element->kind != SCAN_INTEGER && element->kind != SCAN_REAL) {
			rc = typed_mismatch(type, scan, element, property, (long)i, error);
		} else {
			float number = (float)(element->kind == SCAN_INTEGER ? (double)element->integer : element->real);
			rc = isinf(number) || isnan(number) ? typed_mismatch(type, scan, element, property, (long)i, error)
							    : schema_render_decimal(out, (double)number, true);
		}
		if (rc)
			return rc;
	}
	return schema_put(out, "]", 1);
}

/* ---- ids ------------------------------------------------------------------------------ */

/* what: "id", "from", "to" or "the id derived from the key". */
static int check_id_text(const char *what, const char *text, size_t length, struct error_info *error)
{
	if (length == 0)
		return error_info_set(error, -EINVAL, "%s must not be empty", what);
	if (length > SCHEMA_ID_MAX)
		return error_info_set(error, -EINVAL, "%s is %zu bytes long, more than the limit of %d", what,
				      length, SCHEMA_ID_MAX);
	if (memchr(text, '\n', length))
		return error_info_set(error, -EINVAL, "%s must not contain a newline", what);
	/* ids are file names under graph/ and adjacency keys end an id with 0x00 (docs/FORMAT.md §12.1) */
	if (memchr(text, 0, length))
		return error_info_set(error, -EINVAL, "%s must not contain a NUL character (\\u0000)", what);
	return 0;
}

/* A string-valued id field (id, from, to) copied into out after its checks. */
int schema_row_take_id_field(const struct schema_scan *scan, const struct scan_value *value, const char *field,
			 struct buf *out, struct error_info *error)
{
	char described[DESCRIBED_MAX], what[16];
	if (value->kind != SCAN_STRING) {
		describe(scan, value, described, sizeof described);
		return error_info_set(error, -EINVAL, "\"%s\" must be a string, got %s", field, described);
	}
	size_t length;
	const char *text = schema_scan_text(scan, value, &length);
	if (length && length <= SCHEMA_ID_MAX && !memchr(text, '\n', length) && !memchr(text, 0, length))
		return buf_append(out, text, length);   /* the common case, without building a message's words */
	snprintf(what, sizeof what, "\"%s\"", field);
	int rc = check_id_text(what, text, length, error);
	return rc ? rc : buf_append(out, text, length);
}

int schema_row_assign_ulid(struct buf *out)
{
	struct ulid id;
	char text[ULID_TEXT_SIZE];
	ulid_new(&id);
	return buf_append_string(out, ulid_format(&id, text));
}

/*
 * The id a key derives, from the values already rendered into properties
 * (spans): a single string key as its text, anything else as the row
 * renders it, a key of several properties as a JSON list of them.
 */
static int derive_id(const struct schema *schema, const struct schema_scan *scan, const struct buf *properties,
		     struct buf *out, struct error_info *error)
{
	bool in_list = schema->key_count > 1;
	int rc = in_list ? buf_append(out, "[", 1) : 0;
	for (size_t i = 0; rc == 0 && i < schema->key_count; i++) {
		size_t position = (size_t)(schema_find_property(schema, schema->key[i]) - schema->properties);
		size_t slot = scan->slots[position];
		const struct scan_value *value = slot ? &scan->fields[slot - 1].value : NULL;
		if (!value || value->kind == SCAN_NULL || value->kind == SCAN_ARRAY || value->kind == SCAN_OBJECT)
			return error_info_set(error, -EINVAL, "key property \"%s\" is missing (the id derives from it)",
					      schema->key[i]);
		if (i)
			rc = buf_append(out, ",", 1);
		if (rc == 0 && !in_list && value->kind == SCAN_STRING) {
			size_t length;
			const char *text = schema_scan_text(scan, value, &length);
			rc = buf_append(out, text, length);
		} else if (rc == 0) {
			size_t start = scan->spans[2 * position], end = scan->spans[2 * position + 1];
			rc = buf_append(out, properties->data + start, end - start);
		}
	}
	if (rc == 0 && in_list)
		rc = buf_append(out, "]", 1);
	if (rc == 0)
		rc = check_id_text("the id derived from the key", (const char *)out->data, out->size, error);
	return rc;
}

/* ---- directives and deletes ------------------------------------------------------------ */

int schema_row_check_directive(const struct scan_field *field, bool allow_delete, struct error_info *error)
{
	char quoted[SCHEMA_SNIPPET_MAX * 6 + 8];
	bool patch = schema_row_key_is(field, "@patch", 6);
	if (!patch && !schema_row_key_is(field, "@delete", 7)) {
		schema_row_quote_key(field, quoted, sizeof quoted);
		return error_info_set(error, -EINVAL, "unknown directive '%s' (the directives are \"@delete\" and \"@patch\")",
				      quoted);
	}
	if (!allow_delete)
		return error_info_set(error, -EINVAL, "\"%s\" is only allowed when appending to a table (a merge)",
				      patch ? "@patch" : "@delete");
	return 0;
}

bool schema_row_directive_is_patch(const struct schema_scan *scan, size_t directive_slot)
{
	return schema_row_key_is(&scan->fields[directive_slot - 1], "@patch", 6);
}

/* {"id":"…","@patch":true, properties…}: the id, checked; the properties are the writer's to
 * merge into the current row (store_writer.c), which is then parsed whole. */
int schema_row_parse_patch(const struct schema_scan *scan, size_t patch_slot, size_t id_slot, struct schema_row *row,
			   struct error_info *error)
{
	char described[DESCRIBED_MAX];
	const struct scan_value *flag = &scan->fields[patch_slot - 1].value;
	if (flag->kind != SCAN_TRUE) {
		describe(scan, flag, described, sizeof described);
		return error_info_set(error, -EINVAL, "\"@patch\" must be true, got %s", described);
	}
	if (!id_slot)
		return error_info_set(error, -EINVAL, "a patch line needs the \"id\" of the row to change");
	int rc = schema_row_take_id_field(scan, &scan->fields[id_slot - 1].value, "id", &row->id, error);
	row->is_patch = rc == 0;
	return rc;
}

/* {"id":"…","@delete":true} or {"id":"…","@delete":"detach"}: nothing else (fields slot - 1). */
int schema_row_parse_delete(const struct schema_scan *scan, size_t delete_slot, size_t id_slot, struct schema_row *row,
			struct error_info *error)
{
	char described[DESCRIBED_MAX];
	const struct scan_value *flag = &scan->fields[delete_slot - 1].value;
	size_t length = 0;
	const char *text = flag->kind == SCAN_STRING ? schema_scan_text(scan, flag, &length) : NULL;
	bool detach = text && length == 6 && !memcmp(text, "detach", 6);
	if (flag->kind != SCAN_TRUE && !detach) {
		describe(scan, flag, described, sizeof described);
		return error_info_set(error, -EINVAL, "\"@delete\" must be true or \"detach\", got %s", described);
	}
	if (!id_slot)
		return error_info_set(error, -EINVAL, "a delete line needs the \"id\" of the row to delete");
	for (size_t i = 0; i < scan->field_count; i++) {
		if (i + 1 != id_slot && i + 1 != delete_slot) {
			schema_row_quote_key(&scan->fields[i], described, sizeof described);
			return error_info_set(error, -EINVAL,
					      "a delete line has only \"id\" and \"@delete\", found '%s'", described);
		}
	}
	int rc = schema_row_take_id_field(scan, &scan->fields[id_slot - 1].value, "id", &row->id, error);
	row->is_delete = rc == 0;
	row->is_detach = rc == 0 && detach;
	return rc;
}

/* ---- rows of a declared schema ---------------------------------------------------------- */

/* The position of the property named key, trying hint first (rows tend to follow the schema order); -1 if none. */
static long find_property_at(const struct schema *schema, const char *key, size_t length, size_t hint)
{
	if (hint < schema->property_count && schema_row_name_equals(schema->properties[hint].name, key, length))
		return (long)hint;
	for (size_t i = 0; i < schema->property_count; i++)
		if (schema_row_name_equals(schema->properties[i].name, key, length))
			return (long)i;
	return -1;
}

/* Which field holds id, the endpoints, the directive and each property (slot = index + 1). */
/* Invariant 1's first step: every key names id, an endpoint, a directive or a property, once. */
static int assign_slots(const struct schema *schema, struct schema_scan *scan, bool allow_delete,
			struct row_slots *slots, struct error_info *error)
{
	bool edge = schema->kind == SCHEMA_EDGE;
	size_t hint = 0;
	char quoted[SCHEMA_SNIPPET_MAX * 6 + 8];
	int rc;
	for (size_t i = 0; i < scan->field_count; i++) {
		const struct scan_field *field = &scan->fields[i];
		size_t *slot;
		if (schema_row_key_is(field, "id", 2)) {
			slot = &slots->id;
		} else if (field->key_length && field->key[0] == '@') {
			if ((rc = schema_row_check_directive(field, allow_delete, error)))
				return rc;
			slot = &slots->directive;
		} else if (schema_row_key_is(field, "from", 4) || schema_row_key_is(field, "to", 2)) {
			if (!edge)
				return error_info_set(error, -EINVAL, "'%s' is only for edge rows (this is a node table)",
						      field->key_length == 4 ? "from" : "to");
			slot = field->key_length == 4 ? &slots->from : &slots->to;
		} else {
			long position = find_property_at(schema, field->key, field->key_length, hint);
			if (position < 0) {
				schema_row_quote_key(field, quoted, sizeof quoted);
				return error_info_set(error, -EINVAL,
						      "unknown property '%s' (add it to schema/<Name>.json first)", quoted);
			}
			slot = &scan->slots[position];
			hint = (size_t)position + 1;
		}
		if (*slot)
			return SCHEMA_SCAN_DECLINED; /* a repeated key (invariant 2) */
		*slot = i + 1;
	}
	return 0;
}

/* The properties in schema order as ,"p":v… into out, each value's span noted. */
static int render_properties(const struct schema *schema, struct schema_scan *scan, struct buf *out,
			     struct error_info *error)
{
	int rc;
	for (size_t i = 0; i < schema->property_count; i++) {
		const struct schema_property *property = &schema->properties[i];
		const struct scan_field *field = scan->slots[i] ? &scan->fields[scan->slots[i] - 1] : NULL;
		if (!field || field->value.kind == SCAN_NULL) {
			if (!property->nullable)
				return error_info_set(error, -EINVAL, "property \"%s\" is missing and not nullable",
						      property->name);
			continue;
		}
		if ((rc = schema_row_put_property_name(out, field->key, field->key_length)))   /* the key is the name */
			return rc;
		scan->spans[2 * i] = out->size;
		if ((rc = render_typed(out, &property->type, scan, &field->value, property->name, error)))
			return rc;
		scan->spans[2 * i + 1] = out->size;
	}
	return 0;
}

static int take_endpoint(const struct schema_scan *scan, size_t slot, const char *field, struct buf *out,
			 struct error_info *error)
{
	if (!slot)
		return error_info_set(error, -EINVAL, "edge rows need \"%s\" (the id of the node the edge %s)", field,
				      !strcmp(field, "from") ? "starts at" : "ends at");
	return schema_row_take_id_field(scan, &scan->fields[slot - 1].value, field, out, error);
}

/* The row's id (given, derived or assigned) and endpoints. */
static int row_identity(const struct schema *schema, const struct schema_scan *scan, const struct row_slots *slots,
			const struct buf *properties, struct schema_row *row, struct error_info *error)
{
	char given_text[SCHEMA_SNIPPET_MAX * 6 + 8], derived_text[SCHEMA_SNIPPET_MAX * 6 + 8];
	const struct scan_value *given = slots->id ? &scan->fields[slots->id - 1].value : NULL;
	int rc;
	if (schema->key_count == 0) {
		rc = given ? schema_row_take_id_field(scan, given, "id", &row->id, error) : schema_row_assign_ulid(&row->id);
	} else {
		struct buf given_id;
		buf_init(&given_id);
		rc = given ? schema_row_take_id_field(scan, given, "id", &given_id, error) : 0;
		if (rc == 0)
			rc = derive_id(schema, scan, properties, &row->id, error);
		if (rc == 0 && given && (given_id.size != row->id.size || memcmp(given_id.data, row->id.data, row->id.size))) {
			schema_snippet((const char *)given_id.data, given_id.size, given_text, sizeof given_text);
			schema_snippet((const char *)row->id.data, row->id.size, derived_text, sizeof derived_text);
			rc = error_info_set(error, -EINVAL,
					    "\"id\" is \"%s\" but the key gives \"%s\" (omit \"id\" or make it agree)",
					    given_text, derived_text);
		}
		buf_free(&given_id);
	}
	if (rc == 0 && schema->kind == SCHEMA_EDGE &&
	    (rc = take_endpoint(scan, slots->from, "from", &row->from, error)) == 0)
		rc = take_endpoint(scan, slots->to, "to", &row->to, error);
	return rc;
}

/* ---- lines already canonical (invariant 4) ------------------------------------------ */

/* The bytes a value takes when written without whitespace, from the scan; 0 for one this test leaves alone. */
static size_t compact_length(const struct schema_scan *scan, const struct scan_value *value, bool element)
{
	switch (value->kind) {
	case SCAN_STRING:
		return value->escaped ? 0 : value->length + 2;
	case SCAN_INTEGER:
	case SCAN_REAL:
		return value->text ? value->length : 0;
	case SCAN_TRUE:
		return 4;
	case SCAN_FALSE:
		return 5;
	case SCAN_ARRAY: {
		if (element)
			return 0;
		size_t total = 2 + (value->count ? value->count - 1 : 0);
		for (size_t i = 0; i < value->count; i++) {
			size_t length = compact_length(scan, &scan->elements[value->first + i], true);
			if (length == 0)
				return 0;
			total += length;
		}
		return total;
	}
	default:
		return 0;
	}
}

/* The integer as written is what render_integer_value writes: anything but "-0" (JSON has no leading zeros). */
static bool integer_written_canonically(const struct scan_value *value)
{
	return value->text && (value->integer != 0 || value->length == 1);
}

/* True if render_scalar would accept value as kind and write exactly its text. */
static bool scalar_written_canonically(enum schema_type_kind kind, const struct scan_value *value)
{
	int64_t exact = (int64_t)1 << 53;
	switch (kind) {
	case SCHEMA_STRING:
		return value->kind == SCAN_STRING && !value->escaped;
	case SCHEMA_BOOL:
		return value->kind == SCAN_TRUE || value->kind == SCAN_FALSE;
	case SCHEMA_I64:
		return value->kind == SCAN_INTEGER && integer_written_canonically(value);
	case SCHEMA_F64:
		if (value->kind == SCAN_INTEGER)
			return value->integer >= -exact && value->integer <= exact && integer_written_canonically(value);
		return value->kind == SCAN_REAL && isfinite(value->real) && value->canonical_text && value->text;
	case SCHEMA_DATE:
	case SCHEMA_DATETIME:
		if (value->kind != SCAN_STRING || value->escaped)
			return false;
		return kind == SCHEMA_DATE ? schema_date_is_valid(value->text, value->length)
					   : schema_datetime_is_valid(value->text, value->length);
	default:
		return false;
	}
}

/* True if render_typed would accept value as type and write exactly its text. */
static bool value_written_canonically(const struct schema_type *type, const struct schema_scan *scan,
				      const struct scan_value *value)
{
	if (schema_kind_is_scalar(type->kind))
		return scalar_written_canonically(type->kind, value);
	if (type->kind != SCHEMA_LIST || value->kind != SCAN_ARRAY)
		return false;   /* vectors render their elements as f32: always through the renderer */
	for (size_t i = 0; i < value->count; i++)
		if (!scalar_written_canonically(type->element, &scan->elements[value->first + i]))
			return false;
	return true;
}

/*
 * Invariant 4: true if the node line of `size` bytes the fields in scan came
 * from is exactly the canonical line row_from_fields would render (without
 * its "\n"): its given id first, then a field per non-null property in
 * schema order, each value canonical for its type, and its length the sum of
 * its tokens' (so no whitespace anywhere).
 */
static bool line_is_canonical(const struct schema *schema, const struct schema_scan *scan,
			      const struct row_slots *slots, size_t size)
{
	if (slots->id != 1 || slots->directive || slots->from || slots->to)
		return false;
	const struct scan_value *id = &scan->fields[0].value;
	if (id->kind != SCAN_STRING || id->escaped)
		return false;
	size_t next_field = 1;
	for (size_t i = 0; i < schema->property_count; i++) {
		const struct schema_property *property = &schema->properties[i];
		if (!scan->slots[i]) {
			if (!property->nullable)
				return false;
			continue;
		}
		if (scan->slots[i] != next_field + 1)
			return false;
		if (!value_written_canonically(&property->type, scan, &scan->fields[next_field].value))
			return false;
		next_field++;
	}
	if (next_field != scan->field_count)
		return false;
	size_t total = 2 + (scan->field_count - 1);   /* the braces and the commas */
	for (size_t i = 0; i < scan->field_count; i++) {
		size_t length = compact_length(scan, &scan->fields[i].value, false);
		if (length == 0)
			return false;
		total += scan->fields[i].key_length + 3 + length;   /* "key": */
	}
	return total == size;
}

/*
 * A row of a declared schema from the fields in scan. 0 (row filled),
 * SCHEMA_SCAN_DECLINED (a repeated key), -EINVAL with error, or -ENOMEM.
 */
static int row_from_fields(const struct schema *schema, struct schema_scan *scan, bool allow_delete,
			   const char *line, size_t line_size, struct schema_row *row, struct error_info *error)
{
	struct row_slots slots = { 0 };
	bool edge = schema->kind == SCHEMA_EDGE;
	size_t most = schema->property_count > scan->field_count ? schema->property_count : scan->field_count;
	int rc;
	if ((rc = schema_row_scan_reserve(scan, most, schema->property_count)) ||
	    (rc = assign_slots(schema, scan, allow_delete, &slots, error)))
		return rc;
	if (slots.directive && schema_row_directive_is_patch(scan, slots.directive))
		return schema_row_parse_patch(scan, slots.directive, slots.id, row, error);
	if (slots.directive)
		return schema_row_parse_delete(scan, slots.directive, slots.id, row, error);
	/* Invariant 4: a line that is its own canonical form needs no rendering, only its id checked. */
	if (line && !edge && schema->key_count == 0 && line_is_canonical(schema, scan, &slots, line_size)) {
		if ((rc = schema_row_take_id_field(scan, &scan->fields[0].value, "id", &row->id, error)) ||
		    (rc = room(&row->canonical, line_size + 1)))
			return rc;
		memcpy(row->canonical.data + row->canonical.size, line, line_size);
		row->canonical.data[row->canonical.size + line_size] = '\n';
		row->canonical.size += line_size + 1;
		return 0;
	}
	if (schema->key_count) {
		/* the id derives from the rendered properties: render them first, assemble after */
		buf_reset(&scan->properties);
		if ((rc = render_properties(schema, scan, &scan->properties, error)) ||
		    (rc = row_identity(schema, scan, &slots, &scan->properties, row, error)) ||
		    (rc = render_row_head(&row->canonical, row, edge)) ||
		    (rc = schema_put(&row->canonical, scan->properties.data, scan->properties.size)))
			return rc;
		return schema_put(&row->canonical, "}\n", 2);
	}
	/*
	 * Without a key the id is known before the properties, so the row is
	 * rendered in place; a property's error still comes before an id's
	 * (invariant 1): the id's error waits until the properties rendered.
	 */
	struct error_info identity_error;
	if (error)
		error_info_clear(&identity_error);
	int identity = row_identity(schema, scan, &slots, NULL, row, error ? &identity_error : NULL);
	if (identity == -ENOMEM)
		return identity;
	struct buf *out = &row->canonical;
	const struct scan_value *given = slots.id ? &scan->fields[slots.id - 1].value : NULL;
	if (identity == 0 && (rc = schema_row_render_head_given(out, scan, given, row, edge)))
		return rc;
	if ((rc = render_properties(schema, scan, out, error)))
		return rc;
	if (identity) {
		if (error)
			*error = identity_error;
		return identity;
	}
	return schema_put(out, "}\n", 2);
}

/* The fields of a line the tokenizer declined, from jansson (which refuses what is not JSON). */
int schema_row_tree_fields(const char *line, size_t size, struct schema_scan *scan, json_t **object,
		       struct error_info *error)
{
	int rc = schema_load_object(line, size, object, error);
	if (rc == 0 && (rc = schema_scan_tree(scan, *object)) == -ENOMEM)
		error_info_set(error, -ENOMEM, "out of memory");
	return rc;
}

int schema_row_finish_parse(int rc, struct schema_row *row, struct error_info *error)
{
	if (rc == -ENOMEM && error && error->code != -ENOMEM)
		error_info_set(error, -ENOMEM, "out of memory");
	assert(rc <= 0); /* jansson's fields repeat no key */
	if (rc)
		schema_row_reset(row);
	return rc;
}

int schema_row_parse_tree(const struct schema *schema, const char *line, size_t size, bool allow_delete,
			  struct schema_row *row, struct error_info *error)
{
	struct schema_scan *scan;
	json_t *object = NULL;
	schema_row_reset(row);
	int rc = schema_row_scan_of(row, &scan);
	if (rc == 0 && (rc = schema_row_tree_fields(line, size, scan, &object, error)) == 0)
		rc = row_from_fields(schema, scan, allow_delete, NULL, 0, row, error);
	rc = schema_row_finish_parse(rc, row, error);
	json_decref(object);
	return rc;
}

int schema_row_parse(const struct schema *schema, const char *line, size_t size, bool allow_delete,
		     struct schema_row *row, struct error_info *error)
{
	struct schema_scan *scan;
	schema_row_reset(row);
	int rc = schema_row_scan_of(row, &scan);
	if (rc == 0 && (rc = schema_scan_line(scan, line, size)) == 0)
		rc = row_from_fields(schema, scan, allow_delete, line, size, row, NULL);
	if (rc == 0)
		return 0;
	if (rc == -ENOMEM)
		return schema_row_finish_parse(rc, row, error);
	/* declined or refused: jansson reads the line again and judges it (invariant 2) */
	return schema_row_parse_tree(schema, line, size, allow_delete, row, error);
}
