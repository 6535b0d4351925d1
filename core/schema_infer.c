/*
 * schema_infer — a schema inferred from rows: the properties and types the
 * rows of a table without a declared schema bring, line by line, over the same
 * list of fields the validator reads (schema_row.c, whose helpers for ids,
 * directives, deletes and messages it shares through schema_int.h), so that an
 * inferred table's rows are checked and rendered exactly as a declared one's.
 *
 * An inference moves through: open (no rows) -> fed (each accepted row may
 * append properties, widen types, and counts presence) -> finished (finish
 * produces a schema from the state; feeding may continue afterwards). A
 * failed row leaves the inference exactly as it was (schema_row.c invariant 3).
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

#define NEW_NAMES_MAX 64   /* new property names one tokenized row may bring (repeats found by comparison) */

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
			schema_row_value_path(path, sizeof path, name, (long)i);
			return schema_row_type_mismatch(path, "a string, number or boolean (list elements)", scan, element, error);
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
				schema_row_value_path(path, sizeof path, name, (long)i);
				return schema_row_type_mismatch(path, schema_scalar_name(out->type.element), scan, element, error);
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
	    schema_row_name_equals(inference->schema.properties[hint].name, key, length))
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
			if ((rc = schema_row_check_directive(field, allow_delete, error)))
				return rc;
			if (slots->directive)
				return SCHEMA_SCAN_DECLINED;
			slots->directive = i + 1;
			continue;
		}
		if (schema_row_key_is(field, "id", 2)) {
			if (slots->id)
				return SCHEMA_SCAN_DECLINED;
			slots->id = i + 1;
			continue;
		}
		/* known names were checked when they were added */
		long position = find_inferred(inference, field->key, field->key_length, hint);
		if (position < 0 && (schema_row_key_is(field, "from", 4) || schema_row_key_is(field, "to", 2)))
			return edge_needs_schema(error);
		if (position < 0 && !schema_name_is_valid(field->key, field->key_length)) {
			schema_row_quote_key(field, quoted, sizeof quoted);
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
					if (schema_row_key_is(&scan->fields[scan->new_fields[j]], field->key, field->key_length))
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
	int rc = schema_row_put_property_name(out, field->key, field->key_length);
	return rc ? rc : schema_row_render_untyped(out, scan, &field->value);
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
	if ((rc = schema_row_scan_reserve(scan, known > scan->field_count ? known : scan->field_count, known)))
		return rc;
	/* an endpoint anywhere in the line is the line's first error (inference_check finds it too,
	 * but maybe after another: the tokenizer's fields go to jansson on any error) */
	for (size_t i = 0; source == FROM_JANSSON && i < scan->field_count; i++)
		if (schema_row_key_is(&scan->fields[i], "from", 4) || schema_row_key_is(&scan->fields[i], "to", 2))
			return edge_needs_schema(error);
	if ((rc = inference_check(inference, scan, source, allow_delete, &slots, &new_count, error)))
		return rc;
	if (slots.directive && schema_row_directive_is_patch(scan, slots.directive))
		return error_info_set(error, -EINVAL,
				      "\"@patch\" changes a row that exists, and this table has no rows yet: write the whole row");
	if (slots.directive)
		return schema_row_parse_delete(scan, slots.directive, slots.id, row, error);
	const struct scan_value *given = slots.id ? &scan->fields[slots.id - 1].value : NULL;
	if ((rc = given ? schema_row_take_id_field(scan, given, "id", &row->id, error) : schema_row_assign_ulid(&row->id)))
		return rc;
	/* Render before the inference changes: known properties in their order, then this row's new ones in its order. */
	struct buf *out = &row->canonical;
	if ((rc = schema_row_render_head_given(out, scan, given, row, false)))
		return rc;
	for (size_t i = 0; i < known; i++)
		if ((rc = render_inferred(out, scan, scan->slots[i] ? &scan->fields[scan->slots[i] - 1] : NULL)))
			return rc;
	for (size_t j = 0; j < new_count; j++)
		if ((rc = render_inferred(out, scan, &scan->fields[scan->new_fields[j]])))
			return rc;
	if ((rc = schema_put(out, "}\n", 2)) || (rc = inference_reserve(inference, known + new_count)))
		return rc;
	return inference_apply(inference, scan, known, new_count);
}

int schema_inference_row_tree(struct schema_inference *inference, const char *line, size_t size,
			      bool allow_delete, struct schema_row *row, struct error_info *error)
{
	struct schema_scan *scan;
	json_t *object = NULL;
	schema_row_reset(row);
	int rc = schema_row_scan_of(row, &scan);
	if (rc == 0 && (rc = schema_row_tree_fields(line, size, scan, &object, error)) == 0)
		rc = inference_row_from_fields(inference, scan, FROM_JANSSON, allow_delete, row, error);
	rc = schema_row_finish_parse(rc, row, error);
	json_decref(object);
	return rc;
}

int schema_inference_row(struct schema_inference *inference, const char *line, size_t size, bool allow_delete,
			 struct schema_row *row, struct error_info *error)
{
	struct schema_scan *scan;
	schema_row_reset(row);
	int rc = schema_row_scan_of(row, &scan);
	if (rc == 0 && (rc = schema_scan_line(scan, line, size)) == 0)
		rc = inference_row_from_fields(inference, scan, FROM_TOKENIZER, allow_delete, row, NULL);
	if (rc == 0)
		return 0;
	if (rc == -ENOMEM)
		return schema_row_finish_parse(rc, row, error);
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
