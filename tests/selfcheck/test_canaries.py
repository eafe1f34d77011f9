"""Canaries end a broken cluster's run in minutes, naming the component (issue 14).

Each case runs a cross-section of the default suites (SUITES: files with tests that rely
on each broken component, and tests that do not) in a pytest subprocess whose clusters
`broken_cluster.py` breaks, with the canaries on, and checks that:
- the run fails, no test that relies on the broken behaviour takes longer than a cluster
  start plus the canaries (PER_TEST_S: none waits out its own 60-90 s timeouts, which is
  what the canaries end), and together they stay within TOTAL_S (without canaries the
  default run with the PV binder off took 978 s, docs/self-verification.md). The total
  grows with the number of cluster configurations the suites ask for, since the first
  test on each pays its cluster's start (about 16 s here); the tests that do not rely on
  the breakage take their usual time, as they must;
- the first failure in the report is a `CanaryFailed` whose diagnosis names the broken
  component;
- tests that do not rely on the broken behaviour still run and pass (the run goes on).
The healthy control is the ordinary suite run (selfcheck and `pvchaos run`), where the
canaries must pass; docs/self-verification.md has the measured cost.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import allure
import pytest

from tests.selfcheck.broken_cluster import BREAK_ENV
from tests.selfcheck.test_detection_power import _outcomes, _stop, _sweep

pytestmark = [allure.epic("Self-verification"), allure.feature("Canaries"), pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
PER_TEST_S = 45.0  # a cluster start and its canaries, well under the suites' 60-90 s timeouts
TOTAL_S = 300.0  # the failing tests together; 978 s without canaries
RUN_TIMEOUT_S = 420.0  # a hung run is stopped and reported, never waited on for ever

# breakage -> words the first failure's diagnosis must contain
CASES = {
    "pv-binder": "is the persistentvolume-binder controller of kube-controller-manager running?",
    "volumebinding": "VolumeBinding plugin",
    # the external-provisioner is stopped: the harness knows it and says so
    "provisioner": "external-provisioner (csi-provisioner) is not running",
}


# Every suite file took about 220 s a case (three cases: 11 minutes of CI); these four
# hold tests relying on each broken component and tests that must still pass, and the
# canaries run once per cluster whatever the file list.
SUITES = ("suites/test_static_binding.py", "suites/test_binding_modes.py", "suites/test_reclaim.py",
          "suites/test_label_changes.py")


def _run(breakage: str, tmp: Path, paths: tuple[str, ...] = SUITES) -> tuple[int | None, str, Path]:
    junit = tmp / "junit.xml"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")}
    env.update({BREAK_ENV: breakage, "PVCHAOS_STATE_DIR": str(tmp / "state")})
    argv = [sys.executable, "-m", "pytest", *paths, "-p", "tests.selfcheck.broken_cluster", "-p", "no:cacheprovider",
            "-q", "-n", "2", f"--junitxml={junit}"]
    log = tmp / "output.txt"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        proc.wait(RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _stop(proc)
    finally:
        _sweep(tmp / "state")
    return proc.returncode, log.read_text(errors="replace"), junit


def _seconds(junit: Path) -> tuple[float, float]:
    """(session seconds, seconds spent in tests that failed or errored)."""
    tree = ET.parse(junit)
    failing = sum(float(tc.get("time") or 0) for tc in tree.iter("testcase")
                  if any(child.tag in ("failure", "error") for child in tc))
    return float(next(tree.iter("testsuite")).get("time") or 0), failing


def _slowest_failure(junit: Path) -> tuple[float, str]:
    """(seconds, test) of the failing test that took longest."""
    rows = [(float(tc.get("time") or 0), f"{tc.get('classname')}::{tc.get('name')}")
            for tc in ET.parse(junit).iter("testcase") if any(c.tag in ("failure", "error") for c in tc)]
    return max(rows, default=(0.0, "none"))


@pytest.mark.parametrize("breakage", sorted(CASES))
def test_a_broken_cluster_is_named_by_its_canary_within_two_minutes(breakage: str, tmp_path: Path) -> None:
    code, output, junit = _run(breakage, tmp_path)
    assert junit.exists(), f"no JUnit report; the run printed:\n{output[-3000:]}"
    outcomes = list(_outcomes(junit).values())
    failed = [o for o in outcomes if o.status in ("failed", "error")]
    session, failing = _seconds(junit)
    allure.attach(output[-20000:], "pytest output", allure.attachment_type.TEXT)
    print(f"[pvchaos] {breakage}: {len(failed)} tests failed in {failing:.0f}s of test time; session {session:.0f}s")
    assert code == 1, f"a broken cluster's run must fail (exit {code}):\n{output[-3000:]}"
    slowest = _slowest_failure(junit)
    assert slowest[0] < PER_TEST_S, \
        f"{slowest[1]} took {slowest[0]:.0f}s before failing, over {PER_TEST_S:.0f}s: it waited on its own timeout"
    assert failing < TOTAL_S, \
        f"the {len(failed)} failing tests took {failing:.0f}s, over {TOTAL_S:.0f}s:\n{output[-3000:]}"
    assert failed, "no test failed"
    first = failed[0]
    assert "CanaryFailed" in first.message and CASES[breakage] in first.message, \
        f"the first failure must be the canary's diagnosis naming the component, got {first.node_id}: {first.message}"
    passed = [o for o in outcomes if o.status == "passed"]
    assert passed, "tests that do not rely on the broken behaviour must still run and pass"


def test_a_provisioner_that_misplaces_volumes_is_named_by_the_canary(tmp_path: Path) -> None:
    """Issue 26: a driver that puts each zonal volume outside the selected node's zone
    (`wrong-zone`: pvchaos-csi --fault-misplace) fails the provisioning canary with one
    line naming the PV, its zone and the selected node, before any test runs; without
    the canary the suites would mostly pass, since the scheduler follows the volume. One
    suite file is enough: the canary runs once per cluster, before its first test."""
    code, output, junit = _run("wrong-zone", tmp_path, ("suites/test_binding_modes.py",))
    assert junit.exists(), f"no JUnit report; the run printed:\n{output[-3000:]}"
    failed = [o for o in _outcomes(junit).values() if o.status in ("failed", "error")]
    assert code == 1 and failed, f"a misplacing provisioner's run must fail (exit {code}):\n{output[-3000:]}"
    first = failed[0]
    diagnosis = first.message.split("so the test did not run: ", 1)[-1]
    assert "CanaryFailed" in first.message and "provisioned in the wrong place" in diagnosis, \
        f"the first failure must be the provisioning canary's, got {first.node_id}: {first.message}"
    assert "\n" not in diagnosis.strip(), f"one line, got: {diagnosis!r}"
