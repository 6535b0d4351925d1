/*
 * store_backup — `graphfs snapshot` and `graphfs restore` (layer: store).
 *
 * A snapshot is a self-contained copy of the whole store as of one instant
 * (manifest_copy.c cuts it). Restore makes a store's branches and tags those of
 * a snapshot *of that same store*, as new commits: versions continue upward
 * (a version number is never reissued), history is kept, pinned readers go on
 * reading what they pinned, and mounts see the restored state within their
 * refresh bound. Because the store's manifest only grows, a snapshot's
 * manifest is a prefix of its store's, so every table version it names is
 * still there: restoring a branch is a revert to the snapshot's record of it,
 * O(tables) and no data copied. A snapshot of another store is refused (move
 * data between stores with dump and load).
 *
 * Restore is several publishes (one commit per branch, branch and tag
 * changes), each atomic; the restore as a whole is made so by a marker: the
 * file `restoring` in the store directory, naming the snapshot's absolute path,
 * durable before the first publish and removed after the last, flock-held
 * while a process works on it. The next read-write open of the store that can
 * take its lock completes the restore (every step is idempotent: a branch
 * already as the snapshot has it is left alone), so a crash at any instant
 * opens to the state before the restore (no marker yet) or after it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "lease.h"
#include "s3.h"
#include "store_int.h"

int store_snapshot_copy(struct store *store, const char *path, store_progress_fn progress, void *context,
			struct store_copy_result *out, struct error_info *error)
{
	error_info_clear(error);
	struct manifest_copy_result copied;
	int rc = store_unsupported_remotely(path, "a snapshot into an object store", error);
	if (rc == 0)
		rc = manifest_snapshot_copy(store->manifest, path, progress, context, &copied, error);
	if (rc == 0 && out) {
		out->version = copied.version;
		out->manifest_bytes = copied.manifest_bytes;
		out->segments_linked = copied.segments_linked;
		out->bytes_linked = copied.bytes_linked;
		out->segments_copied = copied.segments_copied;
		out->bytes_copied = copied.bytes_copied;
	}
	return rc;
}

struct name_list {
	struct branch_record *branches;
	size_t branch_count;
	struct manifest_tag *tags;
	size_t tag_count;
};

static int collect_branch(const struct branch_record *branch, void *context)
{
	struct name_list *list = context;
	struct branch_record *grown = realloc(list->branches, (list->branch_count + 1) * sizeof *grown);
	if (!grown)
		return -ENOMEM;
	list->branches = grown;
	list->branches[list->branch_count++] = *branch;
	return 0;
}

static int collect_tag(const struct manifest_tag *tag, void *context)
{
	struct name_list *list = context;
	struct manifest_tag *grown = realloc(list->tags, (list->tag_count + 1) * sizeof *grown);
	if (!grown)
		return -ENOMEM;
	list->tags = grown;
	list->tags[list->tag_count++] = *tag;
	return 0;
}

static int names_of(struct manifest *manifest, const struct root_record *root, struct name_list *out)
{
	int rc = manifest_branches_each(manifest, root, collect_branch, out);
	if (rc == 0)
		rc = manifest_tags_each(manifest, root, collect_tag, out);
	return rc;
}

static void names_free(struct name_list *list)
{
	free(list->branches);
	free(list->tags);
}

static const struct branch_record *branch_named(const struct name_list *list, const char *name)
{
	for (size_t i = 0; i < list->branch_count; i++)
		if (strcmp(list->branches[i].name, name) == 0)
			return &list->branches[i];
	return NULL;
}

static const struct manifest_tag *tag_named(const struct name_list *list, const char *name)
{
	for (size_t i = 0; i < list->tag_count; i++)
		if (strcmp(list->tags[i].name, name) == 0)
			return &list->tags[i];
	return NULL;
}

static void say(store_report_fn report, void *context, const char *format, ...)
	__attribute__((format(printf, 3, 4)));

static void say(store_report_fn report, void *context, const char *format, ...)
{
	if (!report)
		return;
	char line[512];
	va_list arguments;
	va_start(arguments, format);
	vsnprintf(line, sizeof line, format, arguments);
	va_end(arguments);
	report(line, context);
}

/* Makes branch (created when missing) hold exactly the snapshot's record of it. */
static int restore_branch(struct store *store, const struct name_list *ours, const struct root_record *snapshot_root,
			  const struct branch_record *wanted, const char *message, store_report_fn report,
			  void *context, struct error_info *error)
{
	int rc = 0;
	if (!branch_named(ours, wanted->name)) {
		const char *from = wanted->forked_from[0] && branch_named(ours, wanted->forked_from) ? wanted->forked_from
												   : "main";
		if ((rc = store_branch_create(store, wanted->name, from, NULL, error)) < 0)
			return rc;
		say(report, context, "created branch %s", wanted->name);
	}
	struct manifest_snapshot view = { .version = wanted->head_version, .root = *snapshot_root, .branch = *wanted };
	struct store_snapshot *then = NULL;
	if ((rc = store_snapshot_wrap(store, &view, wanted->name, &then, error)) < 0)
		return rc;
	struct store_commit_result result;
	rc = store_revert_to(store, wanted->name, then, message, NULL, &result, error);
	store_snapshot_release(then);
	if (rc == -ENODATA) {
		say(report, context, "branch %s: unchanged", wanted->name);
		error_info_clear(error);
		return 0;
	}
	if (rc == 0)
		say(report, context, "branch %s: restored as version %llu (commit %s)", wanted->name,
		    (unsigned long long)result.version, result.commit);
	return rc;
}

static int restore_steps_held(struct store *store, const char *path, store_report_fn report, void *context,
			      struct error_info *error)
{
	struct store_options options = { .read_only = true };
	struct store *snapshot = NULL;
	struct name_list theirs = { 0 }, ours = { 0 };
	struct root_record snapshot_root, latest;
	int rc = store_handle_open(path, &options, &snapshot, error);
	if (rc < 0)
		return rc;
	if ((rc = manifest_latest(snapshot->manifest, &snapshot_root)) < 0 ||
	    (rc = names_of(snapshot->manifest, &snapshot_root, &theirs)) < 0) {
		error_info_set(error, rc, "cannot read the snapshot %s: %s", path, io_strerror(rc));
		goto out;
	}
	rc = manifest_root_is_ours(store->manifest, manifest_store_id(snapshot->manifest), &snapshot_root);
	if (rc == -ESTALE) {
		rc = error_info_set(error, -ESTALE,
				    "%s ran gc after the snapshot %s was taken, so blocks the snapshot shares with it may be gone: it cannot be restored in place; load its contents instead (graphfs dump %s > graph.ndjson; graphfs load %s graph.ndjson)",
				    store->path, path, path, store->path);
		goto out;
	}
	if (rc == -ENOENT) {
		rc = error_info_set(error, -EINVAL,
				    "%s is not a snapshot of %s (another store, or one whose history was rewritten): move data between stores with graphfs dump and graphfs load",
				    path, store->path);
		goto out;
	}
	if (rc < 0)
		goto out;
	if ((rc = manifest_refresh(store->manifest, NULL)) < 0 || (rc = manifest_latest(store->manifest, &latest)) < 0 ||
	    (rc = names_of(store->manifest, &latest, &ours)) < 0)
		goto out;
	char message[160];
	snprintf(message, sizeof message, "restore from a snapshot of version %llu",
		 (unsigned long long)snapshot_root.version);
	/* branches: main first, then sources before the branches forked from them */
	bool *done = calloc(theirs.branch_count + 1, sizeof *done);
	if (!done) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t pass = 0; rc == 0 && pass <= theirs.branch_count; pass++)
		for (size_t i = 0; rc == 0 && i < theirs.branch_count; i++) {
			const struct branch_record *wanted = &theirs.branches[i];
			const struct branch_record *source = wanted->forked_from[0] ? branch_named(&theirs, wanted->forked_from) : NULL;
			bool ready = !source || done[source - theirs.branches];
			if (done[i] || !ready)
				continue;
			rc = restore_branch(store, &ours, &snapshot_root, wanted, message, report, context, error);
			done[i] = true;
		}
	free(done);
	if (rc < 0)
		goto out;
	/* branches the snapshot does not have: the ones nothing was forked from first */
	for (size_t pass = 0; rc == 0 && pass <= ours.branch_count; pass++)
		for (size_t i = 0; rc == 0 && i < ours.branch_count; i++) {
			const char *name = ours.branches[i].name;
			if (!name[0] || branch_named(&theirs, name))
				continue;
			rc = store_branch_delete(store, name, NULL, true, NULL, error);
			if (rc == -ENOTEMPTY && pass < ours.branch_count) {
				error_info_clear(error);
				rc = 0;
				continue;
			}
			if (rc == 0) {
				say(report, context, "deleted branch %s", name);
				ours.branches[i].name[0] = '\0';
			}
		}
	if (rc < 0)
		goto out;
	/* tags: exactly the snapshot's */
	for (size_t i = 0; rc == 0 && i < ours.tag_count; i++) {
		const struct manifest_tag *wanted = tag_named(&theirs, ours.tags[i].name);
		if (wanted && wanted->version == ours.tags[i].version && wanted->time_us == ours.tags[i].time_us)
			continue;
		if ((rc = manifest_tag_delete(store->manifest, ours.tags[i].name, NULL, error)) == 0)
			say(report, context, "deleted tag %s", ours.tags[i].name);
	}
	for (size_t i = 0; rc == 0 && i < theirs.tag_count; i++) {
		const struct manifest_tag *have = tag_named(&ours, theirs.tags[i].name);
		if (have && have->version == theirs.tags[i].version && have->time_us == theirs.tags[i].time_us)
			continue;
		if ((rc = manifest_tag_put(store->manifest, &theirs.tags[i], error)) == 0)
			say(report, context, "restored tag %s", theirs.tags[i].name);
	}
out:
	names_free(&theirs);
	names_free(&ours);
	store_handle_close(snapshot);
	return rc;
}

/* ---- the marker -------------------------------------------------------------------------- */

/* The restore's steps with the gc lock held shared: no gc returns space the
 * snapshot's states share while they are brought back. */
static int restore_steps(struct store *store, const char *path, store_report_fn report, void *context,
			 struct error_info *error)
{
	int rc = manifest_gc_hold(store->manifest);
	if (rc < 0)
		return error_info_set(error, rc, "cannot wait for gc to finish: %s", io_strerror(rc));
	rc = restore_steps_held(store, path, report, context, error);
	manifest_gc_unlock(store->manifest);
	return rc;
}

#define RESTORE_MARKER "restoring"
#define RESTORE_LEASES "leases"
#define RESTORE_LEASE "restore"

/*
 * The marker of a restore in progress. In a local store it is the file
 * `restoring`, flock-held by the process working on it; in an object store,
 * where no lock crosses hosts, the lease leases/restore (docs/FORMAT.md §19):
 * its first line the snapshot's path, alive while its holder renews it, taken
 * over (completed) by a read-write open that finds it expired.
 */
struct restore_marker {
	int directory;              /* the store's directory (local), or -1 */
	struct io_file file;        /* local: the marker file, flock-held */
	struct lease *lease;        /* object store: the lease held */
	char path[PATH_MAX + 1];    /* the snapshot it names */
};

/* Takes the object-store marker: a new one naming path, or (path NULL) an expired one
 * left by a restorer that died. 0, -ENOENT (none), -EWOULDBLOCK (its holder is alive), -errno. */
static int marker_take_remotely(struct store *store, const char *path, struct restore_marker *marker)
{
	int store_directory = io_directory_open(store->path);
	if (store_directory < 0)
		return store_directory;
	int leases = io_directory_open_at(store_directory, RESTORE_LEASES);
	close(store_directory);
	if (leases < 0)
		return leases;
	char left[PATH_MAX + 1] = "";
	int alive = lease_alive(leases, RESTORE_LEASE, left, sizeof left);
	int rc = alive < 0 ? alive : alive ? -EWOULDBLOCK : 0;
	if (rc == 0 && !path && !left[0])
		rc = -ENOENT;   /* the common case: one HEAD, nothing to do */
	if (rc == 0 && left[0])
		io_unlink(leases, RESTORE_LEASE);   /* a dead restorer's: this process completes or replaces it */
	close(leases);
	if (rc < 0)
		return rc;
	snprintf(marker->path, sizeof marker->path, "%s", path ? path : left);
	rc = lease_begin(store->path, RESTORE_LEASES, RESTORE_LEASE, marker->path, true, &marker->lease);
	return rc == -EEXIST ? -EWOULDBLOCK : rc;   /* another process took it first */
}

/* Opens (creating when path is not NULL) the marker, held (flock, or lease). 0, -ENOENT
 * (none), -EWOULDBLOCK (another process holds it), -errno; nothing held on error. */
static int marker_open(struct store *store, const char *path, struct restore_marker *marker)
{
	marker->directory = -1;
	marker->file = (struct io_file){ -1, IO_MANIFEST, NULL };
	marker->lease = NULL;
	marker->path[0] = '\0';
	if (s3_location_is_s3(store->path))
		return marker_take_remotely(store, path, marker);
	int directory = io_directory_open(store->path);
	if (directory < 0)
		return directory;
	struct io_file *out = &marker->file;
	int rc = io_file_open(directory, RESTORE_MARKER, path ? O_RDWR | O_CREAT : O_RDWR, IO_MANIFEST, out);
	if (rc == 0 && (rc = io_lock(out, true, false)) < 0)
		io_file_close(out);
	if (rc == 0 && path) {
		size_t length = strlen(path);
		char *line = malloc(length + 2);
		rc = line ? 0 : -ENOMEM;
		if (line) {
			memcpy(line, path, length);
			line[length] = '\n';
			if ((rc = io_truncate(out, 0)) == 0 && (rc = io_pwrite(out, line, length + 1, 0)) == 0 &&
			    (rc = io_fsync(out)) == 0)
				rc = io_directory_sync(directory);
			free(line);
		}
		if (rc < 0)
			io_file_close(out);
		snprintf(marker->path, sizeof marker->path, "%s", path);
	} else if (rc == 0) {
		ssize_t length = io_pread_some(out, marker->path, sizeof marker->path - 1, 0);
		if (length <= 1 || marker->path[length - 1] != '\n') {
			marker->path[0] = '\0';   /* damaged: said by the caller */
		} else {
			marker->path[length - 1] = '\0';
		}
	}
	if (rc < 0) {
		close(directory);
		return rc;
	}
	marker->directory = directory;
	return 0;
}

/* Removes the marker (the restore is complete) and lets it go. */
static void marker_remove(struct restore_marker *marker)
{
	if (marker->lease) {
		lease_end(marker->lease, true);
		marker->lease = NULL;
		return;
	}
	if (io_unlink(marker->directory, RESTORE_MARKER) == 0)
		io_directory_sync(marker->directory);
	io_file_close(&marker->file);
	close(marker->directory);
}

/* Lets the marker go, leaving it (the restore is not complete: the next open completes it). */
static void marker_close(struct restore_marker *marker)
{
	if (marker->lease) {
		lease_end(marker->lease, false);   /* it expires: another open takes it over */
		marker->lease = NULL;
		return;
	}
	io_file_close(&marker->file);
	close(marker->directory);
}

struct version_check {
	uint64_t version;
	struct error_info *error;
};

static int check_version(struct manifest *manifest, void *context)
{
	struct version_check *check = context;
	struct root_record latest;
	int rc = manifest_latest(manifest, &latest);
	if (rc == 0 && latest.version != check->version)
		rc = error_info_set(check->error, -EBUSY,
				    "the store is at version %llu, not %llu (--if-version): nothing was restored",
				    (unsigned long long)latest.version, (unsigned long long)check->version);
	return rc;
}

int store_restore(struct store *store, const char *path, const struct store_condition *condition,
		  store_report_fn report, void *context, struct error_info *error)
{
	error_info_clear(error);
	if (store->read_only)
		return error_info_set(error, -EROFS, "the store is open read-only");
	char absolute[PATH_MAX];
	if (!realpath(path, absolute))
		return error_info_set(error, -errno, "cannot find the snapshot %s: %s", path, strerror(errno));
	/* a snapshot that is not of this store is refused before anything is marked */
	struct store_options options = { .read_only = true };
	struct store *snapshot = NULL;
	struct root_record snapshot_root;
	int rc = store_handle_open(absolute, &options, &snapshot, error);
	if (rc < 0)
		return rc;
	rc = manifest_latest(snapshot->manifest, &snapshot_root);
	if (rc == 0)
		rc = manifest_root_is_ours(store->manifest, manifest_store_id(snapshot->manifest), &snapshot_root);
	store_handle_close(snapshot);
	if (rc == -ESTALE)
		return error_info_set(error, -ESTALE,
				      "%s ran gc after the snapshot %s was taken, so blocks the snapshot shares with it may be gone: it cannot be restored in place; load its contents instead (graphfs dump %s > graph.ndjson; graphfs load %s graph.ndjson)",
				      store->path, path, path, store->path);
	if (rc == -ENOENT)
		return error_info_set(error, -EINVAL,
				      "%s is not a snapshot of %s (another store, or one whose history was rewritten): move data between stores with graphfs dump and graphfs load",
				      path, store->path);
	if (rc < 0)
		return error_info_set(error, rc, "cannot read the snapshot %s: %s", path, io_strerror(rc));
	if (condition && condition->has_version) {
		struct version_check check = { condition->version, error };
		if ((rc = manifest_run_locked(store->manifest, check_version, &check, error)) < 0)
			return rc;
	}
	struct restore_marker marker;
	if ((rc = marker_open(store, absolute, &marker)) < 0)
		return error_info_set(error, rc, rc == -EWOULDBLOCK ? "another process is restoring %s" : "cannot mark the restore of %s: %s",
				      store->path, io_strerror(rc));
	rc = io_failpoint("restore.after_marker");
	if (rc == 0)
		rc = restore_steps(store, absolute, report, context, error);
	else
		error_info_set(error, rc, "the restore stopped after its marker: %s", io_strerror(rc));
	if (rc == 0)
		marker_remove(&marker);
	else
		marker_close(&marker);
	return rc;
}

void store_restore_resume(struct store *store)
{
	struct restore_marker marker;
	if (marker_open(store, NULL, &marker) < 0)
		return;   /* none, or its restorer is alive */
	if (!marker.path[0]) {
		io_log(LOG_ERR, "%s/%s: damaged restore marker removed (the restore it named may be incomplete: run graphfs restore again)",
		       store->path, RESTORE_MARKER);
		marker_remove(&marker);
		return;
	}
	struct error_info error;
	error_info_clear(&error);
	io_log(LOG_NOTICE, "%s: completing the restore from %s that a crash interrupted", store->path, marker.path);
	int rc = restore_steps(store, marker.path, NULL, NULL, &error);
	if (rc == 0) {
		marker_remove(&marker);
		return;
	}
	io_log(LOG_ERR, "%s: the interrupted restore from %s cannot be completed (%s): its branches may be partly restored; run graphfs restore again",
	       store->path, marker.path, error.message[0] ? error.message : io_strerror(rc));
	marker_close(&marker);
}
