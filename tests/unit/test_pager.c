/* pager: verified block reads, manifest appends with failpoints, segment files. */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pager.h"

struct store {
	int directory;
	struct io_file manifest;
	struct ulid id;
	struct pager *pager;
};

/* Writes a manifest header (kind 1) and zero meta slots: blocks start at 12288. */
static int write_manifest(int directory, const struct ulid *id, struct io_file *manifest)
{
	int rc = io_file_open(directory, "manifest", O_RDWR | O_CREAT | O_EXCL, IO_MANIFEST, manifest);
	if (rc < 0)
		return rc;
	static uint8_t start[MANIFEST_FIRST_BLOCK];
	struct file_header header = { FILE_FORMAT_VERSION, FILE_KIND_MANIFEST, *id, 0, 1 };
	memset(start, 0, sizeof start);
	codec_file_header_encode(&header, start);
	return io_pwrite(manifest, start, sizeof start, 0);
}

static int store_open(struct store *store)
{
	memset(store, 0, sizeof *store);
	store->directory = io_directory_open(harness_temp_directory());
	if (store->directory < 0)
		return store->directory;
	ulid_new(&store->id);
	int rc = write_manifest(store->directory, &store->id, &store->manifest);
	if (rc < 0)
		return rc;
	return pager_init(store->directory, &store->manifest, &store->pager);
}

static void store_close(struct store *store)
{
	pager_free(store->pager);
	io_file_close(&store->manifest);
	close(store->directory);
}

static uint64_t manifest_size(struct store *store)
{
	uint64_t size = 0;
	io_size(&store->manifest, &size);
	return size;
}

/* Appends and durably writes one block; returns its address. */
static struct block_address append_one(struct store *store, enum block_type type, enum codec_kind codec,
				       const void *raw, size_t size)
{
	struct pager_append *append = NULL;
	struct block_address address = { 0, 0 };
	if (pager_append_begin(store->pager, manifest_size(store), &append) == 0 &&
	    pager_append_block(append, type, codec, raw, size, &address) == 0 &&
	    pager_append_write(append) == 0) {
		pager_append_free(append);
		return address;
	}
	pager_append_free(append);
	return (struct block_address){ 0, 0 };
}

static void fill_text(struct buf *raw, size_t size)
{
	while (raw->size < size)
		buf_printf(raw, "{\"id\":%zu,\"name\":\"row %zu\"}\n", raw->size, raw->size * 7919 % 1000);
	raw->size = size;
}

/* Runs fn with stderr captured into out (NUL-terminated). */
static void capture_stderr(void (*fn)(void *), void *context, char *out, size_t size)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/stderr.txt", harness_temp_directory());
	fflush(stderr);
	int saved = dup(2);
	int file = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	dup2(file, 2);
	fn(context);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	ssize_t got = pread(file, out, size - 1, 0);
	out[got > 0 ? got : 0] = 0;
	close(file);
	unlink(path);
}

/* ---- file headers and init --------------------------------------------- */

TEST(file_header_is_laid_out_as_format_md_says)
{
	uint8_t bytes[FILE_HEADER_SIZE];
	struct file_header header = { FILE_FORMAT_VERSION, FILE_KIND_SEGMENT, { { 0 } }, 0xabcd, 123456 };
	for (int i = 0; i < 16; i++)
		header.store_id.bytes[i] = (uint8_t)(i + 1);
	codec_file_header_encode(&header, bytes);
	CHECK(memcmp(bytes, "GRAPHFS\0", 8) == 0);
	CHECK_EQ(buf_load_u32(bytes + 8), FILE_FORMAT_VERSION);
	CHECK_EQ(buf_load_u32(bytes + 12), 2);
	CHECK(memcmp(bytes + 16, header.store_id.bytes, 16) == 0);
	CHECK_EQ(buf_load_u64(bytes + 32), 0xabcd);
	CHECK_EQ(buf_load_u64(bytes + 40), 123456);
	CHECK(buf_load_u64(bytes + 48) == codec_hash(bytes, 48));
	for (int i = 56; i < FILE_HEADER_SIZE; i++)
		CHECK_EQ(bytes[i], 0);
	struct file_header back;
	CHECK_EQ(codec_file_header_decode(bytes, &back), 0);
	CHECK_EQ(back.kind, FILE_KIND_SEGMENT);
	CHECK_EQ(back.segment_id, 0xabcd);
	CHECK_EQ(back.created_us, 123456);
	CHECK_EQ(ulid_compare(&back.store_id, &header.store_id), 0);
}

TEST(file_header_decode_reports_another_version_before_the_checksum)
{
	uint8_t bytes[FILE_HEADER_SIZE];
	struct file_header header = { FILE_FORMAT_VERSION, FILE_KIND_MANIFEST, { { 0 } }, 0, 1 };
	codec_file_header_encode(&header, bytes);
	buf_store_u32(bytes + 8, FILE_FORMAT_VERSION + 1); /* newer, checksum now stale */
	struct file_header back;
	CHECK_EQ(codec_file_header_decode(bytes, &back), -EPROTO);
	CHECK_EQ(back.format_version, FILE_FORMAT_VERSION + 1);
	buf_store_u32(bytes + 8, 0);
	CHECK_EQ(codec_file_header_decode(bytes, &back), -EPROTO);
	CHECK_EQ(back.format_version, 0);
	bytes[0] = 'X';
	CHECK_EQ(codec_file_header_decode(bytes, &back), -EIO);
}

TEST(file_header_decode_refuses_every_flipped_byte_of_the_checked_part)
{
	uint8_t bytes[FILE_HEADER_SIZE];
	struct file_header header = { FILE_FORMAT_VERSION, FILE_KIND_MANIFEST, { { 7 } }, 0, 99 };
	codec_file_header_encode(&header, bytes);
	struct file_header back;
	for (int position = 0; position < 56; position++) {
		bytes[position] ^= 0x10;
		int rc = codec_file_header_decode(bytes, &back);
		bytes[position] ^= 0x10;
		CHECK(rc == -EIO || (rc == -EPROTO && position >= 8 && position < 12));
	}
	CHECK_EQ(codec_file_header_decode(bytes, &back), 0);
}

TEST(init_learns_the_store_id_from_the_manifest_header)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	CHECK_EQ(ulid_compare(pager_store_id(store.pager), &store.id), 0);
	store_close(&store);
}

struct init_attempt {
	struct store store;
	int rc;
};

static void init_quietly(void *context)
{
	struct init_attempt *attempt = context;
	attempt->store.pager = NULL;
	attempt->rc = pager_init(attempt->store.directory, &attempt->store.manifest, &attempt->store.pager);
	if (attempt->rc == 0)
		pager_free(attempt->store.pager);
	attempt->store.pager = NULL;
}

TEST(init_refuses_a_corrupt_short_or_foreign_header)
{
	struct init_attempt attempt;
	char log[1024];
	CHECK_EQ(store_open(&attempt.store), 0);
	pager_free(attempt.store.pager);

	uint8_t byte;
	CHECK_EQ(io_pread(&attempt.store.manifest, &byte, 1, 20), 0);
	byte ^= 1;
	CHECK_EQ(io_pwrite(&attempt.store.manifest, &byte, 1, 20), 0);
	capture_stderr(init_quietly, &attempt, log, sizeof log);
	CHECK_EQ(attempt.rc, -EIO);
	CHECK(strstr(log, "graphfs: manifest:") != NULL);
	CHECK(strstr(log, "offset 0") != NULL);

	uint8_t bytes[FILE_HEADER_SIZE];
	struct file_header segment = { FILE_FORMAT_VERSION, FILE_KIND_SEGMENT, attempt.store.id, 5, 1 };
	codec_file_header_encode(&segment, bytes);
	CHECK_EQ(io_pwrite(&attempt.store.manifest, bytes, sizeof bytes, 0), 0);
	capture_stderr(init_quietly, &attempt, log, sizeof log);
	CHECK_EQ(attempt.rc, -EIO);

	struct file_header newer = { FILE_FORMAT_VERSION + 1, FILE_KIND_MANIFEST, attempt.store.id, 0, 1 };
	codec_file_header_encode(&newer, bytes);
	CHECK_EQ(io_pwrite(&attempt.store.manifest, bytes, sizeof bytes, 0), 0);
	capture_stderr(init_quietly, &attempt, log, sizeof log);
	CHECK_EQ(attempt.rc, -EPROTO);

	CHECK_EQ(io_truncate(&attempt.store.manifest, 100), 0);
	capture_stderr(init_quietly, &attempt, log, sizeof log);
	CHECK_EQ(attempt.rc, -EIO);
	attempt.store.pager = NULL;
	store_close(&attempt.store);
}

/* ---- manifest appends and reads ---------------------------------------- */

TEST(append_assigns_sequential_addresses_and_reads_back)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	struct pager_append *append;
	CHECK_EQ(pager_append_begin(store.pager, MANIFEST_FIRST_BLOCK, &append), 0);
	struct block_address first, second, third;
	CHECK_EQ(pager_append_block(append, BLOCK_NODE, CODEC_NONE, "node", 4, &first), 0);
	CHECK_EQ(pager_append_block(append, BLOCK_COMMIT, CODEC_ZSTD, "commit", 6, &second), 0);
	CHECK_EQ(pager_append_block(append, BLOCK_ROOT, CODEC_NONE, "root", 4, &third), 0);
	CHECK_EQ(first.segment, 0);
	CHECK_EQ(first.offset, MANIFEST_FIRST_BLOCK);
	CHECK_EQ(second.offset, MANIFEST_FIRST_BLOCK + 24 + 4);
	CHECK_EQ(third.offset, second.offset + 24 + 6);
	CHECK_EQ(pager_append_size(append), 3 * 24 + 14);
	CHECK_EQ(pager_append_write(append), 0);
	CHECK_EQ(manifest_size(&store), MANIFEST_FIRST_BLOCK + pager_append_size(append));
	CHECK_EQ(pager_append_write(append), -EINVAL);
	pager_append_free(append);

	struct buf raw;
	buf_init(&raw);
	CHECK_EQ(pager_read(store.pager, first, BLOCK_NODE, &raw), 0);
	CHECK_EQ(pager_read(store.pager, second, BLOCK_COMMIT, &raw), 0);
	CHECK_EQ(pager_read(store.pager, third, 0, &raw), 0);
	CHECK(raw.size == 14 && memcmp(raw.data, "nodecommitroot", 14) == 0);
	uint64_t size;
	CHECK_EQ(pager_block_size(store.pager, second, &size), 0);
	CHECK_EQ(size, 24 + 6);
	buf_free(&raw);
	store_close(&store);
}

TEST(a_block_encoded_before_the_append_lands_whole_and_reads_back)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	struct buf encoded;
	buf_init(&encoded);
	char text[4000];
	memset(text, 'x', sizeof text);   /* compresses */
	CHECK_EQ(codec_encode(BLOCK_FRAGMENT, CODEC_ZSTD, text, sizeof text, &encoded), 0);
	struct pager_append *append;
	CHECK_EQ(pager_append_begin(store.pager, MANIFEST_FIRST_BLOCK, &append), 0);
	struct block_address before, block, after;
	CHECK_EQ(pager_append_block(append, BLOCK_NODE, CODEC_NONE, "node", 4, &before), 0);
	CHECK_EQ(pager_append_encoded(append, encoded.data, encoded.size - 1, &block), -EINVAL);   /* not whole */
	CHECK_EQ(pager_append_encoded(append, encoded.data, encoded.size, &block), 0);
	CHECK_EQ(pager_append_block(append, BLOCK_ROOT, CODEC_NONE, "root", 4, &after), 0);
	CHECK_EQ(block.offset, before.offset + 24 + 4);
	CHECK_EQ(after.offset, block.offset + encoded.size);
	CHECK_EQ(pager_append_write(append), 0);
	pager_append_free(append);
	struct buf raw;
	buf_init(&raw);
	CHECK_EQ(pager_read(store.pager, block, BLOCK_FRAGMENT, &raw), 0);
	CHECK(raw.size == sizeof text && memcmp(raw.data, text, sizeof text) == 0);
	buf_free(&raw);
	buf_free(&encoded);
	store_close(&store);
}

TEST(append_read_serves_buffered_blocks_and_older_ones_from_disk)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	struct block_address old = append_one(&store, BLOCK_SCHEMA, CODEC_NONE, "old", 3);
	CHECK(!block_address_is_null(old));
	struct pager_append *append;
	CHECK_EQ(pager_append_begin(store.pager, manifest_size(&store), &append), 0);
	struct block_address fresh;
	CHECK_EQ(pager_append_block(append, BLOCK_NODE, CODEC_LZ4, "fresh fresh fresh fresh", 23, &fresh), 0);
	struct buf raw;
	buf_init(&raw);
	io_counters_reset();
	CHECK_EQ(pager_append_read(append, fresh, BLOCK_NODE, &raw), 0);
	struct io_counters counters;
	io_counters_get(IO_MANIFEST, &counters);
	CHECK_EQ(counters.reads, 0);
	CHECK_EQ(counters.pages, 0);
	CHECK_EQ(pager_append_read(append, old, BLOCK_SCHEMA, &raw), 0);
	io_counters_get(IO_MANIFEST, &counters);
	CHECK_EQ(counters.pages, 1);
	CHECK(raw.size == 26 && memcmp(raw.data, "fresh fresh fresh freshold", 26) == 0);
	/* Inside the buffer but not at a block start; and a wrong type. */
	struct block_address inside = { 0, fresh.offset + 3 };
	CHECK_EQ(pager_append_read(append, inside, 0, &raw), -EIO);
	CHECK_EQ(pager_append_read(append, fresh, BLOCK_ROOT, &raw), -EIO);
	CHECK_EQ(raw.size, 26);
	buf_free(&raw);
	pager_append_free(append);
	store_close(&store);
}

TEST(append_refuses_a_stale_or_impossible_base)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	struct pager_append *append;
	CHECK_EQ(pager_append_begin(store.pager, 4096, &append), -EINVAL);
	CHECK_EQ(pager_append_begin(store.pager, MANIFEST_FIRST_BLOCK, &append), 0);
	struct block_address address;
	CHECK_EQ(pager_append_block(append, BLOCK_NODE, CODEC_NONE, "x", 1, &address), 0);
	CHECK(!block_address_is_null(append_one(&store, BLOCK_NODE, CODEC_NONE, "other", 5)));
	uint64_t before = manifest_size(&store);
	CHECK_EQ(pager_append_write(append), -ESTALE);
	CHECK_EQ(manifest_size(&store), before);
	pager_append_free(append);
	store_close(&store);
}

TEST(a_preallocating_append_pads_its_write_with_zeros_to_the_next_chunk)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	struct pager_append *append;
	CHECK_EQ(pager_append_begin(store.pager, MANIFEST_FIRST_BLOCK, &append), 0);
	struct block_address address;
	CHECK_EQ(pager_append_block(append, BLOCK_NODE, CODEC_NONE, "node", 4, &address), 0);
	CHECK_EQ(pager_append_preallocate(append, MANIFEST_FIRST_BLOCK, 65536), 0);
	io_counters_reset();
	CHECK_EQ(pager_append_write(append), 0);
	struct io_counters counters;
	io_counters_get(IO_MANIFEST, &counters);
	CHECK_EQ(counters.writes, 1);
	CHECK_EQ(counters.bytes_written, 65536 - MANIFEST_FIRST_BLOCK);
	CHECK_EQ(manifest_size(&store), 65536);
	CHECK_EQ(pager_append_size(append), 24 + 4);
	CHECK_EQ(pager_append_file_size(append), 65536);
	pager_append_free(append);
	unsigned char tail[4096];
	CHECK_EQ(io_pread(&store.manifest, tail, sizeof tail, MANIFEST_FIRST_BLOCK + 24 + 4), 0);
	for (size_t i = 0; i < sizeof tail; i++)
		CHECK_EQ(tail[i], 0);
	store_close(&store);
}

TEST(an_append_into_preallocated_zeros_leaves_the_file_size_alone)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	struct pager_append *append;
	CHECK_EQ(pager_append_begin(store.pager, MANIFEST_FIRST_BLOCK, &append), 0);
	struct block_address first, second;
	CHECK_EQ(pager_append_block(append, BLOCK_NODE, CODEC_NONE, "first", 5, &first), 0);
	CHECK_EQ(pager_append_preallocate(append, MANIFEST_FIRST_BLOCK, 65536), 0);
	CHECK_EQ(pager_append_write(append), 0);
	pager_append_free(append);
	CHECK_EQ(pager_append_begin(store.pager, first.offset + 24 + 5, &append), 0);
	CHECK_EQ(pager_append_block(append, BLOCK_NODE, CODEC_NONE, "second", 6, &second), 0);
	CHECK_EQ(pager_append_preallocate(append, 65536, 65536), 0);
	io_counters_reset();
	CHECK_EQ(pager_append_write(append), 0);
	struct io_counters counters;
	io_counters_get(IO_MANIFEST, &counters);
	CHECK_EQ(counters.bytes_written, 24 + 6);
	CHECK_EQ(pager_append_file_size(append), 65536);
	pager_append_free(append);
	CHECK_EQ(manifest_size(&store), 65536);
	struct buf raw;
	buf_init(&raw);
	CHECK_EQ(pager_read(store.pager, first, BLOCK_NODE, &raw), 0);
	CHECK_EQ(pager_read(store.pager, second, BLOCK_NODE, &raw), 0);
	CHECK(raw.size == 11 && memcmp(raw.data, "firstsecond", 11) == 0);
	buf_free(&raw);
	store_close(&store);
}

TEST(a_preallocating_append_refuses_a_size_other_than_the_one_observed)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	struct pager_append *append;
	CHECK_EQ(pager_append_begin(store.pager, MANIFEST_FIRST_BLOCK, &append), 0);
	struct block_address address;
	CHECK_EQ(pager_append_block(append, BLOCK_NODE, CODEC_NONE, "x", 1, &address), 0);
	CHECK_EQ(pager_append_preallocate(append, MANIFEST_FIRST_BLOCK - 1, 65536), -EINVAL);
	CHECK_EQ(pager_append_preallocate(append, MANIFEST_FIRST_BLOCK, 3000), -EINVAL);
	CHECK_EQ(pager_append_preallocate(append, 65536, 65536), 0);
	uint64_t before = manifest_size(&store);
	CHECK_EQ(pager_append_write(append), -ESTALE);
	CHECK_EQ(manifest_size(&store), before);
	pager_append_free(append);
	store_close(&store);
}

TEST(append_write_is_one_pwrite_and_one_fsync)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	struct pager_append *append;
	CHECK_EQ(pager_append_begin(store.pager, MANIFEST_FIRST_BLOCK, &append), 0);
	struct block_address address;
	for (int i = 0; i < 50; i++)
		CHECK_EQ(pager_append_block(append, BLOCK_NODE, CODEC_NONE, "node", 4, &address), 0);
	io_counters_reset();
	CHECK_EQ(pager_append_write(append), 0);
	struct io_counters counters;
	io_counters_get(IO_MANIFEST, &counters);
	CHECK_EQ(counters.writes, 1);
	CHECK_EQ(counters.bytes_written, 50 * 28);
	CHECK_EQ(counters.fsyncs, 0);
	CHECK_EQ(pager_append_sync(append), 0);
	io_counters_get(IO_MANIFEST, &counters);
	CHECK_EQ(counters.writes, 1);
	CHECK_EQ(counters.fsyncs, 1);
	pager_append_free(append);
	store_close(&store);
}

TEST(a_sync_before_the_write_is_einval)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	struct pager_append *append;
	CHECK_EQ(pager_append_begin(store.pager, MANIFEST_FIRST_BLOCK, &append), 0);
	struct block_address address;
	CHECK_EQ(pager_append_block(append, BLOCK_NODE, CODEC_NONE, "node", 4, &address), 0);
	CHECK_EQ(pager_append_sync(append), -EINVAL);
	pager_append_free(append);
	store_close(&store);
}

TEST(counters_count_one_page_and_header_plus_stored_bytes_per_block)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	struct buf text, raw;
	buf_init(&text);
	buf_init(&raw);
	fill_text(&text, 50000);
	struct block_address small = append_one(&store, BLOCK_NODE, CODEC_NONE, "tiny", 4);
	struct block_address large = append_one(&store, BLOCK_NODE, CODEC_NONE, text.data, text.size);
	struct block_address packed = append_one(&store, BLOCK_COMMIT, CODEC_ZSTD, text.data, text.size);
	uint64_t packed_size;
	CHECK_EQ(pager_block_size(store.pager, packed, &packed_size), 0);
	CHECK(packed_size < text.size);

	io_counters_reset();
	CHECK_EQ(pager_read(store.pager, small, BLOCK_NODE, &raw), 0);
	struct io_counters counters;
	io_counters_get(IO_MANIFEST, &counters);
	CHECK_EQ(counters.pages, 1);
	CHECK_EQ(counters.bytes, 24 + 4);
	CHECK_EQ(counters.reads, 1);

	io_counters_reset();
	CHECK_EQ(pager_read(store.pager, large, BLOCK_NODE, &raw), 0);
	io_counters_get(IO_MANIFEST, &counters);
	CHECK_EQ(counters.pages, 1);
	CHECK_EQ(counters.bytes, 24 + 50000);
	CHECK_EQ(counters.reads, 2);

	io_counters_reset();
	CHECK_EQ(pager_read(store.pager, packed, BLOCK_COMMIT, &raw), 0);
	io_counters_get(IO_MANIFEST, &counters);
	CHECK_EQ(counters.pages, 1);
	CHECK_EQ(counters.bytes, packed_size);
	struct io_counters data;
	io_counters_get(IO_DATA, &data);
	CHECK_EQ(data.pages + data.bytes + data.reads, 0);

	CHECK_EQ(raw.size, 4 + 50000 + 50000);
	CHECK(memcmp(raw.data + 4 + 50000, text.data, text.size) == 0);
	buf_free(&text);
	buf_free(&raw);
	store_close(&store);
}

TEST(the_same_reads_count_the_same_whatever_follows_the_block)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	struct block_address address = append_one(&store, BLOCK_NODE, CODEC_NONE, "alone", 5);
	struct buf raw;
	buf_init(&raw);
	io_counters_reset();
	CHECK_EQ(pager_read(store.pager, address, BLOCK_NODE, &raw), 0);
	struct io_counters alone;
	io_counters_get(IO_MANIFEST, &alone);
	for (int i = 0; i < 200; i++)
		append_one(&store, BLOCK_NODE, CODEC_NONE, "following", 9);
	io_counters_reset();
	CHECK_EQ(pager_read(store.pager, address, BLOCK_NODE, &raw), 0);
	struct io_counters followed;
	io_counters_get(IO_MANIFEST, &followed);
	CHECK_EQ(alone.reads, followed.reads);
	CHECK_EQ(alone.bytes, followed.bytes);
	CHECK_EQ(alone.pages, followed.pages);
	buf_free(&raw);
	store_close(&store);
}

TEST(blocks_wholly_inside_a_window_are_read_from_it_and_counted_as_pages)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	struct buf text, raw;
	buf_init(&text);
	buf_init(&raw);
	fill_text(&text, 9000);
	struct block_address first = append_one(&store, BLOCK_NODE, CODEC_NONE, "first", 5);
	struct block_address second = append_one(&store, BLOCK_NODE, CODEC_ZSTD, text.data, text.size);
	struct block_address third = append_one(&store, BLOCK_NODE, CODEC_NONE, "third", 5);
	uint64_t third_size;
	CHECK_EQ(pager_block_size(store.pager, third, &third_size), 0);
	/* the window ends inside the third block */
	uint64_t window_end = third.offset + third_size - 1;
	io_counters_reset();
	CHECK_EQ(pager_window_begin(store.pager, first.offset, (size_t)(window_end - first.offset)), 0);
	CHECK_EQ(pager_read(store.pager, first, BLOCK_NODE, &raw), 0);
	CHECK_EQ(pager_read(store.pager, second, BLOCK_NODE, &raw), 0);
	struct io_counters counters;
	io_counters_get(IO_MANIFEST, &counters);
	CHECK_EQ(counters.reads, 1);   /* the window's */
	CHECK_EQ(counters.pages, 2);
	/* a block the window only partly holds comes from the file */
	CHECK_EQ(pager_read(store.pager, third, BLOCK_NODE, &raw), 0);
	io_counters_get(IO_MANIFEST, &counters);
	CHECK_EQ(counters.reads, 2);
	CHECK_EQ(counters.pages, 3);
	pager_window_end(store.pager);
	CHECK_EQ(pager_read(store.pager, first, BLOCK_NODE, &raw), 0);
	io_counters_get(IO_MANIFEST, &counters);
	CHECK_EQ(counters.reads, 3);
	CHECK_EQ(raw.size, 5 + text.size + 5 + 5);
	CHECK(memcmp(raw.data, "first", 5) == 0 && memcmp(raw.data + 5, text.data, text.size) == 0);
	CHECK(memcmp(raw.data + 5 + text.size, "thirdfirst", 10) == 0);
	buf_free(&text);
	buf_free(&raw);
	store_close(&store);
}

static void *read_in_another_thread(void *context)
{
	struct store *store = context;
	struct buf raw;
	buf_init(&raw);
	intptr_t rc = pager_read(store->pager, (struct block_address){ 0, MANIFEST_FIRST_BLOCK }, BLOCK_NODE, &raw);
	buf_free(&raw);
	return (void *)rc;
}

TEST(a_window_serves_only_the_thread_that_opened_it)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	struct block_address block = append_one(&store, BLOCK_NODE, CODEC_NONE, "block", 5);
	CHECK_EQ(block.offset, MANIFEST_FIRST_BLOCK);
	uint64_t size;
	CHECK_EQ(pager_block_size(store.pager, block, &size), 0);
	CHECK_EQ(pager_window_begin(store.pager, block.offset, (size_t)size), 0);
	io_counters_reset();
	pthread_t thread;
	void *result;
	CHECK_EQ(pthread_create(&thread, NULL, read_in_another_thread, &store), 0);
	CHECK_EQ(pthread_join(thread, &result), 0);
	CHECK_EQ((intptr_t)result, 0);
	struct io_counters counters;
	io_counters_get(IO_MANIFEST, &counters);
	CHECK_EQ(counters.reads, 1);   /* its own read of the file */
	pager_window_end(store.pager);
	store_close(&store);
}

TEST(reading_past_the_end_or_inside_the_header_is_eio)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	struct block_address address = append_one(&store, BLOCK_NODE, CODEC_NONE, "0123456789", 10);
	struct buf raw;
	buf_init(&raw);
	buf_append(&raw, "keep", 4);
	struct block_address beyond = { 0, manifest_size(&store) };
	struct block_address far = { 0, 1ull << 40 };
	struct block_address header = { 0, 4096 };
	struct block_address null = { 0, 0 };
	CHECK_EQ(pager_read(store.pager, beyond, 0, &raw), -EIO);
	CHECK_EQ(pager_read(store.pager, far, 0, &raw), -EIO);
	CHECK_EQ(pager_read(store.pager, header, 0, &raw), -EIO);
	CHECK_EQ(pager_read(store.pager, null, 0, &raw), -EIO);
	uint64_t size;
	CHECK_EQ(pager_block_size(store.pager, beyond, &size), -EIO);
	/* A block cut short by a torn tail. */
	CHECK_EQ(io_truncate(&store.manifest, address.offset + 30), 0);
	CHECK_EQ(pager_read(store.pager, address, 0, &raw), -EIO);
	CHECK_EQ(raw.size, 4);
	buf_free(&raw);
	store_close(&store);
}

struct corrupt_read {
	struct pager *pager;
	struct block_address address;
	enum block_type type;
	struct buf *raw;
	int rc;
};

static void read_quietly(void *context)
{
	struct corrupt_read *read = context;
	read->rc = pager_read(read->pager, read->address, read->type, read->raw);
}

TEST(a_flipped_byte_on_disk_is_eio_with_a_log_line_naming_file_and_offset)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	struct buf text, raw;
	buf_init(&text);
	buf_init(&raw);
	fill_text(&text, 300);
	append_one(&store, BLOCK_NODE, CODEC_NONE, "before", 6);
	struct block_address address = append_one(&store, BLOCK_FRAGMENT, CODEC_ZSTD, text.data, text.size);
	uint64_t size;
	CHECK_EQ(pager_block_size(store.pager, address, &size), 0);
	char expected[64], log[2048];
	snprintf(expected, sizeof expected, "offset %llu", (unsigned long long)address.offset);
	for (uint64_t position = 0; position < size; position++) {
		uint8_t byte;
		CHECK_EQ(io_pread(&store.manifest, &byte, 1, address.offset + position), 0);
		byte ^= 0x04;
		CHECK_EQ(io_pwrite(&store.manifest, &byte, 1, address.offset + position), 0);
		io_counters_reset();
		struct corrupt_read read = { store.pager, address, BLOCK_FRAGMENT, &raw, 0 };
		capture_stderr(read_quietly, &read, log, sizeof log);
		byte ^= 0x04;
		CHECK_EQ(io_pwrite(&store.manifest, &byte, 1, address.offset + position), 0);
		CHECK_EQ(read.rc, -EIO);
		CHECK_EQ(raw.size, 0);
		CHECK(strncmp(log, "graphfs: manifest: ", 19) == 0);
		CHECK(strstr(log, expected) != NULL);
		CHECK_EQ(strchr(log, '\n') - log + 1, strlen(log)); /* exactly one line */
		struct io_counters counters;
		io_counters_get(IO_MANIFEST, &counters);
		CHECK_EQ(counters.pages, 0);
	}
	CHECK_EQ(pager_read(store.pager, address, BLOCK_FRAGMENT, &raw), 0);
	CHECK(raw.size == text.size && memcmp(raw.data, text.data, text.size) == 0);
	buf_free(&text);
	buf_free(&raw);
	store_close(&store);
}

TEST(the_wrong_block_type_is_eio_and_leaves_the_output_unchanged)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	struct block_address address = append_one(&store, BLOCK_NODE, CODEC_NONE, "node", 4);
	struct buf raw;
	buf_init(&raw);
	char log[1024];
	struct corrupt_read read = { store.pager, address, BLOCK_ROOT, &raw, 0 };
	capture_stderr(read_quietly, &read, log, sizeof log);
	CHECK_EQ(read.rc, -EIO);
	CHECK_EQ(raw.size, 0);
	CHECK(strstr(log, "graphfs: manifest:") != NULL);
	buf_free(&raw);
	store_close(&store);
}

/* ---- publish failpoints ------------------------------------------------ */

TEST(a_partial_write_leaves_that_many_bytes_of_the_tail)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	struct pager_append *append;
	CHECK_EQ(pager_append_begin(store.pager, MANIFEST_FIRST_BLOCK, &append), 0);
	struct block_address address;
	for (int i = 0; i < 10; i++)
		CHECK_EQ(pager_append_block(append, BLOCK_NODE, CODEC_NONE, "0123456789", 10, &address), 0);
	uint64_t tail = pager_append_size(append);
	CHECK_EQ(pager_append_write_part(append, (size_t)tail / 2), 0);
	CHECK_EQ(manifest_size(&store), MANIFEST_FIRST_BLOCK + tail / 2);
	pager_append_free(append);
	store_close(&store);
}

TEST(segment_create_write_finish_and_read_back)
{
	mode_t old_mask = umask(0);
	struct store store;
	int rc = store_open(&store);
	umask(old_mask);
	CHECK_EQ(rc, 0);
	struct pager_segment *segment;
	old_mask = umask(0);
	rc = pager_segment_create(store.pager, 0x1234abcdull, &segment);
	umask(old_mask);
	CHECK_EQ(rc, 0);
	CHECK_EQ(pager_segment_id(segment), 0x1234abcdull);
	struct buf text;
	buf_init(&text);
	fill_text(&text, 20000);
	struct block_address first, second;
	CHECK_EQ(pager_segment_block(segment, BLOCK_FRAGMENT, CODEC_ZSTD, text.data, text.size, &first), 0);
	CHECK_EQ(pager_segment_block(segment, BLOCK_BITMAP, CODEC_NONE, "bits", 4, &second), 0);
	CHECK_EQ(first.segment, 0x1234abcdull);
	CHECK_EQ(first.offset, FILE_HEADER_SIZE);
	CHECK(second.offset > first.offset);
	io_counters_reset();
	CHECK_EQ(pager_segment_finish(segment), 0);
	struct io_counters counters;
	io_counters_get(IO_DATA, &counters);
	CHECK_EQ(counters.fsyncs, 1);
	pager_segment_free(segment);

	struct stat status;
	CHECK_EQ(fstatat(store.directory, "segments/000000001234abcd", &status, AT_SYMLINK_NOFOLLOW), 0);
	CHECK_EQ(status.st_mode & 07777, 0600);
	CHECK_EQ(fstatat(store.directory, "segments", &status, AT_SYMLINK_NOFOLLOW), 0);
	CHECK_EQ(status.st_mode & 07777, 0700);

	struct io_file file;
	uint8_t bytes[FILE_HEADER_SIZE];
	struct file_header header;
	CHECK_EQ(io_file_open(store.directory, "segments/000000001234abcd", O_RDONLY, IO_DATA, &file), 0);
	CHECK_EQ(io_pread(&file, bytes, sizeof bytes, 0), 0);
	io_file_close(&file);
	CHECK_EQ(codec_file_header_decode(bytes, &header), 0);
	CHECK_EQ(header.kind, FILE_KIND_SEGMENT);
	CHECK_EQ(header.segment_id, 0x1234abcdull);
	CHECK_EQ(ulid_compare(&header.store_id, &store.id), 0);

	struct buf raw;
	buf_init(&raw);
	io_counters_reset();
	CHECK_EQ(pager_read(store.pager, first, BLOCK_FRAGMENT, &raw), 0);
	CHECK_EQ(pager_read(store.pager, second, BLOCK_BITMAP, &raw), 0);
	CHECK(raw.size == text.size + 4 && memcmp(raw.data, text.data, text.size) == 0);
	CHECK(memcmp(raw.data + text.size, "bits", 4) == 0);
	uint64_t first_size;
	CHECK_EQ(pager_block_size(store.pager, first, &first_size), 0);
	io_counters_get(IO_DATA, &counters);
	CHECK_EQ(counters.pages, 2);
	CHECK_EQ(counters.bytes, first_size + 24 + 4);
	struct io_counters manifest;
	io_counters_get(IO_MANIFEST, &manifest);
	CHECK_EQ(manifest.pages, 0);
	buf_free(&raw);
	buf_free(&text);
	store_close(&store);
}

TEST(creating_an_existing_segment_is_eexist_and_id_zero_is_invalid)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	struct pager_segment *segment, *again;
	CHECK_EQ(pager_segment_create(store.pager, 7, &segment), 0);
	CHECK_EQ(pager_segment_create(store.pager, 7, &again), -EEXIST);
	CHECK_EQ(pager_segment_create(store.pager, 0, &again), -EINVAL);
	pager_segment_free(segment);
	store_close(&store);
}

TEST(a_large_segment_is_written_in_chunks_of_about_a_mebibyte)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	struct pager_segment *segment;
	CHECK_EQ(pager_segment_create(store.pager, 99, &segment), 0);
	uint8_t *noise = malloc(100000);
	CHECK(noise != NULL);
	for (int i = 0; i < 100000; i++)
		noise[i] = (uint8_t)(i * 2654435761u >> 13);
	struct block_address addresses[40];
	io_counters_reset();
	for (int i = 0; i < 40; i++) {
		noise[0] = (uint8_t)i;
		CHECK_EQ(pager_segment_block(segment, BLOCK_FRAGMENT, CODEC_NONE, noise, 100000, &addresses[i]), 0);
		if (i > 0)
			CHECK_EQ(addresses[i].offset, addresses[i - 1].offset + 24 + 100000);
	}
	struct io_counters counters;
	io_counters_get(IO_DATA, &counters);
	CHECK(counters.writes >= 3 && counters.writes <= 4);
	CHECK_EQ(pager_segment_finish(segment), 0);
	io_counters_get(IO_DATA, &counters);
	CHECK_EQ(counters.bytes_written, FILE_HEADER_SIZE + 40 * (24 + 100000));
	pager_segment_free(segment);
	struct buf raw;
	buf_init(&raw);
	for (int i = 0; i < 40; i++) {
		buf_reset(&raw);
		CHECK_EQ(pager_read(store.pager, addresses[i], BLOCK_FRAGMENT, &raw), 0);
		CHECK_EQ(raw.size, 100000);
		CHECK_EQ(raw.data[0], i);
		CHECK(memcmp(raw.data + 1, noise + 1, 99999) == 0);
	}
	buf_free(&raw);
	free(noise);
	store_close(&store);
}

TEST(segment_before_fsync_error_fails_finish)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	struct pager_segment *segment;
	struct block_address address;
	CHECK_EQ(pager_segment_create(store.pager, 3, &segment), 0);
	CHECK_EQ(pager_segment_block(segment, BLOCK_FRAGMENT, CODEC_NONE, "x", 1, &address), 0);
	CHECK_EQ(io_failpoint_arm("segment.before_fsync", IO_FAILPOINT_ERROR), 0);
	io_counters_reset();
	CHECK_EQ(pager_segment_finish(segment), -EIO);
	struct io_counters counters;
	io_counters_get(IO_DATA, &counters);
	CHECK_EQ(counters.fsyncs, 0);
	CHECK_EQ(io_failpoint_arm("segment.after_fsync", IO_FAILPOINT_ERROR), 0);
	CHECK_EQ(pager_segment_finish(segment), -EIO);
	CHECK_EQ(pager_segment_finish(segment), 0);
	pager_segment_free(segment);
	store_close(&store);
}

static struct store *crash_store;

static void crash_before_segment_fsync(void)
{
	struct pager_segment *segment;
	struct block_address address;
	io_failpoint_arm("segment.before_fsync", IO_FAILPOINT_CRASH);
	if (pager_segment_create(crash_store->pager, 4, &segment) == 0 &&
	    pager_segment_block(segment, BLOCK_FRAGMENT, CODEC_NONE, "x", 1, &address) == 0)
		pager_segment_finish(segment);
	_exit(0);
}

TEST(segment_crash_before_fsync_exits_86)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	crash_store = &store;
	fflush(NULL);
	pid_t child = fork();
	if (child == 0)
		crash_before_segment_fsync();
	int status;
	waitpid(child, &status, 0);
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), IO_FAILPOINT_EXIT_CODE);
	store_close(&store);
}

static void write_segment(struct store *store, uint64_t id, const char *text, struct block_address *out)
{
	struct pager_segment *segment;
	if (pager_segment_create(store->pager, id, &segment) < 0)
		return;
	pager_segment_block(segment, BLOCK_FRAGMENT, CODEC_NONE, text, strlen(text), out);
	pager_segment_finish(segment);
	pager_segment_free(segment);
}

TEST(a_missing_segment_is_enoent_and_remove_deletes_it)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	struct block_address address = { 0, 0 };
	write_segment(&store, 11, "eleven", &address);
	struct buf raw;
	buf_init(&raw);
	CHECK_EQ(pager_read(store.pager, address, BLOCK_FRAGMENT, &raw), 0); /* now cached */
	CHECK_EQ(pager_segment_remove(store.pager, 11), 0);
	CHECK_EQ(pager_read(store.pager, address, BLOCK_FRAGMENT, &raw), -ENOENT);
	CHECK_EQ(pager_segment_remove(store.pager, 11), -ENOENT);
	struct block_address never = { 12, FILE_HEADER_SIZE };
	CHECK_EQ(pager_read(store.pager, never, 0, &raw), -ENOENT);
	CHECK_EQ(raw.size, 6);
	buf_free(&raw);
	store_close(&store);
}

TEST(a_segment_of_another_store_or_id_is_refused)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	struct block_address address = { 0, 0 };
	write_segment(&store, 21, "twenty-one", &address);
	/* Same bytes under another id: the header names segment 21. */
	CHECK_EQ(renameat(store.directory, "segments/0000000000000015", store.directory,
			  "segments/0000000000000016"),
		 0);
	struct block_address moved = { 22, address.offset };
	struct buf raw;
	buf_init(&raw);
	char log[1024];
	struct corrupt_read read = { store.pager, moved, 0, &raw, 0 };
	capture_stderr(read_quietly, &read, log, sizeof log);
	CHECK_EQ(read.rc, -EIO);
	CHECK(strstr(log, "segments/0000000000000016") != NULL);

	/* A segment written by another store's pager. */
	struct pager *other;
	struct ulid real_id = store.id;
	uint8_t bytes[FILE_HEADER_SIZE];
	struct ulid foreign;
	ulid_new(&foreign);
	struct file_header header = { FILE_FORMAT_VERSION, FILE_KIND_MANIFEST, foreign, 0, 1 };
	codec_file_header_encode(&header, bytes);
	CHECK_EQ(io_pwrite(&store.manifest, bytes, sizeof bytes, 0), 0);
	CHECK_EQ(pager_init(store.directory, &store.manifest, &other), 0);
	struct block_address foreign_address = { 0, 0 };
	struct pager_segment *segment;
	CHECK_EQ(pager_segment_create(other, 30, &segment), 0);
	CHECK_EQ(pager_segment_block(segment, BLOCK_FRAGMENT, CODEC_NONE, "alien", 5, &foreign_address), 0);
	CHECK_EQ(pager_segment_finish(segment), 0);
	pager_segment_free(segment);
	pager_free(other);
	CHECK(ulid_compare(pager_store_id(store.pager), &real_id) == 0);
	read.address = foreign_address;
	capture_stderr(read_quietly, &read, log, sizeof log);
	CHECK_EQ(read.rc, -EIO);
	CHECK_EQ(raw.size, 0);
	buf_free(&raw);
	store_close(&store);
}

TEST(a_segment_address_inside_its_header_is_eio)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	struct block_address address = { 0, 0 };
	write_segment(&store, 5, "five", &address);
	struct block_address inside = { 5, 100 };
	struct buf raw;
	buf_init(&raw);
	char log[1024];
	struct corrupt_read read = { store.pager, inside, 0, &raw, 0 };
	capture_stderr(read_quietly, &read, log, sizeof log);
	CHECK_EQ(read.rc, -EIO);
	CHECK(strstr(log, "segments/0000000000000005") != NULL);
	CHECK(strstr(log, "offset 100") != NULL);
	buf_free(&raw);
	store_close(&store);
}

#define MANY_SEGMENTS 70

static struct block_address many_addresses[MANY_SEGMENTS];

struct reader_context {
	struct pager *pager;
	int start;
	int failures;
};

static void *read_all_segments(void *argument)
{
	struct reader_context *context = argument;
	struct buf raw;
	buf_init(&raw);
	for (int round = 0; round < 20; round++) {
		for (int i = 0; i < MANY_SEGMENTS; i++) {
			int index = (i * 7 + context->start + round) % MANY_SEGMENTS;
			char expected[32];
			snprintf(expected, sizeof expected, "segment %d", index);
			buf_reset(&raw);
			if (pager_read(context->pager, many_addresses[index], BLOCK_FRAGMENT, &raw) != 0 ||
			    raw.size != strlen(expected) || memcmp(raw.data, expected, raw.size) != 0)
				context->failures++;
		}
	}
	buf_free(&raw);
	return NULL;
}

TEST(more_segments_than_cached_descriptors_read_correctly_from_many_threads)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	for (int i = 0; i < MANY_SEGMENTS; i++) {
		char text[32];
		snprintf(text, sizeof text, "segment %d", i);
		write_segment(&store, 1000 + (uint64_t)i, text, &many_addresses[i]);
		CHECK_EQ(many_addresses[i].segment, 1000 + (uint64_t)i);
	}
	pthread_t threads[4];
	struct reader_context contexts[4];
	for (int t = 0; t < 4; t++) {
		contexts[t] = (struct reader_context){ store.pager, t * 17, 0 };
		CHECK_EQ(pthread_create(&threads[t], NULL, read_all_segments, &contexts[t]), 0);
	}
	for (int t = 0; t < 4; t++)
		pthread_join(threads[t], NULL);
	for (int t = 0; t < 4; t++)
		CHECK_EQ(contexts[t].failures, 0);
	/* Descriptors stay bounded: at most the cache size are open. */
	int open_descriptors = 0;
	for (int fd = 0; fd < 4096; fd++)
		open_descriptors += fcntl(fd, F_GETFD) >= 0;
	CHECK(open_descriptors < 32 + 16);
	store_close(&store);
}

/* ---- the block cache ------------------------------------------------------ */

static uint64_t manifest_pages_of_read(struct pager *pager, struct block_address address,
				       enum block_type type, struct buf *raw, int *rc)
{
	io_counters_reset();
	*rc = pager_read(pager, address, type, raw);
	struct io_counters counters;
	io_counters_get(IO_MANIFEST, &counters);
	return counters.pages + counters.reads + counters.bytes;
}

TEST(without_a_budget_every_read_of_a_block_is_counted)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	struct block_address address = append_one(&store, BLOCK_NODE, CODEC_NONE, "node", 4);
	struct buf raw;
	buf_init(&raw);
	int rc;
	for (int i = 0; i < 3; i++) {
		CHECK(manifest_pages_of_read(store.pager, address, BLOCK_NODE, &raw, &rc) > 0);
		CHECK_EQ(rc, 0);
	}
	size_t used = 1, budget = 1;
	pager_cache_usage(store.pager, &used, &budget);
	CHECK_EQ(used, 0);
	CHECK_EQ(budget, 0);
	buf_free(&raw);
	store_close(&store);
}

TEST(a_cached_block_is_served_again_without_any_read_counted)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	struct buf text, raw;
	buf_init(&text);
	buf_init(&raw);
	fill_text(&text, 20000);
	/* appended before the cache had a budget: the first read reads it */
	struct block_address address = append_one(&store, BLOCK_COMMIT, CODEC_ZSTD, text.data, text.size);
	CHECK_EQ(pager_cache_limit(store.pager, 1 << 20), 0);
	int rc;
	CHECK(manifest_pages_of_read(store.pager, address, BLOCK_COMMIT, &raw, &rc) > 0);
	CHECK_EQ(rc, 0);
	struct io_counters counters;
	io_counters_get(IO_MANIFEST, &counters);
	CHECK_EQ(counters.pages, 1);
	CHECK_EQ(manifest_pages_of_read(store.pager, address, BLOCK_COMMIT, &raw, &rc), 0);
	CHECK_EQ(rc, 0);
	CHECK_EQ(raw.size, 2 * text.size);
	CHECK(memcmp(raw.data, text.data, text.size) == 0);
	CHECK(memcmp(raw.data + text.size, text.data, text.size) == 0);
	size_t used = 0;
	pager_cache_usage(store.pager, &used, NULL);
	CHECK(used >= text.size);
	buf_free(&text);
	buf_free(&raw);
	store_close(&store);
}

TEST(a_block_this_process_appended_is_read_back_from_the_cache)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	CHECK_EQ(pager_cache_limit(store.pager, 1 << 20), 0);
	struct buf text, raw;
	buf_init(&text);
	buf_init(&raw);
	fill_text(&text, 20000);
	struct block_address commit = append_one(&store, BLOCK_COMMIT, CODEC_ZSTD, text.data, text.size);
	struct block_address fragment = append_one(&store, BLOCK_FRAGMENT, CODEC_ZSTD, text.data, text.size);
	int rc;
	/* the commit record (a cacheable type) costs no read; a fragment is never cached */
	CHECK_EQ(manifest_pages_of_read(store.pager, commit, BLOCK_COMMIT, &raw, &rc), 0);
	CHECK_EQ(rc, 0);
	CHECK_EQ(raw.size, text.size);
	CHECK(memcmp(raw.data, text.data, text.size) == 0);
	buf_reset(&raw);
	CHECK(manifest_pages_of_read(store.pager, fragment, BLOCK_FRAGMENT, &raw, &rc) > 0);
	CHECK_EQ(rc, 0);
	buf_free(&text);
	buf_free(&raw);
	store_close(&store);
}

TEST(a_cached_block_read_as_another_type_is_still_eio)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	CHECK_EQ(pager_cache_limit(store.pager, 1 << 20), 0);
	struct block_address address = append_one(&store, BLOCK_NODE, CODEC_NONE, "node", 4);
	struct buf raw;
	buf_init(&raw);
	CHECK_EQ(pager_read(store.pager, address, BLOCK_NODE, &raw), 0);
	buf_reset(&raw);
	char log[1024];
	struct corrupt_read read = { store.pager, address, BLOCK_TABLE, &raw, 0 };
	capture_stderr(read_quietly, &read, log, sizeof log);
	CHECK_EQ(read.rc, -EIO);
	CHECK_EQ(raw.size, 0);
	CHECK_EQ(pager_read(store.pager, address, 0, &raw), 0);   /* any type: the cached one */
	CHECK_EQ(raw.size, 4);
	buf_free(&raw);
	store_close(&store);
}

TEST(roots_fragments_bitmaps_and_segment_blocks_are_never_cached)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	CHECK_EQ(pager_cache_limit(store.pager, 1 << 20), 0);
	enum block_type types[] = { BLOCK_ROOT, BLOCK_FRAGMENT, BLOCK_BITMAP };
	struct buf raw;
	buf_init(&raw);
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
		struct block_address address = append_one(&store, types[i], CODEC_NONE, "payload", 7);
		for (int round = 0; round < 2; round++) {
			io_counters_reset();
			CHECK_EQ(pager_read(store.pager, address, types[i], &raw), 0);
			struct io_counters manifest, data;
			io_counters_get(IO_MANIFEST, &manifest);
			io_counters_get(IO_DATA, &data);
			CHECK_EQ(manifest.pages + data.pages, 1);
		}
	}
	struct block_address in_segment;
	write_segment(&store, 77, "segment node", &in_segment);
	for (int round = 0; round < 2; round++) {
		io_counters_reset();
		CHECK_EQ(pager_read(store.pager, in_segment, 0, &raw), 0);
		struct io_counters data;
		io_counters_get(IO_DATA, &data);
		CHECK_EQ(data.pages, 1);
	}
	size_t used = 1;
	pager_cache_usage(store.pager, &used, NULL);
	CHECK_EQ(used, 0);
	buf_free(&raw);
	store_close(&store);
}

TEST(blocks_read_from_an_append_buffer_are_not_cached)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	CHECK_EQ(pager_cache_limit(store.pager, 1 << 20), 0);
	struct pager_append *append = NULL;
	struct block_address address;
	CHECK_EQ(pager_append_begin(store.pager, manifest_size(&store), &append), 0);
	CHECK_EQ(pager_append_block(append, BLOCK_NODE, CODEC_NONE, "buffered", 8, &address), 0);
	struct buf raw;
	buf_init(&raw);
	CHECK_EQ(pager_append_read(append, address, BLOCK_NODE, &raw), 0);
	size_t used = 1;
	pager_cache_usage(store.pager, &used, NULL);
	CHECK_EQ(used, 0);
	pager_append_free(append);   /* never written: the bytes never existed */
	buf_free(&raw);
	store_close(&store);
}

TEST(the_cache_keeps_within_its_budget_dropping_the_least_recently_used)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	size_t budget = 64 * 1024;
	CHECK_EQ(pager_cache_limit(store.pager, budget), 0);
	struct buf text, raw;
	buf_init(&text);
	buf_init(&raw);
	fill_text(&text, 2000);
	struct block_address addresses[100];
	for (int i = 0; i < 100; i++)
		addresses[i] = append_one(&store, BLOCK_NODE, CODEC_NONE, text.data, text.size);
	int rc;
	for (int i = 0; i < 100; i++) {
		buf_reset(&raw);
		CHECK_EQ(pager_read(store.pager, addresses[i], BLOCK_NODE, &raw), 0);
		buf_reset(&raw);
		CHECK_EQ(manifest_pages_of_read(store.pager, addresses[0], BLOCK_NODE, &raw, &rc), 0);
		size_t used = 0;
		pager_cache_usage(store.pager, &used, NULL);
		CHECK(used <= budget);
	}
	/* 0 is read after every other block: it stays; the oldest others went */
	buf_reset(&raw);
	CHECK_EQ(manifest_pages_of_read(store.pager, addresses[0], BLOCK_NODE, &raw, &rc), 0);
	CHECK(manifest_pages_of_read(store.pager, addresses[1], BLOCK_NODE, &raw, &rc) > 0);
	CHECK_EQ(manifest_pages_of_read(store.pager, addresses[99], BLOCK_NODE, &raw, &rc), 0);
	buf_free(&text);
	buf_free(&raw);
	store_close(&store);
}

TEST(bytes_cut_from_the_manifest_are_never_served_from_the_cache)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	CHECK_EQ(pager_cache_limit(store.pager, 1 << 20), 0);
	uint64_t base = manifest_size(&store);
	struct block_address first = append_one(&store, BLOCK_NODE, CODEC_NONE, "first", 5);
	struct buf raw;
	buf_init(&raw);
	CHECK_EQ(pager_read(store.pager, first, BLOCK_NODE, &raw), 0);   /* cached */
	/* the block is cut (as a failed publish or recovery does) and another lands there */
	CHECK_EQ(io_truncate(&store.manifest, base), 0);
	struct block_address second = append_one(&store, BLOCK_NODE, CODEC_NONE, "other", 5);
	CHECK_EQ(second.offset, first.offset);
	buf_reset(&raw);
	CHECK_EQ(pager_read(store.pager, second, BLOCK_NODE, &raw), 0);
	CHECK(raw.size == 5 && memcmp(raw.data, "other", 5) == 0);

	/* a publish abandoned after its write reached the file drops its range too */
	struct pager_append *append = NULL;
	struct block_address third;
	uint64_t before = manifest_size(&store);
	CHECK_EQ(pager_append_begin(store.pager, before, &append), 0);
	CHECK_EQ(pager_append_block(append, BLOCK_NODE, CODEC_NONE, "third", 5, &third), 0);
	CHECK_EQ(pager_append_write(append), 0);
	pager_append_abandon(append);   /* as a publish that fails after the write does */
	pager_append_free(append);
	buf_reset(&raw);
	CHECK_EQ(pager_read(store.pager, third, BLOCK_NODE, &raw), 0);   /* on disk, now cached */
	CHECK_EQ(io_truncate(&store.manifest, before), 0);
	CHECK_EQ(pager_append_begin(store.pager, before, &append), 0);
	pager_append_free(append);
	struct block_address fourth = append_one(&store, BLOCK_NODE, CODEC_NONE, "again", 5);
	CHECK_EQ(fourth.offset, third.offset);
	buf_reset(&raw);
	CHECK_EQ(pager_read(store.pager, fourth, BLOCK_NODE, &raw), 0);
	CHECK(raw.size == 5 && memcmp(raw.data, "again", 5) == 0);
	buf_free(&raw);
	store_close(&store);
}

struct cache_reader {
	struct pager *pager;
	struct block_address *addresses;
	int count;
	int failures;
};

static void *read_cached_blocks(void *argument)
{
	struct cache_reader *reader = argument;
	struct buf raw;
	buf_init(&raw);
	for (int round = 0; round < 200; round++)
		for (int i = 0; i < reader->count; i++) {
			int which = (i * 7 + round) % reader->count;
			buf_reset(&raw);
			char expected[32];
			int length = snprintf(expected, sizeof expected, "block %d", which);
			if (pager_read(reader->pager, reader->addresses[which], BLOCK_NODE, &raw) != 0 ||
			    raw.size != (size_t)length || memcmp(raw.data, expected, raw.size) != 0)
				reader->failures++;
		}
	buf_free(&raw);
	return NULL;
}

TEST(threads_reading_through_a_small_cache_always_get_the_right_bytes)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	CHECK_EQ(pager_cache_limit(store.pager, 16 * 1024), 0);   /* a fraction of the blocks fit */
	static struct block_address addresses[400];
	for (int i = 0; i < 400; i++) {
		char text[32];
		int length = snprintf(text, sizeof text, "block %d", i);
		addresses[i] = append_one(&store, BLOCK_NODE, CODEC_NONE, text, (size_t)length);
	}
	pthread_t threads[4];
	struct cache_reader readers[4];
	for (int t = 0; t < 4; t++) {
		readers[t] = (struct cache_reader){ store.pager, addresses, 400, 0 };
		CHECK_EQ(pthread_create(&threads[t], NULL, read_cached_blocks, &readers[t]), 0);
	}
	for (int t = 0; t < 4; t++)
		pthread_join(threads[t], NULL);
	for (int t = 0; t < 4; t++)
		CHECK_EQ(readers[t].failures, 0);
	size_t used = 0;
	pager_cache_usage(store.pager, &used, NULL);
	CHECK(used <= 16 * 1024);
	store_close(&store);
}

int main(void)
{
	return harness_run();
}

/* ---- packs (docs/FORMAT.md §22) ---------------------------------------------------------- */

#include "pack.h"

/* Appends count blocks of about 700 bytes each through the pager; their addresses in out. */
static int append_blocks(struct store *store, int count, struct block_address *out)
{
	struct pager_append *append = NULL;
	int rc = pager_append_begin(store->pager, manifest_size(store), &append);
	for (int i = 0; rc == 0 && i < count; i++) {
		char raw[700];
		for (size_t j = 0; j < sizeof raw; j++)
			raw[j] = (char)('a' + (i * 7 + (int)j * 13) % 26);
		rc = pager_append_block(append, BLOCK_COMMIT, CODEC_NONE, raw, sizeof raw, &out[i]);
	}
	if (rc == 0)
		rc = pager_append_write(append);
	if (rc == 0)
		rc = pager_append_sync(append);
	pager_append_free(append);
	return rc;
}

/* Packs every even block of addresses (whole blocks, copied from the manifest) below covered_below. */
static int pack_even_blocks(struct store *store, const struct block_address *addresses, int count,
			    uint64_t covered_below)
{
	struct pack_writer *writer = NULL;
	struct buf bytes;
	buf_init(&bytes);
	int rc = pack_writer_begin(store->directory, &store->id, FILE_FORMAT_VERSION, covered_below, &writer);
	for (int i = 0; rc == 0 && i < count; i += 2) {
		uint64_t size;
		buf_reset(&bytes);
		if ((rc = pager_block_size(store->pager, addresses[i], &size)) == 0 &&
		    (rc = pager_copy_bytes(store->pager, addresses[i].offset, (size_t)size, &bytes)) == 0)
			rc = pack_writer_add(writer, addresses[i].offset, bytes.data, bytes.size);
	}
	if (rc == 0)
		rc = pack_writer_finish(writer);
	pack_writer_free(writer);
	buf_free(&bytes);
	return rc;
}

TEST(a_pack_serves_each_block_it_holds_at_its_manifest_address_and_no_other)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	enum { COUNT = 400 };   /* ~280 KiB: several frames */
	static struct block_address addresses[COUNT];
	CHECK_EQ(append_blocks(&store, COUNT, addresses), 0);
	uint64_t below = manifest_size(&store);
	CHECK_EQ(pack_even_blocks(&store, addresses, COUNT, below), 0);
	CHECK_EQ(pager_pack_refresh(store.pager), 1);
	CHECK_EQ(pager_pack_covered_below(store.pager, NULL), below);
	/* the manifest's pages are gone: every even block still reads, from the pack */
	CHECK_EQ(io_punch_hole(&store.manifest, MANIFEST_FIRST_BLOCK, below / 4096 * 4096), 0);
	struct buf raw;
	buf_init(&raw);
	for (int i = 0; i < COUNT; i++) {
		buf_reset(&raw);
		int rc = pager_read(store.pager, addresses[i], BLOCK_COMMIT, &raw);
		if (i % 2 == 0) {
			CHECK_EQ(rc, 0);
			CHECK_EQ(raw.size, 700);
			CHECK_EQ(raw.data[5], (uint8_t)('a' + (i * 7 + 5 * 13) % 26));
		} else {
			CHECK_EQ(rc, -EIO);   /* not in the pack: never made up */
		}
	}
	buf_free(&raw);
	CHECK_EQ(pager_pack_verify(store.pager, NULL, NULL), 0);
	store_close(&store);
}

TEST(a_pack_counts_a_block_read_as_one_page_of_the_blocks_size_like_the_manifest)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	static struct block_address addresses[10];
	CHECK_EQ(append_blocks(&store, 10, addresses), 0);
	struct buf raw;
	buf_init(&raw);
	struct io_counters before, after;
	io_counters_reset();
	CHECK_EQ(pager_read(store.pager, addresses[4], BLOCK_COMMIT, &raw), 0);
	io_counters_get(IO_MANIFEST, &before);
	CHECK_EQ(pack_even_blocks(&store, addresses, 10, manifest_size(&store)), 0);
	CHECK_EQ(pager_pack_refresh(store.pager), 1);
	io_counters_reset();
	buf_reset(&raw);
	CHECK_EQ(pager_read(store.pager, addresses[4], BLOCK_COMMIT, &raw), 0);
	io_counters_get(IO_MANIFEST, &after);
	CHECK_EQ(after.pages, before.pages);
	CHECK_EQ(after.bytes, before.bytes);
	buf_free(&raw);
	store_close(&store);
}

TEST(a_pack_with_a_damaged_trailer_or_frame_is_refused_or_reported)
{
	struct store store;
	CHECK_EQ(store_open(&store), 0);
	static struct block_address addresses[40];
	CHECK_EQ(append_blocks(&store, 40, addresses), 0);
	uint64_t below = manifest_size(&store);
	CHECK_EQ(pack_even_blocks(&store, addresses, 40, below), 0);
	char name[64];
	snprintf(name, sizeof name, "packs/%016llx", (unsigned long long)below);
	struct io_file file;
	CHECK_EQ(io_file_open(store.directory, name, O_RDWR, IO_MANIFEST, &file), 0);
	uint64_t size;
	CHECK_EQ(io_size(&file, &size), 0);
	uint8_t byte;
	/* a frame byte: the pack opens, verify reports the frame, its blocks read as -EIO */
	CHECK_EQ(io_pread(&file, &byte, 1, 4096 + 100), 0);
	byte ^= 1;
	CHECK_EQ(io_pwrite(&file, &byte, 1, 4096 + 100), 0);
	struct pack *pack = NULL;
	CHECK_EQ(pack_open(store.directory, &store.id, below, &pack), 0);
	struct buf out;
	buf_init(&out);
	CHECK_EQ(pack_read_block(pack, addresses[0].offset, &out), -EIO);
	pack_free(pack);
	/* a trailer byte: the pack is refused */
	CHECK_EQ(io_pread(&file, &byte, 1, size - 20), 0);
	byte ^= 1;
	CHECK_EQ(io_pwrite(&file, &byte, 1, size - 20), 0);
	pack = NULL;
	CHECK_EQ(pack_open(store.directory, &store.id, below, &pack), -EIO);
	CHECK(pack == NULL);
	buf_free(&out);
	io_file_close(&file);
	store_close(&store);
}
