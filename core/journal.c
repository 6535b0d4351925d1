/*
 * journal — head rows and commit records: fixed-width encodings and their
 * JSON renderings (heads/<Name>.json, log lines). See journal.h and
 * docs/FORMAT.md §8 "Head row", §9 "Commit record".
 *
 * Invariants:
 *   1. Encodings are fixed-width little-endian; a record's size depends only
 *      on its strings, never on its numbers.
 *   2. Decoders trust nothing: every length is bounds-checked (buf_reader),
 *      every enumeration range-checked, embedded NULs and trailing bytes are
 *      refused, and any inconsistency is -EIO with the output left empty.
 *   3. Renderings are compact, valid JSON (strings escaped; bytes that are
 *      not valid UTF-8 become U+FFFD) followed by exactly one "\n".
 */
#include "journal.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "schema.h"

#define SCHEMA_HASH_SIZE 16

/* ---- JSON helpers ---------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at text[0..size), or 0 if it is not one. */
static size_t utf8_sequence_length(const uint8_t *text, size_t size)
{
	uint8_t lead = text[0];
	size_t length;
	uint32_t minimum;
	uint32_t code;
	if (lead < 0x80)
		return 1;
	if ((lead & 0xe0) == 0xc0) {
		length = 2;
		minimum = 0x80;
		code = lead & 0x1f;
	} else if ((lead & 0xf0) == 0xe0) {
		length = 3;
		minimum = 0x800;
		code = lead & 0x0f;
	} else if ((lead & 0xf8) == 0xf0) {
		length = 4;
		minimum = 0x10000;
		code = lead & 0x07;
	} else {
		return 0;
	}
	if (size < length)
		return 0;
	for (size_t i = 1; i < length; i++) {
		if ((text[i] & 0xc0) != 0x80)
			return 0;
		code = (code << 6) | (text[i] & 0x3f);
	}
	if (code < minimum || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff))
		return 0;
	return length;
}

/* Appends text as a JSON string literal (quotes included). 0 or -ENOMEM. */
static int json_put_string(struct buf *out, const char *text, size_t size)
{
	static const char hex[] = "0123456789abcdef";
	const uint8_t *bytes = (const uint8_t *)text;
	int rc = buf_put_u8(out, '"');
	size_t i = 0;
	while (rc == 0 && i < size) {
		uint8_t byte = bytes[i];
		if (byte == '"' || byte == '\\') {
			char escaped[2] = { '\\', (char)byte };
			rc = buf_append(out, escaped, 2);
			i++;
		} else if (byte < 0x20) {
			const char *named = NULL;
			switch (byte) {
			case '\b': named = "\\b"; break;
			case '\f': named = "\\f"; break;
			case '\n': named = "\\n"; break;
			case '\r': named = "\\r"; break;
			case '\t': named = "\\t"; break;
			default: break;
			}
			if (named) {
				rc = buf_append(out, named, 2);
			} else {
				char escaped[6] = { '\\', 'u', '0', '0', hex[byte >> 4], hex[byte & 15] };
				rc = buf_append(out, escaped, 6);
			}
			i++;
		} else {
			size_t length = utf8_sequence_length(bytes + i, size - i);
			if (length == 0) {
				rc = buf_append_string(out, "\\ufffd");
				i++;
			} else {
				rc = buf_append(out, bytes + i, length);
				i += length;
			}
		}
	}
	if (rc == 0)
		rc = buf_put_u8(out, '"');
	return rc;
}

static int json_put_cstring(struct buf *out, const char *text)
{
	return json_put_string(out, text, strlen(text));
}

static int json_put_ulid(struct buf *out, const struct ulid *id)
{
	char text[ULID_TEXT_SIZE];
	ulid_format(id, text);
	return buf_printf(out, "\"%s\"", text);
}

/* ---- head rows ---------------------------------------------------------------- */

int journal_head_row_encode(const struct head_row *head, struct buf *out)
{
	size_t start = out->size;
	size_t name_length = strnlen(head->name, sizeof head->name);
	size_t owner_length = strnlen(head->owner, sizeof head->owner);
	size_t hash_length = strnlen(head->schema_hash, sizeof head->schema_hash);
	int rc = 0;
	if ((head->state != HEAD_LIVE && head->state != HEAD_TOMBSTONED) || head->kind > SCHEMA_EDGE ||
	    name_length > JOURNAL_NAME_MAX || owner_length > JOURNAL_NAME_MAX ||
	    hash_length > SCHEMA_HASH_SIZE) {
		rc = -EINVAL;
		goto out;
	}
	/* Never write what journal_head_row_decode would refuse. */
	for (size_t i = 0; i < hash_length; i++) {
		char digit = head->schema_hash[i];
		if (!((digit >= '0' && digit <= '9') || (digit >= 'a' && digit <= 'f'))) {
			rc = -EINVAL;
			goto out;
		}
	}
	uint8_t hash[SCHEMA_HASH_SIZE] = { 0 };
	memcpy(hash, head->schema_hash, hash_length);
	if ((rc = buf_put_u8(out, (uint8_t)head->state)) < 0 ||
	    (rc = buf_put_u8(out, head->kind)) < 0 ||
	    (rc = buf_put_u16(out, 0)) < 0 ||
	    (rc = buf_append(out, head->stable_id.bytes, 16)) < 0 ||
	    (rc = buf_append(out, head->incarnation.bytes, 16)) < 0 ||
	    (rc = buf_put_str(out, head->name, name_length)) < 0 ||
	    (rc = buf_put_u64(out, head->table_version)) < 0 ||
	    (rc = buf_put_str(out, head->owner, owner_length)) < 0 ||
	    (rc = buf_put_u64(out, head->row_count)) < 0 ||
	    (rc = buf_put_u64(out, head->byte_size)) < 0 ||
	    (rc = buf_append(out, hash, SCHEMA_HASH_SIZE)) < 0 ||
	    (rc = buf_append(out, head->commit.bytes, 16)) < 0 ||
	    (rc = buf_put_u64(out, head->commit_time_us)) < 0 ||
	    (rc = codec_put_address(out, head->table)) < 0)
		goto out;
out:
	if (rc < 0)
		out->size = start;
	return rc;
}

/* Decodes one head row from reader (shared by journal_head_row_decode and commit records). */
static int head_row_read(struct buf_reader *reader, struct head_row *out)
{
	memset(out, 0, sizeof *out);
	uint8_t state = buf_get_u8(reader);
	uint8_t kind = buf_get_u8(reader);
	uint16_t reserved = buf_get_u16(reader);
	buf_get_raw(reader, out->stable_id.bytes, 16);
	buf_get_raw(reader, out->incarnation.bytes, 16);
	const uint8_t *name;
	size_t name_length = buf_get_str(reader, &name);
	out->table_version = buf_get_u64(reader);
	const uint8_t *owner;
	size_t owner_length = buf_get_str(reader, &owner);
	out->row_count = buf_get_u64(reader);
	out->byte_size = buf_get_u64(reader);
	uint8_t hash[SCHEMA_HASH_SIZE];
	buf_get_raw(reader, hash, SCHEMA_HASH_SIZE);
	buf_get_raw(reader, out->commit.bytes, 16);
	out->commit_time_us = buf_get_u64(reader);
	out->table = codec_get_address(reader);
	if (reader->failed || (state != HEAD_LIVE && state != HEAD_TOMBSTONED) ||
	    kind > SCHEMA_EDGE || reserved != 0 || name_length > JOURNAL_NAME_MAX ||
	    owner_length > JOURNAL_NAME_MAX || memchr(name, 0, name_length) ||
	    memchr(owner, 0, owner_length))
		goto corrupt;
	/* The schema hash is lower-case hex digits, possibly followed by NUL padding. */
	size_t hash_length = 0;
	while (hash_length < SCHEMA_HASH_SIZE && hash[hash_length] != 0) {
		uint8_t digit = hash[hash_length];
		if (!((digit >= '0' && digit <= '9') || (digit >= 'a' && digit <= 'f')))
			goto corrupt;
		hash_length++;
	}
	for (size_t i = hash_length; i < SCHEMA_HASH_SIZE; i++)
		if (hash[i] != 0)
			goto corrupt;
	out->state = (enum head_state)state;
	out->kind = kind;
	memcpy(out->name, name, name_length);
	memcpy(out->owner, owner, owner_length);
	memcpy(out->schema_hash, hash, hash_length);
	return 0;
corrupt:
	memset(out, 0, sizeof *out);
	reader->failed = 1;
	return -EIO;
}

int journal_head_row_decode(const void *bytes, size_t size, struct head_row *out)
{
	struct buf_reader reader;
	buf_reader_init(&reader, bytes, size);
	int rc = head_row_read(&reader, out);
	if (rc == 0 && buf_reader_remaining(&reader) != 0) {
		memset(out, 0, sizeof *out);
		rc = -EIO;
	}
	return rc;
}

int journal_head_row_render_json(const struct head_row *head, struct buf *out)
{
	size_t start = out->size;
	bool live = head->state == HEAD_LIVE;
	int rc;
	if ((rc = buf_printf(out, "{\"state\":\"%s\",\"stable_table_id\":",
			     live ? "live" : "tombstoned")) < 0 ||
	    (rc = json_put_ulid(out, &head->stable_id)) < 0 ||
	    (rc = buf_append_string(out, ",\"incarnation_id\":")) < 0 ||
	    (rc = json_put_ulid(out, &head->incarnation)) < 0 ||
	    (rc = buf_append_string(out, ",\"table_key\":")) < 0 ||
	    (rc = json_put_cstring(out, head->name)) < 0 ||
	    (rc = buf_printf(out, ",\"table_version\":%llu,\"table_branch\":",
			     (unsigned long long)head->table_version)) < 0)
		goto out;
	rc = head->owner[0] ? json_put_cstring(out, head->owner) : buf_append_string(out, "null");
	if (rc < 0)
		goto out;
	rc = live ? buf_printf(out, ",\"row_count\":%llu", (unsigned long long)head->row_count)
		  : buf_append_string(out, ",\"row_count\":null");
	if (rc < 0 ||
	    (rc = buf_append_string(out, ",\"schema_hash\":")) < 0 ||
	    (rc = json_put_cstring(out, head->schema_hash)) < 0 ||
	    (rc = buf_append_string(out, ",\"head_graph_commit_id\":")) < 0)
		goto out;
	rc = ulid_is_zero(&head->commit) ? buf_append_string(out, "null")
					 : json_put_ulid(out, &head->commit);
	if (rc < 0)
		goto out;
	rc = buf_append_string(out, "}\n");
out:
	if (rc < 0)
		out->size = start;
	return rc;
}

/* ---- commit records --------------------------------------------------------- */

const char *journal_change_op_name(enum change_op op)
{
	switch (op) {
	case CHANGE_CREATE: return "create";
	case CHANGE_OVERWRITE: return "overwrite";
	case CHANGE_MERGE: return "merge";
	case CHANGE_DROP: return "drop";
	case CHANGE_RENAME: return "rename";
	case CHANGE_SCHEMA: return "schema";
	case CHANGE_OPTIMIZE: return "optimize";
	}
	return "unknown";
}

void journal_commit_record_init(struct commit_record *record)
{
	memset(record, 0, sizeof *record);
}

void journal_commit_record_free(struct commit_record *record)
{
	free(record->actor);
	free(record->message);
	free(record->changes);
	journal_commit_record_init(record);
}

/* Extension tags of a format-7 commit record (docs/FORMAT.md §9). */
enum commit_extension {
	COMMIT_EXTENSION_BASED_ON = 1,   /* 8 bytes: the version a based write read */
};

int journal_commit_record_encode(const struct commit_record *record, uint32_t format_version, struct buf *out)
{
	size_t start = out->size;
	const char *actor = record->actor ? record->actor : "";
	const char *message = record->message ? record->message : "";
	size_t branch_length = strnlen(record->branch, sizeof record->branch);
	size_t message_length = strlen(message);
	struct buf head;
	buf_init(&head);
	int rc = 0;
	if (record->parent_count > JOURNAL_MAX_PARENTS || branch_length > JOURNAL_NAME_MAX ||
	    message_length > UINT32_MAX || record->change_count > UINT32_MAX) {
		rc = -EINVAL;
		goto out;
	}
	if ((rc = buf_put_u64(out, record->version)) < 0 ||
	    (rc = buf_append(out, record->id.bytes, 16)) < 0 ||
	    (rc = buf_put_str(out, record->branch, branch_length)) < 0 ||
	    (rc = buf_put_u64(out, record->time_us)) < 0 ||
	    (rc = buf_put_u8(out, (uint8_t)record->parent_count)) < 0)
		goto out;
	for (size_t i = 0; i < record->parent_count; i++) {
		if ((rc = buf_append(out, record->parents[i].bytes, 16)) < 0 ||
		    (rc = codec_put_address(out, record->parent_records[i])) < 0)
			goto out;
	}
	if ((rc = buf_put_str(out, actor, strlen(actor))) < 0 ||
	    (rc = buf_put_bytes(out, message, (uint32_t)message_length)) < 0 ||
	    (rc = buf_put_u32(out, (uint32_t)record->change_count)) < 0)
		goto out;
	for (size_t i = 0; i < record->change_count; i++) {
		const struct change *change = &record->changes[i];
		size_t previous_length = strnlen(change->previous_name, sizeof change->previous_name);
		if (change->op < CHANGE_CREATE || change->op > CHANGE_OPTIMIZE ||
		    previous_length > JOURNAL_NAME_MAX) {
			rc = -EINVAL;
			goto out;
		}
		buf_reset(&head);
		if ((rc = journal_head_row_encode(&change->head_after, &head)) < 0)
			goto out;
		assert(head.size <= UINT16_MAX);
		if ((rc = buf_put_u8(out, (uint8_t)change->op)) < 0 ||
		    (rc = buf_put_u64(out, change->rows)) < 0 ||
		    (rc = buf_put_str(out, change->previous_name, previous_length)) < 0 ||
		    (rc = buf_put_u16(out, (uint16_t)head.size)) < 0 ||
		    (rc = buf_append(out, head.data, head.size)) < 0)
			goto out;
	}
	if (format_version >= 7) {
		bool based = record->based_on != 0;
		if ((rc = buf_put_u8(out, based ? 1 : 0)) < 0)
			goto out;
		if (based && ((rc = buf_put_u8(out, COMMIT_EXTENSION_BASED_ON)) < 0 ||
			      (rc = buf_put_u16(out, 8)) < 0 || (rc = buf_put_u64(out, record->based_on)) < 0))
			goto out;
	}
out:
	buf_free(&head);
	if (rc < 0)
		out->size = start;
	return rc;
}

/* Copies length bytes into a new NUL-terminated string; NULL if they contain a NUL or on ENOMEM. */
static char *copy_text(const uint8_t *bytes, size_t length, int *rc)
{
	if (memchr(bytes, 0, length)) {
		*rc = -EIO;
		return NULL;
	}
	char *text = malloc(length + 1);
	if (!text) {
		*rc = -ENOMEM;
		return NULL;
	}
	memcpy(text, bytes, length);
	text[length] = 0;
	return text;
}

/* Smallest encoding of one change: op, rows, empty previous name, head length, smallest head. */
#define CHANGE_MIN_SIZE (1 + 8 + 2 + 2 + 4 + 16 + 16 + 2 + 8 + 2 + 8 + 8 + 16 + 16 + 8 + 16)

int journal_commit_record_decode(const void *bytes, size_t size, uint32_t format_version,
				 struct commit_record *record)
{
	struct buf_reader reader;
	buf_reader_init(&reader, bytes, size);
	journal_commit_record_init(record);
	int rc = 0;
	record->version = buf_get_u64(&reader);
	buf_get_raw(&reader, record->id.bytes, 16);
	const uint8_t *branch;
	size_t branch_length = buf_get_str(&reader, &branch);
	record->time_us = buf_get_u64(&reader);
	uint8_t parent_count = buf_get_u8(&reader);
	if (reader.failed || parent_count > JOURNAL_MAX_PARENTS || branch_length > JOURNAL_NAME_MAX ||
	    memchr(branch, 0, branch_length))
		goto corrupt;
	memcpy(record->branch, branch, branch_length);
	record->parent_count = parent_count;
	for (size_t i = 0; i < parent_count; i++) {
		buf_get_raw(&reader, record->parents[i].bytes, 16);
		record->parent_records[i] = codec_get_address(&reader);
	}
	const uint8_t *actor;
	size_t actor_length = buf_get_str(&reader, &actor);
	const uint8_t *message;
	size_t message_length = buf_get_bytes(&reader, &message);
	uint32_t change_count = buf_get_u32(&reader);
	if (reader.failed || change_count > buf_reader_remaining(&reader) / CHANGE_MIN_SIZE)
		goto corrupt;
	if (!(record->actor = copy_text(actor, actor_length, &rc)) ||
	    !(record->message = copy_text(message, message_length, &rc)))
		goto out;
	if (change_count > 0) {
		record->changes = calloc(change_count, sizeof *record->changes);
		if (!record->changes) {
			rc = -ENOMEM;
			goto out;
		}
	}
	record->change_count = change_count;
	for (size_t i = 0; i < change_count; i++) {
		struct change *change = &record->changes[i];
		uint8_t op = buf_get_u8(&reader);
		change->rows = buf_get_u64(&reader);
		const uint8_t *previous;
		size_t previous_length = buf_get_str(&reader, &previous);
		uint16_t head_length = buf_get_u16(&reader);
		if (reader.failed || op < CHANGE_CREATE || op > CHANGE_OPTIMIZE ||
		    previous_length > JOURNAL_NAME_MAX || memchr(previous, 0, previous_length) ||
		    buf_reader_remaining(&reader) < head_length)
			goto corrupt;
		change->op = (enum change_op)op;
		memcpy(change->previous_name, previous, previous_length);
		if (journal_head_row_decode(reader.position, head_length, &change->head_after) < 0)
			goto corrupt;
		reader.position += head_length;
	}
	if (format_version >= 7) {
		uint8_t extension_count = buf_get_u8(&reader);
		for (uint8_t i = 0; i < extension_count && !reader.failed; i++) {
			uint8_t tag = buf_get_u8(&reader);
			uint16_t length = buf_get_u16(&reader);
			if (reader.failed || buf_reader_remaining(&reader) < length)
				goto corrupt;
			if (tag == COMMIT_EXTENSION_BASED_ON) {
				if (length != 8)
					goto corrupt;
				record->based_on = buf_get_u64(&reader);
				if (record->based_on == 0 || record->based_on >= record->version)
					goto corrupt;
			} else {
				reader.position += length;   /* a later graphfs's: skipped (FORMAT.md §9) */
			}
		}
	}
	if (reader.failed || buf_reader_remaining(&reader) != 0)
		goto corrupt;
	return 0;
corrupt:
	rc = -EIO;
out:
	journal_commit_record_free(record);
	return rc;
}

int journal_commit_record_render_json(const struct commit_record *record, struct buf *out)
{
	size_t start = out->size;
	char time_text[32];
	journal_format_time(record->time_us, time_text);
	const char *actor = record->actor ? record->actor : "";
	const char *message = record->message ? record->message : "";
	int rc;
	if (record->reclaimed) {
		if ((rc = buf_printf(out, "{\"version\":%llu,\"commit\":", (unsigned long long)record->version)) < 0 ||
		    (rc = json_put_ulid(out, &record->id)) < 0 || (rc = buf_append_string(out, ",\"reclaimed\":true}\n")) < 0)
			goto out;
		return 0;
	}
	if ((rc = buf_printf(out, "{\"version\":%llu,\"commit\":",
			     (unsigned long long)record->version)) < 0 ||
	    (rc = json_put_ulid(out, &record->id)) < 0 ||
	    (rc = buf_append_string(out, ",\"parents\":[")) < 0)
		goto out;
	for (size_t i = 0; i < record->parent_count && i < JOURNAL_MAX_PARENTS; i++) {
		if ((i > 0 && (rc = buf_put_u8(out, ',')) < 0) ||
		    (rc = json_put_ulid(out, &record->parents[i])) < 0)
			goto out;
	}
	if ((rc = buf_append_string(out, "],\"branch\":")) < 0 ||
	    (rc = json_put_string(out, record->branch, strnlen(record->branch, sizeof record->branch))) < 0 ||
	    (rc = buf_printf(out, ",\"time\":\"%s\",\"actor\":", time_text)) < 0 ||
	    (rc = json_put_cstring(out, actor)) < 0 ||
	    (rc = buf_append_string(out, ",\"message\":")) < 0 ||
	    (rc = json_put_cstring(out, message)) < 0)
		goto out;
	if (record->based_on &&
	    (rc = buf_printf(out, ",\"based_on\":%llu", (unsigned long long)record->based_on)) < 0)
		goto out;
	if ((rc = buf_append_string(out, ",\"changes\":[")) < 0)
		goto out;
	for (size_t i = 0; i < record->change_count; i++) {
		const struct change *change = &record->changes[i];
		if ((i > 0 && (rc = buf_put_u8(out, ',')) < 0) ||
		    (rc = buf_append_string(out, "{\"table\":")) < 0 ||
		    (rc = json_put_cstring(out, change->head_after.name)) < 0)
			goto out;
		if (change->op == CHANGE_RENAME &&
		    ((rc = buf_append_string(out, ",\"from\":")) < 0 ||
		     (rc = json_put_cstring(out, change->previous_name)) < 0))
			goto out;
		if ((rc = buf_printf(out, ",\"op\":\"%s\",\"rows\":%llu}", journal_change_op_name(change->op),
				     (unsigned long long)change->rows)) < 0)
			goto out;
	}
	rc = buf_append_string(out, "]}\n");
out:
	if (rc < 0)
		out->size = start;
	return rc;
}

void journal_format_time(uint64_t time_us, char out[32])
{
	time_t seconds = (time_t)(time_us / 1000000);
	unsigned micros = (unsigned)(time_us % 1000000);
	struct tm parts;
	if (!gmtime_r(&seconds, &parts)) {
		memset(&parts, 0, sizeof parts);
		parts.tm_year = 70;
		parts.tm_mday = 1;
	}
	/* The largest u64 microsecond count is in year 586912: at most 21 characters before the fraction. */
	size_t length = strftime(out, 32 - 9, "%Y-%m-%dT%H:%M:%S", &parts);
	snprintf(out + length, 32 - length, ".%06uZ", micros);
}

/* Reads exactly digits decimal digits at *text into *out, advancing text. */
static bool read_digits(const char **text, int digits, int *out)
{
	int value = 0;
	for (int i = 0; i < digits; i++) {
		char c = (*text)[i];
		if (c < '0' || c > '9')
			return false;
		value = value * 10 + (c - '0');
	}
	*text += digits;
	*out = value;
	return true;
}

int journal_parse_time(const char *text, uint64_t *time_us)
{
	int year, month, day, hour = 0, minute = 0, second = 0;
	uint64_t micros = 0;
	if (!read_digits(&text, 4, &year) || *text++ != '-' || !read_digits(&text, 2, &month) || *text++ != '-' ||
	    !read_digits(&text, 2, &day))
		return -EINVAL;
	if (*text) {
		if (*text != 'T' && *text != 't')
			return -EINVAL;
		text++;
		if (!read_digits(&text, 2, &hour) || *text++ != ':' || !read_digits(&text, 2, &minute) ||
		    *text++ != ':' || !read_digits(&text, 2, &second))
			return -EINVAL;
		if (*text == '.') {
			text++;
			int digits = 0;
			while (*text >= '0' && *text <= '9') {
				if (digits < 6)
					micros = micros * 10 + (uint64_t)(*text - '0');
				digits++;
				text++;
			}
			if (digits == 0 || digits > 9)
				return -EINVAL;
			for (; digits < 6; digits++)
				micros *= 10;
		}
		long offset = 0;
		if (*text == 'Z' || *text == 'z') {
			text++;
		} else if (*text == '+' || *text == '-') {
			int sign = *text++ == '-' ? -1 : 1, offset_hours, offset_minutes;
			if (!read_digits(&text, 2, &offset_hours) || *text++ != ':' ||
			    !read_digits(&text, 2, &offset_minutes) || offset_hours > 23 || offset_minutes > 59)
				return -EINVAL;
			offset = sign * (offset_hours * 3600L + offset_minutes * 60L);
		} else {
			return -EINVAL;   /* RFC 3339 needs the zone: Z or an offset */
		}
		if (*text)
			return -EINVAL;
		if (second > 60)
			return -EINVAL;
		second -= (int)offset;   /* normalised by timegm below */
	}
	static const int month_days[12] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
	if (year < 1970 || month < 1 || month > 12 || day < 1 || day > month_days[month - 1] ||
	    (month == 2 && day == 29 && !leap) || hour > 23 || minute > 59)
		return -EINVAL;
	struct tm parts = { .tm_year = year - 1900, .tm_mon = month - 1, .tm_mday = day, .tm_hour = hour,
			    .tm_min = minute, .tm_sec = second };
	time_t seconds = timegm(&parts);
	if (seconds < 0)
		return -EINVAL;
	*time_us = (uint64_t)seconds * 1000000u + micros;
	return 0;
}
