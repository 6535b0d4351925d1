"""graphfs merge: outcomes, conflict kinds, property-wise merges, strategies, renames,
bases in the commit graph (docs/MOUNT.md "Merging")."""
import json
import re

from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import Cli, jsonl
from tier import size

PERSON = {"kind": "node", "properties": {"n": {"type": "i64", "nullable": True},
                                         "s": {"type": "string", "nullable": True}}}
KNOWS = {"kind": "edge", "from": "Person", "to": "Person", "properties": {}}


def rows_of(cli, store, table, branch=None):
    return sorted((json.loads(line) for line in cli.export(store, table, branch=branch).splitlines()),
                  key=lambda row: row["id"])


def merge(cli, store, source, *args):
    return cli.run("merge", store, source, *args)


def conflicts_of(result):
    return [json.loads(line) for line in result.stdout.decode().splitlines() if line.startswith("{")]


def person_store(cli, store, rows=None):
    cli.set_schema(store, "Person", PERSON)
    cli.import_rows(store, "Person", rows if rows is not None else
                    [{"id": "a", "n": 1, "s": "x"}, {"id": "b", "n": 2, "s": "y"}, {"id": "c", "n": 3, "s": "z"}])
    cli.ok("branch", store, "create", "dev")


def version_of(cli, store):
    return json.loads(cli.ok("stats", store).stdout)["store"]["version"]


def test_a_branch_with_nothing_new_is_up_to_date_and_nothing_is_published(cli, store):
    person_store(cli, store)
    before = version_of(cli, store)
    output = cli.ok("merge", store, "dev").stdout.decode()
    assert output == "main is up to date with dev: nothing to merge\n"
    assert version_of(cli, store) == before


def test_a_destination_that_did_not_move_fast_forwards_to_the_source_in_one_commit(cli, store):
    person_store(cli, store)
    cli.import_rows(store, "Person", [{"id": "d", "n": 4, "s": "w"}], mode="merge", branch="dev")
    output = cli.ok("merge", store, "dev").stdout.decode()
    assert output.startswith("fast-forwarded dev into main: committed version")
    assert cli.export(store, "Person") == cli.export(store, "Person", branch="dev")
    head = cli.log(store)[0]
    assert head["message"] == "merge dev into main"
    assert head["parents"][1] == cli.log(store, branch="dev")[0]["commit"]


def test_changes_on_both_sides_make_one_merge_commit_with_two_parents(cli, store):
    person_store(cli, store)
    cli.import_rows(store, "Person", [{"id": "d", "n": 4, "s": "w"}], mode="merge", branch="dev")
    cli.import_rows(store, "Person", '{"id":"c","@delete":true}\n', mode="merge")
    ours = cli.log(store)[0]["commit"]
    theirs = cli.log(store, branch="dev")[0]["commit"]
    output = cli.ok("merge", store, "dev", "-m", "bring dev in").stdout.decode()
    assert re.match(r"merged dev into main: committed version \d+ \(commit [0-9A-Z]{26}\)\n", output)
    head = cli.log(store)[0]
    assert head["parents"] == [ours, theirs] and head["message"] == "bring dev in"
    assert [row["id"] for row in rows_of(cli, store, "Person")] == ["a", "b", "d"]
    cli.ok("verify", store)


def test_merging_again_after_a_merge_is_up_to_date(cli, store):
    person_store(cli, store)
    cli.import_rows(store, "Person", [{"id": "d", "n": 4, "s": "w"}], mode="merge", branch="dev")
    cli.import_rows(store, "Person", [{"id": "e", "n": 5, "s": "v"}], mode="merge")
    cli.ok("merge", store, "dev")
    assert "up to date" in cli.ok("merge", store, "dev").stdout.decode()


def test_changes_to_different_properties_of_one_row_both_apply(cli, store):
    person_store(cli, store)
    cli.import_rows(store, "Person", [{"id": "b", "n": 20, "s": "y"}], mode="merge", branch="dev")
    cli.import_rows(store, "Person", [{"id": "b", "n": 2, "s": "Y"}], mode="merge")
    cli.ok("merge", store, "dev")
    assert rows_of(cli, store, "Person")[1] == {"id": "b", "n": 20, "s": "Y"}


def test_the_same_change_on_both_sides_is_no_conflict(cli, store):
    person_store(cli, store)
    for branch in ("dev", None):
        cli.import_rows(store, "Person", [{"id": "b", "n": 9, "s": "y"}, {"id": "q", "n": 0, "s": "q"}],
                        mode="merge", branch=branch)
    cli.ok("merge", store, "dev")
    assert {"id": "q", "n": 0, "s": "q"} in rows_of(cli, store, "Person")


def test_a_property_changed_to_different_values_is_a_divergent_update_and_nothing_is_published(cli, store):
    person_store(cli, store)
    cli.import_rows(store, "Person", [{"id": "a", "n": 11, "s": "x"}], mode="merge", branch="dev")
    cli.import_rows(store, "Person", [{"id": "a", "n": 12, "s": "x"}], mode="merge")
    before = version_of(cli, store)
    result = merge(cli, store, "dev")
    assert result.returncode == 1
    assert result.stderr.decode() == ("graphfs: 1 conflict merging dev into main: nothing was published "
                                      "(resolve them on one branch, or give --strategy ours|theirs)\n")
    [conflict] = conflicts_of(result)
    assert conflict == {"kind": "divergent_update", "table": "Person", "id": "a", "property": "n",
                        "base": {"id": "a", "n": 1, "s": "x"}, "ours": {"id": "a", "n": 12, "s": "x"},
                        "theirs": {"id": "a", "n": 11, "s": "x"}}
    assert version_of(cli, store) == before


def test_one_id_inserted_with_different_rows_is_a_divergent_insert(cli, store):
    person_store(cli, store)
    cli.import_rows(store, "Person", [{"id": "new", "n": 1, "s": "x"}], mode="merge", branch="dev")
    cli.import_rows(store, "Person", [{"id": "new", "n": 2, "s": "x"}], mode="merge")
    [conflict] = conflicts_of(merge(cli, store, "dev"))
    assert conflict["kind"] == "divergent_insert" and conflict["id"] == "new" and conflict["base"] is None


def test_a_row_deleted_on_one_side_and_changed_on_the_other_is_a_delete_update(cli, store):
    person_store(cli, store)
    cli.import_rows(store, "Person", '{"id":"a","@delete":true}\n', mode="merge", branch="dev")
    cli.import_rows(store, "Person", [{"id": "a", "n": 100, "s": "x"}], mode="merge")
    [conflict] = conflicts_of(merge(cli, store, "dev"))
    assert conflict["kind"] == "delete_update" and conflict["theirs"] is None
    assert conflict["ours"] == {"id": "a", "n": 100, "s": "x"}


def test_an_edge_added_to_a_node_the_other_side_deleted_is_an_orphan_edge(cli, store):
    person_store(cli, store)
    cli.set_schema(store, "Knows", KNOWS)
    cli.import_rows(store, "Person", [{"id": "z", "n": 0, "s": ""}], mode="merge")
    cli.ok("branch", store, "create", "side")
    cli.import_rows(store, "Knows", [{"id": "k1", "from": "a", "to": "z"}], mode="merge", branch="side")
    cli.import_rows(store, "Person", '{"id":"z","@delete":true}\n', mode="merge")
    result = merge(cli, store, "side")
    assert result.returncode == 1
    [conflict] = conflicts_of(result)
    assert conflict["kind"] == "orphan_edge" and conflict["table"] == "Knows" and conflict["id"] == "k1"
    # and the other way round: ours added the edge, theirs deleted the node
    cli.ok("branch", store, "create", "other", "--from", "side")
    cli.import_rows(store, "Knows", [{"id": "k2", "from": "b", "to": "a"}], mode="merge", branch="side")
    cli.import_rows(store, "Knows", '{"id":"k1","@delete":true}\n', mode="merge", branch="other")
    cli.import_rows(store, "Person", '{"id":"b","@delete":true}\n', mode="merge", branch="other")
    result = merge(cli, store, "other", "--into", "side")
    [conflict] = conflicts_of(result)
    assert conflict["kind"] == "orphan_edge" and conflict["id"] == "k2"


def test_an_orphan_edge_resolved_by_a_strategy_leaves_no_dangling_reference(cli, store):
    person_store(cli, store)
    cli.set_schema(store, "Knows", KNOWS)
    cli.import_rows(store, "Person", [{"id": "z", "n": 0, "s": ""}], mode="merge")
    cli.ok("branch", store, "create", "side")
    cli.import_rows(store, "Knows", [{"id": "k1", "from": "a", "to": "z"}], mode="merge", branch="side")
    cli.import_rows(store, "Person", '{"id":"z","@delete":true}\n', mode="merge")
    cli.ok("branch", store, "create", "copy")
    cli.ok("merge", store, "side", "--strategy", "ours")
    assert cli.export(store, "Knows") == "" and "z" not in [r["id"] for r in rows_of(cli, store, "Person")]
    cli.ok("merge", store, "side", "--into", "copy", "--strategy", "theirs")
    assert [r["id"] for r in rows_of(cli, store, "Knows", branch="copy")] == ["k1"]
    assert "z" in [r["id"] for r in rows_of(cli, store, "Person", branch="copy")]
    cli.ok("verify", store)


def test_incompatible_schema_changes_on_both_sides_are_a_schema_conflict(cli, store):
    person_store(cli, store)
    for branch, extra in (("dev", "p"), (None, "q")):
        schema = json.loads(json.dumps(PERSON))
        schema["properties"][extra] = {"type": "string", "nullable": True}
        cli.set_schema(store, "Person", schema, branch=branch)
        cli.import_rows(store, "Person", [{"id": "a", "n": 7, "s": "x"}], mode="merge", branch=branch)
    kinds = [c["kind"] for c in conflicts_of(merge(cli, store, "dev"))]
    assert kinds == ["schema"]


def test_a_schema_change_on_one_side_merges_with_row_changes_on_the_other(cli, store):
    person_store(cli, store)
    schema = json.loads(json.dumps(PERSON))
    schema["properties"]["age"] = {"type": "i64", "nullable": True}
    cli.set_schema(store, "Person", schema, branch="dev")
    cli.import_rows(store, "Person", [{"id": "a", "n": 1, "s": "x", "age": 30}], mode="merge", branch="dev")
    cli.import_rows(store, "Person", [{"id": "b", "n": 22, "s": "y"}], mode="merge")
    cli.ok("merge", store, "dev")
    rows = rows_of(cli, store, "Person")
    assert rows[0]["age"] == 30 and rows[1]["n"] == 22
    assert "age" in cli.ok("schema", store, "Person").stdout.decode()


def test_a_table_only_the_source_created_comes_over_and_keeps_its_identity(cli, store):
    person_store(cli, store)
    cli.import_rows(store, "Extra", [{"id": "e1"}], branch="dev")
    cli.import_rows(store, "Person", [{"id": "m", "n": 0, "s": ""}], mode="merge")
    cli.ok("merge", store, "dev")
    assert cli.export(store, "Extra") == jsonl([{"id": "e1"}])
    # later edits of that table on dev merge into it, not into a second table
    cli.import_rows(store, "Extra", [{"id": "e2"}], mode="merge", branch="dev")
    cli.import_rows(store, "Person", [{"id": "m2", "n": 0, "s": ""}], mode="merge")
    cli.ok("merge", store, "dev")
    assert cli.export(store, "Extra") == jsonl([{"id": "e1"}, {"id": "e2"}])
    ids = {head["table_key"]: head["stable_table_id"] for head in cli.heads(store)}
    dev = {head["table_key"]: head["stable_table_id"] for head in cli.heads(store, branch="dev")}
    assert ids["Extra"] == dev["Extra"]


def test_the_strategy_resolves_every_conflict_to_one_side_and_says_so(cli, store):
    person_store(cli, store)
    cli.ok("branch", store, "create", "copy")
    cli.import_rows(store, "Person", [{"id": "a", "n": 11, "s": "x"}, {"id": "new", "n": 1, "s": "t"}],
                    mode="merge", branch="dev")
    for branch in (None, "copy"):
        cli.import_rows(store, "Person", [{"id": "a", "n": 12, "s": "X"}, {"id": "new", "n": 2, "s": "o"}],
                        mode="merge", branch=branch)
    result = cli.ok("merge", store, "dev", "--strategy", "theirs")
    lines = conflicts_of(result)
    assert sorted(c["kind"] for c in lines) == ["divergent_insert", "divergent_update"]
    assert all(c["resolved"] == "theirs" for c in lines)
    assert "2 conflicts resolved as theirs" in result.stdout.decode()
    rows = {row["id"]: row for row in rows_of(cli, store, "Person")}
    assert rows["a"] == {"id": "a", "n": 11, "s": "X"} and rows["new"]["n"] == 1
    cli.ok("merge", store, "dev", "--into", "copy", "--strategy", "ours")
    rows = {row["id"]: row for row in rows_of(cli, store, "Person", branch="copy")}
    assert rows["a"] == {"id": "a", "n": 12, "s": "X"} and rows["new"]["n"] == 2


def test_a_branch_forked_from_a_branch_merges_into_main_against_their_common_ancestor(cli, store):
    person_store(cli, store)
    cli.import_rows(store, "Person", [{"id": "d1", "n": 1, "s": ""}], mode="merge", branch="dev")
    cli.ok("branch", store, "create", "feature", "--from", "dev")
    cli.import_rows(store, "Person", [{"id": "f1", "n": 1, "s": ""}], mode="merge", branch="feature")
    cli.import_rows(store, "Person", [{"id": "m1", "n": 1, "s": ""}], mode="merge")
    cli.ok("merge", store, "feature")
    assert [row["id"] for row in rows_of(cli, store, "Person")] == ["a", "b", "c", "d1", "f1", "m1"]
    # dev's own commit came with feature: merging dev now has nothing new
    assert "up to date" in cli.ok("merge", store, "dev").stdout.decode()


def test_a_criss_cross_history_merges_against_the_newest_common_ancestor(cli, store):
    person_store(cli, store)
    m2 = cli.import_rows(store, "Person", [{"id": "m", "n": 1, "s": ""}], mode="merge")
    d2 = cli.import_rows(store, "Person", [{"id": "d", "n": 1, "s": ""}], mode="merge", branch="dev")
    cli.ok("branch", store, "create", "snapshot_of_main")
    cli.ok("merge", store, "dev")                       # main = merge(m2, d2)
    cli.ok("merge", store, "snapshot_of_main", "--into", "dev")   # dev = merge(d2, m2)
    cli.import_rows(store, "Person", [{"id": "m", "n": 2, "s": ""}], mode="merge")
    cli.import_rows(store, "Person", [{"id": "d", "n": 2, "s": ""}], mode="merge", branch="dev")
    # two common ancestors (m2 and d2), neither newer by ancestry: the newest version is the base
    dry = cli.run("merge", store, "dev", "--dry-run")
    again = cli.run("merge", store, "dev", "--dry-run")
    assert dry.stdout == again.stdout and dry.returncode == again.returncode == 1
    [conflict] = conflicts_of(dry)
    base = max(m2, d2)
    assert conflict["kind"] == "divergent_insert" and conflict["id"] == ("m" if base == d2 else "d")
    cli.ok("merge", store, "dev", "--strategy", "ours")
    rows = {row["id"]: row["n"] for row in rows_of(cli, store, "Person")}
    assert rows["m"] == 2 and rows["d"] == 2


def test_if_commit_on_the_destination_refuses_a_merge_when_it_moved(cli, store):
    person_store(cli, store)
    cli.import_rows(store, "Person", [{"id": "d", "n": 4, "s": "w"}], mode="merge", branch="dev")
    stale = cli.log(store)[0]["commit"]
    cli.import_rows(store, "Person", [{"id": "e", "n": 4, "s": "w"}], mode="merge")
    error = cli.fail("merge", store, "dev", "--if-commit", stale)
    assert "(--if-commit): nothing was published" in error


def test_merge_refuses_a_branch_into_itself_and_a_missing_branch(cli, store):
    person_store(cli, store)
    assert "into itself" in cli.fail("merge", store, "main")
    assert "nope" in cli.fail("merge", store, "nope")
    assert "--strategy" in cli.fail("merge", store, "dev", "--strategy", "mine", status=2)


# ---- a model: random two-branch histories against a Python three-way merge ---------------

IDS = ["a", "b", "c", "d", "e"]


def model_merge(base, ours, theirs, strategy=None):
    result, conflicts = dict(ours), []
    for key in sorted(set(base) | set(ours) | set(theirs)):
        b, o, t = base.get(key), ours.get(key), theirs.get(key)
        if t == b or o == t:
            continue
        if o == b:
            if t is None:
                result.pop(key, None)
            else:
                result[key] = t
            continue
        if b is None or o is None or t is None:
            conflicts.append(("divergent_insert" if b is None else "delete_update", key, None))
            if strategy == "theirs":
                if t is None:
                    result.pop(key, None)
                else:
                    result[key] = t
            continue
        merged = {}
        for prop in o:
            if o[prop] == b[prop]:
                merged[prop] = t[prop]
            elif t[prop] == b[prop] or o[prop] == t[prop]:
                merged[prop] = o[prop]
            else:
                conflicts.append(("divergent_update", key, prop))
                merged[prop] = t[prop] if strategy == "theirs" else o[prop]
        result[key] = merged
    return result, conflicts


operation = st.tuples(st.sampled_from(IDS), st.one_of(st.none(), st.tuples(st.integers(0, 2), st.sampled_from("xy"))))


def apply(rows, operations):
    rows = dict(rows)
    for key, value in operations:
        if value is None:
            rows.pop(key, None)
        else:
            rows[key] = {"id": key, "n": value[0], "s": value[1]}
    return rows


def commit(cli, store, branch, operations):
    for key, value in operations:
        line = ('{"id":"%s","@delete":true}\n' % key if value is None
                else json.dumps({"id": key, "n": value[0], "s": value[1]}) + "\n")
        result = cli.run("import", store, "Person", cli.write_file(line), "--mode", "merge", "--branch", branch)
        assert result.returncode == 0, result.stderr


@settings(max_examples=size(25, soak=200, small=6), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(start=st.lists(operation, max_size=5), ours=st.lists(operation, max_size=4),
       theirs=st.lists(operation, max_size=4), strategy=st.sampled_from([None, "theirs", "ours"]))
def test_random_two_branch_histories_merge_as_the_model_says(graphfs, tmp_path_factory, start, ours, theirs,
                                                            strategy):
    work = tmp_path_factory.mktemp("merge-model")
    cli = Cli(graphfs, work)
    store = work / "store"
    cli.ok("init", store)
    cli.set_schema(store, "Person", PERSON)
    base = apply({}, start)
    cli.import_rows(store, "Person", list(base.values()) or "")
    cli.ok("branch", store, "create", "dev")
    commit(cli, store, "main", ours)
    commit(cli, store, "dev", theirs)
    expected, expected_conflicts = model_merge(base, apply(base, ours), apply(base, theirs), strategy)
    args = ["merge", store, "dev"] + (["--strategy", strategy] if strategy else [])
    result = cli.run(*args)
    found = sorted((c["kind"], c["id"], c.get("property")) for c in conflicts_of(result))
    assert found == sorted(expected_conflicts)
    if expected_conflicts and not strategy:
        assert result.returncode == 1
        return
    assert result.returncode == 0, result.stderr
    assert {row["id"]: row for row in rows_of(cli, store, "Person")} == expected
    cli.ok("verify", store)


def test_gc_keeps_the_merge_base_of_a_branch_so_it_can_still_be_merged(cli, store):
    person_store(cli, store)
    cli.import_rows(store, "Person", [{"id": "d", "n": 4, "s": "w"}], mode="merge", branch="dev")
    base = cli.log(store, branch="dev")[1]["version"]   # main's commit dev forked from
    for value in range(6):
        cli.import_rows(store, "Person", [{"id": "m", "n": value, "s": ""}], mode="merge")
    output = cli.ok("gc", store, "--keep-versions", "1").stdout.decode()
    assert f"gc: kept version {base} and later: the merge base of branch dev" in output
    assert json.loads(cli.ok("stats", store).stdout)["store"]["horizon"] == base - 1
    cli.ok("merge", store, "dev")
    assert {row["id"] for row in rows_of(cli, store, "Person")} == {"a", "b", "c", "d", "m"}
    cli.ok("verify", store)


def test_a_branch_with_no_commit_of_its_own_does_not_hold_gc_back_and_still_fast_forwards(cli, store):
    person_store(cli, store)   # dev never commits
    for value in range(6):
        cli.import_rows(store, "Person", [{"id": "m", "n": value, "s": ""}], mode="merge")
    output = cli.ok("gc", store, "--keep-versions", "1").stdout.decode()
    assert "merge base" not in output
    assert "up to date" in cli.ok("merge", store, "dev").stdout.decode()
    assert cli.ok("merge", store, "main", "--into", "dev").stdout.decode().startswith("fast-forwarded main into dev")
    assert cli.export(store, "Person", branch="dev") == cli.export(store, "Person")
    cli.ok("verify", store)


def test_edges_to_nodes_the_source_added_merge_with_the_destinations_own_edges(cli, store):
    person_store(cli, store)
    cli.set_schema(store, "Knows", KNOWS)
    cli.import_rows(store, "Knows", [{"id": "k0", "from": "a", "to": "b"}])
    cli.ok("branch", store, "create", "people")
    cli.import_rows(store, "Person", [{"id": "z", "n": 9, "s": "new"}], mode="merge", branch="people")
    cli.import_rows(store, "Knows", [{"id": "k1", "from": "a", "to": "z"}], mode="merge", branch="people")
    cli.import_rows(store, "Knows", [{"id": "k2", "from": "c", "to": "a"}], mode="merge")
    cli.ok("merge", store, "people")
    assert [row["id"] for row in rows_of(cli, store, "Knows")] == ["k0", "k1", "k2"]
    assert "z" in [row["id"] for row in rows_of(cli, store, "Person")]
    cli.ok("verify", store)
    # and a graph walk sees the merged edge
    assert json.loads(cli.ok("dump", store).stdout.decode().splitlines()[-1])["edge"] == "Knows"
