"""staging/: several tables published as ONE commit (docs/MOUNT.md "Writing")."""
import errno
import json
import os

import pytest

from conftest import graphfs, import_rows, jsonl

PEOPLE = [{"id": "a", "name": "Ada"}, {"id": "b", "name": "Bob"}]
CITIES = [{"id": "o", "name": "Oslo"}]
KNOWS_SCHEMA = {"kind": "edge", "from": "Person", "to": "Person", "properties": {}}


@pytest.fixture
def m(store, mounter):
    import_rows(store, "Person", PEOPLE)
    return mounter(store)


def exported(m, name):
    return graphfs("export", m.store, name).stdout.decode()


def test_two_staged_tables_publish_as_one_commit(m):
    before = m.log_count()
    m.write("staging/Person.jsonl", jsonl([{"id": "z", "name": "Zed"}]))
    m.write("staging/City.jsonl", jsonl(CITIES))
    assert m.log_count() == before
    m.sh("echo 'people and places' > staging/.commit")
    log = m.log()
    assert len(log) == before + 1
    assert log[0]["message"] == "people and places"
    assert sorted(change["table"] for change in log[0]["changes"]) == ["City", "Person"]
    assert exported(m, "Person") == jsonl([{"id": "z", "name": "Zed"}])
    assert exported(m, "City") == jsonl(CITIES)


def test_staging_is_empty_after_a_commit(m):
    m.write("staging/City.jsonl", jsonl(CITIES))
    m.sh("echo done > staging/.commit")
    assert os.listdir(m.path("staging")) == [".commit"]


def test_staged_files_are_readable_and_tables_unchanged_until_commit(m):
    m.write("staging/Person.jsonl", jsonl([{"id": "z", "name": "Zed"}]))
    assert m.read("staging", "Person.jsonl") == jsonl([{"id": "z", "name": "Zed"}])
    assert sorted(os.listdir(m.path("staging"))) == [".commit", "Person.jsonl"]
    assert m.read("tables", "Person.jsonl") == jsonl(PEOPLE)


def test_append_in_staging_stages_a_merge(m):
    before = m.log_count()
    m.sh("""echo '{"id":"c","name":"Cy"}' >> staging/Person.jsonl""")
    m.sh("echo merge > staging/.commit")
    log = m.log()
    assert len(log) == before + 1
    assert log[0]["changes"] == [{"table": "Person", "op": "merge", "rows": 1}]
    assert exported(m, "Person") == jsonl(PEOPLE + [{"id": "c", "name": "Cy"}])


def test_a_staged_merge_may_patch_rows(m):
    m.write("staging/Person.jsonl", '{"id":"b","@patch":true,"name":"Bob B."}\n', mode="a")
    m.sh("echo 'patch bob' > staging/.commit")
    assert exported(m, "Person") == jsonl([{"id": "a", "name": "Ada"}, {"id": "b", "name": "Bob B."}])


def test_rm_staging_abandons_everything(m):
    before = m.log_count()
    m.write("staging/Person.jsonl", jsonl([{"id": "z", "name": "Zed"}]))
    m.write("staging/City.jsonl", jsonl(CITIES))
    m.sh("rm staging/*")
    assert os.listdir(m.path("staging")) == [".commit"]
    assert m.log_count() == before
    with pytest.raises(OSError) as error:
        m.write("staging/.commit", "nothing\n")
    assert error.value.errno == errno.ENODATA
    assert m.log_count() == before
    assert exported(m, "Person") == jsonl(PEOPLE)


def test_an_edge_endpoint_may_arrive_in_another_staged_file(m):
    m.write("schema/Knows.json", json.dumps(KNOWS_SCHEMA))
    before = m.log_count()
    # The edge names "c", which only the other staged file creates.
    m.write("staging/Knows.jsonl", jsonl([{"id": "k", "from": "a", "to": "c"}]))
    m.write("staging/Person.jsonl", jsonl(PEOPLE + [{"id": "c", "name": "Cy"}]))
    m.sh("echo together > staging/.commit")
    assert m.log_count() == before + 1
    assert exported(m, "Knows") == jsonl([{"id": "k", "from": "a", "to": "c"}])


def test_a_refused_commit_leaves_the_files_staged_to_fix(m):
    m.write("schema/Knows.json", json.dumps(KNOWS_SCHEMA))
    before = m.log_count()
    m.write("staging/Knows.jsonl", jsonl([{"id": "k", "from": "a", "to": "nobody"}]))
    result = m.sh("echo broken > staging/.commit", check=False)
    assert result.returncode != 0
    assert m.log_count() == before
    assert sorted(os.listdir(m.path("staging"))) == [".commit", "Knows.jsonl"]
    error = m.errors()[-1]
    assert error["path"] == "staging/Knows.jsonl"
    # Fix the staged file and commit again.
    m.write("staging/Knows.jsonl", jsonl([{"id": "k", "from": "a", "to": "b"}]))
    m.sh("echo fixed > staging/.commit")
    assert m.log_count() == before + 1
    assert exported(m, "Knows") == jsonl([{"id": "k", "from": "a", "to": "b"}])


def test_a_bad_staged_row_fails_the_write(m):
    result = m.sh("""echo '{"id":' > staging/Person.jsonl""", check=False)
    assert result.returncode != 0
    assert m.errors()[-1]["path"] == "staging/Person.jsonl"


def test_a_staged_file_without_final_newline_is_committed_with_its_last_line(m):
    before = m.log_count()
    m.sh("""printf '{"id":"o","name":"Oslo"}' > staging/City.jsonl""")
    m.sh("echo last line > staging/.commit")
    assert m.log_count() == before + 1
    assert exported(m, "City") == jsonl([{"id": "o", "name": "Oslo"}])


def test_a_staged_file_ending_inside_a_row_refuses_the_commit(m):
    before = m.log_count()
    m.sh("""printf '{"id":"o","name":"Os' > staging/City.jsonl""")
    result = m.sh("echo nope > staging/.commit", check=False)
    assert result.returncode != 0
    assert m.log_count() == before
    assert "City.jsonl" in os.listdir(m.path("staging"))


def test_sed_i_in_staging_restages(m):
    m.write("staging/Person.jsonl", jsonl(PEOPLE))
    m.sh("sed -i 's/Bob/Rob/' staging/Person.jsonl")
    assert sorted(os.listdir(m.path("staging"))) == [".commit", "Person.jsonl"]
    m.sh("echo edited > staging/.commit")
    assert exported(m, "Person") == jsonl([{"id": "a", "name": "Ada"}, {"id": "b", "name": "Rob"}])


def test_a_staged_schema_is_published_with_its_rows_in_one_commit(m):
    before = m.log_count()
    schema = {"kind": "node", "key": ["name"], "properties": {
        "name": {"type": "string", "nullable": False}, "at": {"type": "vector<2>", "nullable": True}}}
    m.write("staging/schema/Place.json", json.dumps(schema))
    m.write("staging/Place.jsonl", jsonl([{"name": "Oslo", "at": [1.5, 2.5]}]))
    m.sh("echo places > staging/.commit")
    assert m.log_count() == before + 1
    assert json.loads(m.read("schema", "Place.json"))["properties"]["at"]["type"] == "vector<2>"
    assert sorted(os.listdir(m.path("staging", "schema"))) == []


def test_a_dropped_table_restored_from_history_through_staging_keeps_its_schema(m, tmp_path):
    schema = {"kind": "node", "properties": {"v": {"type": "vector<2>", "nullable": False}}}
    m.write("schema/Vec.json", json.dumps(schema))
    m.write("tables/Vec.jsonl", jsonl([{"id": "k", "v": [1.0, 2.0]}]))
    version = m.log()[0]["version"]
    os.unlink(m.path("tables", "Vec.jsonl"))
    m.sh(f"cp history/@{version}/schema/Vec.json staging/schema/ && "
         f"cp history/@{version}/tables/Vec.jsonl staging/ && echo restore > staging/.commit")
    assert m.read("schema", "Vec.json") == m.read("history", f"@{version}", "schema", "Vec.json")
    assert m.read("tables", "Vec.jsonl") == m.read("history", f"@{version}", "tables", "Vec.jsonl")
