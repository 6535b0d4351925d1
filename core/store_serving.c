/*
 * store_serving — which branches are served by a running mount, so that no
 * other process deletes a branch from under it (docs/FORMAT.md §19).
 *
 * A mount that serves branch B keeps serving/<B>.<pid> (created 0600 in the
 * store's serving/ directory, 0700) open with an exclusive flock(2) for as
 * long as it runs. flock locks belong to the open file: when the process
 * ends, however it ends, the lock goes with it. A branch is served while
 * some serving/<B>.* file is locked; a file found unlocked is stale (its
 * daemon died) and is removed by whoever finds it.
 *
 * In an object store no lock outlives its process or crosses hosts, so the
 * serving object is a lease: serving/<B>.<host>-<pid> holds "PID WHERE" and
 * "expires UNIX_MICROSECONDS", rewritten by a thread of the mount every third
 * of the lease (30 s; GRAPHFS_LEASE_SECONDS). A branch is served while some
 * serving/<B>.* object has not expired; an expired one (its host died or was
 * cut off) is removed by whoever finds it (docs/FORMAT.md §19). With no
 * store lock across hosts, a delete stores deleting/<B>.<host>-<pid> (a
 * lease) before it checks the serving leases and removes it once published;
 * a mount stores its own lease, then waits while such a delete is live,
 * then checks the branch exists: each writes before it reads, so either the
 * delete sees the mount or the mount sees the delete (invariant 3).
 *
 * Invariants:
 *   1. A store handle serves at most one branch; the lock (or lease) lives
 *      exactly as long as the handle (store_close releases it).
 *   2. A branch is never reported served by a dead process.
 *   3. No race between a delete and a mount starting: the delete checks the
 *      serving files under the store lock just before it publishes, and a
 *      mount that has locked its serving file checks under the store lock
 *      that the branch still exists. Whichever takes the lock first wins.
 */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lease.h"
#include "s3.h"

#define SERVING_DIRECTORY "serving"
#define DELETING_DIRECTORY "deleting"   /* an object store: deletes in progress (store_delete_announce) */

/* Opens the store directory and its serving/ subdirectory (created if missing and
 * create is set: only a mount that serves makes it). */
static int serving_directory_open(struct store *store, bool create, int *store_directory, int *serving)
{
	*serving = -1;
	*store_directory = io_directory_open(store->path);
	if (*store_directory < 0)
		return *store_directory;
	int rc = create ? io_directory_make(*store_directory, SERVING_DIRECTORY) : 0;
	if (rc < 0 && rc != -EEXIST)
		goto out;
	*serving = io_directory_open_at(*store_directory, SERVING_DIRECTORY);
	rc = *serving < 0 ? *serving : 0;
out:
	if (rc < 0) {
		close(*store_directory);
		*store_directory = -1;
	}
	return rc;
}

struct branch_check {
	struct store *store;
	const char *branch;
};

static int branch_still_exists(struct manifest *manifest, void *context)
{
	struct branch_check *check = context;
	struct store_snapshot *snapshot = NULL;
	int rc = store_snapshot_open(check->store, check->branch, STORE_LATEST, &snapshot, NULL);
	store_snapshot_release(snapshot);
	return rc;
}

/* store_serve_branch in an object store: a lease (lease.h), then the same check as below. */
static int serve_remotely(struct store *store, const char *branch, const char *where, struct error_info *error);
static int deletes_wait(struct store *store, const char *branch);

/* Once the branch is served: checks, under the store lock, that it still exists; if not the handle
 * stops serving it. 0, -ENOENT ("no branch named …") or another -errno. */
static int serve_confirm(struct store *store, const char *branch, struct error_info *error)
{
	struct branch_check check = { store, branch };
	int rc = manifest_run_locked(store->manifest, branch_still_exists, &check, error);
	if (rc < 0) {
		if (rc == -ENOENT)
			error_info_set(error, rc, "no branch named \"%s\"", branch);
		store_unserve(store);
	}
	return rc;
}

int store_serve_branch(struct store *store, const char *branch, const char *where,
		       struct error_info *error)
{
	branch = store_branch_or_main(branch);
	if (store->read_only)
		return 0;   /* nothing can delete it through a read-only mount's record anyway */
	if (store->serving.descriptor >= 0 || store->lease)
		return error_info_set(error, -EBUSY, "this handle already serves a branch");
	if (s3_location_is_s3(store->path))
		return serve_remotely(store, branch, where, error);
	int store_directory, serving;
	int rc = serving_directory_open(store, true, &store_directory, &serving);
	if (rc < 0)
		return error_info_set(error, rc, "cannot open %s/%s: %s", store->path, SERVING_DIRECTORY,
				      io_strerror(rc));
	char name[JOURNAL_NAME_MAX + 32];
	snprintf(name, sizeof name, "%s.%ld", branch, (long)getpid());
	struct io_file file;
	rc = io_file_open(serving, name, O_RDWR | O_CREAT | O_TRUNC, IO_MANIFEST, &file);
	if (rc < 0) {
		error_info_set(error, rc, "cannot create %s/%s/%s: %s", store->path, SERVING_DIRECTORY, name,
			       io_strerror(rc));
		goto out;
	}
	rc = io_lock(&file, true, false);
	if (rc == 0) {
		char text[4200];
		int length = snprintf(text, sizeof text, "%ld %s\n", (long)getpid(), where ? where : "");
		rc = io_pwrite(&file, text, (size_t)length < sizeof text ? (size_t)length : sizeof text - 1, 0);
	}
	if (rc < 0) {
		error_info_set(error, rc, "cannot lock %s/%s/%s: %s", store->path, SERVING_DIRECTORY, name,
			       io_strerror(rc));
		io_file_close(&file);
		io_unlink(serving, name);
		goto out;
	}
	store->serving = file;
	snprintf(store->serving_name, sizeof store->serving_name, "%s", name);
	/* Served from here on; under the store lock, a delete that published first is seen now. */
	rc = serve_confirm(store, branch, error);
out:
	close(serving);
	close(store_directory);
	return rc;
}

static int serve_remotely(struct store *store, const char *branch, const char *where, struct error_info *error)
{
	char holder[100], first_line[4200];
	lease_holder(holder, sizeof holder);
	snprintf(store->serving_name, sizeof store->serving_name, "%s.%s", branch, holder);
	snprintf(first_line, sizeof first_line, "%ld %s", (long)getpid(), where ? where : "");
	int rc = lease_begin(store->path, SERVING_DIRECTORY, store->serving_name, first_line, false, &store->lease);
	if (rc < 0) {
		store->serving_name[0] = '\0';
		return error_info_set(error, rc, "cannot store the lease %s/%s/%s.*: %s", store->path, SERVING_DIRECTORY,
				      branch, io_strerror(rc));
	}
	/* Served from here on. A delete that announced itself before the lease was stored may not
	 * have seen it: wait until it is done, then see whether the branch is still there. */
	if ((rc = deletes_wait(store, branch)) < 0) {
		error_info_set(error, rc, "cannot tell whether branch %s is being deleted: %s", branch, io_strerror(rc));
		store_unserve(store);
		return rc;
	}
	return serve_confirm(store, branch, error);
}

void store_threads_pause(struct store *store)
{
	lease_pause(store->lease);
	manifest_leases_pause(store->manifest);
	io_threads_pause();
}

int store_threads_resume(struct store *store)
{
	io_threads_resume();
	int rc = lease_resume(store->lease);
	int pins = manifest_leases_resume(store->manifest);
	return rc < 0 ? rc : pins;
}

int store_delete_announce(struct store *store, const char *branch, struct lease **out)
{
	*out = NULL;
	if (!s3_location_is_s3(store->path))
		return 0;   /* a local delete and mount meet under the store lock instead */
	char holder[100], name[JOURNAL_NAME_MAX + 110];
	lease_holder(holder, sizeof holder);
	snprintf(name, sizeof name, "%s.%s", branch, holder);
	return lease_begin(store->path, DELETING_DIRECTORY, name, "delete", false, out);
}

struct serving_search {
	int directory;
	const char *branch;
	size_t branch_length;
	char *where;          /* the first line of what is found (may be NULL) */
	size_t where_size;
	bool found;
};

/* A lease named <branch>.*: found if it has not expired; an expired one (its holder died) goes. */
static int lease_visit(struct serving_search *search, const char *name)
{
	int alive = lease_alive(search->directory, name, search->where, search->where_size);
	if (alive < 0)
		return alive;
	if (alive == 0)
		io_unlink(search->directory, name);
	search->found = alive > 0;
	return search->found ? 1 : 0;
}

static int delete_visit(const char *name, void *context)
{
	struct serving_search *search = context;
	if (strncmp(name, search->branch, search->branch_length) != 0 || name[search->branch_length] != '.')
		return 0;
	return lease_visit(search, name);
}

static int deletes_wait(struct store *store, const char *branch)
{
	struct timespec pause = { 0, 50 * 1000000L };
	for (unsigned waited_ms = 0;; waited_ms += 50) {
		int store_directory = io_directory_open(store->path);
		if (store_directory < 0)
			return store_directory;
		int directory = io_directory_open_at(store_directory, DELETING_DIRECTORY);
		struct serving_search search = { directory, branch, strlen(branch), NULL, 0, false };
		int rc = directory < 0 ? 0 : io_directory_list(directory, NULL, delete_visit, &search);
		if (directory >= 0)
			close(directory);
		close(store_directory);
		if (rc < 0 && rc != -ENOENT)
			return rc;
		if (!search.found)
			return 0;
		if (waited_ms > (lease_seconds() + 1) * 1000u)
			return -EBUSY;   /* a lease's time and more: no delete takes that long */
		nanosleep(&pause, NULL);
	}
}

void store_unserve(struct store *store)
{
	if (store->lease) {
		lease_end(store->lease, true);
		store->lease = NULL;
		store->serving_name[0] = '\0';
		return;
	}
	if (store->serving.descriptor < 0)
		return;
	int store_directory, serving;
	if (serving_directory_open(store, false, &store_directory, &serving) == 0) {
		io_unlink(serving, store->serving_name);
		close(serving);
		close(store_directory);
	}
	io_file_close(&store->serving);
	store->serving_name[0] = '\0';
}


static int serving_visit(const char *name, void *context)
{
	struct serving_search *search = context;
	if (strncmp(name, search->branch, search->branch_length) != 0 || name[search->branch_length] != '.')
		return 0;
	struct io_file file;
	if (io_file_open(search->directory, name, O_RDONLY, IO_MANIFEST, &file) < 0)
		return 0;
	if (io_file_is_remote(&file)) {
		io_file_close(&file);
		return lease_visit(search, name);   /* served until the lease expires */
	}
	int rc = io_lock(&file, true, false);
	if (rc == 0) {
		/* Stale: its daemon is gone. */
		io_unlock(&file);
		io_unlink(search->directory, name);
	} else if (rc == -EWOULDBLOCK) {
		char text[4200];
		ssize_t got = io_pread_some(&file, text, sizeof text - 1, 0);
		text[got > 0 ? got : 0] = '\0';
		text[strcspn(text, "\n")] = '\0';
		snprintf(search->where, search->where_size, "%s", text);
		search->found = true;
	}
	io_file_close(&file);
	return search->found ? 1 : 0;
}

int store_branch_served(struct store *store, const char *branch, char *where, size_t where_size)
{
	branch = store_branch_or_main(branch);
	int store_directory, serving;
	int rc = serving_directory_open(store, false, &store_directory, &serving);
	if (rc < 0)
		return rc == -ENOENT ? 0 : rc;
	struct serving_search search = { serving, branch, strlen(branch), where, where_size, false };
	if (where_size)
		where[0] = '\0';
	rc = io_directory_list(serving, NULL, serving_visit, &search);
	close(serving);
	close(store_directory);
	if (rc < 0)
		return rc;
	return search.found ? 1 : 0;
}

int store_delete_check(const char *name, void *context, struct error_info *error)
{
	struct store *store = context;
	char where[4200];
	int rc = store_branch_served(store, name, where, sizeof where);
	if (rc > 0) {
		const char *space = strchr(where, ' ');
		return error_info_set(error, -EBUSY,
				      "branch %s is mounted at %s (graphfs process %.*s); unmount it first",
				      name, space && space[1] ? space + 1 : "?", space ? (int)(space - where) : 0,
				      where);
	}
	if (rc < 0)
		return error_info_set(error, rc, "cannot tell whether branch %s is mounted: %s", name,
				      io_strerror(rc));
	return 0;
}

/* What both creates check first: a writable store, a valid name, the latest state. 0 or -errno, error set. */
static int branch_create_begin(struct store *store, const char *name, struct error_info *error)
{
	if (store->read_only)
		return error_info_set(error, -EROFS, "the store is open read-only");
	if (!name || !schema_name_is_valid(name, strlen(name)))
		return error_info_set(error, -EINVAL, "invalid branch name \"%.128s\"", name ? name : "");
	int rc = manifest_refresh(store->manifest, NULL);
	if (rc < 0)
		return error_info_set(error, rc, "cannot refresh the store: %s", io_strerror(rc));
	return 0;
}

int store_branch_create(struct store *store, const char *name, const char *from,
			const struct store_condition *condition, struct error_info *error)
{
	int rc = branch_create_begin(store, name, error);
	if (rc < 0)
		return rc;
	struct manifest_condition check;
	store_condition_to_manifest(condition, &check);
	return manifest_branch_create(store->manifest, name, store_branch_or_main(from), &check, error);
}

int store_branch_create_at(struct store *store, const char *name, const char *at,
			   const struct store_condition *condition, struct error_info *error)
{
	int rc = branch_create_begin(store, name, error);
	if (rc < 0)
		return rc;
	/* COMMIT (a ULID), V (the commit that made store version V) or TAG */
	struct ulid commit;
	char *end = NULL;
	unsigned long long version = strtoull(at, &end, 10);
	if (at[0] >= '0' && at[0] <= '9' && end && *end == '\0') {
		struct commit_record record;
		rc = store_commit_at(store, version, &record);
		if (rc == 0)
			commit = record.id;
		journal_commit_record_free(&record);
		if (rc == -ENOENT)
			return error_info_set(error, rc, "no commit made version %llu (0, above the store's version %llu, "
					      "or reclaimed by gc)", version, (unsigned long long)store_version(store));
	} else if (strlen(at) == ULID_TEXT_SIZE - 1 && ulid_parse(at, &commit) == 0) {
		rc = 0;
	} else {
		struct manifest_tag tag;
		rc = manifest_tag_name_check(at, NULL) < 0 ? -ENOENT : manifest_tag_find(store->manifest, at, &tag);
		if (rc == -ENOENT)
			return error_info_set(error, rc, "\"%.128s\" is no commit, version or tag of this store "
					      "(see graphfs log STORE --follow --all, graphfs tag STORE list)", at);
		if (rc == 0 && ulid_is_zero(&tag.branch.head_commit))
			return error_info_set(error, -ENOENT, "tag %s names no commit", at);
		if (rc == 0)
			commit = tag.branch.head_commit;
	}
	if (rc < 0)
		return error_info_set(error, rc, "cannot find %s: %s", at, io_strerror(rc));
	struct manifest_condition check;
	store_condition_to_manifest(condition, &check);
	return manifest_branch_create_at(store->manifest, name, &commit, &check, error);
}

int store_branch_delete(struct store *store, const char *name, const char *mounted_branch, bool force,
			const struct store_condition *condition, struct error_info *error)
{
	if (store->read_only)
		return error_info_set(error, -EROFS, "the store is open read-only");
	if (!name || !schema_name_is_valid(name, strlen(name)))
		return error_info_set(error, -ENOENT, "no branch named \"%.128s\"", name ? name : "");
	/* what the delete checks (merged somewhere?) must be the latest: in an object store, list now */
	int rc = manifest_refresh_now(store->manifest, NULL);
	if (rc < 0)
		return error_info_set(error, rc, "cannot refresh the store: %s", io_strerror(rc));
	struct manifest_condition check;
	store_condition_to_manifest(condition, &check);
	struct lease *announced;
	if ((rc = store_delete_announce(store, name, &announced)) < 0)
		return error_info_set(error, rc, "cannot announce the delete of branch %s: %s", name, io_strerror(rc));
	rc = manifest_branch_delete(store->manifest, name, mounted_branch, force, &check, error);
	lease_end(announced, true);
	return rc;
}
