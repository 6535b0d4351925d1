"""The mount as a POSIX file system: the points a conformance run found, each with
the real tool or system call that showed it (docs/MOUNT.md "The tree", "Writing",
"Limits")."""
import errno
import mmap
import os
import stat
import time

import pytest

from conftest import graphfs, import_rows, jsonl

PEOPLE = [{"id": "a", "name": "Ada"}, {"id": "b", "name": "Bob"}]


@pytest.fixture
def m(store, mounter):
    import_rows(store, "Person", PEOPLE)
    return mounter(store)


def test_echo_to_a_jsonl_name_that_is_not_a_table_name_fails_and_keeps_nothing(m):
    for name in ["My Table.jsonl", "Ünï.jsonl", "a" * 200 + ".jsonl"]:
        result = m.sh(f"""echo '{{"id":"a"}}' > 'tables/{name}'""", check=False)
        assert result.returncode != 0, name
        assert name not in os.listdir(m.path("tables"))
    assert "not a table name" in m.errors()[-1]["reason"]


def test_cp_to_a_table_name_with_another_data_extension_fails_and_keeps_nothing(m):
    # a typo for .jsonl would otherwise be a scratch file that is gone at unmount
    for name in ["People.json", "People.csv", "People.JSONL"]:
        result = m.sh(f"""echo '{{"id":"a"}}' > 'tables/{name}'""", check=False)
        assert result.returncode != 0, name
        assert name not in os.listdir(m.path("tables"))
    assert "tables are <Name>.jsonl" in m.errors()[-1]["reason"]


def test_touch_a_stores_the_access_time_of_a_scratch_file(m):
    m.sh("echo hello > tables/notes.txt; touch -a -d @1000000000 tables/notes.txt")
    status = os.stat(m.path("tables", "notes.txt"))
    assert int(status.st_atime) == 1000000000
    assert int(status.st_mtime) != 1000000000


def test_uid_gid_and_umask_set_the_owner_and_mode_of_store_files(store, mounter):
    import_rows(store, "Person", PEOPLE)
    mnt = mounter(store, options=("uid=1234", "gid=2345", "umask=002"))
    table = os.stat(mnt.path("tables", "Person.jsonl"))
    assert (table.st_uid, table.st_gid, table.st_mode & 0o7777) == (1234, 2345, 0o664)
    directory = os.stat(mnt.path("tables"))
    assert (directory.st_uid, directory.st_gid, directory.st_mode & 0o7777) == (1234, 2345, 0o775)
    head = os.stat(mnt.path("heads", "Person.json"))
    assert head.st_mode & 0o7777 == 0o444 and head.st_gid == 2345
    with pytest.raises(PermissionError):
        os.chmod(mnt.path("tables", "Person.jsonl"), 0o600)
    with pytest.raises(PermissionError):
        os.chown(mnt.path("tables", "Person.jsonl"), 0, 0)


def test_a_group_member_writes_through_gid_and_umask_002_and_is_the_commits_actor(store, mounter):
    import json
    import subprocess
    import_rows(store, "Person", PEOPLE)
    mnt = mounter(store, options=("allow_other", "gid=2345", "umask=002"))
    # uid 4321 owns nothing here and is in group 2345; it starts inside the mount (the test's own
    # directories above it are private to root)
    member = ["setpriv", "--reuid=4321", "--regid=4321", "--groups=2345"]
    appended = subprocess.run(member + ["sh", "-c", """echo '{"id":"c","name":"Cy"}' >> tables/Person.jsonl"""],
                              cwd=mnt.root, capture_output=True, text=True)
    assert appended.returncode == 0, appended.stderr
    outsider = subprocess.run(["setpriv", "--reuid=4322", "--regid=4322", "--clear-groups", "sh", "-c",
                               """echo '{"id":"d"}' >> tables/Person.jsonl"""], cwd=mnt.root,
                              capture_output=True, text=True)
    assert outsider.returncode != 0 and "Permission denied" in outsider.stderr
    newest = json.loads(graphfs("log", store).stdout.decode().splitlines()[0])
    assert newest["actor"].startswith("4321@")
    assert mnt.read("tables", "Person.jsonl").endswith('{"id":"c","name":"Cy"}\n')


def test_echo_garbage_to_a_schema_file_fails_the_shell(m):
    before = m.log_count()
    result = m.sh("echo garbage > schema/T.json", check=False)
    assert result.returncode != 0
    assert m.log_count() == before
    assert m.errors()[-1]["path"] == "schema/T.json"


def test_an_incompatible_schema_echoed_fails_the_shell(m):
    before = m.log_count()
    result = m.sh("""echo '{"kind":"node","properties":{"name":{"type":"i64","nullable":false}}}' """
                  "> schema/Person.json", check=False)
    assert result.returncode != 0
    assert m.log_count() == before


def test_touch_then_rows_with_properties_infers_the_schema(m):
    m.sh("touch tables/New.jsonl")
    m.sh("""echo '{"id":"n","size":3}' >> tables/New.jsonl""")
    assert m.read("tables", "New.jsonl") == jsonl([{"id": "n", "size": 3}])
    assert '"size"' in m.read("schema", "New.json")


def test_a_scratch_file_read_through_a_descriptor_after_rm(m):
    m.write("tables/notes.txt", "hello\n")
    result = m.sh("exec 3< tables/notes.txt; rm tables/notes.txt; cat <&3")
    assert result.stdout == b"hello\n"


def test_seek_end_on_an_open_table_lands_at_the_end_of_the_version_it_reads(m):
    with open(m.path("tables", "Person.jsonl"), "rb") as handle:
        m.sh("""echo '{"id":"c","name":"Cyrus the Great"}' >> tables/Person.jsonl""")
        assert handle.seek(0, os.SEEK_END) == len(jsonl(PEOPLE))
        handle.seek(0)
        assert handle.read() == jsonl(PEOPLE).encode()
    assert os.stat(m.path("tables", "Person.jsonl")).st_size > len(jsonl(PEOPLE))


def test_a_python_r_plus_append_after_a_concurrent_commit_is_ebusy_the_table_moved(m):
    handle = open(m.path("tables", "Person.jsonl"), "r+")
    m.sh("""echo '{"id":"c","name":"Cy"}' >> tables/Person.jsonl""")
    handle.seek(0, os.SEEK_END)
    handle.write(jsonl([{"id": "d", "name": "Di"}]))
    with pytest.raises(OSError) as error:
        handle.close()
    assert error.value.errno == errno.EBUSY
    assert "the table moved" in m.errors()[-1]["reason"]


def test_open_o_creat_with_mode_0000_gives_mode_0000(m):
    descriptor = os.open(m.path("tables", "locked"), os.O_WRONLY | os.O_CREAT, 0o000)
    os.close(descriptor)
    assert stat.S_IMODE(os.stat(m.path("tables", "locked")).st_mode) == 0


def test_truncate_and_chmod_move_the_times_of_a_scratch_file(m):
    m.write("tables/notes.txt", "hello\n")
    before = os.stat(m.path("tables", "notes.txt"))
    time.sleep(0.02)
    os.truncate(m.path("tables", "notes.txt"), 1)
    after = os.stat(m.path("tables", "notes.txt"))
    assert after.st_mtime_ns > before.st_mtime_ns and after.st_ctime_ns > before.st_ctime_ns
    time.sleep(0.02)
    os.chmod(m.path("tables", "notes.txt"), 0o600)
    changed = os.stat(m.path("tables", "notes.txt"))
    assert changed.st_ctime_ns > after.st_ctime_ns


def test_a_directory_mtime_moves_when_a_table_is_added(m):
    before = os.stat(m.path("tables")).st_mtime_ns
    time.sleep(0.02)
    m.write("tables/City.jsonl", jsonl([{"id": "o"}]))
    assert os.stat(m.path("tables")).st_mtime_ns > before


def test_symlink_mkfifo_and_ln_are_eperm(m):
    for command in ["ln -s x tables/link", "mkfifo tables/fifo", "ln tables/Person.jsonl tables/hard"]:
        result = m.sh(command, check=False)
        assert result.returncode != 0
        assert b"Operation not permitted" in result.stderr, command


def test_mmap_private_of_a_live_table_works_and_shared_is_enodev(m):
    with open(m.path("tables", "Person.jsonl"), "rb") as handle:
        with mmap.mmap(handle.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ) as mapped:
            assert mapped[:] == jsonl(PEOPLE).encode()
        with pytest.raises(OSError) as error:
            mmap.mmap(handle.fileno(), 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        assert error.value.errno == errno.ENODEV


def test_mmap_shared_of_a_history_file_works(m):
    with open(m.path("history", "@1", "tables", "Person.jsonl"), "rb") as handle:
        with mmap.mmap(handle.fileno(), 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ) as mapped:
            assert mapped[:] == jsonl(PEOPLE).encode()


def test_a_directory_of_6000_entries_lists_completely_with_every_tool(m, tmp_path):
    m.sh("cd tables && for i in $(seq 1 6000); do : > scratch_file_number_$i; done")
    expected = 6000 + 1
    assert int(m.sh("ls tables | wc -l").stdout) == expected
    assert int(m.sh("find tables -mindepth 1 | wc -l").stdout) == expected
    assert len(os.listdir(m.path("tables"))) == expected
    assert int(m.sh("tar cf - tables | tar tf - | grep -vc '/$'").stdout) == expected
    m.sh(f"rsync -a tables/ {tmp_path}/copy/")
    assert len(os.listdir(tmp_path / "copy")) == expected


def test_deleting_a_branch_another_process_has_mounted_is_ebusy(store, mounter):
    import_rows(store, "Person", PEOPLE)
    graphfs("branch", store, "create", "side")
    side = mounter(store, ("branch=side",))
    result = graphfs("branch", store, "delete", "side", check=False)
    assert result.returncode == 1
    assert side.root.name in result.stderr.decode()
    assert "tables" in os.listdir(side.path())
