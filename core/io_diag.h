/*
 * io_diag — the ground of the io layer (io.h includes it): exact I/O
 * counters, the failpoint registry, the log hook and this thread's last
 * failure. Nothing here calls the rest of the engine; every file may call it.
 *
 * Counters are process-wide, updated with relaxed atomics, cumulative since
 * process start or the last io_counters_reset(). reads, bytes and pages count
 * physical reads: a block the pager serves from its block cache (pager.h)
 * counts nothing here, so repeating a lookup in one process may cost fewer
 * pages the second time; rows_decoded counts the decoding work of the
 * layers above, which they do for cached blocks too.
 */
#ifndef GRAPHFS_IO_DIAG_H
#define GRAPHFS_IO_DIAG_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "error_info.h"

/* ---- counters ---------------------------------------------------------- */

enum io_class {
	IO_MANIFEST = 0, /* the manifest file: header, meta, roots, tree nodes, commits */
	IO_DATA = 1,     /* table data: fragments, deletion bitmaps, segment files */
	IO_CLASS_COUNT
};

struct io_counters {
	uint64_t reads;          /* pread calls that returned data */
	uint64_t bytes;          /* logical bytes of the blocks read (header + stored payload) */
	uint64_t pages;          /* checksummed blocks read and verified */
	uint64_t rows_decoded;   /* tree entries (manifest) or table rows (data) decoded */
	uint64_t writes;         /* pwrite calls */
	uint64_t bytes_written;
	uint64_t fsyncs;
};

void io_counters_get(enum io_class class, struct io_counters *out);

void io_counters_reset(void);
/* Called by the codec / tree / table layers; the io layer itself counts reads and writes. */
void io_count_block(enum io_class class, uint64_t block_bytes);
void io_count_rows(enum io_class class, uint64_t rows);
/* Called by io.c: one read that returned data, one pwrite of bytes, one fsync. */
void io_count_read(enum io_class class);
void io_count_write(enum io_class class, uint64_t bytes);
void io_count_fsync(enum io_class class);

/* ---- failpoints -------------------------------------------------------- */

enum io_failpoint_action {
	IO_FAILPOINT_OFF = 0,
	IO_FAILPOINT_CRASH,  /* _exit(IO_FAILPOINT_EXIT_CODE) at the point, as if killed */
	IO_FAILPOINT_ERROR,  /* the point returns -EIO once, as if the disk failed */
};

#define IO_FAILPOINT_EXIT_CODE 86

/*
 * The registry: a NULL-terminated array of every failpoint name compiled in.
 * Names are "<path>.<instant>", e.g. "publish.after_append".
 */
const char *const *io_failpoint_names(void);

/*
 * Arms one failpoint (one at a time; arming replaces). Returns 0, or -EINVAL
 * if the name is not in the registry. The environment variable
 * GRAPHFS_FAILPOINT=<name>[=crash|error] arms one at process start
 * (default action crash); an unknown name there aborts the process with a
 * message, so a test cannot silently arm nothing.
 */
int io_failpoint_arm(const char *name, enum io_failpoint_action action);

/*
 * Marks an instant on a write path. Returns 0 normally; -EIO if this point is
 * armed with IO_FAILPOINT_ERROR (then disarms it); never returns if armed
 * with IO_FAILPOINT_CRASH. Calling it with a name not in the registry aborts
 * (debug and release builds alike).
 */
int io_failpoint(const char *name);

/*
 * Whether name is the armed failpoint (any action), without hitting it. For
 * points that must act half-way through an operation ("publish.torn_write":
 * write half, then hit). Aborts on a name not in the registry.
 */
bool io_failpoint_armed(const char *name);

/* ---- diagnostics ------------------------------------------------------------- */

/* Where the library's diagnostics go (damaged blocks, recovery notes): one
 * process-wide hook, priority as syslog(3). NULL (the default): one line
 * "graphfs: <message>" on stderr. */
typedef void (*io_log_fn)(void *context, int priority, const char *message);
void io_log_set(io_log_fn log, void *context);
/* Reports one diagnostic line through the hook. */
void io_log(int priority, const char *format, ...) __attribute__((format(printf, 2, 3)));
/* What an error rc from an io call of this thread means: the object store's
 * answer when this thread's last failed request there failed with rc (say,
 * "PUT manifest/…: Couldn't connect to server (http://…)"), else
 * strerror(-rc). The text stays valid until this thread's next failure. */
const char *io_strerror(int rc);
/* Records this thread's last failed object-store request (what io_strerror says for its rc). */
void io_failure_note(int rc, const char *message);
/* A failed request: notes it (io_failure_note) and logs its message at LOG_INFO for a
 * daemon's log (informational: the caller's error says what failed). Nothing if error->code is 0. */
void io_log_failure(const struct error_info *error);

/* Whether rc is what a request to an object store out of reach returns (connection refused,
 * timed out, host unreachable, a transfer cut: core/s3.c), as opposed to damage or a refusal. */
static inline bool io_error_is_unreachable(int rc)
{
	return rc == -ECONNREFUSED || rc == -ETIMEDOUT || rc == -EHOSTUNREACH || rc == -ECOMM;
}

#endif
