/*
 * store_diff — what changed between two snapshots, as JSON lines (layer:
 * store): `graphfs diff` and the mount's diff/<A>..<B>/ (docs/MOUNT.md
 * "Diffs").
 *
 * Tables are paired by stable id, so a renamed table is one table; a table
 * of A that B lacks and a table of B that A lacks under the same name are
 * paired too (dropped and created again: its rows are compared by id). A
 * pair is shown under B's name, or A's when B dropped it. Rows come from
 * table_diff: subtrees the two versions share are skipped unread, so the cost
 * is O(rows changed × log rows) (docs/ARCHITECTURE.md "Diffs and merges").
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "store_int.h"

int store_json_string(struct buf *out, const void *bytes, size_t size)
{
	json_t *string = json_stringn_nocheck(bytes, size);
	char *text = string ? json_dumps(string, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
	int rc = text ? buf_append_string(out, text) : -ENOMEM;
	free(text);
	json_decref(string);
	return rc;
}

int store_snapshot_open_named(struct store *store, const char *branch, const char *text,
			      struct store_snapshot **out, struct error_info *error)
{
	*out = NULL;
	if (!text || !*text)
		return error_info_set(error, -EINVAL, "an empty name: give a branch, @VERSION, a time or a tag");
	if (text[0] != '@') {
		int rc = store_snapshot_open(store, text, STORE_LATEST, out, NULL);
		if (rc != -ENOENT && rc != -EINVAL)
			return rc < 0 ? error_info_set(error, rc, "cannot read branch %s: %s", text, io_strerror(rc)) : 0;
	}
	int rc = store_snapshot_open_at(store, branch, text[0] == '@' ? text + 1 : text, out, error);
	if (rc == -ENOENT && error && (!error->message[0] || strstr(error->message, "no tag")))
		error_info_set(error, rc, "%s is no branch, version, time or tag of this store", text);
	return rc;
}

/* ---- pairing -------------------------------------------------------------------- */

struct table_pair {
	const struct head_row *a, *b;   /* either may be NULL, not both */
	const char *name;               /* b's name, else a's */
};

struct pairing {
	struct store_head_list a, b;
	struct table_pair *pairs;
	size_t count;
};

static int pair_compare(const void *left, const void *right)
{
	const struct table_pair *x = left, *y = right;
	return strcmp(x->name, y->name);
}

static void pairing_free(struct pairing *pairing)
{
	free(pairing->a.heads);
	free(pairing->b.heads);
	free(pairing->pairs);
}

static int pairing_build(struct store_snapshot *a, struct store_snapshot *b, struct pairing *out)
{
	memset(out, 0, sizeof *out);
	int rc = store_heads_collect(a, &out->a);
	if (rc == 0)
		rc = store_heads_collect(b, &out->b);
	if (rc < 0)
		return rc;
	out->pairs = calloc(out->a.count + out->b.count + 1, sizeof *out->pairs);
	if (!out->pairs)
		return -ENOMEM;
	bool *a_taken = calloc(out->a.count + 1, sizeof *a_taken);
	if (!a_taken)
		return -ENOMEM;
	for (size_t i = 0; i < out->b.count; i++) {
		const struct head_row *b_head = &out->b.heads[i];
		const struct head_row *a_head = store_head_list_find(&out->a, &b_head->stable_id);
		if (a_head)
			a_taken[a_head - out->a.heads] = true;
		out->pairs[out->count++] = (struct table_pair){ a_head, b_head, b_head->name };
	}
	/* dropped in B: paired with a table of B created under the same name, if any */
	for (size_t i = 0; i < out->a.count; i++) {
		if (a_taken[i])
			continue;
		const struct head_row *a_head = &out->a.heads[i];
		struct table_pair *same_name = NULL;
		for (size_t p = 0; p < out->count; p++)
			if (!out->pairs[p].a && strcmp(out->pairs[p].name, a_head->name) == 0)
				same_name = &out->pairs[p];
		if (same_name)
			same_name->a = a_head;
		else
			out->pairs[out->count++] = (struct table_pair){ a_head, NULL, a_head->name };
	}
	free(a_taken);
	qsort(out->pairs, out->count, sizeof *out->pairs, pair_compare);
	return 0;
}

static const struct table_pair *pairing_find(const struct pairing *pairing, const char *name)
{
	for (size_t i = 0; i < pairing->count; i++)
		if (strcmp(pairing->pairs[i].name, name) == 0)
			return &pairing->pairs[i];
	return NULL;
}

/* ---- rows ------------------------------------------------------------------------- */

struct rows_visit {
	int (*visit)(const char *line, size_t size, void *context);
	void *context;
	struct buf line;
	bool stop_at_first;   /* only whether anything differs */
	bool found;
};

static int emit_row_change(const uint8_t *id, size_t id_size, const uint8_t *a_row, size_t a_size,
			   const uint8_t *b_row, size_t b_size, void *context)
{
	struct rows_visit *rows = context;
	rows->found = true;
	if (rows->stop_at_first)
		return 1;
	struct buf *line = &rows->line;
	buf_reset(line);
	const char *op = !a_row ? "insert" : !b_row ? "delete" : "update";
	int rc = buf_printf(line, "{\"op\":\"%s\",\"id\":", op);
	if (rc == 0)
		rc = store_json_string(line, id, id_size);
	if (rc == 0)
		rc = buf_append_string(line, ",\"before\":");
	if (rc == 0)
		rc = a_row ? buf_append(line, a_row, a_size) : buf_append_string(line, "null");
	if (rc == 0)
		rc = buf_append_string(line, ",\"after\":");
	if (rc == 0)
		rc = b_row ? buf_append(line, b_row, b_size) : buf_append_string(line, "null");
	if (rc == 0)
		rc = buf_append_string(line, "}\n");
	if (rc < 0)
		return rc;
	rc = rows->visit((const char *)line->data, line->size, rows->context);
	return rc > 0 ? 0 : rc;
}

/* The table version of head, or an empty table (NULL head). */
static int pair_info(struct store *store, const struct head_row *head, struct table_info *out)
{
	memset(out, 0, sizeof *out);
	return head ? table_info_read(store->pager, head->table, out) : 0;
}

static int pair_rows(struct store *store, const struct table_pair *pair, struct rows_visit *rows)
{
	struct table_info a_info, b_info;
	int rc = pair_info(store, pair->a, &a_info);
	if (rc == 0)
		rc = pair_info(store, pair->b, &b_info);
	if (rc < 0)
		return rc;
	rc = table_diff(store->pager, &a_info, &b_info, emit_row_change, rows);
	return rc > 0 ? 0 : rc;
}

int store_diff_rows(struct store_snapshot *a, struct store_snapshot *b, const char *table,
		    int (*visit)(const char *line, size_t size, void *context), void *context)
{
	struct pairing pairing;
	struct rows_visit rows = { .visit = visit, .context = context };
	buf_init(&rows.line);
	int rc = pairing_build(a, b, &pairing);
	const struct table_pair *pair = rc == 0 ? pairing_find(&pairing, table) : NULL;
	if (rc == 0 && !pair)
		rc = -ENOENT;
	if (rc == 0)
		rc = pair_rows(a->store, pair, &rows);
	buf_free(&rows.line);
	pairing_free(&pairing);
	return rc;
}

int store_diff_names(struct store_snapshot *a, struct store_snapshot *b,
		     int (*visit)(const char *table, void *context), void *context)
{
	struct pairing pairing;
	struct rows_visit rows = { .stop_at_first = true };
	buf_init(&rows.line);
	int rc = pairing_build(a, b, &pairing);
	for (size_t i = 0; rc == 0 && i < pairing.count; i++) {
		const struct table_pair *pair = &pairing.pairs[i];
		if (pair->a && pair->b && block_address_equal(pair->a->table, pair->b->table))
			continue;
		rows.found = false;
		if ((rc = pair_rows(a->store, pair, &rows)) < 0)
			break;
		if (rows.found && (rc = visit(pair->name, context)) != 0) {
			rc = rc > 0 ? 0 : rc;
			break;
		}
	}
	buf_free(&rows.line);
	pairing_free(&pairing);
	return rc;
}

/* ---- tables ----------------------------------------------------------------------------- */

static int schema_json(struct store *store, const struct head_row *head, struct buf *out)
{
	struct table_info info;
	struct schema schema;
	schema_init(&schema);
	int rc = store_head_schema(store, head, &info, &schema);
	if (rc == 0)
		rc = schema_render(&schema, out);
	schema_free(&schema);
	while (rc == 0 && out->size && out->data[out->size - 1] == '\n')
		out->size--;
	return rc;
}

static int emit_table_change(struct store *store, const char *op, const struct table_pair *pair, struct buf *line,
			     int (*visit)(const char *line, size_t size, void *context), void *context)
{
	buf_reset(line);
	int rc = buf_printf(line, "{\"op\":\"%s\",\"table\":", op);
	if (rc == 0)
		rc = store_json_string(line, pair->name, strlen(pair->name));
	if (rc == 0 && strcmp(op, "rename") == 0) {
		rc = buf_append_string(line, ",\"from\":");
		if (rc == 0)
			rc = store_json_string(line, pair->a->name, strlen(pair->a->name));
	}
	if (rc == 0 && strcmp(op, "schema") == 0) {
		rc = buf_append_string(line, ",\"before\":");
		if (rc == 0)
			rc = schema_json(store, pair->a, line);
		if (rc == 0)
			rc = buf_append_string(line, ",\"after\":");
		if (rc == 0)
			rc = schema_json(store, pair->b, line);
	}
	if (rc == 0)
		rc = buf_append_string(line, "}\n");
	if (rc == 0)
		rc = visit((const char *)line->data, line->size, context);
	return rc;
}

int store_diff_tables(struct store_snapshot *a, struct store_snapshot *b,
		      int (*visit)(const char *line, size_t size, void *context), void *context)
{
	struct pairing pairing;
	struct buf line;
	buf_init(&line);
	int rc = pairing_build(a, b, &pairing);
	for (size_t i = 0; rc == 0 && i < pairing.count; i++) {
		const struct table_pair *pair = &pairing.pairs[i];
		bool same_table = pair->a && pair->b && ulid_compare(&pair->a->stable_id, &pair->b->stable_id) == 0;
		if (pair->a && !same_table)
			rc = emit_table_change(a->store, "drop", &(struct table_pair){ pair->a, NULL, pair->a->name }, &line,
					       visit, context);
		if (rc == 0 && pair->b && !same_table)
			rc = emit_table_change(a->store, "create", pair, &line, visit, context);
		if (rc == 0 && same_table && strcmp(pair->a->name, pair->b->name) != 0)
			rc = emit_table_change(a->store, "rename", pair, &line, visit, context);
		if (rc == 0 && same_table && strcmp(pair->a->schema_hash, pair->b->schema_hash) != 0)
			rc = emit_table_change(a->store, "schema", pair, &line, visit, context);
	}
	if (rc > 0)
		rc = 0;
	buf_free(&line);
	pairing_free(&pairing);
	return rc;
}
