/*
 * manifest_commit — one commit: the request checked, every operation's
 * compare-and-swap against the current heads, the table versions applied,
 * referential integrity (docs/ARCHITECTURE.md invariant 13), the heads and
 * names trees, the commit record and the version index, then the shared
 * publish's end (manifest_publish.c: the root written and made durable, the
 * commit point). A lost race on an object store retries the whole commit.
 * The states of the publish and its invariants are manifest_publish.c's.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include "manifest_int.h"

/* ---- compare-and-swap ---------------------------------------------------------------- */

int manifest_condition_check(const struct manifest_condition *condition, const struct root_record *root,
			     const struct branch_record *branch, struct error_info *error)
{
	if (condition->has_version && condition->version != root->version)
		return error_info_set(error, -EBUSY,
				      "the store is at version %llu, not %llu (--if-version): nothing was published",
				      (unsigned long long)root->version, (unsigned long long)condition->version);
	if (!ulid_is_zero(&condition->commit) && ulid_compare(&condition->commit, &branch->head_commit) != 0) {
		char expected[ULID_TEXT_SIZE], actual[ULID_TEXT_SIZE] = "none";
		ulid_format(&condition->commit, expected);
		if (!ulid_is_zero(&branch->head_commit))
			ulid_format(&branch->head_commit, actual);
		return error_info_set(error, -EBUSY,
				      "branch %s is at commit %s, not %s (--if-commit): nothing was published",
				      branch->name, actual, expected);
	}
	return 0;
}

/* ---- one commit ------------------------------------------------------------------ */

/* A table this commit already changed: its newest version lives only in the append buffer. */
struct touched_table {
	struct ulid stable_id;
	struct table_info info;
	struct schema schema;
	bool written;          /* rows applied (a second data write would need the unwritten blocks) */
	bool has_base;         /* written over base, by stage (the ids it removed are checked) */
	struct table_info base;
	const struct table_stage *stage;
	bool check_endpoints;  /* a new or changed edge schema */
};

struct commit_state {
	struct manifest *manifest;
	struct manifest_publish *publish;
	const char *owner;             /* "" for main */
	struct btree *heads;
	struct btree *names;
	struct ulid commit;
	uint64_t time_us;
	struct touched_table *touched;
	size_t touched_count;
	struct buf scratch;
	struct error_info *error;
};

static struct touched_table *touched_find(struct commit_state *state, const struct ulid *stable_id)
{
	for (size_t i = 0; i < state->touched_count; i++)
		if (ulid_compare(&state->touched[i].stable_id, stable_id) == 0)
			return &state->touched[i];
	return NULL;
}

static int touched_record(struct commit_state *state, const struct table_info *info,
			  const struct schema *schema, struct touched_table **out)
{
	struct touched_table *entry = touched_find(state, &info->stable_id);
	if (!entry) {
		struct touched_table *grown =
			realloc(state->touched, (state->touched_count + 1) * sizeof *grown);
		if (!grown)
			return -ENOMEM;
		state->touched = grown;
		entry = &state->touched[state->touched_count++];
		memset(entry, 0, sizeof *entry);
		entry->stable_id = info->stable_id;
		schema_init(&entry->schema);
	}
	entry->info = *info;
	if (schema != &entry->schema) {
		struct schema copy;
		schema_init(&copy);
		int rc = schema_copy(&copy, schema);
		if (rc < 0)
			return rc;
		schema_free(&entry->schema);
		entry->schema = copy;
	}
	*out = entry;
	return 0;
}

/* The live head of name as of the operations so far: 0, -ENOENT, -EIO. */
static int live_head(struct commit_state *state, const char *name, struct head_row *out)
{
	buf_reset(&state->scratch);
	int rc = btree_get(state->names, name, strlen(name), &state->scratch);
	if (rc < 0)
		return rc;
	if (state->scratch.size != 16)
		return -EIO;
	uint8_t id[16];
	memcpy(id, state->scratch.data, 16);
	buf_reset(&state->scratch);
	rc = btree_get(state->heads, id, 16, &state->scratch);
	if (rc == 0)
		rc = journal_head_row_decode(state->scratch.data, state->scratch.size, out);
	if (rc == -ENOENT || (rc == 0 && (out->state != HEAD_LIVE || strcmp(out->name, name) != 0))) {
		io_log(LOG_ERR, "%s/manifest: table %s: the names entry and the heads disagree",
			state->manifest->path, name);
		rc = -EIO;
	}
	return rc;
}

/* The table version and schema behind a live head (from memory if this commit changed it). */
static int head_table(struct commit_state *state, const struct head_row *head,
		      struct touched_table **out)
{
	struct touched_table *entry = touched_find(state, &head->stable_id);
	if (entry) {
		*out = entry;
		return 0;
	}
	struct table_info info;
	struct schema schema;
	schema_init(&schema);
	int rc = table_info_read(state->manifest->pager, head->table, &info);
	if (rc == 0)
		rc = table_schema_read(state->manifest->pager, info.schema, &schema);
	if (rc == 0 && (ulid_compare(&info.stable_id, &head->stable_id) != 0 ||
			info.table_version != head->table_version))
		rc = -EIO;
	if (rc == 0)
		rc = touched_record(state, &info, &schema, out);
	schema_free(&schema);
	return rc;
}

static int head_store(struct commit_state *state, const struct head_row *head)
{
	buf_reset(&state->scratch);
	int rc = journal_head_row_encode(head, &state->scratch);
	if (rc == 0)
		rc = btree_put(state->heads, head->stable_id.bytes, 16, state->scratch.data,
			       state->scratch.size);
	return rc;
}

/* The first live edge table (by name) whose schema names node table name; "" if none. */
static int edge_referencing(struct commit_state *state, const char *name, char *edge_out);

/* Compare-and-swap checks of one operation against the current head. */
static int check_based_on(struct commit_state *state, const struct manifest_op *op,
			  const struct head_row *head)
{
	if (op->based_on_version) {
		if (!head)
			return error_info_set(state->error, -EBUSY,
					      "table %s was dropped since it was opened (at version %llu)",
					      op->name, (unsigned long long)op->based_on_version);
		if (!ulid_is_zero(&op->based_on_incarnation) &&
		    ulid_compare(&op->based_on_incarnation, &head->incarnation) != 0)
			return error_info_set(state->error, -EBUSY,
					      "table %s was dropped and re-created since it was opened",
					      op->name);
		if (head->table_version != op->based_on_version)
			return error_info_set(state->error, -EBUSY,
					      "table %s moved from version %llu to %llu since it was opened",
					      op->name, (unsigned long long)op->based_on_version,
					      (unsigned long long)head->table_version);
	}
	if (op->expected_schema_hash[0] && head &&
	    strncmp(op->expected_schema_hash, head->schema_hash, 16) != 0)
		return error_info_set(state->error, -EBUSY,
				      "the schema of table %s changed since its rows were validated", op->name);
	return 0;
}

static void head_fill_new(struct commit_state *state, const char *name, const struct table_info *info,
			  const struct block_address address, const struct schema *schema,
			  struct head_row *head)
{
	memset(head, 0, sizeof *head);
	head->state = HEAD_LIVE;
	head->stable_id = info->stable_id;
	head->incarnation = info->incarnation;
	snprintf(head->name, sizeof head->name, "%s", name);
	head->table_version = info->table_version;
	snprintf(head->owner, sizeof head->owner, "%s", state->owner);
	head->row_count = info->row_count;
	head->byte_size = info->byte_size;
	schema_hash(schema, head->schema_hash);
	head->kind = (uint8_t)schema->kind;
	head->commit = state->commit;
	head->commit_time_us = state->time_us;
	head->table = address;
}

static int schema_block_append(struct commit_state *state, const struct schema *schema,
			       struct block_address *out)
{
	buf_reset(&state->scratch);
	int rc = schema_render(schema, &state->scratch);
	if (rc == 0)
		rc = pager_append_block(state->publish->append, BLOCK_SCHEMA, CODEC_ZSTD, state->scratch.data,
					state->scratch.size, out);
	return rc;
}

/* A new table (new stable id and incarnation): with the stage's rows, or empty. */
static int table_create(struct commit_state *state, const char *name, const struct schema *schema,
			struct table_stage *stage, struct change *change)
{
	int rc = manifest_name_check("table", name, state->error);
	if (rc < 0)
		return rc;
	struct table_info info;
	memset(&info, 0, sizeof info);
	ulid_new(&info.stable_id);
	ulid_new(&info.incarnation);
	struct block_address schema_block, address;
	if ((rc = schema_block_append(state, schema, &schema_block)) < 0)
		return rc;
	if (stage) {
		rc = table_apply(state->manifest->pager, state->publish->append, NULL, stage, schema_block,
				 &info, &address);
	} else {
		info.table_version = 1;
		info.schema = schema_block;
		rc = table_info_append(state->publish->append, &info, &address);
	}
	if (rc < 0)
		return error_info_set(state->error, rc, "cannot write table %s: %s", name, io_strerror(rc));
	struct touched_table *entry;
	if ((rc = touched_record(state, &info, schema, &entry)) < 0)
		return rc;
	entry->written = stage != NULL;
	entry->check_endpoints = schema->kind == SCHEMA_EDGE;
	head_fill_new(state, name, &info, address, schema, &change->head_after);
	change->op = CHANGE_CREATE;
	change->rows = stage ? table_stage_rows(stage) : 0;
	if ((rc = head_store(state, &change->head_after)) < 0 ||
	    (rc = btree_put(state->names, name, strlen(name), info.stable_id.bytes, 16)) < 0)
		return rc;
	return 0;
}

/* The change and head row of a write: the table version info at address,
 * with schema as its new schema (NULL: unchanged). Stores the head. */
static int written_head(struct commit_state *state, const struct manifest_op *op, const struct head_row *head,
			const struct table_info *info, struct block_address address, const struct schema *schema,
			struct change *change)
{
	change->op = table_stage_mode(op->stage) == TABLE_MERGE || op->based ? CHANGE_MERGE
		     : op->optimize					    ? CHANGE_OPTIMIZE
									    : CHANGE_OVERWRITE;
	change->rows = table_stage_rows(op->stage);
	change->head_after = *head;
	struct head_row *after = &change->head_after;
	after->table_version = info->table_version;
	after->row_count = info->row_count;
	after->byte_size = info->byte_size;
	after->table = address;
	if (schema)
		schema_hash(schema, after->schema_hash);
	snprintf(after->owner, sizeof after->owner, "%s", state->owner);
	after->commit = state->commit;
	after->commit_time_us = state->time_us;
	return head_store(state, after);
}

/* Rows staged for an edge table carry what its adjacency indexes need; for a node table, nothing. */
static int check_stage_kind(struct commit_state *state, const struct manifest_op *op, enum schema_kind kind)
{
	if (table_stage_tracks_edges(op->stage) == (kind == SCHEMA_EDGE))
		return 0;
	return error_info_set(state->error, -EBUSY,
			      "table %s became %s table since these rows were validated; write them again", op->name,
			      kind == SCHEMA_EDGE ? "an edge" : "a node");
}

/* The first rows of a table created empty without a schema (`touch`): the
 * schema inferred from them becomes the table's, in the same table version. */
static int op_write_refining(struct commit_state *state, const struct manifest_op *op,
			     const struct head_row *head, struct change *change)
{
	struct touched_table *table;
	int rc = head_table(state, head, &table);
	if (rc < 0)
		return rc;
	if (table->written)
		return error_info_set(state->error, -EINVAL, "table %s is written twice in one commit", op->name);
	if (head->row_count != 0 || !schema_is_undeclared(&table->schema))
		return error_info_set(state->error, -EBUSY,
				      "table %s got rows or a schema since these rows were validated; write them again",
				      op->name);
	if ((rc = check_stage_kind(state, op, op->schema->kind)) < 0)
		return rc;
	struct table_info base = table->info, info;
	struct block_address schema_block, address;
	if ((rc = schema_block_append(state, op->schema, &schema_block)) < 0)
		return error_info_set(state->error, rc, "cannot write table %s: %s", op->name, io_strerror(rc));
	rc = table_apply(state->manifest->pager, state->publish->append, &base, op->stage, schema_block,
			 &info, &address);
	if (rc < 0)
		return error_info_set(state->error, rc, "cannot write table %s: %s", op->name, io_strerror(rc));
	if ((rc = touched_record(state, &info, op->schema, &table)) < 0)
		return rc;
	table->written = true;
	table->check_endpoints = op->schema->kind == SCHEMA_EDGE;
	return written_head(state, op, head, &info, address, op->schema, change);
}

static int op_write(struct commit_state *state, const struct manifest_op *op, struct change *change)
{
	if (!op->stage)
		return error_info_set(state->error, -EINVAL, "write to table %s has no rows staged", op->name);
	struct head_row head;
	int rc = live_head(state, op->name, &head);
	if (rc == -ENOENT) {
		if ((rc = check_based_on(state, op, NULL)) < 0)
			return rc;
		if (!op->schema)
			return error_info_set(state->error, -ENOENT, "table %s does not exist", op->name);
		if ((rc = check_stage_kind(state, op, op->schema->kind)) < 0)
			return rc;
		return table_create(state, op->name, op->schema, op->stage, change);
	}
	if (rc < 0)
		return rc;
	if ((rc = check_based_on(state, op, &head)) < 0)
		return rc;
	if (op->refines_schema)
		return op_write_refining(state, op, &head, change);
	if (!op->expected_schema_hash[0] && op->schema) {
		/* rows validated for a new table, but the name became live meanwhile */
		char hash[17];
		schema_hash(op->schema, hash);
		if (strcmp(hash, head.schema_hash) != 0)
			return error_info_set(state->error, -EBUSY,
					      "table %s was created by another commit since its rows were validated",
					      op->name);
	}
	struct touched_table *table;
	if ((rc = head_table(state, &head, &table)) < 0)
		return rc;
	if (table->written)
		return error_info_set(state->error, -EINVAL, "table %s is written twice in one commit", op->name);
	if ((rc = check_stage_kind(state, op, table->schema.kind)) < 0)
		return rc;
	struct table_info base = table->info, info;
	struct block_address address;
	rc = table_apply(state->manifest->pager, state->publish->append, &base, op->stage, base.schema,
			 &info, &address);
	if (rc < 0)
		return error_info_set(state->error, rc, "cannot write table %s: %s", op->name, io_strerror(rc));
	table->info = info;
	table->written = true;
	table->has_base = true;
	table->base = base;
	table->stage = op->stage;
	return written_head(state, op, &head, &info, address, NULL, change);
}

static int op_schema(struct commit_state *state, const struct manifest_op *op, struct change *change)
{
	if (!op->schema)
		return error_info_set(state->error, -EINVAL, "schema change of %s has no schema", op->name);
	struct head_row head;
	int rc = live_head(state, op->name, &head);
	if (rc == -ENOENT) {
		if ((rc = check_based_on(state, op, NULL)) < 0)
			return rc;
		return table_create(state, op->name, op->schema, NULL, change);
	}
	if (rc < 0)
		return rc;
	if ((rc = check_based_on(state, op, &head)) < 0)
		return rc;
	struct touched_table *table;
	if ((rc = head_table(state, &head, &table)) < 0)
		return rc;
	/* A table created empty without a schema takes any node schema while it has no rows. */
	bool undeclared = head.row_count == 0 && schema_is_undeclared(&table->schema) &&
			  op->schema->kind == SCHEMA_NODE;
	if (!undeclared && (rc = schema_check_compatible(&table->schema, op->schema, state->error)) < 0)
		return rc;
	struct table_info info = table->info;
	struct block_address address;
	info.table_version++;
	if ((rc = schema_block_append(state, op->schema, &info.schema)) < 0 ||
	    (rc = table_info_append(state->publish->append, &info, &address)) < 0)
		return error_info_set(state->error, rc, "cannot write table %s: %s", op->name, io_strerror(rc));
	if ((rc = touched_record(state, &info, op->schema, &table)) < 0)
		return rc;
	table->check_endpoints = op->schema->kind == SCHEMA_EDGE;
	change->op = CHANGE_SCHEMA;
	change->rows = 0;
	change->head_after = head;
	struct head_row *after = &change->head_after;
	after->table_version = info.table_version;
	after->table = address;
	schema_hash(op->schema, after->schema_hash);
	snprintf(after->owner, sizeof after->owner, "%s", state->owner);
	after->commit = state->commit;
	after->commit_time_us = state->time_us;
	return head_store(state, after);
}

static int op_drop(struct commit_state *state, const struct manifest_op *op, struct change *change)
{
	struct head_row head;
	int rc = live_head(state, op->name, &head);
	if (rc == -ENOENT)
		return error_info_set(state->error, -ENOENT, "table %s does not exist", op->name);
	if (rc < 0 || (rc = check_based_on(state, op, &head)) < 0)
		return rc;
	if (head.kind == SCHEMA_NODE) {
		char edge[JOURNAL_NAME_MAX + 1];
		if ((rc = edge_referencing(state, op->name, edge)) < 0)
			return rc;
		if (edge[0])
			return error_info_set(state->error, -EBUSY,
					      "table %s is referenced by edge table %s: drop %s first", op->name,
					      edge, edge);
	}
	change->op = CHANGE_DROP;
	change->rows = 0;
	change->head_after = head;
	struct head_row *after = &change->head_after;
	after->state = HEAD_TOMBSTONED;
	after->row_count = 0;
	after->byte_size = 0;
	after->commit = state->commit;
	after->commit_time_us = state->time_us;
	if ((rc = head_store(state, after)) < 0 ||
	    (rc = btree_delete(state->names, op->name, strlen(op->name))) < 0)
		return rc;
	return 0;
}

/*
 * MANIFEST_RESTORE (revert): table name becomes what the table version record
 * at op->source holds — rows, indexes and schema — by a new version record that
 * shares its trees (O(1)). The live table of the same incarnation gets it as its
 * next version; if that incarnation is gone (dropped since: a tombstoned head
 * never becomes live again), a new stable id and incarnation carry it. The
 * restored state was itself committed, so its references hold once every table
 * of it is restored (the caller restores them all in one commit).
 */
static int op_restore(struct commit_state *state, const struct manifest_op *op, struct change *change)
{
	struct table_info info;
	struct schema schema;
	schema_init(&schema);
	struct head_row head;
	struct block_address address;
	struct touched_table *entry;
	int rc = table_info_read(state->manifest->pager, op->source, &info);
	if (rc == 0)
		rc = table_schema_read(state->manifest->pager, info.schema, &schema);
	if (rc < 0) {
		error_info_set(state->error, rc, "cannot read the past version of table %s: %s", op->name, io_strerror(rc));
		goto out;
	}
	int found = live_head(state, op->name, &head);
	if (found < 0 && found != -ENOENT) {
		rc = found;
		goto out;
	}
	bool same = found == 0 && ulid_compare(&head.stable_id, &info.stable_id) == 0 &&
		    ulid_compare(&head.incarnation, &info.incarnation) == 0;
	if (found == 0 && !same) {
		rc = error_info_set(state->error, -EEXIST, "table %s is another table now: drop it first", op->name);
		goto out;
	}
	bool adopt = false;
	if (!same && op->adopt_identity) {
		/* a table of another branch comes over with its identity, unless this one knew it */
		int known = btree_get(state->heads, info.stable_id.bytes, 16, &state->scratch);
		buf_reset(&state->scratch);
		if (known < 0 && known != -ENOENT) {
			rc = known;
			goto out;
		}
		adopt = known == -ENOENT;
	}
	if (same) {
		if ((rc = head_table(state, &head, &entry)) < 0)
			goto out;
		info.table_version = entry->info.table_version + 1;
		change->op = CHANGE_OVERWRITE;
	} else if (adopt) {
		change->op = CHANGE_CREATE;
	} else {
		ulid_new(&info.stable_id);
		ulid_new(&info.incarnation);
		info.table_version = 1;
		change->op = CHANGE_CREATE;
	}
	if ((rc = table_info_append(state->publish->append, &info, &address)) < 0 ||
	    (rc = touched_record(state, &info, &schema, &entry)) < 0)
		goto out;
	entry->written = true;
	head_fill_new(state, op->name, &info, address, &schema, &change->head_after);
	change->rows = info.row_count;
	if ((rc = head_store(state, &change->head_after)) < 0)
		goto out;
	if (!same)
		rc = btree_put(state->names, op->name, strlen(op->name), info.stable_id.bytes, 16);
out:
	schema_free(&schema);
	return rc;
}

static int op_rename(struct commit_state *state, const struct manifest_op *op, struct change *change)
{
	struct head_row head, other;
	int rc = live_head(state, op->name, &head);
	if (rc == -ENOENT)
		return error_info_set(state->error, -ENOENT, "table %s does not exist", op->name);
	if (rc < 0 || (rc = check_based_on(state, op, &head)) < 0 ||
	    (rc = manifest_name_check("table", op->new_name, state->error)) < 0)
		return rc;
	rc = live_head(state, op->new_name, &other);
	if (rc == 0)
		return error_info_set(state->error, -EEXIST, "table %s already exists", op->new_name);
	if (rc != -ENOENT)
		return rc;
	change->op = CHANGE_RENAME;
	change->rows = 0;
	snprintf(change->previous_name, sizeof change->previous_name, "%s", op->name);
	change->head_after = head;
	struct head_row *after = &change->head_after;
	snprintf(after->name, sizeof after->name, "%s", op->new_name);
	after->commit = state->commit;
	after->commit_time_us = state->time_us;
	if ((rc = head_store(state, after)) < 0 ||
	    (rc = btree_delete(state->names, op->name, strlen(op->name))) < 0 ||
	    (rc = btree_put(state->names, op->new_name, strlen(op->new_name), after->stable_id.bytes, 16)) < 0)
		return rc;
	return 0;
}

/* ---- referential integrity (docs/ARCHITECTURE.md invariant 13) -------------------- */

/* An edge table end that names the node table being checked, as the commit leaves it. */
struct reference {
	char edge_table[JOURNAL_NAME_MAX + 1];
	enum table_edge_end end;
	struct table_info info;
};

struct reference_check {
	struct commit_state *state;
	const char *node_table;
	struct reference *references;
	size_t count;
	struct buf edge;
};

/* The live edge tables whose from or to is name, after every operation of the commit. */
static int references_collect(struct commit_state *state, const char *name, bool include_empty,
			      struct reference **out, size_t *count_out)
{
	*out = NULL;
	*count_out = 0;
	struct btree_iterator *iterator;
	int rc = btree_iterator_open(state->names, NULL, 0, &iterator);
	if (rc < 0)
		return rc;
	const uint8_t *key, *value;
	size_t key_size, value_size;
	struct buf head_bytes;
	buf_init(&head_bytes);
	struct reference *references = NULL;
	size_t count = 0;
	while ((rc = btree_iterator_next(iterator, &key, &key_size, &value, &value_size)) == 1) {
		struct head_row head;
		buf_reset(&head_bytes);
		if (value_size != 16) {
			rc = -EIO;
			break;
		}
		if ((rc = btree_get(state->heads, value, 16, &head_bytes)) < 0 ||
		    (rc = journal_head_row_decode(head_bytes.data, head_bytes.size, &head)) < 0)
			break;
		if (head.kind != SCHEMA_EDGE || (head.row_count == 0 && !include_empty))
			continue;
		struct touched_table *table;
		if ((rc = head_table(state, &head, &table)) < 0)
			break;
		for (int end = TABLE_EDGE_FROM; end <= TABLE_EDGE_TO; end++) {
			if (strcmp(end == TABLE_EDGE_FROM ? table->schema.from : table->schema.to, name) != 0)
				continue;
			struct reference *grown = realloc(references, (count + 1) * sizeof *grown);
			if (!grown) {
				rc = -ENOMEM;
				goto out;
			}
			references = grown;
			snprintf(references[count].edge_table, sizeof references[count].edge_table, "%s", head.name);
			references[count].end = (enum table_edge_end)end;
			references[count].info = table->info;
			count++;
		}
	}
out:
	buf_free(&head_bytes);
	btree_iterator_free(iterator);
	if (rc < 0) {
		free(references);
		return rc;
	}
	*out = references;
	*count_out = count;
	return 0;
}

/* One id the commit removes from the node table: no edge may still name it. */
static int reference_visit(void *context, const uint8_t *id, size_t id_size)
{
	struct reference_check *check = context;
	struct commit_state *state = check->state;
	for (size_t i = 0; i < check->count; i++) {
		const struct reference *reference = &check->references[i];
		buf_reset(&check->edge);
		int rc = table_edges_first(state->manifest->pager, state->publish->append, &reference->info,
					   reference->end, id, id_size, &check->edge);
		if (rc < 0)
			return error_info_set(state->error, rc, "cannot read the edges of %s: %s", reference->edge_table,
					      io_strerror(rc));
		if (rc == 1)
			return error_info_set(state->error, -EINVAL,
					      "node \"%.*s\" of %s is still referenced by edge \"%.*s\" of %s (its %s): "
					      "delete those edges in the same commit, or delete the node with "
					      "{\"id\":\"%.*s\",\"@delete\":\"detach\"}",
					      (int)(id_size > 200 ? 200 : id_size), (const char *)id, check->node_table,
					      (int)(check->edge.size > 200 ? 200 : check->edge.size),
					      (const char *)check->edge.data, reference->edge_table,
					      reference->end == TABLE_EDGE_FROM ? "from" : "to",
					      (int)(id_size > 200 ? 200 : id_size), (const char *)id);
	}
	return 0;
}

/*
 * No node a write of this commit removes (a merge's deletes, the rows an
 * overwrite leaves out) is named by an edge the commit leaves live, whatever
 * order the operations came in: the removed ids are looked up in the
 * adjacency indexes of the edge tables as this commit writes them.
 * O(removed × referencing tables × log edges).
 */
static int check_references(struct commit_state *state)
{
	if (io_failpoint_armed("integrity.skip_reference_checks"))
		return 0;
	for (size_t i = 0; i < state->touched_count; i++) {
		/* copies: collecting references may grow state->touched */
		struct touched_table table = state->touched[i];
		if (!table.written || !table.has_base || table.schema.kind != SCHEMA_NODE || table.base.row_count == 0)
			continue;
		struct buf head_bytes;
		buf_init(&head_bytes);
		struct head_row head;
		int rc = btree_get(state->heads, table.stable_id.bytes, 16, &head_bytes);
		if (rc == 0)
			rc = journal_head_row_decode(head_bytes.data, head_bytes.size, &head);
		buf_free(&head_bytes);
		if (rc < 0)
			return rc;
		if (head.state != HEAD_LIVE)
			continue;
		struct reference_check check = { .state = state, .node_table = head.name };
		buf_init(&check.edge);
		rc = references_collect(state, head.name, false, &check.references, &check.count);
		if (rc == 0 && check.count > 0)
			rc = table_removed_ids(state->manifest->pager, state->publish->append, &table.base, &table.info,
					       table.stage, reference_visit, &check);
		free(check.references);
		buf_free(&check.edge);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int edge_referencing(struct commit_state *state, const char *name, char *edge_out)
{
	struct reference *references = NULL;
	size_t count = 0;
	int rc = references_collect(state, name, true, &references, &count);
	edge_out[0] = 0;
	if (rc == 0 && count > 0)
		snprintf(edge_out, JOURNAL_NAME_MAX + 1, "%s", references[0].edge_table);
	free(references);
	return rc;
}

/*
 * After node table old_name became new_name: every live edge table whose
 * schema names old_name gets a new version with the same rows and the schema
 * naming new_name (one schema change each, recorded in the commit), so edge
 * schemas always name their node tables as they are called at that version.
 * 0 or -errno with state->error set.
 */
static int rename_references(struct commit_state *state, const char *old_name, const char *new_name,
			     struct commit_record *record, size_t *capacity)
{
	struct reference *references = NULL;
	size_t count = 0;
	int rc = references_collect(state, old_name, true, &references, &count);
	for (size_t i = 0; rc == 0 && i < count; i++) {
		if (i > 0 && strcmp(references[i].edge_table, references[i - 1].edge_table) == 0)
			continue;  /* both ends: one schema change does both */
		struct head_row head;
		struct touched_table *table;
		if ((rc = live_head(state, references[i].edge_table, &head)) < 0 ||
		    (rc = head_table(state, &head, &table)) < 0)
			break;
		struct schema renamed;
		schema_init(&renamed);
		if ((rc = schema_copy(&renamed, &table->schema)) < 0)
			break;
		if (strcmp(renamed.from, old_name) == 0)
			snprintf(renamed.from, sizeof renamed.from, "%s", new_name);
		if (strcmp(renamed.to, old_name) == 0)
			snprintf(renamed.to, sizeof renamed.to, "%s", new_name);
		if (record->change_count == *capacity) {
			struct change *grown = realloc(record->changes, (*capacity * 2 + 1) * sizeof *grown);
			if (!grown) {
				schema_free(&renamed);
				rc = -ENOMEM;
				break;
			}
			record->changes = grown;
			*capacity = *capacity * 2 + 1;
		}
		struct change *change = &record->changes[record->change_count];
		memset(change, 0, sizeof *change);
		struct table_info info = table->info;
		struct block_address address;
		info.table_version++;
		if ((rc = schema_block_append(state, &renamed, &info.schema)) < 0 ||
		    (rc = table_info_append(state->publish->append, &info, &address)) < 0 ||
		    (rc = touched_record(state, &info, &renamed, &table)) < 0) {
			schema_free(&renamed);
			error_info_set(state->error, rc, "cannot rename the node table of %s: %s", head.name, io_strerror(rc));
			break;
		}
		change->op = CHANGE_SCHEMA;
		change->head_after = head;
		struct head_row *after = &change->head_after;
		after->table_version = info.table_version;
		after->table = address;
		schema_hash(&renamed, after->schema_hash);
		snprintf(after->owner, sizeof after->owner, "%s", state->owner);
		after->commit = state->commit;
		after->commit_time_us = state->time_us;
		schema_free(&renamed);
		if ((rc = head_store(state, after)) < 0)
			break;
		record->change_count++;
	}
	free(references);
	return rc;
}

/* Every new or changed edge schema names live node tables (after all operations). */
static int check_endpoints(struct commit_state *state)
{
	for (size_t i = 0; i < state->touched_count; i++) {
		struct touched_table *table = &state->touched[i];
		if (!table->check_endpoints)
			continue;
		const char *ends[2] = { table->schema.from, table->schema.to };
		for (int e = 0; e < 2; e++) {
			if (!ends[e][0])
				continue;
			struct head_row node;
			int rc = live_head(state, ends[e], &node);
			if (rc == -ENOENT || (rc == 0 && node.kind != SCHEMA_NODE))
				return error_info_set(state->error, -EINVAL,
						      "an edge table refers to %s, which is not a node table", ends[e]);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

static int request_check(const struct manifest_commit_request *request, struct error_info *error)
{
	int rc = manifest_name_check("branch", request->branch, error);
	if (rc < 0)
		return rc;
	if (request->op_count && !request->ops)
		return error_info_set(error, -EINVAL, "the commit has no operations");
	for (size_t i = 0; i < request->op_count; i++) {
		const struct manifest_op *op = &request->ops[i];
		if (op->kind < MANIFEST_WRITE || op->kind > MANIFEST_RESTORE)
			return error_info_set(error, -EINVAL, "unknown operation %d", (int)op->kind);
		if (!memchr(op->name, 0, sizeof op->name) || !memchr(op->new_name, 0, sizeof op->new_name))
			return error_info_set(error, -EINVAL, "table name is longer than %d bytes",
					      JOURNAL_NAME_MAX);
		if ((rc = manifest_name_check("table", op->name, error)) < 0)
			return rc;
	}
	return 0;
}

/* One attempt of manifest_commit (below). */
static int commit_once(struct manifest *manifest, const struct manifest_commit_request *request,
		       struct manifest_commit_result *result, struct error_info *error)
{
	error_info_clear(error);
	int rc = request_check(request, error);
	if (rc < 0)
		return rc;
	struct manifest_publish publish;
	struct commit_state state = { .manifest = manifest, .publish = &publish, .error = error };
	buf_init(&state.scratch);
	struct commit_record record;
	journal_commit_record_init(&record);
	struct branch_record branch;
	rc = manifest_publish_begin(manifest, &publish, error);
	if (rc < 0)
		return rc;
	/* LOCKED */
	rc = manifest_branch_find(manifest->pager, publish.base.branches, request->branch, &branch);
	if (rc < 0) {
		if (rc == -ENOENT)
			error_info_set(error, rc, "no branch %s", request->branch);
		else
			error_info_set(error, rc, "cannot read branch %s: %s", request->branch, io_strerror(rc));
		goto out;
	}
	if ((rc = manifest_condition_check(&request->condition, &publish.base, &branch, error)) < 0)
		goto out;
	state.owner = strcmp(branch.name, "main") == 0 ? "" : branch.name;
	/* the commit id carries its version (FORMAT.md §16.2); an intent's ULID is its base */
	struct ulid base_id;
	if (request->intent)
		base_id = *manifest_intent_commit(request->intent);
	else if (!ulid_is_zero(&request->origin_id))
		base_id = request->origin_id;
	else
		ulid_new(&base_id);
	manifest_commit_id(&base_id, publish.base.version + 1, &state.commit);
	state.time_us = manifest_publish_time(&publish);
	if (request->time_us)
		state.time_us = request->time_us;   /* a replayed commit: its own time (the caller keeps commit times in version order) */
	if ((rc = btree_open(manifest->pager, branch.heads, &state.heads)) < 0 ||
	    (rc = btree_open(manifest->pager, branch.names, &state.names)) < 0)
		goto out;
	size_t change_capacity = request->op_count ? request->op_count : 1;
	record.changes = calloc(change_capacity, sizeof *record.changes);
	if (!record.changes) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < request->op_count; i++) {
		const struct manifest_op *op = &request->ops[i];
		if (record.change_count == change_capacity) {
			/* a rename's edge-schema changes (rename_references) took the room of later operations */
			struct change *grown = realloc(record.changes, change_capacity * 2 * sizeof *grown);
			if (!grown) {
				rc = -ENOMEM;
				goto out;
			}
			record.changes = grown;
			change_capacity *= 2;
		}
		struct change *change = &record.changes[record.change_count];
		memset(change, 0, sizeof *change);
		switch (op->kind) {
		case MANIFEST_WRITE:
			rc = op_write(&state, op, change);
			break;
		case MANIFEST_SCHEMA:
			rc = op_schema(&state, op, change);
			break;
		case MANIFEST_DROP:
			rc = op_drop(&state, op, change);
			break;
		case MANIFEST_RENAME:
			rc = op_rename(&state, op, change);
			break;
		case MANIFEST_RESTORE:
			rc = op_restore(&state, op, change);
			break;
		}
		if (rc < 0)
			goto out;
		record.change_count++;
		if (op->kind == MANIFEST_RENAME && change->head_after.kind == SCHEMA_NODE &&
		    (rc = rename_references(&state, op->name, op->new_name, &record, &change_capacity)) < 0)
			goto out;
	}
	if ((rc = check_endpoints(&state)) < 0 || (rc = check_references(&state)) < 0)
		goto out;
	record.id = state.commit;
	record.time_us = state.time_us;
	if (!ulid_is_zero(&request->merge_parent)) {
		record.parent_count = 2;
		record.parents[1] = request->merge_parent;
		record.parent_records[1] = request->merge_parent_record;
	}
	record.actor = strdup(request->actor ? request->actor : "");
	record.message = strdup(request->message ? request->message : "");
	record.based_on = request->based_on;
	if (!record.actor || !record.message) {
		rc = -ENOMEM;
		goto out;
	}
	/* history blocks first, then the state a read of the latest version needs (FORMAT.md §18) */
	if ((rc = manifest_publish_history(&publish, &branch, &record, error)) < 0)
		goto out;
	struct block_address heads_root, names_root;
	if ((rc = btree_flush(state.heads, publish.append, &heads_root)) < 0 ||
	    (rc = btree_flush(state.names, publish.append, &names_root)) < 0)
		goto out;
	struct root_record root;
	rc = manifest_publish_commit_state(&publish, &branch, &record, heads_root, names_root, &root, error);
	if (rc < 0) {
		if (publish.outcome_unknown) {
			/* The root may still become durable: its segments must stay (the stages keep
			 * them, as published ones do) and its sidecar too, for recovery to decide. */
			for (size_t i = 0; i < request->op_count; i++)
				if (request->ops[i].kind == MANIFEST_WRITE && request->ops[i].stage)
					table_stage_published(request->ops[i].stage);
			if (request->intent) {
				manifest_intent_release(request->intent);
				if (result)
					result->intent_released = true;
			}
		}
		goto out;
	}
	/* PUBLISHED */
	if (request->intent)
		manifest_intent_complete(request->intent);
	io_failpoint("publish.after_sidecar_remove");
	for (size_t i = 0; i < request->op_count; i++)
		if (request->ops[i].kind == MANIFEST_WRITE && request->ops[i].stage)
			table_stage_published(request->ops[i].stage);
	if (result) {
		result->version = root.version;
		result->commit = state.commit;
		result->time_us = state.time_us;
	}
out:
	if (rc < 0 && error && !error->code)
		error_info_set(error, rc, "the commit failed: %s", io_strerror(rc));
	btree_free(state.heads);
	btree_free(state.names);
	for (size_t i = 0; i < state.touched_count; i++)
		schema_free(&state.touched[i].schema);
	free(state.touched);
	buf_free(&state.scratch);
	journal_commit_record_free(&record);
	manifest_publish_end(&publish);
	return rc;
}

/*
 * In an object store the conditional create of the tail is what orders
 * writers (no lock spans hosts): a writer that lost the race to another
 * host's publish at the same offset (-ESTALE, nothing written) builds the
 * same request again on the new latest state, as it would have after
 * waiting for the local store lock. Bounded; the conditions of the request
 * (--if-version, --if-commit) are checked again each time.
 */
/*
 * One commit: commit_once builds the publish and ends in manifest_publish_finish, whose
 * body writes the root and makes it durable (the commit point); a lost race on an object
 * store retries the whole of it.
 */
int manifest_commit(struct manifest *manifest, const struct manifest_commit_request *request,
		    struct manifest_commit_result *result, struct error_info *error)
{
	struct manifest_race_state race = manifest_race_begin();
	int rc;
	do
		rc = commit_once(manifest, request, result, error);
	while (manifest_race_again(manifest, &race, rc, error));
	return rc;
}
