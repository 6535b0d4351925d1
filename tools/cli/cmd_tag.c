/*
 * cmd_tag — `graphfs tag STORE list | create NAME [--at V] [--branch B]
 * [-m MSG] | delete NAME`: immutable names for versions. A tag names one
 * branch's state as of one version; `--at TAG`, history and the mount's
 * tags/NAME/ read it, and retention never reclaims it (docs/MOUNT.md "Tags").
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
	"usage: graphfs tag STORE list\n"
	"       graphfs tag STORE create NAME [--at V] [--branch B] [-m MSG] [--if-version V] [--if-commit ULID]\n"
	"       graphfs tag STORE delete NAME [--if-version V]\n"
	"\n"
	"list     one JSON line per tag: tag, version, branch, commit, time, actor, message\n"
	"create   names branch B (default main) as of --at V (a version, time or date;\n"
	"         default its head) NAME; a tag never moves (an existing NAME is refused)\n"
	"delete   removes tag NAME (the versions it kept become reclaimable)\n"
	"\n"
	"NAME: a letter or _, then letters, digits, _, - and . (never two dots in a row).\n";

static int print_tag(const struct store_tag_info *tag, void *context)
{
	return cli_lines_write(context, store_tag_render_json(tag, &((struct cli_lines *)context)->line));
}

int cmd_tag(int argc, char **argv)
{
	const char *branch = "main", *at = NULL, *message = NULL, *if_version = NULL, *if_commit = NULL;
	const struct cli_option options[] = {
		{ "branch", 0, &branch, NULL },
		{ "at", 0, &at, NULL },
		{ "message", 'm', &message, NULL },
		{ "if-version", 0, &if_version, NULL },
		{ "if-commit", 0, &if_commit, NULL },
	};
	const struct cli_syntax syntax = { usage, options, sizeof options / sizeof options[0], 2, 3 };
	char **arguments;
	int count;
	int status = cli_parse(argc, argv, &syntax, &arguments, &count);
	if (status >= 0)
		return status;
	const char *path = arguments[0], *action = arguments[1];
	bool listing = strcmp(action, "list") == 0, creating = strcmp(action, "create") == 0;
	if (!listing && !creating && strcmp(action, "delete") != 0)
		return cli_usage_error(argv[0], "unknown action '%s' (list, create or delete)", action);
	if (listing && count != 2)
		return cli_usage_error(argv[0], "list takes no other argument");
	if (!listing && count != 3)
		return cli_usage_error(argv[0], "%s needs the tag NAME", action);
	if (!creating && (at || message || strcmp(branch, "main") != 0))
		return cli_usage_error(argv[0], "--at, --branch and -m apply to create only");
	if ((listing && (if_version || if_commit)) || (!creating && if_commit))
		return cli_usage_error(argv[0], "--if-commit applies to create, --if-version to create and delete");
	struct store_condition condition;
	if ((status = cli_condition_parse(argv[0], if_version, if_commit, &condition)) != 0)
		return status;

	struct store *store;
	if ((status = cli_store_open(path, listing, &store)) != 0)
		return status;
	struct error_info error;
	error_info_clear(&error);
	int rc;
	if (listing) {
		struct cli_lines lines;
		cli_lines_init(&lines);
		rc = cli_lines_finish(&lines, store_tags(store, print_tag, &lines));
		if (rc < 0)
			status = cli_fail("cannot list the tags of %s: %s", path, strerror(-rc));
		status = cli_finish_stdout(status);
	} else if (creating) {
		uint64_t version = STORE_LATEST;
		if ((status = cli_resolve_at(argv[0], store, at, &branch, &version)) == 0) {
			rc = store_tag_create(store, arguments[2], branch, version, message, NULL, &condition, &error);
			struct store_tag_info tag;
			if (rc == 0 && (rc = store_tag_find(store, arguments[2], &tag)) == 0)
				printf("tagged version %llu of %s as %s (commit %s)\n", (unsigned long long)tag.version,
				       tag.branch, tag.name, tag.commit);
			if (rc < 0)
				status = cli_fail_error(rc, &error, "cannot create tag '%s'", arguments[2]);
		}
	} else {
		rc = store_tag_delete(store, arguments[2], &condition, &error);
		if (rc < 0)
			status = cli_fail_error(rc, &error, "cannot delete tag '%s'", arguments[2]);
		else
			printf("deleted tag %s\n", arguments[2]);
	}
	store_close(store);
	return status;
}
