/*
 * float_text — decimal digits of binary floating-point numbers and the
 * reading of decimals, correctly rounded (layer: io). A thin C face on the
 * double-conversion library (Debian libdouble-conversion-dev), which does
 * what libc's printf and strtod do, without their per-call machinery.
 */
#ifndef GRAPHFS_FLOAT_TEXT_H
#define GRAPHFS_FLOAT_TEXT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum float_text_mode {
	FLOAT_TEXT_SHORTEST = 0,         /* the fewest digits that read back as the same double */
	FLOAT_TEXT_SHORTEST_SINGLE = 1,  /* the same for (float)value, read back as a float */
	FLOAT_TEXT_PRECISION = 2,        /* exactly `precision` significant digits, correctly rounded */
};

/*
 * The decimal digits of value (positive, finite, non-zero; for
 * SHORTEST_SINGLE also as a float): digits[0..*count) without trailing
 * zeros, NUL-terminated, and *point with value ≈ 0.digits × 10^point.
 * size must be at least 24; precision 1..17 (PRECISION only).
 */
void float_text_digits(double value, enum float_text_mode mode, int precision, char *digits, size_t size, int *count,
		       int *point);

/* The double nearest to the decimal text[0..length) (JSON number syntax), as strtod reads it. */
double float_text_read(const char *text, size_t length);

#ifdef __cplusplus
}
#endif

#endif
