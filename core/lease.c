/*
 * lease — see lease.h.
 *
 * States of a lease: RENEWING (its thread rewrites the object every third of
 * the lease) -> STOPPING (lease_end: the thread is told and joined).
 *
 * Invariants:
 *   1. lease_begin returns only after the object is stored: from then on it
 *      stays alive as long as the process does and renewals succeed.
 *   2. A failed renewal is logged and tried again at the next third; the
 *      lease lapses only if renewals fail for a whole lease.
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

enum lease_state { LEASE_RENEWING, LEASE_STOPPING };

struct lease {
	char path[4096];
	char subdirectory[64];
	char name[300];
	char first_line[LEASE_TEXT_MAX - 64];
	unsigned seconds;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	enum lease_state state;       /* guarded by lock */
};

unsigned lease_seconds(void)
{
	const char *text = getenv("GRAPHFS_LEASE_SECONDS");
	unsigned long seconds = text && *text ? strtoul(text, NULL, 10) : 0;
	return seconds >= 1 && seconds <= 3600 ? (unsigned)seconds : LEASE_DEFAULT_SECONDS;
}

static uint64_t wall_us(void)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	return (uint64_t)now.tv_sec * 1000000u + (uint64_t)now.tv_nsec / 1000u;
}

/* Stores the object, expiring lease->seconds from now. 0 or -errno. */
static int lease_store(struct lease *lease)
{
	int store = io_directory_open(lease->path);
	if (store < 0)
		return store;
	int rc = io_directory_make(store, lease->subdirectory);
	int directory = rc == 0 || rc == -EEXIST ? io_directory_open_at(store, lease->subdirectory) : rc;
	rc = directory < 0 ? directory : 0;
	char text[LEASE_TEXT_MAX];
	int length = snprintf(text, sizeof text, "%s\nexpires %llu\n", lease->first_line,
			      (unsigned long long)(wall_us() + (uint64_t)lease->seconds * 1000000u));
	struct io_file file;
	if (rc == 0 && (rc = io_file_open(directory, lease->name, O_RDWR | O_CREAT | O_TRUNC, IO_MANIFEST, &file)) == 0) {
		rc = io_pwrite(&file, text, (size_t)length < sizeof text ? (size_t)length : sizeof text - 1, 0);
		if (rc == 0)
			rc = io_fsync(&file);   /* stored: the lease holds from here */
		io_file_close(&file);
	}
	if (directory >= 0)
		close(directory);
	close(store);
	return rc;
}

static void *lease_renew(void *context)
{
	struct lease *lease = context;
	pthread_mutex_lock(&lease->lock);
	while (lease->state == LEASE_RENEWING) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += lease->seconds / 3 ? lease->seconds / 3 : 1;
		if (pthread_cond_timedwait(&lease->wake, &lease->lock, &until) == 0 || lease->state != LEASE_RENEWING)
			continue;
		pthread_mutex_unlock(&lease->lock);
		int rc = lease_store(lease);
		if (rc < 0)
			io_log(LOG_ERR, "%s: cannot renew the lease %s/%s: %s (it lapses unless a renewal works)",
			       lease->path, lease->subdirectory, lease->name, io_strerror(rc));
		pthread_mutex_lock(&lease->lock);
	}
	pthread_mutex_unlock(&lease->lock);
	return NULL;
}

int lease_begin(const char *path, const char *subdirectory, const char *name, const char *first_line,
		struct lease **out)
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
	snprintf(lease->first_line, sizeof lease->first_line, "%s", first_line);
	lease->first_line[strcspn(lease->first_line, "\n")] = '\0';
	lease->seconds = lease_seconds();
	lease->state = LEASE_RENEWING;
	pthread_mutex_init(&lease->lock, NULL);
	pthread_cond_init(&lease->wake, NULL);
	int rc = lease_store(lease);
	if (rc == 0)
		rc = -pthread_create(&lease->thread, NULL, lease_renew, lease);
	if (rc < 0) {
		pthread_cond_destroy(&lease->wake);
		pthread_mutex_destroy(&lease->lock);
		free(lease);
		return rc;
	}
	*out = lease;
	return 0;
}

void lease_end(struct lease *lease)
{
	if (!lease)
		return;
	pthread_mutex_lock(&lease->lock);
	lease->state = LEASE_STOPPING;
	pthread_cond_signal(&lease->wake);
	pthread_mutex_unlock(&lease->lock);
	pthread_join(lease->thread, NULL);
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
	bool alive = expires && strtoull(expires + 9, NULL, 10) > wall_us();
	if (text && size) {
		bytes[strcspn(bytes, "\n")] = '\0';
		snprintf(text, size, "%s", bytes);
	}
	return alive ? 1 : 0;
}
