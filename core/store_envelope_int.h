/*
 * store_envelope_int.h — reading one line of a dump (layer: store; internal to
 * core/store_dump.c and its fuzz target, tests/fuzz/fuzz_envelope.c).
 *
 * A dump line is one JSON object in one of three envelopes (docs/graphfs.1
 * `dump`, `load`):
 *   {"schema":NAME,"data":{…}}                     a table's schema
 *   {"type":NODE,"data":{…}}                       a node row
 *   {"edge":EDGE,"from":F,"to":T,"data":{…}}       an edge row
 */
#ifndef GRAPHFS_STORE_ENVELOPE_INT_H
#define GRAPHFS_STORE_ENVELOPE_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "journal.h"

enum store_envelope_kind {
	STORE_ENVELOPE_SCHEMA = 1,
	STORE_ENVELOPE_NODE = 2,
	STORE_ENVELOPE_EDGE = 3,
};

struct store_envelope {
	enum store_envelope_kind kind;
	char table[JOURNAL_NAME_MAX + 1];  /* NAME, NODE or EDGE */
	struct buf row;                    /* schema, node: data's text; edge: {"from":F,"to":T,<data's members>} */
	bool parsed;                       /* read through jansson (else taken from the line's own bytes) */
};

/* The end of the JSON string whose opening quote is text[at]: the index after its
 * closing quote, or 0 if it does not end within size bytes. */
size_t store_envelope_string_end(const char *text, size_t size, size_t at);

void store_envelope_init(struct store_envelope *envelope);
void store_envelope_free(struct store_envelope *envelope);

/*
 * Reads one dump line (no "\n"; trailing blanks are ignored). An envelope
 * exactly as `graphfs dump` writes it is taken from the line's bytes without
 * a parse of its own (the table's writer parses the row anyway), unless
 * fast is false; any other line is parsed with jansson. A row taken from the
 * bytes is not checked here: the writer refuses one that is not a single
 * JSON object. Returns 1 with *out filled, 0 for a blank line, -EINVAL with
 * message (not a JSON object, not one of the three envelopes, a table name
 * longer than JOURNAL_NAME_MAX) or -ENOMEM; out->row is reset first.
 */
int store_envelope_read(const char *line, size_t size, bool fast, struct store_envelope *out, char *message,
			size_t message_size);

#endif
