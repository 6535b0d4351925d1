"""The command line itself: help, version, usage errors, init."""
import os
import re
import subprocess

import pytest

from conftest import store_digest

COMMANDS = ["init", "import", "export", "log", "branch", "heads", "schema", "verify", "repair",
            "stats", "debug"]


def test_help_lists_every_command(cli):
    output = cli.ok("--help").stdout.decode()
    for command in COMMANDS + ["mount"]:
        assert re.search(rf"^  {command} ", output, re.M), command


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_has_help(cli, command):
    output = cli.ok(command, "--help").stdout.decode()
    assert output.startswith(f"usage: graphfs {command}")


def test_version_prints_binary_version_and_store_format(cli):
    output = cli.ok("--version").stdout.decode()
    assert re.fullmatch(r"graphfs \S+ \(store format 8; opens formats 6 to 8\)\n", output), output


def test_no_command_is_a_usage_error(cli):
    result = cli.run()
    assert result.returncode == 2
    assert b"usage: graphfs" in result.stderr


def test_unknown_command_is_a_usage_error(cli):
    error = cli.fail("frobnicate", "x", status=2)
    assert "unknown command 'frobnicate'" in error


def test_missing_argument_is_a_usage_error(cli, store):
    error = cli.fail("export", store, status=2)
    assert "export" in error and "--help" in error


def test_unknown_option_is_a_usage_error(cli, store):
    error = cli.fail("log", store, "--colour", status=2)
    assert "--colour" in error


def test_option_without_its_value_is_a_usage_error(cli, store):
    cli.fail("export", store, "T", "--at", status=2)


def test_bad_mode_is_a_usage_error(cli, store):
    path = cli.write_file('{"id":"a"}\n')
    error = cli.fail("import", store, "T", path, "--mode", "append", status=2)
    assert "overwrite or merge" in error


def test_bad_version_is_a_usage_error(cli, store):
    cli.fail("export", store, "T", "--at", "12x", status=2)
    cli.fail("export", store, "T", "--at", "a/b", status=2)


def test_an_at_that_names_no_tag_says_so(cli, store):
    assert "no version, time or tag named 'yesterday'" in cli.fail("export", store, "T", "--at", "yesterday")


def test_init_creates_an_empty_store(cli, tmp_path):
    path = tmp_path / "new-store"
    cli.ok("init", path)
    assert (path / "manifest").is_file()
    assert cli.log(path) == []
    assert cli.heads(path) == []
    branches = cli.ok("branch", path, "list").stdout.decode().splitlines()
    assert [line.split("\t")[0] for line in branches] == ["main"]
    cli.ok("verify", path)


def test_an_object_store_location_without_credentials_says_what_to_set_and_creates_nothing(graphfs, tmp_path):
    # s3:// must never silently become a local directory named "s3:"
    environment = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    for argv in (["init", "s3://bucket/graph"], ["log", "s3://bucket/graph"],
                 ["mount", "s3://bucket/graph", str(tmp_path / "mnt"), "-f"]):
        result = subprocess.run([graphfs, *argv], cwd=tmp_path, capture_output=True, timeout=60, env=environment)
        assert result.returncode == 1, argv
        message = result.stderr.decode()
        assert "AWS_ACCESS_KEY_ID" in message, message
        assert message.count("\n") == 1, message
    assert not (tmp_path / "s3:").exists()


def test_init_creates_private_files(cli, tmp_path):
    path = tmp_path / "new-store"
    cli.ok("init", path)
    assert path.stat().st_mode & 0o777 == 0o700
    for child in path.rglob("*"):
        expected = 0o700 if child.is_dir() else 0o600
        assert child.stat().st_mode & 0o777 == expected, child


def test_init_twice_refuses_and_changes_nothing(cli, store):
    cli.import_rows(store, "Person", [{"id": "a", "name": "Ann"}])
    before = store_digest(store)
    error = cli.fail("init", store)
    assert str(store) in error
    assert store_digest(store) == before
    assert cli.export(store, "Person") == '{"id":"a","name":"Ann"}\n'


def test_init_refuses_a_non_empty_directory(cli, tmp_path):
    path = tmp_path / "occupied"
    path.mkdir()
    (path / "notes.txt").write_text("mine\n")
    cli.fail("init", path)
    assert sorted(p.name for p in path.iterdir()) == ["notes.txt"]


def test_commands_on_a_directory_that_is_not_a_store_fail_clearly(cli, tmp_path):
    error = cli.fail("log", tmp_path / "nowhere")
    assert "nowhere" in error


def test_stats_is_one_json_object_with_io_counters(cli, store):
    import json
    cli.import_rows(store, "Person", [{"id": "a"}])
    stats = json.loads(cli.ok("stats", store).stdout)
    for group, counters in (("manifest", ("reads", "bytes", "pages", "rows_decoded")),
                            ("data", ("reads", "bytes", "blocks", "rows_decoded"))):
        for counter in counters:
            assert isinstance(stats[group][counter], int), (group, counter)
    assert stats["store"]["version"] == 1


def test_debug_failpoints_lists_the_registry(cli):
    names = cli.ok("debug", "failpoints").stdout.decode().splitlines()
    assert "publish.before_fsync" in names
    assert len(names) == len(set(names))
    for name in names:
        assert re.fullmatch(r"[a-z_]+(\.[a-z_]+)+", name), name


def test_repair_of_a_consistent_store_publishes_nothing(cli, store):
    cli.import_rows(store, "Person", [{"id": "a"}])
    cli.ok("branch", store, "create", "experiment")
    cli.import_rows(store, "Person", [{"id": "b"}], mode="merge", branch="experiment")
    log = cli.log(store)
    output = cli.ok("repair", store).stdout.decode()
    assert "nothing to repair" in output
    assert cli.log(store) == log
    assert len(cli.log(store, branch="experiment")) == 2
    cli.ok("verify", store)


def test_a_command_on_a_local_store_does_not_load_the_object_store_client(cli, store):
    """libcurl and its thirty libraries are loaded by the first s3:// open only (core/s3_curl.c):
    loading them cost every command about 12 ms at start."""
    cli.import_rows(store, "T", [{"id": "a"}])
    result = cli.ok("log", store, env={"LD_DEBUG": "libs"})
    loaded = result.stderr.decode(errors="replace")
    assert "libzstd" in loaded   # the tracing works
    assert "libcurl" not in loaded


@pytest.mark.skipif(os.geteuid() != 0, reason="hiding a system library needs a mount namespace (root)")
def test_an_s3_location_without_libcurl_says_which_package_to_install(cli):
    """Without libcurl, local stores work and an s3:// location names the package to install."""
    listing = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
    libraries = sorted({os.path.realpath(line.split("=>")[-1].strip())
                        for line in listing.splitlines() if "libcurl" in line and ".so" in line})
    assert libraries
    hide = "".join(f"mount --bind /dev/null {path} && " for path in libraries)
    environment = dict(os.environ, AWS_ENDPOINT_URL="http://127.0.0.1:9", AWS_ACCESS_KEY_ID="a",
                       AWS_SECRET_ACCESS_KEY="b")
    result = subprocess.run(["unshare", "--mount", "sh", "-c", hide + f'exec "{cli.binary}" heads s3://bucket/store'],
                            capture_output=True, text=True, env=environment, timeout=60)
    assert result.returncode == 1, result.stderr
    assert "s3:// stores need libcurl, which cannot be loaded" in result.stderr
    assert "install the libcurl4 package" in result.stderr
