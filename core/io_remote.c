/*
 * io_remote — a store directory kept in an S3-compatible object store, behind
 * the io functions (layer: io). The object layout is docs/FORMAT.md §23; why
 * it works: docs/ARCHITECTURE.md "Stores in an object store".
 *
 * Two kinds of remote file:
 *   - the manifest (the name "manifest" at the store's root) is PIECED: one
 *     object per publish's tail, created with If-None-Match: * (the commit
 *     point), and two meta slot objects. That is io_pieced.c;
 *   - every other file is WHOLE: one object, read with ranged GETs, written
 *     by buffering the writes and storing the whole object on fsync (or
 *     close). That, the directories and the io entry points are this file.
 *
 * Invariants:
 *   1. A directory, once registered, lives as long as the process; the same
 *      location opened twice shares one entry and one client.
 *   2. A WHOLE object never changes once stored (its writer made it whole):
 *      chunks read from one are cached for as long as the file is open.
 *   3. A WHOLE file written by this process is stored only by fsync or close,
 *      created with If-None-Match: * when it was opened with O_EXCL. What is
 *      written is kept in memory up to SPILL_BYTES, beyond that in an unnamed
 *      file of $TMPDIR (a large segment costs disk there, not memory).
 *   4. The store's lock (the object `lock` at its root) is a flock of a file
 *      of the host cache's root standing for it (io_cache_lock_open): it
 *      orders the processes of one host, so that a host's writers take turns
 *      instead of racing on the object store (io_pieced.c invariant 8), and
 *      its page carries their wake-up words (io_wake.c). What orders writers
 *      across hosts is the conditional create of pieces. Every other lock,
 *      and the store's without a usable cache root, is a no-op, as are
 *      byte-range locks.
 *   5. Readahead: when a WHOLE file is read chunk after chunk, one thread
 *      of its own (on a connection of its own) GETs the next chunk while the
 *      caller works on this one. At most one per file; a slot being filled
 *      (FETCHING) is never evicted, and a reader that needs it waits for it;
 *      a failed readahead leaves the slot empty, so the reader asks again and
 *      gets the error itself. The thread is joined before the next one
 *      starts and on close. A readahead's chunk is freed once the reader has
 *      moved on to the next one, so a scan holds at most two of them. Around
 *      a fork none runs (io_threads_pause): a forked child has no threads,
 *      and a lock one held would stay taken there.
 *   6. Chunks of segments and packs (objects that never change, under names
 *      never reused) up to an eighth of the cache's bound also go into the
 *      host's disk cache (io_cache.c), as CHUNK_SIZE pieces of the object
 *      under its name and offset, and are read from there by any later
 *      process of the host. Other WHOLE objects (leases, pins, the lock) are
 *      written in place: never cached.
 */
#include "io_int.h"
#include "io_diag.h"
#include "io_remote_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <syslog.h>
#include <unistd.h>

/* The backend's methods (io_remote_methods, at the end), declared for the calls between them. */
static void io_remote_readahead_pause(void);
static void io_remote_readahead_resume(void);
static int io_remote_open_root(const char *location);
static int io_remote_open_at(int directory, const char *name);
static int io_remote_file_open(int directory, const char *name, int flags, enum io_class class, struct io_file *out);
static void io_remote_file_close(struct io_file *file);
static ssize_t io_remote_pread(struct io_file *file, void *out, size_t size, uint64_t offset);
static int io_remote_pwrite(struct io_file *file, const void *bytes, size_t size, uint64_t offset);
static int io_remote_sync(struct io_file *file);
static int io_remote_truncate(struct io_file *file, uint64_t size);
static int io_remote_size(struct io_file *file, uint64_t *size_out);
static int io_remote_size_known(struct io_file *file, uint64_t *size_out);
static uint64_t io_remote_append_offset(const struct io_file *file, uint64_t end);
static uint64_t io_remote_last_append_start(struct io_file *file);
static void io_remote_note_state_start(struct io_file *file, uint64_t offset);
static int io_remote_punch(struct io_file *file, uint64_t start, uint64_t end);
static int io_remote_data_bytes(struct io_file *file, uint64_t start, uint64_t end, uint64_t *bytes_out);
static int io_remote_unlink(int directory, const char *name);
static int io_remote_rename(int directory, const char *from, const char *to);
static int io_remote_list(int directory, const char *subdirectory, int (*visit)(const char *name, void *context),
		   void *context);


#define REMOTE_DIRECTORIES 64
#define CHUNK_SIZE (1u << 20)         /* what a read of a WHOLE file fetches at least */
#define READAHEAD_SIZE (4u << 20)     /* what a readahead fetches (invariant 5) */
#define CHUNKS IO_REMOTE_CHUNKS
#define SPILL_BYTES (8u << 20)        /* a WHOLE file being written moves to a local file beyond this */

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

/* Readahead threads of the process, and the pause around a fork (invariant 5). */
static pthread_mutex_t readahead_gate = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t readahead_ended = PTHREAD_COND_INITIALIZER;
static unsigned readaheads_running;
static bool readaheads_paused;

static void io_remote_readahead_pause(void)
{
	pthread_mutex_lock(&readahead_gate);
	readaheads_paused = true;
	while (readaheads_running > 0)
		pthread_cond_wait(&readahead_ended, &readahead_gate);
	pthread_mutex_unlock(&readahead_gate);
}

static void io_remote_readahead_resume(void)
{
	pthread_mutex_lock(&readahead_gate);
	readaheads_paused = false;
	pthread_mutex_unlock(&readahead_gate);
}

/* Counts a readahead about to start: false while paused (then none starts). */
static bool readahead_admit(void)
{
	pthread_mutex_lock(&readahead_gate);
	bool admitted = !readaheads_paused;
	if (admitted)
		readaheads_running++;
	pthread_mutex_unlock(&readahead_gate);
	return admitted;
}

/* A readahead thread has let go of every lock of its file: it is as good as gone. */
static void readahead_leave(void)
{
	pthread_mutex_lock(&readahead_gate);
	readaheads_running--;
	pthread_cond_broadcast(&readahead_ended);
	pthread_mutex_unlock(&readahead_gate);
}
static struct remote_directory *directories[REMOTE_DIRECTORIES];

static struct remote_directory *directory_of(int directory)
{
	int index = directory - IO_REMOTE_BASE;
	if (index < 0 || index >= REMOTE_DIRECTORIES)
		return NULL;
	pthread_mutex_lock(&table_lock);
	struct remote_directory *found = directories[index];
	pthread_mutex_unlock(&table_lock);
	return found;
}

/* The table slot of an equal directory, or a new one. Returns the pseudo descriptor or -errno. */
static int directory_register(const char *location, const char *key, struct s3_client *client, bool owns,
			      struct remote_directory *root)
{
	pthread_mutex_lock(&table_lock);
	int free_slot = -1, rc = -EMFILE;
	for (int i = 0; i < REMOTE_DIRECTORIES; i++) {
		struct remote_directory *entry = directories[i];
		if (!entry) {
			if (free_slot < 0)
				free_slot = i;
			continue;
		}
		if (strcmp(entry->location, location) == 0 && strcmp(entry->key, key) == 0) {
			rc = IO_REMOTE_BASE + i;
			goto out;
		}
	}
	if (free_slot >= 0 && client) {
		struct remote_directory *entry = calloc(1, sizeof *entry);
		if (!entry) {
			rc = -ENOMEM;
			goto out;
		}
		snprintf(entry->location, sizeof entry->location, "%s", location);
		snprintf(entry->key, sizeof entry->key, "%s", key);
		entry->client = client;
		entry->owns_client = owns;
		entry->root = root ? root : entry;
		directories[free_slot] = entry;
		rc = IO_REMOTE_BASE + free_slot;
		client = NULL;
	}
out:
	pthread_mutex_unlock(&table_lock);
	if (client && owns)
		s3_client_free(client);
	return rc;
}

/* The directories live as long as the process (upper layers close a directory
 * descriptor with close(2), which ignores these numbers): freed at exit. */
__attribute__((destructor)) static void directories_free(void)
{
	pthread_mutex_lock(&table_lock);
	for (int i = 0; i < REMOTE_DIRECTORIES; i++) {
		if (directories[i] && directories[i]->owns_client)
			s3_client_free(directories[i]->client);
		free(directories[i]);
		directories[i] = NULL;
	}
	pthread_mutex_unlock(&table_lock);
}

static int io_remote_open_root(const char *location)
{
	io_failure_note(0, "");   /* io_strerror speaks of the last request only */
	/* the same store opened again shares its client (one request at a time, s3.h) */
	int rc = directory_register(location, "", NULL, false, NULL);
	if (rc >= 0)
		return rc;
	struct s3_location parsed;
	struct error_info error;
	error_info_clear(&error);
	struct s3_client *client = NULL;
	if ((rc = s3_location_parse(location, &parsed, &error)) < 0 ||
	    (rc = s3_client_open(&parsed, &client, &error)) < 0) {
		io_log_failure(&error);
		return rc;
	}
	return directory_register(location, "", client, true, NULL);
}

static int io_remote_open_at(int directory, const char *name)
{
	struct remote_directory *parent = directory_of(directory);
	if (!parent)
		return -EBADF;
	char key[S3_KEY_MAX];
	if ((size_t)snprintf(key, sizeof key, "%s%s/", parent->key, name) >= sizeof key)
		return -ENAMETOOLONG;
	return directory_register(parent->location, key, parent->client, false, parent->root);
}

static void store_id_note(struct remote_directory *directory, const uint8_t store_id[16])
{
	pthread_mutex_lock(&table_lock);
	memcpy(directory->root->store_id, store_id, 16);
	directory->root->store_id_known = true;
	pthread_mutex_unlock(&table_lock);
}

/* The host cache for the chunks of the object key (named from the store's root) of size
 * bytes: only segments and packs, which never change and whose names are never reused
 * (invariant 6), and only those the cache admits; NULL for others, when the store is not
 * known yet, or when the cache is off. */
static struct io_cache *chunk_cache_open(struct remote_directory *directory, const char *key, uint64_t size)
{
	if (strncmp(key, "segments/", 9) != 0 && strncmp(key, "packs/", 6) != 0)
		return NULL;
	uint8_t store_id[16];
	pthread_mutex_lock(&table_lock);
	bool known = directory->root->store_id_known;
	memcpy(store_id, directory->root->store_id, 16);
	pthread_mutex_unlock(&table_lock);
	struct io_cache *cache = known ? io_cache_open(store_id, directory->root->location) : NULL;
	if (cache && !io_cache_admits(cache, size)) {
		io_cache_free(cache);
		cache = NULL;
	}
	return cache;
}

/* ---- files ------------------------------------------------------------------------ */

static void readahead_join(struct io_remote_file *file);

static int key_of(const struct remote_directory *directory, const char *name, char out[S3_KEY_MAX])
{
	return (size_t)snprintf(out, S3_KEY_MAX, "%s%s", directory->key, name) >= S3_KEY_MAX ? -ENAMETOOLONG : 0;
}

static int io_remote_file_open(int directory, const char *name, int flags, enum io_class class, struct io_file *out)
{
	io_failure_note(0, "");   /* io_strerror speaks of the last request only */
	out->descriptor = -1;
	out->class = class;
	out->remote = NULL;
	struct remote_directory *parent = directory_of(directory);
	if (!parent)
		return -EBADF;
	struct io_remote_file *file = calloc(1, sizeof *file);
	if (!file)
		return -ENOMEM;
	file->directory = parent;
	file->spill = -1;
	/* the store's lock is a lock among the host's processes (invariant 4); others are none */
	file->host_lock = parent->key[0] == 0 && strcmp(name, "lock") == 0 ? -1 : -2;
	pthread_mutex_init(&file->lock, NULL);
	pthread_cond_init(&file->readahead_done, NULL);
	file->next_sequential = UINT64_MAX;
	int rc = key_of(parent, name, file->key);
	if (rc < 0)
		goto out;
	struct error_info error;
	error_info_clear(&error);
	if (parent->key[0] == 0 && strcmp(name, "manifest") == 0) {
		file->kind = REMOTE_PIECED;
		file->store_id_note = store_id_note;
		rc = io_pieced_open(file, flags);
		goto out;
	}
	file->kind = REMOTE_WHOLE;
	file->writable = (flags & O_ACCMODE) != O_RDONLY;
	uint64_t size = 0;
	rc = (flags & O_TRUNC) ? -ENOENT : s3_head(parent->client, file->key, &size, &error);
	if (rc == 0) {
		if ((flags & O_CREAT) && (flags & O_EXCL)) {
			rc = -EEXIST;
			goto out;
		}
		file->exists = true;
		file->size = size;
		if (!file->writable)
			file->cache = chunk_cache_open(parent, file->key, size);
	} else if (rc == -ENOENT && (flags & O_CREAT)) {
		rc = 0;
		file->exclusive = flags & O_EXCL;
		file->loaded = true;     /* a new object: its content is what this process writes */
		file->dirty = true;      /* stored by the first fsync or the close, even if empty */
	} else {
		if (rc != -ENOENT)
			io_log_failure(&error);
		goto out;
	}
out:
	if (rc < 0) {
		io_pieced_free(file);
		pthread_cond_destroy(&file->readahead_done);
		pthread_mutex_destroy(&file->lock);
		free(file);
		return rc;
	}
	out->remote = file;
	out->descriptor = IO_REMOTE_BASE;
	return 0;
}

/* Stores a dirty WHOLE file (invariant 3). Caller holds file->lock. */
static int whole_store(struct io_remote_file *file)
{
	if (!file->dirty)
		return 0;
	struct error_info error;
	error_info_clear(&error);
	enum s3_condition condition = file->exclusive && !file->exists ? S3_IF_ABSENT : S3_ALWAYS;
	int rc = file->spill >= 0
			 ? s3_put_descriptor(file->directory->client, file->key, file->spill, file->spill_size, condition,
					     &error)
			 : s3_put(file->directory->client, file->key, file->content.data, file->content.size, condition,
				  &error);
	if (rc < 0) {
		io_log_failure(&error);
		return rc;
	}
	file->exists = true;
	file->dirty = false;
	file->size = file->spill >= 0 ? file->spill_size : file->content.size;
	return 0;
}

static void io_remote_file_close(struct io_file *file)
{
	struct io_remote_file *remote = file->remote;
	if (!remote)
		return;
	if (remote->kind == REMOTE_WHOLE && remote->writable)
		whole_store(remote);
	pthread_mutex_lock(&remote->lock);
	readahead_join(remote);
	pthread_mutex_unlock(&remote->lock);
	if (remote->readahead_client)
		s3_client_free(remote->readahead_client);
	for (int i = 0; i < IO_PREFETCH_WIDTH; i++)
		if (remote->prefetch_clients[i])
			s3_client_free(remote->prefetch_clients[i]);
	io_pieced_free(remote);
	for (int i = 0; i < CHUNKS; i++)
		buf_free(&remote->chunks[i].bytes);
	buf_free(&remote->content);
	if (remote->spill >= 0)
		close(remote->spill);
	if (remote->host_lock >= 0)
		close(remote->host_lock);   /* its flock goes with it */
	pthread_cond_destroy(&remote->readahead_done);
	pthread_mutex_destroy(&remote->lock);
	free(remote);
	file->remote = NULL;
}

/* ---- WHOLE files ---------------------------------------------------------------------- */

/* Loads a stored object into content before a write changes part of it. */
static int whole_load(struct io_remote_file *file)
{
	if (file->loaded)
		return 0;
	buf_reset(&file->content);
	struct error_info error;
	error_info_clear(&error);
	int rc = file->size ? s3_get(file->directory->client, file->key, 0, 0, &file->content, &error) : 0;
	if (rc < 0) {
		io_log_failure(&error);
		return rc;
	}
	file->loaded = true;
	return 0;
}

/* The length of a WHOLE file: what this process wrote, or what is stored. */
static uint64_t whole_length(const struct io_remote_file *file)
{
	return !file->loaded ? file->size : file->spill >= 0 ? file->spill_size : file->content.size;
}

/* Moves what is written into an unnamed local file (invariant 3). 0 or -errno. */
static int whole_spill(struct io_remote_file *file)
{
	const char *directory = getenv("TMPDIR");
	if (!directory || !*directory)
		directory = "/tmp";
	int descriptor = open(directory, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (descriptor < 0) {
		char path[4096];
		snprintf(path, sizeof path, "%s/graphfs-spill-XXXXXX", directory);
		if ((descriptor = mkostemp(path, O_CLOEXEC)) < 0)
			return -errno;
		unlink(path);
	}
	for (size_t done = 0; done < file->content.size;) {
		ssize_t put = pwrite(descriptor, file->content.data + done, file->content.size - done, (off_t)done);
		if (put < 0 && errno == EINTR)
			continue;
		if (put <= 0) {
			int rc = put < 0 ? -errno : -EIO;
			close(descriptor);
			return rc;
		}
		done += (size_t)put;
	}
	file->spill = descriptor;
	file->spill_size = file->content.size;
	buf_free(&file->content);
	return 0;
}

/* ---- chunks of WHOLE files being read, and readahead (invariants 2 and 5) ---------------- */

/* Whether a readahead is filling a slot. Caller holds file->lock. */
static bool chunk_fetching(const struct io_remote_file *file)
{
	for (int i = 0; i < CHUNKS; i++)
		if (file->chunks[i].state == CHUNK_FETCHING)
			return true;
	return false;
}

/* The slot holding (or being filled with) the byte at offset, or NULL. Caller holds file->lock. */
static struct chunk *chunk_find(struct io_remote_file *file, uint64_t offset)
{
	for (int i = 0; i < CHUNKS; i++) {
		struct chunk *chunk = &file->chunks[i];
		if (chunk->state != CHUNK_EMPTY && offset >= chunk->start && offset - chunk->start < chunk->length)
			return chunk;
	}
	return NULL;
}

/* The least recently used slot that no readahead is filling, emptied; never keep. */
static struct chunk *chunk_victim(struct io_remote_file *file, const struct chunk *keep)
{
	struct chunk *victim = NULL;
	for (int i = 0; i < CHUNKS; i++) {
		struct chunk *chunk = &file->chunks[i];
		if (chunk == keep || chunk->state == CHUNK_FETCHING)
			continue;
		if (!victim || chunk->state == CHUNK_EMPTY || (victim->state != CHUNK_EMPTY && chunk->used < victim->used))
			victim = chunk;
	}
	if (victim) {
		victim->state = CHUNK_EMPTY;
		buf_reset(&victim->bytes);
	}
	return victim;
}

/* Waits for a finished or running readahead thread and joins it. Caller holds file->lock. */
static void readahead_join(struct io_remote_file *file)
{
	if (!file->readahead_started)
		return;
	if (file->readahead_pid != getpid()) {
		/* a forked child: the thread stayed in the parent; what it was filling is not coming */
		for (int i = 0; i < CHUNKS; i++)
			if (file->chunks[i].state == CHUNK_FETCHING)
				file->chunks[i].state = CHUNK_EMPTY;
		file->readahead_started = false;
		return;
	}
	while (chunk_fetching(file))
		pthread_cond_wait(&file->readahead_done, &file->lock);
	if (!file->readahead_started)
		return;   /* another caller joined it while this one waited */
	pthread_t thread = file->readahead;
	file->readahead_started = false;
	pthread_mutex_unlock(&file->lock);
	pthread_join(thread, NULL);   /* it has left its last lock: this returns at once */
	pthread_mutex_lock(&file->lock);
}

/* The chunk holding offset, READY: cached, filled by the readahead (waited for), or read
 * now (the CHUNK_SIZE-aligned chunk around it). Caller holds file->lock (released while
 * waiting). 0 or -errno. */
static int chunk_get(struct io_remote_file *file, uint64_t offset, struct chunk **out)
{
	struct chunk *chunk = chunk_find(file, offset);
	if (chunk && chunk->state == CHUNK_FETCHING) {
		readahead_join(file);
		chunk = chunk_find(file, offset);   /* READY, or gone if the readahead failed */
	}
	if (!chunk) {
		if (!(chunk = chunk_victim(file, NULL))) {
			readahead_join(file);   /* every slot being filled: cannot happen with one readahead */
			chunk = chunk_victim(file, NULL);
		}
		uint64_t start = offset / CHUNK_SIZE * CHUNK_SIZE;
		uint64_t length = file->size - start < CHUNK_SIZE ? file->size - start : CHUNK_SIZE;
		if (io_cache_get(file->cache, file->key, start, &chunk->bytes) < 0 || chunk->bytes.size != length) {
			struct error_info error;
			error_info_clear(&error);
			buf_reset(&chunk->bytes);
			int rc = s3_get(file->directory->client, file->key, start, length, &chunk->bytes, &error);
			if (rc < 0) {
				buf_reset(&chunk->bytes);
				io_log_failure(&error);
				return rc;
			}
			io_cache_put(file->cache, file->key, start, chunk->bytes.data, chunk->bytes.size);
		}
		chunk->start = start;
		chunk->length = chunk->bytes.size;
		chunk->state = CHUNK_READY;
	}
	chunk->used = ++file->chunk_tick;
	*out = chunk;
	return 0;
}

/* The readahead thread: one GET of the chunk its slot names, on the file's own client. */
static void *readahead_run(void *argument)
{
	struct io_remote_file *file = argument;
	pthread_mutex_lock(&file->lock);
	struct chunk *chunk = NULL;
	for (int i = 0; i < CHUNKS; i++)
		if (file->chunks[i].state == CHUNK_FETCHING)
			chunk = &file->chunks[i];
	uint64_t start = chunk->start, length = chunk->length;
	pthread_mutex_unlock(&file->lock);
	struct buf bytes;
	buf_init(&bytes);
	struct error_info error;
	error_info_clear(&error);
	int rc = io_failpoint("object_store.readahead");
	if (rc == 0)
		rc = s3_get(file->readahead_client, file->key, start, length, &bytes, &error);
	/* into the host cache as the CHUNK_SIZE chunks a later process reads (invariant 6) */
	for (uint64_t at = 0; rc == 0 && file->cache && at < bytes.size; at += CHUNK_SIZE)
		io_cache_put(file->cache, file->key, start + at, bytes.data + at,
			     bytes.size - at < CHUNK_SIZE ? bytes.size - at : CHUNK_SIZE);
	pthread_mutex_lock(&file->lock);
	if (rc == 0) {
		buf_free(&chunk->bytes);
		chunk->bytes = bytes;
		chunk->length = bytes.size;
		chunk->state = CHUNK_READY;
		chunk->used = ++file->chunk_tick;
	} else {
		buf_free(&bytes);
		chunk->state = CHUNK_EMPTY;   /* a reader that needs it asks again, and hears why */
	}
	pthread_cond_broadcast(&file->readahead_done);
	pthread_mutex_unlock(&file->lock);
	readahead_leave();
	return NULL;
}

/*
 * After a read from chunk: when the reads are sequential (this chunk follows
 * the one read before), starts fetching the READAHEAD_SIZE bytes after it in
 * the background, so that the GET overlaps what the caller does with this
 * one. Best effort: nothing here is an error. Caller holds file->lock.
 */
static void readahead_after(struct io_remote_file *file, struct chunk *chunk)
{
	uint64_t next = chunk->start + chunk->length;
	bool sequential = chunk->start == file->next_sequential;   /* the reader crossed into it */
	file->next_sequential = next;
	if (sequential) {
		/* a readahead's chunk the reader has left behind is not read again: its memory goes */
		struct chunk *behind = chunk->start > 0 ? chunk_find(file, chunk->start - 1) : NULL;
		if (behind && behind->state == CHUNK_READY && behind->length > CHUNK_SIZE) {
			behind->state = CHUNK_EMPTY;
			buf_free(&behind->bytes);
		}
	}
	if (!sequential || next >= file->size || chunk_find(file, next) || io_cache_has(file->cache, file->key, next))
		return;   /* (a chunk this host has cached is read from there when needed) */
	if (file->readahead_started) {
		if (chunk_fetching(file))
			return;   /* one readahead at a time */
		readahead_join(file);
		if (chunk_find(file, next))
			return;
	}
	if (!file->readahead_client) {
		struct s3_location location;
		struct error_info error;
		error_info_clear(&error);
		if (s3_location_parse(file->directory->location, &location, &error) < 0 ||
		    s3_client_open(&location, &file->readahead_client, &error) < 0) {
			file->readahead_client = NULL;
			return;
		}
	}
	if (!readahead_admit())
		return;   /* a fork is near (io_threads_pause) */
	struct chunk *slot = chunk_victim(file, chunk);
	if (!slot) {
		readahead_leave();
		return;
	}
	slot->start = next;
	slot->length = file->size - next < READAHEAD_SIZE ? file->size - next : READAHEAD_SIZE;
	slot->state = CHUNK_FETCHING;
	if (pthread_create(&file->readahead, NULL, readahead_run, file) != 0) {
		slot->state = CHUNK_EMPTY;
		readahead_leave();
		return;
	}
	file->readahead_started = true;
	file->readahead_pid = getpid();
}

static ssize_t whole_pread(struct io_remote_file *file, uint8_t *out, size_t size, uint64_t offset)
{
	if (file->loaded && file->spill >= 0) {
		if (offset >= file->spill_size)
			return 0;
		size_t take = file->spill_size - offset < size ? (size_t)(file->spill_size - offset) : size;
		ssize_t got;
		do
			got = pread(file->spill, out, take, (off_t)offset);
		while (got < 0 && errno == EINTR);
		return got < 0 ? -errno : got;
	}
	if (file->loaded) {
		if (offset >= file->content.size)
			return 0;
		size_t take = file->content.size - offset < size ? (size_t)(file->content.size - offset) : size;
		memcpy(out, file->content.data + offset, take);
		return (ssize_t)take;
	}
	size_t done = 0;
	while (done < size && offset + done < file->size) {
		uint64_t at = offset + done;
		struct chunk *chunk;
		int rc = chunk_get(file, at, &chunk);
		if (rc < 0)
			return done ? (ssize_t)done : rc;
		size_t from = (size_t)(at - chunk->start);
		if (from >= chunk->bytes.size)
			break;
		size_t take = chunk->bytes.size - from < size - done ? chunk->bytes.size - from : size - done;
		memcpy(out + done, chunk->bytes.data + from, take);
		done += take;
		readahead_after(file, chunk);
	}
	return (ssize_t)done;
}

static int whole_pwrite(struct io_remote_file *file, const uint8_t *bytes, size_t size, uint64_t offset)
{
	if (!file->writable)
		return -EBADF;
	int rc = whole_load(file);
	if (rc < 0)
		return rc;
	if (file->spill < 0 && offset + size > SPILL_BYTES && (rc = whole_spill(file)) < 0)
		return rc;
	if (file->spill >= 0) {
		for (size_t done = 0; done < size;) {
			ssize_t put = pwrite(file->spill, bytes + done, size - done, (off_t)(offset + done));
			if (put < 0 && errno == EINTR)
				continue;
			if (put <= 0)
				return put < 0 ? -errno : -EIO;
			done += (size_t)put;
		}
		if (offset + size > file->spill_size)
			file->spill_size = offset + size;
		file->dirty = true;
		return 0;
	}
	if (offset + size > file->content.size) {
		size_t grow = (size_t)(offset + size - file->content.size);
		if ((rc = buf_reserve(&file->content, grow)) < 0)
			return rc;
		memset(file->content.data + file->content.size, 0, grow);
		file->content.size += grow;
	}
	memcpy(file->content.data + offset, bytes, size);
	file->dirty = true;
	return 0;
}

/* ---- the io entry points ---------------------------------------------------------------- */

static ssize_t io_remote_pread(struct io_file *file, void *out, size_t size, uint64_t offset)
{
	io_failure_note(0, "");   /* io_strerror speaks of the last request only */
	struct io_remote_file *remote = file->remote;
	pthread_mutex_lock(&remote->lock);
	ssize_t got = remote->kind == REMOTE_PIECED ? io_pieced_pread(remote, out, size, offset)
						    : whole_pread(remote, out, size, offset);
	pthread_mutex_unlock(&remote->lock);
	return got;
}

static uint64_t prefetch_gets_sent, prefetch_rounds;   /* io_prefetch_counters (atomic) */

void io_prefetch_counters_get(struct io_prefetch_counters *out)
{
	out->gets = __atomic_load_n(&prefetch_gets_sent, __ATOMIC_RELAXED);
	out->rounds = __atomic_load_n(&prefetch_rounds, __ATOMIC_RELAXED);
}

/* One prefetch thread: the GETs numbered worker, worker + width, … on its own connection. */
struct prefetch_run {
	struct io_remote_file *file;
	struct io_prefetch_get *gets;
	size_t count, width, worker;
};

static void *prefetch_worker(void *argument)
{
	struct prefetch_run *run = argument;
	struct s3_client *client = run->file->prefetch_clients[run->worker];
	for (size_t i = run->worker; i < run->count; i += run->width) {
		struct io_prefetch_get *get = &run->gets[i];
		struct error_info error;
		error_info_clear(&error);
		get->rc = io_failpoint("object_store.prefetch");
		if (get->rc == 0) {
			__atomic_add_fetch(&prefetch_gets_sent, 1, __ATOMIC_RELAXED);
			get->rc = s3_get_sized(client, get->key, get->from - get->start, get->length, &get->bytes,
					       &get->whole_size, &error);
		}
	}
	return NULL;
}

/* GETs a prefetch has in flight at most: GRAPHFS_S3_PREFETCH (0 turns prefetching off),
 * else IO_PREFETCH_WIDTH. Read once. */
static size_t prefetch_width(void)
{
	static size_t width = SIZE_MAX;
	size_t known = __atomic_load_n(&width, __ATOMIC_RELAXED);
	if (known != SIZE_MAX)
		return known;
	const char *text = getenv("GRAPHFS_S3_PREFETCH");
	char *end = NULL;
	unsigned long value = text && *text ? strtoul(text, &end, 10) : IO_PREFETCH_WIDTH;
	known = end && *end ? IO_PREFETCH_WIDTH : value > IO_PREFETCH_WIDTH ? IO_PREFETCH_WIDTH : (size_t)value;
	__atomic_store_n(&width, known, __ATOMIC_RELAXED);
	return known;
}

/* Opens the connections a prefetch of count GETs uses (caller holds the lock): how many it has. */
static size_t prefetch_clients_open(struct io_remote_file *file, size_t count)
{
	size_t width = count < prefetch_width() ? count : prefetch_width();
	struct s3_location location;
	struct error_info error;
	error_info_clear(&error);
	if (s3_location_parse(file->directory->location, &location, &error) < 0)
		return 0;
	for (size_t i = 0; i < width; i++)
		if (!file->prefetch_clients[i] && s3_client_open(&location, &file->prefetch_clients[i], &error) < 0) {
			file->prefetch_clients[i] = NULL;
			return i;
		}
	return width;
}

/*
 * io_pieced.c invariant 6: plans under the lock, runs the GETs on up to IO_PREFETCH_WIDTH
 * threads of its own without it (a read of this file meanwhile proceeds), keeps the answers
 * under the lock. The threads end before it returns; none starts while a fork is near.
 */
static void io_remote_prefetch(struct io_file *file, const uint64_t *offsets, size_t count)
{
	struct io_remote_file *remote = file->remote;
	if (remote->kind != REMOTE_PIECED)
		return;
	struct io_prefetch_get gets[IO_PREFETCH_GETS];
	memset(gets, 0, sizeof gets);
	pthread_mutex_lock(&remote->lock);
	size_t planned = 0, width = 0;
	if (!remote->prefetching && prefetch_width() > 0) {
		planned = io_pieced_prefetch_plan(remote, offsets, count, gets, IO_PREFETCH_GETS);
		width = planned > 1 ? prefetch_clients_open(remote, planned) : 0;
		remote->prefetching = width > 0;
	}
	pthread_mutex_unlock(&remote->lock);
	if (width == 0 || !readahead_admit()) {   /* one GET: the read itself makes it */
		if (width > 0) {
			pthread_mutex_lock(&remote->lock);
			remote->prefetching = false;
			pthread_mutex_unlock(&remote->lock);
		}
		return;
	}
	__atomic_add_fetch(&prefetch_rounds, 1, __ATOMIC_RELAXED);
	pthread_t threads[IO_PREFETCH_WIDTH];
	struct prefetch_run runs[IO_PREFETCH_WIDTH];
	bool started[IO_PREFETCH_WIDTH] = { false };
	for (size_t i = 0; i < width; i++) {
		runs[i] = (struct prefetch_run){ remote, gets, planned, width, i };
		started[i] = pthread_create(&threads[i], NULL, prefetch_worker, &runs[i]) == 0;
		if (!started[i])
			for (size_t j = i; j < planned; j += width)
				gets[j].rc = -EAGAIN;   /* not fetched: the read makes it */
	}
	for (size_t i = 0; i < width; i++)
		if (started[i])
			pthread_join(threads[i], NULL);
	readahead_leave();
	pthread_mutex_lock(&remote->lock);
	io_pieced_prefetch_keep(remote, gets, planned);
	remote->prefetching = false;
	pthread_mutex_unlock(&remote->lock);
}

static int io_remote_pwrite(struct io_file *file, const void *bytes, size_t size, uint64_t offset)
{
	io_failure_note(0, "");   /* io_strerror speaks of the last request only */
	struct io_remote_file *remote = file->remote;
	pthread_mutex_lock(&remote->lock);
	int rc = remote->kind == REMOTE_PIECED ? io_pieced_pwrite(remote, bytes, size, offset)
					       : whole_pwrite(remote, bytes, size, offset);
	pthread_mutex_unlock(&remote->lock);
	return rc;
}

static int io_remote_sync(struct io_file *file)
{
	io_failure_note(0, "");   /* io_strerror speaks of the last request only */
	struct io_remote_file *remote = file->remote;
	/* a piece or meta slot is durable when its PUT returns */
	if (remote->kind == REMOTE_PIECED || !remote->writable)
		return 0;
	pthread_mutex_lock(&remote->lock);
	int rc = whole_store(remote);
	pthread_mutex_unlock(&remote->lock);
	return rc;
}

static int io_remote_truncate(struct io_file *file, uint64_t size)
{
	io_failure_note(0, "");   /* io_strerror speaks of the last request only */
	struct io_remote_file *remote = file->remote;
	pthread_mutex_lock(&remote->lock);
	int rc = 0;
	if (remote->kind == REMOTE_PIECED) {
		rc = io_pieced_truncate(remote, size);
	} else if ((rc = whole_load(remote)) == 0) {
		if (remote->spill >= 0) {
			rc = ftruncate(remote->spill, (off_t)size) < 0 ? -errno : 0;
			if (rc == 0)
				remote->spill_size = size;
		} else if (size < remote->content.size) {
			remote->content.size = (size_t)size;
		} else {
			rc = whole_pwrite(remote, (const uint8_t *)"", 0, size);
		}
		remote->dirty = true;
	}
	pthread_mutex_unlock(&remote->lock);
	return rc;
}

static int io_remote_size(struct io_file *file, uint64_t *size_out)
{
	io_failure_note(0, "");   /* io_strerror speaks of the last request only */
	struct io_remote_file *remote = file->remote;
	pthread_mutex_lock(&remote->lock);
	int rc = 0;
	if (remote->kind == REMOTE_PIECED) {
		rc = io_pieced_size(remote, size_out);
	} else {
		*size_out = whole_length(remote);
	}
	pthread_mutex_unlock(&remote->lock);
	return rc;
}

static int io_remote_size_known(struct io_file *file, uint64_t *size_out)
{
	struct io_remote_file *remote = file->remote;
	pthread_mutex_lock(&remote->lock);
	if (remote->kind == REMOTE_PIECED)
		io_pieced_catch_up(remote);   /* what this host's other writers appended (io_pieced.c invariant 8) */
	*size_out = remote->kind == REMOTE_PIECED ? io_pieced_end(remote) : whole_length(remote);
	pthread_mutex_unlock(&remote->lock);
	return 0;
}

static uint64_t io_remote_last_append_start(struct io_file *file)
{
	struct io_remote_file *remote = file->remote;
	if (remote->kind != REMOTE_PIECED)
		return 0;
	pthread_mutex_lock(&remote->lock);
	uint64_t start = io_pieced_last_start(remote);
	pthread_mutex_unlock(&remote->lock);
	return start;
}

static void io_remote_note_state_start(struct io_file *file, uint64_t offset)
{
	struct io_remote_file *remote = file->remote;
	if (remote->kind != REMOTE_PIECED)
		return;
	pthread_mutex_lock(&remote->lock);
	remote->state_start_noted = offset;
	pthread_mutex_unlock(&remote->lock);
}

static uint64_t io_remote_append_offset(const struct io_file *file, uint64_t end)
{
	return file->remote->kind == REMOTE_PIECED ? io_pieced_append_offset(end) : end;
}

static int io_remote_punch(struct io_file *file, uint64_t start, uint64_t end)
{
	struct io_remote_file *remote = file->remote;
	if (remote->kind != REMOTE_PIECED)
		return -EOPNOTSUPP;
	pthread_mutex_lock(&remote->lock);
	int rc = io_pieced_punch(remote, start, end);
	pthread_mutex_unlock(&remote->lock);
	return rc;
}

static int io_remote_data_bytes(struct io_file *file, uint64_t start, uint64_t end, uint64_t *bytes_out)
{
	struct io_remote_file *remote = file->remote;
	pthread_mutex_lock(&remote->lock);
	int rc = 0;
	if (remote->kind == REMOTE_PIECED) {
		rc = io_pieced_data_bytes(remote, start, end, bytes_out);
	} else {
		uint64_t size = whole_length(remote);
		*bytes_out = end > size ? (size > start ? size - start : 0) : end - start;
	}
	pthread_mutex_unlock(&remote->lock);
	return rc;
}

static int io_remote_unlink(int directory, const char *name)
{
	io_failure_note(0, "");   /* io_strerror speaks of the last request only */
	struct remote_directory *parent = directory_of(directory);
	if (!parent)
		return -EBADF;
	char key[S3_KEY_MAX];
	int rc = key_of(parent, name, key);
	struct error_info error;
	error_info_clear(&error);
	uint64_t size;
	if (rc == 0 && (rc = s3_head(parent->client, key, &size, &error)) == 0)
		rc = s3_delete(parent->client, key, &error);
	if (rc < 0 && rc != -ENOENT)
		io_log_failure(&error);
	return rc;
}

static int io_remote_rename(int directory, const char *from, const char *to)
{
	io_failure_note(0, "");   /* io_strerror speaks of the last request only */
	struct remote_directory *parent = directory_of(directory);
	if (!parent)
		return -EBADF;
	char from_key[S3_KEY_MAX], to_key[S3_KEY_MAX];
	int rc = key_of(parent, from, from_key);
	if (rc == 0)
		rc = key_of(parent, to, to_key);
	if (rc < 0)
		return rc;
	/* an object store has no rename: copy, then remove (the names renamed are a writer's own) */
	struct buf bytes;
	buf_init(&bytes);
	struct error_info error;
	error_info_clear(&error);
	uint64_t size = 0;
	if ((rc = s3_head(parent->client, from_key, &size, &error)) == 0 &&
	    (rc = size ? s3_get(parent->client, from_key, 0, 0, &bytes, &error) : 0) == 0 &&
	    (rc = s3_put(parent->client, to_key, bytes.data, bytes.size, S3_ALWAYS, &error)) == 0)
		rc = s3_delete(parent->client, from_key, &error);
	if (rc < 0 && rc != -ENOENT)
		io_log_failure(&error);
	buf_free(&bytes);
	return rc;
}

struct listing {
	size_t prefix_length;
	int (*visit)(const char *name, void *context);
	void *context;
	int stopped;           /* what visit returned to stop (io_directory_list returns it) */
};

static int list_one(const char *key, uint64_t size, void *context)
{
	(void)size;
	struct listing *listing = context;
	const char *name = key + listing->prefix_length;
	if (!*name || strchr(name, '/'))
		return 0;   /* deeper: not an entry of this directory */
	return listing->stopped = listing->visit(name, listing->context);
}

static int io_remote_list(int directory, const char *subdirectory, int (*visit)(const char *name, void *context),
		   void *context)
{
	io_failure_note(0, "");   /* io_strerror speaks of the last request only */
	struct remote_directory *parent = directory_of(directory);
	if (!parent)
		return -EBADF;
	char prefix[2 * S3_KEY_MAX + 2];
	if (subdirectory && *subdirectory && strcmp(subdirectory, ".") != 0)
		snprintf(prefix, sizeof prefix, "%s%s/", parent->key, subdirectory);
	else
		snprintf(prefix, sizeof prefix, "%s", parent->key);
	struct listing listing = { strlen(prefix), visit, context, 0 };
	struct error_info error;
	error_info_clear(&error);
	int rc = s3_list(parent->client, prefix, NULL, list_one, &listing, &error);
	if (rc < 0 && error.code)
		io_log_failure(&error);
	return rc < 0 ? rc : listing.stopped;
}

/* ---- the method table ----------------------------------------------------------- */

static int remote_directory_make(int directory, const char *name)
{
	(void)directory;
	(void)name;
	return 0;   /* an object store has no directories: a prefix needs no making */
}

static int remote_directory_sync(int directory)
{
	(void)directory;
	return 0;   /* a PUT is durable, names included */
}

static int remote_link(int from_directory, const char *from, int to_directory, const char *to)
{
	(void)from_directory;
	(void)from;
	(void)to_directory;
	(void)to;
	return -EXDEV;   /* the caller copies */
}

static int remote_file_create_locked(int directory, const char *name, enum io_class class, struct io_file *out)
{
	/* locks are process-local no-ops here (invariant 4) */
	return io_remote_file_open(directory, name, O_RDWR | O_CREAT | O_EXCL, class, out);
}

static int remote_scratch_open(int directory, const char *subdirectory, enum io_class class, struct io_file *out)
{
	(void)directory;
	(void)subdirectory;
	(void)class;
	(void)out;
	return -EOPNOTSUPP;   /* scratch stays local: the facade makes a memory file */
}

static int remote_pwrite(struct io_file *file, const void *bytes, size_t size, uint64_t offset, size_t *done)
{
	int rc = io_remote_pwrite(file, bytes, size, offset);
	*done = rc == 0 ? size : 0;
	return rc;
}

/* The host's lock file standing for the object (invariant 4), opened on first use: its
 * descriptor, or -1 when the host cache's root cannot hold one. */
static int host_lock_descriptor(struct io_remote_file *remote)
{
	pthread_mutex_lock(&remote->lock);
	if (remote->host_lock == -1) {   /* the store's lock, not opened yet */
		char identity[2 * S3_KEY_MAX + 8];
		snprintf(identity, sizeof identity, "%s|%s", remote->directory->root->location, remote->key);
		int descriptor = io_cache_lock_open(identity);
		remote->host_lock = descriptor < 0 ? -2 : descriptor;   /* -2: tried, none */
	}
	int descriptor = remote->host_lock;
	pthread_mutex_unlock(&remote->lock);
	return descriptor < 0 ? -1 : descriptor;
}

int io_remote_lock_descriptor(struct io_file *file)
{
	int descriptor = host_lock_descriptor(file->remote);
	return descriptor < 0 ? -EOPNOTSUPP : descriptor;
}

/* flock(2) of the host's lock file standing for the object (invariant 4); none (0)
 * without one. */
static int remote_lock(struct io_file *file, bool exclusive, bool wait)
{
	int descriptor = host_lock_descriptor(file->remote);
	if (descriptor < 0)
		return 0;
	return flock(descriptor, (exclusive ? LOCK_EX : LOCK_SH) | (wait ? 0 : LOCK_NB)) < 0 ? -errno : 0;
}

static int remote_unlock(struct io_file *file)
{
	struct io_remote_file *remote = file->remote;
	return remote->host_lock >= 0 && flock(remote->host_lock, LOCK_UN) < 0 ? -errno : 0;
}

static int remote_range_lock(struct io_file *file, int command, short type, uint64_t start, uint64_t length,
			     struct flock *out)
{
	(void)file;
	(void)command;
	(void)type;
	(void)start;
	(void)length;
	/* invariant 4: no lock is seen, every lock is granted */
	if (out)
		*out = (struct flock){ .l_type = F_UNLCK };
	return 0;
}

static int remote_allocated_bytes(struct io_file *file, uint64_t *bytes_out)
{
	return io_remote_data_bytes(file, 0, UINT64_MAX, bytes_out);
}

const struct io_methods io_remote_methods = {
	.name = "s3",
	.directory_open = io_remote_open_root,
	.directory_open_at = io_remote_open_at,
	.directory_make = remote_directory_make,
	.directory_sync = remote_directory_sync,
	.unlink = io_remote_unlink,
	.rename = io_remote_rename,
	.link = remote_link,
	.list = io_remote_list,
	.file_open = io_remote_file_open,
	.file_create_locked = remote_file_create_locked,
	.scratch_open = remote_scratch_open,
	.file_close = io_remote_file_close,
	.pread = io_remote_pread,
	.prefetch = io_remote_prefetch,
	.pwrite = remote_pwrite,
	.fsync = io_remote_sync,
	.datasync = io_remote_sync,
	.truncate = io_remote_truncate,
	.size = io_remote_size,
	.size_known = io_remote_size_known,
	.last_append_start = io_remote_last_append_start,
	.note_state_start = io_remote_note_state_start,
	.append_offset = io_remote_append_offset,
	.lock = remote_lock,
	.unlock = remote_unlock,
	.range_lock = remote_range_lock,
	.punch = io_remote_punch,
	.data_bytes = io_remote_data_bytes,
	.allocated_bytes = remote_allocated_bytes,
	.threads_pause = io_remote_readahead_pause,
	.threads_resume = io_remote_readahead_resume,
};
