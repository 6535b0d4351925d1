/*
 * manifest_records — the byte codecs of the manifest's own records: the meta
 * slots, the root and the branch records (docs/FORMAT.md §3, §5, §6). Pure
 * functions over bytes (manifest_root_read adds one block read); no handle
 * state. Everything above in the manifest layer reads and writes records
 * through these.
 */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "manifest_int.h"

static const uint8_t meta_magic[8] = { 'G', 'F', 'S', 'M', 'E', 'T', 'A', 0 };

void manifest_meta_encode(const struct meta_slot *slot, uint8_t out[MANIFEST_META_SLOT_SIZE])
{
	memset(out, 0, MANIFEST_META_SLOT_SIZE);
	memcpy(out, meta_magic, sizeof meta_magic);
	buf_store_u64(out + 8, slot->sequence);
	buf_store_u64(out + 16, slot->root_offset);
	buf_store_u64(out + 24, slot->size);
	buf_store_u64(out + 32, slot->version);
	buf_store_u64(out + 40, codec_hash(out, 40));
}

void manifest_meta_decode(const uint8_t bytes[MANIFEST_META_SLOT_SIZE], struct meta_slot *out)
{
	memset(out, 0, sizeof *out);
	/* every refresh decodes both slots: compare memory, not bytes one by one */
	bool padding_zero = bytes[MANIFEST_META_ENCODED_SIZE] == 0 &&
			    memcmp(bytes + MANIFEST_META_ENCODED_SIZE, bytes + MANIFEST_META_ENCODED_SIZE + 1,
				   MANIFEST_META_SLOT_SIZE - MANIFEST_META_ENCODED_SIZE - 1) == 0;
	if (padding_zero && bytes[0] == 0 && memcmp(bytes, bytes + 1, MANIFEST_META_ENCODED_SIZE) == 0) {
		out->empty = true;
		return;
	}
	if (!padding_zero || memcmp(bytes, meta_magic, sizeof meta_magic) != 0 ||
	    buf_load_u64(bytes + 40) != codec_hash(bytes, 40))
		return;
	out->sequence = buf_load_u64(bytes + 8);
	out->root_offset = buf_load_u64(bytes + 16);
	out->size = buf_load_u64(bytes + 24);
	out->version = buf_load_u64(bytes + 32);
	out->valid = out->sequence > 0 && out->root_offset >= MANIFEST_FIRST_BLOCK &&
		     out->size == out->root_offset + MANIFEST_ROOT_BLOCK_SIZE;
}

int manifest_root_encode(const struct root_record *root, struct buf *out)
{
	size_t start = out->size;
	int rc;
	if ((rc = buf_put_u64(out, root->sequence)) < 0 || (rc = buf_put_u64(out, root->version)) < 0 ||
	    (rc = buf_put_u64(out, root->horizon)) < 0 || (rc = buf_put_u64(out, root->time_us)) < 0 ||
	    (rc = codec_put_address(out, root->branches)) < 0 ||
	    (rc = codec_put_address(out, root->versions)) < 0 ||
	    (rc = codec_put_address(out, root->commit)) < 0 ||
	    (rc = codec_put_address(out, root->previous)) < 0 ||
	    (rc = codec_put_address(out, root->tags)) < 0 || (rc = buf_put_u64(out, root->swept_below)) < 0)
		out->size = start;
	assert(rc < 0 || out->size - start == MANIFEST_ROOT_PAYLOAD_SIZE);
	return rc;
}

int manifest_root_decode(const void *bytes, size_t size, struct root_record *out)
{
	struct buf_reader reader;
	buf_reader_init(&reader, bytes, size);
	struct root_record root = { 0 };
	root.sequence = buf_get_u64(&reader);
	root.version = buf_get_u64(&reader);
	root.horizon = buf_get_u64(&reader);
	root.time_us = buf_get_u64(&reader);
	root.branches = codec_get_address(&reader);
	root.versions = codec_get_address(&reader);
	root.commit = codec_get_address(&reader);
	root.previous = codec_get_address(&reader);
	root.tags = codec_get_address(&reader);
	root.swept_below = buf_get_u64(&reader);
	if (reader.failed || buf_reader_remaining(&reader) != 0 || root.sequence == 0 ||
	    root.horizon > root.version || block_address_is_null(root.branches) ||
	    (root.version == 0) != block_address_is_null(root.commit) ||
	    (root.swept_below != 0 && root.swept_below < MANIFEST_FIRST_BLOCK))
		return -EIO;
	*out = root;
	return 0;
}

int manifest_root_read(struct pager *pager, struct block_address address, struct root_record *out)
{
	struct buf raw;
	buf_init(&raw);
	int rc = pager_read(pager, address, BLOCK_ROOT, &raw);
	if (rc == 0)
		rc = manifest_root_decode(raw.data, raw.size, out);
	if (rc == 0 && address.segment == 0 && out->swept_below > address.offset)
		rc = -EIO;   /* gc sweeps only below its own root */
	if (rc == 0)
		out->self = address;
	buf_free(&raw);
	return rc;
}

int manifest_branch_encode(const struct branch_record *branch, struct buf *out)
{
	size_t start = out->size;
	size_t name_length = strnlen(branch->name, sizeof branch->name);
	size_t from_length = strnlen(branch->forked_from, sizeof branch->forked_from);
	int rc;
	if (name_length == 0 || name_length > JOURNAL_NAME_MAX || from_length > JOURNAL_NAME_MAX)
		return -EINVAL;
	if ((rc = buf_put_str(out, branch->name, name_length)) < 0 ||
	    (rc = buf_append(out, branch->incarnation.bytes, 16)) < 0 ||
	    (rc = buf_append(out, branch->head_commit.bytes, 16)) < 0 ||
	    (rc = codec_put_address(out, branch->head_record)) < 0 ||
	    (rc = buf_put_u64(out, branch->head_version)) < 0 ||
	    (rc = codec_put_address(out, branch->heads)) < 0 ||
	    (rc = codec_put_address(out, branch->names)) < 0 ||
	    (rc = buf_put_str(out, branch->forked_from, from_length)) < 0 ||
	    (rc = buf_put_u64(out, branch->fork_point)) < 0 ||
	    (rc = buf_put_u64(out, branch->created_version)) < 0 ||
	    (rc = buf_put_u64(out, branch->created_time_us)) < 0)
		out->size = start;
	return rc;
}

int manifest_branch_decode(const void *bytes, size_t size, struct branch_record *out)
{
	struct buf_reader reader;
	buf_reader_init(&reader, bytes, size);
	struct branch_record branch;
	memset(&branch, 0, sizeof branch);
	const uint8_t *name_bytes;
	size_t name_length = buf_get_str(&reader, &name_bytes);
	if (!reader.failed && name_length > 0 && name_length <= JOURNAL_NAME_MAX &&
	    !memchr(name_bytes, 0, name_length))
		memcpy(branch.name, name_bytes, name_length);
	else
		return -EIO;
	buf_get_raw(&reader, branch.incarnation.bytes, 16);
	buf_get_raw(&reader, branch.head_commit.bytes, 16);
	branch.head_record = codec_get_address(&reader);
	branch.head_version = buf_get_u64(&reader);
	branch.heads = codec_get_address(&reader);
	branch.names = codec_get_address(&reader);
	const uint8_t *from_bytes;
	size_t from_length = buf_get_str(&reader, &from_bytes);
	if (reader.failed || from_length > JOURNAL_NAME_MAX || memchr(from_bytes, 0, from_length))
		return -EIO;
	memcpy(branch.forked_from, from_bytes, from_length);
	branch.fork_point = buf_get_u64(&reader);
	branch.created_version = buf_get_u64(&reader);
	branch.created_time_us = buf_get_u64(&reader);
	if (reader.failed || buf_reader_remaining(&reader) != 0 ||
	    ulid_is_zero(&branch.incarnation) ||
	    ulid_is_zero(&branch.head_commit) != block_address_is_null(branch.head_record))
		return -EIO;
	*out = branch;
	return 0;
}
