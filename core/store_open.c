/*
 * store_open — the top of the store layer: opening a store as its users do
 * (store_open: the handle, the mounts' delete check, and the completion of a
 * restore a crash interrupted) and closing it (releasing the branch it
 * serves), and making a store whose newest state is damaged openable again
 * (store_rollback). The handle itself — options, the manifest, the schema
 * cache — is store.c's (store_handle_open); the files in between (serving,
 * backup) use that handle-only open, so nothing below calls back up here.
 */
#include "store_int.h"

#include <stdio.h>
#include <syslog.h>
#include <string.h>

int store_open(const char *path, const struct store_options *options, struct store **out,
	       struct error_info *error)
{
	int rc = store_handle_open(path, options, out, error);
	if (rc < 0)
		return rc;
	struct store *store = *out;
	manifest_set_delete_check(store->manifest, store_delete_check, store);
	if (!store->read_only)
		store_restore_resume(store);
	store->upkeep_at_close = !store->read_only && !(options && options->no_upkeep_at_close);
	store->compaction_at_commit = !(options && options->no_compaction_at_commit);
	store->opened_version = store_version(store);
	return 0;
}

void store_close(struct store *store)
{
	if (!store)
		return;
	/* after a command's commits: its tables' fragments flushed when worth it (store_compact.c),
	 * then the retention policy, if due (store_config.c invariant 2) */
	if (store->upkeep_at_close && store_version(store) > store->opened_version)
		store_compact_flush(store);
	if (store->upkeep_at_close && store_version(store) > store->opened_version) {
		struct store_upkeep upkeep;
		struct error_info error;
		error_info_clear(&error);
		if (store_keep_itself(store, &upkeep, &error) < 0)
			io_log(LOG_WARNING, "%s: the retention policy's gc did not run: %s", store->path, error.message);
	}
	store_unserve(store);
	store_handle_close(store);
}

int store_rollback(const char *path, int (*dropped)(const struct commit_record *record, void *context),
		   void *context, struct store_rollback_result *result, struct error_info *error)
{
	memset(result, 0, sizeof *result);
	struct manifest_rollback_result rolled;
	int rc = manifest_rollback(path, dropped, context, &rolled, error);
	if (rc < 0)
		return rc;
	result->version = rolled.version;
	result->commits_dropped = rolled.commits_dropped;
	result->bytes_dropped = rolled.bytes_dropped;
	struct store *store = NULL;
	if ((rc = store_open(path, NULL, &store, error)) < 0)
		return rc;
	char message[256];
	snprintf(message, sizeof message,
		 "repair --rollback: the newest state was damaged; back at version %llu, %llu commit%s after it dropped",
		 (unsigned long long)rolled.version, (unsigned long long)rolled.commits_dropped,
		 rolled.commits_dropped == 1 ? "" : "s");
	rc = manifest_audit_commit(store->manifest, "main", "graphfs:repair", message, error);
	if (rc == 0)
		result->audit_version = store_version(store);
	if (rc == 0) {
		/* the dropped commits' segments: named by nothing now (a gc without rules keeps every version) */
		struct store_gc_options options = { 0 };
		struct store_gc_result gc;
		struct error_info ignored;
		error_info_clear(&ignored);
		(void)store_gc(store, &options, NULL, NULL, &gc, &ignored);
	}
	store_close(store);
	return rc;
}
