/*
 * pager — reads verified blocks from the manifest and segment files, and
 * appends new blocks (layer: codec).
 *
 * A pager belongs to one open store. It owns the manifest file descriptor
 * and opens segment files lazily (keeping at most a small, bounded number of
 * descriptors open). Reads are thread-safe and lock-free with respect to
 * appends: the files are append-only, and a published block never changes.
 *
 * Writes go through two objects:
 *   - struct pager_append: the manifest tail of one publish. Created while
 *     the caller holds the store lock, with base = where the manifest's
 *     blocks end (its size, unless zero bytes are preallocated after the
 *     blocks: pager_append_preallocate). Blocks are assigned addresses sequentially (base, base + size of
 *     the first block, ...) and kept in memory; pager_append_write() writes
 *     them all with one pwrite and fsyncs once. Reading an address that is
 *     still only in the append buffer is served from memory.
 *   - struct pager_segment: a new segment file written outside the store lock
 *     by one writer (large table writes); fsynced by pager_segment_finish().
 *
 * Counting: every verified block read from disk counts one page and its
 * bytes in the class of its file (manifest or data) — exactly header +
 * stored size, so counts never depend on read-ahead or on what follows the
 * block. The counters mean physical reads: a block served from the block
 * cache counts nothing (no read, no page, no bytes).
 *
 * Block cache: a bounded LRU of verified payloads of manifest blocks (tree
 * and index nodes, commit, table-version and schema records; never root
 * records, fragments, bitmaps or anything in a segment file), keyed by
 * offset, shared by the pager's threads. Blocks are immutable once
 * published; an append's own blocks are served from its buffer until it is
 * written, then enter the cache (up to 1 MiB of them per append: the next
 * publish reads what this one wrote from memory), and pager_append_begin /
 * pager_append_abandon / a failed pager_append_write drop any entry at or
 * beyond the append's base (bytes since cut). It is disabled until
 * pager_cache_limit sets a budget (payloads + entry headers), so the engine
 * alone keeps counting every read; the mount daemon enables it (store_options
 * .block_cache). A new pager starts empty, so a fresh process's counters for
 * a given sequence of reads are deterministic: each distinct block counts
 * once while it stays cached.
 */
#ifndef GRAPHFS_PAGER_H
#define GRAPHFS_PAGER_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "codec.h"
#include "io.h"
#include "ulid.h"

struct pager;

/*
 * Creates a pager over an already opened store directory and manifest file
 * (the pager does not take ownership of either). Reads and checks the
 * manifest's file header to learn the store ULID (written into segment
 * headers). Returns 0, -ENOMEM, -EIO (short, not a manifest, checksum) or
 * -EPROTO (another format version; the manifest module checks the version
 * first and explains). On error *out is untouched.
 */
int pager_init(int store_directory, struct io_file *manifest, struct pager **out);
void pager_free(struct pager *pager);
/* The store ULID from the manifest header. */
const struct ulid *pager_store_id(const struct pager *pager);
/* The store's format (its manifest header's, docs/FORMAT.md §2): records and file headers are
 * written in that format's layout. */
uint32_t pager_format_version(const struct pager *pager);

/*
 * A hint that the blocks at addresses (count of them, in reading order) are read soon:
 * those in the manifest above the pack in use are asked of the io layer at once
 * (io_prefetch: in an object store, fetched in parallel). Nothing is verified or reported
 * here; each pager_read still reads and checks its block.
 */
void pager_prefetch(struct pager *pager, const struct block_address *addresses, size_t count);
/* Whether pager_prefetch does anything here (the manifest is in an object store): callers skip
 * working out what to ask for when it does not. */
bool pager_prefetches(const struct pager *pager);

/*
 * Reads the block at address, verifies it and appends its raw payload to
 * raw_out (from the block cache when it holds it: no I/O, nothing counted).
 * expected_type 0 accepts any type. Returns 0, -EIO (checksum,
 * type or size mismatch, or address beyond the end of its file), -ENOENT
 * (segment file missing), -ENOMEM. On -EIO it logs one line to stderr
 * naming the file and offset. On error raw_out is unchanged.
 */
int pager_read(struct pager *pager, struct block_address address, enum block_type expected_type,
	       struct buf *raw_out);

/*
 * The window: recent manifest bytes read at once. pager_window_begin reads
 * the manifest's bytes [offset, offset + size) with one pread; until
 * pager_window_end, the calling thread's reads of manifest blocks lying
 * wholly inside them are served from that copy (verified, and counted as
 * pages and bytes, as a read from the file is; other threads never use it).
 * A publish opens one over the tails other writers appended since this
 * process last looked: they hold the nodes it rewrites. The caller keeps the
 * bytes from changing while the window is open (they are below a written
 * root's end and the store lock is held). Never on an object store, whose
 * reads are requests counted by the test suites. Returns 0, or -errno with
 * no window open (reads go to the file as before).
 */
int pager_window_begin(struct pager *pager, uint64_t offset, size_t size);
void pager_window_end(struct pager *pager);

/* Sets the block cache budget in bytes (0 disables it) and empties the cache.
 * Returns 0 or -ENOMEM (the cache is then disabled). */
int pager_cache_limit(struct pager *pager, size_t budget);
/* Bytes the cache holds now and its budget (either pointer may be NULL). */
void pager_cache_usage(struct pager *pager, size_t *used_out, size_t *budget_out);

/* Size in bytes of the whole block at address (header + stored payload), for walks. */
int pager_block_size(struct pager *pager, struct block_address address, uint64_t *size_out);

/* ---- packs (docs/FORMAT.md §22) ----------------------------------------------
 *
 * Manifest blocks below the newest pack's N are read from that pack (same
 * addresses, same counting as a read from the manifest: one page and the
 * block's bytes). The pager opens the newest pack when it is created, and
 * looks again whenever a manifest read below the latest swept-below offset
 * fails (gc may have packed and punched those pages since): a reader that
 * held an older pack, or none, moves to the newest one and retries once. A
 * pack in use stays open until its last reader is done, also after gc
 * removed its file.
 */

/*
 * Switches to the newest pack if it is newer than the one in use (or there
 * was none). Returns 1 when it switched, 0 when nothing changed, -EIO /
 * -EPROTO if the newest pack cannot be opened (logged), -errno.
 */
int pager_pack_refresh(struct pager *pager);
/* N of the pack in use (0: none), and its file size (may be NULL). */
uint64_t pager_pack_covered_below(struct pager *pager, uint64_t *file_size_out);
/*
 * Appends size raw bytes of the manifest starting at offset to out: from the
 * pack in use when offset is below its N (they must lie inside one of its
 * runs), else from the manifest file. For gc copying whole blocks into a new
 * pack. Counts one read, no page. Returns 0, -EIO, -ENOENT (not in the
 * pack), -ENOMEM; out unchanged on error.
 */
int pager_copy_bytes(struct pager *pager, uint64_t offset, size_t size, struct buf *out);
/* pack_verify of the pack in use (0 problems when there is none). */
int pager_pack_verify(struct pager *pager, void (*report)(uint64_t offset, const char *message, void *context),
		      void *context);

/* ---- manifest appends (caller holds the store lock) -------------------- */

struct pager_append;

/* Starts an append at base (the manifest size the caller observed under the lock;
 * at least MANIFEST_FIRST_BLOCK, else -EINVAL). Returns 0, -EINVAL or -ENOMEM. */
int pager_append_begin(struct pager *pager, uint64_t base, struct pager_append **out);
/* Encodes one block into the buffer; *address_out is where it will live. Returns 0 or -errno. */
int pager_append_block(struct pager_append *append, enum block_type type, enum codec_kind codec,
		       const void *raw, size_t raw_size, struct block_address *address_out);
/* Appends one block encoded before (codec_encode: a block does not depend on where it
 * lives), so that the work of compressing it is done outside the store lock. The block
 * is not kept in the cache. Returns 0, -EINVAL (not one whole block, or written) or -errno. */
int pager_append_encoded(struct pager_append *append, const void *encoded, size_t encoded_size,
			 struct block_address *address_out);
/* Bytes of blocks buffered so far; base + this is where the blocks end. */
uint64_t pager_append_size(const struct pager_append *append);
/*
 * Lets the blocks land in space preallocated with zero bytes (docs/FORMAT.md
 * §4): file_size is the manifest size the caller observed under the store
 * lock (at least base; the bytes from base on are zeros). The write then
 * expects that size instead of base, and when the blocks reach past it, the
 * same pwrite pads them with zero bytes up to the next multiple of chunk (a
 * power of two): the file grows a chunk at a time, and most appends
 * overwrite zeros inside the file (no block allocation, no size change).
 * Returns 0 or -EINVAL (file_size below base, chunk not a power of two, or
 * already written).
 */
int pager_append_preallocate(struct pager_append *append, uint64_t file_size, uint64_t chunk);
/* The manifest size after a successful write: the expected size, or the padded end. */
uint64_t pager_append_file_size(const struct pager_append *append);
/*
 * Reads a block like pager_read, but a manifest address inside this append
 * (base <= offset < base + size) is served from the buffer (verified, not
 * counted: no I/O); any other address is read from disk by pager_read. For
 * the tree flush and table apply re-reading what they appended in the same
 * publish. Returns as pager_read.
 */
int pager_append_read(struct pager_append *append, struct block_address address,
		      enum block_type expected_type, struct buf *raw_out);
/*
 * Writes the buffer (and any preallocation padding) at base with one pwrite;
 * not durable until pager_append_sync. Returns 0, -ESTALE if the manifest size
 * is no longer base (or the size given to pager_append_preallocate; nothing
 * written), -EINVAL if already written, or -errno; on error the manifest may
 * hold a torn tail, which the next recovery truncates (it is beyond the last
 * valid root record), and the append's blocks are forgotten by the cache.
 */
int pager_append_write(struct pager_append *append);
/* Writes only the first size bytes of what pager_append_write would (a torn
 * write, for the "publish.torn_write" failpoint). 0 or -errno as above. */
int pager_append_write_part(struct pager_append *append, size_t size);
/* fsyncs the manifest after pager_append_write: the blocks are durable. 0,
 * -EINVAL (not written), -errno (then the blocks are forgotten by the cache). */
int pager_append_sync(struct pager_append *append);
/* Forgets cached blocks of the append's range (it will not be published). */
void pager_append_abandon(struct pager_append *append);
void pager_append_free(struct pager_append *append);

/* ---- segment files (no lock needed) ------------------------------------ */

struct pager_segment;

/*
 * Creates segments/<segment_id as 16 hex digits> (O_EXCL, 0600; the segments/
 * directory is created 0700 if missing) and writes its file header
 * (docs/FORMAT.md §2, kind 2). The id comes from the recovery sidecar that
 * announced the segment before it existed (manifest_intent_new_segment).
 * Returns 0 or -errno (-EEXIST if the file exists).
 */
int pager_segment_create(struct pager *pager, uint64_t segment_id, struct pager_segment **out);
uint64_t pager_segment_id(const struct pager_segment *segment);
/* Appends one block; returns its address. Buffered; written in chunks of about 1 MiB.
 * Returns 0 or -errno (a failed chunk write leaves the segment unusable: free and remove it). */
int pager_segment_block(struct pager_segment *segment, enum block_type type, enum codec_kind codec,
			const void *raw, size_t raw_size, struct block_address *address_out);
/* Flushes, fsyncs the file and the segments/ directory. Failpoints "segment.before_fsync"
 * (data written, not durable) and "segment.after_fsync". Returns 0 or -errno. */
int pager_segment_finish(struct pager_segment *segment);
/* Closes; if the segment was never published the caller unlinks it with pager_segment_remove. */
void pager_segment_free(struct pager_segment *segment);
/* Unlinks segments/<id> (closing any cached descriptor). Returns 0 or -errno (-ENOENT if
 * missing). Does not sync the directory. */
int pager_segment_remove(struct pager *pager, uint64_t segment_id);
/*
 * Opens an unnamed scratch file beside the segments (io_scratch_open in
 * segments/, created if missing): a large stage's sorted id runs. Nothing of
 * it survives a close or a crash. Returns 0 or -errno.
 */
int pager_scratch_open(struct pager *pager, struct io_file *out);

#endif
