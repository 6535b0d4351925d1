/*
 * errors — what the mount says: diagnostics through the log hook, and
 * rejected writes in .graphfs/errors (docs/MOUNT.md "The tree").
 *
 * Invariants:
 *   1. .graphfs/errors keeps the last GRAPHFS_ERRORS_KEPT rejected writes,
 *      oldest first, one JSON object per line.
 *   2. Nothing is printed: lines go to the configured hook, or nowhere.
 */
#include <errno.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "mountfs_int.h"

void mount_log(struct mountfs *mount, int priority, const char *format, ...)
{
	if (!mount->log)
		return;
	char line[2048];
	va_list arguments;
	va_start(arguments, format);
	vsnprintf(line, sizeof line, format, arguments);
	va_end(arguments);
	mount->log(mount->log_context, priority, line);
}

void mount_error_refuse(struct mountfs *mount, const char *path, int code, const char *format, ...)
{
	struct error_info error;
	error_info_clear(&error);
	va_list arguments;
	va_start(arguments, format);
	vsnprintf(error.message, sizeof error.message, format, arguments);
	va_end(arguments);
	error.code = code;
	mount_error_record(mount, path, &error, code);
}

/* ---- .graphfs/errors ------------------------------------------------------------ */

void mount_error_record(struct mountfs *mount, const char *path, const struct error_info *error,
			int code)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	char time_text[32];
	journal_format_time((uint64_t)now.tv_sec * 1000000 + (uint64_t)now.tv_nsec / 1000, time_text);
	const char *reason = error && error->message[0] ? error->message : strerror(code < 0 ? -code : code);
	json_t *line = json_object();
	json_object_set_new(line, "time", json_string(time_text));
	json_object_set_new(line, "path", json_string(path));
	json_object_set_new(line, "line", json_integer(error ? (json_int_t)error->line : 0));
	json_object_set_new(line, "errno", json_integer(code < 0 ? -code : code));
	json_object_set_new(line, "reason", json_string(reason));
	char *text = json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
	json_decref(line);
	atomic_fetch_add(&mount->rejected, 1);
	if (!text)
		return;
	pthread_mutex_lock(&mount->errors_lock);
	struct error_line *slot = &mount->errors[mount->errors_next];
	snprintf(slot->text, sizeof slot->text, "%s", text);
	mount->errors_next = (mount->errors_next + 1) % GRAPHFS_ERRORS_KEPT;
	if (mount->errors_count < GRAPHFS_ERRORS_KEPT)
		mount->errors_count++;
	pthread_mutex_unlock(&mount->errors_lock);
	if (mount->log_rejections)
		mount_log(mount, LOG_INFO, "rejected: %s", text);
	free(text);
}

void mount_error_kept(struct mountfs *mount, const char *path, const char *kept_path)
{
	bool noted = false;
	pthread_mutex_lock(&mount->errors_lock);
	if (mount->errors_count > 0) {
		struct error_line *slot =
			&mount->errors[(mount->errors_next + GRAPHFS_ERRORS_KEPT - 1) % GRAPHFS_ERRORS_KEPT];
		json_t *line = json_loads(slot->text, 0, NULL);
		json_t *named = line ? json_object_get(line, "path") : NULL;
		if (named && json_is_string(named) && strcmp(json_string_value(named), path) == 0) {
			char reason[1024];
			snprintf(reason, sizeof reason, "%s; what was written is kept in %s",
				 json_string_value(json_object_get(line, "reason")) ?: "refused", kept_path);
			json_object_set_new(line, "reason", json_string(reason));
			json_object_set_new(line, "kept", json_string(kept_path));
			char *text = json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
			if (text && strlen(text) < sizeof slot->text) {
				snprintf(slot->text, sizeof slot->text, "%s", text);
				noted = true;
			}
			free(text);
		}
		json_decref(line);
	}
	pthread_mutex_unlock(&mount->errors_lock);
	if (!noted)
		mount_error_refuse(mount, path, -EIO, "the write was refused at close; what was written is kept in %s",
				   kept_path);
}

int mount_errors_render(struct mountfs *mount, struct buf *out)
{
	int rc = 0;
	pthread_mutex_lock(&mount->errors_lock);
	size_t first = (mount->errors_next + GRAPHFS_ERRORS_KEPT - mount->errors_count) % GRAPHFS_ERRORS_KEPT;
	for (size_t i = 0; i < mount->errors_count && rc >= 0; i++) {
		const struct error_line *line = &mount->errors[(first + i) % GRAPHFS_ERRORS_KEPT];
		rc = buf_printf(out, "%s\n", line->text);
	}
	pthread_mutex_unlock(&mount->errors_lock);
	return rc < 0 ? rc : 0;
}

