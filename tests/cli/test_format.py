"""Format versions: this graphfs creates format 8 and opens formats 6 to 8 (a format-6 or -7
store is read and written in its own format); stores stamped older or newer are refused with
their messages, before recovery runs (a pending sidecar stays as it is)."""
import json
import os

import pytest

from conftest import store_digest

FORMAT = 8  # docs/FORMAT.md §2: the store format this graphfs creates
OLDEST = 6  # the oldest it opens

OLDER = ("older than this graphfs", "dump it with the graphfs version that wrote it",
         "graphfs dump STORE --all > history.ndjson",
         "graphfs init a new store and graphfs load it")
NEWER = ("newer than this graphfs", "upgrade graphfs")

COMMANDS = [
    ["export", "{store}", "Person"],
    ["log", "{store}"],
    ["heads", "{store}"],
    ["verify", "{store}"],
    ["stats", "{store}"],
    ["branch", "{store}", "list"],
    ["branch", "{store}", "create", "experiment"],
    ["import", "{store}", "Person", "{input}", "--mode", "merge"],
    ["repair", "{store}"],
]


@pytest.fixture
def stamped(cli, store, request):
    """A store with data, a pending recovery sidecar, stamped with the format request.param."""
    cli.import_rows(store, "Person", [{"id": "a", "name": "Ann"}])
    cli.import_rows(store, "Person", [{"id": "b", "name": "Bo"}], mode="merge")
    recovery = store / "recovery"
    recovery.mkdir(mode=0o700, exist_ok=True)
    sidecar = recovery / "01HZZZZZZZZZZZZZZZZZZZZZZZ"
    sidecar.write_bytes(b"GFSB\x08" + bytes(range(256)) * 4)
    os.chmod(sidecar, 0o600)
    cli.ok("debug", "stamp-format", store, request.param)
    return store


def check_refused(cli, store, messages):
    before = store_digest(store)
    source = cli.write_file('{"id":"c","name":"Cy"}\n')
    for command in COMMANDS:
        args = [part.format(store=store, input=source) for part in command]
        error = cli.fail(*args)
        for message in messages:
            assert message in error, (args, error)
        assert store_digest(store) == before, args


@pytest.mark.parametrize("stamped", [OLDEST - 1], indirect=True)
def test_an_older_store_is_refused_with_export_guidance(cli, stamped):
    check_refused(cli, stamped, OLDER)


@pytest.mark.parametrize("stamped", [FORMAT + 1], indirect=True)
def test_a_newer_store_is_refused_with_upgrade_guidance(cli, stamped):
    check_refused(cli, stamped, NEWER)


@pytest.mark.parametrize("stamped", [OLDEST - 1, FORMAT + 1], indirect=True)
def test_the_refusal_names_the_store_format_and_the_ones_this_graphfs_opens(cli, stamped):
    error = cli.fail("log", stamped)
    assert f"formats {OLDEST} to {FORMAT}" in error
    assert f"store format {OLDEST - 1}" in error or f"store format {FORMAT + 1}" in error


@pytest.mark.parametrize("stamped", [OLDEST - 1, FORMAT + 1], indirect=True)
def test_the_pending_sidecar_is_left_untouched(cli, stamped):
    sidecar = stamped / "recovery" / "01HZZZZZZZZZZZZZZZZZZZZZZZ"
    content = sidecar.read_bytes()
    source = cli.write_file('{"id":"c","name":"Cy"}\n')
    cli.fail("import", stamped, "Person", source)
    cli.fail("verify", stamped)
    assert sidecar.read_bytes() == content


def test_stamping_back_to_the_current_format_reads_again(cli, store):
    cli.import_rows(store, "Person", [{"id": "a", "name": "Ann"}])
    cli.ok("debug", "stamp-format", store, FORMAT + 1)
    cli.fail("export", store, "Person")
    cli.ok("debug", "stamp-format", store, FORMAT)
    assert cli.export(store, "Person") == '{"id":"a","name":"Ann"}\n'
    cli.ok("verify", store)


def test_a_format_6_store_is_read_and_written_and_stays_format_6(cli, tmp_path):
    store = tmp_path / "six"
    assert "of format 6" in cli.ok("init", store, "--format", "6").stdout.decode()
    cli.import_rows(store, "Person", [{"id": "a", "name": "Ann"}])
    cli.import_rows(store, "Person", [{"id": "b", "name": "Bo"}], mode="merge")
    cli.ok("branch", store, "create", "dev")
    cli.ok("gc", store, "--keep-versions", "1")
    assert cli.export(store, "Person") == '{"id":"a","name":"Ann"}\n{"id":"b","name":"Bo"}\n'
    assert [line["version"] for line in map(json.loads, cli.ok("log", store).stdout.decode().splitlines())][0] == 2
    cli.ok("verify", store)
    assert json.loads(cli.ok("stats", store).stdout)["store"]["format"] == 6
    with open(store / "manifest", "rb") as manifest:
        assert manifest.read(12)[8:] == (6).to_bytes(4, "little")
    packs = list((store / "packs").iterdir())
    assert packs
    for pack in packs:
        assert pack.read_bytes()[8:12] == (6).to_bytes(4, "little"), pack


def test_init_makes_the_newest_format_and_refuses_one_it_cannot_open(cli, tmp_path):
    cli.ok("init", tmp_path / "new")
    assert json.loads(cli.ok("stats", tmp_path / "new").stdout)["store"]["format"] == FORMAT
    error = cli.fail("init", tmp_path / "five", "--format", "5", status=2)
    assert f"--format takes {OLDEST} to {FORMAT}" in error
