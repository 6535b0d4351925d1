/*
 * manifest — opening and creating a store, the format check, the meta
 * slots, latest-root discovery, snapshots and the read side (heads, names,
 * branches, log, commit lookup). The publisher is in manifest_publish.c,
 * recovery in manifest_recovery.c, verify and repair in manifest_verify.c.
 *
 * States of a handle:
 *   OPENING   header read and checked (magic, checksum, format version) —
 *             before anything else, including recovery (invariant 1 of
 *             manifest.h);
 *   RECOVERING (read-write only) under the store lock: torn tail (bytes
 *             after the latest root that are not zeros) truncated,
 *             dead writers' sidecars rolled forward or back;
 *   OPEN      latest root cached; refresh picks up other processes' publishes;
 *   DAMAGED   the root a meta slot names (so: durable) is unreadable; a
 *             read-write open fails, a read-only handle answers -EIO to every
 *             current-state read and verify reports the damage.
 *
 * Invariants kept here:
 *   1. The cached latest root is the root the newest valid meta slot names
 *      (durable: manifest_sync.c writes a slot only after the fsync that
 *      covered it) or one this handle's own sync made durable; it only moves
 *      forward (sequence). The written root (>= latest) is the last complete
 *      root the store lock's refresh found; only publishes build on it.
 *   2. The common refresh reads the two meta slots and nothing else (a root
 *      no slot names is not shown); under the store lock it also reads the
 *      blocks after the written root (a publish into the preallocated zeros
 *      leaves the file size unchanged), or, when the written-root hint names
 *      a later root, that root and what follows it: anything but zeros after
 *      it sends the scan back to the written root, so a hint never decides
 *      what is truncated; a fresh open reads the header, the
 *      meta slots, the root and the block header after it: the same I/O at
 *      any history depth.
 *   3. Bytes are only ever truncated under the store lock, only after the
 *      last complete root, and never below the newest valid meta slot's
 *      size (what a meta slot names was durable before the slot was written).
 *   4. Current-state reads touch the branches tree, the names tree and the
 *      heads tree only — never commit records or history.
 *   5. A read-write handle that refreshes under the store lock for anything
 *      but a publish settles first: every written root is made durable and
 *      the newest is named by a meta slot (manifest_refresh_locked), so that
 *      recovery, gc and snapshot copies see one durable state.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "manifest_int.h"

#define SCAN_WINDOW (32u << 10)   /* manifest_scan_tail reads blocks after the first this much at a time */
/* A store-lock waiter tries again after this long even if no unlock woke it (a holder
 * that died wakes nobody; without the wake-up page every wait is such a pause, growing
 * from 100 µs to 5 ms after the first 20 ms). */
#define LOCK_PAUSE_US 2000u

static const uint8_t file_magic[8] = { 'G', 'R', 'A', 'P', 'H', 'F', 'S', 0 };
static const uint8_t meta_magic[8] = { 'G', 'F', 'S', 'M', 'E', 'T', 'A', 0 };

uint64_t manifest_now_us(void)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	return (uint64_t)now.tv_sec * 1000000u + (uint64_t)now.tv_nsec / 1000u;
}

int manifest_name_check(const char *what, const char *name, struct error_info *error)
{
	size_t length = name ? strnlen(name, JOURNAL_NAME_MAX + 2) : 0;
	if (!name || length == 0)
		return error_info_set(error, -EINVAL, "%s name is empty", what);
	if (length > JOURNAL_NAME_MAX)
		return error_info_set(error, -EINVAL, "%s name is longer than %d bytes", what,
				      JOURNAL_NAME_MAX);
	if (!schema_name_is_valid(name, length))
		return error_info_set(error, -EINVAL,
				      "%s name \"%.*s\" is not valid: use letters, digits and _, not starting with a digit",
				      what, (int)length, name);
	return 0;
}

/* ---- encodings ------------------------------------------------------------ */

void manifest_meta_encode(const struct meta_slot *slot, uint8_t out[MANIFEST_META_SLOT_SIZE])
{
	memset(out, 0, MANIFEST_META_SLOT_SIZE);
	memcpy(out, meta_magic, sizeof meta_magic);
	buf_store_u64(out + 8, slot->sequence);
	buf_store_u64(out + 16, slot->root_offset);
	buf_store_u64(out + 24, slot->size);
	buf_store_u64(out + 32, slot->version);
	buf_store_u64(out + 40, codec_hash(out, 40));
}

void manifest_meta_decode(const uint8_t bytes[MANIFEST_META_SLOT_SIZE], struct meta_slot *out)
{
	memset(out, 0, sizeof *out);
	/* every refresh decodes both slots: compare memory, not bytes one by one */
	bool padding_zero = bytes[MANIFEST_META_ENCODED_SIZE] == 0 &&
			    memcmp(bytes + MANIFEST_META_ENCODED_SIZE, bytes + MANIFEST_META_ENCODED_SIZE + 1,
				   MANIFEST_META_SLOT_SIZE - MANIFEST_META_ENCODED_SIZE - 1) == 0;
	if (padding_zero && bytes[0] == 0 && memcmp(bytes, bytes + 1, MANIFEST_META_ENCODED_SIZE) == 0) {
		out->empty = true;
		return;
	}
	if (!padding_zero || memcmp(bytes, meta_magic, sizeof meta_magic) != 0 ||
	    buf_load_u64(bytes + 40) != codec_hash(bytes, 40))
		return;
	out->sequence = buf_load_u64(bytes + 8);
	out->root_offset = buf_load_u64(bytes + 16);
	out->size = buf_load_u64(bytes + 24);
	out->version = buf_load_u64(bytes + 32);
	out->valid = out->sequence > 0 && out->root_offset >= MANIFEST_FIRST_BLOCK &&
		     out->size == out->root_offset + MANIFEST_ROOT_BLOCK_SIZE;
}

int manifest_root_encode(const struct root_record *root, struct buf *out)
{
	size_t start = out->size;
	int rc;
	if ((rc = buf_put_u64(out, root->sequence)) < 0 || (rc = buf_put_u64(out, root->version)) < 0 ||
	    (rc = buf_put_u64(out, root->horizon)) < 0 || (rc = buf_put_u64(out, root->time_us)) < 0 ||
	    (rc = codec_put_address(out, root->branches)) < 0 ||
	    (rc = codec_put_address(out, root->versions)) < 0 ||
	    (rc = codec_put_address(out, root->commit)) < 0 ||
	    (rc = codec_put_address(out, root->previous)) < 0 ||
	    (rc = codec_put_address(out, root->tags)) < 0 || (rc = buf_put_u64(out, root->swept_below)) < 0)
		out->size = start;
	assert(rc < 0 || out->size - start == MANIFEST_ROOT_PAYLOAD_SIZE);
	return rc;
}

int manifest_root_decode(const void *bytes, size_t size, struct root_record *out)
{
	struct buf_reader reader;
	buf_reader_init(&reader, bytes, size);
	struct root_record root = { 0 };
	root.sequence = buf_get_u64(&reader);
	root.version = buf_get_u64(&reader);
	root.horizon = buf_get_u64(&reader);
	root.time_us = buf_get_u64(&reader);
	root.branches = codec_get_address(&reader);
	root.versions = codec_get_address(&reader);
	root.commit = codec_get_address(&reader);
	root.previous = codec_get_address(&reader);
	root.tags = codec_get_address(&reader);
	root.swept_below = buf_get_u64(&reader);
	if (reader.failed || buf_reader_remaining(&reader) != 0 || root.sequence == 0 ||
	    root.horizon > root.version || block_address_is_null(root.branches) ||
	    (root.version == 0) != block_address_is_null(root.commit) ||
	    (root.swept_below != 0 && root.swept_below < MANIFEST_FIRST_BLOCK))
		return -EIO;
	*out = root;
	return 0;
}

int manifest_root_read(struct pager *pager, struct block_address address, struct root_record *out)
{
	struct buf raw;
	buf_init(&raw);
	int rc = pager_read(pager, address, BLOCK_ROOT, &raw);
	if (rc == 0)
		rc = manifest_root_decode(raw.data, raw.size, out);
	if (rc == 0 && address.segment == 0 && out->swept_below > address.offset)
		rc = -EIO;   /* gc sweeps only below its own root */
	if (rc == 0)
		out->self = address;
	buf_free(&raw);
	return rc;
}

int manifest_branch_encode(const struct branch_record *branch, struct buf *out)
{
	size_t start = out->size;
	size_t name_length = strnlen(branch->name, sizeof branch->name);
	size_t from_length = strnlen(branch->forked_from, sizeof branch->forked_from);
	int rc;
	if (name_length == 0 || name_length > JOURNAL_NAME_MAX || from_length > JOURNAL_NAME_MAX)
		return -EINVAL;
	if ((rc = buf_put_str(out, branch->name, name_length)) < 0 ||
	    (rc = buf_append(out, branch->incarnation.bytes, 16)) < 0 ||
	    (rc = buf_append(out, branch->head_commit.bytes, 16)) < 0 ||
	    (rc = codec_put_address(out, branch->head_record)) < 0 ||
	    (rc = buf_put_u64(out, branch->head_version)) < 0 ||
	    (rc = codec_put_address(out, branch->heads)) < 0 ||
	    (rc = codec_put_address(out, branch->names)) < 0 ||
	    (rc = buf_put_str(out, branch->forked_from, from_length)) < 0 ||
	    (rc = buf_put_u64(out, branch->fork_point)) < 0 ||
	    (rc = buf_put_u64(out, branch->created_version)) < 0 ||
	    (rc = buf_put_u64(out, branch->created_time_us)) < 0)
		out->size = start;
	return rc;
}

int manifest_branch_decode(const void *bytes, size_t size, struct branch_record *out)
{
	struct buf_reader reader;
	buf_reader_init(&reader, bytes, size);
	struct branch_record branch;
	memset(&branch, 0, sizeof branch);
	const uint8_t *name_bytes;
	size_t name_length = buf_get_str(&reader, &name_bytes);
	if (!reader.failed && name_length > 0 && name_length <= JOURNAL_NAME_MAX &&
	    !memchr(name_bytes, 0, name_length))
		memcpy(branch.name, name_bytes, name_length);
	else
		return -EIO;
	buf_get_raw(&reader, branch.incarnation.bytes, 16);
	buf_get_raw(&reader, branch.head_commit.bytes, 16);
	branch.head_record = codec_get_address(&reader);
	branch.head_version = buf_get_u64(&reader);
	branch.heads = codec_get_address(&reader);
	branch.names = codec_get_address(&reader);
	const uint8_t *from_bytes;
	size_t from_length = buf_get_str(&reader, &from_bytes);
	if (reader.failed || from_length > JOURNAL_NAME_MAX || memchr(from_bytes, 0, from_length))
		return -EIO;
	memcpy(branch.forked_from, from_bytes, from_length);
	branch.fork_point = buf_get_u64(&reader);
	branch.created_version = buf_get_u64(&reader);
	branch.created_time_us = buf_get_u64(&reader);
	if (reader.failed || buf_reader_remaining(&reader) != 0 ||
	    ulid_is_zero(&branch.incarnation) ||
	    ulid_is_zero(&branch.head_commit) != block_address_is_null(branch.head_record))
		return -EIO;
	*out = branch;
	return 0;
}

/* ---- the file header --------------------------------------------------------- */

static void header_build(const struct ulid *store_id, uint32_t format_version, uint8_t *out)
{
	struct file_header header = {
		.format_version = format_version,
		.kind = FILE_KIND_MANIFEST,
		.store_id = *store_id,
		.segment_id = 0,
		.created_us = manifest_now_us(),
	};
	pager_file_header_encode(&header, out);
}

uint64_t manifest_gap_end(const struct manifest *manifest, uint64_t offset)
{
	if (io_file_is_remote(&manifest->file))
		return io_append_offset(&manifest->file, offset);
	if (!manifest->granule)
		return offset;
	return (offset + manifest->granule - 1) / manifest->granule * manifest->granule;
}

/*
 * Checks the header bytes in the order the contract requires: a graphfs
 * manifest at all (-EINVAL), intact (-EIO), then the format version (-EPROTO
 * with the export/upgrade guidance). Nothing else of the store is read
 * before this passes.
 */
static int header_check(const char *path, const uint8_t *bytes, struct ulid *store_id, uint32_t *granule,
			struct error_info *error)
{
	if (memcmp(bytes, file_magic, sizeof file_magic) != 0)
		return error_info_set(error, -EINVAL, "%s is not a graphfs store (its manifest has no graphfs header)",
				      path);
	bool intact = buf_load_u64(bytes + 48) == codec_hash(bytes, 48);
	*granule = buf_load_u32(bytes + MANIFEST_GRANULE_OFFSET);   /* FORMAT.md §2 */
	intact = intact && (*granule == 0 || *granule == MANIFEST_GRANULE);
	for (size_t i = MANIFEST_GRANULE_OFFSET + 4; i < FILE_HEADER_SIZE && intact; i++)
		intact = bytes[i] == 0;
	if (!intact)
		return error_info_set(error, -EIO, "%s/manifest: the file header at offset 0 is damaged (checksum mismatch)",
				      path);
	uint32_t kind = buf_load_u32(bytes + 12);
	if (kind != FILE_KIND_MANIFEST || buf_load_u64(bytes + 32) != 0)
		return error_info_set(error, -EINVAL, "%s is not a graphfs store (its manifest header is of kind %u)",
				      path, kind);
	uint32_t format = buf_load_u32(bytes + 8);
	if (format < MANIFEST_FORMAT_VERSION)
		return error_info_set(error, -EPROTO,
				      "store format %u is older than this graphfs (format %d): dump it with the graphfs version that wrote it (graphfs dump STORE > graph.ndjson; format 1 has no dump: graphfs export each table), then graphfs init a new store and graphfs load it (or graphfs import each table)",
				      format, MANIFEST_FORMAT_VERSION);
	if (format > MANIFEST_FORMAT_VERSION)
		return error_info_set(error, -EPROTO,
				      "store format %u is newer than this graphfs (format %d): upgrade graphfs",
				      format, MANIFEST_FORMAT_VERSION);
	memcpy(store_id->bytes, bytes + 16, 16);
	return 0;
}

int manifest_stamp_format(const char *path, uint32_t format_version)
{
	int directory = io_directory_open(path);
	if (directory < 0)
		return directory;
	struct io_file file;
	uint8_t bytes[FILE_HEADER_SIZE];
	int rc = io_file_open(directory, "manifest", O_RDWR, IO_MANIFEST, &file);
	if (rc < 0)
		goto out;
	rc = io_pread(&file, bytes, sizeof bytes, 0);
	if (rc == 0 && memcmp(bytes, file_magic, sizeof file_magic) != 0)
		rc = -EINVAL;
	if (rc == 0) {
		buf_store_u32(bytes + 8, format_version);
		buf_store_u64(bytes + 48, codec_hash(bytes, 48));
		rc = io_pwrite(&file, bytes, sizeof bytes, 0);
	}
	if (rc == 0)
		rc = io_fsync(&file);
	io_file_close(&file);
out:
	close(directory);
	return rc;
}

/* ---- latest root discovery ------------------------------------------------------ */

static void damage_record(struct manifest *manifest, const char *format, uint64_t offset)
{
	if (manifest->damage)
		return;
	manifest->damage = -EIO;
	snprintf(manifest->damage_message, sizeof manifest->damage_message, format,
		 (unsigned long long)offset);
	io_log(LOG_ERR, "%s/manifest: %s", manifest->path, manifest->damage_message);
}

static bool all_zero(const uint8_t *bytes, size_t size)
{
	return size == 0 || (bytes[0] == 0 && memcmp(bytes, bytes + 1, size - 1) == 0);
}

/* Bytes [offset, offset + size) of the manifest (within file_size) from window, read
 * again from offset (SCAN_WINDOW at least) when they are not all in it. 0 or -errno. */
static int scan_bytes(struct manifest *manifest, struct buf *window, uint64_t *window_start, uint64_t offset,
		      size_t size, uint64_t file_size, const uint8_t **out)
{
	if (window->size && offset >= *window_start && offset + size <= *window_start + window->size) {
		*out = window->data + (offset - *window_start);
		return 0;
	}
	uint64_t want = size > SCAN_WINDOW ? size : SCAN_WINDOW;
	if (want > file_size - offset)
		want = file_size - offset;
	buf_reset(window);
	int rc = buf_reserve(window, (size_t)want);
	if (rc == 0)
		rc = io_pread(&manifest->file, window->data, (size_t)want, offset);
	if (rc < 0) {
		buf_reset(window);
		return rc;
	}
	window->size = (size_t)want;
	*window_start = offset;
	*out = window->data;
	return 0;
}

/*
 * Reads blocks forward from start while they are complete and verified; the
 * last root continuing the sequence wins. Stops at the first block that is
 * not: preallocated zeros or the end of the file right after the last root
 * (*torn false), or a torn tail (*torn true: anything else after it,
 * including complete blocks that no root follows). Returns 0 or -errno for a
 * failed read (not damage).
 */
int manifest_scan_tail(struct manifest *manifest, uint64_t start, uint64_t file_size,
		       struct root_record *candidate, bool *have_candidate, uint64_t *end, bool *torn)
{
	uint64_t offset = start, window_start = 0, boundary = *end;   /* boundary: where stopping is clean */
	struct buf window, raw;
	buf_init(&window);
	buf_init(&raw);
	int rc = 0;
	*torn = false;
	while (offset < file_size) {
		/* The first header is read alone (usually zeros follow the latest root: the common
		 * refresh reads 24 bytes); once blocks follow, they are read a window at a time. */
		uint8_t first_header[BLOCK_HEADER_SIZE];
		const uint8_t *header_bytes = first_header;
		size_t length = file_size - offset < BLOCK_HEADER_SIZE ? (size_t)(file_size - offset) : BLOCK_HEADER_SIZE;
		if (offset == start)
			rc = io_pread(&manifest->file, first_header, length, offset);
		else
			rc = scan_bytes(manifest, &window, &window_start, offset, length, file_size, &header_bytes);
		if (rc < 0)
			break;
		struct block_header header;
		if (length < BLOCK_HEADER_SIZE || codec_decode_header(header_bytes, &header) < 0) {
			*torn = offset != boundary || !all_zero(header_bytes, length);
			/* in an object store the next tail starts at the next granule (FORMAT.md §23) */
			uint64_t next = manifest_gap_end(manifest, offset);
			if (!*torn && next > offset && next < file_size) {
				offset = boundary = next;
				continue;
			}
			break;
		}
		*torn = true;
		uint64_t block_size = BLOCK_HEADER_SIZE + (uint64_t)header.stored_size;
		if (offset + block_size > file_size)
			break;
		const uint8_t *block;
		if ((rc = scan_bytes(manifest, &window, &window_start, offset, (size_t)block_size, file_size, &block)) < 0)
			break;
		buf_reset(&raw);
		if (codec_decode(block, (size_t)block_size, 0, &raw) < 0)
			break;
		io_count_block(IO_MANIFEST, block_size);
		if (header.type == BLOCK_ROOT) {
			struct root_record root;
			if (manifest_root_decode(raw.data, raw.size, &root) < 0)
				break;
			if (*have_candidate && (root.sequence != candidate->sequence + 1 ||
						root.version < candidate->version))
				break;
			root.self = (struct block_address){ 0, offset };
			*candidate = root;
			*have_candidate = true;
			*end = offset + block_size;
		}
		offset += block_size;
		if (header.type == BLOCK_ROOT)
			boundary = offset;
		*torn = offset != boundary;
	}
	buf_free(&window);
	buf_free(&raw);
	return rc;
}

static int meta_read(struct manifest *manifest, struct meta_slot slots[2])
{
	uint8_t *bytes = malloc(2 * MANIFEST_META_SLOT_SIZE);
	if (!bytes)
		return -ENOMEM;
	int rc = io_pread(&manifest->file, bytes, 2 * MANIFEST_META_SLOT_SIZE, MANIFEST_META_OFFSET);
	if (rc == 0) {
		manifest_meta_decode(bytes, &slots[0]);
		manifest_meta_decode(bytes + MANIFEST_META_SLOT_SIZE, &slots[1]);
	}
	free(bytes);
	return rc;
}

/* Reads the root a meta slot names; it must be exactly what the slot says. */
static int meta_root(struct manifest *manifest, const struct meta_slot *slot, struct root_record *out)
{
	int rc = manifest_root_read(manifest->pager, (struct block_address){ 0, slot->root_offset }, out);
	if (rc == 0 && (out->sequence != slot->sequence || out->version != slot->version))
		rc = -EIO;
	return rc;
}

int manifest_meta_newest(struct manifest *manifest, struct meta_slot *out)
{
	struct meta_slot slots[2];
	int rc = meta_read(manifest, slots);
	if (rc < 0)
		return rc;
	*out = (struct meta_slot){ 0 };
	for (int i = 0; i < 2; i++)
		if (slots[i].valid && (!out->valid || slots[i].sequence > out->sequence))
			*out = slots[i];
	return 0;
}

/*
 * manifest_state_refresh (scan false) and the store lock's refresh (scan
 * true). The visible root (latest) only ever comes from a meta slot (written
 * once the root is durable, manifest_sync.c) or from this handle's own sync;
 * scan also reads every complete root after the newest root known and
 * records the last as written (not yet shown: it may not be durable).
 */
/*
 * state_refresh for a manifest in an object store, once a root is known:
 * every piece is durable and ends with its root (io_pieced.c), so the newest
 * root is the last one of the last piece. One LIST, at most every
 * REMOTE_REFRESH_US (none for a publish: its conditional create checks the
 * end), instead of reading the meta slots.
 */
#define REMOTE_REFRESH_US 100000u

/* REMOTE_REFRESH_US, or GRAPHFS_S3_REFRESH_MS (1 ms to 10 min; tests that count requests
 * lengthen it, so that a slow machine's reads do not add a LIST) */
static uint64_t remote_refresh_us(void)
{
	const char *text = getenv("GRAPHFS_S3_REFRESH_MS");
	unsigned long milliseconds = text && *text ? strtoul(text, NULL, 10) : 0;
	return milliseconds >= 1 && milliseconds <= 600000 ? (uint64_t)milliseconds * 1000u : REMOTE_REFRESH_US;
}

static uint64_t manifest_monotonic_us(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000000u + (uint64_t)now.tv_nsec / 1000u;
}
static int remote_refresh(struct manifest *manifest, bool *changed, bool scan)
{
	uint64_t file_size, now = manifest_monotonic_us();
	/* a read of the latest state lists at most every REMOTE_REFRESH_US (FORMAT.md §23) */
	bool list = !scan && (manifest->listed_us == 0 || now - manifest->listed_us >= remote_refresh_us());
	int rc = list ? io_size(&manifest->file, &file_size) : io_size_known(&manifest->file, &file_size);
	if (rc < 0)
		return rc;
	if (list)
		manifest->listed_us = now;
	if (file_size > manifest->written_size) {
		struct root_record candidate = manifest->written;
		bool have = true, torn;
		uint64_t end = manifest->written_size;
		/* every piece is whole and ends with its root: the newest root is the last piece's,
		 * and the pieces between need not be read (a writer that lost a race retries at once) */
		uint64_t last = io_last_append_start(&manifest->file);
		if (last > end) {
			end = last;
			have = false;
		}
		if ((rc = manifest_scan_tail(manifest, end, file_size, &candidate, &have, &end, &torn)) < 0)
			return rc;
		if (candidate.sequence > manifest->written.sequence) {
			manifest->latest = manifest->written = candidate;
			manifest->committed_size = manifest->written_size = end;
			if (changed)
				*changed = true;
		}
		manifest->tail_torn = torn;
	}
	manifest->observed_size = file_size;
	return 0;
}

static int state_refresh(struct manifest *manifest, bool *changed, bool scan)
{
	if (changed)
		*changed = false;
	if (manifest->have_latest && io_file_is_remote(&manifest->file))
		return remote_refresh(manifest, changed, scan);
	bool opening = !manifest->have_latest;
	uint64_t file_size = manifest->observed_size;
	int rc;
	if (scan || !manifest->have_latest) {
		if ((rc = io_size(&manifest->file, &file_size)) < 0)
			return rc;
		if (file_size < MANIFEST_FIRST_BLOCK) {
			damage_record(manifest, "the manifest is shorter than its header and meta slots (%llu)",
				      file_size);
			return -EIO;
		}
	}
	struct meta_slot slots[2];
	rc = meta_read(manifest, slots);
	if (rc < 0)
		return rc;
	const struct meta_slot *newest = NULL, *other = NULL;
	for (int i = 0; i < 2; i++)
		if (slots[i].valid && (!newest || slots[i].sequence > newest->sequence))
			newest = &slots[i];
	for (int i = 0; i < 2; i++)
		if (slots[i].valid && &slots[i] != newest)
			other = &slots[i];
	manifest->meta_sequence = newest ? newest->sequence : 0;
	if (!scan && manifest->have_latest && (!newest || newest->sequence <= manifest->latest.sequence))
		return 0;

	bool moved = false;
	if (newest && (!manifest->have_latest || newest->sequence > manifest->latest.sequence)) {
		struct root_record announced;
		const struct meta_slot *used = newest;
		rc = meta_root(manifest, newest, &announced);
		if (rc < 0 && rc != -EIO)
			return rc;   /* unreadable for now (an object store out of reach), not damaged */
		if (rc < 0) {
			damage_record(manifest, "the root record at offset %llu, named by a meta slot, is damaged",
				      newest->root_offset);
			used = other;
			rc = other && (!manifest->have_latest || other->sequence > manifest->latest.sequence)
				     ? meta_root(manifest, other, &announced) : -EIO;
		}
		if (rc == 0) {
			manifest->latest = announced;
			manifest->committed_size = used->size;
			manifest->have_latest = true;
			moved = true;
		}
		if (newest->size > manifest->durable_size)
			manifest->durable_size = newest->size;
	}
	if (!manifest->have_latest) {
		/* no readable meta slot: the last complete root of the file (a damaged store) */
		/* below the newest pack's offset the pages are holes; a gc root starts there (FORMAT.md §22) */
		uint64_t start = pager_pack_covered_below(manifest->pager, NULL);
		if (start < MANIFEST_FIRST_BLOCK)
			start = MANIFEST_FIRST_BLOCK;
		if (!newest)
			damage_record(manifest, "neither meta slot is valid (scanned from offset %llu)", start);
		struct root_record candidate;
		bool have = false, torn;
		uint64_t end = start;
		if ((rc = manifest_scan_tail(manifest, start, file_size, &candidate, &have, &end, &torn)) < 0)
			return rc;
		if (!have) {
			damage_record(manifest, "no readable root record after offset %llu", start);
			return -EIO;
		}
		manifest->latest = candidate;
		manifest->committed_size = end;
		manifest->have_latest = true;
		moved = true;
	}
	if (!manifest->have_written || manifest->written.sequence < manifest->latest.sequence) {
		manifest->written = manifest->latest;
		manifest->written_size = manifest->committed_size;
		manifest->have_written = true;
	}
	if (opening && !scan) {
		/* A fresh handle also shows roots written after the newest slot (a writer that
		 * died before its sync or its slot, or one waiting for its sync now) once its
		 * own fsync has made them durable: what the next read-write open would settle. */
		struct root_record candidate = manifest->latest;
		bool have = true, torn;
		uint64_t end = manifest->committed_size;
		if (manifest_scan_tail(manifest, end, file_size, &candidate, &have, &end, &torn) == 0 &&
		    candidate.sequence > manifest->latest.sequence && io_datasync(&manifest->file) == 0) {
			manifest->latest = manifest->written = candidate;
			manifest->committed_size = manifest->written_size = end;
		}
	}
	if (scan) {
		/* every complete root written after the newest one known, durable or not: from
		 * the root this host's last publish wrote, if the hint names one that fits and
		 * only zeros follow it; else block by block from the newest root known */
		struct root_record candidate;
		bool have = true, torn = true;
		uint64_t end;
		if (manifest_written_hint_root(manifest, manifest->written.sequence, file_size, &candidate, &end) &&
		    manifest_scan_tail(manifest, end, file_size, &candidate, &have, &end, &torn) < 0)
			torn = true;
		if (torn) {
			candidate = manifest->written;
			end = manifest->written_size;
			if ((rc = manifest_scan_tail(manifest, end, file_size, &candidate, &have, &end, &torn)) < 0)
				return rc;
		}
		manifest->written = candidate;
		manifest->written_size = end;
		manifest->tail_torn = torn;
		manifest->observed_size = file_size;
	}
	if (changed)
		*changed = moved;
	return 0;
}

/*
 * The written-root hint (FORMAT.md §18 "Wake-up words"): the root the last
 * publish on this host wrote, recorded in the lock file's shared page under
 * the store lock, so that the next publish's refresh and a sync find the
 * newest written root by reading it alone instead of every block written
 * since. A hint is only a guess: the root it names is read and checked, and
 * anything that does not fit sends the caller back to the scan.
 */
struct written_hint {
	uint8_t store_id[16];
	uint64_t sequence;
	uint64_t version;
	uint64_t root_offset;
	uint64_t end;             /* where the root's block ends */
};

void manifest_written_hint_write(struct manifest *manifest, const struct root_record *root, uint64_t end)
{
	if (root->self.segment != 0)
		return;
	struct written_hint hint = { .sequence = root->sequence, .version = root->version,
				     .root_offset = root->self.offset, .end = end };
	memcpy(hint.store_id, manifest->store_id.bytes, sizeof hint.store_id);
	io_wake_record_write(&manifest->wake, &hint, sizeof hint);
}

bool manifest_written_hint_root(struct manifest *manifest, uint64_t after_sequence, uint64_t file_size,
				struct root_record *root, uint64_t *end)
{
	struct written_hint hint;
	if (!io_wake_record_read(&manifest->wake, &hint, sizeof hint) ||
	    memcmp(hint.store_id, manifest->store_id.bytes, sizeof hint.store_id) != 0 ||
	    hint.sequence <= after_sequence || hint.end > file_size || hint.root_offset >= hint.end ||
	    hint.root_offset < MANIFEST_FIRST_BLOCK)
		return false;
	struct root_record found;
	if (manifest_root_read(manifest->pager, (struct block_address){ 0, hint.root_offset }, &found) < 0 ||
	    found.sequence != hint.sequence || found.version != hint.version)
		return false;
	*root = found;
	*end = hint.end;
	return true;
}

uint64_t manifest_allocated_bytes(struct manifest *manifest, uint64_t file_size, uint64_t swept_below)
{
	if (io_file_is_remote(&manifest->file))
		return file_size;
	/* fstat(2) only when the file grew or a gc swept since the last one: a query of the
	 * file's times makes the next write stamp a new time, and the fdatasync after it write
	 * the inode too (Linux's fine-grained timestamps) */
	if (manifest->allocated_for_size != file_size || manifest->allocated_for_sweep != swept_below) {
		uint64_t allocated = file_size;
		if (io_allocated_bytes(&manifest->file, &allocated) < 0)
			return file_size;
		manifest->allocated = allocated;
		manifest->allocated_for_size = file_size;
		manifest->allocated_for_sweep = swept_below;
	}
	return manifest->allocated;
}

int manifest_state_refresh(struct manifest *manifest, bool *changed)
{
	return state_refresh(manifest, changed, false);
}

void manifest_state_written(struct manifest *manifest, const struct root_record *root, uint64_t size,
			    uint64_t file_size)
{
	pthread_mutex_lock(&manifest->state_mutex);
	if (!manifest->have_written || root->sequence > manifest->written.sequence) {
		manifest->written = *root;
		manifest->written_size = size;
		manifest->have_written = true;
	}
	if (file_size > manifest->observed_size)
		manifest->observed_size = file_size;
	manifest->tail_torn = false;
	pthread_mutex_unlock(&manifest->state_mutex);
}

void manifest_state_durable(struct manifest *manifest, const struct root_record *root, uint64_t size)
{
	pthread_mutex_lock(&manifest->state_mutex);
	if (!manifest->have_latest || root->sequence > manifest->latest.sequence) {
		manifest->latest = *root;
		manifest->committed_size = size;
		manifest->have_latest = true;
	}
	if (size > manifest->durable_size)
		manifest->durable_size = size;
	pthread_mutex_unlock(&manifest->state_mutex);
	manifest_state_written(manifest, root, size, 0);
}

int manifest_meta_write_file(struct io_file *file, const struct root_record *root, uint64_t size)
{
	struct meta_slot slot = {
		.valid = true,
		.sequence = root->sequence,
		.root_offset = root->self.offset,
		.size = size,
		.version = root->version,
	};
	uint8_t *bytes = malloc(MANIFEST_META_SLOT_SIZE);
	if (!bytes)
		return -ENOMEM;
	manifest_meta_encode(&slot, bytes);
	int rc = io_pwrite(file, bytes, MANIFEST_META_SLOT_SIZE,
			   MANIFEST_META_OFFSET + (root->sequence % 2) * MANIFEST_META_SLOT_SIZE);
	free(bytes);
	return rc;
}

int manifest_meta_write(struct manifest *manifest, const struct root_record *root, uint64_t size)
{
	return manifest_meta_write_file(&manifest->file, root, size);
}

int manifest_refresh_for_publish(struct manifest *manifest, struct error_info *error)
{
	pthread_mutex_lock(&manifest->state_mutex);
	int rc = state_refresh(manifest, NULL, true);
	if (rc == 0 && manifest->damage)
		rc = manifest->damage;
	if (rc < 0) {
		error_info_set(error, rc, "%s: cannot read the latest root: %s", manifest->path,
			       manifest->damage ? manifest->damage_message : io_strerror(rc));
		goto out;
	}
	if (manifest->flags & MANIFEST_READ_ONLY)
		goto out;
	if (manifest->tail_torn && io_file_is_remote(&manifest->file)) {
		/* a piece is whole or absent (io_pieced.c): one that does not end with a root is damage,
		 * and what follows it other writers' commits, never to be cut */
		rc = error_info_set(error, -EIO, "%s: the manifest piece after offset %llu in the object store does "
				    "not end with a root; `graphfs verify` names it", manifest->path,
				    (unsigned long long)manifest->written_size);
		goto out;
	}
	if (manifest->tail_torn) {
		assert(manifest->written_size >= manifest->durable_size);
		rc = io_failpoint("recovery.before_truncate");
		if (rc == 0)
			rc = io_truncate(&manifest->file, manifest->written_size);
		if (rc == 0)
			rc = io_fsync(&manifest->file);
		if (rc < 0) {
			error_info_set(error, rc, "%s: cannot truncate the torn tail of the manifest: %s",
				       manifest->path, io_strerror(rc));
			goto out;
		}
		manifest->observed_size = manifest->written_size;
		manifest->tail_torn = false;
	}
out:
	pthread_mutex_unlock(&manifest->state_mutex);
	return rc;
}

int manifest_refresh_locked(struct manifest *manifest, struct error_info *error)
{
	int rc = manifest_refresh_for_publish(manifest, error);
	if (rc < 0 || (manifest->flags & MANIFEST_READ_ONLY))
		return rc;
	/* Settle: roots written by publishes still waiting for their sync, or by a
	 * writer that died before its meta slot, become durable and announced now,
	 * so that what follows (recovery, gc, a snapshot copy) sees one durable state. */
	pthread_mutex_lock(&manifest->state_mutex);
	struct root_record written = manifest->written;
	uint64_t written_size = manifest->written_size;
	bool behind = manifest->latest.sequence < written.sequence ||
		      manifest->meta_sequence < written.sequence;
	pthread_mutex_unlock(&manifest->state_mutex);
	if (behind)
		rc = manifest_sync_through(manifest, &written, written_size, NULL, error);
	return rc;
}

/* ---- the store lock ---------------------------------------------------------------- */

int manifest_lock(struct manifest *manifest, struct error_info *error)
{
	if (manifest->flags & MANIFEST_READ_ONLY)
		return error_info_set(error, -EROFS, "%s is open read-only", manifest->path);
	pthread_mutex_lock(&manifest->publish_mutex);
	/* A publish holds the lock for a fraction of a millisecond. A waiter sleeps until the
	 * holder's unlock wakes it (manifest_unlock), or at most LOCK_PAUSE_US, and tries again. */
	uint64_t started = manifest_monotonic_us();
	int rc;
	for (;;) {
		uint32_t seen = io_wake_read(&manifest->wake, IO_WAKE_STORE_LOCK);
		rc = io_lock(&manifest->lock_file, true, false);
		if (rc == 0)
			return 0;
		if (rc != -EWOULDBLOCK && rc != -EAGAIN && rc != -EINTR)
			break;
		uint64_t waited = manifest_monotonic_us() - started;
		if (waited >= MANIFEST_LOCK_WAIT_US) {
			rc = -EAGAIN;
			break;
		}
		uint64_t pause = manifest->wake.words ? LOCK_PAUSE_US : waited < 20000 ? 100 : 5000;
		io_wake_waiting(&manifest->wake, IO_WAKE_STORE_LOCK, true);
		rc = io_lock(&manifest->lock_file, true, false);
		if (rc != 0)
			io_wake_sleep(&manifest->wake, IO_WAKE_STORE_LOCK, seen, pause);
		io_wake_waiting(&manifest->wake, IO_WAKE_STORE_LOCK, false);
		if (rc == 0)
			return 0;
	}
	pthread_mutex_unlock(&manifest->publish_mutex);
	if (rc == -EAGAIN)
		return error_info_set(error, -EAGAIN,
				      "store is locked by another process (waited %u s for %s/lock)",
				      MANIFEST_LOCK_WAIT_US / 1000000u, manifest->path);
	return error_info_set(error, rc, "cannot lock %s/lock: %s", manifest->path, io_strerror(rc));
}

void manifest_unlock(struct manifest *manifest)
{
	io_unlock(&manifest->lock_file);
	io_wake_all(&manifest->wake, IO_WAKE_STORE_LOCK);
	pthread_mutex_unlock(&manifest->publish_mutex);
}

/* ---- create / open / close --------------------------------------------------------------- */

static int visit_any(const char *name, void *context)
{
	(void)name;
	(void)context;
	return 1;
}

int manifest_directory_prepare(const char *path, bool *created, struct error_info *error)
{
	*created = false;
	int directory = io_directory_open(path);
	if (directory == -ENOENT) {
		char parent[PATH_MAX];
		const char *slash = strrchr(path, '/');
		const char *leaf = slash ? slash + 1 : path;
		if (!slash)
			snprintf(parent, sizeof parent, ".");
		else if (slash == path)
			snprintf(parent, sizeof parent, "/");
		else
			snprintf(parent, sizeof parent, "%.*s", (int)(slash - path), path);
		int parent_directory = io_directory_open(parent);
		if (parent_directory < 0)
			return error_info_set(error, parent_directory, "cannot open %s: %s", parent,
					      strerror(-parent_directory));
		int rc = io_directory_make(parent_directory, leaf);
		if (rc == 0)
			io_directory_sync(parent_directory);
		close(parent_directory);
		if (rc < 0)
			return error_info_set(error, rc, "cannot create %s: %s", path, io_strerror(rc));
		*created = true;
		directory = io_directory_open(path);
	}
	if (directory < 0)
		return error_info_set(error, directory, "cannot open %s: %s", path, strerror(-directory));
	if (!*created) {
		int rc = io_directory_list(directory, NULL, visit_any, NULL);
		if (rc != 0) {
			close(directory);
			if (rc > 0)
				return error_info_set(error, -EEXIST, "%s exists and is not empty", path);
			return error_info_set(error, rc, "cannot list %s: %s", path, io_strerror(rc));
		}
	}
	return directory;
}

uint64_t manifest_end(struct manifest *manifest)
{
	pthread_mutex_lock(&manifest->state_mutex);
	uint64_t end = manifest->committed_size;
	pthread_mutex_unlock(&manifest->state_mutex);
	return end;
}

int manifest_create(const char *path, struct error_info *error)
{
	bool created;
	int directory = manifest_directory_prepare(path, &created, error);
	if (directory < 0)
		return directory;
	struct io_file file = { -1, IO_MANIFEST, NULL }, lock_file = { -1, IO_MANIFEST, NULL }, pins_file = { -1, IO_MANIFEST, NULL };
	struct pager *pager = NULL;
	struct pager_append *append = NULL;
	struct btree *branches = NULL;
	struct buf bytes;
	buf_init(&bytes);
	int rc;
	if ((rc = io_directory_make(directory, "segments")) < 0 ||
	    (rc = io_directory_make(directory, "recovery")) < 0 ||
	    (rc = io_file_open(directory, "lock", O_RDWR | O_CREAT | O_EXCL, IO_MANIFEST, &lock_file)) < 0 ||
	    (rc = io_file_open(directory, "pins", O_RDWR | O_CREAT | O_EXCL, IO_MANIFEST, &pins_file)) < 0 ||
	    (rc = io_file_open(directory, "manifest", O_RDWR | O_CREAT | O_EXCL, IO_MANIFEST, &file)) < 0) {
		error_info_set(error, rc, "cannot create the files of %s: %s", path, io_strerror(rc));
		goto out;
	}
	/* header, then two empty meta slots */
	struct ulid store_id;
	ulid_new(&store_id);
	if ((rc = buf_reserve(&bytes, MANIFEST_FIRST_BLOCK)) < 0)
		goto out;
	memset(bytes.data, 0, MANIFEST_FIRST_BLOCK);
	header_build(&store_id, MANIFEST_FORMAT_VERSION, bytes.data);
	if ((rc = io_pwrite(&file, bytes.data, MANIFEST_FIRST_BLOCK, 0)) < 0 ||
	    (rc = pager_init(directory, &file, &pager)) < 0)
		goto failed_write;

	/* the first root: branch main with no commit and no tables; version 0 */
	uint64_t now = manifest_now_us();
	struct branch_record main_branch;
	memset(&main_branch, 0, sizeof main_branch);
	snprintf(main_branch.name, sizeof main_branch.name, "main");
	ulid_new(&main_branch.incarnation);
	main_branch.created_time_us = now;
	struct root_record root = { .sequence = 1, .version = 0, .time_us = now };
	buf_reset(&bytes);
	if ((rc = pager_append_begin(pager, MANIFEST_FIRST_BLOCK, &append)) < 0 ||
	    (rc = btree_open(pager, (struct block_address){ 0, 0 }, &branches)) < 0 ||
	    (rc = manifest_branch_encode(&main_branch, &bytes)) < 0 ||
	    (rc = btree_put(branches, "main", 4, bytes.data, bytes.size)) < 0 ||
	    (rc = btree_flush(branches, append, &root.branches)) < 0)
		goto failed_write;
	buf_reset(&bytes);
	if ((rc = manifest_root_encode(&root, &bytes)) < 0 ||
	    (rc = pager_append_block(append, BLOCK_ROOT, CODEC_NONE, bytes.data, bytes.size, &root.self)) < 0 ||
	    (rc = pager_append_write(append)) < 0)
		goto failed_write;
	if ((rc = manifest_meta_write_file(&file, &root, root.self.offset + MANIFEST_ROOT_BLOCK_SIZE)) < 0 ||
	    (rc = io_fsync(&file)) < 0 || (rc = io_directory_sync(directory)) < 0)
		goto failed_write;
	goto out;
failed_write:
	error_info_set(error, rc, "cannot write the new store %s: %s", path, io_strerror(rc));
out:
	buf_free(&bytes);
	btree_free(branches);
	pager_append_free(append);
	pager_free(pager);
	io_file_close(&file);
	io_file_close(&lock_file);
	io_file_close(&pins_file);
	close(directory);
	return rc;
}

int manifest_open(const char *path, int flags, struct manifest **out, struct error_info *error)
{
	struct manifest *manifest = calloc(1, sizeof *manifest);
	if (!manifest)
		return -ENOMEM;
	manifest->directory = -1;
	manifest->file.descriptor = -1;
	manifest->lock_file.descriptor = -1;
	manifest->pins.file.descriptor = -1;
	manifest->flags = flags;
	pthread_mutex_init(&manifest->publish_mutex, NULL);
	pthread_mutex_init(&manifest->sync_mutex, NULL);
	pthread_mutex_init(&manifest->state_mutex, NULL);
	pthread_mutex_init(&manifest->pins.mutex, NULL);
	snprintf(manifest->path, sizeof manifest->path, "%s", path);
	bool read_only = flags & MANIFEST_READ_ONLY;
	uint8_t header[FILE_HEADER_SIZE];
	int rc = io_directory_open(path);
	if (rc < 0) {
		if (rc == -ENOENT)
			error_info_set(error, rc, "no graphfs store at %s (no such directory)", path);
		else if (rc == -ENOTDIR)
			error_info_set(error, -EINVAL, "%s is not a graphfs store (not a directory)", path), rc = -EINVAL;
		else
			error_info_set(error, rc, "cannot open %s: %s", path, io_strerror(rc));
		goto failed;
	}
	manifest->directory = rc;
	rc = io_file_open(manifest->directory, "manifest", read_only ? O_RDONLY : O_RDWR, IO_MANIFEST,
			  &manifest->file);
	if (rc == 0 && io_file_is_remote(&manifest->file))
		manifest->listed_us = manifest_monotonic_us();   /* the open listed the recent pieces */
	if (rc < 0) {
		if (rc == -ENOENT)
			error_info_set(error, rc, "%s is not a graphfs store (no manifest file)", path);
		else
			error_info_set(error, rc, "cannot open %s/manifest: %s", path, io_strerror(rc));
		goto failed;
	}
	/* OPENING: the header (and so the format version) before anything else */
	ssize_t got = io_pread_some(&manifest->file, header, sizeof header, 0);
	if (got < 0) {
		rc = (int)got;
		error_info_set(error, rc, "cannot read %s/manifest: %s", path, io_strerror(rc));
		goto failed;
	}
	if ((size_t)got < sizeof header) {
		rc = error_info_set(error, -EINVAL, "%s is not a graphfs store (its manifest is too short)", path);
		goto failed;
	}
	rc = header_check(path, header, &manifest->store_id, &manifest->granule, error);
	if (rc < 0)
		goto failed;
	rc = pager_init(manifest->directory, &manifest->file, &manifest->pager);
	if (rc < 0) {
		error_info_set(error, rc, "cannot read %s/manifest: %s", path, io_strerror(rc));
		goto failed;
	}
	rc = io_file_open(manifest->directory, "lock", read_only ? O_RDONLY : O_RDWR | O_CREAT, IO_MANIFEST,
			  &manifest->lock_file);
	if (rc < 0 && !(read_only && rc == -ENOENT)) {
		error_info_set(error, rc, "cannot open %s/lock: %s", path, io_strerror(rc));
		goto failed;
	}
	/* waits for the store lock and for syncs sleep until woken (FORMAT.md §18); without
	 * the page (an object store, a read-only open) they are plain bounded sleeps */
	if (!read_only)
		(void)io_wake_page_map(&manifest->lock_file, &manifest->wake);
	if ((rc = manifest_pins_open(manifest, read_only)) < 0) {
		error_info_set(error, rc, "cannot open %s/pins: %s", path, io_strerror(rc));
		goto failed;
	}
	if (read_only) {
		pthread_mutex_lock(&manifest->state_mutex);
		rc = manifest_state_refresh(manifest, NULL);
		pthread_mutex_unlock(&manifest->state_mutex);
		if (rc < 0 && !manifest->damage) {
			error_info_set(error, rc, "cannot read %s/manifest: %s", path, io_strerror(rc));
			goto failed;
		}
		/* a damaged read-only handle opens so that verify can report; reads answer -EIO */
		rc = 0;
	} else {
		/* RECOVERING */
		rc = manifest_lock(manifest, error);
		if (rc < 0)
			goto failed;
		rc = manifest_refresh_locked(manifest, error);
		if (rc == 0)
			rc = manifest_recover(manifest, error);
		manifest_unlock(manifest);
		if (rc < 0)
			goto failed;
	}
	*out = manifest;
	return 0;
failed:
	manifest_close(manifest);
	return rc;
}

void manifest_close(struct manifest *manifest)
{
	if (!manifest)
		return;
	pager_free(manifest->pager);
	manifest_pins_close(manifest);
	io_wake_page_unmap(&manifest->wake);
	io_file_close(&manifest->lock_file);
	io_file_close(&manifest->file);
	if (manifest->directory >= 0)
		close(manifest->directory);
	pthread_mutex_destroy(&manifest->publish_mutex);
	pthread_mutex_destroy(&manifest->sync_mutex);
	pthread_mutex_destroy(&manifest->state_mutex);
	free(manifest);
}

struct pager *manifest_pager(struct manifest *manifest)
{
	return manifest->pager;
}

int manifest_refresh(struct manifest *manifest, bool *changed)
{
	pthread_mutex_lock(&manifest->state_mutex);
	int rc = manifest_state_refresh(manifest, changed);
	if (rc == 0 && manifest->damage)
		rc = manifest->damage;
	pthread_mutex_unlock(&manifest->state_mutex);
	return rc;
}

int manifest_latest(struct manifest *manifest, struct root_record *out)
{
	pthread_mutex_lock(&manifest->state_mutex);
	int rc = manifest->damage ? manifest->damage : manifest->have_latest ? 0 : -EIO;
	if (rc == 0)
		*out = manifest->latest;
	pthread_mutex_unlock(&manifest->state_mutex);
	return rc;
}

/* ---- snapshots ------------------------------------------------------------------------ */

int manifest_branch_find(struct pager *pager, struct block_address branches, const char *name,
			 struct branch_record *out)
{
	size_t length = strnlen(name, JOURNAL_NAME_MAX + 1);
	if (length == 0 || length > JOURNAL_NAME_MAX)
		return -ENOENT;
	struct btree *tree;
	int rc = btree_open(pager, branches, &tree);
	if (rc < 0)
		return rc;
	struct buf value;
	buf_init(&value);
	rc = btree_get(tree, name, length, &value);
	if (rc == 0) {
		rc = manifest_branch_decode(value.data, value.size, out);
		if (rc == 0 && strcmp(out->name, name) != 0)
			rc = -EIO;
		if (rc < 0)
			io_log(LOG_ERR, "manifest: branch record of \"%s\" is damaged", name);
	}
	buf_free(&value);
	btree_free(tree);
	return rc;
}

/* ---- heads ------------------------------------------------------------------------------ */

static int head_damaged(const struct manifest_snapshot *snapshot, const char *name, const char *what)
{
	io_log(LOG_ERR, "manifest: branch %s at version %llu: table %s: %s",
		snapshot->branch.name, (unsigned long long)snapshot->version, name, what);
	return -EIO;
}

/* Looks the head of stable id up in an open heads tree. */
static int head_get(struct btree *heads, const uint8_t *stable_id, struct buf *scratch,
		    struct head_row *out)
{
	buf_reset(scratch);
	int rc = btree_get(heads, stable_id, 16, scratch);
	if (rc == 0)
		rc = head_row_decode(scratch->data, scratch->size, out);
	if (rc == 0 && memcmp(out->stable_id.bytes, stable_id, 16) != 0)
		rc = -EIO;
	return rc;
}

/* Resolves one names entry to its live head (corruption is -EIO, reported). */
static int head_of_name(const struct manifest_snapshot *snapshot, struct btree *heads,
			const char *name, const uint8_t *id, size_t id_size, struct buf *scratch,
			struct head_row *out)
{
	if (id_size != 16)
		return head_damaged(snapshot, name, "the names entry is damaged");
	int rc = head_get(heads, id, scratch, out);
	if (rc == -ENOENT)
		return head_damaged(snapshot, name, "the names entry points at a missing head");
	if (rc < 0)
		return rc == -EIO ? head_damaged(snapshot, name, "its head row is damaged") : rc;
	if (out->state != HEAD_LIVE)
		return head_damaged(snapshot, name, "the names entry points at a tombstoned head");
	if (strcmp(out->name, name) != 0)
		return head_damaged(snapshot, name, "the names entry and the head disagree on the name");
	return 0;
}

int manifest_head_find(struct manifest *manifest, const struct manifest_snapshot *snapshot,
		       const char *name, struct head_row *out)
{
	size_t length = strnlen(name, JOURNAL_NAME_MAX + 1);
	if (length == 0 || length > JOURNAL_NAME_MAX)
		return -ENOENT;
	struct btree *names = NULL, *heads = NULL;
	struct buf id, scratch;
	buf_init(&id);
	buf_init(&scratch);
	int rc;
	if ((rc = btree_open(manifest->pager, snapshot->branch.names, &names)) < 0 ||
	    (rc = btree_get(names, name, length, &id)) < 0 ||
	    (rc = btree_open(manifest->pager, snapshot->branch.heads, &heads)) < 0)
		goto out;
	rc = head_of_name(snapshot, heads, name, id.data, id.size, &scratch, out);
out:
	buf_free(&id);
	buf_free(&scratch);
	btree_free(names);
	btree_free(heads);
	return rc;
}

int manifest_heads_each(struct manifest *manifest, const struct manifest_snapshot *snapshot,
			bool tombstoned, int (*visit)(const struct head_row *head, void *context),
			void *context)
{
	struct btree *names = NULL, *heads = NULL;
	struct btree_iterator *iterator = NULL;
	struct buf scratch;
	buf_init(&scratch);
	struct head_row head;
	int rc;
	if ((rc = btree_open(manifest->pager, snapshot->branch.heads, &heads)) < 0)
		goto out;
	if (tombstoned) {
		if ((rc = btree_iterator_open(heads, NULL, 0, &iterator)) < 0)
			goto out;
		const uint8_t *key, *value;
		size_t key_size, value_size;
		while ((rc = btree_iterator_next(iterator, &key, &key_size, &value, &value_size)) == 1) {
			if (key_size != 16 || head_row_decode(value, value_size, &head) < 0 ||
			    memcmp(head.stable_id.bytes, key, 16) != 0) {
				rc = head_damaged(snapshot, "(unknown)", "a head row is damaged");
				goto out;
			}
			if (head.state == HEAD_TOMBSTONED && (rc = visit(&head, context)) != 0)
				goto out;
		}
		goto out;
	}
	if ((rc = btree_open(manifest->pager, snapshot->branch.names, &names)) < 0 ||
	    (rc = btree_iterator_open(names, NULL, 0, &iterator)) < 0)
		goto out;
	const uint8_t *key, *value;
	size_t key_size, value_size;
	while ((rc = btree_iterator_next(iterator, &key, &key_size, &value, &value_size)) == 1) {
		char name[JOURNAL_NAME_MAX + 1];
		if (key_size == 0 || key_size > JOURNAL_NAME_MAX) {
			rc = head_damaged(snapshot, "(unknown)", "a names entry is damaged");
			goto out;
		}
		memcpy(name, key, key_size);
		name[key_size] = 0;
		if ((rc = head_of_name(snapshot, heads, name, value, value_size, &scratch, &head)) < 0 ||
		    (rc = visit(&head, context)) != 0)
			goto out;
	}
out:
	btree_iterator_free(iterator);
	btree_free(names);
	btree_free(heads);
	buf_free(&scratch);
	return rc;
}

/* ---- branches, commits, log -------------------------------------------------------------- */

int manifest_branches_each(struct manifest *manifest, const struct root_record *root,
			   int (*visit)(const struct branch_record *branch, void *context),
			   void *context)
{
	struct btree *tree = NULL;
	struct btree_iterator *iterator = NULL;
	int rc;
	if ((rc = btree_open(manifest->pager, root->branches, &tree)) < 0 ||
	    (rc = btree_iterator_open(tree, NULL, 0, &iterator)) < 0)
		goto out;
	const uint8_t *key, *value;
	size_t key_size, value_size;
	while ((rc = btree_iterator_next(iterator, &key, &key_size, &value, &value_size)) == 1) {
		struct branch_record branch;
		if (manifest_branch_decode(value, value_size, &branch) < 0 ||
		    strlen(branch.name) != key_size || memcmp(branch.name, key, key_size) != 0) {
			io_log(LOG_ERR, "%s/manifest: a branch record is damaged", manifest->path);
			rc = -EIO;
			goto out;
		}
		if ((rc = visit(&branch, context)) != 0)
			goto out;
	}
out:
	btree_iterator_free(iterator);
	btree_free(tree);
	return rc;
}
