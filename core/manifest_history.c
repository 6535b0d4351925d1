/*
 * manifest_history — reading the past (layer: manifest): the last root of a
 * version, a branch as of a version through its ancestry, commit records, a
 * branch's log, commits by id and versions by time. Nothing here writes.
 *
 * Invariants relied on (kept by manifest_publish.c):
 *   1. Root times never decrease: a publish stamps max(now, the previous
 *      root's time), so the version index, read at any version, is also an
 *      index by time (docs/FORMAT.md §16.3).
 *   2. A branch that another branch was forked from cannot be deleted while
 *      that branch exists, so every ancestor of a live branch is live, with
 *      the incarnation it had at the fork.
 *   3. A branch created at store version C is in the branches tree of every
 *      root from its creation on: below C its state is its source's state
 *      (docs/MOUNT.md "History"), at or above C it is its own record in the
 *      last root of that version.
 *   4. A branch made at a commit (`branch create --at`) has no source and a
 *      non-zero fork point, the version of that commit: below C its state is
 *      what its first-parent chain from that commit left, whichever branch
 *      (deleted since or not) made each commit.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "manifest_int.h"

/* A version every retained state needs is not in the index: the store is damaged. -EIO. */
static int index_lacks(const struct manifest *manifest, uint64_t version)
{
	io_log(LOG_ERR, "%s/manifest: version %llu is missing from the version index", manifest->path,
	       (unsigned long long)version);
	return -EIO;
}

/* A retained version's index entry through cursor: 0, or -EIO (missing or damaged), -errno. */
static int cursor_entry(const struct manifest *manifest, struct manifest_versions_cursor *cursor, uint64_t version,
			struct manifest_version_entry *out)
{
	int rc = manifest_versions_cursor_get(cursor, version, out);
	return rc == -ENOENT ? index_lacks(manifest, version) : rc;
}

int manifest_root_at(struct manifest *manifest, const struct root_record *latest, uint64_t version,
		     struct root_record *out)
{
	if (version > latest->version || (latest->horizon && version <= latest->horizon))
		return -ENOENT;
	if (version == latest->version) {
		*out = *latest;
		return 0;
	}
	struct manifest_version_entry entry;
	int rc = manifest_versions_get(manifest->pager, NULL, latest->versions, version, &entry);
	if (rc == -ENOENT)
		return index_lacks(manifest, version);
	if (rc == 0)
		rc = manifest_root_read(manifest->pager, entry.root, out);
	if (rc == 0 && out->version != version) {
		io_log(LOG_ERR, "%s/manifest: version index entry %llu names a root of version %llu",
			manifest->path, (unsigned long long)version, (unsigned long long)out->version);
		rc = -EIO;
	}
	return rc;
}

int manifest_snapshot_latest(struct manifest *manifest, const char *branch,
			     struct manifest_snapshot *out)
{
	struct root_record latest;
	int rc = manifest_refresh_for_read(manifest);
	if (rc == 0)
		rc = manifest_latest(manifest, &latest);
	if (rc == 0)
		rc = manifest_branch_find(manifest->pager, latest.branches, branch, &out->branch);
	if (rc == 0) {
		out->version = latest.version;
		out->root = latest;
	}
	return rc;
}

/*
 * Finds the branch of name's ancestry whose record holds name's state at
 * version: name itself from its creation on, else the branch it was forked
 * from, recursively (invariant 3). Reads only the latest branches tree.
 */
static int ancestry_owner(struct manifest *manifest, const struct root_record *latest, const char *name,
			  uint64_t version, struct branch_record *out)
{
	int rc = manifest_branch_find(manifest->pager, latest->branches, name, out);
	for (int depth = 0; rc == 0 && version < out->created_version; depth++) {
		char child[JOURNAL_NAME_MAX + 1], source[JOURNAL_NAME_MAX + 1];
		snprintf(child, sizeof child, "%s", out->name);
		snprintf(source, sizeof source, "%s", out->forked_from);
		if (!source[0] && out->fork_point)
			return 1;   /* made at a commit (invariant 4): its state is its first-parent chain's */
		if (!source[0] || depth >= MANIFEST_BRANCH_DEPTH_MAX)
			return -ENOENT;
		rc = manifest_branch_find(manifest->pager, latest->branches, source, out);
		if (rc == -ENOENT) {
			/* invariant 2: a source outlives the branches forked from it */
			io_log(LOG_ERR, "%s/manifest: branch %s was forked from %s, which no longer exists",
				manifest->path, child, source);
			rc = -EIO;
		}
	}
	return rc;
}

/*
 * The state at version of a branch made at a commit (invariant 4), before it was
 * made: the state the newest commit at or below version of the first-parent chain
 * from that commit left (git's view of a branch). O(commits walked).
 */
static int chain_state_at(struct manifest *manifest, const struct root_record *latest,
			  const struct branch_record *owner, uint64_t version, struct manifest_snapshot *out)
{
	struct root_record made_at, root;
	struct commit_record record;
	journal_commit_record_init(&record);
	int rc = manifest_root_at(manifest, latest, owner->fork_point, &made_at);
	struct block_address address = made_at.commit;
	while (rc == 0) {
		journal_commit_record_free(&record);
		if ((rc = manifest_commit_read(manifest, address, &record)) < 0)
			break;
		if (record.version <= version)
			break;
		if (record.parent_count == 0 ||
		    (latest->horizon && manifest_commit_id_version(&record.parents[0]) <= latest->horizon)) {
			rc = -ENOENT;   /* before the chain's first commit, or reclaimed */
			break;
		}
		address = record.parent_records[0];
	}
	if (rc == 0)
		rc = manifest_snapshot_of_commit(manifest, &record.id, address, out);
	if (rc == 0)
		rc = manifest_root_at(manifest, latest, version, &root);
	if (rc == 0) {
		out->version = version;
		out->root = root;
	}
	journal_commit_record_free(&record);
	return rc;
}

int manifest_snapshot_at(struct manifest *manifest, const char *branch, uint64_t version,
			 struct manifest_snapshot *out)
{
	struct root_record latest, root;
	struct branch_record owner;
	int rc = manifest_refresh_for_read(manifest);
	if (rc == 0)
		rc = manifest_latest(manifest, &latest);
	/* reclaimed by gc (store_version_missing says so), before the first version, or after the latest */
	if (rc == 0 && (version == 0 || version > latest.version || (latest.horizon && version <= latest.horizon)))
		return -ENOENT;
	if (rc == 0)
		rc = ancestry_owner(manifest, &latest, branch, version, &owner);
	if (rc == 1)
		return chain_state_at(manifest, &latest, &owner, version, out);
	if (rc < 0)
		return rc;
	rc = manifest_root_at(manifest, &latest, version, &root);
	if (rc == 0)
		rc = manifest_branch_find(manifest->pager, root.branches, owner.name, &out->branch);
	if (rc == 0 && ulid_compare(&out->branch.incarnation, &owner.incarnation) != 0) {
		io_log(LOG_ERR, "%s/manifest: branch %s at version %llu is of another incarnation than its record",
			manifest->path, owner.name, (unsigned long long)version);
		rc = -EIO;
	} else if (rc == -ENOENT && version >= owner.created_version) {
		io_log(LOG_ERR, "%s/manifest: branch %s is missing from the root of version %llu",
			manifest->path, owner.name, (unsigned long long)version);
		rc = -EIO;
	}
	/* before the first commit of the ancestry there is nothing to show */
	if (rc == 0 && out->branch.head_version == 0)
		rc = -ENOENT;
	if (rc == 0) {
		out->version = version;
		out->root = root;
	}
	return rc;
}

int manifest_commit_read(struct manifest *manifest, struct block_address address,
			 struct commit_record *out)
{
	struct buf raw;
	buf_init(&raw);
	int rc = pager_read(manifest->pager, address, BLOCK_COMMIT, &raw);
	if (rc == 0) {
		rc = journal_commit_record_decode(raw.data, raw.size, manifest_format_version(manifest), out);
		if (rc == -EIO)
			io_log(LOG_ERR, "%s/manifest: commit record at offset %llu is damaged",
				manifest->path, (unsigned long long)address.offset);
	} else {
		journal_commit_record_init(out);
	}
	buf_free(&raw);
	return rc;
}

#define PREFETCH_COMMITS 16

void manifest_prefetch_commits(struct manifest *manifest, uint64_t version, bool first_parent)
{
	struct root_record latest;
	if (!pager_prefetches(manifest->pager) || manifest_latest(manifest, &latest) < 0)
		return;
	struct block_address roots[PREFETCH_COMMITS], records[PREFETCH_COMMITS];
	size_t count = 0, named = 0;
	/* the latest version's root is the one in hand; reclaimed versions have none */
	while (count < PREFETCH_COMMITS && version > latest.horizon && version < latest.version) {
		struct manifest_version_entry entry;
		if (manifest_versions_get(manifest->pager, NULL, latest.versions, version, &entry) < 0)
			break;
		roots[count++] = entry.root;
		version = first_parent ? entry.parent_version : version + 1;
	}
	if (count < 2)
		return;   /* one record: its read fetches it */
	pager_prefetch(manifest->pager, roots, count);
	for (size_t i = 0; i < count; i++) {
		struct root_record root;
		if (manifest_root_read(manifest->pager, roots[i], &root) == 0 && !block_address_is_null(root.commit))
			records[named++] = root.commit;
	}
	pager_prefetch(manifest->pager, records, named);
}

int manifest_log_each(struct manifest *manifest, const struct manifest_snapshot *snapshot,
		      int (*visit)(const struct commit_record *record, void *context),
		      void *context)
{
	struct block_address address = snapshot->branch.head_record;
	uint64_t previous_version = UINT64_MAX;
	struct root_record latest;
	int rc = manifest_latest(manifest, &latest);
	if (rc < 0)
		return rc;
	struct ulid expected = snapshot->branch.head_commit;
	for (uint64_t walked = 0; !block_address_is_null(address); walked++) {
		struct commit_record record;
		uint64_t version = manifest_commit_id_version(&expected);
		/* past the head and its parent the walk goes on (a mount's log reads on only to the
		 * commits it already rendered): the next ones are asked for at once */
		if (walked % PREFETCH_COMMITS == 2)
			manifest_prefetch_commits(manifest, version, true);
		if (latest.horizon && version <= latest.horizon && version < snapshot->branch.head_version) {
			/* gc reclaimed it (a head's own record is kept): the line says so, and the walk ends */
			journal_commit_record_init(&record);
			record.version = version;
			record.id = expected;
			record.reclaimed = true;
			rc = visit(&record, context);
			journal_commit_record_free(&record);
			return rc;
		}
		rc = manifest_commit_read(manifest, address, &record);
		if (rc < 0)
			return rc;
		if (record.version >= previous_version) {
			io_log(LOG_ERR, "%s/manifest: commit at offset %llu does not precede its child",
				manifest->path, (unsigned long long)address.offset);
			journal_commit_record_free(&record);
			return -EIO;
		}
		previous_version = record.version;
		rc = visit(&record, context);
		address = record.parent_count > 0 ? record.parent_records[0] : (struct block_address){ 0, 0 };
		if (record.parent_count > 0)
			expected = record.parents[0];
		journal_commit_record_free(&record);
		if (rc != 0)
			return rc;
	}
	return 0;
}

int manifest_log_versions(struct manifest *manifest, const struct manifest_snapshot *snapshot,
			  int (*visit)(const struct manifest_log_version *entry, void *context), void *context)
{
	if (block_address_is_null(snapshot->branch.head_record))
		return 0;
	struct root_record latest;
	int rc = manifest_latest(manifest, &latest);
	if (rc < 0)
		return rc;
	uint64_t version = snapshot->branch.head_version, parent;
	struct manifest_log_version line = { .version = version };
	struct manifest_versions_cursor *cursor = NULL;
	if ((rc = manifest_versions_cursor_open(manifest->pager, latest.versions, &cursor)) < 0)
		return rc;
	/* the head: the latest version is not in the index, its record is */
	struct commit_record record;
	if ((rc = manifest_commit_read(manifest, snapshot->branch.head_record, &record)) == 0) {
		line.time_us = record.time_us;
		parent = record.parent_count ? manifest_commit_id_version(&record.parents[0]) : 0;
		if (record.version != version || parent >= version)
			rc = -EIO;
	}
	journal_commit_record_free(&record);
	while (rc == 0) {
		if ((rc = visit(&line, context)) != 0 || parent == 0)
			break;
		if (parent >= line.version) {
			rc = -EIO;
			break;
		}
		line = (struct manifest_log_version){ .version = parent };
		if (latest.horizon && parent <= latest.horizon) {
			/* gc reclaimed it (a head's own record is kept): the line says so, and the walk ends */
			line.reclaimed = true;
			rc = visit(&line, context);
			break;
		}
		struct manifest_version_entry entry = { 0 };
		rc = cursor_entry(manifest, cursor, parent, &entry);
		line.time_us = entry.commit_time_us;
		parent = entry.parent_version;
	}
	manifest_versions_cursor_free(cursor);
	return rc;
}

/* ---- commit ids ---------------------------------------------------------------------------- */

void manifest_commit_id(const struct ulid *base, uint64_t version, struct ulid *out)
{
	*out = *base;
	for (int b = 0; b < 5; b++)
		out->bytes[6 + b] = (uint8_t)(version >> (32 - 8 * b));
}

uint64_t manifest_commit_id_version(const struct ulid *commit)
{
	uint64_t version = 0;
	for (int b = 0; b < 5; b++)
		version = version << 8 | commit->bytes[6 + b];
	return version;
}

int manifest_version_commit(struct manifest *manifest, const struct root_record *latest,
			    uint64_t version, struct block_address *record)
{
	if (version == 0 || version > latest->version || (latest->horizon && version <= latest->horizon))
		return -ENOENT;
	struct root_record root;
	int rc = manifest_root_at(manifest, latest, version, &root);
	if (rc == 0)
		*record = root.commit;
	return rc;
}

int manifest_commit_at(struct manifest *manifest, uint64_t version, struct commit_record *out)
{
	struct root_record latest;
	struct block_address address;
	journal_commit_record_init(out);
	int rc = manifest_latest(manifest, &latest);
	if (rc == 0)
		rc = manifest_version_commit(manifest, &latest, version, &address);
	if (rc == 0)
		rc = manifest_commit_read(manifest, address, out);
	if (rc == 0 && out->version != version) {
		io_log(LOG_ERR, "%s/manifest: the root of version %llu names a commit of version %llu",
		       manifest->path, (unsigned long long)version, (unsigned long long)out->version);
		journal_commit_record_free(out);
		journal_commit_record_init(out);
		rc = -EIO;
	}
	return rc;
}

int manifest_snapshot_of_version(struct manifest *manifest, uint64_t version, struct manifest_snapshot *out)
{
	struct root_record latest;
	struct block_address address;
	struct commit_record record;
	journal_commit_record_init(&record);
	int rc = manifest_latest(manifest, &latest);
	if (rc == 0)
		rc = manifest_version_commit(manifest, &latest, version, &address);
	if (rc == 0)
		rc = manifest_commit_read(manifest, address, &record);
	if (rc == 0 && record.version != version)
		rc = -EIO;
	if (rc == 0)
		rc = manifest_snapshot_of_commit(manifest, &record.id, address, out);
	journal_commit_record_free(&record);
	return rc;
}

int manifest_snapshots_of_commit_made(struct manifest *manifest, uint64_t version, struct manifest_snapshot *made,
				      struct manifest_snapshot *base)
{
	struct root_record latest;
	int rc = manifest_latest(manifest, &latest);
	if (rc == 0)
		rc = manifest_snapshot_of_version(manifest, version, made);
	if (rc < 0)
		return rc;
	base->version = 0;
	if (version <= latest.horizon)
		return 0;   /* gc kept that state, not the roots around it */
	/* back through the later roots of that version that still have the branch at the commit
	 * (above the horizon gc keeps every root and its states, manifest_gc.c mark_chain) */
	for (;;) {
		if (block_address_is_null(made->root.previous))
			return -EIO;   /* a commit's root always follows another */
		struct root_record previous;
		struct branch_record branch;
		if ((rc = manifest_root_read(manifest->pager, made->root.previous, &previous)) < 0)
			return rc;
		if (previous.version != version) {
			if (previous.version <= latest.horizon)
				return 0;   /* its record is kept, its states are not */
			base->version = previous.version;
			base->root = previous;
			rc = manifest_branch_find(manifest->pager, previous.branches, made->branch.name, &base->branch);
			if (rc == -ENOENT)
				base->version = 0;   /* the branch did not exist there */
			return rc == -ENOENT ? 0 : rc;
		}
		if ((rc = manifest_branch_find(manifest->pager, previous.branches, made->branch.name, &branch)) < 0 ||
		    ulid_compare(&branch.head_commit, &made->branch.head_commit) != 0)
			return rc < 0 ? rc : -EIO;   /* the commit's root has its branch at the commit */
		made->root = previous;
		made->branch = branch;
	}
}

int manifest_commit_find(struct manifest *manifest, const struct ulid *commit, uint64_t *version,
			 struct block_address *record)
{
	struct root_record latest;
	struct block_address address;
	struct commit_record found;
	journal_commit_record_init(&found);
	uint64_t claimed = manifest_commit_id_version(commit);
	int rc = manifest_refresh(manifest, NULL);
	if (rc == 0)
		rc = manifest_latest(manifest, &latest);
	if (rc == 0)
		rc = manifest_version_commit(manifest, &latest, claimed, &address);
	if (rc == 0)
		rc = manifest_commit_read(manifest, address, &found);
	if (rc == 0 && (found.version != claimed))
		rc = -EIO;
	if (rc == 0 && ulid_compare(&found.id, commit) != 0)
		rc = -ENOENT;
	if (rc == 0) {
		if (version)
			*version = claimed;
		if (record)
			*record = address;
	}
	journal_commit_record_free(&found);
	return rc;
}

/* ---- versions by time ---------------------------------------------------------------------- */

/*
 * Commit times never decrease with the version (every publish stamps its root
 * with max(now, the previous root's time), and a commit's time is its root's),
 * so the version of an instant is the newest version whose commit time is at
 * or before it: a binary search over the commit times the version index's
 * leaves record (FORMAT.md §16.1, §16.3), through one cursor, so that the
 * nodes near the root are read once; the latest version's time is its record's.
 */
int manifest_version_at_time(struct manifest *manifest, uint64_t time_us, uint64_t *version)
{
	struct root_record latest;
	int rc = manifest_refresh(manifest, NULL);
	if (rc == 0)
		rc = manifest_latest(manifest, &latest);
	if (rc < 0)
		return rc;
	uint64_t low = latest.horizon + 1, high = latest.version, best = 0;
	if (high < low)
		return -ENOENT;
	struct manifest_versions_cursor *cursor;
	if ((rc = manifest_versions_cursor_open(manifest->pager, latest.versions, &cursor)) < 0)
		return rc;
	while (rc == 0 && low <= high) {
		uint64_t middle = low + (high - low) / 2, at = 0;
		if (middle == latest.version) {
			struct commit_record record;
			if ((rc = manifest_commit_read(manifest, latest.commit, &record)) == 0)
				at = record.time_us;
			journal_commit_record_free(&record);
		} else {
			struct manifest_version_entry entry = { 0 };
			rc = cursor_entry(manifest, cursor, middle, &entry);
			at = entry.commit_time_us;
		}
		if (rc < 0)
			break;
		if (at <= time_us) {
			best = middle;
			low = middle + 1;
		} else {
			high = middle - 1;
		}
	}
	manifest_versions_cursor_free(cursor);
	if (rc < 0)
		return rc;
	if (best == 0)
		return -ENOENT;
	*version = best;
	return 0;
}

/* ---- merge base ------------------------------------------------------------------------------ */

enum { FROM_A = 1, FROM_B = 2 };

struct base_entry {
	uint64_t version;
	struct ulid id;
	struct block_address record;
	unsigned flags;
	bool queued;                 /* in the heap (not popped yet) */
};

struct base_walk {
	struct base_entry *entries;  /* every commit seen, by slot of the hash */
	size_t capacity;             /* a power of two */
	size_t count;
	size_t *heap;                /* entry slots, newest version first */
	size_t heap_count;
};

static size_t walk_slot(const struct base_walk *walk, const struct ulid *id)
{
	uint64_t hash = 1469598103934665603ull;
	for (int i = 0; i < 16; i++)
		hash = (hash ^ id->bytes[i]) * 1099511628211ull;
	size_t slot = (size_t)hash & (walk->capacity - 1);
	while (walk->entries[slot].version && ulid_compare(&walk->entries[slot].id, id) != 0)
		slot = (slot + 1) & (walk->capacity - 1);
	return slot;
}

static bool heap_before(const struct base_walk *walk, size_t a, size_t b)
{
	return walk->entries[walk->heap[a]].version > walk->entries[walk->heap[b]].version;
}

static void heap_swap(struct base_walk *walk, size_t a, size_t b)
{
	size_t t = walk->heap[a];
	walk->heap[a] = walk->heap[b];
	walk->heap[b] = t;
}

static size_t heap_pop(struct base_walk *walk)
{
	size_t top = walk->heap[0];
	walk->heap[0] = walk->heap[--walk->heap_count];
	for (size_t at = 0;;) {
		size_t best = at, left = 2 * at + 1, right = left + 1;
		if (left < walk->heap_count && heap_before(walk, left, best))
			best = left;
		if (right < walk->heap_count && heap_before(walk, right, best))
			best = right;
		if (best == at)
			break;
		heap_swap(walk, at, best);
		at = best;
	}
	return top;
}

static int walk_grow(struct base_walk *walk)
{
	size_t capacity = walk->capacity ? walk->capacity * 2 : 256;
	struct base_entry *entries = calloc(capacity, sizeof *entries);
	size_t *heap = malloc(capacity * sizeof *heap);
	if (!entries || !heap) {
		free(entries);
		free(heap);
		return -ENOMEM;
	}
	struct base_walk grown = { .entries = entries, .capacity = capacity, .count = walk->count, .heap = heap };
	for (size_t i = 0; i < walk->capacity; i++)
		if (walk->entries[i].version) {
			size_t slot = walk_slot(&grown, &walk->entries[i].id);
			entries[slot] = walk->entries[i];
			walk->entries[i].version = 0;
		}
	for (size_t i = 0; i < capacity; i++)   /* the whole new table: entries moved to its upper half too */
		if (entries[i].version && entries[i].queued)
			heap[grown.heap_count++] = i;
	/* rebuild the heap order */
	for (size_t i = grown.heap_count; i-- > 0;)
		for (size_t at = i;;) {
			size_t best = at, left = 2 * at + 1, right = left + 1;
			if (left < grown.heap_count && heap_before(&grown, left, best))
				best = left;
			if (right < grown.heap_count && heap_before(&grown, right, best))
				best = right;
			if (best == at)
				break;
			heap_swap(&grown, at, best);
			at = best;
		}
	free(walk->entries);
	free(walk->heap);
	*walk = grown;
	return 0;
}

/* Notes that commit id (at record) is reached from flags' side(s), queueing it when new. */
static int walk_reach(struct base_walk *walk, const struct ulid *id, struct block_address record, unsigned flags)
{
	if ((walk->count + 1) * 2 > walk->capacity) {
		int rc = walk_grow(walk);
		if (rc < 0)
			return rc;
	}
	size_t slot = walk_slot(walk, id);
	struct base_entry *entry = &walk->entries[slot];
	if (entry->version) {
		entry->flags |= flags;   /* not yet popped: parents always have lower versions */
		return 0;
	}
	entry->version = manifest_commit_id_version(id);
	entry->id = *id;
	entry->record = record;
	entry->flags = flags;
	entry->queued = true;
	walk->count++;
	walk->heap[walk->heap_count] = slot;
	for (size_t at = walk->heap_count++; at > 0 && heap_before(walk, at, (at - 1) / 2); at = (at - 1) / 2)
		heap_swap(walk, at, (at - 1) / 2);
	return 0;
}

int manifest_merge_base(struct manifest *manifest, const struct ulid *a, struct block_address a_record,
			const struct ulid *b, struct block_address b_record, struct ulid *base_out,
			uint64_t *version_out, struct block_address *record_out)
{
	struct root_record latest;
	struct base_walk walk = { 0 };
	struct commit_record record;
	journal_commit_record_init(&record);
	int rc = manifest_latest(manifest, &latest);
	if (rc == 0 && (ulid_is_zero(a) || ulid_is_zero(b)))
		rc = -ENOENT;
	if (rc == 0)
		rc = walk_reach(&walk, a, a_record, FROM_A);
	if (rc == 0)
		rc = walk_reach(&walk, b, b_record, FROM_B);
	if (rc < 0)
		goto out;
	rc = -ENOENT;
	while (walk.heap_count > 0) {
		size_t slot = heap_pop(&walk);
		walk.entries[slot].queued = false;
		struct base_entry entry = walk.entries[slot];
		if (entry.flags == (FROM_A | FROM_B)) {
			*base_out = entry.id;
			*version_out = entry.version;
			*record_out = entry.record;
			rc = 0;
			break;
		}
		/* below the horizon only the heads themselves are kept: walk no further */
		bool is_head = ulid_compare(&entry.id, a) == 0 || ulid_compare(&entry.id, b) == 0;
		if (latest.horizon && entry.version <= latest.horizon && !is_head)
			continue;
		journal_commit_record_free(&record);
		int read = manifest_commit_read(manifest, entry.record, &record);
		if (read < 0) {
			rc = read;
			break;
		}
		for (size_t i = 0; i < record.parent_count; i++)
			if ((read = walk_reach(&walk, &record.parents[i], record.parent_records[i], entry.flags)) < 0)
				break;
		if (read < 0) {
			rc = read;
			break;
		}
	}
out:
	journal_commit_record_free(&record);
	free(walk.entries);
	free(walk.heap);
	return rc;
}

int manifest_snapshot_of_commit(struct manifest *manifest, const struct ulid *commit, struct block_address record,
				struct manifest_snapshot *out)
{
	struct root_record latest;
	struct commit_record found;
	journal_commit_record_init(&found);
	int rc = manifest_latest(manifest, &latest);
	if (rc == 0)
		rc = manifest_commit_read(manifest, record, &found);
	if (rc == 0 && ulid_compare(&found.id, commit) != 0)
		rc = -EIO;
	if (rc == 0)
		rc = manifest_root_at(manifest, &latest, found.version, &out->root);
	if (rc == 0)
		rc = manifest_branch_find(manifest->pager, out->root.branches, found.branch, &out->branch);
	/* A branch deleted (or re-created) at the same version left a later root of that
	 * version: the commit's own root is an earlier one, unless gc swept it away. */
	while ((rc == -ENOENT || (rc == 0 && ulid_compare(&out->branch.head_commit, commit) != 0)) &&
	       !block_address_is_null(out->root.previous) && out->root.previous.offset >= latest.swept_below) {
		struct root_record previous;
		if (manifest_root_read(manifest->pager, out->root.previous, &previous) < 0 ||
		    previous.version != found.version)
			break;
		out->root = previous;
		rc = manifest_branch_find(manifest->pager, out->root.branches, found.branch, &out->branch);
	}
	if (rc == 0 && ulid_compare(&out->branch.head_commit, commit) != 0)
		rc = -EIO;   /* the last root of that version has the branch at another commit */
	if (rc == 0)
		out->version = found.version;
	journal_commit_record_free(&found);
	return rc;
}
