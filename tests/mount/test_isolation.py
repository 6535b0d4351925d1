"""Readers pin one version; reading current state costs the same at any history depth.

The slow tests of the suite live here: a large table (10 MB; 100 MB under --soak) read while
50 commits land, the flat-cost check at 100 and 2,000 commits, and a loaded-machine stress of
readers, listings and creations while one-row merges land from the mount and the CLI
(8 s; 60 s under --soak).
"""
import json
import os
import subprocess
import threading
import time

import pytest

from conftest import GRAPHFS, graphfs, import_rows, jsonl
from tier import size

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


def test_fstat_of_an_open_reader_answers_for_its_version_after_a_cp_through_the_mount(store, mounter, tmp_path):
    import_rows(store, "Person", PEOPLE)
    m = mounter(store)
    longer = jsonl(PEOPLE + [{"id": "c", "name": "C" * 200}])
    (tmp_path / "longer.jsonl").write_text(longer)
    with open(m.path("tables", "Person.jsonl"), "rb") as reader:
        m.sh(f"cp {tmp_path / 'longer.jsonl'} tables/Person.jsonl")
        assert os.fstat(reader.fileno()).st_size == len(jsonl(PEOPLE))
        assert reader.read() == jsonl(PEOPLE).encode()
        assert os.stat(m.path("tables", "Person.jsonl")).st_size == len(longer)
    assert os.stat(m.path("tables", "Person.jsonl")).st_size == len(longer)


def test_fstat_of_an_open_reader_answers_for_its_version_after_another_process_commits(store, mounter):
    import_rows(store, "Person", PEOPLE)
    m = mounter(store)
    with open(m.path("tables", "Person.jsonl"), "rb") as reader:
        import_rows(store, "Person", [{"id": "c", "name": "Cy"}], mode="merge")
        merged = len(jsonl(PEOPLE + [{"id": "c", "name": "Cy"}]))
        deadline = time.monotonic() + 5
        while os.stat(m.path("tables", "Person.jsonl")).st_size != merged and time.monotonic() < deadline:
            time.sleep(0.1)
        assert os.stat(m.path("tables", "Person.jsonl")).st_size == merged
        assert os.fstat(reader.fileno()).st_size == len(jsonl(PEOPLE))
        assert reader.read() == jsonl(PEOPLE).encode()


def test_an_open_right_after_another_process_commits_sees_its_commit(store, mounter):
    # close-to-open: an open(2) of a live file refreshes at once, whatever the refresh interval
    import_rows(store, "Person", PEOPLE)
    m = mounter(store)
    rows = list(PEOPLE)
    for n in range(8):
        assert m.read("tables", "Person.jsonl") == jsonl(rows)
        rows.append({"id": f"r{n}", "name": f"R{n}"})
        import_rows(store, "Person", rows[-1:], mode="merge")   # another process, acknowledged at its exit
    assert m.read("tables", "Person.jsonl") == jsonl(rows)


def test_an_open_history_file_and_a_live_file_differ_after_a_commit(store, mounter):
    import_rows(store, "Person", PEOPLE)
    m = mounter(store)
    m.sh("""echo '{"id":"c","name":"Cy"}' >> tables/Person.jsonl""")
    assert m.read("history", "@1", "tables", "Person.jsonl") == jsonl(PEOPLE)
    assert m.read("tables", "Person.jsonl") == jsonl(PEOPLE + [{"id": "c", "name": "Cy"}])


BIG_ROWS = size(100_000, soak=1_000_000)   # about 10 MB rendered (100 MB under --soak)
UPDATES = 50


def big_row(i, name=None):
    return '{"id":"r%07d","name":"%s"}\n' % (i, name or "x" * 70)


def expected_version(base_lines, updated):
    """The table after merging updates of the rows in `updated` (in order): updated rows move to the end."""
    moved = {f"r{index:07d}" for index in updated}
    kept = [line for line in base_lines if line[7:15] not in moved]
    return "".join(kept) + "".join(big_row(index, f"updated{n}") for n, index in enumerate(updated))


def test_cat_of_a_large_table_while_50_commits_land_gets_one_version(store, mounter, tmp_path):
    source = tmp_path / "big.jsonl"
    with open(source, "w") as handle:
        for i in range(BIG_ROWS):
            handle.write(big_row(i))
    graphfs("import", store, "Big", source)
    base_lines = source.read_text().splitlines(keepends=True)
    source.unlink()
    m = mounter(store)
    assert os.stat(m.path("tables", "Big.jsonl")).st_size >= BIG_ROWS * 95
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
                       f"    out.write(chunk); time.sleep({0.02 * 1_000_000 / BIG_ROWS})\n'"])
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


def build_history(store, commits):
    """`commits` one-row merge commits over TABLES tables T00.. (round robin), each its own durable
    publish, from one process (graphfs-bench: the same commits as `graphfs import --mode merge`
    of one row, without a launch each)."""
    subprocess.run([GRAPHFS + "-bench", "commits", str(store), str(commits), "--tables", str(TABLES),
                    "--prefix", "T", "--distinct"], check=True, capture_output=True, timeout=600)


READ_COUNTERS = {"manifest": ("reads", "bytes", "pages", "rows_decoded"),
                 "data": ("reads", "bytes", "blocks", "rows_decoded")}


def read_counters(stats):
    return {group: {key: stats[group][key] for key in keys} for group, keys in READ_COUNTERS.items()}


def cold_heads_counters(mounter, store):
    # No timed refresh during the measurement: the counters must not depend on timing.
    m = mounter(store, options=["refresh_ms=600000"])
    heads = [json.loads(line) for line in m.sh("cat heads/*").stdout.decode().splitlines()]
    assert sorted(head["table_key"] for head in heads) == [f"T{i:02d}" for i in range(TABLES)]
    counters = read_counters(m.stats())
    mounter.unmount(m)
    return counters


def test_reading_heads_costs_the_same_at_100_and_2000_commits(mounter, tmp_path):
    shallow = tmp_path / "shallow"
    deep = tmp_path / "deep"
    graphfs("init", shallow)
    graphfs("init", deep)
    build_history(shallow, 100)
    build_history(deep, 2000)
    assert len(graphfs("log", deep).stdout.splitlines()) == 2000
    assert cold_heads_counters(mounter, shallow) == cold_heads_counters(mounter, deep)


STRESS_SECONDS = size(8, soak=60)


def busy_loop():
    return subprocess.Popen(["/usr/bin/python3", "-c", "while True: pass"])


def test_a_live_table_never_vanishes_while_one_row_merges_land_from_the_mount_and_the_cli(
        store, mounter, tmp_path):
    """Readers stat, open and list tables/X.jsonl on a loaded machine while one-row merges
    into X land through the mount and the CLI, and new tables are created through the mount:
    a table that exists in every version is never ENOENT, and a commit this mount made is
    what its next request sees (the table it created exists, the merge it made shows)."""
    import_rows(store, "X", PEOPLE)
    import_rows(store, "Y", PEOPLE)
    m = mounter(store)
    table = m.path("tables", "X.jsonl")
    failures = []
    commits = {"mount": 0, "created": 0, "cli": 0}
    burners = [busy_loop() for _ in range(2)]
    deadline = time.monotonic() + STRESS_SECONDS

    def record(what):
        failures.append(what)

    def reader(kind):
        while time.monotonic() < deadline:
            try:
                if kind == "stat":
                    os.stat(table)
                elif kind == "open":
                    with open(table, "rb") as handle:
                        handle.read(64)
                elif kind == "xattr":
                    os.getxattr(table, "user.graphfs.version")
                else:
                    names = {entry.name for entry in os.scandir(m.path("tables"))}
                    if not {"X.jsonl", "Y.jsonl"} <= names:
                        record(f"ls tables/ showed {sorted(names)}")
            except OSError as error:
                record(f"{kind}: {error!r}")

    def mount_merger():
        n = 0
        while time.monotonic() < deadline:
            try:
                before = int(os.getxattr(table, "user.graphfs.version"))
                with open(table, "a") as handle:
                    handle.write(jsonl([{"id": f"m{n % 40}", "name": f"merge {n}"}]))
                commits["mount"] += 1
                after = int(os.getxattr(table, "user.graphfs.version"))
                if after <= before:
                    record(f"after its own merge the mount showed X at version {after} (was {before})")
            except OSError as error:
                record(f"mount merge: {error!r}")
            n += 1

    def mount_creator():
        n = 0
        while time.monotonic() < deadline:
            created = m.path("tables", f"New{n}.jsonl")
            try:
                with open(created, "w") as handle:
                    handle.write(jsonl([{"id": "a", "name": "Ada"}]))
                commits["created"] += 1
                os.stat(created)
            except OSError as error:
                record(f"create New{n}: {error!r}")
            n += 1

    def cli_merger():
        row_file = tmp_path / "cli-row.jsonl"
        n = 0
        while time.monotonic() < deadline:
            row_file.write_text(jsonl([{"id": f"c{n % 40}", "name": f"cli {n}"}]))
            result = graphfs("import", store, "X", row_file, "--mode", "merge", check=False)
            if result.returncode != 0:
                record(f"cli merge: {result.stderr!r}")
            else:
                commits["cli"] += 1
            n += 1

    workers = [threading.Thread(target=reader, args=(kind,))
               for kind in ("stat", "stat", "open", "xattr", "list")]
    workers += [threading.Thread(target=work) for work in (mount_merger, mount_creator, cli_merger)]
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=STRESS_SECONDS + 120)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    assert not any(worker.is_alive() for worker in workers)
    assert failures == []
    assert commits["mount"] > 0 and commits["created"] > 0 and commits["cli"] > 0
    time.sleep(2.5)   # the CLI's last commit is visible within refresh_ms + the live timeout
    assert m.log_count() == 2 + sum(commits.values())
