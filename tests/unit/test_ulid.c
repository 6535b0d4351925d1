/* ulid: sortable, monotonic 128-bit identifiers with a Crockford base32 text form. */
#include "harness.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ulid.h"

TEST(text_form_is_26_upper_case_crockford_characters)
{
	struct ulid id;
	char text[ULID_TEXT_SIZE];
	ulid_new(&id);
	ulid_format(&id, text);
	CHECK_EQ(strlen(text), 26);
	CHECK(strspn(text, "0123456789ABCDEFGHJKMNPQRSTVWXYZ") == 26);
	CHECK(text[0] >= '0' && text[0] <= '7');
}

TEST(format_then_parse_round_trips)
{
	for (int i = 0; i < 1000; i++) {
		struct ulid id, parsed;
		char text[ULID_TEXT_SIZE];
		ulid_new(&id);
		CHECK_EQ(ulid_parse(ulid_format(&id, text), &parsed), 0);
		CHECK(memcmp(id.bytes, parsed.bytes, 16) == 0);
	}
}

TEST(known_values_format_as_the_ulid_spec_says)
{
	struct ulid id;
	char text[ULID_TEXT_SIZE];
	memset(&id, 0, sizeof id);
	CHECK(strcmp(ulid_format(&id, text), "00000000000000000000000000") == 0);
	CHECK(ulid_is_zero(&id));
	memset(&id, 0xff, sizeof id);
	CHECK(strcmp(ulid_format(&id, text), "7ZZZZZZZZZZZZZZZZZZZZZZZZZ") == 0);
	CHECK(!ulid_is_zero(&id));
	/* The reference implementation encodes 1469918176385 ms as 01ARYZ6S41. */
	memset(&id, 0, sizeof id);
	uint64_t ms = 1469918176385ull;
	for (int i = 0; i < 6; i++)
		id.bytes[i] = (uint8_t)(ms >> (8 * (5 - i)));
	ulid_format(&id, text);
	CHECK(strncmp(text, "01ARYZ6S41", 10) == 0);
	CHECK(ulid_time_ms(&id) == ms);
}

TEST(parse_accepts_lower_case)
{
	struct ulid upper, lower;
	CHECK_EQ(ulid_parse("01ARYZ6S41TSV4RRFFQ69G5FAV", &upper), 0);
	CHECK_EQ(ulid_parse("01aryz6s41tsv4rrffq69g5fav", &lower), 0);
	CHECK_EQ(ulid_compare(&upper, &lower), 0);
}

TEST(parse_refuses_bad_text)
{
	struct ulid id;
	CHECK_EQ(ulid_parse("", &id), -EINVAL);
	CHECK_EQ(ulid_parse("01ARYZ6S41TSV4RRFFQ69G5FA", &id), -EINVAL);   /* 25 characters */
	CHECK_EQ(ulid_parse("01ARYZ6S41TSV4RRFFQ69G5FAVX", &id), -EINVAL); /* 27 characters */
	CHECK_EQ(ulid_parse("01ARYZ6S41TSV4RRFFQ69G5FAU", &id), -EINVAL);  /* U is not in the alphabet */
	CHECK_EQ(ulid_parse("01ARYZ6S41TSV4RRFFQ69G5FA/", &id), -EINVAL);
	CHECK_EQ(ulid_parse("81ARYZ6S41TSV4RRFFQ69G5FAV", &id), -EINVAL);  /* more than 128 bits */
	CHECK_EQ(ulid_parse(NULL, &id), -EINVAL);
}

TEST(time_part_is_the_current_time)
{
	struct ulid id;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	uint64_t before = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
	ulid_new(&id);
	clock_gettime(CLOCK_REALTIME, &now);
	uint64_t after = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
	CHECK(ulid_time_ms(&id) >= before);
	CHECK(ulid_time_ms(&id) <= after + 1);
}

TEST(successive_ulids_strictly_increase_in_bytes_and_text)
{
	struct ulid previous, next;
	char previous_text[ULID_TEXT_SIZE], next_text[ULID_TEXT_SIZE];
	ulid_new(&previous);
	for (int i = 0; i < 100000; i++) {
		ulid_new(&next);
		CHECK_EQ(ulid_compare(&previous, &next), -1);
		CHECK(strcmp(ulid_format(&previous, previous_text), ulid_format(&next, next_text)) < 0);
		previous = next;
	}
}

TEST(compare_orders_by_bytes)
{
	struct ulid a, b;
	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);
	CHECK_EQ(ulid_compare(&a, &b), 0);
	b.bytes[15] = 1;
	CHECK_EQ(ulid_compare(&a, &b), -1);
	CHECK_EQ(ulid_compare(&b, &a), 1);
	a.bytes[0] = 1;
	CHECK_EQ(ulid_compare(&a, &b), 1);
}

#define THREADS 4
#define PER_THREAD 20000

static struct ulid minted[THREADS][PER_THREAD];

static void *mint_many(void *argument)
{
	struct ulid *out = argument;
	for (int i = 0; i < PER_THREAD; i++)
		ulid_new(&out[i]);
	return NULL;
}

static int compare_ulids(const void *a, const void *b)
{
	return ulid_compare(a, b);
}

TEST(concurrent_minting_gives_unique_per_thread_increasing_ulids)
{
	pthread_t threads[THREADS];
	for (int t = 0; t < THREADS; t++)
		CHECK_EQ(pthread_create(&threads[t], NULL, mint_many, minted[t]), 0);
	for (int t = 0; t < THREADS; t++)
		pthread_join(threads[t], NULL);
	for (int t = 0; t < THREADS; t++)
		for (int i = 1; i < PER_THREAD; i++)
			CHECK_EQ(ulid_compare(&minted[t][i - 1], &minted[t][i]), -1);
	struct ulid *all = malloc(sizeof minted);
	CHECK(all != NULL);
	memcpy(all, minted, sizeof minted);
	qsort(all, THREADS * PER_THREAD, sizeof *all, compare_ulids);
	int duplicates = 0;
	for (int i = 1; i < THREADS * PER_THREAD; i++)
		duplicates += ulid_compare(&all[i - 1], &all[i]) == 0;
	free(all);
	CHECK_EQ(duplicates, 0);
}

int main(void)
{
	return harness_run();
}
