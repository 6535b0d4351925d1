/*
 * test_recovery — the crash matrix and recovery (core/manifest.h states,
 * docs/FORMAT.md §17–18): a child process crashes at every failpoint of the
 * commit path; the store then opens to exactly the state before or after the
 * commit, verify is clean, no sidecar or orphan segment is left, and opening
 * again changes nothing. Also: crashes during recovery, sidecar versions,
 * abandoned intents, and concurrent writer processes.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "manifest_fixture.h"
#include "manifest_int.h"
#include "store.h"

/* ---- observing a store ------------------------------------------------------------ */

struct observed {
	uint64_t version;
	struct buf heads;       /* every head of main (live, then tombstoned), encoded */
	struct buf segments;    /* ls segments/ */
	struct buf sidecars;    /* ls recovery/ */
	int findings;
};

/* Appends one head row, preceded by its u32 length. */
static int encode_head(const struct head_row *head, void *context)
{
	struct buf *out = context;
	size_t start = out->size;
	int rc = buf_put_u32(out, 0);
	if (rc == 0)
		rc = journal_head_row_encode(head, out);
	if (rc == 0)
		buf_store_u32(out->data + start, (uint32_t)(out->size - start - 4));
	return rc;
}

static void print_finding(const char *finding, void *context)
{
	(void)context;
	fprintf(stderr, "    finding: %s\n", finding);
}

/* Opens the store read-write (running recovery) and records what it holds. */
static int observe(struct observed *out)
{
	memset(out, 0, sizeof *out);
	buf_init(&out->heads);
	buf_init(&out->segments);
	buf_init(&out->sidecars);
	struct manifest *manifest;
	int rc = fixture_open(&manifest);
	if (rc < 0)
		return rc;
	struct manifest_snapshot snapshot;
	out->version = fixture_version(manifest);
	rc = manifest_snapshot_latest(manifest, "main", &snapshot);
	if (rc == 0)
		rc = manifest_heads_each(manifest, &snapshot, false, encode_head, &out->heads);
	if (rc == 0)
		rc = manifest_heads_each(manifest, &snapshot, true, encode_head, &out->heads);
	out->findings = manifest_verify(manifest, print_finding, NULL, NULL, NULL);
	manifest_close(manifest);
	fixture_list("segments", &out->segments);
	fixture_list("recovery", &out->sidecars);
	return rc;
}

static void observed_free(struct observed *observed)
{
	buf_free(&observed->heads);
	buf_free(&observed->segments);
	buf_free(&observed->sidecars);
}

static bool same_bytes(const struct buf *a, const struct buf *b)
{
	return a->size == b->size && (a->size == 0 || memcmp(a->data, b->data, a->size) == 0);
}

static void store_reset(void)
{
	char command[4400];
	snprintf(command, sizeof command, "rm -rf '%s'", fixture_store_path());
	if (system(command) != 0)
		abort();
}

/* ---- forked children and their stderr ------------------------------------------------------ */

/*
 * Every process a test forks writes its descriptor 2 into a memory file of
 * its own (memfd), not /dev/null: with /dev/null, a child that died of a
 * sanitizer error or printed why its work failed looked like any other
 * crash. When the test ends, each child that did not exit with the code the
 * test expects, or wrote anything at all, is printed: how it ended and every
 * line of its stderr, headed by what it was doing. A healthy child writes
 * nothing, so a sanitizer report that did not stop a child is shown too.
 * When the test failed, its last child is printed as well, and the other
 * quiet ones are counted. A child exiting with an unexpected code always
 * fails its test too: the callers CHECK the code child_wait returns.
 *
 * Invariants of the list below:
 *  1. It holds the children forked since the current test began
 *     (CHILDREN_TEST resets it); every entry's log is open or -1.
 *  2. An entry with log -1 had no memory file: that child wrote to the
 *     test's own stderr, so nothing of it is lost.
 *  3. waited is true once the child was reaped; status is then its waitpid status.
 */
struct child {
	pid_t pid;
	int log;
	int expected;
	int status;
	bool waited;
	char what[160];
};

static struct child *children;
static size_t child_count, child_capacity;

/*
 * fork() for a child doing what (a printf format) that should exit with
 * expected. Returns 0 in the child, whose descriptor 2 is then its log; the
 * child's pid in the parent; -1 when fork failed (nothing is recorded).
 */
__attribute__((format(printf, 2, 3))) static pid_t child_fork(int expected, const char *format, ...)
{
	if (child_count == child_capacity) {
		size_t capacity = child_capacity ? 2 * child_capacity : 16;
		struct child *grown = realloc(children, capacity * sizeof *grown);
		if (!grown)
			return -1;
		children = grown;
		child_capacity = capacity;
	}
	struct child *child = &children[child_count];
	*child = (struct child){ .log = -1, .expected = expected };
	va_list arguments;
	va_start(arguments, format);
	vsnprintf(child->what, sizeof child->what, format, arguments);
	va_end(arguments);
	child->log = memfd_create("graphfs-test-child-stderr", MFD_CLOEXEC);
	fflush(NULL);
	child->pid = fork();
	if (child->pid == 0) {
		if (child->log >= 0)
			dup2(child->log, 2);
		return 0;
	}
	if (child->pid < 0) {
		if (child->log >= 0)
			close(child->log);
		return -1;
	}
	child_count++;
	return child->pid;
}

/* Reaps child pid: its exit code, or -1 when it was killed by a signal or is not a child of this test. */
static int child_wait(pid_t pid)
{
	for (size_t i = 0; i < child_count; i++) {
		struct child *child = &children[i];
		if (child->pid != pid || child->waited)
			continue;
		if (waitpid(pid, &child->status, 0) != pid)
			return -1;
		child->waited = true;
		return WIFEXITED(child->status) ? WEXITSTATUS(child->status) : -1;
	}
	return -1;
}

/* Prints how child ended and every line of its stderr, each headed by what it was doing. */
static void child_print(const struct child *child)
{
	if (!child->waited)
		fprintf(stderr, "    child (%s): could not be waited for\n", child->what);
	else if (WIFEXITED(child->status) && WEXITSTATUS(child->status) == child->expected)
		fprintf(stderr, "    child (%s): exited %d as expected\n", child->what, child->expected);
	else if (WIFEXITED(child->status))
		fprintf(stderr, "    child (%s): exited %d, expected %d\n", child->what, WEXITSTATUS(child->status),
			child->expected);
	else if (WIFSIGNALED(child->status))
		fprintf(stderr, "    child (%s): killed by signal %d (%s), expected exit %d\n", child->what,
			WTERMSIG(child->status), strsignal(WTERMSIG(child->status)), child->expected);
	if (child->log < 0)
		return;
	FILE *log = fdopen(dup(child->log), "r");
	if (!log)
		return;
	rewind(log);
	char *line = NULL;
	size_t capacity = 0;
	ssize_t length;
	while ((length = getline(&line, &capacity, log)) > 0) {
		if (line[length - 1] == '\n')
			line[--length] = 0;
		fprintf(stderr, "    child (%s): %s\n", child->what, line);
	}
	free(line);
	fclose(log);
}

/*
 * Ends the current test's children: reaps any not yet waited for, prints
 * those that ended unexpectedly or wrote anything (and, when test_failed, the
 * last one and a count of the others), closes their logs and empties the list.
 */
static void children_end(bool test_failed)
{
	size_t quiet = 0;
	for (size_t i = 0; i < child_count; i++) {
		struct child *child = &children[i];
		if (!child->waited && waitpid(child->pid, &child->status, 0) == child->pid)
			child->waited = true;
		bool expected = child->waited && WIFEXITED(child->status) &&
				WEXITSTATUS(child->status) == child->expected;
		struct stat log_status;
		bool wrote = child->log >= 0 && fstat(child->log, &log_status) == 0 && log_status.st_size > 0;
		if (!expected || wrote || (test_failed && i + 1 == child_count))
			child_print(child);
		else if (test_failed)
			quiet++;
		if (child->log >= 0)
			close(child->log);
	}
	if (quiet)
		fprintf(stderr, "    %zu other children of this test exited as expected and wrote nothing\n", quiet);
	child_count = 0;
}

/*
 * A test that forks: TEST(name), whose forked children are ended by
 * children_end when its body returns (also through a failed CHECK).
 */
#define CHILDREN_TEST(name)                                                  \
	static void children_test_##name(void);                              \
	TEST(name)                                                           \
	{                                                                    \
		child_count = 0;                                             \
		children_test_##name();                                      \
		children_end(harness_failed());                              \
	}                                                                    \
	static void children_test_##name(void)

/*
 * Runs work (a commit of the kind named by commit) in a child with failpoint
 * armed to crash. Returns the child's exit code (IO_FAILPOINT_EXIT_CODE when
 * the point was reached), or -1 when it could not be forked or did not exit.
 */
static int crash_child(const char *failpoint, int (*work)(struct manifest *manifest), const char *commit)
{
	pid_t child = child_fork(IO_FAILPOINT_EXIT_CODE, "crash at %s in a %s commit", failpoint, commit);
	if (child == 0) {
		struct manifest *manifest;
		if (fixture_open(&manifest) < 0)
			_exit(1);
		if (io_failpoint_arm(failpoint, IO_FAILPOINT_CRASH) < 0)
			_exit(2);
		int rc = work(manifest);
		manifest_close(manifest);
		_exit(rc < 0 ? 3 : 0);
	}
	return child < 0 ? -1 : child_wait(child);
}

/* Same, but the crash is expected while opening (recovery) a store left by a crash at scenario. */
static int crash_open(const char *failpoint, const char *scenario)
{
	pid_t child = child_fork(IO_FAILPOINT_EXIT_CODE, "crash at %s while recovering from a crash at %s", failpoint,
				 scenario);
	if (child == 0) {
		if (io_failpoint_arm(failpoint, IO_FAILPOINT_CRASH) < 0)
			_exit(2);
		struct manifest *manifest;
		int rc = fixture_open(&manifest);
		if (rc == 0)
			manifest_close(manifest);
		_exit(rc < 0 ? 3 : 0);
	}
	return child < 0 ? -1 : child_wait(child);
}

static int small_commit(struct manifest *manifest)
{
	return fixture_merge_one(manifest, "main", "Small", "second", 2);
}

static int big_commit(struct manifest *manifest)
{
	struct error_info error;
	return fixture_write_big(manifest, "Big", 7, NULL, &error);
}

/* A large edge table: fragments, key tree and both adjacency indexes built into its segment. */
static int big_edge_commit(struct manifest *manifest)
{
	struct error_info error;
	return fixture_write_big_schema(manifest, "Links", BIG_EDGE_SCHEMA, 7, NULL, &error);
}

/* A revert's commit: table Small restored to the version record it has now
 * (a new table version sharing its trees: MANIFEST_RESTORE). */
static int restore_commit(struct manifest *manifest)
{
	struct manifest_snapshot snapshot;
	struct head_row head;
	int rc = manifest_snapshot_latest(manifest, "main", &snapshot);
	if (rc == 0)
		rc = manifest_head_find(manifest, &snapshot, "Small", &head);
	if (rc < 0)
		return rc;
	struct manifest_op op = { .kind = MANIFEST_RESTORE, .source = head.table };
	snprintf(op.name, sizeof op.name, "Small");
	struct manifest_commit_request request = { .branch = "main", .actor = "test", .message = "revert",
						   .op_count = 1, .ops = &op };
	struct error_info error;
	return manifest_commit(manifest, &request, NULL, &error);
}

/* The store every crash starts from: one table with one row. */
static int base_store(void)
{
	store_reset();
	struct manifest *manifest;
	int rc = fixture_create_open(&manifest);
	if (rc < 0)
		return rc;
	rc = fixture_merge_one(manifest, "main", "Small", "first", 1);
	manifest_close(manifest);
	return rc;
}

static bool starts_with(const char *text, const char *prefix)
{
	return strncmp(text, prefix, strlen(prefix)) == 0;
}

/* The state after the commit, made without a crash (for comparing heads). */
static int reference_after_uncached(int (*work)(struct manifest *manifest), struct observed *out)
{
	if (base_store() < 0)
		return -1;
	struct manifest *manifest;
	int rc = fixture_open(&manifest);
	if (rc == 0) {
		rc = work(manifest);
		manifest_close(manifest);
	}
	return rc < 0 ? rc : observe(out);
}

/* The same, made once per kind of commit and kept for the process (the crash matrix compares
 * every failpoint with it, ignoring commit ids and times, so one reference serves them all).
 * *out is a shallow copy: the caller does not free it. */
static struct {
	int (*work)(struct manifest *manifest);
	struct observed observed;
} references[8];

static int reference_after(int (*work)(struct manifest *manifest), struct observed *out)
{
	size_t i = 0;
	while (i < sizeof references / sizeof *references && references[i].work && references[i].work != work)
		i++;
	if (i == sizeof references / sizeof *references)
		return -1;   /* more kinds of commit than kept: make references[] larger */
	if (!references[i].work) {
		int rc = reference_after_uncached(work, &references[i].observed);
		if (rc < 0)
			return rc;
		references[i].work = work;
	}
	*out = references[i].observed;
	return 0;
}

/* Heads equal apart from the commit ids and times (a re-run commit mints new ones). */
static bool heads_match_ignoring_commit(const struct buf *a, const struct buf *b)
{
	size_t offset_a = 0, offset_b = 0;
	while (offset_a + 4 <= a->size && offset_b + 4 <= b->size) {
		struct head_row x, y;
		uint32_t length_a = buf_load_u32(a->data + offset_a), length_b = buf_load_u32(b->data + offset_b);
		if (journal_head_row_decode(a->data + offset_a + 4, length_a, &x) < 0 ||
		    journal_head_row_decode(b->data + offset_b + 4, length_b, &y) < 0)
			return false;
		if (x.state != y.state || strcmp(x.name, y.name) != 0 || x.table_version != y.table_version ||
		    x.row_count != y.row_count || x.byte_size != y.byte_size ||
		    strcmp(x.schema_hash, y.schema_hash) != 0)
			return false;
		offset_a += 4 + length_a;
		offset_b += 4 + length_b;
	}
	return offset_a == a->size && offset_b == b->size;
}

/*
 * Crashes a commit at failpoint and checks the invariants. Returns 0 when
 * every check passed (failures are reported through CHECK in the caller).
 */
static void crash_matrix_point(const char *failpoint, int (*work)(struct manifest *manifest), const char *what)
{
	struct observed before, after, again, reference;
	CHECK_EQ(reference_after(work, &reference), 0);
	CHECK_EQ(base_store(), 0);
	CHECK_EQ(observe(&before), 0);
	int code = crash_child(failpoint, work, what);
	if (code != IO_FAILPOINT_EXIT_CODE)
		fprintf(stderr, "    failpoint %s (%s write): child exited %d, expected %d (the point was not reached)\n",
			failpoint, what, code, IO_FAILPOINT_EXIT_CODE);
	CHECK_EQ(code, IO_FAILPOINT_EXIT_CODE);
	CHECK_EQ(observe(&after), 0);
	bool is_before = after.version == before.version;
	bool is_after = after.version == before.version + 1;
	if (!is_before && !is_after)
		fprintf(stderr, "    failpoint %s: version %llu after a crash at version %llu\n", failpoint,
			(unsigned long long)after.version, (unsigned long long)before.version);
	CHECK(is_before || is_after);
	if (is_before) {
		CHECK(same_bytes(&after.heads, &before.heads));
		CHECK(same_bytes(&after.segments, &before.segments));
	} else {
		CHECK(heads_match_ignoring_commit(&after.heads, &reference.heads));
	}
	/* durable means after; nothing written means before */
	if (starts_with(failpoint, "publish.after_"))
		CHECK(is_after || strcmp(failpoint, "publish.after_lock") == 0);
	if (strcmp(failpoint, "publish.after_lock") == 0 || strcmp(failpoint, "publish.before_write") == 0 ||
	    strcmp(failpoint, "publish.torn_write") == 0 || !starts_with(failpoint, "publish."))
		CHECK(is_before);
	if (after.findings)
		fprintf(stderr, "    failpoint %s: verify found %d problems\n", failpoint, after.findings);
	CHECK_EQ(after.findings, 0);
	CHECK_EQ(after.sidecars.size, 0);
	/* opening again changes nothing */
	CHECK_EQ(observe(&again), 0);
	CHECK_EQ(again.version, after.version);
	CHECK(same_bytes(&again.heads, &after.heads));
	CHECK(same_bytes(&again.segments, &after.segments));
	CHECK_EQ(again.findings, 0);
	observed_free(&before);
	observed_free(&after);
	observed_free(&again);
}

/* Whether the crash matrix runs kind (0..kinds-1) at the point-th failpoint: every kind in
 * the normal build; under ASan one kind per failpoint, the next one at the next failpoint,
 * so that every failpoint still crashes and every kind is still crashed into. */
static bool matrix_runs(int point, int kind, int kinds)
{
	return !HARNESS_SANITIZED || point % kinds == kind;
}

CHILDREN_TEST(a_crash_at_every_commit_failpoint_opens_to_before_or_after)
{
	const char *const *names = io_failpoint_names();
	int points = 0;
	for (size_t i = 0; names[i]; i++) {
		const char *name = names[i];
		if (starts_with(name, "publish.")) {
			if (matrix_runs(points, 0, 4))
				crash_matrix_point(name, small_commit, "small");
			if (harness_failed())
				return;
			if (matrix_runs(points, 1, 4))
				crash_matrix_point(name, big_commit, "large");
			if (harness_failed())
				return;
			if (matrix_runs(points, 2, 4))
				crash_matrix_point(name, big_edge_commit, "large edge");
			if (harness_failed())
				return;
			if (matrix_runs(points, 3, 4))
				crash_matrix_point(name, restore_commit, "revert");
			points++;
		} else if (starts_with(name, "segment.") || starts_with(name, "sidecar.")) {
			if (matrix_runs(points, 0, 2))
				crash_matrix_point(name, big_commit, "large");
			if (harness_failed())
				return;
			if (matrix_runs(points, 1, 2))
				crash_matrix_point(name, big_edge_commit, "large edge");
			points++;
		}
		if (harness_failed()) {
			fprintf(stderr, "    at failpoint %s\n", name);
			return;
		}
	}
	CHECK(points >= 11);
}

/* ---- crashes during gc ------------------------------------------------------------------------ */

/* A history worth reclaiming: overwrites of a large table (segments) and small merges. */
static int gc_base_store(void)
{
	store_reset();
	struct manifest *manifest;
	int rc = fixture_create_open(&manifest);
	struct error_info error;
	for (int round = 0; rc == 0 && round < 3; round++) {
		rc = fixture_write_big(manifest, "Big", round, NULL, &error);
		for (int i = 0; rc == 0 && i < 8; i++)
			rc = fixture_merge_one(manifest, "main", "Small", i % 2 ? "odd" : "even", (uint64_t)(round * 8 + i));
	}
	manifest_close(manifest);
	return rc;
}

static int run_gc(struct manifest *manifest)
{
	struct manifest_gc_request request = { .keep_versions = 2 };
	struct manifest_gc_result result;
	struct error_info error;
	return manifest_gc(manifest, &request, &result, &error);
}

/* The horizon of the store now (a read-only look). */
static uint64_t horizon_now(void)
{
	struct manifest *manifest;
	struct root_record latest = { 0 };
	if (fixture_open(&manifest) == 0) {
		manifest_latest(manifest, &latest);
		manifest_close(manifest);
	}
	return latest.horizon;
}

CHILDREN_TEST(a_crash_at_every_gc_failpoint_leaves_the_store_before_or_after_and_a_rerun_finishes)
{
	const char *const *names = io_failpoint_names();
	int points = 0;
	for (size_t i = 0; names[i]; i++) {
		if (!starts_with(names[i], "gc."))
			continue;
		const char *name = names[i];
		struct observed before, after, finished;
		CHECK_EQ(gc_base_store(), 0);
		CHECK_EQ(observe(&before), 0);
		int code = crash_child(name, run_gc, "gc");
		if (code != IO_FAILPOINT_EXIT_CODE)
			fprintf(stderr, "    failpoint %s: child exited %d (the point was not reached)\n", name, code);
		CHECK_EQ(code, IO_FAILPOINT_EXIT_CODE);
		CHECK_EQ(observe(&after), 0);
		/* the same heads and version, the horizon old or new, verify clean */
		CHECK_EQ(after.version, before.version);
		CHECK(same_bytes(&after.heads, &before.heads));
		uint64_t horizon = horizon_now();
		CHECK(horizon == 0 || horizon == before.version - 2);
		if (strcmp(name, "gc.after_horizon") != 0)
			CHECK_EQ(horizon, before.version - 2);
		if (after.findings)
			fprintf(stderr, "    failpoint %s: verify found %d problems\n", name, after.findings);
		CHECK_EQ(after.findings, 0);
		/* a rerun completes it: the horizon recorded, verify clean, the old segments gone */
		struct manifest *manifest;
		CHECK_EQ(fixture_open(&manifest), 0);
		int rc = run_gc(manifest);
		manifest_close(manifest);
		CHECK_EQ(rc, 0);
		CHECK_EQ(observe(&finished), 0);
		CHECK_EQ(horizon_now(), before.version - 2);
		CHECK(same_bytes(&finished.heads, &before.heads));
		CHECK_EQ(finished.findings, 0);
		CHECK(finished.segments.size < before.segments.size);
		observed_free(&before);
		observed_free(&after);
		observed_free(&finished);
		points++;
		if (harness_failed()) {
			fprintf(stderr, "    at failpoint %s\n", name);
			return;
		}
	}
	CHECK_EQ(points, 6);
}

/* ---- crashes during a compaction ------------------------------------------------------ */

#define COMPACTION_COMMITS 12

/* The store a compaction crash starts from: table Small of COMPACTION_COMMITS one-row merges,
 * one fragment each (the manifest layer compacts nothing by itself). */
static int compaction_store(void)
{
	if (base_store() < 0)
		return -1;
	struct manifest *manifest = NULL;
	int rc = fixture_open(&manifest);
	for (int i = 1; rc == 0 && i < COMPACTION_COMMITS; i++) {
		char id[16];
		snprintf(id, sizeof id, "r%02d", i);
		rc = fixture_merge_one(manifest, "main", "Small", id, i);
	}
	if (manifest)
		manifest_close(manifest);
	return rc;
}

/* Small's head, its table version and how many fragments it has. */
static int compaction_state(struct manifest *manifest, struct head_row *head, struct table_info *info,
			    size_t *fragments)
{
	struct manifest_snapshot snapshot;
	int rc = manifest_snapshot_latest(manifest, "main", &snapshot);
	if (rc == 0)
		rc = manifest_head_find(manifest, &snapshot, "Small", head);
	if (rc == 0)
		rc = table_info_read(manifest_pager(manifest), head->table, info);
	struct btree *tree = NULL;
	struct btree_iterator *iterator = NULL;
	*fragments = 0;
	if (rc == 0 && (rc = btree_open(manifest_pager(manifest), info->fragments, &tree)) == 0 &&
	    (rc = btree_iterator_open(tree, NULL, 0, &iterator)) == 0) {
		const uint8_t *key, *value;
		size_t key_size, value_size;
		while ((rc = btree_iterator_next(iterator, &key, &key_size, &value, &value_size)) == 1)
			(*fragments)++;
	}
	btree_iterator_free(iterator);
	btree_free(tree);
	return rc;
}

static int compaction_work(struct manifest *manifest)
{
	struct head_row head;
	struct table_info info;
	size_t fragments;
	struct table_compaction *compaction = NULL;
	int rc = compaction_state(manifest, &head, &info, &fragments);
	if (rc == 0)
		rc = table_compaction_plan(manifest_pager(manifest), &info, TABLE_COMPACT_FLUSH, &compaction);
	if (rc == 0 && !compaction)
		rc = -ENODATA;
	if (rc == 0)
		rc = table_compaction_prepare(compaction, manifest_pager(manifest), CODEC_ZSTD);   /* before the lock */
	bool published = false;
	struct error_info error;
	if (rc == 0)
		rc = manifest_compact(manifest, "main", &head.stable_id, head.table, compaction, CODEC_ZSTD, &published,
				      &error);
	table_compaction_free(compaction);
	return rc < 0 ? rc : published ? 0 : -ESTALE;
}

CHILDREN_TEST(a_crash_at_every_publish_failpoint_of_a_compaction_leaves_the_same_rows_in_one_or_many_fragments)
{
	struct buf before, after;
	buf_init(&before);
	buf_init(&after);
	struct manifest_snapshot snapshot;
	CHECK_EQ(compaction_store(), 0);
	struct manifest *manifest;
	CHECK_EQ(fixture_open(&manifest), 0);
	CHECK_EQ(manifest_snapshot_latest(manifest, "main", &snapshot), 0);
	CHECK_EQ(fixture_table_bytes(manifest, &snapshot, "Small", &before), 0);
	manifest_close(manifest);
	const char *const *names = io_failpoint_names();
	for (size_t i = 0; names[i]; i++) {
		const char *name = names[i];
		/* (a compaction has no sidecar: publish.after_sidecar_remove is on the commit path only) */
		if (!starts_with(name, "publish.") || strcmp(name, "publish.after_sidecar_remove") == 0)
			continue;
		CHECK_EQ(compaction_store(), 0);
		CHECK_EQ(crash_child(name, compaction_work, "compaction"), IO_FAILPOINT_EXIT_CODE);
		CHECK_EQ(fixture_open(&manifest), 0);
		struct head_row head;
		struct table_info info;
		size_t fragments = 0;
		CHECK_EQ(compaction_state(manifest, &head, &info, &fragments), 0);
		CHECK_EQ(fixture_version(manifest), COMPACTION_COMMITS);   /* a compaction adds no version */
		buf_reset(&after);
		CHECK_EQ(manifest_snapshot_latest(manifest, "main", &snapshot), 0);
		CHECK_EQ(fixture_table_bytes(manifest, &snapshot, "Small", &after), 0);
		CHECK(after.size == before.size && memcmp(after.data, before.data, before.size) == 0);
		CHECK_EQ(manifest_verify(manifest, print_finding, NULL, NULL, NULL), 0);
		if (strcmp(name, "publish.after_lock") == 0 || strcmp(name, "publish.before_write") == 0 ||
		    strcmp(name, "publish.torn_write") == 0)
			CHECK_EQ(fragments, COMPACTION_COMMITS);
		else if (starts_with(name, "publish.after_"))
			CHECK_EQ(fragments, 1);
		/* and a rerun compacts what is left */
		if (fragments > 1) {
			CHECK_EQ(compaction_work(manifest), 0);
			CHECK_EQ(compaction_state(manifest, &head, &info, &fragments), 0);
			CHECK_EQ(fragments, 1);
			CHECK_EQ(manifest_verify(manifest, print_finding, NULL, NULL, NULL), 0);
		}
		manifest_close(manifest);
		if (harness_failed()) {
			fprintf(stderr, "    at failpoint %s\n", name);
			break;
		}
	}
	buf_free(&before);
	buf_free(&after);
}

/* ---- crashes during recovery ---------------------------------------------------------- */

/* A store needing recovery: a large commit crashed at failpoint. */
/*
 * A handle opened before another process crashed at failpoint in a small
 * commit, then committing itself: returns the version it commits and the
 * findings of a verify after it (through a fresh read-only handle, so no
 * recovery runs first).
 */
static int commit_after_a_crash_elsewhere(const char *failpoint, uint64_t *before, uint64_t *committed,
					  int *findings)
{
	if (base_store() < 0)
		return -1;
	struct manifest *manifest, *reader;
	if (fixture_open(&manifest) < 0)
		return -1;
	struct root_record latest;
	int rc = manifest_latest(manifest, &latest);
	*before = latest.version;
	if (rc == 0 && crash_child(failpoint, small_commit, "small") != IO_FAILPOINT_EXIT_CODE)
		rc = -1;
	if (rc == 0)
		rc = fixture_merge_one(manifest, "main", "Other", "x", 1);
	if (rc == 0)
		rc = manifest_latest(manifest, &latest);
	*committed = latest.version;
	manifest_close(manifest);
	if (rc == 0)
		rc = manifest_open(fixture_store_path(), MANIFEST_READ_ONLY, &reader, &(struct error_info){ 0 });
	if (rc == 0) {
		*findings = manifest_verify(reader, print_finding, NULL, NULL, NULL);
		manifest_close(reader);
	}
	return rc;
}

/* ---- tags and snapshots ---------------------------------------------------------------- */

static int tag_work(struct manifest *manifest)
{
	struct manifest_tag_request request = { .name = "crashed", .branch = "main", .actor = "test" };
	struct error_info error;
	return manifest_tag_create(manifest, &request, NULL, &error);
}

static int tags_now(bool *exists, int *findings)
{
	struct manifest *manifest;
	int rc = fixture_open(&manifest);
	if (rc < 0)
		return rc;
	struct manifest_tag *tag = malloc(sizeof *tag);
	rc = tag ? manifest_tag_find(manifest, "crashed", tag) : -ENOMEM;
	free(tag);
	*exists = rc == 0;
	*findings = manifest_verify(manifest, print_finding, NULL, NULL, NULL);
	manifest_close(manifest);
	return rc == -ENOENT ? 0 : rc;
}

CHILDREN_TEST(a_crash_at_every_publish_failpoint_of_a_tag_create_leaves_the_tag_made_or_not)
{
	const char *const *names = io_failpoint_names();
	for (size_t i = 0; names[i]; i++) {
		const char *name = names[i];
		/* (a tag has no sidecar: publish.after_sidecar_remove is on the commit path only) */
		if (!starts_with(name, "publish.") || strcmp(name, "publish.after_sidecar_remove") == 0)
			continue;
		CHECK_EQ(base_store(), 0);
		CHECK_EQ(crash_child(name, tag_work, "tag"), IO_FAILPOINT_EXIT_CODE);
		bool exists = false;
		int findings = -1;
		CHECK_EQ(tags_now(&exists, &findings), 0);
		CHECK_EQ(findings, 0);
		if (strcmp(name, "publish.after_lock") == 0 || strcmp(name, "publish.before_write") == 0 ||
		    strcmp(name, "publish.torn_write") == 0)
			CHECK(!exists);
		else if (starts_with(name, "publish.after_"))
			CHECK(exists);
		/* and the store takes the next tag or commit */
		bool again = false;
		if (!exists) {
			struct manifest *manifest;
			CHECK_EQ(fixture_open(&manifest), 0);
			CHECK_EQ(tag_work(manifest), 0);
			manifest_close(manifest);
			CHECK_EQ(tags_now(&again, &findings), 0);
			CHECK(again);
		}
		if (harness_failed()) {
			fprintf(stderr, "    at failpoint %s\n", name);
			return;
		}
	}
}

static char snapshot_path[4200];

static int snapshot_work(struct manifest *manifest)
{
	struct manifest_copy_result result;
	struct error_info error;
	return manifest_snapshot_copy(manifest, snapshot_path, NULL, NULL, &result, &error);
}

CHILDREN_TEST(a_crash_while_cutting_a_snapshot_leaves_the_store_as_it_was_and_no_store_behind)
{
	const char *const *names = io_failpoint_names();
	int points = 0;
	for (size_t i = 0; names[i]; i++) {
		const char *name = names[i];
		if (!starts_with(name, "snapshot."))
			continue;
		points++;
		CHECK_EQ(base_store(), 0);
		struct manifest *manifest;
		CHECK_EQ(fixture_open(&manifest), 0);
		CHECK_EQ(big_commit(manifest), 0);
		manifest_close(manifest);
		struct observed before, after;
		CHECK_EQ(observe(&before), 0);
		snprintf(snapshot_path, sizeof snapshot_path, "%s/snapshot-%zu", harness_temp_directory(), i);
		CHECK_EQ(crash_child(name, snapshot_work, "snapshot"), IO_FAILPOINT_EXIT_CODE);
		CHECK_EQ(observe(&after), 0);
		CHECK_EQ(after.version, before.version);
		CHECK(same_bytes(&after.heads, &before.heads));
		CHECK(same_bytes(&after.segments, &before.segments));
		CHECK_EQ(after.findings, 0);
		/* what the crash left is not a store, and a rerun refuses to write into it */
		struct manifest *partial = NULL;
		struct error_info error;
		CHECK(manifest_open(snapshot_path, MANIFEST_READ_ONLY, &partial, &error) < 0);
		CHECK_EQ(fixture_open(&manifest), 0);
		CHECK_EQ(snapshot_work(manifest), -EEXIST);
		manifest_close(manifest);
		observed_free(&before);
		observed_free(&after);
		if (harness_failed()) {
			fprintf(stderr, "    at failpoint %s\n", name);
			return;
		}
	}
	CHECK_EQ(points, 2);
}

TEST(a_snapshot_is_a_store_that_verifies_and_stays_as_it_was_while_the_store_moves_on)
{
	CHECK_EQ(base_store(), 0);
	struct manifest *manifest, *copy;
	CHECK_EQ(fixture_open(&manifest), 0);
	CHECK_EQ(big_commit(manifest), 0);
	snprintf(snapshot_path, sizeof snapshot_path, "%s/snapshot-stays", harness_temp_directory());
	struct manifest_copy_result result;
	struct error_info error;
	CHECK_EQ(manifest_snapshot_copy(manifest, snapshot_path, NULL, NULL, &result, &error), 0);
	CHECK_EQ(result.version, 2);
	CHECK_EQ(result.segments_linked + result.segments_copied, 1);
	CHECK_EQ(fixture_merge_one(manifest, "main", "Small", "later", 3), 0);
	CHECK_EQ(manifest_open(snapshot_path, MANIFEST_READ_ONLY, &copy, &error), 0);
	CHECK_EQ(manifest_verify(copy, print_finding, NULL, NULL, NULL), 0);
	CHECK_EQ(fixture_version(copy), 2);
	struct fixture_heads heads;
	CHECK_EQ(fixture_heads(copy, "main", UINT64_MAX, false, &heads), 0);
	CHECK_EQ(heads.count, 2);
	manifest_close(copy);
	manifest_close(manifest);
}

/* The store a restore crash starts from: a snapshot of (main: Small 1 row, tag t),
 * then main moved on (a second row), tag t deleted and a branch added. */
static int restore_scenario(void)
{
	if (base_store() < 0)
		return -1;
	struct store *store = NULL;
	struct store_options options = { .actor = "test" };
	struct error_info error;
	int rc = store_open(fixture_store_path(), &options, &store, &error);
	if (rc == 0)
		rc = store_tag_create(store, "t", "main", STORE_LATEST, NULL, NULL, NULL, &error);
	if (rc == 0) {
		char command[8600];
		snprintf(command, sizeof command, "rm -rf '%s'", snapshot_path);
		if (system(command) != 0)
			rc = -EIO;
	}
	if (rc == 0)
		rc = store_snapshot_copy(store, snapshot_path, NULL, NULL, NULL, &error);
	if (rc == 0)
		rc = store_tag_delete(store, "t", NULL, &error);
	if (rc == 0)
		rc = store_branch_create(store, "extra", "main", NULL, &error);
	if (store)
		store_close(store);
	struct manifest *manifest;
	if (rc == 0 && (rc = fixture_open(&manifest)) == 0) {
		rc = fixture_merge_one(manifest, "main", "Small", "second", 2);
		manifest_close(manifest);
	}
	return rc;
}

static int restore_now(void)
{
	struct store *store = NULL;
	struct store_options options = { .actor = "test" };
	struct error_info error;
	int rc = store_open(fixture_store_path(), &options, &store, &error);
	if (rc == 0)
		rc = store_restore(store, snapshot_path, NULL, NULL, NULL, &error);
	if (store)
		store_close(store);
	return rc;
}

/* The state a restore must reach: main's Small has 1 row, tag t, no branch extra. */
static void check_restored(void)
{
	struct store *store = NULL;
	struct store_options options = { .actor = "test" };
	struct error_info error;
	CHECK_EQ(store_open(fixture_store_path(), &options, &store, &error), 0);   /* completes an interrupted restore */
	if (store)
		store_close(store);
	char marker[4400];
	snprintf(marker, sizeof marker, "%s/restoring", fixture_store_path());
	CHECK(access(marker, F_OK) != 0);
	struct manifest *manifest;
	CHECK_EQ(fixture_open(&manifest), 0);
	struct fixture_heads heads;
	CHECK_EQ(fixture_heads(manifest, "main", UINT64_MAX, false, &heads), 0);
	CHECK_EQ(heads.count, 1);
	CHECK_EQ(heads.heads[0].row_count, 1);
	struct manifest_tag *tag = malloc(sizeof *tag);
	CHECK(tag && manifest_tag_find(manifest, "t", tag) == 0);
	free(tag);
	struct manifest_snapshot extra;
	CHECK_EQ(manifest_snapshot_latest(manifest, "extra", &extra), -ENOENT);
	CHECK_EQ(manifest_verify(manifest, print_finding, NULL, NULL, NULL), 0);
	CHECK(fixture_version(manifest) > 2);   /* versions went on upward */
	manifest_close(manifest);
}

CHILDREN_TEST(a_crash_at_any_point_of_a_restore_opens_to_before_it_or_after_it)
{
	snprintf(snapshot_path, sizeof snapshot_path, "%s/snapshot-restore", harness_temp_directory());
	const char *const *names = io_failpoint_names();
	int points = 0;
	for (size_t i = 0; names[i]; i++) {
		const char *name = names[i];
		if ((!starts_with(name, "publish.") && !starts_with(name, "restore.after")) ||
		    strcmp(name, "publish.after_sidecar_remove") == 0)
			continue;
		points++;
		CHECK_EQ(restore_scenario(), 0);
		pid_t child = child_fork(IO_FAILPOINT_EXIT_CODE, "crash at %s in a restore", name);
		if (child == 0) {
			if (io_failpoint_arm(name, IO_FAILPOINT_CRASH) < 0)
				_exit(2);
			_exit(restore_now() < 0 ? 3 : 0);
		}
		CHECK_EQ(child_wait(child), IO_FAILPOINT_EXIT_CODE);
		/* the marker was durable before the first publish: the next open finishes the restore */
		check_restored();
		if (harness_failed()) {
			fprintf(stderr, "    at failpoint %s\n", name);
			return;
		}
	}
	CHECK(points >= 7);   /* the publish.* points a publish without a sidecar reaches, and restore.after_marker */
}

/* ---- merge ------------------------------------------------------------------------ */

static int store_write(struct store *store, const char *branch, const char *table, const char *text)
{
	struct store_txn *txn = NULL;
	struct store_writer *writer = NULL;
	struct error_info error;
	int rc = store_txn_begin(store, branch, &txn, &error);
	if (rc == 0)
		rc = store_txn_writer(txn, table, STORE_MERGE, 0, NULL, &writer, &error);
	if (rc == 0)
		rc = store_writer_write(writer, text, strlen(text), &error);
	if (rc == 0)
		rc = store_writer_finish(writer, &error);
	if (rc == 0)
		rc = store_txn_commit(txn, NULL, NULL, &error);
	store_txn_free(txn);
	return rc;
}

/* main and dev both changed Small and dev created Extra since they parted. */
static int merge_scenario(void)
{
	if (base_store() < 0)
		return -1;
	struct store *store = NULL;
	struct store_options options = { .actor = "test" };
	struct error_info error;
	int rc = store_open(fixture_store_path(), &options, &store, &error);
	if (rc == 0)
		rc = store_branch_create(store, "dev", "main", NULL, &error);
	if (rc == 0)
		rc = store_write(store, "dev", "Small", "{\"id\":\"theirs\",\"v\":1}\n");
	if (rc == 0)
		rc = store_write(store, "dev", "Extra", "{\"id\":\"e\"}\n");
	if (rc == 0)
		rc = store_write(store, "main", "Small", "{\"id\":\"ours\",\"v\":2}\n");
	if (store)
		store_close(store);
	return rc;
}

static int merge_now(struct store_merge_result *result)
{
	struct store *store = NULL;
	struct store_options options = { .actor = "test" };
	struct error_info error;
	int rc = store_open(fixture_store_path(), &options, &store, &error);
	if (rc == 0)
		rc = store_merge(store, "dev", "main", NULL, NULL, NULL, result, &error);
	if (store)
		store_close(store);
	return rc;
}

/* main's Small and Extra: merged (both rows, Extra there) or as before (neither). */
static int merged_state(void)
{
	struct store *store = NULL;
	struct store_options options = { .actor = "test" };   /* read-write: recovery runs first */
	struct error_info error;
	int state = -1;
	if (store_open(fixture_store_path(), &options, &store, &error) < 0)
		return -1;
	struct store_snapshot *snapshot;
	if (store_snapshot_open(store, "main", STORE_LATEST, &snapshot, &error) == 0) {
		struct head_row small, extra;
		int has_extra = store_snapshot_head(snapshot, "Extra", &extra) == 0;
		if (store_snapshot_head(snapshot, "Small", &small) == 0)
			state = small.row_count == 3 && has_extra ? 1 : small.row_count == 2 && !has_extra ? 0 : -1;
		store_snapshot_release(snapshot);
	}
	if (store_verify(store, print_finding, NULL) != 0)
		state = -1;
	store_close(store);
	return state;
}

CHILDREN_TEST(a_crash_at_any_point_of_a_merge_opens_to_before_it_or_after_it_and_a_rerun_finishes)
{
	const char *const *names = io_failpoint_names();
	int points = 0, after = 0;
	for (size_t i = 0; names[i]; i++) {
		const char *name = names[i];
		if ((!starts_with(name, "publish.") && !starts_with(name, "merge.")) ||
		    strcmp(name, "publish.after_sidecar_remove") == 0)
			continue;
		points++;
		CHECK_EQ(merge_scenario(), 0);
		CHECK_EQ(merged_state(), 0);
		pid_t child = child_fork(IO_FAILPOINT_EXIT_CODE, "crash at %s in a merge", name);
		if (child == 0) {
			if (io_failpoint_arm(name, IO_FAILPOINT_CRASH) < 0)
				_exit(2);
			struct store_merge_result result;
			_exit(merge_now(&result) < 0 ? 3 : 0);
		}
		CHECK_EQ(child_wait(child), IO_FAILPOINT_EXIT_CODE);
		int state = merged_state();
		CHECK(state == 0 || state == 1);
		after += state == 1;
		struct store_merge_result result;
		CHECK_EQ(merge_now(&result), 0);
		CHECK_EQ(result.outcome, state == 1 ? STORE_MERGE_UP_TO_DATE : STORE_MERGE_MERGED);
		CHECK_EQ(merged_state(), 1);
		if (harness_failed()) {
			fprintf(stderr, "    at failpoint %s\n", name);
			return;
		}
	}
	CHECK(points >= 8);
	CHECK(after >= 2);   /* publish.after_fsync and later: the merge was durable */
}

TEST(a_restore_crashed_before_its_marker_leaves_the_store_as_it_was)
{
	snprintf(snapshot_path, sizeof snapshot_path, "%s/snapshot-restore", harness_temp_directory());
	CHECK_EQ(restore_scenario(), 0);
	struct observed before, after;
	CHECK_EQ(observe(&before), 0);
	/* an empty marker is what a crash while writing it leaves: the open drops it */
	char marker[4400];
	snprintf(marker, sizeof marker, "%s/restoring", fixture_store_path());
	FILE *file = fopen(marker, "w");
	CHECK(file != NULL);
	if (file)
		fclose(file);
	struct store *store = NULL;
	struct store_options options = { .actor = "test" };
	struct error_info error;
	CHECK_EQ(store_open(fixture_store_path(), &options, &store, &error), 0);
	if (store)
		store_close(store);
	CHECK(access(marker, F_OK) != 0);
	CHECK_EQ(observe(&after), 0);
	CHECK_EQ(after.version, before.version);
	CHECK(same_bytes(&after.heads, &before.heads));
	observed_free(&before);
	observed_free(&after);
}

CHILDREN_TEST(a_durable_commit_whose_writer_died_before_its_meta_slot_is_kept_by_an_open_handles_next_commit)
{
	/* The dead writer's publish landed in preallocated zeros: the file size did not change. */
	uint64_t before, committed;
	int findings = -1;
	CHECK_EQ(commit_after_a_crash_elsewhere("publish.after_fsync", &before, &committed, &findings), 0);
	CHECK_EQ(committed, before + 2);
	CHECK_EQ(findings, 0);
}

CHILDREN_TEST(a_torn_write_into_preallocated_zeros_is_cut_by_an_open_handles_next_commit)
{
	uint64_t before, committed;
	int findings = -1;
	CHECK_EQ(commit_after_a_crash_elsewhere("publish.torn_write", &before, &committed, &findings), 0);
	CHECK_EQ(committed, before + 1);
	CHECK_EQ(findings, 0);
}

TEST(bytes_left_in_the_preallocated_zeros_after_the_latest_root_are_cut_by_the_next_commit)
{
	CHECK_EQ(base_store(), 0);
	struct manifest *manifest, *reader;
	CHECK_EQ(fixture_open(&manifest), 0);
	struct root_record latest;
	CHECK_EQ(manifest_latest(manifest, &latest), 0);
	/* a torn publish longer than the next one: 64 KiB of garbage after the latest root */
	char path[4400];
	snprintf(path, sizeof path, "%s/manifest", fixture_store_path());
	int descriptor = open(path, O_WRONLY);
	CHECK(descriptor >= 0);
	unsigned char garbage[65536];
	memset(garbage, 0xA5, sizeof garbage);
	CHECK_EQ(pwrite(descriptor, garbage, sizeof garbage,
			(off_t)(latest.self.offset + MANIFEST_ROOT_BLOCK_SIZE)), (ssize_t)sizeof garbage);
	close(descriptor);
	CHECK_EQ(fixture_merge_one(manifest, "main", "Small", "third", 3), 0);
	manifest_close(manifest);
	struct error_info error;
	CHECK_EQ(manifest_open(fixture_store_path(), MANIFEST_READ_ONLY, &reader, &error), 0);
	CHECK_EQ(manifest_verify(reader, print_finding, NULL, NULL, NULL), 0);
	CHECK_EQ(manifest_latest(reader, &latest), 0);
	CHECK_EQ(latest.version, 2);
	manifest_close(reader);
}

static int store_needing_recovery(const char *failpoint)
{
	int rc = base_store();
	if (rc < 0)
		return rc;
	return crash_child(failpoint, big_commit, "large") == IO_FAILPOINT_EXIT_CODE ? 0 : -1;
}

static void recovery_crash_converges(const char *scenario, const char *recovery_point)
{
	/* what a recovery without a crash arrives at */
	struct observed expected, after, again;
	CHECK_EQ(store_needing_recovery(scenario), 0);
	CHECK_EQ(observe(&expected), 0);
	CHECK_EQ(expected.findings, 0);

	CHECK_EQ(store_needing_recovery(scenario), 0);
	int code = crash_open(recovery_point, scenario);
	if (code != IO_FAILPOINT_EXIT_CODE)
		fprintf(stderr, "    %s after a crash at %s: child exited %d (the point was not reached)\n",
			recovery_point, scenario, code);
	CHECK_EQ(code, IO_FAILPOINT_EXIT_CODE);
	CHECK_EQ(observe(&after), 0);
	CHECK_EQ(after.version, expected.version);
	CHECK(heads_match_ignoring_commit(&after.heads, &expected.heads));
	CHECK_EQ(after.findings, 0);
	CHECK_EQ(after.sidecars.size, 0);
	CHECK_EQ(observe(&again), 0);
	CHECK(same_bytes(&again.heads, &after.heads));
	CHECK(same_bytes(&again.segments, &after.segments));
	observed_free(&expected);
	observed_free(&after);
	observed_free(&again);
}

CHILDREN_TEST(a_crash_during_recovery_and_a_rerun_converge)
{
	const char *const *names = io_failpoint_names();
	int points = 0;
	for (size_t i = 0; names[i]; i++) {
		if (!starts_with(names[i], "recovery."))
			continue;
		/* a torn tail plus a dead writer's segments: every recovery step runs */
		recovery_crash_converges("publish.torn_write", names[i]);
		if (harness_failed()) {
			fprintf(stderr, "    at %s\n", names[i]);
			return;
		}
		points++;
	}
	/* and a roll forward: the commit is durable, only the sidecar remains */
	recovery_crash_converges("publish.after_meta", "recovery.before_sidecar_remove");
	CHECK_EQ(points, 3);
}

/* ---- sidecars ------------------------------------------------------------------------------ */

static int sidecar_path(char *out, size_t size)
{
	struct buf listing;
	buf_init(&listing);
	fixture_list("recovery", &listing);
	int found = 0;
	if (listing.size > 1) {
		char *newline = memchr(listing.data, '\n', listing.size);
		size_t length = newline ? (size_t)(newline - (char *)listing.data) : listing.size;
		snprintf(out, size, "%s/recovery/%.*s", fixture_store_path(), (int)length, (const char *)listing.data);
		found = 1;
	}
	buf_free(&listing);
	return found;
}

CHILDREN_TEST(a_sidecar_of_another_version_refuses_a_read_write_open)
{
	CHECK_EQ(store_needing_recovery("publish.before_write"), 0);
	char path[4600];
	CHECK_EQ(sidecar_path(path, sizeof path), 1);
	size_t size;
	unsigned char *bytes = fixture_read_file(path, &size);
	CHECK(bytes != NULL && size > 8);
	buf_store_u32(bytes + 4, 99);
	FILE *file = fopen(path, "wb");
	CHECK(file != NULL);
	CHECK_EQ(fwrite(bytes, 1, size, file), size);
	fclose(file);
	struct manifest *manifest;
	struct error_info error;
	error_info_clear(&error);
	CHECK_EQ(manifest_open(fixture_store_path(), 0, &manifest, &error), -EPROTO);
	CHECK(strstr(error.message, "sidecar version 99") != NULL);
	CHECK_EQ(manifest_open(fixture_store_path(), MANIFEST_READ_ONLY, &manifest, &error), 0);
	CHECK(manifest_verify(manifest, NULL, NULL, NULL, NULL) >= 1);
	manifest_close(manifest);
	free(bytes);
}

TEST(a_live_writers_sidecar_is_left_alone_by_recovery)
{
	CHECK_EQ(base_store(), 0);
	struct manifest *writer, *other;
	CHECK_EQ(fixture_open(&writer), 0);
	struct manifest_intent *intent;
	uint64_t segment;
	CHECK_EQ(manifest_intent_begin(writer, &intent), 0);
	CHECK_EQ(manifest_intent_new_segment(intent, &segment), 0);
	CHECK_EQ(manifest_intent_new_segment(intent, &segment), 0);
	char path[4600];
	CHECK_EQ(sidecar_path(path, sizeof path), 1);
	CHECK_EQ(fixture_open(&other), 0); /* recovery runs and must skip the locked sidecar */
	CHECK_EQ(sidecar_path(path, sizeof path), 1);
	manifest_close(other);
	manifest_intent_abandon(intent);
	CHECK_EQ(sidecar_path(path, sizeof path), 0);
	manifest_close(writer);
}

TEST(an_abandoned_intent_leaves_no_sidecar_and_no_segment)
{
	CHECK_EQ(base_store(), 0);
	struct manifest *manifest;
	CHECK_EQ(fixture_open(&manifest), 0);
	struct schema schema;
	CHECK_EQ(fixture_schema(BIG_SCHEMA, &schema), 0);
	struct manifest_intent *intent;
	CHECK_EQ(manifest_intent_begin(manifest, &intent), 0);
	uint64_t segment;
	CHECK_EQ(manifest_intent_new_segment(intent, &segment), 0);
	struct pager_segment *file;
	CHECK_EQ(pager_segment_create(manifest_pager(manifest), segment, &file), 0);
	CHECK_EQ(pager_segment_finish(file), 0);
	pager_segment_free(file);
	struct buf listing;
	buf_init(&listing);
	fixture_list("segments", &listing);
	CHECK(listing.size >= 17);
	manifest_intent_abandon(intent);
	buf_reset(&listing);
	fixture_list("segments", &listing);
	CHECK_EQ(listing.size, 0);
	buf_reset(&listing);
	fixture_list("recovery", &listing);
	CHECK_EQ(listing.size, 0);
	CHECK_EQ(manifest_verify(manifest, NULL, NULL, NULL, NULL), 0);
	buf_free(&listing);
	schema_free(&schema);
	manifest_close(manifest);
}

TEST(a_large_commit_removes_its_sidecar_and_keeps_its_segments)
{
	CHECK_EQ(base_store(), 0);
	struct manifest *manifest;
	CHECK_EQ(fixture_open(&manifest), 0);
	CHECK_EQ(big_commit(manifest), 0);
	struct buf listing;
	buf_init(&listing);
	fixture_list("recovery", &listing);
	CHECK_EQ(listing.size, 0);
	fixture_list("segments", &listing);
	CHECK(listing.size >= 17);
	CHECK_EQ(manifest_verify(manifest, print_finding, NULL, NULL, NULL), 0);
	struct manifest_snapshot snapshot;
	struct head_row head;
	CHECK_EQ(manifest_snapshot_latest(manifest, "main", &snapshot), 0);
	CHECK_EQ(manifest_head_find(manifest, &snapshot, "Big", &head), 0);
	CHECK_EQ(head.row_count, BIG_ROWS);
	buf_free(&listing);
	manifest_close(manifest);
}

/* ---- concurrent writer processes ------------------------------------------------------------ */

#define WRITERS 4
#define COMMITS_PER_WRITER 200   /* 4 processes × 200 commits, as group commit is gated */

static int writer_process(int writer)
{
	struct manifest *manifest;
	if (fixture_open(&manifest) < 0)
		return 1;
	const char *branch = writer < 2 ? "main" : "side";
	for (int i = 0; i < COMMITS_PER_WRITER; i++) {
		char table[16], id[32];
		if (i % 2 == 0)
			snprintf(table, sizeof table, "Shared");
		else
			snprintf(table, sizeof table, "Own%d", writer);
		snprintf(id, sizeof id, "w%d-%d", writer, i);
		if (fixture_merge_one(manifest, branch, table, id, i) < 0)
			return 2;
	}
	manifest_close(manifest);
	return 0;
}

static int collect_log(const struct commit_record *record, void *context)
{
	uint64_t *state = context; /* [0] count, [1] previous version */
	if (state[0] && record->version >= state[1])
		return -EIO;
	state[0]++;
	state[1] = record->version;
	return 0;
}

CHILDREN_TEST(concurrent_writer_processes_make_exactly_one_linear_history_per_branch)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct error_info error;
	CHECK_EQ(manifest_branch_create(manifest, "side", "main", NULL, &error), 0);
	manifest_close(manifest);
	pid_t writers[WRITERS];
	for (int w = 0; w < WRITERS; w++) {
		writers[w] = child_fork(0, "writer %d, %d commits on %s", w, COMMITS_PER_WRITER, w < 2 ? "main" : "side");
		if (writers[w] == 0)
			_exit(writer_process(w));
		CHECK(writers[w] > 0);
	}
	for (int w = 0; w < WRITERS; w++)
		CHECK_EQ(child_wait(writers[w]), 0);
	CHECK_EQ(fixture_open(&manifest), 0);
	CHECK_EQ(fixture_version(manifest), WRITERS * COMMITS_PER_WRITER);
	const char *branches[] = { "main", "side" };
	for (int b = 0; b < 2; b++) {
		struct manifest_snapshot snapshot;
		CHECK_EQ(manifest_snapshot_latest(manifest, branches[b], &snapshot), 0);
		uint64_t state[2] = { 0, 0 };
		CHECK_EQ(manifest_log_each(manifest, &snapshot, collect_log, state), 0);
		CHECK_EQ(state[0], 2 * COMMITS_PER_WRITER);
		struct head_row head;
		CHECK_EQ(manifest_head_find(manifest, &snapshot, "Shared", &head), 0);
		CHECK_EQ(head.row_count, COMMITS_PER_WRITER); /* 2 writers × half their commits each */
		for (int w = 2 * b; w < 2 * b + 2; w++) {
			char table[16];
			snprintf(table, sizeof table, "Own%d", w);
			CHECK_EQ(manifest_head_find(manifest, &snapshot, table, &head), 0);
			CHECK_EQ(head.row_count, COMMITS_PER_WRITER / 2);
		}
	}
	/* heads equal the journal replay, and nothing else is wrong */
	CHECK_EQ(manifest_verify(manifest, print_finding, NULL, NULL, NULL), 0);
	manifest_close(manifest);
}

/* ---- a sync that fails ---------------------------------------------------------------------- */

/* A commit whose sync fails (failpoint publish.queued, error) with the store lock already
 * released: the caller is told the outcome is unknown, the commit's segments and sidecar
 * stay, and the next read-write open settles the written root and rolls the sidecar forward. */
static void check_failed_sync(int (*work)(struct manifest *manifest), bool has_segments)
{
	CHECK_EQ(base_store(), 0);
	struct manifest *manifest;
	CHECK_EQ(fixture_open(&manifest), 0);
	uint64_t before = fixture_version(manifest);
	io_failpoint_arm("publish.queued", IO_FAILPOINT_ERROR);
	int rc = work(manifest);
	io_failpoint_arm("publish.queued", IO_FAILPOINT_OFF);
	CHECK_EQ(rc, -EIO);
	CHECK_EQ(fixture_version(manifest), before);   /* not shown: not known durable */
	struct buf listing;
	buf_init(&listing);
	fixture_list("recovery", &listing);
	CHECK_EQ(listing.size > 0, has_segments);      /* the sidecar stays for recovery */
	buf_reset(&listing);
	fixture_list("segments", &listing);
	CHECK_EQ(listing.size > 0, has_segments);      /* and so do the segments it names */
	manifest_close(manifest);
	struct observed after;
	CHECK_EQ(observe(&after), 0);
	CHECK_EQ(after.version, before + 1);           /* the written root stood */
	CHECK_EQ(after.findings, 0);
	CHECK_EQ(after.sidecars.size, 0);
	CHECK_EQ(after.segments.size > 0, has_segments);
	observed_free(&after);
	buf_free(&listing);
}

TEST(a_large_commit_whose_sync_fails_keeps_its_segments_and_the_next_open_settles_it)
{
	check_failed_sync(big_commit, true);
}

TEST(a_small_commit_whose_sync_fails_stands_once_the_next_open_settles_it)
{
	check_failed_sync(small_commit, false);
}

/* ---- writers killed with SIGKILL -------------------------------------------------------------- */

#define KILLED_WRITERS 4
#define KILL_ROUNDS 6

/* Merges rows k<first>, k<first+1>, ... into Own<writer> until killed; after each
 * commit returns, reports its row number on report (4 bytes). */
static int acknowledging_writer(int writer, uint32_t first, int report)
{
	struct manifest *manifest;
	if (fixture_open(&manifest) < 0)
		return 1;
	char table[16];
	snprintf(table, sizeof table, "Own%d", writer);
	for (uint32_t i = first;; i++) {
		char id[32];
		snprintf(id, sizeof id, "k%u", i);
		if (fixture_merge_one(manifest, "main", table, id, (int)i) < 0)
			return 2;
		if (write(report, &i, sizeof i) != (ssize_t)sizeof i)
			return 3;
	}
}

TEST(writers_killed_at_random_instants_lose_no_acknowledged_commit)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	manifest_close(manifest);
	uint32_t next[KILLED_WRITERS] = { 0 };       /* the first row each writer has not had acknowledged */
	unsigned seed = 12345;
	for (int round = 0; round < KILL_ROUNDS; round++) {
		pid_t pids[KILLED_WRITERS];
		int reports[KILLED_WRITERS];
		for (int w = 0; w < KILLED_WRITERS; w++) {
			int pipe_ends[2];
			CHECK_EQ(pipe(pipe_ends), 0);
			fflush(NULL);
			pids[w] = fork();
			if (pids[w] == 0) {
				close(pipe_ends[0]);
				_exit(acknowledging_writer(w, next[w], pipe_ends[1]));
			}
			CHECK(pids[w] > 0);
			close(pipe_ends[1]);
			reports[w] = pipe_ends[0];
		}
		seed = seed * 1103515245u + 12345u;
		usleep(60000 + (seed >> 16) % 90000);   /* 60..150 ms of commits, then SIGKILL mid-flight */
		for (int w = 0; w < KILLED_WRITERS; w++)
			kill(pids[w], SIGKILL);
		for (int w = 0; w < KILLED_WRITERS; w++) {
			int status;
			CHECK_EQ(waitpid(pids[w], &status, 0), pids[w]);
			CHECK(WIFSIGNALED(status));   /* still committing when killed: no writer failed */
			uint32_t acknowledged;
			while (read(reports[w], &acknowledged, sizeof acknowledged) == (ssize_t)sizeof acknowledged) {
				CHECK_EQ(acknowledged, next[w]);
				next[w] = acknowledged + 1;
			}
			close(reports[w]);
		}
	}
	/* recovery runs at this open; every acknowledged row is there, in one linear history */
	CHECK_EQ(fixture_open(&manifest), 0);
	struct manifest_snapshot snapshot;
	CHECK_EQ(manifest_snapshot_latest(manifest, "main", &snapshot), 0);
	uint64_t acknowledged_total = 0;
	for (int w = 0; w < KILLED_WRITERS; w++) {
		char table[16];
		snprintf(table, sizeof table, "Own%d", w);
		acknowledged_total += next[w];
		if (next[w] == 0)
			continue;
		struct head_row head;
		CHECK_EQ(manifest_head_find(manifest, &snapshot, table, &head), 0);
		CHECK(head.row_count >= next[w]);            /* rows k0 .. k<next-1> at least */
		CHECK(head.row_count <= next[w] + KILL_ROUNDS); /* at most one unacknowledged row per round */
	}
	CHECK(acknowledged_total > 0);
	uint64_t state[2] = { 0, 0 };
	CHECK_EQ(manifest_log_each(manifest, &snapshot, collect_log, state), 0);
	CHECK_EQ(state[0], fixture_version(manifest));
	CHECK(state[0] >= acknowledged_total);
	CHECK_EQ(manifest_verify(manifest, print_finding, NULL, NULL, NULL), 0);
	manifest_close(manifest);
}

/* ---- threads sharing one handle ------------------------------------------------------------ */

#include <pthread.h>

struct thread_work {
	struct manifest *manifest;
	int thread;
	int failures;
};

static void *writer_thread(void *context)
{
	struct thread_work *work = context;
	for (int i = 0; i < 25; i++) {
		char table[16], id[32];
		snprintf(table, sizeof table, i % 2 ? "Shared" : "Own%d", work->thread);
		snprintf(id, sizeof id, "t%d-%d", work->thread, i);
		if (fixture_merge_one(work->manifest, "main", table, id, i) < 0)
			work->failures++;
	}
	return NULL;
}

static void *reader_thread(void *context)
{
	struct thread_work *work = context;
	uint64_t last = 0;
	for (int i = 0; i < 200; i++) {
		struct manifest_snapshot snapshot;
		struct fixture_heads heads;
		if (manifest_snapshot_latest(work->manifest, "main", &snapshot) < 0 ||
		    manifest_heads_each(work->manifest, &snapshot, false, fixture_collect_head, &heads) < 0 ||
		    snapshot.version < last)
			work->failures++;
		last = snapshot.version;
	}
	return NULL;
}

TEST(threads_sharing_one_handle_serialize_their_commits_and_readers_see_versions_advance)
{
	struct manifest *manifest;
	CHECK_EQ(fixture_create_open(&manifest), 0);
	struct thread_work work[5];
	pthread_t threads[5];
	for (int t = 0; t < 5; t++) {
		work[t] = (struct thread_work){ manifest, t, 0 };
		CHECK_EQ(pthread_create(&threads[t], NULL, t < 4 ? writer_thread : reader_thread, &work[t]), 0);
	}
	for (int t = 0; t < 5; t++) {
		CHECK_EQ(pthread_join(threads[t], NULL), 0);
		CHECK_EQ(work[t].failures, 0);
	}
	CHECK_EQ(fixture_version(manifest), 100);
	struct manifest_snapshot snapshot;
	struct head_row head;
	CHECK_EQ(manifest_snapshot_latest(manifest, "main", &snapshot), 0);
	CHECK_EQ(manifest_head_find(manifest, &snapshot, "Shared", &head), 0);
	CHECK_EQ(head.row_count, 48);
	CHECK_EQ(manifest_verify(manifest, print_finding, NULL, NULL, NULL), 0);
	manifest_close(manifest);
}

int main(void)
{
	return harness_run();
}
