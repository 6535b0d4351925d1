/*
 * store_names — names for versions (layer: store): what `--at` and
 * history/@<…> accept (a version, a time, a date or a tag), tags, and the
 * compare-and-swap condition of a write (--if-version, --if-commit).
 * Everything here resolves in O(log versions) or O(1) manifest reads; nothing
 * walks the log (docs/FORMAT.md §16.3, §20).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "store_int.h"
#include "store_txn_int.h"

/* ---- compare-and-swap -------------------------------------------------------- */

int store_condition_parse(const char *if_version, const char *if_commit, struct store_condition *out,
			  struct error_info *error)
{
	memset(out, 0, sizeof *out);
	if (if_version) {
		char *end = NULL;
		errno = 0;
		unsigned long long value = strtoull(if_version, &end, 10);
		if (!*if_version || *if_version == '-' || errno || *end)
			return error_info_set(error, -EINVAL, "--if-version takes a version number, not \"%s\"",
					      if_version);
		out->has_version = true;
		out->version = value;
	}
	if (if_commit) {
		if (strlen(if_commit) != ULID_TEXT_SIZE - 1 || ulid_parse(if_commit, &out->commit) < 0 ||
		    ulid_is_zero(&out->commit))
			return error_info_set(error, -EINVAL, "--if-commit takes a commit id (26 characters, see 'graphfs log'), not \"%s\"",
					      if_commit);
		out->has_commit = true;
	}
	return 0;
}

/* ---- versions, times and tags ----------------------------------------------------- */

int store_time_parse(const char *text, uint64_t *time_us)
{
	return journal_parse_time(text, time_us);
}

int store_version_at_time(struct store *store, const char *branch, uint64_t time_us, uint64_t *version,
			  struct error_info *error)
{
	branch = store_branch_or_main(branch);
	char when[32];
	journal_format_time(time_us, when);
	uint64_t store_version_then = 0;
	int rc = manifest_version_at_time(store->manifest, time_us, &store_version_then);
	uint64_t horizon = rc == -ENOENT ? store_horizon(store) : 0;
	if (rc == -ENOENT && horizon)
		return error_info_set(error, rc, "the versions committed at or before %s were reclaimed by gc (horizon %llu), if any",
				      when, (unsigned long long)horizon);
	if (rc == -ENOENT)
		return error_info_set(error, rc, "nothing was committed at or before %s", when);
	if (rc < 0)
		return error_info_set(error, rc, "cannot resolve %s: %s", when, io_strerror(rc));
	struct manifest_snapshot view;
	rc = manifest_snapshot_at(store->manifest, branch, store_version_then, &view);
	if (rc == -ENOENT)
		return error_info_set(error, rc, "branch \"%s\" has no commit at or before %s", branch, when);
	if (rc < 0)
		return error_info_set(error, rc, "cannot resolve branch \"%s\" at %s: %s", branch, when,
				      io_strerror(rc));
	*version = view.branch.head_version;
	return 0;
}

int store_at_parse(const char *text, struct store_at *out, struct error_info *error)
{
	memset(out, 0, sizeof *out);
	const char *digits = text[0] == '@' ? text + 1 : text;
	if (digits[0] >= '0' && digits[0] <= '9' && strspn(digits, "0123456789") == strlen(digits)) {
		char *end = NULL;
		errno = 0;
		unsigned long long value = strtoull(digits, &end, 10);
		if (errno || value == 0)
			return error_info_set(error, -EINVAL, "\"%s\" is not a version (versions start at 1)", text);
		out->kind = STORE_AT_VERSION;
		out->version = value;
		return 0;
	}
	if (digits[0] >= '0' && digits[0] <= '9') {
		if (journal_parse_time(digits, &out->time_us) < 0)
			return error_info_set(error, -EINVAL,
					      "\"%s\" is not a version, a time (2026-12-01T08:00:00Z, fractions and +hh:mm allowed) or a date (2026-12-01)",
					      text);
		out->kind = STORE_AT_TIME;
		return 0;
	}
	if (manifest_tag_name_check(text, NULL) < 0)
		return error_info_set(error, -EINVAL, "\"%s\" is not a version, a time, a date or a tag name", text);
	out->kind = STORE_AT_TAG;
	snprintf(out->tag, sizeof out->tag, "%s", text);
	return 0;
}

int store_snapshot_open_at(struct store *store, const char *branch, const char *at,
			   struct store_snapshot **out, struct error_info *error)
{
	*out = NULL;
	if (!at)
		return store_snapshot_open(store, branch, STORE_LATEST, out, error);
	struct store_at parsed;
	int rc = store_at_parse(at, &parsed, error);
	if (rc < 0)
		return rc;
	uint64_t version = parsed.version;
	switch (parsed.kind) {
	case STORE_AT_TAG:
		return store_snapshot_open_tag(store, parsed.tag, out, error);
	case STORE_AT_TIME:
		rc = store_version_at_time(store, branch, parsed.time_us, &version, error);
		if (rc < 0)
			return rc;
		break;
	case STORE_AT_VERSION:
		break;
	}
	return store_snapshot_open(store, branch, version, out, error);
}

/* ---- tags ------------------------------------------------------------------------------- */

static void tag_info(const struct manifest_tag *tag, struct store_tag_info *out)
{
	memset(out, 0, sizeof *out);
	snprintf(out->name, sizeof out->name, "%s", tag->name);
	snprintf(out->branch, sizeof out->branch, "%s", tag->branch.name);
	out->version = tag->version;
	ulid_format(&tag->branch.head_commit, out->commit);
	out->time_us = tag->time_us;
	snprintf(out->actor, sizeof out->actor, "%s", tag->actor);
	snprintf(out->message, sizeof out->message, "%s", tag->message);
}

struct tag_visit {
	int (*visit)(const struct store_tag_info *tag, void *context);
	void *context;
};

static int visit_tag(const struct manifest_tag *tag, void *context)
{
	struct tag_visit *visit = context;
	struct store_tag_info *info = malloc(sizeof *info);
	if (!info)
		return -ENOMEM;
	tag_info(tag, info);
	int rc = visit->visit(info, visit->context);
	free(info);
	return rc;
}

int store_tags(struct store *store, int (*visit)(const struct store_tag_info *tag, void *context), void *context)
{
	struct tag_visit trampoline = { visit, context };
	struct root_record root;
	int rc = manifest_refresh(store->manifest, NULL);
	if (rc == 0)
		rc = manifest_latest(store->manifest, &root);
	if (rc == 0)
		rc = manifest_tags_each(store->manifest, &root, visit_tag, &trampoline);
	return rc;
}

int store_tag_find(struct store *store, const char *name, struct store_tag_info *out)
{
	if (manifest_tag_name_check(name, NULL) < 0)
		return -ENOENT;
	struct manifest_tag *tag = malloc(sizeof *tag);
	if (!tag)
		return -ENOMEM;
	int rc = manifest_tag_find(store->manifest, name, tag);
	if (rc == 0 && out)
		tag_info(tag, out);
	free(tag);
	return rc;
}

int store_tag_create(struct store *store, const char *name, const char *branch, uint64_t version,
		     const char *message, const char *actor, const struct store_condition *condition,
		     struct error_info *error)
{
	return store_tag_create_at_time(store, name, branch, version, message, actor, 0, condition, error);
}

int store_tag_create_at_time(struct store *store, const char *name, const char *branch, uint64_t version,
			     const char *message, const char *actor, uint64_t time_us,
			     const struct store_condition *condition, struct error_info *error)
{
	if (store->read_only)
		return error_info_set(error, -EROFS, "the store is open read-only");
	struct manifest_tag_request request = {
		.name = name,
		.branch = store_branch_or_main(branch),
		.version = version == STORE_LATEST ? 0 : version,
		.actor = actor && *actor ? actor : store->actor,
		.message = message,
		.time_us = time_us,
	};
	store_condition_to_manifest(condition, &request.condition);
	return manifest_tag_create(store->manifest, &request, NULL, error);
}

int store_tag_delete(struct store *store, const char *name, const struct store_condition *condition,
		     struct error_info *error)
{
	if (store->read_only)
		return error_info_set(error, -EROFS, "the store is open read-only");
	struct manifest_condition check;
	store_condition_to_manifest(condition, &check);
	return manifest_tag_delete(store->manifest, name, &check, error);
}

int store_tag_render_json(const struct store_tag_info *tag, struct buf *out)
{
	char when[32];
	journal_format_time(tag->time_us, when);
	json_t *object = json_pack("{s:s,s:I,s:s,s:s,s:s,s:s,s:s}", "tag", tag->name, "version",
				   (json_int_t)tag->version, "branch", tag->branch, "commit", tag->commit, "time", when,
				   "actor", tag->actor, "message", tag->message);
	if (!object)
		return -ENOMEM;
	char *text = json_dumps(object, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(object);
	if (!text)
		return -ENOMEM;
	int rc = buf_append(out, text, strlen(text));
	if (rc == 0)
		rc = buf_append(out, "\n", 1);
	free(text);
	return rc;
}
