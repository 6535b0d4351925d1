/*
 * store_merge_int — the merge's structures, shared by store_merge.c (the
 * three-way merge and its publish) and store_merge_preview.c (the mount's
 * previews). Layer: store; included only by those two files.
 */
#ifndef GRAPHFS_STORE_MERGE_INT_H
#define GRAPHFS_STORE_MERGE_INT_H

#include "store_int.h"

enum merge_state { MERGE_PLANNED = 1, MERGE_ROWS_MERGED, MERGE_CHECKED, MERGE_PUBLISHED, MERGE_REFUSED,
		   MERGE_PREVIEWED };

enum table_action {
	ACTION_NONE = 0,   /* absent from the result as it is from ours */
	ACTION_KEEP,       /* ours as it is */
	ACTION_ROWS,       /* ours plus the apply list (a merge write) */
	ACTION_TAKE,       /* theirs' version whole, as ours' table (restore) */
	ACTION_ADOPT,      /* theirs' table, new to ours, with its identity */
	ACTION_DROP,       /* dropped from ours */
};

/* One row changed on one side since the base; offsets into the list's arena. */
struct row_change {
	size_t id, id_size;
	size_t before, before_size;
	size_t after, after_size;
	bool has_before, has_after;
};

struct change_list {
	bool computed;
	struct row_change *items;
	size_t count, capacity;
	struct buf arena;
};

/* A line to stage into ours' table (an upsert, or a delete of id). */
struct apply_entry {
	size_t id, id_size;
	size_t line, line_size;   /* the row, or the delete line */
	bool removed;
};

struct merge_table {
	const struct head_row *base, *ours, *theirs;
	char name[JOURNAL_NAME_MAX + 1];   /* in the result */
	enum table_action action;
	bool schema_from_theirs;           /* ROWS: theirs changed the schema, ours did not */
	struct change_list ours_changes, theirs_changes;
	struct apply_entry *apply;
	size_t apply_count, apply_capacity;
	struct buf apply_arena;
};

struct merge {
	enum merge_state state;
	struct store *store;
	const struct store_merge_options *options;
	struct store_snapshot *base, *ours, *theirs;   /* base NULL: the empty state */
	struct store_head_list base_heads, ours_heads, theirs_heads;
	struct merge_table *tables;
	size_t count;
	uint64_t conflicts;          /* unresolved */
	uint64_t resolved;           /* resolved by the strategy */
	struct buf line;
	store_merge_conflict_fn conflict;
	void *conflict_context;
	struct error_info *error;
};

/*
 * Computes the merge of source into dest into merge (initialised with store,
 * options, conflict callback and error): snapshots, base, outcome, every
 * table's action and apply list, orphan checks. 0 or -errno with error set.
 */
int store_merge_compute(struct merge *merge, const char *source, const char *dest, struct store_merge_result *out);
/* Releases what a merge holds (not the struct). */
void store_merge_state_free(struct merge *merge);
/* Checks source and dest (NULL: main) name a merge. 0 or -EINVAL with error set. */
int store_merge_arguments(const char *source, const char **dest, struct error_info *error);

#endif
