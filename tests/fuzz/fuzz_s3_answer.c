/*
 * libFuzzer target for the reader of the object store's answers
 * (core/s3_answer.c): ListObjectsV2 pages and error documents, as a server,
 * a proxy or a damaged connection may send them. The first byte picks the
 * prefix the listing is read under ("", "p/" or "graphfs/store/"); the rest is
 * the answer.
 *
 * Beyond "no crash, no sanitizer report":
 *   - a refusal is -EIO with a message; a visitor's stop is returned as is;
 *   - a page that says it is truncated comes with a non-empty token;
 *   - every visited key is NUL-terminated within the longest key and is the
 *     text of a <Key> that began with the prefix; sizes are the <Size> digits;
 *   - reading the same answer twice visits the same keys and sizes (no state);
 *   - an error code is NUL-terminated within its buffer.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct visits {
	uint64_t hash;
	size_t count;
	size_t stop_after;    /* stop (return 7) at this visit; 0: never */
};

static int visit(const char *key, uint64_t object_size, void *context)
{
	struct visits *visits = context;
	size_t length = strnlen(key, S3_ANSWER_KEY_MAX);
	if (length >= S3_ANSWER_KEY_MAX)
		abort();
	for (size_t i = 0; i < length; i++)
		visits->hash = visits->hash * 1099511628211u ^ (uint8_t)key[i];
	visits->hash = visits->hash * 1099511628211u ^ object_size;
	visits->count++;
	return visits->stop_after && visits->count == visits->stop_after ? 7 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *input, size_t input_size)
{
	static const char *const prefixes[] = { "", "p/", "graphfs/store/" };
	if (input_size == 0)
		return 0;
	const char *prefix = prefixes[input[0] % 3];
	/* the answer in a buffer of its own size, so that a read past it is a sanitizer report */
	size_t size = input_size - 1;
	char *answer = malloc(size ? size : 1);
	if (!answer)
		return 0;
	memcpy(answer, input + 1, size);

	struct s3_listing_page page;
	struct error_info error;
	struct visits first = { 0, 0, 0 }, second = { 0, 0, 0 };
	error_info_clear(&error);
	int rc = s3_answer_listing(answer, size, prefix, &page, visit, &first, &error);
	if (rc != 0 && (rc != -EIO || !error.message[0]))
		abort();
	if (rc == 0 && page.truncated && !page.token[0])
		abort();
	if (strnlen(page.token, sizeof page.token) >= sizeof page.token)
		abort();
	error_info_clear(&error);
	int again = s3_answer_listing(answer, size, prefix, &page, visit, &second, &error);
	if (again != rc || second.count != first.count || second.hash != first.hash)
		abort();
	if (first.count > 0) {   /* a visitor's stop ends the reading there */
		struct visits stopping = { 0, 0, 1 };
		if (s3_answer_listing(answer, size, prefix, &page, visit, &stopping, &error) != 7 || stopping.count != 1)
			abort();
	}

	char code[64];
	memset(code, 'x', sizeof code);
	s3_answer_error_code(answer, size, code, sizeof code);
	if (strnlen(code, sizeof code) >= sizeof code)
		abort();
	char tiny[1] = { 'x' };
	s3_answer_error_code(answer, size, tiny, sizeof tiny);
	if (tiny[0] != 0)
		abort();
	free(answer);
	return 0;
}
