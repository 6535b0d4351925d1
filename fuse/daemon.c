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
 *   2. Commits by other processes become visible within refresh_ms +
 *      GRAPHFS_LIVE_TIMEOUT (default 1 s + 1 s): live requests refresh the
 *      store at most once per refresh_ms, and cached live attributes and
 *      entries expire after the live timeout.
 *   3. After a commit this mount made, the kernel is told (inval_inode /
 *      inval_entry) before or right after the reply, never while the
 *      request holds a lock the notification needs.
 */
#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "fuse_int.h"

struct mount *graphfs_mount;
static bool log_to_stderr = true;

void mount_log(int priority, const char *format, ...)
{
	va_list arguments;
	va_start(arguments, format);
	if (log_to_stderr) {
		char line[2048];
		vsnprintf(line, sizeof line, format, arguments);
		fprintf(stderr, "graphfs: %s\n", line);
	} else {
		vsyslog(priority, format, arguments);
	}
	va_end(arguments);
}

uint64_t mount_now_ms(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
}

/* ---- .graphfs/errors ------------------------------------------------------------ */

void mount_error_record(struct mount *mount, const char *path, const struct error_info *error,
			int code)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	char time_text[32];
	journal_format_time((uint64_t)now.tv_sec * 1000000 + (uint64_t)now.tv_nsec / 1000, time_text);
	const char *reason = error && error->message[0] ? error->message : strerror(code < 0 ? -code : code);
	json_t *line = json_object();
	json_object_set_new(line, "time", json_string(time_text));
	json_object_set_new(line, "path", json_string(path));
	json_object_set_new(line, "line", json_integer(error ? (json_int_t)error->line : 0));
	json_object_set_new(line, "errno", json_integer(code < 0 ? -code : code));
	json_object_set_new(line, "reason", json_string(reason));
	char *text = json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
	json_decref(line);
	atomic_fetch_add(&mount->rejected, 1);
	if (!text)
		return;
	pthread_mutex_lock(&mount->errors_lock);
	struct error_line *slot = &mount->errors[mount->errors_next];
	snprintf(slot->text, sizeof slot->text, "%s", text);
	mount->errors_next = (mount->errors_next + 1) % GRAPHFS_ERRORS_KEPT;
	if (mount->errors_count < GRAPHFS_ERRORS_KEPT)
		mount->errors_count++;
	pthread_mutex_unlock(&mount->errors_lock);
	if (mount->debug)
		mount_log(LOG_INFO, "rejected: %s", text);
	free(text);
}

int mount_errors_render(struct mount *mount, struct buf *out)
{
	int rc = 0;
	pthread_mutex_lock(&mount->errors_lock);
	size_t first = (mount->errors_next + GRAPHFS_ERRORS_KEPT - mount->errors_count) % GRAPHFS_ERRORS_KEPT;
	for (size_t i = 0; i < mount->errors_count && rc >= 0; i++) {
		const struct error_line *line = &mount->errors[(first + i) % GRAPHFS_ERRORS_KEPT];
		rc = buf_printf(out, "%s\n", line->text);
	}
	pthread_mutex_unlock(&mount->errors_lock);
	return rc < 0 ? rc : 0;
}

/* ---- cache invalidation ---------------------------------------------------------- */

struct invalidation {
	fuse_ino_t *inodes;
	size_t inode_count;
	size_t inode_capacity;
	struct {
		fuse_ino_t parent;
		char name[GRAPHFS_NAME_MAX + 1];
	} *entries;
	size_t entry_count;
	size_t entry_capacity;
	const char *branch;           /* NULL: every live view */
	const char *const *names;     /* NULL: every file; else only these tables' files and logs */
	size_t name_count;
	bool removed;                 /* the names went away: invalidate their entries too */
	struct mount *mount;
};

static bool names_match(const struct invalidation *work, const struct node *node)
{
	if (!work->names || node->kind == NODE_LOG_FILE)
		return true;
	for (size_t i = 0; i < work->name_count; i++)
		if (strcmp(node->table, work->names[i]) == 0)
			return true;
	return false;
}

static void add_inode(struct invalidation *work, fuse_ino_t id)
{
	if (work->inode_count == work->inode_capacity) {
		size_t capacity = work->inode_capacity ? work->inode_capacity * 2 : 64;
		fuse_ino_t *grown = realloc(work->inodes, capacity * sizeof *grown);
		if (!grown)
			return;
		work->inodes = grown;
		work->inode_capacity = capacity;
	}
	work->inodes[work->inode_count++] = id;
}

static void add_entry(struct invalidation *work, fuse_ino_t parent, const char *name)
{
	if (work->entry_count == work->entry_capacity) {
		size_t capacity = work->entry_capacity ? work->entry_capacity * 2 : 16;
		void *grown = realloc(work->entries, capacity * sizeof *work->entries);
		if (!grown)
			return;
		work->entries = grown;
		work->entry_capacity = capacity;
	}
	work->entries[work->entry_count].parent = parent;
	snprintf(work->entries[work->entry_count].name, sizeof work->entries[0].name, "%s", name);
	work->entry_count++;
}

static void collect_live(struct node *node, void *context)
{
	struct invalidation *work = context;
	if (node->view.version != 0)
		return;
	if (work->branch && strcmp(node->view.branch, work->branch) != 0)
		return;
	fuse_ino_t id = inode_id(work->mount, node);
	if (!node_is_directory(node->kind)) {
		if (names_match(work, node))
			add_inode(work, id);
		return;
	}
	if (!work->removed)
		return;
	const char *suffix = NULL;
	if (node->kind == NODE_TABLES_DIR)
		suffix = ".jsonl";
	else if (node->kind == NODE_HEADS_DIR || node->kind == NODE_SCHEMA_DIR)
		suffix = ".json";
	else if (node->kind == NODE_STAGING_DIR)
		suffix = ".jsonl";
	if (!suffix)
		return;
	for (size_t i = 0; i < work->name_count; i++) {
		char name[GRAPHFS_NAME_MAX + 1];
		snprintf(name, sizeof name, "%s%s", work->names[i], suffix);
		add_entry(work, id, name);
	}
}

static void invalidate(struct mount *mount, const char *branch, const char *const *names,
		       size_t name_count, bool removed)
{
	struct invalidation work = { .branch = branch, .names = names, .name_count = name_count,
				     .removed = removed, .mount = mount };
	inode_visit(mount, collect_live, &work);
	if (mount->session) {
		for (size_t i = 0; i < work.inode_count; i++)
			fuse_lowlevel_notify_inval_inode(mount->session, work.inodes[i], -1, 0);
		for (size_t i = 0; i < work.entry_count; i++)
			fuse_lowlevel_notify_inval_entry(mount->session, work.entries[i].parent,
							 work.entries[i].name,
							 strlen(work.entries[i].name));
	}
	free(work.inodes);
	free(work.entries);
}

void mount_invalidate_branch(struct mount *mount, const char *branch, const char *const *names,
			     size_t name_count, bool removed)
{
	view_cache_drop_live(mount);
	invalidate(mount, branch, names, name_count, removed);
}

void mount_refresh(struct mount *mount)
{
	uint64_t now = mount_now_ms();
	pthread_mutex_lock(&mount->refresh_lock);
	if (now - mount->last_refresh_ms < mount->refresh_interval_ms) {
		pthread_mutex_unlock(&mount->refresh_lock);
		return;
	}
	mount->last_refresh_ms = now;
	pthread_mutex_unlock(&mount->refresh_lock);
	bool changed = false;
	int rc = store_refresh(mount->store, &changed);
	atomic_fetch_add(&mount->refreshes, 1);
	if (rc < 0) {
		mount_log(LOG_ERR, "refreshing the store failed: %s", strerror(-rc));
		return;
	}
	if (changed) {
		view_cache_drop_live(mount);
		/* Attributes only: entries of a directory whose lookup is in flight
		 * cannot be invalidated from here; they expire after the live timeout. */
		invalidate(mount, NULL, NULL, 0, false);
	}
}

/* ---- options ------------------------------------------------------------------------ */

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
	"  -o tmpdir=DIR    where private copies and scratch files live (default $TMPDIR or /tmp)\n"
	"  -o refresh_ms=N  look for other processes' commits at most every N ms (default 1000)\n"
	"  -o block_cache=N bytes of manifest blocks kept in memory (default 32M; 0: none)\n"
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
	options->refresh_ms = GRAPHFS_REFRESH_INTERVAL_MS;
	options->block_cache = GRAPHFS_BLOCK_CACHE;
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

static void mount_free(struct mount *mount)
{
	files_close_all(mount);
	workspaces_free(mount);
	view_cache_free(mount);
	buf_free(&mount->log_bytes);
	if (mount->inodes.buckets)
		inode_table_free(&mount->inodes);
	if (mount->store)
		store_close(mount->store);
	pthread_mutex_destroy(&mount->refresh_lock);
	pthread_mutex_destroy(&mount->workspaces_lock);
	pthread_mutex_destroy(&mount->errors_lock);
	pthread_mutex_destroy(&mount->log_lock);
	free(mount);
}

int graphfs_mount_main(int argc, char **argv)
{
	/*
	 * The FUSE threads take turns serving large writes. glibc would give each
	 * its own arena and keep what it freed there, and it raises its mmap
	 * threshold after the first large free, so that later stage buffers come
	 * from (and stay in) the heap: each import would leave its memory behind.
	 * Two arenas and a fixed threshold give a finished commit's buffers back
	 * to the system (DESIGN §8: daemon peak RSS).
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

	struct mount *mount = calloc(1, sizeof *mount);
	if (!mount) {
		fprintf(stderr, "graphfs: mount: out of memory\n");
		return 1;
	}
	pthread_mutex_init(&mount->refresh_lock, NULL);
	pthread_mutex_init(&mount->workspaces_lock, NULL);
	pthread_mutex_init(&mount->errors_lock, NULL);
	pthread_mutex_init(&mount->log_lock, NULL);
	buf_init(&mount->log_bytes);
	view_cache_init(mount);
	mount->uid = getuid();
	mount->gid = getgid();
	mount->read_only = options.read_only;
	mount->foreground = options.foreground;
	mount->debug = options.debug;
	clock_gettime(CLOCK_REALTIME, &mount->mount_time);
	mount->last_refresh_ms = mount_now_ms();
	mount->refresh_interval_ms = options.refresh_ms;
	snprintf(mount->branch, sizeof mount->branch, "%s", options.branch);
	graphfs_mount = mount;

	int status = 1;
	struct fuse_session *session = NULL;
	bool mounted = false, handlers = false;
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);

	if (!realpath(options.store, mount->store_path)) {
		fprintf(stderr, "graphfs: mount: %s: %s\n", options.store, strerror(errno));
		goto cleanup;
	}
	if (!realpath(options.mountpoint, mount->mountpoint)) {
		fprintf(stderr, "graphfs: mount: %s: %s\n", options.mountpoint, strerror(errno));
		goto cleanup;
	}
	const char *tmpdir = options.tmpdir[0] ? options.tmpdir : getenv("TMPDIR");
	if (!tmpdir || !*tmpdir)
		tmpdir = "/tmp";
	if (!realpath(tmpdir, mount->temporary_directory)) {
		fprintf(stderr, "graphfs: mount: temporary directory %s: %s\n", tmpdir, strerror(errno));
		goto cleanup;
	}
	rc = check_temporary_directory(mount->temporary_directory);
	if (rc < 0) {
		fprintf(stderr, "graphfs: mount: temporary directory %s cannot hold unnamed files: %s\n",
			mount->temporary_directory, strerror(-rc));
		goto cleanup;
	}

	struct store_options store_options = {
		.read_only = options.read_only,
		.row_max = options.row_max,
		.staged_max = options.staged_max,
		.block_cache = (size_t)options.block_cache,
	};
	struct error_info error;
	error_info_clear(&error);
	rc = store_open(mount->store_path, &store_options, &mount->store, &error);
	if (rc < 0) {
		char line[1024];
		if (error.message[0])
			fprintf(stderr, "graphfs: mount: %s\n", error_info_format(&error, line, sizeof line));
		else
			fprintf(stderr, "graphfs: mount: %s: %s\n", mount->store_path, strerror(-rc));
		goto cleanup;
	}
	struct store_snapshot *check = NULL;
	error_info_clear(&error);
	rc = store_snapshot_open(mount->store, mount->branch, STORE_LATEST, &check, &error);
	if (rc < 0) {
		fprintf(stderr, "graphfs: mount: no branch named \"%s\" in %s\n", mount->branch,
			mount->store_path);
		goto cleanup;
	}
	store_snapshot_release(check);

	struct view root_view = { .version = 0 };
	snprintf(root_view.branch, sizeof root_view.branch, "%s", mount->branch);
	if (inode_table_init(&mount->inodes, &root_view) < 0) {
		fprintf(stderr, "graphfs: mount: out of memory\n");
		goto cleanup;
	}

	char fsname[4200];
	snprintf(fsname, sizeof fsname, "fsname=graphfs:%s", mount->store_path);
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
		goto cleanup;
	}
	session = fuse_session_new(&args, &graphfs_operations, sizeof graphfs_operations, mount);
	if (!session) {
		fprintf(stderr, "graphfs: mount: cannot create the FUSE session\n");
		goto cleanup;
	}
	if (fuse_set_signal_handlers(session) != 0) {
		fprintf(stderr, "graphfs: mount: cannot install signal handlers\n");
		goto cleanup;
	}
	handlers = true;
	if (fuse_session_mount(session, mount->mountpoint) != 0) {
		fprintf(stderr, "graphfs: mount: cannot mount on %s\n", mount->mountpoint);
		goto cleanup;
	}
	mounted = true;
	mount->session = session;
	if (!options.foreground) {
		openlog("graphfs", LOG_PID, LOG_DAEMON);
		log_to_stderr = false;
	}
	if (fuse_daemonize(options.foreground) != 0) {
		mount_log(LOG_ERR, "cannot daemonize");
		goto cleanup;
	}
	mount_log(LOG_INFO, "mounted %s (branch %s%s) on %s", mount->store_path, mount->branch,
		  mount->read_only ? ", read-only" : "", mount->mountpoint);

	struct fuse_loop_config *loop = fuse_loop_cfg_create();
	if (!loop) {
		mount_log(LOG_ERR, "out of memory");
		goto cleanup;
	}
	fuse_loop_cfg_set_idle_threads(loop, 2);
	fuse_loop_cfg_set_max_threads(loop, 16);
	rc = fuse_session_loop_mt(session, loop);
	fuse_loop_cfg_destroy(loop);
	if (rc < 0) {
		mount_log(LOG_ERR, "the FUSE loop failed: %s", strerror(-rc));
		goto cleanup;
	}
	status = 0;

cleanup:
	if (mounted) {
		mount->session = NULL;
		fuse_session_unmount(session);
	}
	if (handlers)
		fuse_remove_signal_handlers(session);
	if (session)
		fuse_session_destroy(session);
	fuse_opt_free_args(&args);
	if (!log_to_stderr && status == 0)
		syslog(LOG_INFO, "unmounted %s", mount->mountpoint);
	graphfs_mount = NULL;
	mount_free(mount);
	return status;
}
