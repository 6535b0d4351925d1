/*
 * cmd_verify — `graphfs verify STORE`: offline check of everything
 * (checksums of every file, heads against a replay of the journal,
 * reachability, recovery sidecars). Opens the store read-only, so it never
 * changes what it checks. Prints each finding as one line on stdout and exits
 * 1 if there is any; a store that cannot be opened is a finding too.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

static const char usage[] =
	"usage: graphfs verify STORE\n"
	"\n"
	"Checks the whole store without changing it: every checksum of every file,\n"
	"every branch's heads against a replay of its journal, reachability and\n"
	"recovery sidecars. Prints one line per finding and exits 1 if there is any,\n"
	"0 when the store is clean.\n";

struct printed {
	unsigned long count;
	struct cli_progress progress;   /* cleared from the terminal before a finding */
};

static void print_finding(const char *finding, void *context)
{
	struct printed *printed = context;
	printed->count++;
	cli_progress_clear(&printed->progress);
	for (const char *p = finding; *p; p++)
		putchar(*p == '\n' || *p == '\r' ? ' ' : *p);
	putchar('\n');
}

/* Verifies the store at path, printing each finding; the exit status. */
static int verify(struct store *store, const char *path)
{
	struct printed printed = { 0 };
	fflush(stdout);
	cli_progress_begin_counting(&printed.progress, "verify", "passes", 5);
	int findings = store_verify_progress(store, print_finding, &printed, cli_progress_update, &printed.progress);
	cli_progress_end(&printed.progress, findings >= 0, 5);
	unsigned long printed_count = printed.count;
	if (findings < 0)
		return cli_fail_error(findings, NULL, "cannot verify %s", path);
	if (findings > 0 || printed_count > 0)
		return cli_fail("%s: %d finding%s (if heads disagree with the journal, "
				"'graphfs repair %s' rebuilds them)",
				path, findings > 0 ? findings : (int)printed_count,
				findings == 1 ? "" : "s", path);
	printf("%s: clean (version %llu)\n", path, (unsigned long long)store_version(store));
	return CLI_EXIT_OK;
}

int cmd_verify(int argc, char **argv)
{
	/* of a store in an object store, what the object store holds: never this host's cache of
	 * it, which keeps the pieces as they were created or first read (docs/FORMAT.md §23) */
	setenv("GRAPHFS_CACHE_BYTES", "0", 1);
	return cli_run_on_store(argc, argv, usage, true, verify);
}
