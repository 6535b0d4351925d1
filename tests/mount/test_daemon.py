"""The daemon's lifetime: refusals before mounting, signals, crashes, daemonizing,
mount(8) and /etc/fstab, and the visibility of other processes' commits."""
import errno
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import (FUSERMOUNT, GRAPHFS, graphfs, import_rows, is_mountpoint, jsonl, kill_daemon,
                      lazy_unmount, wait_for)

PEOPLE = [{"id": "a", "name": "Ada"}, {"id": "b", "name": "Bob"}]
VISIBILITY_BOUND = 2.0   # docs/MOUNT.md: refresh interval (1 s) + live cache timeout (1 s)


def run_mount(store, mountpoint, *extra):
    return subprocess.run([GRAPHFS, "mount", str(store), str(mountpoint), "-f", *extra],
                          capture_output=True, timeout=60)


@pytest.mark.parametrize("format_version,advice", [(9, "upgrade"), (5, "graphfs dump")])
def test_a_store_of_another_format_is_refused_before_mounting(store, tmp_path, format_version, advice):
    graphfs("debug", "stamp-format", store, format_version)
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    try:
        result = run_mount(store, mountpoint)
        assert result.returncode == 1
        message = result.stderr.decode()
        assert message.startswith("graphfs: ") and message.count("\n") == 1
        assert advice in message
        assert not is_mountpoint(mountpoint)
    finally:
        if is_mountpoint(mountpoint):
            lazy_unmount(mountpoint)


def test_a_missing_branch_is_refused_before_mounting(store, tmp_path):
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    try:
        result = run_mount(store, mountpoint, "-o", "branch=nope")
        assert result.returncode == 1
        assert b"nope" in result.stderr
        assert not is_mountpoint(mountpoint)
    finally:
        if is_mountpoint(mountpoint):
            lazy_unmount(mountpoint)


def test_an_unknown_option_is_a_usage_error(store, tmp_path):
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    result = run_mount(store, mountpoint, "-o", "frobnicate")
    assert result.returncode == 2
    assert not is_mountpoint(mountpoint)


def test_sigterm_unmounts_cleanly(store, mounter):
    m = mounter(store)
    os.kill(m.pid, signal.SIGTERM)
    assert m.process.wait(timeout=30) == 0
    assert not is_mountpoint(m.root)
    mounter.forget(m)


def test_sigint_unmounts_cleanly(store, mounter):
    m = mounter(store)
    os.kill(m.pid, signal.SIGINT)
    assert m.process.wait(timeout=30) == 0
    assert not is_mountpoint(m.root)
    mounter.forget(m)


def test_kill_9_keeps_every_acknowledged_commit(store, mounter):
    import_rows(store, "Person", PEOPLE)
    m = mounter(store)
    expected = list(PEOPLE)
    for i in range(20):
        row = {"id": f"r{i}", "name": f"n{i}"}
        with open(m.path("tables", "Person.jsonl"), "a") as handle:
            handle.write(jsonl([row]))
        expected.append(row)   # close returned: acknowledged
    m.write("staging/City.jsonl", jsonl([{"id": "o", "name": "Oslo"}]))
    m.write("staging/.commit", "city\n")
    kill_daemon(m)
    mounter.forget(m)
    lazy_unmount(m.root)
    again = mounter(store)
    assert again.read("tables", "Person.jsonl") == jsonl(expected)
    assert again.read("tables", "City.jsonl") == jsonl([{"id": "o", "name": "Oslo"}])
    assert again.log_count() == 1 + 20 + 1
    result = graphfs("verify", store, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_without_f_the_daemon_detaches_and_serves(store, tmp_path):
    import_rows(store, "Person", PEOPLE)
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    try:
        result = subprocess.run([GRAPHFS, "mount", str(store), str(mountpoint)], capture_output=True,
                                timeout=60)
        assert result.returncode == 0, result.stderr
        assert result.stderr == b""
        assert is_mountpoint(mountpoint)
        assert (mountpoint / "tables" / "Person.jsonl").read_text() == jsonl(PEOPLE)
        daemons = daemon_pids(mountpoint)
        assert len(daemons) == 1
        assert subprocess.run([FUSERMOUNT, "-u", str(mountpoint)]).returncode == 0
        assert wait_for(lambda: not daemon_pids(mountpoint), timeout=30)
    finally:
        if is_mountpoint(mountpoint):
            lazy_unmount(mountpoint)
        for pid in daemon_pids(mountpoint):
            os.kill(pid, signal.SIGKILL)


def daemon_pids(mountpoint):
    """Processes whose command line is `graphfs mount ... <mountpoint>`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            arguments = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"mount" in arguments and str(mountpoint).encode() in arguments:
            found.append(int(entry.name))
    return found


def helper_path():
    helper = Path(GRAPHFS).parent / "mount.graphfs"
    assert helper.exists(), f"{helper} is not built"
    return helper


def test_the_mount_helper_mounts_as_mount_8_calls_it(store, tmp_path):
    import_rows(store, "Person", PEOPLE)
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    environment = dict(os.environ, GRAPHFS=GRAPHFS)
    try:
        result = subprocess.run([str(helper_path()), str(store), str(mountpoint), "-o",
                                 "rw,defaults,noauto,branch=main,ro", "-t", "fuse.graphfs"],
                                capture_output=True, timeout=60, env=environment)
        assert result.returncode == 0, result.stderr
        assert (mountpoint / "tables" / "Person.jsonl").read_text() == jsonl(PEOPLE)
        with pytest.raises(OSError) as error:
            open(mountpoint / "tables" / "Person.jsonl", "a")
        assert error.value.errno == errno.EROFS
        assert subprocess.run([FUSERMOUNT, "-u", str(mountpoint)]).returncode == 0
        assert wait_for(lambda: not daemon_pids(mountpoint), timeout=30)
    finally:
        if is_mountpoint(mountpoint):
            lazy_unmount(mountpoint)
        for pid in daemon_pids(mountpoint):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def system_helper():
    """Links /sbin/mount.fuse.graphfs to the built helper for the test (mount(8) looks only there)."""
    assert os.geteuid() == 0, "mount(8) with a helper needs root (as does /dev/fuse here)"
    link = Path("/sbin/mount.fuse.graphfs")
    created = False
    if link.is_symlink() and not link.exists():
        link.unlink()   # left dangling by an interrupted run
    if not link.exists():
        link.symlink_to(helper_path())
        created = True
    try:
        yield link
    finally:
        if created:
            link.unlink()


@pytest.mark.xdist_group("system-helper")   # both link /sbin/mount.fuse.graphfs
def test_mount_t_fuse_graphfs_uses_the_helper(store, tmp_path, system_helper):
    import_rows(store, "Person", PEOPLE)
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    environment = dict(os.environ, GRAPHFS=GRAPHFS)
    try:
        result = subprocess.run(["mount", "-t", "fuse.graphfs", str(store), str(mountpoint), "-o",
                                 "branch=main"], capture_output=True, timeout=60, env=environment)
        assert result.returncode == 0, result.stderr
        assert (mountpoint / "tables" / "Person.jsonl").read_text() == jsonl(PEOPLE)
        assert subprocess.run(["umount", str(mountpoint)]).returncode == 0
        assert wait_for(lambda: not daemon_pids(mountpoint), timeout=30)
    finally:
        if is_mountpoint(mountpoint):
            lazy_unmount(mountpoint)
        for pid in daemon_pids(mountpoint):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.xdist_group("system-helper")
def test_an_fstab_line_mounts(store, tmp_path, system_helper):
    import_rows(store, "Person", PEOPLE)
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    fstab = tmp_path / "fstab"
    fstab.write_text(f"{store}  {mountpoint}  fuse.graphfs  defaults,noauto,nofail,branch=main  0  0\n")
    environment = dict(os.environ, GRAPHFS=GRAPHFS)
    try:
        result = subprocess.run(["mount", "-T", str(fstab), str(mountpoint)], capture_output=True,
                                timeout=60, env=environment)
        assert result.returncode == 0, result.stderr
        assert (mountpoint / "tables" / "Person.jsonl").read_text() == jsonl(PEOPLE)
        assert subprocess.run(["umount", str(mountpoint)]).returncode == 0
        assert wait_for(lambda: not daemon_pids(mountpoint), timeout=30)
    finally:
        if is_mountpoint(mountpoint):
            lazy_unmount(mountpoint)
        for pid in daemon_pids(mountpoint):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.serial   # a time bound
def test_a_cli_commit_becomes_visible_within_the_documented_bound(store, mounter):
    import_rows(store, "Person", PEOPLE)
    m = mounter(store)
    # Warm every cache the kernel and the daemon keep for live paths.
    assert m.read("tables", "Person.jsonl") == jsonl(PEOPLE)
    os.stat(m.path("tables", "Person.jsonl"))
    os.listdir(m.path("tables"))
    import_rows(store, "Person", [{"id": "c", "name": "Cy"}], mode="merge")
    import_rows(store, "City", [{"id": "o", "name": "Oslo"}])
    committed = time.monotonic()
    expected = jsonl(PEOPLE + [{"id": "c", "name": "Cy"}])

    def visible():
        return (m.read("tables", "Person.jsonl") == expected and
                os.stat(m.path("tables", "Person.jsonl")).st_size == len(expected) and
                "City.jsonl" in os.listdir(m.path("tables")) and
                m.path("heads", "City.json").exists())

    while not visible():
        assert time.monotonic() - committed < VISIBILITY_BOUND + 0.5, "not visible within the bound"
        time.sleep(0.05)


@pytest.mark.serial   # a time bound
def test_two_mounts_of_one_store_see_each_others_commits(store, mounter):
    import_rows(store, "Person", PEOPLE)
    first = mounter(store)
    second = mounter(store)
    first.sh("""echo '{"id":"c","name":"Cy"}' >> tables/Person.jsonl""")
    expected = jsonl(PEOPLE + [{"id": "c", "name": "Cy"}])
    assert wait_for(lambda: second.read("tables", "Person.jsonl") == expected,
                    timeout=VISIBILITY_BOUND + 0.5)
