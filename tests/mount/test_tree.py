"""The mounted tree (docs/MOUNT.md "The tree") as ordinary tools see it."""
import errno
import json
import os
import re
import subprocess
import tarfile

import pytest

from conftest import graphfs, import_rows, jsonl
from store_files import is_remote
from tier import size

PEOPLE = [{"id": "a", "name": "Ada"}, {"id": "b", "name": "Bob"}]


@pytest.fixture
def populated(store):
    import_rows(store, "Person", PEOPLE)
    import_rows(store, "City", [{"id": "c1", "name": "Oslo"}])
    import_rows(store, "Person", [{"id": "c", "name": "Cy"}], mode="merge")
    return store


def test_root_lists_the_documented_entries(mnt):
    assert sorted(os.listdir(mnt.root)) == sorted(
        ["tables", "heads", "schema", "staging", "log", "branches", "history", "graph", "tags", "diff", "merge",
         ".graphfs"])
    assert sorted(os.listdir(mnt.path(".graphfs"))) == ["errors", "feed", "stats", "version"]


def test_tables_show_the_rows_export_shows(populated, mounter):
    m = mounter(populated)
    exported = graphfs("export", populated, "Person").stdout
    assert m.path("tables", "Person.jsonl").read_bytes() == exported
    assert m.read("tables", "Person.jsonl") == jsonl(PEOPLE + [{"id": "c", "name": "Cy"}])


def test_ls_lists_tables_heads_and_schemas(populated, mounter):
    m = mounter(populated)
    assert sorted(os.listdir(m.path("tables"))) == ["City.jsonl", "Person.jsonl"]
    assert sorted(os.listdir(m.path("heads"))) == [".dropped", "City.json", "Person.json"]
    assert sorted(os.listdir(m.path("schema"))) == ["City.json", "Person.json"]


def test_stat_sizes_are_the_bytes_cat_returns(populated, mounter):
    m = mounter(populated)
    for relative in ["tables/Person.jsonl", "tables/City.jsonl", "heads/Person.json",
                     "schema/Person.json", "log", "history/@1/tables/Person.jsonl",
                     "history/@2/log"]:
        assert os.stat(m.path(relative)).st_size == len(m.path(relative).read_bytes()), relative


def test_ls_l_shows_exact_sizes(populated, mounter):
    m = mounter(populated)
    listing = m.sh("ls -l tables").stdout.decode()
    sizes = {line.split()[-1]: int(line.split()[4]) for line in listing.splitlines()[1:]}
    assert sizes == {"City.jsonl": len(m.path("tables", "City.jsonl").read_bytes()),
                     "Person.jsonl": len(m.path("tables", "Person.jsonl").read_bytes())}


def test_mtime_is_the_head_commit_time(populated, mounter):
    m = mounter(populated)
    newest = m.log()[0]
    assert newest["changes"][0]["table"] == "Person"
    output = m.sh("stat -c %Y.%y tables/Person.jsonl").stdout.decode()
    seconds = int(output.split(".")[0])
    expected = newest["time"]  # 2026-11-30T12:00:00.123456Z
    import datetime
    when = datetime.datetime.strptime(expected, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc)
    assert seconds == int(when.timestamp())


def test_head_file_is_one_json_object_with_the_rfc_fields(populated, mounter):
    m = mounter(populated)
    head = m.head("Person")
    assert head["state"] == "live"
    assert head["table_key"] == "Person"
    assert head["row_count"] == 3
    assert head["table_branch"] is None
    assert set(head) >= {"state", "stable_table_id", "incarnation_id", "table_key", "table_version",
                         "table_branch", "row_count", "schema_hash", "head_graph_commit_id"}
    assert m.read("heads", "Person.json").count("\n") == 1


def test_heads_match_the_cli(populated, mounter):
    m = mounter(populated)
    cli = [json.loads(line) for line in graphfs("heads", populated).stdout.decode().splitlines()]
    assert sorted(cli, key=lambda h: h["table_key"]) == [m.head("City"), m.head("Person")]


def test_log_is_the_cli_log_newest_first(populated, mounter):
    m = mounter(populated)
    assert m.path("log").read_bytes() == graphfs("log", populated).stdout
    versions = [entry["version"] for entry in m.log()]
    assert versions == sorted(versions, reverse=True) == [3, 2, 1]
    assert m.log()[0]["changes"] == [{"table": "Person", "op": "merge", "rows": 1}]


def test_getfattr_shows_the_head_attributes(populated, mounter):
    m = mounter(populated)
    head = m.head("Person")
    for relative in ("tables/Person.jsonl", "heads/Person.json"):
        output = m.sh(f"getfattr -d -m user.graphfs {relative}").stdout.decode()
        values = dict(re.findall(r'^(user\.graphfs\.\w+)="(.*)"$', output, re.M))
        assert values == {
            "user.graphfs.stable_id": head["stable_table_id"],
            "user.graphfs.incarnation": head["incarnation_id"],
            "user.graphfs.version": str(head["table_version"]),
            "user.graphfs.rows": str(head["row_count"]),
            "user.graphfs.commit": head["head_graph_commit_id"],
        }



def test_xattrs_outside_user_are_eopnotsupp_and_unknown_user_names_enodata(populated, mounter):
    m = mounter(populated)
    for relative in ("tables/Person.jsonl", "heads/Person.json", "tables", "log"):
        for name in ("security.selinux", "system.posix_acl_access", "trusted.x"):
            with pytest.raises(OSError) as error:
                os.getxattr(m.path(relative), name)
            assert error.value.errno == errno.EOPNOTSUPP, (relative, name)
        with pytest.raises(OSError) as error:
            os.getxattr(m.path(relative), "user.other")
        assert error.value.errno == errno.ENODATA
    assert os.getxattr(m.path("tables", "Person.jsonl"), "user.graphfs.rows") == b"3"


def test_ls_l_sends_no_request_per_file(store, mounter, tmp_path):
    tables = 40
    for i in range(tables):
        import_rows(store, f"T{i:02d}", [{"id": "a"}], tmp=tmp_path)
    m = mounter(store)
    m.sh("ls -l tables >/dev/null")   # the kernel learns the entries; ls learns EOPNOTSUPP

    def requests():
        return m.stats()["mount"]["requests"]
    first = requests()
    reading_stats = requests() - first
    before = requests()
    m.sh("ls -l tables >/dev/null")
    sent = requests() - before - reading_stats
    # opendir, readdirplus, getattr, the first refused xattrs: no lookup, getattr or
    # getxattr per file
    assert sent < tables // 2, sent


def test_history_lists_the_versions_the_branch_committed(populated, mounter):
    m = mounter(populated)
    assert sorted(os.listdir(m.path("history"))) == ["@1", "@2", "@3", "by-id"]


def test_after_a_new_commit_history_and_log_read_only_that_commit(store, mounter, tmp_path):
    source = tmp_path / "many.jsonl"
    source.write_text("".join(json.dumps({"id": "c", "n": n}) + "\n" for n in range(1)))
    graphfs("import", store, "T", source)
    subprocess.run([os.environ["GRAPHFS"] + "-bench", "commits", str(store), "300", "--tables", "1"],
                   check=True, capture_output=True)
    m = mounter(store, options=["block_cache=0"])   # every block read counts
    assert len([name for name in os.listdir(m.path("history")) if name.startswith("@")]) == 301
    assert len(m.read("log").splitlines()) == 301
    m.write("tables/T.jsonl", '{"id":"c","n":-1}\n', mode="a")

    def pages():
        stats = m.stats()
        return stats["manifest"]["pages"] + stats["data"]["blocks"]

    before = pages()
    assert len([name for name in os.listdir(m.path("history")) if name.startswith("@")]) == 302
    assert json.loads(m.read("log").splitlines()[0])["version"] == 302
    assert len(m.read("log").splitlines()) == 302
    assert pages() - before < 30   # the new commit, not the 301 before it


def test_a_first_listing_of_history_reads_the_version_index_not_a_record_per_commit(store, mounter, tmp_path):
    # 2,000 commits; 600 on an s3:// store (still several index leaves), 2,000 there too under --soak
    commits = size(600, soak=2000) if is_remote(store) else 2000
    source = tmp_path / "one.jsonl"
    source.write_text(json.dumps({"id": "c", "n": 0}) + "\n")
    graphfs("import", store, "T", source)
    subprocess.run([os.environ["GRAPHFS"] + "-bench", "commits", str(store), str(commits), "--tables", "1"],
                   check=True, capture_output=True)
    m = mounter(store, options=["block_cache=0"])   # every block read counts
    before = m.stats()["manifest"]["pages"]
    names = [name for name in os.listdir(m.path("history")) if name.startswith("@")]
    assert len(names) == commits + 1
    assert sorted(int(name[1:]) for name in names) == list(range(1, commits + 2))
    # a few index leaves and their parents (eight at 2,000 commits), not a commit record per version
    assert m.stats()["manifest"]["pages"] - before < 40
    newest = os.stat(m.path("history", f"@{commits + 1}")).st_mtime
    assert newest >= os.stat(m.path("history", "@1")).st_mtime


def test_history_version_shows_that_version(populated, mounter):
    m = mounter(populated)
    assert m.read("history", "@1", "tables", "Person.jsonl") == jsonl(PEOPLE)
    assert sorted(os.listdir(m.path("history", "@1", "tables"))) == ["Person.jsonl"]
    assert sorted(os.listdir(m.path("history", "@1"))) == ["graph", "heads", "log", "schema", "tables"]
    assert len(m.read("history", "@2", "log").splitlines()) == 2


def test_history_commit_ulid_is_a_symlink_to_its_version(populated, mounter):
    m = mounter(populated)
    second = m.log()[1]
    link = m.path("history", second["commit"])
    assert os.readlink(link) == f"@{second['version']}"
    assert (link / "tables" / "City.jsonl").read_text() == jsonl([{"id": "c1", "name": "Oslo"}])


def test_history_of_unknown_version_is_enoent(populated, mounter):
    m = mounter(populated)
    for name in ("@99", "@0", "@x", "01ARZ3NDEKTSV4RRFFQ69G5FAV"):
        with pytest.raises(FileNotFoundError):
            os.stat(m.path("history", name))


def test_diff_r_between_history_versions_shows_the_change(populated, mounter):
    m = mounter(populated)
    result = m.sh("diff -r history/@2/tables history/@3/tables", check=False)
    assert result.returncode == 1
    assert result.stdout.decode().splitlines()[-1] == '> {"id":"c","name":"Cy"}'
    assert m.sh("diff -r history/@1/tables history/@1/tables").returncode == 0


def test_tar_of_a_snapshot_holds_its_bytes(populated, mounter, tmp_path):
    m = mounter(populated)
    archive = tmp_path / "snapshot.tar"
    m.sh(f"tar -cf {archive} -C history/@2 .")
    with tarfile.open(archive) as tar:
        names = sorted(n.lstrip("./") for n in tar.getnames() if n not in (".", "./"))
        person = tar.extractfile("./tables/Person.jsonl").read()
    assert "tables/City.jsonl" in names and "heads/City.json" in names and "log" in names
    assert person == jsonl(PEOPLE).encode()


def test_find_walks_the_whole_tree(populated, mounter):
    m = mounter(populated)
    found = m.sh("find . -name '*.jsonl' | sort").stdout.decode().split()
    assert "./tables/Person.jsonl" in found
    assert "./history/@1/tables/Person.jsonl" in found
    assert "./branches/main/tables/City.jsonl" in found


def test_history_is_read_only(populated, mounter):
    m = mounter(populated)
    target = m.path("history", "@1", "tables", "Person.jsonl")
    for action in (lambda: open(target, "w"), lambda: open(target, "a"),
                   lambda: os.unlink(target), lambda: os.truncate(target, 0),
                   lambda: open(m.path("history", "@1", "tables", "New.jsonl"), "w"),
                   lambda: os.mkdir(m.path("history", "@1", "x")),
                   lambda: os.rename(target, m.path("history", "@1", "tables", "P.jsonl"))):
        with pytest.raises(OSError) as error:
            action()
        assert error.value.errno == errno.EROFS


def test_heads_and_log_are_not_writable(populated, mounter):
    m = mounter(populated)
    for relative in ("heads/Person.json", "log", ".graphfs/stats"):
        with pytest.raises(OSError) as error:
            open(m.path(relative), "w")
        assert error.value.errno in (errno.EACCES, errno.EPERM)


def test_dropped_heads_are_readable_under_dot_dropped(populated, mounter):
    m = mounter(populated)
    before = m.head("City")
    os.unlink(m.path("tables", "City.jsonl"))
    name = f"City.{before['incarnation_id']}.json"
    assert os.listdir(m.path("heads", ".dropped")) == [name]
    dropped = json.loads(m.read("heads", ".dropped", name))
    assert dropped["state"] == "tombstoned"
    assert dropped["stable_table_id"] == before["stable_table_id"]


def test_stats_has_the_read_counters(populated, mounter):
    m = mounter(populated)
    m.read("tables", "Person.jsonl")
    stats = m.stats()
    for group, keys in (("manifest", ("reads", "bytes", "pages", "rows_decoded")),
                        ("data", ("reads", "bytes", "blocks", "rows_decoded"))):
        for key in keys:
            assert isinstance(stats[group][key], int)
    assert stats["data"]["rows_decoded"] > 0



def manifest_reads(m):
    """Pages and bytes read from the manifest (each open of a live file also reads the meta slots:
    close-to-open, docs/MOUNT.md; those count as reads, never as pages)."""
    stats = m.stats()["manifest"]
    return (stats["pages"], stats["bytes"])


def test_repeated_listings_and_reads_cost_no_manifest_page(populated, mounter):
    m = mounter(populated, options=["refresh_ms=600000"])
    m.sh("ls -l tables heads schema >/dev/null; cat heads/* schema/* >/dev/null")
    before = manifest_reads(m)
    m.sh("ls -l tables heads schema >/dev/null; cat heads/* schema/* >/dev/null")
    assert manifest_reads(m) == before


def test_block_cache_0_reads_the_schema_blocks_each_time(populated, mounter):
    m = mounter(populated, options=["refresh_ms=600000", "block_cache=0"])
    m.sh("cat schema/* >/dev/null")
    first = manifest_reads(m)
    m.sh("cat schema/* >/dev/null")
    second = manifest_reads(m)
    assert second[0] > first[0]

def test_version_file_names_binary_and_format(mnt):
    version = json.loads(mnt.read(".graphfs", "version"))
    assert version["format"] == 8
    assert re.match(r"\d+\.\d+", version["graphfs"])


def test_branches_lists_every_branch(populated, mounter):
    graphfs("branch", populated, "create", "dev")
    m = mounter(populated)
    assert sorted(os.listdir(m.path("branches"))) == ["dev", "main"]
    assert sorted(os.listdir(m.path("branches", "dev"))) == [
        "diff", "graph", "heads", "history", "log", "merge", "schema", "staging", "tables"]
    assert m.read("branches", "dev", "tables", "Person.jsonl") == m.read("tables", "Person.jsonl")


def test_unknown_names_are_enoent(mnt):
    for relative in ("tables/Nope.jsonl", "heads/Nope.json", "tables/bad name.jsonl", "nothing",
                     "branches/nope"):
        with pytest.raises(FileNotFoundError):
            os.stat(mnt.path(relative))


def test_statfs_answers(mnt):
    result = subprocess.run(["df", str(mnt.root)], capture_output=True)
    assert result.returncode == 0
