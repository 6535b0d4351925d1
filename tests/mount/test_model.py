"""Model-based test of the mounted tree (docs/ARCHITECTURE.md "Reliability tests"): a hypothesis state machine
drives one mount through real file operations and compares every visible file
with a small in-memory model after every step.

Operations: overwrite (O_TRUNC), append (merge upserts and `@delete` lines),
drop (`rm`), rename (`mv`, also onto a live name), recreate a dropped name,
branch (mkdir, then write on the branch), stage two tables and `.commit`,
read `history/@V`, and a rejected write that must change nothing.

Every table is a node table with one fixed schema written to schema/X.json, so
a row is just an id and two nullable properties. The model renders rows the
way docs/MOUNT.md "The tree" defines: keys in schema order (id, name, n), nulls omitted,
compact, one "\\n" each; insertion order, an upserted row moving to the end.
"""
import copy
import errno
import functools
import itertools
import json
import os

import pytest
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, invariant, precondition, rule,
                                 run_state_machine_as_test)

from conftest import graphfs
from tier import size
from mountpoints import mount, mountpoint_directory, unmount

SCHEMA = {"kind": "node", "properties": {"name": {"type": "string", "nullable": True},
                                         "n": {"type": "i64", "nullable": True}}}
KEY_ORDER = ("id", "name", "n")
TABLE_NAMES = ("Ada", "Bob", "Cy", "Dee")
BRANCH_NAMES = ("b1", "b2")
# 30 runs of 40 steps; 300 under --soak, 10 under ASan and in quick
MACHINE_SETTINGS = settings(max_examples=size(30, soak=300, small=10), stateful_step_count=40, deadline=None, database=None,
                            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

ids = st.sampled_from("abcdef")
names = st.one_of(st.none(), st.sampled_from(["Ann", "", "é ü", 'q"\\/', "tab\there", "\u0001", "😀"]))
numbers = st.one_of(st.none(), st.integers(-3, 3), st.sampled_from([-2**63, 2**63 - 1]))


@st.composite
def rows(draw):
    """(model row, input line): the line may list explicit nulls and any key order."""
    row = {"id": draw(ids), "name": draw(names), "n": draw(numbers)}
    model = {key: row[key] for key in KEY_ORDER if row[key] is not None}
    given = dict(row) if draw(st.booleans()) else dict(model)
    keys = list(given)
    if draw(st.booleans()):
        keys.reverse()
    line = json.dumps({key: given[key] for key in keys}, ensure_ascii=draw(st.booleans())) + "\n"
    return model, line


@st.composite
def overwrite_rows(draw):
    """1-4 rows with distinct ids (duplicate ids are an error in an overwrite)."""
    drawn = draw(st.lists(rows(), min_size=1, max_size=4, unique_by=lambda pair: pair[0]["id"]))
    return drawn


merge_lines = st.lists(st.one_of(rows(), ids.map(lambda i: (i, json.dumps({"id": i, "@delete": True}) + "\n"))),
                       min_size=1, max_size=4)


def render(table_rows):
    return "".join(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n"
                   for row in table_rows.values())


def apply_merge(table_rows, lines):
    """Upserts in order; an upserted row (even unchanged) moves to the end; deleting a missing id is a no-op."""
    for item, _ in lines:
        if isinstance(item, str):
            table_rows.pop(item, None)
        else:
            table_rows.pop(item["id"], None)
            table_rows[item["id"]] = dict(item)


def apply_overwrite(table_rows, lines):
    table_rows.clear()
    for item, _ in lines:
        table_rows[item["id"]] = dict(item)


def step(function):
    """Marks the machine as inside a step while it runs, so teardown knows whether a step failed."""
    @functools.wraps(function)
    def wrapped(self, *args, **kwargs):
        self.in_step = True
        function(self, *args, **kwargs)
        self.in_step = False
    return wrapped


class Table:
    def __init__(self, stable_id, incarnation):
        self.stable_id = stable_id
        self.incarnation = incarnation
        self.rows = {}


class Tree:
    """One branch as the model sees it: live tables and the number of commits in its log."""

    def __init__(self):
        self.tables = {}
        self.log_count = 0
        self.newest_version = None


class MountedTree(RuleBasedStateMachine):
    base_directory = None       # set by the test: a pytest temporary directory (stores, daemon stderr)
    mount_directory = None      # set by the test: where the mountpoints go (see mountpoints.py)
    examples = itertools.count()

    def __init__(self):
        super().__init__()
        self.in_step = False
        directory = self.base_directory / f"example{next(self.examples)}"
        directory.mkdir()
        store = directory / "store"
        graphfs("init", store)
        self.mount = mount(store, self.mount_directory / directory.name, directory / "daemon.stderr")
        self.version = 0                # the store's clock: +1 per commit on any branch
        self.main = Tree()
        self.branches = {}              # name -> Tree
        self.history = {}               # main's commit versions -> deep copy of main's tables
        self.dropped = set()            # "<name>.<incarnation>.json" of tables dropped on main
        self.incarnations = {}          # name -> every incarnation it had on main
        self.errors = 0

    # --- helpers -------------------------------------------------------------------------------

    def path(self, *parts):
        return self.mount.path(*parts)

    def root_of(self, branch):
        return ("branches", branch) if branch else ()

    def tree_of(self, branch):
        return self.branches[branch] if branch else self.main

    def committed(self, branch=None):
        self.version += 1
        tree = self.tree_of(branch)
        tree.log_count += 1
        tree.newest_version = self.version
        if branch is None:
            self.history[self.version] = copy.deepcopy(self.main.tables)

    def write_file(self, relative_parts, text, mode):
        with open(self.path(*relative_parts), mode) as handle:
            handle.write(text)

    def head(self, branch, name):
        return json.loads(self.path(*self.root_of(branch), "heads", f"{name}.json").read_text())

    def drop_from_main(self, name):
        table = self.main.tables.pop(name)
        self.dropped.add(f"{name}.{table.incarnation}.json")

    def live_main(self):
        return sorted(self.main.tables)

    # --- rules ---------------------------------------------------------------------------------

    def create(self, branch, name):
        self.write_file((*self.root_of(branch), "schema", f"{name}.json"), json.dumps(SCHEMA), "w")
        head = self.head(branch, name)
        assert head["state"] == "live" and head["row_count"] == 0
        if branch is None:
            earlier = self.incarnations.setdefault(name, [])
            assert head["incarnation_id"] not in earlier, "recreating a name reused an incarnation"
            earlier.append(head["incarnation_id"])
        self.tree_of(branch).tables[name] = Table(head["stable_table_id"], head["incarnation_id"])
        self.committed(branch)

    @rule(name=st.sampled_from(TABLE_NAMES))
    @step
    def create_table(self, name):
        if name in self.main.tables:
            return
        self.create(None, name)

    @precondition(lambda self: any(n not in self.main.tables for n in self.incarnations))
    @rule(data=st.data())
    @step
    def recreate_dropped_table(self, data):
        name = data.draw(st.sampled_from(sorted(n for n in self.incarnations if n not in self.main.tables)))
        self.create(None, name)

    @precondition(lambda self: self.main.tables)
    @rule(data=st.data(), lines=overwrite_rows())
    @step
    def overwrite(self, data, lines):
        name = data.draw(st.sampled_from(self.live_main()))
        self.write_file(("tables", f"{name}.jsonl"), "".join(line for _, line in lines), "w")
        apply_overwrite(self.main.tables[name].rows, lines)
        self.committed()

    @precondition(lambda self: self.main.tables)
    @rule(data=st.data(), lines=merge_lines)
    @step
    def append(self, data, lines):
        name = data.draw(st.sampled_from(self.live_main()))
        self.write_file(("tables", f"{name}.jsonl"), "".join(line for _, line in lines), "a")
        apply_merge(self.main.tables[name].rows, lines)
        self.committed()

    @precondition(lambda self: self.main.tables)
    @rule(data=st.data())
    @step
    def drop(self, data):
        name = data.draw(st.sampled_from(self.live_main()))
        os.remove(self.path("tables", f"{name}.jsonl"))
        self.drop_from_main(name)
        self.committed()

    @precondition(lambda self: self.main.tables)
    @rule(data=st.data(), target_name=st.sampled_from(TABLE_NAMES))
    @step
    def rename(self, data, target_name):
        name = data.draw(st.sampled_from(self.live_main()))
        if name == target_name:
            return
        os.rename(self.path("tables", f"{name}.jsonl"), self.path("tables", f"{target_name}.jsonl"))
        if target_name in self.main.tables:
            self.drop_from_main(target_name)
        self.main.tables[target_name] = self.main.tables.pop(name)
        self.committed()

    @precondition(lambda self: len(self.branches) < len(BRANCH_NAMES))
    @rule(lines=merge_lines, name=st.sampled_from(TABLE_NAMES))
    @step
    def branch_and_write_on_it(self, lines, name):
        branch = BRANCH_NAMES[len(self.branches)]
        os.mkdir(self.path("branches", branch))
        tree = Tree()
        tree.tables = copy.deepcopy(self.main.tables)
        tree.log_count = self.main.log_count
        tree.newest_version = self.main.newest_version
        self.branches[branch] = tree
        self.write_on_branch(branch, lines, name)

    def write_on_branch(self, branch, lines, name):
        tree = self.branches[branch]
        if name not in tree.tables:
            self.create(branch, name)
        self.write_file(("branches", branch, "tables", f"{name}.jsonl"),
                        "".join(line for _, line in lines), "a")
        apply_merge(tree.tables[name].rows, lines)
        self.committed(branch)

    @precondition(lambda self: self.branches)
    @rule(data=st.data(), lines=merge_lines, name=st.sampled_from(TABLE_NAMES))
    @step
    def write_on_a_branch(self, data, lines, name):
        self.write_on_branch(data.draw(st.sampled_from(sorted(self.branches))), lines, name)

    @precondition(lambda self: len(self.main.tables) >= 2)
    @rule(data=st.data(), first=overwrite_rows(), second=merge_lines, first_is_merge=st.booleans(),
          message=st.sampled_from(["two tables", "staged ü"]))
    @step
    def stage_two_tables_and_commit(self, data, first, second, first_is_merge, message):
        names = data.draw(st.lists(st.sampled_from(self.live_main()), min_size=2, max_size=2, unique=True))
        staged = [(names[0], first, "a" if first_is_merge else "w"), (names[1], second, "a")]
        for name, lines, mode in staged:
            self.write_file(("staging", f"{name}.jsonl"), "".join(line for _, line in lines), mode)
        assert sorted(os.listdir(self.path("staging"))) == [".commit"] + sorted(f"{n}.jsonl" for n in names)
        # Nothing is visible before the commit: the invariants of the previous step still hold.
        for name in names:
            assert self.path("tables", f"{name}.jsonl").read_text() == render(self.main.tables[name].rows)
        self.write_file(("staging", ".commit"), message + "\n", "w")
        for name, lines, mode in staged:
            (apply_merge if mode == "a" else apply_overwrite)(self.main.tables[name].rows, lines)
        self.committed()
        newest = json.loads(self.path("log").read_text().splitlines()[0])
        assert newest["message"] == message
        assert sorted(change["table"] for change in newest["changes"]) == sorted(names)
        assert os.listdir(self.path("staging")) == [".commit"]

    @precondition(lambda self: self.main.tables)
    @rule(data=st.data(), bad=st.sampled_from(['{"id":"a","n":"seven"}\n', '{"id":"a","n":1.5}\n',
                                               '{"id":"a","name":3}\n', '{"id":"a",\n', '[1,2]\n']),
          mode=st.sampled_from(["w", "a"]))
    @step
    def rejected_write_changes_nothing(self, data, bad, mode):
        name = data.draw(st.sampled_from(self.live_main()))
        with pytest.raises(OSError) as raised:
            self.write_file(("tables", f"{name}.jsonl"), '{"id":"f"}\n' + bad, mode)
        assert raised.value.errno == errno.EINVAL
        self.errors += 1
        recorded = self.path(".graphfs", "errors").read_text().splitlines()
        assert len(recorded) == self.errors
        assert json.loads(recorded[-1])["path"] == f"tables/{name}.jsonl"

    @precondition(lambda self: self.history)
    @rule(data=st.data())
    @step
    def read_history(self, data):
        oldest = min(self.history)
        version = data.draw(st.integers(oldest, self.version))
        state = self.history[max(v for v in self.history if v <= version)]
        snapshot = self.path("history", f"@{version}")
        assert sorted(os.listdir(snapshot / "tables")) == sorted(f"{n}.jsonl" for n in state)
        for name, table in state.items():
            assert (snapshot / "tables" / f"{name}.jsonl").read_text() == render(table.rows), (version, name)
            head = json.loads((snapshot / "heads" / f"{name}.json").read_text())
            assert head["row_count"] == len(table.rows)
            assert head["stable_table_id"] == table.stable_id

    # --- invariants ----------------------------------------------------------------------------

    def check_tree(self, branch):
        tree = self.tree_of(branch)
        root = self.path(*self.root_of(branch))
        live = sorted(f"{n}.jsonl" for n in tree.tables)
        assert sorted(os.listdir(root / "tables")) == live
        assert sorted(os.listdir(root / "schema")) == sorted(f"{n}.json" for n in tree.tables)
        for name, table in tree.tables.items():
            expected = render(table.rows)
            path = root / "tables" / f"{name}.jsonl"
            assert path.read_text() == expected, (branch, name)
            assert path.stat().st_size == len(expected.encode())
            head = json.loads((root / "heads" / f"{name}.json").read_text())
            assert head["state"] == "live"
            assert head["row_count"] == len(table.rows), (branch, name)
            assert head["stable_table_id"] == table.stable_id, (branch, name)
            assert head["incarnation_id"] == table.incarnation, (branch, name)
        log = (root / "log").read_text().splitlines()
        assert len(log) == tree.log_count, branch
        if log:
            assert json.loads(log[0])["version"] == tree.newest_version, branch

    @invariant()
    def main_matches_the_model(self):
        self.in_step = True
        self.check_tree(None)
        assert sorted(os.listdir(self.path("heads", ".dropped"))) == sorted(self.dropped)
        assert os.listdir(self.path("staging")) == [".commit"]
        self.in_step = False

    @invariant()
    def branches_match_the_model(self):
        self.in_step = True
        assert sorted(os.listdir(self.path("branches"))) == sorted(["main", *self.branches])
        for branch in self.branches:
            self.check_tree(branch)
        self.in_step = False

    def teardown(self):
        """Unmounts cleanly after a passing run; after a failure, detaches and kills (nothing stays mounted)."""
        unmount(self.mount, failed=self.in_step)


def test_the_mounted_tree_behaves_like_the_model(tmp_path):
    MountedTree.base_directory = tmp_path
    with mountpoint_directory("graphfs-model-") as directory:
        MountedTree.mount_directory = directory
        run_state_machine_as_test(MountedTree, settings=MACHINE_SETTINGS)
