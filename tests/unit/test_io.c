/* io: the one choke point — safe opens, exact counters, named failpoints. */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "io.h"

/* Runs fn in a forked child; returns the raw wait status. */
static int run_in_child(void (*fn)(void))
{
	fflush(NULL);
	pid_t child = fork();
	if (child == 0) {
		fn();
		_exit(0);
	}
	int status = 0;
	waitpid(child, &status, 0);
	return status;
}

/* Re-executes this test binary in "--hit <name>" mode with GRAPHFS_FAILPOINT set. */
static int run_hit_with_environment(const char *setting, const char *name)
{
	fflush(NULL);
	pid_t child = fork();
	if (child == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 2); /* the abort message is expected */
		setenv("GRAPHFS_FAILPOINT", setting, 1);
		execl("/proc/self/exe", "test_io", "--hit", name, (char *)NULL);
		_exit(127);
	}
	int status = 0;
	waitpid(child, &status, 0);
	return status;
}

static int open_store(void)
{
	int directory = io_directory_open(harness_temp_directory());
	return directory;
}

/* ---- failpoint registry ------------------------------------------------ */

TEST(registry_lists_the_commit_path_names_once_each)
{
	const char *const *names = io_failpoint_names();
	int count = 0, torn = 0;
	for (; names[count]; count++) {
		torn += strcmp(names[count], "publish.torn_write") == 0;
		for (int j = 0; j < count; j++)
			CHECK(strcmp(names[j], names[count]) != 0);
		CHECK(strchr(names[count], '.') != NULL);
	}
	CHECK(count >= 10);
	CHECK_EQ(torn, 1);
}

TEST(arming_an_unknown_name_is_refused)
{
	CHECK_EQ(io_failpoint_arm("publish.no_such_point", IO_FAILPOINT_ERROR), -EINVAL);
	CHECK_EQ(io_failpoint_arm(NULL, IO_FAILPOINT_ERROR), -EINVAL);
}

static void hit_unknown(void)
{
	int null = open("/dev/null", O_WRONLY);
	dup2(null, 2);
	io_failpoint("publish.no_such_point");
}

TEST(hitting_an_unknown_name_aborts)
{
	int status = run_in_child(hit_unknown);
	CHECK(WIFSIGNALED(status));
	CHECK_EQ(WTERMSIG(status), SIGABRT);
}

TEST(an_unarmed_failpoint_returns_zero)
{
	CHECK_EQ(io_failpoint("publish.before_write"), 0);
}

TEST(error_action_returns_eio_once)
{
	CHECK_EQ(io_failpoint_arm("publish.before_fsync", IO_FAILPOINT_ERROR), 0);
	CHECK_EQ(io_failpoint("publish.before_write"), 0);
	CHECK_EQ(io_failpoint("publish.before_fsync"), -EIO);
	CHECK_EQ(io_failpoint("publish.before_fsync"), 0);
}

TEST(arming_replaces_the_previous_point)
{
	CHECK_EQ(io_failpoint_arm("publish.before_write", IO_FAILPOINT_ERROR), 0);
	CHECK_EQ(io_failpoint_arm("publish.after_fsync", IO_FAILPOINT_ERROR), 0);
	CHECK_EQ(io_failpoint("publish.before_write"), 0);
	CHECK_EQ(io_failpoint("publish.after_fsync"), -EIO);
}

TEST(arming_off_disarms)
{
	CHECK_EQ(io_failpoint_arm("publish.after_meta", IO_FAILPOINT_ERROR), 0);
	CHECK_EQ(io_failpoint_arm("publish.after_meta", IO_FAILPOINT_OFF), 0);
	CHECK_EQ(io_failpoint("publish.after_meta"), 0);
}

TEST(armed_reports_without_hitting)
{
	CHECK(!io_failpoint_armed("publish.torn_write"));
	CHECK_EQ(io_failpoint_arm("publish.torn_write", IO_FAILPOINT_ERROR), 0);
	CHECK(io_failpoint_armed("publish.torn_write"));
	CHECK(!io_failpoint_armed("publish.before_write"));
	CHECK(io_failpoint_armed("publish.torn_write"));
	CHECK_EQ(io_failpoint("publish.torn_write"), -EIO);
	CHECK(!io_failpoint_armed("publish.torn_write"));
}

static void crash_at_torn_write(void)
{
	io_failpoint_arm("publish.torn_write", IO_FAILPOINT_CRASH);
	io_failpoint("publish.torn_write");
	_exit(0); /* not reached if the crash works */
}

TEST(crash_action_exits_86)
{
	int status = run_in_child(crash_at_torn_write);
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), IO_FAILPOINT_EXIT_CODE);
}

TEST(environment_arms_a_crash_by_default)
{
	int status = run_hit_with_environment("publish.before_write", "publish.before_write");
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), IO_FAILPOINT_EXIT_CODE);
	status = run_hit_with_environment("publish.before_write=crash", "publish.before_write");
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), IO_FAILPOINT_EXIT_CODE);
}

TEST(environment_arms_an_error)
{
	int status = run_hit_with_environment("segment.after_fsync=error", "segment.after_fsync");
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), 5); /* --hit mode exits 5 on -EIO */
}

TEST(environment_armed_point_does_not_fire_elsewhere)
{
	int status = run_hit_with_environment("segment.after_fsync", "publish.before_write");
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), 0);
}

TEST(environment_with_an_unknown_name_aborts)
{
	int status = run_hit_with_environment("publish.nonsense", "publish.before_write");
	CHECK(WIFSIGNALED(status));
	CHECK_EQ(WTERMSIG(status), SIGABRT);
}

TEST(environment_with_an_unknown_action_aborts)
{
	int status = run_hit_with_environment("publish.before_write=explode", "publish.before_write");
	CHECK(WIFSIGNALED(status));
	CHECK_EQ(WTERMSIG(status), SIGABRT);
}

/* ---- counters ---------------------------------------------------------- */

TEST(writes_count_calls_and_bytes_in_the_file_class)
{
	int directory = open_store();
	struct io_file file;
	CHECK_EQ(io_file_open(directory, "manifest", O_RDWR | O_CREAT, IO_MANIFEST, &file), 0);
	char bytes[1000] = { 0 };
	io_counters_reset();
	CHECK_EQ(io_pwrite(&file, bytes, sizeof bytes, 0), 0);
	CHECK_EQ(io_pwrite(&file, bytes, 10, 5000), 0);
	CHECK_EQ(io_fsync(&file), 0);
	struct io_counters manifest, data;
	io_counters_get(IO_MANIFEST, &manifest);
	io_counters_get(IO_DATA, &data);
	CHECK_EQ(manifest.writes, 2);
	CHECK_EQ(manifest.bytes_written, 1010);
	CHECK_EQ(manifest.fsyncs, 1);
	CHECK_EQ(manifest.reads, 0);
	CHECK_EQ(data.writes, 0);
	CHECK_EQ(data.bytes_written, 0);
	CHECK_EQ(data.fsyncs, 0);
	io_file_close(&file);
	close(directory);
}

TEST(reads_count_calls_but_not_bytes)
{
	int directory = open_store();
	struct io_file file;
	CHECK_EQ(io_file_open(directory, "data", O_RDWR | O_CREAT, IO_DATA, &file), 0);
	char bytes[8192] = { 1 };
	CHECK_EQ(io_pwrite(&file, bytes, sizeof bytes, 0), 0);
	io_counters_reset();
	CHECK_EQ(io_pread(&file, bytes, 4096, 0), 0);
	CHECK_EQ(io_pread_some(&file, bytes, 8192, 4096), 4096);
	CHECK_EQ(io_pread_some(&file, bytes, 100, 8192), 0); /* end of file: no data, no read */
	struct io_counters data;
	io_counters_get(IO_DATA, &data);
	CHECK_EQ(data.reads, 2);
	CHECK_EQ(data.bytes, 0);
	CHECK_EQ(data.pages, 0);
	io_file_close(&file);
	close(directory);
}

TEST(blocks_and_rows_are_counted_as_reported)
{
	io_counters_reset();
	io_count_block(IO_MANIFEST, 24 + 100);
	io_count_block(IO_MANIFEST, 24 + 7);
	io_count_rows(IO_MANIFEST, 12);
	io_count_rows(IO_DATA, 3);
	struct io_counters manifest, data;
	io_counters_get(IO_MANIFEST, &manifest);
	io_counters_get(IO_DATA, &data);
	CHECK_EQ(manifest.pages, 2);
	CHECK_EQ(manifest.bytes, 155);
	CHECK_EQ(manifest.rows_decoded, 12);
	CHECK_EQ(data.pages, 0);
	CHECK_EQ(data.rows_decoded, 3);
}

TEST(reset_zeroes_every_counter)
{
	io_count_block(IO_DATA, 10);
	io_count_rows(IO_MANIFEST, 10);
	io_counters_reset();
	for (int class = 0; class < IO_CLASS_COUNT; class++) {
		struct io_counters counters;
		io_counters_get((enum io_class)class, &counters);
		CHECK_EQ(counters.reads + counters.bytes + counters.pages + counters.rows_decoded +
				 counters.writes + counters.bytes_written + counters.fsyncs,
			 0);
	}
}

static void *count_many_blocks(void *unused)
{
	for (int i = 0; i < 100000; i++)
		io_count_block(IO_DATA, 3);
	return unused;
}

TEST(counters_are_exact_under_concurrency)
{
	io_counters_reset();
	pthread_t threads[4];
	for (int i = 0; i < 4; i++)
		CHECK_EQ(pthread_create(&threads[i], NULL, count_many_blocks, NULL), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(threads[i], NULL);
	struct io_counters data;
	io_counters_get(IO_DATA, &data);
	CHECK_EQ(data.pages, 400000);
	CHECK_EQ(data.bytes, 1200000);
}

/* ---- files ------------------------------------------------------------- */

TEST(a_short_read_is_eio)
{
	int directory = open_store();
	struct io_file file;
	CHECK_EQ(io_file_open(directory, "f", O_RDWR | O_CREAT, IO_DATA, &file), 0);
	CHECK_EQ(io_pwrite(&file, "abc", 3, 0), 0);
	char out[10];
	CHECK_EQ(io_pread(&file, out, 10, 0), -EIO);
	CHECK_EQ(io_pread(&file, out, 1, 100), -EIO);
	CHECK_EQ(io_pread(&file, out, 3, 0), 0);
	CHECK(memcmp(out, "abc", 3) == 0);
	io_file_close(&file);
	CHECK_EQ(file.descriptor, -1);
	close(directory);
}

TEST(a_symlinked_file_is_refused)
{
	int directory = open_store();
	struct io_file file;
	CHECK_EQ(io_file_open(directory, "target", O_RDWR | O_CREAT, IO_DATA, &file), 0);
	io_file_close(&file);
	CHECK_EQ(symlinkat("target", directory, "manifest"), 0);
	CHECK_EQ(io_file_open(directory, "manifest", O_RDONLY, IO_MANIFEST, &file), -ELOOP);
	CHECK_EQ(file.descriptor, -1);
	CHECK_EQ(io_file_open(directory, "manifest", O_RDWR | O_CREAT, IO_MANIFEST, &file), -ELOOP);
	close(directory);
}

TEST(a_symlinked_subdirectory_is_refused)
{
	int directory = open_store();
	CHECK_EQ(io_directory_make(directory, "elsewhere"), 0);
	CHECK_EQ(symlinkat("elsewhere", directory, "segments"), 0);
	struct io_file file;
	int rc = io_file_open(directory, "segments/0000000000000001", O_RDWR | O_CREAT, IO_DATA, &file);
	CHECK(rc == -ENOTDIR || rc == -ELOOP);
	CHECK_EQ(io_directory_list(directory, "segments", NULL, NULL) < 0, 1);
	struct stat status;
	CHECK(fstatat(directory, "elsewhere/0000000000000001", &status, 0) < 0);
	close(directory);
}

TEST(a_symlinked_store_directory_is_refused)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/link", harness_temp_directory());
	CHECK_EQ(symlink(".", path), 0);
	CHECK_EQ(io_directory_open(path), -ENOTDIR);
}

TEST(a_subdirectory_opens_relative_without_following_symlinks)
{
	int directory = open_store();
	CHECK_EQ(io_directory_make(directory, "segments"), 0);
	int segments = io_directory_open_at(directory, "segments");
	CHECK(segments >= 0);
	CHECK_EQ(io_directory_sync(segments), 0);
	close(segments);
	CHECK_EQ(symlinkat("segments", directory, "link"), 0);
	int rc = io_directory_open_at(directory, "link");
	CHECK(rc == -ENOTDIR || rc == -ELOOP);
	CHECK_EQ(io_directory_open_at(directory, ".."), -EINVAL);
	CHECK_EQ(io_directory_open_at(directory, "missing"), -ENOENT);
	close(directory);
}

TEST(files_are_created_0600_and_directories_0700)
{
	mode_t old_mask = umask(0);
	int directory = open_store();
	struct io_file file;
	int rc = io_file_open(directory, "manifest", O_RDWR | O_CREAT | O_EXCL, IO_MANIFEST, &file);
	int made = io_directory_make(directory, "segments");
	umask(old_mask);
	CHECK_EQ(rc, 0);
	CHECK_EQ(made, 0);
	struct stat status;
	CHECK_EQ(fstat(file.descriptor, &status), 0);
	CHECK_EQ(status.st_mode & 07777, 0600);
	CHECK_EQ(fstatat(directory, "segments", &status, 0), 0);
	CHECK_EQ(status.st_mode & 07777, 0700);
	CHECK_EQ(io_directory_make(directory, "segments"), -EEXIST);
	io_file_close(&file);
	close(directory);
}

TEST(close_on_exec_is_set)
{
	int directory = open_store();
	struct io_file file;
	CHECK_EQ(io_file_open(directory, "f", O_RDWR | O_CREAT, IO_DATA, &file), 0);
	CHECK(fcntl(file.descriptor, F_GETFD) & FD_CLOEXEC);
	CHECK(fcntl(directory, F_GETFD) & FD_CLOEXEC);
	io_file_close(&file);
	close(directory);
}

TEST(one_subdirectory_level_is_allowed)
{
	int directory = open_store();
	CHECK_EQ(io_directory_make(directory, "segments"), 0);
	struct io_file file;
	CHECK_EQ(io_file_open(directory, "segments/00000000000000ab", O_RDWR | O_CREAT | O_EXCL, IO_DATA,
			      &file),
		 0);
	io_file_close(&file);
	struct stat status;
	CHECK_EQ(fstatat(directory, "segments/00000000000000ab", &status, 0), 0);
	CHECK_EQ(io_file_open(directory, "segments/00000000000000ab", O_RDWR | O_CREAT | O_EXCL, IO_DATA,
			      &file),
		 -EEXIST);
	close(directory);
}

TEST(escaping_or_deep_names_are_refused)
{
	int directory = open_store();
	CHECK_EQ(io_directory_make(directory, "segments"), 0);
	struct io_file file;
	const char *bad[] = { "", ".", "..", "/etc/passwd", "segments/../x", "../x", "segments/",
			      "a/b/c", "segments//x", "./x" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CHECK_EQ(io_file_open(directory, bad[i], O_RDWR | O_CREAT, IO_DATA, &file), -EINVAL);
	CHECK_EQ(io_directory_make(directory, ".."), -EINVAL);
	CHECK_EQ(io_directory_make(directory, "a/b"), -EINVAL);
	CHECK_EQ(io_unlink(directory, "../x"), -EINVAL);
	close(directory);
}

TEST(size_truncate_rename_and_unlink)
{
	int directory = open_store();
	CHECK_EQ(io_directory_make(directory, "recovery"), 0);
	struct io_file file;
	CHECK_EQ(io_file_open(directory, "recovery/a.tmp", O_RDWR | O_CREAT, IO_MANIFEST, &file), 0);
	CHECK_EQ(io_pwrite(&file, "0123456789", 10, 0), 0);
	uint64_t size = 0;
	CHECK_EQ(io_size(&file, &size), 0);
	CHECK_EQ(size, 10);
	CHECK_EQ(io_truncate(&file, 4), 0);
	CHECK_EQ(io_size(&file, &size), 0);
	CHECK_EQ(size, 4);
	io_file_close(&file);
	CHECK_EQ(io_rename(directory, "recovery/a.tmp", "recovery/a"), 0);
	CHECK_EQ(io_directory_sync(directory), 0);
	CHECK_EQ(io_file_open(directory, "recovery/a", O_RDONLY, IO_MANIFEST, &file), 0);
	io_file_close(&file);
	CHECK_EQ(io_unlink(directory, "recovery/a"), 0);
	CHECK_EQ(io_unlink(directory, "recovery/a"), -ENOENT);
	CHECK_EQ(io_file_open(directory, "recovery/a", O_RDONLY, IO_MANIFEST, &file), -ENOENT);
	close(directory);
}

TEST(an_exclusive_lock_excludes_other_holders)
{
	int directory = open_store();
	struct io_file first, second;
	CHECK_EQ(io_file_open(directory, "lock", O_RDWR | O_CREAT, IO_MANIFEST, &first), 0);
	CHECK_EQ(io_file_open(directory, "lock", O_RDWR, IO_MANIFEST, &second), 0);
	CHECK_EQ(io_lock(&first, true, false), 0);
	CHECK_EQ(io_lock(&second, true, false), -EWOULDBLOCK);
	CHECK_EQ(io_lock(&second, false, false), -EWOULDBLOCK);
	CHECK_EQ(io_unlock(&first), 0);
	CHECK_EQ(io_lock(&second, true, true), 0);
	CHECK_EQ(io_unlock(&second), 0);
	io_file_close(&first);
	io_file_close(&second);
	close(directory);
}

TEST(shared_locks_coexist)
{
	int directory = open_store();
	struct io_file first, second;
	CHECK_EQ(io_file_open(directory, "lock", O_RDWR | O_CREAT, IO_MANIFEST, &first), 0);
	CHECK_EQ(io_file_open(directory, "lock", O_RDWR, IO_MANIFEST, &second), 0);
	CHECK_EQ(io_lock(&first, false, false), 0);
	CHECK_EQ(io_lock(&second, false, false), 0);
	CHECK_EQ(io_lock(&second, true, false), -EWOULDBLOCK);
	io_file_close(&first);
	io_file_close(&second);
	close(directory);
}

struct listing {
	int count;
	int stop_after;
	char seen[8][32];
};

static int remember(const char *name, void *context)
{
	struct listing *listing = context;
	snprintf(listing->seen[listing->count % 8], 32, "%s", name);
	listing->count++;
	return listing->count == listing->stop_after ? 7 : 0;
}

TEST(directory_list_visits_every_entry_and_stops_on_request)
{
	int directory = open_store();
	CHECK_EQ(io_directory_make(directory, "recovery"), 0);
	for (int i = 0; i < 3; i++) {
		char name[32];
		struct io_file file;
		snprintf(name, sizeof name, "recovery/%d", i);
		CHECK_EQ(io_file_open(directory, name, O_RDWR | O_CREAT, IO_MANIFEST, &file), 0);
		io_file_close(&file);
	}
	struct listing listing = { 0, 0, { { 0 } } };
	CHECK_EQ(io_directory_list(directory, "recovery", remember, &listing), 0);
	CHECK_EQ(listing.count, 3);
	for (int i = 0; i < 3; i++)
		CHECK(strcmp(listing.seen[i], ".") != 0 && strcmp(listing.seen[i], "..") != 0);
	struct listing stopping = { 0, 2, { { 0 } } };
	CHECK_EQ(io_directory_list(directory, "recovery", remember, &stopping), 7);
	CHECK_EQ(stopping.count, 2);
	struct listing top = { 0, 0, { { 0 } } };
	CHECK_EQ(io_directory_list(directory, NULL, remember, &top), 0);
	CHECK_EQ(top.count, 1);
	CHECK_EQ(io_directory_list(directory, "segments", remember, &top), -ENOENT);
	close(directory);
}

TEST(a_scratch_file_reads_back_what_was_written_and_has_no_name)
{
	int directory = open_store();
	CHECK_EQ(io_directory_make(directory, "segments"), 0);
	struct io_file file;
	CHECK_EQ(io_scratch_open(directory, "segments", IO_DATA, &file), 0);
	CHECK_EQ(io_pwrite(&file, "sorted runs", 11, 4096), 0);
	char back[12] = { 0 };
	CHECK_EQ(io_pread(&file, back, 11, 4096), 0);
	CHECK(memcmp(back, "sorted runs", 11) == 0);
	struct listing listing = { 0, 0, { { 0 } } };
	CHECK_EQ(io_directory_list(directory, "segments", remember, &listing), 0);
	CHECK_EQ(listing.count, 0);
	io_file_close(&file);
	CHECK_EQ(io_directory_list(directory, "segments", remember, &listing), 0);
	CHECK_EQ(listing.count, 0);
	close(directory);
}

/* ---- wake-up words -------------------------------------------------------- */

static double seconds_now(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

static int open_wake_page(int directory, struct io_file *file, struct io_wake_page *page)
{
	int rc = io_file_open(directory, "lock", O_RDWR | O_CREAT, IO_MANIFEST, file);
	if (rc == 0)
		rc = io_wake_page_map(file, page);
	return rc;
}

static void close_wake_page(int directory, struct io_file *file, struct io_wake_page *page)
{
	io_wake_page_unmap(page);
	io_file_close(file);
	close(directory);
}

TEST(the_wake_page_extends_an_empty_lock_file_to_one_page_of_zeros)
{
	int directory = open_store();
	struct io_file file;
	struct io_wake_page page;
	CHECK_EQ(open_wake_page(directory, &file, &page), 0);
	CHECK(page.words != NULL);
	uint64_t size = 0;
	CHECK_EQ(io_size(&file, &size), 0);
	CHECK_EQ(size, 4096);
	CHECK_EQ(io_wake_read(&page, IO_WAKE_STORE_LOCK), 0);
	CHECK_EQ(io_wake_read(&page, IO_WAKE_DURABLE), 0);
	close_wake_page(directory, &file, &page);
}

TEST(a_sleeper_is_woken_by_another_process_long_before_its_pause_ends)
{
	int directory = open_store();
	struct io_file file;
	struct io_wake_page page;
	CHECK_EQ(open_wake_page(directory, &file, &page), 0);
	uint32_t seen = io_wake_read(&page, IO_WAKE_DURABLE);
	io_wake_waiting(&page, IO_WAKE_DURABLE, true);
	fflush(NULL);
	pid_t child = fork();
	if (child == 0) {
		/* another process, its own descriptor and mapping of the same file */
		struct io_file other;
		struct io_wake_page other_page;
		if (open_wake_page(directory, &other, &other_page) != 0)
			_exit(1);
		usleep(50000);
		io_wake_all(&other_page, IO_WAKE_DURABLE);
		_exit(0);
	}
	double started = seconds_now();
	while (io_wake_read(&page, IO_WAKE_DURABLE) == seen && seconds_now() - started < 60)
		io_wake_sleep(&page, IO_WAKE_DURABLE, seen, 60u * 1000000u);
	double slept = seconds_now() - started;
	io_wake_waiting(&page, IO_WAKE_DURABLE, false);
	int status = 0;
	waitpid(child, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_EQ(io_wake_read(&page, IO_WAKE_DURABLE), seen + 1);
	CHECK(slept < 30);   /* woken, not timed out (the pause was 60 s) */
	close_wake_page(directory, &file, &page);
}

TEST(a_sleeper_whose_word_moved_before_it_slept_returns_at_once_and_nobody_wakes_it_ends_at_its_pause)
{
	int directory = open_store();
	struct io_file file;
	struct io_wake_page page;
	CHECK_EQ(open_wake_page(directory, &file, &page), 0);
	uint32_t seen = io_wake_read(&page, IO_WAKE_STORE_LOCK);
	io_wake_all(&page, IO_WAKE_STORE_LOCK);   /* the state changed between the reading and the sleep */
	double started = seconds_now();
	io_wake_sleep(&page, IO_WAKE_STORE_LOCK, seen, 60u * 1000000u);
	CHECK(seconds_now() - started < 30);
	started = seconds_now();
	io_wake_sleep(&page, IO_WAKE_STORE_LOCK, seen + 1, 20000);   /* nobody wakes: the pause ends it */
	CHECK(seconds_now() - started >= 0.015);
	close_wake_page(directory, &file, &page);
}

TEST(the_record_reads_back_whole_and_not_while_a_dead_writer_left_it_half_written)
{
	int directory = open_store();
	struct io_file file;
	struct io_wake_page page, other;
	CHECK_EQ(open_wake_page(directory, &file, &page), 0);
	CHECK_EQ(io_wake_page_map(&file, &other), 0);   /* a second mapping: what another process sees */
	uint8_t written[48], read_back[48];
	CHECK(!io_wake_record_read(&other, read_back, sizeof read_back));   /* never written */
	for (size_t i = 0; i < sizeof written; i++)
		written[i] = (uint8_t)(i * 7 + 1);
	io_wake_record_write(&page, written, sizeof written);
	CHECK(io_wake_record_read(&other, read_back, sizeof read_back));
	CHECK_EQ(memcmp(written, read_back, sizeof written), 0);
	/* a writer that died between its two sequence increments */
	page.words[16]++;
	CHECK(!io_wake_record_read(&other, read_back, sizeof read_back));
	written[0] = 99;
	io_wake_record_write(&page, written, sizeof written);   /* the next writer mends it */
	CHECK(io_wake_record_read(&other, read_back, sizeof read_back));
	CHECK_EQ(read_back[0], 99);
	io_wake_page_unmap(&other);
	close_wake_page(directory, &file, &page);
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--hit") == 0)
		return io_failpoint(argv[2]) == -EIO ? 5 : 0;
	return harness_run();
}

TEST(a_file_created_locked_is_locked_before_its_name_appears_and_refuses_an_existing_name)
{
	int directory = io_directory_open(harness_temp_directory());
	CHECK(directory >= 0);
	struct io_file created, other;
	CHECK_EQ(io_file_create_locked(directory, "locked.tmp", IO_MANIFEST, &created), 0);
	/* whoever opens the name finds it locked (recovery would leave it alone) */
	CHECK_EQ(io_file_open(directory, "locked.tmp", O_RDWR, IO_MANIFEST, &other), 0);
	CHECK_EQ(io_lock(&other, true, false), -EWOULDBLOCK);
	io_file_close(&other);
	struct io_file again;
	CHECK_EQ(io_file_create_locked(directory, "locked.tmp", IO_MANIFEST, &again), -EEXIST);
	io_file_close(&created);
	CHECK_EQ(io_unlink(directory, "locked.tmp"), 0);
	close(directory);
}
