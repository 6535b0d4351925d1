/*
 * schema internals shared by schema.c, schema_row.c and schema_scan.c (and
 * by the tests and fuzz targets that compare the two sources of fields). Not
 * part of the module API.
 *
 * A row line becomes a flat list of fields (key, value), and schema_row.c
 * validates and renders rows and feeds inferences from that list alone. The
 * list has two sources:
 *   - the tokenizer, schema_scan_line: one pass over the common line; it
 *     DECLINES every line outside its grammar (never refuses one);
 *   - jansson, schema_scan_tree: the fields of a parsed object, for every
 *     line the tokenizer declines, and for every line whose fields are
 *     refused (jansson is the judge of JSON, duplicate keys included).
 * schema_row_parse and schema_inference_row try the tokenizer first.
 */
#ifndef GRAPHFS_SCHEMA_INT_H
#define GRAPHFS_SCHEMA_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <jansson.h>

#include "buf.h"
#include "schema.h"

#define SCHEMA_SCAN_DECLINED 1   /* a fast-path step's "ask jansson" result (positive, unlike errors) */

/* SCAN_OBJECT, and SCAN_ARRAY as an array's element, come from jansson only (no row accepts them). */
enum scan_kind { SCAN_NULL, SCAN_TRUE, SCAN_FALSE, SCAN_INTEGER, SCAN_REAL, SCAN_STRING, SCAN_ARRAY, SCAN_OBJECT };

struct scan_value {
	enum scan_kind kind;
	const char *text;          /* numbers: the numeral as written (NULL from jansson); strings: the bytes
				      between the quotes (unused when escaped) */
	size_t length;
	/* SCAN_STRING */
	bool escaped;              /* the text has escapes: the decoded bytes are in scan->decoded */
	size_t decoded_at;         /* escaped: offset and length of the decoded bytes */
	size_t decoded_length;
	/* SCAN_INTEGER */
	int64_t integer;
	/* SCAN_REAL: the double jansson reads (strtod), and its shortest digits when the numeral shows them */
	double real;
	bool short_form;           /* digits/digit_count/point below are the canonical shortest digits */
	uint64_t digits;           /* significant digits without trailing zeros, as an integer */
	int digit_count;           /* how many (1..15) */
	int point;                 /* value = 0.<digits> x 10^point */
	bool canonical_text;       /* short_form, and the numeral as written is the canonical text */
	/* SCAN_ARRAY: elements are scan->elements[first .. first + count), scalars (from jansson also
	 * SCAN_OBJECT, or SCAN_ARRAY with no elements of its own: a nested array) */
	size_t first;
	size_t count;
};

struct scan_field {
	const char *key;           /* printable ASCII without escapes (others are declined) */
	size_t key_length;
	struct scan_value value;
};

/* A line's fields and the row code's working memory, kept in a schema_row and reused for every line. */
struct schema_scan {
	struct scan_field *fields;
	size_t field_count;
	size_t field_capacity;
	struct scan_value *elements;
	size_t element_count;
	size_t element_capacity;
	struct buf decoded;        /* decoded bytes of escaped strings, back to back */
	/* schema.c's scratch space */
	struct buf properties;     /* ,"p":v… of the row being rendered */
	size_t *slots;             /* per property: 1 + index of the field holding it, or 0 */
	size_t *spans;             /* per property: where its rendered value starts in properties */
	size_t *new_fields;        /* inference: indices of fields naming new properties */
	size_t slot_capacity;      /* allocated entries of slots, spans and new_fields */
};

void schema_scan_init(struct schema_scan *scan);
void schema_scan_free(struct schema_scan *scan);

/*
 * Tokenizes one line that is one JSON object of scalars and arrays of
 * scalars (grammar in schema_scan.c). Returns 0 with scan->fields filled,
 * SCHEMA_SCAN_DECLINED for anything else (including everything jansson
 * refuses), or -ENOMEM. Values point into line, which must outlive their use.
 */
int schema_scan_line(struct schema_scan *scan, const char *line, size_t size);

/*
 * The fields of a JSON object jansson parsed, in its order (jansson keeps
 * insertion order), strings copied to scan->decoded. 0 or -ENOMEM. Keys point
 * into object, which must outlive their use.
 */
struct json_t;
int schema_scan_tree(struct schema_scan *scan, const struct json_t *object);

/* A string value's decoded bytes (length in *length). */
static inline const char *schema_scan_text(const struct schema_scan *scan, const struct scan_value *value,
					   size_t *length)
{
	*length = value->escaped ? value->decoded_length : value->length;
	return value->escaped ? (const char *)scan->decoded.data + value->decoded_at : value->text;
}

/*
 * Rows from jansson's fields alone, exactly as schema_row_parse and
 * schema_inference_row behave without the tokenizer: for tests that check
 * that both sources agree.
 */
int schema_row_parse_tree(const struct schema *schema, const char *line, size_t size, bool allow_delete,
			  struct schema_row *row, struct error_info *error);
int schema_inference_row_tree(struct schema_inference *inference, const char *line, size_t size,
			      bool allow_delete, struct schema_row *row, struct error_info *error);

/* The definition of the shortest digits (schema.c, FORMAT.md §7): the search
 * with printf and strtod that the library's digits must agree with (for tests). */
void schema_shortest_by_search(double value, bool as_float, char digits[24], int *count, int *exponent);
/* The same digits, the fast way (double-conversion, falling back to the search). */
void schema_shortest_digits(double value, bool as_float, char digits[24], int *count, int *exponent);

/* ---- canonical text (schema.c), for schema_row.c ---------------------------------- */

#define SCHEMA_SNIPPET_MAX 40          /* bytes of user text quoted in a message */

static inline bool schema_kind_is_scalar(enum schema_type_kind kind)
{
	return kind <= SCHEMA_DATETIME;
}
const char *schema_scalar_name(enum schema_type_kind kind);   /* "string", "i64", … */
/* "i64", "list<f64>", "vector<3>"; out needs 24 bytes. Returns out. */
const char *schema_type_format(const struct schema_type *type, char *out, size_t size);
const struct schema_property *schema_find_property(const struct schema *schema, const char *name);
/* A JSON string: ", \ and control characters escaped. 0 or -ENOMEM. */
int schema_render_string(struct buf *out, const char *text, size_t length);
/* A finite value's canonical text (FORMAT.md §7); out needs 40 bytes; returns the length. */
size_t schema_format_decimal(char *out, double value, bool as_float);
/* The same from its shortest digits (value = 0.digits x 10^n). */
size_t schema_format_digits(char *out, double value, const char *digits, int count, int n);
int schema_render_decimal(struct buf *out, double value, bool as_float);
/* Up to SCHEMA_SNIPPET_MAX bytes of text escaped like a JSON string body, "..." if cut. */
void schema_snippet(const char *text, size_t length, char *out, size_t size);
bool schema_date_is_valid(const char *text, size_t length);
bool schema_datetime_is_valid(const char *text, size_t length);
/* One line as a JSON object (duplicate keys refused): 0, or -EINVAL/-ENOMEM with error. */
int schema_load_object(const char *line, size_t size, struct json_t **out, struct error_info *error);

/* ---- shared by the validator (schema_row.c) and inference (schema_infer.c) ---------- */

/* Where the fields came from: the tokenizer may repeat keys, jansson never does. */
enum field_source { FROM_TOKENIZER, FROM_JANSSON };

/* The fields of a line that name its id, its endpoints and its directive (their slots). */
struct row_slots {
	size_t id, from, to, directive;
};

/* buf_append with the common case (room left) inline. */
static inline int schema_put(struct buf *out, const void *bytes, size_t size)
{
	if (out->capacity - out->size > size) {
		memcpy(out->data + out->size, bytes, size);
		out->size += size;
		return 0;
	}
	return buf_append(out, bytes, size);
}

void schema_row_reset(struct schema_row *row);
int schema_row_scan_of(struct schema_row *row, struct schema_scan **out);
/* Room for count properties or fields in slots, spans and new_fields; the first properties slots zeroed. */
int schema_row_scan_reserve(struct schema_scan *scan, size_t count, size_t properties);
/* ,"name": */
int schema_row_put_property_name(struct buf *out, const char *name, size_t length);
/* Any scalar or list of scalars, by its JSON type alone (inference; nulls, objects and nesting never get here). */
int schema_row_render_untyped(struct buf *out, const struct schema_scan *scan, const struct scan_value *value);
/* render_row_head for a row whose id is the field value given (NULL: row->id was assigned or derived). */
int schema_row_render_head_given(struct buf *out, const struct schema_scan *scan, const struct scan_value *given,
			     const struct schema_row *row, bool edge);
/* Where a value is, for messages: property "p" or property "p"[3]. */
void schema_row_value_path(char *out, size_t size, const char *property, long index);
int schema_row_type_mismatch(const char *path, const char *expected, const struct schema_scan *scan,
			 const struct scan_value *value, struct error_info *error);
/* A key as a NUL-terminated snippet for messages. */
void schema_row_quote_key(const struct scan_field *field, char *out, size_t size);
bool schema_row_key_is(const struct scan_field *field, const char *name, size_t length);
/* A schema property name (NUL-terminated) equals key[0..length). */
bool schema_row_name_equals(const char *name, const char *key, size_t length);
/* A string-valued id field (id, from, to) copied into out after its checks. */
int schema_row_take_id_field(const struct schema_scan *scan, const struct scan_value *value, const char *field,
			 struct buf *out, struct error_info *error);
int schema_row_assign_ulid(struct buf *out);
int schema_row_check_directive(const struct scan_field *field, bool allow_delete, struct error_info *error);
/* {"id":"…","@delete":true} or {"id":"…","@delete":"detach"}: nothing else (fields slot - 1). */
bool schema_row_directive_is_patch(const struct schema_scan *scan, size_t directive_slot);
int schema_row_parse_patch(const struct schema_scan *scan, size_t patch_slot, size_t id_slot, struct schema_row *row,
			   struct error_info *error);
int schema_row_parse_delete(const struct schema_scan *scan, size_t delete_slot, size_t id_slot, struct schema_row *row,
			struct error_info *error);
/* The fields of a line the tokenizer declined, from jansson (which refuses what is not JSON). */
int schema_row_tree_fields(const char *line, size_t size, struct schema_scan *scan, json_t **object,
		       struct error_info *error);
int schema_row_finish_parse(int rc, struct schema_row *row, struct error_info *error);

#endif
