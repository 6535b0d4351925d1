/*
 * error_info — one error, described for a human (layer: io, no dependencies).
 *
 * Every core function that can fail returns an int rc: 0 on success or a
 * negative errno. Functions that can say more fill a struct error_info with
 * the errno, the file and line the problem was found at (for input errors),
 * and one sentence of explanation. The CLI prints it as one line
 * "graphfs: <path>:<line>: <message>"; the daemon writes it to
 * .graphfs/errors and returns the errno.
 */
#ifndef GRAPHFS_ERROR_INFO_H
#define GRAPHFS_ERROR_INFO_H

#include <stdint.h>

struct error_info {
	int code;           /* negative errno, 0 when no error was recorded */
	uint64_t line;      /* 1-based input line the error is about, 0 if none */
	char path[256];     /* input file or table the error is about, "" if none */
	char message[512];  /* one sentence, no trailing newline */
};

/* Clears *error: no code, no line, empty path and message (NULL is allowed). */
void error_info_clear(struct error_info *error);

/*
 * Records code and a printf-style message in *error (NULL is allowed: the
 * message is dropped). Keeps path and line as they are. Returns code, so a
 * caller can write `return error_info_set(error, -EINVAL, "...")`.
 */
int error_info_set(struct error_info *error, int code, const char *format, ...)
	__attribute__((format(printf, 3, 4)));

/* Sets the path and line the error is about (NULL error allowed). */
void error_info_locate(struct error_info *error, const char *path, uint64_t line);

/*
 * Formats the error as one line without a trailing newline:
 * "<path>:<line>: <message>", "<path>: <message>" or "<message>".
 * Returns out.
 */
const char *error_info_format(const struct error_info *error, char *out, unsigned long size);

#endif
