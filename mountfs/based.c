/*
 * based — based writes (docs/MOUNT.md "Based writes"): a whole-table write
 * made from what a process read never silently undoes a commit made meanwhile.
 *
 * A based write has its bytes (a scratch file, or a stream's kept bytes) and a
 * base: the branch version the writer read the table at. If the table did not
 * move since, the bytes are published as an overwrite on the condition that it
 * still has not (compare-and-swap). If it moved, the rows others changed
 * between the base and now (store_diff_rows: O(rows changed × log rows)) are
 * merged three ways with the written rows: a row the writer left as it was
 * takes the others' change, a row both changed is merged property by property,
 * and the same property changed to different values, or a row deleted on one
 * side and changed on the other, is a conflict: nothing is published.
 *
 * Invariants:
 *   1. Nothing is published unless every row the others changed is merged or
 *      the writer's own: a commit that lands between the diff and the publish
 *      makes the compare-and-swap fail, and the merge is made again.
 *   2. A conflict publishes nothing and names the conflicting ids in
 *      .graphfs/errors; the caller keeps the bytes (the scratch file stays,
 *      a stream leaves its .rej file).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include <jansson.h>

#include "mountfs_int.h"

#define BASED_ATTEMPTS 8
#define CHUNK (1024 * 1024)
#define CONFLICTS_NAMED 5
#define ID_TEXT_MAX 4096   /* the longest id a row may have (the store refuses longer) */

/* One row the others changed since the base: its base, their and (once seen) our version. */
struct changed_row {
	char *id;
	json_t *base;     /* NULL: they inserted it */
	json_t *theirs;   /* NULL: they deleted it */
	json_t *ours;     /* NULL: not (yet) in the written rows */
	json_t *result;   /* the merged row; NULL: the row goes */
	bool seen;
};

struct changes {
	struct changed_row *rows;
	size_t count, capacity;
};

static void changes_free(struct changes *changes)
{
	for (size_t i = 0; i < changes->count; i++) {
		struct changed_row *row = &changes->rows[i];
		free(row->id);
		json_decref(row->base);
		json_decref(row->theirs);
		json_decref(row->ours);
		json_decref(row->result);
	}
	free(changes->rows);
	memset(changes, 0, sizeof *changes);
}

static int compare_changed(const void *left, const void *right)
{
	return strcmp(((const struct changed_row *)left)->id, ((const struct changed_row *)right)->id);
}

static struct changed_row *changes_find(struct changes *changes, const char *id)
{
	struct changed_row key = { .id = (char *)id };
	return changes->count ? bsearch(&key, changes->rows, changes->count, sizeof key, compare_changed) : NULL;
}

/* store_diff_rows's visitor: {"op":…,"id":…,"before":row|null,"after":row|null}. */
static int collect_change(const char *line, size_t size, void *context)
{
	struct changes *changes = context;
	json_t *change = json_loadb(line, size, 0, NULL);
	const char *id = change ? json_string_value(json_object_get(change, "id")) : NULL;
	if (!id) {
		json_decref(change);
		return -EIO;
	}
	if (changes->count == changes->capacity) {
		size_t grown = changes->capacity ? changes->capacity * 2 : 64;
		struct changed_row *rows = realloc(changes->rows, grown * sizeof *rows);
		if (!rows) {
			json_decref(change);
			return -ENOMEM;
		}
		changes->rows = rows;
		changes->capacity = grown;
	}
	struct changed_row *row = &changes->rows[changes->count];
	memset(row, 0, sizeof *row);
	row->id = strdup(id);
	json_t *before = json_object_get(change, "before"), *after = json_object_get(change, "after");
	row->base = json_is_object(before) ? json_incref(before) : NULL;
	row->theirs = json_is_object(after) ? json_incref(after) : NULL;
	json_decref(change);
	if (!row->id)
		return -ENOMEM;
	changes->count++;
	return 0;
}

/* The id of one written line: the fast path for a line that starts {"id":"…" without
 * escapes, else jansson. 0 with *value (to free with json_decref; NULL if the line
 * was read by the fast path) or -EINVAL (no string id: the line derives its id). */
static int line_id(const char *line, size_t size, char *id, size_t id_size, json_t **value)
{
	*value = NULL;
	static const char prefix[] = "{\"id\":\"";
	if (size > sizeof prefix && memcmp(line, prefix, sizeof prefix - 1) == 0) {
		const char *start = line + sizeof prefix - 1, *end = memchr(start, '"', size - (sizeof prefix - 1));
		if (end && !memchr(start, '\\', (size_t)(end - start)) && (size_t)(end - start) < id_size) {
			memcpy(id, start, (size_t)(end - start));
			id[end - start] = '\0';
			return 0;
		}
	}
	json_t *row = json_loadb(line, size, 0, NULL);
	const char *text = row ? json_string_value(json_object_get(row, "id")) : NULL;
	if (!text || strlen(text) >= id_size) {
		json_decref(row);
		return -EINVAL;
	}
	snprintf(id, id_size, "%s", text);
	*value = row;
	return 0;
}

/* Calls visit for every line of descriptor's bytes (without "\n"; a last line without
 * one too). 0, visit's negative result, or -errno. */
static int each_line(int descriptor, int (*visit)(const char *line, size_t size, void *context), void *context)
{
	struct buf pending;
	buf_init(&pending);
	char *chunk = malloc(CHUNK);
	int rc = chunk ? 0 : -ENOMEM;
	for (off_t offset = 0; rc == 0;) {
		ssize_t got = pread(descriptor, chunk, CHUNK, offset);
		if (got < 0) {
			rc = -errno;
			break;
		}
		if (got == 0)
			break;
		offset += got;
		const char *position = chunk, *end = chunk + got;
		while (rc == 0 && position < end) {
			const char *newline = memchr(position, '\n', (size_t)(end - position));
			if (!newline) {
				rc = buf_append(&pending, position, (size_t)(end - position));
				break;
			}
			if (pending.size) {
				rc = buf_append(&pending, position, (size_t)(newline - position));
				if (rc == 0)
					rc = visit((const char *)pending.data, pending.size, context);
				buf_reset(&pending);
			} else {
				rc = visit(position, (size_t)(newline - position), context);
			}
			position = newline + 1;
		}
	}
	if (rc == 0 && pending.size)
		rc = visit((const char *)pending.data, pending.size, context);
	free(chunk);
	buf_free(&pending);
	return rc;
}

/* Pass 1: our version of every row the others changed. */
static int note_ours(const char *line, size_t size, void *context)
{
	struct changes *changes = context;
	char id[ID_TEXT_MAX + 1];
	json_t *value = NULL;
	size_t blank = 0;
	while (blank < size && strchr(" \t\r", line[blank]))
		blank++;
	if (blank == size)
		return 0;
	if (line_id(line, size, id, sizeof id, &value) < 0)
		return -EINVAL;
	struct changed_row *row = changes_find(changes, id);
	if (row && !row->seen) {
		row->seen = true;
		row->ours = value ? value : json_loadb(line, size, 0, NULL);
		return row->ours ? 0 : -EINVAL;
	}
	json_decref(value);
	return 0;
}

/* a and b the same row (either may be NULL: no row). */
static bool same_row(json_t *a, json_t *b)
{
	return (!a && !b) || (a && b && json_equal(a, b));
}

/* The three-way merge of one row (result set); false on a conflict. */
static bool merge_row(struct changed_row *row)
{
	if (same_row(row->ours, row->base)) {
		row->result = row->theirs ? json_incref(row->theirs) : NULL;   /* only they changed it */
		return true;
	}
	if (same_row(row->ours, row->theirs)) {
		row->result = row->ours ? json_incref(row->ours) : NULL;       /* both the same way */
		return true;
	}
	if (!row->base || !row->ours || !row->theirs)
		return false;   /* both inserted it, or one deleted what the other changed */
	json_t *merged = json_deep_copy(row->ours);
	bool clean = merged != NULL;
	const char *key;
	json_t *theirs_value;
	/* every property they changed: ours must have left it as it was, or agree */
	json_object_foreach(row->theirs, key, theirs_value) {
		json_t *base_value = json_object_get(row->base, key), *ours_value = json_object_get(row->ours, key);
		if (same_row(theirs_value, base_value) || !clean)
			continue;
		if (same_row(ours_value, base_value))
			json_object_set(merged, key, theirs_value);
		else if (!same_row(ours_value, theirs_value))
			clean = false;
	}
	json_t *base_value;
	json_object_foreach(row->base, key, base_value) {   /* properties they removed (set to null) */
		if (!clean || json_object_get(row->theirs, key))
			continue;
		json_t *ours_value = json_object_get(row->ours, key);
		if (same_row(ours_value, base_value))
			json_object_del(merged, key);
		else if (ours_value)
			clean = false;
	}
	if (!clean) {
		json_decref(merged);
		return false;
	}
	row->result = merged;
	return true;
}

/* Pass 2: the written lines, each row the others changed replaced by its merge. */
struct rewrite {
	struct changes *changes;
	struct store_writer *writer;
	struct error_info *error;
};

static int write_merged(struct rewrite *rewrite, const char *line, size_t size)
{
	int rc = store_writer_write(rewrite->writer, line, size, rewrite->error);
	return rc < 0 ? rc : store_writer_write(rewrite->writer, "\n", 1, rewrite->error);
}

static int write_row(struct rewrite *rewrite, json_t *row)
{
	char *text = json_dumps(row, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!text)
		return -ENOMEM;
	int rc = write_merged(rewrite, text, strlen(text));
	free(text);
	return rc;
}

static int rewrite_line(const char *line, size_t size, void *context)
{
	struct rewrite *rewrite = context;
	char id[ID_TEXT_MAX + 1];
	json_t *value = NULL;
	struct changed_row *row = NULL;
	if (line_id(line, size, id, sizeof id, &value) == 0)
		row = changes_find(rewrite->changes, id);
	json_decref(value);
	if (!row)
		return write_merged(rewrite, line, size);
	return row->result ? write_row(rewrite, row->result) : 0;
}

/* Records the conflict of path against base (the ids, up to CONFLICTS_NAMED). */
static void refuse_conflicts(struct mountfs *mount, const char *path, uint64_t base, const struct changes *changes)
{
	char ids[1024] = "";
	size_t named = 0, conflicts = 0;
	for (size_t i = 0; i < changes->count; i++) {
		const struct changed_row *row = &changes->rows[i];
		if (row->result || same_row(row->ours, row->base) || same_row(row->ours, row->theirs))
			continue;
		conflicts++;
		if (named++ < CONFLICTS_NAMED) {
			size_t used = strlen(ids);
			snprintf(ids + used, sizeof ids - used, "%s\"%.100s\"", used ? ", " : "", row->id);
		}
	}
	mount_error_refuse(mount, path, -EBUSY,
			   "the table changed since it was read (version %llu) and %zu row%s changed on both sides: %s%s; nothing was published: merge by hand and write it again",
			   (unsigned long long)base, conflicts, conflicts == 1 ? "" : "s", ids,
			   conflicts > CONFLICTS_NAMED ? ", ..." : "");
}

/* The newest head of table on branch: 0, -ENOENT (no such table), -errno. */
static int head_now(struct mountfs *mount, const char *branch, const char *table, struct store_snapshot **snapshot,
		    struct head_row *head)
{
	int rc = store_snapshot_open(mount->store, branch, STORE_LATEST, snapshot, NULL);
	return rc < 0 ? rc : store_snapshot_head(*snapshot, table, head);
}

/* One attempt: 0, -EAGAIN (a commit landed meanwhile: again), -EBUSY (conflict, recorded), -errno (recorded). */
static int based_attempt(struct mountfs *mount, const struct based_write *write, bool *merged)
{
	struct store_snapshot *base = NULL, *now = NULL;
	struct head_row base_head, now_head;
	struct changes changes = { 0 };
	struct store_txn *txn = NULL;
	struct store_writer *writer = NULL;
	struct error_info error;
	error_info_clear(&error);
	int rc = store_snapshot_open(mount->store, write->branch, write->base_version, &base, NULL);
	if (rc < 0) {
		mount_error_refuse(mount, write->path, rc == -ENOENT ? -EBUSY : rc,
				   "the version this table was read at (%llu) is no longer kept (gc); nothing was published: read it again",
				   (unsigned long long)write->base_version);
		rc = rc == -ENOENT ? -EBUSY : rc;
		goto out;
	}
	rc = store_snapshot_head(base, write->table, &base_head);
	bool based = rc == 0;   /* no table then: nothing to merge with */
	if (rc < 0 && rc != -ENOENT)
		goto out;
	rc = head_now(mount, write->branch, write->table, &now, &now_head);
	bool exists = rc == 0;
	if (rc < 0 && rc != -ENOENT)
		goto out;
	if (based && !exists) {
		mount_error_refuse(mount, write->path, -EBUSY,
				   "the table was dropped since it was read (version %llu); nothing was published",
				   (unsigned long long)write->base_version);
		rc = -EBUSY;
		goto out;
	}
	bool moved = based && (base_head.table_version != now_head.table_version ||
			       ulid_compare(&base_head.incarnation, &now_head.incarnation) != 0);
	if (moved) {
		rc = store_diff_rows(base, now, write->table, collect_change, &changes);
		if (rc == 0) {
			qsort(changes.rows, changes.count, sizeof *changes.rows, compare_changed);
			rc = each_line(write->descriptor, note_ours, &changes);
		}
		if (rc == -EINVAL) {
			mount_error_refuse(mount, write->path, -EBUSY,
					   "the table changed since it was read (version %llu) and these rows cannot be merged (a line that is not a row with an \"id\"); nothing was published",
					   (unsigned long long)write->base_version);
			rc = -EBUSY;
			goto out;
		}
		if (rc < 0)
			goto out;
		bool clean = true;
		for (size_t i = 0; i < changes.count; i++)
			if (!merge_row(&changes.rows[i]))
				clean = false;
		if (!clean) {
			refuse_conflicts(mount, write->path, write->base_version, &changes);
			rc = -EBUSY;
			goto out;
		}
	}
	if ((rc = mount_txn_begin(mount, write->branch, write->uid, &txn, &error)) < 0 ||
	    (rc = store_txn_writer(txn, write->table, STORE_OVERWRITE, exists ? now_head.table_version : 0, write->path,
				   &writer, &error)) < 0)
		goto refused;
	struct rewrite rewrite = { .changes = &changes, .writer = writer, .error = &error };
	rc = each_line(write->descriptor, rewrite_line, &rewrite);
	/* rows they added that the written bytes do not have */
	for (size_t i = 0; rc == 0 && i < changes.count; i++)
		if (!changes.rows[i].seen && changes.rows[i].result)
			rc = write_row(&rewrite, changes.rows[i].result);
	if (rc == 0)
		rc = store_writer_finish(writer, &error);
	if (rc < 0)
		goto refused;
	char message[512];
	if (moved)
		snprintf(message, sizeof message, "%s, read at version %llu, merged with %zu row%s changed since",
			 write->path, (unsigned long long)write->base_version, changes.count,
			 changes.count == 1 ? "" : "s");
	if (moved)
		store_txn_set_based_on(txn, write->base_version);
	rc = mount_commit_retryable(mount, txn, moved ? message : NULL, write->path, NULL);
	if (rc == 0)
		*merged = moved;
	goto out;
refused:
	mount_error_record(mount, write->path, &error, rc);
out:
	store_txn_free(txn);
	changes_free(&changes);
	store_snapshot_release(base);
	store_snapshot_release(now);
	return rc;
}

int based_publish(struct mountfs *mount, const struct based_write *write, bool *merged)
{
	*merged = false;
	int rc = -EAGAIN;
	for (int attempt = 0; attempt < BASED_ATTEMPTS && rc == -EAGAIN; attempt++)
		rc = based_attempt(mount, write, merged);
	if (rc == -EAGAIN) {
		mount_error_refuse(mount, write->path, -EBUSY,
				   "the table kept changing while this write was merged (%d attempts); nothing was published",
				   BASED_ATTEMPTS);
		rc = -EBUSY;
	}
	return rc;
}
