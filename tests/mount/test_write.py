"""Writing through the mount (docs/MOUNT.md "Writing"): every row of the table, with real tools.

Each tool write must publish exactly one commit with the intended content;
rejected writes publish nothing and leave one line in .graphfs/errors.
"""
import errno
import json
import os
import shutil

import pytest

from conftest import graphfs, import_rows, jsonl, wait_for
from tier import SMALL

PEOPLE = [{"id": "a", "name": "Ada"}, {"id": "b", "name": "Bob"}]
NEW = [{"id": "x", "name": "Xia"}, {"id": "y", "name": "Yan"}]


@pytest.fixture
def m(store, mounter):
    import_rows(store, "Person", PEOPLE)
    return mounter(store)


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "new.jsonl"
    path.write_text(jsonl(NEW))
    return path


def table(m, name="Person"):
    return m.read("tables", f"{name}.jsonl")


def exported(m, name="Person"):
    return graphfs("export", m.store, name).stdout.decode()


def one_commit(m, before, op, name="Person"):
    """Exactly one commit landed since `before` log lines, changing `name` with `op`."""
    log = m.log()
    assert len(log) == before + 1, [entry["message"] for entry in log[:len(log) - before]]
    assert log[0]["changes"][0]["table"] == name
    assert log[0]["changes"][0]["op"] == op
    return log[0]


# ---- overwrite -----------------------------------------------------------------------

def test_cp_overwrites_with_one_commit(m, source):
    before = m.log_count()
    m.sh(f"cp {source} tables/Person.jsonl")
    one_commit(m, before, "overwrite")
    assert table(m) == exported(m) == jsonl(NEW)


def test_shell_redirect_overwrites_with_one_commit(m):
    before = m.log_count()
    m.sh("""printf '{"id":"z","name":"Zed"}\\n' > tables/Person.jsonl""")
    one_commit(m, before, "overwrite")
    assert table(m) == jsonl([{"id": "z", "name": "Zed"}])


def test_redirect_of_an_external_command_overwrites_once(m, source):
    before = m.log_count()
    m.sh(f"/bin/cat {source} > tables/Person.jsonl")
    one_commit(m, before, "overwrite")
    assert table(m) == jsonl(NEW)


def test_cat_redirect_round_trips_exactly_and_publishes_nothing(m, tmp_path):
    before = m.log_count()
    m.sh(f"cat tables/Person.jsonl > {tmp_path}/copy && cp {tmp_path}/copy tables/Person.jsonl")
    assert m.log_count() == before
    assert table(m) == jsonl(PEOPLE)


def test_vim_write_without_a_change_publishes_nothing(m):
    before = m.log_count()
    m.sh("vim -es -c 'wq' tables/Person.jsonl")
    assert m.log_count() == before
    assert table(m) == jsonl(PEOPLE)


def test_tee_overwrites_with_one_commit(m, source):
    before = m.log_count()
    m.sh(f"tee tables/Person.jsonl < {source} > /dev/null")
    one_commit(m, before, "overwrite")
    assert table(m) == jsonl(NEW)


def test_dd_overwrites_with_one_commit(m, source):
    before = m.log_count()
    m.sh(f"dd if={source} of=tables/Person.jsonl bs=7 status=none")
    one_commit(m, before, "overwrite")
    assert table(m) == jsonl(NEW)


def test_python_write_overwrites_with_one_commit(m):
    before = m.log_count()
    with open(m.path("tables", "Person.jsonl"), "w") as handle:
        for row in NEW:
            handle.write(json.dumps(row, separators=(",", ":")) + "\n")
            handle.flush()
    one_commit(m, before, "overwrite")
    assert table(m) == jsonl(NEW)


def test_truncate_empties_the_table_with_one_commit(m):
    before = m.log_count()
    m.sh("truncate -s 0 tables/Person.jsonl")
    one_commit(m, before, "overwrite")
    assert table(m) == ""
    assert m.head("Person")["row_count"] == 0


def test_redirect_without_output_empties_the_table_at_last_close(m):
    before = m.log_count()
    m.sh(": > tables/Person.jsonl")
    # Nothing was written, so the overwrite is published at the last close
    # (FUSE release), which the kernel sends after close(2) has returned.
    assert wait_for(lambda: m.log_count() == before + 1)
    one_commit(m, before, "overwrite")
    assert table(m) == ""


# ---- merge ---------------------------------------------------------------------------------

def test_append_merges_with_one_commit(m):
    before = m.log_count()
    m.sh("""printf '{"id":"a","name":"Ann"}\\n{"id":"c","name":"Cy"}\\n' >> tables/Person.jsonl""")
    one_commit(m, before, "merge")
    # Upsert by id; an updated row moves to the end.
    assert table(m) == jsonl([{"id": "b", "name": "Bob"}, {"id": "a", "name": "Ann"},
                              {"id": "c", "name": "Cy"}])


def test_append_of_a_delete_line_deletes_the_row(m):
    before = m.log_count()
    m.sh("""echo '{"id":"a","@delete":true}' >> tables/Person.jsonl""")
    one_commit(m, before, "merge")
    assert table(m) == jsonl([{"id": "b", "name": "Bob"}])


def test_tee_a_merges_with_one_commit(m):
    before = m.log_count()
    m.sh("""echo '{"id":"c","name":"Cy"}' | tee -a tables/Person.jsonl > /dev/null""")
    one_commit(m, before, "merge")
    assert table(m) == jsonl(PEOPLE + [{"id": "c", "name": "Cy"}])


def test_python_append_merges_with_one_commit(m):
    before = m.log_count()
    with open(m.path("tables", "Person.jsonl"), "a") as handle:
        handle.write('{"id":"c","name":"Cy"}\n')
    one_commit(m, before, "merge")
    assert table(m) == jsonl(PEOPLE + [{"id": "c", "name": "Cy"}])


def test_merge_is_visible_to_the_cli_when_close_returns(m):
    with open(m.path("tables", "Person.jsonl"), "a") as handle:
        handle.write('{"id":"c","name":"Cy"}\n')
    assert exported(m) == jsonl(PEOPLE + [{"id": "c", "name": "Cy"}])


def test_append_of_a_patch_line_changes_only_its_properties(m):
    m.sh("""echo '{"id":"a","@patch":true,"name":"Ada L."}' >> tables/Person.jsonl""")
    assert table(m) == jsonl([{"id": "b", "name": "Bob"}, {"id": "a", "name": "Ada L."}])   # a merged row moves last
    result = m.sh("""echo '{"id":"nobody","@patch":true,"name":"N"}' >> tables/Person.jsonl""", check=False)
    assert b"Invalid argument" in result.stderr
    assert "no such row" in m.errors()[-1]["reason"]


# ---- private-copy edits ---------------------------------------------------------------------------

def test_dd_notrunc_edits_a_private_copy_with_one_commit(m):
    before = m.log_count()
    # Replace "Bob" by "Rob" in place: bytes at the offset of the second row's name.
    offset = table(m).index("Bob")
    m.sh(f"printf Rob | dd of=tables/Person.jsonl bs=1 seek={offset} conv=notrunc status=none")
    one_commit(m, before, "overwrite")
    assert table(m) == jsonl([{"id": "a", "name": "Ada"}, {"id": "b", "name": "Rob"}])


def test_python_r_plus_edits_with_one_commit(m):
    before = m.log_count()
    with open(m.path("tables", "Person.jsonl"), "r+") as handle:
        text = handle.read()
        handle.seek(0)
        handle.write(text.replace("Ada", "Eve"))
    one_commit(m, before, "overwrite")
    assert table(m) == jsonl([{"id": "a", "name": "Eve"}, {"id": "b", "name": "Bob"}])


def test_stale_edit_is_ebusy_and_changes_nothing(m):
    handle = open(m.path("tables", "Person.jsonl"), "r+")
    handle.read()
    import_rows(m.store, "Person", [{"id": "c", "name": "Cy"}], mode="merge")
    before = len(graphfs("log", m.store).stdout.splitlines())
    after_cli = exported(m)
    handle.seek(0)
    handle.write(jsonl([{"id": "a", "name": "Old"}]))
    with pytest.raises(OSError) as error:
        handle.close()
    assert error.value.errno == errno.EBUSY
    assert len(graphfs("log", m.store).stdout.splitlines()) == before
    assert exported(m) == after_cli
    assert m.errors()[-1]["path"] == "tables/Person.jsonl"


# ---- tools that write through temporary files ------------------------------------------------------

def test_sed_i_publishes_one_overwrite(m):
    before = m.log_count()
    m.sh("sed -i 's/Bob/Rob/' tables/Person.jsonl")
    one_commit(m, before, "overwrite")
    assert table(m) == jsonl([{"id": "a", "name": "Ada"}, {"id": "b", "name": "Rob"}])
    assert sorted(os.listdir(m.path("tables"))) == ["Person.jsonl"]


def test_rsync_publishes_one_overwrite(m, source):
    before = m.log_count()
    m.sh(f"rsync --ignore-times {source} tables/Person.jsonl")
    one_commit(m, before, "overwrite")
    assert table(m) == jsonl(NEW)
    assert sorted(os.listdir(m.path("tables"))) == ["Person.jsonl"]


def test_rsync_a_of_a_directory_creates_tables(m, tmp_path):
    directory = tmp_path / "tree"
    directory.mkdir()
    (directory / "City.jsonl").write_text(jsonl([{"id": "o", "name": "Oslo"}]))
    before = m.log_count()
    m.sh(f"rsync -a {directory}/ tables/")
    one_commit(m, before, "create", name="City")
    assert table(m, "City") == jsonl([{"id": "o", "name": "Oslo"}])


def vim_binary():
    for name in ("vim", "vim.tiny", "vi"):
        path = shutil.which(name)
        if path:
            return path
    raise AssertionError("no vim installed: tools/deps installs vim-tiny")


def test_vim_publishes_one_overwrite(m):
    before = m.log_count()
    m.sh(f"{vim_binary()} -es -c '%s/Bob/Rob/' -c 'wq' tables/Person.jsonl")
    one_commit(m, before, "overwrite")
    assert table(m) == jsonl([{"id": "a", "name": "Ada"}, {"id": "b", "name": "Rob"}])
    assert sorted(os.listdir(m.path("tables"))) == ["Person.jsonl"]


def test_scratch_names_stay_private_until_renamed_onto_a_table(m):
    before = m.log_count()
    scratch = m.path("tables", "draft.tmp")
    scratch.write_text(jsonl(NEW))
    assert scratch.read_text() == jsonl(NEW)
    assert "draft.tmp" in os.listdir(m.path("tables"))
    assert m.log_count() == before
    assert "draft" not in graphfs("heads", m.store).stdout.decode()
    os.rename(scratch, m.path("tables", "Person.jsonl"))
    one_commit(m, before, "overwrite")
    assert table(m) == jsonl(NEW)
    assert sorted(os.listdir(m.path("tables"))) == ["Person.jsonl"]


def test_removing_a_scratch_file_publishes_nothing(m):
    before = m.log_count()
    m.path("tables", ".Person.jsonl.swp").write_text("anything")
    os.unlink(m.path("tables", ".Person.jsonl.swp"))
    assert m.log_count() == before
    assert sorted(os.listdir(m.path("tables"))) == ["Person.jsonl"]


# ---- create, schema, drop, rename ---------------------------------------------------------------------

def test_writing_a_new_name_creates_the_table(m, source):
    before = m.log_count()
    m.sh(f"cp {source} tables/City.jsonl")
    one_commit(m, before, "create", name="City")
    assert table(m, "City") == jsonl(NEW)
    schema = json.loads(m.read("schema", "City.json"))
    assert schema["kind"] == "node"
    assert "name" in schema["properties"]


def test_writing_a_schema_file_creates_an_empty_table(m):
    before = m.log_count()
    schema = {"kind": "node", "properties": {"title": {"type": "string", "nullable": False}}}
    m.write("schema/Book.json", json.dumps(schema))
    log = m.log()
    assert len(log) == before + 1
    assert log[0]["changes"][0]["table"] == "Book"
    assert table(m, "Book") == ""
    assert json.loads(m.read("schema", "Book.json"))["properties"]["title"]["type"] == "string"


def test_a_shell_redirect_into_a_schema_file_creates_the_table_in_one_commit(m):
    before = m.log_count()
    schema = '{"kind":"node","properties":{"name":{"type":"string","nullable":true}}}'
    m.sh(f"/bin/echo '{schema}' > schema/Town.json")
    m.sh(f"echo '{schema}' > schema/Village.json")
    log = m.log()
    assert len(log) == before + 2
    assert {log[0]["changes"][0]["table"], log[1]["changes"][0]["table"]} == {"Town", "Village"}
    assert json.loads(m.read("schema", "Town.json"))["properties"]["name"]["type"] == "string"


def test_truncating_a_schema_file_without_writing_publishes_nothing(m):
    before = m.log_count()
    m.sh(": > schema/Person.json")
    assert m.log_count() == before
    assert json.loads(m.read("schema", "Person.json"))["kind"] == "node"


def test_schema_write_adds_a_nullable_property(m):
    schema = json.loads(m.read("schema", "Person.json"))
    schema["properties"]["age"] = {"type": "i64", "nullable": True}
    before = m.log_count()
    m.write("schema/Person.json", json.dumps(schema))
    one_commit(m, before, "schema")
    assert json.loads(m.read("schema", "Person.json"))["properties"]["age"]["type"] == "i64"
    m.sh("""echo '{"id":"c","name":"Cy","age":3}' >> tables/Person.jsonl""")


def test_rm_drops_the_table_and_history_keeps_its_rows(m):
    head = m.head("Person")
    before = m.log_count()
    m.sh("rm tables/Person.jsonl")
    one_commit(m, before, "drop")
    assert os.listdir(m.path("tables")) == []
    assert not m.path("heads", "Person.json").exists()
    dropped = json.loads(m.read("heads", ".dropped", f"Person.{head['incarnation_id']}.json"))
    assert dropped["state"] == "tombstoned"
    assert m.read("history", "@1", "tables", "Person.jsonl") == jsonl(PEOPLE)


def test_a_schema_written_right_after_rm_or_mv_of_its_table_creates_it_again(m):
    # The kernel may still hold entries for schema/X.json and heads/X.json when rm tables/X.jsonl
    # returns; the mount drops them before it answers, so the next open(O_CREAT) creates (it was
    # ENOENT in about a third of these rounds while they were dropped only after the answer).
    schema = json.dumps({"kind": "node", "properties": {"name": {"type": "string", "nullable": True}}})
    rounds = 50 if SMALL or str(m.store).startswith("s3://") else 200   # each a third likely to fail without it
    for round in range(rounds):
        with open(m.path("schema", "X.json"), "w") as handle:
            handle.write(schema)
        with open(m.path("heads", "X.json")) as handle:
            assert json.loads(handle.read())["state"] == "live"
        if round % 4 == 3:
            os.rename(m.path("tables", "X.jsonl"), m.path("tables", "Y.jsonl"))
            with open(m.path("schema", "Y.json"), "w") as handle:   # an edit of the renamed table's schema
                handle.write(schema)
            os.remove(m.path("tables", "Y.jsonl"))
        else:
            os.remove(m.path("tables", "X.jsonl"))


def test_recreating_a_dropped_name_mints_a_new_incarnation(m, source):
    old = m.head("Person")
    m.sh("rm tables/Person.jsonl")
    m.sh(f"cp {source} tables/Person.jsonl")
    new = m.head("Person")
    assert new["incarnation_id"] != old["incarnation_id"]


def test_mv_renames_keeping_stable_id_and_incarnation(m):
    head = m.head("Person")
    before = m.log_count()
    m.sh("mv tables/Person.jsonl tables/Human.jsonl")
    one_commit(m, before, "rename", name="Human")
    assert os.listdir(m.path("tables")) == ["Human.jsonl"]
    renamed = m.head("Human")
    assert renamed["stable_table_id"] == head["stable_table_id"]
    assert renamed["incarnation_id"] == head["incarnation_id"]
    assert table(m, "Human") == jsonl(PEOPLE)
    assert not m.path("heads", "Person.json").exists()


# ---- refusals -----------------------------------------------------------------------------------------

def test_a_bad_row_fails_the_write_with_einval_and_an_errors_line(m):
    before = m.log_count()
    result = m.sh("""echo '{"id":"c","name":' >> tables/Person.jsonl""", check=False)
    assert result.returncode != 0
    assert b"Invalid argument" in result.stderr
    assert m.log_count() == before
    assert exported(m) == jsonl(PEOPLE)
    line = m.errors()[-1]
    assert line["path"] == "tables/Person.jsonl"
    assert line["line"] == 1
    assert line["reason"]
    assert set(line) >= {"time", "path", "line", "reason"}


def test_the_write_that_completes_a_bad_line_fails_not_the_close(m):
    descriptor = os.open(m.path("tables", "Person.jsonl"), os.O_WRONLY | os.O_APPEND)
    try:
        assert os.write(descriptor, b'{"id":"c","name":"Cy"}\n') > 0
        assert os.write(descriptor, b'{"id":"d","na') > 0   # no complete line yet
        with pytest.raises(OSError) as error:
            os.write(descriptor, b'me":}\n')
        assert error.value.errno == errno.EINVAL
    finally:
        with pytest.raises(OSError):
            os.close(descriptor)
    assert exported(m) == jsonl(PEOPLE)
    assert m.errors()[-1]["line"] == 2


def test_a_bad_row_in_a_copy_publishes_nothing(m, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(jsonl(NEW) + '{"id":3}\n')
    before = m.log_count()
    result = m.sh(f"cp {bad} tables/Person.jsonl", check=False)
    assert result.returncode != 0
    assert m.log_count() == before
    assert exported(m) == jsonl(PEOPLE)
    assert m.errors()[-1]["line"] == 3


def test_printf_of_a_last_line_without_newline_appends_it(m):
    before = m.log_count()
    m.sh("""printf '{"id":"z","name":"Zed"}' >> tables/Person.jsonl""")
    assert m.log_count() == before + 1
    assert exported(m) == jsonl(PEOPLE + [{"id": "z", "name": "Zed"}])


def test_a_last_line_without_newline_that_is_invalid_fails_the_write(m):
    before = m.log_count()
    result = m.sh("""printf '{"id":"z","name":5}' >> tables/Person.jsonl""", check=False)
    assert result.returncode != 0
    assert m.log_count() == before
    assert m.errors()[-1]["path"] == "tables/Person.jsonl"


def test_a_last_line_ending_inside_a_row_fails_the_close(m):
    before = m.log_count()
    handle = open(m.path("tables", "Person.jsonl"), "w")
    handle.write('{"id":"z","name":"Ze')
    with pytest.raises(OSError) as error:
        handle.close()
    assert error.value.errno == errno.EINVAL
    assert m.log_count() == before
    assert exported(m) == jsonl(PEOPLE)


def test_dropping_a_node_table_an_edge_table_references_is_ebusy(m):
    m.write("schema/Knows.json", json.dumps(
        {"kind": "edge", "from": "Person", "to": "Person", "properties": {}}))
    m.sh("""echo '{"id":"k1","from":"a","to":"b"}' >> tables/Knows.jsonl""")
    before = m.log_count()
    with pytest.raises(OSError) as error:
        os.unlink(m.path("tables", "Person.jsonl"))
    assert error.value.errno == errno.EBUSY
    assert m.log_count() == before


def test_an_edge_to_a_missing_node_fails_the_write(m):
    m.write("schema/Knows.json", json.dumps(
        {"kind": "edge", "from": "Person", "to": "Person", "properties": {}}))
    before = m.log_count()
    result = m.sh("""echo '{"id":"k1","from":"a","to":"nobody"}' >> tables/Knows.jsonl""", check=False)
    assert result.returncode != 0
    assert m.log_count() == before
    assert m.errors()[-1]["path"] == "tables/Knows.jsonl"


def test_a_row_longer_than_row_max_is_efbig(store, mounter):
    import_rows(store, "Person", PEOPLE)
    m = mounter(store, options=["row_max=100"])
    descriptor = os.open(m.path("tables", "Person.jsonl"), os.O_WRONLY | os.O_APPEND)
    try:
        with pytest.raises(OSError) as error:
            os.write(descriptor, b'{"id":"c","name":"' + b"x" * 200 + b'"}\n')
        assert error.value.errno == errno.EFBIG
    finally:
        with pytest.raises(OSError):
            os.close(descriptor)
    assert exported(m) == jsonl(PEOPLE)


def test_more_than_staged_max_is_enospc(store, mounter):
    import_rows(store, "Person", PEOPLE)
    m = mounter(store, options=["staged_max=2000"])
    rows = jsonl([{"id": str(i), "name": "n" * 40} for i in range(200)]).encode()
    descriptor = os.open(m.path("tables", "Person.jsonl"), os.O_WRONLY | os.O_TRUNC)
    try:
        with pytest.raises(OSError) as error:
            os.write(descriptor, rows)
        assert error.value.errno == errno.ENOSPC
    finally:
        with pytest.raises(OSError):
            os.close(descriptor)
    assert exported(m) == jsonl(PEOPLE)


def test_a_read_only_mount_refuses_writes(store, mounter):
    import_rows(store, "Person", PEOPLE)
    m = mounter(store, options=["ro"])
    with pytest.raises(OSError) as error:
        open(m.path("tables", "Person.jsonl"), "a")
    assert error.value.errno == errno.EROFS
    assert table(m) == jsonl(PEOPLE)


def test_vim_renaming_its_backup_publishes_one_overwrite(m):
    # With backupcopy=no vim renames the file to its backup, writes a new file
    # and removes the backup: one overwrite, no drop.
    before = m.log_count()
    m.sh(f"{vim_binary()} -es -c 'set nocompatible' -c 'set backupcopy=no' -c 'set writebackup' "
         f"-c '%s/Bob/Rob/' -c 'wq' tables/Person.jsonl")
    one_commit(m, before, "overwrite")
    assert table(m) == jsonl([{"id": "a", "name": "Ada"}, {"id": "b", "name": "Rob"}])
    assert sorted(os.listdir(m.path("tables"))) == ["Person.jsonl"]


def test_mv_to_a_scratch_name_hides_the_table_without_a_commit(m):
    before = m.log_count()
    m.sh("mv tables/Person.jsonl tables/Person.bak")
    assert sorted(os.listdir(m.path("tables"))) == ["Person.bak"]
    assert m.read("tables", "Person.bak") == jsonl(PEOPLE)
    assert m.log_count() == before
    assert exported(m) == jsonl(PEOPLE)


def test_mv_to_a_scratch_name_then_rm_drops_the_table(m):
    before = m.log_count()
    m.sh("mv tables/Person.jsonl tables/Person.bak && rm tables/Person.bak")
    one_commit(m, before, "drop")
    assert os.listdir(m.path("tables")) == []


def test_touch_of_a_new_name_creates_an_empty_table(m):
    m.sh("touch tables/Empty.jsonl")
    assert wait_for(lambda: m.path("heads", "Empty.json").exists())
    assert table(m, "Empty") == ""
    assert m.head("Empty")["row_count"] == 0
