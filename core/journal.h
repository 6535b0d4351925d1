/*
 * journal — the immutable history records: commit records and the head rows
 * they carry (layer: btree/journal; depends on buf, codec, ulid).
 *
 * A commit record (block type BLOCK_COMMIT, zstd) is written once per commit
 * and never changed. It names its version, ULID, branch, parents, time,
 * actor, message and, for every table it touched, the change: the operation,
 * the number of rows written, the previous name (renames) and the complete
 * head row after the change. Replaying a branch's commit records in order,
 * applying head_after by stable id, reproduces the branch's heads exactly —
 * `verify` and `repair` do that (invariant 7). Registrations (create),
 * renames and tombstones (drop) are identity-bearing because every change
 * carries the stable id and incarnation.
 *
 * A head row is the durable current-state row of one table on one branch
 * (docs/ARCHITECTURE.md "Concepts"). It is also the value stored in the heads tree.
 * Byte layouts: docs/FORMAT.md "Head row", "Commit record".
 */
#ifndef GRAPHFS_JOURNAL_H
#define GRAPHFS_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "codec.h"
#include "ulid.h"

#define JOURNAL_NAME_MAX 128    /* table and branch names */

enum head_state { HEAD_LIVE = 1, HEAD_TOMBSTONED = 2 };

struct head_row {
	enum head_state state;
	struct ulid stable_id;
	struct ulid incarnation;
	char name[JOURNAL_NAME_MAX + 1];         /* table_key: current (live) or last (tombstoned) name */
	uint64_t table_version;
	char owner[JOURNAL_NAME_MAX + 1];        /* table_branch: physical owner branch; "" means main */
	uint64_t row_count;                      /* 0 when tombstoned (rendered null) */
	uint64_t byte_size;                      /* rendered size of the table file */
	char schema_hash[17];
	uint8_t kind;                            /* enum schema_kind */
	struct ulid commit;                      /* head_graph_commit_id: the commit that set this row */
	uint64_t commit_time_us;                 /* that commit's time, for st_mtime */
	struct block_address table;              /* the table version record (BLOCK_TABLE) */
};

/* Appends / reads the fixed layout of a head row. decode returns 0 or -EIO (also for an unknown state). */
int journal_head_row_encode(const struct head_row *head, struct buf *out);
int journal_head_row_decode(const void *bytes, size_t size, struct head_row *out);
/* Renders the head file JSON (docs/MOUNT.md "The tree" field names, one object, "\n" at the end). */
int journal_head_row_render_json(const struct head_row *head, struct buf *out);

enum change_op {
	CHANGE_CREATE = 1,
	CHANGE_OVERWRITE = 2,
	CHANGE_MERGE = 3,
	CHANGE_DROP = 4,
	CHANGE_RENAME = 5,
	CHANGE_SCHEMA = 6,
	CHANGE_OPTIMIZE = 7,   /* the same rows rewritten into fresh fragments (graphfs optimize) */
};

const char *journal_change_op_name(enum change_op op);  /* "create", "overwrite", ... */

struct change {
	enum change_op op;
	uint64_t rows;                           /* rows written (deletes included) */
	char previous_name[JOURNAL_NAME_MAX + 1];/* renames: the old name; "" otherwise */
	struct head_row head_after;              /* the head row this change leaves */
};

#define JOURNAL_MAX_PARENTS 2

struct commit_record {
	uint64_t version;
	struct ulid id;
	char branch[JOURNAL_NAME_MAX + 1];
	size_t parent_count;                     /* 0 for the first commit of the store's main */
	struct ulid parents[JOURNAL_MAX_PARENTS];
	struct block_address parent_records[JOURNAL_MAX_PARENTS]; /* where the parents' records are */
	uint64_t time_us;                        /* microseconds since the epoch */
	char *actor;                             /* owned, NUL-terminated */
	char *message;                           /* owned, NUL-terminated */
	size_t change_count;
	struct change *changes;                  /* owned */
	uint64_t based_on;                       /* a based write's commit: the version its writer read
						    (docs/FORMAT.md §9, extension 1; format 7); 0: none */
	bool reclaimed;                          /* not encoded: a commit gc reclaimed, of which only the
						    version and id are known (its child names it) */
};

void journal_commit_record_init(struct commit_record *record);
void journal_commit_record_free(struct commit_record *record);
/* Appends the record's payload encoding (not yet a block) in the layout of the store
 * format format_version to out: from format 7 on the extensions follow the changes (a
 * format-6 record has none: based_on is left out). 0 or -errno; out unchanged on error. */
int journal_commit_record_encode(const struct commit_record *record, uint32_t format_version, struct buf *out);
/* Decodes a payload written in store format format_version into record (initialised by
 * the callee). 0, -EIO (damaged), -ENOMEM; record empty on error. */
int journal_commit_record_decode(const void *bytes, size_t size, uint32_t format_version,
				 struct commit_record *record);
/*
 * Renders one `log` line (docs/MOUNT.md "The tree"): {"version","commit","parents","branch",
 * "time" (RFC 3339 UTC with µs),"actor","message",["based_on",]"changes":[{"table","op","rows"}]}
 * followed by "\n".
 */
int journal_commit_record_render_json(const struct commit_record *record, struct buf *out);   /* reclaimed: {"version","commit","reclaimed":true} */

/* RFC 3339 UTC with microseconds, e.g. 2026-11-30T12:00:00.000000Z; out must hold 32 bytes. */
void journal_format_time(uint64_t time_us, char out[32]);
/* Reads an RFC 3339 time ("2026-12-01T08:00:00Z"; fractions up to nanoseconds,
 * kept to the microsecond; "Z" or a "+hh:mm"/"-hh:mm" offset) or a date
 * ("2026-12-01": its 00:00:00Z) into µs since the epoch. 0 or -EINVAL. */
int journal_parse_time(const char *text, uint64_t *time_us);

#endif
