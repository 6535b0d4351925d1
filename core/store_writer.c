/*
 * store_writer — the lines of one writer: split at "\n" across write(2)
 * calls, each parsed against the table's schema (or fed to its inference),
 * endpoint- and reference-checked, and staged into the writer's table stage;
 * large writes parsed on two threads (store_parse.c). A writer belongs to a
 * transaction (store_txn.c creates, discards and commits it); its states are
 * enum store_writer_state (store_txn_int.h).
 *
 * Invariants:
 *   1. A line is staged whole or not at all; a refused line fails the writer
 *      (WRITER_FAILED) with the line's number and reason, and nothing of the
 *      transaction is published.
 *   2. The writer's lock, then the transaction's, are held for a whole
 *      store_writer_write: the writers of one transaction take turns per call.
 */
#include "store_txn_int.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* Parses, validates and stages one complete line (without "\n"). Writer lock and txn.lock held. */
/* The schema module does not know the table's name and writes "<Name>" in
 * advice such as "add it to schema/<Name>.json"; put the real name there. */
static void name_the_table(char *message, size_t size, const char *table)
{
	char *placeholder = strstr(message, "<Name>");
	if (!placeholder)
		return;
	char rest[sizeof ((struct error_info *)0)->message];
	snprintf(rest, sizeof rest, "%s", placeholder + strlen("<Name>"));
	snprintf(placeholder, size - (size_t)(placeholder - message), "%s%s", table, rest);
}

static int writer_too_long(struct store_writer *writer, struct error_info *error);
static int writer_parse_failed(struct store_writer *writer, uint64_t number, int rc, struct error_info *parse_error,
			       struct error_info *error);

/* Stages row, the parse of line number (size bytes without its "\n"): checks, then the stage. */
static int writer_stage_row(struct store_writer *writer, uint64_t number, struct schema_row *row, size_t size,
			    struct error_info *error)
{
	struct store_txn *txn = writer->txn;
	struct store *store = txn->store;
	uint64_t cost = size + 1;
	int rc = 0;
	if (store->staged_max && txn->staged_bytes + cost > store->staged_max) {
		rc = store_writer_fail(writer, error, -ENOSPC, number,
				 "the transaction would stage more than %llu bytes",
				 (unsigned long long)store->staged_max);
		goto out;
	}
	/* A node's delete: the edges that name it go with it (detach), or must be gone (docs/ARCHITECTURE.md invariant 13). */
	if (!writer->is_edge && row->is_delete) {
		assert(row == &writer->row);   /* the checks read writer->row */
		if (row->is_detach)
			rc = store_edges_detach_collect(writer, number, error);
		else if (!txn->defer_endpoints && !txn->trust_endpoints)
			rc = store_edges_references_check(writer, number, error);
		if (rc < 0)
			goto out;
	}
	if (writer->is_edge && !row->is_delete && !txn->trust_endpoints) {
		for (int end = ENDPOINT_FROM; end <= ENDPOINT_TO; end++) {
			const struct buf *id = end == ENDPOINT_FROM ? &row->from : &row->to;
			if (txn->defer_endpoints) {
				rc = store_edges_pending_add(writer, end, number, id);
				if (rc < 0)
					rc = store_writer_fail(writer, error, rc, number, "out of memory");
			} else {
				rc = store_edges_endpoint_check(writer, end, id->data, id->size, number, error);
			}
			if (rc < 0)
				goto out;
		}
	}
	rc = table_stage_add(writer->stage, row);
	if (rc == -EEXIST) {
		rc = store_writer_fail(writer, error, -EINVAL, number, "duplicate id \"%.200s\"",
				 buf_cstr(&row->id));
		goto out;
	}
	if (rc < 0) {
		rc = store_writer_fail(writer, error, rc, number, "cannot stage the row: %s",
				 io_strerror(rc));
		goto out;
	}
	txn->staged_bytes += cost;
	writer->staged_bytes += cost;
	assert(!store->staged_max || txn->staged_bytes <= store->staged_max); /* invariant 3 */
out:
	return rc;
}

/* The failure of a parse of line number: its message, named for the table. */
static int writer_parse_failed(struct store_writer *writer, uint64_t number, int rc, struct error_info *parse_error,
			       struct error_info *error)
{
	name_the_table(parse_error->message, sizeof parse_error->message, writer->table);
	return store_writer_fail(writer, error, rc, number, "%s",
			   parse_error->message[0] ? parse_error->message : io_strerror(rc));
}

/*
 * A patch line of number (docs/MOUNT.md "Writing": a JSON merge patch of one row): merged into the
 * row's properties in the snapshot the write began on, the result parsed whole into
 * writer->row and staged. The write is then based on that version of the table, so a
 * commit that finds the table moved is refused (-EBUSY) rather than undoing a change made
 * meanwhile to a property the patch did not name. 0 or the writer's failure.
 */
static int writer_patch(struct store_writer *writer, uint64_t number, const char *line, size_t size,
			const struct buf *id_given, struct error_info *error)
{
	struct store *store = writer->txn->store;
	char id[SCHEMA_ID_MAX + 1];
	snprintf(id, sizeof id, "%.*s", (int)id_given->size, (const char *)id_given->data);
	if (!writer->in_snapshot)
		return store_writer_fail(writer, error, -EINVAL, number,
				   "\"@patch\" of \"%.200s\": %s has no rows to change in the version this write began on",
				   id, writer->table);
	int rc;
	if (!writer->patch_base_loaded) {
		struct schema ignored;
		schema_init(&ignored);
		rc = store_head_schema(store, &writer->snapshot_head, &writer->patch_base, &ignored);
		schema_free(&ignored);
		if (rc < 0)
			return store_writer_fail(writer, error, rc, number, "cannot read %s: %s", writer->table,
					   io_strerror(rc));
		writer->patch_base_loaded = true;
		if (!writer->based_on_version) {
			writer->based_on_version = writer->snapshot_head.table_version;
			writer->based_on_incarnation = writer->snapshot_head.incarnation;
		}
	}
	struct buf current;
	buf_init(&current);
	json_t *row = NULL, *patch = NULL;
	char *merged = NULL;
	rc = table_lookup(store->pager, &writer->patch_base, id_given->data, id_given->size, &current);
	if (rc == -ENOENT) {
		rc = store_writer_fail(writer, error, -EINVAL, number,
				 "\"@patch\" of \"%.200s\": no such row in %s (a patch changes a row that exists; write the whole row to add one)",
				 id, writer->table);
		goto out;
	}
	if (rc < 0) {
		rc = store_writer_fail(writer, error, rc, number, "cannot read row \"%.200s\": %s", id, io_strerror(rc));
		goto out;
	}
	row = json_loadb((const char *)current.data, current.size, 0, NULL);
	patch = json_loadb(line, size, 0, NULL);
	if (!json_is_object(row) || !json_is_object(patch)) {
		rc = store_writer_fail(writer, error, -EIO, number, "cannot merge the patch of \"%.200s\"", id);
		goto out;
	}
	const char *key;
	json_t *value;
	json_object_foreach(patch, key, value) {
		if (strcmp(key, "@patch") != 0 && strcmp(key, "id") != 0)
			json_object_set(row, key, value);
	}
	merged = json_dumps(row, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!merged) {
		rc = store_writer_fail(writer, error, -ENOMEM, number, "out of memory");
		goto out;
	}
	struct error_info parse_error;
	error_info_clear(&parse_error);
	rc = schema_row_parse(&writer->schema, merged, strlen(merged), true, &writer->row, &parse_error);
	if (rc < 0) {
		rc = writer_parse_failed(writer, number, rc, &parse_error, error);
		goto out;
	}
	rc = writer_stage_row(writer, number, &writer->row, size, error);
out:
	free(merged);
	json_decref(row);
	json_decref(patch);
	buf_free(&current);
	return rc;
}

static int writer_line(struct store_writer *writer, const char *line, size_t size,
		       struct error_info *error)
{
	/* Only this writer's caller changes lines (writer.lock held): a plain store, no locked add. */
	uint64_t number = atomic_load_explicit(&writer->lines, memory_order_relaxed) + 1;
	atomic_store_explicit(&writer->lines, number, memory_order_relaxed);
	if (size == 0)
		return store_writer_fail(writer, error, -EINVAL, number, "empty line");
	struct error_info parse_error;
	error_info_clear(&parse_error);
	bool allow_delete = writer->mode == STORE_MERGE;
	int rc = writer->creates
			 ? schema_inference_row(writer->inference, line, size, allow_delete,
						&writer->row, &parse_error)
			 : schema_row_parse(&writer->schema, line, size, allow_delete, &writer->row,
					    &parse_error);
	if (rc < 0)
		return writer_parse_failed(writer, number, rc, &parse_error, error);
	if (writer->row.is_patch) {
		struct buf id;
		buf_init(&id);
		rc = buf_append(&id, writer->row.id.data, writer->row.id.size);
		rc = rc < 0 ? store_writer_fail(writer, error, rc, number, "out of memory")
			    : writer_patch(writer, number, line, size, &id, error);
		buf_free(&id);
		return rc;
	}
	return writer_stage_row(writer, number, &writer->row, size, error);
}

/* Complete lines [position, end) one after another on this thread. */
static int writer_lines(struct store_writer *writer, const char *position, const char *end, struct error_info *error)
{
	size_t row_max = writer->txn->store->row_max;
	while (position < end) {
		const char *newline = memchr(position, '\n', (size_t)(end - position));
		size_t piece = (size_t)(newline - position);
		if (piece > row_max)
			return writer_too_long(writer, error);
		int rc = writer_line(writer, position, piece, error);
		if (rc < 0)
			return rc;
		position = newline + 1;
	}
	return 0;
}

/*
 * Complete lines [position, end) of a table with a declared schema, the
 * second half parsed by the writer's parse helper meanwhile (store_parse.c),
 * then staged in order: the same rows, line numbers and first error as
 * writer_lines.
 */
static int writer_lines_in_parallel(struct store_writer *writer, const char *position, const char *end,
				    struct error_info *error)
{
	const char *middle = memchr(position + (end - position) / 2, '\n', (size_t)(end - position) / 2);
	if (!middle || middle + 1 >= end)
		return writer_lines(writer, position, end, error);
	middle++;
	store_parse_helper_start(writer->parse_helper, &writer->schema, writer->mode == STORE_MERGE, middle,
			   (size_t)(end - middle), writer->txn->store->row_max);
	int rc = writer_lines(writer, position, middle, error);
	size_t count;
	const struct parse_result *results = store_parse_helper_finish(writer->parse_helper, &count);
	if (rc < 0)
		return rc;
	const char *next = middle;
	for (size_t i = 0; i < count; i++) {
		struct parse_result *result = (struct parse_result *)&results[i];
		if (result->rc == -EFBIG)
			return writer_too_long(writer, error);
		uint64_t number = atomic_load_explicit(&writer->lines, memory_order_relaxed) + 1;
		atomic_store_explicit(&writer->lines, number, memory_order_relaxed);
		if (result->rc == -ENODATA)
			return store_writer_fail(writer, error, -EINVAL, number, "empty line");
		if (result->rc < 0)
			return writer_parse_failed(writer, number, result->rc, &result->error, error);
		struct schema_row *row = &result->row;
		if (row->is_patch) {
			if ((rc = writer_patch(writer, number, result->line, result->size, &row->id, error)) < 0)
				return rc;
			next = result->line + result->size + 1;
			continue;
		}
		if (row->is_delete && !writer->is_edge) {
			/* a node's delete is checked against writer->row (references, detach) */
			struct schema_row swapped = writer->row;
			writer->row = result->row;
			result->row = swapped;
			row = &writer->row;
		}
		if ((rc = writer_stage_row(writer, number, row, result->size, error)) < 0)
			return rc;
		next = result->line + result->size + 1;
	}
	/* the helper ran out of memory before the end: the rest here */
	return writer_lines(writer, next, end, error);
}

static bool only_blanks(const char *bytes, size_t size)
{
	for (size_t i = 0; i < size; i++)
		if (bytes[i] != ' ' && bytes[i] != '\t' && bytes[i] != '\r')
			return false;
	return true;
}

/*
 * The input ends inside a line (writer.partial). A line that cannot become a
 * row (it does not start with "{") is refused now; one that is already a
 * complete JSON object is a line without its "\n" (printf '{"id":"x"}'),
 * validated and staged now; anything else waits for more bytes. Writer lock
 * and txn.lock held. 0 or the line's error.
 */
static int writer_open_line(struct store_writer *writer, struct error_info *error)
{
	const char *line = (const char *)writer->partial.data;
	size_t size = writer->partial.size;
	size_t first = 0;
	while (first < size && (line[first] == ' ' || line[first] == '\t'))
		first++;
	if (first == size)
		return 0;
	if (line[first] != '{')
		goto now;
	size_t last = size;
	while (last > first && (line[last - 1] == ' ' || line[last - 1] == '\t' || line[last - 1] == '\r'))
		last--;
	if (line[last - 1] != '}')
		return 0;
	json_error_t parse_error;
	json_t *value = json_loadb(line, size, 0, &parse_error);
	if (!value)
		return 0;   /* a "}" inside the object: more is coming */
	json_decref(value);
now:;
	int rc = writer_line(writer, line, size, error);
	buf_reset(&writer->partial);
	if (rc == 0)
		writer->partial_staged = true;
	return rc;
}

static int writer_too_long(struct store_writer *writer, struct error_info *error)
{
	return store_writer_fail(writer, error, -EFBIG, atomic_load(&writer->lines) + 1,
			   "line is longer than the limit of %zu bytes", writer->txn->store->row_max);
}

int store_writer_write(struct store_writer *writer, const void *bytes, size_t size,
		       struct error_info *error)
{
	int rc = 0;
	pthread_mutex_lock(&writer->lock);
	/*
	 * The transaction's lock is held for the whole call rather than taken per
	 * line: the writers of one transaction take turns per write(2), and a
	 * line costs no locked instruction (each is a full barrier that waits for
	 * the stage's stores of the line before).
	 */
	pthread_mutex_lock(&writer->txn->lock);
	if (writer->state == WRITER_FAILED) {
		if (error)
			*error = writer->failure;
		rc = writer->failure.code;
		goto out;
	}
	if (writer->state != WRITER_WRITING) {
		error_info_locate(error, writer->path, 0);
		rc = error_info_set(error, -EINVAL,
				    writer->state == WRITER_SEALED ? "the rows were sealed by a refused commit: discard the writer and write them again"
						   : "the input was already finished");
		goto out;
	}
	size_t row_max = writer->txn->store->row_max;
	const char *position = bytes;
	const char *end = position + size;
	while (position < end) {
		/* Many complete lines into a table with a declared schema: two threads parse them. */
		if (!writer->partial.size && !writer->partial_staged && !writer->creates &&
		    (size_t)(end - position) >= STORE_PARSE_PARALLEL_MIN) {
			const char *last = memrchr(position, '\n', (size_t)(end - position));
			if (last && (size_t)(last + 1 - position) >= STORE_PARSE_PARALLEL_MIN &&
			    (writer->parse_helper || store_parse_helper_open(&writer->parse_helper) == 0)) {
				rc = writer_lines_in_parallel(writer, position, last + 1, error);
				if (rc < 0)
					goto out;
				position = last + 1;
				continue;
			}
		}
		const char *newline = memchr(position, '\n', (size_t)(end - position));
		size_t piece = (size_t)((newline ? newline : end) - position);
		if (writer->partial_staged) {
			/* The line was staged when its JSON closed: only blanks may follow. */
			if (!only_blanks(position, piece)) {
				rc = store_writer_fail(writer, error, -EINVAL, atomic_load(&writer->lines),
						 "text after the end of the row's JSON object on the same line");
				goto out;
			}
			if (!newline)
				goto out;
			writer->partial_staged = false;
			position = newline + 1;
			continue;
		}
		if (writer->partial.size + piece > row_max) {
			rc = writer_too_long(writer, error);
			goto out;
		}
		assert(writer->partial.size + piece <= row_max); /* invariant 2 */
		if (!newline) {
			rc = buf_append(&writer->partial, position, piece);
			if (rc < 0)
				rc = store_writer_fail(writer, error, rc, atomic_load(&writer->lines) + 1,
						 "out of memory");
			else
				rc = writer_open_line(writer, error);
			goto out;
		}
		if (writer->partial.size) {
			rc = buf_append(&writer->partial, position, piece);
			if (rc < 0) {
				rc = store_writer_fail(writer, error, rc, atomic_load(&writer->lines) + 1,
						 "out of memory");
				goto out;
			}
			rc = writer_line(writer, (const char *)writer->partial.data,
					 writer->partial.size, error);
			buf_reset(&writer->partial);
		} else {
			rc = writer_line(writer, position, piece, error);
		}
		if (rc < 0)
			goto out;
		position = newline + 1;
	}
out:
	pthread_mutex_unlock(&writer->txn->lock);
	pthread_mutex_unlock(&writer->lock);
	return rc;
}

int store_writer_finish(struct store_writer *writer, struct error_info *error)
{
	int rc = 0;
	pthread_mutex_lock(&writer->lock);
	if (writer->state == WRITER_FAILED) {
		if (error)
			*error = writer->failure;
		rc = writer->failure.code;
	} else if (writer->partial.size) {
		rc = store_writer_fail(writer, error, -EINVAL, atomic_load(&writer->lines) + 1,
				 "the last line is not a complete JSON object");
	} else if (writer->state == WRITER_WRITING) {
		store_writer_enter(writer, WRITER_FINISHED);
	}
	pthread_mutex_unlock(&writer->lock);
	return rc;
}

uint64_t store_writer_lines(const struct store_writer *writer)
{
	return atomic_load(&writer->lines);
}
