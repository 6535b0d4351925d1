"""dump and load: the whole graph as JSON lines and back, the upgrade path
(docs/graphfs.1 dump, load)."""
import json
import os
import random
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def tables_of(cli, store, branch=None):
    heads = cli.heads(store, branch=branch)
    return sorted(head["table_key"] for head in heads)


def assert_same_graph(cli, first, second):
    assert tables_of(cli, first) == tables_of(cli, second)
    for table in tables_of(cli, first):
        assert cli.export(first, table) == cli.export(second, table), table
        assert cli.ok("schema", first, table).stdout == cli.ok("schema", second, table).stdout, table


def dump(cli, store, *args):
    return cli.ok("dump", store, *args).stdout.decode()


def fresh(cli, tmp_path, name):
    path = tmp_path / name
    cli.ok("init", path)
    return path


def test_dump_then_init_and_load_reproduces_the_demo_store(cli, tmp_path):
    demo = tmp_path / "demo"
    subprocess.run([ROOT / "tools" / "demo" / "make-demo-store", demo], check=True,
                   env=dict(os.environ, GRAPHFS=cli.binary))
    text = dump(cli, demo)
    copy = fresh(cli, tmp_path, "copy")
    cli.ok("load", copy, cli.write_file(text))
    assert_same_graph(cli, demo, copy)
    assert dump(cli, copy) == text
    cli.ok("verify", copy)
    assert len(cli.log(copy)) == 1   # one commit


def test_the_dump_lists_schemas_node_tables_first_then_rows_in_envelopes(cli, tmp_path):
    demo = tmp_path / "demo"
    subprocess.run([ROOT / "tools" / "demo" / "make-demo-store", demo], check=True,
                   env=dict(os.environ, GRAPHFS=cli.binary))
    lines = [json.loads(line) for line in dump(cli, demo).splitlines()]
    kinds = [("schema" if "schema" in l else "type" if "type" in l else "edge") for l in lines]
    assert kinds == sorted(kinds, key=["schema", "type", "edge"].index)
    schemas = [l for l in lines if "schema" in l]
    assert [s["data"]["kind"] for s in schemas] == sorted((s["data"]["kind"] for s in schemas),
                                                          key=["node", "edge"].index)
    edge = next(l for l in lines if "edge" in l)
    assert set(edge) == {"edge", "from", "to", "data"} and "id" in edge["data"]
    assert "from" not in edge["data"]


def test_a_random_graph_round_trips_byte_for_byte_including_escapes_and_order(cli, store, tmp_path):
    rng = random.Random(3)
    ids = [f"n{i}" for i in range(50)] + ["quote\"d", "back\\slash", "ünï", "tab\tx", "a/b"]
    people = [{"id": i, "age": rng.randrange(90), "score": rng.random() * 10, "tags": ["x", "y"][:rng.randrange(3)]}
              for i in ids]
    cli.set_schema(store, "Person", {"kind": "node", "properties": {
        "age": {"type": "i64"}, "score": {"type": "f64"}, "tags": {"type": "list<string>"}}})
    cli.import_rows(store, "Person", people)
    cli.set_schema(store, "KNOWS", {"kind": "edge", "from": "Person", "to": "Person",
                                    "properties": {"since": {"type": "i64", "nullable": True}}})
    edges = [{"id": f"e{n}", "from": rng.choice(ids), "to": rng.choice(ids), "since": n} for n in range(300)]
    cli.import_rows(store, "KNOWS", edges)
    cli.import_rows(store, "Person", [{"id": "n3", "age": 1, "score": 0.5, "tags": []}], mode="merge")  # moves n3 last
    copy = fresh(cli, tmp_path, "copy")
    cli.ok("load", copy, cli.write_file(dump(cli, store)))
    assert_same_graph(cli, store, copy)


def test_dump_takes_a_branch_and_a_version(cli, store, tmp_path):
    first = cli.import_rows(store, "Person", [{"id": "a"}])
    cli.import_rows(store, "Person", [{"id": "b"}], mode="merge")
    text = dump(cli, store, "--at", str(first))
    assert '{"type":"Person","data":{"id":"a"}}' in text and '"b"' not in text
    cli.ok("branch", store, "create", "side")
    cli.import_rows(store, "Person", [{"id": "c"}], mode="merge", branch="side")
    assert '"c"' in dump(cli, store, "--branch", "side") and '"c"' not in dump(cli, store)


def test_load_reads_omnigraph_envelopes_without_schema_lines(cli, store):
    text = "\n".join([
        '{ "type": "Person", "data": { "name": "Ada", "id": "ada" } }',
        '{"edge":"KNOWS","to":"bob","from":"ada","data":{"id":"k1","since":1843}}',
        '{"data":{"id":"bob","name":"Bob"},"type":"Person"}',
        '',
    ]) + "\n"
    cli.ok("load", store, cli.write_file(text))
    assert cli.export(store, "Person") == '{"id":"ada","name":"Ada"}\n{"id":"bob","name":"Bob"}\n'
    assert cli.export(store, "KNOWS") == '{"id":"k1","from":"ada","to":"bob","since":1843}\n'
    schema = json.loads(cli.ok("schema", store, "KNOWS").stdout)
    assert schema["from"] == schema["to"] == "Person"


def test_an_edge_table_without_a_schema_between_several_node_tables_is_refused_naming_its_line(cli, store):
    text = ('{"type":"Person","data":{"id":"a"}}\n{"type":"City","data":{"id":"c"}}\n'
            '{"edge":"LIVES_IN","from":"a","to":"c","data":{"id":"l1"}}\n')
    error = cli.fail("load", store, cli.write_file(text))
    assert ":3:" in error and "LIVES_IN has no schema line" in error and "several node tables" in error
    assert cli.log(store) == []


def test_errors_name_the_input_line_and_nothing_is_published(cli, store):
    good = '{"type":"Person","data":{"id":"a"}}\n'
    cases = [
        (good + "not json\n", ":2:", "not a JSON object"),
        (good + '{"type":"Person","data":{"id":"a"}}\n', ":2:", "duplicate id"),
        (good + '{"something":"else"}\n', ":2:", "not a dump line"),
        ('{"schema":"K","data":{"kind":"edge","from":"Person","to":"Person","properties":{}}}\n' + good
         + '{"type":"Person","data":{"id":"b"}}\n{"edge":"K","from":"a","to":"zz","data":{"id":"k"}}\n',
         ":4:", 'to "zz" is not a row of Person'),
        (good + '{"schema":"Person","data":{"kind":"node","properties":{}}}\n', ":2:", "comes after its rows"),
    ]
    for text, where, what in cases:
        error = cli.fail("load", store, cli.write_file(text))
        assert where in error and what in error, (text, error)
    assert cli.log(store) == []


def test_edges_may_come_before_their_nodes(cli, store):
    text = ('{"schema":"Person","data":{"kind":"node","properties":{}}}\n'
            '{"schema":"K","data":{"kind":"edge","from":"Person","to":"Person","properties":{}}}\n'
            '{"edge":"K","from":"a","to":"b","data":{"id":"k"}}\n'
            '{"type":"Person","data":{"id":"a"}}\n{"type":"Person","data":{"id":"b"}}\n')
    cli.ok("load", store, cli.write_file(text))
    cli.ok("verify", store)


def test_load_overwrites_the_tables_it_names_and_leaves_the_others(cli, store):
    cli.import_rows(store, "Person", [{"id": "old"}])
    cli.import_rows(store, "City", [{"id": "oslo"}])
    cli.ok("load", store, cli.write_file('{"type":"Person","data":{"id":"new"}}\n'))
    assert cli.export(store, "Person") == '{"id":"new"}\n'
    assert cli.export(store, "City") == '{"id":"oslo"}\n'
