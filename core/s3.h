/*
 * s3 — a client for S3-compatible object stores (layer io): the requests an
 * object-store backend needs, and nothing of graphfs's layout. Path-style
 * addressing (ENDPOINT/BUCKET/KEY), requests signed with AWS Signature
 * Version 4 by libcurl (CURLOPT_AWS_SIGV4), payloads unsigned
 * (x-amz-content-sha256: UNSIGNED-PAYLOAD).
 *
 * Every key is relative to the location's prefix and made of
 * [A-Za-z0-9._/-] only (so it needs no escaping in a path, and a listing's
 * XML holds it as is). Errors are negative errno with a message in error:
 *   -ENOENT  no such object (404)
 *   -EEXIST  a conditional create found the object there (412)
 *   -EACCES  refused (401, 403): wrong credentials or no permission
 *   -EINVAL  a bad key or location
 *   -ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH, -ECOMM  no answer (the network;
 *            for a conditional create the outcome is then unknown)
 *   -EREMOTEIO  the server failed (5xx, after retries)
 *   -EIO     anything else: a malformed answer, an unexpected status
 * A client serves one request at a time (its own lock); open one per thread
 * that needs parallel requests.
 */
#ifndef GRAPHFS_S3_H
#define GRAPHFS_S3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "error_info.h"

#define S3_KEY_MAX 512

struct s3_location {
	char endpoint[256];       /* http(s)://host[:port], no trailing slash */
	char region[64];
	char access_key[128];
	char secret_key[256];
	char bucket[64];
	char prefix[256];         /* "" or ending in "/" */
	unsigned list_page;       /* keys per ListObjectsV2 page (0: the server's default, 1,000) */
	uint64_t part_size;       /* s3_put_descriptor beyond this: a multipart upload of parts this size */
};

/*
 * A location from "s3://BUCKET[/PREFIX]" and the environment:
 * AWS_ENDPOINT_URL (default https://s3.REGION.amazonaws.com), AWS_REGION
 * (default us-east-1), AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY
 * (required), GRAPHFS_S3_LIST_PAGE (keys per listing page, default the
 * server's), GRAPHFS_S3_PART_BYTES (the part size of multipart uploads,
 * 5 MiB to 5 GiB, default 64 MiB). 0, or -EINVAL with a message saying what
 * to set.
 */
int s3_location_parse(const char *text, struct s3_location *out, struct error_info *error);
/* Whether text names an object-store location (starts with "s3://"). */
bool s3_location_is_s3(const char *text);

struct s3_client;
/* 0, -ENOMEM, or -EIO (libcurl could not start). Nothing is sent yet. */
int s3_client_open(const struct s3_location *location, struct s3_client **out, struct error_info *error);
void s3_client_free(struct s3_client *client);

enum s3_condition {
	S3_ALWAYS,                /* create or replace */
	S3_IF_ABSENT,             /* If-None-Match: *: create only; -EEXIST if the key exists */
};

/* Stores bytes under key. 0 or an error above; on error the object is as it was. */
int s3_put(struct s3_client *client, const char *key, const void *bytes, size_t size,
	   enum s3_condition condition, struct error_info *error);
/*
 * s3_put of the bytes [0, size) of an open file (read with pread: the file
 * offset is untouched). Beyond the location's part_size it is a multipart
 * upload (so an object may pass S3's 5 GiB limit for one PUT), each part
 * tried again on its own like a read; the object appears whole when the
 * upload completes, or not at all (a failed upload is aborted). With
 * S3_IF_ABSENT the completion carries If-None-Match: * too, and the key is
 * checked absent first (a server that ignores the condition on completion
 * makes this check-then-create, not atomic: used for segments and packs,
 * whose names no other writer takes).
 */
int s3_put_descriptor(struct s3_client *client, const char *key, int descriptor, uint64_t size,
		      enum s3_condition condition, struct error_info *error);
/* Appends bytes [offset, offset + size) of key to out (size 0: to the end).
 * 0 or an error; -ERANGE if offset is at or past the end. */
int s3_get(struct s3_client *client, const char *key, uint64_t offset, uint64_t size, struct buf *out,
	   struct error_info *error);
/* s3_get, also setting *object_size_out to the size of the whole object. */
int s3_get_sized(struct s3_client *client, const char *key, uint64_t offset, uint64_t size, struct buf *out,
		 uint64_t *object_size_out, struct error_info *error);
/* The object's size. 0, -ENOENT or another error. */
int s3_head(struct s3_client *client, const char *key, uint64_t *size_out, struct error_info *error);
/* Removes key (absent is not an error: S3 answers 204 either way). */
int s3_delete(struct s3_client *client, const char *key, struct error_info *error);
/*
 * Visits every key starting with prefix (relative, like every key) in
 * byte order, after start_after when it is not NULL, with its size. visit
 * returns non-zero to stop (a negative value is returned). 0 or an error.
 */
int s3_list(struct s3_client *client, const char *prefix, const char *start_after,
	    int (*visit)(const char *key, uint64_t size, void *context), void *context,
	    struct error_info *error);
/* The keys one page of s3_list holds at most: GRAPHFS_S3_LIST_PAGE, else S3's 1,000. */
unsigned s3_list_page_keys(const struct s3_client *client);

/* What a client sent and received since it was opened (exact: tests assert on them). */
struct s3_counters {
	uint64_t gets, puts, heads, deletes, lists;   /* requests by kind (retries included; a multipart
						 * upload's start and completion, POSTs, count as puts) */
	uint64_t bytes_sent;                          /* request bodies */
	uint64_t bytes_received;                      /* response bodies */
};
void s3_counters_get(const struct s3_client *client, struct s3_counters *out);
/* Every client's counters of this process added up. */
void s3_counters_process(struct s3_counters *out);

#endif
