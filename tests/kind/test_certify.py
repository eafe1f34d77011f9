"""`pvchaos certify` end to end on kind, with the vendor-shaped packages in examples/:
the good one passes every row it runs, with its own volumes as evidence, and a short run
is NOT CERTIFIED naming exactly the capabilities it never exercised (the full run,
`bin/pvchaos certify --driver-dir examples/vendor-driver`, certifies: nightly and
docs/certify.md); the broken one fails naming the missing topology key (exit 1), a
driver that never registers and a manifest the API refuses end in one line and exit 2
within the wait bound, and no cluster is left behind by any of them.

Each case is one `bin/pvchaos certify` with a cluster of its own (3 zones x 1 worker).
Skipped where no Docker engine answers and none can be started.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pvchaos.tools.docker_engine import EngineError, docker, ensure_engine

pytestmark = [pytest.mark.kind, pytest.mark.xdist_group("kind")]
REPO = Path(__file__).resolve().parents[2]
GOOD = REPO / "examples" / "vendor-driver"
BROKEN = REPO / "examples" / "vendor-driver-broken"
ZONE = "topology.kubernetes.io/zone"


@pytest.fixture(scope="module")
def images() -> Path:
    try:
        ensure_engine()
    except EngineError as exc:
        pytest.skip(f"no Docker engine here and none can be started: {exc}")
    proc = subprocess.run([sys.executable, str(GOOD / "build.py")], capture_output=True, text=True, timeout=1800,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return GOOD / "images"


def certify(directory: Path, report: Path, *extra: str, timeout: float = 1500) -> subprocess.CompletedProcess[str]:
    start = time.monotonic()
    proc = subprocess.run([str(REPO / "bin" / "pvchaos"), "certify", "--driver-dir", str(directory), "--report-dir",
                           str(report), *extra], capture_output=True, text=True, timeout=timeout, check=False, cwd=REPO)
    print(f"certify {directory.name}: exit {proc.returncode} in {time.monotonic() - start:.0f}s", file=sys.stderr)
    return proc


def no_certify_cluster_left() -> None:
    engine = ensure_engine()
    listed = docker(engine, ["ps", "-a", "--filter", "label=io.x-k8s.kind.cluster",
                             "--format", '{{.Label "io.x-k8s.kind.cluster"}}'])
    left = sorted({c for c in listed.stdout.split() if c.startswith("certify-")})
    assert not left, f"certify left kind clusters behind: {left}"


def variant(tmp_path: Path, name: str) -> Path:
    """A copy of the good package (images linked) to break in one place."""
    out = tmp_path / name
    out.mkdir()
    for f in GOOD.glob("*.yaml"):
        shutil.copy(f, out / f.name)
    (out / "images").symlink_to(GOOD / "images")
    return out


# The good package's run is kept short for CI: two suites of the default tiers (the whole
# set is docs/certify.md's; `bin/pvchaos certify --driver-dir examples/vendor-driver`).
FAST_SUITES = ("--suites", "binding_modes,reclaim", "--nodes-per-zone", "1")


def test_the_vendor_package_passes_with_evidence_and_a_short_run_is_not_certified(images: Path,
                                                                                 tmp_path: Path) -> None:
    proc = certify(GOOD, tmp_path / "r", *FAST_SUITES)
    assert proc.returncode == 1, proc.stderr[-3000:] + proc.stdout[-3000:]
    cert = json.loads((tmp_path / "r" / "certification.json").read_text())
    assert cert["verdict"] == "NOT CERTIFIED" and cert["driver"] == "vendor.csi.pvchaos.dev"
    outcome = {c["capability"]: c["outcome"] for c in cert["capabilities"]}
    # binding_modes runs pods on the driver's volumes: provisioned, pinned, attached, published
    for cap in ("dynamic-provisioning", "topology", "attach", "publish", "access-mode ReadWriteOnce"):
        assert outcome.pop(cap) == "exercised", cert["capabilities"]
    # the suites that exercise the rest (csi_topology, fs_group, snapshots, inline_ephemeral, block_volumes,
    # expansion) were not run
    assert outcome == {"volume-limits": "not exercised", "fsgroup": "not exercised", "snapshots": "not exercised",
                       "clones": "not exercised", "inline-ephemeral": "not exercised",
                       "volume-mode Block": "not exercised", "expansion": "not exercised",
                       "modify-volume": "not exercised"}, cert["capabilities"]
    by_suite = {r["suite"]: r for r in cert["rows"]}
    assert by_suite["binding_modes"]["provisioned"] > 0 and by_suite["binding_modes"]["published"] > 0
    assert cert["driver_version"] == "0.1.0" and cert["k8s_version"].startswith("v1.")
    # the version is the driver's own answer, asked on a worker through its node plugin socket
    assert cert["plugin_name"] == "vendor.csi.pvchaos.dev", cert["version_source"]
    assert cert["version_source"].startswith("GetPluginInfo on node zone-"), cert["version_source"]
    assert set(by_suite) == {"binding_modes", "reclaim"}
    assert all(r["outcome"] != "failed" for r in cert["rows"]), cert["rows"]
    assert any(r["outcome"] == "passed" for r in cert["rows"])
    assert cert["findings"] == [] and cert["disagreements"] == []
    assert ZONE in cert["discovered"]["topology"]
    assert (tmp_path / "r" / "certification.md").exists() and (tmp_path / "r" / "html" / "index.html").exists()
    no_certify_cluster_left()


def test_the_broken_package_names_the_missing_topology(images: Path, tmp_path: Path) -> None:
    proc = certify(BROKEN, tmp_path / "r", *FAST_SUITES)
    assert proc.returncode == 1, proc.stderr[-3000:]
    text = (tmp_path / "r" / "certification.md").read_text()
    assert "**FAILED**" in text and ZONE in text
    cert = json.loads((tmp_path / "r" / "certification.json").read_text())
    assert any(ZONE in d for d in cert["disagreements"]), cert["disagreements"]
    no_certify_cluster_left()


def test_a_driver_that_never_registers_is_exit_2(images: Path, tmp_path: Path) -> None:
    pkg = variant(tmp_path, "never")
    node = pkg / "04-node.yaml"
    text = node.read_text()
    registry = "hostPath: {path: /var/lib/kubelet/plugins_registry, type: Directory}"
    assert registry in text, "the example's registrar no longer mounts the kubelet's registry this way"
    node.write_text(text.replace(registry, "hostPath: {path: /var/lib/kubelet/not-the-registry, type: DirectoryOrCreate}"))
    start = time.monotonic()
    proc = certify(pkg, tmp_path / "r", "--wait-timeout", "45")
    assert proc.returncode == 2, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("pvchaos: ") and "registration of vendor.csi.pvchaos.dev in the CSINode" in last, last
    assert (tmp_path / "r" / "certify-logs").is_dir()
    assert time.monotonic() - start < 900
    no_certify_cluster_left()


def test_a_manifest_that_fails_to_apply_is_exit_2(images: Path, tmp_path: Path) -> None:
    pkg = variant(tmp_path, "badapply")
    sc = pkg / "05-storageclass.yaml"
    sc.write_text(sc.read_text().replace("WaitForFirstConsumer", "Sometimes"))
    proc = certify(pkg, tmp_path / "r")
    assert proc.returncode == 2, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("pvchaos: manifest 05-storageclass.yaml: kubectl apply failed"), last
    no_certify_cluster_left()


def test_existing_backend_certifies_an_installed_driver_and_leaves_it(images: Path, tmp_path: Path) -> None:
    """`--backend existing`: no install, no uninstall; the driver is still there afterwards."""
    import secrets

    from pvchaos.clusters.kind import KindBackend, default_gates
    from pvchaos.clusters.request import ClusterDefaults, ClusterRequest
    from pvchaos.clusters.storage import VendorStorage
    from pvchaos.clusters.topology import Topology
    from pvchaos.clusters.vendor_package import load_package
    from pvchaos.tools.versions import DEFAULT_K8S_VERSION

    package = load_package(GOOD)
    defaults = ClusterDefaults(Topology.parse("3", 1), default_gates(DEFAULT_K8S_VERSION), DEFAULT_K8S_VERSION,
                               VendorStorage(package))
    backend = KindBackend.for_request(ClusterRequest(), defaults, cluster=f"certify-ex-{secrets.token_hex(2)}")
    backend.up()  # the kind backend installs the package: images, manifests, registration
    try:
        kubectl = backend.kubectl()
        proc = certify(GOOD, tmp_path / "r", "--backend", "existing", "--kubeconfig", str(backend.kubeconfig),
                       "--context", f"kind-{backend.cluster}", "--suites", "reclaim")
        assert proc.returncode == 1, proc.stderr[-3000:]  # reclaim alone exercises not every capability
        cert = json.loads((tmp_path / "r" / "certification.json").read_text())
        assert cert["backend"] == "existing" and cert["verdict"] == "NOT CERTIFIED", cert["verdict"]
        assert all(r["outcome"] == "passed" for r in cert["rows"]), cert["rows"]
        # no node access: the label, and the report says GetPluginInfo was not called
        assert cert["driver_version"] == "0.1.0" and cert["plugin_name"] == ""
        assert "GetPluginInfo not called" in cert["version_source"], cert["version_source"]
        assert kubectl("get", "csidriver", package.driver_name).returncode == 0, "an existing install was removed"
    finally:
        backend.down()
    no_certify_cluster_left()
