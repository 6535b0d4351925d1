/*
 * s3_curl_int.h — libcurl, loaded the first time an s3:// store is opened
 * (internal to s3.c; see s3_curl.c for why it is loaded late).
 */
#ifndef GRAPHFS_S3_CURL_INT_H
#define GRAPHFS_S3_CURL_INT_H

#include <curl/curl.h>

#include "error_info.h"

/* The libcurl functions s3.c calls, resolved from the loaded library. */
struct s3_curl {
	CURL *(*easy_init)(void);
	void (*easy_cleanup)(CURL *handle);
	void (*easy_reset)(CURL *handle);
	CURLcode (*easy_setopt)(CURL *handle, CURLoption option, ...);
	CURLcode (*easy_perform)(CURL *handle);
	CURLcode (*easy_getinfo)(CURL *handle, CURLINFO info, ...);
	const char *(*easy_strerror)(CURLcode code);
	char *(*easy_escape)(CURL *handle, const char *text, int length);
	void (*free)(void *pointer);
	struct curl_slist *(*slist_append)(struct curl_slist *list, const char *text);
	void (*slist_free_all)(struct curl_slist *list);
};

/* Valid once s3_curl_load returned 0 (in this thread, or before whatever
 * handed this thread a client). */
extern struct s3_curl s3_curl;

/*
 * Loads libcurl once per process (thread-safe), resolves every function of
 * struct s3_curl and runs curl_global_init. Returns 0, or -ENOTSUP with
 * error saying which library or function was missing and what to install;
 * a failed load is remembered and reported again.
 */
int s3_curl_load(struct error_info *error);

#endif
