"""branches/: create, write, history and delete branches through the mount."""
import errno
import json
import os

import pytest

from conftest import graphfs, import_rows, jsonl

PEOPLE = [{"id": "a", "name": "Ada"}, {"id": "b", "name": "Bob"}]


@pytest.fixture
def m(store, mounter):
    import_rows(store, "Person", PEOPLE)
    return mounter(store)


def branches(store):
    return graphfs("branch", store, "list").stdout.decode()


def test_mkdir_creates_a_branch_from_the_mounted_head(m):
    os.mkdir(m.path("branches", "dev"))
    assert "dev" in branches(m.store)
    assert sorted(os.listdir(m.path("branches"))) == ["dev", "main"]
    assert m.read("branches", "dev", "tables", "Person.jsonl") == jsonl(PEOPLE)


def test_a_write_on_a_branch_leaves_main_untouched(m):
    os.mkdir(m.path("branches", "dev"))
    m.sh("""echo '{"id":"c","name":"Cy"}' >> branches/dev/tables/Person.jsonl""")
    assert m.read("branches", "dev", "tables", "Person.jsonl") == jsonl(
        PEOPLE + [{"id": "c", "name": "Cy"}])
    assert m.read("tables", "Person.jsonl") == jsonl(PEOPLE)
    assert graphfs("export", m.store, "Person").stdout.decode() == jsonl(PEOPLE)
    assert graphfs("export", m.store, "Person", "--branch", "dev").stdout.decode() == jsonl(
        PEOPLE + [{"id": "c", "name": "Cy"}])
    head = json.loads(m.read("branches", "dev", "heads", "Person.json"))
    assert head["table_branch"] == "dev"


def test_a_branch_has_its_own_log_and_history(m):
    os.mkdir(m.path("branches", "dev"))
    m.sh("""echo '{"id":"c","name":"Cy"}' >> branches/dev/tables/Person.jsonl""")
    log = [json.loads(line) for line in m.read("branches", "dev", "log").splitlines()]
    assert log[0]["branch"] == "dev"
    newest = log[0]["version"]
    assert f"@{newest}" in os.listdir(m.path("branches", "dev", "history"))
    assert f"@{newest}" not in os.listdir(m.path("history"))
    assert m.read("branches", "dev", "history", f"@{newest}", "tables", "Person.jsonl") == jsonl(
        PEOPLE + [{"id": "c", "name": "Cy"}])
    assert m.log()[0]["branch"] == "main"


def test_staging_on_a_branch_commits_on_that_branch(m):
    os.mkdir(m.path("branches", "dev"))
    m.write("branches/dev/staging/City.jsonl", jsonl([{"id": "o", "name": "Oslo"}]))
    m.sh("echo city > branches/dev/staging/.commit")
    assert "City.jsonl" in os.listdir(m.path("branches", "dev", "tables"))
    assert "City.jsonl" not in os.listdir(m.path("tables"))


def test_rmdir_deletes_a_branch(m):
    os.mkdir(m.path("branches", "dev"))
    os.rmdir(m.path("branches", "dev"))
    assert os.listdir(m.path("branches")) == ["main"]
    assert "dev" not in branches(m.store)


def test_rmdir_main_is_ebusy(m):
    with pytest.raises(OSError) as error:
        os.rmdir(m.path("branches", "main"))
    assert error.value.errno == errno.EBUSY


def test_rmdir_of_the_mounted_branch_is_ebusy(store, mounter):
    import_rows(store, "Person", PEOPLE)
    graphfs("branch", store, "create", "dev")
    m = mounter(store, options=["branch=dev"])
    with pytest.raises(OSError) as error:
        os.rmdir(m.path("branches", "dev"))
    assert error.value.errno == errno.EBUSY


def test_rmdir_of_a_branch_another_was_forked_from_is_enotempty(m):
    os.mkdir(m.path("branches", "dev"))
    graphfs("branch", m.store, "create", "feature", "--from", "dev")
    with pytest.raises(OSError) as error:
        os.rmdir(m.path("branches", "dev"))
    assert error.value.errno == errno.ENOTEMPTY


def test_rmdir_of_a_branch_with_commits_merged_nowhere_is_enotempty_with_an_errors_line(m):
    os.mkdir(m.path("branches", "dev"))
    m.sh("""echo '{"id":"d","name":"Di"}' >> branches/dev/tables/Person.jsonl""")
    with pytest.raises(OSError) as error:
        os.rmdir(m.path("branches", "dev"))
    assert error.value.errno == errno.ENOTEMPTY
    assert "dev" in os.listdir(m.path("branches"))
    last = json.loads(m.read(".graphfs", "errors").splitlines()[-1])
    assert last["path"] == "branches/dev" and "merged nowhere" in last["reason"]
    graphfs("merge", m.store, "dev")
    os.rmdir(m.path("branches", "dev"))
    assert "dev" not in branches(m.store)


def test_mounting_a_branch_serves_it_at_the_root(store, mounter):
    import_rows(store, "Person", PEOPLE)
    graphfs("branch", store, "create", "dev")
    import_rows(store, "Person", [{"id": "c", "name": "Cy"}], mode="merge", branch="dev")
    m = mounter(store, options=["branch=dev"])
    assert m.read("tables", "Person.jsonl") == jsonl(PEOPLE + [{"id": "c", "name": "Cy"}])
    m.sh("""echo '{"id":"d","name":"Di"}' >> tables/Person.jsonl""")
    assert graphfs("export", store, "Person").stdout.decode() == jsonl(PEOPLE)
    assert m.log()[0]["branch"] == "dev"


def test_mkdir_outside_branches_is_refused(m):
    with pytest.raises(OSError) as error:
        os.mkdir(m.path("tables", "sub"))
    assert error.value.errno == errno.EPERM
