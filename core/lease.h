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

/* "<host>-<pid>" (the host name with characters outside [A-Za-z0-9-] as '-'): who holds a lease. */
void lease_holder(char *out, size_t size);

/*
 * Stores the lease NAME in the directory subdirectory of the store at path
 * (created if missing), holding first_line, and starts renewing it. exclusive:
 * only if no object of that name exists (-EEXIST otherwise: someone holds
 * it). Returns 0 with *out once it is stored, or -errno (nothing renewing).
 */
int lease_begin(const char *path, const char *subdirectory, const char *name, const char *first_line,
		bool exclusive, struct lease **out);

/*
 * A lease stored only when it says something for a while: nothing is stored
 * until lease_set gives a non-empty line, which the thread stores once it has
 * stood LEASE_SETTLE_MS (a line set and cleared sooner costs nothing), and an
 * empty line removes the object. 0 or -errno.
 */
int lease_open(const char *path, const char *subdirectory, const char *name, struct lease **out);
void lease_set(struct lease *lease, const char *first_line);
#define LEASE_SETTLE_MS 400

/*
 * Stops the lease's thread (lease_pause) and starts a new one (lease_resume),
 * around a fork(2) that must keep the lease: a forked child has no threads.
 * Nothing is stored in between. lease_resume returns 0 or -errno.
 */
void lease_pause(struct lease *lease);
int lease_resume(struct lease *lease);

/* Stops renewing and frees the lease; remove: also removes its object (if stored). */
void lease_end(struct lease *lease, bool remove);

/*
 * Reads the lease NAME in directory: 1 if it has not expired, 0 if it has or
 * is absent, or -errno. text (may be NULL) gets its first line.
 */
int lease_alive(int directory, const char *name, char *text, size_t size);

#endif
