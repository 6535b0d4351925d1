/* error_info — one error, described for a human. See error_info.h. */
#include "error_info.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void error_info_clear(struct error_info *error)
{
	/* Field by field: clearing is on the per-row path, and a memset of the
	 * whole struct (nearly 800 bytes) was 2% of an import. */
	if (!error)
		return;
	error->code = 0;
	error->line = 0;
	error->path[0] = '\0';
	error->message[0] = '\0';
}

int error_info_set(struct error_info *error, int code, const char *format, ...)
{
	if (!error)
		return code;
	error->code = code;
	va_list arguments;
	va_start(arguments, format);
	vsnprintf(error->message, sizeof error->message, format, arguments);
	va_end(arguments);
	return code;
}

void error_info_locate(struct error_info *error, const char *path, uint64_t line)
{
	if (!error)
		return;
	snprintf(error->path, sizeof error->path, "%s", path ? path : "");
	error->line = line;
}

const char *error_info_format(const struct error_info *error, char *out, unsigned long size)
{
	if (!out || size == 0)
		return out;
	if (!error) {
		out[0] = 0;
		return out;
	}
	if (error->path[0] && error->line)
		snprintf(out, size, "%s:%llu: %s", error->path, (unsigned long long)error->line,
			 error->message);
	else if (error->path[0])
		snprintf(out, size, "%s: %s", error->path, error->message);
	else
		snprintf(out, size, "%s", error->message);
	return out;
}
