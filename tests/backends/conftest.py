"""Fixtures for backend tests: recording stand-ins for `kind` and `docker`, kind's own
config checker built from Go, and a cluster the harness treats as foreign."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pvchaos.tools.build import REPO_ROOT, cache_root
from pvchaos.tools.nodeimage.recipe import KIND_VERSION

# A stand-in executable: appends its argv (as JSON) to $FAKE_LOG, then behaves as the
# environment says: FAKE_<TOOL>_<SUBCOMMAND>_RC / _OUT / _ERR, e.g. FAKE_DOCKER_INFO_RC=1.
FAKE = '''#!{python}
import json, os, sys
tool = os.path.basename(sys.argv[0])
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(json.dumps([tool, *sys.argv[1:]]) + "\\n")
sub = (sys.argv[1] if len(sys.argv) > 1 else "").replace("-", "_").upper()
key = f"FAKE_{{tool.upper()}}_{{sub}}"
sys.stdout.write(os.environ.get(key + "_OUT", ""))
sys.stderr.write(os.environ.get(key + "_ERR", ""))
sys.exit(int(os.environ.get(key + "_RC", "0")))
'''


@dataclass
class Recorder:
    """Fake tools on PATH and the commands they were called with."""

    bin_dir: Path
    log: Path
    monkeypatch: pytest.MonkeyPatch

    def calls(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def set(self, tool: str, sub: str, rc: int = 0, out: str = "", err: str = "") -> None:
        key = f"FAKE_{tool.upper()}_{sub.replace('-', '_').upper()}"
        self.monkeypatch.setenv(key + "_RC", str(rc))
        self.monkeypatch.setenv(key + "_OUT", out)
        self.monkeypatch.setenv(key + "_ERR", err)

    def remove(self, tool: str) -> None:
        (self.bin_dir / tool).unlink()


@pytest.fixture
def recorder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Recorder:
    """`kind` and `docker` stand-ins as the only things on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("kind", "docker"):
        exe = bin_dir / tool
        exe.write_text(FAKE.format(python=sys.executable))
        exe.chmod(0o755)
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("FAKE_LOG", str(log))
    return Recorder(bin_dir, log, monkeypatch)


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        pytest.skip("no Go toolchain on PATH: kind's own config checks need it")
    return go


def _go_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, CGO_ENABLED="0", **extra)
    env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -mod=mod -buildvcs=false").strip()
    return env


@pytest.fixture(scope="session")
def kindcheck(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tools/kindcheck built from source: kind v0.33.0's loader, validator and patcher."""
    go = _go()
    out = tmp_path_factory.mktemp("kindcheck") / "kindcheck"
    proc = subprocess.run([go, "build", "-o", str(out), "."], cwd=REPO_ROOT / "pvchaos" / "tools" / "kindcheck",
                          env=_go_env(), capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, f"building pvchaos/tools/kindcheck failed: {proc.stderr[-2000:]}"
    return out


@pytest.fixture(scope="session")
def kind_binary() -> Path:
    """The real kind CLI, `go install`ed once into the cache."""
    target = cache_root() / "bin" / f"kind-{KIND_VERSION}" / "kind"
    if not target.exists():
        go = _go()
        target.parent.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run([go, "install", f"sigs.k8s.io/kind@{KIND_VERSION}"], cwd=target.parent,
                              env=_go_env(GOBIN=str(target.parent)), capture_output=True, text=True, timeout=900, check=False)
        assert proc.returncode == 0, f"go install sigs.k8s.io/kind@{KIND_VERSION} failed: {proc.stderr[-2000:]}"
    return target


@pytest.fixture(scope="session")
def foreign_kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A local cluster (3 zones x 1 node, gate on) that the tests reach only through its
    kubeconfig, as a cluster the harness did not create."""
    from pvchaos.clusters.local.config import LocalClusterConfig
    from pvchaos.clusters.topology import Topology

    yield from _private_cluster(tmp_path_factory, LocalClusterConfig(
        name="foreign", provisioner=False, topology=Topology(nodes_per_zone=1)))


def _private_cluster(tmp_path_factory: pytest.TempPathFactory, cfg: Any) -> Iterator[Path]:
    """Start a local cluster in a state directory of its own; yield its kubeconfig; tear down."""
    from pvchaos.clusters.local.cluster import LocalCluster

    mp = pytest.MonkeyPatch()
    mp.setenv("PVCHAOS_STATE_DIR", str(tmp_path_factory.mktemp(f"{cfg.name}-state")))
    cluster = LocalCluster(cfg)
    try:
        yield cluster.up().kubeconfig
    finally:
        cluster.down()
        mp.undo()


@pytest.fixture(scope="module")
def gate_off_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A private one-node local cluster with MutablePVNodeAffinity off, for the gate-off
    probe and for sweeping (nothing else runs on it, so exact assertions are safe)."""
    from pvchaos.clusters.local.config import MUTABLE_PV_GATE, LocalClusterConfig
    from pvchaos.clusters.topology import Topology

    yield from _private_cluster(tmp_path_factory, LocalClusterConfig(
        name="gateoff", feature_gates={MUTABLE_PV_GATE: False}, provisioner=False,
        topology=Topology(zones=("zone-a",), nodes_per_zone=1)))
