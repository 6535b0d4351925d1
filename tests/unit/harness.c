/* harness — see harness.h. */
#include "harness.h"

#include <ftw.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HARNESS_MAX_TESTS 512

struct harness_test {
	const char *name;
	harness_test_fn fn;
};

static struct harness_test tests[HARNESS_MAX_TESTS];
static int test_count;
static int current_failed;
static char current_directory[4096];

void harness_register(const char *name, harness_test_fn fn)
{
	if (test_count < HARNESS_MAX_TESTS)
		tests[test_count++] = (struct harness_test){ name, fn };
}

void harness_fail(const char *file, int line, const char *expression)
{
	fprintf(stderr, "    %s:%d: CHECK failed: %s\n", file, line, expression);
	current_failed = 1;
}

int harness_failed(void)
{
	return current_failed;
}

static int remove_entry(const char *path, const struct stat *status, int flag, struct FTW *walk)
{
	(void)status;
	(void)flag;
	(void)walk;
	return remove(path);
}

const char *harness_temp_directory(void)
{
	if (current_directory[0])
		return current_directory;
	const char *base = getenv("TMPDIR");
	snprintf(current_directory, sizeof current_directory, "%s/graphfs-unit-XXXXXX",
		 base && *base ? base : "/tmp");
	if (!mkdtemp(current_directory)) {
		perror("mkdtemp");
		abort();
	}
	return current_directory;
}

int harness_run(void)
{
	int failures = 0;
	const char *only = getenv("HARNESS_ONLY");
	for (int i = 0; i < test_count; i++) {
		if (only && *only && !strstr(tests[i].name, only))
			continue;
		current_failed = 0;
		current_directory[0] = 0;
		struct timespec start, end;
		clock_gettime(CLOCK_MONOTONIC, &start);
		tests[i].fn();
		clock_gettime(CLOCK_MONOTONIC, &end);
		double seconds = (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) / 1e9;
		printf("%s %s (%.2f s)\n", current_failed ? "FAIL" : "ok  ", tests[i].name, seconds);
		fflush(stdout);
		if (current_failed)
			failures++;
		else if (current_directory[0])
			nftw(current_directory, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	}
	printf("%d tests, %d failed\n", test_count, failures);
	return failures ? 1 : 0;
}
