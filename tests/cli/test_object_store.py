"""A store in an S3-compatible object store (s3://BUCKET/PREFIX): commits are conditional creates;
processes sharing a host cache (GRAPHFS_CACHE_DIR) are one host, whose writers take turns. Runs against the object store tools/test starts (tools/objectstore),
whose environment (AWS_*, GRAPHFS_TEST_BUCKET) it inherits; skipped without one."""
import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from conftest import jsonl
from tier import SANITIZED, quieter_leak_checks

pytestmark = pytest.mark.skipif(not os.environ.get("GRAPHFS_TEST_BUCKET"),
                                reason="no object store (tools/test starts one: tools/objectstore)")


@pytest.fixture
def remote(cli):
    """A fresh s3:// store under a prefix of its own."""
    location = f"s3://{os.environ['GRAPHFS_TEST_BUCKET']}/cli-{uuid.uuid4().hex[:12]}"
    cli.ok("init", location)
    return location


def key_url(location, key):
    bucket, _, prefix = location[len("s3://"):].partition("/")
    return f"{os.environ['AWS_ENDPOINT_URL']}/{bucket}/{prefix}/{key}"


def curl(*args, data=None):
    """An S3 request signed by curl itself (the same SigV4 as the client, not our code)."""
    argv = ["curl", "-sS", "-f", "--aws-sigv4", f"aws:amz:{os.environ['AWS_REGION']}:s3",
            "--user", f"{os.environ['AWS_ACCESS_KEY_ID']}:{os.environ['AWS_SECRET_ACCESS_KEY']}",
            "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", *args]
    return subprocess.run(argv, input=data, capture_output=True, check=True).stdout


def linear(log_lines):
    entries = [json.loads(line) for line in log_lines]
    return all(newer["parents"] == [older["commit"]] for newer, older in zip(entries, entries[1:]))


def test_a_store_in_an_object_store_commits_and_reads_back_like_a_local_one(cli, remote):
    cli.import_rows(remote, "Person", [{"id": "ada", "name": "Ada"}])
    cli.import_rows(remote, "Person", [{"id": "bob", "name": "Bob"}], mode="merge")
    assert cli.export(remote, "Person") == jsonl([{"id": "ada", "name": "Ada"}, {"id": "bob", "name": "Bob"}])
    assert cli.export(remote, "Person", at="1") == jsonl([{"id": "ada", "name": "Ada"}])
    log = cli.ok("log", remote).stdout.decode().splitlines()
    assert [json.loads(line)["version"] for line in log] == [2, 1]
    assert json.loads(cli.ok("stats", remote).stdout)["store"]["version"] == 2
    assert "clean (version 2)" in cli.ok("verify", remote).stdout.decode()


def test_an_init_over_an_existing_store_is_refused(cli, remote):
    error = cli.fail("init", remote)
    assert "exists and is not empty" in error


def test_writers_in_two_processes_at_once_make_one_linear_history(cli, remote, tmp_path):
    # each process is a "host" of its own (a host cache of its own): its own view, racing the
    # other for the same next offset
    row = cli.write_file('{"id":"r","value":1}\n')
    processes = [subprocess.Popen(["/bin/sh", "-c", f'for i in $(seq 12); do "{cli.binary}" import {remote} {table} {row} '
                                   f'--mode merge >/dev/null || exit 1; done'], stderr=subprocess.PIPE,
                                  env={**os.environ, "GRAPHFS_CACHE_DIR": str(tmp_path / f"host-{table}")})
                 for table in ("A", "B")]
    for process in processes:
        _, error = process.communicate(timeout=300)
        assert process.returncode == 0, error
    log = cli.ok("log", remote).stdout.decode().splitlines()
    assert len(log) == 24
    assert linear(log)
    assert "clean (version 24)" in cli.ok("verify", remote).stdout.decode()


def test_a_damaged_object_is_found_and_never_read_as_data(cli, remote):
    cli.import_rows(remote, "Person", [{"id": "ada", "name": "Ada"}])
    # the piece holding version 1's tail: flip a byte in it, in the object store itself
    bucket, _, prefix = remote[len("s3://"):].partition("/")
    listing = curl(f"{os.environ['AWS_ENDPOINT_URL']}/{bucket}?list-type=2&prefix={prefix}%2Fmanifest%2F").decode()
    keys = [part.split("</Key>")[0] for part in listing.split("<Key>")[1:]]
    tail = keys[-1].rsplit("/", 1)[1]
    body = bytearray(curl(key_url(remote, f"manifest/{tail}")))
    body[40] ^= 0x01
    curl("-X", "PUT", "--data-binary", "@-", key_url(remote, f"manifest/{tail}"), data=bytes(body))
    result = cli.run("verify", remote)
    assert result.returncode != 0
    result = cli.run("export", remote, "Person")   # the flipped byte may lie off its path: then the rows are right
    assert result.returncode != 0 or result.stdout.decode() == jsonl([{"id": "ada", "name": "Ada"}])


def big_rows(count):
    return [{"id": f"r{i:07}", "name": "x" * 40} for i in range(count)]


def listed(location, prefix):
    bucket, _, store = location[len("s3://"):].partition("/")
    listing = curl(f"{os.environ['AWS_ENDPOINT_URL']}/{bucket}?list-type=2&prefix={store}%2F{prefix}%2F").decode()
    return [part.split("</Key>")[0].rsplit("/", 1)[1] for part in listing.split("<Key>")[1:]]


def listed_sizes(location, prefix):
    """(name, size) of every object under prefix/."""
    bucket, _, store = location[len("s3://"):].partition("/")
    listing = curl(f"{os.environ['AWS_ENDPOINT_URL']}/{bucket}?list-type=2&prefix={store}%2F{prefix}%2F").decode()
    return [(part.split("</Key>")[0].rsplit("/", 1)[1], int(part.split("<Size>")[1].split("</Size>")[0]))
            for part in listing.split("<Key>")[1:]]


def test_a_commit_larger_than_4_mib_writes_a_segment_object_and_reads_back(cli, remote):
    rows = big_rows(100000)   # 7 MiB of lines: the stage spills into a segment
    cli.import_rows(remote, "Big", rows)
    assert cli.export(remote, "Big") == jsonl(rows)
    assert len(listed(remote, "segments")) == 1
    assert listed(remote, "recovery") == []   # the sidecar and its lease are gone once committed
    assert "clean (version 1)" in cli.ok("verify", remote).stdout.decode()


def test_a_segment_larger_than_8_mib_is_written_from_a_local_spill_file_and_reads_back(cli, remote):
    # what a writer stores whole goes to an unnamed file in $TMPDIR beyond 8 MiB (io_remote.c invariant 3)
    rows = [{"id": f"r{i:07}", "v": os.urandom(48).hex()} for i in range(200000)]   # 23 MiB, half of it entropy
    cli.import_rows(remote, "Random", rows)
    bucket, _, prefix = remote[len("s3://"):].partition("/")
    listing = curl(f"{os.environ['AWS_ENDPOINT_URL']}/{bucket}?list-type=2&prefix={prefix}%2Fsegments%2F").decode()
    sizes = [int(part.split("</Size>")[0]) for part in listing.split("<Size>")[1:]]
    assert max(sizes) > 8 << 20   # so it was spilled
    assert cli.export(remote, "Random") == jsonl(rows)
    assert "clean (version 1)" in cli.ok("verify", remote).stdout.decode()


def test_a_writer_that_died_before_publishing_is_rolled_back_once_its_lease_expires(cli, remote, tmp_path):
    source = cli.write_file(jsonl(big_rows(100000)))
    short = {"GRAPHFS_LEASE_SECONDS": "1"}
    died = cli.run("import", remote, "Big", source, env={"GRAPHFS_FAILPOINT": "segment.after_fsync=crash", **short})
    assert died.returncode == 86
    assert len(listed(remote, "segments")) == 1
    assert sorted(listed(remote, "recovery"))[1].endswith(".lease")   # the sidecar, and its lease
    time.sleep(1.5)   # the lease is not renewed by a dead writer
    cli.import_rows(remote, "Small", [{"id": "a"}])   # a read-write open recovers
    assert listed(remote, "segments") == [] and listed(remote, "recovery") == []
    assert cli.run("export", remote, "Big").returncode != 0
    assert "clean (version 1)" in cli.ok("verify", remote).stdout.decode()


def test_verify_right_after_a_killed_import_is_clean_and_notes_the_dead_writer(cli, remote):
    source = cli.write_file(jsonl(big_rows(100000)))
    died = cli.run("import", remote, "Big", source, env={"GRAPHFS_FAILPOINT": "segment.after_fsync=crash",
                                                         "GRAPHFS_LEASE_SECONDS": "60"})
    assert died.returncode == 86
    result = cli.ok("verify", remote)   # its sidecar and lease are recovery's work, not damage
    assert "clean (version 0)" in result.stdout.decode()
    assert b"note: the writer (pid" in result.stderr


def test_a_live_writers_sidecar_is_left_alone_by_another_hosts_recovery(cli, remote):
    source = cli.write_file(jsonl(big_rows(100000)))
    died = cli.run("import", remote, "Big", source, env={"GRAPHFS_FAILPOINT": "segment.after_fsync=crash",
                                                         "GRAPHFS_LEASE_SECONDS": "60"})
    assert died.returncode == 86
    cli.import_rows(remote, "Small", [{"id": "a"}])   # the lease has a minute to run: not judged
    assert len(listed(remote, "segments")) == 1


def test_a_snapshot_into_an_object_store_is_refused_and_says_what_to_do(cli, remote, tmp_path):
    local = tmp_path / "local"
    cli.ok("init", local)
    error = cli.fail("snapshot", local, f"{remote}-copy")
    assert "not supported on stores in an object store (s3://) yet" in error, error
    assert "graphfs dump STORE | graphfs load OTHER -" in error


def test_a_snapshot_of_an_object_store_keeps_its_addresses_and_says_so_in_its_header(cli, remote, tmp_path):
    for i in range(3):   # three pieces: two granule gaps
        cli.import_rows(remote, "P", [{"id": f"p{i}"}], mode="merge")
    cli.ok("snapshot", remote, tmp_path / "snap")
    manifest = (tmp_path / "snap" / "manifest").read_bytes()
    assert int.from_bytes(manifest[56:60], "little") == 65536   # docs/FORMAT.md §2
    assert len(manifest) > 2 * 65536   # the last piece sits at its own granule, as in the object store
    assert "clean (version 3)" in cli.ok("verify", tmp_path / "snap").stdout.decode()
    assert cli.export(tmp_path / "snap", "P") == cli.export(remote, "P")


def test_a_restore_that_died_is_completed_by_the_next_open_once_its_lease_expires(cli, remote, tmp_path):
    cli.import_rows(remote, "P", [{"id": "a"}])
    cli.ok("snapshot", remote, tmp_path / "snap")
    then = cli.export(remote, "P")
    cli.import_rows(remote, "P", [{"id": "b"}], mode="merge")
    short = {"GRAPHFS_LEASE_SECONDS": "1"}
    died = cli.run("restore", remote, tmp_path / "snap", "--confirm",
                   env={"GRAPHFS_FAILPOINT": "restore.after_marker=crash", **short})
    assert died.returncode == 86
    assert listed(remote, "leases") == ["restore"]   # the marker: a lease naming the snapshot
    assert cli.export(remote, "P") != then           # nothing restored yet
    time.sleep(1.5)   # a dead restorer does not renew it
    cli.ok("branch", remote, "create", "later")      # a read-write open completes the restore
    assert cli.export(remote, "P") == then
    assert listed(remote, "leases") == []


def test_a_restore_whose_restorer_is_alive_is_left_alone_by_another_open(cli, remote, tmp_path):
    cli.import_rows(remote, "P", [{"id": "a"}])
    cli.ok("snapshot", remote, tmp_path / "snap")
    cli.import_rows(remote, "P", [{"id": "b"}], mode="merge")
    now = cli.export(remote, "P")
    died = cli.run("restore", remote, tmp_path / "snap", "--confirm",
                   env={"GRAPHFS_FAILPOINT": "restore.after_marker=crash", "GRAPHFS_LEASE_SECONDS": "60"})
    assert died.returncode == 86
    cli.ok("branch", remote, "create", "later")   # the lease has a minute to run: not taken over
    assert cli.export(remote, "P") == now
    assert "another process is restoring" in cli.fail("restore", remote, tmp_path / "snap", "--confirm")


def test_gc_is_refused_while_a_snapshot_holds_the_gc_lease(cli, remote, tmp_path):
    cli.import_rows(remote, "P", [{"id": "a"}])
    held = cli.run("snapshot", remote, tmp_path / "snap",
                   env={"GRAPHFS_FAILPOINT": "snapshot.after_segments=crash", "GRAPHFS_LEASE_SECONDS": "60"})
    assert held.returncode == 86   # died holding the gc lease: it runs out in a minute, not now
    error = cli.fail("gc", remote, "--keep-versions", "1")
    assert "a snapshot or a restore is running" in error, error


def test_a_graph_moves_between_a_directory_and_an_object_store_by_dump_and_load(cli, remote, tmp_path):
    cli.import_rows(remote, "Person", [{"id": "ada", "name": "Ada"}, {"id": "bob", "name": "Bob"}])
    local = tmp_path / "local"
    cli.ok("init", local)
    dumped = cli.ok("dump", remote).stdout
    cli.ok("load", local, "-", input=dumped)
    again = f"{remote}-again"
    cli.ok("init", again)
    cli.ok("load", again, "-", input=cli.ok("dump", local).stdout)
    assert cli.ok("dump", again).stdout == dumped


def test_a_missing_credential_is_named_before_anything_is_sent(cli, tmp_path):
    location = f"s3://{os.environ['GRAPHFS_TEST_BUCKET']}/cli-{uuid.uuid4().hex[:12]}"
    error = cli.fail("init", location, env={"AWS_SECRET_ACCESS_KEY": ""})
    assert "AWS_SECRET_ACCESS_KEY" in error


def test_branches_tags_and_merges_work_on_an_object_store(cli, remote):
    cli.import_rows(remote, "Person", [{"id": "ada", "name": "Ada"}])
    cli.ok("branch", remote, "create", "dev")
    cli.import_rows(remote, "Person", [{"id": "bob", "name": "Bob"}], mode="merge", branch="dev")
    cli.ok("tag", remote, "create", "v1")
    cli.ok("merge", remote, "dev")
    assert cli.export(remote, "Person") == jsonl([{"id": "ada", "name": "Ada"}, {"id": "bob", "name": "Bob"}])
    assert "clean (version 3)" in cli.ok("verify", remote).stdout.decode()


def object_store_requests(cli, tmp_path, *args, env=None):
    """What one command sent to the object store (GRAPHFS_IO_REPORT: the process's own counters)."""
    report = tmp_path / f"io-{uuid.uuid4().hex[:8]}.jsonl"
    cli.ok(*args, env={"GRAPHFS_IO_REPORT": str(report), **(env or {})})
    return json.loads(report.read_text().splitlines()[-1])["object_store"]


def test_a_one_row_commit_stores_two_objects_its_piece_and_a_meta_slot(cli, remote, tmp_path):
    cli.import_rows(remote, "Person", [{"id": "ada", "name": "Ada"}])
    row = cli.write_file('{"id":"bob","name":"Bob"}\n')
    sent = object_store_requests(cli, tmp_path, "import", remote, "Person", row, "--mode", "merge")
    assert (sent["puts"], sent["deletes"]) == (2, 0)


def store_with_history(cli, commits):
    """A fresh s3:// store with `commits` one-row commits to T00, T01, T02 in turn (from one
    process: graphfs-bench commits)."""
    location = f"s3://{os.environ['GRAPHFS_TEST_BUCKET']}/cli-{uuid.uuid4().hex[:12]}"
    cli.ok("init", location)
    cli.commits(location, commits, tables=3, prefix="T")
    return location


def test_a_cold_open_asks_the_same_requests_however_long_the_history(cli, tmp_path):
    # listings of 4 keys a page: a listing of every piece would take 5 pages at 15 commits, 13 at 48;
    # both histories end the same way (T00, T01, T02 written in turn), so the same blocks are read
    page = {"GRAPHFS_S3_LIST_PAGE": "4"}
    asked = {}
    for commits in (15, 48):
        location = store_with_history(cli, commits)
        cold = {"GRAPHFS_CACHE_DIR": str(tmp_path / f"cold-{commits}"),   # a host that never read it
                "GRAPHFS_S3_REFRESH_MS": "600000"}   # and no second LIST on a slow machine
        sent = object_store_requests(cli, tmp_path, "export", location, "T00", env={**page, **cold})
        assert sent["cache_hits"] == 0
        asked[commits] = (sent["gets"], sent["heads"], sent["lists"])
    assert asked[15] == asked[48]
    assert asked[48][2] <= 3   # the manifest's recent pieces, packs/, recovery/


def test_a_cold_read_of_a_table_of_many_commits_fetches_its_fragments_sixteen_at_a_time(cli, tmp_path):
    # 40 one-row commits of new rows: 40 fragments, each in the piece its commit appended; a cold
    # reader asks for 16 at once (io_pieced.c invariant 6): 3 rounds instead of 40 sequential GETs,
    # and not one GET more than reading them one by one (GRAPHFS_S3_PREFETCH=0), also when a
    # prefetch GET fails (the read fetches that fragment itself)
    # (a store of format 7: format 8 would compact the 40 fragments into one, core/table_compact.c)
    location = f"s3://{os.environ['GRAPHFS_TEST_BUCKET']}/cli-{uuid.uuid4().hex[:12]}"
    cli.ok("init", location, "--format", "7")
    cli.commits(location, 40, distinct=True)
    sent, rows = {}, {}
    for name, extra in (("parallel", {}), ("one by one", {"GRAPHFS_S3_PREFETCH": "0"}),
                        ("one failing", {"GRAPHFS_FAILPOINT": "object_store.prefetch=error@5"})):
        cold = {"GRAPHFS_CACHE_DIR": str(tmp_path / f"cold-{len(sent)}"), "GRAPHFS_S3_REFRESH_MS": "600000"}
        report = tmp_path / f"io-{len(sent)}.jsonl"
        rows[name] = cli.ok("export", location, "T00", env={"GRAPHFS_IO_REPORT": str(report), **cold, **extra}).stdout
        sent[name] = json.loads(report.read_text().splitlines()[-1])["object_store"]
    assert len(rows["parallel"].splitlines()) == 40
    assert rows["parallel"] == rows["one by one"] == rows["one failing"]
    assert sent["parallel"]["gets"] == sent["one by one"]["gets"] == sent["one failing"]["gets"]
    assert sent["parallel"]["prefetch_gets"] >= 38 and sent["parallel"]["prefetch_rounds"] == 3
    assert sent["one failing"]["prefetch_gets"] == sent["parallel"]["prefetch_gets"] - 1
    assert sent["one by one"]["prefetch_gets"] == sent["one by one"]["prefetch_rounds"] == 0


def test_a_writer_that_lost_the_race_learns_the_winners_piece_with_one_get_and_no_listing(cli, tmp_path):
    # a long-lived writer (graphfs-bench serve) commits, then another process commits, then the
    # writer commits again on what it knew: its conditional create finds the offset taken, one GET
    # of the winner's piece tells it the new end and brings the root it builds on, and it wins the
    # retry (io_pieced.c invariant 7)
    location = f"s3://{os.environ['GRAPHFS_TEST_BUCKET']}/cli-{uuid.uuid4().hex[:12]}"
    cli.ok("init", location)
    bench = Path(cli.binary).parent / "graphfs-bench"
    quiet = {**quieter_leak_checks(dict(os.environ), cli.leak_checked), "GRAPHFS_S3_REFRESH_MS": "600000",
             "GRAPHFS_CACHE_DIR": str(tmp_path / "writer")}
    writer = subprocess.Popen([str(bench), "serve", location, "--tables", "1", "--prefix", "S"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=quiet)
    try:
        writer.stdin.write(b"commit\n")
        writer.stdin.flush()
        assert writer.stdout.readline().startswith(b"ok 1 ")
        cli.import_rows(location, "Person", [{"id": "ada"}])   # version 2, from another process
        writer.stdin.write(b"commit\n")
        writer.stdin.flush()
        assert writer.stdout.readline().startswith(b"ok 3 ")
        output, _ = writer.communicate(timeout=60)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    stats = json.loads(output)
    sent = {kind: stats["stats_after"]["object_store"][kind] - stats["stats_before"]["object_store"][kind]
            for kind in ("puts", "gets", "lists")}
    # the same two commits without the other process send 4 PUTs (a piece and a meta slot each),
    # 1 GET and no LIST; the lost race adds the create that lost and one GET, the winner's piece
    assert sent == {"puts": 5, "gets": 2, "lists": 0}
    assert [line["version"] for line in cli.log(location)] == [3, 2, 1]


def test_a_cold_read_of_every_head_receives_the_same_bytes_however_long_the_history(cli, tmp_path):
    # the newest tail's version index leaf holds 15 entries in one store and 48 in the other (and
    # every tail's commit record names its version): a cold `heads` fetches the newest piece from
    # its state part on and older ones from the block read on, so not one byte differs
    received = {}
    for commits in (15, 48):
        location = store_with_history(cli, commits)
        cold = {"GRAPHFS_CACHE_DIR": str(tmp_path / f"cold-{commits}"), "GRAPHFS_S3_REFRESH_MS": "600000"}
        sent = object_store_requests(cli, tmp_path, "heads", location, env=cold)
        received[commits] = (sent["gets"], sent["heads"], sent["lists"], sent["bytes_received"])
    assert received[15] == received[48]


def test_every_version_reads_back_across_the_pieces_of_a_long_history(cli, remote):
    # each tail is an object of its own starting at a multiple of 64 KiB (FORMAT.md §23)
    for i in range(12):
        cli.import_rows(remote, "Person", [{"id": f"p{i:02}", "name": str(i)}], mode="merge")
    for version in (1, 5, 12):
        rows = [{"id": f"p{i:02}", "name": str(i)} for i in range(version)]
        assert cli.export(remote, "Person", at=str(version)) == jsonl(rows)
    assert "clean (version 12)" in cli.ok("verify", remote).stdout.decode()
    assert json.loads(cli.ok("stats", remote).stdout)["store"]["manifest_end"] >= 12 * 65536


def test_branches_and_tags_made_while_another_host_commits_all_land(cli, remote):
    # a branch or tag publish that loses the race for the next piece is built again, like a commit
    cli.import_rows(remote, "A", [{"id": "r", "value": 0}])
    row = cli.write_file('{"id":"r","value":1}\n')
    writer = subprocess.Popen(["/bin/sh", "-c", f'for i in $(seq 15); do "{cli.binary}" import {remote} A {row} '
                               f'--mode merge >/dev/null || exit 1; done'], stderr=subprocess.PIPE)
    namer = subprocess.Popen(["/bin/sh", "-c", f'for i in $(seq 8); do "{cli.binary}" branch {remote} create b$i >/dev/null '
                              f'&& "{cli.binary}" tag {remote} create t$i >/dev/null || exit 1; done'],
                             stderr=subprocess.PIPE)
    for process in (writer, namer):
        _, error = process.communicate(timeout=300)
        assert process.returncode == 0, error
    branches = cli.ok("branch", remote, "list").stdout.decode()
    assert all(f"b{i}" in branches for i in range(1, 9))
    tags = cli.ok("tag", remote, "list").stdout.decode()
    assert all(f"t{i}" in tags for i in range(1, 9))
    assert "clean (version 16)" in cli.ok("verify", remote).stdout.decode()


@pytest.mark.parametrize("failpoint", ["object_store.before_request=crash", "object_store.after_put=crash",
                                       "object_store.before_request=error"])
def test_a_commit_stopped_at_any_request_leaves_the_store_before_or_after_it(cli, remote, tmp_path, failpoint):
    # the crash matrix of the backend: every request of a one-row commit, in turn
    cli.import_rows(remote, "Person", [{"id": "p0", "name": "0"}])
    probe = cli.write_file('{"id":"probe","name":"x"}\n')
    sent = object_store_requests(cli, tmp_path, "import", remote, "Person", probe, "--mode", "merge")
    requests = sum(sent[kind] for kind in ("gets", "puts", "heads", "deletes", "lists"))
    kind = "puts" if "after_put" in failpoint else None
    hits = sent["puts"] if kind else requests
    rows = [{"id": "p0", "name": "0"}, {"id": "probe", "name": "x"}]
    outcomes = set()
    # every request in the normal build; under ASan, where each of a request's three launches costs
    # four times as much, every other one (and every one past the end)
    stops = [n for n in range(1, hits + 3) if not SANITIZED or n % 2 == 1 or n > hits]
    for n in stops:   # and past the end: a crash after the commit point, then none
        row = {"id": f"q{n:02}", "name": failpoint}   # sorts after the rows before it
        source = cli.write_file(json.dumps(row) + "\n")
        result = cli.run("import", remote, "Person", source, "--mode", "merge", env={"GRAPHFS_FAILPOINT": f"{failpoint}@{n}"})
        assert result.returncode in (0, 1, 86), result.stderr
        after = cli.export(remote, "Person")
        assert after in (jsonl(rows), jsonl(rows + [row])), f"request {n}: {after}"
        if after == jsonl(rows + [row]):
            rows.append(row)
            outcomes.add("after")
        else:
            outcomes.add("before")
            assert result.returncode != 0   # a command that says it committed did
        assert "clean" in cli.ok("verify", remote).stdout.decode(), f"request {n}"
    # and the store goes on: the next commit works
    cli.import_rows(remote, "Person", [{"id": "zz", "name": "last"}], mode="merge")
    assert cli.export(remote, "Person").endswith('{"id":"zz","name":"last"}\n')
    # a crash before the piece's create leaves the store before, from it on after; an error is
    # either (the piece's create is not repeated: its outcome is unknown, so the command fails)
    if failpoint == "object_store.after_put=crash":
        assert outcomes == {"after"}   # the first object a commit stores is its piece: the commit point
    elif "crash" in failpoint:
        assert outcomes == {"before", "after"}


@pytest.mark.serial   # stops the object store every other test uses
@pytest.mark.skipif(not os.environ.get("GRAPHFS_OBJECTSTORE_DIR"),
                    reason="restarting the gateway needs the object store of tools/objectstore")
def test_a_gateway_restarted_while_commits_run_loses_nothing_acknowledged(cli, remote):
    # radosgw killed (-9) and started again in the middle of a run of commits: each commit either
    # says it failed or is there; nothing half-made is visible; the next commit works. (meson runs
    # this test alone (the serial mark), so no other test uses the gateway meanwhile.)
    cli.import_rows(remote, "Person", [{"id": "p000"}])
    sources = [cli.write_file(f'{{"id":"q{i:03}"}}\n') for i in range(80)]
    script = "; ".join(f'"{cli.binary}" import {remote} Person {source} --mode merge >/dev/null 2>>"{source}.err"; '
                       f'echo "{i} $?"' for i, source in enumerate(sources))
    writer = subprocess.Popen(["/bin/sh", "-c", script], stdout=subprocess.PIPE, text=True)
    time.sleep(0.4)
    repository = Path(__file__).resolve().parents[2]
    subprocess.run([repository / "tools" / "objectstore", "restart-gateway", os.environ["GRAPHFS_OBJECTSTORE_DIR"]],
                   check=True, capture_output=True, timeout=120)
    output, _ = writer.communicate(timeout=600)
    statuses = dict(tuple(map(int, line.split())) for line in output.splitlines())
    assert len(statuses) == 80
    exported = cli.export(remote, "Person")
    failed = [i for i, status in statuses.items() if status != 0]
    for i, status in statuses.items():
        if status == 0:
            assert f'"q{i:03}"' in exported, f"commit {i} was acknowledged and is gone"
    for i in failed:
        error = Path(f"{sources[i]}.err").read_text()
        assert error.startswith("graphfs: ") and error.count("\n") == 1, error
    assert "clean" in cli.ok("verify", remote).stdout.decode()
    cli.import_rows(remote, "Person", [{"id": "zzz"}], mode="merge")
    assert cli.export(remote, "Person").endswith('{"id":"zzz"}\n')


@pytest.mark.serial   # stops the object store every other test uses
@pytest.mark.skipif(not os.environ.get("GRAPHFS_OBJECTSTORE_DIR"),
                    reason="stopping the gateway needs the object store of tools/objectstore")
def test_a_commit_while_the_gateway_is_down_fails_in_one_line_and_leaves_nothing(cli, remote):
    # the deterministic half of the restart: the gateway is gone for the whole commit
    cli.import_rows(remote, "Person", [{"id": "a"}])
    tool = Path(__file__).resolve().parents[2] / "tools" / "objectstore"
    directory = os.environ["GRAPHFS_OBJECTSTORE_DIR"]
    source = cli.write_file('{"id":"b"}\n')
    subprocess.run([tool, "stop-gateway", directory], check=True, capture_output=True, timeout=120)
    try:
        result = cli.run("import", remote, "Person", source, "--mode", "merge")
    finally:
        subprocess.run([tool, "start-gateway", directory], check=True, capture_output=True, timeout=120)
    assert result.returncode == 1
    error = result.stderr.decode()
    assert error.startswith("graphfs: ") and error.count("\n") == 1 and os.environ["AWS_ENDPOINT_URL"] in error, error
    assert cli.export(remote, "Person") == jsonl([{"id": "a"}])
    cli.import_rows(remote, "Person", [{"id": "c"}], mode="merge")
    assert cli.export(remote, "Person") == jsonl([{"id": "a"}, {"id": "c"}])
    assert "clean (version 2)" in cli.ok("verify", remote).stdout.decode()


def test_writers_on_two_hosts_killed_at_random_lose_no_acknowledged_commit(cli, remote, tmp_path):
    # kill -9 at random instants of commits from two "hosts" at once: every commit a writer saw
    # acknowledged is there, the history is one line, verify is clean
    import random
    import threading
    cli.import_rows(remote, "A", [{"id": "a000"}])
    cli.import_rows(remote, "B", [{"id": "b000"}])
    acknowledged = {"A": [], "B": []}
    randomness = random.Random(7)

    def host(table):
        cache = {**os.environ, "GRAPHFS_CACHE_DIR": str(tmp_path / f"host-{table}")}   # a host of its own
        for i in range(1, 26):
            source = cli.write_file(f'{{"id":"{table.lower()}{i:03}"}}\n')
            process = subprocess.Popen([cli.binary, "import", remote, table, str(source), "--mode", "merge"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=cache)
            if randomness.random() < 0.5:
                time.sleep(randomness.uniform(0, 0.03))
                process.kill()
            if process.wait() == 0:
                acknowledged[table].append(f"{table.lower()}{i:03}")

    threads = [threading.Thread(target=host, args=(table,)) for table in ("A", "B")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for table, ids in acknowledged.items():
        exported = cli.export(remote, table)
        for row_id in ids:
            assert f'"{row_id}"' in exported, f"{row_id} was acknowledged and is gone"
    assert acknowledged["A"] and acknowledged["B"]
    log = cli.ok("log", remote).stdout.decode().splitlines()
    assert linear(log)
    assert "clean" in cli.ok("verify", remote).stdout.decode()


def test_gc_on_an_object_store_packs_what_it_keeps_and_removes_the_pieces(cli, remote):
    for i in range(30):
        cli.import_rows(remote, f"T{i % 3}", [{"id": f"r{i:02}", "v": i}], mode="merge")
    before = len(listed(remote, "manifest"))
    out = cli.ok("gc", remote, "--keep-versions", "5").stdout.decode()
    assert "reclaimed versions 1..25" in out
    assert len(listed(remote, "manifest")) < before / 5
    assert len(listed(remote, "packs")) == 1
    assert cli.export(remote, "T0", at="27") == jsonl([{"id": f"r{i:02}", "v": i} for i in range(0, 27, 3)])
    assert "reclaimed by gc" in cli.fail("export", remote, "T0", "--at", "3")
    assert "clean (version 30)" in cli.ok("verify", remote).stdout.decode()
    cli.import_rows(remote, "T0", [{"id": "after", "v": 99}], mode="merge")   # and commits go on
    assert "clean (version 31)" in cli.ok("verify", remote).stdout.decode()


def test_a_gc_another_host_runs_makes_this_one_wait_until_its_lease_expires(cli, remote):
    cli.import_rows(remote, "T", [{"id": "a"}])
    far = int((time.time() + 60) * 1e6)
    curl("-X", "PUT", "--data-binary", "@-", key_url(remote, "leases/gc"), data=f"gc 1\nexpires {far}\n".encode())
    assert "another gc" in cli.fail("gc", remote, "--keep-versions", "1")
    past = int((time.time() - 1) * 1e6)
    curl("-X", "PUT", "--data-binary", "@-", key_url(remote, "leases/gc"), data=f"gc 1\nexpires {past}\n".encode())
    cli.ok("gc", remote, "--keep-versions", "1")   # a dead host's gc lease is taken over
    assert listed(remote, "leases") == []


def test_four_writers_racing_without_pause_all_land(cli, remote, tmp_path):
    # long-lived writers on four hosts committing back to back: a loser refreshes from the newest
    # piece only and retries at once, so none is starved out (64 lost races in a row used to
    # refuse a commit)
    driver = Path(cli.binary).parent / "graphfs-bench"
    writers = [subprocess.Popen([driver, "commits", remote, "60", "--tables", "1", "--prefix", f"W{w}_"],
                                env={**os.environ, "GRAPHFS_CACHE_DIR": str(tmp_path / f"host-{w}")},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE) for w in range(4)]
    for writer in writers:
        _, error = writer.communicate(timeout=600)
        assert writer.returncode == 0, error
    assert json.loads(cli.ok("stats", remote).stdout)["store"]["version"] == 240
    log = cli.ok("log", remote).stdout.decode().splitlines()
    assert len(log) == 240 and linear(log)


def test_writers_of_one_host_take_turns_and_never_lose_a_race(cli, remote, tmp_path):
    # two long-lived writers sharing a host cache: the host's lock makes them take turns, and each
    # learns the other's pieces from the host cache, so no conditional create ever finds its
    # offset taken and no GET fetches a winner's piece (io_remote.c invariant 4, io_pieced.c 8)
    driver = Path(cli.binary).parent / "graphfs-bench"
    host = {**os.environ, "GRAPHFS_CACHE_DIR": str(tmp_path / "host"),
            "GRAPHFS_S3_REFRESH_MS": "600000"}   # no listing: what the other commits, only the host cache tells
    cli.ok("import", remote, "Warm", cli.write_file('{"id":"w"}\n'), env=host)   # the newest piece, on the host
    writers = [subprocess.Popen([driver, "commits", remote, "30", "--tables", "1", "--prefix", f"W{w}_"], env=host,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE) for w in range(2)]
    sent = []
    for writer in writers:
        output, error = writer.communicate(timeout=600)
        assert writer.returncode == 0, error
        stats = json.loads(output)
        sent.append({kind: stats["stats_after"]["object_store"][kind] - stats["stats_before"]["object_store"][kind]
                     for kind in ("puts", "gets", "lists")})
    # alone, a one-row commit sends two PUTs (its piece and a meta slot), and nothing is read: each
    # piece the commits build on is in the host cache
    assert sent == [{"puts": 60, "gets": 0, "lists": 0}, {"puts": 60, "gets": 0, "lists": 0}]
    log = cli.ok("log", remote).stdout.decode().splitlines()
    assert len(log) == 61 and linear(log)
    assert "clean (version 61)" in cli.ok("verify", remote).stdout.decode()


def test_a_copy_of_a_store_at_another_prefix_shares_nothing_with_the_original_in_a_host_cache(cli, remote, tmp_path):
    # objects copied one by one make a second store with the same id; after the two diverge, a
    # piece at one start differs between them: a host keeps each store's pieces under its id and
    # its location (core/io_cache.c), so its readers and writers never take one store's for the other's
    cli.import_rows(remote, "P", [{"id": "a"}])
    bucket, _, prefix = remote[len("s3://"):].partition("/")
    copy = f"s3://{bucket}/cli-{uuid.uuid4().hex[:12]}"
    listing = curl(f"{os.environ['AWS_ENDPOINT_URL']}/{bucket}?list-type=2&prefix={prefix}%2F").decode()
    for key in [part.split("</Key>")[0] for part in listing.split("<Key>")[1:]]:
        name = key[len(prefix) + 1:]
        curl("-X", "PUT", "--data-binary", "@-", key_url(copy, name), data=curl(key_url(remote, name)))
    host, there = ({"GRAPHFS_CACHE_DIR": str(tmp_path / name)} for name in ("host", "there"))
    rows = {remote: [{"id": "a"}], copy: [{"id": "a"}]}
    for env, suffix in ((there, "read"), (host, "written")):   # another host's commits, then this one's
        for store, where in ((remote, "original"), (copy, "copy")):
            row = {"id": f"{where}-{suffix}"}
            cli.ok("import", store, "P", cli.write_file(jsonl([row])), "--mode", "merge", env=env)
            rows[store].append(row)
            for reader in (remote, copy):   # each store read on this host after each commit
                assert cli.ok("export", reader, "P", env=host).stdout.decode() == jsonl(rows[reader])
    for store in (remote, copy):
        assert "clean (version 3)" in cli.ok("verify", store).stdout.decode()


def test_a_second_process_on_the_same_host_reads_the_pieces_from_the_local_cache(cli, remote, tmp_path):
    for i in range(12):
        cli.import_rows(remote, f"T{i % 3}", [{"id": "r", "value": i}], mode="merge")
    cache = {"GRAPHFS_CACHE_DIR": str(tmp_path / "host-cache")}
    first = object_store_requests(cli, tmp_path, "export", remote, "T0", env=cache)
    second = object_store_requests(cli, tmp_path, "export", remote, "T0", env=cache)
    assert first["cache_hits"] == 0 and first["cache_stores"] > 0
    assert second["cache_hits"] == first["cache_stores"] and second["cache_stores"] == 0
    assert second["gets"] == first["gets"] - first["cache_stores"]   # each piece cached is one GET fewer
    assert second["bytes_received"] < first["bytes_received"]
    assert cli.export(remote, "T0") == cli.ok("export", remote, "T0", env=cache).stdout.decode()


def test_a_segment_larger_than_the_part_size_is_uploaded_in_parts_and_reads_back(cli, remote, tmp_path):
    rows = "".join(json.dumps({"id": f"r{i:06d}", "noise": os.urandom(48).hex()}, separators=(",", ":")) + "\n"
                   for i in range(200000))   # 25 MB, a segment of about 11 MB
    path = cli.write_file(rows)
    sent = object_store_requests(cli, tmp_path, "import", remote, "Big", path,
                                 env={"GRAPHFS_S3_PART_BYTES": str(5 << 20)})
    (segment, size), = listed_sizes(remote, "segments")
    parts = -(-size // (5 << 20))
    assert parts >= 2
    assert sent["puts"] >= parts + 2   # the upload's start, its parts and its completion, besides the pieces
    same = cli.ok("export", remote, "Big").stdout.decode() == rows   # (no diff of 25 MB on failure)
    assert same
    assert "clean (version 1)" in cli.ok("verify", remote).stdout.decode()


def test_a_second_process_on_the_same_host_reads_segment_chunks_from_the_local_cache(cli, remote, tmp_path):
    # rows that do not compress away: one segment of more than one 1 MiB chunk
    rows = "".join(json.dumps({"id": f"r{i:05d}", "noise": os.urandom(24).hex(), "pad": "x" * 120}) + "\n"
                   for i in range(45000))
    cli.import_rows(remote, "Big", rows)
    segments = [size for _, size in listed_sizes(remote, "segments")]
    assert len(segments) == 1 and (1 << 20) < segments[0] < (2 << 20)
    directory = tmp_path / "host-cache"
    cache = {"GRAPHFS_CACHE_DIR": str(directory)}
    first = object_store_requests(cli, tmp_path, "export", remote, "Big", env=cache)
    chunks = sorted(path.name for path in directory.rglob("segments-*"))
    assert len(chunks) == 2   # its two chunks, under the segment's name and offset
    second = object_store_requests(cli, tmp_path, "export", remote, "Big", env=cache)
    assert second["cache_hits"] == first["cache_stores"] and second["cache_stores"] == 0
    assert second["gets"] == first["gets"] - first["cache_stores"]
    assert second["bytes_received"] < first["bytes_received"] - segments[0]   # the segment came from disk
    same = cli.ok("export", remote, "Big", env=cache).stdout == cli.ok("export", remote, "Big").stdout
    assert same
    # a segment larger than an eighth of the cache's bound is not kept: one scan of it pushes nothing out
    small = tmp_path / "small-cache"
    cli.ok("export", remote, "Big", env={"GRAPHFS_CACHE_DIR": str(small), "GRAPHFS_CACHE_BYTES": "4M"})
    assert not list(small.rglob("segments-*")) and list(small.rglob("*"))   # (the pieces are)


def test_a_damaged_cache_entry_is_removed_and_read_again_from_the_object_store(cli, remote, tmp_path):
    for i in range(6):
        cli.import_rows(remote, "P", [{"id": f"p{i}"}], mode="merge")
    directory = tmp_path / "host-cache"
    cache = {"GRAPHFS_CACHE_DIR": str(directory)}
    expected = cli.ok("export", remote, "P", env=cache).stdout
    entries = sorted(path for path in directory.rglob("*") if path.is_file())
    assert entries
    for entry in entries:   # flip a byte of every cached piece
        data = bytearray(entry.read_bytes())
        data[-1] ^= 0xFF
        entry.write_bytes(bytes(data))
    # (an export: verify reads around the cache)
    sent = object_store_requests(cli, tmp_path, "export", remote, "P", env=cache)
    assert sent["cache_hits"] == 0 and sent["cache_stores"] > 0   # every entry failed its checksum: removed, fetched again
    assert cli.ok("export", remote, "P", env=cache).stdout == expected


def test_the_host_lock_file_is_never_evicted_with_the_cache(cli, remote, tmp_path):
    # twelve writers' pieces in a cache of 16 KiB: eviction runs, the lock file stays the same file
    host = tmp_path / "host"
    cache = {"GRAPHFS_CACHE_DIR": str(host), "GRAPHFS_CACHE_BYTES": str(16 << 10)}
    row = cli.write_file('{"id":"r","note":"' + "x" * 3000 + '"}\n')
    cli.ok("import", remote, "P", row, "--mode", "merge", env=cache)
    (lock,) = (host / "locks").iterdir()
    inode = lock.stat().st_ino
    for _ in range(12):
        cli.ok("import", remote, "P", row, "--mode", "merge", env=cache)
    assert [path.stat().st_ino for path in (host / "locks").iterdir()] == [inode]
    cached = sum(path.stat().st_size for path in host.rglob("*") if path.is_file() and path.parent.name != "locks")
    assert 0 < cached <= (16 << 10) + (2 << 10)


def test_the_local_cache_stays_within_its_bound_and_can_be_turned_off(cli, remote, tmp_path):
    cli.commits(remote, 60)   # 60 pieces (one process: graphfs-bench), far more than the bound holds
    directory = tmp_path / "host-cache"
    bound = 16 << 10
    cli.ok("log", remote, env={"GRAPHFS_CACHE_DIR": str(directory), "GRAPHFS_CACHE_BYTES": str(bound)})
    cli.ok("verify", remote, env={"GRAPHFS_CACHE_DIR": str(directory), "GRAPHFS_CACHE_BYTES": str(bound)})
    held = sum(path.stat().st_size for path in directory.rglob("*") if path.is_file())
    assert 0 < held <= bound + bound // 8   # looked at every eighth of the bound it stores
    off = tmp_path / "off"
    sent = object_store_requests(cli, tmp_path, "verify", remote,
                                 env={"GRAPHFS_CACHE_DIR": str(off), "GRAPHFS_CACHE_BYTES": "0"})
    assert sent["cache_stores"] == 0 and not off.exists()
