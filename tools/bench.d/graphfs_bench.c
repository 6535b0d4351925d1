/*
 * graphfs-bench — the benchmark driver behind tools/bench: one long-lived
 * process that makes many commits through libgraphfs (core/store.h), so that
 * neither process startup nor the CLI is part of what is measured.
 *
 *   graphfs-bench commits STORE COUNT [--tables N] [--prefix P] [--distinct] [--progress]
 *                 [--block-cache BYTES]
 *       COUNT one-row merge commits, each its own transaction (begin, one
 *       writer, one line, commit: one durable publish). Commit i writes
 *       {"id":"r","value":V} (--distinct: id "r<V>", a new row each time)
 *       to table P<k> with k = (version before the run
 *       + i) mod N, the table name being P followed by k on two digits (a
 *       round robin over N tables that continues across runs; the first
 *       commit to a name creates it). Prints one JSON object: commits, seconds,
 *       mean_ms, median_ms, p90_ms, max_ms, cpu_ms (CPU time per commit, user +
 *       system), first_version, last_version, and
 *       stats_before / stats_after (store_stats_json after the open and after
 *       the last commit: their difference is the I/O of the commits).
 *       --block-cache BYTES: the store's block cache (default 32 MiB, what a
 *       mount keeps; 0: none, every manifest page read again).
 *
 *   graphfs-bench serve STORE [--tables N] [--prefix P]
 *       The same commits, one per line "commit" read from standard input,
 *       each answered with "ok VERSION NANOSECONDS\n" (flushed) once it is
 *       durable: tools/bench alternates single commits between this process,
 *       another one and sqlite3, so that every peer sees the same disk.
 *       At end of input, prints the stats_before / stats_after object.
 *
 *   graphfs-bench tables STORE COUNT ROWS
 *       One commit that creates COUNT tables N0000.. each with ROWS rows.
 *
 *   graphfs-bench heads STORE
 *       Opens the store read-only, resolves every live head of main, and
 *       prints {"heads":N,"stats":<store_stats_json>}: the I/O of an open plus
 *       the head lookups, from the library's own counters.
 *
 *   graphfs-bench merge STORE SOURCE DEST [--dry-run]
 *       Merges branch SOURCE into DEST (core/store.h store_merge) and prints
 *       {"outcome","conflicts","seconds","stats_before","stats_after"}: the
 *       I/O of the merge alone, from the library's counters.
 *
 *   graphfs-bench diff STORE A B TABLE
 *       The row diff of TABLE from A to B (store_diff_rows): prints
 *       {"lines","seconds","stats_before","stats_after"}.
 *
 * Exit status 0, 1 on a store error (message on stderr), 2 on usage errors.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "store.h"

static const char usage[] =
	"usage: graphfs-bench commits STORE COUNT [--tables N] [--prefix P] [--distinct] [--progress]\n"
	"                     [--block-cache BYTES]\n"
	"       graphfs-bench serve STORE [--tables N] [--prefix P]\n"
	"       graphfs-bench tables STORE COUNT ROWS\n"
	"       graphfs-bench heads STORE\n"
	"       graphfs-bench merge STORE SOURCE DEST [--dry-run]\n"
	"       graphfs-bench diff STORE A B TABLE\n";

static uint64_t clock_ns(clockid_t clock)
{
	struct timespec now;
	clock_gettime(clock, &now);
	return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

/* CPU time (user + system) this process has used, in nanoseconds. */
static uint64_t cpu_ns(void)
{
	struct rusage resources;
	getrusage(RUSAGE_SELF, &resources);
	return ((uint64_t)resources.ru_utime.tv_sec + (uint64_t)resources.ru_stime.tv_sec) * 1000000000u +
	       ((uint64_t)resources.ru_utime.tv_usec + (uint64_t)resources.ru_stime.tv_usec) * 1000u;
}

static int fail(const char *what, int rc, const struct error_info *error)
{
	char message[1024];
	if (error != NULL && error->code != 0)
		fprintf(stderr, "graphfs-bench: %s: %s\n", what,
			error_info_format(error, message, sizeof message));
	else
		fprintf(stderr, "graphfs-bench: %s: %s\n", what, strerror(-rc));
	return 1;
}

static bool parse_count(const char *text, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long value = strtoull(text, &end, 10);
	if (errno != 0 || end == text || *end != '\0')
		return false;
	*out = value;
	return true;
}

static int compare_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static void trim_newlines(struct buf *text)
{
	while (text->size > 0 && text->data[text->size - 1] == '\n')
		text->size--;
}

/* One transaction: a merge of one line into table (id "r", or "r<value>" when distinct).
 * Returns 0 or -errno. */
static int commit_one_row(struct store *store, const char *table, uint64_t value, bool distinct,
			  struct error_info *error)
{
	struct store_txn *txn = NULL;
	struct store_writer *writer;
	struct store_commit_result result;
	char line[96];
	int length = distinct ? snprintf(line, sizeof line, "{\"id\":\"r%08" PRIu64 "\",\"value\":%" PRIu64 "}\n",
					 value, value)
			      : snprintf(line, sizeof line, "{\"id\":\"r\",\"value\":%" PRIu64 "}\n", value);
	int rc = store_txn_begin(store, "main", &txn, error);
	if (rc < 0)
		goto out;
	if ((rc = store_txn_writer(txn, table, STORE_MERGE, 0, NULL, &writer, error)) < 0)
		goto out;
	if ((rc = store_writer_write(writer, line, (size_t)length, error)) < 0)
		goto out;
	rc = store_txn_commit(txn, "bench", &result, error);
out:
	if (txn != NULL)
		store_txn_free(txn);
	return rc;
}

static int run_commits(int argc, char **argv)
{
	/* a long-lived writer keeps verified manifest blocks as a mount does (its default) */
	uint64_t count, tables = 32, block_cache = 32u << 20;
	const char *prefix = "T";
	bool progress = false, distinct = false;
	if (argc < 4 || !parse_count(argv[3], &count))
		goto usage;
	for (int i = 4; i < argc; i++) {
		if (strcmp(argv[i], "--tables") == 0 && i + 1 < argc) {
			if (!parse_count(argv[++i], &tables) || tables == 0)
				goto usage;
		} else if (strcmp(argv[i], "--prefix") == 0 && i + 1 < argc) {
			prefix = argv[++i];
		} else if (strcmp(argv[i], "--block-cache") == 0 && i + 1 < argc) {
			if (!parse_count(argv[++i], &block_cache))
				goto usage;
		} else if (strcmp(argv[i], "--distinct") == 0) {
			distinct = true;
		} else if (strcmp(argv[i], "--progress") == 0) {
			progress = true;
		} else {
			goto usage;
		}
	}

	struct error_info error;
	error_info_clear(&error);
	struct store *store;
	struct store_options options = { .block_cache = (size_t)block_cache };
	int rc = store_open(argv[2], &options, &store, &error);
	if (rc < 0)
		return fail(argv[2], rc, &error);
	uint64_t *latencies = calloc(count ? count : 1, sizeof *latencies);
	if (latencies == NULL) {
		store_close(store);
		return fail("memory", -ENOMEM, NULL);
	}
	uint64_t first_version = store_version(store);
	struct buf stats_before, stats_after;
	buf_init(&stats_before);
	buf_init(&stats_after);
	if (store_stats_json(store, &stats_before) < 0) {
		free(latencies);
		store_close(store);
		return fail("memory", -ENOMEM, NULL);
	}
	uint64_t start = clock_ns(CLOCK_MONOTONIC);
	uint64_t cpu_start = cpu_ns();
	int status = 0;
	for (uint64_t i = 0; i < count; i++) {
		char table[160];
		snprintf(table, sizeof table, "%s%02" PRIu64, prefix, (first_version + i) % tables);
		uint64_t before = clock_ns(CLOCK_MONOTONIC);
		rc = commit_one_row(store, table, first_version + i + 1, distinct, &error);
		latencies[i] = clock_ns(CLOCK_MONOTONIC) - before;
		if (rc < 0) {
			status = fail(table, rc, &error);
			count = i;
			break;
		}
		if (progress && count >= 10 && (i + 1) % (count / 10) == 0)
			fprintf(stderr, "graphfs-bench: %" PRIu64 "/%" PRIu64 " commits\n", i + 1, count);
	}
	uint64_t elapsed = clock_ns(CLOCK_MONOTONIC) - start;
	uint64_t cpu = cpu_ns() - cpu_start;
	uint64_t last_version = store_version(store);
	if (store_stats_json(store, &stats_after) < 0 && status == 0)
		status = fail("memory", -ENOMEM, NULL);
	store_close(store);
	trim_newlines(&stats_before);
	trim_newlines(&stats_after);

	if (count > 0) {
		qsort(latencies, count, sizeof *latencies, compare_u64);
		printf("{\"commits\":%" PRIu64 ",\"seconds\":%.6f,\"mean_ms\":%.4f,\"median_ms\":%.4f,"
		       "\"p90_ms\":%.4f,\"max_ms\":%.4f,\"cpu_ms\":%.4f,\"first_version\":%" PRIu64
		       ",\"last_version\":%" PRIu64 ",\"stats_before\":%.*s,\"stats_after\":%.*s}\n",
		       count, elapsed / 1e9, elapsed / 1e6 / (double)count, latencies[count / 2] / 1e6,
		       latencies[count * 9 / 10] / 1e6, latencies[count - 1] / 1e6, cpu / 1e6 / (double)count,
		       first_version,
		       last_version, (int)stats_before.size, (const char *)stats_before.data,
		       (int)stats_after.size, (const char *)stats_after.data);
	}
	free(latencies);
	buf_free(&stats_before);
	buf_free(&stats_after);
	return status;
usage:
	fputs(usage, stderr);
	return 2;
}

static int run_serve(int argc, char **argv)
{
	uint64_t tables = 32;
	const char *prefix = "T";
	for (int i = 3; i < argc; i++) {
		if (strcmp(argv[i], "--tables") == 0 && i + 1 < argc) {
			if (!parse_count(argv[++i], &tables) || tables == 0)
				goto usage;
		} else if (strcmp(argv[i], "--prefix") == 0 && i + 1 < argc) {
			prefix = argv[++i];
		} else {
			goto usage;
		}
	}
	struct error_info error;
	error_info_clear(&error);
	struct store *store;
	int rc = store_open(argv[2], NULL, &store, &error);
	if (rc < 0)
		return fail(argv[2], rc, &error);
	struct buf stats_before, stats_after;
	buf_init(&stats_before);
	buf_init(&stats_after);
	int status = 0;
	if (store_stats_json(store, &stats_before) < 0)
		status = fail("memory", -ENOMEM, NULL);
	char command[64];
	while (status == 0 && fgets(command, sizeof command, stdin) != NULL) {
		if (strcmp(command, "commit\n") != 0) {
			status = fail("serve", -EINVAL, NULL);
			break;
		}
		uint64_t version = store_version(store);
		char table[160];
		snprintf(table, sizeof table, "%s%02" PRIu64, prefix, version % tables);
		uint64_t before = clock_ns(CLOCK_MONOTONIC);
		rc = commit_one_row(store, table, version + 1, false, &error);
		uint64_t elapsed = clock_ns(CLOCK_MONOTONIC) - before;
		if (rc < 0) {
			status = fail(table, rc, &error);
			break;
		}
		printf("ok %" PRIu64 " %" PRIu64 "\n", store_version(store), elapsed);
		fflush(stdout);
	}
	if (status == 0 && store_stats_json(store, &stats_after) < 0)
		status = fail("memory", -ENOMEM, NULL);
	store_close(store);
	if (status == 0) {
		trim_newlines(&stats_before);
		trim_newlines(&stats_after);
		printf("{\"stats_before\":%.*s,\"stats_after\":%.*s}\n", (int)stats_before.size,
		       (const char *)stats_before.data, (int)stats_after.size, (const char *)stats_after.data);
	}
	buf_free(&stats_before);
	buf_free(&stats_after);
	return status;
usage:
	fputs(usage, stderr);
	return 2;
}

static int run_tables(int argc, char **argv)
{
	uint64_t count, rows;
	if (argc != 5 || !parse_count(argv[3], &count) || !parse_count(argv[4], &rows))
		goto usage;
	struct error_info error;
	error_info_clear(&error);
	struct store *store;
	struct store_txn *txn = NULL;
	struct store_commit_result result;
	int rc = store_open(argv[2], NULL, &store, &error);
	if (rc < 0)
		return fail(argv[2], rc, &error);
	if ((rc = store_txn_begin(store, "main", &txn, &error)) < 0)
		goto out;
	for (uint64_t t = 0; t < count; t++) {
		char table[32];
		snprintf(table, sizeof table, "N%04" PRIu64, t);
		struct store_writer *writer;
		if ((rc = store_txn_writer(txn, table, STORE_OVERWRITE, 0, NULL, &writer, &error)) < 0)
			goto out;
		for (uint64_t r = 0; r < rows; r++) {
			char line[128];
			int length = snprintf(line, sizeof line,
					      "{\"id\":\"n%" PRIu64 "\",\"name\":\"node %" PRIu64 " of %s\"}\n",
					      r, r, table);
			if ((rc = store_writer_write(writer, line, (size_t)length, &error)) < 0)
				goto out;
		}
	}
	rc = store_txn_commit(txn, "bench: tables", &result, &error);
out:
	if (txn != NULL)
		store_txn_free(txn);
	store_close(store);
	if (rc < 0)
		return fail("tables", rc, &error);
	printf("{\"tables\":%" PRIu64 ",\"version\":%" PRIu64 "}\n", count, result.version);
	return 0;
usage:
	fputs(usage, stderr);
	return 2;
}

static int count_head(const struct head_row *head, void *context)
{
	(void)head;
	(*(uint64_t *)context)++;
	return 0;
}

static int run_heads(int argc, char **argv)
{
	if (argc != 3) {
		fputs(usage, stderr);
		return 2;
	}
	struct error_info error;
	error_info_clear(&error);
	struct store_options options = { .read_only = true };
	struct store *store;
	struct store_snapshot *snapshot = NULL;
	uint64_t heads = 0;
	struct buf stats;
	buf_init(&stats);
	int rc = store_open(argv[2], &options, &store, &error);
	if (rc < 0)
		return fail(argv[2], rc, &error);
	if ((rc = store_snapshot_open(store, "main", STORE_LATEST, &snapshot, &error)) < 0)
		goto out;
	if ((rc = store_snapshot_heads(snapshot, false, count_head, &heads)) < 0)
		goto out;
	if ((rc = store_stats_json(store, &stats)) < 0)
		goto out;
	trim_newlines(&stats);
	printf("{\"heads\":%" PRIu64 ",\"stats\":%.*s}\n", heads, (int)stats.size, (const char *)stats.data);
out:
	if (snapshot != NULL)
		store_snapshot_release(snapshot);
	store_close(store);
	buf_free(&stats);
	return rc < 0 ? fail("heads", rc, &error) : 0;
}

static int run_merge(int argc, char **argv)
{
	bool dry_run = argc == 6 && strcmp(argv[5], "--dry-run") == 0;
	if (argc != 5 && !dry_run) {
		fputs(usage, stderr);
		return 2;
	}
	struct error_info error;
	error_info_clear(&error);
	struct store *store;
	struct buf before, after;
	buf_init(&before);
	buf_init(&after);
	int rc = store_open(argv[2], NULL, &store, &error);
	if (rc < 0)
		return fail(argv[2], rc, &error);
	struct store_merge_options options = { .dry_run = dry_run };
	struct store_merge_result result;
	rc = store_stats_json(store, &before);
	uint64_t start = clock_ns(CLOCK_MONOTONIC);
	if (rc == 0)
		rc = store_merge(store, argv[3], argv[4], &options, NULL, NULL, &result, &error);
	uint64_t elapsed = clock_ns(CLOCK_MONOTONIC) - start;
	if (rc == 0)
		rc = store_stats_json(store, &after);
	if (rc == 0) {
		trim_newlines(&before);
		trim_newlines(&after);
		printf("{\"outcome\":\"%s\",\"conflicts\":%" PRIu64 ",\"seconds\":%.6f,\"stats_before\":%.*s,"
		       "\"stats_after\":%.*s}\n",
		       store_merge_outcome_name(result.outcome), result.conflicts, (double)elapsed / 1e9, (int)before.size,
		       (const char *)before.data, (int)after.size, (const char *)after.data);
	}
	store_close(store);
	buf_free(&before);
	buf_free(&after);
	return rc < 0 ? fail("merge", rc, &error) : 0;
}

static int count_line(const char *line, size_t size, void *context)
{
	(void)line;
	(void)size;
	(*(uint64_t *)context)++;
	return 0;
}

static int run_diff(int argc, char **argv)
{
	if (argc != 6) {
		fputs(usage, stderr);
		return 2;
	}
	struct error_info error;
	error_info_clear(&error);
	struct store_options options = { .read_only = true };
	struct store *store;
	struct store_snapshot *a = NULL, *b = NULL;
	struct buf before, after;
	buf_init(&before);
	buf_init(&after);
	uint64_t lines = 0, elapsed = 0;
	int rc = store_open(argv[2], &options, &store, &error);
	if (rc < 0)
		return fail(argv[2], rc, &error);
	if ((rc = store_snapshot_open_named(store, "main", argv[3], &a, &error)) < 0 ||
	    (rc = store_snapshot_open_named(store, "main", argv[4], &b, &error)) < 0 ||
	    (rc = store_stats_json(store, &before)) < 0)
		goto out;
	uint64_t start = clock_ns(CLOCK_MONOTONIC);
	rc = store_diff_rows(a, b, argv[5], count_line, &lines);
	elapsed = clock_ns(CLOCK_MONOTONIC) - start;
	if (rc == 0)
		rc = store_stats_json(store, &after);
	if (rc == 0) {
		trim_newlines(&before);
		trim_newlines(&after);
		printf("{\"lines\":%" PRIu64 ",\"seconds\":%.6f,\"stats_before\":%.*s,\"stats_after\":%.*s}\n", lines,
		       (double)elapsed / 1e9, (int)before.size, (const char *)before.data, (int)after.size,
		       (const char *)after.data);
	}
out:
	if (a)
		store_snapshot_release(a);
	if (b)
		store_snapshot_release(b);
	store_close(store);
	buf_free(&before);
	buf_free(&after);
	return rc < 0 ? fail("diff", rc, &error) : 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "merge") == 0)
		return run_merge(argc, argv);
	if (argc >= 3 && strcmp(argv[1], "diff") == 0)
		return run_diff(argc, argv);
	if (argc >= 3 && strcmp(argv[1], "commits") == 0)
		return run_commits(argc, argv);
	if (argc >= 3 && strcmp(argv[1], "serve") == 0)
		return run_serve(argc, argv);
	if (argc >= 3 && strcmp(argv[1], "tables") == 0)
		return run_tables(argc, argv);
	if (argc >= 3 && strcmp(argv[1], "heads") == 0)
		return run_heads(argc, argv);
	fputs(usage, stderr);
	return 2;
}
