/* codec: blocks are exactly docs/FORMAT.md §4, round-trip, and any damage is -EIO. */
#include "harness.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "codec.h"

static const enum codec_kind all_codecs[] = { CODEC_NONE, CODEC_ZSTD, CODEC_LZ4 };

/* Text that compresses well. */
static void fill_compressible(struct buf *raw, size_t size)
{
	while (raw->size < size)
		buf_printf(raw, "{\"id\":%zu,\"name\":\"person number %zu\",\"city\":\"Lyon\"}\n",
			   raw->size, raw->size % 97);
	raw->size = size;
}

static void fill_random(uint8_t *bytes, size_t size)
{
	size_t done = 0;
	while (done < size) {
		ssize_t got = getrandom(bytes + done, size - done, 0);
		if (got > 0)
			done += (size_t)got;
	}
}

/* Recomputes the checksum of a block whose header was edited, as a forger would. */
static void reseal(uint8_t *block, size_t payload_size)
{
	uint8_t *hashed = malloc(16 + payload_size);
	memcpy(hashed, block, 16);
	memcpy(hashed + 16, block + BLOCK_HEADER_SIZE, payload_size);
	buf_store_u64(block + 16, codec_hash(hashed, 16 + payload_size));
	free(hashed);
}

TEST(every_codec_round_trips_compressible_data)
{
	for (size_t c = 0; c < 3; c++) {
		struct buf raw, block, decoded;
		buf_init(&raw);
		buf_init(&block);
		buf_init(&decoded);
		fill_compressible(&raw, 100000);
		CHECK_EQ(codec_encode(BLOCK_FRAGMENT, all_codecs[c], raw.data, raw.size, &block), 0);
		struct block_header header;
		CHECK_EQ(codec_decode_header(block.data, &header), 0);
		CHECK_EQ(header.codec, all_codecs[c]);
		CHECK_EQ(header.raw_size, raw.size);
		CHECK_EQ(block.size, BLOCK_HEADER_SIZE + header.stored_size);
		if (all_codecs[c] != CODEC_NONE)
			CHECK(header.stored_size < raw.size / 4);
		CHECK_EQ(codec_decode(block.data, block.size, BLOCK_FRAGMENT, &decoded), 0);
		CHECK_EQ(decoded.size, raw.size);
		CHECK(memcmp(decoded.data, raw.data, raw.size) == 0);
		buf_free(&raw);
		buf_free(&block);
		buf_free(&decoded);
	}
}

TEST(incompressible_payloads_are_stored_uncompressed)
{
	uint8_t raw[4096];
	fill_random(raw, sizeof raw);
	for (size_t c = 0; c < 3; c++) {
		struct buf block, decoded;
		buf_init(&block);
		buf_init(&decoded);
		CHECK_EQ(codec_encode(BLOCK_FRAGMENT, all_codecs[c], raw, sizeof raw, &block), 0);
		CHECK_EQ(block.data[5], CODEC_NONE);
		CHECK_EQ(block.size, BLOCK_HEADER_SIZE + sizeof raw);
		CHECK_EQ(codec_decode(block.data, block.size, 0, &decoded), 0);
		CHECK(decoded.size == sizeof raw && memcmp(decoded.data, raw, sizeof raw) == 0);
		buf_free(&block);
		buf_free(&decoded);
	}
}

TEST(an_empty_payload_round_trips)
{
	for (size_t c = 0; c < 3; c++) {
		struct buf block, decoded;
		buf_init(&block);
		buf_init(&decoded);
		CHECK_EQ(codec_encode(BLOCK_COMMIT, all_codecs[c], NULL, 0, &block), 0);
		CHECK_EQ(block.size, BLOCK_HEADER_SIZE);
		CHECK_EQ(codec_decode(block.data, block.size, BLOCK_COMMIT, &decoded), 0);
		CHECK_EQ(decoded.size, 0);
		buf_free(&block);
		buf_free(&decoded);
	}
}

TEST(a_large_block_round_trips_with_every_codec)
{
	struct buf raw;
	buf_init(&raw);
	fill_compressible(&raw, 8u << 20);
	for (size_t c = 0; c < 3; c++) {
		struct buf block, decoded;
		buf_init(&block);
		buf_init(&decoded);
		CHECK_EQ(codec_encode(BLOCK_FRAGMENT, all_codecs[c], raw.data, raw.size, &block), 0);
		CHECK_EQ(codec_decode(block.data, block.size, BLOCK_FRAGMENT, &decoded), 0);
		CHECK(decoded.size == raw.size && memcmp(decoded.data, raw.data, raw.size) == 0);
		buf_free(&block);
		buf_free(&decoded);
	}
	buf_free(&raw);
}

TEST(the_header_is_laid_out_as_format_md_says)
{
	struct buf block;
	buf_init(&block);
	CHECK_EQ(codec_encode(BLOCK_NODE, CODEC_NONE, "hello", 5, &block), 0);
	CHECK_EQ(block.size, 24 + 5);
	CHECK(memcmp(block.data, "GFSB", 4) == 0);
	CHECK_EQ(block.data[4], 2);              /* tree node */
	CHECK_EQ(block.data[5], 0);              /* codec none */
	CHECK(block.data[6] == 0 && block.data[7] == 0);
	CHECK_EQ(buf_load_u32(block.data + 8), 5);  /* stored size */
	CHECK_EQ(buf_load_u32(block.data + 12), 5); /* raw size */
	uint8_t hashed[16 + 5];
	memcpy(hashed, block.data, 16);
	memcpy(hashed + 16, "hello", 5);
	CHECK(buf_load_u64(block.data + 16) == codec_hash(hashed, sizeof hashed));
	CHECK(memcmp(block.data + 24, "hello", 5) == 0);
	buf_free(&block);
}

TEST(encode_appends_after_existing_bytes)
{
	struct buf block, decoded;
	buf_init(&block);
	buf_init(&decoded);
	buf_append(&block, "prefix", 6);
	CHECK_EQ(codec_encode(BLOCK_SCHEMA, CODEC_ZSTD, "{}", 2, &block), 0);
	size_t first_end = block.size;
	CHECK_EQ(codec_encode(BLOCK_SCHEMA, CODEC_NONE, "[]", 2, &block), 0);
	CHECK(memcmp(block.data, "prefix", 6) == 0);
	CHECK_EQ(codec_decode(block.data + 6, first_end - 6, BLOCK_SCHEMA, &decoded), 0);
	CHECK_EQ(codec_decode(block.data + first_end, block.size - first_end, BLOCK_SCHEMA, &decoded), 0);
	CHECK(decoded.size == 4 && memcmp(decoded.data, "{}[]", 4) == 0);
	buf_free(&block);
	buf_free(&decoded);
}

TEST(a_flipped_byte_anywhere_is_eio_for_every_codec)
{
	struct buf raw;
	buf_init(&raw);
	fill_compressible(&raw, 600);
	const uint8_t masks[] = { 0x01, 0x80, 0xff };
	for (size_t c = 0; c < 3; c++) {
		struct buf block, decoded;
		buf_init(&block);
		buf_init(&decoded);
		CHECK_EQ(codec_encode(BLOCK_FRAGMENT, all_codecs[c], raw.data, raw.size, &block), 0);
		buf_append(&decoded, "keep", 4);
		for (size_t position = 0; position < block.size; position++) {
			for (size_t m = 0; m < sizeof masks; m++) {
				block.data[position] ^= masks[m];
				int rc = codec_decode(block.data, block.size, 0, &decoded);
				block.data[position] ^= masks[m];
				CHECK_EQ(rc, -EIO);
				CHECK_EQ(decoded.size, 4);
			}
		}
		CHECK_EQ(codec_decode(block.data, block.size, 0, &decoded), 0);
		buf_free(&block);
		buf_free(&decoded);
	}
	buf_free(&raw);
}

TEST(a_truncated_or_overlong_block_is_eio)
{
	struct buf block, decoded;
	buf_init(&block);
	buf_init(&decoded);
	CHECK_EQ(codec_encode(BLOCK_ROOT, CODEC_NONE, "0123456789", 10, &block), 0);
	for (size_t size = 0; size < block.size; size++)
		CHECK_EQ(codec_decode(block.data, size, 0, &decoded), -EIO);
	buf_put_u8(&block, 0);
	CHECK_EQ(codec_decode(block.data, block.size, 0, &decoded), -EIO);
	CHECK_EQ(codec_decode(NULL, 0, 0, &decoded), -EIO);
	CHECK_EQ(decoded.size, 0);
	buf_free(&block);
	buf_free(&decoded);
}

TEST(the_wrong_block_type_is_eio)
{
	struct buf block, decoded;
	buf_init(&block);
	buf_init(&decoded);
	CHECK_EQ(codec_encode(BLOCK_ROOT, CODEC_NONE, "x", 1, &block), 0);
	CHECK_EQ(codec_decode(block.data, block.size, BLOCK_NODE, &decoded), -EIO);
	CHECK_EQ(codec_decode(block.data, block.size, BLOCK_ROOT, &decoded), 0);
	buf_free(&block);
	buf_free(&decoded);
}

TEST(hostile_sizes_are_refused_even_with_a_valid_checksum)
{
	struct buf block, decoded;
	buf_init(&block);
	buf_init(&decoded);
	CHECK_EQ(codec_encode(BLOCK_FRAGMENT, CODEC_NONE, "abcdefgh", 8, &block), 0);
	struct block_header header;

	/* raw size beyond the limit */
	buf_store_u32(block.data + 12, BLOCK_MAX_RAW_SIZE + 1);
	buf_store_u32(block.data + 8, BLOCK_MAX_RAW_SIZE + 1);
	reseal(block.data, 8);
	CHECK_EQ(codec_decode_header(block.data, &header), -EIO);
	CHECK_EQ(codec_decode(block.data, block.size, 0, &decoded), -EIO);

	/* huge sizes within the limit but beyond the bytes given */
	buf_store_u32(block.data + 12, BLOCK_MAX_RAW_SIZE);
	buf_store_u32(block.data + 8, BLOCK_MAX_RAW_SIZE);
	reseal(block.data, 8);
	CHECK_EQ(codec_decode_header(block.data, &header), 0);
	CHECK_EQ(codec_decode(block.data, block.size, 0, &decoded), -EIO);

	/* u32 maximum */
	buf_store_u32(block.data + 12, UINT32_MAX);
	buf_store_u32(block.data + 8, UINT32_MAX);
	reseal(block.data, 8);
	CHECK_EQ(codec_decode(block.data, block.size, 0, &decoded), -EIO);

	/* uncompressed but stored != raw */
	buf_store_u32(block.data + 8, 8);
	buf_store_u32(block.data + 12, 9);
	reseal(block.data, 8);
	CHECK_EQ(codec_decode(block.data, block.size, 0, &decoded), -EIO);
	CHECK_EQ(decoded.size, 0);
	buf_free(&block);
	buf_free(&decoded);
}

TEST(unknown_type_codec_magic_or_reserved_bytes_are_refused)
{
	struct buf block;
	buf_init(&block);
	CHECK_EQ(codec_encode(BLOCK_FRAGMENT, CODEC_NONE, "abcdefgh", 8, &block), 0);
	struct block_header header;
	const struct {
		size_t position;
		uint8_t value;
	} edits[] = { { 0, 'X' }, { 4, 0 }, { 4, BLOCK_TYPE_MAX + 1 }, { 5, 3 }, { 6, 1 }, { 7, 1 } };
	for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
		uint8_t copy[32];
		memcpy(copy, block.data, block.size);
		copy[edits[i].position] = edits[i].value;
		reseal(copy, 8);
		CHECK_EQ(codec_decode_header(copy, &header), -EIO);
	}
	buf_free(&block);
}

TEST(a_forged_compressed_payload_is_eio_not_a_crash)
{
	uint8_t garbage[200];
	fill_random(garbage, sizeof garbage);
	for (size_t c = 1; c < 3; c++) {
		for (uint32_t raw_size = 201; raw_size < 100000; raw_size = raw_size * 3 + 1) {
			uint8_t block[BLOCK_HEADER_SIZE + sizeof garbage];
			memset(block, 0, BLOCK_HEADER_SIZE);
			buf_store_u32(block, BLOCK_MAGIC);
			block[4] = BLOCK_FRAGMENT;
			block[5] = (uint8_t)all_codecs[c];
			buf_store_u32(block + 8, sizeof garbage);
			buf_store_u32(block + 12, raw_size);
			memcpy(block + BLOCK_HEADER_SIZE, garbage, sizeof garbage);
			reseal(block, sizeof garbage);
			struct buf decoded;
			buf_init(&decoded);
			CHECK_EQ(codec_decode(block, sizeof block, 0, &decoded), -EIO);
			CHECK_EQ(decoded.size, 0);
			buf_free(&decoded);
		}
	}
}

TEST(a_compressed_payload_that_decompresses_short_is_eio)
{
	struct buf raw;
	buf_init(&raw);
	fill_compressible(&raw, 5000);
	for (size_t c = 1; c < 3; c++) {
		struct buf block, decoded;
		buf_init(&block);
		buf_init(&decoded);
		CHECK_EQ(codec_encode(BLOCK_FRAGMENT, all_codecs[c], raw.data, raw.size, &block), 0);
		/* Claim one more raw byte than the payload holds, and forge the checksum. */
		buf_store_u32(block.data + 12, (uint32_t)raw.size + 1);
		reseal(block.data, block.size - BLOCK_HEADER_SIZE);
		CHECK_EQ(codec_decode(block.data, block.size, 0, &decoded), -EIO);
		/* And one fewer. */
		buf_store_u32(block.data + 12, (uint32_t)raw.size - 1);
		reseal(block.data, block.size - BLOCK_HEADER_SIZE);
		CHECK_EQ(codec_decode(block.data, block.size, 0, &decoded), -EIO);
		CHECK_EQ(decoded.size, 0);
		buf_free(&block);
		buf_free(&decoded);
	}
	buf_free(&raw);
}

TEST(a_compressed_claim_not_smaller_than_raw_is_refused)
{
	uint8_t header_bytes[BLOCK_HEADER_SIZE] = { 0 };
	struct block_header header;
	buf_store_u32(header_bytes, BLOCK_MAGIC);
	header_bytes[4] = BLOCK_FRAGMENT;
	header_bytes[5] = CODEC_ZSTD;
	buf_store_u32(header_bytes + 8, 100);
	buf_store_u32(header_bytes + 12, 100);
	CHECK_EQ(codec_decode_header(header_bytes, &header), -EIO);
	buf_store_u32(header_bytes + 8, 0);
	buf_store_u32(header_bytes + 12, 0);
	CHECK_EQ(codec_decode_header(header_bytes, &header), -EIO);
	buf_store_u32(header_bytes + 8, 99);
	buf_store_u32(header_bytes + 12, 100);
	CHECK_EQ(codec_decode_header(header_bytes, &header), 0);
	CHECK_EQ(header.stored_size, 99);
	CHECK_EQ(header.raw_size, 100);
	CHECK_EQ(header.type, BLOCK_FRAGMENT);
	CHECK_EQ(header.codec, CODEC_ZSTD);
}

TEST(encode_refuses_oversized_payloads_and_bad_arguments)
{
	struct buf block;
	buf_init(&block);
	buf_append(&block, "x", 1);
	uint8_t byte = 0;
	CHECK_EQ(codec_encode(BLOCK_FRAGMENT, CODEC_ZSTD, &byte, (size_t)BLOCK_MAX_RAW_SIZE + 1, &block),
		 -E2BIG);
	CHECK_EQ(codec_encode((enum block_type)0, CODEC_NONE, "a", 1, &block), -EINVAL);
	CHECK_EQ(codec_encode((enum block_type)(BLOCK_TYPE_MAX + 1), CODEC_NONE, "a", 1, &block), -EINVAL);
	CHECK_EQ(codec_encode(BLOCK_FRAGMENT, (enum codec_kind)7, "a", 1, &block), -EINVAL);
	CHECK_EQ(block.size, 1);
	buf_free(&block);
}

TEST(addresses_encode_as_sixteen_little_endian_bytes)
{
	struct buf out;
	buf_init(&out);
	struct block_address address = { 0x0102030405060708ull, 12288 };
	CHECK_EQ(codec_put_address(&out, address), 0);
	CHECK_EQ(out.size, BLOCK_ADDRESS_SIZE);
	CHECK_EQ(out.data[0], 0x08);
	CHECK_EQ(buf_load_u64(out.data + 8), 12288);
	struct buf_reader reader;
	buf_reader_init(&reader, out.data, out.size);
	struct block_address back = codec_get_address(&reader);
	CHECK(!reader.failed);
	CHECK(back.segment == address.segment && back.offset == address.offset);
	CHECK(!block_address_is_null(back));
	back = codec_get_address(&reader);
	CHECK(reader.failed);
	CHECK(block_address_is_null(back));
	buf_free(&out);
}

int main(void)
{
	return harness_run();
}
