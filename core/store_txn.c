/*
 * store_txn — transactions: table writers that validate rows while they
 * stream in, schema/drop/rename operations, and the one commit that
 * publishes them together. See store.h.
 *
 * States of a transaction:
 *   OPEN        pinned to a snapshot of its branch; operations are added in
 *               the order the caller makes them (writers take their place
 *               when opened)
 *   COMMITTING  under txn.lock: every writer checked, deferred endpoints
 *               checked, stages sealed, manifest_commit called
 *   OPEN again  on success: empty, re-pinned to the snapshot just published;
 *               on error: exactly as before, so the caller may fix and retry
 *   FREED       store_txn_free abandons anything not committed (stages and
 *               the recovery intent with their segments)
 * States of a writer: WRITING -> FINISHED (store_writer_finish), or
 * FAILED (sticky: every later call returns the first error).
 *
 * Invariants kept:
 *   1. Every complete line is parsed and validated by the write(2) that
 *      completed it, and so is a last line without "\n" once it is a
 *      complete JSON object (or can no longer become one); only deferred
 *      endpoint checks are left for the commit (docs/MOUNT.md "Validation").
 *   2. A line longer than row_max is refused as soon as that is known,
 *      without buffering more than row_max bytes of it.
 *   3. The bytes staged by the transaction (input lines, "\n" included)
 *      never exceed staged_max.
 *   4. Nothing is published unless every operation of the transaction is;
 *      a refused commit publishes nothing (manifest_commit is atomic).
 *   5. At most one writer per table name per transaction.
 *   6. At most one recovery intent per transaction, created the first time
 *      a stage spills to a segment.
 */
#include "store_txn_int.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* ---- operations list ---------------------------------------------------------- */

static void txn_op_free(struct txn_op *op);

static int txn_append_op(struct store_txn *txn, struct txn_op *op)
{
	if (txn->op_count == txn->op_capacity) {
		size_t capacity = txn->op_capacity ? txn->op_capacity * 2 : 8;
		struct txn_op **ops = realloc(txn->ops, capacity * sizeof *ops);
		if (!ops)
			return -ENOMEM;
		txn->ops = ops;
		txn->op_capacity = capacity;
	}
	txn->ops[txn->op_count++] = op;
	return 0;
}

static void txn_remove_op(struct store_txn *txn, size_t index)
{
	memmove(&txn->ops[index], &txn->ops[index + 1],
		(txn->op_count - index - 1) * sizeof *txn->ops);
	txn->op_count--;
}

/*
 * What a table name means inside the transaction: replays the pending
 * operations backwards (through renames) down to the pinned snapshot.
 */
struct table_state {
	bool exists;
	bool in_snapshot;                /* head is the table's head in the snapshot */
	struct head_row head;
	const struct schema *pending_schema; /* the newest SCHEMA op's schema */
	bool written;                    /* a writer of this transaction writes it */
};

static int txn_resolve(struct store_txn *txn, const char *name, struct table_state *state)
{
	memset(state, 0, sizeof *state);
	char current[JOURNAL_NAME_MAX + 1];
	snprintf(current, sizeof current, "%s", name);
	size_t upto = txn->op_count;
	for (;;) {
		bool followed = false;
		while (upto > 0) {
			const struct txn_op *op = txn->ops[--upto];
			if (op->kind == MANIFEST_RENAME) {
				if (strcmp(op->new_name, current) == 0) {
					snprintf(current, sizeof current, "%s", op->name);
					followed = true;
					break;
				}
				if (strcmp(op->name, current) == 0) {
					state->exists = state->written || state->pending_schema;
					return 0;
				}
				continue;
			}
			if (strcmp(op->name, current) != 0)
				continue;
			if (op->kind == MANIFEST_DROP) {
				state->exists = state->written || state->pending_schema;
				return 0;
			}
			if (op->kind == MANIFEST_SCHEMA) {
				if (!state->pending_schema)
					state->pending_schema = &op->schema;
				state->exists = true;
				/* keep going: the snapshot head (if any) is the base */
			}
			if (op->kind == MANIFEST_WRITE)
				state->written = true;
		}
		if (!followed)
			break;
	}
	int rc = store_snapshot_head(txn->snapshot, current, &state->head);
	if (rc == 0) {
		state->in_snapshot = true;
		state->exists = true;
	} else if (rc == -ENOENT) {
		state->exists = state->written || state->pending_schema;
	} else {
		return rc;
	}
	return 0;
}

/* ---- transaction lifetime --------------------------------------------------------- */

int store_txn_begin(struct store *store, const char *branch, struct store_txn **out,
		    struct error_info *error)
{
	*out = NULL;
	if (store->read_only)
		return error_info_set(error, -EROFS, "the store is open read-only");
	struct store_txn *txn = calloc(1, sizeof *txn);
	if (!txn)
		return error_info_set(error, -ENOMEM, "out of memory");
	branch = store_branch_or_main(branch);
	snprintf(txn->branch, sizeof txn->branch, "%s", branch);
	txn->store = store;
	int rc = store_snapshot_open(store, branch, STORE_LATEST, &txn->snapshot, error);
	if (rc < 0) {
		free(txn);
		return rc;
	}
	if (pthread_mutex_init(&txn->lock, NULL) != 0) {
		store_snapshot_release(txn->snapshot);
		free(txn);
		return error_info_set(error, -ENOMEM, "out of memory");
	}
	*out = txn;
	return 0;
}

int store_txn_set_actor(struct store_txn *txn, const char *actor)
{
	if (!actor || strlen(actor) >= STORE_ACTOR_MAX)
		return -EINVAL;
	pthread_mutex_lock(&txn->lock);
	snprintf(txn->actor, sizeof txn->actor, "%s", actor);
	pthread_mutex_unlock(&txn->lock);
	return 0;
}

void store_txn_defer_endpoint_checks(struct store_txn *txn, bool defer)
{
	pthread_mutex_lock(&txn->lock);
	txn->defer_endpoints = defer;
	pthread_mutex_unlock(&txn->lock);
}

struct store_snapshot *store_txn_snapshot(struct store_txn *txn)
{
	pthread_mutex_lock(&txn->lock);
	struct store_snapshot *snapshot = txn->snapshot;
	pthread_mutex_unlock(&txn->lock);
	return snapshot;
}

static void writer_free(struct store_writer *writer)
{
	if (!writer)
		return;
	table_stage_free(writer->stage);
	schema_free(&writer->schema);
	schema_free(&writer->inferred);
	schema_inference_free(writer->inference);
	schema_row_free(&writer->row);
	store_parse_helper_free(writer->parse_helper);
	buf_free(&writer->partial);
	buf_free(&writer->pending);
	if (writer->pending_file_open)
		io_file_close(&writer->pending_file);
	buf_free(&writer->pending_chunks);
	for (int end = ENDPOINT_FROM; end <= ENDPOINT_TO; end++)
		if (!writer->endpoints[end].shares_finder)
			table_finder_free(writer->endpoints[end].finder);
	store_edges_references_free(writer);
	buf_free(&writer->detached);
	pthread_mutex_destroy(&writer->lock);
	free(writer);
}

static void txn_op_free(struct txn_op *op)
{
	if (!op)
		return;
	writer_free(op->writer);
	schema_free(&op->schema);
	free(op);
}

void store_txn_free(struct store_txn *txn)
{
	if (!txn)
		return;
	for (size_t i = 0; i < txn->op_count; i++)
		txn_op_free(txn->ops[i]);
	free(txn->ops);
	if (txn->intent)
		manifest_intent_abandon(txn->intent);
	store_snapshot_release(txn->snapshot);
	pthread_mutex_destroy(&txn->lock);
	free(txn);
}

/* A writer is counted when it means something: an overwrite (even of zero
 * rows: the table becomes empty) or a merge with at least one line. */
static bool op_counts(const struct txn_op *op)
{
	if (op->kind != MANIFEST_WRITE)
		return true;
	return op->writer->mode == STORE_OVERWRITE || atomic_load(&op->writer->lines) > 0;
}

size_t store_txn_size(const struct store_txn *txn)
{
	struct store_txn *mutable_txn = (struct store_txn *)txn;
	pthread_mutex_lock(&mutable_txn->lock);
	size_t count = 0;
	for (size_t i = 0; i < txn->op_count; i++)
		count += op_counts(txn->ops[i]);
	pthread_mutex_unlock(&mutable_txn->lock);
	return count;
}

/* ---- writers ---------------------------------------------------------------------- */

/* The stage's segment allocator: the first spill creates the txn's intent. Called
 * from table_stage_add / table_stage_seal with txn.lock held. */
static int txn_allocate_segment(void *context, uint64_t *segment_id_out)
{
	struct store_txn *txn = context;
	if (!txn->intent) {
		int rc = manifest_intent_begin(txn->store->manifest, &txn->intent);
		if (rc < 0) {
			txn->intent = NULL;
			return rc;
		}
		if (!ulid_is_zero(&txn->origin.id))
			manifest_intent_set_commit(txn->intent, &txn->origin.id);   /* before its sidecar exists */
	}
	return manifest_intent_new_segment(txn->intent, segment_id_out);
}


/* store_txn_writer with txn.lock held (also for the writers a detach creates at commit). */
int store_txn_writer_create(struct store_txn *txn, const char *table, enum store_write_mode mode,
		      uint64_t based_on_version, const char *path, struct store_writer **out,
		      struct error_info *error)
{
	*out = NULL;
	const char *shown = path && *path ? path : (table ? table : "");
	error_info_locate(error, shown, 0);
	if (!table || !schema_name_is_valid(table, strlen(table)))
		return error_info_set(error, -EINVAL,
				      "invalid table name \"%.128s\": names are [A-Za-z_][A-Za-z0-9_]{0,127}",
				      table ? table : "");
	if (mode != STORE_OVERWRITE && mode != STORE_MERGE)
		return error_info_set(error, -EINVAL, "unknown write mode %d", (int)mode);
	struct store_writer *writer = calloc(1, sizeof *writer);
	if (!writer)
		return error_info_set(error, -ENOMEM, "out of memory");
	struct txn_op *op = NULL;
	int rc = 0;
	if (pthread_mutex_init(&writer->lock, NULL) != 0) {
		free(writer);
		return error_info_set(error, -ENOMEM, "out of memory");
	}
	writer->txn = txn;
	snprintf(writer->table, sizeof writer->table, "%s", table);
	snprintf(writer->path, sizeof writer->path, "%s", shown);
	writer->mode = mode;
	writer->based_on_version = based_on_version;
	schema_init(&writer->schema);
	schema_init(&writer->inferred);
	schema_row_init(&writer->row);
	buf_init(&writer->partial);
	buf_init(&writer->pending);
	buf_init(&writer->pending_chunks);
	buf_init(&writer->detached);
	atomic_init(&writer->lines, 0);

	struct table_state state;
	if (store_txn_find_writer(txn, table)) {
		rc = error_info_set(error, -EBUSY, "table %s already has a writer in this transaction",
				    table);
		goto cleanup;
	}
	rc = txn_resolve(txn, table, &state);
	if (rc < 0) {
		error_info_set(error, rc, "cannot read the head of %s: %s", table, io_strerror(rc));
		goto cleanup;
	}
	if (state.written) {
		rc = error_info_set(error, -EBUSY,
				    "table %s is already written in this transaction", table);
		goto cleanup;
	}
	if (state.pending_schema) {
		rc = schema_copy(&writer->schema, state.pending_schema);
	} else if (state.exists) {
		struct table_info info;
		rc = store_head_schema(txn->store, &state.head, &info, &writer->schema);
		if (rc == 0 && state.head.row_count == 0 && schema_is_undeclared(&writer->schema)) {
			/* created empty without a schema: the first rows say what it is */
			writer->creates = writer->refines = true;
			rc = schema_inference_open(&writer->inference);
		} else if (rc == 0) {
			memcpy(writer->expected_schema_hash, state.head.schema_hash,
			       sizeof writer->expected_schema_hash);
		}
	} else {
		writer->creates = true;
		rc = schema_inference_open(&writer->inference);
	}
	if (rc < 0) {
		error_info_set(error, rc, "cannot read the schema of %s: %s", table, io_strerror(rc));
		goto cleanup;
	}
	if (state.in_snapshot && based_on_version)
		writer->based_on_incarnation = state.head.incarnation;
	writer->in_snapshot = state.in_snapshot && !state.pending_schema;
	writer->snapshot_head = state.head;
	if (!writer->creates && writer->schema.kind == SCHEMA_EDGE) {
		writer->is_edge = true;
		struct endpoint_table *from = &writer->endpoints[ENDPOINT_FROM], *to = &writer->endpoints[ENDPOINT_TO];
		rc = store_edges_endpoint_open(txn, writer->schema.from, NULL, from);
		if (rc == 0)
			rc = store_edges_endpoint_open(txn, writer->schema.to, from, to);
		if (rc < 0) {
			error_info_set(error, rc, "cannot read the node tables of %s: %s", table,
				       io_strerror(rc));
			goto cleanup;
		}
	}
	rc = table_stage_open(txn->store->pager,
			      mode == STORE_MERGE ? TABLE_MERGE : TABLE_OVERWRITE, txn->store->codec,
			      txn_allocate_segment, txn, &writer->stage);
	if (rc == 0 && writer->is_edge)
		rc = table_stage_track_edges(writer->stage);
	if (rc < 0) {
		error_info_set(error, rc, "cannot stage rows: %s", io_strerror(rc));
		goto cleanup;
	}
	op = calloc(1, sizeof *op);
	if (!op) {
		rc = error_info_set(error, -ENOMEM, "out of memory");
		goto cleanup;
	}
	op->kind = MANIFEST_WRITE;
	snprintf(op->name, sizeof op->name, "%s", table);
	schema_init(&op->schema);
	op->writer = writer;
	assert(!store_txn_find_writer(txn, table)); /* invariant 5 */
	rc = txn_append_op(txn, op);
	if (rc < 0) {
		error_info_set(error, rc, "out of memory");
		op->writer = NULL;
		txn_op_free(op);
		goto cleanup;
	}
	error_info_clear(error);
	*out = writer;
	return 0;
cleanup:
	writer_free(writer);
	return rc;
}

int store_txn_writer(struct store_txn *txn, const char *table, enum store_write_mode mode,
		     uint64_t based_on_version, const char *path, struct store_writer **out,
		     struct error_info *error)
{
	pthread_mutex_lock(&txn->lock);
	int rc = store_txn_writer_create(txn, table, mode, based_on_version, path, out, error);
	pthread_mutex_unlock(&txn->lock);
	return rc;
}



void store_writer_require_version(struct store_writer *writer, uint64_t table_version)
{
	pthread_mutex_lock(&writer->lock);
	writer->based_on_version = table_version;
	pthread_mutex_unlock(&writer->lock);
}

void store_writer_discard(struct store_writer *writer)
{
	if (!writer)
		return;
	struct store_txn *txn = writer->txn;
	pthread_mutex_lock(&txn->lock);
	for (size_t i = 0; i < txn->op_count; i++) {
		if (txn->ops[i]->writer == writer) {
			struct txn_op *op = txn->ops[i];
			txn_remove_op(txn, i);
			assert(txn->staged_bytes >= writer->staged_bytes);
			txn->staged_bytes -= writer->staged_bytes;
			txn_op_free(op);
			break;
		}
	}
	pthread_mutex_unlock(&txn->lock);
}

/* ---- schema, drop, rename ----------------------------------------------------------- */

static int check_table_name(const char *name, struct error_info *error)
{
	if (name && schema_name_is_valid(name, strlen(name)))
		return 0;
	return error_info_set(error, -EINVAL,
			      "invalid table name \"%.128s\": names are [A-Za-z_][A-Za-z0-9_]{0,127}",
			      name ? name : "");
}

static int txn_add_named_op(struct store_txn *txn, enum manifest_op_kind kind, const char *name,
			    const char *new_name, struct schema *schema, struct error_info *error)
{
	struct txn_op *op = calloc(1, sizeof *op);
	if (!op)
		return error_info_set(error, -ENOMEM, "out of memory");
	op->kind = kind;
	snprintf(op->name, sizeof op->name, "%s", name);
	if (new_name)
		snprintf(op->new_name, sizeof op->new_name, "%s", new_name);
	schema_init(&op->schema);
	if (schema) {
		op->schema = *schema;   /* takes ownership */
		schema_init(schema);
	}
	int rc = txn_append_op(txn, op);
	if (rc < 0) {
		txn_op_free(op);
		return error_info_set(error, rc, "out of memory");
	}
	return 0;
}

int store_txn_schema(struct store_txn *txn, const char *table, const char *json, size_t size,
		     struct error_info *error)
{
	char path[JOURNAL_NAME_MAX + 16];
	snprintf(path, sizeof path, "schema/%.128s.json", table ? table : "");
	error_info_locate(error, path, 0);
	int rc = check_table_name(table, error);
	if (rc < 0)
		return rc;
	struct schema schema, old;
	schema_init(&schema);
	schema_init(&old);
	rc = schema_parse(json, size, &schema, error);
	if (rc < 0) {
		if (error)
			snprintf(error->path, sizeof error->path, "%s", path);
		goto out;
	}
	pthread_mutex_lock(&txn->lock);
	struct table_state state;
	rc = txn_resolve(txn, table, &state);
	if (rc < 0) {
		error_info_set(error, rc, "cannot read the head of %s: %s", table, io_strerror(rc));
	} else if (state.pending_schema) {
		rc = schema_check_compatible(state.pending_schema, &schema, error);
	} else if (state.in_snapshot) {
		struct table_info info;
		rc = store_head_schema(txn->store, &state.head, &info, &old);
		if (rc < 0)
			error_info_set(error, rc, "cannot read the schema of %s: %s", table,
				       io_strerror(rc));
		else if (!(state.head.row_count == 0 && schema_is_undeclared(&old) &&
			   schema.kind == SCHEMA_NODE))
			rc = schema_check_compatible(&old, &schema, error);
	}
	if (rc == 0)
		rc = txn_add_named_op(txn, MANIFEST_SCHEMA, table, NULL, &schema, error);
	pthread_mutex_unlock(&txn->lock);
out:
	schema_free(&schema);
	schema_free(&old);
	return rc;
}

int store_txn_drop(struct store_txn *txn, const char *table, struct error_info *error)
{
	int rc = check_table_name(table, error);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&txn->lock);
	struct table_state state;
	rc = txn_resolve(txn, table, &state);
	if (rc < 0)
		error_info_set(error, rc, "cannot read the head of %s: %s", table, io_strerror(rc));
	else if (!state.exists)
		rc = error_info_set(error, -ENOENT, "no table named %s", table);
	else
		rc = txn_add_named_op(txn, MANIFEST_DROP, table, NULL, NULL, error);
	pthread_mutex_unlock(&txn->lock);
	return rc;
}

int store_txn_rename(struct store_txn *txn, const char *from, const char *to,
		     struct error_info *error)
{
	int rc = check_table_name(from, error);
	if (rc == 0)
		rc = check_table_name(to, error);
	if (rc < 0)
		return rc;
	if (strcmp(from, to) == 0)
		return error_info_set(error, -EINVAL, "cannot rename %s onto itself", from);
	pthread_mutex_lock(&txn->lock);
	struct table_state state;
	rc = txn_resolve(txn, from, &state);
	if (rc == 0 && !state.exists)
		rc = error_info_set(error, -ENOENT, "no table named %s", from);
	if (rc == 0) {
		rc = txn_resolve(txn, to, &state);
		if (rc == 0 && state.exists)
			rc = error_info_set(error, -EEXIST, "a table named %s already exists", to);
	}
	if (rc == 0)
		rc = txn_add_named_op(txn, MANIFEST_RENAME, from, to, NULL, error);
	else if (error && !error->message[0])
		error_info_set(error, rc, "cannot read the heads: %s", io_strerror(rc));
	pthread_mutex_unlock(&txn->lock);
	return rc;
}

int store_txn_restore(struct store_txn *txn, const char *table, struct block_address source, bool adopt_identity,
		      struct error_info *error)
{
	int rc = check_table_name(table, error);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&txn->lock);
	rc = txn_add_named_op(txn, MANIFEST_RESTORE, table, NULL, NULL, error);
	if (rc == 0) {
		txn->ops[txn->op_count - 1]->source = source;
		txn->ops[txn->op_count - 1]->adopt_identity = adopt_identity;
	}
	pthread_mutex_unlock(&txn->lock);
	return rc;
}

void store_txn_set_based_on(struct store_txn *txn, uint64_t version)
{
	txn->based_on = version;
}

int store_txn_set_origin(struct store_txn *txn, const struct store_commit_origin *origin)
{
	pthread_mutex_lock(&txn->lock);
	int rc = txn->intent && !ulid_is_zero(&origin->id) ? -EBUSY : 0;   /* set before any row spills */
	if (rc == 0)
		txn->origin = *origin;
	pthread_mutex_unlock(&txn->lock);
	return rc;
}

int store_txn_set_merge_commit(struct store_txn *txn, const char *commit_text, struct error_info *error)
{
	struct ulid commit;
	uint64_t version;
	struct block_address record;
	int rc = ulid_parse(commit_text, &commit);
	if (rc == 0)
		rc = manifest_commit_find(txn->store->manifest, &commit, &version, &record);
	if (rc < 0)
		return error_info_set(error, rc == -EINVAL ? rc : -ENOENT, "no commit %.40s to record as a merge parent",
				      commit_text);
	store_txn_set_merge_parent(txn, &commit, record);
	return 0;
}

void store_txn_set_merge_parent(struct store_txn *txn, const struct ulid *commit, struct block_address record)
{
	pthread_mutex_lock(&txn->lock);
	txn->merge_parent = *commit;
	txn->merge_parent_record = record;
	pthread_mutex_unlock(&txn->lock);
}

void store_txn_trust_endpoints(struct store_txn *txn)
{
	pthread_mutex_lock(&txn->lock);
	txn->trust_endpoints = true;
	pthread_mutex_unlock(&txn->lock);
}

/* ---- commit ------------------------------------------------------------------------ */

static void describe_op(const struct txn_op *op, struct buf *out)
{
	switch (op->kind) {
	case MANIFEST_WRITE: {
		const struct store_writer *writer = op->writer;
		uint64_t rows = table_stage_rows(writer->stage);
		const char *verb = writer->creates && !writer->refines ? "create"
				   : writer->mode == STORE_MERGE ? "merge"
								 : "overwrite";
		buf_printf(out, "%s %s (%llu row%s)", verb, op->name, (unsigned long long)rows,
			   rows == 1 ? "" : "s");
		break;
	}
	case MANIFEST_SCHEMA:
		buf_printf(out, "schema %s", op->name);
		break;
	case MANIFEST_DROP:
		buf_printf(out, "drop %s", op->name);
		break;
	case MANIFEST_RENAME:
		buf_printf(out, "rename %s to %s", op->name, op->new_name);
		break;
	case MANIFEST_RESTORE:   /* a merge's taken tables */
		buf_printf(out, "take %s", op->name);
		break;
	}
}

/* "overwrite Person (3 rows), merge Knows (1 row) and 2 more" */
static int default_message(struct txn_op **ops, size_t count, struct buf *out)
{
	enum { SHOWN = 3 };
	for (size_t i = 0; i < count && i < SHOWN; i++) {
		if (i)
			buf_append_string(out, ", ");
		describe_op(ops[i], out);
	}
	if (count > SHOWN)
		buf_printf(out, " and %zu more", count - SHOWN);
	return buf_append(out, "", 1) < 0 ? -ENOMEM : 0;
}

/* The deletes one node writer's detach lines noted. */
static int detach_apply_one(struct store_txn *txn, struct store_writer *node_writer, size_t *locked_writers,
			    struct error_info *error)
{
	struct buf_reader reader;
	buf_reader_init(&reader, node_writer->detached.data, node_writer->detached.size);
	struct schema_row row;
	schema_row_init(&row);
	int rc = 0;
	while (rc == 0 && buf_reader_remaining(&reader) > 0) {
		char table[JOURNAL_NAME_MAX + 1];
		const uint8_t *edge;
		size_t edge_size;
		buf_get_str_into(&reader, table, sizeof table);
		edge_size = buf_get_str(&reader, &edge);
		if (reader.failed) {
			rc = error_info_set(error, -EIO, "the list of edges to detach is damaged");
			break;
		}
		struct store_writer *writer = store_txn_find_writer(txn, table);
		if (!writer) {
			if ((rc = store_txn_writer_create(txn, table, STORE_MERGE, 0, table, &writer, error)) < 0)
				break;
			/* the commit holds every writer's lock (store_txn.c step 1): this one too */
			pthread_mutex_lock(&writer->lock);
			(*locked_writers)++;
		}
		/* the writer's own rows decide (the commit checks what they leave); an edge already
		 * deleted (a self-loop is found from both ends) is deleted once */
		if (writer->mode == STORE_OVERWRITE || table_stage_has(writer->stage, edge, edge_size) != 0 ||
		    table_stage_deletes(writer->stage, edge, edge_size) != 0)
			continue;
		schema_row_free(&row);
		schema_row_init(&row);
		row.is_delete = true;
		if ((rc = buf_append(&row.id, edge, edge_size)) < 0 || (rc = table_stage_add(writer->stage, &row)) < 0) {
			error_info_set(error, rc, "cannot delete edge \"%.*s\" of %s to detach its node: %s",
				       (int)(edge_size > 200 ? 200 : edge_size), (const char *)edge, table, io_strerror(rc));
			break;
		}
		atomic_fetch_add(&writer->lines, 1);
		txn->staged_bytes += edge_size + 20;
		writer->staged_bytes += edge_size + 20;
	}
	schema_row_free(&row);
	if (rc == 0)
		buf_reset(&node_writer->detached);
	return rc;
}

/*
 * At commit, every writer locked (*locked_writers of txn's ops): stages the
 * deletes detach noted into their edge tables' writers (creating and locking
 * merge writers where there are none), except for edges a writer stages a
 * row for. 0 or -errno with error set.
 */
static int detach_apply(struct store_txn *txn, size_t *locked_writers, struct error_info *error)
{
	size_t count = txn->op_count;   /* writers created here have nothing to detach */
	for (size_t i = 0; i < count; i++) {
		struct txn_op *op = txn->ops[i];
		if (op->kind != MANIFEST_WRITE || op->writer->detached.size == 0)
			continue;
		int rc = detach_apply_one(txn, op->writer, locked_writers, error);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int store_txn_commit(struct store_txn *txn, const char *message, struct store_commit_result *result,
		     struct error_info *error)
{
	struct store *store = txn->store;
	struct txn_op **included = NULL;
	struct manifest_op *manifest_ops = NULL;
	size_t locked_writers = 0;
	size_t included_count = 0;
	struct buf summary;
	buf_init(&summary);
	struct merged_table {
		char name[JOURNAL_NAME_MAX + 1];
		uint64_t rows;
	} *merged = NULL;   /* the tables the commit merged rows into: compacted after it */
	size_t merged_count = 0;
	char branch[JOURNAL_NAME_MAX + 1];
	int rc = 0;
	error_info_clear(error);
	pthread_mutex_lock(&txn->lock);
	snprintf(branch, sizeof branch, "%s", txn->branch);

	/* 1. Every writer: not busy, not failed, no partial last line. */
	for (; locked_writers < txn->op_count; locked_writers++) {
		struct txn_op *op = txn->ops[locked_writers];
		if (op->kind != MANIFEST_WRITE)
			continue;
		struct store_writer *writer = op->writer;
		if (pthread_mutex_trylock(&writer->lock) != 0) {
			error_info_locate(error, writer->path, 0);
			rc = error_info_set(error, -EBUSY, "%s is still being written", writer->path);
			goto cleanup;
		}
		if (writer->state == WRITER_FAILED) {
			if (error)
				*error = writer->failure;
			rc = writer->failure.code;
			locked_writers++;
			goto cleanup;
		}
		if (writer->partial.size) {
			error_info_locate(error, writer->path, atomic_load(&writer->lines) + 1);
			rc = error_info_set(error, -EINVAL, "the last line is not a complete JSON object");
			locked_writers++;
			goto cleanup;
		}
	}

	/* 1b. The edges detach deletes take with them, into their tables' writers. */
	if ((rc = detach_apply(txn, &locked_writers, error)) < 0)
		goto cleanup;

	/* 2. What is published: everything but merges of zero lines. */
	included = calloc(txn->op_count ? txn->op_count : 1, sizeof *included);
	manifest_ops = calloc(txn->op_count ? txn->op_count : 1, sizeof *manifest_ops);
	if (!included || !manifest_ops) {
		rc = error_info_set(error, -ENOMEM, "out of memory");
		goto cleanup;
	}
	for (size_t i = 0; i < txn->op_count; i++)
		if (op_counts(txn->ops[i]))
			included[included_count++] = txn->ops[i];
	if (included_count == 0 && !txn->origin.empty_allowed) {
		rc = error_info_set(error, -ENODATA, "nothing staged");
		goto cleanup;
	}

	/* 3. Endpoints deferred at write time, against the snapshot plus every stage. */
	for (size_t i = 0; i < included_count; i++) {
		if (included[i]->kind != MANIFEST_WRITE)
			continue;
		rc = store_edges_pending_check(included[i]->writer, error);
		if (rc < 0)
			goto cleanup;
	}

	/* 4. The request, in the order the caller made the operations. */
	for (size_t i = 0; i < included_count; i++) {
		struct txn_op *op = included[i];
		struct manifest_op *request_op = &manifest_ops[i];
		request_op->kind = op->kind;
		memcpy(request_op->name, op->name, sizeof request_op->name);
		memcpy(request_op->new_name, op->new_name, sizeof request_op->new_name);
		if (op->kind == MANIFEST_SCHEMA)
			request_op->schema = &op->schema;
		request_op->source = op->source;
		request_op->adopt_identity = op->adopt_identity;
		if (op->kind != MANIFEST_WRITE)
			continue;
		struct store_writer *writer = op->writer;
		request_op->stage = writer->stage;
		memcpy(request_op->expected_schema_hash, writer->expected_schema_hash,
		       sizeof request_op->expected_schema_hash);
		request_op->based_on_version = writer->based_on_version;
		request_op->based_on_incarnation = writer->based_on_incarnation;
		request_op->optimize = writer->optimize;
		request_op->based = txn->based_on != 0;
		if (writer->creates) {
			schema_free(&writer->inferred);
			rc = schema_inference_finish(writer->inference, &writer->inferred);
			if (rc < 0) {
				error_info_locate(error, writer->path, 0);
				error_info_set(error, rc, "cannot infer the schema of %s: %s",
					       op->name, io_strerror(rc));
				goto cleanup;
			}
			request_op->schema = &writer->inferred;
			request_op->refines_schema = writer->refines;
		}
	}
	if (!message || !*message) {
		rc = default_message(included, included_count, &summary);
		if (rc < 0) {
			error_info_set(error, rc, "out of memory");
			goto cleanup;
		}
		message = (const char *)summary.data;
	}

	/* 5. Stages durable before the publish takes the store lock. */
	for (size_t i = 0; i < included_count; i++) {
		if (included[i]->kind != MANIFEST_WRITE)
			continue;
		rc = table_stage_seal(included[i]->writer->stage);
		store_writer_enter(included[i]->writer, WRITER_SEALED);
		if (rc < 0) {
			error_info_locate(error, included[i]->writer->path, 0);
			error_info_set(error, rc, "cannot write the staged rows: %s", io_strerror(rc));
			goto cleanup;
		}
	}

	/* 6. Publish. */
	struct manifest_commit_request request = {
		.branch = txn->branch,
		.actor = txn->actor[0] ? txn->actor : store->actor,
		.message = message,
		.op_count = included_count,
		.ops = manifest_ops,
		.intent = NULL,
		.condition = txn->condition,
		.merge_parent = txn->merge_parent,
		.merge_parent_record = txn->merge_parent_record,
		.origin_id = txn->origin.id,
		.time_us = txn->origin.time_us,
		.based_on = txn->based_on,
	};
	if (txn->intent)
		manifest_request_attach_intent(&request, txn->intent);
	struct manifest_commit_result published = { 0 };
	rc = manifest_commit(store->manifest, &request, &published, error);
	if (published.intent_released)
		txn->intent = NULL;   /* its sidecar stays for recovery */
	if (rc < 0) {
		if (error && !error->message[0])
			error_info_set(error, rc, "the commit was refused: %s", io_strerror(rc));
		goto cleanup;
	}

	/* 7. Published: the transaction is empty and pinned to what it published. */
	txn->intent = NULL;   /* completed and cleared by the publish */
	memset(&txn->condition, 0, sizeof txn->condition);   /* it held for this commit */
	memset(&txn->merge_parent, 0, sizeof txn->merge_parent);
	memset(&txn->origin, 0, sizeof txn->origin);
	txn->based_on = 0;
	if (result) {
		result->version = published.version;
		ulid_format(&published.commit, result->commit);
		result->time_us = published.time_us;
	}
	merged = calloc(txn->op_count ? txn->op_count : 1, sizeof *merged);
	for (size_t i = 0; i < txn->op_count; i++) {
		struct txn_op *op = txn->ops[i];
		if (op->kind == MANIFEST_WRITE && op->writer->mode != STORE_OVERWRITE && merged &&
		    atomic_load(&op->writer->lines) > 0) {
			snprintf(merged[merged_count].name, sizeof merged[merged_count].name, "%s", op->name);
			merged[merged_count++].rows = (uint64_t)atomic_load(&op->writer->lines);
		}
		if (op->kind == MANIFEST_WRITE)
			pthread_mutex_unlock(&op->writer->lock);
		txn_op_free(op);
	}
	locked_writers = 0;
	txn->op_count = 0;
	txn->staged_bytes = 0;
	/* If the re-pin fails (out of memory, I/O), the old pin stays and later
	 * commits re-validate against the newest heads anyway. */
	struct store_snapshot *snapshot = NULL;
	if (store_snapshot_open(store, txn->branch, STORE_LATEST, &snapshot, NULL) == 0) {
		store_snapshot_release(txn->snapshot);
		txn->snapshot = snapshot;
	}
	error_info_clear(error);
	rc = 0;
cleanup:
	for (size_t i = 0; i < locked_writers; i++)
		if (txn->ops[i]->kind == MANIFEST_WRITE)
			pthread_mutex_unlock(&txn->ops[i]->writer->lock);
	pthread_mutex_unlock(&txn->lock);
	free(included);
	free(manifest_ops);
	buf_free(&summary);
	/* 8. Committed: the fragments it added, compacted when due (core/store_compact.c) */
	for (size_t i = 0; rc == 0 && i < merged_count; i++)
		store_compact_after_commit(store, branch, merged[i].name, merged[i].rows);
	free(merged);
	return rc;
}

void store_txn_set_condition(struct store_txn *txn, const struct store_condition *condition)
{
	pthread_mutex_lock(&txn->lock);
	store_condition_to_manifest(condition, &txn->condition);
	pthread_mutex_unlock(&txn->lock);
}
