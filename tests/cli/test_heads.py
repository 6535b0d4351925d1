"""heads: one JSON line per live table, the same JSON as heads/<Name>.json."""
import re

FIELDS = ["state", "stable_table_id", "incarnation_id", "table_key", "table_version",
          "table_branch", "row_count", "schema_hash", "head_graph_commit_id"]
ULID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


def test_heads_lines_have_the_documented_fields_in_order(cli, store):
    cli.import_rows(store, "Person", [{"id": "a"}, {"id": "b"}])
    (head,) = cli.heads(store)
    assert list(head) == FIELDS
    assert head["state"] == "live"
    assert head["table_key"] == "Person"
    assert head["table_branch"] is None
    assert head["row_count"] == 2
    assert ULID.fullmatch(head["stable_table_id"])
    assert ULID.fullmatch(head["incarnation_id"])
    assert re.fullmatch(r"[0-9a-f]{16}", head["schema_hash"])


def test_heads_are_in_name_order_one_per_live_table(cli, store):
    for table in ["Zoo", "Alpha", "Middle"]:
        cli.import_rows(store, table, [{"id": "x"}])
    assert [head["table_key"] for head in cli.heads(store)] == ["Alpha", "Middle", "Zoo"]


def test_head_names_the_commit_that_last_wrote_the_table(cli, store):
    cli.import_rows(store, "Person", [{"id": "a"}])
    cli.import_rows(store, "City", [{"id": "ber"}])
    cli.import_rows(store, "Person", [{"id": "b"}], mode="merge")
    log = cli.log(store)
    heads = {head["table_key"]: head for head in cli.heads(store)}
    assert heads["Person"]["head_graph_commit_id"] == log[0]["commit"]
    assert heads["City"]["head_graph_commit_id"] == log[1]["commit"]


def test_every_write_advances_the_table_version_and_keeps_identity(cli, store):
    cli.import_rows(store, "Person", [{"id": "a"}])
    (first,) = cli.heads(store)
    cli.import_rows(store, "Person", [{"id": "b"}], mode="merge")
    cli.import_rows(store, "Person", [{"id": "c"}])
    (last,) = cli.heads(store)
    assert last["table_version"] == first["table_version"] + 2
    assert last["stable_table_id"] == first["stable_table_id"]
    assert last["incarnation_id"] == first["incarnation_id"]
    assert last["row_count"] == 1


def test_distinct_tables_have_distinct_stable_ids(cli, store):
    cli.import_rows(store, "Person", [{"id": "a"}])
    cli.import_rows(store, "City", [{"id": "a"}])
    ids = {head["stable_table_id"] for head in cli.heads(store)}
    assert len(ids) == 2


def test_schema_change_changes_the_schema_hash_only(cli, store):
    import json
    cli.import_rows(store, "Person", [{"id": "a", "name": "Ann"}])
    (before,) = cli.heads(store)
    schema = json.loads(cli.ok("schema", store, "Person").stdout)
    schema["properties"]["email"] = {"type": "string", "nullable": True}
    cli.set_schema(store, "Person", schema)
    (after,) = cli.heads(store)
    assert after["schema_hash"] != before["schema_hash"]
    assert after["stable_table_id"] == before["stable_table_id"]
    assert after["incarnation_id"] == before["incarnation_id"]
    assert after["row_count"] == 1


def test_a_branch_inherits_heads_until_it_writes(cli, store):
    cli.import_rows(store, "Person", [{"id": "a"}])
    cli.import_rows(store, "City", [{"id": "ber"}])
    cli.ok("branch", store, "create", "experiment")
    assert cli.heads(store, branch="experiment") == cli.heads(store)


def test_the_first_write_on_a_branch_makes_it_the_owner(cli, store):
    cli.import_rows(store, "Person", [{"id": "a"}])
    cli.import_rows(store, "City", [{"id": "ber"}])
    cli.ok("branch", store, "create", "experiment")
    main_before = cli.heads(store)
    cli.import_rows(store, "Person", [{"id": "b"}], mode="merge", branch="experiment")
    heads = {head["table_key"]: head for head in cli.heads(store, branch="experiment")}
    main = {head["table_key"]: head for head in main_before}
    assert heads["Person"]["table_branch"] == "experiment"
    assert heads["Person"]["row_count"] == 2
    assert heads["Person"]["stable_table_id"] == main["Person"]["stable_table_id"]
    assert heads["City"] == main["City"]
    assert cli.heads(store) == main_before


def test_heads_at_a_version_are_the_heads_of_that_version(cli, store):
    recorded = {}
    for step, table in enumerate(["Person", "City", "Person", "Company", "City"]):
        version = cli.import_rows(store, table, [{"id": f"r{step}"}], mode="merge")
        recorded[version] = cli.heads(store)
    for version, heads in recorded.items():
        assert cli.heads(store, at=version) == heads


def test_heads_at_a_future_version_fails(cli, store):
    cli.import_rows(store, "Person", [{"id": "a"}])
    error = cli.fail("heads", store, "--at", "99")
    assert "99" in error
