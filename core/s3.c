/*
 * s3 — see s3.h. One libcurl easy handle per client, kept across requests
 * so that its connection is reused; libcurl signs each request (SigV4).
 *
 * Invariants:
 *   1. A request that may have changed the store is never repeated: a
 *      conditional create whose answer was lost returns -EIO ("the outcome
 *      is unknown"), since repeating it would answer 412 for its own object.
 *      Reads, deletes and unconditional puts are repeated up to
 *      S3_ATTEMPTS times on a network error or a 500/503.
 *   2. Counters count every attempt, under the client's lock.
 *   3. An outage costs each request little: once a request found the
 *      endpoint out of reach, every request of the process for the next
 *      S3_OUT_OF_REACH_US makes one attempt with a short connect timeout
 *      (the layers above then read what they already know, and fail writes
 *      at once); the first request that gets an answer ends that.
 */
#include "s3.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "io.h"
#include "s3_curl_int.h"
#include "s3_int.h"

#define S3_ATTEMPTS 3
#define S3_OUT_OF_REACH_US 1000000u    /* invariant 3 */
#define S3_OUT_OF_REACH_CONNECT_S 2L
#define S3_PART_MIN (5ull << 20)       /* S3's smallest part (but the last) */
#define S3_PART_MAX (5ull << 30)       /* and largest */
#define S3_PART_DEFAULT (64ull << 20)
#define S3_PARTS_MAX 10000             /* S3's most parts in one upload */

struct s3_client {
	struct s3_location location;
	CURL *curl;
	pthread_mutex_t lock;          /* one request at a time; guards counters */
	struct s3_counters counters;
	char signature[96];            /* "aws:amz:REGION:s3" */
	char credentials[400];         /* "ACCESS:SECRET" */
};

/* invariant 3: until when (monotonic µs) a request makes one attempt; 0: none */
static _Atomic uint64_t out_of_reach_until_us;

static uint64_t monotonic_us(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000000u + (uint64_t)now.tv_nsec / 1000u;
}

/* every client's counters added up (s3_counters_process) */
static pthread_mutex_t process_lock = PTHREAD_MUTEX_INITIALIZER;
static struct s3_counters process_counters;

enum request_kind { REQUEST_GET, REQUEST_PUT, REQUEST_HEAD, REQUEST_DELETE, REQUEST_LIST, REQUEST_POST };

/* ---- locations ---------------------------------------------------------------------- */

bool s3_location_is_s3(const char *text)
{
	return strncmp(text, "s3://", 5) == 0;
}

static bool key_is_valid(const char *key)
{
	size_t length = strlen(key);
	if (length == 0 || length > S3_KEY_MAX)
		return false;
	for (size_t i = 0; i < length; i++) {
		unsigned char c = (unsigned char)key[i];
		if (!isalnum(c) && c != '.' && c != '_' && c != '/' && c != '-')
			return false;
	}
	return true;
}

static int copy_setting(char *out, size_t size, const char *value, const char *what, struct error_info *error)
{
	if (strlen(value) >= size)
		return error_info_set(error, -EINVAL, "%s is longer than %zu bytes", what, size - 1);
	memcpy(out, value, strlen(value) + 1);
	return 0;
}

int s3_location_parse(const char *text, struct s3_location *out, struct error_info *error)
{
	memset(out, 0, sizeof *out);
	if (!s3_location_is_s3(text))
		return error_info_set(error, -EINVAL, "%s is not an object-store location (s3://BUCKET/PREFIX)", text);
	const char *bucket = text + 5, *slash = strchr(bucket, '/');
	size_t bucket_length = slash ? (size_t)(slash - bucket) : strlen(bucket);
	if (bucket_length == 0 || bucket_length >= sizeof out->bucket)
		return error_info_set(error, -EINVAL, "%s: the bucket name must be 1 to %zu bytes", text,
				      sizeof out->bucket - 1);
	memcpy(out->bucket, bucket, bucket_length);
	for (size_t i = 0; i < bucket_length; i++)
		if (!islower((unsigned char)bucket[i]) && !isdigit((unsigned char)bucket[i]) && bucket[i] != '-' &&
		    bucket[i] != '.')
			return error_info_set(error, -EINVAL,
					      "%s: a bucket name has lowercase letters, digits, '-' and '.' only", text);
	const char *prefix = slash ? slash + 1 : "";
	size_t prefix_length = strlen(prefix);
	while (prefix_length && prefix[prefix_length - 1] == '/')
		prefix_length--;
	if (prefix_length + 2 > sizeof out->prefix)
		return error_info_set(error, -EINVAL, "%s: the prefix is longer than %zu bytes", text,
				      sizeof out->prefix - 2);
	if (prefix_length) {
		memcpy(out->prefix, prefix, prefix_length);
		out->prefix[prefix_length] = '/';
		if (!key_is_valid(out->prefix))
			return error_info_set(error, -EINVAL, "%s: a prefix has letters, digits and ._/- only", text);
	}
	const char *region = getenv("AWS_REGION");
	int rc = copy_setting(out->region, sizeof out->region, region && *region ? region : "us-east-1", "AWS_REGION",
			      error);
	if (rc)
		return rc;
	const char *endpoint = getenv("AWS_ENDPOINT_URL");
	if (endpoint && *endpoint) {
		if (strncmp(endpoint, "http://", 7) && strncmp(endpoint, "https://", 8))
			return error_info_set(error, -EINVAL, "AWS_ENDPOINT_URL=%s must start with http:// or https://",
					      endpoint);
		if ((rc = copy_setting(out->endpoint, sizeof out->endpoint, endpoint, "AWS_ENDPOINT_URL", error)))
			return rc;
		size_t length = strlen(out->endpoint);
		while (length && out->endpoint[length - 1] == '/')
			out->endpoint[--length] = 0;
	} else {
		snprintf(out->endpoint, sizeof out->endpoint, "https://s3.%s.amazonaws.com", out->region);
	}
	const char *access = getenv("AWS_ACCESS_KEY_ID"), *secret = getenv("AWS_SECRET_ACCESS_KEY");
	if (!access || !*access || !secret || !*secret)
		return error_info_set(error, -EINVAL,
				      "%s needs credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", text);
	if ((rc = copy_setting(out->access_key, sizeof out->access_key, access, "AWS_ACCESS_KEY_ID", error)) ||
	    (rc = copy_setting(out->secret_key, sizeof out->secret_key, secret, "AWS_SECRET_ACCESS_KEY", error)))
		return rc;
	/* GRAPHFS_S3_LIST_PAGE: keys per listing page (tests make listings long with few keys) */
	const char *page = getenv("GRAPHFS_S3_LIST_PAGE");
	if (page && *page) {
		char *end;
		unsigned long keys = strtoul(page, &end, 10);
		if (*end || keys == 0 || keys > 1000)
			return error_info_set(error, -EINVAL, "GRAPHFS_S3_LIST_PAGE=%.20s: give 1..1000 keys per page", page);
		out->list_page = (unsigned)keys;
	}
	/* GRAPHFS_S3_PART_BYTES: the part size of multipart uploads (tests make it small) */
	out->part_size = S3_PART_DEFAULT;
	const char *part = getenv("GRAPHFS_S3_PART_BYTES");
	if (part && *part) {
		char *end;
		unsigned long long bytes = strtoull(part, &end, 10);
		if (*end || bytes < S3_PART_MIN || bytes > S3_PART_MAX)
			return error_info_set(error, -EINVAL,
					      "GRAPHFS_S3_PART_BYTES=%.20s: give a part size of %llu to %llu bytes", part,
					      (unsigned long long)S3_PART_MIN, (unsigned long long)S3_PART_MAX);
		out->part_size = bytes;
	}
	return 0;
}

/* ---- the client ------------------------------------------------------------------------ */

int s3_client_open(const struct s3_location *location, struct s3_client **out, struct error_info *error)
{
	*out = NULL;
	int rc = s3_curl_load(error);   /* every libcurl call below follows one that succeeded */
	if (rc < 0)
		return rc;
	struct s3_client *client = calloc(1, sizeof *client);
	if (!client)
		return error_info_set(error, -ENOMEM, "out of memory");
	client->location = *location;
	snprintf(client->signature, sizeof client->signature, "aws:amz:%s:s3", location->region);
	snprintf(client->credentials, sizeof client->credentials, "%s:%s", location->access_key, location->secret_key);
	if (!(client->curl = s3_curl.easy_init()) || pthread_mutex_init(&client->lock, NULL) != 0) {
		if (client->curl)
			s3_curl.easy_cleanup(client->curl);
		free(client);
		return error_info_set(error, -EIO, "cannot start a libcurl handle");
	}
	*out = client;
	return 0;
}

void s3_client_free(struct s3_client *client)
{
	if (!client)
		return;
	s3_curl.easy_cleanup(client->curl);
	pthread_mutex_destroy(&client->lock);
	memset(client->credentials, 0, sizeof client->credentials);
	free(client);
}

void s3_counters_process(struct s3_counters *out)
{
	pthread_mutex_lock(&process_lock);
	*out = process_counters;
	pthread_mutex_unlock(&process_lock);
}

void s3_counters_get(const struct s3_client *client, struct s3_counters *out)
{
	pthread_mutex_lock((pthread_mutex_t *)&client->lock);
	*out = client->counters;
	pthread_mutex_unlock((pthread_mutex_t *)&client->lock);
}

/* ---- one request ------------------------------------------------------------------------ */

static uint64_t *counter_of(struct s3_counters *counters, enum request_kind kind)
{
	return kind == REQUEST_GET ? &counters->gets
	       : kind == REQUEST_PUT || kind == REQUEST_POST ? &counters->puts
	       : kind == REQUEST_HEAD ? &counters->heads
	       : kind == REQUEST_DELETE ? &counters->deletes
					: &counters->lists;
}

struct upload {
	const uint8_t *bytes;          /* the body, or NULL: read from descriptor from base on */
	int descriptor;
	uint64_t base, size, at;
};

static size_t read_body(char *buffer, size_t size, size_t count, void *context)
{
	struct upload *upload = context;
	uint64_t room = size * count, left = upload->size - upload->at;
	size_t taken = (size_t)(left < room ? left : room);
	if (upload->bytes) {
		memcpy(buffer, upload->bytes + upload->at, taken);
	} else {
		ssize_t got;
		do
			got = pread(upload->descriptor, buffer, taken, (off_t)(upload->base + upload->at));
		while (got < 0 && errno == EINTR);
		if (got <= 0)
			return CURL_READFUNC_ABORT;   /* the request fails: -ECOMM, said with curl's words */
		taken = (size_t)got;
	}
	upload->at += taken;
	return taken;
}

/* What send_request notes of an answer's headers. */
struct answer_headers {
	uint64_t object_size;          /* from "Content-Range: bytes FIRST-LAST/SIZE" (UINT64_MAX: none) */
	char etag[128];                /* "ETag: …" as sent, quotes included ("": none) */
};

static size_t read_header(char *data, size_t size, size_t count, void *context)
{
	static const char range[] = "content-range:", etag[] = "etag:";
	struct answer_headers *answer = context;
	size_t length = size * count;
	char line[160];
	if (length >= sizeof line)
		return length;
	memcpy(line, data, length);
	line[length] = 0;
	if (strncasecmp(line, range, sizeof range - 1) == 0) {
		const char *slash = strchr(line, '/');
		if (slash && isdigit((unsigned char)slash[1]))
			answer->object_size = strtoull(slash + 1, NULL, 10);
	} else if (strncasecmp(line, etag, sizeof etag - 1) == 0) {
		const char *value = line + sizeof etag - 1;
		while (*value == ' ')
			value++;
		size_t value_length = strcspn(value, "\r\n");
		if (value_length < sizeof answer->etag) {
			memcpy(answer->etag, value, value_length);
			answer->etag[value_length] = 0;
		}
	}
	return length;
}

static size_t write_body(char *data, size_t size, size_t count, void *context)
{
	return buf_append(context, data, size * count) == 0 ? size * count : 0;
}

/* What an unsuccessful status means, with the server's error code in the message. */
static int status_error(long status, const struct buf *body, const char *what, struct error_info *error)
{
	char code[64];
	s3_answer_error_code(body->data, body->size, code, sizeof code);
	int rc = status == 404 ? -ENOENT
		 : status == 412 ? -EEXIST
		 : status == 401 || status == 403 ? -EACCES
		 : status == 416 ? -ERANGE
		 : status >= 500 ? -EREMOTEIO
				 : -EIO;
	return error_info_set(error, rc, "%s: the object store answered %ld%s%s", what, status, code[0] ? " " : "",
			      code);
}

/*
 * Sends one request to url (retrying per invariant 1) with the body source
 * names (PUT, POST; NULL: none), the response body appended to response (may
 * be NULL: discarded). 0 with *status, or -EIO (no answer) with error.
 * *length_out (if set) is the answer's Content-Length, *answer (if set) what
 * its headers say.
 */
static int send_request(struct s3_client *client, enum request_kind kind, const char *url,
			const struct curl_slist *extra, const struct upload *source, bool repeatable,
			struct buf *response, long *status, uint64_t *length_out, struct answer_headers *answer,
			const char *what, struct error_info *error)
{
	struct curl_slist *headers = NULL;
	for (const struct curl_slist *at = extra; at; at = at->next)
		headers = s3_curl.slist_append(headers, at->data);
	headers = s3_curl.slist_append(headers, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
	if (!headers)
		return error_info_set(error, -ENOMEM, "out of memory");
	struct buf ignored;
	buf_init(&ignored);
	struct buf *body = response ? response : &ignored;
	size_t body_start = body->size;
	int rc = -EIO;
	CURL *curl = client->curl;
	bool suspect = monotonic_us() < atomic_load(&out_of_reach_until_us);
	int attempts = suspect ? 1 : S3_ATTEMPTS;
	for (int attempt = 0; attempt < attempts; attempt++) {
		if ((rc = io_failpoint("object_store.before_request")) < 0) {
			error_info_set(error, rc, "%s: failpoint object_store.before_request", what);
			break;
		}
		body->size = body_start;
		struct upload upload = source ? *source : (struct upload){ NULL, -1, 0, 0, 0 };
		upload.at = 0;
		s3_curl.easy_reset(curl);
		s3_curl.easy_setopt(curl, CURLOPT_URL, url);
		s3_curl.easy_setopt(curl, CURLOPT_AWS_SIGV4, client->signature);
		s3_curl.easy_setopt(curl, CURLOPT_USERPWD, client->credentials);
		s3_curl.easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
		s3_curl.easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
		s3_curl.easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, suspect ? S3_OUT_OF_REACH_CONNECT_S : 10L);
		s3_curl.easy_setopt(curl, CURLOPT_TIMEOUT, 300L);
		s3_curl.easy_setopt(curl, CURLOPT_WRITEFUNCTION, write_body);
		s3_curl.easy_setopt(curl, CURLOPT_WRITEDATA, body);
		if (answer) {
			answer->object_size = UINT64_MAX;
			answer->etag[0] = 0;
			s3_curl.easy_setopt(curl, CURLOPT_HEADERFUNCTION, read_header);
			s3_curl.easy_setopt(curl, CURLOPT_HEADERDATA, answer);
		}
		if (kind == REQUEST_PUT || kind == REQUEST_POST) {
			bool post = kind == REQUEST_POST;
			s3_curl.easy_setopt(curl, post ? CURLOPT_POST : CURLOPT_UPLOAD, 1L);
			s3_curl.easy_setopt(curl, CURLOPT_READFUNCTION, read_body);
			s3_curl.easy_setopt(curl, CURLOPT_READDATA, &upload);
			s3_curl.easy_setopt(curl, post ? CURLOPT_POSTFIELDSIZE_LARGE : CURLOPT_INFILESIZE_LARGE,
					 (curl_off_t)upload.size);
			/* "Expect: 100-continue" stays (removing a header libcurl signed breaks the
			 * signature), but the body follows at once: no round trip */
			s3_curl.easy_setopt(curl, CURLOPT_EXPECT_100_TIMEOUT_MS, 0L);
		} else if (kind == REQUEST_HEAD) {
			s3_curl.easy_setopt(curl, CURLOPT_NOBODY, 1L);
		} else if (kind == REQUEST_DELETE) {
			s3_curl.easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "DELETE");
		}
		(*counter_of(&client->counters, kind))++;
		CURLcode result = s3_curl.easy_perform(curl);
		uint64_t sent = result == CURLE_OK ? upload.at : 0, received = result == CURLE_OK ? body->size - body_start : 0;
		client->counters.bytes_sent += sent;
		client->counters.bytes_received += received;
		pthread_mutex_lock(&process_lock);
		(*counter_of(&process_counters, kind))++;
		process_counters.bytes_sent += sent;
		process_counters.bytes_received += received;
		pthread_mutex_unlock(&process_lock);
		if (result == CURLE_OK) {
			s3_curl.easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
			if (length_out) {
				curl_off_t length = -1;
				s3_curl.easy_getinfo(curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
				*length_out = length < 0 ? 0 : (uint64_t)length;
			}
			atomic_store(&out_of_reach_until_us, 0);   /* an answer: the endpoint is there */
			if ((*status == 500 || *status == 503) && repeatable && attempt + 1 < attempts) {
				nanosleep(&(struct timespec){ 0, 50000000L << attempt }, NULL);
				continue;
			}
			rc = 0;
			break;
		}
		/* not -EIO: the layers above read -EIO as damage, and a store out of reach is not damaged */
		int code = result == CURLE_COULDNT_CONNECT ? -ECONNREFUSED
			   : result == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT
			   : result == CURLE_COULDNT_RESOLVE_HOST ? -EHOSTUNREACH
								  : -ECOMM;
		rc = error_info_set(error, code, "%s: %s (%s)%s", what, s3_curl.easy_strerror(result),
				    client->location.endpoint,
				    repeatable ? "" : "; the outcome is unknown: the object may or may not exist");
		if (code != -ECOMM)
			atomic_store(&out_of_reach_until_us, monotonic_us() + S3_OUT_OF_REACH_US);
		if (!repeatable || attempt + 1 == attempts)
			break;
		nanosleep(&(struct timespec){ 0, 50000000L << attempt }, NULL);
	}
	s3_curl.slist_free_all(headers);
	buf_free(&ignored);
	return rc;
}

/* ENDPOINT/BUCKET/PREFIXKEY into out. 0 or -EINVAL (a bad key). */
static int object_url(const struct s3_client *client, const char *key, char *out, size_t size,
		      struct error_info *error)
{
	if (!key_is_valid(key))
		return error_info_set(error, -EINVAL, "object key \"%.80s\" is not 1..%d of [A-Za-z0-9._/-]", key,
				      S3_KEY_MAX);
	const struct s3_location *location = &client->location;
	int length = snprintf(out, size, "%s/%s/%s%s", location->endpoint, location->bucket, location->prefix, key);
	if (length < 0 || (size_t)length >= size)
		return error_info_set(error, -EINVAL, "object key \"%.80s\" makes too long a URL", key);
	return 0;
}

#define URL_MAX (256 + 64 + 256 + S3_KEY_MAX + 512)

/* ---- multipart uploads (s3_put_descriptor beyond the part size) -------------------------- */

/* One request of an upload under the client's lock: 0 with status and response, or an error. */
static int upload_request(struct s3_client *client, enum request_kind kind, const char *url,
			  const struct curl_slist *extra, const struct upload *source, bool repeatable,
			  struct buf *response, struct answer_headers *answer, const char *what,
			  struct error_info *error)
{
	long status = 0;
	pthread_mutex_lock(&client->lock);
	int rc = send_request(client, kind, url, extra, source, repeatable, response, &status, NULL, answer, what,
			      error);
	pthread_mutex_unlock(&client->lock);
	/* a completion can fail after its 200 has begun: the body then is an <Error> */
	if (rc == 0 && (status != 200 || (response && memmem(response->data, response->size, "<Error>", 7))))
		rc = status_error(status == 200 ? 500 : status, response, what, error);
	return rc;
}

/*
 * The bytes [0, size) of descriptor as key, in parts of the location's part
 * size: start (POST ?uploads), each part (PUT ?partNumber&uploadId, tried
 * again like a read), complete (POST ?uploadId with the parts' ETags); any
 * failure aborts the upload (DELETE ?uploadId), so the key is never half
 * made. 0 or an error (-EEXIST: the key exists, with S3_IF_ABSENT).
 */
static int multipart_put(struct s3_client *client, const char *key, int descriptor, uint64_t size,
			 enum s3_condition condition, struct error_info *error)
{
	uint64_t part_size = client->location.part_size;
	uint64_t parts = (size + part_size - 1) / part_size;
	if (parts > S3_PARTS_MAX)
		return error_info_set(error, -EFBIG, "PUT %s: %llu bytes need more than %d parts of %llu bytes: "
				      "set GRAPHFS_S3_PART_BYTES larger", key, (unsigned long long)size, S3_PARTS_MAX,
				      (unsigned long long)part_size);
	/* part_url: room for the url, the query and the upload id, whatever their lengths */
	char url[URL_MAX], part_url[URL_MAX + 320], what[S3_KEY_MAX + 48], upload_id[256] = "";
	int rc = object_url(client, key, url, sizeof url, error);
	if (rc)
		return rc;
	if (condition == S3_IF_ABSENT) {
		rc = s3_head(client, key, NULL, error);
		if (rc == 0)
			return error_info_set(error, -EEXIST, "PUT %s: the object exists", key);
		if (rc != -ENOENT)
			return rc;
	}
	struct buf response, etags;
	buf_init(&response);
	buf_init(&etags);   /* "<Part>…</Part>" for each part done */
	snprintf(what, sizeof what, "POST %s?uploads", key);
	snprintf(part_url, sizeof part_url, "%s?uploads=", url);
	if ((rc = upload_request(client, REQUEST_POST, part_url, NULL, NULL, false, &response, NULL, what, error)) < 0)
		goto out;
	static const char id_characters[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~-";
	if (!s3_answer_text((const char *)response.data, (const char *)response.data + response.size, "UploadId",
			    upload_id, sizeof upload_id) ||
	    !upload_id[0] || strspn(upload_id, id_characters) != strlen(upload_id)) {   /* it goes into URLs as is */
		rc = error_info_set(error, -EREMOTEIO, "%s: no usable UploadId in the answer", what);
		upload_id[0] = 0;
		goto out;
	}
	for (uint64_t part = 0; part < parts; part++) {
		uint64_t offset = part * part_size, length = size - offset < part_size ? size - offset : part_size;
		snprintf(part_url, sizeof part_url, "%s?partNumber=%llu&uploadId=%s", url, (unsigned long long)part + 1,
			 upload_id);
		snprintf(what, sizeof what, "PUT %s part %llu", key, (unsigned long long)part + 1);
		struct upload source = { NULL, descriptor, offset, length, 0 };
		struct answer_headers answer;
		buf_reset(&response);
		if ((rc = io_failpoint("object_store.before_part")) < 0) {
			error_info_set(error, rc, "%s: failpoint object_store.before_part", what);
			goto out;
		}
		if ((rc = upload_request(client, REQUEST_PUT, part_url, NULL, &source, true, &response, &answer, what,
					 error)) < 0)
			goto out;
		if (!answer.etag[0] || strchr(answer.etag, '<')) {
			rc = error_info_set(error, -EREMOTEIO, "%s: the answer named no ETag", what);
			goto out;
		}
		char line[256];
		int written = snprintf(line, sizeof line, "<Part><PartNumber>%llu</PartNumber><ETag>%s</ETag></Part>",
				       (unsigned long long)part + 1, answer.etag);
		if ((rc = buf_append(&etags, line, (size_t)written)) < 0)
			goto out;
	}
	struct buf complete;
	buf_init(&complete);
	rc = buf_append(&complete, "<CompleteMultipartUpload>", 25);
	if (rc == 0)
		rc = buf_append(&complete, etags.data, etags.size);
	if (rc == 0)
		rc = buf_append(&complete, "</CompleteMultipartUpload>", 26);
	if (rc == 0) {
		struct curl_slist conditional = { (char *)"If-None-Match: *", NULL };
		struct upload source = { complete.data, -1, 0, complete.size, 0 };
		snprintf(part_url, sizeof part_url, "%s?uploadId=%s", url, upload_id);
		snprintf(what, sizeof what, "POST %s (completing the upload)", key);
		buf_reset(&response);
		rc = upload_request(client, REQUEST_POST, part_url, condition == S3_IF_ABSENT ? &conditional : NULL,
				    &source, false, &response, NULL, what, error);
		if (rc == 0)
			upload_id[0] = 0;   /* complete: nothing to abort */
	}
	buf_free(&complete);
	if (rc == 0 && (rc = io_failpoint("object_store.after_put")) < 0)
		error_info_set(error, rc, "PUT %s: failpoint object_store.after_put (the object is stored)", key);
out:
	if (upload_id[0]) {
		/* best effort: an upload left behind holds its parts' space until the bucket's
		 * lifecycle rules (if any) remove it; the key itself never appears */
		struct error_info ignored;
		snprintf(part_url, sizeof part_url, "%s?uploadId=%s", url, upload_id);
		snprintf(what, sizeof what, "DELETE %s (aborting the upload)", key);
		long status = 0;
		pthread_mutex_lock(&client->lock);
		send_request(client, REQUEST_DELETE, part_url, NULL, NULL, true, NULL, &status, NULL, NULL, what, &ignored);
		pthread_mutex_unlock(&client->lock);
	}
	buf_free(&response);
	buf_free(&etags);
	return rc;
}

/* s3_put of bytes, or (bytes NULL) of [0, size) of descriptor. */
static int put(struct s3_client *client, const char *key, const void *bytes, int descriptor, uint64_t size,
	       enum s3_condition condition, struct error_info *error)
{
	char url[URL_MAX], what[S3_KEY_MAX + 16];
	int rc = object_url(client, key, url, sizeof url, error);
	if (rc)
		return rc;
	snprintf(what, sizeof what, "PUT %s", key);
	struct curl_slist conditional = { (char *)"If-None-Match: *", NULL };
	struct buf response;
	buf_init(&response);
	long status = 0;
	pthread_mutex_lock(&client->lock);
	struct upload source = { bytes, descriptor, 0, size, 0 };
	rc = send_request(client, REQUEST_PUT, url, condition == S3_IF_ABSENT ? &conditional : NULL, &source,
			  condition == S3_ALWAYS, &response, &status, NULL, NULL, what, error);
	pthread_mutex_unlock(&client->lock);
	if (rc == 0 && status != 200)
		rc = status_error(status, &response, what, error);
	if (rc == 0 && (rc = io_failpoint("object_store.after_put")) < 0)
		error_info_set(error, rc, "%s: failpoint object_store.after_put (the object is stored)", what);
	buf_free(&response);
	return rc;
}

int s3_put(struct s3_client *client, const char *key, const void *bytes, size_t size,
	   enum s3_condition condition, struct error_info *error)
{
	return put(client, key, bytes, -1, size, condition, error);
}

int s3_put_descriptor(struct s3_client *client, const char *key, int descriptor, uint64_t size,
		      enum s3_condition condition, struct error_info *error)
{
	if (size > client->location.part_size)
		return multipart_put(client, key, descriptor, size, condition, error);
	return put(client, key, NULL, descriptor, size, condition, error);
}

int s3_get_sized(struct s3_client *client, const char *key, uint64_t offset, uint64_t size, struct buf *out,
		 uint64_t *object_size_out, struct error_info *error)
{
	char url[URL_MAX], what[S3_KEY_MAX + 16], range[80];
	int rc = object_url(client, key, url, sizeof url, error);
	if (rc)
		return rc;
	snprintf(what, sizeof what, "GET %s", key);
	if (size)
		snprintf(range, sizeof range, "Range: bytes=%" PRIu64 "-%" PRIu64, offset, offset + size - 1);
	else
		snprintf(range, sizeof range, "Range: bytes=%" PRIu64 "-", offset);
	struct curl_slist ranged = { range, NULL };
	size_t start = out->size;
	long status = 0;
	struct answer_headers answer;
	pthread_mutex_lock(&client->lock);
	rc = send_request(client, REQUEST_GET, url, offset || size ? &ranged : NULL, NULL, true, out, &status, NULL,
			  &answer, what, error);
	uint64_t object_size = answer.object_size;
	pthread_mutex_unlock(&client->lock);
	if (rc == 0 && status != 200 && status != 206) {
		struct buf body = { out->data + start, out->size - start, out->size - start };
		rc = status_error(status, &body, what, error);
	}
	if (rc)
		out->size = start;
	else if (object_size_out)
		/* a whole object (200) is its own size; a part (206) names it in Content-Range */
		*object_size_out = status == 200 ? out->size - start : object_size;
	if (rc == 0 && object_size_out && *object_size_out == UINT64_MAX)
		rc = error_info_set(error, -EIO, "%s: the object store answered a part without its size", what);
	return rc;
}

int s3_get(struct s3_client *client, const char *key, uint64_t offset, uint64_t size, struct buf *out,
	   struct error_info *error)
{
	return s3_get_sized(client, key, offset, size, out, NULL, error);
}

int s3_head(struct s3_client *client, const char *key, uint64_t *size_out, struct error_info *error)
{
	char url[URL_MAX], what[S3_KEY_MAX + 16];
	int rc = object_url(client, key, url, sizeof url, error);
	if (rc)
		return rc;
	snprintf(what, sizeof what, "HEAD %s", key);
	long status = 0;
	uint64_t length = 0;
	struct buf none;
	buf_init(&none);
	pthread_mutex_lock(&client->lock);
	rc = send_request(client, REQUEST_HEAD, url, NULL, NULL, true, NULL, &status, &length, NULL, what, error);
	pthread_mutex_unlock(&client->lock);
	if (rc == 0 && status != 200)
		rc = status_error(status, &none, what, error);   /* a HEAD answer has no body */
	if (rc == 0 && size_out)
		*size_out = length;
	return rc;
}

int s3_delete(struct s3_client *client, const char *key, struct error_info *error)
{
	char url[URL_MAX], what[S3_KEY_MAX + 16];
	int rc = object_url(client, key, url, sizeof url, error);
	if (rc)
		return rc;
	snprintf(what, sizeof what, "DELETE %s", key);
	struct buf response;
	buf_init(&response);
	long status = 0;
	pthread_mutex_lock(&client->lock);
	rc = send_request(client, REQUEST_DELETE, url, NULL, NULL, true, &response, &status, NULL, NULL, what, error);
	pthread_mutex_unlock(&client->lock);
	if (rc == 0 && status != 204 && status != 200 && status != 404)
		rc = status_error(status, &response, what, error);
	buf_free(&response);
	return rc;
}

/* Appends "&name=escaped value" (or "?name=…" first) to the query. */
static int query_add(CURL *curl, char *query, size_t size, const char *name, const char *value)
{
	char *escaped = s3_curl.easy_escape(curl, value, 0);
	if (!escaped)
		return -ENOMEM;
	size_t used = strlen(query);
	int length = snprintf(query + used, size - used, "%s%s=%s", used ? "&" : "?", name, escaped);
	s3_curl.free(escaped);
	return length < 0 || (size_t)length >= size - used ? -EINVAL : 0;
}

unsigned s3_list_page_keys(const struct s3_client *client)
{
	return client->location.list_page ? client->location.list_page : 1000;
}

int s3_list(struct s3_client *client, const char *prefix, const char *start_after,
	    int (*visit)(const char *key, uint64_t size, void *context), void *context,
	    struct error_info *error)
{
	const struct s3_location *location = &client->location;
	char full_prefix[sizeof location->prefix + S3_KEY_MAX], full_after[sizeof full_prefix];
	char token[S3_ANSWER_TOKEN_MAX] = "", number[24];
	snprintf(full_prefix, sizeof full_prefix, "%s%s", location->prefix, prefix ? prefix : "");
	if (start_after)
		snprintf(full_after, sizeof full_after, "%s%s", location->prefix, start_after);
	struct buf response;
	buf_init(&response);
	int rc = 0;
	for (bool more = true; more && rc == 0;) {
		/* query parameters in name order: libcurl signs the query exactly as written */
		char query[2048] = "", url[URL_MAX + 2048];
		pthread_mutex_lock(&client->lock);
		if (token[0])
			rc = query_add(client->curl, query, sizeof query, "continuation-token", token);
		if (rc == 0)
			rc = query_add(client->curl, query, sizeof query, "list-type", "2");
		if (rc == 0 && location->list_page) {
			snprintf(number, sizeof number, "%u", location->list_page);
			rc = query_add(client->curl, query, sizeof query, "max-keys", number);
		}
		if (rc == 0)
			rc = query_add(client->curl, query, sizeof query, "prefix", full_prefix);
		if (rc == 0 && start_after && !token[0])
			rc = query_add(client->curl, query, sizeof query, "start-after", full_after);
		long status = 0;
		buf_reset(&response);
		if (rc == 0) {
			snprintf(url, sizeof url, "%s/%s%s", location->endpoint, location->bucket, query);
			rc = send_request(client, REQUEST_LIST, url, NULL, NULL, true, &response, &status, NULL,
					  NULL, "LIST", error);
		} else {
			rc = error_info_set(error, rc, "LIST: the query is too long");
		}
		pthread_mutex_unlock(&client->lock);
		if (rc == 0 && status != 200)
			rc = status_error(status, &response, "LIST", error);
		if (rc)
			break;
		struct s3_listing_page page;
		rc = s3_answer_listing((const char *)response.data, response.size, location->prefix, &page, visit,
				       context, error);
		more = page.truncated;
		memcpy(token, page.token, sizeof token);
	}
	buf_free(&response);
	return rc < 0 ? rc : 0;
}
