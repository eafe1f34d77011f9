"""`pvchaos compare` ends in a real Allure report: the changes sit in their own category,
both runs are in it, and the comparison's environment is shown (binaries tier: needs the
Allure CLI, no cluster)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pvchaos import report
from pvchaos.cli import main

DATA = Path(__file__).parent.parent / "unit" / "data" / "compare"


def test_compare_report_has_the_behaviour_changes_category(tmp_path: Path) -> None:
    if not (shutil.which("node") and shutil.which("npm")):
        pytest.skip("no node/npm on PATH: the Allure CLI cannot be installed")
    out = tmp_path / "cmp"
    assert main(["compare", str(DATA / "healthy"), str(DATA / "broken"), "--report-dir", str(out)]) == 1
    cats = {c["name"]: c["statistic"] for c in report.read_report_json(out / "html", "widgets/categories.json")["items"]}
    assert cats["Behaviour changes between the compared runs"]["failed"] == 2, cats
    env = {e["name"]: e["values"] for e in report.read_report_json(out / "html", "widgets/environment.json")}
    assert env["kubernetes"] == ["A: v1.35.4; B: v1.35.4"]
    assert any(k.startswith("gate ") for k in env), env
    summary = report.read_report_json(out / "html", "widgets/summary.json")["statistic"]
    assert summary["total"] == 3 + 3 + 2 + 1, summary  # both runs, two changes, the summary result
