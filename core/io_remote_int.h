/*
 * io_remote_int.h — what io_remote.c (directories, WHOLE files, the entry
 * points) and io_pieced.c (the manifest's pieces) share: the remote file and
 * the pieced file's functions. Both are layer io; nothing else includes this.
 * The object layout is docs/FORMAT.md §23.
 */
#ifndef GRAPHFS_IO_REMOTE_INT_H
#define GRAPHFS_IO_REMOTE_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "error_info.h"
#include "io.h"
#include "s3.h"

#define IO_REMOTE_RANGES 64            /* cached ranges of pieces (io_pieced.c invariant 1) */
#define IO_REMOTE_CHUNKS 4             /* cached 1 MiB chunks of a WHOLE file being read */
#define IO_PREFETCH_WIDTH 16           /* GETs a prefetch has in flight at once (io_pieced.c invariant 6) */
#define IO_PREFETCH_GETS 32            /* GETs one prefetch makes at most (half the cached ranges) */

struct remote_directory {
	char key[S3_KEY_MAX];          /* "" (the store's root) or "name/" */
	char location[S3_KEY_MAX];     /* the s3:// text it was opened with */
	struct s3_client *client;      /* shared with the directories under the same root */
	bool owns_client;
	struct remote_directory *root; /* the store's root directory (itself for the root) */
	uint8_t store_id[16];          /* root only: the store's id, once its manifest header was read */
	bool store_id_known;           /* (both under io_remote.c's table lock) */
};

enum remote_kind { REMOTE_WHOLE, REMOTE_PIECED };

struct piece {
	uint64_t start, size;
};

struct range {
	uint64_t start;                /* UINT64_MAX: empty */
	uint64_t used;                 /* the tick of its last use */
	struct buf bytes;              /* [start, start + size) of one piece */
};

/* A cached chunk of a WHOLE file: EMPTY -> FETCHING (a readahead GET is filling it,
 * io_remote.c invariant 5) -> READY, or EMPTY -> READY (a reader's own GET). */
enum chunk_state { CHUNK_EMPTY, CHUNK_FETCHING, CHUNK_READY };

struct chunk {
	enum chunk_state state;
	uint64_t start, length;        /* the bytes it holds or is being filled with */
	uint64_t used;                 /* the tick of its last use */
	struct buf bytes;
};

/* One open remote file; lock serializes every call on it (the callers of the io_pieced_
 * functions hold it). */
struct io_remote_file {
	struct remote_directory *directory;
	char key[S3_KEY_MAX];
	enum remote_kind kind;
	pthread_mutex_t lock;
	/* WHOLE (io_remote.c invariant 3) */
	bool exists;                   /* stored in the object store */
	uint64_t size;
	bool writable, exclusive, dirty, loaded;
	struct buf content;            /* while writable: the whole object (up to SPILL_BYTES) */
	int spill;                     /* beyond that: an unnamed local file holding it, or -1 */
	uint64_t spill_size;
	struct chunk chunks[IO_REMOTE_CHUNKS];
	uint64_t chunk_tick;
	uint64_t next_sequential;      /* where the next chunk of a sequential reader starts (UINT64_MAX: none) */
	struct s3_client *readahead_client;   /* its own connection, opened by the first readahead */
	struct s3_client *prefetch_clients[IO_PREFETCH_WIDTH];   /* a prefetch's connections (opened as needed) */
	bool prefetching;              /* a prefetch is running on them (another one does nothing) */
	pthread_t readahead;
	bool readahead_started;        /* a readahead thread exists (to be joined) */
	pid_t readahead_pid;           /* the process that started it (a forked child has no threads) */
	pthread_cond_t readahead_done;
	/* PIECED (io_pieced.c invariant 1) */
	struct piece *pieces;          /* known pieces, by start */
	size_t piece_count, piece_capacity;
	uint64_t listed_from;          /* every piece from here on is in pieces */
	struct range ranges[IO_REMOTE_RANGES];
	uint64_t range_bytes, tick;
	struct io_cache *cache;        /* this host's cache of the store's pieces (NULL: none yet, or off) */
	int host_lock;                 /* the store's lock: the host's lock file standing for it (io_remote.c
					  invariant 4); -1: not opened yet; -2: none (another file, or no cache root) */
	uint64_t state_start_noted;    /* io_note_state_start for the next piece this process creates */
	uint64_t own_piece, own_state_start;   /* the last piece this process created and where its state
					  part begins (0: not known): the hint its meta slot writes carry */
	uint64_t hinted_piece, hinted_state_start;   /* the same as read from the meta slots at open */
	/* called once the manifest header names the store, so that its directory's segment and
	 * pack chunks can be cached by store (set by io_remote.c before io_pieced_open) */
	void (*store_id_note)(struct remote_directory *directory, const uint8_t store_id[16]);
};


/* Opens the pieced manifest (flags as open(2): O_CREAT, O_EXCL). 0, -ENOENT, -EEXIST or
 * a request's -errno; on error the caller frees what io_pieced_free frees. */
int io_pieced_open(struct io_remote_file *file, int flags);
/* Frees the table of pieces and the cached ranges (the file itself is the caller's). */
void io_pieced_free(struct io_remote_file *file);
/* As pread(2): bytes read (short only at the end known) or -errno. */
ssize_t io_pieced_pread(struct io_remote_file *file, uint8_t *out, size_t size, uint64_t offset);
/* Writes the header, a meta slot or a new piece at the end. 0, -ESTALE (another writer
 * appended at offset first: nothing written) or -errno. */
int io_pieced_pwrite(struct io_remote_file *file, const uint8_t *bytes, size_t size, uint64_t offset);
/* One GET a prefetch makes (io_pieced.c invariant 6): planned under the lock, run without it. */
struct io_prefetch_get {
	uint64_t start;                /* the piece's start (the granule's, when discovering it) */
	uint64_t from, length;         /* what to GET: [from, from + length) of the store's bytes */
	bool discover;                 /* the piece is not known yet: its size comes with the answer */
	char key[S3_KEY_MAX + 20];     /* the piece's object */
	struct buf bytes;              /* the answer */
	uint64_t whole_size;           /* the object's size, from the answer */
	int rc;
};
/* Plans up to capacity GETs for the blocks at offsets: none for what is cached (in memory or
 * in the host cache, which it takes in now) or not known to be a piece. Returns the count. */
size_t io_pieced_prefetch_plan(struct io_remote_file *file, const uint64_t *offsets, size_t count,
			       struct io_prefetch_get *gets, size_t capacity);
/* Keeps what the planned GETs answered (as a read keeps it) and frees their buffers. */
void io_pieced_prefetch_keep(struct io_remote_file *file, struct io_prefetch_get *gets, size_t count);
/* Removes the pieces beyond size; -EINVAL if one straddles it. 0 or -errno. */
int io_pieced_truncate(struct io_remote_file *file, uint64_t size);
/* The end after a LIST of what other writers appended. 0 or -errno. */
int io_pieced_size(struct io_remote_file *file, uint64_t *size_out);
/* Takes in the pieces after the last one known that this host's other processes created
 * (io_pieced.c invariant 8): the host cache holds them whole. No request. */
void io_pieced_catch_up(struct io_remote_file *file);
/* The end as last known (no request). */
uint64_t io_pieced_end(const struct io_remote_file *file);
/* The start of the last piece known, 0 if none. */
uint64_t io_pieced_last_start(const struct io_remote_file *file);
/* Where the next tail goes after blocks ending at end (io_append_offset). */
uint64_t io_pieced_append_offset(uint64_t end);
/* Deletes the pieces wholly inside [start, end). 0 or -errno. */
int io_pieced_punch(struct io_remote_file *file, uint64_t start, uint64_t end);
/* The bytes stored in [start, end) (pieces and meta slots). 0 or -errno. */
int io_pieced_data_bytes(struct io_remote_file *file, uint64_t start, uint64_t end, uint64_t *bytes_out);

/* ---- the local cache of pieces and chunks (io_cache.c) ---- */

struct io_cache;
/* The cache of the store with this id (its manifest header's bytes 16..31) at this location
 * (the s3:// text it was opened with), made if missing; NULL when turned off
 * (GRAPHFS_CACHE_BYTES=0) or unusable: every read a miss. */
struct io_cache *io_cache_open(const uint8_t store_id[16], const char *location);
void io_cache_free(struct io_cache *cache);
/* What is cached at start of the object named (NULL: the manifest's piece at start) into
 * bytes: 0, or -ENOENT (a miss: also for a NULL cache or a damaged entry). */
int io_cache_get(struct io_cache *cache, const char *name, uint64_t start, struct buf *bytes);
/* Whether an object of size bytes is small enough to keep chunks of: at most an eighth of
 * the bound, so that one scan of a big object does not push out everything else. */
bool io_cache_admits(const struct io_cache *cache, uint64_t size);
/* Whether an entry is there (no read, no counting). */
bool io_cache_has(struct io_cache *cache, const char *name, uint64_t start);
/* Removes what is cached of the manifest's piece at start, whole or in parts: a truncation
 * deleted it, and a later piece may start there (io_pieced.c invariant 4). */
void io_cache_forget_piece(struct io_cache *cache, uint64_t start);
/* Keeps bytes as what lies at start of the object named (NULL: a whole piece at start);
 * best effort: nothing is reported. */
void io_cache_put(struct io_cache *cache, const char *name, uint64_t start, const uint8_t *bytes, size_t size);

/* A file of the cache's root (`locks/<xxHash3-64 of identity>`) whose flock stands for the
 * remote object named by identity among this host's processes (io_remote.c invariant 4):
 * a descriptor, or -errno (then there is no host lock). */
int io_cache_lock_open(const char *identity);

/* The descriptor of the host's lock file standing for a remote file (io_remote.c invariant
 * 4): the page the host's waiters for its lock share (io_wake.c). -EOPNOTSUPP: none. */
int io_remote_lock_descriptor(struct io_file *file);

/* ---- which store a remote directory belongs to (io_remote.c) ---- */


#endif
