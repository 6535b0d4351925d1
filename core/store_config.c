/*
 * store_config — the store's settings (`graphfs config`, docs/FORMAT.md §1
 * `config`) and the upkeep they ask for: the retention policy that gc applies
 * by itself (docs/ARCHITECTURE.md "The store keeps itself").
 *
 * Invariants:
 *   1. Only known keys are stored, each with a value its rule accepts; a
 *      settings file that breaks this (edited by hand) is reported, never
 *      half-applied: the policy is then "none".
 *   2. Upkeep never blocks a writer for more than one commit's time: it runs
 *      after a command's commits (store_close) or on a mount's own thread,
 *      and the gc it runs lets commits and readers go on (manifest_gc.c).
 *   3. gc runs by itself only when a policy is set, at least
 *      retention.auto-gc-versions versions are reclaimable under it, and the
 *      manifest grew by half of what the last gc kept (grown_enough); a gc
 *      already running elsewhere (-EBUSY) is not waited for.
 */
#include "store_int.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum setting_kind { SETTING_COUNT, SETTING_DURATION };

static const struct setting {
	const char *key;
	enum setting_kind kind;
	const char *what;
} settings[] = {
	{ "retention.keep-versions", SETTING_COUNT, "gc by itself keeps the newest N versions of the store" },
	{ "retention.keep-since", SETTING_DURATION, "gc by itself keeps every version committed within D (12h, 7d, 2w)" },
	{ "retention.auto-gc-versions", SETTING_COUNT,
	  "gc runs by itself once this many versions are reclaimable under the policy and the store grew by half "
	  "what the last gc kept (default 8; 0: never)" },
};
#define SETTING_COUNT_ALL (sizeof settings / sizeof settings[0])
#define AUTO_GC_VERSIONS_DEFAULT 8
#define AUTO_GC_GROWTH_MIN (16u << 10)   /* manifest bytes since the last gc before the next */
#define POLICY_REREAD_US (10u * 1000000u)  /* how stale the policy store_keep_itself applies may be */

int store_duration_parse(const char *text, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long amount = strtoull(text, &end, 10);
	uint64_t unit = 0;
	if (end != text && text[0] != '-' && end[0] && !end[1]) {
		switch (end[0]) {
		case 's': unit = 1000000ull; break;
		case 'm': unit = 60ull * 1000000ull; break;
		case 'h': unit = 3600ull * 1000000ull; break;
		case 'd': unit = 86400ull * 1000000ull; break;
		case 'w': unit = 7ull * 86400ull * 1000000ull; break;
		default: break;
		}
	}
	if (errno != 0 || unit == 0 || amount == 0 || amount > UINT64_MAX / unit)
		return -EINVAL;
	*out = amount * unit;
	return 0;
}

static const struct setting *setting_find(const char *key)
{
	for (size_t i = 0; i < SETTING_COUNT_ALL; i++)
		if (strcmp(settings[i].key, key) == 0)
			return &settings[i];
	return NULL;
}

/* The value text means for setting, as JSON (a count: a number; a duration: its text). NULL: refused. */
static json_t *setting_value(const struct setting *setting, const char *text)
{
	if (setting->kind == SETTING_DURATION) {
		uint64_t us;
		return store_duration_parse(text, &us) == 0 ? json_string(text) : NULL;
	}
	char *end;
	errno = 0;
	unsigned long long count = strtoull(text, &end, 10);
	if (errno != 0 || end == text || *end || text[0] == '-' || count > (1ull << 40))
		return NULL;
	bool zero_allowed = strcmp(setting->key, "retention.auto-gc-versions") == 0;
	return count == 0 && !zero_allowed ? NULL : json_integer((json_int_t)count);
}

/* The stored settings as a JSON object (empty when never set). 0, -EIO (not an object of
 * known keys with valid values: invariant 1), -errno; error set. */
static int settings_load(struct store *store, json_t **out, struct error_info *error)
{
	struct buf bytes;
	buf_init(&bytes);
	*out = NULL;
	int rc = manifest_config_read(store->manifest, &bytes);
	if (rc < 0) {
		buf_free(&bytes);
		return error_info_set(error, rc, "cannot read the settings of %s: %s", store->path, io_strerror(rc));
	}
	json_t *object = bytes.size ? json_loadb((const char *)bytes.data, bytes.size, 0, NULL) : json_object();
	buf_free(&bytes);
	const char *key;
	json_t *value;
	bool valid = json_is_object(object);
	if (valid) {
		json_object_foreach(object, key, value) {
			const struct setting *setting = setting_find(key);
			json_t *check = NULL;
			if (setting && json_is_integer(value) && setting->kind == SETTING_COUNT) {
				char text[32];
				snprintf(text, sizeof text, "%lld", (long long)json_integer_value(value));
				check = setting_value(setting, text);
			} else if (setting && json_is_string(value) && setting->kind == SETTING_DURATION) {
				check = setting_value(setting, json_string_value(value));
			}
			valid = valid && check;
			json_decref(check);
		}
	}
	if (!valid) {
		json_decref(object);
		return error_info_set(error, -EIO, "the settings file %s/config is damaged (not a JSON object of known "
				      "settings): set them again with graphfs config, or remove it", store->path);
	}
	*out = object;
	return 0;
}

int store_config_json(struct store *store, const char *key, struct buf *out, struct error_info *error)
{
	const struct setting *wanted = NULL;
	if (key && !(wanted = setting_find(key)))
		return error_info_set(error, -ENOENT, "no setting named %s (graphfs config --help lists them)", key);
	json_t *stored;
	int rc = settings_load(store, &stored, error);
	if (rc < 0)
		return rc;
	json_t *shown = NULL;
	if (wanted) {
		shown = json_incref(json_object_get(stored, key));
		if (!shown && strcmp(key, "retention.auto-gc-versions") == 0)
			shown = json_integer(AUTO_GC_VERSIONS_DEFAULT);
		if (!shown)
			shown = json_null();
	} else {
		/* every setting, in the documented order: null where none is set */
		shown = json_object();
		for (size_t i = 0; i < SETTING_COUNT_ALL; i++) {
			json_t *value = json_object_get(stored, settings[i].key);
			if (!value && strcmp(settings[i].key, "retention.auto-gc-versions") == 0)
				json_object_set_new(shown, settings[i].key, json_integer(AUTO_GC_VERSIONS_DEFAULT));
			else
				json_object_set(shown, settings[i].key, value ? value : json_null());
		}
	}
	char *text = json_dumps(shown, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
	rc = text ? buf_append_string(out, text) : -ENOMEM;
	if (rc == 0)
		rc = buf_put_u8(out, '\n');
	free(text);
	json_decref(shown);
	json_decref(stored);
	return rc;
}

int store_config_set(struct store *store, const char *key, const char *value, struct error_info *error)
{
	if (store->read_only)
		return error_info_set(error, -EROFS, "the store is open read-only");
	const struct setting *setting = setting_find(key);
	if (!setting)
		return error_info_set(error, -ENOENT, "no setting named %s (graphfs config --help lists them)", key);
	json_t *parsed = value ? setting_value(setting, value) : NULL;
	if (value && !parsed)
		return error_info_set(error, -EINVAL, "%s %s: %s", key, value,
				      setting->kind == SETTING_DURATION
					      ? "not a duration (a number with s, m, h, d or w: 12h, 7d)"
					      : strcmp(key, "retention.auto-gc-versions") == 0
							? "not a count of versions (0 or more)"
							: "not a count of versions (1 or more)");
	json_t *stored;
	int rc = settings_load(store, &stored, error);
	if (rc == -EIO) {
		stored = json_object();   /* a damaged file is replaced by what is set now */
		error_info_clear(error);
		rc = 0;
	}
	if (rc < 0) {
		json_decref(parsed);
		return rc;
	}
	if (parsed)
		json_object_set_new(stored, key, parsed);
	else
		json_object_del(stored, key);
	char *text = json_dumps(stored, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(stored);
	struct buf line;
	buf_init(&line);
	if (!text || buf_append_string(&line, text) < 0 || buf_put_u8(&line, '\n') < 0) {
		free(text);
		buf_free(&line);
		return error_info_set(error, -ENOMEM, "out of memory");
	}
	free(text);
	rc = manifest_config_write(store->manifest, line.data, line.size, error);
	buf_free(&line);
	store->policy_read_us = 0;   /* this handle applies the new settings at once */
	return rc;
}

int store_retention_policy(struct store *store, struct store_retention_policy *out, struct error_info *error)
{
	memset(out, 0, sizeof *out);
	out->auto_gc_versions = AUTO_GC_VERSIONS_DEFAULT;
	json_t *stored;
	int rc = settings_load(store, &stored, error);
	if (rc < 0)
		return rc;
	json_t *value;
	if ((value = json_object_get(stored, "retention.keep-versions")))
		out->keep_versions = (uint64_t)json_integer_value(value);
	if ((value = json_object_get(stored, "retention.keep-since")))
		(void)store_duration_parse(json_string_value(value), &out->keep_since_us);
	if ((value = json_object_get(stored, "retention.auto-gc-versions")))
		out->auto_gc_versions = (uint64_t)json_integer_value(value);
	json_decref(stored);
	return 0;
}

/* How many versions gc would reclaim now under policy (manifest_gc.c's horizon, without
 * the merge-base and pin holds, which only lower it). */
static uint64_t reclaimable_versions(struct store *store, const struct store_retention_policy *policy)
{
	struct root_record latest;
	if (manifest_latest(store->manifest, &latest) < 0 || latest.version < 2)
		return 0;
	uint64_t target = latest.version - 1;   /* never the latest version */
	if (policy->keep_versions)
		target = latest.version > policy->keep_versions ? latest.version - policy->keep_versions : 0;
	if (policy->keep_since_us) {
		struct timespec clock;
		clock_gettime(CLOCK_REALTIME, &clock);
		uint64_t now = (uint64_t)clock.tv_sec * 1000000u + (uint64_t)clock.tv_nsec / 1000u, by_time = 0;
		uint64_t cutoff = now > policy->keep_since_us ? now - policy->keep_since_us : 0;
		if (!cutoff || manifest_version_at_time(store->manifest, cutoff - 1, &by_time) < 0)
			by_time = 0;
		if (by_time < target)
			target = by_time;
	}
	if (target >= latest.version)
		target = latest.version - 1;
	return target > latest.horizon ? target - latest.horizon : 0;
}

/*
 * Whether the manifest grew enough since the last gc for another to pay off: by half
 * of what that gc kept (its pack), and by AUTO_GC_GROWTH_MIN at least. So the space
 * stays within about 1.5 times what the policy keeps, and the work of all gcs is
 * O(1) per byte committed (each rewrites what it keeps once per that much growth).
 */
static bool grown_enough(struct store *store)
{
	struct root_record latest;
	if (manifest_latest(store->manifest, &latest) < 0)
		return false;
	uint64_t end = latest.self.offset;
	uint64_t since = latest.swept_below && end > latest.swept_below ? end - latest.swept_below : end;
	if (since < AUTO_GC_GROWTH_MIN)
		return false;
	if (latest.swept_below && latest.swept_below != store->pack_swept_below) {
		/* a gc ran since the pack was last looked at (a pack comes only with a gc root) */
		store->pack_bytes = 0;
		(void)pager_pack_refresh(store->pager);
		pager_pack_covered_below(store->pager, &store->pack_bytes);
		store->pack_swept_below = latest.swept_below;
	}
	return since >= store->pack_bytes / 2;
}

/* The policy, read again from the settings file at most every POLICY_REREAD_US: a
 * mount's upkeep runs after every commit, and the settings seldom change. */
static int policy_current(struct store *store, struct store_retention_policy *out, struct error_info *error)
{
	struct timespec clock;
	clock_gettime(CLOCK_MONOTONIC, &clock);
	uint64_t now = (uint64_t)clock.tv_sec * 1000000u + (uint64_t)clock.tv_nsec / 1000u;
	if (!store->policy_read_us || now - store->policy_read_us >= POLICY_REREAD_US) {
		int rc = store_retention_policy(store, &store->policy, error);
		if (rc < 0)
			return rc;
		store->policy_read_us = now;
	}
	*out = store->policy;
	return 0;
}

int store_keep_itself(struct store *store, struct store_upkeep *out, struct error_info *error)
{
	memset(out, 0, sizeof *out);
	if (store->read_only)
		return 0;
	struct store_retention_policy policy;
	int rc = policy_current(store, &policy, error);
	if (rc < 0)
		return rc;
	if ((!policy.keep_versions && !policy.keep_since_us) || policy.auto_gc_versions == 0)
		return 0;
	out->reclaimable = reclaimable_versions(store, &policy);
	if (out->reclaimable < policy.auto_gc_versions || !grown_enough(store))
		return 0;
	struct store_gc_options options = { .keep_versions = policy.keep_versions, .keep_since_us = policy.keep_since_us };
	rc = store_gc(store, &options, NULL, NULL, &out->gc, error);
	if (rc == -EBUSY) {
		error_info_clear(error);
		return 0;   /* another gc runs: it does the work (invariant 3) */
	}
	if (rc == 0)
		out->ran = true;
	return rc;
}
