/*
 * manifest_fixture.h — helpers shared by test_manifest.c and test_recovery.c:
 * a store in the test's temporary directory and commits made through the
 * table module's stage API.
 */
#ifndef GRAPHFS_TEST_MANIFEST_FIXTURE_H
#define GRAPHFS_TEST_MANIFEST_FIXTURE_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "manifest.h"
#include "schema.h"
#include "table.h"

#define NODE_SCHEMA "{\"kind\":\"node\",\"properties\":{\"v\":{\"type\":\"i64\",\"nullable\":true}}}"

static inline const char *fixture_store_path(void)
{
	static char path[4200];
	snprintf(path, sizeof path, "%s/store", harness_temp_directory());
	return path;
}

static inline int fixture_schema(const char *json, struct schema *out)
{
	schema_init(out);
	struct error_info error;
	error_info_clear(&error);
	int rc = schema_parse(json, strlen(json), out, &error);
	if (rc < 0)
		fprintf(stderr, "    schema: %s\n", error.message);
	return rc;
}

/*
 * Stages lines (rows of the node schema above, or of schema_json) into a
 * sealed stage. intent non-NULL: large stages spill to segments it announces.
 */
static inline int fixture_stage(struct manifest *manifest, const struct schema *schema,
				enum table_write_mode mode, const char *const *lines, size_t count,
				struct manifest_intent *intent, struct table_stage **out)
{
	struct table_stage *stage;
	int rc = table_stage_open(manifest_pager(manifest), mode, CODEC_ZSTD,
				  intent ? manifest_intent_new_segment : NULL, intent, &stage);
	if (rc == 0 && schema->kind == SCHEMA_EDGE)
		rc = table_stage_track_edges(stage);
	if (rc < 0) {
		table_stage_free(stage);
		return rc;
	}
	struct schema_row row;
	schema_row_init(&row);
	struct error_info error;
	for (size_t i = 0; i < count && rc == 0; i++) {
		error_info_clear(&error);
		rc = schema_row_parse(schema, lines[i], strlen(lines[i]), mode == TABLE_MERGE, &row, &error);
		if (rc == 0)
			rc = table_stage_add(stage, &row);
		else
			fprintf(stderr, "    row %zu: %s\n", i, error.message);
	}
	schema_row_free(&row);
	if (rc == 0)
		rc = table_stage_seal(stage);
	if (rc < 0) {
		table_stage_free(stage);
		return rc;
	}
	*out = stage;
	return 0;
}

/* One WRITE commit of lines into table on branch (created with the node schema if missing). */
static inline int fixture_write(struct manifest *manifest, const char *branch, const char *table,
				enum table_write_mode mode, const char *const *lines, size_t count,
				struct manifest_commit_result *result, struct error_info *error)
{
	struct schema schema;
	int rc = fixture_schema(NODE_SCHEMA, &schema);
	if (rc < 0)
		return rc;
	struct table_stage *stage;
	rc = fixture_stage(manifest, &schema, mode, lines, count, NULL, &stage);
	if (rc < 0) {
		schema_free(&schema);
		return rc;
	}
	struct manifest_op op;
	memset(&op, 0, sizeof op);
	op.kind = MANIFEST_WRITE;
	snprintf(op.name, sizeof op.name, "%s", table);
	op.stage = stage;
	op.schema = &schema;
	struct manifest_commit_request request = {
		.branch = branch, .actor = "test", .message = "write", .op_count = 1, .ops = &op,
	};
	struct manifest_commit_result ignored;
	rc = manifest_commit(manifest, &request, result ? result : &ignored, error);
	table_stage_free(stage);
	schema_free(&schema);
	return rc;
}

/* One row {"id":id,"v":value} merged into table. */
static inline int fixture_merge_one(struct manifest *manifest, const char *branch, const char *table,
				    const char *id, long value)
{
	char line[256];
	snprintf(line, sizeof line, "{\"id\":\"%s\",\"v\":%ld}", id, value);
	const char *lines[] = { line };
	return fixture_write(manifest, branch, table, TABLE_MERGE, lines, 1, NULL, NULL);
}

/* A commit of one non-WRITE operation. */
static inline int fixture_op(struct manifest *manifest, const char *branch, enum manifest_op_kind kind,
			     const char *name, const char *new_name, const struct schema *schema,
			     struct error_info *error)
{
	struct manifest_op op;
	memset(&op, 0, sizeof op);
	op.kind = kind;
	snprintf(op.name, sizeof op.name, "%s", name);
	if (new_name)
		snprintf(op.new_name, sizeof op.new_name, "%s", new_name);
	op.schema = schema;
	struct manifest_commit_request request = {
		.branch = branch, .actor = "test", .message = "op", .op_count = 1, .ops = &op,
	};
	struct manifest_commit_result result;
	return manifest_commit(manifest, &request, &result, error);
}

static inline int fixture_open(struct manifest **out)
{
	struct error_info error;
	error_info_clear(&error);
	int rc = manifest_open(fixture_store_path(), 0, out, &error);
	if (rc < 0)
		fprintf(stderr, "    open: %s\n", error.message);
	return rc;
}

static inline int fixture_create_open(struct manifest **out)
{
	struct error_info error;
	error_info_clear(&error);
	int rc = manifest_create(fixture_store_path(), &error);
	if (rc < 0) {
		fprintf(stderr, "    create: %s\n", error.message);
		return rc;
	}
	return fixture_open(out);
}

struct fixture_heads {
	size_t count;
	struct head_row heads[256];
};

static inline int fixture_collect_head(const struct head_row *head, void *context)
{
	struct fixture_heads *list = context;
	if (list->count < 256)
		list->heads[list->count++] = *head;
	return 0;
}

/* The versions and times of the commit records a log walk visits, newest first. */
struct fixture_versions {
	size_t count;
	uint64_t versions[256];
	uint64_t times[256];
};

static inline int fixture_collect_version(const struct commit_record *record, void *context)
{
	struct fixture_versions *list = context;
	if (list->count < 256) {
		list->versions[list->count] = record->version;
		list->times[list->count++] = record->time_us;
	}
	return 0;
}

/* Live (or tombstoned) heads of branch as of version (UINT64_MAX: latest). */
static inline int fixture_heads(struct manifest *manifest, const char *branch, uint64_t version,
				bool tombstoned, struct fixture_heads *out)
{
	struct manifest_snapshot snapshot;
	out->count = 0;
	int rc = version == UINT64_MAX ? manifest_snapshot_latest(manifest, branch, &snapshot)
				       : manifest_snapshot_at(manifest, branch, version, &snapshot);
	if (rc == 0)
		rc = manifest_heads_each(manifest, &snapshot, tombstoned, fixture_collect_head, out);
	return rc;
}

static inline uint64_t fixture_version(struct manifest *manifest)
{
	struct root_record root;
	if (manifest_refresh(manifest, NULL) < 0 || manifest_latest(manifest, &root) < 0)
		return UINT64_MAX;
	return root.version;
}

/* Reads a whole file into memory (NULL on error). */
static inline unsigned char *fixture_read_file(const char *path, size_t *size)
{
	FILE *file = fopen(path, "rb");
	if (!file)
		return NULL;
	fseek(file, 0, SEEK_END);
	long length = ftell(file);
	fseek(file, 0, SEEK_SET);
	unsigned char *bytes = malloc(length > 0 ? (size_t)length : 1);
	if (bytes && fread(bytes, 1, (size_t)length, file) != (size_t)length) {
		free(bytes);
		bytes = NULL;
	}
	fclose(file);
	*size = (size_t)length;
	return bytes;
}

static inline void fixture_print_finding(const char *finding, void *context)
{
	int *quiet = context;
	if (!quiet || !*quiet)
		fprintf(stderr, "    finding: %s\n", finding);
}

#define BIG_SCHEMA                                                                              \
	"{\"kind\":\"node\",\"properties\":{\"v\":{\"type\":\"i64\",\"nullable\":true},"        \
	"\"s\":{\"type\":\"string\",\"nullable\":true}}}"
#define BIG_ROWS 50000 /* about 5 MB of lines: more than TABLE_INLINE_LIMIT, so it spills */

/*
 * A commit that overwrites table with BIG_ROWS rows staged through an intent
 * (the stage spills to segments announced by the intent's sidecar).
 */
#define BIG_EDGE_SCHEMA                                                                         \
	"{\"kind\":\"edge\",\"from\":\"Small\",\"to\":\"Small\",\"properties\":{\"v\":{\"type\":\"i64\","  \
	"\"nullable\":true},\"s\":{\"type\":\"string\",\"nullable\":true}}}"

/* fixture_write_big with schema_text; edges (BIG_EDGE_SCHEMA) all go from and to node "first". */
static inline int fixture_write_big_schema(struct manifest *manifest, const char *table, const char *schema_text,
					   int seed, struct manifest_commit_result *result, struct error_info *error)
{
	struct schema schema;
	int rc = fixture_schema(schema_text, &schema);
	if (rc < 0)
		return rc;
	char **lines = calloc(BIG_ROWS, sizeof *lines);
	char *text = malloc((size_t)BIG_ROWS * 128);
	struct manifest_intent *intent = NULL;
	struct table_stage *stage = NULL;
	if (!lines || !text) {
		rc = -ENOMEM;
		goto out;
	}
	for (int i = 0; i < BIG_ROWS; i++) {
		lines[i] = text + (size_t)i * 128;
		bool edge = schema.kind == SCHEMA_EDGE;
		snprintf(lines[i], 128, "{\"id\":\"r%06d\",%s\"v\":%d,\"s\":\"%08x-%s-%06d\"}", i,
			 edge ? "\"from\":\"first\",\"to\":\"first\"," : "", i + seed,
			 (unsigned)(i * 2654435761u + (unsigned)seed),
			 edge ? "padding-padding-padding-padding" : "padding-padding-padding-padding-padding-padding", i);
	}
	if ((rc = manifest_intent_begin(manifest, &intent)) < 0 ||
	    (rc = fixture_stage(manifest, &schema, TABLE_OVERWRITE, (const char *const *)lines, BIG_ROWS,
				intent, &stage)) < 0)
		goto out;
	struct manifest_op op;
	memset(&op, 0, sizeof op);
	op.kind = MANIFEST_WRITE;
	snprintf(op.name, sizeof op.name, "%s", table);
	op.stage = stage;
	op.schema = &schema;
	struct manifest_commit_request request = {
		.branch = "main", .actor = "test", .message = "big", .op_count = 1, .ops = &op,
	};
	manifest_request_attach_intent(&request, intent);
	struct manifest_commit_result ignored = { 0 };
	if (result)
		*result = ignored;
	rc = manifest_commit(manifest, &request, result ? result : &ignored, error);
	if (rc == 0 || (result ? result : &ignored)->intent_released)
		intent = NULL; /* consumed by the publish (or kept for recovery) */
out:
	table_stage_free(stage);
	if (intent)
		manifest_intent_abandon(intent);
	free(text);
	free(lines);
	schema_free(&schema);
	return rc;
}

static inline int fixture_write_big(struct manifest *manifest, const char *table, int seed,
				    struct manifest_commit_result *result, struct error_info *error)
{
	return fixture_write_big_schema(manifest, table, BIG_SCHEMA, seed, result, error);
}

/* Reads all bytes of a live table into out. */
static inline int fixture_table_bytes(struct manifest *manifest, const struct manifest_snapshot *snapshot,
				      const char *name, struct buf *out)
{
	struct head_row head;
	struct table_info info;
	struct table_reader *reader;
	int rc = manifest_head_find(manifest, snapshot, name, &head);
	if (rc == 0)
		rc = table_info_read(manifest_pager(manifest), head.table, &info);
	if (rc == 0)
		rc = table_reader_open(manifest_pager(manifest), &info, &reader);
	if (rc < 0)
		return rc;
	uint64_t size = table_reader_size(reader);
	rc = buf_reserve(out, (size_t)size);
	uint64_t done = 0;
	while (rc == 0 && done < size) {
		ssize_t got = table_reader_pread(reader, out->data + out->size, (size_t)(size - done), done);
		if (got < 0)
			rc = (int)got;
		else if (got == 0)
			rc = -EIO;
		else {
			out->size += (size_t)got;
			done += (uint64_t)got;
		}
	}
	table_reader_free(reader);
	return rc;
}

/* Names of the files in a store subdirectory, sorted, one per line. */
static inline void fixture_list(const char *subdirectory, struct buf *out)
{
	char command[4400];
	snprintf(command, sizeof command, "ls '%s/%s' 2>/dev/null", fixture_store_path(), subdirectory);
	FILE *pipe = popen(command, "r");
	char line[512];
	while (pipe && fgets(line, sizeof line, pipe))
		buf_append_string(out, line);
	if (pipe)
		pclose(pipe);
}

#endif
