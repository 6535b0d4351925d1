/*
 * manifest_verify — the offline check of a whole store (O(store)).
 *
 * What verify walks, in order, reporting one line per finding:
 *   1. the manifest header and both meta slots;
 *   2. every block of the manifest, first to the latest root (sizes and
 *      checksums), then that every byte after it is zero (preallocated
 *      space, docs/FORMAT.md §4): anything else is a torn tail;
 *   3. the chain of root records from the latest back to the first, the
 *      version index (every version below the latest names the last root of
 *      that version) and every commit id (its version's root names its
 *      record, FORMAT.md §16.2);
 *   4. the branches tree, and for every branch its heads and names trees,
 *      its heads against a replay of its journal (first-parent chain from
 *      the head to the first commit; for a forked branch the chain continues
 *      into the source's history) field by field, names = live heads by
 *      name, and every live table (table_verify, head fields vs the table);
 *   5. every segment file block by block, and that each is referenced by a
 *      commit or named by a sidecar (no orphans); the newest pack frame by
 *      frame (FORMAT.md §22), and that its offset is the latest root's
 *      swept-below offset or lower (the blocks of step 4 below it were read
 *      from it);
 *   6. every recovery sidecar (version, checksum, writer alive).
 *
 * The replay of a branch's journal is manifest_replay.c's; repair, which
 * publishes what the replay says, is manifest_repair.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "manifest_int.h"
#include "pack.h"

struct address_set {
	struct block_address *addresses;
	size_t count;
	size_t capacity;
};

struct verify {
	struct manifest *manifest;
	void (*report)(const char *finding, void *context);
	void *context;
	int findings;
	uint64_t *segments;           /* referenced by table versions or sidecars */
	size_t segment_count;
	size_t segment_capacity;
	struct address_set walked;    /* table versions and fragment trees whose segments were noted */
	struct address_set verified;  /* table versions already checked with table_verify */
	uint64_t horizon;             /* the latest root's */
};

static void finding(struct verify *verify, const char *format, ...) __attribute__((format(printf, 2, 3)));

static void finding(struct verify *verify, const char *format, ...)
{
	char line[768];
	va_list arguments;
	va_start(arguments, format);
	vsnprintf(line, sizeof line, format, arguments);
	va_end(arguments);
	verify->findings++;
	if (verify->report)
		verify->report(line, verify->context);
}

/* manifest_replay_compare's report of a difference: a finding. */
static void differ_finding(void *context, const char *line)
{
	finding(context, "%s", line);
}

static int segment_note(struct verify *verify, uint64_t segment)
{
	if (segment == 0)
		return 0;
	for (size_t i = 0; i < verify->segment_count; i++)
		if (verify->segments[i] == segment)
			return 0;
	if (verify->segment_count == verify->segment_capacity) {
		size_t capacity = verify->segment_capacity ? verify->segment_capacity * 2 : 16;
		uint64_t *grown = realloc(verify->segments, capacity * sizeof *grown);
		if (!grown)
			return -ENOMEM;
		verify->segments = grown;
		verify->segment_capacity = capacity;
	}
	verify->segments[verify->segment_count++] = segment;
	return 0;
}

/* True if address is in set; adds it otherwise (open addressing, grown at half full). */
static bool seen_before(struct address_set *set, struct block_address address)
{
	if (2 * (set->count + 1) > set->capacity) {
		size_t capacity = set->capacity ? set->capacity * 2 : 1024;
		struct block_address *grown = calloc(capacity, sizeof *grown);
		if (!grown)
			return false;
		for (size_t i = 0; i < set->capacity; i++) {
			struct block_address old = set->addresses[i];
			if (block_address_is_null(old))
				continue;
			size_t slot = (size_t)((old.offset * 0x9e3779b97f4a7c15ull) ^ old.segment) & (capacity - 1);
			while (!block_address_is_null(grown[slot]))
				slot = (slot + 1) & (capacity - 1);
			grown[slot] = old;
		}
		free(set->addresses);
		set->addresses = grown;
		set->capacity = capacity;
	}
	size_t slot = (size_t)((address.offset * 0x9e3779b97f4a7c15ull) ^ address.segment) & (set->capacity - 1);
	while (!block_address_is_null(set->addresses[slot])) {
		if (set->addresses[slot].segment == address.segment && set->addresses[slot].offset == address.offset)
			return true;
		slot = (slot + 1) & (set->capacity - 1);
	}
	set->addresses[slot] = address;
	set->count++;
	return false;
}

/* ---- 1. header and meta slots ----------------------------------------------------- */

static void verify_header(struct verify *verify, uint64_t latest_sequence)
{
	struct manifest *manifest = verify->manifest;
	uint8_t *bytes = malloc(MANIFEST_FIRST_BLOCK);
	if (!bytes) {
		finding(verify, "manifest: out of memory reading the header");
		return;
	}
	if (io_pread(&manifest->file, bytes, MANIFEST_FIRST_BLOCK, 0) < 0) {
		finding(verify, "manifest: the header and meta slots cannot be read");
		free(bytes);
		return;
	}
	bool intact = buf_load_u64(bytes + 48) == codec_hash(bytes, 48);
	uint32_t granule = buf_load_u32(bytes + MANIFEST_GRANULE_OFFSET);   /* FORMAT.md §2 */
	intact = intact && (granule == 0 || granule == MANIFEST_GRANULE);
	for (size_t i = MANIFEST_GRANULE_OFFSET + 4; i < FILE_HEADER_SIZE && intact; i++)
		intact = bytes[i] == 0;
	struct file_header header;
	if (!intact || codec_file_header_decode(bytes, &header) < 0 || header.kind != FILE_KIND_MANIFEST)
		finding(verify, "manifest: the file header (offset 0) is damaged");
	struct meta_slot slots[2];
	struct io_file marker = { -1, IO_MANIFEST, NULL };
	bool snapshot = !io_file_is_remote(&manifest->file) &&
			io_file_open(manifest->directory, MANIFEST_SNAPSHOT_MARKER, O_RDONLY, IO_MANIFEST, &marker) == 0;
	io_file_close(&marker);
	for (int i = 0; i < 2; i++)
		manifest_meta_decode(bytes + MANIFEST_META_OFFSET + (size_t)i * MANIFEST_META_SLOT_SIZE, &slots[i]);
	for (int i = 0; i < 2; i++) {
		struct meta_slot slot = slots[i];
		const struct meta_slot *other = &slots[1 - i];
		uint64_t offset = MANIFEST_META_OFFSET + (uint64_t)i * MANIFEST_META_SLOT_SIZE;
		/* slot i holds a root whose sequence is i modulo 2, or (a snapshot's pair, FORMAT.md §3)
		 * the very root the other slot names */
		bool paired = (other->valid && other->sequence == slot.sequence && other->root_offset == slot.root_offset) ||
			      (!other->valid && snapshot);
		if (slot.empty)
			continue;
		if (!slot.valid) {
			finding(verify, "manifest: meta slot %d (offset %llu) is damaged", i,
				(unsigned long long)offset);
			continue;
		}
		struct root_record root;
		if (manifest_root_read(manifest->pager, (struct block_address){ 0, slot.root_offset }, &root) < 0 ||
		    root.sequence != slot.sequence || root.version != slot.version ||
		    slot.sequence > latest_sequence || (slot.sequence % 2 != (uint64_t)i && !paired))
			finding(verify, "manifest: meta slot %d (offset %llu) names root sequence %llu at offset %llu, which does not match",
				i, (unsigned long long)offset, (unsigned long long)slot.sequence,
				(unsigned long long)slot.root_offset);
	}
	free(bytes);
}

/* ---- 2. every block ---------------------------------------------------------------- */

/* Reports bytes after the latest root that are not zero: a torn tail right after it
 * (recovery truncates it), or torn bytes further on that publishes overwrite. */
static void verify_tail(struct verify *verify, uint64_t committed_size, uint64_t file_size)
{
	enum { PIECE = 64 * 1024 };
	uint8_t *piece = malloc(PIECE);
	if (!piece) {
		finding(verify, "manifest: out of memory reading the tail");
		return;
	}
	uint64_t first = file_size, last = 0;
	for (uint64_t offset = committed_size; offset < file_size; offset += PIECE) {
		size_t length = file_size - offset < PIECE ? (size_t)(file_size - offset) : PIECE;
		if (io_pread(&verify->manifest->file, piece, length, offset) < 0) {
			finding(verify, "manifest: cannot read the tail at offset %llu", (unsigned long long)offset);
			break;
		}
		for (size_t i = 0; i < length; i++) {
			if (piece[i] == 0)
				continue;
			if (first == file_size)
				first = offset + i;
			last = offset + i;
		}
	}
	free(piece);
	if (first == file_size)
		return;
	if (first == committed_size)
		finding(verify, "manifest: torn tail of %llu bytes at offset %llu (recovery truncates it)",
			(unsigned long long)(file_size - committed_size), (unsigned long long)committed_size);
	else
		finding(verify, "manifest: %llu bytes of the preallocated zeros after offset %llu are torn "
			"(offsets %llu..%llu; publishes overwrite them)",
			(unsigned long long)(file_size - committed_size), (unsigned long long)committed_size,
			(unsigned long long)first, (unsigned long long)last);
}

/* Walks the blocks from start (the first block, or where gc's sweep ended:
 * below it are holes and only what retained states reach, which the later
 * steps read) to the latest root. */
static void verify_blocks(struct verify *verify, uint64_t start, uint64_t committed_size)
{
	struct manifest *manifest = verify->manifest;
	uint64_t file_size;
	if (io_size(&manifest->file, &file_size) < 0) {
		finding(verify, "manifest: cannot stat the file");
		return;
	}
	if (committed_size > file_size)
		committed_size = file_size;
	struct buf block, raw;
	buf_init(&block);
	buf_init(&raw);
	uint64_t offset = start > MANIFEST_FIRST_BLOCK ? start : MANIFEST_FIRST_BLOCK;
	while (offset < committed_size) {
		uint8_t header_bytes[BLOCK_HEADER_SIZE];
		struct block_header header;
		bool have_bytes = offset + BLOCK_HEADER_SIZE <= committed_size &&
				  io_pread(&manifest->file, header_bytes, sizeof header_bytes, offset) == 0;
		bool readable = have_bytes && codec_decode_header(header_bytes, &header) == 0 &&
				offset + BLOCK_HEADER_SIZE + header.stored_size <= committed_size;
		uint64_t next = manifest_gap_end(manifest, offset);
		if (!readable && have_bytes && next > offset && next <= committed_size &&
		    !memcmp(header_bytes, (const uint8_t[BLOCK_HEADER_SIZE]){ 0 }, BLOCK_HEADER_SIZE)) {
			offset = next;   /* an object store's granule gap after a tail (FORMAT.md §23) */
			continue;
		}
		if (!readable) {
			finding(verify, "manifest: damaged block header at offset %llu; the %llu bytes after it cannot be walked",
				(unsigned long long)offset, (unsigned long long)(file_size - offset));
			break;
		}
		size_t size = BLOCK_HEADER_SIZE + (size_t)header.stored_size;
		buf_reset(&block);
		buf_reset(&raw);
		if (buf_reserve(&block, size) < 0) {
			finding(verify, "manifest: out of memory at offset %llu", (unsigned long long)offset);
			break;
		}
		if (io_pread(&manifest->file, block.data, size, offset) < 0 ||
		    codec_decode(block.data, size, 0, &raw) < 0)
			finding(verify, "manifest: block at offset %llu (type %d, %zu bytes) fails its checksum",
				(unsigned long long)offset, (int)header.type, size);
		offset += size;
	}
	buf_free(&block);
	buf_free(&raw);
	if (offset == committed_size)
		verify_tail(verify, committed_size, file_size);
}

/* ---- 3. roots and indexes ---------------------------------------------------------- */

struct root_chain {
	struct block_address *last_root_of;  /* [version]: the last root of each version below latest */
	uint64_t latest_version;
	struct block_address *commits;       /* the record of every commit, newest first */
	uint64_t *commit_versions;
	size_t commit_count;
};

static void verify_roots(struct verify *verify, const struct root_record *latest, struct root_chain *chain)
{
	struct manifest *manifest = verify->manifest;
	chain->latest_version = latest->version;
	chain->last_root_of = calloc(latest->version + 1, sizeof *chain->last_root_of);
	chain->commits = calloc(latest->version + 1, sizeof *chain->commits);
	chain->commit_versions = calloc(latest->version + 1, sizeof *chain->commit_versions);
	if (!chain->last_root_of || !chain->commits || !chain->commit_versions) {
		finding(verify, "manifest: out of memory walking %llu roots", (unsigned long long)latest->sequence);
		return;
	}
	struct root_record root = *latest;
	for (;;) {
		if (root.version < latest->version && block_address_is_null(chain->last_root_of[root.version]))
			chain->last_root_of[root.version] = root.self;
		/* gc keeps the chain down to the first root at or below its horizon (manifest_gc.c) */
		if (latest->horizon && root.version <= latest->horizon)
			break;
		if (block_address_is_null(root.previous)) {
			if (root.sequence != 1 || root.version != 0)
				finding(verify, "manifest: root chain ends at sequence %llu, version %llu (expected the first root)",
					(unsigned long long)root.sequence, (unsigned long long)root.version);
			break;
		}
		struct root_record previous;
		if (manifest_root_read(manifest->pager, root.previous, &previous) < 0) {
			finding(verify, "manifest: root record at offset %llu (previous of sequence %llu) is damaged",
				(unsigned long long)root.previous.offset, (unsigned long long)root.sequence);
			break;
		}
		bool commit_root = root.version == previous.version + 1;
		bool same_commit = root.commit.segment == previous.commit.segment &&
				   root.commit.offset == previous.commit.offset;
		if (previous.sequence + 1 != root.sequence || (!commit_root && root.version != previous.version) ||
		    commit_root == same_commit || previous.self.offset >= root.self.offset) {
			finding(verify, "manifest: root at offset %llu (sequence %llu, version %llu) does not follow root at offset %llu (sequence %llu, version %llu)",
				(unsigned long long)root.self.offset, (unsigned long long)root.sequence,
				(unsigned long long)root.version, (unsigned long long)previous.self.offset,
				(unsigned long long)previous.sequence, (unsigned long long)previous.version);
			break;
		}
		if (commit_root && chain->commit_count <= latest->version) {
			chain->commits[chain->commit_count] = root.commit;
			chain->commit_versions[chain->commit_count++] = root.version;
		}
		root = previous;
	}
}

struct index_check {
	struct verify *verify;
	struct root_chain *chain;
	uint64_t next_version;
	uint64_t horizon;
	struct manifest_version_entry *entries;   /* [version]: what the index says; root null: absent */
};

static int version_entry(uint64_t version, const struct manifest_version_entry *entry, void *context)
{
	struct index_check *check = context;
	struct block_address address = entry->root;
	if (version > check->next_version)
		finding(check->verify, "manifest: version index lacks versions %llu..%llu",
			(unsigned long long)check->next_version, (unsigned long long)version - 1);
	if (version + 1 > check->next_version)   /* a pinned version gc kept below the horizon may come first */
		check->next_version = version + 1;
	if (version >= check->chain->latest_version) {
		finding(check->verify, "manifest: version index holds version %llu, not below the latest %llu",
			(unsigned long long)version, (unsigned long long)check->chain->latest_version);
		return 0;
	}
	struct block_address expected = check->chain->last_root_of[version];
	if (!block_address_is_null(expected) &&
	    (expected.segment != address.segment || expected.offset != address.offset))
		finding(check->verify, "manifest: version index entry %llu names offset %llu, but the last root of that version is at offset %llu",
			(unsigned long long)version, (unsigned long long)address.offset,
			(unsigned long long)expected.offset);
	if (check->entries)
		check->entries[version] = *entry;
	return 0;
}

/* Notes the segments the fragments of one table version live in (FORMAT.md §12). */
static void note_table_segments(struct verify *verify, const struct head_row *head, const char *commit)
{
	struct manifest *manifest = verify->manifest;
	/* a dropped table's version is kept only while a version that has it is (gc) */
	if (head->state != HEAD_LIVE || block_address_is_null(head->table) || seen_before(&verify->walked, head->table))
		return;
	struct table_info info;
	if (table_info_read(manifest->pager, head->table, &info) < 0) {
		finding(verify, "table %s: version record at offset %llu (commit %s) is damaged", head->name,
			(unsigned long long)head->table.offset, commit);
		return;
	}
	if (block_address_is_null(info.fragments) || seen_before(&verify->walked, info.fragments))
		return;
	struct btree *fragments = NULL;
	struct btree_iterator *iterator = NULL;
	int rc = btree_open(manifest->pager, info.fragments, &fragments);
	if (rc == 0)
		rc = btree_iterator_open(fragments, NULL, 0, &iterator);
	const uint8_t *key, *descriptor;
	size_t key_size, descriptor_size;
	while (rc == 0 && (rc = btree_iterator_next(iterator, &key, &key_size, &descriptor, &descriptor_size)) == 1) {
		if (descriptor_size < 36) {
			rc = -EIO;
			break;
		}
		rc = segment_note(verify, buf_load_u64(descriptor));
		if (rc == 0)
			rc = segment_note(verify, buf_load_u64(descriptor + 20));
	}
	if (rc < 0)
		finding(verify, "table %s: the fragment tree of version %llu (offset %llu) cannot be walked",
			head->name, (unsigned long long)info.table_version,
			(unsigned long long)info.fragments.offset);
	btree_iterator_free(iterator);
	btree_free(fragments);
}

/*
 * Whether a commit's table versions are kept: the last root of its version has its
 * branch at it. A branch deleted at the same version leaves a later root without
 * it, so gc keeps that commit's record (its log line) but not the tables only it
 * made: those below the sweep are not checked (they are not the store's any more).
 */
static bool commit_tables_kept(struct verify *verify, const struct root_record *latest,
			       const struct root_chain *chain, const struct commit_record *record)
{
	struct root_record root = *latest;
	if (record->version < latest->version) {
		struct block_address address = chain->last_root_of[record->version];
		if (block_address_is_null(address) || manifest_root_read(verify->manifest->pager, address, &root) < 0)
			return true;   /* no other answer: check them (the roots' own findings say why) */
	}
	struct branch_record branch;
	if (manifest_branch_find(verify->manifest->pager, root.branches, record->branch, &branch) < 0)
		return false;
	return ulid_compare(&branch.head_commit, &record->id) == 0;
}

static void verify_indexes(struct verify *verify, const struct root_record *latest, struct root_chain *chain)
{
	struct manifest *manifest = verify->manifest;
	char message[256];
	if (!chain->last_root_of)
		return;
	/* gc keeps no entry at or below its horizon (but those of pinned versions); version 0 (the
	 * empty store) is never read, and a gc drops it */
	struct index_check check = { verify, chain, latest->horizon + 1, latest->horizon,
				     calloc(latest->version + 1, sizeof *check.entries) };
	if (manifest_versions_verify(manifest->pager, latest->versions, version_entry, &check, message,
				     sizeof message) < 0)
		finding(verify, "manifest: %s", message);
	else if (check.next_version < latest->version)
		finding(verify, "manifest: version index lacks versions %llu..%llu",
			(unsigned long long)check.next_version, (unsigned long long)latest->version - 1);
	/* every commit: its record, its id (which carries its version), its tables' segments */
	for (size_t i = 0; i < chain->commit_count; i++) {
		struct commit_record record;
		if (manifest_commit_read(manifest, chain->commits[i], &record) < 0) {
			finding(verify, "manifest: the commit record of version %llu (offset %llu) is damaged",
				(unsigned long long)chain->commit_versions[i],
				(unsigned long long)chain->commits[i].offset);
			continue;
		}
		char text[ULID_TEXT_SIZE];
		ulid_format(&record.id, text);
		if (record.version != chain->commit_versions[i] ||
		    manifest_commit_id_version(&record.id) != record.version)
			finding(verify, "manifest: commit %s at offset %llu does not carry version %llu",
				text, (unsigned long long)chain->commits[i].offset,
				(unsigned long long)chain->commit_versions[i]);
		/* the index's summary of the commit (FORMAT.md §16.1) is the record's */
		const struct manifest_version_entry *entry =
			check.entries && record.version < latest->version ? &check.entries[record.version] : NULL;
		uint64_t parent = record.parent_count ? manifest_commit_id_version(&record.parents[0]) : 0;
		if (entry && !block_address_is_null(entry->root) &&
		    (entry->commit_time_us != record.time_us || entry->parent_version != parent))
			finding(verify, "manifest: version index entry %llu says commit time %llu, first parent %llu; its commit %s says %llu, %llu",
				(unsigned long long)record.version, (unsigned long long)entry->commit_time_us,
				(unsigned long long)entry->parent_version, text,
				(unsigned long long)record.time_us, (unsigned long long)parent);
		/* a commit whose tables gc may have returned: only what lies above the sweep */
		bool kept = commit_tables_kept(verify, latest, chain, &record);
		for (size_t c = 0; c < record.change_count; c++)
			if (kept || record.changes[c].head_after.table.offset >= latest->swept_below)
				note_table_segments(verify, &record.changes[c].head_after, text);
		journal_commit_record_free(&record);
	}
	free(check.entries);
}

/* ---- 4. branches: heads against the journal ------------------------------------------- */

/*
 * Invariant 11: every live edge's from and to are live rows of the node
 * tables its schema names — one merge of each adjacency index against the
 * node table's key tree.
 */
static void verify_edge_endpoints(struct verify *verify, const struct branch_record *branch,
				  const struct manifest_replay *replay, const struct head_row *edges,
				  const struct table_info *edge_info, const struct schema *schema)
{
	struct manifest *manifest = verify->manifest;
	for (int end = TABLE_EDGE_FROM; end <= TABLE_EDGE_TO; end++) {
		const char *node_table = end == TABLE_EDGE_FROM ? schema->from : schema->to;
		const struct head_row *nodes = NULL;
		for (size_t i = 0; i < replay->count && !nodes; i++)
			if (replay->heads[i].state == HEAD_LIVE && strcmp(replay->heads[i].name, node_table) == 0)
				nodes = &replay->heads[i];
		if (!nodes) {
			if (edges->row_count > 0)
				finding(verify, "branch %s: table %s: its node table %s does not exist", branch->name,
					edges->name, node_table);
			continue;
		}
		struct table_info node_info;
		char message[512];
		if (table_info_read(manifest->pager, nodes->table, &node_info) < 0)
			continue; /* reported as damage of that table */
		if (table_edges_check_endpoints(manifest->pager, edge_info, (enum table_edge_end)end, &node_info, message,
						sizeof message) < 0)
			finding(verify, "branch %s: table %s: %s (%s)", branch->name, edges->name, message, node_table);
	}
}

/* Every live table of a branch: table_verify and head fields against the table version. */
static void verify_tables(struct verify *verify, const struct branch_record *branch, const struct manifest_replay *replay)
{
	struct manifest *manifest = verify->manifest;
	char message[512];
	for (size_t i = 0; i < replay->count; i++) {
		const struct head_row *head = &replay->heads[i];
		if (head->state != HEAD_LIVE)
			continue;
		struct table_info info;
		if (table_info_read(manifest->pager, head->table, &info) < 0) {
			finding(verify, "branch %s: table %s: the table version record at offset %llu is damaged",
				branch->name, head->name, (unsigned long long)head->table.offset);
			continue;
		}
		if (ulid_compare(&info.stable_id, &head->stable_id) != 0 ||
		    ulid_compare(&info.incarnation, &head->incarnation) != 0 ||
		    info.table_version != head->table_version || info.row_count != head->row_count ||
		    info.byte_size != head->byte_size)
			finding(verify, "branch %s: table %s: the head disagrees with its table version record",
				branch->name, head->name);
		struct schema schema;
		schema_init(&schema);
		char hash[17];
		if (table_schema_read(manifest->pager, info.schema, &schema) < 0) {
			finding(verify, "branch %s: table %s: the schema block at offset %llu is damaged",
				branch->name, head->name, (unsigned long long)info.schema.offset);
		} else {
			schema_hash(&schema, hash);
			if (strcmp(hash, head->schema_hash) != 0 || (uint8_t)schema.kind != head->kind)
				finding(verify, "branch %s: table %s: the head's schema hash does not match its schema",
					branch->name, head->name);
		}
		if (schema.kind == SCHEMA_EDGE)
			verify_edge_endpoints(verify, branch, replay, head, &info, &schema);
		schema_free(&schema);
		if (seen_before(&verify->verified, head->table))
			continue; /* this table version was checked for another branch */
		if (table_verify(manifest->pager, &info, message, sizeof message) < 0)
			finding(verify, "branch %s: table %s (version %llu): %s", branch->name, head->name,
				(unsigned long long)info.table_version, message);
	}
}

/* Everything one branch record reaches: its trees, its head commit, its journal
 * against its heads, its tables. label names it in findings ("branch B", "tag T"). */
static void verify_state(struct verify *verify, const struct branch_record *branch, const char *label)
{
	struct manifest *manifest = verify->manifest;
	char message[512];
	if (btree_verify(manifest->pager, branch->heads, NULL, NULL, message, sizeof message) < 0)
		finding(verify, "%s: heads tree: %s", label, message);
	if (btree_verify(manifest->pager, branch->names, NULL, NULL, message, sizeof message) < 0)
		finding(verify, "%s: names tree: %s", label, message);
	if (!block_address_is_null(branch->head_record)) {
		struct commit_record record;
		if (manifest_commit_read(manifest, branch->head_record, &record) == 0) {
			if (ulid_compare(&record.id, &branch->head_commit) != 0 ||
			    record.version != branch->head_version)
				finding(verify, "%s: the record's head commit does not match its commit record", label);
			journal_commit_record_free(&record);
		} else {
			finding(verify, "%s: its head commit record cannot be read", label);
		}
	}
	struct manifest_replay replay = { 0 };
	if (manifest_replay_branch(manifest, branch, &replay, message, sizeof message) < 0) {
		finding(verify, "%s: the journal cannot be replayed: %s", label, message);
	} else {
		if (manifest_replay_compare(manifest, branch, &replay, differ_finding, verify) < 0)
			finding(verify, "%s: the heads or names tree cannot be read", label);
		verify_tables(verify, branch, &replay);
	}
	manifest_replay_free(&replay);
}

static void verify_branches(struct verify *verify, const struct root_record *latest)
{
	struct manifest *manifest = verify->manifest;
	char message[512];
	if (btree_verify(manifest->pager, latest->branches, NULL, NULL, message, sizeof message) < 0) {
		finding(verify, "manifest: branches tree: %s", message);
		return;
	}
	struct manifest_branch_list list = { 0 };
	if (manifest_branches_each(manifest, latest, manifest_branch_list_add, &list) < 0) {
		finding(verify, "manifest: a branch record is damaged");
		free(list.branches);
		return;
	}
	bool have_main = false;
	for (size_t b = 0; b < list.count; b++) {
		have_main |= strcmp(list.branches[b].name, "main") == 0;
		char label[JOURNAL_NAME_MAX + 16];
		snprintf(label, sizeof label, "branch %s", list.branches[b].name);
		verify_state(verify, &list.branches[b], label);
	}
	if (!have_main)
		finding(verify, "manifest: branch main is missing");
	free(list.branches);
}

struct tag_walk {
	struct verify *verify;
	const struct root_record *latest;
};

static int verify_tag(const struct manifest_tag *tag, void *context)
{
	struct tag_walk *walk = context;
	char label[JOURNAL_NAME_MAX + 16];
	snprintf(label, sizeof label, "tag %s", tag->name);
	if (tag->version > walk->latest->version)
		finding(walk->verify, "%s: names version %llu, after the latest version %llu", label,
			(unsigned long long)tag->version, (unsigned long long)walk->latest->version);
	verify_state(walk->verify, &tag->branch, label);
	return 0;
}

static void verify_tags(struct verify *verify, const struct root_record *latest)
{
	if (block_address_is_null(latest->tags))
		return;
	char message[512];
	if (btree_verify(verify->manifest->pager, latest->tags, NULL, NULL, message, sizeof message) < 0) {
		finding(verify, "manifest: tags tree: %s", message);
		return;
	}
	struct tag_walk walk = { verify, latest };
	if (manifest_tags_each(verify->manifest, latest, verify_tag, &walk) < 0)
		finding(verify, "manifest: a tag record is damaged");
}

/* ---- 5. segments and 6. sidecars ---------------------------------------------------- */

static void verify_sidecars(struct verify *verify)
{
	struct manifest *manifest = verify->manifest;
	struct manifest_name_list list = { 0 };
	int rc = io_directory_list(manifest->directory, "recovery", manifest_name_list_collect, &list);
	if (rc < 0 && rc != -ENOENT)
		finding(verify, "recovery/: cannot be listed");
	for (size_t i = 0; i < list.count; i++) {
		char path[300];
		snprintf(path, sizeof path, "recovery/%s", list.names[i]);
		struct io_file file;
		if (io_file_open(manifest->directory, path, O_RDONLY, IO_MANIFEST, &file) < 0)
			continue;
		bool alive = io_lock(&file, true, false) < 0;
		if (!alive)
			io_unlock(&file);
		size_t length = strlen(list.names[i]);
		if (length > 6 && strcmp(list.names[i] + length - 6, ".lease") == 0) {
			io_file_close(&file);   /* an object store's lock of a sidecar (FORMAT.md §23), not a sidecar */
			continue;
		}
		if (length > 4 && strcmp(list.names[i] + length - 4, ".tmp") == 0) {
			if (!alive)   /* a killed writer's leftover, which the next read-write open removes: no damage */
				io_log(LOG_NOTICE, "%s/%s: note: a temporary sidecar of a writer that is gone (the next "
				       "read-write open removes it)", manifest->path, path);
			io_file_close(&file);
			continue;
		}
		uint64_t size = 0;
		uint8_t *bytes = NULL;
		struct manifest_sidecar sidecar = { 0 };
		rc = io_size(&file, &size);
		if (rc == 0 && size <= (1u << 20) && (bytes = malloc(size ? size : 1)) &&
		    io_pread(&file, bytes, (size_t)size, 0) == 0)
			rc = manifest_sidecar_decode(bytes, (size_t)size, &sidecar);
		else
			rc = -EIO;
		if (rc == -EPROTO)
			finding(verify, "%s: sidecar version %u is not %d (written by another graphfs version)", path,
				sidecar.version, MANIFEST_SIDECAR_VERSION);
		else if (rc < 0)
			finding(verify, "%s: damaged recovery sidecar", path);
		else if (!alive)   /* a killed writer: recovery's work, not damage (a note, not a finding) */
			io_log(LOG_NOTICE, "%s/%s: note: the writer (pid %u) is gone before its commit; the next "
			       "read-write open rolls its segments back or forward", manifest->path, path, sidecar.writer_pid);
		for (uint32_t s = 0; rc == 0 && s < sidecar.segment_count; s++)
			segment_note(verify, sidecar.segments[s]);
		manifest_sidecar_free(&sidecar);
		free(bytes);
		io_file_close(&file);
	}
	free(list.names);
}

static void verify_segments(struct verify *verify)
{
	struct manifest *manifest = verify->manifest;
	struct manifest_name_list list = { 0 };
	int rc = io_directory_list(manifest->directory, "segments", manifest_name_list_collect, &list);
	if (rc < 0 && rc != -ENOENT)
		finding(verify, "segments/: cannot be listed");
	struct buf block, raw;
	buf_init(&block);
	buf_init(&raw);
	for (size_t i = 0; i < list.count; i++) {
		char path[300];
		snprintf(path, sizeof path, "segments/%s", list.names[i]);
		char *end = NULL;
		uint64_t id = strtoull(list.names[i], &end, 16);
		if (strlen(list.names[i]) != 16 || !end || *end || id == 0) {
			finding(verify, "%s: not a segment file name", path);
			continue;
		}
		bool referenced = false;
		for (size_t s = 0; s < verify->segment_count && !referenced; s++)
			referenced = verify->segments[s] == id;
		/* below a horizon a segment nothing retained names is garbage the next gc removes */
		if (!referenced && verify->horizon == 0)
			finding(verify, "%s: orphan segment (no commit references it and no sidecar names it)", path);
		struct io_file file;
		uint64_t size;
		uint8_t header_bytes[FILE_HEADER_SIZE];
		struct file_header header;
		if (io_file_open(manifest->directory, path, O_RDONLY, IO_DATA, &file) < 0) {
			finding(verify, "%s: cannot be opened", path);
			continue;
		}
		if (io_size(&file, &size) < 0 || size < FILE_HEADER_SIZE ||
		    io_pread(&file, header_bytes, sizeof header_bytes, 0) < 0 ||
		    codec_file_header_decode(header_bytes, &header) < 0 || header.kind != FILE_KIND_SEGMENT ||
		    header.segment_id != id || ulid_compare(&header.store_id, &manifest->store_id) != 0) {
			finding(verify, "%s: damaged file header", path);
			io_file_close(&file);
			continue;
		}
		uint64_t offset = FILE_HEADER_SIZE;
		while (offset < size) {
			uint8_t bytes[BLOCK_HEADER_SIZE];
			struct block_header block_header;
			if (offset + BLOCK_HEADER_SIZE > size || io_pread(&file, bytes, sizeof bytes, offset) < 0 ||
			    codec_decode_header(bytes, &block_header) < 0 ||
			    offset + BLOCK_HEADER_SIZE + block_header.stored_size > size) {
				finding(verify, "%s: damaged or truncated block at offset %llu", path,
					(unsigned long long)offset);
				break;
			}
			size_t block_size = BLOCK_HEADER_SIZE + (size_t)block_header.stored_size;
			buf_reset(&block);
			buf_reset(&raw);
			if (buf_reserve(&block, block_size) < 0)
				break;
			if (io_pread(&file, block.data, block_size, offset) < 0 ||
			    codec_decode(block.data, block_size, 0, &raw) < 0)
				finding(verify, "%s: block at offset %llu fails its checksum", path,
					(unsigned long long)offset);
			offset += block_size;
		}
		io_file_close(&file);
	}
	buf_free(&block);
	buf_free(&raw);
	free(list.names);
}

static void pack_problem(uint64_t offset, const char *message, void *context)
{
	finding(context, "%s", message);
}

/* Step 5's pack: readable, consistent, and not beyond the root that named it. */
static void verify_pack(struct verify *verify, uint64_t swept_below)
{
	uint64_t newest;
	int rc = pack_newest(verify->manifest->directory, &newest);
	if (rc == -ENOENT)
		return;
	if (rc < 0) {
		finding(verify, "packs: cannot be listed: %s", io_strerror(rc));
		return;
	}
	rc = pager_pack_refresh(verify->manifest->pager);
	uint64_t in_use = pager_pack_covered_below(verify->manifest->pager, NULL);
	if (rc < 0 || in_use != newest) {
		finding(verify, "packs/%016llx: cannot be opened (%s): the retained blocks below offset %llu cannot be read",
			(unsigned long long)newest, strerror(rc < 0 ? -rc : EIO), (unsigned long long)newest);
		return;
	}
	if (newest > swept_below)
		finding(verify, "packs/%016llx: covers the manifest beyond the latest root's swept-below offset %llu",
			(unsigned long long)newest, (unsigned long long)swept_below);
	rc = pager_pack_verify(verify->manifest->pager, pack_problem, verify);
	if (rc < 0)
		finding(verify, "packs/%016llx: cannot be checked: %s", (unsigned long long)newest, io_strerror(rc));
}

int manifest_verify(struct manifest *manifest, void (*report)(const char *finding, void *context),
		    void *context, manifest_progress_fn progress, void *progress_context)
{
	struct verify verify = { .manifest = manifest, .report = report, .context = context };
	/* progress counts passes: blocks, roots and indexes, branches, tags, files */
	const uint64_t passes = 5;
#define PASS_DONE(n) do { if (progress) progress((n), passes, progress_context); } while (0)
	struct root_record latest;
	uint64_t committed_size;
	pthread_mutex_lock(&manifest->state_mutex);
	int rc = manifest_state_refresh(manifest, NULL);
	bool have_latest = manifest->have_latest;
	latest = manifest->latest;
	committed_size = manifest->committed_size;
	uint64_t file_size;
	if (rc == 0 && have_latest && io_size(&manifest->file, &file_size) == 0) {
		/* complete roots written after the announced one (a publish waiting for its
		 * sync, or a writer that died before its meta slot) are blocks, not a torn tail */
		bool have = true, torn;
		struct root_record written = latest;
		uint64_t end = committed_size;
		if (manifest_scan_tail(manifest, end, file_size, &written, &have, &end, &torn) == 0) {
			latest = written;
			committed_size = end;
		}
	}
	if (manifest->state == MANIFEST_DAMAGED)
		finding(&verify, "manifest: %s", manifest->damage_message);
	pthread_mutex_unlock(&manifest->state_mutex);
	if (rc < 0 && !have_latest)
		finding(&verify, "manifest: no readable root record");
	verify_header(&verify, have_latest ? latest.sequence : 0);
	verify_blocks(&verify, have_latest ? latest.swept_below : 0, committed_size);
	PASS_DONE(1);
	if (have_latest) {
		verify.horizon = latest.horizon;
		struct root_chain chain = { 0 };
		verify_roots(&verify, &latest, &chain);
		verify_indexes(&verify, &latest, &chain);
		free(chain.last_root_of);
		free(chain.commits);
		free(chain.commit_versions);
		PASS_DONE(2);
		verify_branches(&verify, &latest);
		PASS_DONE(3);
		verify_tags(&verify, &latest);
	}
	PASS_DONE(4);
	verify_sidecars(&verify);
	verify_segments(&verify);
	verify_pack(&verify, have_latest ? latest.swept_below : 0);
	PASS_DONE(5);
#undef PASS_DONE
	free(verify.segments);
	free(verify.walked.addresses);
	free(verify.verified.addresses);
	return verify.findings;
}
