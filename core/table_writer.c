/*
 * table_writer — the spill writer of a stage (layer: table): the thread that
 * compresses and writes a spilled stage's fragments while the stage goes on
 * taking rows, and (table_stage.c invariant 11) adds a streamed overwrite's
 * keys after each fragment. See table_int.h (struct stage_writer).
 *
 * Invariants kept (table_stage.c's 7 and 11 are about this thread):
 *   1. Jobs are taken in submission order, one at a time; only this thread
 *      writes to the segment while it runs, and only it touches writer.keys.
 *   2. A job's buffers belong to the stage's thread again once the job is
 *      completed; at most STAGE_QUEUE_DEPTH jobs wait or are being written.
 *   3. The first error is kept in writer.failure; every later job is skipped
 *      and every later add and the seal report it.
 *
 * States: NOT RUNNING (no thread: fragments are written inline) --start-->
 * RUNNING --stop (after every job completed)--> NOT RUNNING.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "table_int.h"

/* Copies the addresses of completed jobs to their fragments. Called with the writer's lock held. */
static void writer_harvest(struct table_stage *stage)
{
	struct stage_writer *writer = &stage->writer;
	for (; writer->harvested < writer->completed; writer->harvested++) {
		const struct stage_job *job = &writer->jobs[writer->harvested % STAGE_QUEUE_DEPTH];
		stage->fragments[job->fragment].address = job->address;
	}
}

/*
 * Adds the keys of the job's fragment to the streamed key tree (invariant 11):
 * row i of stage fragment f is at sequence f's slot, the rows cut before it
 * (an overwrite's sequences start at 0), and its size is in the payload's table of line sizes. Writer thread
 * only. 0 or -errno (the builder then fails every later add).
 */
static int writer_add_keys(struct table_stage *stage, const struct stage_job *job)
{
	struct stage_writer *writer = &stage->writer;
	int rc;
	if (!writer->keys && (rc = btree_builder_open_segment(stage->segment, BTREE_PACKED, &writer->keys)) < 0)
		return rc;
	const uint8_t *payload = job->payload.data;
	uint32_t rows = buf_load_u32(payload);
	const uint8_t *at = job->keys.data, *end = at + job->keys.size;
	for (uint32_t i = 0; i < rows; i++) {
		if (end - at < 2)
			return -EIO;
		size_t id_size = (size_t)at[0] | (size_t)at[1] << 8;
		if ((size_t)(end - at - 2) < id_size)
			return -EIO;
		struct key_value location = {
			.sequence = job->slot,
			.row_index = i,
			.row_size = buf_load_u32(payload + 4 + 4 * (size_t)i),
		};
		uint8_t value[KEY_VALUE_SIZE];
		table_key_value_encode(&location, value);
		if ((rc = btree_builder_add(writer->keys, at + 2, id_size, value, sizeof value)) < 0)
			return rc;
		at += 2 + id_size;
	}
	return at == end ? 0 : -EIO;
}

static void *writer_main(void *argument)
{
	struct table_stage *stage = argument;
	struct stage_writer *writer = &stage->writer;
	pthread_mutex_lock(&writer->lock);
	for (;;) {
		while (writer->completed == writer->submitted && !writer->stopping)
			pthread_cond_wait(&writer->changed, &writer->lock);
		if (writer->completed == writer->submitted)
			break;
		struct stage_job *job = &writer->jobs[writer->completed % STAGE_QUEUE_DEPTH];
		int failure = writer->failure;
		pthread_mutex_unlock(&writer->lock);
		int rc = failure;
		if (rc == 0)
			rc = pager_segment_block(stage->segment, BLOCK_FRAGMENT, stage->codec,
						 job->payload.data, job->payload.size, &job->address);
		if (rc == 0 && job->keys.size > 0)
			rc = writer_add_keys(stage, job);
		pthread_mutex_lock(&writer->lock);
		if (rc < 0 && writer->failure == 0)
			writer->failure = rc;
		writer->completed++;
		pthread_cond_broadcast(&writer->changed);
	}
	pthread_mutex_unlock(&writer->lock);
	return NULL;
}

void table_writer_start(struct table_stage *stage)
{
	struct stage_writer *writer = &stage->writer;
	if (pthread_mutex_init(&writer->lock, NULL) != 0)
		return;
	if (pthread_cond_init(&writer->changed, NULL) != 0) {
		pthread_mutex_destroy(&writer->lock);
		return;
	}
	if (pthread_create(&writer->thread, NULL, writer_main, stage) != 0) {
		pthread_cond_destroy(&writer->changed);
		pthread_mutex_destroy(&writer->lock);
		return;
	}
	writer->running = true;
}

int table_writer_drain(struct table_stage *stage)
{
	struct stage_writer *writer = &stage->writer;
	if (!writer->running)
		return writer->failure;
	pthread_mutex_lock(&writer->lock);
	while (writer->completed < writer->submitted)
		pthread_cond_wait(&writer->changed, &writer->lock);
	writer_harvest(stage);
	int failure = writer->failure;
	pthread_mutex_unlock(&writer->lock);
	return failure;
}

void table_writer_stop(struct table_stage *stage)
{
	struct stage_writer *writer = &stage->writer;
	if (!writer->running)
		return;
	pthread_mutex_lock(&writer->lock);
	writer->stopping = true;
	pthread_cond_broadcast(&writer->changed);
	pthread_mutex_unlock(&writer->lock);
	pthread_join(writer->thread, NULL);
	writer_harvest(stage);
	writer->running = false;
	pthread_cond_destroy(&writer->changed);
	pthread_mutex_destroy(&writer->lock);
}

struct buf *table_writer_next_payload(struct table_stage *stage)
{
	struct stage_writer *writer = &stage->writer;
	if (!writer->running)
		return &stage->scratch;
	pthread_mutex_lock(&writer->lock);
	while (writer->submitted - writer->completed >= STAGE_QUEUE_DEPTH)
		pthread_cond_wait(&writer->changed, &writer->lock);
	writer_harvest(stage);
	pthread_mutex_unlock(&writer->lock);
	return &writer->jobs[writer->submitted % STAGE_QUEUE_DEPTH].payload;
}

int table_writer_submit(struct table_stage *stage, uint32_t fragment)
{
	struct stage_writer *writer = &stage->writer;
	if (!writer->running) {
		if (writer->failure)
			return writer->failure;
		return pager_segment_block(stage->segment, BLOCK_FRAGMENT, stage->codec, stage->scratch.data,
					   stage->scratch.size, &stage->fragments[fragment].address);
	}
	pthread_mutex_lock(&writer->lock);
	writer->jobs[writer->submitted % STAGE_QUEUE_DEPTH].fragment = fragment;
	writer->jobs[writer->submitted % STAGE_QUEUE_DEPTH].slot = stage->fragments[fragment].slot;
	writer->submitted++;
	pthread_cond_broadcast(&writer->changed);
	pthread_mutex_unlock(&writer->lock);
	return 0;
}
