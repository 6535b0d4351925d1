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
 *     the new end. Every tail after the first starts at a multiple of
 *     GRANULE (io_append_offset): the bytes between a piece's end and the
 *     next multiple read as zeros, and the piece holding an offset is found
 *     without a listing: it is the one named by the offset's granule
 *     (or, for a piece longer than GRANULE, one a bounded LIST finds);
 *   - every other file is WHOLE: one object, read with ranged GETs, written
 *     by buffering the writes and storing the whole object on fsync (or
 *     close).
 *
 * Invariants:
 *   1. A piece, once created, never changes: bytes read from one are cached
 *      (a bounded LRU of ranges) and never invalidated. The table of pieces
 *      known is sorted by start and complete from listed_from on (as of the
 *      last LIST); below it, it holds only pieces found by reads.
 *   2. The meta slot objects are the only objects written in place; they are
 *      never cached. Each carries, after its 4096 bytes, the start of the
 *      last piece its writer knew: where a cold open lists from.
 *   3. A WHOLE file written by this process is stored only by fsync or close,
 *      created with If-None-Match: * when it was opened with O_EXCL. What is
 *      written is kept in memory up to SPILL_BYTES, beyond that in an unnamed
 *      file of $TMPDIR (a large segment costs disk there, not memory).
 *   4. Locks are process-local no-ops: what serializes writers across
 *      processes and hosts is the conditional create of pieces.
 *   5. A piece is never deleted by a failed publish: its create either
 *      happened (it is a commit, as with a local fsync whose answer was
 *      lost) or did not.
 */
#include "io_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "buf.h"
#include "error_info.h"
#include "s3.h"

#define REMOTE_DIRECTORIES 64
#define HEADER_SIZE 4096u
#define META_START 4096u
#define BLOCKS_START 12288u
#define META_SLOT_SIZE 4096u
#define CHUNK_SIZE (1u << 20)
#define CHUNKS 4
#define GRANULE (64u << 10)           /* FORMAT.md §23: tails after the first start at its multiples */
#define WHOLE_MAX (256u << 10)        /* a piece up to this size is read whole */
#define READ_MIN 4096u                /* a read of a larger one asks for at least this much */
#define SPILL_BYTES (8u << 20)        /* a WHOLE file being written moves to a local file beyond this */
#define RANGES 64                     /* cached ranges of pieces (invariant 1) */
#define RANGE_BYTES_MAX (16u << 20)   /* ... and their bytes at most */
#define HINT_MAGIC 0x48534647u        /* "GFSH": the trailer of a meta slot object (invariant 2) */
#define HINT_SIZE 16u

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
};

struct range {
	uint64_t start;                /* UINT64_MAX: empty */
	uint64_t used;                 /* the tick of its last use */
	struct buf bytes;              /* [start, start + size) of one piece */
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
	struct buf content;            /* while writable: the whole object (up to SPILL_BYTES) */
	int spill;                     /* beyond that: an unnamed local file holding it, or -1 */
	uint64_t spill_size;
	struct chunk chunks[CHUNKS];
	unsigned next_chunk;
	/* PIECED (invariant 1) */
	struct piece *pieces;          /* known pieces, by start */
	size_t piece_count, piece_capacity;
	uint64_t listed_from;          /* every piece from here on is in pieces */
	struct range ranges[RANGES];
	uint64_t range_bytes, tick;
};

/* A failed request: the reason the error carries up (io_strerror), and a log line for a
 * daemon's log (informational: the caller's error says what failed). */
static void log_remote(const struct error_info *error)
{
	if (error->code) {
		io_failure_note(error->code, error->message);
		io_log(LOG_INFO, "%s", error->message);
	}
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
	io_failure_note(0, "");   /* io_strerror speaks of the last request only */
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

static uint64_t piece_key_start(const char *key, bool *is_piece)
{
	const char *name = strrchr(key, '/');
	name = name ? name + 1 : key;
	char *end;
	uint64_t start = strtoull(name, &end, 16);
	*is_piece = *end == 0 && strlen(name) == 16;
	return start;
}

static void piece_key(const struct io_remote_file *file, uint64_t start, char out[S3_KEY_MAX + 20])
{
	snprintf(out, S3_KEY_MAX + 20, "%s/%016llx", file->key, (unsigned long long)start);
}

/* The index of the last known piece starting at or before offset, or piece_count if none. */
static size_t piece_before(const struct io_remote_file *file, uint64_t offset)
{
	size_t low = 0, high = file->piece_count;
	while (low < high) {
		size_t middle = low + (high - low) / 2;
		if (file->pieces[middle].start <= offset)
			low = middle + 1;
		else
			high = middle;
	}
	return low ? low - 1 : file->piece_count;
}

/* Adds (or confirms) a piece to the sorted table. 0 or -ENOMEM. */
static int piece_insert(struct io_remote_file *file, uint64_t start, uint64_t size)
{
	size_t at = piece_before(file, start);
	if (at < file->piece_count && file->pieces[at].start == start) {
		file->pieces[at].size = size;
		return 0;
	}
	at = at < file->piece_count ? at + 1 : 0;
	if (file->piece_count == file->piece_capacity) {
		size_t capacity = file->piece_capacity ? file->piece_capacity * 2 : 64;
		struct piece *grown = realloc(file->pieces, capacity * sizeof *grown);
		if (!grown)
			return -ENOMEM;
		file->pieces = grown;
		file->piece_capacity = capacity;
	}
	memmove(&file->pieces[at + 1], &file->pieces[at], (file->piece_count - at) * sizeof *file->pieces);
	file->pieces[at] = (struct piece){ start, size };
	file->piece_count++;
	return 0;
}

struct piece_listing {
	struct io_remote_file *file;
	uint64_t stop;                 /* pieces starting after this end the listing */
	uint64_t first;                /* the first piece listed (UINT64_MAX: none) */
};

static int list_piece(const char *key, uint64_t size, void *context)
{
	struct piece_listing *listing = context;
	bool is_piece;
	uint64_t start = piece_key_start(key, &is_piece);
	if (!is_piece)
		return 0;
	if (start > listing->stop)
		return 1;   /* enough: stop the listing */
	if (listing->first == UINT64_MAX)
		listing->first = start;
	return piece_insert(listing->file, start, size);
}

/* Lists the pieces starting at from or later (up to stop). Caller holds file->lock. */
static int pieces_list(struct io_remote_file *file, uint64_t from, uint64_t stop, uint64_t *first_out)
{
	char prefix[S3_KEY_MAX + 2], after[S3_KEY_MAX + 20];
	snprintf(prefix, sizeof prefix, "%s/", file->key);
	if (from)
		piece_key(file, from - 1, after);   /* start-after is exclusive; the keys sort as numbers */
	struct piece_listing listing = { file, stop, UINT64_MAX };
	struct error_info error;
	error_info_clear(&error);
	int rc = s3_list(file->directory->client, prefix, from ? after : NULL, list_piece, &listing, &error);
	if (rc < 0 && rc != -ENOMEM)
		log_remote(&error);
	if (first_out)
		*first_out = listing.first;
	return rc;
}

/* Lists the pieces after the last one known: what other writers appended. Caller holds file->lock. */
static int pieces_refresh(struct io_remote_file *file)
{
	uint64_t from = file->piece_count ? file->pieces[file->piece_count - 1].start + 1 : 0;
	int rc = pieces_list(file, from, UINT64_MAX, NULL);
	if (rc == 0 && from < file->listed_from)
		file->listed_from = from;
	return rc;
}

/* Makes the table complete (data_bytes, truncate). Caller holds file->lock. */
static int pieces_list_all(struct io_remote_file *file)
{
	if (file->listed_from == 0)
		return 0;
	int rc = pieces_list(file, 0, UINT64_MAX, NULL);
	if (rc == 0)
		file->listed_from = 0;
	return rc;
}

/* Where the next tail goes after blocks ending at end (io_append_offset). */
static uint64_t append_offset(uint64_t end)
{
	return end <= BLOCKS_START ? end : (end + GRANULE - 1) & ~(uint64_t)(GRANULE - 1);
}

static uint64_t pieced_end(const struct io_remote_file *file)
{
	if (file->piece_count == 0)
		return 0;
	const struct piece *last = &file->pieces[file->piece_count - 1];
	uint64_t end = last->start + last->size;
	return end < BLOCKS_START ? BLOCKS_START : append_offset(end);
}

/* The piece start an offset's granule names (FORMAT.md §23). */
static uint64_t granule_of(uint64_t offset)
{
	return offset < HEADER_SIZE ? 0 : offset < GRANULE ? BLOCKS_START : offset & ~(uint64_t)(GRANULE - 1);
}

/*
 * GETs [offset, offset + length) of the meta slot object slot into bytes (left
 * empty for an object never written, or shorter than offset). 0 or -errno.
 */
static int meta_object_get(struct io_remote_file *file, unsigned slot, uint64_t offset, uint64_t length,
			   struct buf *bytes)
{
	char key[S3_KEY_MAX + 8];
	snprintf(key, sizeof key, "%s.meta/%u", file->key, slot);
	struct error_info error;
	error_info_clear(&error);
	int rc = s3_get(file->directory->client, key, offset, length, bytes, &error);
	if (rc == -ENOENT || rc == -ERANGE)
		rc = 0;
	else if (rc < 0)
		log_remote(&error);
	return rc;
}

/* Reads the hint of a meta slot object (invariant 2): the last piece its writer knew, if larger than *hint. */
static int meta_hint(struct io_remote_file *file, unsigned slot, uint64_t *hint)
{
	struct buf bytes;
	buf_init(&bytes);
	int rc = meta_object_get(file, slot, META_SLOT_SIZE, HINT_SIZE, &bytes);
	if (rc == 0 && bytes.size == HINT_SIZE && buf_load_u32(bytes.data) == HINT_MAGIC &&
	    buf_load_u64(bytes.data + 8) > *hint)
		*hint = buf_load_u64(bytes.data + 8);   /* none: every piece is listed */
	buf_free(&bytes);
	return rc;
}

/* Opens the pieced manifest: lists from the newest meta slot's hint (a bounded
 * LIST however long the history), or everything when there is none. */
static int pieced_open(struct io_remote_file *file, int flags)
{
	uint64_t hint = 0, first = UINT64_MAX;
	int rc = 0;
	file->listed_from = UINT64_MAX;
	if (!(flags & O_EXCL) && ((rc = meta_hint(file, 0, &hint)) < 0 || (rc = meta_hint(file, 1, &hint)) < 0))
		return rc;
	if (hint >= BLOCKS_START && (rc = pieces_list(file, hint, UINT64_MAX, &first)) < 0)
		return rc;
	if (first == hint && hint >= BLOCKS_START) {
		file->listed_from = hint;
		if ((rc = piece_insert(file, 0, HEADER_SIZE)) < 0)   /* there since init: a hint follows it */
			return rc;
	} else if ((rc = pieces_list_all(file)) < 0) {
		return rc;
	}
	if (flags & O_CREAT) {
		if ((flags & O_EXCL) && file->piece_count)
			return -EEXIST;
	} else if (file->piece_count == 0 || file->pieces[0].start != 0) {
		return -ENOENT;
	}
	return 0;
}

int io_remote_file_open(int directory, const char *name, int flags, enum io_class class, struct io_file *out)
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
		for (int i = 0; i < RANGES; i++)
			file->ranges[i].start = UINT64_MAX;
		rc = pieced_open(file, flags);
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
	enum s3_condition condition = file->exclusive && !file->exists ? S3_IF_ABSENT : S3_ALWAYS;
	int rc = file->spill >= 0
			 ? s3_put_descriptor(file->directory->client, file->key, file->spill, file->spill_size, condition,
					     &error)
			 : s3_put(file->directory->client, file->key, file->content.data, file->content.size, condition,
				  &error);
	if (rc < 0) {
		log_remote(&error);
		return rc;
	}
	file->exists = true;
	file->dirty = false;
	file->size = file->spill >= 0 ? file->spill_size : file->content.size;
	return 0;
}

void io_remote_file_close(struct io_file *file)
{
	struct io_remote_file *remote = file->remote;
	if (!remote)
		return;
	if (remote->kind == REMOTE_WHOLE && remote->writable)
		whole_store(remote);
	for (int i = 0; i < RANGES; i++)
		buf_free(&remote->ranges[i].bytes);
	free(remote->pieces);
	for (int i = 0; i < CHUNKS; i++)
		buf_free(&remote->chunks[i].bytes);
	buf_free(&remote->content);
	if (remote->spill >= 0)
		close(remote->spill);
	pthread_mutex_destroy(&remote->lock);
	free(remote);
	file->remote = NULL;
}

/* ---- the manifest's pieces ------------------------------------------------------------ */

/* The cached range holding offset (invariant 1), or NULL. */
static struct range *range_holding(struct io_remote_file *file, uint64_t offset)
{
	for (int i = 0; i < RANGES; i++) {
		struct range *range = &file->ranges[i];
		if (range->start != UINT64_MAX && offset >= range->start && offset - range->start < range->bytes.size) {
			range->used = ++file->tick;
			return range;
		}
	}
	return NULL;
}

static void range_drop(struct io_remote_file *file, struct range *range)
{
	file->range_bytes -= range->bytes.size;
	buf_free(&range->bytes);
	range->start = UINT64_MAX;
}

/* Caches bytes (taken over, left empty) as the range at start, dropping the least recently used. */
static void range_keep(struct io_remote_file *file, uint64_t start, struct buf *bytes)
{
	if (bytes->size == 0 || bytes->size > RANGE_BYTES_MAX) {
		buf_free(bytes);
		return;
	}
	for (;;) {
		struct range *free_slot = NULL, *oldest = NULL;
		for (int i = 0; i < RANGES; i++) {
			struct range *range = &file->ranges[i];
			if (range->start == UINT64_MAX)
				free_slot = free_slot ? free_slot : range;
			else if (!oldest || range->used < oldest->used)
				oldest = range;
		}
		if (free_slot && file->range_bytes + bytes->size <= RANGE_BYTES_MAX) {
			free_slot->start = start;
			free_slot->bytes = *bytes;
			free_slot->used = ++file->tick;
			file->range_bytes += bytes->size;
			buf_init(bytes);
			return;
		}
		range_drop(file, oldest);
	}
}

enum piece_lookup { PIECE_FOUND, PIECE_GAP, PIECE_BEYOND, PIECE_UNKNOWN };

/*
 * What the table says of offset, without a request: FOUND (*piece holds it),
 * GAP (no piece does: zeros up to *gap_end), BEYOND (at or past the end
 * known) or UNKNOWN (below listed_from, in a granule whose piece is not
 * known). definitive_from: pieces starting from there up to offset are all
 * known (a bounded listing just ran), else UINT64_MAX.
 */
static enum piece_lookup piece_lookup(const struct io_remote_file *file, uint64_t offset, uint64_t definitive_from,
				      const struct piece **piece, uint64_t *gap_end)
{
	uint64_t end = pieced_end(file);
	if (offset >= end)
		return PIECE_BEYOND;
	uint64_t granule = granule_of(offset);
	size_t at = piece_before(file, offset);
	const struct piece *known = at < file->piece_count ? &file->pieces[at] : NULL;
	if (known && offset - known->start < known->size) {
		*piece = known;
		return PIECE_FOUND;
	}
	bool listed = offset >= file->listed_from;
	bool granule_known = known && known->start >= granule;   /* pieces start only at granules */
	bool just_listed = definitive_from <= offset &&
			   (!known || known->start >= definitive_from || definitive_from <= BLOCKS_START);
	if (!listed && !granule_known && !just_listed)
		return PIECE_UNKNOWN;
	size_t next = known ? at + 1 : 0;
	uint64_t stop = listed ? end : granule == 0 ? HEADER_SIZE : granule < GRANULE ? GRANULE : granule + GRANULE;
	if (next < file->piece_count && file->pieces[next].start < stop)
		stop = file->pieces[next].start;
	*gap_end = stop < end ? stop : end;
	return PIECE_GAP;
}

/* GETs [from, from + length) of the piece at start into a new cached range (or
 * asks for the granule's piece when size is unknown: *object_size). */
static int piece_fetch(struct io_remote_file *file, uint64_t start, uint64_t from, uint64_t length,
		       uint64_t *object_size)
{
	char key[S3_KEY_MAX + 20];
	piece_key(file, start, key);
	struct buf bytes;
	buf_init(&bytes);
	struct error_info error;
	error_info_clear(&error);
	int rc = s3_get_sized(file->directory->client, key, from - start, length, &bytes, object_size, &error);
	if (rc == 0)
		range_keep(file, from, &bytes);
	else if (rc != -ENOENT && rc != -ERANGE)
		log_remote(&error);
	buf_free(&bytes);
	return rc;
}

/*
 * Finds the piece holding offset when the table does not know it: the
 * granule's piece (read at once: that GET is the data read), else a listing
 * of the pieces before it, widened until one starts at or before offset.
 * Leaves the table answering FOUND or GAP for offset. Caller holds the lock.
 */
static int piece_discover(struct io_remote_file *file, uint64_t offset, uint64_t want, uint64_t *definitive_from)
{
	uint64_t granule = granule_of(offset), size = 0;
	/* from the granule's start: a piece no longer than GRANULE comes whole (later reads
	 * of its other blocks cost no request) */
	uint64_t length = offset - granule + want > GRANULE ? offset - granule + want : GRANULE;
	int rc = piece_fetch(file, granule, granule, length, &size);
	if (rc == 0 || rc == -ERANGE) {
		struct error_info error;
		error_info_clear(&error);
		char key[S3_KEY_MAX + 20];
		piece_key(file, granule, key);
		/* a part answered names the size; a piece ending before offset needs a HEAD */
		if (rc == -ERANGE && (rc = s3_head(file->directory->client, key, &size, &error)) < 0) {
			log_remote(&error);
			return rc;
		}
		return piece_insert(file, granule, size);
	}
	if (rc != -ENOENT)
		return rc;
	/* a piece longer than a granule began before it: list back from there */
	for (uint64_t window = 4u << 20;; window *= 16) {
		uint64_t from = granule > BLOCKS_START + window ? granule - window : BLOCKS_START, first;
		if ((rc = pieces_list(file, from, offset, &first)) < 0)
			return rc;
		size_t at = piece_before(file, offset);
		if (from == BLOCKS_START || (at < file->piece_count && file->pieces[at].start >= from)) {
			*definitive_from = from;
			return 0;
		}
	}
}

/* Copies what a known piece holds at offset into out (fetching it if not cached). Bytes copied or -errno. */
static ssize_t piece_copy(struct io_remote_file *file, const struct piece *piece, uint8_t *out, size_t want,
			  uint64_t offset)
{
	struct range *range = range_holding(file, offset);
	if (!range) {
		/* a piece up to WHOLE_MAX whole (one request for all the blocks read from it); of
		 * a larger one what is asked, a page at least */
		uint64_t from = piece->start, length = piece->size;
		if (piece->size > WHOLE_MAX) {
			from = offset;
			length = want > READ_MIN ? want : READ_MIN;
			if (length > piece->start + piece->size - from)
				length = piece->start + piece->size - from;
		}
		uint64_t size;
		int rc = piece_fetch(file, piece->start, from, length, &size);
		if (rc < 0)
			return rc == -ERANGE || rc == -ENOENT ? -EIO : rc;   /* listed, so it must be there */
		if (!(range = range_holding(file, offset)))
			return -EIO;
	}
	size_t from = (size_t)(offset - range->start), take = range->bytes.size - from;
	if (take > want)
		take = want;
	memcpy(out, range->bytes.data + from, take);
	return (ssize_t)take;
}

/* A meta slot's 4096 bytes (zeros if never written, as in a new local manifest). 0 or -errno. */
static int meta_get(struct io_remote_file *file, unsigned slot, uint8_t *out)
{
	struct buf bytes;
	buf_init(&bytes);
	int rc = meta_object_get(file, slot, 0, META_SLOT_SIZE, &bytes);
	memset(out, 0, META_SLOT_SIZE);
	if (rc == 0)
		memcpy(out, bytes.data, bytes.size < META_SLOT_SIZE ? bytes.size : META_SLOT_SIZE);
	buf_free(&bytes);
	return rc;
}

static ssize_t pieced_pread(struct io_remote_file *file, uint8_t *out, size_t size, uint64_t offset)
{
	size_t done = 0;
	int rc = 0;
	bool refreshed = false;
	uint64_t definitive_from = UINT64_MAX;
	while (done < size) {
		uint64_t at = offset + done;
		size_t want = size - done;
		if (at >= META_START && at < BLOCKS_START) {
			uint8_t slot[META_SLOT_SIZE];
			unsigned index = (unsigned)((at - META_START) / META_SLOT_SIZE);
			if ((rc = meta_get(file, index, slot)) < 0)
				break;
			size_t from = (size_t)((at - META_START) % META_SLOT_SIZE), take = META_SLOT_SIZE - from;
			if (take > want)
				take = want;
			memcpy(out + done, slot + from, take);
			done += take;
			continue;
		}
		const struct piece *piece = NULL;
		uint64_t gap_end = 0;
		enum piece_lookup found = piece_lookup(file, at, definitive_from, &piece, &gap_end);
		if (found == PIECE_BEYOND) {
			/* a read that began inside what is known ends at its end (a speculative read
			 * past the last block asks no LIST); one that began beyond it looks further */
			if (done > 0 || refreshed)
				break;
			refreshed = true;
			if ((rc = pieces_refresh(file)) < 0)
				break;
			continue;
		}
		if (found == PIECE_UNKNOWN) {
			if ((rc = piece_discover(file, at, want, &definitive_from)) < 0)
				break;
			continue;
		}
		definitive_from = UINT64_MAX;
		if (found == PIECE_GAP) {
			/* between a piece's end and the next granule (or a removed piece): zeros */
			size_t take = gap_end - at < want ? (size_t)(gap_end - at) : want;
			memset(out + done, 0, take);
			done += take;
			continue;
		}
		ssize_t got = piece_copy(file, piece, out + done, want, at);
		if (got < 0) {
			rc = (int)got;
			break;
		}
		done += (size_t)got;
	}
	return done ? (ssize_t)done : rc;
}

/* Stores a meta slot object: the slot's bytes, then the hint (invariant 2). */
static int meta_put(struct io_remote_file *file, unsigned slot, const uint8_t *bytes, struct error_info *error)
{
	uint8_t whole[META_SLOT_SIZE + HINT_SIZE];
	memcpy(whole, bytes, META_SLOT_SIZE);
	memset(whole + META_SLOT_SIZE, 0, HINT_SIZE);
	buf_store_u32(whole + META_SLOT_SIZE, HINT_MAGIC);
	buf_store_u64(whole + META_SLOT_SIZE + 8, file->piece_count ? file->pieces[file->piece_count - 1].start : 0);
	char key[S3_KEY_MAX + 8];
	snprintf(key, sizeof key, "%s.meta/%u", file->key, slot);
	return s3_put(file->directory->client, key, whole, sizeof whole, S3_ALWAYS, error);
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
			piece_key(file, 0, key);
			rc = s3_put(file->directory->client, key, bytes, HEADER_SIZE, S3_IF_ABSENT, &error);
			if (rc == 0)
				rc = piece_insert(file, 0, HEADER_SIZE);
			bytes += HEADER_SIZE, offset += HEADER_SIZE, size -= HEADER_SIZE;
		} else if (offset < BLOCKS_START) {
			/* a meta slot (invariant 2): stored whole, in place */
			unsigned slot = (unsigned)((offset - META_START) / META_SLOT_SIZE);
			size_t from = (size_t)((offset - META_START) % META_SLOT_SIZE), take = META_SLOT_SIZE - from;
			if (take > size)
				take = size;
			uint8_t whole[META_SLOT_SIZE];
			if (from != 0 || take != META_SLOT_SIZE) {
				if ((rc = meta_get(file, slot, whole)) < 0)
					return rc;
			}
			memcpy(whole + from, bytes, take);
			rc = meta_put(file, slot, whole, &error);
			bytes += take, offset += take, size -= take;
		} else {
			/* a publish's tail: one new piece at the end, created only if nobody did first */
			uint64_t end = pieced_end(file);
			if (offset != end && (rc = pieces_refresh(file)) == 0 && offset != (end = pieced_end(file)))
				return -ESTALE;
			if (rc < 0)
				break;
			char key[S3_KEY_MAX + 20];
			piece_key(file, offset, key);
			rc = s3_put(file->directory->client, key, bytes, size, S3_IF_ABSENT, &error);
			if (rc == -EEXIST) {
				pieces_refresh(file);
				return -ESTALE;   /* another writer appended here first */
			}
			if (rc == 0 && (rc = piece_insert(file, offset, size)) == 0) {
				/* this process reads its own tail back (the next publish builds on it) */
				struct buf cached;
				buf_init(&cached);
				if (buf_append(&cached, bytes, size) == 0)
					range_keep(file, offset, &cached);
				buf_free(&cached);
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

ssize_t io_remote_pread(struct io_file *file, void *out, size_t size, uint64_t offset)
{
	io_failure_note(0, "");   /* io_strerror speaks of the last request only */
	struct io_remote_file *remote = file->remote;
	pthread_mutex_lock(&remote->lock);
	ssize_t got = remote->kind == REMOTE_PIECED ? pieced_pread(remote, out, size, offset)
						    : whole_pread(remote, out, size, offset);
	pthread_mutex_unlock(&remote->lock);
	return got;
}

int io_remote_pwrite(struct io_file *file, const void *bytes, size_t size, uint64_t offset)
{
	io_failure_note(0, "");   /* io_strerror speaks of the last request only */
	struct io_remote_file *remote = file->remote;
	pthread_mutex_lock(&remote->lock);
	int rc = remote->kind == REMOTE_PIECED ? pieced_pwrite(remote, bytes, size, offset)
					       : whole_pwrite(remote, bytes, size, offset);
	pthread_mutex_unlock(&remote->lock);
	return rc;
}

int io_remote_sync(struct io_file *file)
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
			piece_key(file, piece->start, key);
			if ((rc = s3_delete(file->directory->client, key, &error)) == 0) {
				for (int r = 0; r < RANGES; r++)
					if (file->ranges[r].start != UINT64_MAX && file->ranges[r].start >= piece->start &&
					    file->ranges[r].start < piece->start + piece->size)
						range_drop(file, &file->ranges[r]);
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
	io_failure_note(0, "");   /* io_strerror speaks of the last request only */
	struct io_remote_file *remote = file->remote;
	pthread_mutex_lock(&remote->lock);
	int rc = 0;
	if (remote->kind == REMOTE_PIECED) {
		/* pieces wholly beyond size go; one that straddles it cannot be cut */
		rc = pieces_list_all(remote);
		if (rc == 0)
			rc = pieces_refresh(remote);
		for (size_t i = 0; rc == 0 && i < remote->piece_count; i++)
			if (remote->pieces[i].start < size && remote->pieces[i].start + remote->pieces[i].size > size &&
			    size > BLOCKS_START)
				rc = -EINVAL;
		if (rc == 0)
			rc = pieces_delete(remote, size < BLOCKS_START ? BLOCKS_START : size, UINT64_MAX);
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

int io_remote_size(struct io_file *file, uint64_t *size_out)
{
	io_failure_note(0, "");   /* io_strerror speaks of the last request only */
	struct io_remote_file *remote = file->remote;
	pthread_mutex_lock(&remote->lock);
	int rc = 0;
	if (remote->kind == REMOTE_PIECED) {
		/* what other writers appended since: one LIST after the last piece known */
		if ((rc = pieces_refresh(remote)) == 0)
			*size_out = pieced_end(remote);
	} else {
		*size_out = whole_length(remote);
	}
	pthread_mutex_unlock(&remote->lock);
	return rc;
}

int io_remote_size_known(struct io_file *file, uint64_t *size_out)
{
	struct io_remote_file *remote = file->remote;
	pthread_mutex_lock(&remote->lock);
	*size_out = remote->kind == REMOTE_PIECED ? pieced_end(remote) : whole_length(remote);
	pthread_mutex_unlock(&remote->lock);
	return 0;
}

uint64_t io_remote_last_append_start(struct io_file *file)
{
	struct io_remote_file *remote = file->remote;
	if (remote->kind != REMOTE_PIECED)
		return 0;
	pthread_mutex_lock(&remote->lock);
	uint64_t start = remote->piece_count ? remote->pieces[remote->piece_count - 1].start : 0;
	pthread_mutex_unlock(&remote->lock);
	return start;
}

uint64_t io_remote_append_offset(const struct io_file *file, uint64_t end)
{
	return file->remote->kind == REMOTE_PIECED ? append_offset(end) : end;
}

int io_remote_punch(struct io_file *file, uint64_t start, uint64_t end)
{
	struct io_remote_file *remote = file->remote;
	if (remote->kind != REMOTE_PIECED)
		return -EOPNOTSUPP;
	pthread_mutex_lock(&remote->lock);
	int rc = pieces_list_all(remote);
	if (rc == 0)
		rc = pieces_delete(remote, start, end);
	pthread_mutex_unlock(&remote->lock);
	return rc;
}

int io_remote_data_bytes(struct io_file *file, uint64_t start, uint64_t end, uint64_t *bytes_out)
{
	struct io_remote_file *remote = file->remote;
	pthread_mutex_lock(&remote->lock);
	uint64_t total = 0;
	int rc = 0;
	if (remote->kind == REMOTE_PIECED && (rc = pieces_list_all(remote)) < 0) {
		pthread_mutex_unlock(&remote->lock);
		return rc;
	}
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
		uint64_t size = whole_length(remote);
		total = end > size ? (size > start ? size - start : 0) : end - start;
	}
	pthread_mutex_unlock(&remote->lock);
	*bytes_out = total;
	return 0;
}

int io_remote_unlink(int directory, const char *name)
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
		log_remote(&error);
	return rc;
}

int io_remote_rename(int directory, const char *from, const char *to)
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
		log_remote(&error);
	return rc < 0 ? rc : listing.stopped;
}
