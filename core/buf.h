/*
 * buf — growable byte buffers and bounds-checked readers for the store's
 * little-endian, fixed-width encodings (layer: io, no dependencies).
 *
 * All on-disk integers are little-endian and fixed-width so that a record's
 * size depends only on its strings, never on the magnitude of its numbers
 * (this keeps I/O counters exactly comparable across history depths).
 * Strings are encoded as u16 length + bytes (no NUL); byte strings as u32
 * length + bytes.
 */
#ifndef GRAPHFS_BUF_H
#define GRAPHFS_BUF_H

#include <stddef.h>
#include <stdint.h>

struct buf {
	uint8_t *data;     /* NULL until the first append */
	size_t size;       /* bytes in use */
	size_t capacity;   /* bytes allocated */
};

void buf_init(struct buf *buffer);
void buf_free(struct buf *buffer);         /* frees memory, leaves an empty buffer */
void buf_reset(struct buf *buffer);        /* size = 0, keeps the memory */

/* Each returns 0 or -ENOMEM; on error the buffer is unchanged. */
int buf_reserve(struct buf *buffer, size_t extra);
/* Grows *array (of element_size elements, *capacity of them) to hold at least
 * needed, doubling from 16. 0 or -ENOMEM (the array unchanged). */
int buf_grow_array(void **array, size_t *capacity, size_t needed, size_t element_size);
int buf_append(struct buf *buffer, const void *bytes, size_t size);
int buf_append_string(struct buf *buffer, const char *text);     /* no NUL */
int buf_printf(struct buf *buffer, const char *format, ...) __attribute__((format(printf, 2, 3)));
int buf_put_u8(struct buf *buffer, uint8_t value);
int buf_put_u16(struct buf *buffer, uint16_t value);
int buf_put_u32(struct buf *buffer, uint32_t value);
int buf_put_u64(struct buf *buffer, uint64_t value);
int buf_put_str(struct buf *buffer, const char *text, size_t length); /* u16 length + bytes; -E2BIG if > 65535 */
int buf_put_bytes(struct buf *buffer, const void *bytes, uint32_t length); /* u32 length + bytes */
/* Returns a NUL-terminated view of the contents (appends a NUL beyond size). */
const char *buf_cstr(struct buf *buffer);

/*
 * A reader over immutable bytes. Every get fails softly: on overrun it sets
 * failed = 1, returns zeros / empty strings, and later gets keep failing, so
 * a decoder checks `failed` once at the end.
 */
struct buf_reader {
	const uint8_t *position;
	const uint8_t *end;
	int failed;
};

void buf_reader_init(struct buf_reader *reader, const void *bytes, size_t size);
uint8_t buf_get_u8(struct buf_reader *reader);
uint16_t buf_get_u16(struct buf_reader *reader);
uint32_t buf_get_u32(struct buf_reader *reader);
uint64_t buf_get_u64(struct buf_reader *reader);
/* Points *bytes into the reader's memory (not NUL-terminated); returns the length. */
size_t buf_get_str(struct buf_reader *reader, const uint8_t **bytes);
size_t buf_get_bytes(struct buf_reader *reader, const uint8_t **bytes);
/* Copies a u16-length string into out (NUL-terminated); fails if it does not fit. */
void buf_get_str_into(struct buf_reader *reader, char *out, size_t size);
void buf_get_raw(struct buf_reader *reader, void *out, size_t size);
size_t buf_reader_remaining(const struct buf_reader *reader);

/* Little-endian helpers for fixed positions. */
void buf_store_u32(uint8_t *at, uint32_t value);
void buf_store_u64(uint8_t *at, uint64_t value);
uint32_t buf_load_u32(const uint8_t *at);
uint64_t buf_load_u64(const uint8_t *at);

#endif
