/*
 * store_dump — the whole graph as one NDJSON stream, and back
 * (docs/graphfs.1 `dump`, `load`):
 *
 *   {"schema":"<Name>","data":<canonical schema>}        node tables, then edge tables, by name
 *   {"type":"<Node>","data":<canonical row>}              each node table's rows, in table order
 *   {"edge":"<Edge>","from":…,"to":…,"data":{"id":…,…}}   each edge table's rows, in table order
 *
 * dump writes exactly these lines; load reads them in any order (a schema
 * line before its table's rows), with any JSON spacing and key order, and
 * without schema lines (node schemas are inferred as for any new table; an
 * edge table's node tables are inferred when there is only one node table
 * they can be, its properties from its first row). load is one transaction,
 * each table it names overwritten, published as ONE commit; its endpoint
 * checks are deferred to that commit, so edges may come before their nodes.
 * Both stream: memory stays bounded whatever the size (writers spill; load
 * keeps 4 bytes per edge row, to name the input line of a dangling edge).
 *
 * Invariants:
 *   1. dump → init → load reproduces every table's bytes and schema: rows
 *      keep their order and canonical text, schemas their canonical JSON.
 *   2. load publishes nothing unless every line is accepted.
 */
#include "store_dump_int.h"
#include "store_envelope_int.h"
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

/* ---- dump ------------------------------------------------------------------------------ */

struct dump_tables {
	char (*names)[JOURNAL_NAME_MAX + 1];
	bool *edge;
	size_t count;
	uint64_t bytes;               /* the tables' rendered sizes, for progress */
};

static int collect_table(const struct head_row *head, void *context)
{
	struct dump_tables *tables = context;
	void *names = realloc(tables->names, (tables->count + 1) * sizeof *tables->names);
	if (names)
		tables->names = names;
	bool *edge = names ? realloc(tables->edge, (tables->count + 1) * sizeof *tables->edge) : NULL;
	if (!edge)
		return -ENOMEM;
	tables->edge = edge;
	snprintf(tables->names[tables->count], sizeof tables->names[0], "%s", head->name);
	tables->edge[tables->count++] = head->kind == STORE_EDGE_TABLE;
	tables->bytes += head->byte_size;
	return 0;
}

int store_dump(struct store *store, const char *branch, uint64_t version, int fd, store_progress_fn progress,
	       void *progress_context, struct error_info *error)
{
	struct store_snapshot *snapshot = NULL;
	struct dump_tables tables = { NULL, NULL, 0, 0 };
	struct store_dump_output output = { .fd = fd, .progress = progress, .progress_context = progress_context };
	buf_init(&output.pending);
	int rc = store_snapshot_open(store, branch, version, &snapshot, error);
	if (rc < 0)
		return rc;
	if ((rc = store_snapshot_heads(snapshot, false, collect_table, &tables)) < 0) {
		error_info_set(error, rc, "cannot list the tables: %s", io_strerror(rc));
		goto out;
	}
	output.total = tables.bytes;
	/* schemas: node tables first (heads come in name order), then edge tables */
	for (int pass = 0; rc == 0 && pass < 2; pass++)
		for (size_t i = 0; rc == 0 && i < tables.count; i++)
			if (tables.edge[i] == (pass == 1))
				rc = store_dump_schema(&output, snapshot, tables.names[i], error);
	for (int pass = 0; rc == 0 && pass < 2; pass++)
		for (size_t i = 0; rc == 0 && i < tables.count; i++)
			if (tables.edge[i] == (pass == 1))
				rc = store_dump_rows(&output, snapshot, tables.names[i], tables.edge[i], 0, error);
	if (rc == 0)
		rc = store_dump_flush(&output);
	if (rc < 0 && !error->message[0])
		error_info_set(error, rc, "cannot write the dump: %s", io_strerror(rc));
out:
	free(tables.names);
	free(tables.edge);
	buf_free(&output.pending);
	store_snapshot_release(snapshot);
	return rc;
}

/* ---- load ------------------------------------------------------------------------------ */

struct load_table {
	char name[JOURNAL_NAME_MAX + 1];
	char path[256];               /* the writer's path: FILE#Name, so a commit error names its table */
	bool schema_given;
	bool is_edge;
	struct store_writer *writer;  /* opened by the table's first row */
	uint32_t *lines;              /* edge tables: the input line of each row, for commit-time errors */
	size_t line_count, line_capacity;
};

struct load {
	struct store *store;
	struct store_txn *txn;
	const char *file;
	uint64_t line;
	struct load_table *tables;
	size_t count;
	struct buf row;               /* the row line handed to a writer */
	struct store_envelope envelope;   /* the line being loaded */
	struct error_info *error;
};

static struct load_table *load_find(struct load *load, const char *name)
{
	for (size_t i = 0; i < load->count; i++)
		if (strcmp(load->tables[i].name, name) == 0)
			return &load->tables[i];
	return NULL;
}

static int load_fail(struct load *load, int code, const char *format, ...) __attribute__((format(printf, 3, 4)));

static int load_fail(struct load *load, int code, const char *format, ...)
{
	va_list arguments;
	va_start(arguments, format);
	int rc = store_dump_fail_at(load->error, load->file, load->line, code, format, arguments);
	va_end(arguments);
	return rc;
}

static int load_table_get(struct load *load, const char *name, struct load_table **out)
{
	struct load_table *table = load_find(load, name);
	if (!table) {
		if (!schema_name_is_valid(name, strlen(name)))
			return load_fail(load, -EINVAL, "invalid table name \"%.128s\"", name);
		struct load_table *grown = realloc(load->tables, (load->count + 1) * sizeof *grown);
		if (!grown)
			return load_fail(load, -ENOMEM, "out of memory");
		load->tables = grown;
		table = &grown[load->count++];
		memset(table, 0, sizeof *table);
		snprintf(table->name, sizeof table->name, "%s", name);
		snprintf(table->path, sizeof table->path, "%.200s#%s", load->file, name);
	}
	*out = table;
	return 0;
}

/* A schema line's data (its JSON text) for the table of that name. */
static int load_schema(struct load *load, const char *name, const char *text, size_t size)
{
	struct load_table *table;
	int rc = load_table_get(load, name, &table);
	if (rc < 0)
		return rc;
	if (table->writer)
		return load_fail(load, -EINVAL, "the schema of %s comes after its rows: put schema lines first", name);
	if (table->schema_given)
		return load_fail(load, -EINVAL, "a second schema line for %s", name);
	struct error_info schema_error;
	error_info_clear(&schema_error);
	rc = store_txn_schema(load->txn, name, text, size, &schema_error);
	if (rc < 0)
		return load_fail(load, rc, "schema of %s: %s", name, schema_error.message);
	table->schema_given = true;
	json_t *data = json_loadb(text, size, 0, NULL);
	json_t *kind = json_object_get(data, "kind");
	table->is_edge = json_is_string(kind) && strcmp(json_string_value(kind), "edge") == 0;
	json_decref(data);
	return 0;
}

/* The one node table an edge table without a schema line can join, or "" (none or several). */
struct node_choice {
	char name[JOURNAL_NAME_MAX + 1];
	int count;
};

static void node_choice_add(struct node_choice *choice, const char *name)
{
	if (choice->count == 0 || strcmp(choice->name, name) != 0)
		choice->count++;
	snprintf(choice->name, sizeof choice->name, "%s", name);
}

static int count_node_table(const struct head_row *head, void *context)
{
	if (head->kind == STORE_NODE_TABLE)
		node_choice_add(context, head->name);
	return 0;
}

static const char *inferred_type(json_t *value)
{
	switch (json_typeof(value)) {
	case JSON_STRING: return "string";
	case JSON_INTEGER: return "i64";
	case JSON_REAL: return "f64";
	case JSON_TRUE: case JSON_FALSE: return "bool";
	case JSON_ARRAY: {
		json_t *first = json_array_get(value, 0);
		return !first || json_is_string(first) ? "list<string>" : json_is_integer(first) ? "list<i64>"
		       : json_is_real(first) ? "list<f64>" : json_is_boolean(first) ? "list<bool>" : NULL;
	}
	default: return NULL;
	}
}

/* An edge table without a schema line: its node tables when unambiguous, its properties from
 * this row (its text: {"from":F,"to":T,…}). */
static int infer_edge_schema(struct load *load, struct load_table *table, const char *text, size_t size)
{
	struct head_row existing;
	if (store_snapshot_head(store_txn_snapshot(load->txn), table->name, &existing) == 0)
		return 0;   /* a table of the store: its own schema */
	struct node_choice choice = { "", 0 };
	for (size_t i = 0; i < load->count; i++)
		if (!load->tables[i].is_edge && (load->tables[i].schema_given || load->tables[i].writer))
			node_choice_add(&choice, load->tables[i].name);
	store_snapshot_heads(store_txn_snapshot(load->txn), false, count_node_table, &choice);
	if (choice.count != 1)
		return load_fail(load, -EINVAL,
				 "edge table %s has no schema line and %s: add {\"schema\":\"%s\",\"data\":{\"kind\":"
				 "\"edge\",\"from\":…,\"to\":…,\"properties\":{…}}} before its rows",
				 table->name, choice.count ? "its rows could join several node tables"
							    : "there is no node table for it to join",
				 table->name);
	json_error_t parse_error;
	json_t *data = json_loadb(text, size, 0, &parse_error);
	if (!json_is_object(data)) {
		json_decref(data);
		return load_fail(load, -EINVAL, "%s: %s", table->name, data ? "not a JSON object" : parse_error.text);
	}
	json_t *schema = json_pack("{s:s, s:s, s:s, s:o}", "kind", "edge", "from", choice.name, "to", choice.name,
				   "properties", json_object());
	const char *key;
	json_t *value;
	int rc = schema ? 0 : -ENOMEM;
	json_object_foreach(data, key, value) {
		if (rc < 0 || strcmp(key, "id") == 0 || strcmp(key, "from") == 0 || strcmp(key, "to") == 0)
			continue;
		const char *type = inferred_type(value);
		if (!type) {
			rc = load_fail(load, -EINVAL,
				       "edge table %s has no schema line and property \"%.64s\" of its first row has no "
				       "type to infer: add a schema line for %s", table->name, key, table->name);
			break;
		}
		rc = json_object_set_new(json_object_get(schema, "properties"), key,
					 json_pack("{s:s, s:b}", "type", type, "nullable", 1)) ? -ENOMEM : 0;
	}
	char *schema_text = rc == 0 ? json_dumps(schema, JSON_COMPACT) : NULL;
	if (rc == 0)
		rc = schema_text ? load_schema(load, table->name, schema_text, strlen(schema_text))
				 : load_fail(load, -ENOMEM, "out of memory");
	free(schema_text);
	json_decref(schema);
	json_decref(data);
	if (rc == 0)
		table->schema_given = false;   /* inferred, not given: a later schema line is still "after its rows" */
	return rc;
}

static int table_writer(struct load *load, struct load_table *table)
{
	if (table->writer)
		return 0;
	struct error_info writer_error;
	error_info_clear(&writer_error);
	int rc = store_txn_writer(load->txn, table->name, STORE_OVERWRITE, 0, table->path, &table->writer,
				  &writer_error);
	if (rc < 0)
		return load_fail(load, rc, "%s", writer_error.message);
	return 0;
}

/* Hands one row (JSON text, no "\n") to its table's writer. */
static int load_row(struct load *load, struct load_table *table, const char *text, size_t size)
{
	int rc = table_writer(load, table);
	if (rc < 0)
		return rc;
	if (table->is_edge) {
		if (table->line_count == table->line_capacity) {
			size_t capacity = table->line_capacity ? table->line_capacity * 2 : 1024;
			uint32_t *grown = realloc(table->lines, capacity * sizeof *grown);
			if (!grown)
				return load_fail(load, -ENOMEM, "out of memory");
			table->lines = grown;
			table->line_capacity = capacity;
		}
		table->lines[table->line_count++] = (uint32_t)load->line;
	}
	buf_reset(&load->row);
	if ((rc = buf_append(&load->row, text, size)) < 0 || (rc = buf_append(&load->row, "\n", 1)) < 0)
		return load_fail(load, rc, "out of memory");
	struct error_info row_error;
	error_info_clear(&row_error);
	rc = store_writer_write(table->writer, load->row.data, load->row.size, &row_error);
	if (rc < 0)
		return load_fail(load, rc, "%s: %s", table->name, row_error.message);
	return 0;
}

static int load_line(struct load *load, const char *line, size_t size)
{
	struct store_envelope *envelope = &load->envelope;
	char message[sizeof load->error->message];
	int rc = store_envelope_read(line, size, true, envelope, message, sizeof message);
	if (rc <= 0)
		return rc == 0 ? 0 : rc == -ENOMEM ? load_fail(load, rc, "out of memory") : load_fail(load, rc, "%s", message);
	const char *row = (const char *)envelope->row.data;
	size_t row_size = envelope->row.size;
	if (envelope->kind == STORE_ENVELOPE_SCHEMA)
		return load_schema(load, envelope->table, row, row_size);
	struct load_table *table;
	if ((rc = load_table_get(load, envelope->table, &table)) < 0)
		return rc;
	if (envelope->kind == STORE_ENVELOPE_NODE) {
		if (table->is_edge)
			return load_fail(load, -EINVAL, "%s is an edge table: its rows are {\"edge\":…} lines", table->name);
		return load_row(load, table, row, row_size);
	}
	if (!table->schema_given && !table->writer) {
		table->is_edge = true;
		rc = infer_edge_schema(load, table, row, row_size);
		table->is_edge = true;
		if (rc < 0)
			return rc;
	}
	if (!table->is_edge)
		return load_fail(load, -EINVAL, "%s is a node table: its rows are {\"type\":…} lines", table->name);
	return load_row(load, table, row, row_size);
}

/* A commit-time error (a dangling edge) names the writer's path and line: name the input's. */
static void locate_in_input(struct load *load)
{
	struct error_info *error = load->error;
	for (size_t i = 0; i < load->count; i++) {
		struct load_table *table = &load->tables[i];
		if (strcmp(error->path, table->path) != 0)
			continue;
		uint64_t line = error->line;
		if (table->is_edge && line >= 1 && line <= table->line_count)
			line = table->lines[line - 1];
		error_info_locate(error, load->file, line);
		return;
	}
}

int store_load(struct store *store, const char *branch, const char *file, const char *message,
	       const struct store_condition *condition, store_progress_fn progress, void *progress_context,
	       struct store_load_replay *replay, struct store_commit_result *result, struct error_info *error)
{
	error_info_clear(error);
	bool from_stdin = strcmp(file, "-") == 0;
	FILE *input = from_stdin ? stdin : fopen(file, "r");
	if (!input)
		return error_info_set(error, -errno, "cannot read %s: %s", file, strerror(errno));
	struct load load = { .store = store, .file = from_stdin ? "standard input" : file, .error = error };
	buf_init(&load.row);
	store_envelope_init(&load.envelope);
	uint64_t total = 0, done = 0;
	if (!from_stdin) {
		struct stat status;
		if (fstat(fileno(input), &status) == 0 && S_ISREG(status.st_mode))
			total = (uint64_t)status.st_size;
	}
	int rc = 0;
	char *line = NULL;
	size_t capacity = 0;
	ssize_t length = getline(&line, &capacity, input);
	bool have_line = length >= 0;
	if (have_line && length > 0 && line[length - 1] == '\n')
		length--;
	if (have_line && store_dump_all_header(line, (size_t)length)) {
		/* a dump --all stream: replayed commit by commit (core/store_dump_all.c) */
		if (!replay) {
			rc = error_info_set(error, -EINVAL, "%s is a dump --all stream: load it with graphfs load", load.file);
		} else {
			replay->all = true;
			rc = store_load_all(store, input, load.file, line, (size_t)length, total, progress, progress_context,
					    replay->mapped, replay->mapped_context, &replay->commits, error);
		}
		free(line);
		goto out;
	}
	rc = store_txn_begin(store, branch, &load.txn, error);
	if (rc < 0) {
		free(line);
		goto out;
	}
	store_txn_defer_endpoint_checks(load.txn, true);
	store_txn_set_condition(load.txn, condition);
	while (have_line || (length = getline(&line, &capacity, input)) >= 0) {
		if (!have_line) {
			if (length > 0 && line[length - 1] == '\n')
				length--;
		}
		have_line = false;
		load.line++;
		done += (uint64_t)length + 1;
		if ((rc = load_line(&load, line, (size_t)length)) < 0)
			break;
		if (progress && load.line % 4096 == 0)
			progress(done, total, progress_context);
	}
	free(line);
	if (rc == 0 && ferror(input))
		rc = error_info_set(error, -EIO, "cannot read %s", load.file);
	/* every table named is overwritten: one with a schema line and no rows becomes empty */
	for (size_t i = 0; rc == 0 && i < load.count; i++) {
		struct load_table *table = &load.tables[i];
		if ((rc = table_writer(&load, table)) < 0)
			break;
		struct error_info finish_error;
		error_info_clear(&finish_error);
		if ((rc = store_writer_finish(table->writer, &finish_error)) < 0)
			load_fail(&load, rc, "%s: %s", table->name, finish_error.message);
	}
	if (rc == 0 && load.count == 0)
		rc = error_info_set(error, -ENODATA, "%s holds no dump lines: nothing to load", load.file);
	if (rc == 0) {
		char default_message[300];
		if (!message) {
			snprintf(default_message, sizeof default_message, "load %.200s", load.file);
			message = default_message;
		}
		rc = store_txn_commit(load.txn, message, result, error);
		if (rc < 0)
			locate_in_input(&load);
	}
	if (progress && rc == 0)
		progress(total ? total : done, total, progress_context);
out:
	store_txn_free(load.txn);
	for (size_t i = 0; i < load.count; i++)
		free(load.tables[i].lines);
	free(load.tables);
	buf_free(&load.row);
	store_envelope_free(&load.envelope);
	if (!from_stdin)
		fclose(input);
	return rc;
}
