/*
 * pager — verified block reads from the manifest and segment files, manifest
 * appends and segment writers. See pager.h; layouts in docs/FORMAT.md §2, §4.
 *
 * Invariants:
 *   1. Every block returned to a caller has passed codec_decode (magic, type,
 *      sizes, checksum); every failure to read or verify one is -EIO plus one
 *      line through the log hook (io_log) naming the file and offset.
 *   2. Each verified block read from disk counts exactly one page and
 *      BLOCK_HEADER_SIZE + stored_size bytes in its class (table data blocks
 *      in IO_DATA, everything else in its file's class); the number
 *      of read calls depends only on the block's size (one speculative read
 *      of up to SPECULATIVE_READ bytes, a second one for the rest if larger),
 *      or is none for a block inside the reading thread's window (8).
 *   3. The segment descriptor cache holds at most SEGMENT_CACHE_SIZE open
 *      files; a descriptor in use by a reader (users > 0) is never closed
 *      under it. When every slot is busy, a reader opens a private descriptor.
 *      Segment files are only cached after their file header has been
 *      verified (kind, store ULID, segment id).
 *   4. A manifest append writes base .. base + size with one pwrite (or half
 *      of it when "publish.torn_write" is armed) and never writes before base.
 *      With preallocation, the same pwrite carries zero bytes after the
 *      blocks up to the next chunk boundary when the blocks reach past the
 *      file's end; the blocks never overlap bytes other than those zeros.
 *   5. The block cache holds only verified payloads of manifest blocks of
 *      the cacheable types (tree and index nodes, commit, table and schema
 *      records: never roots, fragments or bitmaps, never segment files),
 *      each read from disk by pager_read, never from an append buffer. An
 *      entry is keyed by its offset and returned only for a read of the same
 *      offset and type. Its bytes (entry headers included) never exceed the
 *      budget; the least recently used entries go first.
 *   6. No cached entry lies at or beyond a manifest size the pager has seen
 *      an append start at (pager_append_begin drops them: those bytes were
 *      cut since), nor inside an append whose write failed.
 *   7. A manifest address below the pack in use's N is read from that pack,
 *      never from the manifest file (whose pages there may be holes); a pack
 *      is freed only when it is no longer the one in use and no read holds
 *      it. The pack in use only ever moves to a larger N.
 *   8. A window (pager_window_begin) serves only the thread that opened it,
 *      only reads of its own pager's manifest that no pack serves, and only
 *      blocks lying wholly inside it; anything else reads the file. Its
 *      bytes were read with one pread; they are decoded and verified as a
 *      read from the file is (1, 2).
 *
 * States of a struct pager_append: BUFFERING (blocks appended) -> WRITTEN
 * (after a successful pager_append_write; no more blocks) -> freed.
 * States of a struct pager_segment: OPEN (header + blocks buffered, flushed
 * every ~1 MiB) -> FINISHED (flushed, fsynced, directory fsynced) -> freed;
 * any write error moves it to FAILED (every later call returns the error).
 */
#include "pager.h"

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

#define SEGMENT_CACHE_SIZE 32
#define SPECULATIVE_READ 4096
#define SEGMENT_FLUSH_SIZE (1u << 20)
#define FILE_NAME_SIZE 32


struct segment_slot {
	uint64_t segment_id;    /* 0: empty */
	struct io_file file;
	unsigned users;         /* readers holding file right now */
	uint64_t last_used;     /* LRU clock value */
	bool doomed;            /* removed while in use: close when the last user leaves */
};

/* One cached block payload (invariant 5). */
struct cache_entry {
	struct cache_entry *hash_next;   /* chain in its bucket */
	struct cache_entry *newer;       /* LRU list: towards the most recently used */
	struct cache_entry *older;
	uint64_t offset;                 /* in the manifest */
	uint64_t end;                    /* offset + header + stored size */
	enum block_type type;
	size_t size;                     /* payload bytes */
	uint8_t payload[];
};

/* Verified manifest block payloads, least recently used dropped first. */
struct block_cache {
	pthread_mutex_t lock;
	size_t budget;                   /* bytes; 0: disabled */
	size_t used;                     /* payloads + entry headers */
	struct cache_entry **buckets;
	size_t bucket_count;             /* a power of two (0 while disabled) */
	struct cache_entry *newest, *oldest;
	uint64_t highest_end;            /* no entry ends beyond this offset */
};

/* A pack and how many reads use it (invariant 7). */
struct pack_use {
	struct pack *pack;
	unsigned users;
};

struct pager {
	int store_directory;
	struct io_file *manifest;
	struct ulid store_id;
	uint32_t format_version;        /* the manifest header's: segments are written in it */
	pthread_mutex_t pack_lock;   /* guards pack and every pack_use's users */
	struct pack_use *pack;       /* the newest pack seen, or NULL */
	pthread_mutex_t lock;   /* guards the segment cache */
	uint64_t clock;
	struct segment_slot slots[SEGMENT_CACHE_SIZE];
	struct block_cache cache;
};

/* This thread's window (pager_window_begin): manifest bytes [offset, offset + size). */
struct pager_window {
	const struct pager *pager;   /* whose manifest; NULL: no window */
	uint64_t offset;
	size_t size;
	uint8_t *bytes;
};
static __thread struct pager_window thread_window;

/* A file to read one block from: the manifest, a cached segment, or a private descriptor. */
struct read_handle {
	struct io_file file;
	const struct pager_window *window;   /* the manifest bytes this thread read at once, or NULL */
	int slot;               /* cache slot to release, or -1 */
	bool private_file;      /* close after the read */
	bool quiet;             /* a first attempt: leave logging to the retry */
	struct pack_use *pack;  /* a manifest address below the pack in use's N: read from it */
	char name[FILE_NAME_SIZE];
};

static void segment_name(uint64_t segment_id, char out[FILE_NAME_SIZE])
{
	snprintf(out, FILE_NAME_SIZE, "segments/%016llx", (unsigned long long)segment_id);
}

static void log_bad_block(const char *file, uint64_t offset, const char *what)
{
	io_log(LOG_ERR, "%s: %s at offset %llu", file, what, (unsigned long long)offset);
}

static uint64_t now_us(void)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	return (uint64_t)now.tv_sec * 1000000u + (uint64_t)now.tv_nsec / 1000u;
}

/* ---- the block cache ---------------------------------------------------- */

static bool cacheable_type(enum block_type type)
{
	return type == BLOCK_NODE || type == BLOCK_INDEX || type == BLOCK_COMMIT || type == BLOCK_TABLE ||
	       type == BLOCK_SCHEMA;
}

static size_t cache_bucket(const struct block_cache *cache, uint64_t offset)
{
	uint64_t hash = offset * 0x9E3779B97F4A7C15ull;
	return (size_t)(hash >> 32) & (cache->bucket_count - 1);
}

static void cache_unlink(struct block_cache *cache, struct cache_entry *entry)
{
	if (entry->newer)
		entry->newer->older = entry->older;
	else
		cache->newest = entry->older;
	if (entry->older)
		entry->older->newer = entry->newer;
	else
		cache->oldest = entry->newer;
	entry->newer = entry->older = NULL;
}

static void cache_push_newest(struct block_cache *cache, struct cache_entry *entry)
{
	entry->older = cache->newest;
	entry->newer = NULL;
	if (cache->newest)
		cache->newest->newer = entry;
	else
		cache->oldest = entry;
	cache->newest = entry;
}

/* Removes entry from the hash and the LRU list and frees it. */
static void cache_drop(struct block_cache *cache, struct cache_entry *entry)
{
	struct cache_entry **link = &cache->buckets[cache_bucket(cache, entry->offset)];
	while (*link != entry)
		link = &(*link)->hash_next;
	*link = entry->hash_next;
	cache_unlink(cache, entry);
	cache->used -= sizeof *entry + entry->size;
	free(entry);
}

static void cache_clear(struct block_cache *cache)
{
	while (cache->oldest)
		cache_drop(cache, cache->oldest);
	cache->highest_end = 0;
}

/* Sets the budget (dropping everything cached). Caller holds cache->lock. 0 or -ENOMEM. */
static int cache_configure(struct block_cache *cache, size_t budget)
{
	cache_clear(cache);
	free(cache->buckets);
	cache->buckets = NULL;
	cache->bucket_count = 0;
	cache->budget = 0;
	if (budget == 0)
		return 0;
	size_t buckets = 64;   /* about one bucket per 4 KiB of budget */
	while (buckets < budget / 4096 && buckets < ((size_t)1 << 24))
		buckets <<= 1;
	cache->buckets = calloc(buckets, sizeof *cache->buckets);
	if (!cache->buckets)
		return -ENOMEM;
	cache->bucket_count = buckets;
	cache->budget = budget;
	return 0;
}

/*
 * Appends the cached payload of the manifest block at offset to raw_out if it
 * is there with that type (0: any). Returns 1 (hit), 0 (miss) or -ENOMEM.
 */
static int cache_get(struct block_cache *cache, uint64_t offset, enum block_type expected_type,
		     struct buf *raw_out)
{
	int rc = 0;
	pthread_mutex_lock(&cache->lock);
	if (cache->bucket_count == 0)
		goto out;
	struct cache_entry *entry = cache->buckets[cache_bucket(cache, offset)];
	while (entry && entry->offset != offset)
		entry = entry->hash_next;
	if (!entry || (expected_type && entry->type != expected_type))
		goto out;
	rc = buf_append(raw_out, entry->payload, entry->size);
	if (rc == 0) {
		rc = 1;
		cache_unlink(cache, entry);
		cache_push_newest(cache, entry);
	}
out:
	pthread_mutex_unlock(&cache->lock);
	return rc;
}

/* Caches a copy of a payload just read and verified from disk (best effort). */
static void cache_put(struct block_cache *cache, uint64_t offset, uint64_t block_size,
		      enum block_type type, const void *payload, size_t size)
{
	pthread_mutex_lock(&cache->lock);
	size_t charge = sizeof(struct cache_entry) + size;
	if (cache->bucket_count == 0 || charge > cache->budget / 16)
		goto out;
	struct cache_entry **head = &cache->buckets[cache_bucket(cache, offset)];
	for (struct cache_entry *entry = *head; entry; entry = entry->hash_next)
		if (entry->offset == offset)
			goto out;   /* another reader cached it meanwhile */
	struct cache_entry *entry = malloc(charge);
	if (!entry)
		goto out;
	while (cache->oldest && cache->used + charge > cache->budget)
		cache_drop(cache, cache->oldest);
	entry->offset = offset;
	entry->end = offset + block_size;
	entry->type = type;
	entry->size = size;
	memcpy(entry->payload, payload, size);
	entry->hash_next = *head;
	*head = entry;
	cache_push_newest(cache, entry);
	cache->used += charge;
	if (entry->end > cache->highest_end)
		cache->highest_end = entry->end;
out:
	pthread_mutex_unlock(&cache->lock);
}

/* Drops every entry with bytes at or beyond offset (bytes that were, or may have been, cut). */
static void cache_forget_from(struct block_cache *cache, uint64_t offset)
{
	pthread_mutex_lock(&cache->lock);
	if (cache->highest_end > offset) {
		uint64_t highest = 0;
		struct cache_entry *entry = cache->oldest;
		while (entry) {
			struct cache_entry *next = entry->newer;
			if (entry->end > offset)
				cache_drop(cache, entry);
			else if (entry->end > highest)
				highest = entry->end;
			entry = next;
		}
		cache->highest_end = highest;
	}
	pthread_mutex_unlock(&cache->lock);
}

int pager_cache_limit(struct pager *pager, size_t budget)
{
	pthread_mutex_lock(&pager->cache.lock);
	int rc = cache_configure(&pager->cache, budget);
	pthread_mutex_unlock(&pager->cache.lock);
	return rc;
}

void pager_cache_usage(struct pager *pager, size_t *used_out, size_t *budget_out)
{
	pthread_mutex_lock(&pager->cache.lock);
	if (used_out)
		*used_out = pager->cache.used;
	if (budget_out)
		*budget_out = pager->cache.budget;
	pthread_mutex_unlock(&pager->cache.lock);
}

/* ---- lifetime ----------------------------------------------------------- */

int pager_init(int store_directory, struct io_file *manifest, struct pager **out)
{
	uint8_t bytes[FILE_HEADER_SIZE];
	struct file_header header;
	int rc = io_pread(manifest, bytes, sizeof bytes, 0);
	if (rc < 0) {
		log_bad_block("manifest", 0, "file header is unreadable or short");
		return rc == -EIO || rc == -EINVAL ? -EIO : rc;
	}
	rc = codec_file_header_decode(bytes, &header);
	if (rc == 0 && header.kind != FILE_KIND_MANIFEST)
		rc = -EIO;
	if (rc == -EIO)
		log_bad_block("manifest", 0, "file header checksum mismatch or not a manifest");
	if (rc < 0)
		return rc;

	struct pager *pager = calloc(1, sizeof *pager);
	if (!pager)
		return -ENOMEM;
	if (pthread_mutex_init(&pager->lock, NULL) != 0) {
		free(pager);
		return -ENOMEM;
	}
	if (pthread_mutex_init(&pager->cache.lock, NULL) != 0) {
		pthread_mutex_destroy(&pager->lock);
		free(pager);
		return -ENOMEM;
	}
	if (pthread_mutex_init(&pager->pack_lock, NULL) != 0) {
		pthread_mutex_destroy(&pager->cache.lock);
		pthread_mutex_destroy(&pager->lock);
		free(pager);
		return -ENOMEM;
	}
	pager->store_directory = store_directory;
	pager->manifest = manifest;
	pager->store_id = header.store_id;
	pager->format_version = header.format_version;
	for (int i = 0; i < SEGMENT_CACHE_SIZE; i++)
		pager->slots[i].file.descriptor = -1;
	/* a damaged newest pack is reported by the reads that need it (and verify), not here */
	rc = pager_pack_refresh(pager);
	if (rc == -ENOMEM) {
		pager_free(pager);
		return rc;
	}
	*out = pager;   /* the block cache starts disabled (pager_cache_limit) */
	return 0;
}

void pager_free(struct pager *pager)
{
	if (!pager)
		return;
	for (int i = 0; i < SEGMENT_CACHE_SIZE; i++) {
		assert(pager->slots[i].users == 0);
		io_file_close(&pager->slots[i].file);
	}
	cache_configure(&pager->cache, 0);
	if (pager->pack) {
		assert(pager->pack->users == 0);
		pack_free(pager->pack->pack);
		free(pager->pack);
	}
	pthread_mutex_destroy(&pager->pack_lock);
	pthread_mutex_destroy(&pager->cache.lock);
	pthread_mutex_destroy(&pager->lock);
	free(pager);
}

/* ---- the pack in use (invariant 7) ------------------------------------- */

/* The pack in use, held for one read (release with pack_release), or NULL. */
static struct pack_use *pack_acquire(struct pager *pager)
{
	pthread_mutex_lock(&pager->pack_lock);
	struct pack_use *use = pager->pack;
	if (use)
		use->users++;
	pthread_mutex_unlock(&pager->pack_lock);
	return use;
}

static void pack_release(struct pager *pager, struct pack_use *use)
{
	if (!use)
		return;
	pthread_mutex_lock(&pager->pack_lock);
	bool last = --use->users == 0 && use != pager->pack;
	pthread_mutex_unlock(&pager->pack_lock);
	if (last) {
		pack_free(use->pack);
		free(use);
	}
}

int pager_pack_refresh(struct pager *pager)
{
	for (int attempt = 0;; attempt++) {
		uint64_t newest;
		int rc = pack_newest(pager->store_directory, &newest);
		if (rc == -ENOENT)
			return 0;
		if (rc < 0)
			return rc;
		if (pager->pack && pack_covered_below(pager->pack->pack) >= newest)
			return 0;
		struct pack *pack;
		rc = pack_open(pager->store_directory, &pager->store_id, newest, &pack);
		if (rc == -ENOENT && attempt < 8)
			continue;   /* removed by a newer gc between the listing and the open */
		if (rc < 0)
			return rc;
		struct pack_use *use = calloc(1, sizeof *use), *old = NULL;
		if (!use) {
			pack_free(pack);
			return -ENOMEM;
		}
		use->pack = pack;
		pthread_mutex_lock(&pager->pack_lock);
		if (!pager->pack || pack_covered_below(pager->pack->pack) < newest) {
			old = pager->pack;
			pager->pack = use;
			use = NULL;
		}
		bool free_old = old && old->users == 0;
		pthread_mutex_unlock(&pager->pack_lock);
		if (use) {   /* another thread switched to it first */
			pack_free(use->pack);
			free(use);
			return 0;
		}
		if (free_old) {
			pack_free(old->pack);
			free(old);
		}
		return 1;
	}
}

uint64_t pager_pack_covered_below(struct pager *pager, uint64_t *file_size_out)
{
	struct pack_use *use = pack_acquire(pager);
	uint64_t below = use ? pack_covered_below(use->pack) : 0;
	if (file_size_out)
		*file_size_out = use ? pack_file_size(use->pack) : 0;
	pack_release(pager, use);
	return below;
}

int pager_pack_verify(struct pager *pager, void (*report)(uint64_t offset, const char *message, void *context),
		      void *context)
{
	struct pack_use *use = pack_acquire(pager);
	int rc = use ? pack_verify(use->pack, report, context) : 0;
	pack_release(pager, use);
	return rc;
}

uint32_t pager_format_version(const struct pager *pager)
{
	return pager->format_version;
}

const struct ulid *pager_store_id(const struct pager *pager)
{
	return &pager->store_id;
}

/* ---- segment descriptor cache ------------------------------------------ */

/* Opens segments/<id> read-only and checks its file header. Returns 0, -ENOENT, -EIO, -errno. */
static int segment_open_verified(struct pager *pager, uint64_t segment_id, struct io_file *out)
{
	char name[FILE_NAME_SIZE];
	segment_name(segment_id, name);
	int rc = io_file_open(pager->store_directory, name, O_RDONLY, IO_DATA, out);
	if (rc < 0)
		return rc;
	uint8_t bytes[FILE_HEADER_SIZE];
	struct file_header header;
	rc = io_pread(out, bytes, sizeof bytes, 0);
	if (rc == 0)
		rc = codec_file_header_decode(bytes, &header);
	if (rc == 0 && (header.kind != FILE_KIND_SEGMENT || header.segment_id != segment_id ||
			ulid_compare(&header.store_id, &pager->store_id) != 0))
		rc = -EIO;
	if (rc < 0) {
		log_bad_block(name, 0, "segment file header is short, corrupt or from another store");
		io_file_close(out);
		return -EIO;
	}
	return 0;
}

static int segment_acquire(struct pager *pager, uint64_t segment_id, struct read_handle *handle)
{
	handle->slot = -1;
	handle->private_file = false;
	segment_name(segment_id, handle->name);
	int rc = 0;
	pthread_mutex_lock(&pager->lock);
	int victim = -1;
	for (int i = 0; i < SEGMENT_CACHE_SIZE; i++) {
		struct segment_slot *slot = &pager->slots[i];
		if (slot->segment_id == segment_id && !slot->doomed) {
			slot->users++;
			slot->last_used = ++pager->clock;
			handle->file = slot->file;
			handle->slot = i;
			goto out;
		}
		if (slot->users == 0 &&
		    (victim < 0 || slot->segment_id == 0 ||
		     (pager->slots[victim].segment_id != 0 && slot->last_used < pager->slots[victim].last_used)))
			victim = i;
	}
	rc = segment_open_verified(pager, segment_id, &handle->file);
	if (rc < 0)
		goto out;
	if (victim < 0) {
		handle->private_file = true; /* every slot is busy: read with a private descriptor */
		goto out;
	}
	struct segment_slot *slot = &pager->slots[victim];
	io_file_close(&slot->file);
	slot->segment_id = segment_id;
	slot->file = handle->file;
	slot->users = 1;
	slot->doomed = false;
	slot->last_used = ++pager->clock;
	handle->slot = victim;
out:
	pthread_mutex_unlock(&pager->lock);
	return rc;
}

static void handle_release(struct pager *pager, struct read_handle *handle)
{
	if (handle->pack) {
		pack_release(pager, handle->pack);
		handle->pack = NULL;
	}
	if (handle->private_file) {
		io_file_close(&handle->file);
		return;
	}
	if (handle->slot < 0)
		return;
	pthread_mutex_lock(&pager->lock);
	struct segment_slot *slot = &pager->slots[handle->slot];
	assert(slot->users > 0);
	if (--slot->users == 0 && slot->doomed) {
		io_file_close(&slot->file);
		slot->segment_id = 0;
		slot->doomed = false;
	}
	pthread_mutex_unlock(&pager->lock);
}

/* Logs a damaged block unless this is a first attempt that may be retried from a newer pack. */
static void handle_log(const struct read_handle *handle, uint64_t offset, const char *what)
{
	if (!handle->quiet)
		log_bad_block(handle->name, offset, what);
}

static int handle_acquire(struct pager *pager, struct block_address address, bool quiet, struct read_handle *handle)
{
	uint64_t first_block = address.segment == 0 ? MANIFEST_FIRST_BLOCK : FILE_HEADER_SIZE;
	handle->quiet = quiet;
	handle->pack = NULL;
	if (address.segment == 0) {
		handle->file = *pager->manifest;
		handle->window = thread_window.pager == pager ? &thread_window : NULL;
		handle->slot = -1;
		handle->private_file = false;
		snprintf(handle->name, sizeof handle->name, "manifest");
		struct pack_use *use = pack_acquire(pager);
		if (use && address.offset < pack_covered_below(use->pack)) {
			handle->pack = use;   /* invariant 7 */
			snprintf(handle->name, sizeof handle->name, "packs/%016llx",
				 (unsigned long long)pack_covered_below(use->pack));
		} else {
			pack_release(pager, use);
		}
	} else {
		handle->window = NULL;
		int rc = segment_acquire(pager, address.segment, handle);
		if (rc < 0)
			return rc;
	}
	if (address.offset < first_block) {
		handle_log(handle, address.offset, "block address inside the file header");
		handle_release(pager, handle);
		return -EIO;
	}
	return 0;
}

/* ---- reads -------------------------------------------------------------- */

/* The block at a manifest offset out of the pack in use: into *block (heap). */
static int read_packed_block(struct read_handle *handle, uint64_t offset, uint8_t **block, struct block_header *header)
{
	struct buf bytes;
	buf_init(&bytes);
	int rc = pack_read_block(handle->pack->pack, offset, &bytes);
	if (rc == -ENOENT) {
		handle_log(handle, offset, "no block of the manifest at this offset is in the pack (gc did not retain it)");
		rc = -EIO;
	}
	if (rc == 0 && codec_decode_header(bytes.data, header) < 0) {
		handle_log(handle, offset, "invalid block header");
		rc = -EIO;
	}
	if (rc < 0) {
		buf_free(&bytes);
		return rc;
	}
	*block = bytes.data;   /* the buffer's memory now belongs to the caller */
	return 0;
}

/*
 * Reads the whole block at offset into *block (speculative buffer or heap);
 * fills header. Returns 0 or -EIO / -errno (logged unless quiet).
 */
static int read_block(struct read_handle *handle, uint64_t offset, uint8_t *speculative,
		      uint8_t **block, struct block_header *header)
{
	if (handle->pack)
		return read_packed_block(handle, offset, block, header);
	const struct pager_window *window = handle->window;
	if (window && offset >= window->offset && offset - window->offset + BLOCK_HEADER_SIZE <= window->size) {
		const uint8_t *bytes = window->bytes + (offset - window->offset);
		size_t left = window->size - (size_t)(offset - window->offset);
		if (codec_decode_header(bytes, header) == 0 && BLOCK_HEADER_SIZE + (size_t)header->stored_size <= left) {
			size_t total = BLOCK_HEADER_SIZE + (size_t)header->stored_size;
			*block = total <= SPECULATIVE_READ ? speculative : malloc(total);
			if (!*block)
				return -ENOMEM;
			memcpy(*block, bytes, total);
			return 0;
		}
		/* not a whole block inside the window: read the file, which reports what is wrong */
	}
	ssize_t got = io_pread_some(&handle->file, speculative, SPECULATIVE_READ, offset);
	if (got < 0)
		return (int)got;
	if (got < BLOCK_HEADER_SIZE) {
		handle_log(handle, offset, "block extends past the end of the file");
		return -EIO;
	}
	if (codec_decode_header(speculative, header) < 0) {
		handle_log(handle, offset, "invalid block header (checksum mismatch)");
		return -EIO;
	}
	size_t total = BLOCK_HEADER_SIZE + (size_t)header->stored_size;
	if (total <= (size_t)got) {
		*block = speculative;
		return 0;
	}
	uint8_t *whole = malloc(total);
	if (!whole)
		return -ENOMEM;
	memcpy(whole, speculative, (size_t)got);
	int rc = io_pread(&handle->file, whole + got, total - (size_t)got, offset + (uint64_t)got);
	if (rc < 0) {
		free(whole);
		if (rc == -EIO)
			handle_log(handle, offset, "block extends past the end of the file");
		return rc;
	}
	*block = whole;
	return 0;
}

int pager_window_begin(struct pager *pager, uint64_t offset, size_t size)
{
	pager_window_end(pager);
	if (thread_window.pager || io_file_is_remote(pager->manifest) || size == 0 || offset < MANIFEST_FIRST_BLOCK)
		return 0;   /* (a window of another store stays this thread's one) */
	uint8_t *bytes = malloc(size);
	if (!bytes)
		return -ENOMEM;
	int rc = io_pread(pager->manifest, bytes, size, offset);
	if (rc < 0) {
		free(bytes);
		return rc;
	}
	thread_window = (struct pager_window){ .pager = pager, .offset = offset, .size = size, .bytes = bytes };
	return 0;
}

void pager_window_end(struct pager *pager)
{
	if (thread_window.pager != pager)
		return;
	free(thread_window.bytes);
	thread_window = (struct pager_window){ 0 };
}

/* Table data (fragments, deletion bitmaps) is counted as data wherever it
 * lives — small commits keep it inline in the manifest — so the manifest
 * counters measure only the manifest's own structures. */
static enum io_class block_class(enum block_type type, enum io_class file_class)
{
	if (type == BLOCK_FRAGMENT || type == BLOCK_BITMAP)
		return IO_DATA;
	return file_class;
}

/* One attempt of pager_read past the cache. */
static int read_attempt(struct pager *pager, struct block_address address, enum block_type expected_type,
			bool cacheable, bool quiet, struct buf *raw_out)
{
	struct read_handle handle;
	int rc = handle_acquire(pager, address, quiet, &handle);
	if (rc < 0)
		return rc;
	uint8_t speculative[SPECULATIVE_READ];
	uint8_t *block = NULL;
	struct block_header header;
	rc = read_block(&handle, address.offset, speculative, &block, &header);
	if (rc < 0)
		goto out;
	size_t total = BLOCK_HEADER_SIZE + (size_t)header.stored_size;
	size_t raw_size_before = raw_out->size;
	rc = codec_decode(block, total, 0, raw_out);
	if (rc == -EIO)
		handle_log(&handle, address.offset, "checksum mismatch");
	if (rc == 0 && expected_type && header.type != expected_type) {
		char what[96];
		snprintf(what, sizeof what, "block of type %d where type %d was expected", (int)header.type,
			 (int)expected_type);
		handle_log(&handle, address.offset, what);
		raw_out->size = raw_size_before;
		rc = -EIO;
	}
	if (rc == 0)
		io_count_block(block_class(header.type, handle.file.class), total);
	if (rc == 0 && cacheable && cacheable_type(header.type))
		cache_put(&pager->cache, address.offset, total, header.type, raw_out->data + raw_size_before,
			  raw_out->size - raw_size_before);
out:
	if (block && block != speculative)
		free(block);
	handle_release(pager, &handle);
	return rc;
}

bool pager_prefetches(const struct pager *pager)
{
	return io_file_is_remote(pager->manifest);
}

void pager_prefetch(struct pager *pager, const struct block_address *addresses, size_t count)
{
	if (!pager_prefetches(pager))
		return;
	uint64_t offsets[64];
	struct pack_use *use = pack_acquire(pager);
	uint64_t packed_below = use ? pack_covered_below(use->pack) : 0;
	pack_release(pager, use);
	size_t planned = 0;
	for (size_t i = 0; i < count && planned < sizeof offsets / sizeof offsets[0]; i++)
		if (addresses[i].segment == 0 && addresses[i].offset >= packed_below && addresses[i].offset != 0)
			offsets[planned++] = addresses[i].offset;
	io_prefetch(pager->manifest, offsets, planned);
}

int pager_read(struct pager *pager, struct block_address address, enum block_type expected_type,
	       struct buf *raw_out)
{
	bool cacheable = address.segment == 0 && (expected_type == 0 || cacheable_type(expected_type));
	if (cacheable) {
		int hit = cache_get(&pager->cache, address.offset, expected_type, raw_out);
		if (hit != 0)
			return hit < 0 ? hit : 0;   /* a hit is no I/O: nothing counted */
	}
	int rc = read_attempt(pager, address, expected_type, cacheable, address.segment == 0, raw_out);
	if (rc == -EIO && address.segment == 0) {
		/* a gc may have packed these pages since: look for a newer pack, then try once more (and log) */
		pager_pack_refresh(pager);
		rc = read_attempt(pager, address, expected_type, cacheable, false, raw_out);
	}
	return rc;
}

static int size_attempt(struct pager *pager, struct block_address address, bool quiet, uint64_t *size_out)
{
	struct read_handle handle;
	int rc = handle_acquire(pager, address, quiet, &handle);
	if (rc < 0)
		return rc;
	uint8_t bytes[BLOCK_HEADER_SIZE];
	struct block_header header;
	if (handle.pack) {
		uint8_t *block = NULL;
		rc = read_packed_block(&handle, address.offset, &block, &header);
		free(block);
	} else {
		rc = io_pread(&handle.file, bytes, sizeof bytes, address.offset);
		if (rc == -EIO)
			handle_log(&handle, address.offset, "block extends past the end of the file");
		if (rc == 0 && (rc = codec_decode_header(bytes, &header)) < 0)
			handle_log(&handle, address.offset, "invalid block header");
	}
	if (rc == 0)
		*size_out = BLOCK_HEADER_SIZE + (uint64_t)header.stored_size;
	handle_release(pager, &handle);
	return rc;
}

int pager_block_size(struct pager *pager, struct block_address address, uint64_t *size_out)
{
	int rc = size_attempt(pager, address, address.segment == 0, size_out);
	if (rc == -EIO && address.segment == 0) {
		pager_pack_refresh(pager);
		rc = size_attempt(pager, address, false, size_out);
	}
	return rc;
}

int pager_copy_bytes(struct pager *pager, uint64_t offset, size_t size, struct buf *out)
{
	struct pack_use *use = pack_acquire(pager);
	int rc;
	if (use && offset < pack_covered_below(use->pack)) {
		rc = pack_read(use->pack, offset, size, out);
	} else if ((rc = buf_reserve(out, size)) == 0 && (rc = io_pread(pager->manifest, out->data + out->size, size, offset)) == 0) {
		out->size += size;
	}
	pack_release(pager, use);
	return rc;
}

/* ---- manifest appends --------------------------------------------------- */

struct pager_append {
	struct pager *pager;
	uint64_t base;
	struct buf buffer;      /* the blocks, then (once written) any zero padding */
	uint64_t blocks_size;   /* bytes of blocks in buffer */
	uint64_t file_size;     /* the manifest size the write expects (base unless preallocated) */
	uint64_t chunk;         /* preallocation granule, 0: none */
	bool written;
	/* Raw payloads of the cacheable blocks appended, to enter the block cache once
	 * written (each: u64 offset, u64 block size, u32 type, u32 size, payload); at
	 * most APPEND_CACHE_MAX bytes are kept, later blocks are read back as usual. */
	struct buf to_cache;
};

#define APPEND_CACHE_MAX (1u << 20)

int pager_append_begin(struct pager *pager, uint64_t base, struct pager_append **out)
{
	if (base < MANIFEST_FIRST_BLOCK)
		return -EINVAL;
	struct pager_append *append = calloc(1, sizeof *append);
	if (!append)
		return -ENOMEM;
	/* Bytes at or beyond base are not in the file now (invariant 6). */
	cache_forget_from(&pager->cache, base);
	append->pager = pager;
	append->base = base;
	append->file_size = base;
	buf_init(&append->buffer);
	*out = append;
	return 0;
}

int pager_append_preallocate(struct pager_append *append, uint64_t file_size, uint64_t chunk)
{
	if (append->written || file_size < append->base || chunk == 0 || (chunk & (chunk - 1)) != 0)
		return -EINVAL;
	append->file_size = file_size;
	append->chunk = chunk;
	return 0;
}

int pager_append_block(struct pager_append *append, enum block_type type, enum codec_kind codec,
		       const void *raw, size_t raw_size, struct block_address *address_out)
{
	if (append->written)
		return -EINVAL;
	uint64_t offset = append->base + append->buffer.size;
	int rc = codec_encode(type, codec, raw, raw_size, &append->buffer);
	if (rc < 0)
		return rc;
	if (append->pager->cache.bucket_count && cacheable_type(type) &&
	    append->to_cache.size + 24 + raw_size <= APPEND_CACHE_MAX &&
	    buf_reserve(&append->to_cache, 24 + raw_size) == 0) {
		buf_put_u64(&append->to_cache, offset);
		buf_put_u64(&append->to_cache, append->buffer.size - (offset - append->base));
		buf_put_u32(&append->to_cache, (uint32_t)type);
		buf_put_u32(&append->to_cache, (uint32_t)raw_size);
		buf_append(&append->to_cache, raw, raw_size);
	}
	append->blocks_size = append->buffer.size;
	address_out->segment = 0;
	address_out->offset = offset;
	return 0;
}

int pager_append_encoded(struct pager_append *append, const void *encoded, size_t encoded_size,
			 struct block_address *address_out)
{
	struct block_header header;
	if (append->written || encoded_size < BLOCK_HEADER_SIZE || codec_decode_header(encoded, &header) < 0 ||
	    BLOCK_HEADER_SIZE + (size_t)header.stored_size != encoded_size)
		return -EINVAL;
	uint64_t offset = append->base + append->buffer.size;
	int rc = buf_append(&append->buffer, encoded, encoded_size);
	if (rc < 0)
		return rc;
	append->blocks_size = append->buffer.size;
	address_out->segment = 0;
	address_out->offset = offset;
	return 0;
}

uint64_t pager_append_size(const struct pager_append *append)
{
	return append->blocks_size;
}

uint64_t pager_append_file_size(const struct pager_append *append)
{
	uint64_t end = append->base + append->buffer.size;
	return end > append->file_size ? end : append->file_size;
}

int pager_append_read(struct pager_append *append, struct block_address address,
		      enum block_type expected_type, struct buf *raw_out)
{
	if (address.segment != 0 || address.offset < append->base ||
	    address.offset - append->base >= append->blocks_size)
		return pager_read(append->pager, address, expected_type, raw_out);
	size_t start = (size_t)(address.offset - append->base);
	size_t available = (size_t)append->blocks_size - start;
	struct block_header header;
	if (available < BLOCK_HEADER_SIZE || codec_decode_header(append->buffer.data + start, &header) < 0 ||
	    BLOCK_HEADER_SIZE + (size_t)header.stored_size > available) {
		log_bad_block("manifest (append buffer)", address.offset, "no block starts here");
		return -EIO;
	}
	int rc = codec_decode(append->buffer.data + start, BLOCK_HEADER_SIZE + (size_t)header.stored_size,
			      expected_type, raw_out);
	if (rc == -EIO)
		log_bad_block("manifest (append buffer)", address.offset, "checksum or type mismatch");
	return rc;
}

/* Checks that the manifest still ends where the append began and pads the
 * blocks reaching past the preallocated zeros to the next chunk. */
static int append_prepare(struct pager_append *append)
{
	uint64_t size;
	/* in an object store the tail's conditional create checks the end itself (io_pieced.c) */
	int rc = io_file_is_remote(append->pager->manifest) ? io_size_known(append->pager->manifest, &size)
							     : io_size(append->pager->manifest, &size);
	if (rc < 0)
		return rc;
	if (size != append->file_size)
		return -ESTALE;
	uint64_t end = append->base + append->blocks_size;
	if (append->chunk && end > append->file_size && append->buffer.size == append->blocks_size) {
		uint64_t padded = (end + append->chunk - 1) & ~(append->chunk - 1);
		if ((rc = buf_reserve(&append->buffer, (size_t)(padded - end))) < 0)
			return rc;
		memset(append->buffer.data + append->blocks_size, 0, (size_t)(padded - end));
		append->buffer.size = (size_t)(padded - append->base);
	}
	return 0;
}

int pager_append_write_part(struct pager_append *append, size_t size)
{
	if (append->written)
		return -EINVAL;
	int rc = append_prepare(append);
	if (rc == 0)
		rc = io_pwrite(append->pager->manifest, append->buffer.data,
			       size < append->buffer.size ? size : append->buffer.size, append->base);
	if (rc < 0)
		pager_append_abandon(append);
	return rc;
}

int pager_append_write(struct pager_append *append)
{
	if (append->written)
		return -EINVAL;
	int rc = append_prepare(append);
	if (rc == 0)
		rc = io_pwrite(append->pager->manifest, append->buffer.data, append->buffer.size, append->base);
	if (rc < 0) {
		pager_append_abandon(append);
		return rc;
	}
	append->written = true;
	/* Written blocks are immutable from now on (a published root is never cut, and an
	 * abandoned append forgets them again): the next publish reads them from memory. */
	for (size_t at = 0; at + 24 <= append->to_cache.size;) {
		const uint8_t *record = append->to_cache.data + at;
		uint32_t size = buf_load_u32(record + 20);
		cache_put(&append->pager->cache, buf_load_u64(record), buf_load_u64(record + 8),
			  (enum block_type)buf_load_u32(record + 16), record + 24, size);
		at += 24 + size;
	}
	buf_free(&append->to_cache);
	return 0;
}

int pager_append_sync(struct pager_append *append)
{
	if (!append->written)
		return -EINVAL;
	int rc = io_fsync(append->pager->manifest);
	if (rc < 0)
		pager_append_abandon(append);
	return rc;
}

void pager_append_abandon(struct pager_append *append)
{
	/* Not published: the caller cuts what reached the file (invariant 6). */
	cache_forget_from(&append->pager->cache, append->base);
}

void pager_append_free(struct pager_append *append)
{
	if (!append)
		return;
	buf_free(&append->buffer);
	buf_free(&append->to_cache);
	free(append);
}

/* ---- segment files ------------------------------------------------------ */

/* A segment being written: WRITING (blocks accepted) -> FINISHED (flushed, fsynced, its
 * directory synced) or -> FAILED (a write failed: every later call returns its error). */
enum segment_state { SEGMENT_WRITING, SEGMENT_FINISHED, SEGMENT_FAILED };

struct pager_segment {
	struct pager *pager;
	uint64_t segment_id;
	struct io_file file;
	struct buf pending;     /* bytes not yet written, starting at file offset written */
	uint64_t written;
	enum segment_state state;  /* segment_enter; checked by segment_state_check */
	int failure;            /* SEGMENT_FAILED: the first write error */
};

/* Debug check of a segment writer's state change: WRITING -> FINISHED, WRITING -> FAILED; both final. */
static void segment_state_check(const struct pager_segment *segment, enum segment_state next)
{
	(void)segment;
	(void)next;
	assert(segment->state == SEGMENT_WRITING || segment->state == next);
}

static void segment_enter(struct pager_segment *segment, enum segment_state next)
{
	segment_state_check(segment, next);
	segment->state = next;
}

int pager_segment_create(struct pager *pager, uint64_t segment_id, struct pager_segment **out)
{
	if (segment_id == 0)
		return -EINVAL;
	int rc = io_directory_make(pager->store_directory, "segments");
	if (rc == 0)
		rc = io_directory_sync(pager->store_directory);
	else if (rc == -EEXIST)
		rc = 0;
	if (rc < 0)
		return rc;
	struct pager_segment *segment = calloc(1, sizeof *segment);
	if (!segment)
		return -ENOMEM;
	segment->pager = pager;
	segment->segment_id = segment_id;
	buf_init(&segment->pending);
	char name[FILE_NAME_SIZE];
	segment_name(segment_id, name);
	rc = buf_reserve(&segment->pending, FILE_HEADER_SIZE);
	if (rc < 0)
		goto cleanup;
	rc = io_file_open(pager->store_directory, name, O_RDWR | O_CREAT | O_EXCL, IO_DATA, &segment->file);
	if (rc < 0)
		goto cleanup;
	struct file_header header = {
		.format_version = pager->format_version,
		.kind = FILE_KIND_SEGMENT,
		.store_id = pager->store_id,
		.segment_id = segment_id,
		.created_us = now_us(),
	};
	codec_file_header_encode(&header, segment->pending.data);
	segment->pending.size = FILE_HEADER_SIZE;
	*out = segment;
	return 0;
cleanup:
	buf_free(&segment->pending);
	free(segment);
	return rc;
}

int pager_scratch_open(struct pager *pager, struct io_file *out)
{
	int rc = io_directory_make(pager->store_directory, "segments");
	if (rc < 0 && rc != -EEXIST)
		return rc;
	return io_scratch_open(pager->store_directory, "segments", IO_DATA, out);
}

uint64_t pager_segment_id(const struct pager_segment *segment)
{
	return segment->segment_id;
}

static int segment_flush(struct pager_segment *segment)
{
	if (segment->state == SEGMENT_FAILED)
		return segment->failure;
	if (segment->pending.size == 0)
		return 0;
	int rc = io_pwrite(&segment->file, segment->pending.data, segment->pending.size, segment->written);
	if (rc < 0) {
		segment_enter(segment, SEGMENT_FAILED);
		segment->failure = rc;
		return rc;
	}
	segment->written += segment->pending.size;
	buf_reset(&segment->pending);
	return 0;
}

int pager_segment_block(struct pager_segment *segment, enum block_type type, enum codec_kind codec,
			const void *raw, size_t raw_size, struct block_address *address_out)
{
	if (segment->state == SEGMENT_FAILED)
		return segment->failure;
	if (segment->state == SEGMENT_FINISHED)
		return -EINVAL;
	uint64_t offset = segment->written + segment->pending.size;
	int rc = codec_encode(type, codec, raw, raw_size, &segment->pending);
	if (rc < 0)
		return rc;
	address_out->segment = segment->segment_id;
	address_out->offset = offset;
	if (segment->pending.size >= SEGMENT_FLUSH_SIZE)
		return segment_flush(segment);
	return 0;
}

int pager_segment_finish(struct pager_segment *segment)
{
	if (segment->state == SEGMENT_FINISHED)
		return 0;
	int rc = segment_flush(segment);
	if (rc < 0)
		return rc;
	rc = io_failpoint("segment.before_fsync");
	if (rc < 0)
		return rc;
	rc = io_fsync(&segment->file);
	if (rc < 0)
		return rc;
	int segments = io_directory_open_at(segment->pager->store_directory, "segments");
	if (segments < 0)
		return segments;
	rc = io_directory_sync(segments);
	close(segments);
	if (rc < 0)
		return rc;
	rc = io_failpoint("segment.after_fsync");
	if (rc < 0)
		return rc;
	segment_enter(segment, SEGMENT_FINISHED);
	return 0;
}

void pager_segment_free(struct pager_segment *segment)
{
	if (!segment)
		return;
	io_file_close(&segment->file);
	buf_free(&segment->pending);
	free(segment);
}

int pager_segment_remove(struct pager *pager, uint64_t segment_id)
{
	if (segment_id == 0)
		return -EINVAL;
	pthread_mutex_lock(&pager->lock);
	for (int i = 0; i < SEGMENT_CACHE_SIZE; i++) {
		struct segment_slot *slot = &pager->slots[i];
		if (slot->segment_id != segment_id)
			continue;
		if (slot->users > 0) {
			slot->doomed = true;
		} else {
			io_file_close(&slot->file);
			slot->segment_id = 0;
		}
	}
	pthread_mutex_unlock(&pager->lock);
	char name[FILE_NAME_SIZE];
	segment_name(segment_id, name);
	return io_unlink(pager->store_directory, name);
}
