"""How big the tests run, and under which build: one place for the pytest suites to ask.

tools/test sets these (docs/TESTING.md "Tiers"):
  GRAPHFS_TEST_TIER       quick | normal (the default) | soak
  GRAPHFS_TEST_SANITIZED  1 when the binary under test is the AddressSanitizer + UBSan build

A test with a size picks it with `size(normal, soak=…, small=…)`: the default tier runs a
smaller instance of the same test than `--soak`, and the sanitized build (where every launch
costs ten times as much) and `tools/test quick` (the check before every commit) a smaller one
still. Every tier runs every test: a size shrinks a loop, never a behaviour.
"""
import os

TIER = os.environ.get("GRAPHFS_TEST_TIER", "normal")
SANITIZED = os.environ.get("GRAPHFS_TEST_SANITIZED") == "1"
SOAK = TIER == "soak"
SMALL = SANITIZED or TIER == "quick"

if TIER not in ("quick", "normal", "soak"):
    raise RuntimeError(f"GRAPHFS_TEST_TIER={TIER!r}: expected quick, normal or soak")


def size(normal, soak=None, small=None):
    """The size for this run: `soak` under --soak, `small` under ASan or quick, else `normal`."""
    if SOAK and soak is not None:
        return soak
    if SMALL and small is not None:
        return small
    return normal


def quieter_leak_checks(environment, leak_checked):
    """ASAN_OPTIONS for a short command-line launch under ASan: leak checking costs ~40 ms at every
    exit, so it stays on only where `leak_checked` (the unit suite, the mount daemons and the named
    files of each suite check leaks on every path they take). Returns `environment`, changed in place."""
    options = environment.get("ASAN_OPTIONS")
    if options and not leak_checked:
        environment["ASAN_OPTIONS"] = options.replace("detect_leaks=1", "detect_leaks=0")
    return environment


def store_kinds(module, both_stores, both_stores_sanitized):
    """The stores a test of `module` runs on: ["local"], or ["local", "s3"] where an object store
    is given and module is one of both_stores (both_stores_sanitized under ASan)."""
    chosen = both_stores_sanitized if SANITIZED else both_stores
    if module in chosen and os.environ.get("GRAPHFS_TEST_BUCKET"):
        return ["local", "s3"]
    return ["local"]


def parametrize_stores(metafunc, both_stores, both_stores_sanitized):
    """pytest_generate_tests for a suite: a test asking for `store` runs on every store kind of its
    module, unless it is marked local_only."""
    module = metafunc.module.__name__.rsplit(".", 1)[-1]
    kinds = store_kinds(module, both_stores, both_stores_sanitized)
    if ("store" in metafunc.fixturenames and len(kinds) > 1
            and not metafunc.definition.get_closest_marker("local_only")):
        metafunc.parametrize("store", kinds, indirect=True)
