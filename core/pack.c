/*
 * pack — gc's compressed copy of the manifest's retained blocks. See pack.h;
 * the layout is docs/FORMAT.md §22.
 *
 * Invariants:
 *   1. A pack file is complete before it has its name: it is written as
 *      packs/<N>.tmp, fsynced, renamed, and packs/ fsynced; nothing ever
 *      writes to packs/<N> afterwards.
 *   2. Frames are in increasing manifest order and never overlap: frame i's
 *      range [first, end) lies below frame i+1's first, and every run of a
 *      frame lies inside its frame's range, runs in increasing order,
 *      separated by at least one byte the pack does not hold.
 *   3. Every byte a reader gets from a pack passed the frame's block checksum
 *      (codec_decode) and is the byte the manifest held at that offset when
 *      the pack was written (gc copies runs of whole blocks).
 *   4. The frame cache holds at most PACK_CACHED_FRAMES decompressed frames,
 *      replaced least recently used first; it is guarded by the pack's lock
 *      and never decompresses under it.
 *
 * States of a struct pack_writer: WRITING (frames appended) -> FINISHED
 * (renamed, durable) -> freed; a failure leaves it FAILED (every later call
 * returns the error) and pack_writer_free removes the temporary file.
 */
#include "pack.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "pager.h"

#define PACK_ZSTD_LEVEL 9        /* gc is not on anyone's critical path: smaller packs */
#define PACK_CACHED_FRAMES 4
#define PACK_TRAILER_SIZE 32
#define PACK_INDEX_ENTRY_SIZE 32
#define PACK_RUN_ENTRY_SIZE 16
#define PACK_NAME_SIZE 40

static const uint8_t trailer_magic[8] = { 'G', 'F', 'S', 'P', 'A', 'C', 'K', 0 };

struct frame_entry {
	uint64_t first, end;     /* manifest range [first, end) its runs lie in */
	uint64_t file_offset;    /* where its block starts in the pack file */
	uint32_t block_size;     /* header + stored payload */
};

/* One run of a decompressed frame: manifest bytes [offset, offset + size) at bytes + at. */
struct run {
	uint64_t offset;
	uint32_t size;
	size_t at;
};

struct cached_frame {
	size_t frame;            /* index into frames; SIZE_MAX: empty */
	uint64_t last_used;
	struct buf raw;          /* the decompressed payload */
	struct run *runs;
	uint32_t run_count;
};

struct pack {
	struct io_file file;
	uint64_t covered_below;
	uint64_t file_size;
	struct frame_entry *frames;
	size_t frame_count;
	pthread_mutex_t lock;    /* guards cache and clock */
	uint64_t clock;
	struct cached_frame cache[PACK_CACHED_FRAMES];
	char name[PACK_NAME_SIZE];
};

static void pack_name(uint64_t covered_below, bool temporary, char out[PACK_NAME_SIZE])
{
	snprintf(out, PACK_NAME_SIZE, "packs/%016llx%s", (unsigned long long)covered_below, temporary ? ".tmp" : "");
}

static void log_bad_pack(const char *name, uint64_t offset, const char *what)
{
	io_log(LOG_ERR, "%s: %s at offset %llu", name, what, (unsigned long long)offset);
}

/* ---- finding packs ------------------------------------------------------------------ */

/* covered_below of a pack file name (16 lower-case hex digits), or 0. */
static uint64_t parse_name(const char *name)
{
	if (strlen(name) != 16)
		return 0;
	uint64_t value = 0;
	for (int i = 0; i < 16; i++) {
		char c = name[i];
		int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (digit < 0)
			return 0;
		value = value << 4 | (uint64_t)digit;
	}
	return value;
}

static int note_newest(const char *name, void *context)
{
	uint64_t *newest = context, value = parse_name(name);
	if (value > *newest)
		*newest = value;
	return 0;
}

int pack_newest(int store_directory, uint64_t *covered_below_out)
{
	uint64_t newest = 0;
	int rc = io_directory_list(store_directory, "packs", note_newest, &newest);
	if (rc < 0)
		return rc;
	if (newest == 0)
		return -ENOENT;
	*covered_below_out = newest;
	return 0;
}

/* ---- opening ------------------------------------------------------------------------ */

static int read_index(struct pack *pack, uint64_t index_offset, uint64_t index_size)
{
	if (index_offset < FILE_HEADER_SIZE || index_size < BLOCK_HEADER_SIZE ||
	    index_offset + index_size + PACK_TRAILER_SIZE != pack->file_size || index_size > BLOCK_MAX_RAW_SIZE)
		return -EIO;
	struct buf block, raw;
	buf_init(&block);
	buf_init(&raw);
	int rc = buf_reserve(&block, (size_t)index_size);
	if (rc == 0)
		rc = io_pread(&pack->file, block.data, (size_t)index_size, index_offset);
	if (rc == 0)
		rc = codec_decode(block.data, (size_t)index_size, BLOCK_PACK_INDEX, &raw);
	if (rc == 0 && (raw.size < 8 || (raw.size - 8) % PACK_INDEX_ENTRY_SIZE != 0 ||
			buf_load_u64(raw.data) != (raw.size - 8) / PACK_INDEX_ENTRY_SIZE))
		rc = -EIO;
	size_t count = rc == 0 ? (raw.size - 8) / PACK_INDEX_ENTRY_SIZE : 0;
	if (rc == 0 && count && !(pack->frames = calloc(count, sizeof *pack->frames)))
		rc = -ENOMEM;
	uint64_t previous_end = MANIFEST_FIRST_BLOCK, previous_file_end = FILE_HEADER_SIZE;
	for (size_t i = 0; rc == 0 && i < count; i++) {
		const uint8_t *entry = raw.data + 8 + i * PACK_INDEX_ENTRY_SIZE;
		struct frame_entry *frame = &pack->frames[i];
		frame->first = buf_load_u64(entry);
		frame->end = buf_load_u64(entry + 8);
		frame->file_offset = buf_load_u64(entry + 16);
		frame->block_size = buf_load_u32(entry + 24);
		/* invariant 2; frames follow each other in the file */
		if (frame->first < previous_end || frame->end <= frame->first || frame->end > pack->covered_below ||
		    frame->file_offset != previous_file_end || frame->block_size < BLOCK_HEADER_SIZE ||
		    buf_load_u32(entry + 28) != 0)
			rc = -EIO;
		previous_end = frame->end;
		previous_file_end = frame->file_offset + frame->block_size;
	}
	if (rc == 0 && previous_file_end != index_offset)
		rc = -EIO;
	pack->frame_count = count;
	buf_free(&block);
	buf_free(&raw);
	return rc;
}

int pack_open(int store_directory, const struct ulid *store_id, uint64_t covered_below, struct pack **out)
{
	struct pack *pack = calloc(1, sizeof *pack);
	if (!pack)
		return -ENOMEM;
	pack->file.descriptor = -1;
	pack->covered_below = covered_below;
	pack_name(covered_below, false, pack->name);
	for (int i = 0; i < PACK_CACHED_FRAMES; i++)
		pack->cache[i].frame = SIZE_MAX;
	if (pthread_mutex_init(&pack->lock, NULL) != 0) {
		free(pack);
		return -ENOMEM;
	}
	int rc = io_file_open(store_directory, pack->name, O_RDONLY, IO_MANIFEST, &pack->file);
	if (rc < 0)
		goto out;
	uint8_t header_bytes[FILE_HEADER_SIZE], trailer[PACK_TRAILER_SIZE];
	struct file_header header;
	if ((rc = io_size(&pack->file, &pack->file_size)) < 0)
		goto out;
	if (pack->file_size < FILE_HEADER_SIZE + PACK_TRAILER_SIZE) {
		rc = -EIO;
		log_bad_pack(pack->name, 0, "pack file is too short");
		goto out;
	}
	if ((rc = io_pread(&pack->file, header_bytes, sizeof header_bytes, 0)) < 0 ||
	    (rc = codec_file_header_decode(header_bytes, &header)) < 0 ||
	    (rc = header.kind != FILE_KIND_PACK || header.segment_id != covered_below ||
		  ulid_compare(&header.store_id, store_id) != 0 ? -EIO : 0) < 0) {
		if (rc == -EIO)
			log_bad_pack(pack->name, 0, "pack file header is damaged or from another store");
		goto out;
	}
	if ((rc = io_pread(&pack->file, trailer, sizeof trailer, pack->file_size - PACK_TRAILER_SIZE)) < 0)
		goto out;
	if (memcmp(trailer, trailer_magic, sizeof trailer_magic) != 0 ||
	    buf_load_u64(trailer + 24) != codec_hash(trailer, 24)) {
		rc = -EIO;
		log_bad_pack(pack->name, pack->file_size - PACK_TRAILER_SIZE, "pack trailer is damaged");
		goto out;
	}
	if ((rc = read_index(pack, buf_load_u64(trailer + 8), buf_load_u64(trailer + 16))) < 0) {
		if (rc == -EIO)
			log_bad_pack(pack->name, buf_load_u64(trailer + 8), "pack frame index is damaged");
		goto out;
	}
	*out = pack;
	return 0;
out:
	pack_free(pack);
	return rc;
}

void pack_free(struct pack *pack)
{
	if (!pack)
		return;
	for (int i = 0; i < PACK_CACHED_FRAMES; i++) {
		buf_free(&pack->cache[i].raw);
		free(pack->cache[i].runs);
	}
	free(pack->frames);
	io_file_close(&pack->file);
	pthread_mutex_destroy(&pack->lock);
	free(pack);
}

uint64_t pack_covered_below(const struct pack *pack)
{
	return pack->covered_below;
}

uint64_t pack_file_size(const struct pack *pack)
{
	return pack->file_size;
}

/* ---- reading ------------------------------------------------------------------------ */

/* The frame whose range holds offset, or SIZE_MAX. */
static size_t frame_of(const struct pack *pack, uint64_t offset)
{
	size_t low = 0, high = pack->frame_count;
	while (low < high) {
		size_t middle = low + (high - low) / 2;
		if (pack->frames[middle].first <= offset)
			low = middle + 1;
		else
			high = middle;
	}
	if (low == 0 || offset >= pack->frames[low - 1].end)
		return SIZE_MAX;
	return low - 1;
}

/*
 * Reads, verifies and decompresses frame index into *frame (raw and runs
 * replaced). Returns 0, -EIO (logged) or -ENOMEM.
 */
static int frame_load(struct pack *pack, size_t index, struct cached_frame *frame)
{
	const struct frame_entry *entry = &pack->frames[index];
	struct buf block;
	buf_init(&block);
	buf_reset(&frame->raw);
	int rc = buf_reserve(&block, entry->block_size);
	if (rc == 0)
		rc = io_pread(&pack->file, block.data, entry->block_size, entry->file_offset);
	if (rc == 0)
		rc = codec_decode(block.data, entry->block_size, BLOCK_PACK_FRAME, &frame->raw);
	buf_free(&block);
	if (rc < 0)
		goto out;
	const uint8_t *raw = frame->raw.data;
	uint32_t count = frame->raw.size >= 8 ? buf_load_u32(raw) : 0;
	size_t table = 8 + (size_t)count * PACK_RUN_ENTRY_SIZE;
	if (count == 0 || buf_load_u32(raw + 4) != 0 || table > frame->raw.size) {
		rc = -EIO;
		goto out;
	}
	free(frame->runs);
	frame->run_count = 0;
	if (!(frame->runs = calloc(count, sizeof *frame->runs))) {
		rc = -ENOMEM;
		goto out;
	}
	size_t at = table;
	uint64_t previous_end = entry->first;
	for (uint32_t i = 0; i < count; i++) {
		const uint8_t *run_entry = raw + 8 + (size_t)i * PACK_RUN_ENTRY_SIZE;
		struct run *run = &frame->runs[i];
		run->offset = buf_load_u64(run_entry);
		run->size = buf_load_u32(run_entry + 8);
		run->at = at;
		/* invariant 2: runs in order, inside the frame's range, apart */
		if (run->size == 0 || buf_load_u32(run_entry + 12) != 0 || run->offset < previous_end ||
		    (i > 0 && run->offset == previous_end) || run->offset + run->size > entry->end ||
		    at + run->size > frame->raw.size) {
			rc = -EIO;
			goto out;
		}
		if (i == 0 && run->offset != entry->first) {
			rc = -EIO;
			goto out;
		}
		previous_end = run->offset + run->size;
		at += run->size;
	}
	if (at != frame->raw.size || previous_end != entry->end) {
		rc = -EIO;
		goto out;
	}
	frame->run_count = count;
	frame->frame = index;
	return 0;
out:
	frame->frame = SIZE_MAX;
	frame->run_count = 0;
	if (rc == -EIO)
		log_bad_pack(pack->name, entry->file_offset, "pack frame is damaged (checksum, size or run table)");
	return rc;
}

/* The run of frame holding offset, or NULL. */
static const struct run *run_of(const struct cached_frame *frame, uint64_t offset)
{
	uint32_t low = 0, high = frame->run_count;
	while (low < high) {
		uint32_t middle = low + (high - low) / 2;
		if (frame->runs[middle].offset <= offset)
			low = middle + 1;
		else
			high = middle;
	}
	if (low == 0)
		return NULL;
	const struct run *run = &frame->runs[low - 1];
	return offset < run->offset + run->size ? run : NULL;
}

/*
 * Copies manifest bytes [offset, offset + size) — or, when size is 0, the
 * whole block starting at offset — out of the frame holding them. Caller
 * holds pack->lock. Returns 0, -ENOENT, -ENOMEM.
 */
static int copy_out(const struct cached_frame *frame, uint64_t offset, size_t size, struct buf *out)
{
	const struct run *run = run_of(frame, offset);
	if (!run)
		return -ENOENT;
	const uint8_t *bytes = frame->raw.data + run->at + (offset - run->offset);
	uint64_t left = run->offset + run->size - offset;
	if (size == 0) {
		struct block_header header;
		if (left < BLOCK_HEADER_SIZE || codec_decode_header(bytes, &header) < 0)
			return -ENOENT;
		size = BLOCK_HEADER_SIZE + (size_t)header.stored_size;
	}
	if (size > left)
		return -ENOENT;
	return buf_append(out, bytes, size);
}

static int read_bytes(struct pack *pack, uint64_t offset, size_t size, struct buf *out)
{
	if (offset >= pack->covered_below)
		return -ENOENT;
	size_t index = frame_of(pack, offset);
	if (index == SIZE_MAX)
		return -ENOENT;
	pthread_mutex_lock(&pack->lock);
	struct cached_frame *victim = &pack->cache[0];
	for (int i = 0; i < PACK_CACHED_FRAMES; i++) {
		struct cached_frame *frame = &pack->cache[i];
		if (frame->frame == index) {
			frame->last_used = ++pack->clock;
			int rc = copy_out(frame, offset, size, out);
			pthread_mutex_unlock(&pack->lock);
			return rc;
		}
		if (frame->frame == SIZE_MAX || (victim->frame != SIZE_MAX && frame->last_used < victim->last_used))
			victim = frame;
	}
	pthread_mutex_unlock(&pack->lock);
	/* a miss: decompress outside the lock (invariant 4), then share it */
	struct cached_frame loaded = { .frame = SIZE_MAX };
	buf_init(&loaded.raw);
	int rc = frame_load(pack, index, &loaded);
	if (rc < 0) {
		buf_free(&loaded.raw);
		free(loaded.runs);
		return rc;
	}
	rc = copy_out(&loaded, offset, size, out);
	pthread_mutex_lock(&pack->lock);
	if (victim->frame != index) {
		/* the victim may have been reused meanwhile: pick the least recent again */
		victim = &pack->cache[0];
		for (int i = 1; i < PACK_CACHED_FRAMES; i++)
			if (pack->cache[i].frame == SIZE_MAX ||
			    (victim->frame != SIZE_MAX && pack->cache[i].last_used < victim->last_used))
				victim = &pack->cache[i];
		struct cached_frame old = *victim;
		*victim = loaded;
		victim->last_used = ++pack->clock;
		loaded = old;
	}
	pthread_mutex_unlock(&pack->lock);
	buf_free(&loaded.raw);
	free(loaded.runs);
	return rc;
}

int pack_read(struct pack *pack, uint64_t offset, size_t size, struct buf *out)
{
	return size == 0 ? -ENOENT : read_bytes(pack, offset, size, out);
}

int pack_read_block(struct pack *pack, uint64_t offset, struct buf *out)
{
	return read_bytes(pack, offset, 0, out);
}

int pack_verify(struct pack *pack, void (*report)(uint64_t offset, const char *message, void *context), void *context)
{
	int problems = 0;
	struct cached_frame frame = { .frame = SIZE_MAX };
	buf_init(&frame.raw);
	for (size_t i = 0; i < pack->frame_count; i++) {
		int rc = frame_load(pack, i, &frame);
		if (rc == -ENOMEM) {
			problems = rc;
			break;
		}
		if (rc < 0) {
			char message[160];
			snprintf(message, sizeof message,
				 "%s: frame %zu (manifest bytes %llu..%llu) is damaged: those blocks cannot be read",
				 pack->name, i, (unsigned long long)pack->frames[i].first,
				 (unsigned long long)pack->frames[i].end);
			report(pack->frames[i].first, message, context);
			problems++;
		}
	}
	buf_free(&frame.raw);
	free(frame.runs);
	return problems;
}

/* ---- writing ------------------------------------------------------------------------ */

enum writer_state { WRITER_WRITING, WRITER_FINISHED, WRITER_FAILED };

struct pack_writer {
	enum writer_state state;
	int error;                 /* while FAILED */
	int store_directory;
	bool made_directory;       /* packs/ was created by this writer */
	uint64_t covered_below;
	struct io_file file;
	uint64_t file_end;
	struct buf runs;           /* the open frame's run table (16 bytes per run) */
	struct buf bytes;          /* the open frame's bytes */
	uint32_t run_count;
	uint64_t frame_first, last_end;
	struct buf index;          /* 32 bytes per frame written */
	uint64_t frame_count;
	struct buf encoded;
	char temporary[PACK_NAME_SIZE];
};

static int store_writer_fail(struct pack_writer *writer, int rc)
{
	if (rc < 0 && writer->state == WRITER_WRITING) {
		writer->state = WRITER_FAILED;
		writer->error = rc;
	}
	return rc;
}

int pack_writer_begin(int store_directory, const struct ulid *store_id, uint32_t format_version,
		      uint64_t covered_below, struct pack_writer **out)
{
	if (covered_below <= MANIFEST_FIRST_BLOCK)
		return -EINVAL;
	struct pack_writer *writer = calloc(1, sizeof *writer);
	if (!writer)
		return -ENOMEM;
	writer->store_directory = store_directory;
	writer->covered_below = covered_below;
	writer->file.descriptor = -1;
	buf_init(&writer->runs);
	buf_init(&writer->bytes);
	buf_init(&writer->index);
	buf_init(&writer->encoded);
	pack_name(covered_below, true, writer->temporary);
	int rc = io_directory_make(store_directory, "packs");
	if (rc == 0)
		writer->made_directory = true;
	else if (rc != -EEXIST)
		goto out;
	if ((rc = io_file_open(store_directory, writer->temporary, O_WRONLY | O_CREAT | O_TRUNC, IO_MANIFEST,
			       &writer->file)) < 0)
		goto out;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	struct file_header header = {
		.format_version = format_version,
		.kind = FILE_KIND_PACK,
		.store_id = *store_id,
		.segment_id = covered_below,
		.created_us = (uint64_t)now.tv_sec * 1000000u + (uint64_t)now.tv_nsec / 1000u,
	};
	uint8_t bytes[FILE_HEADER_SIZE];
	codec_file_header_encode(&header, bytes);
	if ((rc = io_pwrite(&writer->file, bytes, sizeof bytes, 0)) < 0)
		goto out;
	writer->file_end = FILE_HEADER_SIZE;
	writer->last_end = MANIFEST_FIRST_BLOCK;
	*out = writer;
	return 0;
out:
	pack_writer_free(writer);
	return rc;
}

/* Compresses and writes the open frame, if it has runs; records it in the index. */
static int flush_frame(struct pack_writer *writer)
{
	if (writer->run_count == 0)
		return 0;
	struct buf raw;
	buf_init(&raw);
	int rc = buf_put_u32(&raw, writer->run_count);
	if (rc == 0)
		rc = buf_put_u32(&raw, 0);
	if (rc == 0)
		rc = buf_append(&raw, writer->runs.data, writer->runs.size);
	if (rc == 0)
		rc = buf_append(&raw, writer->bytes.data, writer->bytes.size);
	buf_reset(&writer->encoded);
	if (rc == 0)
		rc = codec_encode_level(BLOCK_PACK_FRAME, CODEC_ZSTD, PACK_ZSTD_LEVEL, raw.data, raw.size,
					&writer->encoded);
	buf_free(&raw);
	if (rc == 0)
		rc = io_pwrite(&writer->file, writer->encoded.data, writer->encoded.size, writer->file_end);
	if (rc == 0 && (rc = buf_put_u64(&writer->index, writer->frame_first)) == 0 &&
	    (rc = buf_put_u64(&writer->index, writer->last_end)) == 0 &&
	    (rc = buf_put_u64(&writer->index, writer->file_end)) == 0 &&
	    (rc = buf_put_u32(&writer->index, (uint32_t)writer->encoded.size)) == 0)
		rc = buf_put_u32(&writer->index, 0);
	if (rc < 0)
		return rc;
	writer->file_end += writer->encoded.size;
	writer->frame_count++;
	writer->run_count = 0;
	buf_reset(&writer->runs);
	buf_reset(&writer->bytes);
	return 0;
}

int pack_writer_add(struct pack_writer *writer, uint64_t offset, const void *bytes, size_t size)
{
	if (writer->state != WRITER_WRITING)
		return writer->state == WRITER_FAILED ? writer->error : -EINVAL;
	if (size == 0 || offset < writer->last_end || offset + size > writer->covered_below)
		return -EINVAL;
	int rc = 0;
	/* frames are cut between adds, so a block (an add holds whole blocks) never spans two */
	if (writer->run_count > 0 && writer->bytes.size + size > PACK_FRAME_RAW)
		rc = flush_frame(writer);
	if (rc < 0)
		return store_writer_fail(writer, rc);
	if (writer->run_count > 0 && offset == writer->last_end) {
		/* contiguous with the last run: extend it (its size field is the last 16 bytes' second word) */
		uint8_t *entry = writer->runs.data + writer->runs.size - PACK_RUN_ENTRY_SIZE;
		buf_store_u32(entry + 8, buf_load_u32(entry + 8) + (uint32_t)size);
	} else {
		if (writer->run_count == 0)
			writer->frame_first = offset;
		if ((rc = buf_put_u64(&writer->runs, offset)) == 0 && (rc = buf_put_u32(&writer->runs, (uint32_t)size)) == 0)
			rc = buf_put_u32(&writer->runs, 0);
		writer->run_count++;
	}
	if (rc == 0)
		rc = buf_append(&writer->bytes, bytes, size);
	if (rc < 0)
		return store_writer_fail(writer, rc);
	writer->last_end = offset + size;
	return 0;
}

int pack_writer_finish(struct pack_writer *writer)
{
	if (writer->state != WRITER_WRITING)
		return writer->state == WRITER_FAILED ? writer->error : -EINVAL;
	int rc = flush_frame(writer);
	struct buf raw;
	buf_init(&raw);
	if (rc == 0 && (rc = buf_put_u64(&raw, writer->frame_count)) == 0)
		rc = buf_append(&raw, writer->index.data, writer->index.size);
	buf_reset(&writer->encoded);
	if (rc == 0)
		rc = codec_encode(BLOCK_PACK_INDEX, CODEC_ZSTD, raw.data, raw.size, &writer->encoded);
	buf_free(&raw);
	uint8_t trailer[PACK_TRAILER_SIZE];
	memcpy(trailer, trailer_magic, sizeof trailer_magic);
	buf_store_u64(trailer + 8, writer->file_end);
	buf_store_u64(trailer + 16, writer->encoded.size);
	buf_store_u64(trailer + 24, codec_hash(trailer, 24));
	if (rc == 0)
		rc = io_pwrite(&writer->file, writer->encoded.data, writer->encoded.size, writer->file_end);
	if (rc == 0)
		rc = io_pwrite(&writer->file, trailer, sizeof trailer, writer->file_end + writer->encoded.size);
	if (rc == 0)
		rc = io_fsync(&writer->file);
	if (rc < 0)
		return store_writer_fail(writer, rc);
	writer->file_end += writer->encoded.size + sizeof trailer;
	char name[PACK_NAME_SIZE];
	pack_name(writer->covered_below, false, name);
	if ((rc = io_rename(writer->store_directory, writer->temporary, name)) < 0)
		return store_writer_fail(writer, rc);
	writer->state = WRITER_FINISHED;   /* named: from now on it is a pack, failed sync or not */
	int packs = io_directory_open_at(writer->store_directory, "packs");
	if (packs < 0)
		return packs;
	rc = io_directory_sync(packs);
	close(packs);
	if (rc == 0 && writer->made_directory)
		rc = io_directory_sync(writer->store_directory);
	return rc;
}

uint64_t pack_writer_size(const struct pack_writer *writer)
{
	return writer->file_end;
}

void pack_writer_free(struct pack_writer *writer)
{
	if (!writer)
		return;
	io_file_close(&writer->file);
	if (writer->state != WRITER_FINISHED)
		io_unlink(writer->store_directory, writer->temporary);
	buf_free(&writer->runs);
	buf_free(&writer->bytes);
	buf_free(&writer->index);
	buf_free(&writer->encoded);
	free(writer);
}

/* ---- removing ----------------------------------------------------------------------- */

struct removal {
	int store_directory;
	uint64_t keep;
	uint64_t bytes;
	int rc;
};

static int remove_other(const char *name, void *context)
{
	struct removal *removal = context;
	uint64_t value = parse_name(name);
	if (value == removal->keep && value != 0)
		return 0;
	/* a pack, or a temporary file (a pack's name and ".tmp"); anything else is not ours */
	size_t length = strlen(name);
	if (value == 0 && !(length == 20 && strcmp(name + 16, ".tmp") == 0))
		return 0;
	char path[PACK_NAME_SIZE + 8];
	snprintf(path, sizeof path, "packs/%s", name);
	struct io_file file;
	uint64_t bytes = 0;
	if (io_file_open(removal->store_directory, path, O_RDONLY, IO_MANIFEST, &file) == 0) {
		io_allocated_bytes(&file, &bytes);
		io_file_close(&file);
	}
	int rc = io_unlink(removal->store_directory, path);
	if (rc == 0)
		removal->bytes += bytes;
	else if (rc != -ENOENT && removal->rc == 0)
		removal->rc = rc;
	return 0;
}

int pack_remove_others(int store_directory, uint64_t keep, uint64_t *removed_bytes_out)
{
	struct removal removal = { store_directory, keep, 0, 0 };
	int rc = io_directory_list(store_directory, "packs", remove_other, &removal);
	if (rc == -ENOENT)
		rc = 0;
	if (rc == 0)
		rc = removal.rc;
	if (removed_bytes_out)
		*removed_bytes_out = removal.bytes;
	if (rc == 0 && removal.bytes) {
		int packs = io_directory_open_at(store_directory, "packs");
		if (packs >= 0) {
			rc = io_directory_sync(packs);
			close(packs);
		}
	}
	return rc;
}
