/*
 * store_dump_all — every retained commit of a store as one NDJSON stream, and
 * its replay into a new store: `graphfs dump --all` and `graphfs load` of such
 * a stream, the upgrade path that keeps history (docs/FORMAT.md §24 is the
 * stream).
 *
 *   {"graphfs":"dump","format":1,"all":true}
 *   per retained commit, in version order (a parent always comes before its child):
 *     {"commit":ID,"version":V,"branch":B,"parents":[ID…],"time":T,"time_us":µs,"actor":A,"message":M}
 *       ("full":true when its first parent's state is not in the stream: changes from nothing;
 *        "based_on":V when a based write made it: the version its writer read)
 *     {"drop":T}  {"rename":T,"to":U}  {"schema":T,"data":SCHEMA}  {"overwrite":T}
 *     {"delete":T,"id":ID}  and row envelopes, as `dump` writes them
 *   {"branch":B,"head":ID}                            every live branch
 *   {"tag":N,"commit":ID,"version":V,"branch":B,"time_us":µs,"actor":A,"message":M}
 *   {"end":true,"commits":N}
 *
 * A commit's lines say how its state differs from its first parent's. A table's
 * rows either follow "overwrite" (they replace the table) or merge into it: the
 * ids it lost, then the rows its commit appended, in their order. Which one is
 * read off the table version (table_appended): a version that is its parent's
 * surviving rows followed by appended ones is replayed as that merge, any other
 * as an overwrite — so the replay renders every table byte for byte as the
 * original did, also where a merge moved unchanged rows to the end.
 *
 * Invariants:
 *   1. Stream order is replay order: every commit's parents and every branch's
 *      head precede the lines that name them; a commit's drops precede its
 *      renames, which precede its schemas, which precede its rows.
 *   2. dump --all → init → load → dump --all gives the same stream when no version
 *      was reclaimed: same commit ids (an id carries its version: a store whose early
 *      versions were reclaimed loads with new version digits, and load reports each
 *      id it changed), times, actors, messages, bases, parents, tags and table bytes.
 *   3. load replays only into a store without commits, one commit per commit
 *      line, and refuses a stream without its end line (nothing after the last
 *      complete commit is lost: load again into a new store).
 */
#include "store_dump_int.h"
#include "store_envelope_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#define DUMP_ALL_FORMAT 1

/* ---- dump ------------------------------------------------------------------------------ */

struct dump_all {
	struct store *store;
	struct store_dump_output output;
	struct error_info *error;
	uint64_t horizon;
	uint64_t commits;
};

/* Writes one JSON object as a line and drops it. */
static int emit_object(struct dump_all *dump, json_t *object)
{
	char *text = object ? json_dumps(object, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(object);
	if (!text)
		return dump->output.rc = -ENOMEM;
	store_dump_text(&dump->output, text);
	free(text);
	return store_dump_text(&dump->output, "\n");
}

/* {"<key>":"<table>"…: table names need no escaping (schema_name_is_valid). */
static int emit_named(struct dump_all *dump, const char *key, const char *table, const char *rest)
{
	store_dump_text(&dump->output, "{\"");
	store_dump_text(&dump->output, key);
	store_dump_text(&dump->output, "\":\"");
	store_dump_text(&dump->output, table);
	store_dump_text(&dump->output, "\"");
	return store_dump_text(&dump->output, rest);
}

/*
 * An edge table's schema in a commit that renamed node tables: the rename itself rewrites
 * the edge schemas that name the node table (a replay stages the rename first, and the
 * schema is checked as the table stands before the commit), so the schema line names the
 * node tables by their names before the commit, and is left out when that is all that
 * changed. renames: [[from, to], …].
 */
static int emit_edge_schema(struct dump_all *dump, struct store_snapshot *before, struct store_snapshot *after,
			    const struct head_row *old, const char *table, json_t *renames)
{
	if (json_array_size(renames) == 0)
		return store_dump_schema(&dump->output, after, table, dump->error);
	struct buf text;
	buf_init(&text);
	json_t *schema = NULL, *previous = NULL;
	int rc = store_snapshot_schema(after, table, &text);
	if (rc == 0 && !(schema = json_loadb((const char *)text.data, text.size, 0, NULL)))
		rc = -EIO;
	for (size_t i = 0; rc == 0 && i < json_array_size(renames); i++) {
		json_t *rename = json_array_get(renames, i);
		const char *to = json_string_value(json_array_get(rename, 1));
		for (int end = 0; end < 2; end++) {
			const char *key = end ? "to" : "from";
			if (strcmp(json_string_value(json_object_get(schema, key)) ?: "", to) == 0)
				json_object_set(schema, key, json_array_get(rename, 0));
		}
	}
	if (rc == 0 && old) {
		buf_reset(&text);
		if ((rc = store_snapshot_schema(before, old->name, &text)) == 0 &&
		    !(previous = json_loadb((const char *)text.data, text.size, 0, NULL)))
			rc = -EIO;
	}
	if (rc == 0 && !(previous && json_equal(previous, schema))) {
		char *line = json_dumps(schema, JSON_COMPACT | JSON_PRESERVE_ORDER);
		emit_named(dump, "schema", table, ",\"data\":");
		rc = line ? store_dump_text(&dump->output, line) : -ENOMEM;
		free(line);
		if (rc == 0)
			rc = store_dump_text(&dump->output, "}\n");
	}
	if (rc < 0 && !dump->error->message[0])
		error_info_set(dump->error, rc, "cannot read the schema of %s: %s", table, io_strerror(rc));
	json_decref(schema);
	json_decref(previous);
	buf_free(&text);
	return rc;
}

struct delete_visit {
	struct dump_all *dump;
	const char *table;
};

/* A row of the parent's version that the commit's version lacks: {"delete":T,"id":ID}. */
static int emit_delete(const uint8_t *id, size_t id_size, const uint8_t *a_row, size_t a_size, const uint8_t *b_row,
		       size_t b_size, void *context)
{
	(void)id, (void)id_size, (void)b_size;
	struct delete_visit *visit = context;
	if (b_row)
		return 0;
	static const char id_key[] = "{\"id\":";
	size_t end = a_size > sizeof id_key ? store_envelope_string_end((const char *)a_row, a_size, sizeof id_key - 1) : 0;
	if (!end)
		return -EIO;
	emit_named(visit->dump, "delete", visit->table, ",\"id\":");
	store_dump_add(&visit->dump->output, a_row + sizeof id_key - 1, end - (sizeof id_key - 1));
	return store_dump_text(&visit->dump->output, "}\n");
}

/* One table of the commit's state that differs from the parent's version before (NULL: none). */
static int emit_table_rows(struct dump_all *dump, struct store_snapshot *after, const struct head_row *before,
			   const struct head_row *head)
{
	struct store *store = dump->store;
	bool edge = head->kind == STORE_EDGE_TABLE;
	uint64_t tail = 0;
	int appended = 0, rc = 0;
	struct table_info a, b;
	if (before && ulid_compare(&before->incarnation, &head->incarnation) == 0) {
		if ((rc = table_info_read(store->pager, before->table, &a)) < 0 ||
		    (rc = table_info_read(store->pager, head->table, &b)) < 0 ||
		    (appended = rc = table_appended(store->pager, &a, &b, &tail)) < 0)
			return error_info_set(dump->error, rc, "cannot read table %s: %s", head->name, io_strerror(rc));
	}
	if (appended && tail > 0) {
		struct delete_visit visit = { dump, head->name };
		if ((rc = table_diff(store->pager, &a, &b, emit_delete, &visit)) < 0)
			return error_info_set(dump->error, rc, "cannot compare two versions of %s: %s", head->name,
					      io_strerror(rc));
	} else {
		tail = 0;
		emit_named(dump, "overwrite", head->name, "}\n");
	}
	return store_dump_rows(&dump->output, after, head->name, edge, tail, dump->error);
}

/* The lines of one commit: its record, then how its state differs from before's (NULL: from nothing). */
static int emit_changes(struct dump_all *dump, struct store_snapshot *before, struct store_snapshot *after)
{
	struct store_head_list was = { 0 }, is = { 0 };
	json_t *renames = json_array();
	int rc = renames ? store_heads_collect(after, &is) : -ENOMEM;
	if (rc == 0 && before)
		rc = store_heads_collect(before, &was);
	if (rc < 0) {
		error_info_set(dump->error, rc, "cannot list the tables: %s", io_strerror(rc));
		goto out;
	}
	for (size_t i = 0; i < was.count; i++)
		if (!store_head_list_find(&is, &was.heads[i].stable_id))
			emit_named(dump, "drop", was.heads[i].name, "}\n");
	for (size_t i = 0; i < is.count; i++) {
		const struct head_row *old = store_head_list_find(&was, &is.heads[i].stable_id);
		if (old && strcmp(old->name, is.heads[i].name) != 0) {
			emit_named(dump, "rename", old->name, ",\"to\":\"");
			store_dump_text(&dump->output, is.heads[i].name);
			store_dump_text(&dump->output, "\"}\n");
			json_array_append_new(renames, json_pack("[s, s]", old->name, is.heads[i].name));
		}
	}
	/* schemas: node tables first (an edge table's schema names its node tables) */
	for (int pass = 0; rc == 0 && pass < 2; pass++)
		for (size_t i = 0; rc == 0 && i < is.count; i++) {
			const struct head_row *head = &is.heads[i];
			const struct head_row *old = store_head_list_find(&was, &head->stable_id);
			if ((head->kind == STORE_EDGE_TABLE) != (pass == 1) ||
			    (old && strcmp(old->schema_hash, head->schema_hash) == 0))
				continue;
			rc = pass == 1 ? emit_edge_schema(dump, before, after, old, head->name, renames)
				       : store_dump_schema(&dump->output, after, head->name, dump->error);
		}
	for (int pass = 0; rc == 0 && pass < 2; pass++)
		for (size_t i = 0; rc == 0 && i < is.count; i++) {
			const struct head_row *head = &is.heads[i];
			const struct head_row *old = store_head_list_find(&was, &head->stable_id);
			if ((head->kind == STORE_EDGE_TABLE) == (pass == 1) &&
			    (!old || !block_address_equal(old->table, head->table)))
				rc = emit_table_rows(dump, after, old, head);
		}
out:
	json_decref(renames);
	free(was.heads);
	free(is.heads);
	return rc < 0 ? rc : dump->output.rc;
}

static int emit_commit_line(struct dump_all *dump, const struct commit_record *record, bool full)
{
	char id[ULID_TEXT_SIZE], when[32];
	json_t *parents = json_array();
	for (size_t i = 0; parents && i < record->parent_count; i++)
		json_array_append_new(parents, json_string(ulid_format(&record->parents[i], id)));
	journal_format_time(record->time_us, when);
	json_t *line = json_pack("{s:s, s:I, s:s, s:o, s:s, s:I, s:s, s:s}", "commit", ulid_format(&record->id, id),
				 "version", (json_int_t)record->version, "branch", record->branch, "parents", parents,
				 "time", when, "time_us", (json_int_t)record->time_us, "actor", record->actor,
				 "message", record->message);
	if (line && full)
		json_object_set_new(line, "full", json_true());
	if (line && record->based_on)
		json_object_set_new(line, "based_on", json_integer((json_int_t)record->based_on));
	return emit_object(dump, line);
}

/* The commit's state as it published it, and the state it was applied to
 * (manifest_snapshots_of_commit_made): compactions after either, which store the
 * same rows anew (core/store_compact.c), are neither a change nor a rewrite. */
struct commit_made {
	uint64_t version;
	bool base;   /* the state it was applied to, not the one it made */
};

static int resolve_commit_made(struct store *store, void *context, struct manifest_snapshot *view,
			       struct error_info *error)
{
	const struct commit_made *wanted = context;
	struct manifest_snapshot made, base;
	int rc = manifest_snapshots_of_commit_made(store->manifest, wanted->version, &made, &base);
	if (rc == 0 && wanted->base && base.version == 0)
		rc = -ENOENT;   /* not kept */
	if (rc < 0)
		return error_info_set(error, rc, "cannot read version %llu: %s", (unsigned long long)wanted->version,
				      io_strerror(rc));
	*view = wanted->base ? base : made;
	return 0;
}

static int dump_commit(struct dump_all *dump, const struct commit_record *record)
{
	struct store_snapshot *before = NULL, *after = NULL;
	struct commit_made made = { record->version, false };
	int rc = store_snapshot_pinned(dump->store, resolve_commit_made, &made, NULL, &after, NULL);
	if (rc == -ENOENT)
		return 0;   /* its state is not kept: only its record is */
	if (rc < 0)
		return error_info_set(dump->error, rc, "cannot read version %llu: %s",
				      (unsigned long long)record->version, io_strerror(rc));
	if (record->parent_count > 0) {
		char parent[ULID_TEXT_SIZE];
		uint64_t version;
		struct commit_made base = { record->version, true };
		if (store_commit_find(dump->store, ulid_format(&record->parents[0], parent), &version, NULL) == 0 &&
		    version > dump->horizon)
			store_snapshot_pinned(dump->store, resolve_commit_made, &base, NULL, &before, NULL);
	}
	if ((rc = emit_commit_line(dump, record, !before)) == 0)
		rc = emit_changes(dump, before, after);
	if (rc == 0)
		dump->commits++;
	store_snapshot_release(before);
	store_snapshot_release(after);
	return rc;
}

static int emit_branch(const struct store_branch_info *branch, void *context)
{
	struct dump_all *dump = context;
	return emit_object(dump, json_pack("{s:s, s:s?}", "branch", branch->name, "head",
					   branch->head_commit[0] ? branch->head_commit : NULL));
}

/* The tags that keep a state below the horizon, in version order. */
struct kept_tags {
	struct store_tag_info *tags;
	size_t count;
	uint64_t horizon;
};

static int collect_kept_tag(const struct store_tag_info *tag, void *context)
{
	struct kept_tags *kept = context;
	if (tag->version > kept->horizon)
		return 0;
	struct store_tag_info *grown = realloc(kept->tags, (kept->count + 1) * sizeof *grown);
	if (!grown)
		return -ENOMEM;
	kept->tags = grown;
	grown[kept->count++] = *tag;
	return 0;
}

static int tag_version_compare(const void *left, const void *right)
{
	const struct store_tag_info *a = left, *b = right;
	return a->version < b->version ? -1 : a->version > b->version;
}

/*
 * A state below the horizon that a tag keeps: a full commit (its record where gc kept it;
 * else the tag's commit id, branch and the state's time, with no actor or message).
 */
static int dump_tagged_state(struct dump_all *dump, const struct store_tag_info *tag)
{
	struct store_snapshot *snapshot = NULL;
	int rc = store_snapshot_open_tag(dump->store, tag->name, &snapshot, dump->error);
	if (rc < 0)
		return rc;
	struct commit_record record;
	if (store_commit_at(dump->store, tag->version, &record) < 0) {
		journal_commit_record_free(&record);
		journal_commit_record_init(&record);
		record.version = tag->version;
		snprintf(record.branch, sizeof record.branch, "%s", tag->branch);
		record.time_us = store_snapshot_time_us(snapshot);
		record.actor = strdup("");
		record.message = strdup("");
		if (ulid_parse(tag->commit, &record.id) < 0 || !record.actor || !record.message)
			rc = error_info_set(dump->error, -EIO, "tag %s names commit %s, which is no commit id", tag->name,
					    tag->commit);
	}
	record.parent_count = 0;
	if (rc == 0)
		rc = emit_commit_line(dump, &record, true);
	if (rc == 0)
		rc = emit_changes(dump, NULL, snapshot);
	if (rc == 0)
		dump->commits++;
	journal_commit_record_free(&record);
	store_snapshot_release(snapshot);
	return rc;
}

static int emit_tag(const struct store_tag_info *tag, void *context)
{
	struct dump_all *dump = context;
	return emit_object(dump, json_pack("{s:s, s:s, s:I, s:s, s:I, s:s, s:s}", "tag", tag->name, "commit", tag->commit,
					   "version", (json_int_t)tag->version, "branch", tag->branch, "time_us",
					   (json_int_t)tag->time_us, "actor", tag->actor, "message", tag->message));
}

int store_dump_all(struct store *store, int fd, store_progress_fn progress, void *progress_context,
		   struct error_info *error)
{
	struct dump_all dump = { .store = store, .error = error, .output = { .fd = fd } };
	buf_init(&dump.output.pending);
	int rc = store_refresh(store, NULL);
	uint64_t latest = store_version(store);
	dump.horizon = store_horizon(store);
	if (rc == 0)
		rc = emit_object(&dump, json_pack("{s:s, s:i, s:b}", "graphfs", "dump", "format", DUMP_ALL_FORMAT,
						  "all", 1));
	struct kept_tags kept = { NULL, 0, dump.horizon };
	if (rc == 0 && dump.horizon && (rc = store_tags(store, collect_kept_tag, &kept)) < 0)
		error_info_set(error, rc, "cannot list the tags: %s", io_strerror(rc));
	if (kept.count > 1)
		qsort(kept.tags, kept.count, sizeof *kept.tags, tag_version_compare);
	for (size_t i = 0; rc == 0 && i < kept.count; i++)
		if (i == 0 || kept.tags[i].version != kept.tags[i - 1].version)
			rc = dump_tagged_state(&dump, &kept.tags[i]);
	free(kept.tags);
	for (uint64_t version = dump.horizon + 1; rc == 0 && version <= latest; version++) {
		struct commit_record record;
		rc = store_commit_at(store, version, &record);
		if (rc == 0)
			rc = dump_commit(&dump, &record);
		else if (rc == -ENOENT)
			rc = 0;   /* reclaimed meanwhile */
		else
			error_info_set(error, rc, "cannot read the commit of version %llu: %s",
				       (unsigned long long)version, io_strerror(rc));
		journal_commit_record_free(&record);
		if (progress)
			progress(version - dump.horizon, latest - dump.horizon, progress_context);
	}
	if (rc == 0 && (rc = store_branches(store, emit_branch, &dump)) < 0)
		error_info_set(error, rc, "cannot list the branches: %s", io_strerror(rc));
	if (rc == 0 && (rc = store_tags(store, emit_tag, &dump)) < 0)
		error_info_set(error, rc, "cannot list the tags: %s", io_strerror(rc));
	if (rc == 0)
		rc = emit_object(&dump, json_pack("{s:b, s:I}", "end", 1, "commits", (json_int_t)dump.commits));
	if (rc == 0)
		rc = store_dump_flush(&dump.output);
	if (rc < 0 && !error->message[0])
		error_info_set(error, rc, "cannot write the dump: %s", io_strerror(rc));
	buf_free(&dump.output.pending);
	return rc;
}

/* ---- load ------------------------------------------------------------------------------ */

struct replay_writer {
	char table[JOURNAL_NAME_MAX + 1];
	struct store_writer *writer;
};

struct replay {
	struct store *store;
	const char *file;
	uint64_t line;
	struct error_info *error;
	json_t *ids;                  /* the stream's commit id -> this store's, where they differ */
	json_t *versions;             /* the stream's version (text) -> this store's, where they differ */
	store_mapped_fn mapped;       /* hears each id that changed */
	void *mapped_context;
	uint64_t commits;
	uint64_t time_us;             /* the last commit's: times never go back (FORMAT.md §16.3) */
	bool ended;
	/* the commit being replayed */
	struct store_txn *txn;
	char id[ULID_TEXT_SIZE];
	uint64_t version;             /* its version in the stream */
	uint64_t based_on;            /* a based write's: the version it read, in the stream (0: none) */
	char *message;
	bool full;
	struct replay_writer *writers;
	size_t writer_count;
	json_t *named;                /* full: the tables its lines name */
	struct buf row;
	struct store_envelope envelope;
};

static int replay_fail(struct replay *replay, int code, const char *format, ...) __attribute__((format(printf, 3, 4)));

static int replay_fail(struct replay *replay, int code, const char *format, ...)
{
	va_list arguments;
	va_start(arguments, format);
	int rc = store_dump_fail_at(replay->error, replay->file, replay->line, code, format, arguments);
	va_end(arguments);
	return rc;
}

/* This store's id of the stream's commit id (NULL: NULL): the same id unless its replay
 * renamed it. A commit the stream never made is refused where it is used. */
static const char *replay_id(struct replay *replay, const char *id)
{
	const char *renamed = id ? json_string_value(json_object_get(replay->ids, id)) : NULL;
	return renamed ? renamed : id;
}

struct branch_lookup {
	const char *name;
	bool found;
	char head[ULID_TEXT_SIZE];
};

static int find_branch(const struct store_branch_info *branch, void *context)
{
	struct branch_lookup *lookup = context;
	if (strcmp(branch->name, lookup->name) != 0)
		return 0;
	lookup->found = true;
	snprintf(lookup->head, sizeof lookup->head, "%s", branch->head_commit);
	return 1;
}

/* Makes branch exist with head at (this store's id; NULL: wherever it is, main's head for a new one). */
static int replay_branch(struct replay *replay, const char *branch, const char *at)
{
	struct branch_lookup lookup = { branch, false, "" };
	int rc = store_branches(replay->store, find_branch, &lookup);
	if (rc < 0)
		return replay_fail(replay, rc, "cannot list the branches: %s", io_strerror(rc));
	if (lookup.found && (!at || strcmp(lookup.head, at) == 0))
		return 0;
	if (at && store_commit_find(replay->store, at, NULL, NULL) < 0)
		return replay_fail(replay, -EINVAL, "branch %s is to be at commit %s, which no earlier line made", branch, at);
	struct error_info error;
	error_info_clear(&error);
	if (lookup.found && (rc = store_branch_delete(replay->store, branch, NULL, true, NULL, &error)) < 0)
		return replay_fail(replay, rc, "cannot move branch %s to commit %s: %s", branch, at, error.message);
	rc = at ? store_branch_create_at(replay->store, branch, at, NULL, &error)
		: store_branch_create(replay->store, branch, "main", NULL, &error);
	if (rc < 0)
		return replay_fail(replay, rc, "cannot create branch %s: %s", branch, error.message);
	return 0;
}

static int replay_writer(struct replay *replay, const char *table, enum store_write_mode mode,
			 struct store_writer **out)
{
	for (size_t i = 0; i < replay->writer_count; i++)
		if (strcmp(replay->writers[i].table, table) == 0) {
			if (mode == STORE_OVERWRITE)
				return replay_fail(replay, -EINVAL, "a second overwrite of %s in one commit", table);
			*out = replay->writers[i].writer;
			return 0;
		}
	struct replay_writer *grown = realloc(replay->writers, (replay->writer_count + 1) * sizeof *grown);
	if (!grown)
		return replay_fail(replay, -ENOMEM, "out of memory");
	replay->writers = grown;
	struct replay_writer *writer = &grown[replay->writer_count];
	snprintf(writer->table, sizeof writer->table, "%s", table);
	struct error_info error;
	error_info_clear(&error);
	int rc = store_txn_writer(replay->txn, table, mode, 0, table, &writer->writer, &error);
	if (rc < 0)
		return replay_fail(replay, rc, "%s", error.message);
	replay->writer_count++;
	if (replay->full)
		json_object_set_new(replay->named, table, json_true());
	*out = writer->writer;
	return 0;
}

static int replay_row(struct replay *replay, const char *table, const char *text, size_t size)
{
	struct store_writer *writer;
	int rc = replay_writer(replay, table, STORE_MERGE, &writer);
	if (rc < 0)
		return rc;
	buf_reset(&replay->row);
	if ((rc = buf_append(&replay->row, text, size)) < 0 || (rc = buf_append(&replay->row, "\n", 1)) < 0)
		return replay_fail(replay, rc, "out of memory");
	struct error_info error;
	error_info_clear(&error);
	if ((rc = store_writer_write(writer, replay->row.data, replay->row.size, &error)) < 0)
		return replay_fail(replay, rc, "%s: %s", table, error.message);
	return 0;
}

struct drop_unnamed {
	struct replay *replay;
	int rc;
};

static int drop_unnamed_table(const struct head_row *head, void *context)
{
	struct drop_unnamed *drop = context;
	if (json_object_get(drop->replay->named, head->name))
		return 0;
	struct error_info error;
	error_info_clear(&error);
	if ((drop->rc = store_txn_drop(drop->replay->txn, head->name, &error)) < 0)
		return replay_fail(drop->replay, drop->rc, "cannot drop %s: %s", head->name, error.message);
	return 0;
}

/* Publishes the commit being replayed, if any. */
/* The version the commit being replayed was based on, in this store's numbering: the same when
 * no version was renumbered, the replayed commit's new one when its version was, and 0 (none) for
 * a version the stream does not carry (gc reclaimed it in the source). */
static uint64_t replay_based_on(const struct replay *replay)
{
	if (!replay->based_on || json_object_size(replay->versions) == 0)
		return replay->based_on;
	char key[24];
	snprintf(key, sizeof key, "%llu", (unsigned long long)replay->based_on);
	return (uint64_t)json_integer_value(json_object_get(replay->versions, key));
}

static int replay_commit(struct replay *replay)
{
	if (!replay->txn)
		return 0;
	int rc = 0;
	struct error_info error;
	error_info_clear(&error);
	for (size_t i = 0; rc == 0 && i < replay->writer_count; i++)
		if ((rc = store_writer_finish(replay->writers[i].writer, &error)) < 0)
			replay_fail(replay, rc, "commit %s: %s", replay->id, error.message);
	if (rc == 0 && replay->full) {
		struct drop_unnamed drop = { replay, 0 };
		rc = store_snapshot_heads(store_txn_snapshot(replay->txn), false, drop_unnamed_table, &drop);
		if (rc == 0)
			rc = drop.rc;
	}
	store_txn_set_based_on(replay->txn, replay_based_on(replay));
	struct store_commit_result result;
	if (rc == 0 && (rc = store_txn_commit(replay->txn, replay->message, &result, &error)) < 0)
		replay_fail(replay, rc, "cannot replay commit %s: %s", replay->id, error.message);
	if (rc == 0) {
		if (replay->version && replay->version != result.version) {
			char key[24];
			snprintf(key, sizeof key, "%llu", (unsigned long long)replay->version);
			json_object_set_new(replay->versions, key, json_integer((json_int_t)result.version));
		}
		if (strcmp(replay->id, result.commit) != 0) {
			json_object_set_new(replay->ids, replay->id, json_string(result.commit));
			if (replay->mapped)
				replay->mapped(replay->id, result.commit, replay->mapped_context);
		}
		replay->commits++;
	}
	store_txn_free(replay->txn);
	replay->txn = NULL;
	free(replay->message);
	replay->message = NULL;
	free(replay->writers);
	replay->writers = NULL;
	replay->writer_count = 0;
	json_object_clear(replay->named);
	return rc;
}

static int replay_begin_commit(struct replay *replay, json_t *line)
{
	const char *id = NULL, *branch = NULL, *actor = NULL, *message = NULL;
	json_t *parents = NULL;
	json_int_t time_us = 0, version = 0, based_on = 0;
	int full = 0;
	if (json_unpack(line, "{s:s, s?I, s:s, s:o, s:I, s:s, s:s, s?b, s?I}", "commit", &id, "version", &version,
			"branch", &branch, "parents", &parents, "time_us", &time_us, "actor", &actor, "message",
			&message, "full", &full, "based_on", &based_on) < 0 ||
	    !json_is_array(parents) || time_us < 0 || version < 0 || based_on < 0)
		return replay_fail(replay, -EINVAL, "a commit line needs commit, branch, parents, time_us, actor and message");
	if ((uint64_t)time_us < replay->time_us)
		return replay_fail(replay, -EINVAL, "commit %s is older than the commit before it: commits come in version order", id);
	replay->time_us = (uint64_t)time_us;
	struct store_commit_origin origin = { .time_us = (uint64_t)time_us, .empty_allowed = true };
	if (ulid_parse(id, &origin.id) < 0)
		return replay_fail(replay, -EINVAL, "commit \"%.40s\" is not a commit id", id);
	const char *first = replay_id(replay, json_string_value(json_array_get(parents, 0)));
	const char *second = replay_id(replay, json_string_value(json_array_get(parents, 1)));
	if (!full && json_array_size(parents) > 0 && !first)
		return replay_fail(replay, -EINVAL, "commit %s: its first parent is not a commit id", id);
	int rc = replay_branch(replay, branch, full ? NULL : first);
	if (rc < 0)
		return rc;
	struct error_info error;
	error_info_clear(&error);
	if ((rc = store_txn_begin(replay->store, branch, &replay->txn, &error)) < 0)
		return replay_fail(replay, rc, "%s", error.message);
	snprintf(replay->id, sizeof replay->id, "%s", id);
	replay->version = (uint64_t)version;
	replay->based_on = (uint64_t)based_on;
	replay->full = full;
	replay->message = strdup(message);
	if (!replay->message)
		return replay_fail(replay, -ENOMEM, "out of memory");
	store_txn_defer_endpoint_checks(replay->txn, true);
	if (rc == 0 && (rc = store_txn_set_actor(replay->txn, actor)) < 0)
		replay_fail(replay, rc, "actor \"%.64s…\" is too long", actor);
	if (rc == 0 && (rc = store_txn_set_origin(replay->txn, &origin)) < 0)
		replay_fail(replay, rc, "cannot replay commit %s: %s", id, io_strerror(rc));
	if (rc == 0 && second && (rc = store_txn_set_merge_commit(replay->txn, second, &error)) < 0)
		replay_fail(replay, rc, "%s", error.message);
	return rc;
}

/* A line inside a commit: a table operation. */
static int replay_operation(struct replay *replay, json_t *line, const char *text, size_t size)
{
	struct error_info error;
	error_info_clear(&error);
	const char *table = NULL, *to = NULL;
	int rc;
	if (json_unpack(line, "{s:s, s:s}", "rename", &table, "to", &to) == 0) {
		if ((rc = store_txn_rename(replay->txn, table, to, &error)) < 0)
			return replay_fail(replay, rc, "%s", error.message);
		return 0;
	}
	if (json_unpack(line, "{s:s}", "drop", &table) == 0) {
		if ((rc = store_txn_drop(replay->txn, table, &error)) < 0)
			return replay_fail(replay, rc, "%s", error.message);
		return 0;
	}
	if (json_unpack(line, "{s:s}", "overwrite", &table) == 0) {
		struct store_writer *writer;
		return replay_writer(replay, table, STORE_OVERWRITE, &writer);
	}
	json_t *id = NULL;
	if (json_unpack(line, "{s:s, s:o}", "delete", &table, "id", &id) == 0) {
		json_t *row = json_pack("{s:O, s:b}", "id", id, "@delete", 1);
		char *row_text = row ? json_dumps(row, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
		json_decref(row);
		rc = row_text ? replay_row(replay, table, row_text, strlen(row_text)) : replay_fail(replay, -ENOMEM, "out of memory");
		free(row_text);
		return rc;
	}
	char message[256];
	rc = store_envelope_read(text, size, true, &replay->envelope, message, sizeof message);
	if (rc <= 0)
		return rc == 0 ? 0 : replay_fail(replay, rc, "%s", message);
	const char *data = (const char *)replay->envelope.row.data;
	size_t data_size = replay->envelope.row.size;
	table = replay->envelope.table;
	if (replay->envelope.kind == STORE_ENVELOPE_SCHEMA) {
		if (replay->full)
			json_object_set_new(replay->named, table, json_true());
		if ((rc = store_txn_schema(replay->txn, table, data, data_size, &error)) < 0)
			return replay_fail(replay, rc, "schema of %s: %s", table, error.message);
		return 0;
	}
	return replay_row(replay, table, data, data_size);
}

/* A line after the commits: a branch, a tag or the end. */
static int replay_name(struct replay *replay, json_t *line)
{
	const char *name = NULL, *head = NULL, *commit = NULL, *branch = NULL, *actor = NULL, *message = NULL;
	json_int_t version = 0, time_us = 0;
	json_t *head_value = NULL;
	int rc;
	if (json_unpack(line, "{s:s, s:o}", "branch", &name, "head", &head_value) == 0 &&
	    (json_is_null(head_value) || json_is_string(head_value))) {
		head = json_string_value(head_value);
		return replay_branch(replay, name, replay_id(replay, head));
	}
	if (json_unpack(line, "{s:s, s:s, s:I, s:s, s:I, s:s, s:s}", "tag", &name, "commit", &commit, "version", &version,
			"branch", &branch, "time_us", &time_us, "actor", &actor, "message", &message) == 0) {
		const char *at = replay_id(replay, commit);
		uint64_t at_version;
		char at_branch[JOURNAL_NAME_MAX + 1];
		if (!at || store_commit_find(replay->store, at, &at_version, at_branch) < 0)
			return replay_fail(replay, -EINVAL, "tag %s names commit %s, which no earlier line made", name, commit);
		struct error_info error;
		error_info_clear(&error);
		if ((rc = store_tag_create_at_time(replay->store, name, at_branch, at_version, message, actor,
						   (uint64_t)time_us, NULL, &error)) < 0)
			return replay_fail(replay, rc, "cannot create tag %s: %s", name, error.message);
		return 0;
	}
	if (json_object_get(line, "end")) {
		replay->ended = true;
		return 0;
	}
	return replay_fail(replay, -EINVAL, "not a line of a dump --all stream (FORMAT.md §24)");
}

struct live_branches {
	json_t *kept;                 /* the branches the stream names */
	json_t *extra;                /* the store's others */
};

static int collect_extra(const struct store_branch_info *branch, void *context)
{
	struct live_branches *live = context;
	if (!json_object_get(live->kept, branch->name) && strcmp(branch->name, "main") != 0)
		json_array_append_new(live->extra, json_string(branch->name));
	return 0;
}

static int replay_line(struct replay *replay, const char *text, size_t size, json_t *kept)
{
	if (replay->ended)
		return replay_fail(replay, -EINVAL, "a line after the end line");
	json_error_t parse_error;
	json_t *line = json_loadb(text, size, 0, &parse_error);
	if (!json_is_object(line)) {
		json_decref(line);
		return replay_fail(replay, -EINVAL, "not a JSON object: %s", line ? "" : parse_error.text);
	}
	int rc;
	if (json_object_get(line, "commit") && json_object_get(line, "parents")) {
		if ((rc = replay_commit(replay)) == 0)
			rc = replay_begin_commit(replay, line);
	} else if (json_object_get(line, "branch") || json_object_get(line, "tag") || json_object_get(line, "end")) {
		const char *branch = json_string_value(json_object_get(line, "branch"));
		if (branch && !json_object_get(line, "tag"))
			json_object_set_new(kept, branch, json_true());
		if ((rc = replay_commit(replay)) == 0)
			rc = replay_name(replay, line);
	} else if (replay->txn) {
		rc = replay_operation(replay, line, text, size);
	} else {
		rc = replay_fail(replay, -EINVAL, "a table line before any commit line");
	}
	json_decref(line);
	return rc;
}

bool store_dump_all_header(const char *line, size_t size)
{
	json_t *header = json_loadb(line, size, 0, NULL);
	bool all = json_is_object(header) && json_is_true(json_object_get(header, "all")) &&
		   json_string_value(json_object_get(header, "graphfs")) &&
		   strcmp(json_string_value(json_object_get(header, "graphfs")), "dump") == 0;
	json_decref(header);
	return all;
}

int store_load_all(struct store *store, FILE *input, const char *file, const char *header, size_t header_size,
		   uint64_t total, store_progress_fn progress, void *progress_context, store_mapped_fn mapped, void *mapped_context,
		   uint64_t *commits, struct error_info *error)
{
	struct replay replay = { .store = store, .file = file, .line = 1, .error = error, .mapped = mapped,
				 .mapped_context = mapped_context };
	buf_init(&replay.row);
	store_envelope_init(&replay.envelope);
	replay.ids = json_object();
	replay.versions = json_object();
	replay.named = json_object();
	json_t *kept = json_object();
	struct live_branches live = { kept, json_array() };
	int rc = replay.ids && replay.versions && replay.named && kept && live.extra ? 0 : -ENOMEM;
	json_t *opening = json_loadb(header, header_size, 0, NULL);
	json_int_t format = json_integer_value(json_object_get(opening, "format"));
	json_decref(opening);
	if (rc == 0 && format != DUMP_ALL_FORMAT)
		rc = replay_fail(&replay, -EPROTO, "a dump --all stream of format %lld: this graphfs reads format %d",
				 (long long)format, DUMP_ALL_FORMAT);
	if (rc == 0 && (rc = store_refresh(store, NULL)) == 0 && store_version(store) != 0)
		rc = replay_fail(&replay, -EEXIST,
				 "the store already has commits: a dump --all stream loads into a new store "
				 "(graphfs init NEW, then graphfs load NEW %s)", file);
	char *line = NULL;
	size_t capacity = 0;
	ssize_t length;
	uint64_t done = header_size + 1;
	while (rc == 0 && (length = getline(&line, &capacity, input)) >= 0) {
		replay.line++;
		done += (uint64_t)length;
		if (length > 0 && line[length - 1] == '\n')
			length--;
		if (length > 0)
			rc = replay_line(&replay, line, (size_t)length, kept);
		if (progress && replay.line % 1024 == 0)
			progress(done, total, progress_context);
	}
	free(line);
	if (rc == 0 && ferror(input))
		rc = replay_fail(&replay, -EIO, "cannot read %s", file);
	if (rc == 0 && !replay.ended)   /* the commit being read may be cut short: not published */
		rc = replay_fail(&replay, -EINVAL, "the stream ends without its end line (cut short?): %llu commits "
				 "were replayed; load the whole stream into a new store",
				 (unsigned long long)replay.commits);
	/* branches the stream's commits made but that were deleted before the dump */
	if (rc == 0 && (rc = store_branches(store, collect_extra, &live)) < 0)
		replay_fail(&replay, rc, "cannot list the branches: %s", io_strerror(rc));
	for (size_t i = 0; rc == 0 && i < json_array_size(live.extra); i++) {
		const char *name = json_string_value(json_array_get(live.extra, i));
		struct error_info delete_error;
		error_info_clear(&delete_error);
		if ((rc = store_branch_delete(store, name, NULL, true, NULL, &delete_error)) < 0)
			replay_fail(&replay, rc, "cannot delete branch %s: %s", name, delete_error.message);
	}
	if (commits)
		*commits = replay.commits;
	store_txn_free(replay.txn);
	free(replay.message);
	free(replay.writers);
	buf_free(&replay.row);
	store_envelope_free(&replay.envelope);
	json_decref(replay.ids);
	json_decref(replay.versions);
	json_decref(replay.named);
	json_decref(kept);
	json_decref(live.extra);
	return rc;
}
