/* test_sorter — the external sort's contract (core/sorter.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "io.h"
#include "pager.h"
#include "sorter.h"

struct fixture {
	int directory;
	struct io_file manifest;
	struct pager *pager;
};

static int fixture_open(struct fixture *fixture)
{
	memset(fixture, 0, sizeof *fixture);
	fixture->directory = io_directory_open(harness_temp_directory());
	if (fixture->directory < 0)
		return fixture->directory;
	int rc = io_file_open(fixture->directory, "manifest", O_RDWR | O_CREAT | O_EXCL, IO_MANIFEST,
			      &fixture->manifest);
	if (rc < 0)
		return rc;
	uint8_t *start = calloc(1, MANIFEST_FIRST_BLOCK);
	struct file_header header = { .format_version = FILE_FORMAT_VERSION, .kind = FILE_KIND_MANIFEST };
	ulid_new(&header.store_id);
	header.created_us = 1;
	codec_file_header_encode(&header, start);
	rc = io_pwrite(&fixture->manifest, start, MANIFEST_FIRST_BLOCK, 0);
	free(start);
	if (rc < 0)
		return rc;
	return pager_init(fixture->directory, &fixture->manifest, &fixture->pager);
}

static void fixture_close(struct fixture *fixture)
{
	pager_free(fixture->pager);
	io_file_close(&fixture->manifest);
	close(fixture->directory);
}

static uint64_t random_state = 0x2545F4914F6CDD1Dull;

static uint64_t random_next(void)
{
	random_state ^= random_state << 13;
	random_state ^= random_state >> 7;
	random_state ^= random_state << 17;
	return random_state;
}

struct model_record {
	char key[24];
	size_t key_size;
	uint32_t added;          /* the order it was added in: the value */
};

static int model_compare(const void *a, const void *b)
{
	const struct model_record *left = a, *right = b;
	size_t common = left->key_size < right->key_size ? left->key_size : right->key_size;
	int order = memcmp(left->key, right->key, common);
	if (order)
		return order;
	if (left->key_size != right->key_size)
		return left->key_size < right->key_size ? -1 : 1;
	return left->added < right->added ? -1 : left->added > right->added;
}

/* Adds count records with few distinct keys (many ties), checks one cursor against the model. */
static void check_sorted(struct fixture *fixture, size_t budget, unsigned count, size_t *runs_out)
{
	struct model_record *model = calloc(count ? count : 1, sizeof *model);
	CHECK(model != NULL);
	struct sorter *sorter;
	CHECK_EQ(sorter_open(fixture->pager, budget, &sorter), 0);
	for (unsigned i = 0; i < count; i++) {
		model[i].key_size = (size_t)snprintf(model[i].key, sizeof model[i].key, "k%llu",
						     (unsigned long long)(random_next() % (count / 3 + 1)));
		model[i].added = i;
		CHECK_EQ(sorter_add(sorter, model[i].key, model[i].key_size, &i, sizeof i), 0);
	}
	CHECK_EQ(sorter_sort(sorter), 0);
	CHECK_EQ(sorter_count(sorter), count);
	qsort(model, count, sizeof *model, model_compare);
	for (int pass = 0; pass < 2; pass++) {
		struct sorter_cursor *cursor;
		CHECK_EQ(sorter_cursor_open(sorter, &cursor), 0);
		const uint8_t *key, *value;
		size_t key_size, value_size;
		unsigned seen = 0;
		while (sorter_cursor_next(cursor, &key, &key_size, &value, &value_size) == 1) {
			CHECK(seen < count);
			CHECK(key_size == model[seen].key_size && memcmp(key, model[seen].key, key_size) == 0);
			uint32_t added;
			CHECK_EQ(value_size, sizeof added);
			memcpy(&added, value, sizeof added);
			CHECK_EQ(added, model[seen].added);
			seen++;
		}
		CHECK_EQ(seen, count);
		sorter_cursor_free(cursor);
	}
	*runs_out = sorter_runs(sorter);
	sorter_free(sorter);
	free(model);
}

TEST(records_come_back_in_key_order_and_ties_in_the_order_added)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	size_t runs;
	check_sorted(&fixture, 64u << 20, 20000, &runs);
	CHECK_EQ(runs, 0);
	fixture_close(&fixture);
}

TEST(a_sort_larger_than_its_budget_spills_runs_and_merges_them_stably)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	size_t runs;
	check_sorted(&fixture, 64u << 10, 60000, &runs);
	CHECK(runs >= 10);
	fixture_close(&fixture);
}

TEST(an_empty_sorter_has_no_records)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	size_t runs;
	check_sorted(&fixture, 64u << 10, 0, &runs);
	CHECK_EQ(runs, 0);
	fixture_close(&fixture);
}

TEST(a_sorted_sorter_takes_no_more_records_and_oversized_ones_are_refused)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct sorter *sorter;
	CHECK_EQ(sorter_open(fixture.pager, 1u << 20, &sorter), 0);
	static char big[SORTER_MAX_KEY + 1];
	CHECK_EQ(sorter_add(sorter, big, sizeof big, "", 0), -E2BIG);
	CHECK_EQ(sorter_add(sorter, "a", 1, big, SORTER_MAX_VALUE + 1), -E2BIG);
	struct sorter_cursor *cursor;
	CHECK_EQ(sorter_cursor_open(sorter, &cursor), -EINVAL);
	CHECK_EQ(sorter_sort(sorter), 0);
	CHECK_EQ(sorter_add(sorter, "a", 1, "", 0), -EINVAL);
	CHECK_EQ(sorter_count(sorter), 0);
	sorter_free(sorter);
	fixture_close(&fixture);
}

int main(void)
{
	return harness_run();
}
