/*
 * commit — how the mount commits: as the user who wrote (the commit's actor
 * is that user's name @ this host, not the daemon's), with a refusal
 * recorded in .graphfs/errors against the path that was written.
 */
#include <errno.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "mountfs_int.h"

void mount_actor(struct mountfs *mount, uid_t uid, char *out, size_t size)
{
	struct passwd entry, *found = NULL;
	char buffer[1024];
	if (getpwuid_r(uid, &entry, buffer, sizeof buffer, &found) == 0 && found)
		snprintf(out, size, "%s@%s", found->pw_name, mount->host);
	else
		snprintf(out, size, "%u@%s", (unsigned)uid, mount->host);
}

int mount_txn_begin(struct mountfs *mount, const char *branch, uid_t uid, struct store_txn **out,
		    struct error_info *error)
{
	int rc = store_txn_begin(mount->store, branch, out, error);
	if (rc < 0)
		return rc;
	char actor[512];
	mount_actor(mount, uid, actor, sizeof actor);
	rc = store_txn_set_actor(*out, actor);
	if (rc < 0) {
		store_txn_free(*out);
		*out = NULL;
	}
	return rc;
}

int mount_commit(struct mountfs *mount, struct store_txn *txn, const char *message, const char *path)
{
	struct store_commit_result result;
	struct error_info error;
	error_info_clear(&error);
	int rc = store_txn_commit(txn, message, &result, &error);
	if (rc < 0) {
		mount_error_record(mount, path, &error, rc);
		return rc;
	}
	atomic_fetch_add(&mount->commits, 1);
	return 0;
}


size_t mount_commit_message(const char *bytes, size_t size, char *out, size_t out_size)
{
	size_t length = size < out_size - 1 ? size : out_size - 1;
	memcpy(out, bytes, length);
	while (length > 0 && (out[length - 1] == '\n' || out[length - 1] == '\r'))
		length--;
	out[length] = '\0';
	return length;
}
