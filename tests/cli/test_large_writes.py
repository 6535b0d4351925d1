"""Large writes: more ids than a stage keeps in memory, so the stage writes sorted id runs
to a scratch file and finds ids again there.

Under --soak with the real bounds (TABLE_RUN_ENTRIES, 1,048,576 ids; 4 MiB kept before a stage
spills to a segment, and runs are written only by a spilled stage): 1.1 million rows. Otherwise
the same path from a smaller write: GRAPHFS_STAGE_RUN_ENTRIES lowers the first bound to
RUN_ENTRIES and GRAPHFS_STAGE_INLINE_BYTES the second to INLINE_BYTES."""
import random

import pytest

from conftest import store_digest
from tier import SOAK, size

ROWS = size(24_000, soak=1_100_000)
RUN_ENTRIES = 4096
INLINE_BYTES = 64 << 10
ENVIRONMENT = None if SOAK else {"GRAPHFS_STAGE_RUN_ENTRIES": str(RUN_ENTRIES),
                                 "GRAPHFS_STAGE_INLINE_BYTES": str(INLINE_BYTES)}


def line(number, value):
    return f'{{"id":"r{number:07d}","v":{value}}}\n'


@pytest.fixture(autouse=True)
def small_runs(monkeypatch):
    for name, value in (ENVIRONMENT or {}).items():
        monkeypatch.setenv(name, value)


def test_the_write_is_large_enough_to_spill_and_write_runs():
    assert ROWS * len(line(ROWS, ROWS)) > (INLINE_BYTES if ENVIRONMENT else 4 << 20)
    assert ROWS > (4 * RUN_ENTRIES if ENVIRONMENT else 1 << 20)


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
    updates = list(range(ROWS + ROWS // 11))
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
