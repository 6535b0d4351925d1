/*
 * libFuzzer target for the decoders of what a store file holds
 * (docs/ARCHITECTURE.md "Reliability tests"): blocks, the file header, B+tree
 * node pages and the records inside blocks. The first byte picks what the
 * rest is read as:
 *
 *   0  a block as it lies on disk (header, stored payload): codec_decode
 *   1  a block's stored payload behind a header that is made to checksum
 *      (byte 1: type, byte 2: codec, bytes 3..6: the raw size it claims), so
 *      that hostile compressed payloads reach zstd and lz4
 *   2  a file header (cut or zero-padded to FILE_HEADER_SIZE)
 *   3  a B+tree node payload (btree_node_decode)
 *   4  a root record, 5 a branch record, 6 a commit record, 7 a head row
 *
 * Beyond "no crash, no sanitizer report": whatever a decoder accepts encodes
 * to bytes that decode again and encode to the same bytes (blocks: decode to
 * the same raw payload); a refusal is -EIO or -EPROTO (-ENOMEM nowhere for
 * these small inputs).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "btree_int.h"
#include "codec.h"
#include "journal.h"
#include "manifest_int.h"
#include "pager.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_refusal(int rc)
{
	if (rc != -EIO && rc != -EPROTO)
		abort();
}

static void same_bytes(const struct buf *a, const struct buf *b)
{
	if (a->size != b->size || (a->size && memcmp(a->data, b->data, a->size)))
		abort();
}

/* Decoded raw payload re-encoded with the block's type and codec decodes to the same payload. */
static void block_round_trip(const uint8_t *block, size_t size)
{
	struct buf raw, encoded, again;
	buf_init(&raw);
	buf_init(&encoded);
	buf_init(&again);
	struct block_header header;
	int rc = codec_decode(block, size, 0, &raw);
	if (rc < 0) {
		check_refusal(rc);
		goto out;
	}
	if (codec_decode_header(block, &header) < 0 || raw.size != header.raw_size)
		abort();
	if (codec_encode(header.type, header.codec, raw.data, raw.size, &encoded) < 0 ||
	    codec_decode(encoded.data, encoded.size, header.type, &again) < 0)
		abort();
	same_bytes(&raw, &again);
out:
	buf_free(&raw);
	buf_free(&encoded);
	buf_free(&again);
}

/* A block around payload whose header claims type, codec and raw size, with the right checksum. */
static void block_with_checksum(const uint8_t *data, size_t size)
{
	if (size < 6)
		return;
	uint8_t type = data[0], codec = data[1];
	uint32_t raw_size = (uint32_t)data[2] | (uint32_t)data[3] << 8 | (uint32_t)data[4] << 16 | (uint32_t)data[5] << 24;
	raw_size %= 1u << 20;   /* keep allocations small */
	const uint8_t *payload = data + 6;
	size_t stored = size - 6;
	uint8_t *block = malloc(BLOCK_HEADER_SIZE + stored);
	if (!block)
		return;
	memset(block, 0, BLOCK_HEADER_SIZE);
	buf_store_u32(block, BLOCK_MAGIC);
	block[4] = type;
	block[5] = codec;
	buf_store_u32(block + 8, (uint32_t)stored);
	buf_store_u32(block + 12, raw_size);
	memcpy(block + BLOCK_HEADER_SIZE, payload, stored);
	/* the checksum covers bytes 0..15 and the stored payload */
	uint8_t *hashed = malloc(16 + stored);
	if (hashed) {
		memcpy(hashed, block, 16);
		memcpy(hashed + 16, payload, stored);
		buf_store_u64(block + 16, codec_hash(hashed, 16 + stored));
		free(hashed);
		block_round_trip(block, BLOCK_HEADER_SIZE + stored);
	}
	free(block);
}

static void file_header(const uint8_t *data, size_t size)
{
	uint8_t bytes[FILE_HEADER_SIZE] = { 0 }, again[FILE_HEADER_SIZE];
	memcpy(bytes, data, size < sizeof bytes ? size : sizeof bytes);
	struct file_header header, decoded;
	int rc = codec_file_header_decode(bytes, &header);
	if (rc < 0) {
		check_refusal(rc);
		return;
	}
	codec_file_header_encode(&header, again);
	if (codec_file_header_decode(again, &decoded) < 0 || memcmp(&header, &decoded, sizeof header))
		abort();
}

static void node(const uint8_t *data, size_t size)
{
	struct btree_node view, again;
	memset(&view, 0, sizeof view);
	memset(&again, 0, sizeof again);
	buf_init(&view.raw);
	buf_init(&view.expanded);
	buf_init(&again.raw);
	buf_init(&again.expanded);
	struct buf second;
	buf_init(&second);
	if (buf_append(&view.raw, data, size) < 0)
		abort();
	int rc = btree_node_decode(&view);
	if (rc < 0) {
		check_refusal(rc);
		goto out;
	}
	/* what was decoded encodes (in its layout) to a payload that decodes and encodes the same */
	if (btree_node_encode(&view, &again.raw) < 0 || btree_node_decode(&again) < 0 ||
	    btree_node_encode(&again, &second) < 0 || again.count != view.count || again.leaf != view.leaf)
		abort();
	same_bytes(&again.raw, &second);
out:
	btree_view_clear(&view);
	btree_view_clear(&again);
	buf_free(&second);
}

#define RECORD_ROUND_TRIP(type, decode, encode, release)                                           \
	do {                                                                                       \
		type first, second;                                                                \
		struct buf one, two;                                                               \
		memset(&first, 0, sizeof first);                                                   \
		memset(&second, 0, sizeof second);                                                 \
		buf_init(&one);                                                                    \
		buf_init(&two);                                                                    \
		int rc = decode(data, size, &first);                                               \
		if (rc < 0) {                                                                      \
			check_refusal(rc);                                                         \
		} else if (encode(&first, &one) < 0 || decode(one.data, one.size, &second) < 0 ||  \
			   encode(&second, &two) < 0) {                                            \
			abort();                                                                   \
		} else {                                                                           \
			same_bytes(&one, &two);                                                    \
		}                                                                                  \
		release;                                                                           \
		buf_free(&one);                                                                    \
		buf_free(&two);                                                                    \
	} while (0)

/* Commit records in the newest format's layout (docs/FORMAT.md §9). */
static int commit_decode(const void *bytes, size_t size, struct commit_record *record)
{
	return journal_commit_record_decode(bytes, size, FILE_FORMAT_VERSION, record);
}

static int commit_encode(const struct commit_record *record, struct buf *out)
{
	return journal_commit_record_encode(record, FILE_FORMAT_VERSION, out);
}

int LLVMFuzzerTestOneInput(const uint8_t *input, size_t input_size)
{
	if (input_size == 0)
		return 0;
	const uint8_t *data = input + 1;
	size_t size = input_size - 1;
	switch (input[0] % 8) {
	case 0:
		block_round_trip(data, size);
		break;
	case 1:
		block_with_checksum(data, size);
		break;
	case 2:
		file_header(data, size);
		break;
	case 3:
		node(data, size);
		break;
	case 4:
		RECORD_ROUND_TRIP(struct root_record, manifest_root_decode, manifest_root_encode, (void)0);
		break;
	case 5:
		RECORD_ROUND_TRIP(struct branch_record, manifest_branch_decode, manifest_branch_encode, (void)0);
		break;
	case 6:
		RECORD_ROUND_TRIP(struct commit_record, commit_decode, commit_encode,
				  (journal_commit_record_free(&first), journal_commit_record_free(&second)));
		break;
	case 7:
		RECORD_ROUND_TRIP(struct head_row, journal_head_row_decode, journal_head_row_encode, (void)0);
		break;
	}
	return 0;
}
