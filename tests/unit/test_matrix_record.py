"""The breakage matrix record says, per test, whether it failed as it must (issue 39 item 3)."""

import datetime

from tests.selfcheck.matrix_record import markdown, not_failing, selected_runs, verdict
from tests.selfcheck.test_detection_power import EXPECTATION_ERRORS, Outcome

PRODUCT = EXPECTATION_ERRORS[0]


def test_a_product_failure_fails_and_anything_else_is_flagged() -> None:
    assert verdict(Outcome("t", "failed", f"{PRODUCT}: pod ran | on zone-a")).startswith("fails: ")
    assert "\\|" in verdict(Outcome("t", "failed", f"{PRODUCT}: pod ran | on zone-a"))
    assert verdict(Outcome("t", "passed")) == "**passed** (must fail)"
    assert verdict(Outcome("t", "skipped", "no attach")) == "**skipped** (must fail)"
    assert verdict(Outcome("t", "error", "OSError: boom")).startswith("**failed, not a product failure**")
    assert verdict(None) == "**no result**"


def test_the_table_is_dated_and_counts_what_did_not_fail() -> None:
    tests_of = {"volumezone": ["suites/test_a.py::test_x", "suites/test_a.py::test_y"]}
    results = {"volumezone": ({"suites/test_a.py::test_x": Outcome("x", "failed", f"{PRODUCT}: wrong zone")}, 41.2)}
    text = markdown(results, tests_of, "local", "v1.35.4", datetime.date(2026, 12, 7))
    assert text.startswith("Record: local, Kubernetes v1.35.4, run 2026-12-07:")
    assert "| `volumezone` | `test_a.py::test_x` | fails: " in text and "| 41 |" in text
    assert "| `volumezone` | `test_a.py::test_y` | **no result** | 41 |" in text
    assert text.rstrip().endswith("1 of 2 tests fail under their breakage as they must; 1 do not.")


def test_not_failing_names_each_test_that_escaped_its_breakage() -> None:
    outcomes = {"a": Outcome("a", "failed", f"{PRODUCT}: x"), "b": Outcome("b", "passed"),
                "c": Outcome("c", "error", "OSError: disk")}
    assert not_failing(["a", "b", "c", "d"], outcomes, "volumezone") == [
        "b: passed under volumezone", "c: failed, but not with a product failure: OSError: disk",
        "d: no result (run output tail below)"]
    assert not_failing(["a"], outcomes, "volumezone") == []


def test_k_selects_the_breakages_a_matrix_tier_runs() -> None:
    names = ["test_every_test_fails_under_its_breakage[resizer]", "test_other[resizer-no-modify]",
             "test_every_test_fails_under_its_breakage[attach-anyway@examples/vendor-node-local]"]
    runs = {run: [f"suites/t.py::{run}"] for run in ("attach-anyway", "attach-anyway@examples/vendor-node-local",
                                                     "resizer", "resizer-no-modify")}
    assert selected_runs(names, "test_every_test_fails_under_its_breakage", runs) == {
        "attach-anyway@examples/vendor-node-local": ["suites/t.py::attach-anyway@examples/vendor-node-local"],
        "resizer": ["suites/t.py::resizer"]}
    assert selected_runs([], "test_every_test_fails_under_its_breakage", runs) == {}


def test_a_partial_record_says_how_many_breakages_ran() -> None:
    tests_of = {"a": ["suites/test_a.py::test_x"], "b": ["suites/test_b.py::test_y"]}
    results = {"a": ({"suites/test_a.py::test_x": Outcome("x", "failed", f"{PRODUCT}: no")}, 3.0)}
    assert markdown(results, tests_of, "kind", "v1.35.4", datetime.date(2026, 12, 7)).startswith(
        "Record: kind, Kubernetes v1.35.4, run 2026-12-07 (1 of the 2 breakages, as selected):")
