/*
 * reads — which version of a table each process last read through this
 * mount: the base of its O_TRUNC write-back (docs/MOUNT.md "Based writes").
 *
 * A process is its pid and start time (/proc/<pid>/stat), so a pid the kernel
 * reuses is a new process without a base. Only opens are noted, never each
 * read(2).
 *
 * Invariants:
 *   1. At most READS_KEPT records; the least recently noted goes first.
 *   2. A record names a live table file of a branch (tables/<Name>.jsonl).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mountfs_int.h"

/* The start time of pid (clock ticks since boot; field 22 of /proc/<pid>/stat); 0 if unknown. */
static unsigned long long process_start(pid_t pid)
{
	char path[64], text[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *file = fopen(path, "re");
	if (!file)
		return 0;
	size_t size = fread(text, 1, sizeof text - 1, file);
	fclose(file);
	text[size] = '\0';
	const char *after = strrchr(text, ')');   /* the command name may hold spaces and ')' */
	unsigned long long started = 0;
	if (after && sscanf(after + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
			    &started) != 1)
		started = 0;
	return started;
}

static struct read_record *find(struct mountfs *mount, pid_t pid, unsigned long long started, const char *branch,
				const char *table)
{
	for (size_t i = 0; i < READS_KEPT; i++) {
		struct read_record *record = &mount->reads[i];
		if (record->pid == pid && record->started == started && strcmp(record->table, table) == 0 &&
		    strcmp(record->branch, branch) == 0)
			return record;
	}
	return NULL;
}

void reads_note(struct mountfs *mount, pid_t pid, const char *branch, const char *table, uint64_t version)
{
	unsigned long long started = process_start(pid);
	if (!started)
		return;
	pthread_mutex_lock(&mount->reads_lock);
	struct read_record *record = find(mount, pid, started, branch, table);
	if (!record) {
		record = &mount->reads[0];
		for (size_t i = 1; i < READS_KEPT; i++)
			if (mount->reads[i].used < record->used)
				record = &mount->reads[i];
		record->pid = pid;
		record->started = started;
		snprintf(record->branch, sizeof record->branch, "%s", branch);
		snprintf(record->table, sizeof record->table, "%s", table);
	}
	record->version = version;
	record->used = ++mount->reads_clock;
	pthread_mutex_unlock(&mount->reads_lock);
}

uint64_t reads_base(struct mountfs *mount, pid_t pid, const char *branch, const char *table)
{
	unsigned long long started = process_start(pid);
	if (!started)
		return 0;
	pthread_mutex_lock(&mount->reads_lock);
	const struct read_record *record = find(mount, pid, started, branch, table);
	uint64_t version = record ? record->version : 0;
	pthread_mutex_unlock(&mount->reads_lock);
	return version;
}
