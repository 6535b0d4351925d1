/*
 * schema — table schemas, row validation, inference and canonical rendering.
 * See schema.h for the API and docs/FORMAT.md §6–7 for the exact rules.
 *
 * Invariants:
 *   1. Fixed point: a canonical row, parsed again against the same schema,
 *      renders to the same bytes.
 *   2. A value's rendering depends only on the JSON value, never on the
 *      declared type (the type only accepts or refuses it): an integer and the
 *      equal f64 render alike, so widening i64 -> f64 never changes bytes.
 *   3. Every number rendered parses back with jansson: integral f64 values of
 *      magnitude >= 2^63 (which would not fit jansson's i64 integers) use the
 *      exponent form.
 *   4. A failed call leaves its outputs reset (an empty row, a schema in
 *      schema_init state) and an inference exactly as it was before the call.
 *   5. Rows take the fast path (schema_scan.c) when it accepts the line, and
 *      the jansson tree path otherwise; the fast path accepts only lines the
 *      tree path accepts, renders them to the same bytes and changes an
 *      inference the same way, so which path ran is invisible (schema_int.h).
 *
 * An inference moves through: open (no rows) -> fed (each accepted row may
 * append properties, widen types, and counts presence) -> finished (finish
 * produces a schema from the state; feeding may continue afterwards).
 */
#include "schema.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#define XXH_STATIC_LINKING_ONLY /* lets XXH3_state_t live on the stack */
#include <xxhash.h>

#include "float_text.h"
#include "schema_int.h"
#include "ulid.h"

#define SNIPPET_MAX 40          /* bytes of user text quoted in a message */

static const char *const scalar_names[] = {
	[SCHEMA_STRING] = "string", [SCHEMA_BOOL] = "bool",  [SCHEMA_I64] = "i64",
	[SCHEMA_F64] = "f64",       [SCHEMA_DATE] = "date",  [SCHEMA_DATETIME] = "datetime",
};

static bool kind_is_scalar(enum schema_type_kind kind)
{
	return kind <= SCHEMA_DATETIME;
}

/* ---- output sinks: a buffer, or a running hash ----------------------------- */

struct sink {
	struct buf *buffer;      /* append here, or */
	XXH3_state_t *hash;      /* feed the hash */
};

static int sink_put(struct sink *sink, const void *bytes, size_t size)
{
	if (sink->buffer)
		return buf_append(sink->buffer, bytes, size);
	XXH3_64bits_update(sink->hash, bytes, size);
	return 0;
}

static int sink_text(struct sink *sink, const char *text)
{
	return sink_put(sink, text, strlen(text));
}

/* A JSON string: ", \ and control characters escaped, everything else as is. */
static int sink_string(struct sink *sink, const char *text, size_t length)
{
	static const char hex[] = "0123456789abcdef";
	size_t start = 0;
	int rc = sink_put(sink, "\"", 1);
	for (size_t i = 0; rc == 0 && i < length; i++) {
		unsigned char c = (unsigned char)text[i];
		if (c >= 0x20 && c != '"' && c != '\\')
			continue; /* the common case: as is */
		char escape[6] = {'\\', 0, 0, 0, 0, 0};
		size_t escape_length = 2;
		if (c == '"' || c == '\\')
			escape[1] = (char)c;
		else if (c == '\b')
			escape[1] = 'b';
		else if (c == '\f')
			escape[1] = 'f';
		else if (c == '\n')
			escape[1] = 'n';
		else if (c == '\r')
			escape[1] = 'r';
		else if (c == '\t')
			escape[1] = 't';
		else if (c < 0x20) {
			memcpy(escape, "\\u00", 4);
			escape[4] = hex[c >> 4];
			escape[5] = hex[c & 15];
			escape_length = 6;
		}
		rc = sink_put(sink, text + start, i - start);
		if (rc == 0)
			rc = sink_put(sink, escape, escape_length);
		start = i + 1;
	}
	if (rc == 0)
		rc = sink_put(sink, text + start, length - start);
	if (rc == 0)
		rc = sink_put(sink, "\"", 1);
	return rc;
}

static int render_string(struct buf *out, const char *text, size_t length)
{
	struct sink sink = {.buffer = out};
	return sink_string(&sink, text, length);
}

/* ---- numbers -------------------------------------------------------------- */

/*
 * The shortest decimal digits of a positive finite value that read back as
 * the same double (or, as_float, the same float after strtod and a cast, the
 * path a parsed vector element takes). digits gets them without trailing
 * zeros, *count their number, *exponent n with value = 0.digits x 10^n.
 *
 * The definition (FORMAT.md §7) is "print with 1, 2, ... 17 digits, each
 * correctly rounded, and keep the first that reads back": that is
 * schema_shortest_by_search below, with a shortcut for doubles of the normal
 * range (every decimal of at most 15 significant digits reads back from its
 * double, so if printing with 15 digits reads back, those digits without
 * their trailing zeros are the answer).
 *
 * The fast way gives the same digits: double-conversion's shortest digits D
 * (core/float_text.h) have the least length q of any decimal that reads
 * back, so the search cannot stop before q; it stops at q exactly when the
 * correctly rounded q-digit decimal R reads back, and then D = R (R is the
 * closest q-digit decimal to the value, D the closest of those that read
 * back). So: if D = R (and, for floats, D reads back through strtod and a
 * cast), D is the answer; otherwise (a value at a power of two, whose
 * interval is lopsided) the search decides. One exception: where the value
 * lies halfway between two q-digit decimals, printf rounds to even and the
 * library away from zero, so when the (q+1)-th digit is a 5 the search
 * decides too (about one value in ten; still one search instead of nine). tests/unit/test_schema.c checks
 * the two against each other on millions of values.
 */
/* The search from `from` digits on (1: the definition itself). */
static void search_shortest(double value, bool as_float, int from, char digits[24], int *count, int *exponent)
{
	char text[48];
	int first = from, most = as_float ? 9 : 17;
	if (!as_float && value > 1e-300 && value < 1e300 && first < 15)
		first = 15;
	for (int precision = first; precision <= most; precision++) {
		snprintf(text, sizeof text, "%.*e", precision - 1, value);
		double back = strtod(text, NULL);
		if (as_float ? (float)back == (float)value : back == value)
			break;
	}
	int length = 0;
	const char *at = text;
	for (; *at && *at != 'e'; at++)
		if (*at >= '0' && *at <= '9')
			digits[length++] = *at;
	int decimal_exponent = *at == 'e' ? atoi(at + 1) : 0;
	while (length > 1 && digits[length - 1] == '0')
		length--;
	digits[length] = 0;
	*count = length;
	*exponent = decimal_exponent + 1;
}

void schema_shortest_by_search(double value, bool as_float, char digits[24], int *count, int *exponent)
{
	search_shortest(value, as_float, 1, digits, count, exponent);
}

void schema_shortest_digits(double value, bool as_float, char digits[24], int *count, int *exponent)
{
	char rounded[24];
	int rounded_count, rounded_point;
	float_text_digits(value, as_float ? FLOAT_TEXT_SHORTEST_SINGLE : FLOAT_TEXT_SHORTEST, 0, digits, 24, count,
			  exponent);
	float_text_digits(value, FLOAT_TEXT_PRECISION, *count, rounded, sizeof rounded, &rounded_count, &rounded_point);
	bool same = rounded_count == *count && rounded_point == *exponent && memcmp(rounded, digits, (size_t)*count) == 0;
	if (same && *count < (as_float ? 9 : 17)) {
		/* a value halfway between two q-digit decimals: printf rounds such ties to even, the
		 * library away from zero, so the search decides (one digit more ends in 5) */
		char next[24];
		int next_count, next_point;
		float_text_digits(value, FLOAT_TEXT_PRECISION, *count + 1, next, sizeof next, &next_count, &next_point);
		if (next_count == *count + 1 && next[*count] == '5')
			same = false;
	}
	if (same && as_float) {
		/* "0.<digits>e<exponent>", read back through the double a parsed element becomes */
		char text[48];
		size_t length = 2;
		memcpy(text, "0.", 2);
		memcpy(text + length, digits, (size_t)*count);
		length += (size_t)*count;
		text[length++] = 'e';
		int power = *exponent < 0 ? -*exponent : *exponent;
		if (*exponent < 0)
			text[length++] = '-';
		char reversed[8];
		int used = 0;
		do {
			reversed[used++] = (char)('0' + power % 10);
			power /= 10;
		} while (power);
		while (used)
			text[length++] = reversed[--used];
		same = (float)float_text_read(text, length) == (float)value;
	}
	/* nothing shorter than the library's digits reads back: the search starts at their length */
	if (!same)
		search_shortest(value, as_float, *count, digits, count, exponent);
}

/*
 * Writes value (non-zero, finite), whose shortest digits are digits[0..count)
 * with value = 0.digits x 10^n, as JavaScript's Number.prototype.toString
 * does (plain digits for 1e-6 <= |v| < 1e21, otherwise d.ddde+N), except
 * that integral values of magnitude >= 2^63 use the exponent form so that
 * they parse back (invariant 3). out needs 40 bytes; returns the length.
 */
static size_t format_digits(char *out, double value, const char *digits, int count, int n)
{
	size_t at = 0;
	if (value < 0)
		out[at++] = '-';
	bool plain = n > -6 && n <= 21 && !(fabs(value) >= 0x1p63 && count <= n);
	if (plain && count <= n) {
		memcpy(out + at, digits, (size_t)count);
		at += (size_t)count;
		for (int i = count; i < n; i++)
			out[at++] = '0';
	} else if (plain && n > 0) {
		memcpy(out + at, digits, (size_t)n);
		at += (size_t)n;
		out[at++] = '.';
		memcpy(out + at, digits + n, (size_t)(count - n));
		at += (size_t)(count - n);
	} else if (plain) {
		out[at++] = '0';
		out[at++] = '.';
		for (int i = n; i < 0; i++)
			out[at++] = '0';
		memcpy(out + at, digits, (size_t)count);
		at += (size_t)count;
	} else {
		out[at++] = digits[0];
		if (count > 1) {
			out[at++] = '.';
			memcpy(out + at, digits + 1, (size_t)(count - 1));
			at += (size_t)(count - 1);
		}
		int power = n - 1 >= 0 ? n - 1 : 1 - n;
		char reversed[8];
		int length = 0;
		out[at++] = 'e';
		out[at++] = n - 1 >= 0 ? '+' : '-';
		do {
			reversed[length++] = (char)('0' + power % 10);
			power /= 10;
		} while (power);
		while (length)
			out[at++] = reversed[--length];
	}
	out[at] = 0;
	return at;
}

/*
 * Formats a finite value canonically (FORMAT.md §7: shortest round trip,
 * JavaScript style, -0 renders "0"). out needs 40 bytes; returns the length.
 */
static size_t format_decimal(char *out, double value, bool as_float)
{
	if (value == 0) {
		strcpy(out, "0");
		return 1;
	}
	char digits[24];
	int count, n;
	schema_shortest_digits(fabs(value), as_float, digits, &count, &n);
	return format_digits(out, value, digits, count, n);
}

static int render_decimal(struct buf *out, double value, bool as_float)
{
	char text[40];
	size_t length = format_decimal(text, value, as_float);
	return buf_append(out, text, length);
}

static int render_integer(struct buf *out, json_int_t value)
{
	char text[24];
	int length = snprintf(text, sizeof text, "%lld", (long long)value);
	return buf_append(out, text, (size_t)length);
}

/* ---- describing input in messages ------------------------------------------ */

/* Up to SNIPPET_MAX bytes of text, escaped like a JSON string body, "..." if cut. */
static void snippet(const char *text, size_t length, char *out, size_t size)
{
	size_t at = 0, limit = length;
	if (limit > SNIPPET_MAX) {
		limit = SNIPPET_MAX;
		while (limit > 0 && ((unsigned char)text[limit] & 0xC0) == 0x80)
			limit--; /* do not split a UTF-8 sequence */
	}
	for (size_t i = 0; i < limit && at + 8 < size; i++) {
		unsigned char c = (unsigned char)text[i];
		if (c == '"' || c == '\\')
			at += (size_t)snprintf(out + at, size - at, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			at += (size_t)snprintf(out + at, size - at, "\\u%04x", c);
		else
			out[at++] = (char)c;
	}
	if (limit < length && at + 4 < size) {
		memcpy(out + at, "...", 3);
		at += 3;
	}
	out[at] = 0;
}

static void describe_value(const json_t *value, char *out, size_t size)
{
	char text[SNIPPET_MAX * 6 + 8];
	switch (json_typeof(value)) {
	case JSON_NULL:
		snprintf(out, size, "null");
		break;
	case JSON_TRUE:
		snprintf(out, size, "true");
		break;
	case JSON_FALSE:
		snprintf(out, size, "false");
		break;
	case JSON_INTEGER:
		snprintf(out, size, "integer %lld", (long long)json_integer_value(value));
		break;
	case JSON_REAL:
		format_decimal(text, json_real_value(value), false);
		snprintf(out, size, "number %s", text);
		break;
	case JSON_STRING:
		snippet(json_string_value(value), json_string_length(value), text, sizeof text);
		snprintf(out, size, "string \"%s\"", text);
		break;
	case JSON_ARRAY:
		snprintf(out, size, "an array");
		break;
	case JSON_OBJECT:
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

/* ---- parsing JSON text ------------------------------------------------------ */

/* Turns a jansson failure into -EINVAL (or -ENOMEM) with a printable message. */
static int json_failure(const json_error_t *json_error, struct error_info *error)
{
	if (json_error_code(json_error) == json_error_out_of_memory)
		return error_info_set(error, -ENOMEM, "out of memory while parsing JSON");
	char text[sizeof json_error->text];
	size_t i = 0;
	for (; i + 1 < sizeof text && json_error->text[i]; i++) {
		unsigned char c = (unsigned char)json_error->text[i];
		text[i] = c < 0x20 || c >= 0x7f ? '?' : (char)c; /* it may quote raw input bytes */
	}
	text[i] = 0;
	if (json_error_code(json_error) == json_error_null_character)
		return error_info_set(error, -EINVAL,
				      "invalid JSON at column %d: strings must not contain a NUL character (\\u0000)",
				      json_error->column);
	return error_info_set(error, -EINVAL, "invalid JSON at column %d: %s", json_error->column, text);
}

static int load_object(const char *line, size_t size, json_t **out, struct error_info *error)
{
	json_error_t json_error;
	char described[SNIPPET_MAX * 6 + 32];
	*out = NULL;
	if (size == 0)
		return error_info_set(error, -EINVAL, "empty line (each line is one JSON object)");
	json_t *value = json_loadb(line, size, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &json_error);
	if (!value)
		return json_failure(&json_error, error);
	if (!json_is_object(value)) {
		describe_value(value, described, sizeof described);
		json_decref(value);
		return error_info_set(error, -EINVAL, "expected a JSON object, got %s", described);
	}
	*out = value;
	return 0;
}

/* ---- dates ------------------------------------------------------------------ */

static bool are_digits(const char *text, size_t count)
{
	for (size_t i = 0; i < count; i++)
		if (text[i] < '0' || text[i] > '9')
			return false;
	return true;
}

static int two_digits(const char *text)
{
	return (text[0] - '0') * 10 + (text[1] - '0');
}

/* text[0..9] is YYYY-MM-DD and a real date of the proleptic Gregorian calendar. */
static bool date_prefix_is_valid(const char *text)
{
	static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	if (!are_digits(text, 4) || text[4] != '-' || !are_digits(text + 5, 2) || text[7] != '-' ||
	    !are_digits(text + 8, 2))
		return false;
	int year = two_digits(text) * 100 + two_digits(text + 2);
	int month = two_digits(text + 5), day = two_digits(text + 8);
	if (month < 1 || month > 12 || day < 1)
		return false;
	bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
	return day <= days[month - 1] + (month == 2 && leap);
}

static bool date_is_valid(const char *text, size_t length)
{
	return length == 10 && date_prefix_is_valid(text);
}

/* YYYY-MM-DDTHH:MM:SS[.fraction of 1-9 digits](Z|+HH:MM|-HH:MM); second 60 allowed (RFC 3339). */
static bool datetime_is_valid(const char *text, size_t length)
{
	if (length < 20 || !date_prefix_is_valid(text) || text[10] != 'T')
		return false;
	const char *time = text + 11;
	if (!are_digits(time, 2) || time[2] != ':' || !are_digits(time + 3, 2) || time[5] != ':' ||
	    !are_digits(time + 6, 2))
		return false;
	if (two_digits(time) > 23 || two_digits(time + 3) > 59 || two_digits(time + 6) > 60)
		return false;
	size_t at = 19;
	if (text[at] == '.') {
		size_t start = ++at;
		while (at < length && text[at] >= '0' && text[at] <= '9')
			at++;
		if (at == start || at - start > 9)
			return false;
	}
	if (at < length && text[at] == 'Z')
		return at + 1 == length;
	if (at >= length || (text[at] != '+' && text[at] != '-') || length - at != 6)
		return false;
	const char *offset = text + at + 1;
	return are_digits(offset, 2) && offset[2] == ':' && are_digits(offset + 3, 2) &&
	       two_digits(offset) <= 23 && two_digits(offset + 3) <= 59;
}

/* ---- schema basics ------------------------------------------------------------ */

void schema_init(struct schema *schema)
{
	memset(schema, 0, sizeof *schema);
	schema->kind = SCHEMA_NODE;
}

void schema_free(struct schema *schema)
{
	free(schema->key);
	free(schema->properties);
	schema_init(schema);
}

int schema_copy(struct schema *out, const struct schema *from)
{
	struct schema copy = *from;
	copy.key = NULL;
	copy.properties = NULL;
	if (from->key_count) {
		copy.key = malloc(from->key_count * sizeof *copy.key);
		if (!copy.key)
			goto fail;
		memcpy(copy.key, from->key, from->key_count * sizeof *copy.key);
	}
	if (from->property_count) {
		copy.properties = malloc(from->property_count * sizeof *copy.properties);
		if (!copy.properties)
			goto fail;
		memcpy(copy.properties, from->properties, from->property_count * sizeof *copy.properties);
	}
	*out = copy;
	return 0;
fail:
	free(copy.key);
	schema_init(out);
	return -ENOMEM;
}

bool schema_name_is_valid(const char *name, size_t length)
{
	if (length == 0 || length > SCHEMA_NAME_MAX)
		return false;
	for (size_t i = 0; i < length; i++) {
		char c = name[i];
		bool letter = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
		if (!letter && !(i > 0 && c >= '0' && c <= '9'))
			return false;
	}
	return true;
}

static bool name_is_reserved(const char *name)
{
	return !strcmp(name, "id") || !strcmp(name, "from") || !strcmp(name, "to");
}

static const struct schema_property *find_property(const struct schema *schema, const char *name)
{
	for (size_t i = 0; i < schema->property_count; i++)
		if (!strcmp(schema->properties[i].name, name))
			return &schema->properties[i];
	return NULL;
}

/* "i64", "list<f64>", "vector<3>"; out needs 24 bytes. */
static const char *type_format(const struct schema_type *type, char *out, size_t size)
{
	if (type->kind == SCHEMA_LIST)
		snprintf(out, size, "list<%s>", scalar_names[type->element]);
	else if (type->kind == SCHEMA_VECTOR)
		snprintf(out, size, "vector<%u>", (unsigned)type->dimension);
	else
		snprintf(out, size, "%s", scalar_names[type->kind]);
	return out;
}

static int scalar_parse(const char *text, size_t length, enum schema_type_kind *out)
{
	for (int kind = SCHEMA_STRING; kind <= SCHEMA_DATETIME; kind++)
		if (strlen(scalar_names[kind]) == length && !memcmp(text, scalar_names[kind], length)) {
			*out = (enum schema_type_kind)kind;
			return 0;
		}
	return -EINVAL;
}

static int type_parse(const char *text, struct schema_type *out)
{
	size_t length = strlen(text);
	memset(out, 0, sizeof *out);
	if (scalar_parse(text, length, &out->kind) == 0)
		return 0;
	if (length > 6 && !memcmp(text, "list<", 5) && text[length - 1] == '>') {
		out->kind = SCHEMA_LIST;
		return scalar_parse(text + 5, length - 6, &out->element);
	}
	if (length > 8 && !memcmp(text, "vector<", 7) && text[length - 1] == '>') {
		size_t digits = length - 8;
		if (digits > 5 || text[7] == '0' || !are_digits(text + 7, digits))
			return -EINVAL;
		unsigned long dimension = strtoul(text + 7, NULL, 10);
		if (dimension < 1 || dimension > 65536)
			return -EINVAL;
		out->kind = SCHEMA_VECTOR;
		out->dimension = (uint32_t)dimension;
		return 0;
	}
	return -EINVAL;
}

/* ---- schema parse ------------------------------------------------------------ */

struct schema_text {
	const char *text;
	size_t size;
	struct error_info *error;
};

/*
 * The offset of the first `"key"` at or after start that is an object key
 * (followed by optional whitespace and ':'), or start when there is none
 * (a key written with \u escapes is not found; the line is then approximate).
 */
static size_t find_key(const struct schema_text *source, size_t start, const char *key)
{
	size_t key_length = strlen(key);
	for (size_t at = start; at + key_length + 2 <= source->size; at++) {
		if (source->text[at] != '"' || source->text[at + key_length + 1] != '"' ||
		    memcmp(source->text + at + 1, key, key_length))
			continue;
		size_t after = at + key_length + 2;
		while (after < source->size && strchr(" \t\r\n", source->text[after]) && source->text[after])
			after++;
		if (after < source->size && source->text[after] == ':')
			return at;
	}
	return start;
}

static int schema_fail(const struct schema_text *source, size_t offset, const char *format, ...)
	__attribute__((format(printf, 3, 4)));

static int schema_fail(const struct schema_text *source, size_t offset, const char *format, ...)
{
	char message[512];
	va_list arguments;
	va_start(arguments, format);
	vsnprintf(message, sizeof message, format, arguments);
	va_end(arguments);
	error_info_set(source->error, -EINVAL, "%s", message);
	if (source->error) {
		uint64_t line = 1;
		for (size_t i = 0; i < offset && i < source->size; i++)
			line += source->text[i] == '\n';
		source->error->line = line;
	}
	return -EINVAL;
}

static int parse_endpoint(const struct schema_text *source, json_t *root, const char *field,
			  char out[SCHEMA_NAME_MAX + 1])
{
	char described[SNIPPET_MAX * 6 + 32];
	json_t *value = json_object_get(root, field);
	if (!value)
		return schema_fail(source, 0, "an edge schema needs \"%s\" (the node table its edges %s)",
				   field, !strcmp(field, "from") ? "start at" : "end at");
	if (!json_is_string(value) ||
	    !schema_name_is_valid(json_string_value(value), json_string_length(value))) {
		describe_value(value, described, sizeof described);
		return schema_fail(source, find_key(source, 0, field),
				   "\"%s\" must be a table name ([A-Za-z_][A-Za-z0-9_]{0,127}), got %s", field,
				   described);
	}
	memcpy(out, json_string_value(value), json_string_length(value) + 1);
	return 0;
}

static int parse_property(const struct schema_text *source, size_t properties_at, const char *name,
			  json_t *value, struct schema_property *out)
{
	char described[SNIPPET_MAX * 6 + 32], quoted[SNIPPET_MAX * 6 + 8];
	/* Positions are looked up only for messages: each lookup scans the text. */
	snippet(name, strlen(name), quoted, sizeof quoted);
	if (!schema_name_is_valid(name, strlen(name)))
		return schema_fail(source, find_key(source, properties_at, name),
				   "invalid property name \"%s\" (names match [A-Za-z_][A-Za-z0-9_]{0,127})",
				   quoted);
	if (name_is_reserved(name))
		return schema_fail(source, find_key(source, properties_at, name),
				   "property name \"%s\" is reserved (id, from and to are not properties)", name);
	if (!json_is_object(value)) {
		describe_value(value, described, sizeof described);
		return schema_fail(source, find_key(source, properties_at, name),
				   "property \"%s\": expected an object like {\"type\":\"string\",\"nullable\":true}, got %s",
				   name, described);
	}
	const char *field;
	json_t *field_value;
	json_object_foreach(value, field, field_value) {
		if (strcmp(field, "type") && strcmp(field, "nullable")) {
			snippet(field, strlen(field), quoted, sizeof quoted);
			return schema_fail(source, find_key(source, find_key(source, properties_at, name), field),
					   "property \"%s\": unknown field '%s' (a property has type and nullable)",
					   name, quoted);
		}
	}
	memset(out, 0, sizeof *out);
	memcpy(out->name, name, strlen(name) + 1);
	json_t *type = json_object_get(value, "type");
	if (!type)
		return schema_fail(source, find_key(source, properties_at, name), "property \"%s\": missing \"type\"",
				   name);
	if (!json_is_string(type) || type_parse(json_string_value(type), &out->type)) {
		describe_value(type, described, sizeof described);
		return schema_fail(source, find_key(source, find_key(source, properties_at, name), "type"),
				   "property \"%s\": unknown type %s (use string, bool, i64, f64, date, datetime, "
				   "list<T> or vector<N> with N from 1 to 65536)",
				   name, described);
	}
	json_t *nullable = json_object_get(value, "nullable");
	if (nullable && !json_is_boolean(nullable)) {
		describe_value(nullable, described, sizeof described);
		return schema_fail(source, find_key(source, find_key(source, properties_at, name), "nullable"),
				   "property \"%s\": \"nullable\" must be true or false, got %s", name, described);
	}
	out->nullable = nullable ? json_is_true(nullable) : true;
	return 0;
}

static int parse_key(const struct schema_text *source, json_t *key, struct schema *out)
{
	char described[SNIPPET_MAX * 6 + 32], type_text[24];
	size_t at = find_key(source, 0, "key");
	if (!json_is_array(key)) {
		describe_value(key, described, sizeof described);
		return schema_fail(source, at, "\"key\" must be a list of property names, got %s", described);
	}
	if (json_array_size(key) && out->kind == SCHEMA_EDGE)
		return schema_fail(source, at, "\"key\" is only for node schemas (edge ids are given or assigned)");
	if (json_array_size(key) == 0)
		return 0;
	out->key = calloc(json_array_size(key), sizeof *out->key);
	if (!out->key)
		return error_info_set(source->error, -ENOMEM, "out of memory");
	size_t index;
	json_t *element;
	json_array_foreach(key, index, element) {
		const struct schema_property *property =
			json_is_string(element) ? find_property(out, json_string_value(element)) : NULL;
		if (!property) {
			describe_value(element, described, sizeof described);
			return schema_fail(source, at, "\"key\"[%zu]: %s is not a property in \"properties\"",
					   index, described);
		}
		for (size_t i = 0; i < out->key_count; i++)
			if (!strcmp(out->key[i], property->name))
				return schema_fail(source, at, "\"key\" names property \"%s\" twice",
						   property->name);
		if (property->nullable)
			return schema_fail(source, at,
					   "key property \"%s\" must not be nullable (declare \"nullable\":false)",
					   property->name);
		if (!kind_is_scalar(property->type.kind))
			return schema_fail(source, at,
					   "key property \"%s\" must have a scalar type (string, bool, i64, f64, date "
					   "or datetime), not %s",
					   property->name, type_format(&property->type, type_text, sizeof type_text));
		memcpy(out->key[out->key_count++], property->name, strlen(property->name) + 1);
	}
	return 0;
}

static int parse_schema_object(const struct schema_text *source, json_t *root, struct schema *out)
{
	char described[SNIPPET_MAX * 6 + 32], quoted[SNIPPET_MAX * 6 + 8];
	if (!json_is_object(root)) {
		describe_value(root, described, sizeof described);
		return schema_fail(source, 0, "a schema is a JSON object, got %s", described);
	}
	const char *field;
	json_t *value;
	json_object_foreach(root, field, value) {
		if (strcmp(field, "kind") && strcmp(field, "from") && strcmp(field, "to") &&
		    strcmp(field, "key") && strcmp(field, "properties")) {
			snippet(field, strlen(field), quoted, sizeof quoted);
			return schema_fail(source, find_key(source, 0, field),
					   "unknown field '%s' (a schema has kind, from, to, key and properties)",
					   quoted);
		}
	}
	json_t *kind = json_object_get(root, "kind");
	if (!kind)
		return schema_fail(source, 0, "missing \"kind\" (\"node\" or \"edge\")");
	if (json_is_string(kind) && !strcmp(json_string_value(kind), "node"))
		out->kind = SCHEMA_NODE;
	else if (json_is_string(kind) && !strcmp(json_string_value(kind), "edge"))
		out->kind = SCHEMA_EDGE;
	else {
		describe_value(kind, described, sizeof described);
		return schema_fail(source, find_key(source, 0, "kind"),
				   "\"kind\" must be \"node\" or \"edge\", got %s", described);
	}
	int rc;
	if (out->kind == SCHEMA_EDGE) {
		if ((rc = parse_endpoint(source, root, "from", out->from)) ||
		    (rc = parse_endpoint(source, root, "to", out->to)))
			return rc;
	} else {
		for (int i = 0; i < 2; i++) {
			const char *endpoint = i ? "to" : "from";
			if (json_object_get(root, endpoint))
				return schema_fail(source, find_key(source, 0, endpoint),
						   "\"%s\" is only for edge schemas (this one has \"kind\":\"node\")",
						   endpoint);
		}
	}
	json_t *properties = json_object_get(root, "properties");
	if (properties && !json_is_object(properties)) {
		describe_value(properties, described, sizeof described);
		return schema_fail(source, find_key(source, 0, "properties"),
				   "\"properties\" must be an object of property definitions, got %s", described);
	}
	if (properties && json_object_size(properties)) {
		size_t properties_at = find_key(source, 0, "properties");
		out->properties = calloc(json_object_size(properties), sizeof *out->properties);
		if (!out->properties)
			return error_info_set(source->error, -ENOMEM, "out of memory");
		json_object_foreach(properties, field, value) {
			rc = parse_property(source, properties_at, field, value,
					    &out->properties[out->property_count]);
			if (rc)
				return rc;
			out->property_count++;
		}
	}
	json_t *key = json_object_get(root, "key");
	return key ? parse_key(source, key, out) : 0;
}

int schema_parse(const char *text, size_t size, struct schema *out, struct error_info *error)
{
	struct schema_text source = {.text = text, .size = size, .error = error};
	json_error_t json_error;
	int rc;
	schema_init(out);
	json_t *root = json_loadb(text, size, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &json_error);
	if (!root) {
		rc = json_failure(&json_error, error);
		if (error)
			error->line = json_error.line > 0 ? (uint64_t)json_error.line : 1;
		return rc;
	}
	rc = parse_schema_object(&source, root, out);
	json_decref(root);
	if (rc)
		schema_free(out);
	return rc;
}

/* ---- schema render, hash, compatibility ------------------------------------- */

static int render_schema_to(const struct schema *schema, struct sink *sink)
{
	char type_text[24];
	int rc = sink_text(sink, schema->kind == SCHEMA_EDGE ? "{\"kind\":\"edge\"" : "{\"kind\":\"node\"");
	if (rc == 0 && schema->kind == SCHEMA_EDGE) {
		if ((rc = sink_text(sink, ",\"from\":")) || (rc = sink_string(sink, schema->from, strlen(schema->from))) ||
		    (rc = sink_text(sink, ",\"to\":")) || (rc = sink_string(sink, schema->to, strlen(schema->to))))
			return rc;
	}
	if (rc == 0 && schema->key_count) {
		rc = sink_text(sink, ",\"key\":[");
		for (size_t i = 0; rc == 0 && i < schema->key_count; i++) {
			if (i)
				rc = sink_text(sink, ",");
			if (rc == 0)
				rc = sink_string(sink, schema->key[i], strlen(schema->key[i]));
		}
		if (rc == 0)
			rc = sink_text(sink, "]");
	}
	if (rc == 0)
		rc = sink_text(sink, ",\"properties\":{");
	for (size_t i = 0; rc == 0 && i < schema->property_count; i++) {
		const struct schema_property *property = &schema->properties[i];
		if (i)
			rc = sink_text(sink, ",");
		if (rc == 0)
			rc = sink_string(sink, property->name, strlen(property->name));
		if (rc == 0)
			rc = sink_text(sink, ":{\"type\":\"");
		if (rc == 0)
			rc = sink_text(sink, type_format(&property->type, type_text, sizeof type_text));
		if (rc == 0)
			rc = sink_text(sink, property->nullable ? "\",\"nullable\":true}" : "\",\"nullable\":false}");
	}
	if (rc == 0)
		rc = sink_text(sink, "}}\n");
	return rc;
}

int schema_render(const struct schema *schema, struct buf *out)
{
	size_t size_before = out->size;
	struct sink sink = {.buffer = out};
	int rc = render_schema_to(schema, &sink);
	if (rc)
		out->size = size_before;
	return rc;
}

bool schema_is_undeclared(const struct schema *schema)
{
	return schema->kind == SCHEMA_NODE && schema->property_count == 0 && schema->key_count == 0;
}

void schema_hash(const struct schema *schema, char out[17])
{
	XXH3_state_t state;
	XXH3_64bits_reset(&state);
	struct sink sink = {.hash = &state};
	render_schema_to(schema, &sink); /* cannot fail: hashing allocates nothing */
	snprintf(out, 17, "%016llx", (unsigned long long)XXH3_64bits_digest(&state));
}

static bool type_widens_to(const struct schema_type *old, const struct schema_type *new_type)
{
	if (old->kind != new_type->kind)
		return old->kind == SCHEMA_I64 && new_type->kind == SCHEMA_F64;
	if (old->kind == SCHEMA_LIST)
		return old->element == new_type->element ||
		       (old->element == SCHEMA_I64 && new_type->element == SCHEMA_F64);
	if (old->kind == SCHEMA_VECTOR)
		return old->dimension == new_type->dimension;
	return true;
}

int schema_check_compatible(const struct schema *old, const struct schema *new_schema,
			    struct error_info *error)
{
	char old_type[24], new_type[24];
	if (old->kind != new_schema->kind)
		return error_info_set(error, -EINVAL,
				      "the kind cannot change from %s to %s (drop the table and create it anew)",
				      old->kind == SCHEMA_EDGE ? "edge" : "node",
				      new_schema->kind == SCHEMA_EDGE ? "edge" : "node");
	if (old->kind == SCHEMA_EDGE && strcmp(old->from, new_schema->from))
		return error_info_set(error, -EINVAL, "an edge table's \"from\" cannot change (%s to %s)",
				      old->from, new_schema->from);
	if (old->kind == SCHEMA_EDGE && strcmp(old->to, new_schema->to))
		return error_info_set(error, -EINVAL, "an edge table's \"to\" cannot change (%s to %s)",
				      old->to, new_schema->to);
	bool same_key = old->key_count == new_schema->key_count;
	for (size_t i = 0; same_key && i < old->key_count; i++)
		same_key = !strcmp(old->key[i], new_schema->key[i]);
	if (!same_key)
		return error_info_set(error, -EINVAL,
				      "the key cannot change (row ids derive from it); keep \"key\" as it is");
	for (size_t i = 0; i < old->property_count; i++) {
		const struct schema_property *was = &old->properties[i];
		const struct schema_property *now =
			i < new_schema->property_count ? &new_schema->properties[i] : NULL;
		if (!now || strcmp(was->name, now->name)) {
			if (!find_property(new_schema, was->name))
				return error_info_set(error, -EINVAL,
						      "property \"%s\" cannot be removed (existing rows may hold it)",
						      was->name);
			return error_info_set(error, -EINVAL,
					      "property \"%s\" cannot move (properties keep their order; append "
					      "new ones at the end)",
					      was->name);
		}
		if (!type_widens_to(&was->type, &now->type))
			return error_info_set(error, -EINVAL,
					      "property \"%s\": type cannot change from %s to %s (only i64 to f64 "
					      "and list<i64> to list<f64> widen)",
					      was->name, type_format(&was->type, old_type, sizeof old_type),
					      type_format(&now->type, new_type, sizeof new_type));
		if (was->nullable && !now->nullable)
			return error_info_set(error, -EINVAL,
					      "property \"%s\" cannot become non-nullable (existing rows may omit it)",
					      was->name);
	}
	for (size_t i = old->property_count; i < new_schema->property_count; i++)
		if (!new_schema->properties[i].nullable)
			return error_info_set(error, -EINVAL,
					      "new property \"%s\" must be nullable (existing rows do not have it)",
					      new_schema->properties[i].name);
	return 0;
}

/* ---- rows: typed values -------------------------------------------------------- */

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

static int type_mismatch(const char *path, const char *expected, const json_t *value,
			 struct error_info *error)
{
	char described[SNIPPET_MAX * 6 + 32];
	describe_value(value, described, sizeof described);
	return error_info_set(error, -EINVAL, "%s: expected %s, got %s", path, expected, described);
}

/* Checks a scalar against kind and appends its canonical form. */
static int render_scalar(struct buf *out, enum schema_type_kind kind, const json_t *value,
			 const char *property, long index, struct error_info *error)
{
	char path[SCHEMA_NAME_MAX + 48];
	value_path(path, sizeof path, property, index);
	switch (kind) {
	case SCHEMA_STRING:
		if (!json_is_string(value))
			return type_mismatch(path, "string", value, error);
		return render_string(out, json_string_value(value), json_string_length(value));
	case SCHEMA_BOOL:
		if (!json_is_boolean(value))
			return type_mismatch(path, "bool", value, error);
		return buf_append_string(out, json_is_true(value) ? "true" : "false");
	case SCHEMA_I64:
		if (!json_is_integer(value))
			return type_mismatch(path, "i64", value, error);
		return render_integer(out, json_integer_value(value));
	case SCHEMA_F64:
		if (json_is_integer(value))
			return render_decimal(out, (double)json_integer_value(value), false);
		if (!json_is_real(value))
			return type_mismatch(path, "f64", value, error);
		if (!isfinite(json_real_value(value)))
			return error_info_set(error, -EINVAL, "%s: NaN and infinities are not JSON numbers", path);
		return render_decimal(out, json_real_value(value), false);
	case SCHEMA_DATE:
		if (!json_is_string(value) || !date_is_valid(json_string_value(value), json_string_length(value)))
			return type_mismatch(path, "a date (YYYY-MM-DD, a real calendar day)", value, error);
		return render_string(out, json_string_value(value), json_string_length(value));
	case SCHEMA_DATETIME:
		if (!json_is_string(value) ||
		    !datetime_is_valid(json_string_value(value), json_string_length(value)))
			return type_mismatch(path, "a datetime (RFC 3339, e.g. 2024-01-31T12:00:00Z)", value,
					     error);
		return render_string(out, json_string_value(value), json_string_length(value));
	default:
		assert(!"render_scalar takes scalar kinds");
		return -EINVAL;
	}
}

static int render_typed(struct buf *out, const struct schema_type *type, const json_t *value,
			const char *property, struct error_info *error)
{
	char path[SCHEMA_NAME_MAX + 48], type_text[24], expected[64];
	size_t index;
	json_t *element;
	int rc = 0;
	if (kind_is_scalar(type->kind))
		return render_scalar(out, type->kind, value, property, -1, error);
	value_path(path, sizeof path, property, -1);
	type_format(type, type_text, sizeof type_text);
	if (!json_is_array(value))
		return type_mismatch(path, type_text, value, error);
	if (type->kind == SCHEMA_VECTOR && json_array_size(value) != type->dimension) {
		snprintf(expected, sizeof expected, "%s (%u numbers)", type_text, (unsigned)type->dimension);
		return error_info_set(error, -EINVAL, "%s: expected %s, got %zu elements", path, expected,
				      json_array_size(value));
	}
	if ((rc = buf_append(out, "[", 1)))
		return rc;
	json_array_foreach(value, index, element) {
		if (index && (rc = buf_append(out, ",", 1)))
			return rc;
		if (type->kind == SCHEMA_LIST) {
			rc = render_scalar(out, type->element, element, property, (long)index, error);
		} else if (!json_is_number(element)) {
			value_path(path, sizeof path, property, (long)index);
			rc = type_mismatch(path, "a number (vector elements are f32)", element, error);
		} else {
			float number = (float)json_number_value(element);
			if (isinf(number) || isnan(number)) {
				value_path(path, sizeof path, property, (long)index);
				rc = type_mismatch(path, "a number that fits f32", element, error);
			} else
				rc = render_decimal(out, (double)number, true);
		}
		if (rc)
			return rc;
	}
	return buf_append(out, "]", 1);
}

/* Any scalar or list of scalars, by its JSON type alone (inference rendering). */
static int render_untyped(struct buf *out, const json_t *value)
{
	size_t index;
	json_t *element;
	int rc;
	switch (json_typeof(value)) {
	case JSON_STRING:
		return render_string(out, json_string_value(value), json_string_length(value));
	case JSON_TRUE:
		return buf_append_string(out, "true");
	case JSON_FALSE:
		return buf_append_string(out, "false");
	case JSON_INTEGER:
		return render_integer(out, json_integer_value(value));
	case JSON_REAL:
		return render_decimal(out, json_real_value(value), false);
	case JSON_ARRAY:
		if ((rc = buf_append(out, "[", 1)))
			return rc;
		json_array_foreach(value, index, element) {
			if ((index && (rc = buf_append(out, ",", 1))) || (rc = render_untyped(out, element)))
				return rc;
		}
		return buf_append(out, "]", 1);
	default:
		assert(!"inference refuses objects and nulls before rendering");
		return -EINVAL;
	}
}

/* ---- rows: ids ------------------------------------------------------------------ */

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
static int take_id_field(const json_t *value, const char *field, struct buf *out, struct error_info *error)
{
	char described[SNIPPET_MAX * 6 + 32], what[16];
	snprintf(what, sizeof what, "\"%s\"", field);
	if (!json_is_string(value)) {
		describe_value(value, described, sizeof described);
		return error_info_set(error, -EINVAL, "%s must be a string, got %s", what, described);
	}
	int rc = check_id_text(what, json_string_value(value), json_string_length(value), error);
	if (rc == 0)
		rc = buf_append(out, json_string_value(value), json_string_length(value));
	return rc;
}

static int assign_ulid(struct buf *out)
{
	struct ulid id;
	char text[ULID_TEXT_SIZE];
	ulid_new(&id);
	return buf_append_string(out, ulid_format(&id, text));
}

/*
 * A key value as id text: strings as they are (quoted when in_list), numbers
 * as the row renders them (an integer given for an f64 key as the f64 it
 * becomes), booleans as true/false.
 */
static int render_key_value(struct buf *out, const struct schema_property *property, const json_t *value,
			    bool in_list)
{
	if (json_is_string(value) && !in_list)
		return buf_append(out, json_string_value(value), json_string_length(value));
	if (property && property->type.kind == SCHEMA_F64 && json_is_integer(value))
		return render_decimal(out, (double)json_integer_value(value), false);
	return render_untyped(out, value);
}

static int derive_id(const struct schema *schema, json_t *object, struct buf *out, struct error_info *error)
{
	int rc = 0;
	bool in_list = schema->key_count > 1;
	if (in_list)
		rc = buf_append(out, "[", 1);
	for (size_t i = 0; rc == 0 && i < schema->key_count; i++) {
		json_t *value = json_object_get(object, schema->key[i]);
		if (!value || json_is_null(value) || json_is_array(value) || json_is_object(value))
			return error_info_set(error, -EINVAL, "key property \"%s\" is missing (the id derives from it)",
					      schema->key[i]);
		if (i)
			rc = buf_append(out, ",", 1);
		if (rc == 0)
			rc = render_key_value(out, find_property(schema, schema->key[i]), value, in_list);
	}
	if (rc == 0 && in_list)
		rc = buf_append(out, "]", 1);
	if (rc == 0)
		rc = check_id_text("the id derived from the key", (const char *)out->data, out->size, error);
	return rc;
}

static int resolve_id(const struct schema *schema, json_t *object, struct buf *out, struct error_info *error)
{
	char given_text[SNIPPET_MAX * 6 + 8], derived_text[SNIPPET_MAX * 6 + 8];
	json_t *given = json_object_get(object, "id");
	if (schema->key_count == 0)
		return given ? take_id_field(given, "id", out, error) : assign_ulid(out);
	struct buf given_id;
	buf_init(&given_id);
	int rc = given ? take_id_field(given, "id", &given_id, error) : 0;
	if (rc == 0)
		rc = derive_id(schema, object, out, error);
	if (rc == 0 && given &&
	    (given_id.size != out->size || memcmp(given_id.data, out->data, out->size))) {
		snippet((const char *)given_id.data, given_id.size, given_text, sizeof given_text);
		snippet((const char *)out->data, out->size, derived_text, sizeof derived_text);
		rc = error_info_set(error, -EINVAL,
				    "\"id\" is \"%s\" but the key gives \"%s\" (omit \"id\" or make it agree)",
				    given_text, derived_text);
	}
	buf_free(&given_id);
	return rc;
}

/* ---- rows: keys and deletes -------------------------------------------------------- */

static int check_directive(const char *name, bool allow_delete, struct error_info *error)
{
	char quoted[SNIPPET_MAX * 6 + 8];
	if (strcmp(name, "@delete")) {
		snippet(name, strlen(name), quoted, sizeof quoted);
		return error_info_set(error, -EINVAL, "unknown directive '%s' (the only one is \"@delete\")", quoted);
	}
	if (!allow_delete)
		return error_info_set(error, -EINVAL,
				      "\"@delete\" is only allowed when appending to a table (a merge)");
	return 0;
}

/* Checks one top-level key of a row against the schema. */
static int check_row_key(const struct schema *schema, const char *name, bool allow_delete,
			 struct error_info *error)
{
	char quoted[SNIPPET_MAX * 6 + 8];
	if (name[0] == '@')
		return check_directive(name, allow_delete, error);
	if (!strcmp(name, "id") || find_property(schema, name))
		return 0;
	if (!strcmp(name, "from") || !strcmp(name, "to")) {
		if (schema->kind == SCHEMA_EDGE)
			return 0;
		return error_info_set(error, -EINVAL, "'%s' is only for edge rows (this is a node table)", name);
	}
	snippet(name, strlen(name), quoted, sizeof quoted);
	return error_info_set(error, -EINVAL, "unknown property '%s' (add it to schema/<Name>.json first)",
			      quoted);
}

static int check_row_keys(const struct schema *schema, json_t *object, bool allow_delete,
			  struct error_info *error)
{
	/* Count the known keys with hash lookups; scan key by key only when some are not. */
	size_t known = json_object_get(object, "id") ? 1 : 0;
	if (allow_delete && json_object_get(object, "@delete"))
		known++;
	if (schema->kind == SCHEMA_EDGE)
		known += (json_object_get(object, "from") ? 1 : 0) + (json_object_get(object, "to") ? 1 : 0);
	for (size_t i = 0; i < schema->property_count && known < json_object_size(object); i++)
		known += json_object_get(object, schema->properties[i].name) ? 1 : 0;
	if (known == json_object_size(object))
		return 0;
	const char *name;
	json_t *value;
	json_object_foreach(object, name, value) {
		int rc = check_row_key(schema, name, allow_delete, error);
		if (rc)
			return rc;
	}
	assert(!"a key that the count missed must fail check_row_key");
	return error_info_set(error, -EINVAL, "unexpected key in row");
}

/* {"id":"…","@delete":true} or {"id":"…","@delete":"detach"}: nothing else. */
static int parse_delete(json_t *object, struct schema_row *row, struct error_info *error)
{
	char described[SNIPPET_MAX * 6 + 32];
	json_t *flag = json_object_get(object, "@delete");
	bool detach = json_is_string(flag) && strcmp(json_string_value(flag), "detach") == 0;
	if (!json_is_true(flag) && !detach) {
		describe_value(flag, described, sizeof described);
		return error_info_set(error, -EINVAL, "\"@delete\" must be true or \"detach\", got %s", described);
	}
	json_t *id = json_object_get(object, "id");
	if (!id)
		return error_info_set(error, -EINVAL, "a delete line needs the \"id\" of the row to delete");
	const char *name;
	json_t *value;
	json_object_foreach(object, name, value) {
		if (strcmp(name, "id") && strcmp(name, "@delete")) {
			snippet(name, strlen(name), described, sizeof described);
			return error_info_set(error, -EINVAL,
					      "a delete line has only \"id\" and \"@delete\", found '%s'", described);
		}
	}
	int rc = take_id_field(id, "id", &row->id, error);
	row->is_delete = rc == 0;
	row->is_detach = rc == 0 && detach;
	return rc;
}

/* canonical = {"id":…[,"from":…,"to":…]<properties>}\n, properties already rendered as ,"p":v… */
/* {"id":…[,"from":…,"to":…] from row's id and endpoints, appended to out. */
static int render_row_head(struct buf *out, const struct schema_row *row, bool edge)
{
	int rc;
	if ((rc = buf_append_string(out, "{\"id\":")) || (rc = render_string(out, (const char *)row->id.data, row->id.size)))
		return rc;
	if (edge && ((rc = buf_append_string(out, ",\"from\":")) ||
		     (rc = render_string(out, (const char *)row->from.data, row->from.size)) ||
		     (rc = buf_append_string(out, ",\"to\":")) ||
		     (rc = render_string(out, (const char *)row->to.data, row->to.size))))
		return rc;
	return 0;
}

static int assemble_row(struct schema_row *row, bool edge, const struct buf *properties)
{
	struct buf *out = &row->canonical;
	int rc;
	if ((rc = render_row_head(out, row, edge)) || (rc = buf_append(out, properties->data, properties->size)))
		return rc;
	return buf_append(out, "}\n", 2);
}

static int render_properties(const struct schema *schema, json_t *object, struct buf *out,
			     struct error_info *error)
{
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < schema->property_count; i++) {
		const struct schema_property *property = &schema->properties[i];
		json_t *value = json_object_get(object, property->name);
		if (!value || json_is_null(value)) {
			if (!property->nullable)
				return error_info_set(error, -EINVAL,
						      "property \"%s\" is missing and not nullable", property->name);
			continue;
		}
		if ((rc = buf_append(out, ",", 1)) || (rc = render_string(out, property->name, strlen(property->name))) ||
		    (rc = buf_append(out, ":", 1)))
			return rc;
		rc = render_typed(out, &property->type, value, property->name, error);
	}
	return rc;
}

static int take_endpoint(json_t *object, const char *field, struct buf *out, struct error_info *error)
{
	json_t *value = json_object_get(object, field);
	if (!value)
		return error_info_set(error, -EINVAL, "edge rows need \"%s\" (the id of the node the edge %s)",
				      field, !strcmp(field, "from") ? "starts at" : "ends at");
	return take_id_field(value, field, out, error);
}

int schema_row_parse_tree(const struct schema *schema, const char *line, size_t size, bool allow_delete,
			  struct schema_row *row, struct error_info *error)
{
	json_t *object = NULL;
	struct buf properties;
	bool edge = schema->kind == SCHEMA_EDGE;
	int rc;
	buf_init(&properties);
	row_reset(row);
	if ((rc = load_object(line, size, &object, error)) || (rc = check_row_keys(schema, object, allow_delete, error)))
		goto out;
	if (allow_delete && json_object_get(object, "@delete")) {
		rc = parse_delete(object, row, error);
		goto out;
	}
	if ((rc = render_properties(schema, object, &properties, error)) ||
	    (rc = resolve_id(schema, object, &row->id, error)))
		goto out;
	if (edge && ((rc = take_endpoint(object, "from", &row->from, error)) ||
		     (rc = take_endpoint(object, "to", &row->to, error))))
		goto out;
	rc = assemble_row(row, edge, &properties);
out:
	if (rc == -ENOMEM && error && error->code != -ENOMEM)
		error_info_set(error, -ENOMEM, "out of memory");
	if (rc)
		row_reset(row);
	buf_free(&properties);
	json_decref(object);
	return rc;
}

/* ---- inference ------------------------------------------------------------------ */

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

static bool integer_is_big(const json_t *value)
{
	json_int_t limit = (json_int_t)1 << 53;
	return json_is_integer(value) && (json_integer_value(value) > limit || json_integer_value(value) < -limit);
}

static enum schema_type_kind json_scalar_kind(const json_t *value)
{
	if (json_is_string(value))
		return SCHEMA_STRING;
	if (json_is_boolean(value))
		return SCHEMA_BOOL;
	return json_is_integer(value) ? SCHEMA_I64 : SCHEMA_F64;
}

static int observe(const char *name, const json_t *value, struct observation *out, struct error_info *error)
{
	char path[SCHEMA_NAME_MAX + 48];
	size_t index;
	json_t *element;
	memset(out, 0, sizeof *out);
	out->typed = true;
	if (json_is_object(value))
		return error_info_set(error, -EINVAL,
				      "property \"%s\": objects are not supported as values (use a string, "
				      "or a list of scalars)",
				      name);
	if (!json_is_array(value)) {
		out->type.kind = json_scalar_kind(value);
		out->big_integer = integer_is_big(value);
		return 0;
	}
	out->type.kind = SCHEMA_LIST;
	json_array_foreach(value, index, element) {
		value_path(path, sizeof path, name, (long)index);
		if (json_is_null(element) || json_is_array(element) || json_is_object(element))
			return type_mismatch(path, "a string, number or boolean (list elements)", element, error);
		enum schema_type_kind kind = json_scalar_kind(element);
		out->big_integer |= integer_is_big(element);
		if (!out->element_typed) {
			out->type.element = kind;
			out->element_typed = true;
		} else if (out->type.element != kind) {
			bool numbers = (out->type.element == SCHEMA_I64 || out->type.element == SCHEMA_F64) &&
				       (kind == SCHEMA_I64 || kind == SCHEMA_F64);
			if (!numbers)
				return type_mismatch(path, scalar_names[out->type.element], element, error);
			out->type.element = SCHEMA_F64;
		}
	}
	out->type.element = out->element_typed ? out->type.element : SCHEMA_STRING;
	return 0;
}

/* Combines what was known (current) with a new value's observation. */
static int merge_observation(const char *name, const struct observation *current,
			     const struct observation *seen, struct observation *out, struct error_info *error)
{
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
				      "property \"%s\" mixes decimals with integers beyond 2^53, which f64 "
				      "cannot hold exactly (declare its type in schema/<Name>.json)",
				      name);
	return 0;
conflict:
	if (current->type.kind == SCHEMA_LIST && !current->element_typed)
		snprintf(known, sizeof known, "a list");
	else
		type_format(&current->type, known, sizeof known);
	if (seen->type.kind == SCHEMA_LIST && !seen->element_typed)
		snprintf(found, sizeof found, "a list");
	else
		type_format(&seen->type, found, sizeof found);
	return error_info_set(error, -EINVAL, "property \"%s\": expected %s (as in earlier rows), got %s", name,
			      known, found);
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

static int inference_reserve(struct schema_inference *inference, size_t wanted)
{
	if (wanted <= inference->capacity)
		return 0;
	size_t capacity = inference->capacity ? inference->capacity * 2 : 16;
	while (capacity < wanted)
		capacity *= 2;
	struct schema_property *properties =
		realloc(inference->schema.properties, capacity * sizeof *properties);
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

/* Pass 1: every property key is valid and its value agrees with what is known. Counts new names. */
static int inference_check(struct schema_inference *inference, json_t *object, bool allow_delete,
			   size_t *new_names, struct error_info *error)
{
	char quoted[SNIPPET_MAX * 6 + 8];
	const char *name;
	json_t *value;
	*new_names = 0;
	json_object_foreach(object, name, value) {
		if (name[0] == '@') {
			int rc = check_directive(name, allow_delete, error);
			if (rc)
				return rc;
			continue;
		}
		if (!strcmp(name, "id"))
			continue;
		if (!schema_name_is_valid(name, strlen(name))) {
			snippet(name, strlen(name), quoted, sizeof quoted);
			return error_info_set(error, -EINVAL,
					      "invalid property name '%s' (names match [A-Za-z_][A-Za-z0-9_]{0,127})",
					      quoted);
		}
		json_t *position = json_object_get(inference->index, name);
		if (!position)
			(*new_names)++;
		if (json_is_null(value))
			continue;
		struct observation seen, merged, current = {.typed = false};
		if (position)
			current = current_observation(inference, (size_t)json_integer_value(position));
		int rc = observe(name, value, &seen, error);
		if (rc == 0)
			rc = merge_observation(name, &current, &seen, &merged, error);
		if (rc)
			return rc;
	}
	return 0;
}

/* Pass 2 (cannot fail once capacity is reserved, except for the index insertion). */
static int inference_apply(struct schema_inference *inference, json_t *object)
{
	const char *name;
	json_t *value;
	size_t first_new = inference->schema.property_count;
	json_object_foreach(object, name, value) {
		if (name[0] == '@' || !strcmp(name, "id") || json_object_get(inference->index, name))
			continue;
		size_t position = inference->schema.property_count;
		if (json_object_set_new(inference->index, name, json_integer((json_int_t)position))) {
			for (size_t i = first_new; i < position; i++)
				json_object_del(inference->index, inference->schema.properties[i].name);
			inference->schema.property_count = first_new;
			return -ENOMEM;
		}
		struct schema_property *property = &inference->schema.properties[position];
		memset(property, 0, sizeof *property);
		memcpy(property->name, name, strlen(name) + 1);
		property->nullable = true;
		memset(&inference->inferred[position], 0, sizeof inference->inferred[position]);
		inference->schema.property_count++;
	}
	json_object_foreach(object, name, value) {
		if (name[0] == '@' || !strcmp(name, "id") || json_is_null(value))
			continue;
		size_t position = (size_t)json_integer_value(json_object_get(inference->index, name));
		struct observation seen, merged, current = current_observation(inference, position);
		int rc = observe(name, value, &seen, NULL);
		if (rc == 0)
			rc = merge_observation(name, &current, &seen, &merged, NULL);
		assert(rc == 0); /* inference_check accepted this value */
		inference->schema.properties[position].type = merged.type;
		inference->inferred[position].typed = merged.typed;
		inference->inferred[position].element_typed = merged.element_typed;
		inference->inferred[position].big_integer = merged.big_integer;
		inference->inferred[position].present++;
	}
	inference->rows++;
	return 0;
}

static int render_inferred_property(struct buf *out, const char *name, const json_t *value)
{
	int rc;
	if (!value || json_is_null(value))
		return 0;
	if ((rc = buf_append(out, ",", 1)) || (rc = render_string(out, name, strlen(name))) ||
	    (rc = buf_append(out, ":", 1)))
		return rc;
	return render_untyped(out, value);
}

int schema_inference_row_tree(struct schema_inference *inference, const char *line, size_t size,
			      bool allow_delete, struct schema_row *row, struct error_info *error)
{
	json_t *object = NULL;
	struct buf properties;
	size_t new_names;
	int rc;
	buf_init(&properties);
	row_reset(row);
	if ((rc = load_object(line, size, &object, error)))
		goto out;
	if (json_object_get(object, "from") || json_object_get(object, "to")) {
		rc = error_info_set(error, -EINVAL,
				    "edge tables need a schema: write schema/<Name>.json with kind, from and to first");
		goto out;
	}
	if ((rc = inference_check(inference, object, allow_delete, &new_names, error)))
		goto out;
	if (allow_delete && json_object_get(object, "@delete")) {
		rc = parse_delete(object, row, error);
		goto out;
	}
	json_t *given = json_object_get(object, "id");
	if ((rc = given ? take_id_field(given, "id", &row->id, error) : assign_ulid(&row->id)))
		goto out;
	/*
	 * Render before changing the inference (a failure leaves it as it was):
	 * known properties in their order, then this row's new ones in its order.
	 */
	for (size_t i = 0; rc == 0 && i < inference->schema.property_count; i++) {
		const char *name = inference->schema.properties[i].name;
		rc = render_inferred_property(&properties, name, json_object_get(object, name));
	}
	const char *name;
	json_t *value;
	json_object_foreach(object, name, value) {
		if (rc == 0 && name[0] != '@' && strcmp(name, "id") && !json_object_get(inference->index, name))
			rc = render_inferred_property(&properties, name, value);
	}
	if (rc == 0)
		rc = assemble_row(row, false, &properties);
	if (rc == 0)
		rc = inference_reserve(inference, inference->schema.property_count + new_names);
	if (rc == 0)
		rc = inference_apply(inference, object);
out:
	if (rc == -ENOMEM && error && error->code != -ENOMEM)
		error_info_set(error, -ENOMEM, "out of memory");
	if (rc)
		row_reset(row);
	buf_free(&properties);
	json_decref(object);
	return rc;
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

/* ---- rows: the fast path (schema_scan) ------------------------------------------ */

#define SCAN_NEW_NAMES_MAX 64   /* new property names one row may bring on the fast path */

/*
 * The same validation and rendering as above, from the fields schema_scan
 * found instead of a jansson tree. Every step that the tree path would refuse
 * returns SCHEMA_SCAN_DECLINED instead of a message, and the line goes to the
 * tree path, which refuses it with its message; so what this path accepts
 * it renders to the same bytes, and it never refuses anything itself.
 */

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

static bool key_is(const struct scan_field *field, const char *name, size_t length)
{
	return field->key_length == length && !memcmp(field->key, name, length);
}

/* A schema property name (NUL-terminated) equals key[0..length). */
static bool name_equals(const char *name, const char *key, size_t length)
{
	return length <= SCHEMA_NAME_MAX && name[length] == 0 && name[0] == key[0] && !memcmp(name, key, length);
}

/* The position of the property named key, trying hint first (rows tend to follow the schema order); -1 if none. */
static long scan_find_property(const struct schema *schema, const char *key, size_t length, size_t hint)
{
	if (hint < schema->property_count && name_equals(schema->properties[hint].name, key, length))
		return (long)hint;
	for (size_t i = 0; i < schema->property_count; i++)
		if (name_equals(schema->properties[i].name, key, length))
			return (long)i;
	return -1;
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

static int render_scan_string(struct buf *out, const struct schema_scan *scan, const struct scan_value *value)
{
	size_t length;
	const char *text = schema_scan_text(scan, value, &length);
	if (value->escaped)
		return render_string(out, text, length);
	/* Unescaped text holds no byte that needs escaping: it is its own canonical form. */
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

/* render_row_head for a row whose id is the scanned value given (NULL: row->id was assigned). */
static int scan_render_row_head(struct buf *out, const struct schema_scan *scan, const struct scan_value *given,
				const struct schema_row *row, bool edge)
{
	int rc;
	if (!given || edge)
		return render_row_head(out, row, edge);
	if ((rc = put(out, "{\"id\":", 6)))
		return rc;
	return render_scan_string(out, scan, given);
}

/* An integer as written is canonical (JSON has no leading zeros), except -0. */
static int render_scan_integer(struct buf *out, const struct scan_value *value)
{
	if (value->integer == 0)
		return put(out, "0", 1);
	return put(out, value->text, value->length);
}

static int render_scan_real(struct buf *out, const struct scan_value *value)
{
	char text[40], digits[24];
	size_t length;
	if (value->canonical_text)
		return put(out, value->text, value->length);
	if (value->real == 0 || !value->short_form) {
		length = format_decimal(text, value->real, false);
	} else {
		uint64_t rest = value->digits;
		for (int i = value->digit_count - 1; i >= 0; i--) {
			digits[i] = (char)('0' + rest % 10);
			rest /= 10;
		}
		length = format_digits(text, value->real, digits, value->digit_count, value->point);
	}
	return put(out, text, length);
}

/* An integer as f64: exact below 2^53, where its shortest digits are its own. */
static int render_scan_integer_as_f64(struct buf *out, const struct scan_value *value)
{
	int64_t exact = (int64_t)1 << 53;
	if (value->integer >= -exact && value->integer <= exact)
		return render_scan_integer(out, value);
	return render_decimal(out, (double)value->integer, false);
}

/* render_scalar from a scanned value. */
static int scan_render_scalar(struct buf *out, enum schema_type_kind kind, const struct schema_scan *scan,
			      const struct scan_value *value)
{
	size_t length;
	const char *text;
	switch (kind) {
	case SCHEMA_STRING:
		return value->kind == SCAN_STRING ? render_scan_string(out, scan, value) : SCHEMA_SCAN_DECLINED;
	case SCHEMA_BOOL:
		if (value->kind != SCAN_TRUE && value->kind != SCAN_FALSE)
			return SCHEMA_SCAN_DECLINED;
		return value->kind == SCAN_TRUE ? put(out, "true", 4) : put(out, "false", 5);
	case SCHEMA_I64:
		return value->kind == SCAN_INTEGER ? render_scan_integer(out, value) : SCHEMA_SCAN_DECLINED;
	case SCHEMA_F64:
		if (value->kind == SCAN_INTEGER)
			return render_scan_integer_as_f64(out, value);
		if (value->kind != SCAN_REAL || !isfinite(value->real))
			return SCHEMA_SCAN_DECLINED;
		return render_scan_real(out, value);
	case SCHEMA_DATE:
	case SCHEMA_DATETIME:
		if (value->kind != SCAN_STRING)
			return SCHEMA_SCAN_DECLINED;
		text = schema_scan_text(scan, value, &length);
		if (kind == SCHEMA_DATE ? !date_is_valid(text, length) : !datetime_is_valid(text, length))
			return SCHEMA_SCAN_DECLINED;
		return render_scan_string(out, scan, value);
	default:
		return SCHEMA_SCAN_DECLINED;
	}
}

/* render_typed from a scanned value. */
static int scan_render_typed(struct buf *out, const struct schema_type *type, const struct schema_scan *scan,
			     const struct scan_value *value)
{
	int rc;
	if (kind_is_scalar(type->kind))
		return scan_render_scalar(out, type->kind, scan, value);
	if (value->kind != SCAN_ARRAY || (type->kind == SCHEMA_VECTOR && value->count != type->dimension))
		return SCHEMA_SCAN_DECLINED;
	if ((rc = put(out, "[", 1)))
		return rc;
	for (size_t i = 0; i < value->count; i++) {
		const struct scan_value *element = &scan->elements[value->first + i];
		if (i && (rc = put(out, ",", 1)))
			return rc;
		if (type->kind == SCHEMA_LIST) {
			rc = scan_render_scalar(out, type->element, scan, element);
		} else if (element->kind != SCAN_INTEGER && element->kind != SCAN_REAL) {
			rc = SCHEMA_SCAN_DECLINED;
		} else {
			float number = (float)(element->kind == SCAN_INTEGER ? (double)element->integer : element->real);
			rc = isinf(number) || isnan(number) ? SCHEMA_SCAN_DECLINED
							    : render_decimal(out, (double)number, true);
		}
		if (rc)
			return rc;
	}
	return put(out, "]", 1);
}

/* render_untyped from a scanned value (nulls never get here). */
static int scan_render_untyped(struct buf *out, const struct schema_scan *scan, const struct scan_value *value)
{
	int rc;
	switch (value->kind) {
	case SCAN_STRING:
		return render_scan_string(out, scan, value);
	case SCAN_TRUE:
		return put(out, "true", 4);
	case SCAN_FALSE:
		return put(out, "false", 5);
	case SCAN_INTEGER:
		return render_scan_integer(out, value);
	case SCAN_REAL:
		return render_scan_real(out, value);
	case SCAN_ARRAY:
		if ((rc = put(out, "[", 1)))
			return rc;
		for (size_t i = 0; i < value->count; i++) {
			if ((i && (rc = put(out, ",", 1))) ||
			    (rc = scan_render_untyped(out, scan, &scan->elements[value->first + i])))
				return rc;
		}
		return put(out, "]", 1);
	default:
		return SCHEMA_SCAN_DECLINED;
	}
}

/* take_id_field from a scanned value. */
static int scan_take_id(const struct schema_scan *scan, const struct scan_value *value, struct buf *out)
{
	size_t length;
	if (value->kind != SCAN_STRING)
		return SCHEMA_SCAN_DECLINED;
	const char *text = schema_scan_text(scan, value, &length);
	if (check_id_text("id", text, length, NULL))
		return SCHEMA_SCAN_DECLINED;
	return buf_append(out, text, length);
}

/* An edge's from and to (fields slot - 1; 0 if absent) into row. */
static int scan_take_endpoints(const struct schema_scan *scan, size_t from_slot, size_t to_slot,
			       struct schema_row *row)
{
	int rc;
	if (!from_slot || !to_slot)
		return SCHEMA_SCAN_DECLINED;
	if ((rc = scan_take_id(scan, &scan->fields[from_slot - 1].value, &row->from)))
		return rc;
	return scan_take_id(scan, &scan->fields[to_slot - 1].value, &row->to);
}

/* derive_id from the scanned fields and the values already rendered into scan->properties. */
static int scan_derive_id(const struct schema *schema, const struct schema_scan *scan, struct buf *out)
{
	bool in_list = schema->key_count > 1;
	int rc = in_list ? buf_append(out, "[", 1) : 0;
	for (size_t i = 0; rc == 0 && i < schema->key_count; i++) {
		size_t position = (size_t)(find_property(schema, schema->key[i]) - schema->properties);
		size_t slot = scan->slots[position];
		const struct scan_value *value = slot ? &scan->fields[slot - 1].value : NULL;
		if (!value || value->kind == SCAN_NULL || value->kind == SCAN_ARRAY)
			return SCHEMA_SCAN_DECLINED;
		if (i)
			rc = buf_append(out, ",", 1);
		if (rc == 0 && !in_list && value->kind == SCAN_STRING) {
			size_t length;
			const char *text = schema_scan_text(scan, value, &length);
			rc = buf_append(out, text, length);
		} else if (rc == 0) {
			/* The value as the row renders it: what render_key_value gives for a scalar of this type. */
			size_t start = scan->spans[2 * position], end = scan->spans[2 * position + 1];
			rc = buf_append(out, scan->properties.data + start, end - start);
		}
	}
	if (rc == 0 && in_list)
		rc = buf_append(out, "]", 1);
	if (rc == 0 && check_id_text("the id derived from the key", (const char *)out->data, out->size, NULL))
		rc = SCHEMA_SCAN_DECLINED;
	return rc;
}

/* schema_row_parse on the fast path: 0 (row filled), SCHEMA_SCAN_DECLINED or -ENOMEM. */
static int scan_row_parse(const struct schema *schema, const char *line, size_t size, struct schema_row *row)
{
	struct schema_scan *scan;
	bool edge = schema->kind == SCHEMA_EDGE;
	size_t id_slot = 0, from_slot = 0, to_slot = 0, hint = 0;
	int rc;
	if ((rc = scan_of(row, &scan)) || (rc = schema_scan_line(scan, line, size)))
		return rc;
	size_t most = schema->property_count > scan->field_count ? schema->property_count : scan->field_count;
	if ((rc = scan_reserve(scan, most, schema->property_count)))
		return rc;
	/* Every key names id, an endpoint or a property, once. */
	for (size_t i = 0; i < scan->field_count; i++) {
		const struct scan_field *field = &scan->fields[i];
		size_t *slot;
		if (key_is(field, "id", 2)) {
			slot = &id_slot;
		} else if (edge && key_is(field, "from", 4)) {
			slot = &from_slot;
		} else if (edge && key_is(field, "to", 2)) {
			slot = &to_slot;
		} else {
			long position = scan_find_property(schema, field->key, field->key_length, hint);
			if (position < 0)
				return SCHEMA_SCAN_DECLINED;
			slot = &scan->slots[position];
			hint = (size_t)position + 1;
		}
		if (*slot)
			return SCHEMA_SCAN_DECLINED; /* a duplicate key */
		*slot = i + 1;
	}
	/*
	 * Without a key the id is known before the properties, so the row is
	 * rendered in place; with a key the properties come first (the id
	 * derives from them) and the row is assembled afterwards.
	 */
	bool in_place = schema->key_count == 0;
	struct buf *properties = in_place ? &row->canonical : &scan->properties;
	buf_reset(properties);
	if (in_place) {
		rc = id_slot ? scan_take_id(scan, &scan->fields[id_slot - 1].value, &row->id) : assign_ulid(&row->id);
		if (rc == 0 && edge)
			rc = scan_take_endpoints(scan, from_slot, to_slot, row);
		if (rc || (rc = scan_render_row_head(properties, scan, id_slot ? &scan->fields[id_slot - 1].value : NULL,
							      row, edge)))
			return rc;
	}
	for (size_t i = 0; i < schema->property_count; i++) {
		const struct schema_property *property = &schema->properties[i];
		const struct scan_field *field = scan->slots[i] ? &scan->fields[scan->slots[i] - 1] : NULL;
		const struct scan_value *value = field ? &field->value : NULL;
		if (!value || value->kind == SCAN_NULL) {
			if (!property->nullable)
				return SCHEMA_SCAN_DECLINED;
			continue;
		}
		/* The key is the property's name. */
		if ((rc = put_property_name(properties, field->key, field->key_length)))
			return rc;
		scan->spans[2 * i] = properties->size;
		if ((rc = scan_render_typed(properties, &property->type, scan, value)))
			return rc;
		scan->spans[2 * i + 1] = properties->size;
	}
	if (in_place)
		return put(properties, "}\n", 2);
	rc = scan_derive_id(schema, scan, &row->id);
	if (rc == 0 && id_slot) {
		size_t length;
		const struct scan_value *given = &scan->fields[id_slot - 1].value;
		const char *text = given->kind == SCAN_STRING ? schema_scan_text(scan, given, &length) : NULL;
		if (!text || length != row->id.size || memcmp(text, row->id.data, length))
			rc = SCHEMA_SCAN_DECLINED;
	}
	if (rc == 0 && edge)
		rc = scan_take_endpoints(scan, from_slot, to_slot, row);
	return rc ? rc : assemble_row(row, edge, properties);
}

int schema_row_parse(const struct schema *schema, const char *line, size_t size, bool allow_delete,
		     struct schema_row *row, struct error_info *error)
{
	row_reset(row);
	if (scan_row_parse(schema, line, size, row) == 0)
		return 0;
	row_reset(row);
	return schema_row_parse_tree(schema, line, size, allow_delete, row, error);
}

/* ---- inference: the fast path ----------------------------------------------------- */

static enum schema_type_kind scan_scalar_kind(const struct scan_value *value)
{
	if (value->kind == SCAN_STRING)
		return SCHEMA_STRING;
	if (value->kind == SCAN_TRUE || value->kind == SCAN_FALSE)
		return SCHEMA_BOOL;
	return value->kind == SCAN_INTEGER ? SCHEMA_I64 : SCHEMA_F64;
}

static bool scan_integer_is_big(const struct scan_value *value)
{
	int64_t limit = (int64_t)1 << 53;
	return value->kind == SCAN_INTEGER && (value->integer > limit || value->integer < -limit);
}

/* observe from a scanned value (not null): 0 or SCHEMA_SCAN_DECLINED. */
static int scan_observe(const struct schema_scan *scan, const struct scan_value *value, struct observation *out)
{
	memset(out, 0, sizeof *out);
	out->typed = true;
	if (value->kind != SCAN_ARRAY) {
		out->type.kind = scan_scalar_kind(value);
		out->big_integer = scan_integer_is_big(value);
		return 0;
	}
	out->type.kind = SCHEMA_LIST;
	for (size_t i = 0; i < value->count; i++) {
		const struct scan_value *element = &scan->elements[value->first + i];
		if (element->kind == SCAN_NULL)
			return SCHEMA_SCAN_DECLINED;
		enum schema_type_kind kind = scan_scalar_kind(element);
		out->big_integer |= scan_integer_is_big(element);
		if (!out->element_typed) {
			out->type.element = kind;
			out->element_typed = true;
		} else if (out->type.element != kind) {
			bool numbers = (out->type.element == SCHEMA_I64 || out->type.element == SCHEMA_F64) &&
				       (kind == SCHEMA_I64 || kind == SCHEMA_F64);
			if (!numbers)
				return SCHEMA_SCAN_DECLINED;
			out->type.element = SCHEMA_F64;
		}
	}
	out->type.element = out->element_typed ? out->type.element : SCHEMA_STRING;
	return 0;
}

/* The position of an inferred property, trying hint first; -1 if none. */
static long scan_find_inferred(const struct schema_inference *inference, const char *key, size_t length,
			       size_t hint)
{
	if (hint < inference->schema.property_count &&
	    name_equals(inference->schema.properties[hint].name, key, length))
		return (long)hint;
	json_t *position = json_object_getn(inference->index, key, length);
	return position ? (long)json_integer_value(position) : -1;
}

/*
 * True if seeing `seen` leaves `current` as it is (and cannot fail): the
 * common case of a scalar of the type already known, not a big integer.
 */
static bool observation_is_unchanged(const struct observation *current, const struct observation *seen)
{
	return current->typed && kind_is_scalar(seen->type.kind) && seen->type.kind == current->type.kind &&
	       !seen->big_integer;
}

/* Folds a value into the property at position (inference_apply's second pass). */
static void scan_apply_value(struct schema_inference *inference, size_t position, const struct schema_scan *scan,
			     const struct scan_value *value)
{
	struct observation seen, merged, current = current_observation(inference, position);
	int rc = scan_observe(scan, value, &seen);
	if (rc == 0 && observation_is_unchanged(&current, &seen)) {
		inference->inferred[position].present++;
		return;
	}
	if (rc == 0)
		rc = merge_observation("", &current, &seen, &merged, NULL);
	assert(rc == 0); /* checked before anything changed */
	(void)rc;
	inference->schema.properties[position].type = merged.type;
	inference->inferred[position].typed = merged.typed;
	inference->inferred[position].element_typed = merged.element_typed;
	inference->inferred[position].big_integer = merged.big_integer;
	inference->inferred[position].present++;
}

/* schema_inference_row on the fast path: 0, SCHEMA_SCAN_DECLINED or -ENOMEM (inference unchanged unless 0). */
static int scan_inference_row(struct schema_inference *inference, const char *line, size_t size,
			      struct schema_row *row)
{
	struct schema_scan *scan;
	struct schema *schema = &inference->schema;
	size_t id_slot = 0, new_count = 0, hint = 0, known = schema->property_count;
	int rc;
	if ((rc = scan_of(row, &scan)) || (rc = schema_scan_line(scan, line, size)))
		return rc;
	if ((rc = scan_reserve(scan, known > scan->field_count ? known : scan->field_count, known)))
		return rc;
	/* inference_check: names valid and once each, values agreeing with what is known. */
	for (size_t i = 0; i < scan->field_count; i++) {
		const struct scan_field *field = &scan->fields[i];
		if (key_is(field, "id", 2)) {
			if (id_slot)
				return SCHEMA_SCAN_DECLINED;
			id_slot = i + 1;
			continue;
		}
		/* Known names were checked when they were added ("from" and "to" never are). */
		long position = scan_find_inferred(inference, field->key, field->key_length, hint);
		if (position >= 0) {
			if (scan->slots[position])
				return SCHEMA_SCAN_DECLINED;
			scan->slots[position] = i + 1;
			hint = (size_t)position + 1;
		} else {
			if (key_is(field, "from", 4) || key_is(field, "to", 2) ||
			    !schema_name_is_valid(field->key, field->key_length))
				return SCHEMA_SCAN_DECLINED; /* also directives: '@' is not a name character */
			/* Duplicates among new names by comparison: rows bringing many go to jansson's hash. */
			if (new_count == SCAN_NEW_NAMES_MAX)
				return SCHEMA_SCAN_DECLINED;
			for (size_t j = 0; j < new_count; j++)
				if (key_is(&scan->fields[scan->new_fields[j]], field->key, field->key_length))
					return SCHEMA_SCAN_DECLINED;
			scan->new_fields[new_count++] = i;
		}
		if (field->value.kind == SCAN_NULL)
			continue;
		struct observation seen, merged, current = {.typed = false};
		if (position >= 0)
			current = current_observation(inference, (size_t)position);
		if (scan_observe(scan, &field->value, &seen))
			return SCHEMA_SCAN_DECLINED;
		if (!observation_is_unchanged(&current, &seen) &&
		    merge_observation("", &current, &seen, &merged, NULL))
			return SCHEMA_SCAN_DECLINED;
	}
	rc = id_slot ? scan_take_id(scan, &scan->fields[id_slot - 1].value, &row->id) : assign_ulid(&row->id);
	if (rc)
		return rc;
	/* Render in place: known properties in their order, then this row's new ones in its order. */
	struct buf *properties = &row->canonical;
	if ((rc = scan_render_row_head(properties, scan, id_slot ? &scan->fields[id_slot - 1].value : NULL, row,
				       false)))
		return rc;
	for (size_t i = 0; i < known; i++) {
		const struct scan_field *field = scan->slots[i] ? &scan->fields[scan->slots[i] - 1] : NULL;
		if (!field || field->value.kind == SCAN_NULL)
			continue;
		/* The key is the property's name. */
		if ((rc = put_property_name(properties, field->key, field->key_length)) ||
		    (rc = scan_render_untyped(properties, scan, &field->value)))
			return rc;
	}
	for (size_t j = 0; j < new_count; j++) {
		const struct scan_field *field = &scan->fields[scan->new_fields[j]];
		if (field->value.kind == SCAN_NULL)
			continue;
		if ((rc = put_property_name(properties, field->key, field->key_length)) ||
		    (rc = scan_render_untyped(properties, scan, &field->value)))
			return rc;
	}
	if ((rc = put(properties, "}\n", 2)) || (rc = inference_reserve(inference, known + new_count)))
		return rc;
	/* inference_apply: add the new names, then fold in every value. */
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
			scan_apply_value(inference, i, scan, value);
	}
	for (size_t j = 0; j < new_count; j++) {
		const struct scan_value *value = &scan->fields[scan->new_fields[j]].value;
		if (value->kind != SCAN_NULL)
			scan_apply_value(inference, known + j, scan, value);
	}
	inference->rows++;
	return 0;
}

int schema_inference_row(struct schema_inference *inference, const char *line, size_t size,
			 bool allow_delete, struct schema_row *row, struct error_info *error)
{
	row_reset(row);
	if (scan_inference_row(inference, line, size, row) == 0)
		return 0;
	row_reset(row);
	return schema_inference_row_tree(inference, line, size, allow_delete, row, error);
}
