"""Several processes committing through the CLI at once: every commit lands,
one linear history, heads equal the journal replay (verify), no lost rows."""
import os
import subprocess
import sys
import textwrap
import uuid

import pytest

from conftest import Cli, graphfs_binary, jsonl, store_kinds
from tier import quieter_leak_checks

WORKERS = 4
COMMITS_EACH = 50

WORKER = textwrap.dedent("""
    import subprocess, sys
    graphfs, store, work, worker, commits = sys.argv[1:6]
    worker, commits = int(worker), int(commits)
    for step in range(commits):
        table = "Shared" if step % 2 == 0 else f"Own{worker}"
        path = f"{work}/w{worker}-{step}.jsonl"
        with open(path, "w") as file:
            file.write('{"id":"w%d-%d","worker":%d,"step":%d}\\n' % (worker, step, worker, step))
        result = subprocess.run([graphfs, "import", store, table, path, "--mode", "merge",
                                 "-m", f"worker {worker} step {step}"], capture_output=True)
        if result.returncode != 0:
            sys.stderr.write(result.stderr.decode())
            sys.exit(1)
""")


def start_workers(cli, store, count, commits):
    script = cli.work / "worker.py"
    script.write_text(WORKER)
    environment = quieter_leak_checks(dict(os.environ), False)
    return [subprocess.Popen([sys.executable, str(script), cli.binary, str(store), str(cli.work),
                              str(worker), str(commits)], stderr=subprocess.PIPE, env=environment)
            for worker in range(count)]


def wait_all(processes):
    for process in processes:
        _, error = process.communicate(timeout=600)
        assert process.returncode == 0, error.decode()


@pytest.fixture(scope="module", params=store_kinds("test_concurrency"))
def merged_by_four(request, tmp_path_factory):
    """One run of WORKERS processes making COMMITS_EACH one-row merges each, per store: the
    three tests below assert different things about the same run."""
    work = tmp_path_factory.mktemp("concurrency")
    cli = Cli(graphfs_binary(), work, leak_checked=False)
    if request.param == "s3":
        store = f"s3://{os.environ['GRAPHFS_TEST_BUCKET']}/cli-{uuid.uuid4().hex[:12]}"
    else:
        store = work / "store"
    cli.ok("init", store)
    wait_all(start_workers(cli, store, WORKERS, COMMITS_EACH))
    return cli, store


@pytest.mark.xdist_group("merged-by-four")   # one run of the workload, on one worker
def test_concurrent_merges_make_exactly_one_commit_each(merged_by_four):
    cli, store = merged_by_four
    log = cli.log(store)
    assert len(log) == WORKERS * COMMITS_EACH
    assert sorted(entry["version"] for entry in log) == list(range(1, WORKERS * COMMITS_EACH + 1))
    for newer, older in zip(log, log[1:]):
        assert newer["parents"] == [older["commit"]]
    messages = {entry["message"] for entry in log}
    assert messages == {f"worker {w} step {s}" for w in range(WORKERS) for s in range(COMMITS_EACH)}


@pytest.mark.xdist_group("merged-by-four")   # one run of the workload, on one worker
def test_concurrent_merges_lose_no_rows(merged_by_four):
    cli, store = merged_by_four
    shared = cli.export(store, "Shared").splitlines()
    assert len(shared) == WORKERS * COMMITS_EACH // 2
    assert {line.split('"')[3] for line in shared} == {
        f"w{w}-{s}" for w in range(WORKERS) for s in range(0, COMMITS_EACH, 2)}
    for worker in range(WORKERS):
        own = cli.export(store, f"Own{worker}")
        assert own == jsonl([{"id": f"w{worker}-{s}", "worker": worker, "step": s}
                             for s in range(1, COMMITS_EACH, 2)])


@pytest.mark.xdist_group("merged-by-four")   # one run of the workload, on one worker
def test_concurrent_merges_leave_heads_equal_to_the_journal_replay(merged_by_four):
    cli, store = merged_by_four
    cli.ok("verify", store)
    heads = {head["table_key"]: head for head in cli.heads(store)}
    assert heads["Shared"]["row_count"] == WORKERS * COMMITS_EACH // 2
    assert heads["Shared"]["table_version"] == WORKERS * COMMITS_EACH // 2
    log = cli.log(store)
    last_shared = next(entry for entry in log if entry["changes"][0]["table"] == "Shared")
    assert heads["Shared"]["head_graph_commit_id"] == last_shared["commit"]


def test_a_large_import_while_others_write_serializes_and_loses_nothing(cli, store):
    big = jsonl([{"id": f"b{i:06d}", "text": "y" * 100} for i in range(60000)])
    path = cli.write_file(big, name="big.jsonl")
    importer = subprocess.Popen([cli.binary, "import", store, "Big", path, "-m", "big"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    workers = start_workers(cli, store, 2, 20)
    _, error = importer.communicate(timeout=600)
    assert importer.returncode == 0, error.decode()
    wait_all(workers)
    log = cli.log(store)
    assert len(log) == 1 + 2 * 20
    assert cli.export(store, "Big") == big
    assert len(cli.export(store, "Shared").splitlines()) == 20
    cli.ok("verify", store)


def test_concurrent_branch_writers_keep_one_linear_history_per_branch(cli, store):
    cli.import_rows(store, "Seed", [{"id": "s"}])
    cli.ok("branch", store, "create", "side")
    script = cli.work / "branch-worker.py"
    script.write_text(textwrap.dedent("""
        import subprocess, sys
        graphfs, store, work, branch = sys.argv[1:5]
        for step in range(25):
            path = f"{work}/{branch}-{step}.jsonl"
            with open(path, "w") as file:
                file.write('{"id":"%s-%d"}\\n' % (branch, step))
            result = subprocess.run([graphfs, "import", store, "Seed", path, "--mode", "merge",
                                     "--branch", branch], capture_output=True)
            if result.returncode != 0:
                sys.stderr.write(result.stderr.decode())
                sys.exit(1)
    """))
    processes = [subprocess.Popen([sys.executable, str(script), cli.binary, str(store),
                                   str(cli.work), branch], stderr=subprocess.PIPE,
                                  env=quieter_leak_checks(dict(os.environ), False))
                 for branch in ("main", "side")]
    wait_all(processes)
    for branch in ("main", "side"):
        log = cli.log(store, branch=branch)
        assert len(log) == 26
        assert all(entry["branch"] == branch for entry in log[:25])
        for newer, older in zip(log, log[1:]):
            assert newer["parents"] == [older["commit"]]
        assert len(cli.export(store, "Seed", branch=branch).splitlines()) == 26
    versions = sorted({entry["version"] for branch in ("main", "side")
                       for entry in cli.log(store, branch=branch)})
    assert versions == list(range(1, 52))
    cli.ok("verify", store)
