/*
 * io — the one choke point for every store file access (layer: io).
 *
 * Everything the engine reads or writes goes through these functions so that
 *   - files are opened relative to the store's directory descriptor, with
 *     O_NOFOLLOW and O_CLOEXEC, created 0600 (directories 0700) — invariant 10;
 *   - I/O counters are exact: reads, bytes, pages (checksummed blocks) and
 *     rows decoded, kept apart for the manifest and for table data;
 *   - named failpoints let tests crash or fail the process at precise
 *     instants of the commit and recovery paths (one registry; arming or
 *     hitting a name not in it is a programming error: -EINVAL / abort).
 *
 * Counters are process-wide, updated with relaxed atomics, cumulative since
 * process start or the last io_counters_reset(). reads, bytes and pages count
 * physical reads: a block the pager serves from its block cache (pager.h)
 * counts nothing here, so repeating a lookup in one process may cost fewer
 * pages the second time; rows_decoded counts the decoding work of the
 * layers above, which they do for cached blocks too.
 */
#ifndef GRAPHFS_IO_H
#define GRAPHFS_IO_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "io_diag.h"

/* ---- the object-store cache ---------------------------------------------- */

/* This process's use of the local cache of object-store pieces (docs/FORMAT.md §23). */
struct io_cache_counters {
	uint64_t hits;           /* pieces read from the cache instead of the object store */
	uint64_t bytes;          /* their bytes */
	uint64_t stores;         /* pieces this process put into it */
};
void io_cache_counters_get(struct io_cache_counters *out);
/* What this process's prefetches sent (io_prefetch; exact: tests assert on them). */
struct io_prefetch_counters {
	uint64_t gets;           /* GETs made by prefetch threads (also counted among the object store's) */
	uint64_t rounds;         /* prefetches that sent any: each waited about one round trip */
};
void io_prefetch_counters_get(struct io_prefetch_counters *out);
/* The directory of one store's state on this host, "<cache root>/<store id in hex>" (the
 * root: GRAPHFS_CACHE_DIR, else $XDG_CACHE_HOME/graphfs, else ~/.cache/graphfs), whether or not
 * the cache is on; not created. 0, -ENOENT (no root can be named), -ENAMETOOLONG. */
int io_cache_store_directory(const uint8_t store_id[16], char *out, size_t size);
/* Makes every missing directory of path (as mkdir -p, mode 0700); path is changed and
 * restored meanwhile. 0 or -errno. */
int io_make_directories(char *path);
/* ---- files ------------------------------------------------------------- */

struct io_remote_file;

struct io_file {
	int descriptor;            /* -1 when closed */
	enum io_class class;       /* which counters its reads and writes feed */
	struct io_remote_file *remote;   /* NULL for a local file; else a file of an object store (io_remote.c) */
};

/*
 * Stores in an object store: io_directory_open("s3://BUCKET/PREFIX") gives a
 * directory every io function below accepts, whose files are objects
 * (docs/FORMAT.md §23). These say whether a directory or file is one.
 */
bool io_is_remote(int directory);
bool io_file_is_remote(const struct io_file *file);

/*
 * Around a fork(2): io_threads_pause waits for the io layer's own threads
 * (readaheads of object-store files, io_remote.c invariant 5) to end and
 * starts no new one until io_threads_resume, so that no lock of theirs is
 * held at the instant of the fork. Reads go on meanwhile, without readahead.
 */
void io_threads_pause(void);
void io_threads_resume(void);

/* Opens a directory (O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC); returns fd >= 0 or -errno. */
int io_directory_open(const char *path);
/* Opens directory/name (one component) the same way; returns fd >= 0 or -errno. */
int io_directory_open_at(int directory, const char *name);
/* mkdirat(directory, name, 0700); returns 0, -EEXIST or -errno. */
int io_directory_make(int directory, const char *name);
/* Opens name (relative, no '/' except for one level of "dir/name") under directory with
 * O_NOFOLLOW|O_CLOEXEC plus flags, mode 0600 when created. Returns 0 or -errno. */
int io_file_open(int directory, const char *name, int flags, enum io_class class, struct io_file *out);
void io_file_close(struct io_file *file);
/*
 * Creates name (which must not exist: -EEXIST) under directory, empty, already
 * holding flock(LOCK_EX) when the name appears: the file is made unnamed
 * (O_TMPFILE) in name's directory, locked, then linked as name, so a process
 * that removes unlocked files of such names (recovery of dead writers) never
 * takes it for a dead one. Where O_TMPFILE or /proc are missing it creates and
 * then locks. Returns 0 or -errno.
 */
int io_file_create_locked(int directory, const char *name, enum io_class class, struct io_file *out);
/*
 * Opens an unnamed scratch file in directory/subdirectory (O_TMPFILE): it has
 * no name, so nothing is left behind by a crash and nothing needs removing;
 * its space returns when it is closed. Where the file system has no
 * O_TMPFILE, an anonymous memory file (memfd) stands in. Returns 0 or -errno.
 */
int io_scratch_open(int directory, const char *subdirectory, enum io_class class, struct io_file *out);
/* Reads exactly size bytes at offset; a short read is -EIO. Counts one read. */
int io_pread(struct io_file *file, void *out, size_t size, uint64_t offset);
/* Reads up to size bytes; returns the byte count (0 at end of file) or -errno. Counts one read. */
ssize_t io_pread_some(struct io_file *file, void *out, size_t size, uint64_t offset);
/* A hint: reads at these offsets (blocks, ascending) come soon. An object store's manifest
 * fetches what it does not hold of them now, many requests at once (io_pieced.c invariant 6),
 * and returns when they are answered; a local file does nothing. Nothing is reported: a
 * read that needs what failed here asks again and hears why. */
void io_prefetch(struct io_file *file, const uint64_t *offsets, size_t count);
/* Writes exactly size bytes at offset; returns 0 or -errno. */
int io_pwrite(struct io_file *file, const void *bytes, size_t size, uint64_t offset);
int io_fsync(struct io_file *file);
/* fdatasync(2): the data and what reading it back needs (the file size after an
 * append), not times. Counted as an fsync. 0 or -errno. */
int io_datasync(struct io_file *file);
int io_truncate(struct io_file *file, uint64_t size);
int io_size(struct io_file *file, uint64_t *size_out);
/* io_size, except that a file in an object store answers from what this
 * process knows (no request): for a writer whose conditional create checks
 * the end anyway. 0 or -errno. */
int io_size_known(struct io_file *file, uint64_t *size_out);
/* Where an append after bytes ending at end starts: end, except in an object
 * store's manifest, where each tail after the first starts at a multiple of
 * 64 KiB and the bytes between read as zeros (docs/FORMAT.md §23). */
uint64_t io_append_offset(const struct io_file *file, uint64_t end);
/* Where the last append known began: in an object store's manifest the start
 * of its last piece (which ends with the newest root: a refresh need read
 * nothing before it); 0 for a local file (unknown). */
uint64_t io_last_append_start(struct io_file *file);
/* Where, in the append about to be written, the bytes a read of the newest
 * state needs begin (the writer puts what only history reads before them).
 * An object store's manifest records it beside the meta slots, so that a
 * cold reader of the newest piece fetches it from there on
 * (docs/FORMAT.md §23); a local file ignores it. */
void io_note_state_start(struct io_file *file, uint64_t offset);
int io_directory_sync(int directory);   /* fsync of a directory; not counted in either class */
int io_unlink(int directory, const char *name);
int io_rename(int directory, const char *from, const char *to);
/* A hard link to from (under from_directory) named to (under to_directory):
 * 0, -EXDEV (another file system), -EEXIST, -errno. */
int io_link(int from_directory, const char *from, int to_directory, const char *to);
/* flock(2) on the file: exclusive or shared, waiting or not (-EWOULDBLOCK). */
int io_lock(struct io_file *file, bool exclusive, bool wait);
int io_unlock(struct io_file *file);
/*
 * Open-file-description byte-range locks (fcntl F_OFD_SETLK, F_OFD_GETLK): they belong to the
 * open file, not the process, so threads and several handles in one process
 * hold them independently, and they vanish when the holder's last descriptor
 * closes (also when it dies). length 0 means "to the end of any file".
 * io_range_lock: shared or exclusive, never waits (-EAGAIN when another holds
 * a conflicting lock). io_range_unlock: releases that range. io_range_test:
 * whether another open file holds a lock conflicting with an exclusive lock on
 * the range: 0 and *found_start and *found_length of one such lock (length 0: to
 * the end), -ENOENT when none does, -errno.
 */
int io_range_lock(struct io_file *file, uint64_t start, uint64_t length, bool exclusive);
/* The same, waiting for a conflicting lock to go. 0 or -errno. */
int io_range_lock_shared_wait(struct io_file *file, uint64_t start, uint64_t length);
int io_range_lock_exclusive_wait(struct io_file *file, uint64_t start, uint64_t length);
int io_range_unlock(struct io_file *file, uint64_t start, uint64_t length);
int io_range_test(struct io_file *file, uint64_t start, uint64_t length, uint64_t *found_start,
		  uint64_t *found_length);
/*
 * Wake-up words (io_wake.c; docs/FORMAT.md §18): a page of a local file mapped
 * shared, whose 32-bit words processes of one host increment when they change
 * a state others wait for (the store lock released, a root made durable), so
 * that waiters sleep until then instead of polling. The words only shorten
 * waits: a waiter re-checks the real state after every sleep.
 *
 * io_wake_page_map: extends file to one page if shorter and maps it; 0,
 * -EOPNOTSUPP (an object store's file), -errno (page->words stays NULL: every
 * wait below is then a plain sleep). A waiter: seen = io_wake_read;
 * io_wake_waiting(true); check the state; io_wake_sleep(seen, pause) unless it
 * allows going on; io_wake_waiting(false). A waker: change the state, then
 * io_wake_all.
 */
enum io_wake_word {
	IO_WAKE_STORE_LOCK = 0,   /* the store lock was released */
	IO_WAKE_DURABLE = 1,      /* a meta slot was written: a root became durable */
};
struct io_wake_page {
	uint32_t *words;          /* NULL: not mapped */
};
int io_wake_page_map(struct io_file *file, struct io_wake_page *page);
void io_wake_page_unmap(struct io_wake_page *page);
uint32_t io_wake_read(const struct io_wake_page *page, enum io_wake_word word);
void io_wake_waiting(const struct io_wake_page *page, enum io_wake_word word, bool waiting);
/* Sleeps until the word differs from seen, a wake, or pause_us passed. */
void io_wake_sleep(const struct io_wake_page *page, enum io_wake_word word, uint32_t seen, uint64_t pause_us);
/* Increments the word; wakes its waiters, if any are counted. */
void io_wake_all(const struct io_wake_page *page, enum io_wake_word word);
/*
 * A small record in the same page (up to 3 KiB), written by one writer at a time
 * (the caller serializes them) and read by anyone: io_wake_record_read copies it
 * whole, or returns false (never written, no page, or a write under way).
 */
void io_wake_record_write(const struct io_wake_page *page, const void *bytes, size_t size);
bool io_wake_record_read(const struct io_wake_page *page, void *bytes, size_t size);
/* Returns the bytes of [start, end) to the file system (fallocate PUNCH_HOLE,
 * KEEP_SIZE): they read back as zeros. 0, -EOPNOTSUPP (the file system cannot), -errno. */
int io_punch_hole(struct io_file *file, uint64_t start, uint64_t end);
/* Bytes of the file that hold data (not holes) in [start, end), by SEEK_DATA/SEEK_HOLE. 0 or -errno. */
int io_data_bytes(struct io_file *file, uint64_t start, uint64_t end, uint64_t *bytes_out);
/* The space the file occupies on disk (st_blocks × 512). 0 or -errno. An fstat(2):
 * like any stat it marks the file's times as seen, so the next write stamps a new
 * time and the fdatasync after it writes the inode too — keep it off per-commit paths
 * (io_size says more). */
int io_allocated_bytes(struct io_file *file, uint64_t *bytes_out);
/* Calls visit(name, context) for every entry of directory/subdirectory except . and ..;
 * stops and returns the first non-zero value visit returns. */
int io_directory_list(int directory, const char *subdirectory,
		      int (*visit)(const char *name, void *context), void *context);

#endif
