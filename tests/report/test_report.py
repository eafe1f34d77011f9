"""The reporting layer, checked against real allure-pytest output and a real Allure CLI.

A small generated test project (one pass that records a recovery time, an assertion
failure, a broken fixture, a capability skip, a product exception, an infrastructure
timeout and a race-window test) runs under pytest with --alluredir; the report built
from it must sort those into the right categories, keep history across two runs, and
render in headless Chromium.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pvchaos import report
from pvchaos.tools import allure_cli
from pvchaos.tools.screenshot import ScreenshotError, ensure_chromium, read_png, screenshot

REPO = Path(__file__).resolve().parents[2]
PYTHON = REPO / ".venv" / "bin" / "python"

TOPOLOGY = '''
import os

import allure
import pytest

from pvchaos.kit import measure


@pytest.fixture
def broken_fixture():
    raise RuntimeError("fixture could not create the namespace")


def test_recovers():
    allure.dynamic.parameter("backend", "local", excluded=True)
    measure.seconds("recovery seconds", float(os.environ.get("SAMPLE_SECONDS", "12.5")))


def test_recorded_wrongly():
    """The negative control: a timing as an ordinary parameter changes the test's identity."""
    allure.dynamic.parameter("recovery seconds", os.environ.get("SAMPLE_SECONDS", "12.5"))


def test_wrong_zone():
    assert "zone-a" == "zone-b", "PV bound in the wrong zone"


def test_harness_error(broken_fixture):
    pass


def test_node_failure():
    pytest.skip("backend local: no node-failure")
'''

RACES = '''
from pvchaos.kube.errors import ApiUnreachable, CanaryFailed, ConditionNotReached, ExpectationFailed
from pvchaos.kit import measure


def test_expectation():
    raise ExpectationFailed("pod scheduled to zone-b, expected zone-a")


def test_wait():
    raise ConditionNotReached("timed out after 60s waiting for Pod web-0: phase Running; last phase Pending")


def test_api_down():
    raise ApiUnreachable("API server stopped answering while waiting 60s for Pod web-0")


def test_canary():
    raise CanaryFailed("canary binder failed on this cluster, so the test did not run: claims do not bind")


def test_race():
    measure.seconds("race window seconds", 0.25, digits=2)
'''

ENV = {"backend": "local", "kubernetes": "v1.34.1", "run id": "test:1"}


def _run_sample(project: Path, results: Path, seconds: str = "12.5") -> None:
    """Run the sample project under pytest + allure-pytest, as `pvchaos run` does."""
    (project / "suites").mkdir(exist_ok=True)
    (project / "suites" / "test_topology.py").write_text(TOPOLOGY)
    (project / "suites" / "test_races.py").write_text(RACES)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "ALLURE_"))}
    env["SAMPLE_SECONDS"] = seconds
    python = str(PYTHON if PYTHON.exists() else sys.executable)
    proc = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--alluredir", str(results),
         "--clean-alluredir", "--rootdir", str(project), "suites"],
        cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # 1 = some tests failed, as designed
    assert list(results.glob("*-result.json")), proc.stdout


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A report directory with one run's allure-results in it (no HTML yet)."""
    root = tmp_path_factory.mktemp("sample")
    (root / "project").mkdir()
    _run_sample(root / "project", root / "reports" / "allure-results")
    return root / "reports"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A report directory after two full runs, so history has two entries."""
    if not (shutil.which("node") and shutil.which("npm")):
        pytest.skip("no node/npm on PATH: the Allure CLI cannot be installed")
    root = tmp_path_factory.mktemp("built")
    (root / "project").mkdir()
    reports = root / "reports"
    for seconds in ("12.5", "31.0"):  # two runs whose timings differ, as real runs' do
        _run_sample(root / "project", reports / "allure-results", seconds)
        report.build_report(reports, ENV)
    return reports


# --- fast: files we write and the summary -------------------------------------------------

def test_environment_properties_escape_keys(tmp_path: Path) -> None:
    path = report.write_environment(tmp_path, {"run id": "a=b", "url": "http://x:1"})
    assert path.read_text() == "run\\ id=a=b\nurl=http://x:1\n"


def test_categories_file_names_every_category(tmp_path: Path) -> None:
    data = json.loads(report.write_categories(tmp_path).read_text())
    names = {c["name"] for c in data}
    assert names == {"Product failures", "Canary failures", "Harness errors", "Infrastructure errors",
                     "Skipped for capability"}


def test_categories_come_from_the_declared_exception_classes() -> None:
    """A wait that ran out while the API answered is a product failure; only an unreachable
    API server (or a cluster that could not start) is infrastructure."""
    assert "ConditionNotReached" in report.PRODUCT_ERRORS and "WaitTimeout" in report.PRODUCT_ERRORS
    assert {"ApiUnreachable", "ClusterError", "PollTimeout"} <= set(report.INFRA_ERRORS)
    assert not set(report.PRODUCT_ERRORS) & set(report.INFRA_ERRORS)


def _history_ids(results: Path) -> dict[str, tuple[str, list[str]]]:
    """test name -> (historyId, parameter values) from allure-pytest's result files."""
    out = {}
    for path in results.glob("*-result.json"):
        res = json.loads(path.read_text())
        out[res["name"]] = (res["historyId"], [str(p.get("value")) for p in res.get("parameters") or []])
    return out


def test_measurements_keep_history_across_runs(tmp_path: Path) -> None:
    """Two real runs with different timings: a timing recorded through pvchaos.kit.measure
    leaves the test's historyId alone (one trend line per test); the same timing as an
    ordinary parameter gives a new identity each run (the check can fail)."""
    (tmp_path / "project").mkdir()
    _run_sample(tmp_path / "project", tmp_path / "one", seconds="12.5")
    _run_sample(tmp_path / "project", tmp_path / "two", seconds="48.0")
    one, two = _history_ids(tmp_path / "one"), _history_ids(tmp_path / "two")
    assert one["test_recovers"][1] != two["test_recovers"][1]  # the timings differ...
    assert one["test_recovers"][0] == two["test_recovers"][0]  # ...the identity does not
    assert one["test_recorded_wrongly"][0] != two["test_recorded_wrongly"][0]
    stable = {name for name in one if one[name][0] == two[name][0]}
    assert stable == set(one) - {"test_recorded_wrongly"}


def test_summary_counts_and_timings(sample: Path) -> None:
    rows = {r.suite: r for r in report.summarize(sample / "allure-results")}
    topology, races = rows["test_topology"], rows["test_races"]
    assert (topology.passed, topology.failed, topology.broken, topology.skipped) == (2, 1, 1, 1)
    assert (races.passed, races.failed, races.broken, races.skipped) == (1, 3, 1, 0)
    assert topology.times("recovery") == [12.5, 12.5]
    assert races.times("race") == [0.25]
    table = report.format_summary(list(rows.values()))
    assert "12.5" in table and "0.25" in table
    assert table.splitlines()[-1].split()[:5] == ["total", "3", "4", "2", "1"]


def test_summary_md_is_a_markdown_table(sample: Path, tmp_path: Path) -> None:
    path = report.write_summary_md(tmp_path, report.summarize(sample / "allure-results"))
    text = path.read_text()
    assert re.search(r"\| test_topology \| 2 \| 1 \| 1 \| 1 \| [\d.]+ \| 12\.5, 12\.5 \| - \|", text), text


def test_restore_history_falls_back_to_last_report(tmp_path: Path) -> None:
    (tmp_path / "html" / "history").mkdir(parents=True)
    (tmp_path / "html" / "history" / "history.jsonl").write_text("{}\n")
    work = report.restore_history(tmp_path)
    assert (work / "history.jsonl").read_text() == "{}\n"
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / "history.jsonl").write_text('{"kept": 1}\n')
    assert (report.restore_history(tmp_path) / "history.jsonl").read_text() == '{"kept": 1}\n'


def test_cli_error_is_one_line_without_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PVCHAOS_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(allure_cli.AllureCliError) as err:
        allure_cli.ensure_allure()
    assert "\n" not in str(err.value) and "not found on PATH" in str(err.value)


# --- slow: the real CLI and a real browser ------------------------------------------------

@pytest.mark.slow
def test_categories_classify_results(built: Path) -> None:
    cats = report.read_report_json(built / "html", "widgets/categories.json")["items"]
    counts = {c["name"]: c["statistic"] for c in cats}
    assert counts["Product failures"]["total"] == 3  # the assertion, ExpectationFailed, ConditionNotReached
    assert counts["Harness errors"] == {**counts["Harness errors"], "broken": 1, "total": 1}
    assert counts["Infrastructure errors"]["total"] == 1
    assert counts["Canary failures"]["total"] == 1  # a CanaryFailed is not counted as an ordinary product failure
    assert counts["Skipped for capability"]["skipped"] == 1
    tree = report.read_report_json(built / "html", "data/categories.json")
    members = {c["name"]: {t["name"] for g in c["children"] for t in g["children"]}
               for c in tree["children"]}
    assert members["Product failures"] == {"test_wrong_zone", "test_expectation", "test_wait"}
    assert members["Harness errors"] == {"test_harness_error"}
    assert members["Infrastructure errors"] == {"test_api_down"}
    assert members["Canary failures"] == {"test_canary"}


@pytest.mark.slow
def test_environment_shows(built: Path) -> None:
    env = report.read_report_json(built / "html", "widgets/environment.json")
    assert {e["name"]: e["values"] for e in env} == {k: [v] for k, v in ENV.items()}


@pytest.mark.slow
def test_history_kept_across_runs(built: Path) -> None:
    trend = report.read_report_json(built / "html", "widgets/history-trend.json")
    assert len(trend) == 2
    assert trend[0]["data"]["total"] == 10
    assert len((built / "history" / "history.jsonl").read_text().splitlines()) == 2
    assert (built / "html" / "history" / "history.jsonl").is_file()
    assert "Product failures 3" in (built / "summary.md").read_text()


@pytest.mark.slow
def test_history_has_one_line_per_test(built: Path) -> None:
    """After two runs with different timings, every test but the negative control has the
    same historyId in both history entries: one trend line per test in the report."""
    runs = [json.loads(line)["testResults"] for line in (built / "history" / "history.jsonl").read_text().splitlines()]
    names = [{r["name"]: hid for hid, r in run.items()} for run in runs]
    assert len(runs) == 2 and set(names[0]) == set(names[1])
    same = {n for n in names[0] if names[0][n] == names[1][n]}
    assert same == set(names[0]) - {"test_recorded_wrongly"}, same


@pytest.mark.slow
def test_report_is_offline(built: Path) -> None:
    assert "googletagmanager" not in (built / "html" / "index.html").read_text()


@pytest.mark.slow
def test_report_renders_in_chromium(built: Path, tmp_path: Path) -> None:
    try:
        ensure_chromium()
    except ScreenshotError as exc:
        pytest.skip(str(exc))
    png = screenshot(built / "html" / "index.html", tmp_path / "overview.png")
    assert png.stat().st_size > 20_000
    image = read_png(png)
    samples = {image.pixel(x, y) for x in range(0, image.width, 50) for y in range(0, image.height, 50)}
    assert len(samples) >= 8, f"page looks blank: {sorted(samples)[:10]}"
    if os.environ.get("PVCHAOS_SAVE_SCREENSHOT"):
        target = REPO / "docs" / "img" / "allure-overview.png"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(png, target)
