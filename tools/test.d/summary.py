"""tools/test's closing table: time per suite and build, then the slowest tests.

    summary.py RESULTS_DIR TOTAL_SECONDS

RESULTS_DIR holds what tools/test wrote while it ran:
  steps.tsv                    one line per step: build, suite, pass, seconds, exit status
  <build>-<suite>-<pass>.xml   pytest's JUnit report of that step
  <build>-meson.json           meson's testlog.json of the unit and fuzz suites
Prints the table and the ten slowest tests (a parametrized test counts per parameter set).
Exit status 0.
"""
import json
import sys
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from pathlib import Path


def pytest_cases(path, build, suite):
    """[(seconds, build, suite, name, outcome)] of one JUnit report."""
    cases = []
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError):
        return cases
    for case in root.iter("testcase"):
        module = case.get("classname", "").rsplit(".", 1)[-1]
        outcome = "failed" if case.find("failure") is not None or case.find("error") is not None else (
            "skipped" if case.find("skipped") is not None else "passed")
        cases.append((float(case.get("time", 0)), build, suite, f"{suite}/{module}.py::{case.get('name')}", outcome))
    return cases


def meson_cases(path, build):
    """The same of meson's testlog.json (the unit and fuzz suites)."""
    cases = []
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return cases
    for line in lines:
        entry = json.loads(line)
        outcome = {"OK": "passed", "SKIP": "skipped", "EXPECTEDFAIL": "passed"}.get(entry.get("result"), "failed")
        suite = (entry.get("suite") or ["unit"])[0].split(":")[-1]
        name = entry.get("name", "").split(" / ")[-1]
        cases.append((float(entry.get("duration", 0)), build, suite, f"{suite}/{name}", outcome))
    return cases


def main():
    results, total = Path(sys.argv[1]), float(sys.argv[2])
    steps = []
    steps_file = results / "steps.tsv"
    if steps_file.exists():
        for line in steps_file.read_text().splitlines():
            build, suite, kind, seconds, status = line.split("\t")
            steps.append((build, suite, kind, float(seconds), int(status)))
    per_suite = defaultdict(lambda: [0.0, 0])   # (build, suite) -> seconds, worst status
    for build, suite, kind, seconds, status in steps:
        entry = per_suite[(build, suite)]
        entry[0] += seconds
        entry[1] = max(entry[1], status)
    cases = []
    for path in sorted(results.glob("*.xml")):
        build, suite = path.name.split("-")[:2]
        cases += pytest_cases(path, build, suite)
    for path in sorted(results.glob("*-meson.json")):
        cases += meson_cases(path, path.name.split("-")[0])
    counts = defaultdict(lambda: defaultdict(int))
    for _, build, suite, _, outcome in cases:
        counts[(build, suite)][outcome] += 1

    print()
    print("tools/test: time per suite and build (wall seconds; a suite's parallel and serial passes)")
    print(f"  {'build':<8}{'suite':<8}{'seconds':>9}  {'passed':>7}{'failed':>7}{'skipped':>8}  status")
    for (build, suite), (seconds, status) in per_suite.items():
        tally = counts.get((build, suite), {})
        passed = tally.get("passed", "") if tally else ""
        failed = tally.get("failed", "") if tally else ""
        skipped = tally.get("skipped", "") if tally else ""
        print(f"  {build:<8}{suite:<8}{seconds:>9.1f}  {passed!s:>7}{failed!s:>7}{skipped!s:>8}  "
              f"{'ok' if status == 0 else 'FAILED'}")
    print(f"  {'all':<16}{total:>9.1f}  (wall, from the start of tools/test: builds and the object store included)")
    print()
    print("the ten slowest tests (seconds):")
    for seconds, build, _, name, outcome in sorted(cases, reverse=True)[:10]:
        print(f"  {seconds:8.2f}  {build:<7} {name}{'' if outcome == 'passed' else '  (' + outcome + ')'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
