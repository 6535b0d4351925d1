"""Names and time: a branch's history through its ancestry, --at by time, date and
tag, tags, and compare-and-swap (--if-version, --if-commit)."""
import json
import subprocess
import threading
import time

import pytest

from conftest import jsonl


def commit_of(cli, store, branch=None):
    return cli.log(store, branch)[0]["commit"]


def forks_two_deep(cli, store):
    """main 1, 2; exp forks; main 3; exp 4; sub forks from exp; main 5; sub 6."""
    cli.import_rows(store, "P", [{"id": "a"}])
    cli.import_rows(store, "P", [{"id": "b"}], mode="merge")
    cli.ok("branch", store, "create", "exp")
    cli.import_rows(store, "P", [{"id": "c"}], mode="merge")
    cli.import_rows(store, "P", [{"id": "x"}], mode="merge", branch="exp")
    cli.ok("branch", store, "create", "sub", "--from", "exp")
    cli.import_rows(store, "P", [{"id": "d"}], mode="merge")
    cli.import_rows(store, "P", [{"id": "y"}], mode="merge", branch="sub")


def ids(text):
    return [json.loads(line)["id"] for line in text.splitlines()]


def test_every_version_a_branch_two_forks_deep_lists_opens_with_its_parents_bytes(cli, store):
    forks_two_deep(cli, store)
    listed = [entry["version"] for entry in cli.log(store, "sub")]
    assert listed == [6, 4, 2, 1]
    for version in listed:
        assert cli.export(store, "P", branch="sub", at=str(version))
    assert cli.export(store, "P", branch="sub", at="2") == cli.export(store, "P", at="2")
    assert cli.export(store, "P", branch="sub", at="4") == cli.export(store, "P", branch="exp", at="4")
    assert ids(cli.export(store, "P", branch="sub", at="3")) == ["a", "b"]   # exp at 3 is main at 2


def test_branch_list_reports_the_fork_point_as_the_sources_version(cli, store):
    cli.import_rows(store, "P", [{"id": "a"}])
    cli.ok("branch", store, "create", "exp")
    cli.import_rows(store, "P", [{"id": "b"}], mode="merge", branch="exp")
    cli.import_rows(store, "P", [{"id": "c"}], mode="merge", branch="exp")
    cli.ok("branch", store, "create", "late")
    lines = cli.ok("branch", store, "list").stdout.decode().splitlines()
    late = next(line for line in lines if line.startswith("late\t"))
    assert late.endswith("forked from main at version 1"), late


def test_a_version_before_the_first_commit_or_after_the_last_is_refused(cli, store):
    cli.import_rows(store, "P", [{"id": "a"}])
    assert "has no version 2" in cli.fail("export", store, "P", "--at", "2")
    assert "is not a version" in cli.fail("export", store, "P", "--at", "0", status=2)


def test_at_takes_a_time_between_commits_after_the_last_and_with_fractions(cli, store):
    cli.import_rows(store, "P", [{"id": "a"}])
    time.sleep(0.05)
    cli.import_rows(store, "P", [{"id": "b"}], mode="merge")
    times = {entry["version"]: entry["time"] for entry in cli.log(store)}
    assert ids(cli.export(store, "P", at=times[1])) == ["a"]
    assert ids(cli.export(store, "P", at=times[2])) == ["a", "b"]
    # one microsecond before the second commit: the first
    seconds, fraction = times[2][:-1].split(".")
    before = f"{seconds}.{int(fraction) - 1:06d}Z" if int(fraction) > 0 else times[1]
    assert ids(cli.export(store, "P", at=before)) == ["a"]
    assert ids(cli.export(store, "P", at="2999-01-01T00:00:00.123456789Z")) == ["a", "b"]
    assert ids(cli.export(store, "P", at="2999-01-01")) == ["a", "b"]
    assert ids(cli.export(store, "P", at=times[2][:-1] + "+00:00")) == ["a", "b"]


def test_a_time_before_the_first_commit_is_refused_naming_it(cli, store):
    cli.import_rows(store, "P", [{"id": "a"}])
    error = cli.fail("export", store, "P", "--at", "2001-01-01")
    assert "nothing was committed at or before 2001-01-01T00:00:00" in error
    assert "is not a version" in cli.fail("export", store, "P", "--at", "2026-02-30", status=2)


def test_a_tag_names_a_version_and_never_moves(cli, store):
    cli.import_rows(store, "P", [{"id": "a"}])
    cli.ok("tag", store, "create", "v1.0", "-m", "first release")
    cli.import_rows(store, "P", [{"id": "b"}], mode="merge")
    assert "already exists" in cli.fail("tag", store, "create", "v1.0")
    assert ids(cli.export(store, "P", at="v1.0")) == ["a"]
    tags = [json.loads(line) for line in cli.ok("tag", store, "list").stdout.decode().splitlines()]
    assert [(t["tag"], t["version"], t["branch"], t["message"]) for t in tags] == [("v1.0", 1, "main", "first release")]
    assert tags[0]["commit"] == cli.log(store)[1]["commit"]
    cli.ok("tag", store, "delete", "v1.0")
    assert cli.ok("tag", store, "list").stdout == b""
    assert "no tag" in cli.fail("tag", store, "delete", "v1.0")


def test_a_tag_of_an_older_version_of_another_branch_reads_that_state(cli, store):
    forks_two_deep(cli, store)
    cli.ok("tag", store, "create", "deep", "--branch", "sub", "--at", "3")
    tag = json.loads(cli.ok("tag", store, "list").stdout)
    assert (tag["branch"], tag["version"]) == ("sub", 2)
    assert ids(cli.export(store, "P", at="deep")) == ["a", "b"]
    cli.ok("verify", store)


def test_tag_names_are_checked(cli, store):
    cli.import_rows(store, "P", [{"id": "a"}])
    for bad in ["1abc", "a..b", "a/b", ".x", "x" * 129]:
        error = cli.fail("tag", store, "create", bad)
        assert "not valid" in error or "longer than 128" in error, error


def test_tags_are_part_of_verify(cli, store):
    cli.import_rows(store, "P", [{"id": "a"}])
    cli.ok("tag", store, "create", "t")
    cli.ok("verify", store)


def test_if_version_refuses_naming_expected_and_actual_and_publishes_nothing(cli, store):
    cli.import_rows(store, "P", [{"id": "a"}])
    path = cli.write_file(jsonl([{"id": "b"}]))
    error = cli.fail("import", store, "P", path, "--if-version", "7")
    assert "the store is at version 1, not 7" in error
    assert len(cli.log(store)) == 1
    cli.ok("import", store, "P", path, "--if-version", "1")
    assert len(cli.log(store)) == 2


def test_if_commit_refuses_a_moved_head(cli, store):
    cli.import_rows(store, "P", [{"id": "a"}])
    first = commit_of(cli, store)
    cli.import_rows(store, "P", [{"id": "b"}], mode="merge")
    path = cli.write_file(jsonl([{"id": "c"}]))
    error = cli.fail("import", store, "P", path, "--mode", "merge", "--if-commit", first)
    assert f"not {first}" in error and commit_of(cli, store) in error
    cli.ok("import", store, "P", path, "--mode", "merge", "--if-commit", commit_of(cli, store))
    assert "takes a commit id" in cli.fail("import", store, "P", path, "--if-commit", "nope", status=2)


def test_a_cas_race_between_two_processes_has_exactly_one_winner(cli, store):
    cli.import_rows(store, "P", [{"id": "a"}])
    paths = [cli.write_file(jsonl([{"id": f"r{i}"}])) for i in range(2)]
    results = [None, None]

    def run(index):
        results[index] = cli.run("import", store, "P", paths[index], "--mode", "merge", "--if-version", "1")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    codes = sorted(result.returncode for result in results)
    assert codes == [0, 1], [r.stderr for r in results]
    assert len(cli.log(store)) == 2


# ---- revert -------------------------------------------------------------------------------

def tables_of(cli, store, at=None):
    heads = cli.heads(store, at=at)
    return {head["table_key"]: cli.export(store, head["table_key"], at=at) for head in heads}


def test_revert_publishes_one_commit_with_exactly_the_old_tables_and_schemas(cli, store):
    cli.import_rows(store, "P", [{"id": "a", "n": 1}, {"id": "b", "n": 2}])
    cli.import_rows(store, "Q", [{"id": "q"}])
    old = cli.log(store)[0]["version"]
    before = tables_of(cli, store)
    schema_before = cli.ok("schema", store, "P").stdout
    cli.import_rows(store, "P", [{"id": "c", "n": 3}], mode="merge")
    cli.import_rows(store, "P", [{"id": "a", "@delete": True}], mode="merge")
    cli.import_rows(store, "R", [{"id": "r"}])
    schema = json.loads(cli.ok("schema", store, "Q").stdout)
    schema["properties"]["extra"] = {"type": "string"}
    cli.ok("schema", store, "Q", "--set", cli.write_file(json.dumps(schema), name="q.json"))
    output = cli.ok("revert", store, str(old)).stdout.decode()
    assert f"reverted main to version {old}" in output
    assert tables_of(cli, store) == before
    assert cli.ok("schema", store, "P").stdout == schema_before
    assert cli.log(store)[0]["message"] == f"revert to version {old}"
    assert len(cli.log(store)) == old + 5
    cli.ok("verify", store)


def test_a_second_revert_to_the_same_version_has_nothing_to_do(cli, store):
    cli.import_rows(store, "A", [{"id": "1"}])
    cli.import_rows(store, "A", [{"id": "2"}])
    cli.ok("revert", store, "1")
    assert ids(cli.export(store, "A")) == ["1"]
    assert "nothing to revert" in cli.ok("revert", store, "1").stdout.decode()
    assert len(cli.log(store)) == 3
    cli.ok("verify", store)


def test_revert_to_a_tag_and_with_if_version(cli, store):
    cli.import_rows(store, "P", [{"id": "a"}])
    cli.ok("tag", store, "create", "good")
    cli.import_rows(store, "P", [{"id": "b"}], mode="merge")
    assert "the store is at version 2, not 1" in cli.fail("revert", store, "good", "--if-version", "1")
    cli.ok("revert", store, "good", "--if-version", "2")
    assert ids(cli.export(store, "P")) == ["a"]


def test_branch_tag_and_restore_commands_take_the_same_conditions(cli, store, tmp_path):
    cli.import_rows(store, "P", [{"id": "a"}])
    head = commit_of(cli, store)
    assert "not 9 (--if-version)" in cli.fail("branch", store, "create", "b", "--if-version", "9")
    assert "not 01HZZZZZZZZZZZZZZZZZZZZZZZ" in cli.fail("branch", store, "create", "b", "--if-commit",
                                                        "01HZZZZZZZZZZZZZZZZZZZZZZZ")
    cli.ok("branch", store, "create", "b", "--if-version", "1", "--if-commit", head)
    assert "not 9" in cli.fail("branch", store, "delete", "b", "--if-version", "9")
    assert "not 9" in cli.fail("tag", store, "create", "t", "--if-version", "9")
    cli.ok("tag", store, "create", "t", "--if-commit", head)
    assert "not 9" in cli.fail("tag", store, "delete", "t", "--if-version", "9")
    cli.ok("tag", store, "delete", "t", "--if-version", "1")
    cli.ok("snapshot", store, tmp_path / "snap")
    assert "not 9" in cli.fail("restore", store, tmp_path / "snap", "--confirm", "--if-version", "9")
    cli.ok("restore", store, tmp_path / "snap", "--confirm", "--if-version", "1")
    assert [line.split("\t")[0] for line in cli.ok("branch", store, "list").stdout.decode().splitlines()] == ["b", "main"]
