"""The progress bar is drawn on stderr only when stderr is a terminal."""
import os
import pty
import subprocess
import tempfile

from conftest import jsonl

ROWS = jsonl([{"id": f"r{i}", "text": "z" * 50} for i in range(20000)])


def test_no_progress_bar_when_stderr_is_not_a_terminal(cli, store):
    path = cli.write_file(ROWS)
    result = cli.ok("import", store, "T", path)
    assert result.stderr == b""


def on_a_terminal(cli, *args):
    """Runs graphfs with stderr on a pseudo-terminal: (what was drawn there, stdout, exit status)."""
    master, slave = pty.openpty()
    with tempfile.TemporaryFile() as stdout:   # not a pipe: a large output must not block the command
        process = subprocess.Popen([cli.binary, *map(str, args)], stdin=subprocess.DEVNULL, stdout=stdout,
                                   stderr=slave)
        os.close(slave)
        drawn = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            drawn += chunk
        os.close(master)
        process.wait(timeout=120)
        stdout.seek(0)
        return drawn, stdout.read(), process.returncode


def test_progress_bar_when_stderr_is_a_terminal(cli, store):
    path = cli.write_file(ROWS)
    drawn, output, status = on_a_terminal(cli, "import", store, "T", path)
    assert status == 0
    assert b"\r" in drawn and b"100%" in drawn, drawn
    assert b"[" in drawn and b"#" in drawn
    assert b"committed version 1" in output
    assert cli.export(store, "T") == ROWS


def test_no_progress_bar_on_a_terminal_for_a_refused_import_after_the_error(cli, store):
    path = cli.write_file('{"id":"a"}\n{"id":\n')
    drawn, _, status = on_a_terminal(cli, "import", store, "T", path)
    assert status == 1
    last_line = drawn.replace(b"\r\n", b"\n").rstrip(b"\n").split(b"\n")[-1]
    assert last_line.startswith(b"graphfs: "), drawn
    assert b"100%" not in drawn


def test_export_dump_and_verify_draw_a_bar_on_a_terminal_and_nothing_elsewhere(cli, store):
    cli.ok("import", store, "T", cli.write_file(ROWS))
    for command, label in ((("export", store, "T"), b"export"), (("dump", store), b"dump"),
                           (("dump", store, "--all"), b"dump --all"), (("verify", store), b"verify")):
        drawn, output, status = on_a_terminal(cli, *command)
        assert status == 0, (command, drawn)
        assert label in drawn and b"100%" in drawn and b"\r" in drawn, (command, drawn)
        assert b"\r" not in output and cli.ok(*command).stderr == b""
    assert on_a_terminal(cli, "export", store, "T")[1] == ROWS.encode()
