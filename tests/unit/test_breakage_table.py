"""Every suite test names the breakage that must make it fail (issue 15), and the docs
show the same table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.selfcheck import broken_cluster, chaos_breakage
from tests.selfcheck.breakage_table import PLUGIN_OF, TABLE, by_breakage, markdown

REPO = Path(__file__).resolve().parents[2]


def _collected() -> set[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "suites"],
                         cwd=REPO, capture_output=True, text=True, timeout=120, check=False).stdout
    return {line.removeprefix("suites/").replace(".py::", "::") for line in out.splitlines()
            if line.startswith("suites/")}


def test_every_collected_suite_test_is_in_the_table_and_nothing_else() -> None:
    collected = _collected()
    assert collected, "collection found no suite tests"
    assert sorted(collected - set(TABLE)) == [], "suite tests without a breakage in tests/selfcheck/breakage_table.py"
    assert sorted(set(TABLE) - collected) == [], "table entries for tests that no longer exist"


def test_every_named_breakage_exists_in_its_plugin() -> None:
    known = {**{b: "broken_cluster" for b in broken_cluster.BREAKAGES},
             **{b: "chaos_breakage" for b in (*chaos_breakage.CONTROLLERS, *chaos_breakage.TABLES)}}
    for test, entry in TABLE.items():
        if entry.breakage is None:
            assert entry.why, f"{test}: no breakage and no reason"
            continue
        assert entry.breakage in known, f"{test}: unknown breakage {entry.breakage}"
        assert PLUGIN_OF[entry.breakage][0].endswith(known[entry.breakage])


def test_the_docs_show_this_table() -> None:
    doc = (REPO / "docs" / "self-verification.md").read_text()
    assert markdown() in doc, "docs/self-verification.md: paste tests.selfcheck.breakage_table.markdown() again"


def test_kind_entries_name_breakages_the_kind_backend_can_make() -> None:
    """A kind-only test's breakage is one broken_cluster makes on kind, or a wrong table
    (chaos_breakage's controller breakages restart a local kube-controller-manager)."""
    for test, entry in TABLE.items():
        if entry.backend != "kind" or entry.breakage is None:
            continue
        if PLUGIN_OF[entry.breakage][0].endswith("broken_cluster"):
            assert broken_cluster.refusal(entry.breakage, "kind") is None, f"{test}: {entry.breakage} not on kind"
        else:
            assert entry.breakage in chaos_breakage.TABLES, f"{test}: {entry.breakage} restarts a local component"


def test_no_real_kubelet_test_is_left_without_a_breakage() -> None:
    """Issue 39: every kind-only test is shown failing under a breakage on kind."""
    kind_only = [t for t in TABLE if t.split("::")[0] in ("test_real_kubelet", "test_fs_group",
                                                          "test_kubelet_volume_affinity")]
    assert kind_only and all(TABLE[t].breakage and TABLE[t].backend == "kind" for t in kind_only)


def test_every_entry_has_a_dated_matrix_row_that_fails() -> None:
    """docs/breakage-matrix.md holds the matrix tiers' records (issue 39: every breakage
    with a dated row): each (breakage run, test) of the table has a row saying it failed,
    under its backend's heading and below a dated "Record:" line. A new entry runs alone
    with `selftest --tier matrix -- -k <breakage>` (or kind-matrix) and its record is
    pasted there."""
    text = (REPO / "docs" / "breakage-matrix.md").read_text(encoding="utf-8")
    local, kind = text.split("\n## kind\n", 1)
    sections = {"local": local, "kind": kind}
    missing = []
    for backend, section in sections.items():
        for run, tests in by_breakage(backend).items():
            for test in tests:
                row = f"| `{run}` | `{test.removeprefix('suites/')}` | fails"
                at = section.find(row)
                if at < 0 or "Record: " not in section[:at]:
                    missing.append(f"{backend}: {run} -> {test}")
    assert not missing, "no dated row that fails in docs/breakage-matrix.md for:\n" + "\n".join(sorted(missing))
