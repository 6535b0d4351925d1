"""diff/, merge/ and history/by-id/ on the mount (docs/MOUNT.md "Diffs", "Merging", "History")."""
import errno
import json
import os

import pytest

from conftest import beside, graphfs, import_rows, wait_for

PERSON = {"kind": "node", "properties": {"n": {"type": "i64", "nullable": True},
                                         "s": {"type": "string", "nullable": True}}}


@pytest.fixture
def forked(store):
    path = beside(store, "person.schema.json")
    path.write_text(json.dumps(PERSON))
    graphfs("schema", store, "Person", "--set", path)
    import_rows(store, "Person", [{"id": "a", "n": 1, "s": "x"}, {"id": "b", "n": 2, "s": "y"},
                                  {"id": "c", "n": 3, "s": "z"}])
    graphfs("branch", store, "create", "dev")
    return store


def lines(text):
    return [json.loads(line) for line in text.splitlines()]


def test_merge_lists_every_other_branch_and_previews_its_status(forked, mounter):
    m = mounter(forked)
    assert os.listdir(m.path("merge")) == ["dev"]
    assert sorted(os.listdir(m.path("merge", "dev"))) == [".commit", "conflicts", "status", "tables"]
    assert m.read("merge", "dev", "status") == "up-to-date\n"
    # another process's commits show within the refresh bound (docs/MOUNT.md)
    import_rows(forked, "Person", [{"id": "d", "n": 4, "s": "w"}], mode="merge", branch="dev")
    assert wait_for(lambda: m.read("merge", "dev", "status") == "fast-forward\n", timeout=5.0)
    import_rows(forked, "Person", [{"id": "e", "n": 5, "s": "v"}], mode="merge")
    assert wait_for(lambda: m.read("merge", "dev", "status") == "merge\n", timeout=5.0)


def test_the_preview_is_byte_for_byte_what_the_commit_publishes(forked, mounter):
    import_rows(forked, "Person", [{"id": "a", "n": 10, "s": "x"}, {"id": "d", "n": 4, "s": "w"}], mode="merge",
                branch="dev")
    import_rows(forked, "Person", [{"id": "b", "n": 2, "s": "Y"}, {"id": "a", "n": 1, "s": "X"}], mode="merge")
    m = mounter(forked)
    preview = m.read("merge", "dev", "tables", "Person.jsonl")
    assert os.listdir(m.path("merge", "dev", "tables")) == ["Person.jsonl"]
    before = m.log_count()
    m.write("merge/dev/.commit", "bring dev in\n")
    assert m.read("tables", "Person.jsonl") == preview
    assert {row["id"]: row for row in lines(preview)}["a"] == {"id": "a", "n": 10, "s": "X"}
    log = m.log()
    assert m.log_count() == before + 1 and log[0]["message"] == "bring dev in" and len(log[0]["parents"]) == 2
    assert m.read("merge", "dev", "status") == "up-to-date\n"


def test_a_merge_with_conflicts_fails_the_write_with_ebusy_and_shows_them(forked, mounter):
    import_rows(forked, "Person", [{"id": "a", "n": 11, "s": "x"}], mode="merge", branch="dev")
    import_rows(forked, "Person", [{"id": "a", "n": 12, "s": "x"}], mode="merge")
    m = mounter(forked)
    assert m.read("merge", "dev", "status") == "conflicts\n"
    assert os.listdir(m.path("merge", "dev", "conflicts")) == ["Person.jsonl"]
    [conflict] = lines(m.read("merge", "dev", "conflicts", "Person.jsonl"))
    assert conflict["kind"] == "divergent_update" and conflict["id"] == "a" and conflict["property"] == "n"
    before = m.log_count()
    with pytest.raises(OSError) as raised:
        m.write("merge/dev/.commit", "try\n")
    assert raised.value.errno == errno.EBUSY
    assert m.log_count() == before
    error = m.errors()[-1]
    assert error["path"] == "merge/dev/.commit" and "1 conflict merging dev into main" in error["reason"]


def test_diff_shows_the_rows_and_tables_that_changed_between_two_names(forked, mounter):
    import_rows(forked, "Person", [{"id": "b", "n": 20, "s": "y"}], mode="merge", branch="dev")
    import_rows(forked, "Other", [{"id": "o"}], branch="dev")
    m = mounter(forked)
    assert sorted(os.listdir(m.path("diff", "main..dev"))) == [".tables.jsonl", "Other.jsonl", "Person.jsonl"]
    assert lines(m.read("diff", "main..dev", "Person.jsonl")) == [
        {"op": "update", "id": "b", "before": {"id": "b", "n": 2, "s": "y"}, "after": {"id": "b", "n": 20, "s": "y"}}]
    assert lines(m.read("diff", "main..dev", ".tables.jsonl")) == [{"op": "create", "table": "Other"}]
    assert m.read("diff", "@2..dev", "Person.jsonl") == m.read("diff", "main..dev", "Person.jsonl")
    with pytest.raises(FileNotFoundError):
        os.listdir(m.path("diff", "main..nowhere"))
    with pytest.raises(OSError):
        m.write("diff/main..dev/Person.jsonl", "x\n")


def test_history_by_id_has_one_line_per_version_in_which_the_row_changed(forked, mounter):
    import_rows(forked, "Person", [{"id": "a", "n": 5, "s": "x"}], mode="merge")
    import_rows(forked, "Person", [{"id": "b", "n": 6, "s": "y"}], mode="merge")   # a unchanged
    m = mounter(forked)
    m.write("tables/Person.jsonl", '{"id":"a","@delete":true}\n', mode="a")
    history = lines(m.read("history", "by-id", "Person", "a.jsonl"))
    assert [entry["op"] for entry in history] == ["delete", "update", "insert"]
    assert history[1]["row"] == {"id": "a", "n": 5, "s": "x"} and history[0]["row"] is None
    assert "a.jsonl" not in os.listdir(m.path("history", "by-id", "Person"))   # deleted: resolves, not listed
    assert "b.jsonl" in os.listdir(m.path("history", "by-id", "Person"))
    with pytest.raises(FileNotFoundError):
        m.read("history", "by-id", "Person", "never.jsonl")
    cli = graphfs("log", forked, "--table", "Person", "--id", "a").stdout.decode()
    assert cli == m.read("history", "by-id", "Person", "a.jsonl")


def test_a_branch_mount_merges_main_into_itself_through_its_own_merge_directory(forked, mounter):
    import_rows(forked, "Person", [{"id": "m", "n": 7, "s": "main"}], mode="merge")
    import_rows(forked, "Person", [{"id": "d", "n": 8, "s": "dev"}], mode="merge", branch="dev")
    m = mounter(forked)
    assert os.listdir(m.path("branches", "dev", "merge")) == ["main"]
    assert m.read("branches", "dev", "merge", "main", "status") == "merge\n"
    preview = m.read("branches", "dev", "merge", "main", "tables", "Person.jsonl")
    m.write("branches/dev/merge/main/.commit", "main into dev\n")
    assert m.read("branches", "dev", "tables", "Person.jsonl") == preview
    assert {row["id"] for row in lines(preview)} == {"a", "b", "c", "d", "m"}
    assert m.log("branches/dev")[0]["message"] == "main into dev"
