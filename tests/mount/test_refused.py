"""Refused writes (docs/MOUNT.md "Refused writes"): a write to a table refused at close
publishes nothing, fails close(2) where a close can still fail, and keeps what was written in
tables/<Name>.jsonl.rej, named on its .graphfs/errors line. Shells ignore close(2)'s error,
so the .rej file is how `echo … > tables/X.jsonl` never loses a user's bytes silently.
"""
import errno
import json
import os

import pytest

from conftest import beside, graphfs, import_rows, jsonl, wait_for

PEOPLE = [{"id": "ada", "name": "Ada"}, {"id": "bob", "name": "Bob"}]
KNOWS = [{"id": "k1", "from": "ada", "to": "bob"}]


def set_schema(store, table, schema):
    path = beside(store, f"{table}.schema.json")
    path.write_text(json.dumps(schema))
    graphfs("schema", store, table, "--set", path)


@pytest.fixture
def m(store, mounter):
    import_rows(store, "Person", PEOPLE)
    set_schema(store, "KNOWS", {"kind": "edge", "from": "Person", "to": "Person", "properties": {}})
    import_rows(store, "KNOWS", KNOWS)
    return mounter(store)


def kept(m, name="Person"):
    """The newest errors line names tables/<name>.jsonl.rej; returns the .rej's bytes."""
    error = m.errors()[-1]
    assert error["kept"] == f"tables/{name}.jsonl.rej", error
    assert f"tables/{name}.jsonl.rej" in error["reason"]
    return m.path("tables", f"{name}.jsonl.rej").read_bytes()


def test_an_incomplete_last_line_appended_is_kept_in_a_rej_file(m):
    before = m.log_count()
    text = '{"id":"v3","name":"V3"}\n{"id":"v4","a"'
    result = m.sh(f"printf '%s' '{text}' >> tables/Person.jsonl; echo $?", check=False)
    assert result.stdout.strip() == b"0"   # the shell does not see close(2)'s error
    assert m.log_count() == before
    assert kept(m) == text.encode()
    assert "Person.jsonl.rej" in os.listdir(m.path("tables"))


def test_an_overwrite_that_would_orphan_edges_is_kept_in_a_rej_file(m):
    before = m.log_count()
    m.sh("""echo '{"id":"bob","name":"Bob"}' > tables/Person.jsonl""", check=False)
    assert m.log_count() == before
    assert "still referenced" in m.errors()[-1]["reason"]
    assert kept(m) == b'{"id":"bob","name":"Bob"}\n'
    assert m.read("tables", "Person.jsonl") == jsonl(PEOPLE)


@pytest.mark.parametrize("command", [": > tables/Person.jsonl", "cp /dev/null tables/Person.jsonl"])
def test_emptying_a_referenced_table_leaves_an_empty_rej_file_and_an_errors_line(m, command):
    before = m.log_count()
    m.sh(command, check=False)
    # the empty overwrite is published at the last close, which the kernel sends after close(2)
    assert wait_for(lambda: m.errors() and "kept" in m.errors()[-1])
    assert m.log_count() == before
    assert kept(m) == b""
    assert m.read("tables", "Person.jsonl") == jsonl(PEOPLE)


def test_close_fails_where_it_can_and_the_bytes_are_kept(m):
    handle = os.open(m.path("tables", "Person.jsonl"), os.O_WRONLY | os.O_APPEND)
    os.write(handle, b'{"id":"carl","name":"Carl"}\n{"id":')
    with pytest.raises(OSError):
        os.close(handle)
    assert kept(m) == b'{"id":"carl","name":"Carl"}\n{"id":'


def test_an_edit_of_a_table_that_moved_is_refused_and_kept(m):
    handle = os.open(m.path("tables", "Person.jsonl"), os.O_RDWR)
    os.pwrite(handle, b"E", len('{"id":"ada","name":"'))   # Ada -> Eda, in place
    # a commit meanwhile, from another handle (a child process would flush this handle at exec)
    m.write("tables/Person.jsonl", jsonl([{"id": "cid", "name": "Cid"}]), mode="a")
    with pytest.raises(OSError):
        os.close(handle)
    assert kept(m) == jsonl(PEOPLE).replace('"Ada"', '"Eda"').encode()


def test_the_newest_refusal_replaces_the_rej_file_and_rm_removes_it(m):
    m.sh("printf '{\"id\":' >> tables/Person.jsonl", check=False)
    m.sh("printf '{\"id\":\"x\",' >> tables/Person.jsonl", check=False)
    assert kept(m) == b'{"id":"x",'
    os.remove(m.path("tables", "Person.jsonl.rej"))
    assert "Person.jsonl.rej" not in os.listdir(m.path("tables"))
    assert m.read("tables", "Person.jsonl") == jsonl(PEOPLE)


def test_a_rej_file_survives_a_remount(m, mounter):
    m.sh("printf '{\"id\":\"lost?\"' >> tables/Person.jsonl", check=False)
    mounter.unmount(m)
    again = mounter(m.store)
    assert again.path("tables", "Person.jsonl.rej").read_bytes() == b'{"id":"lost?"'


def test_a_write_that_publishes_leaves_no_rej_file(m):
    m.sh("""echo '{"id":"dan","name":"Dan"}' >> tables/Person.jsonl""")
    m.sh("""printf '{"id":"eve","name":"Eve"}' >> tables/Person.jsonl""")
    assert sorted(os.listdir(m.path("tables"))) == ["KNOWS.jsonl", "Person.jsonl"]


def test_a_patch_whose_table_moved_before_close_is_refused_and_kept(m):
    """A patch merges into the row as the write began; had the table moved by the publish,
    publishing would undo the other change: refused instead (EBUSY), the line kept."""
    handle = os.open(m.path("tables", "Person.jsonl"), os.O_WRONLY | os.O_APPEND)
    line = b'{"id":"ada","@patch":true,"name":"Ada L."}\n'
    os.write(handle, line)
    m.write("tables/Person.jsonl", jsonl([{"id": "cid", "name": "Cid"}]), mode="a")
    with pytest.raises(OSError) as raised:
        os.close(handle)
    assert raised.value.errno == errno.EBUSY
    assert kept(m) == line
    assert "Ada L." not in m.read("tables", "Person.jsonl")
