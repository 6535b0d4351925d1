/*
 * store_parse — the lines of a large write parsed on a second thread.
 *
 * A write(2) of many complete lines into a table with a declared schema is
 * split at a line boundary near its middle: the caller's thread parses and
 * stages the first half line by line as always, while the writer's parse
 * helper thread parses the second half into rows (parsing a line depends only
 * on the line and the schema). The caller then stages those rows in order.
 * Staging stays on one thread, in input order, so the stage, the line numbers
 * and every error are exactly those of the sequential path: the first bad
 * line of the write is the one reported, and no row after it is staged.
 *
 * States of a helper (enum parse_state, parse_state_check): IDLE (no job)
 * --store_parse_helper_start--> ASKED (the thread parses) --the thread--> DONE
 * (results ready) --store_parse_helper_finish--> IDLE; free from IDLE or DONE
 * (finish is always called before the caller returns: the bytes are the
 * caller's) --> STOPPING, thread joined.
 *
 * Invariants kept:
 *   1. The helper reads only its job's bytes and the schema, both unchanged
 *      by the caller until finish, and writes only its results.
 *   2. Results are the rows of the job's lines in order, up to and excluding
 *      the first line that failed, whose failure is recorded; no line after
 *      it is parsed.
 */
#include "store_txn_int.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum parse_state { PARSE_IDLE, PARSE_ASKED, PARSE_DONE, PARSE_STOPPING };

struct parse_helper {
	pthread_t thread;
	pthread_mutex_t mutex;
	pthread_cond_t moved;
	enum parse_state state;
	/* the job (invariant 1) */
	const struct schema *schema;
	bool allow_delete;          /* a merge: delete lines parse */
	const char *bytes;          /* complete lines, each ending with "\n" */
	size_t size;
	size_t row_max;
	/* the results (invariant 2) */
	struct parse_result *results;
	size_t capacity;
	size_t count;               /* lines parsed, the failed one included */
};

static void parse_state_check(const struct parse_helper *helper, enum parse_state next)
{
	(void)helper;
	(void)next;
	assert(next == PARSE_STOPPING || (helper->state == PARSE_IDLE && next == PARSE_ASKED) ||
	       (helper->state == PARSE_ASKED && next == PARSE_DONE) ||
	       (helper->state == PARSE_DONE && next == PARSE_IDLE));
}

static void parse_enter(struct parse_helper *helper, enum parse_state next)
{
	parse_state_check(helper, next);
	helper->state = next;
	pthread_cond_broadcast(&helper->moved);
}

/* Room for one more result; false when memory ran out. */
static bool results_grow(struct parse_helper *helper)
{
	if (helper->count < helper->capacity)
		return true;
	size_t capacity = helper->capacity ? helper->capacity * 2 : 1024;
	struct parse_result *grown = realloc(helper->results, capacity * sizeof *grown);
	if (!grown)
		return false;
	for (size_t i = helper->capacity; i < capacity; i++)
		schema_row_init(&grown[i].row);
	helper->results = grown;
	helper->capacity = capacity;
	return true;
}

/* Parses the job's lines into results, stopping after the first that fails. */
static void parse_job(struct parse_helper *helper)
{
	const char *position = helper->bytes, *end = helper->bytes + helper->size;
	helper->count = 0;
	while (position < end) {
		const char *newline = memchr(position, '\n', (size_t)(end - position));
		assert(newline);
		if (!results_grow(helper)) {
			/* the caller parses the rest itself: nothing is lost, only the help */
			break;
		}
		struct parse_result *result = &helper->results[helper->count++];
		result->size = (size_t)(newline - position);
		result->line = position;
		result->rc = 0;
		error_info_clear(&result->error);
		if (result->size > helper->row_max)
			result->rc = -EFBIG;
		else if (result->size == 0)
			result->rc = -ENODATA;
		else
			result->rc = schema_row_parse(helper->schema, position, result->size, helper->allow_delete, &result->row,
						      &result->error);
		if (result->rc < 0)
			break;
		position = newline + 1;
	}
}

static void *parse_thread(void *context)
{
	struct parse_helper *helper = context;
	pthread_mutex_lock(&helper->mutex);
	for (;;) {
		while (helper->state != PARSE_ASKED && helper->state != PARSE_STOPPING)
			pthread_cond_wait(&helper->moved, &helper->mutex);
		if (helper->state == PARSE_STOPPING)
			break;
		pthread_mutex_unlock(&helper->mutex);
		parse_job(helper);
		pthread_mutex_lock(&helper->mutex);
		parse_enter(helper, PARSE_DONE);
	}
	pthread_mutex_unlock(&helper->mutex);
	return NULL;
}

int store_parse_helper_open(struct parse_helper **out)
{
	*out = NULL;
	struct parse_helper *helper = calloc(1, sizeof *helper);
	if (!helper)
		return -ENOMEM;
	pthread_mutex_init(&helper->mutex, NULL);
	pthread_cond_init(&helper->moved, NULL);
	helper->state = PARSE_IDLE;
	if (pthread_create(&helper->thread, NULL, parse_thread, helper) != 0) {
		pthread_cond_destroy(&helper->moved);
		pthread_mutex_destroy(&helper->mutex);
		free(helper);
		return -EAGAIN;
	}
	*out = helper;
	return 0;
}

void store_parse_helper_start(struct parse_helper *helper, const struct schema *schema, bool allow_delete,
			const char *bytes, size_t size, size_t row_max)
{
	pthread_mutex_lock(&helper->mutex);
	helper->schema = schema;
	helper->allow_delete = allow_delete;
	helper->bytes = bytes;
	helper->size = size;
	helper->row_max = row_max;
	parse_enter(helper, PARSE_ASKED);
	pthread_mutex_unlock(&helper->mutex);
}

const struct parse_result *store_parse_helper_finish(struct parse_helper *helper, size_t *count)
{
	pthread_mutex_lock(&helper->mutex);
	while (helper->state != PARSE_DONE)
		pthread_cond_wait(&helper->moved, &helper->mutex);
	parse_enter(helper, PARSE_IDLE);
	*count = helper->count;
	pthread_mutex_unlock(&helper->mutex);
	return helper->results;
}

void store_parse_helper_free(struct parse_helper *helper)
{
	if (!helper)
		return;
	pthread_mutex_lock(&helper->mutex);
	while (helper->state == PARSE_ASKED)
		pthread_cond_wait(&helper->moved, &helper->mutex);
	parse_enter(helper, PARSE_STOPPING);
	pthread_mutex_unlock(&helper->mutex);
	pthread_join(helper->thread, NULL);
	for (size_t i = 0; i < helper->capacity; i++)
		schema_row_free(&helper->results[i].row);
	free(helper->results);
	pthread_cond_destroy(&helper->moved);
	pthread_mutex_destroy(&helper->mutex);
	free(helper);
}
