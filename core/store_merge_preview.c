/*
 * store_merge_preview — a merge computed and kept, to be read as files
 * (layer: store): the mount's merge/<source>/ (docs/MOUNT.md "Merging").
 * Nothing is published; the preview holds the snapshots it merged, so what
 * it renders never changes. A merged table renders exactly the bytes its
 * commit would publish: ours' or theirs' table as it is, or, for a row
 * merge, ours' rows but those the merge writes, in ours' order, then the
 * written rows in the order the merge stages them, each canonical under the
 * resulting schema (a merge write appends its rows in input order).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_merge_int.h"

/* ---- previews (the mount's merge/<source>/) ----------------------------------------------------- */

struct plan_conflict {
	char table[JOURNAL_NAME_MAX + 1];
	size_t line, size;   /* in the plan's conflict arena */
};

struct store_merge_plan {
	struct merge merge;
	struct store_merge_options options;
	struct store_merge_result result;
	struct error_info error;
	struct plan_conflict *conflicts;
	size_t conflict_count, conflict_capacity;
	struct buf conflict_arena;
	int rc;                       /* of collecting a conflict */
};

static void plan_conflict(const char *table, const char *line, size_t size, void *context)
{
	struct store_merge_plan *plan = context;
	if (buf_grow_array((void **)&plan->conflicts, &plan->conflict_capacity, plan->conflict_count + 1,
			   sizeof *plan->conflicts) < 0) {
		plan->rc = -ENOMEM;
		return;
	}
	struct plan_conflict *conflict = &plan->conflicts[plan->conflict_count];
	snprintf(conflict->table, sizeof conflict->table, "%s", table);
	conflict->line = plan->conflict_arena.size;
	conflict->size = size;
	if (buf_append(&plan->conflict_arena, line, size) < 0) {
		plan->rc = -ENOMEM;
		return;
	}
	plan->conflict_count++;
}

int store_merge_plan_open(struct store *store, const char *source, const char *dest,
			  enum store_merge_strategy strategy, struct store_merge_plan **out, struct error_info *error)
{
	*out = NULL;
	error_info_clear(error);
	int rc = store_merge_arguments(source, &dest, error);
	if (rc < 0)
		return rc;
	struct store_merge_plan *plan = calloc(1, sizeof *plan);
	if (!plan)
		return error_info_set(error, -ENOMEM, "out of memory");
	plan->options.strategy = strategy;
	plan->options.dry_run = true;
	buf_init(&plan->conflict_arena);
	plan->merge = (struct merge){ .store = store, .options = &plan->options, .conflict = plan_conflict,
				      .conflict_context = plan, .error = error };
	buf_init(&plan->merge.line);
	rc = store_merge_compute(&plan->merge, source, dest, &plan->result);
	if (rc == 0 && plan->rc < 0)
		rc = error_info_set(error, plan->rc, "out of memory");
	if (rc < 0) {
		store_merge_plan_free(plan);
		return rc;
	}
	plan->merge.error = NULL;
	plan->merge.state = MERGE_PREVIEWED;
	*out = plan;
	return 0;
}

void store_merge_plan_free(struct store_merge_plan *plan)
{
	if (!plan)
		return;
	store_merge_state_free(&plan->merge);
	free(plan->conflicts);
	buf_free(&plan->conflict_arena);
	free(plan);
}

const struct store_merge_result *store_merge_plan_result(const struct store_merge_plan *plan)
{
	return &plan->result;
}

/* The merged table named table, or NULL. */
static struct merge_table *plan_table_named(struct store_merge_plan *plan, const char *table)
{
	for (size_t i = 0; i < plan->merge.count; i++) {
		struct merge_table *entry = &plan->merge.tables[i];
		if (entry->action != ACTION_NONE && entry->action != ACTION_DROP && strcmp(entry->name, table) == 0)
			return entry;
	}
	return NULL;
}

static int name_compare(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int store_merge_plan_tables(struct store_merge_plan *plan, int (*visit)(const char *table, void *context),
			    void *context)
{
	struct merge *merge = &plan->merge;
	const char **names = calloc(merge->count + merge->ours_heads.count + 1, sizeof *names);
	if (!names)
		return -ENOMEM;
	size_t count = 0;
	if (plan->result.outcome == STORE_MERGE_UP_TO_DATE) {
		for (size_t i = 0; i < merge->ours_heads.count; i++)
			names[count++] = merge->ours_heads.heads[i].name;
	}
	for (size_t i = 0; i < merge->count; i++)
		if (merge->tables[i].action != ACTION_NONE && merge->tables[i].action != ACTION_DROP)
			names[count++] = merge->tables[i].name;
	qsort(names, count, sizeof *names, name_compare);
	int rc = 0;
	for (size_t i = 0; i < count && rc == 0; i++)
		rc = visit(names[i], context);
	free(names);
	return rc > 0 ? 0 : rc;
}

int store_merge_plan_conflict_tables(struct store_merge_plan *plan,
				     int (*visit)(const char *table, void *context), void *context)
{
	const char **names = calloc(plan->conflict_count + 1, sizeof *names);
	if (!names)
		return -ENOMEM;
	size_t count = 0;
	for (size_t i = 0; i < plan->conflict_count; i++)
		names[count++] = plan->conflicts[i].table;
	qsort(names, count, sizeof *names, name_compare);
	int rc = 0;
	for (size_t i = 0; i < count && rc == 0; i++)
		if (i == 0 || strcmp(names[i], names[i - 1]) != 0)
			rc = visit(names[i], context);
	free(names);
	return rc > 0 ? 0 : rc;
}

int store_merge_plan_conflicts(struct store_merge_plan *plan, const char *table, struct buf *out)
{
	int rc = 0, found = 0;
	for (size_t i = 0; i < plan->conflict_count && rc == 0; i++)
		if (strcmp(plan->conflicts[i].table, table) == 0) {
			found = 1;
			rc = buf_append(out, plan->conflict_arena.data + plan->conflicts[i].line, plan->conflicts[i].size);
		}
	return rc < 0 ? rc : found ? 0 : -ENOENT;
}

static int table_bytes(struct store_snapshot *snapshot, const char *table, struct buf *out)
{
	struct store_table *opened;
	int rc = store_table_open(snapshot, table, &opened);
	if (rc < 0)
		return rc;
	uint64_t size = store_table_size(opened);
	size_t start = out->size;
	if ((rc = buf_reserve(out, size)) == 0) {
		ssize_t got = store_table_pread(opened, out->data + start, size, 0);
		if (got < 0)
			rc = (int)got;
		else if ((uint64_t)got != size)
			rc = -EIO;
		else
			out->size = start + size;
	}
	store_table_close(opened);
	return rc;
}

struct id_entry {
	const uint8_t *id;
	size_t size;
};

static int id_entry_compare(const void *a, const void *b)
{
	const struct id_entry *x = a, *y = b;
	size_t common = x->size < y->size ? x->size : y->size;
	int order = memcmp(x->id, y->id, common);
	return order ? order : (x->size > y->size) - (x->size < y->size);
}

/*
 * The bytes a merge write leaves: ours' rows but those the apply list names,
 * in ours' order, then the apply list's rows in order, each canonical under
 * the table's resulting schema (so exactly what the commit publishes).
 */
static int render_rows(struct store_merge_plan *plan, struct merge_table *table, struct buf *out)
{
	struct merge *merge = &plan->merge;
	struct buf ours;
	buf_init(&ours);
	struct schema schema;
	schema_init(&schema);
	struct schema_row row;
	schema_row_init(&row);
	struct table_info info;
	struct error_info ignored;
	struct id_entry *ids = calloc(table->apply_count + 1, sizeof *ids);
	int rc = ids ? table_bytes(merge->ours, table->ours->name, &ours) : -ENOMEM;
	if (rc == 0)
		rc = store_head_schema(merge->store, table->schema_from_theirs ? table->theirs : table->ours, &info, &schema);
	size_t id_count = 0;
	for (size_t i = 0; rc == 0 && i < table->apply_count; i++)
		if (!table->apply[i].removed)
			ids[id_count++] = (struct id_entry){ table->apply_arena.data + table->apply[i].id, table->apply[i].id_size };
	qsort(ids, id_count, sizeof *ids, id_entry_compare);
	for (size_t at = 0; rc == 0 && at < ours.size;) {
		const uint8_t *line = ours.data + at;
		const uint8_t *end = memchr(line, '\n', ours.size - at);
		size_t length = end ? (size_t)(end - line) + 1 : ours.size - at;
		at += length;
		if ((rc = schema_row_parse(&schema, (const char *)line, end ? length - 1 : length, false, &row, &ignored)) < 0)
			break;
		struct id_entry key = { row.id.data, row.id.size };
		if (!bsearch(&key, ids, id_count, sizeof *ids, id_entry_compare))
			rc = buf_append(out, line, length);
	}
	for (size_t i = 0; rc == 0 && i < table->apply_count; i++) {
		const struct apply_entry *entry = &table->apply[i];
		if (entry->removed)
			continue;
		if ((rc = schema_row_parse(&schema, (const char *)table->apply_arena.data + entry->line, entry->line_size, true,
					   &row, &ignored)) < 0)
			break;
		if (!row.is_delete)
			rc = buf_append(out, row.canonical.data, row.canonical.size);
	}
	free(ids);
	schema_row_free(&row);
	schema_free(&schema);
	buf_free(&ours);
	return rc;
}

int store_merge_plan_render(struct store_merge_plan *plan, const char *table, struct buf *out)
{
	if (plan->result.outcome == STORE_MERGE_UP_TO_DATE)
		return table_bytes(plan->merge.ours, table, out);
	struct merge_table *entry = plan_table_named(plan, table);
	if (!entry)
		return -ENOENT;
	switch (entry->action) {
	case ACTION_KEEP:
		return table_bytes(plan->merge.ours, entry->ours->name, out);
	case ACTION_TAKE:
	case ACTION_ADOPT:
		return table_bytes(plan->merge.theirs, entry->theirs->name, out);
	case ACTION_ROWS:
		return render_rows(plan, entry, out);
	default:
		return -ENOENT;
	}
}
