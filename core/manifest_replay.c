/*
 * manifest_replay — a branch's heads as its journal says they are: the
 * first-parent chain of commit records from the branch's head back to its
 * first commit (through the source's history for a forked branch, down to the
 * oldest commit a gc kept), applied oldest first. verify compares the heads
 * and names trees with it (manifest_verify.c); repair rebuilds them from it
 * (manifest_repair.c). Reads only; nothing here writes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manifest_int.h"

void manifest_replay_free(struct manifest_replay *replay)
{
	free(replay->heads);
	memset(replay, 0, sizeof *replay);
}

static int replay_apply(struct manifest_replay *replay, const struct head_row *head)
{
	size_t low = 0, high = replay->count;
	while (low < high) {
		size_t middle = (low + high) / 2;
		int order = memcmp(replay->heads[middle].stable_id.bytes, head->stable_id.bytes, 16);
		if (order == 0) {
			replay->heads[middle] = *head;
			return 0;
		}
		if (order < 0)
			low = middle + 1;
		else
			high = middle;
	}
	if (replay->count == replay->capacity) {
		size_t capacity = replay->capacity ? replay->capacity * 2 : 16;
		struct head_row *grown = realloc(replay->heads, capacity * sizeof *grown);
		if (!grown)
			return -ENOMEM;
		replay->heads = grown;
		replay->capacity = capacity;
	}
	memmove(&replay->heads[low + 1], &replay->heads[low], (replay->count - low) * sizeof *replay->heads);
	replay->heads[low] = *head;
	replay->count++;
	return 0;
}

/*
 * Replays the branch's journal: the first-parent chain from its head to the
 * first commit, applied oldest first. Returns 0, or -EIO with problem set.
 */
struct seed_search {
	const struct ulid *head;
	struct branch_record found;
	bool have;
};

static int seed_branch(const struct branch_record *branch, void *context)
{
	struct seed_search *search = context;
	if (!search->have && ulid_compare(&branch->head_commit, search->head) == 0) {
		search->found = *branch;
		search->have = true;
	}
	return 0;
}

static int seed_head(const struct head_row *head, void *context)
{
	return replay_apply(context, head);
}

/* Seeds the replay with the heads of the state right after commit (of version
 * version, above the horizon): the branch record in that version's root whose
 * head it is. 0, or -EIO with problem set. */
static int replay_seed(struct manifest *manifest, uint64_t version, const struct ulid *commit, struct manifest_replay *out,
		       char *problem, size_t problem_size)
{
	struct root_record latest, root;
	struct seed_search search = { .head = commit };
	int rc = manifest_latest(manifest, &latest);
	if (rc == 0)
		rc = manifest_root_at(manifest, &latest, version, &root);
	if (rc == 0)
		rc = manifest_branches_each(manifest, &root, seed_branch, &search);
	if (rc == 0 && !search.have)
		rc = -ENOENT;
	if (rc == 0) {
		struct manifest_snapshot state = { .version = version, .root = root, .branch = search.found };
		rc = manifest_heads_each(manifest, &state, false, seed_head, out);
		if (rc == 0)
			rc = manifest_heads_each(manifest, &state, true, seed_head, out);
	}
	if (rc < 0) {
		snprintf(problem, problem_size, "the state after version %llu (the oldest commit gc kept) cannot be read",
			 (unsigned long long)version);
		return rc == -ENOMEM ? rc : -EIO;
	}
	return 0;
}

/*
 * Replays the branch's journal: the first-parent chain from its head to the
 * first commit, applied oldest first. Below a gc horizon the chain ends at
 * the oldest commit kept: the replay starts from the state that commit made
 * (or, if even that commit is below the horizon, there is nothing to replay
 * and the branch's heads are the replay). Returns 0, or -EIO with problem set.
 */
/*
 * A compaction (core/manifest_compact.c) stores a head's table version anew without a
 * commit: where the branch's head row equals the replayed one in every field but the
 * table address, the replay takes the head's address (the same table version, its
 * fragments merged), so that verify reads, and repair keeps, what the branch holds.
 * 0, -EIO, -ENOMEM (an unreadable heads tree is the comparison's finding, not this one's).
 */
static int adopt_compacted(struct manifest *manifest, const struct branch_record *branch,
			   struct manifest_replay *replay)
{
	struct btree *heads = NULL;
	struct buf value;
	buf_init(&value);
	if (block_address_is_null(branch->heads) || btree_open(manifest->pager, branch->heads, &heads) < 0)
		return 0;
	for (size_t i = 0; i < replay->count; i++) {
		struct head_row *replayed = &replay->heads[i], head;
		buf_reset(&value);
		if (replayed->state != HEAD_LIVE ||
		    btree_get(heads, replayed->stable_id.bytes, sizeof replayed->stable_id.bytes, &value) < 0 ||
		    journal_head_row_decode(value.data, value.size, &head) < 0)
			continue;
		const char *field = manifest_replay_head_difference(&head, replayed);
		if (field && strcmp(field, "table version record") == 0)
			replayed->table = head.table;
	}
	buf_free(&value);
	btree_free(heads);
	return 0;
}

int manifest_replay_branch(struct manifest *manifest, const struct branch_record *branch,
			 struct manifest_replay *out, char *problem, size_t problem_size)
{
	struct block_address *chain = NULL;
	size_t count = 0, capacity = 0;
	struct block_address address = branch->head_record;
	struct ulid expected = branch->head_commit;
	uint64_t child_version = UINT64_MAX;
	struct root_record latest;
	uint64_t horizon = manifest_latest(manifest, &latest) == 0 ? latest.horizon : 0;
	bool truncated = false;
	uint64_t oldest_version = 0;
	struct ulid oldest_id = { 0 };
	int rc = 0;
	while (!block_address_is_null(address)) {
		struct commit_record record;
		struct ulid current = expected;
		rc = manifest_commit_read(manifest, address, &record);
		if (rc < 0) {
			snprintf(problem, problem_size, "the commit record at offset %llu is unreadable",
				 (unsigned long long)address.offset);
			goto out;
		}
		bool linked = ulid_compare(&record.id, &expected) == 0 && record.version < child_version;
		struct block_address next = record.parent_count ? record.parent_records[0] : (struct block_address){ 0, 0 };
		if (record.parent_count)
			expected = record.parents[0];
		child_version = record.version;
		journal_commit_record_free(&record);
		if (!linked) {
			snprintf(problem, problem_size, "the commit chain is broken at offset %llu",
				 (unsigned long long)address.offset);
			rc = -EIO;
			goto out;
		}
		if (count == capacity) {
			capacity = capacity ? capacity * 2 : 64;
			struct block_address *grown = realloc(chain, capacity * sizeof *grown);
			if (!grown) {
				rc = -ENOMEM;
				goto out;
			}
			chain = grown;
		}
		chain[count++] = address;
		address = next;
		if (horizon && !block_address_is_null(next) && manifest_commit_id_version(&expected) <= horizon) {
			truncated = true;   /* the parent was reclaimed: this commit is the oldest kept */
			oldest_version = child_version;
			oldest_id = current;
			break;
		}
	}
	size_t replayed = count;
	if (truncated) {
		if (oldest_version <= horizon) {
			struct manifest_snapshot state = { .version = latest.version, .root = latest, .branch = *branch };
			rc = manifest_heads_each(manifest, &state, false, seed_head, out);
			if (rc == 0)
				rc = manifest_heads_each(manifest, &state, true, seed_head, out);
			goto out;
		}
		if ((rc = replay_seed(manifest, oldest_version, &oldest_id, out, problem, problem_size)) < 0)
			goto out;
		replayed = count - 1;   /* the oldest commit's changes are in its state */
	}
	for (size_t i = replayed; i-- > 0;) {
		struct commit_record record;
		rc = manifest_commit_read(manifest, chain[i], &record);
		if (rc < 0) {
			snprintf(problem, problem_size, "the commit record at offset %llu is unreadable",
				 (unsigned long long)chain[i].offset);
			goto out;
		}
		for (size_t c = 0; c < record.change_count && rc == 0; c++)
			rc = replay_apply(out, &record.changes[c].head_after);
		journal_commit_record_free(&record);
		if (rc < 0)
			goto out;
	}
	rc = adopt_compacted(manifest, branch, out);
out:
	free(chain);
	return rc;
}

/* The first field in which two head rows differ, or NULL. */
const char *manifest_replay_head_difference(const struct head_row *a, const struct head_row *b)
{
	if (a->state != b->state)
		return "state";
	if (ulid_compare(&a->stable_id, &b->stable_id) != 0)
		return "stable_table_id";
	if (ulid_compare(&a->incarnation, &b->incarnation) != 0)
		return "incarnation_id";
	if (strcmp(a->name, b->name) != 0)
		return "table_key";
	if (a->table_version != b->table_version)
		return "table_version";
	if (strcmp(a->owner, b->owner) != 0)
		return "table_branch";
	if (a->row_count != b->row_count)
		return "row_count";
	if (a->byte_size != b->byte_size)
		return "byte_size";
	if (strcmp(a->schema_hash, b->schema_hash) != 0)
		return "schema_hash";
	if (a->kind != b->kind)
		return "kind";
	if (ulid_compare(&a->commit, &b->commit) != 0)
		return "head_graph_commit_id";
	if (a->commit_time_us != b->commit_time_us)
		return "commit_time";
	if (a->table.segment != b->table.segment || a->table.offset != b->table.offset)
		return "table version record";
	return NULL;
}

int manifest_name_compare(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	int order = memcmp(a, b, la < lb ? la : lb);
	return order ? order : (la < lb ? -1 : la > lb ? 1 : 0);
}

static int live_order(const void *left, const void *right)
{
	const struct head_row *const *a = left, *const *b = right;
	return manifest_name_compare((*a)->name, (*b)->name);
}

/* The replay's live heads in names-tree order. */
const struct head_row **manifest_replay_live_by_name(const struct manifest_replay *replay, size_t *count)
{
	const struct head_row **live = calloc(replay->count ? replay->count : 1, sizeof *live);
	*count = 0;
	if (!live)
		return NULL;
	for (size_t i = 0; i < replay->count; i++)
		if (replay->heads[i].state == HEAD_LIVE)
			live[(*count)++] = &replay->heads[i];
	qsort(live, *count, sizeof *live, live_order);
	return live;
}

/* ---- the replay against the branch's trees ------------------------------------------ */

int manifest_replay_compare(struct manifest *manifest, const struct branch_record *branch,
			    const struct manifest_replay *replay, void (*differ)(void *context, const char *line),
			    void *context)
{
	char line[768];
	int differences = 0;
	struct btree *heads = NULL, *names = NULL;
	struct btree_iterator *iterator = NULL;
	const struct head_row **live = NULL;
	const uint8_t *key, *value;
	size_t key_size, value_size, index = 0;
	char text[ULID_TEXT_SIZE];
	int rc;
#define DIFFER(...)                                           \
	do {                                                  \
		differences++;                                \
		if (differ) {                                 \
			snprintf(line, sizeof line, __VA_ARGS__); \
			differ(context, line);                \
		}                                             \
	} while (0)
	if ((rc = btree_open(manifest->pager, branch->heads, &heads)) < 0 ||
	    (rc = btree_iterator_open(heads, NULL, 0, &iterator)) < 0)
		goto out;
	while ((rc = btree_iterator_next(iterator, &key, &key_size, &value, &value_size)) == 1) {
		struct head_row head;
		if (key_size != 16 || journal_head_row_decode(value, value_size, &head) < 0 ||
		    memcmp(head.stable_id.bytes, key, 16) != 0) {
			DIFFER("branch %s: a head row is damaged (malformed or unknown state)", branch->name);
			continue;
		}
		ulid_format(&head.stable_id, text);
		while (index < replay->count && memcmp(replay->heads[index].stable_id.bytes, key, 16) < 0) {
			char missing[ULID_TEXT_SIZE];
			ulid_format(&replay->heads[index].stable_id, missing);
			DIFFER("branch %s: the head of table %s (stable id %s) is missing; the journal has it",
			       branch->name, replay->heads[index].name, missing);
			index++;
		}
		if (index == replay->count || memcmp(replay->heads[index].stable_id.bytes, key, 16) != 0) {
			DIFFER("branch %s: head of table %s (stable id %s) is not in the journal", branch->name,
			       head.name, text);
			continue;
		}
		const char *field = manifest_replay_head_difference(&head, &replay->heads[index]);
		if (field)
			DIFFER("branch %s: head of table %s (stable id %s): %s differs from the journal replay",
			       branch->name, head.name, text, field);
		index++;
	}
	if (rc < 0)
		goto out;
	for (; index < replay->count; index++) {
		ulid_format(&replay->heads[index].stable_id, text);
		DIFFER("branch %s: the head of table %s (stable id %s) is missing; the journal has it",
		       branch->name, replay->heads[index].name, text);
	}
	btree_iterator_free(iterator);
	iterator = NULL;
	size_t live_count;
	live = manifest_replay_live_by_name(replay, &live_count);
	if (!live) {
		rc = -ENOMEM;
		goto out;
	}
	if ((rc = btree_open(manifest->pager, branch->names, &names)) < 0 ||
	    (rc = btree_iterator_open(names, NULL, 0, &iterator)) < 0)
		goto out;
	index = 0;
	while ((rc = btree_iterator_next(iterator, &key, &key_size, &value, &value_size)) == 1) {
		char name[JOURNAL_NAME_MAX + 1];
		snprintf(name, sizeof name, "%.*s", (int)(key_size > JOURNAL_NAME_MAX ? JOURNAL_NAME_MAX : key_size),
			 (const char *)key);
		while (index < live_count && manifest_name_compare(live[index]->name, name) < 0) {
			DIFFER("branch %s: names lacks live table %s", branch->name, live[index]->name);
			index++;
		}
		if (index == live_count || strcmp(live[index]->name, name) != 0) {
			DIFFER("branch %s: names lists %s, which is not a live table in the journal", branch->name, name);
			continue;
		}
		if (value_size != 16 || memcmp(value, live[index]->stable_id.bytes, 16) != 0)
			DIFFER("branch %s: names entry %s points at the wrong stable id", branch->name, name);
		index++;
	}
	if (rc < 0)
		goto out;
	for (; index < live_count; index++)
		DIFFER("branch %s: names lacks live table %s", branch->name, live[index]->name);
	rc = 0;
#undef DIFFER
out:
	free(live);
	btree_iterator_free(iterator);
	btree_free(heads);
	btree_free(names);
	return rc < 0 ? rc : differences;
}
