/*
 * manifest — opening and creating a store, the format check, the meta
 * slots, latest-root discovery, snapshots and the read side (heads, names,
 * branches, log, commit lookup). The publisher is in manifest_publish.c,
 * recovery in manifest_recovery.c, verify and repair in manifest_verify.c.
 *
 * States of a handle (enum manifest_handle_state, manifest_handle_enter):
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

uint64_t manifest_gap_end(const struct manifest *manifest, uint64_t offset)
{
	if (io_file_is_remote(&manifest->file))
		return io_append_offset(&manifest->file, offset);
	if (!manifest->granule)
		return offset;
	return (offset + manifest->granule - 1) / manifest->granule * manifest->granule;
}

/* ---- latest root discovery ------------------------------------------------------ */

/* Debug check of a handle's state change: forward through OPENING, RECOVERING, OPEN; DAMAGED for good. */
static void manifest_handle_check(const struct manifest *manifest, enum manifest_handle_state next)
{
	(void)manifest;
	(void)next;
	assert(manifest->state != MANIFEST_DAMAGED || next == MANIFEST_DAMAGED);
	assert(next == MANIFEST_DAMAGED || next >= manifest->state);
}

void manifest_handle_enter(struct manifest *manifest, enum manifest_handle_state next)
{
	manifest_handle_check(manifest, next);
	manifest->state = next;
}

static void damage_record(struct manifest *manifest, const char *format, uint64_t offset)
{
	if (manifest->state == MANIFEST_DAMAGED)
		return;
	manifest_handle_enter(manifest, MANIFEST_DAMAGED);
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
#define UNREACHABLE_RETRY_US 1000000u

/* REMOTE_REFRESH_US, or GRAPHFS_S3_REFRESH_MS (1 ms to 10 min; tests that count requests
 * lengthen it, so that a slow machine's reads do not add a LIST) */
static uint64_t remote_refresh_us(void)
{
	const char *text = getenv("GRAPHFS_S3_REFRESH_MS");
	unsigned long milliseconds = text && *text ? strtoul(text, NULL, 10) : 0;
	return milliseconds >= 1 && milliseconds <= 600000 ? (uint64_t)milliseconds * 1000u : REMOTE_REFRESH_US;
}

uint64_t manifest_monotonic_us(void)
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
	if (!list && manifest->out_of_reach)
		return manifest->out_of_reach;   /* the last listing found the store out of reach */
	int rc = list ? io_size(&manifest->file, &file_size) : io_size_known(&manifest->file, &file_size);
	if (list) {
		manifest->out_of_reach = io_error_is_unreachable(rc) ? rc : 0;
		if (manifest->out_of_reach)
			manifest->listed_us = manifest->unreachable_us = now;   /* the next look waits its turn */
	}
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

/* Writes slot (root, size) into the slots slots names: bit 0 slot 0, bit 1 slot 1. 0 or -errno. */
static int meta_write_slots(struct io_file *file, const struct root_record *root, uint64_t size, unsigned slots)
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
	int rc = 0;
	for (unsigned i = 0; i < 2 && rc == 0; i++)
		if (slots & (1u << i))
			rc = io_pwrite(file, bytes, MANIFEST_META_SLOT_SIZE, MANIFEST_META_OFFSET + i * MANIFEST_META_SLOT_SIZE);
	free(bytes);
	return rc;
}

int manifest_meta_write_file(struct io_file *file, const struct root_record *root, uint64_t size)
{
	return meta_write_slots(file, root, size, 1u << (root->sequence % 2));
}

int manifest_meta_write_both(struct io_file *file, const struct root_record *root, uint64_t size)
{
	return meta_write_slots(file, root, size, 3u);
}

int manifest_meta_write(struct manifest *manifest, const struct root_record *root, uint64_t size)
{
	return manifest_meta_write_file(&manifest->file, root, size);
}

int manifest_refresh_for_publish(struct manifest *manifest, struct error_info *error)
{
	pthread_mutex_lock(&manifest->state_mutex);
	int rc = state_refresh(manifest, NULL, true);
	if (rc == 0 && manifest->state == MANIFEST_DAMAGED)
		rc = -EIO;
	if (rc < 0) {
		if (manifest->state == MANIFEST_DAMAGED)
			error_info_set(error, rc, "%s: cannot read the latest root: %s ('graphfs verify %s' says what "
				       "is damaged; 'graphfs repair %s --rollback' goes back to the newest intact state)",
				       manifest->path, manifest->damage_message, manifest->path, manifest->path);
		else
			error_info_set(error, rc, "%s: cannot read the latest root: %s", manifest->path, io_strerror(rc));
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

uint64_t manifest_end(struct manifest *manifest)
{
	pthread_mutex_lock(&manifest->state_mutex);
	uint64_t end = manifest->committed_size;
	pthread_mutex_unlock(&manifest->state_mutex);
	return end;
}

struct pager *manifest_pager(struct manifest *manifest)
{
	return manifest->pager;
}

int manifest_refresh_now(struct manifest *manifest, bool *changed)
{
	pthread_mutex_lock(&manifest->state_mutex);
	/* in an object store: list the newest pieces now, unless a listing found the store out of
	 * reach within the last second (an outage must not cost every open a connect timeout) */
	if (manifest_monotonic_us() - manifest->unreachable_us >= UNREACHABLE_RETRY_US)
		manifest->listed_us = 0;
	int rc = manifest_state_refresh(manifest, changed);
	if (rc == 0 && manifest->state == MANIFEST_DAMAGED)
		rc = -EIO;
	pthread_mutex_unlock(&manifest->state_mutex);
	return rc;
}

int manifest_refresh_for_read(struct manifest *manifest)
{
	int rc = manifest_refresh(manifest, NULL);
	struct root_record known;
	if (io_error_is_unreachable(rc) && manifest_latest(manifest, &known) == 0) {
		atomic_fetch_add(&manifest->stale_reads, 1);
		return 0;
	}
	return rc;
}

uint64_t manifest_stale_reads(struct manifest *manifest)
{
	return atomic_load(&manifest->stale_reads);
}

int manifest_refresh(struct manifest *manifest, bool *changed)
{
	pthread_mutex_lock(&manifest->state_mutex);
	int rc = manifest_state_refresh(manifest, changed);
	if (rc == 0 && manifest->state == MANIFEST_DAMAGED)
		rc = -EIO;
	pthread_mutex_unlock(&manifest->state_mutex);
	return rc;
}

int manifest_latest(struct manifest *manifest, struct root_record *out)
{
	pthread_mutex_lock(&manifest->state_mutex);
	int rc = manifest->state == MANIFEST_DAMAGED || !manifest->have_latest ? -EIO : 0;
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
		rc = journal_head_row_decode(scratch->data, scratch->size, out);
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
			if (key_size != 16 || journal_head_row_decode(value, value_size, &head) < 0 ||
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

int manifest_branch_list_add(const struct branch_record *branch, void *context)
{
	struct manifest_branch_list *list = context;
	struct branch_record *grown = realloc(list->branches, (list->count + 1) * sizeof *grown);
	if (!grown)
		return -ENOMEM;
	list->branches = grown;
	list->branches[list->count++] = *branch;
	return 0;
}

uint32_t manifest_format_version(const struct manifest *manifest)
{
	return pager_format_version(manifest->pager);
}
