"""graphfs diff: rows and tables that changed between two versions, branches or tags
(docs/MOUNT.md "Diffs")."""
import json
import random

from conftest import jsonl

PERSON = {"kind": "node", "properties": {"n": {"type": "i64", "nullable": True}}}


def diff_lines(cli, store, *args):
    return [json.loads(line) for line in cli.ok("diff", store, *args).stdout.decode().splitlines()]


def test_a_row_diff_says_insert_update_and_delete_in_id_order_with_both_rows(cli, store):
    cli.set_schema(store, "Person", PERSON)
    v1 = cli.import_rows(store, "Person", [{"id": "b", "n": 1}, {"id": "c", "n": 2}, {"id": "d", "n": 3}])
    v2 = cli.import_rows(store, "Person", '{"id":"d","n":30}\n{"id":"a","n":0}\n{"id":"c","@delete":true}\n',
                         mode="merge")
    assert diff_lines(cli, store, f"@{v1}", f"@{v2}", "Person") == [
        {"op": "insert", "id": "a", "before": None, "after": {"id": "a", "n": 0}},
        {"op": "delete", "id": "c", "before": {"id": "c", "n": 2}, "after": None},
        {"op": "update", "id": "d", "before": {"id": "d", "n": 3}, "after": {"id": "d", "n": 30}},
    ]
    # and backwards
    assert [line["op"] for line in diff_lines(cli, store, str(v2), str(v1), "Person")] == ["delete", "insert",
                                                                                          "update"]


def test_a_row_rewritten_with_the_same_bytes_is_no_difference(cli, store):
    v1 = cli.import_rows(store, "T", [{"id": "x", "n": 1}, {"id": "y", "n": 2}])
    v2 = cli.import_rows(store, "T", [{"id": "y", "n": 2}, {"id": "x", "n": 1}])   # an overwrite, other order
    assert cli.ok("diff", store, f"@{v1}", f"@{v2}", "T").stdout == b""
    assert cli.ok("diff", store, f"@{v1}", f"@{v2}").stdout == b""


def test_without_a_table_every_table_that_differs_comes_with_its_rows(cli, store):
    cli.import_rows(store, "A", [{"id": "1"}])
    cli.import_rows(store, "B", [{"id": "1"}])
    cli.ok("branch", store, "create", "dev")
    cli.import_rows(store, "B", [{"id": "2"}], mode="merge", branch="dev")
    cli.import_rows(store, "C", [{"id": "3"}], branch="dev")
    assert diff_lines(cli, store, "main", "dev") == [
        {"table": "B"}, {"op": "insert", "id": "2", "before": None, "after": {"id": "2"}},
        {"table": "C"}, {"op": "insert", "id": "3", "before": None, "after": {"id": "3"}},
    ]
    assert diff_lines(cli, store, "main", "dev", "--tables") == [{"op": "create", "table": "C"}]


def test_a_schema_change_is_a_table_line_with_both_schemas(cli, store):
    cli.set_schema(store, "Person", PERSON)
    cli.ok("tag", store, "create", "before")
    wider = json.loads(json.dumps(PERSON))
    wider["properties"]["age"] = {"type": "i64", "nullable": True}
    cli.set_schema(store, "Person", wider)
    [line] = diff_lines(cli, store, "before", "main", "--tables")
    assert line["op"] == "schema" and line["table"] == "Person"
    assert "age" in line["after"]["properties"] and "age" not in line["before"]["properties"]


def test_names_that_are_no_branch_version_or_tag_are_refused(cli, store):
    cli.import_rows(store, "T", [{"id": "x"}])
    error = cli.fail("diff", store, "main", "nowhere")
    assert "nowhere" in error
    assert "no table Missing" in cli.fail("diff", store, "@1", "main", "Missing")


def test_diffs_between_versions_of_a_random_history_match_a_model(cli, store):
    generator = random.Random(7)
    states, versions = [], []
    rows = {}
    for _ in range(40):
        lines = []
        for _ in range(generator.randint(1, 4)):
            key = f"k{generator.randint(0, 30)}"
            if key in rows and generator.random() < 0.3:
                del rows[key]
                lines.append(json.dumps({"id": key, "@delete": True}))
            else:
                rows[key] = {"id": key, "n": generator.randint(0, 3)}
                lines.append(json.dumps(rows[key]))
        versions.append(cli.import_rows(store, "T", "\n".join(lines) + "\n", mode="merge"))
        states.append(dict(rows))
    for _ in range(40):
        i, j = generator.randrange(len(states)), generator.randrange(len(states))
        a, b = states[i], states[j]
        expected = []
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                op = "insert" if key not in a else "delete" if key not in b else "update"
                expected.append({"op": op, "id": key, "before": a.get(key), "after": b.get(key)})
        assert diff_lines(cli, store, f"@{versions[i]}", f"@{versions[j]}", "T") == expected
