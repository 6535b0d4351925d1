/* Specification of schema: canonical rows, row validation, ids, inference, schema files. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "harness.h"
#include "schema.h"
#include "schema_int.h"
#include "ulid.h"

/* ---- helpers ------------------------------------------------------------------ */

static struct error_info last_error;
static char last_text[1 << 16];

/* A schema the test relies on being valid (aborts otherwise: a broken fixture). */
static struct schema schema_of(const char *text)
{
	struct schema schema;
	struct error_info error;
	error_info_clear(&error);
	if (schema_parse(text, strlen(text), &schema, &error)) {
		fprintf(stderr, "fixture schema refused: %s\n", error.message);
		abort();
	}
	return schema;
}

static void keep(const struct buf *text)
{
	size_t size = text->size < sizeof last_text - 1 ? text->size : sizeof last_text - 1;
	memcpy(last_text, text->data ? (const char *)text->data : "", size);
	last_text[size] = 0;
}

/* The canonical line for `line`, or NULL (message in last_error). */
static const char *row_of(const struct schema *schema, const char *line, bool allow_delete)
{
	struct schema_row row;
	schema_row_init(&row);
	error_info_clear(&last_error);
	int rc = schema_row_parse(schema, line, strlen(line), allow_delete, &row, &last_error);
	keep(&row.canonical);
	schema_row_free(&row);
	return rc ? NULL : last_text;
}

/* The error message for `line`, or "(accepted)". */
static const char *error_of(const struct schema *schema, const char *line, bool allow_delete)
{
	const char *canonical = row_of(schema, line, allow_delete);
	if (canonical)
		return "(accepted)";
	if (last_error.code != -EINVAL)
		return "(wrong errno)";
	return last_error.message;
}

static bool same(const char *got, const char *want)
{
	if (got && !strcmp(got, want))
		return true;
	fprintf(stderr, "    got:  %s%s\n    want: %s\n", got ? got : "(refused) ", got ? "" : last_error.message,
		want);
	return false;
}

static bool contains(const char *text, const char *part)
{
	if (strstr(text, part))
		return true;
	fprintf(stderr, "    \"%s\"\n    does not contain \"%s\"\n", text, part);
	return false;
}

/* A one-property node schema {"kind":"node","properties":{"p":{"type":TYPE}}}. */
static struct schema schema_with(const char *type)
{
	char text[256];
	snprintf(text, sizeof text, "{\"kind\":\"node\",\"properties\":{\"p\":{\"type\":\"%s\"}}}", type);
	return schema_of(text);
}

/* The canonical form of a value for a one-property schema of `type`: what follows "p": */
static const char *value_of(const char *type, const char *value)
{
	char line[4096];
	struct schema schema = schema_with(type);
	snprintf(line, sizeof line, "{\"id\":\"r\",\"p\":%s}", value);
	const char *canonical = row_of(&schema, line, false);
	schema_free(&schema);
	if (!canonical)
		return NULL;
	static char value_text[sizeof last_text];
	const char *start = strstr(canonical, "\"p\":");
	snprintf(value_text, sizeof value_text, "%s", start ? start + 4 : "");
	size_t length = strlen(value_text);
	if (length >= 2)
		value_text[length - 2] = 0; /* drop "}\n" */
	return value_text;
}

static const char *schema_error_of(const char *text, uint64_t *line)
{
	struct schema schema;
	error_info_clear(&last_error);
	int rc = schema_parse(text, strlen(text), &schema, &last_error);
	*line = last_error.line;
	if (rc == 0) {
		schema_free(&schema);
		return "(accepted)";
	}
	return last_error.code == -EINVAL && schema.property_count == 0 && schema.key == NULL ? last_error.message
											       : "(wrong state)";
}

static const char *schema_text_of(const struct schema *schema)
{
	struct buf out;
	buf_init(&out);
	if (schema_render(schema, &out))
		abort();
	keep(&out);
	buf_free(&out);
	return last_text;
}

static const char *people_schema_text =
	"{\"kind\":\"node\",\"properties\":{"
	"\"name\":{\"type\":\"string\",\"nullable\":false},"
	"\"age\":{\"type\":\"i64\",\"nullable\":true},"
	"\"score\":{\"type\":\"f64\",\"nullable\":true},"
	"\"tags\":{\"type\":\"list<string>\",\"nullable\":true}}}";

/* ---- canonical rendering -------------------------------------------------------- */

TEST(keys_render_in_schema_order_with_id_first)
{
	struct schema schema = schema_of(people_schema_text);
	CHECK(same(row_of(&schema, "{\"tags\":[\"x\"], \"age\": 3, \"name\":\"Ann\", \"id\":\"p1\"}", false),
		   "{\"id\":\"p1\",\"name\":\"Ann\",\"age\":3,\"tags\":[\"x\"]}\n"));
	schema_free(&schema);
}

TEST(null_and_absent_properties_are_omitted)
{
	struct schema schema = schema_of(people_schema_text);
	CHECK(same(row_of(&schema, "{\"id\":\"p1\",\"name\":\"Ann\",\"age\":null}", false),
		   "{\"id\":\"p1\",\"name\":\"Ann\"}\n"));
	schema_free(&schema);
}

TEST(insignificant_whitespace_is_dropped)
{
	struct schema schema = schema_of(people_schema_text);
	CHECK(same(row_of(&schema, " {\t\"id\" : \"p1\" ,\r\"name\" :\"Ann\" } \r", false),
		   "{\"id\":\"p1\",\"name\":\"Ann\"}\n"));
	schema_free(&schema);
}

TEST(strings_escape_quote_backslash_and_control_characters_only)
{
	CHECK(same(value_of("string", "\"q\\\"b\\\\s\\/ \\u00e9\\u20ac\\b\\f\\n\\r\\t\\u0001\\u001f\\u007f\""),
		   "\"q\\\"b\\\\s/ \xc3\xa9\xe2\x82\xac\\b\\f\\n\\r\\t\\u0001\\u001f\x7f\""));
}

TEST(non_ascii_text_stays_utf8)
{
	CHECK(same(value_of("string", "\"\xe6\x97\xa5\xe6\x9c\xac \\ud83d\\ude00\""),
		   "\"\xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80\""));
}

TEST(integral_f64_renders_without_a_fraction)
{
	CHECK(same(value_of("f64", "1.0"), "1"));
	CHECK(same(value_of("f64", "-250.000"), "-250"));
	CHECK(same(value_of("f64", "1e3"), "1000"));
}

TEST(f64_renders_the_shortest_decimal_that_round_trips)
{
	CHECK(same(value_of("f64", "0.1"), "0.1"));
	CHECK(same(value_of("f64", "0.30000000000000004"), "0.30000000000000004"));
	CHECK(same(value_of("f64", "2.50"), "2.5"));
	CHECK(same(value_of("f64", "123456789012.5"), "123456789012.5"));
	CHECK(same(value_of("f64", "3.141592653589793238"), "3.141592653589793"));
}

TEST(f64_uses_exponent_form_from_1e21_like_javascript)
{
	CHECK(same(value_of("f64", "1e21"), "1e+21"));
	CHECK(same(value_of("f64", "1.5e300"), "1.5e+300"));
	CHECK(same(value_of("f64", "1.7976931348623157e308"), "1.7976931348623157e+308"));
	CHECK(same(value_of("f64", "1e18"), "1000000000000000000"));
}

TEST(f64_beyond_i64_range_uses_exponent_form_so_it_parses_back)
{
	/* JavaScript would write 10000000000000000000, which a JSON parser with
	 * 64-bit integers refuses; canonical rows must parse back. */
	CHECK(same(value_of("f64", "1e19"), "1e+19"));
	CHECK(same(value_of("f64", "-9223372036854775808.0"), "-9.223372036854776e+18"));
	CHECK(same(value_of("f64", "1e20"), "1e+20"));
}

TEST(small_f64_uses_exponent_form_below_1e_minus_6)
{
	CHECK(same(value_of("f64", "0.000001"), "0.000001"));
	CHECK(same(value_of("f64", "0.000001234"), "0.000001234"));
	CHECK(same(value_of("f64", "1e-7"), "1e-7"));
	CHECK(same(value_of("f64", "1.5e-7"), "1.5e-7"));
	CHECK(same(value_of("f64", "5e-324"), "5e-324"));
	CHECK(same(value_of("f64", "123e-20"), "1.23e-18"));
}

TEST(negative_zero_renders_as_zero)
{
	CHECK(same(value_of("f64", "-0.0"), "0"));
	CHECK(same(value_of("f64", "-0"), "0"));
	CHECK(same(value_of("i64", "-0"), "0"));
	CHECK(same(value_of("vector<1>", "[-0.0]"), "[0]"));
}

TEST(f64_accepts_integers_and_renders_them_like_i64)
{
	CHECK(same(value_of("f64", "42"), "42"));
	CHECK(same(value_of("f64", "-7"), "-7"));
	CHECK(same(value_of("i64", "42"), "42"));
}

TEST(i64_extremes_render_exactly)
{
	CHECK(same(value_of("i64", "9223372036854775807"), "9223372036854775807"));
	CHECK(same(value_of("i64", "-9223372036854775808"), "-9223372036854775808"));
}

TEST(integers_beyond_i64_are_refused)
{
	CHECK(value_of("i64", "9223372036854775808") == NULL);
	CHECK(contains(last_error.message, "invalid JSON"));
	CHECK(contains(last_error.message, "too big"));
	CHECK(value_of("f64", "-9223372036854775809") == NULL);
}

TEST(i64_refuses_decimals_even_integral_ones)
{
	struct schema schema = schema_with("i64");
	CHECK(same(error_of(&schema, "{\"id\":\"r\",\"p\":1.5}", false), "property \"p\": expected i64, got number 1.5"));
	CHECK(same(error_of(&schema, "{\"id\":\"r\",\"p\":1.0}", false), "property \"p\": expected i64, got number 1"));
	schema_free(&schema);
}

TEST(type_mismatch_names_property_expected_type_and_value)
{
	struct schema schema = schema_of(people_schema_text);
	CHECK(same(error_of(&schema, "{\"id\":\"p\",\"name\":\"A\",\"age\":\"x\"}", false),
		   "property \"age\": expected i64, got string \"x\""));
	CHECK(same(error_of(&schema, "{\"id\":\"p\",\"name\":true}", false), "property \"name\": expected string, got true"));
	CHECK(same(error_of(&schema, "{\"id\":\"p\",\"name\":{}}", false),
		   "property \"name\": expected string, got an object"));
	schema_free(&schema);
}

TEST(long_values_are_shortened_in_messages)
{
	struct schema schema = schema_with("i64");
	CHECK(same(error_of(&schema, "{\"id\":\"r\",\"p\":\"0123456789012345678901234567890123456789abcdef\"}", false),
		   "property \"p\": expected i64, got string \"0123456789012345678901234567890123456789...\""));
	CHECK(same(error_of(&schema, "{\"id\":\"r\",\"p\":\"a\\nb\"}", false),
		   "property \"p\": expected i64, got string \"a\\u000ab\""));
	schema_free(&schema);
}

TEST(bool_renders_true_and_false)
{
	CHECK(same(value_of("bool", "true"), "true"));
	CHECK(same(value_of("bool", "false"), "false"));
	CHECK(value_of("bool", "1") == NULL);
}

TEST(lists_render_each_element_canonically)
{
	CHECK(same(value_of("list<f64>", "[ 1, 2.50, 1e21 ]"), "[1,2.5,1e+21]"));
	CHECK(same(value_of("list<string>", "[\"a\", \"b\\\"\"]"), "[\"a\",\"b\\\"\"]"));
	CHECK(same(value_of("list<i64>", "[]"), "[]"));
	CHECK(same(value_of("list<date>", "[\"2024-02-29\"]"), "[\"2024-02-29\"]"));
}

TEST(list_element_errors_name_the_index)
{
	struct schema schema = schema_with("list<i64>");
	CHECK(same(error_of(&schema, "{\"id\":\"r\",\"p\":[1,2,\"x\"]}", false),
		   "property \"p\"[2]: expected i64, got string \"x\""));
	CHECK(same(error_of(&schema, "{\"id\":\"r\",\"p\":[null]}", false), "property \"p\"[0]: expected i64, got null"));
	CHECK(same(error_of(&schema, "{\"id\":\"r\",\"p\":5}", false), "property \"p\": expected list<i64>, got integer 5"));
	schema_free(&schema);
}

TEST(vector_elements_render_as_shortest_f32)
{
	CHECK(same(value_of("vector<4>", "[0.1, 1, 16777217, 3.4028234663852886e38]"),
		   "[0.1,1,16777216,3.4028235e+38]"));
	CHECK(same(value_of("vector<2>", "[1e-7, 0.333333333333]"), "[1e-7,0.33333334]"));
}

TEST(vector_elements_beyond_f32_are_refused)
{
	struct schema schema = schema_with("vector<2>");
	CHECK(same(error_of(&schema, "{\"id\":\"r\",\"p\":[1, 1e39]}", false),
		   "property \"p\"[1]: expected a number that fits f32, got number 1e+39"));
	schema_free(&schema);
}

TEST(vector_needs_exactly_its_dimension_of_numbers)
{
	struct schema schema = schema_with("vector<3>");
	CHECK(same(error_of(&schema, "{\"id\":\"r\",\"p\":[1,2]}", false),
		   "property \"p\": expected vector<3> (3 numbers), got 2 elements"));
	CHECK(same(error_of(&schema, "{\"id\":\"r\",\"p\":[1,2,\"3\"]}", false),
		   "property \"p\"[2]: expected a number (vector elements are f32), got string \"3\""));
	schema_free(&schema);
}

TEST(dates_must_be_real_calendar_days)
{
	CHECK(same(value_of("date", "\"2024-02-29\""), "\"2024-02-29\""));
	CHECK(same(value_of("date", "\"2000-02-29\""), "\"2000-02-29\""));
	CHECK(same(value_of("date", "\"2023-12-31\""), "\"2023-12-31\""));
	CHECK(value_of("date", "\"2023-02-29\"") == NULL);
	CHECK(same(last_error.message,
		   "property \"p\": expected a date (YYYY-MM-DD, a real calendar day), got string \"2023-02-29\""));
	CHECK(value_of("date", "\"1900-02-29\"") == NULL);
	CHECK(value_of("date", "\"2024-04-31\"") == NULL);
	CHECK(value_of("date", "\"2024-13-01\"") == NULL);
	CHECK(value_of("date", "\"2024-00-10\"") == NULL);
	CHECK(value_of("date", "\"2024-1-01\"") == NULL);
	CHECK(value_of("date", "\"2024-01-01T00:00:00Z\"") == NULL);
	CHECK(value_of("date", "20240101") == NULL);
}

TEST(datetimes_follow_rfc_3339_and_are_kept_as_given)
{
	CHECK(same(value_of("datetime", "\"2024-01-31T12:00:00Z\""), "\"2024-01-31T12:00:00Z\""));
	CHECK(same(value_of("datetime", "\"2024-01-31T23:59:60.123456789+05:30\""),
		   "\"2024-01-31T23:59:60.123456789+05:30\""));
	CHECK(same(value_of("datetime", "\"2024-02-29T00:00:00.5-00:00\""), "\"2024-02-29T00:00:00.5-00:00\""));
	CHECK(value_of("datetime", "\"2024-01-31t12:00:00Z\"") == NULL);
	CHECK(value_of("datetime", "\"2024-01-31 12:00:00Z\"") == NULL);
	CHECK(value_of("datetime", "\"2024-01-31T12:00Z\"") == NULL);
	CHECK(value_of("datetime", "\"2024-01-31T12:00:00\"") == NULL);
	CHECK(value_of("datetime", "\"2024-01-31T12:00:00.Z\"") == NULL);
	CHECK(value_of("datetime", "\"2024-01-31T12:00:00.1234567890Z\"") == NULL);
	CHECK(value_of("datetime", "\"2024-01-31T24:00:00Z\"") == NULL);
	CHECK(value_of("datetime", "\"2024-01-31T12:00:00+0530\"") == NULL);
	CHECK(value_of("datetime", "\"2024-01-31T12:00:00+24:00\"") == NULL);
	CHECK(value_of("datetime", "\"2023-02-29T12:00:00Z\"") == NULL);
	CHECK(contains(last_error.message, "expected a datetime (RFC 3339"));
}

TEST(canonical_rows_parse_back_to_the_same_bytes)
{
	struct schema schema = schema_of(
		"{\"kind\":\"node\",\"properties\":{\"s\":{\"type\":\"string\"},\"f\":{\"type\":\"f64\"},"
		"\"l\":{\"type\":\"list<f64>\"},\"v\":{\"type\":\"vector<3>\"},\"d\":{\"type\":\"datetime\"}}}");
	const char *first = row_of(&schema,
				   "{\"d\":\"2024-01-31T12:00:00Z\",\"v\":[0.1,2,3e30],\"l\":[1e-9,5,1e300],"
				   "\"f\":-1e21,\"s\":\"\\u0000x\\\"\",\"id\":\"a\\tb\"}",
				   false);
	CHECK(first == NULL); /* \u0000 is refused; use a legal control character instead */
	first = row_of(&schema,
		       "{\"d\":\"2024-01-31T12:00:00Z\",\"v\":[0.1,2,3e30],\"l\":[1e-9,5,1e300],"
		       "\"f\":-1e21,\"s\":\"\\u0002x\\\"\",\"id\":\"a\\tb\"}",
		       false);
	CHECK(first != NULL);
	char copy[1024];
	snprintf(copy, sizeof copy, "%s", first);
	copy[strlen(copy) - 1] = 0; /* without "\n", as the caller passes lines */
	CHECK(same(row_of(&schema, copy, false), first));
	CHECK(same(first, "{\"id\":\"a\\tb\",\"s\":\"\\u0002x\\\"\",\"f\":-1e+21,\"l\":[1e-9,5,1e+300],"
			  "\"v\":[0.1,2,3e+30],\"d\":\"2024-01-31T12:00:00Z\"}\n"));
	schema_free(&schema);
}

/* ---- malformed and hostile input -------------------------------------------------- */

TEST(invalid_json_is_refused_with_its_column)
{
	struct schema schema = schema_of(people_schema_text);
	CHECK(contains(error_of(&schema, "{\"id\":\"p\",\"name\":}", false), "invalid JSON at column 18: unexpected token near '}'"));
	CHECK(contains(error_of(&schema, "{\"id\":'p'}", false), "invalid JSON"));
	CHECK(contains(error_of(&schema, "{\"id\":\"p\"", false), "invalid JSON"));
	schema_free(&schema);
}

TEST(trailing_garbage_after_the_object_is_refused)
{
	struct schema schema = schema_of(people_schema_text);
	CHECK(contains(error_of(&schema, "{\"id\":\"p\",\"name\":\"a\"} x", false), "invalid JSON"));
	CHECK(contains(error_of(&schema, "{\"id\":\"p\",\"name\":\"a\"}{}", false), "invalid JSON"));
	schema_free(&schema);
}

TEST(duplicate_keys_are_refused)
{
	struct schema schema = schema_of(people_schema_text);
	CHECK(contains(error_of(&schema, "{\"id\":\"p\",\"name\":\"a\",\"name\":\"b\"}", false), "duplicate object key"));
	schema_free(&schema);
}

TEST(invalid_utf8_is_refused)
{
	struct schema schema = schema_of(people_schema_text);
	const char *message = error_of(&schema, "{\"id\":\"p\",\"name\":\"a\xff\xfe\"}", false);
	CHECK(contains(message, "invalid JSON"));
	for (const char *at = message; *at; at++)
		CHECK((unsigned char)*at >= 0x20 && (unsigned char)*at < 0x7f); /* printable on one line */
	CHECK(contains(error_of(&schema, "{\"id\":\"p\",\"name\":\"\xc0\xaf\"}", false), "invalid JSON"));
	CHECK(contains(error_of(&schema, "{\"id\":\"p\",\"name\":\"\\ud800\"}", false), "invalid JSON"));
	schema_free(&schema);
}

TEST(nul_characters_are_refused)
{
	struct schema schema = schema_of(people_schema_text);
	CHECK(contains(error_of(&schema, "{\"id\":\"p\",\"name\":\"a\\u0000b\"}", false), "invalid JSON"));
	struct schema_row row;
	schema_row_init(&row);
	const char raw[] = "{\"id\":\"p\",\"name\":\"a\0b\"}";
	CHECK(schema_row_parse(&schema, raw, sizeof raw - 1, false, &row, &last_error) == -EINVAL);
	schema_row_free(&row);
	schema_free(&schema);
}

TEST(a_line_that_is_not_an_object_is_refused)
{
	struct schema schema = schema_of(people_schema_text);
	CHECK(same(error_of(&schema, "[1,2]", false), "expected a JSON object, got an array"));
	CHECK(same(error_of(&schema, "\"id\"", false), "expected a JSON object, got string \"id\""));
	CHECK(same(error_of(&schema, "42", false), "expected a JSON object, got integer 42"));
	schema_free(&schema);
}

TEST(an_empty_line_is_refused)
{
	struct schema schema = schema_of(people_schema_text);
	CHECK(same(error_of(&schema, "", false), "empty line (each line is one JSON object)"));
	CHECK(contains(error_of(&schema, "   ", false), "invalid JSON"));
	schema_free(&schema);
}

TEST(deep_nesting_is_refused_without_crashing)
{
	struct schema schema = schema_of(people_schema_text);
	size_t depth = 200000;
	char *line = malloc(2 * depth + 32);
	strcpy(line, "{\"id\":\"p\",\"name\":");
	size_t at = strlen(line);
	memset(line + at, '[', depth);
	memset(line + at + depth, ']', depth);
	strcpy(line + at + 2 * depth, "}");
	CHECK(contains(error_of(&schema, line, false), "invalid JSON"));
	free(line);
	schema_free(&schema);
}

TEST(huge_numbers_are_refused_without_crashing)
{
	struct schema schema = schema_with("f64");
	CHECK(contains(error_of(&schema, "{\"id\":\"r\",\"p\":1e999}", false), "invalid JSON"));
	CHECK(contains(error_of(&schema, "{\"id\":\"r\",\"p\":-1e999}", false), "invalid JSON"));
	CHECK(contains(error_of(&schema, "{\"id\":\"r\",\"p\":123456789012345678901234567890}", false), "invalid JSON"));
	CHECK(contains(error_of(&schema, "{\"id\":\"r\",\"p\":NaN}", false), "invalid JSON"));
	CHECK(contains(error_of(&schema, "{\"id\":\"r\",\"p\":Infinity}", false), "invalid JSON"));
	CHECK(same(row_of(&schema, "{\"id\":\"r\",\"p\":1e-999}", false), "{\"id\":\"r\",\"p\":0}\n"));
	schema_free(&schema);
}

TEST(binary_bytes_are_refused_without_crashing)
{
	struct schema schema = schema_of(people_schema_text);
	uint64_t state = 0x9e3779b97f4a7c15u;
	char line[300];
	for (int round = 0; round < 2000; round++) {
		size_t size = 1 + (size_t)(round % (int)sizeof line);
		for (size_t i = 0; i < size; i++) {
			state = state * 6364136223846793005u + 1442695040888963407u;
			line[i] = (char)(state >> 56);
		}
		if (round % 2)
			line[0] = '{';
		struct schema_row row;
		schema_row_init(&row);
		int rc = schema_row_parse(&schema, line, size, true, &row, &last_error);
		CHECK(rc == -EINVAL || rc == 0);
		schema_row_free(&row);
	}
	schema_free(&schema);
}

TEST(unknown_property_names_it_and_says_what_to_do)
{
	struct schema schema = schema_of(people_schema_text);
	CHECK(same(error_of(&schema, "{\"id\":\"p\",\"name\":\"a\",\"nickname\":\"b\"}", false),
		   "unknown property 'nickname' (add it to schema/<Name>.json first)"));
	schema_free(&schema);
}

TEST(a_missing_non_nullable_property_is_refused)
{
	struct schema schema = schema_of(people_schema_text);
	CHECK(same(error_of(&schema, "{\"id\":\"p\",\"age\":1}", false), "property \"name\" is missing and not nullable"));
	CHECK(same(error_of(&schema, "{\"id\":\"p\",\"name\":null}", false), "property \"name\" is missing and not nullable"));
	schema_free(&schema);
}

TEST(from_and_to_belong_to_edge_rows)
{
	struct schema schema = schema_of(people_schema_text);
	CHECK(same(error_of(&schema, "{\"id\":\"p\",\"name\":\"a\",\"from\":\"x\"}", false),
		   "'from' is only for edge rows (this is a node table)"));
	schema_free(&schema);
}

TEST(keys_starting_with_at_other_than_delete_are_refused)
{
	struct schema schema = schema_of(people_schema_text);
	CHECK(same(error_of(&schema, "{\"id\":\"p\",\"name\":\"a\",\"@type\":\"x\"}", true),
		   "unknown directive '@type' (the directives are \"@delete\" and \"@patch\")"));
	schema_free(&schema);
}

TEST(a_patch_line_in_a_merge_gives_its_id_and_leaves_the_properties_to_the_writer)
{
	struct schema schema = schema_of(people_schema_text);
	struct schema_row row;
	schema_row_init(&row);
	struct error_info error;
	error_info_clear(&error);
	const char *line = "{\"id\":\"p\",\"@patch\":true,\"age\":3}";
	CHECK_EQ(schema_row_parse(&schema, line, strlen(line), true, &row, &error), 0);
	CHECK(row.is_patch && !row.is_delete);
	CHECK(row.id.size == 1 && row.id.data[0] == 'p');
	CHECK_EQ(row.canonical.size, 0);
	CHECK(same(error_of(&schema, line, false), "\"@patch\" is only allowed when appending to a table (a merge)"));
	CHECK(same(error_of(&schema, "{\"id\":\"p\",\"@patch\":1}", true), "\"@patch\" must be true, got integer 1"));
	schema_row_free(&row);
	schema_free(&schema);
}

/* ---- ids ------------------------------------------------------------------------- */

TEST(a_given_id_must_be_a_string)
{
	struct schema schema = schema_of(people_schema_text);
	CHECK(same(error_of(&schema, "{\"id\":7,\"name\":\"a\"}", false), "\"id\" must be a string, got integer 7"));
	CHECK(same(error_of(&schema, "{\"id\":null,\"name\":\"a\"}", false), "\"id\" must be a string, got null"));
	schema_free(&schema);
}

TEST(an_id_is_1_to_512_bytes_without_newline)
{
	struct schema schema = schema_of(people_schema_text);
	char line[1200];
	CHECK(same(error_of(&schema, "{\"id\":\"\",\"name\":\"a\"}", false), "\"id\" must not be empty"));
	CHECK(same(error_of(&schema, "{\"id\":\"a\\nb\",\"name\":\"a\"}", false), "\"id\" must not contain a newline"));
	snprintf(line, sizeof line, "{\"id\":\"%0512d\",\"name\":\"a\"}", 0);
	CHECK(row_of(&schema, line, false) != NULL);
	snprintf(line, sizeof line, "{\"id\":\"%0513d\",\"name\":\"a\"}", 0);
	CHECK(same(error_of(&schema, line, false), "\"id\" is 513 bytes long, more than the limit of 512"));
	schema_free(&schema);
}

TEST(rows_without_key_or_id_get_a_fresh_ulid)
{
	struct schema schema = schema_of(people_schema_text);
	struct schema_row first, second;
	struct ulid parsed;
	schema_row_init(&first);
	schema_row_init(&second);
	const char *line = "{\"name\":\"a\"}";
	CHECK(schema_row_parse(&schema, line, strlen(line), false, &first, &last_error) == 0);
	CHECK(schema_row_parse(&schema, line, strlen(line), false, &second, &last_error) == 0);
	CHECK_EQ(first.id.size, 26);
	CHECK(ulid_parse(buf_cstr(&first.id), &parsed) == 0);
	CHECK(strcmp(buf_cstr(&first.id), buf_cstr(&second.id)) < 0);
	char expected[128];
	snprintf(expected, sizeof expected, "{\"id\":\"%s\",\"name\":\"a\"}\n", buf_cstr(&first.id));
	CHECK(same(buf_cstr(&first.canonical), expected));
	schema_row_free(&first);
	schema_row_free(&second);
	schema_free(&schema);
}

static const char *keyed_schema_text =
	"{\"kind\":\"node\",\"key\":[\"email\"],\"properties\":{"
	"\"email\":{\"type\":\"string\",\"nullable\":false},\"n\":{\"type\":\"i64\"}}}";

TEST(a_single_key_gives_its_value_as_the_id)
{
	struct schema schema = schema_of(keyed_schema_text);
	CHECK(same(row_of(&schema, "{\"n\":1,\"email\":\"a@b.c\"}", false), "{\"id\":\"a@b.c\",\"email\":\"a@b.c\",\"n\":1}\n"));
	CHECK(same(row_of(&schema, "{\"id\":\"a@b.c\",\"email\":\"a@b.c\"}", false), "{\"id\":\"a@b.c\",\"email\":\"a@b.c\"}\n"));
	schema_free(&schema);
	schema = schema_of("{\"kind\":\"node\",\"key\":[\"k\"],\"properties\":{\"k\":{\"type\":\"i64\",\"nullable\":false}}}");
	CHECK(same(row_of(&schema, "{\"k\":-42}", false), "{\"id\":\"-42\",\"k\":-42}\n"));
	schema_free(&schema);
	schema = schema_of("{\"kind\":\"node\",\"key\":[\"k\"],\"properties\":{\"k\":{\"type\":\"f64\",\"nullable\":false}}}");
	CHECK(same(row_of(&schema, "{\"k\":2.50}", false), "{\"id\":\"2.5\",\"k\":2.5}\n"));
	CHECK(same(row_of(&schema, "{\"k\":9007199254740993}", false),
		   "{\"id\":\"9007199254740992\",\"k\":9007199254740992}\n"));
	schema_free(&schema);
	schema = schema_of("{\"kind\":\"node\",\"key\":[\"k\"],\"properties\":{\"k\":{\"type\":\"bool\",\"nullable\":false}}}");
	CHECK(same(row_of(&schema, "{\"k\":false}", false), "{\"id\":\"false\",\"k\":false}\n"));
	schema_free(&schema);
}

TEST(several_keys_give_a_json_array_as_the_id)
{
	struct schema schema = schema_of(
		"{\"kind\":\"node\",\"key\":[\"a\",\"b\"],\"properties\":{\"b\":{\"type\":\"i64\",\"nullable\":false},"
		"\"a\":{\"type\":\"string\",\"nullable\":false}}}");
	CHECK(same(row_of(&schema, "{\"a\":\"x\\\"y\",\"b\":1}", false),
		   "{\"id\":\"[\\\"x\\\\\\\"y\\\",1]\",\"b\":1,\"a\":\"x\\\"y\"}\n"));
	CHECK(same(row_of(&schema, "{\"id\":\"[\\\"a\\\",1]\",\"a\":\"a\",\"b\":1}", false),
		   "{\"id\":\"[\\\"a\\\",1]\",\"b\":1,\"a\":\"a\"}\n"));
	schema_free(&schema);
}

TEST(a_given_id_must_agree_with_the_key)
{
	struct schema schema = schema_of(keyed_schema_text);
	CHECK(same(error_of(&schema, "{\"id\":\"other\",\"email\":\"a@b.c\"}", false),
		   "\"id\" is \"other\" but the key gives \"a@b.c\" (omit \"id\" or make it agree)"));
	schema_free(&schema);
}

TEST(a_key_derived_id_obeys_the_id_rules)
{
	struct schema schema = schema_of(keyed_schema_text);
	CHECK(same(error_of(&schema, "{\"email\":\"\"}", false), "the id derived from the key must not be empty"));
	CHECK(same(error_of(&schema, "{\"email\":\"a\\nb\"}", false),
		   "the id derived from the key must not contain a newline"));
	schema_free(&schema);
}

/* ---- edges ----------------------------------------------------------------------- */

static const char *knows_schema_text =
	"{\"kind\":\"edge\",\"from\":\"Person\",\"to\":\"Person\",\"properties\":{\"since\":{\"type\":\"date\"}}}";

TEST(edge_rows_render_id_from_to_then_properties)
{
	struct schema schema = schema_of(knows_schema_text);
	struct schema_row row;
	schema_row_init(&row);
	const char *line = "{\"since\":\"2020-01-01\",\"to\":\"b\",\"from\":\"a\",\"id\":\"e1\"}";
	CHECK(schema_row_parse(&schema, line, strlen(line), false, &row, &last_error) == 0);
	CHECK(same(buf_cstr(&row.canonical), "{\"id\":\"e1\",\"from\":\"a\",\"to\":\"b\",\"since\":\"2020-01-01\"}\n"));
	CHECK(same(buf_cstr(&row.from), "a"));
	CHECK(same(buf_cstr(&row.to), "b"));
	CHECK(same(buf_cstr(&row.id), "e1"));
	schema_row_free(&row);
	schema_free(&schema);
}

TEST(edge_rows_without_id_get_a_ulid)
{
	struct schema schema = schema_of(knows_schema_text);
	const char *canonical = row_of(&schema, "{\"from\":\"a\",\"to\":\"b\"}", false);
	CHECK(canonical != NULL);
	CHECK(strlen(canonical) == strlen("{\"id\":\"\",\"from\":\"a\",\"to\":\"b\"}\n") + 26);
	schema_free(&schema);
}

TEST(edge_rows_need_from_and_to_strings)
{
	struct schema schema = schema_of(knows_schema_text);
	CHECK(same(error_of(&schema, "{\"to\":\"b\"}", false),
		   "edge rows need \"from\" (the id of the node the edge starts at)"));
	CHECK(same(error_of(&schema, "{\"from\":\"a\"}", false), "edge rows need \"to\" (the id of the node the edge ends at)"));
	CHECK(same(error_of(&schema, "{\"from\":1,\"to\":\"b\"}", false), "\"from\" must be a string, got integer 1"));
	CHECK(same(error_of(&schema, "{\"from\":\"a\",\"to\":\"\"}", false), "\"to\" must not be empty"));
	schema_free(&schema);
}

/* ---- deletes --------------------------------------------------------------------- */

TEST(a_delete_line_names_a_row_to_delete_in_merges)
{
	struct schema schema = schema_of(keyed_schema_text);
	struct schema_row row;
	schema_row_init(&row);
	const char *line = "{\"id\":\"a@b.c\",\"@delete\":true}";
	CHECK(schema_row_parse(&schema, line, strlen(line), true, &row, &last_error) == 0);
	CHECK(row.is_delete);
	CHECK(same(buf_cstr(&row.id), "a@b.c"));
	CHECK_EQ(row.canonical.size, 0);
	schema_row_free(&row);
	schema_free(&schema);
}

TEST(a_delete_line_is_refused_outside_merges)
{
	struct schema schema = schema_of(people_schema_text);
	CHECK(same(error_of(&schema, "{\"id\":\"p\",\"@delete\":true}", false),
		   "\"@delete\" is only allowed when appending to a table (a merge)"));
	schema_free(&schema);
}

TEST(a_delete_line_has_only_id_and_delete)
{
	struct schema schema = schema_of(people_schema_text);
	CHECK(same(error_of(&schema, "{\"id\":\"p\",\"@delete\":true,\"name\":\"a\"}", true),
		   "a delete line has only \"id\" and \"@delete\", found 'name'"));
	CHECK(same(error_of(&schema, "{\"@delete\":true}", true), "a delete line needs the \"id\" of the row to delete"));
	CHECK(same(error_of(&schema, "{\"id\":\"p\",\"@delete\":false}", true), "\"@delete\" must be true or \"detach\", got false"));
	CHECK(same(error_of(&schema, "{\"id\":\"\",\"@delete\":true}", true), "\"id\" must not be empty"));
	schema_free(&schema);
}

TEST(a_detach_delete_is_a_delete_that_says_so)
{
	struct schema schema = schema_of(people_schema_text);
	struct schema_row row;
	schema_row_init(&row);
	struct error_info error;
	const char *detach = "{\"id\":\"p\",\"@delete\":\"detach\"}";
	CHECK_EQ(schema_row_parse(&schema, detach, strlen(detach), true, &row, &error), 0);
	CHECK(row.is_delete && row.is_detach);
	CHECK(strcmp(buf_cstr(&row.id), "p") == 0);
	const char *plain = "{\"id\":\"p\",\"@delete\":true}";
	CHECK_EQ(schema_row_parse(&schema, plain, strlen(plain), true, &row, &error), 0);
	CHECK(row.is_delete && !row.is_detach);
	CHECK(same(error_of(&schema, "{\"id\":\"p\",\"@delete\":\"cascade\"}", true),
		   "\"@delete\" must be true or \"detach\", got string \"cascade\""));
	schema_row_free(&row);
	schema_free(&schema);
}

TEST(an_id_with_a_nul_character_is_refused)
{
	struct schema schema = schema_of(people_schema_text);
	/* refused as JSON already (ids are file names under graph/ and end adjacency keys with 0x00) */
	CHECK(strstr(error_of(&schema, "{\"id\":\"a\\u0000b\"}", false), "strings must not contain a NUL character (\\u0000)"));
	schema_free(&schema);
}

TEST(a_failed_parse_leaves_the_row_empty)
{
	struct schema schema = schema_of(people_schema_text);
	struct schema_row row;
	schema_row_init(&row);
	const char *good = "{\"id\":\"p\",\"name\":\"a\"}", *bad = "{\"id\":\"q\",\"name\":1}";
	CHECK(schema_row_parse(&schema, good, strlen(good), false, &row, &last_error) == 0);
	CHECK(schema_row_parse(&schema, bad, strlen(bad), false, &row, &last_error) == -EINVAL);
	CHECK_EQ(row.canonical.size, 0);
	CHECK_EQ(row.id.size, 0);
	CHECK(!row.is_delete);
	schema_row_free(&row);
	schema_free(&schema);
}

/* ---- inference ------------------------------------------------------------------- */

struct inferred_table {
	struct schema_inference *inference;
	char rows[16][512];
	int count;
};

/* Feeds lines (NULL-terminated); returns 0 or the rc of the first refused one. */
static int feed(struct inferred_table *table, const char *const *lines, bool allow_delete)
{
	struct schema_row row;
	schema_row_init(&row);
	int rc = 0;
	for (; *lines && rc == 0; lines++) {
		error_info_clear(&last_error);
		rc = schema_inference_row(table->inference, *lines, strlen(*lines), allow_delete, &row, &last_error);
		if (rc == 0 && table->count < 16)
			snprintf(table->rows[table->count++], 512, "%s", buf_cstr(&row.canonical));
	}
	schema_row_free(&row);
	return rc;
}

static const char *inferred_schema_text(struct inferred_table *table)
{
	struct schema schema;
	if (schema_inference_finish(table->inference, &schema))
		abort();
	const char *text = schema_text_of(&schema);
	schema_free(&schema);
	return text;
}

TEST(inference_orders_properties_by_first_appearance)
{
	struct inferred_table table = {0};
	CHECK(schema_inference_open(&table.inference) == 0);
	const char *lines[] = {"{\"id\":\"1\",\"b\":1,\"a\":\"x\"}", "{\"c\":true,\"a\":\"y\",\"id\":\"2\",\"b\":2}", NULL};
	CHECK(feed(&table, lines, false) == 0);
	CHECK(same(table.rows[0], "{\"id\":\"1\",\"b\":1,\"a\":\"x\"}\n"));
	CHECK(same(table.rows[1], "{\"id\":\"2\",\"b\":2,\"a\":\"y\",\"c\":true}\n"));
	CHECK(same(inferred_schema_text(&table),
		   "{\"kind\":\"node\",\"properties\":{\"b\":{\"type\":\"i64\",\"nullable\":false},"
		   "\"a\":{\"type\":\"string\",\"nullable\":false},\"c\":{\"type\":\"bool\",\"nullable\":true}}}\n"));
	schema_inference_free(table.inference);
}

TEST(inference_widens_i64_to_f64_without_changing_bytes)
{
	struct inferred_table table = {0};
	CHECK(schema_inference_open(&table.inference) == 0);
	const char *lines[] = {"{\"id\":\"1\",\"x\":1}", "{\"id\":\"2\",\"x\":2.5}", "{\"id\":\"3\",\"x\":3.0}", NULL};
	CHECK(feed(&table, lines, false) == 0);
	CHECK(same(table.rows[0], "{\"id\":\"1\",\"x\":1}\n"));
	CHECK(same(table.rows[2], "{\"id\":\"3\",\"x\":3}\n"));
	CHECK(same(inferred_schema_text(&table),
		   "{\"kind\":\"node\",\"properties\":{\"x\":{\"type\":\"f64\",\"nullable\":false}}}\n"));
	schema_inference_free(table.inference);
}

TEST(inference_widens_inside_lists)
{
	struct inferred_table table = {0};
	CHECK(schema_inference_open(&table.inference) == 0);
	const char *lines[] = {"{\"id\":\"1\",\"x\":[]}", "{\"id\":\"2\",\"x\":[1,2]}", "{\"id\":\"3\",\"x\":[0.5]}",
			       "{\"id\":\"4\",\"y\":[1,2.5]}", NULL};
	CHECK(feed(&table, lines, false) == 0);
	CHECK(same(inferred_schema_text(&table),
		   "{\"kind\":\"node\",\"properties\":{\"x\":{\"type\":\"list<f64>\",\"nullable\":true},"
		   "\"y\":{\"type\":\"list<f64>\",\"nullable\":true}}}\n"));
	schema_inference_free(table.inference);
}

TEST(inference_refuses_conflicting_types)
{
	struct inferred_table table = {0};
	CHECK(schema_inference_open(&table.inference) == 0);
	const char *lines[] = {"{\"id\":\"1\",\"x\":\"a\"}", "{\"id\":\"2\",\"x\":2}", NULL};
	CHECK(feed(&table, lines, false) == -EINVAL);
	CHECK(same(last_error.message, "property \"x\": expected string (as in earlier rows), got i64"));
	const char *lists[] = {"{\"id\":\"3\",\"y\":[1]}", "{\"id\":\"4\",\"y\":[\"a\"]}", NULL};
	CHECK(feed(&table, lists, false) == -EINVAL);
	CHECK(same(last_error.message, "property \"y\": expected list<i64> (as in earlier rows), got list<string>"));
	const char *mixed[] = {"{\"id\":\"5\",\"z\":[1,\"a\"]}", NULL};
	CHECK(feed(&table, mixed, false) == -EINVAL);
	CHECK(same(last_error.message, "property \"z\"[1]: expected i64, got string \"a\""));
	schema_inference_free(table.inference);
}

TEST(inference_marks_properties_missing_from_some_rows_nullable)
{
	struct inferred_table table = {0};
	CHECK(schema_inference_open(&table.inference) == 0);
	const char *lines[] = {"{\"id\":\"1\",\"a\":1,\"b\":1,\"c\":null}", "{\"id\":\"2\",\"a\":2,\"b\":null}",
			       "{\"id\":\"3\",\"a\":3,\"d\":\"x\"}", NULL};
	CHECK(feed(&table, lines, false) == 0);
	CHECK(same(table.rows[1], "{\"id\":\"2\",\"a\":2}\n"));
	CHECK(same(inferred_schema_text(&table),
		   "{\"kind\":\"node\",\"properties\":{\"a\":{\"type\":\"i64\",\"nullable\":false},"
		   "\"b\":{\"type\":\"i64\",\"nullable\":true},\"c\":{\"type\":\"string\",\"nullable\":true},"
		   "\"d\":{\"type\":\"string\",\"nullable\":true}}}\n"));
	schema_inference_free(table.inference);
}

TEST(inference_keeps_date_like_strings_as_strings)
{
	struct inferred_table table = {0};
	CHECK(schema_inference_open(&table.inference) == 0);
	const char *lines[] = {"{\"id\":\"1\",\"d\":\"2024-01-01\",\"t\":\"2024-01-01T00:00:00Z\"}", NULL};
	CHECK(feed(&table, lines, false) == 0);
	CHECK(same(inferred_schema_text(&table),
		   "{\"kind\":\"node\",\"properties\":{\"d\":{\"type\":\"string\",\"nullable\":false},"
		   "\"t\":{\"type\":\"string\",\"nullable\":false}}}\n"));
	schema_inference_free(table.inference);
}

TEST(inference_refuses_edge_rows)
{
	struct inferred_table table = {0};
	CHECK(schema_inference_open(&table.inference) == 0);
	const char *lines[] = {"{\"from\":\"a\",\"to\":\"b\"}", NULL};
	CHECK(feed(&table, lines, false) == -EINVAL);
	CHECK(same(last_error.message,
		   "edge tables need a schema: write schema/<Name>.json with kind, from and to first"));
	schema_inference_free(table.inference);
}

TEST(inference_refuses_objects_and_bad_names)
{
	struct inferred_table table = {0};
	CHECK(schema_inference_open(&table.inference) == 0);
	const char *objects[] = {"{\"id\":\"1\",\"o\":{\"a\":1}}", NULL};
	CHECK(feed(&table, objects, false) == -EINVAL);
	CHECK(contains(last_error.message, "property \"o\": objects are not supported"));
	const char *names[] = {"{\"id\":\"1\",\"a b\":1}", NULL};
	CHECK(feed(&table, names, false) == -EINVAL);
	CHECK(same(last_error.message, "invalid property name 'a b' (names match [A-Za-z_][A-Za-z0-9_]{0,127})"));
	const char *nested[] = {"{\"id\":\"1\",\"l\":[[1]]}", NULL};
	CHECK(feed(&table, nested, false) == -EINVAL);
	CHECK(contains(last_error.message, "property \"l\"[0]: expected a string, number or boolean"));
	schema_inference_free(table.inference);
}

TEST(inference_refuses_decimals_mixed_with_integers_f64_cannot_hold)
{
	struct inferred_table table = {0};
	CHECK(schema_inference_open(&table.inference) == 0);
	const char *lines[] = {"{\"id\":\"1\",\"x\":9007199254740993}", "{\"id\":\"2\",\"x\":0.5}", NULL};
	CHECK(feed(&table, lines, false) == -EINVAL);
	CHECK(contains(last_error.message, "property \"x\" mixes decimals with integers beyond 2^53"));
	const char *list[] = {"{\"id\":\"3\",\"y\":[0.5,9007199254740993]}", NULL};
	CHECK(feed(&table, list, false) == -EINVAL);
	schema_inference_free(table.inference);
}

TEST(a_refused_row_leaves_the_inference_unchanged)
{
	struct inferred_table table = {0};
	CHECK(schema_inference_open(&table.inference) == 0);
	const char *first[] = {"{\"id\":\"1\",\"a\":1}", NULL};
	const char *refused[] = {"{\"id\":\"2\",\"new\":1,\"a\":\"x\"}", NULL};
	const char *second[] = {"{\"id\":\"3\",\"a\":2}", NULL};
	CHECK(feed(&table, first, false) == 0);
	CHECK(feed(&table, refused, false) == -EINVAL);
	CHECK(feed(&table, second, false) == 0);
	CHECK(same(inferred_schema_text(&table),
		   "{\"kind\":\"node\",\"properties\":{\"a\":{\"type\":\"i64\",\"nullable\":false}}}\n"));
	schema_inference_free(table.inference);
}

TEST(inference_accepts_delete_lines_in_merges)
{
	struct inferred_table table = {0};
	CHECK(schema_inference_open(&table.inference) == 0);
	const char *lines[] = {"{\"id\":\"1\",\"a\":1}", "{\"id\":\"9\",\"@delete\":true}", NULL};
	CHECK(feed(&table, lines, true) == 0);
	CHECK(same(table.rows[1], ""));
	CHECK(same(inferred_schema_text(&table),
		   "{\"kind\":\"node\",\"properties\":{\"a\":{\"type\":\"i64\",\"nullable\":false}}}\n"));
	const char *overwrite[] = {"{\"id\":\"9\",\"@delete\":true}", NULL};
	CHECK(feed(&table, overwrite, false) == -EINVAL);
	schema_inference_free(table.inference);
}

TEST(inferred_rows_are_final_under_the_inferred_schema)
{
	struct inferred_table table = {0};
	CHECK(schema_inference_open(&table.inference) == 0);
	const char *lines[] = {"{\"id\":\"1\",\"n\":1,\"l\":[1],\"s\":\"\\u0007\"}",
			       "{\"id\":\"2\",\"n\":0.1,\"e\":[],\"b\":false}",
			       "{\"id\":\"3\",\"l\":[2.5,1e21],\"e\":[\"x\"],\"n\":-0.0}",
			       "{\"l\":[],\"n\":1e-7}", NULL};
	CHECK(feed(&table, lines, false) == 0);
	struct schema schema;
	CHECK(schema_inference_finish(table.inference, &schema) == 0);
	for (int i = 0; i < table.count; i++) {
		char line[512];
		snprintf(line, sizeof line, "%s", table.rows[i]);
		line[strlen(line) - 1] = 0;
		CHECK(same(row_of(&schema, line, false), table.rows[i]));
	}
	schema_free(&schema);
	schema_inference_free(table.inference);
}

/* ---- schema files ------------------------------------------------------------------- */

TEST(a_schema_renders_canonically_and_round_trips)
{
	const char *text = "{\n  \"properties\": {\n    \"name\": {\"nullable\": false, \"type\": \"string\"},\n"
			   "    \"v\": {\"type\": \"vector<128>\"},\n    \"l\": {\"type\": \"list<datetime>\", \"nullable\": true}\n"
			   "  },\n  \"key\": [\"name\"],\n  \"kind\": \"node\"\n}\n";
	const char *canonical = "{\"kind\":\"node\",\"key\":[\"name\"],\"properties\":{"
				"\"name\":{\"type\":\"string\",\"nullable\":false},"
				"\"v\":{\"type\":\"vector<128>\",\"nullable\":true},"
				"\"l\":{\"type\":\"list<datetime>\",\"nullable\":true}}}\n";
	struct schema schema = schema_of(text);
	CHECK(same(schema_text_of(&schema), canonical));
	struct schema again = schema_of(canonical);
	CHECK(same(schema_text_of(&again), canonical));
	schema_free(&again);
	schema_free(&schema);
}

TEST(an_edge_schema_renders_from_and_to)
{
	struct schema schema = schema_of(knows_schema_text);
	CHECK(same(schema_text_of(&schema), "{\"kind\":\"edge\",\"from\":\"Person\",\"to\":\"Person\",\"properties\":{"
					    "\"since\":{\"type\":\"date\",\"nullable\":true}}}\n"));
	schema_free(&schema);
}

TEST(properties_default_to_nullable_and_may_be_omitted)
{
	struct schema schema = schema_of("{\"kind\":\"node\"}");
	CHECK(same(schema_text_of(&schema), "{\"kind\":\"node\",\"properties\":{}}\n"));
	schema_free(&schema);
}

TEST(schema_errors_name_the_field_and_its_line)
{
	uint64_t line;
	CHECK(same(schema_error_of("{\"kind\":\"node\",\n\"props\":{}}", &line),
		   "unknown field 'props' (a schema has kind, from, to, key and properties)"));
	CHECK_EQ(line, 2);
	CHECK(same(schema_error_of("{\"kind\":\"nodes\"}", &line), "\"kind\" must be \"node\" or \"edge\", got string \"nodes\""));
	CHECK_EQ(line, 1);
	CHECK(same(schema_error_of("{\"properties\":{}}", &line), "missing \"kind\" (\"node\" or \"edge\")"));
	CHECK(same(schema_error_of("{\"kind\":\"node\",\"properties\":{\n\"a\":{\"type\":\"string\"},\n\"b\":\n{\"type\":\"int\"}}}",
				   &line),
		   "property \"b\": unknown type string \"int\" (use string, bool, i64, f64, date, datetime, list<T> or "
		   "vector<N> with N from 1 to 65536)"));
	CHECK_EQ(line, 4);
	CHECK(same(schema_error_of("{\"kind\":\"node\",\"properties\":{\"a\":{\"type\":\"string\",\"default\":1}}}", &line),
		   "property \"a\": unknown field 'default' (a property has type and nullable)"));
	CHECK(same(schema_error_of("{\"kind\":\"node\",\"properties\":{\"a\":{\"nullable\":true}}}", &line),
		   "property \"a\": missing \"type\""));
	CHECK(same(schema_error_of("{\"kind\":\"node\",\"properties\":{\"a\":{\"type\":\"i64\",\"nullable\":1}}}", &line),
		   "property \"a\": \"nullable\" must be true or false, got integer 1"));
	CHECK(same(schema_error_of("{\"kind\":\"node\",\"properties\":{\"a\":\"i64\"}}", &line),
		   "property \"a\": expected an object like {\"type\":\"string\",\"nullable\":true}, got string \"i64\""));
}

TEST(schema_json_syntax_errors_give_their_line)
{
	uint64_t line;
	CHECK(contains(schema_error_of("{\"kind\":\"node\",\n\n\"properties\":{,}}", &line), "invalid JSON"));
	CHECK_EQ(line, 3);
	CHECK(contains(schema_error_of("{\"kind\":\"node\",\"kind\":\"edge\"}", &line), "duplicate object key"));
	CHECK_EQ(line, 1);
	CHECK(same(schema_error_of("[]", &line), "a schema is a JSON object, got an array"));
}

TEST(types_are_scalars_lists_of_scalars_or_bounded_vectors)
{
	uint64_t line;
	const char *good[] = {"string", "bool", "i64", "f64", "date", "datetime", "list<string>", "list<f64>",
			      "list<date>", "vector<1>", "vector<65536>"};
	const char *bad[] = {"int", "list<list<i64>>", "list<vector<3>>", "list<>", "vector<0>", "vector<65537>",
			     "vector<01>", "vector<>", "vector<-1>", "List<i64>", " i64", "vector<3 >"};
	char text[256];
	for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
		snprintf(text, sizeof text, "{\"kind\":\"node\",\"properties\":{\"p\":{\"type\":\"%s\"}}}", good[i]);
		CHECK(same(schema_error_of(text, &line), "(accepted)"));
	}
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		snprintf(text, sizeof text, "{\"kind\":\"node\",\"properties\":{\"p\":{\"type\":\"%s\"}}}", bad[i]);
		CHECK(contains(schema_error_of(text, &line), "unknown type"));
	}
}

TEST(property_names_follow_the_name_rule_and_are_not_reserved)
{
	uint64_t line;
	CHECK(same(schema_error_of("{\"kind\":\"node\",\"properties\":{\"id\":{\"type\":\"i64\"}}}", &line),
		   "property name \"id\" is reserved (id, from and to are not properties)"));
	CHECK(same(schema_error_of("{\"kind\":\"node\",\"properties\":{\"9a\":{\"type\":\"i64\"}}}", &line),
		   "invalid property name \"9a\" (names match [A-Za-z_][A-Za-z0-9_]{0,127})"));
	char text[512];
	snprintf(text, sizeof text, "{\"kind\":\"node\",\"properties\":{\"%0128d\":{\"type\":\"i64\"}}}", 0);
	CHECK(contains(schema_error_of(text, &line), "invalid property name"));
	snprintf(text, sizeof text, "{\"kind\":\"node\",\"properties\":{\"_%0127d\":{\"type\":\"i64\"}}}", 0);
	CHECK(same(schema_error_of(text, &line), "(accepted)"));
}

TEST(table_names_follow_the_name_rule)
{
	CHECK(schema_name_is_valid("Person", 6));
	CHECK(schema_name_is_valid("_x9", 3));
	CHECK(!schema_name_is_valid("", 0));
	CHECK(!schema_name_is_valid("9x", 2));
	CHECK(!schema_name_is_valid("a-b", 3));
	CHECK(!schema_name_is_valid("..", 2));
	CHECK(!schema_name_is_valid("a/b", 3));
	CHECK(!schema_name_is_valid("a\0b", 3));
	char name[130];
	memset(name, 'a', sizeof name);
	CHECK(schema_name_is_valid(name, 128));
	CHECK(!schema_name_is_valid(name, 129));
}

TEST(key_properties_exist_are_scalar_and_not_nullable)
{
	uint64_t line;
	CHECK(same(schema_error_of("{\"kind\":\"node\",\"key\":[\"k\"],\"properties\":{}}", &line),
		   "\"key\"[0]: string \"k\" is not a property in \"properties\""));
	CHECK(same(schema_error_of("{\"kind\":\"node\",\"key\":[\"k\"],\"properties\":{\"k\":{\"type\":\"i64\"}}}", &line),
		   "key property \"k\" must not be nullable (declare \"nullable\":false)"));
	CHECK(same(schema_error_of(
			   "{\"kind\":\"node\",\"key\":[\"k\"],\"properties\":{\"k\":{\"type\":\"list<i64>\",\"nullable\":false}}}",
			   &line),
		   "key property \"k\" must have a scalar type (string, bool, i64, f64, date or datetime), not list<i64>"));
	CHECK(same(schema_error_of(
			   "{\"kind\":\"node\",\"key\":[\"k\",\"k\"],\"properties\":{\"k\":{\"type\":\"i64\",\"nullable\":false}}}",
			   &line),
		   "\"key\" names property \"k\" twice"));
	CHECK(same(schema_error_of("{\"kind\":\"node\",\"key\":\"k\"}", &line),
		   "\"key\" must be a list of property names, got string \"k\""));
}

TEST(edge_schemas_need_from_and_to_and_have_no_key)
{
	uint64_t line;
	CHECK(same(schema_error_of("{\"kind\":\"edge\",\"to\":\"B\"}", &line),
		   "an edge schema needs \"from\" (the node table its edges start at)"));
	CHECK(same(schema_error_of("{\"kind\":\"edge\",\"from\":\"A\"}", &line),
		   "an edge schema needs \"to\" (the node table its edges end at)"));
	CHECK(same(schema_error_of("{\"kind\":\"edge\",\"from\":\"a/b\",\"to\":\"B\"}", &line),
		   "\"from\" must be a table name ([A-Za-z_][A-Za-z0-9_]{0,127}), got string \"a/b\""));
	CHECK(same(schema_error_of("{\"kind\":\"edge\",\"from\":\"A\",\"to\":\"B\",\"key\":[\"x\"],"
				   "\"properties\":{\"x\":{\"type\":\"i64\",\"nullable\":false}}}",
				   &line),
		   "\"key\" is only for node schemas (edge ids are given or assigned)"));
	CHECK(same(schema_error_of("{\"kind\":\"node\",\"from\":\"A\"}", &line),
		   "\"from\" is only for edge schemas (this one has \"kind\":\"node\")"));
}

TEST(the_schema_hash_is_xxh3_of_the_canonical_text)
{
	struct schema schema = schema_of(people_schema_text);
	char hash[17], expected[17];
	const char *text = schema_text_of(&schema);
	snprintf(expected, sizeof expected, "%016llx", (unsigned long long)XXH3_64bits(text, strlen(text)));
	schema_hash(&schema, hash);
	CHECK(same(hash, expected));
	schema_free(&schema);
}

TEST(the_schema_hash_is_stable_across_formatting_and_releases)
{
	struct schema compact = schema_of("{\"kind\":\"node\",\"properties\":{\"a\":{\"type\":\"i64\",\"nullable\":false}}}");
	struct schema spaced = schema_of("{ \"properties\" : { \"a\" : { \"nullable\" : false, \"type\" : \"i64\" } },\n \"kind\" : \"node\" }");
	char first[17], second[17];
	schema_hash(&compact, first);
	schema_hash(&spaced, second);
	CHECK(same(first, second));
	/* A pinned value: changing it changes every stored schema hash (a format change). */
	CHECK_EQ(strlen(first), 16);
	char pinned[17];
	const char *text = "{\"kind\":\"node\",\"properties\":{\"a\":{\"type\":\"i64\",\"nullable\":false}}}\n";
	snprintf(pinned, sizeof pinned, "%016llx", (unsigned long long)XXH3_64bits(text, strlen(text)));
	CHECK(same(first, pinned));
	schema_free(&compact);
	schema_free(&spaced);
}

TEST(the_schema_hash_depends_on_property_order)
{
	struct schema ab = schema_of("{\"kind\":\"node\",\"properties\":{\"a\":{\"type\":\"i64\"},\"b\":{\"type\":\"i64\"}}}");
	struct schema ba = schema_of("{\"kind\":\"node\",\"properties\":{\"b\":{\"type\":\"i64\"},\"a\":{\"type\":\"i64\"}}}");
	char first[17], second[17];
	schema_hash(&ab, first);
	schema_hash(&ba, second);
	CHECK(strcmp(first, second) != 0);
	schema_free(&ab);
	schema_free(&ba);
}

TEST(a_copied_schema_is_independent_and_equal)
{
	struct schema schema = schema_of(keyed_schema_text), copy;
	CHECK(schema_copy(&copy, &schema) == 0);
	char expected[4096];
	snprintf(expected, sizeof expected, "%s", schema_text_of(&schema));
	schema_free(&schema);
	CHECK(same(schema_text_of(&copy), expected));
	schema_free(&copy);
}

/* ---- compatibility ------------------------------------------------------------------- */

static const char *compatibility_of(const char *old_text, const char *new_text)
{
	struct schema old = schema_of(old_text), new_schema = schema_of(new_text);
	error_info_clear(&last_error);
	int rc = schema_check_compatible(&old, &new_schema, &last_error);
	schema_free(&old);
	schema_free(&new_schema);
	return rc == 0 ? "(compatible)" : rc == -EINVAL ? last_error.message : "(wrong errno)";
}

#define NODE(properties) "{\"kind\":\"node\",\"properties\":{" properties "}}"

TEST(an_unchanged_schema_is_compatible)
{
	CHECK(same(compatibility_of(people_schema_text, people_schema_text), "(compatible)"));
	CHECK(same(compatibility_of(knows_schema_text, knows_schema_text), "(compatible)"));
}

TEST(appending_a_nullable_property_is_compatible)
{
	CHECK(same(compatibility_of(NODE("\"a\":{\"type\":\"i64\"}"),
				    NODE("\"a\":{\"type\":\"i64\"},\"b\":{\"type\":\"string\",\"nullable\":true}")),
		   "(compatible)"));
}

TEST(appending_a_non_nullable_property_is_refused)
{
	CHECK(same(compatibility_of(NODE("\"a\":{\"type\":\"i64\"}"),
				    NODE("\"a\":{\"type\":\"i64\"},\"b\":{\"type\":\"string\",\"nullable\":false}")),
		   "new property \"b\" must be nullable (existing rows do not have it)"));
}

TEST(widening_i64_to_f64_is_compatible)
{
	CHECK(same(compatibility_of(NODE("\"a\":{\"type\":\"i64\"}"), NODE("\"a\":{\"type\":\"f64\"}")), "(compatible)"));
	CHECK(same(compatibility_of(NODE("\"a\":{\"type\":\"list<i64>\"}"), NODE("\"a\":{\"type\":\"list<f64>\"}")),
		   "(compatible)"));
}

TEST(other_type_changes_are_refused)
{
	CHECK(same(compatibility_of(NODE("\"a\":{\"type\":\"f64\"}"), NODE("\"a\":{\"type\":\"i64\"}")),
		   "property \"a\": type cannot change from f64 to i64 (only i64 to f64 and list<i64> to list<f64> widen)"));
	CHECK(contains(compatibility_of(NODE("\"a\":{\"type\":\"string\"}"), NODE("\"a\":{\"type\":\"date\"}")),
		       "type cannot change from string to date"));
	CHECK(contains(compatibility_of(NODE("\"a\":{\"type\":\"vector<3>\"}"), NODE("\"a\":{\"type\":\"vector<4>\"}")),
		       "type cannot change from vector<3> to vector<4>"));
	CHECK(contains(compatibility_of(NODE("\"a\":{\"type\":\"i64\"}"), NODE("\"a\":{\"type\":\"list<i64>\"}")),
		       "type cannot change from i64 to list<i64>"));
	CHECK(contains(compatibility_of(NODE("\"a\":{\"type\":\"list<f64>\"}"), NODE("\"a\":{\"type\":\"list<i64>\"}")),
		       "type cannot change"));
}

TEST(relaxing_nullability_is_compatible_and_tightening_is_refused)
{
	CHECK(same(compatibility_of(NODE("\"a\":{\"type\":\"i64\",\"nullable\":false}"),
				    NODE("\"a\":{\"type\":\"i64\",\"nullable\":true}")),
		   "(compatible)"));
	CHECK(same(compatibility_of(NODE("\"a\":{\"type\":\"i64\",\"nullable\":true}"),
				    NODE("\"a\":{\"type\":\"i64\",\"nullable\":false}")),
		   "property \"a\" cannot become non-nullable (existing rows may omit it)"));
}

TEST(removing_or_moving_a_property_is_refused)
{
	CHECK(same(compatibility_of(NODE("\"a\":{\"type\":\"i64\"},\"b\":{\"type\":\"i64\"}"), NODE("\"a\":{\"type\":\"i64\"}")),
		   "property \"b\" cannot be removed (existing rows may hold it)"));
	CHECK(same(compatibility_of(NODE("\"a\":{\"type\":\"i64\"},\"b\":{\"type\":\"i64\"}"),
				    NODE("\"b\":{\"type\":\"i64\"},\"a\":{\"type\":\"i64\"}")),
		   "property \"a\" cannot move (properties keep their order; append new ones at the end)"));
	CHECK(same(compatibility_of(NODE("\"a\":{\"type\":\"i64\"}"), NODE("\"b\":{\"type\":\"i64\"}")),
		   "property \"a\" cannot be removed (existing rows may hold it)"));
}

TEST(kind_endpoints_and_key_cannot_change)
{
	CHECK(same(compatibility_of(NODE(""), "{\"kind\":\"edge\",\"from\":\"A\",\"to\":\"B\"}"),
		   "the kind cannot change from node to edge (drop the table and create it anew)"));
	CHECK(same(compatibility_of("{\"kind\":\"edge\",\"from\":\"A\",\"to\":\"B\"}", "{\"kind\":\"edge\",\"from\":\"C\",\"to\":\"B\"}"),
		   "an edge table's \"from\" cannot change (A to C)"));
	CHECK(same(compatibility_of("{\"kind\":\"edge\",\"from\":\"A\",\"to\":\"B\"}", "{\"kind\":\"edge\",\"from\":\"A\",\"to\":\"C\"}"),
		   "an edge table's \"to\" cannot change (B to C)"));
	CHECK(same(compatibility_of("{\"kind\":\"node\",\"key\":[\"a\"],\"properties\":{\"a\":{\"type\":\"i64\",\"nullable\":false}}}",
				    NODE("\"a\":{\"type\":\"i64\",\"nullable\":false}")),
		   "the key cannot change (row ids derive from it); keep \"key\" as it is"));
}

/* ---- randomised round trips ----------------------------------------------------------- */

static uint64_t random_state = 0x243f6a8885a308d3u;

static uint64_t next_random(void)
{
	random_state ^= random_state << 13;
	random_state ^= random_state >> 7;
	random_state ^= random_state << 17;
	return random_state;
}

static double random_double(void)
{
	for (;;) {
		uint64_t bits = next_random();
		double value;
		switch (bits % 4) {
		case 0: /* any finite bit pattern */
			memcpy(&value, &bits, sizeof value);
			break;
		case 1: /* small integers */
			value = (double)((int64_t)(next_random() % 2000001) - 1000000);
			break;
		case 2: /* decimals with few digits */
			value = (double)((int64_t)(next_random() % 20001) - 10000) / 1000.0;
			break;
		default: /* around the form switches */
			value = ldexp(1.0 + (double)(next_random() % 1000) / 1000.0, (int)(next_random() % 160) - 80);
			break;
		}
		if (isfinite(value))
			return value;
	}
}

static void append_random_string(struct buf *out)
{
	static const char *const pieces[] = {"a", "Z", " ", "\\\"", "\\\\", "/", "\\n", "\\t", "\\u0001", "\\u001f",
					     "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\\u00e9", "\\ud83d\\ude00", "\x7f"};
	buf_append_string(out, "\"");
	for (uint64_t n = next_random() % 12; n > 0; n--)
		buf_append_string(out, pieces[next_random() % (sizeof pieces / sizeof *pieces)]);
	buf_append_string(out, "\"");
}

TEST(random_rows_render_to_a_fixed_point_and_keep_their_numbers)
{
	struct schema schema = schema_of(
		"{\"kind\":\"node\",\"properties\":{\"s\":{\"type\":\"string\"},\"i\":{\"type\":\"i64\"},"
		"\"f\":{\"type\":\"f64\"},\"l\":{\"type\":\"list<f64>\"},\"v\":{\"type\":\"vector<2>\"},"
		"\"b\":{\"type\":\"bool\"}}}");
	struct buf line;
	struct schema_row first, second;
	buf_init(&line);
	schema_row_init(&first);
	schema_row_init(&second);
	for (int round = 0; round < 3000; round++) {
		double f = random_double(), element = random_double();
		float v0 = (float)random_double(), v1 = (float)random_double();
		if (!isfinite(v0))
			v0 = 1.5f;
		if (!isfinite(v1))
			v1 = -0.25f;
		buf_reset(&line);
		buf_append_string(&line, "{\"s\":");
		append_random_string(&line);
		buf_printf(&line, ",\"f\":%.17g,\"i\":%lld,\"l\":[%.17g,%.17g],\"v\":[%.9g,%.9g],\"b\":%s,\"id\":",
			   f, (long long)next_random(), element, -element, (double)v0, (double)v1,
			   next_random() % 2 ? "true" : "false");
		append_random_string(&line);
		buf_append_string(&line, "}");
		int rc = schema_row_parse(&schema, (const char *)line.data, line.size, false, &first, &last_error);
		if (rc == -EINVAL && strstr(last_error.message, "\"id\" must not"))
			continue;
		if (rc) {
			fprintf(stderr, "    refused %s: %s\n", buf_cstr(&line), last_error.message);
			CHECK(rc == 0);
		}
		CHECK(schema_row_parse(&schema, (const char *)first.canonical.data, first.canonical.size - 1, false,
				       &second, &last_error) == 0);
		CHECK(same(buf_cstr(&second.canonical), buf_cstr(&first.canonical)));
		/* The canonical number is the same double. */
		const char *at = strstr(buf_cstr(&first.canonical), ",\"f\":");
		CHECK(at != NULL);
		double back = strtod(at + 5, NULL);
		CHECK(memcmp(&back, &f, sizeof f) == 0 || (f == 0 && back == 0));
	}
	buf_free(&line);
	schema_row_free(&first);
	schema_row_free(&second);
	schema_free(&schema);
}

/* ---- the tokenizer's fields and jansson's agree (schema_int.h) ----------------------- */

static const char *agreement_schema_text =
	"{\"kind\":\"node\",\"properties\":{\"s\":{\"type\":\"string\"},\"b\":{\"type\":\"bool\"},"
	"\"i\":{\"type\":\"i64\"},\"f\":{\"type\":\"f64\"},\"d\":{\"type\":\"date\"},\"t\":{\"type\":\"datetime\"},"
	"\"li\":{\"type\":\"list<i64>\"},\"lf\":{\"type\":\"list<f64>\"},\"ls\":{\"type\":\"list<string>\"},"
	"\"v\":{\"type\":\"vector<2>\"},\"n\":{\"type\":\"string\",\"nullable\":false}}}";

/* Lines of every kind the tokenizer must get exactly right, or leave to jansson. */
static const char *const agreement_lines[] = {
	/* escapes, surrogate pairs, UTF-8 */
	"{\"n\":\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"}",
	"{\"n\":\"\\u0041\\u00e9\\u20AC\\ud83d\\ude00\\u001f\\u007f\"}",
	"{\"n\":\"\\ud83d\"}", "{\"n\":\"\\ude00\"}", "{\"n\":\"\\ud83d\\u0041\"}", "{\"n\":\"\\ud83dx\"}",
	"{\"n\":\"\\u0000\"}", "{\"n\":\"\\u12\"}", "{\"n\":\"\\uZZZZ\"}", "{\"n\":\"\\x\"}", "{\"n\":\"\\\"}",
	"{\"n\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\x7f\"}",
	"{\"n\":\"\xc0\xaf\"}", "{\"n\":\"\xe0\x80\xaf\"}", "{\"n\":\"\xed\xa0\x80\"}", "{\"n\":\"\xf4\x90\x80\x80\"}",
	"{\"n\":\"\xf5\x80\x80\x80\"}", "{\"n\":\"\xc3\"}", "{\"n\":\"\xe2\x82\"}", "{\"n\":\"\x80\"}",
	"{\"n\":\"tab\there\"}", "{\"n\":\"x\"}\xc3\xa9",
	/* numbers */
	"{\"n\":\"x\",\"i\":9223372036854775807,\"f\":-9223372036854775808}",
	"{\"n\":\"x\",\"i\":-9223372036854775808}", "{\"n\":\"x\",\"i\":9223372036854775808}",
	"{\"n\":\"x\",\"i\":-9223372036854775809}", "{\"n\":\"x\",\"i\":123456789012345678901234}",
	"{\"n\":\"x\",\"i\":-0,\"f\":-0}", "{\"n\":\"x\",\"f\":-0.0}", "{\"n\":\"x\",\"f\":0e99999}",
	"{\"n\":\"x\",\"f\":1e21}", "{\"n\":\"x\",\"f\":1E+2}", "{\"n\":\"x\",\"f\":1e-7}", "{\"n\":\"x\",\"f\":1.5e-6}",
	"{\"n\":\"x\",\"f\":5e-324}", "{\"n\":\"x\",\"f\":2.2250738585072014e-308}", "{\"n\":\"x\",\"f\":1e309}",
	"{\"n\":\"x\",\"f\":-1e309}", "{\"n\":\"x\",\"f\":1.7976931348623157e308}", "{\"n\":\"x\",\"f\":1e-400}",
	"{\"n\":\"x\",\"f\":0.30000000000000004}", "{\"n\":\"x\",\"f\":0.1000000000000000055511151231257827}",
	"{\"n\":\"x\",\"f\":123456789012345678}", "{\"n\":\"x\",\"f\":9007199254740993}",
	"{\"n\":\"x\",\"f\":2.50}", "{\"n\":\"x\",\"f\":100.000}", "{\"n\":\"x\",\"f\":0.000001}",
	"{\"n\":\"x\",\"f\":12345678901234.5}", "{\"n\":\"x\",\"f\":1234567890123456.7}",
	"{\"n\":\"x\",\"f\":1e22}", "{\"n\":\"x\",\"f\":1e23}", "{\"n\":\"x\",\"f\":9.999999999999999e22}",
	"{\"n\":\"x\",\"f\":1e19}", "{\"n\":\"x\",\"f\":1e300}", "{\"n\":\"x\",\"f\":1e-300}",
	"{\"n\":\"x\",\"f\":0.00000000000000000000000000000000000000000000000000000000000000000000001}",
	"{\"n\":\"x\",\"f\":01}", "{\"n\":\"x\",\"f\":1.}", "{\"n\":\"x\",\"f\":.5}", "{\"n\":\"x\",\"f\":+1}",
	"{\"n\":\"x\",\"f\":1e}", "{\"n\":\"x\",\"f\":1e+}", "{\"n\":\"x\",\"f\":-}", "{\"n\":\"x\",\"f\":1x}",
	"{\"n\":\"x\",\"f\":NaN}", "{\"n\":\"x\",\"f\":Infinity}", "{\"n\":\"x\",\"i\":1.0}", "{\"n\":\"x\",\"i\":1e2}",
	"{\"n\":\"x\",\"v\":[0.1,16777217]}", "{\"n\":\"x\",\"v\":[3.5e38,1]}", "{\"n\":\"x\",\"v\":[1e-50,-0.0]}",
	"{\"n\":\"x\",\"v\":[1]}", "{\"n\":\"x\",\"v\":[1,\"2\"]}",
	"{\"n\":\"x\",\"lf\":[1,2.5,-0,1e21]}", "{\"n\":\"x\",\"li\":[1,null]}", "{\"n\":\"x\",\"li\":[[1]]}",
	"{\"n\":\"x\",\"ls\":[\"a\\n\",\"\xc3\xa9\"]}", "{\"n\":\"x\",\"li\":[]}",
	/* literals, types, dates */
	"{\"n\":\"x\",\"b\":true}", "{\"n\":\"x\",\"b\":false}", "{\"n\":\"x\",\"b\":null}", "{\"n\":\"x\",\"b\":tru}",
	"{\"n\":\"x\",\"b\":truex}", "{\"n\":\"x\",\"b\":1}", "{\"n\":null}", "{\"s\":\"x\"}",
	"{\"n\":\"x\",\"d\":\"2024-02-29\",\"t\":\"2024-01-31T12:00:00.123+01:00\"}", "{\"n\":\"x\",\"d\":\"2023-02-29\"}",
	"{\"n\":\"x\",\"d\":\"2024-02-2\\u0039\"}", "{\"n\":\"x\",\"t\":\"2024-01-31t12:00:00Z\"}",
	/* keys, ids and structure */
	"{\"n\":\"x\",\"n\":\"y\"}", "{\"id\":\"a\",\"id\":\"a\",\"n\":\"x\"}", "{\"n\":\"x\",\"\\u0069\":\"k\"}",
	"{\"\\u006e\":\"x\"}", "{\"n\":\"x\",\"q\":1}", "{\"n\":\"x\",\"from\":\"a\"}", "{\"n\":\"x\",\"@delete\":true}",
	"{\"n\":\"x\",\"@x\":1}", "{\"id\":\"\",\"n\":\"x\"}", "{\"id\":\"a\\nb\",\"n\":\"x\"}", "{\"id\":7,\"n\":\"x\"}",
	"{\"id\":\"a\\u00e9\",\"n\":\"x\"}", "{\"n\":\"x\",\"s\":{\"a\":1}}", "{\"n\":\"x\",\"s\":[]}",
	" \t\r\n{ \"n\" : \"x\" , \"i\" : 1 , \"li\" : [ 1 , 2 ] } \r\n\t", "{\"n\":\"x\"} x", "{\"n\":\"x\"}}",
	"{\"n\":\"x\",}", "{,\"n\":\"x\"}", "{\"n\":\"x\" \"i\":1}", "{\"n\"\"x\"}", "{\"n\":\"x\"", "{\"n\":\"x",
	"{}", "[]", "\"x\"", "", " ", "\xef\xbb\xbf{\"n\":\"x\"}",
};

static bool rows_agree(int rc, const struct schema_row *row, int tree_rc, const struct schema_row *tree_row,
		       const struct error_info *error, const struct error_info *tree_error, bool compare_ids)
{
	if (rc != tree_rc || (rc && strcmp(error->message, tree_error->message)))
		return false;
	if (rc)
		return true;
	if (row->is_delete || tree_row->is_delete)
		return row->is_delete == tree_row->is_delete && !row->canonical.size && !tree_row->canonical.size &&
		       row->id.size == tree_row->id.size && !memcmp(row->id.data, tree_row->id.data, row->id.size);
	if (compare_ids && (row->id.size != tree_row->id.size || memcmp(row->id.data, tree_row->id.data, row->id.size)))
		return false;
	/* Compare the canonical bytes after the id (ids assigned as ULIDs differ). */
	size_t skip = 8 + row->id.size, tree_skip = 8 + tree_row->id.size;
	return row->canonical.size - skip == tree_row->canonical.size - tree_skip &&
	       !memcmp(row->canonical.data + skip, tree_row->canonical.data + tree_skip, row->canonical.size - skip);
}

TEST(the_fast_path_accepts_refuses_and_renders_exactly_like_jansson)
{
	struct schema schema = schema_of(agreement_schema_text);
	struct schema_row row, tree_row;
	struct error_info error, tree_error;
	schema_row_init(&row);
	schema_row_init(&tree_row);
	for (size_t i = 0; i < sizeof agreement_lines / sizeof *agreement_lines; i++) {
		const char *line = agreement_lines[i];
		size_t size = strlen(line);
		error_info_clear(&error);
		error_info_clear(&tree_error);
		int rc = schema_row_parse(&schema, line, size, false, &row, &error);
		int tree_rc = schema_row_parse_tree(&schema, line, size, false, &tree_row, &tree_error);
		bool agree = rows_agree(rc, &row, tree_rc, &tree_row, &error, &tree_error, false);
		if (!agree)
			fprintf(stderr, "    line %s\n    fast: %d %s %s    jansson: %d %s %s", line, rc, error.message,
				buf_cstr(&row.canonical), tree_rc, tree_error.message, buf_cstr(&tree_row.canonical));
		CHECK(agree);
	}
	schema_row_free(&row);
	schema_row_free(&tree_row);
	schema_free(&schema);
}

/* Value texts per property of agreement_schema_text: canonical ones and near misses. */
static const char *const *agreement_values(const char *property, size_t *count)
{
	static const char *const s[] = { "\"abc\"", "\"a\\nb\"", "\"\xc3\xa9t\xc3\xa9\"", "\"\"", "1", "null" };
	static const char *const b[] = { "true", "false", "1", "null" };
	static const char *const i[] = { "0", "-0", "42", "-7", "1.0", "1e3", "9223372036854775807", "null", "\"5\"" };
	static const char *const f[] = { "0", "-0", "1.5", "1.50", "1e21", "100", "9007199254740993", "-0.0",
					 "2.5e-7", "0.1", "1E2", "123456789012345680000", "null" };
	static const char *const d[] = { "\"2024-02-29\"", "\"2023-02-29\"", "\"2024-1-01\"", "null" };
	static const char *const t[] = { "\"2024-01-31T12:00:00Z\"", "\"2024-01-31t12:00:00Z\"",
					 "\"2024-01-31T12:00:00.123+01:00\"", "\"2024-01-31\"" };
	static const char *const li[] = { "[]", "[1,2]", "[1, 2]", "[-0]", "[1,null]", "[1.5]", "[[1]]" };
	static const char *const lf[] = { "[1.5,2]", "[1e21]", "[0.10]", "[]", "[-0.0,3]" };
	static const char *const ls[] = { "[\"a\",\"b\"]", "[\"a\\n\"]", "[1]", "[\"\"]" };
	static const char *const v[] = { "[1,2]", "[0.1,0.2]", "[1]" };
	static const char *const n[] = { "\"x\"", "\"y z\"", "null" };
	static const struct { const char *name; const char *const *values; size_t count; } table[] = {
		{ "s", s, sizeof s / sizeof *s }, { "b", b, sizeof b / sizeof *b }, { "i", i, sizeof i / sizeof *i },
		{ "f", f, sizeof f / sizeof *f }, { "d", d, sizeof d / sizeof *d }, { "t", t, sizeof t / sizeof *t },
		{ "li", li, sizeof li / sizeof *li }, { "lf", lf, sizeof lf / sizeof *lf },
		{ "ls", ls, sizeof ls / sizeof *ls }, { "v", v, sizeof v / sizeof *v }, { "n", n, sizeof n / sizeof *n },
	};
	for (size_t k = 0; k < sizeof table / sizeof *table; k++)
		if (!strcmp(table[k].name, property)) {
			*count = table[k].count;
			return table[k].values;
		}
	*count = 0;
	return NULL;
}

/* Lines with an id that are often their own canonical form (id first, schema order, no
 * whitespace): taken as they are or rendered, the row is the one jansson's fields give. */
TEST(lines_already_canonical_become_the_same_rows_as_rendered_ones)
{
	struct schema schema = schema_of(agreement_schema_text);
	struct schema_row row, tree_row;
	struct error_info error, tree_error;
	schema_row_init(&row);
	schema_row_init(&tree_row);
	uint64_t seed = 88172645463325252ull;
	size_t verbatim = 0;
	for (int round = 0; round < 20000; round++) {
		struct buf line;
		buf_init(&line);
		seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
		uint64_t draw = seed;
		static const char *const ids[] = { "\"r1\"", "\"r\\u0041\"", "7", "\"\"", "\"a b\"" };
		size_t id_choice = (draw & 7) < 5 ? 0 : (draw >> 3) % 5;
		bool id_first = (draw >> 8) % 8 != 0;
		bool spaced = (draw >> 11) % 10 == 0;
		if (id_first)
			buf_printf(&line, "{\"id\":%s", ids[id_choice]);
		else
			buf_append_string(&line, "{");
		bool swap = (draw >> 14) % 10 == 0;
		size_t fields = id_first ? 1 : 0;
		for (size_t p = 0; p < schema.property_count; p++) {
			seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
			size_t index = swap && p + 1 < schema.property_count && p % 2 == 0 ? p + 1
				       : swap && p % 2 == 1 ? p - 1 : p;
			if (index >= schema.property_count)
				index = p;
			const char *name = schema.properties[index].name;
			bool required = !strcmp(name, "n");
			if (!required && seed % 3 == 0)
				continue;
			size_t count;
			const char *const *values = agreement_values(name, &count);
			CHECK(values != NULL);
			/* mostly the first (canonical) form, now and then any */
			size_t pick = (seed >> 8) % 12 ? 0 : (seed >> 16) % count;
			buf_printf(&line, "%s\"%s\":%s%s", fields ? "," : "", name, spaced ? " " : "", values[pick]);
			fields++;
		}
		if (!id_first)
			buf_printf(&line, "%s\"id\":\"r2\"", fields ? "," : "");
		buf_append_string(&line, (draw >> 20) % 25 == 0 ? "}\r" : "}");
		error_info_clear(&error);
		error_info_clear(&tree_error);
		int rc = schema_row_parse(&schema, (const char *)line.data, line.size, false, &row, &error);
		int tree_rc = schema_row_parse_tree(&schema, (const char *)line.data, line.size, false, &tree_row,
						    &tree_error);
		bool agree = rows_agree(rc, &row, tree_rc, &tree_row, &error, &tree_error, true);
		if (!agree)
			fprintf(stderr, "    line %s\n    parse: %d %s %s    jansson: %d %s %s", buf_cstr(&line), rc,
				error.message, buf_cstr(&row.canonical), tree_rc, tree_error.message,
				buf_cstr(&tree_row.canonical));
		CHECK(agree);
		if (rc == 0 && row.canonical.size == line.size + 1 && !memcmp(row.canonical.data, line.data, line.size))
			verbatim++;
		buf_free(&line);
	}
	/* the draw gives plenty of lines that are their own canonical form, and plenty that are not */
	CHECK(verbatim > 2000 && verbatim < 15000);
	schema_row_free(&row);
	schema_row_free(&tree_row);
	schema_free(&schema);
}

TEST(the_fast_path_agrees_with_jansson_on_nul_bytes_inside_lines)
{
	static const char *const lines[][2] = {{"{\"n\":\"x\"}\0", "11"}, {"{\"n\":\"x\0y\"}", "12"},
					       {"{\"n\":\"x\",\0\"i\":1}", "19"}};
	struct schema schema = schema_of(agreement_schema_text);
	struct schema_row row, tree_row;
	struct error_info error, tree_error;
	schema_row_init(&row);
	schema_row_init(&tree_row);
	for (size_t i = 0; i < sizeof lines / sizeof *lines; i++) {
		size_t size = (size_t)atoi(lines[i][1]);
		int rc = schema_row_parse(&schema, lines[i][0], size, false, &row, &error);
		int tree_rc = schema_row_parse_tree(&schema, lines[i][0], size, false, &tree_row, &tree_error);
		CHECK(rc == -EINVAL);
		CHECK(rows_agree(rc, &row, tree_rc, &tree_row, &error, &tree_error, true));
	}
	schema_row_free(&row);
	schema_row_free(&tree_row);
	schema_free(&schema);
}

TEST(the_fast_path_agrees_with_jansson_on_keys_ids_and_edges)
{
	static const char *const schemas[] = {
		"{\"kind\":\"node\",\"key\":[\"k\",\"n\",\"b\"],\"properties\":{\"k\":{\"type\":\"string\",\"nullable\":false},"
		"\"n\":{\"type\":\"f64\",\"nullable\":false},\"b\":{\"type\":\"bool\",\"nullable\":false}}}",
		"{\"kind\":\"node\",\"key\":[\"k\"],\"properties\":{\"k\":{\"type\":\"string\",\"nullable\":false}}}",
		"{\"kind\":\"node\",\"key\":[\"n\"],\"properties\":{\"n\":{\"type\":\"f64\",\"nullable\":false}}}",
		"{\"kind\":\"edge\",\"from\":\"A\",\"to\":\"B\",\"properties\":{\"w\":{\"type\":\"f64\"}}}",
	};
	static const char *const lines[] = {
		"{\"k\":\"a\\\"b\",\"n\":1,\"b\":true}", "{\"id\":\"[\\\"a\\\",1,true]\",\"k\":\"a\",\"n\":1.0,\"b\":true}",
		"{\"id\":\"[\\\"a\\\",2,true]\",\"k\":\"a\",\"n\":1,\"b\":true}", "{\"k\":\"\",\"n\":1,\"b\":false}",
		"{\"k\":\"a\\u00e9\"}", "{\"k\":\"a\\nb\"}", "{\"id\":\"a\\u00e9\",\"k\":\"a\xc3\xa9\"}", "{\"k\":\"\"}",
		"{\"n\":2.5e3}", "{\"n\":-0}", "{\"id\":\"2500\",\"n\":2.5e3}", "{\"n\":9007199254740993}", "{\"n\":1e19}",
		"{\"from\":\"a\",\"to\":\"b\",\"w\":1}", "{\"id\":\"e\",\"from\":\"a\\/b\",\"to\":\"c\\u00e9\"}",
		"{\"from\":\"a\"}", "{\"from\":\"a\",\"to\":1}", "{\"from\":\"\",\"to\":\"b\"}", "{\"from\":\"a\",\"from\":\"a\",\"to\":\"b\"}",
		"{\"k\":\"a\",\"n\":1,\"b\":true,\"from\":\"x\"}",
	};
	struct schema_row row, tree_row;
	struct error_info error, tree_error;
	schema_row_init(&row);
	schema_row_init(&tree_row);
	for (size_t s = 0; s < sizeof schemas / sizeof *schemas; s++) {
		struct schema schema = schema_of(schemas[s]);
		for (size_t i = 0; i < sizeof lines / sizeof *lines; i++) {
			bool keyed = schema.key_count > 0;
			error_info_clear(&error);
			error_info_clear(&tree_error);
			int rc = schema_row_parse(&schema, lines[i], strlen(lines[i]), true, &row, &error);
			int tree_rc = schema_row_parse_tree(&schema, lines[i], strlen(lines[i]), true, &tree_row,
							    &tree_error);
			bool agree = rows_agree(rc, &row, tree_rc, &tree_row, &error, &tree_error,
						keyed || strstr(lines[i], "\"id\""));
			agree = agree && (rc || (row.from.size == tree_row.from.size && row.to.size == tree_row.to.size));
			if (!agree)
				fprintf(stderr, "    schema %zu line %s\n    fast: %d %s %s    jansson: %d %s %s", s,
					lines[i], rc, error.message, buf_cstr(&row.canonical), tree_rc,
					tree_error.message, buf_cstr(&tree_row.canonical));
			CHECK(agree);
		}
		schema_free(&schema);
	}
	schema_row_free(&row);
	schema_row_free(&tree_row);
}

TEST(fast_inference_agrees_with_jansson_row_by_row_and_on_the_schema)
{
	static const char *const lines[] = {
		"{\"id\":\"1\",\"a\":1,\"b\":\"x\\u00e9\",\"l\":[1,2],\"z\":null}",
		"{\"b\":\"y\",\"a\":2.5,\"c\":true,\"l\":[0.5,3]}", "{\"a\":1e400}", "{\"a\":\"no\"}", "{\"q\":1,\"q\":2}",
		"{\"id\":\"2\",\"m\":[]}", "{\"m\":[\"s\",1]}", "{\"m\":[\"s\"]}", "{\"m\":[\"t\"],\"n\":[null]}",
		"{\"from\":\"a\"}", "{\"o\":{\"x\":1}}", "{\"9bad\":1}", "{\"@delete\":true,\"id\":\"1\"}",
		"{\"id\":\"1\",\"@delete\":true}", "{\"big\":9007199254740993}", "{\"big\":0.5}", "{\"c\":false,\"new\":-0}",
		"{\"id\":\"3\",\"a\":-0.0,\"b\":\"\\ud83d\\ude00\",\"l\":[]} ", "{\"z\":\"late\"}", "{\"\\u0061\":7}",
		"{\"id\":\"4\",\"a\":1,\"a2\":1,\"a3\":1,\"a4\":1,\"a5\":1,\"a6\":1,\"a7\":1,\"a8\":1,\"a9\":1}",
		"{\"a9\":1.5,\"a8\":2,\"a7\":3,\"a\":4}", "{\"id\":\"5\",\"id\":\"5\"}", "{\"id\":5}", "{}",
	};
	struct schema_inference *fast, *tree;
	struct schema_row row, tree_row;
	struct error_info error, tree_error;
	struct schema fast_schema, tree_schema;
	CHECK(schema_inference_open(&fast) == 0);
	CHECK(schema_inference_open(&tree) == 0);
	schema_row_init(&row);
	schema_row_init(&tree_row);
	for (size_t i = 0; i < sizeof lines / sizeof *lines; i++) {
		error_info_clear(&error);
		error_info_clear(&tree_error);
		int rc = schema_inference_row(fast, lines[i], strlen(lines[i]), true, &row, &error);
		int tree_rc = schema_inference_row_tree(tree, lines[i], strlen(lines[i]), true, &tree_row, &tree_error);
		bool agree = rows_agree(rc, &row, tree_rc, &tree_row, &error, &tree_error, strstr(lines[i], "\"id\"")) &&
			     row.is_delete == tree_row.is_delete;
		if (!agree)
			fprintf(stderr, "    line %s\n    fast: %d %s %s    jansson: %d %s %s", lines[i], rc, error.message,
				buf_cstr(&row.canonical), tree_rc, tree_error.message, buf_cstr(&tree_row.canonical));
		CHECK(agree);
	}
	CHECK(schema_inference_finish(fast, &fast_schema) == 0);
	CHECK(schema_inference_finish(tree, &tree_schema) == 0);
	char fast_text[4096];
	snprintf(fast_text, sizeof fast_text, "%s", schema_text_of(&fast_schema));
	CHECK(same(fast_text, schema_text_of(&tree_schema)));
	schema_free(&fast_schema);
	schema_free(&tree_schema);
	schema_row_free(&row);
	schema_row_free(&tree_row);
	schema_inference_free(fast);
	schema_inference_free(tree);
}

TEST(fast_inference_agrees_with_jansson_on_rows_with_many_new_names)
{
	struct schema_inference *fast, *tree;
	struct schema_row row, tree_row;
	struct error_info error, tree_error;
	struct schema fast_schema, tree_schema;
	struct buf line;
	CHECK(schema_inference_open(&fast) == 0);
	CHECK(schema_inference_open(&tree) == 0);
	schema_row_init(&row);
	schema_row_init(&tree_row);
	buf_init(&line);
	/* 100 names, then the same in reverse with 100 more, then a duplicate among 150 new ones. */
	for (int round = 0; round < 3; round++) {
		buf_reset(&line);
		buf_append_string(&line, "{\"id\":\"r\"");
		for (int i = 0; i < (round == 0 ? 100 : 200); i++)
			buf_printf(&line, ",\"p%d\":%d", round == 1 ? 199 - i : round == 2 ? 200 + i % 150 : i, i);
		buf_append_string(&line, "}");
		int rc = schema_inference_row(fast, (const char *)line.data, line.size, false, &row, &error);
		int tree_rc = schema_inference_row_tree(tree, (const char *)line.data, line.size, false, &tree_row,
							&tree_error);
		CHECK_EQ(rc, round == 2 ? -EINVAL : 0);
		CHECK(rows_agree(rc, &row, tree_rc, &tree_row, &error, &tree_error, true));
	}
	CHECK(schema_inference_finish(fast, &fast_schema) == 0);
	CHECK(schema_inference_finish(tree, &tree_schema) == 0);
	CHECK_EQ(fast_schema.property_count, 200);
	char *fast_text = strdup(schema_text_of(&fast_schema));
	CHECK(same(fast_text, schema_text_of(&tree_schema)));
	free(fast_text);
	schema_free(&fast_schema);
	schema_free(&tree_schema);
	buf_free(&line);
	schema_row_free(&row);
	schema_row_free(&tree_row);
	schema_inference_free(fast);
	schema_inference_free(tree);
}

TEST(common_rows_take_the_fast_path)
{
	/* The scanner handles ordinary rows itself (jansson only sees the unusual ones). */
	static const char *const lines[] = {
		"{\"id\":\"p1\",\"name\":\"Ann \\\"A\\\" \xc3\xa9\",\"age\":42,\"score\":87.25,\"active\":true,"
		"\"joined\":\"2020-01-31\",\"tags\":[\"a\",\"b\"],\"v\":[0.5,-1e-3],\"gone\":null}",
		" { \"id\" : \"p2\" , \"ratio\" : 1e-7 }\r",
	};
	struct schema_scan scan;
	schema_scan_init(&scan);
	for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
		CHECK(schema_scan_line(&scan, lines[i], strlen(lines[i])) == 0);
	CHECK_EQ(scan.field_count, 2);
	CHECK(scan.fields[1].value.kind == SCAN_REAL && scan.fields[1].value.real == 1e-7);
	CHECK(schema_scan_line(&scan, "{\"a\":{}}", 8) == SCHEMA_SCAN_DECLINED);
	schema_scan_free(&scan);
}

/* FORMAT.md §7's definition: print with 1, 2, ... 17 digits and keep the first that reads back. */
static void reference_f64(double value, char *out, size_t size)
{
	char text[48];
	if (value == 0) {
		snprintf(out, size, "0");
		return;
	}
	for (int precision = 1; precision <= 17; precision++) {
		snprintf(text, sizeof text, "%.*e", precision - 1, value);
		if (strtod(text, NULL) == value)
			break;
	}
	char digits[24];
	int count = 0;
	const char *at = text[0] == '-' ? text + 1 : text;
	for (; *at != 'e'; at++)
		if (*at != '.')
			digits[count++] = *at;
	while (count > 1 && digits[count - 1] == '0')
		count--;
	int n = atoi(at + 1) + 1;
	size_t length = 0;
	if (value < 0)
		out[length++] = '-';
	bool plain = n > -6 && n <= 21 && !(fabs(value) >= 0x1p63 && count <= n);
	if (plain && count <= n)
		length += (size_t)snprintf(out + length, size - length, "%.*s%.*s", count, digits, n - count,
					   "000000000000000000000");
	else if (plain && n > 0)
		length += (size_t)snprintf(out + length, size - length, "%.*s.%.*s", n, digits, count - n, digits + n);
	else if (plain)
		length += (size_t)snprintf(out + length, size - length, "0.%.*s%.*s", -n, "000000", count, digits);
	else
		length += (size_t)snprintf(out + length, size - length, "%c%s%.*se%+d", digits[0], count > 1 ? "." : "",
					   count - 1, digits + 1, n - 1);
}

TEST(f64_rendering_equals_the_search_over_1_to_17_digits)
{
	char input[64], want[64];
	for (int round = 0; round < 20000; round++) {
		double value = random_double();
		/* As jansson reads it (17 digits) and as the tokenizer reads short numerals. */
		int precision = round % 2 ? 17 : 1 + (int)(next_random() % 15);
		snprintf(input, sizeof input, "%.*g", precision, value);
		double parsed = strtod(input, NULL);
		if (!isfinite(parsed))
			continue;
		reference_f64(parsed, want, sizeof want);
		const char *got = value_of("f64", input);
		if (!got || strcmp(got, want))
			fprintf(stderr, "    input %s\n", input);
		CHECK(same(got, want));
	}
}

/* The fast shortest digits against their definition, the search (schema.c): equal digits and exponent. */
static bool shortest_agrees(double value, bool as_float)
{
	char fast[24], slow[24];
	int fast_count, fast_exponent, slow_count, slow_exponent;
	schema_shortest_digits(value, as_float, fast, &fast_count, &fast_exponent);
	schema_shortest_by_search(value, as_float, slow, &slow_count, &slow_exponent);
	bool same_digits = fast_count == slow_count && fast_exponent == slow_exponent && strcmp(fast, slow) == 0;
	if (!same_digits)
		fprintf(stderr, "    %s %.17g: fast 0.%se%d, search 0.%se%d\n", as_float ? "float" : "double", value, fast,
			fast_exponent, slow, slow_exponent);
	return same_digits;
}

TEST(the_fast_shortest_digits_are_the_searchs_for_random_floats_doubles_and_every_power_of_two)
{
	size_t checked = 0;
	for (int round = 0; round < 300000; round++) {
		uint64_t bits = next_random();
		uint32_t single = (uint32_t)bits;
		float as_float;
		memcpy(&as_float, &single, sizeof as_float);
		if (isfinite(as_float) && as_float != 0) {
			CHECK(shortest_agrees(fabs((double)as_float), true));
			checked++;
		}
		double value;
		memcpy(&value, &bits, sizeof value);
		if (round % 4 == 0 && isfinite(value) && value != 0) {
			CHECK(shortest_agrees(fabs(value), false));
			checked++;
		}
		float uniform = (float)((double)(bits >> 11) / 9007199254740992.0 * 2 - 1);   /* embeddings: [-1, 1) */
		if (uniform != 0)
			CHECK(shortest_agrees(fabs((double)uniform), true));
		if (harness_failed())
			return;
	}
	/* the lopsided intervals: every power of two and its neighbours, as float and double */
	for (int e = -149; e <= 127; e++) {
		float power = ldexpf(1.0f, e);
		CHECK(shortest_agrees((double)power, true));
		CHECK(shortest_agrees((double)nextafterf(power, INFINITY), true));
		if (e > -149)
			CHECK(shortest_agrees((double)nextafterf(power, 0), true));
	}
	for (int e = -1074; e <= 1023; e++) {
		double power = ldexp(1.0, e);
		CHECK(shortest_agrees(power, false));
		CHECK(shortest_agrees(nextafter(power, INFINITY), false));
	}
	CHECK(checked > 300000);
}

int main(void)
{
	return harness_run();
}
