/*
 * store_revert — `graphfs revert`: one commit that makes a branch's tables and
 * schemas exactly what they were as of an earlier version (layer: store).
 * History is kept: the commit is new, its version is the next one, and the
 * log shows what it changed. Work is O(tables): every restored table gets a
 * version record that shares the old version's trees (MANIFEST_RESTORE).
 *
 * The operations, in the order they are published:
 *   1. drop every table live now that was not live (as that incarnation) then
 *      — edge tables before node tables, so no drop leaves a dangling reference;
 *   2. rename every surviving table whose name changed: first to a temporary
 *      name, then to its old name (so swaps and cycles of names work);
 *   3. restore every table whose version differs (or that was dropped since,
 *      which comes back as a new incarnation: a dropped head never revives).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

static const struct head_row *find_incarnation(const struct store_head_list *list, const struct head_row *head)
{
	for (size_t i = 0; i < list->count; i++)
		if (ulid_compare(&list->heads[i].stable_id, &head->stable_id) == 0 &&
		    ulid_compare(&list->heads[i].incarnation, &head->incarnation) == 0)
			return &list->heads[i];
	return NULL;
}

struct op_list {
	struct manifest_op *ops;
	size_t count;
	size_t capacity;
};

static struct manifest_op *op_add(struct op_list *list, enum manifest_op_kind kind, const char *name)
{
	if (list->count == list->capacity) {
		size_t capacity = list->capacity ? list->capacity * 2 : 16;
		struct manifest_op *grown = realloc(list->ops, capacity * sizeof *grown);
		if (!grown)
			return NULL;
		list->ops = grown;
		list->capacity = capacity;
	}
	struct manifest_op *op = &list->ops[list->count++];
	memset(op, 0, sizeof *op);
	op->kind = kind;
	snprintf(op->name, sizeof op->name, "%s", name);
	return op;
}

/* Whether two table versions hold the same rows, indexes and schema (a restore
 * copies the record, so a reverted table is equal to its past, not identical). */
static bool same_content(struct store *store, const struct head_row *a, const struct head_row *b)
{
	if (ulid_compare(&a->incarnation, &b->incarnation) == 0 && a->table_version == b->table_version)
		return true;
	struct table_info left, right;
	struct pager *pager = manifest_pager(store->manifest);
	if (table_info_read(pager, a->table, &left) < 0 || table_info_read(pager, b->table, &right) < 0)
		return false;
	return block_address_equal(left.schema, right.schema) && block_address_equal(left.fragments, right.fragments) &&
	       block_address_equal(left.keys, right.keys) && block_address_equal(left.out_edges, right.out_edges) &&
	       block_address_equal(left.in_edges, right.in_edges) && left.row_count == right.row_count;
}

/* A table of list named like head (another incarnation) that already holds head's
 * content: what restoring a dropped table made, which a second revert leaves. */
static const struct head_row *restored_copy(struct store *store, const struct store_head_list *list,
					    const struct head_row *head)
{
	for (size_t i = 0; i < list->count; i++)
		if (strcmp(list->heads[i].name, head->name) == 0 &&
		    ulid_compare(&list->heads[i].incarnation, &head->incarnation) != 0 &&
		    same_content(store, &list->heads[i], head))
			return &list->heads[i];
	return NULL;
}

/* The operations that take now to then (see the top of the file). */
static int plan(struct store *store, const struct store_head_list *now, const struct store_head_list *then,
		struct op_list *ops)
{
	for (int edges = 1; edges >= 0; edges--)
		for (size_t i = 0; i < now->count; i++) {
			const struct head_row *head = &now->heads[i];
			if ((head->kind == SCHEMA_EDGE) == (edges == 1) && !find_incarnation(then, head) &&
			    !restored_copy(store, then, head) && !op_add(ops, MANIFEST_DROP, head->name))
				return -ENOMEM;
		}
	size_t renamed = 0;
	for (size_t i = 0; i < then->count; i++) {
		const struct head_row *current = find_incarnation(now, &then->heads[i]);
		if (current && strcmp(current->name, then->heads[i].name) != 0) {
			struct manifest_op *op = op_add(ops, MANIFEST_RENAME, current->name);
			if (!op)
				return -ENOMEM;
			snprintf(op->new_name, sizeof op->new_name, "_graphfs_revert_%zu", renamed++);
		}
	}
	renamed = 0;
	for (size_t i = 0; i < then->count; i++) {
		const struct head_row *current = find_incarnation(now, &then->heads[i]);
		if (current && strcmp(current->name, then->heads[i].name) != 0) {
			char temporary[JOURNAL_NAME_MAX + 1];
			snprintf(temporary, sizeof temporary, "_graphfs_revert_%zu", renamed++);
			struct manifest_op *op = op_add(ops, MANIFEST_RENAME, temporary);
			if (!op)
				return -ENOMEM;
			snprintf(op->new_name, sizeof op->new_name, "%s", then->heads[i].name);
		}
	}
	for (size_t i = 0; i < then->count; i++) {
		const struct head_row *past = &then->heads[i];
		const struct head_row *current = find_incarnation(now, past);
		if ((current && same_content(store, current, past)) || (!current && restored_copy(store, now, past)))
			continue;
		struct manifest_op *op = op_add(ops, MANIFEST_RESTORE, past->name);
		if (!op)
			return -ENOMEM;
		op->source = past->table;
	}
	return 0;
}

int store_revert_to(struct store *store, const char *branch, struct store_snapshot *then, const char *message,
		    const struct store_condition *condition, struct store_commit_result *result,
		    struct error_info *error)
{
	struct store_snapshot *now = NULL;
	struct store_head_list now_heads = { 0 }, then_heads = { 0 };
	struct op_list ops = { 0 };
	int rc;
	if ((rc = store_snapshot_open(store, branch, STORE_LATEST, &now, error)) < 0)
		goto out;
	if ((rc = store_snapshot_heads(now, false, store_head_list_add, &now_heads)) < 0 ||
	    (rc = store_snapshot_heads(then, false, store_head_list_add, &then_heads)) < 0 ||
	    (rc = plan(store, &now_heads, &then_heads, &ops)) < 0) {
		error_info_set(error, rc, "cannot read the heads of branch %s: %s", branch, io_strerror(rc));
		goto out;
	}
	if (ops.count == 0) {
		rc = error_info_set(error, -ENODATA, "branch %s is already as it was at version %llu: nothing to change",
				    branch, (unsigned long long)store_snapshot_version(then));
		goto out;
	}
	struct manifest_commit_request request = {
		.branch = branch,
		.actor = store->actor,
		.message = message,
		.op_count = ops.count,
		.ops = ops.ops,
	};
	store_condition_to_manifest(condition, &request.condition);
	struct manifest_commit_result published;
	rc = manifest_commit(store->manifest, &request, &published, error);
	if (rc == 0 && result) {
		result->version = published.version;
		ulid_format(&published.commit, result->commit);
		result->time_us = published.time_us;
	}
out:
	free(ops.ops);
	free(now_heads.heads);
	free(then_heads.heads);
	if (now)
		store_snapshot_release(now);
	return rc;
}

int store_revert(struct store *store, const char *branch, uint64_t version, const char *message,
		 const struct store_condition *condition, struct store_commit_result *result,
		 struct error_info *error)
{
	error_info_clear(error);
	if (store->read_only)
		return error_info_set(error, -EROFS, "the store is open read-only");
	branch = store_branch_or_main(branch);
	struct store_snapshot *then = NULL;
	int rc = store_snapshot_open(store, branch, version, &then, error);
	if (rc < 0)
		return rc;
	char default_message[64];
	snprintf(default_message, sizeof default_message, "revert to version %llu", (unsigned long long)version);
	rc = store_revert_to(store, branch, then, message && *message ? message : default_message, condition, result,
			     error);
	if (rc == -ENODATA)
		error_info_set(error, rc, "branch %s is already as it was at version %llu: nothing to revert", branch,
			       (unsigned long long)version);
	store_snapshot_release(then);
	return rc;
}
