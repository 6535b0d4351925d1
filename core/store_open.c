/*
 * store_open — the top of the store layer: opening a store as its users do
 * (store_open: the handle, the mounts' delete check, and the completion of a
 * restore a crash interrupted) and closing it (releasing the branch it
 * serves). The handle itself — options, the manifest, the schema cache — is
 * store.c's (store_handle_open); the files in between (serving, backup) use
 * that handle-only open, so nothing below calls back up here.
 */
#include "store_int.h"

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
	return 0;
}

void store_close(struct store *store)
{
	if (!store)
		return;
	store_unserve(store);
	store_handle_close(store);
}
