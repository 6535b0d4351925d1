"""The documents describe what is built: every block type of core/codec.h is in
docs/FORMAT.md §4, and code and docs cite only files of this repository."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def block_types():
    text = (ROOT / "core" / "codec.h").read_text()
    body = re.search(r"enum block_type \{(.*?)\};", text, re.S).group(1)
    return {int(value): name for name, value in re.findall(r"(BLOCK_\w+) = (\d+),", body)
            if name != "BLOCK_TYPE_MAX"}


def format_block_type_row():
    text = (ROOT / "docs" / "FORMAT.md").read_text()
    section = text[text.index("## 4. Blocks"):text.index("## 5.")]
    return next(line for line in section.splitlines() if "| block type" in line)


def test_every_block_type_is_in_format_section_4():
    row = format_block_type_row()
    listed = {int(number) for number in re.findall(r"(\d+) [a-z]", row.split("|")[3])}
    assert sorted(block_types()) == sorted(listed)


def test_no_document_outside_the_repository_is_cited():
    pattern = r"DESIGN(\.md)? *(§|section|invariant)|\.\./shared|reference/(rfc|adr)|RFC-024"
    result = subprocess.run(["git", "grep", "-nE", pattern, "--", "core", "mountfs", "fuse", "tools",
                             "tests", "docs", "README.md", ":!tests/cli/test_docs.py"],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.stdout == ""
