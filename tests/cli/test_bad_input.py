"""Bad input: every rejected import is one line naming the file and line, a
non-zero exit, and leaves the store byte-identical.

Every test starts from a copy of one store made once for the module (a store is a
directory: the copy is the same store), and reads every table before and after with
one `dump` each: few launches, so the file runs its many refusals cheaply also under ASan."""
import json
import shutil

import pytest

from conftest import Cli, graphfs_binary, jsonl, store_digest


@pytest.fixture(scope="module")
def populated_template(tmp_path_factory):
    """A store with Person (age i64), Company and an edge table WORKS_AT declared Person -> Company."""
    work = tmp_path_factory.mktemp("bad_input")
    cli = Cli(graphfs_binary(), work)
    store = work / "store"
    cli.ok("init", store)
    cli.import_rows(store, "Person", [{"id": "ann", "name": "Ann", "age": 31},
                                      {"id": "bo", "name": "Bo", "age": 40}])
    cli.import_rows(store, "Company", [{"id": "acme", "name": "Acme"}])
    cli.set_schema(store, "WORKS_AT", {"kind": "edge", "from": "Person", "to": "Company",
                                       "properties": {"since": {"type": "i64", "nullable": True}}})
    cli.import_rows(store, "WORKS_AT", [{"id": "w1", "from": "ann", "to": "acme", "since": 2020}])
    return store


@pytest.fixture
def populated(populated_template, tmp_path):
    store = tmp_path / "store"
    shutil.copytree(populated_template, store, symlinks=True)
    return store


def refuse(cli, store, table, text, line, mode="overwrite"):
    """Imports text, expects refusal naming the file and line, and an unchanged store."""
    before = store_digest(store)
    rows = cli.ok("dump", store).stdout
    path = cli.write_file(text)
    error = cli.fail("import", store, table, path, "--mode", mode)
    assert f"{path}:{line}:" in error, error
    assert store_digest(store) == before
    assert cli.ok("dump", store).stdout == rows
    return error


def test_malformed_json_is_refused_at_its_line(cli, populated):
    refuse(cli, populated, "Person", '{"id":"cy","name":"Cy","age":5}\n{"id":"di","name":\n', 2,
           mode="merge")


@pytest.mark.parametrize("line", [
    '{"id":"x","name":"X","age":1',          # unterminated object
    '["not","an","object"]',                # not an object
    '{"id":"x","name":"X","age":1}}',        # trailing garbage
    '{"id":"x","id":"y"}',                   # duplicate key
    "{'id':'x'}",                            # not JSON quotes
    '{"id":"x","name":"\x00"}',              # raw control character
    '\xff\xfe garbage',                      # not UTF-8
])
def test_hostile_lines_are_refused_at_their_line(cli, populated, line):
    text = '{"id":"cy","name":"Cy","age":5}\n{"id":"di","name":"Di","age":6}\n'.encode() + \
        line.encode("latin-1" if line.startswith("\xff") else "utf-8") + b"\n"
    refuse(cli, populated, "Person", text, 3, mode="merge")


def test_a_wrong_type_is_refused_at_its_line(cli, populated):
    error = refuse(cli, populated, "Person", '{"id":"cy","name":"Cy","age":5}\n'
                                             '{"id":"di","name":"Di","age":"old"}\n', 2, mode="merge")
    assert "age" in error


def test_a_wrong_type_in_an_overwrite_is_refused(cli, populated):
    refuse(cli, populated, "Person", '{"id":"cy","name":"Cy","age":5}\n'
                                     '{"id":"di","name":7,"age":6}\n', 2)


def test_conflicting_types_in_a_new_table_are_refused(cli, populated):
    refuse(cli, populated, "Fresh", '{"id":"a","size":1}\n{"id":"b","size":2}\n'
                                    '{"id":"c","size":"huge"}\n', 3)


def test_duplicate_ids_in_one_overwrite_are_refused_at_the_second(cli, populated):
    error = refuse(cli, populated, "Person", '{"id":"cy","name":"Cy","age":5}\n'
                                             '{"id":"di","name":"Di","age":6}\n'
                                             '{"id":"cy","name":"Cy2","age":7}\n', 3)
    assert "cy" in error


def test_an_edge_to_a_missing_node_is_refused_at_its_line(cli, populated):
    error = refuse(cli, populated, "WORKS_AT", '{"id":"w2","from":"bo","to":"acme"}\n'
                                               '{"id":"w3","from":"bo","to":"globex"}\n', 2,
                   mode="merge")
    assert "globex" in error


def test_an_edge_from_a_missing_node_is_refused_at_its_line(cli, populated):
    refuse(cli, populated, "WORKS_AT", '{"id":"w2","from":"nobody","to":"acme"}\n', 1, mode="merge")


def test_an_edge_without_endpoints_is_refused(cli, populated):
    refuse(cli, populated, "WORKS_AT", '{"id":"w2","from":"bo"}\n', 1, mode="merge")


def test_a_line_over_the_row_limit_is_refused(cli, populated):
    huge = json.dumps({"id": "big", "name": "x" * (2 << 20), "age": 1}) + "\n"
    refuse(cli, populated, "Person", '{"id":"cy","name":"Cy","age":5}\n' + huge, 2, mode="merge")


def test_a_refused_import_publishes_nothing_even_after_valid_lines(cli, populated):
    good = jsonl([{"id": f"n{i}", "name": "N", "age": i} for i in range(500)])
    refuse(cli, populated, "Person", good + '{"id":"bad","age":"x"}\n', 501, mode="merge")
    assert len(cli.log(populated)) == 4


@pytest.mark.parametrize("name", ["..", "../Escape", "a/b", "/abs", "9lives", "has space", "x" * 129,
                                  "dot.ted", "tab\tname"])
def test_invalid_table_names_are_refused(cli, populated, name):
    before = store_digest(populated)
    path = cli.write_file('{"id":"a"}\n')
    error = cli.fail("import", populated, name, path)
    assert name in error
    assert store_digest(populated) == before
    assert not (populated.parent / "Escape").exists()


def test_an_empty_table_name_is_refused(cli, populated):
    before = store_digest(populated)
    path = cli.write_file('{"id":"a"}\n')
    cli.fail("import", populated, "", path)
    assert store_digest(populated) == before


def test_a_missing_input_file_is_refused(cli, populated):
    before = store_digest(populated)
    error = cli.fail("import", populated, "Person", cli.work / "absent.jsonl")
    assert "absent.jsonl" in error
    assert store_digest(populated) == before


def test_an_import_into_a_missing_branch_is_refused(cli, populated):
    before = store_digest(populated)
    path = cli.write_file('{"id":"a","name":"A","age":1}\n')
    error = cli.fail("import", populated, "Person", path, "--branch", "nope")
    assert "nope" in error
    assert store_digest(populated) == before


def test_an_incompatible_schema_change_is_refused(cli, populated):
    before = store_digest(populated)
    path = cli.write_file(json.dumps({"kind": "node", "properties": {
        "name": {"type": "i64", "nullable": False}}}), name="bad-schema.json")
    cli.fail("schema", populated, "Person", "--set", path)
    assert store_digest(populated) == before
