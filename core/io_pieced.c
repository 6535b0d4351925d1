/*
 * io_pieced — the manifest of a store in an object store (layer: io): a file
 * made of immutable pieces. Its bytes [0, 4096) are the object
 * manifest/0000000000000000, the two meta slots (4096 and 8192) the objects
 * manifest.meta/0 and manifest.meta/1, and every write at the end of the
 * blocks (a publish's tail) becomes one new object manifest/<offset as 16 hex
 * digits> created with If-None-Match: * — the commit point: of two writers
 * appending at the same offset exactly one succeeds, the other gets -ESTALE
 * and builds on the new end. Every tail after the first starts at a multiple
 * of GRANULE (io_append_offset): the bytes between a piece's end and the next
 * multiple read as zeros, and the piece holding an offset is found without a
 * listing: it is the one named by the offset's granule (or, for a piece
 * longer than GRANULE, one a bounded LIST finds). docs/FORMAT.md §23.
 *
 * Invariants:
 *   1. A piece, once created, never changes: bytes read from one are cached
 *      (a bounded LRU of ranges) and never invalidated. The table of pieces
 *      known is sorted by start and complete from listed_from on (as of the
 *      last LIST); below it, it holds only pieces found by reads.
 *   2. The meta slot objects are the only objects written in place; they are
 *      never cached. Each carries, after its 4096 bytes, the start of the
 *      last piece its writer knew: where a cold open lists from.
 *   3. A piece is never deleted by a failed publish: its create either
 *      happened (it is a commit, as with a local fsync whose answer was
 *      lost) or did not.
 *   4. A piece's start is never reused within a store (pieces are created
 *      only at the end, and nothing below an end is written again), so a
 *      whole piece read once is kept in the host's disk cache under the
 *      store's id, location and its start (io_cache.c) and read from there by every
 *      later process: a piece found there needs no request. So is each
 *      part of a piece a read fetched (invariant 5: from an offset to the
 *      piece's end, or from its start up to an offset), under the piece's
 *      start and the part's.
 *   5. A read fetches only what it may need of a piece up to WHOLE_MAX:
 *      from the offset read to the piece's end, and below that, when asked,
 *      the rest at once. A tail puts its history blocks (commit record,
 *      version index path) before its state part (heads, names, branches,
 *      root: docs/FORMAT.md §18), and each meta slot object names where the
 *      last piece's state part begins, so a cold read of the newest state
 *      fetches that part alone: the same bytes however long the history. The
 *      hint only moves where a fetch starts; what is read is always the
 *      piece's own bytes, checked by the reader.
 *   6. Prefetch: a reader that knows which blocks it reads next (a table's
 *      fragments) asks for them at once; what is neither cached nor in the
 *      host cache is planned as the GETs a read would make (invariant 5, and
 *      piece_discover's for a granule whose piece is not known), which
 *      io_remote.c runs in parallel without the lock, and the answers are
 *      kept as a read's would be. A failed GET keeps nothing: the read asks
 *      again and hears why. A cold read of N pieces so costs about N / width
 *      round trips instead of N.
 *   7. A writer whose conditional create found the offset taken learns the
 *      winner's piece with one GET of it from its start (its size comes with
 *      the answer, its bytes are what the retry reads), not with a listing:
 *      a lost race costs the failed PUT and that GET.
 *   8. A piece this process creates goes whole into the host cache too (as
 *      does the one it finds when its create loses a race: invariant 7), so
 *      the host's other writers learn the new end from there, without a
 *      request: the next piece starts where the last known one's granule
 *      ends (io_pieced_end), and a whole piece found there in the cache
 *      (kept by store id and location: io_cache.c) exists
 *      (io_pieced_catch_up, before every look at the end known and every
 *      create). With the host lock (io_remote.c invariant 4) the writers of
 *      one host so never race each other on the object store, and lose to
 *      another host's once per piece at most.
 *   9. Catching up is flat in what was missed: a refresh lists after the
 *      last piece known, and when that takes more than one listing page (a
 *      host that missed more commits than a page holds), it reads the last
 *      piece a meta slot names and lists from there, leaving the pieces
 *      between to be found by their granules when read (as a cold open
 *      does): a page, a GET and a short LIST, however many were missed.
 *
 * Every function here is called with file->lock held (io_remote.c takes it).
 */
#include "io_diag.h"
#include "io_remote_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEADER_SIZE 4096u
#define META_START 4096u
#define BLOCKS_START 12288u
#define META_SLOT_SIZE 4096u
#define GRANULE (64u << 10)           /* FORMAT.md §23: tails after the first start at its multiples */
#define WHOLE_MAX (256u << 10)        /* a piece up to this size is read in at most two parts (invariant 5) */
#define READ_MIN 4096u                /* a read of a larger one asks for at least this much */
#define RANGES IO_REMOTE_RANGES       /* cached ranges of pieces (invariant 1) */
#define RANGE_BYTES_MAX (16u << 20)   /* ... and their bytes at most */
#define HINT_MAGIC 0x48534647u        /* "GFSH": the trailer of a meta slot object (invariant 2) */
#define HINT_SIZE 16u

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
	uint64_t keys, keys_max;       /* keys seen; at keys_max (0: none) the listing stops */
};

static int list_piece(const char *key, uint64_t size, void *context)
{
	struct piece_listing *listing = context;
	bool is_piece;
	uint64_t start = piece_key_start(key, &is_piece);
	if (is_piece && start > listing->stop)
		return 1;   /* enough: stop the listing */
	if (is_piece && listing->first == UINT64_MAX)
		listing->first = start;
	int rc = is_piece ? piece_insert(listing->file, start, size) : 0;
	if (rc == 0 && listing->keys_max && ++listing->keys >= listing->keys_max)
		return 1;   /* a page seen whole: the caller decides how to go on */
	return rc;
}

/* Lists the pieces starting at from or later (up to stop), at most keys_max keys (0: all) into
 * listing. Caller holds file->lock. */
static int pieces_list_into(struct io_remote_file *file, uint64_t from, uint64_t stop, uint64_t keys_max,
			    struct piece_listing *listing)
{
	char prefix[S3_KEY_MAX + 2], after[S3_KEY_MAX + 20];
	snprintf(prefix, sizeof prefix, "%s/", file->key);
	if (from)
		piece_key(file, from - 1, after);   /* start-after is exclusive; the keys sort as numbers */
	*listing = (struct piece_listing){ file, stop, UINT64_MAX, 0, keys_max };
	struct error_info error;
	error_info_clear(&error);
	int rc = s3_list(file->directory->client, prefix, from ? after : NULL, list_piece, listing, &error);
	if (rc < 0 && rc != -ENOMEM)
		io_log_failure(&error);
	return rc;
}

/* Lists the pieces starting at from or later (up to stop). Caller holds file->lock. */
static int pieces_list(struct io_remote_file *file, uint64_t from, uint64_t stop, uint64_t *first_out)
{
	struct piece_listing listing;
	int rc = pieces_list_into(file, from, stop, 0, &listing);
	if (first_out)
		*first_out = listing.first;
	return rc;
}

static int meta_hint(struct io_remote_file *file, unsigned slot, uint64_t *hint);

/*
 * Lists the pieces after the last one known: what other writers appended. A
 * host that missed more than a listing page of pieces (invariant 9) takes the
 * first page, then the last piece a meta slot names, and lists from there.
 * Caller holds file->lock.
 */
static int pieces_refresh(struct io_remote_file *file)
{
	uint64_t from = file->piece_count ? file->pieces[file->piece_count - 1].start + 1 : 0;
	struct piece_listing listing;
	int rc = pieces_list_into(file, from, UINT64_MAX, s3_list_page_keys(file->directory->client), &listing);
	if (rc < 0)
		return rc;
	if (listing.keys < listing.keys_max) {
		if (from < file->listed_from)
			file->listed_from = from;
		return 0;   /* the whole listing: every piece from `from` on is known */
	}
	/* a page and more behind: list from the last piece a meta slot names (either slot's
	 * writer knew a piece at most one commit older than the other's), or on from the page */
	uint64_t known = io_pieced_last_start(file), hint = known;
	if ((rc = meta_hint(file, 0, &hint)) < 0)
		return rc;
	if (hint > known) {
		if ((rc = pieces_list(file, hint, UINT64_MAX, NULL)) == 0)
			file->listed_from = hint;   /* complete from there on; below, granules are found by reads */
		return rc;
	}
	if ((rc = pieces_list(file, known + 1, UINT64_MAX, NULL)) == 0 && from < file->listed_from)
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

uint64_t io_pieced_append_offset(uint64_t end)
{
	return end <= BLOCKS_START ? end : (end + GRANULE - 1) & ~(uint64_t)(GRANULE - 1);
}

uint64_t io_pieced_end(const struct io_remote_file *file)
{
	if (file->piece_count == 0)
		return 0;
	const struct piece *last = &file->pieces[file->piece_count - 1];
	uint64_t end = last->start + last->size;
	return end < BLOCKS_START ? BLOCKS_START : io_pieced_append_offset(end);
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
		io_log_failure(&error);
	return rc;
}

/* Reads the hint of a meta slot object (invariant 2): the last piece its writer knew, if
 * larger than *hint, and where that piece's state part begins (invariant 5). */
static int meta_hint(struct io_remote_file *file, unsigned slot, uint64_t *hint)
{
	struct buf bytes;
	buf_init(&bytes);
	int rc = meta_object_get(file, slot, META_SLOT_SIZE, HINT_SIZE, &bytes);
	if (rc == 0 && bytes.size == HINT_SIZE && buf_load_u32(bytes.data) == HINT_MAGIC &&
	    buf_load_u64(bytes.data + 8) > *hint) {
		*hint = buf_load_u64(bytes.data + 8);   /* none: every piece is listed */
		uint32_t distance = buf_load_u32(bytes.data + 4);
		file->hinted_piece = *hint;
		file->hinted_state_start = distance ? *hint + distance : 0;
	}
	buf_free(&bytes);
	return rc;
}

/* Opens the pieced manifest: lists from the newest meta slot's hint (a bounded
 * LIST however long the history), or everything when there is none. */
int io_pieced_open(struct io_remote_file *file, int flags)
{
	for (int i = 0; i < RANGES; i++)
		file->ranges[i].start = UINT64_MAX;
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

/* ---- reading ------------------------------------------------------------------------ */

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
	uint64_t end = io_pieced_end(file);
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

/* The name under which the host cache keeps part of the piece at start: the bytes from an
 * offset to the piece's end (whole pieces are kept under their start alone). */
static void part_name(uint64_t start, char out[32])
{
	snprintf(out, 32, "piece-%016llx", (unsigned long long)start);
}

/* Keeps what a GET of [from, …) of the piece at start (whole_size bytes long) answered:
 * in the host cache where invariants 4 and 5 allow, and as a cached range (bytes taken over). */
static void piece_keep(struct io_remote_file *file, uint64_t start, uint64_t from, struct buf *bytes,
		       uint64_t whole_size)
{
	if (start == 0 && from == 0 && !file->cache && bytes->size >= 32) {
		/* the header names the store (FORMAT.md §2) */
		file->cache = io_cache_open(bytes->data + 16, file->directory->root->location);
		file->store_id_note(file->directory, bytes->data + 16);   /* for its segments' chunks */
	}
	if (start >= BLOCKS_START && from == start && bytes->size == whole_size) {
		io_cache_put(file->cache, NULL, start, bytes->data, bytes->size);   /* a whole piece (invariant 4) */
	} else if (start >= BLOCKS_START && whole_size <= WHOLE_MAX &&
		   (from == start || from - start + bytes->size == whole_size)) {
		char name[32];   /* the piece from there to its end, or up to there (invariants 4 and 5) */
		part_name(start, name);
		io_cache_put(file->cache, name, from, bytes->data, bytes->size);
	}
	range_keep(file, from, bytes);
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
	uint64_t whole_size = 0;
	int rc = s3_get_sized(file->directory->client, key, from - start, length, &bytes, &whole_size, &error);
	if (object_size)
		*object_size = whole_size;
	if (rc == 0)
		piece_keep(file, start, from, &bytes, whole_size);
	else if (rc != -ENOENT && rc != -ERANGE)
		io_log_failure(&error);
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
	struct buf cached;
	buf_init(&cached);
	if (io_cache_get(file->cache, NULL, granule, &cached) == 0) {
		/* a piece this host read before (invariant 4): known, and no request */
		size = cached.size;
		range_keep(file, granule, &cached);
		return piece_insert(file, granule, size);
	}
	char name[32];
	part_name(granule, name);
	if (offset > granule && io_cache_get(file->cache, name, offset, &cached) == 0) {
		/* the piece at the granule from offset to its end, read so before (invariant 5) */
		size = offset - granule + cached.size;
		range_keep(file, offset, &cached);
		return piece_insert(file, granule, size);
	}
	buf_free(&cached);
	/* from offset to the end of the granule: a piece no longer than GRANULE comes from
	 * there to its end (invariant 5); the answer names its size */
	uint64_t until = granule + (offset - granule + want > GRANULE ? offset - granule + want : GRANULE);
	int rc = piece_fetch(file, granule, offset, until - offset, &size);
	if (rc == 0 || rc == -ERANGE) {
		struct error_info error;
		error_info_clear(&error);
		char key[S3_KEY_MAX + 20];
		piece_key(file, granule, key);
		/* a part answered names the size; a piece ending before offset needs a HEAD */
		if (rc == -ERANGE && (rc = s3_head(file->directory->client, key, &size, &error)) < 0) {
			io_log_failure(&error);
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

/*
 * What of a piece up to WHOLE_MAX a read at offset (not cached) fetches
 * (invariant 5): [*from, *until). Nothing of the piece cached above offset:
 * from offset (or from the state part's start the meta slot named for the
 * newest piece, when that is below it) to the piece's end. Otherwise the part
 * between the cached parts below and above offset, so that a walk down one
 * tail (root first) costs two requests at most.
 */
static void piece_part(struct io_remote_file *file, const struct piece *piece, uint64_t offset, uint64_t *from,
		       uint64_t *until)
{
	uint64_t end = piece->start + piece->size, below = piece->start, above = end;
	for (int i = 0; i < RANGES; i++) {
		const struct range *range = &file->ranges[i];
		uint64_t range_end = range->start + range->bytes.size;
		if (range->start == UINT64_MAX || range->start >= end || range_end <= piece->start)
			continue;
		if (range_end <= offset && range_end > below)
			below = range_end;
		if (range->start > offset && range->start < above)
			above = range->start;
	}
	*until = above;
	*from = offset;
	if (above < end)
		*from = below;   /* (a part that starts after the piece's start and ends before its end is
				    never kept in the host cache: see piece_fetch) */
	else if (piece->start == file->hinted_piece && file->hinted_state_start >= below &&
		 file->hinted_state_start <= offset)
		*from = file->hinted_state_start;
}

/* The piece in the host cache, whole or (invariant 5) the part [from, until) of it, into
 * the cached ranges: true if found. */
static bool piece_from_host_cache(struct io_remote_file *file, const struct piece *piece, uint64_t from,
				  uint64_t until)
{
	struct buf cached;
	buf_init(&cached);
	bool found = false;
	if (io_cache_get(file->cache, NULL, piece->start, &cached) == 0 && cached.size == piece->size) {
		range_keep(file, piece->start, &cached);   /* invariant 4 */
		found = true;
	}
	char name[32];
	part_name(piece->start, name);
	buf_reset(&cached);
	if (!found && io_cache_get(file->cache, name, from, &cached) == 0 && cached.size == until - from) {
		range_keep(file, from, &cached);
		found = true;
	}
	buf_free(&cached);
	return found;
}

/* Copies what a known piece holds at offset into out (fetching it if not cached). Bytes copied or -errno. */
static ssize_t piece_copy(struct io_remote_file *file, const struct piece *piece, uint8_t *out, size_t want,
			  uint64_t offset)
{
	struct range *range = range_holding(file, offset);
	if (!range) {
		/* of a piece up to WHOLE_MAX the part piece_part names (from this host's cache if
		 * there); of a larger one what is asked, a page at least */
		uint64_t from, until;
		if (piece->size > WHOLE_MAX) {
			from = offset;
			until = from + (want > READ_MIN ? want : READ_MIN);
			if (until > piece->start + piece->size)
				until = piece->start + piece->size;
		} else {
			piece_part(file, piece, offset, &from, &until);
		}
		uint64_t size;
		int rc = 0;
		if (piece->start < BLOCKS_START || piece->size > WHOLE_MAX || !piece_from_host_cache(file, piece, from, until))
			rc = piece_fetch(file, piece->start, from, until - from, &size);
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

/* ---- prefetching (invariant 6) -------------------------------------------------------- */

/* What the host cache holds of the granule's piece from offset on, into the cached ranges and
 * the table of pieces (as piece_discover's first look): true if found. */
static bool granule_from_host_cache(struct io_remote_file *file, uint64_t granule, uint64_t offset)
{
	struct buf cached;
	buf_init(&cached);
	if (io_cache_get(file->cache, NULL, granule, &cached) == 0) {
		uint64_t size = cached.size;
		range_keep(file, granule, &cached);
		return piece_insert(file, granule, size) == 0;
	}
	char name[32];
	part_name(granule, name);
	if (offset > granule && io_cache_get(file->cache, name, offset, &cached) == 0) {
		uint64_t size = offset - granule + cached.size;
		range_keep(file, offset, &cached);
		return piece_insert(file, granule, size) == 0;
	}
	buf_free(&cached);
	return false;
}

static bool prefetch_planned(const struct io_prefetch_get *gets, size_t count, uint64_t start)
{
	for (size_t i = 0; i < count; i++)
		if (gets[i].start == start)
			return true;
	return false;
}

size_t io_pieced_prefetch_plan(struct io_remote_file *file, const uint64_t *offsets, size_t count,
			       struct io_prefetch_get *gets, size_t capacity)
{
	size_t planned = 0;
	for (size_t i = 0; i < count && planned < capacity; i++) {
		uint64_t offset = offsets[i];
		if (offset < BLOCKS_START || range_holding(file, offset))
			continue;
		const struct piece *piece = NULL;
		uint64_t gap_end = 0, from, until;
		switch (piece_lookup(file, offset, UINT64_MAX, &piece, &gap_end)) {
		case PIECE_FOUND:
			if (piece->size > WHOLE_MAX || prefetch_planned(gets, planned, piece->start))
				continue;   /* a large piece is read as needed, a page at a time */
			piece_part(file, piece, offset, &from, &until);
			if (piece_from_host_cache(file, piece, from, until))
				continue;
			gets[planned++] = (struct io_prefetch_get){ .start = piece->start, .from = from,
								    .length = until - from };
			break;
		case PIECE_UNKNOWN: {
			uint64_t granule = granule_of(offset);
			if (prefetch_planned(gets, planned, granule) || granule_from_host_cache(file, granule, offset))
				continue;
			/* as piece_discover: from offset to the end of the granule, whose answer names
			 * the piece's size (a piece longer than a granule is left to the read) */
			gets[planned++] = (struct io_prefetch_get){ .start = granule, .from = offset,
								    .length = granule + GRANULE - offset,
								    .discover = true };
			break;
		}
		default:
			break;   /* zeros, or beyond what is known: nothing to fetch */
		}
	}
	for (size_t i = 0; i < planned; i++)
		piece_key(file, gets[i].start, gets[i].key);
	return planned;
}

void io_pieced_prefetch_keep(struct io_remote_file *file, struct io_prefetch_get *gets, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		struct io_prefetch_get *get = &gets[i];
		bool usable = get->rc == 0 && get->bytes.size > 0 &&
			      get->from - get->start + get->bytes.size <= get->whole_size;
		if (usable && get->discover)
			usable = piece_insert(file, get->start, get->whole_size) == 0;
		if (usable)
			piece_keep(file, get->start, get->from, &get->bytes, get->whole_size);
		buf_free(&get->bytes);
	}
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

ssize_t io_pieced_pread(struct io_remote_file *file, uint8_t *out, size_t size, uint64_t offset)
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
	uint64_t last = file->piece_count ? file->pieces[file->piece_count - 1].start : 0;
	buf_store_u64(whole + META_SLOT_SIZE + 8, last);
	/* where the last piece's state part begins, when this process wrote it (invariant 5) */
	if (last == file->own_piece && file->own_state_start > last && file->own_state_start - last <= UINT32_MAX)
		buf_store_u32(whole + META_SLOT_SIZE + 4, (uint32_t)(file->own_state_start - last));
	char key[S3_KEY_MAX + 8];
	snprintf(key, sizeof key, "%s.meta/%u", file->key, slot);
	return s3_put(file->directory->client, key, whole, sizeof whole, S3_ALWAYS, error);
}

int io_pieced_pwrite(struct io_remote_file *file, const uint8_t *bytes, size_t size, uint64_t offset)
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
			uint64_t end = io_pieced_end(file);
			if (offset == end) {
				io_pieced_catch_up(file);
				if (offset != io_pieced_end(file))
					return -ESTALE;   /* another process of this host appended here (invariant 8) */
			}
			if (offset != end && (rc = pieces_refresh(file)) == 0 && offset != (end = io_pieced_end(file)))
				return -ESTALE;
			if (rc < 0)
				break;
			char key[S3_KEY_MAX + 20];
			piece_key(file, offset, key);
			rc = s3_put(file->directory->client, key, bytes, size, S3_IF_ABSENT, &error);
			if (rc == -EEXIST) {
				/* another writer appended here first: its piece is the one to build on next.
				 * One GET learns its size and brings its bytes (the retry reads its root);
				 * a listing only if that fails. Pieces after it, if any, the next lost
				 * race finds the same way (invariant 7). */
				uint64_t winner = 0;
				if (piece_fetch(file, offset, offset, GRANULE, &winner) < 0 || winner == 0 ||
				    piece_insert(file, offset, winner) < 0)
					pieces_refresh(file);
				return -ESTALE;
			}
			if (rc == 0) {
				uint64_t noted = file->state_start_noted;
				file->own_piece = offset;
				file->own_state_start = noted > offset && noted - offset < size ? noted : 0;
			}
			file->state_start_noted = 0;
			if (rc == 0 && (rc = piece_insert(file, offset, size)) == 0) {
				/* this process reads its own tail back (the next publish builds on it), and
				 * so do the host's other writers (invariant 8) */
				io_cache_put(file->cache, NULL, offset, bytes, size);
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
		io_log_failure(&error);
	return rc;
}

/* Deletes the pieces wholly inside [start, end) (never the header), and with forget what the
 * host cache holds of them. Caller holds the lock. */
static int pieces_delete(struct io_remote_file *file, uint64_t start, uint64_t end, bool forget)
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
				if (forget)
					io_cache_forget_piece(file->cache, piece->start);
				for (int r = 0; r < RANGES; r++)
					if (file->ranges[r].start != UINT64_MAX && file->ranges[r].start >= piece->start &&
					    file->ranges[r].start < piece->start + piece->size)
						range_drop(file, &file->ranges[r]);
				continue;
			}
			io_log_failure(&error);
		}
		file->pieces[kept++] = *piece;
	}
	file->piece_count = kept;
	return rc;
}

void io_pieced_free(struct io_remote_file *file)
{
	io_cache_free(file->cache);
	file->cache = NULL;
	for (int i = 0; i < RANGES; i++)
		buf_free(&file->ranges[i].bytes);
	free(file->pieces);
	file->pieces = NULL;
	file->piece_count = file->piece_capacity = 0;
	file->range_bytes = 0;
}

int io_pieced_truncate(struct io_remote_file *file, uint64_t size)
{
	/* pieces wholly beyond size go; one that straddles it cannot be cut */
	int rc = pieces_list_all(file);
	if (rc == 0)
		rc = pieces_refresh(file);
	for (size_t i = 0; rc == 0 && i < file->piece_count; i++)
		if (file->pieces[i].start < size && file->pieces[i].start + file->pieces[i].size > size &&
		    size > BLOCKS_START)
			rc = -EINVAL;
	if (rc == 0)
		rc = pieces_delete(file, size < BLOCKS_START ? BLOCKS_START : size, UINT64_MAX, true);
	return rc;
}

int io_pieced_size(struct io_remote_file *file, uint64_t *size_out)
{
	/* what other writers appended since: one LIST after the last piece known */
	int rc = pieces_refresh(file);
	if (rc == 0)
		*size_out = io_pieced_end(file);
	return rc;
}

void io_pieced_catch_up(struct io_remote_file *file)
{
	for (;;) {
		uint64_t end = io_pieced_end(file);
		if (end < BLOCKS_START || !granule_from_host_cache(file, end, end))
			return;
	}
}

uint64_t io_pieced_last_start(const struct io_remote_file *file)
{
	return file->piece_count ? file->pieces[file->piece_count - 1].start : 0;
}

int io_pieced_punch(struct io_remote_file *file, uint64_t start, uint64_t end)
{
	int rc = pieces_list_all(file);
	if (rc == 0)
		rc = pieces_delete(file, start, end, false);   /* below the end: never a start again */
	return rc;
}

int io_pieced_data_bytes(struct io_remote_file *file, uint64_t start, uint64_t end, uint64_t *bytes_out)
{
	int rc = pieces_list_all(file);
	if (rc < 0)
		return rc;
	uint64_t total = 0;
	for (size_t i = 0; i < file->piece_count; i++) {
		uint64_t from = file->pieces[i].start, to = from + file->pieces[i].size;
		if (from < start)
			from = start;
		if (to > end)
			to = end;
		if (to > from)
			total += to - from;
	}
	if (start < BLOCKS_START && end > META_START)
		total += (end < BLOCKS_START ? end : BLOCKS_START) - (start > META_START ? start : META_START);
	*bytes_out = total;
	return 0;
}
