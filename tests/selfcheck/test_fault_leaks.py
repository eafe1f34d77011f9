"""A disruptive test that leaves a fault behind (a node down, a label changed) must be
reported at teardown, not silently passed on to the next test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

LEAKY = '''
import pytest
from pvchaos.chaos import labels
from pvchaos.kube import kinds

@pytest.mark.disruptive
def test_forgets_to_restore_a_node(ws):
    ws.cluster.faults.stop_node("zone-a-1")      # no undo registered: a leak

@pytest.mark.disruptive
def test_forgets_to_restore_a_label(ws):

    kinds.patch(ws.kube, "Node", "zone-b-1", {"metadata": {"labels": {"storage": "gold"}}})

@pytest.mark.disruptive
def test_restores_properly(ws):
    labels.set_node_labels(ws, "zone-c-1", {"storage": "gold"})
'''


@pytest.mark.slow
def test_leaked_faults_fail_at_teardown(tmp_path: Path) -> None:
    (tmp_path / "test_leaky.py").write_text(LEAKY)
    env = dict(os.environ, PVCHAOS_STATE_DIR=str(tmp_path / "state"))
    done = subprocess.run([sys.executable, "-m", "pytest", str(tmp_path / "test_leaky.py"), "-p", "no:cacheprovider",
                           "-q", "--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-3000:]
    assert "ERROR" in out and "test_forgets_to_restore_a_node" in out
    assert "nodes ['zone-a-1'] still have no heartbeat" in out, out[-3000:]
    assert "zone-b-1: labels" in out and "fault left injected" in out, out[-3000:]
    assert "3 passed, 2 errors" in out, out[-1500:]
