/*
 * schema_row — rows: one validator, one renderer and one inference over a
 * line's list of fields (schema_int.h). See schema.h for the API and
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
 * An inference moves through: open (no rows) -> fed (each accepted row may
 * append properties, widen types, and counts presence) -> finished (finish
 * produces a schema from the state; feeding may continue afterwards).
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
#define NEW_NAMES_MAX 64   /* new property names one tokenized row may bring (repeats found by comparison) */

/* Where the fields came from: the tokenizer may repeat keys, jansson never does. */
enum field_source { FROM_TOKENIZER, FROM_JANSSON };

/* ---- memory ---------------------------------------------------------------------- */

void schema_row_init(struct schema_row *row)
{
	buf_init(&row->canonical);
	buf_init(&row->id);
	buf_init(&row->from);
	buf_init(&row->to);
	row->is_delete = row->is_detach = false;
	row->scan = NULL;
}

void schema_row_free(struct schema_row *row)
{
	buf_free(&row->canonical);
	buf_free(&row->id);
	buf_free(&row->from);
	buf_free(&row->to);
	row->is_delete = row->is_detach = false;
	if (row->scan) {
		schema_scan_free(row->scan);
		free(row->scan);
		row->scan = NULL;
	}
}

static void row_reset(struct schema_row *row)
{
	buf_reset(&row->canonical);
	buf_reset(&row->id);
	buf_reset(&row->from);
	buf_reset(&row->to);
	row->is_delete = row->is_detach = false;
}

static int scan_of(struct schema_row *row, struct schema_scan **out)
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
static int scan_reserve(struct schema_scan *scan, size_t count, size_t properties)
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

/* buf_append with the common case (room left) inline. */
static inline int put(struct buf *out, const void *bytes, size_t size)
{
	if (out->capacity - out->size > size) {
		memcpy(out->data + out->size, bytes, size);
		out->size += size;
		return 0;
	}
	return buf_append(out, bytes, size);
}

/* buf_reserve with the common case (room left) inline. */
static inline int room(struct buf *out, size_t size)
{
	return out->capacity - out->size > size ? 0 : buf_reserve(out, size);
}

/* ,"name": */
static int put_property_name(struct buf *out, const char *name, size_t length)
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
		return put(out, "0", 1);
	if (value->text)
		return put(out, value->text, value->length);
	char text[24];
	int length = snprintf(text, sizeof text, "%lld", (long long)value->integer);
	return put(out, text, (size_t)length);
}

static int render_real_value(struct buf *out, const struct scan_value *value)
{
	char text[40], digits[24];
	size_t length;
	if (value->canonical_text)
		return put(out, value->text, value->length);
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
	return put(out, text, length);
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
static int render_untyped(struct buf *out, const struct schema_scan *scan, const struct scan_value *value)
{
	int rc;
	switch (value->kind) {
	case SCAN_STRING:
		return render_string_value(out, scan, value);
	case SCAN_TRUE:
		return put(out, "true", 4);
	case SCAN_FALSE:
		return put(out, "false", 5);
	case SCAN_INTEGER:
		return render_integer_value(out, value);
	case SCAN_REAL:
		return render_real_value(out, value);
	case SCAN_ARRAY:
		if ((rc = put(out, "[", 1)))
			return rc;
		for (size_t i = 0; i < value->count; i++) {
			if ((i && (rc = put(out, ",", 1))) ||
			    (rc = render_untyped(out, scan, &scan->elements[value->first + i])))
				return rc;
		}
		return put(out, "]", 1);
	default:
		assert(!"inference refuses objects and nulls before rendering");
		return -EINVAL;
	}
}

/* {"id":…[,"from":…,"to":…] from row's id and endpoints, appended to out. */
static int render_row_head(struct buf *out, const struct schema_row *row, bool edge)
{
	int rc;
	if ((rc = put(out, "{\"id\":", 6)) ||
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
static int render_head_given(struct buf *out, const struct schema_scan *scan, const struct scan_value *given,
			     const struct schema_row *row, bool edge)
{
	int rc;
	if (!given || edge)
		return render_row_head(out, row, edge);
	if ((rc = put(out, "{\"id\":", 6)))
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
static void value_path(char *out, size_t size, const char *property, long index)
{
	if (index < 0)
		snprintf(out, size, "property \"%s\"", property);
	else
		snprintf(out, size, "property \"%s\"[%ld]", property, index);
}

static int type_mismatch(const char *path, const char *expected, const struct schema_scan *scan,
			 const struct scan_value *value, struct error_info *error)
{
	char described[DESCRIBED_MAX];
	describe(scan, value, described, sizeof described);
	return error_info_set(error, -EINVAL, "%s: expected %s, got %s", path, expected, described);
}

/* A key as a NUL-terminated snippet for messages. */
static void quote_key(const struct scan_field *field, char *out, size_t size)
{
	schema_snippet(field->key, field->key_length, out, size);
}

static bool key_is(const struct scan_field *field, const char *name, size_t length)
{
	return field->key_length == length && !memcmp(field->key, name, length);
}

/* A schema property name (NUL-terminated) equals key[0..length). */
static bool name_equals(const char *name, const char *key, size_t length)
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
	value_path(path, sizeof path, property, index);
	if (kind == SCHEMA_F64 && value->kind == SCAN_REAL)
		return error_info_set(error, -EINVAL, "%s: NaN and infinities are not JSON numbers", path);
	return type_mismatch(path, expected[kind], scan, value, error);
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
			return value->kind == SCAN_TRUE ? put(out, "true", 4) : put(out, "false", 5);
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
	value_path(path, sizeof path, property, element);
	if (element >= 0)   /* a vector's element */
		return type_mismatch(path,
				     value->kind != SCAN_INTEGER && value->kind != SCAN_REAL
					     ? "a number (vector elements are f32)"
					     : "a number that fits f32",
				     scan, value, error);
	schema_type_format(type, type_text, sizeof type_text);
	if (value->kind != SCAN_ARRAY)
		return type_mismatch(path, type_text, scan, value, error);
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
	if ((rc = put(out, "[", 1)))
		return rc;
	for (size_t i = 0; i < value->count; i++) {
		const struct scan_value *element = &scan->elements[value->first + i];
		if (i && (rc = put(out, ",", 1)))
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
	return put(out, "]", 1);
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
static int take_id_field(const struct schema_scan *scan, const struct scan_value *value, const char *field,
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

static int assign_ulid(struct buf *out)
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

static int check_directive(const struct scan_field *field, bool allow_delete, struct error_info *error)
{
	char quoted[SCHEMA_SNIPPET_MAX * 6 + 8];
	if (!key_is(field, "@delete", 7)) {
		quote_key(field, quoted, sizeof quoted);
		return error_info_set(error, -EINVAL, "unknown directive '%s' (the only one is \"@delete\")", quoted);
	}
	if (!allow_delete)
		return error_info_set(error, -EINVAL,
				      "\"@delete\" is only allowed when appending to a table (a merge)");
	return 0;
}

/* {"id":"…","@delete":true} or {"id":"…","@delete":"detach"}: nothing else (fields slot - 1). */
static int parse_delete(const struct schema_scan *scan, size_t delete_slot, size_t id_slot, struct schema_row *row,
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
			quote_key(&scan->fields[i], described, sizeof described);
			return error_info_set(error, -EINVAL,
					      "a delete line has only \"id\" and \"@delete\", found '%s'", described);
		}
	}
	int rc = take_id_field(scan, &scan->fields[id_slot - 1].value, "id", &row->id, error);
	row->is_delete = rc == 0;
	row->is_detach = rc == 0 && detach;
	return rc;
}

/* ---- rows of a declared schema ---------------------------------------------------------- */

/* The position of the property named key, trying hint first (rows tend to follow the schema order); -1 if none. */
static long find_property_at(const struct schema *schema, const char *key, size_t length, size_t hint)
{
	if (hint < schema->property_count && name_equals(schema->properties[hint].name, key, length))
		return (long)hint;
	for (size_t i = 0; i < schema->property_count; i++)
		if (name_equals(schema->properties[i].name, key, length))
			return (long)i;
	return -1;
}

/* Which field holds id, the endpoints, the directive and each property (slot = index + 1). */
struct row_slots {
	size_t id, from, to, directive;
};

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
		if (key_is(field, "id", 2)) {
			slot = &slots->id;
		} else if (field->key_length && field->key[0] == '@') {
			if ((rc = check_directive(field, allow_delete, error)))
				return rc;
			slot = &slots->directive;
		} else if (key_is(field, "from", 4) || key_is(field, "to", 2)) {
			if (!edge)
				return error_info_set(error, -EINVAL, "'%s' is only for edge rows (this is a node table)",
						      field->key_length == 4 ? "from" : "to");
			slot = field->key_length == 4 ? &slots->from : &slots->to;
		} else {
			long position = find_property_at(schema, field->key, field->key_length, hint);
			if (position < 0) {
				quote_key(field, quoted, sizeof quoted);
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
		if ((rc = put_property_name(out, field->key, field->key_length)))   /* the key is the name */
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
	return take_id_field(scan, &scan->fields[slot - 1].value, field, out, error);
}

/* The row's id (given, derived or assigned) and endpoints. */
static int row_identity(const struct schema *schema, const struct schema_scan *scan, const struct row_slots *slots,
			const struct buf *properties, struct schema_row *row, struct error_info *error)
{
	char given_text[SCHEMA_SNIPPET_MAX * 6 + 8], derived_text[SCHEMA_SNIPPET_MAX * 6 + 8];
	const struct scan_value *given = slots->id ? &scan->fields[slots->id - 1].value : NULL;
	int rc;
	if (schema->key_count == 0) {
		rc = given ? take_id_field(scan, given, "id", &row->id, error) : assign_ulid(&row->id);
	} else {
		struct buf given_id;
		buf_init(&given_id);
		rc = given ? take_id_field(scan, given, "id", &given_id, error) : 0;
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
	if ((rc = scan_reserve(scan, most, schema->property_count)) ||
	    (rc = assign_slots(schema, scan, allow_delete, &slots, error)))
		return rc;
	if (slots.directive)
		return parse_delete(scan, slots.directive, slots.id, row, error);
	/* Invariant 4: a line that is its own canonical form needs no rendering, only its id checked. */
	if (line && !edge && schema->key_count == 0 && line_is_canonical(schema, scan, &slots, line_size)) {
		if ((rc = take_id_field(scan, &scan->fields[0].value, "id", &row->id, error)) ||
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
		    (rc = put(&row->canonical, scan->properties.data, scan->properties.size)))
			return rc;
		return put(&row->canonical, "}\n", 2);
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
	if (identity == 0 && (rc = render_head_given(out, scan, given, row, edge)))
		return rc;
	if ((rc = render_properties(schema, scan, out, error)))
		return rc;
	if (identity) {
		if (error)
			*error = identity_error;
		return identity;
	}
	return put(out, "}\n", 2);
}

/* The fields of a line the tokenizer declined, from jansson (which refuses what is not JSON). */
static int tree_fields(const char *line, size_t size, struct schema_scan *scan, json_t **object,
		       struct error_info *error)
{
	int rc = schema_load_object(line, size, object, error);
	if (rc == 0 && (rc = schema_scan_tree(scan, *object)) == -ENOMEM)
		error_info_set(error, -ENOMEM, "out of memory");
	return rc;
}

static int finish_parse(int rc, struct schema_row *row, struct error_info *error)
{
	if (rc == -ENOMEM && error && error->code != -ENOMEM)
		error_info_set(error, -ENOMEM, "out of memory");
	assert(rc <= 0); /* jansson's fields repeat no key */
	if (rc)
		row_reset(row);
	return rc;
}

int schema_row_parse_tree(const struct schema *schema, const char *line, size_t size, bool allow_delete,
			  struct schema_row *row, struct error_info *error)
{
	struct schema_scan *scan;
	json_t *object = NULL;
	row_reset(row);
	int rc = scan_of(row, &scan);
	if (rc == 0 && (rc = tree_fields(line, size, scan, &object, error)) == 0)
		rc = row_from_fields(schema, scan, allow_delete, NULL, 0, row, error);
	rc = finish_parse(rc, row, error);
	json_decref(object);
	return rc;
}

int schema_row_parse(const struct schema *schema, const char *line, size_t size, bool allow_delete,
		     struct schema_row *row, struct error_info *error)
{
	struct schema_scan *scan;
	row_reset(row);
	int rc = scan_of(row, &scan);
	if (rc == 0 && (rc = schema_scan_line(scan, line, size)) == 0)
		rc = row_from_fields(schema, scan, allow_delete, line, size, row, NULL);
	if (rc == 0)
		return 0;
	if (rc == -ENOMEM)
		return finish_parse(rc, row, error);
	/* declined or refused: jansson reads the line again and judges it (invariant 2) */
	return schema_row_parse_tree(schema, line, size, allow_delete, row, error);
}

/* ---- inference -------------------------------------------------------------------------- */

/* What is known of one inferred property besides its schema_property. */
struct inferred {
	bool typed;             /* a non-null value was seen */
	bool element_typed;     /* lists: a non-empty list was seen */
	bool big_integer;       /* an integer beyond +-2^53 was seen (inexact as f64) */
	uint64_t present;       /* rows where it was non-null */
};

struct schema_inference {
	struct schema schema;        /* node schema; types of untyped properties are placeholders */
	struct inferred *inferred;   /* parallel to schema.properties */
	size_t capacity;             /* allocated entries of both arrays */
	json_t *index;               /* property name -> integer position */
	uint64_t rows;               /* accepted non-delete rows */
};

int schema_inference_open(struct schema_inference **out)
{
	struct schema_inference *inference = calloc(1, sizeof *inference);
	*out = NULL;
	if (!inference)
		return -ENOMEM;
	schema_init(&inference->schema);
	inference->index = json_object();
	if (!inference->index) {
		free(inference);
		return -ENOMEM;
	}
	*out = inference;
	return 0;
}

void schema_inference_free(struct schema_inference *inference)
{
	if (!inference)
		return;
	schema_free(&inference->schema);
	free(inference->inferred);
	json_decref(inference->index);
	free(inference);
}

/* The inference state of one value, or of a property after merging. */
struct observation {
	struct schema_type type;
	bool typed, element_typed, big_integer;
};

static enum schema_type_kind scalar_kind(const struct scan_value *value)
{
	if (value->kind == SCAN_STRING)
		return SCHEMA_STRING;
	if (value->kind == SCAN_TRUE || value->kind == SCAN_FALSE)
		return SCHEMA_BOOL;
	return value->kind == SCAN_INTEGER ? SCHEMA_I64 : SCHEMA_F64;
}

static bool integer_is_big(const struct scan_value *value)
{
	int64_t limit = (int64_t)1 << 53;
	return value->kind == SCAN_INTEGER && (value->integer > limit || value->integer < -limit);
}

/* observe for a list or an object (cold for objects: their message). */
static int observe_list(const struct scan_field *field, const struct schema_scan *scan,
			const struct scan_value *value, struct observation *out, struct error_info *error)
{
	char path[SCHEMA_NAME_MAX + 48], name[SCHEMA_NAME_MAX + 1];
	int name_length = field ? (int)field->key_length : 0;   /* names are copied only for a message */
	if (value->kind == SCAN_OBJECT)
		return error_info_set(error, -EINVAL,
				      "property \"%.*s\": objects are not supported as values (use a string, "
				      "or a list of scalars)",
				      name_length, field ? field->key : "");
	out->type.kind = SCHEMA_LIST;
	for (size_t i = 0; i < value->count; i++) {
		const struct scan_value *element = &scan->elements[value->first + i];
		if (element->kind == SCAN_NULL || element->kind == SCAN_ARRAY || element->kind == SCAN_OBJECT) {
			snprintf(name, sizeof name, "%.*s", name_length, field ? field->key : "");
			value_path(path, sizeof path, name, (long)i);
			return type_mismatch(path, "a string, number or boolean (list elements)", scan, element, error);
		}
		enum schema_type_kind kind = scalar_kind(element);
		out->big_integer |= integer_is_big(element);
		if (!out->element_typed) {
			out->type.element = kind;
			out->element_typed = true;
		} else if (out->type.element != kind) {
			bool numbers = (out->type.element == SCHEMA_I64 || out->type.element == SCHEMA_F64) &&
				       (kind == SCHEMA_I64 || kind == SCHEMA_F64);
			if (!numbers) {
				snprintf(name, sizeof name, "%.*s", name_length, field ? field->key : "");
				value_path(path, sizeof path, name, (long)i);
				return type_mismatch(path, schema_scalar_name(out->type.element), scan, element, error);
			}
			out->type.element = SCHEMA_F64;
		}
	}
	out->type.element = out->element_typed ? out->type.element : SCHEMA_STRING;
	return 0;
}

/* What a (non-null) value says of its property's type (field: for messages, may be NULL). 0 or -EINVAL with error. */
static int observe(const struct scan_field *field, const struct schema_scan *scan, const struct scan_value *value,
		   struct observation *out, struct error_info *error)
{
	memset(out, 0, sizeof *out);
	out->typed = true;
	if (value->kind == SCAN_ARRAY || value->kind == SCAN_OBJECT)
		return observe_list(field, scan, value, out, error);
	out->type.kind = scalar_kind(value);
	out->big_integer = integer_is_big(value);
	return 0;
}

/* Combines what was known (current) with a new value's observation (field: for messages, may be NULL). */
static int merge_observation(const struct scan_field *field, const struct observation *current,
			     const struct observation *seen, struct observation *out, struct error_info *error)
{
	int name_length = field ? (int)field->key_length : 0;
	const char *name = field ? field->key : "";
	char known[24], found[24];
	enum schema_type_kind have = current->type.kind, got = seen->type.kind;
	bool numbers = (have == SCHEMA_I64 || have == SCHEMA_F64) && (got == SCHEMA_I64 || got == SCHEMA_F64);
	*out = *current;
	out->big_integer |= seen->big_integer;
	if (!current->typed) {
		*out = *seen;
	} else if (numbers) {
		out->type.kind = have == got ? have : SCHEMA_F64;
	} else if (have == SCHEMA_LIST && got == SCHEMA_LIST) {
		if (!seen->element_typed) {
			/* an empty list fits any list */
		} else if (!current->element_typed) {
			out->type.element = seen->type.element;
			out->element_typed = true;
		} else if (current->type.element != seen->type.element) {
			bool element_numbers =
				(current->type.element == SCHEMA_I64 || current->type.element == SCHEMA_F64) &&
				(seen->type.element == SCHEMA_I64 || seen->type.element == SCHEMA_F64);
			if (!element_numbers)
				goto conflict;
			out->type.element = SCHEMA_F64;
		}
	} else if (have != got) {
		goto conflict;
	}
	bool f64 = out->type.kind == SCHEMA_F64 || (out->type.kind == SCHEMA_LIST && out->type.element == SCHEMA_F64);
	if (f64 && out->big_integer)
		return error_info_set(error, -EINVAL,
				      "property \"%.*s\" mixes decimals with integers beyond 2^53, which f64 "
				      "cannot hold exactly (declare its type in schema/<Name>.json)",
				      name_length, name);
	return 0;
conflict:
	if (current->type.kind == SCHEMA_LIST && !current->element_typed)
		snprintf(known, sizeof known, "a list");
	else
		schema_type_format(&current->type, known, sizeof known);
	if (seen->type.kind == SCHEMA_LIST && !seen->element_typed)
		snprintf(found, sizeof found, "a list");
	else
		schema_type_format(&seen->type, found, sizeof found);
	return error_info_set(error, -EINVAL, "property \"%.*s\": expected %s (as in earlier rows), got %s",
			      name_length, name, known, found);
}

static struct observation current_observation(const struct schema_inference *inference, size_t position)
{
	struct observation current = {
		.type = inference->schema.properties[position].type,
		.typed = inference->inferred[position].typed,
		.element_typed = inference->inferred[position].element_typed,
		.big_integer = inference->inferred[position].big_integer,
	};
	return current;
}

/*
 * True if seeing `seen` leaves `current` as it is (and cannot fail): the
 * common case of a scalar of the type already known, not a big integer.
 */
static bool observation_is_unchanged(const struct observation *current, const struct observation *seen)
{
	return current->typed && schema_kind_is_scalar(seen->type.kind) && seen->type.kind == current->type.kind &&
	       !seen->big_integer;
}

static int inference_reserve(struct schema_inference *inference, size_t wanted)
{
	if (wanted <= inference->capacity)
		return 0;
	size_t capacity = inference->capacity ? inference->capacity * 2 : 16;
	while (capacity < wanted)
		capacity *= 2;
	struct schema_property *properties = realloc(inference->schema.properties, capacity * sizeof *properties);
	if (!properties)
		return -ENOMEM;
	inference->schema.properties = properties;
	struct inferred *inferred = realloc(inference->inferred, capacity * sizeof *inferred);
	if (!inferred)
		return -ENOMEM;
	inference->inferred = inferred;
	inference->capacity = capacity;
	return 0;
}

/* The position of an inferred property, trying hint first; -1 if none. */
static long find_inferred(const struct schema_inference *inference, const char *key, size_t length, size_t hint)
{
	if (hint < inference->schema.property_count &&
	    name_equals(inference->schema.properties[hint].name, key, length))
		return (long)hint;
	json_t *position = json_object_getn(inference->index, key, length);
	return position ? (long)json_integer_value(position) : -1;
}

/* Folds a value into the property at position (it was checked before anything changed). */
static void apply_value(struct schema_inference *inference, size_t position, const struct schema_scan *scan,
			const struct scan_value *value)
{
	struct observation seen, merged, current = current_observation(inference, position);
	int rc = observe(NULL, scan, value, &seen, NULL);
	if (rc == 0 && observation_is_unchanged(&current, &seen)) {
		inference->inferred[position].present++;
		return;
	}
	if (rc == 0)
		rc = merge_observation(NULL, &current, &seen, &merged, NULL);
	assert(rc == 0);
	(void)rc;
	inference->schema.properties[position].type = merged.type;
	inference->inferred[position].typed = merged.typed;
	inference->inferred[position].element_typed = merged.element_typed;
	inference->inferred[position].big_integer = merged.big_integer;
	inference->inferred[position].present++;
}

static int edge_needs_schema(struct error_info *error)
{
	return error_info_set(error, -EINVAL,
			      "edge tables need a schema: write schema/<Name>.json with kind, from and to first");
}

/*
 * Every key valid and once, every value agreeing with what is known; the
 * fields of new names listed in scan->new_fields. Repeats among the
 * tokenizer's fields decline (invariant 2).
 */
static int inference_check(struct schema_inference *inference, struct schema_scan *scan, enum field_source source,
			   bool allow_delete, struct row_slots *slots, size_t *new_count, struct error_info *error)
{
	char quoted[SCHEMA_SNIPPET_MAX * 6 + 8];
	size_t hint = 0;
	int rc;
	*new_count = 0;
	for (size_t i = 0; i < scan->field_count; i++) {
		const struct scan_field *field = &scan->fields[i];
		if (field->key_length && field->key[0] == '@') {
			if ((rc = check_directive(field, allow_delete, error)))
				return rc;
			if (slots->directive)
				return SCHEMA_SCAN_DECLINED;
			slots->directive = i + 1;
			continue;
		}
		if (key_is(field, "id", 2)) {
			if (slots->id)
				return SCHEMA_SCAN_DECLINED;
			slots->id = i + 1;
			continue;
		}
		/* known names were checked when they were added */
		long position = find_inferred(inference, field->key, field->key_length, hint);
		if (position < 0 && (key_is(field, "from", 4) || key_is(field, "to", 2)))
			return edge_needs_schema(error);
		if (position < 0 && !schema_name_is_valid(field->key, field->key_length)) {
			quote_key(field, quoted, sizeof quoted);
			return error_info_set(error, -EINVAL,
					      "invalid property name '%s' (names match [A-Za-z_][A-Za-z0-9_]{0,127})",
					      quoted);
		}
		if (position >= 0) {
			if (scan->slots[position])
				return SCHEMA_SCAN_DECLINED;
			scan->slots[position] = i + 1;
			hint = (size_t)position + 1;
		} else {
			if (source == FROM_TOKENIZER) {
				/* repeats among new names by comparison: rows bringing many go to jansson */
				if (*new_count == NEW_NAMES_MAX)
					return SCHEMA_SCAN_DECLINED;
				for (size_t j = 0; j < *new_count; j++)
					if (key_is(&scan->fields[scan->new_fields[j]], field->key, field->key_length))
						return SCHEMA_SCAN_DECLINED;
			}
			scan->new_fields[(*new_count)++] = i;
		}
		if (field->value.kind == SCAN_NULL)
			continue;
		struct observation seen, merged, current = { .typed = false };
		if (position >= 0)
			current = current_observation(inference, (size_t)position);
		if ((rc = observe(field, scan, &field->value, &seen, error)) ||
		    (!observation_is_unchanged(&current, &seen) &&
		     (rc = merge_observation(field, &current, &seen, &merged, error))))
			return rc;
	}
	return 0;
}

/* Adds the new names, then folds in every value. 0 or -ENOMEM (the inference as it was). */
static int inference_apply(struct schema_inference *inference, const struct schema_scan *scan, size_t known,
			   size_t new_count)
{
	struct schema *schema = &inference->schema;
	for (size_t j = 0; j < new_count; j++) {
		const struct scan_field *field = &scan->fields[scan->new_fields[j]];
		size_t position = schema->property_count;
		if (json_object_setn_new(inference->index, field->key, field->key_length,
					 json_integer((json_int_t)position))) {
			for (size_t i = known; i < position; i++)
				json_object_del(inference->index, schema->properties[i].name);
			schema->property_count = known;
			return -ENOMEM;
		}
		struct schema_property *property = &schema->properties[position];
		memset(property, 0, sizeof *property);
		memcpy(property->name, field->key, field->key_length);
		property->nullable = true;
		memset(&inference->inferred[position], 0, sizeof inference->inferred[position]);
		schema->property_count++;
	}
	for (size_t i = 0; i < known; i++) {
		const struct scan_value *value = scan->slots[i] ? &scan->fields[scan->slots[i] - 1].value : NULL;
		if (value && value->kind != SCAN_NULL)
			apply_value(inference, i, scan, value);
	}
	for (size_t j = 0; j < new_count; j++) {
		const struct scan_value *value = &scan->fields[scan->new_fields[j]].value;
		if (value->kind != SCAN_NULL)
			apply_value(inference, known + j, scan, value);
	}
	inference->rows++;
	return 0;
}

/* ,"name":value for a present, non-null field. */
static int render_inferred(struct buf *out, const struct schema_scan *scan, const struct scan_field *field)
{
	if (!field || field->value.kind == SCAN_NULL)
		return 0;
	int rc = put_property_name(out, field->key, field->key_length);
	return rc ? rc : render_untyped(out, scan, &field->value);
}

/*
 * A row of an inferred schema from the fields in scan; the inference learns
 * from it only when it is accepted. 0, SCHEMA_SCAN_DECLINED, -EINVAL with
 * error, -ENOMEM.
 */
static int inference_row_from_fields(struct schema_inference *inference, struct schema_scan *scan,
				     enum field_source source, bool allow_delete, struct schema_row *row,
				     struct error_info *error)
{
	size_t known = inference->schema.property_count, new_count;
	struct row_slots slots = { 0 };
	int rc;
	if ((rc = scan_reserve(scan, known > scan->field_count ? known : scan->field_count, known)))
		return rc;
	/* an endpoint anywhere in the line is the line's first error (inference_check finds it too,
	 * but maybe after another: the tokenizer's fields go to jansson on any error) */
	for (size_t i = 0; source == FROM_JANSSON && i < scan->field_count; i++)
		if (key_is(&scan->fields[i], "from", 4) || key_is(&scan->fields[i], "to", 2))
			return edge_needs_schema(error);
	if ((rc = inference_check(inference, scan, source, allow_delete, &slots, &new_count, error)))
		return rc;
	if (slots.directive)
		return parse_delete(scan, slots.directive, slots.id, row, error);
	const struct scan_value *given = slots.id ? &scan->fields[slots.id - 1].value : NULL;
	if ((rc = given ? take_id_field(scan, given, "id", &row->id, error) : assign_ulid(&row->id)))
		return rc;
	/* Render before the inference changes: known properties in their order, then this row's new ones in its order. */
	struct buf *out = &row->canonical;
	if ((rc = render_head_given(out, scan, given, row, false)))
		return rc;
	for (size_t i = 0; i < known; i++)
		if ((rc = render_inferred(out, scan, scan->slots[i] ? &scan->fields[scan->slots[i] - 1] : NULL)))
			return rc;
	for (size_t j = 0; j < new_count; j++)
		if ((rc = render_inferred(out, scan, &scan->fields[scan->new_fields[j]])))
			return rc;
	if ((rc = put(out, "}\n", 2)) || (rc = inference_reserve(inference, known + new_count)))
		return rc;
	return inference_apply(inference, scan, known, new_count);
}

int schema_inference_row_tree(struct schema_inference *inference, const char *line, size_t size,
			      bool allow_delete, struct schema_row *row, struct error_info *error)
{
	struct schema_scan *scan;
	json_t *object = NULL;
	row_reset(row);
	int rc = scan_of(row, &scan);
	if (rc == 0 && (rc = tree_fields(line, size, scan, &object, error)) == 0)
		rc = inference_row_from_fields(inference, scan, FROM_JANSSON, allow_delete, row, error);
	rc = finish_parse(rc, row, error);
	json_decref(object);
	return rc;
}

int schema_inference_row(struct schema_inference *inference, const char *line, size_t size, bool allow_delete,
			 struct schema_row *row, struct error_info *error)
{
	struct schema_scan *scan;
	row_reset(row);
	int rc = scan_of(row, &scan);
	if (rc == 0 && (rc = schema_scan_line(scan, line, size)) == 0)
		rc = inference_row_from_fields(inference, scan, FROM_TOKENIZER, allow_delete, row, NULL);
	if (rc == 0)
		return 0;
	if (rc == -ENOMEM)
		return finish_parse(rc, row, error);
	/* declined or refused: jansson reads the line again and judges it (invariant 2) */
	return schema_inference_row_tree(inference, line, size, allow_delete, row, error);
}

int schema_inference_finish(struct schema_inference *inference, struct schema *out)
{
	int rc = schema_copy(out, &inference->schema);
	if (rc)
		return rc;
	for (size_t i = 0; i < out->property_count; i++) {
		struct schema_property *property = &out->properties[i];
		const struct inferred *inferred = &inference->inferred[i];
		if (!inferred->typed)
			property->type = (struct schema_type){.kind = SCHEMA_STRING};
		else if (property->type.kind == SCHEMA_LIST && !inferred->element_typed)
			property->type.element = SCHEMA_STRING;
		property->nullable = inferred->present != inference->rows;
	}
	return 0;
}
