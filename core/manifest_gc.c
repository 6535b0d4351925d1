/*
 * manifest_gc — retention: the horizon, and giving space back (docs/FORMAT.md
 * §4 "Reclaimed space", §14, §21; docs/ARCHITECTURE.md "Retention").
 *
 * One gc moves through these states (enum gc_state), each step durable
 * before the next begins, so a crash anywhere leaves the store before or
 * after the gc and a rerun finishes it:
 *
 *   LOCKED    the gc lock (pins file) is held: one gc at a time
 *   HORIZON   a root recording the new horizon is durable: from now on no
 *             reader resolves a version at or below it (failpoint
 *             gc.after_horizon); the sweep sequence is advanced, then the
 *             pins are listed: every reader that resolved earlier is in
 *             that list (manifest_pins.c)
 *   PRUNED    a second root is durable whose version index keeps only the
 *             versions above the horizon and the pinned ones, and whose
 *             swept_below is its own offset (failpoint gc.after_prune)
 *   MARKED    everything a retained state reaches is known: the latest
 *             root, every branch's and tag's state, every version above the
 *             horizon and every pinned one, the chain of roots back to the
 *             first at or below the horizon
 *   PACKED    every marked block below swept_below is in the durable pack
 *             packs/<swept_below> (docs/FORMAT.md §22), and this handle
 *             reads that range from it (failpoint gc.after_pack)
 *   SWEPT     every page below swept_below is a hole (failpoint
 *             gc.after_punch), every segment nothing marked names and no
 *             sidecar names is removed (failpoint gc.before_segment_remove),
 *             the preallocated zeros are returned, and older packs are removed
 *             (failpoint gc.before_pack_remove)
 *
 * Invariants kept:
 *   1. Nothing a retained state reaches is ever lost: the mark is taken from
 *      a root read after the segment list and the sidecars (a segment
 *      published meanwhile is named by that root or by a sidecar), and every
 *      marked manifest block below swept_below is in the pack before any
 *      page there is punched.
 *   2. Only bytes below the gc's own root are punched; publishes after it
 *      append above it and reach below it only through retained states.
 *   3. A pin taken before the pins are listed keeps its version, below the
 *      horizon too; new readers of versions at or below the horizon are
 *      refused (manifest_snapshot_at), so no pin appears there afterwards.
 *   4. A pack's blocks keep their manifest addresses: nothing that points at
 *      them is rewritten. A reader in another process that still reads the
 *      manifest below the new pack's offset finds holes, and its pager moves
 *      to the newest pack and retries (pager.h "packs"); an older pack is
 *      removed only once the new one is durable and the manifest punched.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "manifest_int.h"
#include "pack.h"

#define GC_PAGE 4096u

enum gc_state { GC_IDLE, GC_LOCKED, GC_HORIZON, GC_PRUNED, GC_MARKED, GC_PACKED, GC_SWEPT };

/* An open-addressing set of block addresses (never removed from). */
struct address_set {
	struct block_address *slots;   /* offset 0: empty (no block lives at offset 0) */
	size_t capacity, count;
};

struct interval {
	uint64_t start, end;
};

struct gc_mark {
	struct manifest *manifest;
	struct pager *pager;
	uint64_t horizon;
	const struct manifest_pin_list *pins;
	struct address_set seen;
	struct interval *intervals;    /* manifest blocks reached: [start, end) */
	size_t interval_count, interval_capacity;
	uint64_t *segments;            /* segment ids reached (unsorted, unique) */
	size_t segment_count, segment_capacity;
	uint64_t versions_marked;
	manifest_progress_fn progress;
	void *progress_context;
	uint64_t progress_total;
};

struct gc {
	enum gc_state state;
	struct manifest *manifest;
	const struct manifest_gc_request *request;
	struct manifest_gc_result *result;
	struct error_info *error;
};

static void gc_enter(struct gc *gc, enum gc_state next)
{
	assert(next == GC_IDLE || next == gc->state + 1 || (gc->state == GC_LOCKED && next == GC_PRUNED));
	gc->state = next;
}

/* ---- the mark ----------------------------------------------------------------------- */

static uint64_t address_hash(struct block_address address)
{
	uint64_t x = address.offset * 0x9e3779b97f4a7c15ull ^ address.segment * 0xc2b2ae3d27d4eb4full;
	return x ^ (x >> 29);
}

/* Adds address: 1 if it was new, 0 if seen before, -ENOMEM. */
static int address_set_add(struct address_set *set, struct block_address address)
{
	if ((set->count + 1) * 4 > set->capacity * 3) {
		size_t capacity = set->capacity ? set->capacity * 2 : 1024;
		struct block_address *slots = calloc(capacity, sizeof *slots);
		if (!slots)
			return -ENOMEM;
		for (size_t i = 0; i < set->capacity; i++) {
			if (set->slots[i].offset == 0)
				continue;
			size_t at = address_hash(set->slots[i]) & (capacity - 1);
			while (slots[at].offset != 0)
				at = (at + 1) & (capacity - 1);
			slots[at] = set->slots[i];
		}
		free(set->slots);
		set->slots = slots;
		set->capacity = capacity;
	}
	size_t at = address_hash(address) & (set->capacity - 1);
	while (set->slots[at].offset != 0) {
		if (set->slots[at].offset == address.offset && set->slots[at].segment == address.segment)
			return 0;
		at = (at + 1) & (set->capacity - 1);
	}
	set->slots[at] = address;
	set->count++;
	return 1;
}

static int segment_add(struct gc_mark *mark, uint64_t segment)
{
	for (size_t i = 0; i < mark->segment_count; i++)
		if (mark->segments[i] == segment)
			return 0;
	int rc = MANIFEST_ARRAY_GROW(mark->segments, mark->segment_capacity, mark->segment_count);
	if (rc < 0)
		return rc;
	mark->segments[mark->segment_count++] = segment;
	return 0;
}

/*
 * Marks one block: a manifest block's bytes, a segment's id. Returns 0 the
 * first time (go on below it), 1 when seen before, -errno.
 */
static int mark_block(struct block_address address, void *context)
{
	struct gc_mark *mark = context;
	if (block_address_is_null(address))
		return 1;
	int rc = address_set_add(&mark->seen, address);
	if (rc <= 0)
		return rc < 0 ? rc : 1;
	if (address.segment != 0)
		return segment_add(mark, address.segment);
	uint64_t size;
	if ((rc = pager_block_size(mark->pager, address, &size)) < 0)
		return rc;
	if ((rc = MANIFEST_ARRAY_GROW(mark->intervals, mark->interval_capacity, mark->interval_count)) < 0)
		return rc;
	mark->intervals[mark->interval_count++] = (struct interval){ address.offset, address.offset + size };
	return 0;
}

static int mark_head(const uint8_t *key, size_t key_size, const uint8_t *value, size_t value_size, void *context)
{
	struct gc_mark *mark = context;
	struct head_row head;
	int rc = journal_head_row_decode(value, value_size, &head);
	if (rc < 0)
		return rc;
	/* a dropped table's last version is history, kept only while its versions are */
	if (head.state != HEAD_LIVE)
		return 0;
	if ((rc = mark_block(head.table, mark)) != 0)
		return rc < 0 ? rc : 0;
	struct table_info info;
	if ((rc = table_info_read(mark->pager, head.table, &info)) < 0)
		return rc;
	return table_blocks_each(mark->pager, &info, mark_block, mark);
}

/* Everything one branch state reaches: its head commit's record, its heads
 * and names trees, every live table version under them. */
static int mark_state(struct gc_mark *mark, const struct branch_record *state)
{
	int rc = mark_block(state->head_record, mark);
	if (rc < 0)
		return rc;
	if ((rc = btree_nodes_each(mark->pager, state->heads, mark_block, mark_head, mark)) < 0 ||
	    (rc = btree_nodes_each(mark->pager, state->names, mark_block, NULL, mark)) < 0)
		return rc;
	return 0;
}

static int mark_branch_entry(const uint8_t *key, size_t key_size, const uint8_t *value, size_t value_size,
			     void *context)
{
	struct branch_record branch;
	int rc = manifest_branch_decode(value, value_size, &branch);
	return rc < 0 ? rc : mark_state(context, &branch);
}

/* A root and every branch state in it (its own version index and tags are not
 * read through an old root: only the latest's are). */
static int mark_root_states(struct gc_mark *mark, const struct root_record *root)
{
	int rc = mark_block(root->self, mark);
	if (rc < 0)
		return rc;
	if ((rc = mark_block(root->commit, mark)) < 0)
		return rc;
	return btree_nodes_each(mark->pager, root->branches, mark_block, mark_branch_entry, mark);
}

static int mark_version(uint64_t version, struct block_address address, void *context)
{
	struct gc_mark *mark = context;
	struct root_record root;
	int rc = manifest_root_read(mark->pager, address, &root);
	if (rc < 0)
		return rc;
	mark->versions_marked++;
	if (mark->progress && mark->versions_marked % 64 == 0)
		mark->progress(mark->versions_marked, mark->progress_total, mark->progress_context);
	return mark_root_states(mark, &root);
}

static int mark_tag(const struct manifest_tag *tag, void *context)
{
	return mark_state(context, &tag->branch);
}

static bool pinned_between(uint64_t first, uint64_t last, void *context)
{
	const struct manifest_pin_list *pins = context;
	for (size_t i = 0; pins && i < pins->count; i++)
		if (pins->ranges[i].first <= last && first <= pins->ranges[i].last)
			return true;
	return false;
}

/*
 * The chain of roots from latest back to the first at or below the horizon
 * (which stays, so that verify's walk of the chain ends on a readable root):
 * their records, and the states of those above the horizon — a version's
 * earlier roots too, not only the last one the version index names: a reader
 * that resolved the latest root before a compaction republished its version
 * (core/manifest_compact.c) reads the fragments that root names.
 */
static int mark_chain(struct gc_mark *mark, const struct root_record *latest)
{
	struct root_record root = *latest;
	for (;;) {
		int rc = root.version > mark->horizon ? mark_root_states(mark, &root) : mark_block(root.self, mark);
		if (rc < 0)
			return rc;
		if (root.version <= mark->horizon || block_address_is_null(root.previous))
			return 0;
		if ((rc = manifest_root_read(mark->pager, root.previous, &root)) < 0)
			return rc;
	}
}

/* Marks what retention keeps as of latest (MARKED). 0 or -errno. */
static int mark_retained(struct gc_mark *mark, const struct root_record *latest)
{
	mark->progress_total = latest->version - mark->horizon;
	int rc;
	if ((rc = mark_root_states(mark, latest)) < 0 || (rc = mark_chain(mark, latest)) < 0 ||
	    (rc = btree_nodes_each(mark->pager, latest->tags, mark_block, NULL, mark)) < 0 ||
	    (rc = manifest_tags_each(mark->manifest, latest, mark_tag, mark)) < 0)
		return rc;
	return manifest_versions_retained(mark->pager, latest->versions, mark->horizon, pinned_between,
					  (void *)mark->pins, mark_block, mark_version, mark);
}

static void mark_free(struct gc_mark *mark)
{
	free(mark->seen.slots);
	free(mark->intervals);
	free(mark->segments);
	memset(mark, 0, sizeof *mark);
}

int manifest_retained_segments(struct manifest *manifest, const struct root_record *latest, uint64_t **ids,
			       size_t *count)
{
	struct gc_mark mark = { .manifest = manifest, .pager = manifest->pager, .horizon = latest->horizon };
	int rc = mark_retained(&mark, latest);
	if (rc == 0) {
		*ids = mark.segments;
		*count = mark.segment_count;
		mark.segments = NULL;
	}
	mark_free(&mark);
	return rc;
}

/* ---- the sweep ---------------------------------------------------------------------- */

static int compare_intervals(const void *a, const void *b)
{
	const struct interval *x = a, *y = b;
	return (x->start > y->start) - (x->start < y->start);
}

/*
 * The whole pages of [MANIFEST_FIRST_BLOCK, below) that no marked block
 * touches: visit(start, end) for each run. 0 or the first error.
 */
static int dead_runs_each(struct gc_mark *mark, uint64_t below, int (*visit)(uint64_t start, uint64_t end, void *context),
			  void *context)
{
	if (mark->interval_count > 1)
		qsort(mark->intervals, mark->interval_count, sizeof *mark->intervals, compare_intervals);
	uint64_t at = MANIFEST_FIRST_BLOCK;
	for (size_t i = 0; i <= mark->interval_count; i++) {
		uint64_t live_start = i < mark->interval_count ? mark->intervals[i].start : below;
		if (live_start > below)
			live_start = below;
		uint64_t first = (at + GC_PAGE - 1) / GC_PAGE * GC_PAGE, last = live_start / GC_PAGE * GC_PAGE;
		if (first < last) {
			int rc = visit(first, last, context);
			if (rc < 0)
				return rc;
		}
		if (i < mark->interval_count && mark->intervals[i].end > at)
			at = mark->intervals[i].end;
		if (at >= below)
			break;
	}
	return 0;
}

struct sweep {
	struct manifest *manifest;
	bool punch;
	uint64_t bytes;      /* data bytes in the runs (before punching) */
	uint64_t runs;
};

static int sweep_run(uint64_t start, uint64_t end, void *context)
{
	struct sweep *sweep = context;
	uint64_t data;
	int rc = io_data_bytes(&sweep->manifest->file, start, end, &data);
	if (rc < 0)
		return rc;
	sweep->bytes += data;
	if (!sweep->punch || data == 0)
		return 0;
	if ((rc = io_punch_hole(&sweep->manifest->file, start, end)) < 0)
		return rc;
	if (sweep->runs++ == 0 && (rc = io_failpoint("gc.after_punch")) < 0)
		return rc;
	return 0;
}

/*
 * The zeros preallocated after the latest root were sized for the store
 * before gc: the manifest is cut to the end of the page holding its last
 * block (under the store lock: publishes write there), and the next publish
 * that reaches past the end pads one chunk again, sized for what the store
 * occupies now (docs/FORMAT.md §4). Zeros either way, so a crash midway
 * changes nothing. 0 or -errno.
 */
static int trim_preallocation(struct manifest *manifest, struct error_info *error)
{
	if (io_file_is_remote(&manifest->file))
		return 0;   /* nothing preallocated there, and what follows the end is other writers' */
	int rc = manifest_lock(manifest, error);
	if (rc < 0)
		return rc;
	uint64_t size;
	if ((rc = manifest_refresh_locked(manifest, error)) == 0 && (rc = io_size(&manifest->file, &size)) == 0) {
		uint64_t keep = (manifest_end(manifest) + GC_PAGE - 1) / GC_PAGE * GC_PAGE;
		if (size > keep && (rc = io_truncate(&manifest->file, keep)) < 0)
			error_info_set(error, rc, "cannot return the preallocated space of %s/manifest: %s", manifest->path,
				       io_strerror(rc));
	}
	manifest_unlock(manifest);
	return rc;
}

/* ---- segments --------------------------------------------------------------------------- */

struct id_list {
	uint64_t *ids;
	size_t count, capacity;
	bool unknown;        /* a sidecar could not be read: its segments are unknown */
};

static int id_list_add(struct id_list *list, uint64_t id)
{
	int rc = MANIFEST_ARRAY_GROW(list->ids, list->capacity, list->count);
	if (rc < 0)
		return rc;
	list->ids[list->count++] = id;
	return 0;
}

static bool id_list_has(const struct id_list *list, uint64_t id)
{
	for (size_t i = 0; i < list->count; i++)
		if (list->ids[i] == id)
			return true;
	return false;
}

static int collect_segment(const char *name, void *context)
{
	char *end;
	if (strlen(name) != 16)
		return 0;
	uint64_t id = strtoull(name, &end, 16);
	return *end == 0 && id != 0 ? id_list_add(context, id) : 0;
}

struct sidecar_scan {
	struct manifest *manifest;
	struct id_list *ids;
};

static int collect_sidecar(const char *name, void *context)
{
	struct sidecar_scan *scan = context;
	char path[300];
	snprintf(path, sizeof path, "recovery/%s", name);
	struct io_file file;
	int rc = io_file_open(scan->manifest->directory, path, O_RDONLY, IO_MANIFEST, &file);
	if (rc == -ENOENT)
		return 0;   /* settled meanwhile: its commit is in the root read later, or rolled back */
	if (rc < 0) {
		scan->ids->unknown = true;
		return 0;
	}
	uint64_t size;
	uint8_t *bytes = NULL;
	struct manifest_sidecar sidecar = { 0 };
	if ((rc = io_size(&file, &size)) < 0 || size > (1u << 20) || !(bytes = malloc(size ? size : 1)) ||
	    io_pread(&file, bytes, (size_t)size, 0) < 0 || manifest_sidecar_decode(bytes, (size_t)size, &sidecar) < 0) {
		scan->ids->unknown = true;   /* a .tmp being written, or damage: keep every segment */
		rc = 0;
	} else {
		for (uint32_t i = 0; i < sidecar.segment_count && rc == 0; i++)
			rc = id_list_add(scan->ids, sidecar.segments[i]);
	}
	manifest_sidecar_free(&sidecar);
	free(bytes);
	io_file_close(&file);
	return rc;
}

static bool marked_segment(const struct gc_mark *mark, uint64_t id)
{
	for (size_t i = 0; i < mark->segment_count; i++)
		if (mark->segments[i] == id)
			return true;
	return false;
}

/* Removes (or, dry, counts) the listed segments that nothing marked and no sidecar names. */
static int sweep_segments(struct gc *gc, const struct gc_mark *mark, const struct id_list *listed,
			  const struct id_list *sidecars, bool dry)
{
	if (sidecars->unknown) {
		io_log(LOG_WARNING, "%s: a recovery sidecar could not be read; gc removes no segment this time",
		       gc->manifest->path);
		return 0;
	}
	for (size_t i = 0; i < listed->count; i++) {
		uint64_t id = listed->ids[i];
		if (marked_segment(mark, id) || id_list_has(sidecars, id))
			continue;
		char name[40];
		snprintf(name, sizeof name, "segments/%016llx", (unsigned long long)id);
		struct io_file file;
		uint64_t bytes = 0;
		if (io_file_open(gc->manifest->directory, name, O_RDONLY, IO_DATA, &file) == 0) {
			io_allocated_bytes(&file, &bytes);
			io_file_close(&file);
		}
		gc->result->segments_removed++;
		gc->result->segment_bytes_reclaimed += bytes;
		if (dry)
			continue;
		int rc = io_failpoint("gc.before_segment_remove");
		if (rc == 0)
			rc = pager_segment_remove(gc->manifest->pager, id);
		if (rc < 0 && rc != -ENOENT)
			return error_info_set(gc->error, rc, "cannot remove %s/%s: %s", gc->manifest->path, name,
					      io_strerror(rc));
	}
	return 0;
}

/* ---- the pack ------------------------------------------------------------------------ */

/*
 * Copies every marked manifest block below `below` (the pruned root's
 * offset) into packs/<below>, makes it durable, and moves this handle's
 * pager onto it (PACKED; failpoint gc.after_pack). 0 or -errno with error set.
 */
static int pack_retained(struct gc *gc, struct gc_mark *mark, uint64_t below)
{
	struct manifest *manifest = gc->manifest;
	if (mark->interval_count > 1)
		qsort(mark->intervals, mark->interval_count, sizeof *mark->intervals, compare_intervals);
	struct pack_writer *writer = NULL;
	struct buf bytes;
	buf_init(&bytes);
	int rc = pack_writer_begin(manifest->directory, pager_store_id(manifest->pager),
				   pager_format_version(manifest->pager), below, &writer);
	for (size_t i = 0; rc == 0 && i < mark->interval_count && mark->intervals[i].start < below; i++) {
		const struct interval *block = &mark->intervals[i];
		buf_reset(&bytes);
		if ((rc = pager_copy_bytes(manifest->pager, block->start, (size_t)(block->end - block->start), &bytes)) == 0)
			rc = pack_writer_add(writer, block->start, bytes.data, bytes.size);
	}
	if (rc == 0)
		rc = pack_writer_finish(writer);
	if (rc == 0)
		gc->result->pack_bytes = pack_writer_size(writer);
	pack_writer_free(writer);
	buf_free(&bytes);
	if (rc < 0)
		return error_info_set(gc->error, rc, "cannot write the pack of retained history %s/packs/%016llx: %s",
				      manifest->path, (unsigned long long)below, io_strerror(rc));
	if ((rc = io_failpoint("gc.after_pack")) < 0)
		return rc;
	if ((rc = pager_pack_refresh(manifest->pager)) < 0 || pager_pack_covered_below(manifest->pager, NULL) != below)
		return error_info_set(gc->error, rc < 0 ? rc : -EIO,
				      "cannot read back the pack gc wrote, %s/packs/%016llx; nothing was returned (run graphfs verify)",
				      manifest->path, (unsigned long long)below);
	return 0;
}

/* Removes the packs the new one replaces and temporary files of crashed gcs. */
static int remove_older_packs(struct gc *gc, uint64_t keep)
{
	int rc = io_failpoint("gc.before_pack_remove");
	uint64_t bytes = 0;
	if (rc == 0)
		rc = pack_remove_others(gc->manifest->directory, keep, &bytes);
	if (rc < 0)
		return error_info_set(gc->error, rc, "cannot remove the older packs of %s/packs: %s", gc->manifest->path,
				      io_strerror(rc));
	return 0;
}

/* ---- the publishes ------------------------------------------------------------------------ */

/* One root without a new version: the horizon raised to horizon, and (prune)
 * the version index without what is not retained and swept_below set to the
 * root's own offset. 0 or -errno with error set. */
struct retention_call {
	struct gc *gc;
	uint64_t horizon;
	bool prune;
	const struct manifest_pin_list *pins;
	struct root_record *root_out;
};

static int publish_retention_once(struct manifest *manifest, void *context, struct error_info *error)
{
	struct retention_call *call = context;
	uint64_t horizon = call->horizon;
	struct manifest_publish publish;
	int rc = manifest_publish_begin(manifest, &publish, error);
	if (rc < 0)
		return rc;
	publish.retention.active = true;
	publish.retention.horizon = horizon > publish.base.horizon ? horizon : publish.base.horizon;
	publish.retention.prune = call->prune;
	publish.retention.keep = pinned_between;
	publish.retention.keep_context = (void *)call->pins;
	rc = manifest_publish_finish(&publish, NULL, manifest_publish_time(&publish),
				     call->root_out, error);
	manifest_publish_end(&publish);
	return rc;
}

/* (in an object store, built again while other hosts' commits win the race for the next piece) */
static int publish_retention(struct gc *gc, uint64_t horizon, bool prune, const struct manifest_pin_list *pins,
			     struct root_record *root_out)
{
	struct retention_call call = { gc, horizon, prune, pins, root_out };
	return manifest_race_retry(gc->manifest, publish_retention_once, &call, gc->error);
}

/* ---- the horizon ------------------------------------------------------------------------- */

struct merge_base_hold {
	struct gc *gc;
	const struct root_record *latest;
	uint64_t horizon;
};

/*
 * A merge needs the base of the two branches and the commits above it: the
 * horizon stays below the merge base of every branch and the branch it was
 * forked from (docs/ARCHITECTURE.md "Retention"). O(commits since the base).
 */
static int hold_merge_base(const struct branch_record *branch, void *context)
{
	struct merge_base_hold *hold = context;
	struct branch_record source;
	/* a branch with no commit of its own since it forked merges without a walk (store_merge.c) */
	if (!branch->forked_from[0] || ulid_is_zero(&branch->head_commit) || branch->head_version <= branch->fork_point)
		return 0;
	int rc = manifest_branch_find(hold->gc->manifest->pager, hold->latest->branches, branch->forked_from, &source);
	if (rc == -ENOENT || (rc == 0 && ulid_is_zero(&source.head_commit)))
		return 0;
	struct ulid base;
	uint64_t version;
	struct block_address record;
	if (rc == 0)
		rc = manifest_merge_base(hold->gc->manifest, &branch->head_commit, branch->head_record, &source.head_commit,
					 source.head_record, &base, &version, &record);
	if (rc == -ENOENT)
		return 0;   /* no common history left above the old horizon */
	if (rc < 0)
		return rc;
	if (version <= hold->horizon && version > hold->latest->horizon) {
		hold->horizon = version - 1;
		struct manifest_gc_result *result = hold->gc->result;
		snprintf(result->held_by, sizeof result->held_by, "%s", branch->name);
		result->held_at = version;
	}
	return 0;
}

static int choose_horizon(struct gc *gc, const struct root_record *latest, uint64_t *horizon_out)
{
	const struct manifest_gc_request *request = gc->request;
	uint64_t horizon = latest->horizon;
	bool given = false;
	uint64_t by_count = 0, by_time = 0;
	if (request->keep_versions) {
		given = true;
		by_count = latest->version > request->keep_versions ? latest->version - request->keep_versions : 0;
	}
	if (request->keep_since_us) {
		given = true;
		uint64_t now = manifest_now_us();
		uint64_t cutoff = now > request->keep_since_us ? now - request->keep_since_us : 0;
		/* the newest version committed before the cutoff: everything after it is kept */
		int rc = cutoff ? manifest_version_at_time(gc->manifest, cutoff - 1, &by_time) : -ENOENT;
		if (rc == -ENOENT)
			by_time = 0;
		else if (rc < 0)
			return error_info_set(gc->error, rc, "cannot resolve --keep-since: %s", io_strerror(rc));
	}
	if (given) {
		uint64_t allowed = request->keep_versions && request->keep_since_us ? (by_count < by_time ? by_count : by_time)
					: request->keep_versions ? by_count : by_time;
		if (allowed > horizon)
			horizon = allowed;
	}
	/* the newest version always stays readable as history */
	if (latest->version > 0 && horizon >= latest->version)
		horizon = latest->version - 1;
	struct merge_base_hold hold = { .gc = gc, .latest = latest, .horizon = horizon };
	int rc = manifest_branches_each(gc->manifest, latest, hold_merge_base, &hold);
	if (rc < 0)
		return error_info_set(gc->error, rc, "cannot find the merge bases of the branches: %s", io_strerror(rc));
	horizon = hold.horizon;
	if (horizon < latest->horizon)
		horizon = latest->horizon;
	*horizon_out = horizon;
	return 0;
}

/* The space the manifest and its pack take on disk. */
static int manifest_size_on_disk(struct manifest *manifest, uint64_t *bytes)
{
	int rc = io_allocated_bytes(&manifest->file, bytes);
	uint64_t below = pager_pack_covered_below(manifest->pager, NULL);
	if (rc == 0 && below) {
		char name[40];
		snprintf(name, sizeof name, "packs/%016llx", (unsigned long long)below);
		struct io_file file;
		uint64_t pack_bytes = 0;
		if (io_file_open(manifest->directory, name, O_RDONLY, IO_MANIFEST, &file) == 0) {
			io_allocated_bytes(&file, &pack_bytes);
			io_file_close(&file);
		}
		*bytes += pack_bytes;
	}
	return rc;
}

int manifest_gc(struct manifest *manifest, const struct manifest_gc_request *request,
		struct manifest_gc_result *result, struct error_info *error)
{
	memset(result, 0, sizeof *result);
	struct gc gc = { GC_IDLE, manifest, request, result, error };
	struct gc_mark mark = { 0 };
	struct manifest_pin_list pins = { 0 };
	struct id_list listed = { 0 }, sidecars = { 0 };
	if (manifest->flags & MANIFEST_READ_ONLY)
		return error_info_set(error, -EROFS, "the store is open read-only");
	int rc = manifest_gc_lock(manifest);
	if (rc < 0)
		return error_info_set(error, rc, rc == -EBUSY ? "another gc, a snapshot or a restore is running on %s: let it finish, then run gc again"
							      : "cannot take the gc lock of %s: %s",
				      manifest->path, io_strerror(rc));
	gc_enter(&gc, GC_LOCKED);
	struct root_record latest;
	if ((rc = manifest_refresh(manifest, NULL)) < 0 || (rc = manifest_latest(manifest, &latest)) < 0) {
		error_info_set(error, rc, "cannot read %s: %s", manifest->path, io_strerror(rc));
		goto out;
	}
	uint64_t horizon = 0;
	if ((rc = choose_horizon(&gc, &latest, &horizon)) < 0)
		goto out;
	result->version = latest.version;
	result->horizon_before = latest.horizon;
	result->horizon = horizon;
	manifest_size_on_disk(manifest, &result->manifest_bytes_before);
	struct root_record swept = latest;   /* the root whose swept_below bounds the sweep */
	if (!request->dry_run) {
		if (horizon > latest.horizon) {
			struct root_record raised;
			if ((rc = publish_retention(&gc, horizon, false, NULL, &raised)) < 0)
				goto out;
			gc_enter(&gc, GC_HORIZON);
			if ((rc = io_failpoint("gc.after_horizon")) < 0)
				goto out;
		}
		/* readers that resolved before the horizon are pinned by now, or see the new sequence */
		if ((rc = manifest_sweep_sequence_advance(manifest)) < 0) {
			error_info_set(error, rc, "cannot write %s/pins: %s", manifest->path, io_strerror(rc));
			goto out;
		}
	}
	if (horizon > 0 && (rc = manifest_pins_list(manifest, 1, horizon, &pins)) < 0) {
		error_info_set(error, rc, "cannot list the readers' pins of %s: %s", manifest->path, io_strerror(rc));
		goto out;
	}
	if (!request->dry_run) {
		if ((rc = publish_retention(&gc, horizon, true, &pins, &swept)) < 0)
			goto out;
		gc_enter(&gc, GC_PRUNED);
		if ((rc = io_failpoint("gc.after_prune")) < 0)
			goto out;
	}
	/* segments first, then sidecars, then the root to mark from (invariant 1) */
	if ((rc = io_directory_list(manifest->directory, "segments", collect_segment, &listed)) < 0 && rc != -ENOENT) {
		error_info_set(error, rc, "cannot list %s/segments: %s", manifest->path, io_strerror(rc));
		goto out;
	}
	struct sidecar_scan scan = { manifest, &sidecars };
	if ((rc = io_directory_list(manifest->directory, "recovery", collect_sidecar, &scan)) < 0 && rc != -ENOENT) {
		error_info_set(error, rc, "cannot list %s/recovery: %s", manifest->path, io_strerror(rc));
		goto out;
	}
	if ((rc = manifest_refresh(manifest, NULL)) < 0 || (rc = manifest_latest(manifest, &latest)) < 0) {
		error_info_set(error, rc, "cannot read %s: %s", manifest->path, io_strerror(rc));
		goto out;
	}
	mark.manifest = manifest;
	mark.pager = manifest->pager;
	mark.horizon = horizon;
	mark.pins = &pins;
	mark.progress = request->progress;
	mark.progress_context = request->progress_context;
	if ((rc = mark_retained(&mark, &latest)) < 0) {
		error_info_set(error, rc, "cannot walk what %s retains: %s", manifest->path, io_strerror(rc));
		goto out;
	}
	if (!request->dry_run)
		gc_enter(&gc, GC_MARKED);
	for (uint64_t version = result->horizon_before + 1; version <= horizon; version++)
		if (manifest_pin_list_has(&pins, version))
			result->versions_pinned++;
	result->versions_reclaimed = horizon - result->horizon_before - result->versions_pinned;
	result->live_blocks = mark.seen.count;
	/* dry: what a gc now would sweep below the latest root */
	uint64_t below = request->dry_run ? latest.self.offset : swept.swept_below;
	struct sweep sweep = { manifest, !request->dry_run, 0, 0 };
	if (request->dry_run) {
		rc = dead_runs_each(&mark, below, sweep_run, &sweep);
	} else {
		if ((rc = pack_retained(&gc, &mark, below)) < 0)
			goto out;
		gc_enter(&gc, GC_PACKED);
		/* every block below the pack's N is read from it now: every page there goes (invariant 4) */
		rc = sweep_run(MANIFEST_FIRST_BLOCK, below / GC_PAGE * GC_PAGE, &sweep);
	}
	if (rc < 0) {
		error_info_set(error, rc, rc == -EOPNOTSUPP ? "the file system of %s cannot punch holes: gc cannot return the manifest's space"
							    : "cannot return the space of %s/manifest: %s",
			       manifest->path, io_strerror(rc));
		goto out;
	}
	result->manifest_bytes_reclaimed = sweep.bytes;
	if ((rc = sweep_segments(&gc, &mark, &listed, &sidecars, request->dry_run)) < 0)
		goto out;
	if (!request->dry_run && (rc = trim_preallocation(manifest, error)) < 0)
		goto out;
	if (!request->dry_run && (rc = remove_older_packs(&gc, below)) < 0)
		goto out;
	if (!request->dry_run)
		gc_enter(&gc, GC_SWEPT);
	manifest_size_on_disk(manifest, &result->manifest_bytes_after);
	if (!request->dry_run)
		result->manifest_bytes_reclaimed = result->manifest_bytes_before > result->manifest_bytes_after
							   ? result->manifest_bytes_before - result->manifest_bytes_after : 0;
	if (request->progress)
		request->progress(mark.versions_marked, mark.versions_marked, request->progress_context);
out:
	mark_free(&mark);
	manifest_pin_list_free(&pins);
	free(listed.ids);
	free(sidecars.ids);
	manifest_gc_unlock(manifest);
	gc_enter(&gc, GC_IDLE);
	return rc;
}
