"""history/@<time>, tags/ and a branch's ancestry through the mount."""
import errno
import json
import os
import time

import pytest

from conftest import graphfs, import_rows, jsonl, wait_for

PEOPLE = [{"id": "a", "name": "Ada"}, {"id": "b", "name": "Bob"}]


@pytest.fixture
def m(store, mounter):
    import_rows(store, "Person", PEOPLE)
    return mounter(store)


def tags(store):
    return [json.loads(line) for line in graphfs("tag", store, "list").stdout.decode().splitlines()]


def test_a_time_in_history_is_a_link_to_the_version_of_that_instant(m):
    m.sh("""echo '{"id":"c","name":"Cy"}' >> tables/Person.jsonl""")
    log = m.log()
    newest, oldest = log[0], log[-1]
    assert os.readlink(m.path("history", f"@{oldest['time']}")) == f"@{oldest['version']}"
    assert os.readlink(m.path("history", f"@{newest['time']}")) == f"@{newest['version']}"
    assert os.readlink(m.path("history", "@2999-01-01")) == f"@{newest['version']}"
    assert m.read("history", f"@{oldest['time']}", "tables", "Person.jsonl") == jsonl(PEOPLE)


def test_a_time_link_is_not_listed_and_a_time_before_the_first_commit_is_enoent(m):
    assert all(not name.startswith("@2") for name in os.listdir(m.path("history")))
    with pytest.raises(FileNotFoundError):
        os.readlink(m.path("history", "@2001-01-01T00:00:00Z"))
    with pytest.raises(FileNotFoundError):
        os.readlink(m.path("history", "@2026-13-01"))


def test_mkdir_in_tags_tags_the_mounted_head_and_the_tag_reads_like_history(m):
    os.mkdir(m.path("tags", "release-1"))
    m.sh("""echo '{"id":"c","name":"Cy"}' >> tables/Person.jsonl""")
    assert os.listdir(m.path("tags")) == ["release-1"]
    assert m.read("tags", "release-1", "tables", "Person.jsonl") == jsonl(PEOPLE)
    assert sorted(os.listdir(m.path("tags", "release-1"))) == ["graph", "heads", "log", "schema", "tables"]
    [tag] = tags(m.store)
    assert tag["tag"] == "release-1" and tag["version"] == 1
    with pytest.raises(OSError) as raised:
        m.write("tags/release-1/tables/Person.jsonl", jsonl(PEOPLE))
    assert raised.value.errno in (errno.EROFS, errno.EACCES)


def test_a_tag_is_immutable_and_rmdir_deletes_it(m):
    os.mkdir(m.path("tags", "t"))
    with pytest.raises(FileExistsError):
        os.mkdir(m.path("tags", "t"))
    os.rmdir(m.path("tags", "t"))
    assert os.listdir(m.path("tags")) == []
    assert tags(m.store) == []


def test_a_tag_made_by_the_cli_appears_in_tags(m):
    graphfs("tag", m.store, "create", "cli-made", "-m", "from the shell")
    # another process's tag shows within the refresh bound (docs/MOUNT.md)
    assert wait_for(lambda: "cli-made" in os.listdir(m.path("tags")), timeout=5.0)
    assert m.read("tags", "cli-made", "tables", "Person.jsonl") == jsonl(PEOPLE)


def test_every_history_entry_of_a_branch_two_forks_deep_opens_with_the_parents_bytes(m):
    os.mkdir(m.path("branches", "exp"))
    m.sh("""echo '{"id":"c","name":"Cy"}' >> tables/Person.jsonl""")
    m.sh("""echo '{"id":"x","name":"Xi"}' >> branches/exp/tables/Person.jsonl""")
    graphfs("branch", m.store, "create", "sub", "--from", "exp")
    m.sh("""echo '{"id":"d","name":"Di"}' >> tables/Person.jsonl""")
    listed = sorted(int(name[1:]) for name in os.listdir(m.path("branches", "sub", "history")) if name[0] == "@")
    assert listed == [1, 3]
    for version in listed:
        sub = m.read("branches", "sub", "history", f"@{version}", "tables", "Person.jsonl")
        parent = graphfs("export", m.store, "Person", "--branch", "exp", "--at", str(version)).stdout.decode()
        assert sub == parent
    assert m.read("branches", "sub", "history", "@2", "tables", "Person.jsonl") == jsonl(PEOPLE)


def test_a_snapshot_mounts_read_only_and_shows_the_store_as_it_was(store, tmp_path, mounter):
    import_rows(store, "Person", PEOPLE)
    graphfs("tag", store, "create", "before")
    graphfs("snapshot", store, tmp_path / "snap")
    import_rows(store, "Person", [{"id": "z", "name": "Zed"}], mode="merge")
    m = mounter(tmp_path / "snap", options=("ro",))
    assert m.read("tables", "Person.jsonl") == jsonl(PEOPLE)
    assert m.read("tags", "before", "tables", "Person.jsonl") == jsonl(PEOPLE)
    with pytest.raises(OSError) as raised:
        m.write("tables/Person.jsonl", jsonl(PEOPLE))
    assert raised.value.errno == errno.EROFS


def test_a_mount_sees_a_restore_within_the_refresh_bound_and_a_pinned_reader_keeps_its_bytes(store, tmp_path,
                                                                                           mounter):
    import_rows(store, "Person", PEOPLE)
    graphfs("snapshot", store, tmp_path / "snap")
    import_rows(store, "Person", [{"id": "z", "name": "Zed"}], mode="merge")
    m = mounter(store)
    later = jsonl(PEOPLE + [{"id": "z", "name": "Zed"}])
    assert m.read("tables", "Person.jsonl") == later
    with open(m.path("tables", "Person.jsonl")) as pinned:
        graphfs("restore", store, tmp_path / "snap", "--confirm")
        deadline = time.monotonic() + 5
        while m.read("tables", "Person.jsonl") != jsonl(PEOPLE) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert m.read("tables", "Person.jsonl") == jsonl(PEOPLE)
        assert pinned.read() == later


def test_a_tag_deleted_and_made_again_elsewhere_shows_its_new_version(m):
    graphfs("tag", m.store, "create", "moving")
    assert wait_for(lambda: "moving" in os.listdir(m.path("tags")), timeout=5.0)
    assert m.read("tags", "moving", "tables", "Person.jsonl") == jsonl(PEOPLE)
    m.sh("""echo '{"id":"c","name":"Cy"}' >> tables/Person.jsonl""")
    graphfs("tag", m.store, "delete", "moving")
    graphfs("tag", m.store, "create", "moving")
    expected = jsonl(PEOPLE + [{"id": "c", "name": "Cy"}])
    deadline = time.monotonic() + 5
    while m.read("tags", "moving", "tables", "Person.jsonl") != expected and time.monotonic() < deadline:
        time.sleep(0.1)
    assert m.read("tags", "moving", "tables", "Person.jsonl") == expected


def test_a_snapshot_mounts_read_only_and_refuses_a_read_write_mount(store, tmp_path, mounter):
    import_rows(store, "Person", PEOPLE)
    graphfs("snapshot", store, tmp_path / "snap")
    mountpoint = tmp_path / "refused"
    mountpoint.mkdir()
    refused = graphfs("mount", tmp_path / "snap", mountpoint, check=False, timeout=60)
    assert refused.returncode != 0 and b"is a snapshot" in refused.stderr and b"-o ro" in refused.stderr
    assert not os.path.ismount(mountpoint)
    m = mounter(tmp_path / "snap", options=["ro"])
    assert m.read("tables", "Person.jsonl") == jsonl(PEOPLE)
