/*
 * cmd_schema — `graphfs schema STORE TABLE [--branch B] [--at V]` prints a
 * table's schema (the same JSON as the mounted schema/<Name>.json);
 * `graphfs schema STORE TABLE --set FILE [--branch B] [-m MSG]` publishes
 * FILE as TABLE's schema in one commit: it creates TABLE empty, or applies a
 * compatible change (a nullable property appended, a type widened).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
	"usage: graphfs schema STORE TABLE [--branch B] [--at V]\n"
	"       graphfs schema STORE TABLE --set FILE [--branch B] [-m MSG]\n"
	"\n"
	"Prints TABLE's schema (the same JSON as schema/TABLE.json of a mount), or with\n"
	"--set publishes FILE as TABLE's schema in one commit: a new table is created\n"
	"empty; an existing one accepts compatible changes only (a nullable property\n"
	"added at the end, i64 widened to f64, nullable relaxed). A schema file is\n"
	"  {\"kind\":\"node\"|\"edge\", \"from\":\"<Node>\", \"to\":\"<Node>\" (edges),\n"
	"   \"key\":[\"p\",...] (optional), \"properties\":{\"p\":{\"type\":T,\"nullable\":bool}}}\n"
	"with T one of string bool i64 f64 date datetime list<T> vector<N>.\n"
	"\n"
	"  --branch B         the branch (default main)\n"
	"  --at V             print the schema as of version V\n"
	"  --set FILE         publish FILE as the schema\n"
	"  -m, --message MSG  the commit message of --set\n"
	"  --if-version V     --set publishes only if the store is still at version V\n"
	"  --if-commit ULID   --set publishes only if the branch's head is still commit ULID\n";

/* Reads a whole file into out (NUL-terminated); 0 or -errno. */
static int read_file(const char *file, struct buf *out)
{
	FILE *input = fopen(file, "rb");
	if (!input)
		return -errno;
	int rc = 0;
	char chunk[65536];
	size_t got;
	while ((got = fread(chunk, 1, sizeof chunk, input)) > 0)
		if ((rc = buf_append(out, chunk, got)) < 0)
			break;
	if (rc == 0 && ferror(input))
		rc = -EIO;
	fclose(input);
	return rc;
}

static int print_schema(struct store *store, const char *table, const char *branch, uint64_t version)
{
	struct store_snapshot *snapshot;
	int status = cli_snapshot_open(store, branch, version, &snapshot);
	if (status != 0)
		return status;
	struct buf json;
	buf_init(&json);
	int rc = store_snapshot_schema(snapshot, table, &json);
	if (rc == -ENOENT)
		status = cli_fail("there is no table '%s' on branch '%s'", table, branch);
	else if (rc < 0)
		status = cli_fail_error(rc, NULL, "cannot read the schema of %s", table);
	else
		fwrite(json.data, 1, json.size, stdout);
	buf_free(&json);
	store_snapshot_release(snapshot);
	return status;
}

static int set_schema(struct store *store, const char *table, const char *branch, const char *file,
		      const char *message, const struct store_condition *condition)
{
	struct buf json;
	buf_init(&json);
	int rc = read_file(file, &json);
	if (rc < 0) {
		buf_free(&json);
		return cli_fail("cannot read %s: %s", file, strerror(-rc));
	}
	char default_message[512];
	if (!message) {
		snprintf(default_message, sizeof default_message, "schema of %s from %s", table, file);
		message = default_message;
	}

	int status = CLI_EXIT_OK;
	struct error_info error;
	error_info_clear(&error);
	struct store_txn *txn = NULL;
	struct store_commit_result result;
	rc = store_txn_begin(store, branch, &txn, &error);
	if (rc < 0) {
		if (rc == -ENOENT && error.message[0] == '\0')
			status = cli_fail("there is no branch '%s'", branch);
		else
			status = cli_fail_error(rc, &error, "cannot write to branch '%s'", branch);
		goto out;
	}
	store_txn_set_condition(txn, condition);
	rc = store_txn_schema(txn, table, (const char *)json.data, json.size, &error);
	if (rc == 0)
		rc = store_txn_commit(txn, message, &result, &error);
	if (rc < 0) {
		if (error.path[0] == '\0')
			error_info_locate(&error, file, error.line);
		status = cli_fail_error(rc, &error, "cannot set the schema of %s", table);
		goto out;
	}
	printf("%s: committed version %llu (commit %s) on %s\n", table,
	       (unsigned long long)result.version, result.commit, branch);
out:
	if (txn)
		store_txn_free(txn);
	buf_free(&json);
	return status;
}

int cmd_schema(int argc, char **argv)
{
	const char *branch = "main";
	const char *at = NULL;
	const char *file = NULL;
	const char *message = NULL, *if_version = NULL, *if_commit = NULL;
	const struct cli_option options[] = {
		{ "branch", 0, &branch, NULL },
		{ "at", 0, &at, NULL },
		{ "set", 0, &file, NULL },
		{ "message", 'm', &message, NULL },
		{ "if-version", 0, &if_version, NULL },
		{ "if-commit", 0, &if_commit, NULL },
	};
	const struct cli_syntax syntax = { usage, options, sizeof options / sizeof options[0], 2, 2 };
	char **arguments;
	int status = cli_parse(argc, argv, &syntax, &arguments, NULL);
	if (status >= 0)
		return status;
	if (file && at)
		return cli_usage_error(argv[0], "--at reads history; it cannot be combined with --set");
	if ((message || if_version || if_commit) && !file)
		return cli_usage_error(argv[0], "-m, --if-version and --if-commit apply to --set");
	struct store_condition condition;
	if ((status = cli_condition_parse(argv[0], if_version, if_commit, &condition)) != 0)
		return status;

	struct store *store;
	if ((status = cli_store_open(arguments[0], file == NULL, &store)) != 0)
		return status;
	uint64_t version = STORE_LATEST;
	if (file)
		status = set_schema(store, arguments[1], branch, file, message, &condition);
	else if ((status = cli_resolve_at(argv[0], store, at, &branch, &version)) == 0)
		status = print_schema(store, arguments[1], branch, version);
	store_close(store);
	return status;
}
