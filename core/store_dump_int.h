/*
 * store_dump_int.h — the output side of a dump, shared by core/store_dump.c
 * (`dump`: one branch's state) and core/store_dump_all.c (`dump --all`: every
 * retained commit) (layer: store).
 */
#ifndef GRAPHFS_STORE_DUMP_INT_H
#define GRAPHFS_STORE_DUMP_INT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "store_int.h"

/* Buffered output to fd; the first error sticks in rc and ends every later call. */
struct store_dump_output {
	int fd;
	struct buf pending;
	int rc;
	store_progress_fn progress;   /* NULL: none; hears the table bytes read of total */
	void *progress_context;
	uint64_t read, total;
};

/* A load's error at file:line (an earlier one replaced): code, with the message format makes. */
int store_dump_fail_at(struct error_info *error, const char *file, uint64_t line, int code, const char *format,
		       va_list arguments);

/* Each returns 0 or the sticky error (-errno of write(2), -ENOMEM). */
int store_dump_flush(struct store_dump_output *output);
int store_dump_add(struct store_dump_output *output, const void *bytes, size_t size);
int store_dump_text(struct store_dump_output *output, const char *text);
/* {"schema":TABLE,"data":SCHEMA}: the table's canonical schema as of snapshot. 0 or -errno
 * with error set. */
int store_dump_schema(struct store_dump_output *output, struct store_snapshot *snapshot, const char *table,
		      struct error_info *error);
/* The rows of table from byte offset from of its rendering (a row's start) to its end, one
 * envelope line each ({"type":…} or {"edge":…}). 0 or -errno with error set. */
int store_dump_rows(struct store_dump_output *output, struct store_snapshot *snapshot, const char *table, bool edge,
		    uint64_t from, struct error_info *error);

/* store_dump_all.c: whether a stream's first line (no "\n") opens a dump --all stream; the
 * replay of the rest of input (file names it in errors; header is that first line, total
 * the input's size or 0) into store, which must have no commit. 0 or -errno with error set
 * (naming the line); *commits says how many were replayed either way. */
bool store_dump_all_header(const char *line, size_t size);
int store_load_all(struct store *store, FILE *input, const char *file, const char *header, size_t header_size,
		   uint64_t total, store_progress_fn progress, void *progress_context, store_mapped_fn mapped,
		   void *mapped_context, uint64_t *commits, struct error_info *error);

#endif
