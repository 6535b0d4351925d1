/*
 * manifest_tags — tags: immutable names for one branch's state as of one
 * version (layer: manifest). Byte layout: docs/FORMAT.md §20.
 *
 * A tag record carries the whole branch record of the state it names (heads
 * and names trees, head commit), so a tag resolves in one lookup and stays
 * readable after its branch moves on or is deleted; retention keeps what
 * tag records reach (docs/ARCHITECTURE.md "Retention" hook).
 *
 * Invariants:
 *   1. The tags tree of a root maps each tag name to exactly one record whose
 *      name is its key; a record never changes: a tag is created or deleted,
 *      never moved (create of an existing name is -EEXIST).
 *   2. A tag's version is the version of the commit its branch record is at
 *      (branch.head_version), so tags/T shows exactly history/@version of
 *      that branch.
 *   3. Creating or deleting a tag publishes a root without a new version.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "manifest_int.h"

int manifest_tag_name_check(const char *name, struct error_info *error)
{
	size_t length = name ? strnlen(name, JOURNAL_NAME_MAX + 2) : 0;
	if (length == 0)
		return error_info_set(error, -EINVAL, "tag name is empty");
	if (length > JOURNAL_NAME_MAX)
		return error_info_set(error, -EINVAL, "tag name is longer than %d bytes", JOURNAL_NAME_MAX);
	bool valid = (name[0] >= 'A' && name[0] <= 'Z') || (name[0] >= 'a' && name[0] <= 'z') || name[0] == '_';
	for (size_t i = 1; valid && i < length; i++) {
		char c = name[i];
		valid = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
			c == '-' || (c == '.' && name[i - 1] != '.');
	}
	if (!valid)
		return error_info_set(error, -EINVAL,
				      "tag name \"%.*s\" is not valid: a letter or _, then letters, digits, _, - and . (never two dots in a row)",
				      (int)length, name);
	return 0;
}

static int tag_encode(const struct manifest_tag *tag, struct buf *out)
{
	struct buf branch;
	buf_init(&branch);
	int rc = manifest_branch_encode(&tag->branch, &branch);
	if (rc == 0 && branch.size > UINT16_MAX)
		rc = -E2BIG;
	if (rc == 0 && (rc = buf_put_str(out, tag->name, strlen(tag->name))) == 0 &&
	    (rc = buf_put_u64(out, tag->version)) == 0 && (rc = buf_put_u64(out, tag->time_us)) == 0 &&
	    (rc = buf_put_str(out, tag->actor, strlen(tag->actor))) == 0 &&
	    (rc = buf_put_bytes(out, tag->message, (uint32_t)strlen(tag->message))) == 0)
		rc = buf_put_str(out, (const char *)branch.data, branch.size);
	buf_free(&branch);
	return rc;
}

static bool text_copy(const uint8_t *bytes, size_t length, char *out, size_t size)
{
	if (length >= size || memchr(bytes, 0, length))
		return false;
	memcpy(out, bytes, length);
	out[length] = '\0';
	return true;
}

static int tag_decode(const void *bytes, size_t size, struct manifest_tag *out)
{
	struct buf_reader reader;
	buf_reader_init(&reader, bytes, size);
	memset(out, 0, sizeof *out);
	const uint8_t *name, *actor, *message, *branch;
	size_t name_length = buf_get_str(&reader, &name);
	out->version = buf_get_u64(&reader);
	out->time_us = buf_get_u64(&reader);
	size_t actor_length = buf_get_str(&reader, &actor);
	size_t message_length = buf_get_bytes(&reader, &message);
	size_t branch_length = buf_get_str(&reader, &branch);
	if (reader.failed || buf_reader_remaining(&reader) != 0 || name_length == 0 ||
	    !text_copy(name, name_length, out->name, sizeof out->name) ||
	    !text_copy(actor, actor_length, out->actor, sizeof out->actor) ||
	    !text_copy(message, message_length, out->message, sizeof out->message) ||
	    manifest_branch_decode(branch, branch_length, &out->branch) < 0 || out->version == 0 ||
	    out->branch.head_version != out->version)
		return -EIO;
	return 0;
}

/* Reads the tag name from the tags tree at tags (-ENOENT when absent). */
static int tag_get(struct manifest *manifest, struct block_address tags,
		   const char *name, struct manifest_tag *out)
{
	if (block_address_is_null(tags))
		return -ENOENT;
	struct btree *tree = NULL;
	struct buf value;
	buf_init(&value);
	int rc = btree_open(manifest->pager, tags, &tree);
	if (rc == 0)
		rc = btree_get(tree, name, strlen(name), &value);
	if (rc == 0 && (tag_decode(value.data, value.size, out) < 0 || strcmp(out->name, name) != 0)) {
		io_log(LOG_ERR, "%s/manifest: the record of tag %s is damaged", manifest->path, name);
		rc = -EIO;
	}
	buf_free(&value);
	btree_free(tree);
	return rc;
}

int manifest_tag_find(struct manifest *manifest, const char *name, struct manifest_tag *out)
{
	struct root_record latest;
	int rc = manifest_refresh(manifest, NULL);
	if (rc == 0)
		rc = manifest_latest(manifest, &latest);
	if (rc == 0)
		rc = tag_get(manifest, latest.tags, name, out);
	return rc;
}

int manifest_snapshot_tag(struct manifest *manifest, const char *name, struct manifest_snapshot *out)
{
	struct manifest_tag tag;
	int rc = manifest_tag_find(manifest, name, &tag);
	if (rc == 0)
		rc = manifest_latest(manifest, &out->root);
	/* a tagged version may be at or below the horizon: gc keeps what a tag names */
	if (rc == 0) {
		out->version = tag.version;
		out->branch = tag.branch;
	}
	return rc;
}

int manifest_tags_each(struct manifest *manifest, const struct root_record *root,
		       int (*visit)(const struct manifest_tag *tag, void *context), void *context)
{
	if (block_address_is_null(root->tags))
		return 0;
	struct btree *tree = NULL;
	struct btree_iterator *iterator = NULL;
	struct manifest_tag *tag = malloc(sizeof *tag);
	int rc = tag ? 0 : -ENOMEM;
	if (rc < 0 || (rc = btree_open(manifest->pager, root->tags, &tree)) < 0 ||
	    (rc = btree_iterator_open(tree, NULL, 0, &iterator)) < 0)
		goto out;
	const uint8_t *key, *value;
	size_t key_size, value_size;
	while ((rc = btree_iterator_next(iterator, &key, &key_size, &value, &value_size)) == 1) {
		if (tag_decode(value, value_size, tag) < 0 || strlen(tag->name) != key_size ||
		    memcmp(tag->name, key, key_size) != 0) {
			io_log(LOG_ERR, "%s/manifest: a tag record is damaged", manifest->path);
			rc = -EIO;
			goto out;
		}
		if ((rc = visit(tag, context)) != 0)
			goto out;
	}
out:
	btree_iterator_free(iterator);
	btree_free(tree);
	free(tag);
	return rc;
}

struct tag_call {
	const struct manifest_tag_request *request;
	struct manifest_tag *out;
	const char *name;
	const struct manifest_condition *condition;
	const struct manifest_tag *tag;
};

static int tag_create_once(struct manifest *manifest, void *context, struct error_info *error)
{
	const struct tag_call *call = context;
	const struct manifest_tag_request *request = call->request;
	struct manifest_tag *out = call->out;
	const char *actor = request->actor ? request->actor : "";
	const char *message = request->message ? request->message : "";
	int rc;
	struct manifest_tag *tag = calloc(1, sizeof *tag);
	if (!tag)
		return error_info_set(error, -ENOMEM, "out of memory");
	struct manifest_publish publish;
	struct buf bytes;
	buf_init(&bytes);
	if ((rc = manifest_publish_begin(manifest, &publish, error)) < 0)
		goto out_free;
	const char *branch = request->branch && *request->branch ? request->branch : "main";
	struct manifest_snapshot snapshot;
	rc = request->version ? manifest_snapshot_at(manifest, branch, request->version, &snapshot)
			      : manifest_snapshot_latest(manifest, branch, &snapshot);
	if (rc == 0 && snapshot.branch.head_version == 0)
		rc = -ENOENT;
	if (rc < 0) {
		if (rc == -ENOENT && request->version)
			error_info_set(error, rc, "branch %s has no version %llu", branch,
				       (unsigned long long)request->version);
		else if (rc == -ENOENT)
			error_info_set(error, rc, "branch %s does not exist or has no commit to tag", branch);
		else
			error_info_set(error, rc, "cannot resolve branch %s: %s", branch, io_strerror(rc));
		goto out;
	}
	struct manifest_snapshot head;
	if ((rc = manifest_snapshot_latest(manifest, branch, &head)) < 0 ||
	    (rc = manifest_condition_check(&request->condition, &publish.base, &head.branch, error)) < 0)
		goto out;
	struct manifest_tag existing;
	rc = tag_get(manifest, publish.base.tags, request->name, &existing);
	if (rc == 0) {
		rc = error_info_set(error, -EEXIST, "tag %s already exists (version %llu of %s): tags never move; delete it first",
				    request->name, (unsigned long long)existing.version, existing.branch.name);
		goto out;
	}
	if (rc != -ENOENT)
		goto out;
	snprintf(tag->name, sizeof tag->name, "%s", request->name);
	snprintf(tag->actor, sizeof tag->actor, "%s", actor);
	snprintf(tag->message, sizeof tag->message, "%s", message);
	tag->branch = snapshot.branch;
	/* before its creation a branch's state is held by an ancestor's record: the tag names the branch asked for */
	snprintf(tag->branch.name, sizeof tag->branch.name, "%s", branch);
	tag->version = snapshot.branch.head_version;
	uint64_t published_us = manifest_publish_time(&publish);
	tag->time_us = request->time_us ? request->time_us : published_us;   /* a replayed tag keeps its time */
	if ((rc = tag_encode(tag, &bytes)) < 0 ||
	    (rc = btree_open(manifest->pager, publish.base.tags, &publish.tags)) < 0 ||
	    (rc = btree_put(publish.tags, tag->name, strlen(tag->name), bytes.data, bytes.size)) < 0) {
		error_info_set(error, rc, "cannot create tag %s: %s", request->name, io_strerror(rc));
		goto out;
	}
	rc = manifest_publish_finish(&publish, NULL, published_us, NULL, error);
	if (rc == 0 && out)
		*out = *tag;
out:
	manifest_publish_end(&publish);
out_free:
	buf_free(&bytes);
	free(tag);
	return rc;
}

int manifest_tag_create(struct manifest *manifest, const struct manifest_tag_request *request,
			struct manifest_tag *out, struct error_info *error)
{
	int rc = manifest_tag_name_check(request->name, error);
	if (rc < 0)
		return rc;
	const char *actor = request->actor ? request->actor : "";
	const char *message = request->message ? request->message : "";
	if (strlen(actor) >= sizeof out->actor || strlen(message) >= sizeof out->message)
		return error_info_set(error, -E2BIG, "a tag's actor is at most %zu bytes and its message %zu",
				      sizeof out->actor - 1, sizeof out->message - 1);
	struct tag_call call = { .request = request, .out = out };
	return manifest_race_retry(manifest, tag_create_once, &call, error);
}

static int tag_delete_once(struct manifest *manifest, void *context, struct error_info *error)
{
	const struct tag_call *call = context;
	const char *name = call->name;
	const struct manifest_condition *condition = call->condition;
	int rc;
	struct manifest_publish publish;
	if ((rc = manifest_publish_begin(manifest, &publish, error)) < 0)
		return rc;
	if (condition && condition->has_version && condition->version != publish.base.version) {
		rc = error_info_set(error, -EBUSY, "the store is at version %llu, not %llu (--if-version): nothing was published",
				    (unsigned long long)publish.base.version, (unsigned long long)condition->version);
		goto out;
	}
	struct manifest_tag *existing = malloc(sizeof *existing);
	rc = existing ? tag_get(manifest, publish.base.tags, name, existing) : -ENOMEM;
	uint64_t version = rc == 0 ? existing->version : 0;
	free(existing);
	if (rc < 0) {
		error_info_set(error, rc, rc == -ENOENT ? "no tag %s" : "cannot read tag %s", name);
		goto out;
	}
	/* Below the horizon the tag is all that keeps its state: while someone reads
	 * it (a pin on its version) gc could not find it again once the tag is gone. */
	struct manifest_pin_list pins;
	if (publish.base.horizon && version <= publish.base.horizon &&
	    (rc = manifest_pins_list(manifest, version, version, &pins)) == 0) {
		bool read = pins.count > 0;
		manifest_pin_list_free(&pins);
		if (read) {
			rc = error_info_set(error, -EBUSY, "tag %s is being read (an open file under tags/%s/, or a running export): close it, then delete the tag",
					    name, name);
			goto out;
		}
	}
	if (rc < 0) {
		error_info_set(error, rc, "cannot list the readers of tag %s: %s", name, io_strerror(rc));
		goto out;
	}
	if ((rc = btree_open(manifest->pager, publish.base.tags, &publish.tags)) < 0 ||
	    (rc = btree_delete(publish.tags, name, strlen(name))) < 0) {
		error_info_set(error, rc, "cannot delete tag %s: %s", name, io_strerror(rc));
		goto out;
	}
	rc = manifest_publish_finish(&publish, NULL, manifest_publish_time(&publish),
				     NULL, error);
out:
	manifest_publish_end(&publish);
	return rc;
}

int manifest_tag_delete(struct manifest *manifest, const char *name, const struct manifest_condition *condition,
			struct error_info *error)
{
	int rc = manifest_tag_name_check(name, error);
	if (rc < 0)
		return rc;
	struct tag_call call = { .name = name, .condition = condition };
	return manifest_race_retry(manifest, tag_delete_once, &call, error);
}

static int tag_put_once(struct manifest *manifest, void *context, struct error_info *error)
{
	const struct manifest_tag *tag = ((const struct tag_call *)context)->tag;
	int rc;
	struct manifest_publish publish;
	struct buf bytes;
	buf_init(&bytes);
	if ((rc = manifest_publish_begin(manifest, &publish, error)) < 0)
		return rc;
	struct manifest_tag *existing = malloc(sizeof *existing);
	rc = existing ? tag_get(manifest, publish.base.tags, tag->name, existing) : -ENOMEM;
	free(existing);
	if (rc == 0) {
		rc = error_info_set(error, -EEXIST, "tag %s already exists", tag->name);
		goto out;
	}
	if (rc != -ENOENT)
		goto out;
	if ((rc = tag_encode(tag, &bytes)) < 0 ||
	    (rc = btree_open(manifest->pager, publish.base.tags, &publish.tags)) < 0 ||
	    (rc = btree_put(publish.tags, tag->name, strlen(tag->name), bytes.data, bytes.size)) < 0) {
		error_info_set(error, rc, "cannot write tag %s: %s", tag->name, io_strerror(rc));
		goto out;
	}
	rc = manifest_publish_finish(&publish, NULL, manifest_publish_time(&publish),
				     NULL, error);
out:
	manifest_publish_end(&publish);
	buf_free(&bytes);
	return rc;
}

int manifest_tag_put(struct manifest *manifest, const struct manifest_tag *tag, struct error_info *error)
{
	int rc = manifest_tag_name_check(tag->name, error);
	if (rc < 0)
		return rc;
	struct tag_call call = { .tag = tag };
	return manifest_race_retry(manifest, tag_put_once, &call, error);
}

/* ---- what retention keeps --------------------------------------------------------------- */

struct retained_walk {
	int (*visit)(const char *label, const struct branch_record *state, void *context);
	void *context;
};

static int retained_branch(const struct branch_record *branch, void *context)
{
	struct retained_walk *walk = context;
	char label[JOURNAL_NAME_MAX + 16];
	snprintf(label, sizeof label, "branch %s", branch->name);
	return walk->visit(label, branch, walk->context);
}

static int retained_tag(const struct manifest_tag *tag, void *context)
{
	struct retained_walk *walk = context;
	char label[JOURNAL_NAME_MAX + 16];
	snprintf(label, sizeof label, "tag %s", tag->name);
	return walk->visit(label, &tag->branch, walk->context);
}

int manifest_retained_states_each(struct manifest *manifest, const struct root_record *root,
				  int (*visit)(const char *label, const struct branch_record *state, void *context),
				  void *context)
{
	struct retained_walk walk = { visit, context };
	int rc = manifest_branches_each(manifest, root, retained_branch, &walk);
	if (rc == 0)
		rc = manifest_tags_each(manifest, root, retained_tag, &walk);
	return rc;
}
