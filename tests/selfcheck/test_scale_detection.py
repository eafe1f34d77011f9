"""Detection power of the scale suite: its storm fails on a cluster whose PV binder is
disabled (kube-controller-manager without persistentvolume-binder-controller), with a
message naming the PV controller, and passes on a healthy cluster of the same size.
Both runs start together (test_detection_power.run_cases), each with a private state
directory, and whatever they leave is downed."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import allure
import pytest

from tests.selfcheck.test_detection_power import EXPECTATION_ERRORS, Case, Run, run_cases

pytestmark = [allure.epic("Self-verification"), allure.feature("Detection power"), pytest.mark.slow]

STORM = "suites/test_scale.py::test_storm"
SIZE = "15x30"  # small: the breakage shows at any size
TIMEOUT = 420.0
HEALTHY = Case("", {}, must_pass=(STORM,))
PV_BINDER = Case("pv-binder", {STORM: r"PV controller"})


def _command(case: Case, junit: Path) -> list[str]:
    return [sys.executable, "-m", "pytest", *case.node_ids, "-p", "tests.selfcheck.broken_cluster",
            "-p", "no:cacheprovider", "-q", f"--junitxml={junit}", "--no-canaries", "--scale",
            f"--scale-size={SIZE}"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    return run_cases((HEALTHY, PV_BINDER), _command, tmp_path_factory, TIMEOUT)


def test_storm_passes_on_a_healthy_cluster(runs: dict[str, Run]) -> None:
    run = runs[""]
    outcome = run.outcomes.get(STORM)
    assert outcome is not None and outcome.status == "passed", (
        f"healthy storm: {outcome}; exit {run.returncode}, timed out {run.timed_out}\n{run.output[-3000:]}")


def test_storm_fails_without_the_pv_binder_naming_it(runs: dict[str, Run]) -> None:
    run = runs["pv-binder"]
    outcome = run.outcomes.get(STORM)
    assert not run.timed_out and run.returncode not in (0, None), f"exit {run.returncode}\n{run.output[-3000:]}"
    assert outcome is not None and outcome.status == "failed", f"{outcome}\n{run.output[-3000:]}"
    assert outcome.error_type in EXPECTATION_ERRORS, f"not an expectation failure: {outcome.message[:500]}"
    assert re.search(PV_BINDER.must_fail[STORM], outcome.message), f"does not name the PV controller: {outcome.message[:500]}"
