/*
 * store_row_history — the versions in which one row of one table changed
 * (layer: store): `graphfs log --table T --id X` and the mount's
 * history/by-id/<T>/<X>.jsonl (docs/MOUNT.md "History").
 *
 * The table is followed by stable id (so renames are one history) through
 * the branch's commit records, newest first; every commit that changed the
 * table names the table version it left (its change's head row), and the
 * row is looked up by id in that version's key tree. A line is written for
 * each version whose row differs from the one before. Cost: one commit
 * record per commit of the branch's log plus O(log rows) per commit that
 * touched the table.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

struct row_state {
	uint64_t version;
	struct ulid commit;
	uint64_t time_us;
	bool present;
	size_t row, row_size;   /* in the walk's arena */
};

struct history_walk {
	struct store *store;
	struct ulid stable_id;
	const void *id;
	size_t id_size;
	struct row_state *states;
	size_t count, capacity;
	struct buf arena;
	int rc;
};

static int note_version(const struct commit_record *record, void *context)
{
	struct history_walk *walk = context;
	if (record->reclaimed)
		return 1;   /* gc reclaimed what is older */
	for (size_t i = 0; i < record->change_count; i++) {
		const struct head_row *after = &record->changes[i].head_after;
		if (ulid_compare(&after->stable_id, &walk->stable_id) != 0)
			continue;
		if (buf_grow_array((void **)&walk->states, &walk->capacity, walk->count + 1, sizeof *walk->states) < 0)
			return -ENOMEM;
		struct row_state *state = &walk->states[walk->count];
		memset(state, 0, sizeof *state);
		state->version = record->version;
		state->commit = record->id;
		state->time_us = record->time_us;
		state->row = walk->arena.size;
		int rc = 0;
		if (after->state == HEAD_LIVE) {
			struct table_info info;
			rc = table_info_read(walk->store->pager, after->table, &info);
			if (rc == 0)
				rc = table_lookup(walk->store->pager, &info, walk->id, walk->id_size, &walk->arena);
			state->present = rc == 0;
			if (rc == -ENOENT)
				rc = 0;
		}
		if (rc < 0)
			return rc;
		state->row_size = walk->arena.size - state->row;
		while (state->row_size && walk->arena.data[state->row + state->row_size - 1] == '\n')
			state->row_size--;
		walk->count++;
		break;   /* one state per commit: the last change of the table in it */
	}
	return 0;
}

static bool same_row(const struct history_walk *walk, const struct row_state *a, const struct row_state *b)
{
	if (a->present != b->present)
		return false;
	return !a->present || (a->row_size == b->row_size &&
			       memcmp(walk->arena.data + a->row, walk->arena.data + b->row, a->row_size) == 0);
}

struct find_dropped {
	const char *name;
	struct head_row head;
	bool found;
};

static int find_dropped_head(const struct head_row *head, void *context)
{
	struct find_dropped *search = context;
	if (strcmp(head->name, search->name) == 0) {
		search->head = *head;   /* the last one listed: newest incarnation order does not matter much */
		search->found = true;
	}
	return 0;
}

int store_row_history(struct store_snapshot *snapshot, const char *table, const void *id, size_t id_size,
		      int (*visit)(const char *line, size_t size, void *context), void *context)
{
	struct history_walk walk = { .store = snapshot->store, .id = id, .id_size = id_size };
	buf_init(&walk.arena);
	struct head_row head;
	int rc = store_snapshot_head(snapshot, table, &head);
	if (rc == -ENOENT) {
		struct find_dropped search = { .name = table };
		rc = store_snapshot_heads(snapshot, true, find_dropped_head, &search);
		if (rc == 0 && !search.found)
			rc = -ENOENT;
		head = search.head;
	}
	if (rc < 0)
		goto out;
	walk.stable_id = head.stable_id;
	if ((rc = store_snapshot_log(snapshot, note_version, &walk)) < 0)
		goto out;
	struct buf line;
	buf_init(&line);
	for (size_t i = 0; i < walk.count && rc == 0; i++) {
		const struct row_state *state = &walk.states[i];
		const struct row_state *older = i + 1 < walk.count ? &walk.states[i + 1] : NULL;
		bool was = older && older->present;
		if (older ? same_row(&walk, state, older) : !state->present)
			continue;
		char commit[ULID_TEXT_SIZE], time[32];
		ulid_format(&state->commit, commit);
		journal_format_time(state->time_us, time);
		const char *op = !was ? "insert" : !state->present ? "delete" : "update";
		buf_reset(&line);
		rc = buf_printf(&line, "{\"version\":%llu,\"commit\":\"%s\",\"time\":\"%s\",\"op\":\"%s\",\"row\":",
				(unsigned long long)state->version, commit, time, op);
		if (rc == 0)
			rc = state->present ? buf_append(&line, walk.arena.data + state->row, state->row_size)
					    : buf_append_string(&line, "null");
		if (rc == 0)
			rc = buf_append_string(&line, "}\n");
		if (rc == 0)
			rc = visit((const char *)line.data, line.size, context);
	}
	buf_free(&line);
	if (rc > 0)
		rc = 0;
out:
	free(walk.states);
	buf_free(&walk.arena);
	return rc;
}
