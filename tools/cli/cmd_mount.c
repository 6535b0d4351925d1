/*
 * cmd_mount — `graphfs mount STORE MOUNTPOINT [-f] [-d] [-o OPTIONS]`: the
 * FUSE daemon lives in fuse/ (see fuse/daemon.c); this is its entry point.
 */
#include "cli.h"
#include "mount.h"

int cmd_mount(int argc, char **argv)
{
	return graphfs_mount_main(argc, argv);
}
