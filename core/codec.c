/*
 * codec — checksummed, optionally compressed blocks. See codec.h and
 * docs/FORMAT.md §4 (normative).
 *
 * Invariants:
 *   1. An encoded block is exactly BLOCK_HEADER_SIZE + stored_size bytes and
 *      its checksum covers header bytes 0..15 then the stored payload.
 *   2. A compressed payload is strictly smaller than its raw payload; when
 *      compression does not shrink it, it is stored with CODEC_NONE
 *      (stored_size == raw_size). Decoding enforces both rules.
 *   3. Decoding checks every size against BLOCK_MAX_RAW_SIZE and against the
 *      bytes given before touching the payload, verifies the checksum before
 *      decompressing, and requires the decompressor to produce exactly
 *      raw_size bytes; any failure is -EIO and leaves the output unchanged.
 *
 * Compression and hashing contexts are created lazily, once per thread, and
 * freed when the thread exits.
 */
#include "codec.h"

#include <errno.h>
#include <lz4.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>

#define CODEC_ZSTD_LEVEL 3
#define CODEC_COMPRESS_MIN 64   /* payloads below this many bytes are stored as they are */
#define HASHED_HEADER_SIZE 16

/* ---- per-thread contexts ------------------------------------------------ */

struct codec_context {
	ZSTD_CCtx *compress;
	ZSTD_DCtx *decompress;
	XXH3_state_t *hash;
};

static pthread_key_t context_key;
static pthread_once_t context_key_once = PTHREAD_ONCE_INIT;
static int context_key_error;

static void context_free(void *pointer)
{
	struct codec_context *context = pointer;
	if (!context)
		return;
	ZSTD_freeCCtx(context->compress);
	ZSTD_freeDCtx(context->decompress);
	XXH3_freeState(context->hash);
	free(context);
}

static void context_key_create(void)
{
	context_key_error = pthread_key_create(&context_key, context_free);
}

/* Returns this thread's context (creating it), or NULL on allocation failure. */
static struct codec_context *context_get(void)
{
	pthread_once(&context_key_once, context_key_create);
	if (context_key_error)
		return NULL;
	struct codec_context *context = pthread_getspecific(context_key);
	if (context)
		return context;
	context = calloc(1, sizeof *context);
	if (!context)
		return NULL;
	if (pthread_setspecific(context_key, context) != 0) {
		free(context);
		return NULL;
	}
	return context;
}

static XXH3_state_t *hash_state(void)
{
	struct codec_context *context = context_get();
	if (!context)
		return NULL;
	if (!context->hash)
		context->hash = XXH3_createState();
	return context->hash;
}

/* ---- checksums ---------------------------------------------------------- */

uint64_t codec_hash(const void *bytes, size_t size)
{
	return XXH3_64bits(bytes, size);
}

/* Checksum of header bytes 0..15 followed by the payload; returns 0 or -ENOMEM. */
static int block_checksum(const uint8_t *header, const uint8_t *payload, size_t payload_size,
			  uint64_t *checksum_out)
{
	XXH3_state_t *state = hash_state();
	if (!state)
		return -ENOMEM;
	if (XXH3_64bits_reset(state) != XXH_OK ||
	    XXH3_64bits_update(state, header, HASHED_HEADER_SIZE) != XXH_OK ||
	    XXH3_64bits_update(state, payload_size ? payload : header, payload_size) != XXH_OK)
		return -ENOMEM;
	*checksum_out = XXH3_64bits_digest(state);
	return 0;
}

/* ---- encoding ----------------------------------------------------------- */

/* Compresses raw into destination (capacity bytes); returns the size, or 0 if it failed. */
static size_t compress_payload(enum codec_kind codec, int level, const void *raw, size_t raw_size,
			       uint8_t *destination, size_t capacity)
{
	if (codec == CODEC_ZSTD) {
		struct codec_context *context = context_get();
		if (!context)
			return 0;
		if (!context->compress)
			context->compress = ZSTD_createCCtx();
		if (!context->compress)
			return 0;
		size_t size = ZSTD_compressCCtx(context->compress, destination, capacity, raw, raw_size,
						level ? level : CODEC_ZSTD_LEVEL);
		return ZSTD_isError(size) ? 0 : size;
	}
	int size = LZ4_compress_default(raw, (char *)destination, (int)raw_size, (int)capacity);
	return size > 0 ? (size_t)size : 0;
}

static size_t compress_bound(enum codec_kind codec, size_t raw_size)
{
	if (codec == CODEC_ZSTD)
		return ZSTD_compressBound(raw_size);
	if (codec == CODEC_LZ4)
		return (size_t)LZ4_compressBound((int)raw_size);
	return raw_size;
}

int codec_encode(enum block_type type, enum codec_kind codec, const void *raw, size_t raw_size,
		 struct buf *out)
{
	return codec_encode_level(type, codec, 0, raw, raw_size, out);
}

int codec_encode_level(enum block_type type, enum codec_kind codec, int level, const void *raw, size_t raw_size,
		       struct buf *out)
{
	if (raw_size > BLOCK_MAX_RAW_SIZE)
		return -E2BIG;
	if (type < 1 || type > BLOCK_TYPE_MAX)
		return -EINVAL;
	if (codec != CODEC_NONE && codec != CODEC_ZSTD && codec != CODEC_LZ4)
		return -EINVAL;
	/* too small to shrink by much: spare the compressor (docs/FORMAT.md §4) */
	if (raw_size < CODEC_COMPRESS_MIN)
		codec = CODEC_NONE;

	size_t bound = compress_bound(codec, raw_size);
	if (bound < raw_size)
		bound = raw_size;
	int rc = buf_reserve(out, BLOCK_HEADER_SIZE + bound);
	if (rc < 0)
		return rc;
	uint8_t *header = out->data + out->size;
	uint8_t *payload = header + BLOCK_HEADER_SIZE;

	size_t stored_size = raw_size;
	if (codec != CODEC_NONE) {
		stored_size = compress_payload(codec, level, raw, raw_size, payload, bound);
		if (stored_size == 0)
			return -EIO;
		if (stored_size >= raw_size) {
			codec = CODEC_NONE;
			stored_size = raw_size;
		}
	}
	if (codec == CODEC_NONE && raw_size)
		memcpy(payload, raw, raw_size);

	buf_store_u32(header, BLOCK_MAGIC);
	header[4] = (uint8_t)type;
	header[5] = (uint8_t)codec;
	header[6] = 0;
	header[7] = 0;
	buf_store_u32(header + 8, (uint32_t)stored_size);
	buf_store_u32(header + 12, (uint32_t)raw_size);
	uint64_t checksum;
	rc = block_checksum(header, payload, stored_size, &checksum);
	if (rc < 0)
		return rc;
	buf_store_u64(header + 16, checksum);
	out->size += BLOCK_HEADER_SIZE + stored_size;
	return 0;
}

/* ---- decoding ----------------------------------------------------------- */

int codec_decode_header(const void *bytes, struct block_header *out)
{
	const uint8_t *header = bytes;
	uint32_t stored_size = buf_load_u32(header + 8);
	uint32_t raw_size = buf_load_u32(header + 12);
	unsigned type = header[4], codec = header[5];
	if (buf_load_u32(header) != BLOCK_MAGIC)
		return -EIO;
	if (type < 1 || type > BLOCK_TYPE_MAX)
		return -EIO;
	if (header[6] != 0 || header[7] != 0)
		return -EIO;
	if (raw_size > BLOCK_MAX_RAW_SIZE || stored_size > BLOCK_MAX_RAW_SIZE)
		return -EIO;
	if (codec == CODEC_NONE) {
		if (stored_size != raw_size)
			return -EIO;
	} else if (codec == CODEC_ZSTD || codec == CODEC_LZ4) {
		if (stored_size == 0 || stored_size >= raw_size)
			return -EIO;
	} else {
		return -EIO;
	}
	out->type = (enum block_type)type;
	out->codec = (enum codec_kind)codec;
	out->stored_size = stored_size;
	out->raw_size = raw_size;
	out->checksum = buf_load_u64(header + 16);
	return 0;
}

static int decompress_payload(const struct block_header *header, const uint8_t *stored,
			      uint8_t *destination)
{
	if (header->codec == CODEC_ZSTD) {
		struct codec_context *context = context_get();
		if (!context)
			return -ENOMEM;
		if (!context->decompress)
			context->decompress = ZSTD_createDCtx();
		if (!context->decompress)
			return -ENOMEM;
		size_t size = ZSTD_decompressDCtx(context->decompress, destination, header->raw_size, stored,
						  header->stored_size);
		return !ZSTD_isError(size) && size == header->raw_size ? 0 : -EIO;
	}
	int size = LZ4_decompress_safe((const char *)stored, (char *)destination, (int)header->stored_size,
				       (int)header->raw_size);
	return size >= 0 && (uint32_t)size == header->raw_size ? 0 : -EIO;
}

int codec_decode(const void *block, size_t block_size, enum block_type expected_type,
		 struct buf *raw_out)
{
	const uint8_t *bytes = block;
	struct block_header header;
	if (!block || block_size < BLOCK_HEADER_SIZE)
		return -EIO;
	int rc = codec_decode_header(bytes, &header);
	if (rc < 0)
		return rc;
	if (block_size != BLOCK_HEADER_SIZE + (size_t)header.stored_size)
		return -EIO;
	if (expected_type && header.type != expected_type)
		return -EIO;
	const uint8_t *stored = bytes + BLOCK_HEADER_SIZE;
	uint64_t checksum;
	rc = block_checksum(bytes, stored, header.stored_size, &checksum);
	if (rc < 0)
		return rc;
	if (checksum != header.checksum)
		return -EIO;

	if (header.raw_size == 0)
		return 0;
	rc = buf_reserve(raw_out, header.raw_size);
	if (rc < 0)
		return rc;
	uint8_t *destination = raw_out->data + raw_out->size;
	if (header.codec == CODEC_NONE)
		memcpy(destination, stored, header.raw_size);
	else if ((rc = decompress_payload(&header, stored, destination)) < 0)
		return rc;
	raw_out->size += header.raw_size;
	return 0;
}

/* ---- addresses ---------------------------------------------------------- */

int codec_put_address(struct buf *out, struct block_address address)
{
	int rc = buf_reserve(out, BLOCK_ADDRESS_SIZE);
	if (rc < 0)
		return rc;
	buf_put_u64(out, address.segment);
	buf_put_u64(out, address.offset);
	return 0;
}

struct block_address codec_get_address(struct buf_reader *reader)
{
	struct block_address address;
	address.segment = buf_get_u64(reader);
	address.offset = buf_get_u64(reader);
	return address;
}

static const uint8_t file_magic[8] = { 'G', 'R', 'A', 'P', 'H', 'F', 'S', 0 };

/* ---- file headers (docs/FORMAT.md §2) ------------------------------------------------------- */

void codec_file_header_encode(const struct file_header *header, uint8_t *out)
{
	memset(out, 0, FILE_HEADER_SIZE);
	memcpy(out, file_magic, sizeof file_magic);
	buf_store_u32(out + 8, header->format_version);
	buf_store_u32(out + 12, (uint32_t)header->kind);
	memcpy(out + 16, header->store_id.bytes, 16);
	buf_store_u64(out + 32, header->segment_id);
	buf_store_u64(out + 40, header->created_us);
	buf_store_u64(out + 48, codec_hash(out, 48));
}

int codec_file_header_decode(const uint8_t *bytes, struct file_header *out)
{
	if (memcmp(bytes, file_magic, sizeof file_magic) != 0)
		return -EIO;
	out->format_version = buf_load_u32(bytes + 8);
	if (out->format_version < FILE_FORMAT_OLDEST || out->format_version > FILE_FORMAT_VERSION)
		return -EPROTO;
	if (buf_load_u64(bytes + 48) != codec_hash(bytes, 48))
		return -EIO;
	uint32_t kind = buf_load_u32(bytes + 12);
	if (kind != FILE_KIND_MANIFEST && kind != FILE_KIND_SEGMENT && kind != FILE_KIND_PACK)
		return -EIO;
	out->kind = (enum file_kind)kind;
	memcpy(out->store_id.bytes, bytes + 16, 16);
	out->segment_id = buf_load_u64(bytes + 32);
	out->created_us = buf_load_u64(bytes + 40);
	if ((out->kind == FILE_KIND_MANIFEST) != (out->segment_id == 0))
		return -EIO;
	return 0;
}
