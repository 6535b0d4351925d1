"""Scratch files (docs/MOUNT.md "Scratch files"): ordinary files kept beside the store, per
branch, never versioned; they survive unmount and remount, and the daemon holds no file
descriptor for one that is closed.
"""
import json
import os
import resource
import subprocess

import pytest

from conftest import graphfs, import_rows, jsonl
from tier import size

PEOPLE = [{"id": "a", "name": "Ada"}, {"id": "b", "name": "Bob"}]


@pytest.fixture
def m(store, mounter):
    import_rows(store, "Person", PEOPLE)
    return mounter(store)


def remount(mounter, m, options=()):
    mounter.unmount(m)
    return mounter(m.store, options)


def test_scratch_files_are_byte_identical_after_a_remount(m, mounter):
    binary = bytes(range(256)) * 64 + b"\0" * 5000
    files = {
        ("tables", "notes.txt"): b"remember the milk\n",
        ("tables", "People.jsonl.bak"): jsonl(PEOPLE).encode(),
        ("tables", ".Person.jsonl.swp"): binary,
        ("tables", "Person.jsonl~"): b'{"id":"a"}\n',
        ("schema", "Person.json.orig"): b'{"kind":"node"}',
    }
    for parts, data in files.items():
        m.path(*parts).write_bytes(data)
    m = remount(mounter, m)
    for parts, data in files.items():
        assert m.path(*parts).read_bytes() == data, parts
    assert "notes.txt" in os.listdir(m.path("tables"))
    assert m.log_count() == 1   # nothing was published


def test_a_scratch_file_keeps_its_mode_and_times_after_a_remount(m, mounter):
    path = m.path("tables", "run.sh")
    path.write_text("echo hi\n")
    os.chmod(path, 0o750)
    os.utime(path, (1_000_000_000, 1_100_000_000))
    m = remount(mounter, m)
    status = m.path("tables", "run.sh").stat()
    assert status.st_mode & 0o7777 == 0o750
    assert (int(status.st_atime), int(status.st_mtime)) == (1_000_000_000, 1_100_000_000)


def test_a_removed_or_renamed_scratch_file_stays_so_after_a_remount(m, mounter):
    m.path("tables", "gone.txt").write_text("x")
    m.path("tables", "old.txt").write_text("kept")
    os.remove(m.path("tables", "gone.txt"))
    os.rename(m.path("tables", "old.txt"), m.path("tables", "new.txt"))
    m = remount(mounter, m)
    names = os.listdir(m.path("tables"))
    assert "gone.txt" not in names and "old.txt" not in names
    assert m.path("tables", "new.txt").read_text() == "kept"


def test_a_scratch_file_renamed_onto_a_table_publishes_and_leaves_no_scratch_behind(m, mounter):
    m.path("tables", ".Person.tmp").write_text(jsonl([{"id": "z", "name": "Zed"}]))
    os.rename(m.path("tables", ".Person.tmp"), m.path("tables", "Person.jsonl"))
    m = remount(mounter, m)
    assert sorted(os.listdir(m.path("tables"))) == ["Person.jsonl"]
    assert m.read("tables", "Person.jsonl") == jsonl([{"id": "z", "name": "Zed"}])


def test_staged_files_survive_a_remount_and_commit_as_staged(m, mounter):
    with open(m.path("staging", "Person.jsonl"), "a") as handle:   # >>: a staged merge
        handle.write(jsonl([{"id": "s", "name": "Sam"}]))
    m.path("staging", "Team.jsonl").write_text(jsonl([{"id": "t1"}]))   # a staged overwrite
    m = remount(mounter, m)
    assert sorted(os.listdir(m.path("staging"))) == [".commit", "Person.jsonl", "Team.jsonl"]
    m.path("staging", ".commit").write_text("both, after a remount")
    assert m.read("tables", "Person.jsonl") == jsonl(PEOPLE + [{"id": "s", "name": "Sam"}])
    assert m.read("tables", "Team.jsonl") == jsonl([{"id": "t1"}])
    changes = {change["table"]: change["op"] for change in m.log()[0]["changes"]}
    assert changes == {"Person": "merge", "Team": "create"}
    assert sorted(os.listdir(m.path("staging"))) == [".commit"]


def test_scratch_files_belong_to_their_branch(m, mounter):
    os.mkdir(m.path("branches", "side"))
    m.path("tables", "main-notes.txt").write_text("main")
    m.path("branches", "side", "tables", "side-notes.txt").write_text("side")
    assert "side-notes.txt" not in os.listdir(m.path("tables"))
    m = remount(mounter, m)
    assert "side-notes.txt" not in os.listdir(m.path("tables"))
    assert m.path("branches", "side", "tables", "side-notes.txt").read_text() == "side"
    side = mounter(m.store, ("branch=side",))
    assert side.path("tables", "side-notes.txt").read_text() == "side"
    assert "main-notes.txt" not in os.listdir(side.path("tables"))


@pytest.mark.local_only   # reads the store directory itself
def test_verify_snapshot_dump_and_gc_ignore_scratch_files(m, tmp_path):
    m.path("tables", "notes.txt").write_text("not data\n")
    graphfs("verify", m.store)
    graphfs("gc", m.store)
    graphfs("snapshot", m.store, tmp_path / "copy")
    assert not (tmp_path / "copy" / "scratch").exists()
    dump = graphfs("dump", m.store).stdout.decode()
    assert "not data" not in dump
    assert m.path("tables", "notes.txt").read_text() == "not data\n"


def test_closed_scratch_files_hold_no_descriptor_in_the_daemon(m):
    """More scratch files than the daemon may open files: each create, write and close works."""
    limit = 512
    subprocess.run(["prlimit", f"--nofile={limit}:{limit}", "--pid", str(m.pid)], check=True)
    count = size(4 * limit, soak=25_000, small=2 * limit)
    directory = m.path("tables")
    for i in range(count):
        with open(directory / f"s{i}.txt", "w") as handle:
            handle.write(f"{i}\n")
    names = os.listdir(directory)
    assert len(names) == count + 1
    assert (directory / f"s{count - 1}.txt").read_text() == f"{count - 1}\n"
    assert len(os.listdir(f"/proc/{m.pid}/fd")) < limit // 2


def test_a_scratch_file_belongs_to_its_creator_and_chown_keeps_across_a_remount(store, mounter):
    m = mounter(store, options=("allow_other", "umask=000"))
    created = subprocess.run(["setpriv", "--reuid=4321", "--regid=4322", "--clear-groups", "sh", "-c",
                              "echo draft > tables/draft.txt"], cwd=m.root, capture_output=True, text=True)
    assert created.returncode == 0, created.stderr
    status = m.path("tables", "draft.txt").stat()
    assert (status.st_uid, status.st_gid) == (4321, 4322)
    os.chown(m.path("tables", "draft.txt"), 4400, 4401)
    mounter.unmount(m)
    m = mounter(store, options=("allow_other", "umask=000"))
    status = m.path("tables", "draft.txt").stat()
    assert (status.st_uid, status.st_gid) == (4400, 4401)
    assert m.path("tables", "draft.txt").read_text() == "draft\n"
