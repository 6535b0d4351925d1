"""graphfs log --table T --id X: the versions in which one row changed, against a model
(docs/MOUNT.md "History", history/by-id/)."""
import json

from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import Cli
from tier import size

IDS = ["a", "b", "c"]
change = st.tuples(st.sampled_from(IDS), st.one_of(st.none(), st.integers(0, 2)))


@settings(max_examples=size(25, soak=200, small=10), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(commits=st.lists(st.lists(change, min_size=1, max_size=3), min_size=1, max_size=8))
def test_the_history_of_a_row_is_every_version_in_which_the_model_row_changed(graphfs, tmp_path_factory, commits):
    work = tmp_path_factory.mktemp("row-history")
    cli = Cli(graphfs, work, leak_checked=False)   # test_row_history is not in LEAK_CHECKED
    store = work / "store"
    cli.ok("init", store)
    cli.ok("import", store, "T", cli.write_file('{"id":"seed","n":0}\n'))   # the table exists from version 1
    rows, expected = {}, {key: [] for key in IDS}
    for operations in commits:
        before = dict(rows)
        lines = []
        for key, value in operations:
            if value is None:
                rows.pop(key, None)
                lines.append(json.dumps({"id": key, "@delete": True}))
            else:
                rows[key] = {"id": key, "n": value}
                lines.append(json.dumps(rows[key]))
        version = cli.import_rows(store, "T", "\n".join(lines) + "\n", mode="merge")
        for key in IDS:
            if before.get(key) != rows.get(key):
                op = "insert" if key not in before else "delete" if key not in rows else "update"
                expected[key].insert(0, (version, op, rows.get(key)))
    for key in IDS:
        output = cli.ok("log", store, "--table", "T", "--id", key).stdout.decode()
        found = [(line["version"], line["op"], line["row"]) for line in map(json.loads, output.splitlines())]
        assert found == expected[key], key


def test_each_line_names_its_commit_and_an_id_that_never_existed_has_no_history(cli, store):
    cli.import_rows(store, "T", [{"id": "x", "n": 1}])
    cli.import_rows(store, "T", [{"id": "x", "n": 2}], mode="merge")
    lines = [json.loads(line) for line in
             cli.ok("log", store, "--table", "T", "--id", "x").stdout.decode().splitlines()]
    assert [line["op"] for line in lines] == ["update", "insert"]
    assert lines[0]["row"] == {"id": "x", "n": 2} and len(lines[0]["commit"]) == 26
    assert cli.ok("log", store, "--table", "T", "--id", "never").stdout == b""
    assert "--table and --id go together" in cli.fail("log", store, "--table", "T", status=2)
