"""Retention on the mount: an open file under history/ pins its version across a gc from the CLI."""
import errno
import json
import os

import pytest

from conftest import graphfs, import_rows, jsonl, wait_for
from store_files import is_remote, store_bytes, store_entries
from tier import size


def gc(store, *options):
    return graphfs("gc", store, *options).stdout.decode()


@pytest.fixture
def m(store, mounter):
    for value in range(6):
        import_rows(store, "Counter", [{"id": "c", "value": value}])
    return mounter(store)


def test_an_open_history_file_survives_a_gc_byte_for_byte_and_the_next_gc_after_close_reclaims_it(m):
    expected = jsonl([{"id": "c", "value": 1}])
    handle = open(m.path("history", "@2", "tables", "Counter.jsonl"))
    try:
        first = handle.read(5)
        report = gc(m.store, "--keep-versions", "1")
        assert "reclaimed versions 1..5" in report
        assert "1 version below the horizon kept for open readers" in report
        handle.seek(0)
        assert handle.read() == expected
        assert first == expected[:5]
    finally:
        handle.close()
    report = gc(m.store, "--keep-versions", "1")
    assert "kept for open readers" not in report
    with pytest.raises(FileNotFoundError):
        os.stat(m.path("history", "@2", "tables", "Counter.jsonl"))
    assert graphfs("verify", m.store).returncode == 0


def test_a_reclaimed_version_is_enoent_with_a_line_in_graphfs_errors(m):
    gc(m.store, "--keep-versions", "2")
    with pytest.raises(FileNotFoundError):
        os.listdir(m.path("history", "@3"))
    assert any("version 3 of branch main was reclaimed by gc (horizon 4)" in line["reason"] and line["path"] == "history/@3" for line in m.errors())
    assert sorted(os.listdir(m.path("history"))) == ["@5", "@6", "by-id"]
    assert m.read("history", "@5", "tables", "Counter.jsonl") == jsonl([{"id": "c", "value": 4}])


def test_the_live_tree_and_writes_go_on_through_a_gc(m):
    gc(m.store, "--keep-versions", "1")
    m.sh("""echo '{"id":"d","value":9}' >> tables/Counter.jsonl""")
    assert m.read("tables", "Counter.jsonl") == jsonl([{"id": "c", "value": 5}, {"id": "d", "value": 9}])
    gc(m.store, "--keep-versions", "1")
    assert m.read("tables", "Counter.jsonl") == jsonl([{"id": "c", "value": 5}, {"id": "d", "value": 9}])
    assert graphfs("verify", m.store).returncode == 0


def test_the_log_file_ends_with_the_reclaimed_line_after_a_gc(m):
    assert len(m.log()) == 6
    gc(m.store, "--keep-versions", "2")
    # the mount sees another process's gc at its next refresh
    assert wait_for(lambda: [entry["version"] for entry in m.log()] == [6, 5, 4], timeout=10)
    assert m.log()[-1].get("reclaimed") is True


def test_a_mount_reads_the_retained_history_a_gc_moved_into_its_pack(m):
    # read every version once, so the daemon has read those blocks from the manifest before the gc
    before = {version: m.read("history", f"@{version}", "tables", "Counter.jsonl") for version in range(3, 7)}
    gc(m.store, "--keep-versions", "4")
    assert len(store_entries(m.store, "packs")) == 1
    # the manifest's pages below the pack are holes now: the daemon finds them so and reads the pack
    for version in range(3, 7):
        assert m.read("history", f"@{version}", "tables", "Counter.jsonl") == before[version]
    assert m.read("tables", "Counter.jsonl") == jsonl([{"id": "c", "value": 5}])
    m.sh("""echo '{"id":"e","value":7}' >> tables/Counter.jsonl""")
    assert m.read("history", "@7", "tables", "Counter.jsonl") == jsonl([{"id": "c", "value": 5}, {"id": "e", "value": 7}])
    assert not any("checksum" in line.get("reason", "") for line in m.errors())
    assert graphfs("verify", m.store).returncode == 0


# commits through the mount under a retention policy (20,000 under --soak)
POLICY_COMMITS = size(2_000, soak=20_000)


def test_a_retention_policy_keeps_the_store_bounded_under_mount_commits_with_nobody_calling_gc(store, mounter):
    graphfs("config", store, "retention.keep-versions", "20")
    graphfs("config", store, "retention.auto-gc-versions", "10")
    import_rows(store, "Counter", [{"id": "c", "value": 0}])
    m = mounter(store)
    commits = POLICY_COMMITS if not is_remote(store) else POLICY_COMMITS // 6   # a gc there takes longer
    sizes = []
    for value in range(1, commits + 1):
        with open(m.path("tables", "Counter.jsonl"), "a") as table:
            table.write(json.dumps({"id": "c", "value": value}) + "\n")
        if value % (commits // 3) == 0:
            sizes.append(store_bytes(store))
    feed = [json.loads(line) for line in m.read(".graphfs", "feed").splitlines()]
    assert len(feed) == commits + 1

    def log_lines():
        return len(graphfs("log", store).stdout.decode().splitlines())

    # once the commits stop, the mount's upkeep catches up: the kept versions, what waits for the
    # next gc, and the reclaimed line
    assert wait_for(lambda: log_lines() <= 20 + 10 + 2, timeout=60), log_lines()
    assert json.loads(m.read(".graphfs", "stats"))["mount"]["retention_gcs"] > 0
    assert m.read("tables", "Counter.jsonl") == jsonl([{"id": "c", "value": commits}])
    # bounded: once the upkeep has caught up, the store is no larger than after the first third
    # (sampled while committing; an object store's gc may lag the commits meanwhile)
    assert wait_for(lambda: store_bytes(store) <= sizes[0] * 1.5 + (64 << 10), timeout=60), \
        (sizes, store_bytes(store))
    graphfs("verify", store)


def test_a_table_appended_line_by_line_reads_like_one_import_once_the_appends_pause(store, mounter):
    # 40 appends, 40 commits, 40 one-row fragments as written; the commits keep them few (at most
    # 16 small ones),
    # and a second after the last one the mount packs them into one (core/store_compact.c,
    # mountfs/upkeep.c) — no version, no log line of its own
    m = mounter(store, options=["block_cache=0"])   # every block read counts
    for n in range(40):
        m.write("tables/T.jsonl", json.dumps({"id": f"r{n:02d}", "n": n}) + "\n", mode="a")
    expected = "".join(json.dumps({"id": f"r{n:02d}", "n": n}, separators=(",", ":")) + "\n" for n in range(40))

    def blocks_of_a_read():
        before = m.stats()["data"]["blocks"]
        assert m.read("tables/T.jsonl") == expected
        return m.stats()["data"]["blocks"] - before

    assert blocks_of_a_read() <= 17
    assert wait_for(lambda: blocks_of_a_read() == 1, timeout=15)
    assert m.stats()["store"]["compactions"] >= 1 and m.stats()["store"]["rows_compacted"] >= 40
    assert len(m.read("log").splitlines()) == 40
    assert graphfs("verify", m.store).returncode == 0
