/*
 * schema_scan — where a row line's fields come from (schema_int.h): the
 * tokenizer, one pass over the common line (one JSON object whose values are
 * scalars or arrays of scalars), and, for every other line, the fields of the
 * object jansson parsed (schema_scan_tree, at the end).
 *
 * Why the tokenizer is hand-written although the project does not hand-write
 * what its libraries do: jansson has no streaming (event) API, and building
 * its tree (an allocation and a hash insertion per value) cost a third of
 * `graphfs import` time; this is the performance exception. jansson stays the
 * judge of JSON: the tokenizer never refuses a line, it DECLINES every line
 * outside its grammar and every line jansson would refuse, and jansson then
 * reads that line, accepting or refusing it with its own message. So the
 * tokenizer must only accept a subset of what jansson accepts and read the
 * same values from it (tests/unit/test_schema.c and tests/fuzz/fuzz_row.c
 * check that both sources give the same rows and messages).
 *
 * Grammar accepted (ws: space, tab, CR, LF):
 *   line   = ws "{" ws [ member *( ws "," ws member ) ] ws "}" ws
 *   member = key ws ":" ws value
 *   key    = '"' *( printable ASCII except '"' and '\' ) '"'      (no escapes)
 *   value  = scalar / "[" ws [ scalar *( ws "," ws scalar ) ] ws "]"
 *   scalar = string / number / "true" / "false" / "null"
 * with jansson's rules for what it accepts:
 *   - strings: escapes \" \\ \/ \b \f \n \r \t \u plus four hex digits; a high surrogate
 *     escape must be followed by a low one; raw bytes must be valid UTF-8
 *     (no overlong forms, surrogates or values beyond U+10FFFF); declined:
 *     \u0000, lone surrogates, raw bytes below 0x20;
 *   - numbers: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?; without
 *     fraction and exponent an integer, declined outside i64 (jansson uses
 *     strtoll and refuses ERANGE); otherwise a real with strtod's value,
 *     declined when it overflows (jansson refuses ±HUGE_VAL with ERANGE);
 *   - a value must be followed by ws or a structural character.
 * Declined besides: objects as values and nested arrays (no row accepts
 * them), keys with escapes or other bytes (no property name has them).
 */
#include "float_text.h"
#include "schema_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* ---- byte classes ------------------------------------------------------------ */

enum { BYTE_PLAIN = 0, BYTE_QUOTE, BYTE_BACKSLASH, BYTE_CONTROL, BYTE_HIGH };

/* How a byte inside a string is handled: plain bytes are copied as they are. */
static const uint8_t string_byte[256] = {
	[0x00 ... 0x1f] = BYTE_CONTROL,
	['"'] = BYTE_QUOTE,
	['\\'] = BYTE_BACKSLASH,
	[0x80 ... 0xff] = BYTE_HIGH,
};

/*
 * True if any of the 8 bytes of word is not BYTE_PLAIN: '"', '\\', below
 * 0x20 or from 0x80 ("has zero byte" arithmetic; borrows only ever spread
 * upwards from a byte that does match, so the answer is exact).
 */
static bool word_has_special(uint64_t word)
{
	const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
	uint64_t quote = word ^ (ones * '"'), backslash = word ^ (ones * '\\');
	uint64_t special = ((quote - ones) & ~quote) | ((backslash - ones) & ~backslash) | (word - ones * 0x20) | word;
	return (special & highs) != 0;
}

/* The first byte at or after `at` that is not BYTE_PLAIN, or end. */
static const char *skip_plain(const char *at, const char *end)
{
	uint64_t word;
	while (end - at >= 8) {
		memcpy(&word, at, sizeof word);
		if (word_has_special(word))
			break;
		at += 8;
	}
	while (at < end && string_byte[(uint8_t)*at] == BYTE_PLAIN)
		at++;
	return at;
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static const char *skip_space(const char *at, const char *end)
{
	while (at < end && is_space(*at))
		at++;
	return at;
}

/* ---- memory -------------------------------------------------------------------- */

void schema_scan_init(struct schema_scan *scan)
{
	memset(scan, 0, sizeof *scan);
	buf_init(&scan->decoded);
	buf_init(&scan->properties);
}

void schema_scan_free(struct schema_scan *scan)
{
	free(scan->fields);
	free(scan->elements);
	buf_free(&scan->decoded);
	buf_free(&scan->properties);
	free(scan->slots);
	free(scan->spans);
	free(scan->new_fields);
	schema_scan_init(scan);
}

static int grow(void **array, size_t *capacity, size_t entry_size)
{
	size_t wanted = *capacity ? *capacity * 2 : 16;
	void *grown = realloc(*array, wanted * entry_size);
	if (!grown)
		return -ENOMEM;
	*array = grown;
	*capacity = wanted;
	return 0;
}

/* ---- strings ------------------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence of 2..4 bytes at `at`, or 0 if it is not one. */
static size_t utf8_sequence(const uint8_t *at, const uint8_t *end)
{
	size_t length;
	uint32_t code_point, least;
	if (at[0] >= 0xC2 && at[0] <= 0xDF) {
		length = 2;
		code_point = at[0] & 0x1F;
		least = 0x80;
	} else if (at[0] >= 0xE0 && at[0] <= 0xEF) {
		length = 3;
		code_point = at[0] & 0x0F;
		least = 0x800;
	} else if (at[0] >= 0xF0 && at[0] <= 0xF4) {
		length = 4;
		code_point = at[0] & 0x07;
		least = 0x10000;
	} else {
		return 0;
	}
	if ((size_t)(end - at) < length)
		return 0;
	for (size_t i = 1; i < length; i++) {
		if ((at[i] & 0xC0) != 0x80)
			return 0;
		code_point = code_point << 6 | (at[i] & 0x3F);
	}
	if (code_point < least || code_point > 0x10FFFF || (code_point >= 0xD800 && code_point <= 0xDFFF))
		return 0;
	return length;
}

/* The four hex digits at `at` (end checked by the caller), or -1. */
static long hex4(const char *at)
{
	long value = 0;
	for (int i = 0; i < 4; i++) {
		char c = at[i];
		int digit = c >= '0' && c <= '9' ? c - '0'
			    : c >= 'a' && c <= 'f' ? c - 'a' + 10
			    : c >= 'A' && c <= 'F' ? c - 'A' + 10
						   : -1;
		if (digit < 0)
			return -1;
		value = value << 4 | digit;
	}
	return value;
}

static int put_utf8(struct buf *out, uint32_t code_point)
{
	uint8_t bytes[4];
	size_t length;
	if (code_point < 0x80) {
		bytes[0] = (uint8_t)code_point;
		length = 1;
	} else if (code_point < 0x800) {
		bytes[0] = (uint8_t)(0xC0 | code_point >> 6);
		bytes[1] = (uint8_t)(0x80 | (code_point & 0x3F));
		length = 2;
	} else if (code_point < 0x10000) {
		bytes[0] = (uint8_t)(0xE0 | code_point >> 12);
		bytes[1] = (uint8_t)(0x80 | (code_point >> 6 & 0x3F));
		bytes[2] = (uint8_t)(0x80 | (code_point & 0x3F));
		length = 3;
	} else {
		bytes[0] = (uint8_t)(0xF0 | code_point >> 18);
		bytes[1] = (uint8_t)(0x80 | (code_point >> 12 & 0x3F));
		bytes[2] = (uint8_t)(0x80 | (code_point >> 6 & 0x3F));
		bytes[3] = (uint8_t)(0x80 | (code_point & 0x3F));
		length = 4;
	}
	return buf_append(out, bytes, length);
}

/*
 * Decodes one escape at `at` (the byte after the backslash) into out.
 * Returns the position after it, or NULL (declined; *rc = -ENOMEM if memory ran out).
 */
static const char *decode_escape(const char *at, const char *end, struct buf *out, int *rc)
{
	if (at >= end)
		return NULL;
	char simple = *at == '"' || *at == '\\' || *at == '/' ? *at
		      : *at == 'b' ? '\b'
		      : *at == 'f' ? '\f'
		      : *at == 'n' ? '\n'
		      : *at == 'r' ? '\r'
		      : *at == 't' ? '\t'
				   : 0;
	if (simple) {
		*rc = buf_append(out, &simple, 1);
		return *rc ? NULL : at + 1;
	}
	if (*at != 'u' || end - at < 5)
		return NULL;
	long code_point = hex4(at + 1);
	at += 5;
	if (code_point <= 0 || (code_point >= 0xDC00 && code_point <= 0xDFFF))
		return NULL; /* \u0000 (jansson refuses it without JSON_ALLOW_NUL) or a lone low surrogate */
	if (code_point >= 0xD800 && code_point <= 0xDBFF) {
		if (end - at < 6 || at[0] != '\\' || at[1] != 'u')
			return NULL;
		long low = hex4(at + 2);
		if (low < 0xDC00 || low > 0xDFFF)
			return NULL;
		code_point = 0x10000 + ((code_point - 0xD800) << 10) + (low - 0xDC00);
		at += 6;
	}
	*rc = put_utf8(out, (uint32_t)code_point);
	return *rc ? NULL : at;
}

/*
 * Scans a string whose opening quote is before `at`. Returns the position
 * after the closing quote, or NULL (declined; *rc = -ENOMEM if memory ran out).
 */
static const char *scan_string(struct schema_scan *scan, const char *at, const char *end,
			       struct scan_value *value, int *rc)
{
	const char *start = at;
	struct buf *decoded = &scan->decoded;
	value->kind = SCAN_STRING;
	value->text = start;
	value->escaped = false;
	for (;;) {
		at = skip_plain(at, end);
		if (at >= end)
			return NULL;
		switch (string_byte[(uint8_t)*at]) {
		case BYTE_QUOTE:
			value->length = (size_t)(at - start);
			if (value->escaped)
				value->decoded_length = decoded->size - value->decoded_at;
			return at + 1;
		case BYTE_CONTROL:
			return NULL;
		case BYTE_HIGH: {
			size_t length = utf8_sequence((const uint8_t *)at, (const uint8_t *)end);
			if (!length)
				return NULL;
			if (value->escaped && (*rc = buf_append(decoded, at, length)))
				return NULL;
			at += length;
			break;
		}
		default: /* BYTE_BACKSLASH */
			if (!value->escaped) {
				/* From here on the decoded bytes are collected: the text so far first. */
				value->escaped = true;
				value->decoded_at = decoded->size;
				if ((*rc = buf_append(decoded, start, (size_t)(at - start))))
					return NULL;
			}
			at = decode_escape(at + 1, end, decoded, rc);
			if (!at)
				return NULL;
			break;
		}
		if (value->escaped) {
			/* Copy the plain run that follows in one go. */
			const char *run = at;
			at = skip_plain(at, end);
			if ((*rc = buf_append(decoded, run, (size_t)(at - run))))
				return NULL;
		}
	}
}

/* ---- numbers ------------------------------------------------------------------------ */

/* Powers of ten exactly representable as doubles. */
static const double exact_powers[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
				      1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/*
 * What the digits of a numeral add up to: the significant digits without
 * trailing zeros as an integer (while they fit 19 digits), their count, and
 * the trailing zeros seen since the last non-zero digit.
 */
struct digit_run {
	uint64_t digits;
	int count;
	long pending_zeros;
	bool overflow;             /* more than 19 significant digits */
};

static void digit_add(struct digit_run *run, int digit)
{
	if (digit == 0) {
		if (run->count)
			run->pending_zeros++;
		return;
	}
	if (run->count + run->pending_zeros + 1 > 19) {
		run->overflow = true;
	} else {
		for (long i = 0; i < run->pending_zeros; i++)
			run->digits *= 10;
		run->digits = run->digits * 10 + (uint64_t)digit;
	}
	run->count += (int)run->pending_zeros + 1;
	run->pending_zeros = 0;
	if (run->count > 19)
		run->overflow = true;
}

/* strtod of text[0..length) exactly as jansson reads reals (correctly rounded,
 * core/float_text.h, without a NUL-terminated copy); 0 or declined (overflow). */
static int read_real(struct schema_scan *scan, const char *text, size_t length, double *out)
{
	(void)scan;
	double value = float_text_read(text, length);
	if (isinf(value) || isnan(value))
		return SCHEMA_SCAN_DECLINED;   /* out of range: jansson refuses it too */
	*out = value;
	return 0;
}

/* Scans a number starting at `at`. Returns the position after it, or NULL (declined, or *rc = -ENOMEM). */
static const char *scan_number(struct schema_scan *scan, const char *at, const char *end,
			       struct scan_value *value, int *rc)
{
	const char *start = at;
	bool negative = *at == '-';
	struct digit_run run = {0};
	uint64_t integer = 0;
	int integer_digits = 0;
	long fraction_digits = 0, exponent = 0;
	bool real = false, has_exponent = false;
	if (negative)
		at++;
	if (at >= end || !is_digit(*at))
		return NULL;
	if (*at == '0') {
		at++;
		integer_digits = 1;
		if (at < end && is_digit(*at))
			return NULL; /* a leading zero */
	} else {
		for (; at < end && is_digit(*at); at++) {
			if (++integer_digits <= 19)
				integer = integer * 10 + (uint64_t)(*at - '0');
			digit_add(&run, *at - '0');
		}
	}
	if (at < end && *at == '.') {
		real = true;
		if (++at >= end || !is_digit(*at))
			return NULL;
		for (; at < end && is_digit(*at); at++, fraction_digits++)
			digit_add(&run, *at - '0');
	}
	if (at < end && (*at == 'e' || *at == 'E')) {
		real = true;
		has_exponent = true;
		bool negative_exponent = false;
		if (++at < end && (*at == '+' || *at == '-'))
			negative_exponent = *at++ == '-';
		if (at >= end || !is_digit(*at))
			return NULL;
		for (; at < end && is_digit(*at); at++)
			if (exponent < 1000000)
				exponent = exponent * 10 + (*at - '0');
		if (negative_exponent)
			exponent = -exponent;
	}
	value->text = start;
	value->length = (size_t)(at - start);
	if (!real) {
		/* strtoll's range: up to 2^63 - 1, down to -2^63. */
		uint64_t limit = negative ? (uint64_t)1 << 63 : ((uint64_t)1 << 63) - 1;
		if (integer_digits > 19 || integer > limit)
			return NULL;
		value->kind = SCAN_INTEGER;
		value->integer = !negative ? (int64_t)integer
				 : integer == (uint64_t)1 << 63 ? INT64_MIN
								 : -(int64_t)integer;
		return at;
	}
	value->kind = SCAN_REAL;
	value->canonical_text = false;
	/* value = digits x 10^scale */
	long scale = exponent - fraction_digits + run.pending_zeros;
	value->short_form = false;
	if (run.count == 0) {
		value->real = negative ? -0.0 : 0.0;
		return at;
	}
	if (!run.overflow && run.count <= 15 && scale >= -22 && scale <= 22) {
		/* Both operands are exact doubles, so one rounding: strtod's result (Clinger's fast path). */
		double magnitude = scale >= 0 ? (double)run.digits * exact_powers[scale]
					      : (double)run.digits / exact_powers[-scale];
		value->real = negative ? -magnitude : magnitude;
	} else {
		*rc = read_real(scan, start, value->length, &value->real);
		if (*rc)
			return NULL;
	}
	long point = scale + run.count;
	if (!run.overflow && run.count <= 15 && point > -300 && point < 300) {
		/*
		 * A normal double written with at most 15 (DBL_DIG) significant
		 * digits: no other decimal of 15 digits or fewer reads as the same
		 * double, so these digits are the shortest that round-trip.
		 */
		value->short_form = true;
		value->digits = run.digits;
		value->digit_count = run.count;
		value->point = (int)point;
		/*
		 * Plain decimals such as 87.25 are often written canonically
		 * already: a fraction without trailing zeros, no exponent, and
		 * within JavaScript's plain range (|v| >= 1e-6; 15 digits keep
		 * it below 1e21 and 2^63).
		 */
		value->canonical_text = !has_exponent && fraction_digits > 0 && at[-1] != '0' && point > -6;
	}
	return at;
}

/* ---- values and the line -------------------------------------------------------------- */

/* True if the literal word is at `at`. */
static bool literal_at(const char *at, const char *end, const char *word, size_t length)
{
	return (size_t)(end - at) >= length && !memcmp(at, word, length);
}

/* A scalar at `at`; returns the position after it, or NULL (declined, or *rc = -ENOMEM). */
static const char *scan_scalar(struct schema_scan *scan, const char *at, const char *end,
			       struct scan_value *value, int *rc)
{
	switch (*at) {
	case '"':
		return scan_string(scan, at + 1, end, value, rc);
	case 't':
		value->kind = SCAN_TRUE;
		return literal_at(at, end, "true", 4) ? at + 4 : NULL;
	case 'f':
		value->kind = SCAN_FALSE;
		return literal_at(at, end, "false", 5) ? at + 5 : NULL;
	case 'n':
		value->kind = SCAN_NULL;
		return literal_at(at, end, "null", 4) ? at + 4 : NULL;
	default:
		if (*at == '-' || is_digit(*at))
			return scan_number(scan, at, end, value, rc);
		return NULL;
	}
}

/* ws then `first` or `second`; returns the position of that byte, or NULL. */
static const char *expect(const char *at, const char *end, char first, char second)
{
	at = skip_space(at, end);
	return at < end && (*at == first || *at == second) ? at : NULL;
}

static const char *scan_array(struct schema_scan *scan, const char *at, const char *end,
			      struct scan_value *value, int *rc)
{
	value->kind = SCAN_ARRAY;
	value->first = scan->element_count;
	value->count = 0;
	at = skip_space(at, end);
	if (at < end && *at == ']')
		return at + 1;
	for (;;) {
		if (at >= end)
			return NULL;
		if (scan->element_count == scan->element_capacity &&
		    (*rc = grow((void **)&scan->elements, &scan->element_capacity, sizeof *scan->elements)))
			return NULL;
		/* A scalar (a nested array or object is declined by scan_scalar). */
		at = scan_scalar(scan, at, end, &scan->elements[scan->element_count], rc);
		if (!at || !(at = expect(at, end, ',', ']')))
			return NULL;
		scan->element_count++;
		value->count++;
		if (*at++ == ']')
			return at;
		at = skip_space(at, end);
	}
}

int schema_scan_line(struct schema_scan *scan, const char *line, size_t size)
{
	const char *at = line, *end = line + size;
	int rc = 0;
	scan->field_count = 0;
	scan->element_count = 0;
	buf_reset(&scan->decoded);
	at = skip_space(at, end);
	if (at >= end || *at != '{')
		return SCHEMA_SCAN_DECLINED;
	at = skip_space(at + 1, end);
	if (at < end && *at == '}') {
		at++;
	} else {
		for (;;) {
			if (at >= end || *at != '"')
				return SCHEMA_SCAN_DECLINED;
			if (scan->field_count == scan->field_capacity &&
			    (rc = grow((void **)&scan->fields, &scan->field_capacity, sizeof *scan->fields)))
				return rc;
			struct scan_field *field = &scan->fields[scan->field_count];
			const char *key = ++at;
			while (at < end && *at >= 0x20 && *at < 0x7f && *at != '"' && *at != '\\')
				at++;
			if (at >= end || *at != '"')
				return SCHEMA_SCAN_DECLINED;
			field->key = key;
			field->key_length = (size_t)(at - key);
			if (!(at = expect(at + 1, end, ':', ':')))
				return SCHEMA_SCAN_DECLINED;
			at = skip_space(at + 1, end);
			if (at >= end)
				return SCHEMA_SCAN_DECLINED;
			at = *at == '[' ? scan_array(scan, at + 1, end, &field->value, &rc)
					: scan_scalar(scan, at, end, &field->value, &rc);
			if (!at)
				return rc ? rc : SCHEMA_SCAN_DECLINED;
			scan->field_count++;
			if (!(at = expect(at, end, ',', '}')))
				return SCHEMA_SCAN_DECLINED;
			if (*at++ == '}')
				break;
			at = skip_space(at, end);
		}
	}
	return skip_space(at, end) == end ? 0 : SCHEMA_SCAN_DECLINED;
}

/* ---- fields from jansson ------------------------------------------------------------ */

/* One jansson value as a scan value (arrays: their elements appended, not nested further). */
static int tree_value(struct schema_scan *scan, const json_t *value, bool element, struct scan_value *out)
{
	memset(out, 0, sizeof *out);
	switch (json_typeof(value)) {
	case JSON_OBJECT:
		out->kind = SCAN_OBJECT;
		return 0;
	case JSON_ARRAY:
		out->kind = SCAN_ARRAY;
		out->first = scan->element_count;
		if (element)
			return 0;   /* a nested array: refused wherever it stands, described as "an array" */
		for (size_t i = 0; i < json_array_size(value); i++) {
			int rc;
			if (scan->element_count == scan->element_capacity &&
			    (rc = grow((void **)&scan->elements, &scan->element_capacity, sizeof *scan->elements)))
				return rc;
			/* the elements of one array are contiguous: nested ones add none */
			size_t at = scan->element_count++;
			if ((rc = tree_value(scan, json_array_get(value, i), true, &scan->elements[at])))
				return rc;
			out->count++;
		}
		return 0;
	case JSON_STRING:
		out->kind = SCAN_STRING;
		out->escaped = true;
		out->decoded_at = scan->decoded.size;
		out->decoded_length = json_string_length(value);
		return buf_append(&scan->decoded, json_string_value(value), out->decoded_length);
	case JSON_INTEGER:
		out->kind = SCAN_INTEGER;
		out->integer = json_integer_value(value);
		return 0;
	case JSON_REAL:
		out->kind = SCAN_REAL;
		out->real = json_real_value(value);
		return 0;
	case JSON_TRUE:
		out->kind = SCAN_TRUE;
		return 0;
	case JSON_FALSE:
		out->kind = SCAN_FALSE;
		return 0;
	case JSON_NULL:
	default:
		out->kind = SCAN_NULL;
		return 0;
	}
}

int schema_scan_tree(struct schema_scan *scan, const json_t *object)
{
	scan->field_count = 0;
	scan->element_count = 0;
	buf_reset(&scan->decoded);
	const char *key;
	json_t *value;
	/* jansson's iteration takes a non-const object; it changes nothing */
	json_object_foreach((json_t *)object, key, value) {
		int rc;
		if (scan->field_count == scan->field_capacity &&
		    (rc = grow((void **)&scan->fields, &scan->field_capacity, sizeof *scan->fields)))
			return rc;
		struct scan_field *field = &scan->fields[scan->field_count++];
		field->key = key;
		field->key_length = strlen(key);
		if ((rc = tree_value(scan, value, false, &field->value)))
			return rc;
	}
	return 0;
}
