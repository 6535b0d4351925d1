"""The progress bar is drawn on stderr only when stderr is a terminal."""
import os
import pty
import subprocess

from conftest import jsonl

ROWS = jsonl([{"id": f"r{i}", "text": "z" * 50} for i in range(20000)])


def test_no_progress_bar_when_stderr_is_not_a_terminal(cli, store):
    path = cli.write_file(ROWS)
    result = cli.ok("import", store, "T", path)
    assert result.stderr == b""


def test_progress_bar_when_stderr_is_a_terminal(cli, store):
    path = cli.write_file(ROWS)
    master, slave = pty.openpty()
    process = subprocess.Popen([cli.binary, "import", str(store), "T", str(path)],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
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
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 0
    assert b"\r" in drawn and b"100%" in drawn, drawn
    assert b"[" in drawn and b"#" in drawn
    assert b"committed version 1" in output
    assert cli.export(store, "T") == ROWS


def test_no_progress_bar_on_a_terminal_for_a_refused_import_after_the_error(cli, store):
    path = cli.write_file('{"id":"a"}\n{"id":\n')
    master, slave = pty.openpty()
    process = subprocess.Popen([cli.binary, "import", str(store), "T", str(path)],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
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
    process.communicate(timeout=120)
    assert process.returncode == 1
    last_line = drawn.replace(b"\r\n", b"\n").rstrip(b"\n").split(b"\n")[-1]
    assert last_line.startswith(b"graphfs: "), drawn
    assert b"100%" not in drawn
