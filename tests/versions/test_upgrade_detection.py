"""The live upgrade suite fails when the upgrade breaks what it checks, naming what broke,
and passes on a healthy upgrade of the same versions (the control).

The breakage (`PVCHAOS_BREAK=upgrade-pv-binder`, tests/selfcheck/broken_cluster.py)
starts the new kube-controller-manager without its PV binder: the cluster was healthy
before the upgrade, so only the suite's checks after it can catch this.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pvchaos.tools.versions import DEFAULT_K8S_VERSION
from tests.selfcheck.broken_cluster import BREAK_ENV, PV_BINDER

ROOT = Path(__file__).resolve().parents[2]
FROM_VERSION = os.environ.get("PVCHAOS_UPGRADE_FROM", DEFAULT_K8S_VERSION)
TO_VERSION = os.environ.get("PVCHAOS_UPGRADE_TO", "v1.36.3")


def run_upgrade_suite(tmp_path: Path, breakage: str | None) -> tuple[int, str]:
    argv = [sys.executable, "-m", "pytest", str(ROOT / "suites" / "test_upgrade.py"), "-p", "no:cacheprovider",
            "-p", "tests.selfcheck.broken_cluster", "-q", "-rfEs", "--tb=line", "-p", "no:logging",
            f"--upgrade-from={FROM_VERSION}", f"--upgrade-to={TO_VERSION}"]
    env = dict(os.environ, PVCHAOS_STATE_DIR=str(tmp_path / "state"))
    env.pop(BREAK_ENV, None)
    if breakage:
        env[BREAK_ENV] = breakage
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    out = done.stdout + done.stderr
    assert "INTERNALERROR" not in out, out[-3000:]
    return done.returncode, out


@pytest.mark.slow
def test_healthy_upgrade_passes(tmp_path: Path) -> None:
    code, out = run_upgrade_suite(tmp_path, None)
    assert code == 0, out[-3000:]
    assert "1 passed" in out and "kube-apiserver:" in out and "unavailable" in out, out[-3000:]


@pytest.mark.slow
def test_upgrade_without_pv_binder_fails_naming_it(tmp_path: Path) -> None:
    code, out = run_upgrade_suite(tmp_path, "upgrade-pv-binder")
    assert code == 1, out[-3000:]
    assert "FAILED" in out and "test_live_upgrade" in out, out[-3000:]
    failure = next(line for line in out.splitlines() if "ExpectationFailed" in line or "AssertionError" in line)
    assert f"after the upgrade {FROM_VERSION} -> {TO_VERSION}" in failure, failure
    assert PV_BINDER.removesuffix("-controller") in failure, failure
