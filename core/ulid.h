/*
 * ulid — 128-bit sortable identifiers (layer: io, no dependencies).
 *
 * Layout (big-endian, so byte order == time order): 48-bit milliseconds since
 * the Unix epoch, then 80 random bits from getrandom(2). Within one process,
 * ULIDs minted in the same millisecond increase monotonically (the random
 * part is incremented), as in the ULID spec. Text form: 26 characters of
 * Crockford base32, upper case.
 */
#ifndef GRAPHFS_ULID_H
#define GRAPHFS_ULID_H

#include <stdbool.h>
#include <stdint.h>

#define ULID_TEXT_SIZE 27 /* 26 characters + NUL */

struct ulid {
	uint8_t bytes[16];
};

/* Mints a new ULID for the current time. Thread-safe. */
void ulid_new(struct ulid *out);
/* Writes the 26-character text form plus NUL into out; returns out. */
char *ulid_format(const struct ulid *id, char out[ULID_TEXT_SIZE]);
/* Parses exactly 26 Crockford base32 characters; returns 0 or -EINVAL. */
int ulid_parse(const char *text, struct ulid *out);
bool ulid_is_zero(const struct ulid *id);
int ulid_compare(const struct ulid *a, const struct ulid *b);
/* Milliseconds since the epoch encoded in the ULID. */
uint64_t ulid_time_ms(const struct ulid *id);

#endif
