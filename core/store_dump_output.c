/*
 * store_dump_output — the output side of a dump (layer: store): buffered
 * writes to the output descriptor, and a table's rows as dump lines, each in
 * its envelope (core/store_envelope_int.h): `dump` (core/store_dump.c) and
 * `dump --all` (core/store_dump_all.c) both write through it.
 */
#include "store_dump_int.h"
#include "store_envelope_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DUMP_CHUNK (1u << 20)

int store_dump_fail_at(struct error_info *error, const char *file, uint64_t line, int code, const char *format,
		       va_list arguments)
{
	char message[sizeof error->message];
	vsnprintf(message, sizeof message, format, arguments);   /* before the clear: an argument may be in error */
	error_info_clear(error);
	error_info_locate(error, file, line);
	return error_info_set(error, code, "%s", message);
}

int store_dump_schema(struct store_dump_output *output, struct store_snapshot *snapshot, const char *table,
		      struct error_info *error)
{
	struct buf schema;
	buf_init(&schema);
	int rc = store_snapshot_schema(snapshot, table, &schema);
	if (rc < 0) {
		buf_free(&schema);
		return error_info_set(error, rc, "cannot read the schema of %s: %s", table, io_strerror(rc));
	}
	store_dump_text(output, "{\"schema\":\"");
	store_dump_text(output, table);
	store_dump_text(output, "\",\"data\":");
	store_dump_add(output, schema.data, schema.size - 1);   /* without its "\n" */
	buf_free(&schema);
	return store_dump_text(output, "}\n");
}

int store_dump_flush(struct store_dump_output *output)
{
	size_t done = 0;
	while (output->rc == 0 && done < output->pending.size) {
		ssize_t wrote = write(output->fd, output->pending.data + done, output->pending.size - done);
		if (wrote < 0 && errno == EINTR)
			continue;
		if (wrote <= 0)
			output->rc = wrote < 0 ? -errno : -EIO;
		else
			done += (size_t)wrote;
	}
	buf_reset(&output->pending);
	return output->rc;
}

int store_dump_add(struct store_dump_output *output, const void *bytes, size_t size)
{
	int rc = output->rc ? output->rc : buf_append(&output->pending, bytes, size);
	if (rc == 0 && output->pending.size >= DUMP_CHUNK)
		rc = store_dump_flush(output);
	return output->rc = rc;
}

int store_dump_text(struct store_dump_output *output, const char *text)
{
	return store_dump_add(output, text, strlen(text));
}

/* One canonical row line (no "\n") of table, in its envelope. */
static int dump_row(struct store_dump_output *output, const char *table, bool edge, const char *line, size_t size)
{
	if (!edge) {
		store_dump_text(output, "{\"type\":\"");
		store_dump_text(output, table);
		store_dump_text(output, "\",\"data\":");
		store_dump_add(output, line, size);
		return store_dump_text(output, "}\n");
	}
	/* {"id":I,"from":F,"to":T<rest> -> {"edge":E,"from":F,"to":T,"data":{"id":I<rest>} */
	static const char id_key[] = "{\"id\":", from_key[] = ",\"from\":", to_key[] = ",\"to\":";
	if (size < sizeof id_key || memcmp(line, id_key, sizeof id_key - 1) != 0)
		return -EIO;
	size_t id_end = store_envelope_string_end(line, size, sizeof id_key - 1);
	if (!id_end || id_end + sizeof from_key - 1 > size || memcmp(line + id_end, from_key, sizeof from_key - 1))
		return -EIO;
	size_t from_start = id_end + sizeof from_key - 1, from_end = store_envelope_string_end(line, size, from_start);
	if (!from_end || from_end + sizeof to_key - 1 > size || memcmp(line + from_end, to_key, sizeof to_key - 1))
		return -EIO;
	size_t to_start = from_end + sizeof to_key - 1, to_end = store_envelope_string_end(line, size, to_start);
	if (!to_end)
		return -EIO;
	store_dump_text(output, "{\"edge\":\"");
	store_dump_text(output, table);
	store_dump_text(output, "\",\"from\":");
	store_dump_add(output, line + from_start, from_end - from_start);
	store_dump_text(output, ",\"to\":");
	store_dump_add(output, line + to_start, to_end - to_start);
	store_dump_text(output, ",\"data\":");
	store_dump_add(output, line, id_end);
	store_dump_add(output, line + to_end, size - to_end);
	return store_dump_text(output, "}\n");
}

int store_dump_rows(struct store_dump_output *output, struct store_snapshot *snapshot, const char *table, bool edge,
		    uint64_t from, struct error_info *error)
{
	struct store_table *opened = NULL;
	char *chunk = malloc(DUMP_CHUNK);
	struct buf carry;
	buf_init(&carry);
	int rc = chunk ? store_table_open(snapshot, table, &opened) : -ENOMEM;
	uint64_t offset = from, size = rc == 0 ? store_table_size(opened) : 0;
	while (rc == 0 && offset < size) {
		ssize_t got = store_table_pread(opened, chunk, DUMP_CHUNK, offset);
		if (got <= 0) {
			rc = got < 0 ? (int)got : -EIO;
			break;
		}
		offset += (uint64_t)got;
		output->read += (uint64_t)got;
		if (output->progress)
			output->progress(output->read, output->total, output->progress_context);
		size_t start = 0;
		for (size_t i = 0; rc == 0 && i < (size_t)got; i++) {
			if (chunk[i] != '\n')
				continue;
			if (carry.size) {
				if ((rc = buf_append(&carry, chunk + start, i - start)) == 0)
					rc = dump_row(output, table, edge, (const char *)carry.data, carry.size);
				buf_reset(&carry);
			} else {
				rc = dump_row(output, table, edge, chunk + start, i - start);
			}
			start = i + 1;
		}
		if (rc == 0 && start < (size_t)got)
			rc = buf_append(&carry, chunk + start, (size_t)got - start);
	}
	if (rc == 0 && carry.size)
		rc = -EIO;   /* a table's rendering ends with "\n" */
	if (rc < 0 && !error->message[0])
		error_info_set(error, rc, "cannot dump table %s: %s", table, io_strerror(rc));
	buf_free(&carry);
	free(chunk);
	store_table_close(opened);
	return rc;
}
