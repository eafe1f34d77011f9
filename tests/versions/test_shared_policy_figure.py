"""The shared-policy measurement (suites/test_shared_policy.py, marked `long`) on a local
cluster: both tests pass and their settle times reach the run summary's recovery column.

Tier `versions`, on request only (`bin/pvchaos selftest --tier versions`): two StatefulSets
of 30 replicas, a few minutes on 2 cores.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from pvchaos.compare_runs import load_run

REPO = Path(__file__).resolve().parents[2]


def test_shared_policy_settle_times_are_in_the_summary(tmp_path: Path) -> None:
    out = tmp_path / "shared"
    proc = subprocess.run([str(REPO / "bin" / "pvchaos"), "run", "--suites", "shared_policy",
                           "--workers", "1", "--report-dir", str(out), "--", "--long"], cwd=REPO, capture_output=True, text=True,
                          env=dict(os.environ), timeout=30 * 60, check=False)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    run = load_run(out, "local")
    statuses = {t: r["status"] for t, r in run.results.items()}
    assert len(statuses) == 2 and set(statuses.values()) == {"passed"}, statuses
    summary = (out / "summary.md").read_text()
    row = next(line for line in summary.splitlines() if line.startswith("| test_shared_policy |"))
    recovery = row.split("|")[7].strip()
    assert recovery not in ("", "-"), f"no settle time in the summary's recovery column: {row}"
