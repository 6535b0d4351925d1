/*
 * lease — see lease.h.
 *
 * States of a lease: RENEWING (its thread stores what changed and rewrites
 * the object every third of the lease while it says something) -> STOPPING
 * (lease_end: the thread is told and joined); RENEWING -> PAUSED (no thread,
 * around a fork) -> RENEWING (a new thread).
 *
 * Invariants:
 *   1. lease_begin returns only after the object is stored: from then on it
 *      stays alive as long as the process does and renewals succeed.
 *   2. A failed store is logged and tried again at the next renewal; the
 *      lease lapses only if stores fail for a whole lease.
 *   3. stored is what the object says (empty: no object); the thread alone
 *      stores, so stores never race one another.
 */
#include "lease.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "io.h"

#define LEASE_DEFAULT_SECONDS 30
#define LINE_MAX_BYTES (LEASE_TEXT_MAX - 64)

enum lease_state { LEASE_RENEWING, LEASE_STOPPING, LEASE_PAUSED };

struct lease {
	char path[4096];
	char subdirectory[64];
	char name[300];
	unsigned seconds;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	/* guarded by lock */
	enum lease_state state;
	char line[LINE_MAX_BYTES];      /* what the lease should say ("": nothing) */
	uint64_t changed_us;            /* when line last changed (monotonic) */
	char stored[LINE_MAX_BYTES];    /* what the object says (invariant 3) */
	uint64_t stored_us;             /* when it was last stored, or tried (monotonic) */
	uint64_t succeeded_us;          /* when a store last worked (monotonic) */
};

unsigned lease_seconds(void)
{
	const char *text = getenv("GRAPHFS_LEASE_SECONDS");
	unsigned long seconds = text && *text ? strtoul(text, NULL, 10) : 0;
	return seconds >= 1 && seconds <= 3600 ? (unsigned)seconds : LEASE_DEFAULT_SECONDS;
}

void lease_holder(char *out, size_t size)
{
	char host[64] = "";
	gethostname(host, sizeof host - 1);
	for (char *at = host; *at; at++)
		if (!((*at >= 'a' && *at <= 'z') || (*at >= 'A' && *at <= 'Z') || (*at >= '0' && *at <= '9') || *at == '-'))
			*at = '-';
	snprintf(out, size, "%s-%ld", host[0] ? host : "host", (long)getpid());
}

static uint64_t clock_us(clockid_t clock)
{
	struct timespec now;
	clock_gettime(clock, &now);
	return (uint64_t)now.tv_sec * 1000000u + (uint64_t)now.tv_nsec / 1000u;
}

/* Opens the lease's directory (made if missing). A descriptor or -errno; *store to close too. */
static int lease_directory(const struct lease *lease, int *store)
{
	*store = io_directory_open(lease->path);
	if (*store < 0)
		return *store;
	int rc = io_directory_make(*store, lease->subdirectory);
	int directory = rc == 0 || rc == -EEXIST ? io_directory_open_at(*store, lease->subdirectory) : rc;
	if (directory < 0)
		close(*store);
	return directory;
}

/* Stores line (or removes the object for ""), expiring lease->seconds from now. 0 or -errno. */
static int lease_store(struct lease *lease, const char *line, bool exclusive)
{
	int store, directory = lease_directory(lease, &store);
	if (directory < 0)
		return directory;
	int rc;
	if (!line[0]) {
		rc = io_unlink(directory, lease->name);
		rc = rc == -ENOENT ? 0 : rc;
	} else {
		char text[LEASE_TEXT_MAX];
		int length = snprintf(text, sizeof text, "%s\nexpires %llu\n", line,
				      (unsigned long long)(clock_us(CLOCK_REALTIME) + (uint64_t)lease->seconds * 1000000u));
		struct io_file file;
		int flags = O_RDWR | O_CREAT | (exclusive ? O_EXCL : O_TRUNC);
		if ((rc = io_file_open(directory, lease->name, flags, IO_MANIFEST, &file)) == 0) {
			rc = io_pwrite(&file, text, (size_t)length < sizeof text ? (size_t)length : sizeof text - 1, 0);
			if (rc == 0)
				rc = io_fsync(&file);   /* stored: the lease holds from here */
			io_file_close(&file);
		}
	}
	close(directory);
	close(store);
	return rc;
}

static void *lease_renew(void *context)
{
	struct lease *lease = context;
	uint64_t renewal_us = (uint64_t)(lease->seconds / 3 ? lease->seconds / 3 : 1) * 1000000u;
	pthread_mutex_lock(&lease->lock);
	while (lease->state == LEASE_RENEWING) {
		uint64_t now = clock_us(CLOCK_MONOTONIC), due = UINT64_MAX;
		bool pending = strcmp(lease->line, lease->stored) != 0;
		if (pending)
			due = lease->changed_us + LEASE_SETTLE_MS * 1000u;
		else if (lease->stored[0])
			due = lease->stored_us + renewal_us;
		if (due > now) {
			if (due == UINT64_MAX) {
				pthread_cond_wait(&lease->wake, &lease->lock);
			} else {
				struct timespec until;
				clock_gettime(CLOCK_REALTIME, &until);
				uint64_t wait = due - now;
				until.tv_sec += (time_t)(wait / 1000000u);
				until.tv_nsec += (long)(wait % 1000000u) * 1000L;
				if (until.tv_nsec >= 1000000000L)
					until.tv_sec++, until.tv_nsec -= 1000000000L;
				pthread_cond_timedwait(&lease->wake, &lease->lock, &until);
			}
			continue;
		}
		char line[LINE_MAX_BYTES];
		snprintf(line, sizeof line, "%s", lease->line);
		pthread_mutex_unlock(&lease->lock);
		int rc = lease_store(lease, line, false);
		uint64_t after = clock_us(CLOCK_MONOTONIC);
		/* one failure is a note; a lease half gone without a good store is a warning */
		if (rc < 0)
			io_log(after - lease->succeeded_us > (uint64_t)lease->seconds * 500000u ? LOG_WARNING
			       : io_error_is_unreachable(rc) ? LOG_DEBUG : LOG_INFO,
			       "%s: cannot store the lease %s/%s: %s (it lapses unless a renewal works)", lease->path,
			       lease->subdirectory, lease->name, io_strerror(rc));
		pthread_mutex_lock(&lease->lock);
		lease->stored_us = after;   /* a failure is tried again at the next renewal */
		if (rc == 0) {
			lease->succeeded_us = after;
			snprintf(lease->stored, sizeof lease->stored, "%s", line);
		}
	}
	pthread_mutex_unlock(&lease->lock);
	return NULL;
}

int lease_open(const char *path, const char *subdirectory, const char *name, struct lease **out)
{
	*out = NULL;
	struct lease *lease = calloc(1, sizeof *lease);
	if (!lease)
		return -ENOMEM;
	if ((size_t)snprintf(lease->path, sizeof lease->path, "%s", path) >= sizeof lease->path ||
	    (size_t)snprintf(lease->subdirectory, sizeof lease->subdirectory, "%s", subdirectory) >=
		    sizeof lease->subdirectory ||
	    (size_t)snprintf(lease->name, sizeof lease->name, "%s", name) >= sizeof lease->name) {
		free(lease);
		return -ENAMETOOLONG;
	}
	lease->seconds = lease_seconds();
	lease->state = LEASE_RENEWING;
	lease->succeeded_us = clock_us(CLOCK_MONOTONIC);
	pthread_mutex_init(&lease->lock, NULL);
	pthread_cond_init(&lease->wake, NULL);
	int rc = -pthread_create(&lease->thread, NULL, lease_renew, lease);
	if (rc < 0) {
		pthread_cond_destroy(&lease->wake);
		pthread_mutex_destroy(&lease->lock);
		free(lease);
		return rc;
	}
	*out = lease;
	return 0;
}

void lease_set(struct lease *lease, const char *first_line)
{
	pthread_mutex_lock(&lease->lock);
	if (strcmp(lease->line, first_line) != 0) {
		snprintf(lease->line, sizeof lease->line, "%s", first_line);
		lease->line[strcspn(lease->line, "\n")] = '\0';
		lease->changed_us = clock_us(CLOCK_MONOTONIC);
		pthread_cond_signal(&lease->wake);
	}
	pthread_mutex_unlock(&lease->lock);
}

int lease_begin(const char *path, const char *subdirectory, const char *name, const char *first_line,
		bool exclusive, struct lease **out)
{
	char line[LINE_MAX_BYTES];
	snprintf(line, sizeof line, "%s", first_line[0] ? first_line : "-");
	line[strcspn(line, "\n")] = '\0';
	struct lease probe = { .seconds = lease_seconds() };
	snprintf(probe.path, sizeof probe.path, "%s", path);
	snprintf(probe.subdirectory, sizeof probe.subdirectory, "%s", subdirectory);
	snprintf(probe.name, sizeof probe.name, "%s", name);
	int rc = lease_store(&probe, line, exclusive);   /* invariant 1: stored before it is handed out */
	if (rc < 0)
		return rc;
	if ((rc = lease_open(path, subdirectory, name, out)) < 0)
		return rc;
	struct lease *lease = *out;
	pthread_mutex_lock(&lease->lock);
	snprintf(lease->line, sizeof lease->line, "%s", line);
	snprintf(lease->stored, sizeof lease->stored, "%s", line);
	lease->stored_us = lease->changed_us = lease->succeeded_us = clock_us(CLOCK_MONOTONIC);
	pthread_cond_signal(&lease->wake);
	pthread_mutex_unlock(&lease->lock);
	return 0;
}

/* Tells the thread to stop and joins it (if there is one). */
static void thread_stop(struct lease *lease, enum lease_state next)
{
	pthread_mutex_lock(&lease->lock);
	bool running = lease->state == LEASE_RENEWING;
	lease->state = LEASE_STOPPING;
	pthread_cond_signal(&lease->wake);
	pthread_mutex_unlock(&lease->lock);
	if (running)
		pthread_join(lease->thread, NULL);
	lease->state = next;
}

void lease_pause(struct lease *lease)
{
	if (lease)
		thread_stop(lease, LEASE_PAUSED);
}

int lease_resume(struct lease *lease)
{
	if (!lease || lease->state != LEASE_PAUSED)
		return 0;
	lease->state = LEASE_RENEWING;
	int rc = -pthread_create(&lease->thread, NULL, lease_renew, lease);
	if (rc < 0)
		lease->state = LEASE_PAUSED;
	return rc;
}

void lease_end(struct lease *lease, bool remove)
{
	if (!lease)
		return;
	thread_stop(lease, LEASE_STOPPING);
	if (remove && lease->stored[0])
		lease_store(lease, "", false);
	pthread_cond_destroy(&lease->wake);
	pthread_mutex_destroy(&lease->lock);
	free(lease);
}

int lease_alive(int directory, const char *name, char *text, size_t size)
{
	struct io_file file;
	int rc = io_file_open(directory, name, O_RDONLY, IO_MANIFEST, &file);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	char bytes[LEASE_TEXT_MAX];
	ssize_t got = io_pread_some(&file, bytes, sizeof bytes - 1, 0);
	io_file_close(&file);
	if (got < 0)
		return got == -ENOENT ? 0 : (int)got;
	bytes[got] = '\0';
	const char *expires = strstr(bytes, "\nexpires ");
	bool alive = expires && strtoull(expires + 9, NULL, 10) > clock_us(CLOCK_REALTIME);
	if (text && size) {
		bytes[strcspn(bytes, "\n")] = '\0';
		snprintf(text, size, "%s", bytes);
	}
	return alive ? 1 : 0;
}
