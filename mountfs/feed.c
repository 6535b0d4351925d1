/*
 * feed — `.graphfs/feed`: every commit of the store, all branches, oldest
 * first, one `log` line each (docs/MOUNT.md ".graphfs/feed"). The file grows
 * while mounted, so `tail -f` follows commits made by anyone.
 *
 * Invariants:
 *   1. The bytes are the lines of versions 1 .. through_version in version
 *      order, appended once each to an unnamed file in the mount's temporary
 *      directory (scratch_temporary_file; never rewritten: a line
 *      once shown stays as it was, also if gc reclaims its version later).
 *   2. A catch-up renders only the versions above through_version: O(new
 *      commits), one version-index lookup and two record reads each.
 *   3. Readers never see a partial line: size and through_version move
 *      together, under lock, after a whole batch of lines is written.
 * States: EMPTY (no file yet) -> OPEN (descriptor >= 0) -> FAILED (a write or
 * the file's creation failed: reads answer -EIO; the next catch-up tries a
 * fresh file).
 */
#include <assert.h>
#include <errno.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "mountfs_int.h"

/* Lines rendered per write to the file (and per hold of the lock's critical work). */
#define FEED_BATCH_BYTES (256 * 1024)

static void feed_check(const struct feed *feed)
{
	(void)feed;
	assert(feed->state != FEED_EMPTY || (feed->descriptor < 0 && feed->size == 0));
	assert(feed->state != FEED_OPEN || feed->descriptor >= 0);
}

void feed_init(struct feed *feed)
{
	memset(feed, 0, sizeof *feed);
	pthread_mutex_init(&feed->lock, NULL);
	feed->descriptor = -1;
	feed->state = FEED_EMPTY;
}

void feed_free(struct feed *feed)
{
	if (feed->descriptor >= 0)
		close(feed->descriptor);
	pthread_mutex_destroy(&feed->lock);
}

/* Appends the lines of the versions above through_version, up to the store's. Lock held. */
static int catch_up_locked(struct mountfs *mount, struct feed *feed)
{
	int rc = 0;
	if (feed->state != FEED_OPEN) {
		if (feed->descriptor >= 0)
			close(feed->descriptor);
		feed->descriptor = -1;
		if ((rc = scratch_temporary_file(mount)) < 0) {
			feed->state = FEED_FAILED;
			mount_log(mount, LOG_ERR, "cannot make the file behind .graphfs/feed: %s", strerror(-rc));
			return rc;
		}
		feed->descriptor = rc;
		feed->size = 0;
		feed->through_version = 0;
		feed->state = FEED_OPEN;
		rc = 0;
	}
	uint64_t latest = store_version(mount->store);
	struct buf batch;
	buf_init(&batch);
	uint64_t version = feed->through_version;
	while (version < latest) {
		if ((version - feed->through_version) % 16 == 0)
			store_prefetch_commit_lines(mount->store, version + 1);   /* an s3:// store: in parallel */
		rc = store_commit_line(mount->store, version + 1, &batch);
		if (rc < 0)
			goto out;
		version++;
		if (batch.size >= FEED_BATCH_BYTES || version == latest) {
			if ((rc = scratch_write_all(feed->descriptor, batch.data, batch.size, feed->size)) < 0)
				goto out;
			feed->size += batch.size;
			feed->through_version = version;
			batch.size = 0;
		}
	}
out:
	if (rc < 0 && rc != -ENOMEM && rc != -EIO) {
		feed->state = FEED_FAILED;
		mount_log(mount, LOG_ERR, "cannot write the file behind .graphfs/feed: %s", strerror(-rc));
	}
	buf_free(&batch);
	feed_check(feed);
	return rc;
}

int feed_size(struct mountfs *mount, uint64_t *size)
{
	struct feed *feed = &mount->feed;
	pthread_mutex_lock(&feed->lock);
	int rc = catch_up_locked(mount, feed);
	*size = feed->size;
	pthread_mutex_unlock(&feed->lock);
	return rc == -ENOMEM || rc == -EIO ? 0 : rc;   /* what is there stays readable */
}

ssize_t feed_read(struct mountfs *mount, char *out, size_t size, off_t offset)
{
	struct feed *feed = &mount->feed;
	pthread_mutex_lock(&feed->lock);
	ssize_t result = 0;
	if ((uint64_t)offset >= feed->size) {
		/* a reader at the end (tail -f) asks for what came since */
		int rc = catch_up_locked(mount, feed);
		if (rc < 0 && feed->state != FEED_OPEN) {
			result = -EIO;
			goto out;
		}
	}
	if ((uint64_t)offset < feed->size) {
		size_t available = (size_t)(feed->size - (uint64_t)offset);
		result = pread(feed->descriptor, out, size < available ? size : available, offset);
		if (result < 0)
			result = -errno;
	}
out:
	pthread_mutex_unlock(&feed->lock);
	return result;
}
