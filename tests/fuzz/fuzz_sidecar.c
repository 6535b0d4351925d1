/*
 * libFuzzer target for the recovery-sidecar decoder (docs/FORMAT.md
 * §17; core/manifest_recovery.c), which every open runs over
 * whatever a writer that died left in recovery/. The first byte picks:
 *
 *   even  the rest is a sidecar file as it lies on disk
 *   odd   the rest is a sidecar's payload, put behind a valid file header and
 *         block (checksum included), so that the payload's own decoding is
 *         reached
 *
 * Beyond "no crash, no sanitizer report": a refusal is -EIO, -EPROTO (then
 * only the version is set) or nothing else; an accepted sidecar holds at most
 * MANIFEST_SIDECAR_MAX_SEGMENTS segments and re-encodes to a file that decodes
 * to the same fields; a sidecar made from a payload carries that payload's
 * fields exactly.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "manifest_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void same_sidecar(const struct manifest_sidecar *a, const struct manifest_sidecar *b)
{
	if (a->version != b->version || memcmp(a->commit.bytes, b->commit.bytes, 16) ||
	    a->base_version != b->base_version || a->writer_pid != b->writer_pid ||
	    a->segment_count != b->segment_count ||
	    (a->segment_count && memcmp(a->segments, b->segments, a->segment_count * sizeof *a->segments)))
		abort();
}

static void check(const uint8_t *file, size_t size, const uint8_t *payload, size_t payload_size)
{
	struct manifest_sidecar sidecar, again;
	memset(&again, 0, sizeof again);
	struct buf encoded;
	buf_init(&encoded);
	int rc = manifest_sidecar_decode(file, size, &sidecar);
	if (rc == -EPROTO) {
		if (sidecar.segments || sidecar.segment_count)
			abort();
		return;
	}
	if (rc < 0) {
		if (rc != -EIO || sidecar.segments)
			abort();
		if (payload && payload_size >= 32 && payload_size - 32 == (size_t)(payload[28] | payload[29] << 8 |
				payload[30] << 16 | (uint32_t)payload[31] << 24) * 8 &&
		    (uint32_t)(payload[28] | payload[29] << 8 | payload[30] << 16 | (uint32_t)payload[31] << 24) <=
			    MANIFEST_SIDECAR_MAX_SEGMENTS)
			abort();   /* a well-formed payload was refused */
		return;
	}
	if (sidecar.segment_count > MANIFEST_SIDECAR_MAX_SEGMENTS || (sidecar.segment_count && !sidecar.segments))
		abort();
	if (payload) {   /* the fields are the payload's: commit, base version, pid, count, segments */
		if (payload_size != 32 + (size_t)sidecar.segment_count * 8 || memcmp(sidecar.commit.bytes, payload, 16) ||
		    sidecar.base_version != buf_load_u64(payload + 16) || sidecar.writer_pid != buf_load_u32(payload + 24))
			abort();
		for (uint32_t i = 0; i < sidecar.segment_count; i++)
			if (sidecar.segments[i] != buf_load_u64(payload + 32 + 8 * (size_t)i))
				abort();
	}
	if (manifest_sidecar_encode(&sidecar, &encoded) < 0 ||
	    manifest_sidecar_decode(encoded.data, encoded.size, &again) < 0)
		abort();
	same_sidecar(&sidecar, &again);
	manifest_sidecar_free(&sidecar);
	manifest_sidecar_free(&again);
	buf_free(&encoded);
}

int LLVMFuzzerTestOneInput(const uint8_t *input, size_t input_size)
{
	if (input_size == 0)
		return 0;
	const uint8_t *data = input + 1;
	size_t size = input_size - 1;
	if (input[0] % 2 == 0) {
		check(data, size, NULL, 0);
		return 0;
	}
	/* file header: magic, version; then the payload as one block */
	struct buf file;
	buf_init(&file);
	if (buf_put_u32(&file, MANIFEST_SIDECAR_MAGIC) < 0 || buf_put_u32(&file, MANIFEST_SIDECAR_VERSION) < 0 ||
	    codec_encode(BLOCK_SIDECAR, (enum codec_kind)(input[0] / 2 % 3), data, size, &file) < 0)
		abort();
	check(file.data, file.size, data, size);
	buf_free(&file);
	return 0;
}
