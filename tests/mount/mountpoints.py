"""Mountpoints outside pytest's temporary tree, for suites that mount many times.

conftest.py's session hook detaches every graphfs mount whose path contains
"/pytest-" when a pytest session ends, and so would also detach the mounts of
another pytest session running at the same time on the machine. The model and
kill -9 suites keep their mountpoints in a directory of their own and detach
whatever is still mounted there themselves, pass or fail.
"""
import contextlib
import shutil
import tempfile
from pathlib import Path

from conftest import Mount, is_mountpoint, lazy_unmount, start_daemon, tear_down, unmount_cleanly


def mounts_below(directory):
    prefix = str(directory) + "/"
    with open("/proc/self/mounts") as mounts:
        return [line.split()[1].replace("\\040", " ") for line in mounts
                if line.split()[1].startswith(prefix)]


@contextlib.contextmanager
def mountpoint_directory(prefix):
    """A fresh directory for mountpoints; on exit, detaches anything mounted below it and removes it."""
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield directory
    finally:
        for path in mounts_below(directory):
            lazy_unmount(path)
        if not mounts_below(directory):
            shutil.rmtree(directory, ignore_errors=True)


def mount(store, mountpoint, stderr_path, options=()):
    """Starts `graphfs mount -f` and returns the Mount once it serves."""
    Path(mountpoint).mkdir(exist_ok=True)
    process = start_daemon(store, mountpoint, stderr_path, options)
    return Mount(store, mountpoint, process, stderr_path, options)


def unmount(target, failed):
    """Clean unmount (fusermount3 -u, daemon exits 0, clean stderr) unless failed; never leaves it mounted."""
    try:
        if failed:
            tear_down(target, True)
        else:
            unmount_cleanly(target)
    finally:
        if is_mountpoint(target.root):
            lazy_unmount(target.root)
        if target.process.poll() is None:
            target.process.kill()
        target.process.wait()


def detach_killed(target):
    """For a daemon the test killed: detach the dead mount (fusermount3 -u -z)."""
    if target.process.poll() is None:
        target.process.kill()
    target.process.wait()
    if is_mountpoint(target.root):
        lazy_unmount(target.root)
    assert not is_mountpoint(target.root)
