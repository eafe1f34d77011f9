"""`--quick` (issue 38): one core test of every suite the default run has, and nothing else."""

from __future__ import annotations

import re
import subprocess
import sys

from pvchaos.clusters.options import REPO_ROOT, Options
from pvchaos.runner import known_suites, pytest_argv

NOT_IN_THE_DEFAULT_RUN = {"scale", "upgrade", "shared_policy"}  # deselected unless --scale, --upgrade-to, --long


def test_quick_selects_one_core_test_of_every_suite_of_the_default_run() -> None:
    proc = subprocess.run([sys.executable, "-m", "pytest", "suites", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "--quick"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    quick = [line for line in proc.stdout.splitlines() if "::" in line]
    counts = re.search(r"(\d+)/(\d+) tests? collected \((\d+) deselected\)", proc.stdout)
    assert counts, proc.stdout[-500:]
    per_suite: dict[str, list[str]] = {}
    for nodeid in quick:
        per_suite.setdefault(nodeid.split("::")[0].removeprefix("suites/test_").removesuffix(".py"), []).append(nodeid)
    assert set(per_suite) == set(known_suites()) - NOT_IN_THE_DEFAULT_RUN, per_suite
    assert all(len(ids) == 1 for ids in per_suite.values()), per_suite
    assert len(quick) == int(counts[1]) and int(counts[1]) * 3 < int(counts[2]), "a small part of the full run"


def test_run_passes_quick_to_pytest() -> None:
    assert "--quick" in pytest_argv(Options(quick=True)) and "--quick" not in pytest_argv(Options())
