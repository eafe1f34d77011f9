"""Where the time goes (issue 38): waits and cluster starts charge kube.spent, the plugin
puts each test's share on its report and JUnit properties, and the tables add it up."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from pvchaos import report
from pvchaos.kube import spent


def test_only_the_outermost_charge_of_the_main_thread_counts() -> None:
    before = spent.totals()
    with spent.charged(spent.CLUSTERS):
        with spent.charged(spent.WAITS):  # a poll inside a cluster start is the start's
            time.sleep(0.05)
    worker = threading.Thread(target=lambda: spent.charged(spent.TIMERS).__enter__())
    worker.start()
    worker.join()
    charged = spent.since(before)
    assert charged[spent.CLUSTERS] >= 0.05
    assert charged[spent.WAITS] == 0 and charged[spent.TIMERS] == 0


def test_an_unknown_category_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown time category"), spent.charged("naps"):
        pass


def test_the_body_is_the_rest_and_never_negative() -> None:
    parts = spent.split(10.0, {spent.TIMERS: 6.0, spent.WAITS: 1.0})
    assert parts[spent.BODIES] == pytest.approx(3.0) and parts[spent.CLUSTERS] == 0
    assert spent.split(1.0, {spent.TIMERS: 1.2})[spent.BODIES] == 0


def test_a_session_tables_and_records_where_each_test_spent_its_time(pytester: pytest.Pytester,
                                                                     tmp_path: Path) -> None:
    pytester.makepyfile(test_naps="""
        import time
        from pvchaos.kube import spent

        def test_sits_out_a_timer():
            with spent.charged(spent.TIMERS):
                time.sleep(0.3)

        def test_waits_then_works():
            with spent.charged(spent.WAITS):
                time.sleep(0.1)
            time.sleep(0.2)
    """)
    junit = tmp_path / "junit.xml"
    result = pytester.runpytest("-p", "no:cacheprovider", "--pvchaos-time-spent", f"--junitxml={junit}")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*pvchaos: where the time went*", "test_naps.py*2*"])
    rows, wall = report.time_from_junit(junit)
    assert [r.group for r in rows] == ["test_naps.py"] and rows[0].tests == 2 and wall is not None
    seconds = rows[0].seconds
    # lower bounds only: a loaded machine oversleeps, never undersleeps
    assert seconds[spent.TIMERS] >= 0.3 and seconds[spent.WAITS] >= 0.1 and seconds[spent.BODIES] >= 0.2
    assert seconds[spent.CLUSTERS] == 0 and seconds[spent.WAITS] < seconds[spent.TIMERS] + 0.2
    table = report.format_time_spent(rows, wall)
    assert "Kubernetes timers" in table and "session wall time" in table
    assert "## Where the time went" in "\n".join(report.time_spent_md(rows, wall))
