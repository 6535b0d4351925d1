/*
 * io_wake — wake-up words shared by the processes of one host (layer: io).
 *
 * A store's `lock` file doubles as a page of shared memory (docs/FORMAT.md
 * §18 "Wake-up words"). A process that must wait for another — for the store
 * lock, or for the fsync that makes its commit durable — reads a word, checks
 * its condition once more, and sleeps in futex(2) until the word changes or a
 * bounded pause ends; the process that changes the state increments the word
 * and wakes the sleepers, if the waiter count says there are any. The words
 * only shorten waits: every waiter re-checks the real state (a flock, a meta
 * slot) after it wakes, and the pause bounds a wait that nobody ends (the
 * waker died between its change and its wake, or the file is a copy).
 *
 * Invariants kept:
 *   1. A word is only ever incremented (wrapping), never written otherwise,
 *      so a stale reading makes a waiter return at once, never sleep longer.
 *   2. A waiter is counted (waiters word) before its last check of the state
 *      and uncounted after its sleep: a waker that changes the state after
 *      that check sees the count and wakes it.
 *   3. Nothing here decides anything: with no page (a read-only open, a
 *      file system without shared mappings, an object store's file without a
 *      host lock file) waits are plain sleeps of the same bound. An object
 *      store's lock has the page of the host's lock file standing for it
 *      (io_remote.c invariant 4): its waiters are this host's processes. A
 *      waiter that died while counted leaves the count too high: wakers then
 *      make one needless futex call each, and nothing else changes.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "io.h"
#include "io_remote_int.h"

#define WAKE_PAGE_BYTES 4096u

int io_wake_page_map(struct io_file *file, struct io_wake_page *out)
{
	out->words = NULL;
	/* of an object store's file, the host's lock file that stands for it (io_remote.c) */
	int descriptor = io_file_is_remote(file) ? io_remote_lock_descriptor(file) : file->descriptor;
	if (descriptor < 0)
		return -EOPNOTSUPP;
	struct stat status;
	if (fstat(descriptor, &status) < 0)
		return -errno;
	/* the file only ever grows to one page: concurrent openers extend it alike */
	if (status.st_size < (off_t)WAKE_PAGE_BYTES && ftruncate(descriptor, WAKE_PAGE_BYTES) < 0)
		return -errno;
	void *page = mmap(NULL, WAKE_PAGE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, 0);
	if (page == MAP_FAILED)
		return -errno;
	out->words = page;
	return 0;
}

void io_wake_page_unmap(struct io_wake_page *page)
{
	if (page->words)
		munmap(page->words, WAKE_PAGE_BYTES);
	page->words = NULL;
}

uint32_t io_wake_read(const struct io_wake_page *page, enum io_wake_word word)
{
	return page->words ? __atomic_load_n(&page->words[2 * word], __ATOMIC_ACQUIRE) : 0;
}

void io_wake_waiting(const struct io_wake_page *page, enum io_wake_word word, bool waiting)
{
	if (page->words)
		__atomic_fetch_add(&page->words[2 * word + 1], waiting ? 1u : (uint32_t)-1, __ATOMIC_SEQ_CST);
}

void io_wake_sleep(const struct io_wake_page *page, enum io_wake_word word, uint32_t seen, uint64_t pause_us)
{
	struct timespec timeout = { (time_t)(pause_us / 1000000u), (long)(pause_us % 1000000u) * 1000 };
	if (!page->words) {
		nanosleep(&timeout, NULL);
		return;
	}
	/* returns at once when the word is no longer seen; EINTR and timeouts alike end the sleep */
	syscall(SYS_futex, &page->words[2 * word], FUTEX_WAIT, seen, &timeout, NULL, 0);
}

void io_wake_all(const struct io_wake_page *page, enum io_wake_word word)
{
	if (!page->words)
		return;
	__atomic_fetch_add(&page->words[2 * word], 1u, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&page->words[2 * word + 1], __ATOMIC_SEQ_CST) != 0)
		syscall(SYS_futex, &page->words[2 * word], FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/*
 * The record: bytes RECORD_OFFSET.. of the page, guarded by a sequence word
 * (odd while a write is under way). Writers are serialized by the caller (the
 * store lock); a writer that died mid-write left the word odd, and the next
 * writer makes it even again before its own write.
 */
#define RECORD_SEQUENCE_OFFSET 64u
#define RECORD_OFFSET 128u

void io_wake_record_write(const struct io_wake_page *page, const void *bytes, size_t size)
{
	if (!page->words || size > WAKE_PAGE_BYTES - RECORD_OFFSET)
		return;
	uint32_t *sequence = &page->words[RECORD_SEQUENCE_OFFSET / 4];
	uint32_t now = __atomic_load_n(sequence, __ATOMIC_RELAXED);
	if (now % 2 == 0)
		now++;
	__atomic_store_n(sequence, now, __ATOMIC_RELAXED);   /* odd: being written */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	uint8_t *record = (uint8_t *)page->words + RECORD_OFFSET;
	for (size_t i = 0; i < size; i++)
		__atomic_store_n(&record[i], ((const uint8_t *)bytes)[i], __ATOMIC_RELAXED);
	__atomic_store_n(sequence, now + 1, __ATOMIC_RELEASE);
}

bool io_wake_record_read(const struct io_wake_page *page, void *bytes, size_t size)
{
	if (!page->words || size > WAKE_PAGE_BYTES - RECORD_OFFSET)
		return false;
	const uint32_t *sequence = &page->words[RECORD_SEQUENCE_OFFSET / 4];
	const uint8_t *record = (const uint8_t *)page->words + RECORD_OFFSET;
	for (int attempt = 0; attempt < 4; attempt++) {
		uint32_t before = __atomic_load_n(sequence, __ATOMIC_ACQUIRE);
		if (before % 2)
			continue;
		for (size_t i = 0; i < size; i++)
			((uint8_t *)bytes)[i] = __atomic_load_n(&record[i], __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(sequence, __ATOMIC_RELAXED) == before)
			return before != 0;   /* 0: never written */
	}
	return false;
}
