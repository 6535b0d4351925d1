"""`graphfs dump --all` and `graphfs load` of its stream: the upgrade path that keeps
every branch, tag and retained commit (docs/FORMAT.md §24, docs/graphfs.1 `dump`, `load`).

One store is made once for the module: two branches and a merge commit, tags, deleted
rows, a detach, a schema change, a branch deleted after its work was merged, and merges
that move unchanged rows to the end of their table (so only a replay that keeps row
order gives the same bytes). Each test loads its stream into a new store and compares.
"""
import json

import pytest

from conftest import Cli, graphfs_binary, jsonl
from tier import SMALL


def schema(properties):
    return {"kind": "node", "properties": {name: {"type": kind, "nullable": True} for name, kind in properties.items()}}


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    work = tmp_path_factory.mktemp("dump_all")
    cli = Cli(graphfs_binary(), work)
    store = work / "store"
    cli.ok("init", store)
    cli.set_schema(store, "Person", schema({"name": "string", "age": "i64"}))
    cli.import_rows(store, "Person", [{"id": f"p{i}", "name": f"P{i}", "age": i} for i in range(6)],
                    message="six people")
    cli.set_schema(store, "KNOWS", {"kind": "edge", "from": "Person", "to": "Person", "properties": {}})
    cli.import_rows(store, "KNOWS", [{"id": f"k{i}", "from": f"p{i}", "to": f"p{(i + 1) % 6}"} for i in range(6)])
    # a merge that rewrites an unchanged row (p1 moves to the end) and changes another
    cli.import_rows(store, "Person", [{"id": "p1", "name": "P1", "age": 1}, {"id": "p2", "name": "Two", "age": 2}],
                    mode="merge", message="p2 renamed")
    cli.ok("tag", store, "create", "first-release", "-m", "the first release")
    cli.ok("branch", store, "create", "team")
    cli.import_rows(store, "Person", [{"id": "p9", "name": "Nine", "age": 9}], mode="merge", branch="team")
    cli.import_rows(store, "Person", [{"id": "p4", "@delete": "detach"}], mode="merge", branch="team",
                    message="p4 leaves, with its edges")
    cli.import_rows(store, "Person", [{"id": "p0", "name": "Zero", "age": 0}], mode="merge", message="main moves on")
    cli.import_rows(store, "Company", [{"id": "acme", "name": "Acme"}], message="a new table")
    cli.ok("merge", store, "team", "-m", "team's work")
    cli.ok("branch", store, "create", "scratch")
    cli.import_rows(store, "Company", [{"id": "acme", "@delete": True}], mode="merge", branch="scratch")
    cli.import_rows(store, "Company", [{"id": "initech", "name": "Initech"}], mode="merge", branch="scratch")
    cli.ok("branch", store, "delete", "team")
    cli.ok("tag", store, "create", "scratch-work", "--branch", "scratch")
    cli.ok("verify", store)
    stream = cli.ok("dump", store, "--all").stdout
    loaded = work / "loaded"
    cli.ok("init", loaded)
    result = cli.ok("load", loaded, cli.write_file(stream, name="history.ndjson"))
    return cli, store, loaded, stream, result


def lines(stream):
    return [json.loads(line) for line in stream.decode().splitlines()]


def test_a_loaded_store_dumps_the_same_stream(history):
    cli, store, loaded, stream, result = history
    assert b"replayed 12 commits" in result.stdout and b"renamed" not in result.stdout
    assert cli.ok("dump", loaded, "--all").stdout == stream


def test_the_stream_names_every_commit_branch_and_tag_and_ends_with_its_count(history):
    cli, store, loaded, stream, result = history
    parsed = lines(stream)
    assert parsed[0] == {"graphfs": "dump", "format": 1, "all": True}
    commits = [line for line in parsed if "commit" in line and "parents" in line]
    assert [commit["version"] for commit in commits] == list(range(1, 13))
    assert [line["branch"] for line in parsed if set(line) == {"branch", "head"}] == ["main", "scratch"]
    assert sorted(line["tag"] for line in parsed if "tag" in line) == ["first-release", "scratch-work"]
    assert parsed[-1] == {"end": True, "commits": 12}


def test_every_branch_keeps_its_log_messages_times_actors_and_parents(history):
    cli, store, loaded, stream, result = history
    for branch in ("main", "scratch"):
        def summary(target):
            return [(entry["commit"], entry["message"], entry["time"], entry["actor"], entry["parents"])
                    for entry in cli.log(target, branch=branch)]
        assert summary(loaded) == summary(store)
    merge = [entry for entry in cli.log(loaded) if entry["message"] == "team's work"]
    assert len(merge) == 1 and len(merge[0]["parents"]) == 2


def test_every_table_has_the_same_bytes_at_every_version_and_every_tag(history):
    cli, store, loaded, stream, result = history
    for version in range(1, 13) if not SMALL else (1, 3, 7, 10, 12):   # a sample under ASan and in quick
        for branch in ("main", "scratch"):
            before = cli.run("dump", store, "--branch", branch, "--at", str(version))
            after = cli.run("dump", loaded, "--branch", branch, "--at", str(version))
            assert (before.returncode, before.stdout) == (after.returncode, after.stdout), (branch, version)
    for tag in ("first-release", "scratch-work"):
        for table in ("Person", "KNOWS"):
            assert cli.export(loaded, table, at=tag) == cli.export(store, table, at=tag)
    assert cli.ok("tag", loaded, "list").stdout == cli.ok("tag", store, "list").stdout
    cli.ok("verify", loaded)


def test_a_deleted_branch_stays_deleted_and_its_merged_commits_can_bring_it_back(history):
    cli, store, loaded, stream, result = history
    names = [line.split("\t")[0] for line in cli.ok("branch", loaded, "list").stdout.decode().splitlines()]
    assert names == ["main", "scratch"]
    merge = [entry for entry in cli.log(loaded) if entry["message"] == "team's work"][0]
    cli.ok("branch", loaded, "create", "team", "--at", merge["parents"][1])
    assert [entry["message"] for entry in cli.log(loaded, branch="team")][0] == "p4 leaves, with its edges"


def test_a_history_moves_between_stores_of_either_kind(cli, store):
    # on an s3:// store as on a directory: dump --all of the one, load into a new one beside it
    cli.import_rows(store, "P", [{"id": "a"}, {"id": "b"}])
    cli.ok("branch", store, "create", "side")
    cli.import_rows(store, "P", [{"id": "c"}], mode="merge", branch="side")
    cli.import_rows(store, "P", [{"id": "a", "@delete": True}], mode="merge")
    cli.ok("merge", store, "side", "-m", "side's row")
    cli.ok("tag", store, "create", "merged")
    stream = cli.ok("dump", store, "--all").stdout
    copy = f"{store}-loaded"
    cli.ok("init", copy)
    assert b"replayed 4 commits" in cli.ok("load", copy, "-", input=stream).stdout
    assert cli.ok("dump", copy, "--all").stdout == stream
    assert cli.export(copy, "P", at="merged") == jsonl([{"id": "b"}, {"id": "c"}])


def test_a_store_whose_early_versions_were_reclaimed_round_trips_what_is_retained(cli, tmp_path):
    store = tmp_path / "store"
    cli.ok("init", store)
    for n in range(6):
        cli.import_rows(store, "P", [{"id": f"p{n}"}], mode="merge", message=f"commit {n + 1}")
        if n == 1:
            cli.ok("tag", store, "create", "two")   # gc keeps the state of version 2 for it
    cli.ok("gc", store, "--keep-versions", "2")
    stream = cli.ok("dump", store, "--all").stdout
    commits = [line for line in lines(stream) if "parents" in line]
    assert [(commit["version"], commit.get("full")) for commit in commits] == [(2, True), (5, True), (6, None)]
    loaded = tmp_path / "loaded"
    cli.ok("init", loaded)
    result = cli.ok("load", loaded, cli.write_file(stream))
    assert result.stdout.decode().count("renamed ") == 3
    assert cli.export(loaded, "P") == cli.export(store, "P")
    assert cli.export(loaded, "P", at="two") == cli.export(store, "P", at="two") == jsonl([{"id": "p0"}, {"id": "p1"}])
    assert [entry["message"] for entry in cli.log(loaded)][:2] == ["commit 6", "commit 5"]
    cli.ok("verify", loaded)


def test_load_of_a_stream_refuses_a_store_that_has_commits_and_a_stream_cut_short(cli, tmp_path):
    store = tmp_path / "store"
    cli.ok("init", store)
    cli.import_rows(store, "P", [{"id": "a"}])
    cli.import_rows(store, "P", [{"id": "b"}], mode="merge")
    stream = cli.ok("dump", store, "--all").stdout
    error = cli.fail("load", store, cli.write_file(stream))
    assert "new store" in error and "graphfs init" in error
    cut = tmp_path / "cut"
    cli.ok("init", cut)
    error = cli.fail("load", cut, cli.write_file(b"\n".join(stream.splitlines()[:-3]) + b"\n"))
    assert "end line" in error and "1 commits were replayed" in error


def test_load_refuses_a_line_that_names_a_commit_no_earlier_line_made_at_that_line(cli, tmp_path):
    store = tmp_path / "store"
    cli.ok("init", store)
    cli.import_rows(store, "P", [{"id": "a"}])
    cli.import_rows(store, "P", [{"id": "b"}], mode="merge")
    parsed = lines(cli.ok("dump", store, "--all").stdout)
    second = next(n for n, line in enumerate(parsed) if line.get("version") == 2)
    parsed[second]["parents"] = ["01M93V8VEN000000010B01Z7JS"]
    loaded = tmp_path / "loaded"
    cli.ok("init", loaded)
    path = cli.write_file("".join(json.dumps(line) + "\n" for line in parsed))
    error = cli.fail("load", loaded, path)
    assert f"{path}:{second + 1}:" in error and "no earlier line made" in error
    assert [entry["message"] for entry in cli.log(loaded)] == [lines(cli.ok("dump", store, "--all").stdout)[1]["message"]]
