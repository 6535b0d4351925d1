/* test_btree — the copy-on-write B+tree's contract (core/btree.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "btree.h"
#include "buf.h"
#include "codec.h"
#include "harness.h"
#include "io.h"
#include "pager.h"

/* ---- a store-like setup: a manifest with a valid header ------------------ */

#define MANIFEST_BLOCKS_START 12288

struct fixture {
	int directory;
	struct io_file manifest;
	struct pager *pager;
};

/* Creates <temp>/manifest with a FORMAT.md §2 file header and two zeroed meta slots. */
static int fixture_open(struct fixture *fixture)
{
	memset(fixture, 0, sizeof *fixture);
	fixture->manifest.descriptor = -1;
	fixture->directory = io_directory_open(harness_temp_directory());
	if (fixture->directory < 0)
		return fixture->directory;
	int rc = io_file_open(fixture->directory, "manifest", O_RDWR | O_CREAT | O_EXCL, IO_MANIFEST,
			      &fixture->manifest);
	if (rc)
		return rc;
	uint8_t *bytes = calloc(1, MANIFEST_BLOCKS_START);
	if (!bytes)
		return -ENOMEM;
	memcpy(bytes, "GRAPHFS\0", 8);
	buf_store_u32(bytes + 8, FILE_FORMAT_VERSION);
	buf_store_u32(bytes + 12, 1); /* kind: manifest */
	for (int i = 0; i < 16; i++)
		bytes[16 + i] = (uint8_t)(0xA0 + i); /* store ULID */
	buf_store_u64(bytes + 40, 1700000000000000ull);
	buf_store_u64(bytes + 48, codec_hash(bytes, 48));
	rc = io_pwrite(&fixture->manifest, bytes, MANIFEST_BLOCKS_START, 0);
	free(bytes);
	if (rc)
		return rc;
	return pager_init(fixture->directory, &fixture->manifest, &fixture->pager);
}

static void fixture_close(struct fixture *fixture)
{
	pager_free(fixture->pager);
	io_file_close(&fixture->manifest);
	if (fixture->directory >= 0)
		close(fixture->directory);
}

static int manifest_size(struct fixture *fixture, uint64_t *size)
{
	return io_size(&fixture->manifest, size);
}

/* Flushes tree in one publish-like append; *appended gets the bytes appended. */
static int fixture_flush_counted(struct fixture *fixture, struct btree *tree,
				 struct block_address *root, uint64_t *appended)
{
	uint64_t size;
	struct pager_append *append = NULL;
	int rc = manifest_size(fixture, &size);
	if (rc == 0)
		rc = pager_append_begin(fixture->pager, size, &append);
	if (rc == 0)
		rc = btree_flush(tree, append, root);
	if (rc == 0 && appended)
		*appended = pager_append_size(append);
	if (rc == 0)
		rc = pager_append_write(append);
	pager_append_free(append);
	return rc;
}

static int fixture_flush(struct fixture *fixture, struct btree *tree, struct block_address *root)
{
	return fixture_flush_counted(fixture, tree, root, NULL);
}

/* ---- keys, values, model --------------------------------------------------- */

static uint64_t random_state = 0x9E3779B97F4A7C15ull;

static uint64_t random_next(void)
{
	random_state ^= random_state << 13;
	random_state ^= random_state >> 7;
	random_state ^= random_state << 17;
	return random_state;
}

static int model_compare(const uint8_t *a, size_t a_size, const uint8_t *b, size_t b_size)
{
	for (size_t i = 0; i < a_size && i < b_size; i++)
		if (a[i] != b[i])
			return a[i] < b[i] ? -1 : 1;
	return a_size < b_size ? -1 : a_size > b_size ? 1 : 0;
}

struct key {
	uint8_t bytes[32];
	size_t size;
};

static int key_sort(const void *a, const void *b)
{
	const struct key *left = a, *right = b;
	return model_compare(left->bytes, left->size, right->bytes, right->size);
}

/* Sorted distinct keys drawn over a small alphabet, so many are prefixes of others. */
static size_t make_keys(struct key *keys, size_t wanted)
{
	static const uint8_t alphabet[] = { 0x00, 0x01, 'a', 'b', 0xff };
	for (size_t i = 0; i < wanted; i++) {
		keys[i].size = 1 + random_next() % 24;
		for (size_t j = 0; j < keys[i].size; j++)
			keys[i].bytes[j] = alphabet[random_next() % sizeof alphabet];
	}
	qsort(keys, wanted, sizeof *keys, key_sort);
	size_t distinct = 0;
	for (size_t i = 0; i < wanted; i++)
		if (distinct == 0 || key_sort(&keys[distinct - 1], &keys[i]) != 0)
			keys[distinct++] = keys[i];
	return distinct;
}

/* The model: for key i (in sorted order) its current value, or absent. */
struct model {
	struct key *keys;
	size_t count;
	uint8_t (*values)[64];
	int *value_sizes; /* -1: absent */
	size_t present;
};

static int model_init(struct model *model, size_t wanted)
{
	model->keys = calloc(wanted, sizeof *model->keys);
	model->values = calloc(wanted, sizeof *model->values);
	model->value_sizes = calloc(wanted, sizeof *model->value_sizes);
	if (!model->keys || !model->values || !model->value_sizes)
		return -ENOMEM;
	model->count = make_keys(model->keys, wanted);
	for (size_t i = 0; i < model->count; i++)
		model->value_sizes[i] = -1;
	model->present = 0;
	return 0;
}

static void model_free(struct model *model)
{
	free(model->keys);
	free(model->values);
	free(model->value_sizes);
}

static int model_copy(struct model *copy, const struct model *model)
{
	*copy = *model;
	copy->keys = malloc(model->count * sizeof *copy->keys);
	copy->values = malloc(model->count * sizeof *copy->values);
	copy->value_sizes = malloc(model->count * sizeof *copy->value_sizes);
	if (!copy->keys || !copy->values || !copy->value_sizes)
		return -ENOMEM;
	memcpy(copy->keys, model->keys, model->count * sizeof *copy->keys);
	memcpy(copy->values, model->values, model->count * sizeof *copy->values);
	memcpy(copy->value_sizes, model->value_sizes, model->count * sizeof *copy->value_sizes);
	return 0;
}

static void model_random_value(struct model *model, size_t index)
{
	int size = (int)(random_next() % 64);
	for (int j = 0; j < size; j++)
		model->values[index][j] = (uint8_t)random_next();
	if (model->value_sizes[index] < 0)
		model->present++;
	model->value_sizes[index] = size;
}

/* Iterates tree from the beginning and compares with the model; returns 0 when equal. */
static int tree_equals_model(struct btree *tree, const struct model *model)
{
	struct btree_iterator *iterator;
	int rc = btree_iterator_open(tree, NULL, 0, &iterator);
	if (rc)
		return rc;
	size_t index = 0;
	const uint8_t *key, *value;
	size_t key_size, value_size;
	while ((rc = btree_iterator_next(iterator, &key, &key_size, &value, &value_size)) == 1) {
		while (index < model->count && model->value_sizes[index] < 0)
			index++;
		if (index == model->count ||
		    model_compare(key, key_size, model->keys[index].bytes, model->keys[index].size) ||
		    value_size != (size_t)model->value_sizes[index] ||
		    (value_size && memcmp(value, model->values[index], value_size))) {
			rc = -1;
			break;
		}
		index++;
	}
	btree_iterator_free(iterator);
	if (rc < 0)
		return rc;
	while (index < model->count && model->value_sizes[index] < 0)
		index++;
	return index == model->count ? 0 : -2;
}

static int verify(struct fixture *fixture, struct block_address root)
{
	char message[256];
	return btree_verify(fixture->pager, root, NULL, NULL, message, sizeof message);
}

static void counting_visit(struct block_address node, void *context)
{
	(void)node;
	++*(size_t *)context;
}

struct address_list {
	struct block_address addresses[4096];
	size_t count;
};

static void collecting_visit(struct block_address node, void *context)
{
	struct address_list *list = context;
	if (list->count < sizeof list->addresses / sizeof list->addresses[0])
		list->addresses[list->count++] = node;
}

/* Key i of the fixed-shape trees: "key" + 8 decimal digits. */
static size_t numbered_key(char *out, unsigned index)
{
	return (size_t)snprintf(out, 16, "key%08u", index);
}

/* Builds a tree of keys 0..count-1 with 40-byte values with the builder. */
static int build_numbered(struct fixture *fixture, unsigned count, struct block_address *root)
{
	uint64_t size;
	struct pager_append *append = NULL;
	struct btree_builder *builder = NULL;
	int rc = manifest_size(fixture, &size);
	if (rc == 0)
		rc = pager_append_begin(fixture->pager, size, &append);
	if (rc == 0)
		rc = btree_builder_open(append, &builder);
	for (unsigned i = 0; rc == 0 && i < count; i++) {
		char key[16], value[41];
		size_t key_size = numbered_key(key, i);
		snprintf(value, sizeof value, "value-%034u", i * 7u);
		rc = btree_builder_add(builder, key, key_size, value, 40);
	}
	if (builder) {
		int finish = btree_builder_finish(builder, root);
		if (rc == 0)
			rc = finish;
	}
	if (rc == 0)
		rc = pager_append_write(append);
	pager_append_free(append);
	return rc;
}

/* What a lookup of key must cost, from reading the path per docs/FORMAT.md §5. */
struct path_cost {
	uint64_t pages, bytes, rows;
};

static int expected_cost(struct pager *pager, struct block_address root, const void *key,
			 size_t key_size, struct path_cost *out)
{
	memset(out, 0, sizeof *out);
	struct buf raw;
	buf_init(&raw);
	struct block_address address = root;
	int rc = 0;
	for (;;) {
		uint64_t block_size;
		buf_reset(&raw);
		rc = pager_block_size(pager, address, &block_size);
		if (rc == 0)
			rc = pager_read(pager, address, BLOCK_NODE, &raw);
		if (rc)
			break;
		out->pages++;
		out->bytes += block_size;
		struct buf_reader reader;
		buf_reader_init(&reader, raw.data, raw.size);
		uint8_t kind = buf_get_u8(&reader);
		buf_get_u8(&reader);
		uint16_t count = buf_get_u16(&reader);
		out->rows += count;
		if (kind == 0)
			break;
		struct block_address next = codec_get_address(&reader);
		for (uint16_t i = 0; i < count; i++) {
			const uint8_t *separator;
			size_t separator_size = buf_get_str(&reader, &separator);
			struct block_address child = codec_get_address(&reader);
			if (model_compare(separator, separator_size, key, key_size) > 0)
				break;
			next = child;
		}
		address = next;
	}
	buf_free(&raw);
	return rc;
}

/* Looks key up and reports what it cost in manifest pages, bytes and rows. */
static int measured_cost(struct btree *tree, const void *key, size_t key_size,
			 struct path_cost *out)
{
	struct buf value;
	buf_init(&value);
	io_counters_reset();
	int rc = btree_get(tree, key, key_size, &value);
	struct io_counters counters;
	io_counters_get(IO_MANIFEST, &counters);
	out->pages = counters.pages;
	out->bytes = counters.bytes;
	out->rows = counters.rows_decoded;
	buf_free(&value);
	return rc;
}

static int flip_manifest_byte(struct fixture *fixture, uint64_t offset)
{
	uint8_t byte;
	int rc = io_pread(&fixture->manifest, &byte, 1, offset);
	if (rc)
		return rc;
	byte ^= 0x20;
	return io_pwrite(&fixture->manifest, &byte, 1, offset);
}

/* ---- tests ---------------------------------------------------------------- */

TEST(an_empty_tree_has_no_keys)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct btree *tree;
	CHECK_EQ(btree_open(fixture.pager, (struct block_address){ 0, 0 }, &tree), 0);
	struct buf value;
	buf_init(&value);
	CHECK_EQ(btree_get(tree, "a", 1, &value), -ENOENT);
	CHECK_EQ(btree_delete(tree, "a", 1), -ENOENT);
	struct btree_iterator *iterator;
	CHECK_EQ(btree_iterator_open(tree, NULL, 0, &iterator), 0);
	const uint8_t *key, *bytes;
	size_t key_size, bytes_size;
	CHECK_EQ(btree_iterator_next(iterator, &key, &key_size, &bytes, &bytes_size), 0);
	btree_iterator_free(iterator);
	CHECK(!btree_is_dirty(tree));
	struct block_address root = { 1, 1 };
	CHECK_EQ(fixture_flush(&fixture, tree, &root), 0);
	CHECK(block_address_is_null(root));
	CHECK_EQ(verify(&fixture, root), 0);
	btree_free(tree);
	fixture_close(&fixture);
}

TEST(a_put_value_is_read_back_before_and_after_flush)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct btree *tree;
	CHECK_EQ(btree_open(fixture.pager, (struct block_address){ 0, 0 }, &tree), 0);
	CHECK_EQ(btree_put(tree, "alpha", 5, "one", 3), 0);
	CHECK(btree_is_dirty(tree));
	struct buf value;
	buf_init(&value);
	CHECK_EQ(btree_get(tree, "alpha", 5, &value), 0);
	CHECK(value.size == 3 && memcmp(value.data, "one", 3) == 0);
	CHECK_EQ(btree_get(tree, "alph", 4, &value), -ENOENT);
	CHECK_EQ(btree_get(tree, "alphab", 6, &value), -ENOENT);
	struct block_address root;
	CHECK_EQ(fixture_flush(&fixture, tree, &root), 0);
	CHECK(!block_address_is_null(root));
	CHECK(!btree_is_dirty(tree));
	CHECK(btree_root(tree).offset == root.offset);
	btree_free(tree);

	CHECK_EQ(btree_open(fixture.pager, root, &tree), 0);
	buf_reset(&value);
	CHECK_EQ(btree_get(tree, "alpha", 5, &value), 0);
	CHECK(value.size == 3 && memcmp(value.data, "one", 3) == 0);
	buf_free(&value);
	btree_free(tree);
	fixture_close(&fixture);
}

/* The floor of k among the keys 10, 20, ..., 10 × count that survive (every seventh deleted). */
static long floor_model(unsigned count, unsigned k)
{
	for (long v = (long)(k / 10) * 10; v >= 10; v -= 10)
		if ((unsigned long)v <= 10ul * count && (v / 10) % 7 != 0)
			return v;
	return -1;
}

static void big_endian(uint64_t value, uint8_t out[8])
{
	for (int i = 0; i < 8; i++)
		out[i] = (uint8_t)(value >> (8 * (7 - i)));
}

static void check_floors(struct btree *tree, unsigned count)
{
	struct buf key, value;
	buf_init(&key);
	buf_init(&value);
	for (unsigned k = 0; k <= 10 * count + 15; k += 3) {
		uint8_t probe[8];
		big_endian(k, probe);
		buf_reset(&key);
		buf_reset(&value);
		long expected = floor_model(count, k);
		int rc = btree_get_floor(tree, probe, sizeof probe, &key, &value);
		if (expected < 0) {
			CHECK_EQ(rc, -ENOENT);
			continue;
		}
		CHECK_EQ(rc, 0);
		uint8_t want[8];
		big_endian((uint64_t)expected, want);
		CHECK(key.size == 8 && memcmp(key.data, want, 8) == 0 && value.size == 8 && memcmp(value.data, want, 8) == 0);
		if (harness_failed()) {
			fprintf(stderr, "    floor of %u: expected %ld\n", k, expected);
			break;
		}
	}
	buf_free(&key);
	buf_free(&value);
}

TEST(the_floor_of_a_key_is_the_greatest_key_at_or_below_it_across_leaves_and_deletions)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct btree *tree;
	CHECK_EQ(btree_open(fixture.pager, (struct block_address){ 0, 0 }, &tree), 0);
	const unsigned count = 3000;   /* many leaves of 8-byte keys */
	for (unsigned i = 1; i <= count; i++) {
		uint8_t bytes[8];
		big_endian(10ull * i, bytes);
		CHECK_EQ(btree_put(tree, bytes, 8, bytes, 8), 0);
	}
	for (unsigned i = 7; i <= count; i += 7) {   /* deletions leave separators without their keys */
		uint8_t bytes[8];
		big_endian(10ull * i, bytes);
		CHECK_EQ(btree_delete(tree, bytes, 8), 0);
	}
	check_floors(tree, count);   /* in memory */
	struct block_address root;
	CHECK_EQ(fixture_flush(&fixture, tree, &root), 0);
	btree_free(tree);
	CHECK_EQ(btree_open(fixture.pager, root, &tree), 0);
	check_floors(tree, count);   /* read back */
	btree_free(tree);
	fixture_close(&fixture);
}

TEST(a_put_replaces_the_previous_value)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct btree *tree;
	struct block_address root;
	CHECK_EQ(btree_open(fixture.pager, (struct block_address){ 0, 0 }, &tree), 0);
	CHECK_EQ(btree_put(tree, "k", 1, "first", 5), 0);
	CHECK_EQ(fixture_flush(&fixture, tree, &root), 0);
	CHECK_EQ(btree_put(tree, "k", 1, "second value", 12), 0);
	struct buf value;
	buf_init(&value);
	CHECK_EQ(btree_get(tree, "k", 1, &value), 0);
	CHECK(value.size == 12 && memcmp(value.data, "second value", 12) == 0);
	CHECK_EQ(fixture_flush(&fixture, tree, &root), 0);
	buf_reset(&value);
	CHECK_EQ(btree_get(tree, "k", 1, &value), 0);
	CHECK(value.size == 12 && memcmp(value.data, "second value", 12) == 0);
	buf_free(&value);
	btree_free(tree);
	fixture_close(&fixture);
}

TEST(putting_the_same_value_again_changes_nothing)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct btree *tree;
	struct block_address root, again;
	CHECK_EQ(btree_open(fixture.pager, (struct block_address){ 0, 0 }, &tree), 0);
	CHECK_EQ(btree_put(tree, "k", 1, "v", 1), 0);
	CHECK_EQ(fixture_flush(&fixture, tree, &root), 0);
	CHECK_EQ(btree_put(tree, "k", 1, "v", 1), 0);
	CHECK(!btree_is_dirty(tree));
	uint64_t appended = 1;
	CHECK_EQ(fixture_flush_counted(&fixture, tree, &again, &appended), 0);
	CHECK_EQ(appended, 0);
	CHECK_EQ(again.offset, root.offset);
	btree_free(tree);
	fixture_close(&fixture);
}

TEST(a_deleted_key_is_gone_and_deleting_everything_leaves_the_empty_tree)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct btree *tree;
	struct block_address root;
	CHECK_EQ(btree_open(fixture.pager, (struct block_address){ 0, 0 }, &tree), 0);
	char key[16];
	for (unsigned i = 0; i < 3000; i++)
		CHECK_EQ(btree_put(tree, key, numbered_key(key, i), "value", 5), 0);
	CHECK_EQ(fixture_flush(&fixture, tree, &root), 0);
	CHECK_EQ(btree_delete(tree, key, numbered_key(key, 1234)), 0);
	CHECK_EQ(btree_delete(tree, key, numbered_key(key, 1234)), -ENOENT);
	struct buf value;
	buf_init(&value);
	CHECK_EQ(btree_get(tree, key, numbered_key(key, 1234), &value), -ENOENT);
	CHECK_EQ(btree_get(tree, key, numbered_key(key, 1235), &value), 0);
	CHECK_EQ(fixture_flush(&fixture, tree, &root), 0);
	CHECK_EQ(btree_get(tree, key, numbered_key(key, 1234), &value), -ENOENT);
	CHECK_EQ(verify(&fixture, root), 0);
	for (unsigned i = 0; i < 3000; i++) {
		if (i != 1234)
			CHECK_EQ(btree_delete(tree, key, numbered_key(key, i)), 0);
		if (i % 700 == 0) {
			CHECK_EQ(fixture_flush(&fixture, tree, &root), 0);
			CHECK_EQ(verify(&fixture, root), 0);
		}
	}
	CHECK_EQ(fixture_flush(&fixture, tree, &root), 0);
	CHECK(block_address_is_null(root));
	buf_free(&value);
	btree_free(tree);
	fixture_close(&fixture);
}

TEST(random_operations_match_a_sorted_model_with_interleaved_flushes)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	/* a quarter of the keys and steps under ASan (harness_rounds): still a tree of several levels */
	struct model model;
	CHECK_EQ(model_init(&model, (size_t)harness_rounds(140000)), 0);
	CHECK(model.count > (size_t)harness_rounds(100000));
	struct btree *tree;
	struct block_address root;
	CHECK_EQ(btree_open(fixture.pager, (struct block_address){ 0, 0 }, &tree), 0);
	struct buf value;
	buf_init(&value);
	/* Mostly puts first (the tree grows), then mostly deletes (nodes merge). */
	const unsigned steps = (unsigned)harness_rounds(260000), growing = (unsigned)harness_rounds(150000);
	for (unsigned step = 0; step < steps; step++) {
		size_t index = random_next() % model.count;
		const struct key *key = &model.keys[index];
		unsigned roll = (unsigned)(random_next() % 100);
		unsigned put_percent = step < growing ? 75 : 20;
		if (roll < put_percent) {
			model_random_value(&model, index);
			CHECK_EQ(btree_put(tree, key->bytes, key->size, model.values[index],
					   (size_t)model.value_sizes[index]), 0);
		} else if (roll < 90) {
			int expected = model.value_sizes[index] < 0 ? -ENOENT : 0;
			CHECK_EQ(btree_delete(tree, key->bytes, key->size), expected);
			if (expected == 0) {
				model.value_sizes[index] = -1;
				model.present--;
			}
		} else {
			buf_reset(&value);
			int rc = btree_get(tree, key->bytes, key->size, &value);
			if (model.value_sizes[index] < 0) {
				CHECK_EQ(rc, -ENOENT);
			} else {
				CHECK_EQ(rc, 0);
				CHECK_EQ(value.size, model.value_sizes[index]);
				CHECK(value.size == 0 ||
				      memcmp(value.data, model.values[index], value.size) == 0);
			}
		}
		if (step % 20011 == 20010)
			CHECK_EQ(tree_equals_model(tree, &model), 0); /* sees the dirty state */
		if (step % 9973 == 9972) {
			CHECK_EQ(fixture_flush(&fixture, tree, &root), 0);
			CHECK_EQ(verify(&fixture, root), 0);
		}
	}
	CHECK_EQ(fixture_flush(&fixture, tree, &root), 0);
	CHECK_EQ(verify(&fixture, root), 0);
	CHECK_EQ(tree_equals_model(tree, &model), 0);
	btree_free(tree);

	/* A fresh handle on the published root reads the same. */
	CHECK_EQ(btree_open(fixture.pager, root, &tree), 0);
	CHECK_EQ(tree_equals_model(tree, &model), 0);
	btree_free(tree);
	buf_free(&value);
	model_free(&model);
	fixture_close(&fixture);
}

TEST(old_roots_keep_their_contents_after_later_modifications_and_flushes)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	enum { VERSIONS = 6 };
	struct model models[VERSIONS];
	struct block_address roots[VERSIONS];
	CHECK_EQ(model_init(&models[0], 4000), 0);
	struct btree *tree;
	CHECK_EQ(btree_open(fixture.pager, (struct block_address){ 0, 0 }, &tree), 0);
	for (int version = 0; version < VERSIONS; version++) {
		struct model *model = &models[version];
		if (version > 0)
			CHECK_EQ(model_copy(model, &models[version - 1]), 0);
		for (int change = 0; change < 1500; change++) {
			size_t index = random_next() % model->count;
			if (version > 0 && random_next() % 3 == 0) {
				if (model->value_sizes[index] >= 0) {
					CHECK_EQ(btree_delete(tree, model->keys[index].bytes,
							      model->keys[index].size), 0);
					model->value_sizes[index] = -1;
					model->present--;
				}
				continue;
			}
			model_random_value(model, index);
			CHECK_EQ(btree_put(tree, model->keys[index].bytes, model->keys[index].size,
					   model->values[index], (size_t)model->value_sizes[index]),
				 0);
		}
		CHECK_EQ(fixture_flush(&fixture, tree, &roots[version]), 0);
	}
	btree_free(tree);
	for (int version = 0; version < VERSIONS; version++) {
		CHECK_EQ(btree_open(fixture.pager, roots[version], &tree), 0);
		CHECK_EQ(tree_equals_model(tree, &models[version]), 0);
		CHECK_EQ(verify(&fixture, roots[version]), 0);
		btree_free(tree);
	}
	for (int version = 0; version < VERSIONS; version++)
		model_free(&models[version]);
	fixture_close(&fixture);
}

/* Checks that iterating from start yields exactly keys first..count-1 ("key%08u"). */
static int iterate_from(struct btree *tree, const char *start, size_t start_size, unsigned first,
			unsigned count)
{
	struct btree_iterator *iterator;
	int rc = btree_iterator_open(tree, start, start_size, &iterator);
	if (rc)
		return rc;
	const uint8_t *key, *value;
	size_t key_size, value_size;
	unsigned expected = first;
	while ((rc = btree_iterator_next(iterator, &key, &key_size, &value, &value_size)) == 1) {
		char wanted[16];
		size_t wanted_size = numbered_key(wanted, expected);
		if (expected >= count || key_size != wanted_size || memcmp(key, wanted, key_size)) {
			rc = -1;
			break;
		}
		expected++;
	}
	btree_iterator_free(iterator);
	if (rc < 0)
		return rc;
	return expected == count ? 0 : -2;
}

TEST(an_iterator_starts_at_the_first_key_at_or_after_start)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct btree *tree;
	struct block_address root;
	CHECK_EQ(btree_open(fixture.pager, (struct block_address){ 0, 0 }, &tree), 0);
	char key[16];
	for (unsigned i = 0; i < 5000; i++)
		CHECK_EQ(btree_put(tree, key, numbered_key(key, i), "v", 1), 0);
	for (int flushed = 0; flushed < 2; flushed++) {
		CHECK_EQ(iterate_from(tree, NULL, 0, 0, 5000), 0);
		CHECK_EQ(iterate_from(tree, "", 0, 0, 5000), 0);
		CHECK_EQ(iterate_from(tree, "key00002500", 11, 2500, 5000), 0);
		CHECK_EQ(iterate_from(tree, "key00002500!", 12, 2501, 5000), 0);
		CHECK_EQ(iterate_from(tree, "key0000250", 10, 2500, 5000), 0);
		CHECK_EQ(iterate_from(tree, "key00004999", 11, 4999, 5000), 0);
		CHECK_EQ(iterate_from(tree, "kez", 3, 5000, 5000), 0);
		CHECK_EQ(fixture_flush(&fixture, tree, &root), 0);
	}
	btree_free(tree);
	fixture_close(&fixture);
}

TEST(the_builder_makes_a_valid_tree_with_the_same_contents_as_inserts)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct model model;
	CHECK_EQ(model_init(&model, 30000), 0);
	for (size_t i = 0; i < model.count; i++)
		if (random_next() % 4)
			model_random_value(&model, i);
	struct btree *tree;
	struct block_address inserted, built;
	CHECK_EQ(btree_open(fixture.pager, (struct block_address){ 0, 0 }, &tree), 0);
	for (size_t i = 0; i < model.count; i++)
		if (model.value_sizes[i] >= 0)
			CHECK_EQ(btree_put(tree, model.keys[i].bytes, model.keys[i].size,
					   model.values[i], (size_t)model.value_sizes[i]), 0);
	CHECK_EQ(fixture_flush(&fixture, tree, &inserted), 0);
	btree_free(tree);

	uint64_t size;
	struct pager_append *append;
	struct btree_builder *builder;
	CHECK_EQ(manifest_size(&fixture, &size), 0);
	CHECK_EQ(pager_append_begin(fixture.pager, size, &append), 0);
	CHECK_EQ(btree_builder_open(append, &builder), 0);
	for (size_t i = 0; i < model.count; i++)
		if (model.value_sizes[i] >= 0)
			CHECK_EQ(btree_builder_add(builder, model.keys[i].bytes, model.keys[i].size,
						   model.values[i], (size_t)model.value_sizes[i]), 0);
	CHECK_EQ(btree_builder_finish(builder, &built), 0);
	CHECK_EQ(pager_append_write(append), 0);
	pager_append_free(append);

	CHECK_EQ(verify(&fixture, built), 0);
	CHECK_EQ(btree_open(fixture.pager, built, &tree), 0);
	CHECK_EQ(tree_equals_model(tree, &model), 0);
	btree_free(tree);
	CHECK_EQ(btree_open(fixture.pager, inserted, &tree), 0);
	CHECK_EQ(tree_equals_model(tree, &model), 0);
	btree_free(tree);
	model_free(&model);
	fixture_close(&fixture);
}

TEST(the_builder_trees_of_every_small_size_are_valid)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	/* Sizes around leaf and internal node boundaries (about 70 entries per leaf). */
	static const unsigned sizes[] = { 0, 1, 2, 69, 70, 71, 72, 140, 141, 142, 143, 5000, 5001,
					  5002, 5003, 5004, 5005, 5006, 5007, 5008, 5009 };
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
		struct block_address root;
		CHECK_EQ(build_numbered(&fixture, sizes[s], &root), 0);
		CHECK(block_address_is_null(root) == (sizes[s] == 0));
		CHECK_EQ(verify(&fixture, root), 0);
		struct btree *tree;
		CHECK_EQ(btree_open(fixture.pager, root, &tree), 0);
		CHECK_EQ(iterate_from(tree, NULL, 0, 0, sizes[s]), 0);
		btree_free(tree);
	}
	fixture_close(&fixture);
}

TEST(the_builder_refuses_keys_out_of_order)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	uint64_t size;
	struct pager_append *append;
	struct btree_builder *builder;
	CHECK_EQ(manifest_size(&fixture, &size), 0);
	CHECK_EQ(pager_append_begin(fixture.pager, size, &append), 0);
	CHECK_EQ(btree_builder_open(append, &builder), 0);
	CHECK_EQ(btree_builder_add(builder, "b", 1, "", 0), 0);
	CHECK_EQ(btree_builder_add(builder, "b", 1, "", 0), -EINVAL);
	CHECK_EQ(btree_builder_add(builder, "a", 1, "", 0), -EINVAL);
	CHECK_EQ(btree_builder_add(builder, "ba", 2, "", 0), 0);
	btree_builder_free(builder);
	pager_append_free(append);
	fixture_close(&fixture);
}

TEST(oversize_keys_and_values_are_refused_and_change_nothing)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	static uint8_t big[BTREE_MAX_KEY + BTREE_MAX_VALUE + 1];
	memset(big, 'x', sizeof big);
	struct btree *tree;
	CHECK_EQ(btree_open(fixture.pager, (struct block_address){ 0, 0 }, &tree), 0);
	CHECK_EQ(btree_put(tree, big, BTREE_MAX_KEY + 1, "v", 1), -ENAMETOOLONG);
	CHECK_EQ(btree_put(tree, "k", 1, big, BTREE_MAX_VALUE + 1), -E2BIG);
	CHECK(!btree_is_dirty(tree));
	CHECK_EQ(btree_put(tree, big, BTREE_MAX_KEY, big, BTREE_MAX_VALUE), 0);

	uint64_t size;
	struct pager_append *append;
	struct btree_builder *builder;
	CHECK_EQ(manifest_size(&fixture, &size), 0);
	CHECK_EQ(pager_append_begin(fixture.pager, size, &append), 0);
	CHECK_EQ(btree_builder_open(append, &builder), 0);
	CHECK_EQ(btree_builder_add(builder, big, BTREE_MAX_KEY + 1, "v", 1), -ENAMETOOLONG);
	CHECK_EQ(btree_builder_add(builder, "k", 1, big, BTREE_MAX_VALUE + 1), -E2BIG);
	btree_builder_free(builder);
	pager_append_free(append);
	btree_free(tree);
	fixture_close(&fixture);
}

TEST(entries_of_the_maximum_size_make_valid_trees)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	static uint8_t key[BTREE_MAX_KEY], value[BTREE_MAX_VALUE];
	struct btree *tree;
	struct block_address root;
	CHECK_EQ(btree_open(fixture.pager, (struct block_address){ 0, 0 }, &tree), 0);
	for (unsigned i = 0; i < 300; i++) {
		/* Maximal keys that differ only at the end make maximal separators. */
		unsigned n = (i * 7919u) % 300;
		memset(key, 'k', sizeof key);
		key[sizeof key - 2] = (uint8_t)(n / 256);
		key[sizeof key - 1] = (uint8_t)(n % 256);
		memset(value, (int)n, sizeof value);
		CHECK_EQ(btree_put(tree, key, sizeof key, value, sizeof value), 0);
	}
	CHECK_EQ(fixture_flush(&fixture, tree, &root), 0);
	CHECK_EQ(verify(&fixture, root), 0);
	for (unsigned n = 0; n < 300; n += 2) {
		key[sizeof key - 2] = (uint8_t)(n / 256);
		key[sizeof key - 1] = (uint8_t)(n % 256);
		CHECK_EQ(btree_delete(tree, key, sizeof key), 0);
	}
	CHECK_EQ(fixture_flush(&fixture, tree, &root), 0);
	CHECK_EQ(verify(&fixture, root), 0);
	struct buf found;
	buf_init(&found);
	key[sizeof key - 2] = 0;
	key[sizeof key - 1] = 201;
	CHECK_EQ(btree_get(tree, key, sizeof key, &found), 0);
	CHECK(found.size == sizeof value && found.data[0] == 201);
	buf_free(&found);
	btree_free(tree);
	fixture_close(&fixture);
}

TEST(a_lookup_reads_exactly_one_page_per_level)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct block_address root;
	CHECK_EQ(build_numbered(&fixture, 40000, &root), 0);
	struct btree *tree;
	CHECK_EQ(btree_open(fixture.pager, root, &tree), 0);
	for (unsigned i = 0; i < 40000; i += 3331) {
		char key[16];
		size_t key_size = numbered_key(key, i);
		struct path_cost expected, measured;
		CHECK_EQ(expected_cost(fixture.pager, root, key, key_size, &expected), 0);
		CHECK(expected.pages >= 3); /* a tree of this size has three levels or more */
		CHECK_EQ(measured_cost(tree, key, key_size, &measured), 0);
		CHECK_EQ(measured.pages, expected.pages);
		CHECK_EQ(measured.bytes, expected.bytes);
		CHECK_EQ(measured.rows, expected.rows);
	}
	/* A missing key costs the same walk. */
	struct path_cost expected, measured;
	CHECK_EQ(expected_cost(fixture.pager, root, "key00000100x", 12, &expected), 0);
	CHECK_EQ(measured_cost(tree, "key00000100x", 12, &measured), -ENOENT);
	CHECK_EQ(measured.pages, expected.pages);
	CHECK_EQ(measured.rows, expected.rows);
	btree_free(tree);
	fixture_close(&fixture);
}

/* Inserts keys 0..count-1 one by one, flushing every 997, from the empty tree. */
static int insert_numbered(struct fixture *fixture, unsigned count, struct block_address *root)
{
	struct btree *tree;
	int rc = btree_open(fixture->pager, (struct block_address){ 0, 0 }, &tree);
	for (unsigned i = 0; rc == 0 && i < count; i++) {
		char key[16];
		unsigned n = (i * 7919u) % count; /* a fixed, scattered order */
		rc = btree_put(tree, key, numbered_key(key, n), "some value", 10);
		if (rc == 0 && i % 997 == 996)
			rc = fixture_flush(fixture, tree, root);
	}
	if (rc == 0)
		rc = fixture_flush(fixture, tree, root);
	btree_free(tree);
	return rc;
}

TEST(a_lookup_costs_the_same_regardless_of_how_many_versions_were_flushed_before)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	enum { KEYS = 20000, SAMPLES = 12 };
	struct block_address built_first, inserted_first, built_later, inserted_later;
	CHECK_EQ(build_numbered(&fixture, KEYS, &built_first), 0);
	CHECK_EQ(insert_numbered(&fixture, KEYS, &inserted_first), 0);

	struct path_cost built_costs[SAMPLES], inserted_costs[SAMPLES];
	struct btree *built, *inserted;
	CHECK_EQ(btree_open(fixture.pager, built_first, &built), 0);
	CHECK_EQ(btree_open(fixture.pager, inserted_first, &inserted), 0);
	for (unsigned s = 0; s < SAMPLES; s++) {
		char key[16];
		size_t key_size = numbered_key(key, s * (KEYS / SAMPLES));
		CHECK_EQ(measured_cost(built, key, key_size, &built_costs[s]), 0);
		CHECK_EQ(measured_cost(inserted, key, key_size, &inserted_costs[s]), 0);
	}
	btree_free(built);
	btree_free(inserted);

	/* Many later versions of both trees. */
	struct block_address root = inserted_first;
	struct btree *tree;
	CHECK_EQ(btree_open(fixture.pager, root, &tree), 0);
	for (unsigned version = 0; version < 60; version++) {
		for (unsigned i = 0; i < 50; i++) {
			char key[16];
			unsigned n = (unsigned)(random_next() % KEYS);
			if (random_next() % 2)
				CHECK_EQ(btree_put(tree, key, numbered_key(key, n), "changed", 7), 0);
			else
				btree_delete(tree, key, numbered_key(key, n));
		}
		CHECK_EQ(fixture_flush(&fixture, tree, &root), 0);
	}
	btree_free(tree);

	/* The old roots, and the same trees made again after all that history. */
	CHECK_EQ(build_numbered(&fixture, KEYS, &built_later), 0);
	CHECK_EQ(insert_numbered(&fixture, KEYS, &inserted_later), 0);
	CHECK(built_later.offset > built_first.offset && inserted_later.offset > root.offset);
	struct block_address built_roots[2] = { built_first, built_later };
	struct block_address inserted_roots[2] = { inserted_first, inserted_later };
	for (int which = 0; which < 2; which++) {
		CHECK_EQ(btree_open(fixture.pager, built_roots[which], &built), 0);
		CHECK_EQ(btree_open(fixture.pager, inserted_roots[which], &inserted), 0);
		for (unsigned s = 0; s < SAMPLES; s++) {
			char key[16];
			size_t key_size = numbered_key(key, s * (KEYS / SAMPLES));
			struct path_cost cost;
			CHECK_EQ(measured_cost(built, key, key_size, &cost), 0);
			CHECK_EQ(cost.pages, built_costs[s].pages);
			CHECK_EQ(cost.bytes, built_costs[s].bytes);
			CHECK_EQ(cost.rows, built_costs[s].rows);
			CHECK_EQ(measured_cost(inserted, key, key_size, &cost), 0);
			CHECK_EQ(cost.pages, inserted_costs[s].pages);
			CHECK_EQ(cost.bytes, inserted_costs[s].bytes);
			CHECK_EQ(cost.rows, inserted_costs[s].rows);
		}
		btree_free(built);
		btree_free(inserted);
	}
	fixture_close(&fixture);
}

TEST(a_single_put_rewrites_only_the_path_to_its_leaf)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct block_address old_root, new_root;
	CHECK_EQ(build_numbered(&fixture, 20000, &old_root), 0);
	size_t old_nodes = 0;
	char message[256];
	CHECK_EQ(btree_verify(fixture.pager, old_root, counting_visit, &old_nodes, message,
			      sizeof message), 0);
	uint64_t base;
	CHECK_EQ(manifest_size(&fixture, &base), 0);

	struct btree *tree;
	CHECK_EQ(btree_open(fixture.pager, old_root, &tree), 0);
	char key[16];
	size_t key_size = numbered_key(key, 12345);
	CHECK_EQ(btree_put(tree, key, key_size, "new", 3), 0);
	CHECK_EQ(fixture_flush(&fixture, tree, &new_root), 0);
	btree_free(tree);

	struct path_cost path;
	CHECK_EQ(expected_cost(fixture.pager, new_root, key, key_size, &path), 0);
	static struct address_list list;
	list.count = 0;
	CHECK_EQ(btree_verify(fixture.pager, new_root, collecting_visit, &list, message,
			      sizeof message), 0);
	CHECK_EQ(list.count, old_nodes);
	size_t rewritten = 0;
	for (size_t i = 0; i < list.count; i++)
		rewritten += list.addresses[i].offset >= base;
	CHECK_EQ(rewritten, path.pages);
	fixture_close(&fixture);
}

TEST(flushing_an_unmodified_tree_appends_nothing_and_keeps_the_root)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct block_address root, again;
	CHECK_EQ(build_numbered(&fixture, 1000, &root), 0);
	struct btree *tree;
	CHECK_EQ(btree_open(fixture.pager, root, &tree), 0);
	struct buf value;
	buf_init(&value);
	CHECK_EQ(btree_get(tree, "key00000500", 11, &value), 0);
	CHECK_EQ(btree_delete(tree, "missing", 7), -ENOENT);
	CHECK(!btree_is_dirty(tree));
	uint64_t appended = 1;
	CHECK_EQ(fixture_flush_counted(&fixture, tree, &again, &appended), 0);
	CHECK_EQ(appended, 0);
	CHECK(again.segment == root.segment && again.offset == root.offset);
	buf_free(&value);
	btree_free(tree);
	fixture_close(&fixture);
}

TEST(verify_visits_every_node_once)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	uint64_t base, end;
	CHECK_EQ(manifest_size(&fixture, &base), 0);
	struct block_address root;
	CHECK_EQ(build_numbered(&fixture, 10000, &root), 0);
	CHECK_EQ(manifest_size(&fixture, &end), 0);
	static struct address_list list;
	list.count = 0;
	char message[256];
	CHECK_EQ(btree_verify(fixture.pager, root, collecting_visit, &list, message, sizeof message),
		 0);
	/* The builder appended exactly the tree's nodes: their sizes add up to the tail. */
	uint64_t total = 0;
	for (size_t i = 0; i < list.count; i++) {
		uint64_t size;
		CHECK_EQ(pager_block_size(fixture.pager, list.addresses[i], &size), 0);
		total += size;
		for (size_t j = 0; j < i; j++)
			CHECK(list.addresses[j].offset != list.addresses[i].offset);
	}
	CHECK_EQ(total, end - base);
	fixture_close(&fixture);
}

TEST(verify_and_lookups_report_a_flipped_byte_in_a_node_as_eio)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct block_address root;
	CHECK_EQ(build_numbered(&fixture, 5000, &root), 0);
	static struct address_list list;
	list.count = 0;
	char message[256];
	CHECK_EQ(btree_verify(fixture.pager, root, collecting_visit, &list, message, sizeof message),
		 0);
	/* The last node visited is the rightmost leaf, holding the largest key. */
	struct block_address leaf = list.addresses[list.count - 1];
	CHECK_EQ(flip_manifest_byte(&fixture, leaf.offset + BLOCK_HEADER_SIZE + 40), 0);
	message[0] = 0;
	CHECK_EQ(btree_verify(fixture.pager, root, NULL, NULL, message, sizeof message), -EIO);
	CHECK(strstr(message, "B+tree node") != NULL);

	struct btree *tree;
	CHECK_EQ(btree_open(fixture.pager, root, &tree), 0);
	struct buf value;
	buf_init(&value);
	CHECK_EQ(btree_get(tree, "key00004999", 11, &value), -EIO);
	CHECK_EQ(btree_get(tree, "key00000000", 11, &value), 0);
	/* A put that cannot read its leaf changes nothing. */
	CHECK_EQ(btree_put(tree, "key00004999", 11, "x", 1), -EIO);
	CHECK(!btree_is_dirty(tree));
	buf_free(&value);
	btree_free(tree);
	fixture_close(&fixture);
}

/* Appends a raw node payload as a BLOCK_NODE block (valid checksum) and returns its address. */
static int append_raw_node(struct fixture *fixture, const struct buf *payload,
			   struct block_address *address)
{
	uint64_t size;
	struct pager_append *append = NULL;
	int rc = manifest_size(fixture, &size);
	if (rc == 0)
		rc = pager_append_begin(fixture->pager, size, &append);
	if (rc == 0)
		rc = pager_append_block(append, BLOCK_NODE, CODEC_NONE, payload->data, payload->size,
					address);
	if (rc == 0)
		rc = pager_append_write(append);
	pager_append_free(append);
	return rc;
}

TEST(a_well_checksummed_node_with_keys_out_of_order_is_refused)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct buf payload;
	buf_init(&payload);
	buf_put_u8(&payload, 0);
	buf_put_u8(&payload, 0);
	buf_put_u16(&payload, 2);
	buf_put_str(&payload, "b", 1);
	buf_put_str(&payload, "1", 1);
	buf_put_str(&payload, "a", 1);
	buf_put_str(&payload, "2", 1);
	struct block_address root;
	CHECK_EQ(append_raw_node(&fixture, &payload, &root), 0);
	char message[256];
	CHECK_EQ(btree_verify(fixture.pager, root, NULL, NULL, message, sizeof message), -EIO);
	struct btree *tree;
	CHECK_EQ(btree_open(fixture.pager, root, &tree), 0);
	struct buf value;
	buf_init(&value);
	CHECK_EQ(btree_get(tree, "a", 1, &value), -EIO);
	buf_free(&value);
	buf_free(&payload);
	btree_free(tree);
	fixture_close(&fixture);
}

TEST(an_internal_node_pointing_forward_in_the_file_is_refused)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct buf payload;
	buf_init(&payload);
	buf_put_u8(&payload, 1);
	buf_put_u8(&payload, 0);
	buf_put_u16(&payload, 1);
	/* Children "after" the node itself (a cycle or garbage): never written by a flush. */
	codec_put_address(&payload, (struct block_address){ 0, 1u << 30 });
	buf_put_str(&payload, "m", 1);
	codec_put_address(&payload, (struct block_address){ 0, (1u << 30) + 100 });
	struct block_address root;
	CHECK_EQ(append_raw_node(&fixture, &payload, &root), 0);
	char message[256];
	CHECK_EQ(btree_verify(fixture.pager, root, NULL, NULL, message, sizeof message), -EIO);
	buf_free(&payload);
	fixture_close(&fixture);
}

/* Builds raw node payloads (docs/FORMAT.md §5) for hand-made, damaged trees. */
static void raw_leaf(struct buf *out, const char *const *keys, int count, size_t value_size)
{
	static const uint8_t filler[BTREE_MAX_VALUE];
	buf_reset(out);
	buf_put_u8(out, 0);
	buf_put_u8(out, 0);
	buf_put_u16(out, (uint16_t)count);
	for (int i = 0; i < count; i++) {
		buf_put_str(out, keys[i], strlen(keys[i]));
		buf_put_u16(out, (uint16_t)value_size);
		buf_append(out, filler, value_size);
	}
}

static void raw_internal(struct buf *out, struct block_address left, const char *key,
			 struct block_address right)
{
	buf_reset(out);
	buf_put_u8(out, 1);
	buf_put_u8(out, 0);
	buf_put_u16(out, 1);
	codec_put_address(out, left);
	buf_put_str(out, key, strlen(key));
	codec_put_address(out, right);
}

TEST(verify_refuses_a_key_outside_its_separator_bounds)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct buf payload;
	buf_init(&payload);
	struct block_address left, right, root;
	raw_leaf(&payload, (const char *const[]){ "a", "m" }, 2, 1);
	CHECK_EQ(append_raw_node(&fixture, &payload, &left), 0);
	raw_leaf(&payload, (const char *const[]){ "n" }, 1, 1);
	CHECK_EQ(append_raw_node(&fixture, &payload, &right), 0);
	raw_internal(&payload, left, "f", right); /* "m" belongs right of "f" */
	CHECK_EQ(append_raw_node(&fixture, &payload, &root), 0);
	char message[256];
	CHECK_EQ(btree_verify(fixture.pager, root, NULL, NULL, message, sizeof message), -EIO);
	CHECK(strstr(message, "separator") != NULL);
	raw_internal(&payload, left, "m!", right); /* the same leaves, correctly separated */
	CHECK_EQ(append_raw_node(&fixture, &payload, &root), 0);
	CHECK_EQ(btree_verify(fixture.pager, root, NULL, NULL, message, sizeof message), 0);
	buf_free(&payload);
	fixture_close(&fixture);
}

TEST(verify_refuses_leaves_at_different_depths)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct buf payload;
	buf_init(&payload);
	struct block_address a, b, inner, z, root;
	raw_leaf(&payload, (const char *const[]){ "a" }, 1, 1);
	CHECK_EQ(append_raw_node(&fixture, &payload, &a), 0);
	raw_leaf(&payload, (const char *const[]){ "b" }, 1, 1);
	CHECK_EQ(append_raw_node(&fixture, &payload, &b), 0);
	raw_internal(&payload, a, "b", b);
	CHECK_EQ(append_raw_node(&fixture, &payload, &inner), 0);
	raw_leaf(&payload, (const char *const[]){ "z" }, 1, 1);
	CHECK_EQ(append_raw_node(&fixture, &payload, &z), 0);
	raw_internal(&payload, inner, "m", z);
	CHECK_EQ(append_raw_node(&fixture, &payload, &root), 0);
	char message[256];
	CHECK_EQ(btree_verify(fixture.pager, root, NULL, NULL, message, sizeof message), -EIO);
	CHECK(strstr(message, "depth") != NULL);
	buf_free(&payload);
	fixture_close(&fixture);
}

TEST(verify_refuses_a_node_over_the_size_target_with_more_than_one_entry)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct buf payload;
	buf_init(&payload);
	struct block_address root;
	char message[256];
	raw_leaf(&payload, (const char *const[]){ "a" }, 1, BTREE_MAX_VALUE);
	CHECK_EQ(append_raw_node(&fixture, &payload, &root), 0);
	CHECK_EQ(btree_verify(fixture.pager, root, NULL, NULL, message, sizeof message), 0);
	raw_leaf(&payload, (const char *const[]){ "a", "b", "c", "d", "e" }, 5, 1000);
	CHECK(payload.size > BTREE_NODE_TARGET);
	CHECK_EQ(append_raw_node(&fixture, &payload, &root), 0);
	CHECK_EQ(btree_verify(fixture.pager, root, NULL, NULL, message, sizeof message), -EIO);
	CHECK(strstr(message, "size target") != NULL);
	buf_free(&payload);
	fixture_close(&fixture);
}

struct reader_job {
	struct pager *pager;
	struct block_address root;
	unsigned count;
	int result; /* 0 when every lookup and the iteration matched */
};

static void *reader_thread(void *argument)
{
	struct reader_job *job = argument;
	struct btree *tree;
	job->result = btree_open(job->pager, job->root, &tree);
	if (job->result)
		return NULL;
	struct buf value;
	buf_init(&value);
	for (unsigned round = 0; round < (HARNESS_SANITIZED ? 1u : 3u) && job->result == 0; round++) {   /* 1 under ASan */
		for (unsigned i = 0; i < job->count && job->result == 0; i++) {
			char key[16], expected[41];
			snprintf(expected, sizeof expected, "value-%034u", i * 7u);
			buf_reset(&value);
			job->result = btree_get(tree, key, numbered_key(key, i), &value);
			if (job->result == 0 && (value.size != 40 || memcmp(value.data, expected, 40)))
				job->result = -1;
		}
		if (job->result == 0)
			job->result = iterate_from(tree, NULL, 0, 0, job->count);
	}
	buf_free(&value);
	btree_free(tree);
	return NULL;
}

TEST(many_handles_read_one_published_root_concurrently)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	enum { THREADS = 4, KEYS = 8000 };
	struct block_address root;
	CHECK_EQ(build_numbered(&fixture, KEYS, &root), 0);
	pthread_t threads[THREADS];
	struct reader_job jobs[THREADS];
	for (int t = 0; t < THREADS; t++) {
		jobs[t] = (struct reader_job){ fixture.pager, root, KEYS, -1 };
		CHECK_EQ(pthread_create(&threads[t], NULL, reader_thread, &jobs[t]), 0);
	}
	for (int t = 0; t < THREADS; t++)
		CHECK_EQ(pthread_join(threads[t], NULL), 0);
	for (int t = 0; t < THREADS; t++)
		CHECK_EQ(jobs[t].result, 0);
	fixture_close(&fixture);
}

TEST(versions_flushed_into_one_unwritten_append_are_modified_again_through_it)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	uint64_t size;
	struct pager_append *append;
	CHECK_EQ(manifest_size(&fixture, &size), 0);
	CHECK_EQ(pager_append_begin(fixture.pager, size, &append), 0);
	struct btree *tree;
	CHECK_EQ(btree_open(fixture.pager, (struct block_address){ 0, 0 }, &tree), 0);
	btree_attach_append(tree, append);
	struct block_address roots[3];
	char key[16];
	for (unsigned version = 0; version < 3; version++) {
		for (unsigned i = 0; i < 2000; i++) {
			char value[16];
			size_t value_size = (size_t)snprintf(value, sizeof value, "v%u", version);
			CHECK_EQ(btree_put(tree, key, numbered_key(key, i * 3 + version), value,
					   value_size), 0);
		}
		CHECK_EQ(btree_flush(tree, append, &roots[version]), 0);
	}
	struct buf value;
	buf_init(&value);
	CHECK_EQ(btree_get(tree, key, numbered_key(key, 4), &value), 0); /* from the buffer */
	CHECK(value.size == 2 && memcmp(value.data, "v1", 2) == 0);
	btree_attach_append(tree, NULL);
	CHECK_EQ(pager_append_write(append), 0);
	pager_append_free(append);
	btree_free(tree);
	for (unsigned version = 0; version < 3; version++) {
		CHECK_EQ(verify(&fixture, roots[version]), 0);
		CHECK_EQ(btree_open(fixture.pager, roots[version], &tree), 0);
		size_t entries = 0;
		struct btree_iterator *iterator;
		CHECK_EQ(btree_iterator_open(tree, NULL, 0, &iterator), 0);
		const uint8_t *k, *v;
		size_t k_size, v_size;
		while (btree_iterator_next(iterator, &k, &k_size, &v, &v_size) == 1)
			entries++;
		btree_iterator_free(iterator);
		CHECK_EQ(entries, 2000 * (version + 1));
		btree_free(tree);
	}
	buf_free(&value);
	fixture_close(&fixture);
}

/* ---- packed layout ---------------------------------------------------------- */

/* Builds numbered keys 0..count-1 (16-byte values, like table key entries) in layout; *bytes: appended. */
static int build_numbered_layout(struct fixture *fixture, unsigned count, enum btree_layout layout,
				 struct block_address *root, uint64_t *bytes)
{
	uint64_t size;
	struct pager_append *append = NULL;
	struct btree_builder *builder = NULL;
	int rc = manifest_size(fixture, &size);
	if (rc == 0)
		rc = pager_append_begin(fixture->pager, size, &append);
	if (rc == 0)
		rc = btree_builder_open_layout(append, layout, &builder);
	for (unsigned i = 0; rc == 0 && i < count; i++) {
		char key[16];
		uint8_t value[16];
		size_t key_size = numbered_key(key, i);
		buf_store_u64(value, i / 5000);
		buf_store_u32(value + 8, i % 5000);
		buf_store_u32(value + 12, 150 + (unsigned)(random_next() % 90));
		rc = btree_builder_add(builder, key, key_size, value, sizeof value);
	}
	if (builder) {
		int finish = btree_builder_finish(builder, root);
		if (rc == 0)
			rc = finish;
	}
	if (rc == 0) {
		*bytes = pager_append_size(append);
		rc = pager_append_write(append);
	}
	pager_append_free(append);
	return rc;
}

/* The layout byte and codec of the node block at address. */
static int node_layout_and_codec(struct fixture *fixture, struct block_address address, int *layout,
				 int *codec)
{
	uint8_t header[BLOCK_HEADER_SIZE];
	int rc = io_pread(&fixture->manifest, header, sizeof header, address.offset);
	if (rc)
		return rc;
	*codec = header[5];
	struct buf raw;
	buf_init(&raw);
	rc = pager_read(fixture->pager, address, BLOCK_NODE, &raw);
	if (rc == 0)
		*layout = raw.data[1];
	buf_free(&raw);
	return rc;
}

TEST(random_operations_on_a_packed_tree_match_a_sorted_model)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct model model;
	CHECK_EQ(model_init(&model, 40000), 0);
	struct btree *tree;
	struct block_address root;
	CHECK_EQ(btree_open_layout(fixture.pager, (struct block_address){ 0, 0 }, BTREE_PACKED, &tree), 0);
	for (unsigned step = 0; step < 90000; step++) {
		size_t index = random_next() % model.count;
		const struct key *key = &model.keys[index];
		unsigned put_percent = step < 50000 ? 80 : 20;
		if ((unsigned)(random_next() % 100) < put_percent) {
			model_random_value(&model, index);
			CHECK_EQ(btree_put(tree, key->bytes, key->size, model.values[index],
					   (size_t)model.value_sizes[index]), 0);
		} else {
			int expected = model.value_sizes[index] < 0 ? -ENOENT : 0;
			CHECK_EQ(btree_delete(tree, key->bytes, key->size), expected);
			if (expected == 0) {
				model.value_sizes[index] = -1;
				model.present--;
			}
		}
		if (step % 9973 == 9972) {
			CHECK_EQ(fixture_flush(&fixture, tree, &root), 0);
			CHECK_EQ(verify(&fixture, root), 0);
			CHECK_EQ(tree_equals_model(tree, &model), 0);
		}
	}
	CHECK_EQ(fixture_flush(&fixture, tree, &root), 0);
	CHECK_EQ(verify(&fixture, root), 0);
	btree_free(tree);
	int layout = -1, codec = -1;
	CHECK_EQ(node_layout_and_codec(&fixture, root, &layout, &codec), 0);
	CHECK_EQ(layout, BTREE_PACKED);
	/* A plain handle on a packed tree reads it, and the nodes it writes stay packed. */
	CHECK_EQ(btree_open(fixture.pager, root, &tree), 0);
	CHECK_EQ(tree_equals_model(tree, &model), 0);
	CHECK_EQ(btree_put(tree, model.keys[0].bytes, model.keys[0].size, "x", 1), 0);
	CHECK_EQ(fixture_flush(&fixture, tree, &root), 0);
	CHECK_EQ(verify(&fixture, root), 0);
	CHECK_EQ(node_layout_and_codec(&fixture, root, &layout, &codec), 0);
	CHECK_EQ(layout, BTREE_PACKED);
	btree_free(tree);
	model_free(&model);
	fixture_close(&fixture);
}

TEST(packed_trees_of_every_small_size_are_valid_and_iterate_in_order)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	static const unsigned sizes[] = { 0, 1, 2, 3, 1100, 1200, 1300, 2500, 60000 };
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
		struct block_address root;
		uint64_t bytes;
		CHECK_EQ(build_numbered_layout(&fixture, sizes[s], BTREE_PACKED, &root, &bytes), 0);
		CHECK(block_address_is_null(root) == (sizes[s] == 0));
		CHECK_EQ(verify(&fixture, root), 0);
		struct btree *tree;
		CHECK_EQ(btree_open(fixture.pager, root, &tree), 0);
		unsigned seen = 0;
		struct btree_iterator *iterator;
		CHECK_EQ(btree_iterator_open(tree, NULL, 0, &iterator), 0);
		const uint8_t *key, *value;
		size_t key_size, value_size;
		while (btree_iterator_next(iterator, &key, &key_size, &value, &value_size) == 1) {
			char expected[16];
			size_t expected_size = numbered_key(expected, seen);
			CHECK(key_size == expected_size && memcmp(key, expected, key_size) == 0);
			CHECK_EQ(value_size, 16);
			CHECK_EQ(buf_load_u32(value + 8), seen % 5000);
			seen++;
		}
		btree_iterator_free(iterator);
		CHECK_EQ(seen, sizes[s]);
		btree_free(tree);
	}
	fixture_close(&fixture);
}

TEST(a_packed_tree_of_sequential_ids_is_many_times_smaller_than_a_plain_one)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct block_address plain_root, packed_root;
	uint64_t plain_bytes, packed_bytes;
	CHECK_EQ(build_numbered_layout(&fixture, 100000, BTREE_PLAIN, &plain_root, &plain_bytes), 0);
	CHECK_EQ(build_numbered_layout(&fixture, 100000, BTREE_PACKED, &packed_root, &packed_bytes), 0);
	CHECK(packed_bytes * 8 < plain_bytes);
	int layout = -1, codec = -1;
	CHECK_EQ(node_layout_and_codec(&fixture, packed_root, &layout, &codec), 0);
	CHECK_EQ(layout, BTREE_PACKED);
	CHECK_EQ(codec, CODEC_ZSTD);
	CHECK_EQ(node_layout_and_codec(&fixture, plain_root, &layout, &codec), 0);
	CHECK_EQ(layout, BTREE_PLAIN);
	CHECK_EQ(codec, CODEC_NONE);
	fixture_close(&fixture);
}

TEST(a_tree_built_in_a_segment_is_read_and_modified_from_the_manifest)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct pager_segment *segment;
	CHECK_EQ(pager_segment_create(fixture.pager, 7, &segment), 0);
	struct btree_builder *builder;
	CHECK_EQ(btree_builder_open_segment(segment, BTREE_PACKED, &builder), 0);
	for (unsigned i = 0; i < 20000; i++) {
		char key[16];
		size_t key_size = numbered_key(key, i);
		CHECK_EQ(btree_builder_add(builder, key, key_size, "v", 1), 0);
	}
	struct block_address built;
	CHECK_EQ(btree_builder_finish(builder, &built), 0);
	CHECK_EQ(pager_segment_finish(segment), 0);
	pager_segment_free(segment);
	CHECK_EQ(built.segment, 7);
	CHECK_EQ(verify(&fixture, built), 0);

	struct btree *tree;
	struct block_address changed;
	CHECK_EQ(btree_open_layout(fixture.pager, built, BTREE_PACKED, &tree), 0);
	CHECK_EQ(btree_put(tree, "key00000005", 11, "w", 1), 0);
	CHECK_EQ(btree_delete(tree, "key00019999", 11), 0);
	CHECK_EQ(fixture_flush(&fixture, tree, &changed), 0);
	btree_free(tree);
	CHECK_EQ(changed.segment, 0);
	CHECK_EQ(verify(&fixture, changed), 0);
	struct buf value;
	buf_init(&value);
	CHECK_EQ(btree_open(fixture.pager, changed, &tree), 0);
	CHECK_EQ(btree_get(tree, "key00000005", 11, &value), 0);
	CHECK(value.size == 1 && value.data[0] == 'w');
	CHECK_EQ(btree_get(tree, "key00019999", 11, &value), -ENOENT);
	btree_free(tree);
	buf_reset(&value);
	CHECK_EQ(btree_open(fixture.pager, built, &tree), 0);
	CHECK_EQ(btree_get(tree, "key00000005", 11, &value), 0);
	CHECK(value.size == 1 && value.data[0] == 'v');
	btree_free(tree);
	buf_free(&value);
	fixture_close(&fixture);
}

/* ---- finder ---------------------------------------------------------------- */

static uint64_t manifest_pages_since_reset(void)
{
	struct io_counters counters;
	io_counters_get(IO_MANIFEST, &counters);
	return counters.pages;
}

TEST(a_finder_answers_every_lookup_and_seek_as_the_tree_holds_it)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct block_address root;
	uint64_t bytes;
	/* a quarter of the keys under ASan: still a tree far larger than the 64 KiB budget */
	const unsigned keys = (unsigned)harness_rounds(30000);
	CHECK_EQ(build_numbered_layout(&fixture, keys, BTREE_PACKED, &root, &bytes), 0);
	static const size_t budgets[] = { 0, 64u << 10, 64u << 20 };
	for (size_t b = 0; b < sizeof budgets / sizeof budgets[0]; b++) {
		struct btree_finder *finder;
		CHECK_EQ(btree_finder_open(fixture.pager, root, budgets[b], &finder), 0);
		for (unsigned step = 0; step < 3000; step++) {
			unsigned index = (unsigned)(random_next() % (keys + keys / 30));   /* some past the last key */
			char key[16];
			size_t key_size = numbered_key(key, index);
			const uint8_t *value;
			size_t value_size;
			int rc = btree_finder_get(finder, key, key_size, &value, &value_size);
			if (index >= keys) {
				CHECK_EQ(rc, -ENOENT);
				continue;
			}
			CHECK_EQ(rc, 0);
			CHECK_EQ(value_size, 16);
			CHECK_EQ(buf_load_u32(value + 8), index % 5000);
			/* "key00001234!" sorts right after key 1234: its successor is key 1235 */
			key[key_size] = '!';
			const uint8_t *found;
			size_t found_size;
			rc = btree_finder_seek(finder, key, key_size + 1, &found, &found_size, &value, &value_size);
			if (index == keys - 1) {
				CHECK_EQ(rc, 0);
			} else {
				char next[16];
				size_t next_size = numbered_key(next, index + 1);
				CHECK_EQ(rc, 1);
				CHECK(found_size == next_size && memcmp(found, next, next_size) == 0);
			}
		}
		const uint8_t *found, *value;
		size_t found_size, value_size;
		CHECK_EQ(btree_finder_seek(finder, "", 0, &found, &found_size, &value, &value_size), 1);
		CHECK(found_size == 11 && memcmp(found, "key00000000", 11) == 0);
		btree_finder_free(finder);
	}
	fixture_close(&fixture);
}

TEST(lookups_in_key_order_read_each_node_once_even_with_no_cache_budget)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct block_address root;
	uint64_t bytes;
	CHECK_EQ(build_numbered_layout(&fixture, 60000, BTREE_PACKED, &root, &bytes), 0);
	size_t nodes = 0;
	char message[256];
	CHECK_EQ(btree_verify(fixture.pager, root, counting_visit, &nodes, message, sizeof message), 0);
	CHECK(nodes > 3);
	struct btree_finder *finder;
	CHECK_EQ(btree_finder_open(fixture.pager, root, 0, &finder), 0);
	io_counters_reset();
	for (unsigned i = 0; i < 60000; i += 7) {
		char key[16];
		size_t key_size = numbered_key(key, i);
		const uint8_t *value;
		size_t value_size;
		CHECK_EQ(btree_finder_get(finder, key, key_size, &value, &value_size), 0);
	}
	/* The path stays pinned: every node is read once. */
	uint64_t pages = manifest_pages_since_reset();
	CHECK(pages <= nodes);
	btree_finder_free(finder);
	fixture_close(&fixture);
}

TEST(a_tree_within_the_budget_is_read_once_whatever_the_lookups)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct block_address root;
	uint64_t bytes;
	CHECK_EQ(build_numbered_layout(&fixture, 60000, BTREE_PACKED, &root, &bytes), 0);
	size_t nodes = 0;
	char message[256];
	CHECK_EQ(btree_verify(fixture.pager, root, counting_visit, &nodes, message, sizeof message), 0);
	struct btree_finder *finder;
	CHECK_EQ(btree_finder_open(fixture.pager, root, 64u << 20, &finder), 0);
	io_counters_reset();
	for (unsigned step = 0; step < 20000; step++) {
		char key[16];
		size_t key_size = numbered_key(key, (unsigned)(random_next() % 60000));
		const uint8_t *value;
		size_t value_size;
		CHECK_EQ(btree_finder_get(finder, key, key_size, &value, &value_size), 0);
	}
	CHECK(manifest_pages_since_reset() <= nodes);
	btree_finder_free(finder);
	fixture_close(&fixture);
}

/* ---- diff (core/btree_diff.c) ---------------------------------------------------- */

struct diff_model_entry {
	char key[16];
	size_t key_size;
	int a_value, b_value;   /* -1: absent */
};

struct diff_collected {
	struct diff_model_entry *entries;
	size_t count, capacity;
	int ordered;            /* keys came in increasing order */
};

/* "v<number>" values as their number; other values 0; absent -1. */
static int value_number(const uint8_t *value, size_t size)
{
	char text[16] = "";
	if (!value)
		return -1;
	if (size < 2 || size > sizeof text || value[0] != 'v')
		return 0;
	memcpy(text, value + 1, size - 1);
	text[size - 1] = 0;
	return atoi(text);
}

static int collect_difference(const uint8_t *key, size_t key_size, const uint8_t *a_value, size_t a_size,
			      const uint8_t *b_value, size_t b_size, void *context)
{
	struct diff_collected *collected = context;
	if (collected->count == collected->capacity) {
		collected->capacity = collected->capacity ? collected->capacity * 2 : 64;
		collected->entries = realloc(collected->entries, collected->capacity * sizeof *collected->entries);
		if (!collected->entries)
			return -ENOMEM;
	}
	struct diff_model_entry *entry = &collected->entries[collected->count];
	if (collected->count > 0) {
		const struct diff_model_entry *last = &collected->entries[collected->count - 1];
		if (model_compare((const uint8_t *)last->key, last->key_size, key, key_size) >= 0)
			collected->ordered = 0;
	}
	memset(entry, 0, sizeof *entry);
	memcpy(entry->key, key, key_size < 15 ? key_size : 15);
	entry->key_size = key_size;
	entry->a_value = value_number(a_value, a_size);
	entry->b_value = value_number(b_value, b_size);
	collected->count++;
	return 0;
}

static int put_versioned(struct btree *tree, unsigned index, int value)
{
	char key[16], text[16];
	size_t key_size = numbered_key(key, index);
	int size = snprintf(text, sizeof text, "v%d", value);
	return btree_put(tree, key, key_size, text, (size_t)size + 1);
}

TEST(a_diff_reports_exactly_the_keys_whose_values_differ_in_key_order)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	enum { KEYS = 3000 };
	static int a_model[KEYS], b_model[KEYS];
	struct btree *tree;
	CHECK_EQ(btree_open_layout(fixture.pager, (struct block_address){ 0, 0 }, BTREE_PACKED, &tree), 0);
	for (unsigned i = 0; i < KEYS; i++) {
		a_model[i] = -1;
		if (random_next() % 3) {
			a_model[i] = (int)(random_next() % 1000);
			CHECK_EQ(put_versioned(tree, i, a_model[i]), 0);
		}
	}
	struct block_address a_root, b_root;
	CHECK_EQ(fixture_flush(&fixture, tree, &a_root), 0);
	memcpy(b_model, a_model, sizeof a_model);
	for (unsigned round = 0; round < 5; round++) {
		for (unsigned step = 0; step < 40; step++) {
			unsigned i = (unsigned)(random_next() % KEYS);
			if (random_next() % 4 == 0) {
				if (b_model[i] >= 0) {
					char key[16];
					CHECK_EQ(btree_delete(tree, key, numbered_key(key, i)), 0);
					b_model[i] = -1;
				}
			} else {
				b_model[i] = (int)(random_next() % 1000);
				CHECK_EQ(put_versioned(tree, i, b_model[i]), 0);
			}
		}
		CHECK_EQ(fixture_flush(&fixture, tree, &b_root), 0);
	}
	struct diff_collected collected = { .ordered = 1 };
	CHECK_EQ(btree_diff(fixture.pager, a_root, b_root, collect_difference, &collected), 0);
	CHECK(collected.ordered);
	size_t expected = 0, at = 0;
	for (unsigned i = 0; i < KEYS; i++) {
		if (a_model[i] == b_model[i])
			continue;
		expected++;
		CHECK(at < collected.count);
		char key[16];
		size_t key_size = numbered_key(key, i);
		CHECK_EQ(collected.entries[at].key_size, key_size);
		CHECK(memcmp(collected.entries[at].key, key, key_size) == 0);
		CHECK_EQ(collected.entries[at].a_value, a_model[i]);
		CHECK_EQ(collected.entries[at].b_value, b_model[i]);
		at++;
	}
	CHECK_EQ(collected.count, expected);
	CHECK(expected > 0);
	free(collected.entries);
	btree_free(tree);
	fixture_close(&fixture);
}

TEST(a_diff_of_a_tree_with_itself_reads_nothing_and_against_the_empty_tree_lists_every_entry)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct block_address root;
	CHECK_EQ(build_numbered(&fixture, 5000, &root), 0);
	struct diff_collected collected = { .ordered = 1 };
	io_counters_reset();
	CHECK_EQ(btree_diff(fixture.pager, root, root, collect_difference, &collected), 0);
	CHECK_EQ(collected.count, 0);
	CHECK(manifest_pages_since_reset() <= 8);   /* the two leftmost paths at most */
	CHECK_EQ(btree_diff(fixture.pager, (struct block_address){ 0, 0 }, root, collect_difference, &collected), 0);
	CHECK_EQ(collected.count, 5000);
	CHECK(collected.ordered);
	CHECK_EQ(collected.entries[0].a_value, -1);
	collected.count = 0;
	CHECK_EQ(btree_diff(fixture.pager, root, (struct block_address){ 0, 0 }, collect_difference, &collected), 0);
	CHECK_EQ(collected.count, 5000);
	CHECK_EQ(collected.entries[4999].b_value, -1);
	free(collected.entries);
	fixture_close(&fixture);
}

TEST(trees_of_different_shapes_with_the_same_entries_have_no_difference)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	struct block_address built, inserted;
	CHECK_EQ(build_numbered(&fixture, 20000, &built), 0);
	/* the same keys and values, inserted one by one in a scattered order */
	struct btree *tree;
	CHECK_EQ(btree_open(fixture.pager, (struct block_address){ 0, 0 }, &tree), 0);
	struct btree *source;
	CHECK_EQ(btree_open(fixture.pager, built, &source), 0);
	struct btree_iterator *iterator;
	CHECK_EQ(btree_iterator_open(source, NULL, 0, &iterator), 0);
	const uint8_t *key, *value;
	size_t key_size, value_size;
	int more;
	while ((more = btree_iterator_next(iterator, &key, &key_size, &value, &value_size)) == 1)
		CHECK_EQ(btree_put(tree, key, key_size, value, value_size), 0);
	CHECK_EQ(more, 0);
	btree_iterator_free(iterator);
	btree_free(source);
	CHECK_EQ(fixture_flush(&fixture, tree, &inserted), 0);
	CHECK(!block_address_equal(built, inserted));
	struct diff_collected collected = { .ordered = 1 };
	CHECK_EQ(btree_diff(fixture.pager, built, inserted, collect_difference, &collected), 0);
	CHECK_EQ(collected.count, 0);
	free(collected.entries);
	btree_free(tree);
	fixture_close(&fixture);
}

/* Pages a diff of a one-entry change reads in a packed tree of count keys. */
static int one_change_diff_pages(struct fixture *fixture, unsigned count, uint64_t *pages, size_t *differences)
{
	struct block_address before, after;
	uint64_t bytes;
	struct btree *tree = NULL;
	int rc = build_numbered_layout(fixture, count, BTREE_PACKED, &before, &bytes);
	if (rc == 0)
		rc = btree_open(fixture->pager, before, &tree);
	if (rc == 0)
		rc = put_versioned(tree, count / 2, 7);
	if (rc == 0)
		rc = fixture_flush(fixture, tree, &after);
	struct diff_collected collected = { .ordered = 1 };
	io_counters_reset();
	if (rc == 0)
		rc = btree_diff(fixture->pager, before, after, collect_difference, &collected);
	*pages = manifest_pages_since_reset();
	*differences = collected.count;
	free(collected.entries);
	btree_free(tree);
	return rc;
}

TEST(a_diff_of_a_one_entry_change_reads_one_path_of_each_tree_whatever_its_size)
{
	struct fixture fixture;
	CHECK_EQ(fixture_open(&fixture), 0);
	uint64_t small_pages, large_pages;
	size_t small_differences, large_differences;
	CHECK_EQ(one_change_diff_pages(&fixture, 10000, &small_pages, &small_differences), 0);
	CHECK_EQ(one_change_diff_pages(&fixture, 1000000, &large_pages, &large_differences), 0);
	CHECK_EQ(small_differences, 1);
	CHECK_EQ(large_differences, 1);
	/* the leftmost path and the changed path of each tree: 4 per level at most */
	CHECK(small_pages <= 4 * 3);
	CHECK(large_pages <= 4 * 4);
	CHECK(large_pages <= small_pages + 4);
	fixture_close(&fixture);
}

int main(void)
{
	return harness_run();
}
