/*
 * io_cache — a bounded cache on local disk of the manifest pieces of stores
 * kept in an object store, and of the chunks of their segments and packs
 * (layer: io). docs/FORMAT.md §23 "The local cache".
 *
 * A piece's address is never reused within a store (pieces are created once
 * with If-None-Match: *, only at the end, and nothing is written below an
 * end again), so a piece cached under its store's id, location and start is
 * that piece forever: the cache never needs invalidating, and every process
 * of a host shares it (the location too: a store copied object by object to
 * another prefix keeps its id, and the two diverge). Segments and packs
 * never change and their names are never reused, so a chunk of one is cached
 * the same way under the object's name and the chunk's offset. A cached file
 * is `<root>/<store id>-<location hash>/<start as 16 hex digits>` (a piece)
 * or `.../<name, '/' as '-'>-<offset>` (a chunk): a 16-byte header (magic
 * "GFSC", zero, the xxHash3-64 of the content) then the piece's bytes,
 * written to a temporary name and renamed.
 *
 * Invariants:
 *   1. The cache is an optimization: every failure to read, write or evict
 *      reads as a miss and is never an error of the caller. A cached file
 *      whose checksum fails is removed (a damaged cache is not a damaged store).
 *   2. The bytes under the root stay near the bound: a process that stores
 *      looks at the whole cache on its first store and after every eighth of
 *      the bound it stores, and removes the least recently used files
 *      (mtime, touched on every hit) until three quarters of the bound.
 *   3. The meta slots and the header piece are never cached (io_pieced.c).
 */
#include "io.h"
#include "io_remote_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>
#include <xxhash.h>

#define CACHE_MAGIC 0x43534647u          /* "GFSC" */
#define CACHE_HEADER 16u
#define CACHE_DEFAULT_BYTES (256ull << 20)
#define CACHE_PATH_MAX 4096

struct io_cache {
	char root[CACHE_PATH_MAX];          /* the cache of every store */
	char directory[CACHE_PATH_MAX];     /* this store's */
	uint64_t bound;
};

static atomic_uint_fast64_t hits, hit_bytes, stores;
static pthread_mutex_t evict_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t stored_since_scan = UINT64_MAX;   /* bytes this process stored since it last looked */

void io_cache_counters_get(struct io_cache_counters *out)
{
	out->hits = atomic_load(&hits);
	out->bytes = atomic_load(&hit_bytes);
	out->stores = atomic_load(&stores);
}

/* GRAPHFS_CACHE_BYTES: a number with an optional K, M or G; 0 turns the cache off. */
static uint64_t cache_bound(void)
{
	const char *text = getenv("GRAPHFS_CACHE_BYTES");
	if (!text || !*text)
		return CACHE_DEFAULT_BYTES;
	char *end;
	unsigned long long value = strtoull(text, &end, 10);
	switch (*end) {
	case 'K': case 'k': value <<= 10; end++; break;
	case 'M': case 'm': value <<= 20; end++; break;
	case 'G': case 'g': value <<= 30; end++; break;
	default: break;
	}
	return *end ? CACHE_DEFAULT_BYTES : value;
}

/* The cache's root: GRAPHFS_CACHE_DIR, else $XDG_CACHE_HOME/graphfs, else ~/.cache/graphfs. */
static int cache_root(char out[CACHE_PATH_MAX])
{
	const char *explicit = getenv("GRAPHFS_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	int length;
	if (explicit && *explicit)
		length = snprintf(out, CACHE_PATH_MAX, "%s", explicit);
	else if (xdg && *xdg)
		length = snprintf(out, CACHE_PATH_MAX, "%s/graphfs", xdg);
	else if (home && *home)
		length = snprintf(out, CACHE_PATH_MAX, "%s/.cache/graphfs", home);
	else
		return -ENOENT;
	return length > 0 && length < CACHE_PATH_MAX - 64 ? 0 : -ENAMETOOLONG;
}

int io_make_directories(char *path)
{
	for (char *at = path + 1;; at++) {
		if (*at != '/' && *at != '\0')
			continue;
		char saved = *at;
		*at = '\0';
		int rc = mkdir(path, 0700) < 0 && errno != EEXIST ? -errno : 0;
		*at = saved;
		if (rc < 0 || saved == '\0')
			return rc;
	}
}

int io_cache_store_directory(const uint8_t store_id[16], char *out, size_t size)
{
	char root[CACHE_PATH_MAX];
	int rc = cache_root(root);
	if (rc < 0)
		return rc;
	char id[33];
	for (int i = 0; i < 16; i++)
		snprintf(id + 2 * i, 3, "%02x", store_id[i]);
	if ((size_t)snprintf(out, size, "%s/%s", root, id) >= size)
		return -ENAMETOOLONG;
	return 0;
}

struct io_cache *io_cache_open(const uint8_t store_id[16], const char *location)
{
	uint64_t bound = cache_bound();
	if (bound == 0)
		return NULL;
	struct io_cache *cache = calloc(1, sizeof *cache);
	if (!cache)
		return NULL;
	cache->bound = bound;
	char id[33];
	for (int i = 0; i < 16; i++)
		snprintf(id + 2 * i, 3, "%02x", store_id[i]);
	if (cache_root(cache->root) < 0 ||
	    (size_t)snprintf(cache->directory, sizeof cache->directory, "%s/%s-%016llx", cache->root, id,
			     (unsigned long long)XXH3_64bits(location, strlen(location))) >= sizeof cache->directory ||
	    io_make_directories(cache->directory) < 0) {
		free(cache);
		return NULL;   /* invariant 1: no cache, every read a miss */
	}
	return cache;
}

void io_cache_free(struct io_cache *cache)
{
	free(cache);
}

int io_cache_lock_open(const char *identity)
{
	char path[CACHE_PATH_MAX + 32];
	int rc = cache_root(path);
	if (rc < 0)
		return rc;
	size_t length = strlen(path);
	snprintf(path + length, sizeof path - length, "/locks");
	if ((rc = io_make_directories(path)) < 0)
		return rc;
	snprintf(path + length, sizeof path - length, "/locks/%016llx",
		 (unsigned long long)XXH3_64bits(identity, strlen(identity)));
	int descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	return descriptor < 0 ? -errno : descriptor;
}

#define ENTRY_PATH_MAX (CACHE_PATH_MAX + 160)

/* An entry's path: "<start>" for a piece, "<name, '/' as '-'>-<start>" for a chunk of
 * another object. -ENAMETOOLONG (then not cached) or 0. */
static int entry_path(const struct io_cache *cache, const char *name, uint64_t start, char out[ENTRY_PATH_MAX])
{
	char flat[128] = "";
	if (name) {
		size_t length = strlen(name);
		if (length + 2 > sizeof flat)
			return -ENAMETOOLONG;
		for (size_t i = 0; i < length; i++)
			flat[i] = name[i] == '/' ? '-' : name[i];
		flat[length] = '-';
		flat[length + 1] = 0;
	}
	int written = snprintf(out, ENTRY_PATH_MAX, "%s/%s%016llx", cache->directory, flat, (unsigned long long)start);
	return written < 0 || written >= ENTRY_PATH_MAX ? -ENAMETOOLONG : 0;
}

bool io_cache_admits(const struct io_cache *cache, uint64_t size)
{
	return cache && size <= cache->bound / 8;
}

bool io_cache_has(struct io_cache *cache, const char *name, uint64_t start)
{
	char path[ENTRY_PATH_MAX];
	return cache && entry_path(cache, name, start, path) == 0 && access(path, F_OK) == 0;
}

int io_cache_get(struct io_cache *cache, const char *name, uint64_t start, struct buf *bytes)
{
	char path[ENTRY_PATH_MAX];
	if (!cache || entry_path(cache, name, start, path) < 0)
		return -ENOENT;
	int descriptor = open(path, O_RDONLY | O_CLOEXEC);
	if (descriptor < 0)
		return -ENOENT;
	struct stat status;
	uint8_t header[CACHE_HEADER];
	int rc = -ENOENT;
	buf_reset(bytes);
	if (fstat(descriptor, &status) < 0 || status.st_size < (off_t)CACHE_HEADER ||
	    pread(descriptor, header, sizeof header, 0) != (ssize_t)sizeof header || buf_load_u32(header) != CACHE_MAGIC)
		goto damaged;
	size_t size = (size_t)status.st_size - CACHE_HEADER;
	if (buf_reserve(bytes, size) < 0)
		goto out;
	if (pread(descriptor, bytes->data, size, CACHE_HEADER) != (ssize_t)size ||
	    XXH3_64bits(bytes->data, size) != buf_load_u64(header + 8))
		goto damaged;
	bytes->size = size;
	futimens(descriptor, NULL);   /* invariant 2: recently used */
	atomic_fetch_add(&hits, 1);
	atomic_fetch_add(&hit_bytes, size);
	rc = 0;
	goto out;
damaged:
	unlink(path);   /* invariant 1 */
	io_log(LOG_DEBUG, "%s: a damaged cache entry was removed", path);
out:
	close(descriptor);
	if (rc < 0)
		buf_free(bytes);   /* a miss leaves nothing to free */
	return rc;
}

struct cache_file {
	char path[CACHE_PATH_MAX + 160];
	uint64_t size;
	struct timespec used;
};

static int older_first(const void *a, const void *b)
{
	const struct cache_file *left = a, *right = b;
	if (left->used.tv_sec != right->used.tv_sec)
		return left->used.tv_sec < right->used.tv_sec ? -1 : 1;
	return left->used.tv_nsec < right->used.tv_nsec ? -1 : left->used.tv_nsec > right->used.tv_nsec;
}

/* Every cached file of every store under the root. 0 or -errno (then *out is NULL). */
static int cache_files(const struct io_cache *cache, struct cache_file **out, size_t *count_out, uint64_t *total_out)
{
	struct cache_file *files = NULL;
	size_t count = 0, capacity = 0;
	uint64_t total = 0;
	DIR *root = opendir(cache->root);
	if (!root)
		return -errno;
	struct dirent *store;
	while ((store = readdir(root))) {
		if (store->d_name[0] == '.' || strcmp(store->d_name, "locks") == 0)
			continue;   /* (the host locks are no cache: never evicted) */
		char directory[CACHE_PATH_MAX + 48];
		if ((size_t)snprintf(directory, sizeof directory, "%s/%.64s", cache->root, store->d_name) >=
		    sizeof directory)
			continue;
		DIR *entries = opendir(directory);
		if (!entries)
			continue;
		struct dirent *entry;
		while ((entry = readdir(entries))) {
			struct cache_file file;
			struct stat status;
			if (entry->d_name[0] == '.' ||
			    (size_t)snprintf(file.path, sizeof file.path, "%s/%s", directory, entry->d_name) >= sizeof file.path ||
			    stat(file.path, &status) < 0 || !S_ISREG(status.st_mode))
				continue;
			file.size = (uint64_t)status.st_size;
			file.used = status.st_mtim;
			if (count == capacity) {
				size_t grown_capacity = capacity ? capacity * 2 : 256;
				struct cache_file *grown = realloc(files, grown_capacity * sizeof *grown);
				if (!grown)
					break;
				files = grown;
				capacity = grown_capacity;
			}
			files[count++] = file;
			total += file.size;
		}
		closedir(entries);
	}
	closedir(root);
	*out = files;
	*count_out = count;
	*total_out = total;
	return 0;
}

/* Invariant 2: down to three quarters of the bound, least recently used first. */
static void cache_evict(const struct io_cache *cache)
{
	struct cache_file *files = NULL;
	size_t count = 0;
	uint64_t total = 0;
	if (cache_files(cache, &files, &count, &total) < 0)
		return;
	if (total > cache->bound) {
		qsort(files, count, sizeof *files, older_first);
		for (size_t i = 0; i < count && total > cache->bound / 4 * 3; i++)
			if (unlink(files[i].path) == 0)
				total -= files[i].size;
	}
	free(files);
}

void io_cache_forget_piece(struct io_cache *cache, uint64_t start)
{
	char path[ENTRY_PATH_MAX], prefix[48];
	if (!cache || entry_path(cache, NULL, start, path) < 0)
		return;
	unlink(path);
	/* and its parts: "piece-<start>-<offset>" (io_pieced.c invariant 5) */
	int length = snprintf(prefix, sizeof prefix, "piece-%016llx-", (unsigned long long)start);
	DIR *entries = opendir(cache->directory);
	if (!entries)
		return;
	for (struct dirent *entry; (entry = readdir(entries));)
		if (strncmp(entry->d_name, prefix, (size_t)length) == 0 &&
		    snprintf(path, sizeof path, "%s/%s", cache->directory, entry->d_name) < (int)sizeof path)
			unlink(path);
	closedir(entries);
}

void io_cache_put(struct io_cache *cache, const char *name, uint64_t start, const uint8_t *bytes, size_t size)
{
	if (!cache || size == 0 || size + CACHE_HEADER > cache->bound / 8)
		return;
	char path[ENTRY_PATH_MAX], temporary[ENTRY_PATH_MAX + 32];
	if (entry_path(cache, name, start, path) < 0)
		return;
	snprintf(temporary, sizeof temporary, "%s.%ld.tmp", path, (long)getpid());
	int descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (descriptor < 0)
		return;
	uint8_t header[CACHE_HEADER] = { 0 };
	buf_store_u32(header, CACHE_MAGIC);
	buf_store_u64(header + 8, XXH3_64bits(bytes, size));
	bool written = pwrite(descriptor, header, sizeof header, 0) == (ssize_t)sizeof header &&
		       pwrite(descriptor, bytes, size, CACHE_HEADER) == (ssize_t)size;
	close(descriptor);
	/* not fsynced: a cache entry torn by a crash fails its checksum and is removed (invariant 1) */
	if (!written || rename(temporary, path) < 0) {
		unlink(temporary);
		return;
	}
	atomic_fetch_add(&stores, 1);
	pthread_mutex_lock(&evict_lock);
	bool look = stored_since_scan == UINT64_MAX || stored_since_scan + size > cache->bound / 8;
	stored_since_scan = look ? 0 : stored_since_scan + size;
	pthread_mutex_unlock(&evict_lock);
	if (look)
		cache_evict(cache);
}
