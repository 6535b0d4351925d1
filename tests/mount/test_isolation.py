"""Readers pin one version; reading current state costs the same at any history depth.

The slow tests of the suite live here: a 100 MB table read while 50 commits
land, and the flat-cost check at 100 and 2,000 commits.
"""
import json
import os
import subprocess
import threading

import pytest

from conftest import GRAPHFS, graphfs, import_rows, jsonl

PEOPLE = [{"id": "a", "name": "Ada"}, {"id": "b", "name": "Bob"}]


def test_an_open_reader_keeps_its_version_across_commits(store, mounter):
    import_rows(store, "Person", PEOPLE)
    m = mounter(store)
    with open(m.path("tables", "Person.jsonl"), "rb") as reader:
        first = reader.read(5)
        m.write("tables/Person.jsonl", jsonl([{"id": "z", "name": "Zed"}]))
        m.sh("""echo '{"id":"q","name":"Q"}' >> tables/Person.jsonl""")
        rest = reader.read()
    assert (first + rest).decode() == jsonl(PEOPLE)
    assert m.read("tables", "Person.jsonl") == jsonl([{"id": "z", "name": "Zed"}, {"id": "q", "name": "Q"}])


def test_an_open_history_file_and_a_live_file_differ_after_a_commit(store, mounter):
    import_rows(store, "Person", PEOPLE)
    m = mounter(store)
    m.sh("""echo '{"id":"c","name":"Cy"}' >> tables/Person.jsonl""")
    assert m.read("history", "@1", "tables", "Person.jsonl") == jsonl(PEOPLE)
    assert m.read("tables", "Person.jsonl") == jsonl(PEOPLE + [{"id": "c", "name": "Cy"}])


BIG_ROWS = 1_000_000   # about 100 MB rendered
UPDATES = 50


def big_row(i, name=None):
    return '{"id":"r%07d","name":"%s"}\n' % (i, name or "x" * 70)


def expected_version(base_lines, updated):
    """The table after merging updates of the rows in `updated` (in order): updated rows move to the end."""
    moved = {f"r{index:07d}" for index in updated}
    kept = [line for line in base_lines if line[7:15] not in moved]
    return "".join(kept) + "".join(big_row(index, f"updated{n}") for n, index in enumerate(updated))


def test_cat_of_a_100_mb_table_while_50_commits_land_gets_one_version(store, mounter, tmp_path):
    source = tmp_path / "big.jsonl"
    with open(source, "w") as handle:
        for i in range(BIG_ROWS):
            handle.write(big_row(i))
    graphfs("import", store, "Big", source)
    base_lines = source.read_text().splitlines(keepends=True)
    source.unlink()
    m = mounter(store)
    assert os.stat(m.path("tables", "Big.jsonl")).st_size >= 95_000_000
    updated = [i * (BIG_ROWS // UPDATES) for i in range(UPDATES)]

    output = tmp_path / "out.jsonl"
    # cat writes into a pipe drained slowly, so its reads interleave with the commits.
    reader = subprocess.Popen(
        ["bash", "-c", f"cat {m.path('tables', 'Big.jsonl')} | "
                       f"/usr/bin/python3 -c 'import sys, time\n"
                       f"out = open(\"{output}\", \"wb\")\n"
                       f"while True:\n"
                       f"    chunk = sys.stdin.buffer.read(1 << 20)\n"
                       f"    if not chunk: break\n"
                       f"    out.write(chunk); time.sleep(0.02)\n'"])
    for n, index in enumerate(updated):
        with open(m.path("tables", "Big.jsonl"), "a") as handle:
            handle.write(big_row(index, f"updated{n}"))
    assert reader.wait(timeout=300) == 0
    assert m.log_count() == 1 + UPDATES

    got = output.read_bytes().decode()
    # Which version did cat pin? The number of updated rows at the end says.
    applied = 0
    for line in reversed(got[-200 * UPDATES:].splitlines()):
        if '"updated' not in line:
            break
        applied += 1
    assert got == expected_version(base_lines, updated[:applied])
    # The live file now shows the last version.
    assert os.stat(m.path("tables", "Big.jsonl")).st_size == len(expected_version(base_lines, updated))


TABLES = 8


def build_history(store, commits, tmp_path):
    """`commits` commits over TABLES tables (round robin), through the CLI."""
    row_file = tmp_path / f"row-{commits}.jsonl"
    for i in range(commits):
        row_file.write_text(jsonl([{"id": f"r{i}", "value": i}]))
        graphfs("import", store, f"T{i % TABLES}", row_file, "--mode", "merge")
    row_file.unlink()


READ_COUNTERS = {"manifest": ("reads", "bytes", "pages", "rows_decoded"),
                 "data": ("reads", "bytes", "blocks", "rows_decoded")}


def read_counters(stats):
    return {group: {key: stats[group][key] for key in keys} for group, keys in READ_COUNTERS.items()}


def cold_heads_counters(mounter, store):
    # No timed refresh during the measurement: the counters must not depend on timing.
    m = mounter(store, options=["refresh_ms=600000"])
    heads = [json.loads(line) for line in m.sh("cat heads/*").stdout.decode().splitlines()]
    assert sorted(head["table_key"] for head in heads) == [f"T{i}" for i in range(TABLES)]
    counters = read_counters(m.stats())
    mounter.unmount(m)
    return counters


def test_reading_heads_costs_the_same_at_100_and_2000_commits(mounter, tmp_path):
    shallow = tmp_path / "shallow"
    deep = tmp_path / "deep"
    graphfs("init", shallow)
    graphfs("init", deep)
    build_history(shallow, 100, tmp_path)
    build_history(deep, 2000, tmp_path)
    assert len(graphfs("log", deep).stdout.splitlines()) == 2000
    assert cold_heads_counters(mounter, shallow) == cold_heads_counters(mounter, deep)
