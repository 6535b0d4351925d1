/*
 * s3_curl — libcurl, loaded with dlopen the first time an s3:// store is
 * opened instead of linked into every program.
 *
 * Why: libcurl brings about thirty shared libraries (TLS, Kerberos, LDAP,
 * HTTP/2, ...). Loading and relocating them cost every process that links
 * libgraphfs about 12 ms at start (docs/PERFORMANCE.md "Start-up"), also
 * `graphfs log` on a local store and every short-lived writer, though only
 * s3:// stores use HTTP. Built against <curl/curl.h> as before (the headers
 * of libcurl4-openssl-dev); at run time the library of any libcurl 4 build
 * serves.
 *
 * States (process-wide, under pthread_once): UNLOADED -> LOADED (every
 * function resolved, curl_global_init done) or FAILED (the reason kept in
 * load_error and returned to every caller). Nothing is ever unloaded.
 */
#include "s3_curl_int.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

/* tried in order: the soname of Debian's libcurl4 (OpenSSL), of libcurl3-gnutls, then any */
static const char *const library_names[] = { "libcurl.so.4", "libcurl-gnutls.so.4", "libcurl.so" };

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
struct s3_curl s3_curl;
static int load_status = -ENOTSUP;
static char load_error[512];

/* Resolves name into *slot. 0, or -ENOTSUP with load_error set. */
static int resolve(void *library, const char *name, void **slot)
{
	dlerror();
	*slot = dlsym(library, name);
	if (*slot)
		return 0;
	const char *reason = dlerror();
	snprintf(load_error, sizeof load_error, "the loaded libcurl has no %s (%s): install libcurl 7.75 or later",
		 name, reason ? reason : "not found");
	return -ENOTSUP;
}

static void load(void)
{
	void *library = NULL;
	char reason[256] = "not found";   /* the first name's failure (dlerror's text is overwritten by the next) */
	for (size_t i = 0; i < sizeof library_names / sizeof *library_names && !library; i++) {
		library = dlopen(library_names[i], RTLD_NOW | RTLD_LOCAL);
		const char *failure = library ? NULL : dlerror();
		if (i == 0 && failure)
			snprintf(reason, sizeof reason, "%s", failure);
	}
	if (!library) {
		snprintf(load_error, sizeof load_error,
			 "s3:// stores need libcurl, which cannot be loaded (%s): install the libcurl4 package", reason);
		return;
	}
	struct {
		const char *name;
		void **slot;
	} table[] = {
		{ "curl_easy_init", (void **)&s3_curl.easy_init },
		{ "curl_easy_cleanup", (void **)&s3_curl.easy_cleanup },
		{ "curl_easy_reset", (void **)&s3_curl.easy_reset },
		{ "curl_easy_setopt", (void **)&s3_curl.easy_setopt },
		{ "curl_easy_perform", (void **)&s3_curl.easy_perform },
		{ "curl_easy_getinfo", (void **)&s3_curl.easy_getinfo },
		{ "curl_easy_strerror", (void **)&s3_curl.easy_strerror },
		{ "curl_easy_escape", (void **)&s3_curl.easy_escape },
		{ "curl_free", (void **)&s3_curl.free },
		{ "curl_slist_append", (void **)&s3_curl.slist_append },
		{ "curl_slist_free_all", (void **)&s3_curl.slist_free_all },
	};
	for (size_t i = 0; i < sizeof table / sizeof *table; i++)
		if (resolve(library, table[i].name, table[i].slot) < 0)
			return;
	CURLcode (*global_init)(long flags);
	if (resolve(library, "curl_global_init", (void **)&global_init) < 0)
		return;
	CURLcode started = global_init(CURL_GLOBAL_DEFAULT);
	if (started != CURLE_OK) {
		snprintf(load_error, sizeof load_error, "cannot start libcurl: %s", s3_curl.easy_strerror(started));
		return;
	}
	load_status = 0;
}

int s3_curl_load(struct error_info *error)
{
	pthread_once(&load_once, load);
	if (load_status < 0)
		return error_info_set(error, load_status, "%s", load_error);
	return 0;
}
