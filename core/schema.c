/*
 * schema — table schemas (parse, render, compatibility, hash) and the
 * canonical text of values (strings, numbers, dates) that rows are rendered
 * with. Rows themselves and inference are in schema_row.c. See schema.h for
 * the API and docs/FORMAT.md §6–7 for the exact rules.
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
 *   4. A failed call leaves its outputs reset (a schema in schema_init state).
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


static const char *const scalar_names[] = {
	[SCHEMA_STRING] = "string", [SCHEMA_BOOL] = "bool",  [SCHEMA_I64] = "i64",
	[SCHEMA_F64] = "f64",       [SCHEMA_DATE] = "date",  [SCHEMA_DATETIME] = "datetime",
};

const char *schema_scalar_name(enum schema_type_kind kind)
{
	return scalar_names[kind];
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

int schema_render_string(struct buf *out, const char *text, size_t length)
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
size_t schema_format_digits(char *out, double value, const char *digits, int count, int n)
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
size_t schema_format_decimal(char *out, double value, bool as_float)
{
	if (value == 0) {
		strcpy(out, "0");
		return 1;
	}
	char digits[24];
	int count, n;
	schema_shortest_digits(fabs(value), as_float, digits, &count, &n);
	return schema_format_digits(out, value, digits, count, n);
}

int schema_render_decimal(struct buf *out, double value, bool as_float)
{
	char text[40];
	size_t length = schema_format_decimal(text, value, as_float);
	return buf_append(out, text, length);
}

/* ---- describing input in messages ------------------------------------------ */

/* Up to SCHEMA_SNIPPET_MAX bytes of text, escaped like a JSON string body, "..." if cut. */
void schema_snippet(const char *text, size_t length, char *out, size_t size)
{
	size_t at = 0, limit = length;
	if (limit > SCHEMA_SNIPPET_MAX) {
		limit = SCHEMA_SNIPPET_MAX;
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
	char text[SCHEMA_SNIPPET_MAX * 6 + 8];
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
		schema_format_decimal(text, json_real_value(value), false);
		snprintf(out, size, "number %s", text);
		break;
	case JSON_STRING:
		schema_snippet(json_string_value(value), json_string_length(value), text, sizeof text);
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

int schema_load_object(const char *line, size_t size, json_t **out, struct error_info *error)
{
	json_error_t json_error;
	char described[SCHEMA_SNIPPET_MAX * 6 + 32];
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

bool schema_date_is_valid(const char *text, size_t length)
{
	return length == 10 && date_prefix_is_valid(text);
}

/* YYYY-MM-DDTHH:MM:SS[.fraction of 1-9 digits](Z|+HH:MM|-HH:MM); second 60 allowed (RFC 3339). */
bool schema_datetime_is_valid(const char *text, size_t length)
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

const struct schema_property *schema_find_property(const struct schema *schema, const char *name)
{
	for (size_t i = 0; i < schema->property_count; i++)
		if (!strcmp(schema->properties[i].name, name))
			return &schema->properties[i];
	return NULL;
}

/* "i64", "list<f64>", "vector<3>"; out needs 24 bytes. */
const char *schema_type_format(const struct schema_type *type, char *out, size_t size)
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
	char described[SCHEMA_SNIPPET_MAX * 6 + 32];
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
	char described[SCHEMA_SNIPPET_MAX * 6 + 32], quoted[SCHEMA_SNIPPET_MAX * 6 + 8];
	/* Positions are looked up only for messages: each lookup scans the text. */
	schema_snippet(name, strlen(name), quoted, sizeof quoted);
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
			schema_snippet(field, strlen(field), quoted, sizeof quoted);
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
	char described[SCHEMA_SNIPPET_MAX * 6 + 32], type_text[24];
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
			json_is_string(element) ? schema_find_property(out, json_string_value(element)) : NULL;
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
		if (!schema_kind_is_scalar(property->type.kind))
			return schema_fail(source, at,
					   "key property \"%s\" must have a scalar type (string, bool, i64, f64, date "
					   "or datetime), not %s",
					   property->name, schema_type_format(&property->type, type_text, sizeof type_text));
		memcpy(out->key[out->key_count++], property->name, strlen(property->name) + 1);
	}
	return 0;
}

static int parse_schema_object(const struct schema_text *source, json_t *root, struct schema *out)
{
	char described[SCHEMA_SNIPPET_MAX * 6 + 32], quoted[SCHEMA_SNIPPET_MAX * 6 + 8];
	if (!json_is_object(root)) {
		describe_value(root, described, sizeof described);
		return schema_fail(source, 0, "a schema is a JSON object, got %s", described);
	}
	const char *field;
	json_t *value;
	json_object_foreach(root, field, value) {
		if (strcmp(field, "kind") && strcmp(field, "from") && strcmp(field, "to") &&
		    strcmp(field, "key") && strcmp(field, "properties")) {
			schema_snippet(field, strlen(field), quoted, sizeof quoted);
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
			rc = sink_text(sink, schema_type_format(&property->type, type_text, sizeof type_text));
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
			if (!schema_find_property(new_schema, was->name))
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
					      was->name, schema_type_format(&was->type, old_type, sizeof old_type),
					      schema_type_format(&now->type, new_type, sizeof new_type));
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
