/*
 * manifest_pins — readers' holds on versions, visible to every process that
 * opens the store, so that gc never reclaims what someone is reading
 * (docs/FORMAT.md §21, docs/ARCHITECTURE.md "Retention").
 *
 * A pin is a shared open-file-description lock (io_range_lock) on the bytes
 * PINS_BASE + first .. PINS_BASE + last of the file `pins`: the kernel keeps
 * it for exactly as long as this handle's descriptor is open, and drops it
 * when the process dies, so no pin outlives its holder and no file needs
 * cleaning up. A pin never blocks a commit: nothing that commits locks these
 * bytes. gc lists the pins by probing the range with exclusive-lock tests
 * (manifest_pins_list) from a descriptor of its own.
 *
 * The kernel merges one descriptor's locks, so this handle keeps a count per
 * pinned range and unlocks only the bytes that no other pin of the handle
 * still covers.
 *
 * The sweep sequence (bytes 0..15 of the file) closes the race between a
 * reader that resolved a version and a gc that reclaims it before the pin is
 * taken: gc publishes its horizon, then increments the sequence, then lists
 * pins; a reader notes the sequence before it resolves, pins, and reads the
 * sequence again — if it moved, a gc may not have seen the pin in time and the
 * reader resolves again (store.c). Either gc sees the pin, or the reader sees
 * the horizon.
 *
 * In an object store no lock crosses hosts: a handle's pins are a lease
 * (lease.h), pins.d/<host>-<pid>-<n> saying "pins FIRST-LAST ...", stored
 * once a pin has stood LEASE_SETTLE_MS (a short read costs no request), and
 * the gc lock is the lease leases/gc, created only if absent. There is no
 * sweep sequence: gc waits PINS_GRACE_MS after publishing its horizon before
 * it lists the pins, longer than a pin takes to be stored plus the 100 ms a
 * reader's view of the latest root may lag (docs/FORMAT.md §21), so a reader
 * that resolved before the horizon is listed, and one after it sees it.
 *
 * Invariants kept:
 *   1. A range pinned through this handle is locked in the file (in an object
 *      store: named by its lease) for as long as its count is positive,
 *      without a gap (unlock only uncovered bytes).
 *   2. The sweep sequence only grows; it is written only by the gc holding
 *      the gc lock (byte PINS_GC_LOCK, exclusive). A snapshot copy holds the
 *      same byte shared for as long as it copies: no gc runs meanwhile (in
 *      an object store it holds the gc lease itself, so snapshots and
 *      restores there also wait for each other).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "lease.h"
#include "manifest_int.h"

#define HORIZON_REFRESH_US 1000000u   /* object store: how stale the horizon a sweep sequence stands for may be */
#define GC_HOLD_POLL_MS 100      /* object store: how often a snapshot waiting for gc looks again */
#define PINS_GRACE_MS 1500       /* object store: gc's wait between its horizon and listing the pins */
#define PINS_SEQUENCE_OFFSET 0   /* u64 sweep sequence, then its bitwise complement */
#define PINS_GC_LOCK 16          /* one byte: exclusively locked by the running gc */
#define PINS_BASE 4096           /* version V's pin is the byte PINS_BASE + V */

int manifest_pins_open(struct manifest *manifest, bool read_only)
{
	struct manifest_pins *pins = &manifest->pins;
	int rc = io_file_open(manifest->directory, "pins", read_only ? O_RDONLY : O_RDWR | O_CREAT, IO_MANIFEST,
			      &pins->file);
	if (rc < 0 && read_only)
		return 0;   /* a read-only store without a pins file (or one we may not open): no gc can run here */
	return rc;
}

void manifest_leases_pause(struct manifest *manifest)
{
	pthread_mutex_lock(&manifest->pins.mutex);
	lease_pause(manifest->pins.lease);
	pthread_mutex_unlock(&manifest->pins.mutex);
	lease_pause(manifest->pins.gc_lease);
}

int manifest_leases_resume(struct manifest *manifest)
{
	pthread_mutex_lock(&manifest->pins.mutex);
	int rc = lease_resume(manifest->pins.lease);
	pthread_mutex_unlock(&manifest->pins.mutex);
	return rc < 0 ? rc : lease_resume(manifest->pins.gc_lease);
}

static bool pins_remote(const struct manifest_pins *pins)
{
	return io_file_is_remote(&pins->file);
}

/* The lease's line for the handle's pins: "pins FIRST-LAST ..." ("" when none). Caller holds the mutex. */
static void pins_publish(struct manifest *manifest)
{
	struct manifest_pins *pins = &manifest->pins;
	if (!pins->lease) {
		static _Atomic unsigned handles;
		char holder[100], name[160];
		lease_holder(holder, sizeof holder);
		snprintf(name, sizeof name, "%s-%u", holder, handles++);
		if (lease_open(manifest->path, "pins.d", name, &pins->lease) < 0)
			return;   /* gc cannot see these pins; logged by nobody: lease_open fails only without memory */
	}
	char line[LEASE_TEXT_MAX - 64];
	size_t length = 0;
	line[0] = '\0';
	for (size_t i = 0; i < pins->count && length + 48 < sizeof line; i++)
		length += (size_t)snprintf(line + length, sizeof line - length, "%s %llu-%llu", length ? "" : "pins",
					   (unsigned long long)pins->ranges[i].first,
					   (unsigned long long)pins->ranges[i].last);
	lease_set(pins->lease, line);
}

void manifest_pins_close(struct manifest *manifest)
{
	struct manifest_pins *pins = &manifest->pins;
	lease_end(pins->lease, true);
	pins->lease = NULL;
	lease_end(pins->gc_lease, true);
	pins->gc_lease = NULL;
	if (pins->file.descriptor >= 0)
		io_file_close(&pins->file);
	free(pins->ranges);
	pins->ranges = NULL;
	pins->count = pins->capacity = 0;
	pthread_mutex_destroy(&pins->mutex);
}

uint64_t manifest_sweep_sequence(struct manifest *manifest)
{
	struct manifest_pins *pins = &manifest->pins;
	if (pins->file.descriptor >= 0 && pins_remote(pins)) {
		/* no sweep sequence in an object store (gc waits out a grace period instead): the
		 * horizon moves with every gc that reclaims */
		struct root_record latest;
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		uint64_t now_us = (uint64_t)now.tv_sec * 1000000u + (uint64_t)now.tv_nsec / 1000u;
		/* a refresh when the last listing is older than a second: a gc takes longer than
		 * that (its grace period), and a short command asks for no extra LIST */
		if ((now_us - manifest->listed_us >= HORIZON_REFRESH_US && manifest_refresh(manifest, NULL) < 0) ||
		    manifest_latest(manifest, &latest) < 0)
			return 0;
		return latest.horizon;
	}
	if (pins->file.descriptor < 0)
		return 0;
	for (int attempt = 0; attempt < 16; attempt++) {
		uint8_t bytes[16] = { 0 };
		ssize_t got = io_file_is_remote(&pins->file)
				      ? io_pread_some(&pins->file, bytes, sizeof bytes, PINS_SEQUENCE_OFFSET)
				      : pread(pins->file.descriptor, bytes, sizeof bytes, PINS_SEQUENCE_OFFSET);
		if (got < (ssize_t)sizeof bytes)
			return 0;   /* never written: no gc ever swept */
		uint64_t sequence = buf_load_u64(bytes), check = buf_load_u64(bytes + 8);
		if (check == ~sequence)
			return sequence;
	}
	return UINT64_MAX;   /* torn every time: a value no reader noted, so it re-resolves */
}

int manifest_sweep_sequence_advance(struct manifest *manifest)
{
	struct manifest_pins *pins = &manifest->pins;
	if (pins_remote(pins))
		return 0;
	uint64_t next = manifest_sweep_sequence(manifest) + 1;
	uint8_t bytes[16];
	buf_store_u64(bytes, next);
	buf_store_u64(bytes + 8, ~next);
	/* not fsynced: after a crash every reader resolves afresh and the next gc advances it again */
	return io_pwrite(&pins->file, bytes, sizeof bytes, PINS_SEQUENCE_OFFSET);
}

/* The gc lock in an object store: the lease leases/gc, created only if absent (an expired one goes first). */
static int gc_lock_remotely(struct manifest *manifest, const char *holder)
{
	struct manifest_pins *pins = &manifest->pins;
	int directory = io_directory_open_at(manifest->directory, "leases");
	int alive = directory < 0 ? 0 : lease_alive(directory, "gc", NULL, 0);
	if (alive == 0 && directory >= 0)
		io_unlink(directory, "gc");   /* a dead host's gc */
	if (directory >= 0)
		close(directory);
	if (alive != 0)
		return alive < 0 ? alive : -EBUSY;
	char line[32];
	snprintf(line, sizeof line, "%s %ld", holder, (long)getpid());
	int rc = lease_begin(manifest->path, "leases", "gc", line, true, &pins->gc_lease);
	return rc == -EEXIST ? -EBUSY : rc;
}

int manifest_gc_lock(struct manifest *manifest)
{
	if (manifest->pins.file.descriptor < 0)
		return -EROFS;
	if (pins_remote(&manifest->pins))
		return gc_lock_remotely(manifest, "gc");
	int rc = io_range_lock(&manifest->pins.file, PINS_GC_LOCK, 1, true);
	return rc == -EAGAIN ? -EBUSY : rc;
}

int manifest_gc_hold(struct manifest *manifest)
{
	if (manifest->pins.file.descriptor < 0)
		return 0;
	if (!pins_remote(&manifest->pins))
		return io_range_lock_shared_wait(&manifest->pins.file, PINS_GC_LOCK, 1);
	/* no shared lock crosses hosts: a snapshot or restore takes the gc lease itself,
	 * waiting out a running gc (or another holder) */
	for (;;) {
		int rc = gc_lock_remotely(manifest, "hold");
		if (rc != -EBUSY)
			return rc;
		usleep(GC_HOLD_POLL_MS * 1000);
	}
}

void manifest_gc_unlock(struct manifest *manifest)
{
	if (manifest->pins.gc_lease) {
		lease_end(manifest->pins.gc_lease, true);
		manifest->pins.gc_lease = NULL;
		return;
	}
	if (manifest->pins.file.descriptor >= 0 && !pins_remote(&manifest->pins))
		io_range_unlock(&manifest->pins.file, PINS_GC_LOCK, 1);
}

static int range_find(const struct manifest_pins *pins, uint64_t first, uint64_t last)
{
	for (size_t i = 0; i < pins->count; i++)
		if (pins->ranges[i].first == first && pins->ranges[i].last == last)
			return (int)i;
	return -1;
}

int manifest_pin(struct manifest *manifest, uint64_t first, uint64_t last)
{
	struct manifest_pins *pins = &manifest->pins;
	if (pins->file.descriptor < 0 || first > last)
		return 0;
	int rc = 0;
	pthread_mutex_lock(&pins->mutex);
	int found = range_find(pins, first, last);
	if (found >= 0) {
		pins->ranges[found].count++;
		goto out;
	}
	if ((rc = MANIFEST_ARRAY_GROW(pins->ranges, pins->capacity, pins->count)) < 0)
		goto out;
	if (!pins_remote(pins) && (rc = io_range_lock(&pins->file, PINS_BASE + first, last - first + 1, false)) < 0)
		goto out;
	pins->ranges[pins->count++] = (struct pin_range){ first, last, 1 };
	if (pins_remote(pins))
		pins_publish(manifest);
out:
	pthread_mutex_unlock(&pins->mutex);
	return rc;
}

static int compare_ranges(const void *a, const void *b)
{
	const struct pin_range *x = a, *y = b;
	return (x->first > y->first) - (x->first < y->first);
}

void manifest_unpin(struct manifest *manifest, uint64_t first, uint64_t last)
{
	struct manifest_pins *pins = &manifest->pins;
	if (pins->file.descriptor < 0 || first > last)
		return;
	pthread_mutex_lock(&pins->mutex);
	int found = range_find(pins, first, last);
	if (found < 0 || --pins->ranges[found].count > 0)
		goto out;
	pins->ranges[found] = pins->ranges[--pins->count];
	if (pins_remote(pins)) {
		pins_publish(manifest);
		goto out;
	}
	/* unlock [first, last] minus what the handle's other pins still cover (invariant 1) */
	if (pins->count > 1)
		qsort(pins->ranges, pins->count, sizeof *pins->ranges, compare_ranges);
	uint64_t at = first;
	for (size_t i = 0; i < pins->count && at <= last; i++) {
		const struct pin_range *other = &pins->ranges[i];
		if (other->last < at || other->first > last)
			continue;
		if (other->first > at)
			io_range_unlock(&pins->file, PINS_BASE + at, other->first - at);
		if (other->last >= last)
			at = last + 1;
		else
			at = other->last + 1 > at ? other->last + 1 : at;
	}
	if (at <= last)
		io_range_unlock(&pins->file, PINS_BASE + at, last - at + 1);
out:
	pthread_mutex_unlock(&pins->mutex);
}

/* Appends [first, last] to the list. 0 or -ENOMEM. */
static int list_add(struct manifest_pin_list *list, uint64_t first, uint64_t last)
{
	int rc = MANIFEST_ARRAY_GROW(list->ranges, list->capacity, list->count);
	if (rc < 0)
		return rc;
	list->ranges[list->count++] = (struct pin_range){ first, last, 1 };
	return 0;
}

/* Every pinned version in [low, high] through probe (explicit stack: the
 * intervals left and right of each lock found). 0 or -errno. */
static int list_probe(struct io_file *probe, uint64_t low, uint64_t high, struct manifest_pin_list *list)
{
	struct interval { uint64_t low, high; } stack[128];
	size_t depth = 0;
	stack[depth++] = (struct interval){ low, high };
	int rc = 0;
	while (depth > 0 && rc == 0) {
		struct interval at = stack[--depth];
		uint64_t start, length;
		rc = io_range_test(probe, PINS_BASE + at.low, at.high - at.low + 1, &start, &length);
		if (rc == -ENOENT) {
			rc = 0;
			continue;
		}
		if (rc < 0)
			break;
		uint64_t first = start < PINS_BASE + at.low ? at.low : start - PINS_BASE;
		uint64_t last = length == 0 || start + length - 1 - PINS_BASE > at.high ? at.high
											: start + length - 1 - PINS_BASE;
		if ((rc = list_add(list, first, last)) < 0)
			break;
		if (depth + 2 > sizeof stack / sizeof stack[0]) {
			rc = -E2BIG;   /* more than ~64 distinct pinned ranges nested: caller keeps everything */
			break;
		}
		if (first > at.low)
			stack[depth++] = (struct interval){ at.low, first - 1 };
		if (last < at.high)
			stack[depth++] = (struct interval){ last + 1, at.high };
	}
	return rc;
}

struct lease_scan {
	int directory;
	uint64_t low, high;
	struct manifest_pin_list *list;
	int rc;
};

/* One handle's pins lease: each range of a live one, clipped to [low, high]. */
static int scan_lease(const char *name, void *context)
{
	struct lease_scan *scan = context;
	char text[LEASE_TEXT_MAX];
	int alive = lease_alive(scan->directory, name, text, sizeof text);
	if (alive < 0)
		return scan->rc = alive;
	if (alive == 0) {
		io_unlink(scan->directory, name);   /* its holder died */
		return 0;
	}
	const char *at = strncmp(text, "pins", 4) == 0 ? text + 4 : "";
	unsigned long long first, last;
	int used;
	while (sscanf(at, " %llu-%llu%n", &first, &last, &used) == 2) {
		at += used;
		if (last < scan->low || first > scan->high)
			continue;
		if ((scan->rc = list_add(scan->list, first < scan->low ? scan->low : first,
					 last > scan->high ? scan->high : last)) < 0)
			return scan->rc;
	}
	return 0;
}

/* manifest_pins_list in an object store: after the grace period, every live pins lease. */
static int pins_list_remotely(struct manifest *manifest, uint64_t low, uint64_t high, struct manifest_pin_list *list)
{
	struct timespec grace = { PINS_GRACE_MS / 1000, (long)(PINS_GRACE_MS % 1000) * 1000000L };
	nanosleep(&grace, NULL);
	int rc = 0;
	struct manifest_pins *pins = &manifest->pins;
	pthread_mutex_lock(&pins->mutex);   /* this handle's own, stored or not */
	for (size_t i = 0; i < pins->count && rc == 0; i++)
		if (pins->ranges[i].last >= low && pins->ranges[i].first <= high)
			rc = list_add(list, pins->ranges[i].first < low ? low : pins->ranges[i].first,
				      pins->ranges[i].last > high ? high : pins->ranges[i].last);
	pthread_mutex_unlock(&pins->mutex);
	int directory = rc == 0 ? io_directory_open_at(manifest->directory, "pins.d") : -1;
	if (directory >= 0) {
		struct lease_scan scan = { directory, low, high, list, 0 };
		rc = io_directory_list(directory, NULL, scan_lease, &scan);
		if (rc == 0)
			rc = scan.rc;
		close(directory);
	}
	if (rc == -ENOENT)
		rc = 0;
	if (rc == 0 && list->count > 1)
		qsort(list->ranges, list->count, sizeof *list->ranges, compare_ranges);
	return rc;
}

int manifest_pins_list(struct manifest *manifest, uint64_t low, uint64_t high, struct manifest_pin_list *list)
{
	memset(list, 0, sizeof *list);
	if (manifest->pins.file.descriptor < 0 || low > high)
		return 0;
	if (pins_remote(&manifest->pins))
		return pins_list_remotely(manifest, low, high, list);
	/* a descriptor of its own, so that this handle's pins are listed too */
	struct io_file probe;
	int rc = io_file_open(manifest->directory, "pins", O_RDWR, IO_MANIFEST, &probe);
	if (rc < 0)
		return rc;
	rc = list_probe(&probe, low, high, list);
	io_file_close(&probe);
	if (rc == 0 && list->count > 1)
		qsort(list->ranges, list->count, sizeof *list->ranges, compare_ranges);
	return rc;
}

bool manifest_pin_list_has(const struct manifest_pin_list *list, uint64_t version)
{
	for (size_t i = 0; i < list->count && list->ranges[i].first <= version; i++)
		if (version <= list->ranges[i].last)
			return true;
	return false;
}

void manifest_pin_list_free(struct manifest_pin_list *list)
{
	free(list->ranges);
	memset(list, 0, sizeof *list);
}
