/*
 * io_remote — a store directory kept in an S3-compatible object store, behind
 * the io functions (layer: io). The object layout is docs/FORMAT.md §23; why
 * it works: docs/ARCHITECTURE.md "Stores in an object store".
 *
 * Two kinds of remote file:
 *   - the manifest (the name "manifest" at the store's root) is PIECED: its
 *     bytes [0, 4096) are the object manifest/0000000000000000, the two meta
 *     slots (4096 and 8192) the objects manifest.meta/0 and manifest.meta/1,
 *     and every write at the end of the blocks (a publish's tail) becomes one
 *     new object manifest/<offset as 16 hex digits> created with
 *     If-None-Match: * — the commit point: of two writers appending at the
 *     same offset exactly one succeeds, the other gets -ESTALE and builds on
 *     the new end;
 *   - every other file is WHOLE: one object, read with ranged GETs, written
 *     by buffering the writes and storing the whole object on fsync (or
 *     close).
 *
 * Invariants:
 *   1. A piece, once created, never changes: the pieces known are cached
 *      whole and never invalidated; the list of pieces only grows at its end
 *      (truncate and punch remove pieces, only below what any reader uses
 *      or above the durable end, as the local file would).
 *   2. The meta slot objects are the only objects written in place; they are
 *      never cached.
 *   3. A WHOLE file written by this process is stored only by fsync or close,
 *      created with If-None-Match: * when it was opened with O_EXCL.
 *   4. Locks are process-local no-ops: what serializes writers across
 *      processes and hosts is the conditional create of pieces.
 */
#include "io_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "buf.h"
#include "error_info.h"
#include "s3.h"

#define REMOTE_DIRECTORIES 64
#define HEADER_SIZE 4096u
#define META_START 4096u
#define BLOCKS_START 12288u
#define CHUNK_SIZE (1u << 20)
#define CHUNKS 4

struct remote_directory {
	char key[S3_KEY_MAX];          /* "" (the store's root) or "name/" */
	char location[S3_KEY_MAX];     /* the s3:// text it was opened with */
	struct s3_client *client;      /* shared with the directories under the same root */
	bool owns_client;
};

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct remote_directory *directories[REMOTE_DIRECTORIES];

enum remote_kind { REMOTE_WHOLE, REMOTE_PIECED };

struct piece {
	uint64_t start, size;
	struct buf *bytes;             /* cached (invariant 1), NULL until read */
};

struct chunk {
	uint64_t start;                /* UINT64_MAX: empty */
	struct buf bytes;
};

struct io_remote_file {
	struct remote_directory *directory;
	char key[S3_KEY_MAX];
	enum remote_kind kind;
	pthread_mutex_t lock;
	/* WHOLE */
	bool exists;                   /* stored in the object store */
	uint64_t size;
	bool writable, exclusive, dirty, loaded;
	struct buf content;            /* while writable: the whole object */
	struct chunk chunks[CHUNKS];
	unsigned next_chunk;
	/* PIECED */
	struct piece *pieces;
	size_t piece_count, piece_capacity;
};

static void log_remote(const struct error_info *error)
{
	if (error->code)
		io_log(LOG_ERR, "%s", error->message);
}

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
static int directory_register(const char *location, const char *key, struct s3_client *client, bool owns)
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

int io_remote_open_root(const char *location)
{
	/* the same store opened again shares its client (one request at a time, s3.h) */
	int rc = directory_register(location, "", NULL, false);
	if (rc >= 0)
		return rc;
	struct s3_location parsed;
	struct error_info error;
	error_info_clear(&error);
	struct s3_client *client = NULL;
	if ((rc = s3_location_parse(location, &parsed, &error)) < 0 ||
	    (rc = s3_client_open(&parsed, &client, &error)) < 0) {
		log_remote(&error);
		return rc;
	}
	return directory_register(location, "", client, true);
}

int io_remote_open_at(int directory, const char *name)
{
	struct remote_directory *parent = directory_of(directory);
	if (!parent)
		return -EBADF;
	char key[S3_KEY_MAX];
	if ((size_t)snprintf(key, sizeof key, "%s%s/", parent->key, name) >= sizeof key)
		return -ENAMETOOLONG;
	return directory_register(parent->location, key, parent->client, false);
}

/* ---- files ------------------------------------------------------------------------ */

static int key_of(const struct remote_directory *directory, const char *name, char out[S3_KEY_MAX])
{
	return (size_t)snprintf(out, S3_KEY_MAX, "%s%s", directory->key, name) >= S3_KEY_MAX ? -ENAMETOOLONG : 0;
}

static int parse_piece(const char *key, uint64_t size, void *context)
{
	struct io_remote_file *file = context;
	const char *name = strrchr(key, '/');
	name = name ? name + 1 : key;
	char *end;
	uint64_t start = strtoull(name, &end, 16);
	if (*end || strlen(name) != 16)
		return 0;   /* not a piece */
	if (file->piece_count && start < file->pieces[file->piece_count - 1].start + file->pieces[file->piece_count - 1].size)
		return 0;   /* listed before: start_after is exclusive, but be safe */
	if (file->piece_count == file->piece_capacity) {
		size_t capacity = file->piece_capacity ? file->piece_capacity * 2 : 64;
		struct piece *grown = realloc(file->pieces, capacity * sizeof *grown);
		if (!grown)
			return -ENOMEM;
		file->pieces = grown;
		file->piece_capacity = capacity;
	}
	file->pieces[file->piece_count++] = (struct piece){ start, size, NULL };
	return 0;
}

/* Lists the pieces after the last one known. Caller holds file->lock. */
static int pieces_refresh(struct io_remote_file *file)
{
	char prefix[S3_KEY_MAX + 2], after[S3_KEY_MAX + 20];
	snprintf(prefix, sizeof prefix, "%s/", file->key);
	const char *start_after = NULL;
	if (file->piece_count) {
		snprintf(after, sizeof after, "%s%016llx", prefix,
			 (unsigned long long)file->pieces[file->piece_count - 1].start);
		start_after = after;
	}
	struct error_info error;
	error_info_clear(&error);
	int rc = s3_list(file->directory->client, prefix, start_after, parse_piece, file, &error);
	if (rc < 0 && rc != -ENOMEM)
		log_remote(&error);
	return rc;
}

static uint64_t pieced_end(const struct io_remote_file *file)
{
	if (file->piece_count == 0)
		return 0;
	const struct piece *last = &file->pieces[file->piece_count - 1];
	uint64_t end = last->start + last->size;
	return end < BLOCKS_START ? BLOCKS_START : end;
}

int io_remote_file_open(int directory, const char *name, int flags, enum io_class class, struct io_file *out)
{
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
	pthread_mutex_init(&file->lock, NULL);
	for (int i = 0; i < CHUNKS; i++)
		file->chunks[i].start = UINT64_MAX;
	int rc = key_of(parent, name, file->key);
	if (rc < 0)
		goto out;
	struct error_info error;
	error_info_clear(&error);
	if (parent->key[0] == 0 && strcmp(name, "manifest") == 0) {
		file->kind = REMOTE_PIECED;
		if ((rc = pieces_refresh(file)) < 0)
			goto out;
		if (flags & O_CREAT) {
			if ((flags & O_EXCL) && file->piece_count)
				rc = -EEXIST;
		} else if (file->piece_count == 0 || file->pieces[0].start != 0) {
			rc = -ENOENT;
		}
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
	} else if (rc == -ENOENT && (flags & O_CREAT)) {
		rc = 0;
		file->exclusive = flags & O_EXCL;
		file->loaded = true;     /* a new object: its content is what this process writes */
		file->dirty = true;      /* stored by the first fsync or the close, even if empty */
	} else {
		if (rc != -ENOENT)
			log_remote(&error);
		goto out;
	}
out:
	if (rc < 0) {
		free(file->pieces);
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
	int rc = s3_put(file->directory->client, file->key, file->content.data, file->content.size,
			file->exclusive && !file->exists ? S3_IF_ABSENT : S3_ALWAYS, &error);
	if (rc < 0) {
		log_remote(&error);
		return rc;
	}
	file->exists = true;
	file->dirty = false;
	file->size = file->content.size;
	return 0;
}

void io_remote_file_close(struct io_file *file)
{
	struct io_remote_file *remote = file->remote;
	if (!remote)
		return;
	if (remote->kind == REMOTE_WHOLE && remote->writable)
		whole_store(remote);
	for (size_t i = 0; i < remote->piece_count; i++) {
		if (remote->pieces[i].bytes) {
			buf_free(remote->pieces[i].bytes);
			free(remote->pieces[i].bytes);
		}
	}
	free(remote->pieces);
	for (int i = 0; i < CHUNKS; i++)
		buf_free(&remote->chunks[i].bytes);
	buf_free(&remote->content);
	pthread_mutex_destroy(&remote->lock);
	free(remote);
	file->remote = NULL;
}

/* ---- the manifest's pieces ------------------------------------------------------------ */

/* The piece holding offset (refreshing the list once if past its end and refresh is
 * set), or NULL. */
static struct piece *piece_at(struct io_remote_file *file, uint64_t offset, bool refresh, int *rc)
{
	*rc = 0;
	for (int attempt = 0; attempt < 2; attempt++) {
		size_t low = 0, high = file->piece_count;
		while (low < high) {
			size_t middle = low + (high - low) / 2;
			if (file->pieces[middle].start <= offset)
				low = middle + 1;
			else
				high = middle;
		}
		if (low > 0) {
			struct piece *piece = &file->pieces[low - 1];
			if (offset < piece->start + piece->size)
				return piece;
		}
		if (!refresh || attempt > 0)
			break;
		if ((*rc = pieces_refresh(file)) < 0)
			return NULL;
	}
	return NULL;
}

static int piece_load(struct io_remote_file *file, struct piece *piece)
{
	if (piece->bytes)
		return 0;
	struct buf *bytes = calloc(1, sizeof *bytes);
	if (!bytes)
		return -ENOMEM;
	buf_init(bytes);
	char key[S3_KEY_MAX + 20];
	snprintf(key, sizeof key, "%s/%016llx", file->key, (unsigned long long)piece->start);
	struct error_info error;
	error_info_clear(&error);
	int rc = piece->size ? s3_get(file->directory->client, key, 0, 0, bytes, &error) : 0;
	if (rc == 0 && bytes->size != piece->size)
		rc = -EIO;
	if (rc < 0) {
		log_remote(&error);
		buf_free(bytes);
		free(bytes);
		return rc;
	}
	piece->bytes = bytes;
	return 0;
}

static int meta_get(struct io_remote_file *file, unsigned slot, uint8_t *out)
{
	char key[S3_KEY_MAX + 8];
	snprintf(key, sizeof key, "%s.meta/%u", file->key, slot);
	struct buf bytes;
	buf_init(&bytes);
	struct error_info error;
	error_info_clear(&error);
	int rc = s3_get(file->directory->client, key, 0, 0, &bytes, &error);
	memset(out, 0, 4096);
	if (rc == 0)
		memcpy(out, bytes.data, bytes.size < 4096 ? bytes.size : 4096);
	else if (rc == -ENOENT || rc == -ERANGE)
		rc = 0;   /* never written: zeros, as in a new local manifest */
	else
		log_remote(&error);
	buf_free(&bytes);
	return rc;
}

static ssize_t pieced_pread(struct io_remote_file *file, uint8_t *out, size_t size, uint64_t offset)
{
	size_t done = 0;
	int rc = 0;
	while (done < size) {
		uint64_t at = offset + done;
		size_t want = size - done;
		if (at >= META_START && at < BLOCKS_START) {
			uint8_t slot[4096];
			unsigned index = (unsigned)((at - META_START) / 4096);
			if ((rc = meta_get(file, index, slot)) < 0)
				break;
			size_t from = (size_t)((at - META_START) % 4096), take = 4096 - from;
			if (take > want)
				take = want;
			memcpy(out + done, slot + from, take);
			done += take;
			continue;
		}
		/* a read that began inside what is known ends at its end (a speculative read
		 * past the last block asks no LIST); one that began beyond it looks further */
		struct piece *piece = piece_at(file, at, done == 0, &rc);
		if (!piece)
			break;   /* the end (or an error) */
		if ((rc = piece_load(file, piece)) < 0)
			break;
		size_t from = (size_t)(at - piece->start), take = (size_t)(piece->size - from);
		if (take > want)
			take = want;
		memcpy(out + done, piece->bytes->data + from, take);
		done += take;
	}
	return done ? (ssize_t)done : rc;
}

static int pieced_pwrite(struct io_remote_file *file, const uint8_t *bytes, size_t size, uint64_t offset)
{
	struct error_info error;
	error_info_clear(&error);
	int rc = 0;
	while (size > 0 && rc == 0) {
		if (offset < HEADER_SIZE) {
			/* the file header: created once, by init */
			if (offset != 0 || size < HEADER_SIZE)
				return -EINVAL;
			char key[S3_KEY_MAX + 20];
			snprintf(key, sizeof key, "%s/%016llx", file->key, 0ull);
			rc = s3_put(file->directory->client, key, bytes, HEADER_SIZE, S3_IF_ABSENT, &error);
			if (rc == 0)
				rc = parse_piece(key, HEADER_SIZE, file);
			bytes += HEADER_SIZE, offset += HEADER_SIZE, size -= HEADER_SIZE;
		} else if (offset < BLOCKS_START) {
			/* a meta slot (invariant 2): stored whole, in place */
			unsigned slot = (unsigned)((offset - META_START) / 4096);
			size_t from = (size_t)((offset - META_START) % 4096), take = 4096 - from;
			if (take > size)
				take = size;
			uint8_t whole[4096];
			if (from != 0 || take != 4096) {
				if ((rc = meta_get(file, slot, whole)) < 0)
					return rc;
			}
			memcpy(whole + from, bytes, take);
			char key[S3_KEY_MAX + 8];
			snprintf(key, sizeof key, "%s.meta/%u", file->key, slot);
			rc = s3_put(file->directory->client, key, whole, sizeof whole, S3_ALWAYS, &error);
			bytes += take, offset += take, size -= take;
		} else {
			/* a publish's tail: one new piece at the end, created only if nobody did first */
			uint64_t end = pieced_end(file);
			if (offset != end && (rc = pieces_refresh(file)) == 0 && offset != (end = pieced_end(file)))
				return -ESTALE;
			if (rc < 0)
				break;
			char key[S3_KEY_MAX + 20];
			snprintf(key, sizeof key, "%s/%016llx", file->key, (unsigned long long)offset);
			rc = s3_put(file->directory->client, key, bytes, size, S3_IF_ABSENT, &error);
			if (rc == -EEXIST) {
				pieces_refresh(file);
				return -ESTALE;   /* another writer appended here first */
			}
			if (rc == 0) {
				rc = parse_piece(key, size, file);
				struct buf *cached = calloc(1, sizeof *cached);
				if (rc == 0 && cached && buf_append(cached, bytes, size) == 0 && file->piece_count &&
				    file->pieces[file->piece_count - 1].start == offset)
					file->pieces[file->piece_count - 1].bytes = cached, cached = NULL;
				if (cached) {
					buf_free(cached);
					free(cached);
				}
			}
			size = 0;
		}
	}
	if (rc < 0 && rc != -ESTALE)
		log_remote(&error);
	return rc;
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
		log_remote(&error);
		return rc;
	}
	file->loaded = true;
	return 0;
}

static ssize_t whole_pread(struct io_remote_file *file, uint8_t *out, size_t size, uint64_t offset)
{
	if (file->loaded) {
		if (offset >= file->content.size)
			return 0;
		size_t take = file->content.size - offset < size ? (size_t)(file->content.size - offset) : size;
		memcpy(out, file->content.data + offset, take);
		return (ssize_t)take;
	}
	size_t done = 0;
	while (done < size && offset + done < file->size) {
		uint64_t at = offset + done, start = at / CHUNK_SIZE * CHUNK_SIZE;
		struct chunk *chunk = NULL;
		for (int i = 0; i < CHUNKS; i++)
			if (file->chunks[i].start == start)
				chunk = &file->chunks[i];
		if (!chunk) {
			/* objects other than the manifest never change once stored: cache what is read */
			chunk = &file->chunks[file->next_chunk++ % CHUNKS];
			chunk->start = UINT64_MAX;
			buf_reset(&chunk->bytes);
			uint64_t length = file->size - start < CHUNK_SIZE ? file->size - start : CHUNK_SIZE;
			struct error_info error;
			error_info_clear(&error);
			int rc = s3_get(file->directory->client, file->key, start, length, &chunk->bytes, &error);
			if (rc < 0) {
				log_remote(&error);
				return done ? (ssize_t)done : rc;
			}
			chunk->start = start;
		}
		size_t from = (size_t)(at - chunk->start);
		if (from >= chunk->bytes.size)
			break;
		size_t take = chunk->bytes.size - from < size - done ? chunk->bytes.size - from : size - done;
		memcpy(out + done, chunk->bytes.data + from, take);
		done += take;
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

ssize_t io_remote_pread(struct io_file *file, void *out, size_t size, uint64_t offset)
{
	struct io_remote_file *remote = file->remote;
	pthread_mutex_lock(&remote->lock);
	ssize_t got = remote->kind == REMOTE_PIECED ? pieced_pread(remote, out, size, offset)
						    : whole_pread(remote, out, size, offset);
	pthread_mutex_unlock(&remote->lock);
	return got;
}

int io_remote_pwrite(struct io_file *file, const void *bytes, size_t size, uint64_t offset)
{
	struct io_remote_file *remote = file->remote;
	pthread_mutex_lock(&remote->lock);
	int rc = remote->kind == REMOTE_PIECED ? pieced_pwrite(remote, bytes, size, offset)
					       : whole_pwrite(remote, bytes, size, offset);
	pthread_mutex_unlock(&remote->lock);
	return rc;
}

int io_remote_sync(struct io_file *file)
{
	struct io_remote_file *remote = file->remote;
	/* a piece or meta slot is durable when its PUT returns */
	if (remote->kind == REMOTE_PIECED || !remote->writable)
		return 0;
	pthread_mutex_lock(&remote->lock);
	int rc = whole_store(remote);
	pthread_mutex_unlock(&remote->lock);
	return rc;
}

/* Deletes the pieces wholly inside [start, end) (never the header). Caller holds the lock. */
static int pieces_delete(struct io_remote_file *file, uint64_t start, uint64_t end)
{
	struct error_info error;
	error_info_clear(&error);
	size_t kept = 0;
	int rc = 0;
	for (size_t i = 0; i < file->piece_count; i++) {
		struct piece *piece = &file->pieces[i];
		if (rc == 0 && piece->start >= start && piece->start >= HEADER_SIZE && piece->start + piece->size <= end) {
			char key[S3_KEY_MAX + 20];
			snprintf(key, sizeof key, "%s/%016llx", file->key, (unsigned long long)piece->start);
			if ((rc = s3_delete(file->directory->client, key, &error)) == 0) {
				if (piece->bytes) {
					buf_free(piece->bytes);
					free(piece->bytes);
				}
				continue;
			}
			log_remote(&error);
		}
		file->pieces[kept++] = *piece;
	}
	file->piece_count = kept;
	return rc;
}

int io_remote_truncate(struct io_file *file, uint64_t size)
{
	struct io_remote_file *remote = file->remote;
	pthread_mutex_lock(&remote->lock);
	int rc = 0;
	if (remote->kind == REMOTE_PIECED) {
		/* pieces wholly beyond size go; one that straddles it cannot be cut */
		rc = pieces_refresh(remote);
		for (size_t i = 0; rc == 0 && i < remote->piece_count; i++)
			if (remote->pieces[i].start < size && remote->pieces[i].start + remote->pieces[i].size > size &&
			    size > BLOCKS_START)
				rc = -EINVAL;
		if (rc == 0)
			rc = pieces_delete(remote, size < BLOCKS_START ? BLOCKS_START : size, UINT64_MAX);
	} else if ((rc = whole_load(remote)) == 0) {
		if (size < remote->content.size)
			remote->content.size = (size_t)size;
		else
			rc = whole_pwrite(remote, (const uint8_t *)"", 0, size);
		remote->dirty = true;
	}
	pthread_mutex_unlock(&remote->lock);
	return rc;
}

int io_remote_size(struct io_file *file, uint64_t *size_out)
{
	struct io_remote_file *remote = file->remote;
	pthread_mutex_lock(&remote->lock);
	int rc = 0;
	if (remote->kind == REMOTE_PIECED) {
		/* what other writers appended since: one LIST after the last piece known */
		if ((rc = pieces_refresh(remote)) == 0)
			*size_out = pieced_end(remote);
	} else {
		*size_out = remote->loaded ? remote->content.size : remote->size;
	}
	pthread_mutex_unlock(&remote->lock);
	return rc;
}

int io_remote_size_known(struct io_file *file, uint64_t *size_out)
{
	struct io_remote_file *remote = file->remote;
	pthread_mutex_lock(&remote->lock);
	*size_out = remote->kind == REMOTE_PIECED ? pieced_end(remote)
						  : remote->loaded ? remote->content.size : remote->size;
	pthread_mutex_unlock(&remote->lock);
	return 0;
}

int io_remote_punch(struct io_file *file, uint64_t start, uint64_t end)
{
	struct io_remote_file *remote = file->remote;
	if (remote->kind != REMOTE_PIECED)
		return -EOPNOTSUPP;
	pthread_mutex_lock(&remote->lock);
	int rc = pieces_delete(remote, start, end);
	pthread_mutex_unlock(&remote->lock);
	return rc;
}

int io_remote_data_bytes(struct io_file *file, uint64_t start, uint64_t end, uint64_t *bytes_out)
{
	struct io_remote_file *remote = file->remote;
	pthread_mutex_lock(&remote->lock);
	uint64_t total = 0;
	if (remote->kind == REMOTE_PIECED) {
		for (size_t i = 0; i < remote->piece_count; i++) {
			uint64_t from = remote->pieces[i].start, to = from + remote->pieces[i].size;
			if (from < start)
				from = start;
			if (to > end)
				to = end;
			if (to > from)
				total += to - from;
		}
		if (start < BLOCKS_START && end > META_START)
			total += (end < BLOCKS_START ? end : BLOCKS_START) - (start > META_START ? start : META_START);
	} else {
		uint64_t size = remote->loaded ? remote->content.size : remote->size;
		total = end > size ? (size > start ? size - start : 0) : end - start;
	}
	pthread_mutex_unlock(&remote->lock);
	*bytes_out = total;
	return 0;
}

int io_remote_unlink(int directory, const char *name)
{
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
		log_remote(&error);
	return rc;
}

int io_remote_rename(int directory, const char *from, const char *to)
{
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
		log_remote(&error);
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

int io_remote_list(int directory, const char *subdirectory, int (*visit)(const char *name, void *context),
		   void *context)
{
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
		log_remote(&error);
	return rc < 0 ? rc : listing.stopped;
}
