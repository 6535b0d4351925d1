"""import and export: byte-exact round trips, canonical form, merge semantics."""
from conftest import canonical, jsonl

PEOPLE = [
    {"id": "p1", "name": "Ann", "age": 31, "score": 1.5, "tags": ["a", "b"], "active": True},
    {"id": "p2", "name": "Bo \"the\" \\ / ünïcode ✓", "age": -7, "score": 0.25, "tags": [],
     "active": False},
    {"id": "p3", "name": "line\nbreak\ttab", "age": 0, "score": 0.125, "tags": ["x"],
     "active": True},
]


def test_import_then_export_round_trips_byte_exact(cli, store):
    text = jsonl(PEOPLE)
    cli.import_rows(store, "Person", text)
    assert cli.export(store, "Person") == text


def test_export_writes_nothing_but_the_rows(cli, store):
    cli.import_rows(store, "Person", PEOPLE)
    result = cli.ok("export", store, "Person")
    assert result.stderr == b""
    assert result.stdout.decode().count("\n") == len(PEOPLE)


def test_export_of_an_export_reimported_is_identical(cli, store):
    cli.import_rows(store, "Person", '{ "name" : "Ann", "id" : "p1",  "age": 31 }\n'
                                     '{"age":40,"id":"p2","name":"Bo"}\n')
    first = cli.export(store, "Person")
    cli.import_rows(store, "Copy", first)
    assert cli.export(store, "Copy") == first
    cli.import_rows(store, "Person", first)
    assert cli.export(store, "Person") == first


def test_export_puts_id_first_then_properties_in_schema_order(cli, store):
    cli.import_rows(store, "Person", '{"name":"Ann","id":"p1","age":31}\n'
                                     '{"age":40,"name":"Bo","id":"p2"}\n')
    assert cli.export(store, "Person") == ('{"id":"p1","name":"Ann","age":31}\n'
                                           '{"id":"p2","name":"Bo","age":40}\n')


def test_export_removes_insignificant_whitespace(cli, store):
    cli.import_rows(store, "Person", '  {  "id" : "p1" ,\t"name" :  "A n n" , "tags" : [ 1 , 2 ] }  \n')
    assert cli.export(store, "Person") == '{"id":"p1","name":"A n n","tags":[1,2]}\n'


def test_export_omits_null_properties(cli, store):
    cli.import_rows(store, "Person", '{"id":"p1","name":"Ann","age":31}\n'
                                     '{"id":"p2","name":null,"age":40}\n')
    assert cli.export(store, "Person") == ('{"id":"p1","name":"Ann","age":31}\n'
                                           '{"id":"p2","age":40}\n')


def test_overwrite_replaces_every_row(cli, store):
    cli.import_rows(store, "Person", PEOPLE)
    cli.import_rows(store, "Person", [{"id": "p9", "name": "Zed", "age": 1, "score": 2.5,
                                       "tags": [], "active": True}])
    assert cli.export(store, "Person") == canonical(
        {"id": "p9", "name": "Zed", "age": 1, "score": 2.5, "tags": [], "active": True})


def test_merge_inserts_new_rows_at_the_end(cli, store):
    cli.import_rows(store, "Person", [{"id": "a", "name": "Ann"}, {"id": "b", "name": "Bo"}])
    cli.import_rows(store, "Person", [{"id": "c", "name": "Cy"}], mode="merge")
    assert cli.export(store, "Person") == jsonl(
        [{"id": "a", "name": "Ann"}, {"id": "b", "name": "Bo"}, {"id": "c", "name": "Cy"}])


def test_merge_updates_a_row_and_moves_it_to_the_end(cli, store):
    cli.import_rows(store, "Person", [{"id": "a", "name": "Ann"}, {"id": "b", "name": "Bo"},
                                      {"id": "c", "name": "Cy"}])
    cli.import_rows(store, "Person", [{"id": "a", "name": "Anna"}], mode="merge")
    assert cli.export(store, "Person") == jsonl(
        [{"id": "b", "name": "Bo"}, {"id": "c", "name": "Cy"}, {"id": "a", "name": "Anna"}])


def test_merge_delete_line_removes_the_row(cli, store):
    cli.import_rows(store, "Person", [{"id": "a", "name": "Ann"}, {"id": "b", "name": "Bo"}])
    cli.import_rows(store, "Person", '{"id":"a","@delete":true}\n', mode="merge")
    assert cli.export(store, "Person") == jsonl([{"id": "b", "name": "Bo"}])


def test_merge_upserts_and_deletes_in_one_commit(cli, store):
    cli.import_rows(store, "Person", [{"id": "a", "name": "Ann"}, {"id": "b", "name": "Bo"},
                                      {"id": "c", "name": "Cy"}])
    before = len(cli.log(store))
    cli.import_rows(store, "Person", '{"id":"b","name":"Bob"}\n{"id":"d","name":"Di"}\n'
                                     '{"id":"a","@delete":true}\n', mode="merge")
    assert len(cli.log(store)) == before + 1
    assert cli.export(store, "Person") == jsonl(
        [{"id": "c", "name": "Cy"}, {"id": "b", "name": "Bob"}, {"id": "d", "name": "Di"}])


def test_merge_into_a_missing_table_creates_it(cli, store):
    cli.import_rows(store, "City", [{"id": "ber", "name": "Berlin"}], mode="merge")
    assert cli.export(store, "City") == '{"id":"ber","name":"Berlin"}\n'


def test_import_on_a_branch_leaves_main_unchanged(cli, store):
    cli.import_rows(store, "Person", [{"id": "a", "name": "Ann"}])
    cli.ok("branch", store, "create", "experiment")
    cli.import_rows(store, "Person", [{"id": "b", "name": "Bo"}], mode="merge", branch="experiment")
    assert cli.export(store, "Person") == '{"id":"a","name":"Ann"}\n'
    assert cli.export(store, "Person", branch="experiment") == jsonl(
        [{"id": "a", "name": "Ann"}, {"id": "b", "name": "Bo"}])


def test_export_of_a_missing_table_fails(cli, store):
    error = cli.fail("export", store, "Nobody")
    assert "Nobody" in error


def test_export_of_a_large_table_round_trips(cli, store):
    rows = [{"id": f"n{i:06d}", "text": "x" * (i % 300), "number": i * 7} for i in range(30000)]
    text = jsonl(rows)
    cli.import_rows(store, "Big", text)
    assert cli.export(store, "Big") == text


def test_schema_set_creates_an_empty_table_and_prints_back(cli, store):
    import json
    schema = {"kind": "node", "properties": {"name": {"type": "string", "nullable": False},
                                             "born": {"type": "date", "nullable": True}}}
    cli.set_schema(store, "Person", schema)
    assert cli.export(store, "Person") == ""
    shown = json.loads(cli.ok("schema", store, "Person").stdout)
    assert shown["kind"] == "node"
    assert list(shown["properties"]) == ["name", "born"]
    assert shown["properties"]["born"] == {"type": "date", "nullable": True}


def test_schema_change_adds_a_nullable_property_without_changing_rows(cli, store):
    import json
    cli.import_rows(store, "Person", [{"id": "a", "name": "Ann"}])
    schema = json.loads(cli.ok("schema", store, "Person").stdout)
    schema["properties"]["email"] = {"type": "string", "nullable": True}
    cli.set_schema(store, "Person", schema)
    assert cli.export(store, "Person") == '{"id":"a","name":"Ann"}\n'
    cli.import_rows(store, "Person", [{"id": "b", "name": "Bo", "email": "bo@example.org"}],
                    mode="merge")
    assert cli.export(store, "Person") == jsonl(
        [{"id": "a", "name": "Ann"}, {"id": "b", "name": "Bo", "email": "bo@example.org"}])


def test_import_reads_standard_input_when_the_file_is_a_dash(cli, store):
    text = jsonl([{"id": "a", "name": "Ann"}, {"id": "b", "name": "Bo"}])
    cli.ok("import", store, "Person", "-", input=text.encode())
    assert cli.export(store, "Person") == text


def test_export_renders_floats_in_shortest_javascript_form(cli, store):
    cli.import_rows(store, "Measure", '{"id":"a","x":1.0}\n{"id":"b","x":1e21}\n'
                                      '{"id":"c","x":1E-7}\n{"id":"d","x":0.1000}\n'
                                      '{"id":"e","x":-2.50}\n')
    assert cli.export(store, "Measure") == ('{"id":"a","x":1}\n{"id":"b","x":1e+21}\n'
                                            '{"id":"c","x":1e-7}\n{"id":"d","x":0.1}\n'
                                            '{"id":"e","x":-2.5}\n')


# ---- @patch: a merge line that changes only the properties it names ----------------------

PATCHED = [{"id": "a", "name": "Ann", "age": 31, "city": "Oslo"}, {"id": "b", "name": "Bo", "age": 40, "city": None}]


def test_a_patch_line_changes_only_the_properties_it_names(cli, store):
    cli.import_rows(store, "Person", PATCHED)
    cli.import_rows(store, "Person", '{"id":"a","@patch":true,"age":32}\n{"@patch":true,"id":"b","city":"Rome"}\n',
                    mode="merge")
    assert cli.export(store, "Person") == jsonl([
        {"id": "a", "name": "Ann", "age": 32, "city": "Oslo"}, {"id": "b", "name": "Bo", "age": 40, "city": "Rome"}])
    assert cli.log(store)[0]["changes"] == [{"table": "Person", "op": "merge", "rows": 2}]


def test_a_patch_sets_a_nullable_property_to_null_and_mixes_with_whole_rows_and_deletes(cli, store):
    cli.import_rows(store, "Person", PATCHED)
    cli.import_rows(store, "Person", '{"id":"a","@patch":true,"city":null}\n{"id":"c","name":"Cy","age":5}\n'
                                     '{"id":"b","@delete":true}\n', mode="merge")
    assert cli.export(store, "Person") == jsonl([{"id": "a", "name": "Ann", "age": 31},
                                                 {"id": "c", "name": "Cy", "age": 5}])


def test_a_patch_is_validated_like_any_row_and_needs_a_row_that_exists(cli, store):
    cli.import_rows(store, "Person", PATCHED)
    before = cli.export(store, "Person")
    refusals = {
        '{"id":"zz","@patch":true,"age":1}': 'no such row in Person',
        '{"id":"a","@patch":true,"age":"old"}': 'property "age": expected i64',
        '{"id":"a","@patch":true,"name":null}': 'property "name" is missing and not nullable',
        '{"id":"a","@patch":true,"shoe":44}': "unknown property 'shoe'",
        '{"id":"a","@patch":"yes","age":1}': '"@patch" must be true',
        '{"@patch":true,"age":1}': 'needs the "id"',
    }
    for line, reason in refusals.items():
        error = cli.fail("import", store, "Person", cli.write_file(line + "\n"), "--mode", "merge")
        assert reason in error, (line, error)
    assert cli.export(store, "Person") == before


def test_a_patch_belongs_to_merges_of_a_table_with_rows(cli, store):
    cli.import_rows(store, "Person", PATCHED)
    line = cli.write_file('{"id":"a","@patch":true,"age":1}\n')
    assert '"@patch" is only allowed when appending' in cli.fail("import", store, "Person", line)
    assert "this table has no rows yet" in cli.fail("import", store, "Fresh", line, "--mode", "merge")
