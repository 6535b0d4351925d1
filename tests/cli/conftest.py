"""Fixtures for the graphfs command-line suite.

The binary under test is $GRAPHFS (meson sets it; by hand:
GRAPHFS=$PWD/build/tools/graphfs /usr/bin/python3 -m pytest -q tests/cli).
"""
import hashlib
import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # tests/store_files.py
from store_files import piece_cache  # noqa: E402,F401  (autouse: each test its own cache)
import tier  # noqa: E402
from tier import quieter_leak_checks  # noqa: E402


def graphfs_binary():
    path = os.environ.get("GRAPHFS")
    if not path:
        raise RuntimeError("set GRAPHFS to the graphfs binary, e.g. GRAPHFS=$PWD/build/tools/graphfs")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"GRAPHFS={path} is not an executable")
    return path


def canonical(row):
    """The canonical bytes of a row whose keys are already in schema order."""
    return json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n"


def jsonl(rows):
    return "".join(canonical(row) for row in rows)


def store_digest(store):
    """Every file and directory under the store: name, type, mode, size, content hash.

    `lock` counts by name and mode only: its bytes are the wake-up page the processes of
    a host share (docs/FORMAT.md §18), which every read-write open maps and every release
    of the store lock changes; they are never store data."""
    digest = {}
    store = Path(store)
    for path in sorted(store.rglob("*")):
        relative = str(path.relative_to(store))
        info = path.lstat()
        if relative == "lock":
            digest[relative] = ("file", oct(info.st_mode))
        elif path.is_file():
            digest[relative] = ("file", oct(info.st_mode), info.st_size,
                                hashlib.sha256(path.read_bytes()).hexdigest())
        else:
            digest[relative] = ("dir" if path.is_dir() else "other", oct(info.st_mode))
    return digest


class Cli:
    """Runs graphfs and checks its outcome."""

    def __init__(self, binary, work, leak_checked=True):
        self.binary = binary
        self.work = Path(work)
        self.files = 0
        self.leak_checked = leak_checked

    def run(self, *args, input=None, env=None, timeout=120):
        environment = quieter_leak_checks(dict(os.environ), self.leak_checked)
        if env:
            environment.update(env)
        return subprocess.run([self.binary, *[str(a) for a in args]], input=input,
                              capture_output=True, timeout=timeout, env=environment)

    def ok(self, *args, **kwargs):
        result = self.run(*args, **kwargs)
        assert result.returncode == 0, (
            f"graphfs {' '.join(map(str, args))} failed ({result.returncode}): "
            f"{result.stderr.decode(errors='replace')}")
        return result

    def fail(self, *args, status=1, **kwargs):
        """Runs a command that must fail with `status` and exactly one line 'graphfs: …' on stderr."""
        result = self.run(*args, **kwargs)
        assert result.returncode == status, (
            f"graphfs {' '.join(map(str, args))}: expected exit {status}, got "
            f"{result.returncode}; stderr: {result.stderr!r}")
        error = result.stderr.decode(errors="replace")
        assert error.startswith("graphfs: "), error
        assert error.endswith("\n") and error.count("\n") == 1, f"not one line: {error!r}"
        return error.rstrip("\n")

    def write_file(self, text, name=None):
        """Writes text (str or bytes) to a fresh file in the work directory; returns its path."""
        self.files += 1
        path = self.work / (name or f"input-{self.files}.jsonl")
        if isinstance(text, str):
            text = text.encode()
        path.write_bytes(text)
        return path

    def import_rows(self, store, table, rows, mode="overwrite", branch=None, message=None):
        """Imports rows (list of dicts, or raw text) and returns the committed version."""
        path = self.write_file(rows if isinstance(rows, (str, bytes)) else jsonl(rows))
        args = ["import", store, table, path, "--mode", mode]
        if branch:
            args += ["--branch", branch]
        if message:
            args += ["-m", message]
        output = self.ok(*args).stdout.decode()
        found = re.search(r"committed version (\d+) \(commit ([0-9A-Z]{26})\)", output)
        assert found, output
        return int(found.group(1))

    def export(self, store, table, branch=None, at=None):
        args = ["export", store, table]
        if branch:
            args += ["--branch", branch]
        if at is not None:
            args += ["--at", at]
        return self.ok(*args).stdout.decode()

    def log(self, store, branch=None):
        args = ["log", store] + (["--branch", branch] if branch else [])
        return [json.loads(line) for line in self.ok(*args).stdout.decode().splitlines()]

    def heads(self, store, branch=None, at=None):
        args = ["heads", store]
        if branch:
            args += ["--branch", branch]
        if at is not None:
            args += ["--at", at]
        lines = self.ok(*args).stdout.decode().splitlines()
        return [json.loads(line) for line in lines]

    def commits(self, store, count, tables=1, prefix="T", distinct=False):
        """`count` one-row merge commits, each its own durable publish, from one process
        (graphfs-bench commits, tools/bench.d/graphfs_bench.c): commit V merges
        {"id":"r","value":V} into table <prefix>00 (round robin over <prefix>00.. with tables > 1;
        distinct: id "r<V>", a new row, so each commit leaves a fragment of its own).
        For a long history without a launch per commit."""
        bench = Path(self.binary).parent / "graphfs-bench"
        environment = quieter_leak_checks(dict(os.environ), self.leak_checked)
        result = subprocess.run([str(bench), "commits", str(store), str(count), "--tables", str(tables),
                                 "--prefix", prefix] + (["--distinct"] if distinct else []),
                                capture_output=True, env=environment, timeout=600)
        assert result.returncode == 0, f"graphfs-bench commits failed: {result.stderr.decode(errors='replace')}"

    def set_schema(self, store, table, schema, branch=None):
        path = self.write_file(json.dumps(schema), name=f"schema-{self.files}.json")
        args = ["schema", store, table, "--set", path] + (["--branch", branch] if branch else [])
        self.ok(*args)


@pytest.fixture
def graphfs():
    return graphfs_binary()


# Under ASan, the command-line launches of these files check leaks at exit (every other launch
# skips the ~40 ms check; docs/TESTING.md "Sanitizers"): together they take every command and its
# error paths.
LEAK_CHECKED = {"test_bad_input", "test_commands", "test_corruption", "test_dump", "test_dump_all", "test_gc", "test_merge",
                "test_object_store", "test_snapshot"}


def module_name(request):
    return request.module.__name__.rsplit(".", 1)[-1]


@pytest.fixture
def cli(graphfs, tmp_path, request):
    work = tmp_path / "work"
    work.mkdir()
    return Cli(graphfs, work, leak_checked=module_name(request) in LEAK_CHECKED)


# Suites that run twice where an object store is given (tools/test starts one): on a local store
# and on an s3:// store, so that what works on a disk is shown to work on an object store too.
# Under ASan the s3 variants run for one representative file (and test_object_store.py, which
# is about the object store): the normal build runs them all (docs/TESTING.md "Stores").
BOTH_STORES = {"test_branches", "test_concurrency", "test_diff", "test_dump", "test_dump_all", "test_gc", "test_graph",
               "test_heads", "test_history", "test_log", "test_merge", "test_names", "test_progress",
               "test_row_history", "test_rows", "test_snapshot"}
BOTH_STORES_SANITIZED = {"test_rows"}


def store_kinds(module):
    """The stores a test of `module` runs on (tests/tier.py)."""
    return tier.store_kinds(module, BOTH_STORES, BOTH_STORES_SANITIZED)


def pytest_configure(config):
    config.addinivalue_line("markers", "local_only: a test of BOTH_STORES that reads the store's files itself "
                            "or sees what differs there by design (docs/MOUNT.md)")
    config.addinivalue_line("markers", "serial: a test that measures time or loads the machine: "
                            "tools/test runs it alone, after the parallel pass")
    config.addinivalue_line("markers", "xdist_group(name): tests that must run in one pytest-xdist worker, "
                            "one after the other (they share something outside their temporary directories)")


def pytest_generate_tests(metafunc):
    tier.parametrize_stores(metafunc, BOTH_STORES, BOTH_STORES_SANITIZED)


@pytest.fixture
def store(cli, tmp_path, request):
    """A fresh, empty store: a directory, or (the "s3" case of BOTH_STORES) an s3:// location."""
    if getattr(request, "param", "local") == "s3":
        path = f"s3://{os.environ['GRAPHFS_TEST_BUCKET']}/cli-{uuid.uuid4().hex[:12]}"
    else:
        path = tmp_path / "store"
    cli.ok("init", path)
    return path
