/*
 * s3_int.h — what the object store answers, read without the network
 * (core/s3_answer.c; internal to s3.c and its fuzz target, tests/fuzz/fuzz_s3_answer.c).
 *
 * The answers are S3's XML documents. They are read by looking for the few
 * elements graphfs needs, never with a general XML parser: an answer that
 * lacks one, or holds a malformed one, is refused, never half-read.
 */
#ifndef GRAPHFS_S3_INT_H
#define GRAPHFS_S3_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error_info.h"
#include "s3.h"

#define S3_ANSWER_TOKEN_MAX 1024   /* bytes of a continuation token, with its NUL */
/* bytes of a listed key (the location's prefix included), with its NUL */
#define S3_ANSWER_KEY_MAX (S3_KEY_MAX + sizeof ((struct s3_location *)0)->prefix + 1)

/*
 * The text of the first <tag>…</tag> in [xml, end), its five predefined
 * entities decoded, into out (NUL-terminated, cut at size - 1 bytes).
 * Returns the position after the closing tag, or NULL (no such element; out
 * is then unchanged).
 */
const char *s3_answer_text(const char *xml, const char *end, const char *tag, char *out, size_t size);

/* One page of a ListObjectsV2 answer. */
struct s3_listing_page {
	bool truncated;                       /* <IsTruncated>true</IsTruncated>: more pages follow */
	char token[S3_ANSWER_TOKEN_MAX];      /* then its <NextContinuationToken> */
};

/*
 * Reads one ListObjectsV2 answer: visits each <Contents> entry in order with
 * its <Key> less prefix (every key must begin with prefix) and its <Size>
 * (decimal digits, at most 20), and fills page. Returns 0, visit's non-zero
 * return (the visits before it were made), or -EIO with error set (a
 * malformed entry, or a truncated page without a token): the visits made
 * before a malformed entry stand, so a caller refuses the whole listing.
 */
int s3_answer_listing(const char *xml, size_t size, const char *prefix, struct s3_listing_page *page,
		      int (*visit)(const char *key, uint64_t size, void *context), void *context,
		      struct error_info *error);

/* The <Code> of an error answer (e.g. "NoSuchKey") into code, or "" if it has none. */
void s3_answer_error_code(const void *body, size_t size, char *code, size_t code_size);

#endif
