#!/usr/bin/python3
"""The house's structure, read from the built objects (docs/ARCHITECTURE.md, "The ladder").

    tools/test.d/structure.py BUILD-DIRECTORY [--graph]

For every object file of core/, mountfs/ and fuse/, `nm` gives the symbols it
defines and the ones it uses; a file calls another when it uses a symbol the
other defines. Three rules, each failure printed with what to do:

1. No circles: no set of files calls each other round (a strongly connected
   component of more than one file).
2. The ladder: a file calls only files of its own rung or below (RUNGS).
3. Prefixes: every symbol a file exports starts with its module's prefix
   (MODULES), so that a reader knows from a call where its callee lives.

Exit status 0 when all hold, 1 otherwise. --graph prints the file graph.
"""
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

# The rungs, lowest first: a file may call files of its own rung and the rungs below.
RUNGS = [
    ("ground", ["error_info", "buf", "ulid", "float_text", "io_diag"]),
    ("io", ["io", "io_wake", "io_local", "io_remote", "io_pieced", "io_cache", "s3", "s3_answer", "s3_curl", "lease"]),
    ("codec", ["codec", "pack", "pager", "sorter", "schema", "schema_row", "schema_scan", "schema_infer"]),
    ("btree", ["btree_node", "btree", "btree_build", "btree_finder", "btree_diff", "journal"]),
    ("table", ["table", "table_stage", "table_writer", "table_apply", "table_verify", "table_runs",
               "table_edges", "table_diff", "table_compact"]),
    ("manifest", ["manifest", "manifest_records", "manifest_branches", "manifest_compact", "manifest_copy", "manifest_history",
                  "manifest_index", "manifest_pins", "manifest_gc", "manifest_publish", "manifest_commit",
                  "manifest_sync", "manifest_tags", "manifest_recovery", "manifest_verify", "manifest_repair", "manifest_replay",
                  "manifest_open", "manifest_config"]),
    ("store", ["store", "store_backup", "store_txn", "store_parse", "store_edges", "store_graph", "store_dump",
               "store_dump_all", "store_dump_output", "store_envelope", "store_names", "store_ops", "store_revert", "store_diff", "store_merge",
               "store_merge_preview", "store_row_history", "store_retention", "store_config", "store_compact", "store_serving", "store_open", "store_txn_writers", "store_writer"]),
    ("mountfs", None),   # every file of mountfs/
    ("fuse", None),      # every file of fuse/
]

# A module's files share one prefix: core's file io_remote.c belongs to io ("io_"), store_txn.c to
# store ("store_"); error_info.c and float_text.cc are modules of their own. In mountfs/ a file
# exports mountfs_ or mount_ names (the mount's own) or names with its file's prefix (listing.c:
# listing_, open_file.c: open_file_; declared in mountfs_int.h); fuse/ exports the daemon's entry
# and its operations table, graphfs_.
MODULE_PREFIXES = {
    "error_info": ["error_info_"],
    "float_text": ["float_text_"],
    "io_diag": ["io_"],
    "fuse": ["graphfs_"],
}


def objects(build):
    """{file name (core/io.c): object path} for the three directories."""
    found = {}
    for directory, pattern in (("core", "core/libgraphfs.a.p/*.o"), ("mountfs", "mountfs/libmountfs.a.p/*.o"),
                               ("fuse", "tools/graphfs.p/.._fuse_*.o")):
        for path in sorted(build.glob(pattern)):
            name = path.name.removesuffix(".o").removeprefix(".._fuse_")
            found[f"{directory}/{name}"] = path
    return found


def symbols(paths):
    """{path: (defined global symbols, undefined symbols)} of the objects, from one nm run."""
    output = subprocess.run(["nm", "-A", "-P", *map(str, paths)], check=True, capture_output=True,
                            text=True).stdout
    found = {str(path): (set(), set()) for path in paths}
    for line in output.splitlines():
        where, _, rest = line.partition(": ")
        fields = rest.split()
        if len(fields) < 2 or where not in found:
            continue
        name, kind = fields[0], fields[1]
        defined, used = found[where]
        if kind == "U":
            used.add(name)
        elif kind in "TDBRVWGS" and not name.startswith("_Z"):   # C++ internals of float_text.cc aside
            defined.add(name)
    return found


def stem(file):
    return Path(file).name.split(".")[0]


def rung_of(file):
    directory = file.split("/")[0]
    for index, (rung, stems) in enumerate(RUNGS):
        if stems is None and rung == directory:
            return index
        if stems is not None and directory == "core" and stem(file) in stems:
            return index
    return None


def prefixes_of(file):
    directory = file.split("/")[0]
    name = stem(file)
    if directory == "mountfs":
        return ["mountfs_", "mount_", name + "_"]
    if directory == "fuse":
        return MODULE_PREFIXES["fuse"]
    if name in MODULE_PREFIXES:
        return MODULE_PREFIXES[name]
    return [name.split("_")[0] + "_"]


def strongly_connected(graph):
    """Tarjan's algorithm: the components of graph {node: {node}}, each a sorted list."""
    index, low, on_stack, stack, components = {}, {}, set(), [], []
    counter = [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            components.append(sorted(component))

    sys.setrecursionlimit(10000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def self_test():
    """The rules' own check, at every run: a circle is found and a ladder is not; prefixes."""
    circle = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert [c for c in strongly_connected(circle) if len(c) > 1] == [["a", "b", "c"]]
    ladder = {"a": {"b", "c"}, "b": {"c"}, "c": set()}
    assert all(len(c) == 1 for c in strongly_connected(ladder))
    assert prefixes_of("core/io_remote.c") == ["io_"] and prefixes_of("core/error_info.c") == ["error_info_"]
    assert "listing_" in prefixes_of("mountfs/listing.c") and prefixes_of("fuse/ops.c") == ["graphfs_"]
    assert rung_of("core/io_diag.c") < rung_of("core/io.c") < rung_of("core/store_open.c") < rung_of("fuse/ops.c")


def main():
    self_test()
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    build = Path(sys.argv[1])
    files = objects(build)
    if not files:
        print(f"structure: no objects under {build}: build it first (meson compile -C {build})", file=sys.stderr)
        return 2
    defined_by, uses = {}, {}
    problems = []
    table = symbols(list(files.values()))
    for file, path in files.items():
        defined, used = table[str(path)]
        uses[file] = used
        for name in defined:
            if name in defined_by:
                problems.append(f"{name} is defined in both {defined_by[name]} and {file}: make one static")
            defined_by[name] = file
        allowed = prefixes_of(file)
        for name in sorted(defined):
            if not any(name.startswith(prefix) for prefix in allowed):
                problems.append(f"{file} exports {name} without its module's prefix ({' or '.join(allowed)}): "
                                f"rename it or make it static")
    graph = defaultdict(set)
    callers = defaultdict(lambda: defaultdict(set))   # (caller, callee) -> the symbols
    for file, used in uses.items():
        graph[file]
        for name in used:
            callee = defined_by.get(name)
            if callee and callee != file:
                graph[file].add(callee)
                callers[file][callee].add(name)
    for component in strongly_connected(graph):
        if len(component) > 1:
            edges = [f"    {caller} -> {callee}: {', '.join(sorted(callers[caller][callee])[:4])}"
                     for caller in component for callee in sorted(graph[caller]) if callee in component]
            problems.append(f"a circle of {len(component)} files call each other: {' '.join(component)}\n"
                            + "\n".join(edges) + "\n  move the code so that calls go one way (down the ladder)")
    for file in sorted(graph):
        rung = rung_of(file)
        if rung is None:
            problems.append(f"{file} has no rung: add it to RUNGS in tools/test.d/structure.py "
                            f"and to the ladder in docs/ARCHITECTURE.md")
            continue
        for callee in sorted(graph[file]):
            callee_rung = rung_of(callee)
            if callee_rung is not None and callee_rung > rung:
                problems.append(f"{file} (rung {RUNGS[rung][0]}) calls up into {callee} (rung "
                                f"{RUNGS[callee_rung][0]}): {', '.join(sorted(callers[file][callee])[:4])}")
    if "--graph" in sys.argv:
        for file in sorted(graph):
            print(file, "->", " ".join(sorted(graph[file])))
    for problem in problems:
        print(f"structure: {problem}")
    print(f"structure: {len(files)} files, {sum(len(v) for v in graph.values())} calls between files, "
          f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
