"""graphfs gc: the horizon, the messages, what stays readable, and space that comes back."""
import json
import os
import re

import pytest

from conftest import jsonl
from store_files import store_bytes as disk_bytes, store_entries


def history(cli, store, count):
    for value in range(count):
        cli.import_rows(store, "Counter", [{"id": "c", "value": value}], mode="merge")


def test_gc_says_which_versions_it_reclaimed_and_how_much_space_came_back(cli, store):
    history(cli, store, 8)
    output = cli.ok("gc", store, "--keep-versions", "3").stdout.decode()
    assert "gc: reclaimed versions 1..5 (5 versions; horizon 5, was 0)\n" in output
    assert re.search(r"gc: reclaimed [\d.]+ [KM]?i?B of manifest space \(.* on disk -> .*\) and 0 segment files", output)
    assert json.loads(cli.ok("stats", store).stdout)["store"]["horizon"] == 5


def test_a_reclaimed_version_is_refused_with_the_horizon_by_every_reading_command(cli, store):
    history(cli, store, 8)
    cli.ok("gc", store, "--keep-versions", "3")
    for command in (["export", store, "Counter", "--at", "2"], ["heads", store, "--at", "5"],
                    ["dump", store, "--at", "1"]):
        error = cli.fail(*command)
        assert "was reclaimed by gc (horizon 5)" in error, error
    assert cli.export(store, "Counter", at="6") == jsonl([{"id": "c", "value": 5}])


def test_a_tagged_state_reads_by_its_tag_and_its_version_after_gc_reclaimed_the_version(cli, store):
    history(cli, store, 8)
    cli.ok("tag", store, "create", "early", "--at", "2")
    cli.ok("gc", store, "--keep-versions", "3")
    tagged = jsonl([{"id": "c", "value": 1}])
    assert cli.export(store, "Counter", at="early") == tagged
    assert cli.export(store, "Counter", at="2") == tagged   # the tag keeps it
    assert "was reclaimed by gc (horizon 5)" in cli.fail("export", store, "Counter", "--at", "3")
    assert json.loads(cli.ok("heads", store, "--at", "early").stdout.decode().splitlines()[0])["table_key"] == "Counter"


def test_log_keeps_the_kept_commits_and_marks_the_newest_reclaimed_one(cli, store):
    history(cli, store, 8)
    cli.ok("gc", store, "--keep-versions", "3")
    log = cli.log(store)
    assert [entry["version"] for entry in log] == [8, 7, 6, 5]
    assert log[-1] == {"version": 5, "commit": log[-2]["parents"][0], "reclaimed": True}


def test_a_dry_run_changes_nothing(cli, store):
    history(cli, store, 8)
    before = disk_bytes(store)
    output = cli.ok("gc", store, "--keep-versions", "1", "--dry-run").stdout.decode()
    assert "gc: would reclaim versions 1..7" in output
    assert cli.export(store, "Counter", at="1") == jsonl([{"id": "c", "value": 0}])
    assert disk_bytes(store) == before


def test_the_store_shrinks_and_verifies_and_a_snapshot_after_gc_is_a_store(cli, store, tmp_path):
    cli.commits(store, 300, prefix="Counter")   # 300 one-row merges into Counter00
    before = disk_bytes(store)
    cli.ok("gc", store, "--keep-versions", "10")
    after = disk_bytes(store)
    assert after * 4 < before, (before, after)
    assert cli.run("verify", store).returncode == 0
    cli.ok("snapshot", store, tmp_path / "snap")
    assert cli.run("verify", tmp_path / "snap").returncode == 0
    assert cli.export(tmp_path / "snap", "Counter00", at="295") == jsonl([{"id": "r", "value": 295}])
    # an object store counts exact bytes, a file system 4 KiB blocks and directories
    rounding = 64 << 10 if str(store).startswith("s3://") else 0
    assert disk_bytes(tmp_path / "snap") <= after * 2 + rounding


def test_verify_and_a_snapshot_are_clean_after_gc_of_a_branch_deleted_right_after_its_commits(cli, store, tmp_path):
    cli.import_rows(store, "Person", [{"id": "a"}])
    cli.ok("branch", store, "create", "dev")
    cli.import_rows(store, "Only", [{"id": "b"}], branch="dev")
    cli.import_rows(store, "Only", [{"id": "c"}], mode="merge", branch="dev")
    cli.ok("branch", store, "delete", "dev", "--force")   # at the version of dev's last commit
    for n in range(3):
        cli.import_rows(store, "Person", [{"id": f"p{n}"}], mode="merge")
    for keep in ("5", "1"):   # dev's commits kept as history, then reclaimed
        cli.ok("gc", store, "--keep-versions", keep)
        assert cli.run("verify", store).returncode == 0, cli.run("verify", store).stderr
        cli.ok("snapshot", store, tmp_path / f"snap{keep}")
        assert cli.run("verify", tmp_path / f"snap{keep}").returncode == 0


def test_bad_rules_are_usage_errors(cli, store):
    for arguments in (["--keep-versions", "0"], ["--keep-versions", "-3"], ["--keep-versions", "x"],
                      ["--keep-since", "5x"], ["--keep-since", "0d"], ["--keep-since", "d"]):
        error = cli.fail("gc", store, *arguments, status=2)
        assert "--keep-" in error, error


def test_keep_since_takes_seconds_minutes_hours_days_and_weeks(cli, store):
    history(cli, store, 3)
    for duration in ("30s", "5m", "12h", "7d", "2w"):
        output = cli.ok("gc", store, "--keep-since", duration).stdout.decode()
        assert "gc: no version reclaimed (horizon 0, latest version 3)" in output


def test_optimize_keeps_the_bytes_and_commits_op_optimize(cli, store):
    cli.import_rows(store, "P", [{"id": f"p{i}", "n": i} for i in range(50)])
    for i in range(30):
        cli.import_rows(store, "P", [{"id": f"p{i % 7}", "n": 100 + i}], mode="merge")
    before = cli.export(store, "P")
    output = cli.ok("optimize", store, "P").stdout.decode()
    assert re.match(r"optimized P on main: committed version 32 \(commit [0-9A-Z]{26}\)\n", output), output
    assert cli.export(store, "P") == before
    assert cli.log(store)[0]["changes"] == [{"table": "P", "op": "optimize", "rows": 50}]
    assert cli.run("verify", store).returncode == 0


def test_optimize_of_a_missing_table_fails_and_of_nothing_says_so(cli, store):
    assert "no table Nope" in cli.fail("optimize", store, "Nope")
    assert cli.ok("optimize", store).stdout.decode() == "branch main has no table with rows: nothing to optimize\n"


def test_a_time_before_the_horizon_says_gc_reclaimed_it(cli, store):
    history(cli, store, 4)
    cli.ok("gc", store, "--keep-versions", "1")
    error = cli.fail("export", store, "Counter", "--at", "2001-01-01")
    assert "reclaimed by gc (horizon 3)" in error, error


def test_gc_keeps_the_retained_history_in_one_pack_and_a_snapshot_brings_it(cli, store, tmp_path):
    history(cli, store, 40)
    before = {version: cli.export(store, "Counter", at=str(version)) for version in range(31, 41)}
    output = cli.ok("gc", store, "--keep-versions", "10").stdout.decode()
    assert re.search(r"the retained history packed into [\d.]+ [KM]?i?B\)", output), output
    packs = store_entries(store, "packs")
    assert len(packs) == 1 and re.fullmatch(r"[0-9a-f]{16}", packs[0])
    for version, rows in before.items():
        assert cli.export(store, "Counter", at=str(version)) == rows
    copy = tmp_path / "copy"
    cli.ok("snapshot", store, copy)
    assert os.listdir(copy / "packs") == packs
    for version, rows in before.items():
        assert cli.export(copy, "Counter", at=str(version)) == rows
    assert cli.ok("verify", copy).returncode == 0
    # a second gc writes a new pack and removes the one it replaces
    history(cli, store, 5)
    cli.ok("gc", store, "--keep-versions", "10")
    again = store_entries(store, "packs")
    assert len(again) == 1 and again != packs
    assert cli.export(store, "Counter", at="40") == before[40]


def test_config_prints_every_setting_and_sets_and_unsets_one(cli, store):
    assert json.loads(cli.ok("config", store).stdout) == {
        "retention.keep-versions": None, "retention.keep-since": None, "retention.auto-gc-versions": 8}
    cli.ok("config", store, "retention.keep-since", "7d")
    assert json.loads(cli.ok("config", store, "retention.keep-since").stdout) == "7d"
    cli.ok("config", store, "retention.keep-since", "--unset")
    assert json.loads(cli.ok("config", store, "retention.keep-since").stdout) is None


def test_config_refuses_unknown_keys_and_bad_values_saying_what_it_takes(cli, store):
    assert "no setting named retention.keep" in cli.fail("config", store, "retention.keep", "1")
    assert "not a duration" in cli.fail("config", store, "retention.keep-since", "soon")
    assert "1 or more" in cli.fail("config", store, "retention.keep-versions", "0")
    assert json.loads(cli.ok("config", store).stdout)["retention.keep-versions"] is None


def test_a_retention_policy_is_applied_by_writing_commands_with_nobody_calling_gc(cli, store):
    cli.ok("config", store, "retention.keep-versions", "5")
    cli.ok("config", store, "retention.auto-gc-versions", "4")
    cli.commits(store, 30, prefix="Counter")
    log = cli.log(store)
    assert log[-1].get("reclaimed") is True and len(log) <= 5 + 4 + 1, log
    assert cli.export(store, "Counter00") == jsonl([{"id": "r", "value": 30}])
    assert cli.run("verify", store).returncode == 0
    # without a policy nothing is reclaimed
    cli.ok("config", store, "retention.keep-versions", "--unset")
    cli.commits(store, 10, prefix="Counter")
    assert len(cli.log(store)) == len(log) + 10
