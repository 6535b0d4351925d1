/*
 * store_retention — `gc` through the store API: the horizon, pins and the
 * space they give back (core/manifest_gc.c does the work; docs/ARCHITECTURE.md
 * "Retention").
 */
#include "store_int.h"

#include <errno.h>
#include <string.h>

int store_gc(struct store *store, const struct store_gc_options *options, store_progress_fn progress,
	     void *progress_context, struct store_gc_result *out, struct error_info *error)
{
	memset(out, 0, sizeof *out);
	if (store->read_only)
		return error_info_set(error, -EROFS, "the store is open read-only");
	struct manifest_gc_request request = {
		.keep_versions = options->keep_versions,
		.keep_since_us = options->keep_since_us,
		.dry_run = options->dry_run,
		.progress = progress,
		.progress_context = progress_context,
	};
	struct manifest_gc_result result;
	int rc = manifest_gc(store->manifest, &request, &result, error);
	if (rc < 0)
		return rc;
	out->version = result.version;
	out->horizon_before = result.horizon_before;
	out->horizon = result.horizon;
	out->versions_reclaimed = result.versions_reclaimed;
	out->versions_pinned = result.versions_pinned;
	out->manifest_bytes_before = result.manifest_bytes_before;
	out->manifest_bytes_after = result.manifest_bytes_after;
	out->manifest_bytes_reclaimed = result.manifest_bytes_reclaimed;
	out->segments_removed = result.segments_removed;
	out->segment_bytes_reclaimed = result.segment_bytes_reclaimed;
	return 0;
}

uint64_t store_horizon(struct store *store)
{
	struct root_record root;
	return manifest_latest(store->manifest, &root) < 0 ? 0 : root.horizon;
}

uint64_t store_sweep_sequence(struct store *store)
{
	return manifest_sweep_sequence(store->manifest);
}
