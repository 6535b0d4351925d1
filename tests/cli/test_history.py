"""--at V: every version of a randomized 200-commit history reads back exactly
as a simple in-memory model says it was (on an s3:// store, where each launch opens
the store over the network, and under ASan: 50 commits; 200 under --soak)."""
import random

from conftest import canonical
from store_files import is_remote
from tier import size

COMMITS = size(200, small=50)
REMOTE_COMMITS = size(50, soak=200)
TABLES = ["Alpha", "Beta", "Gamma"]
ALPHABET = "abcxyz ÄÖ✓\"\\/\n\t-"


class Model:
    """Tables as ordered dicts id -> row; an upserted row moves to the end."""

    def __init__(self):
        self.tables = {}

    def overwrite(self, table, rows):
        self.tables[table] = {row["id"]: row for row in rows}

    def merge(self, table, lines):
        rows = self.tables.setdefault(table, {})
        for line in lines:
            rows.pop(line["id"], None)
            if not line.get("@delete"):
                rows[line["id"]] = line

    def render(self, table):
        return "".join(canonical(row) for row in self.tables[table].values())

    def snapshot(self):
        return {table: self.render(table) for table in self.tables}


def random_row(rng, identifier):
    text = "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(0, 12)))
    return {"id": identifier, "n": rng.randrange(-10**6, 10**6), "s": text}


def random_commit(rng, model):
    """Returns (table, mode, lines) for one commit and applies it to the model."""
    table = rng.choice(TABLES)
    existing = list(model.tables.get(table, {}))
    if not existing or rng.random() < 0.25:
        count = rng.randrange(1, 15)
        ids = rng.sample(range(40), count)
        rows = [random_row(rng, f"r{i}") for i in ids]
        model.overwrite(table, rows)
        return table, "overwrite", rows
    lines = []
    touched = set()
    for _ in range(rng.randrange(1, 6)):
        identifier = f"r{rng.randrange(40)}"
        if identifier in touched:
            continue
        touched.add(identifier)
        if identifier in model.tables[table] and rng.random() < 0.3:
            lines.append({"id": identifier, "@delete": True})
        else:
            lines.append(random_row(rng, identifier))
    model.merge(table, lines)
    return table, "merge", lines


def test_export_at_every_version_matches_the_model(cli, store):
    rng = random.Random(20240611)
    model = Model()
    states = {}
    commits = REMOTE_COMMITS if is_remote(store) else COMMITS
    for step in range(1, commits + 1):
        table, mode, lines = random_commit(rng, model)
        version = cli.import_rows(store, table, lines, mode=mode, message=f"step {step}")
        assert version == step
        states[version] = model.snapshot()

    assert len(cli.log(store)) == commits
    # every table at every version in one launch per version: `dump --at V` holds each table's
    # rendering, row by row, in its envelopes (what `export --at V` writes, checked below)
    refused = set()
    for version, state in states.items():
        assert tables_in_dump(cli.ok("dump", store, "--at", version).stdout.decode()) == state, version
        for table in set(TABLES) - set(state) - refused:   # a table before its first commit, once each
            error = cli.fail("export", store, table, "--at", version)
            assert table in error
            refused.add(table)
    for table in TABLES:
        assert cli.export(store, table) == states[commits][table]
        assert cli.export(store, table, at=commits // 2) == states[commits // 2][table]


def tables_in_dump(text):
    """{table: its rendering} from a dump's {"type":T,"data":ROW} lines (ROW is the row's canonical text)."""
    tables = {}
    for line in text.splitlines(keepends=True):
        if line.startswith('{"type":"'):
            name, _, rest = line[len('{"type":"'):].partition('","data":')
            tables[name] = tables.get(name, "") + rest[:-2] + "\n"   # without the envelope's "}\n"
        elif line.startswith('{"schema":"'):
            tables.setdefault(line[len('{"schema":"'):].partition('"')[0], "")
    return tables


def test_heads_row_counts_at_every_version_match_the_model(cli, store):
    rng = random.Random(77)
    model = Model()
    counts = {}
    for step in range(1, (size(20, soak=60) if is_remote(store) else size(60, small=30)) + 1):
        table, mode, lines = random_commit(rng, model)
        version = cli.import_rows(store, table, lines, mode=mode)
        counts[version] = {name: len(rows) for name, rows in model.tables.items()}
    for version, expected in counts.items():
        heads = cli.heads(store, at=version)
        assert {head["table_key"]: head["row_count"] for head in heads} == expected, version


def test_export_at_a_version_of_a_branch_reads_its_fork(cli, store):
    cli.import_rows(store, "Person", [{"id": "a"}])
    cli.ok("branch", store, "create", "experiment")
    v2 = cli.import_rows(store, "Person", [{"id": "b"}], mode="merge", branch="experiment")
    v3 = cli.import_rows(store, "Person", [{"id": "c"}], mode="merge")
    v4 = cli.import_rows(store, "Person", [{"id": "d"}], mode="merge", branch="experiment")
    assert cli.export(store, "Person", branch="experiment", at=v2) == '{"id":"a"}\n{"id":"b"}\n'
    assert cli.export(store, "Person", branch="experiment", at=v3) == '{"id":"a"}\n{"id":"b"}\n'
    assert cli.export(store, "Person", branch="experiment", at=v4) == (
        '{"id":"a"}\n{"id":"b"}\n{"id":"d"}\n')
    assert cli.export(store, "Person", at=v2) == '{"id":"a"}\n'
    assert cli.export(store, "Person", at=v3) == '{"id":"a"}\n{"id":"c"}\n'
