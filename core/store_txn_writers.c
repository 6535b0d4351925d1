/*
 * store_txn_writers — finding a transaction's writer of a table and marking
 * a writer failed: the two things both the transaction (store_txn.c) and its
 * edge checks (store_edges.c) do to writers, kept below both so that the
 * checks need nothing from the transaction's own file.
 */
#include "store_txn_int.h"

#include <assert.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

struct store_writer *store_txn_find_writer(struct store_txn *txn, const char *table)
{
	for (size_t i = 0; i < txn->op_count; i++)
		if (txn->ops[i]->kind == MANIFEST_WRITE && strcmp(txn->ops[i]->name, table) == 0)
			return txn->ops[i]->writer;
	return NULL;
}

/* Records the first error of a writer (sticky) and copies it to error. */
int store_writer_fail(struct store_writer *writer, struct error_info *error, int code,
		uint64_t line, const char *format, ...)
{
	struct error_info *failure = &writer->failure;
	store_writer_enter(writer, WRITER_FAILED);
	failure->code = code;
	va_list arguments;
	va_start(arguments, format);
	vsnprintf(failure->message, sizeof failure->message, format, arguments);
	va_end(arguments);
	error_info_locate(failure, writer->path, line);
	if (error)
		*error = *failure;
	return code;
}

/* Debug check of a writer's state change (the transitions of enum store_writer_state). */
static void store_writer_state_check(const struct store_writer *writer, enum store_writer_state next)
{
	(void)writer;
	(void)next;
	assert(next != WRITER_FINISHED || writer->state == WRITER_WRITING || writer->state == WRITER_FINISHED);
	assert(next != WRITER_SEALED || writer->state == WRITER_WRITING || writer->state == WRITER_FINISHED ||
	       writer->state == WRITER_SEALED);
	assert(next != WRITER_WRITING || writer->state == WRITER_WRITING);
}

void store_writer_enter(struct store_writer *writer, enum store_writer_state next)
{
	store_writer_state_check(writer, next);
	writer->state = next;
}
