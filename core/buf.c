/*
 * buf — growable byte buffers and bounds-checked little-endian readers.
 *
 * Invariants:
 *   1. size <= capacity; data is NULL exactly when capacity is 0.
 *   2. A failed append leaves the buffer unchanged.
 *   3. A reader never moves past end; once failed it stays failed and every
 *      get returns zero / empty.
 */
#include "buf.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void buf_init(struct buf *buffer)
{
	buffer->data = NULL;
	buffer->size = 0;
	buffer->capacity = 0;
}

void buf_free(struct buf *buffer)
{
	free(buffer->data);
	buf_init(buffer);
}

void buf_reset(struct buf *buffer)
{
	buffer->size = 0;
}

int buf_reserve(struct buf *buffer, size_t extra)
{
	assert(buffer->size <= buffer->capacity);
	if (extra > SIZE_MAX - buffer->size - 1)
		return -ENOMEM;
	size_t needed = buffer->size + extra;
	if (needed <= buffer->capacity)
		return 0;
	size_t capacity = buffer->capacity ? buffer->capacity : 64;
	while (capacity < needed)
		capacity = capacity > SIZE_MAX / 2 ? needed : capacity * 2;
	uint8_t *data = realloc(buffer->data, capacity);
	if (!data)
		return -ENOMEM;
	buffer->data = data;
	buffer->capacity = capacity;
	return 0;
}

int buf_append(struct buf *buffer, const void *bytes, size_t size)
{
	if (size == 0)
		return 0;
	int rc = buf_reserve(buffer, size);
	if (rc < 0)
		return rc;
	memcpy(buffer->data + buffer->size, bytes, size);
	buffer->size += size;
	return 0;
}

int buf_append_string(struct buf *buffer, const char *text)
{
	return buf_append(buffer, text, strlen(text));
}

int buf_printf(struct buf *buffer, const char *format, ...)
{
	va_list arguments;
	va_start(arguments, format);
	int length = vsnprintf(NULL, 0, format, arguments);
	va_end(arguments);
	if (length < 0)
		return -EINVAL;
	/* One extra byte for vsnprintf's NUL, which is not counted in size. */
	int rc = buf_reserve(buffer, (size_t)length + 1);
	if (rc < 0)
		return rc;
	va_start(arguments, format);
	vsnprintf((char *)buffer->data + buffer->size, (size_t)length + 1, format, arguments);
	va_end(arguments);
	buffer->size += (size_t)length;
	return 0;
}

int buf_put_u8(struct buf *buffer, uint8_t value)
{
	return buf_append(buffer, &value, 1);
}

int buf_put_u16(struct buf *buffer, uint16_t value)
{
	uint8_t bytes[2] = { (uint8_t)value, (uint8_t)(value >> 8) };
	return buf_append(buffer, bytes, sizeof bytes);
}

int buf_put_u32(struct buf *buffer, uint32_t value)
{
	uint8_t bytes[4];
	buf_store_u32(bytes, value);
	return buf_append(buffer, bytes, sizeof bytes);
}

int buf_put_u64(struct buf *buffer, uint64_t value)
{
	uint8_t bytes[8];
	buf_store_u64(bytes, value);
	return buf_append(buffer, bytes, sizeof bytes);
}

int buf_put_str(struct buf *buffer, const char *text, size_t length)
{
	if (length > UINT16_MAX)
		return -E2BIG;
	int rc = buf_reserve(buffer, 2 + length);
	if (rc < 0)
		return rc;
	buf_put_u16(buffer, (uint16_t)length);
	buf_append(buffer, text, length);
	return 0;
}

int buf_put_bytes(struct buf *buffer, const void *bytes, uint32_t length)
{
	int rc = buf_reserve(buffer, 4 + (size_t)length);
	if (rc < 0)
		return rc;
	buf_put_u32(buffer, length);
	buf_append(buffer, bytes, length);
	return 0;
}

const char *buf_cstr(struct buf *buffer)
{
	if (buf_reserve(buffer, 1) < 0)
		return NULL;
	buffer->data[buffer->size] = 0;
	return (const char *)buffer->data;
}

/* ---- readers ------------------------------------------------------------ */

void buf_reader_init(struct buf_reader *reader, const void *bytes, size_t size)
{
	reader->position = bytes;
	reader->end = reader->position ? reader->position + size : NULL;
	reader->failed = 0;
}

size_t buf_reader_remaining(const struct buf_reader *reader)
{
	if (reader->failed || !reader->position)
		return 0;
	return (size_t)(reader->end - reader->position);
}

/* Returns a pointer to the next size bytes and advances, or NULL (and fails). */
static const uint8_t *reader_take(struct buf_reader *reader, size_t size)
{
	if (reader->failed)
		return NULL;
	if (buf_reader_remaining(reader) < size) {
		reader->failed = 1;
		return NULL;
	}
	const uint8_t *at = reader->position;
	if (size)
		reader->position += size;
	return at;
}

uint8_t buf_get_u8(struct buf_reader *reader)
{
	const uint8_t *at = reader_take(reader, 1);
	return at ? at[0] : 0;
}

uint16_t buf_get_u16(struct buf_reader *reader)
{
	const uint8_t *at = reader_take(reader, 2);
	return at ? (uint16_t)(at[0] | (at[1] << 8)) : 0;
}

uint32_t buf_get_u32(struct buf_reader *reader)
{
	const uint8_t *at = reader_take(reader, 4);
	return at ? buf_load_u32(at) : 0;
}

uint64_t buf_get_u64(struct buf_reader *reader)
{
	const uint8_t *at = reader_take(reader, 8);
	return at ? buf_load_u64(at) : 0;
}

size_t buf_get_str(struct buf_reader *reader, const uint8_t **bytes)
{
	size_t length = buf_get_u16(reader);
	const uint8_t *at = reader_take(reader, length);
	*bytes = at ? at : (const uint8_t *)"";
	return at ? length : 0;
}

size_t buf_get_bytes(struct buf_reader *reader, const uint8_t **bytes)
{
	size_t length = buf_get_u32(reader);
	const uint8_t *at = reader_take(reader, length);
	*bytes = at ? at : (const uint8_t *)"";
	return at ? length : 0;
}

void buf_get_str_into(struct buf_reader *reader, char *out, size_t size)
{
	const uint8_t *bytes;
	size_t length = buf_get_str(reader, &bytes);
	if (!reader->failed && length >= size)
		reader->failed = 1;
	if (reader->failed) {
		if (size)
			out[0] = 0;
		return;
	}
	memcpy(out, bytes, length);
	out[length] = 0;
}

void buf_get_raw(struct buf_reader *reader, void *out, size_t size)
{
	const uint8_t *at = reader_take(reader, size);
	if (at)
		memcpy(out, at, size);
	else if (size)
		memset(out, 0, size);
}

/* ---- fixed positions ---------------------------------------------------- */

void buf_store_u32(uint8_t *at, uint32_t value)
{
	for (int i = 0; i < 4; i++)
		at[i] = (uint8_t)(value >> (8 * i));
}

void buf_store_u64(uint8_t *at, uint64_t value)
{
	for (int i = 0; i < 8; i++)
		at[i] = (uint8_t)(value >> (8 * i));
}

uint32_t buf_load_u32(const uint8_t *at)
{
	return (uint32_t)at[0] | (uint32_t)at[1] << 8 | (uint32_t)at[2] << 16 | (uint32_t)at[3] << 24;
}

uint64_t buf_load_u64(const uint8_t *at)
{
	return (uint64_t)buf_load_u32(at) | (uint64_t)buf_load_u32(at + 4) << 32;
}

int buf_grow_array(void **array, size_t *capacity, size_t needed, size_t element_size)
{
	if (needed <= *capacity)
		return 0;
	size_t grown = *capacity ? *capacity : 16;
	while (grown < needed) {
		if (grown > SIZE_MAX / 2)
			return -ENOMEM;
		grown *= 2;
	}
	if (element_size && grown > SIZE_MAX / element_size)
		return -ENOMEM;
	void *bigger = realloc(*array, grown * element_size);
	if (!bigger)
		return -ENOMEM;
	*array = bigger;
	*capacity = grown;
	return 0;
}
