""".graphfs/feed: every commit of the store, all branches, oldest first, as log lines; it grows
while mounted, so `tail -f` follows commits made by this mount, the CLI and other mounts
(docs/MOUNT.md ".graphfs/feed")."""
import json
import os
import select
import signal
import subprocess

from conftest import graphfs, import_rows, wait_for

PEOPLE = [{"id": "a", "name": "Ada"}, {"id": "b", "name": "Bob"}]

# The refresh bound (docs/MOUNT.md "Seeing other processes' commits"), with room for a loaded machine.
REFRESH_BOUND = 10.0


def parsed(text):
    return [json.loads(line) for line in text.splitlines()]


def log_lines(store, branch):
    return parsed(graphfs("log", store, "--branch", branch).stdout.decode())


def test_the_feed_is_every_commit_of_every_branch_oldest_first_as_log_lines(store, mounter):
    import_rows(store, "Person", PEOPLE)
    graphfs("branch", store, "create", "dev")
    import_rows(store, "Person", [{"id": "c", "name": "Cy"}], mode="merge", branch="dev")
    import_rows(store, "Person", [{"id": "d", "name": "Di"}], mode="merge")
    m = mounter(store)
    feed = parsed(m.read(".graphfs", "feed"))
    assert [entry["version"] for entry in feed] == [1, 2, 3]
    every = {entry["version"]: entry for entry in log_lines(store, "main") + log_lines(store, "dev")}
    assert feed == [every[version] for version in (1, 2, 3)]
    assert [entry["branch"] for entry in feed] == ["main", "dev", "main"]


def test_an_open_feed_grows_with_a_commit_of_this_mount(store, mounter):
    import_rows(store, "Person", PEOPLE)
    m = mounter(store)
    with open(m.path(".graphfs", "feed"), "rb") as feed:
        first = feed.read()
        assert len(parsed(first.decode())) == 1
        with open(m.path("tables", "Person.jsonl"), "a") as table:
            table.write('{"id":"c","name":"Cy"}\n')
        assert wait_for(lambda: os.fstat(feed.fileno()).st_size > len(first), timeout=REFRESH_BOUND)
        (line,) = parsed(feed.read().decode())
    assert line["version"] == 2 and line["changes"] == [{"table": "Person", "op": "merge", "rows": 1}]


def test_tail_f_of_the_feed_sees_a_cli_commit_and_another_mounts_commit(store, mounter):
    import_rows(store, "Person", PEOPLE)
    m = mounter(store)
    other = mounter(store)
    tail = subprocess.Popen(["tail", "-s", "0.2", "-n", "+1", "-f", m.path(".graphfs", "feed")],
                            stdout=subprocess.PIPE)
    try:
        seen = b""

        def lines_seen(count):
            nonlocal seen
            while select.select([tail.stdout], [], [], 0.05)[0]:
                chunk = os.read(tail.stdout.fileno(), 65536)
                if not chunk:
                    break
                seen += chunk
            return seen.count(b"\n") >= count

        assert wait_for(lambda: lines_seen(1), timeout=REFRESH_BOUND)
        import_rows(store, "Person", [{"id": "c", "name": "Cy"}], mode="merge")
        assert wait_for(lambda: lines_seen(2), timeout=REFRESH_BOUND)
        with open(other.path("tables", "Person.jsonl"), "a") as table:
            table.write('{"id":"d","name":"Di"}\n')
        assert wait_for(lambda: lines_seen(3), timeout=REFRESH_BOUND)
    finally:
        tail.send_signal(signal.SIGTERM)
        tail.wait(timeout=10)
        tail.stdout.close()
    assert [entry["version"] for entry in parsed(seen.decode())] == [1, 2, 3]
    assert parsed(seen.decode()) == parsed(m.read(".graphfs", "feed"))


def test_the_feed_is_read_only(store, mounter):
    import_rows(store, "Person", PEOPLE)
    m = mounter(store)
    for mode in ("a", "w"):
        try:
            open(m.path(".graphfs", "feed"), mode).close()
            raise AssertionError("the feed opened for writing")
        except PermissionError:
            pass
