"""Several writers and readers at once through one mount."""
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from multiprocessing import Process

from conftest import graphfs, import_rows, jsonl

WORKERS = 4
WRITES = 20


def append_rows(path, worker):
    for i in range(WRITES):
        with open(path, "a") as handle:
            handle.write(jsonl([{"id": f"w{worker}-{i}", "n": i}]))


def test_concurrent_appends_to_one_table_lose_nothing(store, mounter):
    import_rows(store, "Log", [{"id": "start", "n": 0}])
    m = mounter(store)
    path = m.path("tables", "Log.jsonl")
    workers = [Process(target=append_rows, args=(path, worker)) for worker in range(WORKERS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
        assert worker.exitcode == 0
    ids = {json.loads(line)["id"] for line in m.read("tables", "Log.jsonl").splitlines()}
    assert ids == {"start"} | {f"w{w}-{i}" for w in range(WORKERS) for i in range(WRITES)}
    assert m.log_count() == 1 + WORKERS * WRITES
    assert len(graphfs("log", store).stdout.splitlines()) == 1 + WORKERS * WRITES


def overwrite_own_table(path, worker):
    for i in range(WRITES):
        with open(path, "w") as handle:
            handle.write(jsonl([{"id": f"r{j}", "round": i} for j in range(worker + 1)]))


def test_concurrent_overwrites_of_separate_tables_each_commit(store, mounter):
    m = mounter(store)
    workers = [Process(target=overwrite_own_table, args=(m.path("tables", f"T{worker}.jsonl"), worker))
               for worker in range(WORKERS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
        assert worker.exitcode == 0
    for worker in range(WORKERS):
        assert m.read("tables", f"T{worker}.jsonl") == jsonl(
            [{"id": f"r{j}", "round": WRITES - 1} for j in range(worker + 1)])
    assert m.log_count() == WORKERS * WRITES


def test_readers_see_whole_versions_while_writers_commit(store, mounter):
    rows = [{"id": f"r{i}", "v": 0} for i in range(200)]
    import_rows(store, "Doc", rows)
    m = mounter(store)
    versions = {jsonl([{"id": f"r{i}", "v": v} for i in range(200)]) for v in range(WRITES + 1)}
    stop = threading.Event()
    seen = []

    def read_loop():
        while not stop.is_set():
            seen.append(m.read("tables", "Doc.jsonl"))

    with ThreadPoolExecutor(max_workers=3) as pool:
        readers = [pool.submit(read_loop) for _ in range(2)]
        for v in range(1, WRITES + 1):
            m.write("tables/Doc.jsonl", jsonl([{"id": f"r{i}", "v": v} for i in range(200)]))
        stop.set()
        for reader in readers:
            reader.result(timeout=60)
    assert seen
    assert all(text in versions for text in seen)
    assert m.read("tables", "Doc.jsonl") == jsonl([{"id": f"r{i}", "v": WRITES} for i in range(200)])
