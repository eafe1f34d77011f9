"""pvchaos as a team outside this repository uses it: `pip install` it into a fresh
virtualenv, write a suite in a directory of its own with the kit only, run pytest there.

The suite reproduces two of upstream's volume-scheduling integration scenarios
(test/integration/volumescheduling): a WaitForFirstConsumer claim is bound where the
scheduler put its pod (selected-node annotation, pod scheduled before Running), and a
pod whose claim does not exist stays Unschedulable (PodScheduled=False, no message key
needed). Nothing here imports from this checkout: the plugin comes from the installed
package's `pytest11` entry point.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SUITE = '''
    """A team's own suite, written with the pvchaos kit only."""

    import pytest

    from pvchaos.kube import builders as b
    from pvchaos.kube.objects import SELECTED_NODE, node_name, zone
    from pvchaos.kit import expect as x
    from pvchaos.kit.workspace import Workspace

    pytestmark = pytest.mark.needs("zones", "dynamic-zonal")


    def test_wait_for_first_consumer_binds_where_the_pod_goes(ws: Workspace) -> None:
        target = ws.zones()[-1]
        sc = ws.storage_class("wffc", "WaitForFirstConsumer")
        ws.create(b.persistent_volume_claim("data", "1Gi", sc, annotations={"team.example.com/owner": "storage"}))
        ws.create(b.pod("app", ("data",), node_selector={"topology.kubernetes.io/zone": target}))
        pod = x.pod_scheduled(ws, "app")
        assert x.claim_annotation(ws, "data", SELECTED_NODE) == node_name(pod)
        assert zone(x.node_of(ws, "app")) == target
        x.pod_runs(ws, "app")
        x.phase_now(ws, "PersistentVolumeClaim", "data", "Bound")


    def test_pod_with_a_missing_claim_is_unschedulable(ws: Workspace) -> None:
        ws.create(b.pod("orphan", ("no-such-claim",)))
        pod = x.pod_unschedulable(ws, "orphan")
        assert node_name(pod) is None
'''


def _venv(root: Path) -> Path:
    """A fresh virtualenv with pvchaos installed (not editable) from a copy of this
    checkout's tracked files: a build never writes into the checkout."""
    source = root / "pvchaos-src"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "-r", str(REPO / "requirements.lock")], check=True, timeout=900)
    subprocess.run([*pip, "--no-deps", str(source)], check=True, timeout=600, cwd=root)
    return venv


@pytest.mark.slow
def test_a_suite_outside_the_repository_runs_from_a_fresh_virtualenv(tmp_path: Path) -> None:
    project = tmp_path / "team-storage-tests"
    (project / "tests").mkdir(parents=True)
    (project / "tests" / "test_volume_scheduling.py").write_text(textwrap.dedent(SUITE))
    (project / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider -rs\n")
    venv = _venv(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHON"))}
    env["PVCHAOS_STATE_DIR"] = str(tmp_path / "state")
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pytest", "tests", "--zones=2"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert "2 passed" in out, out[-2000:]
    assert "plugins:" in out and "pvchaos" in out.split("plugins:", 1)[1].splitlines()[0], "loaded by entry point"
    site = next((venv / "lib").glob("python3*/site-packages"))
    assert (site / "pvchaos" / "kube" / "kinds.py").is_file() and not (site / "pvchaos" / "kube" / "kinds.py").is_symlink()
    left = [p.name for p in (tmp_path / "state").glob("*") if p.name != ".lock"]  # the registry's lock file stays
    assert not left, f"the run left clusters behind: {left}"
