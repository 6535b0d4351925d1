"""Based writes (docs/MOUNT.md "Based writes"): a whole-table write made from what was read
never silently undoes a commit made meanwhile — it is merged three ways, or refused.
"""
import errno
import os

import pytest

from conftest import graphfs, import_rows, jsonl

PEOPLE = [{"id": "a", "name": "Ada", "age": 36}, {"id": "b", "name": "Bob", "age": 40}]


@pytest.fixture
def m(store, mounter):
    import_rows(store, "Person", PEOPLE)
    return mounter(store)


def rows(m):
    return sorted(m.read("tables", "Person.jsonl").splitlines())


def sed_like(m, edit, meanwhile):
    """What sed -i does (read, write a scratch file, rename it over the table), with another
    commit landing between the scratch file's creation and the rename."""
    scratch = m.path("tables", "sedXYZ123")
    with open(scratch, "w") as handle:
        meanwhile()
        text = jsonl(PEOPLE)
        handle.write(edit(text))
    os.rename(scratch, m.path("tables", "Person.jsonl"))


def commit_elsewhere(m, lines):
    """A commit through another handle of the mount (no child process: its exec would flush)."""
    return lambda: m.write("tables/Person.jsonl", jsonl(lines), mode="a")


def test_a_rename_keeps_a_row_committed_between_read_and_write(m):
    sed_like(m, lambda text: text.replace('"Ada"', '"Ada L."'),
             commit_elsewhere(m, [{"id": "c", "name": "Cy", "age": 5}]))
    assert rows(m) == sorted(jsonl([{"id": "a", "name": "Ada L.", "age": 36}, {"id": "b", "name": "Bob", "age": 40},
                                    {"id": "c", "name": "Cy", "age": 5}]).splitlines())
    line, meanwhile = m.log()[:2]
    assert "merged with 1 row changed since" in line["message"]
    assert line["based_on"] == meanwhile["version"] - 1   # what the scratch file was made from
    assert line["changes"] == [{"table": "Person", "op": "merge", "rows": 3}]
    assert "based_on" not in meanwhile


def test_changes_to_different_properties_of_one_row_are_both_kept(m):
    sed_like(m, lambda text: text.replace('"age":36', '"age":37'),
             commit_elsewhere(m, [{"id": "a", "name": "Ada Lovelace", "age": 36}]))
    assert '{"id":"a","name":"Ada Lovelace","age":37}' in rows(m)


def test_a_row_the_writer_left_alone_takes_a_delete_made_meanwhile(m):
    sed_like(m, lambda text: text.replace('"Ada"', '"Ada L."'),
             lambda: m.write("tables/Person.jsonl", '{"id":"b","@delete":true}\n', mode="a"))
    assert rows(m) == ['{"id":"a","name":"Ada L.","age":36}']


def test_the_same_property_changed_two_ways_refuses_the_rename_and_keeps_the_scratch_file(m):
    before = m.log_count()
    with pytest.raises(OSError) as raised:
        sed_like(m, lambda text: text.replace('"Ada"', '"Ada K."'),
                 commit_elsewhere(m, [{"id": "a", "name": "Ada L.", "age": 36}]))
    assert raised.value.errno == errno.EBUSY
    assert m.log_count() == before + 1   # only the other commit
    assert '"Ada K."' in m.read("tables", "sedXYZ123")
    error = m.errors()[-1]
    assert error["errno"] == errno.EBUSY and '"a"' in error["reason"] and "both sides" in error["reason"]
    assert '{"id":"a","name":"Ada L.","age":36}' in rows(m)


def test_a_row_deleted_by_the_writer_and_changed_meanwhile_is_a_conflict(m):
    with pytest.raises(OSError) as raised:
        sed_like(m, lambda text: "\n".join(line for line in text.splitlines() if '"b"' not in line) + "\n",
                 commit_elsewhere(m, [{"id": "b", "name": "Bobby", "age": 40}]))
    assert raised.value.errno == errno.EBUSY


def test_without_a_commit_meanwhile_a_rename_is_a_plain_overwrite(m):
    sed_like(m, lambda text: text.replace('"Bob"', '"Robert"'), lambda: None)
    assert rows(m) == sorted(jsonl([{"id": "a", "name": "Ada", "age": 36},
                                    {"id": "b", "name": "Robert", "age": 40}]).splitlines())
    assert m.log()[0]["changes"][0]["op"] == "overwrite"


def test_cp_of_new_data_still_replaces(m, tmp_path):
    source = tmp_path / "new.jsonl"
    source.write_text(jsonl([{"id": "z", "name": "Zed", "age": 1}]))
    m.sh(f"cp {source} tables/Person.jsonl")
    assert rows(m) == ['{"id":"z","name":"Zed","age":1}']


def read_modify_write(m, edit, meanwhile):
    """Python's read, modify, write back with O_TRUNC — another commit landing in between."""
    path = m.path("tables", "Person.jsonl")
    with open(path) as handle:
        text = handle.read()
    meanwhile()
    with open(path, "w") as handle:
        handle.write(edit(text))


def test_an_o_trunc_write_back_keeps_a_row_committed_after_the_read(m):
    read_modify_write(m, lambda text: text.replace('"Bob"', '"Robert"'),
                      commit_elsewhere(m, [{"id": "c", "name": "Cy", "age": 5}]))
    assert rows(m) == sorted(jsonl([{"id": "a", "name": "Ada", "age": 36}, {"id": "b", "name": "Robert", "age": 40},
                                    {"id": "c", "name": "Cy", "age": 5}]).splitlines())
    line, meanwhile = m.log()[:2]
    assert line["based_on"] == meanwhile["version"] - 1   # the version the process read
    assert line["changes"][0]["op"] == "merge"


def test_a_conflicting_o_trunc_write_back_fails_its_close_and_keeps_a_rej_file(m):
    before = m.log_count()
    with pytest.raises(OSError) as raised:
        read_modify_write(m, lambda text: text.replace('"Bob"', '"Robert"'),
                          commit_elsewhere(m, [{"id": "b", "name": "Bobby", "age": 40}]))
    assert raised.value.errno == errno.EBUSY
    assert m.log_count() == before + 1
    assert '"Robert"' in m.read("tables", "Person.jsonl.rej")
    assert '"b"' in m.errors()[-1]["reason"]


def test_a_process_that_never_read_the_table_replaces_it(m):
    m.write("tables/Person.jsonl", jsonl([{"id": "c", "name": "Cy", "age": 5}]), mode="a")
    with open(m.path("tables", "Person.jsonl"), "w") as handle:
        handle.write(jsonl([{"id": "z", "name": "Zed", "age": 1}]))
    assert rows(m) == ['{"id":"z","name":"Zed","age":1}']


def test_a_scratch_file_made_before_a_remount_keeps_its_base(m, mounter):
    # the base lives beside the backing file (mountfs/scratch.c invariant 5): a rename after a
    # remount still merges with what was committed since the scratch file was made
    m.path("tables", "Person.edit").write_text(jsonl(PEOPLE).replace('"Ada"', '"Ada L."'))
    made_from = m.log()[0]["version"]
    mounter.unmount(m)
    import_rows(m.store, "Person", [{"id": "c", "name": "Cy", "age": 5}], mode="merge")
    m = mounter(m.store)
    os.rename(m.path("tables", "Person.edit"), m.path("tables", "Person.jsonl"))
    assert rows(m) == sorted(jsonl([{"id": "a", "name": "Ada L.", "age": 36}, {"id": "b", "name": "Bob", "age": 40},
                                    {"id": "c", "name": "Cy", "age": 5}]).splitlines())
    assert m.log()[0]["based_on"] == made_from
    if not str(m.store).startswith("s3://"):   # (an s3:// store's scratch files are in the host's cache)
        bases = m.store / "scratch" / "main" / "bases"
        assert not bases.exists() or not list(bases.iterdir())   # gone with its scratch file
