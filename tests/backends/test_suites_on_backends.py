"""The same suites on an existing cluster and with a driver profile: they run what the
cluster and driver can do, skip the rest with the reason, and leave nothing behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pvchaos.kube.client import connect

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "docs" / "examples" / "driver-profile.yaml"


def pytest_suites(tmp_path: Path, *args: str) -> tuple[int, str]:
    env = dict(os.environ, PVCHAOS_STATE_DIR=str(tmp_path / "state"))
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    return done.returncode, done.stdout + done.stderr


@pytest.mark.slow
def test_existing_backend_runs_safe_suites_and_refuses_disruptive(foreign_kubeconfig: Path, tmp_path: Path) -> None:
    code, out = pytest_suites(tmp_path, "suites/test_static_binding.py", "suites/test_node_failure.py",
                              "--backend", "existing", "--kubeconfig", str(foreign_kubeconfig))
    assert code == 0, out[-3000:]
    assert re.search(r"\b17 passed\b", out), out[-2000:]
    refusals = re.findall(r"context 'pvchaos-foreign' is a cluster pvchaos did not create", out)
    assert len(refusals) == 6, out[-3000:]  # every node_failure test refused, naming the context
    kube = connect(foreign_kubeconfig)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # namespaces are deleted asynchronously
            left = [n.metadata.name for n in kube.core.list_namespace().items if n.metadata.name.startswith("pvchaos-")]
            if not left:
                break
            time.sleep(0.5)
        assert not left, f"namespaces left behind: {left}"
        pvs = [p.metadata.name for p in kube.core.list_persistent_volume().items]
        assert not pvs, f"PVs left behind: {pvs}"
    finally:
        kube.api.close()


@pytest.mark.slow
def test_profile_without_topology_skips_topology_suites(tmp_path: Path) -> None:
    profile = tmp_path / "no-topology.yaml"
    profile.write_text(PROFILE.read_text().replace("    topology: true", "    topology: false"))
    code, out = pytest_suites(tmp_path, "suites/test_binding_modes.py", "suites/test_spreading.py",
                              f"--profile={profile}")
    assert code == 0, out[-3000:]
    assert re.search(r"\b8 skipped\b", out), out[-2000:]
    assert "driver zonal.csi.pvchaos.dev: no topology (profile capability topology=false: not supported)" in out, out[-2000:]
