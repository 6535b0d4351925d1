/*
 * schema internals shared by schema.c and schema_scan.c (and by the tests and
 * fuzz targets that compare the two row parsers). Not part of the module API.
 *
 * Rows are parsed on one of two paths that must agree byte for byte:
 *   - the fast path: schema_scan_line tokenizes the line into a flat list of
 *     fields, and schema.c validates and renders from it; it accepts only
 *     lines it is sure of and DECLINES everything else (never refuses);
 *   - the tree path: jansson parses the line into a tree, and schema.c
 *     validates and renders from the tree; it is the judge of every line the
 *     fast path declines, with the precise error message.
 * schema_row_parse and schema_inference_row try the fast path first.
 */
#ifndef GRAPHFS_SCHEMA_INT_H
#define GRAPHFS_SCHEMA_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "schema.h"

#define SCHEMA_SCAN_DECLINED 1   /* a fast-path step's "ask jansson" result (positive, unlike errors) */

enum scan_kind { SCAN_NULL, SCAN_TRUE, SCAN_FALSE, SCAN_INTEGER, SCAN_REAL, SCAN_STRING, SCAN_ARRAY };

struct scan_value {
	enum scan_kind kind;
	const char *text;          /* numbers: the numeral as written; strings: the bytes between the quotes */
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
	/* SCAN_ARRAY: elements are scan->elements[first .. first + count), all scalars */
	size_t first;
	size_t count;
};

struct scan_field {
	const char *key;           /* printable ASCII without escapes (others are declined) */
	size_t key_length;
	struct scan_value value;
};

/* The fast path's working memory, kept in a schema_row and reused for every line. */
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

/* A string value's decoded bytes (length in *length). */
static inline const char *schema_scan_text(const struct schema_scan *scan, const struct scan_value *value,
					   size_t *length)
{
	*length = value->escaped ? value->decoded_length : value->length;
	return value->escaped ? (const char *)scan->decoded.data + value->decoded_at : value->text;
}

/*
 * The tree path alone (jansson), exactly as schema_row_parse and
 * schema_inference_row behave without the fast path: for tests that check
 * that both paths agree.
 */
int schema_row_parse_tree(const struct schema *schema, const char *line, size_t size, bool allow_delete,
			  struct schema_row *row, struct error_info *error);
int schema_inference_row_tree(struct schema_inference *inference, const char *line, size_t size,
			      bool allow_delete, struct schema_row *row, struct error_info *error);

/* The definition of the shortest digits (schema.c, FORMAT.md §7): the search
 * with printf and strtod that the fast path must agree with (for tests). */
void schema_shortest_by_search(double value, bool as_float, char digits[24], int *count, int *exponent);
/* The same digits, the fast way (double-conversion, falling back to the search). */
void schema_shortest_digits(double value, bool as_float, char digits[24], int *count, int *exponent);

#endif
