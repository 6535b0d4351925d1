/*
 * codec — checksummed, optionally compressed blocks (layer: codec).
 *
 * Every byte the store keeps on disk (except the 4 KiB file header and the
 * two meta slots, which have their own fixed layouts) is a block:
 *
 *   OFFSET SIZE DESCRIPTION
 *   0      4    magic "GFSB"
 *   4      1    block type (enum block_type)
 *   5      1    codec (enum codec_kind) of the payload
 *   6      2    reserved, zero
 *   8      4    stored payload size in bytes (as on disk)
 *   12     4    raw payload size in bytes (after decompression)
 *   16     8    xxHash3-64 of bytes 0..15 followed by the stored payload
 *   24     ...  stored payload
 *
 * Decoding verifies magic, type, sizes and checksum before decompressing, so
 * a flipped byte anywhere in a block is -EIO, never wrong data (invariant 5).
 * docs/FORMAT.md is normative for the layout.
 */
#ifndef GRAPHFS_CODEC_H
#define GRAPHFS_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "ulid.h"

#define BLOCK_MAGIC 0x42534647u /* "GFSB" read as little-endian u32 */
#define BLOCK_HEADER_SIZE 24
#define BLOCK_MAX_RAW_SIZE (64u << 20) /* decoders refuse larger claims */

enum block_type {
	BLOCK_ROOT = 1,       /* manifest root record (one per publish) */
	BLOCK_NODE = 2,       /* copy-on-write B+tree node */
	BLOCK_COMMIT = 3,     /* journal: one commit record */
	BLOCK_TABLE = 4,      /* table version record */
	BLOCK_SCHEMA = 5,     /* canonical schema JSON */
	BLOCK_FRAGMENT = 6,   /* rows of a table, canonical JSON lines */
	BLOCK_BITMAP = 7,     /* deletion bitmap of one fragment (CRoaring portable format) */
	BLOCK_SIDECAR = 8,    /* recovery sidecar body */
	BLOCK_SEGMENT = 9,    /* first block of a segment file (identifies it) */
	BLOCK_INDEX = 10,     /* manifest version index node (fixed depth, FORMAT.md §16.1) */
	BLOCK_PACK_FRAME = 11, /* a pack's frame: runs of manifest bytes (FORMAT.md §22) */
	BLOCK_PACK_INDEX = 12, /* a pack's frame index (FORMAT.md §22) */
	BLOCK_TYPE_MAX = 12
};

enum codec_kind {
	CODEC_NONE = 0,
	CODEC_ZSTD = 1,
	CODEC_LZ4 = 2,
};

/* Where a block lives: segment 0 is the manifest file, any other value names
 * segments/<segment as 16 lower-case hex digits>. Offset 0 means "no block"
 * (offset 0 of every file is its header, never a block). */
struct block_address {
	uint64_t segment;
	uint64_t offset;
};

#define BLOCK_ADDRESS_SIZE 16 /* encoded: segment u64, offset u64 */

static inline int block_address_is_null(struct block_address address)
{
	return address.offset == 0;
}

static inline int block_address_equal(struct block_address a, struct block_address b)
{
	return a.segment == b.segment && a.offset == b.offset;
}

struct block_header {
	enum block_type type;
	enum codec_kind codec;
	uint32_t stored_size;
	uint32_t raw_size;
	uint64_t checksum;
};

/* xxHash3-64 of bytes (seed 0). */
uint64_t codec_hash(const void *bytes, size_t size);

/*
 * Appends one encoded block (header + payload) to out. The payload is
 * compressed with codec unless compression does not make it smaller, in
 * which case it is stored with CODEC_NONE. Returns 0, -ENOMEM, -E2BIG (raw
 * size over BLOCK_MAX_RAW_SIZE) or -EIO (compressor failure); on error out
 * is unchanged.
 */
int codec_encode(enum block_type type, enum codec_kind codec, const void *raw, size_t raw_size,
		 struct buf *out);
/* The same with a zstd compression level (0: the default, 3); other codecs ignore it. */
int codec_encode_level(enum block_type type, enum codec_kind codec, int level, const void *raw, size_t raw_size,
		       struct buf *out);

/*
 * Parses and sanity-checks the 24-byte header (magic, type in range, codec
 * known, sizes within limits). Does not verify the checksum. Returns 0 or
 * -EIO.
 */
int codec_decode_header(const void *bytes, struct block_header *out);

/*
 * Verifies and decodes one whole block (header + stored payload, exactly
 * BLOCK_HEADER_SIZE + stored_size bytes). If expected_type is non-zero the
 * block must be of that type. Appends the raw payload to raw_out. Returns 0,
 * -EIO on any mismatch (checksum, type, size, decompression), -ENOMEM; on
 * error raw_out is unchanged.
 */
int codec_decode(const void *block, size_t block_size, enum block_type expected_type,
		 struct buf *raw_out);

/* Encodes / decodes a block address as 16 bytes. */
int codec_put_address(struct buf *out, struct block_address address);
struct block_address codec_get_address(struct buf_reader *reader);

/* ---- file headers (docs/FORMAT.md §2) ------------------------------------ */

#define FILE_HEADER_SIZE 4096
#define FILE_FORMAT_VERSION 8          /* the store format this binary creates */
#define FILE_FORMAT_OLDEST 6           /* the oldest it reads and writes (in that format's layout) */
#define MANIFEST_FIRST_BLOCK 12288     /* after the file header and the two meta slots */

enum file_kind {
	FILE_KIND_MANIFEST = 1,
	FILE_KIND_SEGMENT = 2,
	FILE_KIND_PACK = 3,      /* packs/<N>: segment_id holds N (docs/FORMAT.md §22) */
};

struct file_header {
	uint32_t format_version;
	enum file_kind kind;
	struct ulid store_id;
	uint64_t segment_id;      /* 0 in the manifest */
	uint64_t created_us;      /* µs since the epoch */
};

/* Encodes header into out (FILE_HEADER_SIZE bytes, checksummed, zero padded). */
void codec_file_header_encode(const struct file_header *header, uint8_t *out);

/*
 * Decodes FILE_HEADER_SIZE bytes. Checks the magic first (-EIO if it is not
 * a graphfs file), then the format version: if it is not between
 * FILE_FORMAT_OLDEST and FILE_FORMAT_VERSION it returns -EPROTO with only out->format_version filled (a different
 * format may lay out or checksum the rest differently). Then verifies the
 * checksum and the kind (-EIO). Returns 0, -EIO or -EPROTO.
 */
int codec_file_header_decode(const uint8_t *bytes, struct file_header *out);

#endif
