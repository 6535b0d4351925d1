/*
 * store_edges — what a transaction checks about edges: that every edge
 * staged names nodes that exist (at write time, or deferred to the commit
 * for staging/), and referential integrity for the nodes a write deletes
 * (docs/ARCHITECTURE.md invariant 13), with detach deletes.
 */
#include "store_txn_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Resolves an edge table's node table in the pinned snapshot, with a finder
 * over its key tree (shared with same, the other end, when it names the same
 * table). Returns 0 (out->in_snapshot false if there is no such table) or -errno.
 */
int store_edges_endpoint_open(struct store_txn *txn, const char *name, const struct endpoint_table *same,
			struct endpoint_table *out)
{
	memset(out, 0, sizeof *out);
	snprintf(out->name, sizeof out->name, "%s", name);
	if (same && strcmp(same->name, name) == 0) {
		*out = *same;
		out->shares_finder = true;
		return 0;
	}
	struct head_row head;
	int rc = store_snapshot_head(txn->snapshot, name, &head);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	rc = table_info_read(txn->store->pager, head.table, &out->info);
	if (rc == 0)
		rc = table_finder_open(txn->store->pager, &out->info, ENDPOINT_CACHE, &out->finder);
	if (rc < 0)
		return rc;
	out->in_snapshot = true;
	return 0;
}

/*
 * True if id is a node of the endpoint table as the commit would leave it:
 * a live row of the txn's writer of that table, else (unless that writer
 * deletes it or overwrites the table) a row of the pinned snapshot.
 * Called with txn.lock held. Returns 1, 0, or -errno.
 */
static int endpoint_exists(struct store_txn *txn, struct endpoint_table *table,
			   const void *id, size_t size)
{
	struct store_writer *writer = store_txn_find_writer(txn, table->name);
	if (writer) {
		int held = table_stage_has(writer->stage, id, size);
		if (held != 0)
			return held;
		if (writer->mode == STORE_OVERWRITE)
			return 0;
		int deleted = table_stage_deletes(writer->stage, id, size);
		if (deleted != 0)
			return deleted < 0 ? deleted : 0;
	}
	if (!table->in_snapshot)
		return 0;
	return table_finder_has(table->finder, id, size);
}

int store_edges_endpoint_check(struct store_writer *writer, int end, const void *id, size_t size,
		   uint64_t line, struct error_info *error)
{
	struct endpoint_table *table = &writer->endpoints[end];
	int found = endpoint_exists(writer->txn, table, id, size);
	if (found < 0)
		return store_writer_fail(writer, error, found, line, "cannot look up %s in %s: %s",
				   end == ENDPOINT_FROM ? "from" : "to", table->name, strerror(-found));
	if (!found)
		return store_writer_fail(writer, error, -EINVAL, line,
				   "dangling edge: %s \"%.*s\" is not a row of %s",
				   end == ENDPOINT_FROM ? "from" : "to", (int)(size > 200 ? 200 : size),
				   (const char *)id, table->name);
	return 0;
}

/* Moves the deferred endpoints in memory to the scratch file as one chunk. 0 or -errno (nothing moved). */
static int pending_spill(struct store_writer *writer)
{
	int rc;
	if (!writer->pending_file_open) {
		if ((rc = pager_scratch_open(writer->txn->store->pager, &writer->pending_file)) < 0)
			return rc;
		writer->pending_file_open = true;
	}
	if ((rc = buf_reserve(&writer->pending_chunks, 4)) < 0 ||
	    (rc = io_pwrite(&writer->pending_file, writer->pending.data, writer->pending.size,
			    writer->pending_spilled)) < 0)
		return rc;
	buf_put_u32(&writer->pending_chunks, (uint32_t)writer->pending.size);
	writer->pending_spilled += writer->pending.size;
	buf_reset(&writer->pending);
	return 0;
}

/* Defers the check of one endpoint to the commit. 0 or -errno (nothing deferred). */
int store_edges_pending_add(struct store_writer *writer, int end, uint64_t line, const struct buf *id)
{
	size_t before = writer->pending.size;
	int rc = buf_put_u8(&writer->pending, (uint8_t)end);
	if (rc == 0)
		rc = buf_put_u64(&writer->pending, line);
	if (rc == 0)
		rc = buf_put_bytes(&writer->pending, id->data, (uint32_t)id->size);
	if (rc < 0) {
		writer->pending.size = before;
		return rc;
	}
	/* A failed spill keeps the endpoints in memory: the next add tries again. */
	if (writer->pending.size >= PENDING_MEMORY)
		pending_spill(writer);
	return 0;
}

/* One deferred endpoint, as pending_check_bytes sorts them. */
struct pending_endpoint {
	const uint8_t *id;
	uint32_t size;
	uint8_t end;
	uint64_t line;
};

static int compare_pending_endpoints(const void *a, const void *b)
{
	const struct pending_endpoint *left = a, *right = b;
	if (left->end != right->end)
		return left->end < right->end ? -1 : 1;
	int order = memcmp(left->id, right->id, left->size < right->size ? left->size : right->size);
	if (order != 0)
		return order;
	return left->size < right->size ? -1 : left->size > right->size;
}

/* True if a comes before b in the input: an earlier line, or the same line's "from". */
static bool pending_endpoint_earlier(const struct pending_endpoint *a, const struct pending_endpoint *b)
{
	return a->line < b->line || (a->line == b->line && a->end < b->end);
}

/*
 * Checks the endpoints deferred at write time, of one chunk (bytes). Each
 * distinct id is looked up once, in id order, so that a large node stage
 * in runs reads each of its blocks about once rather than once an endpoint.
 * Reports the dangling endpoint that comes first in the input. Called with
 * txn.lock held. The error is reported but does not make the writer fail:
 * the caller may still stage the missing nodes and commit again.
 */
static int pending_check_bytes(struct store_writer *writer, const uint8_t *bytes, size_t size_in_bytes,
			       struct error_info *error)
{
	struct buf list;                /* struct pending_endpoint each */
	buf_init(&list);
	struct buf_reader reader;
	buf_reader_init(&reader, bytes, size_in_bytes);
	int rc = 0;
	while (buf_reader_remaining(&reader) > 0) {
		struct pending_endpoint endpoint;
		endpoint.end = buf_get_u8(&reader);
		endpoint.line = buf_get_u64(&reader);
		endpoint.size = (uint32_t)buf_get_bytes(&reader, &endpoint.id);
		if (reader.failed || endpoint.end > ENDPOINT_TO) {
			rc = -EIO;
			goto out;
		}
		if (buf_append(&list, &endpoint, sizeof endpoint) < 0) {
			rc = error_info_set(error, -ENOMEM, "out of memory checking the edges of %s", writer->path);
			goto out;
		}
	}
	struct pending_endpoint *endpoints = (struct pending_endpoint *)list.data;
	size_t count = list.size / sizeof *endpoints;
	if (count > 1)
		qsort(endpoints, count, sizeof *endpoints, compare_pending_endpoints);
	const struct pending_endpoint *dangling = NULL;
	for (size_t first = 0, after; first < count; first = after) {
		const struct pending_endpoint *earliest = &endpoints[first];
		for (after = first + 1; after < count && compare_pending_endpoints(&endpoints[first], &endpoints[after]) == 0;
		     after++)
			if (pending_endpoint_earlier(&endpoints[after], earliest))
				earliest = &endpoints[after];
		if (dangling && !pending_endpoint_earlier(earliest, dangling))
			continue;
		int found = endpoint_exists(writer->txn, &writer->endpoints[earliest->end], earliest->id, earliest->size);
		if (found < 0) {
			error_info_locate(error, writer->path, earliest->line);
			rc = error_info_set(error, found, "cannot look up %s in %s: %s",
					    earliest->end == ENDPOINT_FROM ? "from" : "to",
					    writer->endpoints[earliest->end].name, strerror(-found));
			goto out;
		}
		if (!found)
			dangling = earliest;
	}
	if (dangling) {
		error_info_locate(error, writer->path, dangling->line);
		rc = error_info_set(error, -EINVAL, "dangling edge: %s \"%.*s\" is not a row of %s",
				    dangling->end == ENDPOINT_FROM ? "from" : "to",
				    (int)(dangling->size > 200 ? 200 : dangling->size), (const char *)dangling->id,
				    writer->endpoints[dangling->end].name);
	}
out:
	buf_free(&list);
	return rc;
}

/* Checks every deferred endpoint: the spilled chunks in order, then those in memory. Same contract. */
int store_edges_pending_check(struct store_writer *writer, struct error_info *error)
{
	struct buf chunk;
	buf_init(&chunk);
	uint64_t offset = 0;
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < writer->pending_chunks.size / 4; i++) {
		uint32_t size = buf_load_u32(writer->pending_chunks.data + 4 * i);
		buf_reset(&chunk);
		if ((rc = buf_reserve(&chunk, size)) < 0 ||
		    (rc = io_pread(&writer->pending_file, chunk.data, size, offset)) < 0) {
			error_info_set(error, rc, "cannot read back the deferred endpoint checks of %s: %s",
				       writer->path, io_strerror(rc));
			break;
		}
		chunk.size = size;
		offset += size;
		rc = pending_check_bytes(writer, chunk.data, chunk.size, error);
	}
	buf_free(&chunk);
	return rc < 0 ? rc : pending_check_bytes(writer, writer->pending.data, writer->pending.size, error);
}

/* ---- referential integrity and detach -------------------------------------------- */

#define REFERENCE_CACHE (8u << 20) /* bytes of decoded adjacency nodes per referencing edge table */

/* One end of a snapshot edge table that names the writer's node table. */
struct reference_table {
	char name[JOURNAL_NAME_MAX + 1];
	enum table_edge_end end;
	struct table_adjacency *adjacency;
};

struct reference_loading {
	struct store_writer *writer;
	int rc;
};

static int reference_load_one(const struct head_row *head, void *context)
{
	struct reference_loading *loading = context;
	struct store_writer *writer = loading->writer;
	if (head->kind != SCHEMA_EDGE || head->row_count == 0)
		return 0;
	struct store *store = writer->txn->store;
	struct table_info info;
	struct schema schema;
	schema_init(&schema);
	int rc = store_head_schema(store, head, &info, &schema);
	for (int end = TABLE_EDGE_FROM; rc == 0 && end <= TABLE_EDGE_TO; end++) {
		if (strcmp(end == TABLE_EDGE_FROM ? schema.from : schema.to, writer->table) != 0)
			continue;
		struct reference_table *grown =
			realloc(writer->references, (writer->reference_count + 1) * sizeof *grown);
		if (!grown) {
			rc = -ENOMEM;
			break;
		}
		writer->references = grown;
		struct reference_table *reference = &grown[writer->reference_count];
		memset(reference, 0, sizeof *reference);
		snprintf(reference->name, sizeof reference->name, "%s", head->name);
		reference->end = (enum table_edge_end)end;
		if ((rc = table_adjacency_open(store->pager, &info, reference->end, REFERENCE_CACHE,
					       &reference->adjacency)) == 0)
			writer->reference_count++;
	}
	schema_free(&schema);
	loading->rc = rc;
	return rc < 0 ? rc : 0;
}

/* The snapshot's edge tables naming the writer's node table, once per writer. 0 or -errno. */
static int references_load(struct store_writer *writer)
{
	if (writer->references_loaded)
		return 0;
	struct reference_loading loading = { writer, 0 };
	int rc = store_snapshot_heads(writer->txn->snapshot, false, reference_load_one, &loading);
	if (rc == 0)
		rc = loading.rc;
	if (rc < 0) {
		store_edges_references_free(writer);
		return rc;
	}
	writer->references_loaded = true;
	return 0;
}

void store_edges_references_free(struct store_writer *writer)
{
	for (size_t i = 0; i < writer->reference_count; i++)
		table_adjacency_free(writer->references[i].adjacency);
	free(writer->references);
	writer->references = NULL;
	writer->reference_count = 0;
	writer->references_loaded = false;
}

/* Whether the transaction already takes care of edge: it deletes or rewrites it (the commit re-checks). */
static bool edge_handled(struct store_txn *txn, const struct reference_table *reference, const uint8_t *edge,
			 size_t edge_size)
{
	struct store_writer *writer = store_txn_find_writer(txn, reference->name);
	if (!writer)
		return false;
	if (writer->mode == STORE_OVERWRITE)
		return true;
	return table_stage_has(writer->stage, edge, edge_size) != 0 ||
	       table_stage_deletes(writer->stage, edge, edge_size) != 0;
}

/* What store_edges_references_check and store_edges_detach_collect carry through a walk of one reference's edges. */
struct reference_walk {
	struct store_writer *writer;
	const struct reference_table *reference;
	uint64_t line;
	struct error_info *error;
};

/* A snapshot edge of the node being deleted: refused unless the transaction takes care of it. */
static int refuse_unhandled(const uint8_t *edge, size_t edge_size, const uint8_t *other, size_t other_size,
			    void *context)
{
	struct reference_walk *walk = context;
	struct store_writer *writer = walk->writer;
	if (edge_handled(writer->txn, walk->reference, edge, edge_size))
		return 0;
	return store_writer_fail(writer, walk->error, -EINVAL, walk->line,
			   "node \"%.200s\" is still referenced by edge \"%.*s\" of %s (its %s): "
			   "delete the edges first, or delete the node with {\"id\":\"%.200s\",\"@delete\":\"detach\"}",
			   buf_cstr(&writer->row.id), (int)(edge_size > 200 ? 200 : edge_size), (const char *)edge,
			   walk->reference->name, walk->reference->end == TABLE_EDGE_FROM ? "from" : "to",
			   buf_cstr(&writer->row.id));
}

int store_edges_references_check(struct store_writer *writer, uint64_t line, struct error_info *error)
{
	if (io_failpoint_armed("integrity.skip_reference_checks"))
		return 0;
	const struct buf *node = &writer->row.id;
	int rc = references_load(writer);
	if (rc < 0)
		return store_writer_fail(writer, error, rc, line, "cannot read the edge tables that refer to %s: %s",
				   writer->table, io_strerror(rc));
	for (size_t i = 0; i < writer->reference_count; i++) {
		struct reference_walk walk = { writer, &writer->references[i], line, error };
		rc = table_adjacency_each(writer->references[i].adjacency, node->data, node->size, refuse_unhandled,
					  &walk);
		if (rc < 0)
			return writer->state == WRITER_FAILED ? rc
						    : store_writer_fail(writer, error, rc, line, "cannot read the edges of %s: %s",
								  writer->references[i].name, io_strerror(rc));
	}
	return 0;
}

/* A snapshot edge of the node being detached: noted, to be deleted at commit. */
static int note_detached(const uint8_t *edge, size_t edge_size, const uint8_t *other, size_t other_size,
			 void *context)
{
	struct reference_walk *walk = context;
	struct buf *detached = &walk->writer->detached;
	size_t before = detached->size;
	int rc = buf_put_str(detached, walk->reference->name, strlen(walk->reference->name));
	if (rc == 0)
		rc = buf_put_str(detached, (const char *)edge, edge_size);
	if (rc < 0)
		detached->size = before;
	return rc;
}

int store_edges_detach_collect(struct store_writer *writer, uint64_t line, struct error_info *error)
{
	const struct buf *node = &writer->row.id;
	int rc = references_load(writer);
	for (size_t i = 0; rc == 0 && i < writer->reference_count; i++) {
		struct reference_walk walk = { writer, &writer->references[i], line, error };
		rc = table_adjacency_each(writer->references[i].adjacency, node->data, node->size, note_detached, &walk);
	}
	if (rc < 0)
		return store_writer_fail(writer, error, rc, line, "cannot collect the edges of \"%.200s\" to detach: %s",
				   buf_cstr(&writer->row.id), io_strerror(rc));
	return 0;
}
