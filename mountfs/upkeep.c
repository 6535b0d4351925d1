/*
 * upkeep — a mount keeps its store: a thread of its own runs the tiered
 * merges this mount's commits made due (store_compact_pending), right after
 * each commit, flushes the fragments of the tables this mount wrote
 * (store_compact_flush, core/store_compact.c) once its commits have paused for
 * UPKEEP_FLUSH_DELAY_MS, and applies the
 * store's retention policy (store_keep_itself, core/store_config.c) after this
 * mount's commits and at least every UPKEEP_INTERVAL_S seconds (for commits
 * made elsewhere), so that no request waits for a compaction or a gc.
 *
 * Invariants:
 *   1. The thread starts at the first poke, never before: by then the daemon
 *      has forked into the background (a thread does not survive a fork).
 *   2. At most one upkeep runs at a time, and none after upkeep_stop returns.
 * States: IDLE (no thread) -> RUNNING -> STOPPING -> STOPPED (joined).
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include "mountfs_int.h"

#define UPKEEP_INTERVAL_S 30
#define UPKEEP_FLUSH_DELAY_MS 1000   /* a stream of appends is flushed once, when it pauses */

static bool time_zero(const struct timespec *t)
{
	return t->tv_sec == 0 && t->tv_nsec == 0;
}

static bool time_before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static void upkeep_check(const struct upkeep *upkeep, enum upkeep_state next)
{
	(void)upkeep;
	(void)next;
	assert(next != UPKEEP_RUNNING || upkeep->state == UPKEEP_IDLE);
	assert(next != UPKEEP_STOPPED || upkeep->state != UPKEEP_RUNNING);
}

static void upkeep_enter(struct upkeep *upkeep, enum upkeep_state next)
{
	upkeep_check(upkeep, next);
	upkeep->state = next;
}

void upkeep_init(struct upkeep *upkeep)
{
	pthread_mutex_init(&upkeep->lock, NULL);
	pthread_condattr_t attributes;
	pthread_condattr_init(&attributes);
	pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
	pthread_cond_init(&upkeep->wake, &attributes);
	pthread_condattr_destroy(&attributes);
	upkeep->state = UPKEEP_IDLE;
	upkeep->poked = false;
	upkeep->flush_due = (struct timespec){ 0, 0 };
}

static void run_once(struct mountfs *mount, bool flush)
{
	struct store_upkeep done;
	struct error_info error;
	error_info_clear(&error);
	uint64_t rewritten = store_compact_pending(mount->store);   /* the tiered merges its commits made due */
	if (flush)
		rewritten += store_compact_flush(mount->store);
	if (rewritten) {
		mount_log(mount, LOG_DEBUG, "compacted: %llu rows into fewer fragments", (unsigned long long)rewritten);
		view_cache_drop_live(mount);   /* the same version, stored anew: read it from the new root */
	}
	int rc = store_keep_itself(mount->store, &done, &error);
	if (rc < 0)
		mount_log(mount, LOG_WARNING, "the retention policy's gc did not run: %s",
			  error.message[0] ? error.message : strerror(-rc));
	else if (done.ran) {
		atomic_fetch_add(&mount->upkeep_runs, 1);
		mount_log(mount, LOG_DEBUG, "the retention policy's gc reclaimed versions %llu..%llu",
			  (unsigned long long)done.gc.horizon_before + 1, (unsigned long long)done.gc.horizon);
		view_cache_drop_live(mount);
	}
}

static void *upkeep_main(void *context)
{
	struct mountfs *mount = context;
	struct upkeep *upkeep = &mount->upkeep;
	pthread_mutex_lock(&upkeep->lock);
	while (upkeep->state == UPKEEP_RUNNING) {
		if (!upkeep->poked) {
			struct timespec until;
			clock_gettime(CLOCK_MONOTONIC, &until);
			until.tv_sec += UPKEEP_INTERVAL_S;
			if (!time_zero(&upkeep->flush_due) && time_before(&upkeep->flush_due, &until))
				until = upkeep->flush_due;
			pthread_cond_timedwait(&upkeep->wake, &upkeep->lock, &until);
		}
		if (upkeep->state != UPKEEP_RUNNING)
			break;
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		bool flush = !time_zero(&upkeep->flush_due) && !time_before(&now, &upkeep->flush_due);
		if (flush)
			upkeep->flush_due = (struct timespec){ 0, 0 };
		upkeep->poked = false;
		pthread_mutex_unlock(&upkeep->lock);
		run_once(mount, flush);
		pthread_mutex_lock(&upkeep->lock);
	}
	pthread_mutex_unlock(&upkeep->lock);
	return NULL;
}

void upkeep_poke(struct mountfs *mount)
{
	struct upkeep *upkeep = &mount->upkeep;
	if (mount->read_only)
		return;
	pthread_mutex_lock(&upkeep->lock);
	if (upkeep->state == UPKEEP_IDLE) {
		upkeep_enter(upkeep, UPKEEP_RUNNING);
		if (pthread_create(&upkeep->thread, NULL, upkeep_main, mount) != 0) {
			upkeep_enter(upkeep, UPKEEP_STOPPING);
			upkeep_enter(upkeep, UPKEEP_STOPPED);
			mount_log(mount, LOG_WARNING, "cannot start the thread that applies the retention policy");
		}
	}
	upkeep->poked = true;
	clock_gettime(CLOCK_MONOTONIC, &upkeep->flush_due);
	upkeep->flush_due.tv_nsec += (long)UPKEEP_FLUSH_DELAY_MS % 1000 * 1000000L;
	upkeep->flush_due.tv_sec += UPKEEP_FLUSH_DELAY_MS / 1000 + upkeep->flush_due.tv_nsec / 1000000000L;
	upkeep->flush_due.tv_nsec %= 1000000000L;
	pthread_cond_signal(&upkeep->wake);
	pthread_mutex_unlock(&upkeep->lock);
}

void upkeep_stop(struct mountfs *mount)
{
	struct upkeep *upkeep = &mount->upkeep;
	pthread_mutex_lock(&upkeep->lock);
	bool running = upkeep->state == UPKEEP_RUNNING;
	if (running)
		upkeep_enter(upkeep, UPKEEP_STOPPING);
	pthread_cond_signal(&upkeep->wake);
	pthread_mutex_unlock(&upkeep->lock);
	if (running)
		pthread_join(upkeep->thread, NULL);
	pthread_mutex_lock(&upkeep->lock);
	if (upkeep->state != UPKEEP_IDLE)
		upkeep_enter(upkeep, UPKEEP_STOPPED);
	pthread_mutex_unlock(&upkeep->lock);
}

void upkeep_free(struct upkeep *upkeep)
{
	pthread_cond_destroy(&upkeep->wake);
	pthread_mutex_destroy(&upkeep->lock);
}
