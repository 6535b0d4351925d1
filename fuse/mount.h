/*
 * mount — the `graphfs mount` subcommand: the FUSE daemon (fuse/daemon.c).
 */
#ifndef GRAPHFS_MOUNT_H
#define GRAPHFS_MOUNT_H

/* Parses the arguments, mounts, serves until unmounted. Returns the exit status. */
int graphfs_mount_main(int argc, char **argv);

#endif
