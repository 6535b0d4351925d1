/*
 * ulid — 128-bit sortable identifiers. See ulid.h.
 *
 * Invariants:
 *   1. Within one process, every ULID minted is strictly greater than the
 *      previous one (bytewise), even if the clock stands still or steps back:
 *      the last minted ULID is kept under a mutex and, when the clock has not
 *      moved past it, the 80-bit random part is incremented (carrying into
 *      the time part on the astronomically unlikely overflow).
 *   2. The text form is exactly 26 upper-case Crockford base32 characters;
 *      the first encodes only the 2 high bits (so it is 0..7).
 */
#include "ulid.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

static const char crockford_alphabet[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

static pthread_mutex_t ulid_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ulid ulid_last;

static void random_fill(uint8_t *out, size_t size)
{
	while (size > 0) {
		ssize_t got = getrandom(out, size, 0);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			abort(); /* no entropy source: nothing sensible to mint */
		}
		out += got;
		size -= (size_t)got;
	}
}

static uint64_t now_ms(void)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	return (uint64_t)now.tv_sec * 1000u + (uint64_t)now.tv_nsec / 1000000u;
}

static void store_time(struct ulid *id, uint64_t ms)
{
	for (int i = 0; i < 6; i++)
		id->bytes[i] = (uint8_t)(ms >> (8 * (5 - i)));
}

/* Adds one to the whole 128-bit big-endian value (random part first, carrying into time). */
static void increment(struct ulid *id)
{
	for (int i = 15; i >= 0; i--)
		if (++id->bytes[i] != 0)
			break;
}

void ulid_new(struct ulid *out)
{
	struct ulid fresh;
	uint64_t ms = now_ms() & 0xffffffffffffull;
	store_time(&fresh, ms);
	random_fill(fresh.bytes + 6, 10);

	pthread_mutex_lock(&ulid_lock);
	if (ulid_time_ms(&ulid_last) >= ms) {
		fresh = ulid_last;
		increment(&fresh);
	}
	ulid_last = fresh;
	pthread_mutex_unlock(&ulid_lock);
	*out = fresh;
}

/* Bit k of the 130-bit number whose top two bits are zero padding. */
static unsigned padded_bit(const struct ulid *id, int k)
{
	if (k < 2)
		return 0;
	k -= 2;
	return (id->bytes[k / 8] >> (7 - k % 8)) & 1u;
}

char *ulid_format(const struct ulid *id, char out[ULID_TEXT_SIZE])
{
	for (int i = 0; i < 26; i++) {
		unsigned value = 0;
		for (int b = 0; b < 5; b++)
			value = value << 1 | padded_bit(id, i * 5 + b);
		out[i] = crockford_alphabet[value];
	}
	out[26] = 0;
	return out;
}

static int crockford_value(char c)
{
	if (c >= 'a' && c <= 'z')
		c = (char)(c - 'a' + 'A');
	const char *at = c ? strchr(crockford_alphabet, c) : NULL;
	return at ? (int)(at - crockford_alphabet) : -1;
}

int ulid_parse(const char *text, struct ulid *out)
{
	struct ulid parsed;
	memset(&parsed, 0, sizeof parsed);
	if (!text || strlen(text) != 26)
		return -EINVAL;
	for (int i = 0; i < 26; i++) {
		int value = crockford_value(text[i]);
		if (value < 0 || (i == 0 && value > 7))
			return -EINVAL;
		for (int b = 0; b < 5; b++) {
			int k = i * 5 + b - 2;
			if (k < 0 || !((value >> (4 - b)) & 1))
				continue;
			parsed.bytes[k / 8] |= (uint8_t)(1u << (7 - k % 8));
		}
	}
	*out = parsed;
	return 0;
}

bool ulid_is_zero(const struct ulid *id)
{
	for (int i = 0; i < 16; i++)
		if (id->bytes[i])
			return false;
	return true;
}

int ulid_compare(const struct ulid *a, const struct ulid *b)
{
	int order = memcmp(a->bytes, b->bytes, sizeof a->bytes);
	return (order > 0) - (order < 0);
}

uint64_t ulid_time_ms(const struct ulid *id)
{
	uint64_t ms = 0;
	for (int i = 0; i < 6; i++)
		ms = ms << 8 | id->bytes[i];
	return ms;
}
