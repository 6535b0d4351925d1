"""graph/: a node's row, its edges and its neighbours as files and links
(docs/MOUNT.md "The graph"), checked against a model of a random graph."""
import errno
import json
import os
import random

import pytest

from conftest import beside, graphfs, import_rows, jsonl

PERSON = {"kind": "node", "properties": {"name": {"type": "string", "nullable": True}}}
CITY = {"kind": "node", "properties": {}}


def set_schema(store, table, schema):
    path = beside(store, f"{table}.schema.json")
    path.write_text(json.dumps(schema))
    graphfs("schema", store, table, "--set", path)


def encode(node_id):
    if node_id in (".", ".."):
        return "%2E" * len(node_id)
    return node_id.replace("%", "%25").replace("/", "%2F")


# ids that need encoding, one that is a prefix of others, unicode, and dots
IDS = ["ada", "ad", "a/b", "50%", ".", "..", ".hidden", "ünï", "x y", "n0"]


@pytest.fixture
def graph(store):
    """People with random KNOWS edges (parallel edges, self-loops) and LIVES_IN edges to cities."""
    rng = random.Random(7)
    set_schema(store, "Person", PERSON)
    import_rows(store, "Person", [{"id": i, "name": i.upper()} for i in IDS])
    set_schema(store, "City", CITY)
    import_rows(store, "City", [{"id": "oslo"}, {"id": "rome"}])
    set_schema(store, "KNOWS", {"kind": "edge", "from": "Person", "to": "Person", "properties": {}})
    knows = []
    for number in range(60):
        source = rng.choice(IDS)
        target = source if number % 9 == 0 else rng.choice(IDS)
        knows.append({"id": f"k{number:03d}", "from": source, "to": target})
    import_rows(store, "KNOWS", knows)
    set_schema(store, "LIVES_IN", {"kind": "edge", "from": "Person", "to": "City", "properties": {}})
    lives = [{"id": f"l{n}", "from": i, "to": rng.choice(["oslo", "rome"])} for n, i in enumerate(IDS)]
    import_rows(store, "LIVES_IN", lives)
    return store, knows, lives


def test_graph_lists_node_tables_and_their_rows_by_encoded_id(graph, mounter):
    store, _, _ = graph
    m = mounter(store)
    assert sorted(os.listdir(m.path("graph"))) == ["City", "Person"]
    assert sorted(os.listdir(m.path("graph", "Person"))) == sorted(encode(i) for i in IDS)
    for node_id in IDS:
        row = m.read("graph", "Person", encode(node_id), "row.json")
        assert json.loads(row) == {"id": node_id, "name": node_id.upper()}
        assert sorted(os.listdir(m.path("graph", "Person", encode(node_id)))) == ["in", "out", "row.json"]


def test_out_and_in_match_a_model_with_parallel_edges_and_self_loops(graph, mounter):
    store, knows, lives = graph
    m = mounter(store)
    for node_id in IDS:
        base = m.path("graph", "Person", encode(node_id))
        assert sorted(os.listdir(base / "out")) == ["KNOWS", "KNOWS.jsonl", "LIVES_IN", "LIVES_IN.jsonl"]
        assert sorted(os.listdir(base / "in")) == ["KNOWS", "KNOWS.jsonl"]
        out_rows = sorted((e for e in knows if e["from"] == node_id), key=lambda e: e["id"])
        in_rows = sorted((e for e in knows if e["to"] == node_id), key=lambda e: e["id"])
        assert (base / "out" / "KNOWS.jsonl").read_text() == jsonl(out_rows)
        assert (base / "in" / "KNOWS.jsonl").read_text() == jsonl(in_rows)
        assert sorted(os.listdir(base / "out" / "KNOWS")) == sorted({encode(e["to"]) for e in out_rows})
        assert sorted(os.listdir(base / "in" / "KNOWS")) == sorted({encode(e["from"]) for e in in_rows})
        for edge in out_rows:
            link = base / "out" / "KNOWS" / encode(edge["to"])
            assert os.readlink(link) == f"../../../../Person/{encode(edge['to'])}"
            assert json.loads((link / "row.json").read_text())["id"] == edge["to"]
        city = next(e["to"] for e in lives if e["from"] == node_id)
        assert os.listdir(base / "out" / "LIVES_IN") == [city]
        assert os.readlink(base / "out" / "LIVES_IN" / city) == f"../../../../City/{city}"
    assert sorted(os.listdir(m.path("graph", "City", "oslo", "in"))) == ["LIVES_IN", "LIVES_IN.jsonl"]
    assert os.listdir(m.path("graph", "City", "oslo", "out")) == []


def test_two_hops_are_a_glob(graph, mounter):
    store, knows, _ = graph
    m = mounter(store)
    first = {e["to"] for e in knows if e["from"] == "ada"}
    second = {e["to"] for e in knows if e["from"] in first}
    listed = m.sh("ls -A graph/Person/ada/out/KNOWS/*/out/KNOWS/ | grep -v '^$' | grep -v ':$' | sort -u").stdout.decode()
    assert set(listed.split("\n")) - {""} == {encode(i) for i in second}


def test_names_that_are_not_rows_or_not_canonical_are_enoent(graph, mounter):
    store, _, _ = graph
    m = mounter(store)
    for name in ["nobody", "a%2fb", "%61da", "a%2", "KNOWS"]:
        assert not m.path("graph", "Person", name).exists(), name
    assert not m.path("graph", "KNOWS").exists()          # an edge table is not a node table
    assert not m.path("graph", "Person", "ada", "out", "Nope.jsonl").exists()
    assert not m.path("graph", "City", "oslo", "out", "LIVES_IN").exists()  # wrong end
    assert not m.path("graph", "Person", "ada", "out", "KNOWS", "nobody").exists()


def test_graph_is_read_only(graph, mounter):
    store, _, _ = graph
    m = mounter(store)
    with pytest.raises(OSError) as raised:
        open(m.path("graph", "Person", "ada", "row.json"), "w")
    assert raised.value.errno in (errno.EACCES, errno.EROFS)
    with pytest.raises(OSError) as raised:
        os.mkdir(m.path("graph", "Person", "new"))
    assert raised.value.errno in (errno.EPERM, errno.EACCES, errno.EROFS)


def test_a_history_version_shows_the_graph_as_it_was(graph, mounter):
    store, knows, _ = graph
    m = mounter(store)
    version = m.log()[0]["version"]
    m.write("tables/KNOWS.jsonl", '{"id":"k000","@delete":true}\n{"id":"z","from":"ada","to":"ad"}\n', mode="a")
    old = m.path("history", f"@{version}", "graph", "Person", encode(knows[0]["from"]), "out", "KNOWS.jsonl")
    assert '"k000"' in old.read_text()
    new = m.path("graph", "Person", encode(knows[0]["from"]), "out", "KNOWS.jsonl")
    assert '"k000"' not in new.read_text()
    assert "ad" in os.listdir(m.path("graph", "Person", "ada", "out", "KNOWS"))


def test_deleting_a_referenced_node_fails_the_write_and_detach_takes_its_edges(graph, mounter):
    store, knows, lives = graph
    m = mounter(store)
    result = m.sh("echo '{\"id\":\"ada\",\"@delete\":true}' >> tables/Person.jsonl", check=False)
    assert result.returncode != 0
    assert b"Invalid argument" in result.stderr
    error = m.errors()[-1]
    assert "still referenced by edge" in error["reason"] and error["line"] == 1
    assert m.path("graph", "Person", "ada").exists()
    m.write("tables/Person.jsonl", '{"id":"ada","@delete":"detach"}\n', mode="a")
    assert not m.path("graph", "Person", "ada").exists()
    remaining = m.read("tables", "KNOWS.jsonl")
    assert all(json.loads(line)["from"] != "ada" and json.loads(line)["to"] != "ada"
               for line in remaining.splitlines())
    assert len(remaining.splitlines()) == len([e for e in knows if "ada" not in (e["from"], e["to"])])
    assert '"from":"ada"' not in m.read("tables", "LIVES_IN.jsonl")


def test_a_referenced_node_table_can_be_renamed_and_the_edge_schema_follows(graph, mounter):
    store, _, _ = graph
    m = mounter(store)
    version = m.log()[0]["version"]
    os.rename(m.path("tables", "Person.jsonl"), m.path("tables", "People.jsonl"))
    schema = json.loads(m.read("schema", "KNOWS.json"))
    assert schema["from"] == schema["to"] == "People"
    old = json.loads(m.read("history", f"@{version}", "schema", "KNOWS.json"))
    assert old["from"] == "Person"
    assert sorted(os.listdir(m.path("graph"))) == ["City", "People"]
    assert os.readlink(m.path("graph", "People", "ada", "out", "LIVES_IN", os.listdir(
        m.path("graph", "People", "ada", "out", "LIVES_IN"))[0])).startswith("../../../../City/")
