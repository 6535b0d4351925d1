/* buf: growable buffers and bounds-checked little-endian readers. */
#include "harness.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "buf.h"

TEST(a_new_buffer_is_empty)
{
	struct buf buffer;
	buf_init(&buffer);
	CHECK(buffer.data == NULL);
	CHECK_EQ(buffer.size, 0);
	CHECK(strcmp(buf_cstr(&buffer), "") == 0);
	buf_free(&buffer);
}

TEST(appends_grow_the_buffer_and_keep_earlier_bytes)
{
	struct buf buffer;
	buf_init(&buffer);
	for (int i = 0; i < 10000; i++) {
		uint8_t byte = (uint8_t)i;
		CHECK_EQ(buf_append(&buffer, &byte, 1), 0);
	}
	CHECK_EQ(buffer.size, 10000);
	CHECK(buffer.capacity >= buffer.size);
	for (int i = 0; i < 10000; i++)
		CHECK_EQ(buffer.data[i], (uint8_t)i);
	buf_free(&buffer);
	CHECK(buffer.data == NULL);
	CHECK_EQ(buffer.size, 0);
}

TEST(reset_keeps_memory_but_empties)
{
	struct buf buffer;
	buf_init(&buffer);
	buf_append_string(&buffer, "hello");
	size_t capacity = buffer.capacity;
	buf_reset(&buffer);
	CHECK_EQ(buffer.size, 0);
	CHECK_EQ(buffer.capacity, capacity);
	buf_free(&buffer);
}

TEST(printf_appends_formatted_text_without_nul)
{
	struct buf buffer;
	buf_init(&buffer);
	buf_append_string(&buffer, "a=");
	CHECK_EQ(buf_printf(&buffer, "%d,%s", 42, "x"), 0);
	CHECK_EQ(buffer.size, 6);
	CHECK(strcmp(buf_cstr(&buffer), "a=42,x") == 0);
	CHECK_EQ(buffer.size, 6);
	buf_free(&buffer);
}

TEST(integers_are_little_endian_fixed_width)
{
	struct buf buffer;
	buf_init(&buffer);
	buf_put_u8(&buffer, 0x01);
	buf_put_u16(&buffer, 0x0302);
	buf_put_u32(&buffer, 0x07060504);
	buf_put_u64(&buffer, 0x0f0e0d0c0b0a0908ull);
	CHECK_EQ(buffer.size, 15);
	for (int i = 0; i < 15; i++)
		CHECK_EQ(buffer.data[i], i + 1);
	buf_free(&buffer);
}

TEST(small_numbers_take_the_same_space_as_large_ones)
{
	struct buf small, large;
	buf_init(&small);
	buf_init(&large);
	buf_put_u64(&small, 1);
	buf_put_u64(&large, UINT64_MAX);
	CHECK_EQ(small.size, large.size);
	buf_free(&small);
	buf_free(&large);
}

TEST(round_trip_of_every_encoding)
{
	struct buf buffer;
	buf_init(&buffer);
	buf_put_u8(&buffer, 200);
	buf_put_u16(&buffer, 65000);
	buf_put_u32(&buffer, 4000000000u);
	buf_put_u64(&buffer, 0x123456789abcdef0ull);
	CHECK_EQ(buf_put_str(&buffer, "name", 4), 0);
	CHECK_EQ(buf_put_bytes(&buffer, "\0\1\2", 3), 0);
	buf_append(&buffer, "RAW", 3);

	struct buf_reader reader;
	buf_reader_init(&reader, buffer.data, buffer.size);
	CHECK_EQ(buf_get_u8(&reader), 200);
	CHECK_EQ(buf_get_u16(&reader), 65000);
	CHECK_EQ(buf_get_u32(&reader), 4000000000u);
	CHECK(buf_get_u64(&reader) == 0x123456789abcdef0ull);
	const uint8_t *bytes;
	CHECK_EQ(buf_get_str(&reader, &bytes), 4);
	CHECK(memcmp(bytes, "name", 4) == 0);
	CHECK_EQ(buf_get_bytes(&reader, &bytes), 3);
	CHECK(memcmp(bytes, "\0\1\2", 3) == 0);
	char raw[3];
	buf_get_raw(&reader, raw, 3);
	CHECK(memcmp(raw, "RAW", 3) == 0);
	CHECK_EQ(buf_reader_remaining(&reader), 0);
	CHECK_EQ(reader.failed, 0);
	buf_free(&buffer);
}

TEST(str_longer_than_u16_is_refused_and_buffer_unchanged)
{
	static char text[70000];
	struct buf buffer;
	buf_init(&buffer);
	buf_append_string(&buffer, "x");
	CHECK_EQ(buf_put_str(&buffer, text, sizeof text), -E2BIG);
	CHECK_EQ(buffer.size, 1);
	CHECK_EQ(buf_put_str(&buffer, text, 65535), 0);
	CHECK_EQ(buffer.size, 1 + 2 + 65535);
	buf_free(&buffer);
}

TEST(reading_past_the_end_fails_and_stays_failed)
{
	uint8_t bytes[3] = { 1, 2, 3 };
	struct buf_reader reader;
	buf_reader_init(&reader, bytes, sizeof bytes);
	CHECK_EQ(buf_get_u16(&reader), 0x0201);
	CHECK_EQ(buf_get_u32(&reader), 0);
	CHECK_EQ(reader.failed, 1);
	CHECK_EQ(buf_get_u8(&reader), 0);
	CHECK_EQ(buf_reader_remaining(&reader), 0);
}

TEST(a_string_length_beyond_the_input_fails)
{
	uint8_t bytes[] = { 10, 0, 'a', 'b' };
	struct buf_reader reader;
	buf_reader_init(&reader, bytes, sizeof bytes);
	const uint8_t *text;
	CHECK_EQ(buf_get_str(&reader, &text), 0);
	CHECK(reader.failed);
	CHECK(text != NULL);
}

TEST(a_bytes_length_near_u32_max_fails_without_overflow)
{
	uint8_t bytes[] = { 0xff, 0xff, 0xff, 0xff, 1, 2 };
	struct buf_reader reader;
	buf_reader_init(&reader, bytes, sizeof bytes);
	const uint8_t *data;
	CHECK_EQ(buf_get_bytes(&reader, &data), 0);
	CHECK(reader.failed);
}

TEST(str_into_copies_with_nul_and_refuses_what_does_not_fit)
{
	struct buf buffer;
	buf_init(&buffer);
	buf_put_str(&buffer, "people", 6);
	buf_put_str(&buffer, "people", 6);
	struct buf_reader reader;
	buf_reader_init(&reader, buffer.data, buffer.size);
	char out[7];
	buf_get_str_into(&reader, out, sizeof out);
	CHECK(!reader.failed);
	CHECK(strcmp(out, "people") == 0);
	char small[6];
	buf_get_str_into(&reader, small, sizeof small);
	CHECK(reader.failed);
	CHECK(small[0] == 0);
	buf_free(&buffer);
}

TEST(raw_read_past_the_end_zeroes_the_output)
{
	uint8_t bytes[2] = { 9, 9 };
	uint8_t out[4] = { 7, 7, 7, 7 };
	struct buf_reader reader;
	buf_reader_init(&reader, bytes, sizeof bytes);
	buf_get_raw(&reader, out, sizeof out);
	CHECK(reader.failed);
	CHECK(out[0] == 0 && out[3] == 0);
}

TEST(an_empty_reader_fails_on_the_first_get)
{
	struct buf_reader reader;
	buf_reader_init(&reader, NULL, 0);
	CHECK_EQ(buf_reader_remaining(&reader), 0);
	CHECK_EQ(buf_get_u8(&reader), 0);
	CHECK(reader.failed);
}

TEST(fixed_position_helpers_match_the_stream_encoding)
{
	uint8_t at[8];
	buf_store_u32(at, 0xdeadbeef);
	CHECK(at[0] == 0xef && at[3] == 0xde);
	CHECK(buf_load_u32(at) == 0xdeadbeef);
	buf_store_u64(at, 0x0102030405060708ull);
	CHECK(at[0] == 0x08 && at[7] == 0x01);
	CHECK(buf_load_u64(at) == 0x0102030405060708ull);
}

int main(void)
{
	return harness_run();
}
