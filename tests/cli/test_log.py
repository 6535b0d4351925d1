"""log: the same JSON lines as the mounted log, newest first; --graph."""
import json
import os
import re
import select
import signal
import subprocess
import time

FIELDS = ["version", "commit", "parents", "branch", "time", "actor", "message", "changes"]
ULID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


def make_history(cli, store):
    cli.import_rows(store, "Person", [{"id": "a", "name": "Ann"}, {"id": "b", "name": "Bo"}],
                    message="first people")
    cli.import_rows(store, "Person", '{"id":"c","name":"Cy"}\n{"id":"a","@delete":true}\n',
                    mode="merge", message="merge people")
    cli.import_rows(store, "City", [{"id": "ber"}], message="cities")
    cli.import_rows(store, "Person", [{"id": "z", "name": "Zed"}], message="replace people")


def test_log_lines_have_the_documented_fields_in_order(cli, store):
    make_history(cli, store)
    for entry in cli.log(store):
        assert list(entry) == FIELDS
        assert ULID.fullmatch(entry["commit"])
        assert TIME.fullmatch(entry["time"])
        assert entry["branch"] == "main"
        assert isinstance(entry["actor"], str) and entry["actor"]
        for change in entry["changes"]:
            assert list(change) == ["table", "op", "rows"]


def test_log_is_newest_first_with_one_line_per_commit(cli, store):
    make_history(cli, store)
    log = cli.log(store)
    assert [entry["version"] for entry in log] == [4, 3, 2, 1]
    assert [entry["message"] for entry in log] == ["replace people", "cities", "merge people",
                                                   "first people"]
    times = [entry["time"] for entry in log]
    assert times == sorted(times, reverse=True)


def test_log_parents_chain_each_commit_to_the_previous(cli, store):
    make_history(cli, store)
    log = cli.log(store)
    assert log[-1]["parents"] == []
    for newer, older in zip(log, log[1:]):
        assert newer["parents"] == [older["commit"]]
    assert len({entry["commit"] for entry in log}) == len(log)


def test_log_changes_name_table_operation_and_rows(cli, store):
    make_history(cli, store)
    log = cli.log(store)
    assert log[3]["changes"][0]["table"] == "Person"
    assert log[3]["changes"][0]["op"] in ("create", "overwrite")
    assert log[3]["changes"][0]["rows"] == 2
    assert log[2]["changes"] == [{"table": "Person", "op": "merge", "rows": 2}]
    assert log[0]["changes"] == [{"table": "Person", "op": "overwrite", "rows": 1}]


def test_log_of_a_branch_shows_its_commits_and_the_history_it_forked_from(cli, store):
    make_history(cli, store)
    cli.ok("branch", store, "create", "experiment")
    cli.import_rows(store, "City", [{"id": "par"}], branch="experiment", message="on experiment")
    cli.import_rows(store, "City", [{"id": "rom"}], message="on main")
    experiment = cli.log(store, branch="experiment")
    assert [entry["message"] for entry in experiment][:2] == ["on experiment", "replace people"]
    assert experiment[0]["branch"] == "experiment"
    assert "on experiment" not in [entry["message"] for entry in cli.log(store)]


def test_log_of_a_missing_branch_fails(cli, store):
    error = cli.fail("log", store, "--branch", "nope")
    assert "nope" in error


def test_log_graph_draws_one_star_per_commit_and_the_fork(cli, store):
    make_history(cli, store)
    cli.ok("branch", store, "create", "experiment")
    cli.import_rows(store, "City", [{"id": "par"}], branch="experiment", message="on experiment")
    cli.import_rows(store, "City", [{"id": "rom"}], message="on main")
    lines = cli.ok("log", store, "--graph").stdout.decode().splitlines()
    commit_lines = [line for line in lines if "*" in line]
    assert len(commit_lines) == 6
    versions = [int(re.search(r"\* (?:[| ] )*(\d+) ", line).group(1)) for line in commit_lines]
    assert versions == [6, 5, 4, 3, 2, 1]
    assert any(line.strip() == "|/" for line in lines), lines
    assert "(experiment)" in commit_lines[1] and "[experiment]" in commit_lines[1]
    assert "(main)" in commit_lines[0]


def test_log_graph_of_one_branch_draws_only_its_history(cli, store):
    make_history(cli, store)
    cli.ok("branch", store, "create", "experiment")
    cli.import_rows(store, "City", [{"id": "par"}], branch="experiment", message="on experiment")
    cli.import_rows(store, "City", [{"id": "rom"}], message="on main")
    lines = cli.ok("log", store, "--graph", "--branch", "experiment").stdout.decode().splitlines()
    assert len(lines) == 5
    assert all(line.startswith("* ") for line in lines)
    assert "on main" not in "\n".join(lines)


def test_log_graph_draws_a_merge_with_its_second_parent_and_joins_a_fork_above_its_point(cli, store):
    make_history(cli, store)
    cli.ok("branch", store, "create", "experiment")
    cli.import_rows(store, "City", [{"id": "par"}], branch="experiment", message="on experiment")
    cli.import_rows(store, "City", [{"id": "rom"}], message="on main")
    cli.ok("merge", store, "experiment", "-m", "merged")
    lines = cli.ok("log", store, "--graph").stdout.decode().splitlines()
    assert lines[0].startswith("* 7 ") and "merged" in lines[0]
    assert lines[1] == "|\\"
    assert lines[2].startswith("* | 6 ") and lines[3].startswith("| * 5 ")
    assert lines[4] == "|/" and lines[5].startswith("* 4 ")
    assert all(line.startswith("* ") for line in lines[5:])   # no lane left open below the fork


class Follower:
    """A running `graphfs log --follow`, read line by line with a deadline; stopped by PID."""

    def __init__(self, cli, *args):
        self.process = subprocess.Popen([cli.binary, "log", *map(str, args), "--follow"], stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)
        self.pending = b""

    def lines(self, count, timeout=10.0):
        """The next `count` lines as parsed JSON (fewer if the deadline passes first)."""
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            while b"\n" in self.pending and len(got) < count:
                line, self.pending = self.pending.split(b"\n", 1)
                got.append(json.loads(line))
            if len(got) == count:
                break
            ready, _, _ = select.select([self.process.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if ready:
                chunk = os.read(self.process.stdout.fileno(), 65536)
                if not chunk:
                    break
                self.pending += chunk
        return got

    def stop(self):
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=10)
        self.process.stdout.close()
        self.process.stderr.close()


def test_log_follow_prints_the_branch_oldest_first_then_each_new_commit(cli, store):
    make_history(cli, store)
    cli.ok("branch", store, "create", "experiment")
    follower = Follower(cli, store)
    try:
        assert [entry["version"] for entry in follower.lines(4)] == [1, 2, 3, 4]
        cli.import_rows(store, "City", [{"id": "par"}], branch="experiment", message="elsewhere")
        cli.import_rows(store, "City", [{"id": "rom"}], message="new on main")
        (line,) = follower.lines(1)
        assert line["message"] == "new on main" and line["version"] == 6
        assert line == cli.log(store)[0]
    finally:
        follower.stop()


def test_log_follow_all_prints_every_commit_of_every_branch_by_version(cli, store):
    make_history(cli, store)
    cli.ok("branch", store, "create", "experiment")
    cli.import_rows(store, "City", [{"id": "par"}], branch="experiment", message="on experiment")
    follower = Follower(cli, store, "--all")
    try:
        assert [entry["version"] for entry in follower.lines(5)] == [1, 2, 3, 4, 5]
        cli.import_rows(store, "City", [{"id": "rom"}], message="on main")
        cli.import_rows(store, "City", [{"id": "osl"}], branch="experiment", message="again")
        assert [(entry["branch"], entry["message"]) for entry in follower.lines(2)] == [
            ("main", "on main"), ("experiment", "again")]
    finally:
        follower.stop()


def test_log_all_without_follow_is_a_usage_error(cli, store):
    make_history(cli, store)
    assert "--follow" in cli.fail("log", store, "--all", status=2)
