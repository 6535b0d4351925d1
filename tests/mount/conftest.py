"""Fixtures for the mounted-tree suite.

The binary under test is $GRAPHFS (meson sets it; by hand:
GRAPHFS=$PWD/build/tools/graphfs /usr/bin/python3 -m pytest -q tests/mount).

Every test that mounts goes through `mounted()`, which behaves like libfuse's
own test harness: it spawns `graphfs mount STORE MNT -f`, waits until the
mountpoint is a different file system, and afterwards unmounts with
`fusermount3 -u` (which must succeed, and the daemon must then exit 0 with
nothing unexpected on stderr). When the test failed, teardown detaches the
mount lazily (`fusermount3 -u -z`) and kills the daemon instead. A final
session hook detaches any graphfs mount still below the test directories, so
no mount is ever left behind, pass or fail.
"""
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # tests/store_files.py
from store_files import piece_cache  # noqa: E402,F401  (autouse: each test its own cache)
import tier  # noqa: E402
from tier import quieter_leak_checks  # noqa: E402

FUSERMOUNT = "fusermount3"
MOUNT_TIMEOUT = 20.0


def graphfs_binary():
    path = os.environ.get("GRAPHFS")
    if not path:
        here = Path(__file__).resolve().parents[2]
        for candidate in ("build/tools/graphfs", "build-fuse/tools/graphfs"):
            if (here / candidate).exists():
                path = str(here / candidate)
                break
    if not path:
        raise RuntimeError("set GRAPHFS to the graphfs binary, e.g. GRAPHFS=$PWD/build/tools/graphfs")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"GRAPHFS={path} is not an executable")
    return path


GRAPHFS = graphfs_binary()


def canonical(row):
    return json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n"


def jsonl(rows):
    return "".join(canonical(row) for row in rows)


def graphfs(*args, check=True, input=None, timeout=600, env=None):
    """Runs the command line. Under ASan its launches skip the leak check at exit (the CLI suite
    checks the commands' leaks; here every daemon checks its own at unmount)."""
    environment = quieter_leak_checks(dict(os.environ), False)
    if env:
        environment.update(env)
    result = subprocess.run([GRAPHFS, *[str(a) for a in args]], capture_output=True, input=input,
                            timeout=timeout, env=environment)
    if check and result.returncode != 0:
        raise AssertionError(f"graphfs {' '.join(map(str, args))} failed ({result.returncode}): "
                             f"{result.stderr.decode(errors='replace')}")
    return result


def sh(command, cwd=None, check=True, timeout=300, input=None):
    """Runs a shell command line (bash); returns the CompletedProcess."""
    result = subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, timeout=timeout,
                            input=input)
    if check and result.returncode != 0:
        raise AssertionError(f"`{command}` failed ({result.returncode}): "
                             f"stdout={result.stdout!r} stderr={result.stderr!r}")
    return result


def is_mountpoint(path):
    path = Path(path)
    try:
        return path.stat().st_dev != path.parent.stat().st_dev
    except OSError:
        # A dead FUSE connection: still mounted.
        return os.path.ismount(path) or _listed_in_mounts(path)


def _listed_in_mounts(path):
    # Resolve the parent only: a stat of a dead FUSE mountpoint itself fails with ENOTCONN.
    target = str(Path(path).parent.resolve() / Path(path).name)
    with open("/proc/self/mounts") as mounts:
        return any(line.split()[1] == target for line in mounts)


def lazy_unmount(path):
    subprocess.run([FUSERMOUNT, "-u", "-z", str(path)], capture_output=True)


class Mount:
    """A running daemon and its mountpoint."""

    def __init__(self, store, mountpoint, process, stderr_path, arguments):
        self.store = store if str(store).startswith("s3://") else Path(store)
        self.root = Path(mountpoint)
        self.process = process
        self.stderr_path = Path(stderr_path)
        self.arguments = arguments

    @property
    def pid(self):
        return self.process.pid

    def path(self, *parts):
        return self.root.joinpath(*parts)

    def read(self, *parts):
        return self.path(*parts).read_bytes().decode()

    def write(self, relative, text, mode="w"):
        with open(self.path(relative), mode) as handle:
            handle.write(text)

    def log(self, branch_root=""):
        text = self.read(branch_root, "log") if branch_root else self.read("log")
        return [json.loads(line) for line in text.splitlines()]

    def log_count(self):
        return len(self.read("log").splitlines())

    def errors(self):
        return [json.loads(line) for line in self.read(".graphfs", "errors").splitlines()]

    def stats(self):
        return json.loads(self.read(".graphfs", "stats"))

    def head(self, table):
        return json.loads(self.read("heads", f"{table}.json"))

    def stderr(self):
        return self.stderr_path.read_text(errors="replace")

    def sh(self, command, check=True, timeout=300, input=None):
        return sh(command, cwd=self.root, check=check, timeout=timeout, input=input)


def start_daemon(store, mountpoint, stderr_path, options=(), foreground=True):
    arguments = [GRAPHFS, "mount", str(store), str(mountpoint)]
    if foreground:
        arguments.append("-f")
    for option in options:
        arguments += ["-o", option]
    stderr = open(stderr_path, "wb")
    process = subprocess.Popen(arguments, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=stderr)
    stderr.close()
    deadline = time.monotonic() + MOUNT_TIMEOUT
    while time.monotonic() < deadline:
        if is_mountpoint(mountpoint):
            try:
                (Path(mountpoint) / ".graphfs" / "version").read_bytes()
                return process
            except OSError:
                pass
        if process.poll() is not None and foreground:
            raise AssertionError(f"graphfs mount exited with {process.returncode}: "
                                 f"{Path(stderr_path).read_text(errors='replace')}")
        time.sleep(0.02)
    lazy_unmount(mountpoint)
    process.kill()
    process.wait()
    raise AssertionError(f"the mount did not come up within {MOUNT_TIMEOUT} s: "
                         f"{Path(stderr_path).read_text(errors='replace')}")


EXPECTED_STDERR = ("graphfs: mounted ",
                   # an outage of the object store and its end (tests/mount/test_object_store.py)
                   "graphfs: the object store is out of reach (", "graphfs: the object store is back")


def check_stderr(text):
    unexpected = [line for line in text.splitlines() if line and not line.startswith(EXPECTED_STDERR)]
    assert not unexpected, "the daemon wrote to stderr:\n" + "\n".join(unexpected)


def unmount_cleanly(mount):
    """fusermount3 -u must succeed; the daemon must exit 0 with a clean stderr."""
    result = subprocess.run([FUSERMOUNT, "-u", str(mount.root)], capture_output=True)
    if result.returncode != 0:
        # A reader that just closed may still hold the mount for a moment.
        for _ in range(50):
            time.sleep(0.1)
            result = subprocess.run([FUSERMOUNT, "-u", str(mount.root)], capture_output=True)
            if result.returncode == 0:
                break
    assert result.returncode == 0, f"fusermount3 -u failed: {result.stderr!r}"
    status = mount.process.wait(timeout=60)
    assert status == 0, f"the daemon exited with {status}: {mount.stderr()}"
    check_stderr(mount.stderr())


def tear_down(mount, failed):
    if failed:
        lazy_unmount(mount.root)
        if mount.process.poll() is None:
            mount.process.kill()
        mount.process.wait()
        return
    try:
        unmount_cleanly(mount)
    finally:
        if is_mountpoint(mount.root):
            lazy_unmount(mount.root)
        if mount.process.poll() is None:
            mount.process.kill()
            mount.process.wait()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, "report_" + report.when, report)


def call_failed(request):
    report = getattr(request.node, "report_call", None)
    return report is None or report.failed


# Suites that run twice where an object store is given (tools/test starts one): on a local store
# and on an s3:// store (a mount of it), so that what works on a disk is shown to work there too.
# Under ASan the s3 variants run for one representative file (and test_object_store.py, which
# is about the object store): the normal build runs them all (docs/TESTING.md "Stores").
BOTH_STORES = {"test_based", "test_branches", "test_feed", "test_refused", "test_scratch", "test_changes", "test_concurrency", "test_gc", "test_graph", "test_isolation", "test_kill9",
               "test_model", "test_names", "test_posix",
               "test_staging", "test_tree", "test_write"}
BOTH_STORES_SANITIZED = {"test_write"}


def store_kinds(module):
    """The stores a test of `module` runs on (tests/tier.py)."""
    return tier.store_kinds(module, BOTH_STORES, BOTH_STORES_SANITIZED)


def pytest_configure(config):
    config.addinivalue_line("markers", "local_only: a test of BOTH_STORES that reads the store's files itself "
                            "or sees what differs there by design (docs/MOUNT.md)")
    config.addinivalue_line("markers", "serial: a test that measures time, or stops the shared object "
                            "store: tools/test runs it alone, after the parallel pass")
    config.addinivalue_line("markers", "xdist_group(name): tests that must run in one pytest-xdist worker, "
                            "one after the other (they share something outside their temporary directories)")


def pytest_generate_tests(metafunc):
    tier.parametrize_stores(metafunc, BOTH_STORES, BOTH_STORES_SANITIZED)


@pytest.fixture
def store(tmp_path, request):
    """A fresh store: a directory, or (the "s3" case of BOTH_STORES) an s3:// location."""
    if getattr(request, "param", "local") == "s3":
        path = f"s3://{os.environ['GRAPHFS_TEST_BUCKET']}/mount-{uuid.uuid4().hex[:12]}"
    else:
        path = tmp_path / "store"
    graphfs("init", path)
    return path


@pytest.fixture
def mounter(tmp_path, request):
    """mounter(store, options=()) mounts and returns a Mount; all are torn down after the test."""
    mounts = []
    counter = [0]

    def mount(store_path, options=(), name=None):
        counter[0] += 1
        mountpoint = tmp_path / (name or f"mnt{counter[0]}")
        mountpoint.mkdir(exist_ok=True)
        stderr_path = tmp_path / f"daemon{counter[0]}.stderr"
        process = start_daemon(store_path, mountpoint, stderr_path, options)
        result = Mount(store_path, mountpoint, process, stderr_path, options)
        mounts.append(result)
        return result

    def unmount(target):
        """Unmounts one mount now (must be clean)."""
        mounts.remove(target)
        tear_down(target, False)

    def forget(target):
        """For a daemon the test ended itself (signal, kill -9): only make sure nothing stays mounted."""
        mounts.remove(target)
        if is_mountpoint(target.root):
            lazy_unmount(target.root)
        if target.process.poll() is None:
            target.process.kill()
        target.process.wait()

    mount.unmount = unmount
    mount.forget = forget
    yield mount
    failed = call_failed(request)
    errors = []
    for target in reversed(mounts):
        try:
            tear_down(target, failed)
        except AssertionError as error:
            errors.append(str(error))
            tear_down(target, True)
    if errors and not failed:
        pytest.fail("\n".join(errors))


@pytest.fixture
def mnt(store, mounter):
    """The store mounted on branch main."""
    return mounter(store)


def pytest_sessionfinish(session, exitstatus):
    """Nothing may stay mounted: detach any graphfs mount this session left below its own
    temporary directory (never another session's mounts running at the same time)."""
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is None:
        return
    base = str(factory.getbasetemp()) + "/"
    with open("/proc/self/mounts") as mounts:
        for line in mounts:
            fields = line.split()
            path = fields[1].replace("\\040", " ")
            if fields[2] == "fuse.graphfs" and path.startswith(base):
                lazy_unmount(path)


def beside(store, name):
    """A path for a helper file of a test: next to a local store, in a temporary directory for an s3:// one."""
    if str(store).startswith("s3://"):
        return Path(tempfile.mkdtemp(prefix="graphfs-test-")) / name
    return Path(store).parent / name


def import_rows(store, table, rows, mode="overwrite", branch=None, tmp=None):
    """Commits rows into table through the CLI."""
    tmp = Path(tmp or (tempfile.gettempdir() if str(store).startswith("s3://") else store.parent))
    source = tmp / f"import-{table}-{time.monotonic_ns()}.jsonl"
    source.write_text(jsonl(rows))
    args = ["import", store, table, source, "--mode", mode]
    if branch:
        args += ["--branch", branch]
    graphfs(*args)
    source.unlink()


def wait_for(predicate, timeout=5.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def kill_daemon(mount):
    os.kill(mount.pid, signal.SIGKILL)
    mount.process.wait()


@contextlib.contextmanager
def opened(path, mode="r"):
    handle = open(path, mode)
    try:
        yield handle
    finally:
        handle.close()
