"""Large writes: more ids than a stage keeps in memory (TABLE_RUN_ENTRIES, 1,048,576),
so the stage writes sorted id runs to a scratch file and finds ids again there."""
import random

from conftest import store_digest

ROWS = 1_100_000


def line(number, value):
    return f'{{"id":"r{number:07d}","v":{value}}}\n'


def test_an_import_of_more_ids_than_one_run_holds_reads_back_every_row(cli, store):
    numbers = list(range(ROWS))
    random.Random(7).shuffle(numbers)
    text = "".join(line(n, n) for n in numbers)
    cli.import_rows(store, "Big", text)
    assert cli.export(store, "Big") == text
    cli.ok("verify", store)


def test_a_duplicate_id_more_than_one_run_back_is_refused_at_its_line(cli, store):
    cli.import_rows(store, "Big", line(1, 1))
    before = store_digest(store)
    text = "".join(line(n, n) for n in range(ROWS)) + line(5, 55)
    path = cli.write_file(text)
    error = cli.fail("import", store, "Big", path)
    assert f"{path}:{ROWS + 1}:" in error and "duplicate id" in error and "r0000005" in error, error
    assert store_digest(store) == before


def test_a_merge_of_more_ids_than_one_run_holds_upserts_and_deletes(cli, store):
    cli.import_rows(store, "Big", "".join(line(n, n) for n in range(ROWS)))
    model = {n: n for n in range(ROWS)}
    updates = list(range(ROWS + 100_000))
    random.Random(11).shuffle(updates)
    merge = []
    for n in updates:
        merge.append(line(n, n + 10_000_000))
        model[n] = n + 10_000_000
    for n in range(3, ROWS, 7):
        merge.append(f'{{"id":"r{n:07d}","@delete":true}}\n')
        model.pop(n, None)
    cli.import_rows(store, "Big", "".join(merge), mode="merge")
    exported = cli.export(store, "Big").splitlines(keepends=True)
    assert len(exported) == len(model)
    assert sorted(exported) == sorted(line(n, v) for n, v in model.items())
    cli.ok("verify", store)
