/*
 * io_diag — the ground of the io layer: exact I/O counters, the failpoint
 * registry, the log hook and this thread's last failure (io_diag.h). Every
 * file of the engine may call these; they call nothing of the engine, so
 * that the io backends (io.c, io_remote.c, io_pieced.c, io_cache.c, s3.c)
 * report without calling each other.
 *
 * Invariants:
 *   1. Counters only grow (until io_counters_reset) and are exact: one read
 *      per io_pread/io_pread_some call that returned data, one write per
 *      io_pwrite call, one fsync per io_fsync call (io.c calls io_count_read,
 *      io_count_write, io_count_fsync). Bytes read are counted by the codec
 *      layer per verified block (io_count_block), so counts do not depend on
 *      read sizes. Directory syncs are not counted.
 *   2. At most one failpoint is armed. The GRAPHFS_FAILPOINT environment
 *      variable is read once, before the first arm or hit, in any thread:
 *      NAME[=crash|=error][@N], @N firing at the Nth hit (default the first).
 *
 * Failpoint states: off -> armed(crash|error) -> (crash: process exits 86)
 *                                             -> (error: hit once, back to off).
 */
#include "io_diag.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

/* ---- counters ---------------------------------------------------------- */

struct atomic_counters {
	_Atomic uint64_t reads;
	_Atomic uint64_t bytes;
	_Atomic uint64_t pages;
	_Atomic uint64_t rows_decoded;
	_Atomic uint64_t writes;
	_Atomic uint64_t bytes_written;
	_Atomic uint64_t fsyncs;
};

static struct atomic_counters counters[IO_CLASS_COUNT];

static void count(_Atomic uint64_t *counter, uint64_t amount)
{
	atomic_fetch_add_explicit(counter, amount, memory_order_relaxed);
}

static uint64_t load(_Atomic uint64_t *counter)
{
	return atomic_load_explicit(counter, memory_order_relaxed);
}

static struct atomic_counters *counters_of(enum io_class class)
{
	return &counters[(unsigned)class < IO_CLASS_COUNT ? class : IO_DATA];
}

void io_counters_get(enum io_class class, struct io_counters *out)
{
	struct atomic_counters *source = counters_of(class);
	out->reads = load(&source->reads);
	out->bytes = load(&source->bytes);
	out->pages = load(&source->pages);
	out->rows_decoded = load(&source->rows_decoded);
	out->writes = load(&source->writes);
	out->bytes_written = load(&source->bytes_written);
	out->fsyncs = load(&source->fsyncs);
}

void io_counters_reset(void)
{
	for (int class = 0; class < IO_CLASS_COUNT; class++) {
		struct atomic_counters *target = &counters[class];
		atomic_store_explicit(&target->reads, 0, memory_order_relaxed);
		atomic_store_explicit(&target->bytes, 0, memory_order_relaxed);
		atomic_store_explicit(&target->pages, 0, memory_order_relaxed);
		atomic_store_explicit(&target->rows_decoded, 0, memory_order_relaxed);
		atomic_store_explicit(&target->writes, 0, memory_order_relaxed);
		atomic_store_explicit(&target->bytes_written, 0, memory_order_relaxed);
		atomic_store_explicit(&target->fsyncs, 0, memory_order_relaxed);
	}
}

void io_count_block(enum io_class class, uint64_t block_bytes)
{
	struct atomic_counters *target = counters_of(class);
	count(&target->pages, 1);
	count(&target->bytes, block_bytes);
}

void io_count_rows(enum io_class class, uint64_t rows)
{
	count(&counters_of(class)->rows_decoded, rows);
}

void io_count_read(enum io_class class)
{
	count(&counters_of(class)->reads, 1);
}

void io_count_write(enum io_class class, uint64_t bytes)
{
	struct atomic_counters *target = counters_of(class);
	count(&target->writes, 1);
	count(&target->bytes_written, bytes);
}

void io_count_fsync(enum io_class class)
{
	count(&counters_of(class)->fsyncs, 1);
}

/* ---- failpoints -------------------------------------------------------- */

static const char *const failpoint_names[] = {
#define FAILPOINT(name, description) name,
#include "io_failpoints.def"
#undef FAILPOINT
	NULL
};

#define FAILPOINT_COUNT ((int)(sizeof failpoint_names / sizeof failpoint_names[0]) - 1)

/* 0 when nothing is armed, else (index + 1) << 2 | action. */
static _Atomic int failpoint_armed;
/* hits of the armed point to let pass before it fires (GRAPHFS_FAILPOINT=...@N: N - 1) */
static _Atomic long failpoint_skip;
static pthread_once_t failpoint_environment_once = PTHREAD_ONCE_INIT;

const char *const *io_failpoint_names(void)
{
	return failpoint_names;
}

static int failpoint_index(const char *name)
{
	for (int i = 0; name && i < FAILPOINT_COUNT; i++)
		if (strcmp(failpoint_names[i], name) == 0)
			return i;
	return -1;
}

static void failpoint_store(int index, enum io_failpoint_action action)
{
	int value = action == IO_FAILPOINT_OFF ? 0 : (index + 1) << 2 | (int)action;
	atomic_store_explicit(&failpoint_armed, value, memory_order_seq_cst);
}

static void failpoint_read_environment(void)
{
	const char *setting = getenv("GRAPHFS_FAILPOINT");
	if (!setting || !*setting)
		return;
	char name[256], copy[300];
	const char *at = strchr(setting, '@');
	if (at) {
		char *end;
		long nth = strtol(at + 1, &end, 10);
		if (*end || nth < 1 || (size_t)(at - setting) >= sizeof copy) {
			io_log(LOG_ERR, "GRAPHFS_FAILPOINT=%s: @N must be a hit number from 1", setting);
			abort();
		}
		atomic_store(&failpoint_skip, nth - 1);
		memcpy(copy, setting, (size_t)(at - setting));
		copy[at - setting] = 0;
		setting = copy;
	}
	const char *equals = strchr(setting, '=');
	size_t length = equals ? (size_t)(equals - setting) : strlen(setting);
	enum io_failpoint_action action = IO_FAILPOINT_CRASH;
	if (equals && strcmp(equals + 1, "crash") != 0) {
		if (strcmp(equals + 1, "error") != 0) {
			io_log(LOG_ERR, "GRAPHFS_FAILPOINT=%s: action must be crash or error",
				setting);
			abort();
		}
		action = IO_FAILPOINT_ERROR;
	}
	int index = -1;
	if (length < sizeof name) {
		memcpy(name, setting, length);
		name[length] = 0;
		index = failpoint_index(name);
	}
	if (index < 0) {
		io_log(LOG_ERR, "GRAPHFS_FAILPOINT=%s: no such failpoint (see core/io_failpoints.def)",
			setting);
		abort();
	}
	failpoint_store(index, action);
}

static void failpoint_initialize(void)
{
	pthread_once(&failpoint_environment_once, failpoint_read_environment);
}

int io_failpoint_arm(const char *name, enum io_failpoint_action action)
{
	failpoint_initialize();
	int index = failpoint_index(name);
	if (index < 0)
		return -EINVAL;
	if (action != IO_FAILPOINT_OFF && action != IO_FAILPOINT_CRASH && action != IO_FAILPOINT_ERROR)
		return -EINVAL;
	if (action == IO_FAILPOINT_OFF) {
		/* Disarm only if this is the armed point. */
		int armed = atomic_load(&failpoint_armed);
		if (armed && (armed >> 2) - 1 == index)
			atomic_compare_exchange_strong(&failpoint_armed, &armed, 0);
		return 0;
	}
	atomic_store(&failpoint_skip, 0);
	failpoint_store(index, action);
	return 0;
}

int io_failpoint(const char *name)
{
	failpoint_initialize();
	int index = failpoint_index(name);
	if (index < 0) {
		io_log(LOG_ERR, "failpoint \"%s\" is not in core/io_failpoints.def",
			name ? name : "(null)");
		abort();
	}
	int armed = atomic_load(&failpoint_armed);
	if (!armed || (armed >> 2) - 1 != index)
		return 0;
	if (atomic_fetch_sub(&failpoint_skip, 1) > 0)
		return 0;   /* not yet its hit */
	if ((armed & 3) == IO_FAILPOINT_CRASH)
		_exit(IO_FAILPOINT_EXIT_CODE);
	/* Error: fire once; a concurrent hitter that loses the exchange proceeds normally. */
	if (atomic_compare_exchange_strong(&failpoint_armed, &armed, 0))
		return -EIO;
	return 0;
}

bool io_failpoint_armed(const char *name)
{
	failpoint_initialize();
	int index = failpoint_index(name);
	if (index < 0) {
		io_log(LOG_ERR, "failpoint \"%s\" is not in core/io_failpoints.def",
			name ? name : "(null)");
		abort();
	}
	int armed = atomic_load(&failpoint_armed);
	return armed && (armed >> 2) - 1 == index;
}

/* ---- diagnostics ---------------------------------------------------------------- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static io_log_fn log_hook;
static void *log_context;

void io_log_set(io_log_fn log, void *context)
{
	pthread_mutex_lock(&log_lock);
	log_hook = log;
	log_context = context;
	pthread_mutex_unlock(&log_lock);
}

void io_log(int priority, const char *format, ...)
{
	char line[2048];
	va_list arguments;
	va_start(arguments, format);
	vsnprintf(line, sizeof line, format, arguments);
	va_end(arguments);
	pthread_mutex_lock(&log_lock);
	io_log_fn hook = log_hook;
	void *context = log_context;
	pthread_mutex_unlock(&log_lock);
	if (hook)
		hook(context, priority, line);
	else if (priority <= LOG_NOTICE)   /* without a hook, informational lines are not shown */
		fprintf(stderr, "graphfs: %s\n", line);
}

static __thread int failure_code;
static __thread char failure_message[512];

void io_failure_note(int rc, const char *message)
{
	failure_code = rc;
	snprintf(failure_message, sizeof failure_message, "%s", message);
}

const char *io_strerror(int rc)
{
	return rc < 0 && rc == failure_code && failure_message[0] ? failure_message : strerror(-rc);
}

void io_log_failure(const struct error_info *error)
{
	if (error->code) {
		io_failure_note(error->code, error->message);
		/* a store out of reach is said once, by whoever reads through the outage (a mount's
		 * .graphfs/errors), not at every request that meets it */
		io_log(io_error_is_unreachable(error->code) ? LOG_DEBUG : LOG_INFO, "%s", error->message);
	}
}
