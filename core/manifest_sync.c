/*
 * manifest_sync — group commit: making written roots durable, one fsync for
 * every publish queued behind it (docs/FORMAT.md §18 "Group commit").
 *
 * A publish writes its tail under the store lock and releases the lock
 * before its fsync (manifest_publish.c); the next publish, in this process
 * or another, builds on the written root at once. Each publish then calls
 * manifest_sync_through for its own root. It returns at once if a meta slot
 * names its root or a later one (covered). Otherwise it tries the sync lock
 * (this process's sync_mutex, then an exclusive byte-range lock on byte 0 of
 * the store's `lock` file, held by one process at a time); while another
 * holds it, it sleeps on the wake-up page's `durable` word (io.h; FORMAT.md
 * §18) until that sync ends, and looks at the slots again. Under the lock it
 * notes the newest complete root in the file (the written-root hint's, else
 * by scanning), fdatasyncs, and writes that root's meta slot: every publish
 * whose pwrite finished before the fsync began is durable with it, and their
 * syncs return without one.
 *
 * States of one sync: WAITING (sync lock being taken) -> COVERED (a slot
 * names this root or a later one: done) or FLUSHING (the newest written
 * root noted; fdatasync) -> ANNOUNCED (its meta slot written) -> done.
 *
 * Invariants kept:
 *   1. A meta slot is written only under the sync lock and only after an
 *      fsync that began after its root was completely written: a slot never
 *      names a root that is not durable, and slots are written in sequence
 *      order (so the alternating slots never go backwards).
 *   2. A handle shows (latest) only roots a meta slot names or that its own
 *      sync made durable; publishes build on written roots, which the store
 *      lock orders, so the fsync that covers a root covers everything it
 *      builds on.
 *   3. Nothing here truncates: a root written and released is never cut
 *      (other publishes may already build on it). A failed fsync leaves the
 *      outcome open: a later sync's fsync may still make the root durable.
 *   4. The wake-up page decides nothing: a waiter reads the meta slots again
 *      after every sleep, a sleep ends after SYNC_PAUSE_US even if no syncer
 *      woke it, and a hinted root is read and checked before the fsync's
 *      meta slot names it.
 */
#include <errno.h>
#include <string.h>
#include <syslog.h>

#include "manifest_int.h"

#define SYNC_LOCK_BYTE 0   /* of the `lock` file (its flock is the store lock) */
/* A sync waiter looks at the meta slots again after this long even if no syncer woke it. */
#define SYNC_PAUSE_US 2000u

enum sync_state { SYNC_WAITING, SYNC_COVERED, SYNC_FLUSHING, SYNC_ANNOUNCED };

int manifest_sync_through(struct manifest *manifest, const struct root_record *root, uint64_t end,
			  const char *after_fsync, struct error_info *error)
{
	enum sync_state state = SYNC_WAITING;
	if (io_file_is_remote(&manifest->file)) {
		/* In an object store a tail is durable once its conditional create returned
		 * (io_pieced.c): nothing to flush. The meta slot stays a hint for the next
		 * cold open, which scans forward from the root it names. */
		manifest_state_durable(manifest, root, end);
		if (after_fsync && io_failpoint(after_fsync) < 0)
			io_log(LOG_WARNING, "%s/manifest: failpoint %s: an error after the commit point does not undo the commit",
			       manifest->path, after_fsync);
		if (manifest_meta_write(manifest, root, end) < 0)
			io_log(LOG_ERR, "%s/manifest: cannot update the meta slot (the commit is durable)", manifest->path);
		return 0;
	}
	/* Wait for the sync lock, or for a sync that covers this root: a waiter sleeps until a
	 * syncer announces a root (IO_WAKE_DURABLE) and looks at the meta slots again. */
	struct meta_slot announced;
	int rc;
	uint32_t seen;
	for (;;) {
		seen = io_wake_read(&manifest->wake, IO_WAKE_DURABLE);
		if ((rc = manifest_meta_newest(manifest, &announced)) < 0)
			return error_info_set(error, rc, "cannot read the meta slots of %s/manifest: %s",
					      manifest->path, io_strerror(rc));
		if (announced.valid && announced.sequence >= root->sequence) {
			manifest_state_durable(manifest, root, end);
			return 0;
		}
		if (!manifest->wake.words) {
			/* no wake-up page (it could not be mapped): wait for the sync lock itself */
			pthread_mutex_lock(&manifest->sync_mutex);
			rc = io_range_lock_exclusive_wait(&manifest->lock_file, SYNC_LOCK_BYTE, 1);
			if (rc == 0)
				break;
			pthread_mutex_unlock(&manifest->sync_mutex);
			return error_info_set(error, rc, "cannot lock %s/lock for the sync: %s", manifest->path,
					      io_strerror(rc));
		}
		if (pthread_mutex_trylock(&manifest->sync_mutex) == 0) {
			rc = io_range_lock(&manifest->lock_file, SYNC_LOCK_BYTE, 1, true);
			if (rc == 0)
				break;
			pthread_mutex_unlock(&manifest->sync_mutex);
			if (rc != -EAGAIN)
				return error_info_set(error, rc, "cannot lock %s/lock for the sync: %s",
						      manifest->path, io_strerror(rc));
		}
		io_wake_waiting(&manifest->wake, IO_WAKE_DURABLE, true);
		if ((rc = manifest_meta_newest(manifest, &announced)) == 0 &&
		    !(announced.valid && announced.sequence >= root->sequence))
			io_wake_sleep(&manifest->wake, IO_WAKE_DURABLE, seen, SYNC_PAUSE_US);
		io_wake_waiting(&manifest->wake, IO_WAKE_DURABLE, false);
	}
	/* under the sync lock: another sync may have covered this root since the slots were
	 * read; they need no second reading if `durable` has not moved since (a sync that
	 * released the lock but has not moved the word yet costs one needless fsync here,
	 * never a wrong slot: the root noted below is at least as new as the one it named) */
	if ((!manifest->wake.words || io_wake_read(&manifest->wake, IO_WAKE_DURABLE) != seen) &&
	    (rc = manifest_meta_newest(manifest, &announced)) < 0) {
		error_info_set(error, rc, "cannot read the meta slots of %s/manifest: %s", manifest->path,
			       io_strerror(rc));
		goto out;
	}
	if (announced.valid && announced.sequence >= root->sequence) {
		state = SYNC_COVERED;
		manifest_state_durable(manifest, root, end);
		goto out;
	}
	/* the newest root written so far: the fsync below covers it too */
	struct root_record newest = *root;
	uint64_t newest_end = end, file_size;
	bool have = true, torn;
	if ((rc = io_size(&manifest->file, &file_size)) < 0 ||
	    (!manifest_written_hint_root(manifest, root->sequence, file_size, &newest, &newest_end) &&
	     (rc = manifest_scan_tail(manifest, end, file_size, &newest, &have, &newest_end, &torn)) < 0)) {
		error_info_set(error, rc, "cannot read %s/manifest: %s", manifest->path, io_strerror(rc));
		goto out;
	}
	state = SYNC_FLUSHING;
	if ((rc = io_datasync(&manifest->file)) < 0) {
		error_info_set(error, rc, "cannot make %s/manifest durable: %s", manifest->path, io_strerror(rc));
		goto out;
	}
	manifest_state_durable(manifest, &newest, newest_end);
	if (after_fsync && io_failpoint(after_fsync) < 0)
		io_log(LOG_WARNING, "%s/manifest: failpoint %s: an error after the commit point does not undo the commit",
		       manifest->path, after_fsync);
	/* A hint for other handles' refresh: a failure to write it is not an error. */
	if (manifest_meta_write(manifest, &newest, newest_end) < 0)
		io_log(LOG_ERR, "%s/manifest: cannot update the meta slot (the commit is durable)", manifest->path);
	state = SYNC_ANNOUNCED;
out:
	(void)state;
	io_range_unlock(&manifest->lock_file, SYNC_LOCK_BYTE, 1);
	pthread_mutex_unlock(&manifest->sync_mutex);
	/* waiters look at the slots again: covered, or one of them syncs next */
	io_wake_all(&manifest->wake, IO_WAKE_DURABLE);
	return rc;
}

/* ---- settling under the store lock ---------------------------------------------- */

int manifest_refresh_locked(struct manifest *manifest, struct error_info *error)
{
	int rc = manifest_refresh_for_publish(manifest, error);
	if (rc < 0 || (manifest->flags & MANIFEST_READ_ONLY))
		return rc;
	/* Settle: roots written by publishes still waiting for their sync, or by a
	 * writer that died before its meta slot, become durable and announced now,
	 * so that what follows (recovery, gc, a snapshot copy) sees one durable state. */
	pthread_mutex_lock(&manifest->state_mutex);
	struct root_record written = manifest->written;
	uint64_t written_size = manifest->written_size;
	bool behind = manifest->latest.sequence < written.sequence ||
		      manifest->meta_sequence < written.sequence;
	pthread_mutex_unlock(&manifest->state_mutex);
	if (behind)
		rc = manifest_sync_through(manifest, &written, written_size, NULL, error);
	return rc;
}
