"""`pvchaos compare`: verdict, message and timing changes between two report directories.

The recorded results under data/compare/ are trimmed copies of two real runs of
`pvchaos run --suites reclaim --workers 0` on v1.35.4: `healthy`, and `broken` with
`-p tests.selfcheck.broken_cluster` and PVCHAOS_BREAK=provisioner (the zonal
provisioner stopped after the cluster started).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from pvchaos import compare_runs as cr
from pvchaos import report
from pvchaos.cli import main
from pvchaos.results import merge_into

DATA = Path(__file__).parent / "data" / "compare"
DYNAMIC = ("test_reclaim::test_delete_policy_removes_volume", "test_reclaim::test_switch_to_retain_keeps_volume")
RETAIN = "test_reclaim::test_retain_policy_released_until_claim_ref_cleared"


def result(name: str, status: str, *, params: dict[str, str] | None = None, message: str = "",
           start: int = 1_000, stop: int = 3_000) -> dict:
    return {"name": name, "fullName": f"suites.test_x#{name}", "status": status, "start": start, "stop": stop,
            "statusDetails": {"message": message} if message else {},
            "parameters": [{"name": k, "value": repr(v), "excluded": True} for k, v in (params or {}).items()]}


def run(label: str, *results: dict) -> cr.Run:
    return cr.Run(label, Path(f"/runs/{label}"), {f"test_x::{r['name']}": r for r in results})


def test_a_passed_test_that_fails_is_a_regression_with_its_failure_as_evidence() -> None:
    a = run("A", result("t1", "passed"), result("t2", "failed", message="boom"), result("t3", "skipped"))
    b = run("B", result("t1", "failed", message="AssertionError: PV pvchaos-gw0-pv-a1b2c3 is Released\nyaml..."),
            result("t2", "passed"), result("t3", "broken", message="x"))
    changes = cr.compare(a, b)
    assert [(c.test, c.verdict, c.regression) for c in changes] == [
        ("test_x::t1", ("passed", "failed"), True), ("test_x::t2", ("failed", "passed"), False),
        ("test_x::t3", ("skipped", "broken"), False)]
    assert changes[0].messages == (("failure message", "-", "AssertionError: PV pvchaos-<worker>-pv-<id> is Released"),)
    assert [c.test for c in cr.regressions(changes)] == ["test_x::t1"]


def test_unchanged_runs_have_no_changes_even_with_different_generated_names() -> None:
    msg = "ConditionNotReached: timed out after 60.0s waiting for pvchaos-gw1-claim-{} uid {}"
    a = run("A", result("t", "failed", message=msg.format("0a1b2c", "0b6e8f9e-1c7a-4f43-9b7e-6f0a1c2d3e4f")))
    b = run("B", result("t", "failed", message=msg.format("ffee00", "11111111-2222-3333-4444-555555555555")))
    assert cr.compare(a, b) == []
    assert cr.normalize(msg.format("0a1b2c", "x")) == \
        "ConditionNotReached: timed out after <n>s waiting for pvchaos-<worker>-claim-<id> uid x"


def test_an_asserted_wording_that_changes_is_reported() -> None:
    key = "asserted message VOLUME_AFFINITY"
    a = run("A", result("t", "passed", params={key: "had volume node affinity conflict"}))
    b = run("B", result("t", "passed", params={key: "didn't match PersistentVolume's node affinity"}))
    (change,) = cr.compare(a, b)
    assert change.messages == ((key, "had volume node affinity conflict", "didn't match PersistentVolume's node affinity"),)
    assert not change.verdict_changed and not change.regression
    # a test that failed before reaching an assertion has not changed that wording
    early = run("B", result("t", "failed", message="boom"))
    assert [m[0] for m in cr.compare(a, early)[0].messages] == ["failure message"]


def test_an_asserted_wording_naming_generated_objects_is_the_same_in_two_runs() -> None:
    """Seen in the first matrix run: every asserted event names the run's own PV."""
    key = "asserted message VOLUME_MISMATCH"
    a = run("A", result("t", "passed", params={key: 'Cannot bind to requested volume "pvchaos-gw0-named-35a11b": x'}))
    b = run("B", result("t", "passed", params={key: 'Cannot bind to requested volume "pvchaos-gw1-named-aad1ee": x'}))
    assert cr.compare(a, b) == []


@pytest.mark.parametrize(("name", "a", "b", "changed"), [
    ("recovery seconds", 8.0, 9.9, False),   # under 2 s
    ("recovery seconds", 8.0, 10.0, True),   # 2 s and 25%
    ("recovery seconds", 1.1, 2.6, False),   # the matrix run's zone return, 1.34.4 vs 1.35.4: noise
    ("recovery seconds", 0.0, 2.0, True),
    ("eviction seconds", 100.0, 120.0, False),  # 20 s but only 20%
    (cr.DURATION, 4.0, 6.5, False),          # two healthy runs of one test, measured
    (cr.DURATION, 4.0, 9.5, True),
    (cr.DURATION, 60.0, 80.0, False),
])
def test_timings_change_only_beyond_both_thresholds(name: str, a: float, b: float, changed: bool) -> None:
    assert cr.beyond_noise(name, a, b) is changed
    assert cr.beyond_noise(name, b, a) is changed


def test_timings_are_compared_only_where_both_runs_passed() -> None:
    a = run("A", result("t", "passed", params={"recovery seconds": "8.0"}, stop=3_000),
            result("u", "passed", params={"recovery seconds": "8.0"}))
    b = run("B", result("t", "passed", params={"recovery seconds": "12.5"}, stop=20_000),
            result("u", "failed", params={"recovery seconds": "30.0"}, message="slow"))
    changes = {c.test: c for c in cr.compare(a, b)}
    assert changes["test_x::t"].timings == (("recovery seconds", 8.0, 12.5), (cr.DURATION, 2.0, 19.0))
    assert changes["test_x::u"].timings == ()
    table = cr.render_markdown(list(changes.values()), a, b)
    assert "| test_x::t | recovery seconds | 8 | 12.5 |" in table
    assert "1 verdict changes (1 regressions: test_x::u), 0 message changes, 2 timing changes." in table


def test_a_test_present_in_one_run_only_is_a_verdict_change_not_a_regression() -> None:
    changes = cr.compare(run("A", result("gone", "passed")), run("B", result("new", "failed", message="x")))
    assert [(c.test, c.verdict) for c in changes] == [("test_x::gone", ("passed", "absent")),
                                                      ("test_x::new", ("absent", "failed"))]
    assert cr.regressions(changes) == []


# ---- the recorded real runs ----------------------------------------------------------

def test_recorded_runs_healthy_then_broken_provisioner() -> None:
    healthy, broken = cr.load_run(DATA / "healthy", "A"), cr.load_run(DATA / "broken", "B")
    assert healthy.environment["kubernetes"] == broken.environment["kubernetes"] == "v1.35.4"
    changes = cr.compare(healthy, broken)
    assert [c.test for c in cr.regressions(changes)] == list(DYNAMIC)
    for c in changes:
        if c.test in DYNAMIC:
            failure = dict((m[0], m[2]) for m in c.messages)["failure message"]
            assert "ConditionNotReached" in failure and "phase Bound" in failure and "<id>" in failure
    assert RETAIN not in {c.test for c in changes if c.verdict_changed}
    # the static Retain test asserted the controller's wording in both runs: unchanged
    assert cr.messages_of(healthy.results[RETAIN]) == cr.messages_of(broken.results[RETAIN]) == {
        "asserted message NO_PV_NO_CLASS": "no persistent volumes available for this claim and no storage class is set"}
    assert cr.compare(healthy, healthy) == []


def test_cli_writes_markdown_and_allure_results_and_exits_1_on_a_regression(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["compare", str(DATA / "healthy"), str(DATA / "broken"), "--report-dir", str(out), "--no-html"]) == 1
    printed = capsys.readouterr().out
    assert "| test_reclaim::test_delete_policy_removes_volume | passed | failed **regression** |" in printed
    assert (out / "compare.md").read_text(encoding="utf-8") in printed
    results = report.load_results(report.layout(out).results)
    runs = {p["value"] for r in results for p in r.get("parameters", []) if p["name"] == "run"}
    assert runs == {"'A'", "'B'"}
    changes = [r for r in results if r["fullName"].startswith("pvchaos.compare#test_")]
    assert sorted(r["status"] for r in changes) == ["failed", "failed"]
    assert all(r["statusDetails"]["message"].startswith(cr.CHANGE_PREFIX) for r in changes)
    summary = next(r for r in results if r["fullName"] == "pvchaos.compare#summary")
    assert summary["status"] == "failed" and all(t in summary["statusDetails"]["message"] for t in DYNAMIC)
    assert re.fullmatch(cr.CATEGORY["messageRegex"], changes[0]["statusDetails"]["message"])
    # the reverse direction fixes tests and breaks none: exit 0
    assert main(["compare", str(DATA / "broken"), str(DATA / "healthy"), "--report-dir", str(out), "--no-html"]) == 0
    assert "2 verdict changes (0 regressions)" in capsys.readouterr().out


def test_the_allure_results_directory_itself_is_accepted(tmp_path: Path) -> None:
    copy = tmp_path / "some-results"
    shutil.copytree(DATA / "broken" / "allure-results", copy)
    got = cr.load_run(copy, "B")
    assert got.results_dir == copy and got.environment["kubernetes"] == "v1.35.4"
    assert [c.test for c in cr.compare(cr.load_run(DATA / "healthy", "A"), got)] == list(DYNAMIC)


@pytest.mark.parametrize(("make", "words"), [
    (lambda p: p / "missing", "REPORT_DIR_A: {p}/missing: no such directory"),
    (lambda p: p, "REPORT_DIR_A {p}: not a pvchaos report (expected allure-results/ with *-result.json files"),
    (lambda p: (p / "f.txt").write_text("x") and p / "f.txt", "REPORT_DIR_A: {p}/f.txt: not a directory"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         make, words: str) -> None:
    bad = make(tmp_path)
    out = tmp_path / "out"
    assert main(["compare", str(bad), str(DATA / "broken"), "--report-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words.format(p=tmp_path) in err
    assert not out.exists()


def test_the_output_may_not_be_a_compared_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "b"
    shutil.copytree(DATA / "broken", copy)
    before = sorted(p.name for p in (copy / "allure-results").iterdir())
    assert main(["compare", str(DATA / "healthy"), str(copy), "--report-dir", str(copy)]) == 2
    assert "is one of the compared reports" in capsys.readouterr().err
    assert sorted(p.name for p in (copy / "allure-results").iterdir()) == before
    # given as its allure-results directory, the report around it is still refused
    assert main(["compare", str(DATA / "healthy"), str(copy / "allure-results"), "--report-dir", str(copy)]) == 2
    assert sorted(p.name for p in (copy / "allure-results").iterdir()) == before


def test_recorded_data_is_trimmed_real_allure_output() -> None:
    for name in ("healthy", "broken"):
        files = list((DATA / name / "allure-results").glob("*-result.json"))
        assert len(files) == 3
        assert all(json.loads(f.read_text())["fullName"].startswith("suites.test_reclaim#") for f in files)


def test_reports_of_several_backends_keep_each_backends_tests_apart(tmp_path: Path) -> None:
    """`run --backend local,kind` merges both runs into one allure-results, tagged: a
    comparison of two such reports compares local with local and kind with kind."""
    for name, kind_status in (("a", "passed"), ("b", "failed")):
        for backend, status in (("local", "passed"), ("kind", kind_status)):
            src = tmp_path / f"{name}-{backend}"
            src.mkdir()
            (src / "u-result.json").write_text(json.dumps(result("t", status, message="x" if status == "failed" else "")))
            merge_into(report.layout(tmp_path / name).results, backend, src)
    changes = cr.compare(cr.load_run(tmp_path / "a", "A"), cr.load_run(tmp_path / "b", "B"))
    assert [(c.test, c.verdict) for c in changes] == [("test_x::t (backend=kind)", ("passed", "failed"))]
