"""summary.md lists the timings its table has no column for (the volume stress suite's),
so they reach the summary as well as the Allure result."""

from __future__ import annotations

from pathlib import Path

from pvchaos import report


def test_timings_without_a_column_get_their_own_table(tmp_path: Path) -> None:
    stress = report.SuiteRow("test_volume_stress", passed=1, timings={
        "all pods Running seconds": [14.2], "all pods, claims and volumes gone seconds": [21.0]})
    node = report.SuiteRow("test_node_failure", passed=2, timings={"recovery seconds": [40.1, 38.0]})
    text = report.write_summary_md(tmp_path, [stress, node]).read_text()
    assert "## Measurements" in text
    assert "| test_volume_stress | all pods Running | 14.2 |" in text
    assert "| test_volume_stress | all pods, claims and volumes gone | 21 |" in text
    assert "test_node_failure | recovery" not in text, "recovery times have their column in the table"


def test_no_section_without_such_timings(tmp_path: Path) -> None:
    node = report.SuiteRow("test_node_failure", passed=1, timings={"recovery seconds": [40.1]})
    assert "## Measurements" not in report.write_summary_md(tmp_path, [node]).read_text()
