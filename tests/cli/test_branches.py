"""branch list | create NAME [--from B] | delete NAME, and the rules of docs/MOUNT.md "Writing"."""
import pytest

from conftest import jsonl, store_digest


def branch_names(cli, store):
    return [line.split("\t")[0] for line in cli.ok("branch", store, "list").stdout.decode().splitlines()]


def test_create_adds_a_branch_to_the_list(cli, store):
    cli.import_rows(store, "Person", [{"id": "a"}])
    cli.ok("branch", store, "create", "experiment")
    assert branch_names(cli, store) == ["experiment", "main"]


def test_list_shows_head_version_and_fork_point(cli, store):
    cli.import_rows(store, "Person", [{"id": "a"}])
    cli.ok("branch", store, "create", "experiment")
    cli.import_rows(store, "Person", [{"id": "b"}], mode="merge", branch="experiment")
    lines = dict(line.split("\t", 1) for line in
                 cli.ok("branch", store, "list").stdout.decode().splitlines())
    assert lines["experiment"].startswith("head version 2\t")
    assert lines["experiment"].endswith("forked from main at version 1")
    assert lines["main"].startswith("head version 1\t")


def test_a_new_branch_starts_with_the_source_branch_rows(cli, store):
    cli.import_rows(store, "Person", [{"id": "a", "name": "Ann"}])
    cli.ok("branch", store, "create", "experiment")
    assert cli.export(store, "Person", branch="experiment") == '{"id":"a","name":"Ann"}\n'


def test_a_branch_does_not_see_later_commits_of_its_source(cli, store):
    cli.import_rows(store, "Person", [{"id": "a", "name": "Ann"}])
    cli.ok("branch", store, "create", "experiment")
    cli.import_rows(store, "Person", [{"id": "b", "name": "Bo"}], mode="merge")
    assert cli.export(store, "Person", branch="experiment") == '{"id":"a","name":"Ann"}\n'


def test_create_from_another_branch(cli, store):
    cli.import_rows(store, "Person", [{"id": "a"}])
    cli.ok("branch", store, "create", "one")
    cli.import_rows(store, "Person", [{"id": "b"}], mode="merge", branch="one")
    cli.ok("branch", store, "create", "two", "--from", "one")
    assert cli.export(store, "Person", branch="two") == jsonl([{"id": "a"}, {"id": "b"}])


def test_create_does_not_add_a_version(cli, store):
    cli.import_rows(store, "Person", [{"id": "a"}])
    cli.ok("branch", store, "create", "experiment")
    assert cli.import_rows(store, "Person", [{"id": "b"}], mode="merge") == 2


def test_create_refuses_an_existing_name(cli, store):
    cli.ok("branch", store, "create", "experiment")
    before = store_digest(store)
    error = cli.fail("branch", store, "create", "experiment")
    assert "experiment" in error
    assert store_digest(store) == before


def test_create_refuses_a_missing_source(cli, store):
    before = store_digest(store)
    error = cli.fail("branch", store, "create", "experiment", "--from", "nowhere")
    assert "nowhere" in error
    assert store_digest(store) == before


@pytest.mark.parametrize("name", ["..", "a/b", "../up", "9lives", "has space", "x" * 129, "tab\there"])
def test_create_refuses_an_invalid_name(cli, store, name):
    before = store_digest(store)
    cli.fail("branch", store, "create", name)
    assert store_digest(store) == before
    assert branch_names(cli, store) == ["main"]


def test_delete_removes_the_branch(cli, store):
    cli.ok("branch", store, "create", "experiment")
    cli.ok("branch", store, "delete", "experiment")
    assert branch_names(cli, store) == ["main"]
    cli.fail("export", store, "Person", "--branch", "experiment")


def test_delete_refuses_main(cli, store):
    before = store_digest(store)
    error = cli.fail("branch", store, "delete", "main")
    assert "main" in error
    assert store_digest(store) == before


def test_delete_refuses_a_branch_another_was_forked_from(cli, store):
    cli.ok("branch", store, "create", "parent")
    cli.ok("branch", store, "create", "child", "--from", "parent")
    before = store_digest(store)
    error = cli.fail("branch", store, "delete", "parent")
    assert "parent" in error
    assert store_digest(store) == before
    cli.ok("branch", store, "delete", "child")
    cli.ok("branch", store, "delete", "parent")
    assert branch_names(cli, store) == ["main"]


def test_delete_refuses_a_missing_branch(cli, store):
    error = cli.fail("branch", store, "delete", "ghost")
    assert "ghost" in error


def test_a_deleted_name_can_be_created_again_fresh(cli, store):
    cli.import_rows(store, "Person", [{"id": "a"}])
    cli.ok("branch", store, "create", "experiment")
    cli.import_rows(store, "Person", [{"id": "b"}], mode="merge", branch="experiment")
    cli.ok("branch", store, "delete", "experiment", "--force")
    cli.ok("branch", store, "create", "experiment")
    assert cli.export(store, "Person", branch="experiment") == jsonl([{"id": "a"}])


def test_delete_refuses_a_branch_whose_commits_are_merged_nowhere_and_names_how_to_force_it(cli, store):
    cli.import_rows(store, "Person", [{"id": "a"}])
    cli.ok("branch", store, "create", "experiment")
    cli.import_rows(store, "Person", [{"id": "b"}], mode="merge", branch="experiment")
    cli.import_rows(store, "Person", [{"id": "c"}], mode="merge", branch="experiment")
    head = cli.log(store, branch="experiment")[0]["commit"]
    error = cli.fail("branch", store, "delete", "experiment")
    assert "2 commits merged nowhere" in error and "--force" in error and head in error
    assert "experiment" in cli.ok("branch", store, "list").stdout.decode()


def test_delete_takes_a_branch_whose_head_is_merged_or_tagged(cli, store):
    cli.import_rows(store, "Person", [{"id": "a"}])
    for name in ("merged", "tagged", "untouched"):
        cli.ok("branch", store, "create", name)
    cli.import_rows(store, "Person", [{"id": "b"}], mode="merge", branch="merged")
    cli.ok("merge", store, "merged")
    cli.import_rows(store, "Person", [{"id": "c"}], mode="merge", branch="tagged")
    cli.ok("tag", store, "create", "keep", "--branch", "tagged")
    for name in ("merged", "tagged", "untouched"):
        cli.ok("branch", store, "delete", name)


def test_a_deleted_branch_comes_back_at_its_head_commit_with_its_history(cli, store):
    cli.import_rows(store, "Person", [{"id": "a"}])
    cli.ok("branch", store, "create", "experiment")
    cli.import_rows(store, "Person", [{"id": "b"}], mode="merge", branch="experiment")
    cli.import_rows(store, "Person", [{"id": "a"}], mode="merge")
    log = cli.log(store, branch="experiment")
    cli.ok("branch", store, "delete", "experiment", "--force")
    assert "created branch experiment at" in cli.ok(
        "branch", store, "create", "experiment", "--at", log[0]["commit"]).stdout.decode()
    assert cli.export(store, "Person", branch="experiment") == jsonl([{"id": "a"}, {"id": "b"}])
    assert cli.log(store, branch="experiment") == log
    assert cli.export(store, "Person", branch="experiment", at=1) == jsonl([{"id": "a"}])
    # its own commits go on from there
    cli.import_rows(store, "Person", [{"id": "c"}], mode="merge", branch="experiment")
    assert cli.log(store, branch="experiment")[1:] == log
    cli.ok("verify", store)


def test_branch_create_at_takes_a_version_or_a_tag(cli, store):
    cli.import_rows(store, "Person", [{"id": "a"}])
    cli.import_rows(store, "Person", [{"id": "b"}], mode="merge")
    cli.ok("tag", store, "create", "first", "--at", "1")
    cli.ok("branch", store, "create", "at_version", "--at", "2")
    cli.ok("branch", store, "create", "at_tag", "--at", "first")
    assert cli.export(store, "Person", branch="at_version") == jsonl([{"id": "a"}, {"id": "b"}])
    assert cli.export(store, "Person", branch="at_tag") == jsonl([{"id": "a"}])
    assert "no commit" in cli.fail("branch", store, "create", "late", "--at", "9")
    assert "no commit, version or tag" in cli.fail("branch", store, "create", "odd", "--at", "nothing")


def test_unknown_branch_action_is_a_usage_error(cli, store):
    cli.fail("branch", store, "rename", "a", status=2)
