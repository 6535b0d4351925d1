"""Edges as first-class rows: referential integrity and the adjacency indexes,
through the command line (docs/MOUNT.md "Validation", docs/FORMAT.md §12.1)."""
import json

import pytest

PERSON = {"kind": "node", "properties": {"name": {"type": "string", "nullable": True}}}
KNOWS = {"kind": "edge", "from": "Person", "to": "Person", "properties": {}}


@pytest.fixture
def graph(cli, store):
    cli.ok("schema", store, "Person", "--set", cli.write_file(json.dumps(PERSON), "person.json"))
    cli.import_rows(store, "Person", [{"id": "ada"}, {"id": "bob"}, {"id": "cy"}])
    cli.ok("schema", store, "Knows", "--set", cli.write_file(json.dumps(KNOWS), "knows.json"))
    cli.import_rows(store, "Knows", [{"id": "k1", "from": "ada", "to": "bob"},
                                     {"id": "k2", "from": "bob", "to": "cy"}])
    return store


def test_a_delete_of_a_referenced_node_names_the_line_the_edge_and_the_way_out(cli, graph):
    path = cli.write_file('{"id":"cy"}\n{"id":"bob","@delete":true}\n')
    error = cli.fail("import", graph, "Person", path, "--mode", "merge")
    assert f"{path}:2:" in error
    assert 'node "bob" is still referenced by edge "k2" of Knows (its from)' in error
    assert '{"id":"bob","@delete":"detach"}' in error
    cli.ok("verify", graph)


def test_an_overwrite_that_leaves_a_referenced_node_out_is_refused(cli, graph):
    before = cli.export(graph, "Person")
    path = cli.write_file('{"id":"ada"}\n{"id":"bob"}\n')
    error = cli.fail("import", graph, "Person", path)
    assert 'node "cy" of Person is still referenced by edge "k2" of Knows (its to)' in error
    assert cli.export(graph, "Person") == before


def test_detach_deletes_the_node_and_its_edges_in_one_commit(cli, graph):
    cli.import_rows(graph, "Person", '{"id":"bob","@delete":"detach"}\n', mode="merge")
    assert cli.export(graph, "Knows") == ""
    assert cli.export(graph, "Person") == '{"id":"ada"}\n{"id":"cy"}\n'
    newest = cli.log(graph)[0]
    assert sorted(change["table"] for change in newest["changes"]) == ["Knows", "Person"]
    cli.ok("verify", graph)


def test_detach_counts_each_edge_once_a_self_loop_found_from_both_ends_included(cli, graph):
    cli.import_rows(graph, "Knows", [{"id": "loop", "from": "bob", "to": "bob"}], mode="merge")
    cli.import_rows(graph, "Person", '{"id":"bob","@delete":"detach"}\n', mode="merge")
    changes = {change["table"]: change["rows"] for change in cli.log(graph)[0]["changes"]}
    assert changes == {"Person": 1, "Knows": 3}   # k1, k2 and the loop
    cli.ok("verify", graph)


def test_detaching_both_ends_of_an_edge_in_one_commit_deletes_it_once(cli, graph):
    cli.import_rows(graph, "Person", '{"id":"ada","@delete":"detach"}\n{"id":"bob","@delete":"detach"}\n',
                    mode="merge")
    changes = {change["table"]: change["rows"] for change in cli.log(graph)[0]["changes"]}
    assert changes == {"Person": 2, "Knows": 2}   # k1 (ada to bob) once, and k2
    assert cli.export(graph, "Knows") == ""


def test_verify_finds_a_dangling_edge_planted_by_a_test_only_failpoint(cli, graph):
    path = cli.write_file('{"id":"cy","@delete":true}\n')
    cli.ok("import", graph, "Person", path, "--mode", "merge",
           env={"GRAPHFS_FAILPOINT": "integrity.skip_reference_checks"})
    result = cli.run("verify", graph)
    assert result.returncode == 1
    findings = result.stdout.decode()
    assert 'table Knows: dangling edge "k2": to "cy" is not a row of its node table (Person)' in findings


def test_ids_with_a_nul_character_are_refused(cli, graph):
    path = cli.write_file('{"id":"a\\u0000b"}\n')
    error = cli.fail("import", graph, "Person", path, "--mode", "merge")
    assert "NUL" in error
