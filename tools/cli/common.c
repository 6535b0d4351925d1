/*
 * common — helpers shared by the subcommands: one-line errors, option
 * parsing, opening the store, writing stdout, the progress bar.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* ---- errors ------------------------------------------------------------------ */

/* Prints "graphfs: " + text + "\n" as one line: embedded newlines become spaces. */
static void print_one_line(const char *text)
{
	char line[4096];
	snprintf(line, sizeof line, "graphfs: %s", text);
	size_t length = strlen(line);
	while (length > 0 && (line[length - 1] == '\n' || line[length - 1] == ' '))
		line[--length] = '\0';
	for (size_t i = 0; i < length; i++)
		if (line[i] == '\n' || line[i] == '\r')
			line[i] = ' ';
	fflush(stdout);
	fprintf(stderr, "%s\n", line);
}

int cli_fail(const char *format, ...)
{
	char text[1536];
	va_list arguments;
	va_start(arguments, format);
	vsnprintf(text, sizeof text, format, arguments);
	va_end(arguments);
	print_one_line(text);
	return CLI_EXIT_FAILURE;
}

int cli_usage_error(const char *command, const char *format, ...)
{
	char text[1024];
	char line[2048];
	va_list arguments;
	va_start(arguments, format);
	vsnprintf(text, sizeof text, format, arguments);
	va_end(arguments);
	if (command)
		snprintf(line, sizeof line, "%s: %s (see 'graphfs %s --help')", command, text, command);
	else
		snprintf(line, sizeof line, "%s (see 'graphfs --help')", text);
	print_one_line(line);
	return CLI_EXIT_USAGE;
}

int cli_fail_error(int rc, const struct error_info *error, const char *context, ...)
{
	char prefix[768];
	char text[2048];
	va_list arguments;
	va_start(arguments, context);
	vsnprintf(prefix, sizeof prefix, context, arguments);
	va_end(arguments);

	if (error && error->message[0] != '\0') {
		char formatted[1024];
		error_info_format(error, formatted, sizeof formatted);
		if (error->path[0] != '\0' && error->line > 0)
			snprintf(text, sizeof text, "%s", formatted);
		else
			snprintf(text, sizeof text, "%s: %s", prefix, formatted);
	} else {
		snprintf(text, sizeof text, "%s: %s", prefix, strerror(rc < 0 ? -rc : rc));
	}
	print_one_line(text);
	return CLI_EXIT_FAILURE;
}

/* ---- options -------------------------------------------------------------------- */

int cli_parse(int argc, char **argv, const struct cli_syntax *syntax, char ***positional,
	      int *positional_count)
{
	const char *command = argv[0];
	const struct cli_option *options = syntax->options;
	size_t option_count = syntax->option_count;
	struct option long_options[option_count + 2];
	char short_options[2 * option_count + 4];
	size_t short_length = 0;

	short_options[short_length++] = ':';   /* report a missing value as ':' */
	short_options[short_length++] = 'h';
	for (size_t i = 0; i < option_count; i++) {
		long_options[i] = (struct option){
			.name = options[i].long_name,
			.has_arg = options[i].value ? required_argument : no_argument,
			.flag = NULL,
			.val = 256 + (int)i,
		};
		if (options[i].short_name) {
			short_options[short_length++] = options[i].short_name;
			if (options[i].value)
				short_options[short_length++] = ':';
		}
	}
	short_options[short_length] = '\0';
	long_options[option_count] = (struct option){ "help", no_argument, NULL, 'h' };
	long_options[option_count + 1] = (struct option){ NULL, 0, NULL, 0 };

	optind = 0;   /* GNU: reinitialise, so each command parses from scratch */
	opterr = 0;
	for (;;) {
		int index = -1;
		int found = getopt_long(argc, argv, short_options, long_options, &index);
		if (found == -1)
			break;
		if (found == 'h') {
			fputs(syntax->usage, stdout);
			return CLI_EXIT_OK;
		}
		if (found == '?' || found == ':') {
			const char *given = argv[optind - 1];
			if (found == ':')
				return cli_usage_error(command, "option '%s' needs a value", given);
			return cli_usage_error(command, "unknown option '%s'", given);
		}
		size_t which = option_count;
		if (found >= 256) {
			which = (size_t)(found - 256);
		} else {
			for (size_t i = 0; i < option_count; i++)
				if (options[i].short_name == found)
					which = i;
		}
		if (which == option_count)
			return cli_usage_error(command, "unknown option '%s'", argv[optind - 1]);
		if (options[which].value)
			*options[which].value = optarg;
		else if (options[which].flag)
			*options[which].flag = true;
	}
	int count = argc - optind;
	int status = cli_expect_arguments(command, count, syntax->minimum, syntax->maximum);
	if (status != 0)
		return status;
	*positional = argv + optind;
	if (positional_count)
		*positional_count = count;
	return -1;
}

int cli_expect_arguments(const char *command, int count, int minimum, int maximum)
{
	if (count < minimum)
		return cli_usage_error(command, "missing argument%s", minimum - count > 1 ? "s" : "");
	if (count > maximum)
		return cli_usage_error(command, "too many arguments");
	return 0;
}

/* ---- the store ---------------------------------------------------------------------- */

int cli_store_open(const char *path, bool read_only, struct store **out)
{
	struct error_info error;
	struct store_options options = { .read_only = read_only };
	error_info_clear(&error);
	int rc = store_open(path, &options, out, &error);
	if (rc == 0)
		return 0;
	*out = NULL;
	if (error.message[0] == '\0' && (rc == -ENOENT || rc == -ENOTDIR))
		return cli_fail("%s is not a graphfs store (create one with 'graphfs init %s')", path,
				path);
	return cli_fail_error(rc, &error, "cannot open the store %s", path);
}

int cli_parse_and_open(int argc, char **argv, const struct cli_syntax *syntax, bool read_only,
		       char ***positional, struct store **store)
{
	int status = cli_parse(argc, argv, syntax, positional, NULL);
	if (status >= 0)
		return status;
	status = cli_store_open((*positional)[0], read_only, store);
	return status != 0 ? status : -1;
}

int cli_run_on_store(int argc, char **argv, const char *usage, bool read_only,
		     int (*run)(struct store *store, const char *path))
{
	const struct cli_syntax syntax = { usage, NULL, 0, 1, 1 };
	char **positional;
	struct store *store;
	int status = cli_parse_and_open(argc, argv, &syntax, read_only, &positional, &store);
	if (status >= 0)
		return status;
	status = run(store, positional[0]);
	store_close(store);
	return status;
}

int cli_resolve_at(const char *command, struct store *store, const char *at, const char **branch,
		   uint64_t *version)
{
	*version = STORE_LATEST;
	if (!at)
		return 0;
	struct store_at parsed;
	struct error_info error;
	error_info_clear(&error);
	int rc = store_at_parse(at, &parsed, &error);
	if (rc < 0)
		return cli_usage_error(command, "--at %s: %s", at, error.message);
	switch (parsed.kind) {
	case STORE_AT_VERSION:
		*version = parsed.version;
		return 0;
	case STORE_AT_TIME:
		rc = store_version_at_time(store, *branch, parsed.time_us, version, &error);
		return rc < 0 ? cli_fail_error(rc, &error, "--at %s", at) : 0;
	case STORE_AT_TAG: {
		/* static: *branch points into it for the rest of the command (one --at per run) */
		static struct store_tag_info tag;
		rc = store_tag_find(store, parsed.tag, &tag);
		if (rc == -ENOENT)
			return cli_fail("--at %s: there is no version, time or tag named '%s' (list tags with 'graphfs tag %s list')",
					at, at, store_path(store));
		if (rc < 0)
			return cli_fail("--at %s: cannot read the tag: %s", at, strerror(-rc));
		*branch = tag.branch;
		*version = tag.version;
		return 0;
	}
	}
	return 0;
}

int cli_reading_open(int argc, char **argv, const char *usage, int argument_count,
		     struct cli_reading *out)
{
	const char *at = NULL;
	out->branch = "main";
	const struct cli_option options[] = {
		{ "branch", 0, &out->branch, NULL },
		{ "at", 0, &at, NULL },
	};
	const struct cli_syntax syntax = { usage, options, 2, argument_count, argument_count };
	int status = cli_parse(argc, argv, &syntax, &out->arguments, NULL);
	if (status >= 0)
		return status;
	status = cli_store_open(out->arguments[0], true, &out->store);
	if (status != 0)
		return status;
	if ((status = cli_resolve_at(argv[0], out->store, at, &out->branch, &out->version)) != 0) {
		store_close(out->store);
		out->store = NULL;
		return status;
	}
	return -1;
}

int cli_condition_parse(const char *command, const char *if_version, const char *if_commit,
			struct store_condition *out)
{
	struct error_info error;
	error_info_clear(&error);
	if (store_condition_parse(if_version, if_commit, out, &error) < 0)
		return cli_usage_error(command, "%s", error.message);
	return 0;
}

int cli_snapshot_open(struct store *store, const char *branch, uint64_t version,
		      struct store_snapshot **out)
{
	struct error_info error;
	error_info_clear(&error);
	int rc = store_snapshot_open(store, branch, version, out, &error);
	if (rc == 0)
		return 0;
	*out = NULL;
	if (error.message[0] == '\0' && rc == -ENOENT) {
		if (version == STORE_LATEST)
			return cli_fail("there is no branch '%s' (list them with 'graphfs branch %s list')",
					branch, store_path(store));
		return cli_fail("branch '%s' has no version %llu (the store's latest version is %llu)",
				branch, (unsigned long long)version, (unsigned long long)store_version(store));
	}
	if (version == STORE_LATEST)
		return cli_fail_error(rc, &error, "cannot read branch '%s'", branch);
	return cli_fail_error(rc, &error, "cannot read branch '%s' at version %llu", branch,
			      (unsigned long long)version);
}

/* ---- output -------------------------------------------------------------------------- */

int cli_write_all(int fd, const void *bytes, size_t size)
{
	const char *position = bytes;
	while (size > 0) {
		ssize_t written = write(fd, position, size);
		if (written < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		position += written;
		size -= (size_t)written;
	}
	return 0;
}

/* GRAPHFS_IO_REPORT=FILE: append this process's I/O counters (store_counters_json) to FILE
 * as one line, for benchmarks and tests that count requests, pages and bytes. */
static void io_report(void)
{
	const char *path = getenv("GRAPHFS_IO_REPORT");
	if (!path || !*path)
		return;
	struct buf json;
	buf_init(&json);
	FILE *out = NULL;
	if (store_counters_json(&json) == 0 && (out = fopen(path, "a"))) {
		fwrite(json.data, 1, json.size, out);
		fputc('\n', out);
	}
	if (out)
		fclose(out);
	buf_free(&json);
}

int cli_finish_stdout(int status)
{
	io_report();
	if (fflush(stdout) != 0 || ferror(stdout))
		return cli_fail("cannot write to standard output: %s", strerror(errno));
	return status;
}

void cli_lines_init(struct cli_lines *lines)
{
	buf_init(&lines->line);
	lines->rc = 0;
}

int cli_lines_write(struct cli_lines *lines, int rendered)
{
	int rc = rendered;
	if (rc == 0 && fwrite(lines->line.data, 1, lines->line.size, stdout) != lines->line.size)
		rc = -EIO;
	buf_reset(&lines->line);
	if (rc < 0 && lines->rc == 0)
		lines->rc = rc;
	return rc;
}

int cli_lines_finish(struct cli_lines *lines, int walked)
{
	buf_free(&lines->line);
	if (walked == 0 && lines->rc < 0)
		return lines->rc;
	return walked;
}

/* ---- progress bar ----------------------------------------------------------------------- */

static uint64_t now_us(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000000u + (uint64_t)now.tv_nsec / 1000u;
}

/* "12.3 MiB" */
static void format_bytes(uint64_t bytes, char *out, size_t size)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double value = (double)bytes;
	size_t unit = 0;
	while (value >= 1024.0 && unit + 1 < sizeof units / sizeof units[0]) {
		value /= 1024.0;
		unit++;
	}
	if (unit == 0)
		snprintf(out, size, "%llu B", (unsigned long long)bytes);
	else
		snprintf(out, size, "%.1f %s", value, units[unit]);
}

/* bytes, or a count of the bar's unit */
static void format_amount(const struct cli_progress *progress, uint64_t amount, char *out, size_t size)
{
	if (progress->unit)
		snprintf(out, size, "%llu %s", (unsigned long long)amount, progress->unit);
	else
		format_bytes(amount, out, size);
}

static void progress_draw(struct cli_progress *progress, uint64_t done, uint64_t total)
{
	enum { WIDTH = 30 };
	char done_text[48];
	char line[160];
	format_amount(progress, done, done_text, sizeof done_text);
	if (total > 0) {
		if (done > total)
			done = total;
		char total_text[48];
		format_amount(progress, total, total_text, sizeof total_text);
		unsigned filled = (unsigned)((double)done / (double)total * WIDTH);
		unsigned percent = (unsigned)((double)done / (double)total * 100.0);
		char bar[WIDTH + 1];
		for (unsigned i = 0; i < WIDTH; i++)
			bar[i] = i < filled ? '#' : '.';
		bar[WIDTH] = '\0';
		snprintf(line, sizeof line, "\r%s [%s] %3u%% %s / %s\033[K", progress->label, bar,
			 percent, done_text, total_text);
	} else {
		snprintf(line, sizeof line, "\r%s %s\033[K", progress->label, done_text);
	}
	cli_write_all(STDERR_FILENO, line, strlen(line));
	progress->drawn = true;
}

void cli_progress_begin(struct cli_progress *progress, const char *label, uint64_t total)
{
	progress->enabled = isatty(STDERR_FILENO) == 1;
	progress->label = label;
	progress->drawn = false;
	progress->unit = NULL;
	progress->total_seen = total;
	progress->last_draw_us = now_us();
	if (progress->enabled)
		progress_draw(progress, 0, total);
}

void cli_progress_begin_counting(struct cli_progress *progress, const char *label, const char *unit, uint64_t total)
{
	cli_progress_begin(progress, label, total);
	progress->unit = unit;
}

void cli_progress_update(uint64_t done, uint64_t total, void *context)
{
	struct cli_progress *progress = context;
	if (!progress->enabled)
		return;
	if (total > 0)
		progress->total_seen = total;
	uint64_t now = now_us();
	if (now - progress->last_draw_us < 100000 && !(total > 0 && done >= total))
		return;
	progress->last_draw_us = now;
	progress_draw(progress, done, total);
}

void cli_progress_clear(struct cli_progress *progress)
{
	if (!progress->enabled || !progress->drawn)
		return;
	cli_write_all(STDERR_FILENO, "\r\033[K", 4);
	progress->drawn = false;
}

void cli_progress_end(struct cli_progress *progress, bool success, uint64_t total)
{
	if (!progress->enabled)
		return;
	if (total == 0)
		total = progress->total_seen;
	if (success)
		progress_draw(progress, total, total);
	if (progress->drawn)
		cli_write_all(STDERR_FILENO, "\n", 1);
	progress->drawn = false;
}
