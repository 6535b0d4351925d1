/*
 * store — the public API: lifetime, snapshots and reads through them,
 * branches, commit lookup, stats, verify and repair. Transactions are in
 * store_txn.c, import/export in store_ops.c. See store.h.
 *
 * States of a snapshot: OPEN (references >= 1, resolved once at open and
 * never re-resolved) -> FREED at the last release. Its head commit time is
 * read lazily on first request (UNKNOWN -> KNOWN) and then never again.
 *
 * Invariants kept:
 *   1. Everything read through a snapshot is read from its own root and
 *      branch record, never from anything newer (docs/ARCHITECTURE.md invariant 4).
 *   2. Every call that means "latest" refreshes the manifest first, so
 *      commits of other processes are seen.
 *   3. No caller-supplied visitor runs with a store lock held (the store
 *      keeps none around the manifest, which is thread-safe by itself), so
 *      visitors may call back into the store.
 *   4. A store is closed only after every snapshot is released (asserted).
 */
#include "store_int.h"

#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io.h"
#include "lease.h"
#include "s3.h"

const char *store_branch_or_main(const char *branch)
{
	return branch && *branch ? branch : "main";
}

/* ---- lifetime ------------------------------------------------------------ */

int store_location_check(const char *path, struct error_info *error)
{
	if (!s3_location_is_s3(path))
		return 0;
	/* the environment it needs, said before anything is sent */
	struct s3_location location;
	return s3_location_parse(path, &location, error);
}

int store_unsupported_remotely(const char *path, const char *what, struct error_info *error)
{
	if (!s3_location_is_s3(path))
		return 0;
	return error_info_set(error, -EPROTONOSUPPORT,
			      "%s: %s is not supported on stores in an object store (s3://) yet; "
			      "`graphfs dump STORE | graphfs load OTHER -` copies a branch's state between any two stores",
			      path, what);
}

int store_init(const char *path, struct error_info *error)
{
	return store_init_format(path, STORE_FORMAT_VERSION, error);
}

int store_init_format(const char *path, uint32_t format_version, struct error_info *error)
{
	int rc = store_location_check(path, error);
	return rc ? rc : manifest_create_format(path, format_version, error);
}

uint32_t store_format_version(const struct store *store)
{
	return manifest_format_version(store->manifest);
}

static void default_actor(char out[STORE_ACTOR_MAX])
{
	const char *user = getenv("USER");
	if (!user || !*user) {
		struct passwd *entry = getpwuid(geteuid());
		user = entry && entry->pw_name ? entry->pw_name : "unknown";
	}
	char host[256];
	if (gethostname(host, sizeof host) != 0)
		snprintf(host, sizeof host, "localhost");
	host[sizeof host - 1] = 0;
	snprintf(out, STORE_ACTOR_MAX, "%.63s@%s", user, host);
}

int store_handle_open(const char *path, const struct store_options *options, struct store **out,
		      struct error_info *error)
{
	struct store_options defaults = { 0 };
	if (!options)
		options = &defaults;
	*out = NULL;
	int rc = store_location_check(path, error);
	if (rc)
		return rc;
	struct store *store = calloc(1, sizeof *store);
	if (!store)
		return error_info_set(error, -ENOMEM, "out of memory");
	store->serving.descriptor = -1;
	pthread_mutex_init(&store->schemas_lock, NULL);
	pthread_mutex_init(&store->compact_lock, NULL);
	for (size_t i = 0; i < STORE_SCHEMA_CACHE; i++)
		schema_init(&store->schemas[i].schema);
	store->path = strdup(path);
	if (!store->path) {
		rc = error_info_set(error, -ENOMEM, "out of memory");
		goto cleanup;
	}
	if (options->codec != 0 && options->codec != CODEC_ZSTD && options->codec != CODEC_LZ4) {
		rc = error_info_set(error, -EINVAL, "unknown codec %d (0 zstd, 2 lz4)", options->codec);
		goto cleanup;
	}
	store->codec = options->codec == CODEC_LZ4 ? CODEC_LZ4 : CODEC_ZSTD;
	store->row_max = options->row_max ? options->row_max : SCHEMA_DEFAULT_ROW_MAX;
	store->staged_max = options->staged_max;
	if (options->log)
		io_log_set(options->log, options->log_context);
	store->read_only = options->read_only;
	if (options->actor && *options->actor)
		snprintf(store->actor, sizeof store->actor, "%s", options->actor);
	else
		default_actor(store->actor);
	rc = manifest_open(path, store->read_only ? MANIFEST_READ_ONLY : 0, &store->manifest, error);
	if (rc < 0)
		goto cleanup;
	store->pager = manifest_pager(store->manifest);
	if (options->block_cache && (rc = pager_cache_limit(store->pager, options->block_cache)) < 0) {
		error_info_set(error, rc, "out of memory for the block cache");
		manifest_close(store->manifest);
		goto cleanup;
	}
	*out = store;
	return 0;
cleanup:
	pthread_mutex_destroy(&store->schemas_lock);
	pthread_mutex_destroy(&store->compact_lock);
	free(store->path);
	free(store);
	return rc;
}

void store_handle_close(struct store *store)
{
	if (!store)
		return;
	assert(atomic_load(&store->open_snapshots) == 0);
	manifest_close(store->manifest);
	for (size_t i = 0; i < STORE_SCHEMA_CACHE; i++)
		schema_free(&store->schemas[i].schema);
	pthread_mutex_destroy(&store->schemas_lock);
	pthread_mutex_destroy(&store->compact_lock);
	free(store->compact_notes);
	free(store->path);
	free(store);
}

int store_refresh(struct store *store, bool *changed)
{
	return manifest_refresh(store->manifest, changed);
}

int store_refresh_now(struct store *store, bool *changed)
{
	return manifest_refresh_now(store->manifest, changed);
}

bool store_error_is_unreachable(int rc)
{
	return io_error_is_unreachable(rc);
}

uint64_t store_stale_reads(struct store *store)
{
	return manifest_stale_reads(store->manifest);
}

uint64_t store_version(struct store *store)
{
	struct root_record root;
	return manifest_latest(store->manifest, &root) < 0 ? 0 : root.version;
}

const char *store_path(const struct store *store)
{
	return store->path;
}

int store_host_directory(struct store *store, const char *purpose, char *out, size_t size)
{
	int rc;
	if (strncmp(store->path, "s3://", 5) == 0) {
		char base[4096];
		rc = io_cache_store_directory(manifest_store_id(store->manifest)->bytes, base, sizeof base);
		if (rc < 0)
			return rc;
		rc = (size_t)snprintf(out, size, "%s/%s", base, purpose) >= size ? -ENAMETOOLONG : 0;
	} else {
		rc = (size_t)snprintf(out, size, "%s/%s", store->path, purpose) >= size ? -ENAMETOOLONG : 0;
	}
	return rc < 0 ? rc : io_make_directories(out);
}

/* ---- snapshots ------------------------------------------------------------ */

int store_snapshot_wrap(struct store *store, const struct manifest_snapshot *view, const char *branch,
		       struct store_snapshot **out, struct error_info *error)
{
	*out = NULL;
	struct store_snapshot *snapshot = calloc(1, sizeof *snapshot);
	if (!snapshot)
		return error_info_set(error, -ENOMEM, "out of memory");
	if (pthread_mutex_init(&snapshot->time_lock, NULL) != 0) {
		free(snapshot);
		return error_info_set(error, -ENOMEM, "out of memory");
	}
	snapshot->view = *view;
	int rc = manifest_pin(store->manifest, view->version, view->version);
	if (rc < 0) {
		pthread_mutex_destroy(&snapshot->time_lock);
		free(snapshot);
		return error_info_set(error, rc, "cannot pin version %llu: %s", (unsigned long long)view->version,
				      io_strerror(rc));
	}
	snprintf(snapshot->branch, sizeof snapshot->branch, "%s", branch);
	atomic_init(&snapshot->references, 1);
	atomic_init(&snapshot->time_known, false);
	snapshot->store = store;
	atomic_fetch_add(&store->open_snapshots, 1);
	*out = snapshot;
	return 0;
}

/* Resolves branch as of version (STORE_LATEST: now) into view. 0 or -errno with error set. */
static int snapshot_resolve(struct store *store, const char *branch, uint64_t version,
			    struct manifest_snapshot *view, struct error_info *error)
{
	/* Both refresh first: commits of other processes are seen, and a historical
	 * version newer than what the handle knew resolves. */
	int rc = version == STORE_LATEST ? manifest_snapshot_latest(store->manifest, branch, view)
					 : manifest_snapshot_at(store->manifest, branch, version, view);
	if (rc == -ENOENT) {
		if (version == STORE_LATEST)
			return error_info_set(error, rc, "no branch named \"%s\"", branch);
		return store_version_missing(store, branch, version, error);
	}
	if (rc < 0)
		return error_info_set(error, rc, "cannot resolve branch \"%s\": %s", branch, io_strerror(rc));
	return 0;
}

int store_snapshot_pinned(struct store *store, store_snapshot_resolver resolve, void *context,
			  const char *branch, struct store_snapshot **out, struct error_info *error)
{
	*out = NULL;
	for (int attempt = 0;; attempt++) {
		/* note the sweep sequence, resolve (which refreshes), pin, look again:
		 * if a gc began a sweep meanwhile it may have missed the pin (manifest_pins.c) */
		uint64_t sequence = manifest_sweep_sequence(store->manifest);
		struct manifest_snapshot view;
		int rc = resolve(store, context, &view, error);
		if (rc < 0)
			return rc;
		struct store_snapshot *snapshot;
		if ((rc = store_snapshot_wrap(store, &view, branch ? branch : view.branch.name, &snapshot, error)) < 0)
			return rc;
		if (manifest_sweep_sequence(store->manifest) == sequence || attempt == 64) {
			*out = snapshot;
			return 0;
		}
		store_snapshot_release(snapshot);
	}
}

struct version_resolve {
	const char *branch;
	uint64_t version;
};

static int resolve_version(struct store *store, void *context, struct manifest_snapshot *view,
			   struct error_info *error)
{
	const struct version_resolve *wanted = context;
	return snapshot_resolve(store, wanted->branch, wanted->version, view, error);
}

static int resolve_tag(struct store *store, void *context, struct manifest_snapshot *view, struct error_info *error)
{
	const char *tag = context;
	int rc = manifest_snapshot_tag(store->manifest, tag, view);
	if (rc == -ENOENT)
		return error_info_set(error, rc, "no tag named \"%s\" (see 'graphfs tag STORE list')", tag);
	if (rc < 0)
		return error && error->code ? rc : error_info_set(error, rc, "cannot read tag \"%s\": %s", tag, io_strerror(rc));
	return 0;
}

int store_snapshot_open_tag(struct store *store, const char *tag, struct store_snapshot **out,
			    struct error_info *error)
{
	*out = NULL;
	int rc = manifest_tag_name_check(tag, error);
	if (rc < 0)
		return rc;
	return store_snapshot_pinned(store, resolve_tag, (void *)tag, NULL, out, error);
}

/* A tag naming version of branch (manifest_tags_each's visitor): stops at the first. */
struct tag_at {
	const char *branch;
	uint64_t version;
	char name[JOURNAL_NAME_MAX + 1];
};

static int find_tag_at(const struct manifest_tag *tag, void *context)
{
	struct tag_at *wanted = context;
	if (tag->version != wanted->version || strcmp(tag->branch.name, wanted->branch) != 0)
		return 0;
	snprintf(wanted->name, sizeof wanted->name, "%s", tag->name);
	return 1;
}

int store_snapshot_open(struct store *store, const char *branch, uint64_t version,
			struct store_snapshot **out, struct error_info *error)
{
	*out = NULL;
	branch = store_branch_or_main(branch);
	if (!schema_name_is_valid(branch, strlen(branch)))
		return error_info_set(error, -ENOENT, "no branch named \"%.128s\"", branch);
	struct version_resolve wanted = { branch, version };
	int rc = store_snapshot_pinned(store, resolve_version, &wanted, branch, out, error);
	if (rc == -ENOENT && version != STORE_LATEST && version <= store_horizon(store)) {
		/* reclaimed by gc, unless a tag keeps that state (docs/MOUNT.md "History"): open it there */
		struct tag_at found = { .branch = branch, .version = version };
		struct root_record root;
		if (manifest_latest(store->manifest, &root) == 0 &&
		    manifest_tags_each(store->manifest, &root, find_tag_at, &found) > 0 &&
		    store_snapshot_open_tag(store, found.name, out, NULL) == 0) {
			error_info_clear(error);
			rc = 0;
		}
	}
	return rc;
}

static int resolve_commit_version(struct store *store, void *context, struct manifest_snapshot *view,
				  struct error_info *error)
{
	uint64_t version = *(const uint64_t *)context;
	int rc = manifest_snapshot_of_version(store->manifest, version, view);
	if (rc == -ENOENT)
		return error_info_set(error, rc, "version %llu was reclaimed by gc or does not exist",
				      (unsigned long long)version);
	if (rc < 0)
		return error_info_set(error, rc, "cannot read version %llu: %s", (unsigned long long)version,
				      io_strerror(rc));
	return 0;
}

int store_snapshot_open_version(struct store *store, uint64_t version, struct store_snapshot **out,
				struct error_info *error)
{
	return store_snapshot_pinned(store, resolve_commit_version, &version, NULL, out, error);
}

void store_snapshot_retain(struct store_snapshot *snapshot)
{
	long before = atomic_fetch_add(&snapshot->references, 1);
	assert(before >= 1);
	(void)before;
}

void store_snapshot_release(struct store_snapshot *snapshot)
{
	if (!snapshot)
		return;
	long before = atomic_fetch_sub(&snapshot->references, 1);
	assert(before >= 1);
	if (before != 1)
		return;
	manifest_unpin(snapshot->store->manifest, snapshot->view.version, snapshot->view.version);
	atomic_fetch_sub(&snapshot->store->open_snapshots, 1);
	pthread_mutex_destroy(&snapshot->time_lock);
	free(snapshot);
}

uint64_t store_snapshot_version(const struct store_snapshot *snapshot)
{
	return snapshot->view.version;
}

const char *store_snapshot_branch(const struct store_snapshot *snapshot)
{
	return snapshot->branch;
}

uint64_t store_snapshot_time_us(const struct store_snapshot *snapshot)
{
	/* The struct is always heap-allocated and mutable; const only promises
	 * that the snapshot's view does not change. */
	struct store_snapshot *mutable_snapshot = (struct store_snapshot *)snapshot;
	if (atomic_load_explicit(&mutable_snapshot->time_known, memory_order_acquire))
		return mutable_snapshot->time_us;
	pthread_mutex_lock(&mutable_snapshot->time_lock);
	if (!atomic_load_explicit(&mutable_snapshot->time_known, memory_order_relaxed)) {
		uint64_t time_us = 0;
		bool known = true;
		if (!block_address_is_null(snapshot->view.branch.head_record)) {
			struct commit_record record;
			journal_commit_record_init(&record);
			int rc = manifest_commit_read(snapshot->store->manifest,
						      snapshot->view.branch.head_record, &record);
			if (rc == 0)
				time_us = record.time_us;
			else
				known = false; /* an I/O error: answer 0 now, try again next time */
			journal_commit_record_free(&record);
		}
		mutable_snapshot->time_us = time_us;
		if (known)
			atomic_store_explicit(&mutable_snapshot->time_known, true,
					      memory_order_release);
	}
	uint64_t time_us = mutable_snapshot->time_us;
	pthread_mutex_unlock(&mutable_snapshot->time_lock);
	return time_us;
}

int store_snapshot_head(struct store_snapshot *snapshot, const char *table, struct head_row *out)
{
	if (!table || !schema_name_is_valid(table, strlen(table)))
		return -ENOENT;
	return manifest_head_find(snapshot->store->manifest, &snapshot->view, table, out);
}

/* Visitors: the manifest returns a visitor's non-zero value as is; the store
 * API returns a negative one and turns a positive one (stop) into 0. */
struct head_visit {
	int (*visit)(const struct head_row *head, void *context);
	void *context;
};

static int visit_head(const struct head_row *head, void *context)
{
	struct head_visit *visit = context;
	return visit->visit(head, visit->context);
}

static int visit_result(int rc)
{
	return rc > 0 ? 0 : rc;
}

int store_snapshot_heads(struct store_snapshot *snapshot, bool tombstoned,
			 int (*visit)(const struct head_row *head, void *context), void *context)
{
	struct head_visit trampoline = { visit, context };
	int rc = manifest_heads_each(snapshot->store->manifest, &snapshot->view, tombstoned,
				     visit_head, &trampoline);
	return visit_result(rc);
}

int store_head_schema(struct store *store, const struct head_row *head, struct table_info *info_out,
		      struct schema *schema_out)
{
	int rc = table_info_read(store->pager, head->table, info_out);
	if (rc < 0 || !schema_out)
		return rc;
	struct block_address block = info_out->schema;
	pthread_mutex_lock(&store->schemas_lock);
	struct cached_schema *oldest = &store->schemas[0];
	for (size_t i = 0; i < STORE_SCHEMA_CACHE; i++) {
		struct cached_schema *cached = &store->schemas[i];
		if (!block_address_is_null(cached->block) && cached->block.segment == block.segment &&
		    cached->block.offset == block.offset) {
			cached->used = ++store->schemas_clock;
			rc = schema_copy(schema_out, &cached->schema);
			pthread_mutex_unlock(&store->schemas_lock);
			return rc;
		}
		if (cached->used < oldest->used)
			oldest = cached;
	}
	pthread_mutex_unlock(&store->schemas_lock);
	if ((rc = table_schema_read(store->pager, block, schema_out)) < 0)
		return rc;
	pthread_mutex_lock(&store->schemas_lock);
	schema_free(&oldest->schema);
	schema_init(&oldest->schema);
	if (schema_copy(&oldest->schema, schema_out) == 0) {
		oldest->block = block;
		oldest->used = ++store->schemas_clock;
	} else {
		oldest->block = (struct block_address){ 0, 0 };
	}
	pthread_mutex_unlock(&store->schemas_lock);
	return 0;
}

int store_snapshot_schema(struct store_snapshot *snapshot, const char *table, struct buf *out)
{
	struct head_row head;
	int rc = store_snapshot_head(snapshot, table, &head);
	if (rc < 0)
		return rc;
	struct table_info info;
	struct schema schema;
	schema_init(&schema);
	rc = store_head_schema(snapshot->store, &head, &info, &schema);
	if (rc == 0)
		rc = schema_render(&schema, out);
	schema_free(&schema);
	return rc;
}

struct log_visit {
	int (*visit)(const struct commit_record *record, void *context);
	void *context;
};

static int visit_log(const struct commit_record *record, void *context)
{
	struct log_visit *visit = context;
	return visit->visit(record, visit->context);
}

int store_snapshot_log(struct store_snapshot *snapshot,
		       int (*visit)(const struct commit_record *record, void *context), void *context)
{
	struct log_visit trampoline = { visit, context };
	int rc = manifest_log_each(snapshot->store->manifest, &snapshot->view, visit_log, &trampoline);
	return visit_result(rc);
}

int store_commit_at(struct store *store, uint64_t version, struct commit_record *out)
{
	return manifest_commit_at(store->manifest, version, out);
}

int store_commit_line(struct store *store, uint64_t version, struct buf *out)
{
	if (version == 0 || version > store_version(store))
		return -ENOENT;
	struct commit_record record;
	int rc = manifest_commit_at(store->manifest, version, &record);
	if (rc == -ENOENT)
		rc = buf_printf(out, "{\"version\":%llu,\"reclaimed\":true}\n", (unsigned long long)version);
	else if (rc == 0)
		rc = journal_commit_record_render_json(&record, out);
	journal_commit_record_free(&record);
	return rc < 0 ? rc : 0;
}

void store_prefetch_commit_lines(struct store *store, uint64_t version)
{
	manifest_prefetch_commits(store->manifest, version, false);
}

struct log_versions_visit {
	int (*visit)(const struct store_log_version *version, void *context);
	void *context;
};

static int visit_log_version(const struct manifest_log_version *entry, void *context)
{
	struct log_versions_visit *visit = context;
	struct store_log_version version = { entry->version, entry->time_us, entry->reclaimed };
	return visit->visit(&version, visit->context);
}

int store_snapshot_log_versions(struct store_snapshot *snapshot,
				int (*visit)(const struct store_log_version *version, void *context),
				void *context)
{
	struct log_versions_visit trampoline = { visit, context };
	int rc = manifest_log_versions(snapshot->store->manifest, &snapshot->view, visit_log_version, &trampoline);
	return visit_result(rc);
}

/* ---- table contents ------------------------------------------------------------ */

struct store_table {
	struct store_snapshot *snapshot;   /* retained: the bytes stay readable */
	struct table_reader *reader;
	pthread_mutex_t lock;              /* a table reader serves one thread at a time */
	uint64_t size;
};

int store_table_open(struct store_snapshot *snapshot, const char *table, struct store_table **out)
{
	*out = NULL;
	struct head_row head;
	int rc = store_snapshot_head(snapshot, table, &head);
	if (rc < 0)
		return rc;
	struct table_info info;
	rc = table_info_read(snapshot->store->pager, head.table, &info);
	if (rc < 0)
		return rc;
	struct store_table *opened = calloc(1, sizeof *opened);
	if (!opened)
		return -ENOMEM;
	rc = table_reader_open(snapshot->store->pager, &info, &opened->reader);
	if (rc < 0) {
		free(opened);
		return rc;
	}
	if (pthread_mutex_init(&opened->lock, NULL) != 0) {
		table_reader_free(opened->reader);
		free(opened);
		return -ENOMEM;
	}
	opened->size = table_reader_size(opened->reader);
	store_snapshot_retain(snapshot);
	opened->snapshot = snapshot;
	*out = opened;
	return 0;
}

uint64_t store_table_size(const struct store_table *table)
{
	return table->size;
}

ssize_t store_table_pread(struct store_table *table, void *out, size_t size, uint64_t offset)
{
	pthread_mutex_lock(&table->lock);
	ssize_t done = table_reader_pread(table->reader, out, size, offset);
	pthread_mutex_unlock(&table->lock);
	return done;
}

void store_table_close(struct store_table *table)
{
	if (!table)
		return;
	table_reader_free(table->reader);
	pthread_mutex_destroy(&table->lock);
	store_snapshot_release(table->snapshot);
	free(table);
}

/* ---- commits and branches --------------------------------------------------------- */

int store_commit_find(struct store *store, const char *ulid_text, uint64_t *version,
		      char branch[JOURNAL_NAME_MAX + 1])
{
	struct ulid id;
	if (!ulid_text || strlen(ulid_text) != ULID_TEXT_SIZE - 1 || ulid_parse(ulid_text, &id) < 0)
		return -EINVAL;
	struct block_address address;
	uint64_t found_version = 0;
	struct commit_record record;
	journal_commit_record_init(&record);
	int rc = manifest_refresh(store->manifest, NULL);
	if (rc == 0)
		rc = manifest_commit_find(store->manifest, &id, &found_version, &address);
	if (rc == 0)
		rc = manifest_commit_read(store->manifest, address, &record);
	if (rc == 0) {
		if (version)
			*version = found_version;
		if (branch)
			snprintf(branch, JOURNAL_NAME_MAX + 1, "%s", record.branch);
	}
	journal_commit_record_free(&record);
	return rc;
}

struct branch_visit {
	int (*visit)(const struct store_branch_info *branch, void *context);
	void *context;
};

static int visit_branch(const struct branch_record *branch, void *context)
{
	struct branch_visit *visit = context;
	struct store_branch_info info;
	memset(&info, 0, sizeof info);
	snprintf(info.name, sizeof info.name, "%s", branch->name);
	snprintf(info.forked_from, sizeof info.forked_from, "%s", branch->forked_from);
	info.fork_point = branch->fork_point;
	info.created_version = branch->created_version;
	info.head_version = branch->head_version;
	if (!ulid_is_zero(&branch->head_commit))
		ulid_format(&branch->head_commit, info.head_commit);
	return visit->visit(&info, visit->context);
}

int store_branches(struct store *store,
		   int (*visit)(const struct store_branch_info *branch, void *context), void *context)
{
	struct branch_visit trampoline = { visit, context };
	struct root_record root;
	int rc = manifest_refresh(store->manifest, NULL);
	if (rc == 0)
		rc = manifest_latest(store->manifest, &root);
	if (rc == 0)
		rc = manifest_branches_each(store->manifest, &root, visit_branch, &trampoline);
	return visit_result(rc);
}

/* ---- stats, verify, repair ------------------------------------------------------------ */

static json_t *counters_json(enum io_class class, const char *pages_name)
{
	struct io_counters counters;
	io_counters_get(class, &counters);
	return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "reads", (json_int_t)counters.reads,
			 "bytes", (json_int_t)counters.bytes, pages_name, (json_int_t)counters.pages,
			 "rows_decoded", (json_int_t)counters.rows_decoded, "writes",
			 (json_int_t)counters.writes, "bytes_written",
			 (json_int_t)counters.bytes_written, "fsyncs", (json_int_t)counters.fsyncs);
}

static json_t *object_store_json(void)
{
	struct s3_counters counters;
	struct io_cache_counters cache;
	struct io_prefetch_counters prefetch;
	s3_counters_process(&counters);
	io_cache_counters_get(&cache);
	io_prefetch_counters_get(&prefetch);
	return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "gets", (json_int_t)counters.gets, "puts",
			 (json_int_t)counters.puts, "heads", (json_int_t)counters.heads, "deletes",
			 (json_int_t)counters.deletes, "lists", (json_int_t)counters.lists, "bytes_sent",
			 (json_int_t)counters.bytes_sent, "bytes_received", (json_int_t)counters.bytes_received,
			 "cache_hits", (json_int_t)cache.hits, "cache_bytes", (json_int_t)cache.bytes, "cache_stores",
			 (json_int_t)cache.stores, "prefetch_gets", (json_int_t)prefetch.gets, "prefetch_rounds",
			 (json_int_t)prefetch.rounds);
}

static int json_to_buf(json_t *root, struct buf *out)
{
	if (!root)
		return -ENOMEM;
	char *text = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	if (!text)
		return -ENOMEM;
	int rc = buf_append_string(out, text);
	free(text);
	return rc;
}

int store_counters_json(struct buf *out)
{
	return json_to_buf(json_pack("{s:o,s:o,s:o}", "manifest", counters_json(IO_MANIFEST, "pages"), "data",
				     counters_json(IO_DATA, "blocks"), "object_store", object_store_json()),
			   out);
}

int store_stats_json(struct store *store, struct buf *out)
{
	json_t *root = json_pack("{s:o,s:o,s:o,s:{s:I,s:I,s:I,s:s,s:i,s:I,s:I}}", "manifest",
				 counters_json(IO_MANIFEST, "pages"), "data",
				 counters_json(IO_DATA, "blocks"), "object_store", object_store_json(), "store", "version",
				 (json_int_t)store_version(store), "horizon", (json_int_t)store_horizon(store),
				 "manifest_end", (json_int_t)manifest_end(store->manifest), "path", store->path,
				 "format", (int)store_format_version(store), "compactions",
				 (json_int_t)atomic_load(&store->compactions), "rows_compacted",
				 (json_int_t)atomic_load(&store->rows_compacted));
	return json_to_buf(root, out);
}

static void ignore_finding(const char *finding, void *context)
{
	(void)finding;
	(void)context;
}

int store_verify(struct store *store, void (*report)(const char *finding, void *context),
		 void *context)
{
	return store_verify_progress(store, report, context, NULL, NULL);
}

int store_verify_progress(struct store *store, void (*report)(const char *finding, void *context), void *context,
			  store_progress_fn progress, void *progress_context)
{
	int rc = manifest_refresh(store->manifest, NULL);
	if (rc < 0 && rc != -EIO)
		return rc;
	/* A damaged latest root is itself a finding: verify reports it. */
	return manifest_verify(store->manifest, report ? report : ignore_finding, context, progress, progress_context);
}

int store_repair(struct store *store, int *repaired_branches, struct error_info *error)
{
	if (store->read_only)
		return error_info_set(error, -EROFS, "the store is open read-only");
	int rc = manifest_refresh(store->manifest, NULL);
	if (rc < 0)
		return error_info_set(error, rc, "cannot refresh the store: %s", io_strerror(rc));
	return manifest_repair(store->manifest, repaired_branches, error);
}

/* ---- test support ---------------------------------------------------------------------- */

const char *const *store_failpoint_names(void)
{
	return io_failpoint_names();
}

int store_stamp_format(const char *path, uint32_t format_version, struct error_info *error)
{
	int rc = manifest_stamp_format(path, format_version);
	if (rc < 0)
		error_info_set(error, rc, "cannot stamp the format of %s: %s", path, io_strerror(rc));
	return rc;
}

/* ---- helpers of the files above: conditions, missing versions, the horizon, head lists ---- */

void store_condition_to_manifest(const struct store_condition *condition, struct manifest_condition *out)
{
	memset(out, 0, sizeof *out);
	if (!condition)
		return;
	out->has_version = condition->has_version;
	out->version = condition->version;
	if (condition->has_commit)
		out->commit = condition->commit;
}

int store_version_missing(struct store *store, const char *branch, uint64_t version, struct error_info *error)
{
	struct root_record latest;
	if (manifest_latest(store->manifest, &latest) == 0) {
		if (version > latest.version)
			return error_info_set(error, -ENOENT, "branch \"%s\" has no version %llu (the latest version is %llu)",
					      branch, (unsigned long long)version, (unsigned long long)latest.version);
		if (latest.horizon && version <= latest.horizon)
			return error_info_set(error, -ENOENT, "version %llu was reclaimed by gc (horizon %llu)",
					      (unsigned long long)version, (unsigned long long)latest.horizon);
	}
	return error_info_set(error, -ENOENT, "branch \"%s\" has no version %llu (it is before the first commit of its history)",
			      branch, (unsigned long long)version);
}

uint64_t store_horizon(struct store *store)
{
	struct root_record root;
	return manifest_latest(store->manifest, &root) < 0 ? 0 : root.horizon;
}

int store_heads_collect(struct store_snapshot *snapshot, struct store_head_list *out)
{
	memset(out, 0, sizeof *out);
	return store_snapshot_heads(snapshot, false, store_head_list_add, out);
}

int store_head_list_add(const struct head_row *head, void *context)
{
	struct store_head_list *list = context;
	if (buf_grow_array((void **)&list->heads, &list->capacity, list->count + 1, sizeof *list->heads) < 0)
		return -ENOMEM;
	list->heads[list->count++] = *head;
	return 0;
}

const struct head_row *store_head_list_find(const struct store_head_list *list, const struct ulid *stable_id)
{
	for (size_t i = 0; i < list->count; i++)
		if (ulid_compare(&list->heads[i].stable_id, stable_id) == 0)
			return &list->heads[i];
	return NULL;
}

const struct head_row *store_head_list_named(const struct store_head_list *list, const char *name)
{
	for (size_t i = 0; i < list->count; i++)
		if (strcmp(list->heads[i].name, name) == 0)
			return &list->heads[i];
	return NULL;
}
