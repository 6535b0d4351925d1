/*
 * fuse_ops — internals of fuse/: the operations table (ops.c) the daemon
 * (daemon.c) serves. Not included outside fuse/.
 */
#ifndef GRAPHFS_FUSE_OPS_H
#define GRAPHFS_FUSE_OPS_H

#define FUSE_USE_VERSION 314

#include <fuse_lowlevel.h>

#include "mountfs.h"

/* Requests are answered by the struct mountfs given as the session's userdata. */
extern const struct fuse_lowlevel_ops graphfs_operations;

#endif
