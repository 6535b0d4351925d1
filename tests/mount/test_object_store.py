"""A store in an S3-compatible object store, mounted: every mount and every CLI process is a host of
its own over one bucket. Runs against the object store tools/test starts (tools/objectstore), whose
environment (AWS_*, GRAPHFS_TEST_BUCKET) it inherits; skipped without one."""
import errno
import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from conftest import GRAPHFS, Mount, graphfs, jsonl, kill_daemon, start_daemon, tear_down, call_failed, wait_for

pytestmark = pytest.mark.skipif(not os.environ.get("GRAPHFS_TEST_BUCKET"),
                                reason="no object store (tools/test starts one: tools/objectstore)")


@pytest.fixture
def remote():
    """A fresh s3:// store under a prefix of its own."""
    location = f"s3://{os.environ['GRAPHFS_TEST_BUCKET']}/mount-{uuid.uuid4().hex[:12]}"
    graphfs("init", location)
    return location


@pytest.fixture
def remote_mounter(tmp_path, request):
    """remote_mounter(location, options=(), env=None) mounts an s3:// store; torn down after the test."""
    mounts = []

    def mount(location, options=(), env=None):
        mountpoint = tmp_path / f"mnt{len(mounts)}"
        mountpoint.mkdir()
        stderr_path = tmp_path / f"daemon{len(mounts)}.stderr"
        saved = dict(os.environ)
        os.environ.update(env or {})
        try:
            process = start_daemon(location, mountpoint, stderr_path, options)
        finally:
            os.environ.clear()
            os.environ.update(saved)
        target = Mount(tmp_path, mountpoint, process, stderr_path, options)
        mounts.append(target)
        return target

    yield mount
    failed = call_failed(request)
    for target in reversed(mounts):
        tear_down(target, failed or target.process.poll() is not None)


def import_rows(location, table, rows, tmp_path, mode="overwrite", branch=None):
    source = tmp_path / f"rows-{uuid.uuid4().hex[:8]}.jsonl"
    source.write_text(jsonl(rows))
    args = ["import", location, table, source, "--mode", mode] + (["--branch", branch] if branch else [])
    graphfs(*args)


def test_a_mounted_object_store_reads_and_writes_tables_like_a_local_one(remote, remote_mounter, tmp_path):
    import_rows(remote, "Person", [{"id": "ada", "name": "Ada"}], tmp_path)
    mnt = remote_mounter(remote)
    assert mnt.read("tables", "Person.jsonl") == jsonl([{"id": "ada", "name": "Ada"}])
    mnt.write("tables/Person.jsonl", jsonl([{"id": "bob", "name": "Bob"}]), mode="a")
    rows = [{"id": "ada", "name": "Ada"}, {"id": "bob", "name": "Bob"}]
    assert mnt.read("tables", "Person.jsonl") == jsonl(rows)
    assert graphfs("export", remote, "Person").stdout.decode() == jsonl(rows)
    assert mnt.read("history", "@1", "tables", "Person.jsonl") == jsonl(rows[:1])


@pytest.mark.serial   # a time bound
def test_a_commit_from_another_host_shows_in_the_mount_within_the_refresh_bound(remote, remote_mounter, tmp_path):
    import_rows(remote, "Person", [{"id": "ada", "name": "Ada"}], tmp_path)
    mnt = remote_mounter(remote)
    assert mnt.read("tables", "Person.jsonl") == jsonl([{"id": "ada", "name": "Ada"}])
    import_rows(remote, "Person", [{"id": "bob", "name": "Bob"}], tmp_path, mode="merge")
    expected = jsonl([{"id": "ada", "name": "Ada"}, {"id": "bob", "name": "Bob"}])
    # the mount looks at most every second (refresh_ms), its store at most every 100 ms
    assert wait_for(lambda: mnt.read("tables", "Person.jsonl") == expected, timeout=5.0)


def test_an_open_on_one_host_sees_every_append_another_host_acknowledged_before_it(remote, remote_mounter, tmp_path):
    # close-to-open across hosts with caches of their own: 20 of 20 (one LIST per open)
    import_rows(remote, "Person", [{"id": "ada", "name": "Ada"}], tmp_path)
    here = remote_mounter(remote, env={"GRAPHFS_CACHE_DIR": str(tmp_path / "cache-here")})
    there = remote_mounter(remote, env={"GRAPHFS_CACHE_DIR": str(tmp_path / "cache-there")})
    rows = [{"id": "ada", "name": "Ada"}]
    assert here.read("tables", "Person.jsonl") == jsonl(rows)
    missed = 0
    for n in range(20):
        rows.append({"id": f"r{n:02}", "name": "x"})
        there.write("tables/Person.jsonl", jsonl(rows[-1:]), mode="a")   # acknowledged at its close
        missed += here.read("tables", "Person.jsonl") != jsonl(rows)
    assert missed == 0


@pytest.mark.serial   # stops the object store every other test uses
@pytest.mark.skipif(not os.environ.get("GRAPHFS_OBJECTSTORE_DIR"),
                    reason="stopping the gateway needs the object store of tools/objectstore")
def test_an_outage_keeps_what_the_mount_knew_readable_fails_writes_with_eio_and_ends_by_itself(remote, remote_mounter,
                                                                                            tmp_path):
    import_rows(remote, "Person", [{"id": "ada", "name": "Ada"}], tmp_path)
    import_rows(remote, "Person", [{"id": "bob", "name": "Bob"}], tmp_path, mode="merge")
    mnt = remote_mounter(remote, env={"GRAPHFS_CACHE_DIR": str(tmp_path / "cache")})
    both = jsonl([{"id": "ada", "name": "Ada"}, {"id": "bob", "name": "Bob"}])
    assert mnt.read("tables", "Person.jsonl") == both
    assert mnt.read("history", "@1", "tables", "Person.jsonl") == jsonl([{"id": "ada", "name": "Ada"}])
    tool = Path(__file__).resolve().parents[2] / "tools" / "objectstore"
    directory = os.environ["GRAPHFS_OBJECTSTORE_DIR"]
    subprocess.run([tool, "stop-gateway", directory], check=True, capture_output=True, timeout=120)
    try:
        started = time.monotonic()
        assert mnt.read("history", "@1", "tables", "Person.jsonl") == jsonl([{"id": "ada", "name": "Ada"}])
        assert mnt.read("tables", "Person.jsonl") == both   # the last state it knew
        assert sorted(os.listdir(mnt.path("tables"))) == ["Person.jsonl"]
        with pytest.raises(OSError) as refused:
            mnt.write("tables/Person.jsonl", jsonl([{"id": "cy", "name": "Cy"}]), mode="a")
        assert refused.value.errno == errno.EIO
        assert time.monotonic() - started < 5   # no request waits out retries: one attempt each
        errors = [json.loads(line) for line in mnt.read(".graphfs", "errors").splitlines()]
        assert any("out of reach" in line["reason"] and line["errno"] == errno.EIO for line in errors)
        assert json.loads(mnt.read(".graphfs", "stats"))["mount"]["stale"] is True
    finally:
        subprocess.run([tool, "start-gateway", directory], check=True, capture_output=True, timeout=120)
    # back without a remount: writes land, the mount says it is current again
    assert wait_for(lambda: mnt.read("tables", "Person.jsonl") == both and
                    json.loads(mnt.read(".graphfs", "stats"))["mount"]["stale"] is False, timeout=10)
    mnt.write("tables/Person.jsonl", jsonl([{"id": "cy", "name": "Cy"}]), mode="a")
    assert graphfs("export", remote, "Person").stdout.decode().endswith('{"id":"cy","name":"Cy"}\n')


def test_a_read_modify_write_on_one_host_keeps_a_row_another_host_committed_meanwhile(remote, remote_mounter,
                                                                                        tmp_path):
    import_rows(remote, "Person", [{"id": "ada", "name": "Ada"}, {"id": "bob", "name": "Bob"}], tmp_path)
    here = remote_mounter(remote, env={"GRAPHFS_CACHE_DIR": str(tmp_path / "cache-here")})
    there = remote_mounter(remote, env={"GRAPHFS_CACHE_DIR": str(tmp_path / "cache-there")})
    path = here.path("tables", "Person.jsonl")
    with open(path) as handle:
        text = handle.read()
    there.write("tables/Person.jsonl", jsonl([{"id": "cy", "name": "Cy"}]), mode="a")   # the other host
    with open(path, "w") as handle:   # O_TRUNC: based on what this process read
        handle.write(text.replace('"Bob"', '"Robert"'))
    expected = sorted(jsonl([{"id": "ada", "name": "Ada"}, {"id": "bob", "name": "Robert"},
                             {"id": "cy", "name": "Cy"}]).splitlines())
    assert sorted(graphfs("export", remote, "Person").stdout.decode().splitlines()) == expected


def test_a_branch_a_mount_serves_cannot_be_deleted_from_another_host_until_unmounted(remote, remote_mounter, tmp_path):
    import_rows(remote, "Person", [{"id": "ada", "name": "Ada"}], tmp_path)
    graphfs("branch", remote, "create", "dev")
    mnt = remote_mounter(remote, options=("branch=dev",))
    refused = graphfs("branch", remote, "delete", "dev", check=False)
    assert refused.returncode == 1
    assert f"mounted at {mnt.root}" in refused.stderr.decode()
    tear_down(mnt, False)
    graphfs("branch", remote, "delete", "dev")


def test_the_lease_of_a_killed_mount_expires_and_frees_its_branch(remote, remote_mounter, tmp_path):
    graphfs("branch", remote, "create", "dev")
    mnt = remote_mounter(remote, options=("branch=dev",), env={"GRAPHFS_LEASE_SECONDS": "2"})
    time.sleep(1.2)   # one renewal (every third of the lease) has happened
    kill_daemon(mnt)
    assert graphfs("branch", remote, "delete", "dev", check=False).returncode == 1   # the lease still holds
    assert wait_for(lambda: graphfs("branch", remote, "delete", "dev", check=False).returncode == 0, timeout=6.0)


def test_a_cold_mount_reads_every_head_with_the_same_requests_and_bytes_at_any_depth(remote_mounter, tmp_path,
                                                                                      monkeypatch):
    # the newest tail's version index leaf holds 6 entries in one store and 30 in the other: a cold
    # mount fetches only the state part after it (docs/FORMAT.md §18, §23), so not one byte differs
    asked = {}
    for commits in (6, 30):
        monkeypatch.setenv("GRAPHFS_CACHE_DIR", str(tmp_path / f"cold-{commits}"))   # a host that never read it
        location = f"s3://{os.environ['GRAPHFS_TEST_BUCKET']}/mount-{uuid.uuid4().hex[:12]}"
        graphfs("init", location)
        for i in range(commits):
            import_rows(location, f"T{i % 3}", [{"id": "r", "value": i}], tmp_path, mode="merge")
        # no timed refresh during the measurement: the counters must not depend on timing (on a
        # loaded machine, reads more than 100 ms apart listed the newest root once more)
        mnt = remote_mounter(location, options=["refresh_ms=600000"], env={"GRAPHFS_S3_REFRESH_MS": "600000"})
        for table in ("T0", "T1", "T2"):
            mnt.read("heads", f"{table}.json")
        sent = json.loads(mnt.read(".graphfs", "stats"))["object_store"]
        asked[commits] = (sent["gets"], sent["heads"], sent["lists"], sent["bytes_received"])
        tear_down(mnt, False)
    assert asked[6] == asked[30]


def test_a_table_larger_than_4_mib_copied_into_the_mount_is_committed_whole(remote, remote_mounter, tmp_path):
    rows = [{"id": f"r{i:07}", "name": "x" * 40} for i in range(100000)]
    source = tmp_path / "big.jsonl"
    source.write_text(jsonl(rows))
    mnt = remote_mounter(remote)
    mnt.sh(f"cp {source} tables/Big.jsonl")
    assert mnt.read("tables", "Big.jsonl") == jsonl(rows)
    assert graphfs("export", remote, "Big").stdout.decode() == jsonl(rows)


def test_a_version_a_mount_on_one_host_reads_survives_a_gc_run_from_another(remote, remote_mounter, tmp_path):
    for value in range(6):
        import_rows(remote, "Counter", [{"id": "c", "value": value}], tmp_path)
    mnt = remote_mounter(remote)
    expected = jsonl([{"id": "c", "value": 1}])
    handle = open(mnt.path("history", "@2", "tables", "Counter.jsonl"))
    try:
        first = handle.read(5)
        # the mount's pins are a lease in the store; gc (another host) waits a grace period, then lists them
        report = graphfs("gc", remote, "--keep-versions", "1").stdout.decode()
        assert "reclaimed versions 1..5" in report
        assert "1 version below the horizon kept for open readers" in report
        handle.seek(0)
        assert handle.read() == expected
        assert first == expected[:5]
    finally:
        handle.close()
    time.sleep(1.0)   # the lease says the pin is gone (stored within LEASE_SETTLE_MS)
    report = graphfs("gc", remote, "--keep-versions", "1").stdout.decode()
    assert "kept for open readers" not in report
    assert "clean" in graphfs("verify", remote).stdout.decode()
    assert mnt.read("tables", "Counter.jsonl") == jsonl([{"id": "c", "value": 5}])


def test_a_mount_starting_while_another_host_deletes_its_branch_waits_for_the_delete(remote, remote_mounter, tmp_path):
    # the delete announces itself (deleting/<branch>.<host>-<pid>) before it checks the mounts' leases;
    # a mount stores its lease, then waits while such a delete is live, then checks the branch
    graphfs("branch", remote, "create", "dev")
    bucket, _, prefix = remote[len("s3://"):].partition("/")
    until = int((time.time() + 1.5) * 1e6)
    subprocess.run(["curl", "-sS", "-f", "--aws-sigv4", f"aws:amz:{os.environ['AWS_REGION']}:s3", "--user",
                    f"{os.environ['AWS_ACCESS_KEY_ID']}:{os.environ['AWS_SECRET_ACCESS_KEY']}",
                    "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-X", "PUT", "--data-binary", "@-",
                    f"{os.environ['AWS_ENDPOINT_URL']}/{bucket}/{prefix}/deleting/dev.otherhost-1"],
                   input=f"delete\nexpires {until}\n".encode(), check=True, capture_output=True)
    started = time.monotonic()
    mnt = remote_mounter(remote, options=("branch=dev",))
    assert time.monotonic() - started >= 1.0   # it waited for the announced delete to end
    assert "Person.jsonl" not in os.listdir(mnt.path("tables"))


def test_a_mount_that_daemonizes_keeps_renewing_its_lease(remote, tmp_path):
    # fuse_daemonize forks, and a forked child keeps no thread: the lease renewer starts again in it
    from conftest import FUSERMOUNT, is_mountpoint, lazy_unmount
    graphfs("branch", remote, "create", "dev")
    mountpoint = tmp_path / "background"
    mountpoint.mkdir()
    environment = dict(os.environ, GRAPHFS_LEASE_SECONDS="2")
    started = subprocess.run([os.environ.get("GRAPHFS", ""), "mount", remote, str(mountpoint), "-o", "branch=dev"],
                             env=environment, capture_output=True, timeout=60)
    try:
        assert started.returncode == 0, started.stderr
        assert wait_for(lambda: is_mountpoint(mountpoint), timeout=10.0)
        time.sleep(4.5)   # two lease lengths: only renewals keep it
        refused = graphfs("branch", remote, "delete", "dev", check=False)
        assert refused.returncode == 1 and "mounted at" in refused.stderr.decode()
    finally:
        if subprocess.run([FUSERMOUNT, "-u", str(mountpoint)], capture_output=True).returncode != 0:
            lazy_unmount(mountpoint)   # the daemon ends once unmounted
    assert wait_for(lambda: graphfs("branch", remote, "delete", "dev", check=False).returncode == 0, timeout=10.0)


def test_a_mount_that_missed_many_commits_catches_up_with_the_same_requests_however_many(remote_mounter, tmp_path):
    # listing pages of 10 keys: a mount that missed 15 or 150 commits of another host lists one page,
    # reads the last piece a meta slot names, lists from there and reads the newest state's part of
    # that piece (core/io_pieced.c invariant 9): the same requests, where a listing of every piece
    # missed took a page per 10
    bench = Path(GRAPHFS).parent / "graphfs-bench"
    asked = {}
    for missed in (15, 150):
        location = f"s3://{os.environ['GRAPHFS_TEST_BUCKET']}/mount-{uuid.uuid4().hex[:12]}"
        graphfs("init", location)
        there = {**os.environ, "GRAPHFS_CACHE_DIR": str(tmp_path / f"there-{missed}")}
        subprocess.run([str(bench), "commits", location, "4", "--tables", "4"], check=True, capture_output=True,
                       env=there)
        mnt = remote_mounter(location, options=["refresh_ms=600000"],
                             env={"GRAPHFS_CACHE_DIR": str(tmp_path / f"here-{missed}"), "GRAPHFS_S3_LIST_PAGE": "10",
                                  "GRAPHFS_S3_REFRESH_MS": "600000"})
        assert json.loads(mnt.read("heads", "T00.json"))["table_version"] == 1
        # (every open of a live file refreshes, .graphfs/stats too: read it before the commits; the
        # one after adds one LIST that finds nothing new)
        before = json.loads(mnt.read(".graphfs", "stats"))["object_store"]
        subprocess.run([str(bench), "commits", location, str(missed), "--tables", "4"], check=True,
                       capture_output=True, env=there)
        head = json.loads(mnt.read("heads", "T00.json"))   # an open: close-to-open catches up
        after = json.loads(mnt.read(".graphfs", "stats"))["object_store"]
        assert head["table_version"] > 1
        assert json.loads(mnt.read("log").splitlines()[0])["version"] == 4 + missed
        # (not the HEADs: the upkeep thread looks at the store's config when its copy is 10 s old)
        asked[missed] = {kind: after[kind] - before[kind] for kind in ("gets", "lists")}
        tear_down(mnt, False)
    # a page, the LIST from the hint, the GET of the hint and of the newest piece; and the LIST of
    # the second .graphfs/stats open (a listing of every piece missed: 5 and 18 LISTs)
    assert asked[15] == asked[150] == {"gets": 2, "lists": 3}


def test_a_cold_mount_reads_the_feed_and_the_log_of_many_commits_sixteen_records_at_a_time(remote, remote_mounter,
                                                                                             tmp_path):
    # 40 commits, each record in the piece its commit appended: a mount on a host that never read
    # them asks for 16 at once (their roots, then their records: core/manifest_history.c
    # manifest_prefetch_commits) and renders what a mount reading them one by one renders
    bench = Path(GRAPHFS).parent / "graphfs-bench"
    subprocess.run([str(bench), "commits", remote, "40", "--tables", "4"], check=True, capture_output=True,
                   env={**os.environ, "GRAPHFS_CACHE_DIR": str(tmp_path / "writer")})
    seen = {}
    for name, width in (("parallel", "16"), ("one by one", "0")):
        m = remote_mounter(remote, env={"GRAPHFS_CACHE_DIR": str(tmp_path / f"cold-{width}"),
                                        "GRAPHFS_S3_PREFETCH": width})
        before = json.loads(m.read(".graphfs", "stats"))["object_store"]
        seen[name] = (m.read(".graphfs", "feed"), m.read("log"))
        after = json.loads(m.read(".graphfs", "stats"))["object_store"]
        seen[name] += (after["prefetch_rounds"] - before["prefetch_rounds"],)
    assert seen["parallel"][:2] == seen["one by one"][:2]
    assert [json.loads(line)["version"] for line in seen["parallel"][0].splitlines()] == list(range(1, 41))
    assert seen["parallel"][2] >= 4 and seen["one by one"][2] == 0
