/*
 * store_txn_int — the transaction's structures, shared by store_txn.c (the
 * writers and the commit) and store_edges.c (endpoint checks, referential
 * integrity, detach). Layer: store; included only by those two files.
 */
#ifndef GRAPHFS_STORE_TXN_INT_H
#define GRAPHFS_STORE_TXN_INT_H

#include "store_int.h"

#define ENDPOINT_FROM 0
#define ENDPOINT_TO 1
#define PENDING_MEMORY (4u << 20)

#define ENDPOINT_CACHE (32u << 20) /* bytes of decoded key-tree nodes per node table checked */

struct endpoint_table {
	char name[JOURNAL_NAME_MAX + 1];
	bool in_snapshot;               /* info is the node table's version in the pinned snapshot */
	struct table_info info;
	struct table_finder *finder;    /* over info's key tree, opened by the first check; NULL if !in_snapshot */
	bool shares_finder;             /* "to" names the same table as "from" and uses its finder */
};

/*
 * The states of a writer:
 *   WRITING   lines are accepted (store_writer_write)
 *   FINISHED  store_writer_finish: the input is complete; no more lines
 *   SEALED    a commit sealed its stage (durable rows, no more rows); a refused
 *             commit leaves it so: the writer is discarded and written again
 *   FAILED    a line, a check or the stage failed (failure says why): sticky,
 *             every later call returns failure, a commit including it is refused
 * WRITING -> FINISHED -> SEALED; WRITING -> SEALED; WRITING | FINISHED | SEALED -> FAILED.
 */
enum store_writer_state { WRITER_WRITING, WRITER_FINISHED, WRITER_SEALED, WRITER_FAILED };

struct store_writer {
	struct store_txn *txn;
	pthread_mutex_t lock;
	char table[JOURNAL_NAME_MAX + 1];
	char path[256];
	enum store_write_mode mode;
	uint64_t based_on_version;
	struct ulid based_on_incarnation;
	char expected_schema_hash[17];
	bool optimize;                  /* an overwrite with the table's own rows (store_optimize) */
	bool creates;                   /* the table does not exist: its schema is inferred */
	bool refines;                   /* the table exists, empty and undeclared: its schema is inferred too */
	struct schema schema;           /* validation schema when !creates */
	struct schema_inference *inference;
	struct schema inferred;         /* built at commit when creates */
	struct table_stage *stage;
	struct schema_row row;          /* reused for every line */
	struct buf partial;             /* the incomplete line carried across writes */
	bool partial_staged;            /* the last line was a complete JSON object, staged before its "\n" */
	_Atomic uint64_t lines;         /* complete lines processed */
	uint64_t staged_bytes;          /* this writer's share of txn.staged_bytes */
	enum store_writer_state state;  /* store_writer_enter, checked by store_writer_state_check */
	struct error_info failure;      /* WRITER_FAILED: why (its code, message and line) */
	bool is_edge;
	struct endpoint_table endpoints[2];
	/*
	 * Deferred endpoints (u8 end, u64 line, u32 size, id each): the newest in
	 * pending; once that holds PENDING_MEMORY bytes, it goes as one chunk to
	 * an unnamed scratch file, so a large staged edge file keeps no more.
	 */
	struct buf pending;
	struct io_file pending_file;
	bool pending_file_open;
	struct buf pending_chunks;      /* the byte size of each chunk in pending_file, u32 each, in order */
	uint64_t pending_spilled;       /* bytes in pending_file */
	/* Node tables: the snapshot's edge tables naming this one, loaded by the first delete line. */
	struct reference_table *references;
	size_t reference_count;
	bool references_loaded;
	/*
	 * The edges this writer's detach deletes take with them, staged as
	 * deletes into their tables' writers at commit (a discarded writer takes
	 * its list along): u16 size + edge table name, u16 size + edge id, each.
	 */
	struct buf detached;
	struct parse_helper *parse_helper;  /* NULL until a large overwrite write (store_parse.c) */
	/* @patch lines: the table's head in the pinned snapshot (when in_snapshot), and its version
	 * record, read at the first patch */
	bool in_snapshot;
	struct head_row snapshot_head;
	bool patch_base_loaded;
	struct table_info patch_base;
};

struct txn_op {
	enum manifest_op_kind kind;
	char name[JOURNAL_NAME_MAX + 1];
	char new_name[JOURNAL_NAME_MAX + 1];
	struct store_writer *writer;    /* MANIFEST_WRITE */
	struct schema schema;           /* MANIFEST_SCHEMA */
	struct block_address source;    /* MANIFEST_RESTORE: the table version record taken */
	bool adopt_identity;            /* MANIFEST_RESTORE: keeps its stable id (a merge) */
};

struct store_txn {
	struct store *store;
	pthread_mutex_t lock;
	char branch[JOURNAL_NAME_MAX + 1];
	struct store_snapshot *snapshot;
	bool defer_endpoints;
	struct txn_op **ops;
	size_t op_count;
	size_t op_capacity;
	struct manifest_intent *intent;
	uint64_t staged_bytes;
	char actor[STORE_ACTOR_MAX];   /* "": the store's actor */
	struct manifest_condition condition;   /* the next commit's compare-and-swap (cleared by it) */
	bool trust_endpoints;           /* a merge: its rows' references were checked by the merge */
	struct ulid merge_parent;       /* non-zero: the next commit is a merge with this second parent */
	struct block_address merge_parent_record;
	struct store_commit_origin origin;   /* the next commit's id and time (zero: new, now) */
	uint64_t based_on;                   /* the next commit is a based write that read this version (0: not) */
};

/* store_txn.c */
/* store_txn_writer with txn.lock held. */
int store_txn_writer_create(struct store_txn *txn, const char *table, enum store_write_mode mode,
		      uint64_t based_on_version, const char *path, struct store_writer **out,
		      struct error_info *error);
/* The writer of table in txn, or NULL. txn.lock held. */
struct store_writer *store_txn_find_writer(struct store_txn *txn, const char *table);
/* Records the first error of a writer (sticky), copies it to error (may be NULL), returns code. */
/* Moves writer to state next (a debug build checks the transition). */
void store_writer_enter(struct store_writer *writer, enum store_writer_state next);
int store_writer_fail(struct store_writer *writer, struct error_info *error, int code, uint64_t line,
		const char *format, ...) __attribute__((format(printf, 5, 6)));

/* store_parse.c — a second thread parsing the lines of a large write */
struct parse_result {
	struct schema_row row;      /* rc 0: the parsed row */
	const char *line;           /* the line in the job's bytes (without its "\n") */
	size_t size;
	int rc;                     /* 0, -EFBIG (longer than row_max), -ENODATA (empty), or the parse's error */
	struct error_info error;    /* the parse's message */
};
/* A write with at least this many bytes of complete lines is parsed by two threads. */
#define STORE_PARSE_PARALLEL_MIN (64u << 10)
struct parse_helper;
int store_parse_helper_open(struct parse_helper **out);
/* Parses the complete lines bytes[0..size) (each ending with "\n") against schema
 * (allow_delete: a merge's delete lines too), on the helper's thread. */
void store_parse_helper_start(struct parse_helper *helper, const struct schema *schema, bool allow_delete,
			const char *bytes, size_t size, size_t row_max);
/* Waits for the job: its results in line order, *count of them; the last may have
 * failed (rc < 0: nothing after it was parsed). Fewer than the job's lines (out of
 * memory) leaves the rest to the caller. Valid until the next start. */
const struct parse_result *store_parse_helper_finish(struct parse_helper *helper, size_t *count);
void store_parse_helper_free(struct parse_helper *helper);

/* store_edges.c — each called with txn.lock held */
int store_edges_endpoint_open(struct store_txn *txn, const char *name, const struct endpoint_table *same,
			struct endpoint_table *out);
/* Checks one endpoint now: 0, or the writer's sticky failure (a dangling edge is -EINVAL). */
int store_edges_endpoint_check(struct store_writer *writer, int end, const void *id, size_t size, uint64_t line,
		   struct error_info *error);
/* Defers the check of one endpoint to the commit. 0 or -errno (nothing deferred). */
int store_edges_pending_add(struct store_writer *writer, int end, uint64_t line, const struct buf *id);
/* Checks every deferred endpoint; reports the first dangling one in input order. 0 or -errno. */
int store_edges_pending_check(struct store_writer *writer, struct error_info *error);

/*
 * Referential integrity at write time (the commit checks again, against
 * everything it publishes): a merge's delete of node writer->row.id fails
 * the line if a live edge of the snapshot still names it and this
 * transaction does not delete or rewrite that edge. 0 or the writer's
 * sticky failure (-EINVAL naming the edge).
 */
int store_edges_references_check(struct store_writer *writer, uint64_t line, struct error_info *error);
/* {"id":…,"@delete":"detach"}: notes every edge of the snapshot naming the node, to delete at commit. */
int store_edges_detach_collect(struct store_writer *writer, uint64_t line, struct error_info *error);
void store_edges_references_free(struct store_writer *writer);

#endif
