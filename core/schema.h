/*
 * schema — table schemas, row validation, inference and canonical rendering
 * (layer: codec; depends on buf, ulid, error_info and jansson only).
 *
 * Schema file (what schema/<Name>.json shows and accepts), docs/MOUNT.md "Writing":
 *   {"kind":"node"|"edge", "from":"<Node>", "to":"<Node>" (edges only),
 *    "key":["p",...] (optional, nodes only),
 *    "properties":{"p":{"type":T,"nullable":bool}, ...}}
 * T is one of string bool i64 f64 date datetime, list<T>, vector<N> (N f32).
 * Property names follow the table-name rule [A-Za-z_][A-Za-z0-9_]{0,127} and
 * may not be id, from or to.
 *
 * Canonical row (the bytes stored and served; "same logical rows, same bytes"):
 *   - keys in schema order: "id" first; then "from", "to" for edges; then
 *     properties in the schema's property order;
 *   - null and absent properties are omitted (so adding a nullable property
 *     never changes existing rows' bytes);
 *   - no insignificant whitespace; strings escaped as JSON requires (", \\,
 *     control characters as \b \f \n \r \t or \u00XX), non-ASCII kept as UTF-8,
 *     "/" not escaped;
 *   - numbers: i64 in decimal; f64 in the shortest form that round-trips,
 *     JavaScript style (1.0 renders "1", 1e21 renders "1e+21"), so widening
 *     i64 to f64 never changes bytes; vector elements as the shortest form
 *     that round-trips through f32; -0 renders "0"; integral values of
 *     magnitude >= 2^63 use the exponent form (1e+19) so that they parse
 *     back as JSON numbers a 64-bit-integer parser accepts;
 *   - one "\n" after the row.
 *
 * Schema hash: xxHash3-64 of the canonical schema JSON, rendered as 16
 * lower-case hex digits.
 */
#ifndef GRAPHFS_SCHEMA_H
#define GRAPHFS_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "error_info.h"

#define SCHEMA_NAME_MAX 128        /* table and property names */
#define SCHEMA_ID_MAX 512          /* bytes of a row id */
#define SCHEMA_DEFAULT_ROW_MAX (1u << 20) /* default limit of one input line, bytes */

enum schema_kind { SCHEMA_NODE = 0, SCHEMA_EDGE = 1 };

enum schema_type_kind {
	SCHEMA_STRING = 0,
	SCHEMA_BOOL,
	SCHEMA_I64,
	SCHEMA_F64,
	SCHEMA_DATE,      /* "YYYY-MM-DD", a real calendar date */
	SCHEMA_DATETIME,  /* RFC 3339: YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM) */
	SCHEMA_LIST,      /* list<element> */
	SCHEMA_VECTOR,    /* vector<dimension>, f32 elements */
};

struct schema_type {
	enum schema_type_kind kind;
	enum schema_type_kind element;   /* SCHEMA_LIST: element kind (not itself a list or vector) */
	uint32_t dimension;              /* SCHEMA_VECTOR: number of elements, 1..65536 */
};

struct schema_property {
	char name[SCHEMA_NAME_MAX + 1];
	struct schema_type type;
	bool nullable;
};

struct schema {
	enum schema_kind kind;
	char from[SCHEMA_NAME_MAX + 1];  /* edges: the node table of "from" */
	char to[SCHEMA_NAME_MAX + 1];    /* edges: the node table of "to" */
	size_t key_count;                /* nodes: properties the id derives from, 0 if none */
	char (*key)[SCHEMA_NAME_MAX + 1];
	size_t property_count;
	struct schema_property *properties;
};

void schema_init(struct schema *schema);   /* an empty node schema */
void schema_free(struct schema *schema);
int schema_copy(struct schema *out, const struct schema *from);

/* True if name matches [A-Za-z_][A-Za-z0-9_]{0,127}. */
bool schema_name_is_valid(const char *name, size_t length);

/*
 * Parses a schema file. Returns 0, or -EINVAL with error->line (1-based
 * line of the text where the problem is) and a message naming the field.
 * On error *out is left empty (schema_init state).
 */
int schema_parse(const char *text, size_t size, struct schema *out, struct error_info *error);

/* Appends the canonical schema JSON (followed by "\n") to out. Returns 0 or -ENOMEM. */
int schema_render(const struct schema *schema, struct buf *out);

/* Whether schema is what a table created without one has (`touch tables/X.jsonl`):
 * a node schema with no properties and no key. Such a table, while it has no
 * rows, takes the schema inferred from its first rows. */
bool schema_is_undeclared(const struct schema *schema);

/* The schema hash as 16 lower-case hex digits plus NUL. */
void schema_hash(const struct schema *schema, char out[17]);

/*
 * Checks that changing from old to new is compatible: same kind and
 * endpoints, same key, every old property kept with the same position,
 * type equal or widened (i64 -> f64, list<i64> -> list<f64>), nullable kept
 * or relaxed to true; new properties appended at the end and nullable.
 * Returns 0 or -EINVAL with a message naming the property.
 */
int schema_check_compatible(const struct schema *old, const struct schema *new_schema,
			    struct error_info *error);

/* ---- rows ---------------------------------------------------------------- */

struct schema_scan;

struct schema_row {
	struct buf canonical;     /* the canonical line, "\n" included (empty for deletes) */
	struct buf id;            /* the row id (not NUL-terminated in size; buf_cstr works) */
	struct buf from;          /* edges: the from node id */
	struct buf to;            /* edges: the to node id */
	bool is_delete;           /* the line was {"id":"...","@delete":true} (or "detach") */
	bool is_detach;           /* {"id":"...","@delete":"detach"}: the edges that reference it go too */
	bool is_patch;            /* {"id":"...","@patch":true,...}: only id is set; the writer merges the
				   * line into the row's current properties and parses the result */
	struct schema_scan *scan; /* the parser's working memory, kept across lines (schema_int.h) */
};

void schema_row_init(struct schema_row *row);
void schema_row_free(struct schema_row *row);

/*
 * Parses and validates one input line (without its "\n") against schema:
 * JSON syntax (duplicate keys refused), an object, known properties only,
 * types, nullability, date/datetime/vector checks, id rules (key-derived ids
 * must agree with a given id; without key and id a ULID is assigned), edge
 * from/to present and strings. allow_delete permits {"id":…,"@delete":true}
 * and {"id":…,"@patch":true,…} (merges; a patch sets only id and is_patch). Fills row (reset first). Returns 0 or -EINVAL with a message;
 * the caller sets the file and line with error_info_locate.
 */
int schema_row_parse(const struct schema *schema, const char *line, size_t size, bool allow_delete,
		     struct schema_row *row, struct error_info *error);

/* ---- inference ------------------------------------------------------------ */

/*
 * Infers a schema from rows when a table is created by writing rows.
 * Properties are ordered by first appearance; a property's type is that of
 * its first non-null value, widened i64 -> f64 (also inside lists); other
 * conflicts are -EINVAL. Arrays of numbers infer list<i64>/list<f64>;
 * strings that are dates or datetimes stay strings (no guessing). A
 * property is nullable unless it appeared, non-null, in every row. Inferred
 * tables are always nodes: a row with "from" or "to" is refused (-EINVAL,
 * "edge tables need a schema: ..."), since an edge table's node tables
 * cannot be guessed. Delete lines (allow_delete) are accepted and counted
 * as no row.
 *
 * Rendering does not depend on types or nullability, and properties only
 * ever get appended, so a row rendered with schema_inference_row is final.
 */
struct schema_inference;
int schema_inference_open(struct schema_inference **out);
/* Feeds one line; on success row holds the canonical line and id (like schema_row_parse). */
int schema_inference_row(struct schema_inference *inference, const char *line, size_t size,
			 bool allow_delete, struct schema_row *row, struct error_info *error);
/* Produces the schema of everything fed so far. */
int schema_inference_finish(struct schema_inference *inference, struct schema *out);
void schema_inference_free(struct schema_inference *inference);

#endif
