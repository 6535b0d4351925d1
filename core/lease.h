/*
 * lease — "a live process holds this" said by an object with an expiry, for
 * a store in an object store, where no lock outlives its process or crosses
 * hosts (layer io; docs/FORMAT.md §19 and §17).
 *
 * A lease is a small text object: a first line the holder chooses, then
 * "expires MICROSECONDS" (wall clock, UTC). Its holder stores it and a thread
 * rewrites it every third of its length; whoever finds it expired may treat
 * the holder as dead. Clocks of hosts must agree to well within a lease
 * (30 s by default, GRAPHFS_LEASE_SECONDS).
 */
#ifndef GRAPHFS_LEASE_H
#define GRAPHFS_LEASE_H

#include <stdbool.h>
#include <stddef.h>

#define LEASE_TEXT_MAX 4400

struct lease;

/* The length of a lease: GRAPHFS_LEASE_SECONDS (1..3600) or 30. */
unsigned lease_seconds(void);

/*
 * Stores the lease NAME in the directory subdirectory of the store at path
 * (created if missing), holding first_line, and starts renewing it. Returns 0
 * with *out once it is stored, or -errno (nothing renewing; an object that
 * may have been stored is left for its expiry).
 */
int lease_begin(const char *path, const char *subdirectory, const char *name, const char *first_line,
		struct lease **out);

/* Stops renewing and frees the lease (the object stays: remove it with io_unlink, or let it expire). */
void lease_end(struct lease *lease);

/*
 * Reads the lease NAME in directory: 1 if it has not expired, 0 if it has or
 * is absent, or -errno. text (may be NULL) gets its first line.
 */
int lease_alive(int directory, const char *name, char *text, size_t size);

#endif
