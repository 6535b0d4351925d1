/*
 * pack — gc's compressed copy of the manifest's retained blocks (layer:
 * codec). Layout: docs/FORMAT.md §22.
 *
 * A pack file packs/<N as 16 hex digits> holds, for every block below
 * manifest offset N that a retained state reached when the gc that wrote it
 * ran, the block's exact bytes at its manifest offset, compressed together
 * in frames of about PACK_FRAME_RAW bytes. Blocks keep their addresses: a
 * reader asks a pack for "the block at manifest offset X" and nothing that
 * points at a block changes. Once a pack is durable gc returns every page of
 * the manifest below N to the file system; the newest pack (largest N) is the
 * one readers use, and older ones are removed by the gc that wrote it.
 *
 * A pack is written once (struct pack_writer: packs/<N>.tmp, fsync, rename,
 * directory fsync) and never changes. A struct pack (the read side) is
 * thread-safe: it keeps a few decompressed frames, shared by its readers.
 */
#ifndef GRAPHFS_PACK_H
#define GRAPHFS_PACK_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "codec.h"
#include "io.h"
#include "ulid.h"

#define PACK_FRAME_RAW (64u << 10)   /* raw bytes after which a frame is cut */

struct pack;

/*
 * The largest N of a complete pack file packs/<N> (names ending in .tmp are
 * not packs). Returns 0, -ENOENT when there is none (or no packs/ directory),
 * or -errno.
 */
int pack_newest(int store_directory, uint64_t *covered_below_out);

/*
 * Opens packs/<covered_below> and reads its header (kind pack, the store ULID
 * store_id, covered_below in the segment id field), trailer and frame index.
 * Returns 0, -ENOENT (no such file), -EIO (damaged; one log line), -EPROTO
 * (another format), -ENOMEM. On error *out is untouched.
 */
int pack_open(int store_directory, const struct ulid *store_id, uint64_t covered_below, struct pack **out);
void pack_free(struct pack *pack);
/* N: the pack holds blocks of manifest offsets below it, only. */
uint64_t pack_covered_below(const struct pack *pack);
/* The pack file's size in bytes. */
uint64_t pack_file_size(const struct pack *pack);

/*
 * Appends size bytes of the manifest starting at offset to out, from the
 * pack: they must lie inside bytes the pack holds (one run of a frame).
 * Returns 0, -ENOENT (the pack does not hold them: not retained when it was
 * written), -EIO (a frame is damaged; logged), -ENOMEM. On error out is
 * unchanged. Counts nothing (the pager counts what it returns).
 */
int pack_read(struct pack *pack, uint64_t offset, size_t size, struct buf *out);
/*
 * The whole block at manifest offset (header + stored payload) appended to
 * out, its header checked but not its checksum (codec_decode does that).
 * Returns as pack_read.
 */
int pack_read_block(struct pack *pack, uint64_t offset, struct buf *out);

/*
 * Reads and checks every frame (checksum, run table, runs inside the frame's
 * range). Calls report(offset, message, context) for each problem. Returns
 * the number of problems found, or -ENOMEM.
 */
int pack_verify(struct pack *pack, void (*report)(uint64_t offset, const char *message, void *context),
		void *context);

/* ---- writing (gc) ---------------------------------------------------------------- */

struct pack_writer;

/*
 * Creates packs/<covered_below>.tmp (replacing any left by a crash; packs/ is
 * created if missing) and writes its file header (the store's format_version). Returns 0 or -errno.
 */
int pack_writer_begin(int store_directory, const struct ulid *store_id, uint32_t format_version,
		      uint64_t covered_below, struct pack_writer **out);
/*
 * Adds size bytes that live at manifest offset (whole blocks). Offsets must
 * increase, not overlap what was added before, and stay below covered_below
 * (-EINVAL). Buffered; a full frame is compressed and written. 0 or -errno.
 */
int pack_writer_add(struct pack_writer *writer, uint64_t offset, const void *bytes, size_t size);
/*
 * Writes the last frame, the index and the trailer, fsyncs the file, renames
 * it to packs/<covered_below> and fsyncs packs/ (and the store directory when
 * packs/ was just made): the pack is durable. Returns 0 or -errno (the
 * temporary file is left for pack_writer_free to remove).
 */
int pack_writer_finish(struct pack_writer *writer);
/* Bytes written to the file so far (its size once finished). */
uint64_t pack_writer_size(const struct pack_writer *writer);
/* Frees; removes the temporary file unless pack_writer_finish succeeded. */
void pack_writer_free(struct pack_writer *writer);

/*
 * Removes every entry of packs/ but packs/<keep> (older packs, temporary
 * files of crashed gcs) and fsyncs packs/. Returns 0, or the first error.
 * *removed_bytes_out (may be NULL) gets the bytes the removed files held.
 */
int pack_remove_others(int store_directory, uint64_t keep, uint64_t *removed_bytes_out);

#endif
