"""Strict format version: stores stamped one format older or newer are refused
with their messages, before recovery runs (a pending sidecar stays as it is)."""
import os

import pytest

from conftest import store_digest

FORMAT = 6  # docs/FORMAT.md: the store format this graphfs reads and writes

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
    """A store with data, a pending recovery sidecar, stamped with the current format + offset."""
    cli.import_rows(store, "Person", [{"id": "a", "name": "Ann"}])
    cli.import_rows(store, "Person", [{"id": "b", "name": "Bo"}], mode="merge")
    recovery = store / "recovery"
    recovery.mkdir(mode=0o700, exist_ok=True)
    sidecar = recovery / "01HZZZZZZZZZZZZZZZZZZZZZZZ"
    sidecar.write_bytes(b"GFSB\x08" + bytes(range(256)) * 4)
    os.chmod(sidecar, 0o600)
    cli.ok("debug", "stamp-format", store, FORMAT + request.param)
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


@pytest.mark.parametrize("stamped", [-1], indirect=True)
def test_an_older_store_is_refused_with_export_guidance(cli, stamped):
    check_refused(cli, stamped, OLDER)


@pytest.mark.parametrize("stamped", [+1], indirect=True)
def test_a_newer_store_is_refused_with_upgrade_guidance(cli, stamped):
    check_refused(cli, stamped, NEWER)


@pytest.mark.parametrize("stamped", [-1, +1], indirect=True)
def test_the_refusal_names_both_format_versions(cli, stamped):
    error = cli.fail("log", stamped)
    assert f"format {FORMAT}" in error
    assert f"format {FORMAT - 1}" in error or f"format {FORMAT + 1}" in error


@pytest.mark.parametrize("stamped", [-1, +1], indirect=True)
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
