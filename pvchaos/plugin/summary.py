"""The session-end table (suites, counts, recovery times, race windows) under plain
`pytest`, as `pvchaos run` prints it: a team running its own suite with pytest gets its
measurements without Allure results or the runner.

Measurements travel on each test's report (`user_properties`), so xdist workers' figures
reach the controller. `pvchaos run` prints its own table from the Allure results and
turns this one off (`--no-pvchaos-summary`), so a run shows it once.

Where each test's time went (cluster starts, Kubernetes timers, the harness's waits, the
body: pvchaos.kube.spent) rides the same way, and lands in JUnit's properties too, where
`pvchaos run` reads it; `--pvchaos-time-spent` tables it for every test file, not only the
suites' tests (what `pvchaos selftest` asks for).
"""

from __future__ import annotations

from collections.abc import Generator

import pluggy
import pytest

from pvchaos.kit import measure
from pvchaos.kube import spent
from pvchaos.report import GROUP, SPENT, SuiteRow, format_summary, format_time_spent, time_rows

MEASURED = "pvchaos measured: "  # user_properties key prefix + the measurement's name
ON_CLUSTER = "pvchaos cluster"  # user_properties key: the test used a pvchaos cluster (only those are tabled)
_SPENT_BEFORE = pytest.StashKey[dict[str, float]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("pvchaos").addoption(
        "--no-pvchaos-summary", action="store_true", dest="no_pvchaos_summary",
        help="do not print the suites/recovery table at the end (pvchaos run prints its own)")
    parser.getgroup("pvchaos").addoption(
        "--pvchaos-time-spent", action="store_true", dest="pvchaos_time_spent",
        help="table where every test file's time went (cluster starts, Kubernetes timers, harness waits, bodies)")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """The charged totals before the test's fixtures start (a cluster start is set-up)."""
    item.stash[_SPENT_BEFORE] = spent.totals()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, pluggy.Result[pytest.TestReport], None]:
    """Move what the test measured onto its report, once per test (at teardown)."""
    if call.when == "setup":
        measure.RECORDED.clear()
    outcome = yield
    report = outcome.get_result()
    on_cluster = "cluster" in getattr(item, "fixturenames", ())
    if call.when == "teardown":
        report.user_properties.extend((MEASURED + name, value) for name, value in measure.RECORDED)
        measure.RECORDED.clear()
        charged = spent.since(item.stash.get(_SPENT_BEFORE, spent.totals()))
        report.user_properties.extend((SPENT + name, f"{value:.3f}") for name, value in charged.items())
        report.user_properties.append((GROUP, _suite(item.nodeid) if on_cluster else item.nodeid.split("::", 1)[0]))
    if on_cluster:
        report.user_properties.append((ON_CLUSTER, True))


def _suite(nodeid: str) -> str:
    """`suites/test_node_failure.py::test_x[a]` -> `node_failure`."""
    return nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py").removeprefix("test_")


class SessionTable:
    """Collects every test's outcome, duration and measurements; prints the table."""

    def __init__(self, every_file: bool = False) -> None:
        self.rows: dict[str, tuple[str, str, float, list[tuple[str, float]]]] = {}
        self.every_file = every_file  # time every test file, not only the suites' tests
        self.durations: dict[str, float] = {}  # nodeid -> setup + call + teardown seconds
        self.spent: list[tuple[str, float, dict[str, float]]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        on_cluster = any(key == ON_CLUSTER for key, _ in report.user_properties)
        if on_cluster or self.every_file:
            self._time(report)
        if not on_cluster:
            return  # not a pvchaos suite test (the harness's own unit tests, a team's plain tests)
        suite, outcome, seconds, timings = self.rows.get(report.nodeid, (_suite(report.nodeid), "passed", 0.0, []))
        if report.when == "call":
            seconds = report.duration
        if report.failed:
            outcome = "failed" if report.when == "call" else "broken"
        elif report.skipped and outcome == "passed":
            outcome = "skipped"
        for key, value in report.user_properties:
            if isinstance(key, str) and key.startswith(MEASURED):
                try:
                    timings.append((key.removeprefix(MEASURED), float(str(value))))
                except (TypeError, ValueError):
                    continue
        self.rows[report.nodeid] = (suite, outcome, seconds, timings)

    def _time(self, report: pytest.TestReport) -> None:
        self.durations[report.nodeid] = self.durations.get(report.nodeid, 0.0) + report.duration
        if report.when != "teardown":
            return
        props = {k: v for k, v in report.user_properties if isinstance(k, str)}
        if GROUP in props:
            charged = {k.removeprefix(SPENT): float(str(v)) for k, v in props.items() if k.startswith(SPENT)}
            self.spent.append((str(props[GROUP]), self.durations.pop(report.nodeid), charged))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.spent:
            terminalreporter.write_sep("=", "pvchaos: where the time went")
            terminalreporter.write_line(format_time_spent(time_rows(self.spent)))
        if not self.rows:
            return
        by_suite: dict[str, SuiteRow] = {}
        for suite, outcome, seconds, timings in self.rows.values():
            row = by_suite.setdefault(suite, SuiteRow(suite))
            setattr(row, outcome, getattr(row, outcome) + 1)
            row.test_seconds += seconds
            for name, value in timings:
                row.timings.setdefault(name, []).append(value)
        terminalreporter.write_sep("=", "pvchaos summary")
        terminalreporter.write_line(format_summary([by_suite[k] for k in sorted(by_suite)]))


def pytest_configure(config: pytest.Config) -> None:
    """The table is the controller's (or the only process's), unless turned off."""
    if not hasattr(config, "workerinput") and not config.getoption("no_pvchaos_summary", False):
        config.pluginmanager.register(SessionTable(config.getoption("pvchaos_time_spent", False)),
                                      "pvchaos-session-table")
