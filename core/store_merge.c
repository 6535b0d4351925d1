/*
 * store_merge — three-way merge of one branch into another (layer: store):
 * `graphfs merge` (docs/ARCHITECTURE.md "Diffs and merges", docs/MOUNT.md
 * "Merging").
 *
 * The merge base is the newest common ancestor of the two heads in the
 * commit graph (manifest_merge_base). Source at or below it: up to date,
 * nothing published. Destination at it: fast-forward. Otherwise every table
 * (matched by stable id across base, ours = the destination, theirs = the
 * source) is merged:
 *   - table level: a side that left the table as the base had it takes the
 *     other side's version whole (a restore: O(1), its trees shared); a table
 *     only theirs created comes over with its identity; drops and renames
 *     apply where the other side did not change the table;
 *   - row level, where both sides changed the rows: the two sides' changes
 *     since the base (table_diff, O(changes)) are joined by id; a row only
 *     theirs changed is applied; a row both changed is merged property by
 *     property against the base's row.
 * Conflicts: divergent_insert, divergent_update, delete_update, orphan_edge
 * (an edge one side added whose node the other deleted), schema, table.
 * With any conflict nothing is published, unless a strategy (ours, theirs)
 * resolves each one to that side. The result is ONE commit on the
 * destination whose second parent is the source's head, built as a
 * transaction over ours: drops (edge tables first), renames (through
 * temporary names), theirs' schema changes, row merges, whole-table takes.
 * The commit is conditional on the destination's head not having moved.
 *
 * States of one merge (enum merge_state, checked by merge_check): PLANNED
 * (tables decided) -> ROWS_MERGED -> CHECKED (orphans) -> PUBLISHED or
 * REFUSED (conflicts) or PREVIEWED (dry run).
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "store_int.h"

#include "store_merge_int.h"

static void merge_check(const struct merge *merge, enum merge_state expected)
{
	assert(merge->state == expected);
	(void)merge;
	(void)expected;
}

/* ---- change lists ------------------------------------------------------------------------ */

static int arena_put(struct buf *arena, const void *bytes, size_t size, size_t *offset)
{
	*offset = arena->size;
	return size ? buf_append(arena, bytes, size) : 0;
}

static int collect_change(const uint8_t *id, size_t id_size, const uint8_t *a_row, size_t a_size,
			  const uint8_t *b_row, size_t b_size, void *context)
{
	struct change_list *list = context;
	if (buf_grow_array((void **)&list->items, &list->capacity, list->count + 1, sizeof *list->items) < 0)
		return -ENOMEM;
	struct row_change *change = &list->items[list->count];
	memset(change, 0, sizeof *change);
	change->id_size = id_size;
	change->has_before = a_row != NULL;
	change->has_after = b_row != NULL;
	change->before_size = a_size;
	change->after_size = b_size;
	int rc = arena_put(&list->arena, id, id_size, &change->id);
	if (rc == 0 && a_row)
		rc = arena_put(&list->arena, a_row, a_size, &change->before);
	if (rc == 0 && b_row)
		rc = arena_put(&list->arena, b_row, b_size, &change->after);
	if (rc == 0)
		list->count++;
	return rc;
}

static int table_info_of(struct store *store, const struct head_row *head, struct table_info *out)
{
	memset(out, 0, sizeof *out);
	return head ? table_info_read(store->pager, head->table, out) : 0;
}

/* The changes of side (ours or theirs) since the base, computed once. */
static int side_changes(struct merge *merge, struct merge_table *table, bool theirs, struct change_list **out)
{
	struct change_list *list = theirs ? &table->theirs_changes : &table->ours_changes;
	*out = list;
	if (list->computed)
		return 0;
	struct table_info base_info, side_info;
	int rc = table_info_of(merge->store, table->base, &base_info);
	if (rc == 0)
		rc = table_info_of(merge->store, theirs ? table->theirs : table->ours, &side_info);
	if (rc == 0)
		rc = table_diff(merge->store->pager, &base_info, &side_info, collect_change, list);
	if (rc == 0)
		list->computed = true;
	return rc;
}

static int id_compare(const struct change_list *list, const struct row_change *change, const uint8_t *id,
		      size_t id_size)
{
	size_t common = change->id_size < id_size ? change->id_size : id_size;
	int order = memcmp(list->arena.data + change->id, id, common);
	if (order)
		return order;
	return change->id_size < id_size ? -1 : change->id_size > id_size;
}

/* The change of id in a computed list (id order), or NULL. */
static const struct row_change *change_find(const struct change_list *list, const uint8_t *id, size_t id_size)
{
	size_t low = 0, high = list->count;
	while (low < high) {
		size_t middle = low + (high - low) / 2;
		int order = id_compare(list, &list->items[middle], id, id_size);
		if (order == 0)
			return &list->items[middle];
		if (order < 0)
			low = middle + 1;
		else
			high = middle;
	}
	return NULL;
}

static const uint8_t *change_bytes(const struct change_list *list, size_t offset)
{
	return list->arena.data + offset;
}

/* ---- apply lists ------------------------------------------------------------------------------ */

static int apply_add(struct merge_table *table, const uint8_t *id, size_t id_size, const uint8_t *row, size_t row_size)
{
	if (buf_grow_array((void **)&table->apply, &table->apply_capacity, table->apply_count + 1, sizeof *table->apply) < 0)
		return -ENOMEM;
	struct apply_entry *entry = &table->apply[table->apply_count];
	memset(entry, 0, sizeof *entry);
	entry->id_size = id_size;
	int rc = arena_put(&table->apply_arena, id, id_size, &entry->id);
	if (rc < 0)
		return rc;
	entry->line = table->apply_arena.size;
	if (row) {
		rc = buf_append(&table->apply_arena, row, row_size);
	} else {
		rc = buf_append_string(&table->apply_arena, "{\"id\":");
		if (rc == 0)
			rc = store_json_string(&table->apply_arena, id, id_size);
		if (rc == 0)
			rc = buf_append_string(&table->apply_arena, ",\"@delete\":true}");
	}
	if (rc < 0)
		return rc;
	entry->line_size = table->apply_arena.size - entry->line;
	table->apply_count++;
	return 0;
}

static void apply_remove(struct merge_table *table, const uint8_t *id, size_t id_size)
{
	for (size_t i = 0; i < table->apply_count; i++) {
		struct apply_entry *entry = &table->apply[i];
		if (entry->id_size == id_size && memcmp(table->apply_arena.data + entry->id, id, id_size) == 0)
			entry->removed = true;
	}
}

/* A whole-table take becomes row by row (so that single rows can be left out). */
static int take_as_rows(struct merge *merge, struct merge_table *table)
{
	if (table->action != ACTION_TAKE)
		return 0;
	struct change_list *theirs;
	int rc = side_changes(merge, table, true, &theirs);
	for (size_t i = 0; rc == 0 && i < theirs->count; i++) {
		const struct row_change *change = &theirs->items[i];
		rc = apply_add(table, change_bytes(theirs, change->id), change->id_size,
			       change->has_after ? change_bytes(theirs, change->after) : NULL, change->after_size);
	}
	if (rc == 0) {
		table->action = ACTION_ROWS;
		table->schema_from_theirs = strcmp(table->theirs->schema_hash, table->ours->schema_hash) != 0;
	}
	return rc;
}

/* ---- conflicts ---------------------------------------------------------------------------------- */

static int put_row_or_null(struct buf *line, const uint8_t *row, size_t size)
{
	return row ? buf_append(line, row, size) : buf_append_string(line, "null");
}

/* Reports one conflict; resolved says whether the strategy settled it. */
static int conflict_report(struct merge *merge, const char *kind, const char *table, const uint8_t *id, size_t id_size,
			   const char *property, const uint8_t *base, size_t base_size, const uint8_t *ours,
			   size_t ours_size, const uint8_t *theirs, size_t theirs_size, const char *reason)
{
	bool resolved = merge->options->strategy != STORE_MERGE_NO_STRATEGY;
	if (resolved)
		merge->resolved++;
	else
		merge->conflicts++;
	struct buf *line = &merge->line;
	buf_reset(line);
	int rc = buf_printf(line, "{\"kind\":\"%s\",\"table\":", kind);
	if (rc == 0)
		rc = store_json_string(line, table, strlen(table));
	if (rc == 0 && id) {
		rc = buf_append_string(line, ",\"id\":");
		if (rc == 0)
			rc = store_json_string(line, id, id_size);
	}
	if (rc == 0 && property) {
		rc = buf_append_string(line, ",\"property\":");
		if (rc == 0)
			rc = store_json_string(line, property, strlen(property));
	}
	if (rc == 0 && reason) {
		rc = buf_append_string(line, ",\"reason\":");
		if (rc == 0)
			rc = store_json_string(line, reason, strlen(reason));
	}
	if (rc == 0 && id) {
		if ((rc = buf_append_string(line, ",\"base\":")) == 0 && (rc = put_row_or_null(line, base, base_size)) == 0 &&
		    (rc = buf_append_string(line, ",\"ours\":")) == 0 && (rc = put_row_or_null(line, ours, ours_size)) == 0 &&
		    (rc = buf_append_string(line, ",\"theirs\":")) == 0)
			rc = put_row_or_null(line, theirs, theirs_size);
	}
	if (rc == 0 && resolved)
		rc = buf_printf(line, ",\"resolved\":\"%s\"",
				merge->options->strategy == STORE_MERGE_OURS ? "ours" : "theirs");
	if (rc == 0)
		rc = buf_append_string(line, "}\n");
	if (rc == 0 && merge->conflict)
		merge->conflict(table, (const char *)line->data, line->size, merge->conflict_context);
	return rc;
}

static bool theirs_wins(const struct merge *merge)
{
	return merge->options->strategy == STORE_MERGE_THEIRS;
}

static bool strategy_given(const struct merge *merge)
{
	return merge->options->strategy != STORE_MERGE_NO_STRATEGY;
}

/* ---- table level ------------------------------------------------------------------------------------ */

static int table_add(struct merge *merge, const struct ulid *stable_id)
{
	for (size_t i = 0; i < merge->count; i++) {
		const struct merge_table *table = &merge->tables[i];
		const struct head_row *any = table->base ? table->base : table->ours ? table->ours : table->theirs;
		if (ulid_compare(&any->stable_id, stable_id) == 0)
			return 0;
	}
	struct merge_table *grown = realloc(merge->tables, (merge->count + 1) * sizeof *grown);
	if (!grown)
		return -ENOMEM;
	merge->tables = grown;
	struct merge_table *table = &merge->tables[merge->count++];
	memset(table, 0, sizeof *table);
	table->base = store_head_list_find(&merge->base_heads, stable_id);
	table->ours = store_head_list_find(&merge->ours_heads, stable_id);
	table->theirs = store_head_list_find(&merge->theirs_heads, stable_id);
	buf_init(&table->ours_changes.arena);
	buf_init(&table->theirs_changes.arena);
	buf_init(&table->apply_arena);
	return 0;
}

/* Whether a side wrote the table since the merge base: every write makes a new table version
 * of its incarnation; a compaction stores the same version anew (core/store_compact.c), so the
 * address alone would call a compacted table changed. */
static bool changed(const struct head_row *side, const struct head_row *base)
{
	return ulid_compare(&side->incarnation, &base->incarnation) != 0 || side->table_version != base->table_version;
}

/* The action of one table with a table-level conflict, by strategy. */
static int table_conflict(struct merge *merge, struct merge_table *table, const char *reason, enum table_action ours,
			  enum table_action theirs)
{
	int rc = conflict_report(merge, "table", table->name, NULL, 0, NULL, NULL, 0, NULL, 0, NULL, 0, reason);
	table->action = theirs_wins(merge) ? theirs : ours;
	return rc;
}

static int plan_table(struct merge *merge, struct merge_table *table)
{
	const struct head_row *b = table->base, *o = table->ours, *t = table->theirs;
	snprintf(table->name, sizeof table->name, "%s", o ? o->name : t ? t->name : b->name);
	if (!o && !t)
		return 0;
	if (!t) {   /* theirs dropped it (or never had it) */
		table->action = ACTION_KEEP;
		if (!b)
			return 0;
		if (changed(o, b) || strcmp(o->name, b->name) != 0)
			return table_conflict(merge, table, "dropped on theirs, changed on ours", ACTION_KEEP, ACTION_DROP);
		table->action = ACTION_DROP;
		return 0;
	}
	if (!o) {   /* ours dropped it (or never had it) */
		snprintf(table->name, sizeof table->name, "%s", t->name);
		if (!b) {
			table->action = ACTION_ADOPT;
			return 0;
		}
		if (changed(t, b) || strcmp(t->name, b->name) != 0)
			return table_conflict(merge, table, "dropped on ours, changed on theirs", ACTION_NONE, ACTION_ADOPT);
		return 0;
	}
	/* both have it: its name, then its content */
	const char *base_name = b ? b->name : NULL;
	if (base_name && strcmp(o->name, base_name) == 0)
		snprintf(table->name, sizeof table->name, "%s", t->name);
	else if (base_name && strcmp(t->name, base_name) == 0)
		snprintf(table->name, sizeof table->name, "%s", o->name);
	else if (strcmp(o->name, t->name) != 0) {
		int rc = conflict_report(merge, "table", o->name, NULL, 0, NULL, NULL, 0, NULL, 0, NULL, 0,
					 "renamed differently on the two branches");
		if (rc < 0)
			return rc;
		snprintf(table->name, sizeof table->name, "%s", theirs_wins(merge) ? t->name : o->name);
	}
	bool ours_changed = !b || changed(o, b), theirs_changed = !b || changed(t, b);
	if (block_address_equal(o->table, t->table) || !theirs_changed) {
		table->action = ACTION_KEEP;
		return 0;
	}
	if (!ours_changed) {
		table->action = ACTION_TAKE;
		return 0;
	}
	const char *base_hash = b ? b->schema_hash : "";
	bool ours_schema = strcmp(o->schema_hash, base_hash) != 0, theirs_schema = strcmp(t->schema_hash, base_hash) != 0;
	if (ours_schema && theirs_schema && strcmp(o->schema_hash, t->schema_hash) != 0) {
		int rc = conflict_report(merge, "schema", table->name, NULL, 0, NULL, NULL, 0, NULL, 0, NULL, 0,
					 "the schema changed differently on the two branches");
		table->action = theirs_wins(merge) ? ACTION_TAKE : ACTION_KEEP;
		return rc;
	}
	table->action = ACTION_ROWS;
	table->schema_from_theirs = theirs_schema && !ours_schema;
	return 0;
}

/* Two tables of the result under one name: the later one yields. */
static int check_names(struct merge *merge)
{
	for (size_t i = 0; i < merge->count; i++) {
		struct merge_table *table = &merge->tables[i];
		if (table->action == ACTION_NONE || table->action == ACTION_DROP)
			continue;
		for (size_t j = 0; j < i; j++) {
			struct merge_table *other = &merge->tables[j];
			if (other->action == ACTION_NONE || other->action == ACTION_DROP || strcmp(other->name, table->name) != 0)
				continue;
			struct merge_table *adopted = table->action == ACTION_ADOPT ? table : other;
			struct merge_table *kept = adopted == table ? other : table;
			int rc = conflict_report(merge, "table", table->name, NULL, 0, NULL, NULL, 0, NULL, 0, NULL, 0,
						 "two different tables have this name on the two branches");
			if (rc < 0)
				return rc;
			if (theirs_wins(merge) && adopted->action == ACTION_ADOPT && kept->ours)
				kept->action = ACTION_DROP;
			else
				adopted->action = ACTION_NONE;
		}
	}
	return 0;
}

/* ---- row level ------------------------------------------------------------------------------------------ */

static bool json_same(json_t *a, json_t *b)
{
	return (!a && !b) || (a && b && json_equal(a, b));
}

/*
 * Merges one row both sides updated, property by property. Appends the
 * merged row to table's apply list when it differs from ours. 0 or -errno.
 */
static int merge_properties(struct merge *merge, struct merge_table *table, const uint8_t *id, size_t id_size,
			    const uint8_t *base, size_t base_size, const uint8_t *ours, size_t ours_size,
			    const uint8_t *theirs, size_t theirs_size)
{
	json_error_t parse_error;
	json_t *b = json_loadb((const char *)base, base_size, 0, &parse_error);
	json_t *o = json_loadb((const char *)ours, ours_size, 0, &parse_error);
	json_t *t = json_loadb((const char *)theirs, theirs_size, 0, &parse_error);
	json_t *result = json_object(), *absent = json_object();   /* absent: properties the merge removes */
	int rc = 0;
	bool took_theirs = false;
	if (!b || !o || !t || !result || !absent || !json_is_object(b) || !json_is_object(o) || !json_is_object(t)) {
		rc = -EIO;
		goto out;
	}
	json_t *sides[3] = { b, o, t };
	for (int side = 0; side < 3 && rc == 0; side++) {
		const char *key;
		json_t *ignored;
		json_object_foreach(sides[side], key, ignored) {
			(void)ignored;
			if (json_object_get(result, key) || json_object_get(absent, key))
				continue;   /* decided already */
			json_t *bv = json_object_get(b, key), *ov = json_object_get(o, key), *tv = json_object_get(t, key);
			json_t *chosen;
			if (json_same(ov, bv)) {
				chosen = tv;
				took_theirs = took_theirs || !json_same(tv, ov);
			} else if (json_same(tv, bv) || json_same(ov, tv)) {
				chosen = ov;
			} else {
				rc = conflict_report(merge, "divergent_update", table->name, id, id_size, key, base, base_size,
						     ours, ours_size, theirs, theirs_size, NULL);
				if (rc < 0)
					break;
				chosen = theirs_wins(merge) ? tv : ov;
				took_theirs = took_theirs || theirs_wins(merge);
			}
			if (json_object_set(chosen ? result : absent, key, chosen ? chosen : json_true()) < 0) {
				rc = -ENOMEM;
				break;
			}
		}
	}
	if (rc < 0 || !took_theirs)
		goto out;
	char *text = json_dumps(result, JSON_COMPACT);
	if (!text) {
		rc = -ENOMEM;
		goto out;
	}
	rc = apply_add(table, id, id_size, (const uint8_t *)text, strlen(text));
	free(text);
out:
	json_decref(b);
	json_decref(o);
	json_decref(t);
	json_decref(result);
	json_decref(absent);
	return rc;
}

/* One id both sides changed. */
static int merge_row(struct merge *merge, struct merge_table *table, const struct change_list *ours_list,
		     const struct row_change *ours, const struct change_list *theirs_list, const struct row_change *theirs)
{
	const uint8_t *id = change_bytes(theirs_list, theirs->id);
	const uint8_t *base = theirs->has_before ? change_bytes(theirs_list, theirs->before) : NULL;
	const uint8_t *o = ours->has_after ? change_bytes(ours_list, ours->after) : NULL;
	const uint8_t *t = theirs->has_after ? change_bytes(theirs_list, theirs->after) : NULL;
	if (!o && !t)
		return 0;   /* deleted on both */
	if (o && t && ours->after_size == theirs->after_size && memcmp(o, t, ours->after_size) == 0)
		return 0;   /* the same change */
	if (!base || !o || !t) {
		const char *kind = !base ? "divergent_insert" : "delete_update";
		int rc = conflict_report(merge, kind, table->name, id, theirs->id_size, NULL, base, theirs->before_size, o,
					 ours->after_size, t, theirs->after_size, NULL);
		if (rc == 0 && theirs_wins(merge))
			rc = apply_add(table, id, theirs->id_size, t, theirs->after_size);
		return rc;
	}
	return merge_properties(merge, table, id, theirs->id_size, base, theirs->before_size, o, ours->after_size, t,
				theirs->after_size);
}

static int merge_rows(struct merge *merge, struct merge_table *table)
{
	struct change_list *ours, *theirs;
	int rc = side_changes(merge, table, false, &ours);
	if (rc == 0)
		rc = side_changes(merge, table, true, &theirs);
	size_t i = 0, j = 0;
	while (rc == 0 && j < theirs->count) {
		const struct row_change *t = &theirs->items[j];
		int order = i < ours->count ? id_compare(ours, &ours->items[i], change_bytes(theirs, t->id), t->id_size) : 1;
		if (order < 0) {
			i++;   /* only ours changed it: ours has it already */
			continue;
		}
		if (order == 0)
			rc = merge_row(merge, table, ours, &ours->items[i++], theirs, t);
		else
			rc = apply_add(table, change_bytes(theirs, t->id), t->id_size,
				       t->has_after ? change_bytes(theirs, t->after) : NULL, t->after_size);
		j++;
	}
	return rc;
}

/* ---- orphan edges ------------------------------------------------------------------------------------- */

struct orphan_search {
	struct merge *merge;
	struct merge_table *node_table;
	const uint8_t *node;
	size_t node_size;
	bool ours_deleted;        /* ours deleted the node (the edges are theirs'), else theirs did */
	struct merge_table *edge_table;
	int rc;
};

static struct merge_table *table_by_name(struct merge *merge, bool theirs, const char *name)
{
	for (size_t i = 0; i < merge->count; i++) {
		const struct head_row *head = theirs ? merge->tables[i].theirs : merge->tables[i].ours;
		if (head && strcmp(head->name, name) == 0)
			return &merge->tables[i];
	}
	return NULL;
}

static int orphan_edge(const uint8_t *edge, size_t edge_size, const uint8_t *other, size_t other_size, void *context)
{
	(void)other;
	(void)other_size;
	struct orphan_search *search = context;
	struct merge *merge = search->merge;
	struct merge_table *edges = search->edge_table;
	struct change_list *changes;
	/* the edge is an orphan only if the side that kept the node added or changed it */
	int rc = side_changes(merge, edges, search->ours_deleted, &changes);
	if (rc < 0)
		return rc;
	const struct row_change *change = change_find(changes, edge, edge_size);
	if (!change || !change->has_after)
		return 0;
	const uint8_t *row = change_bytes(changes, change->after);
	rc = conflict_report(merge, "orphan_edge", edges->name, edge, edge_size, NULL, NULL, 0,
			     search->ours_deleted ? NULL : row, search->ours_deleted ? 0 : change->after_size,
			     search->ours_deleted ? row : NULL, search->ours_deleted ? change->after_size : 0,
			     search->ours_deleted ? "ours deleted a node this edge of theirs names"
						  : "theirs deleted a node this edge of ours names");
	if (rc < 0 || !strategy_given(merge))
		return rc;
	struct merge_table *nodes = search->node_table;
	bool keep_node = search->ours_deleted == theirs_wins(merge);
	if (search->ours_deleted && !keep_node) {
		/* ours wins: theirs' edge is left out */
		if (edges->action == ACTION_ADOPT)
			keep_node = true;   /* a table taken whole cannot lose a row: the node stays instead */
		else if ((rc = take_as_rows(merge, edges)) == 0)
			apply_remove(edges, edge, edge_size);
	}
	if (!search->ours_deleted && !keep_node) {
		/* theirs wins: ours' edge goes with the node */
		if (edges->action == ACTION_KEEP)
			edges->action = ACTION_ROWS;
		rc = apply_add(edges, edge, edge_size, NULL, 0);
	}
	if (rc == 0 && keep_node) {
		if (search->ours_deleted) {
			/* the node comes back as theirs has it */
			struct buf node_row;
			buf_init(&node_row);
			rc = store_graph_node_row(merge->theirs, nodes->theirs->name, search->node, search->node_size,
						  &node_row);
			while (rc == 0 && node_row.size && node_row.data[node_row.size - 1] == '\n')
				node_row.size--;
			if (rc == 0) {
				if (nodes->action == ACTION_KEEP)
					nodes->action = ACTION_ROWS;
				apply_remove(nodes, search->node, search->node_size);
				rc = apply_add(nodes, search->node, search->node_size, node_row.data, node_row.size);
			}
			buf_free(&node_row);
		} else if ((rc = take_as_rows(merge, nodes)) == 0) {
			apply_remove(nodes, search->node, search->node_size);   /* theirs' delete is left out */
		}
	}
	return rc;
}

struct edge_table_visit {
	struct orphan_search *search;
	bool theirs;
	enum store_edge_end end;
};

static int orphan_table(const char *edge_table, const char *other_table, void *context)
{
	(void)other_table;
	struct edge_table_visit *visit = context;
	struct orphan_search *search = visit->search;
	struct merge_table *edges = table_by_name(search->merge, visit->theirs, edge_table);
	if (!edges || edges->action == ACTION_DROP || edges->action == ACTION_NONE)
		return 0;
	search->edge_table = edges;
	return store_graph_edges(visit->theirs ? search->merge->theirs : search->merge->ours, edge_table, visit->end,
				 search->node, search->node_size, orphan_edge, search);
}

/* The edges of the side that kept node whose rows that side added or changed. */
static int orphans_of_node(struct merge *merge, struct merge_table *nodes, const uint8_t *node, size_t node_size,
			   bool ours_deleted)
{
	struct orphan_search search = { .merge = merge, .node_table = nodes, .node = node, .node_size = node_size,
					.ours_deleted = ours_deleted };
	bool theirs = ours_deleted;   /* look at the edges of the other side */
	const struct head_row *head = theirs ? nodes->theirs : nodes->ours;
	if (!head)
		return 0;
	for (int end = STORE_EDGE_OUT; end <= STORE_EDGE_IN; end++) {
		struct edge_table_visit visit = { &search, theirs, (enum store_edge_end)end };
		int rc = store_graph_edge_tables(theirs ? merge->theirs : merge->ours, head->name, (enum store_edge_end)end,
						 orphan_table, &visit);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int check_orphans(struct merge *merge)
{
	for (size_t i = 0; i < merge->count; i++) {
		struct merge_table *nodes = &merge->tables[i];
		if (!nodes->base || !nodes->ours || !nodes->theirs || nodes->base->kind != SCHEMA_NODE)
			continue;
		for (int side = 0; side < 2; side++) {
			bool theirs = side == 1;
			const struct head_row *head = theirs ? nodes->theirs : nodes->ours;
			if (!changed(head, nodes->base))
				continue;
			struct change_list *deleter, *other;
			int rc = side_changes(merge, nodes, theirs, &deleter);
			if (rc == 0)
				rc = side_changes(merge, nodes, !theirs, &other);
			for (size_t c = 0; rc == 0 && c < deleter->count; c++) {
				const struct row_change *change = &deleter->items[c];
				const uint8_t *id = change_bytes(deleter, change->id);
				if (change->has_after || !change->has_before || change_find(other, id, change->id_size))
					continue;   /* not a delete, or the other side changed it too (a row conflict) */
				rc = orphans_of_node(merge, nodes, id, change->id_size, !theirs);
			}
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

/* ---- publishing --------------------------------------------------------------------------------------- */

static int stage_rows(struct merge *merge, struct store_txn *txn, struct merge_table *table)
{
	struct store_writer *writer = NULL;
	int rc = 0;
	if (table->schema_from_theirs) {
		struct buf schema;
		buf_init(&schema);
		rc = store_snapshot_schema(merge->theirs, table->theirs->name, &schema);
		if (rc == 0)
			rc = store_txn_schema(txn, table->name, (const char *)schema.data, schema.size, merge->error);
		buf_free(&schema);
		if (rc < 0)
			return rc;
	}
	char path[JOURNAL_NAME_MAX + 32];
	snprintf(path, sizeof path, "merge of %s", table->name);
	if ((rc = store_txn_writer(txn, table->name, STORE_MERGE, 0, path, &writer, merge->error)) < 0)
		return rc;
	for (size_t i = 0; rc == 0 && i < table->apply_count; i++) {
		const struct apply_entry *entry = &table->apply[i];
		if (entry->removed)
			continue;
		rc = store_writer_write(writer, table->apply_arena.data + entry->line, entry->line_size, merge->error);
		if (rc == 0)
			rc = store_writer_write(writer, "\n", 1, merge->error);
	}
	if (rc == 0)
		rc = store_writer_finish(writer, merge->error);
	return rc;
}

static int build_txn(struct merge *merge, struct store_txn *txn)
{
	int rc = 0;
	/* 1. drops, edge tables first */
	for (int edges = 1; edges >= 0 && rc == 0; edges--)
		for (size_t i = 0; i < merge->count && rc == 0; i++) {
			struct merge_table *table = &merge->tables[i];
			if (table->action == ACTION_DROP && (table->ours->kind == SCHEMA_EDGE) == (edges == 1))
				rc = store_txn_drop(txn, table->ours->name, merge->error);
		}
	/* 2. renames, through temporary names so that swaps work */
	size_t renamed = 0;
	for (size_t i = 0; i < merge->count && rc == 0; i++) {
		struct merge_table *table = &merge->tables[i];
		if (table->ours && table->action != ACTION_DROP && table->action != ACTION_NONE &&
		    strcmp(table->ours->name, table->name) != 0) {
			char temporary[JOURNAL_NAME_MAX + 1];
			snprintf(temporary, sizeof temporary, "_graphfs_merge_%zu", renamed++);
			rc = store_txn_rename(txn, table->ours->name, temporary, merge->error);
		}
	}
	renamed = 0;
	for (size_t i = 0; i < merge->count && rc == 0; i++) {
		struct merge_table *table = &merge->tables[i];
		if (table->ours && table->action != ACTION_DROP && table->action != ACTION_NONE &&
		    strcmp(table->ours->name, table->name) != 0) {
			char temporary[JOURNAL_NAME_MAX + 1];
			snprintf(temporary, sizeof temporary, "_graphfs_merge_%zu", renamed++);
			rc = store_txn_rename(txn, temporary, table->name, merge->error);
		}
	}
	/* 3. row merges (with theirs' schema first), node tables first */
	for (int edges = 0; edges <= 1 && rc == 0; edges++)
		for (size_t i = 0; i < merge->count && rc == 0; i++) {
			struct merge_table *table = &merge->tables[i];
			if (table->action == ACTION_ROWS && (table->ours->kind == SCHEMA_EDGE) == (edges == 1))
				rc = stage_rows(merge, txn, table);
		}
	/* 4. whole tables */
	for (size_t i = 0; i < merge->count && rc == 0; i++) {
		struct merge_table *table = &merge->tables[i];
		if (table->action == ACTION_TAKE || table->action == ACTION_ADOPT)
			rc = store_txn_restore(txn, table->name, table->theirs->table, table->action == ACTION_ADOPT,
					       merge->error);
	}
	return rc;
}

static int publish(struct merge *merge, const char *source, const char *dest, struct store_merge_result *out)
{
	struct store_txn *txn = NULL;
	int rc = store_txn_begin(merge->store, dest, &txn, merge->error);
	if (rc < 0)
		return rc;
	const struct manifest_snapshot *ours = &merge->ours->view;
	struct store_condition condition = { 0 };
	if (merge->options->condition)
		condition = *merge->options->condition;
	char expected[ULID_TEXT_SIZE];
	ulid_format(&ours->branch.head_commit, expected);
	if (condition.has_commit && ulid_compare(&condition.commit, &ours->branch.head_commit) != 0) {
		char wanted[ULID_TEXT_SIZE];
		ulid_format(&condition.commit, wanted);
		rc = error_info_set(merge->error, -EBUSY, "branch %s is at commit %s, not %s (--if-commit): nothing was published",
				    dest, ulid_is_zero(&ours->branch.head_commit) ? "none" : expected, wanted);
		goto out;
	}
	/* the merge was computed against this head: it must still be the head */
	condition.has_commit = !ulid_is_zero(&ours->branch.head_commit);
	condition.commit = ours->branch.head_commit;
	store_txn_set_condition(txn, &condition);
	store_txn_trust_endpoints(txn);
	if (merge->options->actor && (rc = store_txn_set_actor(txn, merge->options->actor)) < 0)
		goto out;
	store_txn_set_merge_parent(txn, &merge->theirs->view.branch.head_commit, merge->theirs->view.branch.head_record);
	if ((rc = io_failpoint("merge.after_plan")) < 0 || (rc = build_txn(merge, txn)) < 0 ||
	    (rc = io_failpoint("merge.after_stage")) < 0)
		goto out;
	char message[2 * JOURNAL_NAME_MAX + 32];
	snprintf(message, sizeof message, "merge %s into %s", source, dest);
	const char *given = merge->options->message;
	rc = store_txn_commit(txn, given && *given ? given : message, &out->commit, merge->error);
out:
	store_txn_free(txn);
	return rc;
}

/* ---- the merge ----------------------------------------------------------------------------------------- */

void store_merge_state_free(struct merge *merge)
{
	for (size_t i = 0; i < merge->count; i++) {
		struct merge_table *table = &merge->tables[i];
		free(table->ours_changes.items);
		buf_free(&table->ours_changes.arena);
		free(table->theirs_changes.items);
		buf_free(&table->theirs_changes.arena);
		free(table->apply);
		buf_free(&table->apply_arena);
	}
	free(merge->tables);
	free(merge->base_heads.heads);
	free(merge->ours_heads.heads);
	free(merge->theirs_heads.heads);
	buf_free(&merge->line);
	if (merge->base)
		store_snapshot_release(merge->base);
	if (merge->ours)
		store_snapshot_release(merge->ours);
	if (merge->theirs)
		store_snapshot_release(merge->theirs);
}

const char *store_merge_outcome_name(enum store_merge_outcome outcome)
{
	switch (outcome) {
	case STORE_MERGE_UP_TO_DATE:
		return "up-to-date";
	case STORE_MERGE_FAST_FORWARD:
		return "fast-forward";
	case STORE_MERGE_MERGED:
		return "merge";
	case STORE_MERGE_CONFLICTS:
		return "conflicts";
	}
	return "unknown";
}

/* Finds the base and the outcome; opens merge->base (NULL: the empty state). */
static int find_base(struct merge *merge, const char *source, const char *dest, struct store_merge_result *out)
{
	struct manifest *manifest = merge->store->manifest;
	const struct branch_record *ours = &merge->ours->view.branch, *theirs = &merge->theirs->view.branch;
	if (ulid_is_zero(&theirs->head_commit)) {
		out->outcome = STORE_MERGE_UP_TO_DATE;
		return 0;
	}
	/* a branch with no commit of its own since it forked from the other: its head is the base */
	if (strcmp(theirs->forked_from, dest) == 0 && theirs->head_version <= theirs->fork_point) {
		out->outcome = STORE_MERGE_UP_TO_DATE;
		return 0;
	}
	struct ulid base;
	struct block_address record;
	uint64_t version = 0;
	int rc;
	if (strcmp(ours->forked_from, source) == 0 && ours->head_version <= ours->fork_point &&
	    !ulid_is_zero(&ours->head_commit)) {
		base = ours->head_commit;
		record = ours->head_record;
		version = ours->head_version;
		rc = 0;
	} else {
		rc = ulid_is_zero(&ours->head_commit)
			 ? -ENOENT
			     : manifest_merge_base(manifest, &ours->head_commit, ours->head_record, &theirs->head_commit,
						   theirs->head_record, &base, &version, &record);
	}
	if (rc == -ENOENT) {
		uint64_t horizon = store_horizon(merge->store);
		if (horizon && !ulid_is_zero(&ours->head_commit))
			return error_info_set(merge->error, -ENOENT,
					      "branches %s and %s have no common ancestor above the gc horizon (%llu): "
					      "their common history was reclaimed",
					      source, dest, (unsigned long long)horizon);
		out->outcome = ulid_is_zero(&ours->head_commit) ? STORE_MERGE_FAST_FORWARD : STORE_MERGE_MERGED;
		return 0;   /* no common history: merged against the empty state */
	}
	if (rc < 0)
		return error_info_set(merge->error, rc, "cannot find the merge base of %s and %s: %s", source, dest,
				      io_strerror(rc));
	out->base_version = version;
	ulid_format(&base, out->base_commit);
	if (ulid_compare(&base, &theirs->head_commit) == 0) {
		out->outcome = STORE_MERGE_UP_TO_DATE;
		return 0;
	}
	out->outcome = ulid_compare(&base, &ours->head_commit) == 0 ? STORE_MERGE_FAST_FORWARD : STORE_MERGE_MERGED;
	if (out->outcome == STORE_MERGE_FAST_FORWARD) {
		/* the base is ours' own state, which is kept whatever the horizon */
		store_snapshot_retain(merge->ours);
		merge->base = merge->ours;
		return 0;
	}
	uint64_t horizon = store_horizon(merge->store);
	struct manifest_snapshot view;
	rc = horizon && version <= horizon ? -ENOENT : manifest_snapshot_of_commit(manifest, &base, record, &view);
	if (rc == -ENOENT)
		return error_info_set(merge->error, rc, "the merge base of %s and %s (version %llu) was reclaimed by gc "
				      "(horizon %llu)", source, dest, (unsigned long long)version,
				      (unsigned long long)horizon);
	if (rc == 0)
		rc = store_snapshot_wrap(merge->store, &view, NULL, &merge->base, merge->error);
	if (rc < 0 && merge->error && !merge->error->message[0])
		error_info_set(merge->error, rc, "cannot read the merge base (version %llu): %s", (unsigned long long)version,
			       io_strerror(rc));
	return rc;
}

/*
 * Computes the merge of source into dest into merge (initialised by the
 * caller with store, options, conflict callback and error): snapshots, base,
 * outcome, every table's action and apply list, orphan checks. State
 * MERGE_CHECKED on success (UP_TO_DATE stops early). 0 or -errno.
 */
int store_merge_compute(struct merge *merge, const char *source, const char *dest, struct store_merge_result *out)
{
	struct store *store = merge->store;
	struct error_info *error = merge->error;
	int rc;
	if ((rc = store_snapshot_open(store, dest, STORE_LATEST, &merge->ours, error)) < 0 ||
	    (rc = store_snapshot_open(store, source, STORE_LATEST, &merge->theirs, error)) < 0 ||
	    (rc = find_base(merge, source, dest, out)) < 0)
		return rc;
	merge->state = MERGE_PLANNED;
	if ((rc = store_heads_collect(merge->ours, &merge->ours_heads)) < 0)
		return error_info_set(error, rc, "cannot read the heads: %s", io_strerror(rc));
	if (out->outcome == STORE_MERGE_UP_TO_DATE) {
		merge->state = MERGE_CHECKED;
		return 0;
	}
	if ((merge->base && (rc = store_heads_collect(merge->base, &merge->base_heads)) < 0) ||
	    (rc = store_heads_collect(merge->theirs, &merge->theirs_heads)) < 0)
		return error_info_set(error, rc, "cannot read the heads: %s", io_strerror(rc));
	const struct store_head_list *lists[3] = { &merge->base_heads, &merge->ours_heads, &merge->theirs_heads };
	for (int l = 0; l < 3 && rc == 0; l++)
		for (size_t i = 0; i < lists[l]->count && rc == 0; i++)
			rc = table_add(merge, &lists[l]->heads[i].stable_id);
	for (size_t i = 0; i < merge->count && rc == 0; i++)
		rc = plan_table(merge, &merge->tables[i]);
	if (rc == 0)
		rc = check_names(merge);
	for (size_t i = 0; i < merge->count && rc == 0; i++)
		if (merge->tables[i].action == ACTION_ROWS)
			rc = merge_rows(merge, &merge->tables[i]);
	merge_check(merge, MERGE_PLANNED);
	merge->state = MERGE_ROWS_MERGED;
	if (rc == 0)
		rc = check_orphans(merge);
	merge->state = MERGE_CHECKED;
	if (rc < 0 && error && !error->message[0])
		error_info_set(error, rc, "cannot merge %s into %s: %s", source, dest, io_strerror(rc));
	out->conflicts = merge->conflicts;
	out->resolved = merge->resolved;
	if (rc == 0 && merge->conflicts)
		out->outcome = STORE_MERGE_CONFLICTS;
	return rc;
}

int store_merge_arguments(const char *source, const char **dest, struct error_info *error)
{
	*dest = store_branch_or_main(*dest);
	if (!source || !*source)
		return error_info_set(error, -EINVAL, "which branch to merge? give its name");
	if (strcmp(source, *dest) == 0)
		return error_info_set(error, -EINVAL, "cannot merge branch %s into itself", source);
	return 0;
}

int store_merge(struct store *store, const char *source, const char *dest, const struct store_merge_options *options,
		store_merge_conflict_fn conflict, void *context, struct store_merge_result *out,
		struct error_info *error)
{
	static const struct store_merge_options defaults = { 0 };
	error_info_clear(error);
	memset(out, 0, sizeof *out);
	if (!options)
		options = &defaults;
	int rc = store_merge_arguments(source, &dest, error);
	if (rc < 0)
		return rc;
	if (store->read_only && !options->dry_run)
		return error_info_set(error, -EROFS, "the store is open read-only");
	rc = -EBUSY;
	/* a commit landing on dest meanwhile makes the publish refuse: merge again, a few times */
	for (int attempt = 0; attempt < 4 && rc == -EBUSY; attempt++) {
		struct merge merge = { .store = store, .options = options, .conflict = conflict, .conflict_context = context,
				       .error = error };
		buf_init(&merge.line);
		error_info_clear(error);
		memset(out, 0, sizeof *out);
		rc = store_merge_compute(&merge, source, dest, out);
		if (rc < 0 || out->outcome == STORE_MERGE_UP_TO_DATE) {
			store_merge_state_free(&merge);
			return rc;
		}
		if (merge.conflicts) {
			merge.state = MERGE_REFUSED;
		} else if (options->dry_run) {
			merge.state = MERGE_PREVIEWED;
		} else {
			merge_check(&merge, MERGE_CHECKED);
			rc = publish(&merge, source, dest, out);
			if (rc == 0)
				merge.state = MERGE_PUBLISHED;
			if (rc == -ENODATA && out->outcome == STORE_MERGE_MERGED) {
				/* the two sides' changes cancel out: nothing differs from ours */
				rc = 0;
				out->outcome = STORE_MERGE_UP_TO_DATE;
			}
			if (rc == -EBUSY && options->condition && (options->condition->has_commit || options->condition->has_version)) {
				store_merge_state_free(&merge);
				return rc;   /* the caller's own condition failed: no retry */
			}
		}
		store_merge_state_free(&merge);
	}
	return rc;
}

