/*
 * daemon — `graphfs mount STORE MOUNTPOINT [-f] [-d] [-o OPTIONS]`.
 *
 * States: parse options -> open the store (a store of another format version
 * is refused here, before anything is mounted) -> create the session and
 * mount -> daemonize unless -f (the parent exits 0 once the child serves) ->
 * serve with the multi-threaded loop -> unmount (fusermount -u, SIGTERM,
 * SIGINT, SIGHUP) -> free every open file, staging area and snapshot ->
 * close the store.
 *
 * Invariants:
 *   1. Nothing is mounted unless the store opened and the branch exists.
 *   2. While mounted, the store records that this process serves the branch
 *      (store_serve_branch), so that no other process deletes it.
 *   3. Diagnostics of the store and of mountfs reach the log: stderr with -f,
 *      syslog otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <malloc.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "fuse_ops.h"
#include "mount.h"

/* ---- options ------------------------------------------------------------------------ */

#define DEFAULT_REFRESH_INTERVAL_MS 1000     /* at most one store_refresh per second */
#define DEFAULT_BLOCK_CACHE (32u << 20)      /* bytes of the store's block cache */

static const char usage[] =
	"usage: graphfs mount STORE MOUNTPOINT [-f] [-d] [-o OPTION[,OPTION...]]\n"
	"\n"
	"Mounts the store as a directory tree (see graphfs(1) and docs/MOUNT.md).\n"
	"  -f               stay in the foreground, log to stderr\n"
	"  -d               debug: foreground, log every FUSE request\n"
	"  -o branch=NAME   mount branch NAME (default main)\n"
	"  -o ro            read-only mount\n"
	"  -o row_max=N     longest accepted row in bytes (EFBIG beyond)\n"
	"  -o staged_max=N  most bytes one write may stage (ENOSPC beyond)\n"
	"  -o tmpdir=DIR    where private copies of in-place edits live (default $TMPDIR or /tmp)\n"
	"  -o refresh_ms=N  look for other processes' commits at most every N ms (default 1000)\n"
	"  -o block_cache=N bytes of manifest blocks kept in memory (default 32M; 0: none)\n"
	"  -o uid=U,gid=G   owner and group of table, schema and head files (default: yours)\n"
	"  -o umask=M       octal bits taken from their modes (default 022; 002 with allow_other\n"
	"                   and gid= lets a group write)\n"
	"  -o allow_other, allow_root, auto_unmount, fsname=, nosuid, nodev, noexec, noatime ...\n"
	"                   passed to FUSE; mount(8) options such as defaults, noauto, user,\n"
	"                   _netdev, nofail are accepted and ignored\n";

struct mount_options {
	const char *store;
	const char *mountpoint;
	char branch[JOURNAL_NAME_MAX + 1];
	bool foreground;
	bool debug;
	bool read_only;
	size_t row_max;
	uint64_t staged_max;
	uint64_t refresh_ms;
	uint64_t block_cache;
	char tmpdir[4096];
	char fuse_options[4096];
	uid_t uid;                 /* owner of store files (uid=; default: the mounting user) */
	gid_t gid;                 /* their group (gid=; default: the mounting user's) */
	mode_t umask;              /* umask= (default 022) */
};

static int append_fuse_option(struct mount_options *options, const char *option)
{
	size_t used = strlen(options->fuse_options);
	int written = snprintf(options->fuse_options + used, sizeof options->fuse_options - used, "%s%s",
			       used ? "," : "", option);
	if (written < 0 || (size_t)written >= sizeof options->fuse_options - used)
		return -E2BIG;
	return 0;
}

static bool parse_size(const char *text, uint64_t *out)
{
	char *end = NULL;
	errno = 0;
	unsigned long long value = strtoull(text, &end, 10);
	if (errno || end == text)
		return false;
	uint64_t scale = 1;
	if (*end == 'k' || *end == 'K')
		scale = 1024, end++;
	else if (*end == 'm' || *end == 'M')
		scale = 1024 * 1024, end++;
	else if (*end == 'g' || *end == 'G')
		scale = 1024ULL * 1024 * 1024, end++;
	if (*end)
		return false;
	*out = (uint64_t)value * scale;
	return true;
}

static const char *const ignored_options[] = {
	"defaults", "auto", "noauto", "user", "nouser", "users", "_netdev", "nofail", "owner",
	"group", "rw", "nodiratime", "diratime", "strictatime", "lazytime", "nolazytime",
	"relatime", "norelatime", "silent", "loud", NULL,
};

static const char *const passed_options[] = {
	"allow_other", "allow_root", "auto_unmount", "nosuid", "suid", "nodev", "dev", "noexec",
	"exec", "noatime", "atime", "sync", "async", "dirsync", "default_permissions", NULL,
};

static bool in_list(const char *const *list, const char *option)
{
	for (size_t i = 0; list[i]; i++)
		if (strcmp(list[i], option) == 0)
			return true;
	return false;
}

static int parse_option(struct mount_options *options, const char *option)
{
	if (!*option || in_list(ignored_options, option) || strncmp(option, "x-", 2) == 0 ||
	    strncmp(option, "comment=", 8) == 0)
		return 0;
	if (strcmp(option, "ro") == 0) {
		options->read_only = true;
		return 0;
	}
	if (strncmp(option, "branch=", 7) == 0) {
		if (snprintf(options->branch, sizeof options->branch, "%s", option + 7) >=
		    (int)sizeof options->branch) {
			fprintf(stderr, "graphfs: mount: branch name too long\n");
			return -EINVAL;
		}
		return 0;
	}
	if (strncmp(option, "uid=", 4) == 0 || strncmp(option, "gid=", 4) == 0) {
		bool user = option[0] == 'u';
		const char *text = option + 4;
		char *end = NULL;
		unsigned long number = strtoul(text, &end, 10);
		if (*text && end && *end == '\0' && number < UINT32_MAX) {
			if (user)
				options->uid = (uid_t)number;
			else
				options->gid = (gid_t)number;
			return 0;
		}
		struct passwd *account = user ? getpwnam(text) : NULL;
		struct group *group = user ? NULL : getgrnam(text);
		if (user && account) {
			options->uid = account->pw_uid;
			return 0;
		}
		if (!user && group) {
			options->gid = group->gr_gid;
			return 0;
		}
		fprintf(stderr, "graphfs: mount: no %s named '%s'\n", user ? "user" : "group", text);
		return -EINVAL;
	}
	if (strncmp(option, "umask=", 6) == 0) {
		char *end = NULL;
		unsigned long mask = strtoul(option + 6, &end, 8);
		if (!option[6] || !end || *end || mask > 0777) {
			fprintf(stderr, "graphfs: mount: bad umask '%s' (octal, at most 0777)\n", option + 6);
			return -EINVAL;
		}
		options->umask = (mode_t)mask;
		return 0;
	}
	if (strncmp(option, "tmpdir=", 7) == 0) {
		snprintf(options->tmpdir, sizeof options->tmpdir, "%s", option + 7);
		return 0;
	}
	uint64_t value;
	if (strncmp(option, "row_max=", 8) == 0) {
		if (!parse_size(option + 8, &value) || value == 0) {
			fprintf(stderr, "graphfs: mount: bad row_max '%s'\n", option + 8);
			return -EINVAL;
		}
		options->row_max = (size_t)value;
		return 0;
	}
	if (strncmp(option, "refresh_ms=", 11) == 0) {
		if (!parse_size(option + 11, &value)) {
			fprintf(stderr, "graphfs: mount: bad refresh_ms '%s'\n", option + 11);
			return -EINVAL;
		}
		options->refresh_ms = value;
		return 0;
	}
	if (strncmp(option, "block_cache=", 12) == 0) {
		if (!parse_size(option + 12, &value) || value > SIZE_MAX / 2) {
			fprintf(stderr, "graphfs: mount: bad block_cache '%s'\n", option + 12);
			return -EINVAL;
		}
		options->block_cache = value;
		return 0;
	}
	if (strncmp(option, "staged_max=", 11) == 0) {
		if (!parse_size(option + 11, &value)) {
			fprintf(stderr, "graphfs: mount: bad staged_max '%s'\n", option + 11);
			return -EINVAL;
		}
		options->staged_max = value;
		return 0;
	}
	if (in_list(passed_options, option) || strncmp(option, "fsname=", 7) == 0 ||
	    strncmp(option, "subtype=", 8) == 0 || strncmp(option, "max_read=", 9) == 0)
		return append_fuse_option(options, option);
	fprintf(stderr, "graphfs: mount: unknown option '%s' (see 'graphfs mount --help')\n", option);
	return -EINVAL;
}

static int parse_option_list(struct mount_options *options, const char *list)
{
	char *copy = strdup(list);
	if (!copy)
		return -ENOMEM;
	int rc = 0;
	char *saved = NULL;
	for (char *option = strtok_r(copy, ",", &saved); option && rc == 0;
	     option = strtok_r(NULL, ",", &saved))
		rc = parse_option(options, option);
	free(copy);
	return rc;
}

/* 0 to continue, 1 for --help, negative on a usage error (message printed). */
static int parse_arguments(int argc, char **argv, struct mount_options *options)
{
	memset(options, 0, sizeof *options);
	snprintf(options->branch, sizeof options->branch, "main");
	options->refresh_ms = DEFAULT_REFRESH_INTERVAL_MS;
	options->uid = getuid();
	options->gid = getgid();
	options->umask = 022;
	options->block_cache = DEFAULT_BLOCK_CACHE;
	const char *positional[2];
	int count = 0;
	for (int i = 1; i < argc; i++) {
		const char *argument = argv[i];
		if (strcmp(argument, "-h") == 0 || strcmp(argument, "--help") == 0)
			return 1;
		if (strcmp(argument, "-f") == 0) {
			options->foreground = true;
		} else if (strcmp(argument, "-d") == 0) {
			options->foreground = true;
			options->debug = true;
		} else if (strcmp(argument, "-o") == 0) {
			if (i + 1 >= argc) {
				fprintf(stderr, "graphfs: mount: -o needs a value (see 'graphfs mount --help')\n");
				return -EINVAL;
			}
			int rc = parse_option_list(options, argv[++i]);
			if (rc < 0)
				return rc;
		} else if (strncmp(argument, "-o", 2) == 0) {
			int rc = parse_option_list(options, argument + 2);
			if (rc < 0)
				return rc;
		} else if (argument[0] == '-' && argument[1]) {
			fprintf(stderr, "graphfs: mount: unknown option '%s' (see 'graphfs mount --help')\n",
				argument);
			return -EINVAL;
		} else if (count < 2) {
			positional[count++] = argument;
		} else {
			fprintf(stderr, "graphfs: mount: too many arguments (see 'graphfs mount --help')\n");
			return -EINVAL;
		}
	}
	if (count != 2) {
		fprintf(stderr, "graphfs: mount: expected STORE and MOUNTPOINT (see 'graphfs mount --help')\n");
		return -EINVAL;
	}
	options->store = positional[0];
	options->mountpoint = positional[1];
	return 0;
}

/* ---- lifetime ------------------------------------------------------------------------- */

static int check_temporary_directory(const char *path)
{
	int descriptor = open(path, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (descriptor < 0)
		return -errno;
	close(descriptor);
	return 0;
}

/* ---- logging and the kernel's caches ------------------------------------------------- */

static bool log_to_stderr = true;

/* The log hook of mountfs and of the store: stderr in the foreground, syslog otherwise. */
static void daemon_log(void *context, int priority, const char *message)
{
	(void)context;
	if (log_to_stderr) {
		if (priority < LOG_DEBUG)   /* debug lines (the retention policy's gcs) go to syslog only */
			fprintf(stderr, "graphfs: %s\n", message);
	} else {
		syslog(priority, "%s", message);
	}
}

static void daemon_logf(int priority, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void daemon_logf(int priority, const char *format, ...)
{
	char line[2048];
	va_list arguments;
	va_start(arguments, format);
	vsnprintf(line, sizeof line, format, arguments);
	va_end(arguments);
	daemon_log(NULL, priority, line);
}

static void invalidate_inode(void *context, uint64_t id)
{
	fuse_lowlevel_notify_inval_inode(context, id, -1, 0);
}

static void invalidate_entry(void *context, uint64_t parent, const char *name)
{
	fuse_lowlevel_notify_inval_entry(context, parent, name, strlen(name));
}

/* ---- lifetime ------------------------------------------------------------------------- */

int graphfs_mount_main(int argc, char **argv)
{
	/*
	 * The FUSE threads take turns serving large writes. glibc would give each
	 * its own arena and keep what it freed there, and it raises its mmap
	 * threshold after the first large free, so that later stage buffers come
	 * from (and stay in) the heap: each import would leave its memory behind.
	 * Two arenas and a fixed threshold give a finished commit's buffers back
	 * to the system (docs/PERFORMANCE.md: daemon peak RSS).
	 */
	mallopt(M_ARENA_MAX, 2);
	mallopt(M_MMAP_THRESHOLD, 256 * 1024);

	struct mount_options options;
	int rc = parse_arguments(argc, argv, &options);
	if (rc == 1) {
		fputs(usage, stdout);
		return 0;
	}
	if (rc < 0)
		return 2;

	int status = 1;
	struct store *store = NULL;
	struct mountfs *mount = NULL;
	struct fuse_session *session = NULL;
	bool mounted = false, handlers = false;
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	char store_path[PATH_MAX], mountpoint[PATH_MAX], temporary_directory[PATH_MAX];

	struct error_info location_error;
	if (store_location_check(options.store, &location_error) < 0) {
		fprintf(stderr, "graphfs: mount: %s\n", location_error.message);
		goto out;
	}
	/* an s3:// location is used as given; a directory by its absolute path */
	if (strncmp(options.store, "s3://", 5) == 0) {
		snprintf(store_path, sizeof store_path, "%s", options.store);
	} else if (!realpath(options.store, store_path)) {
		fprintf(stderr, "graphfs: mount: %s: %s\n", options.store, strerror(errno));
		goto out;
	}
	if (!realpath(options.mountpoint, mountpoint)) {
		fprintf(stderr, "graphfs: mount: %s: %s\n", options.mountpoint, strerror(errno));
		goto out;
	}
	const char *tmpdir = options.tmpdir[0] ? options.tmpdir : getenv("TMPDIR");
	if (!tmpdir || !*tmpdir)
		tmpdir = "/tmp";
	if (!realpath(tmpdir, temporary_directory)) {
		fprintf(stderr, "graphfs: mount: temporary directory %s: %s\n", tmpdir, strerror(errno));
		goto out;
	}
	rc = check_temporary_directory(temporary_directory);
	if (rc < 0) {
		fprintf(stderr, "graphfs: mount: temporary directory %s cannot hold unnamed files: %s\n",
			temporary_directory, strerror(-rc));
		goto out;
	}

	struct store_options store_options = {
		.read_only = options.read_only,
		.row_max = options.row_max,
		.staged_max = options.staged_max,
		.block_cache = (size_t)options.block_cache,
		.log = daemon_log,
		.no_upkeep_at_close = true,   /* the mount keeps the store on its own thread (mountfs/upkeep.c) */
		.no_compaction_at_commit = true,
	};
	struct error_info error;
	error_info_clear(&error);
	rc = store_open(store_path, &store_options, &store, &error);
	if (rc < 0) {
		char line[1024];
		if (error.message[0])
			fprintf(stderr, "graphfs: mount: %s\n", error_info_format(&error, line, sizeof line));
		else
			fprintf(stderr, "graphfs: mount: %s: %s\n", store_path, strerror(-rc));
		goto out;
	}
	struct mountfs_config config = {
		.store = store,
		.branch = options.branch,
		.mountpoint = mountpoint,
		.temporary_directory = temporary_directory,
		.read_only = options.read_only,
		.refresh_interval_ms = options.refresh_ms,
		.uid = options.uid,
		.gid = options.gid,
		.umask = options.umask,
		.log_rejections = options.debug,
		.log = daemon_log,
	};
	rc = mountfs_new(&config, &mount);
	if (rc == -ENOENT) {
		fprintf(stderr, "graphfs: mount: no branch named \"%s\" in %s\n", options.branch, store_path);
		goto out;
	}
	if (rc < 0) {
		fprintf(stderr, "graphfs: mount: %s\n", strerror(-rc));
		goto out;
	}
	store = NULL;   /* the mount's now */

	char fsname[PATH_MAX + 16];
	snprintf(fsname, sizeof fsname, "fsname=graphfs:%s", store_path);
	/* fsname must not contain commas for the kernel's option string. */
	for (char *c = fsname; *c; c++)
		if (*c == ',')
			*c = '_';
	if (fuse_opt_add_arg(&args, "graphfs") != 0 || fuse_opt_add_arg(&args, "-o") != 0 ||
	    fuse_opt_add_arg(&args, fsname) != 0 || fuse_opt_add_arg(&args, "-o") != 0 ||
	    fuse_opt_add_arg(&args, "subtype=graphfs,default_permissions") != 0 ||
	    (options.read_only && fuse_opt_add_arg(&args, "-oro") != 0) ||
	    (options.fuse_options[0] &&
	     (fuse_opt_add_arg(&args, "-o") != 0 || fuse_opt_add_arg(&args, options.fuse_options) != 0)) ||
	    (options.debug && fuse_opt_add_arg(&args, "-d") != 0)) {
		fprintf(stderr, "graphfs: mount: out of memory\n");
		goto out;
	}
	session = fuse_session_new(&args, &graphfs_operations, sizeof graphfs_operations, mount);
	if (!session) {
		fprintf(stderr, "graphfs: mount: cannot create the FUSE session\n");
		goto out;
	}
	struct mountfs_notify notify = { invalidate_inode, invalidate_entry, session };
	if (fuse_set_signal_handlers(session) != 0) {
		fprintf(stderr, "graphfs: mount: cannot install signal handlers\n");
		goto out;
	}
	handlers = true;
	if (fuse_session_mount(session, mountpoint) != 0) {
		fprintf(stderr, "graphfs: mount: cannot mount on %s\n", mountpoint);
		goto out;
	}
	mounted = true;
	mountfs_set_notify(mount, &notify);
	if (!options.foreground) {
		openlog("graphfs", LOG_PID, LOG_DAEMON);
		log_to_stderr = false;
	}
	/* a forked child keeps no thread: the store's lease renewers stop before and start after */
	mountfs_fork_before(mount);
	rc = fuse_daemonize(options.foreground);
	int resumed = mountfs_fork_after(mount);
	if (rc != 0) {
		daemon_log(NULL, LOG_ERR, "cannot daemonize");
		goto out;
	}
	if (resumed < 0)
		daemon_logf(LOG_ERR, "cannot restart the lease renewals: %s (another host may take this mount's branch)",
			    strerror(-resumed));
	daemon_logf(LOG_INFO, "mounted %s (branch %s%s) on %s", store_path, options.branch,
			 options.read_only ? ", read-only" : "", mountpoint);

	struct fuse_loop_config *loop = fuse_loop_cfg_create();
	if (!loop) {
		daemon_log(NULL, LOG_ERR, "out of memory");
		goto out;
	}
	fuse_loop_cfg_set_idle_threads(loop, 2);
	fuse_loop_cfg_set_max_threads(loop, 16);
	rc = fuse_session_loop_mt(session, loop);
	fuse_loop_cfg_destroy(loop);
	if (rc < 0) {
		daemon_logf(LOG_ERR, "the FUSE loop failed: %s", strerror(-rc));
		goto out;
	}
	status = 0;

out:
	if (mount)
		mountfs_set_notify(mount, NULL);
	if (mounted)
		fuse_session_unmount(session);
	if (handlers)
		fuse_remove_signal_handlers(session);
	if (session)
		fuse_session_destroy(session);
	fuse_opt_free_args(&args);
	if (!log_to_stderr && status == 0)
		syslog(LOG_INFO, "unmounted %s", mountpoint);
	mountfs_free(mount);
	if (store)
		store_close(store);
	return status;
}
