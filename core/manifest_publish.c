/*
 * manifest_publish — the shared publish: the store lock, the tail built in
 * memory, the commit point (manifest_publish_finish) and the retry after a
 * lost race, for every publish: commits (manifest_commit.c), branches, tags,
 * gc and repair.
 *
 * States of one publish (enum publish_state, checked by publish_state_check):
 *   LOCKED     process mutex + flock(lock); "publish.after_lock"; the
 *              store lock's refresh (every complete root after the newest
 *              known is scanned: the base is the last root WRITTEN, durable
 *              or still waiting for its sync) and any torn tail truncated;
 *              the branch resolved; every operation's compare-and-swap
 *              checked against the CURRENT heads; table versions, commit
 *              record, version index (the history part), then heads/names
 *              nodes, branch record (branches tree) and, last, the root
 *              record (the state part: FORMAT.md §18 "The order of a
 *              tail") appended in memory (one pager_append buffer)
 *   APPENDED   the buffer written with one pwrite ("publish.before_write",
 *              "publish.torn_write") over the zeros preallocated after the
 *              written root; when it reaches past the file's end the same
 *              pwrite pads it with zeros to the next manifest_preallocation
 *              (file size) boundary; "publish.before_fsync"
 *   QUEUED     the root recorded as written; store lock and process mutex
 *              released: the next publish may build on it now
 *   DURABLE    manifest_sync_through (manifest_sync.c): one fdatasync for
 *              every root written before it, or none when another publish's
 *              already covered this one — the commit point;
 *              "publish.after_fsync"; the meta slot of the newest covered
 *              root written
 *   PUBLISHED  the handle shows the root — "publish.after_meta"; the
 *              request's sidecar removed — "publish.after_sidecar_remove";
 *              stages marked published
 * The commit point is the sync: everything before QUEUED can be undone (the
 * tail is cut under the lock), nothing after it is (a released root is never
 * cut: other publishes may build on it; if its sync fails the outcome is
 * unknown until a later fsync, and the caller is told so).
 *
 * Invariants kept:
 *   1. Nothing is written before every check passed; on any error before
 *      QUEUED the file is truncated back to the end of the written root
 *      (preallocated zeros included), so nothing is published and the
 *      caller's stages and intent are untouched (it may retry). From DURABLE
 *      on, the publish succeeds; a failed sync in QUEUED reports -EIO with
 *      the outcome unknown, and the caller's intent is released, not undone
 *      (recovery decides it once a read-write open settles the manifest).
 *   2. A commit's version is the latest root's version + 1 on any branch;
 *      branch create/delete publish a root of the same version.
 *   3. Every change carries head_after, and the heads tree gets exactly those
 *      rows: the journal and the heads agree (docs/ARCHITECTURE.md invariant 7).
 *   4. A name whose head is tombstoned is not live: writing it mints a new
 *      stable id and incarnation; a tombstoned head never becomes live again.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include "manifest_int.h"

/* ---- the shared publish tail ------------------------------------------------ */

void (*manifest_publish_queued_hook)(struct manifest *manifest);

/* The most of other writers' newest bytes a publish reads at once (pager_window_begin). */
#define PUBLISH_WINDOW_MAX (256u << 10)

/* Debug check of a state change: each state follows the one before it. */
static void publish_state_check(const struct manifest_publish *publish, enum publish_state next)
{
	(void)publish;
	(void)next;
	assert(next == PUBLISH_IDLE || (publish->state == PUBLISH_IDLE && next == PUBLISH_LOCKED) ||
	       (int)next == (int)publish->state + 1);
	assert(publish->locked == (next == PUBLISH_LOCKED || next == PUBLISH_APPENDED) || next == PUBLISH_IDLE);
}

static void publish_enter(struct manifest_publish *publish, enum publish_state next)
{
	publish_state_check(publish, next);
	publish->state = next;
}

int manifest_publish_begin(struct manifest *manifest, struct manifest_publish *publish,
			   struct error_info *error)
{
	memset(publish, 0, sizeof *publish);
	publish->manifest = manifest;
	int rc = manifest_lock(manifest, error);
	if (rc < 0)
		return rc;
	publish->locked = true;
	publish_enter(publish, PUBLISH_LOCKED);
	rc = io_failpoint("publish.after_lock");
	if (rc < 0) {
		error_info_set(error, rc, "the store lock failed");
		goto failed;
	}
	pthread_mutex_lock(&manifest->state_mutex);
	uint64_t known_size = manifest->have_written ? manifest->written_size : 0;
	pthread_mutex_unlock(&manifest->state_mutex);
	rc = manifest_refresh_for_publish(manifest, error);
	if (rc < 0)
		goto failed;
	pthread_mutex_lock(&manifest->state_mutex);
	publish->base = manifest->written;
	uint64_t written_size = manifest->written_size;
	/* in an object store the tail starts at the next granule (io_append_offset) */
	publish->base_size = io_append_offset(&manifest->file, written_size);
	uint64_t file_size = manifest->observed_size;
	pthread_mutex_unlock(&manifest->state_mutex);
	/* the tails other writers appended since this process last looked hold the nodes this
	 * publish rewrites (heads and branches paths, version index path, the base's commit):
	 * one read of them instead of one per block (best effort: without it, reads go to the file) */
	if (known_size && written_size > known_size) {
		uint64_t from = written_size - known_size > PUBLISH_WINDOW_MAX ? written_size - PUBLISH_WINDOW_MAX : known_size;
		pager_window_begin(manifest->pager, from, (size_t)(written_size - from));
	}
	/* the chunk follows the space the file takes, not its size: after gc returned most
	 * of it, the store grows by small chunks again (FORMAT.md §4) */
	bool remote = io_file_is_remote(&manifest->file);
	uint64_t allocated = manifest_allocated_bytes(manifest, file_size, publish->base.swept_below);
	/* the locked refresh left zeros (or nothing) after the latest root; a manifest in an
	 * object store has no preallocated zeros: each tail is an object of its own */
	if ((rc = pager_append_begin(manifest->pager, publish->base_size, &publish->append)) < 0 ||
	    (!remote && (rc = pager_append_preallocate(publish->append, file_size, manifest_preallocation(allocated))) < 0) ||
	    (rc = btree_open(manifest->pager, publish->base.branches, &publish->branches)) < 0) {
		error_info_set(error, rc, "cannot start the publish: %s", io_strerror(rc));
		goto failed;
	}
	return 0;
failed:
	manifest_publish_end(publish);
	return rc;
}

uint64_t manifest_publish_time(const struct manifest_publish *publish)
{
	uint64_t now = manifest_now_us();
	return now > publish->base.time_us ? now : publish->base.time_us;
}

void manifest_publish_end(struct manifest_publish *publish)
{
	if (publish->manifest)
		pager_window_end(publish->manifest->pager);
	btree_free(publish->branches);
	publish->branches = NULL;
	btree_free(publish->tags);
	publish->tags = NULL;
	pager_append_free(publish->append);
	publish->append = NULL;
	if (publish->locked)
		manifest_unlock(publish->manifest);
	publish->locked = false;
	publish_enter(publish, PUBLISH_IDLE);
}

/*
 * Undoes a write that did not publish (invariant 1): drops the buffer and cuts
 * whatever reached the file back to the base's end — unless the file is not as
 * the publish found it (-ESTALE: nothing was written), or is in an object store
 * (a tail there is whole or absent, and what lies beyond it is another writer's,
 * io_pieced.c invariant 3). The store lock is still held: no other publish has
 * seen these bytes.
 */
static void tail_cut(struct manifest_publish *publish, int rc)
{
	struct manifest *manifest = publish->manifest;
	pager_append_abandon(publish->append);
	uint64_t now_size;
	if (rc != -ESTALE && !io_file_is_remote(&manifest->file) &&
	    io_size(&manifest->file, &now_size) == 0 && now_size > publish->base_size &&
	    io_truncate(&manifest->file, publish->base_size) == 0)
		io_fsync(&manifest->file);
}

/* The version index entry of the base root's version (FORMAT.md §16.1): the
 * root, and its commit's time and first parent (read from the commit record;
 * version 0 has none). 0, -EIO, -ENOMEM. */
static int version_entry_of(const struct manifest_publish *publish, struct manifest_version_entry *out)
{
	const struct root_record *base = &publish->base;
	*out = (struct manifest_version_entry){ .root = base->self, .commit_time_us = base->time_us };
	if (block_address_is_null(base->commit))
		return 0;
	struct commit_record record;
	int rc = manifest_commit_read(publish->manifest, base->commit, &record);
	if (rc == 0 && record.version != base->version)
		rc = -EIO;
	if (rc == 0) {
		out->commit_time_us = record.time_us;
		out->parent_version = record.parent_count ? manifest_commit_id_version(&record.parents[0]) : 0;
		if (out->parent_version >= base->version)
			rc = -EIO;
	}
	journal_commit_record_free(&record);
	return rc;
}

/*
 * The end of every publish, and the commit point in one body: the root record
 * after every block appended (LOCKED), one pwrite of the tail under the store
 * lock (APPENDED), the lock released (QUEUED), the fsync that covers the root
 * (DURABLE: the commit point), the root shown (PUBLISHED). See the states at the
 * top of this file; the retry after a lost race is around the whole publish
 * (manifest_race_retry), never inside it.
 */
int manifest_publish_finish(struct manifest_publish *publish, const struct ulid *commit, uint64_t time_us,
			    struct root_record *root_out, struct error_info *error)
{
	struct manifest *manifest = publish->manifest;
	const struct root_record *base = &publish->base;
	struct root_record root = *base;
	root.sequence = base->sequence + 1;
	root.time_us = time_us;
	root.previous = base->self;
	struct buf bytes;
	buf_init(&bytes);
	int rc = 0;
	if (commit) {
		assert(manifest_commit_id_version(commit) == base->version + 1 && publish->indexed);
		root.version = base->version + 1;
		root.commit = publish->commit_record;
		root.versions = publish->versions;
	}
	if (publish->retention.active) {
		assert(!commit && publish->retention.horizon >= base->horizon && publish->retention.horizon < base->version);
		root.horizon = publish->retention.horizon;
		if (publish->retention.prune &&
		    (rc = manifest_versions_prune(manifest->pager, publish->append, base->versions, root.horizon,
						  publish->retention.keep, publish->retention.keep_context,
						  &root.versions)) < 0)
			goto failed;
	}
	if (publish->tags && (rc = btree_flush(publish->tags, publish->append, &root.tags)) < 0)
		goto failed;
	if ((rc = btree_flush(publish->branches, publish->append, &root.branches)) < 0)
		goto failed;
	if (publish->retention.active && publish->retention.prune)
		root.swept_below = publish->base_size + pager_append_size(publish->append);   /* this root's offset */
	if ((rc = manifest_root_encode(&root, &bytes)) < 0 ||
	    (rc = pager_append_block(publish->append, BLOCK_ROOT, CODEC_NONE, bytes.data, bytes.size,
				     &root.self)) < 0)
		goto failed;
	uint64_t size = publish->base_size + pager_append_size(publish->append);
	assert(root.self.offset + MANIFEST_ROOT_BLOCK_SIZE == size);
	/* reads of the latest state need nothing of the tail before its state part (io.h) */
	io_note_state_start(&manifest->file, publish->base_size + publish->state_start);

	/* LOCKED -> APPENDED: the tail, root record last, with one pwrite */
	rc = io_failpoint("publish.before_write");
	if (rc == 0 && io_failpoint_armed("publish.torn_write")) {
		rc = pager_append_write_part(publish->append, (size_t)pager_append_size(publish->append) / 2);
		if (rc == 0)
			rc = io_failpoint("publish.torn_write");
	}
	if (rc == 0)
		rc = pager_append_write(publish->append);
	if (rc == 0) {
		publish_enter(publish, PUBLISH_APPENDED);
		rc = io_failpoint("publish.before_fsync");
	}
	if (rc < 0) {
		tail_cut(publish, rc);   /* not durable, not published */
		error_info_set(error, rc, "cannot write the manifest: %s", io_strerror(rc));
		goto out;
	}

	/* APPENDED -> QUEUED: the root is the base of the next publish; the lock is released */
	manifest_state_written(manifest, &root, size, pager_append_file_size(publish->append));
	manifest_written_hint_write(manifest, &root, size);
	pager_window_end(manifest->pager);   /* its bytes are the lock holder's to keep */
	manifest_unlock(manifest);
	publish->locked = false;
	publish_enter(publish, PUBLISH_QUEUED);
	if (manifest_publish_queued_hook)
		manifest_publish_queued_hook(manifest);

	/* QUEUED -> DURABLE, the commit point: the fsync that covers the root (this publish's
	 * own, or one another publish made after this one's pwrite; manifest_sync.c). A failed
	 * sync cannot cut the root any more (a later publish may build on it): -EIO with the
	 * outcome unknown. */
	struct error_info sync_error;
	error_info_clear(&sync_error);
	rc = io_failpoint("publish.queued");
	if (rc < 0)
		error_info_set(&sync_error, rc, "failpoint publish.queued");
	else
		rc = manifest_sync_through(manifest, &root, size, "publish.after_fsync", &sync_error);
	if (rc < 0) {
		publish->outcome_unknown = true;
		rc = error_info_set(error, -EIO,
				    "version %llu was written but could not be made durable (%s); it stands "
				    "if a later commit's fsync succeeds: check with `graphfs log` before retrying",
				    (unsigned long long)root.version, sync_error.message);
		goto out;
	}
	publish_enter(publish, PUBLISH_DURABLE);

	/* DURABLE -> PUBLISHED: the handle shows the root and a meta slot names it (or a later one) */
	publish_enter(publish, PUBLISH_PUBLISHED);
	io_failpoint("publish.after_meta");
	if (root_out)
		*root_out = root;
	goto out;
failed:
	error_info_set(error, rc, "cannot build the publish: %s", io_strerror(rc));
out:
	buf_free(&bytes);
	return rc;
}

int manifest_publish_history(struct manifest_publish *publish, const struct branch_record *branch,
			     struct commit_record *record, struct error_info *error)
{
	assert(!publish->indexed);
	struct buf bytes;
	buf_init(&bytes);
	record->version = publish->base.version + 1;
	snprintf(record->branch, sizeof record->branch, "%s", branch->name);
	/* the first parent is the branch's head; a merge's second (record->parents[1]) is kept */
	struct ulid merge_parent = record->parent_count == 2 ? record->parents[1] : (struct ulid){ 0 };
	struct block_address merge_record = record->parent_records[1];
	record->parent_count = 0;
	if (!ulid_is_zero(&branch->head_commit)) {
		record->parents[record->parent_count] = branch->head_commit;
		record->parent_records[record->parent_count++] = branch->head_record;
	}
	if (!ulid_is_zero(&merge_parent)) {
		record->parents[record->parent_count] = merge_parent;
		record->parent_records[record->parent_count++] = merge_record;
	}
	int rc;
	if ((rc = journal_commit_record_encode(record, manifest_format_version(publish->manifest), &bytes)) < 0 ||
	    (rc = pager_append_block(publish->append, BLOCK_COMMIT, CODEC_ZSTD, bytes.data, bytes.size,
				     &publish->commit_record)) < 0) {
		error_info_set(error, rc, "cannot encode the commit record: %s", io_strerror(rc));
		goto out;
	}
	/* the base root is the last root of its version: index it, with its commit's summary */
	struct manifest_version_entry entry;
	if ((rc = version_entry_of(publish, &entry)) < 0 ||
	    (rc = manifest_versions_put(publish->manifest->pager, publish->append, publish->base.versions,
					publish->base.version, &entry, &publish->versions)) < 0) {
		error_info_set(error, rc, "cannot index version %llu: %s",
			       (unsigned long long)publish->base.version, io_strerror(rc));
		goto out;
	}
	publish->indexed = true;
	publish->state_start = pager_append_size(publish->append);
out:
	buf_free(&bytes);
	return rc;
}

int manifest_publish_commit_state(struct manifest_publish *publish, struct branch_record *branch,
				  const struct commit_record *record, struct block_address heads,
				  struct block_address names, struct root_record *root_out,
				  struct error_info *error)
{
	assert(publish->indexed && record->version == publish->base.version + 1);
	struct buf bytes;
	buf_init(&bytes);
	branch->head_commit = record->id;
	branch->head_record = publish->commit_record;
	branch->head_version = record->version;
	branch->heads = heads;
	branch->names = names;
	int rc;
	if ((rc = manifest_branch_encode(branch, &bytes)) < 0 ||
	    (rc = btree_put(publish->branches, branch->name, strlen(branch->name), bytes.data,
			    bytes.size)) < 0) {
		error_info_set(error, rc, "cannot update branch %s: %s", branch->name, io_strerror(rc));
		goto out;
	}
	rc = manifest_publish_finish(publish, &record->id, record->time_us, root_out, error);
out:
	buf_free(&bytes);
	return rc;
}

/* ---- the retry after a lost race ------------------------------------------------- */

#define COMMIT_RACE_SECONDS 30   /* as long as a local writer waits for the store lock */

static uint64_t race_clock_us(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000000u + (uint64_t)now.tv_nsec / 1000u;
}

/*
 * The retry around a whole publish after a lost race on an object store: another
 * writer's tail took the offset first (-ESTALE, nothing written). A short random
 * pause, never a long one (the longer a loser waits, the staler its view and the
 * likelier it loses again; measured: longer, growing pauses lose more), for up to
 * COMMIT_RACE_SECONDS. manifest_race_again says whether to try again, and sets the error
 * of the last loss when it gives up.
 */
struct manifest_race_state manifest_race_begin(void)
{
	return (struct manifest_race_state){ race_clock_us(), 1 };
}

bool manifest_race_again(struct manifest *manifest, struct manifest_race_state *race, int rc, struct error_info *error)
{
	if (rc != -ESTALE || !io_file_is_remote(&manifest->file))
		return false;
	if (race_clock_us() - race->began >= COMMIT_RACE_SECONDS * 1000000ull) {
		error_info_set(error, rc, "other writers published first for %d s (%u attempts): nothing was published; run it again",
			       COMMIT_RACE_SECONDS, race->attempts);
		return false;
	}
	struct timespec pause = { 0, (long)(rand() % 500) * 1000L };
	nanosleep(&pause, NULL);
	error_info_clear(error);
	race->attempts++;
	return true;
}

int manifest_race_retry(struct manifest *manifest,
			int (*once)(struct manifest *manifest, void *context, struct error_info *error), void *context,
			struct error_info *error)
{
	struct manifest_race_state race = { race_clock_us(), 1 };
	int rc;
	do
		rc = once(manifest, context, error);
	while (manifest_race_again(manifest, &race, rc, error));
	return rc;
}
