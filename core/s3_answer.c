/*
 * s3_answer — see s3_int.h: the XML documents an object store answers with,
 * read without the network so that they can be fuzzed
 * (tests/fuzz/fuzz_s3_answer.c).
 *
 * Invariants:
 *   1. Every read stays within [xml, end): the answers are not
 *      NUL-terminated and may be cut anywhere.
 *   2. Outputs are always NUL-terminated within their size.
 */
#include "s3_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *s3_answer_text(const char *xml, const char *end, const char *tag, char *out, size_t size)
{
	char open[40], close[40];
	snprintf(open, sizeof open, "<%s>", tag);
	snprintf(close, sizeof close, "</%s>", tag);
	if (!xml || end <= xml || size == 0)
		return NULL;
	const char *start = memmem(xml, (size_t)(end - xml), open, strlen(open));
	if (!start)
		return NULL;
	start += strlen(open);
	const char *stop = memmem(start, (size_t)(end - start), close, strlen(close));
	if (!stop)
		return NULL;
	static const struct { const char *entity; char c; } entities[] = {
		{ "&amp;", '&' }, { "&lt;", '<' }, { "&gt;", '>' }, { "&quot;", '"' }, { "&apos;", '\'' },
	};
	size_t length = 0;
	for (const char *at = start; at < stop && length + 1 < size;) {
		char c = *at++;
		for (size_t i = 0; c == '&' && i < sizeof entities / sizeof *entities; i++) {
			size_t entity_length = strlen(entities[i].entity) - 1;
			if ((size_t)(stop - at) >= entity_length && !memcmp(at, entities[i].entity + 1, entity_length)) {
				c = entities[i].c;
				at += entity_length;
				break;
			}
		}
		out[length++] = c;
	}
	out[length] = 0;
	return stop + strlen(close);
}

/* A <Size> as S3 writes it: 1 to 20 decimal digits that fit in 64 bits. */
static bool size_parse(const char *text, uint64_t *out)
{
	size_t length = strlen(text);
	if (length == 0 || length > 20 || strspn(text, "0123456789") != length)
		return false;
	uint64_t value = 0;
	for (size_t i = 0; i < length; i++) {
		unsigned digit = (unsigned)(text[i] - '0');
		if (value > (UINT64_MAX - digit) / 10)
			return false;
		value = value * 10 + digit;
	}
	*out = value;
	return true;
}

int s3_answer_listing(const char *xml, size_t size, const char *prefix, struct s3_listing_page *page,
		      int (*visit)(const char *key, uint64_t size, void *context), void *context,
		      struct error_info *error)
{
	const char *at = xml, *end = xml + size;
	char truncated[8] = "false", key[S3_ANSWER_KEY_MAX], number[24];
	size_t strip = strlen(prefix);
	page->truncated = false;
	page->token[0] = 0;
	if (size == 0)
		return 0;
	s3_answer_text(at, end, "IsTruncated", truncated, sizeof truncated);
	page->truncated = strcmp(truncated, "true") == 0;
	if (page->truncated && !s3_answer_text(at, end, "NextContinuationToken", page->token, sizeof page->token))
		return error_info_set(error, -EIO, "LIST: a truncated answer without a continuation token");
	if (page->truncated && !page->token[0])
		return error_info_set(error, -EIO, "LIST: a truncated answer with an empty continuation token");
	const char *entry;
	while ((entry = memmem(at, (size_t)(end - at), "<Contents>", 10))) {
		const char *entry_end = memmem(entry, (size_t)(end - entry), "</Contents>", 11);
		uint64_t object_size;
		if (!entry_end || !s3_answer_text(entry, entry_end, "Key", key, sizeof key) ||
		    !s3_answer_text(entry, entry_end, "Size", number, sizeof number) ||
		    !size_parse(number, &object_size) || strncmp(key, prefix, strip) != 0)
			return error_info_set(error, -EIO, "LIST: a malformed answer from the object store");
		int rc = visit(key + strip, object_size, context);
		if (rc)
			return rc;
		at = entry_end + 11;
	}
	return 0;
}

void s3_answer_error_code(const void *body, size_t size, char *code, size_t code_size)
{
	if (code_size == 0)
		return;
	code[0] = 0;
	if (size)
		s3_answer_text(body, (const char *)body + size, "Code", code, code_size);
}
