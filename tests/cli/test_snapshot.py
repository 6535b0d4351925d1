"""snapshot and restore: a consistent, self-contained copy of the whole store,
and a store brought back to one, as new commits."""
import json
import os
import re
import subprocess
import threading
from pathlib import Path

from conftest import jsonl, store_digest


def big_rows(count, tag="r"):
    return [{"id": f"{tag}{i}", "n": i} for i in range(count)]


def snapshot(cli, store, destination):
    output = cli.ok("snapshot", store, destination).stdout.decode()
    found = re.search(r"snapshot of version (\d+) .*?(\d+) segments? linked .*?, (\d+) copied", output)
    assert found, output
    return int(found.group(1)), int(found.group(2)), int(found.group(3))


def test_a_snapshot_taken_while_a_writer_commits_is_clean_and_equals_exactly_one_version(cli, store, tmp_path):
    cli.import_rows(store, "P", big_rows(300000))   # large enough to spill into a segment
    stop = threading.Event()
    sources = [cli.write_file(jsonl([{"id": f"w{i}", "n": i}])) for i in range(200)]

    def writer():
        for source in sources:
            if stop.is_set():
                break
            cli.run("import", store, "P", source, "--mode", "merge")

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        version, linked, copied = snapshot(cli, store, tmp_path / "snap")
    finally:
        stop.set()
        thread.join()
    copy = tmp_path / "snap"
    cli.ok("verify", copy)
    assert cli.log(copy)[0]["version"] == version
    assert cli.export(copy, "P") == cli.export(store, "P", at=str(version))
    assert linked + copied >= 1


def test_a_snapshot_stays_exactly_as_it_was_while_the_store_moves_on(cli, store, tmp_path):
    cli.import_rows(store, "P", big_rows(10))
    snapshot(cli, store, tmp_path / "snap")
    before = store_digest(tmp_path / "snap")
    cli.import_rows(store, "P", big_rows(5, "x"), mode="merge")
    cli.ok("branch", store, "create", "later")
    assert store_digest(tmp_path / "snap") == before


def test_a_snapshot_on_another_file_system_copies_instead_of_linking(cli, store, tmp_path):
    shm = Path("/dev/shm")   # tmpfs on Debian: another file system than the store's
    in_object_store = str(store).startswith("s3://")   # objects are always copied down
    elsewhere = in_object_store or (shm.is_dir() and shm.stat().st_dev != Path(store).stat().st_dev)
    destination = (shm if elsewhere else tmp_path) / f"graphfs-snapshot-test-{os.getpid()}"
    cli.import_rows(store, "P", big_rows(300000))
    try:
        version, linked, copied = snapshot(cli, store, destination)
        if elsewhere:
            assert linked == 0 and copied >= 1
        else:   # one file system only: the links are what is left to check
            assert linked >= 1 and copied == 0
        cli.ok("verify", destination)
        assert cli.export(destination, "P") == cli.export(store, "P")
    finally:
        subprocess.run(["rm", "-rf", str(destination)], check=False)


def test_a_snapshot_needs_a_new_directory(cli, store, tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    assert "not empty" in cli.fail("snapshot", store, tmp_path / "full")


def test_restore_brings_back_branches_and_tags_as_new_commits_and_never_lowers_the_version(cli, store, tmp_path):
    cli.import_rows(store, "P", big_rows(3))
    cli.ok("branch", store, "create", "exp")
    cli.import_rows(store, "P", big_rows(2, "e"), mode="merge", branch="exp")
    cli.ok("tag", store, "create", "keep")
    snapshot(cli, store, tmp_path / "snap")
    main_then, exp_then = cli.export(store, "P"), cli.export(store, "P", branch="exp")
    cli.import_rows(store, "P", big_rows(7, "m"), mode="merge")
    cli.ok("branch", store, "create", "extra")
    cli.ok("tag", store, "delete", "keep")
    cli.ok("tag", store, "create", "other")
    version_before = cli.log(store)[0]["version"]
    assert "add --confirm" in cli.fail("restore", store, tmp_path / "snap", status=2)
    cli.ok("restore", store, tmp_path / "snap", "--confirm")
    assert cli.export(store, "P") == main_then
    assert cli.export(store, "P", branch="exp") == exp_then
    branches = [line.split("\t")[0] for line in cli.ok("branch", store, "list").stdout.decode().splitlines()]
    assert branches == ["exp", "main"]
    assert [json.loads(line)["tag"] for line in cli.ok("tag", store, "list").stdout.decode().splitlines()] == ["keep"]
    assert cli.log(store)[0]["version"] > version_before
    cli.ok("verify", store)
    # a second restore has nothing to do
    output = cli.ok("restore", store, tmp_path / "snap", "--confirm").stdout.decode()
    assert "unchanged" in output and "restored as version" not in output


def test_restore_refuses_a_snapshot_of_another_store(cli, store, tmp_path):
    cli.import_rows(store, "P", big_rows(3))
    other = tmp_path / "other"
    cli.ok("init", other)
    cli.import_rows(other, "P", big_rows(3))
    snapshot(cli, other, tmp_path / "snap")
    assert "is not a snapshot of" in cli.fail("restore", store, tmp_path / "snap", "--confirm")


def test_a_snapshot_refuses_every_writing_command_and_serves_every_reading_one(cli, store, tmp_path):
    cli.import_rows(store, "P", big_rows(3))
    snapshot(cli, store, tmp_path / "snap")
    copy = tmp_path / "snap"
    source = cli.write_file(jsonl(big_rows(1, "x")))
    for command in (("import", copy, "P", source, "--mode", "merge"), ("branch", copy, "create", "b"),
                    ("tag", copy, "create", "t"), ("gc", copy, "--keep-versions", "1"), ("optimize", copy)):
        error = cli.fail(*command)
        assert "is a snapshot" in error and "restore" in error and "-o ro" in error, command
    assert cli.export(copy, "P") == jsonl(big_rows(3))
    assert cli.log(copy)[0]["version"] == 1
    cli.ok("verify", copy)
    cli.ok("dump", copy)


def test_one_damaged_meta_slot_leaves_a_snapshot_readable(cli, store, tmp_path):
    cli.import_rows(store, "P", big_rows(3))
    snapshot(cli, store, tmp_path / "snap")
    copy = tmp_path / "snap"
    for slot in (0, 1):
        damaged = tmp_path / f"damaged{slot}"
        subprocess.run(["cp", "-a", str(copy), str(damaged)], check=True)
        with open(damaged / "manifest", "r+b") as manifest:
            manifest.seek(4096 * (slot + 1) + 9)
            byte = manifest.read(1)
            manifest.seek(4096 * (slot + 1) + 9)
            manifest.write(bytes([byte[0] ^ 0xFF]))
        assert cli.export(damaged, "P") == jsonl(big_rows(3))
        result = cli.run("verify", damaged)
        assert result.returncode == 1
        assert result.stdout.decode().count("\n") == 1 and f"meta slot {slot}" in result.stdout.decode()
