"""`pvchaos report merge --history PREV` with the real Allure CLI: a second night's merge
continues the first night's trend (two entries), and the next night's shards can balance
their split by the merged history's durations."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pvchaos import report
from pvchaos.plugin.sharding import read_durations
from pvchaos.report_merge import merge
from tests.unit.test_report_merge import SELECTED, _report_dir, _shards


@pytest.mark.slow
def test_merge_carries_history_forward(tmp_path: Path) -> None:
    if not (shutil.which("node") and shutil.which("npm")):
        pytest.skip("no node/npm on PATH: the Allure CLI cannot be installed")
    for night in ("one", "two"):
        dirs = [_report_dir(tmp_path / night / f"s{k}", s.record) for k, s in enumerate(_shards(2), 1)]
        previous = tmp_path / "one" / "merged" if night == "two" else None
        assert merge(tmp_path / night / "merged", dirs, history=previous) == 1  # one test fails, as made
    out = tmp_path / "two" / "merged"
    assert len((out / "history" / "history.jsonl").read_text().splitlines()) == 2
    trend = report.read_report_json(out / "html", "widgets/history-trend.json")
    assert len(trend) == 2 and trend[0]["data"]["total"] == len(SELECTED)
    durations = read_durations(str(out / "history"))
    assert set(durations) == set(SELECTED) and all(d == 2.0 for d in durations.values())
