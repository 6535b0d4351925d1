"""Corruption: a byte flipped anywhere in the written part of any store file
makes `verify` exit 1, and exporting the damaged data fails — never wrong data.

Offsets are sampled in every file: each header field, each meta slot, and in
every block (FORMAT.md §4) one byte of its header (magic, type, codec, sizes
or checksum, varying from block to block) and the first, middle and last byte
of its payload. verify and export open the store read-only, so the
byte is flipped in place and flipped back after each probe.

The normal build runs every probe, in PARTS test items that tools/test spreads
over its workers; under ASan, where each of a probe's seven launches costs ten
times as much, and in tools/test quick, each part runs a fixed sample (every
HEADER_STRIDE-th header and meta-slot probe and every BLOCK_STRIDE-th block
probe: about one probe in twenty of the 632).
"""
import json
import os
import random
import struct

import pytest

from conftest import jsonl
from tier import SMALL, SOAK

PARTS = 4
HEADER_STRIDE = 3    # the sample: every third header and meta-slot probe,
BLOCK_STRIDE = 24    # and every 24th block probe

MANIFEST_BLOCKS_START = 12288
SEGMENT_BLOCKS_START = 4096
BLOCK_HEADER = 24
BLOCK_FRAGMENT = 6

# The reads a probe checks (a command's arguments after the store): together they read every row.
READS = (("dump",), ("export", "Company", "--branch", "experiment"))


def parse_blocks(data, start):
    """[(offset, type, stored size)] of the blocks of one file, in order."""
    blocks = []
    offset = start
    while offset + BLOCK_HEADER <= len(data):
        if data[offset:offset + 4] != b"GFSB":
            following = data.find(b"GFSB", offset + 1)
            if following < 0:
                break
            offset = following
            continue
        block_type = data[offset + 4]
        (stored,) = struct.unpack_from("<I", data, offset + 8)
        if offset + BLOCK_HEADER + stored > len(data):
            break
        blocks.append((offset, block_type, stored))
        offset += BLOCK_HEADER + stored
    return blocks


def header_offsets(base):
    """magic, format version, file kind, store ULID, segment id, creation time, checksum."""
    return [base + o for o in (0, 7, 8, 12, 16, 31, 32, 40, 48, 55)]


def meta_offsets(base):
    return [base + o for o in (0, 8, 16, 24, 32, 40, 47)]


def block_offsets(offset, stored, rng):
    """One byte of the block header (a different field in each block) and the
    first, middle and last byte of the payload."""
    samples = {offset + rng.randrange(BLOCK_HEADER)}
    if stored:
        payload = offset + BLOCK_HEADER
        samples |= {payload, payload + stored // 2, payload + stored - 1}
    return sorted(samples)


@pytest.fixture(scope="module")
def damaged_store(tmp_path_factory):
    """A store whose every fragment is live (merges only add or update rows,
    so every fragment keeps live rows): small tables, a schema change, a
    branch, and a node and an edge table large enough to be written to segment files."""
    from conftest import Cli, graphfs_binary
    work = tmp_path_factory.mktemp("corruption")
    cli = Cli(graphfs_binary(), work)
    store = work / "store"
    cli.ok("init", store)
    tables = {}

    cli.import_rows(store, "Person", [{"id": f"p{i}", "name": f"P{i}", "age": i} for i in range(50)])
    cli.import_rows(store, "Person", [{"id": "p3", "name": "Three", "age": 33},
                                      {"id": "p99", "name": "New", "age": 99}], mode="merge")
    # enough companies that the branch's one-row merge below is not worth a flush of the table's
    # fragments (core/store_compact.c: a flush rewrites at most 8 times the rows written), so
    # that fragment stays live and every fragment is read by some export
    cli.import_rows(store, "Company", [{"id": "acme", "name": "Acme"}] +
                    [{"id": f"c{i:02d}", "name": f"C{i}"} for i in range(12)])
    cli.set_schema(store, "WORKS_AT", {"kind": "edge", "from": "Person", "to": "Company",
                                       "properties": {}})
    cli.import_rows(store, "WORKS_AT", [{"id": "w1", "from": "p1", "to": "acme"}])
    schema = json.loads(cli.ok("schema", store, "Company").stdout)
    schema["properties"]["city"] = {"type": "string", "nullable": True}
    cli.set_schema(store, "Company", schema)
    cli.ok("branch", store, "create", "experiment")
    cli.import_rows(store, "Company", [{"id": "globex", "name": "Globex", "city": "Springfield"}],
                    mode="merge", branch="experiment")
    rng = random.Random(5)
    # Past what a write keeps in memory, in few rows: written to a segment file, with a small key
    # tree. That is 4 MiB (600 rows of 8,000 bytes) under --soak; otherwise the tests lower the
    # bound to 64 KiB (GRAPHFS_STAGE_INLINE_BYTES) and the rows carry 400 bytes, so that each of
    # the probes' seven launches reads 240 KB of each table instead of 4.8 MB.
    blob = 8000 if SOAK else 400
    saved = os.environ.get("GRAPHFS_STAGE_INLINE_BYTES")
    if not SOAK:
        os.environ["GRAPHFS_STAGE_INLINE_BYTES"] = str(64 << 10)
    try:
        big = [{"id": f"b{i:04d}", "blob": "".join(rng.choice("abcdefghij") for _ in range(blob))}
               for i in range(600)]
        cli.import_rows(store, "Big", jsonl(big))
        # and an edge table as large: its key tree and adjacency indexes are in its segment too
        cli.set_schema(store, "LINKS", {"kind": "edge", "from": "Person", "to": "Person",
                                        "properties": {"blob": {"type": "string"}}})
        links = [{"id": f"l{i:04d}", "from": f"p{i % 50}", "to": f"p{(i * 7) % 50}",
                  "blob": "".join(rng.choice("abcdefghij") for _ in range(blob))} for i in range(600)]
        cli.import_rows(store, "LINKS", jsonl(links))
    finally:
        if saved is None:
            os.environ.pop("GRAPHFS_STAGE_INLINE_BYTES", None)
        else:
            os.environ["GRAPHFS_STAGE_INLINE_BYTES"] = saved
    # tags: a tags tree and tag records in the manifest (FORMAT.md §20)
    cli.ok("tag", store, "create", "first", "--at", "1", "-m", "the first version")
    cli.ok("tag", store, "create", "experiment-head", "--branch", "experiment")
    # Every row the store holds, read in two launches: the dump of main reads every table of main
    # (its schemas and rows), and the experiment branch differs from main in Company alone.
    for read in READS:
        tables[read] = cli.ok(read[0], store, *read[1:]).stdout.decode()
    cli.ok("verify", store)
    return cli, store, tables


@pytest.fixture(scope="module")
def readers(damaged_store):
    """{file: the READS that read it}: every read reads the manifest; a segment file only the
    reads that fail without it (found by moving it away). A flipped byte can only reach a read
    of its file, so a probe checks those (verify and both reads for a manifest byte, verify
    and the dump for a segment byte)."""
    cli, store, tables = damaged_store
    found = {store / "manifest": list(tables)}
    for segment in sorted((store / "segments").glob("*")):
        aside = segment.with_name(segment.name + ".aside")
        segment.rename(aside)
        try:
            found[segment] = [read for read in tables if cli.run(read[0], store, *read[1:]).returncode]
        finally:
            aside.rename(segment)
        assert found[segment], f"no export reads {segment.name}"
    return found


def probes(store):
    """(file, offset, is_live_fragment, in_a_block) for every sampled byte of every store file."""
    found = []
    rng = random.Random(11)
    manifest = store / "manifest"
    data = manifest.read_bytes()
    for offset in header_offsets(0) + meta_offsets(4096) + meta_offsets(8192):
        found.append((manifest, offset, False, False))
    for offset, block_type, stored in parse_blocks(data, MANIFEST_BLOCKS_START):
        for sample in block_offsets(offset, stored, rng):
            found.append((manifest, sample, block_type == BLOCK_FRAGMENT, True))
    segments = sorted((store / "segments").glob("*")) if (store / "segments").exists() else []
    for segment in segments:
        data = segment.read_bytes()
        for offset in header_offsets(0):
            found.append((segment, offset, False, False))
        for offset, block_type, stored in parse_blocks(data, SEGMENT_BLOCKS_START):
            for sample in block_offsets(offset, stored, rng):
                found.append((segment, sample, block_type == BLOCK_FRAGMENT, True))
    return found


def flip(path, offset):
    with open(path, "r+b") as file:
        file.seek(offset)
        byte = file.read(1)[0]
        file.seek(offset)
        file.write(bytes([byte ^ 0xFF]))


def check_exports(cli, store, tables, keys=None):
    """Every read (of keys, else every one of READS) gives the right bytes or fails with one
    line; returns the failures."""
    failures = 0
    for read, expected in tables.items():
        if keys is not None and read not in keys:
            continue
        result = cli.run(read[0], store, *read[1:])
        output = result.stdout.decode(errors="replace")
        if result.returncode == 0:
            assert output == expected, f"{read[0]} {read[1:]} returned wrong data"
        else:
            failures += 1
            # The engine logs each damaged block it meets (file and offset) on
            # stderr before the command's own one-line error.
            lines = result.stderr.decode(errors="replace").splitlines()
            assert lines and all(line.startswith("graphfs: ") for line in lines), lines
            assert expected.startswith(output), f"{read[0]} {read[1:]} wrote wrong data before failing"
    return failures


def test_the_fixture_has_manifest_blocks_and_a_segment(damaged_store):
    cli, store, tables = damaged_store
    manifest_blocks = parse_blocks((store / "manifest").read_bytes(), MANIFEST_BLOCKS_START)
    assert len(manifest_blocks) > 10
    data = (store / "manifest").read_bytes()
    end = manifest_blocks[-1][0] + BLOCK_HEADER + manifest_blocks[-1][2]
    assert sum(BLOCK_HEADER + stored for _, _, stored in manifest_blocks) == end - MANIFEST_BLOCKS_START and \
        data[end:] == bytes(len(data) - end), \
        "blocks do not tile the manifest up to preallocated zeros: FORMAT.md §4 changed?"
    segments = list((store / "segments").glob("*"))
    assert segments, "the large import should have written a segment file"
    assert any(kind == BLOCK_FRAGMENT for _, kind, _ in
               parse_blocks(segments[0].read_bytes(), SEGMENT_BLOCKS_START))


def test_a_clean_store_verifies_with_exit_zero(damaged_store):
    cli, store, tables = damaged_store
    result = cli.ok("verify", store)
    assert result.stderr == b""


def probes_of_part(store, part):
    """The probes of one of PARTS interleaved parts (every probe once over all parts); a fixed
    sample of them under ASan and in quick."""
    chosen = probes(store)[part::PARTS]
    if SMALL:
        headers = [probe for probe in chosen if not probe[3]]
        blocks = [probe for probe in chosen if probe[3]]
        chosen = headers[::HEADER_STRIDE] + blocks[::BLOCK_STRIDE]
    return chosen


@pytest.mark.parametrize("part", range(PARTS))
def test_every_flipped_byte_is_found_by_verify_and_never_read_as_data(damaged_store, readers, part):
    cli, store, tables = damaged_store
    undetected = []
    for path, offset, live_fragment, _ in probes_of_part(store, part):
        flip(path, offset)
        try:
            result = cli.run("verify", store)
            if result.returncode != 1:
                undetected.append(f"{path.name}@{offset}")
                continue
            assert result.stdout or result.stderr
            failures = check_exports(cli, store, tables, readers[path])
            if live_fragment:
                assert failures > 0, f"damaged fragment {path.name}@{offset} was exported"
        finally:
            flip(path, offset)
    assert undetected == [], f"verify missed {len(undetected)} flipped bytes: {undetected[:20]}"
    cli.ok("verify", store)


def test_a_damaged_fragment_in_the_manifest_fails_the_export_that_reads_it(damaged_store):
    cli, store, tables = damaged_store
    manifest = store / "manifest"
    blocks = parse_blocks(manifest.read_bytes(), MANIFEST_BLOCKS_START)
    fragments = [(offset, stored) for offset, kind, stored in blocks if kind == BLOCK_FRAGMENT]
    assert fragments
    for offset, stored in fragments:
        flip(manifest, offset + BLOCK_HEADER + stored // 2)
        try:
            assert check_exports(cli, store, tables) > 0, f"fragment at {offset} was exported"
        finally:
            flip(manifest, offset + BLOCK_HEADER + stored // 2)


def newest_root_offset(store):
    """The manifest offset of the root the newest valid meta slot names (FORMAT.md §3)."""
    with open(store / "manifest", "rb") as manifest:
        best = None
        for slot in (0, 1):
            manifest.seek(4096 * (slot + 1))
            raw = manifest.read(48)
            sequence, offset = struct.unpack("<QQ", raw[8:24])
            if raw[:8] == b"GFSMETA\0" and (best is None or sequence > best[0]):
                best = (sequence, offset)
    return best[1]


def store_with_a_damaged_newest_root(cli, tmp_path, commits=3):
    store = tmp_path / "store"
    # format 7: its commits are not followed by a compaction's root of the same version
    # (core/store_compact.c), so the newest root is the last commit's
    cli.ok("init", store, "--format", "7")
    for n in range(commits):
        cli.import_rows(store, "P", [{"id": f"p{n}"}], mode="merge", message=f"commit {n + 1}")
    flip(store / "manifest", newest_root_offset(store) + 40)
    return store


def test_a_damaged_newest_root_stops_every_command_and_rollback_brings_back_the_newest_intact_state(cli, tmp_path):
    store = store_with_a_damaged_newest_root(cli, tmp_path)
    assert cli.run("export", store, "P").returncode == 1
    refused = cli.run("import", store, "P", cli.write_file(jsonl([{"id": "x"}])), "--mode", "merge")
    assert refused.returncode == 1 and b"--rollback" in refused.stderr
    result = cli.ok("repair", store, "--rollback")
    output = result.stdout.decode().splitlines()
    dropped = [json.loads(line[len("dropped: "):]) for line in output if line.startswith("dropped: ")]
    assert [entry["message"] for entry in dropped] == ["commit 3"]
    assert "rolled back to version 2" in output[-1] and "1 commit dropped" in output[-1]
    cli.ok("verify", store)
    assert cli.export(store, "P") == jsonl([{"id": "p0"}, {"id": "p1"}])
    log = cli.log(store)
    assert log[0]["actor"] == "graphfs:repair" and "rollback" in log[0]["message"] and log[0]["changes"] == []
    cli.import_rows(store, "P", [{"id": "x"}], mode="merge")
    cli.ok("verify", store)


def test_rollback_of_an_intact_store_changes_nothing(cli, tmp_path):
    store = tmp_path / "store"
    cli.ok("init", store)
    cli.import_rows(store, "P", [{"id": "a"}])
    before = (store / "manifest").read_bytes()
    assert "nothing to roll back" in cli.fail("repair", store, "--rollback")
    assert (store / "manifest").read_bytes() == before


def test_a_rollback_killed_after_its_cut_leaves_the_store_damaged_and_a_rerun_finishes_it(cli, tmp_path):
    store = store_with_a_damaged_newest_root(cli, tmp_path)
    died = cli.run("repair", store, "--rollback", env={"GRAPHFS_FAILPOINT": "rollback.after_cut=crash"})
    assert died.returncode != 0 and b"dropped: " in died.stdout
    assert cli.run("export", store, "P").returncode != 0
    assert "rolled back to version 2: 0 commits dropped" in cli.ok("repair", store, "--rollback").stdout.decode()
    cli.ok("verify", store)
    assert cli.export(store, "P") == jsonl([{"id": "p0"}, {"id": "p1"}])


def test_verify_right_after_a_killed_import_is_clean_and_notes_the_dead_writer(cli, tmp_path):
    store = tmp_path / "store"
    cli.ok("init", store)
    source = cli.write_file(jsonl([{"id": f"r{i}", "text": "x" * 60} for i in range(60000)]))
    died = cli.run("import", store, "Big", source, env={"GRAPHFS_FAILPOINT": "segment.after_fsync=crash",
                                                        "GRAPHFS_STAGE_INLINE_BYTES": "65536"})
    assert died.returncode == 86 and os.listdir(store / "recovery")
    result = cli.ok("verify", store)   # the dead writer's sidecar is recovery's work, not damage
    assert "clean (version 0)" in result.stdout.decode()
    assert b"note: the writer (pid" in result.stderr
    cli.import_rows(store, "Small", [{"id": "a"}])   # a read-write open rolls it back
    assert os.listdir(store / "recovery") == [] and os.listdir(store / "segments") == []
    assert cli.ok("verify", store).stderr == b""
